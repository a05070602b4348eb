//! The SPEC §6 workloads, side by side: primal, reverse gradient, forward
//! derivative (one direction), Hessian-vector product (forward over
//! reverse), the hand-written Rust primal and gradient (rustc -O), and the
//! JIT compile time of each derivative. Criterion measures everything; each
//! measurement is also recorded here so that the run ends with one table of
//! ratios (medians). See docs/performance.md.
//!
//! ```sh
//! CARGO_TARGET_DIR=/work/targets/bench cargo bench --bench workloads
//! cargo bench --bench workloads -- seed    # criterion's name filter
//! ```
//!
//! The derivatives are written in `.adz`: `benches/workloads/<name>.adz` is
//! appended to `ir-examples/<name>.adz` (it defines `bench_grad`,
//! `bench_fwd` and `bench_hvp`; the seed file already has `dg_plain` and
//! `hvp_plain`). Every function is compiled once through the compile-once
//! API (`adze::Program::compile`, with the session's `JitSettings`) and
//! called through `adze::Function::call` on borrowed `Arg`s: the caller's
//! buffers, no copies. The `primal (copying)` line of the n = 10^6
//! workloads copies the arguments into fresh buffers before each call (what
//! `Session::run` and `Compiled::call` do). The compile columns time
//! `Session::jit`, the JIT step of `Program::compile`.
//!
//! At the end, `benches/jax_workloads.py` prints the same workloads in JAX
//! when a Python with `jax` is found: `ADZE_BENCH_JAX=python3` (`0`: no
//! JAX), or else the venv that `just jax-venv` makes in the target
//! directory (`$CARGO_TARGET_DIR/jax-venv`, or `target/jax-venv`); then
//! again with XLA held to two f64 lanes, adze's vector width
//! (`--xla_cpu_max_isa=SSE4_2`; `ADZE_BENCH_JAX_SSE=0` skips it).

#[path = "workloads/native.rs"]
mod native;

use adze::{Arg, Function, Program};
use adze_ir::{FuncId, Module, Val};
use criterion::{BenchmarkGroup, Criterion, SamplingMode};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Per pass of the whole run (`ADZE_BENCH_REPEAT`), the time per
/// iteration of every criterion sample of one column, in seconds.
type Passes = Vec<Vec<f64>>;

/// Per (workload, column), its samples.
#[derive(Default)]
struct Record {
    times: RefCell<BTreeMap<(String, String), Passes>>,
    notes: RefCell<Vec<String>>,
}

impl Record {
    /// The median of a column's samples; with several passes, the smallest
    /// of the passes' medians (the machine is shared: a pass that ran while
    /// a neighbour was busy is slow in every sample).
    fn median(&self, workload: &str, column: &str) -> Option<f64> {
        let times = self.times.borrow();
        let passes = times.get(&(workload.to_string(), column.to_string()))?;
        passes
            .iter()
            .filter(|v| !v.is_empty())
            .map(|v| {
                let mut v = v.clone();
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            })
            .min_by(f64::total_cmp)
    }
}

/// Measures `f` under criterion as `workload/column` and records its
/// samples (warm-up runs excluded).
fn measure(
    g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    rec: &Record,
    workload: &str,
    column: &str,
    mut f: impl FnMut(),
) {
    let key = (workload.to_string(), column.to_string());
    let mut all: Vec<f64> = Vec::new();
    g.bench_function(column, |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            let e = t.elapsed();
            all.push(e.as_secs_f64() / iters as f64);
            e
        })
    });
    // Criterion's warm-up calls come first; keep the last `SAMPLES`.
    let keep = all.len().min(SAMPLES);
    let tail = all.split_off(all.len() - keep);
    rec.times.borrow_mut().entry(key).or_default().push(tail);
}

const SAMPLES: usize = 10;

fn group<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.sample_size(SAMPLES)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    g
}

/// A deterministic pseudo-random sequence in `[lo, hi)`.
fn data(seed: u64, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

fn arr(v: &[f64]) -> Val {
    Val::Array(v.to_vec())
}

fn as_arr(v: &Val) -> &[f64] {
    match v {
        Val::Array(a) => a,
        other => panic!("expected an array, got {other:?}"),
    }
}

fn as_f64(v: &Val) -> f64 {
    match v {
        Val::F64(x) => *x,
        other => panic!("expected an f64, got {other:?}"),
    }
}

/// The arguments of one call: `args`' own buffers, borrowed (an array as
/// an `Arg::ArrayMut`, as the command line passes them).
fn borrowed(args: &mut [Val]) -> Vec<Arg<'_>> {
    args.iter_mut().map(Arg::of).collect()
}

