//! Every differentiable opcode: the derivative at ordinary points against the
//! formula and against central finite differences, and at the edge points
//! against the choices documented in `partials.rs`.

use crate::support::*;
use adze_ir::{ArgActivity, Module, Opcode, Val};

const H: f64 = 1e-6;
const FD_TOL: f64 = 1e-6;
/// The derivative IR computes the formula with a few more roundings.
const FORMULA_TOL: f64 = 1e-14;

fn unary_module(op: &str) -> Module {
    parse(&format!(
        "function @f(x: f64) -> f64 {{\nblock0(v0: f64):\n    v1 = {op} v0\n    return v1\n}}\n"
    ))
}

fn binary_module(op: &str) -> Module {
    parse(&format!(
        "function @f(x: f64, y: f64) -> f64 {{\nblock0(v0: f64, v1: f64):\n    v2 = {op} v0, v1\n    return v2\n}}\n"
    ))
}

/// d/dx of `op x` at `x`, with tangent 1.
fn d_unary(m: &mut Module, x: f64) -> f64 {
    let d = derive(m, "f", &[ArgActivity::Dual], 1);
    f64s(&run(m, d, &[Val::F64(x), Val::F64(1.0)]))[1]
}

/// The partials of `op x, y` at (x, y), each with only that operand active.
fn d_binary(m: &mut Module, x: f64, y: f64) -> (f64, f64) {
    use ArgActivity::{Const, Dual};
    let dx = derive(m, "f", &[Dual, Const], 1);
    let dy = derive(m, "f", &[Const, Dual], 1);
    let dx = f64s(&run(m, dx, &[Val::F64(x), Val::F64(1.0), Val::F64(y)]))[1];
    let dy = f64s(&run(m, dy, &[Val::F64(x), Val::F64(y), Val::F64(1.0)]))[1];
    (dx, dy)
}

/// Both operands dual: the sum of the partials weighted by the tangents.
fn d_binary_both(m: &mut Module, x: f64, tx: f64, y: f64, ty: f64) -> f64 {
    let d = derive(m, "f", &[ArgActivity::Dual, ArgActivity::Dual], 1);
    f64s(&run(
        m,
        d,
        &[Val::F64(x), Val::F64(tx), Val::F64(y), Val::F64(ty)],
    ))[1]
}

fn check_unary(op: &str, points: &[f64], formula: fn(f64) -> f64) {
    let mut m = unary_module(op);
    let f = m.get("f").unwrap();
    for &x in points {
        let got = d_unary(&mut m, x);
        assert_close(
            got,
            formula(x),
            FORMULA_TOL,
            &format!("{op}'({x}) vs formula"),
        );
        let fd = central_difference(&m, f, &[Val::F64(x)], &[Val::F64(1.0)], H)[0];
        assert_close(
            got,
            fd,
            FD_TOL,
            &format!("{op}'({x}) vs finite differences"),
        );
    }
}

fn check_binary(op: &str, points: &[(f64, f64)], formula: fn(f64, f64) -> (f64, f64)) {
    let mut m = binary_module(op);
    let f = m.get("f").unwrap();
    for &(x, y) in points {
        let (dx, dy) = d_binary(&mut m, x, y);
        let (fx, fy) = formula(x, y);
        assert_close(
            dx,
            fx,
            FORMULA_TOL,
            &format!("d{op}/dx({x}, {y}) vs formula"),
        );
        assert_close(
            dy,
            fy,
            FORMULA_TOL,
            &format!("d{op}/dy({x}, {y}) vs formula"),
        );
        let args = [Val::F64(x), Val::F64(y)];
        let fdx = central_difference(&m, f, &args, &[Val::F64(1.0), Val::F64(0.0)], H)[0];
        let fdy = central_difference(&m, f, &args, &[Val::F64(0.0), Val::F64(1.0)], H)[0];
        assert_close(
            dx,
            fdx,
            FD_TOL,
            &format!("d{op}/dx({x}, {y}) vs finite differences"),
        );
        assert_close(
            dy,
            fdy,
            FD_TOL,
            &format!("d{op}/dy({x}, {y}) vs finite differences"),
        );
    }
}

