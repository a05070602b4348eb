//! The Cranelift JIT for adze IR.
//!
//! [`compile`] translates a root function and every function reachable from
//! it ([`adze_ir::Module::reachable_from`]) to machine code; [`Compiled::call`]
//! runs it with the same contract as the interpreter (arrays by reference,
//! `Outcome.args` = final values of all arguments, the same [`RunError`]s).
//! See `docs/jit.md` for the full design; in short:
//!
//! - **Calling convention.** Each IR function `f(p1, .., pn) -> (r1, .., rm)`
//!   becomes `fn(ctx: *mut Ctx, p1.., out: *mut u64) -> i32`: an array
//!   parameter is a `(ptr, len: i64)` pair, `bool` is an `i8` (0/1), results
//!   are written to 8-byte slots at `out` (f64 bits, i64, bool widened to
//!   0/1), and the return value is a status: 0 = ok, 1 = trapped. One
//!   uniform convention, any number of results.
//! - **Entry trampoline.** Rust calls one generated
//!   `fn(ctx, args: *const u64, results: *mut u64) -> i32` per compilation,
//!   which unpacks 8-byte argument slots (an array takes two: pointer, then
//!   length) and calls the root. It is the only code pointer Rust calls.
//! - **Traps.** Bounds checks (one unsigned compare per `load`/`store`,
//!   left out where provably redundant), `idiv`/`irem` by zero or
//!   `i64::MIN / -1`, `zeros` lengths outside `0..=max_array_len` and the
//!   call-depth limit branch to a cold block that calls
//!   `adze_trap(ctx, site, a, b)`. The site number indexes a per-compilation
//!   table (function name, array name, kind), so the recorded [`RunError`]
//!   equals the interpreter's. The frame then returns status 1, and every
//!   caller propagates it after freeing its own arrays.
//! - **Memory.** `zeros` calls `adze_alloc(ctx, n, slot)`, which records a
//!   zero-filled `Vec<f64>` in the context (re-executing the same `zeros` in
//!   the same frame reuses its dead array, so loops do not grow memory). A
//!   function containing `zeros` reads the allocation count at entry (its
//!   mark) and calls `adze_free_to(ctx, mark)` on every return, normal or
//!   trap. [`Compiled::call`] frees whatever is left. Code memory is freed
//!   when [`Compiled`] is dropped.
//! - **Native stack.** Each function compares its stack pointer with a limit
//!   in the context at entry. A call first runs with a 512 KiB budget on the
//!   caller's thread; if recursion (below the depth limit) needs more, the
//!   run is discarded and repeated on a thread with a 256 MiB stack, so deep
//!   recursion never overflows the stack.
//! - **Semantics.** `fadd`/`fsub`/`fmul`/`fdiv`/`fneg`/`sqrt`/`abs`/`floor`/
//!   `ceil`/`sitof` and `min`/`max` (Cranelift's `fmin`/`fmax` are IEEE
//!   754-2019 `minimum`/`maximum`) are native instructions, exact by IEEE
//!   754; `powi` is the same square-and-multiply sequence as
//!   [`adze_ir::semantics::powi`], unrolled; every other intrinsic calls an
//!   `extern "C"` wrapper around [`adze_ir::semantics`]. The JIT therefore
//!   agrees with the interpreter bit for bit (NaN payloads aside).

mod codegen;
mod rt;

use adze_ir::runtime::check_args;
use adze_ir::{FuncId, Limits, Opcode, Outcome, RunError, Signature, TrapKind, Type, Val};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module as _};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Cranelift optimisation level.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum OptLevel {
    /// No mid-end optimisation (fastest compile; the default: `speed` has
    /// compile-time cliffs on large reverse-mode functions).
    #[default]
    None,
    /// Cranelift's `speed` level (e-graph optimisations).
    Speed,
}

/// Options of [`compile`].
#[derive(Clone, Debug)]
pub struct JitOptions {
    /// Run-time limits, baked into the generated code.
    pub limits: Limits,
    pub opt_level: OptLevel,
    /// Run Cranelift's IR verifier on every function (costs 30–50 % of
    /// compile time). Defaults to `cfg!(debug_assertions)`.
    pub verify: bool,
}

