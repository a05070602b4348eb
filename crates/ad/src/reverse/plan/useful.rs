//! Usefulness: which values can influence what the derivative
//! differentiates, and its summaries across calls.

use crate::activity;
use crate::context::Cache;
use crate::partials;
use adze_ir::{
    ArgActivity, Block, FuncId, Function, Inst, InstData, Module, Opcode, Param, RetActivity, Type,
    Value, ValueDef,
};
use cranelift_entity::{EntitySet, SecondaryMap};
use std::collections::{HashMap, HashSet};

/// Backward analysis: which values can influence what the derivative
/// differentiates — the f64 results (for `ret active`, except the results
/// numbered in `ignored`, whose cotangents the caller does not use) and the
/// final contents of `dup` `mut` arrays. The least fixed point over the
/// reachable blocks, found sparsely: a worklist of values found useful, each
/// visited once, that marks what its definition reads (an instruction's
/// operands, or a block parameter's incoming arguments) and what its uses
/// as an array feed (the value a `store` or `fill` writes into it, a call
/// that may write it). Round-robin iteration over the blocks would take one
/// round per level of loop nesting, each over the whole function.
///
/// A call is as precise as its callee's body inlined: which arguments are
/// useful is the callee's own analysis for the results and the `mut`
/// arrays that are useful here ([`UsefulSummaries`]), so an argument that
/// only feeds a result nobody uses, or a scratch array nobody reads, gets
/// no adjoint — as it gets none when the inliner has put the body here.
/// Calls to functions with rules (a rule takes every input) stay
/// conservative: every argument is useful, when the call can be
/// differentiated at all (a varied argument, a useful output that
/// varies). A callee that uses the tape is summarised too: what it pushes is useful, as in its inlined body. A call
/// is summarised again each time one of its results or `mut` array
/// arguments becomes useful, or a useful read comes to follow it; the
/// arguments marked are those of every summary (marks are not taken
/// back).
#[allow(clippy::too_many_arguments)]
pub(super) fn usefulness(
    cache: &mut Cache,
    module: &Module,
    func: &Function,
    varied: &activity::Activity,
    order: &[Block],
    args: &[ArgActivity],
    ret: RetActivity,
    ignored: &[usize],
    dead: &[usize],
    summaries: &mut UsefulSummaries,
) -> Usefulness {
    let mut state = Useful {
        dead,
        module,
        func,
        varied,
        useful: EntitySet::new(),
        work: Vec::new(),
        incoming: SecondaryMap::new(),
        feeds: SecondaryMap::new(),
        reachable: EntitySet::new(),
        tape_use: activity::TapeUse::default(),
        reads: SecondaryMap::new(),
        may_read: HashSet::new(),
        counted: HashSet::new(),
        pending: SecondaryMap::new(),
        waiting: HashSet::new(),
        retry: Vec::new(),
        after: HashMap::new(),
        param_reads: ParamReads::default(),
        feeding: EntitySet::new(),
    };
    for (num, &p) in func.params().iter().enumerate() {
        if args.get(num) == Some(&ArgActivity::Dup) && func.array_is_writable(p) {
            state.mark(p);
        }
    }
    let tape_calls = state.seed(cache, order, ret, ignored);
    for inst in tape_calls {
        state.call(cache, summaries, inst);
    }
    state.propagate(cache, summaries);
    let dead_after = state.dead_after(order);
    let params_read = (func.params().iter())
        .map(|&p| func.dfg.value_type(p).is_array() && !state.reads[p].is_empty())
        .collect();
    Usefulness {
        values: state.useful,
        dead_after,
        feeding: state.feeding,
        params_read,
    }
}

