//! The analyses behind one split derivative: the reachable CFG and its
//! edges, which values are *active* (varied and useful), which adjoints need
//! a memory slot, and what each block puts on the tape.
//!
//! Everything here is decided before any code is emitted, so that the
//! augmented primal ([`super::aug`]) and the adjoint ([`super::adj`]) agree
//! on the tape layout by construction: both read the same
//! [`Plan::tape`] lists.
//!
//! [`Plan::new`] runs the phases in order, one module each:
//!
//! - [`cfg`]: reachable blocks, incoming edges, chains, counted loops and
//!   their induction variables;
//! - [`useful`]: which values can influence what is differentiated (a
//!   backward fixed point, with summaries across calls);
//! - [`active`]: the shadowed arrays, and which active values something
//!   adds to (reached);
//! - [`slots`]: the adjoints that need a memory slot, and those carried
//!   across reverse blocks as SSA values (with [`order`]);
//! - [`tape`] (run later, by [`Plan::plan_tape`], once the calls are
//!   planned): what each block pops or recomputes, with the loop
//!   invariants of [`invariants`].

mod active;
mod cfg;
mod invariants;
mod order;
mod slots;
mod snapshot;
mod tape;
mod useful;
mod varies;

pub(crate) use cfg::Edge;
pub(crate) use tape::{Recipe, TapeItem};
pub(crate) use useful::{ParamUse, UsefulKey};

use active::ZerosSite;
use cfg::{chains, Cfg, Loop};
use useful::{usefulness, UsefulSummaries, Usefulness};

use crate::activity::{self, Activity};
use crate::context::Cache;
use crate::AdError;
use adze_ir::cfg::LoopForest;
use adze_ir::{ArgActivity, Block, Function, Inst, Module, RetActivity, Type, Value, ValueDef};
use cranelift_entity::{EntitySet, SecondaryMap};
use std::collections::HashMap;

