//! The runner: one function of one program at a few points under every
//! setting (4 inline settings × optimizer on/off × 2 engines), with the
//! outcomes classified so that they can be compared bit for bit.

use adze::adze_ir::{self, FuncId, Limits, Mode, Module, Outcome, RunError, TrapKind, Val};
use adze::{Engine, InlineSetting, Session};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// One of the 16 ways to run a function, and all of them (the reference,
/// `none/noopt/interp`, first): the ones `adze check-inline` uses.
pub use adze::check_inline::{settings as all_settings, Setting};

/// What one setting gave at one point, reduced to what must agree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Res {
    /// Every result (and every final argument), as bits: f64 by
    /// `to_bits`, exactly (NaN payloads included).
    Values(Vec<u64>),
    /// A run-time error: its kind, without the names of functions and
    /// arrays (inlining moves code between functions, see
    /// `tests/it/inlining.rs`), and its source location (`@LINE:COL`, or
    /// `@-`), which must not depend on inlining, the optimizer or the
    /// engine.
    Trap(String),
    /// An error before the run (AD, JIT, verifier): its class.
    Error(String),
    /// A panic anywhere in the pipeline (always a finding).
    Panic(String),
}

/// An outcome with its readable text.
#[derive(Clone, Debug)]
pub struct Observed {
    pub res: Res,
    pub text: String,
    /// A bug in adze whatever the other settings say: a panic, a verifier
    /// failure, an internal AD error, a Cranelift error, a tape mismatch.
    pub internal: bool,
    /// The results, when the run gave values.
    pub vals: Option<Vec<Val>>,
}

impl Observed {
    fn panic(msg: String) -> Observed {
        Observed {
            res: Res::Panic(msg.clone()),
            text: format!("panic: {msg}"),
            internal: true,
            vals: None,
        }
    }
}

/// What is run: a function of the program, or its derivative requested
/// from outside the source (`Session::derive`, as `tests/it/array_results.rs`
/// makes them: every f64 parameter `dual` / `active`, every array `dup`;
/// the results `dual`, or in reverse mode `dup` when one is an array —
/// its cotangents are parameters after the function's own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub func: String,
    pub derive: Option<Mode>,
}

impl Target {
    pub fn plain(func: &str) -> Target {
        Target {
            func: func.to_string(),
            derive: None,
        }
    }
    pub fn derived(func: &str, mode: Mode) -> Target {
        Target {
            func: func.to_string(),
            derive: Some(mode),
        }
    }
    /// `f`, `f (forward)`, `f (reverse)`.
    pub fn label(&self) -> String {
        match self.derive {
            None => self.func.clone(),
            Some(Mode::Forward) => format!("{} (forward)", self.func),
            Some(Mode::Reverse) => format!("{} (reverse)", self.func),
        }
    }
}

fn variant(debug: &str) -> &str {
    debug
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .next()
        .unwrap_or(debug)
}

fn observe_error(e: &adze::Error) -> Observed {
    let (class, internal) = match e {
        adze::Error::Ad(a) => {
            let d = format!("{a:?}");
            let v = variant(&d).to_string();
            let internal = matches!(a, adze::adze_ad::AdError::ReverseInternal { .. });
            (format!("ad:{v}"), internal)
        }
        adze::Error::Jit(j) => {
            let d = format!("{j:?}");
            let v = variant(&d).to_string();
            let internal = !matches!(j, adze::adze_jit::JitError::TooLarge { .. });
            (format!("jit:{v}"), internal)
        }
        adze::Error::Verify(_) => ("verify".to_string(), true),
        adze::Error::Run(r) => return observe_trap(r),
        other => {
            let d = format!("{other:?}");
            (format!("error:{}", variant(&d)), false)
        }
    };
    Observed {
        res: Res::Error(class),
        text: format!("error: {e}"),
        internal,
        vals: None,
    }
}

fn observe_trap(e: &RunError) -> Observed {
    let (kind, internal) = match e.kind.without_names() {
        k @ (TrapKind::TapeMismatch | TrapKind::Unsupported(_) | TrapKind::BadArguments(_)) => {
            (format!("{k:?}"), true)
        }
        k => (format!("{k:?}"), false),
    };
    let at = match &e.loc {
        Some(l) => format!("@{}:{}", l.line, l.col),
        None => "@-".to_string(),
    };
    Observed {
        res: Res::Trap(format!("{kind} {at}")),
        text: format!("run-time error: {e}"),
        internal,
        vals: None,
    }
}

