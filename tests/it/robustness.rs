//! Robustness (docs/robustness.md): a stable-Rust smoke run of the two fuzz
//! properties (`fuzz/harness.rs`, shared with `fuzz/fuzz_targets/`), run-time
//! faults inside derivatives through the API and the command, the error
//! shapes of the command, and memory that faulting runs must not leak.

use crate::support::{
    adze, adze_command, all_activities, examples, load, nested_d3, root, run_fault,
};
use adze::{Engine, Error, Session};
use adze_ir::{FuncId, Limits, Module, Outcome, RunError, TrapKind, Val};
use adze_test_support::tokens::TOKENS;
use proptest::prelude::*;
use std::process::Stdio;

#[path = "../../fuzz/harness.rs"]
mod harness;

// ---------------------------------------------------------------------------
// The fuzz properties on stable Rust.

/// Sources to mutate: the examples, the malformed corpus, the fuzz seeds.
fn corpus() -> Vec<Vec<u8>> {
    let mut files = examples();
    for dir in ["tests/malformed", "fuzz/seeds", "tests/programs"] {
        let mut more: Vec<_> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "adz"))
            .collect();
        more.sort();
        files.extend(more);
    }
    files
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        // The 100 000-parenthesis file is covered by the malformed tests.
        .filter(|b| b.len() <= 16 << 10)
        .collect()
}

