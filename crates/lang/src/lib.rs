//! The `.adz` front end: source text to an [`adze_ir::Module`].
//!
//! ```text
//! source ──lexer──▶ tokens ──parser──▶ ast ──check──▶ typed ──lower──▶ IR module
//! ```
//!
//! - [`lexer`]: tokens with byte spans; malformed tokens are diagnostics.
//! - [`parser`]: recursive descent to the [`ast`], with bounded nesting.
//! - [`check`]: name resolution and type checking, producing the [`typed`]
//!   program (implicit conversions applied, operators resolved to opcodes).
//! - [`lower`]: the typed program to SSA IR through `adze_ir::FuncBuilder`.
//! - [`diagnostic`]: errors with spans, rendered with `codespan-reporting`.
//!
//! The language and every decision of this crate are documented in
//! `docs/language.md`. Architecture invariant: the front end never panics on
//! any input; each stage either succeeds or returns diagnostics, and a later
//! stage runs only on the error-free output of the earlier one.
//!
//! ```
//! let module = adze_lang::compile("sq.adz", "fn sq(x: f64) -> f64 { x * x }").unwrap();
//! assert!(module.get("sq").is_some());
//! let err = adze_lang::compile("bad.adz", "fn f() -> f64 { 1.0 + true }").unwrap_err();
//! assert_eq!(err.summary(), "bad.adz:1:17: error: mismatched operand types for `+`: f64 and bool");
//! ```
#![forbid(unsafe_code)]

pub mod ast;
pub mod check;
pub mod coverage;
pub mod diagnostic;
pub mod lexer;
pub mod lower;
pub mod parser;
pub mod sums;
pub mod typed;

pub use coverage::ModeCoverage;
pub use diagnostic::{Diagnostic, Diagnostics, Severity, Span};

/// The stack of the thread the front end runs on. Every stage recurses over
/// the syntax tree, whose depth the parser bounds ([`parser::MAX_DEPTH`]);
/// unoptimized builds need a few MiB at that depth, more than a default test
/// thread has, so, like rustc, the front end runs on a thread of its own.
/// The memory is reserved, not touched.
pub const STACK_SIZE: usize = 64 << 20;

/// Compiles a whole `.adz` file to an IR module (every fn and rule), or
/// returns diagnostics.
pub fn compile(file_name: &str, source: &str) -> Result<adze_ir::Module, Diagnostics> {
    on_big_stack(|| compile_here(file_name, source, false)).map(|(m, _)| m)
}

/// [`compile`], and the [`ModeCoverage`] of the file: its call graph and
/// `autodiff` requests, for the warnings about rules that do not cover a
/// mode the program differentiates in.
pub fn compile_with_coverage(
    file_name: &str,
    source: &str,
) -> Result<(adze_ir::Module, ModeCoverage), Diagnostics> {
    let (module, coverage) = on_big_stack(|| compile_here(file_name, source, true))?;
    let coverage = coverage.unwrap_or_else(|| ModeCoverage::empty(file_name, source));
    Ok((module, coverage))
}

/// Runs `f` on a thread with a [`STACK_SIZE`] stack (or here, on the
/// caller's stack, if no thread can be started).
fn on_big_stack<T: Send>(f: impl Fn() -> T + Sync) -> T {
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("adze-lang".into())
            .stack_size(STACK_SIZE)
            .spawn_scoped(scope, &f);
        match thread {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => f(),
        }
    })
}

type Compiled = (adze_ir::Module, Option<ModeCoverage>);

fn compile_here(file_name: &str, source: &str, coverage: bool) -> Result<Compiled, Diagnostics> {
    let fail = |errors| Diagnostics::new(file_name, source, errors);
    let tokens = lexer::lex(source).map_err(fail)?;
    let file = parser::parse(source, &tokens).map_err(fail)?;
    let program = check::check(&file).map_err(fail)?;
    let coverage = coverage.then(|| {
        let sigs: Vec<_> = file
            .items
            .iter()
            .map(|item| check::signature(item, &mut Vec::new()))
            .collect();
        ModeCoverage::new(file_name, source, &file, &sigs)
    });
    Ok((lower::lower(&program, file_name, source), coverage))
}

/// Same as [`compile`], from bytes: invalid UTF-8 is a diagnostic at the
/// first bad byte.
pub fn compile_bytes(file_name: &str, source: &[u8]) -> Result<adze_ir::Module, Diagnostics> {
    compile(file_name, utf8(file_name, source)?)
}

/// [`compile_with_coverage`] from bytes, as [`compile_bytes`].
pub fn compile_bytes_with_coverage(
    file_name: &str,
    source: &[u8],
) -> Result<(adze_ir::Module, ModeCoverage), Diagnostics> {
    compile_with_coverage(file_name, utf8(file_name, source)?)
}

fn utf8<'a>(file_name: &str, source: &'a [u8]) -> Result<&'a str, Diagnostics> {
    match std::str::from_utf8(source) {
        Ok(text) => Ok(text),
        Err(e) => {
            // The lossy text agrees with the source up to the bad byte, which
            // becomes one U+FFFD (3 bytes) there.
            let text = String::from_utf8_lossy(source);
            let at = e.valid_up_to();
            let span = Span::new(at, at + '\u{fffd}'.len_utf8());
            let bad = source
                .get(at..at + e.error_len().unwrap_or(source.len() - at))
                .unwrap_or_default()
                .iter()
                .map(|b| format!("0x{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ");
            let d = Diagnostic::new(
                span,
                "the file is not valid UTF-8",
                "save the file as UTF-8; identifiers and keywords are ASCII",
            )
            .label(format!("invalid byte sequence {bad}"));
            Err(Diagnostics::new(file_name, &text, vec![d]))
        }
    }
}