fn observe_outcome(o: &Outcome) -> Observed {
    let mut bits = Vec::new();
    let mut text = String::new();
    // Results, then the final contents of array arguments (scalar
    // arguments never change).
    for v in o.results.iter() {
        push_bits(v, &mut bits);
    }
    for v in o.args.iter().filter(|v| matches!(v, Val::Array(_))) {
        push_bits(v, &mut bits);
    }
    for (i, v) in o.results.iter().enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        text.push_str(&show(v));
    }
    Observed {
        res: Res::Values(bits),
        text,
        internal: false,
        vals: Some(o.results.to_vec()),
    }
}

fn push_bits(v: &Val, bits: &mut Vec<u64>) {
    match v {
        Val::F64(x) => bits.push(x.to_bits()),
        Val::I64(i) => bits.push(*i as u64),
        Val::Bool(b) => bits.push(u64::from(*b)),
        Val::Array(xs) => {
            bits.push(xs.len() as u64);
            bits.extend(xs.iter().map(|x| x.to_bits()));
        }
        Val::IArray(xs) => {
            bits.push(xs.len() as u64);
            bits.extend(xs.iter().map(|&x| x as u64));
        }
    }
}

/// A value with its bits when it is a NaN (payloads are compared).
fn show(v: &Val) -> String {
    match v {
        Val::F64(x) if x.is_nan() => format!("NaN(0x{:016x})", x.to_bits()),
        Val::F64(x) => format!("{x:?}"),
        other => other.to_string(),
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}

/// A session of `base` for one (inline, optimize) pair and `limits`:
/// reverse loops are checkpointed when the limits set a checkpoint segment
/// (the checkpointed settings of [`all_settings`]).
fn session(base: &Module, inline: InlineSetting, optimize: bool, limits: Limits) -> Session {
    Session {
        module: base.clone(),
        inline,
        limits,
        ad_limits: adze::adze_ad::AdLimits {
            checkpoint: limits.checkpoint_segment.is_some(),
            ..adze::adze_ad::AdLimits::default()
        },
        // A budget's error is compared as it is, not run again.
        checkpoint_fallback: false,
        optimize,
        jit: adze::JitSettings::default(),
        coverage: None,
        after_inline: None,
    }
}

/// Prepares `func` of `base` for one (inline, optimize) pair: every stage
/// of the pipeline, as `Session::run` does.
pub fn prepare(
    base: &Module,
    func: &str,
    inline: InlineSetting,
    optimize: bool,
    limits: Limits,
) -> Result<Module, Observed> {
    let session = session(base, inline, optimize, limits);
    match catch_unwind(AssertUnwindSafe(|| session.prepare(func))) {
        Ok(Ok(m)) => Ok(m),
        Ok(Err(e)) => Err(observe_error(&e)),
        Err(p) => Err(Observed::panic(panic_message(&*p))),
    }
}

/// Prepares `target` for one (inline, optimize) pair: [`prepare`] for a
/// function, `Session::derive` for a derivative; the module and the name
/// of the function to run.
pub fn prepare_target(
    base: &Module,
    target: &Target,
    inline: InlineSetting,
    optimize: bool,
    limits: Limits,
) -> Result<(Module, String), Observed> {
    let Some(mode) = target.derive else {
        return prepare(base, &target.func, inline, optimize, limits)
            .map(|m| (m, target.func.clone()));
    };
    let session = session(base, inline, optimize, limits);
    match catch_unwind(AssertUnwindSafe(|| {
        session.derive(&target.func, mode, 1, &[])
    })) {
        Ok(Ok(m)) => Ok(m),
        Ok(Err(e)) => Err(observe_error(&e)),
        Err(p) => Err(Observed::panic(panic_message(&*p))),
    }
}

/// Runs `func` of a prepared module at every point on one engine.
pub fn run_prepared(
    module: &Module,
    func: &str,
    engine: Engine,
    limits: Limits,
    points: &[Vec<Val>],
) -> Vec<Observed> {
    let Some(id) = module.get(func) else {
        let o = Observed {
            res: Res::Error("no-such-function".into()),
            text: format!("no function `{func}` after preparation"),
            internal: true,
            vals: None,
        };
        return vec![o; points.len()];
    };
    match engine {
        Engine::Interp => points
            .iter()
            .map(|args| run_interp(module, id, limits, args))
            .collect(),
        Engine::Jit => {
            let options = adze::adze_jit::JitOptions {
                limits,
                ..adze::adze_jit::JitOptions::default()
            };
            let compiled = match catch_unwind(AssertUnwindSafe(|| {
                adze::adze_jit::compile(module, id, &options)
            })) {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    return vec![observe_error(&adze::Error::Jit(e)); points.len()];
                }
                Err(p) => return vec![Observed::panic(panic_message(&*p)); points.len()],
            };
            points
                .iter()
                .map(
                    |args| match catch_unwind(AssertUnwindSafe(|| compiled.call(args))) {
                        Ok(Ok(o)) => observe_outcome(&o),
                        Ok(Err(e)) => observe_trap(&e),
                        Err(p) => Observed::panic(panic_message(&*p)),
                    },
                )
                .collect()
        }
    }
}

