//! `adze check-rules`: every custom rule compared with the AD derivative of
//! its function's body.
//!
//! For a function `F` with rules, the body is copied into a rule-free twin
//! `F.body` and differentiated by the AD passes; each rule is then run on
//! the same inputs as that derivative, at random sample points:
//!
//! - a forward rule `(x, ẋ, ..) -> (y, ẏ)` against the forward derivative of
//!   the body (every f64 `dual`, every array `dup`): primal results, tangents
//!   and the tangents left in `mut` arrays;
//! - a reverse rule `(x, .., a, ā, .., ȳ) -> x̄` against the reverse
//!   derivative of the body with every cotangent seeded with 1.0: adjoints
//!   of the scalars and the adjoints accumulated into the shadows; and by
//!   the dot-product test against forward mode, `w · (J v) == (Jᵀ w) · v`.
//!
//! The discrepancy of two numbers is `|a - b| / max(1, |b|)` (a NaN or
//! infinite rule value where the derivative of the body is finite is an
//! infinite discrepancy); a rule disagrees when its largest discrepancy
//! exceeds the tolerance.
//!
//! **Sampling** ([`CheckOptions`]): the sample points are drawn from a
//! seeded generator (SplitMix64), so a run is reproducible, and each
//! function gets its own stream (the seed mixed with its name), so its
//! points do not depend on the rest of the file. Per sample: one array
//! length for every array ([`LENGTHS`], or `--len`); f64 values half in
//! ±2, the rest of magnitude 2..20 and 20..1000; both bools; i64 values in
//! -1..=len+2; tangents and cotangents in ±2. `--arg NAME=VALUE` pins a
//! parameter (a pinned array also sets the length of the others, unless
//! `--len` is given). A sample where the body faults (an index out of
//! bounds, say), or where the derivative of the body faults or is not
//! finite (an overflow: it cannot judge the rule there), is skipped and
//! counted; a rule that faults where the body does not is an error.

use crate::Error;
use adze_ir::{
    ArgActivity, FuncId, Function, Mode, Module, Outcome, RetActivity, Signature, Type, Val,
};

/// How `check-rules` samples.
#[derive(Clone, Debug)]
pub struct CheckOptions {
    /// Sample points per function (at least 1).
    pub samples: usize,
    /// The generator's seed.
    pub seed: u64,
    /// The length of every array (default: drawn from [`LENGTHS`]).
    pub len: Option<usize>,
    /// `NAME=VALUE`: parameters with these names take these values.
    pub pinned: Vec<(String, String)>,
    /// Check only the rules of this function.
    pub func: Option<String>,
}

impl Default for CheckOptions {
    fn default() -> CheckOptions {
        CheckOptions {
            samples: DEFAULT_SAMPLES,
            seed: 0,
            len: None,
            pinned: Vec::new(),
            func: None,
        }
    }
}

/// The default number of sample points.
pub const DEFAULT_SAMPLES: usize = 20;

/// The array lengths samples draw from.
pub const LENGTHS: [usize; 9] = [1, 2, 3, 4, 5, 6, 8, 12, 16];

/// The verdict on one rule.
#[derive(Clone, Debug)]
pub struct RuleCheck {
    /// The function the rule belongs to.
    pub func: String,
    /// The rule's mode: forward or reverse.
    pub mode: Mode,
    /// The rule function's name.
    pub rule: String,
    /// Samples compared.
    pub samples: usize,
    /// Samples skipped: the body faulted there, or its derivative faulted
    /// or was not finite.
    pub skipped: usize,
    /// Largest discrepancy against the AD derivative of the body.
    pub discrepancy: f64,
    /// Largest discrepancy of the dot-product test (reverse rules).
    pub dot: Option<f64>,
    /// Where the largest discrepancy (of either kind) was found, as
    /// `--arg` options.
    pub worst_at: Option<String>,
    /// Why the rule could not be checked (it faulted where the body did
    /// not, or no sample could be compared), if so.
    pub error: Option<String>,
}

impl RuleCheck {
    /// Does the rule agree: no error, and both its discrepancy and its
    /// dot-product test's (if any) at most `tolerance`? A NaN discrepancy
    /// never agrees.
    pub fn agrees(&self, tolerance: f64) -> bool {
        self.error.is_none()
            && self.discrepancy <= tolerance
            && self.dot.is_none_or(|d| d <= tolerance)
    }
}

