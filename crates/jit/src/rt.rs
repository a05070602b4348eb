//! The Rust side of the JIT's run time: the per-call context ([`Ctx`]), the
//! trap-site table, and every `extern "C"` symbol that generated code calls
//! (`adze_trap`, `adze_alloc`, `adze_free_to` and one wrapper per intrinsic
//! around [`adze_ir::semantics`]).
//!
//! None of these functions panics: a panic cannot unwind across `extern "C"`
//! (it would abort the process), so each one handles every input it can be
//! given by generated code.

use adze_ir::semantics;
use adze_ir::{Opcode, RunError, TrapKind};
use std::mem::offset_of;

/// The per-call context. Generated code receives a `*mut Ctx` as the first
/// argument of every function and touches only the two leading `i64` fields,
/// at the offsets [`DEPTH_OFFSET`] and [`LIVE_OFFSET`]; everything else is
/// reached through the `extern "C"` helpers below.
#[repr(C)]
pub(crate) struct Ctx<'a> {
    /// Current call depth (0 outside any compiled function).
    pub depth: i64,
    /// Number of live `zeros` allocations (`allocs.len()`), read by each
    /// function at entry as its allocation mark.
    pub live: i64,
    /// Lowest native stack address generated code may use: each function
    /// compares its stack pointer with it at entry.
    pub stack_limit: u64,
    /// Set when a function found the stack pointer below `stack_limit`.
    pub stack_exhausted: bool,
    /// Live `zeros` arrays, oldest first.
    pub allocs: Vec<Vec<f64>>,
    /// The first run-time error recorded by `adze_trap`.
    pub error: Option<RunError>,
    /// The trap sites of this compilation, indexed by the site number
    /// generated code passes to `adze_trap`.
    pub sites: &'a [TrapSite],
    /// The largest number of simultaneously live arrays (for tests).
    pub peak: usize,
    /// The tapes of `push`/`pop`, by tape number: raw 64-bit values with
    /// their tag (tape number and type) each.
    pub tapes: Vec<Vec<(u64, i64)>>,
}

