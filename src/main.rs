//! The `adze` command (SPEC §5).
//!
//! Exit codes: 0 success; 1 an error in the program or its run (a
//! diagnostic, a run-time error, an unknown function or argument); 2 a usage
//! error (clap's own). Errors print one readable line on stderr, followed,
//! for front-end diagnostics, by the rendered excerpt.
#![forbid(unsafe_code)]

use adze::args::{bind_args, split_assignment};
use adze::{Engine, Error, InlineSetting, Session, Stage};
use adze_ir::{Outcome, Val};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

// The standard `print!`, `println!` and `eprintln!` panic when the output
// cannot be written (a closed pipe, a full disk): these never do. A failed
// write to stdout is remembered, and `main` reports it (exit 1), except that
// a reader that has gone away (`adze dump .. | head`) ends the command quietly.
macro_rules! print {
    ($($t:tt)*) => { output::stdout(format_args!($($t)*)) };
}
macro_rules! println {
    ($($t:tt)*) => {{ print!($($t)*); print!("\n"); }};
}
macro_rules! eprintln {
    ($($t:tt)*) => { output::stderr(format_args!("{}\n", format_args!($($t)*))) };
}

mod output {
    use std::cell::RefCell;
    use std::io::Write;

    thread_local! {
        static FAILED: RefCell<Option<std::io::Error>> = const { RefCell::new(None) };
    }

    pub fn stdout(args: std::fmt::Arguments<'_>) {
        FAILED.with(|failed| {
            let mut failed = failed.borrow_mut();
            if failed.is_none() {
                if let Err(e) = std::io::stdout().lock().write_fmt(args) {
                    *failed = Some(e);
                }
            }
        });
    }

    pub fn stderr(args: std::fmt::Arguments<'_>) {
        // Nowhere left to report a failure to write an error.
        let _ = std::io::stderr().lock().write_fmt(args);
    }

    /// Flushes stdout; the first write error, if any.
    pub fn finish() -> Option<std::io::Error> {
        if let Err(e) = std::io::stdout().lock().flush() {
            stdout_failed(e);
        }
        FAILED.with(|failed| failed.borrow_mut().take())
    }

    fn stdout_failed(e: std::io::Error) {
        FAILED.with(|failed| {
            failed.borrow_mut().get_or_insert(e);
        });
    }
}

#[derive(Parser)]
#[command(
    name = "adze",
    version,
    about = "Compile, differentiate and run .adz programs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile FILE and run one function.
    Run(RunArgs),
    /// Print the IR after a stage of the pipeline.
    Dump(DumpArgs),
    /// Check FILE (parse, resolve, type-check, lower, verify) without running
    /// it; warn about rules that do not cover a mode the program uses.
    Check { file: PathBuf },
    /// Compare every custom rule of FILE with the AD derivative of its
    /// function's body at random (seeded) sample points; exit 1 if one
    /// disagrees.
    CheckRules(CheckRulesArgs),
}

/// The arguments of `adze run`.
#[derive(clap::Args)]
struct RunArgs {
    file: PathBuf,
    /// The function to run.
    #[arg(long = "fn", value_name = "NAME")]
    func: String,
    /// An argument: NAME=VALUE, VALUE a number, true/false, or [x, y, ..].
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    args: Vec<String>,
    /// Print {"result": R, "arrays": {..}} as one JSON object.
    #[arg(long)]
    json: bool,
    /// Run on the Cranelift JIT or the reference interpreter.
    #[arg(long, value_enum, default_value_t = Engine::Jit)]
    engine: Engine,
    /// Stop the run with an error (exit 1) once it has run for SECONDS
    /// (wall-clock time of the run itself, not of compiling it;
    /// fractions allowed, e.g. 0.5).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    timeout: Option<std::time::Duration>,
    #[command(flatten)]
    derive: DeriveArgs,
    #[command(flatten)]
    pipeline: PipelineArgs,
}

/// The arguments of `adze dump`.
#[derive(clap::Args)]
struct DumpArgs {
    file: PathBuf,
    /// Print only this function.
    #[arg(long = "fn", value_name = "NAME")]
    func: Option<String>,
    /// The stage to print, or `all`.
    #[arg(long, default_value = "parsed", value_parser = ["parsed", "inlined", "ad", "optimized", "all"])]
    stage: String,
    #[command(flatten)]
    derive: DeriveArgs,
    #[command(flatten)]
    pipeline: PipelineArgs,
}

