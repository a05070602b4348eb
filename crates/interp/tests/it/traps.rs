//! Every way a run can stop: the traps of the shared `TrapKind`, argument
//! checking, unsupported code, and malformed IR (an error, never a panic).

use crate::util::*;
use adze_interp::Interpreter;
use adze_ir::runtime::MAX_ARRAY_LEN;
use adze_ir::{
    ArgActivity, AutodiffSpec, CmpCond, FuncId, InstData, Limits, Mode, Module, Opcode,
    RetActivity, RunError, TrapKind, Type, Val,
};

fn err(func: &str, kind: TrapKind) -> RunError {
    RunError::new(func, kind)
}

fn unsupported(func: &str, msg: &str) -> RunError {
    err(func, TrapKind::Unsupported(msg.to_string()))
}

fn oob(func: &str, array: &str, index: i64, len: i64) -> RunError {
    err(
        func,
        TrapKind::IndexOutOfBounds {
            array: array.to_string(),
            index,
            len,
        },
    )
}

/// `get(xs, i) = xs[i]`
fn getter(m: &mut Module) -> FuncId {
    func(m, "@get(xs: arr, i: i64) -> f64", |fb, p| {
        let x = fb.load(p[0], p[1]);
        fb.ret(&[x]);
    })
}

#[test]
fn out_of_bounds_read() {
    let mut m = Module::new();
    let id = getter(&mut m);
    let xs = || Val::Array(vec![1.0, 2.0, 3.0]);
    assert_eq!(run_f64(&m, id, &[xs(), Val::I64(2)]), 3.0);
    let e = run_err(&m, id, &[xs(), Val::I64(3)]);
    assert_eq!(e, oob("get", "xs", 3, 3));
    assert_eq!(
        e.to_string(),
        "in function `get`: index 3 is out of bounds for array `xs` of length 3"
    );
    assert_eq!(
        run_err(&m, id, &[xs(), Val::I64(-1)]),
        oob("get", "xs", -1, 3)
    );
    assert_eq!(
        run_err(&m, id, &[xs(), Val::I64(i64::MIN)]),
        oob("get", "xs", i64::MIN, 3)
    );
    assert_eq!(
        run_err(&m, id, &[Val::Array(vec![]), Val::I64(0)]),
        oob("get", "xs", 0, 0)
    );
}

#[test]
fn out_of_bounds_write_names_the_local_array() {
    // put(i) { tmp = zeros(2); tmp[i] = 1.0 }
    let mut m = Module::new();
    let id = func(&mut m, "@put(i: i64)", |fb, p| {
        let two = fb.iconst(2);
        let tmp = fb.zeros(two, "tmp");
        let one = fb.fconst(1.0);
        fb.store(tmp, p[0], one);
        fb.ret(&[]);
    });
    assert_eq!(run(&m, id, &[Val::I64(1)]).results, vec![]);
    assert_eq!(run_err(&m, id, &[Val::I64(5)]), oob("put", "tmp", 5, 2));
    assert_eq!(run_err(&m, id, &[Val::I64(-1)]), oob("put", "tmp", -1, 2));
    assert_eq!(run_err(&m, id, &[Val::I64(2)]), oob("put", "tmp", 2, 2));
}

#[test]
fn out_of_bounds_in_a_callee_names_the_callee_and_its_parameter() {
    let mut m = Module::new();
    let get = getter(&mut m);
    // outer(data: [f64]) { get(data, 10) }
    let id = func(&mut m, "@outer(data: arr) -> f64", |fb, p| {
        let ten = fb.iconst(10);
        let call = fb.call(get, &[p[0], ten], &[Type::F64]);
        let r = fb.func.dfg.first_result(call);
        fb.ret(&[r]);
    });
    assert_eq!(
        run_err(&m, id, &[Val::Array(vec![0.0; 4])]),
        oob("get", "xs", 10, 4)
    );
}

