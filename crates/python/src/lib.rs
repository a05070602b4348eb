//! The Python package `adze` (SPEC §5b): its native module `adze._adze`.
//!
//! ```python
//! import adze, numpy as np
//! prog = adze.compile(open("f.adz").read())      # or adze.load("f.adz")
//! f = prog.function("f")                         # compiled once
//! y = f(x=np.ones(3), n=3)                       # keyword or positional
//! g = prog.gradient("f", wrt=["x"])              # reverse mode, compiled once
//! value, grads = g(x=np.ones(3), n=3)            # grads: {name: ndarray or float}
//! j = prog.jvp("f")                              # forward mode
//! value, tangent = j(x=np.ones(3), n=3, tangents={"x": np.ones(3)})
//! print(prog.dump("f", stage="optimized"))
//! ```
//!
//! Everything is a thin layer over the facade crate's compile-once API
//! ([`adze::Program`], [`adze::Function`]) and the derivative the command's
//! `--derive` runs ([`adze::Session::derivative`]); [`plan`] says what
//! each compiled parameter receives, [`convert`] lends NumPy arrays to the
//! compiled code without copies. Calls release the GIL. Every error is an
//! `adze.Error` whose message is the command's one line. `docs/python.md`
//! describes the API and its decisions.
#![forbid(unsafe_code)]

pub mod convert;
pub mod plan;

use adze::adze_ir::{Mode, Type};
use adze::{InlineSetting, Stage};
use convert::Held;
use numpy::PyArray1;
use plan::{Plan, Slot, Source};
use pyo3::create_exception;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

create_exception!(
    adze,
    Error,
    pyo3::exceptions::PyException,
    "An error of adze: in the program (a diagnostic), in a request (an unknown \
     function, a bad argument), or in a run (an index out of bounds, a time limit). \
     `str(e)` is the one line the `adze` command prints; for a diagnostic, \
     `e.details` holds the excerpt of the source the command prints after it."
);

/// An `adze.Error` with this message.
pub fn error(message: String) -> PyErr {
    Error::new_err(message)
}

/// An `adze.Error` for an error of the facade: the command's line (a
/// diagnostic's rendered excerpt in `details`).
fn adze_error(py: Python<'_>, e: adze::Error) -> PyErr {
    let err = Error::new_err(e.to_string());
    if let adze::Error::Diagnostics(d) = &e {
        // Best effort: the message is what matters.
        let _ = err.value(py).setattr("details", d.render());
    }
    err
}

/// Settings of a program: the command's `--inline`, `--no-opt`,
/// `--timeout`, `--max-call-depth`, `--tape-limit`, `--checkpoint`,
/// `--no-checkpoint-fallback`.
fn configure(
    mut session: adze::Session,
    inline: &str,
    optimize: bool,
    timeout: Option<f64>,
    (max_call_depth, tape_limit, checkpoint, checkpoint_fallback): (
        Option<u32>,
        Option<u64>,
        bool,
        bool,
    ),
) -> PyResult<adze::Session> {
    session.inline = InlineSetting::ALL
        .into_iter()
        .find(|s| s.name() == inline)
        .ok_or_else(|| {
            error(format!(
                "`inline={inline}`: expected one of none, early, late, all"
            ))
        })?;
    session.optimize = optimize;
    if let Some(secs) = timeout {
        if secs.is_nan() || secs <= 0.0 {
            return Err(error(format!(
                "`timeout={secs}`: the time limit must be a positive number of seconds"
            )));
        }
        let limit = std::time::Duration::try_from_secs_f64(secs)
            .map_err(|_| error(format!("`timeout={secs}`: too long a time limit")))?;
        session.limits.timeout = Some(limit);
    }
    if let Some(depth) = max_call_depth {
        session.limits.max_call_depth = depth;
    }
    if let Some(bytes) = tape_limit {
        session.limits.tape_limit = bytes;
    }
    session.ad_limits.checkpoint = checkpoint;
    session.checkpoint_fallback = checkpoint_fallback;
    Ok(session)
}