pub(crate) struct Plan {
    pub entry: Block,
    /// Reachable blocks in reverse postorder.
    pub order: Vec<Block>,
    reachable: EntitySet<Block>,
    /// Incoming edges of each block, from reachable blocks, numbered in
    /// this order (the number is what [`TapeItem::Edge`] records).
    pub preds: SecondaryMap<Block, Vec<Edge>>,
    /// Reachable blocks ending in `return`, numbered in this order.
    pub returns: Vec<Block>,
    varied: Activity,
    useful: EntitySet<Value>,
    shadowed: EntitySet<Value>,
    /// Per block: the edge by which it continues a *chain*, when its only
    /// incoming edge is a `jump` from a block that jumps only to it (see
    /// [`Plan::chain_pred`]).
    chain_pred: SecondaryMap<Block, Option<Edge>>,
    /// Per block: the first block of its chain, unless it is that block.
    chain: SecondaryMap<Block, Option<Block>>,
    /// Per value: does anything add to its adjoint? (See
    /// [`Plan::is_reached`].)
    reached: EntitySet<Value>,
    /// Adjoint slot of each value whose adjoint crosses chains of reverse
    /// blocks.
    slot: SecondaryMap<Value, Option<u32>>,
    pub num_slots: u32,
    /// The values whose adjoint crosses chains as an SSA value instead
    /// (see [`Plan::assign_slots`]).
    carry: EntitySet<Value>,
    /// `(value, chain head) -> block`: the reverse of the chain hands the
    /// running sum of the value's adjoint on to the reverse of the block
    /// instead of storing it in its slot (see [`Plan::hands_on`]).
    hand_on: HashMap<(Value, Block), Block>,
    /// Per block: what its reverse block pops, in push order, each with its
    /// segment (see [`Plan::recipes`]): a segment's record is pushed where
    /// the segment ends (before the call that ends it, or before the
    /// terminator) and popped where the reverse sweep enters it.
    pub tape: SecondaryMap<Block, Vec<(u32, TapeItem)>>,
    /// Per block: how its reverse block obtains the other primal values it
    /// reads, in order.
    ///
    /// Each recipe is tagged with its *segment*: the number of calls in the
    /// block up to and including the instruction that needs it. The reverse
    /// block emits a segment's recipes where its reverse sweep enters the
    /// segment (after the reverse of the call that follows it), and a
    /// segment reuses nothing another one popped or recomputed. Inlining a
    /// call splits its block at the call into two blocks; with segments,
    /// the pushes, pops and recomputed code sit at the same places relative
    /// to the call either way, so an outer reverse pass (which sums the
    /// adjoint of a pushed value where it was pushed) sums in the same
    /// order.
    pub recipes: SecondaryMap<Block, Vec<(u32, Recipe)>>,
    /// The counted loops, and per block the one it heads; the loop-nesting
    /// forest they are loops of, and the counted loop of each of its loops.
    pub loops: Vec<Loop>,
    header_loop: SecondaryMap<Block, Option<usize>>,
    forest: LoopForest,
    counted_of: SecondaryMap<adze_ir::cfg::Loop, Option<usize>>,
    /// Induction variables of counted loops: header parameter -> (loop,
    /// value on the entry edge, step).
    ivs: SecondaryMap<Value, Option<(usize, Value, i64)>>,
    /// Values a block of a counted loop reads that are defined outside it:
    /// `(value, loop)`, pushed once where the loop is left (before its
    /// counter) instead of once per iteration, and kept by the adjoint in
    /// its trip array, in slot `loops.len() + index` (f64 as is, i64 as
    /// bits). Also loads inside the loop that are the same in all its
    /// iterations ([`Plan::reloaded_invariant`]): the augmented primal loads
    /// them again where the loop is left.
    pub invariants: Vec<(Value, usize)>,
    /// The loads the loop bounds prove in bounds (`adze_ir::bounds`).
    safe_loads: EntitySet<Inst>,
    /// Per counted loop, the arrays an instruction of it may write (every
    /// array operand of anything but `load`, `len` and `samelen`), and
    /// whether it contains a `samelen`; computed on first use.
    loop_writes: std::cell::RefCell<HashMap<usize, (EntitySet<Value>, bool)>>,
    /// The primal parameters the adjoint receives, in order (see
    /// [`adj_takes`]), and which values they are.
    pub adj_params: Vec<Value>,
    /// The parameters a `.ckptf` adjoint takes as witnesses, after
    /// `adj_params` ([`adj_witnesses`]); set by the pass, empty otherwise.
    pub adj_witnesses: Vec<Value>,
    available: EntitySet<Value>,
    pub zeros_sites: Vec<ZerosSite>,
    pub num_threaded: usize,
    /// `const` `mut` array parameters that receive active values: they get a
    /// local shadow in the adjoint, of the parameter's length.
    pub const_shadows: Vec<Value>,
    /// The counted loops whose tape is checkpointed, in increasing order
    /// (`reverse::checkpoint`): each has one more trip-array slot, the
    /// start of the segment the reverse sweep is in (whose snapshot is on
    /// the tape).
    pub checkpointed: Vec<usize>,
    /// Per checkpointed loop (as `checkpointed`): `K` of its `checkpoint
    /// K` hint when its snapshots may be counted (`K` not the constant 0:
    /// `#[checkpoint(snapshots = K)]` on `for i in lo..hi`): at most `K`
    /// snapshots, placed by a binomial schedule
    /// ([`Plan::checkpoint_binomial`]) or, for a loop with other exits,
    /// every `max(1, ceil((hi - lo) / K))` iterations, cutting by the tape's
    /// growth in between without one (`reverse::checkpoint`).
    pub checkpoint_every: Vec<Option<Value>>,
    /// Per call, the `mut` array parameters whose argument nothing useful
    /// reads after the call (`useful.rs`, `Useful::read_after`): the callee
    /// is requested with them `dead` ([`Plan::dead_after`]).
    dead_after: std::collections::HashMap<Inst, Vec<usize>>,
    /// The calls whose usefulness summary found an input useful for what
    /// they write other than `mut` arrays nothing reads after them
    /// (`useful.rs`, `Usefulness::feeding`).
    feeding: EntitySet<Inst>,
    /// The tape plan may obtain a block parameter from the one argument
    /// its block receives ([`tape::Recipe::Arg`]): only where no reverse
    /// derivative of this one is taken (`ReverseRequest::no_reverse_over`).
    pub args_recomputed: bool,
    /// Local arrays pushed whole where the primal returns and popped into
    /// arrays of the adjoint's own at its entry ([`Plan::snapshot_arrays`]).
    pub snapshots: Vec<Value>,
    /// Per f64 value on the tape whose variation is known: the primal
    /// parameters it varies with (`varies.rs`, [`Plan::plan_varies`]); the
    /// adjoint's `pop` says so in its own values.
    pub pushed_varies: HashMap<Value, Vec<Value>>,
}

