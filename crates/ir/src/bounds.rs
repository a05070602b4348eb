//! Array accesses that the bounds of a counted loop prove in bounds.
//!
//! The JIT compiles these without their bounds check, and the optimizer may
//! remove such a `load` when its result is unused (it cannot trap). One
//! analysis for both: [`safe_accesses`].
//!
//! The front end lowers `for i in lo..hi` to the canonical shape of
//! docs/language.md ("Lowering"): a header `H(i, ..)` ending in
//! `brif (icmp lt i, hi), T, E`, entered with `lo` and re-entered from the
//! latch with `iadd i, 1`. In every block dominated by `T` (the body, when
//! `T`'s only predecessor is `H`), `i < hi` holds for the current value of
//! `i`; if moreover every value `H` receives for `i` is either a constant
//! `>= 0` or a `len`, or `i + 1` computed in a block dominated by `T` (where
//! `i < hi <= i64::MAX`, so no overflow), then `0 <= i` as well. An entry
//! value may also be `j` or `j + 1` for an induction variable `j` of an
//! enclosing loop, read where `j`'s body dominates (so `0 <= j < hi_j`, and
//! `j + 1` does not wrap): the `for j in i + 1..n` of a triangular nest.
//!
//! An access `a[i + c]` (`c >= 0` a constant; `c = 0` for `a[i]`) in such a
//! block cannot be out of bounds when `hi + c <= len(a)` is evident from the
//! IR. Write `hi` as `base + k` (`k` a constant: `iadd` of a constant, or
//! `isub` of one; `k = 0` otherwise); then the access is proven when
//! `k + c <= 0` and `base` is the length of `a`:
//!
//! - `base` is `len b` where `b` is `a`, or
//! - `base` is `n` where `b = zeros n`,
//!
//! and `b` is `a` or has the same length as `a` by `samelen` instructions
//! that dominate the access (`samelen a, b` traps unless the lengths are
//! equal, and array lengths never change, so after it they are equal for
//! the rest of the call; a chain `samelen a, c`, `samelen c, b` relates `a`
//! and `b` too). `base + k` cannot wrap: `base >= 0` and `k <= -c <= 0`.
//!
//! **Unrolled loops.** `adze_opt`'s `unroll` copies a loop's header and
//! body once: the header `H(i)` is re-entered from the copy's latch with
//! `i' + 1`, and the copy's header `H'(i')` is entered from the loop's
//! latch with `i + 1`. Each counter's entry values are then another
//! counter's successor, so the counters are found together: the greatest
//! set of candidate headers in which every entry value is a constant `>=
//! 0`, a length, the counter itself (or `+ 1`) from its own body, or `j`
//! or `j + 1` for a counter `j` of the set read where `j`'s body dominates
//! (so `0 <= j < hi_j`), or `j + 2` when `hi_j` is `n + k` with `k <= -1`
//! and `n >= 0` known (a length, a `zeros` length, a guard's fact: an
//! unrolled two-lane loop, where `j + 2` cannot wrap); and each one's
//! least entry value is the least of
//! those (`j`'s plus one), found by relaxation. By induction over the
//! order of assignments, each counter of the set holds a value `>=` its
//! least entry at every header test.
//!
//! **Below the start** ([`safe_accesses_below_start`], the JIT's): an
//! access `a[i - c]` (`c > 0`) when every entry value of the loop is a
//! constant `>= c` (a length or an outer induction variable counts as
//! `0`): `i` only grows from its entries, so `0 <= i - c`, and `i - c < i
//! < hi`, with the same `hi + (-c) <= len(a)` condition and `k <= 0`. The
//! optimizer and reverse mode keep [`safe_accesses`]: reverse mode's tape
//! plan reloads a proven loop-invariant load after its loop instead of
//! taping it every iteration, so what it proves shapes the tapes.
//!
//! Why "the current value" is sound: `hi`, `b` and `n` are defined in
//! blocks that strictly dominate `H`, so none of them is redefined between
//! the last execution of `H` and the access without `H` running again; and
//! a path from `H` to the access that leaves through `E` would, prefixed by
//! a path from the entry to `H` that avoids `T`, reach the access without
//! passing `T`, contradicting dominance.
//!
//! **Count-down loops.** Reverse mode runs a loop backwards from a trip
//! count popped from the tape: a header `H(c, ..)` ending in `brif (icmp eq
//! c, 0), E, T` (`T`'s only predecessor `H`), re-entered from blocks
//! dominated by `T` with `c - 1` (`isub c, 1`), and indices `c - 1` or
//! `base + (c - 1)` (or what the optimizer's GVN folds them to: `c + m`,
//! read as `(m + 1) + (c - 1)`, [`count_down_index`]). Nothing relates
//! such a count to an array's length, so
//! the optimizer's `version` pass puts a copy of the loop behind a guard,
//! and this analysis proves the copy's accesses from it. The rule: `H` has
//! one other entry edge, passing `c0`, from a block `P` whose only
//! predecessor `G` ends in `brif ok, P, _` (`P` on the true side), and
//! `ok` is a conjunction (`select p, q, false`, nested either way) of
//! `icmp`s among which are `c0 >= 0` and, for an access `a[c - 1]`, `c0 <=
//! L`, for `a[base + (c - 1)]`, `base >= 0` (unless `base` is a constant
//! `>= 0`) and `c0 <= L - base` (`isub L, base`), where `L` is a length of
//! `a` (`len b` or the `n` of `b = zeros n`, `b` of `a`'s length class at
//! the access), and `base` and `L` are defined in blocks that strictly
//! dominate `H` (a constant `base` may be another `iconst` of the same
//! value). Why it holds: `ok` was true on the way from `G` to `P` to `H`
//! (`G` is `P`'s only predecessor and `P` runs nothing that redefines the
//! guard's operands, which dominate `G`); every later entry to `H` is a back
//! edge, or comes through `G` again. At each entry `0 <= c <= c0`: true for
//! `c0`, and a back edge passes `c - 1` from a block dominated by `T`, where
//! `c != 0`, so `1 <= c` and `c - 1` does not wrap. So in blocks dominated
//! by `T`, `0 <= c - 1 <= c0 - 1`, and the index is in `base ..= base + c0 -
//! 1`, within `0 .. L` (`L - base` cannot wrap once `base >= 0`, `L >= 0`);
//! `base` and `L` are the values the guard compared, since their
//! definitions strictly dominate `H` and so are not re-run inside the loop.
//!
//! **Guarded count-up loops** ([`guard_facts`], `up_guard_proves`). An
//! access `a[base + (i + c)]` (`up_index`) of a counting loop whose counter
//! `i >= lo >= 0` runs below `hi = x + k` (any constant `k`; `x >= 0`
//! known when `k < 0`), where a guard whose
//! true side dominates the loop's header says `x <= (L - base) - c0` with
//! `k + c + width - 1 <= c0`, `base >= 0` and `base <= L` (`L` a length of
//! `a`'s class): every index lies in `base + c + lo ..= L - 1`, and `x + k
//! <= L` does not wrap. The guard
//! is the one `adze_opt`'s `vectorize` puts before a count-up loop's lanes
//! (kmeans' rows `points[i * d + l]`, GMM's triangle `for col in 0..row +
//! 1`), and its `x >= 0` lets the lanes' counter step by 2.
//!
//! **Rows of an enclosing loop** (the JIT's analysis only, session 22).
//! The guard may instead speak of an enclosing counter `j` (`0 <= j <
//! hi_j` where its body dominates, `hi_j` defined before its loop): when
//! the inner bound's base `x` is `j`, a fact `hi_j <= lim` bounds `x <=
//! hi_j - 1` (one more element of room than `x <= lim`); and a base `j *
//! s` (`row_major`) is proven from `s >= 0`, `s, hi_j <= 2^31`, `hi_j *
//! s <= L` and the row's extent within `s`. `vectorize` writes such atoms,
//! which do not change with `j`, so that `licm` lifts them out of `j`'s
//! loop. A counter's value is also `>= lo` where only its header dominates
//! (the lanes' exit, which enters their loop's last iteration), and a
//! block parameter every edge of which passes such a counter or a constant
//! `>= 0` is an entry of the least of those.
//!
//! Every other access may be out of bounds (as far as this analysis knows):
//! the JIT keeps its check, so errors are exactly the interpreter's.

use crate::cfg::{reverse_postorder, DominatorTree};
use crate::entities::{Block, Inst, Value};
use crate::function::Function;
use crate::instructions::{CmpCond, InstData, Opcode};
use cranelift_entity::EntitySet;
use std::collections::{HashMap, HashSet};

/// A counter (induction variable) `i` of a counted loop: `0 <= lo <= i <
/// hi` in every block dominated by `body`, `hi` defined in a block that
/// strictly dominates `header`. `vectorize` reads the JIT's
/// ([`counters_below_start`]) to write a guard the JIT reads back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    /// The bound of `icmp lt i, hi`.
    pub hi: Value,
    /// The loop's header, whose parameter the counter is.
    pub header: Block,
    /// The header's true side.
    pub body: Block,
    /// `lo <= i` too: the least value the loop is entered with (a
    /// constant; 0 for a length or an outer counter).
    pub lo: i64,
}

/// A count-down loop behind a guard (see the module documentation,
/// "Count-down loops"): in every block dominated by `body`, the header's
/// parameter `c` satisfies `1 <= c <= c0`, and every atom of the guard holds.
struct CountDown {
    header: Block,
    c: Value,
    body: Block,
    c0: Value,
    /// 1, or 2 for a two-lane loop (`brif (icmp gt c, 1), body, exit`,
    /// back edges `c - 2`): `step <= c` in the body.
    step: i64,
    /// `icmp` atoms of the guard: (condition, left, right).
    facts: Vec<(CmpCond, Value, Value)>,
}

fn inst_of(func: &Function, v: Value) -> Option<&InstData> {
    func.def_inst(v)
}

fn const_of(func: &Function, v: Value) -> Option<i64> {
    func.iconst_value(v)
}

/// `(x, c)` when `v` is `x + c` for a constant `c` (`iadd` either way
/// round, or `isub` of a constant), or `(v, 0)`.
pub fn offset_form(func: &Function, v: Value) -> (Value, i64) {
    if let Some(InstData::Binary { op, args }) = inst_of(func, v) {
        match op {
            Opcode::Iadd => {
                if let Some(c) = const_of(func, args[1]) {
                    return (args[0], c);
                }
                if let Some(c) = const_of(func, args[0]) {
                    return (args[1], c);
                }
            }
            Opcode::Isub => {
                if let Some(c) = const_of(func, args[1]).and_then(i64::checked_neg) {
                    return (args[0], c);
                }
            }
            _ => {}
        }
    }
    (v, 0)
}

