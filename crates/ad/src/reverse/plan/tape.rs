//! The tape plan: what each reverse block reads from the primal, and
//! whether it pops it or obtains it by a [`Recipe`] ([`Resolver`]).

use super::Plan;
use crate::partials::{self, Local, Partial};
use crate::AdError;
use adze_ir::{
    Block, FuncBuilder, Function, Inst, InstData, InstFormat, Opcode, Signature, Type, Value,
    ValueDef,
};
use cranelift_entity::{EntitySet, SecondaryMap};
use std::collections::{HashMap, HashSet};

/// One entry of a block's tape record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TapeItem {
    /// A primal scalar that the block's adjoint reads.
    Value(Value),
    /// The number of the incoming edge the block was entered by (an i64);
    /// only for blocks with more than one incoming edge.
    Edge,
    /// Which operand an active `min`/`max` (any operation whose derivative
    /// is a [`Local::Choose`]) chose, a bool: the condition of its local
    /// derivative, computed by the augmented primal where the record is
    /// pushed, instead of the operands it is computed from, when those
    /// would be popped (`closest` and `dist` of k-means' `min(closest,
    /// dist)`). The adjoint pops it and adds the cotangent to operand
    /// `on_true` or `on_false`, as the rule's own condition would have.
    Choice {
        of: Value,
        on_true: usize,
        on_false: usize,
    },
}

/// How the adjoint obtains a primal scalar (or array) that a reverse block
/// reads without popping it. Recipes of a block run in order, after its
/// pops, so each one's operands are already known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recipe {
    /// A parameter of the primal that the adjoint receives as well.
    Param(Value),
    /// The value's defining instruction, emitted again: a constant, or a
    /// cheap pure operation (or a load from a read-only array) whose
    /// operands are known.
    Inst(Value),
    /// An induction variable of counted loop `lp`: `init + j·step`, where
    /// `j` is the loop's iteration number, kept by the adjoint in its trip
    /// array.
    Iv {
        value: Value,
        lp: usize,
        init: Value,
        step: i64,
    },
    /// A value defined outside counted loop `lp` (so the same in all its
    /// iterations), pushed once where the loop is left and kept by the
    /// adjoint in its trip array (see [`Plan::invariants`]).
    Invariant { value: Value, lp: usize },
    /// A `load` of the element another load of the same block reads, `of`
    /// (the same array value and index value, nothing that writes memory
    /// or calls between them): the same bits, taped or recomputed once
    /// (`x[i] * x[i]`, GMM's `qx[id] * qx[id]`). Both loads keep their own
    /// adjoints; only the tape has one entry less.
    Same { value: Value, of: Value },
    /// A parameter of a block with one incoming edge, which passes it
    /// `of`: the same bits, obtained as `of` is. An inlined callee's
    /// parameters are such (`term(x[i - 1], x[i])` inlined: its `a` and
    /// `b` are loads again instead of two pops per iteration).
    Arg { value: Value, of: Value },
}

impl Recipe {
    pub fn value(self) -> Value {
        match self {
            Recipe::Param(v)
            | Recipe::Inst(v)
            | Recipe::Iv { value: v, .. }
            | Recipe::Invariant { value: v, .. }
            | Recipe::Same { value: v, .. }
            | Recipe::Arg { value: v, .. } => v,
        }
    }
}

/// Recomputing a needed value may emit at most this many non-constant
/// instructions in the reverse block; beyond, the value is taped.
const RECOMPUTE_BUDGET: usize = 8;

/// What the reverse of one block reads from the primal.
#[derive(Clone, Copy)]
enum Need {
    /// A primal value.
    Value(Value),
    /// The condition of the [`Local::Choose`] derivative of the operation
    /// that defines `of`, whose two operands it is computed from: either
    /// both operands, or the condition itself ([`TapeItem::Choice`]).
    Choice {
        of: Value,
        args: [Value; 2],
        on_true: usize,
        on_false: usize,
    },
}

