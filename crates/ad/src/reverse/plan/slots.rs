//! Adjoint storage: which adjoints that something outside their
//! definition's chain of reverse blocks adds to live in a memory slot, and
//! which are handed on from reverse block to reverse block as SSA values.

use super::order::Structure;
use super::Plan;
use crate::activity;
use crate::context::Cache;
use adze_ir::{Block, Function, InstData, Module, RetActivity, Value};
use cranelift_entity::{EntitySet, SecondaryMap};

impl Plan {
    pub fn slot(&self, v: Value) -> Option<u32> {
        self.slot[v]
    }

    /// Is the adjoint of `v` handed on between reverse blocks as an SSA
    /// value, although something outside its chain adds to it (see
    /// [`Plan::assign_slots`])?
    pub fn is_carried(&self, v: Value) -> bool {
        self.carry.contains(v)
    }

    /// The block to whose reverse the reverse of the chain that starts with
    /// `head` hands the running sum of `v`'s adjoint (which has a slot) as
    /// an SSA value, instead of storing it (see [`Plan::assign_slots`]).
    pub fn hands_on(&self, v: Value, head: Block) -> Option<Block> {
        self.hand_on.get(&(v, head)).copied()
    }

    /// Is `a` defined in the chain of block `b`?
    fn same_chain(&self, func: &Function, a: Value, b: Block) -> bool {
        func.def_block(a)
            .is_some_and(|d| self.chain_of(d) == self.chain_of(b))
    }

