//! Promotion of small local arrays to SSA values ("mem2reg").
//!
//! A local array `a = zeros K` (`K` an `iconst`, at most [`MAX_CELLS`])
//! whose every use is a `load a, c`, a `store a, c, x` (`c` an `iconst` in
//! `0..K`) or a `fill a, x` is a set of `K` scalar variables. Reverse mode
//! keeps the adjoints that cross reverse blocks in such an array (`adj`),
//! and the iteration numbers of counted loops in another (`trips`), so
//! without this pass every loop-carried adjoint is a load and a store per
//! iteration. The pass rewrites each load to the value it reads, adding
//! block parameters where several definitions meet, and deletes the array,
//! its loads, stores and fills.
//!
//! The construction is Braun et al.'s ("Simple and Efficient Construction
//! of Static Single Assignment Form", CC 2013), demand-driven from the
//! loads, with an explicit worklist instead of recursion, followed by the
//! removal of trivial parameters (all incoming values equal) and of
//! parameters nothing reads.
//!
//! Exactness: a load returns the bits last stored (or filled, or the +0.0
//! of `zeros`), which is what the promoted value is. Nothing traps any
//! more: the indices are constants in range, and the allocation is gone
//! (so a `Limits::max_array_len` below [`MAX_CELLS`] is not enforced on
//! such arrays). Arrays used in unreachable blocks, passed to calls,
//! regions, `len`, `samelen`, returned or stored are left alone.

use crate::analysis::{iconst_of, Cfg};
use adze_ir::{Block, Function, Inst, InstData, Opcode, Type, Value, ValueDef};
use std::collections::HashMap;

/// The largest array promoted.
pub const MAX_CELLS: i64 = 1024;

/// Functions with more instructions than this are left alone: promotion
/// turns memory traffic into long-lived SSA values, and Cranelift's
/// register allocator slows down sharply on very large functions with many
/// values live at once (see `CRANELIFT-NOTES.md`).
pub const MAX_FUNCTION_INSTS: usize = 20_000;

/// The construction may make at most this many parameters per variable
/// and block (plus a little) before it gives up on the function. Ordinary
/// code needs about one per variable (GMM's gradient: 56 for 51
/// variables); a variable that lives through `n` nested loops and is
/// redefined in the innermost (an adjoint slot reset at every loop level
/// of reverse mode's code for deeply nested loops) needs one per level,
/// which is quadratic in `n` (issue #14's nested-loops family).
const PHI_BUDGET_PER_ITEM: usize = 4;

/// An incoming value while the variables are resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AVal {
    Real(Value),
    /// Whatever the load with this result reads.
    Load(Value),
    /// An `fconst` with these bits (the `+0.0` a `zeros` starts with, or a
    /// stored constant): by bits, not by value, so that two stores of
    /// `-0.0` (reverse mode resets an adjoint slot with a fresh `fconst
    /// -0.0` each time) are one definition and a join of them needs no
    /// parameter. Without this, an adjoint slot read in the innermost of
    /// `n` nested loops got a parameter at every enclosing loop header:
    /// quadratic code, and a register allocator in trouble.
    Const(u64),
    /// Read before any definition (only on paths that never reach a load).
    Undef,
    Phi(usize),
}

struct Phi {
    block: Block,
    operands: Vec<AVal>,
    replaced: Option<AVal>,
}

/// An edge into a block: the terminator and the destination number.
#[derive(Clone, Copy)]
struct Edge {
    from: Block,
    inst: Inst,
    dest: usize,
}

