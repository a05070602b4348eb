//! `adze check-inline`: the promise, checked on the user's own program.
//!
//! Every derivative must have the same bits whatever the inliner does. For
//! each function of the file that contains an `autodiff` (or, with `--fn
//! NAME`, the derivatives of `NAME` in every mode: forward, forward in
//! vector mode of width 2, and reverse, as `adze run --derive` makes them),
//! at seeded sample points, the run is repeated under the 20 settings
//! ([`settings`]): the four inline settings, the optimizer on and off, the JIT
//! and the interpreter, and four with checkpointed reverse loops. Every outcome (results, and the final contents of
//! the array arguments) must equal the first setting's bit for bit, or every
//! setting must stop with the same error. The first difference of each
//! (function, sample) is reported with the first value that differs and the
//! two `adze run` commands that show it.
//!
//! It is the user-facing face of the project's differential fuzzer
//! (`crates/fuzz-diff`), which checks generated programs the same way.

use crate::check_rules::{Rng, Sample};
use crate::pipeline::{function_by_name, Engine, InlineSetting, Session};
use crate::Error;
use adze_ir::{InstData, Mode, Module, Outcome, Signature, Val};
use std::path::Path;

/// How `check-inline` samples.
#[derive(Clone, Debug)]
pub struct InlineCheckOptions {
    /// Only the derivatives of this function (in every mode).
    pub func: Option<String>,
    /// Sample points per function (at least 1).
    pub samples: usize,
    /// The generator's seed.
    pub seed: u64,
}

impl Default for InlineCheckOptions {
    fn default() -> InlineCheckOptions {
        InlineCheckOptions {
            func: None,
            samples: 8,
            seed: 0,
        }
    }
}

/// One setting of the pipeline and engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting {
    /// Where the inliner runs.
    pub inline: InlineSetting,
    /// Whether the optimizer runs.
    pub optimize: bool,
    /// The engine that runs the code.
    pub engine: Engine,
    /// Checkpointed reverse loops, with segments of this many tape entries
    /// (`--checkpoint --checkpoint-segment N`), or fully taped (`None`).
    pub checkpoint: Option<u64>,
}

impl Setting {
    /// `none/opt/jit`, `all/noopt/interp`.
    pub fn label(&self) -> String {
        let opt = if self.optimize { "opt" } else { "noopt" };
        let ckpt = match self.checkpoint {
            Some(n) => format!("/checkpoint{n}"),
            None => String::new(),
        };
        format!("{}/{opt}/{}{ckpt}", self.inline.name(), self.engine.name())
    }

    /// The options of `adze run` that select it.
    pub fn options(&self) -> String {
        let opt = if self.optimize { "" } else { " --no-opt" };
        let ckpt = match self.checkpoint {
            Some(n) => format!(" --checkpoint --checkpoint-segment {n}"),
            None => String::new(),
        };
        format!(
            "--inline {}{opt} --engine {}{ckpt}",
            self.inline.name(),
            self.engine.name()
        )
    }
}

/// The 20 settings, the reference first: `none/noopt/interp`, the most
/// literal (also the differential fuzzer's, `crates/fuzz-diff`). The last
/// four checkpoint reverse loops, with segments of 1, 2 and 3 tape entries
/// (a cut at nearly every iteration) under several inline settings: a
/// checkpointed derivative must equal the taped one bit for bit.
pub fn settings() -> Vec<Setting> {
    let mut out = Vec::new();
    for inline in InlineSetting::ALL {
        for optimize in [false, true] {
            for engine in [Engine::Interp, Engine::Jit] {
                out.push(Setting {
                    inline,
                    optimize,
                    engine,
                    checkpoint: None,
                });
            }
        }
    }
    let checkpointed = [
        (InlineSetting::None, false, Engine::Interp, 1),
        (InlineSetting::Early, false, Engine::Jit, 2),
        (InlineSetting::Late, true, Engine::Jit, 3),
        (InlineSetting::All, true, Engine::Jit, 1),
    ];
    for (inline, optimize, engine, n) in checkpointed {
        out.push(Setting {
            inline,
            optimize,
            engine,
            checkpoint: Some(n),
        });
    }
    out
}

/// What is checked: a function of the file, or a derivative of `--fn`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The function run (`f`, or the function `--derive` differentiates).
    pub func: String,
    /// `--derive` mode and width, for a derivative of `--fn`.
    pub derive: Option<(Mode, usize)>,
}

impl Target {
    fn describe(&self) -> String {
        match self.derive {
            None => format!("`{}`", self.func),
            Some((Mode::Forward, 1)) => format!("the forward derivative of `{}`", self.func),
            Some((Mode::Forward, w)) => {
                format!("the forward derivative (width {w}) of `{}`", self.func)
            }
            Some((Mode::Reverse, _)) => format!("the reverse derivative of `{}`", self.func),
        }
    }

