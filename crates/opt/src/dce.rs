//! Dead-code elimination: unreachable blocks, then instructions whose
//! results are unused and that have no effect, and block parameters nothing
//! needs.
//!
//! ```text
//! block0(v0: f64, v1: i64, v2: arr):      block0(v0: f64, v1: i64, v2: arr):
//!     v3 = sin v0           ; unused          v5 = load v2, v1   ; may trap: kept
//!     v4 = len v2           ; unused          jump block1
//!     v5 = load v2, v1      ; unused      block1:
//!     jump block1(v3)                         return v0
//! block1(v6: f64):          ; unused
//!     return v0
//! ```
//!
//! **What is removable.** An instruction is removed when none of its results
//! is used by a live instruction and it is pure (`analysis::is_pure`: no
//! effect, no trap) — or it is a `load` that provably cannot trap: a
//! constant index below the constant length of a `zeros` array, or an
//! access that the bounds of its counted loop prove
//! ([`adze_ir::bounds::safe_accesses_below_start`]). Everything else is live:
//! terminators, `store`, `fill`, `samelen`, `push`, `pop`, `call`,
//! `autodiff`, `zeros` (allocation may fail), a `load` that may be out of
//! bounds, an `idiv`/`irem` that may trap.
//!
//! **Liveness** is aggressive, as in Cytron et al.'s dead-code elimination:
//! it is marked from the live instructions through their operands, but a
//! branch argument is needed only if the block parameter it is passed to
//! is: a parameter is live when a live instruction uses it, or when it is
//! passed to a live parameter. So a loop-carried value that only feeds
//! itself (a sum nobody reads, a counter nobody uses) is dead together with
//! the parameters it flows through, cycles included. Dead parameters are
//! removed with the corresponding argument of every branch
//! ([`adze_ir::Function::retain_block_params`]) — except the entry block's
//! (the signature), and a region's argument or result is always live. A
//! removed parameter was read by no live instruction, so every remaining
//! computation reads the same values: nothing observable changes. The
//! marking is a worklist, linear in the size of the function.
//!
//! **Unreachable blocks.** A block the entry cannot reach is removed, with
//! its instructions. Except for rule regions: a block that a region lists,
//! or that defines a region's argument or result, stays (a region's blocks
//! and interface values must remain valid), together with everything it
//! needs: the blocks it branches to and the blocks that define the values
//! it uses.
//!
//! The values a region lists as arguments or results keep their defining
//! instructions (or stay parameters) even when nothing else uses them.
//!
//! Removed blocks are dropped from the provenance lists of inlined code
//! (`Function::inlined`); an entry whose blocks are all gone stays, with an
//! empty list (entries are numbered, and parents refer to them).

use crate::analysis::{def_inst, iconst_of, is_pure, table, Cfg, Scopes};
use adze_ir::bounds::LengthClasses;
use adze_ir::{Block, Function, Inst, InstData, Opcode, Value, ValueDef};
use cranelift_entity::{EntitySet, SecondaryMap};
use std::collections::HashSet;

/// What DCE did to one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DceStats {
    /// Unreachable blocks removed.
    pub blocks: usize,
    /// Dead instructions removed (not counting those of removed blocks).
    pub insts: usize,
    /// Dead block parameters removed (with their incoming arguments).
    pub params: usize,
}

/// Runs dead-code elimination on `func`.
pub fn dce(func: &mut Function) -> DceStats {
    let mut stats = DceStats::default();
    if func.is_declaration() {
        return stats;
    }
    stats.blocks = remove_unreachable_blocks(func);
    (stats.insts, stats.params) = remove_dead_insts(func);
    stats
}

