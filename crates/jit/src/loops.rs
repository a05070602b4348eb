//! Bounds checks that the bounds of a counted loop prove unnecessary.
//!
//! The front end lowers `for i in lo..hi` to the canonical shape of
//! docs/language.md ("Lowering"): a header `H(i, ..)` ending in
//! `brif (icmp lt i, hi), T, E`, entered with `lo` and re-entered from the
//! latch with `iadd i, 1`. In every block dominated by `T` (the body, when
//! `T`'s only predecessor is `H`), `i < hi` holds for the current value of
//! `i`; if moreover every value `H` receives for `i` is either a constant
//! `>= 0` or a `len`, or `i + 1` computed in a block dominated by `T` (where
//! `i < hi <= i64::MAX`, so no overflow), then `0 <= i` as well.
//!
//! An access `a[i + c]` (`c >= 0` a constant; `c = 0` for `a[i]`) in such a
//! block cannot be out of bounds when `hi + c <= len(a)` is evident from the
//! IR: `hi` is `len a`, or `len a - k` (`isub` of a constant `k >= c`), or
//! `len a + k` (`iadd` of a constant `k <= -c`), or `n` where `a = zeros n`
//! (and `c = 0`). Why "the current value" is sound: `hi`, `a` and `n` are
//! defined in blocks that strictly dominate `H`, so none of them is
//! redefined between the last execution of `H` and the access without `H`
//! running again; and a path from `H` to the access that leaves through `E`
//! would, prefixed by a path from the entry to `H` that avoids `T`, reach
//! the access without passing `T`, contradicting dominance.
//!
//! Such accesses are compiled without their check ([`safe_accesses`]); all
//! others keep theirs, so errors are exactly the interpreter's.

use adze_ir::{Block, CmpCond, Function, Inst, InstData, Opcode, Value, ValueDef};
use std::collections::{HashMap, HashSet};

/// An induction variable `i` of a counted loop: `0 <= i < hi` in every block
/// dominated by `body`.
struct Induction {
    hi: Value,
    body: Block,
}

fn inst_of(func: &Function, v: Value) -> Option<(Inst, &InstData)> {
    match func.dfg.value_def(v) {
        ValueDef::Result { inst, .. } => Some((*inst, func.dfg.inst(*inst))),
        _ => None,
    }
}

fn const_of(func: &Function, v: Value) -> Option<i64> {
    match inst_of(func, v)?.1 {
        InstData::IConst { imm } => Some(*imm),
        _ => None,
    }
}

fn def_block(func: &Function, v: Value) -> Option<Block> {
    match func.dfg.value_def(v) {
        ValueDef::Result { inst, .. } => func.layout.inst_block(*inst),
        ValueDef::Param { block, .. } => Some(*block),
        ValueDef::Detached => None,
    }
}

/// `(x, c)` when `v` is `x + c` for a constant `c` (`iadd` either way
/// round, or `isub` of a constant), or `(v, 0)`.
fn offset_form(func: &Function, v: Value) -> (Value, i64) {
    if let Some((_, InstData::Binary { op, args })) = inst_of(func, v) {
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

fn is_len(func: &Function, v: Value) -> Option<Value> {
    match inst_of(func, v)?.1 {
        InstData::Unary {
            op: Opcode::Len,
            arg,
        } => Some(*arg),
        _ => None,
    }
}

/// The `load`/`store` instructions of `func` (over the blocks of `order`,
/// reverse postorder from the entry) whose index is provably in bounds by
/// the loop that contains them (see the module documentation).
pub(crate) fn safe_accesses(
    func: &Function,
    order: &[Block],
    dests: impl Fn(Block) -> Vec<(Block, Vec<Value>)>,
) -> HashSet<Inst> {
    let mut safe = HashSet::new();
    let mut preds: HashMap<Block, Vec<Block>> = HashMap::new();
    let mut edges: HashMap<Block, Vec<(Block, Vec<Value>)>> = HashMap::new();
    for &b in order {
        for (d, args) in dests(b) {
            preds.entry(d).or_default().push(b);
            edges.entry(d).or_default().push((b, args));
        }
    }
    let doms =
        adze_ir::cfg::DominatorTree::new(order, |b| preds.get(&b).cloned().unwrap_or_default());

    // Induction variables.
    let mut ivs: HashMap<Value, Induction> = HashMap::new();
    for &h in order {
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
        let Some((
            _,
            InstData::Cmp {
                op: Opcode::Icmp,
                cond: CmpCond::Lt,
                args,
            },
        )) = inst_of(func, *cond)
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
            || def_block(func, hi).is_none_or(|d| d == h || !doms.dominates(d, h))
        {
            continue;
        }
        let nonneg_entry =
            |a: Value| const_of(func, a).is_some_and(|c| c >= 0) || is_len(func, a).is_some();
        let all_ok = edges.get(&h).is_some_and(|es| {
            es.iter().all(|(from, args)| {
                let Some(&a) = args.get(k) else { return false };
                if nonneg_entry(a) {
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

    // Accesses in their bodies.
    for &b in order {
        for &inst in func.layout.block_insts(b) {
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
            let by_len =
                is_len(func, base) == Some(arr) && k.checked_add(c).is_some_and(|s| s <= 0);
            let by_zeros = c == 0
                && matches!(inst_of(func, arr), Some((_, InstData::Zeros { len, .. })) if *len == iv.hi);
            if by_len || by_zeros {
                safe.insert(inst);
            }
        }
    }
    safe
}

#[cfg(test)]
mod tests {
    use super::*;
    use adze_ir::parse::parse_module;

    /// The accesses `safe_accesses` proves, as (block, position in block).
    fn proven(src: &str) -> Vec<(String, usize)> {
        let m = parse_module(src).unwrap();
        let (_, f) = m.iter().next().unwrap();
        let entry = f.entry_block().unwrap();
        let order = adze_ir::cfg::reverse_postorder(f, entry);
        let dests = |b: Block| {
            f.layout
                .last_inst(b)
                .map(|i| {
                    f.dfg
                        .inst(i)
                        .destinations()
                        .iter()
                        .map(|d| (d.block, d.args.to_vec()))
                        .collect()
                })
                .unwrap_or_default()
        };
        let safe = safe_accesses(f, &order, dests);
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
            vec![("block2".to_string(), 0), ("block2".to_string(), 3)]
        );
        // len(x) - 0: x[i] only.
        assert_eq!(proven(&loop_src(0, 0, 1)), vec![("block2".to_string(), 0)]);
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
        assert_eq!(proven(src), vec![("block2".to_string(), 1)]);
    }
}
