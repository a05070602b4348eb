//! Compile once, call many times: [`Program`] and [`Function`].
//!
//! A [`Program`] is checked once. Each function or derivative asked of it
//! runs the pipeline (inliner, AD, optimizer, Cranelift) once and becomes a
//! [`Function`]: native code that is then called any number of times, from
//! any number of threads at once, on the caller's own buffers — borrowed
//! `&[f64]` / `&mut [f64]` slices, never copied — with no pass run again.
//!
//! ```
//! use adze::{Arg, DerivativeSpec, Program};
//! use adze::adze_ir::Val;
//!
//! let src = "fn energy(x: [f64], k: f64) -> f64 {
//!     var s = 0.0;
//!     for i in 0..len(x) { s = s + k * x[i] * x[i]; }
//!     s
//! }";
//! let program = Program::from_source("doc.adz", src).unwrap();
//! let energy = program.function("energy").unwrap();
//! let x = vec![1.0, 2.0, 3.0];
//! assert_eq!(energy.call(&mut [Arg::Array(&x), Arg::F64(0.5)]).unwrap(), vec![Val::F64(7.0)]);
//!
//! // The gradient: `x` is `dup` (its shadow receives ∂E/∂x), `k` active.
//! let grad = program.derivative("energy", &DerivativeSpec::reverse()).unwrap();
//! let mut dx = vec![0.0; 3];
//! let out = grad
//!     .call(&mut [Arg::Array(&x), Arg::ArrayMut(&mut dx), Arg::F64(0.5)])
//!     .unwrap();
//! assert_eq!(dx, vec![1.0, 2.0, 3.0]); // 2·k·x
//! assert_eq!(out, vec![Val::F64(14.0)]); // ∂E/∂k = Σ x²
//! ```
//!
//! Array results come back as owned [`Val::Array`] / [`Val::IArray`]
//! values, a tuple as one value per part:
//!
//! ```
//! use adze::{Arg, Program};
//! use adze::adze_ir::Val;
//!
//! let src = "fn scaled(x: [f64], s: f64) -> (f64, [f64]) {
//!     let y = zeros(len(x));
//!     for i in 0..len(x) { y[i] = s * x[i]; }
//!     (y[0], y)
//! }";
//! let program = Program::from_source("doc.adz", src).unwrap();
//! let scaled = program.function("scaled").unwrap();
//! let out = scaled.call(&mut [Arg::Array(&[1.0, 2.0]), Arg::F64(3.0)]).unwrap();
//! assert_eq!(out, vec![Val::F64(3.0), Val::Array(vec![3.0, 6.0])]);
//! ```

use crate::pipeline::{function_by_name, verify_reachable, Session};
use crate::Error;
use adze_ir::{FuncId, Mode, Module, Param, Type, Val};
pub use adze_jit::Arg;
use std::path::Path;

/// A checked program: the source of compiled [`Function`]s.
#[derive(Clone, Debug)]
pub struct Program {
    /// Shared with the fallbacks of its functions.
    session: std::sync::Arc<Session>,
}

/// Which derivative [`Program::derivative`] compiles: the convention of
/// [`Session::derive`] (every f64 parameter `dual`/`active`, every array
/// `dup`, the parameters named in `consts` and everything else `const`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivativeSpec {
    /// Forward or reverse.
    pub mode: Mode,
    /// Forward mode: tangents per sweep (vector mode); 1 otherwise.
    pub width: usize,
    /// Parameters held constant.
    pub consts: Vec<String>,
}

impl DerivativeSpec {
    /// The forward derivative, one tangent per sweep.
    pub fn forward() -> DerivativeSpec {
        DerivativeSpec {
            mode: Mode::Forward,
            width: 1,
            consts: Vec::new(),
        }
    }

    /// The reverse derivative (the gradient of the sum of the f64 results).
    pub fn reverse() -> DerivativeSpec {
        DerivativeSpec {
            mode: Mode::Reverse,
            ..DerivativeSpec::forward()
        }
    }

    /// The same with `width` tangents per forward sweep.
    pub fn width(mut self, width: usize) -> DerivativeSpec {
        self.width = width;
        self
    }

    /// The same with parameter `name` held constant.
    pub fn constant(mut self, name: impl Into<String>) -> DerivativeSpec {
        self.consts.push(name.into());
        self
    }
}

impl Program {
    /// A program from a checked [`Session`] (its inline setting, limits,
    /// optimizer switch and [`JitSettings`](crate::JitSettings) apply to
    /// every function compiled from it).
    pub fn new(session: Session) -> Program {
        Program {
            session: std::sync::Arc::new(session),
        }
    }

