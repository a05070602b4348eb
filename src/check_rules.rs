//! `adze check-rules`: every custom rule compared with the AD derivative of
//! its function's body.
//!
//! For a function `F` with rules, the body is copied into a rule-free twin
//! `F.body` and differentiated by the AD passes; each rule is then run on
//! the same inputs as that derivative, at several sample points:
//!
//! - a forward rule `(x, ẋ, ..) -> (y, ẏ)` against the forward derivative of
//!   the body (every f64 `dual`, every array `dup`): primal results, tangents
//!   and the tangents left in `mut` arrays;
//! - a reverse rule `(x, .., a, ā, .., ȳ) -> x̄` against the reverse
//!   derivative of the body with every cotangent seeded with 1.0: adjoints
//!   of the scalars and the adjoints accumulated into the shadows; and by
//!   the dot-product test against forward mode, `w · (J v) == (Jᵀ w) · v`.
//!
//! The discrepancy of two numbers is `|a - b| / max(1, |b|)`; a rule
//! disagrees when its largest discrepancy exceeds the tolerance.

use crate::Error;
use adze_ir::{ArgActivity, FuncId, Mode, Module, Outcome, RetActivity, Type, Val};

/// The verdict on one rule.
#[derive(Clone, Debug)]
pub struct RuleCheck {
    /// The function the rule belongs to.
    pub func: String,
    pub mode: Mode,
    /// The rule function's name.
    pub rule: String,
    pub samples: usize,
    /// Largest discrepancy against the AD derivative of the body.
    pub discrepancy: f64,
    /// Largest discrepancy of the dot-product test (reverse rules).
    pub dot: Option<f64>,
    /// Why a sample could not be compared (a run-time error), if one failed.
    pub error: Option<String>,
}

impl RuleCheck {
    pub fn agrees(&self, tolerance: f64) -> bool {
        self.error.is_none()
            && self.discrepancy <= tolerance
            && self.dot.is_none_or(|d| d <= tolerance)
    }
}

const SAMPLES: usize = 3;
const F64S: [f64; 5] = [0.7, -1.3, 2.0, 0.35, -0.6];
const I64S: [i64; 3] = [2, 3, 1];

/// Primal sample `k` for parameter `i` of type `ty`.
fn sample(ty: Type, i: usize, k: usize) -> Val {
    match ty {
        Type::F64 => Val::F64(F64S[(i + k) % 5]),
        Type::I64 => Val::I64(I64S[(i + k) % 3]),
        Type::Bool => Val::Bool(true),
        Type::Array => Val::Array((0..3).map(|j| F64S[(i + k + j + 1) % 5]).collect()),
    }
}

/// A direction (tangent, or cotangent with `salt`) like `sample`.
fn direction(ty: Type, i: usize, k: usize, salt: usize) -> Val {
    const D: [f64; 5] = [0.5, -0.25, 1.5, -1.0, 0.75];
    match ty {
        Type::Array => Val::Array((0..3).map(|j| D[(i + k + j + salt) % 5]).collect()),
        _ => Val::F64(D[(i + k + salt) % 5]),
    }
}

fn discrepancy(a: &Val, b: &Val) -> f64 {
    fn d(x: f64, y: f64) -> f64 {
        if (x.is_nan() && y.is_nan()) || x == y {
            0.0
        } else {
            (x - y).abs() / 1f64.max(y.abs())
        }
    }
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => d(*x, *y),
        (Val::Array(xs), Val::Array(ys)) if xs.len() == ys.len() => xs
            .iter()
            .zip(ys)
            .map(|(x, y)| d(*x, *y))
            .fold(0.0, f64::max),
        (x, y) if x == y => 0.0,
        _ => f64::INFINITY,
    }
}

fn worst(a: &[Val], b: &[Val]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| discrepancy(x, y))
        .fold(0.0, f64::max)
}