/// The state of [`usefulness`].
struct Useful<'a> {
    module: &'a Module,
    func: &'a Function,
    /// The values that depend on the derivative's inputs (forward
    /// activity): a rule call with no varied input, or whose useful
    /// outputs none varies, is never differentiated ([`Useful::call`]).
    varied: &'a activity::Activity,
    useful: EntitySet<Value>,
    /// Values found useful whose definition and uses are still to visit.
    work: Vec<Value>,
    /// The edges into each block from reachable blocks: (branch, number of
    /// the destination).
    incoming: SecondaryMap<Block, Vec<(Inst, usize)>>,
    /// The `store`s and `fill`s into each array value, and the calls that
    /// take it as a `mut` array argument.
    feeds: SecondaryMap<Value, Vec<Inst>>,
    reachable: EntitySet<Block>,
    tape_use: activity::TapeUse,
    /// The instructions that read the elements of each array usefully, by
    /// its root (`Function::array_root`): a load whose value is useful, a
    /// call whose callee reads that parameter usefully ([`ParamUse`]), a
    /// `return` of it when the results are differentiated, anything else
    /// that reads arrays (see [`Useful::read_after`]).
    reads: SecondaryMap<Value, Vec<Inst>>,
    /// The instructions that may read the elements of each array (by its
    /// root): the candidates for `reads`.
    may_read: HashSet<(Value, Inst)>,
    /// The pairs of `reads`, for membership.
    counted: HashSet<(Value, Inst)>,
    /// Per root, the writes into it (`store`, `fill`, a call taking it as a
    /// `mut` array) that no useful read followed when they were visited:
    /// visited again when the root gets a useful read.
    pending: SecondaryMap<Value, Vec<Inst>>,
    /// The pairs of `pending`, for membership.
    waiting: HashSet<(Value, Inst)>,
    /// Writes to visit again (from `pending`).
    retry: Vec<Inst>,
    /// The blocks reachable from a block's successors without entering a
    /// barrier block (the block that makes the array asked about, if it
    /// is made by an instruction), computed on use.
    after: HashMap<(Block, Option<Block>), EntitySet<Block>>,
    /// The `mut` array parameters (by number) whose contents the caller
    /// does not read after the call, and the array results (numbered after
    /// the parameters) it does not read (`ReverseRequest::dead`).
    dead: &'a [usize],
    /// Which array parameters callees may read.
    param_reads: ParamReads,
    /// See [`Usefulness::feeding`].
    feeding: EntitySet<Inst>,
}

/// `f` as its split derivative is built from: its applied rule regions
/// collapsed into calls of their owners (whose rules take every input);
/// `None` if that fails.
fn as_differentiated(f: &Function) -> Option<std::borrow::Cow<'_, Function>> {
    if crate::rules::applied_regions(f).0.is_empty() {
        return Some(std::borrow::Cow::Borrowed(f));
    }
    let mut copy = f.clone();
    crate::regions::collapse(&mut copy, |_| true).ok()?;
    copy.regions.clear();
    Some(std::borrow::Cow::Owned(copy))
}

/// The forward activities of parameters `params` when the arguments
/// marked in `varied` vary: `dual` scalars, `dup` arrays.
fn forward_activities(params: &[Param], varied: &[bool]) -> Vec<ArgActivity> {
    (params.iter().enumerate())
        .map(|(k, p)| match (p.ty, varied.get(k) == Some(&true)) {
            (Type::F64, true) => ArgActivity::Dual,
            (Type::Array, true) => ArgActivity::Dup,
            _ => ArgActivity::Const,
        })
        .collect()
}

/// Is parameter `k` of `params` a `mut` array?
fn mutable_array(params: &[Param], k: usize) -> bool {
    params
        .get(k)
        .is_some_and(|p| p.ty == Type::Array && p.mutable)
}

/// Do the array arguments `a` and `b` of call `call` provably share no
/// element? The front end makes such pairs for two views passed beside a
/// `mut` one (`g(a[0..2], a[2..4])`), and forward mode their tangents:
/// - views whose constant bounds, added up down to one root array, give
///   ranges that do not meet (`v[0..2]` of `v = a[0..4]` beside `a[2..4]`);
/// - two views of one array where the end of one is the start of the
///   other, the same value (`a[0..n]`, `a[n..4]`; their tangents `view
///   a.t, 0, n` and `view a.t, n, 4`);
/// - a `disjoint a, b` check (which traps when they meet) earlier in the
///   call's block.
///
/// Sound for any bounds that reach the call: a `slice` out of range traps
/// first, and a `view` out of range is empty (it reaches no element).
fn apart(func: &Function, call: Inst, a: Value, b: Value) -> bool {
    // `(base, lo, hi)` of a `slice` or `view`.
    let view = |v: Value| match func.def_inst(v)? {
        InstData::Ternary {
            op: Opcode::Slice | Opcode::View,
            args: [base, lo, hi],
        } => Some((*base, *lo, *hi)),
        _ => None,
    };
    // The elements `v` may reach, as a range of its root array (a view of
    // a view adds its start), when every bound on the way is a constant.
    let absolute = |mut v: Value| -> Option<(Value, i64, i64)> {
        let (mut lo, mut hi) = (0i64, i64::MAX);
        for _ in 0..16 {
            let Some((base, l, h)) = view(v) else {
                return Some((v, lo, hi));
            };
            let (l, h) = (func.iconst_value(l)?, func.iconst_value(h)?);
            // `v` is elements `l .. h` of `base`: the range so far, within
            // `v`, moves by `l` and stays within `h`.
            let (nl, nh) = (l.checked_add(lo)?, l.saturating_add(hi).min(h));
            (lo, hi, v) = (nl, nh, base);
        }
        None
    };
    if let (Some((ra, la, ha)), Some((rb, lb, hb))) = (absolute(a), absolute(b)) {
        if ra == rb && (ha <= lb || hb <= la || la >= ha || lb >= hb) {
            return true;
        }
    }
    if let (Some((ba, la, ha)), Some((bb, lb, hb))) = (view(a), view(b)) {
        if ba == bb && (ha == lb || hb == la) {
            return true;
        }
    }
    let Some(block) = func.layout.inst_block(call) else {
        return false;
    };
    func.layout
        .block_insts(block)
        .iter()
        .take_while(|&&i| i != call)
        .any(|&i| match func.dfg.inst(i) {
            InstData::Binary {
                op: Opcode::Disjoint,
                args: [x, y],
            } => (*x, *y) == (a, b) || (*x, *y) == (b, a),
            _ => false,
        })
}

