//! Run-time faults through the Rust API: each one an error naming the
//! function (and the array), identical on the JIT and the interpreter.

use crate::support::{adze, load, root, run_fault};
use adze::{Engine, Error};
use adze_ir::{TrapKind, Val};

fn run_both(func: &str, args: &[Val]) -> TrapKind {
    run_fault("tests/programs/faults.adz", func, args).kind
}

fn oob(array: &str, index: i64, len: i64) -> TrapKind {
    TrapKind::IndexOutOfBounds {
        array: array.into(),
        index,
        len,
    }
}

#[test]
fn out_of_bounds_read_and_write_and_negative_index() {
    let x = || Val::Array(vec![1.0, 2.0]);
    assert_eq!(run_both("read_at", &[x(), Val::I64(2)]), oob("x", 2, 2));
    assert_eq!(run_both("read_at", &[x(), Val::I64(-1)]), oob("x", -1, 2));
    assert_eq!(
        run_both("write_at", &[x(), Val::I64(5), Val::F64(0.0)]),
        oob("x", 5, 2)
    );
    assert_eq!(run_both("scratch_oob", &[Val::I64(3)]), oob("t", 3, 3));
}

#[test]
fn errors_name_the_faulting_function() {
    // Without inlining the error names the callee that faults; the inliner
    // moves that code into the caller, and the error then names the callee
    // it came from and the caller it was inlined into (docs/robustness.md,
    // "Faults in inlined code"). `RunError::func` is the function executing
    // the code, `RunError::inlined` the chain of inlined functions.
    let path = root().join("tests/programs/faults.adz");
    let mut session = load(&path);
    // The location is `x[i]` in `read_at`, inlined or not.
    let at = format!("at {}:3:39", path.display());
    for (inline, func, inlined, message) in [
        (
            adze::InlineSetting::None,
            "read_at",
            vec![],
            format!("in function `read_at` {at}"),
        ),
        (
            adze::InlineSetting::All,
            "nested_fault",
            vec!["read_at"],
            format!("in function `read_at` {at}, inlined into function `nested_fault`"),
        ),
    ] {
        session.inline = inline;
        for engine in [Engine::Interp, Engine::Jit] {
            let err = session
                .run("nested_fault", &[Val::Array(vec![1.0])], engine)
                .unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("{message}: index 1 is out of bounds for array `x` of length 1")
            );
            let Error::Run(e) = err else {
                panic!("expected a run-time error")
            };
            assert_eq!(e.func, func);
            assert_eq!(e.inlined, inlined);
        }
    }
}

