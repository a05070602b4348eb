//! Opcodes and instruction formats.
//!
//! [`crate::for_each_opcode!`] is the one table of what each operation is: one row
//! per opcode with its text-format name, its instruction format, its operand
//! and result types, its effects, its cost class, and — for the language's
//! math functions — its name in the language and the symbol of the
//! out-of-line routine the JIT calls. Everything else asks [`Opcode`]: the
//! parser and the printer ([`Opcode::name`]), the verifier
//! ([`Opcode::format`], [`Opcode::fixed_signature`]), the optimizer
//! ([`Opcode::effects`], [`Opcode::cost`]), the front end
//! ([`Opcode::intrinsic`]) and the JIT ([`Opcode::libcall`], and its
//! wrappers, generated from the same rows). What a row cannot say without
//! this crate knowing the passes stays beside its users, one entry per
//! opcode: the meaning in [`crate::semantics`], the derivative in adze-ad's
//! `partials.rs`, the Cranelift lowering of the opcodes without a libcall in
//! adze-jit's `codegen/insts.rs`.
//!
//! [`InstData`] is the storage format of an instruction; several opcodes share
//! a format (`Unary`, `Binary`, ...), as in Cranelift.

use crate::entities::{Block, FuncId, Value};
use crate::types::Type;
use std::fmt;