/// Does an instruction of this opcode (not a call) read the elements of
/// the arrays it takes? All but writes, lengths and views do.
fn reads_arrays(op: Opcode) -> bool {
    !matches!(
        op,
        Opcode::Store | Opcode::Fill | Opcode::Len | Opcode::SameLen | Opcode::Slice | Opcode::View
    )
}

/// Per function, whether it may read the elements of each array parameter
/// (transitively through its calls), on the code its derivative is built
/// from (rule regions collapsed into calls, as the caller's own analysis
/// sees an inlined callee with rules): `None` (every one) for a
/// declaration, a function with rules (a rule takes every input), and a
/// function on a cycle of calls (recursion: the same answer whichever
/// function of the cycle is asked first).
#[derive(Default)]
struct ParamReads {
    memo: HashMap<FuncId, Option<Vec<bool>>>,
    stack: Vec<FuncId>,
    /// Summaries asked of a function on the stack, so far.
    cycles: usize,
}

impl ParamReads {
    /// The arrays whose elements `inst` of `f` may read: a call's
    /// arguments its callee may read ([`ParamReads::reads`]), every array
    /// operand of anything else but a write, a length or a view.
    fn arrays_read(&mut self, module: &Module, f: &Function, inst: Inst) -> Vec<Value> {
        let data = f.dfg.inst(inst);
        let is_array = |v: &Value| f.dfg.value_type(*v).is_array();
        match data {
            InstData::Call { func: g, args } if args.iter().any(is_array) => {
                let reads = self.reads(module, *g);
                (args.iter().enumerate())
                    .filter(|&(k, a)| {
                        is_array(a) && reads.as_ref().is_none_or(|r| r.get(k) != Some(&false))
                    })
                    .map(|(_, &a)| a)
                    .collect()
            }
            InstData::Call { .. } => Vec::new(),
            _ if reads_arrays(data.opcode()) => {
                let mut out = Vec::new();
                data.for_each_use(|v| {
                    if is_array(&v) {
                        out.push(v);
                    }
                });
                out
            }
            _ => Vec::new(),
        }
    }

    fn reads(&mut self, module: &Module, id: FuncId) -> Option<Vec<bool>> {
        if let Some(r) = self.memo.get(&id) {
            return r.clone();
        }
        if !module.is_valid(id) {
            return None;
        }
        if self.stack.contains(&id) {
            self.cycles += 1;
            return None;
        }
        let f = module.func(id);
        let collapsed = if f.is_declaration() || !f.meta.rules.is_empty() {
            None
        } else {
            as_differentiated(f)
        };
        let Some(f) = collapsed else {
            self.memo.insert(id, None);
            return None;
        };
        let f = f.as_ref();
        let before = self.cycles;
        self.stack.push(id);
        let params = f.params().to_vec();
        let mut out = vec![false; params.len()];
        for (_, inst) in f.layout.insts() {
            for v in self.arrays_read(module, f, inst) {
                if let Some(p) = params.iter().position(|&p| p == f.array_root(v)) {
                    out[p] = true;
                }
            }
        }
        self.stack.pop();
        let out = (self.cycles == before).then_some(out);
        self.memo.insert(id, out.clone());
        out
    }
}

/// What [`usefulness`] finds: the useful values, and per call the `mut`
/// array parameters whose contents nothing useful reads after it (their
/// callee is requested with them `dead`, as its body inlined would find
/// the stores into them dead).
pub(crate) struct Usefulness {
    pub values: EntitySet<Value>,
    pub dead_after: HashMap<Inst, Vec<usize>>,
    /// The calls whose summaries marked an argument other than a `mut`
    /// array that nothing reads after the call (such an array is useful in
    /// the callee by seeding alone). A call that writes only such arrays
    /// and has no result anything adds to is differentiated only if it is
    /// one of these: otherwise nothing that goes in can get an adjoint, as
    /// nothing in its body inlined would (`Plan::call_writes_shadow`).
    pub feeding: EntitySet<Inst>,
    /// Per parameter: an array with a useful read (see [`ParamUse`]).
    pub params_read: Vec<bool>,
}

