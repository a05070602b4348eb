//! The regression matrix on inlining/rule interaction (SPEC §7):
//! {forward rule, reverse rule, both} × {scalar argument, array argument} ×
//! {call at top level, in a loop, in a branch, in a callee's callee, inside
//! another function's rule} × {fwd, rev, fwd∘rev, rev∘fwd, fwd∘fwd, rev∘rev}
//! × {--inline none, early, late, all}, each through `autodiff` in source.
//!
//! The rules are deliberately wrong in distinguishable ways, so that each
//! value shows which rule was used where:
//!
//! - scalar: `F(x) = x²` (true derivative `2x`), a forward rule claiming
//!   `3x`, a reverse rule claiming `5x`;
//! - array: `S(a) = Σ aᵢ²` (true gradient `2a`), rules claiming `3a` and
//!   `5a`, called on `t = [x, 2x]`, so `S(t) = 5x²`.
//!
//! With `κ = 1` (scalar) or `5` (array), `c_f = 3` when there is a forward
//! rule (else the body's `2`), `c_r = 5` when there is a reverse rule (else
//! `2`), and `m = 3` for the loop (three calls) or 1, the rules imply:
//!
//! | place | f | r | f∘f, r∘f | f∘r, r∘r |
//! |---|---|---|---|---|
//! | top, loop, branch, callee's callee | `m κ c_f x` | `m κ c_r x` | `m κ c_f` | `m κ c_r` |
//! | inside Q's rule (`Q' := 7 B`, `B(x) = κ x²`) | `7 κ x²` | `7 κ x²` | `7 κ c_outer x` | `7 κ c_outer x` |
//!
//! where `c_outer` is `c_f` when the outer pass is forward and `c_r` when it
//! is reverse: at second order the outer pass differentiates Q's rule, meets
//! the call to F (or S) inside it, and applies *its own* mode's rule. At
//! x = 2 every value is a small integer, so each is asserted exactly, and
//! the four inline settings must agree bit for bit.

use crate::support::{every_setting_one_on_the_jit, the_same_under};
use adze::{InlineSetting, Session};
use adze_ir::Val;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Rules {
    Forward,
    Reverse,
    Both,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Arg {
    Scalar,
    Array,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Place {
    Top,
    Loop,
    Branch,
    CalleesCallee,
    InsideRule,
}

const ORDERS: [&str; 6] = ["f", "r", "fr", "rf", "ff", "rr"];

fn source(rules: Rules, arg: Arg, place: Place) -> String {
    let fwd = matches!(rules, Rules::Forward | Rules::Both);
    let rev = matches!(rules, Rules::Reverse | Rules::Both);
    let mut s = String::new();
    let (pre, call) = match arg {
        Arg::Scalar => {
            s += "fn F(x: f64) -> f64 { x * x }\n";
            if fwd {
                s += "rule forward F(x: f64, tx: f64) -> (f64, f64) { (x * x, 3.0 * x * tx) }\n";
            }
            if rev {
                s += "rule reverse F(x: f64, dret: f64) -> f64 { 5.0 * x * dret }\n";
            }
            ("", "F(x)")
        }
        Arg::Array => {
            s += "fn S(a: [f64]) -> f64 {\n    var s = 0.0;\n    for i in 0..len(a) { s = s + a[i] * a[i]; }\n    s\n}\n";
            if fwd {
                s += "rule forward S(a: [f64], ta: [f64]) -> (f64, f64) {
    var s = 0.0;
    var t = 0.0;
    for i in 0..len(a) { s = s + a[i] * a[i]; t = t + 3.0 * a[i] * ta[i]; }
    (s, t)
}\n";
            }
            if rev {
                s += "rule reverse S(a: [f64], da: mut [f64], dret: f64) {
    for i in 0..len(a) { da[i] = da[i] + 5.0 * a[i] * dret; }
}\n";
            }
            ("let t = zeros(2); t[0] = x; t[1] = 2.0 * x; ", "S(t)")
        }
    };
    s += &match place {
        Place::Top => format!("fn h(x: f64) -> f64 {{ {pre}{call} }}\n"),
        Place::Loop => format!(
            "fn h(x: f64) -> f64 {{\n    var s = 0.0;\n    for i in 0..3 {{ {pre}s = s + {call}; }}\n    s\n}}\n"
        ),
        Place::Branch => {
            format!("fn h(x: f64) -> f64 {{ if x > 0.0 {{ {pre}{call} }} else {{ 0.0 }} }}\n")
        }
        Place::CalleesCallee => format!(
            "fn m2(x: f64) -> f64 {{ {pre}{call} }}\nfn m1(x: f64) -> f64 {{ m2(x) }}\nfn h(x: f64) -> f64 {{ m1(x) }}\n"
        ),
        Place::InsideRule => format!(
            "fn B(x: f64) -> f64 {{ {pre}{call} }}
fn Q(x: f64) -> f64 {{ B(x) }}
rule forward Q(x: f64, tx: f64) -> (f64, f64) {{ (B(x), 7.0 * tx * B(x)) }}
rule reverse Q(x: f64, dret: f64) -> f64 {{ 7.0 * dret * B(x) }}
fn h(x: f64) -> f64 {{ Q(x) }}\n"
        ),
    };
    s += "
fn d_f(x: f64) -> f64 { let (y, t) = autodiff(forward, h, dual, dual(x, 1.0)); t }
fn d_r(x: f64) -> f64 { autodiff(reverse, h, active, active(x)) }
fn d_ff(x: f64) -> f64 { let (y, t) = autodiff(forward, d_f, dual, dual(x, 1.0)); t }
fn d_rf(x: f64) -> f64 { autodiff(reverse, d_f, active, active(x)) }
fn d_fr(x: f64) -> f64 { let (y, t) = autodiff(forward, d_r, dual, dual(x, 1.0)); t }
fn d_rr(x: f64) -> f64 { autodiff(reverse, d_r, active, active(x)) }
";
    s
}

