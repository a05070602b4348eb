//! Array results, primal only (`-> [f64]`, `-> [i64]`, tuples mixing
//! scalars and arrays): through the whole pipeline, the JIT equals the
//! interpreter under every inline setting, bit for bit; the caller owns a
//! result (a parameter or view returned is a copy, writes to it are not
//! seen by the argument); results come back through three levels of calls,
//! recursion, the API and empty arrays; a call returning an array inside a
//! loop does not grow memory; a fault in a callee that returns an array is
//! an ordinary run-time error.
//!
//! The program is here, not in `tests/programs/`, whose files every
//! derivative test differentiates: the AD of array results is not part of
//! these tests.

use crate::support::{every_setting_and_engine, the_same_under, with_inline};
use adze::{Engine, Error, InlineSetting, Session};
use adze_ir::{Outcome, RunError, TrapKind, Val};
use std::slice::from_ref;

const PROGRAM: &str = r#"fn scaled(x: [f64], s: f64) -> [f64] {
    let y = zeros(len(x));
    for i in 0..len(x) { y[i] = s * x[i]; }
    y
}

fn ident(x: [f64]) -> [f64] { x }

fn tail(x: [f64]) -> [f64] { x[1..] }

fn pair(x: [f64]) -> (f64, [f64]) {
    let y = scaled(x, 2.0);
    (y[0], y)
}

fn twice(x: [f64]) -> ([f64], [f64]) {
    let y = scaled(x, 3.0);
    return (y, y);
}

fn doubled(x: [f64]) -> [f64] { scaled(x, 2.0) }

fn forwarded(x: [f64]) -> (f64, [f64]) { pair(x) }

fn direct(x: [f64]) -> (f64, [f64], [f64]) {
    return (1.0, scaled(x, 1.0), doubled(x));
}

fn split(x: [f64], k: i64) -> ([f64], f64, [f64]) {
    var s = 0.0;
    for i in 0..len(x) { s = s + x[i]; }
    (x[0..k], s, x[k..])
}

fn squares(n: i64) -> [i64] {
    let v = zeros_i64(n);
    for i in 0..n { v[i] = i * i; }
    v
}

fn index_pair(n: i64) -> (i64, [i64], [f64]) {
    let k = squares(n);
    let f = zeros(n);
    for i in 0..n { f[i] = f64(k[i]) + 0.5; }
    (n, k, f)
}

fn int_tail(k: [i64]) -> [i64] { k[1..] }

fn empty() -> [f64] {
    let e = zeros(0);
    e
}

fn empty_view(x: [f64]) -> [f64] { x[0..0] }

fn level1(x: [f64]) -> [f64] {
    let y = scaled(x, 2.0);
    y[0] = y[0] + 1.0;
    y
}

fn level2(x: [f64]) -> [f64] {
    let y = level1(x);
    for i in 0..len(y) { y[i] = y[i] * y[i]; }
    y
}

fn level3(x: [f64]) -> (f64, [f64]) {
    let y = level2(x);
    let z = level2(y[1..]);
    (y[0], z)
}

fn ramp(n: i64) -> [f64] {
    let y = zeros(n);
    if n == 0 { return y; }
    let r = ramp(n - 1);
    for i in 0..n - 1 { y[i] = r[i]; }
    y[n - 1] = f64(n - 1);
    y
}

fn down(n: i64) -> [f64] {
    if n == 0 {
        let e = zeros(1);
        return e;
    }
    let r = down(n - 1);
    r[0] = r[0] + f64(n);
    r
}

fn churn(x: [f64], iters: i64) -> f64 {
    var s = 0.0;
    for k in 0..iters {
        let y = scaled(x, f64(k));
        let (a, z) = pair(y);
        let (p, q) = twice(z[1..]);
        p[0] = 0.0;
        s = s + a + z[len(z) - 1] + y[0] + q[0] - p[0];
    }
    s
}

fn discard(x: [f64], iters: i64) -> f64 {
    var k = 0;
    while k < iters {
        scaled(x, 1.0);
        let v = squares(len(x));
        k = k + 1 + v[0];
    }
    x[0]
}

fn big(n: i64) -> [f64] {
    let y = zeros(n);
    y[n - 1] = 1.0;
    y
}

fn loop_big(n: i64, iters: i64) -> f64 {
    var s = 0.0;
    for k in 0..iters {
        let y = big(n);
        s = s + y[n - 1];
    }
    s
}