impl Useful<'_> {
    /// May the elements of array `a` be read after `inst` (which writes
    /// them, or passes `a` to a `mut` parameter)? Always for a parameter
    /// that the caller may read after the call (not `dead`); else when a
    /// read of `a`'s root follows `inst` in its block or lies in a block
    /// reachable from there without passing the root's definition again.
    /// A store no read follows is dead to the
    /// derivative: called, the store after a call that read the array is in
    /// the caller, which never reads that result again, and gets no
    /// adjoint; inlined, the same store must get none either (fuzzer seed
    /// 4800170: `0 · NaN` under `--inline late`). And the other way round:
    /// a callee's store into a `mut` parameter that its caller never reads
    /// after the call is dead inlined, so the callee is requested with that
    /// parameter `dead` (seed 5200132).
    fn read_after(&mut self, inst: Inst, a: Value) -> bool {
        let func = self.func;
        let root = func.array_root(a);
        if let ValueDef::Param { block, num } = *func.dfg.value_def(root) {
            if Some(block) == func.entry_block() && !self.dead.contains(&num) {
                return true;
            }
        }
        let Some(b) = func.layout.inst_block(inst) else {
            return true;
        };
        if self.reads[root].is_empty() {
            return false;
        }
        let insts = func.layout.block_insts(b);
        let at = insts.iter().position(|&i| i == inst).unwrap_or(0);
        if self.reads[root]
            .iter()
            .any(|&r| insts[at + 1..].contains(&r))
        {
            return true;
        }
        // A `zeros` that runs again makes a new array: a read that only a
        // path through the root's own definition reaches reads another
        // array (a scratch array made in a loop, written at the end of one
        // iteration and read in the next one's fresh copy: the review of
        // session 20, `0 · inf` under `--inline early`). Arrays never pass
        // through block parameters, so nothing carries the old one over.
        let barrier = match *func.dfg.value_def(root) {
            ValueDef::Result { inst: made, .. } => func.layout.inst_block(made),
            _ => None,
        };
        let after = self.after.entry((b, barrier)).or_insert_with(|| {
            let mut seen: EntitySet<Block> = EntitySet::new();
            let mut work: Vec<Block> = adze_ir::cfg::successors(func, b);
            while let Some(c) = work.pop() {
                if Some(c) != barrier && seen.insert(c) {
                    work.extend(adze_ir::cfg::successors(func, c));
                }
            }
            seen
        });
        self.reads[root].iter().any(|&r| {
            func.layout
                .inst_block(r)
                .is_some_and(|rb| after.contains(rb))
        })
    }

    /// Per call in `order`'s blocks, the `mut` array parameters whose
    /// argument nothing useful reads after the call (not useful, or no
    /// read of it may follow), when there are any.
    fn dead_after(&mut self, order: &[Block]) -> HashMap<Inst, Vec<usize>> {
        let (func, module) = (self.func, self.module);
        let mut out = HashMap::new();
        for &b in order {
            for &inst in func.layout.block_insts(b) {
                let InstData::Call { func: callee, args } = func.dfg.inst(inst) else {
                    continue;
                };
                if !module.is_valid(*callee) {
                    continue;
                }
                let params = &module.func(*callee).sig.params;
                let live = self.live_after(inst, params);
                // The `mut` arrays, then the array results (numbered after
                // the parameters), that are not live.
                let dead: Vec<usize> = (live.iter().enumerate())
                    .filter(|&(k, &l)| !l && mutable_array(params, k))
                    .map(|(k, _)| k)
                    .chain((args.len()..live.len()).filter(|&k| !live[k]))
                    .collect();
                if !dead.is_empty() {
                    out.insert(inst, dead);
                }
            }
        }
        out
    }

    /// Of call `inst` (its callee's parameters `params`): per argument,
    /// whether it goes to a `mut` array parameter and its contents are
    /// live after the call — useful and a read of it may follow, or passed
    /// to two `mut` parameters one of which the callee may read (one
    /// shadow for `dot(x, x)`'s arguments: the callee would not see a read
    /// through the other parameter as a read of it; a callee that only
    /// writes through both reads nothing, as inlined: review of session
    /// 23); then per result, whether a read of it may follow (an f64
    /// always). The others are `dead` for the callee.
    fn live_after(&mut self, inst: Inst, params: &[Param]) -> Vec<bool> {
        let (func, module) = (self.func, self.module);
        let args = func.dfg.inst(inst).args().to_vec();
        // A rule's callee is not analysed (the rule takes every input):
        // nothing in it needs the aliasing, and the rule runs when a
        // useful read follows the call, whatever its arguments share.
        let (callee_reads, rules) = match func.dfg.inst(inst) {
            InstData::Call { func: callee, .. } if module.is_valid(*callee) => (
                self.param_reads.reads(module, *callee),
                !module.func(*callee).meta.rules.is_empty(),
            ),
            _ => (None, false),
        };
        let may_read = |k: usize| {
            !rules
                && callee_reads
                    .as_ref()
                    .is_none_or(|r| r.get(k) != Some(&false))
        };
        // Views the caller proves apart share nothing for the callee to
        // miss: a read through one never sees a write through the other
        // (two views of one array, the callee reading one only for a
        // branch: NaN called, 0 inlined; docs/ad-reverse.md).
        let shared = |a: Value| {
            let sharing: Vec<usize> = (args.iter().enumerate())
                .filter(|&(k, &b)| {
                    mutable_array(params, k)
                        && func.array_root(b) == func.array_root(a)
                        && (b == a || !apart(func, inst, a, b))
                })
                .map(|(k, _)| k)
                .collect();
            sharing.len() > 1 && sharing.iter().any(|&k| may_read(k))
        };
        let mut live: Vec<bool> = (args.iter().enumerate())
            .map(|(k, &a)| {
                mutable_array(params, k)
                    && (shared(a) || (self.useful.contains(a) && self.read_after(inst, a)))
            })
            .collect();
        for &r in func.dfg.inst_results(inst) {
            live.push(!func.dfg.value_type(r).is_array() || self.read_after(inst, r));
        }
        live
    }

    fn mark(&mut self, v: Value) {
        if self.useful.insert(v) {
            self.work.push(v);
        }
    }

    /// Marks the roots (returned results, pushed values), indexes the
    /// incoming edges of each block and the instructions each array value
    /// feeds, and returns the calls to callees that use the tape.
    fn seed(
        &mut self,
        cache: &mut Cache,
        order: &[Block],
        ret: RetActivity,
        ignored: &[usize],
    ) -> Vec<Inst> {
        let (func, module) = (self.func, self.module);
        let mut tape_calls = Vec::new();
        for &b in order {
            self.reachable.insert(b);
        }
        for &b in order {
            for &inst in func.layout.block_insts(b) {
                // A call reads the arrays its callee may read (inlined, only
                // its reads would be reads: seed 5500092, a callee that only
                // writes); anything else but a write or a view reads them.
                // A `return` reads the arrays of the results the caller
                // may read after the call (not `dead`).
                let returned = |k: usize| {
                    !self.dead.contains(&(func.params().len() + k)) && !ignored.contains(&k)
                };
                let differentiated = matches!(ret, RetActivity::Active | RetActivity::Dup);
                let (read, useful_now): (Vec<Value>, bool) = match func.dfg.inst(inst) {
                    InstData::Return { args } => (
                        (args.iter().enumerate())
                            .filter(|&(k, a)| func.dfg.value_type(*a).is_array() && returned(k))
                            .map(|(_, &a)| a)
                            .collect(),
                        differentiated,
                    ),
                    // A load reads usefully once its value is useful, a
                    // call once its summary finds the array useful
                    // (`Useful::add_read`); anything else that reads
                    // arrays counts from the start.
                    data => (
                        self.param_reads.arrays_read(module, func, inst),
                        !matches!(data, InstData::Call { .. }) && data.opcode() != Opcode::Load,
                    ),
                };
                for v in read {
                    let root = func.array_root(v);
                    self.may_read.insert((root, inst));
                    if useful_now && self.counted.insert((root, inst)) {
                        self.reads[root].push(inst);
                    }
                }
                if let Some((a, _)) = func.dfg.inst(inst).array_write() {
                    self.feeds[a].push(inst);
                    continue;
                }
                // A view and its array share their elements: each is
                // useful when the other is (the view through its
                // definition, below; the array through `feeds`).
                if let InstData::Ternary {
                    op: Opcode::Slice | Opcode::View,
                    args: [a, _, _],
                } = func.dfg.inst(inst)
                {
                    self.feeds[*a].push(inst);
                    continue;
                }
                match func.dfg.inst(inst) {
                    InstData::Return { args }
                        if matches!(ret, RetActivity::Active | RetActivity::Dup) =>
                    {
                        for (k, &a) in args.iter().enumerate() {
                            if !ignored.contains(&k) {
                                self.mark(a);
                            }
                        }
                    }
                    data @ (InstData::Jump { .. } | InstData::Brif { .. }) => {
                        for (d, dest) in data.destinations().iter().enumerate() {
                            self.incoming[dest.block].push((inst, d));
                        }
                    }

                    // The value may be popped by code that is useful.
                    InstData::Push { arg, .. } if func.dfg.value_type(*arg) == Type::F64 => {
                        self.mark(*arg);
                    }
                    InstData::Call { func: callee, args } => {
                        if module.is_valid(*callee) {
                            let params = &module.func(*callee).sig.params;
                            for (&a, p) in args.iter().zip(params) {
                                if p.ty == Type::Array && p.mutable {
                                    self.feeds[a].push(inst);
                                }
                            }
                        }
                        if self.tape_use.uses(cache, module, *callee) {
                            tape_calls.push(inst);
                        }
                    }
                    _ => {}
                }
            }
        }
        tape_calls
    }

    /// Visits the values found useful until there are none left.
    fn propagate(&mut self, cache: &mut Cache, summaries: &mut UsefulSummaries) {
        let func = self.func;
        loop {
            if let Some(inst) = self.retry.pop() {
                self.visit_write(cache, summaries, inst);
                continue;
            }
            let Some(v) = self.work.pop() else {
                break;
            };
            // What the definition of `v` reads.
            match *func.dfg.value_def(v) {
                ValueDef::Result { inst, .. } => {
                    let placed = func.layout.inst_block(inst);
                    if !placed.is_some_and(|b| self.reachable.contains(b)) {
                        continue;
                    }
                    match func.dfg.inst(inst) {
                        InstData::Binary {
                            op: Opcode::Load,
                            args: [a, _],
                        } => {
                            self.mark(*a);
                            self.add_read(inst, *a);
                        }
                        InstData::Ternary {
                            op: Opcode::Slice | Opcode::View,
                            args: [a, _, _],
                        } => self.mark(*a),
                        InstData::Call { .. } => self.call(cache, summaries, inst),
                        data => {
                            if func.dfg.inst_results(inst).len() == 1
                                && partials::is_differentiable(data.opcode())
                            {
                                for &a in data.args() {
                                    self.mark(a);
                                }
                            }
                        }
                    }
                }
                ValueDef::Param { block, num } => {
                    for k in 0..self.incoming[block].len() {
                        let (inst, d) = self.incoming[block][k];
                        let dests = func.dfg.inst(inst).destinations();
                        if let Some(&a) = dests[d].args.get(num) {
                            self.mark(a);
                        }
                    }
                }
                _ => {}
            }
            // What `v` feeds as an array.
            for k in 0..self.feeds[v].len() {
                let inst = self.feeds[v][k];
                match func.dfg.inst(inst) {
                    InstData::Ternary {
                        op: Opcode::Slice | Opcode::View,
                        ..
                    } => self.mark(func.dfg.first_result(inst)),
                    _ => self.visit_write(cache, summaries, inst),
                }
            }
        }
    }

    /// A write into a useful array: a `store` or `fill` marks its value
    /// when a useful read may follow it, a call is summarised. A store no
    /// useful read follows yet waits in `pending` for one.
    fn visit_write(&mut self, cache: &mut Cache, summaries: &mut UsefulSummaries, inst: Inst) {
        let func = self.func;
        match func.dfg.inst(inst).array_write() {
            Some((a, x)) => {
                if self.useful.contains(x) {
                    return;
                }
                if self.read_after(inst, a) {
                    self.mark(x);
                } else {
                    let root = func.array_root(a);
                    self.wait(root, inst);
                }
            }
            None => self.call(cache, summaries, inst),
        }
    }

    /// Which results of `callee` and which of its (array) parameters vary
    /// when the arguments `varied` do: forward activity of its body.
    fn callee_varies(
        &self,
        cache: &mut Cache,
        callee: FuncId,
        varied: &[bool],
    ) -> (Vec<bool>, Vec<bool>) {
        let f = self.module.func(callee);
        let fwd_args = forward_activities(&f.sig.params, varied);
        let everything = || {
            (
                vec![true; f.sig.results.len()],
                vec![true; f.sig.params.len()],
            )
        };
        // As the function's own forward activity (`activity::summarize`)
        // answers: a forward rule, not the body, gives the tangents, so
        // everything varies (a straight-through estimator's body
        // `f64(i64(x))` does not depend on `x` by data flow; reading it
        // dropped its reverse rule: review of session 23).
        if f.is_declaration() || f.meta.rules.forward.is_some() {
            return everything();
        }
        let act = activity::analyze_cached(cache, self.module, f, &fwd_args, &[]);
        let mut results = vec![false; f.sig.results.len()];
        for (_, inst) in f.layout.insts() {
            if let InstData::Return { args } = f.dfg.inst(inst) {
                for (k, &a) in args.iter().enumerate() {
                    if act.is_active(a) {
                        results[k] = true;
                    }
                }
            }
        }
        let params = f.params().iter().map(|&p| act.is_active(p)).collect();
        (results, params)
    }

    /// `inst` reads the elements of `a` usefully: if it may read them (a
    /// candidate), the writes into `a`'s root that waited for a useful
    /// read are visited again (a read that follows them now makes them
    /// count). A read whose value nothing useful takes does not count:
    /// `if a[1] > 1.0` after a store of `sqrt(0)` into `a[0]` made the
    /// store count where another function's read had given `a` a shadow,
    /// and not where it had not (review of session 23).
    fn add_read(&mut self, inst: Inst, a: Value) {
        let root = self.func.array_root(a);
        if !self.may_read.contains(&(root, inst)) || !self.counted.insert((root, inst)) {
            return;
        }
        self.reads[root].push(inst);
        let pending = std::mem::take(&mut self.pending[root]);
        for &w in &pending {
            self.waiting.remove(&(root, w));
        }
        self.retry.extend(pending);
    }

    /// The write `inst` into `root` waits for a useful read.
    fn wait(&mut self, root: Value, inst: Inst) {
        if self.waiting.insert((root, inst)) {
            self.pending[root].push(inst);
        }
    }

    /// Summarises the call `inst` with what is useful of its results and
    /// `mut` array arguments now, and marks the arguments the summary says
    /// are useful.
    fn call(&mut self, cache: &mut Cache, summaries: &mut UsefulSummaries, inst: Inst) {
        let (func, module) = (self.func, self.module);
        let InstData::Call { func: callee, args } = func.dfg.inst(inst) else {
            return;
        };
        let params = if module.is_valid(*callee) {
            module.func(*callee).sig.params.as_slice()
        } else {
            &[]
        };
        let args = args.to_vec();
        // The `mut` arrays useful here, and which of them and of the
        // results are live after the call (`live_after`).
        let arrays: Vec<bool> = (args.iter().enumerate())
            .map(|(k, &a)| mutable_array(params, k) && self.useful.contains(a))
            .collect();
        let mut read = self.live_after(inst, params);
        for (r, &a) in read.iter_mut().zip(&arrays) {
            *r &= a;
        }
        let results = func.dfg.inst_results(inst);
        let results_useful: Vec<bool> = results.iter().map(|&r| self.useful.contains(r)).collect();
        let varied_args: Vec<bool> = args.iter().map(|&a| self.varied.is_active(a)).collect();
        // A callee that uses the tape may push values of its arguments for
        // code elsewhere to pop: its own usefulness marks what it pushes
        // (as inlined code does), whatever the call's results.
        let tape = self.tape_use.uses(cache, module, *callee);
        // A useful `mut` array no useful read follows yet: the call is
        // summarised again when one does. Before any early return: a rule
        // call left out here because nothing read its array yet, and not
        // queued, never saw the read found later, and its inputs got no
        // adjoint in every setting (review of session 23: d/dy 0 for 0.6).
        for (k, &a) in args.iter().enumerate() {
            if arrays[k] && !read[k] {
                let root = func.array_root(a);
                self.wait(root, inst);
            }
        }
        // A call that applies a rule (which takes every input) is
        // differentiated only when a varied value goes in and a useful
        // one that varies comes out (`Plan::differentiates_call`): else
        // none of its arguments is useful through it. The rule call a
        // region collapses into and the same call in a callee's summary
        // (which knows which arguments vary) then decide alike
        // (docs/ad-reverse.md, "Rule calls that are never differentiated").
        let rules = module.is_valid(*callee) && !module.func(*callee).meta.rules.is_empty();
        if rules && !tape {
            // What varies is the callee's own answer (its body under the
            // arguments that vary here), not the caller's: an array is one
            // value, varied by any store into it, so a store after the
            // call (`y2[0] = -x`) made the call's array result "vary" where
            // the callee, called, saw a view of a constant array (seed
            // 95208: NaN inlined, a number called).
            let varies_in = varied_args.contains(&true);
            let (results_vary, params_vary) = self.callee_varies(cache, *callee, &varied_args);
            let varies_out = (results_useful.iter().zip(&results_vary)).any(|(&u, &v)| u && v)
                || (read.iter().zip(&params_vary)).any(|(&r, &v)| r && v);
            if !(varies_in && varies_out) {
                return;
            }
        }
        if tape || arrays.contains(&true) || results_useful.contains(&true) {
            let key = (
                *callee,
                results_useful,
                arrays.clone(),
                read.clone(),
                varied_args,
            );
            let which = summaries.params(cache, module, key);
            for (k, &a) in args.iter().enumerate() {
                if which
                    .as_ref()
                    .is_none_or(|w| w.useful.get(k) != Some(&false))
                {
                    self.mark(a);
                    if !mutable_array(params, k) || read[k] {
                        self.feeding.insert(inst);
                    }
                }
                // A useful read of `a` only if the callee reads it usefully
                // (a `mut` array is useful in it by seeding alone): a
                // callee's `let y1 = a[1]` that nothing uses made the call
                // a read that kept a store before it (seed 96268).
                if func.dfg.value_type(a).is_array()
                    && which.as_ref().is_none_or(|w| w.read.get(k) != Some(&false))
                {
                    self.add_read(inst, a);
                }
            }
        }
    }
}

