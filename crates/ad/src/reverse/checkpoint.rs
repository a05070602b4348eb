//! Checkpointed loops (SPEC §5c): the tape of a long loop is cut into
//! segments, of which only the last stays on the tape; the reverse sweep
//! recomputes each earlier segment from a snapshot, just before it needs
//! that segment's records. See docs/ad-reverse.md, "Checkpointing".
//!
//! - **The augmented primal** ([`instrument`]) pushes a *snapshot* where
//!   each segment starts: the arrays the loop uses that the adjoint does
//!   not have (their elements, by `@adze.tape.save`), the scalars from
//!   outside the loop that it uses, then the loop header's arguments (its
//!   iteration counter last). Then it notes the tape's length, the mark.
//!   On the back edge, when the tape has grown by a segment
//!   (`tapeover`, [`adze_ir::Limits::segment_entries`]) since the mark, it
//!   drops what the segment pushed (`tapecut`) and starts a new segment
//!   with a new snapshot. Where the loop is left it pushes the first
//!   iteration of the last segment, before the trip count.
//! - **The runner** (`f.aug.<acts>.seg<l>`, built here from the
//!   augmented primal's own blocks of the loop) pops a snapshot, pushes it
//!   back, and runs the loop from it, pushing exactly what the augmented
//!   primal pushed (and cutting where the tape outgrows a segment's
//!   share), until the iteration `stop` or the loop's exit; it returns
//!   where the last segment it ran starts. With `drop` it first pops the
//!   snapshot on top; with `stop = 0` it runs nothing.
//! - **The adjoint** (`adj.rs`) runs the loop's reverse as before, counting
//!   down. Where the iteration reaches the start of the segment whose
//!   records it has popped, it calls the runner for the segment before,
//!   which drops that segment's snapshot (every segment's stays on the
//!   tape while it is reversed) and pushes the records before again.
//!
//! The adjoint's code is the code of the fully taped loop, and it pops the
//! same bits (the runner runs the same instructions from the same values),
//! so a checkpointed derivative equals the taped one bit for bit whatever
//! the segment length; only time and memory change.
//!
//! Which loops ([`choose`]): counted loops that tape something or call a
//! derivative, have no `return` inside, no tape traffic of their own (a
//! primal holding derivatives: a recomputed segment would push and pop
//! again), and use no view made outside the loop (a snapshot copies an
//! array; a view's copy would no longer alias its array); outer loops
//! first: a loop inside a chosen one is not chosen (its records belong to
//! the outer loop's segments), a loop inside one that is not chosen may
//! be, and is then checkpointed on its own in each iteration of the outer
//! loop. Under `--checkpoint` every such loop is chosen; otherwise those
//! with a `checkpoint` hint (`#[checkpoint]`, [`hint`]).

use super::plan::Plan;
use super::Calls;
use crate::{rules, AdError};
use adze_ir::{
    ArgActivity, Block, CmpCond, FuncBuilder, FuncId, Function, InstData, Module, Opcode, Param,
    RegionData, Signature, Type, Value, ValueDef,
};
use cranelift_entity::{EntitySet, SecondaryMap};

/// What the adjoint needs to know of a checkpointed loop.
pub(crate) struct Checkpoint {
    /// The counted loop.
    pub l: usize,
    /// Its runner.
    pub runner: FuncId,
    /// The primal's read-only array parameters the runner takes (the
    /// adjoint passes its own), in order.
    pub taken: Vec<Value>,
}

/// The operand of a `checkpoint n` hint.
fn hint_operand(data: &InstData) -> Option<Value> {
    match *data {
        InstData::Unary {
            op: Opcode::Checkpoint,
            arg,
        } => Some(arg),
        _ => None,
    }
}

/// Whether `func` has a `checkpoint` hint (`#[checkpoint]` on a loop).
pub(crate) fn has_hints(func: &Function) -> bool {
    func.layout
        .insts()
        .any(|(_, inst)| hint_operand(func.dfg.inst(inst)).is_some())
}

/// The `checkpoint n` hint of counted loop `l`: the last one in the block
/// whose `jump` enters the loop, as the front end puts it for
/// `#[checkpoint]`.
fn hint(primal: &Function, plan: &Plan, l: usize, header: Block) -> Option<Value> {
    let e = plan.preds[header].get(plan.loops[l].entry)?;
    if !matches!(primal.dfg.inst(e.inst), InstData::Jump { .. }) {
        return None;
    }
    primal
        .layout
        .block_insts(e.from)
        .iter()
        .rev()
        .find_map(|&inst| hint_operand(primal.dfg.inst(inst)))
}