/// The opcode table. Calls the macro `$m` with every row, in table order, so
/// that the facts of an opcode are written once and every list of opcodes is
/// derived from them (as wasmparser's `for_each_operator!`).
///
/// A row, with `-` for "none":
///
/// ```text
/// Variant = "name", Format, [operand types] -> result, [effects], cost, "language name", libcall;
/// ```
///
/// - **format**: the [`InstData`] variant that stores it ([`InstFormat`]).
/// - **operands -> result**: the fixed types ([`Opcode::fixed_signature`]);
///   `[] -> poly` for the opcodes whose types the verifier checks case by
///   case, `-> none` for no result.
/// - **effects**: some of `read write trap control` ([`Effects`]); `[]` is a
///   pure computation.
/// - **cost**: `Cheap`, `Slow` or `Libm` ([`Cost`]) for the computations;
///   `-` for memory, tape and control.
/// - **language name**: the opcode is an f64 intrinsic of the language,
///   called so in `.adz` source ([`Opcode::intrinsic`]).
/// - **libcall**: the JIT calls this `extern "C"` symbol, a wrapper of
///   [`crate::semantics`], instead of emitting a Cranelift instruction
///   ([`Opcode::libcall`]); the wrapper has the same name.
///
/// Adding an intrinsic: see "How to add an intrinsic" in `ARCHITECTURE.md`.
#[macro_export]
macro_rules! for_each_opcode {
    ($m:ident) => {
        $m! {
//          variant    name          format    operands              result  effects                    cost   language  libcall
            /// `v = fconst 1.5`: the f64 constant of the immediate, stored as
            /// its IEEE bits (so `-0.0` stays distinct from `0.0`).
            Fconst   = "fconst",     FConst,   []                 -> poly,   [],                        Cheap, -,        -;
            /// `v = iconst 3`: the i64 constant of the immediate.
            Iconst   = "iconst",     IConst,   []                 -> poly,   [],                        Cheap, -,        -;
            /// `v = bconst true`: the bool constant of the immediate.
            Bconst   = "bconst",     BConst,   []                 -> poly,   [],                        Cheap, -,        -;

            /// `a + b`, IEEE 754, correctly rounded.
            Fadd     = "fadd",       Binary,   [F64, F64]         -> F64,    [],                        Cheap, -,        -;
            /// `a - b`, IEEE 754, correctly rounded.
            Fsub     = "fsub",       Binary,   [F64, F64]         -> F64,    [],                        Cheap, -,        -;
            /// `a * b`, IEEE 754, correctly rounded.
            Fmul     = "fmul",       Binary,   [F64, F64]         -> F64,    [],                        Cheap, -,        -;
            /// `a / b`, IEEE 754, correctly rounded (`x / 0` is ±inf or NaN,
            /// never a trap).
            Fdiv     = "fdiv",       Binary,   [F64, F64]         -> F64,    [],                        Slow,  -,        -;
            /// `-a`: flips the sign bit (`-0.0` for `0.0`).
            Fneg     = "fneg",       Unary,    [F64]              -> F64,    [],                        Cheap, -,        -;
            /// `x ^ n` for an integer literal `n`: exact binary powering (see
            /// [`crate::semantics::powi`]); the exponent is an immediate.
            Powi     = "powi",       Powi,     [F64]              -> F64,    [],                        Cheap, -,        -;

            /// `a + b`, wrapping i64 arithmetic.
            Iadd     = "iadd",       Binary,   [I64, I64]         -> I64,    [],                        Cheap, -,        -;
            /// `a - b`, wrapping.
            Isub     = "isub",       Binary,   [I64, I64]         -> I64,    [],                        Cheap, -,        -;
            /// `a * b`, wrapping.
            Imul     = "imul",       Binary,   [I64, I64]         -> I64,    [],                        Cheap, -,        -;
            /// Truncating division; division by zero and `i64::MIN / -1` trap.
            /// `Cheap`: the optimizer merges it only when the divisor is a
            /// constant (otherwise it may trap), which Cranelift turns into a
            /// multiplication.
            Idiv     = "idiv",       Binary,   [I64, I64]         -> I64,    [trap],                    Cheap, -,        -;
            /// Remainder with the sign of the dividend; `x % 0` traps, `i64::MIN % -1` traps.
            /// `Cheap` as `idiv`.
            Irem     = "irem",       Binary,   [I64, I64]         -> I64,    [trap],                    Cheap, -,        -;
            /// `-a`, wrapping (`-i64::MIN` is `i64::MIN`).
            Ineg     = "ineg",       Unary,    [I64]              -> I64,    [],                        Cheap, -,        -;
            /// `a & b`, bitwise and.
            Band     = "band",       Binary,   [I64, I64]         -> I64,    [],                        Cheap, -,        -;
            /// `a | b`, bitwise or.
            Bor      = "bor",        Binary,   [I64, I64]         -> I64,    [],                        Cheap, -,        -;
            /// `a << b`, shift left (bits shifted out are lost); traps with
            /// `ShiftOutOfRange` unless `0 <= b <= 63`.
            Ishl     = "ishl",       Binary,   [I64, I64]         -> I64,    [trap],                    Cheap, -,        -;
            /// `a >> b`, arithmetic shift right (copies of the sign bit come
            /// in); traps with `ShiftOutOfRange` unless `0 <= b <= 63`.
            Sshr     = "sshr",       Binary,   [I64, I64]         -> I64,    [trap],                    Cheap, -,        -;

            /// Logical negation of a bool.
            Not      = "not",        Unary,    [Bool]             -> Bool,   [],                        Cheap, -,        -;
            /// i64 to f64, rounding to nearest.
            Sitof    = "sitof",      Unary,    [I64]              -> F64,    [],                        Cheap, -,        -;
            /// f64 to i64, truncating toward zero; traps with
            /// `ConversionOutOfRange` for NaN and for values outside what an
            /// i64 holds (after truncation).
            Ftosi    = "ftosi",      Unary,    [F64]              -> I64,    [trap],                    Cheap, -,        -;
            /// The bits of an f64, as an i64 (no conversion). Not in the language:
            /// reverse mode keeps the trip counts of loops in the slots of an f64
            /// array, as bits.
            Tobits   = "tobits",     Unary,    [F64]              -> I64,    [],                        Cheap, -,        -;
            /// The f64 with these bits (no conversion); see `tobits`.
            Frombits = "frombits",   Unary,    [I64]              -> F64,    [],                        Cheap, -,        -;

            /// Sine, `x` in radians (Rust's `f64::sin`).
            Sin      = "sin",        Unary,    [F64]              -> F64,    [],                        Libm,  "sin",    adze_sin;
            /// Cosine, `x` in radians.
            Cos      = "cos",        Unary,    [F64]              -> F64,    [],                        Libm,  "cos",    adze_cos;
            /// Tangent, `x` in radians.
            Tan      = "tan",        Unary,    [F64]              -> F64,    [],                        Libm,  "tan",    adze_tan;
            /// Arcsine, in radians in `[-pi/2, pi/2]`; NaN outside `[-1, 1]`.
            Asin     = "asin",       Unary,    [F64]              -> F64,    [],                        Libm,  "asin",   adze_asin;
            /// Arccosine, in radians in `[0, pi]`; NaN outside `[-1, 1]`.
            Acos     = "acos",       Unary,    [F64]              -> F64,    [],                        Libm,  "acos",   adze_acos;
            /// Arctangent, in radians in `[-pi/2, pi/2]`.
            Atan     = "atan",       Unary,    [F64]              -> F64,    [],                        Libm,  "atan",   adze_atan;
            /// Hyperbolic sine.
            Sinh     = "sinh",       Unary,    [F64]              -> F64,    [],                        Libm,  "sinh",   adze_sinh;
            /// Hyperbolic cosine.
            Cosh     = "cosh",       Unary,    [F64]              -> F64,    [],                        Libm,  "cosh",   adze_cosh;
            /// Hyperbolic tangent.
            Tanh     = "tanh",       Unary,    [F64]              -> F64,    [],                        Libm,  "tanh",   adze_tanh;
            /// `e^x`.
            Exp      = "exp",        Unary,    [F64]              -> F64,    [],                        Libm,  "exp",    adze_exp;
            /// `e^x - 1`, accurate near 0.
            Expm1    = "expm1",      Unary,    [F64]              -> F64,    [],                        Libm,  "expm1",  adze_expm1;
            /// Natural logarithm: -inf at ±0, NaN below 0.
            Log      = "log",        Unary,    [F64]              -> F64,    [],                        Libm,  "log",    adze_log;
            /// `ln(1 + x)`, accurate near 0: -inf at -1, NaN below -1.
            Log1p    = "log1p",      Unary,    [F64]              -> F64,    [],                        Libm,  "log1p",  adze_log1p;
            /// Square root, correctly rounded: `-0.0` at `-0.0`, NaN below 0.
            Sqrt     = "sqrt",       Unary,    [F64]              -> F64,    [],                        Slow,  "sqrt",   -;
            /// Cube root (negative for negative `x`).
            Cbrt     = "cbrt",       Unary,    [F64]              -> F64,    [],                        Libm,  "cbrt",   adze_cbrt;
            /// Absolute value: clears the sign bit.
            Abs      = "abs",        Unary,    [F64]              -> F64,    [],                        Cheap, "abs",    -;
            /// Rounds toward -inf.
            Floor    = "floor",      Unary,    [F64]              -> F64,    [],                        Cheap, "floor",  -;
            /// Rounds toward +inf.
            Ceil     = "ceil",       Unary,    [F64]              -> F64,    [],                        Cheap, "ceil",   -;
            /// Rounds half away from zero.
            Round    = "round",      Unary,    [F64]              -> F64,    [],                        Cheap, "round",  adze_round;
            /// -1, 0 or 1 (zero keeps its sign; NaN stays NaN).
            Sign     = "sign",       Unary,    [F64]              -> F64,    [],                        Cheap, "sign",   adze_sign;
            /// The error function, `2/sqrt(pi) · ∫₀ˣ exp(-t²) dt`.
            Erf      = "erf",        Unary,    [F64]              -> F64,    [],                        Libm,  "erf",    adze_erf;
            /// The complementary error function `1 - erf(x)`, accurate where
            /// `erf(x)` is near 1.
            Erfc     = "erfc",       Unary,    [F64]              -> F64,    [],                        Libm,  "erfc",   adze_erfc;
            /// Base-2 logarithm: -inf at ±0, NaN below 0.
            Log2     = "log2",       Unary,    [F64]              -> F64,    [],                        Libm,  "log2",   adze_log2;
            /// Base-10 logarithm: -inf at ±0, NaN below 0.
            Log10    = "log10",      Unary,    [F64]              -> F64,    [],                        Libm,  "log10",  adze_log10;
            /// `2^x`.
            Exp2     = "exp2",       Unary,    [F64]              -> F64,    [],                        Libm,  "exp2",   adze_exp2;
            /// Inverse hyperbolic sine.
            Asinh    = "asinh",      Unary,    [F64]              -> F64,    [],                        Libm,  "asinh",  adze_asinh;
            /// Inverse hyperbolic cosine: NaN below 1.
            Acosh    = "acosh",      Unary,    [F64]              -> F64,    [],                        Libm,  "acosh",  adze_acosh;
            /// Inverse hyperbolic tangent: ±inf at ±1, NaN outside `[-1, 1]`.
            Atanh    = "atanh",      Unary,    [F64]              -> F64,    [],                        Libm,  "atanh",  adze_atanh;
            /// `ln |Γ(x)|`: +inf at the poles `0, -1, -2, ..`.
            Lgamma   = "lgamma",     Unary,    [F64]              -> F64,    [],                        Libm,  "lgamma", adze_lgamma;
            /// The digamma function `ψ(x) = Γ'(x)/Γ(x)`, the derivative of
            /// `lgamma`; `polygamma 0, x` bit for bit.
            Digamma  = "digamma",    Unary,    [F64]              -> F64,    [],                        Libm,  "digamma", adze_digamma;
            /// `atan2(y, x)`: the angle of the point `(x, y)`, in radians in
            /// `[-pi, pi]`; the first operand is `y`.
            Atan2    = "atan2",      Binary,   [F64, F64]         -> F64,    [],                        Libm,  "atan2",  adze_atan2;
            /// `a ^ b` for any f64 exponent (Rust's `f64::powf`).
            Pow      = "pow",        Binary,   [F64, F64]         -> F64,    [],                        Libm,  "pow",    adze_pow;
            /// `sqrt(a² + b²)` without intermediate overflow or underflow.
            Hypot    = "hypot",      Binary,   [F64, F64]         -> F64,    [],                        Libm,  "hypot",  adze_hypot;
            /// `polygamma n, x`: the `n`-th derivative of digamma, `ψ⁽ⁿ⁾(x)`,
            /// for an order `n` in `0, 1, .., 100` given as an f64 (NaN for
            /// any other `n`); see [`crate::semantics::polygamma`].
            Polygamma = "polygamma", Binary,   [F64, F64]         -> F64,    [],                        Libm,  "polygamma", adze_polygamma;
            /// IEEE 754-2019 `minimum`: NaN if either operand is NaN, -0 < +0.
            Min      = "min",        Binary,   [F64, F64]         -> F64,    [],                        Cheap, "min",    -;
            /// IEEE 754-2019 `maximum`: NaN if either operand is NaN, -0 < +0.
            Max      = "max",        Binary,   [F64, F64]         -> F64,    [],                        Cheap, "max",    -;

            /// Two lanes (`f64x2`, made only by the optimizer's `vectorize`):
            /// each `v*` computation is its scalar opcode on each lane
            /// ([`Opcode::lane_op`]), bit for bit.
            /// `v = vsplat x`: `x` in both lanes.
            Vsplat   = "vsplat",     Unary,    [F64]              -> F64x2,  [],                        Cheap, -,        -;
            /// `v = vpack a, b`: `a` in lane 0, `b` in lane 1.
            Vpack    = "vpack",      Binary,   [F64, F64]         -> F64x2,  [],                        Cheap, -,        -;
            /// `v = vshift a, b`: lane 1 of `a` in lane 0, lane 0 of `b` in
            /// lane 1: two neighbouring iterations' values, one lane along
            /// (a count-down loop's element carried to the next iteration).
            Vshift   = "vshift",     Binary,   [F64x2, F64x2]     -> F64x2,  [],                        Cheap, -,        -;
            /// `x = vlane0 v`: lane 0 of `v`.
            Vlane0   = "vlane0",     Unary,    [F64x2]            -> F64,    [],                        Cheap, -,        -;
            /// `x = vlane1 v`: lane 1 of `v`.
            Vlane1   = "vlane1",     Unary,    [F64x2]            -> F64,    [],                        Cheap, -,        -;
            /// `fadd` on each lane.
            Vfadd    = "vfadd",      Binary,   [F64x2, F64x2]     -> F64x2,  [],                        Cheap, -,        -;
            /// `fsub` on each lane.
            Vfsub    = "vfsub",      Binary,   [F64x2, F64x2]     -> F64x2,  [],                        Cheap, -,        -;
            /// `fmul` on each lane.
            Vfmul    = "vfmul",      Binary,   [F64x2, F64x2]     -> F64x2,  [],                        Cheap, -,        -;
            /// `fdiv` on each lane.
            Vfdiv    = "vfdiv",      Binary,   [F64x2, F64x2]     -> F64x2,  [],                        Slow,  -,        -;
            /// `fneg` on each lane.
            Vfneg    = "vfneg",      Unary,    [F64x2]            -> F64x2,  [],                        Cheap, -,        -;
            /// `powi` on each lane (the same exact binary powering).
            Vpowi    = "vpowi",      Powi,     [F64x2]            -> F64x2,  [],                        Cheap, -,        -;
            /// `sqrt` on each lane.
            Vsqrt    = "vsqrt",      Unary,    [F64x2]            -> F64x2,  [],                        Slow,  -,        -;
            /// `v = vload a, i`: elements `i` (lane 0) and `i + 1` (lane 1)
            /// of `a`; traps as `load a, i`, then as `load a, i + 1`.
            Vload    = "vload",      Binary,   [Array, I64]       -> F64x2,  [read trap],               -,     -,        -;
            /// `c = apart a, b`: whether the f64 arrays (views) `a` and `b`
            /// share no element (what `disjoint` checks, as a value): the
            /// guard of a two-lane loop that writes one and reads the
            /// other. An empty view shares nothing.
            Apart    = "apart",      Binary,   [Array, Array]     -> Bool,   [],                        Cheap, -,        -;
            /// `vstore a, i, v`: sets elements `i` and `i + 1` of the
            /// writable array `a` to lanes 0 and 1 of `v`; traps as `store
            /// a, i`, then as `store a, i + 1`, before writing either.
            Vstore   = "vstore",     Ternary,  [Array, I64, F64x2] -> none,  [write trap],              -,     -,        -;

            /// Ordered comparison of f64 (false when either is NaN, except `ne`).
            Fcmp     = "fcmp",       Cmp,      [F64, F64]         -> Bool,   [],                        Cheap, -,        -;
            /// Signed comparison of i64.
            Icmp     = "icmp",       Cmp,      [I64, I64]         -> Bool,   [],                        Cheap, -,        -;
            /// `v = select c, a, b`: `a` if `c` else `b`; `a` and `b` share a scalar type.
            Select   = "select",     Ternary,  []                 -> poly,   [],                        Cheap, -,        -;

            /// Length of an array, as i64.
            Len      = "len",        Unary,    [Array]            -> I64,    [],                        Cheap, -,        -;
            /// `v = load a, i`: element `i` of `a`; traps with
            /// `IndexOutOfBounds` unless `0 <= i < len(a)`.
            Load     = "load",       Binary,   [Array, I64]       -> F64,    [read trap],               -,     -,        -;
            /// `store a, i, x`: sets element `i` of the writable array `a` to
            /// `x`; traps with `IndexOutOfBounds` unless `0 <= i < len(a)`.
            Store    = "store",      Ternary,  [Array, I64, F64]  -> none,   [write trap],              -,     -,        -;
            /// `v = zeros n, "name"`: a zero-filled local array, freed when the
            /// function returns. Traps with `BadArrayLength` unless `n` is in
            /// `0..=` the run's [`Limits::max_array_len`](crate::Limits::max_array_len)
            /// (by default `MAX_ARRAY_LEN`), and with `OutOfMemory` when the
            /// memory cannot be had.
            Zeros    = "zeros",      Zeros,    [I64]              -> Array,  [write trap],              -,     -,        -;
            /// `fill a, x`: sets every element of the writable array `a` to `x`.
            Fill     = "fill",       Binary,   [Array, F64]       -> none,   [write],                   -,     -,        -;
            /// Length of an i64 array, as i64.
            Ilen     = "ilen",       Unary,    [IArray]           -> I64,    [],                        Cheap, -,        -;
            /// `v = iload a, i`: element `i` of the i64 array `a`; traps as `load`.
            Iload    = "iload",      Binary,   [IArray, I64]      -> I64,    [read trap],               -,     -,        -;
            /// `istore a, i, x`: sets element `i` of the writable i64 array
            /// `a` to `x`; traps as `store`.
            Istore   = "istore",     Ternary,  [IArray, I64, I64] -> none,   [write trap],              -,     -,        -;
            /// `v = izeros n, "name"`: a zero-filled local i64 array; as `zeros`.
            Izeros   = "izeros",     Zeros,    [I64]              -> IArray, [write trap],              -,     -,        -;
            /// `ifill a, x`: sets every element of the writable i64 array `a` to `x`.
            Ifill    = "ifill",      Binary,   [IArray, I64]      -> none,   [write],                   -,     -,        -;
            /// `samelen a, da`: traps with `ShadowLengthMismatch` unless the array
            /// `a` and its shadow `da` have the same length. Derivatives check each
            /// `dup` pair on entry.
            SameLen  = "samelen",    Binary,   [Array, Array]     -> none,   [trap],                    -,     -,        -;
            /// `v = slice a, lo, hi`: the view of elements `lo..hi` of the array
            /// `a` (f64 or i64; `v` has `a`'s type), writable when `a` is. A
            /// view aliases its array: element `i` of `v` is element `lo + i`
            /// of `a`. Traps with `SliceOutOfBounds` unless
            /// `0 <= lo <= hi <= len(a)`.
            Slice    = "slice",      Ternary,  []                 -> poly,   [trap],                    -,     -,        -;
            /// `v = view a, lo, hi`: `slice` without its trap, for passes that
            /// make again a view whose `slice` succeeded (the shadow of a view
            /// in reverse mode, its tangent in forward mode, a view recomputed
            /// in an adjoint). Bounds outside `0 <= lo <= hi <= len(a)` (a view
            /// hoisted out of a loop that does not run) give an empty view.
            /// Pure, so the optimizer merges and hoists it.
            View     = "view",       Ternary,  []                 -> poly,   [],                        Cheap, -,        -;
            /// `disjoint a, b`: traps with `OverlappingArrays` when the views `a`
            /// and `b` (of one array type) share an element. A call that passes
            /// a `mut` view beside another view of the same array checks the
            /// pair first, unless the front end proved them apart.
            Disjoint = "disjoint",   Binary,   []                 -> poly,   [trap],                    -,     -,        -;

            /// `push T, v`: pushes a scalar onto tape number `T`, one of
            /// [`MAX_TAPES`] last-in-first-out stacks that live for one outermost
            /// call. Reverse mode records values here in the forward sweep and reads
            /// them back in the reverse sweep; nested derivatives use distinct tapes
            /// so that their records never interleave. Traps with
            /// `TapeOutOfMemory` when the tape cannot grow.
            Push     = "push",       Push,     []                 -> poly,   [write trap],              -,     -,        -;
            /// `v = pop T, f64`: pops the value pushed last on tape `T`; its type is
            /// an immediate and must be the type that was pushed. Popping an empty
            /// tape, or a value of another type, traps with `TapeMismatch`.
            /// `v = pop T, f64 varies(a, b)`: the same, and the value popped varies
            /// (for forward activity) only as `a` or `b` do (reverse mode's adjoints
            /// say so of the values their augmented primal pushed; `varies()`: a
            /// constant). The operands are read by no engine.
            Pop      = "pop",        Pop,      []                 -> poly,   [read write trap],         -,     -,        -;
            /// `m = tapelen T`: the number of entries on tape `T`, a mark for
            /// `tapecut` and `tapeover` (checkpointed loops, docs/ad-reverse.md).
            Tapelen  = "tapelen",    Tape,     []                 -> I64,    [read],                    -,     -,        -;
            /// `tapecut T, m`: drops the entries pushed on tape `T` since it
            /// held `m` (a `tapelen`). Traps with `TapeMismatch` unless
            /// `0 <= m <=` its length.
            Tapecut  = "tapecut",    Tape,     [I64]              -> none,   [read write trap],         -,     -,        -;
            /// `c = tapeover T, m`: whether tape `T` holds at least the run's
            /// checkpoint segment ([`Limits::segment_entries`](crate::Limits::segment_entries))
            /// more entries than the mark `m`: a checkpointed loop cuts its
            /// segment there.
            Tapeover = "tapeover",   Tape,     [I64]              -> Bool,   [read],                    -,     -,        -;
            /// `checkpoint n`: asks reverse mode to checkpoint the loop that
            /// the jump ending this block enters (`#[checkpoint]` in the
            /// language): segments of `n` iterations when `n > 0`, else of the
            /// run's segment size ([`Limits::segment_entries`](crate::Limits::segment_entries)).
            /// A hint, not an effect: executors do nothing, and the optimizer
            /// (which runs after AD) removes it. docs/ad-reverse.md, "Checkpointing".
            Checkpoint = "checkpoint", Unary,  [I64]              -> none,   [],                        Cheap, -,        -;

            /// `v1, v2 = call @f(args..)`: runs `@f` on the arguments and gives its
            /// results. Traps with `CallDepthExceeded` when the call would pass
            /// the call-depth limit, and with whatever `@f` traps with.
            Call     = "call",       Call,     []                 -> poly,   [read write trap control], -,     -,        -;
            /// `vs = autodiff forward dual @f(dual v1, v2, const v3)`: a derivative
            /// request, replaced by a call to a derivative function by the AD passes.
            /// Executors refuse to run one left unlowered (the interpreter traps
            /// with `Unsupported`, the JIT refuses to compile it).
            Autodiff = "autodiff",   Autodiff, []                 -> poly,   [read write trap control], -,     -,        -;

            /// `jump block1(args..)`: continues at `block1`, whose parameters
            /// take the arguments.
            Jump     = "jump",       Jump,     []                 -> poly,   [control],                 -,     -,        -;
            /// `brif c, block1(args..), block2(args..)`: continues at `block1`
            /// if the bool `c` is true, else at `block2`, passing that
            /// destination's arguments.
            Brif     = "brif",       Brif,     []                 -> poly,   [control],                 -,     -,        -;
            /// `return args..`: ends the function with these results, which
            /// match the signature's.
            Return   = "return",     Return,   []                 -> poly,   [control],                 -,     -,        -;
        }
    };
}

