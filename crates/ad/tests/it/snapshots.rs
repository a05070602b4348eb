//! Derivative IR held as expected files in `tests/expected/` so that
//! reviewers can read what the pass emits; `ADZE_BLESS=1` rewrites them.

use crate::support::*;
use adze_ir::{ArgActivity, Module};
use ArgActivity::{Const, Dual, Dup};

/// Every function the pass added to the module, in creation order.
fn derived(m: &Module, first_new: usize) -> String {
    let mut out = String::new();
    for (i, (id, _)) in m.iter().enumerate().skip(first_new) {
        if i > first_new {
            out.push('\n');
        }
        out.push_str(&m.display_function(id).to_string());
    }
    out
}

fn snapshot(name: &str, src: &str, func: &str, acts: &[ArgActivity], width: usize) {
    let mut m = compile(src);
    let n = m.len();
    derive(&mut m, func, acts, width);
    expect_file(name, &derived(&m, n));
}

#[test]
fn loop_with_branch() {
    snapshot(
        "loop.fwd",
        // Indented as in docs/ad.md, whose copy shows the locations.
        "fn f(x: f64, n: i64) -> f64 {
    var s = 0.0;
    for i in 0..n { if s < 1.0 { s = s + x * f64(i); } else { s = sqrt(s) * x; } }
    s
}",
        "f",
        &[Dual, Const],
        1,
    );
}

#[test]
fn arrays_and_calls() {
    snapshot(
        "arrays.fwd",
        "fn dot(a: [f64], b: [f64]) -> f64 {
            var s = 0.0;
            for i in 0..len(a) { s = s + a[i] * b[i]; }
            s
        }
        fn f(x: [f64], y: mut [f64], c: f64) -> f64 {
            let t = zeros(len(x));
            for i in 0..len(x) { t[i] = exp(c * x[i]); }
            fill(y, c);
            dot(t, x) + y[0]
        }",
        "f",
        &[Dup, Dup, Dual],
        1,
    );
}

#[test]
fn vector_mode() {
    snapshot(
        "vector.fwd",
        "fn f(x: f64, y: f64) -> (f64, f64) { return (x * sin(y), max(x, y)); }",
        "f",
        &[Dual, Dual],
        2,
    );
}

#[test]
fn nested_requests() {
    let src = "fn cube(x: f64) -> f64 { x * x * x }
        fn d1(x: f64) -> f64 { let (y, dy) = autodiff(forward, cube, dual, dual(x, 1.0)); dy }
        fn d2(x: f64) -> f64 { let (y, dy) = autodiff(forward, d1, dual, dual(x, 1.0)); dy }";
    let mut m = compile(src);
    adze_ad::lower_autodiff(&mut m).unwrap();
    check_ir(&m);
    expect_file("nested.lowered", &m.to_string());
}

/// The example of `docs/ad.md` is the real output held in `loop.fwd.ir`.
#[test]
fn the_documented_example_is_current() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ad.md")).unwrap();
    let ir = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/expected/loop.fwd.ir"
    ))
    .unwrap();
    let marker = "<!-- loop.fwd.ir -->\n```text\n";
    let start = doc.find(marker).expect("the marker in docs/ad.md") + marker.len();
    assert_eq!(&doc[start..start + ir.len()], ir);
}
