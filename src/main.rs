//! The `adze` command (SPEC §5).
//!
//! Exit codes: 0 success; 1 an error in the program or its run (a
//! diagnostic, a run-time error, an unknown function or argument); 2 a usage
//! error (clap's own). Errors print one readable line on stderr, followed,
//! for front-end diagnostics, by the rendered excerpt.
#![forbid(unsafe_code)]

use adze::args::{args_file, bind, split_assignment, Arguments, Given};
use adze::data::Stdin;
use adze::{Derivative, Engine, Error, InlineSetting, Role, Session, Stage};
use adze_ir::{Mode, Outcome, Val};
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
    /// Run every function of FILE that takes an `autodiff` (or, with --fn,
    /// the derivatives of one function in every mode) at seeded sample
    /// points under the four inline settings, the optimizer on and off,
    /// and both engines; exit 1 if any two differ in a bit.
    CheckInline(CheckInlineArgs),
}

/// The arguments of `adze run`.
#[derive(clap::Args)]
struct RunArgs {
    file: PathBuf,
    /// The function to run.
    #[arg(long = "fn", value_name = "NAME")]
    func: String,
    /// An argument: NAME=VALUE, VALUE a number (nan, inf, -inf too),
    /// true/false, [x, y, ..], or @PATH: the value in a file (.json, .npy,
    /// else whitespace-separated numbers; @- standard input).
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    args: Vec<String>,
    /// Every argument at once: a JSON object {"NAME": VALUE, ..} (`-`:
    /// standard input); an `--arg` of the same name replaces its entry.
    #[arg(long = "args", value_name = "PATH.json")]
    args_files: Vec<PathBuf>,
    /// Write the final contents of an array argument (with `--derive`, a
    /// shadow such as `x.d` too) or an array result (`result`; of a tuple
    /// `result.0`, `result.1`, ..) to PATH: .npy, .json, else text.
    #[arg(long = "save", value_name = "NAME=PATH.npy")]
    save: Vec<String>,
    /// With `--derive reverse`: the cotangents of the f64 results, e.g.
    /// `1,0` for the first of two (default: 1.0 each).
    #[arg(
        long,
        value_name = "C,C,..",
        requires = "derive",
        allow_hyphen_values = true
    )]
    seed: Option<String>,
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
    /// `text`: the IR's text format (it parses back); `dot`: Graphviz,
    /// one graph per function (blocks, branches, inlined code and rule
    /// regions as clusters, tape pushes and pops in color); `html`: one
    /// self-contained page, the stages side by side and the annotations
    /// (all three unless `--annotate` says which) as hover text.
    #[arg(long, default_value = "text", value_parser = ["text", "dot", "html"])]
    format: String,
    /// Comments on what the AD passes decided, any of `activity,tape,rules`
    /// (docs/inspecting.md); with `--fn`, the function and every function
    /// it reaches (a derivative's halves and helpers) are printed. Not
    /// with `--format dot`.
    #[arg(long, value_name = "LIST")]
    annotate: Option<String>,
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

