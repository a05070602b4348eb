//! The reverse pass on `ir-examples/`: Rosenbrock against its hand-written
//! gradient, the ADBench GMM objective against finite differences, every
//! example with `run:` lines, `autodiff` in source (forward over reverse),
//! the tape cost per iteration, and a snapshot of a small split pair.

use super::support::*;
use adze_ad::{lower_autodiff, lower_reverse_autodiff, split_derivative, ReverseRequest};
use adze_ir::{
    ArgActivity, ArgActivity::*, FuncId, Function, Inst, InstData, Module, Opcode, Param,
    RetActivity, Type, Val, Value,
};

#[test]
fn rosenbrock_matches_the_hand_written_gradient() {
    let mut m = compile(&example("rosenbrock.adz"));
    let d = rev(&mut m, "rosenbrock", &[Dup], RetActivity::Active);
    let hand = m.get("rosenbrock_grad").unwrap();
    for x in [
        vec![-1.2, 1.0],
        vec![0.5, -0.25, 1.5, 2.0, -0.75],
        direction(3, 50),
    ] {
        let g = grad(
            &m,
            d,
            &[Val::Array(x.clone())],
            &[Dup],
            &[vec![0.0; x.len()]],
        );
        let want = arr(&run(
            &m,
            hand,
            &[Val::Array(x.clone()), Val::Array(vec![0.0; x.len()])],
        )
        .args[1]);
        for (i, (got, want)) in g.shadows[0].iter().zip(&want).enumerate() {
            assert_close(*got, *want, 1e-12, &format!("rosenbrock gradient [{i}]"));
        }
    }
    check_gradient(
        &mut m,
        "rosenbrock",
        &[Val::Array(direction(9, 7))],
        &[Dup],
        RetActivity::Active,
        1e-6,
    );
}

/// A GMM instance: (d, k, n, alphas, means, icf, x, gamma, m).
fn gmm_args(d: usize, k: usize, n: usize, seed: u64) -> Vec<Val> {
    let icf_sz = d * (d + 1) / 2;
    vec![
        Val::I64(d as i64),
        Val::I64(k as i64),
        Val::I64(n as i64),
        Val::Array(direction(seed, k)),
        Val::Array(direction(seed + 1, k * d)),
        Val::Array(
            direction(seed + 2, k * icf_sz)
                .iter()
                .map(|v| 0.5 * v)
                .collect(),
        ),
        Val::Array(direction(seed + 3, n * d)),
        Val::F64(1.3),
        Val::I64(2),
    ]
}

const GMM_ACTS: [ArgActivity; 9] = [Const, Const, Const, Dup, Dup, Dup, Const, Const, Const];

#[test]
fn gmm_objective_against_finite_differences() {
    let mut m = compile(&example("gmm.adz"));
    for (d, k, n) in [(2, 2, 3), (3, 3, 5), (2, 3, 4)] {
        let args = gmm_args(d, k, n, 17 + d as u64);
        check_gradient(
            &mut m,
            "gmm_objective",
            &args,
            &GMM_ACTS,
            RetActivity::Active,
            1e-6,
        );
        // Each partial on its own, by finite differences on one entry.
        let dfn = m
            .get("gmm_objective.rev.const_const_const_dup_dup_dup_const_const_const")
            .unwrap();
        let shadows: Vec<Vec<f64>> = [3, 4, 5]
            .iter()
            .map(|&i| vec![0.0; arr(&args[i]).len()])
            .collect();
        let g = grad(&m, dfn, &args, &GMM_ACTS, &shadows);
        let f = m.get("gmm_objective").unwrap();
        for (s, &p) in [3usize, 4, 5].iter().enumerate() {
            for j in 0..arr(&args[p]).len() {
                let h = 1e-6;
                let at = |dx: f64| {
                    let mut a = args.clone();
                    let mut xs = arr(&a[p]);
                    xs[j] += dx;
                    a[p] = Val::Array(xs);
                    f64s(&run(&m, f, &a).results)[0]
                };
                let fd = (at(h) - at(-h)) / (2.0 * h);
                assert_close(
                    g.shadows[s][j],
                    fd,
                    1e-6,
                    &format!("gmm d={d} k={k} n={n} arg {p}[{j}]"),
                );
            }
        }
    }
}

