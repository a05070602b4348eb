//! Issue #14, the rows that can be tested without timing: no aborts at
//! depth, limits that count what they say, allocation failures as errors
//! (arrays and reverse-mode tapes), time limits that stop a run, and only
//! what `--fn` reaches transformed. (Times are in the scaling benchmark,
//! never in a test: the time-limit tests check only that a run stops.)

use crate::support::{examples, inputs, load, root, same_run};
use adze::{Engine, Error, InlineSetting, Session};
use adze_ir::{Mode, TrapKind, Val};
use std::process::{Command, Stdio};
use std::time::Duration;

/// `c_i(x) = c_{i-1}(x) * 0.999 + x * 0.001`, `f` calling the last.
fn chain(n: usize) -> String {
    let mut s = String::from("fn c0(x: f64) -> f64 { x * 1.001 }\n");
    for i in 1..n {
        s.push_str(&format!(
            "fn c{i}(x: f64) -> f64 {{ c{}(x) * 0.999 + x * 0.001 }}\n",
            i - 1
        ));
    }
    s.push_str(&format!("fn f(x: f64) -> f64 {{ c{}(x) }}\n", n - 1));
    s
}

/// The chain's value and derivative at 1, by the recurrence.
fn chain_values(n: usize) -> (f64, f64) {
    let (mut v, mut d) = (1.001, 1.001);
    for _ in 1..n {
        v = v * 0.999 + 0.001;
        d = d * 0.999 + 0.001;
    }
    (v, d)
}

#[test]
fn a_deep_chain_of_calls_differentiates_without_overflowing_the_stack() {
    // 3000 distinct functions, not inlined: the reverse pass builds each
    // callee's derivative inside its caller's, 3000 deep (this aborted
    // with a stack overflow at 2000).
    let n = 3000;
    let mut s = Session::from_source("chain.adz", &chain(n)).unwrap();
    s.inline = InlineSetting::None;
    let (module, d) = s.derive("f", Mode::Reverse, 1, &[]).unwrap();
    let out = s
        .run_in(&module, &d, &[Val::F64(1.0)], Engine::Interp)
        .unwrap();
    let Val::F64(g) = out.results[0] else {
        panic!("{out:?}")
    };
    let (_, want) = chain_values(n);
    assert!((g - want).abs() < 1e-12, "{g} vs {want}");
}

#[test]
fn the_nesting_limit_counts_derivatives_of_derivatives_not_calls() {
    // 80 functions in a chain, never inlined, one first-order derivative:
    // nesting 1, far below the limit of 64 (this failed with "nest more
    // than 64 deep").
    let mut src = String::new();
    src.push_str("#[inline(never)]\nfn c0(x: f64) -> f64 { sin(x) }\n");
    for i in 1..80 {
        src.push_str(&format!(
            "#[inline(never)]\nfn c{i}(x: f64) -> f64 {{ c{}(x) + x }}\n",
            i - 1
        ));
    }
    src.push_str("fn g(x: f64) -> f64 { autodiff(reverse, c79, active, active(x)) }\n");
    let s = Session::from_source("nest.adz", &src).unwrap();
    let out = s.run("g", &[Val::F64(0.5)], Engine::Jit).unwrap();
    let Val::F64(g) = out.results[0] else {
        panic!("{out:?}")
    };
    assert!((g - (0.5f64.cos() + 79.0)).abs() < 1e-12, "{g}");
    // A real tower of derivatives still stops at the limit.
    let mut deep = String::from("fn d0(x: f64) -> f64 { x * x }\n");
    for i in 1..6 {
        deep.push_str(&format!(
            "fn d{i}(x: f64) -> f64 {{ let (p, t) = autodiff(forward, d{}, dual, dual(x, 1.0)); t }}\n",
            i - 1
        ));
    }
    let mut s = Session::from_source("tower.adz", &deep).unwrap();
    s.ad_limits.max_nesting = 3;
    let e = s.run("d5", &[Val::F64(0.5)], Engine::Interp).unwrap_err();
    assert!(e.to_string().contains("nest more than 3 deep"), "{e}");
}