/// Promotes every qualifying array of `func`; returns how many.
pub fn promote_arrays(func: &mut Function) -> usize {
    if func.num_placed_insts() > MAX_FUNCTION_INSTS {
        return 0;
    }
    let Some(entry) = func.entry_block() else {
        return 0;
    };
    let order = Cfg::new(func).rpo;
    let mut reachable = vec![false; func.dfg.num_blocks()];
    for &b in &order {
        reachable[b.as_u32() as usize] = true;
    }
    let arrays = candidates(func, &reachable);
    if arrays.is_empty() {
        return 0;
    }
    // Variables: (array, cell) -> number.
    let mut var_of: HashMap<(Value, i64), usize> = HashMap::new();
    let mut cells: HashMap<Value, i64> = HashMap::new();
    for &(a, k) in &arrays {
        cells.insert(a, k);
        for c in 0..k {
            let n = var_of.len();
            var_of.insert((a, c), n);
        }
    }
    // Per block, in order: the definitions and the loads of variables.
    let nb = func.dfg.num_blocks();
    let mut last_def: Vec<HashMap<usize, AVal>> = vec![HashMap::new(); nb];
    // Load result -> its value, for loads after a definition in their block;
    // (var, block) for the others, resolved at the block's entry.
    let mut load_val: HashMap<Value, AVal> = HashMap::new();
    let mut entry_reads: Vec<(Value, usize, Block)> = Vec::new();
    let mut doomed: Vec<Inst> = Vec::new();
    let promoted_load = |func: &Function, v: Value| -> bool {
        match *func.dfg.value_def(v) {
            ValueDef::Result { inst, .. } => matches!(
                func.dfg.inst(inst),
                InstData::Binary { op: Opcode::Load, args: [a, _] } if cells.contains_key(a)
            ),
            _ => false,
        }
    };
    let as_aval = |func: &Function, x: Value| -> AVal {
        if promoted_load(func, x) {
            return AVal::Load(x);
        }
        if let ValueDef::Result { inst, .. } = *func.dfg.value_def(x) {
            if let InstData::FConst { bits } = func.dfg.inst(inst) {
                return AVal::Const(*bits);
            }
        }
        AVal::Real(x)
    };
    for &b in &order {
        let defs = &mut last_def[b.as_u32() as usize];
        for &inst in func.layout.block_insts(b) {
            match func.dfg.inst(inst) {
                InstData::Zeros { .. } => {
                    let a = func.dfg.first_result(inst);
                    if let Some(&k) = cells.get(&a) {
                        for c in 0..k {
                            defs.insert(var_of[&(a, c)], AVal::Const(0f64.to_bits()));
                        }
                        doomed.push(inst);
                    }
                }
                InstData::Binary {
                    op: Opcode::Fill,
                    args: [a, x],
                } if cells.contains_key(a) => {
                    let val = as_aval(func, *x);
                    for c in 0..cells[a] {
                        defs.insert(var_of[&(*a, c)], val);
                    }
                    doomed.push(inst);
                }
                InstData::Ternary {
                    op: Opcode::Store,
                    args: [a, i, x],
                } if cells.contains_key(a) => {
                    let Some(c) = iconst_of(func, *i) else {
                        continue;
                    };
                    defs.insert(var_of[&(*a, c)], as_aval(func, *x));
                    doomed.push(inst);
                }
                InstData::Binary {
                    op: Opcode::Load,
                    args: [a, i],
                } if cells.contains_key(a) => {
                    let Some(c) = iconst_of(func, *i) else {
                        continue;
                    };
                    let var = var_of[&(*a, c)];
                    let r = func.dfg.first_result(inst);
                    match defs.get(&var) {
                        Some(&v) => {
                            load_val.insert(r, v);
                        }
                        None => entry_reads.push((r, var, b)),
                    }
                    doomed.push(inst);
                }
                _ => {}
            }
        }
    }

    // Incoming edges of the reachable blocks.
    let mut preds: Vec<Vec<Edge>> = vec![Vec::new(); nb];
    for &b in &order {
        let Some(t) = func.layout.last_inst(b) else {
            continue;
        };
        for (dest, call) in func.dfg.inst(t).destinations().iter().enumerate() {
            preds[call.block.as_u32() as usize].push(Edge {
                from: b,
                inst: t,
                dest,
            });
        }
    }

    // The natural loops, for the loop headers the walk below can pass: a
    // block's membership is a binary search in its loop's blocks, by
    // position in the reverse postorder.
    let pred_blocks = |b: Block| {
        preds[b.as_u32() as usize]
            .iter()
            .map(|e| e.from)
            .collect::<Vec<_>>()
    };
    let doms = adze_ir::cfg::DominatorTree::new(&order, pred_blocks);
    let mut position = vec![usize::MAX; nb];
    for (k, &b) in order.iter().enumerate() {
        position[b.as_u32() as usize] = k;
    }
    let mut header_loop: HashMap<Block, usize> = HashMap::new();
    let mut bodies: Vec<Vec<usize>> = Vec::new();
    for lp in adze_ir::cfg::natural_loops(pred_blocks, &doms) {
        header_loop.insert(lp.header, bodies.len());
        let mut body: Vec<usize> = lp
            .blocks
            .iter()
            .map(|b| position[b.as_u32() as usize])
            .collect();
        body.sort_unstable();
        bodies.push(body);
    }
    let in_loop = |l: usize, b: Block| {
        bodies[l]
            .binary_search(&position[b.as_u32() as usize])
            .is_ok()
    };
    let mut def_blocks: Vec<Vec<Block>> = vec![Vec::new(); var_of.len()];
    for &b in &order {
        for &var in last_def[b.as_u32() as usize].keys() {
            def_blocks[var].push(b);
        }
    }
    // Demand-driven entry values: (var, block) -> value at the block's entry.
    let mut entry_val: HashMap<(usize, Block), AVal> = HashMap::new();
    let mut phis: Vec<Phi> = Vec::new();
    let mut pending: Vec<(usize, usize)> = Vec::new(); // (phi, var)
    let read_entry = |var: usize,
                      block: Block,
                      entry_val: &mut HashMap<(usize, Block), AVal>,
                      phis: &mut Vec<Phi>,
                      pending: &mut Vec<(usize, usize)>|
     -> AVal {
        // Walk up single-predecessor chains to a definition, a join or the
        // entry; every block on the way gets the value found.
        let mut path = Vec::new();
        let mut b = block;
        let val = loop {
            if let Some(&v) = entry_val.get(&(var, b)) {
                break v;
            }
            let ps = &preds[b.as_u32() as usize];
            // A loop header (some predecessors are back edges) with one
            // edge in, whose loop defines nothing of `var` (no definition
            // is in a block the header dominates), has the value that
            // comes in: the back edges bring it around unchanged. Without
            // this, a variable live across `n` nested loops got a
            // parameter at each header, made and removed again: quadratic
            // work on deep nests.
            let single = match ps.as_slice() {
                [e] => Some(e.from),
                [_, _, ..] => header_loop.get(&b).and_then(|&l| {
                    let mut entries = ps.iter().filter(|e| !in_loop(l, e.from));
                    match (entries.next(), entries.next()) {
                        (Some(e), None) if !def_blocks[var].iter().any(|&d| in_loop(l, d)) => {
                            Some(e.from)
                        }
                        _ => None,
                    }
                }),
                _ => None,
            };
            if let Some(p) = single {
                path.push(b);
                if let Some(&d) = last_def[p.as_u32() as usize].get(&var) {
                    break d;
                }
                b = p;
            } else if ps.is_empty() {
                path.push(b);
                break AVal::Undef;
            } else {
                let id = phis.len();
                phis.push(Phi {
                    block: b,
                    operands: Vec::new(),
                    replaced: None,
                });
                pending.push((id, var));
                entry_val.insert((var, b), AVal::Phi(id));
                break AVal::Phi(id);
            }
        };
        for p in path {
            entry_val.insert((var, p), val);
        }
        val
    };
    // The construction's work is bounded: past the budget, nothing is
    // promoted (the arrays stay in memory; the function is unchanged).
    let budget = PHI_BUDGET_PER_ITEM * (var_of.len() + nb) + 4096;
    let over = |phis: &Vec<Phi>, entry_val: &HashMap<(usize, Block), AVal>| {
        phis.len() > budget || entry_val.len() > 8 * budget
    };
    for &(r, var, b) in &entry_reads {
        let v = read_entry(var, b, &mut entry_val, &mut phis, &mut pending);
        load_val.insert(r, v);
        if over(&phis, &entry_val) {
            return 0;
        }
    }
    while let Some((id, var)) = pending.pop() {
        if over(&phis, &entry_val) {
            return 0;
        }
        let block = phis[id].block;
        let mut ops = Vec::new();
        for e in preds[block.as_u32() as usize].clone() {
            let v = match last_def[e.from.as_u32() as usize].get(&var) {
                Some(&d) => d,
                None => read_entry(var, e.from, &mut entry_val, &mut phis, &mut pending),
            };
            ops.push(v);
        }
        phis[id].operands = ops;
    }

    // Resolve loads, then remove the parameters that are one value: trivial
    // ones (every incoming value the same) and redundant cycles of them.
    let resolve = |v: AVal, phis: &[Phi], load_val: &HashMap<Value, AVal>| -> AVal {
        let mut v = v;
        loop {
            v = match v {
                AVal::Load(r) => match load_val.get(&r) {
                    Some(&w) => w,
                    None => return AVal::Undef,
                },
                AVal::Phi(id) => match phis[id].replaced {
                    Some(w) => w,
                    None => return v,
                },
                other => return other,
            };
        }
    };
    remove_redundant_sccs(&mut phis, |v, phis| resolve(v, phis, &load_val));

    // The parameters something reads: from the loads whose results are
    // used by code that stays, transitively. (A load nothing reads, such
    // as reverse mode's reading of an adjoint slot that no term needs,
    // would otherwise keep a parameter at every loop header on its way.)
    let doomed_set: std::collections::HashSet<Inst> = doomed.iter().copied().collect();
    let mut used: Vec<Value> = Vec::new();
    for (_, inst) in func.layout.insts() {
        if doomed_set.contains(&inst) {
            continue;
        }
        func.dfg.inst(inst).for_each_use(|v| {
            if load_val.contains_key(&v) {
                used.push(v);
            }
        });
    }
    for region in func.regions.values() {
        for v in region.args.iter().chain(&region.results) {
            if load_val.contains_key(v) {
                used.push(*v);
            }
        }
    }
    let mut live = vec![false; phis.len()];
    let mut work: Vec<usize> = Vec::new();
    for r in used {
        if let AVal::Phi(id) = resolve(AVal::Load(r), &phis, &load_val) {
            work.push(id);
        }
    }
    while let Some(id) = work.pop() {
        if live[id] {
            continue;
        }
        live[id] = true;
        for &op in &phis[id].operands {
            if let AVal::Phi(o) = resolve(op, &phis, &load_val) {
                work.push(o);
            }
        }
    }

    // Materialise: one shared `fconst` per constant in the entry block (a
    // +0.0 for what is never defined), block parameters for the live phis,
    // then their incoming arguments.
    let mut consts: Vec<u64> = vec![0f64.to_bits()];
    for &v in load_val.values() {
        if let AVal::Const(bits) = resolve(v, &phis, &load_val) {
            consts.push(bits);
        }
    }
    for (id, phi) in phis.iter().enumerate() {
        if live[id] {
            for &op in &phi.operands {
                if let AVal::Const(bits) = resolve(op, &phis, &load_val) {
                    consts.push(bits);
                }
            }
        }
    }
    consts.sort_unstable();
    consts.dedup();
    let mut const_value: HashMap<u64, Value> = HashMap::new();
    for &bits in consts.iter().rev() {
        let inst = func.dfg.make_inst(InstData::FConst { bits }, &[Type::F64]);
        func.layout.insert_inst(inst, entry, 0);
        const_value.insert(bits, func.dfg.first_result(inst));
    }
    let zero = const_value[&0f64.to_bits()];
    let mut param: Vec<Option<Value>> = vec![None; phis.len()];
    for id in 0..phis.len() {
        if live[id] {
            param[id] = Some(func.dfg.append_block_param(phis[id].block, Type::F64));
        }
    }
    let value = |v: AVal, phis: &[Phi], param: &[Option<Value>]| -> Value {
        match resolve(v, phis, &load_val) {
            AVal::Real(x) => x,
            AVal::Phi(id) => param[id].unwrap_or(zero),
            AVal::Const(bits) => const_value.get(&bits).copied().unwrap_or(zero),
            AVal::Undef | AVal::Load(_) => zero,
        }
    };
    for id in 0..phis.len() {
        if !live[id] {
            continue;
        }
        let edges = preds[phis[id].block.as_u32() as usize].clone();
        for (e, &op) in edges.iter().zip(&phis[id].operands) {
            let v = value(op, &phis, &param);
            let mut data = func.dfg.inst(e.inst).clone();
            if let Some(d) = data.destinations_mut().into_iter().nth(e.dest) {
                d.args.push(v);
            }
            *func.dfg.inst_mut(e.inst) = data;
        }
    }

    // Every use of a load's result reads the promoted value instead.
    let subst: HashMap<Value, Value> = load_val
        .keys()
        .map(|&r| (r, value(AVal::Load(r), &phis, &param)))
        .collect();
    for inst in doomed {
        func.layout.remove_inst(inst);
    }
    let placed: Vec<Inst> = func.layout.insts().map(|(_, i)| i).collect();
    for inst in placed {
        func.dfg
            .inst_mut(inst)
            .map_uses(|v| subst.get(&v).copied().unwrap_or(v));
    }
    for region in func.regions.values_mut() {
        for v in region.args.iter_mut().chain(region.results.iter_mut()) {
            if let Some(&w) = subst.get(v) {
                *v = w;
            }
        }
    }
    arrays.len()
}

