//! Loop-carried loads: an innermost loop that reads (and writes) one array
//! element at a loop-invariant index gets its first iteration peeled, and the
//! later iterations take the element from a block parameter instead of
//! memory.
//!
//! ```text
//! block1(v4: i64):                          block1'(v4': i64):      ; peeled
//!     brif .., block3, block2                   brif .., block3(..), block2'
//! block2:                                   block2':
//!     v7 = load v0, v1        ; v1 fixed        v7' = load v0, v1
//!     v8 = fadd v7, ..                          v8' = fadd v7', ..
//!     store v0, v1, v8                          store v0, v1, v8'
//!     jump block1(v9)                           jump block1(v9', v8')
//!                                           block1(v4: i64, acc: f64):
//!                                               brif .., block3(..), block2
//!                                           block2:
//!                                               v8 = fadd acc, ..   ; no load
//!                                               store v0, v1, v8
//!                                               jump block1(v9, v8)
//! ```
//!
//! Reverse mode makes this shape wherever the primal reads an element at a
//! fixed index in an inner loop: GMM's `qx[j] += icf[li] * xc[i]` becomes,
//! in the adjoint, `xc.d[i] += ..` in every iteration of the `j` loop. Left
//! in memory, each iteration's load waits for the previous iteration's store
//! (store-to-load forwarding, then the `fadd`), a chain that bounds the
//! loop's speed; carried in a register, only the `fadd` remains on it.
//!
//! **Exact.** Peeling changes nothing: the peeled copy is the loop's first
//! iteration, with the same instructions in the same order, and it jumps to
//! the loop's header as the back edge did. In the remaining iterations the
//! load is replaced by the value the element holds at that point: the stored
//! value of the iteration before, because nothing else in the loop may write
//! it (every
//! store to an array that may alias it is that one store, at the same index
//! value; no `fill` of such an array; no call). The load removed could not
//! trap: the same load, of the same array at the same index, succeeded in the
//! first iteration, and arrays do not change length. So every result bit,
//! every trap and every effect stays where it was; the stores stay too
//! (but for a local array's, below).
//!
//! **Which loops.** Innermost natural loops outside rule regions, of at most
//! [`MAX_PEEL_INSTS`] instructions, entered from one preheader by a `jump`,
//! with one latch and one exit, from the header, to a block the header alone
//! branches to; with no `call` or `autodiff`. A candidate load `x = load a,
//! c` has `a` and `c` defined outside the loop and its block dominates the
//! latch; only the loop reads `x` (no code after it, no region's
//! interface); it is the loop's only load of `a` at `c`; the loop stores to `a` at
//! `c` at most once, after the load and in a block that dominates the latch
//! (so at the back edge the element holds that store's value). Values the
//! header defines and code after the loop reads are merged at the exit block
//! (new parameters), since the exit now has two predecessors.

use crate::analysis::{Cfg, Scopes};
use crate::copy::{
    add_arg, copy_loop, loop_shape, merge_at_exit, replace_in_block, BackEdges, LoopCopy, LoopShape,
};
use adze_ir::cfg::DominatorTree;
use adze_ir::{Block, BlockCall, Function, Inst, InstData, Opcode, Type, Value};
use std::collections::HashSet;

/// The largest loop (in instructions) that is peeled.
pub const MAX_PEEL_INSTS: usize = 200;

/// Functions above this many instructions are left alone (as `promote`:
/// carried values are long-lived SSA values, where Cranelift's register
/// allocator has its cliffs).
const MAX_FUNCTION_INSTS: usize = 20_000;

/// What the pass did to one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CarryStats {
    /// Loops peeled.
    pub loops: usize,
    /// Loads replaced by a carried value.
    pub loads: usize,
}

/// One loop to peel.
struct Plan {
    header: Block,
    latch: Block,
    preheader: Block,
    exit: Block,
    /// The loop's blocks, header first, in reverse postorder.
    body: Vec<Block>,
    carried: Vec<Carried>,
}

