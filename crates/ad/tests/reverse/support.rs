//! Helpers for the reverse-mode tests: derive, run on the interpreter (and
//! the JIT), finite differences, forward-mode tangents; compiling and the
//! checks of IR come from adze-test-support.

use adze_ad::{forward_derivative, reverse_derivative, ForwardRequest, ReverseRequest};
use adze_interp::Interpreter;
use adze_ir::{ArgActivity, FuncId, Module, Outcome, RetActivity, Type, Val};
pub use adze_test_support::adze::{
    assert_close, check_ir, compile, f64s, run_args, shifted, verify,
};
pub use adze_test_support::examples::{example, example_files, run_lines};

pub fn run(module: &Module, f: FuncId, args: &[Val]) -> Outcome {
    Interpreter::new(module)
        .call(f, args)
        .unwrap_or_else(|e| panic!("{e}\n{module}"))
}

pub fn arr(v: &Val) -> Vec<f64> {
    match v {
        Val::Array(xs) => xs.clone(),
        other => panic!("expected an array, got {other}"),
    }
}

pub fn rev(module: &mut Module, name: &str, args: &[ArgActivity], ret: RetActivity) -> FuncId {
    let f = module
        .get(name)
        .unwrap_or_else(|| panic!("no function {name}"));
    let d = reverse_derivative(module, &ReverseRequest::new(f, args.to_vec(), ret))
        .unwrap_or_else(|e| panic!("{e}\n{module}"));
    check_ir(module);
    d
}

/// The argument list of the reverse derivative: each primal argument, and
/// after each `dup` one its shadow.
pub fn rev_args(args: &[Val], acts: &[ArgActivity], shadows: &[Vec<f64>]) -> Vec<Val> {
    let mut out = Vec::new();
    let mut s = shadows.iter();
    for (a, act) in args.iter().zip(acts) {
        out.push(a.clone());
        if *act == ArgActivity::Dup {
            out.push(Val::Array(s.next().expect("a shadow per dup").clone()));
        }
    }
    out
}

/// The reverse derivative's outcome: the adjoints of the active scalars and
/// the final shadows of the dup arrays (and the outcome, for more checks).
pub struct Grad {
    pub scalars: Vec<f64>,
    pub shadows: Vec<Vec<f64>>,
    pub outcome: Outcome,
}

pub fn grad(
    module: &Module,
    d: FuncId,
    args: &[Val],
    acts: &[ArgActivity],
    shadows: &[Vec<f64>],
) -> Grad {
    let full = rev_args(args, acts, shadows);
    let outcome = run(module, d, &full);
    let scalars = f64s(&outcome.results);
    let mut out_shadows = Vec::new();
    let mut k = 0;
    for act in acts {
        k += 1;
        if *act == ArgActivity::Dup {
            out_shadows.push(arr(&outcome.args[k]));
            k += 1;
        }
    }
    // The JIT agrees with the interpreter bit for bit.
    let jit = adze_jit::compile(module, d, &adze_jit::JitOptions::default())
        .unwrap_or_else(|e| panic!("jit: {e}"))
        .call(&full)
        .unwrap_or_else(|e| panic!("jit run: {e}"));
    assert!(
        jit.bit_eq(&outcome),
        "JIT {jit:?} != interpreter {outcome:?}"
    );
    Grad {
        scalars,
        shadows: out_shadows,
        outcome,
    }
}

/// A deterministic pseudo-random direction in [-1, 1].
pub fn direction(seed: u64, n: usize) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

/// The scalar objective of a gradient check: the first f64 result of `f`
/// (0 when `with_ret` is false) plus `Σ w · final contents` of each `mut`
/// array argument, with weights `weights` (one array per mut array param).
fn objective(
    module: &Module,
    f: FuncId,
    args: &[Val],
    with_ret: bool,
    weights: &[Vec<f64>],
) -> f64 {
    let out = run(module, f, args);
    let mut obj = if with_ret {
        f64s(&out.results).iter().sum()
    } else {
        0.0
    };
    let sig = &module.func(f).sig;
    let mut w = weights.iter();
    for (p, v) in sig.params.iter().zip(&out.args) {
        if p.ty == Type::Array && p.mutable {
            if let (Some(ws), Val::Array(xs)) = (w.next(), v) {
                obj += ws.iter().zip(xs).map(|(a, b)| a * b).sum::<f64>();
            }
        }
    }
    obj
}