/// Can this instruction go when its results are unused? `safe`: the
/// accesses proven in bounds by their loops.
fn is_removable(func: &Function, inst: Inst, safe: &EntitySet<Inst>) -> bool {
    let data = func.dfg.inst(inst);
    if data.opcode().is_terminator() {
        return false;
    }
    is_pure(func, data)
        || is_safe_load(func, data)
        || (data.opcode() == Opcode::Load && safe.contains(inst))
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
    let mut keep = EntitySet::with_capacity(func.dfg.num_blocks());
    let mut work = Vec::new();
    for &b in &blocks {
        if cfg.is_reachable(b) {
            keep.insert(b);
        } else if scopes.is_pinned_block(b) {
            keep.insert(b);
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
                .for_each_use(|v| needed.extend(func.def_block(v)));
        }
        for n in needed {
            if keep.insert(n) {
                work.push(n);
            }
        }
    }
    let mut removed = 0;
    for b in blocks {
        if !keep.contains(b) {
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

/// The loads that cannot trap because an access earlier in their block
/// checked the same index of an array of the same length (`samelen`s of
/// the entry block: `LengthClasses`): the earlier one trapped, or the
/// index is in bounds. Forward mode over an augmented primal loads a
/// tangent `c.t[i]` beside `c[i]`; when the tangent is dead (`.noret`),
/// its load goes too. Only for this pass: `safe_accesses`, which reverse
/// mode's tapes follow, is left as it is.
fn covered_loads(func: &Function) -> EntitySet<Inst> {
    let all = LengthClasses::of_entry_block(func);
    let entry = func.entry_block();
    // In the entry block a `samelen` holds only after it has run (the
    // review of session 20: `x[i]; y[i]; samelen x, y`): there the classes
    // grow as the block goes; every other block has them all.
    let mut so_far = LengthClasses::default();
    let mut covered = EntitySet::new();
    for &b in func.layout.blocks() {
        let in_entry = Some(b) == entry;
        let mut checked: HashSet<(Value, Value)> = HashSet::new();
        for &inst in func.layout.block_insts(b) {
            let (arr, idx) = match *func.dfg.inst(inst) {
                InstData::Binary {
                    op: Opcode::SameLen,
                    args: [x, y],
                } if in_entry => {
                    so_far.join(x, y);
                    continue;
                }
                InstData::Binary {
                    op: Opcode::Load | Opcode::Iload,
                    args: [a, i],
                } => (a, i),
                InstData::Ternary {
                    op: Opcode::Store | Opcode::Istore,
                    args: [a, i, _],
                } => (a, i),
                _ => continue,
            };
            let classes = if in_entry { &so_far } else { &all };
            if !checked.insert((classes.rep(arr), idx)) {
                covered.insert(inst);
            }
        }
    }
    covered
}

fn remove_dead_insts(func: &mut Function) -> (usize, usize) {
    // What the JIT proves too (`a[i - 1]` in a loop from 1 included): the
    // optimizer runs after AD, so what it proves shapes no tape.
    let mut safe = adze_ir::bounds::safe_accesses_below_start(func);
    for inst in covered_loads(func).iter() {
        safe.insert(inst);
    }
    // The instructions that branch to each block.
    let mut incoming: SecondaryMap<Block, Vec<Inst>> = table(func.dfg.num_blocks(), Vec::new());
    for (_, inst) in func.layout.insts() {
        for dest in func.dfg.inst(inst).destinations() {
            let preds = &mut incoming[dest.block];
            if preds.last() != Some(&inst) {
                preds.push(inst);
            }
        }
    }
    let mut live = Live {
        insts: EntitySet::with_capacity(func.dfg.num_insts()),
        params: EntitySet::with_capacity(func.dfg.num_values()),
        work: Vec::new(),
    };
    if let Some(entry) = func.entry_block() {
        for &p in func.dfg.block_params(entry) {
            live.value(func, p);
        }
    }
    for (_, inst) in func.layout.insts() {
        if !is_removable(func, inst, &safe) {
            live.inst(inst);
        }
    }
    for data in func.regions.values() {
        for &v in data.args.iter().chain(&data.results) {
            live.value(func, v);
        }
    }
    while let Some(item) = live.work.pop() {
        match item {
            // A live instruction needs its operands; the arguments it passes
            // to blocks are needed only by live parameters.
            Item::Inst(inst) => {
                for &v in func.dfg.inst(inst).args() {
                    live.value(func, v);
                }
            }
            Item::Param(block, num) => {
                for &inst in &incoming[block] {
                    for dest in func.dfg.inst(inst).destinations() {
                        if dest.block == block {
                            if let Some(&v) = dest.args.get(num) {
                                live.value(func, v);
                            }
                        }
                    }
                }
            }
        }
    }
    let dead: Vec<Inst> = func
        .layout
        .insts()
        .filter(|&(_, i)| !live.insts.contains(i))
        .map(|(_, i)| i)
        .collect();
    remove_insts(func, &dead);
    let params = func.retain_block_params(|_, p| live.params.contains(p));
    (dead.len(), params)
}

enum Item {
    Inst(Inst),
    Param(Block, usize),
}

/// Live instructions and block parameters, with a worklist of those whose
/// operands (incoming arguments) are still to be marked.
struct Live {
    insts: EntitySet<Inst>,
    params: EntitySet<Value>,
    work: Vec<Item>,
}

impl Live {
    fn inst(&mut self, inst: Inst) {
        if self.insts.insert(inst) {
            self.work.push(Item::Inst(inst));
        }
    }

    fn value(&mut self, func: &Function, v: Value) {
        if !func.dfg.value_is_valid(v) {
            return;
        }
        match *func.dfg.value_def(v) {
            ValueDef::Result { inst, .. } => {
                if func.layout.inst_block(inst).is_some() {
                    self.inst(inst);
                }
            }
            ValueDef::Param { block, num } => {
                if self.params.insert(v) {
                    self.work.push(Item::Param(block, num));
                }
            }
            ValueDef::Detached => {}
        }
    }
}

/// Removes `insts` from the layout.
pub(crate) fn remove_insts(func: &mut Function, insts: &[Inst]) {
    func.layout.remove_insts(insts);
}
