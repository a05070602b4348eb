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
use adze_ir::cfg::{Loop, LoopForest};
use adze_ir::{Block, Function, Inst, InstData, Opcode, Type, Value, ValueDef};
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::{EntitySet, SecondaryMap};
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
///
/// The phases: the arrays that qualify ([`candidates`]), their cells
/// numbered as variables ([`Vars`]), a scan of each block's definitions
/// and loads ([`scan_blocks`]), the incoming edges and loops
/// ([`Flow`]), the demand-driven construction of the parameters
/// ([`construct`]), the removal of redundant ones
/// ([`remove_redundant_sccs`]) and of those nothing reads
/// ([`live_phis`]), and the rewrite of the function ([`materialise`],
/// [`rewrite_uses`]).
pub fn promote_arrays(func: &mut Function) -> usize {
    if func.num_placed_insts() > MAX_FUNCTION_INSTS {
        return 0;
    }
    let Some(entry) = func.entry_block() else {
        return 0;
    };
    let order = Cfg::new(func).rpo;
    let mut reachable = EntitySet::new();
    for &b in &order {
        reachable.insert(b);
    }
    let arrays = candidates(func, &reachable);
    if arrays.is_empty() {
        return 0;
    }
    let vars = Vars::new(&arrays);
    let mut scan = scan_blocks(func, &order, &vars);
    let flow = Flow::new(func, &order);
    let Some(mut phis) = construct(func, &order, &vars, &mut scan, &flow) else {
        return 0;
    };
    // Remove the parameters that are one value: trivial ones (every
    // incoming value the same) and redundant cycles of them.
    remove_redundant_sccs(&mut phis, |v, phis| resolve(v, phis, &scan.load_val));
    let live = live_phis(func, &scan, &phis);
    let subst = materialise(func, entry, &reachable, &scan, &flow, &phis, &live);
    rewrite_uses(func, &scan.doomed, &subst);
    arrays.len()
}

/// The variables: cell `c` of a promoted array `a` of `k` cells is
/// variable `first + c`, where `cells[a] = Some((first, k))`.
struct Vars {
    cells: SecondaryMap<Value, Option<(usize, i64)>>,
    count: usize,
}

impl Vars {
    fn new(arrays: &[(Value, i64)]) -> Vars {
        let mut vars = Vars {
            cells: SecondaryMap::new(),
            count: 0,
        };
        for &(a, k) in arrays {
            vars.cells[a] = Some((vars.count, k));
            vars.count += k as usize;
        }
        vars
    }

    /// Is `a` a promoted array?
    fn is_promoted(&self, a: Value) -> bool {
        self.cells[a].is_some()
    }

    /// The number of cells of the promoted array `a`.
    fn len(&self, a: Value) -> i64 {
        self.cells[a].expect("a promoted array").1
    }

    /// The variable of cell `c` of the promoted array `a`.
    fn var(&self, a: Value, c: i64) -> usize {
        let (first, k) = self.cells[a].expect("a promoted array");
        assert!((0..k).contains(&c), "cell {c} of {a} out of range");
        first + c as usize
    }
}

/// What [`scan_blocks`] finds.
struct Scan {
    /// Per block, the last definition of each variable it defines (keyed
    /// by variable number, not an entity: a block defines few of them).
    last_def: SecondaryMap<Block, HashMap<usize, AVal>>,
    /// Load result -> its value: for loads after a definition in their
    /// block at once, for the others when [`construct`] has resolved them.
    load_val: SecondaryMap<Value, Option<AVal>>,
    /// The results of the promoted loads, in layout order.
    loads: Vec<Value>,
    /// The loads read at their block's entry: (result, var, block).
    entry_reads: Vec<(Value, usize, Block)>,
    /// The `zeros`, loads, stores and fills that go.
    doomed: Vec<Inst>,
}

