//! The one table of local derivatives: for every differentiable opcode, the
//! partial derivative of its result with respect to each operand, emitted as
//! IR at the point of use.
//!
//! Both AD modes combine the same partials `p_i = ∂y/∂x_i` of an instruction
//! `y = op x_1, .., x_n`; only the direction differs:
//!
//! - forward (tangents): `ẏ = Σ p_i · ẋ_i`, see [`emit_tangent`];
//! - reverse (adjoints): `x̄_i += p_i · ȳ` for every active operand.
//!
//! So that no exact no-op is ever emitted, a partial is a [`Partial`]:
//! `Zero` (the term is dropped), `One` (`ẋ` itself), `MinusOne` (a negation,
//! or a subtraction when there is something to subtract from) or a computed
//! `Value`. For `sin`:
//!
//! ```text
//! v1 = sin v0          ; primal
//! v7 = cos v0          ; the partial ∂v1/∂v0, emitted by `local_derivative`
//! v8 = fmul v7, v6     ; forward: the tangent of v1, with v6 the tangent of v0
//! ```
//!
//! Operations whose result is one of their operands (`select`, `min`, `max`)
//! are not products: their derivative is [`Local::Choose`], "the derivative of
//! the operand that was chosen", so an infinite or NaN tangent of the operand
//! that was *not* chosen never leaks into the result (as it would through
//! `0 · inf`). Forward emits `select c, ẋ_a, ẋ_b`; reverse accumulates
//! `select c, ȳ, 0` into `x̄_a` and `select c, 0, ȳ` into `x̄_b`.
//!
//! Partials are computed only for the operands the caller marks as wanted
//! (active); the others are returned as `Zero` and no code is emitted for
//! them. The caller places the builder right after the primal instruction; the
//! partials may use the primal result (`exp` reuses `y`), so they are emitted
//! after it.
//!
//! # Choices at non-differentiable points
//!
//! Each choice gives the one-sided or conventional value an experienced user
//! of JAX or Enzyme expects, never a NaN where a finite answer is standard.
//! One row per entry of the table of rules; `docs/ad.md` shows the same
//! table (a test keeps the two identical, and `ADZE_BLESS=1 cargo test`
//! copies this one there).
//!
//! | op | partials | at non-differentiable or special points |
//! |---|---|---|
//! | `fadd`, `fsub`, `fneg` | 1 and 1, 1 and -1, -1 | — |
//! | `fmul x, y` | `y`, `x` | — |
//! | `fdiv x, y` | `1/y`, `-(r/y)` | `y = 0`: what IEEE gives (±inf, NaN) |
//! | `powi x, n` | `n · x^(n-1)` | `n = 0`: exactly 0; `n = 1`: exactly 1 |
//! | `pow x, y` | `y · x^(y-1)`, `r · ln x` | ∂/∂x := 0 where `y = 0`; ∂/∂y := 0 where `x <= 0` |
//! | `sin`, `cos`, `tan` | `cos x`, `-sin x`, `1 + r²` | — |
//! | `asin`, `acos` | `1/sqrt(1 - x²)`, `-1/sqrt(1 - x²)` | ±inf at `|x| = 1`; NaN for `|x| > 1` |
//! | `atan` | `1/(1 + x²)` | — |
//! | `sinh`, `cosh`, `tanh` | `cosh x`, `sinh x`, `1 - r²` | — |
//! | `exp`, `expm1` | `r`, `r + 1` | — |
//! | `log`, `log1p` | `1/x`, `1/(1 + x)` | +inf at `+0` / `-1` (−inf at −0); below the domain the formula's value |
//! | `sqrt` | `0.5/r` | +inf at `+0`; −inf at `−0` (`sqrt(−0) = −0`) |
//! | `cbrt` | `1/(3 r²)` | +inf at ±0 |
//! | `abs` | `sign x` | 0 at ±0 |
//! | `erf` | `2/√π · e^(−x²)` | 0 at ±inf (`x²` overflows, `e^(−inf) = 0`) |
//! | `erfc` | `−2/√π · e^(−x²)` | −0 at ±inf |
//! | `log2`, `log10` | `log2(e)/x`, `log10(e)/x` | ±inf at ±0; below the domain the formula's value |
//! | `exp2` | `ln 2 · r` | — |
//! | `asinh` | `1/hypot(x, 1)` | no overflow for huge `x` (`1/|x|`) |
//! | `acosh` | `1/(sqrt(x − 1) · sqrt(x + 1))` | +inf at 1; NaN below 1; `x − 1` exact near 1, no overflow for huge `x` |
//! | `atanh` | `1/((1 − x)(1 + x))` | +inf at ±1; no cancellation of `1 − x²` near ±1 |
//! | `lgamma` | `digamma x` | at the poles `0, −1, ..`: digamma's value there (NaN, or ∓inf at ±0) |
//! | `digamma` | `polygamma 1, x` | +inf at the poles |
//! | `polygamma n, x` | 0, `polygamma n+1, x` | the order `n` is an integer: ∂/∂n := 0; NaN beyond order 100 |
//! | `floor`, `ceil`, `round`, `sign` | 0 | 0 everywhere, at the jumps too; results are inactive |
//! | `atan2 y, x` | `x/h/h`, `-(y/h/h)`, `h = hypot(y, x)` | 0 at `(0, 0)`; no overflow for huge arguments |
//! | `hypot x, y` | `x/r`, `y/r` | 0 at `(0, 0)` |
//! | `min a, b` / `max a, b` | the chosen operand's | ties: the first operand; ±0 ties: the operand IEEE `minimum`/`maximum` returns; NaN: the second operand |
//! | `select c, a, b` | the chosen operand's | — |
//! | `sitof`, `ftosi` (`i64(x)`), integer (bitwise included) and boolean ops, comparisons | none | no derivative; results are integers or bools, inactive |
//!
//! `pow`: at `y = 0` the function is the constant 1 in `x`, so ∂/∂x is 0
//! (not `0 · x^-1`, NaN at `x = 0`), as in JAX. ∂/∂y is 0 where `x = 0` (as
//! in JAX: `0^y` is constant for `y > 0`) and also where `x < 0`: there `x^y`
//! is real only at integer `y`, where it has no derivative in `y`, and JAX
//! and Enzyme give NaN; defining 0 keeps a `dual` exponent whose tangent is
//! 0 from turning the derivative in `x` into NaN (`NaN · 0`).
//!
//! Outside an intrinsic's domain (`log` of a negative number, `asin` of 2)
//! the primal is NaN and the partial is whatever its formula gives (`1/x`
//! for `log`, NaN for `asin`); no special case.
//!
//! `min` and `max` are IEEE 754-2019 `minimum`/`maximum`, and the derivative
//! is that of the operand they return. `min` returns `a` when `a < b`, `b`
//! when `b < a`; on a tie `a == b` the two operands are the same number and
//! the derivative goes to the first operand, except for the tie of zeros of
//! opposite signs, where `minimum` returns the negative zero and the
//! derivative goes to that operand (`max`: the positive zero). In IR:
//! `a < b || (a == b && 1/a <= 1/b)` (`max`: `>` and `>=`; the tie is
//! decided from the sign bits, without dividing). When an operand is
//! NaN the result is NaN and the derivative is the second operand's.

