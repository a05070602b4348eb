//! Run-time faults carry one source location whatever the setting: the
//! generator's programs made to fault (one local array made empty, or one
//! constant index moved out of bounds), run under the 16 settings (4 inline
//! settings × optimizer on/off × both engines), fault alike, at the same
//! `line:col` — in the primal, in derivatives of every order and mode, in
//! rules, inlined or not. (The fuzzer's own comparisons include the
//! location too, `run::Res::Trap`, but its programs do not fault.)
//!
//! `ADZE_FAULT_SEEDS=N` runs more seeds than the default.

use adze_fuzz_diff::gen::{self, GenConfig};
use adze_fuzz_diff::run::{self, Res};

/// Variants of `source` that fault: each `zeros(N)` in turn becomes
/// `zeros(0)`, and each constant index `[K]` in turn `[9]` (arrays are
/// shorter), at most `max` of each kind.
fn faulting_variants(source: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let zeros: Vec<(usize, usize)> = source
        .match_indices("zeros(")
        .filter_map(|(at, pat)| {
            let start = at + pat.len();
            let len = source[start..].find(')')?;
            source[start..start + len]
                .bytes()
                .all(|b| b.is_ascii_digit())
                .then_some((start, start + len))
        })
        .take(max)
        .collect();
    for (a, b) in zeros {
        out.push(format!("{}0{}", &source[..a], &source[b..]));
    }
    let indices: Vec<(usize, usize)> = source
        .match_indices('[')
        .filter_map(|(at, _)| {
            let start = at + 1;
            let len = source[start..].find(']')?;
            let inner = &source[start..start + len];
            (!inner.is_empty() && inner.bytes().all(|b| b.is_ascii_digit()))
                .then_some((start, start + len))
        })
        .take(max)
        .collect();
    for (a, b) in indices {
        out.push(format!("{}9{}", &source[..a], &source[b..]));
    }
    out
}

/// The generator before array results (its seeds 0..8, which this test
/// was written for).
#[test]
fn faults_have_one_location_under_every_setting() {
    faults_have_one_location(&GenConfig {
        array_results: false,
        ..GenConfig::default()
    });
}

/// The same with array results (helpers returning arrays, `topa`).
#[test]
fn faults_in_programs_with_array_results_have_one_location() {
    faults_have_one_location(&GenConfig::default());
}

fn faults_have_one_location(config: &GenConfig) {
    let seeds: u64 = std::env::var("ADZE_FAULT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let settings = run::all_settings();
    let limits = run::fuzz_limits();
    let mut faults = 0;
    let mut unlocated = Vec::new();
    let mut disagreements = Vec::new();
    for seed in 0..seeds {
        let prog = gen::generate(seed, config);
        let args: Vec<_> = prog
            .points
            .iter()
            .take(2)
            .map(|p| run::args_of(p.x, p.y))
            .collect();
        for source in faulting_variants(&prog.source, 2) {
            let Ok(module) = run::compile(&source) else {
                continue;
            };
            for func in prog.functions() {
                let (outs, _) = run::run_settings(&module, &func, &settings, limits, &args);
                for p in 0..args.len() {
                    let col: Vec<_> = outs.iter().map(|o| &o[p]).collect();
                    // Equal outcomes (every NaN equal to every NaN, as the
                    // fuzzer compares them); traps with their locations.
                    let groups = run::groups(&col, false);
                    // Values that differ (and no trap) are the fuzzer's
                    // business: seed 198's third-order reverse derivative
                    // is NaN inlined early and -1.0 called, before and
                    // after this test's mutations.
                    let traps = groups.iter().any(|g| matches!(col[g[0]].res, Res::Trap(_)));
                    if groups.len() > 1 && traps {
                        let (a, b) = (groups[0][0], groups[1][0]);
                        disagreements.push(format!(
                            "seed {seed}, {func}, point {p}: {}: {}\n  vs {}: {}\n{source}",
                            settings[a].label(),
                            col[a].text,
                            settings[b].label(),
                            col[b].text
                        ));
                        continue;
                    }
                    if groups.len() > 1 {
                        continue;
                    }
                    if let Res::Trap(t) = &col[0].res {
                        faults += 1;
                        // A shadow of another length is found by the
                        // `samelen` at a derivative's entry, which no
                        // expression of the source stands for (see
                        // docs/robustness.md).
                        if t.ends_with("@-") && !t.starts_with("ShadowLengthMismatch") {
                            unlocated.push(format!("seed {seed}, {func}: {}", col[0].text));
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "{seeds} seeds: {faults} faults, {} without a location, {} disagreements",
        unlocated.len(),
        disagreements.len()
    );
    assert!(
        disagreements.is_empty(),
        "{} disagreement(s), the first:\n{}",
        disagreements.len(),
        disagreements[0]
    );
    // The variants do fault, and their faults have locations.
    assert!(faults >= 10, "only {faults} faults");
    assert!(
        unlocated.is_empty(),
        "faults without a location:\n{}",
        unlocated.join("\n")
    );
}