/// May a counter below `hi` step by 2 without wrapping? When `hi` is
/// `base + k` with `k <= -1` (a two-lane loop's bound, `vectorize`) and
/// `base >= 0` (`nonneg`): then `i < hi <= i64::MAX - 1`, so `i + 2 <=
/// i64::MAX`. Or, for `k >= 0`, when a guard's atom (`facts`) says `base
/// <= w - c0` with `c0 >= k + 1` and `w` a length `L`, or `L - b` with `0
/// <= b <= L` (the lanes' guard of `for col in 0..row + 1`, whose lanes'
/// bound is `row + 0`): then `hi <= w - 1 <= i64::MAX - 1`, and `w - c0`
/// did not wrap (`w >= 0`). Not for `k < 0` without `base >= 0`: `base +
/// k` wraps to a large bound when `base` is near `i64::MIN` (the review of
/// session 19: a user's `while j < n - 1 { .. j = j + 2 }` under `if n <=
/// len(a)` at `n = i64::MIN`). Or when `base` is a counter of an enclosing
/// loop (`counter`, [`safe_accesses_below_start`] only) and `k <= 0`: the
/// lanes of `for col in 0..row + 1` under a guard hoisted out of the rows.
fn two_steps(
    func: &Function,
    hi: Value,
    nonneg: impl Fn(Value) -> bool,
    counter: impl Fn(Value) -> bool,
    facts: &[(CmpCond, Value, Value)],
) -> bool {
    let (base, k) = offset_form(func, hi);
    if k <= -1 && nonneg(base) {
        return true;
    }
    // `base` an outer counter (`0 <= base < hi_j <= i64::MAX`): `base + k
    // <= i64::MAX - 1` for `k <= 0`, and it does not wrap.
    if k <= 0 && counter(base) {
        return true;
    }
    if k < 0 {
        return false;
    }
    let Some(need) = k.checked_add(1) else {
        return false;
    };
    let is_len = |w: Value| len_of(func, w).is_some();
    let below_length = |w: Value| {
        is_len(w)
            || matches!(inst_of(func, w), Some(&InstData::Binary {
                op: Opcode::Isub,
                args: [l, b],
            }) if is_len(l)
                && nonneg_fact(func, facts, b)
                && facts.iter().any(|&(cc, x, y)| cc == CmpCond::Le && x == b && y == l))
    };
    facts.iter().any(|&(cc, a, lim)| {
        let (w, off) = offset_form(func, lim);
        cc == CmpCond::Le
            && a == base
            && off.checked_neg().is_some_and(|c0| c0 >= need)
            && below_length(w)
    })
}

/// The lengths of `func`'s `zeros` and `izeros`, with their blocks: after
/// one of them has run, its length is `>= 0` (a negative one traps).
pub fn zeros_lengths(func: &Function) -> Vec<(Value, Block)> {
    let mut lens = Vec::new();
    for &b in func.layout.blocks() {
        for &i in func.layout.block_insts(b) {
            if let InstData::Zeros { len, .. } = *func.dfg.inst(i) {
                lens.push((len, b));
            }
        }
    }
    lens
}

/// Is `n` the length of one of `lens` (`zeros_lengths`) in a block that
/// strictly dominates `at` (so `n >= 0` there)?
pub fn zeros_before(lens: &[(Value, Block)], doms: &DominatorTree, n: Value, at: Block) -> bool {
    lens.iter()
        .any(|&(len, b)| len == n && b != at && doms.dominates(b, at))
}

/// `a` when `v` is `len a`.
fn len_of(func: &Function, v: Value) -> Option<Value> {
    match inst_of(func, v)? {
        InstData::Unary {
            op: Opcode::Len | Opcode::Ilen,
            arg,
        } => Some(*arg),
        _ => None,
    }
}

/// `(array, index, width)` of a bounds-checked access of elements `index
/// .. index + width`: `load`, `store`, their i64-array forms `iload`,
/// `istore` (width 1), and the two-lane `vload`, `vstore` (width 2).
fn indexed(data: &InstData) -> Option<(Value, Value, i64)> {
    match *data {
        InstData::Binary {
            op: Opcode::Iload,
            args: [a, i],
        }
        | InstData::Ternary {
            op: Opcode::Istore,
            args: [a, i, _],
        } => Some((a, i, 1)),
        InstData::Binary {
            op: Opcode::Vload,
            args: [a, i],
        }
        | InstData::Ternary {
            op: Opcode::Vstore,
            args: [a, i, _],
        } => Some((a, i, 2)),
        _ => data.array_access().map(|(a, i)| (a, i, 1)),
    }
}

/// Is `arr` an array whose length is the value `n`: `arr = zeros n`?
fn is_zeros_of(func: &Function, arr: Value, n: Value) -> bool {
    matches!(inst_of(func, arr), Some(InstData::Zeros { len, .. }) if *len == n)
}

/// The branch destinations of `block`'s terminator, with their arguments.
fn dests(func: &Function, block: Block) -> Vec<(Block, &[Value])> {
    func.layout
        .last_inst(block)
        .map(|i| {
            func.dfg
                .inst(i)
                .destinations()
                .into_iter()
                .map(|d| (d.block, d.args.as_slice()))
                .collect()
        })
        .unwrap_or_default()
}

/// The `load` and `store` instructions of `func`, in the blocks reachable
/// from the entry, whose index is provably in bounds by the counted loop
/// that contains them (see the module documentation).
pub fn safe_accesses(func: &Function) -> EntitySet<Inst> {
    proven_accesses(func, false)
}

/// [`safe_accesses`], and also the accesses `a[i - c]` (`c > 0` a
/// constant) in the body of a counted loop that every entry starts at `c`
/// or above (`for i in 1..n { .. a[i - 1] .. }`): `i >= lo` at the header
/// (each entry passes a constant `>= lo`, a length or an outer induction
/// variable, both `>= 0 = lo` then, and the back edge `i` or `i + 1`), so
/// `0 <= i - c` when `c <= lo`, and `i - c < i < hi`.
///
/// The JIT drops these checks; the optimizer and the AD passes use
/// [`safe_accesses`], whose answer shapes reverse mode's tapes (a proven
/// loop-invariant load is reloaded after its loop, not taped every
/// iteration), and so, at higher order, bits under inlining.
pub fn safe_accesses_below_start(func: &Function) -> EntitySet<Inst> {
    proven_accesses(func, true)
}

fn proven_accesses(func: &Function, below_start: bool) -> EntitySet<Inst> {
    analyse(func, below_start).0
}

/// [`safe_accesses_below_start`], and the counters of `func`'s counted
/// loops it found: `vectorize` asks which values are outer counters, as
/// the JIT will, to write a guard the JIT reads back.
pub fn counters_below_start(func: &Function) -> (EntitySet<Inst>, HashMap<Value, Counter>) {
    analyse(func, true)
}

