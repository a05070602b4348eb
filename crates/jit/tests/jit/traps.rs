//! Every run-time error, with the exact `RunError`, and compile-time errors.

use super::*;
use adze_ir::runtime::check_args;
use adze_ir::{ArgActivity, AutodiffSpec, CmpCond, Mode, Opcode, RetActivity, TrapKind};
use adze_jit::JitError;

fn oob(func: &str, array: &str, index: i64, len: i64) -> RunError {
    RunError::new(
        func,
        TrapKind::IndexOutOfBounds {
            array: array.into(),
            index,
            len,
        },
    )
}

/// `get(a, i) = a[i]`, called from `outer(a, i)` which allocates first.
fn load_module() -> (Mb, FuncId, FuncId) {
    let mut mb = Mb::new();
    let get = mb.func("@get(xs: arr, i: i64) -> f64", |b, p| {
        let x = b.load(p[0], p[1]);
        b.ret(&[x]);
    });
    let outer = mb.func("@outer(a: arr, i: i64) -> f64", |b, p| {
        let n = b.iconst(3);
        let _t = b.zeros(n, "scratch");
        let c = b.call(get, &[p[0], p[1]], &[Type::F64]);
        let r = b.func.dfg.first_result(c);
        b.ret(&[r]);
    });
    (mb, get, outer)
}

#[test]
fn out_of_bounds_read() {
    let (mb, get, outer) = load_module();
    let a = || Val::Array(vec![1.0, 2.0, 3.0]);
    assert_eq!(run_f64(&mb.m, get, &[a(), Val::I64(2)]), 3.0);
    assert_eq!(
        run(&mb.m, get, &[a(), Val::I64(3)]),
        Err(oob("get", "xs", 3, 3))
    );
    // The error names the function executing the load, not the caller.
    assert_eq!(
        run(&mb.m, outer, &[a(), Val::I64(3)]),
        Err(oob("get", "xs", 3, 3))
    );
    assert_eq!(
        run(&mb.m, outer, &[a(), Val::I64(-1)]),
        Err(oob("get", "xs", -1, 3))
    );
    assert_eq!(
        run(&mb.m, outer, &[a(), Val::I64(i64::MIN)]),
        Err(oob("get", "xs", i64::MIN, 3))
    );
    assert_eq!(
        run(&mb.m, get, &[Val::Array(vec![]), Val::I64(0)]),
        Err(oob("get", "xs", 0, 0))
    );
    // After a trap the compiled code is still usable.
    let c = jit(&mb.m, outer);
    assert!(c.call(&[a(), Val::I64(7)]).is_err());
    assert_eq!(
        c.call(&[a(), Val::I64(0)]).unwrap().results,
        vec![Val::F64(1.0)]
    );
}

#[test]
fn out_of_bounds_write_names_param_and_zeros_arrays() {
    let mut mb = Mb::new();
    let put = mb.func("@put(out: mut arr, i: i64)", |b, p| {
        let x = b.fconst(1.0);
        b.store(p[0], p[1], x);
        b.ret(&[]);
    });
    let local = mb.func("@local(n: i64, i: i64)", |b, p| {
        let t = b.zeros(p[0], "tape");
        let x = b.fconst(1.0);
        b.store(t, p[1], x);
        b.ret(&[]);
    });
    let args = |i| [Val::Array(vec![0.0; 4]), Val::I64(i)];
    let out = run(&mb.m, put, &args(3)).unwrap();
    assert_eq!(out.args[0], Val::Array(vec![0.0, 0.0, 0.0, 1.0]));
    assert_eq!(run(&mb.m, put, &args(4)), Err(oob("put", "out", 4, 4)));
    assert_eq!(run(&mb.m, put, &args(-2)), Err(oob("put", "out", -2, 4)));
    assert_eq!(
        run(&mb.m, local, &[Val::I64(5), Val::I64(5)]),
        Err(oob("local", "tape", 5, 5))
    );
    assert_eq!(
        run(&mb.m, local, &[Val::I64(5), Val::I64(-1)]),
        Err(oob("local", "tape", -1, 5))
    );
}