/// A workload's source: the example followed by its bench-only wrappers,
/// with the JIT settings of every measurement.
fn session(name: &str) -> adze::Session {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut src = std::fs::read_to_string(root.join(format!("ir-examples/{name}.adz"))).unwrap();
    src.push('\n');
    src.push_str(
        &std::fs::read_to_string(root.join(format!("benches/workloads/{name}.adz"))).unwrap(),
    );
    configure(adze::Session::from_source(&format!("{name}.adz+bench"), &src).unwrap())
}

/// The session settings every workload is measured with (the `ADZE_BENCH_*`
/// switches).
fn configure(mut s: adze::Session) -> adze::Session {
    // `ADZE_BENCH_NO_OPT=1`: without the IR optimizer (to measure it).
    s.optimize = std::env::var("ADZE_BENCH_NO_OPT").map_or(true, |v| v != "1");
    // `ADZE_BENCH_CHECKPOINT=0|1`: reverse loops checkpointed or taped
    // (the session's default otherwise), to measure what it costs.
    if let Ok(v) = std::env::var("ADZE_BENCH_CHECKPOINT") {
        s.ad_limits.checkpoint = v == "1";
    }
    // The JIT's defaults without Cranelift's verifier;
    // `ADZE_BENCH_OPT=none|speed|auto` overrides the optimisation level (to
    // compare them).
    s.jit.verify = false;
    // `ADZE_BENCH_COMPILE_THREADS=1` compiles on one thread (to compare).
    if let Some(n) = std::env::var("ADZE_BENCH_COMPILE_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        s.jit.compile_threads = n;
    }
    s.jit.opt_level = match std::env::var("ADZE_BENCH_OPT").as_deref() {
        Ok("none") => adze::OptLevel::None,
        Ok("speed") => adze::OptLevel::Speed,
        _ => adze::OptLevel::Auto,
    };
    s
}

/// A function of a workload, compiled once, and the module it was compiled
/// from (AD lowered, optimized: `Session::prepare`), to time its compile.
struct Prepared {
    module: Module,
    id: FuncId,
    function: Function,
}

impl Prepared {
    fn new(p: &Program, name: &str) -> Result<Prepared, String> {
        let module = p.session().prepare(name).map_err(|e| e.to_string())?;
        let id = module.get(name).ok_or("no such function")?;
        let function = p.compile(module.clone(), name).map_err(|e| e.to_string())?;
        Ok(Prepared {
            module,
            id,
            function,
        })
    }

    /// The compile column: `Session::jit`, the step of `Program::compile`
    /// after its checks (adze's verifier on what the function reaches),
    /// here without cloning the module each time.
    fn compile(&self, p: &Program) {
        black_box(p.session().jit(&self.module, self.id).unwrap());
    }
}

