//! Adjoint slots: the adjoints that something outside their definition's
//! chain of reverse blocks adds to live in a memory slot.

use super::Plan;
use crate::activity;
use crate::context::Cache;
use adze_ir::{Block, Function, InstData, Module, RetActivity, Value};
use cranelift_entity::EntitySet;

impl Plan {
    pub fn slot(&self, v: Value) -> Option<u32> {
        self.slot[v]
    }

    /// Is `a` defined in the chain of block `b`?
    fn same_chain(&self, func: &Function, a: Value, b: Block) -> bool {
        func.def_block(a)
            .is_some_and(|d| self.chain_of(d) == self.chain_of(b))
    }

    /// An adjoint needs a memory slot when something outside the chain of
    /// reverse blocks of its definition contributes to it (see
    /// [`Plan::chain_pred`]): a use in another chain, a branch argument
    /// (moved on the reverse edge) other than a chain's own `jump`, a
    /// returned value (seeded at the adjoint's entry).
    pub(super) fn assign_slots(
        &mut self,
        cache: &mut Cache,
        module: &Module,
        func: &Function,
        ret: RetActivity,
    ) {
        let mut need = EntitySet::new();
        let mut tape_use = activity::TapeUse::default();
        for &b in &self.order {
            for &inst in func.layout.block_insts(b) {
                let data = func.dfg.inst(inst);
                match data {
                    InstData::Jump { .. } | InstData::Brif { .. } => {
                        for dest in data.destinations() {
                            let link = self.chain_pred(dest.block).map(|e| e.inst) == Some(inst);
                            let params = func.dfg.block_params(dest.block);
                            for (&a, &p) in dest.args.iter().zip(params) {
                                if self.is_active(func, p)
                                    && self.is_active(func, a)
                                    && !(link && self.same_chain(func, a, b))
                                {
                                    need.insert(a);
                                }
                            }
                        }
                    }
                    InstData::Return { args } => {
                        if ret == RetActivity::Active {
                            for &a in args {
                                if self.is_active(func, a) {
                                    need.insert(a);
                                }
                            }
                        }
                    }
                    _ => {
                        // Only a use that adds to the adjoint needs it in a
                        // slot; a slot that nothing adds to reads as -0.0,
                        // and `inf · -0.0` is NaN where, in one block, the
                        // missing adjoint gives no term at all. So the slots
                        // (and the terms) do not depend on how inlining cut
                        // the code into blocks.
                        if !self.contributes(cache, module, func, inst, &mut tape_use) {
                            continue;
                        }
                        for &a in data.args() {
                            if self.is_active(func, a) && !self.same_chain(func, a, b) {
                                need.insert(a);
                            }
                        }
                    }
                }
            }
        }
        let mut n = 0;
        for v in need.iter() {
            self.slot[v] = Some(n);
            n += 1;
        }
        self.num_slots = n;
    }
}
