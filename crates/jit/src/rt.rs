//! The Rust side of the JIT's run time: the per-call context ([`Ctx`]), the
//! trap-site table, and every `extern "C"` symbol that generated code calls
//! (`adze_trap`, `adze_alloc`, `adze_free_to`, `adze_reserve` — the growth
//! path of the inline tape — and one wrapper per intrinsic
//! around [`adze_ir::semantics`]).
//!
//! None of these functions panics: a panic cannot unwind across `extern "C"`
//! (it would abort the process), so each one handles every input it can be
//! given by generated code.

use adze_ir::semantics;
use adze_ir::{Opcode, RunError, TrapKind};
use std::mem::{offset_of, ManuallyDrop};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// A growable tape, laid out so that generated code can push and pop
/// inline. An entry is a value's raw 64 bits in `bits[k]` and its type in
/// `types[k]` (0 f64, 1 i64, 2 bool), which `pop` checks: two parallel
/// buffers, 9 bytes per entry (the tape number needs no storage: each tape
/// is its own stack). Generated code reads and writes `len` and the entries
/// below `cap` directly, and calls `adze_reserve` only to grow the buffers.
/// Within a function it keeps `len` in a register, and stores it here
/// before a call, `adze_reserve` or a return (`codegen::tape`): the `len`
/// here only ever takes values the register had, so the invariant below
/// holds for it at every point (entries are never uninitialised, and
/// `adze_reserve`, which moves the buffers, sees the current length).
///
/// Invariant: `(bits, len, bits_cap)` and `(types, len, types_cap)` are the
/// raw parts of a `Vec<u64>` and a `Vec<u8>`, `cap = min(bits_cap,
/// types_cap)`, and the entries `0..len` are initialised. Generated code
/// keeps it: it writes entries below `cap` before raising `len` over them.
#[repr(C)]
pub(crate) struct Tape {
    bits: *mut u64,
    types: *mut u8,
    len: usize,
    cap: usize,
    bits_cap: usize,
    types_cap: usize,
}

/// Byte offsets of the fields of [`Tape`] that generated code uses, and
/// its size.
pub(crate) const TAPE_BITS: i32 = offset_of!(Tape, bits) as i32;
pub(crate) const TAPE_TYPES: i32 = offset_of!(Tape, types) as i32;
pub(crate) const TAPE_LEN: i32 = offset_of!(Tape, len) as i32;
pub(crate) const TAPE_CAP: i32 = offset_of!(Tape, cap) as i32;
pub(crate) const TAPE_SIZE: i32 = std::mem::size_of::<Tape>() as i32;

/// The two buffers of a tape, as `Vec`s.
struct Buffers<'a> {
    bits: &'a mut Vec<u64>,
    types: &'a mut Vec<u8>,
}

impl Tape {
    fn new() -> Tape {
        let mut bits = ManuallyDrop::new(Vec::<u64>::new());
        let mut types = ManuallyDrop::new(Vec::<u8>::new());
        Tape {
            bits: bits.as_mut_ptr(),
            types: types.as_mut_ptr(),
            len: 0,
            cap: bits.capacity().min(types.capacity()),
            bits_cap: bits.capacity(),
            types_cap: types.capacity(),
        }
    }

