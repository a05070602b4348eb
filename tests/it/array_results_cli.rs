//! Functions that return arrays (`-> [f64]`, `-> [i64]`, tuples mixing
//! scalars and arrays) as a user sees them: `adze run`'s text and `--json`
//! output, `--save result=..` (`result.0`, `result.1`, .. for a tuple), and
//! the compile-once Rust API, whose `Function::call` returns them as
//! `Val::Array` / `Val::IArray`. The Python package's side is in
//! `crates/python/tests/test_adze.py`.

use crate::support::{adze, every_setting_and_engine, the_same_under, Output};
use adze::adze_ir::{Type, Val};
use adze::npy::{self, Elements};
use adze::{Arg, Engine, InlineSetting, Program, Session};
use std::path::{Path, PathBuf};

const SRC: &str = "
fn scaled(x: [f64], s: f64) -> [f64] {
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
fn squares(n: i64) -> [i64] {
    let v = zeros_i64(n);
    for i in 0..n { v[i] = i * i; }
    v
}
fn bump(a: mut [f64]) -> (i64, [i64], bool, [f64]) {
    let old = scaled(a, 1.0);
    for i in 0..len(a) { a[i] = a[i] + 1.0; }
    (len(a), squares(len(a)), len(a) > 2, old)
}
fn total(x: [f64]) -> f64 {
    var s = 0.0;
    for k in 0..100 {
        let y = scaled(x, f64(k));
        let (a, z) = pair(y[1..]);
        s = s + a + z[0] + y[0];
    }
    let w = ident(x[1..]);
    let (p, q) = twice(w);
    p[0] = 100.0;
    s + p[0] + q[0]
}
fn nothing(x: [f64]) { }
fn named(result: [f64]) -> [f64] { scaled(result, 2.0) }
";

/// A fresh directory for one test's files, with the program in it as
/// `results.adz`; the directory and the program's path.
fn setup(test: &str) -> (PathBuf, String) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("array_results-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let program = dir.join("results.adz");
    std::fs::write(&program, SRC).unwrap();
    (dir, program.display().to_string())
}

/// `adze run PROGRAM --fn FUNC ARGS..`.
fn run(program: &str, func: &str, args: &[&str]) -> Output {
    let mut all = vec!["run", program, "--fn", func];
    all.extend_from_slice(args);
    adze(&all)
}

/// A failure: exit 1, nothing on stdout, one line on stderr with `needle`.
#[track_caller]
fn fails_with(out: Output, needle: &str) {
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert_eq!(out.stdout, "");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.starts_with("error: "), "{}", out.stderr);
    assert!(out.stderr.contains(needle), "{} lacks {needle}", out.stderr);
}

/// (function, arguments, text output, `--json` output) of every result
/// shape.
const SHAPES: &[(&str, &[&str], &str, &str)] = &[
    (
        "scaled",
        &["--arg", "x=[1, 2, 3]", "--arg", "s=2"],
        "[2.0, 4.0, 6.0]\n",
        "{\"result\":[2.0,4.0,6.0],\"arrays\":{}}\n",
    ),
    // Non-finite elements, as everywhere: NaN, inf, -inf.
    (
        "scaled",
        &["--arg", "x=[1, nan, inf, -0.0]", "--arg", "s=-1"],
        "[-1.0, NaN, -inf, 0.0]\n",
        "{\"result\":[-1.0,\"NaN\",\"-inf\",0.0],\"arrays\":{}}\n",
    ),
    (
        "scaled",
        &["--arg", "x=[]", "--arg", "s=2"],
        "[]\n",
        "{\"result\":[],\"arrays\":{}}\n",
    ),
    (
        "ident",
        &["--arg", "x=[0.1, -inf]"],
        "[0.1, -inf]\n",
        "{\"result\":[0.1,\"-inf\"],\"arrays\":{}}\n",
    ),
    (
        "tail",
        &["--arg", "x=[1, 2, 3]"],
        "[2.0, 3.0]\n",
        "{\"result\":[2.0,3.0],\"arrays\":{}}\n",
    ),
    (
        "pair",
        &["--arg", "x=[1, 2, 3]"],
        "(2.0, [2.0, 4.0, 6.0])\n",
        "{\"result\":[2.0,[2.0,4.0,6.0]],\"arrays\":{}}\n",
    ),
    (
        "twice",
        &["--arg", "x=[1, nan]"],
        "([3.0, NaN], [3.0, NaN])\n",
        "{\"result\":[[3.0,\"NaN\"],[3.0,\"NaN\"]],\"arrays\":{}}\n",
    ),
    (
        "squares",
        &["--arg", "n=4"],
        "[0, 1, 4, 9]\n",
        "{\"result\":[0,1,4,9],\"arrays\":{}}\n",
    ),
    (
        "squares",
        &["--arg", "n=0"],
        "[]\n",
        "{\"result\":[],\"arrays\":{}}\n",
    ),
    // A tuple of every kind, and a `mut` array beside it.
    (
        "bump",
        &["--arg", "a=[1, 2, 3]"],
        "(3, [0, 1, 4], true, [1.0, 2.0, 3.0])\na = [2.0, 3.0, 4.0]\n",
        "{\"result\":[3,[0,1,4],true,[1.0,2.0,3.0]],\"arrays\":{\"a\":[2.0,3.0,4.0]}}\n",
    ),
    (
        "bump",
        &["--arg", "a=[]"],
        "(0, [], false, [])\na = []\n",
        "{\"result\":[0,[],false,[]],\"arrays\":{\"a\":[]}}\n",
    ),
    // Array results used inside a function (in a loop, of a slice).
    (
        "total",
        &["--arg", "x=[1, 2, 3]"],
        "44656.0\n",
        "{\"result\":44656.0,\"arrays\":{}}\n",
    ),
];

