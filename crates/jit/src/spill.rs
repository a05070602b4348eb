//! Live ranges split around calls and around loops that do not use them.
//!
//! Cranelift's register allocator (regalloc2) does not always split a long
//! live range where it should, and then spills inside a hot loop. Two cases
//! measured here:
//!
//! - **Calls.** The System V ABI preserves no vector register across a
//!   call, so an `f64` live across a call (an out-of-line intrinsic such as
//!   `exp`, a call to generated code, `zeros`' allocation) is in memory
//!   while it runs. On the seed's forward derivative regalloc2 kept the
//!   loop's two running sums in stack slots for the whole loop, because
//!   *after* the loop they are live across `cos` and `sin`:
//!
//!   ```text
//!   block4(v7: i64, v8: f64, v9: f64):     ; the loop carries v8, v9
//!       ...
//!   block8(v12: f64, v13: f64):            ; after the loop
//!       v31 = cos v12                      ; v12, v13 live across this call
//!       v32 = sin v12
//!   ```
//!
//! - **Loops under pressure.** GMM's primal has about twenty integer values
//!   (array pointers, sizes, counters) live through its innermost loop,
//!   which uses seven of them; regalloc2 spilled and reloaded the loop's own
//!   operands every iteration. A value live through a loop that is not used
//!   in it is now *parked* on the loop's entry edges (stored, its register
//!   given up) when the loop's header has more values live in than
//!   registers, and reloaded at its next use after the loop.
//!
//! A split value is a Cranelift `Variable` with its own 8-byte stack slot.
//! Its *location* at each point is a pair: in a register (the variable's
//! current SSA version holds it) and in its slot. A call it is live across
//! and a park store it (unless the slot holds it) and drop the register; a
//! use reloads it when it is not in a register; a definition puts it in a
//! register only. Cranelift's SSA builder joins versions at merges. The
//! [`plan`] computes, by a forward data flow over the blocks, each split
//! value's location on entry to each block (in a register only if it is on
//! every incoming edge, in its slot likewise), and where a merge would find
//! it in neither, it has the edges that have it only in a register store it
//! ([`SpillPlan::store_at_end`]). Every version of a value holds the same
//! bits, so the plan decides only where the value lives, never what it is.
//!
//! Integer values are split around loops only: six general-purpose
//! registers are callee-saved, so regalloc2 keeps integers across calls.

use adze_ir::cfg::{DominatorTree, Loop, LoopForest};
use adze_ir::{Block, Function, Inst, InstData, Type, Value};
use cranelift_codegen::entity::{EntitySet, SecondaryMap};
use std::collections::{HashMap, HashSet};

/// Above this many block × value bits the liveness sets are not computed
/// and nothing is split (the allocator copes alone, as before).
const MAX_BITS: usize = 1 << 26;

/// Nor above this many instructions: such functions are compiled with the
/// single-pass allocator anyway (`JitOptions::single_pass_above`), and the
/// plan's loop sets would cost time for nothing.
const MAX_INSTS: usize = 20_000;

/// Nor when the loops' sizes add up to more than this many times the
/// number of blocks (plus a little): loops nested that deep are not where
/// the plan pays, and its per-loop sets would make compile time quadratic.
/// Ordinary code nests loops a few deep (GMM: 3).
const MAX_LOOP_BLOCKS_PER_BLOCK: usize = 8;

/// Values live into a loop header, above which its unused ones are parked:
/// general registers (15 on x86-64, less the frame pointer and a few for
/// the loop's own temporaries) and vector registers (16).
const GPR_BUDGET: usize = 11;
const XMM_BUDGET: usize = 13;

/// General registers a call preserves (System V: rbx, r12–r15; rbp is the
/// frame pointer). Up to this many integer values can stay in registers
/// across a call; when more are live across one, all of them are split
/// there, so that none stays in a stack slot through the loops around it
/// (in a loop, all but the [`KEPT_ACROSS_CALLS`] the loop uses most).
const CALLEE_SAVED: usize = 5;

/// Integer values that stay in registers across a call under pressure
/// inside a loop (the most used in the loop): the callee-saved registers
/// less the context pointer and one for a `bool` or a temporary.
const KEPT_ACROSS_CALLS: usize = CALLEE_SAVED - 2;

/// Where to split live ranges, and where each split value is on entry to
/// each block.
#[derive(Default)]
pub(crate) struct SpillPlan {
    /// For each call, the values live across it that it drops from
    /// registers (every `f64`; integers too when more than
    /// [`CALLEE_SAVED`] are live across it), except those that an earlier
    /// call of the block dropped already and nothing has used since: they
    /// are in their slot only. Sorted by value number.
    pub cross: SecondaryMap<Inst, Vec<Value>>,
    /// Before the terminator of a block that enters a loop: values to store
    /// (unless their slot holds them) and drop from registers.
    pub park: SecondaryMap<Block, Vec<Value>>,
    /// Before the terminator of a block: values to store (unless their slot
    /// holds them), keeping their register, because a successor needs them
    /// in their slot.
    pub store_at_end: SecondaryMap<Block, Vec<Value>>,
    /// Before the terminator of a block that enters a loop: values the loop
    /// uses, reloaded here rather than on every iteration.
    pub reload_at_end: SecondaryMap<Block, Vec<Value>>,
    /// For each block, the split values live into it and their location
    /// on entry: (value, in a register, in its slot).
    pub entry: SecondaryMap<Block, Vec<(Value, bool, bool)>>,
    /// The split values.
    pub split: EntitySet<Value>,
}

