//! The differential fuzzer in `cargo test`: the generator's programs are
//! valid and cover what they should, the reducer shrinks, and a short run
//! over a fixed seed range finds no disagreement.

use adze_fuzz_diff::gen::{self, GenConfig};
use adze_fuzz_diff::{reduce, run, Config, Stats};
use std::collections::BTreeSet;

/// The short run: seeds `0 .. SHORT_RUN` (a few seconds each in a debug
/// build on two cores).
const SHORT_RUN: u64 = 20;

/// The generator before array results, whose seeds 0..20 these tests were
/// written for (and fixed against): `array_results: false` gives exactly
/// its programs.
fn before_array_results() -> Config {
    Config {
        gen: GenConfig {
            array_results: false,
            ..GenConfig::default()
        },
        ..Config::default()
    }
}

fn report(stats: &Stats) -> String {
    let mut s = stats.summary();
    for (seed, e) in &stats.rejects {
        s.push_str(&format!("generator reject: seed {seed}: {e}\n"));
    }
    for f in &stats.findings {
        s.push_str(&f.report());
        s.push('\n');
    }
    s
}

#[test]
fn generated_programs_pass_the_front_end() {
    let mut bad = Vec::new();
    for seed in 0..300 {
        let p = gen::generate(seed, &GenConfig::default());
        if let Err(e) = run::compile(&p.source) {
            bad.push(format!("seed {seed}: {e}\n{}", p.source));
        }
    }
    assert!(
        bad.is_empty(),
        "{} generator rejects, the first:\n{}",
        bad.len(),
        bad[0]
    );
}

#[test]
fn a_fixed_mode_order_is_obeyed() {
    let config = GenConfig {
        modes: gen::parse_modes("rfr"),
        ..GenConfig::default()
    };
    for seed in 0..10 {
        let p = gen::generate(seed, &config);
        assert_eq!(gen::mode_order(&p.modes), "rfr");
        assert!(run::compile(&p.source).is_ok());
    }
    assert!(gen::parse_modes("rx").is_none() && gen::parse_modes("rrrr").is_none());
}

#[test]
fn the_generator_is_deterministic() {
    let a = gen::generate(7, &GenConfig::default());
    let b = gen::generate(7, &GenConfig::default());
    assert_eq!(a.source, b.source);
    assert_ne!(a.source, gen::generate(8, &GenConfig::default()).source);
}

#[test]
fn the_generator_covers_every_feature() {
    let mut orders = BTreeSet::new();
    let mut all = String::new();
    let (mut rule_free, mut recursive, mut tuple, mut writer, mut diff) = (0, 0, 0, 0, 0);
    for seed in 0..300 {
        let p = gen::generate(seed, &GenConfig::default());
        orders.insert(gen::mode_order(&p.modes));
        all.push_str(&p.source);
        rule_free += usize::from(p.rule_free);
        recursive += p.features.recursive;
        tuple += p.features.tuple;
        writer += p.features.writer;
        diff += p.features.with_autodiff;
        assert!(p.points.iter().any(|q| q.special));
    }
    // Every mode order at orders 1, 2 and 3.
    assert_eq!(orders.len(), 2 + 4 + 8, "{orders:?}");
    assert!(rule_free > 0 && recursive > 0 && tuple > 0 && writer > 0 && diff > 0);
    for needle in [
        "rule forward",
        "rule reverse",
        "#[inline(always)]",
        "#[inline(never)]",
        "for i",
        "while j",
        "} else {",
        "= zeros(",
        "fill(",
        "sqrt(",
        "log(",
        "floor(",
        "min(",
        "max(",
        "abs(",
        "(1.0 / (",
        "return",
        "n - 1)",
        "autodiff(forward, f",
        "autodiff(reverse, f",
        "dup(",
    ] {
        assert!(all.contains(needle), "no program contains `{needle}`");
    }
}