/// A load the loop's later iterations no longer execute.
struct Carried {
    load: Inst,
    /// The value the element holds at the back edge: the value the loop
    /// stores to it.
    back: Value,
    /// The loop's store to the element, when it can wait for the loop's
    /// exit: the array is local (`zeros`: no caller sees it, even after a
    /// trap) and the loop reads no other element of it.
    sink: Option<Inst>,
}

/// Peels the loops with loop-carried loads (see the module documentation).
pub fn carry_loads(func: &mut Function) -> CarryStats {
    let mut stats = CarryStats::default();
    if func.num_placed_insts() > MAX_FUNCTION_INSTS {
        return stats;
    }
    let cfg = Cfg::new(func);
    let doms = cfg.dominators();
    let scopes = Scopes::new(func);
    let plans: Vec<Plan> = cfg
        .innermost_loops(&doms)
        .iter()
        .filter_map(|lp| plan(func, &cfg, &doms, &scopes, lp.header, &lp.blocks))
        .collect();
    for p in plans {
        stats.loops += 1;
        stats.loads += p.carried.len();
        peel(func, &p);
    }
    stats
}

fn plan(
    func: &Function,
    cfg: &Cfg,
    doms: &DominatorTree,
    scopes: &Scopes,
    header: Block,
    body: &[Block],
) -> Option<Plan> {
    let in_loop = |b: Block| body.contains(&b);
    let LoopShape {
        latch,
        preheader,
        exit,
    } = loop_shape(func, cfg, scopes, header, body, MAX_PEEL_INSTS)?;

    // What the loop reads and writes.
    let mut loads: Vec<Inst> = Vec::new();
    let mut stores: Vec<Inst> = Vec::new();
    let mut fills: Vec<Value> = Vec::new();
    for &b in body {
        for &inst in func.layout.block_insts(b) {
            match func.dfg.inst(inst) {
                InstData::Call { .. } | InstData::Autodiff { .. } => return None,
                InstData::Binary {
                    op: Opcode::Load, ..
                } => loads.push(inst),
                InstData::Binary {
                    op: Opcode::Fill,
                    args: [a, _],
                } => fills.push(*a),
                InstData::Ternary {
                    op: Opcode::Store, ..
                } => stores.push(inst),
                _ => {}
            }
        }
    }
    let outside_loop = |v: Value| func.def_block(v).is_some_and(|d| !in_loop(d));
    let position = |inst: Inst| {
        let b = func.layout.inst_block(inst)?;
        let at = func.layout.block_insts(b).iter().position(|&i| i == inst)?;
        Some((b, at))
    };
    let mut carried = Vec::new();
    for &ld in &loads {
        let InstData::Binary { args: [a, c], .. } = *func.dfg.inst(ld) else {
            continue;
        };
        if !outside_loop(a) || !outside_loop(c) || func.dfg.value_type(c) != Type::I64 {
            continue;
        }
        let same = |inst: Inst| func.dfg.inst(inst).args()[..2] == [a, c];
        if loads.iter().filter(|&&l| same(l)).count() != 1
            || fills.iter().any(|&f| crate::mem::may_alias(func, a, f))
        {
            continue;
        }
        let writes: Vec<Inst> = stores
            .iter()
            .copied()
            .filter(|&s| crate::mem::may_alias(func, a, func.dfg.inst(s).args()[0]))
            .collect();
        if writes.iter().any(|&s| !same(s)) || writes.len() > 1 {
            continue;
        }
        let Some((lb, li)) = position(ld) else {
            continue;
        };
        if !doms.dominates(lb, latch) {
            continue;
        }
        // A load without a store is not on a chain of iterations; peeling
        // for it would only cost code (and the loop's canonical shape, which
        // the JIT's bounds proofs read).
        let [st] = writes[..] else {
            continue;
        };
        let Some((sb, si)) = position(st) else {
            continue;
        };
        let after = if sb == lb {
            si > li
        } else {
            doms.dominates(lb, sb)
        };
        if !after || !doms.dominates(sb, latch) {
            continue;
        }
        let back = func.dfg.inst(st).args()[2];
        let local = crate::mem::is_local(func, a);
        let reads_other = loads
            .iter()
            .any(|&l| l != ld && func.dfg.inst(l).args()[0] == a);
        carried.push(Carried {
            load: ld,
            back,
            sink: (local && !reads_other).then_some(st),
        });
    }
    if carried.is_empty() {
        return None;
    }
    // A load whose result code after the loop reads (a load in the header)
    // or a region names stays: only the loop's uses read the parameter.
    let mut used_after: HashSet<Value> = HashSet::new();
    for &b in func.layout.blocks() {
        if !in_loop(b) {
            for &inst in func.layout.block_insts(b) {
                func.dfg.inst(inst).for_each_use(|v| {
                    used_after.insert(v);
                });
            }
        }
    }
    carried.retain(|c| {
        let x = func.dfg.first_result(c.load);
        !used_after.contains(&x) && !scopes.is_pinned(x)
    });
    if carried.is_empty() {
        return None;
    }
    Some(Plan {
        header,
        latch,
        preheader,
        exit,
        body: body.to_vec(),
        carried,
    })
}