#[test]
fn integer_division_traps() {
    let mut m = Module::new();
    let [div, rem] = [("div", Opcode::Idiv), ("rem", Opcode::Irem)].map(|(name, op)| {
        func(
            &mut m,
            &format!("@{name}(a: i64, b: i64) -> i64"),
            |fb, p| {
                let r = fb.binary(op, p[0], p[1]);
                fb.ret(&[r]);
            },
        )
    });
    let args = |a, b| [Val::I64(a), Val::I64(b)];
    let ok = [
        ("div", div, (7, -2), -3),
        ("rem", rem, (7, -2), 1),
        ("div", div, (i64::MIN, 1), i64::MIN),
    ];
    for (name, id, (a, b), want) in ok {
        assert_eq!(run_i64(&m, id, &args(a, b)), want, "{name}({a}, {b})");
    }
    let traps = [
        ("div", div, (1, 0), TrapKind::DivisionByZero),
        ("rem", rem, (1, 0), TrapKind::DivisionByZero),
        ("div", div, (0, 0), TrapKind::DivisionByZero),
        ("div", div, (i64::MIN, -1), TrapKind::DivisionOverflow),
        ("rem", rem, (i64::MIN, -1), TrapKind::DivisionOverflow),
    ];
    for (name, id, (a, b), kind) in traps {
        assert_eq!(
            run_err(&m, id, &args(a, b)),
            err(name, kind),
            "{name}({a}, {b})"
        );
    }
    assert_eq!(
        run_err(&m, div, &args(i64::MIN, -1)).to_string(),
        "in function `div`: integer division overflow (i64::MIN / -1)"
    );
}

#[test]
fn bad_zeros_length() {
    let mut m = Module::new();
    let id = func(&mut m, "@alloc(n: i64) -> i64", |fb, p| {
        let t = fb.zeros(p[0], "t");
        let l = fb.len(t);
        fb.ret(&[l]);
    });
    let bad_under = |n, max| err("alloc", TrapKind::BadArrayLength { len: n, max });
    let bad = |n| bad_under(n, MAX_ARRAY_LEN);
    assert_eq!(run_err(&m, id, &[Val::I64(-1)]), bad(-1));
    assert_eq!(run_err(&m, id, &[Val::I64(i64::MIN)]), bad(i64::MIN));
    assert_eq!(
        run_err(&m, id, &[Val::I64(MAX_ARRAY_LEN + 1)]),
        bad(MAX_ARRAY_LEN + 1)
    );
    assert_eq!(run_err(&m, id, &[Val::I64(i64::MAX)]), bad(i64::MAX));

    let small = Interpreter::with_limits(
        &m,
        Limits {
            max_array_len: 10,
            ..Limits::default()
        },
    );
    assert_eq!(
        small.call(id, &[Val::I64(10)]).unwrap().results,
        vec![Val::I64(10)]
    );
    // The error names the limit the run had, not the default.
    let e = small.call(id, &[Val::I64(11)]).unwrap_err();
    assert_eq!(e, bad_under(11, 10));
    assert!(e.to_string().contains("between 0 and 10)"), "{e}");
}

#[test]
fn runaway_recursion_hits_the_depth_limit() {
    let mut m = Module::new();
    let id = crate::calls::count(&mut m);
    assert_eq!(run_i64(&m, id, &[Val::I64(999)]), 999);
    let e = run_err(&m, id, &[Val::I64(100_000)]);
    assert_eq!(
        e,
        err("count", TrapKind::CallDepthExceeded { limit: 100_000 })
    );
    assert_eq!(
        e.to_string(),
        "in function `count`: call depth limit of 100000 exceeded: a recursion that does not end? (`--max-call-depth` raises the limit)"
    );
}

#[test]
fn bad_arguments() {
    let mut m = Module::new();
    let get = getter(&mut m);
    let bad = |msg: &str| err("get", TrapKind::BadArguments(msg.to_string()));
    assert_eq!(run_err(&m, get, &[]), bad("expected 2 argument(s), got 0"));
    assert_eq!(
        run_err(&m, get, &[Val::Array(vec![1.0]), Val::I64(0), Val::I64(0)]),
        bad("expected 2 argument(s), got 3")
    );
    assert_eq!(
        run_err(&m, get, &[Val::F64(1.0), Val::I64(0)]),
        bad("argument `xs` must be an array, got an f64")
    );
    assert_eq!(
        run_err(&m, get, &[Val::Array(vec![1.0]), Val::F64(0.0)]),
        bad("argument `i` must be an i64, got an f64")
    );
    // An unknown function id.
    let e = Interpreter::new(&m)
        .call(FuncId::from_u32(7), &[])
        .unwrap_err();
    assert_eq!(e.func, "fn7");
    assert!(matches!(e.kind, TrapKind::Unsupported(_)));
}