const POINTS: &[f64] = &[-2.3, -0.7, 0.3, 1.1, 2.9];
const UNIT: &[f64] = &[-0.9, -0.4, 0.2, 0.75];
const POSITIVE: &[f64] = &[0.05, 0.6, 1.7, 13.0];

#[test]
fn trigonometric() {
    check_unary("sin", POINTS, |x| x.cos());
    check_unary("cos", POINTS, |x| -x.sin());
    check_unary("tan", &[-1.2, -0.3, 0.4, 1.3], |x| {
        1.0 / (x.cos() * x.cos())
    });
    check_unary("asin", UNIT, |x| 1.0 / (1.0 - x * x).sqrt());
    check_unary("acos", UNIT, |x| -1.0 / (1.0 - x * x).sqrt());
    check_unary("atan", POINTS, |x| 1.0 / (1.0 + x * x));
}

#[test]
fn hyperbolic_and_exponential() {
    check_unary("sinh", POINTS, |x| x.cosh());
    check_unary("cosh", POINTS, |x| x.sinh());
    check_unary("tanh", POINTS, |x| 1.0 / (x.cosh() * x.cosh()));
    check_unary("exp", POINTS, |x| x.exp());
    check_unary("expm1", POINTS, |x| x.exp());
    check_unary("log", POSITIVE, |x| 1.0 / x);
    check_unary("log1p", &[-0.5, 0.1, 2.0], |x| 1.0 / (1.0 + x));
    check_unary("sqrt", POSITIVE, |x| 0.5 / x.sqrt());
    check_unary("cbrt", &[-8.0, -0.3, 0.2, 27.0], |x| {
        1.0 / (3.0 * x.cbrt().powi(2))
    });
}

#[test]
fn error_function() {
    use std::f64::consts::FRAC_2_SQRT_PI;
    check_unary("erf", &[-2.3, -0.7, 0.0, 0.3, 1.1, 2.9, 5.5], |x| {
        FRAC_2_SQRT_PI * (-x * x).exp()
    });
    // The partial is emitted as these very operations: the same bits.
    let mut m = unary_module("erf");
    for x in [-3.0, -0.25, 0.5, 1.0, 7.0, 26.0, 1e-300] {
        assert_eq!(
            d_unary(&mut m, x).to_bits(),
            (FRAC_2_SQRT_PI * (-(x * x)).exp()).to_bits(),
            "erf'({x})"
        );
    }
    // By hand: 2/√π = 1.1283791670955126, 2/√π · e^-1 = 0.41510749742059472,
    // 2/√π · e^-4 = 0.020666985354092053.
    let two_over_sqrt_pi = 2.0 / std::f64::consts::PI.sqrt();
    assert_close(d_unary(&mut m, 0.0), two_over_sqrt_pi, 1e-16, "erf'(0)");
    assert_close(
        d_unary(&mut m, 1.0),
        0.415_107_497_420_594_7,
        1e-15,
        "erf'(1)",
    );
    assert_close(
        d_unary(&mut m, -2.0),
        0.020_666_985_354_092_053,
        1e-15,
        "erf'(-2)",
    );
}