/// The adze functions of one workload and their arguments.
struct Adze<'s> {
    primal: (&'s str, Vec<Val>),
    grad: (&'s str, Vec<Val>),
    fwd: (&'s str, Vec<Val>),
    hvp: (&'s str, Vec<Val>),
}

/// Per column, the results and final arguments of one run (or the error).
type Outcomes = BTreeMap<&'static str, Result<(Vec<Val>, Vec<Val>), String>>;

/// Benchmarks the four adze functions of `w` (and their compile times when
/// `compile` is set); returns the outcomes of one run of each (for the
/// checks against the hand-written versions).
fn bench_adze(
    c: &mut Criterion,
    rec: &Record,
    label: &str,
    p: &Program,
    w: Adze<'_>,
    compile: bool,
    copying: bool,
) -> Outcomes {
    let mut out = BTreeMap::new();
    let mut g = group(c, label);
    for (column, (fname, args)) in [
        ("primal", w.primal),
        ("gradient", w.grad),
        ("forward", w.fwd),
        ("hvp", w.hvp),
    ] {
        let prepared = match Prepared::new(p, fname) {
            Ok(prepared) => prepared,
            Err(e) => {
                rec.notes
                    .borrow_mut()
                    .push(format!("{label} {column} ({fname}): {e}"));
                out.insert(column, Err(e));
                continue;
            }
        };
        let f = &prepared.function;
        let mut a = args.clone();
        match f.call(&mut borrowed(&mut a)) {
            Ok(r) => {
                out.insert(column, Ok((r, a.clone())));
            }
            Err(e) => {
                rec.notes
                    .borrow_mut()
                    .push(format!("{label} {column} ({fname}): {e}"));
                out.insert(column, Err(e.to_string()));
                continue;
            }
        }
        if let Some(pass) = ab_pass() {
            ab(rec, label, column, p, fname, pass, f, &args);
            continue;
        }
        let mut slots = borrowed(&mut a);
        measure(&mut g, rec, label, column, || {
            // The derivatives overwrite their shadow arrays (they zero them
            // first), so repeated calls on the same buffers are equivalent.
            black_box(f.call(&mut slots).unwrap());
        });
        if copying && column == "primal" {
            measure(&mut g, rec, label, "primal (copying)", || {
                let mut copy = args.clone();
                black_box(f.call(&mut borrowed(&mut copy)).unwrap());
                black_box(copy);
            });
        }
        if compile {
            measure(&mut g, rec, label, &format!("compile {column}"), || {
                prepared.compile(p);
            });
        }
    }
    g.finish();
    out
}

/// `ADZE_BENCH_AB=carry` (an optimizer pass, `adze_opt::Pass::name`
/// without its `opt-`): instead of the criterion columns, each adze
/// function is also compiled with the optimizer's pipeline less that pass,
/// and the two are timed in alternation, one call each per round, so that
/// the machine's ups and downs fall on both alike.
fn ab_pass() -> Option<adze_opt::Pass> {
    let name = std::env::var("ADZE_BENCH_AB").ok()?;
    let pass = adze_opt::PIPELINE
        .into_iter()
        .find(|p| p.name() == format!("opt-{name}"));
    Some(pass.unwrap_or_else(|| panic!("ADZE_BENCH_AB={name}: no such pass")))
}

#[allow(clippy::too_many_arguments)]
fn ab(
    rec: &Record,
    label: &str,
    column: &str,
    p: &Program,
    fname: &str,
    pass: adze_opt::Pass,
    with: &Function,
    args: &[Val],
) {
    let mut unopt = p.session().clone();
    unopt.optimize = false;
    let mut module = unopt.prepare(fname).unwrap();
    let ids: Vec<FuncId> = module.ids().collect();
    let pipeline: Vec<adze_opt::Pass> = adze_opt::PIPELINE
        .into_iter()
        .filter(|&p| p != pass)
        .collect();
    adze_opt::optimize_with(&mut module, &ids, &pipeline).unwrap();
    let without = Program::new(unopt).compile(module, fname).unwrap();
    let (mut a, mut b) = (args.to_vec(), args.to_vec());
    let same = with.call(&mut borrowed(&mut a)).unwrap()
        == without.call(&mut borrowed(&mut b)).unwrap()
        && a == b;
    let time = |f: &Function, x: &mut Vec<Val>| {
        let mut slots = borrowed(x);
        let t = Instant::now();
        black_box(f.call(&mut slots).unwrap());
        t.elapsed().as_secs_f64()
    };
    let once = time(with, &mut a);
    let rounds = ((3.0 / once) as usize).clamp(10, 5000);
    let (mut tw, mut to) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        tw.push(time(with, &mut a));
        to.push(time(&without, &mut b));
    }
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[0], v[v.len() / 2])
    };
    let ((wmin, wmed), (omin, omed)) = (stats(&mut tw), stats(&mut to));
    rec.notes.borrow_mut().push(format!(
        "A/B {label} {column}: with {p} min {} median {}; without min {} median {}; \
         with/without: min {:.3} median {:.3} ({rounds} rounds{})",
        fmt_time(Some(wmin)),
        fmt_time(Some(wmed)),
        fmt_time(Some(omin)),
        fmt_time(Some(omed)),
        wmin / omin,
        wmed / omed,
        if same { "" } else { ", RESULTS DIFFER" },
        p = pass.name(),
    ));
}

fn rel_err(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-300);
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

fn check(rec: &Record, what: &str, err: f64) {
    check_tol(rec, what, err, 1e-6);
}

/// `check` with the largest difference that passes.
fn check_tol(rec: &Record, what: &str, err: f64, tol: f64) {
    let line = format!("check {what}: max relative difference adze vs hand-written = {err:.1e}");
    let mut notes = rec.notes.borrow_mut();
    for line in [
        (err.is_nan() || err > tol).then(|| format!("MISMATCH: {line}")),
        Some(line),
    ]
    .into_iter()
    .flatten()
    {
        // With `ADZE_BENCH_REPEAT`, each pass checks again: keep one line.
        if !notes.contains(&line) {
            notes.push(line);
        }
    }
}

fn seed(c: &mut Criterion, rec: &Record) {
    let n = 1_000_000;
    let x = data(1, n, -1.0, 1.0);
    let v = data(2, n, -1.0, 1.0);
    let zero = vec![0.0; n];
    let prog = Program::new(session("seed"));
    let label = "seed n=1e6";
    let out = bench_adze(
        c,
        rec,
        label,
        &prog,
        Adze {
            primal: ("g_plain", vec![arr(&x)]),
            grad: ("dg_plain", vec![arr(&x), arr(&zero)]),
            fwd: ("bench_fwd", vec![arr(&x), arr(&v)]),
            hvp: ("hvp_plain", vec![arr(&x), arr(&v), arr(&zero), arr(&zero)]),
        },
        true,
        true,
    );
    let mut g = group(c, label);
    let mut dx = zero.clone();
    measure(&mut g, rec, label, "rustc primal", || {
        black_box(native::seed(black_box(&x)));
    });
    measure(&mut g, rec, label, "rustc gradient", || {
        native::seed_grad(black_box(&x), &mut dx);
        black_box(&dx);
    });
    g.finish();
    if let Some(Ok((_, args))) = out.get("gradient") {
        native::seed_grad(&x, &mut dx);
        check(rec, "seed gradient", rel_err(as_arr(&args[1]), &dx));
    }
}

