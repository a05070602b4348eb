//! The evals: each compiles its `.adz` program's functions once (at
//! `define`), then converts each `evaluate` input into flat buffers, calls
//! the compiled kernel as many times as the input's `min_runs` and
//! `min_seconds` ask, timing only the call, and converts the result.

use crate::input::{
    bool_of, count_of, f64_of, field, i64_of, rows_json, tensor_f64, tensor_i64, vec_f64, vec_i64,
    InputError,
};
use adze::adze_ir::Val;
use adze::{Arg, Function, Program, Session};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The outcome of one `evaluate`: its output and the timings to report.
pub struct Evaluated {
    /// The `output` field of the response.
    pub output: Value,
    /// The time of each kernel call, in nanoseconds.
    pub evaluate_ns: Vec<u64>,
    /// The time spent converting the input into buffers (reported as
    /// `prepare`, as GradBench's C++ tools do; never part of `evaluate`).
    pub prepare_ns: u64,
}

/// A defined module: the compiled functions of one eval.
pub trait Eval: Send {
    /// Runs `function` on `input`.
    fn evaluate(&self, function: &str, input: &Value) -> Result<Evaluated, String>;
}

/// The `.adz` source of each eval, built into the binary.
pub const SOURCES: &[(&str, &str)] = &[
    ("hello", include_str!("../evals/hello.adz")),
    ("lse", include_str!("../evals/lse.adz")),
    ("llsq", include_str!("../evals/llsq.adz")),
    ("gmm", include_str!("../evals/gmm.adz")),
    ("kmeans", include_str!("../evals/kmeans.adz")),
    ("ode", include_str!("../evals/ode.adz")),
    ("det", include_str!("../evals/det.adz")),
    ("lstm", include_str!("../evals/lstm.adz")),
    ("ba", include_str!("../evals/ba.adz")),
    ("ht", include_str!("../evals/ht.adz")),
    ("saddle", include_str!("../evals/saddle.adz")),
    ("particle", include_str!("../evals/particle.adz")),
];

/// Compiles the functions module `name` needs (`Ok(None)`: no such eval).
pub fn define(name: &str) -> Result<Option<Box<dyn Eval>>, String> {
    let Some(&(_, source)) = SOURCES.iter().find(|(n, _)| *n == name) else {
        return Ok(None);
    };
    let file = format!("{name}.adz");
    let mut session = Session::from_source(&file, source).map_err(|e| describe(&e))?;
    // No tape budget, as GradBench's other tools have none: adze's default
    // (1 GiB) stops det's gradient at ℓ = 11, whose tape takes about 6 GB.
    session.limits.tape_limit = u64::MAX;
    let program = Program::new(session);
    let c = Compiler { program: &program };
    let eval: Box<dyn Eval> = match name {
        "hello" => Box::new(Hello {
            square: c.get("square")?,
            double: c.get("double")?,
        }),
        "lse" => Box::new(Lse {
            primal: c.get("primal")?,
            gradient: c.get("gradient")?,
        }),
        "llsq" => Box::new(Llsq {
            primal: c.get("primal")?,
            gradient: c.get("gradient")?,
        }),
        "gmm" => Box::new(Gmm {
            objective: c.get("objective")?,
            jacobian: c.get("jacobian")?,
        }),
        "kmeans" => Box::new(Kmeans {
            cost: c.get("cost")?,
            dir: c.get("dir")?,
        }),
        "ode" => Box::new(Ode {
            primal: c.get("primal")?,
            gradient: c.get("gradient")?,
        }),
        "det" => Box::new(Det {
            primal: c.get("primal")?,
            gradient: c.get("gradient")?,
        }),
        "lstm" => Box::new(Lstm {
            objective: c.get("objective")?,
            jacobian: c.get("jacobian")?,
        }),
        "ba" => Box::new(Ba {
            objective: c.get("objective")?,
            jacobian: c.get("jacobian")?,
        }),
        "ht" => Box::new(Ht {
            objective: c.get("objective")?,
            jacobian_complicated: c.get("jacobian_complicated")?,
            jacobian_simple: c.get("jacobian_simple")?,
        }),
        "saddle" | "particle" => Box::new(Nested {
            saddle: name == "saddle",
            variants: [c.get("rr")?, c.get("rf")?, c.get("fr")?, c.get("ff")?],
        }),
        _ => unreachable!("every name in SOURCES has an arm"),
    };
    Ok(Some(eval))
}

