//! Run-time values, limits and errors shared by every executor of the IR
//! (the interpreter and the JIT), so that their results and their errors can
//! be compared for equality.

use crate::function::Signature;
use crate::module::Module;
use crate::names;
use crate::srcloc::SourceLoc;
use crate::types::Type;
use std::fmt;
use std::time::Duration;

/// An argument or a result of a call from Rust into IR code.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    /// An `f64`.
    F64(f64),
    /// An `i64`.
    I64(i64),
    /// A `bool`.
    Bool(bool),
    /// An array: its elements (as an argument, its contents on entry; in an
    /// [`Outcome`], on return).
    Array(Vec<f64>),
    /// An i64 array, as [`Val::Array`].
    IArray(Vec<i64>),
}

impl Val {
    /// The IR type of this value.
    pub fn ty(&self) -> Type {
        match self {
            Val::F64(_) => Type::F64,
            Val::I64(_) => Type::I64,
            Val::Bool(_) => Type::Bool,
            Val::Array(_) => Type::Array,
            Val::IArray(_) => Type::IArray,
        }
    }

    /// Equality that compares f64 bit patterns, except that every NaN equals
    /// every NaN (NaN payloads are not part of adze's semantics).
    pub fn bit_eq(&self, other: &Val) -> bool {
        fn f(a: f64, b: f64) -> bool {
            (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
        }
        match (self, other) {
            (Val::F64(a), Val::F64(b)) => f(*a, *b),
            (Val::I64(a), Val::I64(b)) => a == b,
            (Val::Bool(a), Val::Bool(b)) => a == b,
            (Val::Array(a), Val::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| f(*x, *y))
            }
            (Val::IArray(a), Val::IArray(b)) => a == b,
            _ => false,
        }
    }
}

impl fmt::Display for Val {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Val::F64(x) => write!(f, "{x:?}"),
            Val::I64(x) => write!(f, "{x}"),
            Val::Bool(x) => write!(f, "{x}"),
            Val::Array(xs) => write_list(f, xs, |f, x| write!(f, "{x:?}")),
            Val::IArray(xs) => write_list(f, xs, |f, x| write!(f, "{x}")),
        }
    }
}

/// `[a, b, ..]`, each element written by `one`.
fn write_list<T>(
    f: &mut fmt::Formatter<'_>,
    xs: &[T],
    one: impl Fn(&mut fmt::Formatter<'_>, &T) -> fmt::Result,
) -> fmt::Result {
    f.write_str("[")?;
    for (i, x) in xs.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        one(f, x)?;
    }
    f.write_str("]")
}

/// What a call returns: the function's results, and the final value of every
/// argument (arrays hold their final contents; scalars are unchanged).
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The function's results, in signature order.
    pub results: Vec<Val>,
    /// Every argument as it was on return, in parameter order.
    pub args: Vec<Val>,
}

impl Outcome {
    /// Bitwise equality in the sense of [`Val::bit_eq`].
    pub fn bit_eq(&self, other: &Outcome) -> bool {
        self.results.len() == other.results.len()
            && self.args.len() == other.args.len()
            && self
                .results
                .iter()
                .zip(&other.results)
                .all(|(a, b)| a.bit_eq(b))
            && self.args.iter().zip(&other.args).all(|(a, b)| a.bit_eq(b))
    }
}

/// Limits that every executor enforces identically.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Maximum depth of nested calls, the outermost call counting as 1.
    pub max_call_depth: u32,
    /// Maximum length of a `zeros` array.
    pub max_array_len: i64,
    /// Wall-clock time one run may take (`None`, the default: no limit).
    /// A run that takes longer stops with [`TrapKind::Timeout`]. The
    /// interpreter reads the clock every few thousand steps; the JIT
    /// compiles a poll of a flag, set by a timer thread, into every
    /// function entry and loop header only when a limit is set, so code
    /// without a limit is unchanged.
    pub timeout: Option<Duration>,
    /// The budget of the reverse-mode tapes of one run, in bytes: all
    /// tapes together may hold `tape_limit / TAPE_ENTRY_BYTES` entries. A
    /// push past it stops the run with [`TrapKind::TapeLimitExceeded`]
    /// (both executors count entries, not their own layouts, so they stop
    /// alike), and no tape grows past it.
    pub tape_limit: u64,
    /// The entries a segment of a checkpointed loop may tape before the
    /// loop cuts it (`tapeover`; docs/ad-reverse.md, "Checkpointing"):
    /// `None`, the default, is a sixteenth of the budget's entries. Any
    /// value gives the same derivatives bit for bit; a small one trades
    /// time for memory (the fuzzer's checkpointing mode sets 1).
    pub checkpoint_segment: Option<u64>,
}

