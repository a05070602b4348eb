//! The `adze` command as a user runs it: results, `--json`, and errors as
//! one readable line with exit code 1.

use crate::support::{adze, nested_d3, root, Output};

#[test]
fn run_prints_the_result_and_mut_arrays() {
    let out = adze(&[
        "run",
        "ir-examples/arrays.adz",
        "--fn",
        "normalize",
        "--arg",
        "x=[3.0, 4.0]",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "5.0\nx = [0.6000000000000001, 0.8]\n");
}

#[test]
fn run_json_has_the_documented_shape() {
    let out = adze(&[
        "run",
        "ir-examples/arrays.adz",
        "--fn",
        "prefix_sums",
        "--arg",
        "x=[1, 2, 3]",
        "--arg",
        "out=[0, 0, 0]",
        "--json",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "{\"result\":null,\"arrays\":{\"out\":[1.0,3.0,6.0]}}\n"
    );
    let out = adze(&[
        "run",
        "ir-examples/tuples.adz",
        "--fn",
        "divmod",
        "--arg",
        "a=17",
        "--arg",
        "b=5",
        "--json",
    ]);
    assert_eq!(out.stdout, "{\"result\":[3,2],\"arrays\":{}}\n");
    for inline in ["none", "early", "late", "all"] {
        let out = adze(&[
            "run",
            "ir-examples/seed.adz",
            "--fn",
            "g_custom",
            "--arg",
            "x=[2.0]",
            "--json",
            "--inline",
            inline,
        ]);
        assert_eq!(
            out.stdout,
            "{\"result\":-0.6536436208636119,\"arrays\":{}}\n"
        );
    }
}

#[test]
fn interpreter_engine_gives_the_same_output() {
    let args = [
        "run",
        "ir-examples/recursion.adz",
        "--fn",
        "fib",
        "--arg",
        "n=15",
    ];
    let jit = adze(&args);
    let interp = adze(&[&args[..], &["--engine", "interp"]].concat());
    assert_eq!(jit.stdout, "610\n");
    assert_eq!(interp.stdout, jit.stdout);
}

/// Runs a failing command: exit code 1, nothing on stdout, one line on stderr.
fn fails_with(args: &[&str], needle: &str) {
    let out = adze(args);
    assert_eq!(out.code, 1, "{args:?}: {}{}", out.stdout, out.stderr);
    assert_eq!(out.stdout, "");
    assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {}", out.stderr);
    assert!(out.stderr.starts_with("error: "), "{}", out.stderr);
    assert!(
        out.stderr.contains(needle),
        "{args:?}: {} lacks {needle}",
        out.stderr
    );
}

#[test]
fn run_time_faults_exit_1_with_one_line() {
    let f = "tests/programs/faults.adz";
    fails_with(
        &[
            "run", f, "--fn", "read_at", "--arg", "x=[1.0]", "--arg", "i=3",
        ],
        "in function `read_at` at tests/programs/faults.adz:3:39: index 3 is out of bounds for array `x` of length 1",
    );
    fails_with(
        &[
            "run", f, "--fn", "read_at", "--arg", "x=[1.0]", "--arg", "i=-1",
        ],
        "index -1 is out of bounds",
    );
    fails_with(
        &[
            "run", f, "--fn", "write_at", "--arg", "x=[1.0]", "--arg", "i=1", "--arg", "v=2",
        ],
        "in function `write_at` at tests/programs/faults.adz:5:45: index 1 is out of bounds for array `x`",
    );
    fails_with(
        &["run", f, "--fn", "divide", "--arg", "a=1", "--arg", "b=0"],
        "in function `divide` at tests/programs/faults.adz:7:36: integer division by zero",
    );
    fails_with(
        &[
            "run",
            f,
            "--fn",
            "remainder",
            "--arg",
            "a=1",
            "--arg",
            "b=0",
        ],
        "in function `remainder` at tests/programs/faults.adz:9:39: integer division by zero",
    );
    fails_with(
        &["run", f, "--fn", "alloc", "--arg", "n=-5"],
        "in function `alloc` at tests/programs/faults.adz:12:13: cannot allocate an array of length -5",
    );
    fails_with(
        &["run", f, "--fn", "runaway", "--arg", "n=0"],
        "in function `runaway` (called at tests/programs/faults.adz:16:29): call depth limit of 100000 exceeded",
    );
    for engine in ["jit", "interp"] {
        fails_with(
            &[
                "run", f, "--fn", "divide", "--arg", "a=1", "--arg", "b=0", "--engine", engine,
            ],
            "in function `divide`",
        );
    }
}

#[test]
fn bad_requests_exit_1_with_one_line() {
    let f = "tests/programs/faults.adz";
    fails_with(&["run", f, "--fn", "nope"], "no function named `nope`");
    fails_with(
        &["run", f, "--fn", "divide", "--arg", "a=1"],
        "missing `--arg b=VALUE`",
    );
    fails_with(
        &["run", f, "--fn", "divide", "--arg", "a=1.5", "--arg", "b=1"],
        "expected an integer, got `1.5`",
    );
    fails_with(
        &[
            "run", f, "--fn", "divide", "--arg", "a=1", "--arg", "b=1", "--arg", "c=1",
        ],
        "has no parameter `c`",
    );
    fails_with(
        &["run", "no/such/file.adz", "--fn", "f"],
        "cannot read `no/such/file.adz`",
    );
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(adze(&["run"]).code, 2);
    assert_eq!(adze(&["frobnicate"]).code, 2);
    assert_eq!(adze(&["dump", "x.adz", "--stage", "nope"]).code, 2);
}

#[test]
fn json_errors_are_json() {
    let out = adze(&[
        "run",
        "tests/programs/faults.adz",
        "--fn",
        "divide",
        "--arg",
        "a=1",
        "--arg",
        "b=0",
        "--json",
    ]);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr,
        "{\"error\":\"in function `divide` at tests/programs/faults.adz:7:36: integer division by zero\"}\n"
    );
}

#[test]
fn check_and_dump() {
    let out = adze(&["check", "ir-examples/seed.adz"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("ok: "), "{}", out.stdout);
    let out = adze(&["dump", "ir-examples/scalar.adz", "--fn", "poly"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out
        .stdout
        .starts_with("; stage: parsed\nfunction @poly(x: f64) -> f64 {\n"));
    let out = adze(&["dump", "ir-examples/scalar.adz", "--stage", "all"]);
    assert_eq!(out.stdout.matches("; stage: ").count(), 4);
}

#[test]
fn every_malformed_program_gives_a_located_diagnostic() {
    let dir = root().join("tests/malformed");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "adz"))
        .collect();
    files.sort();
    assert!(files.len() >= 40, "only {} malformed programs", files.len());
    for file in files {
        let rel = crate::support::relative(&file);
        let out = adze(&["check", &rel]);
        assert_eq!(out.code, 1, "{rel}: {}", out.stderr);
        let first = out.stderr.lines().next().unwrap_or("");
        // `FILE:LINE:COL: error: message`, then the rendered excerpt.
        let loc = format!("{rel}:");
        assert!(first.starts_with(&loc), "{rel}: first line {first:?}");
        assert!(
            out.stderr.contains(" │ "),
            "{rel}: no source excerpt:\n{}",
            out.stderr
        );
    }
}

#[test]
fn check_rules_flags_the_seeds_wrong_rule() {
    let out = adze(&["check-rules", "ir-examples/seed.adz"]).exits(1);
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with("f_custom.rule.reverse"))
        .unwrap_or_else(|| panic!("no row for the rule:\n{}", out.stdout));
    assert!(
        row.contains("reverse") && row.ends_with("DISAGREES"),
        "{row}"
    );
    // The forward-over-reverse HVP differentiates `f_custom`'s body in
    // forward mode, which its reverse rule does not cover: a warning first.
    assert!(
        out.stderr.starts_with(
            "ir-examples/seed.adz:12:1: warning: `f_custom` has no forward rule, but forward mode \
             differentiates it: its reverse rule is ignored there\n"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.ends_with(
            "\n\nerror: 1 rule(s) disagree with the derivative of their function's body: \
             f_custom.rule.reverse\n"
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn check_rules_accepts_correct_rules_and_finds_a_wrong_forward_rule() {
    let out = adze(&["check-rules", "ir-examples/rules.adz"]).exits(0);
    assert_eq!(out.stdout.matches("  ok\n").count(), 5, "{}", out.stdout);
    assert!(out.stdout.ends_with("ok: 5 rule(s) agree with AD\n"));

    let out = adze(&["check-rules", "tests/programs/wrong_forward_rule.adz"]).exits(1);
    let rows: Vec<&str> = out.stdout.lines().skip(1).collect();
    assert!(rows[0].starts_with("scale_sum.rule.forward") && rows[0].ends_with("DISAGREES"));
    assert!(rows[1].starts_with("scale_sum.rule.reverse") && rows[1].ends_with("  ok"));
}

/// Splits a shell command line with single quotes (enough for the README).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            _ => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(cur);
    }
    words
}

#[test]
fn the_readme_commands_work() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut ran = 0;
    let mut lines = readme.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim().strip_prefix("cargo run --release -- ") else {
            continue;
        };
        // Join `\` continuations and drop trailing comments.
        let mut cmd = rest.to_string();
        while cmd.trim_end().ends_with('\\') {
            cmd = cmd.trim_end().trim_end_matches('\\').to_string();
            cmd.push(' ');
            cmd.push_str(lines.next().unwrap().trim());
        }
        let cmd = cmd.split(" # ").next().unwrap().trim().to_string();
        let words = shell_words(&cmd);
        let args: Vec<&str> = words.iter().map(String::as_str).collect();
        let out = adze(&args);
        let wants_failure = args[0] == "check-rules" && cmd.contains("seed.adz");
        assert_eq!(
            out.code,
            if wants_failure { 1 } else { 0 },
            "{cmd}: {}",
            out.stderr
        );
        if ran == 0 {
            // The main example: the README says what it prints.
            assert_eq!(
                out.stdout,
                "dx = [3.027209981231713]\nhv = [11.971902924433648]\n"
            );
        }
        ran += 1;
    }
    assert!(ran >= 5, "only {ran} README commands");
}

