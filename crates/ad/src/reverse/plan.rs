//! The analyses behind one split derivative: the reachable CFG and its
//! edges, which values are *active* (varied and useful), which adjoints need
//! a memory slot, and what each block puts on the tape.
//!
//! Everything here is decided before any code is emitted, so that the
//! augmented primal ([`super::aug`]) and the adjoint ([`super::adj`]) agree
//! on the tape layout by construction: both read the same
//! [`Plan::tape`] lists.

use crate::activity::{self, Activity};
use crate::context::Cache;
use crate::partials::{self, Local, Partial};
use crate::AdError;
use adze_ir::{
    ArgActivity, Block, FuncBuilder, FuncId, Function, Inst, InstData, InstFormat, Module, Opcode,
    RetActivity, Signature, Type, Value, ValueDef,
};
use cranelift_entity::{EntitySet, SecondaryMap};
use std::collections::{HashMap, HashSet};

/// A control-flow edge: destination number `dest` of the terminator `inst`
/// of block `from` (a `brif` has two, possibly to the same block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Edge {
    pub from: Block,
    pub inst: Inst,
    pub dest: usize,
}

/// One entry of a block's tape record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TapeItem {
    /// A primal scalar that the block's adjoint reads.
    Value(Value),
    /// The number of the incoming edge the block was entered by (an i64);
    /// only for blocks with more than one incoming edge.
    Edge,
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
}

impl Recipe {
    pub fn value(self) -> Value {
        match self {
            Recipe::Param(v)
            | Recipe::Inst(v)
            | Recipe::Iv { value: v, .. }
            | Recipe::Invariant { value: v, .. } => v,
        }
    }
}

/// A *counted* loop: its header has exactly two incoming edges, one from
/// outside (the entry edge) and one back edge. Instead of an edge number per header
/// execution, the augmented primal threads an iteration counter through the
/// header and pushes it once, where the loop is left (an exit edge or a
/// `return` inside it). The adjoint keeps it in its trip array and counts
/// down in the header's reverse block: at 0 it leaves by the entry edge.
#[derive(Clone, Debug)]
pub(crate) struct Loop {
    /// Positions in `preds[header]` of the entry edge and the back edge.
    pub entry: usize,
    pub back: usize,
    body: EntitySet<Block>,
    size: usize,
}

impl Loop {
    pub fn contains(&self, b: Block) -> bool {
        self.body.contains(b)
    }
}

/// Recomputing a needed value may emit at most this many non-constant
/// instructions in the reverse block; beyond, the value is taped.
const RECOMPUTE_BUDGET: usize = 8;

/// Per block: its chain edge (see [`Plan::chain_pred`]) and the first block
/// of its chain. `order` is a reverse postorder, so a chain's blocks come
/// in chain order.
fn chains(
    func: &Function,
    entry: Block,
    order: &[Block],
    preds: &SecondaryMap<Block, Vec<Edge>>,
) -> (
    SecondaryMap<Block, Option<Edge>>,
    SecondaryMap<Block, Option<Block>>,
) {
    let mut pos = SecondaryMap::with_default(usize::MAX);
    for (k, &b) in order.iter().enumerate() {
        pos[b] = k;
    }
    let mut chain_pred = SecondaryMap::new();
    // `None`: the block starts its own chain.
    let mut chain: SecondaryMap<Block, Option<Block>> = SecondaryMap::new();
    for &b in order {
        if b == entry {
            continue;
        }
        let [e] = preds[b].as_slice() else {
            continue;
        };
        let is_jump = matches!(func.dfg.inst(e.inst), InstData::Jump { .. });
        if is_jump && e.from != b && pos[e.from] < pos[b] {
            chain_pred[b] = Some(*e);
            chain[b] = Some(chain[e.from].unwrap_or(e.from));
        }
    }
    (chain_pred, chain)
}

