//! IR that does not verify never reaches an engine: the pipeline verifies
//! after every stage and before running (in every build), and the error is
//! an internal error naming the stage (issue #13, item 5).

use crate::support::root;
use adze::{Engine, Error, Session};
use adze_ir::Val;
use std::time::Instant;

/// What the front end produced for `relu` before the fix: a function with
/// a result that returns nothing.
const NO_RESULT: &str = "function @relu(x: f64) -> f64 {
block0(v0: f64):
    return
}
";

#[test]
fn invalid_ir_is_an_internal_error_before_either_engine() {
    let bad = adze_ir::parse::parse_module(NO_RESULT).unwrap();
    let session = Session::from_source("ok.adz", "fn relu(x: f64) -> f64 { max(x, 0.0) }").unwrap();
    for engine in [Engine::Jit, Engine::Interp] {
        match session.run_in(&bad, "relu", &[Val::F64(2.0)], engine) {
            Err(Error::Verify(msg)) => {
                assert!(
                    msg.contains("the IR to be run does not verify (function `relu`)"),
                    "{msg}"
                );
            }
            other => panic!("{engine:?}: {other:?}"),
        }
    }
    // A module from outside: verified when the session is made.
    match Session::from_module(bad.clone()) {
        Err(e @ Error::Verify(_)) => {
            assert!(
                e.to_string()
                    .starts_with("internal error: after pass `lower`"),
                "{e}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Swapped in afterwards: the first stage that verifies names itself.
    let mut swapped = session.clone();
    swapped.module = bad;
    for (inline, stage) in [
        (adze::InlineSetting::All, "after pass `inline (early)`"),
        (adze::InlineSetting::None, "after pass `ad`"),
    ] {
        swapped.inline = inline;
        let err = swapped
            .run("relu", &[Val::F64(2.0)], Engine::Jit)
            .unwrap_err();
        assert!(matches!(err, Error::Verify(_)), "{err:?}");
        assert!(err.to_string().contains(stage), "{err}");
    }
}

/// What verification costs next to the rest of a compile, on the GMM
/// programs. Run with
/// `cargo test --release --test it measure_verification -- --ignored --nocapture`.
#[test]
#[ignore]
fn measure_verification() {
    let gmm = std::fs::read_to_string(root().join("ir-examples/gmm.adz")).unwrap();
    let bench = std::fs::read_to_string(root().join("benches/workloads/gmm.adz")).unwrap();
    for (file, source, funcs) in [
        ("ir-examples/gmm.adz", gmm.clone(), &["gmm_objective"][..]),
        (
            "ir-examples/gmm.adz + benches/workloads/gmm.adz",
            format!("{gmm}\n{bench}"),
            &["bench_grad", "bench_fwd", "bench_hvp"][..],
        ),
    ] {
        let session = Session::from_source(file, &source).unwrap();
        let reps = 20;
        let time = |f: &mut dyn FnMut()| {
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            t.elapsed().as_secs_f64() / reps as f64 * 1e3
        };
        let front = time(&mut || {
            Session::from_source(file, &source).unwrap();
        });
        let lowered = time(&mut || adze_ir::verify::verify_module(&session.module).unwrap());
        println!("{file}: front end (with its verify) {front:.3} ms; verify of the lowered module {lowered:.3} ms");
        for &name in funcs {
            if session.module.get(name).is_none() {
                continue;
            }
            let stages = session.stages(Some(name)).unwrap();
            let mut verify_all = 0.0;
            for (stage, m) in &stages {
                let t = time(&mut || adze_ir::verify::verify_module(m).unwrap());
                verify_all += t;
                println!(
                    "  {name}: verify after {:>9}: {t:.3} ms ({} functions)",
                    stage.name(),
                    m.len()
                );
            }
            let prepare = time(&mut || {
                session.prepare(name).unwrap();
            });
            let module = session.prepare(name).unwrap();
            let id = module.get(name).unwrap();
            let reach = time(&mut || adze::pipeline::verify_reachable(&module, id).unwrap());
            let jit = time(&mut || {
                adze_jit::compile(&module, id, &adze_jit::JitOptions::default()).unwrap();
            });
            println!(
                "  {name}: prepare (all stages, each verified) {prepare:.3} ms, of which verification {verify_all:.3} ms; \
                 verify before the JIT {reach:.3} ms; JIT compile {jit:.3} ms"
            );
        }
    }
}