impl SpillPlan {
    pub(crate) fn is_split(&self, v: Value) -> bool {
        self.split.contains(v)
    }
}

/// Which register file a value lives in, if it is one the plan splits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum File {
    Gpr,
    Xmm,
}

fn file(func: &Function, v: Value) -> Option<File> {
    match func.dfg.value_type(v) {
        Type::F64 => Some(File::Xmm),
        Type::I64 | Type::Array | Type::IArray => Some(File::Gpr),
        // Left to Cranelift's allocator: the plan's slots are 8 bytes.
        Type::Bool | Type::F64x2 => None,
    }
}

/// A fixed-width bit set per block.
struct Sets {
    words: usize,
    bits: Vec<u64>,
}

impl Sets {
    fn new(blocks: usize, n: usize, fill: bool) -> Sets {
        let words = n.div_ceil(64);
        Sets {
            words,
            bits: vec![if fill { !0 } else { 0 }; words * blocks],
        }
    }
    fn row(&self, k: usize) -> &[u64] {
        &self.bits[k * self.words..(k + 1) * self.words]
    }
    fn row_mut(&mut self, k: usize) -> &mut [u64] {
        &mut self.bits[k * self.words..(k + 1) * self.words]
    }
    fn has(&self, k: usize, g: usize) -> bool {
        self.bits[k * self.words + g / 64] >> (g % 64) & 1 == 1
    }
    fn set(&mut self, k: usize, g: usize, on: bool) {
        let w = &mut self.bits[k * self.words + g / 64];
        if on {
            *w |= 1 << (g % 64);
        } else {
            *w &= !(1 << (g % 64));
        }
    }
}

/// Computes the plan for `func` over the blocks of `order` (reverse
/// postorder; unreachable blocks are not translated and take no part).
/// `is_call` says which instructions call out.
pub(crate) fn plan(
    func: &Function,
    order: &[Block],
    graph: &Graph,
    is_call: impl Fn(&InstData) -> bool,
) -> SpillPlan {
    let insts = |b: Block| func.layout.block_insts(b);
    let nb = order.len();
    let (succs, preds) = (&graph.succs, &graph.preds);
    let has_call = order
        .iter()
        .any(|&b| insts(b).iter().any(|&i| is_call(func.dfg.inst(i))));
    let has_loop = !graph.loops.is_empty();
    if (!has_call && !has_loop) || func.num_placed_insts() > MAX_INSTS {
        return SpillPlan::default();
    }
    // Per-loop sets cost the sum of the loops' sizes, which deep nesting
    // makes quadratic (each block is in every loop around it); past this
    // budget nothing is split, as above.
    if graph.deeply_nested() {
        return SpillPlan::default();
    }

    let (globals, gidx) = number_globals(func, order);
    if globals.len().div_ceil(64) * 64 * nb > MAX_BITS {
        return SpillPlan::default();
    }
    let ng = globals.len();
    let (live_in, live_out) = liveness(func, order, succs, &globals, &gidx);
    let mut plan = SpillPlan::default();
    if has_call {
        split_at_calls(
            func,
            order,
            &globals,
            (&live_in, &live_out),
            &is_call,
            &graph.loops,
            &mut plan,
        );
    }
    let loops = if has_loop {
        let natural = graph.bodies(func, order);
        park_around_loops(func, order, &natural, preds, &globals, &live_in, &mut plan)
    } else {
        Vec::new()
    };

    // Where each split value is on entry to each block.
    let splits: Vec<usize> = (0..ng)
        .filter(|&g| plan.split.contains(globals[g]))
        .collect();
    if splits.is_empty() {
        return plan;
    }
    let shape = Shape {
        func,
        order,
        preds,
        globals: &globals,
        gidx: &gidx,
        live_in: &live_in,
        loops: &loops,
    };
    locate(&shape, &mut plan);
    plan
}

/// The splittable values used outside the block that defines them (only
/// these need block-level liveness sets), and their numbers (`usize::MAX`
/// for the other values).
fn number_globals(func: &Function, order: &[Block]) -> (Vec<Value>, SecondaryMap<Value, usize>) {
    let insts = |b: Block| func.layout.block_insts(b);
    let nvals = func.dfg.num_values();
    let mut gidx: SecondaryMap<Value, usize> = SecondaryMap::with_default(usize::MAX);
    gidx.resize(nvals);
    let mut globals: Vec<Value> = Vec::new();
    for &b in order {
        for &i in insts(b) {
            func.dfg.inst(i).for_each_use(|v| {
                if file(func, v).is_some() && gidx[v] == usize::MAX && func.def_block(v) != Some(b)
                {
                    gidx[v] = globals.len();
                    globals.push(v);
                }
            });
        }
    }
    (globals, gidx)
}

