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
        if let Some((a, _)) = data.array_write() {
            return self.is_shadowed(a);
        }
        match data {
            InstData::Push { .. } => true,
            InstData::Call { .. } => self.differentiates_call(cache, module, func, inst, tape_use),
            _ => self.local_contributes(func, inst),
        }
    }

    /// A differentiable local operation with an active result: what may
    /// add to its operands' adjoints while [`Plan::is_reached`] is being
    /// found.
    fn local_contributes(&self, func: &Function, inst: Inst) -> bool {
        partials::is_differentiable(func.dfg.inst(inst).opcode())
            && (func.dfg.inst_results(inst).iter()).any(|&r| self.is_active(func, r))
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

    /// What is reached: the f64 values and the array roots whose adjoint
    /// or shadow something adds to that reaches a seed. A value can be
    /// varied and useful and still get no adjoint when its path to a seed
    /// goes through a call that is not differentiated (no active argument
    /// in it, or nothing differentiated out): inlined, such code has no
    /// adjoint at all; called, the call's result is not reached, so the
    /// callee does not differentiate it either, instead of getting an
    /// explicit zero cotangent that `inf · 0` turns into NaN (long-run
    /// seed 100489).
    ///
    /// The least fixed point, sparsely (each value visited once), from the
    /// seeds: the differentiated results (not `ignored` or `dead` ones),
    /// every shadowed array (so every store into one, and every call that
    /// writes or returns one, counts, as they always did), pushes, and calls
    /// that use the tape (their traffic must stay balanced). A reached value
    /// makes its definition count (an active local operation, a `load`, a
    /// call that passes the call test with any active result) and marks its
    /// operands; a block parameter marks its incoming arguments; an array,
    /// by its root, makes its writers count (`store`s and `fill`s into it
    /// or a view of it, calls that take it as a `mut` argument).
    ///
    /// Which arrays have a shadow is not decided here: usefulness decides
    /// it. A session-16 version gave a shadow only to the local arrays
    /// something reached reads; but a call marks all its arguments when it
    /// counts, while inlined code marks only what its body reaches, so that
    /// made inlined code more precise than a call (a local array read only
    /// by a rule call that is not differentiated, inside a callee: NaN
    /// called, 0 inlined). It was taken back; docs/ad-reverse.md, "Left to
    /// do", has the bug it was for.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reach(
        &self,
        cache: &mut Cache,
        module: &Module,
        func: &Function,
        ret: RetActivity,
        ignored: &[usize],
        dead: &[usize],
    ) -> EntitySet<Value> {
        let mut tape_use = activity::TapeUse::default();
        let mut reached: EntitySet<Value> = EntitySet::new();
        let mut work: Vec<Value> = Vec::new();
        let mut fired: EntitySet<Inst> = EntitySet::new();
        let mut incoming: SecondaryMap<Block, Vec<(Inst, usize)>> = SecondaryMap::new();
        // The instructions that write each array root.
        let mut writers: SecondaryMap<Value, Vec<Inst>> = SecondaryMap::new();
        let mark =
            |p: &Self, reached: &mut EntitySet<Value>, work: &mut Vec<Value>, vs: &[Value]| {
                for &a in vs {
                    let v = match func.dfg.value_type(a) {
                        Type::F64 if p.is_active(func, a) => a,
                        Type::Array if p.is_shadowed(a) => func.array_root(a),
                        _ => continue,
                    };
                    if reached.insert(v) {
                        work.push(v);
                    }
                }
            };
        // Every shadowed array is a seed: every store into it, and every
        // call that writes it or returns it, counts. Marking only the
        // arrays something reached reads would be more precise, but a
        // call marks all its arguments when it counts while inlined code
        // marks only what its body reaches, so the two would differ (a
        // local array read only by a rule call that is not differentiated:
        // NaN called, 0 inlined; and a callee's store into a `dead`
        // parameter, fuzzer seed 7000197).
        let n = func.params().len();
        for &p in func.params() {
            if func.dfg.value_type(p) == Type::Array && self.is_shadowed(p) {
                mark(self, &mut reached, &mut work, &[p]);
            }
        }
        let sites: Vec<Value> = self.zeros_sites.iter().map(|z| z.array).collect();
        mark(self, &mut reached, &mut work, &sites);
        for &b in &self.order {
            for &inst in func.layout.block_insts(b) {
                let data = func.dfg.inst(inst);
                match data {
                    InstData::Return { args } if ret == RetActivity::Active => {
                        let seeds: Vec<Value> = (args.iter().enumerate())
                            .filter(|(k, _)| !ignored.contains(k) && !dead.contains(&(n + k)))
                            .map(|(_, &a)| a)
                            .collect();
                        mark(self, &mut reached, &mut work, &seeds);
                    }
                    InstData::Jump { .. } | InstData::Brif { .. } => {
                        for (d, dest) in data.destinations().iter().enumerate() {
                            incoming[dest.block].push((inst, d));
                        }
                    }
                    InstData::Push { .. } => {
                        fired.insert(inst);
                        mark(self, &mut reached, &mut work, data.args());
                    }
                    InstData::Call { func: callee, args } => {
                        if tape_use.uses(cache, module, *callee) {
                            fired.insert(inst);
                            mark(self, &mut reached, &mut work, args);
                        }
                        let params = if module.is_valid(*callee) {
                            module.func(*callee).sig.params.as_slice()
                        } else {
                            &[]
                        };
                        for (&a, p) in args.iter().zip(params) {
                            if p.ty == Type::Array && p.mutable {
                                writers[func.array_root(a)].push(inst);
                            }
                        }
                    }
                    _ => {
                        if let Some((a, _)) = data.array_write() {
                            writers[func.array_root(a)].push(inst);
                        }
                    }
                }
            }
        }
        while let Some(v) = work.pop() {
            let mut fire: Vec<Inst> = Vec::new();
            match *func.dfg.value_def(v) {
                ValueDef::Result { inst, .. } => fire.push(inst),
                ValueDef::Param { block, num } => {
                    for &(inst, d) in &incoming[block] {
                        let dest = &func.dfg.inst(inst).destinations()[d];
                        if let Some(&a) = dest.args.get(num) {
                            mark(self, &mut reached, &mut work, &[a]);
                        }
                    }
                }
                _ => {}
            }
            if func.dfg.value_type(v) == Type::Array {
                fire.extend(writers[v].iter().copied());
            }
            for inst in fire {
                let placed = func.layout.inst_block(inst);
                if fired.contains(inst) || !placed.is_some_and(|b| self.reachable.contains(b)) {
                    continue;
                }
                let counts = self.counts(cache, module, func, inst, &mut tape_use);
                if counts {
                    fired.insert(inst);
                    mark(self, &mut reached, &mut work, func.dfg.inst(inst).args());
                }
            }
        }
        reached
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
    /// 100489). Found by [`Plan::reach`].
    pub fn is_reached(&self, v: Value) -> bool {
        self.reached.contains(v)
    }

    /// Finds what [`Plan::is_reached`] answers ([`Plan::reach`] with the
    /// final shadows), and makes every active f64 value that is not
    /// reached inactive.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn find_reached(
        &mut self,
        cache: &mut Cache,
        module: &Module,
        func: &Function,
        ret: RetActivity,
        ignored: &[usize],
        dead: &[usize],
    ) {
        let reached = self.reach(cache, module, func, ret, ignored, dead);
        // What no seed reaches gets no adjoint at all: an active f64
        // value that is not reached is made inactive (no partials, tape,
        // slot or carried adjoint for it), as the same code behind a call
        // that is not differentiated gets none. Its adjoint could only be
        // a zero read from a slot or carried around a loop, and `0 · inf`
        // is NaN at the next order (fuzzer, seed 6100102: an accumulator
        // whose sum feeds only a rule call that is not differentiated).
        let unreached: Vec<Value> = self
            .useful
            .iter()
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

    /// Does `inst` count towards what is reached ([`Plan::reach`]): does
    /// it contribute ([`Plan::contributes`]), is it a `load` with an
    /// active result (which adds to its array's shadow), or, for a call,
    /// does it pass the call test of `differentiates_call` while what is
    /// reached is being found (any active result counts)?
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
            InstData::Push { .. } => true,
            InstData::Binary {
                op: Opcode::Load, ..
            } => (func.dfg.inst_results(inst).iter()).any(|&r| self.is_active(func, r)),
            data => match data.array_write() {
                Some((a, _)) => self.is_shadowed(a),
                None => self.local_contributes(func, inst),
            },
        }
    }

    /// Does the call `inst` pass a shadowed array to a `mut` parameter?
    fn call_writes_shadow(&self, module: &Module, func: &Function, inst: Inst) -> bool {
        let InstData::Call { func: callee, args } = func.dfg.inst(inst) else {
            return false;
        };
        module.is_valid(*callee)
            && args
                .iter()
                .zip(&module.func(*callee).sig.params)
                .any(|(&a, p)| p.ty == Type::Array && p.mutable && self.is_shadowed(a))
    }
}
