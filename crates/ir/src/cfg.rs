//! The control-flow graph of a function, as the passes walk it.

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
/// search that visits successors in the order the terminator names them:
/// every block comes after the blocks that dominate it, and the order is
/// the same on every run (derived code is numbered by it).
pub fn reverse_postorder(func: &Function, entry: Block) -> Vec<Block> {
    let mut visited = vec![false; func.dfg.num_blocks()];
    let mut post = Vec::new();
    // (block, successors still to visit, last first)
    let pending = |b: Block| -> Vec<Block> {
        let mut s = successors(func, b);
        s.reverse();
        s
    };
    let Some(v) = visited.get_mut(entry.as_u32() as usize) else {
        return post;
    };
    *v = true;
    let mut stack: Vec<(Block, Vec<Block>)> = vec![(entry, pending(entry))];
    while let Some((b, rest)) = stack.last_mut() {
        if let Some(next) = rest.pop() {
            if let Some(v) = visited.get_mut(next.as_u32() as usize) {
                if !*v {
                    *v = true;
                    let s = pending(next);
                    stack.push((next, s));
                }
            }
        } else {
            post.push(*b);
            stack.pop();
        }
    }
    post.reverse();
    post
}

/// Immediate dominators of the blocks of a reverse postorder, by Cooper,
/// Harvey and Kennedy's iteration ("A Simple, Fast Dominance Algorithm").
pub struct DominatorTree {
    /// Position of each block in the order (`usize::MAX`: not in it).
    pos: Vec<usize>,
    /// Immediate dominator of each position (the entry's is itself).
    idom: Vec<usize>,
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
        DominatorTree { pos, idom }
    }

    /// Does `a` dominate `b` (reflexively)? False when either is not in the
    /// order.
    pub fn dominates(&self, a: Block, b: Block) -> bool {
        let at = |b: Block| self.pos.get(b.as_u32() as usize).copied();
        let (Some(a), Some(mut b)) = (at(a), at(b)) else {
            return false;
        };
        if a == usize::MAX || b == usize::MAX {
            return false;
        }
        loop {
            if a == b {
                return true;
            }
            let up = self.idom[b];
            if up == b || up == usize::MAX {
                return false;
            }
            b = up;
        }
    }
}