/// Full check of a reverse derivative of `name` at `args` for `acts`:
/// - against central finite differences of the objective along a random
///   direction (tolerance `fd_tol`), with the cotangents of the mut arrays'
///   final contents set to random weights (the Enzyme convention);
/// - gradient · v equals the forward tangent along v (to 1e-12 relative);
/// - JIT == interpreter (in [`grad`]).
///
/// Returns the gradient for further exact checks.
pub fn check_gradient(
    module: &mut Module,
    name: &str,
    args: &[Val],
    acts: &[ArgActivity],
    ret: RetActivity,
    fd_tol: f64,
) -> Grad {
    let d = rev(module, name, acts, ret);
    let f = module.get(name).unwrap();
    let sig = module.func(f).sig.clone();
    // Cotangent weights of the final contents of mut arrays.
    let mut weights = Vec::new();
    for (k, (p, a)) in sig.params.iter().zip(args).enumerate() {
        if p.ty == Type::Array && p.mutable {
            let n = arr(a).len();
            // Only dup arrays are differentiated; const ones get weight 0.
            if acts[k] == ArgActivity::Dup {
                weights.push(direction(100 + k as u64, n));
            } else {
                weights.push(vec![0.0; n]);
            }
        }
    }
    // Initial shadows: for a mut dup array, the weights; for a read-only
    // one, a non-zero start to check that adjoints are accumulated.
    let mut shadows = Vec::new();
    let mut w = weights.iter();
    for (p, (a, act)) in sig.params.iter().zip(args.iter().zip(acts)) {
        if p.ty == Type::Array && p.mutable {
            let ws = w.next().unwrap().clone();
            if *act == ArgActivity::Dup {
                shadows.push(ws);
            }
        } else if *act == ArgActivity::Dup {
            shadows.push(vec![0.25; arr(a).len()]);
        }
    }
    let g = grad(module, d, args, acts, &shadows);
    // The derivative performs the primal's effects.
    let primal = run(module, f, args);
    let mut k = 0;
    for (i, act) in acts.iter().enumerate() {
        assert!(
            g.outcome.args[k].bit_eq(&primal.args[i]),
            "argument {i} after the derivative differs from the primal's"
        );
        k += if *act == ArgActivity::Dup { 2 } else { 1 };
    }
    // The directional derivative: scalars and array entries.
    let mut dir = Vec::new();
    let mut dot = 0.0;
    let mut si = 0;
    let mut ai = 0;
    for (i, (a, act)) in args.iter().zip(acts).enumerate() {
        match (a, act) {
            (Val::F64(_), ArgActivity::Active) => {
                let v = direction(7 + i as u64, 1)[0];
                dot += v * g.scalars[si];
                si += 1;
                dir.push(Val::F64(v));
            }
            (Val::Array(xs), ArgActivity::Dup) => {
                let v = direction(31 + i as u64, xs.len());
                let start = &shadows[ai];
                let is_mut = sig.params[i].mutable;
                for (j, vj) in v.iter().enumerate() {
                    // read-only: accumulated on top of the start value.
                    let gj = if is_mut {
                        g.shadows[ai][j]
                    } else {
                        g.shadows[ai][j] - start[j]
                    };
                    dot += vj * gj;
                }
                ai += 1;
                dir.push(Val::Array(v));
            }
            (Val::F64(_), _) => dir.push(Val::F64(0.0)),
            (Val::Array(xs), _) => dir.push(Val::Array(vec![0.0; xs.len()])),
            (other, _) => dir.push(other.clone()),
        }
    }
    let with_ret = ret == RetActivity::Active;
    let h = 1e-6;
    let shift = |s: f64| shifted(args, &dir, s);
    let fd = (objective(module, f, &shift(h), with_ret, &weights)
        - objective(module, f, &shift(-h), with_ret, &weights))
        / (2.0 * h);
    assert_close(
        dot,
        fd,
        fd_tol,
        &format!("{name}: gradient . v vs finite differences"),
    );
    // Forward mode along the same direction.
    let fwd = forward_tangent(module, f, args, acts, &dir, &weights, with_ret);
    assert_close(
        dot,
        fwd,
        1e-12,
        &format!("{name}: gradient . v vs forward tangent"),
    );
    g
}

/// The tangent of the objective along `dir` by forward mode.
fn forward_tangent(
    module: &mut Module,
    f: FuncId,
    args: &[Val],
    acts: &[ArgActivity],
    dir: &[Val],
    weights: &[Vec<f64>],
    with_ret: bool,
) -> f64 {
    let facts: Vec<ArgActivity> = acts
        .iter()
        .map(|a| match a {
            ArgActivity::Active => ArgActivity::Dual,
            other => *other,
        })
        .collect();
    let sig = module.func(f).sig.clone();
    let fd = forward_derivative(
        module,
        &ForwardRequest::new(f, facts.clone(), RetActivity::Dual),
    )
    .unwrap_or_else(|e| panic!("forward: {e}"));
    let mut full = Vec::new();
    for ((a, act), d) in args.iter().zip(&facts).zip(dir) {
        full.push(a.clone());
        if *act != ArgActivity::Const {
            full.push(d.clone());
        }
    }
    let out = run(module, fd, &full);
    let nres = sig.results.len();
    let mut t = 0.0;
    if with_ret {
        for (k, ty) in sig.results.iter().enumerate() {
            if *ty == Type::F64 {
                if let Val::F64(x) = out.results[nres + k] {
                    t += x;
                }
            }
        }
    }
    // Tangents of mut dup arrays' final contents.
    let mut w = weights.iter();
    let mut k = 0;
    for (p, act) in sig.params.iter().zip(&facts) {
        let mutable = p.ty == Type::Array && p.mutable;
        let ws = if mutable { w.next() } else { None };
        k += 1;
        if *act != ArgActivity::Const {
            if let (Some(ws), ArgActivity::Dup) = (ws, act) {
                let ts = arr(&out.args[k]);
                t += ws.iter().zip(&ts).map(|(a, b)| a * b).sum::<f64>();
            }
            k += 1;
        }
    }
    t
}