/// A callee's summary: per parameter, whether it is useful, and whether
/// the callee reads its elements usefully (an array; a `mut` array is
/// useful in the callee by seeding alone, so only this says whether the
/// call is a useful read of its argument, `Useful::add_read`).
#[derive(Clone, Debug)]
pub(crate) struct ParamUse {
    pub useful: Vec<bool>,
    pub read: Vec<bool>,
}

/// Usefulness across calls: for a callee, which results are useful at the
/// call and which `mut` array arguments are useful there (their contents
/// after the call may be read), the callee's parameters that are useful —
/// the callee's own [`usefulness`] on the code its split derivative is
/// built from (rule regions collapsed into calls). Memoized per pattern; a
/// callee being summarised (recursion, which is never inlined) and a callee
/// with rules (the rule takes every input) are conservative (`None`).
#[derive(Default)]
pub(crate) struct UsefulSummaries {
    stack: Vec<FuncId>,
    memo: HashMap<UsefulKey, Option<ParamUse>>,
    /// Answers so far that depended on what may change (a call into the
    /// stack, a declaration, a request not lowered yet); a summary computed
    /// without any is final for the lowering and is kept for it.
    unsettled: usize,
}

/// A callee, its useful results, its useful `mut` array arguments, which
/// of those and of its results a read may follow the call (after the
/// arguments, one per result), and which arguments vary (forward activity
/// at the call).
pub(crate) type UsefulKey = (FuncId, Vec<bool>, Vec<bool>, Vec<bool>, Vec<bool>);