/// SplitMix64: small, fast, and good enough for sample points.
pub(crate) struct Rng(u64);

impl Rng {
    /// A stream for `func` under `seed`.
    pub(crate) fn new(seed: u64, func: &str) -> Rng {
        // FNV-1a of the name, mixed with the seed.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in func.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Rng(seed ^ h)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Uniform in `[lo, hi)`.
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        let unit = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo) * unit
    }

    fn sign(&mut self) -> f64 {
        if self.below(2) == 0 {
            1.0
        } else {
            -1.0
        }
    }

    /// A primal f64: half in ±2, 30 % of magnitude 2..20, 20 % 20..1000
    /// (log-uniform).
    fn scalar(&mut self) -> f64 {
        match self.below(10) {
            0..=4 => self.range(-2.0, 2.0),
            5..=7 => self.sign() * self.range(2.0, 20.0),
            _ => self.sign() * 10f64.powf(self.range(20f64.log10(), 3.0)),
        }
    }

    /// A tangent or cotangent.
    fn direction(&mut self) -> f64 {
        self.range(-2.0, 2.0)
    }
}

/// One sample point of a function: its primal arguments, a tangent per
/// f64 and array parameter, and a cotangent per `mut` array.
pub(crate) struct Sample {
    pub(crate) primal: Vec<Val>,
    /// Per parameter (`Val::Bool(false)` where there is none).
    tangent: Vec<Val>,
    /// Per parameter: the cotangent of a `mut` array's final contents.
    cotangent: Vec<Val>,
}

impl Sample {
    pub(crate) fn draw(
        rng: &mut Rng,
        sig: &Signature,
        pinned: &[Option<Val>],
        len: Option<usize>,
    ) -> Sample {
        let pinned_len = pinned.iter().find_map(|v| match v {
            Some(Val::Array(xs)) => Some(xs.len()),
            _ => None,
        });
        let n = len
            .or(pinned_len)
            .unwrap_or_else(|| LENGTHS[rng.below(LENGTHS.len() as u64) as usize]);
        let mut s = Sample {
            primal: Vec::new(),
            tangent: Vec::new(),
            cotangent: Vec::new(),
        };
        for (p, pin) in sig.params.iter().zip(pinned) {
            let x = match p.ty {
                // The verifier allows no f64x2 parameter.
                Type::F64 | Type::F64x2 => Val::F64(rng.scalar()),
                Type::I64 => Val::I64(rng.below(n as u64 + 4) as i64 - 1),
                Type::Bool => Val::Bool(rng.below(2) == 1),
                Type::Array => Val::Array((0..n).map(|_| rng.scalar()).collect()),
                // Indices into the sample's arrays (all of length `n`).
                Type::IArray => {
                    Val::IArray((0..n).map(|_| rng.below(n.max(1) as u64) as i64).collect())
                }
            };
            let x = pin.clone().unwrap_or(x);
            let m = match &x {
                Val::Array(xs) => xs.len(),
                _ => 1,
            };
            let dir = |rng: &mut Rng| match p.ty {
                Type::F64 => Val::F64(rng.direction()),
                Type::Array => Val::Array((0..m).map(|_| rng.direction()).collect()),
                _ => Val::Bool(false),
            };
            s.tangent.push(dir(rng));
            s.cotangent.push(if p.ty == Type::Array && p.mutable {
                dir(rng)
            } else {
                Val::Array(vec![0.0; m])
            });
            s.primal.push(x);
        }
        s
    }

    /// `--arg x=1.5 --arg 'a=[..]'`: the primal point, as options.
    pub(crate) fn describe(&self, sig: &Signature) -> String {
        let parts: Vec<String> = sig
            .params
            .iter()
            .zip(&self.primal)
            .map(|(p, v)| match v {
                Val::Array(_) => format!("--arg '{}={v}'", p.name),
                _ => format!("--arg {}={v}", p.name),
            })
            .collect();
        parts.join(" ")
    }
}