    /// Runs `f` on the tape's buffers as `Vec`s (both of length `len`).
    fn with_vecs<R>(&mut self, f: impl FnOnce(Buffers<'_>) -> R) -> R {
        // SAFETY: by the invariant of `Tape`, these are the raw parts of a
        // `Vec<u64>` and a `Vec<u8>` with `len` initialised elements each.
        // They are wrapped in `ManuallyDrop` so that they are never freed
        // here (not even if `f` panicked), and their new raw parts are
        // stored back before returning.
        let (mut bits, mut types) = unsafe {
            (
                ManuallyDrop::new(Vec::from_raw_parts(self.bits, self.len, self.bits_cap)),
                ManuallyDrop::new(Vec::from_raw_parts(self.types, self.len, self.types_cap)),
            )
        };
        let r = f(Buffers {
            bits: &mut bits,
            types: &mut types,
        });
        self.bits = bits.as_mut_ptr();
        self.types = types.as_mut_ptr();
        self.len = bits.len().min(types.len());
        self.bits_cap = bits.capacity();
        self.types_cap = types.capacity();
        self.cap = self.bits_cap.min(self.types_cap);
        r
    }

    /// Room for `additional` more entries: the buffers at least double
    /// (amortised growth, as `Vec::reserve`), but through `try_reserve`, so
    /// that memory that cannot be had is an error and not an abort of the
    /// process. The error is the size in bytes of both buffers that could
    /// not be had. After a failure the tape is unchanged but for capacity.
    fn reserve(&mut self, additional: usize, room: usize) -> Result<(), u64> {
        let len = self.len;
        let want = len
            .saturating_add(additional)
            .max(self.cap.saturating_mul(2).min(len.saturating_add(room)))
            .max(64.min(len.saturating_add(room)));
        let failed = want.saturating_mul(9) as u64;
        self.with_vecs(|b| {
            b.bits
                .try_reserve_exact(want - len)
                .and_then(|()| b.types.try_reserve_exact(want - len))
                .map_err(|_| failed)
        })
    }

    /// Empties the tape, keeping its buffers.
    fn clear(&mut self) {
        self.with_vecs(|b| {
            b.bits.clear();
            b.types.clear();
        });
    }

    /// Bytes allocated.
    fn bytes(&self) -> usize {
        self.bits_cap * 8 + self.types_cap
    }
}

// SAFETY: a `Tape` owns its buffers exactly like the `Vec<u64>` and
// `Vec<u8>` whose raw parts it holds, so moving it to another thread is as
// safe as moving those `Vec`s.
unsafe impl Send for Tape {}

/// The tapes of one call, by tape number.
pub(crate) type Tapes = [Tape; adze_ir::MAX_TAPES as usize];

/// Fresh, empty tapes (no allocation).
pub(crate) fn new_tapes() -> Tapes {
    std::array::from_fn(|_| Tape::new())
}

/// Empties `tapes`, keeping their buffers; the bytes they hold.
pub(crate) fn clear_tapes(tapes: &mut Tapes) -> usize {
    tapes
        .iter_mut()
        .map(|t| {
            t.clear();
            t.bytes()
        })
        .sum()
}

impl Drop for Tape {
    fn drop(&mut self) {
        // SAFETY: the raw parts of a `Vec<u64>` and a `Vec<u8>` (the
        // invariant of `Tape`), dropped once, here.
        unsafe {
            drop(Vec::from_raw_parts(self.bits, self.len, self.bits_cap));
            drop(Vec::from_raw_parts(self.types, self.len, self.types_cap));
        }
    }
}

/// The per-call context. Generated code receives a `*mut Ctx` as the first
/// argument of every function and touches only the fields whose offsets
/// are defined below ([`DEPTH_OFFSET`], [`LIVE_OFFSET`], ..); everything
/// else is reached through the `extern "C"` helpers below.
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
    /// The flag of the call's time limit (`crate::timer`), set by the
    /// timer thread. Code compiled with a time limit loads it at every
    /// function entry and loop header (an atomic load) and traps with
    /// `Timeout` when it is set. The flag lives outside the context: the
    /// timer thread writes it while generated code and the helpers own the
    /// context. Never null.
    pub interrupt: *const AtomicBool,
    /// Nonzero after `adze_reserve` failed to grow a tape (and recorded
    /// `TapeOutOfMemory`): the bytes it could not have. The growth path of
    /// a push group loads it after the call and leaves through the trap
    /// exit.
    pub tape_failed: i64,
    /// The trap site (`TapeOutOfMemory`) of the push group whose growth
    /// path calls `adze_reserve`, stored by generated code before the call.
    pub tape_site: i64,
    /// The tapes of `push`/`pop`, by tape number, at [`TAPES_OFFSET`]:
    /// generated code pushes and pops inline (see [`Tape`]).
    pub tapes: [Tape; adze_ir::MAX_TAPES as usize],
    /// Set when a function found the stack pointer below `stack_limit`.
    pub stack_exhausted: bool,
    /// Live `zeros` arrays, oldest first.
    pub allocs: Vec<Vec<f64>>,
    /// The arrays a returning function hands to its caller, in result
    /// order (`adze_give`, `adze_adopt`).
    pub returned: Vec<Vec<f64>>,
    /// The first run-time error recorded by `adze_trap`.
    pub error: Option<RunError>,
    /// The trap sites of this compilation, indexed by the site number
    /// generated code passes to `adze_trap`.
    pub sites: &'a [TrapSite],
    /// The largest number of simultaneously live arrays (for tests).
    pub peak: usize,
    /// The tape budget (`Limits::tape_limit`), in bytes and in entries of
    /// all tapes together: checked where a tape grows (`adze_reserve`).
    pub tape_limit: u64,
    pub tape_entries: u64,
}