/// The counted loops of `primal` to checkpoint (see the module doc): every
/// one that can be when `all`, else those with a hint ([`hint`]); each
/// with its counted hint ([`Plan::checkpoint_every`], [`counts`]).
pub(crate) fn choose(
    module: &Module,
    primal: &Function,
    plan: &Plan,
    calls: &Calls,
    all: bool,
    for_forward: bool,
) -> Chosen {
    let mut chosen: Vec<(usize, Option<Value>)> = Vec::new();
    let mut refused: Vec<(usize, &'static str)> = Vec::new();
    let unknown = for_forward.then(|| unknown_activity(module, primal, plan));
    // Outer loops first: a loop inside a chosen one is taped within the
    // outer loop's segments; inside a loop not chosen, it may be chosen.
    let mut order: Vec<(usize, usize)> = (0..plan.loops.len())
        .filter_map(|l| {
            let header = *plan.loop_blocks(l).first()?;
            (plan.counted(header) == Some(l)).then(|| (plan.enclosing(header).count(), l))
        })
        .collect();
    order.sort_unstable();
    for (_, l) in order {
        let blocks = plan.loop_blocks(l);
        let Some(&header) = blocks.first() else {
            continue;
        };
        if plan
            .enclosing(header)
            .any(|m| m != l && chosen.iter().any(|&(c, _)| c == m))
        {
            continue;
        }
        let inside: EntitySet<Block> = {
            let mut s = EntitySet::new();
            for &b in &blocks {
                s.insert(b);
            }
            s
        };
        let mut worth = false;
        let mut why: Option<&'static str> = None;
        for &b in &blocks {
            worth |= !plan.tape[b].is_empty();
            for &inst in primal.layout.block_insts(b) {
                let data = primal.dfg.inst(inst);
                match data {
                    InstData::Return { .. } => why = Some("a `return` inside"),
                    // The primal's own tape traffic (it holds derivatives)
                    // cannot run twice: a segment recomputed would push and
                    // pop again what the first run did.
                    InstData::Push { .. } | InstData::Pop { .. } | InstData::Tape { .. } => {
                        why = Some("tape traffic of its own (a derivative inside)")
                    }
                    InstData::Call { func, .. } => {
                        worth |= calls[inst].is_some();
                        if !module.is_valid(*func)
                            || rules::tape_floor(module, module.func(*func)) > 0
                        {
                            why = Some("a call to a rule that uses the tape");
                        }
                    }
                    _ => {}
                }
                data.for_each_use(|v| {
                    if primal.dfg.value_type(v).is_array()
                        && primal.def_block(v).is_some_and(|d| !inside.contains(d))
                        && is_view(primal, v)
                    {
                        why = Some("a view made outside it");
                    }
                });
            }
        }
        if let Some(unknown) = &unknown {
            if touches(primal, &blocks, unknown) {
                why = Some(
                    "a forward derivative differentiates this derivative, and a parameter \
                     the adjoint does not have (a callee's scalar or `mut` array) or an array \
                     result may make its values active",
                );
            }
        }
        let hinted = hint(primal, plan, l, header);
        if worth && (all || hinted.is_some()) {
            match why {
                None => {
                    let every = hinted.filter(|&n| counts(primal, plan, l, &blocks, &inside, n));
                    chosen.push((l, every));
                }
                Some(why) => refused.push((l, why)),
            }
        }
    }
    chosen.sort_unstable();
    Chosen { chosen, refused }
}

/// What [`choose`] found: the loops to checkpoint, each with its counted
/// hint, and those it could have checkpointed but not, each with why
/// (noted at the loop's header, `adze dump --annotate tape`).
pub(crate) struct Chosen {
    pub chosen: Vec<(usize, Option<Value>)>,
    pub refused: Vec<(usize, &'static str)>,
}

/// The values of `primal` that a forward derivative may find active
/// through what the runners of a `.ckptf` derivative do not take: the f64
/// and array parameters the adjoint does not have, as witnesses or
/// otherwise (a runner takes the others, as *witnesses* of their
/// activity), and array results, which a
/// caller may make active (`ForwardRequest::seeded`). A loop none of
/// whose values these reach has, in the augmented primal, the activity its
/// runner's arguments give ([`Witnesses`]).
fn unknown_activity(module: &Module, primal: &Function, plan: &Plan) -> crate::activity::Activity {
    let acts: Vec<ArgActivity> = primal
        .params()
        .iter()
        .map(|&p| match primal.dfg.value_type(p) {
            _ if plan.adj_params.contains(&p) || plan.adj_witnesses.contains(&p) => {
                ArgActivity::Const
            }
            Type::F64 => ArgActivity::Dual,
            Type::Array => ArgActivity::Dup,
            _ => ArgActivity::Const,
        })
        .collect();
    let seeded: Vec<usize> = (primal.sig.results.iter().enumerate())
        .filter(|(_, &t)| t == Type::Array)
        .map(|(k, _)| k)
        .collect();
    crate::activity::analyze_cached(
        &mut crate::context::Cache::default(),
        module,
        primal,
        &acts,
        &seeded,
    )
}

/// Does an active value of `act` appear in `blocks` (a parameter, a
/// result or an operand)?
fn touches(primal: &Function, blocks: &[Block], act: &crate::activity::Activity) -> bool {
    blocks.iter().any(|&b| {
        let mut hit = primal.dfg.block_params(b).iter().any(|&p| act.is_active(p));
        for &inst in primal.layout.block_insts(b) {
            hit |= primal
                .dfg
                .inst_results(inst)
                .iter()
                .any(|&r| act.is_active(r));
            primal
                .dfg
                .inst(inst)
                .for_each_use(|v| hit |= act.is_active(v));
        }
        hit
    })
}

/// Whether loop `l` (`blocks`, as a set `inside`) counts its snapshots by
/// its hint `checkpoint K`: `K` is not the constant 0, the loop's range is
/// known at entry ([`Plan::counted_range`]), and every edge that leaves
/// the loop leaves it alone (the augmented primal drops the last
/// segment's records where the loop is left, before the exit's own
/// records; an edge leaving an inner loop too would push that loop's
/// first).
fn counts(
    primal: &Function,
    plan: &Plan,
    l: usize,
    blocks: &[Block],
    inside: &EntitySet<Block>,
    n: Value,
) -> bool {
    if let ValueDef::Result { inst, .. } = *primal.dfg.value_def(n) {
        if let InstData::IConst { imm: 0, .. } = primal.dfg.inst(inst) {
            return false;
        }
    }
    if plan.counted_range(primal, l).is_none() {
        return false;
    }
    blocks.iter().all(|&b| {
        let Some(last) = primal.layout.last_inst(b) else {
            return true;
        };
        primal
            .dfg
            .inst(last)
            .destinations()
            .iter()
            .enumerate()
            .all(|(k, d)| {
                let e = super::plan::Edge {
                    from: b,
                    inst: last,
                    dest: k,
                };
                inside.contains(d.block) || plan.exited(e, d.block) == [l]
            })
    })
}

/// Is `v` made by `slice` or `view`?
fn is_view(func: &Function, v: Value) -> bool {
    match *func.dfg.value_def(v) {
        ValueDef::Result { inst, .. } => {
            matches!(func.dfg.inst(inst).opcode(), Opcode::Slice | Opcode::View)
        }
        _ => false,
    }
}

/// What a snapshot holds besides the header's arguments.
struct Captured {
    /// Arrays from outside the loop that the adjoint does not have,
    /// saved element by element.
    saved: Vec<Value>,
    /// Scalars from outside the loop.
    scalars: Vec<Value>,
    /// Read-only array parameters the adjoint has: passed to the runner.
    taken: Vec<Value>,
    /// For a `.ckptf` derivative, the other f64 and array parameters the
    /// adjoint has: passed to the runner, which does not use them, so that
    /// a forward derivative of it knows their activity ([`Witnesses`]).
    witnesses: Vec<Value>,
}

/// Adds the snapshots and cuts of the checkpointed loops to the augmented
/// primal `aug` (built for `plan`, on `tape`) and builds their runners,
/// named after `aug`.
pub(crate) fn instrument(
    module: &mut Module,
    aug_id: FuncId,
    aug: &mut Function,
    primal: &Function,
    plan: &Plan,
    tape: u8,
    for_forward: bool,
) -> Result<Vec<Checkpoint>, AdError> {
    let mut out = Vec::new();
    for &l in &plan.checkpointed {
        let header = *plan
            .loop_blocks(l)
            .first()
            .ok_or_else(|| internal(primal, "a checkpointed loop without blocks"))?;
        out.push(one_loop(
            module,
            aug_id,
            aug,
            primal,
            plan,
            tape,
            l,
            header,
            for_forward,
        )?);
    }
    Ok(out)
}

/// The edges into `to` in `func`: (source block, destination number).
fn edges_into(func: &Function, to: Block) -> Vec<(Block, usize)> {
    let mut edges = Vec::new();
    for &b in func.layout.blocks() {
        let Some(last) = func.layout.last_inst(b) else {
            continue;
        };
        for (k, d) in func.dfg.inst(last).destinations().iter().enumerate() {
            if d.block == to {
                edges.push((b, k));
            }
        }
    }
    edges
}

/// The blocks of the natural loop of `header` whose back edge leaves
/// `latch`.
fn natural_loop(func: &Function, header: Block, latch: Block) -> EntitySet<Block> {
    let mut preds: SecondaryMap<Block, Vec<Block>> = SecondaryMap::new();
    for &b in func.layout.blocks() {
        if let Some(last) = func.layout.last_inst(b) {
            for d in func.dfg.inst(last).destinations() {
                preds[d.block].push(b);
            }
        }
    }
    let mut set = EntitySet::new();
    set.insert(header);
    let mut work = vec![latch];
    while let Some(b) = work.pop() {
        if set.contains(b) {
            continue;
        }
        set.insert(b);
        work.extend(preds[b].iter().copied());
    }
    set
}

#[allow(clippy::too_many_arguments)]
fn one_loop(
    module: &mut Module,
    aug_id: FuncId,
    aug: &mut Function,
    primal: &Function,
    plan: &Plan,
    tape: u8,
    l: usize,
    header: Block,
    for_forward: bool,
) -> Result<Checkpoint, AdError> {
    let edges = edges_into(aug, header);
    let hp = aug.dfg.block_params(header).to_vec();
    if hp.len() < 3 {
        return Err(internal(
            primal,
            "a checkpointed header without its parameters",
        ));
    }
    let (mark, seg) = (hp[hp.len() - 2], hp[hp.len() - 1]);
    let state: Vec<Value> = hp[..hp.len() - 2].to_vec();
    let state_types: Vec<Type> = state.iter().map(|&v| aug.dfg.value_type(v)).collect();
    // The back edge comes from a block dominated by the header; find it as
    // the edge whose arguments pass the header's own mark.
    let back = edges
        .iter()
        .copied()
        .find(|&(b, k)| {
            aug.layout
                .last_inst(b)
                .is_some_and(|last| aug.dfg.inst(last).destinations()[k].args.last() == Some(&seg))
        })
        .ok_or_else(|| internal(primal, "no back edge"))?;
    let entry = edges
        .iter()
        .copied()
        .find(|&e| e != back)
        .ok_or_else(|| internal(primal, "no entry edge"))?;
    if edges.len() != 2 {
        return Err(internal(
            primal,
            "a checkpointed header with more than two edges",
        ));
    }
    let inside = natural_loop(aug, header, back.0);
    let mut captured = capture(aug, primal, plan, &inside);
    if for_forward {
        captured.witnesses = witnesses(primal, plan, &captured.taken);
    }
    // `#[checkpoint(snapshots = K)]`: segments of `n` iterations.
    let every = plan.checkpoint_every(l);

    // The snapshot: saved arrays, scalars, then the header's arguments.
    let save = |module: &mut Module, ty: Type| -> Result<FuncId, AdError> {
        rules::save_helper(module, tape, ty)
    };
    let mut helpers = Vec::new();
    for &a in &captured.saved {
        helpers.push(save(module, aug.dfg.value_type(a))?);
    }
    let start_segment = |b: &mut FuncBuilder, args: &[Value], free: Option<Value>| {
        start_segment(b, &captured, &helpers, tape, header, args, free)
    };
    let binomial = if plan.checkpoint_binomial(primal, l) {
        Some(rules::binomial_helper(module)?)
    } else {
        None
    };

    // The entry edge: a snapshot, the mark, segment 0.
    let counted: Option<Counted>;
    {
        let mut b = FuncBuilder::new(aug);
        let e = b.create_block();
        let args: Vec<Value> = state_types
            .iter()
            .map(|&t| b.append_block_param(e, t))
            .collect();
        b.switch_to_block(e);
        b.func.notes.block(
            e,
            format!(
                "tape {tape}: checkpointed loop {l}: the snapshot of its first segment \
                 ({} saved array(s), {} scalar(s), {} header value(s)), then the mark",
                captured.saved.len(),
                captured.scalars.len(),
                args.len()
            ),
        );
        // A counted schedule: the loop's trip count, known here.
        counted = match every {
            Some(k) => {
                let (init, bound) = plan
                    .counted_range(primal, l)
                    .ok_or_else(|| internal(primal, "a counted schedule without its range"))?;
                // `max(bound - init, 0)`, without wrapping: `init < bound`
                // first (as `Adj::trip_count`).
                let d = b.isub(bound, init);
                let zero = b.iconst(0);
                let runs = b.icmp(CmpCond::Lt, init, bound);
                let trips = b.select(runs, d, zero);
                Some(match binomial {
                    Some(helper) => {
                        // K snapshots (at least 2): this one, and K - 1 free.
                        let two = b.iconst(2);
                        let few = b.icmp(CmpCond::Lt, k, two);
                        let k = b.select(few, two, k);
                        let one = b.iconst(1);
                        let free = b.isub(k, one);
                        let sched = start_schedule(&mut b, helper, free, trips, zero);
                        Counted::Binomial {
                            helper,
                            sched,
                            end: trips,
                            free,
                        }
                    }
                    None => {
                        // max(1, ceil(trips / K)) iterations per segment.
                        let one = b.iconst(1);
                        let few = b.icmp(CmpCond::Lt, k, one);
                        let kk = b.select(few, one, k);
                        let q = b.binary(Opcode::Idiv, trips, kk);
                        let r = b.binary(Opcode::Irem, trips, kk);
                        let rest = b.icmp(CmpCond::Gt, r, zero);
                        let up = b.iadd(q, one);
                        let n = b.select(rest, up, q);
                        let some = b.icmp(CmpCond::Gt, n, zero);
                        let n = b.select(some, n, one);
                        let counted = b.icmp(CmpCond::Gt, k, zero);
                        Counted::Uniform { n, counted }
                    }
                })
            }
            None => None,
        };
        let free = match counted {
            Some(Counted::Binomial { free, .. }) => Some(free),
            _ => None,
        };
        start_segment(&mut b, &args, free);
        retarget(aug, entry, e, state.len());
    }
    // The back edge: cut when the segment is full.
    let runner_name = format!("{}.seg{l}", aug.name);
    let check = {
        let mut b = FuncBuilder::new(aug);
        let c = b.create_block();
        let cut = b.create_block();
        let args: Vec<Value> = state_types
            .iter()
            .map(|&t| b.append_block_param(c, t))
            .collect();
        b.switch_to_block(c);
        let by = match counted {
            Some(Counted::Binomial { .. }) => {
                "at the next snapshot of the binomial schedule (@adze.binomial)".to_string()
            }
            Some(Counted::Uniform { .. }) => {
                "max(1, ceil(trips / K)) iterations if K > 0, else Limits::segment_entries"
                    .to_string()
            }
            None => "Limits::segment_entries".to_string(),
        };
        b.func.notes.block(
            c,
            format!("tape {tape}: checkpointed loop {l}: is the segment full ({by})?"),
        );
        let mut stay = args.clone();
        stay.extend([mark, seg]);
        let next = *args.last().ok_or_else(|| internal(primal, "no counter"))?;
        let drop_note = format!(
            "tape {tape}: checkpointed loop {l}: the segment outgrew its share of \
             the budget: drops its records, kept no snapshot (recomputed from the \
             segment's, by @{runner_name})"
        );
        match counted {
            None => {
                let grown = b.tapeover(tape, mark);
                b.brif(grown, cut, &[], header, &stay);
            }
            Some(Counted::Uniform { n, counted }) => {
                // Counted: a snapshot every `n` iterations (the counter on
                // the back edge is the next iteration's); in between, a
                // segment that outgrows its share of the budget drops its
                // records without a snapshot: the adjoint recomputes them
                // from the segment's snapshot (the runner cuts as it goes).
                let grown = b.tapeover(tape, mark);
                let done = b.isub(next, seg);
                let full = b.icmp(CmpCond::Ge, done, n);
                let over = b.select(counted, full, grown);
                let (more, drop) = (b.create_block(), b.create_block());
                b.brif(over, cut, &[], more, &[]);
                b.switch_to_block(more);
                let no = b.bconst(false);
                let shed = b.select(counted, grown, no);
                b.brif(shed, drop, &[], header, &stay);
                b.switch_to_block(drop);
                b.func.notes.block(drop, drop_note);
                b.tapecut(tape, mark);
                b.jump(header, &stay);
            }
            Some(Counted::Binomial { sched, end, .. }) => {
                binomial_check(
                    &mut b, tape, mark, header, &stay, next, sched, end, cut, &drop_note,
                );
            }
        }
        b.switch_to_block(cut);
        b.func.notes.block(
            cut,
            format!(
                "tape {tape}: checkpointed loop {l}: drops the segment's records (the adjoint \
                 recomputes them with @{runner_name}) and starts the next with its snapshot"
            ),
        );
        b.tapecut(tape, mark);
        let free = match counted {
            Some(Counted::Binomial {
                helper, sched, end, ..
            }) => Some(next_snapshot(&mut b, helper, sched, end, next)),
            _ => None,
        };
        start_segment(&mut b, &args, free);
        retarget(aug, back, c, state.len());
        c
    };

    let runner = build_runner(
        module,
        aug_id,
        aug,
        l,
        &inside,
        header,
        check,
        &state,
        &captured,
        tape,
        for_forward,
        binomial,
    )?;
    let mut taken = captured.taken;
    taken.extend(captured.witnesses);
    Ok(Checkpoint { l, runner, taken })
}

/// How a counted loop's snapshots are placed (`#[checkpoint(snapshots =
/// K)]`), with the values of the augmented primal it takes.
#[derive(Clone, Copy)]
enum Counted {
    /// Every `n` iterations, when `counted` (`K > 0`).
    Uniform { n: Value, counted: Value },
    /// By `@adze.binomial` (`helper`): `sched` (an `iarr` of 2) holds the
    /// free snapshots left and the iteration of the next snapshot; `end`
    /// is the trip count, `free` the first snapshot's free count.
    Binomial {
        helper: FuncId,
        sched: Value,
        end: Value,
        free: Value,
    },
}

/// The back edge's check of a binomial schedule (`next`: the iteration
/// the back edge goes to): at the next snapshot (`sched[1]`, before `end`)
/// to `cut`; else, unless the segment is the last (no snapshot before
/// `end`), a segment that outgrows its share of the budget drops its
/// records (they are recomputed); then to the header with `stay`.
#[allow(clippy::too_many_arguments)]
fn binomial_check(
    b: &mut FuncBuilder,
    tape: u8,
    mark: Value,
    header: Block,
    stay: &[Value],
    next: Value,
    sched: Value,
    end: Value,
    cut: Block,
    drop_note: &str,
) {
    let one = b.iconst(1);
    let at = b.load(sched, one);
    let last = b.icmp(CmpCond::Ge, at, end);
    let here = b.icmp(CmpCond::Eq, next, at);
    let no = b.bconst(false);
    let split = b.select(last, no, here);
    let (more, drop) = (b.create_block(), b.create_block());
    b.brif(split, cut, &[], more, &[]);
    b.switch_to_block(more);
    let grown = b.tapeover(tape, mark);
    let shed = b.select(last, no, grown);
    b.brif(shed, drop, &[], header, stay);
    b.switch_to_block(drop);
    b.func.notes.block(drop, drop_note.to_string());
    b.tapecut(tape, mark);
    b.jump(header, stay);
}

/// A binomial schedule's state from a snapshot at iteration `at` with
/// `free` more snapshots allowed before `end`: a fresh `schedule` (an
/// `iarr` of 2) noting them ([`note_next`]).
fn start_schedule(
    b: &mut FuncBuilder,
    helper: FuncId,
    free: Value,
    end: Value,
    at: Value,
) -> Value {
    let two = b.iconst(2);
    let sched = b.izeros(two, "schedule");
    note_next(b, helper, sched, free, end, at);
    sched
}

/// Notes in `sched` the free count `free` and the iteration of the next
/// snapshot after one at `at`: `at + @adze.binomial(end - at, free)`.
fn note_next(
    b: &mut FuncBuilder,
    helper: FuncId,
    sched: Value,
    free: Value,
    end: Value,
    at: Value,
) {
    let (zero, one) = (b.iconst(0), b.iconst(1));
    let left = b.isub(end, at);
    let call = b.call(helper, &[left, free], &[Type::I64]);
    let m = b.func.dfg.first_result(call);
    let next = b.iadd(at, m);
    b.store(sched, zero, free);
    b.store(sched, one, next);
}

/// At a binomial schedule's snapshot at iteration `at`: one free snapshot
/// fewer, and the iteration of the next, noted in `sched`. Returns the
/// free count, which the snapshot holds.
fn next_snapshot(
    b: &mut FuncBuilder,
    helper: FuncId,
    sched: Value,
    end: Value,
    at: Value,
) -> Value {
    let (zero, one) = (b.iconst(0), b.iconst(1));
    let f = b.load(sched, zero);
    let free = b.isub(f, one);
    note_next(b, helper, sched, free, end, at);
    free
}

/// A segment starts: its snapshot (the saved arrays by their `helpers`,
/// the scalars, then `args`, the header's, then a binomial schedule's
/// `free` snapshots from there), the mark, then the header,
/// with the counter (last of `args`) as the segment's first iteration.
fn start_segment(
    b: &mut FuncBuilder,
    captured: &Captured,
    helpers: &[FuncId],
    tape: u8,
    header: Block,
    args: &[Value],
    free: Option<Value>,
) {
    for (&a, &h) in captured.saved.iter().zip(helpers) {
        b.call(h, &[a], &[]);
    }
    for &v in captured.scalars.iter().chain(args).chain(free.as_ref()) {
        b.push(tape, v);
    }
    let m = b.tapelen(tape);
    let mut to = args.to_vec();
    to.push(m);
    to.extend(args.last().copied());
    b.jump(header, &to);
}

/// Makes the edge `e` go to `to` with its first `n` arguments.
fn retarget(func: &mut Function, e: (Block, usize), to: Block, n: usize) {
    let Some(last) = func.layout.last_inst(e.0) else {
        return;
    };
    if let Some(d) = func
        .dfg
        .inst_mut(last)
        .destinations_mut()
        .into_iter()
        .nth(e.1)
    {
        d.block = to;
        d.args.truncate(n);
    }
}

/// The witnesses of a `.ckptf` runner: the f64 and array parameters the
/// adjoint has (`Plan::adj_params`) that the runner does not take already.
fn witnesses(primal: &Function, plan: &Plan, taken: &[Value]) -> Vec<Value> {
    primal
        .params()
        .iter()
        .copied()
        .filter(|p| plan.adj_params.contains(p) || plan.adj_witnesses.contains(p))
        .filter(|&p| matches!(primal.dfg.value_type(p), Type::F64 | Type::Array))
        .filter(|p| !taken.contains(p))
        .collect()
}

/// The values the loop's blocks use that are defined outside it.
fn capture(aug: &Function, primal: &Function, plan: &Plan, inside: &EntitySet<Block>) -> Captured {
    let mut seen: EntitySet<Value> = EntitySet::new();
    let mut c = Captured {
        saved: Vec::new(),
        scalars: Vec::new(),
        taken: Vec::new(),
        witnesses: Vec::new(),
    };
    let entry = primal.entry_block();
    let mut take = |v: Value| {
        if seen.contains(v) || aug.def_block(v).is_none_or(|d| inside.contains(d)) {
            return;
        }
        seen.insert(v);
        let ty = aug.dfg.value_type(v);
        if !ty.is_array() {
            c.scalars.push(v);
            return;
        }
        let read_only_param = match *primal.dfg.value_def(v) {
            ValueDef::Param { block, num } if Some(block) == entry => {
                primal.sig.params.get(num).is_some_and(|p| !p.mutable)
            }
            _ => false,
        };
        if read_only_param && plan.adj_params.contains(&v) {
            c.taken.push(v);
        } else {
            c.saved.push(v);
        }
    };
    for &b in aug.layout.blocks() {
        if !inside.contains(b) {
            continue;
        }
        for &inst in aug.layout.block_insts(b) {
            aug.dfg.inst(inst).for_each_use(&mut take);
        }
    }
    // A rule region inside the loop, which the runner keeps
    // (`copy_regions`), names its arguments: an outer pass applies the
    // rule to them, so they are the loop's uses too, even those that no
    // instruction inside reads (fuzzer seed 2700271, `--checkpoint-percent`).
    for (_, data) in aug.regions.iter() {
        if data.blocks.iter().all(|&b| inside.contains(b)) {
            data.args.iter().copied().for_each(&mut take);
        }
    }
    c
}

/// The runner of a checkpointed loop: `(stop: i64, taken arrays..) ->
/// i64`. Pops a snapshot, then runs the augmented primal's blocks of the
/// loop (`inside`) from it until the counter reaches `stop`; returns the
/// snapshot's counter. Its values and blocks keep `aug`'s numbers.
#[allow(clippy::too_many_arguments)]
fn build_runner(
    module: &mut Module,
    aug_id: FuncId,
    aug: &Function,
    l: usize,
    inside: &EntitySet<Block>,
    header: Block,
    check: Block,
    state: &[Value],
    captured: &Captured,
    tape: u8,
    for_forward: bool,
    binomial: Option<FuncId>,
) -> Result<FuncId, AdError> {
    let mut params = vec![
        Param::new("stop", Type::I64),
        Param::new("drop", Type::Bool),
    ];
    for &a in &captured.taken {
        params.push(Param::new(aug.array_name(a), aug.dfg.value_type(a)));
    }
    for &w in &captured.witnesses {
        params.push(Param::new(
            format!("w_{}", aug.array_name(w)),
            aug.dfg.value_type(w),
        ));
    }
    let sig = Signature {
        params,
        results: vec![Type::I64],
    };
    let name = format!("{}.seg{l}", aug.name);
    let mut restores = Vec::new();
    let mut saves = Vec::new();
    for &a in &captured.saved {
        restores.push(rules::restore_helper(module, tape, aug.dfg.value_type(a))?);
        saves.push(rules::save_helper(module, tape, aug.dfg.value_type(a))?);
    }
    let mut f = Function::new(name.clone(), sig);
    for i in 0..aug.dfg.num_values() {
        let ty = aug.dfg.value_type(Value::from_u32(i as u32));
        f.dfg.make_detached_value(ty);
    }
    for _ in 0..aug.dfg.num_blocks() {
        f.dfg.make_block();
    }
    let entry = f.dfg.make_block();
    f.layout.append_block(entry);
    let stop = f.dfg.append_block_param(entry, Type::I64);
    let drop = f.dfg.append_block_param(entry, Type::Bool);
    for &a in &captured.taken {
        f.dfg.attach_block_param(entry, a, aug.dfg.value_type(a));
    }
    for &w in &captured.witnesses {
        f.dfg.append_block_param(entry, aug.dfg.value_type(w));
    }
    let blocks: Vec<Block> = aug
        .layout
        .blocks()
        .iter()
        .copied()
        .filter(|&b| inside.contains(b) || b == check)
        .collect();
    for &b in &blocks {
        f.layout.append_block(b);
        for &p in aug.dfg.block_params(b) {
            f.dfg.attach_block_param(b, p, aug.dfg.value_type(p));
        }
    }
    let ret = f.dfg.make_block();
    f.layout.append_block(ret);
    let hp = aug.dfg.block_params(header).to_vec();
    let (mark, seg) = match *hp.as_slice() {
        [.., mark, seg] => (mark, seg),
        _ => {
            return Err(internal(
                aug,
                "a checkpointed header without its parameters",
            ))
        }
    };
    // An exit is taken only when the runner recomputes the last segment
    // (`stop` = -1: a counted loop's, whose records the augmented primal
    // dropped where the loop was left); each goes to a block of its own
    // that returns where the last sub-segment starts.
    let mut stubs: SecondaryMap<Block, Option<Block>> = SecondaryMap::new();
    for &b in &blocks {
        if b == check {
            continue;
        }
        for &inst in aug.layout.block_insts(b) {
            let mut data = aug.dfg.inst(inst).clone();
            for d in data.destinations_mut() {
                if inside.contains(d.block) || d.block == check {
                    continue;
                }
                let stub = match stubs[d.block] {
                    Some(s) => s,
                    None => {
                        let s = f.dfg.make_block();
                        for &p in aug.dfg.block_params(d.block) {
                            f.dfg.append_block_param(s, aug.dfg.value_type(p));
                        }
                        f.layout.append_block(s);
                        stubs[d.block] = Some(s);
                        s
                    }
                };
                d.block = stub;
            }
            let new = super::aug::copy_inst(aug, inst, data, &mut f, b);
            f.dfg.set_srcloc(new, aug.dfg.srcloc(inst));
        }
    }
    let stub_blocks: Vec<Block> = stubs.values().flatten().copied().collect();
    let mut b = FuncBuilder::new(&mut f);
    for s in stub_blocks {
        b.switch_to_block(s);
        b.ret(&[seg]);
    }
    // The entry drops the snapshot on top first if asked (the last
    // segment's, whose records the adjoint has popped), then pops the one
    // below and runs its segment, unless `stop` is 0 (nothing before).
    let (drop_block, main, pop_block, ret0) = (
        b.create_block(),
        b.create_block(),
        b.create_block(),
        b.create_block(),
    );
    b.switch_to_block(entry);
    let zero = b.iconst(0);
    b.brif(drop, drop_block, &[], main, &[]);
    b.switch_to_block(drop_block);
    pop_snapshot(
        &mut b,
        drop_block,
        aug,
        state,
        captured,
        &restores,
        tape,
        false,
        binomial.is_some(),
    );
    b.jump(main, &[]);
    b.switch_to_block(main);
    let idle = b.icmp(CmpCond::Eq, stop, zero);
    b.brif(idle, ret0, &[], pop_block, &[]);
    b.switch_to_block(ret0);
    b.ret(&[zero]);
    b.switch_to_block(pop_block);
    let (popped, free) = pop_snapshot(
        &mut b,
        pop_block,
        aug,
        state,
        captured,
        &restores,
        tape,
        true,
        binomial.is_some(),
    );
    let no_counter = || AdError::ReverseInternal {
        func: aug.name.clone(),
        reason: "checkpointing: a loop header without its counter".into(),
    };
    // The snapshot goes back on the tape, as the augmented primal left
    // the last segment's: the runner may cut the segment into
    // sub-segments, and the first of them starts from it.
    // A binomial schedule: the snapshots between the popped one and
    // `stop` go where `@adze.binomial` puts them, with the popped one's
    // free count.
    let sched = match (binomial, free) {
        (Some(helper), Some(free)) => {
            let at = *popped.last().ok_or_else(no_counter)?;
            let sched = start_schedule(&mut b, helper, free, stop, at);
            Some((helper, sched))
        }
        _ => None,
    };
    start_segment(&mut b, captured, &saves, tape, header, &popped, free);
    // The check of the back edge: the segment ends at `stop`; before, the
    // runner cuts its tape where the augmented primal would by the tape's
    // growth, keeping a snapshot each time: a counted segment longer than
    // the budget's share is recomputed in sub-segments, which the adjoint
    // reverses as it reverses segments. A binomial schedule keeps a
    // snapshot where `@adze.binomial` says, and drops the records of the
    // segments before the last by the tape's growth, as the augmented
    // primal does.
    b.switch_to_block(check);
    let counter = *b
        .func
        .dfg
        .block_params(check)
        .last()
        .ok_or_else(no_counter)?;
    let args = b.func.dfg.block_params(check).to_vec();
    let done = b.icmp(CmpCond::Eq, counter, stop);
    let (more, cut) = (b.create_block(), b.create_block());
    b.brif(done, ret, &[], more, &[]);
    b.switch_to_block(more);
    let mut stay = args.clone();
    stay.extend([mark, seg]);
    let free = match sched {
        None => {
            let grown = b.tapeover(tape, mark);
            b.brif(grown, cut, &[], header, &stay);
            b.switch_to_block(cut);
            b.tapecut(tape, mark);
            None
        }
        Some((helper, sched)) => {
            let note = format!(
                "tape {tape}: checkpointed loop {l}: a segment before the last outgrew its \
                 share of the budget: drops its records"
            );
            binomial_check(
                &mut b, tape, mark, header, &stay, counter, sched, stop, cut, &note,
            );
            b.switch_to_block(cut);
            b.tapecut(tape, mark);
            Some(next_snapshot(&mut b, helper, sched, stop, counter))
        }
    };
    start_segment(&mut b, captured, &saves, tape, header, &args, free);
    // The first iteration of the last (sub-)segment, whose snapshot is on
    // the tape.
    b.switch_to_block(ret);
    b.ret(&[seg]);
    remove_unreachable(&mut f);
    f.inlined = aug.inlined.clone();
    if for_forward {
        // A forward derivative of it keeps the augmented primal's activity
        // by value number (`runner_activity`): inlined into the adjoint,
        // its values would be renumbered.
        f.meta.inline = adze_ir::InlineHint::Never;
    }
    copy_regions(aug, &mut f, inside);
    let made = adze_ir::Derivation {
        from: Some(aug_id),
        step: adze_ir::Step::Segment { l },
    };
    module
        .push_derived(f, made)
        .map_err(|_| AdError::NameTaken { name })
}

/// Removes the blocks the entry does not reach (exit stubs of edges that
/// only the loop's last iteration takes can be unreachable in a runner,
/// and later passes expect none).
fn remove_unreachable(f: &mut Function) {
    let Some(entry) = f.layout.entry_block() else {
        return;
    };
    let mut seen: EntitySet<Block> = EntitySet::new();
    for b in adze_ir::cfg::reverse_postorder(f, entry) {
        seen.insert(b);
    }
    let dead: Vec<Block> = f
        .layout
        .blocks()
        .iter()
        .copied()
        .filter(|&b| !seen.contains(b))
        .collect();
    for b in dead {
        f.layout.remove_block(b);
    }
}

/// Pops a snapshot (last pushed first): a binomial schedule's free count
/// when `free` (returned), the header's values (returned), the scalars and
/// the saved arrays, which define the loop's values from
/// outside it when `define` (and are dropped otherwise).
#[allow(clippy::too_many_arguments)]
fn pop_snapshot(
    b: &mut FuncBuilder,
    block: Block,
    aug: &Function,
    state: &[Value],
    captured: &Captured,
    restores: &[FuncId],
    tape: u8,
    define: bool,
    free: bool,
) -> (Vec<Value>, Option<Value>) {
    let free = free.then(|| b.pop(tape, Type::I64));
    let mut popped: Vec<Value> = state
        .iter()
        .rev()
        .map(|&v| {
            let ty = b.func.dfg.value_type(v);
            b.pop(tape, ty)
        })
        .collect();
    popped.reverse();
    for &v in captured.scalars.iter().rev() {
        let ty = b.func.dfg.value_type(v);
        if define {
            let data = InstData::Pop {
                tape,
                ty,
                varies: None,
            };
            let inst = b.func.dfg.make_inst_with_results(data, &[(v, ty)]);
            b.func.layout.append_inst(inst, block);
        } else {
            b.pop(tape, ty);
        }
    }
    for (&a, &restore) in captured.saved.iter().zip(restores).rev() {
        let ty = b.func.dfg.value_type(a);
        let n = b.pop(tape, Type::I64);
        let op = if ty == Type::IArray {
            Opcode::Izeros
        } else {
            Opcode::Zeros
        };
        let data = InstData::Zeros {
            op,
            len: n,
            name: aug.array_name(a),
        };
        let arr = if define {
            let inst = b.func.dfg.make_inst_with_results(data, &[(a, ty)]);
            b.func.layout.append_inst(inst, block);
            a
        } else {
            let inst = b.build(data, &[ty]);
            b.func.dfg.first_result(inst)
        };
        b.call(restore, &[arr], &[]);
    }
    (popped, free)
}

/// The rule regions of `aug` that lie inside the loop, kept in the runner
/// (an outer pass applies their rules there as in the augmented primal).
fn copy_regions(aug: &Function, f: &mut Function, inside: &EntitySet<Block>) {
    let mut map = std::collections::HashMap::new();
    for (r, data) in aug.regions.iter() {
        if data.blocks.iter().all(|&b| inside.contains(b)) {
            let parent = data.parent.and_then(|p| map.get(&p).copied());
            let new = f.regions.push(RegionData {
                parent,
                ..data.clone()
            });
            map.insert(r, new);
        }
    }
}

fn internal(primal: &Function, reason: &str) -> AdError {
    AdError::ReverseInternal {
        func: primal.name.clone(),
        reason: format!("checkpointing: {reason}"),
    }
}

/// For a forward derivative of the runner of a `.ckptf` derivative, or of
/// a forward derivative of one (`id`, differentiated with the activities
/// `args`, one per parameter): the activity its values have fixed, those
/// that have a counterpart in the augmented primal's derivative of the same
/// order (the runner's values numbered below its own, `stop` the first,
/// are the augmented primal's; a forward derivative keeps its primal's
/// numbers and lists the tangents it gave, `Function::tangents`). `None`
/// when `id` is no such function.
///
/// The counterpart's request is read from the runner's arguments: the
/// arrays it takes and its witnesses give the activity of the adjoint's
/// parameters, their tangents that of the tangents; the others are
/// constant, and [`choose`] saw to it that they reach nothing in the loop
/// (checked again here, as are array results a caller might make active).
/// The counterparts of higher orders are forward derivatives of the
/// augmented primal, derived here when the derivative does not use them.
pub(crate) fn runner_activity(
    cx: &mut crate::AdContext<'_>,
    module: &mut Module,
    id: FuncId,
    args: &[ArgActivity],
    nesting: usize,
) -> Result<Option<Vec<(Value, bool)>>, AdError> {
    // The forward derivatives over the runner, outermost first.
    let mut chain = Vec::new();
    let mut cur = id;
    let aug_id = loop {
        match module.derivation(cur) {
            Some(adze_ir::Derivation {
                from: Some(from),
                step: adze_ir::Step::Forward { args, width, .. },
            }) => {
                chain.push((cur, args.clone(), *width));
                cur = *from;
            }
            Some(adze_ir::Derivation {
                from: Some(aug),
                step: adze_ir::Step::Segment { .. },
            }) => break *aug,
            _ => return Ok(None),
        }
    };
    chain.reverse();
    let runner_id = cur;
    let name = module.func(id).name.clone();
    let fail = |reason: &str| AdError::ReverseInternal {
        func: name.clone(),
        reason: format!("checkpointing: forward mode over a runner: {reason}"),
    };
    let Some(adze_ir::Derivation {
        step: adze_ir::Step::Augmented { spec, .. },
        ..
    }) = module.derivation(aug_id)
    else {
        return Err(fail("a runner not made from an augmented primal"));
    };
    if !spec.for_forward {
        return Err(fail("the runner of a derivative not built for it"));
    }
    let untaken = spec.untaken.clone();
    let mut corr = runner_counterparts(module, runner_id, aug_id, &untaken)
        .ok_or_else(|| fail("its parameters are not those of its augmented primal"))?;
    // Up the chain: the counterpart of each forward derivative is the
    // forward derivative of the last counterpart, for the activities that
    // the derivative's request gives the counterpart's parameters.
    let mut g = aug_id;
    let mut f = runner_id;
    for (fi, fargs, width) in chain.iter() {
        let (known, widest) = counterpart_request(module, f, g, &corr, fargs);
        // The derivative's own counterpart when it has one: a forward
        // derivative of `g` for the same width whose parameters that the
        // runner takes have the activities given (the others reach nothing
        // in the loop, `choose`). Else one derived here, as a request from
        // source would have it (`.noret` without results).
        let given = |a: &[ArgActivity]| {
            a.len() == known.len()
                && (a.iter().zip(&known).zip(&widest)).all(|((x, k), w)| x == k || k != w)
        };
        let existing = module.ids().find(|&id| {
            matches!(module.derivation(id), Some(adze_ir::Derivation {
                from: Some(from),
                step: adze_ir::Step::Forward { args, width: w, .. },
            }) if *from == g && w == width && given(args))
                && !module.func(id).is_declaration()
        });
        let gi = match existing {
            Some(id) => id,
            None => {
                let ret = if module.func(g).sig.results.is_empty() {
                    adze_ir::RetActivity::Const
                } else {
                    adze_ir::RetActivity::Dual
                };
                let req = crate::forward::ForwardRequest {
                    width: *width,
                    ..crate::forward::ForwardRequest::new(g, known, ret)
                };
                crate::forward::derive(
                    cx,
                    module,
                    &req,
                    &mut crate::forward::Building::at(nesting),
                )?
            }
        };
        corr = extend_counterparts(&corr, module.func(*fi), module.func(gi));
        (f, g) = (*fi, gi);
    }
    let (known, widest) = counterpart_request(module, f, g, &corr, args);
    let (func, counterpart) = (module.func(f), module.func(g));
    let seeded: Vec<usize> = (counterpart.sig.results.iter().enumerate())
        .filter(|(_, &t)| t == Type::Array)
        .map(|(k, _)| k)
        .collect();
    let fixed = crate::activity::analyze_cached(&mut cx.cache, module, counterpart, &known, &[]);
    let wide =
        crate::activity::analyze_cached(&mut cx.cache, module, counterpart, &widest, &seeded);
    let mut out = Vec::with_capacity(corr.len());
    for &(v, c) in &corr {
        if func.dfg.value_type(v) != counterpart.dfg.value_type(c) {
            return Err(fail("a value not numbered as its counterpart"));
        }
        if fixed.is_active(c) != wide.is_active(c) {
            return Err(fail(
                "the activity of a value of the loop depends on what the runner does not take",
            ));
        }
        out.push((v, fixed.is_active(c)));
    }
    Ok(Some(out))
}

/// The values of the runner `runner` and their counterparts in its
/// augmented primal `aug`: the values it shares (numbered below its own,
/// `stop` the first), and its witnesses, which stand for parameters of the
/// augmented primal (the f64 and array parameters the adjoint has, in
/// order, that the runner does not take as they are). `None` when its
/// parameters are not these.
fn runner_counterparts(
    module: &Module,
    runner: FuncId,
    aug: FuncId,
    untaken: &[usize],
) -> Option<Vec<(Value, Value)>> {
    let (runner, aug) = (module.func(runner), module.func(aug));
    let params = runner.params();
    let below = params.first()?.as_u32();
    let witnesses: Vec<Value> = aug
        .params()
        .iter()
        .zip(&aug.sig.params)
        .enumerate()
        .filter(|&(k, (_, p))| {
            matches!(p.ty, Type::F64 | Type::Array)
                && (super::plan::adj_takes(p, k, untaken)
                    || super::plan::adj_witnesses(p, k, untaken, true))
        })
        .map(|(_, (&v, _))| v)
        .filter(|v| !params.contains(v))
        .collect();
    let taken = params.len().checked_sub(2 + witnesses.len())?;
    if params[2..2 + taken].iter().any(|v| v.as_u32() >= below) {
        return None;
    }
    let mut seen: EntitySet<Value> = EntitySet::new();
    let mut corr: Vec<(Value, Value)> =
        params[2 + taken..].iter().copied().zip(witnesses).collect();
    let mut add = |v: Value| {
        if v.as_u32() < below && !seen.contains(v) {
            seen.insert(v);
            corr.push((v, v));
        }
    };
    for &b in runner.layout.blocks() {
        runner
            .dfg
            .block_params(b)
            .iter()
            .copied()
            .for_each(&mut add);
        for &inst in runner.layout.block_insts(b) {
            runner
                .dfg
                .inst_results(inst)
                .iter()
                .copied()
                .for_each(&mut add);
            runner.dfg.inst(inst).for_each_use(&mut add);
        }
    }
    if corr
        .iter()
        .any(|&(_, c)| c.as_u32() as usize >= aug.dfg.num_values())
    {
        return None;
    }
    Some(corr)
}

/// The request of the counterpart `g` of `f` when `f` is differentiated
/// with `args`: each parameter of `g` has the activity of the parameter of
/// `f` it is the counterpart of, else `Const` (first) or the widest
/// activity of its type (second).
fn counterpart_request(
    module: &Module,
    f: FuncId,
    g: FuncId,
    corr: &[(Value, Value)],
    args: &[ArgActivity],
) -> (Vec<ArgActivity>, Vec<ArgActivity>) {
    let (f, g) = (module.func(f), module.func(g));
    let (mut known, mut widest) = (Vec::new(), Vec::new());
    for &p in g.params() {
        let given = corr
            .iter()
            .find(|&&(_, c)| c == p)
            .and_then(|&(v, _)| f.params().iter().position(|&q| q == v))
            .and_then(|k| args.get(k).copied());
        let top = match g.dfg.value_type(p) {
            Type::F64 => ArgActivity::Dual,
            Type::Array => ArgActivity::Dup,
            _ => ArgActivity::Const,
        };
        known.push(given.unwrap_or(ArgActivity::Const));
        widest.push(given.unwrap_or(top));
    }
    (known, widest)
}

/// The counterparts one forward derivative up: each pair, kept (a forward
/// derivative keeps its primal's numbers), and its tangents, lane by lane,
/// where both derivatives gave one.
fn extend_counterparts(corr: &[(Value, Value)], f: &Function, g: &Function) -> Vec<(Value, Value)> {
    let lanes = |func: &Function| -> std::collections::HashMap<Value, Vec<Value>> {
        func.tangents.iter().cloned().collect()
    };
    let (tf, tg) = (lanes(f), lanes(g));
    let mut out = corr.to_vec();
    for &(v, c) in corr {
        if let (Some(a), Some(b)) = (tf.get(&v), tg.get(&c)) {
            out.extend(a.iter().copied().zip(b.iter().copied()));
        }
    }
    out
}

/// Is `id` the augmented primal or a runner of a `.ckptf` derivative, or a
/// forward derivative of one? Their forward derivatives list their tangents
/// (`Function::tangents`, read by [`runner_activity`]).
pub(crate) fn counterpart_chain(module: &Module, id: FuncId) -> bool {
    let mut cur = id;
    loop {
        match module.derivation(cur) {
            Some(adze_ir::Derivation {
                from: Some(from),
                step: adze_ir::Step::Forward { .. } | adze_ir::Step::Segment { .. },
            }) => cur = *from,
            Some(adze_ir::Derivation {
                step: adze_ir::Step::Augmented { spec, .. },
                ..
            }) => return spec.for_forward,
            _ => return false,
        }
    }
}