fn run_interp(module: &Module, id: FuncId, limits: Limits, args: &[Val]) -> Observed {
    match catch_unwind(AssertUnwindSafe(|| {
        adze::adze_interp::Interpreter::with_limits(module, limits).call(id, args)
    })) {
        Ok(Ok(o)) => observe_outcome(&o),
        Ok(Err(e)) => observe_trap(&e),
        Err(p) => Observed::panic(panic_message(&*p)),
    }
}

/// `func` under every setting of `settings` at every point:
/// `result[s][p]`. Each (inline, optimize) pair is prepared once and run on
/// the engines it is asked for. Also returns the module of the first
/// setting whose preparation succeeded (for finite differences).
pub fn run_settings(
    base: &Module,
    func: &str,
    settings: &[Setting],
    limits: Limits,
    points: &[Vec<Val>],
) -> (Vec<Vec<Observed>>, Option<Module>) {
    let (outs, reference) = run_target(base, &Target::plain(func), settings, limits, points);
    (outs, reference.map(|(m, _)| m))
}

/// [`run_settings`] of a [`Target`]: the reference is the prepared module
/// and the name of the function run.
pub fn run_target(
    base: &Module,
    target: &Target,
    settings: &[Setting],
    limits: Limits,
    points: &[Vec<Val>],
) -> (Vec<Vec<Observed>>, Option<(Module, String)>) {
    let mut out: Vec<Option<Vec<Observed>>> = vec![None; settings.len()];
    let mut reference = None;
    for (i, s) in settings.iter().enumerate() {
        if out[i].is_some() {
            continue;
        }
        let limits = Limits {
            checkpoint_segment: s.checkpoint,
            ..limits
        };
        let prepared = prepare_target(base, target, s.inline, s.optimize, limits);
        for (j, t) in settings.iter().enumerate().skip(i) {
            if t.inline != s.inline || t.optimize != s.optimize || t.checkpoint != s.checkpoint {
                continue;
            }
            out[j] = Some(match &prepared {
                Ok((m, name)) => run_prepared(m, name, t.engine, limits, points),
                Err(e) => vec![e.clone(); points.len()],
            });
        }
        if reference.is_none() {
            if let Ok(m) = prepared {
                reference = Some(m);
            }
        }
    }
    (out.into_iter().map(Option::unwrap).collect(), reference)
}

/// How two differing outcomes differ: the reducer keeps a program only if
/// its two settings still differ in the same category.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// One side NaN where the other is a number.
    NanVsNumber,
    /// Both NaN, with different payloads (sign or bits).
    NanPayload,
    /// An infinity against a finite number or the other infinity.
    Infinite,
    /// Finite values within 64 units in the last place.
    LastBits,
    /// Finite values further apart.
    Value,
    /// Values on one side, an error or trap on the other; or two different
    /// errors.
    Error,
    /// A panic on at least one side.
    Panic,
}

impl Category {
    pub fn name(&self) -> &'static str {
        match self {
            Category::NanVsNumber => "NaN vs number",
            Category::NanPayload => "NaN payload",
            Category::Infinite => "infinity",
            Category::LastBits => "last bits",
            Category::Value => "value",
            Category::Error => "error",
            Category::Panic => "panic",
        }
    }
}

impl Res {
    /// What kind of outcome this is, without values or numbers: `values`,
    /// `trap:IndexOutOfBounds`, `ad:ReverseUnsupported`, `panic`.
    pub fn class(&self) -> String {
        match self {
            Res::Values(_) => "values".to_string(),
            Res::Trap(k) => format!("trap:{}", variant(k)),
            Res::Error(c) => c.clone(),
            Res::Panic(_) => "panic".to_string(),
        }
    }
}

/// The category of a difference between two outcomes (`None`: equal).
/// With `exact_nan` off, two NaNs are equal whatever their payloads (sign
/// included): adze's semantics leave NaN payloads unspecified
/// (docs/robustness.md, "Integer and float semantics"), and the JIT
/// without the optimizer and the interpreter do give NaNs of different
/// signs.
pub fn categorize(a: &Res, b: &Res, exact_nan: bool) -> Option<Category> {
    if a == b {
        return None;
    }
    match (a, b) {
        (Res::Panic(_), _) | (_, Res::Panic(_)) => Some(Category::Panic),
        (Res::Values(x), Res::Values(y)) if x.len() == y.len() => {
            let mut worst: Option<Category> = None;
            for (&p, &q) in x.iter().zip(y) {
                if p == q {
                    continue;
                }
                let (u, v) = (f64::from_bits(p), f64::from_bits(q));
                let c = if u.is_nan() && v.is_nan() {
                    if !exact_nan {
                        continue;
                    }
                    Category::NanPayload
                } else if u.is_nan() || v.is_nan() {
                    Category::NanVsNumber
                } else if u.is_infinite() || v.is_infinite() {
                    Category::Infinite
                } else if ulps(u, v) <= 64 {
                    Category::LastBits
                } else {
                    Category::Value
                };
                worst = Some(match worst {
                    Some(w) if rank(&w) >= rank(&c) => w,
                    _ => c,
                });
            }
            worst
        }
        _ => Some(Category::Error),
    }
}