fn peel(func: &mut Function, p: &Plan) {
    // 1. The copy of the first iteration, laid out after the preheader; its
    //    back edge goes to the loop's header.
    let LoopCopy { blocks, mut values } =
        copy_loop(func, &p.body, p.header, p.preheader, BackEdges::ToOriginal);

    // 2. The preheader enters the copy.
    let pre = func.layout.last_inst(p.preheader).expect("preheader jump");
    for dest in func.dfg.inst_mut(pre).destinations_mut() {
        if dest.block == p.header {
            dest.block = blocks[&p.header];
        }
    }

    // 3. The loop's loads become header parameters: from the copy's back
    //    edge, the copy's value at its end; from the loop's, the loop's.
    let latch_copy = blocks[&p.latch];
    let mut carried_params = Vec::new();
    for c in &p.carried {
        let (ld, at_back_edge) = (c.load, c.back);
        let x = func.dfg.first_result(ld);
        let acc = func
            .dfg
            .append_block_param(p.header, func.dfg.value_type(x));
        // A stored value defined outside the loop is its own copy.
        let copy_value = values.get(&at_back_edge).copied().unwrap_or(at_back_edge);
        add_arg(func, p.latch, p.header, at_back_edge);
        add_arg(func, latch_copy, p.header, copy_value);
        func.layout.remove_inst(ld);
        // Every use in the loop.
        for &b in &p.body {
            replace_in_block(func, b, x, acc);
        }
        values.insert(acc, values[&x]);
        carried_params.push(acc);
    }

    // 4. Values of the header read after the loop meet at the exit.
    merge_at_exit(func, &p.body, p.header, p.exit, &blocks, &values);

    // 5. Stores that wait for the exit: on the loop's own exit edge (the
    //    copy's exit is taken before any iteration, when nothing was
    //    stored), the element gets its last value, the header's parameter.
    let sunk: Vec<(Inst, Value)> = p
        .carried
        .iter()
        .zip(carried_params)
        .filter_map(|(c, acc)| c.sink.map(|st| (st, acc)))
        .collect();
    if sunk.is_empty() {
        return;
    }
    let edge = func.dfg.make_block();
    func.layout.insert_block_after(edge, p.header);
    let last = func.layout.last_inst(p.header).expect("a terminator");
    let mut to_exit = None;
    for dest in func.dfg.inst_mut(last).destinations_mut() {
        if dest.block == p.exit {
            let args = std::mem::take(&mut dest.args);
            dest.block = edge;
            to_exit = Some(BlockCall {
                block: p.exit,
                args,
            });
        }
    }
    for (st, acc) in sunk {
        func.layout.remove_inst(st);
        func.dfg.inst_mut(st).args_mut()[2] = acc;
        func.layout.append_inst(st, edge);
    }
    let jump = func.dfg.make_inst(
        InstData::Jump {
            dest: to_exit.expect("the header branches to the exit"),
        },
        &[],
    );
    func.dfg.copy_srcloc(last, jump);
    func.layout.append_inst(jump, edge);
}
