//! When the reverse blocks that add to an adjoint run one after another
//! once per definition, so that the running sum can be handed from one to
//! the next as an SSA value (see [`Plan::assign_slots`]).
//!
//! The question, for a value defined in block `D` and blocks `U₁ .. Uₖ`
//! whose reverse adds to its adjoint: does every execution of `D` go on to
//! run `U₁`, then `U₂`, .., then `Uₖ`, each exactly once, before `D` runs
//! again or the function returns? Then the reverse sweep runs `R(Uₖ)` ..
//! `R(U₁)` and `R(D)` in that order once per definition, `R(Uᵢ₊₁)`
//! dominates `R(Uᵢ)` in the adjoint, and the sum needs no memory.
//!
//! It holds exactly when, in the graph of the paths from `D` that stop
//! where they come back to `D` or return, each `Uᵢ` post-dominates the one
//! before it (and `D`) and lies on no cycle. That test depends only on the
//! blocks from `D` to `Uₖ`: a callee's body inlined is a single-entry,
//! single-exit region of the caller, so the answer is the same for its own
//! values inlined or called, and for a caller's values the region is
//! crossed as the call is, from its entry to its exit.
//!
//! Per definition that is a walk of the function; [`Structure`] answers it
//! for all of them at once where control flow is reducible: `Uᵢ` must be in
//! `D`'s innermost loop and in no inner one, and post-dominate `Uᵢ₋₁` in a
//! graph where a loop's back edges lead to its exits (so an iteration ends
//! there, and an inner loop is a detour). A block on an irreducible cycle
//! (which reversed control flow has, so a derivative of a derivative
//! meets it) gets the walk. The `Uᵢ` must also come in reverse postorder,
//! the reverse of the order in which the adjoint emits reverse blocks.
//!
//! For an adjoint that needs a slot all the same, [`Structure::hands_on`]
//! asks the same of two blocks that add to it one after the other: the
//! running sum goes from the reverse of the later to the reverse of the
//! earlier as an SSA value, and the slot is stored and loaded only where
//! such a succession breaks.

use adze_ir::cfg::{reverse_postorder_by, DominatorTree, Loop, LoopForest};
use adze_ir::Block;
use cranelift_entity::{EntityRef, EntitySet, SecondaryMap};
use std::collections::HashMap;

/// The control flow the carrying test reads, built once per plan.
pub(super) struct Structure<'a> {
    succs: SecondaryMap<Block, Vec<Block>>,
    returns: EntitySet<Block>,
    forest: &'a LoopForest,
    /// Position of each block in `order` (reverse postorder): the adjoint
    /// emits reverse blocks last first, so a running sum must go from a
    /// later block to an earlier one.
    pos: SecondaryMap<Block, usize>,
    /// Blocks on a cycle without a loop header: irreducible control flow.
    irreducible: EntitySet<Block>,
    /// Post-dominators in the graph with back edges to loop exits.
    pdom: DominatorTree,
    /// Dominators.
    doms: DominatorTree,
    /// The exact test's graph per definition block, on demand.
    walks: HashMap<Block, Walk>,
    /// First block number past the function's.
    fresh: u32,
}

/// From one definition block `D`: its post-dominators in the graph of paths
/// that end where they return to `D`, leave `D`'s innermost loop or take its
/// back edge (which come back to `D` only through its header), and the
/// blocks of that graph on a cycle.
struct Walk {
    pdom: DominatorTree,
    cyclic: EntitySet<Block>,
}

/// Where an edge of an auxiliary graph goes: a block or the virtual exit.
type Target = Option<Block>;

