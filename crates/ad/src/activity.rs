//! Activity analysis for forward mode: which values carry a tangent.
//!
//! A value is *active* when its derivative with respect to the
//! differentiated inputs may be nonzero; only active values get tangent code.
//! For the request `dual x, const n, dup a` of
//!
//! ```text
//! function @f(x: f64, n: i64, a: arr) -> f64 {
//! block0(v0: f64, v1: i64, v2: arr):
//!     v3 = sitof v1        ; inactive: computed from an i64
//!     v4 = load v2, v1     ; active: loaded from the active array v2
//!     v5 = floor v0        ; inactive: piecewise constant
//!     v6 = fmul v3, v4     ; active
//!     return v6
//! }
//! ```
//!
//! the active values are `v0` (dual), `v2` (dup), `v4` and `v6`.
//!
//! The rules, iterated to a fixed point (block parameters in loops make the
//! analysis cyclic):
//! - `dual` scalar parameters and `dup` array parameters are active;
//! - the f64 result of a differentiable opcode ([`crate::partials::is_differentiable`])
//!   with an active operand is active; integer and boolean values never are,
//!   nor the results of `floor ceil round sign` (derivative 0 everywhere);
//! - a block parameter of type f64 is active when an argument passed to it by
//!   some branch is active;
//! - a `load` from an active array is active;
//! - a `call` with an active argument (scalar or array) has active f64
//!   and array results, and makes active every array it passes to a `mut` parameter of
//!   the callee (the callee may store active values into it);
//! - an array (a `zeros` array or a `mut` parameter that is `const` in the
//!   request) becomes active when an active value is stored or filled into it;
//!   a `slice` (a view) and the array it views are active together;
//!   A `const` parameter that becomes active gets a local shadow, zero on
//!   entry and discarded on return: its tangent is defined to be zero on
//!   entry and is not reported, but values loaded back from it after an
//!   active store carry the right tangent;
//! - the tape (`push`/`pop`, used by reverse-mode code) follows one
//!   convention in every forward derivative: each f64 `push` also pushes its
//!   tangents (zero when the value is inactive) and each f64 `pop` pops
//!   them. An f64 `pop` is active unless it says what it varies with
//!   (`pop T, f64 varies(..)`, which adjoints say of what their augmented
//!   primal pushed): then it is active when one of those is, so that a
//!   value pushed without a tangent is popped without one, as the same
//!   value recomputed would be. A value pushed by one function
//!   (an augmented primal) is often popped by another (its adjoint), so the
//!   decision cannot be local to a function; for the same reason a call to a
//!   function that uses the tape, directly or through its callees, is always
//!   differentiated, active arguments or not (see [`uses_tape`]), and so is
//!   a rule region whose callee does (it is the same call, collapsed);
//! - a rule region with rules (of either mode) is a call: its body is
//!   *opaque* (only primal code, nothing in it is active) and, when an
//!   argument is active, its results are active (the forward rule, or the
//!   callee's forward derivative, gives their tangents) as are the arrays it
//!   passes to `mut` parameters;
//! - the results of an `autodiff` request (a reverse one: forward requests
//!   were lowered before the analysis) are inactive.
//!
//! The analysis is conservative (a value marked active may have a zero
//! derivative) and never marks fewer values than the derivative needs.

use crate::context::Cache;
use crate::partials::is_differentiable;
use adze_ir::{
    ArgActivity, Block, FuncId, Function, InstData, Module, Opcode, Region, Type, Value,
};
use cranelift_entity::{EntitySet, SecondaryMap};
use std::collections::{HashMap, HashSet};

/// The active values of one function under one request.
#[derive(Clone, Debug, Default)]
pub struct Activity {
    active: EntitySet<Value>,
    /// Values whose activity is fixed, marked before the analysis and left
    /// by it ([`analyze_fixed`]).
    fixed: EntitySet<Value>,
}

impl Activity {
    /// Is `v` active? Values the function does not define are not.
    pub fn is_active(&self, v: Value) -> bool {
        self.active.contains(v)
    }

