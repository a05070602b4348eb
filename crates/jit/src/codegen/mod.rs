//! Translation of one adze IR function (and of the trampolines) to
//! Cranelift IR.
//!
//! The IR is already SSA with block parameters, so blocks map 1:1 to
//! Cranelift blocks with parameters and values map 1:1 to Cranelift values
//! (an array value maps to a `(ptr, len)` pair). Blocks are translated in
//! reverse postorder from the entry, so every value is translated before its
//! uses; unreachable blocks are skipped.
//!
//! Every function gets, besides the translated IR blocks:
//! - a prologue in the Cranelift entry block: load the call depth, load the
//!   allocation mark (functions containing `zeros` only), check the depth
//!   limit, check the native stack pointer against `Ctx::stack_limit`, store
//!   `depth + 1`, and set each `zeros` slot to -1;
//! - one small cold block per trap site, which calls
//!   `adze_trap(ctx, site, a, b)` and jumps to `trap_exit`;
//! - a cold `trap_exit` block that frees this frame's arrays, restores the
//!   depth and returns status 1. A nonzero status after an internal call
//!   branches straight to `trap_exit`;
//! - with a time limit (`Limits::timeout`) only, a poll of the timer's flag
//!   (`Ctx::interrupt`) in the prologue and at the top of every block that
//!   a retreating edge enters (every loop header, in the reverse postorder
//!   the blocks are translated in), branching to one cold block per
//!   function that traps with `Timeout`. Without a limit no poll is
//!   emitted and the code is what it was before time limits existed.
//!
//! Bounds checks that cannot fail are left out (see
//! `Translator::element_addr`): AD tapes index constant-length `zeros`
//! arrays with constants, and one check block per access made big
//! straight-line functions compile several times slower.
//!
//! The [`Translator`] of one function is split by concern:
//! - this module: [`translate_function`] and its phases, the translator's
//!   state and the helpers every part uses;
//! - `frame`: the prologue and epilogue, trap sites, the cold trap paths and
//!   the time limit's polls;
//! - `values`: where each IR value is (a Cranelift value, an array's
//!   pointer and length);
//! - `split`: the values whose live ranges `crate::spill` splits, and where
//!   each is (register, stack slot) within a block;
//! - `bounds`: bounds checks, and the facts that prove them redundant;
//! - `tape`: inline `push`/`pop` by groups;
//! - `insts`: the lowering of computations, memory and `zeros`;
//! - `control`: branches, returns and calls;
//! - `trampoline`: the entry trampoline and the reserve trampoline.

mod bounds;
mod control;
mod frame;
mod insts;
mod split;
mod tape;
mod trampoline;
mod values;

pub(crate) use trampoline::{
    reserve_signature, translate_reserve_trampoline, translate_trampoline,
};

use crate::rt::TrapSite;
use crate::JitError;
use adze_ir::{
    Block as IrBlock, FuncId as IrFuncId, Function, Inlined, Inst, InstData, Limits, Type,
    Value as IrValue,
};
use cranelift_codegen::entity::{EntitySet, SecondaryMap};
use cranelift_codegen::ir::{self as cl, AbiParam, FuncRef, InstBuilder, MemFlagsData};
use cranelift_frontend::FunctionBuilder;
use cranelift_jit::JITModule;
use cranelift_module::{FuncId as ClFuncId, Module as _};
use std::collections::HashMap;

use bounds::Bounds;
use frame::Frame;
use split::Split;
use tape::Tapes;
use values::Slot;

/// Status returned by generated functions when a trap was recorded.
const TRAPPED: i64 = 1;

/// Cranelift type of a scalar IR type.
pub(crate) fn scalar_type(ty: Type) -> Option<cl::Type> {
    match ty {
        Type::F64 => Some(cl::types::F64),
        Type::I64 => Some(cl::types::I64),
        Type::Bool => Some(cl::types::I8),
        Type::F64x2 => Some(cl::types::F64X2),
        Type::Array | Type::IArray => None,
    }
}

