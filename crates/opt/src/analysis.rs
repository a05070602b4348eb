//! What the optimizer's passes share: the control-flow graph (with the
//! dominator tree and natural loops of [`adze_ir::cfg`]), the rule region
//! each block belongs to, which instructions are pure, and value
//! replacement.
//!
//! Everything here is computed from scratch by each pass in time linear in
//! the size of the function (dominators: Cooper, Harvey and Kennedy's
//! iterative algorithm, which converges in a few sweeps on reducible
//! control flow).
//!
//! **Region scopes.** A block's *scope* is the innermost rule region that
//! lists it (or none). A value's scope is the scope of the block that
//! defines it. The passes keep every region's interface intact (SPEC §2) by
//! one rule, [`Scopes::can_replace`]: a value may stand in for another only
//! if both have the same scope, or if it is an argument of the region the
//! replaced value lives in; and the values a region lists as its arguments
//! and results are never replaced or removed ([`Scopes::is_pinned`]). So a
//! region's body keeps computing from its arguments only, code outside
//! never starts using a value of the body (other than its results), and the
//! region stays exactly the call it stands for.

use adze_ir::cfg::{self, DominatorTree, LoopForest};
use adze_ir::{Block, Function, Inst, InstData, Opcode, Region, Value};
use cranelift_entity::{EntityRef, EntitySet, SecondaryMap};

/// A side table indexed by an entity, sized for the entities `func` has
/// now, with `default` for the others (entities created after the table
/// read as the default, and writing one grows the table).
pub(crate) fn table<K: EntityRef, T: Clone>(len: usize, default: T) -> SecondaryMap<K, T> {
    let mut map = SecondaryMap::with_default(default);
    map.resize(len);
    map
}

/// The instruction that defines `v`, if any.
pub(crate) fn def_inst(func: &Function, v: Value) -> Option<&InstData> {
    func.def_inst(v)
}

/// The value of `v` if it is an `iconst`.
pub(crate) fn iconst_of(func: &Function, v: Value) -> Option<i64> {
    func.iconst_value(v)
}

/// The bits of `v` if it is an `fconst`.
pub(crate) fn fconst_of(func: &Function, v: Value) -> Option<u64> {
    match def_inst(func, v)? {
        InstData::FConst { bits } => Some(*bits),
        _ => None,
    }
}

/// The value of `v` if it is a `bconst`.
pub(crate) fn bconst_of(func: &Function, v: Value) -> Option<bool> {
    match def_inst(func, v)? {
        InstData::BConst { imm } => Some(*imm),
        _ => None,
    }
}

/// Is this instruction a pure computation: no effect, cannot trap, its
/// result a function of its operands only? Such an instruction may be
/// removed when unused, merged with an identical one, or computed earlier.
///
/// Everything that [`Opcode::has_side_effects`] lists is impure, except
/// `idiv`/`irem` by a constant other than 0 and -1 and `ishl`/`sshr` by a
/// constant in `0..=63`, which cannot trap.
pub(crate) fn is_pure(func: &Function, data: &InstData) -> bool {
    match data {
        InstData::Binary {
            op: Opcode::Idiv | Opcode::Irem,
            args,
        } => iconst_of(func, args[1]).is_some_and(|d| d != 0 && d != -1),
        InstData::Binary {
            op: Opcode::Ishl | Opcode::Sshr,
            args,
        } => iconst_of(func, args[1]).is_some_and(adze_ir::semantics::shift_in_range),
        _ => !data.opcode().has_side_effects(),
    }
}

/// The control-flow graph of the blocks reachable from the entry, in reverse
/// postorder, with distinct successors and predecessors.
pub(crate) struct Cfg {
    /// Reachable blocks, entry first, in reverse postorder.
    pub(crate) rpo: Vec<Block>,
    /// Position in `rpo`, or `u32::MAX` for an unreachable block.
    rpo_num: SecondaryMap<Block, u32>,
    succs: SecondaryMap<Block, Vec<Block>>,
    preds: SecondaryMap<Block, Vec<Block>>,
}

