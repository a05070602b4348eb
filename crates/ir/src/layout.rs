//! The layout: the order of blocks in a function and of instructions in each
//! block. What an instruction computes lives in [`crate::DataFlowGraph`].
//!
//! Invariant: an instruction is in at most one block, and `inst_block` agrees
//! with the block lists. The first block is the entry block.

use crate::entities::{Block, Inst};
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::SecondaryMap;

/// The order of a function's blocks, and of the instructions in each block
/// (see the module doc for its invariants).
#[derive(Clone, Debug, Default)]
pub struct Layout {
    blocks: Vec<Block>,
    insts: SecondaryMap<Block, Vec<Inst>>,
    inst_block: SecondaryMap<Inst, PackedOption<Block>>,
    block_inserted: SecondaryMap<Block, bool>,
}

impl Layout {
    /// Blocks in layout order.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// The first block of the layout; `None` for a function without a
    /// body.
    pub fn entry_block(&self) -> Option<Block> {
        self.blocks.first().copied()
    }

    /// Is `block` in the layout?
    pub fn is_block_inserted(&self, block: Block) -> bool {
        self.block_inserted[block]
    }

    /// Appends `block` at the end of the layout. Panics if it is in the
    /// layout already.
    pub fn append_block(&mut self, block: Block) {
        assert!(
            !self.block_inserted[block],
            "{block} is already in the layout"
        );
        self.block_inserted[block] = true;
        self.blocks.push(block);
    }

    /// Inserts `block` right after `after`. Panics if `block` is in the
    /// layout already or `after` is not.
    pub fn insert_block_after(&mut self, block: Block, after: Block) {
        assert!(
            !self.block_inserted[block],
            "{block} is already in the layout"
        );
        let pos = self
            .block_position(after)
            .expect("anchor block not in layout");
        self.block_inserted[block] = true;
        self.blocks.insert(pos + 1, block);
    }

    /// Removes `block` and all its instructions from the layout (they stay
    /// in the data-flow graph, unplaced). For a block not in the layout,
    /// only its instructions (if any) are unplaced.
    pub fn remove_block(&mut self, block: Block) {
        if let Some(pos) = self.block_position(block) {
            self.blocks.remove(pos);
        }
        self.block_inserted[block] = false;
        for inst in std::mem::take(&mut self.insts[block]) {
            self.inst_block[inst] = None.into();
        }
    }

    fn block_position(&self, block: Block) -> Option<usize> {
        self.blocks.iter().position(|&b| b == block)
    }

    /// Instructions of `block`, in order.
    pub fn block_insts(&self, block: Block) -> &[Inst] {
        &self.insts[block]
    }

    /// The last instruction of `block`, normally its terminator.
    pub fn last_inst(&self, block: Block) -> Option<Inst> {
        self.insts[block].last().copied()
    }

    /// The block holding `inst`, if it is placed.
    pub fn inst_block(&self, inst: Inst) -> Option<Block> {
        self.inst_block[inst].expand()
    }

    /// Appends `inst` at the end of `block`. Panics if `inst` is placed
    /// already.
    pub fn append_inst(&mut self, inst: Inst, block: Block) {
        assert!(self.inst_block[inst].is_none(), "{inst} is already placed");
        self.insts[block].push(inst);
        self.inst_block[inst] = block.into();
    }

    /// Inserts `inst` at position `index` of `block`. Panics if `inst` is
    /// placed already or `index` is past the end of the block.
    pub fn insert_inst(&mut self, inst: Inst, block: Block, index: usize) {
        assert!(self.inst_block[inst].is_none(), "{inst} is already placed");
        self.insts[block].insert(index, inst);
        self.inst_block[inst] = block.into();
    }

    /// Places each `(new, before)` of `pairs` just before `before`, all in
    /// `block`, in one pass over the block (one [`Layout::insert_inst`] per
    /// instruction is quadratic in a large block). Several before one
    /// instruction keep their order. Panics if a `new` is placed already.
    pub fn insert_insts_before(&mut self, block: Block, pairs: &[(Inst, Inst)]) {
        if pairs.is_empty() {
            return;
        }
        let mut at: std::collections::HashMap<Inst, Vec<Inst>> = std::collections::HashMap::new();
        for &(new, before) in pairs {
            assert!(self.inst_block[new].is_none(), "{new} is already placed");
            self.inst_block[new] = block.into();
            at.entry(before).or_default().push(new);
        }
        let old = std::mem::take(&mut self.insts[block]);
        let mut out = Vec::with_capacity(old.len() + pairs.len());
        for inst in old {
            if let Some(news) = at.remove(&inst) {
                out.extend(news);
            }
            out.push(inst);
        }
        self.insts[block] = out;
    }

    /// Removes every instruction of `insts` from its block: one pass over
    /// each block concerned, however many are removed (removing them one by
    /// one with [`Layout::remove_inst`] is quadratic in a large block).
    pub fn remove_insts(&mut self, insts: &[Inst]) {
        let mut blocks: Vec<Block> = Vec::new();
        for &inst in insts {
            if let Some(block) = self.inst_block[inst].take() {
                blocks.push(block);
            }
        }
        blocks.sort_unstable();
        blocks.dedup();
        for block in blocks {
            let inst_block = &self.inst_block;
            self.insts[block].retain(|&i| inst_block[i].expand() == Some(block));
        }
    }

    /// Removes `inst` from its block.
    pub fn remove_inst(&mut self, inst: Inst) {
        if let Some(block) = self.inst_block[inst].take() {
            self.insts[block].retain(|&i| i != inst);
        }
    }

    /// Moves the instructions of `block` from position `index` on into the
    /// (empty, inserted) block `to`. Used to split a block at a call.
    pub fn split_block(&mut self, block: Block, index: usize, to: Block) {
        let tail = self.insts[block].split_off(index);
        for &inst in &tail {
            self.inst_block[inst] = to.into();
        }
        self.insts[to].extend(tail);
    }

    /// Every placed instruction in layout order, with its block.
    pub fn insts(&self) -> impl Iterator<Item = (Block, Inst)> + '_ {
        self.blocks
            .iter()
            .flat_map(move |&b| self.insts[b].iter().map(move |&i| (b, i)))
    }
}
