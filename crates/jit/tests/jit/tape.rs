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

/// Pushes three values (f64, i64, bool) per iteration for `n` iterations,
/// with pure arithmetic and an intrinsic call between the pushes, then pops
/// them all back in a second loop, folding them into the results. The tape
/// grows many times on the way (the inline push's slow path).
const PUSH_POP_LOOPS: &str = "function @t(x: f64, n: i64) -> (f64, i64) {
block0(v0: f64, v1: i64):
    v2 = iconst 0
    v3 = fconst 0.0
    jump block1(v2, v0)
block1(v4: i64, v5: f64):
    v6 = icmp lt v4, v1
    brif v6, block2, block3
block2:
    v7 = sin v5
    push 3, v7
    v8 = fconst 1.5
    v9 = fmul v7, v8
    v10 = icmp gt v4, v1
    push 3, v4
    push 3, v10
    v11 = iconst 1
    v12 = iadd v4, v11
    v13 = fadd v5, v9
    jump block1(v12, v13)
block3:
    jump block4(v2, v3, v2)
block4(v14: i64, v15: f64, v16: i64):
    v17 = icmp lt v14, v1
    brif v17, block5, block6
block5:
    v18 = pop 3, bool
    v19 = pop 3, i64
    v20 = fconst 0.5
    v21 = pop 3, f64
    v22 = fmul v21, v20
    v23 = fadd v15, v22
    v24 = iadd v16, v19
    v25 = iconst 1
    v26 = iadd v14, v25
    jump block4(v26, v23, v24)
block6:
    return v15, v16
}
";

#[test]
fn inline_tape_survives_growth() {
    let m = parse_module(PUSH_POP_LOOPS).unwrap();
    verified(&m);
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
    let m = parse_module(
        "function @t(x: f64) -> f64 {
block0(v0: f64):
    push 2, v0
    push 2, v0
    push 2, v0
    v1 = pop 2, f64
    v2 = pop 2, i64
    v3 = pop 2, f64
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

#[test]
fn a_pop_group_longer_than_the_tape_is_reported() {
    // Two values on the tape, a group of three pops; and a callee that pops
    // from an empty tape.
    let m = parse_module(
        "function @t(x: f64) -> f64 {
block0(v0: f64):
    push 0, v0
    push 0, v0
    v1 = pop 0, f64
    v2 = pop 0, f64
    v3 = pop 0, f64
    return v3
}

function @u(x: f64) -> f64 {
block0(v0: f64):
    push 1, v0
    v1 = call @v(v0)
    return v1
}

function @v(x: f64) -> f64 {
block0(v0: f64):
    v1 = pop 1, f64
    v2 = pop 1, f64
    return v2
}
",
    )
    .unwrap();
    verified(&m);
    let err = run(&m, m.get("t").unwrap(), &[Val::F64(1.5)]).unwrap_err();
    assert_eq!(err.kind, TrapKind::TapeMismatch);
    let err = run(&m, m.get("u").unwrap(), &[Val::F64(1.5)]).unwrap_err();
    assert_eq!((err.kind, err.func.as_str()), (TrapKind::TapeMismatch, "v"));
}

#[test]
fn a_trap_between_pops_comes_first() {
    // An out-of-bounds load between two pops of which the second mismatches:
    // the pops are not grouped across it, so the load's error is reported.
    let m = parse_module(
        "function @t(a: arr, i: i64) -> f64 {
block0(v0: arr, v1: i64):
    v2 = fconst 2.0
    push 0, v2
    push 0, v2
    v3 = pop 0, f64
    v4 = load v0, v1
    v5 = pop 0, i64
    return v4
}
",
    )
    .unwrap();
    verified(&m);
    let id = m.get("t").unwrap();
    let err = run(&m, id, &[Val::Array(vec![1.0]), Val::I64(5)]).unwrap_err();
    assert!(matches!(err.kind, TrapKind::IndexOutOfBounds { .. }));
    let err = run(&m, id, &[Val::Array(vec![1.0]), Val::I64(0)]).unwrap_err();
    assert_eq!(err.kind, TrapKind::TapeMismatch);
}