fn f64s(v: &Val) -> Vec<f64> {
    match v {
        Val::F64(x) => vec![*x],
        Val::Array(xs) => xs.clone(),
        _ => Vec::new(),
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Checks every rule of `module`.
pub fn check_rules(module: &Module) -> Result<Vec<RuleCheck>, Error> {
    let owners: Vec<FuncId> = module
        .iter()
        .filter(|(_, f)| !f.meta.rules.is_empty())
        .map(|(id, _)| id)
        .collect();
    let mut out = Vec::new();
    for owner in owners {
        // The rule-free twin of the body, differentiated by the AD passes.
        let mut m = module.clone();
        adze_ad::lower_autodiff_from(&mut m, owner)?;
        let f = m.func(owner).clone();
        let mut body = f.clone();
        body.name = format!("{}.body", f.name);
        body.meta.rules = Default::default();
        let body_name = body.name.clone();
        m.push(body)
            .map_err(|e| Error::Argument(format!("check-rules: {e}")))?;
        let sig = f.sig.clone();
        let all_f64 = !sig.results.is_empty() && sig.results.iter().all(|&t| t == Type::F64);
        let fwd_acts: Vec<ArgActivity> = sig
            .params
            .iter()
            .map(|p| match p.ty {
                Type::F64 => ArgActivity::Dual,
                Type::Array => ArgActivity::Dup,
                _ => ArgActivity::Const,
            })
            .collect();
        let fret = if all_f64 {
            RetActivity::Dual
        } else {
            RetActivity::Const
        };
        let fwd = adze_ad::derive_forward(&mut m, &body_name, &fwd_acts, fret, 1)?;
        for (mode, rule) in f.meta.rules.iter() {
            let mut check = RuleCheck {
                func: f.name.clone(),
                mode,
                rule: m.func(rule).name.clone(),
                samples: 0,
                discrepancy: 0.0,
                dot: None,
                error: None,
            };
            let result = match mode {
                Mode::Forward => check_forward(&m, rule, fwd, &sig, &mut check),
                Mode::Reverse => {
                    let rev_acts: Vec<ArgActivity> = fwd_acts
                        .iter()
                        .map(|a| match a {
                            ArgActivity::Dual => ArgActivity::Active,
                            other => *other,
                        })
                        .collect();
                    let rret = if all_f64 {
                        RetActivity::Active
                    } else {
                        RetActivity::Const
                    };
                    let rev = adze_ad::derive_reverse(&mut m, &body_name, &rev_acts, rret)?;
                    check_reverse(&m, rule, rev, fwd, &sig, &mut check)
                }
            };
            if let Err(e) = result {
                check.error = Some(e.to_string());
            }
            out.push(check);
        }
    }
    Ok(out)
}

fn run(m: &Module, id: FuncId, args: &[Val]) -> Result<Outcome, adze_ir::RunError> {
    adze_interp::Interpreter::new(m).call(id, args)
}

/// The forward rule and the forward derivative take the same arguments
/// (`x, ẋ, a, ȧ, n, ..`) and return the same results.
fn check_forward(
    m: &Module,
    rule: FuncId,
    fwd: FuncId,
    sig: &adze_ir::Signature,
    check: &mut RuleCheck,
) -> Result<(), adze_ir::RunError> {
    for k in 0..SAMPLES {
        let mut args = Vec::new();
        for (i, p) in sig.params.iter().enumerate() {
            args.push(sample(p.ty, i, k));
            if matches!(p.ty, Type::F64 | Type::Array) {
                args.push(direction(p.ty, i, k, 0));
            }
        }
        let by_rule = run(m, rule, &args)?;
        let by_ad = run(m, fwd, &args)?;
        let d = worst(&by_rule.results, &by_ad.results).max(worst(&by_rule.args, &by_ad.args));
        check.discrepancy = check.discrepancy.max(d);
        check.samples += 1;
    }
    Ok(())
}

/// The reverse rule takes `x, .., a, ā, .., ȳ..`; the reverse derivative
/// takes `x, .., a, ā, ..` and seeds every ȳ with 1.0, so the rule runs
/// with ȳ = 1.0. Shadows start at the cotangent `w` of a `mut` array's
/// final contents, or at 0 for a read-only array.
fn check_reverse(
    m: &Module,
    rule: FuncId,
    rev: FuncId,
    fwd: FuncId,
    sig: &adze_ir::Signature,
    check: &mut RuleCheck,
) -> Result<(), adze_ir::RunError> {
    let n_f64_results = sig.results.iter().filter(|&&t| t == Type::F64).count();
    let mut dot_worst: f64 = 0.0;
    for k in 0..SAMPLES {
        let mut rev_args = Vec::new();
        let mut fwd_args = Vec::new();
        for (i, p) in sig.params.iter().enumerate() {
            let x = sample(p.ty, i, k);
            rev_args.push(x.clone());
            fwd_args.push(x.clone());
            match p.ty {
                Type::F64 => fwd_args.push(direction(p.ty, i, k, 0)),
                Type::Array => {
                    fwd_args.push(direction(p.ty, i, k, 0));
                    rev_args.push(if p.mutable {
                        direction(p.ty, i, k, 2)
                    } else {
                        Val::Array(vec![0.0; f64s(&x).len()])
                    });
                }
                _ => {}
            }
        }
        let mut rule_args = rev_args.clone();
        rule_args.extend((0..n_f64_results).map(|_| Val::F64(1.0)));
        let by_rule = run(m, rule, &rule_args)?;
        let by_ad = run(m, rev, &rev_args)?;
        let d = worst(&by_rule.results, &by_ad.results)
            .max(worst(&by_rule.args[..rev_args.len()], &by_ad.args));
        check.discrepancy = check.discrepancy.max(d);
        // Dot-product test of the rule against forward mode.
        let tangents = run(m, fwd, &fwd_args)?;
        let n = sig.results.len();
        let mut lhs: f64 = tangents.results[n..].iter().flat_map(f64s).sum();
        let mut rhs = 0.0;
        let mut adjoints = by_rule.results.iter();
        let (mut fslot, mut rslot) = (0, 0);
        for (i, p) in sig.params.iter().enumerate() {
            match p.ty {
                Type::F64 => {
                    let v = f64s(&fwd_args[fslot + 1]);
                    let a = adjoints.next().map(f64s).unwrap_or_default();
                    rhs += dot(&a, &v);
                    fslot += 2;
                    rslot += 1;
                }
                Type::Array => {
                    let v = f64s(&fwd_args[fslot + 1]);
                    if p.mutable {
                        let w = f64s(&direction(p.ty, i, k, 2));
                        lhs += dot(&w, &f64s(&tangents.args[fslot + 1]));
                    }
                    rhs += dot(&f64s(&by_rule.args[rslot + 1]), &v);
                    fslot += 2;
                    rslot += 2;
                }
                _ => {
                    fslot += 1;
                    rslot += 1;
                }
            }
        }
        let scale = 1f64.max(lhs.abs()).max(rhs.abs());
        dot_worst = dot_worst.max(if lhs.is_finite() && rhs.is_finite() {
            (lhs - rhs).abs() / scale
        } else {
            f64::INFINITY
        });
        check.samples += 1;
    }
    check.dot = Some(dot_worst);
    Ok(())
}

/// The table `adze check-rules` prints.
pub fn render_table(checks: &[RuleCheck], tolerance: f64) -> String {
    let mut s = format!(
        "{:<28} {:<8} {:>7} {:>16} {:>12}  {}\n",
        "rule", "mode", "samples", "max discrepancy", "dot test", "verdict"
    );
    for c in checks {
        let dot = c.dot.map_or("-".to_string(), |d| format!("{d:.3e}"));
        let verdict = match (&c.error, c.agrees(tolerance)) {
            (Some(e), _) => format!("ERROR: {e}"),
            (None, true) => "ok".to_string(),
            (None, false) => "DISAGREES".to_string(),
        };
        s += &format!(
            "{:<28} {:<8} {:>7} {:>16.3e} {:>12}  {verdict}\n",
            c.rule,
            c.mode.name(),
            c.samples,
            c.discrepancy,
            dot
        );
    }
    s
}