/// The distinct blocks `block`'s terminator branches to: the optimizer's
/// view of [`adze_ir::cfg::successors`] (a `brif` to one block twice is
/// one edge here).
pub(crate) fn successors(func: &Function, block: Block) -> Vec<Block> {
    let mut out = adze_ir::cfg::successors(func, block);
    let mut k = 0;
    while k < out.len() {
        if out[..k].contains(&out[k]) {
            out.remove(k);
        } else {
            k += 1;
        }
    }
    out
}

impl Cfg {
    pub(crate) fn new(func: &Function) -> Cfg {
        let n = func.dfg.num_blocks();
        let mut cfg = Cfg {
            rpo: Vec::new(),
            rpo_num: table(n, u32::MAX),
            succs: table(n, Vec::new()),
            preds: table(n, Vec::new()),
        };
        for &b in func.layout.blocks() {
            cfg.succs[b] = successors(func, b);
        }
        let Some(entry) = func.entry_block() else {
            return cfg;
        };
        cfg.rpo = cfg::reverse_postorder_by(entry, |b| cfg.succs[b].clone());
        for (k, &b) in cfg.rpo.iter().enumerate() {
            cfg.rpo_num[b] = k as u32;
        }
        for &b in &cfg.rpo {
            for &s in &cfg.succs[b] {
                cfg.preds[s].push(b);
            }
        }
        cfg
    }

    pub(crate) fn is_reachable(&self, b: Block) -> bool {
        self.rpo_num[b] != u32::MAX
    }

    pub(crate) fn rpo_num(&self, b: Block) -> u32 {
        self.rpo_num[b]
    }

    /// Distinct successors (of any placed block).
    pub(crate) fn succs(&self, b: Block) -> &[Block] {
        &self.succs[b]
    }

    /// Distinct reachable predecessors.
    pub(crate) fn preds(&self, b: Block) -> &[Block] {
        &self.preds[b]
    }

    /// The dominator tree of the reachable blocks; its children are in
    /// reverse postorder.
    pub(crate) fn dominators(&self) -> DominatorTree {
        DominatorTree::new(&self.rpo, |b| self.preds(b).iter().copied())
    }

    /// The loop-nesting forest ([`LoopForest`]).
    pub(crate) fn loops(&self, doms: &DominatorTree) -> LoopForest {
        LoopForest::new(|b| self.preds(b).iter().copied(), doms)
    }

    /// The loops that contain no other loop, in reverse postorder of their
    /// headers.
    pub(crate) fn innermost_loops(&self, doms: &DominatorTree) -> Vec<InnerLoop> {
        let forest = self.loops(doms);
        forest
            .loops()
            .filter(|&l| forest.children(l).is_empty())
            .map(|l| InnerLoop {
                header: forest.header(l),
                blocks: forest.own_blocks(l).to_vec(),
            })
            .collect()
    }
}

/// A loop that contains no other loop ([`Cfg::innermost_loops`]).
pub(crate) struct InnerLoop {
    /// Its header, which dominates its blocks.
    pub(crate) header: Block,
    /// Its blocks in reverse postorder, the header first.
    pub(crate) blocks: Vec<Block>,
}

/// The rule region of every block and value, and the values pinned by region
/// interfaces (see the module documentation).
pub(crate) struct Scopes {
    block_scope: SecondaryMap<Block, Option<Region>>,
    pinned: EntitySet<Value>,
    /// Blocks that a region lists, or that define a region's argument or
    /// result: never deleted.
    pinned_blocks: EntitySet<Block>,
}

