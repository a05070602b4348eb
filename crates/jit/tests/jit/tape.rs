//! The tapes: `push`/`pop` per tape number, last in first out per tape, with
//! type and tape mismatches reported like the interpreter does.

use crate::*;
use adze_ir::parse::parse_module;
use adze_ir::{TrapKind, Val};

#[test]
fn tapes_are_independent_stacks() {
    // Interleaved pushes on tapes 0 and 5 come back per tape, last in first out.
    let m = parse_module(
        "function @t(x: f64, n: i64) -> (f64, i64, f64, bool) {
block0(v0: f64, v1: i64):
    push 0, v0
    push 5, v1
    v2 = fconst 2.5
    push 0, v2
    v3 = bconst true
    push 5, v3
    v4 = pop 0, f64
    v5 = pop 5, bool
    v6 = pop 5, i64
    v7 = pop 0, f64
    return v4, v6, v7, v5
}
",
    )
    .unwrap();
    verified(&m);
    let id = m.get("t").unwrap();
    let out = run(&m, id, &[Val::F64(1.5), Val::I64(7)]).unwrap();
    assert_eq!(
        out.results,
        vec![Val::F64(2.5), Val::I64(7), Val::F64(1.5), Val::Bool(true)]
    );
}

#[test]
fn popping_another_tape_is_a_mismatch() {
    let m = parse_module(
        "function @t(x: f64) -> f64 {
block0(v0: f64):
    push 1, v0
    v1 = pop 2, f64
    return v1
}
",
    )
    .unwrap();
    verified(&m);
    let id = m.get("t").unwrap();
    let err = run(&m, id, &[Val::F64(1.5)]).unwrap_err();
    assert_eq!(err.kind, TrapKind::TapeMismatch);
    assert_eq!(err.func, "t");
}
