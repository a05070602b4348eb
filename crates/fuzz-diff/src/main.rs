//! `adze-fuzz-diff`: the differential fuzzer of derivatives.
//!
//! ```text
//! adze-fuzz-diff --seed 0 --count 1000 --order-max 3 --reduce
//! adze-fuzz-diff --seed 42 --count 1 --print        # show one program
//! adze-fuzz-diff --file prog.adz --fn d2 --reduce   # check a file of your own
//! ```
//!
//! Exit status: 0 when every program agreed under every setting, 1 when
//! there were findings (disagreements, internal errors, panics) or
//! generator rejects, 2 on a usage error.
#![forbid(unsafe_code)]

use adze_fuzz_diff::{gen, run, Config, Stats};
use clap::Parser;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "adze-fuzz-diff",
    about = "Differential fuzzer of adze's derivatives: random programs, 16 settings, bit for bit"
)]
struct Args {
    /// First seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Number of programs (seeds `seed .. seed + count`).
    #[arg(long, default_value_t = 100)]
    count: u64,
    /// Highest nesting order of the derivative chain (1..=3).
    #[arg(long, default_value_t = 3)]
    order_max: usize,
    /// A fixed mode order of the derivative chain, innermost first
    /// (`rrr`: reverse over reverse over reverse); default: random.
    #[arg(long, value_parser = parse_modes)]
    modes: Option<[Option<gen::Mode>; 3]>,
    /// Random points per program beyond the usual four (the same programs).
    #[arg(long, default_value_t = 0)]
    extra_points: usize,
    /// Generate no array results (no helpers returning arrays, no `topa`):
    /// the programs of the generator before array results, seed for seed.
    #[arg(long)]
    no_array_results: bool,
    /// The percentage of programs with `topa`, a top-level function with
    /// array results differentiated from outside (forward and reverse).
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(0..=100))]
    array_top_percent: u64,
    /// The percentage of loops given a `#[checkpoint]` attribute (the
    /// same programs otherwise, seed for seed).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=100))]
    checkpoint_percent: u64,
    /// The percentage of loops given `#[ordered]`, whose sums keep the
    /// written order (the same programs otherwise, seed for seed).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=100))]
    ordered_percent: u64,
    /// Shrink every finding and print the reduced program.
    #[arg(long)]
    reduce: bool,
    /// Predicate evaluations allowed per reduction.
    #[arg(long, default_value_t = 400)]
    max_reduce_tests: usize,
    /// Reduce (and print in full) at most this many findings of one kind
    /// (signature); the others are listed by their title.
    #[arg(long, default_value_t = 3)]
    per_signature: usize,
    /// Print every generated program before checking it.
    #[arg(long)]
    print: bool,
    /// Skip the finite-difference check.
    #[arg(long)]
    no_fd: bool,
    /// Compare NaN payloads (sign and bits) too; by default every NaN
    /// equals every NaN, as adze's semantics leave payloads unspecified.
    #[arg(long)]
    exact_nan: bool,
    /// Stop after this many findings (0: never).
    #[arg(long, default_value_t = 0)]
    max_findings: usize,
    /// Check this file instead of generated programs: every function given
    /// with `--fn` (default: `top` and `d1`, `d2`, .. if present), whose
    /// parameters must all be f64, at a few points.
    #[arg(long)]
    file: Option<PathBuf>,
    /// With `--file`: the functions to check.
    #[arg(long = "fn")]
    funcs: Vec<String>,
    /// With `--file`: check this function of `(x: f64, y: f64)` with
    /// array results as the fuzzer checks an array top: itself, its
    /// forward and its reverse derivative (`Session::derive`) under every
    /// setting, finite differences and the dot-product test (unless
    /// `--rules`).
    #[arg(long)]
    array_top: Option<String>,
    /// With `--array-top`: the file has rules, which need not be right
    /// (no finite differences, no dot-product test).
    #[arg(long)]
    rules: bool,
    /// With `--array-top`: the forward direction `TX,TY`.
    #[arg(long, value_parser = parse_pair, default_value = "1.0,0.5")]
    dir: (f64, f64),
    /// With `--file`: the points `X,Y` (repeatable) instead of the usual
    /// ones (with `--fn`, every parameter after the second is given `Y`).
    #[arg(long = "at", value_parser = parse_pair)]
    at: Vec<(f64, f64)>,
}

