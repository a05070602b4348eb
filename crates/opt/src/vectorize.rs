//! Two-lane loops: a counting loop whose iterations are independent apart
//! from a split sum's partial sums runs two iterations at a time in the
//! lanes of `f64x2` values, then the loop as it was finishes the last one.
//!
//! ```text
//! block1(i, p, q1, q2, q3):               block9:                          ; the guard, `hi' = hi - 1`
//!     brif (i < n), block2, block3            jump block10(i0, vpack p0 q1_0, vpack q2_0 q3_0)
//! block2:                                 block10(vi, A, B):               ; lanes: iterations i, i + 1
//!     t = fadd p, x[i]                        brif (vi < hi'), block11, block12
//!     jump block1(i + 1, q1, q2, q3, t)   block11:
//!                                             T = vfadd A, vload x, vi     ; x[vi], x[vi + 1]
//!                                             jump block10(vi + 2, B, T)
//!                                         block12:
//!                                             jump block1(vi, vlane0 A, vlane1 A, vlane0 B, vlane1 B)
//! ```
//!
//! **Exact.** Lane 0 runs iteration `i`, lane 1 iteration `i + 1`, each
//! operation on each lane the scalar operation it replaces
//! (`semantics::lanes_binary`): every value of every iteration is the
//! same bits. The two iterations' instructions interleave, which changes
//! nothing because nothing flows between them but the rotated partial
//! sums: the language puts the terms of iterations `n`, `n + 1`, `n + 2`,
//! `n + 3` in four partial sums (docs/language.md, "The order of a sum"),
//! which the back edge rotates (`p` receives `q1`, .., `q3` the new
//! value), so iterations `i` and `i + 1` add to `p` and `q1`: lanes 0 and
//! 1 of the vector `A`, and the vector `B` of `q2` and `q3` takes `A`'s
//! place on the back edge (`unroll` then unrolls the lanes' loop, and
//! each vector keeps its register). The vector loop runs while `i + 1 <
//! n`, so both lanes are iterations the loop runs; the loop itself, the
//! remainder, then runs what is left (at most one iteration) and leaves
//! as it did. No pass reassociates anything.
//!
//! **Which loops.** Innermost counting loops (`brif (icmp lt i, n)` on a
//! header parameter, `copy::loop_shape`) whose header holds only that test
//! and whose body is one straight path of blocks. The header's parameters
//! are the counter (`i + 1` on the back edge), values passed round
//! unchanged, and rotations `[h0, h1, .., h(2m - 1)]` of an even number of
//! `f64` places, the back edge passing `h(j + 1)` to `h(j)` and to the last
//! a value `t` the body computes, `h1` onwards read nowhere else. The body
//! computes:
//!
//! - `load`s and `store`s at `base + (i + c)` (`c` a constant), every one
//!   proven in bounds by `adze_ir::bounds` or, counting up from a constant
//!   `>= 0`, checked over its whole range by the lanes' guard (`Ranges`),
//!   so that neither lane can trap, and neither can trap earlier than the
//!   scalar loop would;
//! - `fadd fsub fmul fdiv fneg sqrt powi` of those and of loop-invariant
//!   values (which become both lanes, `vsplat`);
//! - pure computations of loop-invariant values, kept as they are.
//!
//! **Memory.** Lane 1's loads run before lane 0's stores, so no iteration
//! may read what the one before wrote (but for an array updated at
//! neighbouring elements, `Neighbour`, whose high stores go after every
//! low load). Within one array value every
//! access of a loop that stores is at the same `i + c`: each iteration
//! touches its own element. Two array values that may alias (`mem::may_alias`:
//! parameters, views) may be views at different offsets, so the vector
//! loop runs only when `apart a, b` holds for each such pair of a written
//! array and another it accesses (they share no element); else the scalar
//! loop runs.
//!
//! Measured in docs/performance.md (session 17).

use crate::analysis::{def_inst, iconst_of, Cfg, Scopes};
use crate::copy::entered_once;
use crate::mem::may_alias;
use adze_ir::bounds::{
    guard_facts, nonneg_fact, offset_form, zeros_before, zeros_lengths, Counter, LengthClasses,
    ROW_MAJOR_MAX,
};
use adze_ir::cfg::DominatorTree;
use adze_ir::{Block, BlockCall, CmpCond, Function, Inst, InstData, Opcode, Type, Value};
use std::collections::HashMap;

/// The largest loop (in instructions) that is vectorized.
pub const MAX_VECTOR_INSTS: usize = 200;

/// Functions above this many instructions are left alone (as `unroll`).
const MAX_FUNCTION_INSTS: usize = 20_000;

/// What the pass did to one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VectorizeStats {
    /// Loops given a two-lane copy.
    pub loops: usize,
    /// Of those, loops that update an array at neighbouring elements
    /// (one element carried from lane to lane, `vshift`).
    pub neighbours: usize,
    /// Of those, count-up loops whose lanes' guard checks index ranges or
    /// the bound (`Ranges`).
    pub ranged: usize,
    /// Of those, loops whose guard checks rows for every trip of an
    /// enclosing loop at once (`Ranges`, hoisted rows).
    pub hoisted: usize,
}

/// A `load` or `store` of the loop: its array, its index `base + (i + c)`
/// as `(base, c)`, which it is.
struct Access {
    array: Value,
    index: (Option<Value>, i64),
    store: bool,
    inst: Inst,
}

/// What a value of the loop is in the two-lane copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// The same in both lanes: defined before the loop, a constant, or a
    /// pure computation of such values. Kept a scalar.
    Uniform,
    /// `base + (i + c)`: the counter plus a constant, plus a uniform
    /// value or not; an index.
    Index(Option<Value>, i64),
    /// An f64 that differs per iteration: an `f64x2` in the copy.
    Lane,
    /// The second of a rotated pair: read only by the back edge.
    Passed,
}

/// The role of a header parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Counter,
    Invariant,
    /// `h0` of a rotation `[h0, h1, ..]`: the partial sum this iteration
    /// adds to; the back edge passes `h1` here.
    First,
    /// A later place of a rotation: the back edge passes the next here.
    Passed,
    /// The last place of a rotation: the back edge passes the new value
    /// here.
    Last,
}

struct Plan {
    header: Block,
    preheader: Block,
    latch: Block,
    /// The body's blocks, in the order they run (the header excluded).
    path: Vec<Block>,
    roles: Vec<Role>,
    /// The rotations: header positions `[h0, h1, .., h(2m - 1)]`, `h(j)`
    /// receiving `h(j + 1)` on the back edge and the last the value the
    /// body computes. Iteration `n` adds to `h0`, `n + 1` to `h1`, ..:
    /// the lanes' vector `j` holds `h(2j)` and `h(2j + 1)`.
    rotations: Vec<Vec<usize>>,
    dir: Dir,
    kinds: HashMap<Value, Kind>,
    /// Pairs of arrays that must be `apart` for the copy to run.
    guards: Vec<(Value, Value)>,
    /// Arrays updated at neighbouring elements (count-down loops), and
    /// what that does to the loop's other loads and stores.
    memory: Option<Memory>,
    /// Counting up: the index ranges the lanes' guard checks.
    ranges: Ranges,
}

/// What the lanes' guard of a count-up loop checks besides `apart`: that
/// the bound `n` of `hi = n + k` is `>= 0` when nothing else says so, and
/// that the accesses the bounds analysis does not prove, `a[base + (i +
/// c)]`, stay in `a` for every `i` from the constant `i0 >= 0` below `hi`:
/// `base >= 0`, `base <= len(a)`, `n <= (len(a) - base) - max(c + k, 0)`
/// (the atoms `adze_ir::bounds` reads back to prove the lanes' accesses,
/// "guard_facts"). When the guard fails the loop runs as written, with its
/// checks, and traps where it did.
///
/// **Hoisted rows.** When `n` is the counter `j` of an enclosing loop (`for
/// col in 0..row + 1`, `k <= 1`), a row without a base is checked for
/// every `j` at once: `hi_j <= len(a) - max(c + k - 1, 0)` (`j <= hi_j -
/// 1`). A row-major base `j * s` (`q[row * d + col]`, `points[i * d +
/// l]`: `j` an enclosing counter, `s` defined before `j`'s loop) is
/// checked as `s >= 0`, `s <= 2^31`, `hi_j <= 2^31`, `hi_j * s <= len(a)`,
/// and that the row stays within `s`: `hi_j <= s - max(c + k - 1, 0)` when
/// `n` is `j`, `n <= s - max(c + k, 0)` when `n` is defined before `j`'s
/// loop (`adze_ir::bounds`, `row_major`). Those atoms do not change with
/// `j`: `licm` lifts them out of `j`'s loop, and each row's guard is one
/// branch on a value computed once (GMM's second style tested six atoms
/// per row of its triangle).
#[derive(Default)]
struct Ranges {
    /// `n`, when the guard must test `n >= 0`.
    nonneg: Option<Value>,
    /// Where the counter starts, when not a constant: tested `>= 0` with
    /// the rows (`for j in i + 1..d`).
    start: Option<Value>,
    /// `(array, base, largest c)`, with a constant base folded into `c`.
    rows: Vec<(Value, Option<Value>, i64)>,
    /// `hi_j` when `n` is an enclosing loop's counter `j` (hoisted rows).
    outer: Option<Value>,
    /// Row-major bases (hoisted rows).
    strides: Vec<Stride>,
}

