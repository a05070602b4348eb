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

/// An incoming value while the variables are resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AVal {
    Real(Value),
    /// Whatever the load with this result reads.
    Load(Value),
    /// The `+0.0` a `zeros` starts with.
    Zero,
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
            AVal::Load(x)
        } else {
            AVal::Real(x)
        }
    };
    for &b in &order {
        let defs = &mut last_def[b.as_u32() as usize];
        for &inst in func.layout.block_insts(b) {
            match func.dfg.inst(inst) {
                InstData::Zeros { .. } => {
                    let a = func.dfg.first_result(inst);
                    if let Some(&k) = cells.get(&a) {
                        for c in 0..k {
                            defs.insert(var_of[&(a, c)], AVal::Zero);
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
            if ps.len() == 1 {
                path.push(b);
                let p = ps[0].from;
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
    for &(r, var, b) in &entry_reads {
        let v = read_entry(var, b, &mut entry_val, &mut phis, &mut pending);
        load_val.insert(r, v);
    }
    while let Some((id, var)) = pending.pop() {
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

    // Resolve loads, then remove trivial parameters until none is left.
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
    loop {
        let mut changed = false;
        for id in 0..phis.len() {
            if phis[id].replaced.is_some() {
                continue;
            }
            let mut same: Option<AVal> = None;
            let mut trivial = true;
            for &op in &phis[id].operands {
                let op = resolve(op, &phis, &load_val);
                if op == AVal::Phi(id) || Some(op) == same {
                    continue;
                }
                if same.is_some() {
                    trivial = false;
                    break;
                }
                same = Some(op);
            }
            if trivial {
                phis[id].replaced = Some(same.unwrap_or(AVal::Undef));
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }

    // The parameters something reads: from the loads, transitively.
    let mut live = vec![false; phis.len()];
    let mut work: Vec<usize> = Vec::new();
    for &v in load_val.values() {
        if let AVal::Phi(id) = resolve(v, &phis, &load_val) {
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

    // Materialise: one shared +0.0 in the entry block, block parameters for
    // the live phis, then their incoming arguments.
    let zero = {
        let inst = func.dfg.make_inst(
            InstData::FConst {
                bits: 0f64.to_bits(),
            },
            &[Type::F64],
        );
        func.layout.insert_inst(inst, entry, 0);
        func.dfg.first_result(inst)
    };
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
            AVal::Zero | AVal::Undef | AVal::Load(_) => zero,
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