impl Default for JitOptions {
    fn default() -> JitOptions {
        JitOptions {
            limits: Limits::default(),
            opt_level: OptLevel::default(),
            verify: cfg!(debug_assertions),
        }
    }
}

/// Why [`compile`] failed.
#[derive(Debug, thiserror::Error)]
pub enum JitError {
    /// The IR uses something the JIT does not compile (an `autodiff` request,
    /// a function without a body, ...).
    #[error("cannot compile function `{func}`: unsupported {what}")]
    Unsupported { func: String, what: String },
    /// Cranelift rejected the generated code, or the IR is malformed.
    #[error("code generation failed for function `{func}`: {message}")]
    Codegen { func: String, message: String },
    /// The host machine or the Cranelift settings are unusable.
    #[error("cannot set up the JIT for this host: {0}")]
    Host(String),
    /// Linking the compiled functions failed.
    #[error("cannot link the compiled code: {0}")]
    Link(String),
}

/// The entry trampoline: `(ctx, args, results) -> status`.
type EntryFn = unsafe extern "C" fn(*mut rt::Ctx<'_>, *const u64, *mut u64) -> i32;

/// Owns a [`JITModule`] and frees its code memory when dropped.
struct CodeMemory(Option<JITModule>);

impl Drop for CodeMemory {
    fn drop(&mut self) {
        if let Some(m) = self.0.take() {
            // SAFETY: the only pointers into this module's code are the
            // `EntryFn` stored next to it in `Compiled` (or none at all when
            // compilation failed) and the code pointers embedded in that code.
            // They are only used through `Compiled::call(&self)`, which cannot
            // run while `Compiled` is being dropped, and `Compiled` hands out
            // no code pointer, so no code of this module can run afterwards.
            unsafe { m.free_memory() };
        }
    }
}

/// A compiled root function, ready to [`call`](Compiled::call).
pub struct Compiled {
    entry: EntryFn,
    sites: Vec<rt::TrapSite>,
    name: String,
    sig: Signature,
    limits: Limits,
    compile_time: Duration,
    // Declared last so that it is dropped last (the fields above hold no code
    // pointers that run on drop, but this keeps the order obvious).
    _code: CodeMemory,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compiled")
            .field("name", &self.name)
            .field("compile_time", &self.compile_time)
            .finish_non_exhaustive()
    }
}

/// Builds the host ISA with the settings of `options`.
fn host_isa(options: &JitOptions) -> Result<cranelift_codegen::isa::OwnedTargetIsa, JitError> {
    let host = |e: &dyn std::fmt::Display| JitError::Host(e.to_string());
    let mut flags = settings::builder();
    let opt = match options.opt_level {
        OptLevel::None => "none",
        OptLevel::Speed => "speed",
    };
    flags.set("opt_level", opt).map_err(|e| host(&e))?;
    flags.set("is_pic", "false").map_err(|e| host(&e))?;
    flags
        .set("use_colocated_libcalls", "false")
        .map_err(|e| host(&e))?;
    flags
        .set(
            "enable_verifier",
            if options.verify { "true" } else { "false" },
        )
        .map_err(|e| host(&e))?;
    let isa = cranelift_native::builder().map_err(|e| host(&e))?;
    isa.finish(settings::Flags::new(flags))
        .map_err(|e| host(&e))
}

