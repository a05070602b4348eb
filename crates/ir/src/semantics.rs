//! The meaning of every scalar operation, defined once.
//!
//! The interpreter calls these functions directly; the JIT either emits a
//! Cranelift instruction that is bit-for-bit equal (`fadd`, `sqrt`, `floor`,
//! ... are exactly rounded by IEEE 754) or calls these very functions through a
//! registered symbol. That is what makes "JIT equals interpreter, bit for bit"
//! a property of the design rather than a hope.
//!
//! Choices made here (also in `docs/language.md`):
//! - `min`/`max` are IEEE 754-2019 `minimum`/`maximum`: NaN if either operand
//!   is NaN, and `-0 < +0`. (Rust's `f64::min` ignores NaN; Cranelift's
//!   `fmin` propagates it; we pick the latter.)
//! - `round` rounds half away from zero (Rust's `f64::round`).
//! - `sign(x)` is -1 or 1 for nonzero `x`, `x` itself for ±0 and NaN.
//! - `x ^ n` for an integer literal `n` is binary powering ([`powi`]), exact
//!   for `n = 0, 1, 2`; `x ^ y` otherwise is `pow` (Rust's `f64::powf`).
//! - `erf`, `erfc`, `asinh`, `acosh`, `atanh` come from the `libm` crate
//!   (pure-Rust ports of fdlibm, under 1 ulp, the same bits on every
//!   platform); `std` has no `erf`/`erfc`, and its `asinh`/`acosh`/`atanh`
//!   are short formulas (`acosh` loses digits just above 1). `log2`,
//!   `log10`, `exp2` are `std`'s, as `exp` and `log` are. `lgamma` is
//!   `libm`'s (fdlibm's `e_lgamma_r.c`); `digamma` and `polygamma`, which no
//!   library here has, are [`polygamma`], in plain Rust.
//! - i64 `+ - *` wrap; `/` and `%` truncate; `x / 0`, `x % 0`,
//!   `i64::MIN / -1` and `i64::MIN % -1` are run-time errors.
//! - `&` and `|` are bitwise; `a << b` and `a >> b` (arithmetic: the sign
//!   bit comes in) are run-time errors unless `0 <= b <= 63`, as Rust's
//!   shifts in a debug build (no masking of the amount, no silent zero).
//! - `i64(x)` (`ftosi`) truncates toward zero; NaN and values outside
//!   `[-2^63, 2^63)` (before truncation: every `x` in `(-2^63 - 1, 2^63)`,
//!   which for an f64 is `[-2^63, 2^63)`) are run-time errors, never Rust's
//!   saturating `as`.

use crate::instructions::{CmpCond, InstFormat, Opcode};
use crate::runtime::TrapKind;
use crate::types::Type;

/// The opcodes [`unary_f64`] evaluates: every one-operand opcode of type
/// `f64 -> f64` (`fneg` and the one-operand intrinsics), read off the opcode
/// table.
#[inline]
pub fn is_unary_f64(op: Opcode) -> bool {
    op.format() == InstFormat::Unary
        && matches!(op.fixed_signature(), Some(([Type::F64], Some(Type::F64))))
}

/// The opcodes [`binary_f64`] evaluates: every two-operand opcode of type
/// `(f64, f64) -> f64` (arithmetic and the two-operand intrinsics).
#[inline]
pub fn is_binary_f64(op: Opcode) -> bool {
    op.format() == InstFormat::Binary
        && matches!(
            op.fixed_signature(),
            Some(([Type::F64, Type::F64], Some(Type::F64)))
        )
}

/// The opcodes [`binary_i64`] evaluates: every two-operand opcode of type
/// `(i64, i64) -> i64`.
#[inline]
pub fn is_binary_i64(op: Opcode) -> bool {
    op.format() == InstFormat::Binary
        && matches!(
            op.fixed_signature(),
            Some(([Type::I64, Type::I64], Some(Type::I64)))
        )
}

