//! The optimizer's and the inliner's filetests: every file under
//! `tests/filetests/` (see docs/testing.md for the format).
//!
//! - `; test: opt PASS...` (`.ir`): runs the passes in order (each over
//!   every function; `pipeline` stands for `adze_opt::PIPELINE`). The
//!   output is the non-zero statistics, then the module.
//! - `; test: inline [FN...]` (`.ir` or `.adz`): inlines with the default
//!   policy, every function or only those named. The output is the
//!   lowered input (for `.adz`), the statistics, then the module.
//!
//! An `.ir` input is written as it prints (comments and blank lines aside).
//! Before and after, every module verifies and prints back as it parses.
//! Every function runs before and after on generated inputs and must give
//! the same outcome: for `opt`, bit for bit (NaN payloads, final arrays and
//! errors included) on special values — signed zeros, signaling and quiet
//! NaNs, infinities, `i64::MIN`, empty and short arrays — with every rule
//! region unchanged and its values still defined; for `inline`, up to what
//! inlining changes in an error (see `support::same_error`).
//!
//! Directives of `opt` files beside the filecheck ones:
//! - `; run: @f(ARGS)` runs `@f` on `ARGS` before and after (the same
//!   outcome, bit for bit); `; run: @f(ARGS) == OUTCOME` also asks for that
//!   outcome: the results, `, `-separated, or `error: ` and the trap's
//!   message. Arguments are written as values print: `1.5`, `-0.0`, `NaN`,
//!   `3`, `true`, `[1.0, 2.0]`.
//! - `; inputs: runs` compares on the `run:` lines only (for loops that do
//!   not end on the generated inputs).

use crate::support::{compare_runs, inputs as inline_inputs, reaches_autodiff};
use adze_interp::Interpreter;
use adze_ir::{FuncId, Module, Type, Val, ValueDef};
use adze_opt::{
    inline_functions, inline_module, run_pass, DefaultPolicy, OptStats, Pass, PIPELINE,
};
use adze_test_support::adze::{run_args, same_outcome, well_formed};
use adze_test_support::diff::unified_diff;
use adze_test_support::examples::RunLine;
use adze_test_support::{run_filetests, Config, TestFile};

#[test]
fn filetests() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/filetests");
    let config = Config {
        extensions: &[("ir", ";"), ("adz", "//")],
        directives: &["run", "inputs"],
    };
    run_filetests(dir, &config, |file| match file.command[0].as_str() {
        "opt" => opt(file),
        "inline" => inline(file),
        other => Err(format!("unknown command `{other}` (`opt` or `inline`)")),
    });
}

// ------------------------------------------------------------------ opt

/// The input module: it parses, verifies, round-trips, and is written as
/// it prints (comment lines and blank lines aside), so that the numbers a
/// reader sees in the input are the output's.
fn parse_ir(input: &str) -> Result<Module, String> {
    let module = adze_ir::parse::parse_module(input).map_err(|e| format!("does not parse: {e}"))?;
    well_formed(&module).map_err(|e| format!("the input: {e}"))?;
    let strip = |t: &str| {
        t.lines()
            .map(str::trim_end)
            .filter(|l| !l.is_empty() && !l.trim_start().starts_with(';'))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    };
    let (written, printed) = (strip(input), strip(&module.to_string()));
    if written != printed {
        return Err(format!(
            "the input is not written as it prints (comments and blank lines aside):\n{}",
            unified_diff("input", &written, &printed)
        ));
    }
    Ok(module)
}

fn opt(file: &TestFile) -> Result<String, String> {
    let passes = passes(file.args())?;
    if file.path.extension().is_some_and(|e| e != "ir") {
        return Err("`opt` takes IR (a `.ir` file)".to_string());
    }
    let before = parse_ir(file.input())?;
    let mut after = before.clone();
    let mut stats = OptStats::default();
    let ids: Vec<FuncId> = after.ids().collect();
    for &pass in &passes {
        for &id in &ids {
            stats += run_pass(&mut after, id, pass).map_err(|e| e.to_string())?;
        }
    }
    well_formed(&after).map_err(|e| format!("the output: {e}\n{after}"))?;
    regions_unchanged(&before, &after)?;
    let generic = match file.directives("inputs").last().map(|d| d.value.as_str()) {
        None | Some("generic") => true,
        Some("runs") => false,
        Some(other) => return Err(format!("`inputs: {other}`: `generic` or `runs`")),
    };
    if generic {
        compare(&before, &after)?;
    }
    for d in file.directives("run") {
        run_line(&before, &after, &d.value)
            .map_err(|e| format!("{}:{}: run: {e}", file.name, d.line))?;
    }
    let stats = stats_lines(&stats);
    Ok(if stats.is_empty() {
        after.to_string()
    } else {
        format!("{stats}\n{after}")
    })
}