/// An adze error as one message (a front-end error with its excerpt).
fn describe(e: &adze::Error) -> String {
    match e {
        adze::Error::Diagnostics(d) => d.render(),
        other => other.to_string(),
    }
}

struct Compiler<'a> {
    program: &'a Program,
}

impl Compiler<'_> {
    fn get(&self, name: &str) -> Result<Function, String> {
        self.program
            .function(name)
            .map_err(|e| format!("compiling `{name}`: {}", describe(&e)))
    }
}

/// GradBench's `Runs`: evaluate at least `min_runs` times and until the
/// runs add up to `min_seconds` (both; absent fields mean 1 and 0).
struct Runs {
    min_runs: usize,
    min_time: Duration,
}

impl Runs {
    fn of(input: &Value) -> Result<Runs, InputError> {
        let min_runs = match input.get("min_runs") {
            Some(v) => count_of(v, "min_runs")?.max(1),
            None => 1,
        };
        let min_seconds = match input.get("min_seconds") {
            Some(v) => f64_of(v, "min_seconds")?,
            None => 0.0,
        };
        let min_time = Duration::try_from_secs_f64(min_seconds.max(0.0))
            .map_err(|e| format!("`min_seconds`: {e}"))?;
        Ok(Runs { min_runs, min_time })
    }
}

/// Calls `kernel` as `runs` asks, timing each call alone; returns the last
/// call's results and the times.
fn repeat(
    runs: &Runs,
    mut kernel: impl FnMut() -> Result<Vec<Val>, adze::Error>,
) -> Result<(Vec<Val>, Vec<u64>), String> {
    let mut times = Vec::with_capacity(runs.min_runs);
    let mut total = Duration::ZERO;
    loop {
        let start = Instant::now();
        let result = kernel();
        let took = start.elapsed();
        let result = result.map_err(|e| describe(&e))?;
        times.push(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX));
        total += took;
        if times.len() >= runs.min_runs && total >= runs.min_time {
            return Ok((result, times));
        }
    }
}

/// Prepares an input (timed as `prepare`), then runs a kernel on it.
fn evaluate<P>(
    input: &Value,
    prepare: impl FnOnce(&Value) -> Result<P, InputError>,
    run: impl FnOnce(&mut P, &Runs) -> Result<(Value, Vec<u64>), String>,
) -> Result<Evaluated, String> {
    let start = Instant::now();
    let runs = Runs::of(input)?;
    let mut prepared = prepare(input)?;
    let prepare_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let (output, evaluate_ns) = run(&mut prepared, &runs)?;
    Ok(Evaluated {
        output,
        evaluate_ns,
        prepare_ns,
    })
}

fn unknown(function: &str, known: &[&str]) -> String {
    format!(
        "no function `{function}` in this module (it has: {})",
        known.join(", ")
    )
}

/// The one f64 result of a call.
fn scalar(results: &[Val]) -> Result<f64, String> {
    match results {
        [Val::F64(x)] => Ok(*x),
        other => Err(format!("expected one f64 result, got {other:?}")),
    }
}

/// The `N` results of a call (the parts of a tuple), to take apart.
fn results<const N: usize>(results: Vec<Val>) -> Result<[Val; N], String> {
    let n = results.len();
    results
        .try_into()
        .map_err(|_| format!("expected {N} results, got {n}"))
}

/// An f64 array result, which the caller owns.
fn f64_array(result: Val) -> Result<Vec<f64>, String> {
    match result {
        Val::Array(a) => Ok(a),
        other => Err(format!("expected an f64 array result, got {}", other.ty())),
    }
}

/// An i64 array result, which the caller owns.
fn i64_array(result: Val) -> Result<Vec<i64>, String> {
    match result {
        Val::IArray(a) => Ok(a),
        other => Err(format!("expected an i64 array result, got {}", other.ty())),
    }
}