/// A row-major base `j * s` of an enclosing counter `j < hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stride {
    base: Value,
    hi: Value,
    s: Value,
    /// The lanes' bound `n` is `j` itself (else `n` is defined before
    /// `j`'s loop).
    n_is_j: bool,
}

impl Ranges {
    /// Does the guard check nothing of these?
    fn is_empty(&self) -> bool {
        self.nonneg.is_none() && self.rows.is_empty()
    }
}

/// Do the lanes of `p` start at an even counter (see `peel_odd_start`)?
/// A count-up loop that stores, with no partial sums to pair and no
/// neighbour array: its two-element stores then fall on the same pairs of
/// elements whatever the start, so a loop that runs again from the next
/// start (GMM's triangle, row after row from `i + 1`) loads pairs its last
/// run stored, which the CPU forwards from its store buffer, instead of
/// straddling two of them, which it cannot (docs/performance.md, session
/// 19).
fn aligns(func: &Function, p: &Plan) -> bool {
    matches!(p.dir, Dir::Up { .. })
        && p.rotations.is_empty()
        && !has_neighbours(p)
        && p.path.iter().any(|&b| {
            func.layout
                .block_insts(b)
                .iter()
                .any(|&i| func.dfg.inst(i).opcode() == Opcode::Store)
        })
}

/// Where the lanes are entered (`enter`, the lanes' header with the first
/// counter `i0`), a test first: when `i0` is odd and the loop runs
/// iteration `i0` (`i0 <= hi'`, the lanes' bound `hi - 1`), that
/// iteration runs alone, a copy of the body in a block of its own (its
/// loads and stores keep their checks and locations), and the lanes start
/// from `i0 + 1`. The same iterations run in the same order: iteration
/// `i0`, then the lanes' pairs, then the scalar loop's last one.
#[allow(clippy::too_many_arguments)]
fn peel_odd_start(
    func: &mut Function,
    p: &Plan,
    after: Block,
    entry: &BlockCall,
    hi2: Value,
    enter: BlockCall,
    like: Option<Inst>,
) -> BlockCall {
    let counter = counter_of(p);
    let i0 = entry.args[counter];
    let (test, single) = two_blocks_after(func, p, after);
    // The test: `i0 % 2 != 0` (a remainder by 2 cannot trap; a constant
    // start is odd here) and `i0 <= hi'`.
    let runs = value(func, test, icmp(CmpCond::Le, i0, hi2), Type::Bool, like);
    let both = if iconst_of(func, i0).is_some() {
        runs
    } else {
        let two = iconst(func, test, 2);
        let rem = InstData::Binary {
            op: Opcode::Irem,
            args: [i0, two],
        };
        let rem = value(func, test, rem, Type::I64, like);
        let zero = iconst(func, test, 0);
        let odd = value(func, test, icmp(CmpCond::Ne, rem, zero), Type::Bool, like);
        let no = value(
            func,
            test,
            InstData::BConst { imm: false },
            Type::Bool,
            None,
        );
        let both = InstData::Ternary {
            op: Opcode::Select,
            args: [odd, runs, no],
        };
        value(func, test, both, Type::Bool, None)
    };
    let br = InstData::Brif {
        cond: both,
        then_dest: BlockCall {
            block: single,
            args: Vec::new(),
        },
        else_dest: enter.clone(),
    };
    emit(func, test, br, like);
    let back = run_once(func, p, single, &entry.args);
    // `i0 + 1`: the copy of the back edge's, or a constant (which the
    // bounds proof reads as the lanes' least start).
    let next = match iconst_of(func, i0).and_then(|c| c.checked_add(1)) {
        Some(c) => iconst(func, single, c),
        None => back[counter],
    };
    let mut args = enter.args.clone();
    args[0] = next;
    emit(
        func,
        single,
        InstData::Jump {
            dest: BlockCall {
                block: enter.block,
                args,
            },
        },
        like,
    );
    BlockCall {
        block: test,
        args: Vec::new(),
    }
}

/// The `icmp` of `p`'s header, before its `brif` (`header_test`).
fn header_test_inst(func: &Function, p: &Plan) -> Inst {
    let insts = func.layout.block_insts(p.header);
    insts[insts.len() - 2]
}

/// Two new blocks laid out after `after`, in the inlined regions that
/// hold `p`'s loop: a test and the one iteration it guards.
fn two_blocks_after(func: &mut Function, p: &Plan, after: Block) -> (Block, Block) {
    let test = func.dfg.make_block();
    let single = func.dfg.make_block();
    func.layout.insert_block_after(test, after);
    func.layout.insert_block_after(single, test);
    for data in func.inlined.values_mut() {
        if data.blocks.contains(&p.header) {
            data.blocks.extend([test, single]);
        }
    }
    (test, single)
}

/// Appends to `block` one iteration of `p`'s loop: the header's
/// constants, then the body, with the header's parameters read from
/// `args`. Returns the copied back edge's arguments.
fn run_once(func: &mut Function, p: &Plan, block: Block, args: &[Value]) -> Vec<Value> {
    let params = func.dfg.block_params(p.header).to_vec();
    let mut map: HashMap<Value, Value> = params.iter().zip(args).map(|(&q, &a)| (q, a)).collect();
    let header_insts = func.layout.block_insts(p.header);
    let mut body: Vec<Inst> = header_insts[..header_insts.len() - 2].to_vec();
    body.extend(body_insts(func, p));
    for inst in body {
        let mut data = func.dfg.inst(inst).clone();
        data.map_uses(|u| map.get(&u).copied().unwrap_or(u));
        let results = func.dfg.inst_results(inst).to_vec();
        let types: Vec<Type> = results.iter().map(|&r| func.dfg.value_type(r)).collect();
        let copy = append(func, block, data, &types, Some(inst));
        for (&r, &n) in results.iter().zip(func.dfg.inst_results(copy)) {
            map.insert(r, n);
        }
    }
    let latch = func.layout.last_inst(p.latch).expect("a latch");
    let InstData::Jump { dest: back } = func.dfg.inst(latch) else {
        unreachable!("the latch jumps")
    };
    back.args
        .iter()
        .map(|a| map.get(a).copied().unwrap_or(*a))
        .collect()
}

/// Gives the loops it can a two-lane copy (see the module documentation).
pub fn vectorize_loops(func: &mut Function) -> VectorizeStats {
    let mut stats = VectorizeStats::default();
    if func.num_placed_insts() > MAX_FUNCTION_INSTS {
        return stats;
    }
    let cfg = Cfg::new(func);
    let doms = cfg.dominators();
    let scopes = Scopes::new(func);
    // What the JIT proves too (`a[i - 1]` in a loop from 1 included): the
    // pass runs after AD, so what it proves shapes no tape.
    let (safe, counters) = adze_ir::bounds::counters_below_start(func);
    let facts = Facts {
        cfg: &cfg,
        doms: &doms,
        scopes: &scopes,
        safe: &safe,
        zeros: &zeros_lengths(func),
        counters: &counters,
    };
    let plans: Vec<Plan> = cfg
        .innermost_loops(&doms)
        .iter()
        .filter_map(|l| plan(func, &facts, l.header, &l.blocks))
        .collect();
    for p in plans {
        stats.loops += 1;
        stats.neighbours += usize::from(has_neighbours(&p));
        stats.ranged += usize::from(!p.ranges.is_empty());
        stats.hoisted += usize::from(
            !p.ranges.rows.is_empty() && (p.ranges.outer.is_some() || !p.ranges.strides.is_empty()),
        );
        rewrite(func, &p);
    }
    stats
}

/// What `plan` knows of the function.
struct Facts<'a> {
    cfg: &'a Cfg,
    doms: &'a DominatorTree,
    scopes: &'a Scopes,
    /// The accesses `adze_ir::bounds` proves.
    safe: &'a cranelift_entity::EntitySet<Inst>,
    /// `adze_ir::bounds::zeros_lengths`.
    zeros: &'a [(Value, Block)],
    /// The counters `adze_ir::bounds` knows (`counters_below_start`).
    counters: &'a HashMap<Value, Counter>,
}

/// The latch and the preheader of a loop `copy::entered_once` takes,
/// left only from its header (to a block that may have other
/// predecessors: the lanes leave through the loop itself).
fn shape(
    func: &Function,
    cfg: &Cfg,
    scopes: &Scopes,
    header: Block,
    blocks: &[Block],
) -> Option<(Block, Block)> {
    let in_loop = |b: Block| blocks.contains(&b);
    let found = entered_once(func, cfg, scopes, header, blocks, MAX_VECTOR_INSTS)?;
    let leaves_from_header = blocks
        .iter()
        .all(|&b| b == header || cfg.succs(b).iter().all(|&s| in_loop(s)));
    leaves_from_header.then_some(found)
}