/// Loop-free seeds: the inputs on which the pipeline property runs code.
fn seeds() -> Vec<Vec<u8>> {
    let mut files: Vec<_> = std::fs::read_dir(root().join("fuzz/seeds"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// An edit: its kind, two positions and a token or byte, as [`mutate`]
/// reads them.
type Edit = (u8, usize, usize, usize);

/// One edit of a source: delete, duplicate or overwrite a range, or insert a
/// token, at positions given by the generated numbers.
fn mutate(src: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut out = src.to_vec();
    for &(kind, p, q, t) in edits {
        let n = out.len().max(1);
        let (i, j) = {
            let i = p % n;
            (i, (i + 1 + q % 16).min(out.len()))
        };
        match kind % 5 {
            0 if i < j => {
                out.drain(i..j);
            }
            1 if i < j => {
                let piece: Vec<u8> = out[i..j].to_vec();
                out.splice(j..j, piece);
            }
            2 => {
                let tok = TOKENS[t % TOKENS.len()].as_bytes();
                out.splice(i.min(out.len())..i.min(out.len()), tok.iter().copied());
            }
            3 if i < out.len() => out[i] = (t % 256) as u8,
            _ => {
                // Replace a word-sized range by a token.
                let tok = TOKENS[t % TOKENS.len()].as_bytes();
                let end = (i + q % 6).min(out.len());
                let start = i.min(end);
                out.splice(start..end, tok.iter().copied());
            }
        }
    }
    out
}

/// One of `sources` and `edits` edits of it for [`mutate`].
fn mutated(
    sources: Vec<Vec<u8>>,
    edits: std::ops::Range<usize>,
) -> impl Strategy<Value = (Vec<u8>, Vec<Edit>)> {
    let edit = (any::<u8>(), any::<usize>(), any::<usize>(), any::<usize>());
    (
        proptest::sample::select(sources),
        proptest::collection::vec(edit, edits),
    )
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn frontend_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        harness::frontend(&bytes);
    }

    #[test]
    fn frontend_never_panics_on_token_soup(
        toks in proptest::collection::vec(0..TOKENS.len(), 0..120),
    ) {
        let text: Vec<&str> = toks.iter().map(|&t| TOKENS[t]).collect();
        harness::frontend(text.join(" ").as_bytes());
    }
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn frontend_never_panics_on_mutated_programs((src, edits) in mutated(corpus(), 1..6)) {
        harness::frontend(&mutate(&src, &edits));
    }
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn jit_equals_interpreter_on_mutated_seeds((src, edits) in mutated(seeds(), 0..4)) {
        harness::pipeline(&mutate(&src, &edits));
    }
}

/// The pipeline property on every whole example and seed, and proof that it
/// really runs code (not only skips it).
#[test]
fn pipeline_property_on_the_corpus() {
    let mut compared = 0;
    let mut faulted = 0;
    for src in corpus() {
        let r = harness::pipeline(&src);
        compared += r.compared;
        faulted += r.faulted;
    }
    assert!(compared >= 40, "only {compared} runs compared");
    assert!(faulted >= 4, "only {faulted} runs faulted");
}

/// Replays a fuzz corpus on stable Rust and prints what the pipeline
/// property did with it: `ADZE_FUZZ_CORPUS=fuzz/corpus/pipeline cargo test
/// --test it replay_fuzz_corpus -- --ignored --nocapture`.
#[test]
#[ignore = "needs ADZE_FUZZ_CORPUS"]
fn replay_fuzz_corpus() {
    let dir = std::env::var_os("ADZE_FUZZ_CORPUS").expect("set ADZE_FUZZ_CORPUS");
    let (mut inputs, mut compiled, mut with_runs) = (0, 0, 0);
    let mut total = harness::Report::default();
    for entry in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        harness::frontend(&bytes);
        let r = harness::pipeline(&bytes);
        inputs += 1;
        compiled += usize::from(r.compiled);
        with_runs += usize::from(r.compared > 0);
        total.compared += r.compared;
        total.faulted += r.faulted;
        total.skipped += r.skipped;
    }
    eprintln!(
        "{inputs} inputs, {compiled} compiled, {with_runs} ran code; {} runs compared \
         ({} faulted identically), {} functions skipped",
        total.compared, total.faulted, total.skipped
    );
}

/// Inputs that once broke a property (none found yet by the fuzzers: see
/// docs/robustness.md); each stays here as a regression test.
#[test]
fn fuzz_regressions() {
    let cases: &[&[u8]] = &[
        b"",
        b"\xff",
        b"fn",
        b"fn f() -> f64 { 1e308 * 10 }",
        b"fn f(n: i64) -> i64 { n / 0 }",
        b"fn f(x: f64) -> f64 { x } fn g(x: f64) -> f64 { autodiff(reverse, f, active, active(x)) }",
    ];
    for case in cases {
        harness::frontend(case);
        harness::pipeline(case);
    }
}

// ---------------------------------------------------------------------------
// Run-time faults inside derivatives, through the API.

const PROGRAM: &str = "tests/programs/derivative_faults.adz";

fn session() -> Session {
    load(&root().join(PROGRAM))
}

/// Runs on both engines; both must fail with the same run-time error.
fn fault(func: &str, args: &[Val]) -> adze_ir::RunError {
    run_fault(PROGRAM, func, args)
}

fn arr(xs: &[f64]) -> Val {
    Val::Array(xs.to_vec())
}

#[test]
fn out_of_bounds_inside_derivatives() {
    let e = fault(
        "grad_shifted",
        &[arr(&[1.0, 2.0, 3.0]), arr(&[0.0; 3]), Val::I64(1)],
    );
    assert!(e.func.contains("shifted"), "{e}");
    assert_eq!(
        e.kind,
        TrapKind::IndexOutOfBounds {
            array: "a".into(),
            index: 3,
            len: 3
        }
    );
    let e = fault(
        "tangent_shifted",
        &[arr(&[1.0, 2.0, 3.0]), arr(&[0.0; 3]), Val::I64(1)],
    );
    assert!(e.func.contains("shifted"), "{e}");
    assert!(
        matches!(e.kind, TrapKind::IndexOutOfBounds { index: 3, .. }),
        "{e}"
    );
    // A negative index.
    let e = fault(
        "grad_shifted",
        &[arr(&[1.0, 2.0, 3.0]), arr(&[0.0; 3]), Val::I64(-1)],
    );
    assert!(
        matches!(e.kind, TrapKind::IndexOutOfBounds { index: -1, .. }),
        "{e}"
    );
}

#[test]
fn runaway_recursion_inside_derivatives() {
    for f in ["grad_spiral", "tangent_spiral"] {
        let e = fault(f, &[Val::F64(0.5)]);
        assert!(e.func.contains("spiral"), "{e}");
        assert_eq!(e.kind, TrapKind::CallDepthExceeded { limit: 100_000 });
    }
}

#[test]
fn huge_allocation_in_a_loop_and_in_its_derivative() {
    let huge = TrapKind::BadArrayLength {
        len: 100_000_001_000,
        max: adze_ir::runtime::MAX_ARRAY_LEN,
    };
    assert_eq!(fault("grow", &[Val::F64(0.5), Val::I64(3)]).kind, huge);
    assert_eq!(fault("grad_grow", &[Val::F64(0.5), Val::I64(3)]).kind, huge);
    // One iteration allocates only the small array: no fault.
    let s = session();
    for engine in [Engine::Interp, Engine::Jit] {
        s.run("grad_grow", &[Val::F64(0.5), Val::I64(1)], engine)
            .unwrap();
    }
}

#[test]
fn integer_faults_inside_derivatives() {
    let e = fault("grad_ratio", &[Val::F64(1.0), Val::I64(1), Val::I64(0)]);
    assert_eq!(e.kind, TrapKind::DivisionByZero);
    let e = fault(
        "grad_ratio",
        &[Val::F64(1.0), Val::I64(i64::MIN), Val::I64(-1)],
    );
    assert_eq!(e.kind, TrapKind::DivisionOverflow);
}

/// A shadow of another length than its array is an error, shorter or
/// longer (the exact error is checked below).
#[test]
fn shorter_shadow_is_an_error() {
    for (f, args) in [
        ("grad_sumsq", [arr(&[1.0, 2.0, 3.0]), arr(&[0.0, 0.0])]),
        ("tangent_sumsq", [arr(&[1.0, 2.0, 3.0]), arr(&[1.0])]),
    ] {
        fault(f, &args);
    }
}

#[test]
fn shadow_length_mismatch_is_reported() {
    for (f, args) in [
        ("grad_sumsq", [arr(&[1.0, 2.0, 3.0]), arr(&[0.0, 0.0])]),
        ("grad_sumsq", [arr(&[1.0, 2.0, 3.0]), arr(&[0.0; 4])]),
        ("tangent_sumsq", [arr(&[1.0, 2.0, 3.0]), arr(&[1.0])]),
        ("tangent_sumsq", [arr(&[1.0, 2.0, 3.0]), arr(&[1.0; 4])]),
    ] {
        let e = fault(f, &args);
        assert!(
            matches!(e.kind, TrapKind::ShadowLengthMismatch { .. }),
            "{f}: {e}"
        );
        assert!(e.to_string().contains("sumsq"), "{e}");
    }
}

// ---------------------------------------------------------------------------
// Memory: faulting runs free their local arrays and their tape.

/// Resident memory of this process, in bytes (Linux; 0 elsewhere).
fn resident() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Runs `body` `runs` times (after a warm-up) and checks that resident
/// memory grows by less than `slack` bytes, where a leak of `leak_per_run`
/// bytes per run would grow it by far more. Other tests run in parallel in
/// this process, so one noisy measurement is retried.
pub(crate) fn assert_no_growth(what: &str, runs: usize, leak_per_run: u64, mut body: impl FnMut()) {
    let slack: u64 = 32 << 20;
    assert!(
        runs as u64 * leak_per_run >= 2 * slack,
        "{what}: the test would not see a leak"
    );
    for _ in 0..runs / 10 {
        body();
    }
    let mut growth = 0;
    for _attempt in 0..2 {
        let before = resident();
        for _ in 0..runs {
            body();
        }
        growth = resident().saturating_sub(before);
        if growth < slack {
            return;
        }
    }
    panic!(
        "{what}: resident memory grew by {} MiB over {runs} faulting runs",
        growth >> 20
    );
}

/// `name` of the fault session as it runs (inlined, derivatives lowered,
/// optimized), and compiled for the JIT.
fn compiled(s: &Session, name: &str) -> (Module, FuncId, adze_jit::Compiled) {
    let module = s.prepare(name).unwrap();
    let id = module.get(name).unwrap();
    let jit = adze_jit::compile(&module, id, &adze_jit::JitOptions::default()).unwrap();
    (module, id, jit)
}

/// Panics unless `run` faulted with an index out of bounds.
#[track_caller]
fn assert_out_of_bounds(run: Result<Outcome, RunError>) {
    let e = run.unwrap_err();
    assert!(matches!(e.kind, TrapKind::IndexOutOfBounds { .. }), "{e}");
}

#[test]
fn faulting_runs_free_their_local_arrays() {
    let s = session();
    let (module, id, jit) = compiled(&s, "scratch_fault");
    // Two arrays of 32 Ki f64 (256 KiB each, touched by `fill`) per run.
    let n = 1 << 15;
    let args = [Val::I64(n)];
    let per_run = 2 * 8 * n as u64;
    assert_no_growth("jit, local arrays", 10_000, per_run, || {
        assert_out_of_bounds(jit.call(&args))
    });
    let interp = adze_interp::Interpreter::new(&module);
    assert_no_growth("interpreter, local arrays", 10_000, per_run, || {
        assert_out_of_bounds(interp.call(id, &args))
    });
}

#[test]
fn faulting_reverse_derivatives_free_their_tape() {
    let s = session();
    let (module, id, jit) = compiled(&s, "grad_shifted");
    // The augmented primal pushes every iteration (at least one f64 each)
    // before the last one reads past the end: a tape of >= 8 bytes times
    // the array length.
    let args = |n: usize| {
        let a = Val::Array((0..n).map(|i| i as f64 * 1e-4).collect());
        [a, Val::Array(vec![0.0; n]), Val::I64(1)]
    };
    let small = args(2048);
    assert_no_growth("jit, tape", 10_000, 8 * 2048, || {
        assert_out_of_bounds(jit.call(&small))
    });
    // Fewer runs (the interpreter is slow), with a longer tape each.
    let interp = adze_interp::Interpreter::new(&module);
    let big = args(8192);
    assert_no_growth("interpreter, tape", 1_100, 8 * 8192, || {
        assert_out_of_bounds(interp.call(id, &big))
    });
}

#[test]
fn faults_leave_the_jit_reusable() {
    // After a fault (call depth, bounds) the same compiled code runs normally.
    let s = session();
    let (_module, _, jit) = compiled(&s, "grad_spiral");
    for _ in 0..50 {
        assert!(jit.call(&[Val::F64(0.5)]).is_err());
    }
    let (_module, _, jit) = compiled(&s, "grad_shifted");
    for _ in 0..50 {
        assert!(jit
            .call(&[arr(&[1.0, 2.0]), arr(&[0.0; 2]), Val::I64(1)])
            .is_err());
        let ok = jit
            .call(&[arr(&[1.0, 2.0]), arr(&[0.0; 2]), Val::I64(0)])
            .unwrap();
        assert!(matches!(&ok.args[1], Val::Array(d) if d.iter().any(|&x| x != 0.0)));
    }
}

#[test]
fn lowered_limits_are_enforced_identically() {
    let mut s = session();
    s.limits = Limits {
        max_call_depth: 10,
        max_array_len: 999,
        timeout: None,
        tape_limit: adze_ir::DEFAULT_TAPE_LIMIT,
        checkpoint_segment: None,
    };
    for engine in [Engine::Interp, Engine::Jit] {
        let e = s.run("grad_spiral", &[Val::F64(0.5)], engine).unwrap_err();
        assert!(e.to_string().contains("call depth limit of 10"), "{e}");
        let e = s
            .run("grad_grow", &[Val::F64(0.5), Val::I64(1)], engine)
            .unwrap_err();
        assert!(e.to_string().contains("array of length 1000"), "{e}");
    }
}

// ---------------------------------------------------------------------------
// The command: exit codes and error shapes.

#[test]
fn derivative_faults_through_the_command() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "--fn",
                "grad_shifted",
                "--arg",
                "a=[1, 2]",
                "--arg",
                "da=[0, 0]",
                "--arg",
                "k=1",
            ],
            "index 2 is out of bounds for array `a` of length 2",
        ),
        (
            &["--fn", "grad_spiral", "--arg", "x=0.5"],
            "call depth limit of 100000 exceeded",
        ),
        (
            &["--fn", "grad_grow", "--arg", "x=0.5", "--arg", "n=2"],
            "cannot allocate an array of length 100000001000",
        ),
        (
            &[
                "--fn",
                "grad_ratio",
                "--arg",
                "x=1",
                "--arg",
                "a=1",
                "--arg",
                "b=0",
            ],
            "integer division by zero",
        ),
        (
            &[
                "--fn",
                "shifted",
                "--derive",
                "forward",
                "--arg",
                "a=[1, 2]",
                "--arg",
                "a.d=[1, 0]",
                "--arg",
                "k=1",
            ],
            "index 2 is out of bounds",
        ),
    ];
    for (rest, needle) in cases {
        for engine in ["jit", "interp"] {
            let args = [&["run", PROGRAM][..], rest, &["--engine", engine]].concat();
            let out = adze(&args);
            assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
            assert_eq!(out.stdout, "");
            assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
            // `in function `f`:` or, inside a derivative that was not
            // inlined, `in the .. derivative of `f` (function `..`):`.
            assert!(out.stderr.starts_with("error: in "), "{}", out.stderr);
            assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
            // --json: one object on stderr.
            let json = adze(&[&args[..], &["--json"]].concat());
            assert_eq!(json.code, 1);
            let v: serde_json::Value = serde_json::from_str(json.stderr.trim()).unwrap();
            assert!(v["error"].as_str().unwrap().contains(needle), "{v}");
        }
    }
}