/// The one result of a call, an f64 array.
fn array(out: Vec<Val>) -> Result<Vec<f64>, String> {
    let [a] = results(out)?;
    f64_array(a)
}

fn len_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

// ---------------------------------------------------------------- hello

struct Hello {
    square: Function,
    double: Function,
}

impl Eval for Hello {
    fn evaluate(&self, function: &str, input: &Value) -> Result<Evaluated, String> {
        let f = match function {
            "square" => &self.square,
            "double" => &self.double,
            _ => return Err(unknown(function, &["square", "double"])),
        };
        evaluate(
            input,
            |v| f64_of(v, "input"),
            |x, runs| {
                let (out, times) = repeat(runs, || f.call(&mut [Arg::F64(*x)]))?;
                Ok((json!(scalar(&out)?), times))
            },
        )
    }
}

/// The `primal` (one f64) and `gradient` (an array as long as the input
/// array) of the evals whose input is one f64 array and, for some, one
/// i64: lse, llsq, det. The arguments are built once, outside the timed
/// calls.
fn primal_and_gradient(
    primal: &Function,
    gradient: &Function,
    function: &str,
    input: &Value,
    prepare: impl FnOnce(&Value) -> Result<(Vec<f64>, Option<i64>), InputError>,
) -> Result<Evaluated, String> {
    match function {
        "primal" => evaluate(input, prepare, |(x, n), runs| {
            let mut args = vec![Arg::Array(x)];
            args.extend(n.map(Arg::I64));
            let (out, times) = repeat(runs, || primal.call(&mut args))?;
            Ok((json!(scalar(&out)?), times))
        }),
        "gradient" => evaluate(input, prepare, |(x, n), runs| {
            let mut args = vec![Arg::Array(x)];
            args.extend(n.map(Arg::I64));
            let (out, times) = repeat(runs, || gradient.call(&mut args))?;
            Ok((json!(array(out)?), times))
        }),
        _ => Err(unknown(function, &["primal", "gradient"])),
    }
}

// ---------------------------------------------------------------- lse

struct Lse {
    primal: Function,
    gradient: Function,
}

impl Eval for Lse {
    fn evaluate(&self, function: &str, input: &Value) -> Result<Evaluated, String> {
        let x = |v: &Value| {
            let x = vec_f64(field(v, "x")?, "x")?;
            if x.is_empty() {
                return Err("`x` must not be empty".to_string());
            }
            Ok(x)
        };
        primal_and_gradient(&self.primal, &self.gradient, function, input, |v| {
            x(v).map(|x| (x, None))
        })
    }
}

// ---------------------------------------------------------------- llsq

struct Llsq {
    primal: Function,
    gradient: Function,
}

impl Eval for Llsq {
    fn evaluate(&self, function: &str, input: &Value) -> Result<Evaluated, String> {
        let prepare = |v: &Value| {
            let x = vec_f64(field(v, "x")?, "x")?;
            let n = i64_of(field(v, "n")?, "n")?;
            if n < 2 {
                return Err(format!("`n` must be at least 2 (it is {n})"));
            }
            Ok((x, n))
        };
        primal_and_gradient(&self.primal, &self.gradient, function, input, |v| {
            prepare(v).map(|(x, n)| (x, Some(n)))
        })
    }
}

// ---------------------------------------------------------------- gmm

struct Gmm {
    objective: Function,
    jacobian: Function,
}

struct GmmInput {
    d: i64,
    k: i64,
    n: i64,
    alpha: Vec<f64>,
    mu: Vec<f64>,
    q: Vec<f64>,
    l: Vec<f64>,
    x: Vec<f64>,
    gamma: f64,
    m: i64,
}