#[test]
fn the_call_depth_limit_is_reached_only_by_recursion() {
    // A chain of 1500 calls is no recursion: it runs under the default
    // limit (100 000; this failed at 1000).
    let n = 1500;
    let mut s = Session::from_source("chain.adz", &chain(n)).unwrap();
    s.inline = InlineSetting::None;
    let (v, _) = chain_values(n);
    for engine in [Engine::Jit, Engine::Interp] {
        let out = s.run("f", &[Val::F64(1.0)], engine).unwrap();
        let Val::F64(got) = out.results[0] else {
            panic!("{out:?}")
        };
        assert!((got - v).abs() < 1e-12);
    }
    // A recursion that does not end is stopped, with the function's name.
    let s = Session::from_source("rec.adz", "fn r(n: i64) -> i64 { r(n + 1) }").unwrap();
    for engine in [Engine::Jit, Engine::Interp] {
        let e = s.run("r", &[Val::I64(0)], engine).unwrap_err().to_string();
        assert!(e.contains("`r`") && e.contains("100000"), "{e}");
    }
}

#[test]
fn an_allocation_that_fails_is_an_error_not_an_abort() {
    // Under a 1 GiB address-space limit, `zeros(2^28)` (2 GiB, the largest
    // length allowed) cannot be had: a one-line error and exit 1.
    let file = root().join("tests/programs/big_alloc.adz");
    for engine in ["jit", "interp"] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -v 1000000 && exec '{}' run '{}' --fn big --arg n=268435456 --engine {engine}",
                env!("CARGO_BIN_EXE_adze"),
                file.display()
            ))
            .output()
            .expect("sh runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{engine}: {err}");
        assert_eq!(
            err,
            format!(
                "error: in function `big` at {}:3:33: out of memory: cannot allocate an array of 268435456 elements (2048 MiB)\n",
                file.display()
            ),
            "{engine}"
        );
    }
}

#[test]
fn only_what_the_function_reaches_is_transformed() {
    // A function that cannot be differentiated (its request asks for too
    // deep a tower) does not stop another one from running.
    let src = "fn ok(x: f64) -> f64 { x + 1.0 }
               fn d0(x: f64) -> f64 { x * x }
               fn d1(x: f64) -> f64 { autodiff(reverse, d0, active, active(x)) }
               fn d2(x: f64) -> f64 { autodiff(reverse, d1, active, active(x)) }";
    let mut s = Session::from_source("reach.adz", src).unwrap();
    s.ad_limits.max_nesting = 1;
    assert!(s.run("d2", &[Val::F64(1.0)], Engine::Interp).is_err());
    let out = s.run("ok", &[Val::F64(1.0)], Engine::Jit).unwrap();
    assert_eq!(out.results, vec![Val::F64(2.0)]);
    // The prepared module of `ok` inlined and optimized nothing else:
    // `d1` is still as parsed.
    let m = s.prepare("ok").unwrap();
    let d1 = m.get("d1").unwrap();
    assert!(m
        .func(d1)
        .layout
        .insts()
        .any(|(_, i)| m.func(d1).dfg.inst(i).opcode() == adze_ir::Opcode::Autodiff));
}

/// `n` nested loops of trip count 1 carrying one `var`, and its gradient.
fn nested_loops(n: usize) -> String {
    let open: String = (0..n).map(|k| format!("for i{k} in 0..1 {{ ")).collect();
    format!(
        "fn f(x: f64) -> f64 {{ var s = x; {open}s = s * 1.01; {} s }}\n\
         fn d(x: f64) -> f64 {{ autodiff(reverse, f, active, active(x)) }}\n",
        "} ".repeat(n)
    )
}