    fn command(&self, file: &str, args: &str, setting: &Setting) -> String {
        let derive = match self.derive {
            None => String::new(),
            Some((Mode::Forward, 1)) => " --derive forward".to_string(),
            Some((Mode::Forward, w)) => format!(" --derive forward --width {w}"),
            Some((Mode::Reverse, _)) => " --derive reverse".to_string(),
        };
        format!(
            "adze run {file} --fn {}{derive} {args} {}",
            self.func,
            setting.options()
        )
    }
}

/// A difference found: where, the two settings, the first differing value,
/// and the commands that show it.
#[derive(Clone, Debug)]
pub struct Difference {
    /// What differs.
    pub target: Target,
    /// At which sample point (numbered from 0).
    pub sample: usize,
    /// The reference setting (the first of [`settings`]).
    pub reference: Setting,
    /// The first setting that differs from it.
    pub other: Setting,
    /// "result 0: 1.5 (0x3ff8000000000000) vs ..." or the two errors.
    pub first: String,
    /// `adze run` under each of the two settings, at the sample point.
    pub commands: [String; 2],
}

/// The outcome of a check.
#[derive(Clone, Debug, Default)]
pub struct InlineReport {
    /// Targets checked.
    pub targets: Vec<Target>,
    /// Runs compared (target × sample × setting).
    pub runs: usize,
    /// Samples where every setting stopped with the same error.
    pub consistent_errors: usize,
    /// The first difference of each (target, sample) that has one.
    pub differences: Vec<Difference>,
}

/// A target compiled under one setting (once, for every sample), or the
/// error compiling it gave.
struct Prepared {
    module: Module,
    id: adze_ir::FuncId,
    limits: adze_ir::Limits,
    jit: Option<adze_jit::Compiled>,
}

impl Prepared {
    fn new(session: &Session, target: &Target, setting: &Setting) -> Result<Prepared, Error> {
        let mut s = session.clone();
        s.inline = setting.inline;
        s.optimize = setting.optimize;
        s.ad_limits.checkpoint = setting.checkpoint.is_some();
        s.limits.checkpoint_segment = setting.checkpoint;
        let (module, name) = match target.derive {
            None => (s.prepare(&target.func)?, target.func.clone()),
            Some((mode, width)) => {
                let d = s.derivative(&target.func, mode, width, &[], true)?;
                (d.module, d.name)
            }
        };
        let id = function_by_name(&module, &name)?;
        let jit = match setting.engine {
            Engine::Jit => Some(s.jit(&module, id)?),
            Engine::Interp => None,
        };
        Ok(Prepared {
            module,
            id,
            limits: s.limits,
            jit,
        })
    }

    fn run(&self, args: &[Val]) -> Result<Outcome, Fault> {
        let r = match &self.jit {
            Some(c) => c.call(args),
            None => {
                adze_interp::Interpreter::with_limits(&self.module, self.limits).call(self.id, args)
            }
        };
        r.map_err(|e| Fault::of(e.describe_in(&self.module)))
    }
}

/// A run-time error (or an error compiling), as compared: what must not
/// depend on the setting (the fault without array names, and its source
/// location; inlining moves code between functions and renames arrays),
/// and the message to show.
#[derive(Clone, Debug)]
struct Fault {
    key: String,
    message: String,
}

impl Fault {
    fn of(e: adze_ir::RunError) -> Fault {
        let at = e.loc.as_ref().map(|l| (l.line, l.col));
        Fault {
            key: format!("{:?} at {at:?}", e.kind.without_names()),
            message: e.to_string(),
        }
    }

    fn compile(e: Error) -> Fault {
        let message = e.to_string();
        Fault {
            key: message.clone(),
            message,
        }
    }
}

/// The signature a target's runs take.
fn target_signature(session: &Session, target: &Target) -> Result<Signature, Error> {
    match target.derive {
        None => Ok(session
            .module
            .func(function_by_name(&session.module, &target.func)?)
            .sig
            .clone()),
        Some((mode, width)) => {
            let d = session.derivative(&target.func, mode, width, &[], false)?;
            Ok(d.module
                .func(function_by_name(&d.module, &d.name)?)
                .sig
                .clone())
        }
    }
}

/// The functions of `module` whose body holds an `autodiff`.
fn autodiff_users(module: &Module) -> Vec<String> {
    module
        .iter()
        .filter(|(_, f)| {
            f.layout
                .insts()
                .any(|(_, i)| matches!(f.dfg.inst(i), InstData::Autodiff { .. }))
        })
        .map(|(_, f)| f.name.clone())
        .collect()
}

