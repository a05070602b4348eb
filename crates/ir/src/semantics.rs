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
        Min => minimum(a, b),
        Max => maximum(a, b),
        _ => panic!("{op} is not a binary f64 operation"),
    }
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