#[test]
fn run_prints_array_results_of_every_shape() {
    let (_dir, program) = setup("print");
    for &(func, args, text, json) in SHAPES {
        for inline in ["none", "early", "late", "all"] {
            for engine in ["jit", "interp"] {
                let mut args = args.to_vec();
                args.extend(["--inline", inline, "--engine", engine]);
                run(&program, func, &args).assert_prints(text);
                args.push("--json");
                run(&program, func, &args).assert_prints(json);
            }
        }
        let mut args = args.to_vec();
        args.push("--no-opt");
        run(&program, func, &args).assert_prints(text);
    }
}

#[test]
fn json_output_of_array_results_reads_back_as_arguments() {
    let (dir, program) = setup("json");
    let out = run(&program, "pair", &["--arg", "x=[0.5, nan, -inf]", "--json"]);
    let value: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let part = value["result"][1].to_string();
    assert_eq!(part, "[1.0,\"NaN\",\"-inf\"]");
    let file = dir.join("part.json");
    std::fs::write(&file, &part).unwrap();
    run(
        &program,
        "ident",
        &["--arg", &format!("x=@{}", file.display())],
    )
    .assert_prints("[1.0, NaN, -inf]\n");
}

#[test]
fn save_writes_array_results() {
    let (dir, program) = setup("save");
    let path = |name: &str| dir.join(name).display().to_string();
    let read = |name: &str| npy::read(&std::fs::read(dir.join(name)).unwrap()).unwrap();

    // The only result is `result` (and `result.0`); every format.
    let out = run(
        &program,
        "scaled",
        &[
            "--arg",
            "x=[1, nan, 0.1]",
            "--arg",
            "s=3",
            "--save",
            &format!("result={}", path("r.npy")),
            "--save",
            &format!("result.0={}", path("r.json")),
            "--save",
            &format!("result={}", path("r.txt")),
        ],
    );
    out.assert_prints("[3.0, NaN, 0.30000000000000004]\n");
    let saved = read("r.npy");
    assert_eq!(saved.shape, vec![3]);
    match saved.elements {
        Elements::F64(xs) => {
            let bits: Vec<u64> = xs.iter().map(|x| x.to_bits()).collect();
            let want: Vec<u64> = [3.0, f64::NAN, 0.30000000000000004]
                .iter()
                .map(|x: &f64| x.to_bits())
                .collect();
            assert_eq!(bits, want);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("r.json")).unwrap(),
        "[3.0, \"NaN\", 0.30000000000000004]\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("r.txt")).unwrap(),
        "3.0\nNaN\n0.30000000000000004\n"
    );
    // Each reads back as the same value.
    for name in ["r.npy", "r.json", "r.txt"] {
        run(&program, "ident", &["--arg", &format!("x=@{}", path(name))])
            .assert_prints("[3.0, NaN, 0.30000000000000004]\n");
    }

    // The parts of a tuple, i64 arrays as int64, an empty array, on both
    // engines; a `mut` argument beside them.
    for engine in ["jit", "interp"] {
        let out = run(
            &program,
            "bump",
            &[
                "--engine",
                engine,
                "--arg",
                "a=[1, 2, 3]",
                "--save",
                &format!("result.1={}", path("sq.npy")),
                "--save",
                &format!("result.3={}", path("old.npy")),
                "--save",
                &format!("a={}", path("a.npy")),
                "--save",
                &format!("result.1={}", path("sq.json")),
            ],
        );
        out.assert_prints("(3, [0, 1, 4], true, [1.0, 2.0, 3.0])\na = [2.0, 3.0, 4.0]\n");
        let sq = read("sq.npy");
        assert_eq!(
            (sq.shape, sq.elements),
            (vec![3], Elements::I64(vec![0, 1, 4]))
        );
        assert_eq!(read("old.npy").elements, Elements::F64(vec![1.0, 2.0, 3.0]));
        assert_eq!(read("a.npy").elements, Elements::F64(vec![2.0, 3.0, 4.0]));
        assert_eq!(
            std::fs::read_to_string(dir.join("sq.json")).unwrap(),
            "[0, 1, 4]\n"
        );
    }
    run(
        &program,
        "squares",
        &[
            "--arg",
            "n=0",
            "--save",
            &format!("result={}", path("e.npy")),
        ],
    )
    .assert_prints("[]\n");
    let empty = read("e.npy");
    assert_eq!(
        (empty.shape, empty.elements),
        (vec![0], Elements::I64(vec![]))
    );
    // Both parts of `twice` are the same values, in two files.
    run(
        &program,
        "twice",
        &[
            "--arg",
            "x=[1]",
            "--save",
            &format!("result.0={}", path("t0.npy")),
            "--save",
            &format!("result.1={}", path("t1.npy")),
        ],
    )
    .assert_prints("([3.0], [3.0])\n");
    assert_eq!(read("t0.npy").elements, Elements::F64(vec![3.0]));
    assert_eq!(read("t1.npy").elements, Elements::F64(vec![3.0]));
    // A parameter named `result` comes first; `result.0` is the result.
    run(
        &program,
        "named",
        &[
            "--arg",
            "result=[1]",
            "--save",
            &format!("result={}", path("n.npy")),
            "--save",
            &format!("result.0={}", path("n0.npy")),
        ],
    )
    .assert_prints("[2.0]\n");
    assert_eq!(read("n.npy").elements, Elements::F64(vec![1.0]));
    assert_eq!(read("n0.npy").elements, Elements::F64(vec![2.0]));
}