/// The definitions and the loads of variables, per block, in order.
fn scan_blocks(func: &Function, order: &[Block], vars: &Vars) -> Scan {
    let mut scan = Scan {
        last_def: SecondaryMap::with_capacity(func.dfg.num_blocks()),
        load_val: SecondaryMap::with_capacity(func.dfg.num_values()),
        loads: Vec::new(),
        entry_reads: Vec::new(),
        doomed: Vec::new(),
    };
    let promoted_load = |v: Value| -> bool {
        match *func.dfg.value_def(v) {
            ValueDef::Result { inst, .. } => matches!(
                func.dfg.inst(inst),
                InstData::Binary { op: Opcode::Load, args: [a, _] } if vars.is_promoted(*a)
            ),
            _ => false,
        }
    };
    let as_aval = |x: Value| -> AVal {
        if promoted_load(x) {
            return AVal::Load(x);
        }
        if let ValueDef::Result { inst, .. } = *func.dfg.value_def(x) {
            if let InstData::FConst { bits } = func.dfg.inst(inst) {
                return AVal::Const(*bits);
            }
        }
        AVal::Real(x)
    };
    for &b in order {
        let defs = &mut scan.last_def[b];
        for &inst in func.layout.block_insts(b) {
            match func.dfg.inst(inst) {
                InstData::Zeros { .. } => {
                    let a = func.dfg.first_result(inst);
                    if vars.is_promoted(a) {
                        for c in 0..vars.len(a) {
                            defs.insert(vars.var(a, c), AVal::Const(0f64.to_bits()));
                        }
                        scan.doomed.push(inst);
                    }
                }
                InstData::Binary {
                    op: Opcode::Fill,
                    args: [a, x],
                } if vars.is_promoted(*a) => {
                    let val = as_aval(*x);
                    for c in 0..vars.len(*a) {
                        defs.insert(vars.var(*a, c), val);
                    }
                    scan.doomed.push(inst);
                }
                InstData::Ternary {
                    op: Opcode::Store,
                    args: [a, i, x],
                } if vars.is_promoted(*a) => {
                    let Some(c) = iconst_of(func, *i) else {
                        continue;
                    };
                    defs.insert(vars.var(*a, c), as_aval(*x));
                    scan.doomed.push(inst);
                }
                InstData::Binary {
                    op: Opcode::Load,
                    args: [a, i],
                } if vars.is_promoted(*a) => {
                    let Some(c) = iconst_of(func, *i) else {
                        continue;
                    };
                    let var = vars.var(*a, c);
                    let r = func.dfg.first_result(inst);
                    scan.loads.push(r);
                    match defs.get(&var) {
                        Some(&v) => scan.load_val[r] = Some(v),
                        None => scan.entry_reads.push((r, var, b)),
                    }
                    scan.doomed.push(inst);
                }
                _ => {}
            }
        }
    }
    scan
}

/// The incoming edges of the reachable blocks, and the loop-nesting forest,
/// for the loop headers [`Construction::read_entry`] can pass.
struct Flow {
    preds: SecondaryMap<Block, Vec<Edge>>,
    /// The loop a header heads.
    header_loop: SecondaryMap<Block, PackedOption<Loop>>,
    loops: LoopForest,
}

impl Flow {
    fn new(func: &Function, order: &[Block]) -> Flow {
        let nb = func.dfg.num_blocks();
        let mut preds: SecondaryMap<Block, Vec<Edge>> = SecondaryMap::with_capacity(nb);
        for &b in order {
            let Some(t) = func.layout.last_inst(b) else {
                continue;
            };
            for (dest, call) in func.dfg.inst(t).destinations().iter().enumerate() {
                preds[call.block].push(Edge {
                    from: b,
                    inst: t,
                    dest,
                });
            }
        }
        let pred_blocks = |b: Block| preds[b].iter().map(|e| e.from);
        let doms = adze_ir::cfg::DominatorTree::new(order, pred_blocks);
        let loops = LoopForest::new(pred_blocks, &doms);
        let mut header_loop = SecondaryMap::with_capacity(nb);
        for l in loops.loops() {
            header_loop[loops.header(l)] = l.into();
        }
        Flow {
            preds,
            header_loop,
            loops,
        }
    }

    fn in_loop(&self, l: Loop, b: Block) -> bool {
        self.loops.contains(l, b)
    }
}