#[test]
fn issue_16_intrinsics() {
    use std::f64::consts::{FRAC_2_SQRT_PI, LN_10, LN_2};
    check_unary("erfc", &[-2.3, -0.7, 0.0, 0.3, 1.1, 2.9, 5.5], |x| {
        -FRAC_2_SQRT_PI * (-x * x).exp()
    });
    check_unary("log2", POSITIVE, |x| 1.0 / (x * LN_2));
    check_unary("log10", POSITIVE, |x| 1.0 / (x * LN_10));
    check_unary("exp2", POINTS, |x| LN_2 * x.exp2());
    check_unary("asinh", POINTS, |x| 1.0 / (x * x + 1.0).sqrt());
    check_unary("acosh", &[1.05, 1.7, 2.9, 13.0], |x| {
        1.0 / (x * x - 1.0).sqrt()
    });
    check_unary("atanh", UNIT, |x| 1.0 / (1.0 - x * x));
    // The forms that keep digits: near acosh's and atanh's singular points
    // (x - 1 and 1 - x are exact there) and for huge asinh arguments.
    let x = 1.0 + 1e-12;
    let d = d_unary(&mut unary_module("acosh"), x);
    assert_close(
        d,
        1.0 / ((x - 1.0) * (x + 1.0)).sqrt(),
        1e-15,
        "acosh'(1+1e-12)",
    );
    let x = 1.0 - 1e-12;
    let d = d_unary(&mut unary_module("atanh"), x);
    assert_close(d, 1.0 / ((1.0 - x) * (1.0 + x)), 1e-15, "atanh'(1-1e-12)");
    assert_eq!(d_unary(&mut unary_module("asinh"), 1e200), 1e-200);
    assert_eq!(d_unary(&mut unary_module("acosh"), 1e200), 1e-200);
}

#[test]
fn gamma_family() {
    // lgamma' = digamma, digamma' = trigamma = polygamma 1: formula (from
    // semantics) and finite differences (of lgamma itself for lgamma).
    let psi = |n: f64, x: f64| adze_ir::semantics::polygamma(n, x);
    let pts = &[-2.5, -0.3, 0.2, 1.0, 1.4616, 3.7, 12.5];
    check_unary("lgamma", pts, |x| adze_ir::semantics::polygamma(0.0, x));
    check_unary("digamma", pts, |x| adze_ir::semantics::polygamma(1.0, x));
    // polygamma n, x: d/dx = polygamma n+1, x; d/dn = 0 (integer order).
    let mut m = binary_module("polygamma");
    let f = m.get("f").unwrap();
    for n in [0.0, 1.0, 2.0, 3.0] {
        for x in [-1.5, 0.4, 2.0, 7.5] {
            let (dn, dx) = d_binary(&mut m, n, x);
            assert_eq!(dn, 0.0, "d polygamma/dn ({n}, {x})");
            assert_eq!(dx.to_bits(), psi(n + 1.0, x).to_bits(), "({n}, {x})");
            let args = [Val::F64(n), Val::F64(x)];
            let fd = central_difference(&m, f, &args, &[Val::F64(0.0), Val::F64(1.0)], 1e-5)[0];
            assert_close(dx, fd, 1e-5, &format!("polygamma'({n}, {x}) vs fd"));
        }
    }
    // By hand: lgamma'(1) = -γ, lgamma'(1/2) = -γ - 2 ln 2, digamma'(1) = π²/6.
    assert_close(
        d_unary(&mut unary_module("lgamma"), 1.0),
        -0.577_215_664_901_532_9,
        1e-16,
        "lgamma'(1)",
    );
    assert_close(
        d_unary(&mut unary_module("lgamma"), 0.5),
        -1.963_510_026_021_423_5,
        1e-15,
        "lgamma'(1/2)",
    );
    assert_close(
        d_unary(&mut unary_module("digamma"), 1.0),
        std::f64::consts::PI.powi(2) / 6.0,
        1e-15,
        "digamma'(1)",
    );
}

#[test]
fn arithmetic() {
    check_unary("fneg", POINTS, |_| -1.0);
    check_unary("abs", POINTS, |x| x.signum());
    let pts = &[(1.5, -2.0), (-0.3, 0.7), (4.0, 0.25)];
    check_binary("fadd", pts, |_, _| (1.0, 1.0));
    check_binary("fsub", pts, |_, _| (1.0, -1.0));
    check_binary("fmul", pts, |x, y| (y, x));
    check_binary("fdiv", pts, |x, y| (1.0 / y, -x / (y * y)));
}