impl GmmInput {
    fn read(v: &Value) -> Result<GmmInput, InputError> {
        let d = count_of(field(v, "d")?, "d")?;
        let k = count_of(field(v, "k")?, "k")?;
        let n = count_of(field(v, "n")?, "n")?;
        if d == 0 || k == 0 {
            return Err("`d` and `k` must be positive".to_string());
        }
        let alpha = vec_f64(field(v, "alpha")?, "alpha")?;
        if alpha.len() != k {
            return Err(format!(
                "`alpha` has {} elements, expected k = {k}",
                alpha.len()
            ));
        }
        let matrix = |name: &str, cols: usize, rows: usize| {
            let t = tensor_f64(field(v, name)?, name)?;
            t.expect(name, &[Some(rows), Some(cols)])?;
            Ok::<_, InputError>(t.data)
        };
        Ok(GmmInput {
            d: len_i64(d),
            k: len_i64(k),
            n: len_i64(n),
            alpha,
            mu: matrix("mu", d, k)?,
            q: matrix("q", d, k)?,
            l: matrix("l", d * (d - 1) / 2, k)?,
            x: matrix("x", d, n)?,
            gamma: f64_of(field(v, "gamma")?, "gamma")?,
            m: i64_of(field(v, "m")?, "m")?,
        })
    }
}

impl Eval for Gmm {
    fn evaluate(&self, function: &str, input: &Value) -> Result<Evaluated, String> {
        match function {
            "objective" => evaluate(input, GmmInput::read, |g, runs| {
                let (out, times) = repeat(runs, || {
                    self.objective.call(&mut [
                        Arg::I64(g.d),
                        Arg::I64(g.k),
                        Arg::I64(g.n),
                        Arg::Array(&g.alpha),
                        Arg::Array(&g.mu),
                        Arg::Array(&g.q),
                        Arg::Array(&g.l),
                        Arg::Array(&g.x),
                        Arg::F64(g.gamma),
                        Arg::I64(g.m),
                    ])
                })?;
                Ok((json!(scalar(&out)?), times))
            }),
            "jacobian" => evaluate(input, GmmInput::read, |g, runs| {
                let (out, times) = repeat(runs, || {
                    self.jacobian.call(&mut [
                        Arg::I64(g.d),
                        Arg::I64(g.k),
                        Arg::I64(g.n),
                        Arg::Array(&g.alpha),
                        Arg::Array(&g.mu),
                        Arg::Array(&g.q),
                        Arg::Array(&g.l),
                        Arg::Array(&g.x),
                        Arg::F64(g.gamma),
                        Arg::I64(g.m),
                    ])
                })?;
                let [dalpha, dmu, dq, dl] = results(out)?;
                let (dalpha, dmu) = (f64_array(dalpha)?, f64_array(dmu)?);
                let (dq, dl) = (f64_array(dq)?, f64_array(dl)?);
                let d = g.d as usize;
                let output = json!({
                    "alpha": dalpha,
                    "mu": rows_json(&dmu, d),
                    "q": rows_json(&dq, d),
                    "l": split_rows(&dl, g.k as usize),
                });
                Ok((output, times))
            }),
            _ => Err(unknown(function, &["objective", "jacobian"])),
        }
    }
}

/// `rows` equal rows of a flat buffer (rows may be empty).
fn split_rows(data: &[f64], rows: usize) -> Value {
    let cols = data.len().checked_div(rows).unwrap_or(0);
    Value::Array(
        (0..rows)
            .map(|r| data[r * cols..(r + 1) * cols].into())
            .collect(),
    )
}

// ---------------------------------------------------------------- kmeans

struct Kmeans {
    cost: Function,
    dir: Function,
}

impl Eval for Kmeans {
    fn evaluate(&self, function: &str, input: &Value) -> Result<Evaluated, String> {
        let prepare = |v: &Value| {
            let points = tensor_f64(field(v, "points")?, "points")?;
            points.expect("points", &[None, None])?;
            let d = points.dim(1);
            let centroids = tensor_f64(field(v, "centroids")?, "centroids")?;
            centroids.expect("centroids", &[None, Some(d)])?;
            if d == 0 || points.dim(0) == 0 || centroids.dim(0) == 0 {
                return Err("`points` and `centroids` must not be empty".to_string());
            }
            Ok((points.data, centroids.data, d))
        };
        match function {
            "cost" => evaluate(input, prepare, |(p, c, d), runs| {
                let (out, times) = repeat(runs, || {
                    self.cost
                        .call(&mut [Arg::Array(p), Arg::Array(c), Arg::I64(len_i64(*d))])
                })?;
                Ok((json!(scalar(&out)?), times))
            }),
            "dir" => evaluate(input, prepare, |(p, c, d), runs| {
                let (out, times) = repeat(runs, || {
                    self.dir
                        .call(&mut [Arg::Array(p), Arg::Array(c), Arg::I64(len_i64(*d))])
                })?;
                Ok((rows_json(&array(out)?, *d), times))
            }),
            _ => Err(unknown(function, &["cost", "dir"])),
        }
    }
}