/// Evaluates a one-operand f64 opcode (arithmetic or intrinsic).
///
/// `#[inline]`: the JIT's intrinsic wrappers (`adze_exp`, ..) call this with
/// a constant opcode; inlined, each wrapper is a tail call of libm instead of
/// a call through this dispatch.
#[inline]
pub fn unary_f64(op: Opcode, x: f64) -> f64 {
    use Opcode::*;
    match op {
        Fneg => -x,
        Sin => x.sin(),
        Cos => x.cos(),
        Tan => x.tan(),
        Asin => x.asin(),
        Acos => x.acos(),
        Atan => x.atan(),
        Sinh => x.sinh(),
        Cosh => x.cosh(),
        Tanh => x.tanh(),
        Exp => x.exp(),
        Expm1 => x.exp_m1(),
        Log => x.ln(),
        Log1p => x.ln_1p(),
        Sqrt => x.sqrt(),
        Cbrt => x.cbrt(),
        Abs => x.abs(),
        Floor => x.floor(),
        Ceil => x.ceil(),
        Round => x.round(),
        Sign => sign(x),
        Erf => erf(x),
        Erfc => erfc(x),
        Log2 => x.log2(),
        Log10 => x.log10(),
        Exp2 => x.exp2(),
        Asinh => libm::asinh(x),
        Acosh => libm::acosh(x),
        Atanh => libm::atanh(x),
        Lgamma => lgamma(x),
        Digamma => polygamma(0.0, x),
        _ => panic!("{op} is not a unary f64 operation"),
    }
}

/// Evaluates a two-operand f64 opcode (arithmetic or intrinsic).
/// `#[inline]` as [`unary_f64`].
#[inline]
pub fn binary_f64(op: Opcode, a: f64, b: f64) -> f64 {
    use Opcode::*;
    match op {
        Fadd => a + b,
        Fsub => a - b,
        Fmul => a * b,
        Fdiv => a / b,
        Atan2 => a.atan2(b),
        Pow => a.powf(b),
        Hypot => a.hypot(b),
        Polygamma => polygamma(a, b),
        Min => minimum(a, b),
        Max => maximum(a, b),
        _ => panic!("{op} is not a binary f64 operation"),
    }
}

/// A two-lane computation of one operand (`vfneg`, `vsqrt`): its scalar
/// opcode ([`Opcode::lane_op`]) on each lane, by [`unary_f64`]. `None` for
/// any other opcode.
pub fn lanes_unary(op: Opcode, x: [f64; 2]) -> Option<[f64; 2]> {
    let s = op.lane_op().filter(|&s| is_unary_f64(s))?;
    Some(x.map(|x| unary_f64(s, x)))
}

/// A two-lane computation of two operands (`vfadd`, ..): its scalar
/// opcode on each lane, by [`binary_f64`]. `None` for any other opcode.
pub fn lanes_binary(op: Opcode, a: [f64; 2], b: [f64; 2]) -> Option<[f64; 2]> {
    let s = op.lane_op().filter(|&s| is_binary_f64(s))?;
    Some([binary_f64(s, a[0], b[0]), binary_f64(s, a[1], b[1])])
}

/// `vpowi`: [`powi`] on each lane.
pub fn lanes_powi(x: [f64; 2], n: i32) -> [f64; 2] {
    x.map(|x| powi(x, n))
}

/// `sign(x)`: -1.0 or 1.0 for nonzero `x`; `x` itself for ±0 and NaN.
pub fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

/// The error function `erf(x) = 2/sqrt(pi) · ∫₀ˣ exp(-t²) dt`: the `libm`
/// crate's, a port of FreeBSD's `s_erf.c` from Sun's fdlibm (error under 1
/// ulp; odd, so `erf(-0) = -0`; `erf(±inf) = ±1`; NaN stays NaN). Pure Rust,
/// so both engines compute the same bits on every platform.
pub fn erf(x: f64) -> f64 {
    libm::erf(x)
}

/// The complementary error function `erfc(x) = 1 - erf(x)`, computed
/// without the cancellation of `1 - erf(x)` for large `x` (`erfc(27) ≈
/// 5e-319` is a subnormal, not 0): the `libm` crate's port of fdlibm's
/// `s_erf.c`, as [`erf`] (error under 1 ulp; `erfc(-inf) = 2`,
/// `erfc(inf) = 0`).
pub fn erfc(x: f64) -> f64 {
    libm::erfc(x)
}

/// `ln |Γ(x)|`: the `libm` crate's port of fdlibm's `e_lgamma_r.c` (under
/// 1 ulp away from its zeros at 1 and 2 and near the negative ones); +inf at
/// the poles `0, -1, -2, ..` and at ±inf; NaN stays NaN.
pub fn lgamma(x: f64) -> f64 {
    libm::lgamma(x)
}

/// The largest order [`polygamma`] evaluates; a higher one gives NaN.
pub const POLYGAMMA_MAX_ORDER: u32 = 100;

/// The Bernoulli numbers `B_2, B_4, .., B_30`, for the asymptotic series of
/// [`polygamma`].
const BERNOULLI: [f64; 15] = [
    1.0 / 6.0,
    -1.0 / 30.0,
    1.0 / 42.0,
    -1.0 / 30.0,
    5.0 / 66.0,
    -691.0 / 2730.0,
    7.0 / 6.0,
    -3617.0 / 510.0,
    43867.0 / 798.0,
    -174611.0 / 330.0,
    854513.0 / 138.0,
    -236364091.0 / 2730.0,
    8553103.0 / 6.0,
    -23749461029.0 / 870.0,
    8615841276005.0 / 14322.0,
];