/// Which way a loop counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    /// `for i in lo..hi`: `brif (icmp lt i, hi), body, exit`, `i + 1`; the
    /// bound `hi = n + k` (`base` is `n`), `k <= 0`, with `n >= 0` known
    /// (`nonneg`) or tested before the lanes (then `k = 0`, `Ranges`).
    Up { base: Value, k: i64, nonneg: bool },
    /// Reverse mode's: `brif (icmp eq c, 0), exit, body`, `c - 1`,
    /// entered from the true side of `version`'s guard `ok`.
    Down { ok: Value },
}

/// The header's test: the counter, where the body starts, the direction.
fn header_test(
    func: &Function,
    header: Block,
    preheader: Block,
    facts: &Facts,
) -> Option<(Value, Block, Dir)> {
    let cfg = facts.cfg;
    let insts = func.layout.block_insts(header);
    let (&branch, rest) = insts.split_last()?;
    let (&test, consts) = rest.split_last()?;
    if consts
        .iter()
        .any(|&i| !matches!(func.dfg.inst(i), InstData::IConst { .. }))
    {
        return None;
    }
    let InstData::Brif {
        cond,
        then_dest,
        else_dest,
    } = func.dfg.inst(branch)
    else {
        return None;
    };
    if *cond != *func.dfg.inst_results(test).first()? {
        return None;
    }
    match *func.dfg.inst(test) {
        InstData::Cmp {
            op: Opcode::Icmp,
            cond: CmpCond::Lt,
            args: [i, hi],
        } => {
            // `hi = n + k`, `k <= 0`, `n >= 0`: then `hi - 1` cannot wrap.
            // `n` is `len a`, the length of a `zeros n` that has run, or
            // a value a guard above says is `>= 0`; else (`k = 0`) the
            // lanes' guard tests `hi >= 0` (`Ranges`).
            let (base, k) = offset_form(func, hi);
            let is_len = matches!(
                def_inst(func, base),
                Some(InstData::Unary {
                    op: Opcode::Len,
                    ..
                })
            ) || zeros_before(facts.zeros, facts.doms, base, header)
                || nonneg_fact(
                    func,
                    &guard_facts(func, facts.doms, header, |b| match cfg.preds(b) {
                        &[p] => Some(p),
                        _ => None,
                    }),
                    base,
                );
            // `k > i64::MIN`: `k - 1` is the lanes' bound's offset. A
            // positive `k` (`for col in 0..row + 1`) needs the ranges'
            // guard (`plan`): `n <= (len - base) - (c + k)` keeps `n + k`
            // from wrapping.
            let fine = (k <= 0 && k > i64::MIN && (is_len || k == 0))
                || (k > 0 && k <= i64::from(i32::MAX));
            (fine && then_dest.args.is_empty()).then_some((
                i,
                then_dest.block,
                Dir::Up {
                    base,
                    k,
                    nonneg: is_len,
                },
            ))
        }
        InstData::Cmp {
            op: Opcode::Icmp,
            cond: CmpCond::Eq,
            args: [c, zero],
        } if iconst_of(func, zero) == Some(0) && else_dest.args.is_empty() => {
            // The guard: the preheader's only predecessor branches to it
            // on its true side.
            let [g] = cfg.preds(preheader) else {
                return None;
            };
            match func.dfg.inst(func.layout.last_inst(*g)?) {
                InstData::Brif {
                    cond: ok,
                    then_dest: yes,
                    else_dest: no,
                } if yes.block == preheader && no.block != preheader => {
                    Some((c, else_dest.block, Dir::Down { ok: *ok }))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

fn plan(func: &Function, facts: &Facts, header: Block, blocks: &[Block]) -> Option<Plan> {
    let Facts {
        cfg, scopes, safe, ..
    } = *facts;
    let (latch, preheader) = shape(func, cfg, scopes, header, blocks)?;
    let in_loop = |b: Block| blocks.contains(&b);
    let params = func.dfg.block_params(header);
    let (i, first, dir) = header_test(func, header, preheader, facts)?;
    let counter = params.iter().position(|&p| p == i)?;
    if !in_loop(first) {
        return None;
    }
    // One straight path from the header's body to the latch.
    let mut path = Vec::new();
    let mut at = first;
    let back = loop {
        if path.contains(&at) || at == header || !func.dfg.block_params(at).is_empty() {
            return None;
        }
        path.push(at);
        let InstData::Jump { dest } = func.dfg.inst(func.layout.last_inst(at)?) else {
            return None;
        };
        if dest.block == header {
            break dest;
        }
        if !dest.args.is_empty() || !in_loop(dest.block) {
            return None;
        }
        at = dest.block;
    };
    if at != latch || path.len() + 1 != blocks.len() {
        return None;
    }
    // The header's parameters.
    let mut roles = vec![Role::Invariant; params.len()];
    let defined_in_body = |v: Value| func.def_block(v).is_some_and(|b| path.contains(&b));
    if !defined_in_body(back.args[counter]) {
        return None;
    }
    roles[counter] = Role::Counter;
    // Where the back edge passes another parameter of the header.
    let receives = |k: usize| {
        params
            .iter()
            .position(|&q| q == back.args[k])
            .filter(|&j| j != k)
    };
    let mut rotations = Vec::new();
    for k in 0..params.len() {
        // A rotation starts at a place no other place receives.
        if k == counter || receives(k).is_none() || back.args.contains(&params[k]) {
            continue;
        }
        let mut places = vec![k];
        let mut at = k;
        while let Some(j) = receives(at) {
            if places.contains(&j) || j == counter || roles[j] != Role::Invariant {
                return None;
            }
            places.push(j);
            at = j;
        }
        // An even number of places, all `f64`, the last receiving a value
        // the body computes.
        if places.len() % 2 != 0
            || !defined_in_body(back.args[at])
            || places
                .iter()
                .any(|&j| func.dfg.value_type(params[j]) != Type::F64)
        {
            return None;
        }
        for (n, &j) in places.iter().enumerate() {
            roles[j] = match n {
                0 => Role::First,
                n if n + 1 == places.len() => Role::Last,
                _ => Role::Passed,
            };
        }
        rotations.push(places);
    }
    // A parameter whose value the body computes but no pair claims.
    if (0..params.len()).any(|k| roles[k] == Role::Invariant && back.args[k] != params[k]) {
        return None;
    }
    // What each value is.
    let mut kinds: HashMap<Value, Kind> = HashMap::new();
    for (k, &p) in params.iter().enumerate() {
        let kind = match roles[k] {
            Role::Counter => Kind::Index(None, 0),
            Role::Invariant => Kind::Uniform,
            Role::First => Kind::Lane,
            Role::Passed | Role::Last => Kind::Passed,
        };
        kinds.insert(p, kind);
    }
    let before_loop = |v: Value| {
        func.def_block(v)
            .is_some_and(|b| b != header && !path.contains(&b))
    };
    let kind_of = |kinds: &HashMap<Value, Kind>, v: Value| -> Kind {
        kinds.get(&v).copied().unwrap_or(Kind::Uniform)
    };
    let mut accesses: Vec<Access> = Vec::new();
    let mut rows: Vec<(Value, Option<Value>, i64)> = Vec::new();
    // Where the counter starts: a constant `>= 0`, or a value before the
    // loop that the lanes' guard tests `>= 0` when it tests ranges.
    let (from_nonneg, start) = {
        let entry = func.layout.last_inst(preheader)?;
        let starts: Vec<Value> = func
            .dfg
            .inst(entry)
            .destinations()
            .iter()
            .filter(|d| d.block == header)
            .filter_map(|d| d.args.get(counter).copied())
            .collect();
        match starts.as_slice() {
            [a] if iconst_of(func, *a).is_some_and(|k| k >= 0) => (true, None),
            [a] if before_loop(*a) => (true, Some(*a)),
            _ => (false, None),
        }
    };
    // Arrays read at an index the same in both lanes (`xc[i]` in GMM's
    // triangle): the load runs once per trip.
    let mut uniform_loads: Vec<Value> = Vec::new();
    let step = match dir {
        Dir::Up { .. } => 1,
        Dir::Down { .. } => -1,
    };
    for &b in &path {
        let insts = func.layout.block_insts(b);
        for &inst in &insts[..insts.len() - 1] {
            let data = func.dfg.inst(inst);
            let args = data.args();
            let ks: Vec<Kind> = args.iter().map(|&a| kind_of(&kinds, a)).collect();
            if ks.contains(&Kind::Passed) {
                return None;
            }
            let all_uniform = ks.iter().all(|&k| k == Kind::Uniform);
            let f64_operands = args.iter().zip(&ks).all(|(&a, &k)| {
                k == Kind::Lane || (k == Kind::Uniform && func.dfg.value_type(a) == Type::F64)
            });
            let kind = if let Some((arr, idx)) = data.array_access() {
                // `load` and `store`: proven, at `base + (i + c)`, of an
                // array defined before the loop (the guards before the
                // lanes test the array itself), storing a lane or a
                // uniform value; or a proven load at a uniform index of an
                // array the loop does not store (below), whose value is
                // the same in every iteration.
                let store = data.opcode() == Opcode::Store;
                if !store
                    && all_uniform
                    && before_loop(arr)
                    && safe.contains(inst)
                    && func.dfg.value_type(func.dfg.inst_results(inst)[0]) == Type::F64
                {
                    uniform_loads.push(arr);
                    for &r in func.dfg.inst_results(inst) {
                        kinds.insert(r, Kind::Uniform);
                    }
                    continue;
                }
                let Kind::Index(b, c) = kind_of(&kinds, idx) else {
                    return None;
                };
                if ks[0] != Kind::Uniform
                    || !before_loop(arr)
                    || (store && !matches!(ks[2], Kind::Lane | Kind::Uniform))
                {
                    return None;
                }
                if !safe.contains(inst) {
                    // Counting up from a constant `>= 0`, the guard checks
                    // the range (`Ranges`).
                    let (base, c) = match b.map(|b| (b, iconst_of(func, b))) {
                        None => (None, c),
                        Some((_, Some(kb))) => (None, c.checked_add(kb)?),
                        Some((b, None)) if before_loop(b) => (Some(b), c),
                        Some(_) => return None,
                    };
                    if !matches!(dir, Dir::Up { .. })
                        || !from_nonneg
                        || !(0..=i64::from(i32::MAX)).contains(&c)
                    {
                        return None;
                    }
                    match rows.iter_mut().find(|r| r.0 == arr && r.1 == base) {
                        Some(r) => r.2 = r.2.max(c),
                        None => rows.push((arr, base, c)),
                    }
                }
                accesses.push(Access {
                    array: arr,
                    index: (b, c),
                    store,
                    inst,
                });
                (!store).then_some(Kind::Lane)
            } else {
                match *data {
                    InstData::Binary {
                        op: op @ (Opcode::Iadd | Opcode::Isub),
                        args: [x, y],
                    } if !all_uniform => {
                        let (kx, ky) = (kind_of(&kinds, x), kind_of(&kinds, y));
                        match (kx, ky, iconst_of(func, x), iconst_of(func, y)) {
                            // `x + d`, `x - d`, `d + y`.
                            (Kind::Index(b, c), _, _, Some(d)) => {
                                let d = if op == Opcode::Iadd {
                                    Some(d)
                                } else {
                                    d.checked_neg()
                                };
                                Some(Kind::Index(b, c.checked_add(d?)?))
                            }
                            (_, Kind::Index(b, c), Some(d), _) if op == Opcode::Iadd => {
                                Some(Kind::Index(b, c.checked_add(d)?))
                            }
                            // `base + (i + c)` either way round.
                            (Kind::Index(None, c), Kind::Uniform, _, None)
                                if op == Opcode::Iadd =>
                            {
                                Some(Kind::Index(Some(y), c))
                            }
                            (Kind::Uniform, Kind::Index(None, c), None, _)
                                if op == Opcode::Iadd =>
                            {
                                Some(Kind::Index(Some(x), c))
                            }
                            _ => return None,
                        }
                    }
                    _ if all_uniform => {
                        if !data.opcode().effects().is_pure() {
                            return None;
                        }
                        Some(Kind::Uniform)
                    }
                    InstData::Binary { op, .. } | InstData::Unary { op, .. }
                        if f64_operands && op.two_lanes().is_some() =>
                    {
                        Some(Kind::Lane)
                    }
                    InstData::Powi {
                        op: Opcode::Powi, ..
                    } if f64_operands => Some(Kind::Lane),
                    _ => return None,
                }
            };
            if let Some(kind) = kind {
                for &r in func.dfg.inst_results(inst) {
                    kinds.insert(r, kind);
                }
            }
        }
    }
    // The back edge: the counter's `i + 1`, lanes for the pairs.
    for (k, &a) in back.args.iter().enumerate() {
        let ok = match roles[k] {
            Role::Counter => kind_of(&kinds, a) == Kind::Index(None, step),
            Role::Last => kind_of(&kinds, a) == Kind::Lane,
            Role::First | Role::Passed | Role::Invariant => true,
        };
        if !ok {
            return None;
        }
    }
    // Indices may only index, and only the counter's `+ 1` leaves.
    for &b in &path {
        for &inst in func.layout.block_insts(b) {
            let data = func.dfg.inst(inst);
            let index_at = data.array_access().map(|_| 1);
            let derived_index = matches!(data.opcode(), Opcode::Iadd | Opcode::Isub)
                && func
                    .dfg
                    .inst_results(inst)
                    .first()
                    .is_some_and(|&r| matches!(kind_of(&kinds, r), Kind::Index(..)));
            for (n, &a) in data.args().iter().enumerate() {
                if matches!(kind_of(&kinds, a), Kind::Index(..))
                    && index_at != Some(n)
                    && !derived_index
                {
                    return None;
                }
            }
            for dest in data.destinations() {
                for (k, &a) in dest.args.iter().enumerate() {
                    if matches!(kind_of(&kinds, a), Kind::Index(..)) && k != counter {
                        return None;
                    }
                }
            }
        }
    }
    // Memory: see the module documentation.
    let down = matches!(dir, Dir::Down { .. });
    let memory = memory_plan(func, &path, &accesses, &before_loop, down);
    let mut guards = Vec::new();
    for w in accesses.iter().filter(|a| a.store) {
        let (s, cs) = (w.array, w.index);
        for &Access {
            array: a,
            index: ca,
            ..
        } in &accesses
        {
            if a == s {
                let neighbouring = memory
                    .as_ref()
                    .is_some_and(|m| m.neighbours.iter().any(|n| n.array == s));
                if ca != cs && !neighbouring {
                    return None;
                }
            } else {
                need_apart(func, &mut guards, s, a);
            }
        }
        // A uniform load's array: not this one, nor one that overlaps it.
        for &a in &uniform_loads {
            if a == s {
                return None;
            }
            need_apart(func, &mut guards, s, a);
        }
    }
    // The guard reads the bound before the loop.
    let nonneg = match dir {
        Dir::Up {
            base,
            nonneg: false,
            ..
        } => Some(base),
        _ => None,
    };
    let start = start.filter(|_| !rows.is_empty());
    let (outer, strides) = hoisted_rows(func, facts, dir, preheader, &rows);
    // An enclosing counter is `>= 0` (`adze_ir::bounds` knows it too).
    let nonneg = nonneg.filter(|_| outer.is_none());
    let ranges = Ranges {
        nonneg,
        start,
        rows,
        outer,
        strides,
    };
    if let Dir::Up { base, k, .. } = dir {
        if (!ranges.is_empty() && !before_loop(base)) || (k > 0 && ranges.rows.is_empty()) {
            return None;
        }
    }
    Some(Plan {
        header,
        preheader,
        latch,
        path,
        roles,
        rotations,
        dir,
        kinds,
        guards,
        memory,
        ranges,
    })
}

/// Which rows of a count-up loop entered from `preheader` the lanes'
/// guard may check for every trip of an enclosing loop (`Ranges`, hoisted
/// rows): `hi_j` when the bound `n` is an enclosing counter `j` (`k <=
/// 1`), and the row-major bases `j * s`.
fn hoisted_rows(
    func: &Function,
    facts: &Facts,
    dir: Dir,
    preheader: Block,
    rows: &[(Value, Option<Value>, i64)],
) -> (Option<Value>, Vec<Stride>) {
    let Dir::Up { base: n, k, .. } = dir else {
        return (None, Vec::new());
    };
    // A counter of a loop around this one: its body dominates the lanes.
    let enclosing = |j: Value| {
        facts
            .counters
            .get(&j)
            .filter(|c| c.lo >= 0 && facts.doms.dominates(c.body, preheader))
    };
    // Defined before `c`'s loop (or a constant): the same in every trip.
    let before = |v: Value, c: &Counter| {
        iconst_of(func, v).is_some()
            || func
                .def_block(v)
                .is_some_and(|d| d != c.header && facts.doms.dominates(d, c.header))
    };
    let outer = enclosing(n).filter(|_| k <= 1).map(|c| c.hi);
    let mut strides = Vec::new();
    for &(_, base, _) in rows {
        let Some(b) = base else { continue };
        let Some(InstData::Binary {
            op: Opcode::Imul,
            args: [p, q],
        }) = def_inst(func, b)
        else {
            continue;
        };
        let found = [(*p, *q), (*q, *p)].into_iter().find_map(|(j, s)| {
            let c = enclosing(j)?;
            let in_body = func
                .def_block(b)
                .is_some_and(|d| facts.doms.dominates(c.body, d));
            let n_is_j = n == j && k <= 1;
            (in_body && before(s, c) && (n_is_j || before(n, c))).then_some(Stride {
                base: b,
                hi: c.hi,
                s,
                n_is_j,
            })
        });
        if let Some(f) = found.filter(|f| !strides.contains(f)) {
            strides.push(f);
        }
    }
    (outer, strides)
}

/// An array a count-down loop updates at two neighbouring elements
/// (Rosenbrock's adjoint: iteration `j` adds to `x.d[j + 1]` and to
/// `x.d[j]`, and iteration `j - 1` reads `x.d[j]` back as its high element
/// `x.d[(j - 1) + 1]`). In lanes the low element's last value (a partial
/// sum) is not stored: the other lane, or the next trip, reads it as the
/// high element's first load (`vshift`), and only the high element's last
/// store writes memory, each element once, with the value the scalar loop
/// leaves there.
struct Neighbour {
    array: Value,
    base: Option<Value>,
    /// The low element's offset `o` (`base + (c + o)`); the high one is
    /// `o + 1`.
    low: i64,
    /// The high element's first load, the value it reads.
    load_high: Value,
    /// The high element's last store: after every low load in lanes
    /// (lane 0's high element is lane 1's low one).
    store_high: Inst,
    /// The low element's last store, and the value it stores.
    store_low: Inst,
    low_value: Value,
}

/// How the lanes treat a loop's memory. Every array the loop stores to is
/// `apart` from every other array it accesses (the guard) or cannot alias
/// it, so within one iteration an element is read and written only
/// through its own array value and index: a load after a store of the same
/// element reads the stored value (`forward`), and a store followed by
/// another of the same element is dead (`drop`). What is left, per
/// element, is a first load and a last store. Forward over reverse's
/// adjoints store a shadow and its tangent, then load and store both again
/// (`x.d[i] += t` twice for `x[i] * x[i]`); a count-down loop may also
/// update an array at neighbouring elements (`neighbours`).
struct Memory {
    neighbours: Vec<Neighbour>,
    /// A load's result → the value stored last before it, same element.
    forward: HashMap<Value, Value>,
    /// Stores a later store of the same element overwrites, and the
    /// forwarded loads.
    drop: Vec<Inst>,
}

/// The [`Memory`] plan of a loop: loads to forward and stores to drop,
/// and for a count-down loop (`down`) the arrays it stores to that are
/// accessed at two neighbouring offsets `o`, `o + 1` of one base, each
/// element first loaded and last stored, where no low element's last value
/// depends on a high element's first load (else the lanes would depend on
/// each other). `None` when there is nothing to forward, drop or carry, or
/// when a stored array is accessed otherwise (at two bases; at two offsets
/// counting up, or not neighbouring ones: then `plan`'s same-index rule
/// refuses the loop).
fn memory_plan(
    func: &Function,
    path: &[Block],
    accesses: &[Access],
    before_loop: &dyn Fn(Value) -> bool,
    down: bool,
) -> Option<Memory> {
    let order: Vec<Inst> = path
        .iter()
        .flat_map(|&b| func.layout.block_insts(b).iter().copied())
        .collect();
    let mut stored: Vec<Value> = accesses
        .iter()
        .filter(|a| a.store)
        .map(|a| a.array)
        .collect();
    stored.sort();
    stored.dedup();
    let mut memory = Memory {
        neighbours: Vec::new(),
        forward: HashMap::new(),
        drop: Vec::new(),
    };
    for &s in &stored {
        // In program order (`accesses` is).
        let mine: Vec<&Access> = accesses.iter().filter(|a| a.array == s).collect();
        let base = mine.first()?.index.0;
        // One base, and (for the elements read before the lanes and
        // written after them) one computed before the loop.
        if mine.iter().any(|a| a.index.0 != base) || base.is_some_and(|b| !before_loop(b)) {
            return None;
        }
        let mut offsets: Vec<i64> = mine.iter().map(|a| a.index.1).collect();
        offsets.sort();
        offsets.dedup();
        // Per element: forward loads after stores, drop all but the last
        // store; remember the first load and the last store.
        let mut ends = Vec::new();
        for &off in &offsets {
            let (mut first_load, mut last_store): (Option<Inst>, Option<Inst>) = (None, None);
            for a in mine.iter().filter(|a| a.index.1 == off) {
                if a.store {
                    if let Some(prev) = last_store {
                        memory.drop.push(prev);
                    }
                    last_store = Some(a.inst);
                } else if let Some(st) = last_store {
                    let stored_value = func.dfg.inst(st).args()[2];
                    let r = func.dfg.inst_results(a.inst)[0];
                    memory.forward.insert(r, stored_value);
                    memory.drop.push(a.inst);
                } else if let Some(first) = first_load {
                    // A second load before any store: the same value.
                    let r = func.dfg.inst_results(a.inst)[0];
                    memory.forward.insert(r, func.dfg.inst_results(first)[0]);
                    memory.drop.push(a.inst);
                } else {
                    first_load = Some(a.inst);
                }
            }
            ends.push((off, first_load, last_store));
        }
        match ends[..] {
            [_] => {}
            // The low element need not be read: `touch` may have found
            // that its load reads what a `fill` left (a first touch).
            [(o, _, Some(sl)), (o1, Some(lh), Some(sh))] if down && o1 == o + 1 => {
                memory.neighbours.push(Neighbour {
                    array: s,
                    base,
                    low: o,
                    load_high: func.dfg.inst_results(lh)[0],
                    store_high: sh,
                    store_low: sl,
                    low_value: func.dfg.inst(sl).args()[2],
                });
            }
            _ => return None,
        }
    }
    if memory.neighbours.is_empty() {
        return (!memory.drop.is_empty()).then_some(memory);
    }
    // No low value may depend on any high load (forwarded loads pass the
    // dependence of the value they stand for).
    let highs: Vec<Value> = memory.neighbours.iter().map(|n| n.load_high).collect();
    let tainted = taint(func, &order, &highs, &memory.forward);
    if memory
        .neighbours
        .iter()
        .any(|n| tainted.contains(&n.low_value))
    {
        return None;
    }
    Some(memory)
}

/// The values that depend on `roots` through the instructions `body` (in
/// order), a forwarded load depending on what it stands for.
fn taint(
    func: &Function,
    body: &[Inst],
    roots: &[Value],
    forward: &HashMap<Value, Value>,
) -> std::collections::HashSet<Value> {
    let mut tainted: std::collections::HashSet<Value> = roots.iter().copied().collect();
    for &i in body {
        let data = func.dfg.inst(i);
        let via_forward = func
            .dfg
            .inst_results(i)
            .first()
            .and_then(|r| forward.get(r))
            .is_some_and(|v| tainted.contains(v));
        if via_forward || data.args().iter().any(|a| tainted.contains(a)) {
            tainted.extend(func.dfg.inst_results(i).iter().copied());
        }
    }
    tainted
}

/// Appends `data`, an instruction of the result types `types`, to
/// `block`, with the source location of `like`.
fn append(
    func: &mut Function,
    block: Block,
    data: InstData,
    types: &[Type],
    like: Option<Inst>,
) -> Inst {
    let inst = func.dfg.make_inst(data, types);
    if let Some(like) = like {
        func.dfg.copy_srcloc(like, inst);
    }
    func.layout.append_inst(inst, block);
    inst
}

/// Appends `data` (a store or a branch) to `block`.
fn emit(func: &mut Function, block: Block, data: InstData, like: Option<Inst>) {
    append(func, block, data, &[], like);
}

/// Appends `data`, with one result of type `ty`, to `block`: the result.
fn value(func: &mut Function, block: Block, data: InstData, ty: Type, like: Option<Inst>) -> Value {
    let inst = append(func, block, data, &[ty], like);
    func.dfg.inst_results(inst)[0]
}

/// Inserts `data`, with one result of type `ty`, before the terminator
/// of `block` (where the lanes start, whose branch is already made): the
/// result.
fn before_end(func: &mut Function, block: Block, data: InstData, ty: Type) -> Value {
    let inst = func.dfg.make_inst(data, &[ty]);
    let n = func.layout.block_insts(block).len();
    func.layout.insert_inst(inst, block, n - 1);
    func.dfg.inst_results(inst)[0]
}

/// The header positions each vector's lanes 0 and 1 hold, rotation by
/// rotation: `(h(2j), h(2j + 1))` counting up; counting down lane 0 holds
/// the later iteration (the lower index), so `(h(2j + 1), h(2j))`.
fn lane_places(p: &Plan) -> Vec<(usize, usize)> {
    let down = matches!(p.dir, Dir::Down { .. });
    p.rotations
        .iter()
        .flat_map(|places| places.chunks(2))
        .map(|two| {
            if down {
                (two[1], two[0])
            } else {
                (two[0], two[1])
            }
        })
        .collect()
}

/// The body's instructions in the order they run, without the path's
/// jumps.
fn body_insts(func: &Function, p: &Plan) -> Vec<Inst> {
    let mut body = Vec::new();
    for &b in &p.path {
        let insts = func.layout.block_insts(b);
        body.extend_from_slice(&insts[..insts.len() - 1]);
    }
    body
}

/// `icmp cond, a, b`.
fn icmp(cond: CmpCond, a: Value, b: Value) -> InstData {
    InstData::Cmp {
        op: Opcode::Icmp,
        cond,
        args: [a, b],
    }
}

/// The stored array `s` and another the loop accesses, `a`, must be
/// `apart` for the lanes to run, unless they cannot alias (once per pair).
fn need_apart(func: &Function, guards: &mut Vec<(Value, Value)>, s: Value, a: Value) {
    if may_alias(func, s, a) && !guards.contains(&(s, a)) && !guards.contains(&(a, s)) {
        guards.push((s, a));
    }
}

/// Does the loop update an array at neighbouring elements (`Memory`)?
fn has_neighbours(p: &Plan) -> bool {
    p.memory.as_ref().is_some_and(|m| !m.neighbours.is_empty())
}

/// The position of the counter among the header's parameters.
fn counter_of(p: &Plan) -> usize {
    p.roles
        .iter()
        .position(|&r| r == Role::Counter)
        .expect("a counter")
}

fn iconst(func: &mut Function, block: Block, imm: i64) -> Value {
    value(func, block, InstData::IConst { imm }, Type::I64, None)
}

/// `base + (c + off)`, appended to `block`: the element a scalar access
/// reaches for the counter `c` (a neighbour array's, before and after the
/// lanes; bounds-checked by the JIT, in bounds by `version`'s guard).
fn element(func: &mut Function, block: Block, c: Value, off: i64, base: Option<Value>) -> Value {
    let mut at = c;
    if off != 0 {
        let k = iconst(func, block, off);
        let add = InstData::Binary {
            op: Opcode::Iadd,
            args: [c, k],
        };
        at = value(func, block, add, Type::I64, None);
    }
    match base {
        None => at,
        Some(b) => {
            let add = InstData::Binary {
                op: Opcode::Iadd,
                args: [b, at],
            };
            value(func, block, add, Type::I64, None)
        }
    }
}

/// The two-lane copy's values as it is built.
struct Lanes {
    /// Body value → its value in the copy (scalar or `f64x2`).
    map: HashMap<Value, Value>,
    /// Uniform f64 → its `vsplat`.
    splats: HashMap<Value, Value>,
    /// Offset `c` → `vi + c`.
    indices: HashMap<i64, Value>,
    /// `(vc - 2) + 1`, a count-down loop's index of offset 0 once made.
    plus_one: Option<Value>,
}

impl Lanes {
    fn scalar(&self, v: Value) -> Value {
        self.map.get(&v).copied().unwrap_or(v)
    }
}

fn rewrite(func: &mut Function, p: &Plan) {
    let kind = |v: Value| p.kinds.get(&v).copied().unwrap_or(Kind::Uniform);
    let down = matches!(p.dir, Dir::Down { .. });
    // New blocks, laid out just before the loop's header: the guard
    // (count-up loops; a count-down loop's is `version`'s, and its
    // preheader enters the lanes), the lanes' header, body and exit.
    let pos = func
        .layout
        .blocks()
        .iter()
        .position(|&b| b == p.header)
        .expect("the header is placed");
    let before = func.layout.blocks()[pos.saturating_sub(1)];
    let needs_entry = !down || !p.guards.is_empty() || has_neighbours(p);
    let mut new_blocks = Vec::new();
    let mut prev = before;
    for _ in 0..(if needs_entry { 4 } else { 3 }) {
        let b = func.dfg.make_block();
        func.layout.insert_block_after(b, prev);
        new_blocks.push(b);
        prev = b;
    }
    for data in func.inlined.values_mut() {
        if data.blocks.contains(&p.header) {
            data.blocks.extend(new_blocks.iter().copied());
        }
    }
    let (vh, vb, vx) = {
        let n = new_blocks.len();
        (new_blocks[n - 3], new_blocks[n - 2], new_blocks[n - 1])
    };
    let pre_jump = func.layout.last_inst(p.preheader).expect("a terminator");
    let InstData::Jump { dest: entry } = func.dfg.inst(pre_jump).clone() else {
        unreachable!("loop_shape: entered by a jump");
    };
    let like = Some(pre_jump);
    // `ve`: where the lanes start (the first lanes, splats); `gate`: where
    // the `apart` tests go, and what they are joined to.
    let (gate, ve, mut ok) = match p.dir {
        Dir::Up { .. } => {
            let vp = new_blocks[0];
            *func.dfg.inst_mut(pre_jump) = InstData::Jump {
                dest: BlockCall {
                    block: vp,
                    args: Vec::new(),
                },
            };
            (vp, vp, None)
        }
        Dir::Down { ok } => {
            func.layout.remove_inst(pre_jump);
            let ve = if needs_entry {
                new_blocks[0]
            } else {
                p.preheader
            };
            (p.preheader, ve, Some(ok))
        }
    };
    // A neighbour array's first high element is read before the lanes and
    // its last low one written after them, at the elements of counters
    // `c0` and `c0 - 1`: in bounds when the loop runs at least one trip
    // (`c0 > 1`), maybe not when it runs no iteration at all (`c0 = 0`,
    // `x.d[c - 2]`). So such lanes start only from `c0 > 1`.
    let mut tests: Vec<InstData> = p
        .guards
        .iter()
        .map(|&(a, b)| InstData::Binary {
            op: Opcode::Apart,
            args: [a, b],
        })
        .collect();
    // A count-up loop's ranges (`Ranges`); the hoisted rows' atoms apart.
    let ranged = !p.ranges.is_empty();
    let mut hoisted: Vec<InstData> = Vec::new();
    if let (Dir::Up { base: n, k, .. }, true) = (p.dir, ranged) {
        let zero = iconst(func, gate, 0);
        let isub = |a, b| InstData::Binary {
            op: Opcode::Isub,
            args: [a, b],
        };
        // `v - c`, or `v` for `c = 0`.
        let minus = |func: &mut Function, v: Value, c: i64| {
            if c == 0 {
                return v;
            }
            let c = iconst(func, gate, c);
            value(func, gate, isub(v, c), Type::I64, like)
        };
        if let Some(n) = p.ranges.nonneg {
            tests.push(icmp(CmpCond::Ge, n, zero));
        }
        if let Some(i0) = p.ranges.start {
            tests.push(icmp(CmpCond::Ge, i0, zero));
        }
        // Rows of arrays of one length (`samelen`s of the entry block)
        // with one base are one test, with the largest `c`; a base is
        // tested `>= 0` once. `adze_ir::bounds` proves each array's
        // accesses by the same classes.
        let classes = LengthClasses::of_entry_block(func);
        let mut rows: Vec<(Value, Option<Value>, i64)> = Vec::new();
        for &(arr, base, c) in &p.ranges.rows {
            match rows
                .iter_mut()
                .find(|r| classes.rep(r.0) == classes.rep(arr) && r.1 == base)
            {
                Some(r) => r.2 = r.2.max(c),
                None => rows.push((arr, base, c)),
            }
        }
        let mut nonneg: Vec<Value> = Vec::new();
        for (arr, base, c) in rows {
            let len = InstData::Unary {
                op: Opcode::Len,
                arg: arr,
            };
            let len = value(func, gate, len, Type::I64, like);
            // Hoisted rows (`Ranges`): `0 <= c < 2^31`, `k <= 1`.
            let c1 = (c + k - 1).max(0);
            let stride = base.and_then(|b| p.ranges.strides.iter().find(|r| r.base == b));
            match (base, p.ranges.outer, stride) {
                (None, Some(hi_j), _) => {
                    let lim = minus(func, len, c1);
                    hoisted.push(icmp(CmpCond::Le, hi_j, lim));
                    continue;
                }
                (
                    Some(_),
                    _,
                    Some(&Stride {
                        hi: hi_j,
                        s,
                        n_is_j,
                        ..
                    }),
                ) => {
                    if iconst_of(func, s).is_none() {
                        hoisted.push(icmp(CmpCond::Ge, s, zero));
                    }
                    let max = iconst(func, gate, ROW_MAJOR_MAX);
                    hoisted.push(icmp(CmpCond::Le, s, max));
                    hoisted.push(icmp(CmpCond::Le, hi_j, max));
                    let product = InstData::Binary {
                        op: Opcode::Imul,
                        args: [hi_j, s],
                    };
                    let product = value(func, gate, product, Type::I64, like);
                    hoisted.push(icmp(CmpCond::Le, product, len));
                    let (x, c0) = if n_is_j {
                        (hi_j, c1)
                    } else {
                        (n, (c + k).max(0))
                    };
                    let lim = minus(func, s, c0);
                    hoisted.push(icmp(CmpCond::Le, x, lim));
                    continue;
                }
                _ => {}
            }
            let mut lim = len;
            if let Some(b) = base {
                if !nonneg.contains(&b) {
                    nonneg.push(b);
                    tests.push(icmp(CmpCond::Ge, b, zero));
                }
                tests.push(icmp(CmpCond::Le, b, len));
                lim = value(func, gate, isub(len, b), Type::I64, like);
            }
            // `0 <= c < 2^31` and `k < 2^31`: no overflow.
            let lim = minus(func, lim, (c + k).max(0));
            tests.push(icmp(CmpCond::Le, n, lim));
        }
    }
    if has_neighbours(p) {
        let one = iconst(func, gate, 1);
        tests.push(icmp(CmpCond::Gt, entry.args[counter_of(p)], one));
    }
    // `a && b` is `select a, b, false`: one `false` for all of them. The
    // tests first, joined to a count-down loop's guard last: the `apart`
    // tests of a loop inside another depend only on the arrays, so their
    // conjunction leaves the outer loops (`licm`) when it is not joined
    // to the guard of this trip (kmeans' `dir`: seven pairs per point and
    // centroid).
    let mut no = None;
    let mut and = |func: &mut Function, o: Value, t: Value| {
        let f = *no.get_or_insert_with(|| {
            value(
                func,
                gate,
                InstData::BConst { imm: false },
                Type::Bool,
                None,
            )
        });
        value(
            func,
            gate,
            InstData::Ternary {
                op: Opcode::Select,
                args: [o, t, f],
            },
            Type::Bool,
            None,
        )
    };
    // The other tests (ranges, a neighbour's trip) as a balanced tree: a
    // chain makes each `and` wait for the one before (GMM's second style
    // tests six atoms per row of its triangle).
    let tests: Vec<Value> = tests
        .into_iter()
        .map(|test| value(func, gate, test, Type::Bool, like))
        .collect();
    let (aparts, rest) = tests.split_at(p.guards.len());
    let mut tree = |func: &mut Function, mut rest: Vec<Value>| {
        while rest.len() > 1 {
            let mut level = Vec::with_capacity(rest.len().div_ceil(2));
            for pair in rest.chunks(2) {
                level.push(match *pair {
                    [a, b] => and(func, a, b),
                    [a] => a,
                    _ => unreachable!("chunks of two"),
                });
            }
            rest = level;
        }
        rest.pop()
    };
    // The hoisted rows' atoms, each once, joined before this trip's: their
    // conjunction with the `apart` tests is invariant in the rows' loop.
    let mut once: Vec<InstData> = Vec::new();
    for test in hoisted {
        if !once.contains(&test) {
            once.push(test);
        }
    }
    let once = once
        .into_iter()
        .map(|test| value(func, gate, test, Type::Bool, like))
        .collect();
    let hoisted = tree(func, once);
    let rest = tree(func, rest.to_vec());
    ok = (aparts.iter().copied())
        .chain(hoisted)
        .chain(rest)
        .chain(ok)
        .reduce(|o, t| and(func, o, t));
    if gate != ve {
        // A count-down loop's `apart` tests, joined to `version`'s guard
        // (whose facts prove the lanes' indices).
        let data = InstData::Brif {
            cond: ok.expect("a guard"),
            then_dest: BlockCall {
                block: ve,
                args: Vec::new(),
            },
            else_dest: entry.clone(),
        };
        emit(func, gate, data, like);
        ok = None;
    } else if down {
        ok = None;
    }
    // The bound of a count-up loop's lanes: `hi' = len a + (k - 1)`.
    let hi2 = match p.dir {
        Dir::Up { base, k, .. } => {
            let km1 = iconst(func, ve, k - 1);
            Some(value(
                func,
                ve,
                InstData::Binary {
                    op: Opcode::Iadd,
                    args: [base, km1],
                },
                Type::I64,
                like,
            ))
        }
        Dir::Down { .. } => None,
    };
    // The first lanes (`lane_places`).
    let params = func.dfg.block_params(p.header).to_vec();
    let mut firsts = Vec::new();
    for (l0, l1) in lane_places(p) {
        let v = value(
            func,
            ve,
            InstData::Binary {
                op: Opcode::Vpack,
                args: [entry.args[l0], entry.args[l1]],
            },
            Type::F64x2,
            like,
        );
        firsts.push(v);
    }
    let counter = counter_of(p);
    let vi = func.dfg.append_block_param(vh, Type::I64);
    let vs: Vec<Value> = firsts
        .iter()
        .map(|_| func.dfg.append_block_param(vh, Type::F64x2))
        .collect();
    let mut into_vh = vec![entry.args[counter]];
    into_vh.extend(&firsts);
    // A neighbour array: the high element of the first iteration, as
    // memory holds it, is what the first trip's lane 1 reads.
    let neighbours: &[Neighbour] = p.memory.as_ref().map_or(&[], |m| &m.neighbours);
    let pending: Vec<Value> = neighbours
        .iter()
        .map(|n| {
            let at = element(func, ve, entry.args[counter], n.low + 1, n.base);
            let load = InstData::Binary {
                op: Opcode::Load,
                args: [n.array, at],
            };
            let x = value(func, ve, load, Type::F64, like);
            let splat = InstData::Unary {
                op: Opcode::Vsplat,
                arg: x,
            };
            let first = value(func, ve, splat, Type::F64x2, like);
            into_vh.push(first);
            func.dfg.append_block_param(vh, Type::F64x2)
        })
        .collect();
    let mut enter = BlockCall {
        block: vh,
        args: into_vh,
    };
    // A constant even start needs no test.
    let even = iconst_of(func, entry.args[counter]).is_some_and(|c| c % 2 == 0);
    if let (Some(h), true, false) = (hi2, aligns(func, p), even) {
        enter = peel_odd_start(func, p, ve, &entry, h, enter, like);
    }
    if ranged {
        // The guard's true side, a block of its own: `adze_ir::bounds`
        // proves the lanes' accesses from the guards whose true side
        // dominates the loop (`guard_facts`).
        let vt = func.dfg.make_block();
        func.layout.insert_block_after(vt, ve);
        for data in func.inlined.values_mut() {
            if data.blocks.contains(&p.header) {
                data.blocks.push(vt);
            }
        }
        emit(func, vt, InstData::Jump { dest: enter }, like);
        enter = BlockCall {
            block: vt,
            args: Vec::new(),
        };
    }
    let data = match ok {
        Some(c) => InstData::Brif {
            cond: c,
            then_dest: enter,
            else_dest: entry.clone(),
        },
        None => InstData::Jump { dest: enter },
    };
    emit(func, ve, data, like);

    // The lanes' header: `vi < hi'`, or `vc > 1`.
    let test = header_test_inst(func, p);
    let (cond, bound) = match hi2 {
        Some(h) => (CmpCond::Lt, h),
        None => (CmpCond::Gt, iconst(func, vh, 1)),
    };
    let c = value(func, vh, icmp(cond, vi, bound), Type::Bool, Some(test));
    let to = |block| BlockCall {
        block,
        args: Vec::new(),
    };
    emit(
        func,
        vh,
        InstData::Brif {
            cond: c,
            then_dest: to(vb),
            else_dest: to(vx),
        },
        Some(test),
    );

    // The body, two iterations in lanes.
    let mut lanes = Lanes {
        map: HashMap::new(),
        splats: HashMap::new(),
        indices: HashMap::new(),
        plus_one: None,
    };
    // Each rotation's first vector holds `h0`, the partial sum this
    // iteration adds to.
    let mut at = 0;
    for places in &p.rotations {
        lanes.map.insert(params[places[0]], vs[at]);
        at += places.len() / 2;
    }
    for (k, &r) in p.roles.iter().enumerate() {
        if r == Role::Invariant {
            lanes.map.insert(params[k], entry.args[k]);
        }
    }
    // The header's constants (which do not dominate the lanes' body).
    let header_insts = func.layout.block_insts(p.header).to_vec();
    for &inst in &header_insts[..header_insts.len() - 2] {
        let data = func.dfg.inst(inst).clone();
        let r = before_end(func, ve, data, Type::I64);
        lanes.map.insert(func.dfg.inst_results(inst)[0], r);
    }
    let back_args = match func
        .dfg
        .inst(func.layout.last_inst(p.latch).expect("a latch"))
    {
        InstData::Jump { dest } => dest.args.clone(),
        _ => unreachable!("the latch jumps"),
    };
    // Both lanes of `v`: a lane value's copy, or a splat of a uniform one
    // (where the lanes start unless computed in the body).
    let vector = |func: &mut Function, lanes: &mut Lanes, v: Value| -> Value {
        if kind(v) == Kind::Lane {
            return lanes.map[&v];
        }
        if let Some(&s) = lanes.splats.get(&v) {
            return s;
        }
        let x = lanes.scalar(v);
        let data = InstData::Unary {
            op: Opcode::Vsplat,
            arg: x,
        };
        let s = if func.def_block(x) == Some(vb) {
            value(func, vb, data, Type::F64x2, None)
        } else {
            before_end(func, ve, data, Type::F64x2)
        };
        lanes.splats.insert(v, s);
        s
    };
    // `vi + off`, made once.
    let index_of = |func: &mut Function, lanes: &mut Lanes, off: i64| -> Value {
        match lanes.indices.get(&off) {
            Some(&x) => x,
            None if off == 0 => vi,
            None => {
                let (op, k) = if off < 0 {
                    (Opcode::Isub, -off)
                } else {
                    (Opcode::Iadd, off)
                };
                let k = iconst(func, vb, k);
                let x = value(
                    func,
                    vb,
                    InstData::Binary { op, args: [vi, k] },
                    Type::I64,
                    None,
                );
                lanes.indices.insert(off, x);
                x
            }
        }
    };
    // The index of lane 0 of an access at `base + (i + c)`: `vi + c`
    // counting up; counting down lane 0 is the later iteration, whose
    // counter is `vc - 1`: `vc - (1 - c)` (the form `adze_ir::bounds`
    // proves).
    let index = |func: &mut Function, lanes: &mut Lanes, base: Option<Value>, c: i64| -> Value {
        if down && c == 0 && base.is_none() {
            // `(vc - 2) + 1`: the form whose two elements `adze_ir::bounds`
            // proves from a guard on `base + (c - 1)` with `base = 1`.
            if let Some(x) = lanes.plus_one {
                return x;
            }
            let t = index_of(func, lanes, -2);
            let one = iconst(func, vb, 1);
            let add = InstData::Binary {
                op: Opcode::Iadd,
                args: [t, one],
            };
            let x = value(func, vb, add, Type::I64, None);
            lanes.plus_one = Some(x);
            return x;
        }
        let off = if down { c - 1 } else { c };
        let at = index_of(func, lanes, off);
        match base {
            None => at,
            Some(b) => value(
                func,
                vb,
                InstData::Binary {
                    op: Opcode::Iadd,
                    args: [lanes.scalar(b), at],
                },
                Type::I64,
                None,
            ),
        }
    };
    // The body's instructions in order; with a neighbour array, first
    // those that do not depend on its high load, then (after the load's
    // lanes are made from the low store's) those that do.
    let mut body = body_insts(func, p);
    let split = match &p.memory {
        None => body.len(),
        Some(m) => {
            let highs: Vec<Value> = m.neighbours.iter().map(|n| n.load_high).collect();
            let tainted = taint(func, &body, &highs, &m.forward);
            // The high stores go after the split whatever they store:
            // lane 0's high element is lane 1's low one, which lane 1
            // loads first (in the scalar loop, the iteration before).
            let high_stores: Vec<Inst> = m.neighbours.iter().map(|n| n.store_high).collect();
            let (mut first, then): (Vec<Inst>, Vec<Inst>) = body.iter().partition(|&&i| {
                func.dfg
                    .inst_results(i)
                    .first()
                    .is_none_or(|r| !tainted.contains(r))
                    && !func.dfg.inst(i).args().iter().any(|a| tainted.contains(a))
                    && !high_stores.contains(&i)
            });
            let k = first.len();
            first.extend(then);
            body = first;
            k
        }
    };
    let mut carried = Vec::new();
    for k in 0..=body.len() {
        if k == split {
            for (n, &prev) in neighbours.iter().zip(&pending) {
                // The high element's lanes: lane 0 reads what lane 1
                // stored low, lane 1 what the last trip's lane 0 did.
                let e = vector(func, &mut lanes, n.low_value);
                let shift = InstData::Binary {
                    op: Opcode::Vshift,
                    args: [e, prev],
                };
                let a = value(func, vb, shift, Type::F64x2, None);
                lanes.map.insert(n.load_high, a);
                carried.push(e);
            }
        }
        let Some(&inst) = body.get(k) else {
            break;
        };
        if let Some(m) = &p.memory {
            let first_result = func.dfg.inst_results(inst).first().copied();
            if let Some(v) = first_result.and_then(|r| m.forward.get(&r)) {
                // A load of what this iteration stored: the stored lanes.
                let lanes_of = vector(func, &mut lanes, *v);
                lanes.map.insert(first_result.expect("a load"), lanes_of);
                continue;
            }
            let high_load = neighbours.iter().any(|n| first_result == Some(n.load_high));
            let low_store = neighbours.iter().any(|n| inst == n.store_low);
            if high_load || low_store || m.drop.contains(&inst) {
                continue;
            }
        }
        {
            let data = func.dfg.inst(inst).clone();
            let results = func.dfg.inst_results(inst).to_vec();
            let result_kind = results.first().map(|&r| kind(r));
            match data {
                InstData::Binary {
                    op: Opcode::Load,
                    args: [arr, idx],
                } if kind(idx) != Kind::Uniform => {
                    let Kind::Index(base, c) = kind(idx) else {
                        unreachable!("planned")
                    };
                    let at = index(func, &mut lanes, base, c);
                    let v = value(
                        func,
                        vb,
                        InstData::Binary {
                            op: Opcode::Vload,
                            args: [arr, at],
                        },
                        Type::F64x2,
                        Some(inst),
                    );
                    lanes.map.insert(results[0], v);
                }
                InstData::Ternary {
                    op: Opcode::Store,
                    args: [arr, idx, x],
                } => {
                    let Kind::Index(base, c) = kind(idx) else {
                        unreachable!("planned")
                    };
                    let at = index(func, &mut lanes, base, c);
                    let xv = vector(func, &mut lanes, x);
                    emit(
                        func,
                        vb,
                        InstData::Ternary {
                            op: Opcode::Vstore,
                            args: [arr, at, xv],
                        },
                        Some(inst),
                    );
                }
                _ if matches!(result_kind, Some(Kind::Index(..))) => {}
                _ if result_kind == Some(Kind::Lane) => {
                    let op = data.opcode();
                    let new = match data {
                        InstData::Unary { arg, .. } => InstData::Unary {
                            op: op.two_lanes().expect("planned"),
                            arg: vector(func, &mut lanes, arg),
                        },
                        InstData::Binary { args: [x, y], .. } => {
                            let x = vector(func, &mut lanes, x);
                            let y = vector(func, &mut lanes, y);
                            InstData::Binary {
                                op: op.two_lanes().expect("planned"),
                                args: [x, y],
                            }
                        }
                        InstData::Powi { arg, exp, .. } => InstData::Powi {
                            op: Opcode::Vpowi,
                            arg: vector(func, &mut lanes, arg),
                            exp,
                        },
                        _ => unreachable!("planned"),
                    };
                    let v = value(func, vb, new, Type::F64x2, Some(inst));
                    lanes.map.insert(results[0], v);
                }
                mut data => {
                    // Uniform: the computation itself, once per trip.
                    data.map_uses(|u| lanes.scalar(u));
                    let types: Vec<Type> =
                        results.iter().map(|&r| func.dfg.value_type(r)).collect();
                    let copy = append(func, vb, data, &types, Some(inst));
                    for (&r, &n) in results.iter().zip(func.dfg.inst_results(copy)) {
                        lanes.map.insert(r, n);
                    }
                }
            }
        }
    }
    // The back edge: `vi + 2` or `vc - 2` (counting down, the index of
    // lane 0 at offset -1 is that value already), the pairs' new lanes.
    let next = index_of(func, &mut lanes, if down { -2 } else { 2 });
    // A rotation's vectors move one place towards the first; the last
    // receives the new lanes.
    let mut args = vec![next];
    let mut at = 0;
    for places in &p.rotations {
        let m = places.len() / 2;
        args.extend(&vs[at + 1..at + m]);
        args.push(lanes.map[&back_args[places[places.len() - 1]]]);
        at += m;
    }
    args.extend(carried);
    let latch_jump = func.layout.last_inst(p.latch);
    emit(
        func,
        vb,
        InstData::Jump {
            dest: BlockCall { block: vh, args },
        },
        latch_jump,
    );

    // The way out: the loop runs what is left, from the lanes; a
    // neighbour array's pending low element goes to memory, where the
    // loop's next iteration reads it as its high one.
    for (n, &prev) in neighbours.iter().zip(&pending) {
        let at = element(func, vx, vi, n.low + 1, n.base);
        let x = value(
            func,
            vx,
            InstData::Unary {
                op: Opcode::Vlane0,
                arg: prev,
            },
            Type::F64,
            None,
        );
        let store = InstData::Ternary {
            op: Opcode::Store,
            args: [n.array, at, x],
        };
        emit(func, vx, store, Some(n.store_low));
    }
    let mut rest = entry.args.clone();
    rest[counter] = vi;
    for ((l0, l1), &v) in lane_places(p).into_iter().zip(&vs) {
        for (pos, op) in [(l0, Opcode::Vlane0), (l1, Opcode::Vlane1)] {
            rest[pos] = value(func, vx, InstData::Unary { op, arg: v }, Type::F64, None);
        }
    }
    let dest = match (p.dir, ranged) {
        (Dir::Up { .. }, true) => last_in_range(func, p, vx, rest, like),
        _ => BlockCall {
            block: p.header,
            args: rest,
        },
    };
    emit(func, vx, InstData::Jump { dest }, like);
}

/// Where the lanes of a guarded count-up loop leave to (`vectorize`, the
/// ranges' guard): the iteration they leave, if the loop runs it, runs in
/// a copy of the body below the guard, then the loop's header finds its
/// counter at the bound and leaves. `rem(i)` tests `i < hi` like the
/// header, so `adze_ir::bounds` reads it as a counted loop (entered from
/// the lanes, which leave with `i >= lo`) and proves the copy's accesses
/// from the guard's atoms, as the lanes': the last element of an odd
/// row (GMM's triangle) is read without checks. The same iterations run
/// in the same order.
fn last_in_range(
    func: &mut Function,
    p: &Plan,
    after: Block,
    rest: Vec<Value>,
    like: Option<Inst>,
) -> BlockCall {
    let counter = counter_of(p);
    let (rem, single) = two_blocks_after(func, p, after);
    let i = func.dfg.append_block_param(rem, Type::I64);
    let mut args = rest.clone();
    args[counter] = i;
    // The header's test, on `i`.
    let test = header_test_inst(func, p);
    let InstData::Cmp { args: [_, hi], .. } = *func.dfg.inst(test) else {
        unreachable!("a count-up loop's test")
    };
    let runs = value(func, rem, icmp(CmpCond::Lt, i, hi), Type::Bool, Some(test));
    emit(
        func,
        rem,
        InstData::Brif {
            cond: runs,
            then_dest: BlockCall {
                block: single,
                args: Vec::new(),
            },
            else_dest: BlockCall {
                block: p.header,
                args: args.clone(),
            },
        },
        Some(test),
    );
    let back = run_once(func, p, single, &args);
    let latch = func.layout.last_inst(p.latch);
    emit(
        func,
        single,
        InstData::Jump {
            dest: BlockCall {
                block: p.header,
                args: back,
            },
        },
        latch.or(like),
    );
    BlockCall {
        block: rem,
        args: vec![rest[counter]],
    }
}