fn parse_pair(s: &str) -> Result<(f64, f64), String> {
    let (a, b) = s
        .split_once(',')
        .ok_or_else(|| format!("`{s}`: two numbers, `X,Y`"))?;
    let num = |t: &str| t.trim().parse::<f64>().map_err(|e| format!("`{t}`: {e}"));
    Ok((num(a)?, num(b)?))
}

fn main() {
    let args = Args::parse();
    // Panics are caught and reported as findings; keep stderr readable.
    std::panic::set_hook(Box::new(|_| {}));
    let config = Config {
        gen: gen::GenConfig {
            order_max: args.order_max.clamp(1, 3),
            modes: args.modes,
            extra_points: args.extra_points,
            array_results: !args.no_array_results,
            array_top_percent: args.array_top_percent as usize,
            checkpoint_percent: args.checkpoint_percent as usize,
            ordered_percent: args.ordered_percent as usize,
        },
        reduce: args.reduce,
        max_reduce_tests: args.max_reduce_tests,
        fd: !args.no_fd,
        exact_nan: args.exact_nan,
        max_reduced_per_signature: args.per_signature,
        ..Config::default()
    };
    let stats = match &args.file {
        Some(path) => check_file(path, &args, &config),
        None => run_seeds(&args, &config),
    };
    print_fd(&stats);
    print_dot(&stats);
    for (seed, e) in &stats.rejects {
        println!("generator reject: seed {seed}: {e}");
    }
    print!("{}", stats.summary());
    let bad = stats.findings_count() > 0 || stats.rejected > 0;
    std::process::exit(i32::from(bad));
}

fn parse_modes(s: &str) -> Result<[Option<gen::Mode>; 3], String> {
    gen::parse_modes(s).ok_or_else(|| format!("`{s}`: one to three of `f` and `r`"))
}

fn run_seeds(args: &Args, config: &Config) -> Stats {
    let start = std::time::Instant::now();
    let mut stats = Stats::default();
    let mut printed = 0;
    for s in args.seed..args.seed.saturating_add(args.count) {
        let prog = gen::generate(s, &config.gen);
        if args.print {
            println!(
                "// ---- seed {s}: order {} ({})\n{}",
                prog.order(),
                gen::mode_order(&prog.modes),
                prog.source
            );
        }
        adze_fuzz_diff::check_program(&prog, config, &mut stats);
        for (i, f) in stats.findings.iter().enumerate().skip(printed) {
            let earlier = stats.findings[..i]
                .iter()
                .filter(|g| g.signature == f.signature)
                .count();
            if earlier < args.per_signature {
                println!("{}", f.report());
            } else {
                println!("=== {}", f.title());
            }
        }
        printed = stats.findings.len();
        if args.max_findings > 0 && printed >= args.max_findings {
            break;
        }
    }
    stats.elapsed = start.elapsed();
    stats
}

