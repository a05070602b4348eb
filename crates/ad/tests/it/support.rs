//! Helpers: derive, run through the interpreter, central finite
//! differences, and expected-output files; compiling, parsing and the
//! checks of IR come from adze-test-support.

use adze_ad::derive_forward;
use adze_interp::Interpreter;
use adze_ir::{ArgActivity, FuncId, Module, RetActivity, Val};
pub use adze_test_support::adze::{
    assert_close, check_ir, compile, f64s, outputs, parse, shifted, verify,
};

/// Compares `text` with `tests/expected/<name>.ir` (`ADZE_BLESS=1`
/// rewrites it).
#[track_caller]
pub fn expect_file(name: &str, text: &str) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/expected");
    adze_test_support::expect_file(std::path::Path::new(dir).join(format!("{name}.ir")), text);
}

pub fn run(module: &Module, f: FuncId, args: &[Val]) -> Vec<Val> {
    Interpreter::new(module)
        .call(f, args)
        .unwrap_or_else(|e| panic!("{e:?}\n{module}"))
        .results
}

pub fn run_outcome(module: &Module, f: FuncId, args: &[Val]) -> adze_ir::Outcome {
    Interpreter::new(module)
        .call(f, args)
        .unwrap_or_else(|e| panic!("{e:?}\n{module}"))
}

pub fn derive(module: &mut Module, name: &str, args: &[ArgActivity], width: usize) -> FuncId {
    let d = derive_forward(module, name, args, RetActivity::Dual, width)
        .unwrap_or_else(|e| panic!("{e}\n{module}"));
    check_ir(module);
    d
}

/// Central finite difference of the f64 results of `f` along the direction
/// `dir` (same shape as `args`: an f64 per f64 argument, an array per array
/// argument; others ignored).
pub fn central_difference(
    module: &Module,
    f: FuncId,
    args: &[Val],
    dir: &[Val],
    h: f64,
) -> Vec<f64> {
    let shift = |s: f64| shifted(args, dir, s);
    let plus = run(module, f, &shift(h));
    let minus = run(module, f, &shift(-h));
    plus.iter()
        .zip(&minus)
        .filter_map(|(p, m)| match (p, m) {
            (Val::F64(p), Val::F64(m)) => Some((p - m) / (2.0 * h)),
            _ => None,
        })
        .collect()
}

/// One `check_against_fd` of a table: the function, the activities, the
/// arguments and the tangent directions.
pub type Row<'a> = (&'a str, &'a [ArgActivity], Vec<Val>, Vec<Val>);

/// `check_against_fd` on every row in turn, on one module, and fails naming
/// each row that failed by its index, function, activities and arguments.
pub fn check_rows(module: &mut Module, rows: &[Row]) {
    let mut failed = Vec::new();
    for (k, (name, acts, args, dirs)) in rows.iter().enumerate() {
        let run = || check_against_fd(module, name, acts, args, dirs);
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).is_err() {
            failed.push(format!("row {k}: {name} {acts:?} at {args:?}"));
        }
    }
    let n = failed.len();
    assert!(
        failed.is_empty(),
        "{n} of {} rows failed: {failed:#?}",
        rows.len()
    );
}

/// What a derivative is checked against: see [`outputs`].
fn observed(module: &Module, f: FuncId, args: &[Val]) -> Vec<f64> {
    outputs(&run_outcome(module, f, args), &module.func(f).sig.params)
}

/// Derives `name` for `acts` (width 1, `ret dual`), runs it at `args` with
/// the tangents `dirs` (an f64 for each `dual`, an array for each `dup`,
/// anything for `const`), and checks
/// - the primal results and final arrays equal the primal's, bit for bit;
/// - the result tangents and the final shadows of `mut` arrays equal central
///   differences of the results and final arrays along `dirs`.
///
/// Returns the derivative's results (primal results, then tangents).
pub fn check_against_fd(
    module: &mut Module,
    name: &str,
    acts: &[ArgActivity],
    args: &[Val],
    dirs: &[Val],
) -> Vec<Val> {
    let f = module.get(name).unwrap();
    let d = derive(module, name, acts, 1);
    let mut dargs = Vec::new();
    let mut fd_dirs = Vec::new();
    for ((a, t), act) in args.iter().zip(dirs).zip(acts) {
        dargs.push(a.clone());
        match act {
            ArgActivity::Dual | ArgActivity::Dup => {
                dargs.push(t.clone());
                fd_dirs.push(t.clone());
            }
            _ => fd_dirs.push(match a {
                Val::F64(_) => Val::F64(0.0),
                Val::Array(xs) => Val::Array(vec![0.0; xs.len()]),
                other => other.clone(),
            }),
        }
    }
    let primal = run_outcome(module, f, args);
    let out = run_outcome(module, d, &dargs);
    let nres = primal.results.len();
    for (p, q) in primal.results.iter().zip(&out.results) {
        assert!(p.bit_eq(q), "{name}: primal result {q} differs from {p}");
    }
    // Final arrays: primal vs derivative's primal arguments.
    let mut k = 0;
    let mut tangents: Vec<f64> = Vec::new();
    let sig = module.func(f).sig.clone();
    let mut shadows = Vec::new();
    for (i, (p, act)) in sig.params.iter().zip(acts).enumerate() {
        assert!(
            primal.args[i].bit_eq(&out.args[k]),
            "{name}: final `{}` differs",
            p.name
        );
        k += 1;
        if matches!(act, ArgActivity::Dual | ArgActivity::Dup) {
            if p.mutable {
                shadows.push(out.args[k].clone());
            }
            k += 1;
        }
    }
    for (v, ty) in out.results[nres..].iter().zip(&sig.results) {
        if *ty == adze_ir::Type::F64 {
            tangents.extend(f64s(std::slice::from_ref(v)));
        }
    }
    // Shadows of `mut` dup arrays, in parameter order, then the FD of the
    // mut arrays: const mut arrays have no shadow, so their FD must be zero.
    let mut shadow_iter = shadows.into_iter();
    for (p, act) in sig.params.iter().zip(acts) {
        if p.mutable {
            match (act, p.ty) {
                (ArgActivity::Dup, _) => match shadow_iter.next() {
                    Some(Val::Array(xs)) => tangents.extend(xs),
                    other => panic!("no shadow: {other:?}"),
                },
                (_, adze_ir::Type::Array) => {
                    let i = sig.params.iter().position(|q| q == p).unwrap();
                    if let Val::Array(xs) = &args[i] {
                        tangents.extend(std::iter::repeat_n(f64::NAN, xs.len()));
                    }
                }
                _ => {}
            }
        }
    }
    let h = 1e-6;
    let shift = |s: f64| shifted(args, &fd_dirs, s);
    let plus = observed(module, f, &shift(h));
    let minus = observed(module, f, &shift(-h));
    assert_eq!(plus.len(), tangents.len(), "{name}: shape");
    for (i, ((p, m), t)) in plus.iter().zip(&minus).zip(&tangents).enumerate() {
        if t.is_nan() {
            continue; // a const mut array: not reported
        }
        let fd = (p - m) / (2.0 * h);
        assert_close(
            *t,
            fd,
            1e-6,
            &format!("{name}: tangent #{i} vs finite differences"),
        );
    }
    out.results
}
