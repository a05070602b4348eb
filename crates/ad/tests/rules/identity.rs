//! SPEC §3's rule-identity example, rule regions written by hand in IR
//! text (the shape of docs/ir.md, where the results are defined inside the
//! region), and errors.

use super::support::*;
use adze_ad::{derive_reverse, forward_derivative, reverse_derivative, ForwardRequest};
use adze_ir::{ArgActivity, Module, RetActivity, Val};

/// `sqr` with only a reverse rule (deliberately 5x, true 2x).
const SQR: &str = "
fn sqr(x: f64) -> f64 { x * x }
rule reverse sqr(x: f64, dret: f64) -> f64 { 5.0 * x * dret }
fn h(x: f64) -> f64 { sin(sqr(x)) }
fn dh(x: f64) -> f64 { autodiff(reverse, h, active, active(x)) }
fn fr(x: f64) -> f64 { let (y, t) = autodiff(forward, dh, dual, dual(x, 1.0)); t }
fn rr(x: f64) -> f64 { autodiff(reverse, dh, active, active(x)) }
";

fn calls(m: &Module, from: &str, to: &str) -> bool {
    let id = m.get(from).unwrap_or_else(|| panic!("no {from}"));
    m.reachable_from(id)
        .into_iter()
        .any(|f| m.func(f).name == to)
}

#[test]
fn the_sqr_example_of_the_spec() {
    let m = lowered(SQR);
    let x: f64 = 0.75;
    let y = x * x;
    let at = |name: &str| scalar(&run(&m, name, &[f(x)]), 0);
    // dh = cos(sqr(x)) · 5x: the reverse rule.
    close(at("dh"), y.cos() * 5.0 * x, "dh");
    // Forward over reverse differentiates the body of sqr (2x) for the
    // primal `call sqr` in the augmented primal, and the reverse rule's body:
    // -sin(x²)·2x·5x + cos(x²)·5.
    close(
        at("fr"),
        -(y.sin()) * 2.0 * x * 5.0 * x + y.cos() * 5.0,
        "fr",
    );
    // Reverse over reverse applies the reverse rule (5x) to that primal
    // `call sqr`: -sin(x²)·5x·5x + cos(x²)·5.
    close(
        at("rr"),
        -(y.sin()) * 5.0 * x * 5.0 * x + y.cos() * 5.0,
        "rr",
    );
    // The inner derivative still calls sqr; forward mode over it calls sqr
    // for the value and sqr's body derivative for the tangent.
    assert!(calls(&m, "h.aug.active", "sqr"));
    assert!(calls(&m, "h.aug.active.fwd.dual.noret", "sqr"));
    assert!(calls(&m, "h.aug.active.fwd.dual.noret", "sqr.fwd.dual"));
}

#[track_caller]
fn close(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= 1e-14 * want.abs().max(1.0),
        "{what}: got {got}, want {want}"
    );
}

/// `@sum_sq` calls `@sq`; `@sum_sq_inlined` has the call inlined as a rule
/// region whose result is defined inside it (docs/ir.md's shape).
/// `@sq`'s reverse rule is deliberately 5x (true 2x), its forward rule 3x.
const REGION: &str = include_str!("../data/rule_regions.ir");

/// [`REGION`] with its one occurrence of `from` replaced by `to`, parsed
/// (not verified).
fn region_variant(from: &str, to: &str) -> Module {
    assert_eq!(REGION.matches(from).count(), 1, "`{from}` in REGION");
    adze_ir::parse::parse_module(&REGION.replace(from, to)).unwrap()
}

