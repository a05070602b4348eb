//! The control-flow graph of a function, as the passes walk it: successors,
//! reverse postorder, the dominator tree and the loop-nesting forest — the one
//! implementation the optimizer, the AD planner and the JIT share (the
//! verifier keeps its own dominators, as an independent check).
//!
//! The graph itself is the caller's: [`reverse_postorder_by`],
//! [`DominatorTree::new`] and [`LoopForest::new`] take successors or
//! predecessors as functions, so a pass can give its own view (distinct
//! blocks, edges, positions) and get the same orders as every other pass.

use crate::entities::Block;
use crate::function::Function;
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::{PrimaryMap, SecondaryMap};

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

/// A natural loop of a [`LoopForest`]. Loops are numbered in reverse
/// postorder of their headers, so a loop comes after every loop that
/// contains it.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Loop(u32);
cranelift_entity::entity_impl!(Loop, "loop");

/// What a [`LoopForest`] knows of one loop.
#[derive(Clone, Debug)]
struct LoopData {
    header: Block,
    latches: Vec<Block>,
    parent: PackedOption<Loop>,
    /// 1 for an outermost loop.
    depth: u32,
    /// Preorder number in the forest, and the largest preorder number of
    /// its subtree: `m` is inside this loop iff `pre <= pre(m) <= last`.
    pre: u32,
    last: u32,
    /// The loops it immediately contains, in reverse postorder of headers.
    children: Vec<Loop>,
    /// The blocks whose innermost loop it is, in the order given.
    own: Vec<Block>,
    /// The number of blocks in the loop (its own and its children's).
    size: usize,
}

/// The natural loops of a graph as a loop-nesting forest: one loop per
/// header, each block's innermost loop and each loop's parent, as in
/// Cranelift's `LoopAnalysis`. Nothing stores a loop's whole body, so the
/// forest takes space and time linear in the graph (plus an inverse
/// Ackermann factor) however deep loops nest; [`LoopForest::contains`] is a
/// constant-time test and [`LoopForest::blocks`] lists a body on request.
///
/// A back edge is an edge `t → h` where `h` dominates `t`; the loop of `h`
/// is `h` and every block that reaches a back edge's source without
/// passing through `h`. Every block of a natural loop is dominated by its
/// header (a path from the entry to it that avoided the header would
/// continue to a back edge's source, which the header dominates), and two
/// natural loops are disjoint or nested, so the loops form a forest.
/// Irreducible control flow — a cycle with two ways in, which reversed
/// control flow can have — makes no loop: no block of the cycle dominates
/// the others, so it has no back edge.
#[derive(Clone, Debug, Default)]
pub struct LoopForest {
    loops: PrimaryMap<Loop, LoopData>,
    innermost: SecondaryMap<Block, PackedOption<Loop>>,
    /// Position of each block in the order given.
    position: SecondaryMap<Block, u32>,
}

// `LoopForest::default()` is the forest of a graph without loops.