// ---------------------------------------------------------------- ode

struct Ode {
    primal: Function,
    gradient: Function,
}

impl Eval for Ode {
    fn evaluate(&self, function: &str, input: &Value) -> Result<Evaluated, String> {
        let prepare = |v: &Value| {
            let x = vec_f64(field(v, "x")?, "x")?;
            let s = count_of(field(v, "s")?, "s")?;
            if x.is_empty() || s == 0 {
                return Err("`x` must not be empty and `s` must be positive".to_string());
            }
            Ok((x, len_i64(s)))
        };
        let f = match function {
            "primal" => &self.primal,
            "gradient" => &self.gradient,
            _ => return Err(unknown(function, &["primal", "gradient"])),
        };
        evaluate(input, prepare, |(x, s), runs| {
            let (out, times) = repeat(runs, || f.call(&mut [Arg::Array(x), Arg::I64(*s)]))?;
            Ok((json!(array(out)?), times))
        })
    }
}

// ---------------------------------------------------------------- det

struct Det {
    primal: Function,
    gradient: Function,
}

impl Eval for Det {
    fn evaluate(&self, function: &str, input: &Value) -> Result<Evaluated, String> {
        let prepare = |v: &Value| {
            let a = vec_f64(field(v, "A")?, "A")?;
            let ell = count_of(field(v, "ell")?, "ell")?;
            if ell == 0 || ell > 62 || a.len() != ell * ell {
                return Err(format!(
                    "`A` has {} elements and `ell` is {ell}: expected ell² elements, 1 <= ell <= 62",
                    a.len()
                ));
            }
            Ok((a, len_i64(ell)))
        };
        primal_and_gradient(&self.primal, &self.gradient, function, input, |v| {
            prepare(v).map(|(x, n)| (x, Some(n)))
        })
    }
}

// ---------------------------------------------------------------- lstm

struct Lstm {
    objective: Function,
    jacobian: Function,
}

struct LstmInput {
    main: Vec<f64>,
    extra: Vec<f64>,
    state: Vec<f64>,
    seq: Vec<f64>,
    l: i64,
    c: i64,
    b: i64,
}

impl LstmInput {
    fn read(v: &Value) -> Result<LstmInput, InputError> {
        let main = tensor_f64(field(v, "main_params")?, "main_params")?;
        main.expect("main_params", &[None, None])?;
        let (l2, b4) = (main.dim(0), main.dim(1));
        if l2 == 0 || l2 % 2 != 0 || b4 == 0 || b4 % 4 != 0 {
            return Err(format!(
                "`main_params` is {l2} x {b4}: expected 2l x 4b with l, b positive"
            ));
        }
        let (l, b) = (l2 / 2, b4 / 4);
        let extra = tensor_f64(field(v, "extra_params")?, "extra_params")?;
        extra.expect("extra_params", &[Some(3), Some(b)])?;
        let state = tensor_f64(field(v, "state")?, "state")?;
        state.expect("state", &[Some(2 * l), Some(b)])?;
        let seq = tensor_f64(field(v, "sequence")?, "sequence")?;
        seq.expect("sequence", &[None, Some(b)])?;
        let c = seq.dim(0);
        if c < 2 {
            return Err("`sequence` needs at least 2 characters".to_string());
        }
        Ok(LstmInput {
            main: main.data,
            extra: extra.data,
            state: state.data,
            seq: seq.data,
            l: len_i64(l),
            c: len_i64(c),
            b: len_i64(b),
        })
    }
}