    fn mark(&mut self, v: Value) -> bool {
        if self.fixed.contains(v) {
            return false;
        }
        self.active.insert(v)
    }

    /// The active values, in entity order.
    pub fn active_values(&self) -> impl Iterator<Item = Value> + '_ {
        self.active.iter()
    }
}

/// The rule regions forward mode treats as calls ([`crate::rules::applied_regions`]:
/// rules not empty, no enclosing region with rules), and the blocks that
/// are *opaque*: inside such a region (nested regions
/// included), where only primal code is emitted because the region's
/// tangents come from a call placed before it (its forward rule, or the
/// forward derivative of its callee: rule identity).
pub fn forward_rule_regions(func: &Function) -> (Vec<Region>, EntitySet<Block>) {
    crate::rules::applied_regions(func)
}

/// Runs the analysis of `func` for the parameter activities `args` (one per
/// parameter; `module` gives the callees).
pub fn analyze(module: &Module, func: &Function, args: &[ArgActivity]) -> Activity {
    analyze_cached(&mut Cache::default(), module, func, args, &[])
}

/// [`analyze`], keeping in `cache` the summaries that cannot change in the
/// lowering in progress (and reusing those kept).
pub(crate) fn analyze_cached(
    cache: &mut Cache,
    module: &Module,
    func: &Function,
    args: &[ArgActivity],
    seeded: &[usize],
) -> Activity {
    analyze_in(cache, module, func, args, seeded, &mut Summaries::default())
}

/// What a call does with activity: which of the callee's results are active
/// and which of its parameters (`mut` arrays) end up active, for one pattern
/// of argument activities. Computed by analysing the callee itself, so that
/// a call is exactly as precise as the same code inlined: a result that does
/// not depend on an active argument stays inactive (and gets no tangent,
/// rather than a zero tangent that `NaN · 0` could turn into NaN), whether or
/// not the inliner ran.
#[derive(Clone)]
pub(crate) struct Summary {
    results: Vec<bool>,
    params: Vec<bool>,
}

/// Summaries of one analysis, and the functions being summarised (a call
/// into a function on this stack — recursion — is treated conservatively:
/// recursive calls are never inlined, so this costs no invariance).
#[derive(Default)]
struct Summaries {
    stack: Vec<FuncId>,
    memo: HashMap<SummaryKey, Summary>,
    /// How many answers so far depended on something that may change: a
    /// call into the stack (recursion, answered conservatively for this
    /// stack only), a declaration (a derivative being built) or a request
    /// not lowered yet. A summary computed without any is final for the
    /// lowering and goes into the context's cache (`Cache::activity`).
    unsettled: usize,
    /// Every local array (`zeros`) is active from the start, in callees
    /// too ([`analyze_with_locals`]); nothing is read from or written to
    /// the context's cache.
    locals: bool,
}

/// A callee, the activities of its arguments at a call, and its array
/// results the caller makes active (by number).
pub(crate) type SummaryKey = (FuncId, Vec<ArgActivity>, Vec<usize>);

/// [`analyze_cached`] for a checkpoint runner of a `.ckptf` derivative,
/// or a forward derivative of one: the values of `fixed` have the activity
/// it gives them (that of their counterparts in the augmented primal's
/// derivative of the same order, `reverse::checkpoint::runner_activity`);
/// the others (the popped snapshot, the runner's own values) are analysed.
/// A value the augmented primal computes from constants is popped by the
/// runner: without this, forward mode would give it a tangent, and a zero
/// tangent times an infinite partial is NaN where the taped derivative has
/// no term.
pub(crate) fn analyze_fixed(
    cache: &mut Cache,
    module: &Module,
    func: &Function,
    args: &[ArgActivity],
    fixed: &[(Value, bool)],
) -> Activity {
    let mut act = Activity {
        active: EntitySet::with_capacity(func.dfg.num_values()),
        fixed: EntitySet::new(),
    };
    for &(v, on) in fixed {
        act.fixed.insert(v);
        if on {
            act.active.insert(v);
        }
    }
    analyze_from(
        act,
        cache,
        module,
        func,
        args,
        &[],
        &mut Summaries::default(),
    )
}

