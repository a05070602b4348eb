//! Reverse over reverse (and the other second- and third-order nestings)
//! of code that uses the tape: gradients of gradients against forward over
//! reverse and finite differences of the inner gradient; exact polynomial
//! derivatives to fourth order.

use super::support::*;

/// Central finite difference of `g` at `x` along `dir`.
fn fd(g: impl Fn(f64) -> f64) -> f64 {
    let h = 1e-5;
    (g(h) - g(-h)) / (2.0 * h)
}

#[track_caller]
fn close(got: f64, want: f64, tol: f64, what: &str) {
    let scale = 1f64.max(got.abs()).max(want.abs());
    assert!(
        (got - want).abs() <= tol * scale,
        "{what}: got {got}, want {want}"
    );
}

const SCALAR: &str = "
fn h(x: f64, y: f64) -> f64 { sin(x) * y * y + exp(x * y) / (1.0 + x * x) }

// The gradient of h, combined: g = ∂h/∂x + 3·∂h/∂y.
fn g(x: f64, y: f64) -> f64 {
    let (dx, dy) = autodiff(reverse, h, active, active(x), active(y));
    dx + 3.0 * dy
}

// Reverse over reverse: the gradient of g.
fn gg(x: f64, y: f64) -> (f64, f64) { autodiff(reverse, g, active, active(x), active(y)) }

// Forward over reverse: the directional derivative of g.
fn gf(x: f64, y: f64, tx: f64, ty: f64) -> f64 {
    let (v, t) = autodiff(forward, g, dual, dual(x, tx), dual(y, ty));
    t
}
";

#[test]
fn gradient_of_a_gradient_of_scalars() {
    let m = lowered(SCALAR);
    for (x, y) in [(0.7, -1.3), (-0.4, 0.9), (1.5, 0.25)] {
        let out = run(&m, "gg", &[f(x), f(y)]);
        let (gx, gy) = (scalar(&out, 0), scalar(&out, 1));
        let gf = |tx, ty| scalar(&run(&m, "gf", &[f(x), f(y), f(tx), f(ty)]), 0);
        // Reverse over reverse and forward over reverse agree closely (the
        // same second derivatives, summed in another order).
        close(gx, gf(1.0, 0.0), 1e-13, "∂g/∂x: rev∘rev vs fwd∘rev");
        close(gy, gf(0.0, 1.0), 1e-13, "∂g/∂y: rev∘rev vs fwd∘rev");
        // And finite differences of the inner gradient.
        let g = |x: f64, y: f64| scalar(&run(&m, "g", &[f(x), f(y)]), 0);
        close(gx, fd(|e| g(x + e, y)), 1e-8, "∂g/∂x vs finite differences");
        close(gy, fd(|e| g(x, y + e)), 1e-8, "∂g/∂y vs finite differences");
    }
}

const ARRAY: &str = "
fn h(x: [f64]) -> f64 {
    var s = 0.0;
    for i in 0..len(x) - 1 { s = s + x[i] * x[i] * sin(x[i + 1]) + exp(0.1 * x[i] * x[i + 1]); }
    s
}

// w · ∇h(x): its gradient in x is the Hessian-vector product H·w.
fn q(x: [f64], w: [f64]) -> f64 {
    let dx = zeros(len(x));
    autodiff(reverse, h, active, dup(x, dx));
    var s = 0.0;
    for i in 0..len(x) { s = s + w[i] * dx[i]; }
    s
}

// Reverse over reverse: H·w accumulated into hw.
fn hvp_rr(x: [f64], w: [f64], hw: mut [f64]) {
    autodiff(reverse, q, active, dup(x, hw), const(w));
}

// Forward over reverse: v · H · w.
fn vhw(x: [f64], v: [f64], w: [f64]) -> f64 {
    let (y, t) = autodiff(forward, q, dual, dup(x, v), const(w));
    t
}
";