/// The demand-driven construction's state.
struct Construction<'a> {
    flow: &'a Flow,
    last_def: &'a SecondaryMap<Block, HashMap<usize, AVal>>,
    /// Per variable, the blocks that define it.
    def_blocks: Vec<Vec<Block>>,
    /// Per block, the value of each variable at its entry found so far
    /// (keyed by variable number: sparse, few per block).
    entry_val: SecondaryMap<Block, HashMap<usize, AVal>>,
    /// The number of entries of `entry_val`.
    entry_vals: usize,
    phis: Vec<Phi>,
    /// (phi, var) whose operands are still to be found.
    pending: Vec<(usize, usize)>,
}

impl Construction<'_> {
    fn set_entry(&mut self, var: usize, b: Block, val: AVal) {
        if self.entry_val[b].insert(var, val).is_none() {
            self.entry_vals += 1;
        }
    }

    /// The value of `var` at the entry of `block`.
    fn read_entry(&mut self, var: usize, block: Block) -> AVal {
        // Walk up single-predecessor chains to a definition, a join or the
        // entry; every block on the way gets the value found.
        let flow = self.flow;
        let mut path = Vec::new();
        let mut b = block;
        let val = loop {
            if let Some(&v) = self.entry_val[b].get(&var) {
                break v;
            }
            let ps = &flow.preds[b];
            // A loop header (some predecessors are back edges) with one
            // edge in, whose loop defines nothing of `var` (no definition
            // is in a block the header dominates), has the value that
            // comes in: the back edges bring it around unchanged. Without
            // this, a variable live across `n` nested loops got a
            // parameter at each header, made and removed again: quadratic
            // work on deep nests.
            let single = match ps.as_slice() {
                [e] => Some(e.from),
                [_, _, ..] => flow.header_loop[b].expand().and_then(|l| {
                    let mut entries = ps.iter().filter(|e| !flow.in_loop(l, e.from));
                    match (entries.next(), entries.next()) {
                        (Some(e), None)
                            if !self.def_blocks[var].iter().any(|&d| flow.in_loop(l, d)) =>
                        {
                            Some(e.from)
                        }
                        _ => None,
                    }
                }),
                _ => None,
            };
            if let Some(p) = single {
                path.push(b);
                if let Some(&d) = self.last_def[p].get(&var) {
                    break d;
                }
                b = p;
            } else if ps.is_empty() {
                path.push(b);
                break AVal::Undef;
            } else {
                let id = self.phis.len();
                self.phis.push(Phi {
                    block: b,
                    operands: Vec::new(),
                    replaced: None,
                });
                self.pending.push((id, var));
                self.set_entry(var, b, AVal::Phi(id));
                break AVal::Phi(id);
            }
        };
        for p in path {
            self.set_entry(var, p, val);
        }
        val
    }
}

/// Resolves the loads read at their block's entry, making parameters
/// where definitions meet, and finds every parameter's operands. `None`
/// when the construction's work passes its budget: then nothing is
/// promoted (the arrays stay in memory; the function is unchanged).
fn construct(
    func: &Function,
    order: &[Block],
    vars: &Vars,
    scan: &mut Scan,
    flow: &Flow,
) -> Option<Vec<Phi>> {
    let mut def_blocks: Vec<Vec<Block>> = vec![Vec::new(); vars.count];
    for &b in order {
        for &var in scan.last_def[b].keys() {
            def_blocks[var].push(b);
        }
    }
    let mut c = Construction {
        flow,
        last_def: &scan.last_def,
        def_blocks,
        entry_val: SecondaryMap::with_capacity(func.dfg.num_blocks()),
        entry_vals: 0,
        phis: Vec::new(),
        pending: Vec::new(),
    };
    let budget = PHI_BUDGET_PER_ITEM * (vars.count + func.dfg.num_blocks()) + 4096;
    let over = |c: &Construction<'_>| c.phis.len() > budget || c.entry_vals > 8 * budget;
    let mut read: Vec<(Value, AVal)> = Vec::new();
    for &(r, var, b) in &scan.entry_reads {
        read.push((r, c.read_entry(var, b)));
        if over(&c) {
            return None;
        }
    }
    while let Some((id, var)) = c.pending.pop() {
        if over(&c) {
            return None;
        }
        let block = c.phis[id].block;
        let mut ops = Vec::new();
        for e in flow.preds[block].clone() {
            let v = match c.last_def[e.from].get(&var) {
                Some(&d) => d,
                None => c.read_entry(var, e.from),
            };
            ops.push(v);
        }
        c.phis[id].operands = ops;
    }
    let phis = c.phis;
    for (r, v) in read {
        scan.load_val[r] = Some(v);
    }
    Some(phis)
}