/// A local `zeros` array that needs a shadow in the adjoint.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ZerosSite {
    pub array: Value,
    pub len: Value,
    /// `None` when the `zeros` sits in the entry block (it runs once; its
    /// length is pushed at `return`); otherwise the number of the running
    /// maximum threaded through the augmented primal's blocks.
    pub threaded: Option<usize>,
}

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
    /// The counted loops, and per block the one it heads and the ones that
    /// contain it (innermost first).
    pub loops: Vec<Loop>,
    header_loop: SecondaryMap<Block, Option<usize>>,
    enclosing: SecondaryMap<Block, Vec<usize>>,
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
    available: EntitySet<Value>,
    pub zeros_sites: Vec<ZerosSite>,
    pub num_threaded: usize,
    /// `const` `mut` array parameters that receive active values: they get a
    /// local shadow in the adjoint, of the parameter's length.
    pub const_shadows: Vec<Value>,
}

impl Plan {
    pub fn is_reachable(&self, b: Block) -> bool {
        self.reachable.contains(b)
    }

    /// Does the f64 value `v` get an adjoint (varied and useful)?
    pub fn is_active(&self, func: &Function, v: Value) -> bool {
        func.dfg.value_is_valid(v)
            && func.dfg.value_type(v) == Type::F64
            && self.varied.is_active(v)
            && self.useful.contains(v)
    }

    /// Does the array `a` have a shadow in the adjoint?
    pub fn is_shadowed(&self, a: Value) -> bool {
        self.shadowed.contains(a)
    }

    pub fn slot(&self, v: Value) -> Option<u32> {
        self.slot[v]
    }

    /// The incoming-edge number of `edge` at its destination.
    pub fn edge_number(&self, to: Block, edge: Edge) -> Option<usize> {
        self.preds[to].iter().position(|&e| e == edge)
    }

    /// Does `b` push the number of the edge it was entered by? Blocks with
    /// several incoming edges do, except the headers of counted loops.
    pub fn has_edge_item(&self, b: Block) -> bool {
        self.preds[b].len() > 1 && self.counted(b).is_none()
    }

    /// The counted loop `b` heads, if any.
    /// The edge `A -> b` when `b` continues a chain: `b` is not the entry,
    /// its only incoming edge is the `jump` that ends `A`. The adjoint
    /// sweep then runs R(b) straight into R(A) (R(A) has no other
    /// predecessor, so R(b)'s values dominate it) and carries the adjoints
    /// it has summed so far as SSA values instead of memory slots: code cut
    /// into blocks by the inliner (a straight-line callee is a chain) sums
    /// its adjoints exactly as the same code in one block does, at every
    /// order of differentiation.
    pub fn chain_pred(&self, b: Block) -> Option<Edge> {
        self.chain_pred[b]
    }

    /// The first block of `b`'s chain.
    fn chain_of(&self, b: Block) -> Block {
        self.chain[b].unwrap_or(b)
    }

    pub fn counted(&self, b: Block) -> Option<usize> {
        self.header_loop[b]
    }

    /// The counted loops that contain `b`, innermost first.
    pub fn enclosing(&self, b: Block) -> &[usize] {
        self.enclosing[b].as_slice()
    }

    /// The counted loops the edge `e` into `to` leaves, innermost first.
    pub fn exited(&self, e: Edge, to: Block) -> Vec<usize> {
        self.enclosing(e.from)
            .iter()
            .copied()
            .filter(|&l| !self.loops[l].contains(to))
            .collect()
    }

