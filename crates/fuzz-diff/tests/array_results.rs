//! Array results in the differential fuzzer: the generator writes them in
//! the shapes a user would (helpers returning `[f64]`, `(f64, [f64])`,
//! `([f64], [f64])` and `[i64]`, their callers, in-source derivatives of
//! them, rules on them, and `topa`, a top-level function with array
//! results); the array-top check (`check_array_top`: the function, its
//! forward and reverse derivatives from `Session::derive` under every
//! setting, finite differences, the dot-product test) passes a right
//! program and catches a wrong rule; a fixed seed range with array results
//! passes; and the reduced programs of the open bugs it found
//! (`tests/findings/`), fixed, each now a test.

use adze_fuzz_diff::gen::{self, GenConfig};
use adze_fuzz_diff::{check_array_top, check_function_args, run, ArrayTopCheck, Config, Stats};
use std::collections::BTreeSet;

fn report(stats: &Stats) -> String {
    let mut s = stats.summary();
    for (seed, e) in &stats.rejects {
        s.push_str(&format!("generator reject: seed {seed}: {e}\n"));
    }
    for f in &stats.findings {
        s.push_str(&f.report());
        s.push('\n');
    }
    for m in &stats.dot_mismatches {
        s.push_str(&format!("dot-product mismatch: {m:?}\n"));
    }
    for m in &stats.fd_mismatches {
        s.push_str(&format!("finite-difference mismatch: {m:?}\n"));
    }
    s
}

/// Is there a line for which `pred` holds (trimmed)?
fn any_line(all: &str, pred: impl Fn(&str) -> bool) -> bool {
    all.lines().any(|l| pred(l.trim()))
}

/// Two consecutive lines (trimmed) for which `pred` holds.
fn any_pair(all: &str, pred: impl Fn(&str, &str) -> bool) -> bool {
    let lines: Vec<&str> = all.lines().map(str::trim).collect();
    lines.windows(2).any(|w| pred(w[0], w[1]))
}

/// `(v, v)`: the same array twice in a result.
fn same_twice(l: &str) -> bool {
    let Some(inner) = l.strip_prefix('(').and_then(|l| l.strip_suffix(')')) else {
        return false;
    };
    matches!(inner.split_once(", "), Some((a, b)) if a == b && !a.is_empty() && !a.contains(['(', ' ']))
}

#[test]
fn the_generator_writes_array_results() {
    let config = GenConfig::default();
    let mut all = String::new();
    let mut shapes = BTreeSet::new();
    let (mut tops, mut map, mut tuple, mut pair, mut indices) = (0, 0, 0, 0, 0);
    let (mut calls, mut diffs, mut rules) = (0, 0, 0);
    for seed in 0..300 {
        let p = gen::generate(seed, &config);
        assert!(run::compile(&p.source).is_ok(), "seed {seed}");
        all.push_str(&p.source);
        map += p.features.arr_map;
        tuple += p.features.arr_tuple;
        pair += p.features.arr_pair;
        indices += p.features.indices;
        calls += p.features.array_calls;
        diffs += p.features.array_autodiff;
        rules += p.features.array_rules;
        if let Some(t) = &p.array_top {
            tops += 1;
            shapes.insert(t.results.clone());
            assert!(p.source.contains("fn topa(x: f64, y: f64) -> "));
            assert!(p.source.contains("= topa(x, y);"), "top calls topa");
        }
    }
    assert!(map > 0 && tuple > 0 && pair > 0 && indices > 0);
    assert!(
        calls > 100 && diffs > 10 && rules > 10,
        "{calls} {diffs} {rules}"
    );
    // About 40 % of the programs have an array top, of each shape.
    assert!((80..=160).contains(&tops), "{tops} array tops");
    assert_eq!(shapes.len(), 3, "{shapes:?}");
    for needle in [
        "-> [f64] {",
        "-> (f64, [f64]) {",
        "-> ([f64], [f64]) {",
        "-> [i64] {",
        // Views of the parameter returned (copied).
        "(a[..1], a[1..])",
        // Rules of functions with array results.
        "ta: [f64]) -> ([f64], [f64]) {",
        "dret: [f64]) -> (f64, f64) {",
        "dret0: f64, dret1: [f64]) -> (f64, f64) {",
        "dret0: [f64], dret1: [f64]) -> (f64, f64) {",
    ] {
        assert!(all.contains(needle), "no program contains `{needle}`");
    }
    // The parameter itself returned (copied), alone.
    assert!(any_line(&all, |l| l == "a"), "no `a` tail");
    // An early return of an array.
    assert!(any_line(&all, |l| l.starts_with("if ") && l.contains("{ return r")));
    // The same array twice.
    assert!(any_line(&all, same_twice), "no `(v, v)`");
    // Results bound by `let` and `let (..)`, written by the caller, passed
    // on to another call, summed.
    assert!(any_line(&all, |l| l.starts_with("let y") && l.contains(" = f")));
    assert!(any_line(&all, |l| l.starts_with("let (s") && l.contains(", y")));
    assert!(any_line(&all, |l| l.starts_with("let (y") && l.contains(" = f")));
    assert!(any_line(&all, |l| l.starts_with('y') && l.contains("] = ")));
    assert!(any_line(&all, |l| {
        l.contains(" = f")
            && l.split(", y")
                .skip(1)
                .any(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    }));
    assert!(any_line(&all, |l| l.starts_with("for i")
        && l.contains(" + y")
        && l.contains("[i")));
    // A call with an array result in a loop.
    assert!(any_pair(&all, |a, b| {
        a.starts_with("for i")
            && a.ends_with('{')
            && (b.starts_with("let y") || b.starts_with("let ("))
            && b.contains(" = f")
    }));
    // An `[i64]` result used as gather indices.
    assert!(any_line(&all, |l| l.starts_with("for i")
        && l.contains("[p")
        && l.contains("] % len(")));
    // In-source derivatives: forward (tangent arrays) and reverse
    // (cotangents as `dup(..)` in the return position).
    assert!(any_line(&all, |l| l.starts_with("let (y")
        && l.contains("autodiff(forward, f")));
    assert!((0..6).any(|k| all.contains(&format!("autodiff(reverse, f{k}, dup("))));
}

/// `topa` returning a scalar and an array: no finding, and finite
/// differences and the dot-product test checked at every point.
#[test]
fn the_array_top_check_passes_a_right_program() {
    let source = "fn topa(x: f64, y: f64) -> (f64, [f64]) {
    let a = zeros(3);
    for i in 0..3 { a[i] = sin(x * f64(i + 1)) + y * y; }
    var s = 0.0;
    for i in 0..3 { s = s + a[i] * x; }
    (s, a)
}
";
    let module = run::compile(source).unwrap();
    let mut stats = Stats::default();
    let top = ArrayTopCheck {
        name: "topa",
        results: &[false, true],
        dir: [1.0, 0.5],
        rule_free: true,
    };
    let points = [(0.3, -0.7), (1.1, 0.4), (-0.9, 0.2)];
    check_array_top(
        &module,
        source,
        None,
        &top,
        &points,
        &[true; 3],
        &Config::default(),
        &mut stats,
    );
    assert_eq!(stats.findings_count(), 0, "{}", report(&stats));
    assert_eq!(
        (stats.fd_checked, stats.dot_checked),
        (3, 3),
        "{}",
        report(&stats)
    );
    assert!(stats.fd_mismatches.is_empty() && stats.dot_mismatches.is_empty());
    // The function and its two derivatives at each point.
    assert_eq!(stats.comparisons, 9);
}

