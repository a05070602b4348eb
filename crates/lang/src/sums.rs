//! Sums in four interleaved partial sums: the order in which a loop's `f64`
//! accumulation adds its terms (`docs/language.md`, "The order of a sum").
//!
//! A loop that only adds terms to an `f64` variable — `s = s + e`, `s = s
//! - e`, `s = s + a + b`, with no other read of `s` in the loop
//! — adds the terms of iterations 0, 4, 8, .. to one partial sum `P0`,
//! which starts at `s`'s value before the loop, those of iterations 1, 5,
//! 9, .. to `P1`, and so on to `P3`; `P1`, `P2` and `P3` start at `-0.0`.
//! After the loop `s` is `(P0 + P2) + (P1 + P3)`: the even iterations' two
//! partial sums plus the odd ones'. The four addition chains are
//! independent, so consecutive iterations overlap on the CPU (a chain of
//! dependent `f64` additions runs at one addition per 2-4 cycles), and a
//! vectorizer can later carry `(P0, P1)` and `(P2, P3)` in the lanes of
//! two registers without changing a bit (the exit's grouping is what adding
//! the two registers, then their lanes, computes). When each iteration
//! adds one term, up to two iterations give the written order's bits
//! (`(s + e0) + e1`), three `((s + e0) + e2) + e1`; with several terms an
//! iteration's terms after the first are summed on its own partial sum
//! (`(-0.0 + a1) - b1`, then added: `X + (a1 - b1)`, not `(X + a1) - b1`).
//!
//! **This is the language's meaning of such a loop, fixed at lowering**:
//! the pass runs on each function as the front end lowers it, before the
//! inliner, the AD passes or the optimizer see it, so every inline setting,
//! every derivative (forward tangents and reverse adjoints are summed the
//! same way, by the same loop) and both engines compute the same bits. The
//! IR itself stays sequential: no pass after lowering reassociates.
//!
//! In the IR the loop's header gets three parameters `q1 q2 q3` beside the
//! accumulator `p`, and the back edge rotates them:
//!
//! ```text
//! block1(i, p):                          block1(i, p, q1, q2, q3):
//!     brif c, block2, block3(p)              brif c, block2, block4
//! block2:                                block2:
//!     t = fadd p, e                          t = fadd p, e
//!     jump block1(i + 1, t)                  jump block1(i + 1, q1, q2, q3, t)
//!                                        block4:
//!                                            a = fadd p, q2
//!                                            b = fadd q1, q3
//!                                            r = fadd a, b
//!                                            jump block3(r)
//! ```
//!
//! After `n` iterations the header holds the partial sums rotated by `n mod
//! 4` (`p` is `P(n mod 4)`), and `(p + q2) + (q1 + q3)` is the same bits
//! under every rotation, `fadd` being commutative (NaN payloads aside:
//! with two NaN partial sums the payload can follow the rotation; both
//! engines agree, and payloads are not part of the semantics).
//!
//! **Which accumulators.** A parameter `p: f64` of the header of a natural
//! loop with one latch, whose value on the back edge is the end of a chain
//! of `fadd` (either operand) and `fsub` (left operand) starting at `p`,
//! each link used once and only by the next; `p` itself is used by the
//! chain and otherwise only as an argument of the header's own branch out
//! of the loop. Anything else — a compare of `s`, `s * x`, a `break` that
//! passes `s`, an `if` that adds conditionally (a join's parameter), an
//! inner loop that adds (its own accumulator is split instead), a
//! compensated (Kahan) sum, which reads `s` twice, a `continue` (a second
//! latch) — keeps the written order,
//! and so does every sum of a loop marked `#[ordered]`.

use adze_ir::cfg::{reverse_postorder, successors, DominatorTree, Loop, LoopForest};
use adze_ir::{Block, BlockCall, Function, Inst, InstData, Opcode, Type, Value};
use std::collections::{HashMap, HashSet};

/// Splits every accumulation of `func` that qualifies (module docs) into two
/// interleaved partial sums, except in the loops headed by `ordered` (the
/// `#[ordered]` loops); returns how many were split.
pub fn split_sums(func: &mut Function, ordered: &[Block]) -> usize {
    let plans = find(func, ordered);
    let n = plans.iter().map(|p| p.params.len()).sum();
    for plan in plans {
        apply(func, plan);
    }
    n
}

/// The accumulators of one loop.
struct Plan {
    header: Block,
    /// Indices of the header parameters to split, ascending.
    params: Vec<usize>,
    /// Blocks outside the loop that branch to the header.
    entries: Vec<Block>,
    /// The loop's one latch.
    latch: Block,
    /// The one block the header branches to outside the loop, if any.
    exit: Option<Block>,
}