#[test]
fn integer_division_traps() {
    let mut mb = Mb::new();
    let div = mb.func("@div(a: i64, b: i64) -> i64", |b, p| {
        let q = b.binary(Opcode::Idiv, p[0], p[1]);
        b.ret(&[q]);
    });
    let rem = mb.func("@rem(a: i64, b: i64) -> i64", |b, p| {
        let q = b.binary(Opcode::Irem, p[0], p[1]);
        b.ret(&[q]);
    });
    let args = |a, b| [Val::I64(a), Val::I64(b)];
    for (id, name) in [(div, "div"), (rem, "rem")] {
        assert_eq!(
            run(&mb.m, id, &args(5, 0)),
            Err(RunError::new(name, TrapKind::DivisionByZero))
        );
        assert_eq!(
            run(&mb.m, id, &args(0, 0)),
            Err(RunError::new(name, TrapKind::DivisionByZero))
        );
        assert_eq!(
            run(&mb.m, id, &args(i64::MIN, -1)),
            Err(RunError::new(name, TrapKind::DivisionOverflow))
        );
    }
    assert_eq!(
        run(&mb.m, div, &args(i64::MIN, 1)).unwrap().results,
        vec![Val::I64(i64::MIN)]
    );
    assert_eq!(
        run(&mb.m, div, &args(i64::MAX, -1)).unwrap().results,
        vec![Val::I64(-i64::MAX)]
    );
    assert_eq!(
        run(&mb.m, rem, &args(7, -2)).unwrap().results,
        vec![Val::I64(1)]
    );
}

#[test]
fn bad_zeros_length() {
    let mut mb = Mb::new();
    let id = mb.func("@alloc(n: i64) -> i64", |b, p| {
        let t = b.zeros(p[0], "buf");
        let n = b.len(t);
        b.ret(&[n]);
    });
    let max = adze_ir::runtime::MAX_ARRAY_LEN;
    let bad_under = |len, max| {
        Err(RunError::new(
            "alloc",
            TrapKind::BadArrayLength { len, max },
        ))
    };
    let bad = |len| bad_under(len, max);
    assert_eq!(run(&mb.m, id, &[Val::I64(-1)]), bad(-1));
    assert_eq!(run(&mb.m, id, &[Val::I64(i64::MIN)]), bad(i64::MIN));
    assert_eq!(run(&mb.m, id, &[Val::I64(i64::MAX)]), bad(i64::MAX));
    assert_eq!(run(&mb.m, id, &[Val::I64(max + 1)]), bad(max + 1));
    // With a smaller limit, the boundary is exact.
    let limits = Limits {
        max_array_len: 10,
        ..Limits::default()
    };
    assert_eq!(
        run_limits(&mb.m, id, &[Val::I64(10)], limits)
            .unwrap()
            .results,
        vec![Val::I64(10)]
    );
    // The error names the limit the run had, not the default.
    let err = run_limits(&mb.m, id, &[Val::I64(11)], limits);
    assert_eq!(err, bad_under(11, 10));
    assert!(err.unwrap_err().to_string().contains("between 0 and 10)"));
}

#[test]
fn runaway_recursion_hits_the_depth_limit_without_crashing() {
    let mut mb = Mb::new();
    let f = mb.declare("@forever(x: f64) -> f64");
    mb.define(f, |b, p| {
        let four = b.iconst(4);
        let _t = b.zeros(four, "t");
        let c = b.call(f, &[p[0]], &[Type::F64]);
        let r = b.func.dfg.first_result(c);
        b.ret(&[r]);
    });
    let want = Err(RunError::new(
        "forever",
        TrapKind::CallDepthExceeded { limit: 100_000 },
    ));
    assert_eq!(run(&mb.m, f, &[Val::F64(1.0)]), want);
    let c = jit(&mb.m, f);
    let (got, peak) = c.call_with_stats(&[Val::F64(1.0)]);
    assert_eq!(got, want);
    assert_eq!(peak, 100_000);
    // Twice: the depth counter is per call.
    assert_eq!(c.call(&[Val::F64(1.0)]), want);
}