fn copies_are_copies(x: mut [f64]) -> f64 {
    let y = ident(x);
    y[0] = 100.0;
    let (p, q) = twice(x);
    p[0] = -1.0;
    x[1] = 7.0;
    x[0] + y[0] + q[0] + p[0] + y[1]
}

fn picky(x: [f64], k: i64) -> [f64] {
    let y = zeros(len(x));
    y[k] = x[k];
    y
}

fn use_picky(x: [f64], k: i64) -> f64 {
    let y = picky(x, k);
    y[0]
}

fn picky_loop(x: [f64], iters: i64) -> f64 {
    var s = 0.0;
    for k in 0..iters {
        let y = picky(x, k);
        s = s + y[k];
    }
    s
}

fn small() -> [f64] {
    let y = zeros(3);
    y[0] = 1.0;
    y[2] = 3.0;
    y[1] = y[0] + y[2];
    y
}

fn small_pair(n: i64) -> (f64, [f64]) {
    let y = zeros(2);
    for i in 0..n { y[0] = y[0] + 1.0; }
    y[1] = 8.0;
    (y[0], y)
}

fn use_small() -> f64 {
    let a = small();
    let (s, b) = small_pair(3);
    a[0] + a[1] + a[2] + s + b[0] + b[1]
}
"#;

fn session() -> Session {
    Session::from_source("array_results.adz", PROGRAM).unwrap_or_else(|e| panic!("{e}"))
}

fn arr(xs: &[f64]) -> Val {
    Val::Array(xs.to_vec())
}

fn iarr(xs: &[i64]) -> Val {
    Val::IArray(xs.to_vec())
}

/// `func` on `args` under every inline setting on both engines: the one
/// outcome they all give.
#[track_caller]
fn run(s: &Session, func: &str, args: &[Val]) -> Outcome {
    the_same_under(s, &every_setting_and_engine(), func, args).unwrap_or_else(|e| panic!("{e}"))
}

/// `func` on `args` gives `results` everywhere (and leaves the arguments
/// as they were).
#[track_caller]
fn check(s: &Session, func: &str, args: &[Val], results: &[Val]) {
    let out = run(s, func, args);
    let want = Outcome {
        results: results.to_vec(),
        args: args.to_vec(),
    };
    assert!(
        out.bit_eq(&want),
        "{func}({args:?}): got {out:?}, want {want:?}"
    );
}

#[test]
fn moves_copies_and_tuples_are_the_same_everywhere() {
    let s = session();
    let x = arr(&[1.0, -2.0, 3.5]);
    check(
        &s,
        "scaled",
        &[x.clone(), Val::F64(2.0)],
        &[arr(&[2.0, -4.0, 7.0])],
    );
    // A parameter and a view: copied.
    check(&s, "ident", from_ref(&x), from_ref(&x));
    check(&s, "tail", from_ref(&x), &[arr(&[-2.0, 3.5])]);
    check(
        &s,
        "pair",
        from_ref(&x),
        &[Val::F64(2.0), arr(&[2.0, -4.0, 7.0])],
    );
    // A call's results returned as they are: moved.
    check(&s, "doubled", from_ref(&x), &[arr(&[2.0, -4.0, 7.0])]);
    check(
        &s,
        "forwarded",
        from_ref(&x),
        &[Val::F64(2.0), arr(&[2.0, -4.0, 7.0])],
    );
    check(
        &s,
        "direct",
        from_ref(&x),
        &[Val::F64(1.0), x.clone(), arr(&[2.0, -4.0, 7.0])],
    );
    // The same array twice: the second is a copy.
    check(
        &s,
        "twice",
        &[arr(&[1.0, 2.0])],
        &[arr(&[3.0, 6.0]), arr(&[3.0, 6.0])],
    );
    // A tuple of two arrays and a scalar, both views of a parameter.
    let x4 = arr(&[1.0, 2.0, 3.0, 4.0]);
    for k in 0..=4 {
        let (lo, hi) = [1.0, 2.0, 3.0, 4.0].split_at(k as usize);
        check(
            &s,
            "split",
            &[x4.clone(), Val::I64(k)],
            &[arr(lo), Val::F64(10.0), arr(hi)],
        );
    }
    // Special values go through unchanged (signed zero, NaN payload).
    let odd = arr(&[-0.0, f64::from_bits(0x7ff8_0000_dead_beef), f64::INFINITY]);
    check(&s, "ident", from_ref(&odd), from_ref(&odd));
}

