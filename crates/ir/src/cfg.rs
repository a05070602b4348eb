//! The control-flow graph of a function, as the passes walk it: successors,
//! reverse postorder, the dominator tree and the natural loops — the one
//! implementation the optimizer, the AD planner and the JIT share (the
//! verifier keeps its own dominators, as an independent check).
//!
//! The graph itself is the caller's: [`reverse_postorder_by`],
//! [`DominatorTree::new`] and [`natural_loops`] take successors or
//! predecessors as functions, so a pass can give its own view (distinct
//! blocks, edges, positions) and get the same orders as every other pass.

use crate::entities::Block;
use crate::function::Function;

/// The blocks the terminator of `block` branches to (placed ones only), in
/// the order the terminator names them; a `brif` to one block twice names
/// it twice.
pub fn successors(func: &Function, block: Block) -> Vec<Block> {
    func.layout
        .last_inst(block)
        .map(|i| {
            func.dfg
                .inst(i)
                .destinations()
                .iter()
                .map(|d| d.block)
                .filter(|&d| func.dfg.block_is_valid(d) && func.layout.is_block_inserted(d))
                .collect()
        })
        .unwrap_or_default()
}

/// The blocks reachable from `entry`, in reverse postorder of a depth-first
/// search that visits successors in the order the terminator names them
/// ([`successors`]): every block comes after the blocks that dominate it,
/// and the order is the same on every run (derived code is numbered by it).
pub fn reverse_postorder(func: &Function, entry: Block) -> Vec<Block> {
    if !func.dfg.block_is_valid(entry) {
        return Vec::new();
    }
    reverse_postorder_by(entry, |b| successors(func, b))
}

/// The blocks reachable from `entry` through `succs`, in reverse postorder
/// of a depth-first search that visits the successors of a block in the
/// order `succs` gives them (a repeated successor is visited once).
pub fn reverse_postorder_by<I>(entry: Block, succs: impl Fn(Block) -> I) -> Vec<Block>
where
    I: IntoIterator<Item = Block>,
{
    let mut visited: Vec<bool> = Vec::new();
    let mut visit = |b: Block| {
        let i = b.as_u32() as usize;
        if i >= visited.len() {
            visited.resize(i + 1, false);
        }
        !std::mem::replace(&mut visited[i], true)
    };
    // (block, successors still to visit, last first)
    let pending = |b: Block| -> Vec<Block> {
        let mut s: Vec<Block> = succs(b).into_iter().collect();
        s.reverse();
        s
    };
    let mut post = Vec::new();
    visit(entry);
    let mut stack: Vec<(Block, Vec<Block>)> = vec![(entry, pending(entry))];
    while let Some((b, rest)) = stack.last_mut() {
        if let Some(next) = rest.pop() {
            if visit(next) {
                let s = pending(next);
                stack.push((next, s));
            }
        } else {
            post.push(*b);
            stack.pop();
        }
    }
    post.reverse();
    post
}

/// The dominator tree of the blocks of a reverse postorder: immediate
/// dominators by Cooper, Harvey and Kennedy's iteration ("A Simple, Fast
/// Dominance Algorithm"), then the tree numbered in preorder and postorder
/// so that [`DominatorTree::dominates`] takes constant time.
pub struct DominatorTree {
    /// The blocks, in the order given.
    order: Vec<Block>,
    /// Position of each block in the order (`usize::MAX`: not in it).
    pos: Vec<usize>,
    /// Immediate dominator of each position (the entry's is itself;
    /// `usize::MAX` for a block no predecessor reaches).
    idom: Vec<usize>,
    /// Children of each position in the tree, in the order given.
    children: Vec<Vec<Block>>,
    /// Preorder and postorder numbers of each position in the tree.
    pre: Vec<u32>,
    post: Vec<u32>,
}