/// A fault two inlining levels deep (`deep_fault` calls `mid_fault`, which
/// calls `read_at`): with `--inline all` the message names `read_at`, then
/// `mid_fault`, then `deep_fault`; without inlining, `read_at` alone. The
/// same on both engines, through the API and through `adze run`.
#[test]
fn faults_in_code_inlined_two_levels_deep_name_the_chain() {
    const OOB: &str = "index 2 is out of bounds for array `x` of length 2";
    let path = root().join("tests/programs/faults.adz");
    let mut session = load(&path);
    let at = format!("at {}:3:39", path.display());
    let cases = [
        (
            adze::InlineSetting::None,
            "none",
            "read_at",
            vec![],
            format!("in function `read_at` {at}: {OOB}"),
        ),
        (
            adze::InlineSetting::All,
            "all",
            "deep_fault",
            vec!["read_at", "mid_fault"],
            format!(
                "in function `read_at` {at}, inlined into function `mid_fault`, \
                 inlined into function `deep_fault`: {OOB}"
            ),
        ),
    ];
    for (inline, flag, func, chain, message) in cases {
        session.inline = inline;
        let mut errors = Vec::new();
        for engine in [Engine::Interp, Engine::Jit] {
            match session.run("deep_fault", &[Val::Array(vec![1.0, 2.0])], engine) {
                Err(Error::Run(e)) => {
                    assert_eq!(e.func, func, "{flag} {engine:?}");
                    assert_eq!(e.inlined, chain, "{flag} {engine:?}");
                    assert_eq!(e.to_string(), message, "{flag} {engine:?}");
                    errors.push(e);
                }
                other => panic!("{flag} {engine:?}: expected a fault, got {other:?}"),
            }
        }
        assert_eq!(errors[0], errors[1], "engines disagree ({flag})");
        for engine in ["jit", "interp"] {
            let args: Vec<String> = [
                "run",
                &path.display().to_string(),
                "--fn",
                "deep_fault",
                "--arg",
                "x=[1, 2]",
                "--inline",
                flag,
                "--engine",
                engine,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let out = adze(&args);
            assert_eq!(out.code, 1, "{args:?}");
            assert_eq!(out.stderr, format!("error: {message}\n"), "{args:?}");
        }
    }
}

#[test]
fn integer_division_faults() {
    assert_eq!(
        run_both("divide", &[Val::I64(1), Val::I64(0)]),
        TrapKind::DivisionByZero
    );
    assert_eq!(
        run_both("remainder", &[Val::I64(1), Val::I64(0)]),
        TrapKind::DivisionByZero
    );
    assert_eq!(
        run_both("divide", &[Val::I64(i64::MIN), Val::I64(-1)]),
        TrapKind::DivisionOverflow
    );
}

#[test]
fn bad_allocations() {
    assert_eq!(
        run_both("alloc", &[Val::I64(-1)]),
        TrapKind::BadArrayLength {
            len: -1,
            max: adze_ir::runtime::MAX_ARRAY_LEN
        }
    );
    assert_eq!(
        run_both("alloc", &[Val::I64(1 << 40)]),
        TrapKind::BadArrayLength {
            len: 1 << 40,
            max: adze_ir::runtime::MAX_ARRAY_LEN
        }
    );
}

#[test]
fn runaway_recursion_is_caught() {
    assert_eq!(
        run_both("runaway", &[Val::I64(0)]),
        TrapKind::CallDepthExceeded { limit: 100_000 }
    );
}

#[test]
fn bad_arguments_and_missing_functions() {
    let session = load(&root().join("tests/programs/faults.adz"));
    for engine in [Engine::Interp, Engine::Jit] {
        let err = session.run("divide", &[Val::I64(1)], engine).unwrap_err();
        assert_eq!(
            err.to_string(),
            "in function `divide`: expected 2 argument(s), got 1"
        );
        let err = session
            .run("divide", &[Val::F64(1.0), Val::I64(1)], engine)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "in function `divide`: argument `a` must be an i64, got an f64"
        );
        let err = session.run("nope", &[], engine).unwrap_err();
        assert!(matches!(err, Error::UnknownFunction { .. }), "{err}");
    }
}

// ---------------------------------------------------------------------------
// Faults inside derivatives name the user's function and the derivative
// (`adze_ir::names`), keeping the raw name of the generated function.

/// Derivatives that fault: out of bounds in a forward, a reverse and a
/// forward-over-reverse derivative, in a reverse rule and in its forward
/// derivative, and runaway recursion (never inlined).
const DERIVED_FAULTS: &str = "
fn shifted(a: [f64], k: i64) -> f64 {
    var s = 0.0;
    for i in 0..len(a) { s = s + sin(s + a[i]) * a[i + k]; }
    s
}
fn grad_shifted(a: [f64], da: mut [f64], k: i64) {
    autodiff(reverse, shifted, active, dup(a, da), const(k));
}
fn tangent_shifted(a: [f64], ta: [f64], k: i64) -> f64 {
    let (y, dy) = autodiff(forward, shifted, dual, dup(a, ta), const(k));
    dy
}
fn hvp_shifted(a: [f64], ta: [f64], da: mut [f64], hda: mut [f64], k: i64) {
    autodiff(forward, grad_shifted, const, dup(a, ta), dup(da, hda), const(k));
}
fn pick(a: [f64], k: i64) -> f64 { a[0] * a[0] + f64(k) }
rule reverse pick(a: [f64], da: mut [f64], k: i64, dret: f64) {
    da[k] = da[k] + 2.0 * a[0] * dret;
}
fn use_pick(a: [f64], k: i64) -> f64 { sin(pick(a, k)) }
fn grad_pick(a: [f64], da: mut [f64], k: i64) {
    autodiff(reverse, use_pick, active, dup(a, da), const(k));
}
fn hvp_pick(a: [f64], ta: [f64], da: mut [f64], hda: mut [f64], k: i64) {
    autodiff(forward, grad_pick, const, dup(a, ta), dup(da, hda), const(k));
}
fn spiral(x: f64, n: i64) -> f64 {
    if n < 0 { x } else { x * spiral(sin(x), n + 1) }
}
fn grad_spiral(x: f64) -> f64 { autodiff(reverse, spiral, active, active(x), const(0)) }
fn tangent_spiral(x: f64) -> f64 {
    let (y, dy) = autodiff(forward, spiral, dual, dual(x, 1.0), const(0));
    dy
}
";