/// What `v` stands for: a load's value, a parameter's replacement, followed
/// to the end.
fn resolve(v: AVal, phis: &[Phi], load_val: &SecondaryMap<Value, Option<AVal>>) -> AVal {
    let mut v = v;
    loop {
        v = match v {
            AVal::Load(r) => match load_val[r] {
                Some(w) => w,
                None => return AVal::Undef,
            },
            AVal::Phi(id) => match phis[id].replaced {
                Some(w) => w,
                None => return v,
            },
            other => return other,
        };
    }
}

/// The parameters something reads: from the loads whose results are used
/// by code that stays, transitively. (A load nothing reads, such as
/// reverse mode's reading of an adjoint slot that no term needs, would
/// otherwise keep a parameter at every loop header on its way.)
fn live_phis(func: &Function, scan: &Scan, phis: &[Phi]) -> Vec<bool> {
    let load_val = &scan.load_val;
    let mut doomed_set = EntitySet::new();
    for &inst in &scan.doomed {
        doomed_set.insert(inst);
    }
    let mut used: Vec<Value> = Vec::new();
    for (_, inst) in func.layout.insts() {
        if doomed_set.contains(inst) {
            continue;
        }
        func.dfg.inst(inst).for_each_use(|v| {
            if load_val[v].is_some() {
                used.push(v);
            }
        });
    }
    for region in func.regions.values() {
        for &v in region.args.iter().chain(&region.results) {
            if load_val[v].is_some() {
                used.push(v);
            }
        }
    }
    let mut live = vec![false; phis.len()];
    let mut work: Vec<usize> = Vec::new();
    for r in used {
        if let AVal::Phi(id) = resolve(AVal::Load(r), phis, load_val) {
            work.push(id);
        }
    }
    while let Some(id) = work.pop() {
        if live[id] {
            continue;
        }
        live[id] = true;
        for &op in &phis[id].operands {
            if let AVal::Phi(o) = resolve(op, phis, load_val) {
                work.push(o);
            }
        }
    }
    live
}

