//! First touches: a load in a loop that reads an element no iteration has
//! written yet reads what the array was filled with.
//!
//! ```text
//! block0(v0: arr, v1: arr):               ; v1 is 0.0 everywhere on entry
//!     ..                                  ; nothing writes v1
//! block3(v9: i64):                        ; counts down: v9 - 1 on the back edge
//!     brif (icmp eq v9, 0), block9, block4
//! block4:
//!     v10 = isub v9, 1
//!     v11 = load v1, v10      ; first touch of element v9 - 1: 0.0
//!     v12 = fadd v11, v8                  v12 = fadd v20, v8   ; v20 = fconst 0.0
//!     store v1, v10, v12
//!     jump block3(v10)
//! ```
//!
//! Reverse mode makes this shape in every adjoint of a loop that reads an
//! array: `x.d[i] += ..` once per element, into a shadow the caller filled
//! with zeros right before (`fill(dx, 0.0); autodiff(reverse, ..)`). Each
//! load of the shadow reads memory that holds the fill's value, and the
//! loop's speed is bounded by memory traffic (docs/performance.md, session
//! 22: the seed's adjoint, 374 → 321 µs in a scratch program without the
//! load).
//!
//! **When.** In a loop (innermost, outside rule regions, one latch, entered
//! from one preheader by a `jump`) whose header parameter `i` is `i + s` on
//! every edge back to the header, `s` = 1 or -1:
//! - a `load a, i + k` (any constant `k`) that the bounds analysis proves in
//!   bounds (`adze_ir::bounds::safe_accesses`: removing it removes no trap);
//! - `a` is *uniform* where the loop is entered: every path from the
//!   function's entry to the end of the preheader passes a `fill a, x` (the
//!   same one), or starts at an entry where the caller filled `a` (below),
//!   and nothing on such a path after it may write an array that may alias
//!   `a` (a `store`, `fill` or call that may write it; any `autodiff`);
//! - every instruction of the loop that may write an array that may alias
//!   `a` is a `store a, i + d` (`a` itself) with `s·(d - k) <= 0`: an
//!   earlier iteration `t' < t` writes `i_t' + d = i_t + k` only if
//!   `s·(t - t') = d - k`, impossible when `s·(d - k) <= 0`; and when `d =
//!   k` (the same element in the same iteration) the load dominates the
//!   store, so it runs first.
//!
//! Then the element the load reads holds the fill's value `x` (the step is
//! ±1 and the index in bounds, so no two iterations name one element), and
//! the load's uses read `x`. **Exact:** the same bits (a `fill` stores
//! them, a `load` returns them), no trap removed, no effect moved.
//!
//! **Anywhere.** A load proven in bounds, at any index and in any block,
//! of an array uniform at the load (the same walk, from the load) reads
//! the fill too: the array is not written after its fill at all (kmeans'
//! tangent `ones`, read at `j * d + l`).
//!
//! **Callers' fills** ([`specialize_filled_calls`]). The fill is usually in
//! the caller and the loop in the adjoint it calls. Where a call passes an
//! array to a parameter the callee writes or reads and the array is
//! uniform (as above) with an `fconst` at the call, the call is redirected
//! to a copy of the callee (`f.filled1`, one per callee, parameters, values
//! and whether each is *alone*: apart from every other array the call
//! passes, which a write through another parameter of the copy then cannot
//! reach) whose entry knows it; the copy is then optimized like any
//! function, and its own calls are specialized in turn. The caller keeps
//! its `fill`. A load in one of the copy's rule regions keeps its load
//! (the constant would be placed outside the region).

use crate::analysis::{fconst_of, Cfg, Replacements, Scopes};
use crate::copy::entered_once;
use crate::mem::{may_alias, Callees};
use adze_ir::bounds::{offset_form, safe_accesses};
use adze_ir::{Block, FuncId, Function, Inst, InstData, Module, Opcode, Type, Value};
use std::collections::{HashMap, HashSet};

/// Loops larger than this (in instructions) are left alone.
const MAX_LOOP_INSTS: usize = 400;

