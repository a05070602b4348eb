//! Forward mode on every function of `ir-examples/`: the tangents of the
//! derivative (every f64 parameter `dual`, every array `dup`) agree with
//! central finite differences along a direction, and the derivative IR runs
//! bit-identically on the JIT and the interpreter.

use crate::support::{for_each_differentiable, inputs, load, OnBoth};
use adze::Engine;
use adze_ir::{Mode, Type, Val};
use adze_test_support::adze::{outputs, shifted};

/// A direction for every differentiable input: f64 -> a number, array -> an
/// array of the same length; i64 and bool arguments are their own (they
/// have no tangent and are not shifted).
fn direction(args: &[Val], k: usize) -> Vec<Val> {
    const D: [f64; 5] = [0.7, -0.4, 1.1, 0.25, -1.3];
    args.iter()
        .enumerate()
        .map(|(i, a)| match a {
            Val::F64(_) => Val::F64(D[(k + i) % 5]),
            Val::Array(xs) => Val::Array((0..xs.len()).map(|j| D[(k + i + j) % 5]).collect()),
            other => other.clone(),
        })
        .collect()
}

#[test]
fn forward_tangents_match_finite_differences_on_every_example() {
    let tally = for_each_differentiable(|path, session, func| {
        let sig = &func.sig;
        // A deliberately wrong forward rule (array_results.adz).
        if func.name == "uses_dbl_custom" {
            return None;
        }
        let (module, dname) = match session.derive(&func.name, Mode::Forward, 1, &[]) {
            Ok(d) => d,
            // Custom reverse rules inside reverse mode arrive with the
            // rules issue; only the seed's rule-carrying functions reach one.
            Err(adze::Error::Ad(adze_ad::AdError::ReverseUnsupported { what, .. }))
                if what.contains("custom reverse rules") =>
            {
                return None;
            }
            Err(e) => panic!("{}: {}: {e}", path.display(), func.name),
        };
        let did = module.get(&dname).unwrap();
        let both = OnBoth::new(&module, did, format!("{}: {dname}", path.display()));
        let tys: Vec<Type> = sig.param_types().collect();
        let mut compared = 0;
        for (k, args) in inputs(&tys, 3).into_iter().enumerate() {
            let dir = direction(&args, k);
            let mut dargs = Vec::new();
            for (a, d) in args.iter().zip(&dir) {
                dargs.push(a.clone());
                if matches!(a, Val::F64(_) | Val::Array(_)) {
                    dargs.push(d.clone());
                }
            }
            let Ok(d) = both.call(&dargs) else { continue };
            // Tangents: result tangents, then the shadows of mut arrays.
            let n = sig.results.len();
            let mut tangent: Vec<f64> = d.results[n..]
                .iter()
                .map(|r| match r {
                    Val::F64(x) => *x,
                    other => panic!("tangent {other:?}"),
                })
                .collect();
            let mut slot = 0;
            for (p, a) in sig.params.iter().zip(&args) {
                slot += 1;
                if matches!(a, Val::F64(_) | Val::Array(_)) {
                    if let (true, Val::Array(xs)) = (p.mutable, &d.args[slot]) {
                        tangent.extend(xs);
                    }
                    slot += 1;
                }
            }
            let fd = |h: f64| -> Option<Vec<f64>> {
                let run =
                    |s: f64| session.run(&func.name, &shifted(&args, &dir, s), Engine::Interp);
                let (Ok(p), Ok(m)) = (run(h), run(-h)) else {
                    return None;
                };
                let (p, m) = (outputs(&p, &sig.params), outputs(&m, &sig.params));
                Some(p.iter().zip(&m).map(|(a, b)| (a - b) / (2.0 * h)).collect())
            };
            let (Some(fd1), Some(fd2)) = (fd(1e-6), fd(1e-7)) else {
                continue;
            };
            assert_eq!(
                fd1.len(),
                tangent.len(),
                "{}: {}",
                path.display(),
                func.name
            );
            for ((&t, &a), &b) in tangent.iter().zip(&fd1).zip(&fd2) {
                let scale = 1.0f64.max(t.abs());
                // At a kink, a jump or a pole, or where the function is so
                // ill-conditioned (a chaotic iteration) that a step of 1e-6
                // leaves the linear regime, finite differences say nothing.
                let smooth = (a - b).abs() <= 1e-4 * scale
                    && a.is_finite()
                    && t.is_finite()
                    && t.abs() < 1e6;
                if !smooth {
                    continue;
                }
                assert!(
                    (t - a).abs() <= 1e-5 * scale,
                    "{}: {}({args:?}) along {dir:?}: tangent {t}, finite difference {a}",
                    path.display(),
                    func.name
                );
                compared += 1;
            }
        }
        Some(compared)
    });
    assert_eq!(tally.skipped, ["uses_dbl_custom"]);
    assert!(tally.functions >= 40, "{tally:?}");
    assert!(
        tally.checks >= 200,
        "only {} tangents compared",
        tally.checks
    );
}