/// Byte offset of [`Ctx::depth`].
pub(crate) const DEPTH_OFFSET: i32 = offset_of!(Ctx<'static>, depth) as i32;
/// Byte offset of [`Ctx::live`].
pub(crate) const LIVE_OFFSET: i32 = offset_of!(Ctx<'static>, live) as i32;
/// Byte offset of [`Ctx::stack_limit`].
pub(crate) const STACK_LIMIT_OFFSET: i32 = offset_of!(Ctx<'static>, stack_limit) as i32;
/// Byte offset of [`Ctx::tapes`].
pub(crate) const TAPES_OFFSET: i32 = offset_of!(Ctx<'static>, tapes) as i32;
/// Byte offset of [`Ctx::interrupt`].
pub(crate) const INTERRUPT_OFFSET: i32 = offset_of!(Ctx<'static>, interrupt) as i32;
/// Byte offset of [`Ctx::tape_failed`].
pub(crate) const TAPE_FAILED_OFFSET: i32 = offset_of!(Ctx<'static>, tape_failed) as i32;
/// Byte offset of [`Ctx::tape_site`].
pub(crate) const TAPE_SITE_OFFSET: i32 = offset_of!(Ctx<'static>, tape_site) as i32;

impl<'a> Ctx<'a> {
    #[cfg(test)]
    pub fn new(sites: &'a [TrapSite], stack_limit: u64) -> Ctx<'a> {
        let limits = adze_ir::Limits::default();
        Ctx::with_tapes(
            sites,
            stack_limit,
            new_tapes(),
            &crate::timer::NEVER,
            &limits,
        )
    }

    /// A context whose tapes reuse `tapes`' buffers (which must be empty),
    /// polling `interrupt` (which must outlive the call).
    pub fn with_tapes(
        sites: &'a [TrapSite],
        stack_limit: u64,
        tapes: Tapes,
        interrupt: &'a AtomicBool,
        limits: &adze_ir::Limits,
    ) -> Ctx<'a> {
        Ctx {
            depth: 0,
            live: 0,
            stack_limit,
            interrupt,
            tape_failed: 0,
            tape_site: -1,
            stack_exhausted: false,
            allocs: Vec::new(),
            returned: Vec::new(),
            error: None,
            sites,
            peak: 0,
            tapes,
            tape_limit: limits.tape_limit,
            tape_entries: limits.tape_entries(),
        }
    }
}

/// What a trap site reports, and where.
#[derive(Clone, Debug)]
pub(crate) struct TrapSite {
    /// The function executing the faulting instruction (or, for the call
    /// depth check, the function being entered).
    pub func: String,
    /// The inlined functions the faulting instruction came from, innermost
    /// first (`Function::inlined_chain`).
    pub inlined: Vec<String>,
    /// The faulting instruction's source location (for
    /// [`SiteKind::Call`], the call's).
    pub loc: Option<adze_ir::Location>,
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
    /// `a` = the slice's end, `b` = the array's length.
    SliceEndOutOfBounds {
        array: String,
    },
    /// `a` = the slice's start, `b` = its end.
    SliceStartOutOfBounds {
        array: String,
    },
    /// `disjoint`: two views share an element.
    OverlappingArrays {
        first: String,
        second: String,
    },
    DivisionByZero,
    DivisionOverflow,
    /// `a` = the shift amount.
    ShiftOutOfRange,
    /// `a` = the bits of the f64 converted.
    ConversionOutOfRange,
    /// `a` = requested length; `max`: the limit compiled in.
    BadArrayLength {
        max: i64,
    },
    /// `a` = requested length: the allocation failed.
    OutOfMemory,
    CallDepthExceeded {
        limit: u32,
    },
    /// The flag of the time limit was set (a poll at a function entry or
    /// a loop header).
    Timeout {
        limit: Duration,
    },
    /// A tape could not grow, recorded by `adze_reserve` itself (the site
    /// number in `Ctx::tape_site`): `a` = the entries on the tape, `b` = the
    /// bytes it could not have, or -1 when the tapes would pass their
    /// budget `limit` (bytes).
    TapeOutOfMemory {
        limit: u64,
    },
    /// The native stack ran low: not an IR-level error. `Compiled::call`
    /// runs the call again on a thread with a larger stack.
    StackExhausted,
    /// A `pop` found an empty tape or a value of another type.
    TapeMismatch,
    /// `samelen`: an array and its shadow differ in length.
    ShadowLengthMismatch {
        array: String,
        shadow: String,
    },
    /// Not a fault: a call whose callee trapped. The callee's call-depth
    /// fault (raised on its entry) takes this call's location.
    Call,
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
            SiteKind::SliceEndOutOfBounds { array } => TrapKind::SliceEndOutOfBounds {
                array: array.clone(),
                hi: a,
                len: b,
            },
            SiteKind::SliceStartOutOfBounds { array } => TrapKind::SliceStartOutOfBounds {
                array: array.clone(),
                lo: a,
                hi: b,
            },
            SiteKind::OverlappingArrays { first, second } => TrapKind::OverlappingArrays {
                first: first.clone(),
                second: second.clone(),
            },
            SiteKind::DivisionByZero => TrapKind::DivisionByZero,
            SiteKind::DivisionOverflow => TrapKind::DivisionOverflow,
            SiteKind::ShiftOutOfRange => TrapKind::ShiftOutOfRange { amount: a },
            SiteKind::ConversionOutOfRange => TrapKind::ConversionOutOfRange { bits: a as u64 },
            SiteKind::BadArrayLength { max } => TrapKind::BadArrayLength { len: a, max: *max },
            SiteKind::OutOfMemory => TrapKind::OutOfMemory { len: a },
            SiteKind::CallDepthExceeded { limit } => TrapKind::CallDepthExceeded { limit: *limit },
            SiteKind::Timeout { limit } => TrapKind::Timeout { limit: *limit },
            SiteKind::TapeOutOfMemory { limit } if b < 0 => {
                TrapKind::TapeLimitExceeded { limit: *limit }
            }
            SiteKind::TapeOutOfMemory { .. } => TrapKind::TapeOutOfMemory {
                entries: a as u64,
                bytes: b as u64,
            },
            SiteKind::TapeMismatch => TrapKind::TapeMismatch,
            SiteKind::ShadowLengthMismatch { array, shadow } => TrapKind::ShadowLengthMismatch {
                array: array.clone(),
                shadow: shadow.clone(),
            },
            SiteKind::StackExhausted | SiteKind::Call => return None,
        };
        if !kind.is_at_instruction() {
            return Some(RunError::new(self.func.clone(), kind));
        }
        Some(
            RunError::new(self.func.clone(), kind)
                .with_inlined(self.inlined.clone())
                .with_loc(self.loc.clone()),
        )
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
    let at = usize::try_from(site).ok().and_then(|s| ctx.sites.get(s));
    if let Some(TrapSite {
        kind: SiteKind::Call,
        loc,
        ..
    }) = at
    {
        // A callee trapped: a call-depth fault raised on its entry is at
        // this call (the innermost call reports first).
        if let Some(e) = ctx.error.as_mut() {
            if matches!(e.kind, TrapKind::CallDepthExceeded { .. }) && e.loc.is_none() {
                e.loc = loc.clone().map(Box::new);
            }
        }
        return;
    }
    record_trap(ctx, site, a, b);
}

/// What `adze_trap` does for a site that is not a call: records the error
/// of trap site `site` unless one is recorded already.
fn record_trap(ctx: &mut Ctx<'_>, site: i64, a: i64, b: i64) {
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
    // A failed allocation returns null, which generated code turns into
    // `TrapKind::OutOfMemory` (never an abort).
    let v = match reuse {
        Some(k) => {
            let v = &mut ctx.allocs[k];
            v.clear();
            if v.try_reserve_exact(n).is_err() {
                return std::ptr::null_mut();
            }
            v.resize(n, 0.0);
            v
        }
        None => {
            let mut fresh: Vec<f64> = Vec::new();
            if fresh.try_reserve_exact(n).is_err() || ctx.allocs.try_reserve(1).is_err() {
                return std::ptr::null_mut();
            }
            fresh.resize(n, 0.0);
            // Moving the Vec into `allocs` moves its header, not its heap
            // buffer, so the returned pointer stays valid until the Vec is
            // dropped by `adze_free_to` or `Compiled::call`.
            ctx.allocs.push(fresh);
            *slot = ctx.allocs.len() as i64 - 1;
            ctx.live = ctx.allocs.len() as i64;
            ctx.peak = ctx.peak.max(ctx.allocs.len());
            let k = ctx.allocs.len() - 1;
            &mut ctx.allocs[k]
        }
    };
    v.as_mut_ptr()
}

/// Makes room for `additional` more entries on tape `tape` (generated code
/// calls it when a group of pushes does not fit below the capacity, then
/// writes the entries itself). If the memory cannot be had, records the
/// error of trap site `Ctx::tape_site` (`TapeOutOfMemory`, stored by the
/// generated code before the call), as `adze_trap` would, and sets
/// `Ctx::tape_failed` to the bytes that could not be had; generated code
/// checks that field after the call and leaves through its trap exit
/// instead of writing the entries. Tape numbers of verified instructions
/// are below `MAX_TAPES`; anything else is ignored.
pub(crate) extern "C" fn adze_reserve(ctx: *mut Ctx<'_>, tape: i64, additional: i64) {
    // SAFETY: as in `adze_trap`.
    let ctx = unsafe { &mut *ctx };
    let k = usize::try_from(tape).ok().filter(|&k| k < ctx.tapes.len());
    if let (Some(k), Ok(n)) = (k, usize::try_from(additional)) {
        let entries = i64::try_from(ctx.tapes[k].len).unwrap_or(i64::MAX);
        // The budget counts the entries of every tape; no tape grows past
        // what is left of it.
        let total: u64 = ctx.tapes.iter().map(|t| t.len as u64).sum();
        let room = ctx.tape_entries.saturating_sub(total);
        if n as u64 > room {
            ctx.tape_failed = 1;
            record_trap(ctx, ctx.tape_site, entries, -1);
            return;
        }
        let room = usize::try_from(room).unwrap_or(usize::MAX);
        let t = &mut ctx.tapes[k];
        if let Err(bytes) = t.reserve(n, room) {
            let bytes = i64::try_from(bytes).unwrap_or(i64::MAX).max(1);
            ctx.tape_failed = bytes;
            record_trap(ctx, ctx.tape_site, entries, bytes);
        }
    }
}

/// `fill a, x` of a long array: the `len` 8-byte cells at `ptr` all get
/// the bits `bits` (an f64's or an i64's). Zeros go to `memset`, which
/// the C library writes with the widest stores the CPU has; other values
/// to `slice::fill`. Short arrays are filled inline (`codegen::insts`).
pub(crate) extern "C" fn adze_fill(ptr: *mut u64, len: i64, bits: i64) {
    let Ok(len) = usize::try_from(len) else {
        return;
    };
    if len == 0 {
        return;
    }
    // SAFETY: generated code passes the (pointer, length) pair of one
    // live, writable array (`Translator::fill`): `len` initialized,
    // aligned `u64`-sized cells that nothing else reads or writes during
    // the call.
    let cells = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
    if bits == 0 {
        // SAFETY: as above; all-zero bits are a valid u64.
        unsafe { std::ptr::write_bytes(cells.as_mut_ptr(), 0, len) };
    } else {
        cells.fill(bits as u64);
    }
}

/// Moves the array `allocs[k]` (an array the returning function owns:
/// its index comes from the slot of the `zeros` or call that made it) to
/// `Ctx::returned`, before the function frees its arrays: the caller
/// takes it with `adze_adopt`. An index that is not live hands over an
/// empty array (verified IR never does).
pub(crate) extern "C" fn adze_give(ctx: *mut Ctx<'_>, k: i64) {
    // SAFETY: as in `adze_trap`.
    let ctx = unsafe { &mut *ctx };
    let v = usize::try_from(k)
        .ok()
        .and_then(|k| ctx.allocs.get_mut(k))
        .map(std::mem::take)
        .unwrap_or_default();
    ctx.returned.push(v);
}

/// Takes the last array of `Ctx::returned` as an array of the calling
/// frame for one array result of one call, and returns its address (null
/// if `allocs` cannot grow). `slot` is as in `adze_alloc`: when the call
/// ran before in this frame, its former result is dead by SSA and the new
/// array takes its place (dropping it), so a call in a loop does not grow
/// memory. Results are adopted last first.
pub(crate) extern "C" fn adze_adopt(ctx: *mut Ctx<'_>, slot: *mut i64) -> *mut f64 {
    // SAFETY: as in `adze_trap`.
    let ctx = unsafe { &mut *ctx };
    // SAFETY: as in `adze_alloc`.
    let slot = unsafe { &mut *slot };
    let mut v = ctx.returned.pop().unwrap_or_default();
    let ptr = v.as_mut_ptr();
    let reuse = usize::try_from(*slot)
        .ok()
        .filter(|&k| k < ctx.allocs.len());
    match reuse {
        // Moving the Vec moves its header, not its buffer: `ptr` stays
        // valid until the array is dropped.
        Some(k) => ctx.allocs[k] = v,
        None => {
            if ctx.allocs.try_reserve(1).is_err() {
                return std::ptr::null_mut();
            }
            ctx.allocs.push(v);
            *slot = ctx.allocs.len() as i64 - 1;
            ctx.live = ctx.allocs.len() as i64;
            ctx.peak = ctx.peak.max(ctx.allocs.len());
        }
    }
    ptr
}

/// Frees every allocation made after the mark `mark` (a former value of
/// `Ctx::live`).
pub(crate) extern "C" fn adze_free_to(ctx: *mut Ctx<'_>, mark: i64) {
    // SAFETY: as in `adze_trap`.
    let ctx = unsafe { &mut *ctx };
    ctx.allocs.truncate(usize::try_from(mark).unwrap_or(0));
    ctx.live = ctx.allocs.len() as i64;
}

/// The intrinsics computed out of line, from the rows of
/// [`adze_ir::for_each_opcode!`] that name a libcall: for each, an
/// `extern "C"` wrapper of that name calling [`semantics`] with its opcode
/// (`#[inline]` there, so the wrapper is a tail jump to libm), and its entry
/// in [`unary_symbols`] or [`binary_symbols`]. A libcall row of another
/// signature than `f64 -> f64` or `(f64, f64) -> f64` does not compile.
macro_rules! libcalls {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $name:literal, $format:ident,
            [$($arg:ident),*] -> $res:ident, [$($effect:ident)*],
            $cost:tt, $lang:tt, $libcall:tt;
    )*) => {
        $( libcalls!(@wrapper $variant, $format, [$($arg),*] -> $res, $libcall); )*

        /// One-operand intrinsics called through a symbol: (opcode, symbol, address).
        pub(crate) fn unary_symbols() -> Vec<(Opcode, &'static str, *const u8)> {
            [$( libcalls!(@entry Unary, $variant, $format, $libcall) ),*]
                .into_iter()
                .flatten()
                .collect()
        }

        /// Two-operand intrinsics called through a symbol: (opcode, symbol, address).
        pub(crate) fn binary_symbols() -> Vec<(Opcode, &'static str, *const u8)> {
            [$( libcalls!(@entry Binary, $variant, $format, $libcall) ),*]
                .into_iter()
                .flatten()
                .collect()
        }
    };
    (@wrapper $variant:ident, $format:ident, [$($arg:ident),*] -> $res:ident, -) => {};
    (@wrapper $variant:ident, Unary, [F64] -> F64, $sym:ident) => {
        extern "C" fn $sym(x: f64) -> f64 {
            semantics::unary_f64(Opcode::$variant, x)
        }
    };
    (@wrapper $variant:ident, Binary, [F64, F64] -> F64, $sym:ident) => {
        extern "C" fn $sym(a: f64, b: f64) -> f64 {
            semantics::binary_f64(Opcode::$variant, a, b)
        }
    };
    (@entry $want:ident, $variant:ident, $format:ident, -) => { None };
    (@entry Unary, $variant:ident, Unary, $sym:ident) => {
        Some((
            Opcode::$variant,
            stringify!($sym),
            $sym as extern "C" fn(f64) -> f64 as *const u8,
        ))
    };
    (@entry Binary, $variant:ident, Binary, $sym:ident) => {
        Some((
            Opcode::$variant,
            stringify!($sym),
            $sym as extern "C" fn(f64, f64) -> f64 as *const u8,
        ))
    };
    (@entry $want:ident, $variant:ident, $format:ident, $sym:ident) => { None };
}

adze_ir::for_each_opcode!(libcalls);

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
            "adze_give",
            adze_give as extern "C" fn(*mut Ctx<'_>, i64) as *const u8,
        ),
        (
            "adze_adopt",
            adze_adopt as extern "C" fn(*mut Ctx<'_>, *mut i64) -> *mut f64 as *const u8,
        ),
        (
            "adze_reserve",
            adze_reserve as extern "C" fn(*mut Ctx<'_>, i64, i64) as *const u8,
        ),
        (
            "adze_fill",
            adze_fill as extern "C" fn(*mut u64, i64, i64) as *const u8,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tape_grows_and_keeps_its_entries() {
        let mut ctx = Ctx::new(&[], 0);
        let p: *mut Ctx<'_> = &mut ctx;
        adze_reserve(p, 3, 2);
        let t = &mut ctx.tapes[3];
        assert!(t.cap >= 2);
        assert_eq!(t.len, 0);
        t.with_vecs(|b| {
            b.bits.push(7);
            b.types.push(1);
        });
        let p: *mut Ctx<'_> = &mut ctx;
        adze_reserve(p, 3, 1000);
        let t = &mut ctx.tapes[3];
        assert!(t.cap >= 1001);
        assert_eq!(t.len, 1);
        let (bits, types) = t.with_vecs(|b| (b.bits.clone(), b.types.clone()));
        assert_eq!((bits, types), (vec![7], vec![1]));
        let mut tapes = std::mem::replace(&mut ctx.tapes, new_tapes());
        assert!(clear_tapes(&mut tapes) >= 1001 * 9);
        assert_eq!(tapes[3].len, 0);
    }

    #[test]
    fn a_tape_that_cannot_grow_records_its_site_and_keeps_its_entries() {
        let sites = [TrapSite {
            func: "f.aug".into(),
            inlined: vec!["g".into()],
            loc: None,
            kind: SiteKind::TapeOutOfMemory { limit: u64::MAX },
        }];
        let mut ctx = Ctx::new(&sites, 0);
        // No budget: the allocation itself fails.
        ctx.tape_entries = u64::MAX;
        let p: *mut Ctx<'_> = &mut ctx;
        adze_reserve(p, 2, 3);
        ctx.tapes[2].with_vecs(|b| {
            b.bits.extend([1, 2, 3]);
            b.types.extend([0, 0, 1]);
        });
        assert_eq!((ctx.tape_failed, &ctx.error), (0, &None));
        // More entries than any memory holds (the same path as an
        // allocation that fails).
        ctx.tape_site = 0;
        let p: *mut Ctx<'_> = &mut ctx;
        adze_reserve(p, 2, i64::MAX);
        assert!(ctx.tape_failed > 0);
        let err = ctx.error.clone().expect("an error");
        assert_eq!(err.func, "f.aug");
        assert!(err.inlined.is_empty());
        assert!(matches!(
            err.kind,
            TrapKind::TapeOutOfMemory { entries: 3, bytes } if bytes > 1 << 40
        ));
        let t = &mut ctx.tapes[2];
        assert_eq!(t.len, 3);
        let (bits, types) = t.with_vecs(|b| (b.bits.clone(), b.types.clone()));
        assert_eq!((bits, types), (vec![1, 2, 3], vec![0, 0, 1]));
    }

    /// The budget counts the entries of every tape, and no tape's buffers
    /// grow past what is left of it.
    #[test]
    fn the_tape_budget_counts_every_tape_and_bounds_growth() {
        let sites = [TrapSite {
            func: "f.aug".into(),
            inlined: Vec::new(),
            loc: None,
            kind: SiteKind::TapeOutOfMemory { limit: 900 },
        }];
        let mut ctx = Ctx::new(&sites, 0);
        ctx.tape_entries = 100;
        ctx.tape_site = 0;
        let p: *mut Ctx<'_> = &mut ctx;
        adze_reserve(p, 0, 60);
        ctx.tapes[0].with_vecs(|b| {
            b.bits.extend([0; 60]);
            b.types.extend([0; 60]);
        });
        let p: *mut Ctx<'_> = &mut ctx;
        adze_reserve(p, 1, 30);
        assert_eq!((ctx.tape_failed, &ctx.error), (0, &None));
        assert!(ctx.tapes[1].cap <= 40, "grew past the budget");
        ctx.tapes[1].with_vecs(|b| {
            b.bits.extend([0; 30]);
            b.types.extend([0; 30]);
        });
        // 90 of 100 entries are taken: 11 more do not fit.
        let p: *mut Ctx<'_> = &mut ctx;
        adze_reserve(p, 1, 11);
        assert_eq!(ctx.tape_failed, 1);
        let err = ctx.error.clone().expect("an error");
        assert_eq!(err.kind, TrapKind::TapeLimitExceeded { limit: 900 });
    }
}
