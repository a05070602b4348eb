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
//! back edges' sources without passing through `h`
//! ([`adze_ir::cfg::natural_loops`]; irreducible control flow, which
//! reversed control flow can have, has no back edge and so no loop). Loops
//! are processed innermost first (by size), so an instruction can climb out
//! of a nest one loop at a time.
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
//! Blocks are visited in reverse postorder, so operands move before their
//! uses. Moving a pure instruction earlier is exact: it computes the same
//! bits from the same operands, and computing it when the loop body would
//! not have (a loop that runs zero times, a branch not taken) has no
//! observable effect. Every operand's definition dominates the preheader:
//! it dominated the use inside the loop without being in the loop, and
//! every path into the loop comes through the preheader.

use crate::analysis::{is_pure, Cfg, Scopes};
use adze_ir::{Block, Function, Inst, InstData, Value, ValueDef};
use cranelift_entity::EntitySet;

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
    let scopes = Scopes::new(func);
    let mut stats = LicmStats::default();
    let mut loops = cfg.loops(&doms);
    loops.sort_by_key(|l| (l.blocks.len(), cfg.rpo_num(l.header)));
    stats.loops = loops.len();
    let mut in_loop = EntitySet::with_capacity(func.dfg.num_blocks());
    for lp in &loops {
        let outside: Vec<Block> = cfg
            .preds(lp.header)
            .iter()
            .copied()
            .filter(|p| !lp.blocks.contains(p))
            .collect();
        let [pre] = outside[..] else { continue };
        let enters_by_jump = func.layout.last_inst(pre).is_some_and(
            |i| matches!(func.dfg.inst(i), InstData::Jump { dest } if dest.block == lp.header),
        );
        if !enters_by_jump {
            continue;
        }
        stats.with_preheader += 1;
        for &b in &lp.blocks {
            in_loop.insert(b);
        }
        let scope = scopes.block_scope(pre);
        for &b in &lp.blocks {
            if scopes.block_scope(b) != scope {
                continue;
            }
            let insts: Vec<Inst> = func.layout.block_insts(b).to_vec();
            for inst in insts {
                let data = func.dfg.inst(inst);
                if data.opcode().is_terminator()
                    || func.dfg.inst_results(inst).len() != 1
                    || !is_pure(func, data)
                    || constant(func, inst)
                {
                    continue;
                }
                // A constant operand defined in the loop is copied to the
                // preheader with the instruction; constants themselves stay
                // where they are used (see `constant`).
                let mut invariant = true;
                data.for_each_use(|v| {
                    invariant &= func.def_block(v).is_some_and(|d| !in_loop.contains(d))
                        || constant_value(func, v);
                });
                if !invariant {
                    continue;
                }
                func.layout.remove_inst(inst);
                let mut data = func.dfg.inst(inst).clone();
                for v in data.args_mut() {
                    if constant_value(func, *v)
                        && func.def_block(*v).is_some_and(|d| in_loop.contains(d))
                    {
                        let ValueDef::Result { inst: c, .. } = *func.dfg.value_def(*v) else {
                            continue;
                        };
                        let ty = func.dfg.value_type(*v);
                        let copy = func.dfg.make_inst(func.dfg.inst(c).clone(), &[ty]);
                        func.dfg.copy_srcloc(c, copy);
                        let at = func.layout.block_insts(pre).len().saturating_sub(1);
                        func.layout.insert_inst(copy, pre, at);
                        *v = func.dfg.first_result(copy);
                    }
                }
                *func.dfg.inst_mut(inst) = data;
                let at = func.layout.block_insts(pre).len().saturating_sub(1);
                func.layout.insert_inst(inst, pre, at);
                stats.hoisted += 1;
            }
        }
        for &b in &lp.blocks {
            in_loop.remove(b);
        }
    }
    stats
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