#[test]
fn saving_a_result_that_is_not_an_array_is_an_error() {
    let (dir, program) = setup("save_errors");
    let bad = |func: &str, args: &[&str], save: &str, needle: &str| {
        let target = format!("{save}={}", dir.join("out.npy").display());
        let mut all = args.to_vec();
        all.extend(["--save", &target]);
        fails_with(run(&program, func, &all), needle);
        assert!(!dir.join("out.npy").exists(), "{func} {save} wrote a file");
    };
    let x = ["--arg", "x=[1, 2]"];
    bad(
        "pair",
        &x,
        "result.0",
        "the result `result.0` is an f64, not an array",
    );
    bad(
        "bump",
        &["--arg", "a=[1]"],
        "result.0",
        "the result `result.0` is an i64, not an array",
    );
    bad(
        "bump",
        &["--arg", "a=[1]"],
        "result.2",
        "the result `result.2` is a bool, not an array",
    );
    bad(
        "total",
        &x,
        "result",
        "the result `result` is an f64, not an array",
    );
    // A tuple's parts are numbered: `result` alone names nothing, and the
    // message lists what can be saved.
    bad(
        "pair",
        &x,
        "result",
        "`pair` has no array `result` (its arrays: x, result.1)",
    );
    bad(
        "bump",
        &["--arg", "a=[1]"],
        "result.4",
        "`bump` has no array `result.4` (its arrays: a, result.1, result.3)",
    );
    bad(
        "twice",
        &x,
        "result.01",
        "`twice` has no array `result.01` (its arrays: x, result.0, result.1)",
    );
    bad(
        "scaled",
        &["--arg", "x=[1]", "--arg", "s=1"],
        "result.1",
        "`scaled` has no array `result.1` (its arrays: x, result)",
    );
    bad(
        "nothing",
        &x,
        "result",
        "`nothing` has no array `result` (its arrays: x)",
    );
    bad(
        "squares",
        &["--arg", "n=1"],
        "x",
        "`squares` has no array `x` (its arrays: result)",
    );
}