impl DominatorTree {
    /// `order`: the reachable blocks in reverse postorder, entry first
    /// ([`reverse_postorder`]); `preds(b)`: the blocks that branch to `b`
    /// (blocks outside `order` are ignored).
    pub fn new<I>(order: &[Block], preds: impl Fn(Block) -> I) -> DominatorTree
    where
        I: IntoIterator<Item = Block>,
    {
        const UNDEF: usize = usize::MAX;
        let len = order
            .iter()
            .map(|b| b.as_u32() as usize + 1)
            .max()
            .unwrap_or(0);
        let mut pos = vec![UNDEF; len];
        for (k, &b) in order.iter().enumerate() {
            pos[b.as_u32() as usize] = k;
        }
        let mut idom = vec![UNDEF; order.len()];
        if let Some(first) = idom.first_mut() {
            *first = 0;
        }
        let at = |b: Block| pos.get(b.as_u32() as usize).copied().unwrap_or(UNDEF);
        let mut changed = true;
        while changed {
            changed = false;
            for (k, &b) in order.iter().enumerate().skip(1) {
                let mut new = UNDEF;
                for p in preds(b) {
                    let p = at(p);
                    if p == UNDEF || idom[p] == UNDEF {
                        continue;
                    }
                    new = if new == UNDEF {
                        p
                    } else {
                        let (mut x, mut y) = (new, p);
                        while x != y {
                            while x > y {
                                x = idom[x];
                            }
                            while y > x {
                                y = idom[y];
                            }
                        }
                        x
                    };
                }
                if new != UNDEF && idom[k] != new {
                    idom[k] = new;
                    changed = true;
                }
            }
        }
        // The tree (a forest if some block has no immediate dominator: each
        // such block is a root, dominated by itself only).
        let mut children = vec![Vec::new(); order.len()];
        let mut roots = Vec::new();
        for (k, &b) in order.iter().enumerate() {
            match idom[k] {
                d if d == k || d == UNDEF => roots.push(k),
                d => children[d].push(b),
            }
        }
        let (mut pre, mut post) = (vec![u32::MAX; order.len()], vec![u32::MAX; order.len()]);
        let (mut n_pre, mut n_post) = (0u32, 0u32);
        let mut stack: Vec<(usize, bool)> = roots.into_iter().rev().map(|k| (k, false)).collect();
        while let Some((k, done)) = stack.pop() {
            if done {
                post[k] = n_post;
                n_post += 1;
                continue;
            }
            pre[k] = n_pre;
            n_pre += 1;
            stack.push((k, true));
            for &c in children[k].iter().rev() {
                stack.push((pos[c.as_u32() as usize], false));
            }
        }
        DominatorTree {
            order: order.to_vec(),
            pos,
            idom,
            children,
            pre,
            post,
        }
    }

    /// The blocks, in the order given to [`DominatorTree::new`].
    pub fn order(&self) -> &[Block] {
        &self.order
    }

    /// The position of `b` in the order, if it is in it.
    fn position(&self, b: Block) -> Option<usize> {
        self.pos
            .get(b.as_u32() as usize)
            .copied()
            .filter(|&k| k != usize::MAX)
    }

    /// Does `a` dominate `b` (reflexively)? False when either is not in the
    /// order.
    pub fn dominates(&self, a: Block, b: Block) -> bool {
        let (Some(a), Some(b)) = (self.position(a), self.position(b)) else {
            return false;
        };
        self.pre[a] <= self.pre[b] && self.post[b] <= self.post[a]
    }

    /// The immediate dominator of `b`: `None` for the entry and for blocks
    /// not in the order.
    pub fn idom(&self, b: Block) -> Option<Block> {
        let k = self.position(b)?;
        let d = self.idom[k];
        (d != k && d != usize::MAX).then(|| self.order[d])
    }

    /// The blocks `b` immediately dominates, in the order given.
    pub fn children(&self, b: Block) -> &[Block] {
        self.position(b)
            .map(|k| &self.children[k][..])
            .unwrap_or_default()
    }
}

/// A natural loop ([`natural_loops`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NaturalLoop {
    /// The loop's header: the target of its back edges, which dominates
    /// every block of the loop.
    pub header: Block,
    /// The blocks of the loop, the header first, in the order given (reverse
    /// postorder).
    pub blocks: Vec<Block>,
    /// The sources of the back edges (the header's predecessors it
    /// dominates), without repeats, in the order `preds` gives them.
    pub latches: Vec<Block>,
}

impl NaturalLoop {
    /// Is `b` a block of the loop?
    pub fn contains(&self, b: Block) -> bool {
        self.blocks.contains(&b)
    }
}