impl Limits {
    /// The entries all tapes of one run may hold.
    pub fn tape_entries(&self) -> u64 {
        self.tape_limit / TAPE_ENTRY_BYTES
    }

    /// The entries a checkpointed loop's segment may tape
    /// ([`Limits::checkpoint_segment`]), at least 1.
    pub fn segment_entries(&self) -> u64 {
        self.checkpoint_segment
            .unwrap_or(self.tape_entries() / 16)
            .max(1)
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_call_depth: DEFAULT_MAX_CALL_DEPTH,
            max_array_len: MAX_ARRAY_LEN,
            timeout: None,
            tape_limit: DEFAULT_TAPE_LIMIT,
            checkpoint_segment: None,
        }
    }
}

/// Default tape budget: 1 GiB (SPEC §5c).
pub const DEFAULT_TAPE_LIMIT: u64 = 1 << 30;

/// What one tape entry costs against the budget: its 8 bytes of value and
/// a type byte (the JIT's layout).
pub const TAPE_ENTRY_BYTES: u64 = 9;

/// Default bound on the depth of nested calls: deep enough that only real
/// recursion reaches it (a chain of distinct functions is as deep as the
/// program is long), shallow enough to stop a runaway recursion in well
/// under a second. Executors do not use the native stack for it (the JIT
/// re-runs on a large stack; the interpreter keeps its own).
pub const DEFAULT_MAX_CALL_DEPTH: u32 = 100_000;

/// Default upper bound on `zeros(n)`: 2^28 elements (2 GiB).
pub const MAX_ARRAY_LEN: i64 = 1 << 28;

/// Why a run stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrapKind {
    /// A `load` or `store` with an index outside `0..len`.
    IndexOutOfBounds {
        /// The array's source-level name ([`crate::Function::array_name`]).
        array: String,
        /// The index used.
        index: i64,
        /// The array's length.
        len: i64,
    },
    /// A `slice` whose end is not in `0..=len` (checked first).
    SliceEndOutOfBounds {
        /// The sliced array's source-level name.
        array: String,
        /// The end (exclusive bound) asked for.
        hi: i64,
        /// The sliced array's length.
        len: i64,
    },
    /// A `slice` whose start is not in `0..=hi` (its end is in bounds).
    SliceStartOutOfBounds {
        /// The sliced array's source-level name.
        array: String,
        /// The start asked for.
        lo: i64,
        /// The end.
        hi: i64,
    },
    /// `disjoint a, b` on two views that share an element: a `mut` view
    /// passed beside another view of the same array.
    OverlappingArrays {
        /// The first view's source-level name.
        first: String,
        /// The second's.
        second: String,
    },
    /// `idiv` or `irem` by zero.
    DivisionByZero,
    /// `idiv` or `irem` of `i64::MIN` by `-1`.
    DivisionOverflow,
    /// `ishl` or `sshr` by an amount outside `0..=63`.
    ShiftOutOfRange {
        /// The shift amount used.
        amount: i64,
    },
    /// `ftosi` of NaN or of a value outside what an i64 holds.
    ConversionOutOfRange {
        /// The bits of the f64 that was converted (bits, so that the kind
        /// stays `Eq` and NaN payloads compare).
        bits: u64,
    },
    /// `zeros(n)` with `n < 0` or `n` above the limit.
    BadArrayLength {
        /// The length asked for.
        len: i64,
        /// The largest length the run allows (`Limits::max_array_len`).
        max: i64,
    },
    /// `zeros(n)` with a valid `n`, but the memory could not be had.
    OutOfMemory {
        /// The length asked for, in elements.
        len: i64,
    },
    /// The call depth limit was reached (runaway recursion).
    CallDepthExceeded {
        /// The limit, [`Limits::max_call_depth`].
        limit: u32,
    },
    /// The run took longer than [`Limits::timeout`] and was stopped.
    Timeout {
        /// The limit that was passed.
        limit: Duration,
    },
    /// A reverse-mode tape needed more memory than could be had: growing
    /// it to `bytes` bytes failed after `entries` entries were recorded.
    /// (The sizes depend on the executor's layout of an entry.)
    TapeOutOfMemory {
        /// Entries recorded when growing failed.
        entries: u64,
        /// The size growing asked for, in bytes.
        bytes: u64,
    },
    /// An array and its shadow differ in length.
    ShadowLengthMismatch {
        /// The array's source-level name.
        array: String,
        /// The shadow's name, likewise (a generated one reads `a.d`).
        shadow: String,
    },
    /// The tapes needed more entries than [`Limits::tape_limit`] allows.
    TapeLimitExceeded {
        /// The budget, in bytes.
        limit: u64,
    },
    /// `pop` on an empty tape, or of another type than was pushed: a bug in
    /// the pass that emitted the code.
    TapeMismatch,
    /// The arguments of the outermost call do not match the signature.
    BadArguments(String),
    /// The code uses something this executor does not support (for example
    /// an `autodiff` request that no AD pass has lowered).
    Unsupported(String),
}