/// The arguments of `adze check-rules`.
#[derive(clap::Args)]
struct CheckRulesArgs {
    file: PathBuf,
    /// Largest discrepancy |rule - AD| / max(1, |AD|) that agrees.
    #[arg(long, default_value_t = 1e-6)]
    tolerance: f64,
    /// Sample points per function.
    #[arg(long, value_name = "N", default_value_t = adze::check_rules::DEFAULT_SAMPLES)]
    samples: usize,
    /// Seed of the sample generator (the same seed, the same points).
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// Every array argument has this length (default: drawn per sample).
    #[arg(long, value_name = "L")]
    len: Option<usize>,
    /// Pin a parameter: NAME=VALUE, for every function that has NAME.
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    args: Vec<String>,
    /// Check only the rules of this function.
    #[arg(long = "fn", value_name = "NAME")]
    func: Option<String>,
}

/// How the pipeline runs: the inliner, the limits of AD, the optimizer.
#[derive(clap::Args)]
struct PipelineArgs {
    /// Where the inliner runs.
    #[arg(long, value_enum, default_value_t = InlineSetting::All)]
    inline: InlineSetting,
    /// How deeply derivatives may nest (a derivative of a derivative of ..)
    /// before AD stops with an error.
    #[arg(long, value_name = "N", default_value_t = adze_ad::AdLimits::default().max_nesting)]
    max_ad_depth: usize,
    /// How much code AD may create (instructions plus values) before it
    /// stops with an error.
    #[arg(long, value_name = "N", default_value_t = adze_ad::AdLimits::default().max_size)]
    max_ad_size: usize,
    /// Skip the optimizer (the result bits are the same either way; the
    /// `optimized` stage is then the `ad` stage).
    #[arg(long)]
    no_opt: bool,
    /// How deeply calls may nest at run time (recursion) before the run
    /// stops with an error.
    #[arg(long, value_name = "N", default_value_t = adze_ir::DEFAULT_MAX_CALL_DEPTH)]
    max_call_depth: u32,
}

impl PipelineArgs {
    /// A session of `file` with these settings.
    fn session(&self, file: &std::path::Path) -> Result<Session, Error> {
        let mut session = Session::from_file(file)?;
        session.inline = self.inline;
        session.ad_limits.max_nesting = self.max_ad_depth;
        session.ad_limits.max_size = self.max_ad_size;
        session.optimize = !self.no_opt;
        session.limits.max_call_depth = self.max_call_depth;
        Ok(session)
    }
}

/// Differentiate `--fn` instead of running or printing it as written.
#[derive(clap::Args)]
struct DeriveArgs {
    /// Run (or dump) the derivative of `--fn`: every f64 parameter is `dual`
    /// (forward) or `active` (reverse), every array `dup`, i64/bool `const`.
    /// Its parameters are named `x`, `x.t` (tangent), `a.d` (shadow); in
    /// vector mode `x.t1 .. x.tN`.
    #[arg(long, value_enum)]
    derive: Option<DeriveMode>,
    /// Vector mode: N tangents in one forward sweep.
    #[arg(long, default_value_t = 1, requires = "derive")]
    width: usize,
    /// Treat this parameter as a constant (repeatable).
    #[arg(long = "const", value_name = "NAME", requires = "derive")]
    consts: Vec<String>,
}

#[derive(Copy, Clone, clap::ValueEnum)]
enum DeriveMode {
    Forward,
    Reverse,
}

impl DeriveMode {
    fn ir(self) -> adze_ir::Mode {
        match self {
            DeriveMode::Forward => adze_ir::Mode::Forward,
            DeriveMode::Reverse => adze_ir::Mode::Reverse,
        }
    }
}

impl DeriveArgs {
    /// Warnings about the rules of the functions `--derive` differentiates
    /// in a mode they have no rule for.
    fn warnings(&self, session: &Session, func: &str) -> Option<adze_lang::Diagnostics> {
        session.derive_warnings(func, self.derive?.ir())
    }

    /// The module to use and the function to run in it.
    fn apply(&self, session: &Session, func: &str) -> Result<(adze_ir::Module, String), Error> {
        self.apply_at(session, func, true)
    }

    /// [`DeriveArgs::apply`], optimized or as the AD pass left it.
    fn apply_at(
        &self,
        session: &Session,
        func: &str,
        optimized: bool,
    ) -> Result<(adze_ir::Module, String), Error> {
        match self.derive {
            None => Ok((session.prepare(func)?, func.to_string())),
            Some(mode) => {
                let mode = mode.ir();
                if self.width == 0 {
                    return Err(Error::Argument("`--width` must be at least 1".into()));
                }
                if optimized {
                    session.derive(func, mode, self.width, &self.consts)
                } else {
                    session.derive_unoptimized(func, mode, self.width, &self.consts)
                }
            }
        }
    }
}

