//! Issue #14, the rows that can be tested without timing: no aborts at
//! depth, limits that count what they say, allocation failures as errors,
//! and only what `--fn` reaches transformed. (Times are in the scaling
//! benchmark, never in a test.)

use crate::support::root;
use adze::{Engine, InlineSetting, Session};
use adze_ir::{Mode, Val};

/// `c_i(x) = c_{i-1}(x) * 0.999 + x * 0.001`, `f` calling the last.
fn chain(n: usize) -> String {
    let mut s = String::from("fn c0(x: f64) -> f64 { x * 1.001 }\n");
    for i in 1..n {
        s.push_str(&format!(
            "fn c{i}(x: f64) -> f64 {{ c{}(x) * 0.999 + x * 0.001 }}\n",
            i - 1
        ));
    }
    s.push_str(&format!("fn f(x: f64) -> f64 {{ c{}(x) }}\n", n - 1));
    s
}

/// The chain's value and derivative at 1, by the recurrence.
fn chain_values(n: usize) -> (f64, f64) {
    let (mut v, mut d) = (1.001, 1.001);
    for _ in 1..n {
        v = v * 0.999 + 0.001;
        d = d * 0.999 + 0.001;
    }
    (v, d)
}

#[test]
fn a_deep_chain_of_calls_differentiates_without_overflowing_the_stack() {
    // 3000 distinct functions, not inlined: the reverse pass builds each
    // callee's derivative inside its caller's, 3000 deep (this aborted
    // with a stack overflow at 2000).
    let n = 3000;
    let mut s = Session::from_source("chain.adz", &chain(n)).unwrap();
    s.inline = InlineSetting::None;
    let (module, d) = s.derive("f", Mode::Reverse, 1, &[]).unwrap();
    let out = s
        .run_in(&module, &d, &[Val::F64(1.0)], Engine::Interp)
        .unwrap();
    let Val::F64(g) = out.results[0] else {
        panic!("{out:?}")
    };
    let (_, want) = chain_values(n);
    assert!((g - want).abs() < 1e-12, "{g} vs {want}");
}

#[test]
fn the_nesting_limit_counts_derivatives_of_derivatives_not_calls() {
    // 80 functions in a chain, never inlined, one first-order derivative:
    // nesting 1, far below the limit of 64 (this failed with "nest more
    // than 64 deep").
    let mut src = String::new();
    src.push_str("#[inline(never)]\nfn c0(x: f64) -> f64 { sin(x) }\n");
    for i in 1..80 {
        src.push_str(&format!(
            "#[inline(never)]\nfn c{i}(x: f64) -> f64 {{ c{}(x) + x }}\n",
            i - 1
        ));
    }
    src.push_str("fn g(x: f64) -> f64 { autodiff(reverse, c79, active, active(x)) }\n");
    let s = Session::from_source("nest.adz", &src).unwrap();
    let out = s.run("g", &[Val::F64(0.5)], Engine::Jit).unwrap();
    let Val::F64(g) = out.results[0] else {
        panic!("{out:?}")
    };
    assert!((g - (0.5f64.cos() + 79.0)).abs() < 1e-12, "{g}");
    // A real tower of derivatives still stops at the limit.
    let mut deep = String::from("fn d0(x: f64) -> f64 { x * x }\n");
    for i in 1..6 {
        deep.push_str(&format!(
            "fn d{i}(x: f64) -> f64 {{ let (p, t) = autodiff(forward, d{}, dual, dual(x, 1.0)); t }}\n",
            i - 1
        ));
    }
    let mut s = Session::from_source("tower.adz", &deep).unwrap();
    s.ad_limits.max_nesting = 3;
    let e = s.run("d5", &[Val::F64(0.5)], Engine::Interp).unwrap_err();
    assert!(e.to_string().contains("nest more than 3 deep"), "{e}");
}