/// The Cranelift signature of a compiled IR function:
/// `(ctx: ptr, params.., out: ptr) -> i32`, arrays as `(ptr, i64)`.
pub(crate) fn clif_signature(
    jm: &JITModule,
    ptr: cl::Type,
    params: impl Iterator<Item = Type>,
) -> cl::Signature {
    let mut sig = jm.make_signature();
    sig.params.push(AbiParam::new(ptr));
    for ty in params {
        match scalar_type(ty) {
            Some(t) => sig.params.push(AbiParam::new(t)),
            None => {
                sig.params.push(AbiParam::new(ptr));
                sig.params.push(AbiParam::new(cl::types::I64));
            }
        }
    }
    sig.params.push(AbiParam::new(ptr));
    sig.returns.push(AbiParam::new(cl::types::I32));
    sig
}

/// What the translator needs to know about the module being compiled.
pub(crate) struct Env<'a> {
    pub module: &'a adze_ir::Module,
    /// Cranelift ids of the compiled IR functions.
    pub funcs: &'a SecondaryMap<IrFuncId, Option<ClFuncId>>,
    /// Cranelift ids of imported symbols, by symbol name.
    pub imports: &'a HashMap<&'static str, ClFuncId>,
    pub limits: Limits,
    pub ptr: cl::Type,
    /// The `preserve_all` trampoline to `adze_reserve` (see
    /// `translate_reserve_trampoline`).
    pub reserve: ClFuncId,
}

fn flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

/// The translation of one function: the Cranelift builder, what the
/// translator knows of the IR, and its state, one part per concern.
struct Translator<'a, 'b> {
    b: FunctionBuilder<'b>,
    env: &'a Env<'a>,
    jm: &'a mut JITModule,
    func: &'a Function,
    sites: &'a mut Vec<TrapSite>,
    /// The context pointer, the function's first parameter.
    ctx: cl::Value,
    /// The instruction being translated.
    cur: Option<Inst>,
    /// Per IR block, the innermost inlined body it belongs to
    /// (`Function::innermost_inlined_by_block`), for trap sites.
    inlined_owner: SecondaryMap<IrBlock, Option<Inlined>>,
    /// The translation of each IR value defined so far.
    vals: SecondaryMap<IrValue, Option<Slot>>,
    /// The bools kept in stack slots (`Translator::pin`): `apart`s, and
    /// conjunctions of them.
    pinned: cranelift_codegen::entity::EntitySet<IrValue>,
    /// The Cranelift block of each reachable IR block.
    blocks: SecondaryMap<IrBlock, Option<cl::Block>>,
    /// The references to other functions imported into this one so far. A
    /// `HashMap`: keyed by Cranelift's ids of the whole module's functions
    /// and symbols, of which one function uses a few.
    refs: HashMap<ClFuncId, FuncRef>,
    /// The frame's stack slots, trap exit and cold paths.
    frame: Frame,
    /// What proves bounds checks redundant.
    bounds: Bounds,
    /// The tape groups and the state of the current one.
    tapes: Tapes,
    /// The split values and where they are.
    split: Split,
    /// Loop headers whose `brif` stays in the loop on `then` and leaves on
    /// `else` (see `Translator::brif`).
    exit_first: EntitySet<IrBlock>,
}

/// What [`translate_function`] learned about the function that matters for
/// how Cranelift compiles it.
pub(crate) struct Translated {
    /// Loops nested so deep that the sizes of the loops add up to many
    /// times the function ([`crate::spill::Graph::deeply_nested`]): the
    /// register allocator's liveness (per block, every value live through
    /// it) grows with the square of the depth, and the single-pass
    /// allocator is used instead.
    pub deeply_nested: bool,
}