/// [`analyze_cached`] as if every array a function makes (`zeros`) held
/// active values, in `func` and in every callee it reaches: what varies
/// with the contents of local arrays (and the arguments `args`). Reverse
/// mode's `plan/varies.rs` reads a value that varies with a local array's
/// contents as unknown, called or inlined alike: the local array of an
/// inlined callee is the caller's own, and a call's result that a callee
/// computes from its own local array varies here as the inlined code does.
pub(crate) fn analyze_with_locals(
    cache: &mut Cache,
    module: &Module,
    func: &Function,
    args: &[ArgActivity],
) -> Activity {
    let mut summaries = Summaries {
        locals: true,
        ..Summaries::default()
    };
    analyze_in(cache, module, func, args, &[], &mut summaries)
}

fn analyze_in(
    cache: &mut Cache,
    module: &Module,
    func: &Function,
    args: &[ArgActivity],
    seeded: &[usize],
    summaries: &mut Summaries,
) -> Activity {
    let act = Activity {
        active: EntitySet::with_capacity(func.dfg.num_values()),
        fixed: EntitySet::new(),
    };
    analyze_from(act, cache, module, func, args, seeded, summaries)
}

fn analyze_from(
    mut act: Activity,
    cache: &mut Cache,
    module: &Module,
    func: &Function,
    args: &[ArgActivity],
    seeded: &[usize],
    summaries: &mut Summaries,
) -> Activity {
    let (rule_regions, opaque) = forward_rule_regions(func);
    for (&p, a) in func.params().iter().zip(args) {
        if matches!(a, ArgActivity::Dual | ArgActivity::Dup) {
            act.mark(p);
        }
    }
    // The array results the caller makes active: active from the start,
    // as inlined into that caller (whose stores into them are not here).
    if !seeded.is_empty() {
        for (_, inst) in func.layout.insts() {
            if let InstData::Return { args } = func.dfg.inst(inst) {
                for &k in seeded {
                    if let Some(&v) = args.get(k) {
                        if func.dfg.value_type(v) == Type::Array {
                            act.mark(v);
                        }
                    }
                }
            }
        }
    }
    if summaries.locals {
        for (_, inst) in func.layout.insts() {
            if let InstData::Zeros {
                op: Opcode::Zeros, ..
            } = func.dfg.inst(inst)
            {
                act.mark(func.dfg.first_result(inst));
            }
        }
    }
    let is_f64 = |v: Value| func.dfg.value_type(v) == Type::F64;
    let mut tape = TapeUse::default();
    // Local arrays used only by loads and stores at constant indices (the
    // adjoint slots of reverse-mode code): activity per element, as the
    // SSA values they stand for would have. A slot that only ever holds a
    // constant (a seed) stays inactive although other slots of the array
    // are active, so no explicit zero tangent meets an infinite partial
    // where the same code in one block has no term at all.
    let elementwise = constant_index_arrays(func);
    // Keyed by (array, index): not an entity, and few arrays qualify.
    let mut active_elements: HashSet<(Value, i64)> = HashSet::new();
    let mut all_active: EntitySet<Value> = EntitySet::new();
    loop {
        let mut changed = false;
        for &r in &rule_regions {
            let rd = &func.regions[r];
            // As a call: an active argument, or a callee that uses the
            // tape (forward mode differentiates such a call whatever its
            // arguments, and so it does the region collapsed into one).
            // Or an array result this function makes active (as for a
            // call, `seeded_results`).
            if rd.args.iter().any(|&v| act.is_active(v))
                || summaries.locals
                || tape.uses(cache, module, rd.callee)
                || !seeded_results(func, &act, &rd.results).is_empty()
            {
                changed |= mark_call(
                    cache,
                    &mut act,
                    module,
                    func,
                    rd.callee,
                    &rd.args,
                    &rd.results,
                    summaries,
                );
            }
        }
        for (block, inst) in func.layout.insts() {
            // Nothing inside an opaque region is active, its internal block
            // parameters included: its results get their tangents from the
            // rule (or the callee's derivative) through `mark_call` above.
            if opaque.contains(block) {
                continue;
            }
            let data = func.dfg.inst(inst);
            let results = func.dfg.inst_results(inst);
            match data {
                InstData::Ternary {
                    op: Opcode::Store,
                    args: [a, i, x],
                } => {
                    if act.is_active(*x) {
                        changed |= act.mark(*a);
                        if elementwise.contains(*a) {
                            if let Some(k) = func.iconst_value(*i) {
                                changed |= active_elements.insert((*a, k));
                            }
                        }
                    }
                }
                InstData::Binary {
                    op: Opcode::Fill,
                    args: [a, x],
                } => {
                    if act.is_active(*x) {
                        changed |= act.mark(*a);
                        changed |= all_active.insert(*a);
                    }
                }
                InstData::Binary {
                    op: Opcode::Load,
                    args: [a, i],
                } => {
                    let element = if elementwise.contains(*a) && !all_active.contains(*a) {
                        func.iconst_value(*i)
                            .map(|k| active_elements.contains(&(*a, k)))
                    } else {
                        None
                    };
                    if element.unwrap_or_else(|| act.is_active(*a)) {
                        changed |= act.mark(results[0]);
                    }
                }
                InstData::Call { func: callee, args } => {
                    // Also when the caller made an array result active:
                    // the callee, analysed with it active, may make more
                    // of its results active.
                    if args.iter().any(|&v| act.is_active(v))
                        || summaries.locals
                        || tape.uses(cache, module, *callee)
                        || !seeded_results(func, &act, results).is_empty()
                    {
                        changed |= mark_call(
                            cache, &mut act, module, func, *callee, args, results, summaries,
                        );
                    }
                }
                // A view and the array it views share their elements, so
                // their activity: an active value stored through the view
                // makes the array active, and an active array its views.
                InstData::Ternary {
                    op: Opcode::Slice | Opcode::View,
                    args: [a, _, _],
                } => {
                    if act.is_active(*a) || act.is_active(results[0]) {
                        changed |= act.mark(*a);
                        changed |= act.mark(results[0]);
                    }
                }
                InstData::Autodiff { .. } => {}
                InstData::Pop {
                    ty: Type::F64,
                    varies,
                    ..
                } => {
                    let active = match varies {
                        None => true,
                        Some(vs) => vs.iter().any(|&v| act.is_active(v)),
                    };
                    if active {
                        changed |= act.mark(results[0]);
                    }
                }
                InstData::Jump { .. } | InstData::Brif { .. } => {
                    for dest in data.destinations() {
                        if !func.dfg.block_is_valid(dest.block) {
                            continue;
                        }
                        let params = func.dfg.block_params(dest.block);
                        for (&arg, &p) in dest.args.iter().zip(params) {
                            if is_f64(p) && act.is_active(arg) {
                                changed |= act.mark(p);
                            }
                        }
                    }
                }
                _ => {
                    if let [r] = results {
                        if is_f64(*r)
                            && is_differentiable(data.opcode())
                            && data.args().iter().any(|&v| act.is_active(v))
                        {
                            changed |= act.mark(*r);
                        }
                    }
                }
            }
        }
        if !changed {
            return act;
        }
    }
}

