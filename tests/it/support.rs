//! Shared helpers: example discovery, input generation, expected files.

use adze::{Engine, Error, InlineSetting, Session};
use adze_ir::{ArgActivity, FuncId, Function, Module, Outcome, RunError, Signature, Type, Val};
use adze_test_support::adze::run_args;
use adze_test_support::examples::{run_lines, RunLine};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.adz` file in `ir-examples/`, sorted.
pub use adze_test_support::examples::example_files as examples;

/// `path` relative to the workspace root (as the command line is given
/// it in the tests, which run there).
pub fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap()
        .to_str()
        .unwrap()
        .to_string()
}

pub fn load(path: &Path) -> Session {
    Session::from_file(path).unwrap_or_else(|e| {
        let rendered = match &e {
            adze::Error::Diagnostics(d) => d.render(),
            other => other.to_string(),
        };
        panic!("{} does not compile:\n{rendered}", path.display())
    })
}

/// A copy of `session` under the inline setting `inline`.
pub fn with_inline(session: &Session, inline: InlineSetting) -> Session {
    let mut s = Session::from_module(session.module.clone()).unwrap();
    s.inline = inline;
    s
}

/// Every inline setting on both engines.
pub fn every_setting_and_engine() -> Vec<(InlineSetting, Engine)> {
    InlineSetting::ALL
        .into_iter()
        .flat_map(|inline| [(inline, Engine::Interp), (inline, Engine::Jit)])
        .collect()
}

/// Every inline setting on the interpreter, but `jit` on the JIT.
pub fn every_setting_one_on_the_jit(jit: InlineSetting) -> Vec<(InlineSetting, Engine)> {
    InlineSetting::ALL
        .into_iter()
        .map(|inline| match inline == jit {
            true => (inline, Engine::Jit),
            false => (inline, Engine::Interp),
        })
        .collect()
}

/// `func` of `base` on `args` under each inline setting of `runs`, on its
/// engine: the outcome, the same bits under every one, or what went wrong.
pub fn the_same_under(
    base: &Session,
    runs: &[(InlineSetting, Engine)],
    func: &str,
    args: &[Val],
) -> Result<Outcome, String> {
    let mut first: Option<(String, Outcome)> = None;
    for &(inline, engine) in runs {
        let here = format!("inline {inline:?} on {engine:?}");
        let out = with_inline(base, inline)
            .run(func, args, engine)
            .map_err(|e| format!("{func} under {here}: {e}"))?;
        match &first {
            None => first = Some((here, out)),
            Some((there, want)) if !want.bit_eq(&out) => {
                return Err(format!(
                    "{func}: {want:?} under {there}, {out:?} under {here}"
                ))
            }
            Some(_) => {}
        }
    }
    Ok(first.expect("at least one run").1)
}

/// Does a function of signature `sig` have derivatives to test: an f64 or
/// array parameter, and only f64 results?
pub fn differentiable(sig: &Signature) -> bool {
    sig.param_types()
        .any(|t| t == Type::F64 || t == Type::Array)
        && sig.results.iter().all(|&t| t == Type::F64)
}

/// Calls `f` on every `// run:` line of every example, with the example's
/// session, where the line is (`path:line`), the line, and its arguments
/// typed by the function's signature.
pub fn for_each_run_line(mut f: impl FnMut(&Session, &str, &RunLine, Vec<Val>)) {
    for path in examples() {
        let source = std::fs::read_to_string(&path).unwrap();
        let session = load(&path);
        for (line, run) in run_lines(&source) {
            let at = format!("{}:{line}", path.display());
            let id = session
                .function(run.func)
                .unwrap_or_else(|e| panic!("{at}: {e}"));
            let args = run_args(&run, &session.module.func(id).sig.params)
                .unwrap_or_else(|e| panic!("{at}: {e}"));
            f(&session, &at, &run, args);
        }
    }
}

/// What a test over every differentiable function saw: the functions it
/// differentiated, the checks it made, the functions it skipped.
#[derive(Debug, Default)]
pub struct Tally {
    pub functions: usize,
    pub checks: usize,
    pub skipped: Vec<String>,
}

/// Calls `f` on every [`differentiable`] function of every example, with
/// the example's path and session; `f` says how many checks it made, or
/// `None` if it skipped the function.
pub fn for_each_differentiable(
    mut f: impl FnMut(&Path, &Session, &Function) -> Option<usize>,
) -> Tally {
    let mut tally = Tally::default();
    for path in examples() {
        let session = load(&path);
        for (_, func) in session.module.iter() {
            if !differentiable(&func.sig) {
                continue;
            }
            match f(&path, &session, func) {
                Some(checks) => {
                    tally.functions += 1;
                    tally.checks += checks;
                }
                None => tally.skipped.push(func.name.clone()),
            }
        }
    }
    tally
}

/// Does `id` reach an `autodiff` request (which needs the AD passes)?
pub fn reaches_autodiff(module: &Module, id: FuncId) -> bool {
    module.reachable_from(id).into_iter().any(|f| {
        let func = module.func(f);
        func.layout
            .insts()
            .any(|(_, i)| func.dfg.inst(i).opcode() == adze_ir::Opcode::Autodiff)
    })
}

const F64S: [f64; 6] = [0.5, -1.25, 2.0, 0.1, 3.7, -0.0];
const I64S: [i64; 5] = [1, 2, 3, 5, 4];