/// Checks `.adz` source text: a [`Program`].
#[pyfunction]
#[pyo3(signature = (source, name = "<string>", *, inline = "all", optimize = true, timeout = None, max_call_depth = None, tape_limit = None, checkpoint = false, checkpoint_fallback = true))]
#[allow(clippy::too_many_arguments)] // keyword arguments of the Python function
fn compile(
    py: Python<'_>,
    source: &str,
    name: &str,
    inline: &str,
    optimize: bool,
    timeout: Option<f64>,
    max_call_depth: Option<u32>,
    tape_limit: Option<u64>,
    checkpoint: bool,
    checkpoint_fallback: bool,
) -> PyResult<Program> {
    let session = py
        .detach(|| adze::Session::from_source(name, source))
        .map_err(|e| adze_error(py, e))?;
    let limits = (max_call_depth, tape_limit, checkpoint, checkpoint_fallback);
    let session = configure(session, inline, optimize, timeout, limits)?;
    Ok(Program {
        program: adze::Program::new(session),
        name: name.to_string(),
    })
}

/// Reads and checks a `.adz` file: a [`Program`].
#[pyfunction]
#[pyo3(signature = (path, *, inline = "all", optimize = true, timeout = None, max_call_depth = None, tape_limit = None, checkpoint = false, checkpoint_fallback = true))]
#[allow(clippy::too_many_arguments)] // keyword arguments of the Python function
fn load(
    py: Python<'_>,
    path: std::path::PathBuf,
    inline: &str,
    optimize: bool,
    timeout: Option<f64>,
    max_call_depth: Option<u32>,
    tape_limit: Option<u64>,
    checkpoint: bool,
    checkpoint_fallback: bool,
) -> PyResult<Program> {
    let session = py
        .detach(|| adze::Session::from_file(&path))
        .map_err(|e| adze_error(py, e))?;
    let limits = (max_call_depth, tape_limit, checkpoint, checkpoint_fallback);
    let session = configure(session, inline, optimize, timeout, limits)?;
    Ok(Program {
        program: adze::Program::new(session),
        name: path.display().to_string(),
    })
}

/// A checked program: compiles its functions and their derivatives.
#[pyclass(frozen, module = "adze")]
struct Program {
    program: adze::Program,
    /// The file name its messages give.
    name: String,
}

#[pymethods]
impl Program {
    /// The function `name`, compiled once: call it with its arguments,
    /// positional or by name.
    fn function(&self, py: Python<'_>, name: &str) -> PyResult<Function> {
        let function = py
            .detach(|| self.program.function(name))
            .map_err(|e| adze_error(py, e))?;
        let plan = Plan::primal(name, function.params(), function.results().len());
        Ok(Function {
            call: Callable { function, plan },
        })
    }