#[test]
fn writes_to_a_returned_copy_are_not_seen_by_the_argument() {
    let s = session();
    let out = run(&s, "copies_are_copies", &[arr(&[1.0, 2.0, 3.0])]);
    // y = copy of x; y[0] = 100; (p, q) = twice(x) = (3x, 3x); p[0] = -1;
    // x[1] = 7: 1 + 100 + 3 + -1 + 2.
    assert!(out.results[0].bit_eq(&Val::F64(105.0)), "{out:?}");
    assert!(out.args[0].bit_eq(&arr(&[1.0, 7.0, 3.0])), "{out:?}");
}

#[test]
fn integer_and_empty_array_results() {
    let s = session();
    check(&s, "squares", &[Val::I64(5)], &[iarr(&[0, 1, 4, 9, 16])]);
    check(&s, "squares", &[Val::I64(0)], &[iarr(&[])]);
    check(
        &s,
        "index_pair",
        &[Val::I64(3)],
        &[Val::I64(3), iarr(&[0, 1, 4]), arr(&[0.5, 1.5, 4.5])],
    );
    check(
        &s,
        "int_tail",
        &[iarr(&[i64::MIN, -1, i64::MAX])],
        &[iarr(&[-1, i64::MAX])],
    );
    check(&s, "int_tail", &[iarr(&[7])], &[iarr(&[])]);
    check(&s, "empty", &[], &[arr(&[])]);
    check(&s, "empty_view", &[arr(&[1.0, 2.0])], &[arr(&[])]);
    check(&s, "empty_view", &[arr(&[])], &[arr(&[])]);
    check(&s, "scaled", &[arr(&[]), Val::F64(2.0)], &[arr(&[])]);
    check(
        &s,
        "index_pair",
        &[Val::I64(0)],
        &[Val::I64(0), iarr(&[]), arr(&[])],
    );
}

/// `level1`, `level2`, `level3` of the program.
fn levels(x: &[f64]) -> (f64, Vec<f64>) {
    let level1 = |x: &[f64]| {
        let mut y: Vec<f64> = x.iter().map(|&v| 2.0 * v).collect();
        y[0] += 1.0;
        y
    };
    let level2 = |x: &[f64]| level1(x).iter().map(|&v| v * v).collect::<Vec<f64>>();
    let y = level2(x);
    (y[0], level2(&y[1..]))
}

#[test]
fn nested_calls_return_arrays_through_three_levels() {
    let s = session();
    for x in [
        vec![1.0, 2.0, 3.0],
        vec![0.5, -1.25, 2.0, 0.1, 3.7],
        vec![-0.0, 1e-300],
        vec![3.0, 1.0],
    ] {
        let (y0, z) = levels(&x);
        check(&s, "level3", &[arr(&x)], &[Val::F64(y0), Val::Array(z)]);
    }
    // One element: `level3` passes `y[1..]`, empty, whose copy `level1`
    // cannot index.
    for inline in InlineSetting::ALL {
        let e = fault(&s, inline, "level3", &[arr(&[3.0])]);
        assert!(
            matches!(
                e.kind,
                TrapKind::IndexOutOfBounds {
                    index: 0,
                    len: 0,
                    ..
                }
            ),
            "{inline:?}: {e:?}"
        );
    }
}

#[test]
fn recursion_returns_arrays() {
    let s = session();
    for n in [0, 1, 2, 7, 50] {
        let want: Vec<f64> = (0..n).map(|i| i as f64).collect();
        check(&s, "ramp", &[Val::I64(n)], &[Val::Array(want)]);
        // The array made at the bottom moves up through every frame.
        check(
            &s,
            "down",
            &[Val::I64(n)],
            &[arr(&[(n * (n + 1) / 2) as f64])],
        );
    }
    // Deep: 1000 frames, each holding two arrays while it runs.
    for engine in [Engine::Interp, Engine::Jit] {
        let out = s.run("ramp", &[Val::I64(1000)], engine).unwrap();
        let want: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        assert!(out.results[0].bit_eq(&Val::Array(want)), "{engine:?}");
        let out = s.run("down", &[Val::I64(1000)], engine).unwrap();
        assert!(out.results[0].bit_eq(&arr(&[500_500.0])), "{engine:?}");
    }
}