/// The natural loops of the graph of `doms`, one per header, in the order of
/// their headers in [`DominatorTree::order`] (reverse postorder). A back
/// edge is an edge `t → h` where `h` dominates `t`; the loop of `h` is `h`
/// and every block that reaches a back edge's source without passing
/// through `h`. `preds` must be the predecessors `doms` was built with
/// (repeats are allowed; predecessors outside the order are ignored).
///
/// Every block of a natural loop is dominated by its header (a path from
/// the entry to it that avoided the header would continue to a back edge's
/// source, which the header dominates). Irreducible control flow — a cycle
/// with two ways in, which reversed control flow can have — therefore
/// makes no loop: no block of the cycle dominates the others, so it has no
/// back edge.
pub fn natural_loops<I>(preds: impl Fn(Block) -> I, doms: &DominatorTree) -> Vec<NaturalLoop>
where
    I: IntoIterator<Item = Block>,
{
    let order = doms.order();
    let mut loops = Vec::new();
    let mut mark = vec![false; order.len()];
    for (h, &header) in order.iter().enumerate() {
        let mut latches: Vec<Block> = Vec::new();
        for p in preds(header) {
            if doms.dominates(header, p) && !latches.contains(&p) {
                latches.push(p);
            }
        }
        if latches.is_empty() {
            continue;
        }
        let mut body = vec![h];
        mark[h] = true;
        let mut work: Vec<Block> = latches.clone();
        while let Some(b) = work.pop() {
            let Some(k) = doms.position(b) else { continue };
            if !mark[k] {
                mark[k] = true;
                body.push(k);
                work.extend(preds(b));
            }
        }
        for &k in &body {
            mark[k] = false;
        }
        body.sort_unstable();
        debug_assert!(body.iter().all(|&k| doms.dominates(header, order[k])));
        loops.push(NaturalLoop {
            header,
            blocks: body.into_iter().map(|k| order[k]).collect(),
            latches,
        });
    }
    loops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(n: u32) -> Block {
        Block::from_u32(n)
    }

    /// A natural loop as block numbers: `(header, blocks, latches)`.
    type Numbered = (u32, Vec<u32>, Vec<u32>);

    /// A graph given by its edges, with its reverse postorder from `block0`,
    /// its dominator tree and its natural loops.
    fn analyse(edges: &[(u32, u32)]) -> (Vec<Block>, DominatorTree, Vec<Numbered>) {
        let succs = |x: Block| {
            edges
                .iter()
                .filter(move |e| e.0 == x.as_u32())
                .map(|e| b(e.1))
        };
        let order = reverse_postorder_by(b(0), succs);
        let preds = |x: Block| {
            edges
                .iter()
                .filter(move |e| e.1 == x.as_u32())
                .map(|e| b(e.0))
        };
        let doms = DominatorTree::new(&order, preds);
        let nums = |v: &[Block]| v.iter().map(|x| x.as_u32()).collect::<Vec<_>>();
        let loops = natural_loops(preds, &doms)
            .iter()
            .map(|l| (l.header.as_u32(), nums(&l.blocks), nums(&l.latches)))
            .collect();
        (order, doms, loops)
    }

    #[test]
    fn nested_loops_inner_blocks_in_reverse_postorder() {
        // block1 heads a loop through 2, 3, 4; block3 loops on itself.
        let (order, doms, loops) =
            analyse(&[(0, 1), (1, 2), (1, 5), (2, 3), (3, 3), (3, 4), (4, 1)]);
        // The first successor is searched first, so it comes last.
        assert_eq!(order, [0, 1, 5, 2, 3, 4].map(b));
        assert_eq!(
            loops,
            [(1, vec![1, 2, 3, 4], vec![4]), (3, vec![3], vec![3])]
        );
        assert_eq!(doms.idom(b(4)), Some(b(3)));
        assert_eq!(doms.idom(b(0)), None);
        assert_eq!(doms.children(b(1)), [b(5), b(2)]);
        assert!(doms.dominates(b(1), b(4)) && doms.dominates(b(4), b(4)));
        assert!(!doms.dominates(b(4), b(1)) && !doms.dominates(b(2), b(5)));
        assert!(!doms.dominates(b(0), b(9)) && !doms.dominates(b(9), b(9)));
    }

    #[test]
    fn irreducible_cycle_makes_no_loop() {
        // block1 and block2 form a cycle entered at both.
        let (_, doms, loops) = analyse(&[(0, 1), (0, 2), (1, 2), (2, 1), (2, 3)]);
        assert!(loops.is_empty());
        assert_eq!(doms.idom(b(1)), Some(b(0)));
        assert_eq!(doms.idom(b(2)), Some(b(0)));
    }

    #[test]
    fn repeated_back_edges_give_one_latch() {
        // `brif v, block1, block1` in block1, then an exit.
        let (_, _, loops) = analyse(&[(0, 1), (1, 1), (1, 1), (1, 2)]);
        assert_eq!(loops, [(1, vec![1], vec![1])]);
    }
}