#[test]
fn gradient_of_a_gradient_of_arrays() {
    let m = lowered(ARRAY);
    let x = [0.3, -1.1, 0.8, 1.7, -0.2];
    let w = [1.0, -0.5, 0.25, 2.0, 0.75];
    let out = run(&m, "hvp_rr", &[a(&x), a(&w), a(&[0.0; 5])]);
    let hw = array(&out, 2);
    for k in 0..5 {
        let mut e = [0.0; 5];
        e[k] = 1.0;
        // Forward over reverse: e_k · H · w.
        let fr = scalar(&run(&m, "vhw", &[a(&x), a(&e), a(&w)]), 0);
        close(hw[k], fr, 1e-13, &format!("(H·w)[{k}]: rev∘rev vs fwd∘rev"));
        // Finite differences of w · ∇h along e_k.
        let q = |d: f64| {
            let mut xs = x;
            xs[k] += d;
            scalar(&run(&m, "q", &[a(&xs), a(&w)]), 0)
        };
        close(
            hw[k],
            fd(q),
            1e-8,
            &format!("(H·w)[{k}] vs finite differences"),
        );
    }
}

const POLY: &str = "
fn p(x: f64) -> f64 { x * x * x * x }
fn p1(x: f64) -> f64 { autodiff(reverse, p, active, active(x)) }
fn p2(x: f64) -> f64 { autodiff(reverse, p1, active, active(x)) }
fn p3r(x: f64) -> f64 { autodiff(reverse, p2, active, active(x)) }
fn p3f(x: f64) -> f64 { let (y, t) = autodiff(forward, p2, dual, dual(x, 1.0)); t }
fn p4(x: f64) -> f64 { autodiff(reverse, p3r, active, active(x)) }
fn q1(x: f64) -> f64 { let (y, t) = autodiff(forward, p, dual, dual(x, 1.0)); t }
fn q2(x: f64) -> f64 { autodiff(reverse, q1, active, active(x)) }
fn q3(x: f64) -> f64 { autodiff(reverse, q2, active, active(x)) }
fn q3f(x: f64) -> f64 { let (y, t) = autodiff(forward, q2, dual, dual(x, 1.0)); t }
";

#[test]
fn polynomial_to_fourth_order() {
    let m = lowered(POLY);
    // p = x⁴: p' = 4x³ = 108, p'' = 12x² = 108, p''' = 24x = 72, p'''' = 24
    // at x = 3, all exact in floating point.
    let at3 = |name: &str| scalar(&run(&m, name, &[f(3.0)]), 0);
    exact(at3("p1"), 108.0, "rev");
    exact(at3("p2"), 108.0, "rev∘rev");
    exact(at3("p3r"), 72.0, "rev∘rev∘rev");
    exact(at3("p3f"), 72.0, "fwd∘rev∘rev");
    exact(at3("p4"), 24.0, "rev∘rev∘rev∘rev");
    exact(at3("q1"), 108.0, "fwd");
    exact(at3("q2"), 108.0, "rev∘fwd");
    exact(at3("q3"), 72.0, "rev∘rev∘fwd");
    exact(at3("q3f"), 72.0, "fwd∘rev∘fwd");
    // Each nested reverse pass records on a tape L no code it differentiates
    // uses, and keeps the adjoints of traffic on tape T < L on L + 1 + T.
    // p's derivative pushes nothing (its adjoint recomputes x·x and x·x·x
    // from x, a parameter it takes), so p1's records on 0 as well; p1's
    // derivative differentiates p's split pair as a callee, whose adjoint
    // takes no scalar and pops x: p2's records on 1 (adjoints of tape 0 on
    // 2); p3r's on 3 (4 to 6).
    let names: Vec<&str> = m.iter().map(|(_, f)| f.name.as_str()).collect();
    for n in [
        "p.aug.active",
        "p1.aug.active",
        "p2.aug.active.t1",
        "p3r.aug.active.t3",
    ] {
        assert!(names.contains(&n), "no {n} in {names:?}");
    }
}