    /// How each adjoint crosses reverse blocks. Within its definition's
    /// chain of reverse blocks (see [`Plan::chain_pred`]) an adjoint is an
    /// SSA value. Something outside the chain adds to it through a use in
    /// another chain, a branch argument (moved on the reverse edge) other
    /// than a chain's own `jump`, or a returned value (seeded at the
    /// adjoint's entry). Such an adjoint is *carried* — handed on as an SSA
    /// value, a block parameter where it leaves a reverse block — when
    /// every definition is followed by each block that adds to it exactly
    /// once, in one order ([`Structure::carries`]): then the reverse
    /// blocks that add to it run one after another, each dominating the
    /// next. Otherwise (a use on only one side of a branch, in a loop
    /// nested deeper than the definition, a `brif` argument) it lives in a
    /// memory slot.
    ///
    /// The test is structural: a callee inlined is a single-entry,
    /// single-exit region, so it gives the same answer for the callee's
    /// values inlined or called, and for a caller's value used on both
    /// sides of an inlined call, carried across it as across the call
    /// (where it is one block). A slot would differ from the call at the
    /// third order: a slot's shadow memory adds its term after the block's
    /// own terms where the call's parameter adds it first.
    pub(super) fn assign_slots(
        &mut self,
        cache: &mut Cache,
        module: &Module,
        func: &Function,
        ret: RetActivity,
    ) {
        // Values something outside their chain adds to; those of them
        // that a `brif` passes; per value, the blocks whose reverse adds
        // to it (a branch argument's and a returned value's adjoint are
        // added where that block's reverse starts).
        let mut crosses = EntitySet::new();
        let mut hard = EntitySet::new();
        // Per value, the blocks whose edge (other than a chain's) passes
        // it: its adjoint is added to its slot where that edge is reversed.
        let mut edged: SecondaryMap<Value, Vec<Block>> = SecondaryMap::new();
        let mut users: SecondaryMap<Value, Vec<Block>> = SecondaryMap::new();
        let add = |users: &mut SecondaryMap<Value, Vec<Block>>, v: Value, b: Block| {
            if users[v].last() != Some(&b) {
                users[v].push(b);
            }
        };
        let mut tape_use = activity::TapeUse::default();
        let mut pos = SecondaryMap::with_default(usize::MAX);
        for (k, &b) in self.order.iter().enumerate() {
            pos[b] = k;
        }
        for &b in &self.order {
            for &inst in func.layout.block_insts(b) {
                let data = func.dfg.inst(inst);
                match data {
                    InstData::Jump { .. } | InstData::Brif { .. } => {
                        let jump = matches!(data, InstData::Jump { .. });
                        for dest in data.destinations() {
                            let link = self.chain_pred(dest.block).map(|e| e.inst) == Some(inst);
                            let params = func.dfg.block_params(dest.block);
                            for (&a, &p) in dest.args.iter().zip(params) {
                                if !(self.is_active(func, p) && self.is_active(func, a)) {
                                    continue;
                                }
                                add(&mut users, a, b);
                                if link && self.same_chain(func, a, b) {
                                    continue;
                                }
                                crosses.insert(a);
                                if !link {
                                    edged[a].push(b);
                                }
                                // The adjoint hands a carried argument's
                                // adjoint to R(b) as a parameter, so `b`
                                // must be left by this edge only, and R(b)
                                // must be emitted after the block it
                                // comes from (not a loop's back edge).
                                if !jump || pos[b] >= pos[dest.block] {
                                    hard.insert(a);
                                }
                            }
                        }
                    }
                    InstData::Return { args } => {
                        if ret == RetActivity::Active {
                            for &a in args {
                                if self.is_active(func, a) {
                                    add(&mut users, a, b);
                                    crosses.insert(a);
                                }
                            }
                        }
                    }
                    _ => {
                        // Only a use that adds to the adjoint counts; a slot
                        // that nothing adds to reads as -0.0, and `inf ·
                        // -0.0` is NaN where, in one block, the missing
                        // adjoint gives no term at all. So the slots (and
                        // the terms) do not depend on how inlining cut the
                        // code into blocks.
                        if !self.contributes(cache, module, func, inst, &mut tape_use) {
                            continue;
                        }
                        for &a in data.args() {
                            if self.is_active(func, a) {
                                add(&mut users, a, b);
                                if !self.same_chain(func, a, b) {
                                    crosses.insert(a);
                                }
                            }
                        }
                    }
                }
            }
        }
        // Built on first use: most functions have no adjoint to carry.
        let (order, forest, returns) = (&self.order, &self.forest, &self.returns);
        let reachable = &self.reachable;
        let build = || {
            let mut succs: SecondaryMap<Block, Vec<Block>> = SecondaryMap::new();
            for &b in order {
                succs[b] = adze_ir::cfg::successors(func, b)
                    .into_iter()
                    .filter(|&s| reachable.contains(s))
                    .collect();
            }
            Structure::new(order, succs, returns, forest, func.dfg.num_blocks() as u32)
        };
        let mut structure: Option<Structure> = None;
        let mut hand_on = std::collections::HashMap::new();
        let mut carry = EntitySet::new();
        let mut n = 0;
        for v in crosses.iter() {
            let d = func.def_block(v);
            if let Some(d) = d.filter(|_| !hard.contains(v)) {
                if structure.get_or_insert_with(&build).carries(d, &users[v]) {
                    carry.insert(v);
                    continue;
                }
            }
            self.slot[v] = Some(n);
            n += 1;
            let Some(d) = d else {
                continue;
            };
            // Between two blocks that add to it one after the other (in
            // every execution, nothing adding between), as on both sides of
            // an inlined callee, the running sum is handed on, as it is
            // across the call: the slot is stored and loaded only where the
            // succession breaks.
            let mut touches = users[v].clone();
            touches.push(d);
            let mut touched = EntitySet::new();
            for &b in &touches {
                touched.insert(b);
            }
            let structure = structure.get_or_insert_with(&build);
            for &to in &touches {
                let Some(from) = structure.dominating(to, &touched) else {
                    continue;
                };
                if self.chain_of(from) != self.chain_of(to)
                    && !edged[v].contains(&from)
                    && structure.hands_on(from, to, &touches)
                {
                    hand_on.insert((v, self.chain_of(to)), from);
                }
            }
        }
        self.carry = carry;
        self.hand_on = hand_on;
        self.num_slots = n;
    }
}