impl Scopes {
    pub(crate) fn new(func: &Function) -> Scopes {
        let mut s = Scopes {
            block_scope: table(func.dfg.num_blocks(), None),
            pinned: EntitySet::with_capacity(func.dfg.num_values()),
            pinned_blocks: EntitySet::with_capacity(func.dfg.num_blocks()),
        };
        // The innermost region of a block is the deepest one that lists it.
        let mut best: SecondaryMap<Block, usize> = table(func.dfg.num_blocks(), 0);
        for (region, data) in func.regions.iter() {
            let depth = 1 + region_depth(func, region);
            for &b in &data.blocks {
                s.pinned_blocks.insert(b);
                if depth > best[b] {
                    best[b] = depth;
                    s.block_scope[b] = Some(region);
                }
            }
            for &v in data.args.iter().chain(&data.results) {
                s.pinned.insert(v);
                if let Some(b) = func.def_block(v) {
                    s.pinned_blocks.insert(b);
                }
            }
        }
        s
    }

    pub(crate) fn block_scope(&self, b: Block) -> Option<Region> {
        self.block_scope[b]
    }

    pub(crate) fn value_scope(&self, func: &Function, v: Value) -> Option<Region> {
        func.def_block(v).and_then(|b| self.block_scope(b))
    }

    /// Is `v` an argument or result of a region (so it must stay defined)?
    pub(crate) fn is_pinned(&self, v: Value) -> bool {
        self.pinned.contains(v)
    }

    /// Must `b` stay in the layout even if unreachable?
    pub(crate) fn is_pinned_block(&self, b: Block) -> bool {
        self.pinned_blocks.contains(b)
    }

    /// May every use of `old` be replaced by `new`? Not if `old` is pinned;
    /// otherwise when both live in the same region scope, or `new` is an
    /// argument of the region that `old` lives in.
    pub(crate) fn can_replace(&self, func: &Function, old: Value, new: Value) -> bool {
        if self.is_pinned(old) {
            return false;
        }
        let scope = self.value_scope(func, old);
        scope == self.value_scope(func, new)
            || scope.is_some_and(|r| func.regions[r].args.contains(&new))
    }
}

/// The number of parents above `r` (bounded, so a malformed cycle cannot
/// loop).
fn region_depth(func: &Function, r: Region) -> usize {
    let mut depth = 0;
    let mut cur = func.regions.get(r).and_then(|d| d.parent);
    while let Some(p) = cur {
        depth += 1;
        if depth > func.regions.len() {
            break;
        }
        cur = func.regions.get(p).and_then(|d| d.parent);
    }
    depth
}

/// Pending replacements of values by other values, applied to every use at
/// the end of a pass ([`Replacements::apply`]).
pub(crate) struct Replacements {
    to: SecondaryMap<Value, Option<Value>>,
    any: bool,
}

impl Replacements {
    pub(crate) fn new(func: &Function) -> Replacements {
        Replacements {
            to: table(func.dfg.num_values(), None),
            any: false,
        }
    }

    /// Every use of `old` will read `new`.
    pub(crate) fn replace(&mut self, old: Value, new: Value) {
        let new = self.resolve(new);
        if new != old {
            self.to[old] = Some(new);
            self.any = true;
        }
    }

    /// The value that stands for `v` now.
    pub(crate) fn resolve(&self, mut v: Value) -> Value {
        // Chains are short (each `replace` resolves its target), but bound
        // the walk anyway.
        for _ in 0..64 {
            match self.get(v) {
                Some(w) if w != v => v = w,
                _ => break,
            }
        }
        v
    }

    fn get(&self, v: Value) -> Option<Value> {
        self.to[v]
    }

    /// Rewrites the operands of `inst`.
    pub(crate) fn rewrite_inst(&self, func: &mut Function, inst: Inst) {
        if self.any {
            func.dfg.inst_mut(inst).map_uses(|v| self.resolve(v));
        }
    }

    /// Rewrites every use in the function: placed instructions, region
    /// arguments and results.
    pub(crate) fn apply(&self, func: &mut Function) {
        if !self.any {
            return;
        }
        let insts: Vec<Inst> = func.layout.insts().map(|(_, i)| i).collect();
        for inst in insts {
            self.rewrite_inst(func, inst);
        }
        for data in func.regions.values_mut() {
            for v in data.args.iter_mut().chain(data.results.iter_mut()) {
                *v = self.resolve(*v);
            }
        }
    }
}