impl Eval for Lstm {
    fn evaluate(&self, function: &str, input: &Value) -> Result<Evaluated, String> {
        match function {
            "objective" => evaluate(input, LstmInput::read, |s, runs| {
                let (out, times) = repeat(runs, || {
                    self.objective.call(&mut [
                        Arg::Array(&s.main),
                        Arg::Array(&s.extra),
                        Arg::Array(&s.state),
                        Arg::Array(&s.seq),
                        Arg::I64(s.l),
                        Arg::I64(s.c),
                        Arg::I64(s.b),
                    ])
                })?;
                Ok((json!(scalar(&out)?), times))
            }),
            "jacobian" => evaluate(input, LstmInput::read, |s, runs| {
                let (out, times) = repeat(runs, || {
                    self.jacobian.call(&mut [
                        Arg::Array(&s.main),
                        Arg::Array(&s.extra),
                        Arg::Array(&s.state),
                        Arg::Array(&s.seq),
                        Arg::I64(s.l),
                        Arg::I64(s.c),
                        Arg::I64(s.b),
                    ])
                })?;
                let [dmain, dextra] = results(out)?;
                let mut dmain = f64_array(dmain)?;
                dmain.extend_from_slice(&f64_array(dextra)?);
                Ok((json!(dmain), times))
            }),
            _ => Err(unknown(function, &["objective", "jacobian"])),
        }
    }
}

// ---------------------------------------------------------------- ba

struct Ba {
    objective: Function,
    jacobian: Function,
}

/// BA's input, replicated as GradBench defines it: camera `cam` n times,
/// point `x` m times, weight `w` and feature `feat` p times, observation i
/// of camera i mod n and point i mod m.
struct BaInput {
    n: i64,
    m: i64,
    cams: Vec<f64>,
    x: Vec<f64>,
    w: Vec<f64>,
    obs: Vec<i64>,
    feats: Vec<f64>,
}

impl BaInput {
    fn read(v: &Value) -> Result<BaInput, InputError> {
        let n = count_of(field(v, "n")?, "n")?;
        let m = count_of(field(v, "m")?, "m")?;
        let p = count_of(field(v, "p")?, "p")?;
        if n == 0 || m == 0 || p < 11 {
            return Err(format!(
                "n = {n}, m = {m}, p = {p}: expected n, m positive and p >= 11"
            ));
        }
        let cam = vec_f64(field(v, "cam")?, "cam")?;
        let x = vec_f64(field(v, "x")?, "x")?;
        let w = f64_of(field(v, "w")?, "w")?;
        let feat = vec_f64(field(v, "feat")?, "feat")?;
        if cam.len() != 11 || x.len() != 3 || feat.len() != 2 {
            return Err("`cam`, `x` and `feat` must have 11, 3 and 2 elements".to_string());
        }
        let mut obs = Vec::with_capacity(2 * p);
        for i in 0..p {
            obs.push(len_i64(i % n));
            obs.push(len_i64(i % m));
        }
        Ok(BaInput {
            n: len_i64(n),
            m: len_i64(m),
            cams: cam.repeat(n),
            x: x.repeat(m),
            w: vec![w; p],
            obs,
            feats: feat.repeat(p),
        })
    }
}

/// The first 30 elements of a list and its last, as GradBench's `ba`
/// transmits the sparse Jacobian.
fn head_and_last<T: Copy + Into<Value>>(v: &[T]) -> Value {
    let mut out: Vec<Value> = v.iter().take(30).map(|&x| x.into()).collect();
    if let Some(&last) = v.last() {
        out.push(last.into());
    }
    Value::Array(out)
}