impl fmt::Display for TrapKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrapKind::IndexOutOfBounds { array, index, len } => write!(
                f,
                "index {index} is out of bounds for array {} of length {len}",
                names::annotate(array, names::describe_array)
            ),
            TrapKind::SliceEndOutOfBounds { array, hi, len } => write!(
                f,
                "slice end {hi} is out of bounds for array {} of length {len}",
                names::annotate(array, names::describe_array)
            ),
            TrapKind::SliceStartOutOfBounds { array, lo, hi } => write!(
                f,
                "slice {lo}..{hi} of array {} {}",
                names::annotate(array, names::describe_array),
                if *lo < 0 {
                    "starts below 0"
                } else {
                    "starts after its end"
                }
            ),
            TrapKind::OverlappingArrays { first, second } => write!(
                f,
                "views {} and {} of one array overlap, and one of them is written: a `mut` view must not share elements with another argument",
                names::annotate(first, names::describe_array),
                names::annotate(second, names::describe_array)
            ),
            TrapKind::DivisionByZero => f.write_str("integer division by zero"),
            TrapKind::DivisionOverflow => f.write_str("integer division overflow (i64::MIN / -1)"),
            TrapKind::ShiftOutOfRange { amount } => write!(
                f,
                "shift amount {amount} is out of range (must be between 0 and 63)"
            ),
            TrapKind::ConversionOutOfRange { bits } => {
                let x = f64::from_bits(*bits);
                if x.is_nan() {
                    f.write_str("cannot convert NaN to i64")
                } else {
                    write!(f, "cannot convert {x:?} to i64: out of range")
                }
            }
            TrapKind::BadArrayLength { len, max } => write!(
                f,
                "cannot allocate an array of length {len} (must be between 0 and {max})"
            ),
            TrapKind::OutOfMemory { len } => write!(
                f,
                "out of memory: cannot allocate an array of {len} elements ({} MiB)",
                len.saturating_mul(8) >> 20
            ),
            TrapKind::CallDepthExceeded { limit } => write!(
                f,
                "call depth limit of {limit} exceeded: a recursion that does not end? (`--max-call-depth` raises the limit)"
            ),
            TrapKind::Timeout { limit } => write!(
                f,
                "the run was stopped after its time limit of {} (`--timeout`)",
                DurationText(*limit)
            ),
            TrapKind::TapeOutOfMemory { entries, bytes } => write!(
                f,
                "out of memory: the reverse-mode tape outgrew memory ({entries} entries; growing it to {} MiB failed)",
                bytes >> 20
            ),
            TrapKind::ShadowLengthMismatch { array, shadow } => write!(
                f,
                "array {} and its shadow `{shadow}` have different lengths",
                names::annotate(array, names::describe_array)
            ),
            TrapKind::TapeLimitExceeded { limit } => write!(
                f,
                "the reverse-mode tape needs more than its budget of {} (`--tape-limit BYTES` raises it; `--checkpoint`, or `#[checkpoint]` on the loop, bounds it, and `#[checkpoint(snapshots = K)]` to K snapshots; `adze dump --annotate tape` says why a loop is not checkpointed)",
                Bytes(*limit)
            ),
            TrapKind::TapeMismatch => {
                f.write_str("internal error: `pop` found an empty tape or a value of another type")
            }
            TrapKind::BadArguments(msg) => f.write_str(msg),
            TrapKind::Unsupported(msg) => f.write_str(msg),
        }
    }
}