fn arrays() -> [Vec<f64>; 4] {
    [
        vec![0.5, -1.0, 2.0, 1.5],
        vec![1.0, 2.0, 3.0],
        vec![-0.3, 0.7, 1.1, -2.0, 0.9],
        vec![2.0],
    ]
}

/// Deterministic argument lists for a signature: `count` different ones.
/// Integers stay small and positive so that every example terminates.
pub fn inputs(params: &[Type], count: usize) -> Vec<Vec<Val>> {
    (0..count)
        .map(|k| {
            params
                .iter()
                .enumerate()
                .map(|(i, ty)| match ty {
                    // No parameter is an f64x2 (the verifier's rule).
                    Type::F64 | Type::F64x2 => Val::F64(F64S[(k + i) % F64S.len()]),
                    Type::I64 => Val::I64(I64S[(k + 2 * i) % I64S.len()]),
                    Type::Bool => Val::Bool((k + i) % 2 == 0),
                    Type::Array => Val::Array(arrays()[(k + i) % 4].clone()),
                    // Indices: 0 is in range of every array but the empty one.
                    Type::IArray => Val::IArray(vec![0; (k + i) % 3]),
                })
                .collect()
        })
        .collect()
}

/// Whether two runs of the same call agree: both return bit-identical
/// outcomes, or both fail with the same error.
pub fn same_run(a: &Result<Outcome, RunError>, b: &Result<Outcome, RunError>) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => x.bit_eq(y),
        (Err(x), Err(y)) => x == y,
        _ => false,
    }
}

/// A function ready on both engines: each call runs it on the interpreter
/// (the oracle) and on the JIT and panics unless they agree ([`same_run`]).
pub struct OnBoth<'m> {
    id: FuncId,
    interp: adze_interp::Interpreter<'m>,
    jit: adze_jit::Compiled,
    /// What the messages call it (a path and a name, or a program).
    what: String,
}

impl<'m> OnBoth<'m> {
    /// `id` of `module`, compiled with the default options; panics with
    /// `what` if the JIT fails.
    pub fn new(module: &'m Module, id: FuncId, what: String) -> OnBoth<'m> {
        let jit = adze_jit::compile(module, id, &adze_jit::JitOptions::default())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let interp = adze_interp::Interpreter::new(module);
        OnBoth {
            id,
            interp,
            jit,
            what,
        }
    }

    /// The outcome on `args`, the same on both engines.
    #[track_caller]
    pub fn call(&self, args: &[Val]) -> Result<Outcome, RunError> {
        let a = self.interp.call(self.id, args);
        let b = self.jit.call(args);
        assert!(
            same_run(&a, &b),
            "{}({args:?}):\n  interpreter: {a:?}\n  jit:         {b:?}",
            self.what
        );
        a
    }
}

/// The `adze` binary under test, to be run from the repository root.
pub fn adze_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_adze"));
    command.current_dir(root());
    command
}

/// What a run of the `adze` command gave: its exit code (-1 when killed by
/// a signal) and its output as text.
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Asserts that the command exited with `code` (showing its stdout and
    /// stderr otherwise), and gives the output back.
    #[track_caller]
    pub fn exits(self, code: i32) -> Output {
        assert_eq!(self.code, code, "{}{}", self.stdout, self.stderr);
        self
    }

    /// Asserts that the command succeeded and printed `stdout` (showing its
    /// stderr otherwise).
    #[track_caller]
    pub fn assert_prints(&self, stdout: &str) {
        assert_eq!(
            (self.code, self.stdout.as_str()),
            (0, stdout),
            "{}",
            self.stderr
        );
    }
}

/// Runs `adze` with `args` from the repository root.
pub fn adze<S: AsRef<OsStr>>(args: &[S]) -> Output {
    let out = adze_command().args(args).output().expect("adze runs");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The words of `adze run tests/programs/nested_forward.adz --fn d3 --arg
/// x=2` (the third derivative of x³ at 2, which is 6), then `more`.
pub fn nested_d3<'a>(more: &[&'a str]) -> Vec<&'a str> {
    let d3 = [
        "run",
        "tests/programs/nested_forward.adz",
        "--fn",
        "d3",
        "--arg",
        "x=2",
    ];
    [&d3[..], more].concat()
}

/// Runs `func` of the program at `path` (from the root) on both engines;
/// both must fail with the same run-time error, which is returned.
pub fn run_fault(path: &str, func: &str, args: &[Val]) -> RunError {
    let session = load(&root().join(path));
    let mut errs = Vec::new();
    for engine in [Engine::Interp, Engine::Jit] {
        match session.run(func, args, engine) {
            Err(Error::Run(e)) => errs.push(e),
            other => panic!("{func} on {engine:?}: expected a run-time error, got {other:?}"),
        }
    }
    assert_eq!(errs[0], errs[1], "engines disagree on {func}");
    errs.remove(0)
}

/// The activities that differentiate everything `sig` can: each f64 as
/// `scalar`, each array `Dup`, the rest `Const`.
pub fn all_activities(sig: &Signature, scalar: ArgActivity) -> Vec<ArgActivity> {
    sig.params
        .iter()
        .map(|p| match p.ty {
            Type::F64 => scalar,
            Type::Array => ArgActivity::Dup,
            _ => ArgActivity::Const,
        })
        .collect()
}