/// Liveness of the globals: gen (upward-exposed uses) and kill (defs), to
/// the sets live into and out of each block.
fn liveness(
    func: &Function,
    order: &[Block],
    succs: &[Vec<usize>],
    globals: &[Value],
    gidx: &SecondaryMap<Value, usize>,
) -> (Sets, Sets) {
    let insts = |b: Block| func.layout.block_insts(b);
    let nb = order.len();
    let ng = globals.len();
    let mut gen = Sets::new(nb, ng, false);
    let mut kill = Sets::new(nb, ng, false);
    for (k, &b) in order.iter().enumerate() {
        for &p in func.dfg.block_params(b) {
            if gidx[p] != usize::MAX {
                kill.set(k, gidx[p], true);
            }
        }
        for &i in insts(b) {
            func.dfg.inst(i).for_each_use(|v| {
                let g = gidx[v];
                if g != usize::MAX && !kill.has(k, g) {
                    gen.set(k, g, true);
                }
            });
            for &r in func.dfg.inst_results(i) {
                if gidx[r] != usize::MAX {
                    kill.set(k, gidx[r], true);
                }
            }
        }
    }
    let mut live_in = Sets::new(nb, ng, false);
    live_in.bits.clone_from(&gen.bits);
    let mut live_out = Sets::new(nb, ng, false);
    let words = live_in.words;
    let mut changed = true;
    while changed {
        changed = false;
        for k in (0..nb).rev() {
            for w in 0..words {
                let out = succs[k]
                    .iter()
                    .fold(0u64, |acc, &s| acc | live_in.row(s)[w]);
                live_out.row_mut(k)[w] = out;
                let inn = gen.row(k)[w] | (out & !kill.row(k)[w]);
                if inn != live_in.row(k)[w] {
                    live_in.row_mut(k)[w] = inn;
                    changed = true;
                }
            }
        }
    }
    (live_in, live_out)
}

/// Calls: a forward scan of each block finds, for each call, the values
/// live across it that may be in a register there. A value dropped at
/// one call and not used since is in its slot only at the next: it
/// needs nothing there, and listing it again at every call would make
/// the lists (and this scan, and the translator's work) quadratic in a
/// long block of calls with many values live through it (the reverse
/// derivative of straight-line code). So `cross` holds what each call
/// changes, not every value live across it.
fn split_at_calls(
    func: &Function,
    order: &[Block],
    globals: &[Value],
    (live_in, live_out): (&Sets, &Sets),
    is_call: &impl Fn(&InstData) -> bool,
    loops: &LoopForest,
    plan: &mut SpillPlan,
) {
    let insts = |b: Block| func.layout.block_insts(b);
    // Uses of each value in each loop that has a call under pressure
    // (computed when first needed).
    let mut loop_uses: HashMap<Loop, HashMap<Value, u32>> = HashMap::new();
    let nvals = func.dfg.num_values();
    // Position of each value's last use in the block (+1; 0: none).
    let mut last_use: SecondaryMap<Value, u32> = SecondaryMap::with_capacity(nvals);
    let mut live_out_of = EntitySet::with_capacity(nvals);
    let mut in_reg = EntitySet::with_capacity(nvals);
    let mut cand: Vec<Value> = Vec::new();
    let mut touched: Vec<Value> = Vec::new();
    for (k, &b) in order.iter().enumerate() {
        for v in touched.drain(..) {
            last_use[v] = 0;
            live_out_of.remove(v);
            in_reg.remove(v);
        }
        cand.clear();
        let body = insts(b);
        for (p, &i) in body.iter().enumerate() {
            func.dfg.inst(i).for_each_use(|v| {
                if file(func, v).is_some() {
                    last_use[v] = p as u32 + 1;
                    touched.push(v);
                }
            });
        }
        for g in ones(live_out.row(k)) {
            let v = globals[g];
            live_out_of.insert(v);
            touched.push(v);
        }
        let live_after =
            |v: Value, p: usize| live_out_of.contains(v) || last_use[v] as usize > p + 1;
        // Values that may be in a register, and how many integer
        // values are live (each counted while it is).
        let mut gprs = 0usize;
        let enter = |v: Value,
                     p: Option<usize>,
                     cand: &mut Vec<Value>,
                     in_reg: &mut EntitySet<Value>,
                     touched: &mut Vec<Value>| {
            if file(func, v).is_none() || !in_reg.insert(v) {
                return false;
            }
            touched.push(v);
            cand.push(v);
            p.is_none_or(|p| live_after(v, p)) && file(func, v) == Some(File::Gpr)
        };
        for g in ones(live_in.row(k)) {
            if enter(globals[g], None, &mut cand, &mut in_reg, &mut touched) {
                gprs += 1;
            }
        }
        for &v in func.dfg.block_params(b) {
            let live = live_out_of.contains(v) || last_use[v] > 0;
            if enter(v, None, &mut cand, &mut in_reg, &mut touched) && live {
                gprs += 1;
            }
        }
        for (p, &i) in body.iter().enumerate() {
            let data = func.dfg.inst(i);
            // A use puts the value in a register (a reload if it was
            // dropped); it was counted while live already.
            data.for_each_use(|v| {
                enter(v, Some(p), &mut cand, &mut in_reg, &mut touched);
            });
            // Integer values whose last use is this instruction leave
            // the count (once each).
            let mut dying: Vec<Value> = Vec::new();
            data.for_each_use(|v| {
                if file(func, v) == Some(File::Gpr)
                    && !live_after(v, p)
                    && last_use[v] as usize == p + 1
                    && !dying.contains(&v)
                {
                    dying.push(v);
                }
            });
            gprs -= dying.len();
            if is_call(data) {
                let drop_gprs = gprs > CALLEE_SAVED;
                // Under pressure in a loop, the integers its blocks use
                // most stay in callee-saved registers (a recursion's loop
                // counter, its bound: the path that does not call must not
                // reload them); the others are split.
                let keep: Vec<Value> = match loops.innermost(b) {
                    Some(l) if drop_gprs => {
                        let uses = loop_uses.entry(l).or_insert_with(|| {
                            let mut uses: HashMap<Value, u32> = HashMap::new();
                            for blk in loops.blocks(l) {
                                for &i in insts(blk) {
                                    func.dfg.inst(i).for_each_use(|v| {
                                        *uses.entry(v).or_default() += 1;
                                    });
                                }
                            }
                            uses
                        });
                        let mut ranked: Vec<(u32, Value)> = cand
                            .iter()
                            .filter(|&&v| func.dfg.value_type(v) == Type::I64 && live_after(v, p))
                            .filter_map(|&v| uses.get(&v).map(|&n| (n, v)))
                            .collect();
                        ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
                        ranked.truncate(KEPT_ACROSS_CALLS);
                        ranked.into_iter().map(|(_, v)| v).collect()
                    }
                    _ => Vec::new(),
                };
                let mut across: Vec<Value> = Vec::new();
                cand.retain(|&v| {
                    if !live_after(v, p) {
                        in_reg.remove(v);
                        return false;
                    }
                    if file(func, v) == Some(File::Xmm) || (drop_gprs && !keep.contains(&v)) {
                        across.push(v);
                        in_reg.remove(v);
                        return false;
                    }
                    true
                });
                if !across.is_empty() {
                    across.sort_unstable();
                    for &v in &across {
                        plan.split.insert(v);
                    }
                    plan.cross[i] = across;
                }
            }
            for &r in func.dfg.inst_results(i) {
                if enter(r, Some(p), &mut cand, &mut in_reg, &mut touched) {
                    gprs += 1;
                }
            }
        }
    }
}