impl LoopForest {
    /// The loops of the graph of `doms`. `preds` must be the predecessors
    /// `doms` was built with (repeats are allowed; predecessors outside the
    /// order are ignored).
    ///
    /// Loops are found innermost first (headers in reverse of reverse
    /// postorder): a walk back from a loop's latches marks the blocks that
    /// have no loop yet and jumps over an inner loop it meets from that
    /// loop's outermost known ancestor (found through a union-find with
    /// path compression) straight to the predecessors of its header, so
    /// each block is marked once and each edge followed a bounded number of
    /// times.
    pub fn new<I>(preds: impl Fn(Block) -> I, doms: &DominatorTree) -> LoopForest
    where
        I: IntoIterator<Item = Block>,
    {
        let order = doms.order();
        let mut loops: PrimaryMap<Loop, LoopData> = PrimaryMap::new();
        let mut position = SecondaryMap::with_default(u32::MAX);
        for (k, &h) in order.iter().enumerate() {
            position[h] = k as u32;
            let mut latches: Vec<Block> = Vec::new();
            for p in preds(h) {
                if doms.dominates(h, p) && !latches.contains(&p) {
                    latches.push(p);
                }
            }
            if !latches.is_empty() {
                loops.push(LoopData {
                    header: h,
                    latches,
                    parent: None.into(),
                    depth: 1,
                    pre: 0,
                    last: 0,
                    children: Vec::new(),
                    own: Vec::new(),
                    size: 0,
                });
            }
        }
        let mut innermost: SecondaryMap<Block, PackedOption<Loop>> = SecondaryMap::new();
        // Union-find over loops: `up[l]` leads to the outermost loop found
        // so far around `l`.
        let mut up: SecondaryMap<Loop, Loop> = SecondaryMap::with_default(Loop(0));
        for l in loops.keys() {
            up[l] = l;
        }
        let find = |up: &mut SecondaryMap<Loop, Loop>, mut l: Loop| {
            let mut root = l;
            while up[root] != root {
                root = up[root];
            }
            while up[l] != root {
                let next = up[l];
                up[l] = root;
                l = next;
            }
            root
        };
        let mut work: Vec<Block> = Vec::new();
        for l in loops.keys().rev() {
            let header = loops[l].header;
            innermost[header] = l.into();
            work.extend(loops[l].latches.iter().copied());
            while let Some(b) = work.pop() {
                if position[b] == u32::MAX {
                    continue;
                }
                match innermost[b].expand() {
                    None => {
                        innermost[b] = l.into();
                        work.extend(preds(b));
                    }
                    Some(m) => {
                        let top = find(&mut up, m);
                        if top != l {
                            up[top] = l;
                            loops[top].parent = l.into();
                            work.extend(preds(loops[top].header));
                        }
                    }
                }
            }
        }
        // Children, depths and preorder numbers; parents come first in
        // `loops` (a header dominates the headers of the loops inside).
        let keys: Vec<Loop> = loops.keys().collect();
        let mut roots = Vec::new();
        for &l in &keys {
            match loops[l].parent.expand() {
                Some(p) => {
                    loops[l].depth = loops[p].depth + 1;
                    loops[p].children.push(l);
                }
                None => roots.push(l),
            }
        }
        let mut n = 0u32;
        let mut stack: Vec<(Loop, bool)> = roots.into_iter().rev().map(|l| (l, false)).collect();
        while let Some((l, done)) = stack.pop() {
            if done {
                loops[l].last = n - 1;
                continue;
            }
            loops[l].pre = n;
            n += 1;
            stack.push((l, true));
            stack.extend(loops[l].children.iter().rev().map(|&c| (c, false)));
        }
        for &b in order {
            if let Some(l) = innermost[b].expand() {
                loops[l].own.push(b);
            }
        }
        for &l in keys.iter().rev() {
            loops[l].size += loops[l].own.len();
            if let Some(p) = loops[l].parent.expand() {
                loops[p].size += loops[l].size;
            }
        }
        LoopForest {
            loops,
            innermost,
            position,
        }
    }

    /// Are there no loops?
    pub fn is_empty(&self) -> bool {
        self.loops.is_empty()
    }

    /// The number of loops.
    pub fn len(&self) -> usize {
        self.loops.len()
    }