/// The facts of the IR that the translation is laid out by.
struct Shape {
    /// The reachable blocks in reverse postorder, the entry first.
    order: Vec<IrBlock>,
    /// The arrays the function owns (`zeros` arrays and array results of
    /// calls), in `order`: each has a slot with its `Ctx::allocs` index.
    zeros: Vec<adze_ir::Value>,
    /// The most results of one call.
    max_results: usize,
}

impl Shape {
    fn of(func: &Function) -> Result<Shape, JitError> {
        let unsupported = |what: &str| JitError::Unsupported {
            func: func.name.clone(),
            what: what.into(),
        };
        let entry = func
            .entry_block()
            .ok_or_else(|| unsupported("a function without a body"))?;
        let order = adze_ir::cfg::reverse_postorder(func, entry);
        for &blk in &order {
            if adze_ir::cfg::successors(func, blk).contains(&entry) {
                return Err(unsupported("a branch to the entry block"));
            }
        }
        let insts = || {
            order
                .iter()
                .flat_map(|&blk| func.layout.block_insts(blk).iter().copied())
        };
        let zeros = insts()
            .filter(|&i| {
                matches!(
                    func.dfg.inst(i),
                    InstData::Zeros { .. } | InstData::Call { .. }
                )
            })
            .flat_map(|i| func.dfg.inst_results(i).iter().copied())
            .filter(|&v| func.dfg.value_type(v).is_array())
            .collect();
        let max_results = insts()
            .filter_map(|i| match func.dfg.inst(i) {
                InstData::Call { .. } => Some(func.dfg.inst_results(i).len()),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        Ok(Shape {
            order,
            zeros,
            max_results,
        })
    }
}

/// Translates `func` into the (cleared) Cranelift function `clif`, in
/// phases: the shape of the IR, the frame and the prologue, the blocks, each
/// block's instructions, and the shared cold paths.
pub(crate) fn translate_function(
    env: &Env<'_>,
    jm: &mut JITModule,
    fctx: &mut cranelift_frontend::FunctionBuilderContext,
    clif: &mut cl::Function,
    func: &Function,
    sites: &mut Vec<TrapSite>,
) -> Result<Translated, JitError> {
    let shape = Shape::of(func)?;
    let order = &shape.order;
    clif.signature = clif_signature(jm, env.ptr, func.sig.param_types());
    let mut b = FunctionBuilder::new(clif, fctx);
    let cl_entry = b.create_block();
    b.append_block_params_for_function_params(cl_entry);
    b.switch_to_block(cl_entry);
    let params = b.block_params(cl_entry).to_vec();
    let (frame, depth) = Frame::enter(&mut b, env, jm, func, &shape, &params)?;

    let graph = crate::spill::Graph::new(func, order);
    let plan = crate::spill::plan(func, order, &graph, control::calls_out);
    let exit_first = crate::spill::exit_first_headers(func, &graph);
    let mut t = Translator {
        b,
        env,
        jm,
        func,
        sites,
        ctx: params[0],
        cur: None,
        inlined_owner: SecondaryMap::from(func.innermost_inlined_by_block()),
        vals: SecondaryMap::with_capacity(func.dfg.num_values()),
        pinned: cranelift_codegen::entity::EntitySet::new(),
        blocks: SecondaryMap::with_capacity(func.dfg.num_blocks()),
        refs: HashMap::new(),
        frame,
        bounds: Bounds::new(func),
        tapes: Tapes::plan(func, order),
        split: Split::new(plan),
        exit_first,
    };
    t.prologue(depth);
    t.enter_tape_lens();
    // The time limit polls at the top of every loop (and in the prologue).
    let loop_headers = if env.limits.timeout.is_some() {
        graph.retreating_targets()
    } else {
        Default::default()
    };
    t.bind_params(&params);
    t.create_blocks(order)?;
    for (n, &blk) in order.iter().enumerate() {
        t.translate_block(n, blk, loop_headers.contains(&n))?;
    }
    t.finish()?;
    Ok(Translated {
        deeply_nested: graph.deeply_nested(),
    })
}

impl Translator<'_, '_> {
    fn err(&self, message: String) -> JitError {
        JitError::Codegen {
            func: self.func.name.clone(),
            message,
        }
    }

    /// Creates the Cranelift blocks of `order` after the entry, with their
    /// parameters; the parameters that are not split are defined here, the
    /// split ones when their block is entered.
    fn create_blocks(&mut self, order: &[IrBlock]) -> Result<(), JitError> {
        for &blk in &order[1..] {
            let cb = self.b.create_block();
            for &p in self.func.dfg.block_params(blk) {
                let cty = scalar_type(self.func.dfg.value_type(p)).ok_or_else(|| {
                    JitError::Unsupported {
                        func: self.func.name.clone(),
                        what: format!("an array parameter of the non-entry block {blk}"),
                    }
                })?;
                let cv = self.b.append_block_param(cb, cty);
                if !self.split.plan.is_split(p) {
                    self.vals[p] = Some(Slot::Scalar(cv));
                }
            }
            self.blocks[blk] = Some(cb);
        }
        Ok(())
    }

    /// Translates the IR block `blk`, the `n`-th of the order, which polls
    /// the time limit first when `polls`.
    fn translate_block(&mut self, n: usize, blk: IrBlock, polls: bool) -> Result<(), JitError> {
        self.split.enter_block(self.func, blk)?;
        if n > 0 {
            let cb = self.dest(blk)?;
            self.b.switch_to_block(cb);
            self.define_split_params(blk, cb);
        }
        if polls {
            self.poll();
        }
        self.bounds.enter_block(n);
        self.tapes.enter_block();
        for &inst in self.func.layout.block_insts(blk) {
            if self.func.dfg.inst(inst).opcode().is_terminator() {
                self.before_terminator(blk)?;
            }
            let across = Some(&self.split.plan.cross[inst])
                .filter(|l| !l.is_empty())
                .cloned();
            if let Some(across) = &across {
                self.save(across, false)?;
            }
            self.inst(inst)?;
            self.split.clobbered(across.iter().flatten());
        }
        if !self
            .func
            .layout
            .last_inst(blk)
            .is_some_and(|i| self.func.dfg.inst(i).opcode().is_terminator())
        {
            return Err(self.err(format!("{blk} does not end with a terminator")));
        }
        Ok(())
    }

    fn import(&mut self, name: &str) -> Result<FuncRef, JitError> {
        let id = *self
            .env
            .imports
            .get(name)
            .ok_or_else(|| self.err(format!("symbol `{name}` is not registered")))?;
        Ok(self.func_ref(id))
    }

    fn func_ref(&mut self, id: ClFuncId) -> FuncRef {
        if let Some(&r) = self.refs.get(&id) {
            return r;
        }
        let r = self.jm.declare_func_in_func(id, self.b.func);
        self.refs.insert(id, r);
        r
    }

    /// Loads the scalar kept in stack slot `ss` at `offset`.
    ///
    /// Integers are read with an `atomic_load` (a plain `mov` on x86-64):
    /// Cranelift 0.135 hoists the `stack_addr` of a `stack_load` to the
    /// function entry, and when it sinks the load into an ALU operand
    /// (`imul (%r12), ..`) it cannot fold that address, so the address
    /// stays live in a callee-saved register for the whole function. An
    /// atomic load is never sunk, and its address folds to `off(%rsp)`.
    fn slot_load(&mut self, ty: cl::Type, ss: cl::StackSlot, offset: i32) -> cl::Value {
        if ty.is_int() {
            let addr = self.b.ins().stack_addr(self.env.ptr, ss, offset);
            self.b.ins().atomic_load(ty, flags(), addr)
        } else {
            self.b.ins().stack_load(self.env.ptr, ty, ss, offset)
        }
    }
}