/// The values the reverse of one block reads, each with the segment of the
/// instruction that reads it (see [`Plan::recipes`]).
struct Needs<'a> {
    list: &'a mut Vec<(u32, Need)>,
    segment: u32,
}

impl Needs<'_> {
    fn push(&mut self, v: Value) {
        self.list.push((self.segment, Need::Value(v)));
    }

    /// The bounds of `a` if it is a view, and of the views it is made of:
    /// the adjoint slices the shadow alike where it uses `a`'s
    /// (`adj.rs`, `shadow_of`).
    fn view_bounds(&mut self, func: &Function, mut a: Value) {
        while let Some([base, lo, hi]) = func.slice_parts(a) {
            self.push(lo);
            self.push(hi);
            a = base;
        }
    }
}

/// The tape plan of one block under construction.
struct Resolver<'a> {
    plan: &'a Plan,
    func: &'a Function,
    block: Block,
    items: Vec<(u32, TapeItem)>,
    recipes: Vec<(u32, Recipe)>,
    /// What the segment being resolved pops. Hash sets here and in
    /// [`Attempt`]: a few values out of all the function's, and made anew
    /// per segment (per recomputation tried).
    popped: HashSet<Value>,
    /// The segment being resolved, and what it recomputes.
    segment: u32,
    recomputed: HashSet<Value>,
    /// Each load of the block by what it reads: `(epoch, array, index)`,
    /// the epoch counting the instructions before it that write memory or
    /// transfer control (see [`Recipe::Same`]); made once per block.
    loads: HashMap<Value, (u32, Value, Value)>,
    /// Per such key, the load of it the segment already knows.
    known_loads: HashMap<(u32, Value, Value), Value>,
}

/// A recomputation being tried: its recipes, and the values it would pop.
#[derive(Clone, Default)]
struct Attempt {
    recipes: Vec<Recipe>,
    leaves: Vec<Value>,
    seen: HashSet<Value>,
    budget: usize,
}