    /// The gradient of `name` (reverse mode, compiled once) with respect
    /// to the parameters in `wrt` (default: every f64 and [f64]
    /// parameter); the others are held constant. A call takes the
    /// function's arguments and returns `(value, grads)`.
    #[pyo3(signature = (name, wrt = None))]
    fn gradient(
        &self,
        py: Python<'_>,
        name: &str,
        wrt: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Gradient> {
        // As `jax.grad`: a gradient is of scalar results. An array result
        // needs its cotangent, which a vector-Jacobian product takes
        // (`autodiff(reverse, f, dup(dy), ..)` in the program).
        let session = self.program.session();
        let id = session.function(name).map_err(|e| adze_error(py, e))?;
        if session
            .module
            .func(id)
            .sig
            .results
            .iter()
            .any(|t| t.is_array())
        {
            return Err(error(format!(
                "`gradient`: `{name}` returns an array; a gradient is of f64 results. Take a vector-Jacobian product in the program instead: `autodiff(reverse, {name}, dup(dy), ..)`"
            )));
        }
        let call = self.derivative(py, name, wrt, Mode::Reverse)?;
        Ok(Gradient { call })
    }

    /// The forward derivative of `name` (compiled once) in the directions
    /// of the parameters in `wrt` (default: every f64 and [f64]
    /// parameter). A call takes the function's arguments and
    /// `tangents={name: value}` (zero for a parameter not given) and
    /// returns `(value, tangent)`.
    #[pyo3(signature = (name, wrt = None))]
    fn jvp(&self, py: Python<'_>, name: &str, wrt: Option<&Bound<'_, PyAny>>) -> PyResult<Jvp> {
        let call = self.derivative(py, name, wrt, Mode::Forward)?;
        if let Some(k) = call.plan.param("tangents") {
            let p = &call.plan.params[k];
            return Err(error(format!(
                "`{name}` has a parameter named `tangents` ({} parameter), the keyword a jvp call takes its tangents by: rename it",
                plan::describe(p)
            )));
        }
        Ok(Jvp { call })
    }

    /// The IR of function `name` (the whole module without one) after
    /// `stage` (`parsed`, `inlined`, `ad`, `optimized`, or `all`): the text
    /// `adze dump FILE --fn NAME --stage STAGE` prints.
    #[pyo3(signature = (name = None, stage = "parsed"))]
    fn dump(&self, py: Python<'_>, name: Option<&str>, stage: &str) -> PyResult<String> {
        let last = match stage {
            "all" => Stage::Optimized,
            _ => Stage::ALL
                .into_iter()
                .find(|s| s.name() == stage)
                .ok_or_else(|| {
                    error(format!(
                        "`stage={stage}`: expected one of parsed, inlined, ad, optimized, all"
                    ))
                })?,
        };
        let session = self.program.session();
        let text = py.detach(|| -> Result<String, adze::Error> {
            if let Some(name) = name {
                session.function(name)?;
            }
            let mut out = String::new();
            for (s, module) in session.stages_until(name, last)? {
                if stage == "all" || stage == s.name() {
                    out += &adze::pipeline::dump_stage(&module, s, name, session.optimize)?;
                }
            }
            Ok(out)
        });
        text.map_err(|e| adze_error(py, e))
    }

    /// The names of the program's functions, in source order.
    #[getter]
    fn functions(&self) -> Vec<String> {
        self.program
            .session()
            .module
            .iter()
            .map(|(_, f)| f.name.clone())
            .filter(|n| !n.contains('.'))
            .collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "<adze.Program {} ({})>",
            self.name,
            self.functions().join(", ")
        )
    }
}

impl Program {
    /// The derivative of `name` in `mode` with respect to `wrt`, compiled.
    fn derivative(
        &self,
        py: Python<'_>,
        name: &str,
        wrt: Option<&Bound<'_, PyAny>>,
        mode: Mode,
    ) -> PyResult<Callable> {
        let wrt: Option<Vec<String>> = match wrt {
            None => None,
            Some(w) if w.is_instance_of::<PyString>() => Some(vec![w.extract()?]),
            Some(w) => Some(w.extract().map_err(|_| {
                error(format!(
                    "`wrt` names parameters: a list of names or one name, not {}",
                    w.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ))
            })?),
        };
        let session = self.program.session();
        let id = session.function(name).map_err(|e| adze_error(py, e))?;
        warn_rules(py, session.derive_warnings(name, mode))?;
        let params = session.module.func(id).sig.params.clone();
        let (wrt, consts) = plan::resolve_wrt(name, &params, wrt.as_deref()).map_err(error)?;
        let compiled = py.detach(|| -> Result<_, adze::Error> {
            let (d, function) = self.program.derivative_with_roles(name, mode, 1, &consts)?;
            let plan = Plan::derivative(name, &params, &d, wrt);
            Ok(Callable { function, plan })
        });
        compiled.map_err(|e| adze_error(py, e))
    }
}

