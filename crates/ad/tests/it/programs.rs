//! Whole functions against central finite differences: loops, branches,
//! early return, arrays, calls, recursion, several results, mixed
//! activities, i64 parameters; and the errors of bad requests.

use crate::support::*;
use adze_ad::{derive_forward, AdError};
use adze_ir::{ArgActivity, RetActivity, Val};
use ArgActivity::{Const, Dual, Dup};

fn f(x: f64) -> Val {
    Val::F64(x)
}

fn arr(xs: &[f64]) -> Val {
    Val::Array(xs.to_vec())
}

const LOOPS: &str = "
fn counted(x: f64, n: i64) -> f64 {
    var s = 0.0;
    for i in 0..n { s = s + sin(x * f64(i)) / (1.0 + f64(i)); }
    s
}

fn while_loop(x: f64, n: i64) -> f64 {
    var y = x;
    var i = 0;
    while i < n { y = y * cos(y) + x; i = i + 1; }
    y
}

fn newton_sqrt(a: f64) -> f64 {
    var x = a;
    var steps = 0;
    while abs(x * x - a) > 1e-12 * a && steps < 100 {
        x = 0.5 * (x + a / x);
        steps = steps + 1;
    }
    x
}

fn branchy(x: f64, y: f64, n: i64) -> f64 {
    var s = 0.0;
    for i in 0..n {
        if x * f64(i) > 1.0 { s = s + x * y; } else { s = s - sin(y) * exp(x); }
        if i % 2 == 0 { s = s * 0.5; }
    }
    s
}

fn early(x: f64) -> f64 {
    for i in 0..10 {
        if x * f64(i) > 3.0 { return x * f64(i) * x; }
    }
    x ^ 3
}

fn nested(x: f64, n: i64) -> f64 {
    var acc = 0.0;
    var i = 0;
    while i < n {
        for j in 0..i { acc = acc + x ^ 2 * f64(j) - acc * 0.1; }
        i = i + 1;
    }
    acc
}
";

#[test]
fn loops_and_branches() {
    let mut rows: Vec<Row> = vec![
        (
            "counted",
            &[Dual, Const],
            vec![f(0.7), Val::I64(6)],
            vec![f(1.0), f(0.0)],
        ),
        (
            "while_loop",
            &[Dual, Const],
            vec![f(0.4), Val::I64(5)],
            vec![f(1.0), f(0.0)],
        ),
        (
            "nested",
            &[Dual, Const],
            vec![f(1.3), Val::I64(5)],
            vec![f(1.0), f(0.0)],
        ),
    ];
    // Away from the kinks x * i == 1.
    for x in [0.23, 0.9, 2.0] {
        let args = vec![f(x), f(-0.6), Val::I64(7)];
        let both = vec![f(0.3), f(-1.1), f(0.0)];
        rows.push(("branchy", &[Dual, Dual, Const], args.clone(), both));
        let y_only = vec![f(0.0), f(1.0), f(0.0)];
        rows.push(("branchy", &[Const, Dual, Const], args, y_only));
    }
    // Early return from different iterations, and the fall-through.
    for x in [0.2, 0.55, 1.7, 4.0] {
        rows.push(("early", &[Dual], vec![f(x)], vec![f(1.0)]));
    }
    check_rows(&mut compile(LOOPS), &rows);
}

#[test]
fn exact_values_through_loops() {
    let mut m = compile(LOOPS);
    // Newton's iteration converges to sqrt(a); its derivative to 1/(2 sqrt a).
    let out = check_against_fd(&mut m, "newton_sqrt", &[Dual], &[f(2.0)], &[f(1.0)]);
    let out = f64s(&out);
    assert_close(out[0], 2f64.sqrt(), 1e-15, "sqrt");
    assert_close(out[1], 0.5 / 2f64.sqrt(), 1e-12, "d sqrt");
    // early(x) = x^3 below x = 1/3 (no iteration returns): 3x^2.
    let d = derive(&mut m, "early", &[Dual], 1);
    assert_eq!(run(&m, d, &[f(0.25), f(1.0)])[1], f(3.0 * (0.25 * 0.25)));
    // early(2.0) returns at i = 2: x*2*x, derivative 4x = 8.
    assert_eq!(run(&m, d, &[f(2.0), f(1.0)])[1], f(8.0));
}