impl UsefulSummaries {
    /// The callee's useful parameters for the call pattern `key`.
    fn params(&mut self, cache: &mut Cache, module: &Module, key: UsefulKey) -> Option<ParamUse> {
        let callee = key.0;
        if !module.is_valid(callee) {
            return None;
        }
        if self.stack.contains(&callee) {
            self.unsettled += 1;
            return None;
        }
        if let Some(s) = self.memo.get(&key) {
            return s.clone();
        }
        if let Some(s) = cache.useful.get(&key) {
            return s.clone();
        }
        let before = self.unsettled;
        self.stack.push(callee);
        let out = self.compute(cache, module, &key);
        self.stack.pop();
        if cache.is_active() && self.unsettled == before {
            cache.useful.insert(key.clone(), out.clone());
        }
        self.memo.insert(key, out.clone());
        out
    }

    fn compute(&mut self, cache: &mut Cache, module: &Module, key: &UsefulKey) -> Option<ParamUse> {
        let (callee, results, arrays, read, varied) = key;
        let f = module.func(*callee);
        if f.is_declaration()
            || f.layout
                .insts()
                .any(|(_, i)| f.dfg.inst(i).opcode() == Opcode::Autodiff)
        {
            self.unsettled += 1;
            return None;
        }
        if f.params().len() != arrays.len() || f.sig.results.len() != results.len() {
            return None;
        }
        // A rule takes every input, and runs only when something useful
        // comes out: a useful result, or a `mut` array read after the call
        // (`Plan::call_writes_shadow`).
        if !f.meta.rules.is_empty() {
            let n = f.sig.params.len();
            let out = results.contains(&true) || read[..n.min(read.len())].contains(&true);
            return if out {
                None
            } else {
                Some(ParamUse {
                    useful: vec![false; n],
                    read: vec![false; n],
                })
            };
        }
        let f = as_differentiated(f)?;
        let f = f.as_ref();
        let entry = f.entry_block()?;
        let order = adze_ir::cfg::reverse_postorder(f, entry);
        let args: Vec<ArgActivity> = arrays
            .iter()
            .map(|&a| {
                if a {
                    ArgActivity::Dup
                } else {
                    ArgActivity::Const
                }
            })
            .collect();
        let ret = if results.contains(&true) {
            RetActivity::Active
        } else {
            RetActivity::Const
        };
        let ignored: Vec<usize> = (0..results.len()).filter(|&k| !results[k]).collect();
        // The `mut` arrays that no useful read follows the call (their
        // contents are dead after it, `Useful::read_after`), as the body
        // inlined would see them: the useful ones seeded as useful (their
        // stores feed the callee's own reads), without the caller's reads.
        // One not useful here is dead too: a `const` parameter the callee
        // took as read after the call made its stores count, and the marks
        // stayed when the array became useful (review of session 23: `g`
        // storing `x` into `b` after reading it, `sqrt(0)` passed as `x`).
        let n = f.sig.params.len();
        let mut dead: Vec<usize> = (f.sig.params.iter().enumerate())
            .filter(|(k, p)| p.ty == Type::Array && p.mutable && !read[*k])
            .map(|(k, _)| k)
            .collect();
        // And the results no read follows: its `return` does not read them.
        dead.extend((n..read.len()).filter(|&k| !read[k]));
        // The callee's varied values, from the arguments that vary here.
        let fwd_args = forward_activities(&f.sig.params, varied);
        let callee_varied = activity::analyze_cached(cache, module, f, &fwd_args, &[]);
        let useful = usefulness(
            cache,
            module,
            f,
            &callee_varied,
            &order,
            &args,
            ret,
            &ignored,
            &dead,
            self,
        );
        Some(ParamUse {
            useful: (f.params().iter())
                .map(|&p| useful.values.contains(p))
                .collect(),
            read: useful.params_read,
        })
    }
}