fn analyse(func: &Function, below_start: bool) -> (EntitySet<Inst>, HashMap<Value, Counter>) {
    let mut safe = EntitySet::new();
    let Some(entry) = func.entry_block() else {
        return (safe, HashMap::new());
    };
    let order = reverse_postorder(func, entry);
    let mut preds: HashMap<Block, Vec<Block>> = HashMap::new();
    let mut edges: HashMap<Block, Vec<(Block, &[Value])>> = HashMap::new();
    for &b in &order {
        for (d, args) in dests(func, b) {
            preds.entry(d).or_default().push(b);
            edges.entry(d).or_default().push((b, args));
        }
    }
    let doms = DominatorTree::new(&order, |b| preds.get(&b).cloned().unwrap_or_default());
    let lens = zeros_lengths(func);
    let single_pred = |b: Block| match preds.get(&b).map(Vec::as_slice) {
        Some(&[p]) => Some(p),
        _ => None,
    };

    // Induction variables: the headers of the shape, then the greatest set
    // of them whose every entry value is accounted for (see "Unrolled
    // loops": a counter may be entered from another one of the set).
    let mut cands: Vec<(Value, usize, Value, Block, Block)> = Vec::new();
    for &h in &order {
        let Some(([i, hi], body, other)) = branch_on_icmp(func, h, CmpCond::Lt) else {
            continue;
        };
        let Some(k) = func.dfg.block_params(h).iter().position(|&p| p == i) else {
            continue;
        };
        if body == other
            || body == h
            || preds.get(&body).map(Vec::as_slice) != Some(&[h][..])
            || func
                .def_block(hi)
                .is_none_or(|d| d == h || !doms.dominates(d, h))
        {
            continue;
        }
        cands.push((i, k, hi, body, h));
    }
    // The guards above each candidate's header and above the blocks that
    // enter it (`guard_facts`; an entry `x + 1`, below).
    let mut facts: HashMap<Block, Vec<(CmpCond, Value, Value)>> = HashMap::new();
    for &(.., h) in &cands {
        let froms = edges.get(&h).into_iter().flatten().map(|&(from, _)| from);
        for b in std::iter::once(h).chain(froms) {
            facts
                .entry(b)
                .or_insert_with(|| guard_facts(func, &doms, b, single_pred));
        }
    }
    let no_facts = Vec::new();
    let facts_at = |h: Block| facts.get(&h).unwrap_or(&no_facts);
    // Is `n >= 0` known in the loop headed by `h`: a length, the length of
    // a `zeros` that has run (a negative one traps), or a guard's fact?
    let nonneg_at = |n: Value, h: Block| {
        len_of(func, n).is_some()
            || zeros_before(&lens, &doms, n, h)
            || nonneg_fact(func, facts_at(h), n)
    };
    let mut ivs: HashMap<Value, Counter> = cands
        .iter()
        .map(|&(i, _, hi, body, header)| {
            (
                i,
                Counter {
                    hi,
                    header,
                    body,
                    lo: i64::MAX,
                },
            )
        })
        .collect();
    // Each round removes what the others no longer account for, or
    // lowers a least entry value; both only go down, so the rounds end
    // (a shortest-path relaxation between removals). Past the cap, which
    // no real loop nest reaches, nothing is proven.
    let cap = (cands.len() + 1) * (cands.len() + 1);
    let mut settled = false;
    for _ in 0..cap {
        let mut changed = false;
        for &(i, k, hi, body, h) in &cands {
            if !ivs.contains_key(&i) {
                continue;
            }
            // `v` is another counter of the set whose body dominates `at`
            // (`0 <= v < hi_v` there): what `two_steps` may assume of an
            // outer row counter (the JIT's analysis only).
            let counter_at = |v: Value, at: Block| {
                below_start && v != i && ivs.get(&v).is_some_and(|iv| doms.dominates(iv.body, at))
            };
            // `j` itself read where its header dominates, not its body (the
            // lanes leaving to their loop's last iteration): `j >= lo_j`
            // holds there too (the JIT's analysis only).
            let left = |x: Value, c: i64, at: Option<Block>| {
                below_start
                    && c == 0
                    && x != i
                    && ivs.contains_key(&x)
                    && at.is_some_and(|d| doms.dominates(ivs[&x].header, d))
            };
            // A block parameter every edge into whose block passes a
            // constant `>= 0` or a counter `left` accepts (the lanes'
            // exit after `unroll`, entered from both copies of their
            // header): the least of those.
            let merged = |a: Value, c: i64| -> Option<i64> {
                if !below_start || c != 0 {
                    return None;
                }
                let pb = func.def_block(a)?;
                let pos = func.dfg.block_params(pb).iter().position(|&q| q == a)?;
                let mut lo = i64::MAX;
                for &(from, args) in edges.get(&pb)? {
                    let v = *args.get(pos)?;
                    if let Some(k) = const_of(func, v).filter(|&k| k >= 0) {
                        lo = lo.min(k);
                    } else if left(v, 0, Some(from)) {
                        lo = lo.min(ivs[&v].lo);
                    } else {
                        return None;
                    }
                }
                (lo != i64::MAX).then_some(lo)
            };
            // `a` is >= 0 (and >= the returned least value): a constant, a
            // length, or `j` or `j + 1` for another induction variable `j`,
            // computed where `0 <= j < hi_j <= i64::MAX` (so `j + 1` does
            // not wrap): the `for j in i + 1..n` of a triangular loop nest,
            // and the counters of an unrolled loop; or `j + 2` where `j`
            // may step by 2 (`two_steps`: an unrolled two-lane loop).
            let entry_lo = |a: Value, from: Block| -> Option<i64> {
                if let Some(c) = const_of(func, a).filter(|&c| c >= 0) {
                    return Some(c);
                }
                // A length, or a start the lanes' guard tests `>= 0`
                // (`for j in d..m`).
                if len_of(func, a).is_some() || nonneg_fact(func, facts_at(h), a) {
                    return Some(0);
                }
                let (x, c) = offset_form(func, a);
                // Where `x` is read: at the branch for `j`, at the `iadd`
                // for `j + 1`.
                let at = if c == 0 {
                    Some(from)
                } else {
                    func.def_block(a)
                };
                if x == i {
                    return None;
                }
                // `x + 1` on an edge whose guards say `0 <= x <= y` with
                // `y <= i64::MAX - 1` (`two_steps`' test: `y = yb + yk`
                // with `yk <= -1` and `yb >= 0`, or a guard below a
                // length), so `x + 1` does not wrap: a loop's first
                // iteration run alone before its lanes (`vectorize`, an
                // odd start), which then start at `x + 1`.
                if c == 1 {
                    let ff = facts_at(from);
                    let nonneg =
                        |v: Value| const_of(func, v).is_some_and(|k| k >= 0) || nonneg_at(v, from);
                    let below_max = ff.iter().any(|&(cc, a, y)| {
                        cc == CmpCond::Le && a == x && two_steps(func, y, nonneg, |_| false, ff)
                    });
                    if nonneg(x) && below_max {
                        return Some(1);
                    }
                }
                if let Some(lo) = merged(a, c) {
                    return Some(lo);
                }
                let j = ivs.get(&x)?;
                let step = c == 0
                    || c == 1
                    || (c == 2
                        && two_steps(
                            func,
                            j.hi,
                            |n| nonneg_at(n, j.header),
                            |n| counter_at(n, j.header),
                            facts_at(j.header),
                        ));
                ((step && at.is_some_and(|d| doms.dominates(j.body, d))) || left(x, c, at))
                    .then(|| j.lo.saturating_add(c))
            };
            let mut lo = i64::MAX;
            let all_ok = edges.get(&h).is_some_and(|es| {
                es.iter().all(|(from, args)| {
                    let Some(&a) = args.get(k) else { return false };
                    if let Some(l) = entry_lo(a, *from) {
                        lo = lo.min(l);
                        return true;
                    }
                    let (x, c) = offset_form(func, a);
                    x == i
                        && (c == 0
                            || c == 1
                            || (c == 2
                                && two_steps(
                                    func,
                                    hi,
                                    |n| nonneg_at(n, h),
                                    |n| counter_at(n, h),
                                    facts_at(h),
                                )))
                        && doms.dominates(body, *from)
                })
            });
            if !all_ok {
                ivs.remove(&i);
                changed = true;
            } else if let Some(iv) = ivs.get_mut(&i) {
                if iv.lo != lo {
                    iv.lo = lo;
                    changed = true;
                }
            }
        }
        if !changed {
            settled = true;
            break;
        }
    }
    if !settled {
        ivs.clear();
    }
    for iv in ivs.values_mut() {
        // An entry edge always exists (the header is not the entry block);
        // without one, `lo` stays 0.
        iv.lo = if below_start && iv.lo != i64::MAX {
            iv.lo
        } else {
            0
        };
    }
    let countdowns = count_down_loops(func, &order, &preds, &edges, &doms);
    if ivs.is_empty() && countdowns.is_empty() {
        return (safe, ivs);
    }

    // Length equalities: the `samelen` instructions, with where they are.
    let mut samelens: Vec<(Block, usize, Value, Value)> = Vec::new();
    for &b in &order {
        for (pos, &inst) in func.layout.block_insts(b).iter().enumerate() {
            if let InstData::Binary {
                op: Opcode::SameLen,
                args: [x, y],
            } = *func.dfg.inst(inst)
            {
                samelens.push((b, pos, x, y));
            }
        }
    }
    // The arrays with `arr`'s length at position `pos` of block `b`: `arr`
    // and those related to it by dominating `samelen`s.
    let same_length_as = |arr: Value, b: Block, pos: usize| -> Vec<Value> {
        let known: Vec<(Value, Value)> = samelens
            .iter()
            .filter(|&&(d, p, _, _)| {
                if d == b {
                    p < pos
                } else {
                    doms.dominates(d, b)
                }
            })
            .map(|&(_, _, x, y)| (x, y))
            .collect();
        let mut class = vec![arr];
        let mut k = 0;
        while k < class.len() {
            let a = class[k];
            for &(x, y) in &known {
                for (p, q) in [(x, y), (y, x)] {
                    if p == a && !class.contains(&q) {
                        class.push(q);
                    }
                }
            }
            k += 1;
        }
        class
    };

    // Accesses in their bodies.
    for &b in &order {
        for (pos, &inst) in func.layout.block_insts(b).iter().enumerate() {
            let Some((arr, idx, width)) = indexed(func.dfg.inst(inst)) else {
                continue;
            };
            if countdowns.iter().any(|cd| {
                doms.dominates(cd.body, b)
                    && count_down_proves(func, &doms, cd, idx, width, &same_length_as(arr, b, pos))
            }) {
                safe.insert(inst);
                continue;
            }
            // A guarded count-up loop (`vectorize`'s lanes, or a user's
            // `if`): `base + (i + c)`, `i` the counter itself or an operand
            // of the `iadd`.
            let counters = {
                let (x, _) = offset_form(func, idx);
                let mut cs = vec![x];
                if let Some(&InstData::Binary {
                    op: Opcode::Iadd,
                    args: [p, q],
                }) = inst_of(func, x)
                {
                    cs.extend([offset_form(func, p).0, offset_form(func, q).0]);
                }
                cs
            };
            // An outer counter `j` at this access (the JIT's analysis only).
            let outer = |j: Value| {
                ivs.get(&j)
                    .filter(|iv| below_start && iv.lo >= 0 && doms.dominates(iv.body, b))
                    .copied()
            };
            let guarded = counters.into_iter().any(|i| {
                ivs.get(&i).is_some_and(|iv| {
                    doms.dominates(iv.body, b)
                        && !facts_at(iv.header).is_empty()
                        && up_guard_proves(
                            func,
                            &doms,
                            facts_at(iv.header),
                            i,
                            iv,
                            idx,
                            width,
                            &same_length_as(arr, b, pos),
                            &|x| nonneg_at(x, iv.header) || (x != i && outer(x).is_some()),
                            &|j| outer(j).filter(|_| j != i),
                        )
                })
            });
            if guarded {
                safe.insert(inst);
                continue;
            }
            let (i, c) = offset_form(func, idx);
            let Some(iv) = ivs.get(&i) else { continue };
            if c.checked_add(iv.lo).is_none_or(|m| m < 0) || !doms.dominates(iv.body, b) {
                continue;
            }
            // hi + c + (width - 1) <= len(arr)?
            let (base, k) = offset_form(func, iv.hi);
            // `k <= 0` as well: `base + k` does not wrap.
            if k > 0
                || k.checked_add(c)
                    .and_then(|s| s.checked_add(width - 1))
                    .is_none_or(|s| s > 0)
            {
                continue;
            }
            let is_length = |x: Value| len_of(func, base) == Some(x) || is_zeros_of(func, x, base);
            if is_length(arr) || same_length_as(arr, b, pos).into_iter().any(is_length) {
                safe.insert(inst);
            }
        }
    }
    (safe, ivs)
}

/// The count-down loops of `func` (see the module documentation).
fn count_down_loops(
    func: &Function,
    order: &[Block],
    preds: &HashMap<Block, Vec<Block>>,
    edges: &HashMap<Block, Vec<(Block, &[Value])>>,
    doms: &DominatorTree,
) -> Vec<CountDown> {
    let mut out = Vec::new();
    for &h in order {
        let Some((
            CountDownHeader {
                counter: c,
                position: k,
                exit,
                body,
            },
            step,
        )) = count_down_header(func, h)
            .map(|cd| (cd, 1))
            .or_else(|| two_step_header(func, h).map(|cd| (cd, 2)))
        else {
            continue;
        };
        if body == exit || body == h || preds.get(&body).map(Vec::as_slice) != Some(&[h][..]) {
            continue;
        }
        // Back edges pass `c - 1` from the body; one entry edge, from a
        // block that only the true side of a guard reaches.
        let mut entry = None;
        let mut ok = true;
        for (from, args) in edges.get(&h).map(Vec::as_slice).unwrap_or_default() {
            let Some(&a) = args.get(k) else {
                ok = false;
                break;
            };
            if doms.dominates(body, *from) {
                ok &= minus_const(func, a, c) == Some(step);
            } else if entry.is_none() {
                entry = Some((*from, a));
            } else {
                ok = false;
            }
        }
        let (Some((pre, c0)), true) = (entry, ok) else {
            continue;
        };
        let [guard] = preds.get(&pre).map(Vec::as_slice).unwrap_or_default() else {
            continue;
        };
        let Some(gl) = func.layout.last_inst(*guard) else {
            continue;
        };
        let InstData::Brif {
            cond: okv,
            then_dest: yes,
            else_dest: no,
        } = func.dfg.inst(gl)
        else {
            continue;
        };
        if yes.block != pre || no.block == pre {
            continue;
        }
        let facts = guard_atoms(func, *okv);
        let nonneg = facts
            .iter()
            .any(|&(cc, x, y)| cc == CmpCond::Ge && x == c0 && const_of(func, y) == Some(0));
        if nonneg {
            out.push(CountDown {
                header: h,
                c,
                body,
                c0,
                step,
                facts,
            });
        }
    }
    out
}

/// `([a, b], then, else)` when `block` ends in `brif (icmp cc a, b), then,
/// else`.
fn branch_on_icmp(
    func: &Function,
    block: Block,
    cc: CmpCond,
) -> Option<([Value; 2], Block, Block)> {
    let InstData::Brif {
        cond,
        then_dest,
        else_dest,
    } = func.dfg.inst(func.layout.last_inst(block)?)
    else {
        return None;
    };
    match inst_of(func, *cond)? {
        InstData::Cmp {
            op: Opcode::Icmp,
            cond,
            args,
        } if *cond == cc => Some((*args, then_dest.block, else_dest.block)),
        _ => None,
    }
}

/// The test of a count-down loop's header: `brif (icmp eq c, 0), exit,
/// body` (the `0` on either side), `c` a parameter of the header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CountDownHeader {
    /// The counter `c`.
    pub counter: Value,
    /// Its position among the header's parameters.
    pub position: usize,
    /// Where the loop goes when `c` is 0.
    pub exit: Block,
    /// Where it goes otherwise.
    pub body: Block,
}

