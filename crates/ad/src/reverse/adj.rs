//! The adjoint sweep: one reverse block `R(B)` per reachable primal block
//! `B`, run in the reverse order of the primal's execution, driven by what
//! the augmented primal left on the tape.
//!
//! Layout of the adjoint function:
//!
//! ```text
//! entry(shadows of dup arrays.., cotangents of the f64 results..):
//!     adj = zeros K                ; adjoint slots (only if K > 0)
//!     n = pop i64; t.d = zeros n   ; shadows of local arrays, last pushed first
//!     k = pop i64                  ; which `return` (only if several)
//!     ; seed: slot[returned value] += cotangent (or the carried sum starts
//!     ; from it), then jump R(return block)
//! R(B):
//!     pop the tape record of B (last pushed first); re-materialise constants
//!     adjoint of each instruction of B, last to first
//!     adjoints of B's parameters; flush SSA adjoints of outside values to
//!     slots, carried ones on as parameters of a new block
//!     pop edge number -> branch to the edge block of that predecessor, which
//!     adds the parameter adjoints to the slots of the branch arguments (or
//!     passes a carried one to R(pred), which adds it) and jumps to R(pred)
//! R(entry): return the adjoints of the `active` parameters
//! ```
//!
//! Within `R(B)` adjoints are SSA values ([`Adj::acc`]); an adjoint that
//! crosses reverse blocks is handed on as an SSA value too, along a chain
//! ([`Plan::chain_pred`]) or when it is carried ([`Plan::is_carried`],
//! [`Adj::far`]), and otherwise lives in the slot array (see
//! [`Plan::slot`]), except where its running sum goes straight from one
//! reverse block that adds to it to the next ([`Plan::hands_on`],
//! [`Adj::handed`]). An adjoint is read and reset to 0 where its value is
//! defined ([`Adj::take`]), so a loop that redefines a value every iteration
//! starts every reverse iteration from 0.

use super::checkpoint::Checkpoint;
use super::plan::{Edge, Plan, Recipe, TapeItem};
use super::{CallTarget, Calls, ReverseRequest};
use crate::partials::{self, Local, Partial};
use crate::AdError;
use adze_ir::{
    ArgActivity, Block, CmpCond, FuncBuilder, FuncId, Function, Inst, InstData, Opcode,
    RetActivity, Signature, Type, Value,
};
use cranelift_entity::SecondaryMap;
use std::collections::{BTreeMap, HashMap};

#[allow(clippy::too_many_arguments)]
pub(crate) fn build(
    primal: &Function,
    plan: &Plan,
    calls: &Calls,
    checkpoints: &[Checkpoint],
    req: &ReverseRequest,
    tape: u8,
    name: String,
    sig: Signature,
) -> Result<Function, AdError> {
    let mut a = Adj {
        primal,
        plan,
        calls,
        checkpoints,
        req,
        tape,
        out: Function::new(name, sig),
        rev: SecondaryMap::new(),
        slots: None,
        shadow: SecondaryMap::new(),
        block: None,
        map: HashMap::new(),
        acc: BTreeMap::new(),
        carried: SecondaryMap::new(),
        incoming: SecondaryMap::new(),
        far: HashMap::new(),
        handed: SecondaryMap::new(),
        dummies: HashMap::new(),
        edge_index: None,
        choices: HashMap::new(),
        params: SecondaryMap::new(),
        witnesses: SecondaryMap::new(),
        trips: None,
    };
    a.run()?;
    Ok(a.out)
}

struct Adj<'a> {
    /// The checkpointed loops' runners (`reverse::checkpoint`).
    checkpoints: &'a [Checkpoint],
    primal: &'a Function,
    plan: &'a Plan,
    calls: &'a Calls,
    req: &'a ReverseRequest,
    /// The tape the augmented primal recorded on; `tape + 1 + T` holds the
    /// adjoints of the primal's own traffic on tape `T`.
    tape: u8,
    out: Function,
    /// R(B) for each reachable primal block.
    rev: SecondaryMap<Block, Option<Block>>,
    /// The slot array, if any adjoint needs a slot.
    slots: Option<Value>,
    /// Primal array -> its shadow in the adjoint.
    shadow: SecondaryMap<Value, Option<Value>>,
    /// The block being emitted.
    block: Option<Block>,
    /// Within the current R(B): primal scalar -> its popped or
    /// re-materialised value. A hash map: cleared for every R(B), and holds
    /// only the few values R(B) reads, out of all the primal's.
    map: HashMap<Value, Value>,
    /// Within the current R(B): adjoint contributions not yet in a slot.
    /// For a value with a slot, the first contribution starts from the
    /// slot's value (see [`Adj::add`]), so the entry is the whole adjoint.
    acc: BTreeMap<Value, Value>,
    /// The adjoints that R(B) of a chain's block `B` hands to R(A) of the
    /// block before it (see [`Plan::chain_pred`]), by `A`.
    carried: SecondaryMap<Block, BTreeMap<Value, Value>>,
    /// The parameter adjoints a chain edge hands to R(A) as parameters of
    /// R(A), by `A`: `(branch argument, R(A)'s parameter)`, added to the
    /// argument's adjoint where R(A) starts (see [`Adj::chain_edge`]).
    incoming: SecondaryMap<Block, Vec<(Value, Value)>>,
    /// The running sums of carried adjoints (see [`Plan::is_carried`])
    /// that have left the reverse block that last added to them: block
    /// parameters that dominate the reverse blocks still to add to them.
    far: HashMap<Value, Value>,
    /// The running sums of adjoints with a slot that a reverse block hands
    /// on to the reverse of the primal block that adds to them next (see
    /// [`Plan::hands_on`]), by that block, where they are pending from the
    /// start: block parameters that dominate it.
    handed: SecondaryMap<Block, Vec<(Value, Value)>>,
    dummies: HashMap<Type, Value>,
    /// Within the current R(B): the popped incoming-edge number.
    edge_index: Option<Value>,
    /// Within the current R(B): the popped conditions of `min`/`max`
    /// ([`TapeItem::Choice`]) by the primal result, with the operands
    /// they select.
    choices: HashMap<Value, (Value, usize, usize)>,
    /// Primal parameter -> the adjoint's parameter for it.
    params: SecondaryMap<Value, Option<Value>>,
    /// The primal parameters the adjoint takes as witnesses
    /// (`Plan::adj_witnesses`): never read, passed on to runners.
    witnesses: SecondaryMap<Value, Option<Value>>,
    /// The trip array: per counted loop, as an f64, the number of the
    /// iteration whose reverse is running (counting down to 0).
    trips: Option<Value>,
}

