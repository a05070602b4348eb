//! Translation of one adze IR function (and of the entry trampoline) to
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

use crate::rt::{
    SiteKind, TrapSite, DEPTH_OFFSET, INTERRUPT_OFFSET, LIVE_OFFSET, STACK_LIMIT_OFFSET,
    TAPES_OFFSET, TAPE_BITS, TAPE_CAP, TAPE_FAILED_OFFSET, TAPE_LEN, TAPE_SITE_OFFSET, TAPE_SIZE,
    TAPE_TYPES,
};
use crate::JitError;
use adze_ir::{
    Block as IrBlock, CmpCond, FuncId as IrFuncId, Function, InstData, Limits, Opcode, Type,
    Value as IrValue, ValueDef,
};
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::condcodes::{CondCode, FloatCC, IntCC};
use cranelift_codegen::ir::immediates::Ieee64;
use cranelift_codegen::ir::{
    self as cl, AbiParam, BlockArg, FuncRef, InstBuilder, MemFlagsData, StackSlotData,
    StackSlotKind,
};
use cranelift_frontend::{FunctionBuilder, Variable};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId as ClFuncId, Module as _};
use std::collections::HashMap;

/// Status returned by generated functions when a trap was recorded.
const TRAPPED: i64 = 1;

/// Cranelift type of a scalar IR type.
pub(crate) fn scalar_type(ty: Type) -> Option<cl::Type> {
    match ty {
        Type::F64 => Some(cl::types::F64),
        Type::I64 => Some(cl::types::I64),
        Type::Bool => Some(cl::types::I8),
        Type::Array => None,
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
    pub funcs: &'a HashMap<IrFuncId, ClFuncId>,
    /// Cranelift ids of imported symbols, by symbol name.
    pub imports: &'a HashMap<&'static str, ClFuncId>,
    /// Symbol name of each intrinsic called out of line.
    pub intrinsics: &'a HashMap<Opcode, &'static str>,
    pub limits: Limits,
    pub ptr: cl::Type,
    /// The `preserve_all` trampoline to `adze_reserve` (see
    /// `translate_reserve_trampoline`).
    pub reserve: ClFuncId,
}

/// The signature of the reserve trampoline: `(ctx, tape, n)`, in the
/// `preserve_all` convention (the callee saves every register it uses).
pub(crate) fn reserve_signature(jm: &JITModule, ptr: cl::Type) -> cl::Signature {
    let mut sig = jm.make_signature();
    sig.call_conv = cranelift_codegen::isa::CallConv::PreserveAll;
    sig.params.extend([
        AbiParam::new(ptr),
        AbiParam::new(cl::types::I64),
        AbiParam::new(cl::types::I64),
    ]);
    sig
}

/// Builds `fn(ctx, tape, n)` in the `preserve_all` convention, which calls
/// `adze_reserve(ctx, tape, n)` (C convention). Calling the trampoline
/// clobbers no register: a push group's growth path, taken once in a while
/// inside hot loops, then costs no spills on the fast path.
pub(crate) fn translate_reserve_trampoline(
    env: &Env<'_>,
    jm: &mut JITModule,
    fctx: &mut cranelift_frontend::FunctionBuilderContext,
    clif: &mut cl::Function,
) -> Result<(), JitError> {
    clif.signature = reserve_signature(jm, env.ptr);
    let reserve = *env
        .imports
        .get("adze_reserve")
        .ok_or_else(|| JitError::Codegen {
            func: "<reserve trampoline>".into(),
            message: "symbol `adze_reserve` is not registered".into(),
        })?;
    let mut b = FunctionBuilder::new(clif, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let p = b.block_params(entry).to_vec();
    let f = jm.declare_func_in_func(reserve, b.func);
    b.ins().call(f, &p);
    b.ins().return_(&[]);
    b.seal_all_blocks();
    b.finalize(jm.target_config());
    Ok(())
}

/// A translated IR value.
#[derive(Copy, Clone)]
enum Slot {
    Scalar(cl::Value),
    Array {
        ptr: Ptr,
        len: ArrayLen,
    },
    /// A scalar whose live range is split (`crate::spill`): read with
    /// `use_var`, kept in its stack slot where the plan says.
    Split(Variable, cl::StackSlot),
}

/// Where an array's pointer is.
#[derive(Clone, Copy)]
enum Ptr {
    Value(cl::Value),
    /// Split like a scalar (`crate::spill`).
    Split(Variable, cl::StackSlot),
}

/// Where an array's length is.
#[derive(Clone, Copy)]
enum ArrayLen {
    /// The IR value of a `zeros` array's requested length.
    Of(IrValue),
    /// In a stack slot, stored on entry (a parameter array). Hot loops
    /// read a parameter's length only in bounds checks the loop does not
    /// prove; kept in a register, the lengths of a function's parameter
    /// arrays competed with its loop variables for registers (GMM's
    /// primal spilled and reloaded its inner loop's operands).
    Slot(cl::StackSlot),
}

/// Where the current version of a split value is, within an IR block:
/// in a register (the variable's current SSA version), in its slot. A
/// value not listed is in a register only (it was just defined).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Location {
    reg: bool,
    slot: bool,
}

/// The type byte of a tape entry, checked by `pop`.
fn type_code(ty: Type) -> i64 {
    match ty {
        Type::F64 => 0,
        Type::I64 => 1,
        Type::Bool => 2,
        Type::Array => 3,
    }
}

fn flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

struct Translator<'a, 'b> {
    b: FunctionBuilder<'b>,
    env: &'a Env<'a>,
    jm: &'a mut JITModule,
    func: &'a Function,
    sites: &'a mut Vec<TrapSite>,
    vals: Vec<Option<Slot>>,
    blocks: HashMap<IrBlock, cl::Block>,
    refs: HashMap<ClFuncId, FuncRef>,
    ctx: cl::Value,
    /// The out-pointer, the call depth on entry and (functions with
    /// `zeros`) the allocation mark, at offsets 0, 8 and 16: read only on
    /// return, so they live on the stack rather than in three registers
    /// through the whole function.
    frame: cl::StackSlot,
    has_mark: bool,
    trap_fn: FuncRef,
    trap_exit: cl::Block,
    results_slot: Option<cl::StackSlot>,
    /// One 8-byte slot per `zeros` instruction: the `Ctx::allocs` index of
    /// the array it made last in this frame, or -1 (see `rt::adze_alloc`).
    zeros_slot: Option<cl::StackSlot>,
    /// Offset of each `zeros` instruction's slot in `zeros_slot`.
    zeros: HashMap<adze_ir::Inst, i32>,
    /// Per array, the largest constant index proven in bounds in the current
    /// IR block.
    proven_max: HashMap<IrValue, i64>,
    /// (array, index) pairs checked in the current IR block.
    proven_pairs: std::collections::HashSet<(IrValue, IrValue)>,
    /// Arrays of equal length, as a `samelen` that has run proves: each
    /// array to a representative of its class. Facts of the entry block
    /// hold in every block (it dominates them all); others only in the
    /// rest of their own block. A check of `a[i]` then proves `b[i]`.
    same_len: adze_ir::bounds::LengthClasses,
    /// `same_len` as it was at the end of the entry block.
    entry_same_len: adze_ir::bounds::LengthClasses,
    /// Accesses that the bounds of their loop prove in bounds
    /// (`adze_ir::bounds::safe_accesses`).
    loop_safe: std::collections::HashSet<adze_ir::Inst>,
    /// The instruction being translated.
    cur: Option<adze_ir::Inst>,
    /// Per IR block number, the innermost inlined body it belongs to
    /// (`Function::innermost_inlined_by_block`), for trap sites.
    inlined_owner: Vec<Option<adze_ir::Inlined>>,
    /// The tape groups of the current IR block (see `plan_tape_groups`):
    /// for each `push`/`pop`, its position in its group and the group.
    tape_groups: HashMap<adze_ir::Inst, (usize, std::rc::Rc<Vec<adze_ir::Inst>>)>,
    /// The current push group: the addresses of its first entry's bits and
    /// type byte, and the tape length before it.
    push_base: Option<(cl::Value, cl::Value, cl::Value)>,
    /// Results of the pops of the current pop group, emitted at its first
    /// pop.
    popped: HashMap<adze_ir::Inst, cl::Value>,
    /// The cold block that reports a tape mismatch and its trap site
    /// (`mismatch_block`), filled in at the end of the function.
    mismatch: Option<(cl::Block, i64)>,
    /// The same for the time limit's polls (`poll`).
    timeout: Option<(cl::Block, i64)>,
    /// The `f64` values live across calls (`crate::spill`).
    spill: crate::spill::SpillPlan,
    /// The location of the split values in the current IR block.
    split_state: HashMap<IrValue, Location>,
    /// Loop headers whose `brif` stays in the loop on `then` and leaves on
    /// `else` (see the `Brif` case of `inst`).
    exit_first: std::collections::HashSet<IrBlock>,
}

/// Can `data` run between two `push`es or `pop`s of one inline group? Only
/// instructions that neither trap, nor call generated code, nor touch a
/// tape: moving a group's tape accesses across them is unobservable.
fn tape_neutral(data: &InstData) -> bool {
    match data {
        InstData::FConst { .. }
        | InstData::IConst { .. }
        | InstData::BConst { .. }
        | InstData::Unary { .. }
        | InstData::Powi { .. }
        | InstData::Cmp { .. } => true,
        InstData::Binary { op, .. } => !matches!(
            op,
            Opcode::Load | Opcode::Fill | Opcode::SameLen | Opcode::Idiv | Opcode::Irem
        ),
        InstData::Ternary { op, .. } => *op == Opcode::Select,
        _ => false,
    }
}

/// Translates `func` into the (cleared) Cranelift function `clif`.
pub(crate) fn translate_function(
    env: &Env<'_>,
    jm: &mut JITModule,
    fctx: &mut cranelift_frontend::FunctionBuilderContext,
    clif: &mut cl::Function,
    func: &Function,
    sites: &mut Vec<TrapSite>,
) -> Result<Translated, JitError> {
    let unsupported = |what: String| JitError::Unsupported {
        func: func.name.clone(),
        what,
    };
    let entry = func
        .entry_block()
        .ok_or_else(|| unsupported("a function without a body".into()))?;
    let order = adze_ir::cfg::reverse_postorder(func, entry);
    for &blk in &order {
        for dest in adze_ir::cfg::successors(func, blk) {
            if dest == entry {
                return Err(unsupported("a branch to the entry block".into()));
            }
        }
    }
    let zeros: HashMap<adze_ir::Inst, i32> = order
        .iter()
        .flat_map(|&blk| func.layout.block_insts(blk).iter().copied())
        .filter(|&i| matches!(func.dfg.inst(i), InstData::Zeros { .. }))
        .enumerate()
        .map(|(k, i)| (i, 8 * k as i32))
        .collect();
    let has_zeros = !zeros.is_empty();
    let max_results = order
        .iter()
        .flat_map(|&blk| func.layout.block_insts(blk).iter())
        .filter_map(|&i| match func.dfg.inst(i) {
            InstData::Call { .. } => Some(func.dfg.inst_results(i).len()),
            _ => None,
        })
        .max()
        .unwrap_or(0);

    clif.signature = clif_signature(jm, env.ptr, func.sig.param_types());
    let mut b = FunctionBuilder::new(clif, fctx);
    let cl_entry = b.create_block();
    b.append_block_params_for_function_params(cl_entry);
    b.switch_to_block(cl_entry);
    let params = b.block_params(cl_entry).to_vec();
    let ctx = params[0];
    let out = params[params.len() - 1];

    let trap_id = *env
        .imports
        .get("adze_trap")
        .ok_or_else(|| JitError::Codegen {
            func: func.name.clone(),
            message: "symbol `adze_trap` is not registered".into(),
        })?;
    let trap_fn = jm.declare_func_in_func(trap_id, b.func);
    let trap_exit = b.create_block();
    b.set_cold_block(trap_exit);

    // Prologue: depth check.
    let depth = b.ins().load(cl::types::I64, flags(), ctx, DEPTH_OFFSET);
    let mark = has_zeros.then(|| b.ins().load(cl::types::I64, flags(), ctx, LIVE_OFFSET));
    let frame = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 24, 3));
    b.ins().stack_store(env.ptr, out, frame, 0);
    b.ins().stack_store(env.ptr, depth, frame, 8);
    if let Some(mark) = mark {
        b.ins().stack_store(env.ptr, mark, frame, 16);
    }
    let results_slot = (max_results > 0).then(|| {
        b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            (8 * max_results) as u32,
            3,
        ))
    });

    let zeros_slot = has_zeros.then(|| {
        b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            8 * zeros.len() as u32,
            3,
        ))
    });

    let graph = crate::spill::Graph::new(func, &order);
    let spill = crate::spill::plan(func, &order, &graph, |data| calls_out(env, data));
    let deeply_nested = graph.deeply_nested();
    let mut t = Translator {
        b,
        env,
        jm,
        func,
        sites,
        vals: vec![None; func.dfg.num_values()],
        blocks: HashMap::new(),
        refs: HashMap::new(),
        ctx,
        frame,
        has_mark: mark.is_some(),
        trap_fn,
        trap_exit,
        results_slot,
        zeros_slot,
        zeros,
        proven_max: HashMap::new(),
        proven_pairs: Default::default(),
        same_len: Default::default(),
        entry_same_len: Default::default(),
        tape_groups: HashMap::new(),
        loop_safe: adze_ir::bounds::safe_accesses(func),
        cur: None,
        inlined_owner: func.innermost_inlined_by_block(),
        mismatch: None,
        timeout: None,
        push_base: None,
        popped: HashMap::new(),
        spill,
        split_state: HashMap::new(),
        exit_first: crate::spill::exit_first_headers(func, &order, &graph),
    };
    let limit = env.limits.max_call_depth;
    let over =
        t.b.ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, depth, i64::from(limit));
    let zero = t.b.ins().iconst(cl::types::I64, 0);
    t.trap_if(
        over,
        SiteKind::CallDepthExceeded { limit },
        Some(zero),
        Some(zero),
    );
    // Native stack check (see `Compiled::call`).
    let sp = t.b.ins().get_stack_pointer(env.ptr);
    let lim = t.b.ins().load(env.ptr, flags(), ctx, STACK_LIMIT_OFFSET);
    let low = t.b.ins().icmp(IntCC::UnsignedLessThan, sp, lim);
    t.trap_if(low, SiteKind::StackExhausted, Some(zero), Some(zero));
    // The time limit: a recursion without loops polls here.
    let polls = env.limits.timeout.is_some();
    if polls {
        t.poll();
    }
    let loop_headers = if polls {
        graph.retreating_targets()
    } else {
        Default::default()
    };
    let d1 = t.b.ins().iadd_imm_s(depth, 1);
    t.b.ins().store(flags(), d1, ctx, DEPTH_OFFSET);
    if let Some(ss) = t.zeros_slot {
        let none = t.b.ins().iconst(cl::types::I64, -1);
        for k in 0..t.zeros.len() {
            t.b.ins().stack_store(env.ptr, none, ss, 8 * k as i32);
        }
    }

    // Map the entry block's parameters.
    let mut k = 1;
    for &v in func.params() {
        if func.dfg.value_type(v) == Type::Array {
            let ss =
                t.b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 8, 3));
            t.b.ins().stack_store(env.ptr, params[k + 1], ss, 0);
            t.set_array(v, params[k], ArrayLen::Slot(ss));
            k += 2;
        } else {
            t.set_scalar(v, params[k]);
            k += 1;
        }
    }

    // Create the other blocks with their parameters.
    for &blk in &order[1..] {
        let cb = t.b.create_block();
        for &p in func.dfg.block_params(blk) {
            let ty = func.dfg.value_type(p);
            let cty = scalar_type(ty).ok_or_else(|| {
                unsupported(format!("an array parameter of the non-entry block {blk}"))
            })?;
            let cv = t.b.append_block_param(cb, cty);
            if !t.spill.is_split(p) {
                t.vals[p.index()] = Some(Slot::Scalar(cv));
            }
            // Split parameters are defined when their block is entered.
        }
        t.blocks.insert(blk, cb);
    }

    for (n, &blk) in order.iter().enumerate() {
        t.split_state.clear();
        for &(v, reg, slot) in t.spill.entry.get(&blk).into_iter().flatten() {
            if !reg && !slot {
                return Err(JitError::Codegen {
                    func: func.name.clone(),
                    message: format!("the spill plan lost {v} on entry to {blk}"),
                });
            }
            t.split_state.insert(v, Location { reg, slot });
        }
        if n > 0 {
            let cb = t.blocks[&blk];
            t.b.switch_to_block(cb);
            for (&p, &cv) in func
                .dfg
                .block_params(blk)
                .iter()
                .zip(t.b.block_params(cb).to_vec().iter())
            {
                if t.spill.is_split(p) {
                    t.set_scalar(p, cv);
                }
            }
        }
        if loop_headers.contains(&n) {
            t.poll();
        }
        t.proven_max.clear();
        t.proven_pairs.clear();
        if n == 1 {
            t.entry_same_len = t.same_len.clone();
        }
        t.same_len = t.entry_same_len.clone();
        t.plan_tape_groups(blk);
        for &inst in func.layout.block_insts(blk) {
            if func.dfg.inst(inst).opcode().is_terminator() {
                if let Some(list) = t.spill.store_at_end.get(&blk).cloned() {
                    t.save(&list, false)?;
                }
                for v in t
                    .spill
                    .reload_at_end
                    .get(&blk)
                    .cloned()
                    .into_iter()
                    .flatten()
                {
                    t.reload(v)?;
                }
                if let Some(list) = t.spill.park.get(&blk).cloned() {
                    t.save(&list, true)?;
                }
            }
            let across = t.spill.cross.get(&inst).cloned();
            if let Some(across) = &across {
                t.save(across, false)?;
            }
            t.inst(inst)?;
            for v in across.into_iter().flatten() {
                t.split_state.insert(
                    v,
                    Location {
                        reg: false,
                        slot: true,
                    },
                );
            }
        }
        if !func
            .layout
            .last_inst(blk)
            .is_some_and(|i| func.dfg.inst(i).opcode().is_terminator())
        {
            return Err(JitError::Codegen {
                func: func.name.clone(),
                message: format!("{blk} does not end with a terminator"),
            });
        }
    }

    // The shared trap paths.
    for (block, site) in t.mismatch.into_iter().chain(t.timeout) {
        t.b.switch_to_block(block);
        let site = t.b.ins().iconst(cl::types::I64, site);
        let trap_fn = t.trap_fn;
        t.b.ins().call(trap_fn, &[t.ctx, site, site, site]);
        t.b.ins().jump(trap_exit, &[]);
    }
    t.b.switch_to_block(trap_exit);
    t.epilogue()?;
    let status = t.b.ins().iconst(cl::types::I32, TRAPPED);
    t.b.ins().return_(&[status]);

    t.b.seal_all_blocks();
    let cfg = t.jm.target_config();
    t.b.finalize(cfg);
    Ok(Translated { deeply_nested })
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