#[test]
fn powers() {
    for n in [-3i32, -1, 2, 3, 5] {
        let mut m = parse(&format!(
            "function @f(x: f64) -> f64 {{\nblock0(v0: f64):\n    v1 = powi v0, {n}\n    return v1\n}}\n"
        ));
        let f = m.get("f").unwrap();
        for &x in &[-1.3, 0.4, 2.2] {
            let got = d_unary(&mut m, x);
            let want = f64::from(n) * x.powi(n - 1);
            assert_close(got, want, FORMULA_TOL, &format!("powi {n} at {x}"));
            let fd = central_difference(&m, f, &[Val::F64(x)], &[Val::F64(1.0)], H)[0];
            assert_close(
                got,
                fd,
                FD_TOL,
                &format!("powi {n} at {x} vs finite differences"),
            );
        }
    }
    check_binary("pow", &[(1.5, 2.5), (0.3, -1.2), (2.0, 0.5)], |x, y| {
        (y * x.powf(y - 1.0), x.powf(y) * x.ln())
    });
}

#[test]
fn two_argument_intrinsics() {
    let pts = &[(1.5, -2.0), (-0.3, 0.7), (4.0, 0.25), (-1.0, -3.0)];
    check_binary("atan2", pts, |y, x| {
        (x / (x * x + y * y), -y / (x * x + y * y))
    });
    check_binary("hypot", pts, |x, y| (x / x.hypot(y), y / x.hypot(y)));
    check_binary(
        "min",
        pts,
        |x, y| if x < y { (1.0, 0.0) } else { (0.0, 1.0) },
    );
    check_binary(
        "max",
        pts,
        |x, y| if x > y { (1.0, 0.0) } else { (0.0, 1.0) },
    );
}

#[test]
fn piecewise_constant_ops_have_zero_derivative() {
    for op in ["floor", "ceil", "round", "sign"] {
        let mut m = unary_module(op);
        for x in [-1.5, -0.2, 0.0, 0.5, 2.5, 3.7] {
            // A structurally zero tangent is -0.0 inside derivative code
            // (the identity of addition); `autodiff` hands users +0.0.
            assert_eq!(d_unary(&mut m, x), 0.0, "{op}'({x})");
        }
    }
}