/// The polygamma function `ψ⁽ⁿ⁾(x)`, the `n`-th derivative of digamma
/// `ψ = Γ'/Γ` (`n = 0` is digamma, `n = 1` trigamma). The order `n` is an
/// f64 that must be an integer in `0..=100` ([`POLYGAMMA_MAX_ORDER`]);
/// anything else gives NaN.
///
/// Method: digamma (`n = 0`) as [`digamma_positive`] says. For `n >= 1`
/// and `x > 0`, the recurrence `ψ⁽ⁿ⁾(x) = ψ⁽ⁿ⁾(x + m) + (-1)ⁿ⁺¹ n!
/// Σₖ (x + k)^-(n+1)` shifts the argument to `z = x + m >= 10 + n`, where
/// the asymptotic series (`(-1)ⁿ⁺¹ (n-1)!/zⁿ · (1 + n/(2z) + Σ B₂ₖ C(2k+n-1, 2k) z^-2k)`) is
/// summed until its terms no longer change the sum (at most up
/// to `B₃₀`; at `z >= 10 + n` the omitted terms are below 1e-30 relative).
/// For `x < 0` the reflection formula, differentiated `n` times:
/// `ψ⁽ⁿ⁾(x) = (-1)ⁿ ψ⁽ⁿ⁾(1 - x) - πⁿ⁺¹ Pₙ(cot πx)` with `P₀(c) = c`,
/// `Pₖ₊₁(c) = -(1 + c²) Pₖ'(c)`, and `cot πx` computed from `x - round(x)`
/// (exact), so large negative `x` keep their digits.
///
/// Accuracy (against mpmath, in the tests): digamma within a few ulp for
/// `x > 0`, next to its positive zero included; `n >= 1` a few ulp for
/// small `n`; the error grows about linearly with `n` (the powers
/// `(x + k)^(n+1)`), and for `x < 0` with the condition of the reflection.
///
/// Poles, at `x = 0, -1, -2, ..` (and every `|x| >= 2^52` below 0, all
/// integers): for odd `n` both one-sided limits are +inf, which it returns;
/// for even `n` (digamma included) the limits differ in sign: NaN at the
/// negative integers, and at ±0 the limit from the side of the zero's sign
/// (`ψ(+0) = -inf`, `ψ(-0) = +inf`, as `-1/x`). `ψ(+inf) = +inf`,
/// `ψ⁽ⁿ⁾(+inf) = ±0` for `n >= 1`, `ψ⁽ⁿ⁾(-inf)` and NaN are NaN.
pub fn polygamma(n: f64, x: f64) -> f64 {
    if !(n >= 0.0 && n <= f64::from(POLYGAMMA_MAX_ORDER) && n.fract() == 0.0) || x.is_nan() {
        return f64::NAN;
    }
    // In 0..=100, an integer: the conversion is exact.
    let n = n as u32;
    let odd = n % 2 == 1;
    if x == 0.0 || (x < 0.0 && x.fract() == 0.0) {
        return if odd {
            f64::INFINITY
        } else if x == 0.0 {
            if x.is_sign_positive() {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        } else {
            f64::NAN
        };
    }
    if x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x < 0.0 {
        let reflected = polygamma_positive(n, 1.0 - x);
        // cot(πx) from r = x - round(x) in [-1/2, 1/2] (exact); near ±1/2,
        // as tan(π(1/2 - |r|)) (the subtraction exact), so that cot's zero
        // at r = ±1/2 is exact and its neighbours keep their digits.
        let r = x - x.round();
        let cot = if r.abs() <= 0.25 {
            let (s, c) = (std::f64::consts::PI * r).sin_cos();
            c / s
        } else {
            (std::f64::consts::PI * (0.5 - r.abs())).tan().copysign(r)
        };
        let p = cot_derivative_poly(n, cot);
        let pi_pow = powi(std::f64::consts::PI, n as i32 + 1);
        let sign = if odd { -1.0 } else { 1.0 };
        return sign * reflected - pi_pow * p;
    }
    polygamma_positive(n, x)
}

/// `ψ⁽ⁿ⁾(x)` for `x > 0` (and `+inf`): recurrence up to `10 + n`, then the
/// asymptotic series.
fn polygamma_positive(n: u32, x: f64) -> f64 {
    let odd = n % 2 == 1;
    if x == f64::INFINITY {
        return match (n, odd) {
            (0, _) => f64::INFINITY,
            (_, true) => 0.0,
            (_, false) => -0.0,
        };
    }
    if n == 0 {
        return digamma_positive(x);
    }
    let nf = f64::from(n);
    let target = 10.0 + nf;
    // The shift: the terms (x + k)^-(n+1), k = 0..m, summed from the
    // smallest (largest k) up.
    let m = if x < target { (target - x).ceil() } else { 0.0 };
    let z = x + m;
    let e = n as i32 + 1;
    let mut shift = 0.0;
    let mut k = m - 1.0;
    while k >= 0.0 {
        shift += powi(x + k, -e);
        k -= 1.0;
    }
    // (n-1)!/zⁿ · (1 + n/(2z) + Σ B₂ₖ C(2k+n-1, 2k) z^-2k), then the sign.
    let w = 1.0 / (z * z);
    let mut binom_zk = 1.0; // C(2k+n-1, 2k) · z^-2k
    let mut series = 0.0;
    for (i, b) in BERNOULLI.iter().enumerate() {
        let k2 = 2.0 * (i as f64 + 1.0);
        binom_zk *= (k2 + nf - 1.0) * (k2 + nf - 2.0) / (k2 * (k2 - 1.0)) * w;
        let term = b * binom_zk;
        if series + term == series {
            break;
        }
        series += term;
    }
    let mut fact = 1.0; // (n-1)!
    for j in 1..n {
        fact *= f64::from(j);
    }
    let asymptotic = fact * powi(z, -(n as i32)) * (1.0 + nf / (2.0 * z) + series);
    let magnitude = asymptotic + fact * nf * shift;
    if odd {
        magnitude
    } else {
        -magnitude
    }
}

/// digamma's positive zero `x₀ = 1.4616321449683622..` as `hi + lo`.
const DIGAMMA_ROOT: (f64, f64) = (1.461_632_144_968_362_2, 9.549_995_429_965_697e-17);

/// `ψ⁽ᵏ⁾(x₀)/k!`, `k = 1..=42`: the Taylor coefficients of digamma at its
/// positive zero (computed with mpmath at 50 digits); on `[1, 2]` (`|x −
/// x₀| <= 0.54`, radius of convergence 1.46) the omitted terms are below
/// 1e-18 of the first.
const DIGAMMA_TAYLOR: [f64; 42] = [
    0.9676722454476212,
    -0.4427631689835921,
    0.258499760955651,
    -0.16394270544240652,
    0.10782405069126237,
    -0.07219956125645471,
    0.04880428816414311,
    -0.03316112647484736,
    0.022597648232218104,
    -0.01542476590494896,
    0.010538791616612175,
    -0.007204534386356869,
    0.004926781395729853,
    -0.003369801655439328,
    0.002305126326734928,
    -0.0015769367714301972,
    0.0010788252019162967,
    -0.0007380709389960052,
    0.000504953265834602,
    -0.0003454680251063077,
    0.00023635601564027053,
    -0.00016170622091974803,
    0.0001106337276874741,
    -7.569179582195066e-05,
    5.178575795222081e-05,
    -3.5430070947659604e-05,
    2.424006611860132e-05,
    -1.6584242271854135e-05,
    1.134638458466385e-05,
    -7.762817668462094e-06,
    5.3110609208898636e-06,
    -3.6336507898010456e-06,
    2.486022733129538e-06,
    -1.7008538854332607e-06,
    1.1636675363548843e-06,
    -7.96142543124197e-07,
    5.446941930669446e-07,
    -3.7266161283438227e-07,
    2.549626552021554e-07,
    -1.7443695117727745e-07,
    1.1934394829830244e-07,
    -8.165115189488409e-08,
];

/// `ψ(x)` for `x > 0`, finite. On `[1, 2]` the Taylor series at the zero
/// `x₀`, `ψ(x) = (x − x₀) · Σ cₖ (x − x₀)ᵏ⁻¹`, with `x − x₀` formed from
/// `x₀`'s two parts, so the result keeps its relative accuracy next to
/// the zero; below 1, `ψ(x) = ψ(x + 1) − 1/x`; between 2 and 10, the
/// recurrence down to `[1, 2]`, `ψ(x) = ψ(x − m) + Σ 1/(x − k)` (the
/// subtractions exact, the terms positive); from 10, the asymptotic series
/// `ln x − 1/(2x) − Σ B₂ₖ/(2k x²ᵏ)`.
fn digamma_positive(x: f64) -> f64 {
    if x < 1.0 {
        return digamma_positive(x + 1.0) - 1.0 / x;
    }
    if x <= 2.0 {
        let t = (x - DIGAMMA_ROOT.0) - DIGAMMA_ROOT.1;
        let g = DIGAMMA_TAYLOR.iter().rev().fold(0.0, |acc, &c| acc * t + c);
        return t * g;
    }
    if x < 10.0 {
        let mut y = x;
        let mut sum = 0.0;
        while y > 2.0 {
            y -= 1.0;
            sum += 1.0 / y;
        }
        return digamma_positive(y) + sum;
    }
    let w = 1.0 / (x * x);
    let mut xk = 1.0;
    let mut series = 0.0;
    for (i, b) in BERNOULLI.iter().enumerate() {
        xk *= w;
        let term = b / (2.0 * (i as f64 + 1.0)) * xk;
        if series + term == series {
            break;
        }
        series += term;
    }
    x.ln() - 0.5 / x - series
}

/// `Pₙ(c)` with `dⁿ/dyⁿ cot y = Pₙ(cot y)`: `P₀(c) = c`, `Pₖ₊₁(c) = -(1 +
/// c²) Pₖ'(c)`, evaluated by Horner's rule.
fn cot_derivative_poly(n: u32, c: f64) -> f64 {
    let mut p = vec![0.0, 1.0];
    for _ in 0..n {
        // p' then -(1 + c²) p'.
        let d: Vec<f64> = (1..p.len()).map(|i| i as f64 * p[i]).collect();
        let mut q = vec![0.0; d.len() + 2];
        for (i, &di) in d.iter().enumerate() {
            q[i] -= di;
            q[i + 2] -= di;
        }
        p = q;
    }
    p.iter().rev().fold(0.0, |acc, &a| acc * c + a)
}

/// IEEE 754-2019 `minimum`.
pub fn minimum(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        // Equal, possibly zeros of different sign: -0 is the smaller.
        if a.is_sign_negative() {
            a
        } else {
            b
        }
    } else if a < b {
        a
    } else {
        b
    }
}