/// The reducer with a synthetic predicate (valid, and still has a reverse
/// rule and a `sqrt`): it must shrink a generated program to a few lines
/// that still satisfy it.
#[test]
fn the_reducer_shrinks_a_program() {
    let prog = (0..200)
        .map(|s| gen::generate(s, &GenConfig::default()))
        .find(|p| {
            p.source.contains("rule reverse")
                && p.source.contains("sqrt(")
                && p.source.lines().count() > 40
        })
        .expect("a program with a reverse rule and sqrt");
    let pred =
        |s: &str| run::compile(s).is_ok() && s.contains("rule reverse") && s.contains("sqrt(");
    assert!(pred(&prog.source));
    let reduced = reduce::reduce(&prog.source, pred, 2000);
    assert!(pred(&reduced), "{reduced}");
    let n = reduced.lines().filter(|l| !l.trim().is_empty()).count();
    assert!(
        n <= 12,
        "reduced from {} to {n} lines:\n{reduced}",
        prog.source.lines().count()
    );
}

/// The reducer on a real pipeline predicate that holds on main and does not
/// depend on a bug: `top` still returns a NaN at (0, 0) on the interpreter
/// with `--inline none` (a `log`/`sqrt`/`asin` of a negative number, or a
/// `0/0`, must survive).
#[test]
fn the_reducer_keeps_a_pipeline_property() {
    let config = Config::default();
    let nan_at_zero = |s: &str| -> bool {
        let Ok(m) = run::compile(s) else { return false };
        let (outs, _) = run::run_settings(
            &m,
            "top",
            &config.settings[..1],
            config.limits,
            &[run::args_of(0.0, 0.0)],
        );
        matches!(&outs[0][0].res, run::Res::Values(b) if f64::from_bits(b[0]).is_nan())
    };
    let Some(prog) = (0..200)
        .map(|s| gen::generate(s, &GenConfig::default()))
        .find(|p| p.source.lines().count() > 30 && nan_at_zero(&p.source))
    else {
        panic!("no generated program is NaN at (0, 0)");
    };
    let reduced = reduce::reduce(&prog.source, nan_at_zero, 600);
    assert!(nan_at_zero(&reduced));
    assert!(
        reduced.lines().count() * 2 < prog.source.lines().count(),
        "{reduced}"
    );
}

/// Seeds `0 .. SHORT_RUN` of the generator before array results, every
/// setting, bit for bit (array results: `array_results_short_run` below).
///
/// Fails on main as of this commit: seed 14 (an argument that a callee
/// never reads gets an adjoint: NaN with `--inline none`, a number when
/// the callee is inlined; `known_bugs.rs`, `unused_callee_argument_*`) and
/// seeds 1, 17 and 19 (`--inline early` leaves an `autodiff` unlowered in a
/// function that carries a rule and contains `autodiff`; the JIT refuses
/// it). Un-ignore once the fixes land.
#[test]
fn short_run_has_no_disagreements() {
    let stats = adze_fuzz_diff::fuzz(0, SHORT_RUN, &before_array_results(), |_| {});
    assert!(
        stats.findings_count() == 0 && stats.rejected == 0,
        "{}",
        report(&stats)
    );
}

/// The same seeds, what holds on main today: every program is valid, and
/// nothing panics or fails internally in every setting at once.
#[test]
fn short_run_has_no_rejects_or_panics() {
    let stats = adze_fuzz_diff::fuzz(0, SHORT_RUN, &before_array_results(), |_| {});
    assert!(stats.checked as u64 == SHORT_RUN, "{}", report(&stats));
    assert!(
        stats.rejected == 0
            && stats.internal == 0
            && !stats.by_category.contains_key(run::Category::Panic.name()),
        "{}",
        report(&stats)
    );
    // Every order and both modes occur in the short run.
    assert_eq!(stats.by_order.len(), 3, "{}", stats.summary());
}