/// Loops: natural loops of the back edges (a successor that dominates
/// its predecessor): (header, body, values used in the body).
/// Parks the values live through a loop under pressure that it does not
/// use on the loop's entry edges.
fn park_around_loops(
    func: &Function,
    order: &[Block],
    natural: &[(usize, HashSet<usize>)],
    preds: &[Vec<usize>],
    globals: &[Value],
    live_in: &Sets,
    plan: &mut SpillPlan,
) -> Vec<(usize, HashSet<usize>, EntitySet<Value>)> {
    let insts = |b: Block| func.layout.block_insts(b);
    let nvals = func.dfg.num_values();
    let mut loops: Vec<(usize, HashSet<usize>, EntitySet<Value>)> = Vec::new();
    for (h, body) in natural {
        let h = *h;
        let mut used = EntitySet::with_capacity(nvals);
        for &x in body {
            for &i in insts(order[x]) {
                func.dfg.inst(i).for_each_use(|v| {
                    used.insert(v);
                });
            }
        }
        loops.push((h, body.clone(), used.clone()));
        for file_kind in [File::Gpr, File::Xmm] {
            let live: Vec<Value> = ones(live_in.row(h))
                .map(|g| globals[g])
                .filter(|&v| file(func, v) == Some(file_kind))
                .collect();
            let params = func
                .dfg
                .block_params(order[h])
                .iter()
                .filter(|&&p| file(func, p) == Some(file_kind))
                .count();
            let budget = match file_kind {
                File::Gpr => GPR_BUDGET,
                File::Xmm => XMM_BUDGET,
            };
            if live.len() + params <= budget {
                continue;
            }
            let through: Vec<Value> = live.into_iter().filter(|&v| !used.contains(v)).collect();
            for &p in preds[h].iter().filter(|p| !body.contains(p)) {
                let pb = order[p];
                let mut term_uses = Vec::new();
                if let Some(t) = func.layout.last_inst(pb) {
                    func.dfg.inst(t).for_each_use(|v| term_uses.push(v));
                }
                let parked = &mut plan.park[pb];
                for &v in &through {
                    if !term_uses.contains(&v) && !parked.contains(&v) {
                        parked.push(v);
                        plan.split.insert(v);
                    }
                }
            }
        }
    }
    loops
}

/// What [`locate`] works on: the function, its blocks (reverse postorder)
/// and their predecessors (as positions in it), the values with block-level
/// liveness (`globals`, numbered by `gidx`), their liveness on entry to each
/// block, and the loops (header, body, values used in the body).
struct Shape<'a> {
    func: &'a Function,
    order: &'a [Block],
    preds: &'a [Vec<usize>],
    globals: &'a [Value],
    gidx: &'a SecondaryMap<Value, usize>,
    live_in: &'a Sets,
    loops: &'a [(usize, HashSet<usize>, EntitySet<Value>)],
}

/// Location events within one block, in order, for the forward data flow.
#[derive(Clone, Copy)]
enum Event {
    /// A use: reloaded into a register if it is not in one.
    Use,
    /// A definition: in a register, not in its slot.
    Def,
    /// A call or a park: stored (if needed), not in a register.
    Drop,
    /// A store at the end of the block: in its slot as well.
    Store,
}

/// The forward data flow of locations (see the module documentation), and
/// the stores that merges need.
fn locate(shape: &Shape<'_>, plan: &mut SpillPlan) {
    let dropped = loop_drops(shape, plan);
    loop {
        let effects = block_effects(shape, plan);
        let (reg_in, slot_in) = entry_locations(shape, &effects);
        if !add_fixes(shape, plan, &effects, &reg_in, &slot_in, &dropped) {
            record_entries(shape, plan, &reg_in, &slot_in);
            return;
        }
    }
}