/// Does the adjoint of a function take its parameter number `k` too? Each
/// scalar and each read-only array, unless `untaken`. A read-only array
/// parameter cannot be written while the function runs (the verifier and
/// the front end forbid passing an array that a call writes to another
/// parameter of it), so the adjoint reads it as the primal did.
pub(crate) fn adj_takes(param: &adze_ir::Param, k: usize, untaken: &[usize]) -> bool {
    !untaken.contains(&k) && (param.ty.is_scalar() || (param.ty == Type::Array && !param.mutable))
}

/// Does the adjoint of a `.ckptf` derivative take its parameter number `k`
/// as a *witness*, never read: a `mut` f64 array, unless `untaken` (a
/// callee's always is: its caller's adjoint does not have the array). Its
/// checkpoint runners take it on, so that a forward derivative of one
/// knows the array's activity (`reverse::checkpoint::runner_activity`).
pub(crate) fn adj_witnesses(
    param: &adze_ir::Param,
    k: usize,
    untaken: &[usize],
    for_forward: bool,
) -> bool {
    for_forward && !untaken.contains(&k) && param.ty == Type::Array && param.mutable
}

/// The forward activities that find what a reverse request's arguments
/// vary: `active` scalars as `dual`.
fn forward_args(args: &[ArgActivity]) -> Vec<ArgActivity> {
    args.iter()
        .map(|a| match a {
            ArgActivity::Active => ArgActivity::Dual,
            other => *other,
        })
        .collect()
}

/// The values of `func` that can influence what a reverse derivative with
/// these activities differentiates (see `useful.rs`): for
/// `adze dump --annotate activity`.
pub(crate) fn useful_values(
    module: &Module,
    func: &Function,
    args: &[ArgActivity],
    ret: RetActivity,
    ignored: &[usize],
) -> Option<cranelift_entity::EntitySet<Value>> {
    let entry = func.entry_block()?;
    let order = adze_ir::cfg::reverse_postorder(func, entry);
    let mut cache = Cache::default();
    let varied = activity::analyze_cached(&mut cache, module, func, &forward_args(args), &[]);
    Some(
        usefulness(
            &mut cache,
            module,
            func,
            &varied,
            &order,
            args,
            ret,
            ignored,
            &[],
            &mut UsefulSummaries::default(),
        )
        .values,
    )
}

impl Plan {
    /// Does the f64 value `v` get an adjoint (varied and useful)?
    pub fn is_active(&self, func: &Function, v: Value) -> bool {
        func.dfg.value_is_valid(v)
            && func.dfg.value_type(v) == Type::F64
            && self.varied.is_active(v)
            && self.useful.contains(v)
    }

    /// The `mut` array parameters of the callee of call `inst` whose
    /// contents nothing useful reads after the call.
    pub fn dead_after(&self, inst: Inst) -> &[usize] {
        self.dead_after.get(&inst).map_or(&[], |d| d.as_slice())
    }

    /// Is the primal value `v` a parameter the adjoint receives?
    pub fn is_available(&self, v: Value) -> bool {
        self.available.contains(v)
    }

    /// What a scalar parameter of a block with one incoming edge (not from
    /// itself) receives on that edge: the parameter has its bits whenever
    /// the block runs (see [`Recipe::Arg`](tape::Recipe::Arg)).
    pub fn single_arg(&self, func: &Function, v: Value) -> Option<Value> {
        if !self.args_recomputed {
            return None;
        }
        let ValueDef::Param { block, num } = *func.dfg.value_def(v) else {
            return None;
        };
        let [e] = self.preds[block][..] else {
            return None;
        };
        if e.from == block || !self.is_reachable(block) || !func.dfg.value_type(v).is_scalar() {
            return None;
        }
        let dests = func.dfg.inst(e.inst).destinations();
        dests.get(e.dest)?.args.get(num).copied()
    }

    /// Can the adjoint have the array `a`: a parameter it receives, or a
    /// view of one (which it makes again)?
    pub fn array_available(&self, func: &Function, a: Value) -> bool {
        self.available.contains(func.array_root(a))
    }

    /// Is the call `inst` differentiated (some argument active)?
    pub fn call_is_active(&self, func: &Function, args: &[Value]) -> bool {
        args.iter().any(|&a| match func.dfg.value_type(a) {
            Type::F64 => self.is_active(func, a),
            Type::Array => self.is_shadowed(a),
            _ => false,
        })
    }