/// The warnings `adze run --derive` prints about rules that do not cover
/// the mode of a derivative, as Python `UserWarning`s: one per
/// diagnostic, its one line (`FILE:LINE:COL: warning: ..`).
fn warn_rules(py: Python<'_>, warnings: Option<adze::adze_lang::Diagnostics>) -> PyResult<()> {
    let Some(w) = warnings else {
        return Ok(());
    };
    let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
    for d in w.errors() {
        let one = adze::adze_lang::Diagnostics::new_like(&w, vec![d.clone()]);
        let line = std::ffi::CString::new(one.summary().replace('\0', " "))
            .map_err(|e| error(format!("internal error: {e}")))?;
        PyErr::warn(py, &category, &line, 2)?;
    }
    Ok(())
}

/// A compiled function and how to call it.
struct Callable {
    function: adze::Function,
    plan: Plan,
}

/// What a call returned: the results, and the adjoint arrays it made.
struct Ran<'py> {
    results: Vec<adze::adze_ir::Val>,
    adjoints: Vec<(usize, Bound<'py, PyArray1<f64>>)>,
}

impl Callable {
    /// Binds the arguments (and tangents), lends them to the compiled code,
    /// runs it with the GIL released.
    fn run<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
        tangents: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Ran<'py>> {
        let plan = &self.plan;
        let mut names = Vec::new();
        let mut values = Vec::new();
        for (k, v) in kwargs.into_iter().flat_map(|d| d.iter()) {
            names.push(k.extract::<String>()?);
            values.push(v);
        }
        let given: Vec<Bound<'py, PyAny>> = plan
            .bind(args.len(), &names)
            .map_err(error)?
            .into_iter()
            .map(|s| match s {
                Source::Positional(i) => args.get_item(i),
                Source::Keyword(j) => Ok(values[j].clone()),
            })
            .collect::<PyResult<_>>()?;
        let tangent = self.tangents(tangents)?;
        let params = self.function.params();
        let mut held: Vec<Held<'py>> = Vec::with_capacity(plan.slots.len());
        let mut lens: Vec<Option<usize>> = vec![None; plan.params.len()];
        let mut adjoints = Vec::new();
        for (slot, p) in plan.slots.iter().zip(params) {
            let name = |k: usize| &plan.params[k].name;
            let func = &plan.func;
            let h = match *slot {
                Slot::Arg(k) => {
                    let h =
                        convert::take(&given[k], p, &format!("`{func}`: argument `{}`", name(k)))?;
                    lens[k] = h.array_len();
                    h
                }
                Slot::Adjoint(k) => {
                    let (array, h) = convert::zeros(py, lens[k].unwrap_or(0))?;
                    adjoints.push((k, array));
                    h
                }
                Slot::Tangent(k) => match &tangent[k] {
                    Some(t) => {
                        let h = convert::take(
                            t,
                            p,
                            &format!("`{func}`: the tangent of `{}`", name(k)),
                        )?;
                        if let (Some(n), Some(m)) = (lens[k], h.array_len()) {
                            if n != m {
                                return Err(error(format!(
                                    "`{func}`: the tangent of `{}` has length {m}, `{}` has length {n}",
                                    name(k),
                                    name(k)
                                )));
                            }
                        }
                        h
                    }
                    None if p.ty == Type::F64 => Held::F64(0.0),
                    None => Held::Owned(vec![0.0; lens[k].unwrap_or(0)]),
                },
                Slot::Seed => Held::F64(1.0),
            };
            held.push(h);
        }
        let mut lent = held
            .iter_mut()
            .map(Held::arg)
            .collect::<PyResult<Vec<_>>>()?;
        let function = &self.function;
        // The arrays stay borrowed (rust-numpy's borrows, in `held`) until
        // the call returns; the compiled code sees only the slices.
        let results = py
            .detach(|| function.call(&mut lent))
            .map_err(|e| adze_error(py, e))?;
        drop(lent);
        drop(held);
        Ok(Ran { results, adjoints })
    }

    /// The tangents given, by parameter: each must name a parameter the
    /// derivative is taken with respect to.
    fn tangents<'py>(
        &self,
        tangents: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Vec<Option<Bound<'py, PyAny>>>> {
        let plan = &self.plan;
        let mut out = vec![None; plan.params.len()];
        let Some(t) = tangents.filter(|t| !t.is_none()) else {
            return Ok(out);
        };
        let dict = t
            .cast::<PyDict>()
            .map_err(|_| error("`tangents` is a dict: {parameter name: tangent}".to_string()))?;
        for (name, value) in dict.iter() {
            let name: String = name
                .extract()
                .map_err(|_| error("`tangents`: the keys are parameter names".to_string()))?;
            let Some(k) = plan.param(&name) else {
                return Err(error(format!(
                    "`tangents`: `{}` has no parameter `{name}` (its parameters: {})",
                    plan.func,
                    plan.names()
                )));
            };
            if !plan.wrt.contains(&k) {
                let wrt: Vec<&str> = plan
                    .wrt
                    .iter()
                    .map(|&k| plan.params[k].name.as_str())
                    .collect();
                return Err(error(format!(
                    "`tangents`: `{name}` is held constant (the derivative is taken with respect to {})",
                    wrt.join(", ")
                )));
            }
            out[k] = Some(value);
        }
        Ok(out)
    }

    /// `f(x: [f64], n: i64) -> f64`.
    fn signature(&self) -> String {
        let params: Vec<String> = self
            .plan
            .params
            .iter()
            .map(|p| format!("{}: {}", p.name, type_text(p.ty, p.mutable)))
            .collect();
        let results: Vec<&str> = self
            .primal_result_types()
            .iter()
            .map(|t| type_text_plain(*t))
            .collect();
        let ret = match results.len() {
            0 => String::new(),
            1 => format!(" -> {}", results[0]),
            _ => format!(" -> ({})", results.join(", ")),
        };
        format!("{}({}){ret}", self.plan.func, params.join(", "))
    }

    fn primal_result_types(&self) -> &[Type] {
        let all = self.function.results();
        &all[..self.plan.primal_results.min(all.len())]
    }

    fn params(&self) -> Vec<(String, String)> {
        self.plan
            .params
            .iter()
            .map(|p| (p.name.clone(), type_text(p.ty, p.mutable)))
            .collect()
    }

    fn wrt(&self) -> Vec<String> {
        self.plan
            .wrt
            .iter()
            .map(|&k| self.plan.params[k].name.clone())
            .collect()
    }
}