const ARRAYS: &str = "
fn axpy(x: [f64], y: mut [f64], c: f64) -> f64 {
    let t = zeros(len(x));
    for i in 0..len(x) { t[i] = x[i] * c; }
    var s = 0.0;
    for i in 0..len(x) {
        y[i] = t[i] * t[i] + sin(y[i]);
        s = s + y[i];
    }
    s
}

fn filled(x: f64, a: mut [f64]) -> f64 {
    fill(a, x * x);
    a[0] * a[1] + x
}

fn local_only(x: f64, n: i64) -> f64 {
    let t = zeros(n);
    for i in 0..n { t[i] = x * f64(i); }
    var s = 0.0;
    for i in 0..n { s = s + t[i] * t[i]; }
    s
}

fn through_const(x: f64, out: mut [f64]) -> f64 {
    out[0] = x * x;
    out[1] = 3.0;
    out[0] + out[1]
}
";

#[test]
fn arrays() {
    let mut m = compile(ARRAYS);
    let x = arr(&[0.5, -1.25, 2.0]);
    let y = arr(&[0.1, 0.2, -0.3]);
    let dx = arr(&[1.0, 0.5, -0.25]);
    let dy = arr(&[-0.5, 2.0, 1.0]);
    let x15 = vec![x.clone(), y.clone(), f(1.5)];
    check_rows(
        &mut m,
        &[
            (
                "axpy",
                &[Dup, Dup, Dual],
                x15.clone(),
                vec![dx.clone(), dy.clone(), f(0.75)],
            ),
            (
                "axpy",
                &[Const, Dup, Dual],
                x15.clone(),
                vec![f(0.0), dy.clone(), f(1.0)],
            ),
            (
                "axpy",
                &[Dup, Dup, Const],
                x15.clone(),
                vec![dx, dy, f(0.0)],
            ),
            // `y` const but written with active values: a local shadow keeps
            // the result's tangent right.
            (
                "axpy",
                &[Const, Const, Dual],
                x15,
                vec![f(0.0), f(0.0), f(1.0)],
            ),
            (
                "filled",
                &[Dual, Dup],
                vec![f(0.7), arr(&[1.0, 2.0])],
                vec![f(1.0), arr(&[5.0, 6.0])],
            ),
            (
                "local_only",
                &[Dual, Const],
                vec![f(0.3), Val::I64(4)],
                vec![f(1.0), f(0.0)],
            ),
        ],
    );
    let out = check_against_fd(
        &mut m,
        "through_const",
        &[Dual, Const],
        &[f(3.0), arr(&[0.0, 0.0])],
        &[f(1.0), f(0.0)],
    );
    assert_eq!(out, vec![f(12.0), f(6.0)]);
    let printed = m.to_string();
    assert!(
        printed.contains("zeros v") && printed.contains("\"t.d\""),
        "{printed}"
    );
    assert!(printed.contains("\"out.d\""), "{printed}");
}

const CALLS: &str = "
fn sq(x: f64) -> f64 { x * x }

fn two(x: f64, y: f64) -> (f64, f64) { return (x * y, x + sin(y)); }

fn with_int(x: f64) -> (f64, i64) { return (x * x, 3); }

fn caller(x: f64, y: f64) -> f64 {
    let (a, b) = two(sq(x), y);
    let (c, k) = with_int(b);
    a * b + sq(3.0) + c * f64(k)
}

fn sum(a: [f64]) -> f64 {
    var s = 0.0;
    for i in 0..len(a) { s = s + a[i]; }
    s
}

fn scale(a: mut [f64], k: f64) {
    for i in 0..len(a) { a[i] = a[i] * k; }
}

fn user(x: [f64], k: f64) -> f64 {
    let t = zeros(len(x));
    for i in 0..len(x) { t[i] = x[i]; }
    scale(t, k);
    sum(t) * sum(x)
}