impl Eval for Ba {
    fn evaluate(&self, function: &str, input: &Value) -> Result<Evaluated, String> {
        match function {
            "objective" => evaluate(input, BaInput::read, |b, runs| {
                let p = b.w.len();
                let (out, times) = repeat(runs, || {
                    self.objective.call(&mut [
                        Arg::Array(&b.cams),
                        Arg::Array(&b.x),
                        Arg::Array(&b.w),
                        Arg::IArray(&b.obs),
                        Arg::Array(&b.feats),
                    ])
                })?;
                let [reproj, werr] = results(out)?;
                let (reproj, werr) = (f64_array(reproj)?, f64_array(werr)?);
                let output = json!({
                    "reproj_error": {"elements": [reproj[0], reproj[1]], "repeated": p},
                    "w_err": {"element": werr[0], "repeated": p},
                });
                Ok((output, times))
            }),
            "jacobian" => evaluate(input, BaInput::read, |b, runs| {
                let (out, times) = repeat(runs, || {
                    self.jacobian.call(&mut [
                        Arg::Array(&b.cams),
                        Arg::Array(&b.x),
                        Arg::Array(&b.w),
                        Arg::IArray(&b.obs),
                        Arg::Array(&b.feats),
                        Arg::I64(b.n),
                        Arg::I64(b.m),
                    ])
                })?;
                let [rows, cols, vals] = results(out)?;
                let (rows, cols, vals) = (i64_array(rows)?, i64_array(cols)?, f64_array(vals)?);
                let output = json!({
                    "rows": head_and_last(&rows),
                    "cols": head_and_last(&cols),
                    "vals": head_and_last(&vals),
                });
                Ok((output, times))
            }),
            _ => Err(unknown(function, &["objective", "jacobian"])),
        }
    }
}

// ---------------------------------------------------------------- ht

struct Ht {
    objective: Function,
    jacobian_complicated: Function,
    jacobian_simple: Function,
}

struct HtInput {
    theta: Vec<f64>,
    us: Vec<f64>,
    parents: Vec<i64>,
    base_rel: Vec<f64>,
    inv_abs: Vec<f64>,
    base_pos: Vec<f64>,
    weights: Vec<f64>,
    triangles: Vec<i64>,
    mirrored: bool,
    corr: Vec<i64>,
    points: Vec<f64>,
}

impl HtInput {
    fn read(v: &Value) -> Result<HtInput, InputError> {
        let theta = vec_f64(field(v, "theta")?, "theta")?;
        if theta.len() != 26 {
            return Err(format!("`theta` has {} elements, expected 26", theta.len()));
        }
        let data = field(v, "data")?;
        let model = field(data, "model")?;
        let parents = vec_i64(field(model, "parents")?, "data.model.parents")?;
        let nb = parents.len();
        if nb + 3 < 25 {
            return Err(format!(
                "the model has {nb} bones: the pose needs at least 22"
            ));
        }
        for (b, &p) in parents.iter().enumerate() {
            if p != -1 && !(0..len_i64(b)).contains(&p) {
                return Err(format!(
                    "bone {b}'s parent is {p}: parents must come before their children"
                ));
            }
        }
        let matrices = |name: &str| {
            let what = format!("data.model.{name}");
            let t = tensor_f64(field(model, name)?, &what)?;
            t.expect(&what, &[Some(nb), Some(4), Some(4)])?;
            Ok::<_, InputError>(t.data)
        };
        let base_rel = matrices("base_relatives")?;
        let inv_abs = matrices("inverse_base_absolutes")?;
        let base_pos = tensor_f64(field(model, "base_positions")?, "data.model.base_positions")?;
        base_pos.expect("data.model.base_positions", &[None, Some(4)])?;
        let nv = base_pos.dim(0);
        let weights = tensor_f64(field(model, "weights")?, "data.model.weights")?;
        weights.expect("data.model.weights", &[Some(nv), Some(nb)])?;
        let triangles = tensor_i64(field(model, "triangles")?, "data.model.triangles")?;
        triangles.expect("data.model.triangles", &[None, Some(3)])?;
        let mirrored = bool_of(field(model, "is_mirrored")?, "data.model.is_mirrored")?;
        let corr = vec_i64(field(data, "correspondences")?, "data.correspondences")?;
        let np = corr.len();
        let points = tensor_f64(field(data, "points")?, "data.points")?;
        points.expect("data.points", &[Some(np), Some(3)])?;
        let us = tensor_f64(field(v, "us")?, "us")?;
        let complicated = !us.data.is_empty();
        if complicated {
            us.expect("us", &[Some(np), Some(2)])?;
        }
        let (targets, what) = if complicated {
            (triangles.dim(0), "triangles")
        } else {
            (nv, "vertices")
        };
        if let Some(bad) = corr.iter().find(|&&c| !(0..len_i64(targets)).contains(&c)) {
            return Err(format!(
                "correspondence {bad} is out of range: the model has {targets} {what}"
            ));
        }
        if complicated {
            if let Some(bad) = triangles
                .data
                .iter()
                .find(|&&t| !(0..len_i64(nv)).contains(&t))
            {
                return Err(format!(
                    "triangle vertex {bad} is out of range: the model has {nv} vertices"
                ));
            }
        }
        Ok(HtInput {
            theta,
            us: us.data,
            parents,
            base_rel,
            inv_abs,
            base_pos: base_pos.data,
            weights: weights.data,
            triangles: triangles.data,
            mirrored,
            corr,
            points: points.data,
        })
    }

