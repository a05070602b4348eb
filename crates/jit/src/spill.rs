//! Live ranges of `f64` values split around calls.
//!
//! The System V ABI preserves no vector register across a call, so an `f64`
//! that is live across a call (an out-of-line intrinsic such as `exp` or
//! `cos`, a call to generated code, the allocation of `zeros`) lives in
//! memory while the call runs. Cranelift's register allocator (regalloc2)
//! does not always split such a value's live range at the call: on the
//! seed's forward derivative it kept the loop's two running sums in stack
//! slots for the whole loop — a store and a load on the latency chain of
//! every iteration — because after the loop they are live across `cos` and
//! `sin`:
//!
//! ```text
//! block4(v7: i64, v8: f64, v9: f64):     ; the loop carries the sums v8, v9
//!     ...
//! block8(v12: f64, v13: f64):            ; after the loop
//!     v31 = cos v12                      ; v12, v13 live across this call
//!     v32 = sin v12                      ; v13 live across this one
//! ```
//!
//! So the translator splits these live ranges itself ([`plan`] says where):
//! a value live across a call becomes a Cranelift `Variable` with its own
//! 8-byte stack slot; before the call its current version is stored to the
//! slot (unless the slot already holds it), and its next use after the call
//! — or the end of the block, if it is live out — reloads it as a new SSA
//! version. The value's register live range now ends at the store, and
//! Cranelift's SSA builder joins the versions at control-flow merges. The
//! memory traffic is what the allocator would have had to do for the call
//! anyway; what goes away is the traffic where there is no call.
//!
//! Integer values are left to the allocator: six general-purpose registers
//! are callee-saved.

use adze_ir::{Block, Function, Inst, InstData, Type, Value, ValueDef};
use cranelift_codegen::entity::EntityRef;
use std::collections::HashMap;

/// Above this many block × value bits the liveness sets are not computed
/// and nothing is split (the allocator copes alone, as before).
const MAX_BITS: usize = 1 << 26;

/// Where to split `f64` live ranges around calls.
#[derive(Default)]
pub(crate) struct SpillPlan {
    /// For each call, the `f64` values live across it (live after it and
    /// not defined by it).
    pub cross: HashMap<Inst, Vec<Value>>,
    /// For each block, the split values live out of it.
    pub live_out: HashMap<Block, Vec<Value>>,
    /// Is the value split (live across some call)? Indexed by value number.
    pub split: Vec<bool>,
}

impl SpillPlan {
    pub(crate) fn is_split(&self, v: Value) -> bool {
        self.split.get(v.index()).copied().unwrap_or(false)
    }
}

fn def_block(func: &Function, v: Value) -> Option<Block> {
    match func.dfg.value_def(v) {
        ValueDef::Result { inst, .. } => func.layout.inst_block(*inst),
        ValueDef::Param { block, .. } => Some(*block),
        ValueDef::Detached => None,
    }
}