/// Functions above this many instructions are left alone (the walks are
/// per loaded array).
const MAX_FUNCTION_INSTS: usize = 20_000;

/// Blocks a backward walk visits before it gives up.
const MAX_WALK: usize = 4096;

/// Every element of the array passed as parameter `param` holds the f64
/// with bits `bits` when the function is entered; `alone`: no other
/// parameter's array shares an element with it (the caller passed arrays
/// it knows apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryFill {
    pub param: usize,
    pub bits: u64,
    pub alone: bool,
}

/// What every element of an array holds at a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Uniform {
    /// The value a `fill` stored.
    Value(Value),
    /// The constant the caller filled it with.
    Bits(u64),
}

/// May `a` and `b` share an element, knowing what the entry knows: a
/// parameter passed `alone` shares none with another parameter's array.
fn may_alias_here(func: &Function, entry: &[EntryFill], a: Value, b: Value) -> bool {
    if !may_alias(func, a, b) {
        return false;
    }
    let (ra, rb) = (func.array_root(a), func.array_root(b));
    let params = func.params();
    let alone = |r: Value| {
        entry
            .iter()
            .any(|e| e.alone && params.get(e.param) == Some(&r))
    };
    let param = |r: Value| params.contains(&r);
    !(ra != rb && param(ra) && param(rb) && (alone(ra) || alone(rb)))
}

/// May `inst` write an element of an array that may alias `a`? (`fill a`
/// itself counts: the walks look for it first.)
fn may_write(
    func: &Function,
    callees: &Callees,
    entry: &[EntryFill],
    inst: Inst,
    a: Value,
) -> bool {
    let data = func.dfg.inst(inst);
    let hits =
        |v: Value| func.dfg.value_type(v) == Type::Array && may_alias_here(func, entry, v, a);
    match data {
        InstData::Binary {
            op: Opcode::Fill, ..
        }
        | InstData::Ternary {
            op: Opcode::Store | Opcode::Vstore,
            ..
        } => hits(data.args()[0]),
        InstData::Call { func: callee, args } => match callees.writes(*callee) {
            Some(w) => args.iter().zip(w).any(|(&v, &writes)| writes && hits(v)),
            None => args.iter().any(|&v| hits(v)),
        },
        InstData::Autodiff { .. } => true,
        _ => false,
    }
}

/// What every element of `a` holds just before instruction `at` of block
/// `block` (`None`: at the block's end), if the walk back to a `fill a` on
/// every path finds one and nothing that may write `a` after it (see the
/// module documentation); `entry` says what the caller filled.
fn uniform_at(
    func: &Function,
    cfg: &Cfg,
    callees: &Callees,
    entry: &[EntryFill],
    a: Value,
    block: Block,
    at: Option<Inst>,
) -> Option<Uniform> {
    let entry_block = func.entry_block()?;
    let on_entry = func
        .params()
        .iter()
        .position(|&p| p == a)
        .and_then(|k| entry.iter().find(|e| e.param == k))
        .map(|e| Uniform::Bits(e.bits));
    let mut found: Option<Uniform> = None;
    let mut agree = |u: Uniform| -> bool {
        match found {
            None => {
                found = Some(u);
                true
            }
            Some(f) => f == u,
        }
    };
    // Scans `b` backwards from `from` (`None`: its end): `Some(true)` when
    // a fill of `a` ends this path, `Some(false)` when something may write
    // `a`, `None` when the top is reached.
    let scan = |b: Block, from: Option<Inst>, agree: &mut dyn FnMut(Uniform) -> bool| {
        let insts = func.layout.block_insts(b);
        let end = match from {
            Some(i) => insts.iter().position(|&x| x == i)?,
            None => insts.len(),
        };
        for &inst in insts[..end].iter().rev() {
            if let InstData::Binary {
                op: Opcode::Fill,
                args: [arr, x],
            } = func.dfg.inst(inst)
            {
                if *arr == a {
                    return Some(agree(Uniform::Value(*x)));
                }
            }
            if may_write(func, callees, entry, inst, a) {
                return Some(false);
            }
        }
        None
    };
    let mut work: Vec<Block> = Vec::new();
    let mut seen: HashSet<Block> = HashSet::new();
    match scan(block, at, &mut agree) {
        Some(ok) => return ok.then_some(found?),
        None => {
            if block == entry_block {
                return on_entry;
            }
            work.extend(cfg.preds(block));
        }
    }
    while let Some(b) = work.pop() {
        if !seen.insert(b) {
            continue;
        }
        if seen.len() > MAX_WALK {
            return None;
        }
        match scan(b, None, &mut agree) {
            Some(true) => {}
            Some(false) => return None,
            None => {
                if b == entry_block && !agree(on_entry?) {
                    return None;
                }
                work.extend(cfg.preds(b));
            }
        }
    }
    found
}