    /// The arguments of every `ht` function.
    fn args(&self) -> [Arg<'_>; 11] {
        [
            Arg::Array(&self.theta),
            Arg::Array(&self.us),
            Arg::IArray(&self.parents),
            Arg::Array(&self.base_rel),
            Arg::Array(&self.inv_abs),
            Arg::Array(&self.base_pos),
            Arg::Array(&self.weights),
            Arg::IArray(&self.triangles),
            Arg::Bool(self.mirrored),
            Arg::IArray(&self.corr),
            Arg::Array(&self.points),
        ]
    }
}

impl Eval for Ht {
    fn evaluate(&self, function: &str, input: &Value) -> Result<Evaluated, String> {
        match function {
            "objective" => evaluate(input, HtInput::read, |h, runs| {
                let (out, times) = repeat(runs, || self.objective.call(&mut h.args()))?;
                Ok((json!(array(out)?), times))
            }),
            "jacobian" => evaluate(input, HtInput::read, |h, runs| {
                let complicated = !h.us.is_empty();
                let (f, cols) = if complicated {
                    (&self.jacobian_complicated, 28)
                } else {
                    (&self.jacobian_simple, 26)
                };
                let rows = 3 * h.corr.len();
                let (out, times) = repeat(runs, || f.call(&mut h.args()))?;
                let jac = array(out)?;
                if jac.len() != cols * rows {
                    return Err(format!(
                        "the Jacobian has {} elements, expected {cols} x {rows}",
                        jac.len()
                    ));
                }
                // Column-major to a list of rows.
                let output: Vec<Value> = (0..rows)
                    .map(|r| {
                        (0..cols)
                            .map(|c| jac[c * rows + r])
                            .collect::<Vec<_>>()
                            .into()
                    })
                    .collect();
                Ok((Value::Array(output), times))
            }),
            _ => Err(unknown(function, &["objective", "jacobian"])),
        }
    }
}

// ---------------------------------------------------------------- saddle, particle

/// `saddle` and `particle`: four functions `rr`, `rf`, `fr`, `ff` of one
/// input each.
struct Nested {
    saddle: bool,
    variants: [Function; 4],
}

impl Eval for Nested {
    fn evaluate(&self, function: &str, input: &Value) -> Result<Evaluated, String> {
        let names = ["rr", "rf", "fr", "ff"];
        let Some(i) = names.iter().position(|n| *n == function) else {
            return Err(unknown(function, &names));
        };
        let f = &self.variants[i];
        if self.saddle {
            let prepare = |v: &Value| {
                let start = vec_f64(field(v, "start")?, "start")?;
                if start.len() != 2 {
                    return Err(format!("`start` has {} elements, expected 2", start.len()));
                }
                Ok(start)
            };
            evaluate(input, prepare, |start, runs| {
                let (out, times) = repeat(runs, || f.call(&mut [Arg::Array(start)]))?;
                Ok((json!(array(out)?), times))
            })
        } else {
            let prepare = |v: &Value| f64_of(field(v, "w")?, "w");
            evaluate(input, prepare, |w, runs| {
                let (out, times) = repeat(runs, || f.call(&mut [Arg::F64(*w)]))?;
                Ok((json!(scalar(&out)?), times))
            })
        }
    }
}
