//! The inliner: replaces `call` instructions by copies of the callee's body,
//! keeping the identity of every function that carries custom derivative
//! rules as a *rule region* (SPEC §2: "inlining never changes a derivative").
//!
//! It is a library with a policy trait, as Cranelift's: [`InlinePolicy`]
//! decides which calls are worth inlining, [`DefaultPolicy`] follows the
//! `#[inline(..)]` hints and a size budget, and the inliner itself enforces
//! what no policy may change:
//!
//! - **Recursion.** A call to a *recursive* function — one that lies on a
//!   cycle of the call graph, calling itself directly or through others — is
//!   never inlined, whatever its hint. So a recursion cycle is never unrolled,
//!   let alone without bound; a non-recursive function called from a
//!   recursive one is inlined normally. The call graph is computed once, from
//!   the module as it is when inlining starts (inlining never creates a cycle:
//!   a call copied into a caller reaches only what it reached before).
//! - **Growth.** Inlining stops in a function once one more inlined body would
//!   take it over [`InlinePolicy::max_function_insts`] placed instructions.
//! - **Rules.** A callee that carries rules is inlined like any other, and its
//!   inlined body becomes a rule region ([`adze_ir::RegionData`]) that every
//!   AD pass treats exactly like the call it replaced.
//!
//! Inlining `@sq` (forward rule `@sq.fwd`) into `@f`:
//!
//! ```text
//! function @f(x: f64) -> f64 {
//! block0(v0: f64):
//!     v1 = call @sq(v0)
//!     v2 = fadd v1, v0
//!     return v2
//! }
//! ```
//!
//! gives
//!
//! ```text
//! function @f(x: f64) -> f64 {
//!     region0: @sq(v0) -> (v1) blocks(block2) rules(forward: @sq.fwd)
//!     inlined0: @sq blocks(block2)
//! block0(v0: f64):
//!     jump block2
//! block2:
//!     v3 = fmul v0, v0
//!     jump block1(v3)
//! block1(v1: f64):
//!     v2 = fadd v1, v0
//!     return v2
//! }
//! ```
//!
//! The mechanics, per call: the call's block is split after the call into a
//! *continuation* block (`block1`), whose parameters are the call's former
//! result values (their numbers do not change, so no use is rewritten); the
//! callee's blocks are copied, in layout order, between the call's block and
//! the continuation, with fresh blocks and values; the callee's parameters
//! are replaced by the call's arguments (never passed as block arguments, so
//! arrays keep flowing only from entry parameters and `zeros`); the call
//! becomes `jump` to the copied entry, and each `return vs` becomes
//! `jump cont(vs)`. A region's `args` are the call's arguments, its
//! `results` the continuation's parameters, its `blocks` every copied block,
//! entry first. Regions the callee already had are copied too (remapped),
//! their parent being their copied parent, else the new region, else the
//! region enclosing the call. A call inside a region's blocks makes the
//! copied blocks and the continuation part of that region and of every
//! region that lists the call's block.
//!
//! **Provenance.** Every inlined call, with or without rules, also records
//! an [`adze_ir::InlinedData`] entry (`inlined0: @g blocks(..)`): the
//! callee's name and the copied blocks, with the entry enclosing the call as
//! parent. The callee's own entries are copied as its children, and the
//! entries listing the call's block gain the copied blocks and the
//! continuation, exactly as for regions. Run-time errors use it to name the
//! inlined function a fault comes from; nothing else reads it.
//!
//! **Bottom-up.** Functions are finished callees first (a post-order of the
//! call graph, cycles broken anywhere): a call receives its callee's
//! finished body, whose remaining calls were refused already and are not
//! looked at again, and the policy judges the callee at that size. So each
//! body is copied once per call site, and the output of a whole module is
//! bounded by the budget (a chain of `n` functions, each calling the next,
//! is O(n); re-expanding each callee's original body into every caller was
//! O(n³) in time).
//!
//! Everything is deterministic: functions are visited in post-order from
//! the order given, calls in layout order, and nothing iterates a hash
//! table.

use adze_ir::{
    Block, BlockCall, FuncId, Function, InlineHint, Inlined, InlinedData, Inst, InstData, Module,
    Region, RegionData, Type, Value,
};
use cranelift_entity::{EntitySet, SecondaryMap};

/// The default size budget of [`DefaultPolicy`]: a callee hinted `auto` is
/// inlined when it has at most this many placed instructions. 64 covers the
/// small helpers of numeric code (a few arithmetic expressions, a short
/// loop) and leaves large bodies as calls.
pub const DEFAULT_BUDGET: usize = 64;