/// Where each value is read: one entry per read.
type Uses = HashMap<Value, Vec<Inst>>;

fn find(func: &Function, ordered: &[Block]) -> Vec<Plan> {
    let Some(entry) = func.entry_block() else {
        return Vec::new();
    };
    let order = reverse_postorder(func, entry);
    let mut preds: HashMap<Block, Vec<Block>> = HashMap::new();
    for &b in &order {
        for s in successors(func, b) {
            preds.entry(s).or_default().push(b);
        }
    }
    let no_preds = Vec::new();
    let pred_of = |b: Block| preds.get(&b).unwrap_or(&no_preds).iter().copied();
    let doms = DominatorTree::new(&order, pred_of);
    let forest = LoopForest::new(pred_of, &doms);
    if forest.is_empty() {
        return Vec::new();
    }
    let is_header = |b: Block| forest.innermost(b).is_some_and(|m| forest.header(m) == b);
    let ordered: HashSet<Block> = ordered.iter().copied().collect();
    let mut uses: Uses = HashMap::new();
    for &b in &order {
        for &inst in func.layout.block_insts(b) {
            func.dfg
                .inst(inst)
                .for_each_use(|v| uses.entry(v).or_default().push(inst));
        }
    }
    let mut plans = Vec::new();
    for l in forest.loops() {
        let header = forest.header(l);
        if ordered.contains(&header) {
            continue;
        }
        let [latch] = forest.latches(l) else { continue };
        let latch = *latch;
        let entries: Vec<Block> = {
            let mut e: Vec<Block> = pred_of(header)
                .filter(|&p| !forest.contains(l, p))
                .collect();
            e.dedup();
            e
        };
        if entries.is_empty() {
            continue;
        }
        // The header's branch out of the loop, which may pass the sum on.
        let Some(branch) = func.layout.last_inst(header) else {
            continue;
        };
        let exits: Vec<&BlockCall> = func
            .dfg
            .inst(branch)
            .destinations()
            .into_iter()
            .filter(|d| !forest.contains(l, d.block))
            .collect();
        if exits.len() > 1 || exits.iter().any(|d| is_header(d.block)) {
            continue;
        }
        let exit = exits.first().map(|d| d.block);
        // The latch's one edge back to the header.
        let Some(back) = one_dest(func, latch, header) else {
            continue;
        };
        let params: Vec<usize> = func
            .dfg
            .block_params(header)
            .iter()
            .enumerate()
            .filter(|&(k, &p)| {
                func.dfg.value_type(p) == Type::F64
                    && is_sum(func, &forest, l, &uses, p, branch, back.args[k], latch)
            })
            .map(|(k, _)| k)
            .collect();
        if !params.is_empty() {
            plans.push(Plan {
                header,
                params,
                entries,
                latch,
                exit,
            });
        }
    }
    plans
}

/// The destination of `from`'s terminator that goes to `to`, if there is
/// exactly one.
fn one_dest(func: &Function, from: Block, to: Block) -> Option<&BlockCall> {
    let inst = func.layout.last_inst(from)?;
    let dests: Vec<&BlockCall> = func
        .dfg
        .inst(inst)
        .destinations()
        .into_iter()
        .filter(|d| d.block == to)
        .collect();
    match dests[..] {
        [d] => Some(d),
        _ => None,
    }
}

/// Whether the header parameter `p` of loop `l` is an accumulation: a chain
/// of single-use `fadd`/`fsub` links in the loop from `p` to `end`, the
/// value the latch passes back, and no other read of `p` but the header's
/// branch out of the loop (`branch`).
#[allow(clippy::too_many_arguments)]
fn is_sum(
    func: &Function,
    forest: &LoopForest,
    l: Loop,
    uses: &Uses,
    p: Value,
    branch: Inst,
    end: Value,
    latch: Block,
) -> bool {
    let empty = Vec::new();
    let in_loop = |inst: Inst| {
        func.layout
            .inst_block(inst)
            .is_some_and(|b| forest.contains(l, b))
    };
    // `p`: read by one link in the loop, and otherwise only as an argument
    // the header's branch passes out of the loop.
    let data = func.dfg.inst(branch);
    if data.args().contains(&p)
        || data
            .destinations()
            .iter()
            .any(|d| forest.contains(l, d.block) && d.args.contains(&p))
    {
        return false;
    }
    let links: Vec<Inst> = uses
        .get(&p)
        .unwrap_or(&empty)
        .iter()
        .copied()
        .filter(|&u| u != branch)
        .collect();
    let [first] = links[..] else { return false };
    let mut cur = p;
    let mut inst = first;
    for _ in 0..=func.dfg.num_insts() {
        if !in_loop(inst) {
            return false;
        }
        let next = match *func.dfg.inst(inst) {
            InstData::Binary {
                op: Opcode::Fadd,
                args: [a, b],
            } if (a == cur) != (b == cur) => func.dfg.first_result(inst),
            InstData::Binary {
                op: Opcode::Fsub,
                args: [a, b],
            } if a == cur && b != cur => func.dfg.first_result(inst),
            _ => return false,
        };
        cur = next;
        let reads = uses.get(&cur).unwrap_or(&empty);
        let [only] = reads[..] else { return false };
        if cur == end {
            // The chain's end: read once, by the latch's branch back.
            return func.layout.inst_block(only) == Some(latch);
        }
        inst = only;
    }
    false
}

