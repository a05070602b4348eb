//! Congruent induction variables: two integer parameters of one block that
//! always hold the same value become one.
//!
//! ```text
//! block4:                                 block4:
//!     v11 = iconst 0                          v11 = iconst 0
//!     jump block5(v11, v11)                   jump block5(v11, v11)
//! block5(v6: i64, v8: i64):               block5(v6: i64, v8: i64):
//!     v16 = icmp lt v6, v14                   v16 = icmp lt v6, v14
//!     brif v16, block6, block9                brif v16, block6, block9
//! block6:                                 block6:
//!     v33 = iconst 1                          v33 = iconst 1
//!     v34 = iadd v6, v33                      v34 = iadd v6, v33
//!     v35 = iconst 1                          v35 = iconst 1
//!     v36 = iadd v8, v35                      v36 = iadd v6, v35
//!     jump block5(v34, v36)                   jump block5(v34, v36)
//! block9:                                 block9:
//!     push 0, v8                              push 0, v6
//! ```
//!
//! Reverse mode's augmented primal counts the iterations of a loop in a
//! parameter of its own (`v8`, pushed as the trip count) next to the loop's
//! index (`v6`); both start at the same value and both add 1 per iteration.
//! After the rewrite, `v8` is a parameter nothing reads, and DCE removes it.
//!
//! **When.** Parameters `p` and `q` (both `i64`) of a block `H` are
//! *congruent* when, on every branch to `H`, the arguments `a` (for `p`) and
//! `b` (for `q`) are equal assuming `p = q`: the same value, or `iconst`s of
//! the same value, or both in `{p, q}`, or `iadd x, y` and `iadd x', y'`
//! (operands in either order) or `isub x, y` and `isub x', y'` whose
//! operands are pairwise equal in the same sense (for the operands of
//! `iadd`/`isub`, only one level deep).
//!
//! **Exact.** By induction over the executions of `H`: the first one comes
//! from a branch whose arguments read neither `p` nor `q` (they are not
//! defined yet), so the arguments are equal outright; a later one comes from
//! a branch whose arguments read `p` and `q` as the previous execution of
//! `H` set them, equal by induction, and `iadd`/`isub` are deterministic
//! (wrapping) operations of their operands. So `p = q` whenever either is
//! read, and every use of `q` may read `p` instead: the same bits
//! everywhere. Nothing is removed or moved here.
//!
//! Regions: `q` is replaced only where `analysis::Scopes::can_replace`
//! allows it (two parameters of one block have the same scope; a region's
//! argument or result is never replaced).

use crate::analysis::{def_inst, iconst_of, table, Replacements, Scopes};
use adze_ir::{Block, Function, Inst, InstData, Opcode, Type, Value};
use cranelift_entity::SecondaryMap;

/// What the pass did to one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndvarsStats {
    /// Block parameters replaced by a congruent one.
    pub replaced: usize,
}

/// Replaces every block parameter that is congruent to an earlier parameter
/// of its block by that parameter.
pub fn indvars(func: &mut Function) -> IndvarsStats {
    let mut stats = IndvarsStats::default();
    if func.is_declaration() {
        return stats;
    }
    let scopes = Scopes::new(func);
    let mut incoming: SecondaryMap<Block, Vec<Inst>> = table(func.dfg.num_blocks(), Vec::new());
    for (_, inst) in func.layout.insts() {
        for dest in func.dfg.inst(inst).destinations() {
            let preds = &mut incoming[dest.block];
            if preds.last() != Some(&inst) {
                preds.push(inst);
            }
        }
    }
    let mut reps = Replacements::new(func);
    let entry = func.entry_block();
    for &block in func.layout.blocks() {
        if Some(block) == entry {
            continue;
        }
        let params: Vec<(usize, Value)> = func
            .dfg
            .block_params(block)
            .iter()
            .copied()
            .enumerate()
            .filter(|&(_, v)| func.dfg.value_type(v) == Type::I64)
            .collect();
        if params.len() < 2 {
            continue;
        }
        // The argument lists of every branch to `block`.
        let edges: Vec<&[Value]> = incoming[block]
            .iter()
            .flat_map(|&inst| func.dfg.inst(inst).destinations())
            .filter(|d| d.block == block)
            .map(|d| d.args.as_slice())
            .collect();
        for (x, &(a, p)) in params.iter().enumerate() {
            if reps.resolve(p) != p {
                continue;
            }
            for &(b, q) in &params[x + 1..] {
                if reps.resolve(q) != q || !scopes.can_replace(func, q, p) {
                    continue;
                }
                let congruent = edges.iter().all(|args| match (args.get(a), args.get(b)) {
                    (Some(&u), Some(&v)) => Congruence {
                        func,
                        reps: &reps,
                        p,
                        q,
                    }
                    .args(u, v),
                    _ => false,
                });
                if congruent {
                    reps.replace(q, p);
                    stats.replaced += 1;
                }
            }
        }
    }
    reps.apply(func);
    stats
}

/// Equality of values under the hypothesis `p = q`.
struct Congruence<'a> {
    func: &'a Function,
    reps: &'a Replacements,
    p: Value,
    q: Value,
}

impl Congruence<'_> {
    /// Operands: the same value (after earlier replacements), constants of
    /// the same value, or both `p`/`q`.
    fn leaves(&self, u: Value, v: Value) -> bool {
        let (u, v) = (self.reps.resolve(u), self.reps.resolve(v));
        let pq = |x: Value| x == self.p || x == self.q;
        u == v
            || (pq(u) && pq(v))
            || iconst_of(self.func, u).is_some_and(|c| iconst_of(self.func, v) == Some(c))
    }

    /// Branch arguments: equal leaves, or `iadd`/`isub` of equal leaves.
    fn args(&self, u: Value, v: Value) -> bool {
        if self.leaves(u, v) {
            return true;
        }
        let (u, v) = (self.reps.resolve(u), self.reps.resolve(v));
        match (def_inst(self.func, u), def_inst(self.func, v)) {
            (
                Some(InstData::Binary { op: o1, args: x }),
                Some(InstData::Binary { op: o2, args: y }),
            ) if o1 == o2 => match o1 {
                Opcode::Iadd => {
                    (self.leaves(x[0], y[0]) && self.leaves(x[1], y[1]))
                        || (self.leaves(x[0], y[1]) && self.leaves(x[1], y[0]))
                }
                Opcode::Isub => self.leaves(x[0], y[0]) && self.leaves(x[1], y[1]),
                _ => false,
            },
            _ => false,
        }
    }
}
