//! adze's differential fuzzer of derivatives (SPEC §7).
//!
//! [`gen`] writes random well-typed `.adz` programs from a seed: helper
//! functions calling each other, tuples with unused results, `mut` and
//! scratch arrays written by callees, helpers returning arrays (`[f64]`,
//! tuples with arrays, `[i64]` gather indices), loops, branches, bounded
//! recursion, singular intrinsics evaluated at their singular points,
//! arbitrary custom rules, inline hints, and a chain of in-source
//! `autodiff` derivatives nested to order 1..=3 in every mode order; often
//! also `topa`, a top-level function with array results. [`run`] runs
//! `top` and every derivative of the chain at a few points under the 16
//! settings (4 inline settings × optimizer on/off × JIT/interpreter) and
//! compares the results bit for bit; rule-free programs are also checked
//! against central finite differences. `topa` is run, and differentiated
//! from outside in forward and reverse mode ([`check_array_top`]), the
//! same way, plus the dot-product test between the two modes. [`reduce`] shrinks a disagreeing program. The command is
//! `adze-fuzz-diff` (`src/main.rs`); see `docs/robustness.md`,
//! "Differential fuzzer".
#![forbid(unsafe_code)]

pub mod gen;
pub mod linear;
pub mod reduce;
pub mod run;

use adze::adze_ir::{Limits, Mode, Module, Val};
use gen::{GenConfig, Program};
use run::{Category, Observed, Res, Setting, Target};
use std::collections::BTreeMap;
use std::time::Duration;

/// What to run and how.
#[derive(Clone, Debug)]
pub struct Config {
    pub gen: GenConfig,
    pub settings: Vec<Setting>,
    pub limits: Limits,
    /// Check rule-free programs against finite differences.
    pub fd: bool,
    /// Reduce each finding (the first one of each program).
    pub reduce: bool,
    /// Predicate evaluations allowed per reduction.
    pub max_reduce_tests: usize,
    /// Reduce at most this many findings of one signature.
    pub max_reduced_per_signature: usize,
    /// Compare NaN payloads too (off: every NaN equals every NaN, see
    /// [`run::categorize`]).
    pub exact_nan: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            gen: GenConfig::default(),
            settings: run::all_settings(),
            limits: run::fuzz_limits(),
            fd: true,
            reduce: false,
            max_reduce_tests: 400,
            exact_nan: false,
            max_reduced_per_signature: 3,
        }
    }
}

/// What kind of bug a finding shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FindingKind {
    /// Two settings disagree.
    Disagreement(Category),
    /// Every setting agrees, but on an internal error or a panic.
    Internal,
}

/// A program on which adze misbehaves.
#[derive(Clone, Debug)]
pub struct Finding {
    pub seed: Option<u64>,
    pub source: String,
    pub func: String,
    /// A derivative of `func` requested from outside the source
    /// (`Session::derive`; the array top's forward and reverse
    /// derivatives), or `func` itself.
    pub derive: Option<Mode>,
    pub point: (f64, f64),
    pub kind: FindingKind,
    /// The settings grouped by outcome: labels and the outcome's text.
    pub groups: Vec<(Vec<String>, String)>,
    /// The two settings the reducer keeps apart (indices into
    /// `Config::settings`); equal for an internal finding.
    pub pair: (usize, usize),
    /// What the first setting of the pair gave (the internal outcome, for
    /// an internal finding).
    pub witness: Res,
    pub reduced: Option<String>,
    /// What kind of bug this is, for grouping: the category and the classes
    /// of the two outcomes (`NaN vs number: values/values`,
    /// `error: values/jit:Unsupported`).
    pub signature: String,
}

impl Finding {
    pub fn title(&self) -> String {
        let what = match &self.kind {
            FindingKind::Disagreement(c) => format!("disagreement ({})", c.name()),
            FindingKind::Internal => "internal error".to_string(),
        };
        let seed = self.seed.map(|s| format!("seed {s}, ")).unwrap_or_default();
        format!(
            "{seed}{} at (x, y) = ({:?}, {:?}): {what} [{}]",
            self.target().label(),
            self.point.0,
            self.point.1,
            self.signature
        )
    }

    /// What was run.
    pub fn target(&self) -> Target {
        Target {
            func: self.func.clone(),
            derive: self.derive,
        }
    }