/// IEEE 754-2019 `maximum`.
pub fn maximum(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == b {
        if a.is_sign_negative() {
            b
        } else {
            a
        }
    } else if a > b {
        a
    } else {
        b
    }
}

/// `x ^ n` for an integer `n`: square-and-multiply over the bits of `|n|`,
/// from the lowest bit, then one division for negative `n`. `x ^ 0` is 1
/// (also for NaN), `x ^ 1` is `x`, `x ^ 2` is `x * x`.
pub fn powi(x: f64, n: i32) -> f64 {
    let mut e = n.unsigned_abs();
    let mut base = x;
    let mut acc: Option<f64> = None;
    while e > 0 {
        if e & 1 == 1 {
            acc = Some(match acc {
                None => base,
                Some(a) => a * base,
            });
        }
        e >>= 1;
        if e > 0 {
            base *= base;
        }
    }
    let p = acc.unwrap_or(1.0);
    if n < 0 {
        1.0 / p
    } else {
        p
    }
}

/// Ordered f64 comparison: false when either operand is NaN, except `ne`.
pub fn fcmp(cond: CmpCond, a: f64, b: f64) -> bool {
    match cond {
        CmpCond::Eq => a == b,
        CmpCond::Ne => a != b,
        CmpCond::Lt => a < b,
        CmpCond::Le => a <= b,
        CmpCond::Gt => a > b,
        CmpCond::Ge => a >= b,
    }
}

