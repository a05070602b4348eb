//! Run-time faults through the Rust API: each one an error naming the
//! function (and the array), identical on the JIT and the interpreter.

use crate::support::{load, root};
use adze::{Engine, Error};
use adze_ir::{TrapKind, Val};

fn run_both(func: &str, args: &[Val]) -> TrapKind {
    let session = load(&root().join("tests/programs/faults.adz"));
    let mut kinds = Vec::new();
    for engine in [Engine::Interp, Engine::Jit] {
        match session.run(func, args, engine) {
            Err(Error::Run(e)) => kinds.push(e),
            other => panic!("{func} on {engine:?}: expected a run-time error, got {other:?}"),
        }
    }
    assert_eq!(kinds[0], kinds[1], "engines disagree on {func}");
    kinds.remove(0).kind
}

fn oob(array: &str, index: i64, len: i64) -> TrapKind {
    TrapKind::IndexOutOfBounds {
        array: array.into(),
        index,
        len,
    }
}

#[test]
fn out_of_bounds_read_and_write_and_negative_index() {
    let x = || Val::Array(vec![1.0, 2.0]);
    assert_eq!(run_both("read_at", &[x(), Val::I64(2)]), oob("x", 2, 2));
    assert_eq!(run_both("read_at", &[x(), Val::I64(-1)]), oob("x", -1, 2));
    assert_eq!(
        run_both("write_at", &[x(), Val::I64(5), Val::F64(0.0)]),
        oob("x", 5, 2)
    );
    assert_eq!(run_both("scratch_oob", &[Val::I64(3)]), oob("t", 3, 3));
}

#[test]
fn errors_name_the_faulting_function() {
    // Without inlining the error names the callee that faults; the inliner
    // moves that code into the caller, and the error then names the caller
    // (docs/robustness.md, "Error messages and inlining").
    let mut session = load(&root().join("tests/programs/faults.adz"));
    for (inline, func) in [
        (adze::InlineSetting::None, "read_at"),
        (adze::InlineSetting::All, "nested_fault"),
    ] {
        session.inline = inline;
        for engine in [Engine::Interp, Engine::Jit] {
            let err = session
                .run("nested_fault", &[Val::Array(vec![1.0])], engine)
                .unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("in function `{func}`: index 1 is out of bounds for array `x` of length 1")
            );
        }
    }
}

#[test]
fn integer_division_faults() {
    assert_eq!(
        run_both("divide", &[Val::I64(1), Val::I64(0)]),
        TrapKind::DivisionByZero
    );
    assert_eq!(
        run_both("remainder", &[Val::I64(1), Val::I64(0)]),
        TrapKind::DivisionByZero
    );
    assert_eq!(
        run_both("divide", &[Val::I64(i64::MIN), Val::I64(-1)]),
        TrapKind::DivisionOverflow
    );
}

#[test]
fn bad_allocations() {
    assert_eq!(
        run_both("alloc", &[Val::I64(-1)]),
        TrapKind::BadArrayLength { len: -1 }
    );
    assert_eq!(
        run_both("alloc", &[Val::I64(1 << 40)]),
        TrapKind::BadArrayLength { len: 1 << 40 }
    );
}

#[test]
fn runaway_recursion_is_caught() {
    assert_eq!(
        run_both("runaway", &[Val::I64(0)]),
        TrapKind::CallDepthExceeded { limit: 1000 }
    );
}

#[test]
fn bad_arguments_and_missing_functions() {
    let session = load(&root().join("tests/programs/faults.adz"));
    for engine in [Engine::Interp, Engine::Jit] {
        let err = session.run("divide", &[Val::I64(1)], engine).unwrap_err();
        assert_eq!(
            err.to_string(),
            "in function `divide`: expected 2 argument(s), got 1"
        );
        let err = session
            .run("divide", &[Val::F64(1.0), Val::I64(1)], engine)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "in function `divide`: argument `a` must be an i64, got an f64"
        );
        let err = session.run("nope", &[], engine).unwrap_err();
        assert!(matches!(err, Error::UnknownFunction { .. }), "{err}");
    }
}
