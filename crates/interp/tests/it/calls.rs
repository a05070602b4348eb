//! Calls: recursion, mutual recursion, multiple results, deep recursion on
//! an explicit frame stack, and the by-name entry points.

use crate::util::*;
use adze_interp::{run_by_name, Interpreter};
use adze_ir::{CmpCond, FuncBuilder, FuncId, Module, Opcode, RunError, TrapKind, Type, Val, Value};

/// `@name(n: i64) -> i64 = if n <cond> k { k } else { step(n, name(n - 1),
/// 1) }`: a recursion down by one, as factorial and count are.
fn down_by_one(
    m: &mut Module,
    name: &str,
    (cond, k): (CmpCond, i64),
    step: fn(&mut FuncBuilder, Value, Value, Value) -> Value,
) -> FuncId {
    let id = declare(m, &format!("@{name}(n: i64) -> i64"));
    let rec = |fb: &mut FuncBuilder, n| {
        let one = fb.iconst(1);
        let n1 = fb.isub(n, one);
        let r = call1(fb, id, &[n1], Type::I64);
        step(fb, n, r, one)
    };
    define_split(m, id, (cond, k), |_, _, k| k, rec);
    id
}

/// `fact(n) = if n <= 1 { 1 } else { n * fact(n - 1) }`
fn factorial(m: &mut Module) -> FuncId {
    down_by_one(m, "fact", (CmpCond::Le, 1), |fb, n, r, _| fb.imul(n, r))
}

#[test]
fn recursive_factorial() {
    let mut m = Module::new();
    let id = factorial(&mut m);
    for (n, want) in [(0, 1), (5, 120), (20, 2_432_902_008_176_640_000)] {
        assert_eq!(run_i64(&m, id, &[Val::I64(n)]), want, "fact({n})");
    }
}

#[test]
fn recursive_fibonacci() {
    // fib(n) = if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
    let mut m = Module::new();
    let id = declare(&mut m, "@fib(n: i64) -> i64");
    define_split(
        &mut m,
        id,
        (CmpCond::Lt, 2),
        |_, n, _| n,
        |fb, n| {
            let one = fb.iconst(1);
            let two = fb.iconst(2);
            let n1 = fb.isub(n, one);
            let n2 = fb.isub(n, two);
            let r1 = call1(fb, id, &[n1], Type::I64);
            let r2 = call1(fb, id, &[n2], Type::I64);
            fb.iadd(r1, r2)
        },
    );
    for (n, want) in [(1, 1), (10, 55), (20, 6765)] {
        assert_eq!(run_i64(&m, id, &[Val::I64(n)]), want, "fib({n})");
    }
}

/// `is_even(n) = n == 0 || is_odd(n - 1)`, `is_odd(n) = n != 0 && is_even(n - 1)`.
fn even_odd(m: &mut Module) -> (FuncId, FuncId) {
    let even = declare(m, "@is_even(n: i64) -> bool");
    let odd = declare(m, "@is_odd(n: i64) -> bool");
    for (id, other, at_zero) in [(even, odd, true), (odd, even, false)] {
        define_split(
            m,
            id,
            (CmpCond::Eq, 0),
            |fb, _, _| fb.bconst(at_zero),
            |fb, n| {
                let one = fb.iconst(1);
                let n1 = fb.isub(n, one);
                call1(fb, other, &[n1], Type::Bool)
            },
        );
    }
    (even, odd)
}

#[test]
fn mutual_recursion() {
    let mut m = Module::new();
    let (even, odd) = even_odd(&mut m);
    let rows = [
        ("is_even", even, 10, true),
        ("is_even", even, 7, false),
        ("is_odd", odd, 7, true),
        ("is_odd", odd, 0, false),
    ];
    for (name, id, n, want) in rows {
        assert_eq!(run_bool(&m, id, &[Val::I64(n)]), want, "{name}({n})");
    }
}

/// A depth limit, the callee's name and id, its argument, and its result or
/// the function the limit stops.
type DepthRow = (u32, &'static str, FuncId, i64, Result<bool, &'static str>);