fn type_text_plain(ty: Type) -> &'static str {
    match ty {
        Type::F64 => "f64",
        Type::I64 => "i64",
        Type::Bool => "bool",
        Type::Array => "[f64]",
        Type::IArray => "[i64]",
        Type::F64x2 => "f64x2",
    }
}

fn type_text(ty: Type, mutable: bool) -> String {
    if mutable {
        format!("mut {}", type_text_plain(ty))
    } else {
        type_text_plain(ty).to_string()
    }
}

/// A compiled function of a program: call it with its arguments,
/// positional or by name; it returns its result (a tuple for several,
/// None for none). Arrays are NumPy arrays — an array result a new
/// float64 (int64) ndarray of its own; a `mut` array is written in place
/// in the caller's array.
#[pyclass(frozen, module = "adze")]
struct Function {
    call: Callable,
}

#[pymethods]
impl Function {
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let ran = self.call.run(py, args, kwargs, None)?;
        convert::results(py, ran.results)
    }

    /// The function's name.
    #[getter]
    fn name(&self) -> String {
        self.call.plan.func.clone()
    }

    /// The parameters: (name, type) pairs, the types as the language
    /// writes them (`f64`, `mut [f64]`).
    #[getter]
    fn params(&self) -> Vec<(String, String)> {
        self.call.params()
    }

    fn __repr__(&self) -> String {
        format!("<adze.Function {}>", self.call.signature())
    }
}

