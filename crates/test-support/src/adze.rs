//! Helpers that need the compiler: the one `compile(src)` of the test
//! suites, parsing, verifying, the print → parse → print round trip, the
//! comparison of floats, and the values of `run:` lines. Behind the `adze`
//! feature (see the crate documentation for why).

use crate::examples::{split_top, RunLine};
use adze_ir::{Module, Outcome, Param, RunError, Type, Val};
use std::fmt::Display;
use std::str::FromStr;

/// `src` compiled as `test.adz`, verified; panics with the rendered
/// diagnostics (and the source) or the verifier's report.
#[track_caller]
pub fn compile(src: &str) -> Module {
    compile_named("test.adz", src)
}

/// [`compile`] with a file name of choice (it appears in the module's
/// `source` line and in diagnostics).
#[track_caller]
pub fn compile_named(file_name: &str, src: &str) -> Module {
    let module = adze_lang::compile(file_name, src)
        .unwrap_or_else(|d| panic!("{}\n--- source\n{src}", d.render()));
    verify(&module);
    module
}

/// `text` parsed as IR; panics with the parse error and the text.
#[track_caller]
pub fn parse(text: &str) -> Module {
    adze_ir::parse::parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Panics with the verifier's report (which prints the failing functions
/// with the errors inline) unless `module` verifies.
#[track_caller]
pub fn verify(module: &Module) {
    if let Err(e) = adze_ir::verify::verify_module(module) {
        panic!("{e}");
    }
}

/// Does `module` verify, and does print → parse → print give the same text?
pub fn well_formed(module: &Module) -> Result<(), String> {
    adze_ir::verify::verify_module(module).map_err(|e| e.to_string())?;
    let text = module.to_string();
    let again = adze_ir::parse::parse_module(&text)
        .map_err(|e| format!("the printed module does not parse: {e}\n{text}"))?
        .to_string();
    if again != text {
        return Err(format!(
            "print -> parse -> print changed the IR:\n{}",
            crate::diff::unified_diff("module", &text, &again)
        ));
    }
    Ok(())
}

/// [`well_formed`], panicking.
#[track_caller]
pub fn check_ir(module: &Module) {
    if let Err(e) = well_formed(module) {
        panic!("{e}");
    }
}

/// The f64s of `vals`; panics on anything else.
pub fn f64s(vals: &[Val]) -> Vec<f64> {
    vals.iter()
        .map(|v| match v {
            Val::F64(x) => *x,
            other => panic!("expected an f64, got {other}"),
        })
        .collect()
}

/// `args + s * dir`, entry by entry, for the f64 and array arguments (the
/// others, and those whose direction is not of their kind, as they are):
/// the points of a finite difference.
pub fn shifted(args: &[Val], dir: &[Val], s: f64) -> Vec<Val> {
    args.iter()
        .zip(dir)
        .map(|(a, d)| match (a, d) {
            (Val::F64(x), Val::F64(t)) => Val::F64(x + s * t),
            (Val::Array(xs), Val::Array(ts)) => {
                Val::Array(xs.iter().zip(ts).map(|(x, t)| x + s * t).collect())
            }
            (a, _) => a.clone(),
        })
        .collect()
}

/// What a derivative is checked against: the f64 results of `out`, then
/// the final contents of every `mut` array argument (of `params`),
/// flattened.
pub fn outputs(out: &Outcome, params: &[Param]) -> Vec<f64> {
    let mut obs: Vec<f64> = out
        .results
        .iter()
        .filter_map(|v| match v {
            Val::F64(x) => Some(*x),
            _ => None,
        })
        .collect();
    for (p, v) in params.iter().zip(&out.args) {
        if let (true, Val::Array(xs)) = (p.mutable, v) {
            obs.extend_from_slice(xs);
        }
    }
    obs
}

/// Relative closeness: `|a - b| <= tol * max(1, |a|, |b|)`; NaN is close
/// to NaN only, an infinity to itself only.
pub fn close(a: f64, b: f64, tol: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= tol * 1f64.max(a.abs()).max(b.abs())
}

/// Panics unless [`close`]`(got, want, tol)`; `what` says which value.
#[track_caller]
pub fn assert_close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(close(got, want, tol), "{what}: got {got:e}, want {want:e}");
}

/// The same bits, NaN payloads included (what the optimizer must keep;
/// compare engines with `Outcome::bit_eq`, under which every NaN is equal).
pub fn same_bits(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => x.to_bits() == y.to_bits(),
        (Val::Array(x), Val::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        _ => a == b,
    }
}

/// The same results and final arguments in the sense of [`same_bits`], or
/// the same error.
pub fn same_outcome(a: &Result<Outcome, RunError>, b: &Result<Outcome, RunError>) -> bool {
    match (a, b) {
        (Ok(p), Ok(q)) => {
            p.results.len() == q.results.len()
                && p.args.len() == q.args.len()
                && p.results
                    .iter()
                    .zip(&q.results)
                    .all(|(x, y)| same_bits(x, y))
                && p.args.iter().zip(&q.args).all(|(x, y)| same_bits(x, y))
        }
        (Err(p), Err(q)) => p == q,
        _ => false,
    }
}

/// A value written as values print (`1.5`, `-0.0`, `NaN`, `inf`, `3`,
/// `true`, `[1.0, 2.0]`, `[]`), read as a `ty`.
pub fn parse_val(text: &str, ty: Type) -> Result<Val, String> {
    fn read<T: FromStr<Err: Display>>(text: &str) -> Result<T, String> {
        text.parse().map_err(|e| format!("`{text}`: {e}"))
    }
    let text = text.trim();
    Ok(match ty {
        Type::F64 => Val::F64(read(text)?),
        Type::I64 => Val::I64(read(text)?),
        Type::Bool => Val::Bool(read(text)?),
        Type::Array => Val::Array(list(text, read)?),
        Type::IArray => Val::IArray(list(text, read)?),
        Type::F64x2 => return Err(format!("`{text}`: no argument is an f64x2")),
    })
}

/// `[a, b, ..]`, each element read by `read`.
fn list<T>(text: &str, read: fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    match text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        Some(inner) => split_top(inner).into_iter().map(read).collect(),
        None => Err(format!("`{text}`: expected `[..]`")),
    }
}

/// The arguments of `run` for the parameters `params`, each read by
/// [`parse_val`]; an error if their numbers differ.
pub fn run_args(run: &RunLine, params: &[Param]) -> Result<Vec<Val>, String> {
    if run.args.len() != params.len() {
        return Err(format!(
            "{} argument(s) for {} parameter(s)",
            run.args.len(),
            params.len()
        ));
    }
    run.args
        .iter()
        .zip(params)
        .map(|(a, p)| parse_val(a, p.ty))
        .collect()
}