/// One way of writing a workload: its example file (and bench wrappers),
/// its primal function, the label prefix of its rows, and the hand-written
/// Rust primal and gradient in the same style. The second styles (issue
/// #19) are also checked against the first style's hand-written versions.
struct Style<N, G> {
    file: &'static str,
    primal: &'static str,
    label: &'static str,
    native: N,
    native_grad: G,
    first_style: Option<(N, G)>,
}

type RosenbrockStyle = Style<fn(&[f64]) -> f64, fn(&[f64], &mut [f64])>;

const ROSENBROCK: RosenbrockStyle = Style {
    file: "rosenbrock",
    primal: "rosenbrock",
    label: "rosenbrock",
    native: native::rosenbrock,
    native_grad: native::rosenbrock_grad,
    first_style: None,
};

const ROSENBROCK2: RosenbrockStyle = Style {
    file: "rosenbrock_style2",
    primal: "rosenbrock_pairs",
    label: "rosenbrock2",
    native: native::rosenbrock2,
    native_grad: native::rosenbrock2_grad,
    first_style: Some((native::rosenbrock, native::rosenbrock_grad)),
};

/// The largest difference between a second style and the first that still
/// counts as rounding: the sums run over 10^6 terms (GMM: 10^4) associated
/// differently.
const ACROSS_STYLES: f64 = 1e-10;

fn rosenbrock(c: &mut Criterion, rec: &Record, style: &RosenbrockStyle) {
    let n = 1_000_000;
    let x = data(3, n, -1.0, 1.0);
    let v = data(4, n, -1.0, 1.0);
    let zero = vec![0.0; n];
    let prog = Program::new(session(style.file));
    let label = format!("{} n=1e6", style.label);
    let out = bench_adze(
        c,
        rec,
        &label,
        &prog,
        Adze {
            primal: (style.primal, vec![arr(&x)]),
            grad: ("bench_grad", vec![arr(&x), arr(&zero)]),
            fwd: ("bench_fwd", vec![arr(&x), arr(&v)]),
            hvp: ("bench_hvp", vec![arr(&x), arr(&v), arr(&zero), arr(&zero)]),
        },
        true,
        true,
    );
    let mut g = group(c, &label);
    let mut dx = zero.clone();
    measure(&mut g, rec, &label, "rustc primal", || {
        black_box((style.native)(black_box(&x)));
    });
    measure(&mut g, rec, &label, "rustc gradient", || {
        (style.native_grad)(black_box(&x), &mut dx);
        black_box(&dx);
    });
    g.finish();
    if let Some(Ok((r, _))) = out.get("primal") {
        let want = (style.native)(&x);
        check(
            rec,
            &format!("{label} primal"),
            rel_err(&[as_f64(&r[0])], &[want]),
        );
        if let Some((first, _)) = style.first_style {
            check_across(rec, &format!("{label} primal"), as_f64(&r[0]), first(&x));
        }
    }
    if let Some(Ok((_, args))) = out.get("gradient") {
        (style.native_grad)(&x, &mut dx);
        check(
            rec,
            &format!("{label} gradient"),
            rel_err(as_arr(&args[1]), &dx),
        );
        if let Some((_, first_grad)) = style.first_style {
            first_grad(&x, &mut dx);
            let err = rel_err(as_arr(&args[1]), &dx);
            check_tol(
                rec,
                &format!("{label} gradient vs the first style"),
                err,
                ACROSS_STYLES,
            );
        }
    }
}

/// A second style's primal against the first style's hand-written one.
fn check_across(rec: &Record, what: &str, got: f64, first: f64) {
    let err = ((got - first) / first).abs();
    check_tol(
        rec,
        &format!("{what} vs the first style"),
        err,
        ACROSS_STYLES,
    );
}

type GmmStyle = Style<fn(&native::Gmm) -> f64, GmmGrad>;
type GmmGrad = fn(&native::Gmm, &mut [f64], &mut [f64], &mut [f64]);

const GMM: GmmStyle = Style {
    file: "gmm",
    primal: "gmm_objective",
    label: "gmm",
    native: native::gmm,
    native_grad: native::gmm_grad,
    first_style: None,
};