/// `churn` of the program, operation by operation.
fn churn(x: &[f64], iters: i64) -> f64 {
    let mut s = 0.0;
    for k in 0..iters {
        let y: Vec<f64> = x.iter().map(|&v| k as f64 * v).collect();
        let z: Vec<f64> = y.iter().map(|&v| 2.0 * v).collect();
        let a = z[0];
        let q0 = 3.0 * z[1];
        let p0 = 0.0;
        s = s + a + z[z.len() - 1] + y[0] + q0 - p0;
    }
    s
}

#[test]
fn calls_returning_arrays_in_loops() {
    let s = session();
    let x = [0.5, -1.25, 2.0];
    for iters in [0, 1, 5, 100] {
        check(
            &s,
            "churn",
            &[arr(&x), Val::I64(iters)],
            &[Val::F64(churn(&x, iters))],
        );
        check(&s, "discard", &[arr(&x), Val::I64(iters)], &[Val::F64(0.5)]);
        check(
            &s,
            "loop_big",
            &[Val::I64(3), Val::I64(iters)],
            &[Val::F64(iters as f64)],
        );
    }
}

#[test]
fn the_compile_once_api_returns_arrays() {
    let program = adze::Program::from_source("array_results.adz", PROGRAM).unwrap();
    let f = program.function("index_pair").unwrap();
    let out = f.call(&mut [adze::Arg::I64(4)]).unwrap();
    assert!(Outcome {
        results: out,
        args: vec![]
    }
    .bit_eq(&Outcome {
        results: vec![Val::I64(4), iarr(&[0, 1, 4, 9]), arr(&[0.5, 1.5, 4.5, 9.5])],
        args: vec![]
    }));
    // Called again on the same compiled code: fresh arrays, same results.
    let f = program.function("split").unwrap();
    for _ in 0..3 {
        let x = [1.0, 2.0, 3.0];
        let out = f
            .call(&mut [adze::Arg::Array(&x), adze::Arg::I64(1)])
            .unwrap();
        assert_eq!(out, vec![arr(&[1.0]), Val::F64(6.0), arr(&[2.0, 3.0])]);
    }
}

/// The largest number of arrays alive at once when the JIT runs `func` of
/// `s` on `args` (under `s`'s inline setting), checking the results.
fn jit_peak(s: &Session, func: &str, args: &[Val], results: &[Val]) -> usize {
    let module = s.prepare(func).unwrap();
    let id = adze::pipeline::function_by_name(&module, func).unwrap();
    let compiled = s.jit(&module, id).unwrap();
    let (out, peak) = compiled.call_with_stats(args);
    let out = out.unwrap_or_else(|e| panic!("{func}({args:?}): {e}"));
    assert!(
        out.results.len() == results.len()
            && out.results.iter().zip(results).all(|(a, b)| a.bit_eq(b)),
        "{func}({args:?}): {:?}, want {results:?}",
        out.results
    );
    peak
}

const X: [f64; 3] = [0.5, -1.25, 2.0];

/// A function of the program whose memory must not grow with its trip
/// count: its name, its arguments and its result for a trip count.
type Looping = (&'static str, fn(i64) -> Vec<Val>, fn(i64) -> f64);

const LOOPING: [Looping; 3] = [
    ("churn", |n| vec![arr(&X), Val::I64(n)], |n| churn(&X, n)),
    ("discard", |n| vec![arr(&X), Val::I64(n)], |_| 0.5),
    (
        "loop_big",
        |n| vec![Val::I64(1000), Val::I64(n)],
        |n| n as f64,
    ),
];

#[test]
fn a_call_returning_an_array_in_a_loop_does_not_grow_memory_on_the_jit() {
    // As many arrays alive at once after 10^5 trips as after 3, under
    // every inline setting: the call site's cell is reused, as a `zeros`
    // in a loop reuses its own.
    let base = session();
    for inline in InlineSetting::ALL {
        let s = with_inline(&base, inline);
        for (func, args, result) in LOOPING {
            let few = jit_peak(&s, func, &args(3), &[Val::F64(result(3))]);
            let many = jit_peak(&s, func, &args(100_000), &[Val::F64(result(100_000))]);
            assert_eq!(
                few, many,
                "{func} under inline {inline:?}: {few} arrays alive at once after 3 trips, \
                 {many} after 10^5"
            );
            assert!(few <= 6, "{func} under inline {inline:?}: {few} arrays");
        }
    }
}

#[test]
fn a_call_returning_an_array_in_a_loop_does_not_grow_memory_on_either_engine() {
    // The interpreter does not count its arrays: under a 1 GB address-space
    // limit, 10^5 calls (not inlined) each returning a fresh array of 4000
    // elements, 3.2 GB if each stayed alive.
    let file = std::env::temp_dir().join(format!("adze-array-results-{}.adz", std::process::id()));
    std::fs::write(&file, PROGRAM).unwrap();
    for engine in ["interp", "jit"] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -v 1000000 && exec '{}' run '{}' --inline none --engine {engine} \
                 --fn loop_big --arg n=4000 --arg iters=100000",
                env!("CARGO_BIN_EXE_adze"),
                file.display()
            ))
            .output()
            .expect("sh runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{engine}: {err}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "100000.0\n",
            "{engine}"
        );
    }
    let _ = std::fs::remove_file(&file);
}

