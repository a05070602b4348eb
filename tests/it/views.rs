//! Views (slices) against the alias assumptions of the passes: a local
//! array written through a view and read directly (or the reverse), inside
//! loops whose loads the planner could take for loop-invariant, through
//! `fill` and through calls. Each program's reverse derivative must equal
//! its forward derivative and finite differences, under every inline
//! setting. (The first case was a wrong gradient: the planner listed a
//! loop's writes by array value, so a store through a view did not count.)

use adze::{Engine, InlineSetting, Session};
use adze_ir::Val;

const PROGRAMS: [(&str, &str); 5] = [
    (
        "view written, array read at an index the inner loop keeps",
        "let t = zeros(n);
    for j in 0..n { t[j] = x; }
    let v = t[0..n];
    var s = 0.0;
    for j in 0..n {
        for i in 0..3 {
            s = s + t[j] * x;
            v[j] = v[j] * 2.0;
        }
    }
    s",
    ),
    (
        "array written, view read",
        "let t = zeros(n);
    for j in 0..n { t[j] = x + f64(j); }
    let v = t[1..n];
    var s = 0.0;
    for j in 0..n - 1 {
        for i in 0..2 {
            s = s + v[j] * x;
            t[j + 1] = t[j + 1] * x;
        }
    }
    s",
    ),
    (
        "two views of one array, one written and one read",
        "let t = zeros(2 * n);
    for j in 0..2 * n { t[j] = x; }
    let lo = t[0..n];
    let hi = t[n..2 * n];
    let both = t[0..2 * n];
    var s = 0.0;
    for j in 0..n {
        for i in 0..2 {
            s = s + hi[j] * lo[j];
            both[n + j] = both[n + j] * x;
        }
    }
    s",
    ),
    (
        "fill through a view inside a loop",
        "let t = zeros(n);
    for j in 0..n { t[j] = x; }
    var s = 0.0;
    for j in 0..n {
        for i in 0..2 {
            s = s + t[j] * t[j];
            fill(t[j..n], t[j] * x);
        }
    }
    s",
    ),
    (
        "a call writes a view, the array is read",
        "let t = zeros(n);
    for j in 0..n { t[j] = x; }
    var s = 0.0;
    for j in 0..n {
        for i in 0..2 {
            s = s + sin(t[j]);
            scale(t[j..n], x);
        }
    }
    s",
    ),
];

fn program(body: &str) -> String {
    format!(
        "fn scale(a: mut [f64], k: f64) {{ for i in 0..len(a) {{ a[i] = a[i] * k; }} }}
fn f(x: f64, n: i64) -> f64 {{
    {body}
}}
fn rev(x: f64, n: i64) -> f64 {{ autodiff(reverse, f, active, active(x), const(n)) }}
fn fwd(x: f64, n: i64) -> f64 {{
    let (y, t) = autodiff(forward, f, dual, dual(x, 1.0), const(n));
    t
}}
"
    )
}

fn f64_of(session: &Session, name: &str, args: &[Val], engine: Engine) -> f64 {
    match session.run(name, args, engine).unwrap().results[..] {
        [Val::F64(y)] => y,
        ref other => panic!("{other:?}"),
    }
}

#[test]
fn reverse_equals_forward_and_finite_differences_through_views() {
    for (what, body) in PROGRAMS {
        let mut session = Session::from_source("views.adz", &program(body))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        for (x, n) in [(0.7, 2), (1.1, 3), (-0.4, 1)] {
            let args = [Val::F64(x), Val::I64(n)];
            let fwd = f64_of(&session, "fwd", &args, Engine::Jit);
            let h = 1e-6;
            let at = |x: f64| f64_of(&session, "f", &[Val::F64(x), Val::I64(n)], Engine::Jit);
            let fd = (at(x + h) - at(x - h)) / (2.0 * h);
            assert!(
                (fwd - fd).abs() <= 1e-5 * fd.abs().max(1.0),
                "{what} at x = {x}, n = {n}: forward {fwd}, finite differences {fd}"
            );
            for inline in InlineSetting::ALL {
                session.inline = inline;
                for engine in [Engine::Interp, Engine::Jit] {
                    let rev = f64_of(&session, "rev", &args, engine);
                    assert!(
                        (rev - fwd).abs() <= 1e-12 * fwd.abs().max(1.0),
                        "{what} at x = {x}, n = {n} ({inline:?}, {engine:?}): reverse {rev}, forward {fwd}"
                    );
                }
            }
        }
    }
}