/// The count-down test `header` ends in, if it does (the optimizer's
/// `version` pass looks for the loops this analysis proves).
pub fn count_down_header(func: &Function, header: Block) -> Option<CountDownHeader> {
    let ([a, b], exit, body) = branch_on_icmp(func, header, CmpCond::Eq)?;
    let counter = match (const_of(func, a), const_of(func, b)) {
        (_, Some(0)) => a,
        (Some(0), _) => b,
        _ => return None,
    };
    let position = func
        .dfg
        .block_params(header)
        .iter()
        .position(|&p| p == counter)?;
    Some(CountDownHeader {
        counter,
        position,
        exit,
        body,
    })
}

/// The test of a two-lane count-down loop (`adze_opt`'s `vectorize`):
/// `brif (icmp gt c, 1), body, exit`, `c` a parameter of the header.
fn two_step_header(func: &Function, header: Block) -> Option<CountDownHeader> {
    let ([c, one], body, exit) = branch_on_icmp(func, header, CmpCond::Gt)?;
    if const_of(func, one) != Some(1) {
        return None;
    }
    let position = func.dfg.block_params(header).iter().position(|&p| p == c)?;
    Some(CountDownHeader {
        counter: c,
        position,
        exit,
        body,
    })
}

/// `k` when `v` is `c - k` (`isub c, k`, `k` a constant > 0).
fn minus_const(func: &Function, v: Value, c: Value) -> Option<i64> {
    match inst_of(func, v)? {
        InstData::Binary {
            op: Opcode::Isub,
            args: [x, k],
        } if *x == c => const_of(func, *k).filter(|&k| k > 0),
        _ => None,
    }
}

/// Is `v` `c - 1` (`isub c, 1`): a count-down loop's step and index?
pub fn is_minus_one(func: &Function, v: Value, c: Value) -> bool {
    matches!(inst_of(func, v), Some(InstData::Binary { op: Opcode::Isub, args: [x, one] })
        if *x == c && const_of(func, *one) == Some(1))
}

/// A count-down loop's index as `(base, m)`: `idx` is `c + m` (`base`
/// `None`: `c - 1`, `c`, `c + 1`, each with the constant folded the way the
/// optimizer's GVN folds `(1 + (c - 1)) + 1`), or `base + (c + m)` (`iadd`
/// either way round; a constant `base` is folded into `m`), `m` a
/// constant; `None` otherwise. [`safe_accesses`] proves such an access
/// from a guard on `L - (base + m + k)` for a `k` the loop's step allows
/// (module doc, "Count-down loops"); the optimizer's `version` pass builds
/// its guards from the same forms (with `k = 1`).
pub fn count_down_index(func: &Function, idx: Value, c: Value) -> Option<(Option<Value>, i64)> {
    let (x, m) = offset_form(func, idx);
    if x == c {
        return Some((None, m));
    }
    let InstData::Binary {
        op: Opcode::Iadd,
        args: [p, q],
    } = inst_of(func, x)?
    else {
        return None;
    };
    for (a, base) in [(*p, *q), (*q, *p)] {
        let (y, m2) = offset_form(func, a);
        if y == c && base != c {
            let m = m.checked_add(m2)?;
            return Some(match const_of(func, base) {
                Some(kb) => (None, m.checked_add(kb)?),
                None => (Some(base), m),
            });
        }
    }
    None
}

/// The `icmp` atoms of a guard: the guard itself, or the atoms of both
/// sides of `select p, q, false` (`p && q`).
fn guard_atoms(func: &Function, ok: Value) -> Vec<(CmpCond, Value, Value)> {
    let mut atoms = Vec::new();
    let mut work = vec![ok];
    let mut seen = HashSet::new();
    while let Some(v) = work.pop() {
        if !seen.insert(v) {
            continue;
        }
        match inst_of(func, v) {
            Some(InstData::Cmp {
                op: Opcode::Icmp,
                cond,
                args,
            }) => atoms.push((*cond, args[0], args[1])),
            Some(InstData::Ternary {
                op: Opcode::Select,
                args: [p, q, f],
            }) if matches!(inst_of(func, *f), Some(InstData::BConst { imm: false })) => {
                work.push(*p);
                work.push(*q);
            }
            _ => {}
        }
    }
    atoms
}

/// The index `idx` as `base + (i + c)` for the counter `i`: `(None, c)`
/// for `i + c`, `(Some(base), c)` for `base + (i + c)` or `(base + i) + c`,
/// the `iadd` either way round (`base` may be any value; callers ask that
/// it be defined before the loop).
pub fn up_index(func: &Function, idx: Value, i: Value) -> Option<(Option<Value>, i64)> {
    let (x, c) = offset_form(func, idx);
    if x == i {
        return Some((None, c));
    }
    if let Some(&InstData::Binary {
        op: Opcode::Iadd,
        args: [p, q],
    }) = inst_of(func, x)
    {
        for (a, b) in [(p, q), (q, p)] {
            let (y, d) = offset_form(func, a);
            if y == i && b != i {
                return Some((Some(b), c.checked_add(d)?));
            }
        }
    }
    None
}

/// The atoms of the guards whose true side dominates block `h`: for each
/// block `t` on `h`'s dominator chain (`h` included) whose one predecessor
/// (`single_pred`) ends in `brif ok, t, f` with `f != t`, the atoms of
/// `ok` (`guard_atoms`). Every time `h` runs, each of them held when its
/// guard last ran, and no operand of one has been redefined since: an
/// operand is defined in a block `D` that dominates the guard, so a path
/// from `D` to `h` passes `t` (`t` dominates `h`, and a path from the
/// entry to `D` need not pass `t`). The walk stops after
/// [`GUARD_STEPS`] blocks (fewer facts prove less, never wrongly), so that
/// a function with many loops in a row costs linear time.
pub fn guard_facts(
    func: &Function,
    doms: &DominatorTree,
    h: Block,
    single_pred: impl Fn(Block) -> Option<Block>,
) -> Vec<(CmpCond, Value, Value)> {
    let mut facts = Vec::new();
    let mut at = Some(h);
    for _ in 0..GUARD_STEPS {
        let Some(t) = at else { break };
        if let Some(g) = single_pred(t) {
            if let Some(&InstData::Brif {
                cond,
                ref then_dest,
                ref else_dest,
            }) = func.layout.last_inst(g).map(|i| func.dfg.inst(i))
            {
                if then_dest.block == t && else_dest.block != t {
                    facts.extend(guard_atoms(func, cond));
                }
            }
        }
        at = doms.idom(t);
    }
    facts
}

/// Do the guard atoms `facts` (`guard_facts` of the loop's header) prove
/// the count-up access `arr[idx]` of `width` elements, in a loop whose
/// counter `i >= lo` runs below `hi`? `hi` is `x + k` (when `k <
/// 0`, `x >= 0` must be known, `x_nonneg`, else `x + k` may wrap to a large
/// bound: the review of session 18 found a user's `if n <= len(a)` over
/// `for l in 0..n - 1` read and wrote past the end at `n = i64::MIN`),
/// `idx` is `base + (i + c)` (`up_index`), and the atoms are those the
/// lanes' guard of a count-up loop writes (`adze_opt`'s `vectorize`,
/// "Ranges"), or a user's `if` that says as much: `x <= (L - base) - c0`
/// (`L - c0` without a base; `c0 >= 0` a constant, left out when 0) with
/// `k + c + width - 1 <= c0`, and `base >= 0`, `base <= L`, `L` a length
/// of `arr` (`class`: the arrays known to have its length there). Then
/// every index lies in `base + c + lo ..= base + c + (x + k - 1) + (width
/// - 1) <= L - 1`, and nothing wraps: `0 <= base <= L` makes `L - base`
/// exact, and the counter stays below `x + k <= L` (for `k > 0` too:
/// `x <= L - base - c0` and `k <= c0`). When `x` is an outer counter `j`
/// (`outer`), a fact `hi_j <= lim` with `need <= c0 + 1` bounds it too
/// (`x <= hi_j - 1`); a base `j * s` is proven by `row_major`.
#[allow(clippy::too_many_arguments)]
fn up_guard_proves(
    func: &Function,
    doms: &DominatorTree,
    facts: &[(CmpCond, Value, Value)],
    i: Value,
    iv: &Counter,
    idx: Value,
    width: i64,
    class: &[Value],
    x_nonneg: &dyn Fn(Value) -> bool,
    outer: &dyn Fn(Value) -> Option<Counter>,
) -> bool {
    let Counter { lo, hi, .. } = *iv;
    let (x, k) = offset_form(func, hi);
    if k < 0 && !x_nonneg(x) {
        return false;
    }
    let Some((mut base, mut c)) = up_index(func, idx, i) else {
        return false;
    };
    // A constant base is part of the offset.
    if let Some(kb) = base.and_then(|b| const_of(func, b)) {
        if kb < 0 {
            return false;
        }
        let Some(sum) = c.checked_add(kb) else {
            return false;
        };
        (base, c) = (None, sum);
    }
    if c < 0 || lo < 0 {
        return false;
    }
    let Some(need) = k.checked_add(c).and_then(|s| s.checked_add(width - 1)) else {
        return false;
    };
    let is_length = |l: Value| {
        class
            .iter()
            .any(|&b| len_of(func, l) == Some(b) || is_zeros_of(func, b, l))
    };
    let fact = |cc: CmpCond, a: Value, y: &dyn Fn(Value) -> bool| {
        facts.iter().any(|&(c, p, q)| c == cc && p == a && y(q))
    };
    // `c0` when `v` is `w - c0` (`c0 >= 0`).
    let minus = |v: Value, w: &dyn Fn(Value) -> bool| -> Option<i64> {
        let (wv, off) = offset_form(func, v);
        off.checked_neg().filter(|&c0| c0 >= 0 && w(wv))
    };
    // `c0` when `v` is `(L - base) - c0` (`L - c0` without a base).
    let lim_offset = |v: Value| -> Option<i64> {
        minus(v, &|w| match base {
            None => is_length(w),
            Some(b) => matches!(inst_of(func, w), Some(&InstData::Binary {
                op: Opcode::Isub,
                args: [l, bb],
            }) if is_length(l) && bb == b),
        })
    };
    // `x <= lim` with `x + need <= lim + c0`; or, when `x` is an outer
    // counter `j` (so `x <= hi_j - 1`), `hi_j <= lim` with `need <= c0 +
    // 1`: a guard hoisted out of the rows of `for col in 0..row + 1`.
    let bounded_by = |lim: &dyn Fn(Value) -> Option<i64>| {
        facts
            .iter()
            .any(|&(cc, a, b)| cc == CmpCond::Le && a == x && lim(b).is_some_and(|c0| need <= c0))
            || outer(x).is_some_and(|o| {
                facts.iter().any(|&(cc, a, b)| {
                    cc == CmpCond::Le
                        && a == o.hi
                        && lim(b).is_some_and(|c0| c0.checked_add(1).is_some_and(|m| need <= m))
                })
            })
    };
    if let Some(b) = base {
        if row_major(func, doms, facts, b, &is_length, outer, &|s| {
            bounded_by(&|v| minus(v, &|w| w == s))
        }) {
            return true;
        }
    }
    let fits = bounded_by(&lim_offset);
    let base_ok =
        base.is_none_or(|b| nonneg_fact(func, facts, b) && fact(CmpCond::Le, b, &is_length));
    fits && base_ok
}

