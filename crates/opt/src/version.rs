//! Loop versioning: a count-down loop whose array indices cannot be proven
//! in bounds statically gets a second copy, run behind one guard that checks
//! the whole range of every such index before the loop; the JIT compiles the
//! copy's accesses without bounds checks (`adze_ir::bounds` proves them
//! from the guard).
//!
//! ```text
//! block0:                                  block0:
//!     ..                                       ..
//!     jump block1(v0)                          v20 = iconst 0
//! block1(v1: i64):       ; c                   v21 = icmp ge v0, v20          ; c0 >= 0
//!     v2 = icmp eq v1, 0                       v22 = icmp ge v9, v20          ; base >= 0
//!     brif v2, block3, block2                  v23 = len v5
//! block2:                                      v24 = isub v23, v9
//!     v3 = isub v1, 1    ; c - 1               v25 = icmp le v0, v24          ; c0 <= len - base
//!     v4 = iadd v9, v3   ; base + c - 1        v26 = select v21, v22, false   ; (and so on)
//!     v6 = load v5, v4                         brif v27, block4, block5
//!     ..                                   block4: jump block1'(v0)            ; checked range
//!     jump block1(v3)                      block5: jump block1(v0)             ; as before
//! ```
//!
//! Reverse mode makes these loops: an adjoint loop runs its primal's
//! iterations backwards, counting down a trip count popped from the tape, so
//! its indices (`base + c - 1`, `base` another popped or loop-invariant
//! value) are related to no array length the bounds analysis can see. The
//! check of each access then costs a compare, a branch and, in GMM's reverse
//! triangular loop, register copies around them.
//!
//! **The guard.** For a loop whose counter `c` enters as `c0`, runs while
//! `c != 0` and steps by `c - 1`, and accesses `a[base + (c - 1)]` (or
//! `a[c - 1]`), the guard is the conjunction of `c0 >= 0`, `base >= 0` (left
//! out for a constant `base >= 0`) and `c0 <= len(a) - base` (`c0 <= len(a)`
//! without a base), for every such access, as `select p, q, false` chains
//! of `icmp`s. Then every iteration has `1 <= c <= c0`, so the index lies in
//! `base ..= base + c0 - 1`, inside `0 .. len(a)`; `len(a) - base` cannot
//! wrap once `base >= 0`. The guard computes with wrapping integer
//! arithmetic and comparisons only: it cannot trap.
//!
//! **Exact.** Both copies are the loop, instruction for instruction; the
//! guard only chooses which one runs, and computes nothing the program
//! reads. When it fails (a negative trip count, an index out of bounds
//! somewhere in the range), the original loop runs, with its checks, and
//! traps where it always did. The JIT does not trust this pass: it proves
//! the copy's accesses itself from the guard it finds (`adze_ir::bounds`,
//! "Count-down loops"), and checks anything it cannot prove.
//!
//! **Which loops.** Innermost loops of the shape `carry` copies (one
//! preheader entering by a `jump`, one latch, one exit from the header to a
//! block only the header reaches, outside rule regions, at most
//! [`MAX_VERSION_INSTS`] instructions, no `call`), whose header ends in
//! `brif (icmp eq c, 0), exit, body` and which have at least one access of
//! the form above that the bounds analysis does not already prove. It runs
//! after `carry`, so that a loop's first iteration is peeled once, and the
//! original (cold) copy is not peeled again.

use crate::analysis::{Cfg, Scopes};
use crate::copy::{copy_loop, loop_shape, merge_at_exit, BackEdges, LoopCopy, LoopShape};
use adze_ir::bounds::{count_down_index, is_minus_one, LengthClasses};
use adze_ir::{Block, BlockCall, CmpCond, Function, InstData, Opcode, Type, Value};

/// The largest loop (in instructions) that is versioned.
pub const MAX_VERSION_INSTS: usize = 200;

/// Loops with fewer unproven ranges are left alone: one check saved per
/// iteration did not pay for the second copy (LSTM's adjoint, one range
/// among twenty constant-index accesses and thirteen pops: 5 % slower).
const MIN_RANGES: usize = 2;

/// Functions above this many instructions are left alone.
const MAX_FUNCTION_INSTS: usize = 20_000;

