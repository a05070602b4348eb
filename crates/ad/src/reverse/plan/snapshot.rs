//! Snapshots of local arrays that stop changing: in a final derivative
//! (`ReverseRequest::no_reverse_over`), a local `zeros` array that nothing
//! writes once something has read it, read where the adjoint needs the
//! value inside two loops or more, is pushed whole where the primal
//! returns, and the adjoint pops it into an array of its own at its entry.
//! Its loads are then recomputed from that copy (a `Recipe::Inst` of a
//! load of an array the adjoint has) instead of each being popped: GMM's
//! `qs` (its matrices, built once) is read `d(d + 1)/2` times per point and
//! component, 5.2 million tape entries at D = 64 against 205 000 for the
//! snapshot (docs/ad-reverse.md, "Snapshots").
//!
//! Why the copy holds what each load read: every write of the array (or of
//! a view of it) happens before every read, on every path (no write is
//! reachable from a read), so the contents at `return` are those every
//! read saw; and the array is made once per call (its `zeros` is in no
//! loop and dominates every `return`).

use super::Plan;
use adze_ir::cfg::{successors, DominatorTree};
use adze_ir::{Block, Function, Inst, InstData, Module, Opcode, Type, Value};
use cranelift_entity::EntitySet;

impl Plan {
    /// Picks the local arrays to snapshot (see the module doc) and makes
    /// them available to the adjoint, so that their loads are recomputed
    /// (and the callees that read them take them). Only for a final
    /// derivative: where its loads are popped and where they are
    /// recomputed, an outer reverse pass sums adjoints in another order.
    pub fn snapshot_arrays(&mut self, module: &Module, func: &Function) {
        let preds = |b: Block| self.preds[b].iter().map(|e| e.from);
        let doms = DominatorTree::new(&self.order, preds);
        let mut found = Vec::new();
        for (block, inst) in func.layout.insts() {
            let InstData::Zeros {
                op: Opcode::Zeros, ..
            } = func.dfg.inst(inst)
            else {
                continue;
            };
            if !self.is_reachable(block)
                || self.forest.innermost(block).is_some()
                || !self.returns.iter().all(|&r| doms.dominates(block, r))
            {
                continue;
            }
            let a = func.dfg.first_result(inst);
            if self.frozen_and_read_in_loops(module, func, a) {
                found.push(a);
            }
        }
        for a in found {
            self.snapshots.push(a);
            self.available.insert(a);
        }
    }

    /// Is every write of `a` (or of a view of it) before every read, and
    /// is some read of it, whose value the adjoint needs, in two loops or
    /// more? There the loads outnumber the elements as a rule (GMM's
    /// matrices, read per point and component); pushing the whole array at
    /// each `return` costs its length on the tape, which a read in one
    /// loop, or none the adjoint needs, would not repay (the review of
    /// session 21: a callee called 2000 times reading 2 elements of an
    /// array of 200 000 outgrew the tape's budget).
    fn frozen_and_read_in_loops(&self, module: &Module, func: &Function, a: Value) -> bool {
        // `a` and its views.
        let mut family = EntitySet::new();
        family.insert(a);
        let mut reads: Vec<(Block, usize)> = Vec::new();
        let mut writes: Vec<(Block, usize)> = Vec::new();
        let mut in_loop = false;
        for &b in &self.order {
            for (k, &inst) in func.layout.block_insts(b).iter().enumerate() {
                let data = func.dfg.inst(inst);
                if !data.args().iter().any(|&v| family.contains(v)) {
                    continue;
                }
                match access(module, func, inst, &family) {
                    Access::View => {
                        family.insert(func.dfg.first_result(inst));
                    }
                    Access::Read => {
                        reads.push((b, k));
                        in_loop |= self.forest.loops_around(b).count() >= 2
                            && self.differentiated(func, inst);
                    }
                    Access::Other => {}
                    Access::Write => writes.push((b, k)),
                }
            }
        }
        if !in_loop {
            return false;
        }
        // No write after a read in its block, nor in a block reachable
        // from a read's (through at least one edge).
        let mut written = EntitySet::new();
        for &(b, _) in &writes {
            written.insert(b);
        }
        let mut seen = EntitySet::new();
        let mut work: Vec<Block> = Vec::new();
        for &(b, k) in &reads {
            if writes.iter().any(|&(wb, wk)| wb == b && wk > k) {
                return false;
            }
            work.extend(successors(func, b));
        }
        while let Some(b) = work.pop() {
            if !seen.insert(b) {
                continue;
            }
            if written.contains(b) {
                return false;
            }
            work.extend(successors(func, b));
        }
        true
    }

    /// Does the adjoint need what the read `inst` reads: a load of an
    /// active value, or a differentiated call?
    fn differentiated(&self, func: &Function, inst: Inst) -> bool {
        match func.dfg.inst(inst) {
            InstData::Call { args, .. } => self.call_is_active(func, args),
            _ => func
                .dfg
                .inst_results(inst)
                .iter()
                .any(|&r| self.is_active(func, r)),
        }
    }
}

/// What `inst` does with the arrays of `family` among its operands.
enum Access {
    /// A view of one (`slice`): a member of the family.
    View,
    /// Reads one: a `load`, or a call whose parameter is read-only.
    Read,
    /// Neither reads nor writes the elements (`len`, `samelen`, `apart`,
    /// `return`: nothing of the function runs after it).
    Other,
    /// May write one: a `store`, a `fill`, a call taking it `mut`, or
    /// anything else.
    Write,
}

fn access(module: &Module, func: &Function, inst: Inst, family: &EntitySet<Value>) -> Access {
    let data = func.dfg.inst(inst);
    match data {
        InstData::Ternary {
            op: Opcode::Slice,
            args: [base, lo, hi],
        } if family.contains(*base) && !family.contains(*lo) && !family.contains(*hi) => {
            Access::View
        }
        InstData::Binary {
            op: Opcode::Load,
            args: [arr, idx],
        } if family.contains(*arr) && !family.contains(*idx) => Access::Read,
        InstData::Unary {
            op: Opcode::Len, ..
        }
        | InstData::Binary {
            op: Opcode::SameLen | Opcode::Apart,
            ..
        }
        | InstData::Return { .. } => Access::Other,
        InstData::Call { func: callee, args } if module.is_valid(*callee) => {
            let params = &module.func(*callee).sig.params;
            let writes = args
                .iter()
                .zip(params)
                .any(|(&v, p)| family.contains(v) && (p.mutable || p.ty != Type::Array));
            if writes || args.len() != params.len() {
                Access::Write
            } else {
                Access::Read
            }
        }
        _ => Access::Write,
    }
}