const GMM2: GmmStyle = Style {
    file: "gmm_style2",
    primal: "gmm_loss",
    label: "gmm2",
    native: native::gmm2,
    native_grad: native::gmm2_grad,
    first_style: Some((native::gmm, native::gmm_grad)),
};

#[allow(clippy::too_many_arguments)]
fn gmm(
    c: &mut Criterion,
    rec: &Record,
    style: &GmmStyle,
    d: usize,
    k: usize,
    n: usize,
    compile: bool,
) {
    let icf_sz = d * (d + 1) / 2;
    let p = native::Gmm {
        d,
        k,
        n,
        alphas: data(5, k, -1.0, 1.0),
        means: data(6, k * d, -1.0, 1.0),
        icf: data(7, k * icf_sz, -0.3, 0.3),
        x: data(8, n * d, -1.0, 1.0),
        gamma: 1.0,
        m: 0,
    };
    let head = vec![
        Val::I64(d as i64),
        Val::I64(k as i64),
        Val::I64(n as i64),
        arr(&p.alphas),
        arr(&p.means),
        arr(&p.icf),
        arr(&p.x),
        Val::F64(p.gamma),
        Val::I64(p.m),
    ];
    let tangents = [
        arr(&data(9, k, -1.0, 1.0)),
        arr(&data(10, k * d, -1.0, 1.0)),
        arr(&data(11, k * icf_sz, -1.0, 1.0)),
    ];
    let shadows = [
        arr(&vec![0.0; k]),
        arr(&vec![0.0; k * d]),
        arr(&vec![0.0; k * icf_sz]),
    ];
    let with = |parts: &[&[Val]]| -> Vec<Val> {
        let mut v = head.clone();
        for p in parts {
            v.extend_from_slice(p);
        }
        v
    };
    let prog = Program::new(session(style.file));
    let label = format!("{} d={d} k={k} n={n}", style.label);
    let out = bench_adze(
        c,
        rec,
        &label,
        &prog,
        Adze {
            primal: (style.primal, head.clone()),
            grad: ("bench_grad", with(&[&shadows])),
            fwd: ("bench_fwd", with(&[&tangents])),
            hvp: ("bench_hvp", with(&[&tangents, &shadows, &shadows])),
        },
        compile,
        false,
    );
    let mut g = group(c, &label);
    let (mut da, mut dm, mut di) = (vec![0.0; k], vec![0.0; k * d], vec![0.0; k * icf_sz]);
    measure(&mut g, rec, &label, "rustc primal", || {
        black_box((style.native)(black_box(&p)));
    });
    measure(&mut g, rec, &label, "rustc gradient", || {
        (style.native_grad)(black_box(&p), &mut da, &mut dm, &mut di);
        black_box((&da, &dm, &di));
    });
    g.finish();
    if let Some(Ok((r, _))) = out.get("primal") {
        let want = (style.native)(&p);
        check(
            rec,
            &format!("{label} primal"),
            ((as_f64(&r[0]) - want) / want).abs(),
        );
        if let Some((first, _)) = style.first_style {
            check_across(rec, &format!("{label} primal"), as_f64(&r[0]), first(&p));
        }
    }
    if let Some(Ok((_, args))) = out.get("gradient") {
        let got: Vec<f64> = args[9..12]
            .iter()
            .flat_map(|a| as_arr(a).to_vec())
            .collect();
        let want = |grad: GmmGrad, da: &mut Vec<f64>, dm: &mut Vec<f64>, di: &mut Vec<f64>| {
            grad(&p, da, dm, di);
            [&*da, &*dm, &*di]
                .into_iter()
                .flatten()
                .copied()
                .collect::<Vec<f64>>()
        };
        let mine = want(style.native_grad, &mut da, &mut dm, &mut di);
        check(rec, &format!("{label} gradient"), rel_err(&got, &mine));
        if let Some((_, first_grad)) = style.first_style {
            let first = want(first_grad, &mut da, &mut dm, &mut di);
            check_tol(
                rec,
                &format!("{label} gradient vs the first style"),
                rel_err(&got, &first),
                ACROSS_STYLES,
            );
        }
    }
}