/// The values each loop drops (a call in it, or a park for an inner loop):
/// those are reloaded inside it anyway.
fn loop_drops(shape: &Shape<'_>, plan: &SpillPlan) -> Vec<EntitySet<Value>> {
    let Shape {
        func, order, loops, ..
    } = *shape;
    let dropped: Vec<EntitySet<Value>> = loops
        .iter()
        .map(|(_, body, _)| {
            let mut set = EntitySet::new();
            for &x in body {
                let b = order[x];
                for &i in func.layout.block_insts(b) {
                    set.extend(plan.cross[i].iter().copied());
                }
                set.extend(plan.park[b].iter().copied());
            }
            set
        })
        .collect();
    dropped
}

/// Per block, the split globals' last event for each of the two bits, as
/// a mask (the block sets the bit) and the value it sets:
/// out = (in & !mask) | value.
struct Effects {
    reg_mask: Sets,
    reg_val: Sets,
    slot_mask: Sets,
    slot_val: Sets,
}

fn block_effects(shape: &Shape<'_>, plan: &SpillPlan) -> Effects {
    let Shape {
        func,
        order,
        globals,
        gidx,
        ..
    } = *shape;
    let nb = order.len();
    let ng = globals.len();
    let mut reg_mask = Sets::new(nb, ng, false);
    let mut reg_val = Sets::new(nb, ng, false);
    let mut slot_mask = Sets::new(nb, ng, false);
    let mut slot_val = Sets::new(nb, ng, false);
    for (k, &b) in order.iter().enumerate() {
        let mut note = |v: Value, e: Event| {
            let g = gidx[v];
            if g == usize::MAX || !plan.split.contains(v) {
                return;
            }
            let (reg, slot) = match e {
                Event::Use => (Some(true), None),
                Event::Def => (Some(true), Some(false)),
                Event::Drop => (Some(false), Some(true)),
                Event::Store => (None, Some(true)),
            };
            if let Some(r) = reg {
                reg_mask.set(k, g, true);
                reg_val.set(k, g, r);
            }
            if let Some(x) = slot {
                slot_mask.set(k, g, true);
                slot_val.set(k, g, x);
            }
        };
        for &p in func.dfg.block_params(b) {
            note(p, Event::Def);
        }
        let body = func.layout.block_insts(b);
        let (term, rest) = match body.split_last() {
            Some((t, r)) if func.dfg.inst(*t).opcode().is_terminator() => (Some(*t), r),
            _ => (None, body),
        };
        for &i in rest {
            func.dfg.inst(i).for_each_use(|v| note(v, Event::Use));
            {
                for &v in &plan.cross[i] {
                    note(v, Event::Drop);
                }
            }
            for &r in func.dfg.inst_results(i) {
                note(r, Event::Def);
            }
        }
        for &v in &plan.store_at_end[b] {
            note(v, Event::Store);
        }
        for &v in &plan.reload_at_end[b] {
            note(v, Event::Use);
        }
        for &v in &plan.park[b] {
            note(v, Event::Drop);
        }
        if let Some(t) = term {
            func.dfg.inst(t).for_each_use(|v| note(v, Event::Use));
        }
    }

    Effects {
        reg_mask,
        reg_val,
        slot_mask,
        slot_val,
    }
}

/// A block's location bits on exit, one word of them: `inn` on entry, then
/// the block's effects `mask` and `val`.
fn word_out(inn: &Sets, mask: &Sets, val: &Sets, k: usize, w: usize) -> u64 {
    (inn.row(k)[w] & !mask.row(k)[w]) | val.row(k)[w]
}

/// The locations on entry to each block: in a register, in the slot.
fn entry_locations(shape: &Shape<'_>, effects: &Effects) -> (Sets, Sets) {
    let Shape {
        order,
        preds,
        globals,
        ..
    } = *shape;
    let Effects {
        reg_mask,
        reg_val,
        slot_mask,
        slot_val,
    } = effects;
    let nb = order.len();
    let ng = globals.len();
    // Greatest fixed point: on entry, a bit holds if it holds at the
    // end of every predecessor.
    let mut reg_in = Sets::new(nb, ng, true);
    let mut slot_in = Sets::new(nb, ng, true);
    for w in reg_in.row_mut(0).iter_mut().chain(slot_in.row_mut(0)) {
        *w = 0;
    }
    let words = reg_in.words;
    let mut changed = true;
    while changed {
        changed = false;
        for (k, pk) in preds.iter().enumerate().skip(1) {
            for w in 0..words {
                let (mut r, mut s) = (!0u64, !0u64);
                for &p in pk {
                    r &= word_out(&reg_in, reg_mask, reg_val, p, w);
                    s &= word_out(&slot_in, slot_mask, slot_val, p, w);
                }
                if r != reg_in.row(k)[w] || s != slot_in.row(k)[w] {
                    reg_in.row_mut(k)[w] = r;
                    slot_in.row_mut(k)[w] = s;
                    changed = true;
                }
            }
        }
    }
    (reg_in, slot_in)
}