/// Builds [`Opcode`] and its queries from the rows of [`for_each_opcode!`].
macro_rules! define_opcodes {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $name:literal, $format:ident,
            [$($arg:ident),*] -> $res:ident, [$($effect:ident)*],
            $cost:tt, $lang:tt, $libcall:tt;
    )*) => {
        /// Every operation of the IR.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Opcode {
            $( $(#[$doc])* $variant, )*
        }

        impl Opcode {
            /// All opcodes, in table order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant),*];

            /// The text-format mnemonic.
            pub fn name(self) -> &'static str {
                match self { $(Opcode::$variant => $name,)* }
            }

            /// The instruction format that stores this opcode.
            pub fn format(self) -> InstFormat {
                match self { $(Opcode::$variant => InstFormat::$format,)* }
            }

            /// Operand and result types for opcodes whose types are fixed.
            /// `None` for the polymorphic or variadic ones (constants carry an
            /// immediate; `select`, `call`, `autodiff` and terminators are
            /// checked by the verifier case by case).
            pub fn fixed_signature(self) -> Option<(&'static [Type], Option<Type>)> {
                match self {
                    $(Opcode::$variant => define_opcodes!(@sig [$($arg),*] $res),)*
                }
            }

            /// What the instruction does besides computing its results.
            pub fn effects(self) -> Effects {
                match self {
                    $(Opcode::$variant => Effects::PURE $(.$effect())*,)*
                }
            }

            /// The cost class of a computation; `None` for memory, tape and
            /// control opcodes.
            pub fn cost(self) -> Option<Cost> {
                match self {
                    $(Opcode::$variant => define_opcodes!(@cost $cost),)*
                }
            }

            /// The name of this opcode in the language when it is one of its
            /// f64 intrinsics (`sin`, `pow`, ...).
            pub fn intrinsic_name(self) -> Option<&'static str> {
                match self {
                    $(Opcode::$variant => define_opcodes!(@opt $lang),)*
                }
            }

            /// The `extern "C"` symbol the JIT calls for this opcode, if it
            /// is computed out of line (`adze_exp`); the JIT's wrapper of
            /// [`crate::semantics`] of that name is generated from the same
            /// row.
            pub fn libcall(self) -> Option<&'static str> {
                match self {
                    $(Opcode::$variant => define_opcodes!(@libcall $libcall),)*
                }
            }
        }
    };
    (@sig [] poly) => { None };
    (@sig [$($arg:ident),*] none) => { Some((&[$(Type::$arg),*], None)) };
    (@sig [$($arg:ident),*] $res:ident) => { Some((&[$(Type::$arg),*], Some(Type::$res))) };
    (@cost -) => { None };
    (@cost $cost:ident) => { Some(Cost::$cost) };
    (@opt -) => { None };
    (@opt $x:literal) => { Some($x) };
    (@libcall -) => { None };
    (@libcall $sym:ident) => { Some(stringify!($sym)) };
}