/// The arguments of each faulting function (k = 1 reads one past the end of
/// `a`; k = 5 writes past the end of `da`).
fn derived_fault_args(func: &str) -> Vec<(&'static str, Val)> {
    let a = || Val::Array(vec![1.0, 2.0, 3.0]);
    let z = || Val::Array(vec![0.0; 3]);
    let t = || Val::Array(vec![1.0, 0.0, 0.0]);
    // k = 1 shifts past the end of `a`; k = 5 picks past the end of `da`.
    let k = || Val::I64(if func.ends_with("_pick") { 5 } else { 1 });
    match func {
        "grad_shifted" | "grad_pick" => vec![("a", a()), ("da", z()), ("k", k())],
        "tangent_shifted" => vec![("a", a()), ("ta", t()), ("k", k())],
        "hvp_shifted" | "hvp_pick" => vec![
            ("a", a()),
            ("ta", t()),
            ("da", z()),
            ("hda", z()),
            ("k", k()),
        ],
        "grad_spiral" | "tangent_spiral" => vec![("x", Val::F64(0.5))],
        _ => unreachable!("{func}"),
    }
}

const OOB_A: &str = "index 3 is out of bounds for array `a` of length 3";
const OOB_DA: &str = "index 5 is out of bounds for array `da` of length 3";
const DEPTH: &str = "call depth limit of 100000 exceeded: a recursion that does not end? (`--max-call-depth` raises the limit)";