/// The results of `func` on `args` through `Function::call` (the JIT, on
/// borrowed arguments) and `Session::run` on the interpreter under every
/// inline setting: the same bits.
fn call_and_compare(program: &Program, session: &Session, func: &str, args: &[Val]) -> Vec<Val> {
    let f = program.function(func).unwrap();
    let mut values = args.to_vec();
    let mut slots: Vec<Arg<'_>> = values.iter_mut().map(Arg::of).collect();
    let got = f.call(&mut slots).unwrap();
    let want = the_same_under(session, &every_setting_and_engine(), func, args).unwrap();
    assert_eq!(got.len(), want.results.len(), "{func}");
    for (g, w) in got.iter().zip(&want.results) {
        assert!(
            g.bit_eq(w),
            "{func}: {g:?} by Function::call, {w:?} by the session"
        );
    }
    got
}

#[test]
fn function_call_returns_array_results() {
    let program = Program::from_source("results.adz", SRC).unwrap();
    let session = Session::from_source("results.adz", SRC).unwrap();
    let x = || Val::Array(vec![1.0, f64::NAN, f64::NEG_INFINITY]);
    let cases: Vec<(&str, Vec<Val>)> = vec![
        ("scaled", vec![x(), Val::F64(2.0)]),
        ("scaled", vec![Val::Array(vec![]), Val::F64(2.0)]),
        ("ident", vec![x()]),
        ("tail", vec![x()]),
        ("pair", vec![x()]),
        ("twice", vec![x()]),
        ("squares", vec![Val::I64(5)]),
        ("squares", vec![Val::I64(0)]),
        ("bump", vec![Val::Array(vec![1.0, 2.0, 3.0])]),
        ("total", vec![Val::Array(vec![1.0, 2.0, 3.0])]),
    ];
    for (func, args) in &cases {
        call_and_compare(&program, &session, func, args);
    }

    // The values and the types the API reports.
    let pair = program.function("pair").unwrap();
    assert_eq!(pair.results(), [Type::F64, Type::Array]);
    let xs = [1.0, 2.0, 3.0];
    assert_eq!(
        pair.call(&mut [Arg::Array(&xs)]).unwrap(),
        vec![Val::F64(2.0), Val::Array(vec![2.0, 4.0, 6.0])]
    );
    let squares = program.function("squares").unwrap();
    assert_eq!(squares.results(), [Type::IArray]);
    assert_eq!(
        squares.call(&mut [Arg::I64(4)]).unwrap(),
        vec![Val::IArray(vec![0, 1, 4, 9])]
    );
    let bump = program.function("bump").unwrap();
    assert_eq!(
        bump.results(),
        [Type::I64, Type::IArray, Type::Bool, Type::Array]
    );
    let mut a = vec![1.0, 2.0];
    assert_eq!(
        bump.call(&mut [Arg::ArrayMut(&mut a)]).unwrap(),
        vec![
            Val::I64(2),
            Val::IArray(vec![0, 1]),
            Val::Bool(false),
            Val::Array(vec![1.0, 2.0]),
        ]
    );
    assert_eq!(a, [2.0, 3.0]);
}

#[test]
fn array_results_are_the_callers_own() {
    let program = Program::from_source("results.adz", SRC).unwrap();
    // A result that is a parameter, or a view of one, is a copy: the
    // caller's buffer is untouched by writes to it.
    let ident = program.function("ident").unwrap();
    let tail = program.function("tail").unwrap();
    let x = vec![1.0, 2.0, 3.0];
    for (f, want) in [(&ident, vec![1.0, 2.0, 3.0]), (&tail, vec![2.0, 3.0])] {
        let mut out = f.call(&mut [Arg::Array(&x)]).unwrap();
        let Some(Val::Array(ys)) = out.pop() else {
            panic!("{}: not an array", f.name())
        };
        assert_eq!(ys, want);
        assert!(!std::ptr::eq(ys.as_ptr(), x.as_ptr()));
        assert!(!std::ptr::eq(ys.as_ptr(), x[1..].as_ptr()));
    }
    // An array returned twice is two arrays.
    let twice = program.function("twice").unwrap();
    match &twice.call(&mut [Arg::Array(&x)]).unwrap()[..] {
        [Val::Array(p), Val::Array(q)] => {
            assert_eq!(p, q);
            assert!(!std::ptr::eq(p.as_ptr(), q.as_ptr()));
        }
        other => panic!("{other:?}"),
    }
    // Every call returns arrays of its own, from any number of threads.
    let scaled = program.function("scaled").unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let scaled = &scaled;
            s.spawn(move || {
                let x: Vec<f64> = (0..1000).map(|i| f64::from(i + t)).collect();
                for k in 0..50 {
                    let got = scaled
                        .call(&mut [Arg::Array(&x), Arg::F64(f64::from(k))])
                        .unwrap();
                    let want: Vec<f64> = x.iter().map(|v| f64::from(k) * v).collect();
                    assert_eq!(got, vec![Val::Array(want)]);
                }
            });
        }
    });
}