/// The largest row stride and row count `row_major` accepts: their
/// product, and `j * s + t` for `t < s`, stay below `2^62`.
pub const ROW_MAJOR_MAX: i64 = 1 << 31;

/// Does a guard prove every row of a row-major access `base + t`, `base =
/// j * s` (`imul` either way round) for an outer counter `j` (`outer`) and
/// a stride `s` defined before `j`'s loop (or a constant), the product
/// computed in `j`'s body, given that the
/// inner offset `t` stays in `0 .. s` (`extent(s)`, the facts `x <= s - c0`
/// or `hi_j <= s - c0` of `up_guard_proves`)? The facts it needs: `s >=
/// 0` (or `s` a length, or a constant `>= 0`), `s <= M` and `hi_j <= M`
/// for constants `M <= 2^31` ([`ROW_MAJOR_MAX`]), and `hi_j * s <= L` for a
/// length `L` of the array. Then `0 <= j * s` (no wrap: `j < hi_j <=
/// 2^31`), and `j * s + t <= (j + 1) * s - 1 <= hi_j * s - 1 <= L - 1`,
/// the guard's `hi_j * s` exact too. Every fact is of values invariant in
/// `j`'s loop, so the guard may stand before it: `vectorize` writes it
/// where the rows start and `licm` lifts it out (GMM's second style,
/// `q[row * d + col]`; kmeans' `points[i * d + l]`).
#[allow(clippy::too_many_arguments)]
fn row_major(
    func: &Function,
    doms: &DominatorTree,
    facts: &[(CmpCond, Value, Value)],
    base: Value,
    is_length: &dyn Fn(Value) -> bool,
    outer: &dyn Fn(Value) -> Option<Counter>,
    extent: &dyn Fn(Value) -> bool,
) -> bool {
    let Some(&InstData::Binary {
        op: Opcode::Imul,
        args: [p, q],
    }) = inst_of(func, base)
    else {
        return false;
    };
    let at_most_max = |v: Value| {
        const_of(func, v).is_some_and(|m| (0..=ROW_MAJOR_MAX).contains(&m))
            || facts.iter().any(|&(cc, a, m)| {
                cc == CmpCond::Le && a == v && const_of(func, m).is_some_and(|m| m <= ROW_MAJOR_MAX)
            })
    };
    [(p, q), (q, p)].into_iter().any(|(j, s)| {
        let Some(o) = outer(j) else { return false };
        // `j * s` computed in `j`'s body, where `0 <= j < hi_j`. (In SSA a
        // product computed at the header is recomputed whenever `j`
        // changes, so this is stricter than soundness needs; the review of
        // session 22 found it so. `lo >= 0` is asked of `j` in `outer` for
        // the same kind of insurance: every least entry value is `>= 0`.)
        if func
            .def_block(base)
            .is_none_or(|d| !doms.dominates(o.body, d))
        {
            return false;
        }
        let invariant = const_of(func, s).is_some()
            || func
                .def_block(s)
                .is_some_and(|d| d != o.header && doms.dominates(d, o.header));
        let nonneg = const_of(func, s).is_some_and(|v| v >= 0)
            || len_of(func, s).is_some()
            || nonneg_fact(func, facts, s);
        let product = |v: Value| {
            matches!(inst_of(func, v), Some(&InstData::Binary {
                op: Opcode::Imul,
                args: [a, b],
            }) if (a, b) == (o.hi, s) || (a, b) == (s, o.hi))
        };
        let fits = facts
            .iter()
            .any(|&(cc, a, l)| cc == CmpCond::Le && product(a) && is_length(l));
        invariant && nonneg && at_most_max(s) && at_most_max(o.hi) && fits && extent(s)
    })
}

/// How far up the dominator tree [`guard_facts`] looks for guards: the
/// lanes' guard `vectorize` writes is a few blocks above its loop.
pub const GUARD_STEPS: usize = 16;

/// Does a fact say `n >= 0` (`icmp ge n, 0`)?
pub fn nonneg_fact(func: &Function, facts: &[(CmpCond, Value, Value)], n: Value) -> bool {
    facts
        .iter()
        .any(|&(cc, a, z)| cc == CmpCond::Ge && a == n && const_of(func, z) == Some(0))
}

/// Does the count-down loop `cd` prove `arr[idx]` in bounds? `idx` is
/// `base + (c - k)` with `width <= k <= step` ([`count_down_index`]'s
/// forms), with the guard's atoms `base >= 0` and `c0 <= L - base` for a
/// base that is not a constant, `c0 <= L - b` for a constant base `b > 0`,
/// `c0 <= L` for none, `L` a length of `arr` (`len b` or `n` of `b = zeros
/// n`, `b` in `class`, the arrays known to have `arr`'s length there).
fn count_down_proves(
    func: &Function,
    doms: &DominatorTree,
    cd: &CountDown,
    idx: Value,
    width: i64,
    class: &[Value],
) -> bool {
    // Defined before the loop, so the same in every iteration as when the
    // guard compared it (a constant is the same anywhere).
    let before_loop = |v: Value| {
        const_of(func, v).is_some()
            || func
                .def_block(v)
                .is_some_and(|d| d != cd.header && doms.dominates(d, cd.header))
    };
    // The index is `base + (c - k)` for a `k` with `width <= k <= step`
    // (`count_down_index`: `base + (c + m)`, `k = -m`; or `c + m`, the
    // constant base `m + k >= 0`), and `c - k .. c - k + width` lies within
    // `0 .. c0` because `step <= c <= c0` in the body.
    let Some((base, m)) = count_down_index(func, idx, cd.c) else {
        return false;
    };
    let ks = width..=cd.step;
    let is_length = |l: Value| {
        before_loop(l)
            && class
                .iter()
                .any(|&b| len_of(func, l) == Some(b) || (is_zeros_of(func, b, l) && before_loop(b)))
    };
    let fact = |cc: CmpCond, x: &dyn Fn(Value) -> bool, y: &dyn Fn(Value) -> bool| {
        cd.facts.iter().any(|&(c, a, b)| c == cc && x(a) && y(b))
    };
    let is_c0 = |v: Value| v == cd.c0;
    // `L - s` for a length `L` and an `s` that `sub` accepts.
    let length_minus = |v: Value, sub: &dyn Fn(Value) -> bool| {
        matches!(inst_of(func, v), Some(InstData::Binary { op: Opcode::Isub, args: [l, s] })
            if is_length(*l) && sub(*s))
    };
    match base {
        // The constant base `b = m + k`: `c0 <= L` for 0, else `c0 <= L - b`.
        None => ks.filter_map(|k| m.checked_add(k)).any(|b| {
            let lim = |v: Value| length_minus(v, &|s| const_of(func, s) == Some(b));
            b == 0 && fact(CmpCond::Le, &is_c0, &is_length)
                || b > 0 && fact(CmpCond::Le, &is_c0, &lim)
        }),
        // A base that is not a constant (`count_down_index` folds those).
        Some(base) => {
            if !before_loop(base) || !ks.contains(&m.saturating_neg()) {
                return false;
            }
            // `L - base`: with `0 <= base` and `0 <= L`, it does not wrap.
            let lim = |v: Value| length_minus(v, &|s| s == base);
            nonneg_fact(func, &cd.facts, base) && fact(CmpCond::Le, &is_c0, &lim)
        }
    }
}

/// Arrays known to have one length, as `samelen` instructions that have
/// run prove (a `samelen` traps unless the lengths are equal, and lengths
/// never change): each array to a representative of its class. The JIT's
/// bounds checks and the optimizer's `mem` pass use it: a checked `a[i]`
/// proves `b[i]` for every `b` of `a`'s class.
#[derive(Clone, Debug, Default)]
pub struct LengthClasses {
    rep: HashMap<Value, Value>,
}

impl LengthClasses {
    /// The representative of `a`'s class.
    pub fn rep(&self, a: Value) -> Value {
        self.rep.get(&a).copied().unwrap_or(a)
    }

    /// Records that `a` and `b` have one length. False if that was known.
    pub fn join(&mut self, a: Value, b: Value) -> bool {
        let (ra, rb) = (self.rep(a), self.rep(b));
        if ra == rb {
            return false;
        }
        for r in self.rep.values_mut().filter(|r| **r == rb) {
            *r = ra;
        }
        self.rep.insert(rb, ra);
        true
    }

