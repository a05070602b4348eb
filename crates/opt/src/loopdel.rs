//! Loop deletion: a counted loop that has no effect and whose values nothing
//! outside reads (but the final value of its index) is removed, and the
//! final value of the index is computed in closed form.
//!
//! ```text
//! block4:                                 block4:
//!     v11 = iconst 0                          v11 = iconst 0
//!     v14 = isub v12, v13                     v14 = isub v12, v13
//!     jump block5(v11)                        v37 = icmp lt v11, v14
//! block5(v6: i64):                            v38 = select v37, v14, v11
//!     v16 = icmp lt v6, v14                   jump block9
//!     brif v16, block6, block9            block9:
//! block6:                                     push 0, v38
//!     v18 = load v0, v6   ; in bounds         ...
//!     v33 = iconst 1
//!     v34 = iadd v6, v33
//!     jump block5(v34)
//! block9:
//!     push 0, v6
//!     ...
//! ```
//!
//! This is what is left of the primal loop in reverse mode's augmented
//! primal once DCE has removed the sum nobody reads and `indvars` the
//! iteration counter: a loop that only counts.
//!
//! **Which loops.** A natural loop ([`adze_ir::cfg::LoopForest`]) of header
//! `H` such that
//!
//! - it has the *canonical counted shape*: `H` has one predecessor outside
//!   the loop (the preheader `P`, whose terminator names `H` once); `H`
//!   ends in `brif (icmp lt i, hi), T, E` where `i` is a parameter of `H`,
//!   `hi` is defined outside the loop, `T` is in the loop and `E` (the exit)
//!   is not; every branch from inside the loop to `H` passes `iadd i, 1`
//!   (or `isub i, -1`) for `i`; no other block of the loop branches out of
//!   it, and the loop has no cycle that avoids `H` (no inner loop);
//! - every instruction of the loop is a branch, pure (`analysis::is_pure`),
//!   or a `load` that the loop's bounds prove in bounds
//!   ([`adze_ir::bounds::safe_accesses_below_start`]) — no `store`, `fill`, `samelen`,
//!   `push`, `pop`, `call`, `zeros`, `autodiff` or trapping operation;
//! - no value defined in the loop is used outside it, nor passed on the
//!   exit edge, nor listed by a region — except `i` itself;
//! - no block of the loop is listed by a rule region or defines a region's
//!   argument or result, and the preheader and the exit are in no region.
//!
//! **What happens.** When `i` is used outside the loop (or passed on the
//! exit edge), its value at the exit is computed in the preheader, `init`
//! being what `P` passes for `i`:
//!
//! ```text
//! c = icmp lt init, hi
//! e = select c, hi, init
//! ```
//!
//! and those uses read `e`. Then `P` branches straight to `E` (with the exit
//! edge's arguments), and the loop's blocks are removed from the layout and
//! from the provenance lists of inlined code (`Function::inlined`).
//!
//! **Exact.** The loop terminates: each trip through `H` that enters the
//! loop has `i < hi`, and every way back to `H` passes `i + 1` (no
//! overflow: `i < hi <= i64::MAX`), with `hi` unchanged (defined outside),
//! and every cycle of the loop passes `H`; so `i` grows by one per trip,
//! and the loop leaves through `E` after `max(hi - init, 0)` trips, with `i
//! = hi` if `init < hi` and `i = init` otherwise — which is `e`. While it
//! runs, the loop has no effect and cannot trap (its loads are proven in
//! bounds; everything else is pure), so removing it removes no effect and
//! no trap, and moves none relative to another. Nothing outside reads what
//! it computed but `i`, which reads `e`, the same bits. `e` is computed in
//! the preheader from `init` and `hi`, both available there; the preheader
//! dominates `H`, hence every use of `i`, and runs again each time the loop
//! is entered, so `e` is always the exit value of the latest run.
//!
//! Only a loop that contains no other loop can qualify (an inner loop is a
//! cycle that avoids `H`), so the candidates are the leaves of the
//! loop-nesting forest, whose blocks are their own: finding them and
//! checking their bodies takes time linear in the function, however deep
//! loops nest. Loops are deleted one at a time, smallest first, and the
//! analysis is redone after each deletion, so a loop whose only inner loop
//! was deleted may go next.