/// Compiles `root` and every function reachable from it
/// ([`adze_ir::Module::reachable_from`]).
pub fn compile(
    module: &adze_ir::Module,
    root: FuncId,
    options: &JitOptions,
) -> Result<Compiled, JitError> {
    let start = Instant::now();
    if !module.is_valid(root) {
        return Err(JitError::Codegen {
            func: root.to_string(),
            message: "no such function in the module".into(),
        });
    }
    let isa = host_isa(options)?;
    let mut builder = JITBuilder::with_isa(isa, default_libcall_names());
    // Every symbol is registered before anything is declared: an unresolved
    // import panics inside `finalize_definitions` in Cranelift 0.135.
    let unary = rt::unary_symbols();
    let binary = rt::binary_symbols();
    let helpers = rt::helper_symbols();
    for &(_, name, ptr) in unary.iter().chain(&binary) {
        builder.symbol(name, ptr);
    }
    for &(name, ptr) in &helpers {
        builder.symbol(name, ptr);
    }
    let mut code = CodeMemory(Some(JITModule::new(builder)));
    let jm = code
        .0
        .as_mut()
        .ok_or_else(|| JitError::Host("no module".into()))?;
    let ptr = jm.target_config().pointer_type();
    if ptr != cranelift_codegen::ir::types::I64 {
        return Err(JitError::Host("only 64-bit targets are supported".into()));
    }

    // Imports.
    let link = |e: cranelift_module::ModuleError| JitError::Link(e.to_string());
    let mut imports = HashMap::new();
    let mut intrinsics = HashMap::new();
    let f64t = cranelift_codegen::ir::types::F64;
    let i64t = cranelift_codegen::ir::types::I64;
    let abi = cranelift_codegen::ir::AbiParam::new;
    for (list, arity) in [(&unary, 1), (&binary, 2)] {
        for &(op, name, _) in list.iter() {
            let mut sig = jm.make_signature();
            sig.params.extend(std::iter::repeat_n(abi(f64t), arity));
            sig.returns.push(abi(f64t));
            let id = jm
                .declare_function(name, Linkage::Import, &sig)
                .map_err(link)?;
            imports.insert(name, id);
            intrinsics.insert(op, name);
        }
    }
    let helper_sigs: [(&'static str, &[_], &[_]); 5] = [
        ("adze_trap", &[ptr, i64t, i64t, i64t], &[]),
        ("adze_alloc", &[ptr, i64t, ptr], &[ptr]),
        ("adze_free_to", &[ptr, i64t], &[]),
        ("adze_push", &[ptr, i64t, i64t], &[]),
        ("adze_pop", &[ptr, i64t, i64t], &[i64t]),
    ];
    for (name, params, returns) in helper_sigs {
        let mut sig = jm.make_signature();
        sig.params.extend(params.iter().map(|&t| abi(t)));
        sig.returns.extend(returns.iter().map(|&t| abi(t)));
        let id = jm
            .declare_function(name, Linkage::Import, &sig)
            .map_err(link)?;
        imports.insert(name, id);
    }

    // Declarations of the IR functions (anonymous: IR names may collide with
    // symbol names).
    let reachable = module.reachable_from(root);
    let mut funcs = HashMap::new();
    for &id in &reachable {
        let f = module.func(id);
        if f.is_declaration() {
            return Err(JitError::Unsupported {
                func: f.name.clone(),
                what: "a function that is declared but has no body".into(),
            });
        }
        if let Some(r) = f.sig.results.iter().find(|t| **t == Type::Array) {
            return Err(JitError::Unsupported {
                func: f.name.clone(),
                what: format!("a result of type {r}"),
            });
        }
        let sig = codegen::clif_signature(jm, ptr, f.sig.param_types());
        let cid = jm.declare_anonymous_function(&sig).map_err(link)?;
        funcs.insert(id, cid);
    }

    let env = codegen::Env {
        module,
        funcs: &funcs,
        imports: &imports,
        intrinsics: &intrinsics,
        limits: options.limits,
        ptr,
    };
    let mut sites = Vec::new();
    let mut ctx = jm.make_context();
    let mut fctx = cranelift_frontend::FunctionBuilderContext::new();
    for &id in &reachable {
        let f = module.func(id);
        jm.clear_context(&mut ctx);
        codegen::translate_function(&env, jm, &mut fctx, &mut ctx.func, f, &mut sites)?;
        jm.define_function(funcs[&id], &mut ctx)
            .map_err(|e| JitError::Codegen {
                func: f.name.clone(),
                message: module_error_message(&ctx.func, e),
            })?;
    }

    // The entry trampoline.
    let mut tsig = jm.make_signature();
    tsig.params.extend([abi(ptr), abi(ptr), abi(ptr)]);
    tsig.returns.push(abi(cranelift_codegen::ir::types::I32));
    let entry_id = jm.declare_anonymous_function(&tsig).map_err(link)?;
    jm.clear_context(&mut ctx);
    codegen::translate_trampoline(&env, jm, &mut fctx, &mut ctx.func, root)?;
    let root_name = module.func(root).name.clone();
    jm.define_function(entry_id, &mut ctx)
        .map_err(|e| JitError::Codegen {
            func: format!("{root_name} (entry trampoline)"),
            message: module_error_message(&ctx.func, e),
        })?;
    jm.clear_context(&mut ctx);

    jm.finalize_definitions().map_err(link)?;
    let code_ptr = jm.get_finalized_function(entry_id);
    // SAFETY: `code_ptr` is the finalized (executable) code of the trampoline
    // defined just above with the signature `(ptr, ptr, ptr) -> i32` in the
    // module's default calling convention, which is the host's C convention
    // (`make_signature` uses the ISA's default call conv), exactly `EntryFn`.
    // The code lives as long as `code`, which `Compiled` owns next to it.
    let entry = unsafe { std::mem::transmute::<*const u8, EntryFn>(code_ptr) };

    Ok(Compiled {
        entry,
        sites,
        name: root_name,
        sig: module.func(root).sig.clone(),
        limits: options.limits,
        compile_time: start.elapsed(),
        _code: code,
    })
}

fn module_error_message(
    func: &cranelift_codegen::ir::Function,
    e: cranelift_module::ModuleError,
) -> String {
    match e {
        cranelift_module::ModuleError::Compilation(err) => {
            cranelift_codegen::print_errors::pretty_error(func, err)
        }
        other => other.to_string(),
    }
}

/// Native stack that a call may use on the caller's thread before it is
/// re-run on a thread of its own.
const INLINE_STACK: usize = 512 << 10;
/// Stack size of that thread (reserved virtual memory, committed lazily).
const BIG_STACK: usize = 256 << 20;
/// Stack kept free below the limit for the `extern "C"` helpers.
const STACK_MARGIN: usize = 1 << 20;

/// What one attempt at running the compiled code gave.
enum Attempt {
    Done(Result<Outcome, RunError>, usize),
    /// The native stack budget ran out before the call-depth limit was
    /// reached: nothing observable happened (arguments are copies).
    StackExhausted,
}

/// Everything a call needs, `Sync` so that it can run on another thread.
struct Runner<'a> {
    entry: EntryFn,
    sites: &'a [rt::TrapSite],
    name: &'a str,
    sig: &'a Signature,
}