    /// The classes the `samelen`s of the entry block make: they hold in
    /// every other block, which the entry block dominates.
    pub fn of_entry_block(func: &Function) -> LengthClasses {
        let mut classes = LengthClasses::default();
        if let Some(entry) = func.entry_block() {
            for &inst in func.layout.block_insts(entry) {
                if let InstData::Binary {
                    op: Opcode::SameLen,
                    args: [a, b],
                } = *func.dfg.inst(inst)
                {
                    classes.join(a, b);
                }
            }
        }
        classes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_module;

    /// The accesses `safe_accesses` proves, as (block, position in block).
    fn proven(src: &str) -> Vec<(String, usize)> {
        let m = parse_module(src).unwrap();
        let (_, f) = m.iter().next().unwrap();
        let safe = safe_accesses(f);
        let mut out = Vec::new();
        for &b in f.layout.blocks() {
            for (k, i) in f.layout.block_insts(b).iter().enumerate() {
                if safe.contains(*i) {
                    out.push((b.to_string(), k));
                }
            }
        }
        out
    }

    fn at(block: &str, pos: usize) -> (String, usize) {
        (block.to_string(), pos)
    }

    /// `for i in LO..len(x) - K { x[i]; x[i + 1] }`, with the latch adding
    /// `STEP`.
    fn loop_src(lo: i64, k: i64, step: i64) -> String {
        format!(
            "function @f(x: arr) -> f64 {{
block0(v0: arr):
    v1 = fconst 0.0
    v2 = iconst {lo}
    v3 = len v0
    v4 = iconst {k}
    v5 = isub v3, v4
    jump block1(v2, v1)
block1(v6: i64, v7: f64):
    v8 = icmp lt v6, v5
    brif v8, block2, block3(v7)
block2:
    v10 = load v0, v6
    v12 = iconst 1
    v13 = iadd v6, v12
    v14 = load v0, v13
    v15 = fadd v10, v14
    v16 = fadd v7, v15
    jump block4
block4:
    v17 = iconst {step}
    v18 = iadd v6, v17
    jump block1(v18, v16)
block3(v19: f64):
    v20 = iconst 0
    v21 = load v0, v20
    return v19
}}
"
        )
    }

    /// The accesses `safe_accesses_below_start` proves.
    fn proven_below_start(src: &str) -> Vec<(String, usize)> {
        let m = parse_module(src).unwrap();
        let (_, f) = m.iter().next().unwrap();
        let safe = safe_accesses_below_start(f);
        let mut out = Vec::new();
        for &b in f.layout.blocks() {
            for (k, i) in f.layout.block_insts(b).iter().enumerate() {
                if safe.contains(*i) {
                    out.push((b.to_string(), k));
                }
            }
        }
        out
    }

    /// `for i in lo..len(x) - k { x[i - 1]; x[i - 2] }`, entered with `lo`,
    /// or, with `other`, from two blocks, with `lo` and `other`.
    fn stencil_src(lo: i64, other: Option<&str>, k: i64) -> String {
        let (entry, second) = match other {
            None => ("jump block1(v2, v1)".to_string(), String::new()),
            Some(o) => (
                "brif v22, block1(v2, v1), block5".to_string(),
                format!("block5:\n    v23 = {o}\n    jump block1(v23, v1)\n"),
            ),
        };
        format!(
            "function @f(x: arr, c: bool) -> f64 {{
block0(v0: arr, v22: bool):
    v1 = fconst 0.0
    v2 = iconst {lo}
    v3 = len v0
    v4 = iconst {k}
    v5 = isub v3, v4
    {entry}
{second}block1(v6: i64, v7: f64):
    v8 = icmp lt v6, v5
    brif v8, block2, block3(v7)
block2:
    v9 = iconst 1
    v10 = isub v6, v9
    v11 = load v0, v10
    v12 = iconst 2
    v13 = isub v6, v12
    v14 = load v0, v13
    v15 = fadd v11, v14
    v16 = fadd v7, v15
    v17 = iadd v6, v9
    jump block1(v17, v16)
block3(v19: f64):
    return v19
}}
"
        )
    }

    #[test]
    fn accesses_below_the_start_of_a_loop() {
        // From 2: x[i - 1] and x[i - 2]; from 1: x[i - 1]; from 0: neither.
        let from = |lo, other, k| proven_below_start(&stencil_src(lo, other, k));
        assert_eq!(from(2, None, 0), vec![at("block2", 2), at("block2", 5)]);
        assert_eq!(from(1, None, 0), vec![at("block2", 2)]);
        assert!(from(0, None, 0).is_empty());
        // Up to len(x) + 1 (k = -1): i - 1 < len(x) still, but the bound's
        // `len + 1` is not taken (it could wrap, as far as the proof
        // knows); len(x) - 1 is fine.
        assert!(from(2, None, -1).is_empty());
        assert_eq!(from(2, None, 1), vec![at("block2", 2), at("block2", 5)]);
        // Entered from two blocks: the least start counts; a length or
        // another value counts as 0, or fails the loop.
        assert_eq!(from(2, Some("iconst 1"), 0), vec![at("block2", 2)]);
        assert_eq!(
            from(3, Some("iconst 2"), 0),
            vec![at("block2", 2), at("block2", 5)]
        );
        assert!(from(2, Some("len v0"), 0).is_empty());
        assert!(from(2, Some("iconst -1"), 0).is_empty());
        // `safe_accesses` (the optimizer's and AD's) proves none of them.
        assert!(proven(&stencil_src(2, None, 0)).is_empty());
    }

    #[test]
    fn rosenbrock_shape_is_proven() {
        // len(x) - 1: both x[i] and x[i + 1]; the load after the loop not.
        assert_eq!(
            proven(&loop_src(0, 1, 1)),
            vec![at("block2", 0), at("block2", 3)]
        );
        // len(x) - 0: x[i] only.
        assert_eq!(proven(&loop_src(0, 0, 1)), vec![at("block2", 0)]);
        // len(x) + 1 (k = -1): nothing.
        assert!(proven(&loop_src(0, -1, 1)).is_empty());
    }

    /// A loop unrolled by two (`adze_opt`'s `unroll`): each counter is
    /// entered from the other's `+ 1`, and both copies' accesses are
    /// proven; below the start too, from `lo` carried around the pair. A
    /// pair whose second counter also gets an unaccounted value proves
    /// nothing in either copy.
    #[test]
    fn the_counters_of_an_unrolled_loop_prove_each_other() {
        let src = |lo: i64, second_entry: &str| {
            format!(
                "function @f(x: arr, n: i64) -> f64 {{
block0(v0: arr, v1: i64):
    v2 = iconst {lo}
    v3 = len v0
    v30 = fconst 0.0
    brif v30, block1(v2), block4(v1)
block1(v4: i64):
    v5 = icmp lt v4, v3
    brif v5, block2, block3
block2:
    v6 = load v0, v4
    v7 = iconst 1
    v8 = isub v4, v7
    v9 = load v0, v8
    v10 = iadd v4, v7
    jump block4(v10)
block4(v11: i64):
    v12 = icmp lt v11, v3
    brif v12, block5, block3
block5:
    v13 = load v0, v11
    v14 = isub v11, v7
    v15 = load v0, v14
    v16 = iadd v11, v7
    jump block1(v16)
block3:
    return v30
}}
"
            )
            .replace("block4(v1)", second_entry)
        };
        // Both loads at the counter, in both copies.
        assert_eq!(
            proven(&src(0, "block4(v2)")),
            vec![at("block2", 0), at("block5", 0)]
        );
        // Below the start: from 1, x[i - 1] too (the copy starts at 2).
        assert_eq!(
            proven_below_start(&src(1, "block4(v2)")),
            vec![
                at("block2", 0),
                at("block2", 3),
                at("block5", 0),
                at("block5", 2)
            ]
        );
        // From 0 (the copy is entered with 0 too): neither x[i - 1].
        assert_eq!(
            proven_below_start(&src(0, "block4(v2)")),
            vec![at("block2", 0), at("block5", 0)]
        );
        // `n` may be negative: nothing in the copy, and then nothing in
        // the loop either (its counter comes from the copy's).
        assert!(proven(&src(0, "block4(v1)")).is_empty());
        // Two lanes unrolled: each counter entered from the other's `+ 2`
        // below `len - 1` (`x[i + 1]` proven in both copies); below `len`
        // itself `j + 2` might wrap, and nothing is proven.
        let lanes = |k: i64| {
            src(0, "block4(v2)")
                .replace(
                    "v3 = len v0",
                    &format!("v40 = len v0\n    v41 = iconst {k}\n    v3 = iadd v40, v41\n    v42 = iconst 1"),
                )
                .replace("v7 = iconst 1", "v7 = iconst 2")
                .replace("v8 = isub v4, v7", "v8 = iadd v4, v42")
                .replace("v14 = isub v11, v7", "v14 = iadd v11, v42")
        };
        assert_eq!(
            proven(&lanes(-1)),
            vec![
                at("block2", 0),
                at("block2", 3),
                at("block5", 0),
                at("block5", 2)
            ]
        );
        assert!(proven(&lanes(0)).is_empty());
    }

    /// The same for an i64 array (`ilen`, `iload`, `istore`, `izeros`).
    #[test]
    fn integer_arrays_are_proven_alike() {
        let src = loop_src(0, 1, 1)
            .replace("x: arr", "x: mut iarr")
            .replace("v0: arr", "v0: iarr")
            .replace("len v0", "ilen v0")
            .replace("v10 = load v0, v6", "v10 = iload v0, v6")
            .replace("v14 = load v0, v13", "istore v0, v13, v10")
            .replace("v15 = fadd v10, v14", "v15 = fconst 1.0")
            .replace("v21 = load v0, v20", "v21 = iload v0, v20");
        assert_eq!(proven(&src), vec![at("block2", 0), at("block2", 3)]);
        let zeros = "function @f(n: i64) -> i64 {
block0(v0: i64):
    v1 = izeros v0, \"t\"
    v2 = iconst 0
    jump block1(v2)
block1(v3: i64):
    v4 = icmp lt v3, v0
    brif v4, block2, block3
block2:
    istore v1, v3, v3
    v6 = iconst 1
    v7 = iadd v3, v6
    istore v1, v7, v3
    jump block1(v7)
block3:
    return v0
}
";
        assert_eq!(proven(zeros), vec![at("block2", 0)]);
    }

    #[test]
    fn unprovable_loops_keep_their_checks() {
        // A negative start, a step of 2 to a bound that could be
        // `i64::MAX` (`len` itself), or a step of 3.
        assert!(proven(&loop_src(-1, 1, 1)).is_empty());
        assert!(proven(&loop_src(0, 0, 2)).is_empty());
        assert!(proven(&loop_src(0, 1, 3)).is_empty());
    }

    /// A two-lane loop (`vectorize`) counts by 2 below `len - 1`: the
    /// counter cannot wrap, and `vload x, i` reads `x[i]` and `x[i + 1]`.
    #[test]
    fn a_two_lane_counter_steps_by_two() {
        assert_eq!(
            proven(&loop_src(0, 1, 2)),
            vec![at("block2", 0), at("block2", 3)]
        );
        let lanes = loop_src(0, 1, 2)
            .replace("v10 = load v0, v6", "v10 = vload v0, v6")
            .replace("v14 = load v0, v13", "v14 = vload v0, v13")
            .replace("v15 = fadd v10, v14", "v15 = vfadd v10, v14")
            .replace("v16 = fadd v7, v15", "v16 = vlane0 v15");
        // `x[i + 1 .. i + 3]` needs `i < len - 2`.
        assert_eq!(proven(&lanes), vec![at("block2", 0)]);
        let further = lanes.replace("v4 = iconst 1", "v4 = iconst 2");
        assert_eq!(proven(&further), vec![at("block2", 0), at("block2", 3)]);
    }

    #[test]
    fn zeros_of_the_bound() {
        let src = "function @f(n: i64) -> f64 {
block0(v0: i64):
    v1 = zeros v0, \"t\"
    v2 = iconst 0
    jump block1(v2)
block1(v3: i64):
    v4 = icmp lt v3, v0
    brif v4, block2, block3
block2:
    v5 = fconst 1.0
    store v1, v3, v5
    v6 = iconst 1
    v7 = iadd v3, v6
    store v1, v7, v5
    jump block1(v7)
block3:
    v8 = fconst 0.0
    return v8
}
";
        assert_eq!(proven(src), vec![at("block2", 1)]);
    }

    /// `for i in 0..len(x) - 1 { y[i]; y[i + 1]; z[i] }` with `samelen x, y`
    /// (and `samelen y, z`) somewhere.
    fn samelen_src(before_loop: &str, in_body: &str) -> String {
        format!(
            "function @f(x: arr, y: arr, z: arr, c: bool) -> f64 {{
block0(v0: arr, v1: arr, v2: arr, v3: bool):
    v4 = iconst 0
    v5 = len v0
    v6 = iconst 1
    v7 = isub v5, v6
    v8 = fconst 0.0
    {before_loop}
    jump block1(v4)
block1(v9: i64):
    v10 = icmp lt v9, v7
    brif v10, block2, block3
block2:
    v11 = load v1, v9
    {in_body}
    v12 = iadd v9, v6
    v13 = load v1, v12
    v14 = load v2, v9
    jump block1(v12)
block3:
    return v8
}}
"
        )
    }

    #[test]
    fn samelen_relates_lengths() {
        // samelen x, y before the loop: y[i] and y[i + 1]; z is unrelated.
        assert_eq!(
            proven(&samelen_src("samelen v0, v1", "")),
            vec![at("block2", 0), at("block2", 2)]
        );
        // A chain x ~ y ~ z (either operand order): z[i] too.
        assert_eq!(
            proven(&samelen_src("samelen v1, v0\n    samelen v2, v1", "")),
            vec![at("block2", 0), at("block2", 2), at("block2", 3)]
        );
        // samelen in the body after y[i]: only what follows it.
        assert_eq!(
            proven(&samelen_src("", "samelen v0, v1")),
            vec![at("block2", 3)]
        );
        // Unrelated arrays: nothing.
        assert!(proven(&samelen_src("samelen v1, v2", "")).is_empty());
    }

    #[test]
    fn samelen_must_dominate() {
        // samelen x, y on one branch only: y's accesses keep their checks.
        let src = "function @f(x: arr, y: arr, c: bool) -> f64 {
block0(v0: arr, v1: arr, v2: bool):
    v3 = iconst 0
    v4 = len v0
    v5 = fconst 0.0
    brif v2, block4, block5
block4:
    samelen v0, v1
    jump block5
block5:
    jump block1(v3)
block1(v6: i64):
    v7 = icmp lt v6, v4
    brif v7, block2, block3
block2:
    v8 = load v1, v6
    v9 = load v0, v6
    v10 = iconst 1
    v11 = iadd v6, v10
    jump block1(v11)
block3:
    return v5
}
";
        assert_eq!(proven(src), vec![at("block2", 1)]);
    }

    /// `for i in 0..n { for j in i + OFF..n { q[j] += x[i] } }` with
    /// `q = zeros n`, `x = zeros n`.
    fn triangle_src(off: i64) -> String {
        format!(
            "function @f(n: i64) -> f64 {{
block0(v0: i64):
    v1 = zeros v0, \"q\"
    v2 = zeros v0, \"x\"
    v3 = iconst 0
    v4 = iconst 1
    v30 = iconst {off}
    jump block1(v3)
block1(v5: i64):
    v6 = icmp lt v5, v0
    brif v6, block2, block6
block2:
    v7 = iadd v5, v30
    jump block3(v7)
block3(v8: i64):
    v9 = icmp lt v8, v0
    brif v9, block4, block5
block4:
    v10 = load v1, v8
    v11 = load v2, v5
    v12 = fadd v10, v11
    store v1, v8, v12
    v13 = iadd v8, v4
    jump block3(v13)
block5:
    v14 = iadd v5, v4
    jump block1(v14)
block6:
    v15 = fconst 0.0
    return v15
}}
"
        )
    }

    #[test]
    fn a_triangular_nest_starts_at_the_outer_index() {
        // j from i + 1 (or i): 0 <= j, and j < n = len q; x[i] as before.
        let all = vec![at("block4", 0), at("block4", 1), at("block4", 3)];
        assert_eq!(proven(&triangle_src(1)), all);
        assert_eq!(proven(&triangle_src(0)), all);
        // From i + 2 (could wrap past i64::MAX in principle) or i - 1
        // (could be -1): q[j] keeps its check; x[i] is still proven.
        assert_eq!(proven(&triangle_src(2)), vec![at("block4", 1)]);
        assert_eq!(proven(&triangle_src(-1)), vec![at("block4", 1)]);
    }

    /// A count-down loop behind a guard: `c` from `c0` (v2) down to 1,
    /// reading `x[base + c - 1]` (base v3). `GUARD` is the guard's
    /// instructions (ending in `v30`, the condition); `BACK` the back edge's
    /// step; `TRUE`/`FALSE` the guard's targets.
    fn countdown_src(guard: &str, back: &str, targets: (&str, &str)) -> String {
        format!(
            "function @f(x: arr, c0: i64, base: i64) -> f64 {{
block0(v0: arr, v2: i64, v3: i64):
    v4 = fconst 0.0
    v20 = iconst 0
    v21 = bconst false
{guard}
    brif v30, {t}, {f}
block5:
    jump block1(v2, v4)
block6:
    v40 = fconst 1.0
    return v40
block1(v5: i64, v6: f64):
    v7 = iconst 0
    v8 = icmp eq v5, v7
    brif v8, block3, block2
block2:
    v9 = iconst 1
    v10 = isub v5, v9
    v11 = iadd v3, v10
    v12 = load v0, v11
    v13 = fadd v6, v12
    v14 = load v0, v10
    {back}
    jump block1(v15, v13)
block3:
    return v6
}}
",
            t = targets.0,
            f = targets.1,
        )
    }

    /// The whole guard: c0 >= 0, base >= 0, c0 <= len(x) - base, and
    /// c0 <= len(x) for `x[c - 1]`.
    const FULL: &str = "    v22 = icmp ge v2, v20
    v23 = icmp ge v3, v20
    v24 = len v0
    v25 = isub v24, v3
    v26 = icmp le v2, v25
    v27 = icmp le v2, v24
    v28 = select v22, v23, v21
    v29 = select v28, v26, v21
    v30 = select v29, v27, v21";

    const STEP: &str = "v15 = isub v5, v9";

    /// A count-up loop `for i in 0..hi` reading `x[base + i]` and `x[base +
    /// i + 1]`, on the true or false side (`targets`) of `guard`, whose
    /// result is `v30`.
    fn countup_src(guard: &str, targets: (&str, &str)) -> String {
        format!(
            "function @f(x: arr, hi: i64, base: i64) -> f64 {{
block0(v0: arr, v2: i64, v3: i64):
    v4 = fconst 0.0
    v20 = iconst 0
    v21 = bconst false
    v24 = len v0
    v25 = isub v24, v3
    v31 = iconst 1
    v32 = isub v25, v31
{guard}
    brif v30, {t}, {f}
block5:
    jump block1(v20, v4)
block6:
    v40 = fconst 1.0
    return v40
block1(v5: i64, v6: f64):
    v8 = icmp lt v5, v2
    brif v8, block2, block3
block2:
    v11 = iadd v3, v5
    v12 = load v0, v11
    v13 = fadd v6, v12
    v14 = iadd v11, v31
    v15 = load v0, v14
    v16 = fadd v13, v15
    v17 = iadd v5, v31
    jump block1(v17, v16)
block3:
    return v6
}}
",
            t = targets.0,
            f = targets.1,
        )
    }

    /// `for j in 0..h { for i in 0..j + 1 { x[j * s + i]; y[i] } }` behind
    /// the guard `guard` (atoms `v40..`, their conjunction `v30`) before
    /// the rows' loop; `imul` says where `j * s` is computed.
    fn rows_src(guard: &str, imul_in_header: bool) -> String {
        let (header, body) = match imul_in_header {
            true => ("    v8 = imul v5, v3\n", ""),
            false => ("", "    v8 = imul v5, v3\n"),
        };
        format!(
            "function @f(x: arr, y: arr, h: i64, s: i64) -> f64 {{
block0(v0: arr, v1: arr, v2: i64, v3: i64):
    v4 = fconst 0.0
    v20 = iconst 0
    v21 = bconst false
    v22 = iconst 2147483648
    v24 = len v0
    v25 = len v1
    v26 = imul v2, v3
    v27 = iconst 1
{guard}
    brif v30, block5, block6
block5:
    jump block1(v20, v4)
block6:
    v60 = fconst 1.0
    return v60
block1(v5: i64, v6: f64):
{header}    v7 = icmp lt v5, v2
    brif v7, block2, block3
block2:
{body}    v9 = iadd v5, v27
    jump block7(v20, v6)
block7(v10: i64, v11: f64):
    v12 = icmp lt v10, v9
    brif v12, block8, block9
block8:
    v13 = iadd v8, v10
    v14 = load v0, v13
    v15 = load v1, v10
    v16 = fadd v11, v14
    v17 = fadd v16, v15
    v18 = iadd v10, v27
    jump block7(v18, v17)
block9:
    v19 = iadd v5, v27
    jump block1(v19, v11)
block3:
    return v6
}}
"
        )
    }

    /// Rows checked for every `j` at once (`vectorize`'s hoisted rows,
    /// `row_major`): `s >= 0`, `s <= 2^31`, `h <= 2^31`, `h * s <= len(x)`
    /// and `h <= s` prove `x[j * s + i]` for `i <= j < h`; `h <= len(y)`
    /// proves `y[i]`. Each atom is needed, the product must be computed
    /// in the rows' body (at the header `j` may be `h`), and only the
    /// JIT's analysis knows the rule.
    #[test]
    fn rows_behind_a_hoisted_guard_are_proven() {
        let all = [
            "v40 = icmp ge v3, v20",
            "v41 = icmp le v3, v22",
            "v42 = icmp le v2, v22",
            "v43 = icmp le v26, v24",
            "v44 = icmp le v2, v3",
            "v45 = icmp le v2, v25",
        ];
        let atoms = |skip: &str| {
            let kept: Vec<&str> = all.into_iter().filter(|a| !a.starts_with(skip)).collect();
            let mut g: Vec<String> = kept.iter().map(|a| format!("    {a}")).collect();
            let mut acc = kept[0][..3].to_string();
            for (k, a) in kept.iter().enumerate().skip(1) {
                let v = if k + 1 == kept.len() {
                    "v30".to_string()
                } else {
                    format!("v5{k}")
                };
                g.push(format!("    {v} = select {acc}, {}, v21", &a[..3]));
                acc = v;
            }
            g.join("\n")
        };
        let both = vec![at("block8", 1), at("block8", 2)];
        assert_eq!(proven_below_start(&rows_src(&atoms("-"), false)), both);
        for skip in ["v40", "v41", "v42", "v43", "v44"] {
            let src = rows_src(&atoms(skip), false);
            assert_eq!(
                proven_below_start(&src),
                vec![at("block8", 2)],
                "without {skip}"
            );
        }
        let src = rows_src(&atoms("v45"), false);
        assert_eq!(proven_below_start(&src), vec![at("block8", 1)]);
        let src = rows_src(&atoms("-"), true);
        assert_eq!(proven_below_start(&src), vec![at("block8", 2)]);
        assert!(proven(&rows_src(&atoms("-"), false)).is_empty());
        // `h * s` below a value that is not a length proves nothing of `x`.
        let src = rows_src(&atoms("-"), false).replace("icmp le v26, v24", "icmp le v26, v3");
        assert_eq!(proven_below_start(&src), vec![at("block8", 2)]);
        // An inner bound `j + 2` needs one more element of room: `h <= s`
        // and `h <= len(y)` no longer do (`i` reaches `j + 1 <= h`), `h <=
        // s - 1` and `h <= len(y) - 1` do.
        let plus_two = |src: String| {
            src.replace(
                "    v9 = iadd v5, v27\n",
                "    v28 = iconst 2\n    v9 = iadd v5, v28\n",
            )
        };
        assert!(proven_below_start(&plus_two(rows_src(&atoms("-"), false))).is_empty());
        let roomy = rows_src(&atoms("-"), false)
            .replace(
                "    v27 = iconst 1\n",
                "    v27 = iconst 1\n    v46 = isub v3, v27\n    v47 = isub v25, v27\n",
            )
            .replace("icmp le v2, v3", "icmp le v2, v46")
            .replace("icmp le v2, v25", "icmp le v2, v47");
        assert_eq!(proven_below_start(&plus_two(roomy)), both);
    }

    /// The lanes' exit as a loop's entry (`vectorize`'s `last_in_range`
    /// after `unroll`): a block parameter merging two counters' values
    /// (`v30`, from `j`'s header and from its copy's) is at least the
    /// least of their least values, so `a[i]` of the loop it enters is in
    /// bounds below `len(a)`, and `a[i - 1]` is not (`lo = 0`). A merged
    /// value that is not a counter (a parameter, `v2`) proves nothing.
    #[test]
    fn a_counter_leaving_its_loop_enters_the_next() {
        let src = |other: &str, off: &str| {
            format!(
                "function @f(a: arr, n: i64) -> f64 {{
block0(v0: arr, v2: i64):
    v4 = fconst 0.0
    v20 = iconst 0
    v21 = iconst 1
    v22 = len v0
    jump block1(v20)
block1(v5: i64):
    v6 = icmp lt v5, v22
    brif v6, block2, block5(v5)
block2:
    v7 = iadd v5, v21
    jump block3(v7)
block3(v8: i64):
    v9 = icmp lt v8, v22
    brif v9, block4, block5({other})
block4:
    v10 = iadd v8, v21
    jump block1(v10)
block5(v30: i64):
    jump block6(v30, v4)
block6(v11: i64, v12: f64):
    v13 = icmp lt v11, v22
    brif v13, block7, block8
block7:
    v14 = iadd v11, v{off}
    v15 = load v0, v14
    v16 = fadd v12, v15
    v17 = iadd v11, v21
    jump block6(v17, v16)
block8:
    return v12
}}
"
            )
        };
        assert_eq!(proven_below_start(&src("v8", "20")), vec![at("block7", 1)]);
        let below = src("v8", "23").replace(
            "    v22 = len v0\n",
            "    v22 = len v0\n    v23 = iconst -1\n",
        );
        assert!(proven_below_start(&below).is_empty());
        assert!(proven_below_start(&src("v2", "20")).is_empty());
        // Only the JIT's analysis reads it.
        assert!(proven(&src("v8", "20")).is_empty());
    }

    /// The lanes' guard of a count-up loop (`vectorize`'s "Ranges"): `hi >=
    /// 0`, `base >= 0`, `base <= len(x)`, and `hi <= (len(x) - base) - 1`
    /// for the largest offset, 1; with `hi <= len(x) - base` only the
    /// offset 0 is proven. Each atom is needed, and the loop must be on the
    /// guard's true side.
    #[test]
    fn a_guarded_count_up_loop_is_proven() {
        let atoms = |fits: &str, skip: &str| {
            let all = [
                "v22 = icmp ge v2, v20",
                "v23 = icmp ge v3, v20",
                "v26 = icmp le v3, v24",
                fits,
            ];
            let kept: Vec<&str> = all.into_iter().filter(|a| !a.starts_with(skip)).collect();
            let mut g: Vec<String> = kept.iter().map(|a| format!("    {a}")).collect();
            let names: Vec<&str> = kept.iter().map(|a| &a[..3]).collect();
            let mut acc = names[0].to_string();
            for (k, n) in names.iter().enumerate().skip(1) {
                let v = if k + 1 == names.len() {
                    "v30".to_string()
                } else {
                    format!("v5{k}")
                };
                g.push(format!("    {v} = select {acc}, {n}, v21"));
                acc = v;
            }
            g.join("\n")
        };
        let tight = "v27 = icmp le v2, v32";
        let loose = "v27 = icmp le v2, v25";
        let both = vec![at("block2", 1), at("block2", 4)];
        assert_eq!(
            proven(&countup_src(&atoms(tight, "-"), ("block5", "block6"))),
            both
        );
        assert_eq!(
            proven(&countup_src(&atoms(loose, "-"), ("block5", "block6"))),
            vec![at("block2", 1)]
        );
        // Without `base >= 0` or `base <= len`, or on the false side.
        for skip in ["v23", "v26"] {
            let src = countup_src(&atoms(tight, skip), ("block5", "block6"));
            assert!(proven(&src).is_empty(), "without {skip}");
        }
        assert!(proven(&countup_src(&atoms(tight, "-"), ("block6", "block5"))).is_empty());
        // A bound `hi - 1` below the guarded `hi`: only with `hi >= 0`
        // (else `hi - 1` may wrap to `i64::MAX`; the review's
        // `if n <= len(a) { for l in 0..n - 1 { .. } }`).
        // The loop below `v33`, defined by `extra` after the guard's `v32`.
        let with_bound = |atoms: &str, extra: &str| {
            countup_src(atoms, ("block5", "block6"))
                .replace(
                    "    v32 = isub v25, v31\n",
                    &format!("    v32 = isub v25, v31\n{extra}"),
                )
                .replace("v8 = icmp lt v5, v2", "v8 = icmp lt v5, v33")
        };
        let minus_one = |atoms: &str| with_bound(atoms, "    v33 = isub v2, v31\n");
        assert_eq!(proven(&minus_one(&atoms(tight, "-"))), both);
        assert!(proven(&minus_one(&atoms(tight, "v22"))).is_empty());
        // A bound `hi + 1` (GMM's `for col in 0..row + 1`): the guard must
        // leave room for one more element, `hi <= (len - base) - 2` for
        // both offsets; `hi >= 0` is not needed (`hi + 1` cannot wrap below
        // a length).
        let plus_one = |atoms: &str| {
            with_bound(
                atoms,
                "    v33 = iadd v2, v31\n    v34 = iconst 2\n    v35 = isub v25, v34\n",
            )
        };
        let roomy = "v27 = icmp le v2, v35";
        assert_eq!(proven(&plus_one(&atoms(roomy, "v22"))), both);
        assert_eq!(proven(&plus_one(&atoms(tight, "-"))), vec![at("block2", 1)]);
        assert!(proven(&plus_one(&atoms(loose, "-"))).is_empty());
        // Its lanes: the counter steps by 2 below `hi + 0` (`two_steps`
        // from the guard's `hi <= (len - base) - 1`), `vload` at `base + i`.
        let lanes = |atoms: &str| {
            with_bound(
                atoms,
                "    v36 = iconst 0\n    v33 = iadd v2, v36\n    v34 = iconst 2\n",
            )
            .replace("v12 = load v0, v11", "v12 = vload v0, v11")
            .replace("v13 = fadd v6, v12", "v13 = vlane0 v12")
            .replace("v17 = iadd v5, v31", "v17 = iadd v5, v34")
        };
        assert_eq!(proven(&lanes(&atoms(tight, "v22"))), both);
        assert!(proven(&lanes(&atoms(loose, "-"))).is_empty());
        // Below `hi - 1` it needs `hi >= 0` as well: at `hi = i64::MIN`,
        // `hi - 1` is `i64::MAX` (the review's `while j < n - 1`).
        let below = |atoms: &str| lanes(atoms).replace("v36 = iconst 0", "v36 = iconst -1");
        assert!(proven(&below(&atoms(tight, "v22"))).is_empty());
        assert_eq!(proven(&below(&atoms(tight, "-"))), both);
    }

    #[test]
    fn a_guarded_count_down_loop_is_proven() {
        let src = countdown_src(FULL, STEP, ("block5", "block6"));
        assert_eq!(proven(&src), vec![at("block2", 3), at("block2", 5)]);
        // The guard's atoms in another order, or nested the other way.
        let other = FULL
            .replace("v28 = select v22, v23, v21", "v28 = select v23, v22, v21")
            .replace("v30 = select v29, v27, v21", "v30 = select v27, v29, v21");
        let src = countdown_src(&other, STEP, ("block5", "block6"));
        assert_eq!(proven(&src), vec![at("block2", 3), at("block2", 5)]);
    }

    #[test]
    fn count_down_proofs_need_every_atom() {
        let prove =
            |guard: String, back: &str, targets| proven(&countdown_src(&guard, back, targets));
        let t = ("block5", "block6");
        // No c0 >= 0: a negative count would run through negative indices.
        assert!(prove(
            FULL.replace("v22 = icmp ge v2, v20", "v22 = icmp ge v20, v20"),
            STEP,
            t
        )
        .is_empty());
        // No base >= 0: only x[c - 1] is proven.
        assert_eq!(
            prove(
                FULL.replace("v23 = icmp ge v3, v20", "v23 = icmp ge v20, v20"),
                STEP,
                t
            ),
            vec![at("block2", 5)]
        );
        // The limit of another base.
        assert_eq!(
            prove(
                FULL.replace("v25 = isub v24, v3", "v25 = isub v24, v20"),
                STEP,
                t
            ),
            vec![at("block2", 5)]
        );
        // c0 < .. is fine too in math, but only `le` is read: nothing for it.
        assert_eq!(
            prove(
                FULL.replace("v26 = icmp le v2, v25", "v26 = icmp ge v2, v25"),
                STEP,
                t
            ),
            vec![at("block2", 5)]
        );
        // An `or` is not an `and`: select p, q, true.
        let or = FULL.replace("v21 = bconst false", "").replace(
            "v30 = select v29, v27, v21",
            "v31 = bconst true\n    v30 = select v29, v27, v31",
        );
        assert!(prove(or, STEP, t).is_empty());
        // The loop on the guard's false side.
        assert!(prove(FULL.to_string(), STEP, ("block6", "block5")).is_empty());
        // A back edge that steps by 2 (c would skip 0 and go negative).
        let two = "v16 = iconst 2\n    v15 = isub v5, v16";
        assert!(prove(FULL.to_string(), two, t).is_empty());
    }

    /// Indices the optimizer's GVN folds: `x[c]` (was `1 + (c - 1)`) and
    /// `x[c + 1]`, read as `b + (c - 1)` with the constant base `b`: `c`
    /// needs `c0 <= len - 1`, `c + 1` needs `c0 <= len - 2`; with only `c0
    /// <= len`, neither (at `c = c0 = len`, `x[c]` is out of bounds).
    #[test]
    fn count_down_indices_with_folded_offsets_are_proven() {
        let src = |fits: &str| {
            countdown_src(FULL, STEP, ("block5", "block6"))
                .replace(
                    "    v14 = load v0, v10
",
                    "    v14 = load v0, v10
    v16 = load v0, v5
    v17 = iadd v5, v9
    v18 = load v0, v17
",
                )
                .replace(
                    "    v30 = select v29, v27, v21",
                    &format!(
                        "    v31 = iconst 1
    v32 = iconst 2
    v33 = isub v24, v31
    v34 = isub v24, v32
{fits}
    v30 = select v29, v37, v21"
                    ),
                )
        };
        // c0 <= len and c0 <= len - base only: x[c - 1] and x[base + c - 1].
        let none = "    v37 = select v27, v27, v21";
        assert_eq!(proven(&src(none)), vec![at("block2", 3), at("block2", 5)]);
        let one = "    v35 = icmp le v2, v33
    v37 = select v27, v35, v21";
        assert_eq!(
            proven(&src(one)),
            vec![at("block2", 3), at("block2", 5), at("block2", 6)]
        );
        let two = "    v35 = icmp le v2, v33
    v36 = icmp le v2, v34
    v38 = select v27, v35, v21
    v37 = select v38, v36, v21";
        assert_eq!(
            proven(&src(two)),
            vec![
                at("block2", 3),
                at("block2", 5),
                at("block2", 6),
                at("block2", 8)
            ]
        );
    }

    /// The guard's facts hold only where its true side was the way in: a
    /// second way into the preheader, or a base the loop redefines, proves
    /// nothing.
    #[test]
    fn count_down_proofs_need_the_guard_on_the_way_in() {
        let src = countdown_src(FULL, STEP, ("block5", "block6"))
            .replace("    v40 = fconst 1.0\n    return v40", "    jump block5");
        assert!(proven(&src).is_empty());
        let src = countdown_src(FULL, STEP, ("block5", "block6")).replace(
            "    v11 = iadd v3, v10",
            "    v50 = iconst 7\n    v51 = iadd v3, v50\n    v11 = iadd v51, v10",
        );
        // base + 7 is another base (defined in the loop): only x[c - 1].
        assert_eq!(proven(&src), vec![at("block2", 7)]);
    }
}
