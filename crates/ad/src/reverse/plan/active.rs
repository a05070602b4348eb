//! Activity-derived flags of the plan: which arrays get a shadow in the
//! adjoint, which instructions contribute to adjoints, and which active
//! values something adds to (*reached*).

use super::Plan;
use crate::activity;
use crate::context::Cache;
use crate::partials;
use adze_ir::{
    ArgActivity, Block, Function, Inst, InstData, Module, Opcode, RetActivity, Type, Value,
    ValueDef,
};
use cranelift_entity::{EntitySet, SecondaryMap};

/// A local array (a `zeros` array, or an array result of a call) that
/// needs a shadow in the adjoint.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ZerosSite {
    pub array: Value,
    /// The length operand of the `zeros`; `None` for a call's result (the
    /// augmented primal takes its `len` after the call).
    pub len: Option<Value>,
    /// `None` when the `zeros` sits in the entry block (it runs once; its
    /// length is pushed at `return`); otherwise the number of the running
    /// maximum threaded through the augmented primal's blocks.
    pub threaded: Option<usize>,
}

impl Plan {
    /// Does the array `a` have a shadow in the adjoint?
    pub fn is_shadowed(&self, a: Value) -> bool {
        self.shadowed.contains(a)
    }

    /// Can the reverse of `inst` (not a branch or `return`) add to the
    /// adjoints of its operands? A differentiable operation with an active
    /// result, a `store` or `fill` into a shadowed array, an f64 `push`, and
    /// a call that the pass differentiates (`super::plan_calls`: something
    /// active goes in and something differentiated comes out, or it uses
    /// the tape).
    pub(super) fn contributes(
        &self,
        cache: &mut Cache,
        module: &Module,
        func: &Function,
        inst: Inst,
        tape_use: &mut activity::TapeUse,
    ) -> bool {
        let data = func.dfg.inst(inst);
        let results = func.dfg.inst_results(inst);
        if let Some((a, _)) = data.array_write() {
            return self.is_shadowed(a);
        }
        match data {
            InstData::Push { .. } => true,
            InstData::Call { .. } => self.differentiates_call(cache, module, func, inst, tape_use),
            _ => {
                partials::is_differentiable(data.opcode())
                    && results.iter().any(|&r| self.is_active(func, r))
            }
        }
    }

    /// Is the call `inst` differentiated (split, or its reverse rule
    /// applied)? When it uses the tape (its traffic must stay balanced), or
    /// when an active value goes in and something differentiated comes
    /// out: an active result that something adds to
    /// ([`Plan::is_reached`]), or a shadowed array it may write (its adjoint
    /// must at least clear what it overwrites). Otherwise its body, inlined,
    /// would get no adjoint code either (nothing in it useful), and a split
    /// pair would only add zeros that `inf · 0` can turn into NaN at the
    /// next order. `super::plan_calls` and the adjoint slots
    /// ([`Plan::contributes`]) decide by this one test.
    pub(crate) fn differentiates_call(
        &self,
        cache: &mut Cache,
        module: &Module,
        func: &Function,
        inst: Inst,
        tape_use: &mut activity::TapeUse,
    ) -> bool {
        self.call_test(cache, module, func, inst, tape_use, |r| {
            self.is_active(func, r) && self.is_reached(r)
        })
    }

    /// A call that uses the tape, or that takes an active value and writes
    /// a shadowed array or has a result that `counts`.
    fn call_test(
        &self,
        cache: &mut Cache,
        module: &Module,
        func: &Function,
        inst: Inst,
        tape_use: &mut activity::TapeUse,
        counts: impl Fn(Value) -> bool,
    ) -> bool {
        let InstData::Call { func: callee, args } = func.dfg.inst(inst) else {
            return false;
        };
        if tape_use.uses(cache, module, *callee) {
            return true;
        }
        self.call_is_active(func, args)
            && (self.call_writes_shadow(module, func, inst)
                || func.dfg.inst_results(inst).iter().any(|&r| {
                    if func.dfg.value_type(r) == Type::Array {
                        self.is_shadowed(r)
                    } else {
                        counts(r)
                    }
                }))
    }

    pub(super) fn find_shadows(&mut self, func: &Function, args: &[ArgActivity], entry: Block) {
        let useful = |p: &Plan, v: Value| p.useful.contains(v) && p.varied.is_active(v);
        for (num, &p) in func.params().iter().enumerate() {
            if func.dfg.value_type(p) != Type::Array {
                continue;
            }
            match args.get(num) {
                Some(ArgActivity::Dup) => {
                    self.shadowed.insert(p);
                }
                _ => {
                    if func.array_is_writable(p) && useful(self, p) {
                        self.shadowed.insert(p);
                        self.const_shadows.push(p);
                    }
                }
            }
        }
        for &b in &self.order.clone() {
            for &inst in func.layout.block_insts(b) {
                // A view of a shadowed array has the view of its shadow
                // (`adj.rs`, `shadow_of`).
                if let InstData::Ternary {
                    op: Opcode::Slice | Opcode::View,
                    args: [a, _, _],
                } = func.dfg.inst(inst)
                {
                    if self.is_shadowed(*a) {
                        self.shadowed.insert(func.dfg.first_result(inst));
                    }
                }
                if let InstData::Zeros { len, .. } = func.dfg.inst(inst) {
                    let a = func.dfg.first_result(inst);
                    if useful(self, a) {
                        self.add_site(a, Some(*len), b == entry);
                    }
                }
                // An array a call returns is a new local array, as a
                // `zeros` is; the callee's adjoint gets its shadow as the
                // result's cotangent.
                if let InstData::Call { .. } = func.dfg.inst(inst) {
                    for &a in func.dfg.inst_results(inst) {
                        if func.dfg.value_type(a) == Type::Array && useful(self, a) {
                            self.add_site(a, None, b == entry);
                        }
                    }
                }
            }
        }
    }