    /// The whole report: title, groups, the (reduced) program.
    pub fn report(&self) -> String {
        let mut s = format!("=== {}\n", self.title());
        for (labels, text) in &self.groups {
            s.push_str(&format!("  {}:\n      {}\n", labels.join(" "), text));
        }
        match &self.reduced {
            Some(r) => {
                s.push_str(&format!(
                    "--- reduced program ({} lines):\n{r}",
                    r.lines().count()
                ));
            }
            None => s.push_str(&format!("--- program:\n{}", self.source)),
        }
        s
    }
}

/// A derivative that differs from central finite differences (reported
/// separately: only rule-free programs are checked, but the tolerance is
/// loose and a kink near the point can still slip through).
#[derive(Clone, Debug)]
pub struct FdMismatch {
    pub seed: u64,
    /// The derivative (`dk`, or `topa (forward)`).
    pub func: String,
    pub point: (f64, f64),
    /// For the tangents of an array top: the output (counting every f64 of
    /// the results in order) that mismatches.
    pub element: Option<usize>,
    pub ad: f64,
    pub fd: f64,
    /// The program, reduced while the mismatch stays (with `--reduce`).
    pub reduced: Option<String>,
}

/// What the finite-difference check says at one point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FdVerdict {
    /// Not smooth there (the estimates with steps `h` and `2h` disagree)
    /// or something is not finite.
    Skipped,
    Agrees,
    /// The central difference, far from the derivative.
    Mismatch(f64),
}

/// Compares `ad`, the value of `dk = dir · ∇ d(k-1)` at `(x, y)`, with the
/// central difference of `of` (= `d(k-1)`) of a prepared module.
pub fn fd_verdict(
    base: &Module,
    of: &str,
    ad: f64,
    (x, y): (f64, f64),
    dir: [f64; 2],
    limits: Limits,
) -> FdVerdict {
    let f = |t: f64| run::eval_scalar(base, of, limits, x + t * dir[0], y + t * dir[1]);
    let (Some(a1), Some(b1), Some(a2), Some(b2)) =
        (f(FD_H), f(-FD_H), f(2.0 * FD_H), f(-2.0 * FD_H))
    else {
        return FdVerdict::Skipped;
    };
    fd_judge(ad, [a1, b1, a2, b2])
}

/// The step of the central differences.
const FD_H: f64 = 1e-5;

/// Compares `ad` with the central differences of steps `h` and `2h` made
/// of the values at `+h`, `-h`, `+2h`, `-2h`.
fn fd_judge(ad: f64, [a1, b1, a2, b2]: [f64; 4]) -> FdVerdict {
    const H: f64 = FD_H;
    if [a1, b1, a2, b2, ad].iter().any(|v| !v.is_finite()) {
        return FdVerdict::Skipped;
    }
    let fd1 = (a1 - b1) / (2.0 * H);
    let fd2 = (a2 - b2) / (4.0 * H);
    let scale = [a1, b1, a2, b2].iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let noise = 64.0 * f64::EPSILON * scale / H;
    if (fd1 - fd2).abs() > 1e-6 * fd1.abs().max(1.0) + 4.0 * noise {
        return FdVerdict::Skipped;
    }
    if (fd1 - ad).abs() > 1e-4 * ad.abs().max(1.0) + 4.0 * noise {
        FdVerdict::Mismatch(fd1)
    } else {
        FdVerdict::Agrees
    }
}

/// Compares the tangents `ad` (every f64 of a forward derivative's
/// tangent results, in order) of `func` at `(x, y)` along `dir` with
/// central differences of `func`'s results (a prepared module): a
/// mismatch (the first output that mismatches and its difference), an
/// agreement when some output agrees and none mismatches, else skipped
/// (also when the results change length near the point).
pub fn fd_vector_verdict(
    base: &Module,
    func: &str,
    ad: &[f64],
    (x, y): (f64, f64),
    dir: [f64; 2],
    limits: Limits,
) -> (FdVerdict, Option<usize>) {
    let f = |t: f64| {
        let args = run::args_of(x + t * dir[0], y + t * dir[1]);
        run::eval_vals(base, func, limits, &args)
            .map(|v| run::flatten(&v))
            .filter(|v| v.len() == ad.len())
    };
    let (Some(a1), Some(b1), Some(a2), Some(b2)) =
        (f(FD_H), f(-FD_H), f(2.0 * FD_H), f(-2.0 * FD_H))
    else {
        return (FdVerdict::Skipped, None);
    };
    let mut verdict = FdVerdict::Skipped;
    for (j, &t) in ad.iter().enumerate() {
        match fd_judge(t, [a1[j], b1[j], a2[j], b2[j]]) {
            FdVerdict::Mismatch(fd) => return (FdVerdict::Mismatch(fd), Some(j)),
            FdVerdict::Agrees => verdict = FdVerdict::Agrees,
            FdVerdict::Skipped => {}
        }
    }
    (verdict, None)
}