use crate::analysis::{iconst_of, is_pure, table, Cfg, Scopes};
use adze_ir::cfg::{Loop, LoopForest};
use adze_ir::{Block, BlockCall, CmpCond, Function, Inst, InstData, Opcode, Type, Value};
use cranelift_entity::{EntitySet, SecondaryMap};

/// What loop deletion did to one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopDelStats {
    /// Loops removed.
    pub deleted: usize,
    /// Of them, loops whose index is read after the exit (the value is
    /// computed in closed form).
    pub exit_values: usize,
}

/// Removes the loops of `func` that can go (see the module documentation).
pub fn delete_loops(func: &mut Function) -> LoopDelStats {
    let mut stats = LoopDelStats::default();
    if func.is_declaration() {
        return stats;
    }
    loop {
        let cfg = Cfg::new(func);
        let doms = cfg.dominators();
        let forest = cfg.loops(&doms);
        let mut leaves: Vec<Loop> = forest
            .loops()
            .filter(|&l| forest.children(l).is_empty())
            .collect();
        if leaves.is_empty() {
            break;
        }
        leaves.sort_by_key(|&l| (forest.size(l), cfg.rpo_num(forest.header(l))));
        let scopes = Scopes::new(func);
        let safe = adze_ir::bounds::safe_accesses_below_start(func);
        let plan = leaves.iter().find_map(|&l| {
            let lp = Leaf {
                forest: &forest,
                l,
                header: forest.header(l),
                blocks: forest.own_blocks(l),
            };
            plan(func, &cfg, &scopes, &safe, &lp)
        });
        let Some(plan) = plan else { break };
        stats.deleted += 1;
        stats.exit_values += usize::from(!plan.uses_of_i.is_empty() || plan.exit_reads_i);
        apply(func, plan);
    }
    stats
}

/// A loop that contains no other loop: a leaf of the forest.
struct Leaf<'a> {
    forest: &'a LoopForest,
    l: Loop,
    header: Block,
    /// Its blocks, in reverse postorder, the header first.
    blocks: &'a [Block],
}

impl Leaf<'_> {
    fn contains(&self, b: Block) -> bool {
        self.forest.contains(self.l, b)
    }
}

/// A loop to delete.
struct Plan {
    /// The loop's blocks.
    body: Vec<Block>,
    /// The preheader's terminator.
    pre_branch: Inst,
    pre: Block,
    header: Block,
    /// The index, its initial value and its bound.
    i: Value,
    init: Value,
    hi: Value,
    /// The exit edge.
    exit: BlockCall,
    /// Instructions outside the loop that read `i`.
    uses_of_i: Vec<Inst>,
    /// Does the exit edge pass `i`?
    exit_reads_i: bool,
}