#[test]
fn promoted_adjoints_of_nested_loops_take_no_parameter_per_enclosing_loop() {
    // Reverse mode keeps the adjoints that cross loops in slots that the
    // optimizer promotes to SSA values. An adjoint slot of the innermost
    // of `n` nested loops is live through all of them, reset to -0.0 at
    // each level: the promotion used to give it a block parameter at every
    // enclosing header (59 parameters on one block at n = 30: quadratic
    // code, and quadratic time in the JIT's register allocator). Redundant
    // cycles of parameters are removed now, so the widest block stays
    // narrow whatever the depth.
    for n in [10, 30] {
        let s = Session::from_source("nested.adz", &nested_loops(n)).unwrap();
        let m = s.prepare("d").unwrap();
        let widest = m
            .iter()
            .flat_map(|(_, f)| {
                f.layout
                    .blocks()
                    .iter()
                    .map(move |&b| f.dfg.block_params(b).len())
            })
            .max()
            .unwrap();
        assert!(widest <= 4, "n = {n}: a block with {widest} parameters");
        let out = s.run("d", &[Val::F64(1.0)], Engine::Jit).unwrap();
        assert_eq!(out.results, vec![Val::F64(1.01)]);
    }
}

/// `tests/programs/endless.adz`: runs that only a time limit or the memory
/// stops.
fn endless() -> std::path::PathBuf {
    root().join("tests/programs/endless.adz")
}

/// Starts `adze ARGS..` (through `sh` when `shell_prefix` is given, e.g.
/// an address-space limit), without waiting for it.
fn spawn_adze(args: &[String], shell_prefix: Option<&str>) -> std::process::Child {
    let mut cmd = match shell_prefix {
        None => {
            let mut c = Command::new(env!("CARGO_BIN_EXE_adze"));
            c.args(args);
            c
        }
        Some(prefix) => {
            let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
            let mut c = Command::new("sh");
            c.arg("-c").arg(format!(
                "{prefix} && exec '{}' {}",
                env!("CARGO_BIN_EXE_adze"),
                quoted.join(" ")
            ));
            c
        }
    };
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("adze starts")
}