#[test]
fn calling_a_declaration() {
    let mut m = Module::new();
    let ext = declare(&mut m, "@ext(x: f64) -> f64");
    let no_body = unsupported("ext", "function `ext` has no body");
    assert_eq!(run_err(&m, ext, &[Val::F64(1.0)]), no_body);
    // The arguments are checked first.
    assert_eq!(
        run_err(&m, ext, &[]),
        err(
            "ext",
            TrapKind::BadArguments("expected 1 argument(s), got 0".into())
        )
    );
    // Through a call: the error names the callee.
    let user = func(&mut m, "@user(x: f64) -> f64", |fb, p| {
        let call = fb.call(ext, &[p[0]], &[Type::F64]);
        let r = fb.func.dfg.first_result(call);
        fb.ret(&[r]);
    });
    assert_eq!(run_err(&m, user, &[Val::F64(1.0)]), no_body);
}

#[test]
fn autodiff_is_unsupported_until_lowered() {
    let mut m = Module::new();
    let sq = func(&mut m, "@sq(x: f64) -> f64", |fb, p| {
        let y = fb.fmul(p[0], p[0]);
        fb.ret(&[y]);
    });
    let spec = AutodiffSpec {
        mode: Mode::Forward,
        func: sq,
        ret: RetActivity::Dual,
        args: vec![ArgActivity::Dual],
        width: 1,
    };
    let tys = m.autodiff_result_types(&spec);
    assert_eq!(tys, vec![Type::F64, Type::F64]);
    // dsq(x, run) { if run { autodiff(forward, sq, dual, dual(x, 1.0)).1 } else { -1.0 } }
    let id = func(&mut m, "@dsq(x: f64, run: bool) -> f64", |fb, p| {
        let yes = fb.create_block();
        let no = fb.create_block();
        fb.brif(p[1], yes, &[], no, &[]);
        fb.switch_to_block(yes);
        let one = fb.fconst(1.0);
        let ad = fb.autodiff(spec, &[p[0], one], &tys);
        let t = fb.func.dfg.inst_results(ad)[1];
        fb.ret(&[t]);
        fb.switch_to_block(no);
        let m1 = fb.fconst(-1.0);
        fb.ret(&[m1]);
    });
    // Not executed: harmless.
    assert_eq!(run_f64(&m, id, &[Val::F64(3.0), Val::Bool(false)]), -1.0);
    assert_eq!(
        run_err(&m, id, &[Val::F64(3.0), Val::Bool(true)]),
        unsupported(
            "dsq",
            "`autodiff` must be lowered by an AD pass before it can run"
        )
    );
}