/// What the pass did to one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VersionStats {
    /// Loops versioned.
    pub loops: usize,
    /// Distinct (array, base) ranges their guards check.
    pub ranges: usize,
}

/// An index range the guard checks: `array[base + (c - 1)]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    array: Value,
    base: Base,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Base {
    None,
    Const(i64),
    Value(Value),
}

struct Plan {
    header: Block,
    body: Vec<Block>,
    shape: LoopShape,
    /// The counter's position among the header's parameters.
    counter: usize,
    ranges: Vec<Range>,
}

/// Versions the count-down loops with unproven accesses (see the module
/// documentation).
pub fn version_loops(func: &mut Function) -> VersionStats {
    let mut stats = VersionStats::default();
    if func.num_placed_insts() > MAX_FUNCTION_INSTS {
        return stats;
    }
    let cfg = Cfg::new(func);
    let doms = cfg.dominators();
    let scopes = Scopes::new(func);
    let safe = adze_ir::bounds::safe_accesses(func);
    let plans: Vec<Plan> = cfg
        .innermost_loops(&doms)
        .iter()
        .filter_map(|lp| plan(func, &cfg, &scopes, &safe, lp.header, &lp.blocks))
        .collect();
    for p in plans {
        stats.loops += 1;
        stats.ranges += p.ranges.len();
        version(func, &p);
    }
    stats
}

fn plan(
    func: &Function,
    cfg: &Cfg,
    scopes: &Scopes,
    safe: &cranelift_entity::EntitySet<adze_ir::Inst>,
    header: Block,
    body: &[Block],
) -> Option<Plan> {
    let shape = loop_shape(func, cfg, scopes, header, body, MAX_VERSION_INSTS)?;
    let in_loop = |b: Block| body.contains(&b);
    let outside = |v: Value| func.def_block(v).is_some_and(|d| !in_loop(d));
    // brif (icmp eq c, 0), exit, body
    let adze_ir::bounds::CountDownHeader {
        counter: c,
        position: counter,
        exit,
        body: first,
    } = adze_ir::bounds::count_down_header(func, header)?;
    if exit != shape.exit || !in_loop(first) {
        return None;
    }
    // The latch steps the counter by one (else nothing is proven).
    let latch = func.layout.last_inst(shape.latch)?;
    let steps_by_one = func.dfg.inst(latch).destinations().iter().all(|d| {
        d.block != header
            || d.args
                .get(counter)
                .is_some_and(|&a| is_minus_one(func, a, c))
    });
    if !steps_by_one {
        return None;
    }

    let mut ranges: Vec<Range> = Vec::new();
    for &b in body {
        for &inst in func.layout.block_insts(b) {
            let data = func.dfg.inst(inst);
            if matches!(data, InstData::Call { .. } | InstData::Autodiff { .. }) {
                return None;
            }
            let Some((array, idx)) = data.array_access() else {
                continue;
            };
            if safe.contains(inst) || !outside(array) {
                continue;
            }
            // `base + (c - 1)`, or `c + m` as `(m + 1) + (c - 1)`.
            let base = match count_down_index(func, idx, c) {
                None => continue,
                Some((None, -1)) => Base::None,
                Some((None, m)) => match m.checked_add(1) {
                    Some(b) => Base::Const(b),
                    None => continue,
                },
                Some((Some(other), -1)) if outside(other) => Base::Value(other),
                Some(_) => continue,
            };
            if matches!(base, Base::Const(k) if k < 0) {
                continue;
            }
            let r = Range { array, base };
            if !ranges.contains(&r) {
                ranges.push(r);
            }
        }
    }
    if ranges.len() < MIN_RANGES {
        return None;
    }
    Some(Plan {
        header,
        body: body.to_vec(),
        shape,
        counter,
        ranges,
    })
}