#[test]
fn a_failed_call_with_array_results_is_an_error() {
    let program = Program::from_source("results.adz", SRC).unwrap();
    let squares = program.function("squares").unwrap();
    let err = squares.call(&mut [Arg::I64(-1)]).unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot allocate an array of length -1"),
        "{err}"
    );
    let session = Session::from_source("results.adz", SRC).unwrap();
    for engine in [Engine::Jit, Engine::Interp] {
        let mut s = Session::from_module(session.module.clone()).unwrap();
        s.inline = InlineSetting::None;
        assert!(s.run("squares", &[Val::I64(-1)], engine).is_err());
    }
}

/// `--derive` of a function with array results: forward mode returns the
/// tangent arrays beside the primal; reverse mode takes each array
/// result's cotangent with `--arg dret=..` (ones of the result's length by
/// default, the gradient of the sum of its elements) and f64 results'
/// with `--seed`; a cotangent of the wrong length is an error.
#[test]
fn derive_takes_and_gives_arrays_for_array_results() {
    let (_dir, program) = setup("derive");
    let out = run(
        &program,
        "scaled",
        &[
            "--arg", "x=[1, 2]", "--arg", "s=2", "--arg", "s.t=0", "--derive", "forward",
        ],
    );
    // An array's tangent not given is zeros.
    assert_eq!(out.exits(0).stdout, "([2.0, 4.0], [0.0, 0.0])\n");
    let out = run(
        &program,
        "scaled",
        &[
            "--arg",
            "x=[1, 2]",
            "--arg",
            "s=2",
            "--derive",
            "forward",
            "--arg",
            "x.d=[1, 0]",
            "--arg",
            "s.t=1",
        ],
    );
    assert_eq!(out.exits(0).stdout, "([2.0, 4.0], [3.0, 2.0])\n");
    let out = run(
        &program,
        "scaled",
        &[
            "--arg", "x=[1, 2]", "--arg", "s=2", "--derive", "reverse", "--json",
        ],
    );
    assert_eq!(
        out.exits(0).stdout,
        "{\"result\":[2.0,4.0],\"arrays\":{\"x.d\":[2.0,2.0]},\"adjoints\":{\"s\":3.0}}\n"
    );
    let out = run(
        &program,
        "scaled",
        &[
            "--arg",
            "x=[1, 2]",
            "--arg",
            "s=2",
            "--derive",
            "reverse",
            "--arg",
            "dret=[1, 10]",
            "--json",
        ],
    );
    assert_eq!(
        out.exits(0).stdout,
        "{\"result\":[2.0,4.0],\"arrays\":{\"x.d\":[2.0,20.0]},\"adjoints\":{\"s\":21.0}}\n"
    );
    // (f64, [f64]): the f64 result's cotangent by `--seed`, the array's
    // by `--arg dret1`.
    let out = run(
        &program,
        "pair",
        &[
            "--arg",
            "x=[1, 2]",
            "--derive",
            "reverse",
            "--seed",
            "3",
            "--arg",
            "dret1=[0, 1]",
            "--json",
        ],
    );
    assert_eq!(
        out.exits(0).stdout,
        "{\"result\":[2.0,[2.0,4.0]],\"arrays\":{\"x.d\":[6.0,2.0]},\"adjoints\":{}}\n"
    );
    fails_with(
        run(
            &program,
            "scaled",
            &[
                "--arg", "x=[1, 2]", "--arg", "s=2", "--derive", "reverse", "--arg", "dret=[1]",
            ],
        ),
        "different lengths",
    );
    fails_with(
        run(
            &program,
            "pair",
            &[
                "--arg", "x=[1, 2]", "--derive", "reverse", "--arg", "dret0=1",
            ],
        ),
        "give it with `--seed`",
    );
}