/// Braun et al.'s removal of redundant phi SCCs (their Algorithm 5, one
/// level): a strongly connected set of phis whose operands from outside
/// the set are all one value is that value. Trivial-phi removal alone
/// cannot see it: around nested loops, the phis of one variable at two
/// loop headers can take each other and one constant (an adjoint slot
/// reset to `-0.0` everywhere), each with two distinct operands. Left in
/// place, an adjoint slot of the innermost of `n` nested loops became a
/// parameter at every enclosing header: quadratic code. Tarjan's algorithm,
/// iterative (nests can be deep), emits an SCC after every SCC it reaches,
/// so the operands from outside are final when an SCC is looked at.
fn remove_redundant_sccs(phis: &mut [Phi], resolve: impl Fn(AVal, &[Phi]) -> AVal) {
    let n = phis.len();
    let succs: Vec<Vec<usize>> = (0..n)
        .map(|id| {
            if phis[id].replaced.is_some() {
                return Vec::new();
            }
            phis[id]
                .operands
                .iter()
                .filter_map(|&op| match resolve(op, phis) {
                    AVal::Phi(o) if o != id => Some(o),
                    _ => None,
                })
                .collect()
        })
        .collect();
    const NONE: usize = usize::MAX;
    let mut index = vec![NONE; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut in_scc = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut next = 0usize;
    for root in 0..n {
        if index[root] != NONE || phis[root].replaced.is_some() {
            continue;
        }
        // (node, next successor to visit)
        let mut call: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut k)) = call.last_mut() {
            if let Some(&w) = succs[v].get(*k) {
                *k += 1;
                if index[w] == NONE {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    call.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            call.pop();
            if let Some(&(u, _)) = call.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] != index[v] {
                continue;
            }
            let mut scc = Vec::new();
            while let Some(w) = stack.pop() {
                on_stack[w] = false;
                scc.push(w);
                if w == v {
                    break;
                }
            }
            for &m in &scc {
                in_scc[m] = true;
            }
            let mut outer: Option<AVal> = None;
            let mut redundant = true;
            'members: for &m in &scc {
                for &op in &phis[m].operands {
                    let op = resolve(op, phis);
                    if matches!(op, AVal::Phi(o) if in_scc[o]) || Some(op) == outer {
                        continue;
                    }
                    if outer.is_some() {
                        redundant = false;
                        break 'members;
                    }
                    outer = Some(op);
                }
            }
            for &m in &scc {
                in_scc[m] = false;
                if redundant {
                    phis[m].replaced = Some(outer.unwrap_or(AVal::Undef));
                }
            }
        }
    }
}

