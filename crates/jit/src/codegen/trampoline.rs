//! The two trampolines of a compilation: the entry trampoline, the one
//! function Rust calls, and the reserve trampoline, through which push
//! groups grow a tape without clobbering a register.

use super::{flags, Env};
use crate::JitError;
use adze_ir::{FuncId as IrFuncId, Type};
use cranelift_codegen::ir::{self as cl, AbiParam, InstBuilder};
use cranelift_frontend::FunctionBuilder;
use cranelift_jit::JITModule;
use cranelift_module::Module as _;

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
            // No parameter is an f64x2 (`declare_functions`).
            Type::F64 | Type::F64x2 => {
                call_args.push(b.ins().load(cl::types::F64, flags(), args, off))
            }
            Type::I64 => call_args.push(b.ins().load(cl::types::I64, flags(), args, off)),
            Type::Bool => {
                let w = b.ins().load(cl::types::I64, flags(), args, off);
                call_args.push(b.ins().ireduce(cl::types::I8, w));
            }
            Type::Array | Type::IArray => {
                call_args.push(b.ins().load(ptr, flags(), args, off));
                off += 8;
                call_args.push(b.ins().load(cl::types::I64, flags(), args, off));
            }
        }
        off += 8;
    }
    call_args.push(results);
    let callee = env.funcs[root].ok_or_else(|| JitError::Codegen {
        func: rootf.name.clone(),
        message: "root function was not declared".into(),
    })?;
    let fref = jm.declare_func_in_func(callee, b.func);
    let call = b.ins().call(fref, &call_args);
    let status = b.inst_results(call)[0];
    b.ins().return_(&[status]);
    b.seal_all_blocks();
    b.finalize(jm.target_config());
    Ok(())
}