/// The passes named on the `test:` line.
fn passes(args: &[String]) -> Result<Vec<Pass>, String> {
    if args.is_empty() {
        return Err("`opt` needs passes: `; test: opt gvn dce`, or `pipeline`".to_string());
    }
    let mut out = Vec::new();
    for a in args {
        if a == "pipeline" {
            out.extend(PIPELINE);
            continue;
        }
        let pass = PIPELINE
            .iter()
            .find(|p| p.name().strip_prefix("opt-") == Some(a.as_str()))
            .ok_or_else(|| {
                let mut names: Vec<&str> = PIPELINE.iter().map(|p| &p.name()[4..]).collect();
                names.sort();
                names.dedup();
                format!(
                    "unknown pass `{a}` (passes: {}, pipeline)",
                    names.join(", ")
                )
            })?;
        out.push(*pass);
    }
    Ok(out)
}

/// The non-zero statistics, one pass per line.
fn stats_lines(s: &OptStats) -> String {
    let lines = [
        (format!("gvn: {:?}", s.gvn), s.gvn == Default::default()),
        (format!("mem: {:?}", s.mem), s.mem == Default::default()),
        (format!("dce: {:?}", s.dce), s.dce == Default::default()),
        (format!("licm: {:?}", s.licm), s.licm == Default::default()),
        (format!("promoted: {}", s.promoted), s.promoted == 0),
        (
            format!("indvars: {:?}", s.indvars),
            s.indvars == Default::default(),
        ),
        (
            format!("loopdel: {:?}", s.loopdel),
            s.loopdel == Default::default(),
        ),
        (
            format!("carry: {:?}", s.carry),
            s.carry == Default::default(),
        ),
        (
            format!("version: {:?}", s.version),
            s.version == Default::default(),
        ),
    ];
    lines
        .into_iter()
        .filter(|(_, zero)| !zero)
        .map(|(l, _)| l)
        .collect::<Vec<_>>()
        .join("\n")
}

/// No pass changes a rule region (the AD passes rely on it), and the values
/// a region names stay defined.
fn regions_unchanged(before: &Module, after: &Module) -> Result<(), String> {
    for (id, f) in before.iter() {
        let g = after.func(id);
        if g.regions != f.regions {
            return Err(format!("@{}: the regions changed\n{after}", f.name));
        }
        for (r, data) in g.regions.iter() {
            for &v in data.args.iter().chain(&data.results) {
                let placed = match g.dfg.value_def(v) {
                    ValueDef::Result { inst, .. } => g.layout.inst_block(*inst).is_some(),
                    ValueDef::Param { block, .. } => g.layout.is_block_inserted(*block),
                    ValueDef::Detached => false,
                };
                if !placed {
                    return Err(format!(
                        "@{}: {r} names {v}, which is gone\n{after}",
                        f.name
                    ));
                }
            }
        }
    }
    Ok(())
}

/// A signaling NaN (quiet bit clear, payload 1) and a quiet NaN with a
/// payload: arithmetic quiets the first and keeps the second's payload.
const SNAN: u64 = 0x7ff0_0000_0000_0001;
const QNAN: u64 = 0x7ff8_0000_0000_0abc;

fn special_f64s() -> [f64; 8] {
    [
        -0.0,
        0.0,
        f64::from_bits(SNAN),
        f64::from_bits(QNAN),
        -f64::INFINITY,
        1.5,
        -2.25,
        3.0,
    ]
}

const SPECIAL_I64S: [i64; 6] = [0, -1, i64::MIN, 3, 1, 2];

fn special_arrays() -> [Vec<f64>; 4] {
    [
        vec![],
        vec![1.0, -0.0],
        vec![0.5, f64::from_bits(SNAN), -3.0, 2.0],
        vec![2.0, 4.0, -1.0, 0.25, 8.0, -0.0],
    ]
}

