//! Scalar arithmetic, comparisons, `select`, constants and multiple results.

use super::*;
use adze_ir::semantics;
use adze_ir::{CmpCond, Opcode};

#[test]
fn float_arithmetic() {
    let mut mb = Mb::new();
    // (x + y) * (x - y) / y - (-x)
    let id = mb.func("@f(x: f64, y: f64) -> f64", |b, p| {
        let s = b.fadd(p[0], p[1]);
        let d = b.fsub(p[0], p[1]);
        let m = b.fmul(s, d);
        let q = b.fdiv(m, p[1]);
        let n = b.fneg(p[0]);
        let r = b.fsub(q, n);
        b.ret(&[r]);
    });
    // (5 * 1) / 2 - (-3) = 5.5
    assert_eq!(run_f64(&mb.m, id, &[Val::F64(3.0), Val::F64(2.0)]), 5.5);
    // Division by zero is IEEE: (1 * 1) / 0 - (-1) = inf.
    assert_eq!(
        run_f64(&mb.m, id, &[Val::F64(1.0), Val::F64(0.0)]),
        f64::INFINITY
    );
    assert!(run_f64(&mb.m, id, &[Val::F64(f64::NAN), Val::F64(1.0)]).is_nan());
}

#[test]
fn integer_arithmetic_wraps() {
    let mut mb = Mb::new();
    let id = mb.func(
        "@ints(a: i64, b: i64) -> (i64, i64, i64, i64, i64, i64)",
        |b, p| {
            let add = b.iadd(p[0], p[1]);
            let sub = b.isub(p[0], p[1]);
            let mul = b.imul(p[0], p[1]);
            let div = b.binary(Opcode::Idiv, p[0], p[1]);
            let rem = b.binary(Opcode::Irem, p[0], p[1]);
            let neg = b.unary(Opcode::Ineg, p[0]);
            b.ret(&[add, sub, mul, div, rem, neg]);
        },
    );
    let out = run(&mb.m, id, &[Val::I64(-7), Val::I64(2)]).unwrap();
    assert_eq!(
        out.results,
        vec![
            Val::I64(-5),
            Val::I64(-9),
            Val::I64(-14),
            Val::I64(-3),
            Val::I64(-1),
            Val::I64(7)
        ]
    );
    assert_eq!(out.args, vec![Val::I64(-7), Val::I64(2)]);
    let out = run(&mb.m, id, &[Val::I64(i64::MIN), Val::I64(1)]).unwrap();
    assert_eq!(
        out.results,
        vec![
            Val::I64(i64::MIN + 1),
            Val::I64(i64::MAX),
            Val::I64(i64::MIN),
            Val::I64(i64::MIN),
            Val::I64(0),
            Val::I64(i64::MIN)
        ]
    );
    let out = run(&mb.m, id, &[Val::I64(i64::MAX), Val::I64(2)]).unwrap();
    assert_eq!(out.results[0], Val::I64(i64::MIN + 1));
    assert_eq!(out.results[2], Val::I64(-2));
    // MIN / 1 and MIN % 2 are fine; only MIN / -1 traps.
    let out = run(&mb.m, id, &[Val::I64(i64::MIN), Val::I64(2)]).unwrap();
    assert_eq!(out.results[3], Val::I64(i64::MIN / 2));
    assert_eq!(out.results[4], Val::I64(0));
}

#[test]
fn sitof_rounds_to_nearest() {
    let mut mb = Mb::new();
    let id = mb.func("@c(n: i64) -> f64", |b, p| {
        let x = b.sitof(p[0]);
        b.ret(&[x]);
    });
    for n in [
        0,
        1,
        -1,
        i64::MAX,
        i64::MIN,
        (1 << 53) + 1,
        (1 << 53) + 3,
        -(1 << 53) - 1,
        123_456_789,
    ] {
        let x = run_f64(&mb.m, id, &[Val::I64(n)]);
        assert_eq!(x.to_bits(), semantics::sitof(n).to_bits(), "sitof {n}");
    }
    assert_eq!(
        run_f64(&mb.m, id, &[Val::I64((1 << 53) + 1)]),
        9007199254740992.0
    );
    assert_eq!(
        run_f64(&mb.m, id, &[Val::I64(i64::MAX)]),
        9223372036854775808.0
    );
}