/// Can [`uniform_at`] find anything in `func`: has it a `fill`, or does
/// its entry know one (`entry`)? Without, the analyses are not run.
fn knows_a_fill(func: &Function, entry: &[EntryFill]) -> bool {
    !entry.is_empty()
        || (func.layout.insts()).any(|(_, i)| func.dfg.inst(i).opcode() == Opcode::Fill)
}

/// The header parameters `i` of a loop with their step `s` (±1): every
/// edge from the latch to the header passes `i + s` (a `brif` with both
/// edges to the header counts twice: one that passes `i` would let an
/// iteration read what the one before wrote).
fn counters(func: &Function, header: Block, latch: Block) -> Vec<(Value, i64)> {
    let Some(last) = func.layout.last_inst(latch) else {
        return Vec::new();
    };
    let params = func.dfg.block_params(header);
    let data = func.dfg.inst(last);
    let edges: Vec<_> = data
        .destinations()
        .into_iter()
        .filter(|d| d.block == header)
        .collect();
    if edges.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (k, &p) in params.iter().enumerate() {
        if func.dfg.value_type(p) != Type::I64 {
            continue;
        }
        let steps: Vec<Option<i64>> = edges
            .iter()
            .map(|d| match offset_form(func, *d.args.get(k)?) {
                (x, s @ (1 | -1)) if x == p => Some(s),
                _ => None,
            })
            .collect();
        if let Some(Some(s)) = steps.first() {
            if steps.iter().all(|&t| t == Some(*s)) {
                out.push((p, *s));
            }
        }
    }
    out
}

