//! Reverse mode on every function of `ir-examples/`: the dot-product test
//! against forward mode (`w · (J v) == (Jᵀ w) · v`, with `w` seeding the
//! f64 results and the final contents of `mut` arrays), and the adjoint IR
//! running bit-identically on the JIT and the interpreter. Forward mode is
//! itself checked against finite differences in `forward.rs`, so this closes
//! the loop for reverse mode.

use crate::support::{for_each_differentiable, inputs, OnBoth};
use adze::Engine;
use adze_ir::{Mode, Type, Val};
use adze_test_support::adze::assert_close;

const W: [f64; 5] = [0.3, -1.1, 0.6, 1.7, -0.45];
const V: [f64; 5] = [0.7, -0.4, 1.1, 0.25, -1.3];

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The functions whose custom rules are deliberately wrong (seed.adz, SPEC
/// §1; array_results.adz's `dbl_custom`): reverse mode applies the rule,
/// forward mode or finite differences see the body, and the two disagree
/// by design. Their own tests check what the rules give.
pub const CUSTOM: [&str; 5] = [
    "f_custom",
    "g_custom",
    "dg_custom",
    "hvp_custom",
    "uses_dbl_custom",
];

#[test]
fn reverse_gradients_pass_the_dot_product_test_on_every_example() {
    let tally = for_each_differentiable(|path, session, func| {
        let sig = func.sig.clone();
        // The seed's reverse rule is deliberately wrong (SPEC §1): reverse
        // mode applies it, forward mode differentiates the body, and the
        // two disagree by design. tests/it/seed.rs checks what it gives.
        if CUSTOM.contains(&func.name.as_str()) {
            return None;
        }
        let derived = |mode| session.derive(&func.name, mode, 1, &[]);
        let ((rmod, rname), (fmod, fname)) = match (derived(Mode::Reverse), derived(Mode::Forward))
        {
            (Ok(r), Ok(f)) => (r, f),
            // Custom reverse rules in reverse mode and reverse over
            // reverse arrive with the rules issue.
            (Err(adze::Error::Ad(adze_ad::AdError::ReverseUnsupported { what, .. })), _)
            | (_, Err(adze::Error::Ad(adze_ad::AdError::ReverseUnsupported { what, .. })))
                if what.contains("reverse rule") || what.contains("reverse over reverse") =>
            {
                return None;
            }
            (Err(e), _) | (_, Err(e)) => panic!("{}: {}: {e}", path.display(), func.name),
        };
        let rid = rmod.get(&rname).unwrap();
        let both = OnBoth::new(&rmod, rid, rname.clone());
        let mut checked = 0;
        let tys: Vec<Type> = sig.param_types().collect();
        for (k, args) in inputs(&tys, 3).into_iter().enumerate() {
            // Forward: tangents along v.
            let mut fargs = Vec::new();
            let mut rargs = Vec::new();
            let mut v_in: Vec<f64> = Vec::new();
            for (i, (a, p)) in args.iter().zip(&sig.params).enumerate() {
                fargs.push(a.clone());
                rargs.push(a.clone());
                match a {
                    Val::F64(_) => {
                        let v = V[(k + i) % 5];
                        fargs.push(Val::F64(v));
                        v_in.push(v);
                    }
                    Val::Array(xs) => {
                        let v: Vec<f64> = (0..xs.len()).map(|j| V[(k + i + j) % 5]).collect();
                        v_in.extend(&v);
                        fargs.push(Val::Array(v));
                        // The shadow: the cotangent w of the final contents
                        // of a `mut` array, an accumulator (0) otherwise.
                        let shadow = if p.mutable {
                            (0..xs.len()).map(|j| W[(k + 2 * i + j) % 5]).collect()
                        } else {
                            vec![0.0; xs.len()]
                        };
                        rargs.push(Val::Array(shadow));
                    }
                    _ => {}
                }
            }
            let rev = both.call(&rargs);
            let fwd = session.run_in(&fmod, &fname, &fargs, Engine::Interp);
            let (Ok(rev), Ok(fwd)) = (rev, fwd) else {
                continue;
            };
            // w · (J v): result tangents (w = 1 for each f64 result) and
            // the tangents of the final contents of mut arrays.
            let n = sig.results.len();
            let mut lhs: f64 = fwd.results[n..]
                .iter()
                .map(|t| match t {
                    Val::F64(x) => *x,
                    _ => 0.0,
                })
                .sum();
            // (Jᵀ w) · v: adjoints of the scalars, final shadows of arrays.
            let mut adjoints = rev.results.iter();
            let mut rhs_terms: Vec<f64> = Vec::new();
            let (mut fslot, mut rslot) = (0, 0);
            for (i, (a, p)) in args.iter().zip(&sig.params).enumerate() {
                fslot += 1;
                rslot += 1;
                match a {
                    Val::F64(_) => {
                        fslot += 1;
                        match adjoints.next() {
                            Some(Val::F64(x)) => rhs_terms.push(*x),
                            other => panic!("{rname}: adjoint {other:?}"),
                        }
                    }
                    Val::Array(xs) => {
                        if p.mutable {
                            let w: Vec<f64> =
                                (0..xs.len()).map(|j| W[(k + 2 * i + j) % 5]).collect();
                            if let Val::Array(t) = &fwd.args[fslot] {
                                lhs += dot(&w, t);
                            }
                        }
                        if let Val::Array(s) = &rev.args[rslot] {
                            rhs_terms.extend(s);
                        }
                        fslot += 1;
                        rslot += 1;
                    }
                    _ => {}
                }
            }
            let rhs = dot(&rhs_terms, &v_in);
            if !lhs.is_finite() || !rhs.is_finite() {
                continue; // a pole: both sides are inf/NaN
            }
            let what = format!("{}: {}({args:?}): w·Jv vs Jᵀw·v", path.display(), func.name);
            assert_close(lhs, rhs, 1e-9, &what);
            checked += 1;
        }
        Some(checked)
    });
    let mut skipped = tally.skipped.clone();
    skipped.sort();
    let mut custom = CUSTOM.to_vec();
    custom.sort();
    assert_eq!(skipped, custom);
    assert!(tally.functions >= 40, "{tally:?}");
    assert!(
        tally.checks >= 100,
        "only {} dot-product tests",
        tally.checks
    );
}

/// Two loads of one element with nothing written between them are taped
/// once (`Recipe::Same`): `y[k] * y[k]` of a local `y` pushes `y[k]` once,
/// and its gradient is still `2 y[k]`; with a store between the two loads
/// (`twice`) each is taped, and the gradient is the product rule's. Hand
/// values: `d/dx[k] (x[k]²) = 2 x[k] = 4`, `d/dx[k] (x[k] · 3 x[k]) = 6
/// x[k] = 12` at `x[k] = 2`.
#[test]
fn a_load_of_the_same_element_is_taped_once() {
    let src = "
fn sq(x: [f64]) -> f64 {
    let k = len(x) - 1;
    let y = zeros(len(x));
    y[k] = x[k];
    y[k] * y[k]
}
fn twice(x: [f64]) -> f64 {
    let k = len(x) - 1;
    let y = zeros(len(x));
    y[k] = x[k];
    let a = y[k];
    y[k] = 3.0 * x[k];
    let b = y[k];
    a * b
}
fn dsq(x: [f64], dx: mut [f64]) { autodiff(reverse, sq, active, dup(x, dx)); }
fn dtwice(x: [f64], dx: mut [f64]) { autodiff(reverse, twice, active, dup(x, dx)); }
";
    let program = adze::Program::from_source("same.adz", src).unwrap();
    let session = adze::Session::from_source("same.adz", src).unwrap();
    // Pushes: the loads' values, and `y`'s length (for its shadow).
    for (name, want, pushes) in [("dsq", 4.0, 2), ("dtwice", 12.0, 3)] {
        let x = [1.5, 2.0];
        let mut dx = [0.0, 0.0];
        program
            .function(name)
            .unwrap()
            .call(&mut [adze::Arg::Array(&x), adze::Arg::ArrayMut(&mut dx)])
            .unwrap();
        assert_eq!(dx, [0.0, want], "{name}");
        let module = session.prepare(name).unwrap();
        let text = module.to_string();
        let aug = text
            .split("function @")
            .find(|f| f.starts_with(&format!("{}.aug.", &name[1..])))
            .unwrap_or_else(|| panic!("{name}: no augmented primal in\n{text}"));
        assert_eq!(aug.matches("push ").count(), pushes, "{name}:\n{aug}");
    }
}

/// A `min` whose operands would both be popped (a running minimum and a
/// sum, k-means' `min(closest, dist)`) tapes which operand it chose, one
/// bool, and nothing else; forward mode over the pair tapes no tangent for
/// it. A `max` of loads from read-only arrays tapes nothing: its adjoint
/// loads them again. Derivatives by hand, on ties too, and the same bits
/// with the helper inlined or called, to the third order.
#[test]
fn a_min_of_taped_values_tapes_its_choice() {
    let src = "
fn closer(best: f64, d: f64) -> f64 { min(best, d) }
fn nearest(x: [f64], c: [f64]) -> f64 {
    var total = 0.0;
    for i in 0..len(x) {
        var best = inf;
        for j in 0..len(c) {
            let d = (x[i] - c[j]) * (x[i] - c[j]);
            best = closer(best, d);
        }
        total = total + best;
    }
    total
}
fn top(x: [f64], y: [f64]) -> f64 {
    var s = 0.0;
    for i in 0..len(x) { s = s + max(x[i], y[i]); }
    s
}
fn dn(x: [f64], dx: mut [f64], c: [f64], dc: mut [f64]) {
    autodiff(reverse, nearest, active, dup(x, dx), dup(c, dc));
}
fn hn(x: [f64], v: [f64], dx: mut [f64], hx: mut [f64], c: [f64], dc: mut [f64], hc: mut [f64]) {
    autodiff(forward, dn, const, dup(x, v), dup(dx, hx), const(c), dup(dc, hc));
}
fn third(x: [f64], v: [f64], dx: mut [f64], hx: mut [f64], c: [f64], dc: mut [f64], hc: mut [f64],
         hcb: mut [f64]) {
    let bx = zeros(len(x));
    let bv = zeros(len(v));
    let bdx = zeros(len(dx));
    let bhx = zeros(len(hx));
    let bdc = zeros(len(dc));
    fill(hcb, 1.0);
    autodiff(reverse, hn, const, dup(x, bx), dup(v, bv), dup(dx, bdx), dup(hx, bhx), const(c),
             dup(dc, bdc), dup(hc, hcb));
}
fn dt(x: [f64], dx: mut [f64], y: [f64], dy: mut [f64]) {
    autodiff(reverse, top, active, dup(x, dx), dup(y, dy));
}
";
    let session = adze::Session::from_source("choice.adz", src).unwrap();
    let program = adze::Program::from_source("choice.adz", src).unwrap();
    let module = session.prepare("hn").unwrap().to_string();
    let func = |prefix: &str| {
        module
            .split("function @")
            .find(|f| f.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in\n{module}"))
            .to_string()
    };
    // Called, `closer` recomputes its choice from its parameters; inlined
    // (`prepare` inlines), `nearest` tapes it.
    let aug = func("nearest.aug.");
    assert_eq!(aug.matches("push ").count(), 1, "{aug}");
    let adj = func("nearest.adj.");
    assert!(
        adj.contains("pop 0, bool") && !adj.contains(", f64"),
        "{adj}"
    );
    let fwd = func("nearest.rev.dup_dup.fwd.");
    assert_eq!(fwd.matches("push ").count(), 1, "{fwd}");
    let fwd = func("nearest.adj.dup_dup.fwd.");
    assert!(
        fwd.contains("pop 0, bool") && !fwd.contains("pop 0, f64"),
        "{fwd}"
    );
    let top = session.prepare("dt").unwrap().to_string();
    assert!(!top.contains("push "), "{top}");

    // x = 1.75 is as far from 1.0 as from 2.5: `min` keeps its first
    // operand, the running minimum, so c[0] takes the derivative.
    let x = [0.0, 3.0, -1.0, 1.75];
    let c = [1.0, 2.5, -0.5];
    let (mut dx, mut dc) = ([0.0; 4], [0.0; 3]);
    program
        .function("dn")
        .unwrap()
        .call(&mut [
            adze::Arg::Array(&x),
            adze::Arg::ArrayMut(&mut dx),
            adze::Arg::Array(&c),
            adze::Arg::ArrayMut(&mut dc),
        ])
        .unwrap();
    assert_eq!(dx, [1.0, 1.0, -1.0, 1.5]);
    assert_eq!(dc, [-1.5, -1.0, 0.0]);
    // The Hessian is 2 on the diagonal pairs (x_i, its c): H·v for v = 1.
    let v = [1.0; 4];
    let (mut dx, mut hx, mut dc, mut hc) = ([0.0; 4], [0.0; 4], [0.0; 3], [0.0; 3]);
    program
        .function("hn")
        .unwrap()
        .call(&mut [
            adze::Arg::Array(&x),
            adze::Arg::Array(&v),
            adze::Arg::ArrayMut(&mut dx),
            adze::Arg::ArrayMut(&mut hx),
            adze::Arg::Array(&c),
            adze::Arg::ArrayMut(&mut dc),
            adze::Arg::ArrayMut(&mut hc),
        ])
        .unwrap();
    assert_eq!(hx, [2.0; 4]);
    assert_eq!(hc, [-2.0, -2.0, -4.0]);
    let (mut dy, y) = ([0.0; 3], [0.5, -2.0, 0.0]);
    let mut dx = [0.0; 3];
    program
        .function("dt")
        .unwrap()
        .call(&mut [
            adze::Arg::Array(&[1.0, -3.0, -0.0]),
            adze::Arg::ArrayMut(&mut dx),
            adze::Arg::Array(&y),
            adze::Arg::ArrayMut(&mut dy),
        ])
        .unwrap();
    // max(-0, +0) is +0: y's.
    assert_eq!((dx, dy), ([1.0, 0.0, 0.0], [0.0, 1.0, 1.0]));

    let runs = agree_under_every_inline_setting(&session, "choice.adz");
    assert!(runs >= 4 * 3, "{runs} runs");
}

/// Forward mode over a gradient: the gradient drops its function's value,
/// so the forward derivative of the augmented primal is asked for without
/// its result (`.noret`): it returns nothing and computes no tangent of the
/// value (the optimizer removes what fed it), while a call whose value is
/// used keeps both. The Hessian-vector product is the one worked out by
/// hand, with the helper inlined or called, to the third order.
#[test]
fn forward_over_a_gradient_skips_the_tangent_of_the_dropped_value() {
    let src = "
fn cube_sum(x: [f64]) -> f64 {
    var s = 0.0;
    for i in 0..len(x) { s = s + x[i] * x[i] * x[i]; }
    s
}
fn grad(x: [f64], dx: mut [f64]) { autodiff(reverse, cube_sum, active, dup(x, dx)); }
fn hvp(x: [f64], v: [f64], dx: mut [f64], hv: mut [f64]) {
    autodiff(forward, grad, const, dup(x, v), dup(dx, hv));
}
fn value_and_slope(x: [f64], v: [f64]) -> (f64, f64) {
    autodiff(forward, cube_sum, dual, dup(x, v))
}
fn third(x: [f64], v: [f64], dx: mut [f64], hv: mut [f64], w: mut [f64]) {
    let bx = zeros(len(x));
    let bv = zeros(len(v));
    let bdx = zeros(len(dx));
    fill(w, 1.0);
    autodiff(reverse, hvp, const, dup(x, bx), dup(v, bv), dup(dx, bdx), dup(hv, w));
}
";
    let mut session = adze::Session::from_source("noret.adz", src).unwrap();
    // Not inlined, the augmented primal stays a call.
    session.inline = adze::InlineSetting::None;
    let text = session.prepare("hvp").unwrap().to_string();
    let aug = text
        .split("function @")
        .find(|f| f.starts_with("cube_sum.aug.dup.fwd.dup.noret("))
        .unwrap_or_else(|| panic!("no value-free forward derivative in\n{text}"));
    let header = aug.lines().next().unwrap();
    assert!(header.ends_with(") {"), "{header}");
    assert!(
        !text.contains("function @cube_sum.aug.dup.fwd.dup("),
        "{text}"
    );
    // Asked for its value, forward mode returns it and its tangent.
    let text = session.prepare("value_and_slope").unwrap().to_string();
    assert!(
        text.contains("function @cube_sum.fwd.dup(x: arr, x.d: arr) -> (f64, f64)"),
        "{text}"
    );

    // H = diag(6 x_i): H·v.
    let program = adze::Program::from_source("noret.adz", src).unwrap();
    let (x, v) = ([1.5, -2.0, 0.25], [1.0, 0.5, -4.0]);
    let (mut dx, mut hv) = ([0.0; 3], [0.0; 3]);
    program
        .function("hvp")
        .unwrap()
        .call(&mut [
            adze::Arg::Array(&x),
            adze::Arg::Array(&v),
            adze::Arg::ArrayMut(&mut dx),
            adze::Arg::ArrayMut(&mut hv),
        ])
        .unwrap();
    assert_eq!(dx, [6.75, 12.0, 0.1875]);
    assert_eq!(hv, [9.0, -6.0, -6.0]);
    agree_under_every_inline_setting(&session, "noret.adz");
}

/// A rule region's argument that its body ignores is still read, by the
/// call that stands for the region: the call computing it keeps its
/// results under forward mode (found by the review of session 20: `g(x)`
/// was asked for without them, and the region's call read an undefined
/// value).
#[test]
fn an_argument_a_rule_region_ignores_is_still_computed() {
    let src = "
#[inline(never)]
fn g(x: f64) -> f64 { x * x }
fn h(x: f64, y: f64) -> f64 { x * 3.0 }
rule reverse h(x: f64, y: f64, dret: f64) -> (f64, f64) { (3.0 * dret, 5.0 * dret) }
fn c(x: f64) -> f64 { h(x, g(x)) }
fn fc(x: f64) -> (f64, f64) { autodiff(forward, c, dual, dual(x, 1.0)) }
fn rc(x: f64) -> f64 { autodiff(reverse, c, active, active(x)) }
fn frc(x: f64) -> (f64, f64) { autodiff(forward, rc, dual, dual(x, 1.0)) }
";
    let session = adze::Session::from_source("region_arg.adz", src).unwrap();
    agree_under_every_inline_setting(&session, "region_arg.adz");
    // c = 3x: forward mode differentiates the body, 3.
    let program = adze::Program::from_source("region_arg.adz", src).unwrap();
    let out = program
        .function("fc")
        .unwrap()
        .call(&mut [adze::Arg::F64(2.0)])
        .unwrap();
    assert_eq!(
        out,
        [adze::adze_ir::Val::F64(6.0), adze::adze_ir::Val::F64(3.0)]
    );
}

/// `adze check-inline` on every derivative of `session` (three samples):
/// no difference between inline settings, optimizer on or off and the two
/// engines. The number of runs.
fn agree_under_every_inline_setting(session: &adze::Session, file: &str) -> usize {
    let path = crate::support::root().join(file);
    let options = adze::check_inline::InlineCheckOptions {
        samples: 3,
        ..Default::default()
    };
    let report = adze::check_inline::check_inline(session, &path, &options).unwrap();
    assert!(
        report.differences.is_empty(),
        "{}",
        adze::check_inline::render(&report)
    );
    report.runs
}

/// A final derivative (no reverse derivative of it is taken in the run)
/// recomputes an inlined callee's arguments, loads of a read-only array,
/// instead of popping them: Rosenbrock written with a helper tapes no f64
/// (only the loop's trip count), in its gradient and its Hessian-vector
/// product. A module that
/// also takes a reverse derivative of the gradient pops them as the called
/// helper does, so that reverse over reverse keeps its bits under every
/// inline setting (docs/ad-reverse.md, "Final derivatives").
#[test]
fn a_final_derivative_recomputes_an_inlined_callees_arguments() {
    let src = "
fn term(a: f64, b: f64) -> f64 {
    let u = 1.0 - a;
    let v = b - a ^ 2;
    u ^ 2 + 100.0 * v ^ 2
}
fn pairs(x: [f64]) -> f64 {
    var total = 0.0;
    var i = 1;
    while i < len(x) {
        total = total + term(x[i - 1], x[i]);
        i = i + 1;
    }
    total
}
fn grad(x: [f64], dx: mut [f64]) {
    fill(dx, 0.0);
    autodiff(reverse, pairs, active, dup(x, dx));
}
fn hvp(x: [f64], v: [f64], dx: mut [f64], hv: mut [f64]) {
    autodiff(forward, grad, const, dup(x, v), dup(dx, hv));
}
";
    let nested = format!(
        "{src}
fn norm2(x: [f64]) -> f64 {{
    let dx = zeros(len(x));
    grad(x, dx);
    var s = 0.0;
    for i in 0..len(dx) {{ s = s + dx[i] * dx[i]; }}
    s
}}
fn second(x: [f64], gx: mut [f64]) {{
    autodiff(reverse, norm2, active, dup(x, gx));
}}
"
    );
    let mut session = adze::Session::from_source("final.adz", src).unwrap();
    // Called (`term` not inlined), its split pair takes `a` and `b`, which
    // the caller recomputes: no f64 on the tape either.
    for inline in [adze::InlineSetting::All, adze::InlineSetting::None] {
        session.inline = inline;
        for f in ["grad", "hvp"] {
            let module = session.prepare(f).unwrap().to_string();
            assert!(!module.contains("pop 0, f64"), "{f} {inline:?}:\n{module}");
        }
    }
    session.inline = adze::InlineSetting::default();
    let x = [0.5, 2.0, -1.0];
    let (mut dx, mut hv) = ([0.0; 3], [0.0; 3]);
    let program = adze::Program::from_source("final.adz", src).unwrap();
    program
        .function("hvp")
        .unwrap()
        .call(&mut [
            adze::Arg::Array(&x),
            adze::Arg::Array(&[1.0, 0.0, 0.0]),
            adze::Arg::ArrayMut(&mut dx),
            adze::Arg::ArrayMut(&mut hv),
        ])
        .unwrap();
    // By hand: the pairs (0.5, 2) and (2, -1); ∂/∂a = -2(1 - a) - 400a(b - a²),
    // ∂/∂b = 200(b - a²); ∂²/∂a² = 2 - 400(b - a²) + 800a², ∂²/∂a∂b = -400a.
    assert_eq!(dx, [-351.0, 350.0 + 4002.0, -1000.0]);
    assert_eq!(hv, [-498.0, -200.0, 0.0]);
    let runs = agree_under_every_inline_setting(&session, "final.adz");
    assert!(runs >= 2 * 3, "{runs} runs");

    // With a reverse derivative of `grad` in the module, the arguments are
    // popped (the called `term` pops its parameters), and reverse over
    // reverse agrees under every inline setting; before the decision was
    // per module, it differed in the last bit.
    let session = adze::Session::from_source("nested.adz", &nested).unwrap();
    let module = session.prepare("second").unwrap().to_string();
    assert!(module.contains("pop 0, f64"), "{module}");
    let runs = agree_under_every_inline_setting(&session, "nested.adz");
    assert!(runs >= 3 * 3, "{runs} runs");
}

/// A final derivative snapshots a local array that nothing writes once it
/// is read, and that it reads in two loops: pushed whole where the primal returns, popped into the
/// adjoint's own copy, whose loads stand for the popped ones. An array
/// rewritten after it is read (each iteration's scratch row) is taped
/// load by load as before. Gradients by hand; both under every inline
/// setting, and a reverse derivative of the gradient (no snapshot then).
#[test]
fn a_final_derivative_snapshots_an_array_built_once() {
    let src = "
fn build(p: [f64], q: mut [f64]) {
    for i in 0..len(q) { q[i] = p[i] * p[i]; }
}
fn once(p: [f64], x: [f64]) -> f64 {
    let q = zeros(len(p));
    build(p, q);
    var s = 0.0;
    for i in 0..len(x) {
        for j in 0..len(q) { s = s + q[j] * x[i] * x[i]; }
    }
    s
}
fn rewritten(p: [f64], x: [f64]) -> f64 {
    let q = zeros(len(p));
    var s = 0.0;
    for i in 0..len(x) {
        for j in 0..len(q) { q[j] = p[j] * x[i]; }
        for j in 0..len(q) { s = s + q[j] * q[j]; }
    }
    s
}
fn d_once(p: [f64], dp: mut [f64], x: [f64], dx: mut [f64]) {
    autodiff(reverse, once, active, dup(p, dp), dup(x, dx));
}
fn d_rewritten(p: [f64], dp: mut [f64], x: [f64], dx: mut [f64]) {
    autodiff(reverse, rewritten, active, dup(p, dp), dup(x, dx));
}
fn h_once(p: [f64], v: [f64], dp: mut [f64], hp: mut [f64], x: [f64], dx: mut [f64], hx: mut [f64]) {
    autodiff(forward, d_once, const, dup(p, v), dup(dp, hp), const(x), dup(dx, hx));
}
fn few(x: [f64], n: i64) -> f64 {
    let q = zeros(n);
    q[0] = x[0] * x[1];
    q[1] = sin(x[1]);
    var s = 0.0;
    for i in 0..2 { s = s + q[i] * x[i]; }
    s
}
fn d_few(x: [f64], dx: mut [f64], n: i64) {
    autodiff(reverse, few, active, dup(x, dx), const(n));
}
";
    let nested = format!(
        "{src}
fn norm(p: [f64], x: [f64]) -> f64 {{
    let dp = zeros(len(p));
    let dx = zeros(len(x));
    d_once(p, dp, x, dx);
    dp[0] * dp[0] + dx[1] * dp[1]
}}
fn second(p: [f64], gp: mut [f64], x: [f64], gx: mut [f64]) {{
    autodiff(reverse, norm, active, dup(p, gp), dup(x, gx));
}}
"
    );
    let session = adze::Session::from_source("snapshot.adz", src).unwrap();
    // `few` reads 2 of `n` elements in one loop: pushing all `n` would not
    // pay (the review of session 21: called 2000 times with n = 200 000,
    // the tape outgrew its budget).
    for (f, snapshot) in [
        ("d_once", true),
        ("h_once", true),
        ("d_rewritten", false),
        ("d_few", false),
    ] {
        let module = session.prepare(f).unwrap().to_string();
        assert_eq!(module.contains("q.snapshot"), snapshot, "{f}:\n{module}");
    }
    let program = adze::Program::from_source("snapshot.adz", src).unwrap();
    let (p, x) = ([1.0, -2.0, 3.0], [0.5, 2.0]);
    // Both are Σ_i x_i² Σ_j p_j²: ∂/∂p_j = 2 p_j Σ x², ∂/∂x_i = 2 x_i Σ p².
    let (sx, sp) = (0.25 + 4.0, 1.0 + 4.0 + 9.0);
    for f in ["d_once", "d_rewritten"] {
        let (mut dp, mut dx) = ([0.0; 3], [0.0; 2]);
        program
            .function(f)
            .unwrap()
            .call(&mut [
                adze::Arg::Array(&p),
                adze::Arg::ArrayMut(&mut dp),
                adze::Arg::Array(&x),
                adze::Arg::ArrayMut(&mut dx),
            ])
            .unwrap();
        assert_eq!(dp, p.map(|pj| 2.0 * pj * sx), "{f}");
        assert_eq!(dx, x.map(|xi| 2.0 * xi * sp), "{f}");
    }
    // H·v with v = e_0: ∂²/∂p_0² = 2 Σ x²; ∂²/∂x_i∂p_0 = 4 x_i p_0.
    let (mut dp, mut hp, mut dx, mut hx) = ([0.0; 3], [0.0; 3], [0.0; 2], [0.0; 2]);
    program
        .function("h_once")
        .unwrap()
        .call(&mut [
            adze::Arg::Array(&p),
            adze::Arg::Array(&[1.0, 0.0, 0.0]),
            adze::Arg::ArrayMut(&mut dp),
            adze::Arg::ArrayMut(&mut hp),
            adze::Arg::Array(&x),
            adze::Arg::ArrayMut(&mut dx),
            adze::Arg::ArrayMut(&mut hx),
        ])
        .unwrap();
    assert_eq!(hp, [2.0 * sx, 0.0, 0.0]);
    assert_eq!(hx, x.map(|xi| 4.0 * xi * p[0]));
    let runs = agree_under_every_inline_setting(&session, "snapshot.adz");
    assert!(runs >= 3 * 3, "{runs} runs");

    let session = adze::Session::from_source("nested.adz", &nested).unwrap();
    let module = session.prepare("second").unwrap().to_string();
    assert!(!module.contains("q.snapshot"), "{module}");
    let runs = agree_under_every_inline_setting(&session, "nested.adz");
    assert!(runs >= 4 * 3, "{runs} runs");
}