fn lstm(c: &mut Criterion, rec: &Record) {
    let t = 100_000;
    let w = data(12, 12, -0.5, 0.5);
    let xs = data(13, t, -1.0, 1.0);
    let ys = data(14, t, -1.0, 1.0);
    let tw = data(15, 12, -1.0, 1.0);
    let zero = vec![0.0; 12];
    let prog = Program::new(session("lstm"));
    let label = "lstm T=1e5";
    let out = bench_adze(
        c,
        rec,
        label,
        &prog,
        Adze {
            primal: ("lstm_loss", vec![arr(&w), arr(&xs), arr(&ys)]),
            grad: ("bench_grad", vec![arr(&w), arr(&xs), arr(&ys), arr(&zero)]),
            fwd: ("bench_fwd", vec![arr(&w), arr(&xs), arr(&ys), arr(&tw)]),
            hvp: (
                "bench_hvp",
                vec![
                    arr(&w),
                    arr(&xs),
                    arr(&ys),
                    arr(&tw),
                    arr(&zero),
                    arr(&zero),
                ],
            ),
        },
        true,
        false,
    );
    let mut g = group(c, label);
    let mut dw = zero.clone();
    let mut store = Vec::with_capacity(t);
    measure(&mut g, rec, label, "rustc primal", || {
        black_box(native::lstm_loss(black_box(&w), &xs, &ys));
    });
    measure(&mut g, rec, label, "rustc gradient", || {
        native::lstm_grad(black_box(&w), &xs, &ys, &mut dw, &mut store);
        black_box(&dw);
    });
    g.finish();
    if let Some(Ok((_, args))) = out.get("gradient") {
        native::lstm_grad(&w, &xs, &ys, &mut dw, &mut store);
        check(rec, "lstm gradient", rel_err(as_arr(&args[3]), &dw));
    }
}

fn recurrence(c: &mut Criterion, rec: &Record) {
    let n = 1_000_000i64;
    let (r, x0) = (3.0, 0.3);
    let args = vec![Val::F64(r), Val::F64(x0), Val::I64(n)];
    let prog = Program::new(session("recurrence"));
    let label = "logistic n=1e6";
    let out = bench_adze(
        c,
        rec,
        label,
        &prog,
        Adze {
            primal: ("logistic", args.clone()),
            grad: ("bench_grad", args.clone()),
            fwd: ("bench_fwd", args.clone()),
            hvp: ("bench_hvp", args.clone()),
        },
        true,
        false,
    );
    let mut g = group(c, label);
    measure(&mut g, rec, label, "rustc primal", || {
        black_box(native::logistic(black_box(r), x0, n));
    });
    measure(&mut g, rec, label, "rustc gradient", || {
        black_box(native::logistic_grad(black_box(r), x0, n));
    });
    g.finish();
    if let Some(Ok((res, _))) = out.get("gradient") {
        let (dr, dx0) = native::logistic_grad(r, x0, n);
        let got = [as_f64(&res[0]), as_f64(&res[1])];
        check(rec, "logistic gradient", rel_err(&got, &[dr, dx0]));
    }
}

/// GradBench's kernels as the GradBench tool compiles them
/// (`crates/gradbench/evals/*.adz`, issue #19): ode (`n = 10^4`, `s =
/// 100`), kmeans (`k = 100`, `n = 10^4`, `d = 16`: `cost`, its gradient,
/// and `dir`, forward over reverse, in the HVP column) and det (`ℓ = 9`),
/// on pseudo-random inputs. docs/performance.md compares them with
/// GradBench's tools.
fn gradbench(c: &mut Criterion, rec: &Record) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let eval = |name: &str| {
        let path = root.join(format!("crates/gradbench/evals/{name}.adz"));
        let src = std::fs::read_to_string(&path).unwrap();
        Program::new(configure(
            adze::Session::from_source(&format!("{name}.adz"), &src).unwrap(),
        ))
    };
    let ode_x = data(31, 10_000, 0.0, 1.0);
    let points = data(32, 10_000 * 16, 0.0, 1.0);
    let centroids = data(33, 100 * 16, 0.0, 1.0);
    let det_a = data(34, 81, -1.0, 1.0);
    // (eval, label, arguments, [(column, function)])
    type Case<'a> = (&'a str, &'a str, Vec<Val>, Vec<(&'a str, &'a str)>);
    let cases: [Case; 3] = [
        (
            "ode",
            "ode n=1e4 s=100",
            vec![arr(&ode_x), Val::I64(100)],
            vec![("primal", "primal"), ("gradient", "gradient")],
        ),
        (
            "kmeans",
            "kmeans k=100 n=1e4 d=16",
            vec![arr(&points), arr(&centroids), Val::I64(16)],
            vec![
                ("primal", "cost"),
                ("gradient", "cost_gradient"),
                ("hvp", "dir"),
            ],
        ),
        (
            "det",
            "det l=9",
            vec![arr(&det_a), Val::I64(9)],
            vec![("primal", "primal"), ("gradient", "gradient")],
        ),
    ];
    for (name, label, args, columns) in cases {
        let prog = eval(name);
        let mut g = group(c, label);
        for (column, fname) in columns {
            let f = prog.function(fname).unwrap();
            if let Some(pass) = ab_pass() {
                ab(rec, label, column, &prog, fname, pass, &f, &args);
                continue;
            }
            let mut a = args.clone();
            let mut slots = borrowed(&mut a);
            measure(&mut g, rec, label, column, || {
                black_box(f.call(&mut slots).unwrap());
            });
        }
        g.finish();
    }
}