    /// The arrays whose shadow length the augmented primal pushes just
    /// before returning, in push order: shadowed `zeros` sites, then
    /// shadowed `const` parameters.
    pub fn length_items(&self) -> Vec<Value> {
        self.zeros_sites
            .iter()
            .map(|z| z.array)
            .chain(self.const_shadows.iter().copied())
            .collect()
    }

    /// The analyses, up to the tape plan ([`Plan::plan_tape`], which needs
    /// to know what the calls become). `untaken`: the parameters the adjoint
    /// does not receive although it could (see [`adj_takes`]); `ignored`:
    /// the results whose cotangent is not differentiated; `dead`: the `mut`
    /// array parameters the caller does not read after the call.
    #[allow(clippy::too_many_arguments)] // the request's parts, as `usefulness` takes them
    pub fn new(
        cache: &mut Cache,
        module: &Module,
        func: &Function,
        args: &[ArgActivity],
        ret: RetActivity,
        ignored: &[usize],
        untaken: &[usize],
        dead: &[usize],
    ) -> Result<Plan, AdError> {
        let entry = func.entry_block().ok_or_else(|| AdError::NoBody {
            func: func.name.clone(),
        })?;
        let Cfg {
            order,
            reachable,
            preds,
            returns,
        } = Cfg::new(func, entry);

        // Varied: forward activity with `active` scalars as `dual`.
        let varied = activity::analyze_cached(cache, module, func, &forward_args(args), &[]);

        let Usefulness {
            values: useful,
            dead_after,
            feeding,
            ..
        } = usefulness(
            cache,
            module,
            func,
            &varied,
            &order,
            args,
            ret,
            ignored,
            dead,
            &mut UsefulSummaries::default(),
        );

        let mut available = EntitySet::new();
        let mut adj_params = Vec::new();
        for (k, (&p, param)) in func.params().iter().zip(&func.sig.params).enumerate() {
            if adj_takes(param, k, untaken) {
                available.insert(p);
                adj_params.push(p);
            }
        }

        let (chain_pred, chain) = chains(func, entry, &order, &preds);
        let safe_loads = adze_ir::bounds::safe_accesses(func);
        let mut plan = Plan {
            entry,
            order,
            reachable,
            preds,
            chain_pred,
            chain,
            returns,
            varied,
            useful,
            dead_after,
            feeding,
            shadowed: EntitySet::new(),
            reached: EntitySet::new(),
            slot: SecondaryMap::new(),
            num_slots: 0,
            carry: EntitySet::new(),
            args_recomputed: false,
            snapshots: Vec::new(),
            pushed_varies: HashMap::new(),
            hand_on: Default::default(),
            tape: SecondaryMap::new(),
            recipes: SecondaryMap::new(),
            loops: Vec::new(),
            header_loop: SecondaryMap::new(),
            forest: LoopForest::default(),
            counted_of: SecondaryMap::new(),
            ivs: SecondaryMap::new(),
            invariants: Vec::new(),
            safe_loads,
            loop_writes: Default::default(),
            adj_params,
            adj_witnesses: Vec::new(),
            available,
            zeros_sites: Vec::new(),
            num_threaded: 0,
            const_shadows: Vec::new(),
            checkpointed: Vec::new(),
            checkpoint_every: Vec::new(),
        };
        plan.find_shadows(func, args, entry);
        plan.find_reached(cache, module, func, ret, ignored);
        plan.find_loops(func);
        plan.assign_slots(cache, module, func, ret);
        Ok(plan)
    }
}

/// How the adjoint computes a counted loop's trip count instead of popping
/// it ([`Plan::trip_recipe`]): `max(bound - init, 0)`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TripRecipe {
    pub init: Value,
    pub bound: Value,
}

impl Plan {
    /// The trip count of counted loop `l` as the adjoint can compute it,
    /// so that the augmented primal need not push it: a loop left only by
    /// its header's `brif (icmp lt i, bound), body, exit`, where `i` is an
    /// induction variable of step 1 from `init`, and `init` and `bound` are
    /// constants, scalar parameters the adjoint has, lengths of array
    /// parameters it has, or integer arithmetic of those (`for j in 0..d`,
    /// `for j in 0..len(x) / d`). Then the
    /// body runs exactly `max(bound - init, 0)` times (`i` never passes
    /// `bound`, so `i + 1` cannot wrap). Not for checkpointed loops, whose
    /// counters the schedule also uses.
    ///
    /// Both sides of a call decide alike: a callee's scalars are parameters
    /// its adjoint does not have, and inlined they are block parameters,
    /// which no recipe here accepts; an array is a parameter the adjoint has
    /// in the callee exactly when it is one in the caller (`untaken`). In a
    /// final derivative a callee's adjoint takes its scalars, and then may
    /// recompute a count its inlined copy tapes: an integer, which no
    /// derivative's bits depend on.
    pub(crate) fn trip_recipe(&self, func: &Function, l: usize) -> Option<TripRecipe> {
        if self.checkpointed.contains(&l) || !self.single_exit(func, l) {
            return None;
        }
        let (init, bound) = self.counted_range(func, l)?;
        (self.recomputable_int(func, init, 4) && self.recomputable_int(func, bound, 4))
            .then_some(TripRecipe { init, bound })
    }