/// A size as a person writes it: `1 GiB`, `64 MiB`, `1000 bytes`.
struct Bytes(u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
            if n >= 1 << shift && n.is_multiple_of(1 << shift) {
                return write!(f, "{} {unit}", n >> shift);
            }
        }
        write!(f, "{n} bytes")
    }
}

/// A duration as a person writes it: `2 s`, `1.5 s`, `250 ms`.
struct DurationText(Duration);

impl fmt::Display for DurationText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One rounding from whole nanoseconds: 0.1 s is `100 ms`.
        let ns = self.0.as_nanos() as f64;
        if self.0 >= Duration::from_secs(1) {
            write!(f, "{} s", ns / 1e9)
        } else {
            write!(f, "{} ms", ns / 1e6)
        }
    }
}

/// A run-time error: what happened, and in which function.
///
/// `func` is the IR name of the function whose code faulted (after
/// inlining, the function the code was inlined into). `inlined` says where
/// that code came from when it was inlined: the inlined functions, innermost
/// first, the last one inlined directly into `func` (empty for `func`'s own
/// code; see [`crate::Function::inlined_chain`]).
///
/// The message names a user's function as `` in function `f`: `` and a
/// generated one by what it is, keeping the raw name:
/// `` in the augmented primal of the reverse derivative of `f` (function `f.aug.dup`): ``.
/// What a generated function is comes from the module's records
/// ([`Module::describe_function`]), which the executors do not consult:
/// whoever reports the error adds it with [`RunError::describe_in`] (the
/// facade does, for every run); without it the raw names are printed.
/// Inlined code is named innermost first, then each function it was inlined
/// into: `` in function `read_at`, inlined into function `mid`, inlined into function `f`: ``.
///
/// `loc` is where in the source the faulting instruction comes from, when it
/// has a location ([`crate::srcloc`]): `` in function `f` at t.adz:3:14: ``,
/// after the innermost function named when the code was inlined (the
/// location is in that function's source). A call-depth fault is raised on
/// entry to the callee; its location is the call's:
/// `` in function `f` (called at t.adz:7:5): ``.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunError {
    /// The IR name of the function whose code faulted.
    pub func: String,
    /// What happened.
    pub kind: TrapKind,
    /// The inlined functions the faulting code came from, innermost first.
    pub inlined: Vec<String>,
    /// What the generated functions among `func` and `inlined` are, in the
    /// user's terms: `(raw name, description)` ([`RunError::describe_in`];
    /// boxed, as `loc`).
    pub described: Option<Box<Vec<(String, String)>>>,
    /// Where in the source the fault happened, if known (boxed: errors
    /// travel in `Result`s, which stay small).
    pub loc: Option<Box<Location>>,
}

/// A place in the source, for run-time errors: the module's source file
/// (if it has one) and an instruction's [`SourceLoc`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    /// The module's source file, if it names one.
    pub file: Option<String>,
    /// The line, from 1.
    pub line: u32,
    /// The column, from 1, in characters.
    pub col: u32,
}

impl Location {
    /// The location `loc` of the file `file`; `None` when `loc` is none.
    pub fn new(file: Option<&str>, loc: SourceLoc) -> Option<Location> {
        let (line, col) = loc.expand()?;
        Some(Location {
            file: file.map(str::to_string),
            line,
            col,
        })
    }
}

impl fmt::Display for Location {
    /// `FILE:LINE:COL`, or `LINE:COL` without a file.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{file}:")?;
        }
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// `function `f`` or `the forward derivative of `f` (function `f.fwd.dual`)`.
fn function_phrase(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    described: &[(String, String)],
) -> fmt::Result {
    match described.iter().find(|(n, _)| n == name) {
        Some((_, what)) => write!(f, "{what} (function `{name}`)"),
        None => write!(f, "function `{name}`"),
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("in ")?;
        // The location follows the innermost function named: the code comes
        // from its source.
        let mut loc = self.loc.as_ref();
        let mut at = |f: &mut fmt::Formatter<'_>| match loc.take() {
            Some(l) if matches!(self.kind, TrapKind::CallDepthExceeded { .. }) => {
                write!(f, " (called at {l})")
            }
            Some(l) => write!(f, " at {l}"),
            None => Ok(()),
        };
        for name in &self.inlined {
            function_phrase(f, name, self.descriptions())?;
            at(f)?;
            f.write_str(", inlined into ")?;
        }
        function_phrase(f, &self.func, self.descriptions())?;
        at(f)?;
        write!(f, ": {}", self.kind)
    }
}

