//! Loop-invariant code motion of pure instructions.
//!
//! ```text
//! block0(v0: arr, v1: f64):               block0(v0: arr, v1: f64):
//!     v2 = iconst 0                           v2 = iconst 0
//!     v3 = len v0                             v3 = len v0
//!     jump block1(v2)                         v6 = exp v1         ; hoisted
//! block1(v4: i64):                            v8 = iconst 1       ; hoisted
//!     v5 = icmp lt v4, v3                     jump block1(v2)
//!     brif v5, block2, block3             block1(v4: i64):
//! block2:                                     v5 = icmp lt v4, v3
//!     v6 = exp v1                             brif v5, block2, block3
//!     v7 = load v0, v4                    block2:
//!     v9 = fmul v6, v7                        v7 = load v0, v4
//!     store ...                               v9 = fmul v6, v7
//!     v8 = iconst 1                           store ...
//!     v10 = iadd v4, v8                       v10 = iadd v4, v8
//!     jump block1(v10)                        jump block1(v10)
//! ```
//!
//! **Loops.** A back edge is an edge `t → h` where `h` dominates `t`; the
//! natural loop of header `h` is `h` and every block that reaches one of its
//! back edges' sources without passing through `h` (the loop-nesting forest
//! [`adze_ir::cfg::LoopForest`]; irreducible control flow, which reversed
//! control flow can have, has no back edge and so no loop).
//!
//! **One pass.** Instructions are visited once, in reverse postorder of
//! their blocks; each climbs out of the loops around it, innermost first,
//! one loop at a time, while its operands are defined outside the loop
//! (where they are after their own climb) and the loop has a preheader in
//! its region scope; a loop without one is passed over and the next loop
//! out is tried. The moves are then made together, so the pass costs time
//! linear in the function plus the loops climbed, however deep loops nest
//! (visiting every loop's blocks, as a loop-by-loop LICM does, is quadratic
//! in the nesting depth). Moved instructions are appended to their
//! preheader in visiting order, after what it held, so operands come first.
//!
//! **Preheader.** Code moves to the end of the header's only predecessor
//! outside the loop, and only when that block ends in an unconditional
//! `jump` to the header (the front end's canonical loops have one: see
//! `docs/language.md`, "Lowering"). No block is created, so the CFG, the
//! block numbers and every rule region's block list stay as they are; a
//! loop with several entries, or entered by a `brif`, is left alone.
//!
//! **Constants stay.** `fconst`, `iconst` and `bconst` are not moved: a
//! constant hoisted out of a loop lives through the whole loop, and the JIT
//! compiles large functions without Cranelift's optimiser, which would
//! otherwise re-materialise it at its uses (measured: GMM's primal was
//! 15–30 % slower with constants hoisted and merged). An instruction that
//! moves takes a copy of its constant operands with it.
//!
//! **What moves.** A pure instruction (`analysis::is_pure`: no
//! effect, cannot trap — so never a `load`, `zeros`, or an `idiv`/`irem`
//! that may trap) whose operands are all defined outside the loop (or by
//! instructions already moved), in the same region scope as the preheader.
//! Moving a pure instruction earlier is exact: it computes the same
//! bits from the same operands, and computing it when the loop body would
//! not have (a loop that runs zero times, a branch not taken) has no
//! observable effect. Every operand's definition dominates the preheader:
//! it dominated the use inside the loop without being in the loop, and
//! every path into the loop comes through the preheader.

use crate::analysis::{is_pure, Cfg, Scopes};
use adze_ir::cfg::{DominatorTree, Loop, LoopForest};
use adze_ir::{Block, Function, Inst, InstData, Value, ValueDef};
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::SecondaryMap;

/// What LICM did to one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LicmStats {
    /// Loops found.
    pub loops: usize,
    /// Loops with a preheader code could move to.
    pub with_preheader: usize,
    /// Instructions moved out of a loop (an instruction that leaves a nest
    /// of two loops counts twice).
    pub hoisted: usize,
}

/// Runs loop-invariant code motion on `func`.
pub fn licm(func: &mut Function) -> LicmStats {
    let cfg = Cfg::new(func);
    let doms = cfg.dominators();
    let forest = cfg.loops(&doms);
    let pre = preheaders(func, &cfg, &forest);
    let mut stats = LicmStats {
        loops: forest.len(),
        with_preheader: pre.values().filter(|p| p.is_some()).count(),
        hoisted: 0,
    };
    if stats.with_preheader == 0 {
        return stats;
    }
    let scopes = Scopes::new(func);
    let moves = plan(func, &cfg.rpo, &forest, &pre, &scopes, &mut stats.hoisted);
    apply(func, &doms, &moves);
    stats
}