/// Does `source` still show a finite-difference mismatch of `d` at
/// `point` (reference setting: `--inline none`, no optimizer, the
/// interpreter)? Invalid programs do not.
pub fn fd_still_mismatches(
    source: &str,
    d: &gen::Deriv,
    point: (f64, f64),
    limits: Limits,
) -> bool {
    let Ok(module) = run::compile(source) else {
        return false;
    };
    let prep =
        |name: &str| run::prepare(&module, name, adze::InlineSetting::None, false, limits).ok();
    let (Some(dm), Some(om)) = (prep(&d.name), prep(&d.of)) else {
        return false;
    };
    let Some(ad) = run::eval_scalar(&dm, &d.name, limits, point.0, point.1) else {
        return false;
    };
    matches!(
        fd_verdict(&om, &d.of, ad, point, d.dir, limits),
        FdVerdict::Mismatch(_)
    )
}

/// A failed dot-product test of an array top: `<u, J v>` (the cotangents
/// `u` against the forward derivative's tangents along `v`) differs from
/// `<Jᵀ u, v>` (the reverse derivative's adjoints against `v`). Checked in
/// rule-free programs at the generic points, like finite differences.
#[derive(Clone, Debug)]
pub struct DotMismatch {
    pub seed: Option<u64>,
    pub func: String,
    pub point: (f64, f64),
    /// `<u, J v>`, from forward mode.
    pub forward: f64,
    /// `<Jᵀ u, v>`, from reverse mode.
    pub reverse: f64,
    /// The program, reduced while the mismatch stays (with `--reduce`).
    pub reduced: Option<String>,
}

/// The figures of a run.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub generated: usize,
    /// Programs the front end rejected: generator bugs.
    pub rejected: usize,
    pub checked: usize,
    pub by_order: BTreeMap<usize, usize>,
    /// Mode orders, innermost first (`"rf"`: forward over reverse).
    pub by_modes: BTreeMap<String, usize>,
    pub with_rules: usize,
    /// (function, point) pairs compared across all settings.
    pub comparisons: usize,
    /// Comparisons where every setting gave the same (non-internal) error.
    pub consistent_errors: usize,
    /// Comparisons where two settings disagreed.
    pub disagreements: usize,
    pub by_category: BTreeMap<String, usize>,
    /// Comparisons where every setting agreed on an internal error or panic.
    pub internal: usize,
    pub fd_checked: usize,
    pub fd_skipped: usize,
    pub fd_mismatches: Vec<FdMismatch>,
    /// Programs with an array top (`topa`), whose forward and reverse
    /// derivatives were requested from outside.
    pub array_tops: usize,
    /// Dot-product tests of array tops (forward against reverse).
    pub dot_checked: usize,
    pub dot_skipped: usize,
    pub dot_mismatches: Vec<DotMismatch>,
    /// Rejected programs (seed, first diagnostic), the first few.
    pub rejects: Vec<(u64, String)>,
    /// Findings (one per function of a program), all of them.
    pub findings: Vec<Finding>,
    /// Findings by signature (see [`Finding::signature`]).
    pub by_signature: BTreeMap<String, usize>,
    pub elapsed: Duration,
}

impl Stats {
    pub fn findings_count(&self) -> usize {
        self.disagreements + self.internal
    }