fn pow_rec(x: f64, n: i64) -> f64 {
    if n == 0 { 1.0 } else { x * pow_rec(x, n - 1) }
}

fn swap_rec(x: f64, y: f64, n: i64) -> f64 {
    if n == 0 { y * y } else { swap_rec(y, x * 2.0, n - 1) + x }
}
";

#[test]
fn calls_and_recursion() {
    let mut m = compile(CALLS);
    let xy = vec![f(0.8), f(-0.4)];
    check_rows(
        &mut m,
        &[
            ("caller", &[Dual, Dual], xy.clone(), vec![f(1.0), f(0.5)]),
            ("caller", &[Const, Dual], xy.clone(), vec![f(0.0), f(1.0)]),
            ("two", &[Dual, Dual], xy, vec![f(1.0), f(0.5)]),
        ],
    );
    let out = check_against_fd(&mut m, "with_int", &[Dual], &[f(1.5)], &[f(1.0)]);
    // The tangents of the f64 results only (an i64 result has none).
    assert_eq!(out, vec![f(2.25), Val::I64(3), f(3.0)]);
    let a123 = arr(&[1.0, 2.0, 3.0]);
    check_rows(
        &mut m,
        &[
            (
                "user",
                &[Dup, Dual],
                vec![a123.clone(), f(0.5)],
                vec![arr(&[0.5, 0.0, -1.0]), f(1.0)],
            ),
            (
                "user",
                &[Const, Dual],
                vec![a123, f(0.5)],
                vec![f(0.0), f(1.0)],
            ),
            (
                "swap_rec",
                &[Dual, Const, Const],
                vec![f(0.7), f(1.1), Val::I64(5)],
                vec![f(1.0), f(0.0), f(0.0)],
            ),
        ],
    );
    // x^4 by recursion: 4 x^3 exactly.
    let out = check_against_fd(
        &mut m,
        "pow_rec",
        &[Dual, Const],
        &[f(1.5), Val::I64(4)],
        &[f(1.0), f(0.0)],
    );
    assert_eq!(out, vec![f(5.0625), f(13.5)]);
    // The recursion calls the derivative being built, and the mixed
    // activities of swap_rec build the two alternating derivatives.
    let text = m.to_string();
    assert!(text.contains("call @pow_rec.fwd.dual_const("), "{text}");
    assert!(
        text.contains("function @swap_rec.fwd.const_dual_const("),
        "{text}"
    );
    // A call with no active argument stays a primal call.
    assert!(text.contains("call @sq(v"), "{text}");
}

#[test]
fn ret_const_keeps_array_tangents() {
    let mut m = compile(ARRAYS);
    let d = derive_forward(&mut m, "filled", &[Dual, Dup], RetActivity::Const, 1).unwrap();
    check_ir(&m);
    assert!(m.func(d).sig.results.is_empty());
    let out = run_outcome(&m, d, &[f(0.5), f(1.0), arr(&[0.0, 0.0]), arr(&[9.0, 9.0])]);
    assert!(out.results.is_empty());
    assert_eq!(out.args[2], arr(&[0.25, 0.25]));
    assert_eq!(out.args[3], arr(&[1.0, 1.0]));
}

#[test]
fn requests_are_cached_by_name() {
    let mut m = compile(CALLS);
    let a = derive_forward(&mut m, "sq", &[Dual], RetActivity::Dual, 1).unwrap();
    let n = m.len();
    let b = derive_forward(&mut m, "sq", &[Dual], RetActivity::Dual, 1).unwrap();
    assert_eq!((a, n), (b, m.len()));
    assert_eq!(m.func(a).name, "sq.fwd.dual");
    let c = derive_forward(&mut m, "sq", &[Dual], RetActivity::Const, 4).unwrap();
    assert_eq!(m.func(c).name, "sq.fwd.dual.noret.x4");
}