    /// The invariants of counted loop `l`, in push order.
    pub fn invariants_of(&self, l: usize) -> impl Iterator<Item = Value> + '_ {
        self.invariants
            .iter()
            .filter(move |&&(_, lp)| lp == l)
            .map(|&(v, _)| v)
    }

    /// The trip-array slot of invariant `v` of loop `l`.
    pub fn invariant_slot(&self, v: Value, l: usize) -> Option<usize> {
        self.invariants
            .iter()
            .position(|&e| e == (v, l))
            .map(|k| self.loops.len() + k)
    }

    /// Slots of the adjoint's trip array: one per counted loop, then one per
    /// invariant.
    pub fn trip_slots(&self) -> usize {
        self.loops.len() + self.invariants.len()
    }

    /// The outermost counted loop around `b` that does not contain the
    /// definition of `v`: `v` is the same in all its iterations (its
    /// definition dominates `b`, so it dominates the loop's header).
    fn invariant_loop(&self, func: &Function, v: Value, b: Block) -> Option<usize> {
        let def = func.def_block(v)?;
        self.enclosing(b)
            .iter()
            .rev()
            .copied()
            .find(|&l| !self.loops[l].contains(def))
            .or_else(|| self.invariant_load_loop(func, v, b))
    }

    /// The outermost counted loop `l` around `b` in which `v` is a load
    /// that is the same in every iteration: a load from a local `zeros`
    /// array that no instruction of `l` can write, at an index defined
    /// outside `l`, that the loop bounds prove in bounds. Such a value is
    /// taped once, where `l` is left, by loading it again there: the array
    /// and the index are those of the load (defined outside `l`, so they
    /// dominate its exits), the array has not changed, and the proof holds
    /// there too: it rests on an enclosing loop's index, whose body
    /// dominates `l`'s header and so its exits, and on `samelen`s that
    /// dominate the load — which is why a loop with a `samelen` inside is
    /// refused: when it runs zero times, that `samelen` has not run at its
    /// exit (found by review: the load trapped there, depending on the
    /// inline setting; test `a_samelen_inside_the_loop_is_not_relied_on`).
    /// GMM's triangular loop reads
    /// `xc[i]` in every iteration of its inner loop: taped once per inner
    /// loop instead of once per iteration.
    fn invariant_load_loop(&self, func: &Function, v: Value, b: Block) -> Option<usize> {
        let ValueDef::Result { inst, .. } = *func.dfg.value_def(v) else {
            return None;
        };
        let InstData::Binary {
            op: Opcode::Load,
            args: [arr, index],
        } = *func.dfg.inst(inst)
        else {
            return None;
        };
        if !self.safe_loads.contains(inst) {
            return None;
        }
        let ValueDef::Result { inst: z, .. } = *func.dfg.value_def(arr) else {
            return None;
        };
        if !matches!(func.dfg.inst(z), InstData::Zeros { .. }) {
            return None;
        }
        let (def, arr_def, index_def) = (
            func.def_block(v)?,
            func.def_block(arr)?,
            func.def_block(index)?,
        );
        self.enclosing(b).iter().rev().copied().find(|&l| {
            let lp = &self.loops[l];
            lp.contains(def) && !lp.contains(arr_def) && !lp.contains(index_def) && {
                let mut cache = self.loop_writes.borrow_mut();
                let (writes, samelen) = cache.entry(l).or_insert_with(|| self.scan_loop(func, l));
                !writes.contains(arr) && !*samelen
            }
        })
    }

    /// The arrays an instruction of counted loop `l` can change (any that
    /// it takes, unless it is a `load`, `len` or `samelen`), and whether
    /// `l` contains a `samelen`.
    fn scan_loop(&self, func: &Function, l: usize) -> (EntitySet<Value>, bool) {
        let mut writes = EntitySet::new();
        let mut samelen = false;
        for &b in self.order.iter().filter(|&&b| self.loops[l].contains(b)) {
            for &i in func.layout.block_insts(b) {
                let data = func.dfg.inst(i);
                match data {
                    InstData::Binary {
                        op: Opcode::SameLen,
                        ..
                    } => samelen = true,
                    InstData::Binary {
                        op: Opcode::Load, ..
                    }
                    | InstData::Unary {
                        op: Opcode::Len, ..
                    } => {}
                    _ => {
                        for &v in data.args() {
                            if func.dfg.value_type(v) == Type::Array {
                                writes.insert(v);
                            }
                        }
                    }
                }
            }
        }
        (writes, samelen)
    }

    /// The load a loop invariant is, when it is defined inside loop `l`
    /// (see [`Plan::invariant_load_loop`]): the augmented primal loads it
    /// again, as `(array, index)`, where `l` is left.
    pub fn reloaded_invariant(
        &self,
        func: &Function,
        v: Value,
        l: usize,
    ) -> Option<(Value, Value)> {
        let ValueDef::Result { inst, .. } = *func.dfg.value_def(v) else {
            return None;
        };
        if !self.loops[l].contains(func.layout.inst_block(inst)?) {
            return None;
        }
        match *func.dfg.inst(inst) {
            InstData::Binary {
                op: Opcode::Load,
                args: [arr, index],
            } => Some((arr, index)),
            _ => None,
        }
    }

    /// Is the primal value `v` a parameter the adjoint receives?
    pub fn is_available(&self, v: Value) -> bool {
        self.available.contains(v)
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
    /// the results whose cotangent is not differentiated.
    pub fn new(
        cache: &mut Cache,
        module: &Module,
        func: &Function,
        args: &[ArgActivity],
        ret: RetActivity,
        ignored: &[usize],
        untaken: &[usize],
    ) -> Result<Plan, AdError> {
        let entry = func.entry_block().ok_or_else(|| AdError::NoBody {
            func: func.name.clone(),
        })?;
        let order = adze_ir::cfg::reverse_postorder(func, entry);
        let mut reachable = EntitySet::new();
        for &b in &order {
            reachable.insert(b);
        }
        let mut preds: SecondaryMap<Block, Vec<Edge>> = SecondaryMap::new();
        let mut returns = Vec::new();
        for &b in &order {
            let Some(inst) = func.layout.last_inst(b) else {
                continue;
            };
            let data = func.dfg.inst(inst);
            if matches!(data, InstData::Return { .. }) {
                returns.push(b);
            }
            for (dest, call) in data.destinations().iter().enumerate() {
                preds[call.block].push(Edge {
                    from: b,
                    inst,
                    dest,
                });
            }
        }

        // Varied: forward activity with `active` scalars as `dual`.
        let fwd_args: Vec<ArgActivity> = args
            .iter()
            .map(|a| match a {
                ArgActivity::Active => ArgActivity::Dual,
                other => *other,
            })
            .collect();
        let varied = activity::analyze_cached(cache, module, func, &fwd_args);

        let useful = usefulness(
            cache,
            module,
            func,
            &order,
            args,
            ret,
            ignored,
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
        let mut safe_loads = EntitySet::new();
        for inst in adze_ir::bounds::safe_accesses(func) {
            safe_loads.insert(inst);
        }
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
            shadowed: EntitySet::new(),
            reached: EntitySet::new(),
            slot: SecondaryMap::new(),
            num_slots: 0,
            tape: SecondaryMap::new(),
            recipes: SecondaryMap::new(),
            loops: Vec::new(),
            header_loop: SecondaryMap::new(),
            enclosing: SecondaryMap::new(),
            ivs: SecondaryMap::new(),
            invariants: Vec::new(),
            safe_loads,
            loop_writes: Default::default(),
            adj_params,
            available,
            zeros_sites: Vec::new(),
            num_threaded: 0,
            const_shadows: Vec::new(),
        };
        plan.find_shadows(func, args, entry);
        plan.find_reached(cache, module, func, ret, ignored);
        plan.assign_slots(cache, module, func, ret);
        plan.find_loops(func);
        Ok(plan)
    }

    /// Can the reverse of `inst` (not a branch or `return`) add to the
    /// adjoints of its operands? A differentiable operation with an active
    /// result, a `store` or `fill` into a shadowed array, an f64 `push`, and
    /// a call that the pass differentiates (`super::plan_calls`: something
    /// active goes in and something differentiated comes out, or it uses
    /// the tape).
    fn contributes(
        &self,
        cache: &mut Cache,
        module: &Module,
        func: &Function,
        inst: Inst,
        tape_use: &mut activity::TapeUse,
    ) -> bool {
        let data = func.dfg.inst(inst);
        let results = func.dfg.inst_results(inst);
        match data {
            InstData::Ternary {
                op: Opcode::Store,
                args: [a, _, _],
            }
            | InstData::Binary {
                op: Opcode::Fill,
                args: [a, _],
            } => self.is_shadowed(*a),
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

    /// The test of [`Plan::differentiates_call`] while what is reached is
    /// being found ([`Plan::find_reached`]): any active result counts.
    fn may_differentiate_call(
        &self,
        cache: &mut Cache,
        module: &Module,
        func: &Function,
        inst: Inst,
        tape_use: &mut activity::TapeUse,
    ) -> bool {
        self.call_test(cache, module, func, inst, tape_use, |r| {
            self.is_active(func, r)
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
                || func.dfg.inst_results(inst).iter().any(|&r| counts(r)))
    }

    /// Finds the counted loops (see [`Loop`]) and their induction variables:
    /// the natural loops ([`adze_ir::cfg::natural_loops`]) whose header is
    /// not the entry and has two incoming edges, one of them a back edge.
    fn find_loops(&mut self, func: &Function) {
        let preds = |b: Block| self.preds[b].iter().map(|e| e.from);
        let doms = adze_ir::cfg::DominatorTree::new(&self.order, preds);
        for natural in adze_ir::cfg::natural_loops(preds, &doms) {
            let h = natural.header;
            let ps = &self.preds[h];
            if h == self.entry || ps.len() != 2 {
                continue;
            }
            let backs: Vec<usize> = (0..2)
                .filter(|&k| natural.latches.contains(&ps[k].from))
                .collect();
            let [back] = backs[..] else { continue };
            let entry = 1 - back;
            // The natural loop of the back edge (its only one).
            let mut body = EntitySet::new();
            for &b in &natural.blocks {
                body.insert(b);
            }
            let l = self.loops.len();
            let size = body.iter().count();
            // Induction variables: `p` with `p + c` (or `p - c`) on the back edge.
            let dest_args = |e: Edge| -> Vec<Value> {
                func.dfg
                    .inst(e.inst)
                    .destinations()
                    .get(e.dest)
                    .map(|d| d.args.to_vec())
                    .unwrap_or_default()
            };
            let (ein, eback) = (dest_args(ps[entry]), dest_args(ps[back]));
            for (k, &p) in func.dfg.block_params(h).iter().enumerate() {
                if func.dfg.value_type(p) != Type::I64 {
                    continue;
                }
                let (Some(&init), Some(&next)) = (ein.get(k), eback.get(k)) else {
                    continue;
                };
                if let Some(step) = iv_step(func, p, next) {
                    self.ivs[p] = Some((l, init, step));
                }
            }
            self.header_loop[h] = Some(l);
            self.loops.push(Loop {
                entry,
                back,
                body,
                size,
            });
        }
        for (l, lp) in self.loops.iter().enumerate() {
            for &b in &self.order {
                if lp.contains(b) {
                    self.enclosing[b].push(l);
                }
            }
        }
        for list in self.enclosing.values_mut() {
            list.sort_by_key(|&l| self.loops[l].size);
        }
    }

    fn find_shadows(&mut self, func: &Function, args: &[ArgActivity], entry: Block) {
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
                if let InstData::Zeros { len, .. } = func.dfg.inst(inst) {
                    let a = func.dfg.first_result(inst);
                    if useful(self, a) {
                        self.shadowed.insert(a);
                        let threaded = if b == entry {
                            None
                        } else {
                            self.num_threaded += 1;
                            Some(self.num_threaded - 1)
                        };
                        self.zeros_sites.push(ZerosSite {
                            array: a,
                            len: *len,
                            threaded,
                        });
                    }
                }
            }
        }
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

    fn find_reached(
        &mut self,
        cache: &mut Cache,
        module: &Module,
        func: &Function,
        ret: RetActivity,
        ignored: &[usize],
    ) {
        let mut reached = EntitySet::new();
        let mut tape_use = activity::TapeUse::default();
        loop {
            let mut changed = false;
            let mut mark = |reached: &mut EntitySet<Value>, v: Value| changed |= reached.insert(v);
            for &b in self.order.iter().rev() {
                for &inst in func.layout.block_insts(b).iter().rev() {
                    let data = func.dfg.inst(inst);
                    match data {
                        InstData::Return { args } => {
                            if ret == RetActivity::Active {
                                for (k, &a) in args.iter().enumerate() {
                                    if !ignored.contains(&k) && self.is_active(func, a) {
                                        mark(&mut reached, a);
                                    }
                                }
                            }
                        }
                        InstData::Jump { .. } | InstData::Brif { .. } => {
                            for dest in data.destinations() {
                                let params = func.dfg.block_params(dest.block);
                                for (&a, &p) in dest.args.iter().zip(params) {
                                    if reached.contains(p) && self.is_active(func, a) {
                                        mark(&mut reached, a);
                                    }
                                }
                            }
                        }
                        _ => {
                            let counts = match data {
                                InstData::Call { .. } => self.may_differentiate_call(
                                    cache,
                                    module,
                                    func,
                                    inst,
                                    &mut tape_use,
                                ),
                                _ => self.contributes(cache, module, func, inst, &mut tape_use),
                            };
                            if !counts {
                                continue;
                            }
                            let results = func.dfg.inst_results(inst);
                            // Stores, fills, pushes and calls feed shadows,
                            // the tape or a callee: conservatively reached.
                            let out = match data {
                                InstData::Call { .. } | InstData::Push { .. } => true,
                                InstData::Ternary {
                                    op: Opcode::Store, ..
                                }
                                | InstData::Binary {
                                    op: Opcode::Fill, ..
                                } => true,
                                _ => results.iter().any(|&r| reached.contains(r)),
                            };
                            // A call passes adjoints to its arguments when
                            // one of its results is reached, it writes a
                            // shadowed array, or it uses the tape (what it
                            // pushes gets adjoints from the pops elsewhere).
                            let call_reaches = match data {
                                InstData::Call { func: callee, .. } => {
                                    results.is_empty()
                                        || results.iter().any(|&r| reached.contains(r))
                                        || self.call_writes_shadow(module, func, inst)
                                        || tape_use.uses(cache, module, *callee)
                                }
                                _ => true,
                            };
                            if out && call_reaches {
                                for &a in data.args() {
                                    if self.is_active(func, a) {
                                        mark(&mut reached, a);
                                    }
                                }
                            }
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
        self.reached = reached;
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
    fn assign_slots(
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
            };
            if self.has_edge_item(b) {
                r.items.push((0, TapeItem::Edge));
            }
            let mut needs: Vec<(u32, Value)> = Vec::new();
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
                        args: [_, i],
                    } => {
                        if self.is_active(func, results[0]) {
                            needs.push(*i);
                        }
                    }
                    InstData::Ternary {
                        op: Opcode::Store,
                        args: [a, i, _],
                    } => {
                        if self.is_shadowed(*a) {
                            needs.push(*i);
                        }
                    }
                    InstData::Call { .. } => {
                        for &a in &call_args[inst] {
                            needs.push(a);
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
                        let (ops, res_needed) = partial_needs(func, data, *res, &wanted);
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
            for (segment, v) in needs {
                if segment != r.segment {
                    r.segment = segment;
                    r.popped.clear();
                    r.recomputed.clear();
                }
                r.resolve(v)?;
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

/// Does the adjoint of a function take its parameter number `k` too? Each
/// scalar and each read-only array, unless `untaken`. A read-only array
/// parameter cannot be written while the function runs (the verifier and
/// the front end forbid passing an array that a call writes to another
/// parameter of it), so the adjoint reads it as the primal did.
pub(crate) fn adj_takes(param: &adze_ir::Param, k: usize, untaken: &[usize]) -> bool {
    !untaken.contains(&k) && (param.ty.is_scalar() || (param.ty == Type::Array && !param.mutable))
}

/// The values the reverse of one block reads, each with the segment of the
/// instruction that reads it (see [`Plan::recipes`]).
struct Needs<'a> {
    list: &'a mut Vec<(u32, Value)>,
    segment: u32,
}

impl Needs<'_> {
    fn push(&mut self, v: Value) {
        self.list.push((self.segment, v));
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
}

/// A recomputation being tried: its recipes, and the values it would pop.
#[derive(Default)]
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
                self.recipes.push((self.segment, r));
            }
            Ok(())
        } else {
            self.tape(v)
        }
    }

    fn tape(&mut self, v: Value) -> Result<(), AdError> {
        if !self.func.dfg.value_type(v).is_scalar() {
            return Err(AdError::ReverseUnsupported {
                func: self.func.name.clone(),
                what: format!("taping the array {v}"),
            });
        }
        self.popped.insert(v);
        self.items.push((self.segment, TapeItem::Value(v)));
        Ok(())
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
            if plan.enclosing(self.block).contains(&lp) && self.attempt(init, t, false) {
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
        } else {
            match *func.dfg.value_def(v) {
                ValueDef::Result { inst, .. } if t.budget > 0 && self.recomputable(inst) => {
                    t.budget -= 1;
                    for &a in func.dfg.inst(inst).args() {
                        if func.dfg.value_type(a) == Type::Array && !plan.is_available(a) {
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
    /// second call), other than a constant; and `load`.
    fn recomputable(&self, inst: Inst) -> bool {
        let op = self.func.dfg.inst(inst).opcode();
        op == Opcode::Load
            || (op.effects().is_pure()
                && op.cost().is_some()
                && op.libcall().is_none()
                && !matches!(
                    op.format(),
                    InstFormat::FConst | InstFormat::IConst | InstFormat::BConst
                ))
    }
}

/// The step of an induction variable: `next` is `p + c`, `c + p` or `p - c`
/// for an `iconst c`.
fn iv_step(func: &Function, p: Value, next: Value) -> Option<i64> {
    let ValueDef::Result { inst, .. } = *func.dfg.value_def(next) else {
        return None;
    };
    let konst = |v: Value| func.iconst_value(v);
    match func.dfg.inst(inst) {
        InstData::Binary {
            op: Opcode::Iadd,
            args: [a, b],
        } => {
            if *a == p {
                konst(*b)
            } else if *b == p {
                konst(*a)
            } else {
                None
            }
        }
        InstData::Binary {
            op: Opcode::Isub,
            args: [a, b],
        } if *a == p => konst(*b).map(i64::wrapping_neg),
        _ => None,
    }
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
) -> (Vec<bool>, bool) {
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
    match local {
        Some(Local::Partials(ps)) => {
            for (k, p) in ps.iter().enumerate() {
                if let (Partial::Value(v), true) = (p, wanted.get(k).copied().unwrap_or(false)) {
                    used.insert(*v);
                }
            }
        }
        Some(Local::Choose { cond, .. }) => {
            used.insert(cond);
        }
        None => {}
    }
    (
        ops.iter().map(|&v| used.contains(v)).collect(),
        used.contains(res),
    )
}

/// Backward analysis: which values can influence what the derivative
/// differentiates — the f64 results (for `ret active`, except the results
/// numbered in `ignored`, whose cotangents the caller does not use) and the
/// final contents of `dup` `mut` arrays. Iterated to a fixed point over the
/// reachable blocks.
///
/// A call is as precise as its callee's body inlined: which arguments are
/// useful is the callee's own analysis for the results and the `mut`
/// arrays that are useful here ([`UsefulSummaries`]), so an argument that
/// only feeds a result nobody uses, or a scratch array nobody reads, gets
/// no adjoint — as it gets none when the inliner has put the body here.
/// Calls to functions with rules (a rule takes every input) stay
/// conservative: every argument is useful. A callee that uses the tape is
/// summarised too: what it pushes is useful, as in its inlined body.
#[allow(clippy::too_many_arguments)]
fn usefulness(
    cache: &mut Cache,
    module: &Module,
    func: &Function,
    order: &[Block],
    args: &[ArgActivity],
    ret: RetActivity,
    ignored: &[usize],
    summaries: &mut UsefulSummaries,
) -> EntitySet<Value> {
    let mut useful = EntitySet::new();
    for (num, &p) in func.params().iter().enumerate() {
        if args.get(num) == Some(&ArgActivity::Dup) && func.array_is_writable(p) {
            useful.insert(p);
        }
    }
    let mut tape_use = activity::TapeUse::default();
    loop {
        let mut changed = false;
        let mut mark = |useful: &mut EntitySet<Value>, v: Value| changed |= useful.insert(v);
        for &b in order.iter().rev() {
            for &inst in func.layout.block_insts(b).iter().rev() {
                let data = func.dfg.inst(inst);
                let results = func.dfg.inst_results(inst);
                match data {
                    InstData::Return { args } => {
                        if ret == RetActivity::Active {
                            for (k, &a) in args.iter().enumerate() {
                                if !ignored.contains(&k) {
                                    mark(&mut useful, a);
                                }
                            }
                        }
                    }
                    InstData::Jump { .. } | InstData::Brif { .. } => {
                        for dest in data.destinations() {
                            let params = func.dfg.block_params(dest.block);
                            for (&a, &p) in dest.args.iter().zip(params) {
                                if useful.contains(p) {
                                    mark(&mut useful, a);
                                }
                            }
                        }
                    }
                    InstData::Ternary {
                        op: Opcode::Store,
                        args: [a, _, x],
                    }
                    | InstData::Binary {
                        op: Opcode::Fill,
                        args: [a, x],
                    } => {
                        if useful.contains(*a) {
                            mark(&mut useful, *x);
                        }
                    }
                    InstData::Binary {
                        op: Opcode::Load,
                        args: [a, _],
                    } => {
                        if useful.contains(results[0]) {
                            mark(&mut useful, *a);
                        }
                    }
                    InstData::Push { arg, .. } => {
                        // The value may be popped by code that is useful.
                        if func.dfg.value_type(*arg) == Type::F64 {
                            mark(&mut useful, *arg);
                        }
                    }
                    InstData::Call { func: callee, args } => {
                        let params = if module.is_valid(*callee) {
                            module.func(*callee).sig.params.clone()
                        } else {
                            Vec::new()
                        };
                        let arrays: Vec<bool> = args
                            .iter()
                            .enumerate()
                            .map(|(k, &a)| {
                                params
                                    .get(k)
                                    .is_some_and(|p| p.ty == Type::Array && p.mutable)
                                    && useful.contains(a)
                            })
                            .collect();
                        let results_useful: Vec<bool> =
                            results.iter().map(|&r| useful.contains(r)).collect();
                        // A callee that uses the tape may push values of its
                        // arguments for code elsewhere to pop: its own
                        // usefulness marks what it pushes (as inlined code
                        // does), whatever the call's results.
                        let tape = tape_use.uses(cache, module, *callee);
                        if tape || arrays.contains(&true) || results_useful.contains(&true) {
                            let which =
                                summaries.params(cache, module, *callee, &results_useful, &arrays);
                            for (k, &a) in args.iter().enumerate() {
                                if which.as_ref().is_none_or(|w| w.get(k) != Some(&false)) {
                                    mark(&mut useful, a);
                                }
                            }
                        }
                    }
                    _ => {
                        if let [r] = results {
                            if useful.contains(*r) && partials::is_differentiable(data.opcode()) {
                                for &a in data.args() {
                                    mark(&mut useful, a);
                                }
                            }
                        }
                    }
                }
            }
        }
        if !changed {
            return useful;
        }
    }
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
    memo: HashMap<UsefulKey, Option<Vec<bool>>>,
    /// Answers so far that depended on what may change (a call into the
    /// stack, a declaration, a request not lowered yet); a summary computed
    /// without any is final for the lowering and is kept for it.
    unsettled: usize,
}

/// A callee, its useful results and its useful `mut` array arguments.
pub(crate) type UsefulKey = (FuncId, Vec<bool>, Vec<bool>);

impl UsefulSummaries {
    fn params(
        &mut self,
        cache: &mut Cache,
        module: &Module,
        callee: FuncId,
        results: &[bool],
        arrays: &[bool],
    ) -> Option<Vec<bool>> {
        if !module.is_valid(callee) {
            return None;
        }
        if self.stack.contains(&callee) {
            self.unsettled += 1;
            return None;
        }
        let key = (callee, results.to_vec(), arrays.to_vec());
        if let Some(s) = self.memo.get(&key) {
            return s.clone();
        }
        if let Some(s) = cache.useful.get(&key) {
            return s.clone();
        }
        let before = self.unsettled;
        self.stack.push(callee);
        let out = self.compute(cache, module, callee, results, arrays);
        self.stack.pop();
        if cache.is_active() && self.unsettled == before {
            cache.useful.insert(key.clone(), out.clone());
        }
        self.memo.insert(key, out.clone());
        out
    }

    fn compute(
        &mut self,
        cache: &mut Cache,
        module: &Module,
        callee: FuncId,
        results: &[bool],
        arrays: &[bool],
    ) -> Option<Vec<bool>> {
        let f = module.func(callee);
        if f.is_declaration()
            || f.layout
                .insts()
                .any(|(_, i)| f.dfg.inst(i).opcode() == Opcode::Autodiff)
        {
            self.unsettled += 1;
            return None;
        }
        if !f.meta.rules.is_empty()
            || f.params().len() != arrays.len()
            || f.sig.results.len() != results.len()
        {
            return None;
        }
        let collapsed;
        let f = if crate::rules::applied_regions(f).0.is_empty() {
            f
        } else {
            let mut copy = f.clone();
            crate::regions::collapse(&mut copy, |_| true).ok()?;
            copy.regions.clear();
            collapsed = copy;
            &collapsed
        };
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
        let useful = usefulness(cache, module, f, &order, &args, ret, &ignored, self);
        Some(f.params().iter().map(|&p| useful.contains(p)).collect())
    }
}