/// Which category describes a pair best when a result has several
/// differing values: the most severe.
fn rank(c: &Category) -> u8 {
    match c {
        Category::NanPayload => 0,
        Category::LastBits => 1,
        Category::Infinite => 2,
        Category::Value => 3,
        Category::NanVsNumber => 4,
        Category::Error => 5,
        Category::Panic => 6,
    }
}

/// The distance in units in the last place between two finite f64.
pub fn ulps(a: f64, b: f64) -> u64 {
    fn key(x: f64) -> i128 {
        let b = x.to_bits() as i64;
        (if b < 0 { i64::MIN - b } else { b }) as i128
    }
    (key(a) - key(b)).unsigned_abs().min(u64::MAX as u128) as u64
}

/// Groups equal outcomes (in the sense of [`categorize`]): each group lists
/// the indices of its settings.
pub fn groups(outs: &[&Observed], exact_nan: bool) -> Vec<Vec<usize>> {
    let mut gs: Vec<Vec<usize>> = Vec::new();
    for (i, o) in outs.iter().enumerate() {
        match gs
            .iter_mut()
            .find(|g| categorize(&outs[g[0]].res, &o.res, exact_nan).is_none())
        {
            Some(g) => g.push(i),
            None => gs.push(vec![i]),
        }
    }
    gs
}

/// The arguments of `top` and every `dk` at a point.
pub fn args_of(x: f64, y: f64) -> Vec<Val> {
    vec![Val::F64(x), Val::F64(y)]
}

/// Evaluates a `(x, y) -> f64` function of a prepared module on the
/// interpreter (finite differences).
pub fn eval_scalar(module: &Module, func: &str, limits: Limits, x: f64, y: f64) -> Option<f64> {
    let id = module.get(func)?;
    let o = catch_unwind(AssertUnwindSafe(|| {
        adze::adze_interp::Interpreter::with_limits(module, limits).call(id, &args_of(x, y))
    }))
    .ok()?
    .ok()?;
    match o.results.as_slice() {
        [Val::F64(v)] => Some(*v),
        _ => None,
    }
}

/// Runs `func` of a prepared module on `args` on the interpreter: its
/// results, or `None` on any error (finite differences, cotangent lengths).
pub fn eval_vals(module: &Module, func: &str, limits: Limits, args: &[Val]) -> Option<Vec<Val>> {
    Some(eval_outcome(module, func, limits, args)?.results)
}

/// Runs `func` of a module on `args` on the interpreter: its results and
/// final arguments, or `None` on any error.
pub fn eval_outcome(
    module: &Module,
    func: &str,
    limits: Limits,
    args: &[Val],
) -> Option<adze_ir::Outcome> {
    let id = module.get(func)?;
    catch_unwind(AssertUnwindSafe(|| {
        adze::adze_interp::Interpreter::with_limits(module, limits).call(id, args)
    }))
    .ok()?
    .ok()
}

/// Every f64 of a list of values, in order (scalars, array elements).
pub fn flatten(vals: &[Val]) -> Vec<f64> {
    let mut out = Vec::new();
    for v in vals {
        match v {
            Val::F64(x) => out.push(*x),
            Val::Array(xs) => out.extend_from_slice(xs),
            _ => {}
        }
    }
    out
}

/// Limits for generated programs: recursion is bounded by construction, so
/// a low call depth only catches what the reducer makes unbounded.
pub fn fuzz_limits() -> Limits {
    Limits {
        max_call_depth: 200,
        max_array_len: 1 << 16,
        timeout: None,
        tape_limit: adze_ir::DEFAULT_TAPE_LIMIT,
        checkpoint_segment: None,
    }
}

/// Re-exported for the reducer's predicate.
pub fn compile(source: &str) -> Result<Module, String> {
    match catch_unwind(AssertUnwindSafe(|| {
        adze::adze_lang::compile("fuzz.adz", source)
    })) {
        Ok(Ok(m)) => {
            if cfg!(debug_assertions) {
                adze_ir::verify::verify_module(&m).map_err(|e| e.to_string())?;
            }
            Ok(m)
        }
        Ok(Err(d)) => Err(d.summary()),
        Err(p) => Err(format!("front-end panic: {}", panic_message(&*p))),
    }
}