/// Computes the `f64` values live across each call of `func`, over the
/// blocks of `order` (reverse postorder; unreachable blocks are not
/// translated and take no part). `is_call` says which instructions call out.
pub(crate) fn plan(
    func: &Function,
    order: &[Block],
    is_call: impl Fn(&InstData) -> bool,
) -> SpillPlan {
    let insts = |b: Block| func.layout.block_insts(b);
    let has_call = order
        .iter()
        .any(|&b| insts(b).iter().any(|&i| is_call(func.dfg.inst(i))));
    if !has_call {
        return SpillPlan::default();
    }
    let nvals = func.dfg.num_values();
    let is_f64 = |v: Value| func.dfg.value_type(v) == Type::F64;

    // The f64 values used outside the block that defines them: only these
    // need block-level liveness sets.
    let mut gidx = vec![u32::MAX; nvals];
    let mut globals: Vec<Value> = Vec::new();
    for &b in order {
        for &i in insts(b) {
            func.dfg.inst(i).for_each_use(|v| {
                if is_f64(v) && gidx[v.index()] == u32::MAX && def_block(func, v) != Some(b) {
                    gidx[v.index()] = globals.len() as u32;
                    globals.push(v);
                }
            });
        }
    }
    let words = globals.len().div_ceil(64);
    if words * 64 * order.len() > MAX_BITS {
        return SpillPlan::default();
    }

    // Upward-exposed uses (gen) and definitions (kill) per block.
    let pos: HashMap<Block, usize> = order.iter().enumerate().map(|(k, &b)| (b, k)).collect();
    let mut gen = vec![0u64; words * order.len()];
    let mut kill = vec![0u64; words * order.len()];
    let set =
        |bits: &mut [u64], k: usize, g: u32| bits[k * words + g as usize / 64] |= 1 << (g % 64);
    let has =
        |bits: &[u64], k: usize, g: u32| bits[k * words + g as usize / 64] >> (g % 64) & 1 == 1;
    for (k, &b) in order.iter().enumerate() {
        for &p in func.dfg.block_params(b) {
            if let Some(&g) = gidx.get(p.index()).filter(|&&g| g != u32::MAX) {
                set(&mut kill, k, g);
            }
        }
        for &i in insts(b) {
            func.dfg.inst(i).for_each_use(|v| {
                let g = gidx[v.index()];
                if g != u32::MAX && !has(&kill, k, g) {
                    set(&mut gen, k, g);
                }
            });
            for &r in func.dfg.inst_results(i) {
                let g = gidx[r.index()];
                if g != u32::MAX {
                    set(&mut kill, k, g);
                }
            }
        }
    }

    // live_out(b) = ∪ live_in(s); live_in(b) = gen(b) ∪ (live_out(b) − kill(b)).
    let succs: Vec<Vec<usize>> = order
        .iter()
        .map(|&b| {
            adze_ir::cfg::successors(func, b)
                .into_iter()
                .filter_map(|s| pos.get(&s).copied())
                .collect()
        })
        .collect();
    let mut live_in = gen.clone();
    let mut live_out = vec![0u64; words * order.len()];
    let mut changed = true;
    while changed {
        changed = false;
        for k in (0..order.len()).rev() {
            for w in 0..words {
                let out = succs[k]
                    .iter()
                    .fold(0u64, |acc, &s| acc | live_in[s * words + w]);
                live_out[k * words + w] = out;
                let inn = gen[k * words + w] | (out & !kill[k * words + w]);
                if inn != live_in[k * words + w] {
                    live_in[k * words + w] = inn;
                    changed = true;
                }
            }
        }
    }

    // A backward scan of each block finds what is live across each call.
    let mut plan = SpillPlan {
        split: vec![false; nvals],
        ..SpillPlan::default()
    };
    let mut live = vec![false; nvals];
    let mut list: Vec<Value> = Vec::new();
    for (k, &b) in order.iter().enumerate() {
        for v in list.drain(..) {
            live[v.index()] = false;
        }
        for g in ones(&live_out[k * words..(k + 1) * words]) {
            let v = globals[g];
            live[v.index()] = true;
            list.push(v);
        }
        for &i in insts(b).iter().rev() {
            for &r in func.dfg.inst_results(i) {
                live[r.index()] = false;
            }
            let data = func.dfg.inst(i);
            if is_call(data) {
                let across: Vec<Value> = list.iter().copied().filter(|v| live[v.index()]).collect();
                if !across.is_empty() {
                    for &v in &across {
                        plan.split[v.index()] = true;
                    }
                    plan.cross.insert(i, across);
                }
            }
            data.for_each_use(|v| {
                if is_f64(v) && !live[v.index()] {
                    live[v.index()] = true;
                    list.push(v);
                }
            });
        }
        // `list` may hold values no longer live (their definitions were
        // passed); they are skipped by the `live` check and cleared above.
        list.retain(|v| live[v.index()]);
    }
    for (k, &b) in order.iter().enumerate() {
        let out: Vec<Value> = ones(&live_out[k * words..(k + 1) * words])
            .map(|g| globals[g])
            .filter(|v| plan.split[v.index()])
            .collect();
        if !out.is_empty() {
            plan.live_out.insert(b, out);
        }
    }
    plan
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
        let plan = plan(func, &order, |d| {
            matches!(d, InstData::Unary { op, .. } if matches!(op, Opcode::Cos | Opcode::Sin | Opcode::Exp))
                || matches!(d, InstData::Call { .. })
        });
        let mut out = Vec::new();
        for &b in &order {
            for &i in func.layout.block_insts(b) {
                if let Some(vs) = plan.cross.get(&i) {
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
                ("v17".into(), vec!["v14".into(), "v15".into(), "v16".into()]),
            ]
        );
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
}