/// The value the rules imply (see the module doc).
fn expected(rules: Rules, arg: Arg, place: Place, order: &str, x: f64) -> f64 {
    let c_f = if matches!(rules, Rules::Forward | Rules::Both) {
        3.0
    } else {
        2.0
    };
    let c_r = if matches!(rules, Rules::Reverse | Rules::Both) {
        5.0
    } else {
        2.0
    };
    let kappa = if arg == Arg::Array { 5.0 } else { 1.0 };
    let m = if place == Place::Loop { 3.0 } else { 1.0 };
    let c = |pass: u8| if pass == b'f' { c_f } else { c_r };
    let o = order.as_bytes();
    if place == Place::InsideRule {
        return match o {
            [_] => 7.0 * kappa * x * x,
            [outer, _] => 7.0 * kappa * c(*outer) * x,
            _ => unreachable!(),
        };
    }
    match o {
        [only] => m * kappa * c(*only) * x,
        [_, inner] => m * kappa * c(*inner),
        _ => unreachable!(),
    }
}

#[test]
fn every_rule_in_every_place_and_order_under_every_inline_setting() {
    let mut checked = 0;
    let runs = every_setting_one_on_the_jit(InlineSetting::All);
    for rules in [Rules::Forward, Rules::Reverse, Rules::Both] {
        for arg in [Arg::Scalar, Arg::Array] {
            for place in [
                Place::Top,
                Place::Loop,
                Place::Branch,
                Place::CalleesCallee,
                Place::InsideRule,
            ] {
                let src = source(rules, arg, place);
                let base = Session::from_source("matrix.adz", &src)
                    .unwrap_or_else(|e| panic!("{e}\n{src}"));
                for order in ORDERS {
                    let func = format!("d_{order}");
                    for x in [2.0, 0.5] {
                        let want = expected(rules, arg, place, order, x);
                        let out = the_same_under(&base, &runs, &func, &[Val::F64(x)])
                            .unwrap_or_else(|e| panic!("{rules:?} {arg:?} {place:?}: {e}\n{src}"));
                        assert_eq!(
                            out.results,
                            [Val::F64(want)],
                            "{rules:?} rules, {arg:?}, {place:?}, order {order}, x = {x}\n{src}"
                        );
                        checked += runs.len();
                    }
                }
            }
        }
    }
    assert_eq!(checked, 3 * 2 * 5 * 6 * 2 * 4);
}
