//! Helpers to run small modules (built with `adze_test_support::ir`).

use adze_interp::Interpreter;
use adze_ir::verify::verify_function;
use adze_ir::{FuncId, Limits, Module, Outcome, RunError, Val};
pub use adze_test_support::ir::{call1, counted_loop, declare, define_split, func};

/// Asserts that `id` and every function it reaches pass the verifier: the
/// tests run verifier-clean IR unless they say otherwise.
#[track_caller]
pub fn assert_verified(m: &Module, id: FuncId) {
    if !m.is_valid(id) {
        return;
    }
    for f in m.reachable_from(id) {
        if let Err(e) = verify_function(m, f) {
            panic!("{e}");
        }
    }
}

#[track_caller]
pub fn run(m: &Module, id: FuncId, args: &[Val]) -> Outcome {
    assert_verified(m, id);
    match Interpreter::new(m).call(id, args) {
        Ok(out) => out,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[track_caller]
pub fn run_err(m: &Module, id: FuncId, args: &[Val]) -> RunError {
    assert_verified(m, id);
    run_err_unverified(m, id, args)
}

/// [`run_err`] for IR the verifier rejects.
pub fn run_err_unverified(m: &Module, id: FuncId, args: &[Val]) -> RunError {
    match Interpreter::new(m).call(id, args) {
        Ok(out) => panic!("expected an error, got {out:?}"),
        Err(e) => e,
    }
}

/// The results of a successful run.
pub fn results(m: &Module, id: FuncId, args: &[Val]) -> Vec<Val> {
    run(m, id, args).results
}

/// The single f64 result of a successful run.
pub fn run_f64(m: &Module, id: FuncId, args: &[Val]) -> f64 {
    match results(m, id, args).as_slice() {
        [Val::F64(x)] => *x,
        other => panic!("expected one f64, got {other:?}"),
    }
}

/// The single i64 result of a successful run.
pub fn run_i64(m: &Module, id: FuncId, args: &[Val]) -> i64 {
    match results(m, id, args).as_slice() {
        [Val::I64(x)] => *x,
        other => panic!("expected one i64, got {other:?}"),
    }
}

/// The single bool result of a successful run.
pub fn run_bool(m: &Module, id: FuncId, args: &[Val]) -> bool {
    match results(m, id, args).as_slice() {
        [Val::Bool(x)] => *x,
        other => panic!("expected one bool, got {other:?}"),
    }
}

/// Bitwise f64 equality (NaN equals NaN), with a readable failure.
#[track_caller]
pub fn assert_bits(got: f64, want: f64) {
    assert!(
        Val::F64(got).bit_eq(&Val::F64(want)),
        "got {got:?}, want {want:?}"
    );
}

/// The default limits with a call depth limit of `max_call_depth`.
pub fn depth_limit(max_call_depth: u32) -> Limits {
    Limits {
        max_call_depth,
        ..Limits::default()
    }
}