impl Resolver<'_> {
    /// Makes the primal value `v` known in the reverse block: recomputed if
    /// that pops at most one value, popped otherwise.
    fn resolve(&mut self, v: Value) -> Result<(), AdError> {
        if self.is_known(v) {
            return Ok(());
        }
        let key = self.loads.get(&v).copied();
        if let Some(&of) = key.and_then(|k| self.known_loads.get(&k)) {
            self.recomputed.insert(v);
            self.recipes
                .push((self.segment, Recipe::Same { value: v, of }));
            return Ok(());
        }
        let mut t = Attempt {
            budget: RECOMPUTE_BUDGET,
            ..Attempt::default()
        };
        if self.attempt(v, &mut t, true) && t.leaves.len() <= 1 {
            for leaf in t.leaves {
                self.tape(leaf)?;
            }
            for r in t.recipes {
                self.recomputed.insert(r.value());
                self.note_load(r.value());
                self.recipes.push((self.segment, r));
            }
            Ok(())
        } else {
            self.tape(v)
        }
    }

    /// The condition of a [`Need::Choice`]: computed again from its
    /// operands when both are known or can be recomputed without popping
    /// anything, taped as one bool otherwise (one entry instead of one or
    /// two values, and nothing for forward mode to tape beside it).
    fn resolve_choice(
        &mut self,
        of: Value,
        args: [Value; 2],
        on_true: usize,
        on_false: usize,
    ) -> Result<(), AdError> {
        let free = |v: Value| {
            let mut t = Attempt {
                budget: RECOMPUTE_BUDGET,
                ..Attempt::default()
            };
            self.attempt(v, &mut t, true) && t.leaves.is_empty()
        };
        if free(args[0]) && free(args[1]) {
            self.resolve(args[0])?;
            return self.resolve(args[1]);
        }
        self.items.push((
            self.segment,
            TapeItem::Choice {
                of,
                on_true,
                on_false,
            },
        ));
        Ok(())
    }

    fn tape(&mut self, v: Value) -> Result<(), AdError> {
        if !self.func.dfg.value_type(v).is_scalar() {
            return Err(AdError::ReverseUnsupported {
                func: self.func.name.clone(),
                what: format!("taping the array {v}"),
            });
        }
        self.popped.insert(v);
        self.note_load(v);
        self.items.push((self.segment, TapeItem::Value(v)));
        Ok(())
    }

    /// `v` is known: if it is a load of the block, the first known one of
    /// its element (see [`block_loads`]).
    fn note_load(&mut self, v: Value) {
        if let Some(&k) = self.loads.get(&v) {
            self.known_loads.entry(k).or_insert(v);
        }
    }

    fn is_known(&self, v: Value) -> bool {
        self.popped.contains(&v) || self.recomputed.contains(&v)
    }

    /// Can `v` be obtained from known values, recipes and popped leaves?
    fn attempt(&self, v: Value, t: &mut Attempt, root: bool) -> bool {
        if self.is_known(v) || t.seen.contains(&v) {
            return true;
        }
        let func = self.func;
        let plan = self.plan;
        let ok = if plan.is_available(v) {
            t.recipes.push(Recipe::Param(v));
            true
        } else if let Some((lp, init, step)) = plan.ivs[v] {
            if plan.in_loop(lp, self.block) && self.attempt(init, t, false) {
                t.recipes.push(Recipe::Iv {
                    value: v,
                    lp,
                    init,
                    step,
                });
                true
            } else {
                return self.leaf(v, t, root);
            }
        } else if is_constant(func, v) {
            t.recipes.push(Recipe::Inst(v));
            true
        } else if let Some(of) = plan.single_arg(func, v) {
            // Only when `of` pops nothing more, and keeps nothing more per
            // loop than `v` would: else `v` is the cheaper leaf.
            let mut trial = t.clone();
            let kept = |a: &Attempt| {
                let invariant = |r: &&Recipe| matches!(r, Recipe::Invariant { .. });
                a.recipes.iter().filter(invariant).count()
            };
            let v_kept = self.plan.invariant_loop(func, v, self.block).is_some();
            if !self.attempt(of, &mut trial, root)
                || trial.leaves.len() > t.leaves.len()
                || (v_kept && kept(&trial) > kept(t))
            {
                return self.leaf(v, t, root);
            }
            *t = trial;
            t.recipes.push(Recipe::Arg { value: v, of });
            true
        } else {
            match *func.dfg.value_def(v) {
                ValueDef::Result { inst, .. } if t.budget > 0 && self.recomputable(inst) => {
                    t.budget -= 1;
                    for &a in func.dfg.inst(inst).args() {
                        if func.dfg.value_type(a) == Type::Array && !plan.array_available(func, a) {
                            return self.leaf(v, t, root);
                        }
                        if !self.attempt(a, t, false) {
                            return false;
                        }
                    }
                    t.recipes.push(Recipe::Inst(v));
                    true
                }
                _ => return self.leaf(v, t, root),
            }
        };
        t.seen.insert(v);
        ok
    }

    /// `v` would be popped — unless it is the same in every iteration of a
    /// counted loop around the block, then it is kept once per loop.
    fn leaf(&self, v: Value, t: &mut Attempt, root: bool) -> bool {
        let ty = self.func.dfg.value_type(v);
        if matches!(ty, Type::F64 | Type::I64) {
            if let Some(lp) = self.plan.invariant_loop(self.func, v, self.block) {
                t.seen.insert(v);
                t.recipes.push(Recipe::Invariant { value: v, lp });
                return true;
            }
        }
        if root || !ty.is_scalar() {
            return false;
        }
        t.seen.insert(v);
        t.leaves.push(v);
        true
    }

    /// Is `inst` cheap, pure and unable to trap when emitted again with the
    /// operands it had (a load from a read-only array did not trap the
    /// first time, and the array has not changed)?
    ///
    /// From the opcode table: a computation with no effect that is emitted
    /// inline (no out-of-line routine: `sin` or `round` are not worth a
    /// second call), other than a constant; `load`; and `slice` (of an
    /// array the adjoint has: the view it made did not trap either).
    fn recomputable(&self, inst: Inst) -> bool {
        let op = self.func.dfg.inst(inst).opcode();
        op == Opcode::Load
            || op == Opcode::Slice
            || (op.effects().is_pure()
                && op.cost().is_some()
                && op.libcall().is_none()
                && !matches!(
                    op.format(),
                    InstFormat::FConst | InstFormat::IConst | InstFormat::BConst
                ))
    }
}