fn plan(
    func: &Function,
    cfg: &Cfg,
    scopes: &Scopes,
    safe: &EntitySet<Inst>,
    lp: &Leaf,
) -> Option<Plan> {
    let h = lp.header;
    let inside = |v: Value| func.def_block(v).is_some_and(|b| lp.contains(b));

    // One way in, by a branch that names the header once.
    let outside: Vec<_> = cfg
        .preds(h)
        .iter()
        .copied()
        .filter(|&p| !lp.contains(p))
        .collect();
    let [pre] = outside[..] else { return None };
    let pre_branch = func.layout.last_inst(pre)?;
    let to_h: Vec<&BlockCall> = func
        .dfg
        .inst(pre_branch)
        .destinations()
        .into_iter()
        .filter(|d| d.block == h)
        .collect();
    let [entry_edge] = to_h[..] else { return None };

    // The header's test.
    let InstData::Brif {
        cond,
        then_dest,
        else_dest,
    } = func.dfg.inst(func.layout.last_inst(h)?)
    else {
        return None;
    };
    let exit = else_dest.clone();
    if !lp.contains(then_dest.block) || lp.contains(exit.block) {
        return None;
    }
    let Some(InstData::Cmp {
        op: Opcode::Icmp,
        cond: CmpCond::Lt,
        args: [i, hi],
    }) = crate::analysis::def_inst(func, *cond).cloned()
    else {
        return None;
    };
    let k = func.dfg.block_params(h).iter().position(|&p| p == i)?;
    if func.def_block(hi).is_none() || inside(hi) {
        return None;
    }
    let init = *entry_edge.args.get(k)?;

    // Regions: nothing of the loop listed, preheader and exit outside all.
    if lp.blocks.iter().any(|&b| scopes.is_pinned_block(b))
        || scopes.block_scope(pre).is_some()
        || scopes.block_scope(exit.block).is_some()
    {
        return None;
    }

    // Shape, effects, ways back and ways out.
    if !body_is_deletable(func, safe, lp, i, k, &exit) {
        return None;
    }
    let (exit_reads_i, uses_of_i) = uses_outside(func, lp, i, &exit, pre_branch)?;
    Some(Plan {
        body: lp.blocks.to_vec(),
        pre_branch,
        pre,
        header: h,
        i,
        init,
        hi,
        exit,
        uses_of_i,
        exit_reads_i,
    })
}

/// Is every block of the loop free of effects (pure instructions and loads
/// proven in bounds), and does it go back to the header only with `i + 1`
/// as the index (parameter `k`) and leave only by the header's `exit`?
fn body_is_deletable(
    func: &Function,
    safe: &EntitySet<Inst>,
    lp: &Leaf,
    i: Value,
    k: usize,
    exit: &BlockCall,
) -> bool {
    let h = lp.header;
    for &b in lp.blocks {
        let insts = func.layout.block_insts(b);
        let Some((&last, rest)) = insts.split_last() else {
            return false;
        };
        for &inst in rest {
            let data = func.dfg.inst(inst);
            let ok = !data.opcode().is_terminator()
                && (is_pure(func, data) || (data.opcode() == Opcode::Load && safe.contains(inst)));
            if !ok {
                return false;
            }
        }
        let term = func.dfg.inst(last);
        if !matches!(term, InstData::Jump { .. } | InstData::Brif { .. }) {
            return false;
        }
        for dest in term.destinations() {
            if dest.block == h {
                let Some(&arg) = dest.args.get(k) else {
                    return false;
                };
                if !is_increment_of(func, arg, i) {
                    return false;
                }
            } else {
                let leaves = !lp.contains(dest.block);
                let exit_edge = b == h && dest.block == exit.block;
                if leaves && !exit_edge {
                    return false;
                }
            }
        }
    }

    !has_cycle_avoiding(func, lp)
}

/// Outside the loop, only `i` may be read (by the exit edge or by other
/// instructions, returned), and the only way in is `pre_branch`. `None`
/// when anything else of the loop is read or the loop has another entry.
fn uses_outside(
    func: &Function,
    lp: &Leaf,
    i: Value,
    exit: &BlockCall,
    pre_branch: Inst,
) -> Option<(bool, Vec<Inst>)> {
    let inside = |v: Value| func.def_block(v).is_some_and(|b| lp.contains(b));
    let mut exit_reads_i = false;
    for &v in &exit.args {
        if v == i {
            exit_reads_i = true;
        } else if inside(v) {
            return None;
        }
    }
    for region in func.regions.values() {
        if region
            .args
            .iter()
            .chain(&region.results)
            .any(|&v| inside(v))
        {
            return None;
        }
    }
    let mut uses_of_i = Vec::new();
    for (b, inst) in func.layout.insts() {
        if lp.contains(b) {
            continue;
        }
        // The only way in is the entry edge (an unreachable block a region
        // keeps might branch in too).
        let data = func.dfg.inst(inst);
        let ways_in = data
            .destinations()
            .iter()
            .filter(|d| lp.contains(d.block))
            .count();
        if ways_in > usize::from(inst == pre_branch) {
            return None;
        }
        let mut reads_i = false;
        let mut reads_other = false;
        data.for_each_use(|v| {
            if v == i {
                reads_i = true;
            } else if inside(v) {
                reads_other = true;
            }
        });
        if reads_other {
            return None;
        }
        if reads_i {
            uses_of_i.push(inst);
        }
    }
    Some((exit_reads_i, uses_of_i))
}