fn fmt_ratio(x: Option<f64>, target: Option<f64>) -> String {
    match x {
        None => "—".to_string(),
        Some(x) => {
            let mark = match target {
                Some(t) if x <= t => " ok",
                Some(_) => " MISS",
                None => "",
            };
            format!("{x:.2}{mark}")
        }
    }
}

fn fmt_time(x: Option<f64>) -> String {
    match x {
        None => "—".to_string(),
        Some(s) if s >= 1.0 => format!("{s:.2} s"),
        Some(s) if s >= 1e-3 => format!("{:.2} ms", s * 1e3),
        Some(s) => format!("{:.1} µs", s * 1e6),
    }
}

fn table(rec: &Record, labels: &[String]) {
    let ratio = |l: &str, a: &str, b: &str| Some(rec.median(l, a)? / rec.median(l, b)?);
    println!();
    println!("## adze workloads: medians of {SAMPLES} samples (targets: gradient ≤ 3×, HVP ≤ 8×, forward ≤ 2× primal; primal ≤ 1.5× rustc -O)");
    println!();
    println!("| workload | primal | grad/primal | hvp/primal | fwd/primal | primal/rustc | grad/rustc grad | rustc grad/rustc primal | copying call/call_mut |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for l in labels {
        println!(
            "| {l} | {} | {} | {} | {} | {} | {} | {} | {} |",
            fmt_time(rec.median(l, "primal")),
            fmt_ratio(ratio(l, "gradient", "primal"), Some(3.0)),
            fmt_ratio(ratio(l, "hvp", "primal"), Some(8.0)),
            fmt_ratio(ratio(l, "forward", "primal"), Some(2.0)),
            fmt_ratio(ratio(l, "primal", "rustc primal"), Some(1.5)),
            fmt_ratio(ratio(l, "gradient", "rustc gradient"), None),
            fmt_ratio(ratio(l, "rustc gradient", "rustc primal"), None),
            fmt_ratio(ratio(l, "primal (copying)", "primal"), None),
        );
    }
    println!();
    println!("## absolute medians");
    println!();
    println!("| workload | primal | gradient | forward | hvp | rustc primal | rustc gradient |");
    println!("|---|---|---|---|---|---|---|");
    for l in labels {
        let t = |c: &str| fmt_time(rec.median(l, c));
        println!(
            "| {l} | {} | {} | {} | {} | {} | {} |",
            t("primal"),
            t("gradient"),
            t("forward"),
            t("hvp"),
            t("rustc primal"),
            t("rustc gradient"),
        );
    }
    println!();
    println!(
        "## JIT compile time (ms, median; target: GMM gradient < 10 ms, every function < 100 ms)"
    );
    println!();
    println!("| workload | primal | gradient | forward | hvp |");
    println!("|---|---|---|---|---|");
    for l in labels {
        let ms = |c: &str| {
            rec.median(l, c)
                .map(|s| {
                    let limit = if l.starts_with("gmm") && c == "compile gradient" {
                        10.0
                    } else {
                        100.0
                    };
                    let mark = if s * 1e3 < limit { "" } else { " MISS" };
                    format!("{:.2}{mark}", s * 1e3)
                })
                .unwrap_or_else(|| "—".into())
        };
        if rec.median(l, "compile primal").is_some() {
            println!(
                "| {l} | {} | {} | {} | {} |",
                ms("compile primal"),
                ms("compile gradient"),
                ms("compile forward"),
                ms("compile hvp"),
            );
        }
    }
    println!();
    for n in rec.notes.borrow().iter() {
        println!("- {n}");
    }
}