/// The arguments of `adze check-inline`.
#[derive(clap::Args)]
struct CheckInlineArgs {
    file: PathBuf,
    /// Check the derivatives of this function (forward, forward of width
    /// 2, reverse) instead of the file's functions that use `autodiff`.
    #[arg(long = "fn", value_name = "NAME")]
    func: Option<String>,
    /// Sample points per function.
    #[arg(long, value_name = "N", default_value_t = 8)]
    samples: usize,
    /// Seed of the sample generator (the same seed, the same points).
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
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
    /// The budget of the reverse-mode tapes of one run, in bytes (a
    /// number, or with a unit: 64MiB, 2GiB, 500KB); a run that needs more
    /// runs again with every loop checkpointed (unless
    /// `--no-checkpoint-fallback`), and stops with an error if that needs
    /// more too.
    #[arg(long, value_name = "BYTES", default_value = "1GiB", value_parser = parse_bytes)]
    tape_limit: u64,
    /// Checkpoint the outermost counted loops of reverse derivatives: the
    /// same derivatives bit for bit, in bounded tape memory, for some
    /// recomputation (docs/ad-reverse.md, "Checkpointing").
    #[arg(long)]
    checkpoint: bool,
    /// Stop with the budget's error when the tape outgrows `--tape-limit`,
    /// instead of running again with every loop checkpointed.
    #[arg(long)]
    no_checkpoint_fallback: bool,
    /// The tape entries a checkpointed loop's segment may hold before it is
    /// cut (default: a sixteenth of the tape budget's entries).
    #[arg(long, value_name = "ENTRIES")]
    checkpoint_segment: Option<u64>,
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
        session.limits.tape_limit = self.tape_limit;
        session.ad_limits.checkpoint = self.checkpoint;
        session.checkpoint_fallback = !self.no_checkpoint_fallback;
        session.limits.checkpoint_segment = self.checkpoint_segment;
        Ok(session)
    }
}

/// Differentiate `--fn` instead of running or printing it as written.
#[derive(clap::Args)]
struct DeriveArgs {
    /// Run (or dump) the derivative of `--fn`: every f64 parameter is `dual`
    /// (forward) or `active` (reverse), every array `dup`, i64/bool `const`.
    /// Its parameters are named `x`, `x.t` (tangent), `a.d` (shadow, zeros
    /// when not given); in vector mode `x.t1 .. x.tN`. Reverse mode prints
    /// the value, then `d/dx = ..` and `a.d = [..]`.
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

    /// The derivative `--derive` asks for, optimized or as the AD pass
    /// left it; `None` without `--derive`.
    fn apply_at(
        &self,
        session: &Session,
        func: &str,
        optimized: bool,
    ) -> Result<Option<Derivative>, Error> {
        let Some(mode) = self.derive else {
            return Ok(None);
        };
        if self.width == 0 {
            return Err(Error::Argument("`--width` must be at least 1".into()));
        }
        session
            .derivative(func, mode.ir(), self.width, &self.consts, optimized)
            .map(Some)
    }

    /// What `adze run` runs in `session`: the derivative asked for
    /// (optimized), or else `--fn` prepared.
    fn runnable(&self, session: &Session, func: &str) -> Result<Runnable, Error> {
        Ok(match self.apply_at(session, func, true)? {
            Some(d) => Runnable::Derived(d),
            None => Runnable::Prepared(session.prepare(func)?),
        })
    }
}

/// What `adze run` runs: the derivative `--derive` asks for, or `--fn`
/// in its prepared module ([`DeriveArgs::runnable`]).
enum Runnable {
    Derived(Derivative),
    Prepared(adze_ir::Module),
}

impl Runnable {
    fn module(&self) -> &adze_ir::Module {
        match self {
            Runnable::Derived(d) => &d.module,
            Runnable::Prepared(m) => m,
        }
    }

    /// The name of the function run (`func` is `--fn`).
    fn name<'a>(&'a self, func: &'a str) -> &'a str {
        match self {
            Runnable::Derived(d) => &d.name,
            Runnable::Prepared(_) => func,
        }
    }

    fn derivative(&self) -> Option<&Derivative> {
        match self {
            Runnable::Derived(d) => Some(d),
            Runnable::Prepared(_) => None,
        }
    }
}

