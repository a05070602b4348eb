//! Loops that rotate values unrolled by two: a counting loop whose back edge
//! passes one header parameter into another's place runs two iterations per
//! trip around, so a rotation of two places is gone, and one of four (the
//! language's four partial sums, in a loop `vectorize` did not take) moves
//! every second iteration instead of every one.
//!
//! ```text
//! block1(i, p, q):                        block1(i, p, q):
//!     brif (i < n), block2, block3            brif (i < n), block2, block3(p, q)
//! block2:                                 block2:
//!     t = fadd p, x[i]                        t = fadd p, x[i]
//!     jump block1(i + 1, q, t)                jump block1'(i + 1, q, t)
//!                                         block1'(i', p', q'):            ; the copy
//!                                             brif (i' < n), block2', block3(p', q')
//!                                         block2':
//!                                             t' = fadd p', x[i']
//!                                             jump block1(i' + 1, q', t')
//! ```
//!
//! The front end splits a loop's sum into four partial sums that rotate on
//! every back edge (docs/language.md, "The order of a sum"); forward
//! mode's tangents and reverse mode's adjoints of them rotate too, and so
//! do the two vectors of `vectorize`'s lanes (`(P0, P1)`, `(P2, P3)`). In
//! the loop as written each rotation is register moves on every iteration;
//! unrolled, a vector loop's two vectors each keep their register (`T` goes
//! where `B` came from), and the chains of additions are independent.
//!
//! **Exact.** The unrolled loop runs the same iterations in the same order:
//! the copy is the loop's next iteration, with its own test of the same
//! condition, and each header branches to the loop's exit as before. Every
//! bit, trap and effect stays where it was.
//!
//! **Which loops.** Counting loops (the header's branch is `brif (icmp lt
//! i, n)` on a header parameter `i`, `copy::loop_shape`: one preheader, one
//! latch, one exit from the header) that contain no loop, at any depth,
//! of at most [`MAX_UNROLL_INSTS`] instructions, with no call, `autodiff`
//! or out-of-line intrinsic (`exp`: a call costs more than the move),
//! whose back edge passes a header parameter to another position. Reverse
//! mode's count-down loops are left alone: their bounds proofs come from
//! `version`'s guard on the loop's own counter.
//!
//! Measured (docs/performance.md, sessions 16 and 18): unrolled, the
//! seed's and Rosenbrock's sums ran 2× and 1.75× faster than in the written
//! order. Until session 18 only outermost loops were unrolled: unrolling
//! the nested sum of GMM's first style had made its primal at D = 64 25 %
//! slower, through code placement (docs/optimizer.md, `unroll`). With four
//! partial sums a nested sum left rolled costs more than placement does:
//! GMM's primal at D = 64 took 3.5 ms rolled, 2.65 ms unrolled and in
//! lanes (2.7 ms before the four partial sums).
//!
//! Bounds: `adze_ir::bounds` proves the copy's accesses as the loop's, the
//! two counters being each other's successors (see its "Unrolled loops").

use crate::analysis::{Cfg, Scopes};
use crate::copy::{copy_loop, loop_shape, merge_at_exit, BackEdges, LoopShape};
use adze_ir::{Block, CmpCond, Function, InstData, Opcode};

/// The largest loop (in instructions) that is unrolled.
pub const MAX_UNROLL_INSTS: usize = 60;

/// Functions above this many instructions are left alone (as `carry`).
const MAX_FUNCTION_INSTS: usize = 20_000;

/// What the pass did to one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnrollStats {
    /// Loops unrolled.
    pub loops: usize,
}

struct Plan {
    header: Block,
    latch: Block,
    exit: Block,
    body: Vec<Block>,
}

/// Unrolls the loops that rotate values (see the module documentation).
pub fn unroll_loops(func: &mut Function) -> UnrollStats {
    let mut stats = UnrollStats::default();
    if func.num_placed_insts() > MAX_FUNCTION_INSTS {
        return stats;
    }
    let cfg = Cfg::new(func);
    let doms = cfg.dominators();
    let scopes = Scopes::new(func);
    let plans: Vec<Plan> = cfg
        .innermost_loops(&doms)
        .iter()
        .filter_map(|l| plan(func, &cfg, &scopes, l.header, &l.blocks))
        .collect();
    for p in plans {
        stats.loops += 1;
        unroll(func, &p);
    }
    stats
}

fn plan(
    func: &Function,
    cfg: &Cfg,
    scopes: &Scopes,
    header: Block,
    body: &[Block],
) -> Option<Plan> {
    let LoopShape {
        latch,
        exit,
        preheader,
    } = loop_shape(func, cfg, scopes, header, body, MAX_UNROLL_INSTS)?;
    // The loop after a two-lane copy (`vectorize`), entered from its
    // lanes, runs one iteration at most.
    let after_lanes = func
        .layout
        .block_insts(preheader)
        .iter()
        .any(|&i| matches!(func.dfg.inst(i).opcode(), Opcode::Vlane0 | Opcode::Vlane1));
    if after_lanes {
        return None;
    }
    // A counting loop: `brif (icmp lt i, n)` on a header parameter `i`.
    let params = func.dfg.block_params(header);
    let branch = func.dfg.inst(func.layout.last_inst(header)?);
    let InstData::Brif { cond, .. } = branch else {
        return None;
    };
    let counting = func.layout.block_insts(header).iter().any(|&i| {
        func.dfg.inst_results(i).first() == Some(cond)
            && matches!(
                func.dfg.inst(i),
                InstData::Cmp { op: Opcode::Icmp, cond: CmpCond::Lt, args: [c, _] }
                    if params.contains(c)
            )
    });
    if !counting {
        return None;
    }
    for &b in body {
        for &inst in func.layout.block_insts(b) {
            let data = func.dfg.inst(inst);
            if matches!(data, InstData::Call { .. } | InstData::Autodiff { .. })
                || data.opcode().libcall().is_some()
            {
                return None;
            }
        }
    }
    // The back edge passes some header parameter to another position.
    let back = func.dfg.inst(func.layout.last_inst(latch)?);
    let rotates = back.destinations().iter().any(|d| {
        d.block == header
            && d.args
                .iter()
                .enumerate()
                .any(|(k, a)| params.iter().position(|p| p == a).is_some_and(|j| j != k))
    });
    if !rotates {
        return None;
    }
    Some(Plan {
        header,
        latch,
        exit,
        body: body.to_vec(),
    })
}

fn unroll(func: &mut Function, p: &Plan) {
    // 1. The copy, laid out after the loop's last block; its back edge goes
    //    to the loop's header.
    let last = *p
        .body
        .iter()
        .max_by_key(|&&b| func.layout.blocks().iter().position(|&x| x == b))
        .expect("a loop has blocks");
    let copy = copy_loop(func, &p.body, p.header, last, BackEdges::ToOriginal);
    // 2. The loop's back edge enters the copy.
    let latch = func.layout.last_inst(p.latch).expect("a latch branches");
    for dest in func.dfg.inst_mut(latch).destinations_mut() {
        if dest.block == p.header {
            dest.block = copy.blocks[&p.header];
        }
    }
    // 3. Values of the header read after the loop meet at the exit.
    merge_at_exit(func, &p.body, p.header, p.exit, &copy.blocks, &copy.values);
}