/// Adds the stores and reloads the locations call for; returns whether it
/// added any (then the locations change).
fn add_fixes(
    shape: &Shape<'_>,
    plan: &mut SpillPlan,
    effects: &Effects,
    reg_in: &Sets,
    slot_in: &Sets,
    dropped: &[EntitySet<Value>],
) -> bool {
    let Shape {
        order,
        preds,
        globals,
        live_in,
        loops,
        ..
    } = *shape;
    let Effects {
        reg_mask,
        reg_val,
        slot_mask,
        slot_val,
    } = effects;
    let out_reg =
        |p: usize, g: usize| word_out(reg_in, reg_mask, reg_val, p, g / 64) >> (g % 64) & 1 == 1;
    let out_slot =
        |p: usize, g: usize| word_out(slot_in, slot_mask, slot_val, p, g / 64) >> (g % 64) & 1 == 1;

    // A live value in neither place on entry: the edges that have it in
    // a register only store it first.
    let mut added = false;
    for (k, pk) in preds.iter().enumerate().skip(1) {
        for g in ones(live_in.row(k)) {
            let v = globals[g];
            if !plan.split.contains(v) || reg_in.has(k, g) || slot_in.has(k, g) {
                continue;
            }
            for &p in pk {
                if !out_slot(p, g) {
                    let list = &mut plan.store_at_end[order[p]];
                    if !list.contains(&v) {
                        list.push(v);
                        added = true;
                    }
                }
            }
        }
    }
    // A loop that uses a value it never drops, entered with the value
    // out of its register: reload it before the loop, not in it.
    for ((h, body, used), dropped) in loops.iter().zip(dropped) {
        for g in ones(live_in.row(*h)) {
            let v = globals[g];
            if !plan.split.contains(v) || !used.contains(v) || dropped.contains(v) {
                continue;
            }
            for &p in preds[*h].iter().filter(|p| !body.contains(p)) {
                if !out_reg(p, g) {
                    let list = &mut plan.reload_at_end[order[p]];
                    if !list.contains(&v) {
                        list.push(v);
                        added = true;
                    }
                }
            }
        }
    }
    added
}

/// Records each split value's location on entry to each block.
fn record_entries(shape: &Shape<'_>, plan: &mut SpillPlan, reg_in: &Sets, slot_in: &Sets) {
    let Shape {
        order,
        globals,
        live_in,
        ..
    } = *shape;
    plan.entry.clear();
    for (k, &b) in order.iter().enumerate() {
        let list: Vec<(Value, bool, bool)> = ones(live_in.row(k))
            .map(|g| (g, globals[g]))
            .filter(|&(_, v)| plan.split.contains(v))
            .map(|(g, v)| (v, reg_in.has(k, g), slot_in.has(k, g)))
            .collect();
        if !list.is_empty() {
            plan.entry[b] = list;
        }
    }
}

/// The loop headers whose `brif` stays in the loop on its first target and
/// leaves it on the second: the translator branches on the complement, exit
/// first, so that Cranelift lays the loop body out right after the header.
pub(crate) fn exit_first_headers(func: &Function, graph: &Graph) -> EntitySet<Block> {
    let mut out = EntitySet::new();
    for l in graph.loops.loops() {
        let hb = graph.loops.header(l);
        let Some(last) = func.layout.last_inst(hb) else {
            continue;
        };
        let InstData::Brif {
            then_dest,
            else_dest,
            ..
        } = func.dfg.inst(last)
        else {
            continue;
        };
        let inside = |b: Block| graph.loops.contains(l, b);
        if inside(then_dest.block) && !inside(else_dest.block) {
            out.insert(hb);
        }
    }
    out
}

/// The control-flow graph over the positions of `order` (reachable blocks
/// in reverse postorder): successors and predecessors, without repeats, and
/// the loop-nesting forest ([`LoopForest`]). Computed once per function for
/// the spill plan and the layout of loop headers.
pub(crate) struct Graph {
    succs: Vec<Vec<usize>>,
    preds: Vec<Vec<usize>>,
    loops: LoopForest,
}

impl Graph {
    /// The positions of the blocks that a retreating edge enters (an edge
    /// to a block not after its source in the order): every cycle of the
    /// graph has one, so a poll in each of these blocks runs in every
    /// iteration of every loop, natural or not.
    pub(crate) fn retreating_targets(&self) -> HashSet<usize> {
        self.succs
            .iter()
            .enumerate()
            .flat_map(|(k, ss)| ss.iter().copied().filter(move |&s| s <= k))
            .collect()
    }

    pub(crate) fn new(func: &Function, order: &[Block]) -> Graph {
        let pos = positions(func, order);
        let succs: Vec<Vec<usize>> = order
            .iter()
            .map(|&b| {
                adze_ir::cfg::successors(func, b)
                    .into_iter()
                    .filter_map(|s| pos[s])
                    .collect()
            })
            .collect();
        let mut preds: Vec<Vec<usize>> = vec![Vec::new(); order.len()];
        for (k, ss) in succs.iter().enumerate() {
            for &s in ss {
                if !preds[s].contains(&k) {
                    preds[s].push(k);
                }
            }
        }
        let preds_of = |b: Block| {
            let ps = pos[b].map_or(&[][..], |k| &preds[k][..]);
            ps.iter().map(|&p| order[p])
        };
        let doms = DominatorTree::new(order, preds_of);
        let loops = LoopForest::new(preds_of, &doms);
        Graph {
            succs,
            preds,
            loops,
        }
    }

