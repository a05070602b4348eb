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
//!
//! **Offsets.** A loop header's parameter `q` that steps like an earlier
//! one, `p` (every back edge passes `q + s` where it passes `p + s`, one
//! constant `s`), and is entered from outside by one `jump` from a block
//! `P` (which then dominates the header), becomes `p + off`: `off = isub
//! q0, p0` of the entry's arguments goes before `P`'s jump, and each block
//! that reads `q` gets `iadd p, off` before its first read (GMM's running
//! index `li` next to `j`, which `vectorize` then takes as the index `off +
//! j`). Exact: `q - p` is `q0 - p0` on entry and every step keeps it, in
//! wrapping arithmetic, so `p + off` has `q`'s bits wherever `q` is read.
//! A `q` the header itself reads is left alone (`vectorize` wants a
//! header that holds only its test); an argument for a parameter nothing
//! reads (a trivial one `gvn` replaced) is no read. DCE then removes `q`.

use crate::analysis::{def_inst, iconst_of, table, Cfg, Replacements, Scopes};
use adze_ir::{Block, Function, Inst, InstData, Opcode, Type, Value, ValueDef};
use cranelift_entity::{EntitySet, SecondaryMap};
use std::collections::{HashMap, HashSet};

/// What the pass did to one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndvarsStats {
    /// Block parameters replaced by a congruent one.
    pub replaced: usize,
    /// Block parameters rewritten as another plus an offset.
    pub offset: usize,
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
        let params = int_params(func, block);
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
    stats.offset = offsets(func, &scopes, &incoming);
    stats
}

/// The `i64` parameters of `block`, with their positions.
fn int_params(func: &Function, block: Block) -> Vec<(usize, Value)> {
    func.dfg
        .block_params(block)
        .iter()
        .copied()
        .enumerate()
        .filter(|&(_, v)| func.dfg.value_type(v) == Type::I64)
        .collect()
}

/// `x ± c` with `x` one of `p`, `q` (or `x` itself, step 0): `(x, step)`.
fn step_of(func: &Function, v: Value) -> (Value, i64) {
    match def_inst(func, v) {
        Some(&InstData::Binary {
            op: Opcode::Iadd,
            args: [x, y],
        }) => match (iconst_of(func, x), iconst_of(func, y)) {
            (_, Some(c)) => (x, c),
            (Some(c), None) => (y, c),
            _ => (v, 0),
        },
        Some(&InstData::Binary {
            op: Opcode::Isub,
            args: [x, y],
        }) => match iconst_of(func, y).and_then(i64::checked_neg) {
            Some(c) => (x, c),
            None => (v, 0),
        },
        _ => (v, 0),
    }
}