/// `c + x` and `c · x` with a constant `c` are compiled with the operands
/// swapped (`Translator::number_const`: Cranelift reads a second operand
/// from the constant pool), unless `c` is a NaN; `fneg` is an `xor` with
/// a mask kept in a vector register. Same bits as the interpreter's for
/// every `x`, NaN payloads and signs, signaling NaNs and zeros included,
/// with a NaN constant (not swapped) against NaN operands too.
#[test]
fn a_constant_first_operand_and_negation_keep_their_bits() {
    let consts = [
        2.0,
        -0.0,
        0.0,
        1.0,
        -1e300,
        f64::INFINITY,
        f64::from_bits(1),
        f64::NAN,
        f64::from_bits(0xfff8_0000_0000_0007),
    ];
    let xs = [
        0.0,
        -0.0,
        1.0,
        -3.5,
        1e300,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::from_bits(3),
        f64::from_bits(0x7ff8_0000_dead_beef),
        f64::from_bits(0xfff8_0000_0000_0001),
        f64::from_bits(0x7ff0_0000_0000_0001),
    ];
    for c in consts {
        let mut mb = Mb::new();
        let id = mb.func("@f(x: f64) -> (f64, f64, f64)", |b, p| {
            let k = b.fconst(c);
            let s = b.fadd(k, p[0]);
            let m = b.fmul(k, p[0]);
            let n = b.fneg(m);
            b.ret(&[s, m, n]);
        });
        for x in xs {
            // `run` compares every engine and level with the interpreter,
            // bit for bit; the sums and products are Rust's.
            let out = run(&mb.m, id, &[Val::F64(x)]).unwrap();
            let bits: Vec<u64> = out
                .results
                .iter()
                .map(|v| match v {
                    Val::F64(f) => f.to_bits(),
                    other => panic!("{other:?}"),
                })
                .collect();
            let (s, m) = (c + x, c * x);
            assert_eq!(bits[..2], [s.to_bits(), m.to_bits()], "{c:e}, {x:e}");
            assert_eq!(bits[2], m.to_bits() ^ (1 << 63), "-({c:e} * {x:e})");
        }
    }
}

/// `x / c` with `c = ±2^k` (normal) is compiled as `x * 2^-k`
/// (`Translator::exact_reciprocal`): the same bits as the interpreter's
/// division for every `x`, including NaN payloads, signed zeros,
/// subnormal results, overflow and underflow. Other constants (3.0, a
/// subnormal power of two whose reciprocal overflows, zero, infinity, NaN)
/// stay divisions.
#[test]
fn division_by_a_power_of_two_is_exact() {
    let divisors = [
        2.0,
        0.5,
        -4.0,
        1.0,
        -1.0,
        f64::MAX / (2.0 - f64::EPSILON), // 2^1023
        f64::MIN_POSITIVE,               // 2^-1022
        f64::MIN_POSITIVE / 2.0,         // 2^-1023, subnormal: stays a division
        f64::from_bits(1),               // 2^-1074
        3.0,
        6.0,
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NAN,
    ];
    let xs = [
        0.0,
        -0.0,
        1.0,
        -3.5,
        1e308,
        -1e308,
        f64::MAX,
        f64::MIN_POSITIVE,
        f64::MIN_POSITIVE * 3.0,
        f64::from_bits(1),
        f64::from_bits(3),
        f64::from_bits(0x000f_ffff_ffff_ffff),
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::from_bits(0x7ff8_0000_dead_beef),
        f64::from_bits(0xfff8_0000_0000_0001),
        // A signaling NaN: quieted by the division and the multiplication.
        f64::from_bits(0x7ff0_0000_0000_0001),
        0.1,
        1.0 / 3.0,
    ];
    for c in divisors {
        let mut mb = Mb::new();
        let id = mb.func("@f(x: f64) -> f64", |b, p| {
            let k = b.fconst(c);
            let q = b.fdiv(p[0], k);
            b.ret(&[q]);
        });
        for x in xs {
            // `run` compares every engine and level with the interpreter,
            // bit for bit.
            let got = run_f64(&mb.m, id, &[Val::F64(x)]);
            let want = x / c;
            assert_eq!(got.to_bits(), want.to_bits(), "{x:e} / {c:e}");
        }
    }
}