/// The name reverse mode gives its adjoint-slot arrays (`reverse/adj.rs`).
pub(crate) const ADJOINT_SLOTS: &str = "adj";

/// The name reverse mode gives an adjoint's trip array (`reverse/adj.rs`):
/// trip counts and the loop invariants it popped, each at a constant
/// index, tracked per element as the adjoint slots are (an invariant that
/// does not vary must not be read back with a tangent because another
/// one does, where the same code called takes it as a parameter).
pub(crate) const TRIP_SLOTS: &str = "trips";

/// The adjoint-slot arrays of `func` that only `load`, `store` (as the
/// array), `len` and `fill` use, every `load` and `store` at an `iconst` index: the
/// arrays whose activity can be tracked per element.
fn constant_index_arrays(func: &Function) -> EntitySet<Value> {
    let mut candidates: EntitySet<Value> = EntitySet::new();
    for (_, inst) in func.layout.insts() {
        // Only reverse mode's adjoint-slot arrays: they never cross a call,
        // whatever the inline setting, so their per-element activity is
        // the same everywhere. A user's array may be passed to a callee,
        // whose summary is per array: tracking its elements inlined only
        // would differ from the call (long-run seed 100732).
        if let InstData::Zeros { name, .. } = func.dfg.inst(inst) {
            if name.as_str() == ADJOINT_SLOTS || name.as_str() == TRIP_SLOTS {
                candidates.insert(func.dfg.first_result(inst));
            }
        }
    }
    if candidates.is_empty() {
        return candidates;
    }
    let mut bad: EntitySet<Value> = EntitySet::new();
    for (_, inst) in func.layout.insts() {
        let data = func.dfg.inst(inst);
        match data {
            InstData::Binary {
                op: Opcode::Load,
                args: [a, i],
            } => {
                if func.iconst_value(*i).is_none() {
                    bad.insert(*a);
                }
            }
            InstData::Ternary {
                op: Opcode::Store,
                args: [a, i, x],
            } => {
                if func.iconst_value(*i).is_none() {
                    bad.insert(*a);
                }
                bad.insert(*x);
            }
            InstData::Unary {
                op: Opcode::Len, ..
            } => {}
            // `fill a, x`: every element; an active `x` makes the whole
            // array active (below).
            InstData::Binary {
                op: Opcode::Fill,
                args: [_, x],
            } => {
                bad.insert(*x);
            }
            _ => data.for_each_use(|v| {
                bad.insert(v);
            }),
        }
    }
    for v in bad.iter() {
        candidates.remove(v);
    }
    candidates
}