    /// The figures as text.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let secs = self.elapsed.as_secs_f64();
        s.push_str(&format!(
            "programs: {} generated, {} rejected by the front end (generator bugs), {} checked ({} with rules)\n",
            self.generated, self.rejected, self.checked, self.with_rules
        ));
        let orders: Vec<String> = self
            .by_order
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        s.push_str(&format!("by nesting order: {}\n", orders.join(", ")));
        let modes: Vec<String> = self
            .by_modes
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        s.push_str(&format!(
            "by mode order (innermost first): {}\n",
            modes.join(", ")
        ));
        s.push_str(&format!(
            "comparisons (function x point, each under {} settings): {}; consistent errors: {}\n",
            run::all_settings().len(),
            self.comparisons,
            self.consistent_errors
        ));
        let cats: Vec<String> = self
            .by_category
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        s.push_str(&format!(
            "disagreements: {}{}; internal errors agreed by every setting: {}\n",
            self.disagreements,
            if cats.is_empty() {
                String::new()
            } else {
                format!(" ({})", cats.join(", "))
            },
            self.internal
        ));
        for (sig, n) in &self.by_signature {
            s.push_str(&format!("  findings of kind `{sig}`: {n}\n"));
        }
        s.push_str(&format!(
            "finite differences: {} checked, {} skipped (not smooth or not finite), {} mismatches\n",
            self.fd_checked,
            self.fd_skipped,
            self.fd_mismatches.len()
        ));
        s.push_str(&format!(
            "array tops (function with array results, derived forward and reverse from outside): {}; dot-product tests: {} checked, {} skipped, {} mismatches\n",
            self.array_tops,
            self.dot_checked,
            self.dot_skipped,
            self.dot_mismatches.len()
        ));
        s.push_str(&format!(
            "time: {:.1} s, {:.2} programs/s\n",
            secs,
            if secs > 0.0 {
                self.checked as f64 / secs
            } else {
                0.0
            }
        ));
        s
    }
}

/// Generates and checks the programs of seeds `seed .. seed + count`.
pub fn fuzz(seed: u64, count: u64, config: &Config, mut on_finding: impl FnMut(&Finding)) -> Stats {
    let start = std::time::Instant::now();
    let mut stats = Stats::default();
    for s in seed..seed.saturating_add(count) {
        let prog = gen::generate(s, &config.gen);
        let before = stats.findings.len();
        check_program(&prog, config, &mut stats);
        for f in &stats.findings[before..] {
            on_finding(f);
        }
    }
    stats.elapsed = start.elapsed();
    stats
}

/// Checks one generated program, adding to `stats`.
pub fn check_program(prog: &Program, config: &Config, stats: &mut Stats) {
    stats.generated += 1;
    let module = match run::compile(&prog.source) {
        Ok(m) => m,
        Err(e) => {
            stats.rejected += 1;
            if stats.rejects.len() < 20 {
                stats.rejects.push((prog.seed, e));
            }
            return;
        }
    };
    stats.checked += 1;
    *stats.by_order.entry(prog.order()).or_default() += 1;
    *stats
        .by_modes
        .entry(gen::mode_order(&prog.modes))
        .or_default() += 1;
    if !prog.rule_free {
        stats.with_rules += 1;
    }
    let points: Vec<(f64, f64)> = prog.points.iter().map(|p| (p.x, p.y)).collect();
    let funcs = prog.functions();
    let mut refs: BTreeMap<String, (Option<Module>, Vec<Option<f64>>)> = BTreeMap::new();
    for func in &funcs {
        let found = check_function(
            &module,
            &prog.source,
            Some(prog.seed),
            func,
            &points,
            config,
            stats,
        );
        refs.insert(func.clone(), found);
    }
    if config.fd && prog.rule_free {
        finite_differences(prog, &refs, config, stats);
    }
    if let Some(at) = &prog.array_top {
        let generic: Vec<bool> = prog.points.iter().map(|p| !p.special).collect();
        let top = ArrayTopCheck {
            name: &at.name,
            results: &at.results,
            dir: at.dir,
            rule_free: prog.rule_free,
        };
        check_array_top(
            &module,
            &prog.source,
            Some(prog.seed),
            &top,
            &points,
            &generic,
            config,
            stats,
        );
    }
}

/// A function with array results checked by [`check_array_top`].
#[derive(Clone, Copy, Debug)]
pub struct ArrayTopCheck<'a> {
    pub name: &'a str,
    /// Its results in order: `true` for an array.
    pub results: &'a [bool],
    /// The forward derivative's direction `(tx, ty)`.
    pub dir: [f64; 2],
    /// Check finite differences and the dot-product test (not when rules,
    /// which need not be right, may be involved).
    pub rule_free: bool,
}

/// The arguments of the forward derivative of a function of `(x, y)`:
/// each f64 parameter followed by its tangent.
pub fn forward_args((x, y): (f64, f64), dir: [f64; 2]) -> Vec<Val> {
    vec![Val::F64(x), Val::F64(dir[0]), Val::F64(y), Val::F64(dir[1])]
}

/// The arguments of the reverse derivative of a function of `(x, y)`:
/// the parameters, then one cotangent per result ([`gen::cotangent`]),
/// an array as long as the result (2 when the primal failed).
pub fn reverse_args((x, y): (f64, f64), results: &[bool], primal: Option<&[Val]>) -> Vec<Val> {
    let mut args = run::args_of(x, y);
    args.extend(cotangents(results, primal));
    args
}