for_each_opcode!(define_opcodes);

/// The [`InstData`] variant that stores an opcode.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum InstFormat {
    /// [`InstData::FConst`]: `fconst`.
    FConst,
    /// [`InstData::IConst`]: `iconst`.
    IConst,
    /// [`InstData::BConst`]: `bconst`.
    BConst,
    /// [`InstData::Unary`]: one operand.
    Unary,
    /// [`InstData::Binary`]: two operands.
    Binary,
    /// [`InstData::Ternary`]: three operands.
    Ternary,
    /// [`InstData::Powi`]: `powi`.
    Powi,
    /// [`InstData::Cmp`]: `fcmp`, `icmp`.
    Cmp,
    /// [`InstData::Zeros`]: `zeros`.
    Zeros,
    /// [`InstData::Push`]: `push`.
    Push,
    /// [`InstData::Pop`]: `pop`.
    Pop,
    /// [`InstData::Tape`]: `tapelen`, `tapecut`, `tapeover`.
    Tape,
    /// [`InstData::Call`]: `call`.
    Call,
    /// [`InstData::Autodiff`]: `autodiff`.
    Autodiff,
    /// [`InstData::Jump`]: `jump`.
    Jump,
    /// [`InstData::Brif`]: `brif`.
    Brif,
    /// [`InstData::Return`]: `return`.
    Return,
}