    /// A local array site with a shadow: a `zeros` (`len` its operand) or
    /// a call's array result (`None`). Outside the entry block it may run
    /// many times, so the augmented primal threads the longest length.
    fn add_site(&mut self, array: Value, len: Option<Value>, in_entry: bool) {
        self.shadowed.insert(array);
        let threaded = if in_entry {
            None
        } else {
            self.num_threaded += 1;
            Some(self.num_threaded - 1)
        };
        self.zeros_sites.push(ZerosSite {
            array,
            len,
            threaded,
        });
    }

    /// Does the adjoint of the active value `v` receive anything: is there
    /// a chain of contributing instructions ([`Plan::contributes`]) from
    /// it to a seed (a differentiated result, a shadowed array)? A value
    /// can be active (varied, and useful: it reaches a seed through
    /// differentiable code) and still get nothing, when the path goes
    /// through a call that is not differentiated (no active argument in
    /// it, or nothing differentiated out). Inlined code then has no
    /// adjoint for it at all; a call's result that is not reached is
    /// therefore not differentiated by the callee either
    /// (`super::plan_calls`), instead of getting an explicit zero
    /// cotangent that `inf · 0` turns into NaN in the callee (long-run seed
    /// 100489).
    pub fn is_reached(&self, v: Value) -> bool {
        self.reached.contains(v)
    }

    /// Finds what [`Plan::is_reached`] answers: the least fixed point,
    /// sparsely (each value reached is visited once, and marks the active
    /// operands of its definition or the active incoming arguments of its
    /// block parameter), as usefulness is found; then makes every active
    /// f64 value that is not reached inactive.
    ///
    /// Which arrays have a shadow is not decided here: usefulness decides
    /// it, and every store into a shadowed array counts. A session-16
    /// version gave a shadow only to the local arrays something reached
    /// reads; but a call marks all its arguments when it counts, while
    /// inlined code marks only what its body reaches, so that made inlined
    /// code more precise than a call (NaN called, 0 inlined). It was taken
    /// back; the bug it was for was fixed in usefulness in session 23 (a
    /// rule call that is never differentiated makes nothing useful,
    /// `useful.rs`, `Useful::call`).
    pub(super) fn find_reached(
        &mut self,
        cache: &mut Cache,
        module: &Module,
        func: &Function,
        ret: RetActivity,
        ignored: &[usize],
    ) {
        let mut tape_use = activity::TapeUse::default();
        let mut reached = EntitySet::new();
        let mut work: Vec<Value> = Vec::new();
        let mut incoming: SecondaryMap<Block, Vec<(Inst, usize)>> = SecondaryMap::new();
        // Instructions whose active operands are marked already.
        let mut fired: EntitySet<Inst> = EntitySet::new();
        let mut reachable: EntitySet<Block> = EntitySet::new();
        let mark_args =
            |p: &Self, reached: &mut EntitySet<Value>, work: &mut Vec<Value>, args: &[Value]| {
                for &a in args {
                    if p.is_active(func, a) && reached.insert(a) {
                        work.push(a);
                    }
                }
            };
        for &b in &self.order {
            reachable.insert(b);
        }
        // The roots, and the incoming edges of each block.
        for &b in &self.order {
            for &inst in func.layout.block_insts(b) {
                let data = func.dfg.inst(inst);
                match data {
                    InstData::Return { args } if ret == RetActivity::Active => {
                        let seeds: Vec<Value> = args
                            .iter()
                            .enumerate()
                            .filter(|(k, _)| !ignored.contains(k))
                            .map(|(_, &a)| a)
                            .collect();
                        mark_args(self, &mut reached, &mut work, &seeds);
                    }
                    InstData::Return { .. } => {}
                    InstData::Jump { .. } | InstData::Brif { .. } => {
                        for (d, dest) in data.destinations().iter().enumerate() {
                            incoming[dest.block].push((inst, d));
                        }
                    }
                    // Stores, fills, pushes and calls feed shadows, the tape
                    // or a callee: conservatively reached. A call passes
                    // adjoints to its arguments when one of its results is
                    // reached (found below), it writes a shadowed array, or
                    // it uses the tape (what it pushes gets adjoints from
                    // the pops elsewhere).
                    InstData::Call { func: callee, .. } => {
                        // An array result with a shadow is a seed too: the
                        // callee's adjoint takes the shadow as its
                        // cotangent (fuzzer: f1(f0(x))[0] lost f0's part).
                        let reaches = func.dfg.inst_results(inst).is_empty()
                            || self.call_writes_shadow(module, func, inst)
                            || func.dfg.inst_results(inst).iter().any(|&r| {
                                func.dfg.value_type(r) == Type::Array && self.is_shadowed(r)
                            })
                            || tape_use.uses(cache, module, *callee);
                        if reaches && self.counts(cache, module, func, inst, &mut tape_use) {
                            fired.insert(inst);
                            mark_args(self, &mut reached, &mut work, data.args());
                        }
                    }
                    InstData::Push { .. }
                    | InstData::Ternary {
                        op: Opcode::Store, ..
                    }
                    | InstData::Binary {
                        op: Opcode::Fill, ..
                    } if self.counts(cache, module, func, inst, &mut tape_use) => {
                        fired.insert(inst);
                        mark_args(self, &mut reached, &mut work, data.args());
                    }
                    _ => {}
                }
            }
        }
        while let Some(v) = work.pop() {
            match *func.dfg.value_def(v) {
                ValueDef::Result { inst, .. } => {
                    let placed = func.layout.inst_block(inst);
                    if fired.contains(inst) || !placed.is_some_and(|b| reachable.contains(b)) {
                        continue;
                    }
                    if self.counts(cache, module, func, inst, &mut tape_use) {
                        fired.insert(inst);
                        mark_args(self, &mut reached, &mut work, func.dfg.inst(inst).args());
                    }
                }
                ValueDef::Param { block, num } => {
                    for &(inst, d) in &incoming[block] {
                        let dest = &func.dfg.inst(inst).destinations()[d];
                        if let Some(&a) = dest.args.get(num) {
                            mark_args(self, &mut reached, &mut work, &[a]);
                        }
                    }
                }
                _ => {}
            }
        }
        // What no seed reaches gets no adjoint at all: an active f64
        // value that is not reached is made inactive (no partials, tape,
        // slot or carried adjoint for it), as the same code behind a call
        // that is not differentiated gets none. Its adjoint could only be
        // a zero read from a slot or carried around a loop, and `0 · inf`
        // is NaN at the next order (fuzzer, seed 6100102: an accumulator
        // whose sum feeds only a rule call that is not differentiated).
        let unreached: Vec<Value> = (self.useful.iter())
            .filter(|&v| {
                func.dfg.value_is_valid(v)
                    && func.dfg.value_type(v) == Type::F64
                    && !reached.contains(v)
            })
            .collect();
        for v in unreached {
            self.useful.remove(v);
        }
        self.reached = reached;
    }