    /// Is counted loop `l` left only by its header's branch (no `return`
    /// inside, no other edge out)?
    pub(crate) fn single_exit(&self, func: &Function, l: usize) -> bool {
        let blocks = self.loop_blocks(l);
        let Some(&header) = blocks.first() else {
            return false;
        };
        blocks.iter().all(|&b| {
            let Some(last) = func.layout.last_inst(b) else {
                return false;
            };
            let data = func.dfg.inst(last);
            !matches!(data, adze_ir::InstData::Return { .. })
                && (b == header || data.destinations().iter().all(|d| self.in_loop(l, d.block)))
        })
    }

    /// The range of counted loop `l`, `(init, bound)`, when its header ends
    /// in `brif (icmp lt i, bound), body, exit` with `i` an induction
    /// variable of step 1 from `init` (the value on the entry edge) and
    /// `bound` defined outside the loop: the header's test passes
    /// `max(bound - init, 0)` times unless another exit leaves first (`for
    /// i in lo..hi`). Both values dominate the loop's entry edge.
    pub(crate) fn counted_range(&self, func: &Function, l: usize) -> Option<(Value, Value)> {
        let header = *self.loop_blocks(l).first()?;
        let inside = |b: Block| self.in_loop(l, b);
        let last = func.layout.last_inst(header)?;
        let adze_ir::InstData::Brif {
            cond,
            then_dest,
            else_dest,
        } = func.dfg.inst(last)
        else {
            return None;
        };
        if !inside(then_dest.block) || inside(else_dest.block) {
            return None;
        }
        let adze_ir::ValueDef::Result { inst, .. } = *func.dfg.value_def(*cond) else {
            return None;
        };
        let adze_ir::InstData::Cmp {
            op: adze_ir::Opcode::Icmp,
            cond: adze_ir::CmpCond::Lt,
            args: [i, bound],
        } = *func.dfg.inst(inst)
        else {
            return None;
        };
        let (lp, init, step) = self.ivs[i]?;
        if lp != l || step != 1 || !func.dfg.block_params(header).contains(&i) {
            return None;
        }
        if func.def_block(bound).is_none_or(inside) {
            return None;
        }
        Some((init, bound))
    }

    /// Is the integer `v` a constant, a scalar parameter the adjoint has,
    /// the length of an array parameter it has, or (`depth` deep) the sum,
    /// difference, product or quotient of such (`len(x) / d`)? A quotient
    /// recomputed cannot trap where the primal's did not: it dominates the
    /// loop, so the primal computed it before.
    fn recomputable_int(&self, func: &Function, v: Value, depth: usize) -> bool {
        match *func.dfg.value_def(v) {
            adze_ir::ValueDef::Param { block, .. } => {
                Some(block) == func.entry_block() && self.available.contains(v)
            }
            adze_ir::ValueDef::Result { inst, .. } => match *func.dfg.inst(inst) {
                adze_ir::InstData::IConst { .. } => true,
                adze_ir::InstData::Unary {
                    op: adze_ir::Opcode::Len,
                    arg,
                } => {
                    matches!(*func.dfg.value_def(arg), adze_ir::ValueDef::Param { block, .. }
                        if Some(block) == func.entry_block())
                        && self.available.contains(arg)
                }
                adze_ir::InstData::Binary {
                    op:
                        adze_ir::Opcode::Iadd
                        | adze_ir::Opcode::Isub
                        | adze_ir::Opcode::Imul
                        | adze_ir::Opcode::Idiv,
                    args: [a, b],
                } => {
                    depth > 0
                        && self.recomputable_int(func, a, depth - 1)
                        && self.recomputable_int(func, b, depth - 1)
                }
                _ => false,
            },
            adze_ir::ValueDef::Detached => false,
        }
    }
}