/// The loads of `block`, each with `(epoch, array, index)`: two loads with
/// one key read the same element with nothing between them that writes
/// memory or transfers control (the epoch counts those), so they give the
/// same bits ([`Recipe::Same`]). One pass over the block keeps the tape
/// plan linear in its size (a search per load was cubic: the review of
/// session 19 measured 87 s for a block of 4000 loads around a store).
fn block_loads(func: &Function, block: Block) -> HashMap<Value, (u32, Value, Value)> {
    let mut epoch = 0u32;
    let mut out = HashMap::new();
    for &inst in func.layout.block_insts(block) {
        let data = func.dfg.inst(inst);
        if let InstData::Binary {
            op: Opcode::Load,
            args: [a, i],
        } = *data
        {
            if let Some(&r) = func.dfg.inst_results(inst).first() {
                out.insert(r, (epoch, a, i));
            }
        }
        let e = data.opcode().effects();
        if e.writes || e.control {
            epoch += 1;
        }
    }
    out
}

/// Is `v` defined by `fconst`, `iconst` or `bconst`?
pub(crate) fn is_constant(func: &Function, v: Value) -> bool {
    match *func.dfg.value_def(v) {
        ValueDef::Result { inst, .. } => matches!(
            func.dfg.inst(inst),
            InstData::FConst { .. } | InstData::IConst { .. } | InstData::BConst { .. }
        ),
        _ => false,
    }
}

/// Which operands (and whether the result) of `data` the local derivative
/// reads, for the operands marked `wanted`: the partials are emitted into a
/// scratch function whose operands are block parameters, and the emitted
/// code and returned partials are searched for them. So the one table in
/// [`partials`] is also the one source of what reverse mode must tape.
pub(crate) fn partial_needs(
    func: &Function,
    data: &InstData,
    result: Value,
    wanted: &[bool],
) -> (Vec<bool>, bool, Option<(usize, usize)>) {
    let mut scratch = Function::new("scratch", Signature::default());
    let mut b = FuncBuilder::new(&mut scratch);
    let block = b.create_block();
    b.switch_to_block(block);
    let mut d = data.clone();
    let mut ops = Vec::new();
    for a in d.args_mut() {
        let p = b.append_block_param(block, func.dfg.value_type(*a));
        ops.push(p);
        *a = p;
    }
    let res = b.append_block_param(block, func.dfg.value_type(result));
    let local = partials::local_derivative(&mut b, &d, res, wanted);
    let mut used = EntitySet::new();
    for &inst in scratch.layout.block_insts(block) {
        scratch.dfg.inst(inst).for_each_use(|v| {
            used.insert(v);
        });
    }
    let mut choose = None;
    match local {
        Some(Local::Partials(ps)) => {
            for (k, p) in ps.iter().enumerate() {
                if let (Partial::Value(v), true) = (p, wanted.get(k).copied().unwrap_or(false)) {
                    used.insert(*v);
                }
            }
        }
        Some(Local::Choose {
            cond,
            on_true,
            on_false,
        }) => {
            used.insert(cond);
            choose = Some((on_true, on_false));
        }
        None => {}
    }
    (
        ops.iter().map(|&v| used.contains(v)).collect(),
        used.contains(res),
        choose,
    )
}