#[test]
fn the_call_depth_limit_is_reached_only_by_recursion() {
    // A chain of 1500 calls is no recursion: it runs under the default
    // limit (100 000; this failed at 1000).
    let n = 1500;
    let mut s = Session::from_source("chain.adz", &chain(n)).unwrap();
    s.inline = InlineSetting::None;
    let (v, _) = chain_values(n);
    for engine in [Engine::Jit, Engine::Interp] {
        let out = s.run("f", &[Val::F64(1.0)], engine).unwrap();
        let Val::F64(got) = out.results[0] else {
            panic!("{out:?}")
        };
        assert!((got - v).abs() < 1e-12);
    }
    // A recursion that does not end is stopped, with the function's name.
    let s = Session::from_source("rec.adz", "fn r(n: i64) -> i64 { r(n + 1) }").unwrap();
    for engine in [Engine::Jit, Engine::Interp] {
        let e = s.run("r", &[Val::I64(0)], engine).unwrap_err().to_string();
        assert!(e.contains("`r`") && e.contains("100000"), "{e}");
    }
}

#[test]
fn an_allocation_that_fails_is_an_error_not_an_abort() {
    // Under a 1 GiB address-space limit, `zeros(2^28)` (2 GiB, the largest
    // length allowed) cannot be had: a one-line error and exit 1.
    let file = root().join("tests/programs/big_alloc.adz");
    for engine in ["jit", "interp"] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -v 1000000 && exec '{}' run '{}' --fn big --arg n=268435456 --engine {engine}",
                env!("CARGO_BIN_EXE_adze"),
                file.display()
            ))
            .output()
            .expect("sh runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{engine}: {err}");
        assert_eq!(
            err,
            format!(
                "error: in function `big` at {}:3:33: out of memory: cannot allocate an array of 268435456 elements (2048 MiB)\n",
                file.display()
            ),
            "{engine}"
        );
    }
}

#[test]
fn only_what_the_function_reaches_is_transformed() {
    // A function that cannot be differentiated (its request asks for too
    // deep a tower) does not stop another one from running.
    let src = "fn ok(x: f64) -> f64 { x + 1.0 }
               fn d0(x: f64) -> f64 { x * x }
               fn d1(x: f64) -> f64 { autodiff(reverse, d0, active, active(x)) }
               fn d2(x: f64) -> f64 { autodiff(reverse, d1, active, active(x)) }";
    let mut s = Session::from_source("reach.adz", src).unwrap();
    s.ad_limits.max_nesting = 1;
    assert!(s.run("d2", &[Val::F64(1.0)], Engine::Interp).is_err());
    let out = s.run("ok", &[Val::F64(1.0)], Engine::Jit).unwrap();
    assert_eq!(out.results, vec![Val::F64(2.0)]);
    // The prepared module of `ok` inlined and optimized nothing else:
    // `d1` is still as parsed.
    let m = s.prepare("ok").unwrap();
    let d1 = m.get("d1").unwrap();
    assert!(m
        .func(d1)
        .layout
        .insts()
        .any(|(_, i)| m.func(d1).dfg.inst(i).opcode() == adze_ir::Opcode::Autodiff));
}

/// `n` nested loops of trip count 1 carrying one `var`, and its gradient.
fn nested_loops(n: usize) -> String {
    let open: String = (0..n).map(|k| format!("for i{k} in 0..1 {{ ")).collect();
    format!(
        "fn f(x: f64) -> f64 {{ var s = x; {open}s = s * 1.01; {} s }}\n\
         fn d(x: f64) -> f64 {{ autodiff(reverse, f, active, active(x)) }}\n",
        "} ".repeat(n)
    )
}

#[test]
fn promoted_adjoints_of_nested_loops_take_no_parameter_per_enclosing_loop() {
    // Reverse mode keeps the adjoints that cross loops in slots that the
    // optimizer promotes to SSA values. An adjoint slot of the innermost
    // of `n` nested loops is live through all of them, reset to -0.0 at
    // each level: the promotion used to give it a block parameter at every
    // enclosing header (59 parameters on one block at n = 30: quadratic
    // code, and quadratic time in the JIT's register allocator). Redundant
    // cycles of parameters are removed now, so the widest block stays
    // narrow whatever the depth.
    for n in [10, 30] {
        let s = Session::from_source("nested.adz", &nested_loops(n)).unwrap();
        let m = s.prepare("d").unwrap();
        let widest = m
            .iter()
            .flat_map(|(_, f)| {
                f.layout
                    .blocks()
                    .iter()
                    .map(move |&b| f.dfg.block_params(b).len())
            })
            .max()
            .unwrap();
        assert!(widest <= 4, "n = {n}: a block with {widest} parameters");
        let out = s.run("d", &[Val::F64(1.0)], Engine::Jit).unwrap();
        assert_eq!(out.results, vec![Val::F64(1.01)]);
    }
}