/// Exact values at the documented non-differentiable points.
#[test]
fn edge_points() {
    let unary_edges: &[(&str, f64, f64)] = &[
        ("sqrt", 0.0, f64::INFINITY),
        ("sqrt", -0.0, f64::NEG_INFINITY),
        ("cbrt", 0.0, f64::INFINITY),
        ("cbrt", -0.0, f64::INFINITY),
        ("abs", 0.0, 0.0),
        ("asin", 1.0, f64::INFINITY),
        ("asin", -1.0, f64::INFINITY),
        ("acos", 1.0, f64::NEG_INFINITY),
        ("log", 0.0, f64::INFINITY),
        ("log1p", -1.0, f64::INFINITY),
        ("tanh", 40.0, 0.0),
        ("erf", f64::INFINITY, 0.0),
        ("erf", f64::NEG_INFINITY, 0.0),
        ("erf", 1e200, 0.0),
        ("exp", 0.0, 1.0),
        ("erfc", f64::INFINITY, -0.0),
        ("erfc", 0.0, -std::f64::consts::FRAC_2_SQRT_PI),
        ("log2", 0.0, f64::INFINITY),
        ("log10", -0.0, f64::NEG_INFINITY),
        ("exp2", 0.0, std::f64::consts::LN_2),
        ("asinh", 0.0, 1.0),
        ("acosh", 1.0, f64::INFINITY),
        ("atanh", 1.0, f64::INFINITY),
        ("atanh", -1.0, f64::INFINITY),
        ("atanh", 0.0, 1.0),
        ("digamma", 0.0, f64::INFINITY),
        ("digamma", -2.0, f64::INFINITY),
    ];
    for &(op, x, want) in unary_edges {
        let got = d_unary(&mut unary_module(op), x);
        assert_eq!(got, want, "{op}'({x})");
    }
    assert!(d_unary(&mut unary_module("asin"), 1.5).is_nan());
    assert!(d_unary(&mut unary_module("acosh"), 0.5).is_nan());
    // Outside the domain the primal is NaN; the partial is still its formula.
    assert_eq!(d_unary(&mut unary_module("log"), -1.0), -1.0);

    let binary_edges: &[(&str, f64, f64, (f64, f64))] = &[
        // x^y: d/dx := 0 where y == 0, d/dy := 0 where x == 0.
        ("pow", 0.0, 0.0, (0.0, 0.0)),
        ("pow", 0.0, 2.0, (0.0, 0.0)),
        ("pow", 0.0, -1.0, (f64::NEG_INFINITY, 0.0)),
        ("pow", -2.0, 3.0, (12.0, 0.0)),
        ("pow", 3.0, 0.0, (0.0, 3f64.ln())),
        ("pow", 0.0, 1.0, (1.0, 0.0)),
        ("atan2", 0.0, 0.0, (0.0, 0.0)),
        ("hypot", 0.0, 0.0, (0.0, 0.0)),
        ("hypot", 0.0, -2.0, (0.0, -1.0)),
        // Ties go to the first operand, except ±0 where the operand that
        // IEEE minimum/maximum returns gets the derivative.
        ("min", 2.0, 2.0, (1.0, 0.0)),
        ("min", -2.0, -2.0, (1.0, 0.0)),
        ("min", -0.0, 0.0, (1.0, 0.0)),
        ("min", 0.0, -0.0, (0.0, 1.0)),
        ("max", 2.0, 2.0, (1.0, 0.0)),
        ("max", 0.0, -0.0, (1.0, 0.0)),
        ("max", -0.0, 0.0, (0.0, 1.0)),
        ("min", f64::NAN, 1.0, (0.0, 1.0)),
    ];
    for &(op, x, y, want) in binary_edges {
        let got = d_binary(&mut binary_module(op), x, y);
        assert_eq!(got, want, "{op} at ({x}, {y})");
    }
    // Both operands dual, the exponent's tangent 0: no NaN from x <= 0.
    let mut pow = binary_module("pow");
    assert_eq!(d_binary_both(&mut pow, -2.0, 1.0, 3.0, 0.0), 12.0);
    assert_eq!(d_binary_both(&mut pow, 0.0, 1.0, 2.0, 0.0), 0.0);
    let both = d_binary_both(&mut pow, 1.5, 0.25, 2.5, -0.5);
    let want = 0.25 * (2.5 * 1.5f64.powf(1.5)) + (-0.5) * (1.5f64.powf(2.5) * 1.5f64.ln());
    assert_close(both, want, FORMULA_TOL, "pow, both dual");
    // The h-form of atan2's partials does not overflow.
    let (dy, dx) = d_binary(&mut binary_module("atan2"), 1e200, 1e200);
    assert_close(dy, 0.5e-200, 1e-15, "atan2 at 1e200");
    assert_close(dx, -0.5e-200, 1e-15, "atan2 at 1e200");
}

/// `min` and `max` really pick the operand the primal returns (bit patterns
/// of ±0), and an infinite tangent of the other operand does not leak.
#[test]
fn choose_does_not_mix_tangents() {
    let mut m = binary_module("min");
    let d = derive(&mut m, "f", &[ArgActivity::Dual, ArgActivity::Dual], 1);
    let out = f64s(&run(
        &m,
        d,
        &[
            Val::F64(1.0),
            Val::F64(2.0),
            Val::F64(5.0),
            Val::F64(f64::INFINITY),
        ],
    ));
    assert_eq!(out, vec![1.0, 2.0]);
    let primal = adze_ir::semantics::minimum(0.0, -0.0);
    assert!(primal.is_sign_negative());
}

