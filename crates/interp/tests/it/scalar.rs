//! Straight-line code: arithmetic, conversions, comparisons, `select`,
//! `powi` and every intrinsic.

use crate::util::*;
use adze_ir::{semantics, CmpCond, FuncBuilder, FuncId, Module, Opcode, Val, Value};
use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI};

#[test]
fn f64_arithmetic() {
    // (x + y) * (x - y) / y and -x, at x = 3, y = 2: 5 * 1 / 2 = 2.5 and -3.
    let mut m = Module::new();
    let id = func(&mut m, "@arith(x: f64, y: f64) -> (f64, f64)", |fb, p| {
        let s = fb.fadd(p[0], p[1]);
        let d = fb.fsub(p[0], p[1]);
        let prod = fb.fmul(s, d);
        let q = fb.fdiv(prod, p[1]);
        let n = fb.fneg(p[0]);
        fb.ret(&[q, n]);
    });
    let out = run(&m, id, &[Val::F64(3.0), Val::F64(2.0)]);
    assert_eq!(out.results, vec![Val::F64(2.5), Val::F64(-3.0)]);
    assert_eq!(out.args, vec![Val::F64(3.0), Val::F64(2.0)]);
    // IEEE: (-1 + 0) * (-1 - 0) / +0 = 1 / +0 = +inf; 0 * 0 / 0 is NaN; -(+0) is -0.
    let out = run(&m, id, &[Val::F64(-1.0), Val::F64(0.0)]);
    assert_bits(f64_of(&out.results[0]), f64::INFINITY);
    let out = run(&m, id, &[Val::F64(0.0), Val::F64(0.0)]);
    assert!(f64_of(&out.results[0]).is_nan());
    assert_bits(f64_of(&out.results[1]), -0.0);
}

fn f64_of(v: &Val) -> f64 {
    match v {
        Val::F64(x) => *x,
        other => panic!("not an f64: {other:?}"),
    }
}

#[test]
fn i64_arithmetic_truncates_and_wraps() {
    let mut m = Module::new();
    let header = "@iarith(a: i64, b: i64) -> (i64, i64, i64, i64, i64, i64)";
    let id = func(&mut m, header, |fb, p| {
        let (a, b) = (p[0], p[1]);
        let add = fb.iadd(a, b);
        let sub = fb.isub(a, b);
        let mul = fb.imul(a, b);
        let div = fb.binary(Opcode::Idiv, a, b);
        let rem = fb.binary(Opcode::Irem, a, b);
        let neg = fb.unary(Opcode::Ineg, a);
        fb.ret(&[add, sub, mul, div, rem, neg]);
    });
    let vals = |xs: [i64; 6]| xs.iter().map(|&x| Val::I64(x)).collect::<Vec<_>>();
    // Results: add, sub, mul, div (truncated), rem (sign of the dividend), -a.
    let rows = [
        ((-7, 2), [-5, -9, -14, -3, -1, 7]),
        ((7, -2), [5, 9, -14, -3, 1, -7]),
        // MAX + 2 wraps to MIN + 1, MAX * 2 wraps to -2.
        (
            (i64::MAX, 2),
            [i64::MIN + 1, i64::MAX - 2, -2, i64::MAX / 2, 1, -i64::MAX],
        ),
        // -MIN wraps to MIN.
        (
            (i64::MIN, 1),
            [i64::MIN + 1, i64::MAX, i64::MIN, i64::MIN, 0, i64::MIN],
        ),
    ];
    for ((a, b), want) in rows {
        let got = results(&m, id, &[Val::I64(a), Val::I64(b)]);
        assert_eq!(got, vals(want), "iarith({a}, {b})");
    }
}

#[test]
fn conversions_and_constants() {
    let mut m = Module::new();
    let id = func(
        &mut m,
        "@conv(n: i64, c: bool) -> (f64, bool, f64, i64, bool)",
        |fb, p| {
            let x = fb.sitof(p[0]);
            let nc = fb.not(p[1]);
            let k = fb.fconst(-0.0);
            let j = fb.iconst(-42);
            let t = fb.bconst(true);
            fb.ret(&[x, nc, k, j, t]);
        },
    );
    // 2^53 + 1 is not an f64: it rounds to nearest even, 2^53.
    let out = results(&m, id, &[Val::I64((1 << 53) + 1), Val::Bool(false)]);
    assert_eq!(out[0], Val::F64(9007199254740992.0));
    assert_eq!(out[1], Val::Bool(true));
    assert_bits(f64_of(&out[2]), -0.0);
    assert_eq!(out[3], Val::I64(-42));
    assert_eq!(out[4], Val::Bool(true));
    let out = results(&m, id, &[Val::I64(-3), Val::Bool(true)]);
    assert_eq!(out[0], Val::F64(-3.0));
    assert_eq!(out[1], Val::Bool(false));
}

