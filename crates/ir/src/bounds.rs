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
//! Why "the current value" is sound: `hi`, `b` and `n` are defined in
//! blocks that strictly dominate `H`, so none of them is redefined between
//! the last execution of `H` and the access without `H` running again; and
//! a path from `H` to the access that leaves through `E` would, prefixed by
//! a path from the entry to `H` that avoids `T`, reach the access without
//! passing `T`, contradicting dominance.
//!
//! Every other access may be out of bounds (as far as this analysis knows):
//! the JIT keeps its check, so errors are exactly the interpreter's.

use crate::cfg::{reverse_postorder, DominatorTree};
use crate::dfg::ValueDef;
use crate::entities::{Block, Inst, Value};
use crate::function::Function;
use crate::instructions::{CmpCond, InstData, Opcode};
use std::collections::{HashMap, HashSet};

/// An induction variable `i` of a counted loop: `0 <= i < hi` in every block
/// dominated by `body`.
struct Induction {
    hi: Value,
    body: Block,
}

fn inst_of(func: &Function, v: Value) -> Option<&InstData> {
    if !func.dfg.value_is_valid(v) {
        return None;
    }
    match func.dfg.value_def(v) {
        ValueDef::Result { inst, .. } => Some(func.dfg.inst(*inst)),
        _ => None,
    }
}

fn const_of(func: &Function, v: Value) -> Option<i64> {
    match inst_of(func, v)? {
        InstData::IConst { imm } => Some(*imm),
        _ => None,
    }
}

/// `(x, c)` when `v` is `x + c` for a constant `c` (`iadd` either way
/// round, or `isub` of a constant), or `(v, 0)`.
fn offset_form(func: &Function, v: Value) -> (Value, i64) {
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

/// `a` when `v` is `len a`.
fn len_of(func: &Function, v: Value) -> Option<Value> {
    match inst_of(func, v)? {
        InstData::Unary {
            op: Opcode::Len,
            arg,
        } => Some(*arg),
        _ => None,
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
pub fn safe_accesses(func: &Function) -> HashSet<Inst> {
    let mut safe = HashSet::new();
    let Some(entry) = func.entry_block() else {
        return safe;
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

    // Induction variables.
    let mut ivs: HashMap<Value, Induction> = HashMap::new();
    for &h in &order {
        let Some(last) = func.layout.last_inst(h) else {
            continue;
        };
        let InstData::Brif {
            cond,
            then_dest,
            else_dest,
        } = func.dfg.inst(last)
        else {
            continue;
        };
        let Some(InstData::Cmp {
            op: Opcode::Icmp,
            cond: CmpCond::Lt,
            args,
        }) = inst_of(func, *cond)
        else {
            continue;
        };
        let (i, hi) = (args[0], args[1]);
        let Some(k) = func.dfg.block_params(h).iter().position(|&p| p == i) else {
            continue;
        };
        let body = then_dest.block;
        if body == else_dest.block
            || body == h
            || preds.get(&body).map(Vec::as_slice) != Some(&[h][..])
            || func
                .def_block(hi)
                .is_none_or(|d| d == h || !doms.dominates(d, h))
        {
            continue;
        }
        // `a` is >= 0: a constant, a length, or `j` or `j + 1` for an
        // induction variable `j` of an enclosing loop, computed where
        // `0 <= j < hi_j <= i64::MAX` (so `j + 1` does not wrap): the
        // `for j in i + 1..n` of a triangular loop nest.
        let nonneg_entry = |a: Value, from: Block| {
            if const_of(func, a).is_some_and(|c| c >= 0) || len_of(func, a).is_some() {
                return true;
            }
            let (x, c) = offset_form(func, a);
            // Where `x` is read: at the branch for `j`, at the `iadd` for
            // `j + 1`.
            let at = if c == 0 {
                Some(from)
            } else {
                func.def_block(a)
            };
            (c == 0 || c == 1)
                && ivs
                    .get(&x)
                    .is_some_and(|outer| at.is_some_and(|d| doms.dominates(outer.body, d)))
        };
        let all_ok = edges.get(&h).is_some_and(|es| {
            es.iter().all(|(from, args)| {
                let Some(&a) = args.get(k) else { return false };
                if nonneg_entry(a, *from) {
                    return true;
                }
                let (x, c) = offset_form(func, a);
                x == i && (c == 0 || c == 1) && doms.dominates(body, *from)
            })
        });
        if all_ok {
            ivs.insert(i, Induction { hi, body });
        }
    }
    if ivs.is_empty() {
        return safe;
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
            let (arr, idx) = match func.dfg.inst(inst) {
                InstData::Binary {
                    op: Opcode::Load,
                    args,
                } => (args[0], args[1]),
                InstData::Ternary {
                    op: Opcode::Store,
                    args,
                } => (args[0], args[1]),
                _ => continue,
            };
            let (i, c) = offset_form(func, idx);
            let Some(iv) = ivs.get(&i) else { continue };
            if c < 0 || !doms.dominates(iv.body, b) {
                continue;
            }
            // hi + c <= len(arr)?
            let (base, k) = offset_form(func, iv.hi);
            if k.checked_add(c).is_none_or(|s| s > 0) {
                continue;
            }
            let is_length = |x: Value| len_of(func, base) == Some(x) || is_zeros_of(func, x, base);
            if is_length(arr) || same_length_as(arr, b, pos).into_iter().any(is_length) {
                safe.insert(inst);
            }
        }
    }
    safe
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
                if safe.contains(i) {
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

    #[test]
    fn unprovable_loops_keep_their_checks() {
        // A negative start, or a step other than 1.
        assert!(proven(&loop_src(-1, 1, 1)).is_empty());
        assert!(proven(&loop_src(0, 1, 2)).is_empty());
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
}