fn discrepancy(a: &Val, b: &Val) -> f64 {
    fn d(x: f64, y: f64) -> f64 {
        if (x.is_nan() && y.is_nan()) || x == y {
            0.0
        } else if !x.is_finite() || !y.is_finite() {
            // One NaN or infinite, the other not (or infinities of
            // opposite signs): `f64::max` would drop a NaN difference.
            f64::INFINITY
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

/// Is every number of an outcome (results and final arrays) finite?
fn finite(o: &Outcome) -> bool {
    o.results
        .iter()
        .chain(&o.args)
        .flat_map(f64s)
        .all(f64::is_finite)
}

/// What one sample of one rule came to.
enum Verdict {
    /// The body or its derivative faulted, or the derivative is not finite.
    Skip,
    /// Compared: the discrepancy and, for reverse rules, the dot test's.
    Compared(f64, Option<f64>),
}

/// Checks every rule of `module` (or of `options.func`).
///
/// In phases: the functions whose rules are checked (`owners`); per
/// function, its rule-free twin, sample points and the twin's derivatives
/// (`Owner::prepare`); per rule, the samples compared
/// (`Owner::check_rule`).
pub fn check_rules(module: &Module, options: &CheckOptions) -> Result<Vec<RuleCheck>, Error> {
    let mut out = Vec::new();
    for owner in owners(module, options)? {
        let owner = Owner::prepare(module, owner, options)?;
        for (mode, rule) in owner.f.meta.rules.iter() {
            out.push(owner.check_rule(mode, rule));
        }
    }
    Ok(out)
}

/// The functions whose rules are checked, once the options make sense for
/// them: at least one sample; `options.func` exists and has rules; every
/// pinned name is a parameter of one of them.
fn owners(module: &Module, options: &CheckOptions) -> Result<Vec<FuncId>, Error> {
    if options.samples == 0 {
        return Err(Error::Argument("`--samples` must be at least 1".into()));
    }
    let owners: Vec<FuncId> = module
        .iter()
        .filter(|(_, f)| !f.meta.rules.is_empty())
        .filter(|(_, f)| options.func.as_ref().is_none_or(|n| &f.name == n))
        .map(|(id, _)| id)
        .collect();
    if let Some(name) = &options.func {
        if owners.is_empty() {
            crate::pipeline::function_by_name(module, name)?;
            return Err(Error::Argument(format!("`{name}` has no rules to check")));
        }
    }
    // Every pinned name must be a parameter of a checked function.
    for (name, _) in &options.pinned {
        let known = owners
            .iter()
            .any(|&id| module.func(id).sig.params.iter().any(|p| &p.name == name));
        if !known {
            return Err(Error::Argument(format!(
                "`--arg {name}=..`: no function with rules has a parameter `{name}`"
            )));
        }
    }
    Ok(owners)
}

/// A function with rules, ready for its rules to be checked: a copy of the
/// module with the function's rule-free twin `F.body` and the twin's
/// derivatives, and the sample points.
struct Owner {
    m: Module,
    /// The function, its `autodiff`s lowered.
    f: Function,
    /// The twin.
    body: FuncId,
    /// The twin's forward derivative (every f64 `dual`, every array `dup`).
    fwd: FuncId,
    /// The twin's reverse derivative, if the function has a reverse rule.
    rev: Option<FuncId>,
    samples: Vec<Sample>,
}

impl Owner {
    /// `owner` (of `module`) ready to check; an error if it cannot be
    /// differentiated or a pinned value is not of its parameter's type.
    fn prepare(module: &Module, owner: FuncId, options: &CheckOptions) -> Result<Owner, Error> {
        // The rule-free twin of the body, differentiated by the AD passes.
        let mut m = module.clone();
        adze_ad::lower_autodiff_from(&mut m, owner)?;
        let f = m.func(owner).clone();
        let mut body = f.clone();
        body.name = format!("{}.body", f.name);
        body.meta.rules = Default::default();
        let body_name = body.name.clone();
        let body_id = m
            .push(body)
            .map_err(|e| Error::Argument(format!("check-rules: {e}")))?;
        let pinned = pinned_values(&f.sig, options)?;
        let mut rng = Rng::new(options.seed, &f.name);
        let samples: Vec<Sample> = (0..options.samples)
            .map(|_| Sample::draw(&mut rng, &f.sig, &pinned, options.len))
            .collect();
        let reverse = f.meta.rules.get(Mode::Reverse).is_some();
        let (fwd, rev) = derivatives(&mut m, &body_name, &f.sig, reverse)?;
        Ok(Owner {
            m,
            f,
            body: body_id,
            fwd,
            rev,
            samples,
        })
    }

    /// Runs the rule `rule` of mode `mode` at every sample, against the
    /// derivative of the body, until it faults where the body does not.
    fn check_rule(&self, mode: Mode, rule: FuncId) -> RuleCheck {
        let sig = &self.f.sig;
        let mut check = RuleCheck {
            func: self.f.name.clone(),
            mode,
            rule: self.m.func(rule).name.clone(),
            samples: 0,
            skipped: 0,
            discrepancy: 0.0,
            dot: None,
            worst_at: None,
            error: None,
        };
        let mut worst_seen = 0.0;
        for sample in &self.samples {
            // The body itself must run at this point.
            if run(&self.m, self.body, &sample.primal).is_err() {
                check.skipped += 1;
                continue;
            }
            let verdict = match (mode, self.rev) {
                (Mode::Reverse, Some(rev)) => {
                    check_reverse(&self.m, rule, rev, self.fwd, sig, sample)
                }
                _ => check_forward(&self.m, rule, self.fwd, sig, sample),
            };
            match verdict {
                Err(e) => {
                    check.error = Some(format!(
                        "the rule fails where the body runs ({}): {e}",
                        sample.describe(sig)
                    ));
                    break;
                }
                Ok(Verdict::Skip) => check.skipped += 1,
                Ok(Verdict::Compared(d, dot)) => {
                    check.compared(d, dot, &mut worst_seen, || sample.describe(sig));
                }
            }
        }
        if check.error.is_none() && check.samples == 0 {
            check.error = Some(format!(
                "no sample could be compared: at all {} the body faults or its derivative is not finite; \
                 pin arguments with `--arg NAME=VALUE` or choose the array length with `--len L`",
                check.skipped
            ));
        }
        check
    }
}

impl RuleCheck {
    /// Counts a compared sample of discrepancy `d` (and `dot`); where it
    /// is the largest so far (`worst_seen`), records it `at`.
    fn compared(
        &mut self,
        d: f64,
        dot: Option<f64>,
        worst_seen: &mut f64,
        at: impl FnOnce() -> String,
    ) {
        self.samples += 1;
        self.discrepancy = self.discrepancy.max(d);
        if let Some(dot) = dot {
            self.dot = Some(self.dot.unwrap_or(0.0).max(dot));
        }
        let here = d.max(dot.unwrap_or(0.0));
        if here > *worst_seen {
            *worst_seen = here;
            self.worst_at = Some(at());
        }
    }
}

/// The value of every parameter of `sig` that `--arg` pins (the last
/// `--arg` of a name wins).
fn pinned_values(sig: &Signature, options: &CheckOptions) -> Result<Vec<Option<Val>>, Error> {
    sig.params
        .iter()
        .map(|p| {
            options
                .pinned
                .iter()
                .rev()
                .find(|(n, _)| n == &p.name)
                .map(|(_, text)| {
                    crate::args::parse_value(text, p.ty)
                        .map_err(|why| Error::Argument(format!("`--arg {}={text}`: {why}", p.name)))
                })
                .transpose()
        })
        .collect()
}

/// The forward derivative of the twin `body` (of signature `sig`): every
/// f64 `dual`, every array `dup`, the rest `const`; and, if `reverse`, its
/// reverse derivative (`active` for `dual`). The results are `dual`
/// (`active`) if they are all f64, else `const`.
fn derivatives(
    m: &mut Module,
    body: &str,
    sig: &Signature,
    reverse: bool,
) -> Result<(FuncId, Option<FuncId>), Error> {
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
    let fwd = adze_ad::derive_forward(m, body, &fwd_acts, fret, 1)?;
    if !reverse {
        return Ok((fwd, None));
    }
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
    let rev = adze_ad::derive_reverse(m, body, &rev_acts, rret)?;
    Ok((fwd, Some(rev)))
}

fn run(m: &Module, id: FuncId, args: &[Val]) -> Result<Outcome, adze_ir::RunError> {
    adze_interp::Interpreter::new(m)
        .call(id, args)
        .map_err(|e| e.describe_in(m))
}

/// The derivative of the body at a sample: `None` if it faults or is not
/// finite.
fn reference(m: &Module, id: FuncId, args: &[Val]) -> Option<Outcome> {
    run(m, id, args).ok().filter(finite)
}

/// The forward rule and the forward derivative take the same arguments
/// (`x, ẋ, a, ȧ, n, ..`) and return the same results.
fn check_forward(
    m: &Module,
    rule: FuncId,
    fwd: FuncId,
    sig: &Signature,
    sample: &Sample,
) -> Result<Verdict, adze_ir::RunError> {
    let mut args = Vec::new();
    for (i, p) in sig.params.iter().enumerate() {
        args.push(sample.primal[i].clone());
        if matches!(p.ty, Type::F64 | Type::Array) {
            args.push(sample.tangent[i].clone());
        }
    }
    let Some(by_ad) = reference(m, fwd, &args) else {
        return Ok(Verdict::Skip);
    };
    let by_rule = run(m, rule, &args)?;
    let d = worst(&by_rule.results, &by_ad.results).max(worst(&by_rule.args, &by_ad.args));
    Ok(Verdict::Compared(d, None))
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
    sig: &Signature,
    sample: &Sample,
) -> Result<Verdict, adze_ir::RunError> {
    let n_f64_results = sig.results.iter().filter(|&&t| t == Type::F64).count();
    let mut rev_args = Vec::new();
    let mut fwd_args = Vec::new();
    for (i, p) in sig.params.iter().enumerate() {
        let x = sample.primal[i].clone();
        rev_args.push(x.clone());
        fwd_args.push(x);
        match p.ty {
            Type::F64 => fwd_args.push(sample.tangent[i].clone()),
            Type::Array => {
                fwd_args.push(sample.tangent[i].clone());
                rev_args.push(sample.cotangent[i].clone());
            }
            _ => {}
        }
    }
    let (Some(by_ad), Some(tangents)) =
        (reference(m, rev, &rev_args), reference(m, fwd, &fwd_args))
    else {
        return Ok(Verdict::Skip);
    };
    let mut rule_args = rev_args.clone();
    rule_args.extend((0..n_f64_results).map(|_| Val::F64(1.0)));
    let by_rule = run(m, rule, &rule_args)?;
    let d = worst(&by_rule.results, &by_ad.results)
        .max(worst(&by_rule.args[..rev_args.len()], &by_ad.args));
    // Dot-product test of the rule against forward mode.
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
                    let w = f64s(&sample.cotangent[i]);
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
    let dot_d = if lhs.is_finite() && rhs.is_finite() {
        (lhs - rhs).abs() / scale
    } else {
        f64::INFINITY
    };
    Ok(Verdict::Compared(d, Some(dot_d)))
}

/// The table `adze check-rules` prints; after it, where each rule that
/// disagrees does so most, as `--arg` options.
pub fn render_table(checks: &[RuleCheck], tolerance: f64) -> String {
    let mut s = format!(
        "{:<28} {:<8} {:>7} {:>7} {:>16} {:>12}  {}\n",
        "rule", "mode", "samples", "skipped", "max discrepancy", "dot test", "verdict"
    );
    for c in checks {
        let dot = c.dot.map_or("-".to_string(), |d| format!("{d:.3e}"));
        let verdict = match (&c.error, c.agrees(tolerance)) {
            (Some(e), _) => format!("ERROR: {e}"),
            (None, true) => "ok".to_string(),
            (None, false) => "DISAGREES".to_string(),
        };
        s += &format!(
            "{:<28} {:<8} {:>7} {:>7} {:>16.3e} {:>12}  {verdict}\n",
            c.rule,
            c.mode.name(),
            c.samples,
            c.skipped,
            c.discrepancy,
            dot
        );
    }
    for c in checks {
        if let (None, false, Some(at)) = (&c.error, c.agrees(tolerance), &c.worst_at) {
            s += &format!("{}: the largest discrepancy is at {at}\n", c.rule);
        }
    }
    s
}
