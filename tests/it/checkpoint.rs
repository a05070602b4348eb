//! Checkpointed reverse loops (issue #18, docs/ad-reverse.md,
//! "Checkpointing"): under a tape budget that the fully taped derivative
//! exceeds, the checkpointed one runs, and gives the taped derivative's
//! bits (computed without a budget) under every inline setting, in both
//! engines, for every segment length. `check_inline.rs` compares them on
//! every example too.

use crate::support::root;
use adze::{Engine, InlineSetting, Session};
use adze_ir::Val;

fn session() -> Session {
    Session::from_file(&root().join("ir-examples/checkpoint.adz")).unwrap()
}

/// `src` without its `#[checkpoint]` lines: the same program, taped.
fn without_hints(src: &str) -> String {
    src.lines()
        .filter(|l| !l.trim_start().starts_with("#[checkpoint"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `got` has `want`'s values, bit for bit.
fn assert_bits(got: &[Val], want: &[Val], what: impl std::fmt::Display) {
    assert!(
        got.len() == want.len() && got.iter().zip(want).all(|(a, b)| a.bit_eq(b)),
        "{what}: {got:?} against {want:?}"
    );
}

fn run(s: &Session, name: &str, args: &[Val], engine: Engine) -> Result<Vec<Val>, String> {
    s.run(name, args, engine)
        .map(|o| o.results)
        .map_err(|e| e.to_string())
}

/// Runs the derivative of `name` in `mode` that `Session::derive` makes
/// (`consts` held constant; JIT) on `args`.
fn run_derived(
    s: &Session,
    name: &str,
    mode: adze::adze_ir::Mode,
    consts: &[&str],
    args: &[Val],
) -> Result<Vec<Val>, String> {
    let consts: Vec<String> = consts.iter().map(|c| c.to_string()).collect();
    let (module, derived) = s
        .derive(name, mode, 1, &consts)
        .map_err(|e| e.to_string())?;
    s.run_in(&module, &derived, args, Engine::Jit)
        .map(|o| o.results)
        .map_err(|e| e.to_string())
}

/// Each derivative of the example at a trip count whose tape passes
/// 256 KiB.
fn cases() -> Vec<(&'static str, Vec<Val>)> {
    let n = Val::I64(20_000);
    let x = Val::F64(0.7);
    vec![
        ("d_loop4", vec![x.clone(), n.clone()]),
        ("d_ring", vec![x.clone(), n.clone()]),
        ("d_smooth", vec![x.clone(), n.clone()]),
        ("d_scratch", vec![x, n]),
    ]
}

#[test]
fn a_checkpointed_derivative_fits_the_budget_and_equals_the_taped_one() {
    let budget = 256 << 10;
    for (name, args) in cases() {
        let taped = run(&session(), name, &args, Engine::Jit).unwrap();
        let mut over = session();
        over.limits.tape_limit = budget;
        over.checkpoint_fallback = false;
        let err = run(&over, name, &args, Engine::Jit).unwrap_err();
        assert!(err.contains("budget"), "{name}: {err}");
        for inline in InlineSetting::ALL {
            for engine in [Engine::Jit, Engine::Interp] {
                // Segments of 1 and 7 entries cut at (nearly) every
                // iteration: then the snapshots alone pass the budget, so
                // those run without one.
                for segment in [None, Some(1), Some(7), Some(1000)] {
                    let mut s = session();
                    s.inline = inline;
                    if segment.is_none_or(|n| n >= 1000) {
                        s.limits.tape_limit = budget;
                    }
                    s.ad_limits.checkpoint = true;
                    s.limits.checkpoint_segment = segment;
                    let got = run(&s, name, &args, engine)
                        .unwrap_or_else(|e| panic!("{name} {inline:?} {segment:?}: {e}"));
                    assert_bits(
                        &got,
                        &taped,
                        format!("{name} {inline:?} {engine:?} {segment:?}"),
                    );
                }
            }
        }
    }
}

/// A `while` loop left by `break`, at every trip count around the cuts.
#[test]
fn a_loop_left_by_break_is_recomputed_exactly() {
    for x in [-0.5, 0.0, 0.7, 1.9, 2.95] {
        let args = [Val::F64(x)];
        let taped = run(&session(), "d_until", &args, Engine::Jit).unwrap();
        for segment in 1..6 {
            let mut s = session();
            s.ad_limits.checkpoint = true;
            s.limits.checkpoint_segment = Some(segment);
            let got = run(&s, "d_until", &args, Engine::Jit).unwrap();
            assert_bits(&got, &taped, format!("x = {x}, segment {segment}"));
        }
    }
}

/// Reverse over a checkpointed derivative is refused with a clear error
/// rather than wrong: what a reverse derivation lowers inside its primal
/// is never checkpointed, so a gradient of a gradient still works.
#[test]
fn a_gradient_of_a_gradient_is_taped_inside() {
    let src = "
fn f(x: f64, n: i64) -> f64 {
    var s = x;
    for i in 0..n { s = sin(s) * x; }
    s
}
fn g(x: f64, n: i64) -> f64 { autodiff(reverse, f, active, active(x), const(n)) }
fn h(x: f64, n: i64) -> f64 { autodiff(reverse, g, active, active(x), const(n)) }
";
    let args = [Val::F64(0.7), Val::I64(50)];
    let plain = Session::from_source("gg.adz", src).unwrap();
    let want = run(&plain, "h", &args, Engine::Jit).unwrap();
    let mut s = Session::from_source("gg.adz", src).unwrap();
    s.ad_limits.checkpoint = true;
    s.limits.checkpoint_segment = Some(2);
    let got = run(&s, "h", &args, Engine::Jit).unwrap();
    assert_bits(&got, &want, "h");
    // The first derivative alone is checkpointed.
    let g = run(&s, "g", &args, Engine::Jit).unwrap();
    let g_plain = run(&plain, "g", &args, Engine::Jit).unwrap();
    assert_bits(&g, &g_plain, "g");
}

/// The `ad` stage of `name`, annotated with the tape plan.
fn tape_dump(s: &Session, name: &str) -> String {
    let stages = s.stages_until(Some(name), adze::Stage::Ad).unwrap();
    let (_, module) = stages.last().unwrap();
    let what = adze::adze_ad::annotate::Annotate {
        activity: false,
        tape: true,
        rules: false,
    };
    adze::pipeline::dump_stage_annotated(module, adze::Stage::Ad, Some(name), false, what).unwrap()
}

/// The schedule is in the annotated dump (docs/ad-reverse.md, "In a
/// dump"), and the annotated text still parses.
#[test]
fn an_annotated_dump_shows_the_schedule() {
    let mut s = session();
    s.ad_limits.checkpoint = true;
    let text = tape_dump(&s, "d_loop4");
    for note in [
        "checkpointed loop 0: the snapshot of its first segment",
        "checkpointed loop 0: is the segment full",
        "checkpointed loop 0: drops the segment's records (the adjoint recomputes them with @loop4.aug.active_const.ckpt.seg0)",
        "the first iteration of a segment: recompute the segment before",
        "tapecut",
    ] {
        assert!(text.contains(note), "no `{note}` in:\n{text}");
    }
}

/// Fuzzer seed 2300036 (reduced): a forward derivative of a checkpointed
/// reverse derivative gave NaN where the taped one gives 0.0 (the runner
/// popped `1/x`, which the augmented primal knows constant, and forward
/// mode gave it a zero tangent that met an infinite partial). The runner's
/// forward derivative now has the augmented primal's activity
/// (`runner_activity`), and the derivative is checkpointed, not taped.
#[test]
fn a_forward_derivative_of_a_checkpointed_one_is_exact() {
    let path = root().join("tests/findings/forward_over_checkpointed_reverse.adz");
    let args = [Val::F64(0.0), Val::F64(0.0)];
    let taped = Session::from_file(&path).unwrap();
    let want = run(&taped, "d2", &args, Engine::Jit).unwrap();
    for inline in InlineSetting::ALL {
        let mut s = Session::from_file(&path).unwrap();
        s.inline = inline;
        s.ad_limits.checkpoint = true;
        s.limits.checkpoint_segment = Some(1);
        for engine in [Engine::Jit, Engine::Interp] {
            let got = run(&s, "d2", &args, engine).unwrap();
            assert_bits(&got, &want, format!("{inline:?} {engine:?}"));
        }
        if inline == InlineSetting::All {
            // Inlined before AD, `f2`'s loop is `top`'s, whose parameters
            // the runner takes as witnesses: it is checkpointed.
            let module = s.prepare("d2").unwrap();
            let runners = module
                .ids()
                .filter(|&id| module.func(id).name.contains(".ckptf.seg"))
                .count();
            assert!(runners > 0, "no checkpoint runner under {inline:?}");
        }
    }
}

/// `name` of the example, past `budget` when taped, runs within it when
/// checkpointed, with the taped bits, under every inline setting and
/// segment length, in both engines (short segments keep one snapshot
/// each, many more: they run without the budget).
fn checkpointed_within(name: &str, budget: u64) {
    let args = [Val::F64(0.7), Val::I64(20_000)];
    let want = run(&session(), name, &args, Engine::Jit).unwrap();
    let mut over = session();
    over.limits.tape_limit = budget;
    over.checkpoint_fallback = false;
    let err = run(&over, name, &args, Engine::Jit).unwrap_err();
    assert!(err.contains("budget"), "{name}: {err}");
    for inline in InlineSetting::ALL {
        for segment in [None, Some(1), Some(7)] {
            for engine in [Engine::Jit, Engine::Interp] {
                let mut s = session();
                s.inline = inline;
                s.ad_limits.checkpoint = true;
                s.limits.checkpoint_segment = segment;
                if segment.is_none() {
                    s.limits.tape_limit = budget;
                }
                let what = format!("{name} {inline:?} {segment:?} {engine:?}");
                let got = run(&s, name, &args, engine).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_bits(&got, &want, what);
            }
        }
    }
}

/// A Hessian-vector product (forward over reverse) of a long loop runs
/// within a tape budget that the taped one exceeds, with the taped bits.
#[test]
fn a_hessian_vector_product_is_checkpointed_within_the_budget() {
    checkpointed_within("dd_loop4", 256 << 10);
}

/// A third derivative by forward over forward over reverse (`ddd_loop4`)
/// is checkpointed at both forward orders, likewise. The second forward
/// derivative of the runner gets its activity from the first forward
/// derivative of the augmented primal, through the tangents each lists
/// (`Function::tangents`).
#[test]
fn a_third_derivative_forward_over_forward_over_reverse_is_checkpointed() {
    checkpointed_within("ddd_loop4", 512 << 10);
}

/// A `mut` array parameter reaching the loop: the adjoint of a `.ckptf`
/// derivative takes it as a witness (`w_y`), so the loop of `smooth` is
/// checkpointed for forward mode. Called from `outer` (not inlined before
/// AD: `--inline none` or `late`), the same loop is a callee's, whose scalars and `mut` arrays the
/// adjoint does not have: it stays taped, the budget says so and the
/// annotated dump says why. Bits equal the taped ones everywhere.
#[test]
fn a_mut_array_is_a_witness_at_the_top_and_keeps_a_callee_taped() {
    let src = "
fn smooth(y: mut [f64], x: f64, n: i64) -> f64 {
    var s = 0.0;
    for i in 0..n {
        let k = i % len(y);
        y[k] = y[k] * 0.5 + x;
        s = s + sin(y[k]);
    }
    s
}
fn outer(y: mut [f64], x: f64, n: i64) -> f64 { smooth(y, x, n) * 2.0 }
fn d(x: f64, n: i64) -> f64 {
    let y = zeros(4);
    let dy = zeros(4);
    autodiff(reverse, smooth, active, dup(y, dy), active(x), const(n))
}
fn dd(x: f64, n: i64) -> f64 {
    let (g, h) = autodiff(forward, d, dual, dual(x, 1.0), const(n));
    h
}
fn e(x: f64, n: i64) -> f64 {
    let y = zeros(4);
    let dy = zeros(4);
    autodiff(reverse, outer, active, dup(y, dy), active(x), const(n))
}
fn ee(x: f64, n: i64) -> f64 {
    let (g, h) = autodiff(forward, e, dual, dual(x, 1.0), const(n));
    h
}
";
    let args = [Val::F64(0.7), Val::I64(20_000)];
    let plain = Session::from_source("smooth.adz", src).unwrap();
    for name in ["dd", "ee"] {
        let want = run(&plain, name, &args, Engine::Jit).unwrap();
        for inline in InlineSetting::ALL {
            let mut s = Session::from_source("smooth.adz", src).unwrap();
            s.inline = inline;
            s.ad_limits.checkpoint = true;
            s.limits.checkpoint_segment = Some(3);
            let what = format!("{name} {inline:?}");
            assert_bits(&run(&s, name, &args, Engine::Jit).unwrap(), &want, &what);
            s.limits.checkpoint_segment = None;
            s.limits.tape_limit = 256 << 10;
            let got = run(&s, name, &args, Engine::Jit);
            // (`smooth` is inlined into `outer` before AD only by `early`
            // and `all`.)
            if name == "ee" && matches!(inline, InlineSetting::None | InlineSetting::Late) {
                let err = got.unwrap_err();
                assert!(
                    err.contains("budget") && err.contains("--annotate tape"),
                    "{err}"
                );
            } else {
                assert_bits(&got.unwrap_or_else(|e| panic!("{what}: {e}")), &want, &what);
            }
        }
    }
    // The annotated dump says why the callee's loop stays taped.
    let mut s = Session::from_source("smooth.adz", src).unwrap();
    s.inline = InlineSetting::None;
    s.ad_limits.checkpoint = true;
    let stages = s.stages_until(Some("ee"), adze::Stage::Ad).unwrap();
    let (_, module) = stages.last().unwrap();
    let what = adze::adze_ad::annotate::Annotate {
        activity: false,
        tape: true,
        rules: false,
    };
    let text =
        adze::pipeline::dump_stage_annotated(module, adze::Stage::Ad, None, false, what).unwrap();
    assert!(
        text.contains("loop 0 is not checkpointed: a forward derivative differentiates"),
        "{text}"
    );
}

/// A reverse derivative (from outside, `--derive reverse`) of a function
/// whose Hessian-vector product is checkpointed for forward mode: the
/// checkpointed halves and their forward derivatives stay calls, so the
/// reverse pass replaces them by their taped twins under every inline
/// setting. With a loop small enough to inline, `late` and `all` failed
/// with "reverse mode over a checkpointed loop" before they were kept.
#[test]
fn a_reverse_derivative_of_a_checkpointed_hessian_vector_product() {
    let src = "
fn f(x: f64, n: i64) -> f64 {
    var s = x;
    #[checkpoint]
    for i in 0..n { s = sin(s) * x + 0.5; }
    s
}
fn d(x: f64, n: i64) -> f64 { autodiff(reverse, f, active, active(x), const(n)) }
fn dd(x: f64, n: i64) -> f64 {
    let (g, h) = autodiff(forward, d, dual, dual(x, 1.0), const(n));
    h
}
";
    let args = [Val::F64(0.7), Val::I64(100), Val::F64(1.0)];
    let reverse = adze::adze_ir::Mode::Reverse;
    let plain = Session::from_source("plain.adz", &without_hints(src)).unwrap();
    let want = run_derived(&plain, "dd", reverse, &[], &args[..2]).unwrap();
    for inline in InlineSetting::ALL {
        let mut s = Session::from_source("hinted.adz", src).unwrap();
        s.inline = inline;
        let got = run_derived(&s, "dd", reverse, &[], &args[..2])
            .unwrap_or_else(|e| panic!("{inline:?}: {e}"));
        assert_bits(&got, &want, format!("{inline:?}"));
    }
}

/// An HVP written the way an outsider might: a local table built before a
/// hinted `while` loop left by `break`, an inner loop, a callee with a
/// reverse rule inside it, an HVP of a gradient with array arguments, all
/// reached from a scalar `top`. Checkpointed for forward mode (the hinted
/// loop is, in `energy.aug.dup_const.ckptf`), it gives the bits of the
/// program without the hint and without `--checkpoint`, under every inline
/// setting and segment length, in both engines.
#[test]
fn an_outsiders_hvp_of_a_hinted_while_loop() {
    let src = r#"// an outsider's HVP: nested loops, a while with break, a local table, a rule inside
fn clamp(v: f64) -> f64 { if v > 2.0 { 2.0 } else { v } }
rule reverse clamp(v: f64, dy: f64) -> f64 { dy * 0.5 }
fn energy(x: [f64], steps: i64) -> f64 {
    let n = len(x);
    let table = zeros(n);
    for i in 0..n { table[i] = exp(-x[i] * x[i]); }
    var e = 0.0;
    var t = 0;
    #[checkpoint]
    while t < steps {
        var inner = 0.0;
        for j in 0..n {
            inner = inner + clamp(table[j] * x[j] + f64(t) * 0.001);
        }
        e = e * 0.99 + sin(inner);
        if e > 1000.0 { break; }
        t = t + 1;
    }
    e
}
fn grad(x: [f64], dx: mut [f64], steps: i64) -> f64 {
    autodiff(reverse, energy, active, dup(x, dx), const(steps));
    dx[0]
}
fn hvp(x: [f64], v: [f64], steps: i64) -> f64 {
    let dx = zeros(len(x));
    let dv = zeros(len(x));
    let (g, h) = autodiff(forward, grad, dual, dup(x, v), dup(dx, dv), const(steps));
    var s = 0.0;
    for i in 0..len(dv) { s = s + dv[i]; }
    s
}
fn top(a: f64, b: f64) -> f64 {
    let x = zeros(3);
    x[0] = a; x[1] = b; x[2] = a * b;
    let v = zeros(3);
    v[0] = 1.0; v[1] = -0.5; v[2] = 0.25;
    hvp(x, v, 300)
}
"#;
    let args = [Val::F64(0.3), Val::F64(-0.7)];
    let plain = Session::from_source("plain.adz", &without_hints(src)).unwrap();
    let want = run(&plain, "top", &args, Engine::Jit).unwrap();
    for inline in InlineSetting::ALL {
        for segment in [None, Some(1), Some(5)] {
            let mut s = Session::from_source("outsider.adz", src).unwrap();
            s.inline = inline;
            s.ad_limits.checkpoint = segment.is_some();
            s.limits.checkpoint_segment = segment;
            for engine in [Engine::Jit, Engine::Interp] {
                let got = run(&s, "top", &args, engine)
                    .unwrap_or_else(|e| panic!("{inline:?} {segment:?} {engine:?}: {e}"));
                assert_bits(&got, &want, format!("{inline:?} {segment:?} {engine:?}"));
            }
        }
    }
    let s = Session::from_source("outsider.adz", src).unwrap();
    let stages = s.stages_until(Some("top"), adze::Stage::Ad).unwrap();
    let (_, module) = stages.last().unwrap();
    let ckptf = module
        .ids()
        .map(|id| module.func(id))
        .find(|f| f.name.starts_with("energy.aug.dup_const.ckptf"))
        .expect("a .ckptf augmented primal of `energy`");
    assert!(
        ckptf
            .layout
            .insts()
            .any(|(_, i)| ckptf.dfg.inst(i).opcode() == adze::adze_ir::Opcode::Tapecut),
        "the hinted loop is not checkpointed"
    );
}

/// A forward derivative asked for from outside (`--derive forward`) of a
/// gradient is checkpointed for forward mode as the same HVP written in
/// source is: within the budget, with the taped bits. (It used to lower
/// what it differentiates without `--checkpoint`, as a reverse one must,
/// so it ran out of budget and the error pointed at a note that was not
/// there.)
#[test]
fn a_forward_derivative_from_outside_is_checkpointed() {
    let args = [Val::F64(0.7), Val::F64(1.0), Val::I64(20_000)];
    let forward = adze::adze_ir::Mode::Forward;
    let want = run_derived(&session(), "d_loop4", forward, &["n"], &args).unwrap();
    for inline in InlineSetting::ALL {
        let mut s = session();
        s.inline = inline;
        s.ad_limits.checkpoint = true;
        s.limits.tape_limit = 256 << 10;
        let got = run_derived(&s, "d_loop4", forward, &["n"], &args)
            .unwrap_or_else(|e| panic!("{inline:?}: {e}"));
        assert_bits(&got, &want, format!("{inline:?}"));
    }
}

/// `src` with `#[checkpoint(snapshots = k)]` on every `for` loop.
fn with_snapshots(src: &str, k: usize) -> String {
    src.lines()
        .map(|l| {
            let indent = &l[..l.len() - l.trim_start().len()];
            if l.trim_start().starts_with("for ") {
                format!("{indent}#[checkpoint(snapshots = {k})]\n{l}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

/// `#[checkpoint(snapshots = K)]` on the loops of `ir-examples/checkpoint.adz`
/// (a recurrence, a ring buffer overwritten every iteration, calls with
/// loops of their own and a rule inside, a `mut` parameter, a scratch
/// array made in every iteration; a gradient and an HVP): a binomial
/// schedule (docs/ad-reverse.md, "Binomial schedules"), whose derivatives
/// equal the taped ones bit for bit, for every `K` (1 counts as 2, 2 is
/// quadratic) and trip count (0, 1, a few, more than the snapshots can
/// split evenly), under every inline setting, in both engines.
#[test]
fn a_binomial_schedule_gives_the_taped_bits() {
    let src = std::fs::read_to_string(root().join("ir-examples/checkpoint.adz")).unwrap();
    let plain = Session::from_source("plain.adz", &without_hints(&src)).unwrap();
    let names = ["d_loop4", "d_ring", "d_smooth", "d_scratch", "dd_loop4"];
    let x = Val::F64(0.7);
    for k in [1, 2, 3, 6] {
        let hinted = with_snapshots(&src, k);
        for inline in InlineSetting::ALL {
            let mut s = Session::from_source("binomial.adz", &hinted).unwrap();
            s.inline = inline;
            for name in names {
                for n in [0, 1, 2, 5, 23] {
                    let args = [x.clone(), Val::I64(n)];
                    let want = run(&plain, name, &args, Engine::Jit).unwrap();
                    for engine in [Engine::Jit, Engine::Interp] {
                        let got = run(&s, name, &args, engine)
                            .unwrap_or_else(|e| panic!("{name} K={k} n={n} {inline:?}: {e}"));
                        assert_bits(
                            &got,
                            &want,
                            format!("{name} K={k} n={n} {inline:?} {engine:?}"),
                        );
                    }
                }
            }
        }
    }
}

/// What a binomial schedule is for: a loop whose two-level schedule keeps
/// too many snapshots for the budget. Under 4 KiB, 20 000 iterations of
/// the ring buffer (and of the recurrence, and its HVP) run with 4
/// snapshots and give the taped bits; taped, or with a plain
/// `#[checkpoint]` (a snapshot per 32 entries of tape), they stop at the
/// budget.
#[test]
fn a_binomial_schedule_runs_where_two_levels_exceed_the_budget() {
    let src = std::fs::read_to_string(root().join("ir-examples/checkpoint.adz")).unwrap();
    let plain = Session::from_source("plain.adz", &without_hints(&src)).unwrap();
    let budget = 4 << 10;
    let args = [Val::F64(0.7), Val::I64(20_000)];
    for name in ["d_ring", "d_loop4", "dd_loop4"] {
        let want = run(&plain, name, &args, Engine::Jit).unwrap();
        let mut two_level = Session::from_source(
            "two_level.adz",
            &without_hints(&src).replace(
                "    for i in 0..n {",
                "    #[checkpoint]\n    for i in 0..n {",
            ),
        )
        .unwrap();
        two_level.limits.tape_limit = budget;
        two_level.checkpoint_fallback = false;
        let err = run(&two_level, name, &args, Engine::Jit).unwrap_err();
        assert!(err.contains("budget"), "{name}: {err}");
        for inline in InlineSetting::ALL {
            let mut s = Session::from_source("binomial.adz", &with_snapshots(&src, 4)).unwrap();
            s.inline = inline;
            s.limits.tape_limit = budget;
            let got = run(&s, name, &args, Engine::Jit)
                .unwrap_or_else(|e| panic!("{name} {inline:?}: {e}"));
            assert_bits(&got, &want, format!("{name} {inline:?}"));
        }
    }
}

/// The binomial schedule in the annotated dump: the back edge's check
/// names `@adze.binomial`, which the module holds (called, without
/// inlining).
#[test]
fn an_annotated_dump_shows_the_binomial_schedule() {
    let src = std::fs::read_to_string(root().join("ir-examples/checkpoint.adz")).unwrap();
    let mut s = Session::from_source("binomial.adz", &with_snapshots(&src, 4)).unwrap();
    s.inline = InlineSetting::None;
    let text = tape_dump(&s, "d_ring");
    for note in [
        "is the segment full (at the next snapshot of the binomial schedule (@adze.binomial))?",
        "function @adze.binomial(",
        "call @adze.binomial(",
    ] {
        assert!(text.contains(note), "no `{note}` in:\n{text}");
    }
}

/// Fuzzer seed 5200079 (reduced): a function holding a checkpointed
/// gradient of a callee with a `mut` array, lowered (`.ckpt`) and inlined
/// before a forward derivative from outside reached it (`--inline late`).
/// Forward mode swapped the call for the `.ckptf` twin, whose adjoint
/// takes the array as a witness that the call did not pass: "4 arguments
/// for 5 parameters". Such a pair now becomes the taped one.
#[test]
fn a_forward_derivative_of_an_inlined_checkpointed_gradient_with_a_mut_array() {
    let src = "
fn f1(x: f64, y: f64, a: mut [f64]) -> f64 {
    var j = 0;
    #[checkpoint]
    while j < 2 && y <= y { j = j + 1; }
    x * y
}
fn f2(x: f64, y: f64) -> f64 {
    let t3 = zeros(3);
    let t4 = zeros(3);
    let (g1, g2) = autodiff(reverse, f1, active, active(x), active(x), dup(t3, t4));
    g1 * y + g2
}
fn topa(x: f64, y: f64) -> [f64] {
    let a = zeros(2);
    a[1] = f2(y, x);
    a[..2]
}
";
    let args = [Val::F64(1.0), Val::F64(0.8), Val::F64(1.0), Val::F64(0.5)];
    let mut want: Option<Vec<Val>> = None;
    for inline in InlineSetting::ALL {
        let mut s = Session::from_source("f.adz", src).unwrap();
        s.inline = inline;
        let got = run_derived(&s, "topa", adze::adze_ir::Mode::Forward, &[], &args)
            .unwrap_or_else(|e| panic!("{inline:?}: {e}"));
        match &want {
            None => want = Some(got),
            Some(w) => assert_bits(&got, w, format!("{inline:?}")),
        }
    }
}

/// A run whose tape outgrows its budget runs again with every loop
/// checkpointed (`Session::checkpoint_fallback`, the default): through
/// `Session::run` in both engines, and through a compiled derivative
/// without `mut` parameters; the bits are the taped ones. A compiled
/// function with a `mut` parameter (a shadow) stops with the budget's
/// error: its first run may have written the caller's arrays.
#[test]
fn a_run_past_the_budget_runs_again_checkpointed() {
    let budget = 256 << 10;
    let args = [Val::F64(0.7), Val::I64(20_000)];
    for name in ["d_loop4", "d_smooth", "dd_loop4"] {
        let want = run(&session(), name, &args, Engine::Jit).unwrap();
        let mut s = session();
        s.limits.tape_limit = budget;
        for engine in [Engine::Jit, Engine::Interp] {
            let got = run(&s, name, &args, engine).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_bits(&got, &want, format!("{name} {engine:?}"));
        }
    }
    let program = adze::Program::new(session());
    let mut small = session();
    small.limits.tape_limit = budget;
    let small = adze::Program::new(small);
    let spec = adze::DerivativeSpec::reverse().constant("n");
    let call = |p: &adze::Program| {
        p.derivative("loop4", &spec)
            .unwrap()
            .call(&mut [adze::Arg::F64(0.7), adze::Arg::I64(20_000)])
            .map_err(|e| e.to_string())
    };
    let want = call(&program).unwrap();
    assert_bits(&call(&small).unwrap(), &want, "loop4's compiled gradient");
    // `smooth` writes `y` in place: no second run.
    let grad = small.derivative("smooth", &spec).unwrap();
    let a = [0.5, -0.25, 1.0];
    let mut da = [0.0; 3];
    let mut y = [0.1, 0.2, 0.3, 0.4];
    let mut dy = [0.0; 4];
    let err = grad
        .call(&mut [
            adze::Arg::Array(&a),
            adze::Arg::ArrayMut(&mut da),
            adze::Arg::ArrayMut(&mut y),
            adze::Arg::ArrayMut(&mut dy),
            adze::Arg::F64(0.7),
            adze::Arg::I64(20_000),
        ])
        .unwrap_err();
    assert!(err.is_tape_budget(), "{err}");
}

/// The command line runs again too, from the arguments as given (the
/// `mut` array `y` is restored first): the same output as without a
/// budget, and a note on stderr. `--no-checkpoint-fallback` stops.
#[test]
fn the_command_line_runs_again_checkpointed_past_the_budget() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "ir-examples/checkpoint.adz",
            "--fn",
            "smooth",
            "--derive",
            "reverse",
            "--arg",
            "a=[0.5,-0.25,1.0]",
            "--arg",
            "y=[0.1,0.2,0.3,0.4]",
            "--arg",
            "x=0.7",
            "--arg",
            "n=20000",
        ];
        args.extend_from_slice(extra);
        crate::support::adze(&args)
    };
    let want = run(&[]).exits(0);
    for engine in ["jit", "interp"] {
        let got = run(&["--tape-limit", "256KiB", "--engine", engine]).exits(0);
        assert_eq!(got.stdout, want.stdout, "{engine}");
        assert!(
            got.stderr
                .contains("running again with every loop checkpointed"),
            "{}",
            got.stderr
        );
    }
    let stopped = run(&["--tape-limit", "256KiB", "--no-checkpoint-fallback"]).exits(1);
    assert!(
        stopped.stderr.contains("budget of 256 KiB"),
        "{}",
        stopped.stderr
    );
}

/// A binomial schedule on `for i in lo..hi` with `lo` not 0, `hi < lo`
/// (no iteration) and `hi - lo` past `i64` (`lo = 1`, `hi = i64::MIN`: no
/// iteration, and no wrapped trip count of 2^63 for `@adze.binomial` to
/// split), against the taped bits.
#[test]
fn a_binomial_schedule_on_any_range() {
    let src = "
fn f(x: f64, lo: i64, hi: i64) -> f64 {
    var s = x;
    #[checkpoint(snapshots = 3)]
    for i in lo..hi { s = sin(s) * x + f64(i) * 0.001; }
    s
}
fn d(x: f64, lo: i64, hi: i64) -> f64 {
    autodiff(reverse, f, active, active(x), const(lo), const(hi))
}
";
    let plain = Session::from_source("plain.adz", &without_hints(src)).unwrap();
    for (lo, hi) in [
        (5, 40),
        (-7, 3),
        (10, 2),
        (1, i64::MIN),
        (i64::MAX - 3, i64::MAX),
    ] {
        let args = [Val::F64(0.7), Val::I64(lo), Val::I64(hi)];
        let want = run(&plain, "d", &args, Engine::Jit).unwrap();
        for inline in InlineSetting::ALL {
            let mut s = Session::from_source("binomial.adz", src).unwrap();
            s.inline = inline;
            for engine in [Engine::Jit, Engine::Interp] {
                let got = run(&s, "d", &args, engine)
                    .unwrap_or_else(|e| panic!("{lo}..{hi} {inline:?}: {e}"));
                assert_bits(&got, &want, format!("{lo}..{hi} {inline:?} {engine:?}"));
            }
        }
    }
}

/// The reduction of fuzzer seed 90768: `f4` takes the gradient of `f3`,
/// whose loop (`hint` written before it) reads what `f2` copied; `topa`
/// calls both.
fn late_pair(hint: &str) -> String {
    format!(
        "fn f2(a: [f64]) -> [f64] {{
    let r = zeros(3);
    for i in 0..3 {{ r[i] = a[i % len(a)]; }}
    r
}}
fn f3(x: f64, a: mut [f64]) -> f64 {{
    let y = f2(a);
    var s = 0.0;
    {hint}
    for i in 0..3 {{ s = s + y[i]; }}
    s
}}
fn f4(x: f64) -> f64 {{
    let t3 = zeros(3);
    let t4 = zeros(3);
    let g = autodiff(reverse, f3, active, active(x), dup(t3, t4));
    x * g
}}
fn topa(x: f64, y: f64) -> f64 {{ let a = zeros(2); let t = f4(x); f3(x, a) + t }}
"
    )
}

/// `Session::derive` in forward mode lowers the requests its function
/// reaches before differentiating it: checkpointed for forward mode
/// (`.ckptf`), as the forward pass lowers them itself. Lowered `.ckpt`, the
/// late inliner put `f3`'s augmented primal into `topa` while its adjoint
/// stayed a call, which the forward pass then replaced by its taped twin:
/// the two halves' tapes out of step ("index 3 is out of bounds for array
/// `a.d`" under `--inline late --checkpoint`; fuzzer seed 90768, reduced).
#[test]
fn a_forward_derivative_keeps_a_checkpointed_pair_together_inlined_late() {
    let src = &late_pair("");
    let args = [
        Val::F64(-0.78),
        Val::F64(1.0),
        Val::F64(-0.2),
        Val::F64(1.0),
    ];
    let taped = Session::from_source("t.adz", src).unwrap();
    let want = run_derived(&taped, "topa", adze::adze_ir::Mode::Forward, &[], &args).unwrap();
    // `f3` does not read `x`: its gradient `g`, the value and the
    // tangent are all zero.
    assert_bits(&want, &[Val::F64(0.0), Val::F64(0.0)], "taped");
    for inline in InlineSetting::ALL {
        for segment in [Some(1), Some(3)] {
            let mut s = Session::from_source("t.adz", src).unwrap();
            s.inline = inline;
            s.ad_limits.checkpoint = true;
            s.limits.checkpoint_segment = segment;
            let what = format!("{inline:?} {segment:?}");
            let got = run_derived(&s, "topa", adze::adze_ir::Mode::Forward, &[], &args)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_bits(&got, &want, what);
        }
    }
}

/// The same in reverse mode, with a `#[checkpoint]` hint on `f3`'s loop
/// (found in the review of session 25): `Session::derive` lowered the
/// hinted request `.ckpt` before the reverse pass, which tapes what it
/// differentiates; inlined late, the augmented primal stayed while the
/// adjoint's call was replaced by its taped twin ("index 3 is out of
/// bounds for array `a.d`" under `--inline late`, no `--checkpoint`
/// needed). Lowered taped from the start, as the reverse pass lowers the
/// requests inside its primal, every setting agrees.
#[test]
fn a_reverse_derivative_tapes_a_hinted_pair_inlined_late() {
    let src = &late_pair("#[checkpoint]");
    let args = [Val::F64(-0.78), Val::F64(1.0)];
    let reverse = adze::adze_ir::Mode::Reverse;
    let none = {
        let mut s = Session::from_source("t.adz", src).unwrap();
        s.inline = InlineSetting::None;
        run_derived(&s, "topa", reverse, &[], &args).unwrap()
    };
    // `f3` does not read `x`: both derivatives are zero.
    assert_bits(&none, &[Val::F64(0.0), Val::F64(0.0)], "none");
    for inline in InlineSetting::ALL {
        let mut s = Session::from_source("t.adz", src).unwrap();
        s.inline = inline;
        let what = format!("{inline:?}");
        let got =
            run_derived(&s, "topa", reverse, &[], &args).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_bits(&got, &none, what);
    }
}
