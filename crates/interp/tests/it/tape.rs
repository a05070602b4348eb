//! The tape: `push` and `pop`, last in first out, one per outermost call.

use crate::util::*;
use adze_ir::{Module, RunError, TrapKind, Type, Val};

#[test]
fn pops_come_back_in_reverse_order() {
    // for i in 0..n { push f64(i) }; s = 0; for i in 0..n { s = 10 s + pop }
    let mut m = Module::new();
    let id = func(&mut m, "@digits(n: i64) -> f64", |fb, p| {
        let zero = fb.iconst(0);
        counted_loop(fb, zero, p[0], &[], |fb, iv, _| {
            let x = fb.sitof(iv);
            fb.push(0, x);
            vec![]
        });
        let s0 = fb.fconst(0.0);
        let z = fb.iconst(0);
        let out = counted_loop(fb, z, p[0], &[s0], |fb, _, c| {
            let ten = fb.fconst(10.0);
            let t = fb.fmul(c[0], ten);
            let x = fb.pop(0, Type::F64);
            vec![fb.fadd(t, x)]
        });
        fb.ret(&out);
    });
    // Pushed 0, 1, 2, 3; popped 3, 2, 1, 0.
    for (n, want) in [(4, 3210.0), (0, 0.0)] {
        assert_eq!(run_f64(&m, id, &[Val::I64(n)]), want, "n = {n}");
    }
}

#[test]
fn every_scalar_type_and_across_calls() {
    let mut m = Module::new();
    // record(x, j, c) { push x; push j; push c }
    let record = func(&mut m, "@record(x: f64, j: i64, c: bool)", |fb, p| {
        fb.push(0, p[0]);
        fb.push(0, p[1]);
        fb.push(0, p[2]);
        fb.ret(&[]);
    });
    // replay() { record(1.5, 7, true); record(-2.5, -8, false); pop everything }
    let id = func(
        &mut m,
        "@replay() -> (bool, i64, f64, bool, i64, f64)",
        |fb, _| {
            for (x, j, c) in [(1.5, 7, true), (-2.5, -8, false)] {
                let x = fb.fconst(x);
                let j = fb.iconst(j);
                let c = fb.bconst(c);
                fb.call(record, &[x, j, c], &[]);
            }
            let mut rs = Vec::new();
            for _ in 0..2 {
                rs.push(fb.pop(0, Type::Bool));
                rs.push(fb.pop(0, Type::I64));
                rs.push(fb.pop(0, Type::F64));
            }
            fb.ret(&rs);
        },
    );
    assert_eq!(
        results(&m, id, &[]),
        vec![
            Val::Bool(false),
            Val::I64(-8),
            Val::F64(-2.5),
            Val::Bool(true),
            Val::I64(7),
            Val::F64(1.5)
        ]
    );
}

#[test]
fn tape_mismatches_trap() {
    let mut m = Module::new();
    let mismatch = |f: &str| RunError::new(f, TrapKind::TapeMismatch);
    let empty = func(&mut m, "@empty() -> f64", |fb, _| {
        let x = fb.pop(0, Type::F64);
        fb.ret(&[x]);
    });
    assert_eq!(run_err(&m, empty, &[]), mismatch("empty"));

    let wrong = func(&mut m, "@wrong(n: i64) -> f64", |fb, p| {
        fb.push(0, p[0]);
        let x = fb.pop(0, Type::F64);
        fb.ret(&[x]);
    });
    assert_eq!(run_err(&m, wrong, &[Val::I64(1)]), mismatch("wrong"));

    // Popped by a callee: the error names the callee.
    let callee = func(&mut m, "@popper() -> f64", |fb, _| {
        let x = fb.pop(0, Type::F64);
        fb.ret(&[x]);
    });
    let caller = func(&mut m, "@pusher(x: f64) -> f64", |fb, p| {
        fb.push(0, p[0]);
        let c1 = fb.call(callee, &[], &[Type::F64]);
        let c2 = fb.call(callee, &[], &[Type::F64]);
        let a = fb.func.dfg.first_result(c1);
        let b = fb.func.dfg.first_result(c2);
        let s = fb.fadd(a, b);
        fb.ret(&[s]);
    });
    assert_eq!(run_err(&m, caller, &[Val::F64(1.0)]), mismatch("popper"));
}

#[test]
fn each_outermost_call_has_its_own_tape() {
    let mut m = Module::new();
    let leave = func(&mut m, "@leave(x: f64)", |fb, p| {
        fb.push(0, p[0]);
        fb.ret(&[]);
    });
    let take = func(&mut m, "@take() -> f64", |fb, _| {
        let x = fb.pop(0, Type::F64);
        fb.ret(&[x]);
    });
    assert_eq!(run(&m, leave, &[Val::F64(1.0)]).results, vec![]);
    assert_eq!(
        run_err(&m, take, &[]),
        RunError::new("take", TrapKind::TapeMismatch)
    );
}
