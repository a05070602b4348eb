//! The augmented primal: the primal with the same value and block numbers,
//! plus the tape records of the [`Plan`].
//!
//! - Before each block's terminator, the block pushes its tape record
//!   ([`Plan::tape`]): the primal scalars its adjoint reads and, for a block
//!   with several incoming edges, the number of the edge it was entered by
//!   (an extra `i64` block parameter that each predecessor sets).
//! - Before a `return`: the number of the `return` (when there are several),
//!   then the shadow lengths of the adjoint's local arrays
//!   ([`Plan::length_items`]). A `zeros` outside the entry block may run many
//!   times with different lengths: its running maximum is threaded through
//!   every block as an `i64` block parameter.
//! - An active call to a function without rules calls the callee's
//!   augmented primal instead.
//! - A call to a function with rules stays the primal call (rule identity:
//!   an outer pass still meets the function), preceded by the taping of the
//!   rule's inputs: each scalar argument is pushed, each array argument's
//!   elements and length are pushed by `@adze.tape.save.L` — the array as it
//!   was at the call, whatever overwrites it later.
//! - A collapsed rule region (see `crate::regions`) is put back: its block
//!   `X` tapes the rule's inputs and jumps to the region's entry; the
//!   region's blocks are copied as they are and their exits pass what `X`'s
//!   jump would have passed. The region is kept.
//! - The primal's own `push` and `pop` are copied: they are the primal's
//!   effects.

use super::plan::{Plan, TapeItem};
use super::{CallTarget, Calls};
use crate::partials::{self, Local};
use crate::regions::Collapse;
use crate::AdError;
use adze_ir::{Block, CmpCond, FuncBuilder, Function, Inst, InstData, Signature, Type, Value};
use cranelift_entity::SecondaryMap;

/// Builds the augmented primal of `primal` for `plan`, in phases: the
/// primal's values and reachable blocks ([`Aug::layout`]), each block with
/// its tape records ([`Aug::block`]), the collapsed regions put back
/// ([`Aug::put_back_regions`]) and kept ([`Aug::keep_regions`]).
pub(crate) fn build(
    primal: &Function,
    plan: &Plan,
    calls: &Calls,
    collapse: &Collapse,
    tape: u8,
    name: String,
    sig: Signature,
) -> Result<Function, AdError> {
    let mut a = Aug {
        primal,
        plan,
        calls,
        collapse,
        tape,
        out: Function::new(name, sig),
        conts: vec![None; collapse.regions.len()],
        edge_param: SecondaryMap::new(),
        max_params: SecondaryMap::new(),
        counters: vec![None; plan.loops.len()],
        segments: vec![None; plan.loops.len()],
    };
    let blocks = a.layout();
    for &block in &blocks {
        a.block(block)?;
    }
    a.put_back_regions()?;
    a.keep_regions();
    // Same block numbers: the primal's provenance of inlined code holds.
    a.out.inlined = primal.inlined.clone();
    Ok(a.out)
}

/// The augmented primal under construction.
struct Aug<'a> {
    primal: &'a Function,
    plan: &'a Plan,
    calls: &'a Calls,
    collapse: &'a Collapse,
    tape: u8,
    out: Function,
    /// Per collapsed region: the block that continues its block after the
    /// region (the region's exits jump there, with its results).
    conts: Vec<Option<Block>>,
    /// Per block with an edge item: the parameter carrying the number of
    /// the edge it was entered by.
    edge_param: SecondaryMap<Block, Option<Value>>,
    /// Per block but the entry: the parameters carrying the running maxima
    /// of the threaded `zeros` lengths.
    max_params: SecondaryMap<Block, Vec<Value>>,
    /// The iteration counter of each counted loop, a parameter of its header.
    counters: Vec<Option<Value>>,
    /// Of each checkpointed loop, two more parameters of its header: the
    /// tape mark after its segment's snapshot and the segment's first
    /// iteration (`reverse::checkpoint`).
    segments: Vec<Option<(Value, Value)>>,
}