/// Signed i64 comparison.
pub fn icmp(cond: CmpCond, a: i64, b: i64) -> bool {
    match cond {
        CmpCond::Eq => a == b,
        CmpCond::Ne => a != b,
        CmpCond::Lt => a < b,
        CmpCond::Le => a <= b,
        CmpCond::Gt => a > b,
        CmpCond::Ge => a >= b,
    }
}

/// Evaluates a two-operand i64 opcode.
pub fn binary_i64(op: Opcode, a: i64, b: i64) -> Result<i64, TrapKind> {
    use Opcode::*;
    match op {
        Iadd => Ok(a.wrapping_add(b)),
        Isub => Ok(a.wrapping_sub(b)),
        Imul => Ok(a.wrapping_mul(b)),
        Idiv | Irem => {
            if b == 0 {
                Err(TrapKind::DivisionByZero)
            } else if a == i64::MIN && b == -1 {
                Err(TrapKind::DivisionOverflow)
            } else if op == Idiv {
                Ok(a / b)
            } else {
                Ok(a % b)
            }
        }
        Band => Ok(a & b),
        Bor => Ok(a | b),
        Ishl | Sshr => {
            if !shift_in_range(b) {
                Err(TrapKind::ShiftOutOfRange { amount: b })
            } else if op == Ishl {
                Ok(a << b)
            } else {
                Ok(a >> b)
            }
        }
        _ => panic!("{op} is not a binary i64 operation"),
    }
}