/// Offset induction variables (see the module documentation): a parameter
/// `q` of a loop header that steps with an earlier one, `p`, becomes `p +
/// (q0 - p0)`. Returns how many were rewritten.
fn offsets(
    func: &mut Function,
    scopes: &Scopes,
    incoming: &SecondaryMap<Block, Vec<Inst>>,
) -> usize {
    let cfg = Cfg::new(func);
    let doms = cfg.dominators();
    let mut done = 0;
    let read = read_values(func);
    let users = param_users(func, &read);
    let blocks: Vec<Block> = func.layout.blocks().to_vec();
    for header in blocks {
        if !cfg.is_reachable(header) {
            continue;
        }
        // One edge from outside (its block dominates the header), the
        // others from inside (back edges).
        let dests: Vec<(Inst, Vec<Value>)> = incoming[header]
            .iter()
            .flat_map(|&inst| {
                func.dfg
                    .inst(inst)
                    .destinations()
                    .iter()
                    .filter(|d| d.block == header)
                    .map(move |d| (inst, d.args.clone()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let from = |inst: Inst| func.layout.inst_block(inst);
        let (outside, inside): (Vec<_>, Vec<_>) = dests
            .iter()
            .partition(|(inst, _)| from(*inst).is_some_and(|b| !doms.dominates(header, b)));
        let [(enter, entry_args)] = outside.as_slice() else {
            continue;
        };
        let Some(pre) = from(*enter) else { continue };
        if inside.is_empty()
            || !cfg.is_reachable(pre)
            || scopes.block_scope(pre) != scopes.block_scope(header)
            || func.dfg.inst(*enter).destinations().len() != 1
        {
            continue;
        }
        let params = int_params(func, header);
        let mut replaced: Vec<Value> = Vec::new();
        for (x, &(a, p)) in params.iter().enumerate() {
            if replaced.contains(&p) {
                continue;
            }
            for &(b, q) in &params[x + 1..] {
                let of_q = users.get(&q).map_or(&[][..], Vec::as_slice);
                let in_header = of_q
                    .iter()
                    .any(|&u| func.layout.inst_block(u) == Some(header));
                if replaced.contains(&q) || !scopes.can_replace(func, q, p) || in_header {
                    continue;
                }
                let steps = inside.iter().all(|(_, args)| {
                    let (u, su) = step_of(func, args[a]);
                    let (v, sv) = step_of(func, args[b]);
                    u == p && v == q && su == sv
                });
                if !steps {
                    continue;
                }
                rewrite(
                    func,
                    of_q,
                    pre,
                    *enter,
                    p,
                    (q, entry_args[b]),
                    entry_args[a],
                );
                replaced.push(q);
                done += 1;
            }
        }
    }
    done
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

/// The values some instruction reads, but as an argument for a block
/// parameter nothing reads (a trivial parameter `gvn` replaced; DCE removes
/// it and the argument).
fn read_values(func: &Function) -> EntitySet<Value> {
    let mut read = EntitySet::with_capacity(func.dfg.num_values());
    for (_, inst) in func.layout.insts() {
        for &a in func.dfg.inst(inst).args() {
            read.insert(a);
        }
    }
    // Branch arguments, to a fixed point: an argument is read when its
    // parameter is.
    loop {
        let mut changed = false;
        for (_, inst) in func.layout.insts() {
            for d in func.dfg.inst(inst).destinations() {
                for (&a, &param) in d.args.iter().zip(func.dfg.block_params(d.block)) {
                    if read.contains(param) && !read.contains(a) {
                        read.insert(a);
                        changed = true;
                    }
                }
            }
        }
        if !changed {
            return read;
        }
    }
}

/// Every use of `q` (entered as `q0`, with `p` entered as `p0`) reads `p +
/// off` instead, `off = q0 - p0` computed before `enter`, the one branch
/// to the loop from outside; the `iadd` is made once per block that reads
/// `q`, just before the first instruction there that does.
fn rewrite(
    func: &mut Function,
    users: &[Inst],
    pre: Block,
    enter: Inst,
    p: Value,
    (q, q0): (Value, Value),
    p0: Value,
) {
    let loc = func.dfg.srcloc(enter);
    let at = func
        .layout
        .block_insts(pre)
        .iter()
        .position(|&i| i == enter)
        .expect("the branch is in its block");
    let off = insert_int(func, pre, at, Opcode::Isub, [q0, p0], loc);
    // The blocks that read `q`, in the order their first reader comes.
    let mut blocks: Vec<Block> = Vec::new();
    for &u in users {
        if let Some(b) = func.layout.inst_block(u) {
            if !blocks.contains(&b) {
                blocks.push(b);
            }
        }
    }
    for b in blocks {
        let here: HashSet<Inst> = users
            .iter()
            .copied()
            .filter(|&u| func.layout.inst_block(u) == Some(b))
            .collect();
        let Some(k) = func
            .layout
            .block_insts(b)
            .iter()
            .position(|i| here.contains(i))
        else {
            continue;
        };
        let first = func.layout.block_insts(b)[k];
        let loc = func.dfg.srcloc(first);
        let v = insert_int(func, b, k, Opcode::Iadd, [p, off], loc);
        for &u in &here {
            func.dfg
                .inst_mut(u)
                .map_uses(|x| if x == q { v } else { x });
        }
    }
}

/// `op args` (an `i64` result) inserted at position `at` of `block`, at
/// the source location `loc`.
fn insert_int(
    func: &mut Function,
    block: Block,
    at: usize,
    op: Opcode,
    args: [Value; 2],
    loc: adze_ir::SourceLoc,
) -> Value {
    let inst = func
        .dfg
        .make_inst(InstData::Binary { op, args }, &[Type::I64]);
    func.dfg.set_srcloc(inst, loc);
    func.layout.insert_inst(inst, block, at);
    func.dfg.first_result(inst)
}

/// The instructions that read each `i64` block parameter (as an operand,
/// or as the argument for a parameter that is read), in layout order: one pass, so that rewriting the counters of
/// many loops stays linear in the function's size.
fn param_users(func: &Function, read: &EntitySet<Value>) -> HashMap<Value, Vec<Inst>> {
    let mut users: HashMap<Value, Vec<Inst>> = HashMap::new();
    let is_param = |v: Value| {
        matches!(func.dfg.value_def(v), ValueDef::Param { .. })
            && func.dfg.value_type(v) == Type::I64
    };
    for (_, inst) in func.layout.insts() {
        let data = func.dfg.inst(inst);
        let mut note = |v: Value| {
            if is_param(v) {
                let list = users.entry(v).or_default();
                if list.last() != Some(&inst) {
                    list.push(inst);
                }
            }
        };
        for &a in data.args() {
            note(a);
        }
        for d in data.destinations() {
            for (&a, &param) in d.args.iter().zip(func.dfg.block_params(d.block)) {
                if read.contains(param) {
                    note(a);
                }
            }
        }
    }
    users
}