impl Aug<'_> {
    /// The primal's values and block numbers, the reachable blocks in
    /// layout order, and the parameters the tape plan adds to them. Returns
    /// the reachable blocks.
    fn layout(&mut self) -> Vec<Block> {
        let (primal, plan, out) = (self.primal, self.plan, &mut self.out);
        for i in 0..primal.dfg.num_values() {
            let ty = primal.dfg.value_type(Value::from_u32(i as u32));
            out.dfg.make_detached_value(ty);
        }
        for _ in 0..primal.dfg.num_blocks() {
            out.dfg.make_block();
        }
        let blocks: Vec<_> = primal
            .layout
            .blocks()
            .iter()
            .copied()
            .filter(|&b| plan.is_reachable(b))
            .collect();
        for &b in &blocks {
            out.layout.append_block(b);
        }
        for &b in &blocks {
            for &p in primal.dfg.block_params(b) {
                out.dfg.attach_block_param(b, p, primal.dfg.value_type(p));
            }
            if b == plan.entry {
                continue;
            }
            if plan.has_edge_item(b) {
                self.edge_param[b] = Some(out.dfg.append_block_param(b, Type::I64));
            }
            self.max_params[b] = (0..plan.num_threaded)
                .map(|_| out.dfg.append_block_param(b, Type::I64))
                .collect();
            if let Some(l) = plan.counted(b) {
                self.counters[l] = Some(out.dfg.append_block_param(b, Type::I64));
                if plan.checkpointed.contains(&l) {
                    let mark = out.dfg.append_block_param(b, Type::I64);
                    let seg = out.dfg.append_block_param(b, Type::I64);
                    self.segments[l] = Some((mark, seg));
                }
            }
        }
        blocks
    }

    /// Copies the primal instruction `inst`, with `data`, to the end of
    /// `block`, with the same result values.
    fn copy(&mut self, inst: Inst, data: InstData, block: Block) {
        copy_inst(self.primal, inst, data, &mut self.out, block);
    }

    /// The record of segment `segment` of `block` (see `Plan::tape`),
    /// pushed at the end of `cur`, where the segment ends.
    fn push_record(&mut self, block: Block, cur: Block, segment: u32) -> Result<(), AdError> {
        let (primal, plan, tape) = (self.primal, self.plan, self.tape);
        let mut b = FuncBuilder::new(&mut self.out);
        b.switch_to_block(cur);
        for (s, item) in &plan.tape[block] {
            if *s != segment {
                continue;
            }
            let (v, note) = match item {
                TapeItem::Value(v) => (*v, format!("saves {}", describe(primal, *v))),
                TapeItem::Edge => (
                    self.edge_param[block].ok_or_else(|| internal(primal))?,
                    format!("saves the edge {block} was entered by"),
                ),
                TapeItem::Choice { of, .. } => {
                    let cond = choice_cond(&mut b, primal, *of).ok_or_else(|| internal(primal))?;
                    (
                        cond,
                        format!("saves the choice of {}", describe(primal, *of)),
                    )
                }
            };
            let push = b.push(tape, v);
            b.func.notes.inst(push, format!("tape {tape}: {note}"));
        }
        Ok(())
    }

    /// One reachable block: its instructions copied (calls and `zeros`
    /// adjusted), each segment's record pushed where it ends.
    fn block(&mut self, block: Block) -> Result<(), AdError> {
        let (primal, plan) = (self.primal, self.plan);
        let mut maxima: Vec<Value> = if block == plan.entry {
            let mut b = FuncBuilder::new(&mut self.out);
            b.switch_to_block(block);
            (0..plan.num_threaded).map(|_| b.iconst(0)).collect()
        } else {
            self.max_params[block].clone()
        };
        // Where the block's code goes: `block`, then after each collapsed
        // region the block that continues it.
        let mut cur = block;
        let mut segment = 0;
        for &inst in primal.layout.block_insts(block) {
            // Everything made for `inst` (its copy, the tape pushes before
            // it, the region it stands for being put back) has its location.
            let mark = self.out.dfg.inst_mark();
            let loc = primal.dfg.srcloc(inst);
            let data = primal.dfg.inst(inst).clone();
            if matches!(data, InstData::Call { .. }) {
                self.push_record(block, cur, segment)?;
                segment += 1;
            }
            if data.opcode().is_terminator() {
                self.push_record(block, cur, segment)?;
                self.terminator(block, cur, inst, data, &maxima)?;
            } else {
                match &data {
                    InstData::Call { args, .. } => {
                        cur = self.call(cur, inst, &data, args)?;
                        // The running maxima of the lengths of its array
                        // results that have shadows (as at `zeros`).
                        for &r in primal.dfg.inst_results(inst) {
                            if let Some(t) = threaded(plan, r) {
                                let mut b = FuncBuilder::new(&mut self.out);
                                b.switch_to_block(cur);
                                let len = b.len(r);
                                maxima[t] = longest(&mut b, len, maxima[t]);
                            }
                        }
                    }
                    InstData::Zeros { len, .. } => {
                        let len = *len;
                        let r = primal.dfg.first_result(inst);
                        self.copy(inst, data.clone(), cur);
                        if let Some(t) = threaded(plan, r) {
                            let mut b = FuncBuilder::new(&mut self.out);
                            b.switch_to_block(cur);
                            maxima[t] = longest(&mut b, len, maxima[t]);
                        }
                    }
                    _ => self.copy(inst, data.clone(), cur),
                }
            }
            self.out.dfg.set_srclocs_since(mark, loc);
        }
        Ok(())
    }

    /// The terminator `inst` of `block`, emitted at the end of `cur`: a
    /// `return` first pushes what the adjoint's entry pops; every edge
    /// gets the parameters the plan added to its destination, and an edge
    /// that leaves counted loops goes through a block that pushes their
    /// counters.
    fn terminator(
        &mut self,
        block: Block,
        mut cur: Block,
        inst: Inst,
        mut data: InstData,
        maxima: &[Value],
    ) -> Result<(), AdError> {
        let (primal, plan, tape) = (self.primal, self.plan, self.tape);
        let counters = &self.counters;
        let mut b = FuncBuilder::new(&mut self.out);
        b.switch_to_block(cur);
        if matches!(data, InstData::Return { .. }) {
            // The counters of the loops this `return` leaves.
            for l in plan.enclosing(block) {
                push_loop_exit(&mut b, primal, plan, tape, counters, &self.segments, l)?;
            }
            if plan.returns.len() > 1 {
                let k = plan
                    .returns
                    .iter()
                    .position(|&r| r == block)
                    .ok_or_else(|| internal(primal))?;
                let k = b.iconst(k as i64);
                let push = b.push(tape, k);
                b.func
                    .notes
                    .inst(push, format!("tape {tape}: saves which `return` ran"));
            }
            // The frozen local arrays, whole: their elements, then their
            // length (the adjoint pops the length first).
            for &a in &plan.snapshots {
                let n = b.len(a);
                crate::rules::push_elements(&mut b, tape, a, n);
                let push = b.push(tape, n);
                let name = primal.array_name(a);
                b.func.notes.inst(
                    push,
                    format!("tape {tape}: saves `{name}` whole, after its elements"),
                );
            }
            cur = b.current_block().ok_or_else(|| internal(primal))?;
            for z in &plan.zeros_sites {
                let n = match (z.threaded, z.len) {
                    (Some(t), _) => maxima[t],
                    (None, Some(len)) => len,
                    (None, None) => b.len(z.array),
                };
                let push = b.push(tape, n);
                let name = primal.array_name(z.array);
                let note = if z.threaded.is_some() {
                    format!(
                        "tape {tape}: saves the longest `{name}` made, the length of its shadow"
                    )
                } else {
                    format!("tape {tape}: saves the length of `{name}`, for its shadow")
                };
                b.func.notes.inst(push, note);
            }
            for &a in &plan.const_shadows {
                let n = b.len(a);
                let push = b.push(tape, n);
                let name = primal.array_name(a);
                b.func.notes.inst(
                    push,
                    format!("tape {tape}: saves the length of `{name}`, for its local shadow"),
                );
            }
        }
        let mut extra: Vec<Vec<Value>> = Vec::new();
        let mut exits: Vec<Vec<usize>> = Vec::new();
        for (dest, call) in data.destinations().iter().enumerate() {
            let mut args = Vec::new();
            let edge = super::plan::Edge {
                from: block,
                inst,
                dest,
            };
            let k = plan.edge_number(call.block, edge);
            if plan.has_edge_item(call.block) {
                let k = k.ok_or_else(|| internal(primal))?;
                args.push(b.iconst(k as i64));
            }
            args.extend_from_slice(maxima);
            if let Some(l) = plan.counted(call.block) {
                let k = k.ok_or_else(|| internal(primal))?;
                let back = k == plan.loops[l].back;
                if back {
                    let one = b.iconst(1);
                    let c = counter(primal, counters, l)?;
                    args.push(b.iadd(c, one));
                } else {
                    args.push(b.iconst(0));
                }
                // A checkpointed loop's mark and segment go around the
                // back edge; on the entry edge they are placeholders that
                // `checkpoint::instrument` replaces.
                if let Some((mark, seg)) = self.segments[l] {
                    if back {
                        args.extend([mark, seg]);
                    } else {
                        let zero = b.iconst(0);
                        args.extend([zero, zero]);
                    }
                }
            }
            extra.push(args);
            exits.push(plan.exited(edge, call.block));
        }
        for ((call, args), exited) in data.destinations_mut().into_iter().zip(extra).zip(exits) {
            call.args.extend(args);
            if exited.is_empty() {
                continue;
            }
            // The edge leaves counted loops: a block of its own pushes
            // their counters (innermost first), then goes on.
            let mut b = FuncBuilder::new(&mut self.out);
            let split = b.create_block();
            b.switch_to_block(split);
            for l in exited {
                push_loop_exit(&mut b, primal, plan, tape, counters, &self.segments, l)?;
            }
            let args = std::mem::take(&mut call.args);
            b.jump(call.block, &args);
            call.block = split;
        }
        self.copy(inst, data, cur);
        Ok(())
    }

    /// The call `inst` (with `data`, taking `args`), emitted at the end of
    /// `cur`: a split callee's augmented primal, or a rule's inputs taped
    /// before the primal call; a collapsed region's body is entered here.
    /// Returns the block the rest of the primal block goes to.
    fn call(
        &mut self,
        cur: Block,
        inst: Inst,
        data: &InstData,
        args: &[Value],
    ) -> Result<Block, AdError> {
        let (primal, collapse, tape) = (self.primal, self.collapse, self.tape);
        let region = collapse.by_call(inst).is_some();
        match self.calls[inst].as_ref() {
            Some(CallTarget::Split { aug, .. }) => {
                let new = InstData::Call {
                    func: *aug,
                    args: args.to_vec(),
                };
                self.copy(inst, new, cur);
            }
            Some(CallTarget::Rule { save, isave, .. }) => {
                let mut b = FuncBuilder::new(&mut self.out);
                b.switch_to_block(cur);
                for &a in args {
                    let helper = match primal.dfg.value_type(a) {
                        Type::Array => Some(*save),
                        Type::IArray => Some(*isave),
                        _ => None,
                    };
                    match helper {
                        Some(h) => {
                            let h = h.ok_or_else(|| internal(primal))?;
                            b.call(h, &[a], &[]);
                        }
                        None => {
                            let push = b.push(tape, a);
                            b.func.notes.inst(
                                push,
                                format!(
                                    "tape {tape}: saves the rule's input {}",
                                    describe(primal, a)
                                ),
                            );
                        }
                    }
                }
                if !region {
                    self.copy(inst, data.clone(), cur);
                }
            }
            None if region => {}
            None => self.copy(inst, data.clone(), cur),
        }
        let Some(k) = collapse.regions.iter().position(|c| c.call == inst) else {
            return Ok(cur);
        };
        // The region's body runs here, then the rest of the block in a
        // block of its own, which receives the region's results as the
        // call's result values.
        let c = &collapse.regions[k];
        let out = &mut self.out;
        let mut b = FuncBuilder::new(out);
        b.switch_to_block(cur);
        b.jump(c.entry, &[]);
        let next = out.dfg.make_block();
        // The results passed out by the region's exits (its other results,
        // arrays, are defined inside it and stay what they are).
        for (k, &r) in primal.dfg.inst_results(inst).iter().enumerate() {
            if c.cont_results.contains(&Some(k)) {
                out.dfg
                    .attach_block_param(next, r, primal.dfg.value_type(r));
            }
        }
        let mut after = cur;
        for &rb in &c.blocks {
            out.layout.insert_block_after(rb, after);
            after = rb;
        }
        out.layout.insert_block_after(next, after);
        self.conts[k] = Some(next);
        Ok(next)
    }

    /// The collapsed regions' blocks, as they are; their exits go to the
    /// block that continues the call's block, with the region's results.
    fn put_back_regions(&mut self) -> Result<(), AdError> {
        let (primal, collapse, out) = (self.primal, self.collapse, &mut self.out);
        for (c, next) in collapse.regions.iter().zip(&self.conts) {
            let next = next.ok_or_else(|| internal(primal))?;
            let orig = &collapse.orig;
            let n_results = primal.dfg.inst_results(c.call).len();
            for &rb in &c.blocks {
                for &p in orig.dfg.block_params(rb) {
                    out.dfg.attach_block_param(rb, p, orig.dfg.value_type(p));
                }
                for &inst in orig.layout.block_insts(rb) {
                    let mut data = orig.dfg.inst(inst).clone();
                    if !collapse.subst.is_empty() {
                        data.map_uses(|v| collapse.renamed(v));
                    }
                    for d in data.destinations_mut() {
                        if d.block != c.cont {
                            continue;
                        }
                        let passed = std::mem::take(&mut d.args);
                        d.block = next;
                        for k in 0..n_results {
                            if let Some(i) = c.cont_results.iter().position(|&r| r == Some(k)) {
                                d.args.push(*passed.get(i).ok_or_else(|| internal(primal))?);
                            }
                        }
                    }
                    let new = copy_inst(orig, inst, data, out, rb);
                    out.dfg.set_srcloc(new, orig.dfg.srcloc(inst));
                }
            }
        }
        Ok(())
    }

    /// Keeps the collapsed regions, renamed, in the augmented primal.
    fn keep_regions(&mut self) {
        let (primal, collapse, out) = (self.primal, self.collapse, &mut self.out);
        collapse.keep_regions(out);
        for rd in out.regions.values_mut() {
            for v in rd.args.iter_mut().chain(rd.results.iter_mut()) {
                *v = collapse.renamed(*v);
            }
        }
        // A kept region's results are now the call's result values, which its
        // exits pass on (the continuation's parameters are gone).
        for c in &collapse.regions {
            if !c.cont_results.iter().any(Option::is_some) {
                continue;
            }
            let results = primal.dfg.inst_results(c.call).to_vec();
            for rd in out.regions.values_mut() {
                if rd.blocks.first() == Some(&c.entry) {
                    rd.results = results.clone();
                }
            }
        }
    }
}

