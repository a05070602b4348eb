//! The benchmark workloads written in a second style (issue #19:
//! `ir-examples/rosenbrock_style2.adz`, `ir-examples/gmm_style2.adz`)
//! compute what the first style computes, to rounding: the primal, and the
//! bench's gradient, forward derivative and Hessian-vector product
//! (`benches/workloads/<name>.adz`, appended as the bench does), on both
//! engines.

use crate::support::root;
use adze::{Engine, Session};
use adze_ir::Val;

/// An example with its bench wrappers, as `benches/workloads.rs` loads it.
fn workload(name: &str) -> Session {
    let mut src = std::fs::read_to_string(root().join(format!("ir-examples/{name}.adz"))).unwrap();
    src.push('\n');
    src += &std::fs::read_to_string(root().join(format!("benches/workloads/{name}.adz"))).unwrap();
    Session::from_source(&format!("{name}.adz+bench"), &src).unwrap()
}

fn data(seed: u64, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    let mut rng = adze_test_support::rng::Rng::new(seed);
    (0..n)
        .map(|_| lo + (hi - lo) * ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64))
        .collect()
}

/// Every f64 of a call's results and final arguments, in order.
fn numbers(session: &Session, func: &str, args: &[Val], engine: Engine) -> Vec<f64> {
    let out = session
        .run(func, args, engine)
        .unwrap_or_else(|e| panic!("{func}: {e}"));
    out.results
        .iter()
        .chain(&out.args)
        .flat_map(|v| match v {
            Val::F64(x) => vec![*x],
            Val::Array(a) => a.clone(),
            _ => vec![],
        })
        .collect()
}

/// Runs `calls` (function names in each style, arguments) in both styles
/// on both engines and asserts that every number agrees to `tol`, relative
/// to the largest magnitude of its call.
fn agree(calls: &[(&str, &str, Vec<Val>)], first: &Session, second: &Session, tol: f64) {
    for engine in [Engine::Jit, Engine::Interp] {
        for (f1, f2, args) in calls {
            let a = numbers(first, f1, args, engine);
            let b = numbers(second, f2, args, engine);
            assert_eq!(a.len(), b.len(), "{f1} / {f2}");
            let scale = a.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert!(
                    (x - y).abs() <= tol * scale,
                    "{f1} / {f2} on {engine:?}, number {i}: {x} vs {y} (scale {scale})"
                );
            }
        }
    }
}

#[test]
fn rosenbrock_in_the_second_style_agrees_with_the_first() {
    let n = 1000;
    let x = Val::Array(data(1, n, -1.5, 1.5));
    let v = Val::Array(data(2, n, -1.0, 1.0));
    let z = Val::Array(vec![0.0; n]);
    let calls = [
        ("rosenbrock", "rosenbrock_pairs", vec![x.clone()]),
        ("bench_grad", "bench_grad", vec![x.clone(), z.clone()]),
        ("bench_fwd", "bench_fwd", vec![x.clone(), v.clone()]),
        ("bench_hvp", "bench_hvp", vec![x, v, z.clone(), z]),
    ];
    agree(
        &calls,
        &workload("rosenbrock"),
        &workload("rosenbrock_style2"),
        1e-13,
    );
}

#[test]
fn gmm_in_the_second_style_agrees_with_the_first() {
    let (d, k, n) = (5usize, 4usize, 30usize);
    let icf_sz = d * (d + 1) / 2;
    let head = vec![
        Val::I64(d as i64),
        Val::I64(k as i64),
        Val::I64(n as i64),
        Val::Array(data(3, k, -1.0, 1.0)),
        Val::Array(data(4, k * d, -1.0, 1.0)),
        Val::Array(data(5, k * icf_sz, -0.3, 0.3)),
        Val::Array(data(6, n * d, -1.0, 1.0)),
        Val::F64(1.3),
        Val::I64(2),
    ];
    let tangents = [
        Val::Array(data(7, k, -1.0, 1.0)),
        Val::Array(data(8, k * d, -1.0, 1.0)),
        Val::Array(data(9, k * icf_sz, -1.0, 1.0)),
    ];
    let shadows = [
        Val::Array(vec![0.0; k]),
        Val::Array(vec![0.0; k * d]),
        Val::Array(vec![0.0; k * icf_sz]),
    ];
    let with = |parts: &[&[Val]]| -> Vec<Val> {
        let mut v = head.clone();
        for p in parts {
            v.extend_from_slice(p);
        }
        v
    };
    let calls = [
        ("gmm_objective", "gmm_loss", head.clone()),
        ("bench_grad", "bench_grad", with(&[&shadows])),
        ("bench_fwd", "bench_fwd", with(&[&tangents])),
        (
            "bench_hvp",
            "bench_hvp",
            with(&[&tangents, &shadows, &shadows]),
        ),
    ];
    agree(&calls, &workload("gmm"), &workload("gmm_style2"), 1e-12);
}
