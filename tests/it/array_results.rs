//! Functions with array results (SPEC §1, "Array results"), differentiated
//! the way the general harnesses differentiate the others: every function
//! of every example that returns an array, in forward mode (`dual`: the
//! tangent arrays beside the primal) against central finite differences,
//! in reverse mode (`dup(..)`: one cotangent per result, given) against
//! forward mode by the dot-product test `<u, J v> = <Jᵀ u, v>`, on both
//! engines (bit-identical), and bit-identical under every inline setting.

use crate::support::{
    every_setting_and_engine, examples, inputs, load, the_same_under, with_inline, OnBoth,
};
use adze::{InlineSetting, Session};
use adze_ir::{Mode, Outcome, Signature, Type, Val};

/// Does the harness take `sig`: an array among its results, every result
/// f64 or an f64 array, something to differentiate, no `mut` array (whose
/// final contents would be outputs too)?
fn takes(sig: &Signature) -> bool {
    sig.results.contains(&Type::Array)
        && sig
            .results
            .iter()
            .all(|&t| matches!(t, Type::F64 | Type::Array))
        && sig
            .param_types()
            .any(|t| matches!(t, Type::F64 | Type::Array))
        && !sig.params.iter().any(|p| p.mutable)
}

/// A direction: element `j` of argument `i`.
fn dir(i: usize, j: usize) -> f64 {
    0.3 * (i + 1) as f64 - 0.2 * j as f64 + 0.05
}

/// A cotangent: element `j` of result `r`.
fn cot(r: usize, j: usize) -> f64 {
    1.0 - 0.4 * r as f64 + 0.25 * j as f64
}

/// Every f64 of the outputs, in order (scalars, then array elements).
fn flatten(vals: &[Val]) -> Vec<f64> {
    let mut out = Vec::new();
    for v in vals {
        match v {
            Val::F64(x) => out.push(*x),
            Val::Array(xs) => out.extend_from_slice(xs),
            _ => {}
        }
    }
    out
}

/// `args` moved by `h` along the direction.
fn moved(args: &[Val], h: f64) -> Vec<Val> {
    args.iter()
        .enumerate()
        .map(|(i, a)| match a {
            Val::F64(x) => Val::F64(x + h * dir(i, 0)),
            Val::Array(xs) => Val::Array(
                xs.iter()
                    .enumerate()
                    .map(|(j, x)| x + h * dir(i, j))
                    .collect(),
            ),
            other => other.clone(),
        })
        .collect()
}

struct Derived {
    fwd: (adze_ir::Module, String),
    rev: (adze_ir::Module, String),
}

fn derive(session: &Session, name: &str) -> Derived {
    let d = |mode| {
        session
            .derive(name, mode, 1, &[])
            .unwrap_or_else(|e| panic!("{name} ({mode:?}): {e}"))
    };
    Derived {
        fwd: d(Mode::Forward),
        rev: d(Mode::Reverse),
    }
}

fn run(module: &(adze_ir::Module, String), args: &[Val], what: &str) -> Outcome {
    let id = module.0.get(&module.1).unwrap();
    OnBoth::new(&module.0, id, what.to_string())
        .call(args)
        .unwrap_or_else(|e| panic!("{what}({args:?}): {e}"))
}