fn version(func: &mut Function, p: &Plan) {
    let pre = p.shape.preheader;
    let jump = func.layout.last_inst(pre).expect("the preheader's jump");
    let InstData::Jump { dest } = func.dfg.inst(jump).clone() else {
        unreachable!("the preheader enters by a jump");
    };
    let c0 = dest.args[p.counter];

    // The checked copy, laid out after the preheader; the guard's two
    // targets enter one loop each.
    let LoopCopy { blocks, values } = copy_loop(func, &p.body, p.header, pre, BackEdges::ToCopy);
    // The guard and its jumps stand for the preheader's jump.
    let mark = func.dfg.inst_mark();
    let loc = func.dfg.srcloc(jump);
    let fast = func.dfg.make_block();
    func.layout.insert_block_after(fast, pre);
    let slow = func.dfg.make_block();
    let last_copy = blocks[p.body.last().expect("a loop has blocks")];
    func.layout.insert_block_after(slow, last_copy);
    for (block, target) in [(fast, blocks[&p.header]), (slow, p.header)] {
        let j = func.dfg.make_inst(
            InstData::Jump {
                dest: BlockCall {
                    block: target,
                    args: dest.args.clone(),
                },
            },
            &[],
        );
        func.layout.append_inst(j, block);
    }

    // The guard, in place of the preheader's jump.
    func.layout.remove_inst(jump);
    let g = Guard { block: pre };
    let zero = g.value(func, InstData::IConst { imm: 0 }, Type::I64);
    let no = g.value(func, InstData::BConst { imm: false }, Type::Bool);
    let mut ok = g.icmp(func, CmpCond::Ge, c0, zero);
    // Arrays of one length (`samelen`s of the entry block, which have run)
    // with one base need one test, and a base one `>= 0` (kmeans' `dir`
    // reads four arrays of one length per centroid: 16 tests became 3).
    // `adze_ir::bounds` proves each of them from it, by the same classes.
    let classes = LengthClasses::of_entry_block(func);
    let mut tested: Vec<(Value, Base)> = Vec::new();
    let mut nonneg: Vec<Value> = Vec::new();
    for r in &p.ranges {
        let key = (classes.rep(r.array), r.base);
        if tested.contains(&key) {
            continue;
        }
        tested.push(key);
        let len = g.value(
            func,
            InstData::Unary {
                op: Opcode::Len,
                arg: r.array,
            },
            Type::I64,
        );
        let base = match r.base {
            Base::None => None,
            Base::Const(k) => Some(g.value(func, InstData::IConst { imm: k }, Type::I64)),
            Base::Value(b) => {
                if !nonneg.contains(&b) {
                    nonneg.push(b);
                    let t = g.icmp(func, CmpCond::Ge, b, zero);
                    ok = g.and(func, ok, t, no);
                }
                Some(b)
            }
        };
        let lim = match base {
            None => len,
            Some(b) => g.value(
                func,
                InstData::Binary {
                    op: Opcode::Isub,
                    args: [len, b],
                },
                Type::I64,
            ),
        };
        let fits = g.icmp(func, CmpCond::Le, c0, lim);
        ok = g.and(func, ok, fits, no);
    }
    let brif = func.dfg.make_inst(
        InstData::Brif {
            cond: ok,
            then_dest: BlockCall {
                block: fast,
                args: Vec::new(),
            },
            else_dest: BlockCall {
                block: slow,
                args: Vec::new(),
            },
        },
        &[],
    );
    func.layout.append_inst(brif, pre);

    func.dfg.set_srclocs_since(mark, loc);

    // Values of the header read after the loop meet at the exit.
    merge_at_exit(func, &p.body, p.header, p.shape.exit, &blocks, &values);
}

/// Appends the guard's instructions to its block.
struct Guard {
    block: Block,
}

impl Guard {
    fn value(&self, func: &mut Function, data: InstData, ty: Type) -> Value {
        let inst = func.dfg.make_inst(data, &[ty]);
        func.layout.append_inst(inst, self.block);
        func.dfg.first_result(inst)
    }

    fn icmp(&self, func: &mut Function, cond: CmpCond, a: Value, b: Value) -> Value {
        let data = InstData::Cmp {
            op: Opcode::Icmp,
            cond,
            args: [a, b],
        };
        self.value(func, data, Type::Bool)
    }

    /// `p && q`, as `select p, q, false` (`no` is the `bconst false`).
    fn and(&self, func: &mut Function, p: Value, q: Value, no: Value) -> Value {
        let data = InstData::Ternary {
            op: Opcode::Select,
            args: [p, q, no],
        };
        self.value(func, data, Type::Bool)
    }
}
