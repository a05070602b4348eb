//! Programs written from outside the project (issue #13) that broke the
//! promise: each must give the same bits under the four inline settings,
//! both engines and the optimizer on and off, and the value worked out by
//! hand. Every test here failed on the main of 2026-12-01.

use adze::{Engine, InlineSetting, Session};
use adze_ir::{Mode, Val};

/// Every setting: (inline, engine, optimize).
fn settings() -> Vec<(InlineSetting, Engine, bool)> {
    let mut out = Vec::new();
    for inline in InlineSetting::ALL {
        for engine in [Engine::Jit, Engine::Interp] {
            for optimize in [true, false] {
                out.push((inline, engine, optimize));
            }
        }
    }
    out
}

fn session(src: &str, inline: InlineSetting, optimize: bool) -> Session {
    let mut s = Session::from_source("outsider.adz", src).expect("the program checks");
    s.inline = inline;
    s.optimize = optimize;
    s
}

/// What `run` gives under every setting: the f64 results, the same bits
/// everywhere (checked), returned once.
fn everywhere(
    src: &str,
    what: &str,
    run: impl Fn(&Session, Engine) -> Result<adze_ir::Outcome, adze::Error>,
) -> Vec<f64> {
    let mut first: Option<(Vec<u64>, String)> = None;
    for (inline, engine, optimize) in settings() {
        let s = session(src, inline, optimize);
        let here = format!("{inline:?} {engine:?} opt={optimize}");
        let out = run(&s, engine).unwrap_or_else(|e| panic!("{what} under {here}: {e}"));
        let bits: Vec<u64> = out
            .results
            .iter()
            .map(|v| match v {
                Val::F64(x) => x.to_bits(),
                other => panic!("a non-f64 result {other:?}"),
            })
            .collect();
        match &first {
            None => first = Some((bits, here)),
            Some((b, there)) => assert_eq!(
                &bits,
                b,
                "{what}: {here} gives {:?}, {there} gives {:?}",
                bits.iter().map(|&x| f64::from_bits(x)).collect::<Vec<_>>(),
                b.iter().map(|&x| f64::from_bits(x)).collect::<Vec<_>>()
            ),
        }
    }
    first
        .expect("at least one setting")
        .0
        .into_iter()
        .map(f64::from_bits)
        .collect()
}

/// `name(args)` under every setting (see [`everywhere`]).
fn run_everywhere(src: &str, name: &str, args: &[Val]) -> Vec<f64> {
    everywhere(src, name, |s, engine| s.run(name, args, engine))
}

/// The reverse derivative of `name` (every f64 parameter active, as
/// `adze run --derive reverse`) at `args`, under every setting.
fn gradient_everywhere(src: &str, name: &str, args: &[Val]) -> Vec<f64> {
    everywhere(src, name, |s, engine| {
        let (module, d) = s.derive(name, Mode::Reverse, 1, &[])?;
        s.run_in(&module, &d, args, engine)
    })
}

#[test]
fn an_unused_tuple_result_gets_no_adjoint() {
    // sqrt's partial at 0 is inf; the unused `b` must not bring `inf * 0`.
    let src = "fn g(x: f64) -> (f64, f64) { (x, sqrt(x)) }
               fn f(x: f64) -> f64 { let (a, b) = g(x); a }";
    assert_eq!(gradient_everywhere(src, "f", &[Val::F64(0.0)]), [1.0]);
    let never = format!("#[inline(never)]\n{src}");
    assert_eq!(gradient_everywhere(&never, "f", &[Val::F64(0.0)]), [1.0]);
}

#[test]
fn a_scratch_array_nobody_reads_gets_no_adjoint() {
    let src = "fn g(x: f64, a: mut [f64]) -> f64 { a[0] = sqrt(x); x }
               fn f(x: f64) -> f64 { let t = zeros(1); g(x, t) }";
    assert_eq!(gradient_everywhere(src, "f", &[Val::F64(0.0)]), [1.0]);
}

