//! adze: a compiler-style automatic-differentiation system.
//!
//! This crate is the facade over the pipeline and the home of the `adze`
//! command: `.adz` source → [`adze_lang`] (front end) → [`adze_ir`] module →
//! passes → [`adze_jit`] (Cranelift) or [`adze_interp`] (the reference
//! interpreter).
//!
//! ```
//! use adze::{Engine, Session};
//! use adze_ir::Val;
//! let session = Session::from_source("doc.adz", "fn sq(x: f64) -> f64 { x * x }").unwrap();
//! let out = session.run("sq", &[Val::F64(3.0)], Engine::Jit).unwrap();
//! assert_eq!(out.results, vec![Val::F64(9.0)]);
//! ```
//!
//! Derivatives without `autodiff` in the source: [`Session::derive`] adds the
//! forward (any vector width) or reverse derivative of a function, which
//! then runs on the JIT like any function.
//!
//! ```
//! use adze::{Engine, Session};
//! use adze_ir::{Mode, Val};
//! let src = "fn f(x: f64, y: f64) -> f64 { x * sin(y) }";
//! let session = Session::from_source("doc.adz", src).unwrap();
//! // Forward, two tangents in one sweep: (x, x.t1, x.t2, y, y.t1, y.t2).
//! let (module, name) = session.derive("f", Mode::Forward, 2, &[]).unwrap();
//! let args = [1.0, 1.0, 0.0, 2.0, 0.0, 1.0].map(Val::F64);
//! let out = session.run_in(&module, &name, &args, Engine::Jit).unwrap();
//! assert_eq!(out.results[1], Val::F64(2f64.sin())); // ∂f/∂x
//! assert_eq!(out.results[2], Val::F64(2f64.cos())); // ∂f/∂y
//! // Reverse: the gradient, both adjoints at once.
//! let (module, name) = session.derive("f", Mode::Reverse, 1, &[]).unwrap();
//! let out = session.run_in(&module, &name, &[Val::F64(1.0), Val::F64(2.0)], Engine::Jit).unwrap();
//! assert_eq!(out.results, vec![Val::F64(2f64.sin()), Val::F64(2f64.cos())]);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod args;
pub mod check_inline;
pub mod check_rules;
pub mod compiled;
pub mod data;
pub mod html;
pub mod npy;
pub mod pipeline;

pub use adze_ad;
pub use adze_interp;
pub use adze_ir;
pub use adze_jit;
pub use adze_lang;
pub use compiled::{Arg, DerivativeSpec, Function, Program};
pub use pipeline::{
    Derivative, Engine, InlineSetting, JitSettings, OptLevel, Role, Session, Stage,
};

use std::path::PathBuf;

/// Everything that can go wrong between a file name and a result.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The source file could not be read.
    #[error("cannot read `{path}`: {source}")]
    Io {
        /// The file, as given.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// Front-end diagnostics; `Display` is the one-line summary, and
    /// [`adze_lang::Diagnostics::render`] gives the excerpts.
    #[error("{0}")]
    Diagnostics(adze_lang::Diagnostics),
    /// The function asked for is not in the module.
    #[error("no function named `{name}` in this program (it has: {available})")]
    UnknownFunction {
        /// The name asked for.
        name: String,
        /// The module's function names without a `.` (the user's, not the
        /// generated ones), comma-separated.
        available: String,
    },
    /// A bad request from the caller (an option of the command, or an
    /// argument of the Rust API such as a `const` naming no parameter); the
    /// message says what is wrong.
    #[error("{0}")]
    Argument(String),
    /// The program stopped with a run-time error (an executor's trap).
    #[error("{0}")]
    Run(#[from] adze_ir::RunError),
    /// The JIT could not compile the code.
    #[error("{0}")]
    Jit(#[from] adze_jit::JitError),
    /// An AD pass refused a derivative request.
    #[error("{0}")]
    Ad(#[from] adze_ad::AdError),
    /// A pass produced IR that does not verify: a bug in adze.
    #[error("internal error: {0}")]
    Verify(String),
}

impl Error {
    /// Is this the run-time error of a reverse-mode tape that outgrew its
    /// budget (`--tape-limit`)?
    pub fn is_tape_budget(&self) -> bool {
        matches!(self, Error::Run(r) if matches!(r.kind, adze_ir::TrapKind::TapeLimitExceeded { .. }))
    }
}