#[test]
fn ad_nesting_depth_is_configurable() {
    // d3 is the third derivative of x³: 6 everywhere.
    adze(&nested_d3(&[])).assert_prints("6.0\n");
    adze(&nested_d3(&["--max-ad-depth", "3"])).assert_prints("6.0\n");
    fails_with(
        &nested_d3(&["--max-ad-depth", "2"]),
        "derivatives of `cube` nest more than 2 deep",
    );
}

/// Issue #13, item 5: a function whose declared result some path misses is
/// a diagnostic for every command, never a garbage value, a Cranelift panic
/// or an internal verifier error.
#[test]
fn a_missing_result_is_a_diagnostic_for_every_command() {
    let relu = "tests/malformed/69_branch_ends_with_semicolon.adz";
    let runs: [&[&str]; 7] = [
        &["check", relu],
        &["run", relu, "--fn", "relu", "--arg", "x=2"],
        &[
            "run", relu, "--fn", "caller", "--arg", "x=2", "--inline", "all",
        ],
        &["run", relu, "--fn", "grad", "--arg", "x=2"],
        &[
            "run", relu, "--fn", "relu", "--arg", "x=2", "--derive", "reverse",
        ],
        &["dump", relu, "--stage", "optimized"],
        &["check-rules", relu],
    ];
    for args in runs {
        let out = adze(args);
        assert_eq!(out.code, 1, "{args:?}: {}{}", out.stdout, out.stderr);
        assert_eq!(out.stdout, "", "{args:?}");
        let first = out.stderr.lines().next().unwrap_or("");
        assert_eq!(
            first,
            format!(
                "{relu}:4:21: error: this branch of the `if` can end without a value, \
                 but `relu` must return f64"
            ),
            "{args:?}: {}",
            out.stderr
        );
        assert!(out.stderr.contains("remove the `;`"), "{}", out.stderr);
    }
    let out = adze(&["check", "tests/malformed/70_empty_else.adz"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.starts_with(
            "tests/malformed/70_empty_else.adz:3:37: error: this branch of the `if` can end \
             without a value, but `h` must return f64"
        ),
        "{}",
        out.stderr
    );
    let out = adze(&["check", "tests/malformed/71_if_value_without_value.adz"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.starts_with(
            "tests/malformed/71_if_value_without_value.adz:3:13: error: this `if` has no value"
        ),
        "{}",
        out.stderr
    );
}

/// `check-rules` on one function of `tests/programs/rule_sampling.adz`.
fn check_rules_on(func: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "check-rules",
        "tests/programs/rule_sampling.adz",
        "--fn",
        func,
    ];
    args.extend_from_slice(extra);
    adze(&args)
}

/// The verdict column of the one rule row.
fn verdict(out: &Output) -> &str {
    let row = out.stdout.lines().nth(1).unwrap_or("");
    row.split("  ").last().unwrap_or("").trim()
}

/// The samples compared and skipped, from the one rule row.
fn samples(out: &Output) -> (usize, usize) {
    let row = out.stdout.lines().nth(1).unwrap_or("");
    let cols: Vec<&str> = row.split_whitespace().collect();
    (cols[2].parse().unwrap(), cols[3].parse().unwrap())
}

/// Issue #13, item 7: rules wrong only where three fixed points never look.
#[test]
fn check_rules_samples_bools_lengths_and_magnitudes() {
    for func in ["pick", "total", "square"] {
        let out = check_rules_on(func, &[]);
        assert_eq!(out.code, 1, "{func}: {}{}", out.stdout, out.stderr);
        assert_eq!(verdict(&out), "DISAGREES", "{func}: {}", out.stdout);
        // Where: the options that reproduce the worst sample.
        assert!(
            out.stdout.contains(&format!("{func}.rule."))
                && out.stdout.contains("the largest discrepancy is at --arg"),
            "{}",
            out.stdout
        );
    }
    // Pinned where the rule is right, they agree.
    for (func, pin) in [
        ("pick", &["--arg", "flag=true"][..]),
        ("total", &["--len", "3"][..]),
        ("square", &["--arg", "x=1.5"][..]),
    ] {
        let out = check_rules_on(func, pin);
        assert_eq!(out.code, 0, "{func} {pin:?}: {}{}", out.stdout, out.stderr);
        assert_eq!(verdict(&out), "ok", "{}", out.stdout);
    }
    // A correct rule of a body that needs five elements: the samples where
    // the body faults are skipped, not held against the rule.
    let out = check_rules_on("fifth", &[]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(verdict(&out), "ok", "{}", out.stdout);
    let (compared, skipped) = samples(&out);
    assert_eq!(compared + skipped, 20, "{}", out.stdout);
    assert!(compared > 0 && skipped > 0, "{}", out.stdout);
    // Nowhere to compare: an error, exit 1.
    let out = check_rules_on("fifth", &["--len", "4"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        verdict(&out).starts_with("ERROR: no sample could be compared"),
        "{}",
        out.stdout
    );
}

#[test]
fn check_rules_sampling_is_seeded_and_configurable() {
    let a = check_rules_on("square", &["--seed", "7"]);
    let b = check_rules_on("square", &["--seed", "7"]);
    assert_eq!(a.stdout, b.stdout);
    let out = check_rules_on("fifth", &["--samples", "5", "--len", "6"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(samples(&out), (5, 0), "{}", out.stdout);
    // The worst point, pasted back as `--arg`s, reproduces the disagreement.
    let out = check_rules_on("square", &[]);
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains("largest discrepancy is at"))
        .unwrap();
    let at = line.split("is at ").nth(1).unwrap();
    let words = shell_words(at);
    let pinned: Vec<&str> = words.iter().map(String::as_str).collect();
    let out = check_rules_on("square", &pinned);
    assert_eq!(verdict(&out), "DISAGREES", "{at}: {}", out.stdout);
    fails_with(
        &[
            "check-rules",
            "tests/programs/rule_sampling.adz",
            "--arg",
            "nope=1",
        ],
        "no function with rules has a parameter `nope`",
    );
    fails_with(
        &[
            "check-rules",
            "tests/programs/rule_sampling.adz",
            "--samples",
            "0",
        ],
        "`--samples` must be at least 1",
    );
}

/// Issue #13, item 8: a function whose rules do not cover a mode the
/// program differentiates it in is a warning (exit 0).
#[test]
fn rules_that_do_not_cover_a_requested_mode_are_warned_about() {
    let f = "tests/programs/mode_coverage.adz";
    let warning = format!(
        "{f}:7:1: warning: `softplus` has no reverse rule, but reverse mode differentiates it: \
         its forward rule is ignored there"
    );
    for cmd in ["check", "check-rules"] {
        let out = adze(&[cmd, f]);
        assert_eq!(out.code, 0, "{cmd}: {}{}", out.stdout, out.stderr);
        assert_eq!(
            out.stderr.lines().next(),
            Some(warning.as_str()),
            "{}",
            out.stderr
        );
        assert!(out
            .stderr
            .contains("reverse-mode derivative of `softplus` requested here"));
        assert!(out.stderr.contains(
            "to cover reverse mode write `rule reverse softplus(x: f64, dret: f64) -> f64 { .. }`"
        ));
        let summaries = out.stderr.lines().filter(|l| l.starts_with(f)).count();
        assert_eq!(summaries, 1, "{}", out.stderr);
    }
    // The forward rule is right, and used forward; reverse uses the body.
    let out = adze(&["run", f, "--fn", "dsoftplus", "--arg", "x=800"]);
    out.assert_prints("1.0\n");
    // `--derive reverse` asks for the mode the rule does not cover.
    let out = adze(&[
        "run", f, "--fn", "softplus", "--arg", "x=1", "--derive", "reverse",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.starts_with(&format!(
            "{f}:7:1: warning: `softplus` has no reverse rule, but `--derive reverse` differentiates it"
        )),
        "{}",
        out.stderr
    );
    let out = adze(&[
        "run", f, "--fn", "softplus", "--arg", "x=800", "--arg", "x.t=1", "--derive", "forward",
    ]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""));
    assert_eq!(out.stdout, "(800.0, 1.0)\n");
    // What the warning is about: the body's reverse derivative overflows.
    let out = adze(&[
        "run", f, "--fn", "softplus", "--arg", "x=800", "--derive", "reverse",
    ]);
    // (Reverse mode prints the primal value, then the labelled adjoint.)
    assert_eq!(out.stdout, "inf\nd/dx = NaN\n", "{}", out.stderr);
    let out = adze(&[
        "run", f, "--fn", "softplus", "--arg", "x=1", "--derive", "reverse", "--json",
    ]);
    assert!(out.stderr.starts_with("{\"warning\":"), "{}", out.stderr);
    // Rules used only in their own modes: no warning.
    for quiet in ["ir-examples/rules.adz", "ir-examples/scalar.adz"] {
        let out = adze(&["check", quiet]);
        assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{quiet}");
    }
}

#[test]
fn check_inline_passes_on_an_example_and_needs_an_autodiff() {
    let out = adze(&["check-inline", "ir-examples/seed.adz", "--samples", "2"]).exits(0);
    assert!(out.stdout.contains(": 0 difference(s)"), "{}", out.stdout);
    let out = adze(&["check-inline", "ir-examples/scalar.adz"]).exits(1);
    assert!(
        out.stderr.contains("has no function with an `autodiff`"),
        "{}",
        out.stderr
    );
    let out = adze(&[
        "check-inline",
        "ir-examples/scalar.adz",
        "--fn",
        "poly",
        "--samples",
        "2",
    ])
    .exits(0);
    assert!(
        out.stdout.contains("run(s) of 3 function(s)"),
        "{}",
        out.stdout
    );
}

/// `adze dump --format dot`: one graph per function, clusters for inlined
/// code and rule regions, tape traffic in color; Graphviz reads it back
/// when it is installed (the test then renders every stage of every
/// example).
#[test]
fn dump_format_dot_draws_every_function() {
    let out = adze(&[
        "dump",
        "ir-examples/seed.adz",
        "--stage",
        "optimized",
        "--format",
        "dot",
    ])
    .exits(0);
    let graphs = out.stdout.matches("digraph \"").count();
    assert!(graphs > 10, "{graphs} graphs");
    assert!(out.stdout.contains("label=\"rule region of @f_custom\""));
    assert!(out.stdout.contains("label=\"inlined @g_custom.aug.dup\""));
    assert!(out.stdout.contains("<font color=\"#1f4fbf\">  push "));
    assert!(out.stdout.contains("<font color=\"#bf1f1f\">  v"));
    let Ok(probe) = std::process::Command::new("dot").arg("-V").output() else {
        eprintln!("skipped: Graphviz `dot` is not installed");
        return;
    };
    assert!(probe.status.success());
    for path in crate::support::examples() {
        let rel = crate::support::relative(&path);
        let out = adze(&["dump", &rel, "--stage", "all", "--format", "dot"]).exits(0);
        let mut child = std::process::Command::new("dot")
            .arg("-Tsvg")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(out.stdout.as_bytes())
            .unwrap();
        let done = child.wait_with_output().unwrap();
        assert!(
            done.status.success(),
            "{rel}: {}",
            String::from_utf8_lossy(&done.stderr)
        );
    }
}