/// What an instruction does besides computing its results from its
/// operands. An instruction with none of these is a pure computation: it may
/// be removed when unused, merged with an identical one, or computed earlier.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Effects {
    /// Reads memory: array elements or a tape.
    pub reads: bool,
    /// Writes memory (array elements or a tape) or allocates.
    pub writes: bool,
    /// May stop the run with a run-time error.
    pub may_trap: bool,
    /// Transfers control: terminators, calls and derivative requests (which
    /// may do anything their callee does).
    pub control: bool,
}

impl Effects {
    /// No effect.
    pub const PURE: Effects = Effects {
        reads: false,
        writes: false,
        may_trap: false,
        control: false,
    };

    /// Is this no effect at all?
    pub fn is_pure(self) -> bool {
        self == Effects::PURE
    }

    // The words of the table's effects column.
    const fn read(self) -> Effects {
        Effects {
            reads: true,
            ..self
        }
    }
    const fn write(self) -> Effects {
        Effects {
            writes: true,
            ..self
        }
    }
    const fn trap(self) -> Effects {
        Effects {
            may_trap: true,
            ..self
        }
    }
    const fn control(self) -> Effects {
        Effects {
            control: true,
            ..self
        }
    }
}

/// How much a computation costs, as the optimizer weighs it against keeping
/// a value live (GVN merges across blocks only what is not `Cheap`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cost {
    /// A few cycles: integer and f64 `+ - *`, comparisons, conversions,
    /// `abs floor ceil round sign min max`, constants.
    Cheap,
    /// One long-latency instruction: `fdiv`, `sqrt`.
    Slow,
    /// A math-library routine (`exp`, `sin`, `pow`, ...): tens to hundreds
    /// of cycles, and a call that clobbers every register.
    Libm,
}

impl Opcode {
    /// Parses a text-format mnemonic.
    pub fn from_name(name: &str) -> Option<Opcode> {
        Opcode::ALL.iter().copied().find(|op| op.name() == name)
    }

    /// Does this opcode end a block?
    pub fn is_terminator(self) -> bool {
        matches!(
            self.format(),
            InstFormat::Jump | InstFormat::Brif | InstFormat::Return
        )
    }

    /// Is this one of the language's math intrinsics (`sin`, `pow`, ...)?
    pub fn is_intrinsic(self) -> bool {
        self.intrinsic_name().is_some()
    }

    /// The intrinsic of this language name, if any (`"sin"` -> `Sin`).
    pub fn intrinsic(name: &str) -> Option<Opcode> {
        Opcode::ALL
            .iter()
            .copied()
            .find(|op| op.intrinsic_name() == Some(name))
    }

