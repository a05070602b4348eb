//! Vector mode: a width-3 sweep equals three width-1 sweeps, bit for bit.

use crate::support::*;
use adze_ir::{ArgActivity, Module, Type, Val};
use ArgActivity::{Const, Dual, Dup};

const SRC: &str = "
fn body(x: f64, y: f64, a: mut [f64], n: i64) -> (f64, f64) {
    let t = zeros(len(a));
    var s = 0.0;
    var i = 0;
    while i < n {
        let k = i % len(a);
        t[k] = t[k] + sin(x * f64(i)) * a[k];
        a[k] = a[k] * y + max(x, y);
        if t[k] > 0.5 { s = s + t[k] ^ 3; } else { s = s - pow(abs(y) + 1.0, x); }
        i = i + 1;
    }
    return (s + helper(x, y), atan2(s, y));
}

fn helper(x: f64, y: f64) -> f64 {
    if x > 10.0 { return 0.0; }
    hypot(x, y) + helper(x + 3.0, y * 0.5)
}
";

/// Splits the arguments of a width-N derivative into N width-1 argument
/// lists (lane k keeps tangent k of each dual/dup parameter).
fn lane_args(acts: &[ArgActivity], args: &[Val], width: usize, lane: usize) -> Vec<Val> {
    let mut out = Vec::new();
    let mut it = args.iter();
    for act in acts {
        out.push(it.next().unwrap().clone());
        if *act != Const {
            let lanes: Vec<&Val> = it.by_ref().take(width).collect();
            out.push(lanes[lane].clone());
        }
    }
    out
}

fn check_width(m: &mut Module, name: &str, acts: &[ArgActivity], args: &[Val]) {
    const W: usize = 3;
    let dn = derive(m, name, acts, W);
    let d1 = derive(m, name, acts, 1);
    let result_types = m.func(m.get(name).unwrap()).sig.results.clone();
    let wide = run_outcome(m, dn, args);
    let nres = result_types.len();
    for lane in 0..W {
        let single = run_outcome(m, d1, &lane_args(acts, args, W, lane));
        for (r, _) in result_types.iter().enumerate() {
            assert!(
                wide.results[r].bit_eq(&single.results[r]),
                "primal result {r}"
            );
            let w = &wide.results[nres + r * W + lane];
            let s = &single.results[nres + r];
            assert!(
                w.bit_eq(s),
                "lane {lane}, tangent of result {r}: {w} vs {s}"
            );
        }
        // Final shadows: lane k of the wide run equals the single run's.
        let wide_lane_args = lane_args(acts, &wide.args, W, lane);
        for (a, b) in wide_lane_args.iter().zip(&single.args) {
            assert!(a.bit_eq(b), "lane {lane}: final arrays {a} vs {b}");
        }
    }
    assert!(result_types.iter().all(|&t| t == Type::F64));
}

#[test]
fn width_three_equals_three_single_sweeps() {
    let mut m = compile(SRC);
    let a = Val::Array(vec![0.3, -0.8, 1.2, 0.05]);
    let args = vec![
        Val::F64(0.7),
        Val::F64(1.0),
        Val::F64(-2.0),
        Val::F64(0.5),
        Val::F64(0.9),
        Val::F64(0.0),
        Val::F64(1.0),
        Val::F64(-3.5),
        a,
        Val::Array(vec![1.0, 0.0, 0.0, 0.0]),
        Val::Array(vec![0.0, 0.5, 0.25, -1.0]),
        Val::Array(vec![f64::INFINITY, 0.0, -0.0, 1e300]),
        Val::I64(11),
    ];
    check_width(&mut m, "body", &[Dual, Dual, Dup, Const], &args);
    let d = derive(&mut m, "body", &[Dual, Dual, Dup, Const], 3);
    let name = m.func(d).name.clone();
    assert_eq!(name, "body.fwd.dual_dual_dup_const.x3");
    // The recursive helper in vector mode calls its own width-3 derivative.
    assert!(m.to_string().contains("call @helper.fwd.dual_dual.x3("));
}
