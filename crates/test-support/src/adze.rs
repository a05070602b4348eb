//! Helpers that need the compiler: the one `compile(src)` of the test
//! suites, parsing, verifying, the print → parse → print round trip, and
//! the comparison of floats. Behind the `adze` feature (see the crate
//! documentation for why).

use adze_ir::{Module, Val};

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