#[test]
fn bad_requests_are_errors() {
    let mut m = compile(CALLS);
    let err = |m: &mut adze_ir::Module, name, acts: &[ArgActivity], ret, w| {
        derive_forward(m, name, acts, ret, w).unwrap_err()
    };
    assert_eq!(
        err(&mut m, "nope", &[], RetActivity::Dual, 1),
        AdError::NoSuchFunction("nope".into())
    );
    assert!(matches!(
        err(&mut m, "sq", &[Dual, Dual], RetActivity::Dual, 1),
        AdError::BadRequest { .. }
    ));
    assert!(matches!(
        err(&mut m, "sq", &[Dup], RetActivity::Dual, 1),
        AdError::BadRequest { .. }
    ));
    assert!(matches!(
        err(&mut m, "sq", &[ArgActivity::Active], RetActivity::Dual, 1),
        AdError::BadRequest { .. }
    ));
    assert!(matches!(
        err(&mut m, "sq", &[Dual], RetActivity::Active, 1),
        AdError::BadRequest { .. }
    ));
    assert!(matches!(
        err(&mut m, "sq", &[Dual], RetActivity::Dual, 0),
        AdError::BadRequest { .. }
    ));
    assert!(matches!(
        err(&mut m, "pow_rec", &[Dual, Dual], RetActivity::Dual, 1),
        AdError::BadRequest { .. }
    ));
    let msg = err(&mut m, "user", &[Dual, Dual], RetActivity::Dual, 1).to_string();
    assert_eq!(
        msg,
        "bad derivative request for `user`: parameter `x: arr` cannot be `dual` in forward mode"
    );

    let mut decl = parse("function @ext(x: f64) -> f64 {\n}\nfunction @g(x: f64) -> f64 {\nblock0(v0: f64):\n    v1 = call @ext(v0)\n    return v1\n}\n");
    assert_eq!(
        err(&mut decl, "g", &[Dual], RetActivity::Dual, 1).to_string(),
        "cannot differentiate `ext`: it is a declaration without a body"
    );
}

#[test]
fn forward_over_reverse_requests_inside_the_function() {
    // g(x) = f'(x) + f'(2) with f(x) = x², so g(x) = 2x + 4 and g'(x) = 2.
    let mut m = parse(
        "function @f(x: f64) -> f64 {
block0(v0: f64):
    v1 = fmul v0, v0
    return v1
}

function @g(x: f64) -> f64 {
block0(v0: f64):
    v1 = autodiff reverse active @f(active v0)
    v2 = fconst 2.0
    v3 = autodiff reverse active @f(active v2)
    v4 = fadd v1, v3
    return v4
}
",
    );
    let d = derive_forward(&mut m, "g", &[Dual], RetActivity::Dual, 1).unwrap();
    adze_ir::verify::verify_module(&m).unwrap();
    let out = adze_interp::Interpreter::new(&m)
        .call(d, &[Val::F64(3.0), Val::F64(1.0)])
        .unwrap();
    assert_eq!(out.results, vec![Val::F64(10.0), Val::F64(2.0)]);
}
#[test]
fn tape_values_carry_their_tangents() {
    let mut m = parse(
        "function @t(x: f64) -> f64 {
block0(v0: f64):
    v1 = sin v0
    push 0, v1
    v2 = iconst 3
    push 0, v2
    v3 = pop 0, i64
    v4 = pop 0, f64
    v5 = fmul v4, v0
    v6 = sitof v3
    v7 = fmul v5, v6
    return v7
}
",
    );
    // t(x) = 3 x sin x, t'(x) = 3 (sin x + x cos x).
    let out = check_against_fd(&mut m, "t", &[Dual], &[f(0.8)], &[f(1.0)]);
    let want = (0.8f64.sin() * 0.8) * 3.0;
    assert_eq!(out[0], f(want));
    assert_close(
        f64s(&out[1..])[0],
        3.0 * (0.8f64.sin() + 0.8 * 0.8f64.cos()),
        1e-15,
        "t'",
    );
    let d = m.get("t.fwd.dual").unwrap();
    let text = m.display_function(d).to_string();
    assert_eq!(text.matches("push").count(), 3, "{text}");
    assert_eq!(text.matches("pop 0, f64").count(), 2, "{text}");
}