/// `--timeout SECONDS`: a positive, finite number of seconds.
fn parse_seconds(s: &str) -> Result<std::time::Duration, String> {
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if secs.is_nan() || secs <= 0.0 {
        return Err(format!("the time limit must be positive, not {s}"));
    }
    std::time::Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("`{s}` seconds is too long a time limit"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = matches!(&cli.command, Command::Run(a) if a.json);
    let code = match execute(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            report(&err, json);
            ExitCode::from(1)
        }
    };
    match output::finish() {
        None => code,
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => code,
        Some(e) => {
            let msg = format!("cannot write the output: {e}");
            if json {
                eprintln!("{}", serde_json::json!({ "error": msg }));
            } else {
                eprintln!("error: {msg}");
            }
            ExitCode::from(1)
        }
    }
}

fn report(err: &Error, json: bool) {
    if json {
        let obj = serde_json::json!({ "error": err.to_string() });
        eprintln!("{obj}");
        return;
    }
    match err {
        // `FILE:LINE:COL: error: message`, then the excerpt.
        Error::Diagnostics(d) => eprintln!("{}\n\n{}", d.summary(), d.render()),
        other => eprintln!("error: {other}"),
    }
}

/// Runs one subcommand: one function each.
fn execute(command: Command) -> Result<(), Error> {
    match command {
        Command::Run(a) => run(a),
        Command::Dump(a) => dump(a),
        Command::CheckRules(a) => check_rules(a),
        Command::Check { file } => check(&file),
    }
}

/// `NAME=VALUE` options as pairs.
fn assignments(args: &[String]) -> Result<Vec<(String, String)>, Error> {
    args.iter()
        .map(|a| split_assignment(a).map(|(n, v)| (n.to_string(), v.to_string())))
        .collect()
}

/// `adze run`: compile, (derive,) bind the arguments, run, print the
/// results and the final contents of the `mut` arrays.
fn run(a: RunArgs) -> Result<(), Error> {
    let RunArgs {
        file,
        func,
        args,
        json,
        engine,
        timeout,
        derive,
        pipeline,
    } = a;
    let mut session = pipeline.session(&file)?;
    session.limits.timeout = timeout;
    session.function(&func)?;
    if json {
        warn_json(derive.warnings(&session, &func));
    } else {
        warn(derive.warnings(&session, &func));
    }
    let (module, func) = derive.apply(&session, &func)?;
    let id = adze::pipeline::function_by_name(&module, &func)?;
    let sig = module.func(id).sig.clone();
    let pairs = assignments(&args)?;
    let values = bind_args(&module, id, &pairs)?;
    let outcome = session.run_in(&module, &func, &values, engine)?;
    let mut_arrays: Vec<(String, &Val)> = sig
        .params
        .iter()
        .zip(&outcome.args)
        .filter(|(p, _)| p.ty.is_array() && p.mutable)
        .map(|(p, v)| (p.name.clone(), v))
        .collect();
    if json {
        println!("{}", json_outcome(&outcome, &mut_arrays));
    } else {
        print_outcome(&outcome, &mut_arrays);
    }
    Ok(())
}

/// `adze dump`: run the stages up to the one printed, put the derivative
/// (with `--derive`) into the stages that have it, print.
fn dump(a: DumpArgs) -> Result<(), Error> {
    let session = a.pipeline.session(&a.file)?;
    if let Some(name) = &a.func {
        session.function(name)?;
    }
    // Only the stages up to the one printed run.
    let last = adze::Stage::ALL
        .into_iter()
        .find(|s| s.name() == a.stage)
        .unwrap_or(Stage::Optimized);
    let mut stages = session.stages_until(a.func.as_deref(), last)?;
    let func = derive_in_stages(&a, &session, last, &mut stages)?;
    for (s, module) in stages {
        if a.stage != "all" && a.stage != s.name() {
            continue;
        }
        // Before the `ad` stage a derivative does not exist yet.
        if func.as_ref().is_some_and(|f| module.get(f).is_none()) {
            continue;
        }
        let note = if s == Stage::Optimized && a.pipeline.no_opt {
            " (--no-opt: identical to `ad`)"
        } else {
            ""
        };
        println!("; stage: {}{note}", s.name());
        match &func {
            Some(name) => {
                let id = adze::pipeline::function_by_name(&module, name)?;
                print!("{}", module.display_function(id));
            }
            None => print!("{module}"),
        }
    }
    Ok(())
}

