//! The tapes: `push`/`pop` per tape number, last in first out per tape, with
//! type and tape mismatches reported like the interpreter does.

use crate::*;
use adze_ir::{TrapKind, Val};

#[test]
fn tapes_are_independent_stacks() {
    // Interleaved pushes on tapes 0 and 5 come back per tape, last in first out.
    let m = data("tape/independent_stacks.ir");
    let id = m.get("t").unwrap();
    let out = run(&m, id, &[Val::F64(1.5), Val::I64(7)]).unwrap();
    assert_eq!(
        out.results,
        vec![Val::F64(2.5), Val::I64(7), Val::F64(1.5), Val::Bool(true)]
    );
}

/// `t(1.5)` of `tests/data/tape/<file>` faults with a tape mismatch, in `t`.
fn assert_mismatch_in_t(file: &str) {
    let m = data(&format!("tape/{file}"));
    let err = run(&m, m.get("t").unwrap(), &[Val::F64(1.5)]).unwrap_err();
    assert_eq!((err.kind, err.func.as_str()), (TrapKind::TapeMismatch, "t"));
}

#[test]
fn popping_another_tape_is_a_mismatch() {
    assert_mismatch_in_t("pop_another_tape.ir");
}

/// Pushes three values (f64, i64, bool) per iteration for `n` iterations,
/// with pure arithmetic and an intrinsic call between the pushes, then pops
/// them all back in a second loop, folding them into the results. The tape
/// grows many times on the way (the inline push's slow path).
#[test]
fn inline_tape_survives_growth() {
    let m = data("tape/push_pop_loops.ir");
    let id = m.get("t").unwrap();
    for n in [0, 1, 7, 5000] {
        let out = run(&m, id, &[Val::F64(0.7), Val::I64(n)]).unwrap();
        assert_eq!(out.results[1], Val::I64(n * (n - 1) / 2), "n = {n}");
    }
    // The kept tape buffers of one `Compiled` are reused call after call.
    let c = jit(&m, id);
    let first = c.call(&[Val::F64(0.7), Val::I64(3000)]).unwrap();
    for n in [10, 3000, 0, 3000] {
        let again = c.call(&[Val::F64(0.7), Val::I64(n)]).unwrap();
        if n == 3000 {
            assert!(again.bit_eq(&first));
        }
    }
}

#[test]
fn a_mismatch_inside_a_pop_group_is_reported() {
    // The middle pop of a group of three expects an i64 where an f64 was
    // pushed; the first pop of the group is fine.
    assert_mismatch_in_t("mismatch_in_pop_group.ir");
}

#[test]
fn a_pop_group_longer_than_the_tape_is_reported() {
    // Two values on the tape, a group of three pops; and a callee that pops
    // from an empty tape.
    let m = data("tape/pop_group_too_long.ir");
    let err = run(&m, m.get("t").unwrap(), &[Val::F64(1.5)]).unwrap_err();
    assert_eq!(err.kind, TrapKind::TapeMismatch);
    let err = run(&m, m.get("u").unwrap(), &[Val::F64(1.5)]).unwrap_err();
    assert_eq!((err.kind, err.func.as_str()), (TrapKind::TapeMismatch, "v"));
}

#[test]
fn a_trap_between_pops_comes_first() {
    // An out-of-bounds load between two pops of which the second mismatches:
    // the pops are not grouped across it, so the load's error is reported.
    let m = data("tape/trap_between_pops.ir");
    let id = m.get("t").unwrap();
    let err = run(&m, id, &[Val::Array(vec![1.0]), Val::I64(5)]).unwrap_err();
    assert!(matches!(err.kind, TrapKind::IndexOutOfBounds { .. }));
    let err = run(&m, id, &[Val::Array(vec![1.0]), Val::I64(0)]).unwrap_err();
    assert_eq!(err.kind, TrapKind::TapeMismatch);
}

/// Each function keeps the length of the tapes it uses in a register
/// (docs/jit.md, *The length in a register*): a callee that pushes and pops
/// the caller's tape, even below the caller's entries, sees the caller's
/// pushes, the caller sees the callee's, and the tape budget counts the
/// caller's entries when the callee grows the tape.
#[test]
fn tape_lengths_cross_calls() {
    let m = data("tape/across_calls.ir");
    let id = m.get("t").unwrap();
    for n in [0, 1, 5, 3000] {
        // `run` compares with the interpreter (results and errors).
        let out = run(&m, id, &[Val::F64(0.25), Val::I64(n)]).unwrap();
        assert_eq!(out.results[1], Val::F64(2.5), "n = {n}");
        assert_eq!(out.results[2..], [Val::I64(0), Val::I64(0)], "n = {n}");
    }
    // 100 entries in all: the caller's two and 98 of @inner's fit.
    let limits = adze_ir::Limits {
        tape_limit: 100 * adze_ir::TAPE_ENTRY_BYTES,
        ..adze_ir::Limits::default()
    };
    run_limits(&m, id, &[Val::F64(0.25), Val::I64(98)], limits).unwrap();
    let err = run_limits(&m, id, &[Val::F64(0.25), Val::I64(99)], limits).unwrap_err();
    assert!(
        matches!(err.kind, TrapKind::TapeLimitExceeded { .. }),
        "{err:?}"
    );
    assert_eq!(err.func, "inner");
}