    /// Reads and checks a `.adz` file.
    pub fn from_file(path: &Path) -> Result<Program, Error> {
        Session::from_file(path).map(Program::new)
    }

    /// Checks `.adz` source text.
    pub fn from_source(file_name: &str, source: &str) -> Result<Program, Error> {
        Session::from_source(file_name, source).map(Program::new)
    }

    /// The session behind the program.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Compiles function `name` (with every stage of the pipeline, on what
    /// it reaches).
    pub fn function(&self, name: &str) -> Result<Function, Error> {
        let module = self.session.prepare(name)?;
        let f = self.compile(module, name)?;
        Ok(self.with_fallback(f, Recipe::Function(name.to_string())))
    }

    /// Compiles a derivative of function `name` (see [`DerivativeSpec`]); its
    /// parameters are listed by [`Function::params`] (`x`, `x.t` or
    /// `a`, `a.d`, ..).
    pub fn derivative(&self, name: &str, which: &DerivativeSpec) -> Result<Function, Error> {
        let (module, derived) =
            self.session
                .derive(name, which.mode, which.width, &which.consts)?;
        let f = self.compile(module, &derived)?;
        Ok(self.with_fallback(f, Recipe::Derivative(name.to_string(), which.clone())))
    }

    /// [`Session::derivative`] of `name` (optimized), compiled: what its
    /// parameters and results are, and the function, which runs again
    /// checkpointed past the tape budget as [`Program::derivative`]'s do.
    pub fn derivative_with_roles(
        &self,
        name: &str,
        mode: Mode,
        width: usize,
        consts: &[String],
    ) -> Result<(crate::Derivative, Function), Error> {
        let d = self.session.derivative(name, mode, width, consts, true)?;
        let f = self.compile(d.module.clone(), &d.name)?;
        let recipe = Recipe::Roles {
            name: name.to_string(),
            mode,
            width,
            consts: consts.to_vec(),
        };
        Ok((d, self.with_fallback(f, recipe)))
    }

    /// `f` with the recipe to compile it again checkpointed, for a call
    /// whose tape outgrows its budget ([`Session::checkpoint_fallback`]).
    fn with_fallback(&self, mut f: Function, recipe: Recipe) -> Function {
        if self.session.may_fall_back() {
            f.fallback = Some(Box::new(Fallback {
                program: self.clone(),
                recipe,
                made: std::sync::OnceLock::new(),
            }));
        }
        f
    }

    /// Compiles function `name` of `module`, a module this program's
    /// session made: e.g. one that [`Session::derivative`] returned, whose
    /// [`crate::Derivative::roles`] say what each parameter of the
    /// derivative is (the reverse derivative `adze run --derive reverse`
    /// runs, which returns the primal results before the adjoints).
    pub fn compile(&self, module: Module, name: &str) -> Result<Function, Error> {
        let id = function_by_name(&module, name)?;
        verify_reachable(&module, id)?;
        let compiled = self.session.jit(&module, id)?;
        Ok(Function {
            compiled,
            module,
            id,
            fallback: None,
        })
    }
}

/// How a [`Function`] was asked of its [`Program`].
#[derive(Clone, Debug)]
enum Recipe {
    Function(String),
    Derivative(String, DerivativeSpec),
    Roles {
        name: String,
        mode: Mode,
        width: usize,
        consts: Vec<String>,
    },
}

/// The same function compiled with every loop checkpointed, made on the
/// first call whose tape outgrows its budget.
struct Fallback {
    /// The program the function came from (its session is checkpointed
    /// when the fallback is made).
    program: Program,
    recipe: Recipe,
    made: std::sync::OnceLock<Result<Function, Error>>,
}

impl Fallback {
    fn function(&self) -> Result<&Function, &Error> {
        self.made
            .get_or_init(|| {
                let program = Program::new(self.program.session().checkpointed());
                match &self.recipe {
                    Recipe::Function(name) => program.function(name),
                    Recipe::Derivative(name, spec) => program.derivative(name, spec),
                    Recipe::Roles {
                        name,
                        mode,
                        width,
                        consts,
                    } => program
                        .derivative_with_roles(name, *mode, *width, consts)
                        .map(|(_, f)| f),
                }
            })
            .as_ref()
    }
}