#[test]
fn depth_limit_boundary_is_exact_and_names_the_callee() {
    let mut mb = Mb::new();
    let (even, _odd) = control_even_odd(&mut mb);
    // is_even(n) nests n + 1 calls.
    let f = |n, limit| {
        let limits = Limits {
            max_call_depth: limit,
            ..Limits::default()
        };
        run_limits(&mb.m, even, &[Val::I64(n)], limits)
    };
    // Depth 1001 is is_even whatever n is (odd depths are is_even); at
    // limit 0 not even the outermost call is entered.
    let rows: [(i64, u32, Result<bool, &str>); 6] = [
        (999, 1000, Ok(false)),
        (1000, 1000, Err("is_even")),
        (1001, 1000, Err("is_even")),
        (4, 5, Ok(true)),
        (5, 5, Err("is_odd")),
        (0, 0, Err("is_even")),
    ];
    for (n, limit, want) in rows {
        let want = want
            .map(|b| vec![Val::Bool(b)])
            .map_err(|func| RunError::new(func, TrapKind::CallDepthExceeded { limit }));
        let got = f(n, limit).map(|out| out.results);
        assert_eq!(got, want, "is_even({n}) at depth limit {limit}");
    }
}

fn control_even_odd(mb: &mut Mb) -> (FuncId, FuncId) {
    super::control::even_odd(mb)
}

#[test]
fn bad_arguments() {
    let mut mb = Mb::new();
    let id = mb.func("@sig(x: f64, a: arr, n: i64, flag: bool)", |b, _| {
        b.ret(&[]);
    });
    let sig = mb.m.func(id).sig.clone();
    let good = [
        Val::F64(1.0),
        Val::Array(vec![]),
        Val::I64(1),
        Val::Bool(true),
    ];
    assert!(run(&mb.m, id, &good).is_ok());
    let cases: Vec<Vec<Val>> = vec![
        vec![],
        good[..3].to_vec(),
        [&good[..], &[Val::F64(0.0)]].concat(),
        vec![
            Val::I64(1),
            Val::Array(vec![]),
            Val::I64(1),
            Val::Bool(true),
        ],
        vec![Val::F64(1.0), Val::F64(1.0), Val::I64(1), Val::Bool(true)],
        vec![
            Val::F64(1.0),
            Val::Array(vec![]),
            Val::F64(1.0),
            Val::Bool(true),
        ],
        vec![Val::F64(1.0), Val::Array(vec![]), Val::I64(1), Val::I64(1)],
    ];
    for args in cases {
        let want = check_args("sig", &sig, &args).unwrap_err();
        assert!(matches!(want.kind, TrapKind::BadArguments(_)));
        assert_eq!(run(&mb.m, id, &args), Err(want));
    }
    let got = run(&mb.m, id, &[Val::F64(1.0)]).unwrap_err();
    assert_eq!(
        got,
        RunError::new(
            "sig",
            TrapKind::BadArguments("expected 4 argument(s), got 1".into())
        )
    );
}

