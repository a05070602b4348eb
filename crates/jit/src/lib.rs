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
//! - **Tapes.** `push`/`pop` run inline on per-tape buffers in the context
//!   (bits and a type byte per entry): one capacity check per group of
//!   pushes, whose growth path calls a `preserve_all` trampoline (no
//!   spills on the hot path) and then checks that the tape could grow
//!   (else `TapeOutOfMemory`), and one length and type check per group of
//!   pops, whose failure is a `TapeMismatch` trap. The buffers are kept in
//!   [`Compiled`] from one call to the next.
//! - **Time limit.** With `Limits::timeout` (and only then), every
//!   function entry and loop header polls a flag that a timer thread sets
//!   at the deadline (`timer.rs`), and a set flag is a `Timeout` trap.
//! - **Zero copy.** [`Compiled::call_mut`] passes the caller's array
//!   buffers to the code instead of copies.
//! - **Native stack.** Each function compares its stack pointer with a limit
//!   in the context at entry. A call first runs with a 512 KiB budget on the
//!   caller's thread; if recursion (below the depth limit) needs more, the
//!   run is discarded and repeated on a thread with a 256 MiB stack, so deep
//!   recursion never overflows the stack. The zero-copy calls do the same
//!   when the root has no `mut` parameter (a discarded run wrote nothing
//!   the caller sees); with one, code that may recurse runs on the big
//!   thread from the start.
//! - **Semantics.** `fadd`/`fsub`/`fmul`/`fdiv`/`fneg`/`sqrt`/`abs`/`floor`/
//!   `ceil`/`sitof` and `min`/`max` (Cranelift's `fmin`/`fmax` are IEEE
//!   754-2019 `minimum`/`maximum`) are native instructions, exact by IEEE
//!   754 (a division by a constant power of two is the multiplication by
//!   its reciprocal, the same bits); `powi` is the same square-and-multiply
//!   sequence as [`adze_ir::semantics::powi`], unrolled; every other intrinsic calls an
//!   `extern "C"` wrapper around [`adze_ir::semantics`]. The JIT therefore
//!   agrees with the interpreter bit for bit (NaN payloads aside).
// The Cranelift boundary: calling generated code and the run-time
// routines it calls back need `unsafe`; each block says why it is sound.
#![allow(unsafe_code)]

mod codegen;
mod pool;
mod rt;
mod spill;
mod timer;

use adze_ir::runtime::check_args;
use adze_ir::{FuncId, Limits, Opcode, Outcome, RunError, Signature, TrapKind, Type, Val};
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module as _};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Cranelift optimisation level.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum OptLevel {
    /// No mid-end optimisation (fastest compile).
    None,
    /// Cranelift's `speed` level (e-graph optimisations) for every function.
    Speed,
    /// Chosen per function (the default): `speed` for functions of at most
    /// [`SPEED_MAX_INSTS`] Cranelift instructions, `none` above, because
    /// `speed` has compile-time cliffs on large reverse-mode functions
    /// (see docs/performance.md).
    #[default]
    Auto,
}

/// Under [`OptLevel::Auto`], the largest function (in Cranelift
/// instructions) compiled at `speed`. GMM's augmented primal and adjoint
/// have about 1 500 each: at `speed` its gradient runs 24 → 20 ms (D=64)
/// and compiles in 7.7 ms instead of 6.4 (docs/performance.md); its HVP's
/// adjoint (3 500) stays at `none`.
pub const SPEED_MAX_INSTS: usize = 2_000;

/// Functions with more Cranelift instructions than this use Cranelift's
/// single-pass register allocator by default (about 100x faster to compile
/// on huge functions, slower code): see [`JitOptions::single_pass_above`].
pub const SINGLE_PASS_ABOVE: usize = 20_000;

/// Options of [`compile`].
#[derive(Clone, Debug)]
pub struct JitOptions {
    /// Run-time limits, baked into the generated code. A time limit
    /// (`limits.timeout`) also compiles a poll into every function entry
    /// and loop header; without one there is none.
    pub limits: Limits,
    pub opt_level: OptLevel,
    /// Run Cranelift's IR verifier on every function (costs 30–50 % of
    /// compile time). Defaults to `cfg!(debug_assertions)`.
    pub verify: bool,
    /// Functions with more Cranelift instructions than this, or with loops
    /// nested so deep that the loops' sizes add up to many times the
    /// function's, are compiled with the single-pass register allocator
    /// (`None`: never). Defaults to [`SINGLE_PASS_ABOVE`].
    pub single_pass_above: Option<usize>,
    /// Keep the disassembly of every function ([`Compiled::disassembly`]).
    pub disasm: bool,
    /// The most machine code one compile may produce; at most
    /// [`MAX_CODE_BYTES`] (larger values are clamped).
    pub max_code_bytes: usize,
    /// The most threads one compile uses (at most the host's cores; 1:
    /// everything on the caller's thread). Functions are compiled in
    /// parallel only when there are at least [`PARALLEL_MIN_INSTS`]
    /// Cranelift instructions in all; the code is the same either way.
    pub compile_threads: usize,
}

impl Default for JitOptions {
    fn default() -> JitOptions {
        JitOptions {
            limits: Limits::default(),
            opt_level: OptLevel::default(),
            verify: cfg!(debug_assertions),
            single_pass_above: Some(SINGLE_PASS_ABOVE),
            disasm: false,
            max_code_bytes: MAX_CODE_BYTES,
            compile_threads: 4,
        }
    }
}

/// Why [`compile`] failed.
#[derive(Debug, thiserror::Error)]
pub enum JitError {
    /// The IR uses something the JIT does not compile (an `autodiff` request,
    /// a function without a body, ...).
    #[error(
        "cannot compile function `{func}`: it contains {what}, which the JIT does not support"
    )]
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
    /// The machine code would exceed [`MAX_CODE_BYTES`]: calls between
    /// functions use 32-bit relative offsets, which Cranelift's linker cannot
    /// patch beyond ±2 GiB.
    #[error("the machine code for `{func}` and its callees exceeds {limit} bytes")]
    TooLarge { func: String, limit: usize },
}