/// A forward rule of a function with an array result that is wrong (a
/// factor 2 too many): every setting agrees, but the tangents differ from
/// finite differences and from reverse mode (which differentiates the
/// body).
#[test]
fn the_array_top_check_catches_a_wrong_rule() {
    let source = "fn g(x: f64, a: [f64]) -> [f64] {
    let r = zeros(len(a));
    for i in 0..len(a) { r[i] = x * a[i]; }
    r
}
rule forward g(x: f64, tx: f64, a: [f64], ta: [f64]) -> ([f64], [f64]) {
    let r = g(x, a);
    let t = zeros(len(r));
    for i in 0..len(t) { t[i] = 2.0 * tx * a[i] + x * ta[i]; }
    (r, t)
}
fn topa(x: f64, y: f64) -> [f64] {
    let a = zeros(2);
    for i in 0..2 { a[i] = y + f64(i); }
    let r = g(x, a);
    r
}
";
    let module = run::compile(source).unwrap();
    let mut stats = Stats::default();
    let top = ArrayTopCheck {
        name: "topa",
        results: &[true],
        dir: [1.0, 0.0],
        rule_free: true,
    };
    check_array_top(
        &module,
        source,
        None,
        &top,
        &[(0.5, 0.75)],
        &[true],
        &Config::default(),
        &mut stats,
    );
    assert_eq!(stats.findings_count(), 0, "{}", report(&stats));
    assert_eq!(stats.fd_mismatches.len(), 1, "{}", report(&stats));
    assert_eq!(stats.dot_mismatches.len(), 1, "{}", report(&stats));
    let m = &stats.dot_mismatches[0];
    // <u, J v>: u = (1, 1.25), J v = 2 (0.75, 1.75) (the rule's factor 2);
    // <Jᵀ u, v> from the body: 0.75 + 1.25 · 1.75.
    assert_eq!(m.forward, 2.0 * (0.75 + 1.25 * 1.75));
    assert_eq!(m.reverse, 0.75 + 1.25 * 1.75);
}

/// Seeds of the generator with array results that every setting agrees on
/// (chosen from the campaign of docs/robustness.md; they contain helpers
/// returning arrays and array tops).
#[test]
fn array_results_short_run() {
    let config = Config::default();
    let mut stats = Stats::default();
    let mut tops = 0;
    for seed in ARRAY_SEEDS {
        let prog = gen::generate(seed, &config.gen);
        tops += usize::from(prog.array_top.is_some());
        adze_fuzz_diff::check_program(&prog, &config, &mut stats);
    }
    assert!(
        stats.findings_count() == 0 && stats.rejected == 0,
        "{}",
        report(&stats)
    );
    assert!(stats.fd_mismatches.is_empty() && stats.dot_mismatches.is_empty());
    assert!(tops >= 3 && stats.dot_checked > 0, "{}", report(&stats));
}