/// The default bound on the size of a function the inliner grows
/// (see [`InlinePolicy::max_function_insts`]).
pub const MAX_FUNCTION_INSTS: usize = 20_000;

/// Decides which calls are inlined. The inliner asks once per call site,
/// after ruling out what it never inlines (calls to recursive functions,
/// calls to declarations, malformed calls).
pub trait InlinePolicy {
    /// Should the call from `caller` to `callee` be inlined? `module` is the
    /// module as it was when inlining started.
    fn should_inline(&self, module: &Module, caller: FuncId, callee: FuncId) -> bool;

    /// The total budget: a function is not grown past this many placed
    /// instructions by inlining (a call whose inlining would exceed it stays
    /// a call). Bounds the otherwise exponential growth of chains of calls.
    fn max_function_insts(&self) -> usize {
        MAX_FUNCTION_INSTS
    }
}

/// Follows the `#[inline(..)]` hints: `never` is never inlined, `always`
/// always (recursion aside), `auto` when the callee has at most `budget`
/// placed instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DefaultPolicy {
    /// Largest callee, in placed instructions, inlined under an `auto` hint.
    pub budget: usize,
}

impl Default for DefaultPolicy {
    /// A budget of [`DEFAULT_BUDGET`] (64) instructions.
    fn default() -> DefaultPolicy {
        DefaultPolicy {
            budget: DEFAULT_BUDGET,
        }
    }
}

impl InlinePolicy for DefaultPolicy {
    fn should_inline(&self, module: &Module, _caller: FuncId, callee: FuncId) -> bool {
        let f = module.func(callee);
        match f.meta.inline {
            InlineHint::Never => false,
            InlineHint::Always => true,
            InlineHint::Auto => f.num_placed_insts() <= self.budget,
        }
    }
}

/// What one run of the inliner did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InlineStats {
    /// Call sites replaced by a callee's body.
    pub inlined: usize,
    /// Rule regions created: one per inlined call to a callee with rules,
    /// plus the copies of the regions the inlined bodies contained.
    pub regions: usize,
}

/// Inlines calls in every function of the module, to a fixed point bounded
/// by the policy and a total budget (see the module documentation).
pub fn inline_module(module: &mut Module, policy: &dyn InlinePolicy) -> InlineStats {
    let funcs: Vec<FuncId> = module.ids().collect();
    inline_functions(module, &funcs, policy)
}

/// Inlines calls in the functions `funcs` only (each once; invalid ids are
/// ignored), bottom-up: a function's callees among `funcs` are finished
/// first, and each call site receives its callee's finished body, whose own
/// calls are not looked at again. So every body is copied once per call
/// site at its final size, the policy judges a callee by that size, and the
/// total output stays bounded by the policy's budget — a chain of `n`
/// functions costs O(n), not a re-expansion of the whole chain into every
/// function (which was cubic). Callees outside `funcs` are copied as they
/// are (not modified), and the calls in their copies are considered too.
pub fn inline_functions(
    module: &mut Module,
    funcs: &[FuncId],
    policy: &dyn InlinePolicy,
) -> InlineStats {
    let recursive = recursive_functions(module);
    let mut stats = InlineStats::default();
    let order = post_order(module, funcs);
    let mut finished = EntitySet::with_capacity(module.len());
    for id in order {
        let mut func = module.func(id).clone();
        let mut inliner = Inliner {
            module,
            recursive: &recursive,
            finished: &finished,
            policy,
            caller: id,
            stats: &mut stats,
        };
        inliner.run(&mut func);
        module.replace(id, func);
        finished.insert(id);
    }
    stats
}

/// `funcs` (valid, without duplicates) in post-order of the call graph:
/// each after the functions of `funcs` it calls, cycles broken anywhere;
/// otherwise in the order given. Iterative, so any depth of calls is fine.
fn post_order(module: &Module, funcs: &[FuncId]) -> Vec<FuncId> {
    let mut wanted = EntitySet::with_capacity(module.len());
    for &f in funcs {
        if module.is_valid(f) {
            wanted.insert(f);
        }
    }
    // 0: not seen, 1: on the stack, 2: done.
    let mut state: SecondaryMap<FuncId, u8> = SecondaryMap::with_capacity(module.len());
    let mut out = Vec::new();
    for &root in funcs {
        if !module.is_valid(root) || state[root] != 0 {
            continue;
        }
        state[root] = 1;
        let mut stack: Vec<(FuncId, Vec<FuncId>)> =
            vec![(root, callees(module, module.func(root)))];
        while let Some((f, next)) = stack.last_mut() {
            let f = *f;
            match next.pop() {
                Some(c) if wanted.contains(c) && state[c] == 0 => {
                    state[c] = 1;
                    let cs = callees(module, module.func(c));
                    stack.push((c, cs));
                }
                Some(_) => {}
                None => {
                    state[f] = 2;
                    out.push(f);
                    stack.pop();
                }
            }
        }
    }
    out
}

