//! The seed program of SPEC §1 (the Enzyme.jl report): its gradient and
//! Hessian-vector product at x = [2.0], v = [1.0], with the deliberately
//! wrong reverse rule and without it, exactly, under every inline setting,
//! through in-language `autodiff` and through the Rust API, on the JIT and on
//! the interpreter.

use crate::support::{load, root};
use adze::{Engine, InlineSetting, Session};
use adze_ir::{ArgActivity, Mode, Outcome, RetActivity, Val};

const GRAD_RULE: f64 = 9.164000270468907;
const HVP_RULE: f64 = 72.48292805436535;
const GRAD_PLAIN: f64 = 3.027209981231713;
const HVP_PLAIN: f64 = 11.971902924433648;

fn session(inline: InlineSetting) -> Session {
    let mut s = load(&root().join("ir-examples/seed.adz"));
    s.inline = inline;
    s
}

/// The arguments of the seed's derivatives: x, v and the shadows are
/// arrays of one element each.
fn cells(xs: &[f64]) -> Vec<Val> {
    xs.iter().map(|&x| Val::Array(vec![x])).collect()
}

/// The elements of the final array arguments of `out` from `from` on.
fn finals(out: &Outcome, from: usize) -> Vec<f64> {
    out.args[from..]
        .iter()
        .flat_map(|v| match v {
            Val::Array(xs) => xs.clone(),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn in_language_gradients_and_hvps_under_every_inline_setting() {
    for inline in InlineSetting::ALL {
        let s = session(inline);
        for engine in [Engine::Interp, Engine::Jit] {
            for (suffix, grad, hvp) in [
                ("custom", GRAD_RULE, HVP_RULE),
                ("plain", GRAD_PLAIN, HVP_PLAIN),
            ] {
                let at = format!("{suffix} {inline:?} {engine:?}");
                let run = |f: &str, args: &[f64]| {
                    s.run(&format!("{f}_{suffix}"), &cells(args), engine)
                        .unwrap_or_else(|e| panic!("{f}_{at}: {e}"))
                };
                let dg = run("dg", &[2.0, 0.0]);
                assert_eq!(finals(&dg, 1), [grad], "dg_{at}");
                let h = run("hvp", &[2.0, 1.0, 0.0, 0.0]);
                assert_eq!(finals(&h, 2), [grad, hvp], "hvp_{at}");
            }
        }
    }
}

#[test]
fn rust_api_gradients_and_hvps_under_every_inline_setting() {
    for inline in InlineSetting::ALL {
        let s = session(inline);
        for (g, grad, hvp) in [
            ("g_custom", GRAD_RULE, HVP_RULE),
            ("g_plain", GRAD_PLAIN, HVP_PLAIN),
        ] {
            // The gradient, derived without `autodiff` in source.
            let (mut m, rev) = s.derive(g, Mode::Reverse, 1, &[]).unwrap();
            let out = s
                .run_in(&m, &rev, &cells(&[2.0, 0.0]), Engine::Jit)
                .unwrap();
            assert_eq!(finals(&out, 1), [grad], "{g} {inline:?}");
            // The HVP: the forward derivative of the derived gradient.
            let fwd = adze_ad::derive_forward(
                &mut m,
                &rev,
                &[ArgActivity::Dup, ArgActivity::Dup],
                RetActivity::Const,
                1,
            )
            .unwrap();
            adze_ad::lower_autodiff(&mut m).unwrap();
            let fname = m.func(fwd).name.clone();
            for engine in [Engine::Interp, Engine::Jit] {
                let out = s
                    .run_in(&m, &fname, &cells(&[2.0, 1.0, 0.0, 0.0]), engine)
                    .unwrap();
                assert_eq!(finals(&out, 2), [grad, hvp], "{g} {inline:?} {engine:?}");
            }
        }
    }
}
