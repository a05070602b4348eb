//! Inlining never changes a derivative: every function of every example,
//! differentiated in forward and in reverse mode (and every function that
//! requests derivatives itself with `autodiff`), gives bit-identical results
//! under `--inline none`, `early`, `late` and `all`.

use crate::support::{
    every_setting_and_engine, examples, inputs, load, the_same_under, with_inline,
};
use adze::{Engine, InlineSetting, Session};
use adze_ir::{Mode, Outcome, RunError, Type, Val};

/// The derivative's arguments: each primal argument followed by its
/// tangent or shadow.
fn derivative_args(args: &[Val], mode: Mode) -> Vec<Val> {
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        out.push(a.clone());
        match a {
            Val::F64(_) if mode == Mode::Forward => out.push(Val::F64(0.5 + i as f64)),
            Val::Array(xs) => out.push(Val::Array(
                xs.iter()
                    .enumerate()
                    .map(|(j, _)| 0.25 * (i + j) as f64 - 0.5)
                    .collect(),
            )),
            _ => {}
        }
    }
    out
}

fn same(a: &Result<Outcome, RunError>, b: &Result<Outcome, RunError>) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => x.bit_eq(y),
        // Inlining moves code into callers: an error names the function the
        // faulting code lives in, and the arrays by that function's names for
        // them, so only the rest must agree.
        (Err(x), Err(y)) => {
            use adze_ir::TrapKind::{IndexOutOfBounds, ShadowLengthMismatch};
            x.kind == y.kind
                || matches!((&x.kind, &y.kind),
                    (IndexOutOfBounds { index: i, len: l, .. },
                     IndexOutOfBounds { index: j, len: m, .. }) if i == j && l == m)
                || matches!(
                    (&x.kind, &y.kind),
                    (ShadowLengthMismatch { .. }, ShadowLengthMismatch { .. })
                )
        }
        _ => false,
    }
}

#[test]
fn derivatives_are_bit_identical_under_every_inline_setting() {
    let mut compared = 0;
    for path in examples() {
        let base = load(&path);
        let sessions: Vec<Session> = InlineSetting::ALL
            .iter()
            .map(|&s| with_inline(&base, s))
            .collect();
        for (_, func) in base.module.iter() {
            let sig = &func.sig;
            if !sig.results.iter().all(|&t| t == Type::F64) {
                continue;
            }
            let tys: Vec<Type> = sig.param_types().collect();
            for mode in [Mode::Forward, Mode::Reverse] {
                let derived: Vec<_> = sessions
                    .iter()
                    .map(|s| s.derive(&func.name, mode, 1, &[]))
                    .collect();
                if let Err(e) = &derived[0] {
                    // What reverse mode cannot do yet fails the same way everywhere.
                    assert!(
                        derived.iter().all(|d| d.as_ref().err().map(|e| e.to_string())
                            == Some(e.to_string())),
                        "{}: {}: settings disagree on failing",
                        path.display(),
                        func.name
                    );
                    continue;
                }
                for args in inputs(&tys, 2) {
                    let dargs = derivative_args(&args, mode);
                    let outs: Vec<_> = derived
                        .iter()
                        .zip(&sessions)
                        .map(|(d, s)| {
                            let (m, name) = d.as_ref().unwrap();
                            s.run_in(m, name, &dargs, Engine::Interp)
                        })
                        .map(|r| {
                            r.map_err(|e| match e {
                                adze::Error::Run(e) => e,
                                other => panic!("{other}"),
                            })
                        })
                        .collect();
                    for (k, o) in outs.iter().enumerate().skip(1) {
                        assert!(
                            same(&outs[0], o),
                            "{}: {} ({mode:?}) on {dargs:?}: inline none gives {:?}, {:?} gives {o:?}",
                            path.display(),
                            func.name,
                            outs[0],
                            InlineSetting::ALL[k]
                        );
                    }
                    compared += 1;
                }
            }
        }
    }
    assert!(compared >= 150, "only {compared} comparisons");
}

#[test]
fn in_language_derivatives_are_bit_identical_under_every_inline_setting() {
    let base = load(&crate::support::root().join("ir-examples/seed.adz"));
    for (func, args) in [
        (
            "dg_plain",
            vec![Val::Array(vec![2.0, -0.5]), Val::Array(vec![0.0; 2])],
        ),
        (
            "hvp_plain",
            vec![
                Val::Array(vec![2.0, -0.5]),
                Val::Array(vec![1.0, 0.25]),
                Val::Array(vec![0.0; 2]),
                Val::Array(vec![0.0; 2]),
            ],
        ),
    ] {
        the_same_under(&base, &every_setting_and_engine(), func, &args)
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Found by review: the late inliner puts `h.fwd`'s `samelen z, b` inside
/// the loop, before `z[j]`; the reverse pass must not rely on it where the
/// loop is left (it may not have run). Every setting gives the same bits,
/// and no setting faults.
#[test]
fn a_samelen_moved_into_a_loop_by_inlining() {
    let src = "fn h(z: [f64]) -> f64 { 0.0 }
fn p(x: f64, n: i64, m: i64, b: [f64]) -> f64 {
    let z = zeros(n);
    var s = 0.0;
    for j in 0..len(b) {
        for k in 0..m {
            let (y, dy) = autodiff(forward, h, dual, dup(z, b));
            s = s + x * x * z[j] + y;
        }
    }
    s
}
fn big_f(x: f64, n: i64, m: i64, b: [f64]) -> f64 {
    let (y, dy) = autodiff(forward, p, dual, dual(x, 1.0), const(n), const(m), const(b));
    dy
}
fn g(x: f64, n: i64, m: i64, b: [f64]) -> f64 {
    autodiff(reverse, big_f, active, active(x), const(n), const(m), const(b))
}";
    let base = adze::Session::from_source("samelen.adz", src).unwrap();
    for (n, m) in [(1, 0), (3, 2)] {
        let args = [
            Val::F64(2.0),
            Val::I64(n),
            Val::I64(m),
            Val::Array(vec![1.0, 2.0, 3.0]),
        ];
        the_same_under(&base, &every_setting_and_engine(), "g", &args)
            .unwrap_or_else(|e| panic!("{n} {m}: {e}"));
    }
}