/// (inlining, function, raw name of the function that faults, message), for
/// `DERIVED_FAULTS` read from the file `file`. The location is the user's
/// indexing expression (`a[i + k]` in `shifted`, `da[k]` in the rule), or
/// the recursive call of `spiral`, whatever code the derivative made of it
/// and wherever the inliner put that code.
fn derived_fault_cases(
    file: &str,
) -> Vec<(adze::InlineSetting, &'static str, &'static str, String)> {
    use adze::InlineSetting::{All, None};
    let at_shifted = format!(" at {file}:4:50");
    let at_pick = format!(" at {file}:19:13");
    let at_spiral = format!(" (called at {file}:29:31)");
    let derived = |what: &str, raw: &str, at: &str, kind: &str| {
        format!("in {what} (function `{raw}`){at}: {kind}")
    };
    // A generated function, as the message names it.
    let g = |what: &str, raw: &str| format!("{what} (function `{raw}`)");
    // The same, at a location (the innermost function named).
    let g_at = |what: &str, raw: &str, at: &str| format!("{what} (function `{raw}`){at}");
    // Inlined code: innermost first, then each function it was inlined into.
    let inlined =
        |chain: &[String], kind: &str| format!("in {}: {kind}", chain.join(", inlined into "));
    let mut cases = vec![
        (
            None,
            "grad_shifted",
            "shifted.aug.dup_const",
            derived(
                "the augmented primal of the reverse derivative of `shifted`",
                "shifted.aug.dup_const",
                &at_shifted,
                OOB_A,
            ),
        ),
        (
            None,
            "tangent_shifted",
            "shifted.fwd.dup_const",
            derived(
                "the forward derivative of `shifted`",
                "shifted.fwd.dup_const",
                &at_shifted,
                OOB_A,
            ),
        ),
        (
            None,
            "hvp_shifted",
            "shifted.aug.dup_const.fwd.dup_const.noret",
            derived(
                "the forward derivative of the augmented primal of the reverse derivative of `shifted`",
                "shifted.aug.dup_const.fwd.dup_const.noret",
                &at_shifted,
                OOB_A,
            ),
        ),
        (
            None,
            "grad_pick",
            "pick.rule.reverse",
            derived(
                "the reverse rule of `pick`",
                "pick.rule.reverse",
                &at_pick,
                OOB_DA,
            ),
        ),
        (
            None,
            "hvp_pick",
            "pick.rule.reverse.fwd.dup_dup_const_dual.noret",
            derived(
                "the forward derivative of the reverse rule of `pick`",
                "pick.rule.reverse.fwd.dup_dup_const_dual.noret",
                &at_pick,
                OOB_DA,
            ),
        ),
        // Inlined into the user's function: `func` is the user's function,
        // and the message names the inlined code innermost first, then each
        // function it was inlined into (docs/robustness.md).
        (
            All,
            "grad_shifted",
            "grad_shifted",
            inlined(
                &[
                    g_at(
                        "the augmented primal of the reverse derivative of `shifted`",
                        "shifted.aug.dup_const",
                        &at_shifted,
                    ),
                    g("the reverse derivative of `shifted`", "shifted.rev.dup_const"),
                    "function `grad_shifted`".into(),
                ],
                OOB_A,
            ),
        ),
        (
            All,
            "tangent_shifted",
            "tangent_shifted",
            inlined(
                &[
                    g_at(
                        "the forward derivative of `shifted`",
                        "shifted.fwd.dup_const",
                        &at_shifted,
                    ),
                    "function `tangent_shifted`".into(),
                ],
                OOB_A,
            ),
        ),
        (
            All,
            "hvp_shifted",
            "hvp_shifted",
            inlined(
                &[
                    g_at(
                        "the augmented primal of the reverse derivative of `shifted`",
                        "shifted.aug.dup_const",
                        &at_shifted,
                    ),
                    g(
                        "the forward derivative of the reverse derivative of `shifted`",
                        "shifted.rev.dup_const.fwd.dup_dup_const.noret",
                    ),
                    g("the forward derivative of `grad_shifted`", "grad_shifted.fwd.dup_dup_const.noret"),
                    "function `hvp_shifted`".into(),
                ],
                OOB_A,
            ),
        ),
        // Bottom-up, `use_pick.rev` is finished (everything inlined into
        // it) before `grad_pick` considers it, and then too large for the
        // budget: the fault is in the derivative, named as such, and the
        // array is its shadow of `a`.
        (
            All,
            "grad_pick",
            "use_pick.rev.dup_const",
            inlined(
                &[
                    g_at("the reverse rule of `pick`", "pick.rule.reverse", &at_pick),
                    g(
                        "the adjoint code applying the reverse rule of `pick`",
                        "pick.rule.reverse.apply.t0.d",
                    ),
                    g("the adjoint of the reverse derivative of `use_pick`", "use_pick.adj.dup_const"),
                    g("the reverse derivative of `use_pick`", "use_pick.rev.dup_const"),
                ],
                "index 5 is out of bounds for array `a.d` (the shadow of `a`) of length 3",
            ),
        ),
        // Not inlined into `hvp_pick` (the inliner's budget): a generated
        // name, and the array is the derivative's shadow of `a`; the code
        // that faults was inlined into it before it was differentiated
        // (forward derivatives keep the provenance of their primal).
        (
            All,
            "hvp_pick",
            "use_pick.rev.dup_const.fwd.dup_dup_const.noret",
            inlined(
                &[
                    g_at("the reverse rule of `pick`", "pick.rule.reverse", &at_pick),
                    g(
                        "the adjoint code applying the reverse rule of `pick`",
                        "pick.rule.reverse.apply.t0.d",
                    ),
                    g("the adjoint of the reverse derivative of `use_pick`", "use_pick.adj.dup_const"),
                    g(
                        "the forward derivative of the reverse derivative of `use_pick`",
                        "use_pick.rev.dup_const.fwd.dup_dup_const.noret",
                    ),
                ],
                "index 5 is out of bounds for array `a.d` (the shadow of `a`) of length 3",
            ),
        ),
    ];
    // Recursion is never inlined: the same under both settings. The
    // recursive call's split pair takes its scalar arguments (a final
    // derivative: nothing untaken, no `.u` suffix).
    for inline in [None, All] {
        cases.extend([
            (
                inline,
                "grad_spiral",
                "spiral.aug.active_const",
                derived(
                    "the augmented primal of the reverse derivative of `spiral`",
                    "spiral.aug.active_const",
                    &at_spiral,
                    DEPTH,
                ),
            ),
            (
                inline,
                "tangent_spiral",
                "spiral.fwd.dual_const",
                derived(
                    "the forward derivative of `spiral`",
                    "spiral.fwd.dual_const",
                    &at_spiral,
                    DEPTH,
                ),
            ),
        ]);
    }
    cases
}