/// See [`array_results_short_run`].
const ARRAY_SEEDS: [u64; 10] = [
    1200011, 1200012, 1200013, 1200014, 1200015, 1200016, 1200017, 1200018, 1200019, 1200020,
];

// ---- Open bugs the array results found (tests/findings/), each under every
// setting at a few points.

const POINTS: [f64; 4] = [0.0, 1.0, 0.5, 2.0];

fn assert_agree(source: &str, funcs: &[&str]) {
    let module = run::compile(source).unwrap_or_else(|e| panic!("{e}\n{source}"));
    let config = Config::default();
    let mut stats = Stats::default();
    for func in funcs {
        let id = module.get(func).expect("function");
        let n = module.func(id).sig.params.len();
        let args: Vec<Vec<adze::adze_ir::Val>> = POINTS
            .iter()
            .map(|&v| vec![adze::adze_ir::Val::F64(v); n])
            .collect();
        let points: Vec<(f64, f64)> = POINTS.iter().map(|&v| (v, v)).collect();
        check_function_args(
            &module, source, None, func, &points, &args, &config, &mut stats,
        );
    }
    assert_eq!(stats.findings_count(), 0, "{}", report(&stats));
}

#[test]
fn optimizer_keeps_stores_into_a_returned_array() {
    assert_agree(
        include_str!("../../../tests/findings/opt_mem_drops_store_to_returned_array.adz"),
        &["top"],
    );
}

#[test]
fn a_rule_region_with_a_tuple_array_result() {
    assert_agree(
        include_str!("../../../tests/findings/rule_region_tuple_array_result.adz"),
        &["d", "t"],
    );
}

#[test]
fn reverse_through_an_array_result_of_a_call_fed_by_a_call() {
    assert_agree(
        include_str!("../../../tests/findings/reverse_array_result_of_call_fed_by_call.adz"),
        &["r1"],
    );
}

#[test]
fn reverse_clears_the_shadow_of_a_call_result_in_a_loop() {
    assert_agree(
        include_str!("../../../tests/findings/reverse_stale_shadow_of_call_result_in_loop.adz"),
        &["d"],
    );
}

#[test]
fn forward_through_a_store_into_an_inactive_call_result() {
    assert_agree(
        include_str!("../../../tests/findings/forward_inactive_call_result_written_active.adz"),
        &["d"],
    );
}

#[test]
fn forward_tangent_of_a_copied_parameter_has_one_sign() {
    assert_agree(
        include_str!("../../../tests/findings/forward_signed_zero_tangent_of_copied_param.adz"),
        &["d"],
    );
}

#[test]
fn the_vjp_of_a_tuple_with_an_array_is_not_an_internal_error() {
    let source =
        include_str!("../../../tests/findings/cli_derive_reverse_tuple_array_internal_error.adz");
    let session = adze::Session::from_module(run::compile(source).unwrap()).unwrap();
    match session.derivative("h", adze::adze_ir::Mode::Reverse, 1, &[], true) {
        Ok(_) => {}
        Err(e) => assert!(!e.to_string().contains("internal error"), "{e}"),
    }
}

/// Open: an array result the caller activates after the callee read it
/// (see the program's comment for the fix).
#[test]
fn forward_array_result_activated_by_the_caller() {
    assert_agree(
        include_str!("../../../tests/findings/forward_array_result_activated_by_caller.adz"),
        &["d2"],
    );
}

/// Forward over reverse through a reverse rule whose function returns an
/// array that the caller overwrites (see the program's comment): `none`
/// gave the right 1.0, the other inline settings 0.0.
#[test]
fn fwd_over_rev_rule_array_result_overwritten() {
    assert_agree(
        include_str!("../../../tests/findings/fwd_over_rev_rule_array_result_overwritten.adz"),
        &["d2"],
    );
}

/// Seed 2610140 (reduced; session 13): reverse over forward over reverse
/// with a rule region whose argument is an in-source `autodiff`'s result:
/// the last bit of `d3` differed between inline none/late and early/all
/// (the lowering of the `autodiff` renamed the result's uses but not the
/// region's argument).
#[test]
fn rfr_region_argument_from_an_autodiff_result() {
    let source =
        include_str!("../../../tests/findings/rfr_region_argument_from_autodiff_result.adz");
    let module = run::compile(source).unwrap_or_else(|e| panic!("{e}"));
    let mut stats = Stats::default();
    let point = (0.41, 1.2614285714285713);
    let args = vec![vec![
        adze::adze_ir::Val::F64(point.0),
        adze::adze_ir::Val::F64(point.1),
    ]];
    check_function_args(
        &module,
        source,
        None,
        "d3",
        &[point],
        &args,
        &Config::default(),
        &mut stats,
    );
    assert_eq!(stats.findings_count(), 0, "{}", report(&stats));
}