impl Runner<'_> {
    /// Runs the compiled code once, allowing it `budget` bytes of native
    /// stack below the current stack position.
    fn attempt(&self, args: &[Val], budget: usize) -> Attempt {
        let marker = 0u8;
        let here = std::ptr::addr_of!(marker) as usize;
        let stack_limit = here.saturating_sub(budget) as u64;
        // Copies of the array arguments, which generated code reads and writes
        // in place; their heap buffers do not move during the call.
        let mut arrays: Vec<Vec<f64>> = args
            .iter()
            .filter_map(|a| match a {
                Val::Array(xs) => Some(xs.clone()),
                _ => None,
            })
            .collect();
        let mut slots: Vec<u64> = Vec::with_capacity(args.len() + arrays.len());
        let mut next_array = arrays.iter_mut();
        for a in args {
            match a {
                Val::F64(x) => slots.push(x.to_bits()),
                Val::I64(x) => slots.push(*x as u64),
                Val::Bool(x) => slots.push(u64::from(*x)),
                Val::Array(_) => {
                    if let Some(v) = next_array.next() {
                        slots.push(v.as_mut_ptr() as u64);
                        slots.push(v.len() as u64);
                    }
                }
            }
        }
        let mut results = vec![0u64; self.sig.results.len()];
        let mut ctx = rt::Ctx::new(self.sites, stack_limit);
        // SAFETY: `entry` is the trampoline compiled for this root (see
        // `compile`), and its code is alive while the `Compiled` that lent us
        // `self` is. `slots` holds exactly the slots it reads (the caller ran
        // `check_args`: one slot per scalar parameter, pointer + length per
        // array, each pointer valid for reads and writes of `length` f64s for
        // the whole call), `results` has one slot per result, and `ctx` is a
        // live `Ctx` that no Rust reference touches while the call runs.
        // Generated code only accesses memory within these bounds (every
        // `load`/`store` is bounds-checked, statically or at run time), stops
        // before using the native stack below `stack_limit` (which leaves
        // `STACK_MARGIN` for the helpers it calls), and the `extern "C"`
        // helpers never unwind.
        let status = unsafe { (self.entry)(&mut ctx, slots.as_ptr(), results.as_mut_ptr()) };
        let error = ctx.error.take();
        let exhausted = ctx.stack_exhausted;
        let peak = ctx.peak;
        drop(ctx); // frees any arrays left by a trap
        if status != 0 || error.is_some() {
            if exhausted {
                return Attempt::StackExhausted;
            }
            let e = error.unwrap_or_else(|| {
                RunError::new(
                    self.name,
                    TrapKind::Unsupported(format!(
                        "internal error: compiled code returned status {status} without an error"
                    )),
                )
            });
            return Attempt::Done(Err(e), peak);
        }
        let results = self
            .sig
            .results
            .iter()
            .zip(&results)
            .map(|(ty, &bits)| match ty {
                Type::F64 => Val::F64(f64::from_bits(bits)),
                Type::I64 => Val::I64(bits as i64),
                Type::Bool => Val::Bool(bits != 0),
                // `compile` rejects array results.
                Type::Array => Val::Array(Vec::new()),
            })
            .collect();
        let mut arrays = arrays.into_iter();
        let args = args
            .iter()
            .map(|a| match a {
                Val::Array(_) => Val::Array(arrays.next().unwrap_or_default()),
                other => other.clone(),
            })
            .collect();
        Attempt::Done(Ok(Outcome { results, args }), peak)
    }
}