/// Appends to `block` of `to` the instruction `inst` of `from` with `data`
/// (its operands, maybe changed) and the same result values, which `to`
/// has as detached values of the same numbers.
pub(super) fn copy_inst(
    from: &Function,
    inst: Inst,
    data: InstData,
    to: &mut Function,
    block: Block,
) -> Inst {
    let results: Vec<(Value, Type)> = from
        .dfg
        .inst_results(inst)
        .iter()
        .map(|&v| (v, from.dfg.value_type(v)))
        .collect();
    let new = to.dfg.make_inst_with_results(data, &results);
    to.layout.append_inst(new, block);
    new
}

/// The iteration counter of counted loop `l`.
fn counter(primal: &Function, counters: &[Option<Value>], l: usize) -> Result<Value, AdError> {
    counters[l].ok_or_else(|| internal(primal))
}

/// Where counted loop `l` is left: its invariants (reloaded ones loaded
/// again), then its counter.
fn push_loop_exit(
    b: &mut FuncBuilder,
    primal: &Function,
    plan: &Plan,
    tape: u8,
    counters: &[Option<Value>],
    segments: &[Option<(Value, Value)>],
    l: usize,
) -> Result<(), AdError> {
    // A counted checkpointed loop (`Plan::checkpoint_every`) may have
    // dropped records of its last segment: it drops them all, and notes
    // so in the segment's start it pushes (negative: `-start - 1`), so
    // that the adjoint recomputes the last segment first.
    // A binomial schedule keeps the last segment's records (one
    // iteration, which its snapshot starts).
    let counted = match (plan.checkpoint_every(l), segments[l]) {
        (Some(n), Some((mark, _))) if !plan.checkpoint_binomial(primal, l) => {
            let zero = b.iconst(0);
            let counted = b.icmp(CmpCond::Gt, n, zero);
            let now = b.tapelen(tape);
            let to = b.select(counted, mark, now);
            let cut = b.tapecut(tape, to);
            b.func.notes.inst(
                cut,
                format!(
                    "tape {tape}: drops the records of the last segment of counted loop {l} \
                     (recomputed first)"
                ),
            );
            Some(counted)
        }
        _ => None,
    };
    for v in plan.invariants_of(l) {
        let note = format!(
            "tape {tape}: saves {} once for loop {l} (the same in all its iterations)",
            describe(primal, v)
        );
        let v = match plan.reloaded_invariant(primal, v, l) {
            Some((arr, index)) => b.load(arr, index),
            None => v,
        };
        let push = b.push(tape, v);
        b.func.notes.inst(push, note);
    }
    if let Some((_, seg)) = segments[l] {
        let seg = match counted {
            Some(counted) => {
                let minus = b.iconst(-1);
                let neg = b.isub(minus, seg);
                b.select(counted, neg, seg)
            }
            None => seg,
        };
        let push = b.push(tape, seg);
        b.func.notes.inst(
            push,
            format!("tape {tape}: saves where the last segment of loop {l} starts"),
        );
    }
    // A trip count the adjoint computes (`Plan::trip_recipe`) is not saved.
    if plan.trip_recipe(primal, l).is_none() {
        let push = b.push(tape, counter(primal, counters, l)?);
        b.func.notes.inst(
            push,
            format!("tape {tape}: saves the trip count of loop {l}"),
        );
    }
    Ok(())
}

