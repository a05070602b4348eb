//! The data-flow graph: what each instruction, value and block *is*,
//! independent of where it sits (that is [`crate::Layout`]'s job).

use crate::entities::{Block, Inst, Value};
use crate::instructions::InstData;
use crate::srcloc::{InstMark, SourceLoc};
use crate::types::Type;
use cranelift_entity::{PrimaryMap, SecondaryMap};

/// Where a value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueDef {
    /// Result number `num` of `inst`.
    Result {
        /// The defining instruction.
        inst: Inst,
        /// The result's index among the instruction's results, from 0.
        num: usize,
    },
    /// Parameter number `num` of `block`.
    Param {
        /// The block whose parameter it is.
        block: Block,
        /// The parameter's index, from 0.
        num: usize,
    },
    /// Not defined by anything: a number reserved by the text parser, or a
    /// value whose definition was removed. Using one is a verifier error.
    Detached,
}

#[derive(Clone, Debug)]
struct ValueData {
    ty: Type,
    def: ValueDef,
}

/// Per-block data: the block's parameters, in order.
#[derive(Clone, Debug, Default)]
pub struct BlockData {
    /// The parameters, in order.
    pub params: Vec<Value>,
}

/// Instructions, values and blocks of one function.
#[derive(Clone, Debug, Default)]
pub struct DataFlowGraph {
    insts: PrimaryMap<Inst, InstData>,
    results: SecondaryMap<Inst, Vec<Value>>,
    values: PrimaryMap<Value, ValueData>,
    blocks: PrimaryMap<Block, BlockData>,
    /// Where each instruction comes from in the source (see
    /// [`crate::srcloc`]); [`SourceLoc::NONE`] by default.
    srclocs: SecondaryMap<Inst, SourceLoc>,
}

impl DataFlowGraph {
    // ---- instructions ----

    /// Creates an instruction (not yet placed in the layout) with results of
    /// the given types.
    pub fn make_inst(&mut self, data: InstData, result_types: &[Type]) -> Inst {
        let inst = self.insts.push(data);
        let results = result_types
            .iter()
            .enumerate()
            .map(|(num, &ty)| {
                self.values.push(ValueData {
                    ty,
                    def: ValueDef::Result { inst, num },
                })
            })
            .collect();
        self.results[inst] = results;
        inst
    }

    /// What `inst` is. Panics if `inst` is not an instruction of this
    /// function.
    pub fn inst(&self, inst: Inst) -> &InstData {
        &self.insts[inst]
    }

    /// Mutable access to what `inst` is; changing its opcode or operands
    /// does not change its results.
    pub fn inst_mut(&mut self, inst: Inst) -> &mut InstData {
        &mut self.insts[inst]
    }

    /// The results of `inst`, in order (empty for none).
    pub fn inst_results(&self, inst: Inst) -> &[Value] {
        &self.results[inst]
    }

    /// The single result of `inst`; panics if it has not exactly one.
    pub fn first_result(&self, inst: Inst) -> Value {
        let r = &self.results[inst];
        assert_eq!(r.len(), 1, "{inst} has {} results", r.len());
        r[0]
    }

    /// The number of instructions ever created, placed or not (one more
    /// than the highest instruction number).
    pub fn num_insts(&self) -> usize {
        self.insts.len()
    }

    // ---- source locations ----

    /// The source location of `inst` ([`SourceLoc::NONE`] if it has none).
    pub fn srcloc(&self, inst: Inst) -> SourceLoc {
        self.srclocs[inst]
    }

    /// Sets the source location of `inst`; [`SourceLoc::NONE`] clears it.
    pub fn set_srcloc(&mut self, inst: Inst, loc: SourceLoc) {
        if loc.is_some() || self.srclocs[inst].is_some() {
            self.srclocs[inst] = loc;
        }
    }

    /// Gives `to` the location of `from` (both of this function): for a
    /// pass that copies an instruction.
    pub fn copy_srcloc(&mut self, from: Inst, to: Inst) {
        let loc = self.srclocs[from];
        self.set_srcloc(to, loc);
    }

    /// A mark of the instructions made so far, for
    /// [`DataFlowGraph::set_srclocs_since`].
    pub fn inst_mark(&self) -> InstMark {
        InstMark(self.insts.len())
    }

    /// Gives `loc` to every instruction made since `mark` that has no
    /// location: the code a pass generated for one instruction takes that
    /// instruction's location, while instructions that already have one
    /// (copies, or code of an inner construct) keep theirs.
    pub fn set_srclocs_since(&mut self, mark: InstMark, loc: SourceLoc) {
        if loc.is_none() {
            return;
        }
        for k in mark.0..self.insts.len() {
            let inst = Inst::from_u32(k as u32);
            if self.srclocs[inst].is_none() {
                self.srclocs[inst] = loc;
            }
        }
    }