#[test]
fn every_example_with_run_lines() {
    // Points where the function jumps (finite differences are meaningless),
    // and a function whose rules are deliberately wrong (array_results.adz).
    let skip = ["rounding", "piecewise", "clamp", "uses_dbl_custom"];
    let mut checked = 0;
    // Custom reverse rules are not supported yet.
    let files = example_files()
        .into_iter()
        .filter(|p| !p.ends_with("rules.adz") && !p.ends_with("seed.adz"));
    for path in files {
        let src = std::fs::read_to_string(&path).unwrap();
        let mut m = compile(&src);
        // In-language `autodiff` (special.adz's nested derivatives) lowered
        // first, so that their gradients are checked too.
        lower_autodiff(&mut m).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for (line, run) in run_lines(&src) {
            let name = run.func;
            if skip.contains(&name) {
                continue;
            }
            let Some(f) = m.get(name) else { continue };
            let sig = m.func(f).sig.clone();
            // Functions with array results: tests/it/array_results.rs.
            if !sig.results.contains(&Type::F64) || sig.results.contains(&Type::Array) {
                continue;
            }
            // A run line that expects a run-time error has no gradient.
            if run
                .expected_results()
                .iter()
                .any(|r| r.starts_with("error:"))
            {
                continue;
            }
            let vals = run_args(&run, &sig.params)
                .unwrap_or_else(|e| panic!("{}:{line}: {e}", path.display()));
            let acts: Vec<ArgActivity> = sig
                .params
                .iter()
                .map(|p| match p.ty {
                    Type::F64 => Active,
                    Type::Array => Dup,
                    _ => Const,
                })
                .collect();
            if acts.iter().all(|a| *a == Const) {
                continue;
            }
            check_gradient(&mut m, name, &vals, &acts, RetActivity::Active, 1e-5);
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} examples were checked");
}

fn seed_plain() -> Module {
    // seed.adz without its custom rule: the rule-free twin.
    let src = example("seed.adz");
    let plain = &src[src.find("// The rule-free twin.").unwrap()..];
    compile(plain)
}

#[test]
fn autodiff_reverse_in_source() {
    let mut m = seed_plain();
    lower_reverse_autodiff(&mut m).unwrap_or_else(|e| panic!("{e}\n{m}"));
    check_ir(&m);
    let dg = m.get("dg_plain").unwrap();
    let out = run(&m, dg, &[Val::Array(vec![2.0]), Val::Array(vec![7.0])]);
    assert_close(
        arr(&out.args[1])[0],
        3.027209981231713,
        1e-15,
        "gradient of g_plain (SPEC §7)",
    );
    let jit = adze_jit::compile(&m, dg, &adze_jit::JitOptions::default()).unwrap();
    let jout = jit
        .call(&[Val::Array(vec![2.0]), Val::Array(vec![7.0])])
        .unwrap();
    assert!(jout.bit_eq(&out));
}

/// Forward over reverse needs forward mode to carry tangents through a tape
/// that is pushed in one function (`f.aug`) and popped in another
/// (`f.adj`); forward.rs currently decides tape activity per function. See
/// "Interplay with forward mode" in docs/ad-reverse.md.
#[test]
fn forward_over_reverse_hvp() {
    let mut m = seed_plain();
    lower_reverse_autodiff(&mut m).unwrap_or_else(|e| panic!("{e}\n{m}"));
    lower_autodiff(&mut m).unwrap_or_else(|e| panic!("{e}\n{m}"));
    check_ir(&m);
    let hvp = m.get("hvp_plain").unwrap();
    let args = [
        Val::Array(vec![2.0]),
        Val::Array(vec![1.0]),
        Val::Array(vec![0.0]),
        Val::Array(vec![0.0]),
    ];
    let out = run(&m, hvp, &args);
    assert_close(
        arr(&out.args[3])[0],
        11.971902924433648,
        1e-12,
        "HVP of g_plain (SPEC §7)",
    );
}

#[test]
fn derivative_inside_a_differentiated_function() {
    // Reverse over forward (f calls the forward derivative of g) and reverse
    // over reverse (f is the gradient of g, reversed again): against finite
    // differences and forward over reverse (in check_gradient), the second
    // also against the exact second derivative -x·sin x + 2 cos x. The
    // primal itself must run (for finite differences).
    let exact = -(0.6 * 0.6f64.sin()) + 0.6f64.cos() * 2.0;
    for (f, want) in [
        (
            "let (y, t) = autodiff(forward, g, dual, dual(x, 1.0)); y * t",
            None,
        ),
        ("autodiff(reverse, g, active, active(x))", Some(exact)),
    ] {
        let mut m = compile(&format!(
            "fn g(x: f64) -> f64 {{ sin(x) * x }}\nfn f(x: f64) -> f64 {{ {f} }}"
        ));
        lower_autodiff(&mut m).unwrap();
        let (x, acts) = (Val::F64(0.6), [Active]);
        let grad = check_gradient(&mut m, "f", &[x], &acts, RetActivity::Active, 1e-6);
        if let Some(want) = want {
            assert_eq!(grad.scalars, vec![want]);
        }
    }
}

#[test]
fn bad_requests_are_errors() {
    let mut m = compile("fn f(x: f64, a: [f64], n: i64) -> f64 { x * a[n] }");
    let f = m.get("f").unwrap();
    for (acts, ret) in [
        (vec![Dup, Dup, Const], RetActivity::Active),
        (vec![Active, Active, Const], RetActivity::Active),
        (vec![Active, Dup, Active], RetActivity::Active),
        (vec![Active, Dup], RetActivity::Active),
        (vec![Active, Dup, Const], RetActivity::Dual),
    ] {
        let r = adze_ad::reverse_derivative(&mut m, &ReverseRequest::new(f, acts, ret));
        assert!(
            matches!(r, Err(adze_ad::AdError::BadRequest { .. })),
            "{r:?}"
        );
    }
    let mut m = compile("fn f(a: mut [f64]) { a[0] = 1.0; }");
    let f = m.get("f").unwrap();
    let r = adze_ad::reverse_derivative(
        &mut m,
        &ReverseRequest::new(f, vec![Dup], RetActivity::Active),
    );
    assert!(
        matches!(r, Err(adze_ad::AdError::BadRequest { .. })),
        "{r:?}"
    );
}

/// A copy of `module` where every function takes a trailing `count: mut
/// arr` and adds 1 to `count[0]` after each `push`, so that a run counts the
/// tape entries it pushes.
fn count_pushes(module: &Module) -> Module {
    let mut out = module.clone();
    let ids: Vec<FuncId> = out.ids().collect();
    for id in ids {
        let f = out.func_mut(id);
        if f.is_declaration() {
            continue;
        }
        f.sig.params.push(Param::mutable_array("count"));
        let entry = f.entry_block().unwrap();
        let cnt = f.dfg.append_block_param(entry, Type::Array);
        let blocks = f.layout.blocks().to_vec();
        for b in blocks {
            let insts = f.layout.block_insts(b).to_vec();
            let mut offset = 0;
            for (pos, inst) in insts.into_iter().enumerate() {
                match f.dfg.inst_mut(inst) {
                    InstData::Call { args, .. } => args.push(cnt),
                    InstData::Push { .. } => {
                        let at = pos + offset + 1;
                        let (zero, z) = make(f, InstData::IConst { imm: 0 }, Type::I64);
                        let (one, o) = make(f, InstData::fconst(1.0), Type::F64);
                        let (ld, c) = make(f, binary(Opcode::Load, cnt, z), Type::F64);
                        let (add, s) = make(f, binary(Opcode::Fadd, c, o), Type::F64);
                        let store = InstData::Ternary {
                            op: Opcode::Store,
                            args: [cnt, z, s],
                        };
                        let st = f.dfg.make_inst(store, &[]);
                        for (k, i) in [zero, one, ld, add, st].into_iter().enumerate() {
                            f.layout.insert_inst(i, b, at + k);
                        }
                        offset += 5;
                    }
                    _ => {}
                }
            }
        }
    }
    verify(&out);
    out
}

/// A new instruction of one result of type `ty`, not yet placed, and that
/// result.
fn make(f: &mut Function, data: InstData, ty: Type) -> (Inst, Value) {
    let inst = f.dfg.make_inst(data, &[ty]);
    (inst, f.dfg.first_result(inst))
}

fn binary(op: Opcode, a: Value, b: Value) -> InstData {
    InstData::Binary { op, args: [a, b] }
}

/// Tape entries pushed by the augmented primal of `name` on `args`.
fn tape_entries(module: &mut Module, name: &str, args: &[Val], acts: &[ArgActivity]) -> f64 {
    let f = module.get(name).unwrap();
    let (aug, _) = split_derivative(
        module,
        &ReverseRequest::new(f, acts.to_vec(), RetActivity::Active),
    )
    .unwrap();
    let counted = count_pushes(module);
    let mut full = args.to_vec();
    full.push(Val::Array(vec![0.0]));
    let out = run(&counted, aug, &full);
    arr(out.args.last().unwrap())[0]
}

#[test]
fn tape_bytes_per_iteration() {
    // Every tape entry is one 8-byte scalar.
    let mut m = compile(&example("rosenbrock.adz"));
    let at = |m: &mut Module, n: usize| {
        tape_entries(m, "rosenbrock", &[Val::Array(direction(1, n))], &[Dup])
    };
    let (a, b) = (at(&mut m, 10), at(&mut m, 110));
    let per_element = (b - a) / 100.0;
    println!(
        "rosenbrock: {} tape entries per element = {} bytes",
        per_element,
        per_element * 8.0
    );
    // Everything its loop reads is recomputed from `x` and `i`; the loop
    // tapes its trip count once.
    assert_eq!(
        per_element, 0.0,
        "rosenbrock tapes {per_element} entries per element"
    );

    let mut m = compile(&example("gmm.adz"));
    for (d, k) in [(2, 2), (3, 3), (8, 10), (16, 10), (32, 10)] {
        let at = |m: &mut Module, n: usize| {
            tape_entries(m, "gmm_objective", &gmm_args(d, k, n, 5), &GMM_ACTS)
        };
        let (a, b) = (at(&mut m, 3), at(&mut m, 13));
        let per_point = (b - a) / 10.0;
        println!(
            "gmm d={d} k={k}: {per_point} tape entries per data point = {} bytes",
            per_point * 8.0
        );
        // Measured (docs/performance.md, *Tape*): 44, 86, 632, 1 192 and
        // 2 312, about 7·K·D: the `exp`s and the local arrays `xc` and
        // `qx` read in the inner loops, and per row of the triangle its
        // `xc[i]` and its trip count. Linear in D: the triangle's inner
        // loop tapes nothing per iteration (it did, K·D²/2, before its
        // `xc[i]` became a loop invariant).
        assert!(
            per_point <= (8 * k * d + 10 * k + 20) as f64,
            "gmm tapes {per_point} entries per point"
        );
    }
}

#[test]
fn snapshot_of_a_small_split_pair() {
    let src = "fn f(x: f64, a: [f64]) -> f64 {
        var s = 0.0;
        for i in 0..len(a) {
            if a[i] > 0.0 { s = s + sin(x * a[i]); }
        }
        s * x
    }";
    let mut m = compile(src);
    let f = m.get("f").unwrap();
    let before = m.len();
    rev(&mut m, "f", &[Active, Dup], RetActivity::Active);
    let mut text = m.display_function(f).to_string();
    for id in m.ids().skip(before) {
        text.push('\n');
        text.push_str(&m.display_function(id).to_string());
    }
    expect_file("rev_loop_branch", &text);
}