#[test]
fn diagnostics_are_a_summary_line_then_the_excerpt() {
    let file = "tests/malformed/58_several_errors.adz";
    let out = adze(&["run", file, "--fn", "f"]);
    assert_eq!(out.code, 1);
    let mut lines = out.stderr.lines();
    let first = lines.next().unwrap();
    assert!(
        first.starts_with(&format!("{file}:2:13: error: ")),
        "{first}"
    );
    assert_eq!(lines.next(), Some(""));
    assert!(
        out.stderr.matches("\nerror: ").count() >= 3,
        "{}",
        out.stderr
    );
    // --json: the summary line as the error, nothing else.
    let out = adze(&["run", file, "--fn", "f", "--json"]);
    assert_eq!(out.code, 1);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stderr).unwrap();
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{file}:2:13: error: ")),
        "{v}"
    );
    // Invalid UTF-8 and an unreadable file.
    let out = adze(&["check", "tests/malformed/61_invalid_utf8.adz"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("not valid UTF-8"), "{}", out.stderr);
    let out = adze(&["run", "no/such.adz", "--fn", "f", "--json"]);
    assert_eq!(out.code, 1);
    let v: serde_json::Value = serde_json::from_str(&out.stderr).unwrap();
    assert!(v["error"].as_str().unwrap().contains("cannot read"), "{v}");
}