/// The gradient of a function (reverse mode), compiled once. A call takes
/// the function's arguments and returns `(value, grads)`: the function's
/// result, and a dict from each parameter in `wrt` to its gradient (an
/// ndarray for an array, a float for an f64) — the gradient of the sum of
/// the f64 results.
#[pyclass(frozen, module = "adze")]
struct Gradient {
    call: Callable,
}

#[pymethods]
impl Gradient {
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let plan = &self.call.plan;
        let Ran {
            mut results,
            adjoints,
        } = self.call.run(py, args, kwargs, None)?;
        let primal = plan.primal_results.min(results.len());
        let scalars = results.split_off(primal);
        let grads = PyDict::new(py);
        for &k in &plan.wrt {
            let name = &plan.params[k].name;
            let grad = if let Some((_, a)) = adjoints.iter().find(|(j, _)| *j == k) {
                a.clone().into_any()
            } else {
                let at = plan.adjoints.iter().position(|&j| j == k);
                match at.and_then(|i| scalars.get(i)) {
                    Some(v) => convert::value(py, v.clone())?,
                    None => {
                        return Err(error(format!(
                            "internal error: the gradient of `{}` has no adjoint of `{name}`",
                            plan.func
                        )))
                    }
                }
            };
            grads.set_item(name, grad)?;
        }
        let value = convert::results(py, results)?;
        PyTuple::new(py, [value, grads.into_any()])
    }

    /// The function's name.
    #[getter]
    fn name(&self) -> String {
        self.call.plan.func.clone()
    }

    /// The parameters the gradient is taken with respect to.
    #[getter]
    fn wrt(&self) -> Vec<String> {
        self.call.wrt()
    }

    /// The function's parameters (what a call takes): (name, type) pairs.
    #[getter]
    fn params(&self) -> Vec<(String, String)> {
        self.call.params()
    }

    fn __repr__(&self) -> String {
        format!(
            "<adze.Gradient of {} wrt {}>",
            self.call.signature(),
            self.call.wrt().join(", ")
        )
    }
}

/// The forward derivative of a function (a Jacobian-vector product),
/// compiled once. A call takes the function's arguments and
/// `tangents={name: tangent}` (zero for a parameter in `wrt` not given)
/// and returns `(value, tangent)`: the result and its tangent, shaped
/// alike (None when the results are not all f64). The tangent of a `mut`
/// array is written in place into the array given for it in `tangents`.
#[pyclass(frozen, module = "adze")]
struct Jvp {
    call: Callable,
}

#[pymethods]
impl Jvp {
    #[pyo3(signature = (*args, tangents = None, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        tangents: Option<&Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let plan = &self.call.plan;
        let Ran { mut results, .. } = self.call.run(py, args, kwargs, tangents)?;
        let primal = plan.primal_results.min(results.len());
        let tangent = results.split_off(primal);
        let tangent = if tangent.is_empty() {
            py.None().into_bound(py)
        } else {
            convert::results(py, tangent)?
        };
        let value = convert::results(py, results)?;
        PyTuple::new(py, [value, tangent])
    }

    /// The function's name.
    #[getter]
    fn name(&self) -> String {
        self.call.plan.func.clone()
    }

    /// The parameters whose tangents a call takes.
    #[getter]
    fn wrt(&self) -> Vec<String> {
        self.call.wrt()
    }

    /// The function's parameters (what a call takes): (name, type) pairs.
    #[getter]
    fn params(&self) -> Vec<(String, String)> {
        self.call.params()
    }

    fn __repr__(&self) -> String {
        format!(
            "<adze.Jvp of {} wrt {}>",
            self.call.signature(),
            self.call.wrt().join(", ")
        )
    }
}

/// The native module `adze._adze`; the package `adze` re-exports it.
#[pymodule]
fn _adze(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("Error", m.py().get_type::<Error>())?;
    m.add_class::<Program>()?;
    m.add_class::<Function>()?;
    m.add_class::<Gradient>()?;
    m.add_class::<Jvp>()?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