fn cotangents(results: &[bool], primal: Option<&[Val]>) -> Vec<Val> {
    results
        .iter()
        .enumerate()
        .map(|(r, &array)| {
            if !array {
                return Val::F64(gen::cotangent(r, 0));
            }
            let n = match primal.and_then(|v| v.get(r)) {
                Some(Val::Array(xs)) => xs.len(),
                _ => 2,
            };
            Val::Array((0..n).map(|j| gen::cotangent(r, j)).collect())
        })
        .collect()
}

/// Checks a function of `(x, y)` with array results: the function, its
/// forward derivative (tangent arrays beside the primal) and its reverse
/// derivative (one cotangent per result), each under every setting, bit
/// for bit; in a rule-free program, at the generic points, the tangents
/// against central finite differences and the two derivatives against
/// each other by the dot-product test.
#[allow(clippy::too_many_arguments)]
pub fn check_array_top(
    module: &Module,
    source: &str,
    seed: Option<u64>,
    top: &ArrayTopCheck,
    points: &[(f64, f64)],
    generic: &[bool],
    config: &Config,
    stats: &mut Stats,
) {
    stats.array_tops += 1;
    let name = top.name;
    let args: Vec<Vec<Val>> = points.iter().map(|&(x, y)| run::args_of(x, y)).collect();
    let (reference, agreed) = check_target_args(
        module,
        source,
        seed,
        &Target::plain(name),
        points,
        &args,
        config,
        stats,
    );
    // The primal results: agreed by every setting, or the reference's.
    let primal: Vec<Option<Vec<Val>>> = points
        .iter()
        .enumerate()
        .map(|(p, &(x, y))| {
            agreed[p].clone().or_else(|| {
                let (m, n) = reference.as_ref()?;
                run::eval_vals(m, n, config.limits, &run::args_of(x, y))
            })
        })
        .collect();
    let fargs: Vec<Vec<Val>> = points.iter().map(|&p| forward_args(p, top.dir)).collect();
    let (_, fwd) = check_target_args(
        module,
        source,
        seed,
        &Target::derived(name, Mode::Forward),
        points,
        &fargs,
        config,
        stats,
    );
    let rargs: Vec<Vec<Val>> = points
        .iter()
        .enumerate()
        .map(|(p, &xy)| reverse_args(xy, top.results, primal[p].as_deref()))
        .collect();
    let (_, rev) = check_target_args(
        module,
        source,
        seed,
        &Target::derived(name, Mode::Reverse),
        points,
        &rargs,
        config,
        stats,
    );
    if !(config.fd && top.rule_free) {
        return;
    }
    let Some((base, _)) = &reference else {
        return;
    };
    let n = top.results.len();
    let mut fd_reduced = false;
    let mut dot_reduced = false;
    for (p, &point) in points.iter().enumerate() {
        if !generic[p] {
            continue;
        }
        let Some(f) = &fwd[p] else {
            stats.fd_skipped += 1;
            stats.dot_skipped += 1;
            continue;
        };
        let tangents = run::flatten(f.get(n..).unwrap_or(&[]));
        match fd_vector_verdict(base, name, &tangents, point, top.dir, config.limits) {
            (FdVerdict::Skipped, _) => stats.fd_skipped += 1,
            (FdVerdict::Agrees, _) => stats.fd_checked += 1,
            (FdVerdict::Mismatch(fd), element) => {
                stats.fd_checked += 1;
                let reduced = (config.reduce && !fd_reduced).then(|| {
                    fd_reduced = true;
                    reduce_linear(
                        source,
                        |s| array_fd_still_mismatches(s, top, point, config.limits),
                        config.max_reduce_tests,
                    )
                });
                stats.fd_mismatches.push(FdMismatch {
                    seed: seed.unwrap_or(0),
                    func: Target::derived(name, Mode::Forward).label(),
                    point,
                    element,
                    ad: element.map_or(f64::NAN, |j| tangents[j]),
                    fd,
                    reduced,
                });
            }
        }
        match dot_product(top, f, rev[p].as_deref(), primal[p].as_deref()) {
            None => stats.dot_skipped += 1,
            Some((_, _, true)) => stats.dot_checked += 1,
            Some((lhs, rhs, false)) => {
                stats.dot_checked += 1;
                let reduced = (config.reduce && !dot_reduced).then(|| {
                    dot_reduced = true;
                    reduce_linear(
                        source,
                        |s| dot_still_mismatches(s, top, point, config.limits),
                        config.max_reduce_tests,
                    )
                });
                stats.dot_mismatches.push(DotMismatch {
                    seed,
                    func: name.to_string(),
                    point,
                    forward: lhs,
                    reverse: rhs,
                    reduced,
                });
            }
        }
    }
}