    /// The loops, in reverse postorder of their headers: a loop after every
    /// loop that contains it.
    pub fn loops(&self) -> impl DoubleEndedIterator<Item = Loop> + ExactSizeIterator + '_ {
        self.loops.keys()
    }

    /// The loops, innermost first: a loop before every loop that contains
    /// it (reverse postorder of headers, reversed).
    pub fn innermost_first(&self) -> impl Iterator<Item = Loop> + '_ {
        self.loops.keys().rev()
    }

    /// The header of `l`, which dominates every block of it.
    pub fn header(&self, l: Loop) -> Block {
        self.loops[l].header
    }

    /// The sources of `l`'s back edges (the header's predecessors it
    /// dominates), without repeats, in the order `preds` gave them.
    pub fn latches(&self, l: Loop) -> &[Block] {
        &self.loops[l].latches
    }

    /// The innermost loop containing `l`.
    pub fn parent(&self, l: Loop) -> Option<Loop> {
        self.loops[l].parent.expand()
    }

    /// The loops `l` immediately contains, in reverse postorder of headers.
    pub fn children(&self, l: Loop) -> &[Loop] {
        &self.loops[l].children
    }

    /// How many loops contain `l`, itself included (1 for an outermost one).
    pub fn depth(&self, l: Loop) -> u32 {
        self.loops[l].depth
    }

    /// The number of blocks of `l`.
    pub fn size(&self, l: Loop) -> usize {
        self.loops[l].size
    }

    /// `l`, then the loops around it, innermost first.
    pub fn ancestors(&self, l: Loop) -> impl Iterator<Item = Loop> + '_ {
        std::iter::successors(Some(l), |&m| self.parent(m))
    }

    /// The innermost loop containing `b` (`None` outside every loop and for
    /// blocks outside the order).
    pub fn innermost(&self, b: Block) -> Option<Loop> {
        self.innermost.get(b).and_then(|l| l.expand())
    }

    /// The loops containing `b`, innermost first.
    pub fn loops_around(&self, b: Block) -> impl Iterator<Item = Loop> + '_ {
        self.innermost(b)
            .into_iter()
            .flat_map(move |l| self.ancestors(l))
    }

    /// Is `inner` inside `outer` (reflexively)?
    pub fn encloses(&self, outer: Loop, inner: Loop) -> bool {
        let (o, i) = (&self.loops[outer], &self.loops[inner]);
        o.pre <= i.pre && i.pre <= o.last
    }

    /// Is `b` a block of `l`? Constant time.
    pub fn contains(&self, l: Loop, b: Block) -> bool {
        self.innermost(b).is_some_and(|m| self.encloses(l, m))
    }

    /// The blocks whose innermost loop is `l`, in the order given.
    pub fn own_blocks(&self, l: Loop) -> &[Block] {
        &self.loops[l].own
    }

    /// The blocks of `l`, in the order given (header first). Takes time in
    /// the size of `l`: listing every loop's blocks costs the sum of the
    /// loops' sizes, quadratic in the nesting depth, so passes that visit
    /// every loop use [`LoopForest::own_blocks`] and
    /// [`LoopForest::contains`] instead.
    pub fn blocks(&self, l: Loop) -> Vec<Block> {
        let mut out = Vec::with_capacity(self.size(l));
        let mut stack = vec![l];
        while let Some(m) = stack.pop() {
            out.extend_from_slice(&self.loops[m].own);
            stack.extend_from_slice(&self.loops[m].children);
        }
        out.sort_unstable_by_key(|&b| self.position[b]);
        out
    }
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
        let forest = LoopForest::new(preds, &doms);
        let loops: Vec<Numbered> = forest
            .loops()
            .map(|l| {
                let h = forest.header(l);
                (h.as_u32(), nums(&forest.blocks(l)), nums(forest.latches(l)))
            })
            .collect();
        assert_eq!(loops, naive_loops(&order, &doms, preds));
        (order, doms, loops)
    }

    /// The natural loops by their definition, one body set per header: the
    /// oracle the forest is checked against.
    fn naive_loops<I: IntoIterator<Item = Block>>(
        order: &[Block],
        doms: &DominatorTree,
        preds: impl Fn(Block) -> I,
    ) -> Vec<Numbered> {
        let mut out = Vec::new();
        for &h in order {
            let mut latches: Vec<u32> = Vec::new();
            for p in preds(h) {
                if doms.dominates(h, p) && !latches.contains(&p.as_u32()) {
                    latches.push(p.as_u32());
                }
            }
            if latches.is_empty() {
                continue;
            }
            let mut body = vec![h];
            let mut work: Vec<Block> = latches.iter().map(|&n| b(n)).collect();
            while let Some(x) = work.pop() {
                if order.contains(&x) && !body.contains(&x) {
                    body.push(x);
                    work.extend(preds(x));
                }
            }
            let blocks = order
                .iter()
                .filter(|x| body.contains(x))
                .map(|x| x.as_u32())
                .collect();
            out.push((h.as_u32(), blocks, latches));
        }
        out
    }

    proptest::proptest! {
        /// On random graphs (reducible or not), the forest has the loops of
        /// the definition, with consistent parents, depths and membership.
        #[test]
        fn forest_matches_the_definition(
            edges in proptest::collection::vec((0u32..12, 0u32..12), 0..40)
        ) {
            let (order, doms, _) = analyse(&edges);
            let preds = |x: Block| {
                edges
                    .iter()
                    .filter(move |e| e.1 == x.as_u32())
                    .map(|e| b(e.0))
            };
            let forest = LoopForest::new(preds, &doms);
            for l in forest.loops() {
                let body = forest.blocks(l);
                proptest::prop_assert_eq!(body.len(), forest.size(l));
                for &x in &order {
                    proptest::prop_assert_eq!(forest.contains(l, x), body.contains(&x));
                }
                if let Some(p) = forest.parent(l) {
                    proptest::prop_assert!(forest.blocks(p).len() > body.len());
                    proptest::prop_assert!(body.iter().all(|&x| forest.contains(p, x)));
                    proptest::prop_assert_eq!(forest.depth(l), forest.depth(p) + 1);
                }
                for m in forest.loops() {
                    // Nested or disjoint; the parent is the smallest strict
                    // enclosing loop.
                    let inside = forest.blocks(m).iter().all(|x| body.contains(x));
                    proptest::prop_assert_eq!(forest.encloses(l, m), inside);
                }
            }
            for &x in &order {
                let around: Vec<Loop> = forest.loops_around(x).collect();
                let expected: Vec<Loop> = {
                    let mut v: Vec<Loop> =
                        forest.loops().filter(|&l| forest.contains(l, x)).collect();
                    v.sort_by_key(|&l| forest.size(l));
                    v
                };
                proptest::prop_assert_eq!(around, expected);
            }
        }
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