fn check_file(path: &PathBuf, args: &Args, config: &Config) -> Stats {
    let funcs = &args.funcs;
    let start = std::time::Instant::now();
    let mut stats = Stats::default();
    let source = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", path.display());
            std::process::exit(2);
        }
    };
    stats.generated = 1;
    let module = match run::compile(&source) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    stats.checked = 1;
    if let Some(name) = &args.array_top {
        check_file_array_top(&module, &source, name, args, config, &mut stats);
        for f in &stats.findings {
            println!("{}", f.report());
        }
        stats.elapsed = start.elapsed();
        return stats;
    }
    let mut names: Vec<String> = funcs.to_vec();
    if names.is_empty() {
        names = std::iter::once("top".to_string())
            .chain((1..=9).map(|k| format!("d{k}")))
            .filter(|n| module.get(n).is_some())
            .collect();
    }
    const VALUES: [f64; 6] = [0.0, 1.0, 0.5, -1.0, 2.0, 0.3];
    for name in &names {
        let Some(id) = module.get(name) else {
            eprintln!("error: no function `{name}` in {}", path.display());
            std::process::exit(2);
        };
        let n = module.func(id).sig.params.len();
        let mut points = Vec::new();
        let mut arg_lists = Vec::new();
        for &(x, y) in &args.at {
            points.push((x, y));
            let vals = (0..n).map(|i| if i == 0 { x } else { y });
            arg_lists.push(vals.map(adze::adze_ir::Val::F64).collect());
        }
        for k in 0..if args.at.is_empty() { VALUES.len() } else { 0 } {
            let vals: Vec<f64> = (0..n)
                .map(|i| VALUES[(k + i * (k % 2)) % VALUES.len()])
                .collect();
            points.push((
                vals.first().copied().unwrap_or(0.0),
                vals.get(1).copied().unwrap_or(0.0),
            ));
            arg_lists.push(vals.into_iter().map(adze::adze_ir::Val::F64).collect());
        }
        adze_fuzz_diff::check_function_args(
            &module, &source, None, name, &points, &arg_lists, config, &mut stats,
        );
    }
    for f in &stats.findings {
        println!("{}", f.report());
    }
    stats.elapsed = start.elapsed();
    stats
}

/// `--file F --array-top NAME`: NAME must take `(x: f64, y: f64)` and
/// return f64s and f64 arrays.
fn check_file_array_top(
    module: &adze::adze_ir::Module,
    source: &str,
    name: &str,
    args: &Args,
    config: &Config,
    stats: &mut Stats,
) {
    use adze::adze_ir::Type;
    let Some(id) = module.get(name) else {
        eprintln!("error: no function `{name}`");
        std::process::exit(2);
    };
    let sig = &module.func(id).sig;
    let xy = sig.params.len() == 2 && sig.param_types().all(|t| t == Type::F64);
    let ok = sig
        .results
        .iter()
        .all(|t| matches!(t, Type::F64 | Type::Array));
    if !xy || !ok {
        eprintln!("error: `{name}` must take (x: f64, y: f64) and return f64s and [f64]s");
        std::process::exit(2);
    }
    let results: Vec<bool> = sig.results.iter().map(|&t| t == Type::Array).collect();
    let points: Vec<(f64, f64)> = if args.at.is_empty() {
        vec![(0.3, -0.7), (1.1, 0.4), (0.0, 0.0), (1.0, 1.0)]
    } else {
        args.at.clone()
    };
    let generic = vec![true; points.len()];
    let top = adze_fuzz_diff::ArrayTopCheck {
        name,
        results: &results,
        dir: [args.dir.0, args.dir.1],
        rule_free: !args.rules,
    };
    adze_fuzz_diff::check_array_top(module, source, None, &top, &points, &generic, config, stats);
}

fn print_dot(stats: &Stats) {
    for m in &stats.dot_mismatches {
        let seed = m.seed.map(|s| format!("seed {s}: ")).unwrap_or_default();
        println!(
            "dot-product mismatch: {seed}{} at ({:?}, {:?}): <u, J v> = {:?} (forward), <J^T u, v> = {:?} (reverse)",
            m.func, m.point.0, m.point.1, m.forward, m.reverse
        );
        if let Some(r) = &m.reduced {
            println!("--- reduced program ({} lines):\n{r}", r.lines().count());
        }
    }
}

fn print_fd(stats: &Stats) {
    for m in &stats.fd_mismatches {
        let element = m
            .element
            .map(|j| format!(" output {j}"))
            .unwrap_or_default();
        println!(
            "finite-difference mismatch: seed {}: {}{element} at ({:?}, {:?}): AD {:?}, central difference {:?}",
            m.seed, m.func, m.point.0, m.point.1, m.ad, m.fd
        );
        if let Some(r) = &m.reduced {
            println!("--- reduced program ({} lines):\n{r}", r.lines().count());
        }
    }
}