#[test]
fn call_depth_limit_is_exact() {
    // is_even(n) nests n + 1 calls: 999 reaches depth 1000, the limit here.
    let mut m = Module::new();
    let (even, _) = even_odd(&mut m);
    let odd = m.get("is_odd").unwrap();
    let rows: [DepthRow; 6] = [
        // is_even(n) nests n + 1 calls: 999 reaches depth 1000, the limit.
        (1000, "is_even", even, 999, Ok(false)),
        // 1000 would enter a 1001st function: the one at odd depth, is_even (n = 0).
        (1000, "is_even", even, 1000, Err("is_even")),
        // From is_odd, depth 1001 is is_odd again.
        (1000, "is_odd", odd, 5000, Err("is_odd")),
        // A limit of 1 allows the outermost call only; 0 not even that.
        (1, "is_even", even, 0, Ok(true)),
        (1, "is_even", even, 1, Err("is_odd")),
        (0, "is_even", even, 0, Err("is_even")),
    ];
    for (limit, name, id, n, want) in rows {
        let got = Interpreter::with_limits(&m, depth_limit(limit))
            .call(id, &[Val::I64(n)])
            .map(|out| out.results);
        let want = want
            .map(|b| vec![Val::Bool(b)])
            .map_err(|func| RunError::new(func, TrapKind::CallDepthExceeded { limit }));
        assert_eq!(got, want, "{name}({n}) at depth limit {limit}");
    }
    // The default limit is 100 000: only a real recursion reaches it.
    assert!(!run_bool(&m, even, &[Val::I64(99_999)]));
}

/// `count(n) = if n == 0 { 0 } else { 1 + count(n - 1) }`
pub fn count(m: &mut Module) -> FuncId {
    down_by_one(m, "count", (CmpCond::Eq, 0), |fb, _, r, one| {
        fb.iadd(r, one)
    })
}

#[test]
fn deep_recursion_does_not_use_the_native_stack() {
    let mut m = Module::new();
    let id = count(&mut m);
    let limits = depth_limit(200_000);
    // On a deliberately small (2 MiB) thread stack.
    let got = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || Interpreter::with_limits(&m, limits).call(id, &[Val::I64(100_000)]))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(got.unwrap().results, vec![Val::I64(100_000)]);
}

#[test]
fn multiple_results() {
    let mut m = Module::new();
    let divmod = func(&mut m, "@divmod(a: i64, b: i64) -> (i64, i64)", |fb, p| {
        let q = fb.binary(Opcode::Idiv, p[0], p[1]);
        let r = fb.binary(Opcode::Irem, p[0], p[1]);
        fb.ret(&[q, r]);
    });
    assert_eq!(
        results(&m, divmod, &[Val::I64(17), Val::I64(5)]),
        vec![Val::I64(3), Val::I64(2)]
    );
    // q * 10 + r through a call with two results.
    let combine = func(&mut m, "@combine(a: i64, b: i64) -> i64", |fb, p| {
        let call = fb.call(divmod, &[p[0], p[1]], &[Type::I64, Type::I64]);
        let rs = fb.func.dfg.inst_results(call).to_vec();
        let ten = fb.iconst(10);
        let t = fb.imul(rs[0], ten);
        let s = fb.iadd(t, rs[1]);
        fb.ret(&[s]);
    });
    assert_eq!(run_i64(&m, combine, &[Val::I64(17), Val::I64(5)]), 32);
    // A function with no results.
    let nothing = func(&mut m, "@nothing(x: f64)", |fb, _| {
        fb.ret(&[]);
    });
    let out = run(&m, nothing, &[Val::F64(1.0)]);
    assert_eq!(out.results, vec![]);
    assert_eq!(out.args, vec![Val::F64(1.0)]);
}

#[test]
fn by_name_entry_points() {
    let mut m = Module::new();
    factorial(&mut m);
    assert_eq!(
        run_by_name(&m, "fact", &[Val::I64(4)]).unwrap().results,
        vec![Val::I64(24)]
    );
    let interp = Interpreter::new(&m);
    assert_eq!(
        interp.call_by_name("fact", &[Val::I64(3)]).unwrap().results,
        vec![Val::I64(6)]
    );
    let e = run_by_name(&m, "nope", &[]).unwrap_err();
    assert_eq!(e.func, "nope");
    assert!(matches!(e.kind, TrapKind::Unsupported(_)));
    // The interpreter keeps no state between calls.
    assert_eq!(
        interp.call_by_name("fact", &[Val::I64(3)]).unwrap().results,
        vec![Val::I64(6)]
    );
}