/// With `--derive`, replaces the modules of the stages up to `last` that
/// contain the derivative of `--fn` (`ad`, and `optimized` optimized) by
/// ones that do; the function to print: the derivative, `--fn` or none.
fn derive_in_stages(
    a: &DumpArgs,
    session: &Session,
    last: Stage,
    stages: &mut [(Stage, adze_ir::Module)],
) -> Result<Option<String>, Error> {
    let derives = matches!(last, Stage::Ad | Stage::Optimized);
    match (&a.func, a.derive.derive.is_some()) {
        (None, true) => Err(Error::Argument("`--derive` needs `--fn NAME`".into())),
        (Some(_), true) if !derives => Ok(a.func.clone()),
        (Some(name), true) => {
            warn(a.derive.warnings(session, name));
            // The derivative is part of the `ad` stage and every
            // later one (optimized in the `optimized` stage).
            let (module, derived) = a.derive.apply_at(session, name, false)?;
            let (optimized, _) = a.derive.apply_at(session, name, true)?;
            for (s, m) in stages {
                match s {
                    Stage::Ad => *m = module.clone(),
                    Stage::Optimized => *m = optimized.clone(),
                    _ => {}
                }
            }
            Ok(Some(derived))
        }
        (_, false) => Ok(a.func.clone()),
    }
}

/// `adze check-rules`: the table of verdicts; an error (exit 1) if a rule
/// disagrees.
fn check_rules(a: CheckRulesArgs) -> Result<(), Error> {
    let session = Session::from_file(&a.file)?;
    warn(session.rule_warnings());
    let options = adze::check_rules::CheckOptions {
        samples: a.samples,
        seed: a.seed,
        len: a.len,
        pinned: assignments(&a.args)?,
        func: a.func,
    };
    let checks = adze::check_rules::check_rules(&session.module, &options)?;
    print!("{}", adze::check_rules::render_table(&checks, a.tolerance));
    let bad: Vec<&str> = checks
        .iter()
        .filter(|c| !c.agrees(a.tolerance))
        .map(|c| c.rule.as_str())
        .collect();
    if bad.is_empty() {
        println!("ok: {} rule(s) agree with AD", checks.len());
        Ok(())
    } else {
        Err(Error::Argument(format!(
            "{} rule(s) disagree with the derivative of their function's body: {}",
            bad.len(),
            bad.join(", ")
        )))
    }
}

/// `adze check`: checks, lowers and verifies the IR (in every build).
fn check(file: &std::path::Path) -> Result<(), Error> {
    let session = Session::from_file(file)?;
    warn(session.rule_warnings());
    println!(
        "ok: {} checked, {} function(s)",
        file.display(),
        session.module.len()
    );
    Ok(())
}

/// Prints warnings on stderr, each as `FILE:LINE:COL: warning: ..` and its
/// excerpt; the exit code is not affected.
fn warn(warnings: Option<adze_lang::Diagnostics>) {
    if let Some(w) = warnings {
        eprintln!("{}\n", w.report().trim_end());
    }
}

/// The same, for `--json` runs: one `{"warning": ..}` object per line.
fn warn_json(warnings: Option<adze_lang::Diagnostics>) {
    if let Some(w) = warnings {
        for d in w.errors() {
            let one = adze_lang::Diagnostics::new_like(&w, vec![d.clone()]);
            eprintln!("{}", serde_json::json!({ "warning": one.summary() }));
        }
    }
}

fn json_number(x: f64) -> serde_json::Value {
    if x.is_finite() {
        serde_json::json!(x)
    } else {
        // JSON has no NaN or infinity: spell them as strings.
        serde_json::json!(format!("{x}"))
    }
}

fn json_val(v: &Val) -> serde_json::Value {
    match v {
        Val::F64(x) => json_number(*x),
        Val::I64(x) => serde_json::json!(x),
        Val::Bool(x) => serde_json::json!(x),
        Val::Array(xs) => xs.iter().map(|&x| json_number(x)).collect(),
        Val::IArray(xs) => serde_json::json!(xs),
    }
}

fn json_outcome(outcome: &Outcome, arrays: &[(String, &Val)]) -> serde_json::Value {
    let result = match outcome.results.as_slice() {
        [] => serde_json::Value::Null,
        [one] => json_val(one),
        many => many.iter().map(json_val).collect(),
    };
    let arrays: serde_json::Map<String, serde_json::Value> = arrays
        .iter()
        .map(|(name, v)| (name.clone(), json_val(v)))
        .collect();
    serde_json::json!({ "result": result, "arrays": arrays })
}

fn print_outcome(outcome: &Outcome, arrays: &[(String, &Val)]) {
    match outcome.results.as_slice() {
        [] => {}
        [one] => println!("{one}"),
        many => {
            let parts: Vec<String> = many.iter().map(|v| v.to_string()).collect();
            println!("({})", parts.join(", "));
        }
    }
    for (name, v) in arrays {
        println!("{name} = {v}");
    }
}