#[test]
fn faults_inside_derivatives_name_the_users_function() {
    let mut session = adze::Session::from_source("derived_faults.adz", DERIVED_FAULTS).unwrap();
    for (inline, func, raw, message) in derived_fault_cases("derived_faults.adz") {
        session.inline = inline;
        let args: Vec<Val> = derived_fault_args(func)
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        for engine in [Engine::Interp, Engine::Jit] {
            match session.run(func, &args, engine) {
                Err(Error::Run(e)) => {
                    assert_eq!(e.func, raw, "{inline:?} {func} on {engine:?}");
                    assert_eq!(e.to_string(), message, "{inline:?} {func} on {engine:?}");
                }
                other => panic!("{inline:?} {func} on {engine:?}: expected a fault, got {other:?}"),
            }
        }
    }
}

/// A derivative requested through the API (`Session::derive`, `adze run
/// --derive`): the vector-mode forward derivative names its width.
#[test]
fn faults_inside_api_derivatives_name_the_users_function() {
    let mut session = adze::Session::from_source("derived_faults.adz", DERIVED_FAULTS).unwrap();
    session.inline = adze::InlineSetting::None;
    let (module, name) = session
        .derive("shifted", adze_ir::Mode::Forward, 2, &[])
        .unwrap();
    assert_eq!(name, "shifted.fwd.dup_const.x2");
    let a = Val::Array(vec![1.0, 2.0, 3.0]);
    let args = [a.clone(), a.clone(), a, Val::I64(1)];
    for engine in [Engine::Interp, Engine::Jit] {
        let err = session.run_in(&module, &name, &args, engine).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "in the forward derivative (vector mode, width 2) of `shifted` \
                 (function `shifted.fwd.dup_const.x2`) at derived_faults.adz:4:50: {OOB_A}"
            )
        );
    }
}

/// The same faults through `adze run`: one line, exit 1; `--json` too.
#[test]
fn faults_inside_derivatives_through_the_command() {
    let path = std::env::temp_dir().join(format!("adze-derived-faults-{}.adz", std::process::id()));
    std::fs::write(&path, DERIVED_FAULTS).unwrap();
    let file = path.display().to_string();
    for (inline, func, _, message) in derived_fault_cases(&file) {
        let inline = match inline {
            adze::InlineSetting::None => "none",
            _ => "all",
        };
        let mut args: Vec<String> = ["run", &file, "--fn", func, "--inline", inline]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for (name, value) in derived_fault_args(func) {
            args.push("--arg".into());
            args.push(format!("{name}={value}"));
        }
        for engine in ["jit", "interp"] {
            let mut args = args.clone();
            args.extend(["--engine".to_string(), engine.to_string()]);
            let out = adze(&args);
            assert_eq!(out.code, 1, "{args:?}");
            assert!(out.stdout.is_empty(), "{args:?}");
            assert_eq!(out.stderr, format!("error: {message}\n"), "{args:?}");
            args.push("--json".into());
            let out = adze(&args);
            assert_eq!(out.code, 1, "{args:?}");
            let v: serde_json::Value = serde_json::from_str(&out.stderr).unwrap();
            assert_eq!(v["error"], message.as_str(), "{args:?}");
        }
    }
    let _ = std::fs::remove_file(&path);
}