    /// Do the loops' sizes add up to more than [`MAX_LOOP_BLOCKS_PER_BLOCK`]
    /// times the number of blocks (each block counts once per loop around
    /// it)? Then per-loop work is quadratic in the nesting depth. Constant
    /// time per loop: the forest knows each loop's size.
    pub(crate) fn deeply_nested(&self) -> bool {
        let loop_blocks: usize = self.loops.loops().map(|l| self.loops.size(l)).sum();
        loop_blocks > MAX_LOOP_BLOCKS_PER_BLOCK * self.succs.len() + 4096
    }

    /// Each loop's header position and the positions of its blocks, in
    /// reverse postorder of headers. Costs the sum of the loops' sizes: only
    /// for graphs that are not [`Graph::deeply_nested`].
    fn bodies(&self, func: &Function, order: &[Block]) -> Vec<(usize, HashSet<usize>)> {
        let pos = positions(func, order);
        let at = |b: Block| pos[b].expect("a block of the order");
        self.loops
            .loops()
            .map(|l| {
                let body = self.loops.blocks(l).into_iter().map(at).collect();
                (at(self.loops.header(l)), body)
            })
            .collect()
    }
}

/// The position of each block of `order` in it.
fn positions(func: &Function, order: &[Block]) -> SecondaryMap<Block, Option<usize>> {
    let mut pos = SecondaryMap::with_capacity(func.dfg.num_blocks());
    for (k, &b) in order.iter().enumerate() {
        pos[b] = Some(k);
    }
    pos
}

