//! The plan's control flow: reachable blocks in reverse postorder, the
//! incoming edges of each block, chains of blocks joined by a lone `jump`,
//! and the counted loops with their induction variables.

use super::Plan;
use adze_ir::{Block, Function, Inst, InstData, Opcode, Type, Value, ValueDef};
use cranelift_entity::{EntitySet, SecondaryMap};

/// The reachable blocks of a function and their edges.
pub(super) struct Cfg {
    /// Reachable blocks in reverse postorder.
    pub order: Vec<Block>,
    pub reachable: EntitySet<Block>,
    /// Incoming edges of each block, from reachable blocks.
    pub preds: SecondaryMap<Block, Vec<Edge>>,
    /// Reachable blocks ending in `return`.
    pub returns: Vec<Block>,
}

impl Cfg {
    pub fn new(func: &Function, entry: Block) -> Cfg {
        let order = adze_ir::cfg::reverse_postorder(func, entry);
        let mut reachable = EntitySet::new();
        for &b in &order {
            reachable.insert(b);
        }
        let mut preds: SecondaryMap<Block, Vec<Edge>> = SecondaryMap::new();
        let mut returns = Vec::new();
        for &b in &order {
            let Some(inst) = func.layout.last_inst(b) else {
                continue;
            };
            let data = func.dfg.inst(inst);
            if matches!(data, InstData::Return { .. }) {
                returns.push(b);
            }
            for (dest, call) in data.destinations().iter().enumerate() {
                preds[call.block].push(Edge {
                    from: b,
                    inst,
                    dest,
                });
            }
        }
        Cfg {
            order,
            reachable,
            preds,
            returns,
        }
    }
}

/// A control-flow edge: destination number `dest` of the terminator `inst`
/// of block `from` (a `brif` has two, possibly to the same block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Edge {
    pub from: Block,
    pub inst: Inst,
    pub dest: usize,
}

/// A *counted* loop: its header has exactly two incoming edges, one from
/// outside (the entry edge) and one back edge. Instead of an edge number per header
/// execution, the augmented primal threads an iteration counter through the
/// header and pushes it once, where the loop is left (an exit edge or a
/// `return` inside it). The adjoint keeps it in its trip array and counts
/// down in the header's reverse block: at 0 it leaves by the entry edge.
#[derive(Clone, Debug)]
pub(crate) struct Loop {
    /// Positions in `preds[header]` of the entry edge and the back edge.
    pub entry: usize,
    pub back: usize,
    /// The loop in the plan's loop-nesting forest.
    natural: adze_ir::cfg::Loop,
}

/// Per block: its chain edge (see [`Plan::chain_pred`]) and the first block
/// of its chain. `order` is a reverse postorder, so a chain's blocks come
/// in chain order.
pub(super) fn chains(
    func: &Function,
    entry: Block,
    order: &[Block],
    preds: &SecondaryMap<Block, Vec<Edge>>,
) -> (
    SecondaryMap<Block, Option<Edge>>,
    SecondaryMap<Block, Option<Block>>,
) {
    let mut pos = SecondaryMap::with_default(usize::MAX);
    for (k, &b) in order.iter().enumerate() {
        pos[b] = k;
    }
    let mut chain_pred = SecondaryMap::new();
    // `None`: the block starts its own chain.
    let mut chain: SecondaryMap<Block, Option<Block>> = SecondaryMap::new();
    for &b in order {
        if b == entry {
            continue;
        }
        let [e] = preds[b].as_slice() else {
            continue;
        };
        let is_jump = matches!(func.dfg.inst(e.inst), InstData::Jump { .. });
        if is_jump && e.from != b && pos[e.from] < pos[b] {
            chain_pred[b] = Some(*e);
            chain[b] = Some(chain[e.from].unwrap_or(e.from));
        }
    }
    (chain_pred, chain)
}

/// The step of an induction variable: `next` is `p + c`, `c + p` or `p - c`
/// for an `iconst c`.
fn iv_step(func: &Function, p: Value, next: Value) -> Option<i64> {
    let ValueDef::Result { inst, .. } = *func.dfg.value_def(next) else {
        return None;
    };
    let konst = |v: Value| func.iconst_value(v);
    match func.dfg.inst(inst) {
        InstData::Binary {
            op: Opcode::Iadd,
            args: [a, b],
        } => {
            if *a == p {
                konst(*b)
            } else if *b == p {
                konst(*a)
            } else {
                None
            }
        }
        InstData::Binary {
            op: Opcode::Isub,
            args: [a, b],
        } if *a == p => konst(*b).map(i64::wrapping_neg),
        _ => None,
    }
}