/// The most machine code one [`compile`] produces (1 GiB), well inside the
/// ±2 GiB reach of the relative calls between its functions.
pub const MAX_CODE_BYTES: usize = 1 << 30;

/// The entry trampoline: `(ctx, args, results) -> status`.
type EntryFn = unsafe extern "C" fn(*mut rt::Ctx<'_>, *const u64, *mut u64) -> i32;

/// Owns a [`JITModule`] and frees its code memory when dropped.
struct CodeMemory(Option<JITModule>);

// SAFETY: after `compile` finalizes the module, nothing calls a method of
// the `JITModule` again except `free_memory` in `Drop`, which has the value
// to itself (`&mut self`). The module owns its code memory and holds no
// thread-local state, so it may be dropped on any thread (`Send`), and a
// shared `&CodeMemory` gives no access to it at all (`Sync`). The code in
// that memory is read-only and reentrant: every call brings its own
// context, tapes and argument slots (see `Compiled::call_args`).
unsafe impl Send for CodeMemory {}
// SAFETY: see `Send` above: `&CodeMemory` exposes nothing.
unsafe impl Sync for CodeMemory {}

impl Drop for CodeMemory {
    fn drop(&mut self) {
        if let Some(m) = self.0.take() {
            // SAFETY: the only pointers into this module's code are the
            // `EntryFn` stored next to it in `Compiled` (or none at all when
            // compilation failed) and the code pointers embedded in that code.
            // They are only used through `Compiled::call(&self)` and
            // `Compiled::call_mut(&self, ..)`, which cannot
            // run while `Compiled` is being dropped, and `Compiled` hands out
            // no code pointer, so no code of this module can run afterwards.
            unsafe { m.free_memory() };
        }
    }
}

/// An argument of [`Compiled::call_args`]: a scalar, or an array borrowed
/// from the caller (never copied).
#[derive(Debug)]
pub enum Arg<'a> {
    /// An `f64`.
    F64(f64),
    /// An `i64`.
    I64(i64),
    /// A `bool`.
    Bool(bool),
    /// An array the function only reads (a parameter that is not `mut`).
    Array(&'a [f64]),
    /// An array the function may write (any array parameter).
    ArrayMut(&'a mut [f64]),
    /// An i64 array the function only reads.
    IArray(&'a [i64]),
    /// An i64 array the function may write.
    IArrayMut(&'a mut [i64]),
}

/// Appends the argument slots of one value: a scalar's bits, or an array's
/// pointer and length (the buffer must stay put while the slots are used).
fn push_slots(slots: &mut Vec<u64>, v: &mut Val) {
    Arg::of(v).push_slots(slots);
}

impl<'a> Arg<'a> {
    /// The argument of a value: an array as a mutable borrow of its buffer.
    pub fn of(v: &'a mut Val) -> Arg<'a> {
        match v {
            Val::F64(x) => Arg::F64(*x),
            Val::I64(x) => Arg::I64(*x),
            Val::Bool(x) => Arg::Bool(*x),
            Val::Array(xs) => Arg::ArrayMut(xs),
            Val::IArray(xs) => Arg::IArrayMut(xs),
        }
    }

    /// Appends the argument's slots: a scalar's bits, or an array's
    /// pointer and length.
    fn push_slots(&mut self, slots: &mut Vec<u64>) {
        let (ptr, len) = match self {
            Arg::F64(x) => return slots.push(x.to_bits()),
            Arg::I64(x) => return slots.push(*x as u64),
            Arg::Bool(x) => return slots.push(u64::from(*x)),
            Arg::Array(v) => (v.as_ptr() as u64, v.len()),
            Arg::ArrayMut(v) => (v.as_mut_ptr() as u64, v.len()),
            Arg::IArray(v) => (v.as_ptr() as u64, v.len()),
            Arg::IArrayMut(v) => (v.as_mut_ptr() as u64, v.len()),
        };
        slots.push(ptr);
        slots.push(len as u64);
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
    /// Whether [`Compiled::call_mut`] may run on the caller's thread: the
    /// call graph has no cycle and a generous bound on the native stack of
    /// the deepest possible chain of frames fits in `INLINE_STACK`.
    inline_ok: bool,
    /// Whether a run on the caller's thread that ran out of native stack
    /// can be discarded and run again elsewhere: the root has no `mut`
    /// parameter, so such a run wrote nothing the caller sees (its array
    /// results are dropped with its context, its tapes are cleared).
    /// Recursive code then tries the caller's thread first.
    rerun_ok: bool,
    /// The disassembly of every function, with [`JitOptions::disasm`].
    disassembly: Option<String>,
    /// Tape buffers of earlier calls, kept (emptied) so that the next
    /// call does not allocate and page-fault its tape again: a pool, one
    /// per call running at the same time (each call takes its own).
    tapes: std::sync::Mutex<Vec<rt::Tapes>>,
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
fn host_isa(
    options: &JitOptions,
    speed: bool,
    single_pass: bool,
) -> Result<cranelift_codegen::isa::OwnedTargetIsa, JitError> {
    let host = |e: &dyn std::fmt::Display| JitError::Host(e.to_string());
    let mut flags = settings::builder();
    let opt = if speed { "speed" } else { "none" };
    flags.set("opt_level", opt).map_err(|e| host(&e))?;
    if single_pass {
        flags
            .set("regalloc_algorithm", "single_pass")
            .map_err(|e| host(&e))?;
    }
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
    let mut code = new_module(options)?;
    let jm = code
        .0
        .as_mut()
        .ok_or_else(|| JitError::Host("no module".into()))?;
    let ptr = jm.target_config().pointer_type();
    if ptr != cranelift_codegen::ir::types::I64 {
        return Err(JitError::Host("only 64-bit targets are supported".into()));
    }
    let imports = declare_imports(jm, ptr)?;
    let reachable = module.reachable_from(root);
    let funcs = declare_functions(module, jm, ptr, &reachable)?;
    let reserve = jm
        .declare_anonymous_function(&codegen::reserve_signature(jm, ptr))
        .map_err(link_error)?;
    let env = codegen::Env {
        reserve,
        module,
        funcs: &funcs,
        imports: &imports,
        limits: options.limits,
        ptr,
    };
    let mut defs = Definitions::new(jm, options);
    let limit = options.max_code_bytes.min(MAX_CODE_BYTES);
    let mut pending = Vec::with_capacity(reachable.len());
    for &id in &reachable {
        pending.push(defs.translate(&env, jm, id)?);
    }
    let metas: Vec<Meta> = pending.iter().map(|p| p.meta.clone()).collect();
    let machine = defs.compile_all(pending)?;
    for (meta, m) in metas.iter().zip(machine) {
        defs.define(jm, meta, m)?;
        if defs.code_bytes > limit {
            return Err(JitError::TooLarge {
                func: module.func(root).name.clone(),
                limit,
            });
        }
    }
    let entry_id = defs.define_trampolines(&env, jm, root)?;

    jm.finalize_definitions().map_err(link_error)?;
    if let Some(placed) = &defs.placed {
        write_perf_map(jm, placed);
    }
    let code_ptr = jm.get_finalized_function(entry_id);
    // SAFETY: `code_ptr` is the finalized (executable) code of the trampoline
    // defined just above with the signature `(ptr, ptr, ptr) -> i32` in the
    // module's default calling convention, which is the host's C convention
    // (`make_signature` uses the ISA's default call conv), exactly `EntryFn`.
    // The code lives as long as `code`, which `Compiled` owns next to it.
    let entry = unsafe { std::mem::transmute::<*const u8, EntryFn>(code_ptr) };

    Ok(Compiled {
        entry,
        sites: defs.sites,
        name: module.func(root).name.clone(),
        sig: module.func(root).sig.clone(),
        limits: options.limits,
        compile_time: start.elapsed(),
        tapes: std::sync::Mutex::new(Vec::new()),
        disassembly: options.disasm.then_some(defs.disassembly),
        inline_ok: !may_recurse(module, &reachable) && defs.stack_bound <= INLINE_STACK / 2,
        rerun_ok: !module.func(root).sig.params.iter().any(|p| p.mutable),
        _code: code,
    })
}

fn link_error(e: cranelift_module::ModuleError) -> JitError {
    JitError::Link(e.to_string())
}

/// A `JITModule` with the module's ISA and every symbol the code imports
/// registered.
fn new_module(options: &JitOptions) -> Result<CodeMemory, JitError> {
    // The module's ISA compiles the trampolines; the functions are
    // compiled with the ISA of their settings (`cached_isa`, `pool`) and
    // defined as bytes.
    let isa = cached_isa(options, options.opt_level == OptLevel::Speed, false)?;
    let mut builder = JITBuilder::with_isa(isa, default_libcall_names());
    // Every symbol is registered before anything is declared: an unresolved
    // import panics inside `finalize_definitions` in Cranelift 0.135.
    for (_, name, ptr) in rt::unary_symbols().into_iter().chain(rt::binary_symbols()) {
        builder.symbol(name, ptr);
    }
    for (name, ptr) in rt::helper_symbols() {
        builder.symbol(name, ptr);
    }
    Ok(CodeMemory(Some(JITModule::new(builder))))
}

/// Declares the imported symbols (intrinsics, then run-time helpers), by
/// name.
fn declare_imports(
    jm: &mut JITModule,
    ptr: cranelift_codegen::ir::Type,
) -> Result<HashMap<&'static str, cranelift_module::FuncId>, JitError> {
    let mut imports = HashMap::new();
    let f64t = cranelift_codegen::ir::types::F64;
    let i64t = cranelift_codegen::ir::types::I64;
    let abi = cranelift_codegen::ir::AbiParam::new;
    for (list, arity) in [(rt::unary_symbols(), 1), (rt::binary_symbols(), 2)] {
        for (_, name, _) in list {
            let mut sig = jm.make_signature();
            sig.params.extend(std::iter::repeat_n(abi(f64t), arity));
            sig.returns.push(abi(f64t));
            let id = jm
                .declare_function(name, Linkage::Import, &sig)
                .map_err(link_error)?;
            imports.insert(name, id);
        }
    }
    let helper_sigs: [(&'static str, &[_], &[_]); 7] = [
        ("adze_trap", &[ptr, i64t, i64t, i64t], &[]),
        ("adze_alloc", &[ptr, i64t, ptr], &[ptr]),
        ("adze_give", &[ptr, i64t], &[]),
        ("adze_adopt", &[ptr, ptr], &[ptr]),
        ("adze_free_to", &[ptr, i64t], &[]),
        ("adze_reserve", &[ptr, i64t, i64t], &[]),
        ("adze_fill", &[ptr, i64t, i64t], &[]),
    ];
    for (name, params, returns) in helper_sigs {
        let mut sig = jm.make_signature();
        sig.params.extend(params.iter().map(|&t| abi(t)));
        sig.returns.extend(returns.iter().map(|&t| abi(t)));
        let id = jm
            .declare_function(name, Linkage::Import, &sig)
            .map_err(link_error)?;
        imports.insert(name, id);
    }
    Ok(imports)
}

/// Declares the IR functions of `reachable` (anonymous: IR names may
/// collide with symbol names).
fn declare_functions(
    module: &adze_ir::Module,
    jm: &mut JITModule,
    ptr: cranelift_codegen::ir::Type,
    reachable: &[FuncId],
) -> Result<SecondaryMap<FuncId, Option<cranelift_module::FuncId>>, JitError> {
    let mut funcs = SecondaryMap::with_capacity(module.len());
    for &id in reachable {
        let f = module.func(id);
        if f.is_declaration() {
            return Err(JitError::Unsupported {
                func: f.name.clone(),
                what: "a function that is declared but has no body".into(),
            });
        }
        // Two-lane values live only inside a body (the verifier says so
        // too); every signature below is of scalars and arrays.
        let params = f.sig.param_types().collect::<Vec<_>>();
        if params
            .iter()
            .chain(&f.sig.results)
            .any(|&t| t == Type::F64x2)
        {
            return Err(JitError::Unsupported {
                func: f.name.clone(),
                what: "an f64x2 parameter or result".into(),
            });
        }
        let sig = codegen::clif_signature(jm, ptr, f.sig.param_types());
        funcs[id] = Some(jm.declare_anonymous_function(&sig).map_err(link_error)?);
    }
    Ok(funcs)
}

/// With `ADZE_PERF_MAP` set, appends the compiled functions to
/// `/tmp/perf-PID.map`, the file `perf report` reads to name JIT'd code,
/// and with `ADZE_PERF_MAP=code` also writes each function's machine code
/// to `/tmp/adze-PID-ADDR.bin`, for `objdump` (docs/performance.md,
/// *Profiling JIT'd code*). A profiling aid: a failure to write is ignored,
/// and the map only grows (a process that compiles many modules lists
/// every one; perf takes the first entry at an address).
fn write_perf_map(jm: &JITModule, placed: &[(cranelift_module::FuncId, String, Vec<u8>)]) {
    use std::io::Write;
    let pid = std::process::id();
    let code = std::env::var_os("ADZE_PERF_MAP").is_some_and(|v| v == "code");
    let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(format!("/tmp/perf-{pid}.map"))
    else {
        return;
    };
    let mut text = String::new();
    for (cid, name, bytes) in placed {
        let addr = jm.get_finalized_function(*cid) as usize;
        text.push_str(&format!("{addr:x} {:x} {name}\n", bytes.len()));
        if code {
            let _ = std::fs::write(format!("/tmp/adze-{pid}-{addr:x}.bin"), bytes);
        }
    }
    let _ = file.write_all(text.as_bytes());
}

/// The definitions of one compilation's functions, and what they add up to.
struct Definitions<'o> {
    options: &'o JitOptions,
    ctx: cranelift_codegen::Context,
    fctx: cranelift_frontend::FunctionBuilderContext,
    sites: Vec<rt::TrapSite>,
    /// A bound on the native stack of the deepest chain of frames.
    stack_bound: usize,
    code_bytes: usize,
    disassembly: String,
    /// With `ADZE_PERF_MAP` (read once, in `new`), each function defined:
    /// its id in the JIT module, its name and its machine code before
    /// relocation (for [`write_perf_map`]); `None` without.
    placed: Option<Vec<(cranelift_module::FuncId, String, Vec<u8>)>>,
}

impl<'o> Definitions<'o> {
    fn new(jm: &JITModule, options: &'o JitOptions) -> Definitions<'o> {
        Definitions {
            options,
            ctx: jm.make_context(),
            fctx: cranelift_frontend::FunctionBuilderContext::new(),
            sites: Vec::new(),
            stack_bound: FRAME_OVERHEAD,
            code_bytes: 0,
            disassembly: String::new(),
            placed: std::env::var_os("ADZE_PERF_MAP").map(|_| Vec::new()),
        }
    }

    /// Translates the IR function `id` to Cranelift IR, and chooses how it
    /// is compiled: the optimisation level and register allocator its size
    /// calls for.
    fn translate(
        &mut self,
        env: &codegen::Env<'_>,
        jm: &mut JITModule,
        id: FuncId,
    ) -> Result<Pending, JitError> {
        let options = self.options;
        let f = env.module.func(id);
        let cid = env.funcs[id].ok_or_else(|| JitError::Codegen {
            func: f.name.clone(),
            message: "function was not declared".into(),
        })?;
        let ctx = &mut self.ctx;
        jm.clear_context(ctx);
        let translated = codegen::translate_function(
            env,
            jm,
            &mut self.fctx,
            &mut ctx.func,
            f,
            &mut self.sites,
        )?;
        let func = std::mem::replace(&mut ctx.func, cranelift_codegen::ir::Function::new());
        self.stack_bound += FRAME_OVERHEAD + BYTES_PER_VALUE * func.dfg.num_values();
        let size = func.dfg.num_insts();
        let speed = match options.opt_level {
            OptLevel::None => false,
            OptLevel::Speed => true,
            OptLevel::Auto => size <= SPEED_MAX_INSTS,
        };
        let single_pass = options
            .single_pass_above
            .is_some_and(|n| size > n || translated.deeply_nested);
        Ok(Pending {
            meta: Meta {
                name: f.name.clone(),
                cid,
                size,
                speed,
                single_pass,
            },
            func,
        })
    }

    /// Compiles every pending function to machine code, in parallel
    /// ([`pool`]) when there is enough code to share; results in
    /// `pending`'s order.
    fn compile_all(&self, pending: Vec<Pending>) -> Result<Vec<Machine>, JitError> {
        let options = self.options;
        let total: usize = pending.iter().map(|p| p.meta.size).sum();
        let threads = options.compile_threads.min(pending.len());
        let mut tasks = Vec::with_capacity(pending.len());
        for p in pending {
            tasks.push(pool::Task {
                isa: cached_isa(options, p.meta.speed, p.meta.single_pass)?,
                meta: p.meta,
                func: p.func,
                disasm: options.disasm,
            });
        }
        if threads <= 1 || total < PARALLEL_MIN_INSTS {
            return tasks
                .into_iter()
                .map(|t| compile_one(&*t.isa, &t.meta, t.func, t.disasm))
                .collect();
        }
        pool::compile(tasks, threads).into_iter().collect()
    }

    /// Defines the compiled code of `p`.
    fn define(&mut self, jm: &mut JITModule, p: &Meta, m: Machine) -> Result<(), JitError> {
        jm.define_function_bytes(p.cid, m.alignment, &m.bytes, &m.relocs)
            .map_err(|e| JitError::Codegen {
                func: p.name.clone(),
                message: e.to_string(),
            })?;
        self.code_bytes += m.bytes.len();
        if let Some(placed) = &mut self.placed {
            placed.push((p.cid, p.name.clone(), m.bytes.clone()));
        }
        if let Some(code) = m.vcode {
            self.disassembly.push_str(&format!(
                "; {} ({} Cranelift instructions, opt {}, {} allocator)\n{}\n",
                p.name,
                p.size,
                if p.speed { "speed" } else { "none" },
                if p.single_pass {
                    "single-pass"
                } else {
                    "backtracking"
                },
                code
            ));
        }
        Ok(())
    }

    /// Defines the reserve trampoline (`preserve_all`, see `codegen`) and
    /// the entry trampoline of `root`; returns the entry trampoline's id.
    fn define_trampolines(
        &mut self,
        env: &codegen::Env<'_>,
        jm: &mut JITModule,
        root: FuncId,
    ) -> Result<cranelift_module::FuncId, JitError> {
        let ctx = &mut self.ctx;
        jm.clear_context(ctx);
        codegen::translate_reserve_trampoline(env, jm, &mut self.fctx, &mut ctx.func)?;
        jm.define_function(env.reserve, ctx)
            .map_err(|e| JitError::Codegen {
                func: "<reserve trampoline>".into(),
                message: module_error_message(&ctx.func, e),
            })?;

        let abi = cranelift_codegen::ir::AbiParam::new;
        let mut tsig = jm.make_signature();
        tsig.params
            .extend([abi(env.ptr), abi(env.ptr), abi(env.ptr)]);
        tsig.returns.push(abi(cranelift_codegen::ir::types::I32));
        let entry_id = jm.declare_anonymous_function(&tsig).map_err(link_error)?;
        jm.clear_context(ctx);
        codegen::translate_trampoline(env, jm, &mut self.fctx, &mut ctx.func, root)?;
        jm.define_function(entry_id, ctx)
            .map_err(|e| JitError::Codegen {
                func: format!("{} (entry trampoline)", env.module.func(root).name),
                message: module_error_message(&ctx.func, e),
            })?;
        jm.clear_context(ctx);
        Ok(entry_id)
    }
}

/// Does the call graph of `reachable` have a cycle (recursion)?
fn may_recurse(module: &adze_ir::Module, reachable: &[FuncId]) -> bool {
    use adze_ir::InstData;
    let callees = |id: FuncId| -> Vec<FuncId> {
        let f = module.func(id);
        f.layout
            .insts()
            .filter_map(|(_, i)| match f.dfg.inst(i) {
                InstData::Call { func, .. } => Some(*func),
                _ => None,
            })
            .collect()
    };
    // 0 = unvisited, 1 = on the DFS stack, 2 = done.
    let mut state: SecondaryMap<FuncId, u8> = SecondaryMap::with_capacity(module.len());
    for &root in reachable {
        if state[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, callees(root), 0usize)];
        state[root] = 1;
        while let Some(top) = stack.last_mut() {
            if let Some(&next) = top.1.get(top.2) {
                top.2 += 1;
                match state[next] {
                    1 => return true,
                    0 => {
                        state[next] = 1;
                        let c = callees(next);
                        stack.push((next, c, 0));
                    }
                    _ => {}
                }
            } else {
                state[top.0] = 2;
                stack.pop();
            }
        }
    }
    false
}

/// A function translated to Cranelift IR, to compile.
struct Pending {
    meta: Meta,
    func: cranelift_codegen::ir::Function,
}

/// What is known of a function to compile besides its code.
#[derive(Clone)]
struct Meta {
    name: String,
    cid: cranelift_module::FuncId,
    /// Cranelift instructions.
    size: usize,
    speed: bool,
    single_pass: bool,
}

/// A function's machine code, to define.
struct Machine {
    alignment: u64,
    bytes: Vec<u8>,
    relocs: Vec<cranelift_module::ModuleReloc>,
    /// With `JitOptions::disasm`: Cranelift's VCode after allocation.
    vcode: Option<String>,
}

/// Below this many Cranelift instructions in all, one thread compiles
/// everything (handing work to another thread costs more than it saves).
pub const PARALLEL_MIN_INSTS: usize = 1_500;

/// The host ISA for these settings, made once per process (making one
/// parses the host's features).
fn cached_isa(
    options: &JitOptions,
    speed: bool,
    single_pass: bool,
) -> Result<cranelift_codegen::isa::OwnedTargetIsa, JitError> {
    type Isas = HashMap<(bool, bool, bool), cranelift_codegen::isa::OwnedTargetIsa>;
    static ISAS: std::sync::OnceLock<std::sync::Mutex<Isas>> = std::sync::OnceLock::new();
    let key = (options.verify, speed, single_pass);
    let isas = ISAS.get_or_init(Default::default);
    let mut isas = isas.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(isa) = isas.get(&key) {
        return Ok(isa.clone());
    }
    let isa = host_isa(options, speed, single_pass)?;
    isas.insert(key, isa.clone());
    Ok(isa)
}

/// Compiles `func` with `isa` into bytes and relocations (what
/// `JITModule::define_function` does before defining them).
fn compile_one(
    isa: &dyn cranelift_codegen::isa::TargetIsa,
    p: &Meta,
    func: cranelift_codegen::ir::Function,
    disasm: bool,
) -> Result<Machine, JitError> {
    let mut ctx = cranelift_codegen::Context::for_function(func);
    ctx.set_disasm(disasm);
    let mut ctrl = cranelift_codegen::control::ControlPlane::default();
    if let Err(e) = ctx.compile(isa, &mut ctrl) {
        let e = cranelift_module::ModuleError::Compilation(e.inner);
        return Err(JitError::Codegen {
            func: p.name.clone(),
            message: module_error_message(&ctx.func, e),
        });
    }
    let code = ctx.compiled_code().ok_or_else(|| JitError::Codegen {
        func: p.name.clone(),
        message: "Cranelift gave no code".into(),
    })?;
    let relocs = code
        .buffer
        .relocs()
        .iter()
        .map(|r| cranelift_module::ModuleReloc::from_mach_reloc(r, &ctx.func, p.cid))
        .collect();
    Ok(Machine {
        alignment: u64::from(code.buffer.alignment),
        bytes: code.code_buffer().to_vec(),
        relocs,
        vcode: if disasm { code.vcode.clone() } else { None },
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

/// A bound on the native stack one frame needs besides its values (return
/// address, saved registers, alignment, outgoing stack arguments).
const FRAME_OVERHEAD: usize = 1 << 10;
/// A bound on the stack a Cranelift value can need (a spill slot, lowering
/// temporaries), deliberately generous.
const BYTES_PER_VALUE: usize = 64;

/// Tape buffers up to this size are kept between calls.
const KEPT_TAPE_BYTES: usize = 1 << 30;

/// At most this many sets of tape buffers are kept (calls running at the
/// same time each take one).
const KEPT_TAPE_SETS: usize = 8;

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
    /// The flag of the call's time limit (polled only by code compiled
    /// with one).
    interrupt: &'a std::sync::atomic::AtomicBool,
    /// The limits compiled in (the tape budget is checked at run time).
    limits: &'a Limits,
}

/// What one run of the entry trampoline gave.
enum Raw {
    Done {
        status: i32,
        error: Option<RunError>,
        peak: usize,
        results: Vec<u64>,
        /// The array results, in order (`rt::adze_give`).
        returned: Vec<Vec<f64>>,
    },
    /// The native stack budget ran out before the call-depth limit was
    /// reached.
    StackExhausted,
}

impl Runner<'_> {
    /// Runs the trampoline once on `slots`, allowing it `budget` bytes of
    /// native stack below the current stack position.
    ///
    /// # Safety
    ///
    /// `slots` must hold exactly the argument slots of the root (the caller
    /// ran `check_args`): one per scalar parameter, pointer then length per
    /// array, each pointer valid for reads of `length` f64s (and for writes,
    /// if the parameter is `mut`) for the whole call and not written
    /// through any Rust reference meanwhile.
    unsafe fn run_raw(&self, slots: &[u64], budget: usize, tapes: rt::Tapes) -> (Raw, rt::Tapes) {
        let marker = 0u8;
        let here = std::ptr::addr_of!(marker) as usize;
        let stack_limit = here.saturating_sub(budget) as u64;
        let mut results = vec![0u64; self.sig.results.len()];
        let mut ctx =
            rt::Ctx::with_tapes(self.sites, stack_limit, tapes, self.interrupt, self.limits);
        // SAFETY: `entry` is the trampoline compiled for this root (see
        // `compile`), and its code is alive while the `Compiled` that lent us
        // `self` is. `slots` is valid as this function's contract requires,
        // `results` has one slot per result, and `ctx` is a live `Ctx` that
        // no Rust reference touches while the call runs. Generated code only
        // accesses memory within these bounds (every `load`/`store` is
        // bounds-checked, statically or at run time), stops before using the
        // native stack below `stack_limit` (which leaves `STACK_MARGIN` for
        // the helpers it calls), and the `extern "C"` helpers never unwind.
        let status = unsafe { (self.entry)(&mut ctx, slots.as_ptr(), results.as_mut_ptr()) };
        let error = ctx.error.take();
        let exhausted = ctx.stack_exhausted;
        let peak = ctx.peak;
        let returned = std::mem::take(&mut ctx.returned);
        let tapes = std::mem::replace(&mut ctx.tapes, rt::new_tapes());
        drop(ctx); // frees any arrays left by a trap
        if (status != 0 || error.is_some()) && exhausted {
            return (Raw::StackExhausted, tapes);
        }
        let raw = Raw::Done {
            status,
            error,
            peak,
            results,
            returned,
        };
        (raw, tapes)
    }

    /// The slots of `args`: scalars by value, each array as the pointer and
    /// length of the matching buffer of `arrays` (in order).
    fn slots(args: &[Val], arrays: &mut [Val]) -> Vec<u64> {
        let mut slots: Vec<u64> = Vec::with_capacity(2 * args.len());
        let mut next_array = arrays.iter_mut();
        for a in args {
            match a {
                Val::Array(_) | Val::IArray(_) => {
                    if let Some(v) = next_array.next() {
                        push_slots(&mut slots, v);
                    }
                }
                scalar => push_slots(&mut slots, &mut scalar.clone()),
            }
        }
        slots
    }

    /// The results of a finished run, or its error.
    fn finish(&self, raw: Raw) -> Attempt {
        let Raw::Done {
            status,
            error,
            peak,
            results,
            returned,
        } = raw
        else {
            return Attempt::StackExhausted;
        };
        if status != 0 || error.is_some() {
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
        let mut returned = returned.into_iter();
        let results = self
            .sig
            .results
            .iter()
            .zip(&results)
            .map(|(ty, &bits)| match ty {
                // No result is an f64x2 (`declare_functions`).
                Type::F64 | Type::F64x2 => Val::F64(f64::from_bits(bits)),
                Type::I64 => Val::I64(bits as i64),
                Type::Bool => Val::Bool(bits != 0),
                Type::Array => Val::Array(returned.next().unwrap_or_default()),
                Type::IArray => Val::IArray(
                    returned
                        .next()
                        .unwrap_or_default()
                        .into_iter()
                        .map(adze_ir::semantics::tobits)
                        .collect(),
                ),
            })
            .collect();
        Attempt::Done(
            Ok(Outcome {
                results,
                args: Vec::new(),
            }),
            peak,
        )
    }

    /// Runs the compiled code once on copies of the array arguments,
    /// allowing it `budget` bytes of native stack below the current stack
    /// position.
    fn attempt(&self, args: &[Val], budget: usize, tapes: rt::Tapes) -> (Attempt, rt::Tapes) {
        // Copies of the array arguments, which generated code reads and writes
        // in place; their heap buffers do not move during the call.
        let mut arrays: Vec<Val> = args.iter().filter(|a| a.ty().is_array()).cloned().collect();
        let slots = Self::slots(args, &mut arrays);
        // SAFETY: the caller ran `check_args`, so `slots` has the root's
        // layout; each array slot points into a buffer of `arrays`, owned
        // here, not moved or borrowed until the call returns.
        let (raw, tapes) = unsafe { self.run_raw(&slots, budget, tapes) };
        let attempt = match self.finish(raw) {
            Attempt::Done(Ok(mut out), peak) => {
                let mut arrays = arrays.into_iter();
                out.args = args
                    .iter()
                    .map(|a| match a {
                        Val::Array(_) | Val::IArray(_) => arrays.next().unwrap_or(Val::Bool(false)),
                        other => other.clone(),
                    })
                    .collect();
                Attempt::Done(Ok(out), peak)
            }
            other => other,
        };
        (attempt, tapes)
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
        // The time limit covers both attempts.
        let armed = match self.arm_timer() {
            Ok(armed) => armed,
            Err(e) => return (Err(e), 0),
        };
        let runner = Runner {
            entry: self.entry,
            sites: &self.sites,
            name: &self.name,
            sig: &self.sig,
            interrupt: armed.as_ref().map_or(&timer::NEVER, |a| a.flag()),
            limits: &self.limits,
        };
        let (attempt, mut tapes) = runner.attempt(args, INLINE_STACK, self.take_tapes());
        if let Attempt::Done(r, peak) = attempt {
            self.keep_tapes(tapes);
            return (r, peak);
        }
        rt::clear_tapes(&mut tapes);
        // Deep recursion: run again on a thread with a large stack.
        let big = std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("adze-jit-call".into())
                .stack_size(BIG_STACK)
                .spawn_scoped(s, || runner.attempt(args, BIG_STACK - STACK_MARGIN, tapes))
                .map(|h| h.join())
        });
        let fail = |msg: String| {
            (
                Err(RunError::new(self.name.clone(), TrapKind::Unsupported(msg))),
                0,
            )
        };
        let big = big.map(|r| {
            r.map(|(attempt, tapes)| {
                self.keep_tapes(tapes);
                attempt
            })
        });
        match big {
            Ok(Ok(Attempt::Done(r, peak))) => (r, peak),
            Ok(Ok(Attempt::StackExhausted)) => fail(self.exhausted_message()),
            Ok(Err(_)) => fail("internal error: the call thread panicked".into()),
            Err(e) => fail(format!("cannot start a thread for a deep call: {e}")),
        }
    }

    /// [`Compiled::call`] without copies: the compiled code reads and writes
    /// the caller's array buffers in place. On success the arrays of `args`
    /// hold their final contents (what `Outcome.args` holds after `call`)
    /// and the results are returned. On an error (the same [`RunError`] as
    /// `call` gives) the arrays hold whatever the code wrote before the trap.
    ///
    /// Code that cannot recurse and needs little native stack runs on the
    /// caller's thread. Otherwise, if the root has no `mut` parameter, the
    /// call runs on the caller's thread with a 512 KiB budget first and
    /// again on a thread with a 256 MiB stack if that ran out; with a `mut`
    /// parameter it runs once on such a thread (it cannot be re-run after
    /// a first attempt ran out of stack, because that attempt may have
    /// written to the arrays).
    pub fn call_mut(&self, args: &mut [Val]) -> Result<Vec<Val>, RunError> {
        check_args(&self.name, &self.sig, args)?;
        // Pointers to the caller's own buffers: `args` stays mutably
        // borrowed (so no buffer moves or is read by Rust) until we return.
        let mut slots: Vec<u64> = Vec::with_capacity(2 * args.len());
        for a in args.iter_mut() {
            push_slots(&mut slots, a);
        }
        // SAFETY: `check_args` passed, so `slots` has the root's layout;
        // each array slot points into a `Vec` of `args`, which we borrow
        // mutably for the whole call, so nothing else reads, writes or
        // reallocates it meanwhile.
        unsafe { self.run_slots(&slots) }
    }

    /// [`Compiled::call_mut`] on borrowed buffers: the compiled code reads
    /// `Arg::Array` slices and reads and writes `Arg::ArrayMut` slices in
    /// place, with no copy. A `mut` parameter needs an `ArrayMut`; any
    /// other array parameter takes either. Any number of threads may call
    /// one `Compiled` at once: each call has its own tape and context.
    pub fn call_args(&self, args: &mut [Arg<'_>]) -> Result<Vec<Val>, RunError> {
        self.check_borrowed(args)?;
        let mut slots: Vec<u64> = Vec::with_capacity(2 * args.len());
        for a in args.iter_mut() {
            a.push_slots(&mut slots);
        }
        // SAFETY: `check_borrowed` passed, so `slots` has the root's layout
        // and every `mut` parameter got an `ArrayMut`. Each array slot
        // points into a slice that `args` borrows for the whole call: an
        // `ArrayMut` exclusively, so nothing else reads or writes it; an
        // `Array` shared, and it is passed only for a parameter that is not
        // `mut`, which the generated code never writes (the verifier rejects
        // a `store` or `fill` into an array that is not writable, and a call
        // that passes one where the callee writes), so the code only reads
        // it, as other holders of the shared borrow may.
        unsafe { self.run_slots(&slots) }
    }

    /// Checks borrowed arguments against the signature, as
    /// [`check_args`] does for values, and that a `mut` array parameter
    /// gets a mutable slice.
    fn check_borrowed(&self, args: &[Arg<'_>]) -> Result<(), RunError> {
        let bad = |msg: String| {
            Err(RunError::new(
                self.name.clone(),
                TrapKind::BadArguments(msg),
            ))
        };
        if args.len() != self.sig.params.len() {
            return bad(format!(
                "expected {} argument(s), got {}",
                self.sig.params.len(),
                args.len()
            ));
        }
        for (p, a) in self.sig.params.iter().zip(args) {
            let ty = match a {
                Arg::F64(_) => Type::F64,
                Arg::I64(_) => Type::I64,
                Arg::Bool(_) => Type::Bool,
                Arg::Array(_) | Arg::ArrayMut(_) => Type::Array,
                Arg::IArray(_) | Arg::IArrayMut(_) => Type::IArray,
            };
            if ty != p.ty {
                return bad(format!(
                    "argument `{}` must be {}, got {}",
                    p.name,
                    p.ty.a(),
                    ty.a()
                ));
            }
            if p.mutable && matches!(a, Arg::Array(_) | Arg::IArray(_)) {
                return bad(format!(
                    "argument `{}` is a `mut` array: pass a mutable slice (`Arg::ArrayMut` or `Arg::IArrayMut`)",
                    p.name
                ));
            }
        }
        Ok(())
    }

    /// Runs the compiled code on argument slots, on this thread or (when
    /// the code may recurse deeply) once on a thread with a large stack.
    ///
    /// # Safety
    ///
    /// As [`Runner::run_raw`]: `slots` has the root's layout and each array
    /// slot is valid for the whole call — for reads and writes if the
    /// parameter is `mut`, for reads otherwise — and not written through
    /// any Rust reference meanwhile.
    unsafe fn run_slots(&self, slots: &[u64]) -> Result<Vec<Val>, RunError> {
        let armed = self.arm_timer()?;
        let runner = Runner {
            entry: self.entry,
            sites: &self.sites,
            name: &self.name,
            sig: &self.sig,
            interrupt: armed.as_ref().map_or(&timer::NEVER, |a| a.flag()),
            limits: &self.limits,
        };
        let (raw, tapes) = if self.inline_ok {
            // SAFETY: this function's contract.
            unsafe { runner.run_raw(slots, INLINE_STACK, self.take_tapes()) }
        } else {
            let mut tapes = self.take_tapes();
            if self.rerun_ok {
                // Recursion that stays shallow (most of it) runs here: a
                // thread with a big stack costs ~80 µs to start and join,
                // more than many such calls take. If the stack runs out,
                // nothing the caller sees was written (`rerun_ok`).
                // SAFETY: this function's contract.
                let (raw, t) = unsafe { runner.run_raw(slots, INLINE_STACK, tapes) };
                if !matches!(raw, Raw::StackExhausted) {
                    self.keep_tapes(t);
                    return match runner.finish(raw) {
                        Attempt::Done(r, _) => r.map(|out| out.results),
                        Attempt::StackExhausted => Err(self.failure(self.exhausted_message())),
                    };
                }
                tapes = t;
                rt::clear_tapes(&mut tapes);
            }
            let big = std::thread::scope(|s| {
                std::thread::Builder::new()
                    .name("adze-jit-call".into())
                    .stack_size(BIG_STACK)
                    // SAFETY: this function's contract; the scope joins
                    // the thread before this function returns.
                    .spawn_scoped(s, || unsafe {
                        runner.run_raw(slots, BIG_STACK - STACK_MARGIN, tapes)
                    })
                    .map(|h| h.join())
            });
            match big {
                Ok(Ok(raw)) => raw,
                Ok(Err(_)) => {
                    return Err(self.failure("internal error: the call thread panicked".into()))
                }
                Err(e) => {
                    return Err(self.failure(format!("cannot start a thread for a call: {e}")))
                }
            }
        };
        self.keep_tapes(tapes);
        match runner.finish(raw) {
            Attempt::Done(r, _) => r.map(|out| out.results),
            Attempt::StackExhausted => Err(self.failure(self.exhausted_message())),
        }
    }

    /// With a time limit, a timer armed for one call (its flag is what the
    /// code polls); disarmed when dropped, after the call.
    fn arm_timer(&self) -> Result<Option<timer::Armed>, RunError> {
        self.limits
            .timeout
            .map(timer::arm)
            .transpose()
            .map_err(|msg| self.failure(msg))
    }

    /// Tapes of an earlier call (empty, with their buffers), or new ones.
    fn take_tapes(&self) -> rt::Tapes {
        let kept = self.tapes.lock().ok().and_then(|mut pool| pool.pop());
        kept.unwrap_or_else(rt::new_tapes)
    }

    /// Keeps the buffers of `tapes` for a later call, unless they are
    /// bigger than `KEPT_TAPE_BYTES` or the pool is full.
    fn keep_tapes(&self, mut tapes: rt::Tapes) {
        if rt::clear_tapes(&mut tapes) <= KEPT_TAPE_BYTES {
            if let Ok(mut pool) = self.tapes.lock() {
                if pool.len() < KEPT_TAPE_SETS {
                    pool.push(tapes);
                }
            }
        }
    }

    fn failure(&self, msg: String) -> RunError {
        RunError::new(self.name.clone(), TrapKind::Unsupported(msg))
    }

    fn exhausted_message(&self) -> String {
        format!(
            "native stack exhausted ({} MiB) before the call depth limit of {} was reached",
            BIG_STACK >> 20,
            self.limits.max_call_depth
        )
    }

    /// The disassembly (Cranelift's VCode listing after register
    /// allocation) of every compiled function, if [`JitOptions::disasm`]
    /// was set.
    pub fn disassembly(&self) -> Option<&str> {
        self.disassembly.as_deref()
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
