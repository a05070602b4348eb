//! `autodiff(forward, ..)` in the language: compiled, lowered by
//! `lower_autodiff`, run by the interpreter, with exact expected values;
//! nesting (forward over forward, to third order) and forward rules.

use crate::support::*;
use adze_ad::lower_autodiff;
use adze_ir::{InstData, Mode, Module, Val};

fn lowered(src: &str) -> Module {
    let mut m = compile(src);
    lower_autodiff(&mut m).unwrap_or_else(|e| panic!("{e}\n{m}"));
    check_ir(&m);
    for (_, f) in m.iter() {
        for (_, inst) in f.layout.insts() {
            if let InstData::Autodiff { spec, .. } = f.dfg.inst(inst) {
                assert_eq!(
                    spec.mode,
                    Mode::Reverse,
                    "a forward request is left in @{}",
                    f.name
                );
            }
        }
    }
    m
}

fn call(m: &Module, name: &str, args: &[Val]) -> Vec<Val> {
    run(m, m.get(name).unwrap(), args)
}

fn f(x: f64) -> Val {
    Val::F64(x)
}

const NESTED: &str = "
fn cube(x: f64) -> f64 { x * x * x }

fn d1(x: f64) -> f64 {
    let (y, dy) = autodiff(forward, cube, dual, dual(x, 1.0));
    dy
}

fn d2(x: f64) -> f64 {
    let (y, dy) = autodiff(forward, d1, dual, dual(x, 1.0));
    dy
}

fn d3(x: f64) -> f64 {
    let (y, dy) = autodiff(forward, d2, dual, dual(x, 1.0));
    dy
}

fn both(x: f64, tx: f64) -> (f64, f64) {
    autodiff(forward, d1, dual, dual(x, tx))
}
";

#[test]
fn forward_over_forward_to_third_order() {
    let m = lowered(NESTED);
    // cube' = 3x², cube'' = 6x, cube''' = 6, computed exactly at x = 2.
    assert_eq!(call(&m, "d1", &[f(2.0)]), vec![f(12.0)]);
    assert_eq!(call(&m, "d2", &[f(2.0)]), vec![f(12.0)]);
    assert_eq!(call(&m, "d3", &[f(2.0)]), vec![f(6.0)]);
    assert_eq!(call(&m, "d3", &[f(-7.5)]), vec![f(6.0)]);
    assert_eq!(call(&m, "both", &[f(3.0), f(0.5)]), vec![f(27.0), f(9.0)]);
    let names: Vec<&str> = m.iter().map(|(_, f)| f.name.as_str()).collect();
    assert!(names.contains(&"cube.fwd.dual"), "{names:?}");
    assert!(names.contains(&"d1.fwd.dual"), "{names:?}");
    assert!(names.contains(&"cube.fwd.dual.fwd.dual_const"), "{names:?}");
}

const ARRAYS: &str = "
fn norm2(x: [f64], w: f64) -> f64 {
    var s = 0.0;
    for i in 0..len(x) { s = s + w * x[i] * x[i]; }
    s
}

fn grad_dir(x: [f64], v: [f64], w: f64) -> f64 {
    let (y, dy) = autodiff(forward, norm2, dual, dup(x, v), const(w));
    dy
}

// The directional derivative of grad_dir along (v2, tw): a second derivative.
fn second(x: [f64], v: [f64], v2: [f64], w: f64, tw: f64) -> f64 {
    let (y, dy) = autodiff(forward, grad_dir, dual, dup(x, v2), const(v), dual(w, tw));
    dy
}

fn scale_into(x: [f64], out: mut [f64], k: f64) {
    for i in 0..len(x) { out[i] = k * x[i] * x[i]; }
}

fn push_forward(x: [f64], dx: [f64], out: mut [f64], dout: mut [f64]) {
    autodiff(forward, scale_into, const, dup(x, dx), dup(out, dout), const(3.0));
}
";