    /// The scalar opcode a two-lane computation runs on each lane
    /// (`vfadd` -> `fadd`); `None` for every other opcode.
    pub fn lane_op(self) -> Option<Opcode> {
        Some(match self {
            Opcode::Vfadd => Opcode::Fadd,
            Opcode::Vfsub => Opcode::Fsub,
            Opcode::Vfmul => Opcode::Fmul,
            Opcode::Vfdiv => Opcode::Fdiv,
            Opcode::Vfneg => Opcode::Fneg,
            Opcode::Vpowi => Opcode::Powi,
            Opcode::Vsqrt => Opcode::Sqrt,
            _ => return None,
        })
    }

    /// The two-lane opcode of a scalar computation (`fadd` -> `vfadd`),
    /// the inverse of [`Opcode::lane_op`].
    pub fn two_lanes(self) -> Option<Opcode> {
        Opcode::ALL
            .iter()
            .copied()
            .find(|v| v.lane_op() == Some(self))
    }

    /// Does this opcode touch memory or control flow, or may it trap? Such
    /// instructions are never removed or reordered as pure computations.
    pub fn has_side_effects(self) -> bool {
        !self.effects().is_pure()
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many tapes (`push`/`pop` stacks) there are: tape numbers are
/// `0..MAX_TAPES`.
pub const MAX_TAPES: u8 = 16;

/// The condition of an `fcmp` or `icmp`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum CmpCond {
    /// `a == b`.
    Eq,
    /// `a != b` (true when either f64 is NaN).
    Ne,
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
}

impl CmpCond {
    /// Every condition, in declaration order.
    pub const ALL: [CmpCond; 6] = [
        CmpCond::Eq,
        CmpCond::Ne,
        CmpCond::Lt,
        CmpCond::Le,
        CmpCond::Gt,
        CmpCond::Ge,
    ];

    /// The text-format keyword (`eq`, `lt`, ...).
    pub fn name(self) -> &'static str {
        match self {
            CmpCond::Eq => "eq",
            CmpCond::Ne => "ne",
            CmpCond::Lt => "lt",
            CmpCond::Le => "le",
            CmpCond::Gt => "gt",
            CmpCond::Ge => "ge",
        }
    }

    /// Parses a text-format keyword; `None` if `s` is none of them.
    pub fn from_name(s: &str) -> Option<CmpCond> {
        CmpCond::ALL.into_iter().find(|c| c.name() == s)
    }
}

impl fmt::Display for CmpCond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A branch destination with its block arguments.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BlockCall {
    /// The block branched to.
    pub block: Block,
    /// The values passed to its parameters, one per parameter, in order.
    pub args: Vec<Value>,
}

/// Derivative mode of an `autodiff` request or a custom rule.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Tangents propagated along with the values (`forward`).
    Forward,
    /// Adjoints propagated back from the results (`reverse`).
    Reverse,
}

impl Mode {
    /// The text-format keyword: `forward` or `reverse`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Forward => "forward",
            Mode::Reverse => "reverse",
        }
    }

    /// Parses `forward` or `reverse`; `None` otherwise.
    pub fn from_name(s: &str) -> Option<Mode> {
        match s {
            "forward" => Some(Mode::Forward),
            "reverse" => Some(Mode::Reverse),
            _ => None,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How an `autodiff` request treats the callee's result.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum RetActivity {
    /// Forward: return the primal results followed by their tangents.
    Dual,
    /// Reverse: seed the result's cotangent with 1.0.
    Active,
    /// Forward: return nothing. Reverse: seed nothing.
    Const,
    /// Reverse: the cotangents are given, one per differentiable result
    /// (an `f64` for an `f64` result, an `arr` for an `arr` result), as
    /// the request's last values (`autodiff reverse dup(v1, v2) @f(..)`):
    /// how a function with array results is differentiated.
    Dup,
}

impl RetActivity {
    /// The text-format keyword: `dual`, `active` or `const`.
    pub fn name(self) -> &'static str {
        match self {
            RetActivity::Dual => "dual",
            RetActivity::Active => "active",
            RetActivity::Const => "const",
            RetActivity::Dup => "dup",
        }
    }

    /// Parses `dual`, `active` or `const`; `None` otherwise.
    pub fn from_name(s: &str) -> Option<RetActivity> {
        match s {
            "dual" => Some(RetActivity::Dual),
            "active" => Some(RetActivity::Active),
            "const" => Some(RetActivity::Const),
            "dup" => Some(RetActivity::Dup),
            _ => None,
        }
    }
}

/// How an `autodiff` request treats one argument of the callee.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ArgActivity {
    /// One value: the argument, not differentiated.
    Const,
    /// Forward, scalar: the value and its tangent.
    Dual,
    /// Reverse, scalar: the value; its adjoint is a result of the request.
    Active,
    /// Array: the array and its shadow (tangent or adjoint accumulator).
    Dup,
}

impl ArgActivity {
    /// The text-format keyword: `const`, `dual`, `active` or `dup`.
    pub fn name(self) -> &'static str {
        match self {
            ArgActivity::Const => "const",
            ArgActivity::Dual => "dual",
            ArgActivity::Active => "active",
            ArgActivity::Dup => "dup",
        }
    }

    /// Parses `const`, `dual`, `active` or `dup`; `None` otherwise.
    pub fn from_name(s: &str) -> Option<ArgActivity> {
        match s {
            "const" => Some(ArgActivity::Const),
            "dual" => Some(ArgActivity::Dual),
            "active" => Some(ArgActivity::Active),
            "dup" => Some(ArgActivity::Dup),
            _ => None,
        }
    }

    /// How many IR values this activity takes at width 1.
    pub fn arity(self) -> usize {
        self.arity_at(1)
    }

    /// How many IR values this activity takes in a request of `width`
    /// tangents (forward vector mode): the value, then `width` tangents or
    /// shadows for `dual` and `dup`.
    pub fn arity_at(self, width: usize) -> usize {
        match self {
            ArgActivity::Const | ArgActivity::Active => 1,
            ArgActivity::Dual | ArgActivity::Dup => 1 + width,
        }
    }
}

/// The static part of an `autodiff` instruction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AutodiffSpec {
    /// Forward or reverse.
    pub mode: Mode,
    /// The function to differentiate.
    pub func: FuncId,
    /// How the callee's results are treated (the modes allow different
    /// activities; see [`RetActivity`]).
    pub ret: RetActivity,
    /// One entry per parameter of `func`.
    pub args: Vec<ArgActivity>,
    /// Tangents per `dual` value and shadows per `dup` array: 1, or more
    /// in forward vector mode (`autodiff forward(N) ..`), where each `dual`
    /// and `dup` argument takes its value and then `width` lanes, and a
    /// `dual` return gives the results and then `width` tangents of each
    /// f64 result, result by result.
    pub width: usize,
}