/// A call (or a rule region) with an active argument: its f64 results are
/// active, and so is every array it passes to a `mut` parameter.
/// Does `func`, or any function it reaches, use the tape (`push`/`pop`)?
pub fn uses_tape(module: &Module, func: FuncId) -> bool {
    Cache::default().uses_tape(module, func)
}

/// `Cache::uses_tape`, memoized for one analysis (the module does not
/// change during it): a call's answer is asked in every round of a fixed
/// point.
#[derive(Default)]
pub(crate) struct TapeUse {
    uses: SecondaryMap<FuncId, Option<bool>>,
}

impl TapeUse {
    pub fn uses(&mut self, cache: &mut Cache, module: &Module, func: FuncId) -> bool {
        if let Some(known) = self.uses[func] {
            return known;
        }
        let answer = cache.uses_tape(module, func);
        self.uses[func] = Some(answer);
        answer
    }
}

#[allow(clippy::too_many_arguments)]
fn mark_call(
    cache: &mut Cache,
    act: &mut Activity,
    module: &Module,
    func: &Function,
    callee: FuncId,
    args: &[Value],
    results: &[Value],
    summaries: &mut Summaries,
) -> bool {
    let mut changed = false;
    let seeded = seeded_results(func, act, results);
    let summary = summarize(cache, act, module, func, callee, args, &seeded, summaries);
    for (k, &r) in results.iter().enumerate() {
        let active = summary
            .as_ref()
            .is_none_or(|s| s.results.get(k) == Some(&true));
        if matches!(func.dfg.value_type(r), Type::F64 | Type::Array) && active {
            changed |= act.mark(r);
        }
    }
    if module.is_valid(callee) {
        let params = &module.func(callee).sig.params;
        for (k, (&v, p)) in args.iter().zip(params).enumerate() {
            let active = summary
                .as_ref()
                .is_none_or(|s| s.params.get(k) == Some(&true));
            if p.ty == Type::Array && p.mutable && active {
                changed |= act.mark(v);
            }
        }
    }
    changed
}

/// The array results of a call (by number) that are active in the
/// caller: the callee is analysed with them active (`analyze_in`).
pub(crate) fn seeded_results(func: &Function, act: &Activity, results: &[Value]) -> Vec<usize> {
    results
        .iter()
        .enumerate()
        .filter(|(_, &r)| func.dfg.value_type(r) == Type::Array && act.is_active(r))
        .map(|(k, _)| k)
        .collect()
}