/// Every function the AD passes create for the examples, the test
/// programs and the fuzz seeds (their `autodiff`s, and the forward, vector
/// and reverse derivatives of every function) is described by the module's
/// records of what it is made from, so a fault in it is described; the
/// descriptions are in `tests/expected/descriptions.txt` (`ADZE_BLESS=1`).
/// When it was written, every one was checked equal to what the former
/// parser of names (`adze_ir::names::describe`, removed in session 6)
/// made of the function's name.
#[test]
fn every_generated_function_is_described() {
    use adze_ir::{ArgActivity, RetActivity, Type};
    let mut files = crate::support::examples();
    for dir in ["tests/programs", "fuzz/seeds"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "adz") {
                files.push(path);
            }
        }
    }
    let mut names = std::collections::BTreeSet::new();
    let mut descriptions = std::collections::BTreeMap::new();
    let mut described = 0;
    for path in files {
        // (Not every fuzz seed compiles.)
        let Ok(session) = adze::Session::from_file(&path) else {
            continue;
        };
        let mut module = session.module;
        let _ = adze_ad::lower_autodiff(&mut module);
        let users: Vec<(String, adze_ir::Signature)> = module
            .iter()
            .filter(|(_, f)| !f.name.contains('.') && !f.is_declaration())
            .map(|(_, f)| (f.name.clone(), f.sig.clone()))
            .collect();
        for (name, sig) in users {
            let acts = |scalar| crate::support::all_activities(&sig, scalar);
            let all_f64 = !sig.results.is_empty() && sig.results.iter().all(|&t| t == Type::F64);
            for width in [1, 2] {
                let ret = if all_f64 {
                    RetActivity::Dual
                } else {
                    RetActivity::Const
                };
                let _ = adze_ad::derive_forward(
                    &mut module,
                    &name,
                    &acts(ArgActivity::Dual),
                    ret,
                    width,
                );
            }
            let ret = if all_f64 {
                RetActivity::Active
            } else {
                RetActivity::Const
            };
            let _ = adze_ad::derive_reverse(&mut module, &name, &acts(ArgActivity::Active), ret);
        }
        for (id, f) in module.iter().filter(|(_, f)| f.name.contains('.')) {
            let what = module.describe_function(id);
            assert!(what.is_some(), "`{}` is not described", f.name);
            descriptions.insert(f.name.clone(), what.unwrap());
            described += 1;
        }
        names.extend(module.iter().map(|(_, f)| f.name.clone()));
    }
    assert!(described > 100, "only {described} generated functions");
    let text: String = descriptions
        .iter()
        .map(|(name, what)| format!("{name}\n    {what}\n"))
        .collect();
    adze_test_support::expect_file(root().join("tests/expected/descriptions.txt"), &text);
    let generated: Vec<&String> = names.iter().filter(|n| n.contains('.')).collect();
    assert!(
        generated.len() > 100,
        "only {} generated names",
        generated.len()
    );
    for kind in [
        ".fwd.",
        ".aug.",
        ".adj.",
        ".rev.",
        ".rule.",
        ".apply.",
        "adze.tape.",
        ".x2",
    ] {
        assert!(
            generated.iter().any(|n| n.contains(kind)),
            "no `{kind}` name"
        );
    }
}

/// A fault reports one `FILE:LINE:COL` whatever the setting: through `adze
/// run`, under `--inline none|early|late|all` × both engines × optimizer
/// on/off. In the primal (an out-of-bounds read, an integer remainder by
/// zero) the whole message is the same under the 16 settings; in a reverse
/// derivative (`--derive reverse`, the out-of-bounds read in the
/// derivative's code) the location is the user's indexing expression and
/// the message the same under each inline setting (the late inliner moves
/// the augmented primal into the derivative, which the message names).
#[test]
fn fault_locations_agree_under_every_setting() {
    let f = "tests/programs/locations.adz";
    let run = |args: &[&str]| -> Vec<(String, String)> {
        let mut out = Vec::new();
        for inline in ["none", "early", "late", "all"] {
            for engine in ["jit", "interp"] {
                for opt in [None, Some("--no-opt")] {
                    let mut a: Vec<String> = ["run", f]
                        .iter()
                        .chain(args)
                        .chain(&["--inline", inline, "--engine", engine])
                        .map(|s| s.to_string())
                        .collect();
                    a.extend(opt.map(String::from));
                    let o = adze(&a);
                    assert_eq!(o.code, 1, "{a:?}");
                    assert!(o.stdout.is_empty(), "{a:?}");
                    let err = o.stderr;
                    assert_eq!(err.lines().count(), 1, "{a:?}: {err}");
                    out.push((inline.to_string(), err));
                }
            }
        }
        out
    };
    let oob = run(&["--fn", "oob", "--arg", "a=[1, 2]", "--arg", "k=1"]);
    for (inline, err) in &oob {
        assert_eq!(
            err,
            "error: in function `oob` at tests/programs/locations.adz:10:9: \
             index 2 is out of bounds for array `a` of length 2\n",
            "--inline {inline}"
        );
    }
    let div = run(&["--fn", "divide", "--arg", "n=1", "--arg", "d=0"]);
    for (inline, err) in &div {
        assert_eq!(
            err,
            "error: in function `divide` at tests/programs/locations.adz:26:5: \
             integer division by zero\n",
            "--inline {inline}"
        );
    }
    let rev = run(&[
        "--fn",
        "grad_me",
        "--derive",
        "reverse",
        "--arg",
        "a=[1, 2]",
        "--arg",
        "a.d=[0, 0]",
        "--arg",
        "n=3",
    ]);
    let aug = "error: in the augmented primal of the reverse derivative of `grad_me` \
               (function `grad_me.aug.dup_const`) at tests/programs/locations.adz:20:43";
    let oob3 = "index 3 is out of bounds for array `a` of length 2\n";
    for (inline, err) in &rev {
        let want = match inline.as_str() {
            "none" | "early" => format!("{aug}: {oob3}"),
            _ => format!(
                "{aug}, inlined into the reverse derivative of `grad_me` \
                 (function `grad_me.vjp.dup_const`): {oob3}"
            ),
        };
        assert_eq!(err, &want, "--inline {inline}");
    }
}