/// `--tape-limit BYTES`: a number of bytes, with an optional unit (`KiB`,
/// `MiB`, `GiB` are powers of 1024; `KB`, `MB`, `GB` of 1000; `K`, `M`,
/// `G` as the binary ones).
fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a number of bytes (e.g. 1048576, 64MiB, 2GiB)"))?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        u => {
            return Err(format!(
                "unknown unit `{u}` in `{s}` (use KiB, MiB, GiB, KB, MB or GB)"
            ))
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("`{s}` is too many bytes"))
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
        Command::CheckInline(a) => check_inline(a),
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
/// results and the final contents of the `mut` arrays, save arrays.
fn run(a: RunArgs) -> Result<(), Error> {
    let RunArgs {
        file,
        func,
        args,
        args_files,
        save,
        seed,
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
    let target = derive.runnable(&session, &func)?;
    let (module, name) = (target.module(), target.name(&func));
    let derivative = target.derivative();
    let id = adze::pipeline::function_by_name(module, name)?;
    let sig = module.func(id).sig.clone();
    let roles = derivative.map_or(&[][..], |d| &d.roles[..]);
    // The seeds of array results are arrays: given with `--arg dret=..`,
    // or ones of the result's length (from a run of the primal).
    let array_seed = |k: usize| {
        matches!(roles.get(k), Some(Role::Seed(_))) && sig.params[k].ty == adze_ir::Type::Array
    };
    let f64_seed_of: Vec<Option<usize>> = (0..sig.params.len())
        .scan(0, |n, k| {
            Some(match roles.get(k) {
                Some(Role::Seed(_)) if !array_seed(k) => {
                    *n += 1;
                    Some(*n - 1)
                }
                _ => None,
            })
        })
        .collect();
    let seeds = seeds(seed.as_deref(), derivative, &sig, &func)?;
    let mut stdin = Stdin::default();
    let mut given: Arguments = Vec::new();
    for path in &args_files {
        given.extend(args_file(path, &mut stdin)?);
    }
    for (n, v) in assignments(&args)? {
        given.push((n, Given::Text(v)));
    }
    if let Some((n, _)) = given.iter().find(|(n, _)| {
        let k = sig.params.iter().position(|p| &p.name == n);
        k.is_some_and(|k| matches!(roles.get(k), Some(Role::Seed(_))) && !array_seed(k))
    }) {
        return Err(Error::Argument(format!(
            "`{n}` is the cotangent of a result: give it with `--seed`"
        )));
    }
    let saves = saves(&save, module, id, &func)?;
    // A shadow not given is zeros of its array's length; the seeds of f64
    // results come from `--seed`, those of array results are ones of the
    // result's length unless given (the primal runs once to tell).
    let primal_results: std::cell::OnceCell<Option<Vec<Val>>> = std::cell::OnceCell::new();
    let fill = |k: usize, values: &[Option<Val>]| match roles.get(k)? {
        Role::Shadow(of) => {
            let at = roles.iter().position(|r| *r == Role::Primal(*of))?;
            match values.get(at)? {
                Some(Val::Array(xs)) => Some(Val::Array(vec![0.0; xs.len()])),
                _ => None,
            }
        }
        Role::Seed(j) if array_seed(k) => {
            let results = primal_results.get_or_init(|| {
                let args: Option<Vec<Val>> = roles
                    .iter()
                    .zip(values)
                    .filter(|(r, _)| matches!(r, Role::Primal(_)))
                    .map(|(_, v)| v.clone())
                    .collect();
                let primal = session.prepare(&func).ok()?;
                let out = session
                    .run_in(&primal, &func, &args?, Engine::Interp)
                    .ok()?;
                Some(out.results)
            });
            let diff: Vec<&Val> = results
                .as_ref()?
                .iter()
                .filter(|v| matches!(v, Val::F64(_) | Val::Array(_)))
                .collect();
            match diff.get(*j)? {
                Val::Array(ys) => Some(Val::Array(vec![1.0; ys.len()])),
                _ => None,
            }
        }
        Role::Seed(_) => f64_seed_of[k]
            .and_then(|j| seeds.get(j))
            .copied()
            .map(Val::F64),
        _ => None,
    };
    let mut values = bind(module, id, &given, &mut stdin, &fill)?;
    drop(given);
    adze::pipeline::timing_mark("arguments");
    // A run whose tape outgrows its budget runs again checkpointed
    // (`Session::checkpoint_fallback`), from the arguments as given: the
    // `mut` ones are kept for it (the first run writes them in place).
    // (Only code that tapes can outgrow the budget: the copies are made
    // for that alone.)
    let tapes = module.iter().any(|(_, f)| {
        f.layout
            .insts()
            .any(|(_, i)| matches!(f.dfg.inst(i), adze_ir::InstData::Push { .. }))
    });
    let fallback = session.may_fall_back() && tapes;
    let kept: Vec<(usize, Val)> = if fallback {
        (sig.params.iter().enumerate())
            .filter(|(_, p)| p.mutable)
            .map(|(k, _)| (k, values[k].clone()))
            .collect()
    } else {
        Vec::new()
    };
    let results = match run_on(&session, module, name, &mut values, engine) {
        Err(e) if session.falls_back(&e) => {
            for (k, v) in kept {
                values[k] = v;
            }
            // The budget's error stands if the checkpointed build fails.
            let again = session.checkpointed();
            let Ok(target) = derive.runnable(&again, &func) else {
                return Err(e);
            };
            let (module, name) = (target.module(), target.name(&func));
            eprintln!(
                "note: the reverse-mode tape outgrew its budget (`--tape-limit`); running again with every loop checkpointed (`--checkpoint`)"
            );
            run_on(&again, module, name, &mut values, engine)?
        }
        out => out?,
    };
    let outcome = adze_ir::Outcome {
        results,
        args: values,
    };
    // Saved first: a file that cannot be written is an error with nothing
    // on stdout.
    for (target, path) in saves {
        let value = match target {
            Saved::Arg(k) => outcome.args.get(k),
            Saved::Result(k) => outcome.results.get(k),
        };
        // The run returns a value per parameter and result of `sig`.
        let value = value.ok_or_else(|| {
            Error::Verify(format!(
                "`--save`: the run of `{func}` returned too few values"
            ))
        })?;
        adze::data::save(&path, value)
            .map_err(|why| Error::Argument(format!("`--save`: {why}")))?;
    }
    let report = Report::new(&sig, &outcome, derivative);
    if json {
        println!("{}", report.json());
    } else {
        report.print();
    }
    Ok(())
}

/// Runs `name` of `module` on `values` and returns its results; `values`
/// then holds the final contents of the `mut` arrays. With the JIT,
/// compiled once and called on the arguments' own buffers (the
/// compile-once API: a 10^7-element array is not copied again).
fn run_on(
    session: &Session,
    module: &adze_ir::Module,
    name: &str,
    values: &mut [Val],
    engine: Engine,
) -> Result<Vec<Val>, Error> {
    match engine {
        Engine::Jit => {
            let program = adze::Program::new(session.clone());
            let function = program.compile(module.clone(), name)?;
            adze::pipeline::timing_mark("jit");
            let mut slots: Vec<adze::Arg<'_>> = values.iter_mut().map(adze::Arg::of).collect();
            let results = function.call(&mut slots)?;
            drop(slots);
            adze::pipeline::timing_mark("run");
            Ok(results)
        }
        Engine::Interp => {
            let out = session.run_in(module, name, values, engine)?;
            for (v, a) in values.iter_mut().zip(out.args) {
                *v = a;
            }
            Ok(out.results)
        }
    }
}

/// The cotangents of the f64 results that `--seed` gives (default: 1.0
/// each), checked against the derivative.
fn seeds(
    seed: Option<&str>,
    derivative: Option<&Derivative>,
    sig: &adze_ir::Signature,
    func: &str,
) -> Result<Vec<f64>, Error> {
    let wanted = derivative.map_or(0, |d| {
        d.roles
            .iter()
            .zip(&sig.params)
            .filter(|(r, p)| matches!(r, Role::Seed(_)) && p.ty == adze_ir::Type::F64)
            .count()
    });
    let Some(text) = seed else {
        return Ok(vec![1.0; wanted]);
    };
    let bad = |why: String| -> Result<Vec<f64>, Error> {
        Err(Error::Argument(format!("`--seed {text}`: {why}")))
    };
    if derivative.is_some_and(|d| d.mode == Mode::Forward) {
        return bad(
            "seeds are for `--derive reverse` (forward mode takes tangents, `--arg x.t=..`)".into(),
        );
    }
    let seeds = text
        .split(',')
        .map(|c| adze::args::parse_f64(c.trim()))
        .collect::<Result<Vec<f64>, String>>();
    match seeds {
        Err(why) => bad(why),
        Ok(_) if wanted == 0 => bad(format!(
            "`{func}` has no f64 result to seed (only the shadows of `mut` arrays are cotangents)"
        )),
        Ok(s) if s.len() != wanted => bad(format!(
            "{} cotangent{} given, but `{func}` has {wanted} f64 result{}",
            s.len(),
            if s.len() == 1 { " is" } else { "s are" },
            if wanted == 1 { "" } else { "s" }
        )),
        Ok(s) => Ok(s),
    }
}

/// What `--save NAME=..` writes: an argument or a result, by number.
enum Saved {
    Arg(usize),
    Result(usize),
}

/// The `--save NAME=PATH` options, checked before the run: NAME is an
/// array parameter of the function run (with `--derive`, of the
/// derivative: `x.d`), or `result` (`result.0`, `result.1`, .. for a
/// tuple) when that is an array.
fn saves(
    save: &[String],
    module: &adze_ir::Module,
    id: adze_ir::FuncId,
    func: &str,
) -> Result<Vec<(Saved, PathBuf)>, Error> {
    let sig = &module.func(id).sig;
    let mut out = Vec::new();
    for text in save {
        let (name, path) = text
            .split_once('=')
            .map(|(n, p)| (n.trim(), p.trim()))
            .filter(|(n, p)| !n.is_empty() && !p.is_empty())
            .ok_or_else(|| Error::Argument(format!("`--save {text}`: expected NAME=PATH")))?;
        let bad = |why: String| Error::Argument(format!("`--save {text}`: {why}"));
        let (target, ty) = if let Some(k) = sig.params.iter().position(|p| p.name == name) {
            (Saved::Arg(k), sig.params[k].ty)
        } else if let Some(k) = result_number(name, sig.results.len()) {
            (Saved::Result(k), sig.results[k])
        } else {
            let results = sig.results.len();
            let names: Vec<String> = sig
                .params
                .iter()
                .filter(|p| p.ty.is_array())
                .map(|p| p.name.clone())
                .chain(
                    (0..results)
                        .filter(|&k| sig.results[k].is_array())
                        .map(|k| result_name(k, results)),
                )
                .collect();
            return Err(bad(format!(
                "`{func}` has no array `{name}` (its arrays: {})",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            )));
        };
        if !ty.is_array() {
            let what = match target {
                Saved::Arg(_) => format!("`{name}`"),
                Saved::Result(_) => format!("the result `{name}`"),
            };
            return Err(bad(format!("{what} is {}, not an array", ty.a())));
        }
        out.push((target, PathBuf::from(path)));
    }
    Ok(out)
}

/// The name `--save` gives result `k` of `results`: `result` when it is
/// the only one, else `result.K`.
fn result_name(k: usize, results: usize) -> String {
    if results == 1 {
        "result".to_string()
    } else {
        format!("result.{k}")
    }
}

/// `result` (a function of one result) or `result.K` as a result number
/// (`result.0` names the only result too).
fn result_number(name: &str, results: usize) -> Option<usize> {
    if name == "result" {
        return (results == 1).then_some(0);
    }
    // Only the plain spelling: `result.01` and `result.+1` name nothing.
    let k: usize = name.strip_prefix("result.")?.parse().ok()?;
    (k < results && name == format!("result.{k}")).then_some(k)
}

/// What `adze run` prints: the results, the derivatives, the final
/// contents of the `mut` arrays.
struct Report<'a> {
    /// The results shown as "the result": all of them, or, in reverse
    /// mode, the primal's.
    results: &'a [Val],
    /// Reverse mode: each active scalar's position among the derivative's
    /// parameters, name and adjoint.
    adjoints: Vec<(usize, String, &'a Val)>,
    /// `mut` arrays (shadows included): position, name, final contents.
    arrays: Vec<(usize, String, &'a Val)>,
    /// Whether to print the adjoints (reverse mode).
    reverse: bool,
}

impl<'a> Report<'a> {
    fn new(
        sig: &adze_ir::Signature,
        outcome: &'a Outcome,
        derivative: Option<&Derivative>,
    ) -> Report<'a> {
        let arrays = sig
            .params
            .iter()
            .zip(&outcome.args)
            .enumerate()
            .filter(|(_, (p, _))| p.ty.is_array() && p.mutable)
            .map(|(at, (p, v))| (at, p.name.clone(), v))
            .collect();
        match derivative {
            Some(d) if d.mode == Mode::Reverse => {
                let (results, adjoints) = outcome.results.split_at(d.primal_results);
                // Parameter `k` of the primal is the derivative's parameter
                // whose role is `Primal(k)`.
                let at = |k: usize| {
                    let at = d.roles.iter().position(|r| *r == Role::Primal(k));
                    at.unwrap_or(usize::MAX)
                };
                let name = |at: usize| sig.params.get(at).map_or("", |p| &p.name).to_string();
                Report {
                    results,
                    adjoints: d
                        .adjoints
                        .iter()
                        .zip(adjoints)
                        .map(|(&k, v)| (at(k), name(at(k)), v))
                        .collect(),
                    arrays,
                    reverse: true,
                }
            }
            _ => Report {
                results: &outcome.results,
                adjoints: Vec::new(),
                arrays,
                reverse: false,
            },
        }
    }

    /// As text: the result (a tuple in parentheses), then, in parameter
    /// order, `d/dy = ..` for each adjoint and `a = [..]` for each array.
    fn print(&self) {
        match self.results {
            [] => {}
            [one] => println!("{one}"),
            many => {
                let parts: Vec<String> = many.iter().map(|v| v.to_string()).collect();
                println!("({})", parts.join(", "));
            }
        }
        let mut lines: Vec<(usize, String)> = Vec::new();
        for (at, name, v) in &self.adjoints {
            lines.push((*at, format!("d/d{name} = {v}")));
        }
        for (at, name, v) in &self.arrays {
            lines.push((*at, format!("{name} = {v}")));
        }
        lines.sort_by_key(|(at, _)| *at);
        for (_, line) in lines {
            println!("{line}");
        }
    }

    /// `{"result": R, "arrays": {..}}`, and in reverse mode
    /// `"adjoints": {"y": ..}`.
    fn json(&self) -> serde_json::Value {
        let result = match self.results {
            [] => serde_json::Value::Null,
            [one] => json_val(one),
            many => many.iter().map(json_val).collect(),
        };
        let arrays: serde_json::Map<String, serde_json::Value> = self
            .arrays
            .iter()
            .map(|(_, name, v)| (name.clone(), json_val(v)))
            .collect();
        let mut obj = serde_json::json!({ "result": result, "arrays": arrays });
        if self.reverse {
            let adjoints: serde_json::Map<String, serde_json::Value> = self
                .adjoints
                .iter()
                .map(|(_, name, v)| (name.clone(), json_val(v)))
                .collect();
            obj["adjoints"] = serde_json::Value::Object(adjoints);
        }
        obj
    }
}

/// `adze dump`: run the stages up to the one printed, put the derivative
/// (with `--derive`) into the stages that have it, print (with `--format
/// html`, every stage printed on one page).
fn dump(a: DumpArgs) -> Result<(), Error> {
    let session = a.pipeline.session(&a.file)?;
    if let Some(name) = &a.func {
        session.function(name)?;
    }
    let annotate = a
        .annotate
        .as_deref()
        .map(adze_ad::annotate::Annotate::parse)
        .transpose()
        .map_err(Error::Argument)?;
    let html = a.format == "html";
    let annotate = match annotate {
        Some(_) if a.format == "dot" => {
            return Err(Error::Argument(
                "`--annotate` is for `--format text` and `--format html`".into(),
            ))
        }
        // The page's point is the hover text: every annotation by default.
        None if html => Some(adze_ad::annotate::Annotate {
            activity: true,
            tape: true,
            rules: true,
        }),
        other => other,
    };
    // Only the stages up to the one printed run.
    let last = adze::Stage::ALL
        .into_iter()
        .find(|s| s.name() == a.stage)
        .unwrap_or(Stage::Optimized);
    let mut stages = session.stages_until(a.func.as_deref(), last)?;
    let func = derive_in_stages(&a, &session, last, &mut stages)?;
    let mut columns: Vec<(&'static str, String)> = Vec::new();
    for (s, module) in stages {
        if a.stage != "all" && a.stage != s.name() {
            continue;
        }
        // Before the `ad` stage a derivative does not exist yet: the text
        // and dot formats skip the stage, the page shows the function it
        // is made from (as `--stage parsed --derive ..` prints it).
        let mut name = func.as_deref();
        if name.is_some_and(|f| module.get(f).is_none()) {
            match a.func.as_deref() {
                Some(f) if html && module.get(f).is_some() => name = Some(f),
                _ => continue,
            }
        }
        if a.format == "dot" {
            let note = if s == Stage::Optimized && a.pipeline.no_opt {
                " (--no-opt: identical to `ad`)"
            } else {
                ""
            };
            println!("// stage: {}{note}", s.name());
            print!("{}", adze_ir::dot::module_to_dot(&module, name));
            continue;
        }
        let text = match annotate {
            Some(what) => {
                adze::pipeline::dump_stage_annotated(&module, s, name, !a.pipeline.no_opt, what)?
            }
            None => adze::pipeline::dump_stage(&module, s, name, !a.pipeline.no_opt)?,
        };
        if html {
            columns.push((s.name(), text));
        } else {
            print!("{text}");
        }
    }
    if html {
        let command: Vec<String> = std::env::args_os()
            .skip(1)
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        let columns: Vec<(&str, &str)> = columns.iter().map(|(s, t)| (*s, t.as_str())).collect();
        print!(
            "{}",
            adze::html::page(&format!("adze {}", command.join(" ")), &columns)
        );
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
            let derive = |optimized| -> Result<Derivative, Error> {
                a.derive
                    .apply_at(session, name, optimized)?
                    .ok_or_else(|| Error::Argument("`--derive` needs a mode".into()))
            };
            let ad = derive(false)?;
            let optimized = derive(true)?;
            for (s, m) in stages {
                match s {
                    Stage::Ad => *m = ad.module.clone(),
                    Stage::Optimized => *m = optimized.module.clone(),
                    _ => {}
                }
            }
            Ok(Some(ad.name))
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

fn check_inline(a: CheckInlineArgs) -> Result<(), Error> {
    let session = Session::from_file(&a.file)?;
    let options = adze::check_inline::InlineCheckOptions {
        func: a.func,
        samples: a.samples,
        seed: a.seed,
    };
    let report = adze::check_inline::check_inline(&session, &a.file, &options)?;
    print!("{}", adze::check_inline::render(&report));
    match report.differences.len() {
        0 => Ok(()),
        n => Err(Error::Argument(format!(
            "{n} derivative(s) change with the inline setting, the optimizer or the engine"
        ))),
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