/// Checks `session`'s program (read from `file`, named in the commands).
pub fn check_inline(
    session: &Session,
    file: &Path,
    options: &InlineCheckOptions,
) -> Result<InlineReport, Error> {
    let targets: Vec<Target> = match &options.func {
        Some(f) => {
            function_by_name(&session.module, f)?;
            [(Mode::Forward, 1), (Mode::Forward, 2), (Mode::Reverse, 1)]
                .into_iter()
                .map(|d| Target {
                    func: f.clone(),
                    derive: Some(d),
                })
                .collect()
        }
        None => autodiff_users(&session.module)
            .into_iter()
            .map(|func| Target { func, derive: None })
            .collect(),
    };
    if targets.is_empty() {
        return Err(Error::Argument(format!(
            "{} has no function with an `autodiff`: name one with `--fn` to check its derivatives",
            file.display()
        )));
    }
    let settings = settings();
    let file_name = file.display().to_string();
    let mut report = InlineReport {
        targets: targets.clone(),
        ..InlineReport::default()
    };
    for target in &targets {
        let sig = match target_signature(session, target) {
            Ok(sig) => sig,
            // Nothing to differentiate in this mode (no f64 parameter, say).
            Err(_) if target.derive.is_some() => continue,
            Err(e) => return Err(e),
        };
        let key = format!("{}{:?}", target.func, target.derive);
        let mut rng = Rng::new(options.seed, &key);
        let pinned = vec![None; sig.params.len()];
        let prepared: Vec<Result<Prepared, Fault>> = settings
            .iter()
            .map(|s| Prepared::new(session, target, s).map_err(Fault::compile))
            .collect();
        for k in 0..options.samples.max(1) {
            let sample = Sample::draw(&mut rng, &sig, &pinned, None);
            let args = sample.describe(&sig);
            let outcomes: Vec<Result<Outcome, Fault>> = prepared
                .iter()
                .map(|p| match p {
                    Ok(p) => p.run(&sample.primal),
                    Err(e) => Err(e.clone()),
                })
                .collect();
            report.runs += outcomes.len();
            let first = &outcomes[0];
            let differs = outcomes
                .iter()
                .enumerate()
                .skip(1)
                .find_map(|(j, o)| first_difference(first, o, &sig).map(|what| (j, what)));
            match differs {
                Some((j, what)) => report.differences.push(Difference {
                    target: target.clone(),
                    sample: k,
                    reference: settings[0],
                    other: settings[j],
                    first: what,
                    commands: [
                        target.command(&file_name, &args, &settings[0]),
                        target.command(&file_name, &args, &settings[j]),
                    ],
                }),
                None => {
                    if first.is_err() {
                        report.consistent_errors += 1;
                    }
                }
            }
        }
    }
    Ok(report)
}

/// The first value in which `b` differs from `a`, described; `None` when
/// they are equal bit for bit (or the same error).
fn first_difference(
    a: &Result<Outcome, Fault>,
    b: &Result<Outcome, Fault>,
    sig: &Signature,
) -> Option<String> {
    match (a, b) {
        (Err(x), Err(y)) if x.key == y.key => None,
        (Err(x), Err(y)) => Some(format!(
            "the errors differ: `{}` vs `{}`",
            x.message, y.message
        )),
        (Err(x), Ok(_)) => Some(format!("one stops with `{}`, the other returns", x.message)),
        (Ok(_), Err(y)) => Some(format!("one returns, the other stops with `{}`", y.message)),
        (Ok(x), Ok(y)) => {
            let results = x.results.iter().zip(&y.results).enumerate();
            for (k, (u, v)) in results {
                if let Some(at) = val_difference(u, v) {
                    return Some(format!("result {k}{at}"));
                }
            }
            let args = x.args.iter().zip(&y.args).zip(&sig.params);
            for ((u, v), p) in args {
                if let Some(at) = val_difference(u, v) {
                    return Some(format!("`{}`{at}", p.name));
                }
            }
            None
        }
    }
}

/// Where two values differ: `""` for scalars, `[i]` for arrays, then the
/// two values with their bits.
fn val_difference(a: &Val, b: &Val) -> Option<String> {
    let bits = |x: f64| format!("{x:?} ({:#018x})", x.to_bits());
    match (a, b) {
        (Val::F64(x), Val::F64(y)) if x.to_bits() != y.to_bits() && !(x.is_nan() && y.is_nan()) => {
            Some(format!(": {} vs {}", bits(*x), bits(*y)))
        }
        (Val::Array(xs), Val::Array(ys)) => {
            if xs.len() != ys.len() {
                return Some(format!(": lengths {} vs {}", xs.len(), ys.len()));
            }
            xs.iter()
                .zip(ys)
                .position(|(x, y)| x.to_bits() != y.to_bits() && !(x.is_nan() && y.is_nan()))
                .map(|i| format!("[{i}]: {} vs {}", bits(xs[i]), bits(ys[i])))
        }
        _ if a.bit_eq(b) => None,
        _ => Some(format!(": {a} vs {b}")),
    }
}

/// The report as `adze check-inline` prints it.
pub fn render(report: &InlineReport) -> String {
    let mut out = String::new();
    for d in &report.differences {
        out.push_str(&format!(
            "DIFFERENCE in {} at sample {}: {}\n  {}\n  {}\n",
            d.target.describe(),
            d.sample,
            d.first,
            d.commands[0],
            d.commands[1]
        ));
    }
    let n = report.targets.len();
    out.push_str(&format!(
        "{} run(s) of {n} function(s) under {} settings (inline none/early/late/all x optimizer on/off x jit/interpreter): {} difference(s), {} sample(s) where every setting stopped with the same error\n",
        report.runs,
        settings().len(),
        report.differences.len(),
        report.consistent_errors
    ));
    out
}