/// The dot-product test at one point: `<u, J v>` from the forward
/// derivative's results `fwd` (the primal results, then the tangents),
/// `<Jᵀ u, v>` from the reverse derivative's results `rev` (the adjoints
/// of `x` and `y`), and whether they agree (relative to the sum of the
/// terms' magnitudes). `None` when something is missing, has another
/// shape, or is not finite.
pub fn dot_product(
    top: &ArrayTopCheck,
    fwd: &[Val],
    rev: Option<&[Val]>,
    primal: Option<&[Val]>,
) -> Option<(f64, f64, bool)> {
    let n = top.results.len();
    let tangents = run::flatten(fwd.get(n..)?);
    let u = run::flatten(&cotangents(top.results, Some(primal?)));
    let [Val::F64(gx), Val::F64(gy)] = rev? else {
        return None;
    };
    if tangents.len() != u.len() {
        return None;
    }
    let terms: Vec<f64> = u.iter().zip(&tangents).map(|(a, b)| a * b).collect();
    let lhs: f64 = terms.iter().sum();
    let rhs = gx * top.dir[0] + gy * top.dir[1];
    if !lhs.is_finite() || !rhs.is_finite() {
        return None;
    }
    let scale = 1.0
        + terms.iter().map(|t| t.abs()).sum::<f64>()
        + (gx * top.dir[0]).abs()
        + (gy * top.dir[1]).abs();
    Some((lhs, rhs, (lhs - rhs).abs() <= 1e-8 * scale))
}

/// The reference setting's module of `source` prepared for `target`, and
/// the name to run.
fn reference_of(source: &str, target: &Target, limits: Limits) -> Option<Prepared> {
    let module = run::compile(source).ok()?;
    run::prepare_target(&module, target, adze::InlineSetting::None, false, limits).ok()
}

/// Does `source` still show a finite-difference mismatch of the array
/// top's tangents at `point` (reference setting)?
pub fn array_fd_still_mismatches(
    source: &str,
    top: &ArrayTopCheck,
    point: (f64, f64),
    limits: Limits,
) -> bool {
    let Some((base, _)) = reference_of(source, &Target::plain(top.name), limits) else {
        return false;
    };
    let Some((dm, dn)) = reference_of(source, &Target::derived(top.name, Mode::Forward), limits)
    else {
        return false;
    };
    let Some(f) = run::eval_vals(&dm, &dn, limits, &forward_args(point, top.dir)) else {
        return false;
    };
    let tangents = run::flatten(f.get(top.results.len()..).unwrap_or(&[]));
    matches!(
        fd_vector_verdict(&base, top.name, &tangents, point, top.dir, limits).0,
        FdVerdict::Mismatch(_)
    )
}

/// Does `source` still fail the dot-product test of the array top at
/// `point` (reference setting)?
pub fn dot_still_mismatches(
    source: &str,
    top: &ArrayTopCheck,
    point: (f64, f64),
    limits: Limits,
) -> bool {
    let run_of = |target: Target, args: &[Val]| {
        let (m, n) = reference_of(source, &target, limits)?;
        run::eval_vals(&m, &n, limits, args)
    };
    let Some(primal) = run_of(Target::plain(top.name), &run::args_of(point.0, point.1)) else {
        return false;
    };
    let Some(fwd) = run_of(
        Target::derived(top.name, Mode::Forward),
        &forward_args(point, top.dir),
    ) else {
        return false;
    };
    let rev = run_of(
        Target::derived(top.name, Mode::Reverse),
        &reverse_args(point, top.results, Some(&primal)),
    );
    matches!(
        dot_product(top, &fwd, rev.as_deref(), Some(&primal)),
        Some((_, _, false))
    )
}

/// Runs `func` under every setting at every point, records disagreements
/// and internal errors (reducing the first one if asked), and returns the
/// reference module and the agreed single f64 result at each point.
pub fn check_function(
    module: &Module,
    source: &str,
    seed: Option<u64>,
    func: &str,
    points: &[(f64, f64)],
    config: &Config,
    stats: &mut Stats,
) -> (Option<Module>, Vec<Option<f64>>) {
    let args: Vec<_> = points.iter().map(|&(x, y)| run::args_of(x, y)).collect();
    check_function_args(module, source, seed, func, points, &args, config, stats)
}