/// The seeds among `seeded` that change the analysis of `f` for `args`:
/// those whose returned arrays are not active at every `return` without
/// any seed. Seeding a value the least fixpoint holds already leaves it
/// unchanged, so dropping those seeds names the same derivative once (no
/// `.ar0` twin of a derivative whose result is active anyway).
pub(crate) fn needed_seeds(
    cache: &mut Cache,
    module: &Module,
    f: &Function,
    args: &[ArgActivity],
    seeded: &[usize],
) -> Vec<usize> {
    if seeded.is_empty() {
        return Vec::new();
    }
    let base = analyze_cached(cache, module, f, args, &[]);
    seeds_not_active(f, &base, seeded)
}

/// The seeds among `seeded` whose returned arrays `base` (the analysis
/// of `f` without seeds) does not make active at every `return`.
fn seeds_not_active(f: &Function, base: &Activity, seeded: &[usize]) -> Vec<usize> {
    let returned_active = |k: usize| {
        f.layout.insts().all(|(_, inst)| match f.dfg.inst(inst) {
            InstData::Return { args } => args.get(k).is_none_or(|&v| base.is_active(v)),
            _ => true,
        })
    };
    seeded
        .iter()
        .copied()
        .filter(|&k| !returned_active(k))
        .collect()
}

/// The summary of a call, or `None` to be conservative (every f64 result
/// and every `mut` array active): for a callee with a forward rule (the rule,
/// not the body, gives the tangents), without a body, or being summarised.
#[allow(clippy::too_many_arguments)]
fn summarize(
    cache: &mut Cache,
    act: &Activity,
    module: &Module,
    func: &Function,
    callee: FuncId,
    args: &[Value],
    seeded: &[usize],
    summaries: &mut Summaries,
) -> Option<Summary> {
    if !module.is_valid(callee) {
        return None;
    }
    let f = module.func(callee);
    if f.is_declaration() || summaries.stack.contains(&callee) {
        summaries.unsettled += 1;
        return None;
    }
    if f.meta.rules.forward.is_some() || f.params().len() != args.len() {
        return None;
    }
    let acts: Vec<ArgActivity> = args
        .iter()
        .map(|&v| match (func.dfg.value_type(v), act.is_active(v)) {
            (Type::F64, true) => ArgActivity::Dual,
            (Type::Array, true) => ArgActivity::Dup,
            _ => ArgActivity::Const,
        })
        .collect();
    // As `needed_seeds`, within this analysis: the callee is on the stack
    // while it is analysed, so recursion stays conservative and finite.
    let seeded = if seeded.is_empty() {
        Vec::new()
    } else {
        summaries.stack.push(callee);
        let base = analyze_in(cache, module, f, &acts, &[], summaries);
        summaries.stack.pop();
        seeds_not_active(f, &base, seeded)
    };
    let key = (callee, acts, seeded);
    if let Some(s) = summaries.memo.get(&key) {
        return Some(s.clone());
    }
    if let Some(s) = cache.activity.get(&key).filter(|_| !summaries.locals) {
        return Some(s.clone());
    }
    let before = summaries.unsettled;
    if f.layout
        .insts()
        .any(|(_, i)| f.dfg.inst(i).opcode() == Opcode::Autodiff)
    {
        summaries.unsettled += 1;
    }
    summaries.stack.push(callee);
    let a = analyze_in(cache, module, f, &key.1, &key.2, summaries);
    summaries.stack.pop();
    let settled = summaries.unsettled == before;
    let mut results = vec![false; f.sig.results.len()];
    for (_, inst) in f.layout.insts() {
        if let InstData::Return { args } = f.dfg.inst(inst) {
            for (k, &v) in args.iter().enumerate() {
                if let Some(slot) = results.get_mut(k) {
                    *slot |= a.is_active(v);
                }
            }
        }
    }
    let params = f.params().iter().map(|&p| a.is_active(p)).collect();
    let s = Summary { results, params };
    if settled && cache.is_active() && !summaries.locals {
        cache.activity.insert(key.clone(), s.clone());
    }
    summaries.memo.insert(key, s.clone());
    Some(s)
}