/// The preheader of each loop: the header's only predecessor outside the
/// loop, when it enters by a `jump`.
fn preheaders(
    func: &Function,
    cfg: &Cfg,
    forest: &LoopForest,
) -> SecondaryMap<Loop, PackedOption<Block>> {
    let mut pre = SecondaryMap::with_capacity(forest.len());
    for l in forest.loops() {
        let h = forest.header(l);
        let mut outside = cfg.preds(h).iter().filter(|&&p| !forest.contains(l, p));
        let (Some(&p), None) = (outside.next(), outside.next()) else {
            continue;
        };
        let enters_by_jump = func.layout.last_inst(p).is_some_and(
            |i| matches!(func.dfg.inst(i), InstData::Jump { dest } if dest.block == h),
        );
        if enters_by_jump {
            pre[l] = p.into();
        }
    }
    pre
}

/// Where each instruction that moves goes, in visiting order (see the
/// module documentation); `hoisted` counts the loops left.
fn plan(
    func: &Function,
    rpo: &[Block],
    forest: &LoopForest,
    pre: &SecondaryMap<Loop, PackedOption<Block>>,
    scopes: &Scopes,
    hoisted: &mut usize,
) -> Vec<(Inst, Block)> {
    let mut moved: SecondaryMap<Inst, PackedOption<Block>> = SecondaryMap::new();
    let mut moves = Vec::new();
    // Where `v` is defined once the moves so far are made.
    let def_block =
        |moved: &SecondaryMap<Inst, PackedOption<Block>>, v: Value| match *func.dfg.value_def(v) {
            ValueDef::Result { inst, .. } => moved[inst].expand().or(func.layout.inst_block(inst)),
            _ => func.def_block(v),
        };
    for &b in rpo {
        let Some(innermost) = forest.innermost(b) else {
            continue;
        };
        for &inst in func.layout.block_insts(b) {
            let data = func.dfg.inst(inst);
            if data.opcode().is_terminator()
                || func.dfg.inst_results(inst).len() != 1
                || !is_pure(func, data)
                || constant(func, inst)
            {
                continue;
            }
            let mut at = b;
            let mut next = Some(innermost);
            while let Some(l) = next {
                let Some(p) = pre[l].expand() else {
                    next = forest.parent(l);
                    continue;
                };
                if scopes.block_scope(at) != scopes.block_scope(p) {
                    next = forest.parent(l);
                    continue;
                }
                // A constant operand defined in the loop is copied to the
                // preheader with the instruction; constants themselves stay
                // where they are used (see `constant`).
                let mut invariant = true;
                data.for_each_use(|v| {
                    invariant &= def_block(&moved, v).is_some_and(|d| !forest.contains(l, d))
                        || constant_value(func, v);
                });
                if !invariant {
                    break;
                }
                at = p;
                *hoisted += 1;
                next = forest.innermost(p);
            }
            if at != b {
                moved[inst] = at.into();
                moves.push((inst, at));
            }
        }
    }
    moves
}

/// Makes the `moves`: each instruction goes to the end of its preheader
/// (before the terminator) with a copy of every constant operand whose
/// definition does not dominate it there.
fn apply(func: &mut Function, doms: &DominatorTree, moves: &[(Inst, Block)]) {
    let insts: Vec<Inst> = moves.iter().map(|&(i, _)| i).collect();
    func.layout.remove_insts(&insts);
    for &(inst, to) in moves {
        let mut data = func.dfg.inst(inst).clone();
        for v in data.args_mut() {
            let ValueDef::Result { inst: c, .. } = *func.dfg.value_def(*v) else {
                continue;
            };
            let stays = func
                .layout
                .inst_block(c)
                .is_some_and(|d| doms.dominates(d, to));
            if !constant(func, c) || stays {
                continue;
            }
            let ty = func.dfg.value_type(*v);
            let copy = func.dfg.make_inst(func.dfg.inst(c).clone(), &[ty]);
            func.dfg.copy_srcloc(c, copy);
            let at = func.layout.block_insts(to).len().saturating_sub(1);
            func.layout.insert_inst(copy, to, at);
            *v = func.dfg.first_result(copy);
        }
        *func.dfg.inst_mut(inst) = data;
        let at = func.layout.block_insts(to).len().saturating_sub(1);
        func.layout.insert_inst(inst, to, at);
    }
}

/// Is `inst` an `fconst`, `iconst` or `bconst`?
fn constant(func: &Function, inst: Inst) -> bool {
    matches!(
        func.dfg.inst(inst),
        InstData::FConst { .. } | InstData::IConst { .. } | InstData::BConst { .. }
    )
}

/// Is `v` the result of a constant?
fn constant_value(func: &Function, v: Value) -> bool {
    match *func.dfg.value_def(v) {
        ValueDef::Result { inst, .. } => constant(func, inst),
        _ => false,
    }
}