/// Compares `text` with `tests/expected/<name>.ir` (`ADZE_BLESS=1`
/// rewrites it).
#[track_caller]
fn expect_file(name: &str, text: &str) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/expected");
    adze_test_support::expect_file(std::path::Path::new(dir).join(format!("{name}.ir")), text);
}

#[test]
fn values_defined_outside_a_loop_are_taped_once_per_loop() {
    // `inner` is a callee: its adjoint takes no scalar, so `x` must come
    // from the tape. It is defined outside the loop, so it is pushed once,
    // where the loop is left, with the trip count; `x * f64(i)` is
    // recomputed from it and the induction variable. Nothing per iteration.
    let src = "fn inner(x: f64, n: i64) -> f64 {
        var s = 0.0;
        for i in 0..n { s = s + sin(x * f64(i)); }
        s
    }
    fn outer(x: f64, n: i64) -> f64 { inner(x, n) * 2.0 }";
    let mut m = compile(src);
    let at = |m: &mut Module, n: i64| {
        tape_entries(m, "outer", &[Val::F64(0.3), Val::I64(n)], &[Active, Const])
    };
    let (a, b) = (at(&mut m, 10), at(&mut m, 110));
    assert_eq!(a, b, "entries per iteration: {}", (b - a) / 100.0);
    // x and the trip count.
    assert_eq!(a, 2.0);
    check_gradient(
        &mut m,
        "outer",
        &[Val::F64(0.3), Val::I64(7)],
        &[Active, Const],
        RetActivity::Active,
        1e-6,
    );
}