#[test]
fn an_argument_that_only_feeds_an_unused_parameter_gets_no_adjoint() {
    // Across a call, as inlined: `sqrt(x)` reaches only `y`, which `g`
    // never uses; `log(x)` only the result nobody reads.
    let src = "fn g(x: f64, y: f64) -> f64 { x }
               #[inline(never)]
               fn g2(x: f64, y: f64) -> (f64, f64) { (x * 2.0, y) }
               fn f(x: f64) -> f64 { g(x, sqrt(x)) }
               fn f2(x: f64) -> f64 { let (a, b) = g2(x, log(x)); a }";
    assert_eq!(gradient_everywhere(src, "f", &[Val::F64(0.0)]), [1.0]);
    assert_eq!(gradient_everywhere(src, "f2", &[Val::F64(0.0)]), [2.0]);
}

/// d/dx of `cos(h0(x y, y))` summed over both inputs, to third order in
/// reverse mode, through `h0`'s reverse rule.
const THIRD_ORDER: &str = "
fn h0(a: f64, b: f64) -> f64 { b }
rule reverse h0(a: f64, b: f64, d: f64) -> (f64, f64) { (1.53 * d * b, -0.16 * d * a) }
fn top(x: f64, y: f64) -> f64 { cos(h0(x * y, y)) }
fn d_r(x: f64, y: f64) -> f64 { let (a, b) = autodiff(reverse, top, active, active(x), active(y)); a + b }
fn d_rr(x: f64, y: f64) -> f64 { let (a, b) = autodiff(reverse, d_r, active, active(x), active(y)); a + b }
fn d_rrr(x: f64, y: f64) -> f64 { let (a, b) = autodiff(reverse, d_rr, active, active(x), active(y)); a + b }
fn d_rrr_y(x: f64, y: f64) -> f64 { let (a, b) = autodiff(reverse, d_rr, active, active(x), active(y)); b }
";

#[test]
fn third_order_through_a_reverse_rule_keeps_every_bit() {
    let at = [Val::F64(2.1), Val::F64(0.7)];
    // By hand, first order: with u = x y, the rule's adjoints are
    // (1.53 d y, -0.16 d u) for d = -sin(h0) = -sin(y); x gets y·da, y gets
    // db + x·da. (Higher orders apply the rule again to the primal call of
    // `h0` inside the derivative, so finite differences of d_r do not give
    // d_rr: the rule is not h0's true derivative, on purpose.)
    let d_r = |x: f64, y: f64| {
        let s = -(y.sin());
        let (da, db) = (1.53 * s * y, -0.16 * s * (x * y));
        (y * da) + (db + x * da)
    };
    assert_eq!(run_everywhere(THIRD_ORDER, "d_r", &at)[0], d_r(2.1, 0.7));
    assert_eq!(
        run_everywhere(THIRD_ORDER, "d_rr", &at)[0],
        -9.692604036465701
    );
    let d3 = run_everywhere(THIRD_ORDER, "d_rrr", &at)[0];
    assert_eq!(d3, -28.04640611784549);
    run_everywhere(THIRD_ORDER, "d_rrr_y", &at);
}

