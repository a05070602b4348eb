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
