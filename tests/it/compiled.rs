//! The compile-once Rust API (SPEC §5b, issue #17): `Program` checks once,
//! `Function` is compiled once and called many times, from many threads,
//! on borrowed buffers; errors are values.

use adze::adze_ir::Val;
use adze::{Arg, DerivativeSpec, Engine, Error, Program, Session};

const SRC: &str = "
fn energy(x: [f64], k: f64) -> f64 {
    var s = 0.0;
    for i in 0..len(x) { s = s + k * sin(x[i]) * x[i]; }
    s
}
fn scale(a: mut [f64], c: f64) { for i in 0..len(a) { a[i] = a[i] * c; } }
fn at(a: [f64], i: i64) -> f64 { a[i] }
fn deep(n: i64, x: f64) -> f64 { if n <= 0 { x } else { sin(deep(n - 1, x)) } }
fn spin(n: i64) -> f64 { var s = 0.0; while s >= 0.0 { s = s + 1.0; } s }
";

fn program() -> Program {
    Program::from_source("compiled.adz", SRC).unwrap()
}

fn f64_of(v: &[Val]) -> f64 {
    match v {
        [Val::F64(x)] => *x,
        other => panic!("{other:?}"),
    }
}

#[test]
fn results_equal_the_session_run_bit_for_bit() {
    let p = program();
    let energy = p.function("energy").unwrap();
    let x: Vec<f64> = (0..100).map(|i| f64::from(i) * 0.37 - 5.0).collect();
    let got = energy.call(&mut [Arg::Array(&x), Arg::F64(1.5)]).unwrap();
    let session = Session::from_source("compiled.adz", SRC).unwrap();
    let want = session
        .run(
            "energy",
            &[Val::Array(x.clone()), Val::F64(1.5)],
            Engine::Interp,
        )
        .unwrap();
    assert_eq!(f64_of(&got).to_bits(), f64_of(&want.results).to_bits());

    // The gradient through the same API, against the session's derivative.
    let grad = p.derivative("energy", &DerivativeSpec::reverse()).unwrap();
    let names: Vec<&str> = grad.params().iter().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ["x", "x.d", "k"]);
    let mut dx = vec![0.0; x.len()];
    let dk = grad
        .call(&mut [Arg::Array(&x), Arg::ArrayMut(&mut dx), Arg::F64(1.5)])
        .unwrap();
    let (module, name) = session
        .derive("energy", adze::adze_ir::Mode::Reverse, 1, &[])
        .unwrap();
    let out = session
        .run_in(
            &module,
            &name,
            &[
                Val::Array(x.clone()),
                Val::Array(vec![0.0; x.len()]),
                Val::F64(1.5),
            ],
            Engine::Interp,
        )
        .unwrap();
    assert_eq!(f64_of(&dk).to_bits(), f64_of(&out.results).to_bits());
    assert_eq!(Val::Array(dx), out.args[1]);
}

#[test]
fn a_mut_slice_is_written_in_place() {
    let scale = program().function("scale").unwrap();
    let mut a = vec![1.0, -2.0, 0.5];
    let before = a.as_ptr();
    for _ in 0..3 {
        scale
            .call(&mut [Arg::ArrayMut(&mut a), Arg::F64(2.0)])
            .unwrap();
    }
    assert_eq!(a, vec![8.0, -16.0, 4.0]);
    assert_eq!(a.as_ptr(), before);
}

#[test]
fn many_threads_call_one_function_at_once() {
    let p = program();
    // A reverse derivative: every call uses the tape, each its own.
    let grad = p.derivative("energy", &DerivativeSpec::reverse()).unwrap();
    // `deep` recurses, so its calls run on a large-stack thread each.
    let deep = p.function("deep").unwrap();
    let want_deep = f64_of(&deep.call(&mut [Arg::I64(500), Arg::F64(0.7)]).unwrap());
    let inputs: Vec<Vec<f64>> = (0..4)
        .map(|t| (0..1000).map(|i| f64::from(i + t) * 0.01).collect())
        .collect();
    let serial: Vec<(f64, Vec<f64>)> = inputs
        .iter()
        .map(|x| {
            let mut dx = vec![0.0; x.len()];
            let dk = grad
                .call(&mut [Arg::Array(x), Arg::ArrayMut(&mut dx), Arg::F64(0.5)])
                .unwrap();
            (f64_of(&dk), dx)
        })
        .collect();
    std::thread::scope(|s| {
        for (x, want) in inputs.iter().zip(&serial) {
            let (grad, deep) = (&grad, &deep);
            s.spawn(move || {
                for _ in 0..20 {
                    let mut dx = vec![0.0; x.len()];
                    let dk = grad
                        .call(&mut [Arg::Array(x), Arg::ArrayMut(&mut dx), Arg::F64(0.5)])
                        .unwrap();
                    assert_eq!(f64_of(&dk).to_bits(), want.0.to_bits());
                    assert_eq!(&dx, &want.1);
                    let d = f64_of(&deep.call(&mut [Arg::I64(500), Arg::F64(0.7)]).unwrap());
                    assert_eq!(d.to_bits(), want_deep.to_bits());
                }
            });
        }
    });
}