    /// Does any instruction have a location?
    pub fn has_srclocs(&self) -> bool {
        self.insts.keys().any(|i| self.srclocs[i].is_some())
    }

    /// Every instruction ever created, placed in the layout or not.
    pub fn insts(&self) -> impl Iterator<Item = (Inst, &InstData)> {
        self.insts.iter()
    }

    // ---- values ----

    /// The type of `v`. Panics if `v` is not a value of this function.
    pub fn value_type(&self, v: Value) -> Type {
        self.values[v].ty
    }

    /// Where `v` comes from. Panics if `v` is not a value of this function.
    pub fn value_def(&self, v: Value) -> &ValueDef {
        &self.values[v].def
    }

    /// Is `v` a valid entity number of this function?
    pub fn value_is_valid(&self, v: Value) -> bool {
        self.values.is_valid(v)
    }

    /// The number of values ever created, defined or detached (one more
    /// than the highest value number).
    pub fn num_values(&self) -> usize {
        self.values.len()
    }

    /// Creates a value with no definition (see [`ValueDef::Detached`]).
    pub fn make_detached_value(&mut self, ty: Type) -> Value {
        self.values.push(ValueData {
            ty,
            def: ValueDef::Detached,
        })
    }

    /// Gives a detached value a definition as result `num` of `inst`. Used by
    /// the text parser, which preserves value numbers.
    pub fn attach_result(&mut self, v: Value, ty: Type, inst: Inst, num: usize) {
        self.values[v] = ValueData {
            ty,
            def: ValueDef::Result { inst, num },
        };
    }

    /// Gives a detached value a definition as parameter `num` of `block`.
    pub fn attach_param(&mut self, v: Value, ty: Type, block: Block, num: usize) {
        self.values[v] = ValueData {
            ty,
            def: ValueDef::Param { block, num },
        };
    }

    /// Makes the detached value `v` result `num` of `inst` in place of the
    /// value that was; that one is detached and returned.
    pub fn replace_result(&mut self, inst: Inst, num: usize, v: Value) -> Value {
        let ty = self.values[v].ty;
        let old = std::mem::replace(&mut self.results[inst][num], v);
        self.values[old].def = ValueDef::Detached;
        self.attach_result(v, ty, inst, num);
        old
    }

    /// Creates an instruction whose results are the given (detached) values.
    pub fn make_inst_with_results(&mut self, data: InstData, results: &[(Value, Type)]) -> Inst {
        let inst = self.insts.push(data);
        for (num, &(v, ty)) in results.iter().enumerate() {
            self.attach_result(v, ty, inst, num);
        }
        self.results[inst] = results.iter().map(|&(v, _)| v).collect();
        inst
    }

    // ---- blocks ----

    /// Creates a block without parameters (not yet in the layout).
    pub fn make_block(&mut self) -> Block {
        self.blocks.push(BlockData::default())
    }

    /// The number of blocks ever created, in the layout or not (one more
    /// than the highest block number).
    pub fn num_blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Is `b` a valid entity number of this function?
    pub fn block_is_valid(&self, b: Block) -> bool {
        self.blocks.is_valid(b)
    }

    /// The parameters of `block`, in order.
    pub fn block_params(&self, block: Block) -> &[Value] {
        &self.blocks[block].params
    }

    /// Appends a new parameter of type `ty` to `block`.
    pub fn append_block_param(&mut self, block: Block, ty: Type) -> Value {
        let num = self.blocks[block].params.len();
        let v = self.values.push(ValueData {
            ty,
            def: ValueDef::Param { block, num },
        });
        self.blocks[block].params.push(v);
        v
    }

    /// Removes parameter `num` of `block` and returns it, now detached; the
    /// later parameters move down one place. Branches to `block` are left
    /// as they are: [`crate::Function::remove_block_param`] and
    /// [`crate::Function::retain_block_params`] update them too.
    pub fn remove_block_param(&mut self, block: Block, num: usize) -> Value {
        let v = self.blocks[block].params.remove(num);
        self.values[v].def = ValueDef::Detached;
        for (k, &p) in self.blocks[block].params.iter().enumerate().skip(num) {
            self.values[p].def = ValueDef::Param { block, num: k };
        }
        v
    }

    /// Appends an existing detached value as a parameter of `block`.
    pub fn attach_block_param(&mut self, block: Block, v: Value, ty: Type) {
        let num = self.blocks[block].params.len();
        self.attach_param(v, ty, block, num);
        self.blocks[block].params.push(v);
    }
}