const TAPED_LOOP: &str = "
fn loop4(x: f64, n: i64) -> f64 {
    var a = x;
    var b = 1.0;
    for i in 0..n {
        let c = sin(a) * b;
        b = cos(b) + c * a;
        a = c;
    }
    a + b
}

fn grad(x: f64, n: i64) -> f64 {
    autodiff(reverse, loop4, active, active(x), const(n))
}
";

/// The tape budget (`Limits::tape_limit`, `--tape-limit`): a derivative
/// whose tape would pass it stops with the same error on both engines, at
/// the same trip counts, and one within it runs as without a budget.
#[test]
fn the_tape_budget_stops_both_engines_alike() {
    let mut session = adze::Session::from_source("tape.adz", TAPED_LOOP).unwrap();
    let unlimited = session.clone();
    session.limits.tape_limit = 4096;
    session.checkpoint_fallback = false;
    let (mut ran, mut stopped) = (0, 0);
    for n in (100..=220).step_by(3) {
        let args = [Val::F64(0.5), Val::I64(n)];
        let [interp, jit] = [Engine::Interp, Engine::Jit].map(|e| session.run("grad", &args, e));
        match (interp, jit) {
            (Ok(a), Ok(b)) => {
                assert!(a.bit_eq(&b), "n = {n}");
                let free = unlimited.run("grad", &args, Engine::Jit).unwrap();
                assert!(a.bit_eq(&free), "n = {n}: the budget changed the result");
                ran += 1;
            }
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string(), "n = {n}");
                assert!(
                    a.to_string().ends_with(
                        "the reverse-mode tape needs more than its budget of 4 KiB \
                         (`--tape-limit BYTES` raises it; `--checkpoint`, or `#[checkpoint]` \
                         on the loop, bounds it, and `#[checkpoint(snapshots = K)]` to K \
                         snapshots; `adze dump --annotate tape` says why a loop is not \
                         checkpointed)"
                    ),
                    "{a}"
                );
                stopped += 1;
            }
            (a, b) => panic!("n = {n}: the engines disagree: {a:?} / {b:?}"),
        }
    }
    assert!(ran > 5 && stopped > 5, "{ran} ran, {stopped} stopped");
}

/// A `view` does not trap (the AD passes make it where a `slice` already
/// checked its bounds, or hoisted out of a loop that may not run), but
/// verified IR from anywhere may hold a bad one: it is then empty, and an
/// access through it fails its bounds check alike on both engines —
/// compiled code never reads outside the array.
#[test]
fn a_view_outside_its_array_is_empty_on_both_engines() {
    let text = "function @f(x: arr, lo: i64, hi: i64) -> f64 {
block0(v0: arr, v1: i64, v2: i64):
    v3 = view v0, v1, v2
    v4 = iconst 0
    v5 = load v3, v4
    return v5
}
";
    let module = adze_ir::parse::parse_module(text).unwrap();
    let session = adze::Session::from_module(module).unwrap();
    let x = Val::Array(vec![1.0, 2.0, 3.0]);
    let ok = [x.clone(), Val::I64(1), Val::I64(3)];
    for engine in [Engine::Interp, Engine::Jit] {
        let out = session.run("f", &ok, engine).unwrap();
        assert_eq!(out.results, vec![Val::F64(2.0)]);
    }
    for (lo, hi) in [(1, 4), (2, 1), (-1, 2), (0, i64::MAX)] {
        let args = [x.clone(), Val::I64(lo), Val::I64(hi)];
        let [a, b] = [Engine::Interp, Engine::Jit]
            .map(|e| session.run("f", &args, e).unwrap_err().to_string());
        assert_eq!(a, b, "{lo}..{hi}");
        assert!(
            a.contains("index 0 is out of bounds for array `x[..]` of length 0"),
            "{a}"
        );
    }
}