/// Builds the entry trampoline
/// `fn(ctx: *mut Ctx, args: *const u64, results: *mut u64) -> i32`, which
/// unpacks 8-byte argument slots (f64 bits, i64, bool as 0/1, array = pointer
/// slot then length slot), calls `root` with `results` as its out-pointer and
/// returns its status.
pub(crate) fn translate_trampoline(
    env: &Env<'_>,
    jm: &mut JITModule,
    fctx: &mut cranelift_frontend::FunctionBuilderContext,
    clif: &mut cl::Function,
    root: IrFuncId,
) -> Result<(), JitError> {
    let rootf = env.module.func(root);
    let ptr = env.ptr;
    let mut sig = jm.make_signature();
    sig.params.extend([AbiParam::new(ptr); 3]);
    sig.returns.push(AbiParam::new(cl::types::I32));
    clif.signature = sig;
    let mut b = FunctionBuilder::new(clif, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let p = b.block_params(entry).to_vec();
    let (ctx, args, results) = (p[0], p[1], p[2]);
    let mut call_args = vec![ctx];
    let mut off = 0i32;
    for ty in rootf.sig.param_types() {
        match ty {
            Type::F64 => call_args.push(b.ins().load(cl::types::F64, flags(), args, off)),
            Type::I64 => call_args.push(b.ins().load(cl::types::I64, flags(), args, off)),
            Type::Bool => {
                let w = b.ins().load(cl::types::I64, flags(), args, off);
                call_args.push(b.ins().ireduce(cl::types::I8, w));
            }
            Type::Array => {
                call_args.push(b.ins().load(ptr, flags(), args, off));
                off += 8;
                call_args.push(b.ins().load(cl::types::I64, flags(), args, off));
            }
        }
        off += 8;
    }
    call_args.push(results);
    let callee = env.funcs.get(&root).ok_or_else(|| JitError::Codegen {
        func: rootf.name.clone(),
        message: "root function was not declared".into(),
    })?;
    let fref = jm.declare_func_in_func(*callee, b.func);
    let call = b.ins().call(fref, &call_args);
    let status = b.inst_results(call)[0];
    b.ins().return_(&[status]);
    b.seal_all_blocks();
    b.finalize(jm.target_config());
    Ok(())
}

impl Translator<'_, '_> {
    fn err(&self, message: String) -> JitError {
        JitError::Codegen {
            func: self.func.name.clone(),
            message,
        }
    }

    fn slot(&self, v: IrValue) -> Result<Slot, JitError> {
        self.vals
            .get(v.index())
            .copied()
            .flatten()
            .ok_or_else(|| self.err(format!("{v} is used before it is defined")))
    }

    fn scalar(&mut self, v: IrValue) -> Result<cl::Value, JitError> {
        match self.slot(v)? {
            Slot::Scalar(x) => Ok(x),
            Slot::Split(var, ss) => Ok(self.read_split(v, var, ss)),
            Slot::Array { .. } => Err(self.err(format!("{v} is an array, a scalar was expected"))),
        }
    }

    /// The current version of the split value `v`, reloaded from its slot
    /// when it is not in a register.
    fn read_split(&mut self, v: IrValue, var: Variable, ss: cl::StackSlot) -> cl::Value {
        let at = self.location(v);
        if !at.reg {
            let ty = scalar_type(self.func.dfg.value_type(v)).unwrap_or(self.env.ptr);
            let x = self.slot_load(ty, ss, 0);
            self.b.def_var(var, x);
            self.split_state.insert(
                v,
                Location {
                    reg: true,
                    slot: true,
                },
            );
        }
        self.b.use_var(var)
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

    /// Where the split value `v` is in the current block (one not listed
    /// was just defined: in a register only).
    fn location(&self, v: IrValue) -> Location {
        self.split_state.get(&v).copied().unwrap_or(Location {
            reg: true,
            slot: false,
        })
    }

    /// The variable and the slot of `v`, if it is split and defined.
    fn split_of(&self, v: IrValue) -> Option<(Variable, cl::StackSlot)> {
        match self.vals.get(v.index()).copied().flatten()? {
            Slot::Split(var, ss)
            | Slot::Array {
                ptr: Ptr::Split(var, ss),
                ..
            } => Some((var, ss)),
            _ => None,
        }
    }

    /// A variable and a slot for the split value `v`, made at its first
    /// definition.
    fn split_home(&mut self, v: IrValue, ty: cl::Type) -> (Variable, cl::StackSlot) {
        self.split_of(v).unwrap_or_else(|| {
            let var = self.b.declare_var(ty);
            let ss = self.b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                8,
                3,
            ));
            (var, ss)
        })
    }

    /// Defines the scalar value `v` as `x`: directly, or as a new version
    /// of its variable when `v` is split.
    fn set_scalar(&mut self, v: IrValue, x: cl::Value) {
        if self.spill.is_split(v) {
            let ty = self.b.func.dfg.value_type(x);
            let (var, ss) = self.split_home(v, ty);
            self.b.def_var(var, x);
            self.split_state.remove(&v);
            self.vals[v.index()] = Some(Slot::Split(var, ss));
        } else {
            self.vals[v.index()] = Some(Slot::Scalar(x));
        }
    }

    /// Defines the array value `v` with pointer `ptr`.
    fn set_array(&mut self, v: IrValue, ptr: cl::Value, len: ArrayLen) {
        let ptr = if self.spill.is_split(v) {
            let (var, ss) = self.split_home(v, self.env.ptr);
            self.b.def_var(var, ptr);
            self.split_state.remove(&v);
            Ptr::Split(var, ss)
        } else {
            Ptr::Value(ptr)
        };
        self.vals[v.index()] = Some(Slot::Array { ptr, len });
    }

    /// Puts the split value `v` in a register (reloading it if needed).
    fn reload(&mut self, v: IrValue) -> Result<(), JitError> {
        let (var, ss) = self
            .split_of(v)
            .ok_or_else(|| self.err(format!("{v} is to be reloaded but is not split")))?;
        self.read_split(v, var, ss);
        Ok(())
    }

    /// Puts each value of `list` in its slot (unless it is there already);
    /// with `drop`, it then leaves its register (a call clobbers it, or a
    /// loop it is not used in wants the register).
    fn save(&mut self, list: &[IrValue], drop: bool) -> Result<(), JitError> {
        for &v in list {
            let (var, ss) = self
                .split_of(v)
                .ok_or_else(|| self.err(format!("{v} is to be saved but is not split")))?;
            let at = self.location(v);
            if !at.slot {
                let x = self.read_split(v, var, ss);
                self.b.ins().stack_store(self.env.ptr, x, ss, 0);
            }
            let reg = !drop && (at.reg || !at.slot);
            self.split_state.insert(v, Location { reg, slot: true });
        }
        Ok(())
    }

    fn array(&mut self, v: IrValue) -> Result<(cl::Value, cl::Value), JitError> {
        let ptr = self.array_ptr(v)?;
        Ok((ptr, self.array_len(v)?))
    }

    fn array_ptr(&mut self, v: IrValue) -> Result<cl::Value, JitError> {
        match self.slot(v)? {
            Slot::Array {
                ptr: Ptr::Value(ptr),
                ..
            } => Ok(ptr),
            Slot::Array {
                ptr: Ptr::Split(var, ss),
                ..
            } => Ok(self.read_split(v, var, ss)),
            Slot::Scalar(_) | Slot::Split(..) => {
                Err(self.err(format!("{v} is a scalar, an array was expected")))
            }
        }
    }

    fn array_len(&mut self, v: IrValue) -> Result<cl::Value, JitError> {
        match self.slot(v)? {
            Slot::Array {
                len: ArrayLen::Of(n),
                ..
            } => self.scalar(n),
            Slot::Array {
                len: ArrayLen::Slot(ss),
                ..
            } => Ok(self.slot_load(cl::types::I64, ss, 0)),
            Slot::Scalar(_) | Slot::Split(..) => {
                Err(self.err(format!("{v} is a scalar, an array was expected")))
            }
        }
    }

    fn define(&mut self, inst: adze_ir::Inst, x: cl::Value) {
        let r = self.func.dfg.first_result(inst);
        self.set_scalar(r, x);
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

    fn new_site(&mut self, kind: SiteKind) -> i64 {
        // The inlined code the current instruction comes from; the error
        // keeps it only for faults of one instruction
        // (`TrapKind::is_at_instruction`), as the interpreter does.
        let inlined = self
            .cur
            .and_then(|i| self.func.layout.inst_block(i))
            .and_then(|b| {
                self.inlined_owner
                    .get(b.as_u32() as usize)
                    .copied()
                    .flatten()
            })
            .map_or_else(Vec::new, |i| self.func.inlined_callees(i));
        let loc = self
            .cur
            .and_then(|i| self.env.module.location(self.func.dfg.srcloc(i)));
        self.sites.push(TrapSite {
            func: self.func.name.clone(),
            inlined,
            loc,
            kind,
        });
        (self.sites.len() - 1) as i64
    }

    /// Branches to a cold block that records trap site `kind` (with run-time
    /// operands `a`, `b`) and leaves through `trap_exit` when `cond` is
    /// nonzero; continues in a fresh block otherwise.
    fn trap_if(
        &mut self,
        cond: cl::Value,
        kind: SiteKind,
        a: Option<cl::Value>,
        b: Option<cl::Value>,
    ) {
        let site = self.new_site(kind);
        let cont = self.b.create_block();
        let cold = self.b.create_block();
        self.b.set_cold_block(cold);
        self.b.ins().brif(cond, cold, &[], cont, &[]);
        self.b.switch_to_block(cold);
        let s = self.b.ins().iconst(cl::types::I64, site);
        let a = a.unwrap_or(s);
        let b = b.unwrap_or(s);
        let trap_fn = self.trap_fn;
        self.b.ins().call(trap_fn, &[self.ctx, s, a, b]);
        self.b.ins().jump(self.trap_exit, &[]);
        self.b.switch_to_block(cont);
    }

    /// Frees this frame's arrays and restores the call depth.
    fn epilogue(&mut self) -> Result<(), JitError> {
        if self.has_mark {
            let free = self.import("adze_free_to")?;
            let mark = self.slot_load(cl::types::I64, self.frame, 16);
            self.b.ins().call(free, &[self.ctx, mark]);
        }
        let depth = self.slot_load(cl::types::I64, self.frame, 8);
        self.b.ins().store(flags(), depth, self.ctx, DEPTH_OFFSET);
        Ok(())
    }

    /// `x <cond> y` as Cranelift computes it (or its complement, `not`).
    fn compare(
        &mut self,
        op: Opcode,
        cond: CmpCond,
        a: IrValue,
        b: IrValue,
        not: bool,
    ) -> Result<cl::Value, JitError> {
        let (x, y) = (self.scalar(a)?, self.scalar(b)?);
        Ok(if op == Opcode::Fcmp {
            let cc = match cond {
                CmpCond::Eq => FloatCC::Equal,
                // Unordered or not equal, like Rust's `!=`.
                CmpCond::Ne => FloatCC::NotEqual,
                CmpCond::Lt => FloatCC::LessThan,
                CmpCond::Le => FloatCC::LessThanOrEqual,
                CmpCond::Gt => FloatCC::GreaterThan,
                CmpCond::Ge => FloatCC::GreaterThanOrEqual,
            };
            // The complement of an ordered comparison is unordered-or-..:
            // exactly `!(x < y)` for NaNs too.
            let cc = if not { cc.complement() } else { cc };
            self.b.ins().fcmp(cc, x, y)
        } else {
            let cc = match cond {
                CmpCond::Eq => IntCC::Equal,
                CmpCond::Ne => IntCC::NotEqual,
                CmpCond::Lt => IntCC::SignedLessThan,
                CmpCond::Le => IntCC::SignedLessThanOrEqual,
                CmpCond::Gt => IntCC::SignedGreaterThan,
                CmpCond::Ge => IntCC::SignedGreaterThanOrEqual,
            };
            let cc = if not { cc.complement() } else { cc };
            self.b.ins().icmp(cc, x, y)
        })
    }

    /// The representative of the arrays known to have `arr`'s length.
    fn len_class(&self, arr: IrValue) -> IrValue {
        self.same_len.rep(arr)
    }

    /// The immediate of `v` if it is an `iconst`.
    fn const_of(&self, v: IrValue) -> Option<i64> {
        match self.func.dfg.value_def(v) {
            ValueDef::Result { inst, .. } => match self.func.dfg.inst(*inst) {
                InstData::IConst { imm } => Some(*imm),
                _ => None,
            },
            _ => None,
        }
    }

    /// The length of `arr` if it is a `zeros` of a constant length.
    fn const_len(&self, arr: IrValue) -> Option<i64> {
        match self.func.dfg.value_def(arr) {
            ValueDef::Result { inst, .. } => match self.func.dfg.inst(*inst) {
                InstData::Zeros { len, .. } => self.const_of(*len),
                _ => None,
            },
            _ => None,
        }
    }

    /// Bounds-checks `idx` against `arr` and returns the element address.
    ///
    /// The check is left out when it cannot fail: a constant index below the
    /// constant length of a `zeros` array, a constant index at most one that
    /// an earlier check in the same IR block proved in bounds, an
    /// (array, index) pair already checked in the same IR block (array
    /// lengths never change), or an access that the bounds of its counted
    /// loop prove in bounds (`adze_ir::bounds::safe_accesses`).
    fn element_addr(&mut self, arr: IrValue, idx: IrValue) -> Result<cl::Value, JitError> {
        let ptr = self.array_ptr(arr)?;
        let i = self.scalar(idx)?;
        let k = self.const_of(idx).filter(|&k| k >= 0);
        let safe = match k {
            Some(k) => {
                self.const_len(arr).is_some_and(|n| k < n)
                    || self
                        .proven_max
                        .get(&self.len_class(arr))
                        .is_some_and(|&m| k <= m)
            }
            None => false,
        } || self.proven_pairs.contains(&(self.len_class(arr), idx))
            || self.cur.is_some_and(|i| self.loop_safe.contains(&i));
        if !safe {
            let len = self.array_len(arr)?;
            let oob = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, len);
            let array = self.func.array_name(arr);
            self.trap_if(
                oob,
                SiteKind::IndexOutOfBounds { array },
                Some(i),
                Some(len),
            );
            let class = self.len_class(arr);
            self.proven_pairs.insert((class, idx));
            if let Some(k) = k {
                let m = self.proven_max.entry(class).or_insert(k);
                *m = (*m).max(k);
            }
        }
        let off = self.b.ins().ishl_imm_u(i, 3);
        Ok(self.b.ins().iadd(ptr, off))
    }

    fn block_args(&mut self, args: &[IrValue]) -> Result<Vec<BlockArg>, JitError> {
        args.iter()
            .map(|&v| self.scalar(v).map(BlockArg::from))
            .collect()
    }

    fn dest(&self, blk: IrBlock) -> Result<cl::Block, JitError> {
        self.blocks
            .get(&blk)
            .copied()
            .ok_or_else(|| self.err(format!("branch to unknown block {blk}")))
    }

    fn inst(&mut self, inst: adze_ir::Inst) -> Result<(), JitError> {
        self.cur = Some(inst);
        let data = self.func.dfg.inst(inst);
        let f64t = cl::types::F64;
        let i64t = cl::types::I64;
        match data {
            InstData::FConst { bits } => {
                let x = self.b.ins().f64const(Ieee64::with_bits(*bits));
                self.define(inst, x);
            }
            InstData::IConst { imm } => {
                let x = self.b.ins().iconst(i64t, *imm);
                self.define(inst, x);
            }
            InstData::BConst { imm } => {
                let x = self.b.ins().iconst(cl::types::I8, i64::from(*imm));
                self.define(inst, x);
            }
            InstData::Unary { op, arg } => {
                let op = *op;
                if op == Opcode::Len {
                    let len = self.array_len(*arg)?;
                    self.define(inst, len);
                    return Ok(());
                }
                let x = self.scalar(*arg)?;
                let ins = self.b.ins();
                let r = match op {
                    Opcode::Fneg => ins.fneg(x),
                    Opcode::Ineg => ins.ineg(x),
                    Opcode::Not => ins.bxor_imm_u(x, 1),
                    Opcode::Sitof => ins.fcvt_from_sint(f64t, x),
                    Opcode::Tobits => ins.bitcast(cl::types::I64, MemFlagsData::new(), x),
                    Opcode::Frombits => ins.bitcast(f64t, MemFlagsData::new(), x),
                    Opcode::Sqrt => ins.sqrt(x),
                    Opcode::Abs => ins.fabs(x),
                    Opcode::Floor => ins.floor(x),
                    Opcode::Ceil => ins.ceil(x),
                    _ => {
                        let sym = self.intrinsic(op)?;
                        let f = self.import(sym)?;
                        let c = self.b.ins().call(f, &[x]);
                        self.b.inst_results(c)[0]
                    }
                };
                self.define(inst, r);
            }
            InstData::Binary { op, args } => {
                let op = *op;
                match op {
                    Opcode::Load => {
                        let addr = self.element_addr(args[0], args[1])?;
                        let x = self.b.ins().load(f64t, flags(), addr, 0);
                        self.define(inst, x);
                        return Ok(());
                    }
                    Opcode::Fill => {
                        self.fill(args[0], args[1])?;
                        return Ok(());
                    }
                    Opcode::SameLen => {
                        if self.len_class(args[0]) == self.len_class(args[1]) {
                            // An earlier `samelen` already proved it.
                            return Ok(());
                        }
                        let a = self.array_len(args[0])?;
                        let b = self.array_len(args[1])?;
                        let differ = self.b.ins().icmp(IntCC::NotEqual, a, b);
                        let kind = SiteKind::ShadowLengthMismatch {
                            array: self.func.array_name(args[0]),
                            shadow: self.func.array_name(args[1]),
                        };
                        self.trap_if(differ, kind, None, None);
                        self.same_len.join(args[0], args[1]);
                        return Ok(());
                    }
                    Opcode::Idiv | Opcode::Irem => {
                        let r = self.idiv(op, args[0], args[1])?;
                        self.define(inst, r);
                        return Ok(());
                    }
                    _ => {}
                }
                let (x, y) = (self.scalar(args[0])?, self.scalar(args[1])?);
                let ins = self.b.ins();
                let r = match op {
                    Opcode::Fadd => ins.fadd(x, y),
                    Opcode::Fsub => ins.fsub(x, y),
                    Opcode::Fmul => ins.fmul(x, y),
                    Opcode::Fdiv => ins.fdiv(x, y),
                    Opcode::Iadd => ins.iadd(x, y),
                    Opcode::Isub => ins.isub(x, y),
                    Opcode::Imul => ins.imul(x, y),
                    // Cranelift's fmin/fmax are IEEE 754-2019 minimum/maximum
                    // (NaN-propagating, -0 < +0), the same as
                    // `semantics::minimum/maximum`; tested bit for bit.
                    Opcode::Min => ins.fmin(x, y),
                    Opcode::Max => ins.fmax(x, y),
                    _ => {
                        let sym = self.intrinsic(op)?;
                        let f = self.import(sym)?;
                        let c = self.b.ins().call(f, &[x, y]);
                        self.b.inst_results(c)[0]
                    }
                };
                self.define(inst, r);
            }
            InstData::Ternary { op, args } => match op {
                Opcode::Store => {
                    let x = self.scalar(args[2])?;
                    let addr = self.element_addr(args[0], args[1])?;
                    self.b.ins().store(flags(), x, addr, 0);
                }
                Opcode::Select => {
                    let c = self.scalar(args[0])?;
                    let (x, y) = (self.scalar(args[1])?, self.scalar(args[2])?);
                    let r = self.b.ins().select(c, x, y);
                    self.define(inst, r);
                }
                _ => return Err(self.err(format!("unexpected three-operand opcode {op}"))),
            },
            InstData::Powi { arg, exp } => {
                let x = self.scalar(*arg)?;
                let r = self.powi(x, *exp);
                self.define(inst, r);
            }
            InstData::Cmp { op, cond, args } => {
                let r = self.compare(*op, *cond, args[0], args[1], false)?;
                self.define(inst, r);
            }
            InstData::Zeros { len, .. } => {
                let n = self.scalar(*len)?;
                let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, n, 0);
                let big = self.b.ins().icmp_imm_s(
                    IntCC::SignedGreaterThan,
                    n,
                    self.env.limits.max_array_len,
                );
                let bad = self.b.ins().bor(neg, big);
                self.trap_if(bad, SiteKind::BadArrayLength, Some(n), Some(n));
                let alloc = self.import("adze_alloc")?;
                let (ss, off) = match (self.zeros_slot, self.zeros.get(&inst)) {
                    (Some(ss), Some(&off)) => (ss, off),
                    _ => return Err(self.err("zeros without a slot".into())),
                };
                let slot = self.b.ins().stack_addr(self.env.ptr, ss, off);
                let c = self.b.ins().call(alloc, &[self.ctx, n, slot]);
                let ptr = self.b.inst_results(c)[0];
                let failed = self.b.ins().icmp_imm_s(IntCC::Equal, ptr, 0);
                self.trap_if(failed, SiteKind::OutOfMemory, Some(n), Some(n));
                let r = self.func.dfg.first_result(inst);
                self.set_array(r, ptr, ArrayLen::Of(*len));
            }
            InstData::Push { tape, arg } => self.push(inst, *tape, *arg)?,
            InstData::Pop { tape, .. } => {
                if !self.popped.contains_key(&inst) {
                    self.pop_group(inst, *tape)?;
                }
                let x = self
                    .popped
                    .remove(&inst)
                    .ok_or_else(|| self.err(format!("{inst}: pop outside its group")))?;
                self.define(inst, x);
            }
            InstData::Call { func, args } => self.call(inst, *func, args)?,
            InstData::Autodiff { spec, .. } => {
                return Err(JitError::Unsupported {
                    func: self.func.name.clone(),
                    what: format!(
                        "an `autodiff` request ({} mode, of @{}) that no AD pass has lowered",
                        spec.mode,
                        self.env.module.func(spec.func).name
                    ),
                })
            }
            InstData::Jump { dest } => {
                let args = self.block_args(&dest.args)?;
                let target = self.dest(dest.block)?;
                self.b.ins().jump(target, &args);
            }
            InstData::Brif {
                cond,
                then_dest,
                else_dest,
            } => {
                // A loop header that stays in the loop on `then`: branch on
                // the complement, to the exit first. Cranelift lays blocks
                // out in its reverse postorder, which visits a branch's
                // first target first and so places the *second* right
                // after the branch; this way the loop body follows the
                // header and an iteration takes one jump (the back edge)
                // instead of two.
                let here = self.func.layout.inst_block(inst);
                let flip = here.is_some_and(|b| self.exit_first.contains(&b));
                let flipped = match self.func.dfg.value_def(*cond) {
                    ValueDef::Result { inst: c, .. } if flip => match *self.func.dfg.inst(*c) {
                        InstData::Cmp { op, cond, args } => {
                            Some(self.compare(op, cond, args[0], args[1], true)?)
                        }
                        _ => None,
                    },
                    _ => None,
                };
                let targs = self.block_args(&then_dest.args)?;
                let eargs = self.block_args(&else_dest.args)?;
                let (t, e) = (self.dest(then_dest.block)?, self.dest(else_dest.block)?);
                match flipped {
                    Some(nc) => {
                        self.b.ins().brif(nc, e, &eargs, t, &targs);
                    }
                    None => {
                        let c = self.scalar(*cond)?;
                        self.b.ins().brif(c, t, &targs, e, &eargs);
                    }
                }
            }
            InstData::Return { args } => {
                let out = self.slot_load(self.env.ptr, self.frame, 0);
                for (k, &v) in args.iter().enumerate() {
                    let x = self.scalar(v)?;
                    self.store_slot(x, out, k);
                }
                self.epilogue()?;
                let ok = self.b.ins().iconst(cl::types::I32, 0);
                self.b.ins().return_(&[ok]);
            }
        }
        Ok(())
    }

    /// Splits the tape accesses of `blk` into groups: maximal runs of
    /// `push`es (or of `pop`s) on one tape separated only by
    /// [`tape_neutral`] instructions. A group checks the tape once: one
    /// capacity check (and a cold call to the reserve trampoline) for a run
    /// of pushes, one length check and a combined tag check for a run of
    /// pops.
    fn plan_tape_groups(&mut self, blk: IrBlock) {
        self.tape_groups.clear();
        self.push_base = None;
        self.popped.clear();
        let insts = self.func.layout.block_insts(blk);
        let key = |d: &InstData| match d {
            InstData::Push { tape, .. } => Some((true, *tape)),
            InstData::Pop { tape, .. } => Some((false, *tape)),
            _ => None,
        };
        let mut k = 0;
        while k < insts.len() {
            let Some(kind) = key(self.func.dfg.inst(insts[k])) else {
                k += 1;
                continue;
            };
            let mut members = vec![insts[k]];
            let mut last = k;
            for (q, &i) in insts.iter().enumerate().skip(k + 1) {
                let d = self.func.dfg.inst(i);
                if key(d) == Some(kind) {
                    members.push(i);
                    last = q;
                } else if !tape_neutral(d) {
                    break;
                }
            }
            let group = std::rc::Rc::new(members);
            for (j, &i) in group.iter().enumerate() {
                self.tape_groups.insert(i, (j, group.clone()));
            }
            k = last + 1;
        }
    }

    fn tape_group(
        &self,
        inst: adze_ir::Inst,
    ) -> Result<(usize, std::rc::Rc<Vec<adze_ir::Inst>>), JitError> {
        self.tape_groups
            .get(&inst)
            .cloned()
            .ok_or_else(|| self.err(format!("{inst}: tape access without a group")))
    }

    /// The addresses of the bits and type buffers of tape `tape`.
    fn tape_buffers(&mut self, tape: u8) -> (cl::Value, cl::Value) {
        let p = self.env.ptr;
        let bits = self
            .b
            .ins()
            .load(p, flags(), self.ctx, Self::tape_field(tape, TAPE_BITS));
        let types = self
            .b
            .ins()
            .load(p, flags(), self.ctx, Self::tape_field(tape, TAPE_TYPES));
        (bits, types)
    }

    /// Offset in `Ctx` of a field of tape `tape`.
    fn tape_field(tape: u8, field: i32) -> i32 {
        TAPES_OFFSET + TAPE_SIZE * i32::from(tape) + field
    }

    /// `push tape, arg`, inline: the first push of a group makes room for
    /// the whole group; each push writes its entry; the last sets the
    /// tape's length.
    fn push(&mut self, inst: adze_ir::Inst, tape: u8, arg: IrValue) -> Result<(), JitError> {
        let i64t = cl::types::I64;
        let (j, group) = self.tape_group(inst)?;
        let m = group.len();
        if j == 0 {
            let len = self
                .b
                .ins()
                .load(i64t, flags(), self.ctx, Self::tape_field(tape, TAPE_LEN));
            let cap = self
                .b
                .ins()
                .load(i64t, flags(), self.ctx, Self::tape_field(tape, TAPE_CAP));
            let need = self.b.ins().iadd_imm_s(len, m as i64);
            let short = self.b.ins().icmp(IntCC::UnsignedGreaterThan, need, cap);
            let grow = self.b.create_block();
            let cont = self.b.create_block();
            self.b.set_cold_block(grow);
            self.b.ins().brif(short, grow, &[], cont, &[]);
            self.b.switch_to_block(grow);
            // The trampoline preserves every register, so that the values
            // live across this (cold) call stay in registers in the hot path.
            let reserve = self.func_ref(self.env.reserve);
            let t = self.b.ins().iconst(i64t, i64::from(tape));
            let n = self.b.ins().iconst(i64t, m as i64);
            // The trap site goes through the context, not a fourth
            // argument: an argument register (`rcx`) fixed on this path
            // changed the register allocation of hot loops elsewhere in the
            // function.
            let site = self.new_site(SiteKind::TapeOutOfMemory);
            let site = self.b.ins().iconst(i64t, site);
            self.b
                .ins()
                .store(flags(), site, self.ctx, TAPE_SITE_OFFSET);
            self.b.ins().call(reserve, &[self.ctx, t, n]);
            // A tape that cannot grow: `adze_reserve` recorded the error
            // of `site` and set `tape_failed`, and the frame leaves through
            // its trap exit, as after a call that trapped. Checked on the
            // growth path only, with no call of its own.
            let failed = self
                .b
                .ins()
                .load(i64t, flags(), self.ctx, TAPE_FAILED_OFFSET);
            self.b.ins().brif(failed, self.trap_exit, &[], cont, &[]);
            self.b.switch_to_block(cont);
            let (bits, types) = self.tape_buffers(tape);
            let off = self.b.ins().ishl_imm_u(len, 3);
            let bits = self.b.ins().iadd(bits, off);
            let types = self.b.ins().iadd(types, len);
            self.push_base = Some((bits, types, len));
        }
        let (bits, types, len) = self
            .push_base
            .ok_or_else(|| self.err(format!("{inst}: push outside its group")))?;
        let x = self.scalar(arg)?;
        let ty = self.func.dfg.value_type(arg);
        let x = if ty == Type::Bool {
            self.b.ins().uextend(i64t, x)
        } else {
            x
        };
        self.b.ins().store(flags(), x, bits, 8 * j as i32);
        let code = self.b.ins().iconst(cl::types::I8, type_code(ty));
        self.b.ins().store(flags(), code, types, j as i32);
        if j + 1 == m {
            let new_len = self.b.ins().iadd_imm_s(len, m as i64);
            self.b
                .ins()
                .store(flags(), new_len, self.ctx, Self::tape_field(tape, TAPE_LEN));
            self.push_base = None;
        }
        Ok(())
    }

    /// The pops of the group that starts at `first`, inline: if the tape
    /// holds enough entries and every tag matches, read them and lower the
    /// length once; otherwise branch to the function's cold mismatch block
    /// (`mismatch_block`). Records the results in `popped`.
    fn pop_group(&mut self, first: adze_ir::Inst, tape: u8) -> Result<(), JitError> {
        let i64t = cl::types::I64;
        let (_, group) = self.tape_group(first)?;
        let m = group.len();
        let mut tys = Vec::with_capacity(m);
        for &i in group.iter() {
            match self.func.dfg.inst(i) {
                InstData::Pop { ty, .. } => tys.push(*ty),
                _ => return Err(self.err(format!("{i} in a pop group"))),
            }
        }
        let slow = self.mismatch_block();
        let check = self.b.create_block();
        let fast = self.b.create_block();

        let len = self
            .b
            .ins()
            .load(i64t, flags(), self.ctx, Self::tape_field(tape, TAPE_LEN));
        let enough = self
            .b
            .ins()
            .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, len, m as i64);
        self.b.ins().brif(enough, check, &[], slow, &[]);

        // The entry popped j-th is at index len - 1 - j.
        self.b.switch_to_block(check);
        let (bits, types) = self.tape_buffers(tape);
        let rest = self.b.ins().iadd_imm_s(len, -(m as i64));
        let off = self.b.ins().ishl_imm_u(rest, 3);
        let base = self.b.ins().iadd(bits, off);
        let types = self.b.ins().iadd(types, rest);
        let at = |j: usize| (m - 1 - j) as i32;
        let mut bad: Option<cl::Value> = None;
        for (j, &ty) in tys.iter().enumerate() {
            let t = self.b.ins().load(cl::types::I8, flags(), types, at(j));
            let ne = self.b.ins().icmp_imm_s(IntCC::NotEqual, t, type_code(ty));
            bad = Some(match bad {
                None => ne,
                Some(b) => self.b.ins().bor(b, ne),
            });
        }
        let bad = bad.ok_or_else(|| self.err("an empty pop group".into()))?;
        self.b.ins().brif(bad, slow, &[], fast, &[]);

        self.b.switch_to_block(fast);
        for (j, (&ty, &i)) in tys.iter().zip(group.iter()).enumerate() {
            let x = match ty {
                Type::F64 => self.b.ins().load(cl::types::F64, flags(), base, 8 * at(j)),
                Type::Bool => {
                    let w = self.b.ins().load(i64t, flags(), base, 8 * at(j));
                    self.b.ins().ireduce(cl::types::I8, w)
                }
                _ => self.b.ins().load(i64t, flags(), base, 8 * at(j)),
            };
            self.popped.insert(i, x);
        }
        self.b
            .ins()
            .store(flags(), rest, self.ctx, Self::tape_field(tape, TAPE_LEN));
        Ok(())
    }

    /// Polls the time limit's flag (`Ctx::interrupt`): an atomic load
    /// (a plain load on x86-64 that Cranelift never hoists or merges),
    /// branching to the function's cold timeout block when it is set.
    fn poll(&mut self) {
        let block = match self.timeout {
            Some((b, _)) => b,
            None => {
                let block = self.b.create_block();
                self.b.set_cold_block(block);
                let limit = self.env.limits.timeout.unwrap_or_default();
                let site = self.new_site(SiteKind::Timeout { limit });
                self.timeout = Some((block, site));
                block
            }
        };
        let flag = self
            .b
            .ins()
            .load(self.env.ptr, flags(), self.ctx, INTERRUPT_OFFSET);
        let set = self.b.ins().atomic_load(cl::types::I8, flags(), flag);
        let cont = self.b.create_block();
        self.b.ins().brif(set, block, &[], cont, &[]);
        self.b.switch_to_block(cont);
    }

    /// The function's one cold block for an empty tape or a mismatched
    /// entry: the run stops with `TapeMismatch` in this function, whichever
    /// pop it was (every pop of a function reports the same error), as the
    /// interpreter stops at the first pop that finds an empty tape or an
    /// entry of another type.
    fn mismatch_block(&mut self) -> cl::Block {
        if let Some((b, _)) = self.mismatch {
            return b;
        }
        let block = self.b.create_block();
        self.b.set_cold_block(block);
        let site = self.new_site(SiteKind::TapeMismatch);
        self.mismatch = Some((block, site));
        block
    }

    fn intrinsic(&self, op: Opcode) -> Result<&'static str, JitError> {
        self.env
            .intrinsics
            .get(&op)
            .copied()
            .ok_or_else(|| self.err(format!("no translation for opcode `{op}`")))
    }

    /// Stores a scalar into 8-byte slot `k` at `base` (bool widened to i64).
    fn store_slot(&mut self, x: cl::Value, base: cl::Value, k: usize) {
        let x = if self.b.func.dfg.value_type(x) == cl::types::I8 {
            self.b.ins().uextend(cl::types::I64, x)
        } else {
            x
        };
        self.b.ins().store(flags(), x, base, (8 * k) as i32);
    }

    fn idiv(&mut self, op: Opcode, a: IrValue, b: IrValue) -> Result<cl::Value, JitError> {
        let (x, y) = (self.scalar(a)?, self.scalar(b)?);
        let zero = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
        self.trap_if(zero, SiteKind::DivisionByZero, None, None);
        let min = self.b.ins().icmp_imm_s(IntCC::Equal, x, i64::MIN);
        let m1 = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
        let ovf = self.b.ins().band(min, m1);
        self.trap_if(ovf, SiteKind::DivisionOverflow, None, None);
        Ok(if op == Opcode::Idiv {
            self.b.ins().sdiv(x, y)
        } else {
            self.b.ins().srem(x, y)
        })
    }

    /// `fill a, x` as an inline loop.
    fn fill(&mut self, arr: IrValue, x: IrValue) -> Result<(), JitError> {
        let (ptr, len) = self.array(arr)?;
        let x = self.scalar(x)?;
        let head = self.b.create_block();
        let i = self.b.append_block_param(head, cl::types::I64);
        let body = self.b.create_block();
        let exit = self.b.create_block();
        let zero = self.b.ins().iconst(cl::types::I64, 0);
        self.b.ins().jump(head, &[zero.into()]);
        self.b.switch_to_block(head);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, i, len);
        self.b.ins().brif(more, body, &[], exit, &[]);
        self.b.switch_to_block(body);
        let off = self.b.ins().ishl_imm_u(i, 3);
        let addr = self.b.ins().iadd(ptr, off);
        self.b.ins().store(flags(), x, addr, 0);
        let next = self.b.ins().iadd_imm_s(i, 1);
        self.b.ins().jump(head, &[next.into()]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    /// `x ^ n` as the same square-and-multiply sequence as
    /// `semantics::powi`, unrolled for the immediate `n`.
    fn powi(&mut self, x: cl::Value, n: i32) -> cl::Value {
        let mut e = n.unsigned_abs();
        let mut base = x;
        let mut acc: Option<cl::Value> = None;
        while e > 0 {
            if e & 1 == 1 {
                acc = Some(match acc {
                    None => base,
                    Some(a) => self.b.ins().fmul(a, base),
                });
            }
            e >>= 1;
            if e > 0 {
                base = self.b.ins().fmul(base, base);
            }
        }
        let p = match acc {
            Some(p) => p,
            None => self.b.ins().f64const(1.0),
        };
        if n < 0 {
            let one = self.b.ins().f64const(1.0);
            self.b.ins().fdiv(one, p)
        } else {
            p
        }
    }

    fn call(
        &mut self,
        inst: adze_ir::Inst,
        callee: IrFuncId,
        args: &[IrValue],
    ) -> Result<(), JitError> {
        let id = *self.env.funcs.get(&callee).ok_or_else(|| {
            self.err(format!(
                "call to @{} which was not compiled",
                self.env.module.func(callee).name
            ))
        })?;
        let mut cargs = vec![self.ctx];
        for &a in args {
            match self.slot(a)? {
                Slot::Array { .. } => {
                    let (ptr, len) = self.array(a)?;
                    cargs.push(ptr);
                    cargs.push(len);
                }
                Slot::Scalar(_) | Slot::Split(..) => {
                    let x = self.scalar(a)?;
                    cargs.push(x);
                }
            }
        }
        let results = self.func.dfg.inst_results(inst);
        let out = match self.results_slot {
            Some(ss) if !results.is_empty() => self.b.ins().stack_addr(self.env.ptr, ss, 0),
            _ => self.b.ins().iconst(self.env.ptr, 0),
        };
        cargs.push(out);
        let f = self.func_ref(id);
        let c = self.b.ins().call(f, &cargs);
        let status = self.b.inst_results(c)[0];
        let cont = self.b.create_block();
        if self.func.dfg.srcloc(inst).is_some() {
            // The callee trapped: a cold block gives a call-depth fault of
            // its entry this call's location (`adze_trap` with a `Call`
            // site), then leaves.
            let site = self.new_site(SiteKind::Call);
            let cold = self.b.create_block();
            self.b.set_cold_block(cold);
            self.b.ins().brif(status, cold, &[], cont, &[]);
            self.b.switch_to_block(cold);
            let s = self.b.ins().iconst(cl::types::I64, site);
            let trap_fn = self.trap_fn;
            self.b.ins().call(trap_fn, &[self.ctx, s, s, s]);
            self.b.ins().jump(self.trap_exit, &[]);
        } else {
            self.b.ins().brif(status, self.trap_exit, &[], cont, &[]);
        }
        self.b.switch_to_block(cont);
        for (k, &r) in results.iter().enumerate() {
            let ty = self.func.dfg.value_type(r);
            let x = match ty {
                Type::F64 => self
                    .b
                    .ins()
                    .load(cl::types::F64, flags(), out, (8 * k) as i32),
                Type::I64 => self
                    .b
                    .ins()
                    .load(cl::types::I64, flags(), out, (8 * k) as i32),
                Type::Bool => {
                    let w = self
                        .b
                        .ins()
                        .load(cl::types::I64, flags(), out, (8 * k) as i32);
                    self.b.ins().ireduce(cl::types::I8, w)
                }
                Type::Array => return Err(self.err(format!("call result {r} is an array"))),
            };
            self.set_scalar(r, x);
        }
        Ok(())
    }
}

/// Does `data` call out of the generated code (clobbering every vector
/// register)? Out-of-line intrinsics, calls, and `zeros` (its allocation).
fn calls_out(env: &Env<'_>, data: &InstData) -> bool {
    match data {
        InstData::Call { .. } | InstData::Zeros { .. } => true,
        InstData::Unary { op, .. } | InstData::Binary { op, .. } => env.intrinsics.contains_key(op),
        _ => false,
    }
}
