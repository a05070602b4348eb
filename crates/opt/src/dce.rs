//! Dead-code elimination: unreachable blocks, then instructions whose
//! results are unused and that have no effect.
//!
//! ```text
//! block0(v0: f64, v1: i64, v2: arr):      block0(v0: f64, v1: i64, v2: arr):
//!     v3 = sin v0           ; unused          v5 = load v2, v1   ; may trap: kept
//!     v4 = len v2           ; unused          return v0
//!     v5 = load v2, v1      ; unused
//!     return v0
//! ```
//!
//! **What is removable.** An instruction is removed when none of its results
//! is used by a live instruction and it is pure (`analysis::is_pure`: no effect, no
//! trap) — or it is a `load` that provably cannot trap (a constant index
//! below the constant length of a `zeros` array). Everything else is live:
//! terminators, `store`, `fill`, `samelen`, `push`, `pop`, `call`,
//! `autodiff`, `zeros` (allocation may fail), a `load` that may be out of
//! bounds, an `idiv`/`irem` that may trap. Liveness is computed by marking
//! from the live instructions through their operands (a worklist, linear).
//!
//! **Unreachable blocks.** A block the entry cannot reach is removed, with
//! its instructions. Except for rule regions: a block that a region lists,
//! or that defines a region's argument or result, stays (a region's blocks
//! and interface values must remain valid), together with everything it
//! needs: the blocks it branches to and the blocks that define the values
//! it uses. Block parameters are never removed (the IR has no way to remove
//! one), so branch arguments stay live.
//!
//! The values a region lists as arguments or results keep their defining
//! instructions even when nothing else uses them.
//!
//! Removed blocks are dropped from the provenance lists of inlined code
//! (`Function::inlined`); an entry whose blocks are all gone stays, with an
//! empty list (entries are numbered, and parents refer to them).

use crate::analysis::{def_block, def_inst, iconst_of, is_pure, Cfg, Scopes, Table};
use adze_ir::{Block, Function, Inst, InstData, Opcode, ValueDef};

/// What DCE did to one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DceStats {
    /// Unreachable blocks removed.
    pub blocks: usize,
    /// Dead instructions removed (not counting those of removed blocks).
    pub insts: usize,
}

/// Runs dead-code elimination on `func`.
pub fn dce(func: &mut Function) -> DceStats {
    let mut stats = DceStats::default();
    if func.is_declaration() {
        return stats;
    }
    stats.blocks = remove_unreachable_blocks(func);
    stats.insts = remove_dead_insts(func);
    stats
}

/// Can this instruction go when its results are unused?
fn is_removable(func: &Function, data: &InstData) -> bool {
    if data.opcode().is_terminator() {
        return false;
    }
    is_pure(func, data) || is_safe_load(func, data)
}

/// A `load` of a constant index below the constant length of a `zeros`
/// array: it cannot trap.
fn is_safe_load(func: &Function, data: &InstData) -> bool {
    let InstData::Binary {
        op: Opcode::Load,
        args: [arr, idx],
    } = *data
    else {
        return false;
    };
    let len = match def_inst(func, arr) {
        Some(InstData::Zeros { len, .. }) => iconst_of(func, *len),
        _ => None,
    };
    matches!((iconst_of(func, idx), len), (Some(i), Some(n)) if 0 <= i && i < n)
}

fn remove_unreachable_blocks(func: &mut Function) -> usize {
    let cfg = Cfg::new(func);
    let scopes = Scopes::new(func);
    let blocks: Vec<Block> = func.layout.blocks().to_vec();
    let mut keep = Table::new(func.dfg.num_blocks(), false);
    let mut work = Vec::new();
    for &b in &blocks {
        if cfg.is_reachable(b) {
            keep.set(b, true);
        } else if scopes.is_pinned_block(b) {
            keep.set(b, true);
            work.push(b);
        }
    }
    // What a kept unreachable block needs: its successors and the blocks
    // defining the values it uses.
    while let Some(b) = work.pop() {
        let mut needed: Vec<Block> = cfg.succs(b).to_vec();
        for &inst in func.layout.block_insts(b) {
            func.dfg
                .inst(inst)
                .for_each_use(|v| needed.extend(def_block(func, v)));
        }
        for n in needed {
            if !*keep.get(n) {
                keep.set(n, true);
                work.push(n);
            }
        }
    }
    let mut removed = 0;
    for b in blocks {
        if !*keep.get(b) {
            func.layout.remove_block(b);
            removed += 1;
        }
    }
    if removed > 0 {
        // Provenance lists only blocks that are still there (the verifier
        // would accept unplaced ones; pruning keeps the text honest).
        for d in func.inlined.values_mut() {
            d.blocks.retain(|&b| func.layout.is_block_inserted(b));
        }
    }
    removed
}

fn remove_dead_insts(func: &mut Function) -> usize {
    let scopes = Scopes::new(func);
    let mut live = Table::new(func.dfg.num_insts(), false);
    let mut work: Vec<Inst> = Vec::new();
    for (_, inst) in func.layout.insts() {
        let data = func.dfg.inst(inst);
        let pinned = func
            .dfg
            .inst_results(inst)
            .iter()
            .any(|&r| scopes.is_pinned(r));
        if pinned || !is_removable(func, data) {
            live.set(inst, true);
            work.push(inst);
        }
    }
    while let Some(inst) = work.pop() {
        let mut defs = Vec::new();
        func.dfg.inst(inst).for_each_use(|v| {
            if func.dfg.value_is_valid(v) {
                if let ValueDef::Result { inst: d, .. } = *func.dfg.value_def(v) {
                    defs.push(d);
                }
            }
        });
        for d in defs {
            if !*live.get(d) && func.layout.inst_block(d).is_some() {
                live.set(d, true);
                work.push(d);
            }
        }
    }
    let dead: Vec<Inst> = func
        .layout
        .insts()
        .filter(|&(_, i)| !*live.get(i))
        .map(|(_, i)| i)
        .collect();
    remove_insts(func, &dead);
    dead.len()
}

/// Removes `insts` from the layout.
pub(crate) fn remove_insts(func: &mut Function, insts: &[Inst]) {
    for &inst in insts {
        func.layout.remove_inst(inst);
    }
}