#[test]
fn constants_keep_their_bits() {
    let mut mb = Mb::new();
    let id = mb.func("@k() -> (f64, f64, f64, i64, bool, bool)", |b, _| {
        let a = b.fconst(-0.0);
        let c = b.fconst(f64::from_bits(0x7ff8_0000_dead_beef));
        let d = b.fconst(f64::MIN_POSITIVE / 4.0);
        let i = b.iconst(i64::MIN);
        let t = b.bconst(true);
        let f = b.bconst(false);
        b.ret(&[a, c, d, i, t, f]);
    });
    let c = jit(&mb.m, id);
    let out = c.call(&[]).unwrap();
    match out.results.as_slice() {
        [Val::F64(a), Val::F64(n), Val::F64(d), i, t, f] => {
            assert_eq!(a.to_bits(), (-0.0f64).to_bits());
            assert_eq!(n.to_bits(), 0x7ff8_0000_dead_beef);
            assert_eq!(*d, f64::MIN_POSITIVE / 4.0);
            assert_eq!(*i, Val::I64(i64::MIN));
            assert_eq!(*t, Val::Bool(true));
            assert_eq!(*f, Val::Bool(false));
        }
        other => panic!("{other:?}"),
    }
    run(&mb.m, id, &[]).unwrap();
}

#[test]
fn booleans_and_select() {
    let mut mb = Mb::new();
    let id = mb.func(
        "@sel(c: bool, x: f64, y: f64, i: i64, j: i64) -> (f64, i64, bool, bool)",
        |b, p| {
            let x = b.select(p[0], p[1], p[2]);
            let i = b.select(p[0], p[3], p[4]);
            let n = b.not(p[0]);
            let nn = b.not(n);
            let bb = b.select(n, p[0], nn);
            b.ret(&[x, i, n, bb]);
        },
    );
    let rest = [Val::F64(1.5), Val::F64(-2.5), Val::I64(7), Val::I64(-8)];
    let rows = [
        (
            true,
            [
                Val::F64(1.5),
                Val::I64(7),
                Val::Bool(false),
                Val::Bool(true),
            ],
        ),
        (
            false,
            [
                Val::F64(-2.5),
                Val::I64(-8),
                Val::Bool(true),
                Val::Bool(false),
            ],
        ),
    ];
    for (c, want) in rows {
        let args = [&[Val::Bool(c)][..], &rest].concat();
        let out = run(&mb.m, id, &args).unwrap();
        assert_eq!(out.results, want, "select on {c}");
        assert_eq!(out.args, args, "args after select on {c}");
    }
}

/// `select c, x, false` and `select c, true, y` of bools are compiled as
/// `band` and `bor` (bools are 0 or 1); with the constant on the other
/// side, or of another type, they stay `select`s. Every combination, on
/// both engines.
#[test]
fn selects_of_bools_with_a_constant() {
    let mut mb = Mb::new();
    let id = mb.func(
        "@sel(c: bool, x: bool) -> (bool, bool, bool, bool)",
        |b, p| {
            let f = b.bconst(false);
            let t = b.bconst(true);
            let and = b.select(p[0], p[1], f);
            let or = b.select(p[0], t, p[1]);
            let other = b.select(p[0], f, p[1]);
            let chain = b.select(and, or, f);
            b.ret(&[and, or, other, chain]);
        },
    );
    for c in [false, true] {
        for x in [false, true] {
            let out = run(&mb.m, id, &[Val::Bool(c), Val::Bool(x)]).unwrap();
            let want = [c && x, c || x, !c && x, c && x];
            let want: Vec<Val> = want.into_iter().map(Val::Bool).collect();
            assert_eq!(out.results, want, "{c} {x}");
        }
    }
}