impl std::error::Error for RunError {}

impl RunError {
    /// A `kind` error in `func`, with no inlined code, descriptions or
    /// location.
    pub fn new(func: impl Into<String>, kind: TrapKind) -> RunError {
        RunError {
            func: func.into(),
            kind,
            inlined: Vec::new(),
            described: None,
            loc: None,
        }
    }

    /// The same error, at `loc` in the source.
    pub fn with_loc(mut self, loc: Option<Location>) -> RunError {
        self.loc = loc.map(Box::new);
        self
    }

    /// The same error, raised by code inlined from `inlined` (innermost
    /// first).
    pub fn with_inlined(mut self, inlined: Vec<String>) -> RunError {
        self.inlined = inlined;
        self
    }

    /// `(raw name, description)` of the generated functions it names, as
    /// [`RunError::describe_in`] found them.
    pub fn descriptions(&self) -> &[(String, String)] {
        self.described.as_deref().map_or(&[], Vec::as_slice)
    }

    /// The same error, with what the generated functions it names are
    /// (their derivation records in `module`, the module that ran), so that
    /// the message says "in the forward derivative of `f` (function
    /// `f.fwd.dual`)" rather than only the raw name.
    pub fn describe_in(mut self, module: &Module) -> RunError {
        let names = std::iter::once(&self.func).chain(&self.inlined);
        let mut described = Vec::new();
        for name in names {
            let what = module.get(name).and_then(|id| module.describe_function(id));
            if let Some(what) = what {
                if !described.iter().any(|(n, _): &(String, String)| n == name) {
                    described.push((name.clone(), what));
                }
            }
        }
        self.described = (!described.is_empty()).then(|| Box::new(described));
        self
    }
}

impl TrapKind {
    /// The same fault without the names of arrays, which inlining changes
    /// (a callee's parameter `a` is the caller's `x` once inlined): what
    /// must not depend on the inline setting, with the fault's location.
    pub fn without_names(&self) -> TrapKind {
        let mut k = self.clone();
        match &mut k {
            TrapKind::IndexOutOfBounds { array, .. }
            | TrapKind::SliceEndOutOfBounds { array, .. }
            | TrapKind::SliceStartOutOfBounds { array, .. } => array.clear(),
            TrapKind::OverlappingArrays { first, second } => {
                first.clear();
                second.clear();
            }
            TrapKind::ShadowLengthMismatch { array, shadow } => {
                array.clear();
                shadow.clear();
            }
            _ => {}
        }
        k
    }

    /// Is this fault raised by one instruction of the function's body (a
    /// bounds check, a division, a `zeros` — its length or its memory — a
    /// `samelen`)? Only those name the inlined code they come from and the
    /// instruction's source location; a call-depth fault is raised on entry
    /// (its location is the call's), a tape mismatch reported once per
    /// function, and argument or unsupported-code errors are not faults of
    /// an instruction. Both executors follow this, so their errors stay
    /// equal.
    pub fn is_at_instruction(&self) -> bool {
        matches!(
            self,
            TrapKind::IndexOutOfBounds { .. }
                | TrapKind::SliceEndOutOfBounds { .. }
                | TrapKind::SliceStartOutOfBounds { .. }
                | TrapKind::OverlappingArrays { .. }
                | TrapKind::DivisionByZero
                | TrapKind::DivisionOverflow
                | TrapKind::ShiftOutOfRange { .. }
                | TrapKind::ConversionOutOfRange { .. }
                | TrapKind::BadArrayLength { .. }
                | TrapKind::OutOfMemory { .. }
                | TrapKind::ShadowLengthMismatch { .. }
        )
    }
}

/// Checks the arguments of an outermost call against `sig`.
pub fn check_args(func: &str, sig: &Signature, args: &[Val]) -> Result<(), RunError> {
    if args.len() != sig.params.len() {
        return Err(RunError::new(
            func,
            TrapKind::BadArguments(format!(
                "expected {} argument(s), got {}",
                sig.params.len(),
                args.len()
            )),
        ));
    }
    for (p, a) in sig.params.iter().zip(args) {
        if p.ty != a.ty() {
            return Err(RunError::new(
                func,
                TrapKind::BadArguments(format!(
                    "argument `{}` must be {}, got {}",
                    p.name,
                    p.ty.a(),
                    a.ty().a()
                )),
            ));
        }
    }
    Ok(())
}