/// The message of an error, which must be a value.
fn message(r: Result<Vec<Val>, Error>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_calls_are_errors_not_panics() {
    let p = program();
    let scale = p.function("scale").unwrap();
    let at = p.function("at").unwrap();
    let a = vec![1.0, 2.0];
    let m = message(scale.call(&mut [Arg::F64(1.0)]));
    assert!(m.contains("expected 2 argument(s), got 1"), "{m}");
    let m = message(scale.call(&mut [Arg::F64(1.0), Arg::F64(2.0)]));
    assert!(
        m.contains("argument `a` must be an array, got an f64"),
        "{m}"
    );
    let m = message(scale.call(&mut [Arg::Array(&a), Arg::F64(2.0)]));
    assert!(m.contains("`a` is a `mut` array"), "{m}");
    let m = message(at.call(&mut [Arg::Array(&a), Arg::I64(2)]));
    assert!(
        m.contains("index 2 is out of bounds for array `a` of length 2"),
        "{m}"
    );
    assert!(m.contains("compiled.adz:8:34"), "{m}");
    // The error names the derivative in the user's terms.
    let grad = p.derivative("at", &DerivativeSpec::reverse()).unwrap();
    let mut da = vec![0.0; 2];
    let m = message(grad.call(&mut [Arg::Array(&a), Arg::ArrayMut(&mut da), Arg::I64(5)]));
    assert!(m.contains("derivative of `at`"), "{m}");
    // Unknown functions and parameters are errors at compile time.
    assert!(p.function("nope").is_err());
    assert!(p
        .derivative("energy", &DerivativeSpec::reverse().constant("q"))
        .is_err());
}

#[test]
fn the_time_limit_applies_to_every_call() {
    let mut session = Session::from_source("compiled.adz", SRC).unwrap();
    session.limits.timeout = Some(std::time::Duration::from_millis(50));
    let spin = Program::new(session).function("spin").unwrap();
    for _ in 0..2 {
        let m = message(spin.call(&mut [Arg::I64(0)]));
        assert!(m.contains("time limit"), "{m}");
    }
}

#[test]
fn integer_arrays_are_borrowed_too() {
    let src = "fn gather(x: [f64], idx: [i64]) -> f64 {
    var s = 0.0;
    for k in 0..len(idx) { s = s + x[idx[k]]; }
    s
}
fn fill_squares(out: mut [i64]) { for i in 0..len(out) { out[i] = i * i; } }";
    let p = Program::from_source("ints.adz", src).unwrap();
    let gather = p.function("gather").unwrap();
    let x = [1.0, 10.0, 100.0];
    let idx = [2i64, 2, 0];
    let out = gather
        .call(&mut [Arg::Array(&x), Arg::IArray(&idx)])
        .unwrap();
    assert_eq!(out, vec![Val::F64(201.0)]);
    // The gradient: `idx` is held constant (never differentiated).
    let grad = p.derivative("gather", &DerivativeSpec::reverse()).unwrap();
    let names: Vec<&str> = grad.params().iter().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ["x", "x.d", "idx"]);
    let mut dx = [0.0; 3];
    grad.call(&mut [Arg::Array(&x), Arg::ArrayMut(&mut dx), Arg::IArray(&idx)])
        .unwrap();
    assert_eq!(dx, [1.0, 0.0, 2.0]);
    let fill = p.function("fill_squares").unwrap();
    let mut sq = [7i64; 4];
    fill.call(&mut [Arg::IArrayMut(&mut sq)]).unwrap();
    assert_eq!(sq, [0, 1, 4, 9]);
    let m = message(fill.call(&mut [Arg::IArray(&[1, 2])]));
    assert!(m.contains("`out` is a `mut` array"), "{m}");
    let m = message(gather.call(&mut [Arg::Array(&x), Arg::Array(&x)]));
    assert!(
        m.contains("argument `idx` must be an i64 array, got an array"),
        "{m}"
    );
    let m = message(gather.call(&mut [Arg::Array(&x), Arg::IArray(&[3])]));
    assert!(
        m.contains("index 3 is out of bounds for array `x` of length 3"),
        "{m}"
    );
}

/// The session's JIT settings reach every function compiled from it: each
/// optimisation level and verifier setting gives the same bits, and the
/// disassembly is kept only when asked for.
#[test]
fn jit_settings_apply_to_every_compile() {
    let x: Vec<f64> = (0..50).map(|i| f64::from(i) * 0.21 - 3.0).collect();
    let default = program();
    assert_eq!(default.session().jit, adze::JitSettings::default());
    let want = default.function("energy").unwrap();
    assert!(want.disassembly().is_none());
    let want = f64_of(&want.call(&mut [Arg::Array(&x), Arg::F64(0.5)]).unwrap());
    for opt_level in [
        adze::OptLevel::None,
        adze::OptLevel::Speed,
        adze::OptLevel::Auto,
    ] {
        for verify in [false, true] {
            let mut session = Session::from_source("compiled.adz", SRC).unwrap();
            session.jit = adze::JitSettings {
                opt_level,
                verify,
                disasm: true,
                compile_threads: 1 + usize::from(verify),
            };
            let p = Program::new(session);
            let f = p.function("energy").unwrap();
            assert!(!f.disassembly().unwrap_or_default().is_empty());
            let got = f64_of(&f.call(&mut [Arg::Array(&x), Arg::F64(0.5)]).unwrap());
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{opt_level:?} verify={verify}"
            );
            let grad = p.derivative("energy", &DerivativeSpec::reverse()).unwrap();
            assert!(grad.disassembly().is_some());
        }
    }
}