#[test]
fn hand_written_regions_in_reverse_mode_and_over_forward_mode() {
    let mut m = adze_ir::parse::parse_module(REGION).unwrap();
    verify(&m);
    let xs = [1.0, 2.0, -3.0];
    let mut results = Vec::new();
    for name in ["sum_sq", "sum_sq_inlined"] {
        // Σ x_i·sq(x_i): reverse: ∂/∂x_i = sq + x_i·5x_i = 6x_i² (the rule).
        let d = derive_reverse(&mut m, name, &[ArgActivity::Dup], RetActivity::Active).unwrap();
        check_ir(&m);
        let out = run_id(&m, d, &[a(&xs), a(&[0.5; 3])]);
        let grad = array(&out, 1);
        assert_eq!(grad, vec![0.5 + 6.0, 0.5 + 24.0, 0.5 + 54.0], "{name}");
        // Reverse over forward: the forward derivative along dxs = (1,1,1)
        // is Σ (sq + x_i·3x_i) = Σ 4x_i² by the forward rule, whose body
        // reverse mode then differentiates: ∂/∂x_i = 2x_i + 6x_i = 8x_i.
        let id = m.get(name).unwrap();
        let fwd = forward_derivative(
            &mut m,
            &ForwardRequest::new(id, vec![ArgActivity::Dup], RetActivity::Dual),
        )
        .unwrap();
        let fname = m.func(fwd).name.clone();
        let rf = derive_reverse(
            &mut m,
            &fname,
            &[ArgActivity::Dup, ArgActivity::Const],
            RetActivity::Active,
        )
        .unwrap();
        check_ir(&m);
        let out = run_id(&m, rf, &[a(&xs), a(&[0.0; 3]), a(&[1.0; 3])]);
        // `ret active` seeds both results: the primal Σ x_i·sq (whose
        // gradient the forward rule's body gives: 3x_i², as sq's primal
        // value now comes from the forward rule) and the tangent (8x_i).
        let got = array(&out, 1);
        let want: Vec<f64> = xs.iter().map(|x| 3.0 * x * x + 8.0 * x).collect();
        assert_eq!(got, want, "{name}: reverse over forward");
        results.push((grad, got));
    }
    assert_eq!(results[0], results[1], "inlining changed a derivative");
    // The augmented primal keeps the region, around the primal code.
    let aug = m.get("sum_sq_inlined.aug.dup").unwrap();
    let text = m.display_function(aug).to_string();
    assert!(
        text.contains(
            "region0: @sq(v6) -> (v7) blocks(block3) rules(forward: @sq.f, reverse: @sq.r)"
        ),
        "{text}"
    );
}

#[test]
fn a_region_of_another_shape_is_an_error_not_a_panic() {
    // Two blocks enter the region.
    let mut m = region_variant(
        "    brif v8, block2, block4\nblock2:\n    v6 = load v0, v4\n    jump block3\nblock3:",
        "    brif v8, block2, block4\nblock2:\n    v6 = load v0, v4\n    brif v8, block3, block3\nblock3:",
    );
    verify(&m);
    let f = m.get("sum_sq_inlined").unwrap();
    let r = reverse_derivative(
        &mut m,
        &adze_ad::ReverseRequest::new(f, vec![ArgActivity::Dup], RetActivity::Active),
    );
    assert!(
        matches!(r, Err(adze_ad::AdError::ReverseUnsupported { .. })),
        "{r:?}"
    );
    let r = forward_derivative(
        &mut m,
        &ForwardRequest::new(f, vec![ArgActivity::Dup], RetActivity::Dual),
    );
    assert!(
        matches!(r, Err(adze_ad::AdError::Unsupported { .. })),
        "{r:?}"
    );
}

#[test]
fn a_reverse_rule_of_the_wrong_signature_is_an_error() {
    // The verifier rejects it already; the pass must not panic on it either.
    let mut m = region_variant(
        "function @sq.r(x: f64, dret: f64) -> f64 {\nblock0(v0: f64, v1: f64):",
        "function @sq.r(x: f64, dret: f64, z: f64) -> f64 {\nblock0(v0: f64, v1: f64, v13: f64):",
    );
    let e = derive_reverse(&mut m, "sum_sq", &[ArgActivity::Dup], RetActivity::Active).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the reverse rule `sq.r` of `sq` has the signature (f64, f64, f64) -> (f64), expected (f64, f64) -> (f64)"
    );
}

#[test]
fn forward_rules_in_vector_mode_are_one_call_per_lane() {
    let m0 = compile(
        "fn F(x: f64) -> f64 { x * x }
         rule forward F(x: f64, tx: f64) -> (f64, f64) { (x * x, 3.0 * x * tx) }
         fn h(x: f64, y: f64) -> f64 { y * F(x * y) }",
    );
    let mut m = m0.clone();
    let h = m.get("h").unwrap();
    let acts = vec![ArgActivity::Dual, ArgActivity::Dual];
    let v2 = forward_derivative(
        &mut m,
        &ForwardRequest {
            width: 2,
            ..ForwardRequest::new(h, acts.clone(), RetActivity::Dual)
        },
    )
    .unwrap();
    let v1 = forward_derivative(&mut m, &ForwardRequest::new(h, acts, RetActivity::Dual)).unwrap();
    check_ir(&m);
    let (x, y) = (0.5, -1.25);
    let both = run_id(&m, v2, &[f(x), f(1.0), f(0.0), f(y), f(0.0), f(1.0)]);
    let dx = run_id(&m, v1, &[f(x), f(1.0), f(y), f(0.0)]);
    let dy = run_id(&m, v1, &[f(x), f(0.0), f(y), f(1.0)]);
    assert_eq!(
        both.results,
        vec![
            dx.results[0].clone(),
            dx.results[1].clone(),
            dy.results[1].clone()
        ]
    );
    // ∂h/∂x = y · 3(xy) · y by the rule.
    assert_eq!(dx.results[1], Val::F64(y * (3.0 * (x * y) * y)));
}