/// The callees of `func`'s placed `call` instructions, sorted, without
/// duplicates, restricted to functions of `module`.
fn callees(module: &Module, func: &Function) -> Vec<FuncId> {
    let mut out: Vec<FuncId> = func
        .layout
        .insts()
        .filter_map(|(_, inst)| match func.dfg.inst(inst) {
            InstData::Call { func, .. } if module.is_valid(*func) => Some(*func),
            _ => None,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Per function: does it lie on a cycle of the call graph (can it reach
/// itself through `call` instructions)?
fn recursive_functions(module: &Module) -> EntitySet<FuncId> {
    let succ: SecondaryMap<FuncId, Vec<FuncId>> = module
        .iter()
        .map(|(f, func)| (f, callees(module, func)))
        .collect();
    let mut recursive = EntitySet::with_capacity(module.len());
    // The search each function was last reached by.
    let mut seen: SecondaryMap<FuncId, Option<FuncId>> = SecondaryMap::with_capacity(module.len());
    for (start, _) in module.iter() {
        let mut stack: Vec<FuncId> = succ[start].clone();
        while let Some(f) = stack.pop() {
            if f == start {
                recursive.insert(start);
                break;
            }
            if seen[f] == Some(start) {
                continue;
            }
            seen[f] = Some(start);
            stack.extend(succ[f].iter().copied());
        }
    }
    recursive
}

struct Inliner<'a> {
    /// The module, with the callees that come before the caller in
    /// [`post_order`] already finished: callee bodies come from here.
    module: &'a Module,
    recursive: &'a EntitySet<FuncId>,
    /// The functions this run has finished: their copies hold no call worth
    /// looking at again.
    finished: &'a EntitySet<FuncId>,
    policy: &'a dyn InlinePolicy,
    caller: FuncId,
    stats: &'a mut InlineStats,
}

impl Inliner<'_> {
    /// Inlines acceptable calls of `func` until none is left, in one pass
    /// over its blocks: the copy of a finished callee is skipped, the copy
    /// of any other callee is looked at like the rest.
    fn run(&mut self, func: &mut Function) {
        let limit = self.policy.max_function_insts();
        let mut size = func.num_placed_insts();
        // Calls already refused (instruction numbers only grow).
        let mut refused: EntitySet<Inst> = EntitySet::new();
        // Blocks before this layout position hold no acceptable call.
        let mut from = 0;
        loop {
            let mut found = None;
            'scan: for (pos, &block) in func.layout.blocks().iter().enumerate().skip(from) {
                for (at, &inst) in func.layout.block_insts(block).iter().enumerate() {
                    let InstData::Call { func: callee, .. } = func.dfg.inst(inst) else {
                        continue;
                    };
                    if refused.contains(inst) {
                        continue;
                    }
                    let callee = *callee;
                    if self.accepts(func, inst, callee)
                        && size + self.module.func(callee).num_placed_insts() <= limit
                    {
                        found = Some((pos, block, at, inst, callee));
                        break 'scan;
                    }
                    refused.insert(inst);
                }
            }
            let Some((pos, block, at, inst, callee)) = found else {
                break;
            };
            let body = self.module.func(callee);
            let body_size = body.num_placed_insts();
            inline_call(func, block, at, inst, callee, body, self.stats);
            // The call became a jump; each `return` of the copy a jump too.
            size += body_size;
            from = if self.finished.contains(callee) {
                // The continuation: after the call's block and the copy.
                pos + 1 + body.layout.blocks().len()
            } else {
                pos
            };
        }
    }

    /// Everything but the size budget: may this call be inlined?
    fn accepts(&self, func: &Function, inst: Inst, callee: FuncId) -> bool {
        if !self.module.is_valid(callee) || self.recursive.contains(callee) {
            return false;
        }
        let body = self.module.func(callee);
        let InstData::Call { args, .. } = func.dfg.inst(inst) else {
            return false;
        };
        !body.is_declaration()
            && args.len() == body.params().len()
            && func.dfg.inst_results(inst).len() == body.sig.results.len()
            && (!body.sig.results.iter().any(|t| t.is_array()) || single_return(body).is_some())
            && self.policy.should_inline(self.module, self.caller, callee)
    }
}

/// Maps the callee's entities to fresh ones of the caller.
/// Only the callee's entities are remembered: an invalid one (only in
/// malformed IR) gets a fresh entity at each use.
struct Remap {
    values: SecondaryMap<Value, Option<Value>>,
    blocks: SecondaryMap<Block, Option<Block>>,
}

impl Remap {
    /// The caller's value for the callee's `v`. A value the callee never
    /// defines (only in malformed IR) becomes a detached value of the caller,
    /// which the verifier reports just as it would have in the callee.
    fn value(&mut self, func: &mut Function, callee: &Function, v: Value) -> Value {
        if let Some(w) = self.values[v] {
            return w;
        }
        let ty = if callee.dfg.value_is_valid(v) {
            callee.dfg.value_type(v)
        } else {
            Type::F64
        };
        let w = func.dfg.make_detached_value(ty);
        if callee.dfg.value_is_valid(v) {
            self.values[v] = Some(w);
        }
        w
    }

    /// The caller's block for the callee's `b` (a block the callee does not
    /// lay out, only in malformed IR, becomes a fresh block left out of the
    /// layout).
    fn block(&mut self, func: &mut Function, callee: &Function, b: Block) -> Block {
        if let Some(c) = self.blocks[b] {
            return c;
        }
        let c = func.dfg.make_block();
        if callee.dfg.block_is_valid(b) {
            self.blocks[b] = Some(c);
        }
        c
    }
}

/// Replaces the call `inst`, at position `at` of `block`, by a copy of
/// `body` (the function `callee`). See the module documentation.
fn inline_call(
    func: &mut Function,
    block: Block,
    at: usize,
    inst: Inst,
    callee: FuncId,
    body: &Function,
    stats: &mut InlineStats,
) {
    let args = func.dfg.inst(inst).args().to_vec();
    let results = func.dfg.inst_results(inst).to_vec();
    let around = Enclosing::of(func, block);
    let cont = split_at_call(func, block, at, inst, &results);
    // An array result never flows through a block parameter: the array
    // the callee's only `return` gives (one it owns, made by an
    // instruction of the body) becomes the call's result value itself.
    let mut premap = Vec::new();
    if let Some(ret) = single_return(body) {
        for (&v, &r) in body.dfg.inst(ret).args().iter().zip(&results) {
            if func.dfg.value_type(r).is_array() {
                premap.push((v, r));
            }
        }
    }
    let (mut map, copied, entry_args) = copy_body(func, body, block, &args, cont, &premap);
    if let Some(&first) = copied.first() {
        let jump = func.dfg.make_inst(
            InstData::Jump {
                dest: BlockCall {
                    block: first,
                    args: entry_args,
                },
            },
            &[],
        );
        // The jump into the body stands for the call.
        func.dfg.copy_srcloc(inst, jump);
        func.layout.append_inst(jump, block);
    }
    around.extend(func, block, &copied, cont);
    copy_provenance(func, body, &map, &copied, around.parent_inlined);
    let call = CallSite {
        callee,
        args,
        results,
    };
    copy_regions(func, body, &mut map, call, copied, around.parent, stats);
    stats.inlined += 1;
}

/// The regions and provenance entries a call's block is in, and the
/// innermost of each.
struct Enclosing {
    regions: Vec<Region>,
    parent: Option<Region>,
    inlined: Vec<Inlined>,
    parent_inlined: Option<Inlined>,
}

impl Enclosing {
    fn of(func: &Function, block: Block) -> Enclosing {
        let regions: Vec<Region> = func
            .regions
            .iter()
            .filter(|(_, d)| d.blocks.contains(&block))
            .map(|(r, _)| r)
            .collect();
        let parent = regions
            .iter()
            .copied()
            .max_by_key(|&r| (region_depth(func, r), r));
        let inlined: Vec<Inlined> = func
            .inlined
            .iter()
            .filter(|(_, d)| d.blocks.contains(&block))
            .map(|(i, _)| i)
            .collect();
        let parent_inlined = inlined
            .iter()
            .copied()
            .max_by_key(|&i| (func.inlined_depth(i), i));
        Enclosing {
            regions,
            parent,
            inlined,
            parent_inlined,
        }
    }

    /// The enclosing regions and entries now also span the copy and the
    /// continuation, right after `block`.
    fn extend(&self, func: &mut Function, block: Block, copied: &[Block], cont: Block) {
        let mut added = copied.to_vec();
        added.push(cont);
        for &r in &self.regions {
            let blocks = &mut func.regions[r].blocks;
            let pos = blocks.iter().position(|&b| b == block).map_or(0, |p| p + 1);
            blocks.splice(pos..pos, added.iter().copied());
        }
        for &i in &self.inlined {
            let blocks = &mut func.inlined[i].blocks;
            let pos = blocks.iter().position(|&b| b == block).map_or(0, |p| p + 1);
            blocks.splice(pos..pos, added.iter().copied());
        }
    }
}

/// Splits `block` after the call `inst` (at `at`), which it removes: the
/// call's results become the parameters of the continuation, returned.
fn split_at_call(
    func: &mut Function,
    block: Block,
    at: usize,
    inst: Inst,
    results: &[Value],
) -> Block {
    let cont = func.dfg.make_block();
    func.layout.insert_block_after(cont, block);
    func.layout.split_block(block, at + 1, cont);
    func.layout.remove_inst(inst);
    for &r in results {
        let ty = func.dfg.value_type(r);
        if !ty.is_array() {
            func.dfg.attach_block_param(cont, r, ty);
        }
    }
    cont
}

/// The only `return` of `body`, if it has exactly one: a callee with array
/// results is inlined only then (see `inline_call`).
fn single_return(body: &Function) -> Option<Inst> {
    let mut rets = body
        .layout
        .insts()
        .map(|(_, i)| i)
        .filter(|&i| matches!(body.dfg.inst(i), InstData::Return { .. }));
    let first = rets.next()?;
    rets.next().is_none().then_some(first)
}

/// Copies the blocks of `body` between `block` and the continuation
/// `cont` (its returns jump there, passing the scalar results). `premap`:
/// callee values that become given caller values (the array results).
/// Returns the map, the copied blocks in layout order, and the arguments
/// of the jump into the copied entry.
fn copy_body(
    func: &mut Function,
    body: &Function,
    block: Block,
    args: &[Value],
    cont: Block,
    premap: &[(Value, Value)],
) -> (Remap, Vec<Block>, Vec<Value>) {
    let mut map = Remap {
        values: SecondaryMap::with_capacity(body.dfg.num_values()),
        blocks: SecondaryMap::with_capacity(body.dfg.num_blocks()),
    };
    for &(v, r) in premap {
        map.values[v] = Some(r);
    }
    let entry = body.entry_block();
    let mut entry_args = Vec::new();
    let mut copied = Vec::new();
    let mut anchor = block;
    for &b in body.layout.blocks() {
        let nb = func.dfg.make_block();
        func.layout.insert_block_after(nb, anchor);
        anchor = nb;
        copied.push(nb);
        map.blocks[b] = Some(nb);
        if let Some(ns) = body.notes.blocks.get(&b) {
            func.notes.blocks.insert(nb, ns.clone());
        }
        if Some(b) == entry {
            // Arrays are substituted (they never flow through block
            // parameters); so are the scalars of a callee that becomes a
            // rule region (a region is entered by a jump without arguments,
            // and every AD pass treats it as the call it stands for). Other
            // scalars become parameters of the copied entry, passed by the
            // jump into it: a scalar parameter stays a value of its own, as
            // in the callee, so reverse mode accumulates its adjoint apart
            // and adds it to the argument's at the jump, exactly as it adds
            // a callee's returned adjoint at a call — inlining never
            // reassociates a sum of adjoints.
            let region = !body.meta.rules.is_empty();
            for (&p, &a) in body.dfg.block_params(b).iter().zip(args) {
                let ty = body.dfg.value_type(p);
                let v = if ty.is_array() || region {
                    a
                } else {
                    entry_args.push(a);
                    func.dfg.append_block_param(nb, ty)
                };
                map.values[p] = Some(v);
            }
        } else {
            for &p in body.dfg.block_params(b) {
                let v = func.dfg.append_block_param(nb, body.dfg.value_type(p));
                map.values[p] = Some(v);
            }
        }
    }
    for (_, i) in body.layout.insts() {
        for &r in body.dfg.inst_results(i) {
            if map.values[r].is_none() {
                let v = func.dfg.make_detached_value(body.dfg.value_type(r));
                map.values[r] = Some(v);
            }
        }
    }
    for (b, i) in body.layout.insts() {
        let data = match body.dfg.inst(i) {
            InstData::Return { args } => {
                let args = args
                    .iter()
                    .filter(|&&v| !body.dfg.value_type(v).is_array())
                    .map(|&v| map.value(func, body, v))
                    .collect();
                InstData::Jump {
                    dest: BlockCall { block: cont, args },
                }
            }
            data => {
                let mut data = data.clone();
                data.map_uses(|v| map.value(func, body, v));
                for dest in data.destinations_mut() {
                    dest.block = map.block(func, body, dest.block);
                }
                data
            }
        };
        let results: Vec<(Value, Type)> = body
            .dfg
            .inst_results(i)
            .iter()
            .map(|&r| (map.value(func, body, r), body.dfg.value_type(r)))
            .collect();
        let new = func.dfg.make_inst_with_results(data, &results);
        // The copy keeps the callee's source location (one module, one
        // file): a fault in inlined code points at the callee's source.
        func.dfg.set_srcloc(new, body.dfg.srcloc(i));
        // And its notes (`adze dump --annotate tape` after inlining).
        if let Some(ns) = body.notes.insts.get(&i) {
            func.notes.insts.insert(new, ns.clone());
        }
        let nb = map.block(func, body, b);
        func.layout.append_inst(new, nb);
    }
    (map, copied, entry_args)
}

/// Provenance: an entry for this call (inside `parent`), then copies of
/// the callee's own entries, nested in it.
fn copy_provenance(
    func: &mut Function,
    body: &Function,
    map: &Remap,
    copied: &[Block],
    parent: Option<Inlined>,
) {
    let this = func.inlined.push(InlinedData {
        callee: body.name.clone(),
        blocks: copied.to_vec(),
        parent,
    });
    let inlined_base = func.inlined.len() as u32;
    for data in body.inlined.values() {
        let entry = InlinedData {
            callee: data.callee.clone(),
            // Only the callee's laid-out blocks were copied; a listed block
            // it no longer lays out (a pass removed it) is dropped.
            blocks: data.blocks.iter().filter_map(|&b| map.blocks[b]).collect(),
            parent: Some(data.parent.map_or(this, |p| {
                Inlined::from_u32(inlined_base.saturating_add(p.as_u32()))
            })),
        };
        func.inlined.push(entry);
    }
}

/// The call being inlined: its callee, arguments and results.
struct CallSite {
    callee: FuncId,
    args: Vec<Value>,
    results: Vec<Value>,
}

/// The rule region of the callee (if it has rules; inside `parent`), then
/// copies of the callee's own regions, nested in it.
fn copy_regions(
    func: &mut Function,
    body: &Function,
    map: &mut Remap,
    call: CallSite,
    copied: Vec<Block>,
    parent: Option<Region>,
    stats: &mut InlineStats,
) {
    let mut outer = parent;
    if !body.meta.rules.is_empty() {
        outer = Some(func.regions.push(RegionData {
            callee: call.callee,
            rules: body.meta.rules,
            args: call.args,
            results: call.results,
            blocks: copied,
            parent,
        }));
        stats.regions += 1;
    }
    let base = func.regions.len() as u32;
    for data in body.regions.values() {
        let region = RegionData {
            callee: data.callee,
            rules: data.rules,
            args: data
                .args
                .iter()
                .map(|&v| map.value(func, body, v))
                .collect(),
            results: data
                .results
                .iter()
                .map(|&v| map.value(func, body, v))
                .collect(),
            blocks: data
                .blocks
                .iter()
                .map(|&b| map.block(func, body, b))
                .collect(),
            parent: data
                .parent
                .map(|p| Region::from_u32(base.saturating_add(p.as_u32())))
                .or(outer),
        };
        func.regions.push(region);
        stats.regions += 1;
    }
}

/// The number of parents above `r` (bounded, so a malformed parent cycle
/// cannot loop).
fn region_depth(func: &Function, r: Region) -> usize {
    let mut depth = 0;
    let mut cur = func.regions.get(r).and_then(|d| d.parent);
    while let Some(p) = cur {
        depth += 1;
        if depth > func.regions.len() {
            break;
        }
        cur = func.regions.get(p).and_then(|d| d.parent);
    }
    depth
}