impl Adj<'_> {
    fn internal(&self, reason: impl Into<String>) -> AdError {
        AdError::ReverseInternal {
            func: self.primal.name.clone(),
            reason: reason.into(),
        }
    }

    fn b(&mut self) -> FuncBuilder<'_> {
        let mut b = FuncBuilder::new(&mut self.out);
        if let Some(block) = self.block {
            b.switch_to_block(block);
        }
        b
    }

    fn active(&self, v: Value) -> bool {
        self.plan.is_active(self.primal, v)
    }

    fn run(&mut self) -> Result<(), AdError> {
        let entry = {
            let mut b = FuncBuilder::new(&mut self.out);
            let e = b.create_entry_block();
            b.switch_to_block(e);
            e
        };
        self.block = Some(entry);
        let params = self.out.params().to_vec();
        let mut next = 0;
        for &p in &self.plan.adj_params {
            let q = *params
                .get(next)
                .ok_or_else(|| self.internal("too few parameters"))?;
            self.params[p] = Some(q);
            next += 1;
        }
        // Witnesses, never read but passed on to the runners.
        for &p in &self.plan.adj_witnesses {
            let q = *params
                .get(next)
                .ok_or_else(|| self.internal("too few parameters"))?;
            self.witnesses[p] = Some(q);
            next += 1;
        }
        for (&p, act) in self.primal.params().iter().zip(&self.req.args) {
            if *act == ArgActivity::Dup {
                self.shadow[p] = Some(params[next]);
                next += 1;
            }
        }
        let cotangents = params[next..].to_vec();
        // The caller checked each array against its shadow; saying so again
        // here costs one compare per call and tells later passes (and the
        // JIT's bounds checks) that the two have one length, so a checked
        // `x[i]` proves `x.d[i]`.
        for &p in self.primal.params() {
            if let (Some(q), Some(sh)) = (self.params[p], self.shadow[p]) {
                let mut b = self.b();
                b.samelen(q, sh);
            }
        }
        if self.plan.num_slots > 0 {
            let k = i64::from(self.plan.num_slots);
            let mut b = self.b();
            let n = b.iconst(k);
            let s = b.zeros(n, crate::activity::ADJOINT_SLOTS);
            // Adjoints start at -0.0, the exact identity of IEEE addition
            // (+0.0 is not: 0.0 + -0.0 = 0.0), so a sum of adjoint
            // contributions has the same bits whether it starts in a slot,
            // in an SSA value or in a callee (see `add`).
            let minus_zero = b.fconst(-0.0);
            b.fill(s, minus_zero);
            self.slots = Some(s);
        }
        if !self.plan.loops.is_empty() {
            let k = self.plan.trip_slots() as i64;
            let mut b = self.b();
            let n = b.iconst(k);
            self.trips = Some(b.zeros(n, crate::activity::TRIP_SLOTS));
        }
        for arr in self.plan.length_items().into_iter().rev() {
            let name = format!("{}.d", self.primal.array_name(arr));
            let tape = self.tape;
            let mut b = self.b();
            let n = b.pop(tape, Type::I64);
            let sh = b.zeros(n, name);
            self.shadow[arr] = Some(sh);
        }
        // The frozen local arrays, whole (pushed at `return` after the
        // counters and the return's number, before the lengths above).
        for &a in self.plan.snapshots.iter().rev() {
            let name = format!("{}.snapshot", self.primal.array_name(a));
            let tape = self.tape;
            let mut b = self.b();
            let n = b.pop(tape, Type::I64);
            let copy = b.zeros(n, name);
            crate::rules::pop_elements(&mut b, tape, copy, n, Type::F64);
            let here = b.current_block();
            self.params[a] = Some(copy);
            self.block = here;
        }
        if self.plan.returns.is_empty() {
            // The primal never returns, so the adjoint is never called.
            let zeros = self.zero_results();
            self.b().ret(&zeros);
            return Ok(());
        }
        for &b in &self.plan.order {
            let r = self.b().create_block();
            self.rev[b] = Some(r);
        }
        let returns = self.plan.returns.clone();
        if returns.len() == 1 {
            self.seed(returns[0], &cotangents)?;
        } else {
            let tape = self.tape;
            let k = self.b().pop(tape, Type::I64);
            let targets: Vec<Block> = returns.iter().map(|_| self.b().create_block()).collect();
            self.dispatch(k, &targets);
            for (&ret, &t) in returns.iter().zip(&targets) {
                self.block = Some(t);
                self.seed(ret, &cotangents)?;
            }
        }
        for &b in self.plan.order.clone().iter().rev() {
            self.rev_block(b)?;
        }
        Ok(())
    }

    fn zero_results(&mut self) -> Vec<Value> {
        let n = self
            .req
            .args
            .iter()
            .filter(|a| **a == ArgActivity::Active)
            .count();
        (0..n).map(|_| self.b().fconst(-0.0)).collect()
    }

    /// In the current block: the cotangents of the values returned by the
    /// `return` of `ret_block` go to their slots; then jump to R(ret_block).
    fn seed(&mut self, ret_block: Block, cotangents: &[Value]) -> Result<(), AdError> {
        let term = self
            .primal
            .layout
            .last_inst(ret_block)
            .ok_or_else(|| self.internal("a return block without terminator"))?;
        if let InstData::Return { args } = self.primal.dfg.inst(term) {
            if matches!(self.req.ret, RetActivity::Active | RetActivity::Dup) {
                let mut j = 0;
                for (k, &a) in args.iter().enumerate() {
                    let ty = self.primal.dfg.value_type(a);
                    if ty == Type::Array {
                        let c = *cotangents
                            .get(j)
                            .ok_or_else(|| self.internal("too few cotangents"))?;
                        j += 1;
                        if self.plan.is_shadowed(a) && !self.req.ignored.contains(&k) {
                            self.seed_array(a, c)?;
                        }
                        continue;
                    }
                    if ty != Type::F64 {
                        continue;
                    }
                    let c = *cotangents
                        .get(j)
                        .ok_or_else(|| self.internal("too few cotangents"))?;
                    j += 1;
                    // An ignored result's cotangent is not differentiated.
                    if self.active(a) && !self.req.ignored.contains(&k) {
                        if self.plan.is_carried(a) {
                            self.far_add(a, c);
                        } else {
                            self.slot_add(a, c)?;
                        }
                    }
                }
            }
        }
        let enclosing: Vec<usize> = self.plan.enclosing(ret_block).collect();
        self.pop_trips(&enclosing)?;
        let r = self.rev_of(ret_block);
        self.b().jump(r, &[]);
        Ok(())
    }

    /// The cotangent `c` of the returned array `a` becomes its shadow's
    /// contents: `sh[i] = c[i]` for the elements both have. The shadow was
    /// just made (zeros, at the entry), so this is the sum the caller's
    /// own shadow holds, exactly (a store, not an add: `0.0 + -0.0` is
    /// `0.0`); the caller's adjoint checked `c` against the array (or
    /// passes its result's shadow, as long as it or longer, with zeros
    /// past the array's end). Leaves the builder after the copy loop.
    fn seed_array(&mut self, a: Value, c: Value) -> Result<(), AdError> {
        let sh = self.shadow_of(a)?;
        let mut b = self.b();
        let (nc, ns) = (b.len(c), b.len(sh));
        let shorter = b.icmp(CmpCond::Lt, nc, ns);
        let n = b.select(shorter, nc, ns);
        b.copy_loop(c, sh, n);
        self.block = b.current_block();
        Ok(())
    }

    /// Pops the counters of the counted `loops` (listed innermost first, so
    /// pushed in that order) into the trip array: the reverse enters them.
    fn pop_trips(&mut self, loops: &[usize]) -> Result<(), AdError> {
        if loops.is_empty() {
            return Ok(());
        }
        let trips = self.trips.ok_or_else(|| self.internal("no trip array"))?;
        let tape = self.tape;
        for &l in loops.iter().rev() {
            let slot = self.plan.checkpoint_slot(l);
            let n = match self.plan.trip_recipe(self.primal, l) {
                Some(r) => self.trip_count(r)?,
                None => self.b().pop(tape, Type::I64),
            };
            let mut b = self.b();
            let n = b.frombits(n);
            let i = b.iconst(l as i64);
            b.store(trips, i, n);
            // A checkpointed loop: where its last segment starts (pushed
            // before the counter; that segment's snapshot is on the tape).
            let mut last = None;
            if let Some(seg) = slot {
                let s = b.pop(tape, Type::I64);
                let f = b.frombits(s);
                let k = b.iconst(seg as i64);
                b.store(trips, k, f);
                if self.plan.checkpoint_every(l).is_some()
                    && !self.plan.checkpoint_binomial(self.primal, l)
                {
                    last = Some((s, seg));
                }
            }
            // Then the loop's invariants, pushed before its counter.
            let invariants: Vec<Value> = self.plan.invariants_of(l).collect();
            for v in invariants.into_iter().rev() {
                let slot = self
                    .plan
                    .invariant_slot(v, l)
                    .ok_or_else(|| self.internal("an invariant without a slot"))?;
                let ty = self.primal.dfg.value_type(v);
                let varies = self.pop_varies(v);
                let mut b = self.b();
                let x = b.pop_varying(tape, ty, varies);
                let x = if ty == Type::F64 { x } else { b.frombits(x) };
                let i = b.iconst(slot as i64);
                b.store(trips, i, x);
            }
            // A counted checkpointed loop that dropped its last segment's
            // records (a negative start): the runner recomputes it, from
            // its snapshot now on top, to the loop's exit (`stop` = -1).
            if let Some((s, seg)) = last {
                let (runner, taken) = self.runner(l)?;
                let mut b = self.b();
                let zero = b.iconst(0);
                let dropped = b.icmp(CmpCond::Lt, s, zero);
                let (again, on) = (b.create_block(), b.create_block());
                b.brif(dropped, again, &[], on, &[]);
                b.switch_to_block(again);
                let minus = b.iconst(-1);
                let no = b.bconst(false);
                let mut args = vec![minus, no];
                args.extend(taken);
                let call = b.call(runner, &args, &[Type::I64]);
                let start = b.func.dfg.first_result(call);
                let start = b.frombits(start);
                let k = b.iconst(seg as i64);
                b.store(trips, k, start);
                b.jump(on, &[]);
                b.switch_to_block(on);
                self.block = Some(on);
            }
        }
        Ok(())
    }

    /// Branches to `targets[idx]` (an i64 in `0..targets.len()`): a chain
    /// of compares, the last one choosing between the last two targets.
    fn dispatch(&mut self, idx: Value, targets: &[Block]) {
        let Some((&last, init)) = targets.split_last() else {
            return;
        };
        for (k, &t) in init.iter().enumerate() {
            let mut b = self.b();
            let kv = b.iconst(k as i64);
            let c = b.icmp(CmpCond::Eq, idx, kv);
            if k + 1 == init.len() {
                b.brif(c, t, &[], last, &[]);
                return;
            }
            let next = b.create_block();
            b.brif(c, t, &[], next, &[]);
            self.block = Some(next);
        }
        self.b().jump(last, &[]);
    }

    fn slot_index(&mut self, v: Value) -> Result<(Value, Value), AdError> {
        let (Some(slots), Some(s)) = (self.slots, self.plan.slot(v)) else {
            return Err(self.internal(format!("the adjoint of {v} has no slot")));
        };
        let i = self.b().iconst(i64::from(s));
        Ok((slots, i))
    }

    /// `slot[v] += c`.
    fn slot_add(&mut self, v: Value, c: Value) -> Result<(), AdError> {
        let (slots, i) = self.slot_index(v)?;
        let mut b = self.b();
        let x = b.load(slots, i);
        let y = b.fadd(x, c);
        b.store(slots, i, y);
        Ok(())
    }

    /// `adj(v) += c` for a carried adjoint outside the reverse blocks.
    fn far_add(&mut self, v: Value, c: Value) {
        let new = match self.far.remove(&v) {
            Some(old) => self.b().fadd(old, c),
            None => c,
        };
        self.far.insert(v, new);
    }

    /// `adj(v) += c` within the current reverse block.
    ///
    /// Contributions are summed strictly in reverse execution order, one at
    /// a time, starting from what is already in `v`'s slot (contributions
    /// from later blocks): `((slot + c₁) + c₂) + ..`. That order depends
    /// only on the order in which the primal executes its uses of `v`, not
    /// on how the code is cut into blocks or functions, which is what makes
    /// derivatives bit-identical whether or not calls were inlined. A
    /// carried adjoint starts from what a later reverse block handed on
    /// (`far`); a slot's running sum handed on is in `acc` from the start
    /// of the block (`handed`).
    fn add(&mut self, v: Value, c: Value) -> Result<(), AdError> {
        let new = match self.acc.get(&v) {
            Some(&old) => self.b().fadd(old, c),
            None => match self.far.remove(&v) {
                // Carried from a later reverse block.
                Some(old) => self.b().fadd(old, c),
                None if self.plan.slot(v).is_some() => {
                    let (slots, i) = self.slot_index(v)?;
                    let mut b = self.b();
                    let x = b.load(slots, i);
                    b.fadd(x, c)
                }
                None => c,
            },
        };
        self.acc.insert(v, new);
        Ok(())
    }

    /// The adjoint of `v` at its definition, which resets it to 0: the SSA
    /// contributions of this block plus its slot. `None` when nothing
    /// contributes (the adjoint is 0).
    fn take(&mut self, v: Value) -> Result<Option<Value>, AdError> {
        let c = self.acc.remove(&v).or_else(|| self.far.remove(&v));
        if self.plan.slot(v).is_none() {
            return Ok(c);
        }
        let (slots, i) = self.slot_index(v)?;
        let mut b = self.b();
        // An entry in `acc` (this block's, or handed on) already includes
        // the slot's value.
        let x = match c {
            Some(c) => c,
            None => b.load(slots, i),
        };
        let zero = b.fconst(-0.0);
        b.store(slots, i, zero);
        Ok(Some(x))
    }

    /// What the f64 value `v` of the primal, popped, varies with, as the
    /// adjoint's values (the parameters it takes): `None` when not known or
    /// when one of them is not taken ([`Plan::pushed_varies`]). Not a
    /// `.ckptf` witness: a callee's adjoint is never given one for the
    /// `mut` array its caller passes, so the same code inlined must not
    /// use one either.
    fn pop_varies(&self, v: Value) -> Option<Vec<Value>> {
        (self.plan.pushed_varies.get(&v)?.iter())
            .map(|&p| self.params[p])
            .collect()
    }

    /// The popped (or re-materialised) primal value `v` in this R(B).
    fn primal_value(&self, v: Value) -> Result<Value, AdError> {
        self.map
            .get(&v)
            .copied()
            .ok_or_else(|| self.internal(format!("{v} is not on the tape")))
    }

    /// Pops the record of segment `segment` of `block` (last
    /// pushed first) and emits the segment's recipes.
    fn segment_recipes(&mut self, block: Block, segment: u32) -> Result<(), AdError> {
        let tape = self.tape;
        let mut popped = Vec::new();
        for &(s, item) in self.plan.tape[block].iter().rev() {
            if s != segment {
                continue;
            }
            let (p, what) = match item {
                TapeItem::Value(v) => {
                    let ty = self.primal.dfg.value_type(v);
                    let varies = self.pop_varies(v);
                    let p = self.b().pop_varying(tape, ty, varies);
                    self.map.insert(v, p);
                    (p, super::aug::describe(self.primal, v))
                }
                TapeItem::Edge => {
                    let p = self.b().pop(tape, Type::I64);
                    self.edge_index = Some(p);
                    (p, format!("the edge {block} was entered by"))
                }
                TapeItem::Choice {
                    of,
                    on_true,
                    on_false,
                } => {
                    let p = self.b().pop(tape, Type::Bool);
                    self.choices.insert(of, (p, on_true, on_false));
                    let what = super::aug::describe(self.primal, of);
                    (p, format!("the choice of {what}"))
                }
            };
            if let adze_ir::ValueDef::Result { inst, .. } = *self.out.dfg.value_def(p) {
                self.out
                    .notes
                    .inst(inst, format!("tape {tape}: restores {what}"));
            }
            popped.push(what);
        }
        let mut recomputed = Vec::new();
        for &(s, r) in &self.plan.recipes[block] {
            if s == segment {
                self.recipe(r)?;
                recomputed.push(self.recipe_note(r));
            }
        }
        if let Some(rb) = self.block {
            let seg = if segment == 0 {
                String::new()
            } else {
                format!(" (after call {segment})")
            };
            if !popped.is_empty() {
                let note = format!("reverse of {block}{seg}: pops {}", popped.join(", "));
                self.out.notes.block(rb, note);
            }
            if !recomputed.is_empty() {
                let note = format!(
                    "reverse of {block}{seg}: recomputes {}",
                    recomputed.join(", ")
                );
                self.out.notes.block(rb, note);
            }
        }
        Ok(())
    }

    /// How a recipe obtains its value, for a note.
    fn recipe_note(&self, r: Recipe) -> String {
        let v = super::aug::describe(self.primal, r.value());
        match r {
            Recipe::Param(_) => format!("{v} = the adjoint's parameter"),
            Recipe::Inst(_) => format!("{v} by its instruction again"),
            Recipe::Invariant { lp, .. } => {
                format!("{v} from the trip array (taped once for loop {lp})")
            }
            Recipe::Iv { lp, step, .. } => {
                format!("{v} = start + {step}·iteration of loop {lp}")
            }
            Recipe::Same { of, .. } => {
                let of = super::aug::describe(self.primal, of);
                format!("{v} = {of}, a load of the same element")
            }
            Recipe::Arg { of, .. } => {
                let of = super::aug::describe(self.primal, of);
                format!("{v} = {of}, the one value its block receives")
            }
        }
    }

    /// Obtains a primal value in the current R(B) without the tape (see
    /// [`Recipe`]); its operands are known by then.
    fn recipe(&mut self, r: Recipe) -> Result<(), AdError> {
        let v = match r {
            Recipe::Param(p) => self.params[p]
                .ok_or_else(|| self.internal(format!("{p} is not a parameter of the adjoint")))?,
            Recipe::Inst(v) => {
                let adze_ir::ValueDef::Result { inst, .. } = *self.primal.dfg.value_def(v) else {
                    return Err(self.internal(format!("{v} has no instruction")));
                };
                let mut data = self.primal.dfg.inst(inst).clone();
                for a in data.args_mut() {
                    *a = self.primal_value(*a)?;
                }
                // A view made again: its `slice` succeeded in the primal.
                if let InstData::Ternary { op, .. } = &mut data {
                    if *op == Opcode::Slice {
                        *op = Opcode::View;
                    }
                }
                let ty = self.primal.dfg.value_type(v);
                let block = self.block.ok_or_else(|| self.internal("no block"))?;
                let new = self.out.dfg.make_inst(data, &[ty]);
                // A primal instruction recomputed (a load of a read-only
                // array, say) keeps its location.
                self.out.dfg.set_srcloc(new, self.primal.dfg.srcloc(inst));
                self.out.layout.append_inst(new, block);
                self.out.dfg.first_result(new)
            }
            Recipe::Same { of, .. } | Recipe::Arg { of, .. } => *self
                .map
                .get(&of)
                .ok_or_else(|| self.internal(format!("{of} is not known yet")))?,
            Recipe::Invariant { value, lp } => {
                let trips = self.trips.ok_or_else(|| self.internal("no trip array"))?;
                let slot = self
                    .plan
                    .invariant_slot(value, lp)
                    .ok_or_else(|| self.internal("an invariant without a slot"))?;
                let ty = self.primal.dfg.value_type(value);
                let mut b = self.b();
                let i = b.iconst(slot as i64);
                let x = b.load(trips, i);
                if ty == Type::F64 {
                    x
                } else {
                    b.tobits(x)
                }
            }
            Recipe::Iv { lp, init, step, .. } => {
                let trips = self.trips.ok_or_else(|| self.internal("no trip array"))?;
                let init = self.primal_value(init)?;
                let mut b = self.b();
                let i = b.iconst(lp as i64);
                let j = b.load(trips, i);
                let j = b.tobits(j);
                let offset = if step == 1 {
                    j
                } else {
                    let s = b.iconst(step);
                    b.imul(j, s)
                };
                b.iadd(init, offset)
            }
        };
        self.map.insert(r.value(), v);
        Ok(())
    }

    /// R(`b`) of a reachable primal block `b`.
    fn rev_of(&self, b: Block) -> Block {
        self.rev[b].expect("a reachable block")
    }

    fn dummy(&mut self, ty: Type) -> Value {
        if let Some(&d) = self.dummies.get(&ty) {
            return d;
        }
        let d = self.out.dfg.make_detached_value(ty);
        self.dummies.insert(ty, d);
        d
    }

    fn rev_block(&mut self, block: Block) -> Result<(), AdError> {
        self.block = Some(self.rev_of(block));
        self.map.clear();
        self.choices.clear();
        self.acc = std::mem::take(&mut self.carried[block]);
        // What a later reverse block handed on is pending here from the
        // start (nothing of this block's chain after it adds to it).
        for (v, c) in std::mem::take(&mut self.handed[block]) {
            if self.acc.insert(v, c).is_some() {
                return Err(self.internal(format!("the adjoint of {v} is handed on twice")));
            }
        }
        for (arg, adj) in std::mem::take(&mut self.incoming[block]) {
            self.add(arg, adj)?;
        }
        self.edge_index = None;
        // Records and recipes by segment (see `Plan::recipes`): the last
        // segment's first; an earlier one's where the sweep passes the call
        // ending it.
        let insts = self.primal.layout.block_insts(block);
        let mut segment = insts
            .iter()
            .filter(|&&i| matches!(self.primal.dfg.inst(i), InstData::Call { .. }))
            .count() as u32;
        self.segment_recipes(block, segment)?;
        for &inst in insts.iter().rev() {
            let data = self.primal.dfg.inst(inst);
            if data.opcode().is_terminator() {
                continue;
            }
            let is_call = matches!(data, InstData::Call { .. });
            // The adjoint code of `inst` (shadow loads and stores included)
            // has its location.
            // Inlined, the call's body would sit between the adjoints still
            // being summed and the code before it, in blocks of its own:
            // they go on as parameters of a new block, as opaque called as
            // inlined (see [`Adj::chain_edge`]).
            if is_call {
                self.continue_in_new_block();
            }
            let mark = self.out.dfg.inst_mark();
            self.rev_inst(inst)?;
            self.out
                .dfg
                .set_srclocs_since(mark, self.primal.dfg.srcloc(inst));
            if is_call {
                segment -= 1;
                self.segment_recipes(block, segment)?;
            }
        }
        // Block parameters are defined here: take their adjoints.
        let mut param_adj: Vec<Option<Value>> = Vec::new();
        for &p in self.primal.dfg.block_params(block) {
            param_adj.push(if self.active(p) { self.take(p)? } else { None });
        }
        if block == self.plan.entry {
            let mut results = Vec::new();
            for (k, act) in self.req.args.iter().enumerate() {
                if *act == ArgActivity::Active {
                    let v = match param_adj.get(k).copied().flatten() {
                        Some(v) => v,
                        None => self.b().fconst(-0.0),
                    };
                    results.push(v);
                }
            }
            if let Some((&v, _)) = self.acc.iter().next() {
                return Err(self.internal(format!("an adjoint of {v} is left in the entry")));
            }
            self.b().ret(&results);
            return Ok(());
        }
        if let Some(e) = self.plan.chain_pred(block) {
            return self.chain_edge(block, e, &param_adj);
        }
        // Each pending adjoint already includes its slot's value: store it,
        // unless it is handed on. A carried one, or one handed on, goes on
        // as a parameter of a new block, where the reverse blocks still to
        // add to it find it (they are dominated by this one).
        let pending: Vec<(Value, Value)> = std::mem::take(&mut self.acc).into_iter().collect();
        let mut carried = BTreeMap::new();
        for (v, c) in pending {
            if self.plan.slot(v).is_some() && self.plan.hands_on(v, block).is_none() {
                let (slots, i) = self.slot_index(v)?;
                self.b().store(slots, i, c);
            } else if self.plan.slot(v).is_some() || self.plan.is_carried(v) {
                carried.insert(v, c);
            } else {
                return Err(self.internal(format!("the adjoint of {v} has no slot")));
            }
        }
        if !carried.is_empty() {
            self.acc = carried;
            if self.acc.values().any(|&c| !self.is_param(c)) {
                self.continue_in_new_block();
            }
            for (v, c) in std::mem::take(&mut self.acc) {
                match self.plan.hands_on(v, block) {
                    Some(to) => self.handed[to].push((v, c)),
                    None => {
                        self.far.insert(v, c);
                    }
                }
            }
        }
        let edges = self.plan.preds[block].clone();
        if let Some(l) = self.plan.counted(block) {
            // Iteration 0 was entered by the entry edge; iteration j > 0 by
            // the back edge, whose source ran iteration j - 1.
            let lp = &self.plan.loops[l];
            let (entry, back) = (edges[lp.entry], edges[lp.back]);
            let trips = self.trips.ok_or_else(|| self.internal("no trip array"))?;
            let slot = self.plan.checkpoint_slot(l);
            let mut b = self.b();
            let i = b.iconst(l as i64);
            let j = b.load(trips, i);
            let j = b.tobits(j);
            let to_entry = b.create_block();
            let to_back = b.create_block();
            match slot {
                None => {
                    let zero = b.iconst(0);
                    let first = b.icmp(CmpCond::Eq, j, zero);
                    b.brif(first, to_entry, &[], to_back, &[]);
                }
                Some(seg) => {
                    // One compare on the hot path: `j` is at the start of
                    // its segment (0 for the first one) only at a boundary.
                    let k = b.iconst(seg as i64);
                    let s = b.load(trips, k);
                    let s = b.tobits(s);
                    let at = b.icmp(CmpCond::Eq, j, s);
                    let boundary = b.create_block();
                    b.brif(at, boundary, &[], to_back, &[]);
                    b.switch_to_block(boundary);
                    self.block = Some(boundary);
                    self.segment_boundary(l, seg, j, to_entry, to_back)?;
                }
            }
            let mut b = self.b();
            b.switch_to_block(to_back);
            let one = b.iconst(1);
            let j1 = b.isub(j, one);
            let j1 = b.frombits(j1);
            b.store(trips, i, j1);
            self.block = Some(to_back);
            self.edge(block, back, &param_adj)?;
            self.block = Some(to_entry);
            self.edge(block, entry, &param_adj)?;
            return Ok(());
        }
        match edges.as_slice() {
            [] => return Err(self.internal(format!("{block} has no predecessor"))),
            [e] => self.edge(block, *e, &param_adj)?,
            _ => {
                let idx = self
                    .edge_index
                    .ok_or_else(|| self.internal("no edge number"))?;
                let targets: Vec<Block> = edges.iter().map(|_| self.b().create_block()).collect();
                self.dispatch(idx, &targets);
                for (e, t) in edges.iter().zip(targets) {
                    self.block = Some(t);
                    self.edge(block, *e, &param_adj)?;
                }
            }
        }
        Ok(())
    }

    /// A trip count the augmented primal does not save:
    /// `max(bound - init, 0)` ([`Plan::trip_recipe`]).
    fn trip_count(&mut self, r: super::plan::TripRecipe) -> Result<Value, AdError> {
        let init = self.recompute_int(r.init)?;
        let bound = self.recompute_int(r.bound)?;
        let mut b = self.b();
        let runs = b.icmp(CmpCond::Lt, init, bound);
        let d = b.isub(bound, init);
        let zero = b.iconst(0);
        Ok(b.select(runs, d, zero))
    }

    /// An integer of a trip recipe in the adjoint: a constant, a parameter
    /// it has, or the length of an array parameter it has.
    fn recompute_int(&mut self, v: Value) -> Result<Value, AdError> {
        if let Some(k) = self.primal.iconst_value(v) {
            return Ok(self.b().iconst(k));
        }
        if let Some(q) = self.params[v] {
            return Ok(q);
        }
        if let adze_ir::ValueDef::Result { inst, .. } = *self.primal.dfg.value_def(v) {
            match *self.primal.dfg.inst(inst) {
                InstData::Unary {
                    op: Opcode::Len,
                    arg,
                } => {
                    if let Some(a) = self.params[arg] {
                        return Ok(self.b().len(a));
                    }
                }
                InstData::Binary {
                    op: op @ (Opcode::Iadd | Opcode::Isub | Opcode::Imul | Opcode::Idiv),
                    args: [x, y],
                } => {
                    let (x, y) = (self.recompute_int(x)?, self.recompute_int(y)?);
                    let mut b = self.b();
                    let inst = b.build(InstData::Binary { op, args: [x, y] }, &[Type::I64]);
                    return Ok(b.func.dfg.first_result(inst));
                }
                _ => {}
            }
        }
        Err(self.internal("a trip count's operand the adjoint does not have"))
    }

    /// The runner of checkpointed loop `l` and its arguments after `stop`.
    fn runner(&self, l: usize) -> Result<(FuncId, Vec<Value>), AdError> {
        let c = self
            .checkpoints
            .iter()
            .find(|c| c.l == l)
            .ok_or_else(|| self.internal("a checkpointed loop without a runner"))?;
        let mut args = Vec::new();
        for &a in &c.taken {
            let given = self.params[a].or(self.witnesses[a]);
            args.push(given.ok_or_else(|| self.internal("a runner's argument not taken"))?);
        }
        Ok((c.runner, args))
    }

    /// In the reverse of checkpointed loop `l`'s header, at iteration `j`,
    /// the first of the segment whose records were popped: one call of the
    /// runner drops that segment's snapshot (on the tape),
    /// then (for `j > 0`) runs the segment before, which pushes its records
    /// again; then on to `to_entry` (`j = 0`) or `to_back`, with the new
    /// segment's start noted.
    fn segment_boundary(
        &mut self,
        l: usize,
        seg: usize,
        j: Value,
        to_entry: Block,
        to_back: Block,
    ) -> Result<(), AdError> {
        let trips = self.trips.ok_or_else(|| self.internal("no trip array"))?;
        let (runner, taken) = self.runner(l)?;
        if let Some(here) = self.block {
            let tape = self.tape;
            self.out.notes.block(
                here,
                format!(
                    "tape {tape}: checkpointed loop {l}: the first iteration of a segment: \
                     recompute the segment before (its records)"
                ),
            );
        }
        let mut b = self.b();
        // The segment's snapshot is on the tape (the augmented primal
        // leaves the last segment's, a runner the one it ends with): drop
        // it first.
        let drop = b.bconst(true);
        let mut args = vec![j, drop];
        args.extend(taken);
        let call = b.call(runner, &args, &[Type::I64]);
        let start = b.func.dfg.first_result(call);
        let zero = b.iconst(0);
        let first = b.icmp(CmpCond::Eq, j, zero);
        let noted = b.create_block();
        b.brif(first, to_entry, &[], noted, &[]);
        b.switch_to_block(noted);
        let start = b.frombits(start);
        let k = b.iconst(seg as i64);
        b.store(trips, k, start);
        b.jump(to_back, &[]);
        Ok(())
    }

    /// The reverse of the edge `e` into `block`: parameter adjoints go to
    /// the branch arguments; then on to R(e.from).
    fn edge(&mut self, block: Block, e: Edge, param_adj: &[Option<Value>]) -> Result<(), AdError> {
        let data = self.primal.dfg.inst(e.inst);
        let dests = data.destinations();
        let call = dests
            .get(e.dest)
            .ok_or_else(|| self.internal("a bad edge"))?;
        if call.block != block {
            return Err(self.internal("an edge to another block"));
        }
        let args = call.args.clone();
        let r = self.rev_of(e.from);
        // A carried adjoint (the argument of a `jump`: R(e.from) is
        // entered from here only) is added where R(e.from) starts, as on a
        // chain edge.
        let mut passed = Vec::new();
        for (&arg, adj) in args.iter().zip(param_adj) {
            if let Some(adj) = *adj {
                if self.active(arg) {
                    if self.plan.is_carried(arg) {
                        self.pass_param_adjoint(e.from, arg, adj, &mut passed);
                    } else {
                        self.slot_add(arg, adj)?;
                    }
                }
            }
        }
        let exited = self.plan.exited(e, block);
        self.pop_trips(&exited)?;
        self.b().jump(r, &passed);
        Ok(())
    }

    /// The reverse of the chain edge `e` into `block`: every pending
    /// adjoint goes on to R(e.from) (which only this block reaches) instead
    /// of to a slot, and the parameter adjoints are added to the branch
    /// arguments' at the start of R(e.from); all of them as parameters of
    /// R(e.from) (a pending adjoint that already is a parameter stays an
    /// SSA value).
    ///
    /// Parameters, because a pass over this adjoint code (a derivative of
    /// a derivative) must find the same values opaque whether or not the
    /// primal's calls were inlined. Inlined, a call is a chain edge into
    /// the callee's entry block (which takes the arguments) or a join of
    /// its returns, and a chain edge out to the continuation (which takes
    /// the results); called, the callee's adjoint receives the results'
    /// cotangent as a parameter and returns the arguments' adjoints as call
    /// results, and the caller's pending adjoints cross the call as
    /// parameters of a new block ([`Adj::continue_in_new_block`]). Across a join
    /// they are carried ([`Plan::is_carried`]) and become parameters where
    /// they leave a reverse block. A parameter, a call result and a slot load
    /// are all leaves to the tape planner of the next order
    /// (`plan::tape::Resolver`), so it pops or recomputes the same values
    /// in every case; were they SSA arithmetic on one side only, it would
    /// recompute there and pop on the other, and the third order would sum
    /// `y·a + y·b` on one side and `y·(a + b)` on the other (seed 100223 of
    /// the differential fuzzer: crates/fuzz-diff/tests/known_bugs.rs).
    fn chain_edge(
        &mut self,
        block: Block,
        e: Edge,
        param_adj: &[Option<Value>],
    ) -> Result<(), AdError> {
        let data = self.primal.dfg.inst(e.inst);
        let args = match data.destinations().get(e.dest) {
            Some(call) if call.block == block => call.args.clone(),
            _ => return Err(self.internal("a bad chain edge")),
        };
        let r = self.rev_of(e.from);
        let mut passed = self.pass_pending(r);
        for (&arg, adj) in args.iter().zip(param_adj) {
            if let Some(adj) = *adj {
                if self.active(arg) {
                    self.pass_param_adjoint(e.from, arg, adj, &mut passed);
                }
            }
        }
        let exited = self.plan.exited(e, block);
        self.pop_trips(&exited)?;
        let acc = std::mem::take(&mut self.acc);
        self.carried[e.from] = acc;
        self.b().jump(r, &passed);
        Ok(())
    }

    /// Makes every pending adjoint that is not already a block parameter
    /// a parameter of `to`, which the current block is about to jump to
    /// with the returned arguments.
    fn pass_pending(&mut self, to: Block) -> Vec<Value> {
        let mut passed = Vec::new();
        let pending: Vec<(Value, Value)> = self.acc.iter().map(|(&v, &c)| (v, c)).collect();
        for (v, c) in pending {
            if !self.is_param(c) {
                passed.push(c);
                let p = self.out.dfg.append_block_param(to, Type::F64);
                self.acc.insert(v, p);
            }
        }
        passed
    }

    /// Is `c` a block parameter of the adjoint?
    fn is_param(&self, c: Value) -> bool {
        matches!(self.out.dfg.value_def(c), adze_ir::ValueDef::Param { .. })
    }

    /// Hands `adj`, the adjoint of a parameter whose branch argument is
    /// `arg`, to R(`from`) as a new parameter of R(`from`) (the jump to it
    /// passes `passed`), added to `arg`'s adjoint where R(`from`) starts.
    fn pass_param_adjoint(&mut self, from: Block, arg: Value, adj: Value, passed: &mut Vec<Value>) {
        let p = self
            .out
            .dfg
            .append_block_param(self.rev_of(from), Type::F64);
        passed.push(adj);
        self.incoming[from].push((arg, p));
    }

    /// Goes on in a new block, the adjoints still being summed becoming its
    /// parameters (those that are not parameters already).
    fn continue_in_new_block(&mut self) {
        let next = self.b().create_block();
        let passed = self.pass_pending(next);
        self.b().jump(next, &passed);
        self.block = Some(next);
    }

    fn rev_inst(&mut self, inst: Inst) -> Result<(), AdError> {
        let data = self.primal.dfg.inst(inst).clone();
        let results = self.primal.dfg.inst_results(inst).to_vec();
        match &data {
            InstData::Call { args, .. } => match self.calls[inst].as_ref() {
                Some(CallTarget::Split {
                    adj, acts, takes, ..
                }) => {
                    self.rev_call(*adj, acts, takes, args, &results)?;
                }
                Some(CallTarget::Rule {
                    apply, shadowed, ..
                }) => self.rev_rule(*apply, shadowed, args, &results)?,
                None => {
                    // Not differentiated: nothing active goes in, so what
                    // its results' adjoints add up to goes nowhere. An
                    // array result the caller made active (a store into
                    // it) still starts its life here: its shadow is cleared
                    // for the previous one, as at `zeros` (fuzzer seed
                    // 1200007: a loop kept the adjoint across iterations).
                    for &r in &results {
                        if self.active(r) {
                            self.take(r)?;
                        }
                    }
                    self.clear_result_shadows(&results)?;
                }
            },
            InstData::Push { arg, tape } => {
                // Its value was popped by a later `pop`, whose reverse pushed
                // that value's adjoint on the adjoint tape of `tape`.
                if self.primal.dfg.value_type(*arg) == Type::F64 {
                    let adj_tape = super::adjoint_tape(self.tape, *tape);
                    let g = self.b().pop(adj_tape, Type::F64);
                    if self.active(*arg) {
                        self.add(*arg, g)?;
                    }
                }
            }
            InstData::Pop {
                ty: Type::F64,
                tape,
                ..
            } => {
                let r = results[0];
                let g = if self.active(r) { self.take(r)? } else { None };
                let g = match g {
                    Some(g) => g,
                    None => self.b().fconst(-0.0),
                };
                let adj_tape = super::adjoint_tape(self.tape, *tape);
                self.b().push(adj_tape, g);
            }
            InstData::Binary {
                op: Opcode::Load,
                args: [a, i],
            } => {
                let r = results[0];
                if self.active(r) {
                    if let Some(g) = self.take(r)? {
                        let sh = self.shadow_of(*a)?;
                        let i = self.primal_value(*i)?;
                        let mut b = self.b();
                        let t = b.load(sh, i);
                        let t = b.fadd(t, g);
                        b.store(sh, i, t);
                    }
                }
            }
            InstData::Ternary {
                op: Opcode::Store,
                args: [a, i, x],
            } => {
                if self.plan.is_shadowed(*a) {
                    let sh = self.shadow_of(*a)?;
                    let i = self.primal_value(*i)?;
                    let mut b = self.b();
                    let g = b.load(sh, i);
                    let zero = b.fconst(0.0);
                    b.store(sh, i, zero);
                    if self.active(*x) {
                        self.add(*x, g)?;
                    }
                }
            }
            InstData::Binary {
                op: Opcode::Fill,
                args: [a, x],
            } => {
                if self.plan.is_shadowed(*a) {
                    let sh = self.shadow_of(*a)?;
                    if self.active(*x) {
                        let s = self.sum(sh);
                        self.add(*x, s)?;
                    }
                    let mut b = self.b();
                    let zero = b.fconst(0.0);
                    b.fill(sh, zero);
                }
            }
            InstData::Zeros { .. } => {
                let r = results[0];
                if self.plan.is_shadowed(r) {
                    // The start of this array's life: the shadow starts
                    // again from 0 for the previous (in primal order) one.
                    let sh = self.shadow_of(r)?;
                    let mut b = self.b();
                    let zero = b.fconst(0.0);
                    b.fill(sh, zero);
                }
            }
            _ => {
                if let [r] = results[..] {
                    if self.active(r) && partials::is_differentiable(data.opcode()) {
                        if let Some(g) = self.take(r)? {
                            self.local(&data, r, g)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The start of the lives of a call's array results, as at `zeros`:
    /// their shadows start again from 0 for the previous (in primal order)
    /// ones, after the callee's adjoint took them as cotangents.
    fn clear_result_shadows(&mut self, results: &[Value]) -> Result<(), AdError> {
        for &r in results {
            if self.primal.dfg.value_type(r) == Type::Array && self.plan.is_shadowed(r) {
                let sh = self.shadow_of(r)?;
                let mut b = self.b();
                let zero = b.fconst(0.0);
                b.fill(sh, zero);
            }
        }
        Ok(())
    }

    /// The shadow of the primal array `a`; for a view, the same view of
    /// its array's shadow, made here from the view's bounds (which the tape
    /// plan provides wherever the shadow is used: `Needs::view_bounds`).
    fn shadow_of(&mut self, a: Value) -> Result<Value, AdError> {
        if let Some(sh) = self.shadow[a] {
            return Ok(sh);
        }
        match self.primal.slice_parts(a) {
            Some([base, lo, hi]) => {
                let sh = self.shadow_of(base)?;
                let (lo, hi) = (self.primal_value(lo)?, self.primal_value(hi)?);
                // The primal's `slice` checked these bounds, and the shadow
                // has the array's length: an unchecked `view`.
                Ok(self.b().view(sh, lo, hi))
            }
            None => Err(self.internal(format!("the array {a} has no shadow"))),
        }
    }

    /// `x̄_i += ∂r/∂x_i · g` for the active operands of a local operation.
    fn local(&mut self, data: &InstData, r: Value, g: Value) -> Result<(), AdError> {
        let args = data.args().to_vec();
        let wanted: Vec<bool> = args.iter().map(|&v| self.active(v)).collect();
        let mut d = data.clone();
        for v in d.args_mut() {
            *v = match self.map.get(v) {
                Some(&m) => m,
                None => self.dummy(self.primal.dfg.value_type(*v)),
            };
        }
        let rv = match self.map.get(&r) {
            Some(&m) => m,
            None => self.dummy(Type::F64),
        };
        let local = match self.choices.get(&r) {
            Some(&(cond, on_true, on_false)) => Some(Local::Choose {
                cond,
                on_true,
                on_false,
            }),
            None => partials::local_derivative(&mut self.b(), &d, rv, &wanted),
        };
        match local {
            Some(Local::Partials(ps)) => {
                for (k, p) in ps.iter().enumerate() {
                    if !wanted.get(k).copied().unwrap_or(false) {
                        continue;
                    }
                    let c = match *p {
                        Partial::Zero => continue,
                        Partial::One => g,
                        Partial::MinusOne => self.b().fneg(g),
                        Partial::Value(pv) => self.b().fmul(pv, g),
                    };
                    self.add(args[k], c)?;
                }
            }
            Some(Local::Choose {
                cond,
                on_true,
                on_false,
            }) => {
                let zero = self.b().fconst(0.0);
                if wanted.get(on_true).copied().unwrap_or(false) {
                    let c = self.b().select(cond, g, zero);
                    self.add(args[on_true], c)?;
                }
                if wanted.get(on_false).copied().unwrap_or(false) {
                    let c = self.b().select(cond, zero, g);
                    self.add(args[on_false], c)?;
                }
            }
            None => {}
        }
        Ok(())
    }

    /// The reverse of an active call: the callee's adjoint, given the
    /// shadows of its `dup` arrays and the cotangents of its f64 results;
    /// its results are the adjoints of its `active` arguments.
    fn rev_call(
        &mut self,
        adj: FuncId,
        acts: &[ArgActivity],
        takes: &[bool],
        args: &[Value],
        results: &[Value],
    ) -> Result<(), AdError> {
        let mut call_args = Vec::new();
        for (&a, &take) in args.iter().zip(takes) {
            if take {
                call_args.push(self.primal_value(a)?);
            }
        }
        for (&a, act) in args.iter().zip(acts) {
            if *act == ArgActivity::Dup {
                call_args.push(self.shadow_of(a)?);
            }
        }
        call_args.extend(self.result_cotangents(results)?);
        let n_active = acts.iter().filter(|a| **a == ArgActivity::Active).count();
        let inst = self.b().call(adj, &call_args, &vec![Type::F64; n_active]);
        let adjs = self.out.dfg.inst_results(inst).to_vec();
        self.clear_result_shadows(results)?;
        let active_args = args
            .iter()
            .zip(acts)
            .filter(|(_, act)| **act == ArgActivity::Active)
            .map(|(&a, _)| a);
        for (a, adj) in active_args.zip(adjs) {
            self.add(a, adj)?;
        }
        Ok(())
    }

    /// The cotangents of a call's f64 results (0.0 for an inactive one)
    /// and array results (the result's shadow; an empty array for one
    /// without a shadow).
    fn result_cotangents(&mut self, results: &[Value]) -> Result<Vec<Value>, AdError> {
        let mut out = Vec::new();
        for &r in results {
            if self.primal.dfg.value_type(r) == Type::Array {
                let c = if self.plan.is_shadowed(r) {
                    self.shadow_of(r)?
                } else {
                    let name = format!("{}.d", self.primal.array_name(r));
                    let mut b = self.b();
                    let n = b.iconst(0);
                    b.zeros(n, name)
                };
                out.push(c);
                continue;
            }
            if self.primal.dfg.value_type(r) != Type::F64 {
                continue;
            }
            let c = if self.active(r) { self.take(r)? } else { None };
            out.push(match c {
                Some(c) => c,
                None => self.b().fconst(-0.0),
            });
        }
        Ok(out)
    }

    /// The reverse of a call with a reverse rule: `apply` pops the rule's
    /// inputs, calls the rule with the shadows of the shadowed arrays and the
    /// results' cotangents, and returns the adjoints of all f64 arguments;
    /// those of the active ones are added.
    fn rev_rule(
        &mut self,
        apply: FuncId,
        shadowed: &[bool],
        args: &[Value],
        results: &[Value],
    ) -> Result<(), AdError> {
        let mut call_args = Vec::new();
        for (&a, &s) in args.iter().zip(shadowed) {
            if s {
                call_args.push(self.shadow_of(a)?);
            }
        }
        call_args.extend(self.result_cotangents(results)?);
        let f64_args: Vec<Value> = args
            .iter()
            .copied()
            .filter(|&a| self.primal.dfg.value_type(a) == Type::F64)
            .collect();
        let inst = self
            .b()
            .call(apply, &call_args, &vec![Type::F64; f64_args.len()]);
        let adjs = self.out.dfg.inst_results(inst).to_vec();
        self.clear_result_shadows(results)?;
        for (a, adj) in f64_args.into_iter().zip(adjs) {
            if self.active(a) {
                self.add(a, adj)?;
            }
        }
        Ok(())
    }

    /// `Σ sh[j]`, as a loop; leaves the builder in the loop's exit block.
    fn sum(&mut self, sh: Value) -> Value {
        let mut b = self.b();
        let n = b.len(sh);
        let j0 = b.iconst(0);
        let s0 = b.fconst(0.0);
        let header = b.create_block();
        let body = b.create_block();
        let exit = b.create_block();
        b.jump(header, &[j0, s0]);
        b.switch_to_block(header);
        let j = b.append_block_param(header, Type::I64);
        let s = b.append_block_param(header, Type::F64);
        let c = b.icmp(CmpCond::Lt, j, n);
        b.brif(c, body, &[], exit, &[]);
        b.switch_to_block(body);
        let t = b.load(sh, j);
        let s1 = b.fadd(s, t);
        let one = b.iconst(1);
        let j1 = b.iadd(j, one);
        b.jump(header, &[j1, s1]);
        self.block = Some(exit);
        s
    }
}