/// Is `b` a valid shift amount, `0..=63`?
pub fn shift_in_range(b: i64) -> bool {
    (0..=63).contains(&b)
}

/// The f64 bounds of `ftosi`: `x` converts if `FTOSI_MIN <= x < FTOSI_END`
/// (`-2^63` and `2^63`, both exact in f64). NaN fails both comparisons.
pub const FTOSI_MIN: f64 = -9_223_372_036_854_775_808.0;
/// See [`FTOSI_MIN`].
pub const FTOSI_END: f64 = 9_223_372_036_854_775_808.0;

/// f64 to i64, truncating toward zero (`i64(x)` in the language); NaN and
/// values outside `[-2^63, 2^63)` are `ConversionOutOfRange`.
pub fn ftosi(x: f64) -> Result<i64, TrapKind> {
    if (FTOSI_MIN..FTOSI_END).contains(&x) {
        Ok(x as i64)
    } else {
        Err(TrapKind::ConversionOutOfRange { bits: x.to_bits() })
    }
}

/// i64 to f64, rounding to nearest (Rust's `as`).
pub fn sitof(x: i64) -> f64 {
    x as f64
}

/// The bits of `x`, as an i64.
pub fn tobits(x: f64) -> i64 {
    x.to_bits() as i64
}

/// The f64 whose bits are `x`.
pub fn frombits(x: i64) -> f64 {
    f64::from_bits(x as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powi_matches_repeated_multiplication_for_small_exponents() {
        let x = 1.1f64;
        assert_eq!(powi(x, 0), 1.0);
        assert_eq!(powi(x, 1), x);
        assert_eq!(powi(x, 2), x * x);
        assert_eq!(powi(x, 3), x * (x * x));
        assert_eq!(powi(x, -2), 1.0 / (x * x));
        assert_eq!(powi(f64::NAN, 0), 1.0);
        assert_eq!(powi(2.0, i32::MIN), 0.0);
    }

    #[test]
    fn min_max_propagate_nan_and_order_zeros() {
        assert!(minimum(f64::NAN, 1.0).is_nan());
        assert!(maximum(1.0, f64::NAN).is_nan());
        assert!(minimum(-0.0, 0.0).is_sign_negative());
        assert!(minimum(0.0, -0.0).is_sign_negative());
        assert!(maximum(-0.0, 0.0).is_sign_positive());
        assert!(maximum(0.0, -0.0).is_sign_positive());
        assert_eq!(minimum(1.0, 2.0), 1.0);
        assert_eq!(maximum(1.0, 2.0), 2.0);
    }

    #[test]
    fn sign_keeps_zero_and_nan() {
        assert_eq!(sign(3.0), 1.0);
        assert_eq!(sign(-3.0), -1.0);
        assert!(sign(-0.0).is_sign_negative() && sign(-0.0) == 0.0);
        assert!(sign(f64::NAN).is_nan());
    }

    /// `|got - want|` in units of `want`'s ulp (`EPSILON · |want|`).
    fn ulps(got: f64, want: f64) -> f64 {
        (got - want).abs() / (f64::EPSILON * want.abs())
    }

    /// polygamma (digamma: n = 0) against mpmath at 40 digits, rounded to
    /// the nearest double: fixed points (digamma's zero, both sides of the
    /// 2 and 10 seams of its method, the reflection, large and tiny x) and
    /// seeded random ones.
    #[test]
    fn polygamma_against_mpmath() {
        let table: &[(f64, f64, f64)] = &[
            (0.0, 1.0, -0.5772156649015329),
            (0.0, 0.5, -1.9635100260214235),
            (0.0, 2.0, 0.42278433509846713),
            (0.0, 1.4616321449683622, -9.241265521729427e-17),
            (0.0, 1.46, -0.0015805619870834522),
            (0.0, 1.5, 0.03648997397857652),
            (0.0, 3.0, 0.9227843350984671),
            (0.0, 0.1, -10.423754940411076),
            (0.0, 1e-08, -100000000.57721564),
            (0.0, 7.25, 1.910453526883736),
            (0.0, 9.99, 2.250700372831201),
            (0.0, 10.0, 2.251752589066721),
            (0.0, 123.456, 4.811829323828985),
            (0.0, 1000000000000000.0, 34.538776394910684),
            (0.0, -0.5, 0.03648997397857652),
            (0.0, -2.3, 3.3173231575618227),
            (0.0, -1000000.5, 13.815511557963816),
            (1.0, 1.0, 1.6449340668482264),
            (1.0, 0.5, 4.934802200544679),
            (1.0, 1e-05, 10000000001.644909),
            (1.0, 7.3, 0.1467957681314271),
            (1.0, 55.0, 0.018348109124868422),
            (1.0, -0.5, 8.934802200544679),
            (1.0, -2.3, 14.725912160961292),
            (2.0, 1.0, -2.4041138063191885),
            (2.0, 0.25, -129.32773993753693),
            (2.0, -3.7, -68.89345468867354),
            (2.0, 12.0, -0.007547205368998912),
            (3.0, 2.5, 0.22390584881725206),
            (5.0, 0.3, 164634.84609922304),
            (10.0, 4.0, -0.9519244156357158),
            (20.0, 1.5, -487772949462609.9),
            (4.0, 100.5, -5.999500061238378e-08),
            (0.0, 4.344658071219761, 1.349471269368374),
            (0.0, 5.770963180559515, 1.6637035540843013),
            (0.0, 5.009261993001921, 1.5081654702304823),
            (0.0, 5.36664345286924, 1.5841510069111933),
            (0.0, 4.9200936020992545, 1.4882749399307862),
            (0.0, 7.895892858467307, 2.00168415435501),
            (0.0, 3.1136760288620384, 0.9667113264351246),
            (0.0, 7.623601130000775, 1.9642316592307278),
            (0.0, 0.13143919979186627, -7.98767076298144),
            (0.0, 3.6315040205477533, 1.1456902386640546),
            (0.0, 4.027409574865651, 1.2638672217729403),
            (0.0, 1.7119867052186803, 0.21801297859656904),
            (3.0, 12.062053342436698, 0.001289164187584719),
            (1.0, 15.795377771899073, 0.06535597501348757),
            (3.0, 5.107444798994412, 0.019984927349716446),
            (1.0, 16.1623546446909, 0.06382570173452737),
            (3.0, 12.637572086945314, 0.0011147224369654487),
            (2.0, 9.162927149190125, -0.013281056551143797),
        ];
        let mut worst = 0.0f64;
        for &(n, x, want) in table {
            let got = polygamma(n, x);
            let e = ulps(got, want);
            // Measured: at most 1.1 ulp over this table.
            let bound = 2.0 + n / 4.0;
            assert!(
                e <= bound,
                "polygamma({n}, {x}) = {got}, want {want}: {e} ulp"
            );
            worst = worst.max(e);
        }
        assert!(worst <= 2.0, "{worst}");
        // Exact values by hand: ψ(1) = -γ, ψ₁(1) = π²/6, ψ(1/2) = -γ - 2 ln 2.
        assert!(ulps(polygamma(0.0, 1.0), -0.577_215_664_901_532_9) <= 1.0);
        assert!(ulps(polygamma(1.0, 1.0), std::f64::consts::PI.powi(2) / 6.0) <= 2.0);
        assert!(ulps(polygamma(0.0, 0.5), -1.963_510_026_021_423_5) <= 2.0);
        // digamma is polygamma 0, bit for bit.
        for x in [0.3, 1.7, -2.5, 40.0] {
            assert_eq!(
                unary_f64(Opcode::Digamma, x).to_bits(),
                polygamma(0.0, x).to_bits()
            );
        }
    }

    #[test]
    fn polygamma_poles_orders_and_infinities() {
        // Poles: odd orders +inf; even orders NaN, ∓inf at ±0.
        assert_eq!(polygamma(0.0, 0.0), f64::NEG_INFINITY);
        assert_eq!(polygamma(0.0, -0.0), f64::INFINITY);
        assert_eq!(polygamma(2.0, 0.0), f64::NEG_INFINITY);
        assert!(polygamma(0.0, -3.0).is_nan());
        assert!(polygamma(2.0, -1.0).is_nan());
        assert_eq!(polygamma(1.0, 0.0), f64::INFINITY);
        assert_eq!(polygamma(1.0, -2.0), f64::INFINITY);
        assert_eq!(polygamma(3.0, -0.0), f64::INFINITY);
        assert!(polygamma(0.0, -1e300).is_nan());
        // Infinities and NaN.
        assert_eq!(polygamma(0.0, f64::INFINITY), f64::INFINITY);
        assert_eq!(polygamma(1.0, f64::INFINITY), 0.0);
        assert!(polygamma(0.0, f64::NEG_INFINITY).is_nan());
        assert!(polygamma(0.0, f64::NAN).is_nan());
        // Orders: integers 0..=100 only.
        for n in [-1.0, 0.5, 101.0, f64::NAN, f64::INFINITY] {
            assert!(polygamma(n, 1.5).is_nan(), "order {n}");
        }
        assert!(polygamma(100.0, 1.5).is_finite());
        // Overflow to inf near the pole at high order, not NaN.
        assert_eq!(polygamma(99.0, 1e-5), f64::INFINITY);
        // The recurrence ψ⁽ⁿ⁾(x + 1) = ψ⁽ⁿ⁾(x) + (-1)ⁿ n!/xⁿ⁺¹ across the
        // method's seams, to a few ulp.
        for n in 0..4u32 {
            let fact: f64 = (1..=n).map(f64::from).product();
            let sign = if n % 2 == 0 { 1.0 } else { -1.0 };
            for x in [0.75, 1.5, 1.99, 2.5, 9.5, 9.99, 10.5, -0.25, -4.5] {
                let nf = f64::from(n);
                let lhs = polygamma(nf, x + 1.0);
                let (a, b) = (polygamma(nf, x), sign * fact / x.powi(n as i32 + 1));
                // Relative to the terms: the sum may cancel.
                let tol = 8.0 * f64::EPSILON * (a.abs() + b.abs());
                assert!(
                    (lhs - (a + b)).abs() <= tol,
                    "n={n}, x={x}: {lhs} vs {a} + {b}"
                );
            }
        }
    }

    /// Each function accepts every opcode its predicate names (a new row of
    /// the table without its semantics panics here).
    #[test]
    fn every_scalar_opcode_has_its_semantics() {
        let mut n = 0;
        for &op in Opcode::ALL {
            if is_unary_f64(op) {
                let _ = unary_f64(op, 0.5);
                n += 1;
            }
            if is_binary_f64(op) {
                let _ = binary_f64(op, 0.5, 0.25);
                n += 1;
            }
            if is_binary_i64(op) {
                let _ = binary_i64(op, 7, 2);
                n += 1;
            }
        }
        assert!(n > 30, "{n}");
    }

    #[test]
    fn integer_division_traps() {
        assert_eq!(
            binary_i64(Opcode::Idiv, 1, 0),
            Err(TrapKind::DivisionByZero)
        );
        assert_eq!(
            binary_i64(Opcode::Irem, 1, 0),
            Err(TrapKind::DivisionByZero)
        );
        assert_eq!(
            binary_i64(Opcode::Idiv, i64::MIN, -1),
            Err(TrapKind::DivisionOverflow)
        );
        assert_eq!(binary_i64(Opcode::Irem, -7, 2), Ok(-1));
        assert_eq!(binary_i64(Opcode::Iadd, i64::MAX, 1), Ok(i64::MIN));
    }

    #[test]
    fn bitwise_and_shifts() {
        assert_eq!(binary_i64(Opcode::Band, 12, 10), Ok(8));
        assert_eq!(binary_i64(Opcode::Bor, 12, 10), Ok(14));
        assert_eq!(binary_i64(Opcode::Band, -1, i64::MIN), Ok(i64::MIN));
        assert_eq!(binary_i64(Opcode::Ishl, 1, 63), Ok(i64::MIN));
        assert_eq!(binary_i64(Opcode::Ishl, 3, 0), Ok(3));
        assert_eq!(binary_i64(Opcode::Sshr, -8, 1), Ok(-4));
        assert_eq!(binary_i64(Opcode::Sshr, i64::MIN, 63), Ok(-1));
        assert_eq!(binary_i64(Opcode::Sshr, 7, 63), Ok(0));
        for amount in [64, -1, i64::MIN, i64::MAX] {
            for op in [Opcode::Ishl, Opcode::Sshr] {
                assert_eq!(
                    binary_i64(op, 1, amount),
                    Err(TrapKind::ShiftOutOfRange { amount })
                );
            }
        }
    }

    #[test]
    fn ftosi_truncates_and_traps_outside_i64() {
        assert_eq!(ftosi(2.9), Ok(2));
        assert_eq!(ftosi(-2.9), Ok(-2));
        assert_eq!(ftosi(-0.0), Ok(0));
        assert_eq!(ftosi(FTOSI_MIN), Ok(i64::MIN));
        assert_eq!(ftosi(-9_223_372_036_854_775_807.0), Ok(i64::MIN));
        // The largest f64 below 2^63.
        let below = f64::from_bits(FTOSI_END.to_bits() - 1);
        assert_eq!(ftosi(below), Ok(9_223_372_036_854_774_784));
        for x in [
            FTOSI_END,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -1e19,
            1e300,
        ] {
            assert_eq!(
                ftosi(x),
                Err(TrapKind::ConversionOutOfRange { bits: x.to_bits() })
            );
        }
        let below_min = f64::from_bits(FTOSI_MIN.to_bits() + 1);
        assert!(below_min < FTOSI_MIN);
        assert!(ftosi(below_min).is_err());
    }
}