impl Plan {
    pub fn is_reachable(&self, b: Block) -> bool {
        self.reachable.contains(b)
    }

    /// The incoming-edge number of `edge` at its destination.
    pub fn edge_number(&self, to: Block, edge: Edge) -> Option<usize> {
        self.preds[to].iter().position(|&e| e == edge)
    }

    /// Does `b` push the number of the edge it was entered by? Blocks with
    /// several incoming edges do, except the headers of counted loops.
    pub fn has_edge_item(&self, b: Block) -> bool {
        self.preds[b].len() > 1 && self.counted(b).is_none()
    }

    /// The edge `A -> b` when `b` continues a chain: `b` is not the entry,
    /// its only incoming edge is the `jump` that ends `A`. The adjoint
    /// sweep then runs R(b) straight into R(A) (R(A) has no other
    /// predecessor, so R(b)'s values dominate it) and carries the adjoints
    /// it has summed so far as SSA values instead of memory slots: code cut
    /// into blocks by the inliner (a straight-line callee is a chain) sums
    /// its adjoints exactly as the same code in one block does, at every
    /// order of differentiation.
    pub fn chain_pred(&self, b: Block) -> Option<Edge> {
        self.chain_pred[b]
    }

    /// The first block of `b`'s chain.
    pub(super) fn chain_of(&self, b: Block) -> Block {
        self.chain[b].unwrap_or(b)
    }

    /// The counted loop `b` heads, if any.
    pub fn counted(&self, b: Block) -> Option<usize> {
        self.header_loop[b]
    }

    /// Is `b` a block of counted loop `l`? Constant time.
    pub fn in_loop(&self, l: usize, b: Block) -> bool {
        self.forest.contains(self.loops[l].natural, b)
    }

    /// The counted loops that contain `b`, innermost first (a walk up the
    /// loop-nesting forest).
    pub fn enclosing(&self, b: Block) -> impl Iterator<Item = usize> + '_ {
        self.forest
            .loops_around(b)
            .filter_map(|m| self.counted_of[m])
    }

    /// The counted loops the edge `e` into `to` leaves, innermost first
    /// (the loops around `e.from` that contain `to` are the outer ones).
    pub fn exited(&self, e: Edge, to: Block) -> Vec<usize> {
        self.enclosing(e.from)
            .take_while(|&l| !self.in_loop(l, to))
            .collect()
    }

    /// The blocks of counted loop `l`, in reverse postorder.
    pub(crate) fn loop_blocks(&self, l: usize) -> Vec<Block> {
        self.forest.blocks(self.loops[l].natural)
    }

    /// Finds the counted loops (see [`Loop`]) and their induction variables:
    /// the natural loops ([`adze_ir::cfg::LoopForest`]) whose header is not
    /// the entry and has two incoming edges, one of them a back edge.
    pub(super) fn find_loops(&mut self, func: &Function) {
        let preds = |b: Block| self.preds[b].iter().map(|e| e.from);
        let doms = adze_ir::cfg::DominatorTree::new(&self.order, preds);
        let forest = adze_ir::cfg::LoopForest::new(preds, &doms);
        for natural in forest.loops() {
            let h = forest.header(natural);
            let ps = &self.preds[h];
            if h == self.entry || ps.len() != 2 {
                continue;
            }
            let backs: Vec<usize> = (0..2)
                .filter(|&k| forest.latches(natural).contains(&ps[k].from))
                .collect();
            let [back] = backs[..] else { continue };
            let entry = 1 - back;
            let l = self.loops.len();
            // Induction variables: `p` with `p + c` (or `p - c`) on the back edge.
            let dest_args = |e: Edge| -> Vec<Value> {
                func.dfg
                    .inst(e.inst)
                    .destinations()
                    .get(e.dest)
                    .map(|d| d.args.to_vec())
                    .unwrap_or_default()
            };
            let (ein, eback) = (dest_args(ps[entry]), dest_args(ps[back]));
            for (k, &p) in func.dfg.block_params(h).iter().enumerate() {
                if func.dfg.value_type(p) != Type::I64 {
                    continue;
                }
                let (Some(&init), Some(&next)) = (ein.get(k), eback.get(k)) else {
                    continue;
                };
                if let Some(step) = iv_step(func, p, next) {
                    self.ivs[p] = Some((l, init, step));
                }
            }
            self.header_loop[h] = Some(l);
            self.counted_of[natural] = Some(l);
            self.loops.push(Loop {
                entry,
                back,
                natural,
            });
        }
        self.forest = forest;
    }
}