/// Byte offset of [`Ctx::depth`].
pub(crate) const DEPTH_OFFSET: i32 = offset_of!(Ctx<'static>, depth) as i32;
/// Byte offset of [`Ctx::live`].
pub(crate) const LIVE_OFFSET: i32 = offset_of!(Ctx<'static>, live) as i32;
/// Byte offset of [`Ctx::stack_limit`].
pub(crate) const STACK_LIMIT_OFFSET: i32 = offset_of!(Ctx<'static>, stack_limit) as i32;

impl<'a> Ctx<'a> {
    pub fn new(sites: &'a [TrapSite], stack_limit: u64) -> Ctx<'a> {
        Ctx {
            depth: 0,
            live: 0,
            stack_limit,
            stack_exhausted: false,
            allocs: Vec::new(),
            error: None,
            sites,
            peak: 0,
            tapes: vec![Vec::new(); usize::from(adze_ir::MAX_TAPES)],
        }
    }
}

/// What a trap site reports, and where.
#[derive(Clone, Debug)]
pub(crate) struct TrapSite {
    /// The function executing the faulting instruction (or, for the call
    /// depth check, the function being entered).
    pub func: String,
    pub kind: SiteKind,
}

/// The kind of a trap site; the run-time operands (`a`, `b` of `adze_trap`)
/// complete it into a [`TrapKind`].
#[derive(Clone, Debug)]
pub(crate) enum SiteKind {
    /// `a` = index, `b` = length.
    IndexOutOfBounds {
        array: String,
    },
    DivisionByZero,
    DivisionOverflow,
    /// `a` = requested length.
    BadArrayLength,
    CallDepthExceeded {
        limit: u32,
    },
    /// The native stack ran low: not an IR-level error. `Compiled::call`
    /// runs the call again on a thread with a larger stack.
    StackExhausted,
    /// A `pop` found an empty tape or a value of another type.
    TapeMismatch,
}

impl TrapSite {
    /// The error of this site, or `None` for `StackExhausted`.
    fn error(&self, a: i64, b: i64) -> Option<RunError> {
        let kind = match &self.kind {
            SiteKind::IndexOutOfBounds { array } => TrapKind::IndexOutOfBounds {
                array: array.clone(),
                index: a,
                len: b,
            },
            SiteKind::DivisionByZero => TrapKind::DivisionByZero,
            SiteKind::DivisionOverflow => TrapKind::DivisionOverflow,
            SiteKind::BadArrayLength => TrapKind::BadArrayLength { len: a },
            SiteKind::CallDepthExceeded { limit } => TrapKind::CallDepthExceeded { limit: *limit },
            SiteKind::TapeMismatch => TrapKind::TapeMismatch,
            SiteKind::StackExhausted => return None,
        };
        Some(RunError::new(self.func.clone(), kind))
    }
}

/// Records the error of trap site `site` (with run-time operands `a`, `b`).
/// Generated code then returns a nonzero status up the stack.
pub(crate) extern "C" fn adze_trap(ctx: *mut Ctx<'_>, site: i64, a: i64, b: i64) {
    // SAFETY: generated code passes the `*mut Ctx` it received from
    // `Compiled::call`, which points to a live, exclusively borrowed `Ctx` for
    // the whole duration of the call; no Rust reference to it exists while
    // generated code runs.
    let ctx = unsafe { &mut *ctx };
    if ctx.error.is_some() || ctx.stack_exhausted {
        return;
    }
    match usize::try_from(site).ok().and_then(|s| ctx.sites.get(s)) {
        Some(s) => match s.error(a, b) {
            Some(err) => ctx.error = Some(err),
            None => ctx.stack_exhausted = true,
        },
        None => {
            ctx.error = Some(RunError::new(
                "<jit>",
                TrapKind::Unsupported(format!("internal error: unknown trap site {site}")),
            ))
        }
    }
}

/// Allocates a zero-filled array of `n` elements (generated code has already
/// checked `0 <= n <= max_array_len`) for one `zeros` instruction of one
/// frame and returns its address.
///
/// `slot` points to the frame's stack slot for that instruction: -1 at
/// function entry, then the index in `Ctx::allocs` of the array the
/// instruction made last. When the instruction runs again (in a loop), that
/// array is dead by SSA (array values never flow through block parameters),
/// so it is zeroed, resized and reused instead of a new one being allocated:
/// a `zeros` inside a loop does not grow memory.
pub(crate) extern "C" fn adze_alloc(ctx: *mut Ctx<'_>, n: i64, slot: *mut i64) -> *mut f64 {
    // SAFETY: as in `adze_trap`.
    let ctx = unsafe { &mut *ctx };
    // SAFETY: generated code passes the address of an 8-byte, 8-aligned
    // stack slot of the calling frame, live for the duration of this call.
    let slot = unsafe { &mut *slot };
    let n = usize::try_from(n).unwrap_or(0);
    let reuse = usize::try_from(*slot)
        .ok()
        .filter(|&k| k < ctx.allocs.len());
    let v = match reuse {
        Some(k) => {
            let v = &mut ctx.allocs[k];
            v.clear();
            v.resize(n, 0.0);
            v
        }
        None => {
            // Moving the Vec into `allocs` moves its header, not its heap
            // buffer, so the returned pointer stays valid until the Vec is
            // dropped by `adze_free_to` or `Compiled::call`.
            ctx.allocs.push(vec![0.0f64; n]);
            *slot = ctx.allocs.len() as i64 - 1;
            ctx.live = ctx.allocs.len() as i64;
            ctx.peak = ctx.peak.max(ctx.allocs.len());
            let k = ctx.allocs.len() - 1;
            &mut ctx.allocs[k]
        }
    };
    v.as_mut_ptr()
}

/// Pushes `bits` (an f64's bits, an i64, or a bool as 0/1) with its `tag`
/// (tape number << 2 | type) onto its tape. Generated code only passes tags
/// of verified instructions, whose tape numbers are below `MAX_TAPES`.
pub(crate) extern "C" fn adze_push(ctx: *mut Ctx<'_>, bits: i64, tag: i64) {
    // SAFETY: as in `adze_trap`.
    let ctx = unsafe { &mut *ctx };
    if let Some(tape) = usize::try_from(tag >> 2)
        .ok()
        .and_then(|t| ctx.tapes.get_mut(t))
    {
        tape.push((bits as u64, tag));
    }
}

/// Pops the value pushed last. On an empty tape or a type mismatch it records
/// the error of trap site `site` and returns 0; `Compiled::call` reports the
/// recorded error even though the code ran on.
pub(crate) extern "C" fn adze_pop(ctx: *mut Ctx<'_>, site: i64, tag: i64) -> i64 {
    // SAFETY: as in `adze_trap`.
    let ctx_ref = unsafe { &mut *ctx };
    let tape = usize::try_from(tag >> 2)
        .ok()
        .and_then(|t| ctx_ref.tapes.get_mut(t));
    match tape.and_then(Vec::pop) {
        Some((bits, t)) if t == tag => bits as i64,
        _ => {
            adze_trap(ctx, site, 0, 0);
            0
        }
    }
}

/// Frees every allocation made after the mark `mark` (a former value of
/// `Ctx::live`).
pub(crate) extern "C" fn adze_free_to(ctx: *mut Ctx<'_>, mark: i64) {
    // SAFETY: as in `adze_trap`.
    let ctx = unsafe { &mut *ctx };
    ctx.allocs.truncate(usize::try_from(mark).unwrap_or(0));
    ctx.live = ctx.allocs.len() as i64;
}

macro_rules! unary_intrinsics {
    ($($op:ident => $fname:ident, $sym:literal;)*) => {
        $(
            extern "C" fn $fname(x: f64) -> f64 {
                semantics::unary_f64(Opcode::$op, x)
            }
        )*
        /// One-operand intrinsics called through a symbol: (opcode, symbol, address).
        pub(crate) fn unary_symbols() -> Vec<(Opcode, &'static str, *const u8)> {
            vec![$((Opcode::$op, $sym, $fname as extern "C" fn(f64) -> f64 as *const u8)),*]
        }
    };
}

macro_rules! binary_intrinsics {
    ($($op:ident => $fname:ident, $sym:literal;)*) => {
        $(
            extern "C" fn $fname(a: f64, b: f64) -> f64 {
                semantics::binary_f64(Opcode::$op, a, b)
            }
        )*
        /// Two-operand intrinsics called through a symbol: (opcode, symbol, address).
        pub(crate) fn binary_symbols() -> Vec<(Opcode, &'static str, *const u8)> {
            vec![$((Opcode::$op, $sym, $fname as extern "C" fn(f64, f64) -> f64 as *const u8)),*]
        }
    };
}

unary_intrinsics! {
    Sin => adze_sin, "adze_sin";
    Cos => adze_cos, "adze_cos";
    Tan => adze_tan, "adze_tan";
    Asin => adze_asin, "adze_asin";
    Acos => adze_acos, "adze_acos";
    Atan => adze_atan, "adze_atan";
    Sinh => adze_sinh, "adze_sinh";
    Cosh => adze_cosh, "adze_cosh";
    Tanh => adze_tanh, "adze_tanh";
    Exp => adze_exp, "adze_exp";
    Expm1 => adze_expm1, "adze_expm1";
    Log => adze_log, "adze_log";
    Log1p => adze_log1p, "adze_log1p";
    Cbrt => adze_cbrt, "adze_cbrt";
    Round => adze_round, "adze_round";
    Sign => adze_sign, "adze_sign";
}

binary_intrinsics! {
    Atan2 => adze_atan2, "adze_atan2";
    Pow => adze_pow, "adze_pow";
    Hypot => adze_hypot, "adze_hypot";
}

/// The run-time helper symbols: (symbol, address).
pub(crate) fn helper_symbols() -> Vec<(&'static str, *const u8)> {
    vec![
        (
            "adze_trap",
            adze_trap as extern "C" fn(*mut Ctx<'_>, i64, i64, i64) as *const u8,
        ),
        (
            "adze_alloc",
            adze_alloc as extern "C" fn(*mut Ctx<'_>, i64, *mut i64) -> *mut f64 as *const u8,
        ),
        (
            "adze_free_to",
            adze_free_to as extern "C" fn(*mut Ctx<'_>, i64) as *const u8,
        ),
        (
            "adze_push",
            adze_push as extern "C" fn(*mut Ctx<'_>, i64, i64) as *const u8,
        ),
        (
            "adze_pop",
            adze_pop as extern "C" fn(*mut Ctx<'_>, i64, i64) -> i64 as *const u8,
        ),
    ]
}