/// Is `v` `i + 1`: `iadd i, 1`, `iadd 1, i` or `isub i, -1`?
fn is_increment_of(func: &Function, v: Value, i: Value) -> bool {
    match crate::analysis::def_inst(func, v) {
        Some(InstData::Binary {
            op: Opcode::Iadd,
            args: [a, b],
        }) => {
            (*a == i && iconst_of(func, *b) == Some(1))
                || (*b == i && iconst_of(func, *a) == Some(1))
        }
        Some(InstData::Binary {
            op: Opcode::Isub,
            args: [a, b],
        }) => *a == i && iconst_of(func, *b) == Some(-1),
        _ => false,
    }
}

/// Does the loop have a cycle that does not pass its header (an inner loop,
/// or irreducible control flow inside it)?
fn has_cycle_avoiding(func: &Function, lp: &Leaf) -> bool {
    // Kahn's algorithm on the loop's blocks without the header and without
    // the edges into it: a cycle leaves blocks with incoming edges.
    let succs = |b: Block| -> Vec<Block> {
        crate::analysis::successors(func, b)
            .into_iter()
            .filter(|&s| s != lp.header && lp.contains(s))
            .collect()
    };
    let mut indeg: SecondaryMap<Block, usize> = table(func.dfg.num_blocks(), 0);
    for &b in lp.blocks {
        if b != lp.header {
            for s in succs(b) {
                indeg[s] += 1;
            }
        }
    }
    let mut ready: Vec<Block> = lp
        .blocks
        .iter()
        .copied()
        .filter(|&b| b != lp.header && indeg[b] == 0)
        .collect();
    let mut seen = 0;
    while let Some(b) = ready.pop() {
        seen += 1;
        for s in succs(b) {
            let d = &mut indeg[s];
            *d -= 1;
            if *d == 0 {
                ready.push(s);
            }
        }
    }
    seen != lp.blocks.len() - 1
}

fn apply(func: &mut Function, plan: Plan) {
    let Plan {
        body,
        pre_branch,
        pre,
        header,
        i,
        init,
        hi,
        mut exit,
        uses_of_i,
        exit_reads_i,
    } = plan;
    if exit_reads_i || !uses_of_i.is_empty() {
        // e = select (icmp lt init, hi), hi, init, before the preheader's
        // branch.
        let at = func.layout.block_insts(pre).len() - 1;
        let c = func.dfg.make_inst(
            InstData::Cmp {
                op: Opcode::Icmp,
                cond: CmpCond::Lt,
                args: [init, hi],
            },
            &[Type::Bool],
        );
        func.layout.insert_inst(c, pre, at);
        let cv = func.dfg.first_result(c);
        let s = func.dfg.make_inst(
            InstData::Ternary {
                op: Opcode::Select,
                args: [cv, hi, init],
            },
            &[Type::I64],
        );
        func.layout.insert_inst(s, pre, at + 1);
        // The exit value stands for the loop, entered by the preheader's
        // branch.
        func.dfg.copy_srcloc(pre_branch, c);
        func.dfg.copy_srcloc(pre_branch, s);
        let e = func.dfg.first_result(s);
        let swap = |v: Value| if v == i { e } else { v };
        for inst in uses_of_i {
            func.dfg.inst_mut(inst).map_uses(swap);
        }
        for v in &mut exit.args {
            *v = swap(*v);
        }
    }
    for dest in func.dfg.inst_mut(pre_branch).destinations_mut() {
        if dest.block == header {
            *dest = exit.clone();
        }
    }
    for &b in &body {
        func.layout.remove_block(b);
    }
    let mut gone = EntitySet::with_capacity(func.dfg.num_blocks());
    for b in body {
        gone.insert(b);
    }
    for d in func.inlined.values_mut() {
        d.blocks.retain(|b| !gone.contains(*b));
    }
}