impl Compiled {
    /// Same contract as the interpreter: arrays by reference, `Outcome.args`
    /// = final values of all args.
    pub fn call(&self, args: &[Val]) -> Result<Outcome, RunError> {
        self.call_with_stats(args).0
    }

    /// [`Compiled::call`], also returning the largest number of `zeros`
    /// arrays that were alive at the same time during the call (for tests of
    /// memory behaviour).
    #[doc(hidden)]
    pub fn call_with_stats(&self, args: &[Val]) -> (Result<Outcome, RunError>, usize) {
        if let Err(e) = check_args(&self.name, &self.sig, args) {
            return (Err(e), 0);
        }
        let runner = Runner {
            entry: self.entry,
            sites: &self.sites,
            name: &self.name,
            sig: &self.sig,
        };
        if let Attempt::Done(r, peak) = runner.attempt(args, INLINE_STACK) {
            return (r, peak);
        }
        // Deep recursion: run again on a thread with a large stack.
        let big = std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("adze-jit-call".into())
                .stack_size(BIG_STACK)
                .spawn_scoped(s, || runner.attempt(args, BIG_STACK - STACK_MARGIN))
                .map(|h| h.join())
        });
        let fail = |msg: String| {
            (
                Err(RunError::new(self.name.clone(), TrapKind::Unsupported(msg))),
                0,
            )
        };
        match big {
            Ok(Ok(Attempt::Done(r, peak))) => (r, peak),
            Ok(Ok(Attempt::StackExhausted)) => fail(format!(
                "native stack exhausted ({} MiB) before the call depth limit of {} was reached",
                BIG_STACK >> 20,
                self.limits.max_call_depth
            )),
            Ok(Err(_)) => fail("internal error: the call thread panicked".into()),
            Err(e) => fail(format!("cannot start a thread for a deep call: {e}")),
        }
    }

    /// Wall time of [`compile`].
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// Name of the root function.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The opcodes compiled to a call of an `extern "C"` symbol, with the symbol
/// names (for documentation and tests).
pub fn intrinsic_symbols() -> Vec<(Opcode, &'static str)> {
    rt::unary_symbols()
        .into_iter()
        .chain(rt::binary_symbols())
        .map(|(op, name, _)| (op, name))
        .collect()
}