#[test]
fn loads_the_same_in_every_iteration_are_taped_once_per_loop() {
    // `t[i]` is read in every iteration of the inner loop, from a local
    // array the inner loop does not write, at an index it does not change,
    // proven in bounds: it is taped once per inner loop (loaded again where
    // the loop is left), not once per iteration. `w[i]`'s array is written
    // in the inner loop, so it stays per iteration; and the inner loop runs
    // zero times for the last `i` (the value is taped, never used).
    let src = "fn tri(x: [f64]) -> f64 {
        let n = len(x);
        let t = zeros(n);
        let w = zeros(n);
        for i in 0..n { t[i] = sin(x[i]); w[i] = x[i]; }
        var s = 0.0;
        for i in 0..n {
            for j in i + 1..n {
                s = s + t[i] * x[j] * t[i];
            }
            for j in i + 1..n {
                w[j] = w[j] + w[i] * x[j];
            }
        }
        for i in 0..n { s = s + w[i] * w[i]; }
        s
    }";
    let mut m = compile(src);
    let xs = |n: usize| Val::Array((0..n).map(|k| 0.3 + 0.1 * k as f64).collect());
    let at = |m: &mut Module, n: usize| tape_entries(m, "tri", &[xs(n)], &[Dup]);
    // Entries for n and n + 1: the triangle grows by n iterations per loop;
    // `t[i]` adds one entry per inner loop, `w[i]` one per iteration of the
    // second (plus what the other loops keep), so the growth is about n,
    // not 2n.
    let (a, b, c) = (at(&mut m, 20), at(&mut m, 21), at(&mut m, 22));
    let (d1, d2) = (b - a, c - b);
    assert!(d2 - d1 <= 1.0, "per-iteration growth: {d1} then {d2}");
    for n in [0, 1, 2, 5] {
        check_gradient(&mut m, "tri", &[xs(n)], &[Dup], RetActivity::Active, 1e-6);
    }
}

#[test]
fn a_samelen_inside_the_loop_is_not_relied_on() {
    // `z[j]` is proven in bounds inside the inner loop only by the
    // `samelen z, b` before it, in the same loop. When the inner loop runs
    // zero times (m = 0) that `samelen` has not run where the loop is left,
    // so loading `z[j]` again there could trap (n = 1 < len b = 3): it is
    // taped per iteration instead. Found by review.
    let src = include_str!("../data/samelen_in_inner_loop.ir");
    let mut m = adze_ir::parse::parse_module(src).unwrap();
    verify(&m);
    let b = Val::Array(vec![1.0, 2.0, 3.0]);
    for (n, mm) in [(1, 0), (3, 2), (3, 0)] {
        check_gradient(
            &mut m,
            "f",
            &[Val::F64(2.0), Val::I64(n), Val::I64(mm), b.clone()],
            &[Active, Const, Const, Const],
            RetActivity::Active,
            1e-6,
        );
    }
}