#[test]
fn powi_is_binary_powering() {
    let mut m = Module::new();
    let exps = [0, 1, 2, 3, 10, -2];
    let id = func(
        &mut m,
        "@powers(x: f64) -> (f64, f64, f64, f64, f64, f64)",
        |fb, p| {
            let rs: Vec<_> = exps.iter().map(|&n| fb.powi(p[0], n)).collect();
            fb.ret(&rs);
        },
    );
    assert_eq!(
        results(&m, id, &[Val::F64(2.0)]),
        [1.0, 2.0, 4.0, 8.0, 1024.0, 0.25].map(Val::F64).to_vec()
    );
    // NaN ^ 0 is 1.
    let out = results(&m, id, &[Val::F64(f64::NAN)]);
    assert_eq!(out[0], Val::F64(1.0));
    assert!(f64_of(&out[1]).is_nan());
    // 1.1 ^ 3 is 1.1 * (1.1 * 1.1), as semantics::powi defines.
    let out = results(&m, id, &[Val::F64(1.1)]);
    assert_bits(f64_of(&out[3]), 1.1 * (1.1 * 1.1));
}

#[test]
fn comparisons() {
    let mut m = Module::new();
    let fcmps = cmp_all(&mut m, "fcmps", "f64", |fb, c, a, b| fb.fcmp(c, a, b));
    let icmps = cmp_all(&mut m, "icmps", "i64", |fb, c, a, b| fb.icmp(c, a, b));
    // Results in CmpCond::ALL order: eq ne lt le gt ge.
    let rows = [
        (
            "fcmps 1 2",
            fcmps,
            [Val::F64(1.0), Val::F64(2.0)],
            [false, true, true, true, false, false],
        ),
        (
            "fcmps -0 +0",
            fcmps,
            [Val::F64(-0.0), Val::F64(0.0)],
            [true, false, false, true, false, true],
        ),
        // Ordered: all false with NaN, except ne.
        (
            "fcmps NaN NaN",
            fcmps,
            [Val::F64(f64::NAN), Val::F64(f64::NAN)],
            [false, true, false, false, false, false],
        ),
        // Signed: MIN < -1.
        (
            "icmps MIN -1",
            icmps,
            [Val::I64(i64::MIN), Val::I64(-1)],
            [false, true, true, true, false, false],
        ),
        (
            "icmps 5 5",
            icmps,
            [Val::I64(5), Val::I64(5)],
            [true, false, false, true, false, true],
        ),
    ];
    for (name, id, args, want) in rows {
        assert_eq!(
            results(&m, id, &args),
            want.map(Val::Bool).to_vec(),
            "{name}"
        );
    }
}

/// `name(a: ty, b: ty)` returns `cmp(c, a, b)` for every `c` in
/// [`CmpCond::ALL`].
fn cmp_all(
    m: &mut Module,
    name: &str,
    ty: &str,
    cmp: fn(&mut FuncBuilder, CmpCond, Value, Value) -> Value,
) -> FuncId {
    let bools = vec!["bool"; CmpCond::ALL.len()].join(", ");
    func(
        m,
        &format!("@{name}(a: {ty}, b: {ty}) -> ({bools})"),
        |fb, p| {
            let rs: Vec<_> = CmpCond::ALL
                .iter()
                .map(|&c| cmp(fb, c, p[0], p[1]))
                .collect();
            fb.ret(&rs);
        },
    )
}