/// The Python that runs `benches/jax_workloads.py`: `ADZE_BENCH_JAX` when
/// it is set (`0` skips the JAX table), otherwise the first of
/// `$CARGO_TARGET_DIR/jax-venv/bin/python` (a relative `CARGO_TARGET_DIR`
/// from the workspace root) and `target/jax-venv/bin/python` that imports
/// `jax` (`just jax-venv` makes one). Prints one line saying which.
fn jax_python() -> Option<String> {
    if let Ok(python) = std::env::var("ADZE_BENCH_JAX") {
        if python == "0" {
            println!("\nJAX: skipped (ADZE_BENCH_JAX=0)");
            return None;
        }
        println!("\nJAX: {python} (from ADZE_BENCH_JAX)");
        return Some(python);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut candidates = Vec::new();
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        candidates.push(root.join(dir).join("jax-venv/bin/python"));
    }
    candidates.push(root.join("target/jax-venv/bin/python"));
    candidates.dedup();
    for python in &candidates {
        let imports_jax = python.exists()
            && std::process::Command::new(python)
                .args(["-c", "import jax"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
        if imports_jax {
            println!(
                "\nJAX: {} (found; ADZE_BENCH_JAX=0 skips it)",
                python.display()
            );
            return Some(python.display().to_string());
        }
    }
    let looked: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
    println!(
        "\nJAX: no Python that imports jax at {}; `just jax-venv` makes one \
         (or set ADZE_BENCH_JAX to a Python with jax)",
        looked.join(" or ")
    );
    None
}

fn jax() {
    let Some(python) = jax_python() else {
        return;
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/jax_workloads.py");
    println!("\n## JAX ({python} {})\n", script.display());
    // The script reads `ADZE_BENCH_ONLY` too (inherited).
    run_jax(&python, &script, None);
    // Then at adze's vector width: XLA's CPU back end vectorizes for the
    // host (256-bit vectors of four f64 on an AVX2 or AVX-512 machine);
    // Cranelift 0.135 has two f64 lanes (`f64x2`). `--xla_cpu_max_isa=
    // SSE4_2` makes XLA use two lanes too (its LLVM IR then holds `<2 x
    // double>` where it held `<4 x double>`). `ADZE_BENCH_JAX_SSE=0`
    // skips this second run.
    if std::env::var("ADZE_BENCH_JAX_SSE").as_deref() != Ok("0") {
        println!(
            "\n## JAX at adze's vector width (XLA_FLAGS=--xla_cpu_max_isa=SSE4_2: two f64 lanes)\n"
        );
        run_jax(&python, &script, Some("--xla_cpu_max_isa=SSE4_2"));
    }
}

/// Runs the JAX script, with `flag` added to `XLA_FLAGS`.
fn run_jax(python: &str, script: &std::path::Path, flag: Option<&str>) {
    let mut cmd = std::process::Command::new(python);
    cmd.arg(script);
    if let Some(flag) = flag {
        let flags = match std::env::var("XLA_FLAGS") {
            Ok(f) if !f.is_empty() => format!("{f} {flag}"),
            _ => flag.to_string(),
        };
        cmd.env("XLA_FLAGS", flags);
    }
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => println!("JAX script failed: {s}"),
        Err(e) => println!("cannot run {python}: {e}"),
    }
}

fn main() {
    // `ADZE_BENCH_DISASM=seed:dg_plain` prints the machine code of a
    // workload's function (as compiled for the benchmark) and exits.
    if let Ok(spec) = std::env::var("ADZE_BENCH_DISASM") {
        let (w, f) = spec.split_once(':').expect("workload:function");
        let mut s = session(w);
        s.jit.disasm = true;
        let function = Program::new(s).function(f).unwrap();
        println!("{}", function.disassembly().unwrap_or_default());
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    let rec = Record::default();
    // `ADZE_BENCH_ONLY=seed,gmm` runs only those workloads (criterion's own
    // filter skips measurements, not the set-up of the other workloads).
    let only = std::env::var("ADZE_BENCH_ONLY").ok();
    let on = |w: &str| only.as_ref().is_none_or(|o| o.split(',').any(|x| x == w));
    // `ADZE_BENCH_REPEAT=3` runs everything three times, in turn; the
    // tables then take each column's best pass (see `Record::median`).
    let repeat: usize = std::env::var("ADZE_BENCH_REPEAT")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    for _ in 0..repeat {
        if on("seed") {
            seed(&mut c, &rec);
        }
        if on("rosenbrock") {
            rosenbrock(&mut c, &rec, &ROSENBROCK);
        }
        // The same function written in another style (issue #19).
        if on("rosenbrock2") {
            rosenbrock(&mut c, &rec, &ROSENBROCK2);
        }
        for (name, style) in [("gmm", &GMM), ("gmm2", &GMM2)] {
            if on(name) {
                gmm(&mut c, &rec, style, 8, 10, 1000, true);
                // D=64, K=50 at N=1000 would tape several GB: N is reduced
                // for every column alike, so the ratios are per data point
                // as at N=1000.
                gmm(&mut c, &rec, style, 64, 50, GMM_BIG_N, false);
            }
        }
        if on("lstm") {
            lstm(&mut c, &rec);
        }
        if on("recurrence") {
            recurrence(&mut c, &rec);
        }
        if on("gradbench") {
            gradbench(&mut c, &rec);
        }
    }
    c.final_summary();
    let labels: Vec<String> = {
        let mut seen = Vec::new();
        for (l, _) in rec.times.borrow().keys() {
            if !seen.contains(l) {
                seen.push(l.clone());
            }
        }
        seen
    };
    table(&rec, &labels);
    jax();
}

const GMM_BIG_N: usize = 50;