impl<'a> Structure<'a> {
    /// `succs(b)`: the successors of a reachable block `b`; `returns`: the
    /// blocks ending in `return`; `fresh`: a block number above all of the
    /// function's.
    pub fn new(
        order: &'a [Block],
        succs: SecondaryMap<Block, Vec<Block>>,
        returns: &[Block],
        forest: &'a LoopForest,
        fresh: u32,
    ) -> Structure<'a> {
        let mut pos = SecondaryMap::with_default(usize::MAX);
        for (k, &b) in order.iter().enumerate() {
            pos[b] = k;
        }
        let mut ret = EntitySet::new();
        for &b in returns {
            ret.insert(b);
        }
        let mut preds: SecondaryMap<Block, Vec<Block>> = SecondaryMap::new();
        for &b in order {
            for &s in &succs[b] {
                preds[s].push(b);
            }
        }
        let doms = DominatorTree::new(order, |b| preds[b].clone());
        let is_back = |from: Block, to: Block| {
            forest
                .innermost(to)
                .is_some_and(|l| forest.header(l) == to && forest.latches(l).contains(&from))
        };
        let irreducible = on_cycles(order, |b| {
            succs[b]
                .iter()
                .copied()
                .filter(|&s| !is_back(b, s))
                .collect()
        });
        // The graph with back edges to loop exits: loop `l` is the virtual
        // node `fresh + l`, which a back edge of `l` leads to and which
        // leads where `l`'s exit edges lead; `fresh + #loops` is the exit.
        let node = |l: Loop| Block::new(fresh as usize + l.index());
        let sink = Block::new(fresh as usize + forest.len());
        let image = |from: Block, to: Block| -> Block {
            match forest.innermost(to) {
                Some(l) if forest.header(l) == to && forest.latches(l).contains(&from) => node(l),
                _ => to,
            }
        };
        let mut out: SecondaryMap<Block, Vec<Block>> = SecondaryMap::new();
        for &b in order {
            let mut o: Vec<Block> = succs[b].iter().map(|&s| image(b, s)).collect();
            if ret.contains(b) {
                o.push(sink);
            }
            for &s in &succs[b] {
                // Each loop this edge leaves gets its image as an exit.
                for l in forest.loops_around(b) {
                    if forest.contains(l, s) {
                        break;
                    }
                    let e = image(b, s);
                    let exits = &mut out[node(l)];
                    if !exits.contains(&e) {
                        exits.push(e);
                    }
                }
            }
            out[b] = o;
        }
        let nodes: Vec<Block> = order
            .iter()
            .copied()
            .chain(forest.loops().map(node))
            .collect();
        let pdom = post_dominators(&nodes, sink, |b| {
            out.get(b)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(Some)
                .collect()
        });
        Structure {
            succs,
            returns: ret,
            forest,
            pos,
            irreducible,
            pdom,
            doms,
            walks: HashMap::new(),
            fresh,
        }
    }

    /// Can the adjoint of a value defined in `def`, to which the reverse of
    /// the blocks `users` adds (in any order, repeats allowed), be handed
    /// from reverse block to reverse block as an SSA value? See the module
    /// documentation.
    pub fn carries(&mut self, def: Block, users: &[Block]) -> bool {
        if self.pos[def] == usize::MAX {
            return false;
        }
        let mut blocks: Vec<Block> = users.to_vec();
        if blocks.iter().any(|&u| self.pos[u] == usize::MAX) {
            return false;
        }
        blocks.push(def);
        blocks.sort_by_key(|&b| self.pos[b]);
        blocks.dedup();
        if blocks[0] != def {
            return false;
        }
        if blocks.iter().any(|&b| self.irreducible.contains(b)) {
            let walk = self.walk(def);
            return blocks
                .windows(2)
                .all(|w| !walk.cyclic.contains(w[1]) && walk.pdom.dominates(w[1], w[0]));
        }
        let inner = self.forest.innermost(def);
        blocks.iter().all(|&b| self.forest.innermost(b) == inner)
            && blocks.windows(2).all(|w| self.pdom.dominates(w[1], w[0]))
    }

    /// Can the reverse of `to` hand an adjoint's running sum straight to
    /// the reverse of `from`, where the primal adds to it in `from` and
    /// then in `to`? When every execution of `from` goes on to `to` and
    /// every execution of `to` comes from `from`, in one iteration of the
    /// same loop, and nothing between them adds to it: `from` dominates
    /// `to`, `to` post-dominates `from` (in the graph of
    /// [`Structure::carries`]), neither is on an irreducible cycle, and no
    /// block of `touches` is [`Structure::between`] them. The blocks
    /// between them are then a single-entry single-exit region, an inlined
    /// callee say.
    pub fn hands_on(&self, from: Block, to: Block, touches: &[Block]) -> bool {
        from != to
            && self.pos[from] != usize::MAX
            && self.pos[to] != usize::MAX
            && !self.irreducible.contains(from)
            && !self.irreducible.contains(to)
            && self.forest.innermost(from) == self.forest.innermost(to)
            && self.doms.dominates(from, to)
            && self.pdom.dominates(to, from)
            && !touches.iter().any(|&z| self.between(from, to, z))
    }

    /// Is `z` strictly inside the single-entry single-exit region from
    /// `from` to `to` (it dominates `z`, which `to` post-dominates)? Blocks
    /// of loops nested in the region are.
    fn between(&self, from: Block, to: Block, z: Block) -> bool {
        z != from && z != to && self.doms.dominates(from, z) && self.pdom.dominates(to, z)
    }

    /// The nearest block of `touches` that strictly dominates `b`.
    pub fn dominating(&self, b: Block, touches: &EntitySet<Block>) -> Option<Block> {
        let mut d = self.doms.idom(b);
        while let Some(x) = d {
            if touches.contains(x) {
                return Some(x);
            }
            d = self.doms.idom(x);
        }
        None
    }

    /// The exact test's graph from `def` (see [`Walk`]).
    fn walk(&mut self, def: Block) -> &Walk {
        if !self.walks.contains_key(&def) {
            let within = self.forest.innermost(def);
            let (forest, succs, returns) = (self.forest, &self.succs, &self.returns);
            let target = |to: Block| -> Target {
                let leaves =
                    within.is_some_and(|l| !forest.contains(l, to) || forest.header(l) == to);
                (to != def && !leaves).then_some(to)
            };
            let edges = |b: Block| -> Vec<Target> {
                let mut o: Vec<Target> = succs[b].iter().map(|&s| target(s)).collect();
                if returns.contains(b) {
                    o.push(None);
                }
                o
            };
            let blocks = |b: Block| -> Vec<Block> { edges(b).into_iter().flatten().collect() };
            let nodes = reverse_postorder_by(def, blocks);
            let sink = Block::new(self.fresh as usize + forest.len() + 1);
            let walk = Walk {
                pdom: post_dominators(&nodes, sink, edges),
                cyclic: on_cycles(&nodes, blocks),
            };
            self.walks.insert(def, walk);
        }
        &self.walks[&def]
    }
}