    /// Does `inst` count towards what is reached: does it contribute
    /// ([`Plan::contributes`]), or, for a call, does it pass the call test
    /// of `differentiates_call` while what is reached is being found (any
    /// active result counts)?
    fn counts(
        &self,
        cache: &mut Cache,
        module: &Module,
        func: &Function,
        inst: Inst,
        tape_use: &mut activity::TapeUse,
    ) -> bool {
        match func.dfg.inst(inst) {
            InstData::Call { .. } => self.call_test(cache, module, func, inst, tape_use, |r| {
                self.is_active(func, r)
            }),
            _ => self.contributes(cache, module, func, inst, tape_use),
        }
    }

    /// Does the call `inst` write a shadowed array: pass one to a `mut`
    /// parameter whose contents something useful may read after the call,
    /// or pass one to a `mut` parameter at all when its usefulness summary
    /// found an input useful ([`Usefulness::feeding`])?
    ///
    /// Writes into an array that nothing reads again give the call nothing
    /// to differentiate unless the callee reads what it wrote: an array
    /// read only before the call is shadowed when the code that reads it
    /// is this function's, inlined or not, and not when it is a callee's
    /// result that nothing here reads, so the shadow alone cannot decide.
    /// Fuzzer seed 83092: a rule with coefficient `log(y)` ran with `dret
    /// = 0` (`NaN · 0`) only where the function making its array was
    /// inlined; a rule's summary now marks nothing when nothing useful
    /// comes out (`useful.rs`). A callee that stores into the dead array
    /// and reads it back still counts, as its stores inlined do (seed
    /// 7000197).
    ///
    /// [`Usefulness::feeding`]: super::useful::Usefulness::feeding
    fn call_writes_shadow(&self, module: &Module, func: &Function, inst: Inst) -> bool {
        let InstData::Call { func: callee, args } = func.dfg.inst(inst) else {
            return false;
        };
        let dead = self.dead_after(inst);
        let feeding = self.feeding.contains(inst);
        module.is_valid(*callee)
            && (args
                .iter()
                .zip(&module.func(*callee).sig.params)
                .enumerate())
            .any(|(k, (&a, p))| {
                p.ty == Type::Array
                    && p.mutable
                    && self.is_shadowed(a)
                    && (feeding || !dead.contains(&k))
            })
    }
}