#[test]
fn arrays_through_autodiff() {
    let m = lowered(ARRAYS);
    let x = Val::Array(vec![1.0, 2.0, -3.0]);
    let v = Val::Array(vec![0.5, 0.0, 1.0]);
    let v2 = Val::Array(vec![1.0, -1.0, 2.0]);
    // d/dε norm2(x + εv) = 2w Σ x_i v_i = 2·1.5·(0.5 - 3) = -7.5.
    assert_eq!(
        call(&m, "grad_dir", &[x.clone(), v.clone(), f(1.5)]),
        vec![f(-7.5)]
    );
    // Along (v2, tw): 2w Σ v2_i v_i + 2 tw Σ x_i v_i = 3·(0.5 + 2) + 2·0.25·(-2.5).
    assert_eq!(
        call(&m, "second", &[x.clone(), v, v2, f(1.5), f(0.25)]),
        vec![f(3.0 * 2.5 + 0.5 * -2.5)]
    );
    let out = run_outcome(
        &m,
        m.get("push_forward").unwrap(),
        &[
            x,
            Val::Array(vec![1.0, 1.0, 0.5]),
            Val::Array(vec![0.0; 3]),
            Val::Array(vec![0.0; 3]),
        ],
    );
    assert_eq!(out.args[2], Val::Array(vec![3.0, 12.0, 27.0]));
    assert_eq!(out.args[3], Val::Array(vec![6.0, 12.0, -9.0]));
}

const RULES: &str = "
fn sq(x: f64) -> f64 { x * x }

// A deliberately wrong forward rule: its tangent shows whether it was used.
rule forward sq(x: f64, tx: f64) -> (f64, f64) { (x * x, 100.0 * tx) }

fn g(x: f64) -> f64 { sin(sq(x)) }

fn dg(x: f64) -> f64 {
    let (y, dy) = autodiff(forward, g, dual, dual(x, 1.0));
    dy
}
";

#[test]
fn forward_rules_replace_the_callee_derivative() {
    let m = lowered(RULES);
    // d/dx sin(sq(x)) with the rule's tangent 100·ẋ: cos(x²)·100.
    assert_eq!(call(&m, "dg", &[f(0.5)]), vec![f(0.25f64.cos() * 100.0)]);
}

/// `@sum_sq` calls `@sq`; `@sum_sq_inlined` is the same code with the call
/// inlined as a rule region. The rule (deliberately 100·ẋ) must be applied
/// to both, with the same result: inlining never changes a derivative.
const REGION: &str = include_str!("../data/forward_region.ir");

#[test]
fn forward_rules_apply_to_rule_regions_as_to_calls() {
    use adze_ir::{ArgActivity::Dup, Val};
    let mut m = parse(REGION);
    verify(&m);
    let called = derive(&mut m, "sum_sq", &[Dup], 1);
    let inlined = derive(&mut m, "sum_sq_inlined", &[Dup], 1);
    let args = [
        Val::Array(vec![1.0, 2.0, 3.0]),
        Val::Array(vec![1.0, 0.5, -1.0]),
    ];
    let a = run(&m, called, &args);
    let b = run(&m, inlined, &args);
    assert_eq!(a, vec![f(14.0), f(100.0 * 0.5)]);
    assert_eq!(a, b);
    // The region stands for `call @sq`, whose forward rule supplies the
    // primal value and the tangent: like the call, it becomes a call to the
    // rule (so an outer pass differentiates the rule's body in both cases).
    let text = m.display_function(inlined).to_string();
    assert!(!text.contains("region0"), "{text}");
    assert!(text.contains("v7, v16 = call @sq.rule(v6, "), "{text}");
    expect_file("sum_sq_inlined.fwd", &text);
}

#[test]
fn a_rule_of_the_wrong_signature_is_an_error() {
    let mut m = parse(&REGION.replace(
        "function @sq.rule(x: f64, x.t: f64) -> (f64, f64) {\nblock0(v0: f64, v1: f64):",
        "function @sq.rule(x: f64, x.t: f64, z: f64) -> (f64, f64) {\nblock0(v0: f64, v1: f64, v12: f64):",
    ));
    let e = adze_ad::derive_forward(
        &mut m,
        "sum_sq",
        &[adze_ir::ArgActivity::Dup],
        adze_ir::RetActivity::Dual,
        1,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "the forward rule `sq.rule` of `sq` has the signature (f64, f64, f64) -> (f64, f64), expected (f64, f64) -> (f64, f64)"
    );
}