/// The post-dominator tree of the graph on `nodes` with edges `succs`
/// (`None`: to the virtual exit, numbered `sink`). Blocks from which no path
/// reaches the exit are in no tree: they post-dominate nothing.
fn post_dominators(
    nodes: &[Block],
    sink: Block,
    succs: impl Fn(Block) -> Vec<Target>,
) -> DominatorTree {
    let mut preds: SecondaryMap<Block, Vec<Block>> = SecondaryMap::new();
    for &b in nodes {
        for s in succs(b) {
            preds[s.unwrap_or(sink)].push(b);
        }
    }
    let order = reverse_postorder_by(sink, |b| preds[b].clone());
    DominatorTree::new(&order, |b| {
        if b == sink {
            Vec::new()
        } else {
            succs(b).into_iter().map(|s| s.unwrap_or(sink)).collect()
        }
    })
}

/// The blocks of `nodes` that lie on a cycle of the graph `succs`
/// restricted to `nodes` (a strongly connected component of two or more
/// blocks, or a block that branches to itself). Tarjan's algorithm,
/// without recursion.
fn on_cycles(nodes: &[Block], succs: impl Fn(Block) -> Vec<Block>) -> EntitySet<Block> {
    const NONE: u32 = u32::MAX;
    let mut inside = EntitySet::new();
    for &b in nodes {
        inside.insert(b);
    }
    let mut index: SecondaryMap<Block, u32> = SecondaryMap::with_default(NONE);
    let mut low: SecondaryMap<Block, u32> = SecondaryMap::with_default(NONE);
    let mut on_stack = EntitySet::new();
    let mut stack: Vec<Block> = Vec::new();
    let mut out = EntitySet::new();
    let mut next = 0u32;
    for &root in nodes {
        if index[root] != NONE {
            continue;
        }
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack.insert(root);
        let mut work: Vec<(Block, Vec<Block>, usize)> = vec![(root, succs(root), 0)];
        while let Some((b, ss, i)) = work.last_mut() {
            let b = *b;
            if let Some(&s) = ss.get(*i) {
                *i += 1;
                if !inside.contains(s) {
                    continue;
                }
                if s == b {
                    out.insert(b);
                }
                if index[s] == NONE {
                    index[s] = next;
                    low[s] = next;
                    next += 1;
                    stack.push(s);
                    on_stack.insert(s);
                    let ss = succs(s);
                    work.push((s, ss, 0));
                } else if on_stack.contains(s) {
                    low[b] = low[b].min(index[s]);
                }
                continue;
            }
            work.pop();
            if let Some((p, ..)) = work.last() {
                let p = *p;
                low[p] = low[p].min(low[b]);
            }
            if low[b] == index[b] {
                let mut component = Vec::new();
                while let Some(x) = stack.pop() {
                    on_stack.remove(x);
                    component.push(x);
                    if x == b {
                        break;
                    }
                }
                if component.len() > 1 {
                    for x in component {
                        out.insert(x);
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(n: u32) -> Block {
        Block::from_u32(n)
    }

    /// `carries(def, users)` on the graph of `edges` from block 0, the
    /// `returns` leaving it.
    fn carries(edges: &[(u32, u32)], returns: &[u32], def: u32, users: &[u32]) -> bool {
        let mut succs: SecondaryMap<Block, Vec<Block>> = SecondaryMap::new();
        let mut preds: SecondaryMap<Block, Vec<Block>> = SecondaryMap::new();
        let mut fresh = 0;
        for &(x, y) in edges {
            succs[b(x)].push(b(y));
            preds[b(y)].push(b(x));
            fresh = fresh.max(x + 1).max(y + 1);
        }
        let order = reverse_postorder_by(b(0), |x| succs[x].clone());
        let doms = DominatorTree::new(&order, |x| preds[x].clone());
        let forest = LoopForest::new(|x| preds[x].clone(), &doms);
        let returns: Vec<Block> = returns.iter().map(|&r| b(r)).collect();
        let mut s = Structure::new(&order, succs.clone(), &returns, &forest, fresh);
        let users: Vec<Block> = users.iter().map(|&u| b(u)).collect();
        s.carries(b(def), &users)
    }

    #[test]
    fn across_a_diamond_but_not_into_one_side() {
        let g = [(0, 1), (0, 2), (1, 3), (2, 3)];
        assert!(carries(&g, &[3], 0, &[3]));
        assert!(carries(&g, &[3], 0, &[0, 3]));
        assert!(!carries(&g, &[3], 0, &[1]));
        assert!(!carries(&g, &[3], 0, &[1, 3]));
        assert!(!carries(&g, &[3], 1, &[2]));
    }

    #[test]
    fn within_one_iteration_only() {
        // 1 heads a loop 1 -> 2 -> 3 -> 1, left for 4.
        let g = [(0, 1), (1, 2), (1, 4), (2, 3), (3, 1)];
        assert!(carries(&g, &[4], 2, &[3]));
        assert!(!carries(&g, &[4], 0, &[2]));
        assert!(!carries(&g, &[4], 2, &[4]));
        assert!(!carries(&g, &[4], 1, &[2]));
        assert!(!carries(&g, &[4], 2, &[1]));
        assert!(carries(&g, &[4], 0, &[4]));
    }

    #[test]
    fn around_an_inner_loop_but_not_into_it() {
        // 2 heads a loop 2 -> 3 -> 2 between 1 and 4.
        let g = [(0, 1), (1, 2), (2, 3), (3, 2), (2, 4)];
        assert!(carries(&g, &[4], 1, &[4]));
        assert!(carries(&g, &[4], 0, &[1, 4]));
        assert!(!carries(&g, &[4], 1, &[3]));
        assert!(!carries(&g, &[4], 1, &[2, 4]));
    }

    #[test]
    fn never_to_a_block_that_does_not_return() {
        // 2 loops forever: a path through it never returns, so the adjoint
        // never runs after it, and only the paths that return count.
        let g = [(0, 1), (0, 2), (2, 2), (1, 3)];
        assert!(!carries(&g, &[3], 0, &[2]));
        assert!(carries(&g, &[3], 0, &[3]));
        assert!(carries(&g, &[3], 1, &[3]));
    }

    #[test]
    fn through_irreducible_control_flow_by_the_walk() {
        // The cycle 1 -> 2 -> 3 -> 1 is entered at 1 and at 3.
        let g = [(0, 1), (0, 3), (1, 2), (2, 3), (3, 1), (2, 4)];
        // Each execution of 1 goes on to 2 before 1 runs again.
        assert!(carries(&g, &[4], 1, &[2]));
        // 2 may return without 3.
        assert!(!carries(&g, &[4], 2, &[3]));
        // 3 comes after 1 and 2 but is emitted before them.
        assert!(!carries(&g, &[4], 3, &[1, 2]));
        // A diamond after the cycle: the reducible test.
        let g = [
            (0, 1),
            (0, 3),
            (1, 2),
            (2, 3),
            (3, 1),
            (2, 4),
            (4, 5),
            (4, 6),
            (5, 7),
            (6, 7),
        ];
        assert!(carries(&g, &[7], 4, &[7]));
        assert!(!carries(&g, &[7], 4, &[5]));
        // 2 may run again (through 3 and 1) before 4.
        assert!(!carries(&g, &[7], 2, &[4, 7]));
        assert!(carries(&g, &[7], 1, &[2]));
    }
}