/// The running maximum that local array site `a` threads, if it does.
fn threaded(plan: &Plan, a: Value) -> Option<usize> {
    plan.zeros_sites
        .iter()
        .find(|z| z.array == a)
        .and_then(|z| z.threaded)
}

/// `max(len, max)`: the running maximum of a site's lengths.
fn longest(b: &mut FuncBuilder, len: Value, max: Value) -> Value {
    let gt = b.icmp(CmpCond::Gt, len, max);
    b.select(gt, len, max)
}

/// The condition of the [`Local::Choose`] derivative of the operation that
/// defines `of` (a [`TapeItem::Choice`]): for `min`/`max` from the result
/// itself (`partials::choice_from_result`), otherwise emitted by the rule
/// from the operands, which the augmented primal has under their own
/// numbers.
fn choice_cond(b: &mut FuncBuilder, primal: &Function, of: Value) -> Option<Value> {
    let data = primal.def_inst(of)?.clone();
    if let Some(cond) = partials::choice_from_result(b, &data, of) {
        return Some(cond);
    }
    let wanted = vec![true; data.args().len()];
    match partials::local_derivative(b, &data, of, &wanted)? {
        Local::Choose { cond, .. } => Some(cond),
        Local::Partials(_) => None,
    }
}

/// A primal value as a note names it: `v12 (fmul at 3:14)`, `v3
/// (parameter x)`, `v5 (parameter of block2)`.
pub(crate) fn describe(primal: &Function, v: Value) -> String {
    match *primal.dfg.value_def(v) {
        adze_ir::ValueDef::Result { inst, .. } => {
            let op = primal.dfg.inst(inst).opcode();
            match primal.dfg.srcloc(inst).expand() {
                Some((line, col)) => format!("{v} ({op} at {line}:{col})"),
                None => format!("{v} ({op})"),
            }
        }
        adze_ir::ValueDef::Param { block, num } if Some(block) == primal.entry_block() => {
            match primal.sig.params.get(num) {
                Some(p) => format!("{v} (parameter {})", p.name),
                None => format!("{v}"),
            }
        }
        adze_ir::ValueDef::Param { block, .. } => format!("{v} (parameter of {block})"),
        adze_ir::ValueDef::Detached => format!("{v}"),
    }
}

fn internal(primal: &Function) -> AdError {
    AdError::ReverseInternal {
        func: primal.name.clone(),
        reason: "the tape plan and the CFG disagree".into(),
    }
}