use adze_ir::{CmpCond, FuncBuilder, InstData, Opcode, Value};

/// A partial derivative `∂y/∂x_i`, with the exact constants distinguished so
/// that emitters skip multiplications by 0, 1 and -1.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Partial {
    Zero,
    One,
    MinusOne,
    Value(Value),
}

/// The local derivative of one instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Local {
    /// One partial per operand of [`InstData::args`], in order.
    Partials(Vec<Partial>),
    /// The result is operand `on_true` when `cond` holds, else operand
    /// `on_false` (indices into [`InstData::args`]); so is its derivative.
    Choose {
        cond: Value,
        on_true: usize,
        on_false: usize,
    },
}

/// How the local derivative of one opcode is formed: its entry in [`rule`].
#[derive(Copy, Clone)]
enum Rule {
    /// Constant partials, one per operand (`fadd`: 1, 1).
    Exact(&'static [Partial]),
    /// One operand; its partial is the result itself (`exp`).
    Result,
    /// One operand; its partial, emitted from the operand `x` and the result
    /// `r` when the operand is wanted.
    Unary(fn(b: &mut FuncBuilder, x: Value, r: Value) -> Value),
    /// Piecewise constant (`floor`): the derivative is 0 everywhere, and
    /// activity analysis treats the result as a constant.
    Flat,
    /// Any other shape: the opcode's own emitter, with the instruction, its
    /// result and which operands are wanted.
    Custom(fn(b: &mut FuncBuilder, data: &InstData, r: Value, wanted: &[bool]) -> Option<Local>),
}

/// The table: one entry per differentiable opcode (and the piecewise
/// constant ones). The choices at non-differentiable points are in the
/// module documentation, one row per entry.
fn rule(op: Opcode) -> Option<Rule> {
    use Opcode::*;
    use Partial::{MinusOne, One};
    Some(match op {
        Fadd => Rule::Exact(&[One, One]),
        Fsub => Rule::Exact(&[One, MinusOne]),
        Fneg => Rule::Exact(&[MinusOne]),
        Fmul => Rule::Custom(fmul),
        Fdiv => Rule::Custom(fdiv),
        Powi => Rule::Custom(powi),
        Pow => Rule::Custom(pow),
        Sin => Rule::Unary(|b, x, _| b.unary(Cos, x)),
        Cos => Rule::Unary(|b, x, _| {
            let s = b.unary(Sin, x);
            b.fneg(s)
        }),
        Tan => Rule::Unary(|b, _, r| {
            let one = b.fconst(1.0);
            let r2 = b.fmul(r, r);
            b.fadd(one, r2)
        }),
        Asin => Rule::Unary(|b, x, _| inv_sqrt_one_minus_square(b, x)),
        Acos => Rule::Unary(|b, x, _| {
            let p = inv_sqrt_one_minus_square(b, x);
            b.fneg(p)
        }),
        Atan => Rule::Unary(|b, x, _| {
            let one = b.fconst(1.0);
            let x2 = b.fmul(x, x);
            let d = b.fadd(one, x2);
            b.fdiv(one, d)
        }),
        Sinh => Rule::Unary(|b, x, _| b.unary(Cosh, x)),
        Cosh => Rule::Unary(|b, x, _| b.unary(Sinh, x)),
        Tanh => Rule::Unary(|b, _, r| {
            let one = b.fconst(1.0);
            let r2 = b.fmul(r, r);
            b.fsub(one, r2)
        }),
        Exp => Rule::Result,
        Expm1 => Rule::Unary(|b, _, r| {
            let one = b.fconst(1.0);
            b.fadd(r, one)
        }),
        Log => Rule::Unary(|b, x, _| {
            let one = b.fconst(1.0);
            b.fdiv(one, x)
        }),
        Log1p => Rule::Unary(|b, x, _| {
            let one = b.fconst(1.0);
            let d = b.fadd(one, x);
            b.fdiv(one, d)
        }),
        Sqrt => Rule::Unary(|b, _, r| {
            let half = b.fconst(0.5);
            b.fdiv(half, r)
        }),
        Cbrt => Rule::Unary(|b, _, r| {
            let one = b.fconst(1.0);
            let three = b.fconst(3.0);
            let r2 = b.fmul(r, r);
            let d = b.fmul(three, r2);
            b.fdiv(one, d)
        }),
        Abs => Rule::Unary(|b, x, _| b.unary(Sign, x)),
        Erf => Rule::Unary(|b, x, _| {
            let c = b.fconst(std::f64::consts::FRAC_2_SQRT_PI);
            let x2 = b.fmul(x, x);
            let m = b.fneg(x2);
            let e = b.unary(Exp, m);
            b.fmul(c, e)
        }),
        Erfc => Rule::Unary(|b, x, _| {
            let c = b.fconst(-std::f64::consts::FRAC_2_SQRT_PI);
            let x2 = b.fmul(x, x);
            let m = b.fneg(x2);
            let e = b.unary(Exp, m);
            b.fmul(c, e)
        }),
        Log2 => Rule::Unary(|b, x, _| {
            let c = b.fconst(std::f64::consts::LOG2_E);
            b.fdiv(c, x)
        }),
        Log10 => Rule::Unary(|b, x, _| {
            let c = b.fconst(std::f64::consts::LOG10_E);
            b.fdiv(c, x)
        }),
        Exp2 => Rule::Unary(|b, _, r| {
            let c = b.fconst(std::f64::consts::LN_2);
            b.fmul(c, r)
        }),
        Asinh => Rule::Unary(|b, x, _| {
            let one = b.fconst(1.0);
            let h = b.binary(Hypot, x, one);
            b.fdiv(one, h)
        }),
        Acosh => Rule::Unary(|b, x, _| {
            let one = b.fconst(1.0);
            let xm = b.fsub(x, one);
            let xp = b.fadd(x, one);
            let sm = b.unary(Sqrt, xm);
            let sp = b.unary(Sqrt, xp);
            let d = b.fmul(sm, sp);
            b.fdiv(one, d)
        }),
        Atanh => Rule::Unary(|b, x, _| {
            let one = b.fconst(1.0);
            let xm = b.fsub(one, x);
            let xp = b.fadd(one, x);
            let d = b.fmul(xm, xp);
            b.fdiv(one, d)
        }),
        Lgamma => Rule::Unary(|b, x, _| b.unary(Digamma, x)),
        Digamma => Rule::Unary(|b, x, _| {
            let one = b.fconst(1.0);
            b.binary(Polygamma, one, x)
        }),
        Polygamma => Rule::Custom(polygamma),
        Floor | Ceil | Round | Sign => Rule::Flat,
        Atan2 => Rule::Custom(atan2),
        Hypot => Rule::Custom(hypot),
        Min | Max => Rule::Custom(min_max),
        Select => Rule::Custom(|_, data, _, _| {
            Some(Local::Choose {
                cond: *data.args().first()?,
                on_true: 1,
                on_false: 2,
            })
        }),
        _ => return None,
    })
}

/// Can the f64 result of `op` have a nonzero derivative? False for
/// integer, boolean, memory and call opcodes, and for the piecewise-constant
/// `floor ceil round sign` (their derivative is 0 everywhere): activity
/// analysis treats the results of those as constants. Read off the table
/// of rules (`rule`).
pub fn is_differentiable(op: Opcode) -> bool {
    rule(op).is_some_and(|r| !matches!(r, Rule::Flat))
}

/// Emits, at the builder's position (right after the primal instruction
/// `data` whose result is `result`), the code computing its local derivative
/// with respect to the operands `i` with `wanted[i]`.
///
/// Returns `None` for opcodes that are not differentiable (see
/// [`is_differentiable`]; `floor`-like opcodes return all-`Zero` partials,
/// which is also correct). Loads, stores, calls and `autodiff` are not local
/// operations: the passes handle them.
pub fn local_derivative(
    b: &mut FuncBuilder,
    data: &InstData,
    result: Value,
    wanted: &[bool],
) -> Option<Local> {
    let args = data.args();
    let partials = match rule(data.opcode())? {
        Rule::Exact(ps) => {
            if args.len() != ps.len() {
                return None;
            }
            ps.to_vec()
        }
        Rule::Result => {
            args.first()?;
            vec![Partial::Value(result)]
        }
        Rule::Unary(f) => {
            let x = *args.first()?;
            vec![lazy(b, want(wanted, 0), |b| f(b, x, result))]
        }
        Rule::Flat => {
            args.first()?;
            vec![Partial::Zero]
        }
        Rule::Custom(f) => return f(b, data, result, wanted),
    };
    Some(Local::Partials(partials))
}

/// Is operand `i` wanted?
fn want(wanted: &[bool], i: usize) -> bool {
    wanted.get(i).copied().unwrap_or(false)
}

/// The two operands of a binary instruction.
fn two(data: &InstData) -> Option<(Value, Value)> {
    match *data.args() {
        [x, y, ..] => Some((x, y)),
        _ => None,
    }
}

/// `1/sqrt(1 - x²)`, the partial of `asin` (negated: `acos`).
fn inv_sqrt_one_minus_square(b: &mut FuncBuilder, x: Value) -> Value {
    let one = b.fconst(1.0);
    let x2 = b.fmul(x, x);
    let d = b.fsub(one, x2);
    let s = b.unary(Opcode::Sqrt, d);
    b.fdiv(one, s)
}

/// `polygamma n, x`: ∂/∂x is the next order, `polygamma n+1, x`, so every
/// order of derivative of `lgamma`, `digamma` and `polygamma` is defined.
/// The order is an integer (any other value gives NaN), so there is no
/// derivative in it: ∂/∂n is 0, as for `floor`.
fn polygamma(b: &mut FuncBuilder, data: &InstData, _: Value, wanted: &[bool]) -> Option<Local> {
    let (n, x) = two(data)?;
    let px = lazy(b, want(wanted, 1), |b| {
        let one = b.fconst(1.0);
        let n1 = b.fadd(n, one);
        b.binary(Opcode::Polygamma, n1, x)
    });
    Some(Local::Partials(vec![Partial::Zero, px]))
}

fn fmul(_: &mut FuncBuilder, data: &InstData, _: Value, _: &[bool]) -> Option<Local> {
    let (x, y) = two(data)?;
    Some(Local::Partials(vec![Partial::Value(y), Partial::Value(x)]))
}

fn fdiv(b: &mut FuncBuilder, data: &InstData, r: Value, wanted: &[bool]) -> Option<Local> {
    let (_, y) = two(data)?;
    let px = lazy(b, want(wanted, 0), |b| {
        let one = b.fconst(1.0);
        b.fdiv(one, y)
    });
    let py = lazy(b, want(wanted, 1), |b| {
        let q = b.fdiv(r, y);
        b.fneg(q)
    });
    Some(Local::Partials(vec![px, py]))
}

fn powi(b: &mut FuncBuilder, data: &InstData, _: Value, wanted: &[bool]) -> Option<Local> {
    let InstData::Powi { arg: x, exp, .. } = *data else {
        return None;
    };
    let p = match exp {
        0 => Partial::Zero,
        1 => Partial::One,
        _ => lazy(b, want(wanted, 0), |b| {
            let n = b.fconst(f64::from(exp));
            let p = b.powi(x, exp - 1);
            b.fmul(n, p)
        }),
    };
    Some(Local::Partials(vec![p]))
}

fn pow(b: &mut FuncBuilder, data: &InstData, r: Value, wanted: &[bool]) -> Option<Local> {
    let (x, y) = two(data)?;
    // ∂/∂x = y·x^(y-1), := 0 where y == 0 (no 0·inf at x == 0).
    let px = lazy(b, want(wanted, 0), |b| {
        let one = b.fconst(1.0);
        let ym1 = b.fsub(y, one);
        let p = b.binary(Opcode::Pow, x, ym1);
        let d = b.fmul(y, p);
        let zero = b.fconst(0.0);
        let y0 = b.fcmp(CmpCond::Eq, y, zero);
        b.select(y0, zero, d)
    });
    // ∂/∂y = x^y·ln x, := 0 where x <= 0 (see the module doc).
    let py = lazy(b, want(wanted, 1), |b| {
        let l = b.unary(Opcode::Log, x);
        let d = b.fmul(r, l);
        let zero = b.fconst(0.0);
        let x0 = b.fcmp(CmpCond::Le, x, zero);
        b.select(x0, zero, d)
    });
    Some(Local::Partials(vec![px, py]))
}

fn atan2(b: &mut FuncBuilder, data: &InstData, _: Value, wanted: &[bool]) -> Option<Local> {
    let (y, x) = two(data)?;
    // atan2(y, x): ∂/∂y = x/(x²+y²), ∂/∂x = -y/(x²+y²), as x/h/h with
    // h = hypot(y, x) so that nothing overflows; 0 at the origin.
    if !want(wanted, 0) && !want(wanted, 1) {
        return Some(Local::Partials(vec![Partial::Zero, Partial::Zero]));
    }
    let h = b.binary(Opcode::Hypot, y, x);
    let zero = b.fconst(0.0);
    let h0 = b.fcmp(CmpCond::Eq, h, zero);
    let py = lazy(b, want(wanted, 0), |b| {
        let q = b.fdiv(x, h);
        let q = b.fdiv(q, h);
        b.select(h0, zero, q)
    });
    let px = lazy(b, want(wanted, 1), |b| {
        let q = b.fdiv(y, h);
        let q = b.fdiv(q, h);
        let n = b.fneg(q);
        b.select(h0, zero, n)
    });
    Some(Local::Partials(vec![py, px]))
}

fn hypot(b: &mut FuncBuilder, data: &InstData, r: Value, wanted: &[bool]) -> Option<Local> {
    let (x, y) = two(data)?;
    if !want(wanted, 0) && !want(wanted, 1) {
        return Some(Local::Partials(vec![Partial::Zero, Partial::Zero]));
    }
    let zero = b.fconst(0.0);
    let r0 = b.fcmp(CmpCond::Eq, r, zero);
    let px = lazy(b, want(wanted, 0), |b| {
        let q = b.fdiv(x, r);
        b.select(r0, zero, q)
    });
    let py = lazy(b, want(wanted, 1), |b| {
        let q = b.fdiv(y, r);
        b.select(r0, zero, q)
    });
    Some(Local::Partials(vec![px, py]))
}

fn min_max(b: &mut FuncBuilder, data: &InstData, _: Value, _: &[bool]) -> Option<Local> {
    let (a, c) = two(data)?;
    // "the result is a": a < b || (a == b && 1/a <= 1/b) for min, with >
    // and >= for max (see the module doc). On a tie the reciprocals only
    // order the signed zeros (equal non-zero values have equal ones, and
    // 1/±inf = ±0 compare equal), so the sign bits decide, without a
    // division: min keeps a unless a is +0 and b is -0 (sign(a) ||
    // !sign(b)); max keeps a unless a is -0 and b is +0.
    let min = data.opcode() == Opcode::Min;
    let strict = if min { CmpCond::Lt } else { CmpCond::Gt };
    let first = b.fcmp(strict, a, c);
    let eq = b.fcmp(CmpCond::Eq, a, c);
    let (ba, bc) = (b.tobits(a), b.tobits(c));
    let zero = b.iconst(0);
    let (keep, or_else) = if min {
        (b.icmp(CmpCond::Lt, ba, zero), b.icmp(CmpCond::Ge, bc, zero))
    } else {
        (b.icmp(CmpCond::Ge, ba, zero), b.icmp(CmpCond::Lt, bc, zero))
    };
    let zero_tie = b.select(keep, keep, or_else);
    let on_tie = b.select(eq, zero_tie, eq);
    let cond = b.select(first, first, on_tie);
    Some(Local::Choose {
        cond,
        on_true: 0,
        on_false: 1,
    })
}

/// The condition of [`min_max`]'s `Choose` ("the result is `a`") from the
/// operation's own result `r`, where the result is at hand (reverse mode's
/// augmented primal tapes this bool, `TapeItem::Choice`): `a == a` (not a
/// NaN) and `r` has `a`'s bits. Five instructions instead of eleven, and
/// the same bool for every pair, as `semantics::minimum`/`maximum` decide:
/// a strict winner is returned itself, and a loser has other bits (equal
/// values other than zeros have one encoding); on a tie of zeros `min`
/// returns the negative one, which is `a` exactly when `a` is `-0` or both
/// are `+0` (the rule's "unless a is +0 and b is -0"), and `max` the
/// positive one likewise; a NaN `a` fails `a == a`, and with a NaN `b` the
/// result is a NaN, whose bits no number has. `None` for other opcodes.
/// Tested against the rule on every pair of special values
/// (`crates/ad/tests/it/intrinsics.rs`).
pub fn choice_from_result(b: &mut FuncBuilder, data: &InstData, r: Value) -> Option<Value> {
    if !matches!(data.opcode(), Opcode::Min | Opcode::Max) {
        return None;
    }
    let (a, _) = two(data)?;
    let number = b.fcmp(CmpCond::Eq, a, a);
    let (ra, aa) = (b.tobits(r), b.tobits(a));
    let same = b.icmp(CmpCond::Eq, ra, aa);
    let no = b.bconst(false);
    Some(b.select(number, same, no))
}

/// A partial that is computed only when wanted.
fn lazy(b: &mut FuncBuilder, wanted: bool, f: impl FnOnce(&mut FuncBuilder) -> Value) -> Partial {
    if wanted {
        Partial::Value(f(b))
    } else {
        Partial::Zero
    }
}

/// Emits the forward combination `Σ p_i · t_i` for one lane, skipping
/// operands without a tangent (`None`: inactive, their tangent is 0) and
/// `Zero` partials. `One` adds `t_i`, `MinusOne` subtracts it (a leading one
/// is negated). Returns `None` when no term remains: the tangent is zero.
///
/// Terms are added left to right in operand order, so `fmul x, y` has the
/// tangent `y·ẋ + x·ẏ`.
pub fn emit_tangent(
    b: &mut FuncBuilder,
    partials: &[Partial],
    tangents: &[Option<Value>],
) -> Option<Value> {
    let mut acc: Option<Value> = None;
    for (p, t) in partials.iter().zip(tangents) {
        let Some(t) = *t else { continue };
        acc = Some(match (*p, acc) {
            (Partial::Zero, _) => continue,
            (Partial::One, None) => t,
            (Partial::One, Some(a)) => b.fadd(a, t),
            (Partial::MinusOne, None) => b.fneg(t),
            (Partial::MinusOne, Some(a)) => b.fsub(a, t),
            (Partial::Value(p), None) => b.fmul(p, t),
            (Partial::Value(p), Some(a)) => {
                let m = b.fmul(p, t);
                b.fadd(a, m)
            }
        });
    }
    acc
}
