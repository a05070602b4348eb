//! Deliberately distinguishable rules, applied at every place and in every
//! nesting order, with and without inlining.
//!
//! `F(x) = x·x` (true derivative 2x) carries a forward rule claiming `3x`
//! and a reverse rule claiming `5x`, so each result's exact value shows
//! which rule was used where. Every case is a function `h` of one f64; for
//! each, the source gets the six derivatives
//!
//! ```text
//! h_f  = d/dx h by forward mode      h_r  = by reverse mode
//! h_ff = forward over forward        h_rf = reverse over forward
//! h_fr = forward over reverse        h_rr = reverse over reverse
//! ```
//!
//! all through `autodiff` in source, and each is checked, exactly, under
//! five inlining schedules (none, early: before AD, late: after AD, all:
//! both, between: after the first-order derivatives are built and before
//! the second-order ones), which must agree bit for bit.

use super::support::*;
use adze_ir::{FuncId, Module};
use adze_opt::InlinePolicy;

/// Inlines every call it may (recursion aside).
struct Everything;

impl InlinePolicy for Everything {
    fn should_inline(&self, _: &Module, _: FuncId, _: FuncId) -> bool {
        true
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Schedule {
    None,
    Early,
    Late,
    All,
    Between,
}

pub const SCHEDULES: [Schedule; 5] = [
    Schedule::None,
    Schedule::Early,
    Schedule::Late,
    Schedule::All,
    Schedule::Between,
];

const RULES: &str = "
fn F(x: f64) -> f64 { x * x }
rule forward F(x: f64, tx: f64) -> (f64, f64) { (x * x, 3.0 * x * tx) }
rule reverse F(x: f64, dret: f64) -> f64 { 5.0 * x * dret }

// G's reverse rule calls F, which has rules: a rule is differentiated like
// any function at higher order. G itself: true derivative 3x², no forward
// rule (forward mode differentiates its body), a reverse rule claiming x².
fn G(x: f64) -> f64 { x * x * x }
rule reverse G(x: f64, dret: f64) -> f64 { dret * F(x) }

// P has only a forward rule, claiming 7x (true 2x): reverse mode keeps
// calling P and differentiates its body.
fn P(x: f64) -> f64 { x * x }
rule forward P(x: f64, tx: f64) -> (f64, f64) { (x * x, 7.0 * x * tx) }

// S(x) = Σ x_i² over an array; the forward rule claims Σ 3 x_i ẋ_i, the
// reverse rule dx_i += 5 x_i · dret.
fn S(x: [f64]) -> f64 {
    var s = 0.0;
    for i in 0..len(x) { s = s + x[i] * x[i]; }
    s
}
rule forward S(x: [f64], tx: [f64]) -> (f64, f64) {
    var s = 0.0;
    var t = 0.0;
    for i in 0..len(x) { s = s + x[i] * x[i]; t = t + 3.0 * x[i] * tx[i]; }
    (s, t)
}
rule reverse S(x: [f64], dx: mut [f64], dret: f64) {
    for i in 0..len(x) { dx[i] = dx[i] + 5.0 * x[i] * dret; }
}

// scale writes its array: a[i] = a[i]·k (true: ∂/∂a = k, ∂/∂k = Σ a_i ā_i).
// Its reverse rule claims 2k and Σ 3 a_i ā_i, and must see `a` as it was at
// the call. No forward rule.
fn scale(a: mut [f64], k: f64) { for i in 0..len(a) { a[i] = a[i] * k; } }
rule reverse scale(a: mut [f64], da: mut [f64], k: f64) -> f64 {
    var dk = 0.0;
    for i in 0..len(a) { dk = dk + 3.0 * a[i] * da[i]; da[i] = 2.0 * k * da[i]; }
    dk
}

// The cases. x·F(x) is x³ (true derivative 3x², second derivative 6x).
fn top(x: f64) -> f64 { x * F(x) }
fn looped(x: f64) -> f64 {
    var s = 0.0;
    for i in 0..3 { s = s + x * F(x); }
    s
}
fn branch(x: f64) -> f64 { if x > 0.0 { x * F(x) } else { x } }
fn inner(x: f64) -> f64 { x * F(x) }
fn middle(x: f64) -> f64 { inner(x) }
fn nested(x: f64) -> f64 { middle(x) }
fn viarule(x: f64) -> f64 { G(x) }
fn fonly(x: f64) -> f64 { x * P(x) }
fn arr(y: f64) -> f64 {
    let t = zeros(2);
    t[0] = y;
    t[1] = 2.0 * y;
    let s = S(t);
    // Overwritten after the call: the reverse rule must see t as it was.
    t[0] = 100.0;
    t[1] = 100.0;
    y * s + t[0]
}
fn ms(y: f64) -> f64 {
    let t = zeros(1);
    t[0] = y;
    scale(t, y);
    t[0]
}
";

/// The six derivatives of `h`, as `.adz` source.
fn derivatives(h: &str) -> String {
    format!(
        "
fn {h}_f(x: f64) -> f64 {{ let (y, t) = autodiff(forward, {h}, dual, dual(x, 1.0)); t }}
fn {h}_r(x: f64) -> f64 {{ autodiff(reverse, {h}, active, active(x)) }}
fn {h}_ff(x: f64) -> f64 {{ let (y, t) = autodiff(forward, {h}_f, dual, dual(x, 1.0)); t }}
fn {h}_rf(x: f64) -> f64 {{ autodiff(reverse, {h}_f, active, active(x)) }}
fn {h}_fr(x: f64) -> f64 {{ let (y, t) = autodiff(forward, {h}_r, dual, dual(x, 1.0)); t }}
fn {h}_rr(x: f64) -> f64 {{ autodiff(reverse, {h}_r, active, active(x)) }}
"
    )
}

const ORDERS: [&str; 6] = ["f", "r", "ff", "rf", "fr", "rr"];

/// (case, x, [f, r, ff, rf, fr, rr]) — every value worked out by hand.
fn expected() -> Vec<(&'static str, f64, [f64; 6])> {
    let x = 2.0;
    vec![
        // h = x·F(x), ḣ = F + x·Ḟ.
        // f:  F + x·3x = 4x² (the forward rule; true 3x²)
        // r:  F + 5x·x = 6x² (the reverse rule)
        // ff, rf: the inner derivative is F + x·(3x·1) with F and its
        //     tangent from the forward rule's call, whose body the outer
        //     pass differentiates: d(x·x) = 2x, d(x·3x) = 6x: 8x
        // fr: the inner gradient is F(x) + 5·x·(x·1), F(x) computed by
        //     `call F` in the augmented primal: the outer forward pass
        //     applies F's forward rule there (3x), and differentiates the
        //     reverse rule's body (5x + 5x): 13x
        // rr: same, the outer reverse pass applying F's reverse rule (5x)
        //     to the `call F` inside the inner derivative: 15x
        ("top", x, [16.0, 24.0, 16.0, 16.0, 26.0, 30.0]),
        // Three times top, in a loop.
        ("looped", x, [48.0, 72.0, 48.0, 48.0, 78.0, 90.0]),
        // x > 0: top, in a branch.
        ("branch", x, [16.0, 24.0, 16.0, 16.0, 26.0, 30.0]),
        // top, in a callee's callee.
        ("nested", x, [16.0, 24.0, 16.0, 16.0, 26.0, 30.0]),
        // G(x) = x³ whose reverse rule is dret·F(x).
        // f:  no forward rule: G's body, 3x² = 12 (G still called)
        // r:  the rule: F(x) = x² = 4 (F's value; no rule of F at 1st order)
        // ff, rf: G's body twice: 6x = 12
        // fr: forward over the rule dret·F(x): F's forward rule, 3x = 6
        // rr: reverse over the rule: F's reverse rule, 5x = 10
        ("viarule", x, [12.0, 4.0, 12.0, 12.0, 6.0, 10.0]),
        // h = x·P(x), P with only a forward rule (7x, true 2x).
        // f:  P + x·7x = 8x² = 32
        // r:  reverse mode differentiates P's body (still calling P in the
        //     augmented primal): P + x·2x = 3x² = 12
        // ff, rf: d(x·x) + d(x·7x) = 2x + 14x = 32
        // fr: d(P(x)) by P's forward rule (7x) + d(2·x·(x·1)) = 4x: 11x = 22
        // rr: d(P(x)) by P's body (2x) + 4x: 6x = 12
        ("fonly", x, [32.0, 12.0, 32.0, 32.0, 22.0, 12.0]),
        // arr(y) = y·S([y, 2y]) + 100 = 5y³ + 100; true derivative 15y² = 60.
        // f:  s + y·3(y·1 + 2y·2) = 5y² + 15y² = 20y² = 80
        // r:  s + (5y·y)·1 + (5·2y·y)·2 = 5y² + 5y² + 20y² = 30y² = 120,
        //     with t as it was at the call (not [100, 100])
        // ff, rf: d(Σt²) = 2y + 8y, d(y·3(y + 4y)) = 30y: 40y = 80
        // fr: ṡ by S's forward rule 15y, + d(5·t0·y) = 10y,
        //     + d(5·t1·y·2) = 40y: 65y = 130
        // rr: s by S's reverse rule: 5t0 + 5t1·2 = 25y, + 10y + 40y: 75y = 150
        ("arr", x, [80.0, 120.0, 80.0, 80.0, 130.0, 150.0]),
        // ms(y): t = [y]; scale(t, y); t[0] = y² (true derivative 2y = 4).
        // f:  no forward rule: scale's body on a copy of t: ȧk + ak̇ = 2y = 4
        // r:  the rule with a = [y] as at the call (not [y²]), ā = [1]:
        //     dk = 3y, ā = 2y: 5y = 10
        // ff, rf: d(2y) = 2
        // fr, rr: d(3·a·1 + 2·k·1) = 5
        ("ms", x, [4.0, 10.0, 2.0, 2.0, 5.0, 5.0]),
    ]
}

fn source() -> String {
    let mut src = RULES.to_string();
    for (h, _, _) in expected() {
        src.push_str(&derivatives(h));
    }
    src
}

fn build(schedule: Schedule) -> Module {
    let first: Vec<String> = expected()
        .iter()
        .flat_map(|(h, _, _)| [format!("{h}_f"), format!("{h}_r")])
        .collect();
    build_src(&source(), schedule, &first)
}

/// `src` compiled and lowered under `schedule`; `first` are the functions
/// whose derivatives are lowered before the inliner runs in `Between`.
pub fn build_src(src: &str, schedule: Schedule, first: &[String]) -> Module {
    let mut m = compile(src);
    let inline = |m: &mut Module| {
        adze_opt::inline_module(m, &Everything);
        check_ir(m);
    };
    let lower = |m: &mut Module| {
        adze_ad::lower_autodiff(m).unwrap_or_else(|e| panic!("{schedule:?}: {e}\n{m}"));
        check_ir(m);
    };
    match schedule {
        Schedule::None => lower(&mut m),
        Schedule::Early => {
            inline(&mut m);
            lower(&mut m);
        }
        Schedule::Late => {
            lower(&mut m);
            inline(&mut m);
        }
        Schedule::All => {
            inline(&mut m);
            lower(&mut m);
            inline(&mut m);
        }
        Schedule::Between => {
            // First-order derivatives, then inlining into them, then the
            // second-order derivatives of the inlined code.
            for name in first {
                let id = m.get(name).unwrap();
                adze_ad::lower_autodiff_from(&mut m, id)
                    .unwrap_or_else(|e| panic!("{name}: {e}\n{m}"));
            }
            check_ir(&m);
            inline(&mut m);
            lower(&mut m);
            inline(&mut m);
        }
    }
    m
}

#[test]
fn every_rule_in_every_place_and_order_under_every_inlining() {
    let modules: Vec<(Schedule, Module)> = SCHEDULES.iter().map(|&s| (s, build(s))).collect();
    let mut failures = Vec::new();
    for (h, x, want) in expected() {
        for (o, &w) in ORDERS.iter().zip(&want) {
            let name = format!("{h}_{o}");
            let mut first: Option<f64> = None;
            for (s, m) in &modules {
                let got = scalar(&run(m, &name, &[f(x)]), 0);
                if got.to_bits() != w.to_bits() {
                    failures.push(format!("{name}({x}) under {s:?}: got {got}, want {w}"));
                }
                if let Some(g) = first {
                    if g.to_bits() != got.to_bits() {
                        failures.push(format!("{name}({x}): {s:?} gives {got}, None {g}"));
                    }
                }
                first = Some(got);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn early_inlining_makes_rule_regions() {
    // So that the schedules above really compare calls with regions.
    let m = build(Schedule::Early);
    for name in [
        "top",
        "looped",
        "branch",
        "nested",
        "viarule",
        "arr",
        "ms",
        "G.rule.reverse",
    ] {
        let f = m.func(m.get(name).unwrap());
        assert!(!f.regions.is_empty(), "@{name} has no region:\n{f}");
    }
    // And the derivatives of inlined code keep them where the primal value
    // is computed: the augmented primal of `top` has F's region.
    let aug = m.func(m.get("top.aug.active").unwrap());
    assert!(
        aug.regions.values().any(|r| m.func(r.callee).name == "F"),
        "{aug}"
    );
}

#[test]
fn the_rules_keep_their_identity_in_the_derivatives() {
    let m = build(Schedule::None);
    let calls = |name: &str, callee: &str| -> bool {
        let id = m.get(name).unwrap();
        m.reachable_from(id)
            .into_iter()
            .any(|f| m.func(f).name == callee)
    };
    // Reverse mode calls F itself in the augmented primal, and its rule
    // in the adjoint.
    assert!(calls("top.aug.active", "F"));
    assert!(calls("top.adj.active", "F.rule.reverse"));
    // Forward mode over G (reverse rule only) calls G, and G's body
    // derivative for the tangent.
    let text = m
        .display_function(m.get("viarule.fwd.dual").unwrap())
        .to_string();
    assert!(text.contains("call @G("), "{text}");
    assert!(text.contains("call @G.fwd.dual("), "{text}");
}