/// Replaces the first-touch loads of `func` (see the module documentation)
/// by the value the array was filled with; `entry` says what the caller
/// filled. Returns how many.
pub fn first_touch(func: &mut Function, callees: &Callees, entry: &[EntryFill]) -> usize {
    if func.num_placed_insts() > MAX_FUNCTION_INSTS
        || func.entry_block().is_none()
        || !knows_a_fill(func, entry)
    {
        return 0;
    }
    let cfg = Cfg::new(func);
    let doms = cfg.dominators();
    let scopes = Scopes::new(func);
    let safe = safe_accesses(func);
    // (load, its value, what it reads)
    let mut found: Vec<(Inst, Value, Uniform)> = Vec::new();
    for lp in cfg.innermost_loops(&doms) {
        let Some((latch, preheader)) =
            entered_once(func, &cfg, &scopes, lp.header, &lp.blocks, MAX_LOOP_INSTS)
        else {
            continue;
        };
        for (iv, step) in counters(func, lp.header, latch) {
            // The loads at `iv + k`, by array.
            let mut loads: HashMap<Value, Vec<(Inst, Block, i64)>> = HashMap::new();
            for &b in &lp.blocks {
                for &inst in func.layout.block_insts(b) {
                    if let InstData::Binary {
                        op: Opcode::Load,
                        args: [a, idx],
                    } = func.dfg.inst(inst)
                    {
                        match offset_form(func, *idx) {
                            (x, k) if x == iv && safe.contains(inst) => {
                                loads.entry(*a).or_default().push((inst, b, k))
                            }
                            _ => {}
                        }
                    }
                }
            }
            let mut arrays: Vec<Value> = loads.keys().copied().collect();
            arrays.sort_unstable();
            'array: for a in arrays {
                // The loop's writes that may reach `a`: stores to `a` at
                // `iv + d`, or nothing of this array is touched first.
                let mut stores: Vec<(Inst, Block, i64)> = Vec::new();
                for &b in &lp.blocks {
                    for &inst in func.layout.block_insts(b) {
                        if !may_write(func, callees, entry, inst, a) {
                            continue;
                        }
                        match func.dfg.inst(inst) {
                            InstData::Ternary {
                                op: Opcode::Store,
                                args: [arr, idx, _],
                            } if *arr == a => match offset_form(func, *idx) {
                                (x, d) if x == iv => stores.push((inst, b, d)),
                                _ => continue 'array,
                            },
                            _ => continue 'array,
                        }
                    }
                }
                let Some(u) = uniform_at(func, &cfg, callees, entry, a, preheader, None) else {
                    continue;
                };
                for &(load, lb, k) in &loads[&a] {
                    let first = stores.iter().all(|&(st, sb, d)| {
                        let ahead = step * (d - k);
                        ahead < 0
                            || ahead == 0
                                && if sb == lb {
                                    let insts = func.layout.block_insts(lb);
                                    let pos = |i| insts.iter().position(|&x| x == i);
                                    pos(load) < pos(st)
                                } else {
                                    doms.dominates(lb, sb)
                                }
                    });
                    let v = func.dfg.first_result(load);
                    let allowed = match u {
                        Uniform::Value(x) => scopes.can_replace(func, v, x),
                        Uniform::Bits(_) => !scopes.is_pinned(v),
                    };
                    if first && allowed {
                        found.push((load, v, u));
                    }
                }
            }
        }
    }
    // Anywhere: a load of an array that nothing may write between the fill
    // and the load, on any path.
    let mut filled: HashSet<Value> = entry
        .iter()
        .filter_map(|e| func.params().get(e.param).copied())
        .collect();
    for (_, inst) in func.layout.insts() {
        if let InstData::Binary {
            op: Opcode::Fill,
            args: [a, _],
        } = func.dfg.inst(inst)
        {
            filled.insert(*a);
        }
    }
    let taken: HashSet<Inst> = found.iter().map(|&(load, _, _)| load).collect();
    for (block, inst) in func.layout.insts() {
        let InstData::Binary {
            op: Opcode::Load,
            args: [a, _],
        } = func.dfg.inst(inst)
        else {
            continue;
        };
        if !filled.contains(a) || !safe.contains(inst) || taken.contains(&inst) {
            continue;
        }
        let Some(u) = uniform_at(func, &cfg, callees, entry, *a, block, Some(inst)) else {
            continue;
        };
        let v = func.dfg.first_result(inst);
        // The caller's constant is placed in the entry block: not for a
        // load in a rule region, whose body computes from its arguments
        // only (found in the review of session 25).
        let allowed = match u {
            Uniform::Value(x) => scopes.can_replace(func, v, x),
            Uniform::Bits(_) => !scopes.is_pinned(v) && scopes.block_scope(block).is_none(),
        };
        if allowed {
            found.push((inst, v, u));
        }
    }
    if found.is_empty() {
        return 0;
    }
    let mut reps = Replacements::new(func);
    let mut consts: HashMap<u64, Value> = HashMap::new();
    let entry_block = func.entry_block().expect("checked above");
    for &(load, v, u) in &found {
        let x = match u {
            Uniform::Value(x) => x,
            Uniform::Bits(bits) => *consts.entry(bits).or_insert_with(|| {
                let inst = func.dfg.make_inst(InstData::FConst { bits }, &[Type::F64]);
                func.layout.insert_inst(inst, entry_block, 0);
                func.dfg.first_result(inst)
            }),
        };
        reps.replace(v, x);
        func.layout.remove_inst(load);
    }
    reps.apply(func);
    found.len()
}