/// Defines `{prefix}_{cond}(a, b) = cmp(cond, a, b)` for every condition.
fn cmp_funcs(
    mb: &mut Mb,
    prefix: &str,
    ty: &str,
    cmp: fn(&mut FuncBuilder<'_>, CmpCond, Value, Value) -> Value,
) -> Vec<(CmpCond, FuncId)> {
    CmpCond::ALL
        .into_iter()
        .map(|cond| {
            let header = format!("@{prefix}_{cond}(a: {ty}, b: {ty}) -> bool");
            let id = mb.func(&header, |b, p| {
                let c = cmp(b, cond, p[0], p[1]);
                b.ret(&[c]);
            });
            (cond, id)
        })
        .collect()
}

/// Runs each compiled comparison on every pair of `xs` and checks it
/// against `want`, naming the condition and the pair on failure.
fn check_pairs<T: Copy + std::fmt::Display>(
    m: &Module,
    ids: &[(CmpCond, FuncId)],
    xs: &[T],
    val: fn(T) -> Val,
    want: fn(CmpCond, T, T) -> bool,
) {
    for &(cond, id) in ids {
        let c = jit(m, id);
        for &a in xs {
            for &b in xs {
                let out = c.call(&[val(a), val(b)]).unwrap();
                assert_eq!(
                    out.results,
                    vec![Val::Bool(want(cond, a, b))],
                    "{cond} {a} {b}"
                );
            }
        }
    }
}

#[test]
fn fcmp_matches_semantics_including_nan() {
    let mut mb = Mb::new();
    let ids = cmp_funcs(&mut mb, "fcmp", "f64", |b, c, x, y| b.fcmp(c, x, y));
    let xs = [
        f64::NAN,
        -0.0,
        0.0,
        1.0,
        -1.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    check_pairs(&mb.m, &ids, &xs, Val::F64, semantics::fcmp);
    for &(_, id) in &ids {
        run(&mb.m, id, &[Val::F64(f64::NAN), Val::F64(1.0)]).unwrap();
    }
    // Spot checks by hand: NaN compares unequal to everything, -0 == +0.
    let nan = f64::NAN;
    let spot = [
        ("fcmp_eq", nan, nan, false),
        ("fcmp_ne", nan, nan, true),
        ("fcmp_eq", -0.0, 0.0, true),
    ];
    for (name, x, y, want) in spot {
        let id = mb.m.get(name).unwrap();
        let out = run(&mb.m, id, &[Val::F64(x), Val::F64(y)]).unwrap();
        assert_eq!(out.results, vec![Val::Bool(want)], "{name}({x}, {y})");
    }
}

#[test]
fn icmp_is_signed() {
    let mut mb = Mb::new();
    let ids = cmp_funcs(&mut mb, "icmp", "i64", |b, c, x, y| b.icmp(c, x, y));
    let xs = [i64::MIN, -1, 0, 1, i64::MAX];
    check_pairs(&mb.m, &ids, &xs, Val::I64, semantics::icmp);
    let lt = mb.m.get("icmp_lt").unwrap();
    assert_eq!(
        run(&mb.m, lt, &[Val::I64(-1), Val::I64(0)])
            .unwrap()
            .results,
        vec![Val::Bool(true)]
    );
}

#[test]
fn many_results() {
    let mut mb = Mb::new();
    // Returns x, 2x, 3x, 4x, x as i64-ish flags, through a callee.
    let header = "@inner(x: f64) -> (f64, f64, f64, f64, bool, i64)";
    let inner = mb.func(header, |b, p| {
        let two = b.fconst(2.0);
        let three = b.fconst(3.0);
        let four = b.fconst(4.0);
        let a = b.fmul(p[0], two);
        let c = b.fmul(p[0], three);
        let d = b.fmul(p[0], four);
        let zero = b.fconst(0.0);
        let pos = b.fcmp(CmpCond::Gt, p[0], zero);
        let k = b.iconst(-42);
        b.ret(&[p[0], a, c, d, pos, k]);
    });
    let inner_tys = mb.m.func(inner).sig.results.clone();
    let outer = mb.func("@outer(x: f64) -> (f64, f64, f64, bool, i64)", |b, p| {
        let call = b.call(inner, &[p[0]], &inner_tys);
        let r = b.func.dfg.inst_results(call).to_vec();
        // x + 2x + 3x + 4x = 10x, and the results in reverse order.
        let s1 = b.fadd(r[0], r[1]);
        let s2 = b.fadd(s1, r[2]);
        let s3 = b.fadd(s2, r[3]);
        b.ret(&[s3, r[3], r[0], r[4], r[5]]);
    });
    let out = run(&mb.m, outer, &[Val::F64(1.5)]).unwrap();
    assert_eq!(
        out.results,
        vec![
            Val::F64(15.0),
            Val::F64(6.0),
            Val::F64(1.5),
            Val::Bool(true),
            Val::I64(-42)
        ]
    );
    let out = run(&mb.m, inner, &[Val::F64(-1.0)]).unwrap();
    assert_eq!(
        out.results,
        vec![
            Val::F64(-1.0),
            Val::F64(-2.0),
            Val::F64(-3.0),
            Val::F64(-4.0),
            Val::Bool(false),
            Val::I64(-42)
        ]
    );
}

#[test]
fn no_params_no_results() {
    let mut mb = Mb::new();
    let id = mb.func("@nop()", |b, _| {
        b.ret(&[]);
    });
    let out = run(&mb.m, id, &[]).unwrap();
    assert!(out.results.is_empty() && out.args.is_empty());
}