/// [`check_function`] with explicit argument lists (`points` only labels
/// them).
#[allow(clippy::too_many_arguments)]
pub fn check_function_args(
    module: &Module,
    source: &str,
    seed: Option<u64>,
    func: &str,
    points: &[(f64, f64)],
    args: &[Vec<adze::adze_ir::Val>],
    config: &Config,
    stats: &mut Stats,
) -> (Option<Module>, Vec<Option<f64>>) {
    let target = Target::plain(func);
    let (reference, agreed) =
        check_target_args(module, source, seed, &target, points, args, config, stats);
    let agreed = agreed
        .into_iter()
        .map(|v| match v.as_deref() {
            Some([Val::F64(x)]) => Some(*x),
            _ => None,
        })
        .collect();
    (reference.map(|(m, _)| m), agreed)
}

/// A prepared module and the name of the function to run in it.
pub type Prepared = (Module, String);

/// [`check_function_args`] of a [`Target`]: returns the reference module
/// and name, and the results every setting agreed on at each point.
#[allow(clippy::too_many_arguments)]
pub fn check_target_args(
    module: &Module,
    source: &str,
    seed: Option<u64>,
    target: &Target,
    points: &[(f64, f64)],
    args: &[Vec<adze::adze_ir::Val>],
    config: &Config,
    stats: &mut Stats,
) -> (Option<Prepared>, Vec<Option<Vec<Val>>>) {
    let (outs, reference) = run::run_target(module, target, &config.settings, config.limits, args);
    let mut agreed = Vec::new();
    let mut reported = false;
    for (p, &point) in points.iter().enumerate() {
        stats.comparisons += 1;
        let col: Vec<&Observed> = outs.iter().map(|o| &o[p]).collect();
        let gs = run::groups(&col, config.exact_nan);
        let finding = if gs.len() > 1 {
            let (a, b) = (gs[0][0], gs[1][0]);
            let cat = run::categorize(&col[a].res, &col[b].res, config.exact_nan)
                .expect("different groups");
            stats.disagreements += 1;
            *stats.by_category.entry(cat.name().to_string()).or_default() += 1;
            Some((FindingKind::Disagreement(cat), (a, b)))
        } else if col[0].internal {
            stats.internal += 1;
            Some((FindingKind::Internal, (0, 0)))
        } else {
            if !matches!(col[0].res, Res::Values(_)) {
                stats.consistent_errors += 1;
            }
            None
        };
        agreed.push(match (&finding, &col[0].res) {
            (None, Res::Values(_)) => col[0].vals.clone(),
            _ => None,
        });
        // One finding per function: the first point that shows it.
        if let Some((kind, pair)) = finding {
            if reported {
                continue;
            }
            reported = true;
            let groups = gs
                .iter()
                .map(|g| {
                    (
                        g.iter().map(|&i| config.settings[i].label()).collect(),
                        col[g[0]].text.clone(),
                    )
                })
                .collect();
            let signature = match &kind {
                FindingKind::Disagreement(c) => {
                    let mut classes = [col[pair.0].res.class(), col[pair.1].res.class()];
                    classes.sort();
                    let by = split_by(&gs, &config.settings);
                    format!("{}: {}/{} (by {by})", c.name(), classes[0], classes[1])
                }
                FindingKind::Internal => format!("internal: {}", col[0].res.class()),
            };
            let mut f = Finding {
                seed,
                source: source.to_string(),
                func: target.func.clone(),
                derive: target.derive,
                point,
                kind,
                groups,
                pair,
                witness: col[pair.0].res.clone(),
                reduced: None,
                signature,
            };
            // Reduce the first finding of a program, unless this kind of
            // finding has been reduced `max_reduced_per_signature` times.
            let seen = stats.by_signature.get(&f.signature).copied().unwrap_or(0);
            let first_of_program = !stats
                .findings
                .iter()
                .any(|g| g.seed == seed && g.source == f.source);
            if config.reduce && first_of_program && seen < config.max_reduced_per_signature {
                f.reduced = Some(reduce_finding(&f, &args[p], config));
            }
            *stats.by_signature.entry(f.signature.clone()).or_default() += 1;
            stats.findings.push(f);
        }
    }
    (reference, agreed)
}