#[test]
fn select_takes_the_chosen_tangent() {
    let mut m = parse(
        "function @f(x: f64, y: f64) -> f64 {
block0(v0: f64, v1: f64):
    v2 = fcmp lt v0, v1
    v3 = select v2, v0, v1
    return v3
}
",
    );
    for (x, y, want) in [(1.0, 2.0, (1.0, 0.0)), (3.0, 2.0, (0.0, 1.0))] {
        assert_eq!(d_binary(&mut m, x, y), want);
    }
}

/// The table covers every intrinsic of the language.
#[test]
fn every_intrinsic_is_in_the_table() {
    for &op in Opcode::ALL.iter().filter(|op| op.is_intrinsic()) {
        let differentiable = adze_ad::partials::is_differentiable(op);
        let piecewise_constant = matches!(
            op,
            Opcode::Floor | Opcode::Ceil | Opcode::Round | Opcode::Sign
        );
        assert!(differentiable != piecewise_constant, "{op}");
    }
}

/// `docs/ad.md` shows the table of choices of `partials.rs`'s documentation,
/// unchanged; `ADZE_BLESS=1` copies it there.
#[test]
fn the_table_in_docs_ad_md_is_the_one_in_partials_rs() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let src = std::fs::read_to_string(format!("{root}/crates/ad/src/partials.rs")).unwrap();
    let header = "| op | partials |";
    let table: String = src
        .lines()
        .filter_map(|l| l.strip_prefix("//! "))
        .skip_while(|l| !l.starts_with(header))
        .take_while(|l| l.starts_with('|'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(table.lines().count() > 20, "no table in partials.rs");
    let path = format!("{root}/docs/ad.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let start = doc.find(header).expect("the table in docs/ad.md");
    let len = doc[start..]
        .split_inclusive('\n')
        .take_while(|l| l.starts_with('|'))
        .map(str::len)
        .sum::<usize>();
    // `ADZE_BLESS=1` copies the table into the document.
    adze_test_support::expect_in_file(std::path::Path::new(&path), start..start + len, &table)
        .unwrap_or_else(|e| panic!("{e}"));
}

/// `partials::choice_from_result` (reverse mode's augmented primal tapes
/// it for `min`/`max`) gives the same bool as the rule's own `Choose`
/// condition on every pair of special values: zeros of both signs,
/// infinities, NaNs with payloads and signs, subnormals, ties.
#[test]
fn the_choice_from_the_result_is_the_rules_choice() {
    use adze_ad::partials::{choice_from_result, local_derivative, Local};
    use adze_ir::{FuncBuilder, Function, InstData, Param, Signature, Type};
    let values = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        1.5,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::from_bits(0xfff8_0000_0000_0001),
        f64::from_bits(0x7ff8_0000_dead_beef),
        f64::from_bits(1),
        -f64::from_bits(1),
        f64::MAX,
        f64::MIN,
    ];
    for op in [Opcode::Min, Opcode::Max] {
        let p = |name: &str| Param {
            name: name.into(),
            ty: Type::F64,
            mutable: false,
        };
        let sig = Signature {
            params: vec![p("a"), p("b")],
            results: vec![Type::Bool, Type::Bool],
        };
        let mut f = Function::new("f", sig);
        let mut b = FuncBuilder::new(&mut f);
        let entry = b.create_block();
        b.switch_to_block(entry);
        let a = b.append_block_param(entry, Type::F64);
        let c = b.append_block_param(entry, Type::F64);
        let data = InstData::Binary { op, args: [a, c] };
        let r = b.binary(op, a, c);
        let Some(Local::Choose { cond: rule, .. }) =
            local_derivative(&mut b, &data, r, &[true, true])
        else {
            panic!("{op}: not a choice");
        };
        let from_result = choice_from_result(&mut b, &data, r).unwrap();
        b.ret(&[rule, from_result]);
        let mut m = Module::new();
        let id = m.push(f).unwrap();
        verify(&m);
        for &x in &values {
            for &y in &values {
                let out = run(&m, id, &[Val::F64(x), Val::F64(y)]);
                assert_eq!(out[0], out[1], "{op}({x:e}, {y:e}): {out:?}");
            }
        }
    }
}