/// Instruction storage. The variants are formats; each names its opcode where
/// several opcodes share it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum InstData {
    /// `fconst`, stored as IEEE bits so that instructions can be hashed.
    FConst {
        /// The constant's bits (`f64::to_bits`).
        bits: u64,
    },
    /// `iconst`.
    IConst {
        /// The constant.
        imm: i64,
    },
    /// `bconst`.
    BConst {
        /// The constant.
        imm: bool,
    },
    /// One operand: `fneg`, `ineg`, `not`, `sitof`, `len`, unary intrinsics.
    Unary {
        /// Which of them.
        op: Opcode,
        /// The operand.
        arg: Value,
    },
    /// Two operands: arithmetic, binary intrinsics, `load`, `fill`.
    Binary {
        /// Which of them.
        op: Opcode,
        /// The operands, in text order (`load a, i` is `[a, i]`).
        args: [Value; 2],
    },
    /// Three operands: `select`, `store`, `slice`, `view`.
    Ternary {
        /// Which of them.
        op: Opcode,
        /// The operands, in text order (`store a, i, x` is `[a, i, x]`).
        args: [Value; 3],
    },
    /// `powi arg, exp` (and `vpowi`, on two lanes).
    Powi {
        /// `powi` or `vpowi`.
        op: Opcode,
        /// The base, an f64 (an f64x2 for `vpowi`).
        arg: Value,
        /// The integer exponent, an immediate.
        exp: i32,
    },
    /// `fcmp` or `icmp`.
    Cmp {
        /// `fcmp` or `icmp`.
        op: Opcode,
        /// The condition tested.
        cond: CmpCond,
        /// The operands: `cond a, b` is `[a, b]`.
        args: [Value; 2],
    },
    /// `zeros n, "name"` or `izeros n, "name"`; the name is the array's
    /// source-level name, used in error messages.
    Zeros {
        /// `zeros` (an f64 array) or `izeros` (an i64 array).
        op: Opcode,
        /// The length, an i64 value.
        len: Value,
        /// The array's source-level name.
        name: String,
    },
    /// `push tape, v`
    Push {
        /// The tape number, below [`MAX_TAPES`].
        tape: u8,
        /// The scalar pushed.
        arg: Value,
    },
    /// `v = pop tape, ty`, `v = pop tape, ty varies(..)`
    Pop {
        /// The tape number, below [`MAX_TAPES`].
        tape: u8,
        /// The type of the value popped, which is the result's.
        ty: Type,
        /// The values the popped value varies with, for forward activity
        /// analysis: `None` when not known (it may vary with anything). An
        /// adjoint says so of each f64 value its augmented primal pushed, in
        /// terms of its own values, so that a forward derivative of it gives
        /// the popped value a tangent exactly when the pushed one had one,
        /// and the inliner, which maps operands, keeps it true. Engines do
        /// not read these operands.
        varies: Option<Vec<Value>>,
    },
    /// `tapelen T`, `tapecut T, m`, `tapeover T, m`.
    Tape {
        /// The opcode.
        op: Opcode,
        /// The tape number, below [`MAX_TAPES`].
        tape: u8,
        /// The mark, for `tapecut` and `tapeover`.
        arg: Option<Value>,
    },
    /// `call @f(args..)`.
    Call {
        /// The callee.
        func: FuncId,
        /// The arguments, one per callee parameter.
        args: Vec<Value>,
    },
    /// `autodiff mode ret @f(activities)`.
    Autodiff {
        /// The mode, the callee and the activities (boxed, which keeps
        /// `InstData` small).
        spec: Box<AutodiffSpec>,
        /// The values of every activity, flattened in order
        /// ([`ArgActivity::arity`] values per parameter).
        args: Vec<Value>,
    },
    /// `jump dest`.
    Jump {
        /// The destination and its arguments.
        dest: BlockCall,
    },
    /// `brif cond, then_dest, else_dest`.
    Brif {
        /// The bool condition.
        cond: Value,
        /// Where control goes when `cond` is true.
        then_dest: BlockCall,
        /// Where control goes when `cond` is false.
        else_dest: BlockCall,
    },
    /// `return args..`.
    Return {
        /// The returned values, one per result of the signature.
        args: Vec<Value>,
    },
}

impl InstData {
    /// An `fconst` of `x` (stored as its bits).
    pub fn fconst(x: f64) -> InstData {
        InstData::FConst { bits: x.to_bits() }
    }

    /// The format of this instruction: the variant, as an [`InstFormat`].
    pub fn format(&self) -> InstFormat {
        match self {
            InstData::FConst { .. } => InstFormat::FConst,
            InstData::IConst { .. } => InstFormat::IConst,
            InstData::BConst { .. } => InstFormat::BConst,
            InstData::Unary { .. } => InstFormat::Unary,
            InstData::Binary { .. } => InstFormat::Binary,
            InstData::Ternary { .. } => InstFormat::Ternary,
            InstData::Powi { .. } => InstFormat::Powi,
            InstData::Cmp { .. } => InstFormat::Cmp,
            InstData::Zeros { .. } => InstFormat::Zeros,
            InstData::Push { .. } => InstFormat::Push,
            InstData::Pop { .. } => InstFormat::Pop,
            InstData::Tape { .. } => InstFormat::Tape,
            InstData::Call { .. } => InstFormat::Call,
            InstData::Autodiff { .. } => InstFormat::Autodiff,
            InstData::Jump { .. } => InstFormat::Jump,
            InstData::Brif { .. } => InstFormat::Brif,
            InstData::Return { .. } => InstFormat::Return,
        }
    }

    /// The opcode: the format's only one, or the one stored in it.
    pub fn opcode(&self) -> Opcode {
        match self {
            InstData::FConst { .. } => Opcode::Fconst,
            InstData::IConst { .. } => Opcode::Iconst,
            InstData::BConst { .. } => Opcode::Bconst,
            InstData::Unary { op, .. }
            | InstData::Binary { op, .. }
            | InstData::Ternary { op, .. }
            | InstData::Cmp { op, .. }
            | InstData::Zeros { op, .. }
            | InstData::Tape { op, .. } => *op,
            InstData::Powi { op, .. } => *op,
            InstData::Push { .. } => Opcode::Push,
            InstData::Pop { .. } => Opcode::Pop,
            InstData::Call { .. } => Opcode::Call,
            InstData::Autodiff { .. } => Opcode::Autodiff,
            InstData::Jump { .. } => Opcode::Jump,
            InstData::Brif { .. } => Opcode::Brif,
            InstData::Return { .. } => Opcode::Return,
        }
    }