#[test]
fn third_order_through_a_forward_rule_keeps_every_bit() {
    let src = "
fn h0(a: f64, b: f64) -> f64 { b }
rule forward h0(a: f64, ta: f64, b: f64, tb: f64) -> (f64, f64) { (b, 1.53 * ta * b - 0.16 * tb * a) }
fn top(x: f64, y: f64) -> f64 { cos(h0(x * y, y)) }
fn f1(x: f64, y: f64) -> f64 { let (p, t) = autodiff(forward, top, dual, dual(x, 1.0), dual(y, 1.0)); t }
fn r2(x: f64, y: f64) -> f64 { let (a, b) = autodiff(reverse, f1, active, active(x), active(y)); a + b }
fn r3(x: f64, y: f64) -> f64 { let (a, b) = autodiff(reverse, r2, active, active(x), active(y)); a + b }
fn r1(x: f64, y: f64) -> f64 { let (a, b) = autodiff(reverse, top, active, active(x), active(y)); a + b }
fn fr(x: f64, y: f64) -> f64 { let (p, t) = autodiff(forward, r1, dual, dual(x, 1.0), dual(y, 0.5)); t }
fn rfr(x: f64, y: f64) -> f64 { let (a, b) = autodiff(reverse, fr, active, active(x), active(y)); a + b }
";
    let at = [Val::F64(2.1), Val::F64(0.7)];
    for f in ["f1", "r2", "r3", "r1", "fr", "rfr"] {
        run_everywhere(src, f, &at);
    }
}

#[test]
fn a_rule_on_a_function_that_contains_autodiff() {
    // q(x) = 3x²; its reverse rule gives 6x, its body's derivative too.
    let src = "fn inner(y: f64) -> f64 { y * y * y }
               fn q(x: f64) -> f64 { autodiff(reverse, inner, active, active(x)) }
               rule reverse q(x: f64, d: f64) -> f64 { 6.0 * x * d }
               fn top(x: f64) -> f64 { q(x) + 1.0 }";
    assert_eq!(run_everywhere(src, "top", &[Val::F64(0.6)]), [2.08]);
    assert_eq!(
        gradient_everywhere(src, "top", &[Val::F64(0.6)]),
        [6.0 * 0.6]
    );
    let fwd = src.replace(
        "rule reverse q(x: f64, d: f64) -> f64 { 6.0 * x * d }",
        "rule forward q(x: f64, t: f64) -> (f64, f64) { (3.0 * x * x, 6.0 * x * t) }",
    );
    assert_eq!(run_everywhere(&fwd, "top", &[Val::F64(0.6)]), [2.08]);
    // Reverse mode of a function with only a forward rule uses its body
    // (`adze check` warns): the derivative of `autodiff(reverse, inner, ..)`,
    // 3·(x·x)·2... = 3.6, not the rule's 6·x = 3.5999999999999996.
    assert_eq!(gradient_everywhere(&fwd, "top", &[Val::F64(0.6)]), [3.6]);
}

#[test]
fn a_callee_whose_value_is_a_derivative_is_active() {
    // `q`'s value is itself a derivative (3x²): its own derivative 6x must
    // come out whether `q` is inlined or called (the call's activity was
    // read off `q`'s body before its request was lowered: 0.0).
    let src = "fn inner(y: f64) -> f64 { y * y * y }
               fn q(x: f64) -> f64 { autodiff(reverse, inner, active, active(x)) }
               fn top(x: f64) -> f64 { q(x) + 1.0 }
               fn dtop(x: f64) -> f64 { let (p, t) = autodiff(forward, top, dual, dual(x, 1.0)); t }
               fn rtop(x: f64) -> f64 { autodiff(reverse, top, active, active(x)) }";
    let at = [Val::F64(0.6)];
    assert_eq!(run_everywhere(src, "rtop", &at), [3.6]);
    assert_eq!(run_everywhere(src, "dtop", &at), [3.5999999999999996]);
}

#[test]
fn a_function_that_differentiates_itself_is_an_error() {
    for src in [
        "fn g(x: f64) -> f64 { x * x + autodiff(reverse, g, active, active(x)) }",
        "fn g(x: f64) -> f64 { x * h(x) }
         fn h(x: f64) -> f64 { let (p, t) = autodiff(forward, g, dual, dual(x, 1.0)); t }",
    ] {
        for inline in InlineSetting::ALL {
            let s = session(src, inline, true);
            let err = s.run("g", &[Val::F64(1.0)], Engine::Interp).unwrap_err();
            let msg = err.to_string();
            assert!(
                msg.contains("would contain its own derivative"),
                "{inline:?}: {msg}"
            );
        }
    }
}