/// A compiled function: call it any number of times, from any number of
/// threads at once (`Send + Sync`).
pub struct Function {
    compiled: adze_jit::Compiled,
    /// The module it was compiled from, to describe its run-time errors in
    /// the user's terms ("the reverse derivative of `f`").
    module: Module,
    /// The function in `module`.
    id: FuncId,
    /// The same compiled checkpointed, for a call whose tape outgrows its
    /// budget (made from [`Program::function`] and
    /// [`Program::derivative`] with [`Session::checkpoint_fallback`] on).
    fallback: Option<Box<Fallback>>,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.compiled.name())
            .field("params", &self.params())
            .field("results", &self.results())
            .finish_non_exhaustive()
    }
}

impl Function {
    /// Runs the function on `args`, one per parameter, in order. Arrays are
    /// the caller's own buffers: an [`Arg::ArrayMut`] holds the array's
    /// final contents afterwards (a `mut` parameter needs one; a read-only
    /// parameter takes an [`Arg::Array`] or an `ArrayMut`). Returns the
    /// results, one [`Val`] per result type of [`Function::results`], in
    /// order (a tuple's parts): a scalar is a `Val::F64`, `Val::I64` or
    /// `Val::Bool`; an array result (`-> [f64]`, `-> [i64]`, an array in a
    /// tuple) is a `Val::Array` or `Val::IArray` that owns its elements, a
    /// buffer of the call's own that is handed over without a copy — never
    /// one of the arguments (a function that returns a parameter, or a view
    /// of one, returns a copy). A run-time error (an index out of bounds,
    /// the time limit, ..) is an [`Error::Run`] with the message the
    /// command line prints.
    ///
    /// A call whose reverse-mode tape outgrows its budget runs again with
    /// every loop checkpointed (compiled on that first call, then kept),
    /// when the function has no `mut` parameter: the first run wrote
    /// nothing the caller sees ([`Session::checkpoint_fallback`]; a
    /// function with one stops with the budget's error, as its arrays may
    /// hold what the first run wrote).
    pub fn call(&self, args: &mut [Arg<'_>]) -> Result<Vec<Val>, Error> {
        let out = self
            .compiled
            .call_args(args)
            .map_err(|e| Error::from(e.describe_in(&self.module)));
        match (&self.fallback, out) {
            (Some(fallback), Err(e))
                if e.is_tape_budget() && !self.params().iter().any(|p| p.mutable) =>
            {
                // The budget's error stands if the checkpointed build fails.
                match fallback.function() {
                    Ok(f) => f.call(args),
                    Err(_) => Err(e),
                }
            }
            (_, out) => out,
        }
    }

    /// The parameters, in call order (for a derivative: with the shadows
    /// and tangents the derivative takes).
    pub fn params(&self) -> &[Param] {
        &self.module.func(self.id).sig.params
    }

    /// The types of the results, in order (`Type::Array` / `Type::IArray`
    /// for an array result).
    pub fn results(&self) -> &[Type] {
        &self.module.func(self.id).sig.results
    }

    /// The function's name in the compiled module (a derivative's is
    /// generated, like `f.rev.active`).
    pub fn name(&self) -> &str {
        self.compiled.name()
    }

    /// The machine code of every function compiled for this one (Cranelift's
    /// listing after register allocation), if the session's
    /// [`JitSettings::disasm`](crate::JitSettings::disasm) was on; `None`
    /// otherwise.
    pub fn disassembly(&self) -> Option<&str> {
        self.compiled.disassembly()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_the_derivative_that_returns_the_primal_too() {
        let src = "fn f(x: [f64], k: f64) -> f64 { k * x[0] * x[1] }";
        let program = Program::from_source("t.adz", src).unwrap();
        let d = program
            .session()
            .derivative("f", Mode::Reverse, 1, &[], true)
            .unwrap();
        let f = program.compile(d.module, &d.name).unwrap();
        // (x, x.d, k, seed) -> (f, d/dk)
        assert_eq!(f.params().len(), 4);
        let x = [2.0, 3.0];
        let mut dx = [0.0; 2];
        let out = f
            .call(&mut [
                Arg::Array(&x),
                Arg::ArrayMut(&mut dx),
                Arg::F64(0.5),
                Arg::F64(1.0),
            ])
            .unwrap();
        assert_eq!(out, vec![Val::F64(3.0), Val::F64(6.0)]);
        assert_eq!(dx, [1.5, 1.0]);
    }

    #[test]
    fn a_compiled_function_is_send_and_sync() {
        fn shared<T: Send + Sync>() {}
        shared::<Function>();
        shared::<Program>();
    }
}