/// Does `func` read its parameter `k`: a `load` of it, or a call it is
/// passed to? (A read-only array no load reads gains nothing from a copy.)
fn reads_param(func: &Function, k: usize) -> bool {
    let Some(&p) = func.params().get(k) else {
        return false;
    };
    func.layout.insts().any(|(_, i)| match func.dfg.inst(i) {
        InstData::Binary {
            op: Opcode::Load | Opcode::Vload,
            args: [a, _],
        } => *a == p,
        InstData::Call { args, .. } => args.contains(&p),
        _ => false,
    })
}

/// Redirects calls that pass an array filled with a constant to a
/// parameter the callee writes or reads to copies of their callees that
/// know it (see the module documentation), starting from the functions
/// `ids` and going on into the copies. Returns the copies made, each with
/// what its entry knows.
pub fn specialize_filled_calls(
    module: &mut Module,
    ids: &[FuncId],
) -> Vec<(FuncId, Vec<EntryFill>)> {
    let mut made: Vec<(FuncId, Vec<EntryFill>)> = Vec::new();
    let mut copies: HashMap<(FuncId, Vec<EntryFill>), FuncId> = HashMap::new();
    let mut work: Vec<(FuncId, Vec<EntryFill>)> = ids.iter().map(|&id| (id, Vec::new())).collect();
    let mut callees = Callees::of(module);
    while let Some((id, entry)) = work.pop() {
        if !module.is_valid(id) {
            continue;
        }
        let func = module.func(id);
        if func.is_declaration()
            || func.num_placed_insts() > MAX_FUNCTION_INSTS
            || !knows_a_fill(func, &entry)
        {
            continue;
        }
        let cfg = Cfg::new(func);
        let mut redirect: Vec<(Inst, FuncId, Vec<EntryFill>)> = Vec::new();
        for (block, inst) in func.layout.insts() {
            let InstData::Call { func: callee, args } = func.dfg.inst(inst) else {
                continue;
            };
            let Some(writes) = callees.writes(*callee) else {
                continue;
            };
            if module.func(*callee).is_declaration() {
                continue;
            }
            let mut fills: Vec<EntryFill> = Vec::new();
            for (k, (&a, &w)) in args.iter().zip(writes).enumerate() {
                if func.dfg.value_type(a) != Type::Array {
                    continue;
                }
                let u = uniform_at(func, &cfg, &callees, &entry, a, block, Some(inst));
                let bits = match u {
                    Some(Uniform::Bits(bits)) => Some(bits),
                    Some(Uniform::Value(x)) => fconst_of(func, x),
                    None => None,
                };
                if let Some(bits) = bits.filter(|_| w || reads_param(module.func(*callee), k)) {
                    // Apart from every other array the call passes.
                    let alone = args.iter().enumerate().all(|(j, &b)| {
                        j == k
                            || func.dfg.value_type(b) != Type::Array
                            || !may_alias_here(func, &entry, a, b)
                    });
                    fills.push(EntryFill {
                        param: k,
                        bits,
                        alone,
                    });
                }
            }
            if !fills.is_empty() {
                redirect.push((inst, *callee, fills));
            }
        }
        for (inst, callee, fills) in redirect {
            let key = (callee, fills.clone());
            let copy = match copies.get(&key) {
                Some(&c) => c,
                None => {
                    let mut f = module.func(callee).clone();
                    let base = format!(
                        "{}.filled{}",
                        f.name,
                        fills
                            .iter()
                            .map(|e| e.param.to_string())
                            .collect::<Vec<_>>()
                            .join("_")
                    );
                    let mut name = base.clone();
                    let mut n = 1;
                    while module.get(&name).is_some() {
                        n += 1;
                        name = format!("{base}.{n}");
                    }
                    // Its errors name the original, as when it runs.
                    f.reports_as = Some(f.error_name().to_string());
                    f.name = name;
                    let Ok(c) = module.push(f) else { continue };
                    callees = Callees::of(module);
                    copies.insert(key, c);
                    made.push((c, fills.clone()));
                    work.push((c, fills.clone()));
                    c
                }
            };
            if let InstData::Call { func, .. } = module.func_mut(id).dfg.inst_mut(inst) {
                *func = copy;
            }
        }
    }
    made
}