#[test]
fn select_on_every_scalar_type() {
    let mut m = Module::new();
    let id = func(
        &mut m,
        "@sel(c: bool, x: f64, y: f64, j: i64, k: i64) -> (f64, i64, bool)",
        |fb, p| {
            let x = fb.select(p[0], p[1], p[2]);
            let j = fb.select(p[0], p[3], p[4]);
            let nc = fb.not(p[0]);
            let c = fb.select(p[0], p[0], nc);
            fb.ret(&[x, j, c]);
        },
    );
    let rest = [Val::F64(1.5), Val::F64(-2.5), Val::I64(7), Val::I64(-8)];
    let rows = [
        (true, [Val::F64(1.5), Val::I64(7), Val::Bool(true)]),
        (false, [Val::F64(-2.5), Val::I64(-8), Val::Bool(true)]),
    ];
    for (c, want) in rows {
        let args = [&[Val::Bool(c)][..], &rest].concat();
        assert_eq!(results(&m, id, &args), want, "select on {c}");
    }
}

/// One function per intrinsic, run on the same inputs; each result must
/// equal, bit for bit, what `semantics` defines.
#[test]
fn every_intrinsic_goes_through_semantics() {
    let inputs = [
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.0,
        -1.5,
        2.5,
        -2.5,
        3.0,
        100.0,
        1e-300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    let mut m = Module::new();
    let mut count = 0;
    for &op in Opcode::ALL.iter().filter(|op| op.is_intrinsic()) {
        let arity = op.fixed_signature().unwrap().0.len();
        let params: Vec<String> = (0..arity).map(|k| format!("x{k}: f64")).collect();
        let header = format!("@{}({}) -> f64", op.name(), params.join(", "));
        let id = func(&mut m, &header, |fb, p| {
            let r = if arity == 1 {
                fb.unary(op, p[0])
            } else {
                fb.binary(op, p[0], p[1])
            };
            fb.ret(&[r]);
        });
        for &x in &inputs {
            if arity == 1 {
                let got = run_f64(&m, id, &[Val::F64(x)]);
                assert_bits(got, semantics::unary_f64(op, x));
            } else {
                for &y in &inputs {
                    let got = run_f64(&m, id, &[Val::F64(x), Val::F64(y)]);
                    assert_bits(got, semantics::binary_f64(op, x, y));
                }
            }
        }
        count += 1;
    }
    assert!(count >= 26, "the language has at least 26 intrinsics");

    // A few values worked out by hand.
    let one = |name: &str, x: f64| run_f64(&m, m.get(name).unwrap(), &[Val::F64(x)]);
    let two =
        |name: &str, x: f64, y: f64| run_f64(&m, m.get(name).unwrap(), &[Val::F64(x), Val::F64(y)]);
    assert_eq!(one("sqrt", 16.0), 4.0);
    assert_eq!(one("abs", -2.5), 2.5);
    assert_eq!(one("floor", -1.5), -2.0);
    assert_eq!(one("ceil", -1.5), -1.0);
    assert_eq!(one("round", 2.5), 3.0);
    assert_eq!(one("round", -2.5), -3.0);
    assert_eq!(one("sign", -3.0), -1.0);
    assert_eq!(one("sign", 0.25), 1.0);
    assert_bits(one("sign", -0.0), -0.0);
    assert!(one("sign", f64::NAN).is_nan());
    assert_eq!(one("exp", 0.0), 1.0);
    assert_eq!(one("expm1", 0.0), 0.0);
    assert_eq!(one("log", 1.0), 0.0);
    assert_eq!(one("log1p", 0.0), 0.0);
    assert!(one("log", -1.0).is_nan());
    assert_eq!(one("log", 0.0), f64::NEG_INFINITY);
    assert_eq!(one("sin", 0.0), 0.0);
    assert_eq!(one("cos", 0.0), 1.0);
    assert_eq!(one("tan", 0.0), 0.0);
    assert_eq!(one("asin", 1.0), FRAC_PI_2);
    assert_eq!(one("acos", 1.0), 0.0);
    assert_eq!(one("atan", 1.0), FRAC_PI_4);
    assert_eq!(one("sinh", 0.0), 0.0);
    assert_eq!(one("cosh", 0.0), 1.0);
    assert_eq!(one("tanh", f64::INFINITY), 1.0);
    assert_eq!(one("cbrt", -8.0), -2.0);
    assert_eq!(one("erf", f64::INFINITY), 1.0);
    assert_eq!(one("erf", f64::NEG_INFINITY), -1.0);
    assert_bits(one("erf", -0.0), -0.0);
    assert!(one("erf", f64::NAN).is_nan());
    // erf within about an ulp of the true values (the nearest doubles of
    // their 20-digit expansions); and odd.
    for (x, want) in [
        (0.5, 0.520_499_877_813_046_5),
        (1.0, 0.842_700_792_949_714_9),
        (2.0, 0.995_322_265_018_952_7),
        (0.1, 0.112_462_916_018_284_9),
    ] {
        let got = one("erf", x);
        assert!(
            (got - want).abs() <= f64::EPSILON * want,
            "erf({x}) = {got}"
        );
        assert_bits(one("erf", -x), -got);
    }
    // Issue #16's intrinsics: exact values and edges.
    assert_eq!(one("erfc", 0.0), 1.0);
    assert_eq!(one("erfc", f64::NEG_INFINITY), 2.0);
    assert_eq!(one("erfc", f64::INFINITY), 0.0);
    // No cancellation: erfc(10) = 2.0884875837625448e-45 (not 1 - erf(10) = 0).
    let got = one("erfc", 10.0);
    assert!(
        (got - 2.088_487_583_762_545e-45).abs() <= 2.0 * f64::EPSILON * got,
        "erfc(10) = {got}"
    );
    assert_eq!(one("log2", 1024.0), 10.0);
    assert_eq!(one("log2", 0.0), f64::NEG_INFINITY);
    assert!(one("log2", -1.0).is_nan());
    assert_eq!(one("log10", 1000.0), 3.0);
    assert_eq!(one("log10", 1e-5), -5.0);
    assert_eq!(one("exp2", 10.0), 1024.0);
    assert_eq!(one("exp2", -1074.0), f64::from_bits(1));
    assert_eq!(one("asinh", 0.0), 0.0);
    assert_bits(one("asinh", -0.0), -0.0);
    assert_eq!(one("acosh", 1.0), 0.0);
    assert!(one("acosh", 0.5).is_nan());
    assert_eq!(one("atanh", 1.0), f64::INFINITY);
    assert_eq!(one("atanh", -1.0), f64::NEG_INFINITY);
    assert!(one("atanh", 1.5).is_nan());
    // Within about an ulp of the true values; asinh and atanh odd.
    for (name, x, want) in [
        ("asinh", 1.0, 0.881_373_587_019_543),
        ("acosh", 2.0, 1.316_957_896_924_816_7),
        ("atanh", 0.5, 0.549_306_144_334_054_8),
        ("erfc", 1.0, 0.157_299_207_050_285_13),
        // acosh just above 1 (of the double nearest 1 + 1e-12): no digits lost.
        ("acosh", 1.0 + 1e-12, 1.414_276_423_180_542_4e-6),
    ] {
        let got = one(name, x);
        assert!(
            (got - want).abs() <= 2.0 * f64::EPSILON * want,
            "{name}({x}) = {got}, want {want}"
        );
    }
    assert_bits(one("asinh", -1.0), -one("asinh", 1.0));
    assert_bits(one("atanh", -0.5), -one("atanh", 0.5));
    assert_eq!(one("lgamma", 1.0), 0.0);
    assert_eq!(one("lgamma", 2.0), 0.0);
    assert_eq!(one("lgamma", 0.0), f64::INFINITY);
    assert_eq!(one("lgamma", -3.0), f64::INFINITY);
    let got = one("lgamma", 0.5); // ln √π
    assert!((got - 0.572_364_942_924_700_1).abs() <= 2.0 * f64::EPSILON * got);
    assert_bits(one("digamma", 2.5), two("polygamma", 0.0, 2.5));
    assert_eq!(one("digamma", 0.0), f64::NEG_INFINITY);
    assert!(two("polygamma", 0.5, 1.0).is_nan());
    assert_eq!(two("hypot", 3.0, 4.0), 5.0);
    assert_eq!(two("pow", 2.0, 10.0), 1024.0);
    assert_eq!(two("pow", 9.0, 0.5), 3.0);
    assert_eq!(two("atan2", 0.0, -1.0), PI);
    assert_eq!(two("atan2", 1.0, 1.0), FRAC_PI_4);
    assert_eq!(two("min", 1.0, 2.0), 1.0);
    assert_eq!(two("max", 1.0, 2.0), 2.0);
    assert_bits(two("min", 0.0, -0.0), -0.0);
    assert_bits(two("max", -0.0, 0.0), 0.0);
    assert!(two("min", f64::NAN, 1.0).is_nan());
    assert!(two("max", 1.0, f64::NAN).is_nan());
}