    /// The value operands, in order, excluding block-call arguments.
    pub fn args(&self) -> &[Value] {
        match self {
            InstData::FConst { .. }
            | InstData::IConst { .. }
            | InstData::BConst { .. }
            | InstData::Pop { varies: None, .. }
            | InstData::Jump { .. } => &[],
            InstData::Pop {
                varies: Some(vs), ..
            } => vs,
            InstData::Unary { arg, .. } | InstData::Powi { arg, .. } => std::slice::from_ref(arg),
            InstData::Binary { args, .. } | InstData::Cmp { args, .. } => args,
            InstData::Ternary { args, .. } => args,
            InstData::Zeros { len, .. } => std::slice::from_ref(len),
            InstData::Push { arg, .. } => std::slice::from_ref(arg),
            InstData::Tape { arg, .. } => arg.as_slice(),
            InstData::Brif { cond, .. } => std::slice::from_ref(cond),
            InstData::Call { args, .. }
            | InstData::Autodiff { args, .. }
            | InstData::Return { args } => args,
        }
    }

    /// Mutable access to the value operands (excluding block-call arguments).
    pub fn args_mut(&mut self) -> &mut [Value] {
        match self {
            InstData::FConst { .. }
            | InstData::IConst { .. }
            | InstData::BConst { .. }
            | InstData::Pop { varies: None, .. }
            | InstData::Jump { .. } => &mut [],
            InstData::Pop {
                varies: Some(vs), ..
            } => vs,
            InstData::Unary { arg, .. } | InstData::Powi { arg, .. } => std::slice::from_mut(arg),
            InstData::Binary { args, .. } | InstData::Cmp { args, .. } => args,
            InstData::Ternary { args, .. } => args,
            InstData::Zeros { len, .. } => std::slice::from_mut(len),
            InstData::Push { arg, .. } => std::slice::from_mut(arg),
            InstData::Tape { arg, .. } => arg.as_mut_slice(),
            InstData::Brif { cond, .. } => std::slice::from_mut(cond),
            InstData::Call { args, .. }
            | InstData::Autodiff { args, .. }
            | InstData::Return { args } => args,
        }
    }

    /// `(array, index)` when the instruction is a `load` or a `store`.
    pub fn array_access(&self) -> Option<(Value, Value)> {
        match self {
            InstData::Binary {
                op: Opcode::Load,
                args,
            } => Some((args[0], args[1])),
            InstData::Ternary {
                op: Opcode::Store,
                args,
            } => Some((args[0], args[1])),
            _ => None,
        }
    }

    /// Calls `f` on every value the instruction reads, block-call arguments
    /// included.
    pub fn for_each_use(&self, mut f: impl FnMut(Value)) {
        for &v in self.args() {
            f(v);
        }
        for dest in self.destinations() {
            for &v in &dest.args {
                f(v);
            }
        }
    }

    /// Rewrites every value the instruction reads, block-call arguments
    /// included.
    pub fn map_uses(&mut self, mut f: impl FnMut(Value) -> Value) {
        for v in self.args_mut() {
            *v = f(*v);
        }
        for dest in self.destinations_mut() {
            for v in &mut dest.args {
                *v = f(*v);
            }
        }
    }

    /// For a `store` or a `fill`: the array it writes and the f64 value
    /// it writes into it.
    pub fn array_write(&self) -> Option<(Value, Value)> {
        match *self {
            InstData::Ternary {
                op: Opcode::Store,
                args: [a, _, x],
            }
            | InstData::Binary {
                op: Opcode::Fill,
                args: [a, x],
            } => Some((a, x)),
            _ => None,
        }
    }

    /// Branch destinations as a small vector (0, 1 or 2 entries).
    pub fn destinations(&self) -> Vec<&BlockCall> {
        match self {
            InstData::Jump { dest } => vec![dest],
            InstData::Brif {
                then_dest,
                else_dest,
                ..
            } => vec![then_dest, else_dest],
            _ => Vec::new(),
        }
    }

    /// Mutable branch destinations (0, 1 or 2 entries).
    pub fn destinations_mut(&mut self) -> Vec<&mut BlockCall> {
        match self {
            InstData::Jump { dest } => vec![dest],
            InstData::Brif {
                then_dest,
                else_dest,
                ..
            } => vec![then_dest, else_dest],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the rows say agrees with itself: an intrinsic is a pure f64
    /// computation of one or two operands with a cost; a libcall is an
    /// intrinsic; names are unique; formats with a fixed signature have its
    /// arity.
    #[test]
    fn the_table_is_consistent() {
        let mut names = std::collections::HashSet::new();
        for &op in Opcode::ALL {
            assert!(names.insert(op.name()), "{op}: name used twice");
            if let Some(lang) = op.intrinsic_name() {
                assert_eq!(Opcode::intrinsic(lang), Some(op));
                assert!(op.effects().is_pure(), "{op}");
                assert!(op.cost().is_some(), "{op}");
                let (args, res) = op.fixed_signature().expect("fixed");
                assert_eq!(res, Some(Type::F64), "{op}");
                assert!(args.iter().all(|&t| t == Type::F64), "{op}");
                let format = [InstFormat::Unary, InstFormat::Binary][args.len() - 1];
                assert_eq!(op.format(), format, "{op}");
            }
            if let Some(sym) = op.libcall() {
                assert!(op.is_intrinsic(), "{op}");
                assert_eq!(sym, format!("adze_{}", op.name()));
            }
            if op.cost().is_none() {
                assert!(!op.effects().is_pure(), "{op}: a pure op without a cost");
            }
            let arity = match op.format() {
                InstFormat::Unary | InstFormat::Powi | InstFormat::Zeros => Some(1),
                InstFormat::Binary | InstFormat::Cmp => Some(2),
                InstFormat::Ternary => Some(3),
                _ => None,
            };
            if let (Some(n), Some((args, _))) = (arity, op.fixed_signature()) {
                assert_eq!(args.len(), n, "{op}");
            }
        }
    }

    /// The effects column gives exactly the opcodes that were hand-listed
    /// as having side effects before the table had one, and the trapping
    /// shifts and `ftosi` of issue #16.
    #[test]
    fn side_effects_are_the_memory_trap_and_control_opcodes() {
        use Opcode::*;
        let impure: Vec<Opcode> = Opcode::ALL
            .iter()
            .copied()
            .filter(|op| op.has_side_effects())
            .collect();
        assert_eq!(
            impure,
            [
                Idiv, Irem, Ishl, Sshr, Ftosi, Vload, Vstore, Load, Store, Zeros, Fill, Iload,
                Istore, Izeros, Ifill, SameLen, Slice, Disjoint, Push, Pop, Tapelen, Tapecut,
                Tapeover, Call, Autodiff, Jump, Brif, Return
            ]
        );
        let terminators: Vec<Opcode> = Opcode::ALL
            .iter()
            .copied()
            .filter(|op| op.is_terminator())
            .collect();
        assert_eq!(terminators, [Jump, Brif, Return]);
        assert!(Load.effects().reads && Load.effects().may_trap && !Load.effects().writes);
        assert!(Call.effects().control && Return.effects().control);
    }
}