/// The arrays that qualify, with their lengths.
fn candidates(func: &Function, reachable: &[bool]) -> Vec<(Value, i64)> {
    let konst = |v: Value| iconst_of(func, v);
    let mut ok: HashMap<Value, i64> = HashMap::new();
    let mut order: Vec<Value> = Vec::new();
    for (b, inst) in func.layout.insts() {
        if let InstData::Zeros { len, .. } = func.dfg.inst(inst) {
            if !reachable[b.as_u32() as usize] {
                continue;
            }
            if let Some(k) = konst(*len).filter(|k| (0..=MAX_CELLS).contains(k)) {
                let a = func.dfg.first_result(inst);
                ok.insert(a, k);
                order.push(a);
            }
        }
    }
    if ok.is_empty() {
        return Vec::new();
    }
    let mut bad: Vec<Value> = Vec::new();
    for (b, inst) in func.layout.insts() {
        let data = func.dfg.inst(inst);
        let in_range = |a: &Value, i: &Value| konst(*i).is_some_and(|c| c >= 0 && c < ok[a]);
        let fine = match data {
            InstData::Binary {
                op: Opcode::Load,
                args: [a, i],
            } if ok.contains_key(a) => in_range(a, i) && !ok.contains_key(i),
            InstData::Ternary {
                op: Opcode::Store,
                args: [a, i, x],
            } if ok.contains_key(a) => in_range(a, i) && !ok.contains_key(x),
            InstData::Binary {
                op: Opcode::Fill,
                args: [a, x],
            } if ok.contains_key(a) => !ok.contains_key(x),
            InstData::Zeros { .. } => true,
            _ => {
                data.for_each_use(|v| {
                    if ok.contains_key(&v) {
                        bad.push(v);
                    }
                });
                true
            }
        };
        if !fine || (!reachable[b.as_u32() as usize] && uses_any(data, &ok)) {
            data.for_each_use(|v| {
                if ok.contains_key(&v) {
                    bad.push(v);
                }
            });
        }
    }
    for region in func.regions.values() {
        for v in region.args.iter().chain(&region.results) {
            if ok.contains_key(v) {
                bad.push(*v);
            }
        }
    }
    order
        .into_iter()
        .filter(|a| !bad.contains(a))
        .map(|a| (a, ok[&a]))
        .collect()
}

fn uses_any(data: &InstData, set: &HashMap<Value, i64>) -> bool {
    let mut any = false;
    data.for_each_use(|v| any |= set.contains_key(&v));
    any
}