/// Materialises the promoted values: one shared `fconst` per constant in
/// the entry block (a +0.0 for what is never defined), block parameters
/// for the live phis, then their incoming arguments. Returns the value
/// that stands for each load's result.
fn materialise(
    func: &mut Function,
    entry: Block,
    reachable: &EntitySet<Block>,
    scan: &Scan,
    flow: &Flow,
    phis: &[Phi],
    live: &[bool],
) -> SecondaryMap<Value, Option<Value>> {
    let load_val = &scan.load_val;
    let mut consts: Vec<u64> = vec![0f64.to_bits()];
    for &r in &scan.loads {
        if let Some(v) = load_val[r] {
            if let AVal::Const(bits) = resolve(v, phis, load_val) {
                consts.push(bits);
            }
        }
    }
    for (id, phi) in phis.iter().enumerate() {
        if live[id] {
            for &op in &phi.operands {
                if let AVal::Const(bits) = resolve(op, phis, load_val) {
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
    let value = |v: AVal| -> Value {
        match resolve(v, phis, load_val) {
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
        for (e, &op) in flow.preds[phis[id].block].iter().zip(&phis[id].operands) {
            let v = value(op);
            let mut data = func.dfg.inst(e.inst).clone();
            if let Some(d) = data.destinations_mut().into_iter().nth(e.dest) {
                d.args.push(v);
            }
            *func.dfg.inst_mut(e.inst) = data;
        }
    }
    // Unreachable blocks (kept by a region, or left by folding until the
    // next `dce`) may still jump to a block that got parameters: they pass
    // 0.0, in the order the parameters were added (found by checkpointed
    // derivatives, whose runner called with a constant `stop` folds to a
    // dead loop).
    let unreachable: Vec<Block> = func
        .layout
        .blocks()
        .iter()
        .copied()
        .filter(|&b| !reachable.contains(b))
        .collect();
    for u in unreachable {
        let Some(t) = func.layout.last_inst(u) else {
            continue;
        };
        let mut data = func.dfg.inst(t).clone();
        for d in data.destinations_mut() {
            for (id, phi) in phis.iter().enumerate() {
                if live[id] && phi.block == d.block {
                    d.args.push(zero);
                }
            }
        }
        *func.dfg.inst_mut(t) = data;
    }
    let mut subst = SecondaryMap::with_capacity(func.dfg.num_values());
    for &r in &scan.loads {
        subst[r] = Some(value(AVal::Load(r)));
    }
    subst
}

/// Removes the doomed instructions; every use of a load's result reads the
/// promoted value instead.
fn rewrite_uses(func: &mut Function, doomed: &[Inst], subst: &SecondaryMap<Value, Option<Value>>) {
    for &inst in doomed {
        func.layout.remove_inst(inst);
    }
    let placed: Vec<Inst> = func.layout.insts().map(|(_, i)| i).collect();
    for inst in placed {
        func.dfg.inst_mut(inst).map_uses(|v| subst[v].unwrap_or(v));
    }
    for region in func.regions.values_mut() {
        for v in region.args.iter_mut().chain(region.results.iter_mut()) {
            if let Some(w) = subst[*v] {
                *v = w;
            }
        }
    }
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
fn candidates(func: &Function, reachable: &EntitySet<Block>) -> Vec<(Value, i64)> {
    let konst = |v: Value| iconst_of(func, v);
    // The `zeros` of a constant length in range: array -> length.
    let mut ok: SecondaryMap<Value, Option<i64>> = SecondaryMap::new();
    let mut order: Vec<Value> = Vec::new();
    for (b, inst) in func.layout.insts() {
        // Only f64 arrays: an `izeros` array keeps its memory.
        if let InstData::Zeros {
            op: Opcode::Zeros,
            len,
            ..
        } = func.dfg.inst(inst)
        {
            if !reachable.contains(b) {
                continue;
            }
            if let Some(k) = konst(*len).filter(|k| (0..=MAX_CELLS).contains(k)) {
                let a = func.dfg.first_result(inst);
                ok[a] = Some(k);
                order.push(a);
            }
        }
    }
    if order.is_empty() {
        return Vec::new();
    }
    let is_ok = |v: Value| ok[v].is_some();
    let mut bad: Vec<Value> = Vec::new();
    for (b, inst) in func.layout.insts() {
        let data = func.dfg.inst(inst);
        let in_range = |a: Value, i: Value| {
            konst(i).is_some_and(|c| c >= 0 && c < ok[a].expect("a candidate"))
        };
        let fine = match data {
            InstData::Binary {
                op: Opcode::Load,
                args: [a, i],
            } if is_ok(*a) => in_range(*a, *i) && !is_ok(*i),
            InstData::Ternary {
                op: Opcode::Store,
                args: [a, i, x],
            } if is_ok(*a) => in_range(*a, *i) && !is_ok(*x),
            InstData::Binary {
                op: Opcode::Fill,
                args: [a, x],
            } if is_ok(*a) => !is_ok(*x),
            InstData::Zeros { .. } => true,
            _ => {
                data.for_each_use(|v| {
                    if is_ok(v) {
                        bad.push(v);
                    }
                });
                true
            }
        };
        if !fine || (!reachable.contains(b) && uses_any(data, &is_ok)) {
            data.for_each_use(|v| {
                if is_ok(v) {
                    bad.push(v);
                }
            });
        }
    }
    for region in func.regions.values() {
        for &v in region.args.iter().chain(&region.results) {
            if is_ok(v) {
                bad.push(v);
            }
        }
    }
    order
        .into_iter()
        .filter(|a| !bad.contains(a))
        .map(|a| (a, ok[a].expect("a candidate")))
        .collect()
}

fn uses_any(data: &InstData, is_in: &impl Fn(Value) -> bool) -> bool {
    let mut any = false;
    data.for_each_use(|v| any |= is_in(v));
    any
}