/// What separates the groups of settings that disagree: `inline`,
/// `optimizer` or `engine` when the outcome depends on that alone, else
/// `several`.
pub fn split_by(groups: &[Vec<usize>], settings: &[Setting]) -> &'static str {
    let mut group = vec![0; settings.len()];
    for (g, members) in groups.iter().enumerate() {
        for &i in members {
            group[i] = g;
        }
    }
    let alone = |same: &dyn Fn(&Setting, &Setting) -> bool| {
        (0..settings.len()).all(|i| {
            (0..settings.len()).all(|j| !same(&settings[i], &settings[j]) || group[i] == group[j])
        })
    };
    if alone(&|a, b| a.inline == b.inline) {
        "inline"
    } else if alone(&|a, b| a.optimize == b.optimize) {
        "optimizer"
    } else if alone(&|a, b| a.engine == b.engine) {
        "engine"
    } else {
        "several"
    }
}

/// Does `source` still show `finding` (same function, point, pair of
/// settings, category)? Invalid programs do not.
pub fn still_shows(
    source: &str,
    finding: &Finding,
    args: &[adze::adze_ir::Val],
    config: &Config,
) -> bool {
    let Ok(module) = run::compile(source) else {
        return false;
    };
    let (a, b) = finding.pair;
    let settings = if a == b {
        vec![config.settings[a]]
    } else {
        vec![config.settings[a], config.settings[b]]
    };
    let (outs, _) = run::run_target(
        &module,
        &finding.target(),
        &settings,
        config.limits,
        std::slice::from_ref(&args.to_vec()),
    );
    match &finding.kind {
        FindingKind::Disagreement(cat) => {
            run::categorize(&outs[0][0].res, &outs[1][0].res, config.exact_nan).as_ref()
                == Some(cat)
        }
        FindingKind::Internal => outs[0][0].internal && outs[0][0].res == finding.witness,
    }
}

/// [`reduce::reduce`], keeping the candidates' rules linear when
/// `source`'s are ([`linear::rules_look_linear`]): a reduction that makes
/// a rule non-linear may show another disagreement than the finding, one
/// that docs/rules.md allows.
fn reduce_linear(source: &str, mut still: impl FnMut(&str) -> bool, max_tests: usize) -> String {
    let linear = |s: &str| run::compile(s).is_ok_and(|m| linear::rules_look_linear(&m));
    if linear(source) {
        reduce::reduce(source, |s| linear(s) && still(s), max_tests)
    } else {
        reduce::reduce(source, still, max_tests)
    }
}

/// Shrinks the program of a finding.
pub fn reduce_finding(finding: &Finding, args: &[adze::adze_ir::Val], config: &Config) -> String {
    reduce_linear(
        &finding.source,
        |s| still_shows(s, finding, args, config),
        config.max_reduce_tests,
    )
}

/// Central finite differences: `dk = u · ∇ d(k-1)`, so
/// `(d(k-1)(p + h u) - d(k-1)(p - h u)) / 2h` approximates `dk(p)` (see
/// [`fd_verdict`]). Only at the generic points, where every setting agreed.
fn finite_differences(
    prog: &Program,
    refs: &BTreeMap<String, (Option<Module>, Vec<Option<f64>>)>,
    config: &Config,
    stats: &mut Stats,
) {
    for d in &prog.chain {
        let (Some((_, ad)), Some((Some(base), _))) = (refs.get(&d.name), refs.get(&d.of)) else {
            continue;
        };
        let mut reduced_one = false;
        for (p, point) in prog.points.iter().enumerate() {
            if point.special {
                continue;
            }
            let Some(ad) = ad[p] else {
                stats.fd_skipped += 1;
                continue;
            };
            match fd_verdict(base, &d.of, ad, (point.x, point.y), d.dir, config.limits) {
                FdVerdict::Skipped => stats.fd_skipped += 1,
                FdVerdict::Agrees => stats.fd_checked += 1,
                FdVerdict::Mismatch(fd) => {
                    stats.fd_checked += 1;
                    let reduced = (config.reduce && !reduced_one).then(|| {
                        reduced_one = true;
                        reduce_linear(
                            &prog.source,
                            |s| fd_still_mismatches(s, d, (point.x, point.y), config.limits),
                            config.max_reduce_tests,
                        )
                    });
                    stats.fd_mismatches.push(FdMismatch {
                        seed: prog.seed,
                        func: d.name.clone(),
                        point: (point.x, point.y),
                        element: None,
                        ad,
                        fd,
                        reduced,
                    });
                }
            }
        }
    }
}
