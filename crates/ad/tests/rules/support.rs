//! Helpers: compile `.adz` source, lower its `autodiff` requests, verify
//! and round-trip every function, run on the interpreter and the JIT (bit
//! for bit).

use adze_ir::{FuncId, Module, Outcome, Val};
pub use adze_test_support::adze::{check_ir, compile, verify};
pub use adze_test_support::examples::example;

/// `src` compiled, with every `autodiff` lowered, checked.
pub fn lowered(src: &str) -> Module {
    let mut m = compile(src);
    adze_ad::lower_autodiff(&mut m).unwrap_or_else(|e| panic!("{e}\n{m}"));
    check_ir(&m);
    m
}

/// Runs `name` on the interpreter and the JIT; they agree bit for bit.
pub fn run(m: &Module, name: &str, args: &[Val]) -> Outcome {
    let f = m.get(name).unwrap_or_else(|| panic!("no function {name}"));
    run_id(m, f, args)
}

pub fn run_id(m: &Module, f: FuncId, args: &[Val]) -> Outcome {
    let interp = adze_interp::Interpreter::new(m)
        .call(f, args)
        .unwrap_or_else(|e| panic!("interpreter: {e}\n{m}"));
    let jit = adze_jit::compile(m, f, &adze_jit::JitOptions::default())
        .unwrap_or_else(|e| panic!("jit: {e}"))
        .call(args)
        .unwrap_or_else(|e| panic!("jit run: {e}"));
    assert!(jit.bit_eq(&interp), "JIT {jit:?} != interpreter {interp:?}");
    interp
}

pub fn f(x: f64) -> Val {
    Val::F64(x)
}

pub fn a(xs: &[f64]) -> Val {
    Val::Array(xs.to_vec())
}

pub fn scalar(out: &Outcome, k: usize) -> f64 {
    match &out.results[k] {
        Val::F64(x) => *x,
        other => panic!("expected an f64, got {other}"),
    }
}

pub fn array(out: &Outcome, k: usize) -> Vec<f64> {
    match &out.args[k] {
        Val::Array(xs) => xs.clone(),
        other => panic!("expected an array, got {other}"),
    }
}

/// Exact equality, with a readable message.
#[track_caller]
pub fn exact(got: f64, want: f64, what: &str) {
    assert!(
        got.to_bits() == want.to_bits(),
        "{what}: got {got:?}, want {want:?}"
    );
}
