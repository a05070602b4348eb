//! The pipeline: source → IR → (inliner) → (AD) → (optimizer) → execution.
//!
//! The stages after `parsed` are where the inliner, the AD passes and the
//! optimizer plug in; until those passes land (see the open issues) they are
//! the identity, and [`Session::stages`] says so in each stage's header. The
//! verifier runs after every stage in debug builds and tests.

use crate::Error;
use adze_ir::{FuncId, Module, Outcome, Val};
use std::path::Path;

/// Where the inliner runs (SPEC §3). The default is `All`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum InlineSetting {
    None,
    Early,
    Late,
    #[default]
    All,
}

/// A stage of the pipeline that `adze dump` can print.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Stage {
    Parsed,
    Inlined,
    Ad,
    Optimized,
}

impl Stage {
    pub const ALL: [Stage; 4] = [Stage::Parsed, Stage::Inlined, Stage::Ad, Stage::Optimized];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Parsed => "parsed",
            Stage::Inlined => "inlined",
            Stage::Ad => "ad",
            Stage::Optimized => "optimized",
        }
    }
}

/// Which executor runs the code.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// Cranelift native code.
    #[default]
    Jit,
    /// The reference interpreter.
    Interp,
}

/// A checked program, ready to be transformed and run.
#[derive(Debug)]
pub struct Session {
    /// The module as lowered by the front end.
    pub module: Module,
    pub inline: InlineSetting,
    pub limits: adze_ir::Limits,
}

impl Session {
    /// Reads and checks a `.adz` file.
    pub fn from_file(path: &Path) -> Result<Session, Error> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let module = adze_lang::compile_bytes(&path.display().to_string(), &bytes)
            .map_err(Error::Diagnostics)?;
        Session::from_module(module)
    }

    /// Checks `.adz` source text.
    pub fn from_source(file_name: &str, source: &str) -> Result<Session, Error> {
        let module = adze_lang::compile(file_name, source).map_err(Error::Diagnostics)?;
        Session::from_module(module)
    }

    /// Wraps a module (verified first).
    pub fn from_module(module: Module) -> Result<Session, Error> {
        verify(&module, "lower")?;
        Ok(Session {
            module,
            inline: InlineSetting::default(),
            limits: adze_ir::Limits::default(),
        })
    }

    /// The module after every stage, in order. The inliner, AD and
    /// optimizer passes are not written yet, so every stage after `parsed`
    /// is the identity for now (and `adze dump` says so).
    pub fn stages(&self) -> Vec<(Stage, Module)> {
        Stage::ALL
            .iter()
            .map(|&stage| (stage, self.module.clone()))
            .collect()
    }

    /// The module that runs: the last stage.
    pub fn final_module(&self) -> &Module {
        &self.module
    }

    /// Looks a function up by name, with a helpful error.
    pub fn function(&self, name: &str) -> Result<FuncId, Error> {
        function_by_name(&self.module, name)
    }

    /// Runs `name` on `args` through the chosen engine.
    pub fn run(&self, name: &str, args: &[Val], engine: Engine) -> Result<Outcome, Error> {
        let module = self.final_module();
        let id = function_by_name(module, name)?;
        match engine {
            Engine::Interp => {
                Ok(adze_interp::Interpreter::with_limits(module, self.limits).call(id, args)?)
            }
            Engine::Jit => {
                let options = adze_jit::JitOptions {
                    limits: self.limits,
                    ..adze_jit::JitOptions::default()
                };
                let compiled = adze_jit::compile(module, id, &options)?;
                Ok(compiled.call(args)?)
            }
        }
    }
}

/// Finds a user-visible function by name.
pub fn function_by_name(module: &Module, name: &str) -> Result<FuncId, Error> {
    module.get(name).ok_or_else(|| Error::UnknownFunction {
        name: name.to_string(),
        available: module
            .iter()
            .map(|(_, f)| f.name.as_str())
            .filter(|n| !n.contains('.'))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// Runs the verifier where it is cheap enough to always run (debug builds
/// and tests); the error names the pass that produced the module.
fn verify(module: &Module, pass: &str) -> Result<(), Error> {
    if cfg!(debug_assertions) {
        adze_ir::verify::verify_module(module)
            .map_err(|e| Error::Verify(format!("after pass `{pass}`: {e}")))?;
    }
    Ok(())
}