/// Malformed IR, which the verifier would reject, stops with `Unsupported`
/// in the function at fault instead of panicking.
#[test]
fn malformed_ir_is_an_error_not_a_panic() {
    let is_unsupported_in = |e: RunError, func: &str| {
        assert_eq!(e.func, func, "{e}");
        assert!(matches!(e.kind, TrapKind::Unsupported(_)), "{e}");
    };
    let mut m = Module::new();

    // A block without a terminator.
    let id = func(&mut m, "@no_term(x: f64) -> f64", |fb, p| {
        fb.fadd(p[0], p[0]);
    });
    is_unsupported_in(run_err_unverified(&m, id, &[Val::F64(1.0)]), "no_term");

    // An operand of the wrong kind.
    let id = func(&mut m, "@kinds(n: i64) -> f64", |fb, p| {
        let r = fb.fadd(p[0], p[0]);
        fb.ret(&[r]);
    });
    is_unsupported_in(run_err_unverified(&m, id, &[Val::I64(1)]), "kinds");

    // A value used on a path where it was not computed.
    let id = func(&mut m, "@undef(c: bool) -> f64", |fb, p| {
        let a = fb.create_block();
        let bb = fb.create_block();
        let join = fb.create_block();
        fb.brif(p[0], a, &[], bb, &[]);
        fb.switch_to_block(a);
        let x = fb.fconst(1.0);
        fb.jump(join, &[]);
        fb.switch_to_block(bb);
        fb.jump(join, &[]);
        fb.switch_to_block(join);
        fb.ret(&[x]);
    });
    assert_eq!(
        Interpreter::new(&m).call(id, &[Val::Bool(true)]),
        Ok(adze_ir::Outcome {
            results: vec![Val::F64(1.0)],
            args: vec![Val::Bool(true)]
        })
    );
    is_unsupported_in(run_err_unverified(&m, id, &[Val::Bool(false)]), "undef");

    // A return that does not match the signature.
    let id = func(&mut m, "@bad_ret(n: i64) -> f64", |fb, p| {
        fb.ret(&[p[0]]);
    });
    is_unsupported_in(run_err_unverified(&m, id, &[Val::I64(1)]), "bad_ret");

    // A branch with too few arguments.
    let id = func(&mut m, "@bad_branch(x: f64) -> f64", |fb, p| {
        let next = fb.create_block();
        fb.jump(next, &[]);
        fb.switch_to_block(next);
        let y = fb.append_block_param(next, Type::F64);
        let r = fb.fadd(y, p[0]);
        fb.ret(&[r]);
    });
    is_unsupported_in(run_err_unverified(&m, id, &[Val::F64(1.0)]), "bad_branch");

    // An array passed through a block parameter.
    let id = func(&mut m, "@arr_param(a: arr) -> i64", |fb, p| {
        let next = fb.create_block();
        fb.jump(next, &[p[0]]);
        fb.switch_to_block(next);
        let a = fb.append_block_param(next, Type::Array);
        let l = fb.len(a);
        fb.ret(&[l]);
    });
    is_unsupported_in(
        run_err_unverified(&m, id, &[Val::Array(vec![])]),
        "arr_param",
    );

    // A select between arrays.
    let id = func(&mut m, "@arr_select(a: arr, c: bool) -> i64", |fb, p| {
        let s = fb.select(p[1], p[0], p[0]);
        let l = fb.len(s);
        fb.ret(&[l]);
    });
    is_unsupported_in(
        run_err_unverified(&m, id, &[Val::Array(vec![]), Val::Bool(true)]),
        "arr_select",
    );

    // An opcode in a format it does not belong to.
    let id = func(&mut m, "@bad_format(x: f64) -> f64", |fb, p| {
        let inst = fb.build(
            InstData::Unary {
                op: Opcode::Fadd,
                arg: p[0],
            },
            &[Type::F64],
        );
        let r = fb.func.dfg.first_result(inst);
        fb.ret(&[r]);
    });
    is_unsupported_in(run_err_unverified(&m, id, &[Val::F64(1.0)]), "bad_format");

    // Calls with the wrong arguments or results, and to a missing function.
    let sq = func(&mut m, "@sq2(x: f64) -> f64", |fb, p| {
        let y = fb.fmul(p[0], p[0]);
        fb.ret(&[y]);
    });
    let id = func(&mut m, "@few_args()", |fb, _| {
        fb.call(sq, &[], &[Type::F64]);
        fb.ret(&[]);
    });
    is_unsupported_in(run_err_unverified(&m, id, &[]), "sq2");
    let id = func(&mut m, "@wrong_arg(n: i64)", |fb, p| {
        fb.call(sq, &[p[0]], &[Type::F64]);
        fb.ret(&[]);
    });
    is_unsupported_in(run_err_unverified(&m, id, &[Val::I64(1)]), "sq2");
    let id = func(&mut m, "@few_results(x: f64)", |fb, p| {
        fb.call(sq, &[p[0]], &[]);
        fb.ret(&[]);
    });
    is_unsupported_in(run_err_unverified(&m, id, &[Val::F64(1.0)]), "few_results");
    let id = func(&mut m, "@missing()", |fb, _| {
        fb.call(FuncId::from_u32(1000), &[], &[]);
        fb.ret(&[]);
    });
    is_unsupported_in(run_err_unverified(&m, id, &[]), "fn1000");

    // A comparison with the wrong opcode.
    let id = func(&mut m, "@bad_cmp(x: f64) -> bool", |fb, p| {
        let inst = fb.build(
            InstData::Cmp {
                op: Opcode::Fadd,
                cond: CmpCond::Eq,
                args: [p[0], p[0]],
            },
            &[Type::Bool],
        );
        let r = fb.func.dfg.first_result(inst);
        fb.ret(&[r]);
    });
    is_unsupported_in(run_err_unverified(&m, id, &[Val::F64(1.0)]), "bad_cmp");
}