#[test]
fn array_results_pass_finite_differences_and_the_dot_product_test_under_every_setting() {
    let mut checked = 0;
    for path in examples() {
        let base = load(&path);
        let sessions: Vec<Session> = InlineSetting::ALL
            .iter()
            .map(|&s| with_inline(&base, s))
            .collect();
        for (_, func) in base.module.iter() {
            // Deliberately wrong rules: their run lines check them.
            if !takes(&func.sig) || func.name.contains("_custom") {
                continue;
            }
            let what = format!("{}: {}", path.display(), func.name);
            // The primal with its own `autodiff` requests lowered.
            let prepared = base.prepare(&func.name).unwrap();
            let id = prepared.get(&func.name).unwrap();
            let primal = OnBoth::new(&prepared, id, what.clone());
            let derived: Vec<Derived> = sessions.iter().map(|s| derive(s, &func.name)).collect();
            let tys: Vec<Type> = func.sig.param_types().collect();
            for args in inputs(&tys, 3) {
                let Ok(out) = primal.call(&args) else {
                    continue; // a run-time error: nothing to differentiate
                };
                // The function itself (its in-language derivatives
                // included) under every setting and engine.
                the_same_under(&base, &every_setting_and_engine(), &func.name, &args)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                // Forward: each argument, then its tangent along `dir`.
                let mut fargs = Vec::new();
                // Reverse: each argument, then a zero shadow for an
                // array; then one cotangent per result.
                let mut rargs = Vec::new();
                for (i, a) in args.iter().enumerate() {
                    fargs.push(a.clone());
                    rargs.push(a.clone());
                    match a {
                        Val::F64(_) => fargs.push(Val::F64(dir(i, 0))),
                        Val::Array(xs) => {
                            fargs.push(Val::Array((0..xs.len()).map(|j| dir(i, j)).collect()));
                            rargs.push(Val::Array(vec![0.0; xs.len()]));
                        }
                        _ => {}
                    }
                }
                let seeds: Vec<Val> = out
                    .results
                    .iter()
                    .enumerate()
                    .map(|(r, v)| match v {
                        Val::Array(ys) => Val::Array((0..ys.len()).map(|j| cot(r, j)).collect()),
                        _ => Val::F64(cot(r, 0)),
                    })
                    .collect();
                rargs.extend(seeds.iter().cloned());
                let runs: Vec<(Outcome, Outcome)> = derived
                    .iter()
                    .map(|d| {
                        (
                            run(&d.fwd, &fargs, &format!("{what} (forward)")),
                            run(&d.rev, &rargs, &format!("{what} (reverse)")),
                        )
                    })
                    .collect();
                for (k, (f, r)) in runs.iter().enumerate().skip(1) {
                    let setting = InlineSetting::ALL[k];
                    assert!(
                        f.bit_eq(&runs[0].0) && r.bit_eq(&runs[0].1),
                        "{what} on {args:?}: {setting:?} differs from none:\n{f:?}\n{:?}\n{r:?}\n{:?}",
                        runs[0].0,
                        runs[0].1
                    );
                }
                let (f, r) = &runs[0];
                // The forward derivative returns the primal results, then
                // one tangent per result.
                let n = out.results.len();
                assert_eq!(f.results[..n], out.results[..], "{what}: primal");
                let jv = flatten(&f.results[n..]);
                // Central differences.
                let h = 1e-6;
                let plus = primal.call(&moved(&args, h));
                let minus = primal.call(&moved(&args, -h));
                if let (Ok(p), Ok(m)) = (plus, minus) {
                    let (p, m) = (flatten(&p.results), flatten(&m.results));
                    if p.len() == jv.len() && m.len() == jv.len() {
                        for (j, ((a, b), t)) in p.iter().zip(&m).zip(&jv).enumerate() {
                            let fd = (a - b) / (2.0 * h);
                            assert!(
                                (fd - t).abs() <= 1e-5 * (1.0 + fd.abs()),
                                "{what} on {args:?}: output {j}: tangent {t}, finite differences {fd}"
                            );
                        }
                    }
                }
                // <u, J v>.
                let u = flatten(&seeds);
                let lhs: f64 = u.iter().zip(&jv).map(|(a, b)| a * b).sum();
                // <Jᵀ u, v>: the f64 adjoints are the results, the array
                // adjoints the final shadows.
                let mut rhs = 0.0;
                let mut adjs = r.results.iter();
                for (i, a) in args.iter().enumerate() {
                    match a {
                        Val::F64(_) => {
                            if let Some(Val::F64(g)) = adjs.next() {
                                rhs += g * dir(i, 0);
                            }
                        }
                        Val::Array(_) => {
                            let k = 1 + args[..i]
                                .iter()
                                .map(|a| if matches!(a, Val::Array(_)) { 2 } else { 1 })
                                .sum::<usize>();
                            if let Val::Array(g) = &r.args[k] {
                                rhs += g
                                    .iter()
                                    .enumerate()
                                    .map(|(j, g)| g * dir(i, j))
                                    .sum::<f64>();
                            }
                        }
                        _ => {}
                    }
                }
                assert!(
                    (lhs - rhs).abs() <= 1e-9 * (1.0 + lhs.abs()),
                    "{what} on {args:?}: <u, Jv> = {lhs} but <Jᵀu, v> = {rhs}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 30, "only {checked} checks");
}

/// A cotangent of the wrong length is an error on both engines, never an
/// out-of-bounds access.
#[test]
fn a_cotangent_of_the_wrong_length_is_an_error() {
    let base = load(&crate::support::root().join("ir-examples/array_results.adz"));
    let (module, name) = base.derive("squares", Mode::Reverse, 1, &[]).unwrap();
    let id = module.get(&name).unwrap();
    let both = OnBoth::new(&module, id, name.clone());
    let args = [
        Val::Array(vec![1.0, 2.0]),
        Val::Array(vec![0.0, 0.0]),
        Val::Array(vec![1.0]),
    ];
    let e = both.call(&args).unwrap_err();
    assert!(e.to_string().contains("length"), "{e}");
}