fn apply(func: &mut Function, plan: Plan) {
    let Plan {
        header,
        params,
        entries,
        latch,
        exit,
    } = plan;
    let branch = func.layout.last_inst(header).expect("a header branches");
    let loc = func.dfg.srcloc(branch);
    let ps: Vec<Value> = params
        .iter()
        .map(|&k| func.dfg.block_params(header)[k])
        .collect();
    // Three more partial sums beside each accumulator `p`: `[q1, q2, q3]`.
    let qs: Vec<[Value; 3]> = params
        .iter()
        .map(|_| [(); 3].map(|()| func.dfg.append_block_param(header, Type::F64)))
        .collect();
    // Every way in starts the other partial sums at -0.0, which adds
    // nothing to any sum (`x + -0.0` is `x`, -0.0 and NaN included).
    for entry in entries {
        let term = func.layout.last_inst(entry).expect("an entry branches");
        let z = func.dfg.make_inst(InstData::fconst(-0.0), &[Type::F64]);
        func.dfg.set_srcloc(z, loc);
        let at = func.layout.block_insts(entry).len() - 1;
        func.layout.insert_inst(z, entry, at);
        let z = func.dfg.first_result(z);
        for dest in func.dfg.inst_mut(term).destinations_mut() {
            if dest.block == header {
                dest.args.extend(qs.iter().flatten().map(|_| z));
            }
        }
    }
    // The back edge rotates: each partial sum moves one place towards `p`,
    // and the one this iteration added to goes to `q3`.
    let term = func.layout.last_inst(latch).expect("a latch branches");
    for dest in func.dfg.inst_mut(term).destinations_mut() {
        if dest.block == header {
            for (&k, &[q1, q2, q3]) in params.iter().zip(&qs) {
                let end = std::mem::replace(&mut dest.args[k], q1);
                dest.args.extend([q2, q3, end]);
            }
        }
    }
    // The exit adds the two partial sums, in a block of its own.
    let Some(exit) = exit else { return };
    let passes: bool = func
        .dfg
        .inst(branch)
        .destinations()
        .iter()
        .any(|d| d.block == exit && d.args.iter().any(|a| ps.contains(a)));
    if !passes {
        return;
    }
    let split = func.dfg.make_block();
    let anchor = func
        .layout
        .blocks()
        .iter()
        .position(|&b| b == exit)
        .and_then(|i| i.checked_sub(1))
        .map(|i| func.layout.blocks()[i])
        .unwrap_or(header);
    func.layout.insert_block_after(split, anchor);
    let mut sums = HashMap::new();
    for (&p, &[q1, q2, q3]) in ps.iter().zip(&qs) {
        // `(p + q2) + (q1 + q3)`: after `n` iterations the header holds
        // the partial sums rotated by `n mod 4`, and this grouping is the
        // same bits under every rotation (`fadd` is commutative; NaN
        // payloads aside).
        let mut add = |a: Value, b: Value| {
            let add = func.dfg.make_inst(
                InstData::Binary {
                    op: Opcode::Fadd,
                    args: [a, b],
                },
                &[Type::F64],
            );
            func.dfg.set_srcloc(add, loc);
            func.layout.append_inst(add, split);
            func.dfg.first_result(add)
        };
        let a = add(p, q2);
        let b = add(q1, q3);
        sums.insert(p, add(a, b));
    }
    let mut args = Vec::new();
    for dest in func.dfg.inst_mut(branch).destinations_mut() {
        if dest.block == exit {
            args = std::mem::take(&mut dest.args);
            dest.block = split;
        }
    }
    for a in &mut args {
        if let Some(&s) = sums.get(a) {
            *a = s;
        }
    }
    let jump = func.dfg.make_inst(
        InstData::Jump {
            dest: BlockCall { block: exit, args },
        },
        &[],
    );
    func.dfg.set_srcloc(jump, loc);
    func.layout.append_inst(jump, split);
}