/// `--extra-points`: the same program and first points, more points after.
#[test]
fn extra_points_keep_the_program_and_add_points() {
    let more = GenConfig {
        extra_points: 6,
        ..GenConfig::default()
    };
    for seed in 0..5 {
        let a = gen::generate(seed, &GenConfig::default());
        let b = gen::generate(seed, &more);
        assert_eq!(a.source, b.source);
        assert_eq!(b.points.len(), a.points.len() + 6);
        for (p, q) in a.points.iter().zip(&b.points) {
            assert_eq!(
                (p.x.to_bits(), p.y.to_bits()),
                (q.x.to_bits(), q.y.to_bits())
            );
        }
    }
}

/// Without array results the generator writes exactly the programs (and
/// points) of the generator before them, seed for seed: the figures and
/// seeds of docs/robustness.md from before still mean what they say.
#[test]
fn without_array_results_the_programs_are_those_of_before() {
    let config = GenConfig {
        array_results: false,
        ..GenConfig::default()
    };
    // FNV-1a over seeds 0..200: sources, then points.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    for seed in 0..200 {
        let p = gen::generate(seed, &config);
        assert!(p.array_top.is_none());
        p.source.bytes().for_each(&mut eat);
        for q in &p.points {
            q.x.to_bits().to_le_bytes().into_iter().for_each(&mut eat);
            q.y.to_bits().to_le_bytes().into_iter().for_each(&mut eat);
        }
    }
    // The hash of the generator of commit 7d330d1.
    assert_eq!(h, 0xe2df_f437_3ce9_a165, "{h:#018x}");
}

/// With `with`, the generator adds lines that `is_hint` recognises before
/// loops and changes nothing else: the same seed without those lines is
/// the program without the option, and at least 20 are added over 40
/// seeds. A short run under `run` (six programs from `first`) agrees
/// everywhere.
fn hints_only_add_attribute_lines(
    with: GenConfig,
    is_hint: fn(&str) -> bool,
    run: GenConfig,
    first: u64,
) {
    let mut hinted = 0;
    for seed in 0..40 {
        let plain = gen::generate(seed, &GenConfig::default());
        let p = gen::generate(seed, &with);
        let stripped: String = p
            .source
            .lines()
            .filter(|l| !is_hint(l.trim_start()))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(stripped, plain.source, "seed {seed}");
        hinted += p.source.lines().filter(|l| is_hint(l.trim_start())).count();
    }
    assert!(hinted > 20, "only {hinted} hints");
    let config = Config {
        gen: run,
        ..Config::default()
    };
    let stats = adze_fuzz_diff::fuzz(first, 6, &config, |_| {});
    assert!(
        stats.findings_count() == 0 && stats.rejected == 0,
        "{}",
        report(&stats)
    );
}

/// `--checkpoint-percent` adds `#[checkpoint]` lines before loops and
/// changes nothing else; a short run with them agrees everywhere.
#[test]
fn checkpoint_hints_only_add_attribute_lines() {
    hints_only_add_attribute_lines(
        GenConfig {
            checkpoint_percent: 100,
            ..GenConfig::default()
        },
        |l| l.starts_with("#[checkpoint"),
        GenConfig {
            checkpoint_percent: 50,
            ..GenConfig::default()
        },
        2_700_000,
    );
}

/// `--ordered-percent` adds `#[ordered]` lines before loops and changes
/// nothing else; a short run with them agrees everywhere, so a loop's sum
/// in the written order and in four partial sums are each the same under
/// every setting.
#[test]
fn ordered_hints_only_add_attribute_lines() {
    hints_only_add_attribute_lines(
        GenConfig {
            ordered_percent: 100,
            ..GenConfig::default()
        },
        |l| l == "#[ordered]",
        GenConfig {
            ordered_percent: 50,
            checkpoint_percent: 30,
            ..GenConfig::default()
        },
        2_900_000,
    );
}