/// `func` on `args` fails on both engines under `inline` with the same
/// error, which is returned.
fn fault(base: &Session, inline: InlineSetting, func: &str, args: &[Val]) -> RunError {
    let s = with_inline(base, inline);
    let errs: Vec<RunError> = [Engine::Interp, Engine::Jit]
        .into_iter()
        .map(|engine| match s.run(func, args, engine) {
            Err(Error::Run(e)) => e,
            other => panic!("{func} on {engine:?} under {inline:?}: {other:?}"),
        })
        .collect();
    assert_eq!(
        errs[0], errs[1],
        "{func} under {inline:?}: engines disagree"
    );
    errs.into_iter().next().unwrap()
}

#[test]
fn a_fault_in_a_callee_that_returns_an_array_is_reported() {
    let base = session();
    let x = arr(&[1.0, 2.0, 3.0]);
    let oob = |array: &str, index, len| TrapKind::IndexOutOfBounds {
        array: array.into(),
        index,
        len,
    };
    let picky_line = PROGRAM
        .lines()
        .position(|l| l == "    y[k] = x[k];")
        .unwrap() as u32
        + 1;
    for inline in InlineSetting::ALL {
        // At once, and on the fourth trip of a loop whose first three
        // calls returned arrays.
        for (func, args) in [
            ("use_picky", vec![x.clone(), Val::I64(3)]),
            ("picky_loop", vec![x.clone(), Val::I64(5)]),
        ] {
            let e = fault(&base, inline, func, &args);
            assert_eq!(e.kind, oob("x", 3, 3), "{func} under {inline:?}");
            // `y[k] = x[k]` in `picky`, inlined or not.
            let loc = e.loc.as_deref().expect("a location");
            assert_eq!(
                (loc.line, loc.col),
                (picky_line, 12),
                "{func} under {inline:?}"
            );
            let named = e.func == "picky" || e.inlined.first().is_some_and(|f| f == "picky");
            assert!(named, "{func} under {inline:?}: {e:?}");
            let message = e.to_string();
            assert!(message.contains("`picky`"), "{message}");
        }
        // A view out of range in a callee returning views' copies.
        let e = fault(&base, inline, "split", &[x.clone(), Val::I64(4)]);
        assert!(
            matches!(e.kind, TrapKind::SliceEndOutOfBounds { .. }),
            "{inline:?}: {e:?}"
        );
    }
    // The same compiled code runs normally after a fault.
    let module = base.prepare("picky_loop").unwrap();
    let id = adze::pipeline::function_by_name(&module, "picky_loop").unwrap();
    let compiled = base.jit(&module, id).unwrap();
    assert!(compiled.call(&[x.clone(), Val::I64(5)]).is_err());
    let out = compiled.call(&[x.clone(), Val::I64(3)]).unwrap();
    assert!(out.results[0].bit_eq(&Val::F64(6.0)), "{out:?}");
}

/// A bug these tests found: the optimizer's memory pass
/// (`crates/opt/src/mem.rs`, the arm for `return` in `Pass::block`)
/// removed the stores to a `zeros` array still pending at a `return` when
/// they were provably in bounds (a constant index below a constant
/// length), as stores nobody can see — but the array may be what is
/// returned. `small()` gave `[0.0, 0.0, 0.0]` (with `--no-opt`, `[1.0,
/// 4.0, 3.0]`), and `use_small()` a wrong value when not inlined.
#[test]
fn in_bounds_stores_just_before_returning_a_local_array_are_kept() {
    let s = session();
    check(&s, "small", &[], &[arr(&[1.0, 4.0, 3.0])]);
    check(
        &s,
        "small_pair",
        &[Val::I64(3)],
        &[Val::F64(3.0), arr(&[3.0, 8.0])],
    );
    check(&s, "use_small", &[], &[Val::F64(22.0)]);
}