#[test]
fn usage_errors_exit_2_even_with_json() {
    for args in [
        &["run", PROGRAM, "--json"][..],
        &["run", PROGRAM, "--fn", "grow", "--engine", "gpu"],
        &["run", PROGRAM, "--fn", "grow", "--width", "2"],
        &["check"],
        &[],
    ] {
        let out = adze(args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    }
}

/// Output that cannot be written (a closed pipe, a full disk) must not make
/// the command panic (exit 101).
#[test]
fn unwritable_output_is_not_a_panic() {
    // A reader that has gone away: quiet, like other command-line tools.
    let mut child = adze_command()
        .args(["dump", "ir-examples/gmm.adz", "--stage", "all"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(out.status.code(), Some(101), "{stderr}");
    // A full disk: an error, exit 1.
    if let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") {
        let out = adze_command()
            .args(["dump", "ir-examples/gmm.adz"])
            .stdout(full)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

// ---------------------------------------------------------------------------
// The size limit of the AD passes (`AdLimits::max_size`, `--max-ad-size`).

/// `f0(x) = x³` and, for k = 1..=n, `fk(x) = f{k-1}(x) + f{k-1}'(x)` by a
/// forward derivative of `f{k-1}`: n nested forward derivatives, whose code
/// doubles with every level (the results of `f0`'s k-th derivative number
/// 2^k). `fk(x) = Σ_j C(k, j) f0^(j)(x)`.
fn nested_forward(n: usize) -> String {
    let mut src = String::from("fn f0(x: f64) -> f64 { x * x * x }\n");
    for k in 1..=n {
        src.push_str(&format!(
            "fn f{k}(x: f64) -> f64 {{ let (a, b) = autodiff(forward, f{}, dual, dual(x, 1.0)); a + b }}\n",
            k - 1
        ));
    }
    src
}

fn too_large_message(func: &str, limit: usize) -> String {
    format!(
        "the derivative code built for `{func}` exceeds {limit} IR instructions and values \
         (`--max-ad-size`); reduce the nesting of derivatives or raise the limit"
    )
}

/// Forty nested forward derivatives would need about 2^40 values; the limit
/// stops them with an error, under every inlining setting, through the
/// facade and the AD crate's entry points. Without the limit this test
/// would not finish. (A lowered limit keeps this process small: the leak
/// checks above measure its resident memory. The default limit is checked
/// through the command, below, in processes of their own.)
#[test]
fn nested_forward_derivatives_stop_at_the_size_limit() {
    let limit = 100_000;
    let limits = adze_ad::AdLimits {
        max_size: limit,
        ..adze_ad::AdLimits::default()
    };
    let mut session = Session::from_source("nested.adz", &nested_forward(40)).unwrap();
    session.ad_limits = limits;
    let too_large = adze_ad::AdError::TooLarge {
        func: "f40".into(),
        limit,
    };
    for inline in [adze::InlineSetting::None, adze::InlineSetting::All] {
        session.inline = inline;
        let err = session
            .run("f40", &[Val::F64(2.0)], Engine::Interp)
            .unwrap_err();
        match &err {
            Error::Ad(e) => assert_eq!(e, &too_large, "{inline:?}"),
            other => panic!("{inline:?}: expected AdError::TooLarge, got {other:?}"),
        }
        assert_eq!(err.to_string(), too_large_message("f40", limit));
        let err = session
            .derive("f40", adze_ir::Mode::Forward, 1, &[])
            .unwrap_err();
        assert!(matches!(&err, Error::Ad(e) if *e == too_large), "{err:?}");
    }
    // The AD crate's own entry points.
    let mut module = session.module.clone();
    let err = adze_ad::AdContext::new(limits)
        .lower_autodiff(&mut module)
        .unwrap_err();
    assert!(matches!(err, adze_ad::AdError::TooLarge { .. }), "{err:?}");
    let id = session.module.get("f40").unwrap();
    let mut module = session.module.clone();
    let err = adze_ad::AdContext::new(limits).lower_autodiff_from(&mut module, id);
    assert_eq!(err, Err(too_large.clone()));
    let f39 = session.module.get("f39").unwrap();
    let mut module = session.module.clone();
    let err = adze_ad::AdContext::new(limits).forward_derivative(
        &mut module,
        &adze_ad::ForwardRequest::new(
            f39,
            vec![adze_ir::ArgActivity::Dual],
            adze_ir::RetActivity::Dual,
        ),
    );
    assert_eq!(
        err,
        Err(adze_ad::AdError::TooLarge {
            func: "f39".into(),
            limit
        })
    );
    // Eight levels are far below the limit, and right:
    // f8(2) = 8 + 8·12 + 28·12 + 56·6.
    let mut session = Session::from_source("nested.adz", &nested_forward(8)).unwrap();
    session.ad_limits = limits;
    for engine in [Engine::Interp, Engine::Jit] {
        let out = session.run("f8", &[Val::F64(2.0)], engine).unwrap();
        assert_eq!(out.results, vec![Val::F64(776.0)]);
    }
}

/// The limit counts exactly the instructions and values of the functions a
/// lowering creates: the size they end up with passes, one less fails, with
/// forward and reverse requests, rules and tape helpers (the seed's HVP).
#[test]
fn the_size_limit_is_exact() {
    for (file, root) in [
        ("tests/programs/nested_forward.adz", "d3"),
        ("ir-examples/seed.adz", "hvp_custom"),
    ] {
        let module = load(&root_path(file)).module;
        let id = module.get(root).unwrap();
        let mut lowered = module.clone();
        adze_ad::lower_autodiff_from(&mut lowered, id).unwrap();
        let created: usize = lowered
            .iter()
            .skip(module.len())
            .map(|(_, f)| adze_ad::lower::ir_size(f))
            .sum();
        assert!(created > 0, "{file}");
        let with = |max_size: usize| {
            let limits = adze_ad::AdLimits {
                max_size,
                ..adze_ad::AdLimits::default()
            };
            let mut m = module.clone();
            adze_ad::AdContext::new(limits).lower_autodiff_from(&mut m, id)
        };
        assert_eq!(with(created), Ok(()), "{file}");
        assert_eq!(
            with(created - 1),
            Err(adze_ad::AdError::TooLarge {
                func: root.into(),
                limit: created - 1
            }),
            "{file}"
        );
    }
}

fn root_path(file: &str) -> std::path::PathBuf {
    root().join(file)
}

/// No example or benchmark comes near the default limit: every `autodiff`
/// of `ir-examples/` with the benchmark wrappers appended, and the forward
/// (also vector) and reverse derivative of every function, each create less
/// than a twentieth of it.
#[test]
fn no_example_comes_near_the_size_limit() {
    use adze_ir::{ArgActivity, RetActivity, Type};
    let created = |before: &adze_ir::Module, after: &adze_ir::Module| -> usize {
        after
            .iter()
            .skip(before.len())
            .map(|(_, f)| adze_ad::lower::ir_size(f))
            .sum()
    };
    let mut largest = (0, String::new());
    let mut check = |what: String, size: usize| {
        assert!(
            size < adze_ad::MAX_SIZE / 20,
            "{what} creates {size}, near the limit {}",
            adze_ad::MAX_SIZE
        );
        if size > largest.0 {
            largest = (size, what);
        }
    };
    for path in examples() {
        let mut src = std::fs::read_to_string(&path).unwrap();
        let bench = root()
            .join("benches/workloads")
            .join(path.file_name().unwrap());
        if let Ok(more) = std::fs::read_to_string(&bench) {
            src.push_str(&more);
        }
        let name = path.display().to_string();
        let module = adze_lang::compile(&name, &src).unwrap();
        let mut lowered = module.clone();
        adze_ad::lower_autodiff(&mut lowered).unwrap();
        check(
            format!("{name}: every autodiff"),
            created(&module, &lowered),
        );
        for (_, f) in module.iter().filter(|(_, f)| !f.name.contains('.')) {
            let all_f64 =
                !f.sig.results.is_empty() && f.sig.results.iter().all(|&t| t == Type::F64);
            let acts = |scalar| all_activities(&f.sig, scalar);
            for width in [1, 4] {
                let ret = if all_f64 {
                    RetActivity::Dual
                } else {
                    RetActivity::Const
                };
                let mut m = lowered.clone();
                match adze_ad::derive_forward(&mut m, &f.name, &acts(ArgActivity::Dual), ret, width)
                {
                    Ok(_) => check(
                        format!("{name}: {} forward x{width}", f.name),
                        created(&lowered, &m),
                    ),
                    Err(adze_ad::AdError::TooLarge { .. }) => panic!("{name}: {}", f.name),
                    Err(_) => {}
                }
            }
            let ret = if all_f64 {
                RetActivity::Active
            } else {
                RetActivity::Const
            };
            let mut m = lowered.clone();
            match adze_ad::derive_reverse(&mut m, &f.name, &acts(ArgActivity::Active), ret) {
                Ok(_) => check(format!("{name}: {} reverse", f.name), created(&lowered, &m)),
                Err(adze_ad::AdError::TooLarge { .. }) => panic!("{name}: {}", f.name),
                Err(_) => {}
            }
        }
    }
    eprintln!("largest: {} ({})", largest.0, largest.1);
}

/// The command: exit 1 and one line, `--json` too; a lower limit
/// (`--max-ad-size`) stops a small program that passes by default.
#[test]
fn the_size_limit_through_the_command() {
    let path = std::env::temp_dir().join(format!("adze-nested-{}.adz", std::process::id()));
    std::fs::write(&path, nested_forward(40)).unwrap();
    let file = path.display().to_string();
    let line = format!("error: {}\n", too_large_message("f40", adze_ad::MAX_SIZE));
    for args in [
        &["run", &file, "--fn", "f40", "--arg", "x=2"][..],
        &[
            "run", &file, "--fn", "f40", "--arg", "x=2", "--inline", "none",
        ],
        &["dump", &file, "--fn", "f40", "--stage", "ad"],
    ] {
        let out = adze(args);
        assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
        assert_eq!(out.stdout, "", "{args:?}");
        assert_eq!(out.stderr, line, "{args:?}");
    }
    let out = adze(&["run", &file, "--fn", "f40", "--arg", "x=2", "--json"]);
    assert_eq!(out.code, 1);
    let v: serde_json::Value = serde_json::from_str(&out.stderr).unwrap();
    assert_eq!(v["error"], too_large_message("f40", adze_ad::MAX_SIZE));
    let _ = std::fs::remove_file(&path);

    let small = "tests/programs/nested_forward.adz";
    adze(&nested_d3(&[])).assert_prints("6.0\n");
    let out = adze(&nested_d3(&["--max-ad-size", "100"]));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        format!("error: {}\n", too_large_message("d3", 100))
    );
    let out = adze(&["dump", small, "--stage", "ad", "--max-ad-size", "100"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("exceeds 100 IR instructions"),
        "{}",
        out.stderr
    );
    let out = adze(&nested_d3(&["--max-ad-size", "x"]));
    assert_eq!(out.code, 2, "{}", out.stderr);
}