#[test]
fn vector_mode_equals_single_sweeps_bit_for_bit() {
    let session = load(&crate::support::root().join("ir-examples/lstm.adz"));
    let (vmod, vname) = session.derive("lstm_loss", Mode::Forward, 3, &[]).unwrap();
    let (smod, sname) = session.derive("lstm_loss", Mode::Forward, 1, &[]).unwrap();
    let w: Vec<f64> = (0..12).map(|i| 0.1 * i as f64 - 0.5).collect();
    let xs = vec![0.5, -0.2, 0.9, 0.3];
    let ys = vec![0.1, 0.2, -0.1, 0.4];
    let seeds: Vec<Vec<f64>> = (0..3)
        .map(|l| {
            (0..12)
                .map(|i| ((i * 7 + l * 3) % 5) as f64 - 2.0)
                .collect()
        })
        .collect();
    let mut vargs = vec![Val::Array(w.clone())];
    vargs.extend(seeds.iter().map(|s| Val::Array(s.clone())));
    for a in [&xs, &ys] {
        vargs.push(Val::Array(a.clone()));
        vargs.extend((0..3).map(|_| Val::Array(vec![0.0; 4])));
    }
    let v = session.run_in(&vmod, &vname, &vargs, Engine::Jit).unwrap();
    for (lane, seed) in seeds.iter().enumerate() {
        let sargs = vec![
            Val::Array(w.clone()),
            Val::Array(seed.clone()),
            Val::Array(xs.clone()),
            Val::Array(vec![0.0; 4]),
            Val::Array(ys.clone()),
            Val::Array(vec![0.0; 4]),
        ];
        let s = session.run_in(&smod, &sname, &sargs, Engine::Jit).unwrap();
        assert!(v.results[0].bit_eq(&s.results[0]));
        assert!(v.results[1 + lane].bit_eq(&s.results[1]), "lane {lane}");
    }
}

/// In-source vector mode (`autodiff(forward(N), ..)`) gives, lane by lane,
/// the bits of N width-1 requests, under every inline setting and on both
/// engines, for scalar `dual`s and array `dup`s.
#[test]
fn in_source_vector_mode_equals_width_one_requests_bit_for_bit() {
    let src = "
fn f(x: f64, a: [f64]) -> f64 {
    var s = exp(x);
    for i in 0..len(a) { s = s * cos(a[i] * x) + a[i] / (1.0 + x * x); }
    s
}
fn lanes(x: f64, a: [f64]) -> (f64, f64, f64, f64) {
    let d1 = zeros(len(a)); let d2 = zeros(len(a)); let d3 = zeros(len(a));
    d1[0] = 1.0; d2[1] = -2.0; d3[0] = 0.5; d3[2] = 3.0;
    autodiff(forward(3), f, dual, dual(x, 1.0, 0.0, -1.5), dup(a, d1, d2, d3))
}
fn lane(x: f64, a: [f64], k: i64) -> (f64, f64) {
    let d = zeros(len(a));
    var t = 0.0;
    if k == 0 { t = 1.0; d[0] = 1.0; }
    if k == 1 { d[1] = -2.0; }
    if k == 2 { t = -1.5; d[0] = 0.5; d[2] = 3.0; }
    autodiff(forward, f, dual, dual(x, t), dup(a, d))
}
";
    let session = adze::Session::from_source("vector.adz", src).unwrap();
    let mut compared = 0;
    for (inline, engine) in crate::support::every_setting_and_engine() {
        let s = crate::support::with_inline(&session, inline);
        for x in [0.3, -1.2, 2.0] {
            let a = Val::Array(vec![0.5, -1.0, 2.5]);
            let v = s.run("lanes", &[Val::F64(x), a.clone()], engine).unwrap();
            for k in 0..3 {
                let one = s
                    .run("lane", &[Val::F64(x), a.clone(), Val::I64(k)], engine)
                    .unwrap();
                assert!(v.results[0].bit_eq(&one.results[0]), "primal at {x}");
                let lane = &v.results[1 + k as usize];
                assert!(
                    lane.bit_eq(&one.results[1]),
                    "{inline:?} {engine:?} lane {k} at {x}: {lane} vs {}",
                    one.results[1]
                );
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 72);
}