/// The positions of the set bits of `bits`, in increasing order.
fn ones(bits: &[u64]) -> impl Iterator<Item = usize> + '_ {
    bits.iter().enumerate().flat_map(|(w, &word)| {
        let mut rest = word;
        std::iter::from_fn(move || {
            (rest != 0).then(|| {
                let b = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                w * 64 + b
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use adze_ir::Opcode;

    /// `(instruction text, values live across it)` for every call.
    fn crossings(src: &str) -> Vec<(String, Vec<String>)> {
        let m = adze_ir::parse::parse_module(src).unwrap();
        let func = m.func(m.get("f").unwrap());
        let entry = func.entry_block().unwrap();
        let order = adze_ir::cfg::reverse_postorder(func, entry);
        let plan = plan(func, &order, &Graph::new(func, &order), |d| {
            d.opcode().libcall().is_some() || matches!(d, InstData::Call { .. })
        });
        let mut out = Vec::new();
        for &b in &order {
            for &i in func.layout.block_insts(b) {
                let vs = &plan.cross[i];
                if !vs.is_empty() {
                    let r = func.dfg.first_result(i);
                    let mut names: Vec<String> = vs.iter().map(|v| v.to_string()).collect();
                    names.sort();
                    out.push((r.to_string(), names));
                }
            }
        }
        out
    }

    #[test]
    fn sums_after_a_loop_cross_cos_and_sin() {
        let src = "function @f(x: arr) -> (f64, f64) {
block0(v0: arr):
    v1 = fconst 0.0
    v2 = iconst 0
    v3 = len v0
    jump block1(v2, v1, v1)
block1(v4: i64, v5: f64, v6: f64):
    v7 = icmp lt v4, v3
    brif v7, block2, block3(v5, v6)
block2:
    v8 = load v0, v4
    v10 = fadd v5, v8
    v12 = iconst 1
    v13 = iadd v4, v12
    jump block1(v13, v10, v6)
block3(v14: f64, v15: f64):
    v16 = cos v14
    v17 = sin v14
    v18 = fadd v16, v17
    v19 = fadd v18, v14
    return v19, v15
}
";
        assert_eq!(
            crossings(src),
            vec![
                ("v16".into(), vec!["v14".into(), "v15".into()]),
                // `v15`, dropped at `cos` and not used since, is in its
                // slot only: nothing to do at `sin`.
                ("v17".into(), vec!["v14".into(), "v16".into()]),
            ]
        );
    }

    /// A block of `n` calls, each value of which is live to the end (the
    /// shape of a reverse derivative of straight-line code): every value
    /// is listed at the one call after which it is first in its slot, so
    /// the lists hold `n - 1` entries in all, not about `n²/2`.
    #[test]
    fn values_live_through_many_calls_are_listed_once() {
        let n = 200;
        let mut body = String::from("    v1 = sin v0\n");
        let mut sum = String::from("v1");
        for k in 2..=n {
            body += &format!("    v{k} = sin v{}\n", k - 1);
        }
        for k in 2..=n {
            body += &format!("    v{} = fadd {sum}, v{k}\n", n + k);
            sum = format!("v{}", n + k);
        }
        let src = format!(
            "function @f(x: f64) -> f64 {{\nblock0(v0: f64):\n{body}    return {sum}\n}}\n"
        );
        let cross = crossings(&src);
        assert_eq!(cross.len(), n - 1);
        // `v{k}`, defined by one call, is dropped at the next, and only there.
        for (k, (at, vals)) in cross.iter().enumerate() {
            assert_eq!(at, &format!("v{}", k + 2));
            assert_eq!(vals, &vec![format!("v{}", k + 1)]);
        }
    }

    #[test]
    fn a_loop_invariant_crosses_a_call_in_the_loop() {
        let src = "function @f(x: arr, c: f64) -> f64 {
block0(v0: arr, v1: f64):
    v2 = fconst 0.0
    v3 = iconst 0
    v4 = len v0
    jump block1(v3, v2)
block1(v6: i64, v7: f64):
    v8 = icmp lt v6, v4
    brif v8, block2, block3
block2:
    v9 = load v0, v6
    v11 = exp v9
    v14 = fadd v7, v11
    v15 = fadd v14, v1
    v16 = iconst 1
    v17 = iadd v6, v16
    jump block1(v17, v15)
block3:
    return v7
}
";
        // `c` is read after the call in this iteration; the sum `v7` after
        // it too. Nothing else of the loop is live across it, and the plan
        // has nothing for a function without calls.
        assert_eq!(
            crossings(src),
            vec![("v11".into(), vec!["v1".into(), "v7".into()])]
        );
        assert!(crossings(&src.replace("exp v9", "fneg v9")).is_empty());
    }

    /// `m` integers live through an outer loop with a call and an inner
    /// loop that uses none of them.
    fn pressure(m: usize) -> SpillPlan {
        let vals: String = (0..m).map(|k| format!(", v{}: i64", 100 + k)).collect();
        let params: String = (0..m).map(|k| format!(", a{k}: i64")).collect();
        let mut sum = String::new();
        let mut last = "v3".to_string();
        for k in 0..m {
            sum += &format!("    v{} = iadd {last}, v{}\n", 200 + k, 100 + k);
            last = format!("v{}", 200 + k);
        }
        let src = format!(
            "function @f(x: arr{params}) -> i64 {{
block0(v0: arr{vals}):
    v3 = iconst 0
    v4 = len v0
    jump block1(v3)
block1(v5: i64):
    v7 = icmp lt v5, v4
    brif v7, block2, block5
block2:
    v8 = load v0, v5
    v9 = exp v8
    jump block3(v3)
block3(v10: i64):
    v12 = icmp lt v10, v4
    brif v12, block4, block6
block4:
    v15 = iconst 1
    v16 = iadd v10, v15
    jump block3(v16)
block6:
{sum}    v20 = iadd v5, {last}
    jump block1(v20)
block5:
    return v5
}}
"
        );
        let m = adze_ir::parse::parse_module(&src).unwrap();
        let func = m.func(m.get("f").unwrap());
        let order = adze_ir::cfg::reverse_postorder(func, func.entry_block().unwrap());
        plan(func, &order, &Graph::new(func, &order), |d| {
            matches!(
                d,
                InstData::Unary {
                    op: Opcode::Exp,
                    ..
                }
            )
        })
    }

    /// A loop that calls a function on one path only (a recursion's:
    /// GradBench det's loop over the columns) with more integers live
    /// across the call than callee-saved registers: the three its blocks
    /// use most (the counter, its bound, the mask) stay in registers, so
    /// the path without the call reloads nothing; the others are split.
    #[test]
    fn the_loops_busiest_integers_stay_across_its_call() {
        let src = "function @f(a: arr, n: i64, m: i64, p: i64, q: i64, r: i64) -> f64 {
block0(v0: arr, v1: i64, v2: i64, v3: i64, v4: i64, v5: i64):
    v6 = iconst 0
    v7 = fconst 0.0
    jump block1(v6, v7)
block1(v10: i64, v11: f64):
    v12 = icmp lt v10, v1
    brif v12, block2, block5
block2:
    v13 = sshr v2, v10
    v14 = iconst 1
    v15 = band v13, v14
    v16 = icmp eq v15, v14
    brif v16, block3, block4(v11)
block3:
    v17 = iadd v3, v10
    v18 = load v0, v17
    v19 = isub v2, v4
    v20 = call @f(v0, v1, v19, v3, v4, v5)
    v21 = fmul v18, v20
    v22 = fadd v11, v21
    jump block4(v22)
block4(v23: f64):
    v25 = iconst 1
    v24 = iadd v10, v25
    jump block1(v24, v23)
block5:
    return v11
}
";
        let cross = crossings(src);
        let (_, across) = cross.iter().find(|(r, _)| r == "v20").expect("the call");
        for kept in ["v1", "v10", "v2"] {
            assert!(!across.contains(&kept.to_string()), "{kept} in {across:?}");
        }
        for split in ["v0", "v3", "v4", "v5"] {
            assert!(
                across.contains(&split.to_string()),
                "{split} not in {across:?}"
            );
        }
    }

    #[test]
    fn integers_are_split_only_under_pressure() {
        // Five integers live across `exp` (x, 0, len x, the counter and one
        // parameter) fit in the callee-saved registers, and the loops have
        // registers to spare: nothing is split.
        let few = pressure(1);
        assert!(
            few.cross.values().all(Vec::is_empty) && few.park.values().all(Vec::is_empty),
            "{:?} {:?}",
            few.cross,
            few.park
        );
        // Twelve do not: they are split around `exp` and parked on the
        // inner loop's entry; every block entry has each in a register or
        // in its slot, and the inner loop finds them in their slots.
        let many = pressure(12);
        let across = many
            .cross
            .values()
            .find(|l| !l.is_empty())
            .expect("a call")
            .len();
        assert!(across >= 12, "{across}");
        let parked = many.park.values().map(Vec::len).sum::<usize>();
        assert!(parked >= 12, "{parked}");
        let lost: Vec<_> = many
            .entry
            .iter()
            .flat_map(|(b, l)| l.iter().map(move |e| (b, *e)))
            .filter(|&(_, (_, reg, slot))| !reg && !slot)
            .collect();
        assert!(
            lost.is_empty(),
            "{lost:?} {:?} {:?}",
            many.store_at_end,
            many.park
        );
    }
}