#[test]
fn autodiff_is_rejected_at_compile_time() {
    let mut mb = Mb::new();
    let sq = mb.func("@sq(x: f64) -> f64", |b, p| {
        let y = b.fmul(p[0], p[0]);
        b.ret(&[y]);
    });
    let id = mb.func("@grad(x: f64) -> f64", |b, p| {
        let spec = AutodiffSpec {
            mode: Mode::Reverse,
            func: sq,
            ret: RetActivity::Active,
            args: vec![ArgActivity::Active],
            width: 1,
        };
        let i = b.autodiff(spec, &[p[0]], &[Type::F64]);
        let r = b.func.dfg.first_result(i);
        b.ret(&[r]);
    });
    match compile(&mb.m, id, &JitOptions::default()) {
        Err(JitError::Unsupported { func, what }) => {
            assert_eq!(func, "grad");
            assert!(what.contains("autodiff"), "{what}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    // The callee alone compiles fine.
    assert_eq!(run_f64(&mb.m, sq, &[Val::F64(3.0)]), 9.0);
}

#[test]
fn declared_function_without_body_is_rejected() {
    let mut mb = Mb::new();
    let ext = mb.declare("@ext(x: f64) -> f64");
    let id = mb.func("@user(x: f64) -> f64", |b, p| {
        let c = b.call(ext, &[p[0]], &[Type::F64]);
        let r = b.func.dfg.first_result(c);
        b.ret(&[r]);
    });
    match compile(&mb.m, id, &JitOptions::default()) {
        Err(JitError::Unsupported { func, .. }) => assert_eq!(func, "ext"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[test]
fn trap_deep_in_a_loop_with_live_arrays() {
    // A loop that allocates and calls; the callee traps on the 5th
    // iteration. Everything is freed and the error is the callee's.
    let (mut mb, get, _) = load_module();
    let id = mb.func("@looper(a: arr) -> f64", |b, p| {
        let head = b.create_block();
        let i = b.append_block_param(head, Type::I64);
        let body = b.create_block();
        let exit = b.create_block();
        let zero = b.iconst(0);
        let one = b.iconst(1);
        let hundred = b.iconst(100);
        b.jump(head, &[zero]);
        b.switch_to_block(head);
        let c = b.icmp(CmpCond::Lt, i, hundred);
        b.brif(c, body, &[], exit, &[]);
        b.switch_to_block(body);
        let _t = b.zeros(hundred, "t");
        b.call(get, &[p[0], i], &[Type::F64]);
        let i1 = b.iadd(i, one);
        b.jump(head, &[i1]);
        b.switch_to_block(exit);
        let z = b.fconst(0.0);
        b.ret(&[z]);
    });
    assert_eq!(
        run(&mb.m, id, &[Val::Array(vec![0.0; 4])]),
        Err(oob("get", "xs", 4, 4))
    );
}

#[test]
fn bounds_checks_with_constant_indices() {
    // Checks the JIT leaves out (constant index below a constant `zeros`
    // length, below a constant index already checked in the block, or an
    // (array, index) pair already checked) must never hide a fault.
    let mut mb = Mb::new();
    // a[3]; a[1] (proven by a[3]); a[k] for the parameter k; a[k] again.
    let id = mb.func("@consts(a: mut arr, k: i64) -> f64", |b, p| {
        let three = b.iconst(3);
        let one = b.iconst(1);
        let x = b.load(p[0], three);
        let y = b.load(p[0], one);
        let s = b.fadd(x, y);
        let z = b.load(p[0], p[1]);
        let s2 = b.fadd(s, z);
        b.store(p[0], p[1], s2);
        b.ret(&[s2]);
    });
    let a = |n: usize| Val::Array((0..n).map(|i| i as f64).collect());
    let out = run(&mb.m, id, &[a(4), Val::I64(2)]).unwrap();
    assert_eq!(out.results, vec![Val::F64(6.0)]);
    assert_eq!(out.args[0], Val::Array(vec![0.0, 1.0, 6.0, 3.0]));
    assert_eq!(
        run(&mb.m, id, &[a(3), Val::I64(0)]),
        Err(oob("consts", "a", 3, 3))
    );
    assert_eq!(
        run(&mb.m, id, &[a(4), Val::I64(4)]),
        Err(oob("consts", "a", 4, 4))
    );
    assert_eq!(
        run(&mb.m, id, &[a(4), Val::I64(-4)]),
        Err(oob("consts", "a", -4, 4))
    );

    // A constant-length `zeros`: in-bounds constants need no check, an
    // out-of-bounds constant still traps; a negative constant too.
    for (k, want) in [
        (2, Ok(())),
        (3, Err(oob("zc", "t", 3, 3))),
        (-1, Err(oob("zc", "t", -1, 3))),
    ] {
        let mut mb = Mb::new();
        let id = mb.func("@zc() -> f64", |b, _| {
            let n = b.iconst(3);
            let t = b.zeros(n, "t");
            let i = b.iconst(k);
            let x = b.fconst(2.0);
            b.store(t, i, x);
            let y = b.load(t, i);
            b.ret(&[y]);
        });
        let got = run(&mb.m, id, &[]).map(|o| assert_eq!(o.results, vec![Val::F64(2.0)]));
        assert_eq!(got, want, "k = {k}");
    }

    // Facts do not leak from one block into another one that the first does
    // not dominate: a[5] checked on one branch, a[2] on the join.
    let mut mb = Mb::new();
    let id = mb.func("@branches(a: arr, c: bool) -> f64", |b, p| {
        let t = b.create_block();
        let join = b.create_block();
        let five = b.iconst(5);
        let two = b.iconst(2);
        let z = b.fconst(0.0);
        b.brif(p[1], t, &[], join, &[z]);
        b.switch_to_block(t);
        let x = b.load(p[0], five);
        b.jump(join, &[x]);
        let _ = b.append_block_param(join, Type::F64);
        b.switch_to_block(join);
        let r = b.func.dfg.block_params(join)[0];
        let y = b.load(p[0], two);
        let s = b.fadd(r, y);
        b.ret(&[s]);
    });
    assert_eq!(
        run(&mb.m, id, &[a(2), Val::Bool(false)]),
        Err(oob("branches", "a", 2, 2))
    );
    assert_eq!(
        run(&mb.m, id, &[a(6), Val::Bool(true)]).unwrap().results,
        vec![Val::F64(7.0)]
    );
}

/// `ishl`/`sshr` trap unless the amount is in `0..=63`, and `ftosi` for NaN
/// and outside `[-2^63, 2^63)`, exactly as the interpreter (issue #16):
/// `run` compares both at every optimisation level, bit for bit and error
/// for error.
#[test]
fn shift_and_conversion_traps() {
    let mut mb = Mb::new();
    let shifts = [(Opcode::Ishl, "shl"), (Opcode::Sshr, "shr")].map(|(op, name)| {
        let f = mb.func(&format!("@{name}(a: i64, b: i64) -> i64"), |b, p| {
            let r = b.binary(op, p[0], p[1]);
            b.ret(&[r]);
        });
        (f, name, op)
    });
    let bits = mb.func("@bits(a: i64, b: i64) -> (i64, i64)", |b, p| {
        let x = b.binary(Opcode::Band, p[0], p[1]);
        let y = b.binary(Opcode::Bor, p[0], p[1]);
        b.ret(&[x, y]);
    });
    let conv = mb.func("@conv(x: f64) -> i64", |b, p| {
        let r = b.ftosi(p[0]);
        b.ret(&[r]);
    });
    let ints = [0, 1, -1, 5, 63, 64, -64, i64::MIN, i64::MAX, 12345];
    for (f, name, op) in shifts {
        for a in ints {
            for s in ints {
                let got = run(&mb.m, f, &[Val::I64(a), Val::I64(s)]);
                match adze_ir::semantics::binary_i64(op, a, s) {
                    Ok(r) => assert_eq!(got.unwrap().results, vec![Val::I64(r)]),
                    Err(kind) => {
                        assert_eq!(kind, TrapKind::ShiftOutOfRange { amount: s });
                        let e = got.unwrap_err();
                        assert_eq!((e.func.as_str(), &e.kind), (name, &kind));
                    }
                }
            }
        }
    }
    for a in ints {
        for b in ints {
            let got = run(&mb.m, bits, &[Val::I64(a), Val::I64(b)]).unwrap();
            assert_eq!(got.results, vec![Val::I64(a & b), Val::I64(a | b)]);
        }
    }
    let end = 9_223_372_036_854_775_808.0f64;
    let xs = [
        0.0,
        -0.0,
        2.9,
        -2.9,
        1e18,
        -end,
        end,
        f64::from_bits(end.to_bits() - 1),
        f64::from_bits((-end).to_bits() + 1),
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        f64::MIN_POSITIVE,
    ];
    for x in xs {
        let got = run(&mb.m, conv, &[Val::F64(x)]);
        match adze_ir::semantics::ftosi(x) {
            Ok(r) => assert_eq!(got.unwrap().results, vec![Val::I64(r)], "{x}"),
            Err(kind) => {
                let e = got.unwrap_err();
                assert_eq!(e.kind, kind, "{x}");
                assert_eq!(e.func, "conv");
            }
        }
    }
}