impl Plan {
    /// What each block's adjoint reads from the primal: the operands its
    /// partials use (asked of [`partials::local_derivative`] itself, in a
    /// scratch function), the indices of active loads and stores, the
    /// arguments of split calls that the callee's adjoint takes
    /// (`call_args`), and the incoming-edge number. Each is popped, or
    /// obtained by a [`Recipe`] when that needs at most one popped value.
    pub fn plan_tape(
        &mut self,
        func: &Function,
        call_args: &SecondaryMap<Inst, Vec<Value>>,
    ) -> Result<(), AdError> {
        for &b in &self.order.clone() {
            let mut r = Resolver {
                plan: self,
                func,
                block: b,
                items: Vec::new(),
                recipes: Vec::new(),
                popped: HashSet::new(),
                segment: 0,
                recomputed: HashSet::new(),
                loads: block_loads(func, b),
                known_loads: HashMap::new(),
            };
            if self.has_edge_item(b) {
                r.items.push((0, TapeItem::Edge));
            }
            let mut needs: Vec<(u32, Need)> = Vec::new();
            let mut segment = 0;
            for &inst in func.layout.block_insts(b) {
                let data = func.dfg.inst(inst);
                let results = func.dfg.inst_results(inst);
                if matches!(data, InstData::Call { .. }) {
                    segment += 1;
                }
                let mut needs = Needs {
                    list: &mut needs,
                    segment,
                };
                match data {
                    InstData::Binary {
                        op: Opcode::Load,
                        args: [a, i],
                    } => {
                        if self.is_active(func, results[0]) {
                            needs.push(*i);
                            needs.view_bounds(func, *a);
                        }
                    }
                    InstData::Ternary {
                        op: Opcode::Store,
                        args: [a, i, _],
                    } => {
                        if self.is_shadowed(*a) {
                            needs.push(*i);
                            needs.view_bounds(func, *a);
                        }
                    }
                    InstData::Binary {
                        op: Opcode::Fill,
                        args: [a, _],
                    } => {
                        if self.is_shadowed(*a) {
                            needs.view_bounds(func, *a);
                        }
                    }
                    InstData::Call { args, .. } => {
                        for &a in &call_args[inst] {
                            needs.push(a);
                        }
                        for &a in args {
                            if func.dfg.value_type(a) == Type::Array && self.is_shadowed(a) {
                                needs.view_bounds(func, a);
                            }
                        }
                    }
                    _ => {
                        let [res] = results else { continue };
                        if !partials::is_differentiable(data.opcode())
                            || !self.is_active(func, *res)
                        {
                            continue;
                        }
                        let wanted: Vec<bool> = data
                            .args()
                            .iter()
                            .map(|&a| self.is_active(func, a))
                            .collect();
                        let (ops, res_needed, choose) = partial_needs(func, data, *res, &wanted);
                        if let (Some((on_true, on_false)), &[a0, a1], false) =
                            (choose, data.args(), res_needed)
                        {
                            if ops == [true, true] {
                                needs.list.push((
                                    segment,
                                    Need::Choice {
                                        of: *res,
                                        args: [a0, a1],
                                        on_true,
                                        on_false,
                                    },
                                ));
                                continue;
                            }
                        }
                        for (k, &a) in data.args().iter().enumerate() {
                            if ops[k] {
                                needs.push(a);
                            }
                        }
                        if res_needed {
                            needs.push(*res);
                        }
                    }
                }
            }
            // A segment's choices last: an operand another partial needs
            // is then known, and the condition is computed from it.
            needs.sort_by_key(|&(segment, need)| (segment, matches!(need, Need::Choice { .. })));
            for (segment, need) in needs {
                if segment != r.segment {
                    r.segment = segment;
                    r.popped.clear();
                    r.recomputed.clear();
                    r.known_loads.clear();
                }
                match need {
                    Need::Value(v) => r.resolve(v)?,
                    Need::Choice {
                        of,
                        args,
                        on_true,
                        on_false,
                    } => r.resolve_choice(of, args, on_true, on_false)?,
                }
            }
            let (items, recipes) = (r.items, r.recipes);
            for (_, r) in &recipes {
                if let Recipe::Invariant { value, lp } = *r {
                    if !self.invariants.contains(&(value, lp)) {
                        self.invariants.push((value, lp));
                    }
                }
            }
            self.tape[b] = items;
            self.recipes[b] = recipes;
        }
        Ok(())
    }
}