/// Argument lists for `id`: the f64 parameters run through every pair of
/// special values (the first two; further ones follow the first), the
/// others through theirs, shifted against each other.
pub fn special_inputs(module: &Module, id: FuncId) -> Vec<Vec<Val>> {
    let params = &module.func(id).sig.params;
    (0..64)
        .map(|k| {
            params
                .iter()
                .enumerate()
                .map(|(i, p)| match p.ty {
                    Type::F64 | Type::F64x2 => Val::F64(special_f64s()[(k >> (3 * (i % 2))) % 8]),
                    Type::I64 => Val::I64(SPECIAL_I64S[(k + i) % SPECIAL_I64S.len()]),
                    Type::Bool => Val::Bool((k + i) % 2 == 0),
                    Type::Array => Val::Array(special_arrays()[(k + i) % 4].clone()),
                    Type::IArray => Val::IArray(vec![0, 1, (k % 3) as i64]),
                })
                .collect()
        })
        .collect()
}

/// Every function of `before` and `after` gives the same outcome on the
/// interpreter on [`special_inputs`], bit for bit, errors included.
pub fn compare(before: &Module, after: &Module) -> Result<(), String> {
    for (id, f) in before.iter() {
        if f.is_declaration() {
            continue;
        }
        for args in special_inputs(before, id) {
            let a = Interpreter::new(before).call(id, &args);
            let b = Interpreter::new(after).call(id, &args);
            if !same_outcome(&a, &b) {
                return Err(format!(
                    "@{}({args:?}):\n  before: {a:?}\n  after:  {b:?}\n{after}",
                    f.name
                ));
            }
        }
    }
    Ok(())
}

/// A `run:` line: `@f(ARGS)`, optionally `== OUTCOME`.
fn run_line(before: &Module, after: &Module, line: &str) -> Result<(), String> {
    let run = RunLine::parse(line)?;
    let name = run.func;
    let id = before
        .get(name)
        .ok_or_else(|| format!("no function @{name}"))?;
    let args = run_args(&run, &before.func(id).sig.params)?;
    let a = Interpreter::new(before).call(id, &args);
    let b = Interpreter::new(after).call(after.get(name).unwrap(), &args);
    if !same_outcome(&a, &b) {
        return Err(format!("{line}:\n  before: {a:?}\n  after:  {b:?}"));
    }
    let got = match &b {
        Ok(o) => o
            .results
            .iter()
            .map(Val::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        Err(e) => format!("error: {}", e.kind),
    };
    match run.expected {
        Some(w) if w != got => Err(format!("{line} gives `{got}`, not `{w}`")),
        _ => Ok(()),
    }
}

// --------------------------------------------------------------- inline

fn inline(file: &TestFile) -> Result<String, String> {
    let from_source = file.path.extension().is_some_and(|e| e == "adz");
    let before = if from_source {
        let name = file.path.file_name().unwrap().to_string_lossy();
        let m = adze_lang::compile(&name, file.input()).map_err(|d| d.render())?;
        well_formed(&m).map_err(|e| format!("the lowered input: {e}"))?;
        m
    } else {
        parse_ir(file.input())?
    };
    let mut after = before.clone();
    let policy = DefaultPolicy::default();
    let stats = if file.args().is_empty() {
        inline_module(&mut after, &policy)
    } else {
        let ids = file
            .args()
            .iter()
            .map(|n| before.get(n).ok_or_else(|| format!("no function @{n}")))
            .collect::<Result<Vec<_>, _>>()?;
        inline_functions(&mut after, &ids, &policy)
    };
    well_formed(&after).map_err(|e| format!("the output: {e}\n{after}"))?;
    for (id, f) in before.iter() {
        if f.is_declaration() || reaches_autodiff(&before, id) {
            continue;
        }
        for args in inline_inputs(&before, id) {
            compare_runs(&before, &after, &f.name, &args)?;
        }
    }
    let stats = format!("inlined: {}, regions: {}", stats.inlined, stats.regions);
    Ok(if from_source {
        format!("lowered:\n{before}\n{stats}\n{after}")
    } else {
        format!("{stats}\n{after}")
    })
}