/// Runs the commands at once (each is mostly waiting for its time limit),
/// then returns each one's exit code, stdout and stderr.
fn run_all(runs: Vec<(String, std::process::Child)>) -> Vec<(String, Option<i32>, String, String)> {
    runs.into_iter()
        .map(|(what, child)| {
            let out = child.wait_with_output().expect("adze runs");
            (
                what,
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        })
        .collect()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_run_past_its_time_limit_stops_with_one_line() {
    // `while true {}`, an endless loop with work in it (a local array, an
    // intrinsic), and a recursion without a loop (stopped by the poll at
    // function entry), on both engines; then a reverse derivative
    // (`--derive`), stopped inside the augmented primal's loop.
    let file = endless().display().to_string();
    let mut runs = Vec::new();
    for (func, args) in [
        ("spin", vec![]),
        ("churn", vec!["--arg", "x=0.5", "--arg", "n=1000"]),
        ("tree", vec!["--arg", "n=60"]),
    ] {
        for engine in ["jit", "interp"] {
            let mut a = strings(&["run", &file, "--fn", func, "--engine", engine]);
            a.extend(strings(&args));
            a.extend(strings(&["--timeout", "1"]));
            runs.push((format!("{func} {engine}"), spawn_adze(&a, None)));
        }
    }
    for engine in ["jit", "interp"] {
        let a = strings(&[
            "run",
            &file,
            "--fn",
            "slow",
            "--derive",
            "reverse",
            "--arg",
            "x=3",
            "--engine",
            engine,
            "--timeout",
            "0.5",
        ]);
        runs.push((format!("slow --derive {engine}"), spawn_adze(&a, None)));
    }
    for (what, code, stdout, stderr) in run_all(runs) {
        assert_eq!(code, Some(1), "{what}: {stderr}");
        assert_eq!(stdout, "", "{what}");
        assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
        if let Some(func) = what.strip_suffix(" jit").or(what.strip_suffix(" interp")) {
            if !func.contains(' ') {
                assert_eq!(
                    stderr,
                    format!(
                        "error: in function `{func}`: the run was stopped after its time limit of 1 s (`--timeout`)\n"
                    ),
                    "{what}"
                );
                continue;
            }
        }
        // The derivative: named as a derivative of `slow`.
        assert!(
            stderr.starts_with("error: in ")
                && stderr.contains("derivative of `slow`")
                && stderr.ends_with(
                    ": the run was stopped after its time limit of 500 ms (`--timeout`)\n"
                ),
            "{what}: {stderr}"
        );
    }
}

#[test]
fn the_time_limit_must_be_a_positive_number_of_seconds() {
    let file = endless().display().to_string();
    for bad in ["0", "-1", "abc", "nan", "inf"] {
        let flag = format!("--timeout={bad}");
        let a = strings(&["run", &file, "--fn", "spin", &flag]);
        let out = spawn_adze(&a, None).wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("--timeout"), "{bad}: {err}");
    }
}

#[test]
fn the_time_limit_is_a_run_time_error_in_the_api() {
    let mut s = Session::from_file(&endless()).unwrap();
    let limit = Duration::from_millis(200);
    s.limits.timeout = Some(limit);
    let timeout = |e: &Error| matches!(e, Error::Run(r) if r.kind == TrapKind::Timeout { limit } && r.inlined.is_empty());
    for engine in [Engine::Jit, Engine::Interp] {
        for (func, args) in [
            ("spin", vec![]),
            ("churn", vec![Val::F64(0.5), Val::I64(100)]),
            ("tree", vec![Val::I64(60)]),
        ] {
            let e = s.run(func, &args, engine).unwrap_err();
            assert!(timeout(&e), "{func} {engine:?}: {e:?}");
            assert_eq!(
                e.to_string(),
                format!("in function `{func}`: the run was stopped after its time limit of 200 ms (`--timeout`)")
            );
        }
        // A reverse derivative, through `Session::derive`.
        let (module, d) = s.derive("slow", Mode::Reverse, 1, &[]).unwrap();
        let e = s.run_in(&module, &d, &[Val::F64(3.0)], engine).unwrap_err();
        assert!(timeout(&e), "slow.rev {engine:?}: {e:?}");
    }
    // The JIT's zero-copy call, twice: each call has its own deadline, and
    // the compiled code stays usable after a time-out.
    let module = s.prepare("churn").unwrap();
    let id = module.get("churn").unwrap();
    let options = adze_jit::JitOptions {
        limits: s.limits,
        ..adze_jit::JitOptions::default()
    };
    let jit = adze_jit::compile(&module, id, &options).unwrap();
    for _ in 0..2 {
        let e = jit
            .call_mut(&mut [Val::F64(0.5), Val::I64(100)])
            .unwrap_err();
        assert_eq!(e.kind, TrapKind::Timeout { limit });
    }
}

#[test]
fn timed_out_runs_free_their_memory() {
    // Each run makes a local array of 2 MiB (`zeros`, zero-filled) and,
    // for the derivative, a tape, then runs until a 2 ms limit stops it.
    let mut s = Session::from_file(&endless()).unwrap();
    s.limits.timeout = Some(Duration::from_millis(2));
    let n = 1 << 18;
    let args = [Val::F64(0.5), Val::I64(n)];
    let per_run = 8 * n as u64;
    let options = adze_jit::JitOptions {
        limits: s.limits,
        ..adze_jit::JitOptions::default()
    };
    let primal = s.prepare("churn").unwrap();
    let (derivative, d) = s.derive("churn", Mode::Reverse, 1, &[]).unwrap();
    for (module, name) in [(&primal, "churn"), (&derivative, d.as_str())] {
        let id = module.get(name).unwrap();
        let stopped = |r: Result<adze_ir::Outcome, adze_ir::RunError>| matches!(r, Err(e) if matches!(e.kind, TrapKind::Timeout { .. }));
        let jit = adze_jit::compile(module, id, &options).unwrap();
        crate::robustness::assert_no_growth(&format!("jit, {name}"), 200, per_run, || {
            assert!(stopped(jit.call(&args)));
        });
        let interp = adze_interp::Interpreter::with_limits(module, s.limits);
        crate::robustness::assert_no_growth(&format!("interpreter, {name}"), 200, per_run, || {
            assert!(stopped(interp.call(id, &args)));
        });
    }
}

#[test]
fn a_run_well_within_its_time_limit_is_unchanged() {
    // Every function of every example (its `autodiff`s lowered, so
    // derivatives and tapes included) and the reverse derivative of each
    // function with an f64 result: compiled with polls (a limit of an hour)
    // and without, the JIT's results are bit for bit the same, and so are
    // the interpreter's.
    let hour = adze_ir::Limits {
        timeout: Some(Duration::from_secs(3600)),
        ..adze_ir::Limits::default()
    };
    let mut ran = 0;
    for path in examples() {
        let session = load(&path);
        let users: Vec<(String, adze_ir::Signature)> = session
            .module
            .iter()
            .filter(|(_, f)| !f.name.contains('.'))
            .map(|(_, f)| (f.name.clone(), f.sig.clone()))
            .collect();
        for (name, sig) in users {
            let mut runs = vec![(session.prepare(&name).unwrap(), name.clone())];
            if sig.results == [adze_ir::Type::F64] {
                if let Ok(d) = session.derive(&name, Mode::Reverse, 1, &[]) {
                    runs.push(d);
                }
            }
            for (module, f) in runs {
                let id = module.get(&f).unwrap();
                let tys: Vec<_> = module.func(id).sig.param_types().collect();
                let args = &inputs(&tys, 1)[0];
                let plain = adze_jit::compile(&module, id, &adze_jit::JitOptions::default())
                    .unwrap()
                    .call(args);
                let options = adze_jit::JitOptions {
                    limits: hour,
                    ..adze_jit::JitOptions::default()
                };
                let polled = adze_jit::compile(&module, id, &options).unwrap().call(args);
                let interp = adze_interp::Interpreter::new(&module).call(id, args);
                let interp_limited =
                    adze_interp::Interpreter::with_limits(&module, hour).call(id, args);
                assert!(
                    same_run(&plain, &polled),
                    "{}: {f}: {plain:?} vs {polled:?}",
                    path.display()
                );
                assert!(
                    same_run(&interp, &interp_limited),
                    "{}: {f}: {interp:?} vs {interp_limited:?}",
                    path.display()
                );
                assert!(same_run(&plain, &interp), "{}: {f}", path.display());
                ran += 1;
            }
        }
    }
    assert!(ran >= 100, "only {ran} runs");
}

#[test]
fn a_tape_that_outgrows_memory_is_an_error_not_an_abort() {
    // The reverse derivative of a loop whose tape needs 9 (JIT) or 16
    // (interpreter) bytes per entry times 8 * 10^9 entries, under a 600 MB
    // address-space limit: a one-line error and exit 1, not SIGABRT (the
    // tape stops at 2^25 entries on the JIT, failing to grow to 576 MiB,
    // and at 2^24 on the interpreter, failing at 512 MiB).
    let file = endless().display().to_string();
    let runs = ["jit", "interp"]
        .into_iter()
        .map(|engine| {
            let a = strings(&[
                "run",
                &file,
                "--fn",
                "long_tape",
                "--derive",
                "reverse",
                "--arg",
                "x=0.5",
                "--arg",
                "n=1000000000",
                "--engine",
                engine,
            ]);
            (engine.to_string(), spawn_adze(&a, Some("ulimit -v 600000")))
        })
        .collect();
    for (engine, code, stdout, stderr) in run_all(runs) {
        assert_eq!(code, Some(1), "{engine}: {stderr}");
        assert_eq!(stdout, "", "{engine}");
        assert_eq!(stderr.lines().count(), 1, "{engine}: {stderr}");
        assert!(
            stderr.starts_with("error: in ")
                && stderr.contains("derivative of `long_tape`")
                && stderr.contains(": out of memory: the reverse-mode tape outgrew memory ("),
            "{engine}: {stderr}"
        );
    }
}
