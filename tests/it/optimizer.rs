//! The optimizer never changes a result: every function of every example —
//! as parsed, and after the `ad` stage (inlined, every `autodiff` request
//! lowered) — and the forward and reverse derivatives of every function with
//! a `// run:` line, run on the interpreter and on the JIT before and after
//! `adze_opt::optimize_module`, give the same results, final arrays and
//! errors, bit for bit (on the interpreter NaN payloads included); so do
//! generated programs and their reverse derivatives.

use crate::generated::Gen;
use crate::support::{examples, for_each_run_line, inputs, load, reaches_autodiff, same_run};
use adze::{Session, Stage};
use adze_ir::{FuncId, Mode, Module, Outcome, RunError, Type, Val};
use adze_test_support::adze::same_outcome;
use proptest::prelude::*;

/// An outcome with the bits of every NaN.
pub(crate) fn show(r: &Result<Outcome, RunError>) -> String {
    let val = |v: &Val| match v {
        Val::F64(x) if x.is_nan() => format!("NaN({:#x})", x.to_bits()),
        Val::Array(xs) => format!(
            "{:?}",
            xs.iter()
                .map(|x| match x.is_nan() {
                    true => format!("NaN({:#x})", x.to_bits()),
                    false => format!("{x:?}"),
                })
                .collect::<Vec<_>>()
        ),
        other => format!("{other:?}"),
    };
    match r {
        Ok(o) => format!(
            "results {:?}, args {:?}",
            o.results.iter().map(val).collect::<Vec<_>>(),
            o.args.iter().map(val).collect::<Vec<_>>()
        ),
        Err(e) => format!("{e:?}"),
    }
}

/// The module after `optimize_module` (which verifies after every pass).
pub(crate) fn optimized(module: &Module) -> Module {
    let mut after = module.clone();
    adze_opt::optimize_module(&mut after).unwrap_or_else(|e| panic!("{e}"));
    let text = after.to_string();
    let again = adze_ir::parse::parse_module(&text).unwrap().to_string();
    assert_eq!(again, text, "the optimized module does not round-trip");
    after
}

/// Runs `id` on each argument list on both engines, before and after: the
/// interpreter (which defines the semantics) before and after agree
/// exactly, NaN payloads included; the JIT before and after, and the JIT
/// and the interpreter after, agree as the two engines always do
/// (`Outcome::bit_eq`: NaNs equal NaNs — Cranelift's own constant folding
/// can give a NaN another payload than the interpreter computes, so the
/// JIT's payloads may change when the optimizer folds that operation
/// first). Returns the number of argument lists.
fn agree(what: &str, before: &Module, after: &Module, id: FuncId, all: &[Vec<Val>]) -> usize {
    let name = &before.func(id).name;
    let jit = |m: &Module| {
        adze_jit::compile(m, id, &adze_jit::JitOptions::default())
            .unwrap_or_else(|e| panic!("{what}: @{name}: {e}"))
    };
    let (jb, ja) = (jit(before), jit(after));
    let (ib, ia) = (
        adze_interp::Interpreter::new(before),
        adze_interp::Interpreter::new(after),
    );
    for args in all {
        let (i0, i1) = (ib.call(id, args), ia.call(id, args));
        let (j0, j1) = (jb.call(args), ja.call(args));
        assert!(
            same_outcome(&i0, &i1) && same_run(&j0, &j1) && same_run(&i1, &j1),
            "{what}: @{name}({args:?}):\n  interpreter before: {}\n  interpreter after:  {}\n  \
             jit before:         {}\n  jit after:          {}\n{}",
            show(&i0),
            show(&i1),
            show(&j0),
            show(&j1),
            after.display_function(id)
        );
    }
    all.len()
}

/// Every function of `module` that does not reach an unlowered request.
fn agree_everywhere(what: &str, module: &Module, count: usize) -> usize {
    let after = optimized(module);
    let mut runs = 0;
    for (id, func) in module.iter() {
        if func.is_declaration() || reaches_autodiff(module, id) {
            continue;
        }
        let tys: Vec<Type> = func.sig.param_types().collect();
        runs += agree(what, module, &after, id, &inputs(&tys, count));
    }
    runs
}

#[test]
fn every_example_agrees_after_optimization() {
    let mut runs = 0;
    for path in examples() {
        let session = load(&path);
        let file = path.display().to_string();
        runs += agree_everywhere(&format!("{file} (parsed)"), &session.module, 3);
        let stages = session.stages(None).unwrap();
        let (_, lowered) = stages.iter().find(|(s, _)| *s == Stage::Ad).unwrap();
        runs += agree_everywhere(&format!("{file} (ad)"), lowered, 2);
    }
    assert!(runs >= 400, "only {runs} runs");
}

/// The first-order derivative of `name` in `mode` (with `consts` passed
/// through), unoptimized, and what the optimizer does to its module.
fn derived(
    session: &Session,
    src: &str,
    name: &str,
    mode: Mode,
    consts: &[&str],
) -> (Module, FuncId, adze_opt::OptStats) {
    let consts: Vec<String> = consts.iter().map(|c| c.to_string()).collect();
    let (m, d) = session
        .derive_unoptimized(name, mode, 1, &consts)
        .unwrap_or_else(|e| panic!("{e}\n{src}"));
    let d = m.get(&d).unwrap();
    let mut probe = m.clone();
    let stats = adze_opt::optimize_module(&mut probe).unwrap();
    (m, d, stats)
}

/// `derivative_args` for each of `all`, the primal's arguments named
/// `names` in order.
fn derivative_inputs(
    module: &Module,
    derived: FuncId,
    names: &[&str],
    all: &[Vec<Val>],
) -> Vec<Vec<Val>> {
    all.iter()
        .map(|args| {
            let primal: Vec<(String, Val)> = names
                .iter()
                .map(|n| n.to_string())
                .zip(args.clone())
                .collect();
            derivative_args(module, derived, &primal)
        })
        .collect()
}

/// Arguments for `derived`, a derivative of the function whose arguments are
/// `args`: a parameter `p.t`/`p.d` (tangent or shadow) gets a value shaped
/// like `p`'s, every other parameter `p`'s own value.
pub(crate) fn derivative_args(
    module: &Module,
    derived: FuncId,
    primal: &[(String, Val)],
) -> Vec<Val> {
    let mut out: Vec<Val> = Vec::new();
    for (k, p) in module.func(derived).sig.params.iter().enumerate() {
        let base = p.name.split('.').next().unwrap_or("");
        let own = primal.iter().find(|(n, _)| *n == p.name).map(|(_, v)| v);
        let v = match (own, primal.iter().find(|(n, _)| n == base)) {
            (Some(v), _) => v.clone(),
            (None, Some((_, Val::Array(a)))) => {
                Val::Array((0..a.len()).map(|j| 0.25 * (j + k) as f64 - 0.5).collect())
            }
            _ => match p.ty {
                Type::F64 | Type::F64x2 => Val::F64(0.75),
                Type::I64 => Val::I64(1),
                Type::Bool => Val::Bool(true),
                Type::Array => Val::Array(vec![0.5; 3]),
                Type::IArray => Val::IArray(vec![0, 2, 1]),
            },
        };
        out.push(v);
    }
    out
}

#[test]
fn derivatives_of_the_examples_agree_after_optimization() {
    let mut runs = 0;
    for_each_run_line(|session, at, run, args| {
        let params = &session
            .module
            .func(session.function(run.func).unwrap())
            .sig
            .params;
        let primal: Vec<(String, Val)> = params.iter().map(|p| p.name.clone()).zip(args).collect();
        for mode in [Mode::Forward, Mode::Reverse] {
            // Functions without f64 inputs or results have no derivative.
            let Ok((module, name)) = session.derive_unoptimized(run.func, mode, 1, &[]) else {
                continue;
            };
            let d = module.get(&name).unwrap();
            let args = derivative_args(&module, d, &primal);
            let what = format!("{at} ({name})");
            runs += agree(&what, &module, &optimized(&module), d, &[args]);
        }
    });
    assert!(runs >= 60, "only {runs} derivatives run");
}

/// A generated program and the reverse derivative of its last function.
fn check_generated(seed: u64) -> Result<(), TestCaseError> {
    let src = Gen::program(seed);
    let session = Session::from_source("generated.adz", &src)
        .map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
    let module = &session.module;
    let root = module.ids().last().unwrap();
    let args: Vec<Vec<Val>> = [(0.5, -1.25, 2), (2.0, 0.1, 3), (-0.7, 3.5, 0)]
        .into_iter()
        .map(|(x, y, n)| {
            vec![
                Val::F64(x),
                Val::F64(y),
                Val::I64(n),
                Val::Array(vec![0.3, -1.2, 2.5]),
                Val::Array(vec![0.0; 4]),
            ]
        })
        .collect();
    agree(&src, module, &optimized(module), root, &args);
    let name = module.func(root).name.clone();
    if let Ok((m, d)) = session.derive_unoptimized(&name, Mode::Reverse, 1, &[]) {
        let d = m.get(&d).unwrap();
        let primal: Vec<(String, Val)> = module
            .func(root)
            .sig
            .params
            .iter()
            .map(|p| p.name.clone())
            .zip(args[1].clone())
            .collect();
        let dargs = derivative_args(&m, d, &primal);
        agree(&src, &m, &optimized(&m), d, &[dargs]);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn generated_programs_agree_after_optimization(seed in any::<u64>()) {
        check_generated(seed)?;
    }
}

/// GMM's gradient and its forward-over-reverse Hessian-vector product are
/// where `carry` peels loops (the adjoint's `xc.d[i] += ..` in the
/// triangular loop): optimized and unoptimized agree bit for bit on both
/// engines, on sizes whose inner loops run zero, one and several times.
#[test]
fn gmm_derivatives_with_carried_loads_agree() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut src = std::fs::read_to_string(root.join("ir-examples/gmm.adz")).unwrap();
    src.push_str(
        "
fn grad(d: i64, k: i64, n: i64, alphas: [f64], means: [f64], icf: [f64],
        x: [f64], gamma: f64, m: i64, da: mut [f64], dm: mut [f64], di: mut [f64]) {
    fill(da, 0.0);
    fill(dm, 0.0);
    fill(di, 0.0);
    autodiff(reverse, gmm_objective, active, const(d), const(k), const(n),
             dup(alphas, da), dup(means, dm), dup(icf, di),
             const(x), const(gamma), const(m));
}
",
    );
    let session = Session::from_source("gmm.adz+grad", &src).unwrap();
    let consts: Vec<String> = ["d", "k", "n", "x", "gamma", "m"]
        .map(String::from)
        .to_vec();
    let wave = |n: usize, s: f64| -> Val {
        Val::Array((0..n).map(|j| 0.3 * ((j as f64 + s) * 0.7).sin()).collect())
    };
    let mut runs = 0;
    for (name, mode) in [("gmm_objective", Mode::Reverse), ("grad", Mode::Forward)] {
        let (module, derived) = session.derive_unoptimized(name, mode, 1, &consts).unwrap();
        let after = optimized(&module);
        let mut probe = module.clone();
        let stats = adze_opt::optimize_module(&mut probe).unwrap();
        assert!(stats.carry.loops > 0, "{derived}: no loop peeled");
        let id = module.get(&derived).unwrap();
        let all: Vec<Vec<Val>> = [(1usize, 2usize, 2usize), (2, 1, 3), (4, 3, 2)]
            .into_iter()
            .map(|(d, k, n)| {
                let icf = k * d * (d + 1) / 2;
                let primal = vec![
                    ("d".to_string(), Val::I64(d as i64)),
                    ("k".to_string(), Val::I64(k as i64)),
                    ("n".to_string(), Val::I64(n as i64)),
                    ("alphas".to_string(), wave(k, 0.5)),
                    ("means".to_string(), wave(k * d, 1.5)),
                    ("icf".to_string(), wave(icf, 2.5)),
                    ("x".to_string(), wave(n * d, 3.5)),
                    ("gamma".to_string(), Val::F64(1.25)),
                    ("m".to_string(), Val::I64(1)),
                    ("da".to_string(), Val::Array(vec![0.0; k])),
                    ("dm".to_string(), Val::Array(vec![0.0; k * d])),
                    ("di".to_string(), Val::Array(vec![0.0; icf])),
                ];
                derivative_args(&module, id, &primal)
            })
            .collect();
        runs += agree(&derived, &module, &after, id, &all);
    }
    assert_eq!(runs, 6);
}

/// A count-down loop (the shape of reverse mode's adjoint loops) that
/// `version` copies behind a guard: on the JIT, which compiles the copy
/// without bounds checks, every count and base agrees with the interpreter,
/// those the guard turns away (negative counts, ranges past either end)
/// included, with the same errors.
#[test]
fn versioned_count_down_loops_agree_on_both_engines() {
    let text = include_str!("../../crates/opt/tests/data/count_down.ir");
    let before = adze_ir::parse::parse_module(text).unwrap();
    let mut probe = before.clone();
    let stats = adze_opt::optimize_module(&mut probe).unwrap();
    assert_eq!(stats.version.loops, 1);
    let after = optimized(&before);
    let id = before.get("f").unwrap();
    let mut all = Vec::new();
    for c0 in [-2, -1, 0, 1, 3, 4, 5, i64::MAX, i64::MIN] {
        for base in [-1, 0, 1, 3, i64::MAX] {
            all.push(vec![
                Val::Array(vec![0.5, -1.25, 3.0, 2.0]),
                Val::Array(vec![0.0; 3]),
                Val::I64(c0),
                Val::I64(base),
            ]);
        }
    }
    assert_eq!(agree("versioned", &before, &after, id, &all), 45);
}

/// A loop of the shapes `vectorize` takes (and some it must refuse), from
/// a seed: a split sum, a map into `y`, or an accumulation into `y`, of a
/// random expression of `x[i + a]` (`a` in 0..=2, the bound `len(x) - 2`
/// keeping every access proven), `y[i]`, the parameter `c` and constants.
fn lanes_program(seed: u64) -> String {
    let mut s = seed;
    let mut next = |n: u64| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 33) % n
    };
    fn expr(next: &mut dyn FnMut(u64) -> u64, depth: u32, map: bool, reach: u64) -> String {
        if depth == 0 || next(4) == 0 {
            return match next(if map { 6 } else { 5 }) {
                0..=1 => format!("x[i + {}]", next(reach)),
                2 => "c".into(),
                3 => ["0.5", "-0.0", "3.0", "1e308"][next(4) as usize].into(),
                4 => "x[i]".into(),
                _ => "y[i]".into(),
            };
        }
        let a = expr(next, depth - 1, map, reach);
        match next(10) {
            0 => format!("({a} + {})", expr(next, depth - 1, map, reach)),
            1 => format!("({a} - {})", expr(next, depth - 1, map, reach)),
            2 | 3 => format!("({a} * {})", expr(next, depth - 1, map, reach)),
            4 => format!("({a} / {})", expr(next, depth - 1, map, reach)),
            5 => format!("(-{a})"),
            6 => format!("sqrt({a})"),
            7 => format!("({a} ^ {})", [2, 3, -1, 0][next(4) as usize]),
            // Out-of-line: the loop stays scalar.
            8 if next(3) == 0 => format!("exp({a})"),
            _ => format!("({a} * {a})"),
        }
    }
    let e = expr(&mut next, 3, true, 3);
    // Rosenbrock's shape: the adjoint updates `x.d[i]` and `x.d[i + 1]`.
    let near = format!(
        "s = s + x[i + 1] * {} + x[i] * {};",
        expr(&mut next, 2, false, 2),
        expr(&mut next, 2, false, 2)
    );
    // A local array written one element ahead and read at its own: its
    // adjoint reads, resets and updates `t.d` at neighbouring elements,
    // in either order of the two statements.
    let (a1, a2) = (expr(&mut next, 2, false, 2), expr(&mut next, 2, false, 2));
    let (w1, w2) = (format!("o[i] = t[i] * {a1};"), format!("t[i + 1] = {a2};"));
    let ahead = if next(2) == 0 {
        format!("{w1} {w2}")
    } else {
        format!("{w2} {w1}")
    };
    let body = match next(3) {
        0 => format!("s = s + {};", expr(&mut next, 3, false, 3)),
        1 => format!("y[i] = {e};"),
        _ => format!("y[i] = y[i] + {e};"),
    };
    format!(
        "fn f(x: [f64], y: mut [f64], c: f64) -> f64 {{
    var s = 0.0;
    for i in 0..len(x) - 2 {{ {body} }}
    s
}}

fn g(x: [f64], y: mut [f64], c: f64) -> f64 {{
    let n = len(y);
    var s = 0.0;
    if len(x) >= n + 2 {{
        for i in 0..n {{ {body} }}
    }}
    s * c
}}

fn h(x: [f64], y: mut [f64], c: f64) -> f64 {{
    var s = 0.0;
    for i in 0..len(x) - 1 {{ {near} }}
    s
}}

fn k(x: [f64], y: mut [f64], c: f64) -> f64 {{
    var s = 0.0;
    for j in 1..len(x) {{ let i = j - 1; {near} }}
    s
}}

fn gh(x: [f64], dx: mut [f64], y: mut [f64], c: f64) {{
    autodiff(reverse, h, active, dup(x, dx), const(y), const(c));
}}

fn r(x: [f64], y: mut [f64], c: f64) -> f64 {{
    let n = len(x);
    let t = zeros(n);
    let o = zeros(n);
    for i in 0..n - 1 {{ {ahead} }}
    var q = 0.0;
    for i in 0..n {{ q = q + t[i] + o[i]; }}
    q
}}
"
    )
}

/// `x` and `y` of length `n + 2` and `n`, with special values among them.
fn lanes_inputs(n: usize, k: usize) -> Vec<Val> {
    const V: [f64; 9] = [0.5, -1.25, 2.0, -0.0, 0.0, 3.5, f64::INFINITY, -7.0, 0.125];
    let nan = f64::from_bits(0x7ff8_0000_0000_0bad);
    let x: Vec<f64> = (0..n + 2)
        .map(|j| {
            if (j + k) % 11 == 10 {
                nan
            } else {
                V[(j * 7 + k) % V.len()]
            }
        })
        .collect();
    let y: Vec<f64> = (0..n).map(|j| V[(j * 5 + k + 3) % V.len()]).collect();
    vec![Val::Array(x), Val::Array(y), Val::F64(V[(k + 1) % V.len()])]
}

/// Generated loops of the shapes `vectorize` takes: the primal, its
/// reverse derivative (whose adjoint loops count down behind `version`'s
/// guard) and its forward derivative, optimized and not, on both engines,
/// bit for bit, on lengths that leave 0, 1 and several pairs and an odd
/// iteration; and some loops are in fact given lanes.
#[test]
fn generated_two_lane_loops_agree_after_optimization() {
    let (mut lanes, mut neighbours, mut hvp_neighbours) = (0, 0, 0);
    for seed in 0..96u64 {
        let src = lanes_program(seed);
        let session =
            Session::from_source("lanes.adz", &src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        let all: Vec<Vec<Val>> = (0..7).map(|n| lanes_inputs(n, seed as usize + n)).collect();
        let module = &session.module;
        let after = optimized(module);
        let mut probe = module.clone();
        lanes += adze_opt::optimize_module(&mut probe)
            .unwrap()
            .vectorize
            .loops;
        for name in ["f", "g", "h", "k", "r"] {
            let id = module.get(name).unwrap();
            agree(&src, module, &after, id, &all);
            // And forward over reverse (a Hessian-vector product), whose
            // adjoint loops update two arrays at neighbouring elements.
            if name == "h" {
                let (m, d, stats) = derived(&session, &src, "gh", Mode::Forward, &["c", "y"]);
                let stats = stats.vectorize;
                lanes += stats.loops;
                hvp_neighbours += stats.neighbours;
                let dargs: Vec<Vec<Val>> = all
                    .iter()
                    .map(|args| {
                        let n = match &args[0] {
                            Val::Array(x) => x.len(),
                            _ => 0,
                        };
                        let primal = vec![
                            ("x".to_string(), args[0].clone()),
                            ("dx".to_string(), Val::Array(vec![0.25; n])),
                            ("y".to_string(), args[1].clone()),
                            ("c".to_string(), args[2].clone()),
                        ];
                        derivative_args(&m, d, &primal)
                    })
                    .collect();
                agree(&src, &m, &optimized(&m), d, &dargs);
            }
            for mode in [Mode::Reverse, Mode::Forward] {
                let (m, d, stats) = derived(&session, &src, name, mode, &["c"]);
                let stats = stats.vectorize;
                lanes += stats.loops;
                neighbours += stats.neighbours;
                let dargs = derivative_inputs(&m, d, &["x", "y", "c"], &all);
                agree(&src, &m, &optimized(&m), d, &dargs);
            }
        }
    }
    assert!(lanes >= 96, "only {lanes} loops given lanes");
    assert!(neighbours >= 20, "only {neighbours} neighbour loops");
    assert!(
        hvp_neighbours >= 20,
        "only {hvp_neighbours} in Hessian-vector products"
    );
}

/// A xorshift generator from `state` (odd): `next(n)` draws from `0..n`.
pub(crate) fn xorshift(mut state: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    }
}

/// `n` finite values, from the `k`th on, so that a wrong element shows in
/// a sum (an infinity in every input made most sums NaN, which hid wrong
/// elements in the generated tests below).
pub(crate) fn finite(n: usize, k: usize) -> Val {
    const V: [f64; 7] = [0.5, -1.25, 2.0, -0.0, 3.5, 1.75, -7.0];
    Val::Array((0..n).map(|j| V[(j * 3 + k) % V.len()]).collect())
}

/// `finite(n, k)` with an infinity at `at`.
fn infinite(n: usize, k: usize, at: usize) -> Val {
    let Val::Array(mut v) = finite(n, k) else {
        unreachable!("an array")
    };
    v[at] = f64::INFINITY;
    Val::Array(v)
}

/// Programs of kmeans' and GMM's shape: an inner loop `for l in 0..d` over
/// rows `a[i * d + l]` of arrays whose length the loop cannot relate to
/// `d`, which `vectorize` gives lanes behind a guard over the whole row. Sums and maps, offsets into the next row,
/// rows past the end, `d` zero or negative, arrays passed twice: optimized
/// and not, both engines, bit for bit and trap for trap, the primal and its
/// gradient; and some loops are in fact given lanes behind such a guard.
#[test]
fn generated_strided_loops_agree_after_optimization() {
    let (mut up, mut lanes) = (0, 0);
    for seed in 0..40u64 {
        let mut next = xorshift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let off = ["", " + 1", " + 2"][next(3) as usize];
        let coff = ["", " + 1"][next(2) as usize];
        let rows = ["len(p) / d", "len(p) / d + 1", "m"][next(3) as usize];
        let term = match next(4) {
            0 => "(a - b) * (a - b)".to_string(),
            1 => "a * b + 0.5".to_string(),
            2 => "(a - b) ^ 2 - a".to_string(),
            _ => "sqrt(a * a + b * b)".to_string(),
        };
        let crow = ["l", "j * d + l"][next(2) as usize];
        let src = format!(
            "fn f(p: [f64], c: [f64], d: i64, m: i64) -> f64 {{
    var s = 0.0;
    if d > 0 {{
        for i in 0..{rows} {{
            for j in 0..2 {{
                var t = 0.0;
                for l in 0..d {{
                    let a = p[i * d + l{off}];
                    let b = c[{crow}{coff}];
                    t = t + {term};
                }}
                s = s + t * f64(j + 1);
            }}
        }}
    }}
    s
}}

fn g(p: [f64], c: mut [f64], d: i64, m: i64) -> f64 {{
    if d > 0 {{
        for i in 0..{rows} {{
            for l in 0..d {{
                let a = p[i * d + l{off}];
                let b = c[l{coff}];
                c[l{coff}] = {term};
            }}
        }}
    }}
    c[0]
}}
"
        );
        let session =
            Session::from_source("strided.adz", &src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        let module = &session.module;
        let mut probe = module.clone();
        let stats = adze_opt::optimize_module(&mut probe).unwrap();
        up += stats.vectorize.ranged;
        lanes += stats.vectorize.loops;
        let mut all = Vec::new();
        for (k, (np, nc, d, m)) in [
            (12, 8, 3, 4),
            (12, 8, 4, 3),
            (13, 9, 4, 3),
            (9, 9, 3, 3),
            (9, 4, 3, 2),
            (8, 8, 2, 5),
            (0, 3, 2, 0),
            (7, 7, 0, 1),
            (7, 7, -2, 1),
            (16, 16, 5, 3),
            (16, 2, 1, 16),
        ]
        .into_iter()
        .enumerate()
        {
            all.push(vec![
                finite(np, k),
                finite(nc, k + 1),
                Val::I64(d),
                Val::I64(m),
            ]);
        }
        all.push(vec![
            infinite(12, 2, 5),
            finite(8, 3),
            Val::I64(3),
            Val::I64(4),
        ]);
        for name in ["f", "g"] {
            let id = module.get(name).unwrap();
            agree(&src, module, &optimized(module), id, &all);
        }
        let (m, d, stats) = derived(&session, &src, "f", Mode::Reverse, &["p", "c"]);
        up += stats.vectorize.ranged;
        lanes += stats.vectorize.loops;
        let dargs = derivative_inputs(&m, d, &["p", "c", "d", "m"], &all);
        agree(&src, &m, &optimized(&m), d, &dargs);
    }
    assert!(up >= 40, "only {up} loops given lanes behind a range guard");
    assert!(lanes >= 40, "only {lanes} loops given lanes");
}

/// Generated rows of GMM's second style and kmeans (session 22): an inner
/// loop over a triangle's row (`for col in 0..row + k`) or a whole row
/// (`0..s`), reading or writing `q[row * s + col + c]` (the product either
/// way round, or of `len(x)`), whose lanes' guard checks every row at once
/// before the rows' loop (`vectorize`, hoisted rows). Strides of zero, one
/// too short, negative, and `2^32` rows of `2^32` (whose product wraps to
/// 0); rows past the end; an outer bound past `len(x)`:
/// optimized and not, both engines, bit for bit and trap for trap, the
/// primal and its gradient; and the guards are in fact hoisted.
#[test]
fn generated_hoisted_rows_agree_after_optimization() {
    let (mut hoisted, mut lanes) = (0, 0);
    for seed in 0..36u64 {
        let mut next = xorshift(seed.wrapping_mul(0x5851_f42d_4c95_7f2d) | 1);
        let outer = ["len(x)", "n", "len(x) + 1", "n - 1"][next(4) as usize];
        let inner = ["row + 1", "row", "row + 2", "s", "len(x)"][next(5) as usize];
        let base = ["row * s", "s * row", "row * len(x)", "(row + 1) * s"][next(4) as usize];
        let off = ["", " + 1"][next(2) as usize];
        let src = format!(
            "fn f(q: [f64], x: [f64], mu: [f64], s: i64, n: i64) -> f64 {{
    var total = 0.0;
    for row in 0..{outer} {{
        var dot = 0.0;
        for col in 0..{inner} {{
            dot = dot + q[{base} + col{off}] * (x[col] - mu[col]);
        }}
        total = total + dot * dot;
    }}
    total
}}

fn g(q: mut [f64], x: [f64], mu: [f64], s: i64, n: i64) -> f64 {{
    for row in 0..{outer} {{
        for col in 0..{inner} {{
            q[{base} + col{off}] = q[{base} + col{off}] * 0.5 + x[col] * mu[col];
        }}
    }}
    q[0]
}}

fn h(q: [f64], x: [f64], mu: [f64], s: i64, n: i64) -> f64 {{
    var total = 0.0;
    for row in 0..{outer} {{
        for col in 0..{inner} {{ total = total + q[{base} + col{off}]; }}
    }}
    total
}}
"
        );
        let session =
            Session::from_source("rows.adz", &src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        let module = &session.module;
        let mut probe = module.clone();
        let stats = adze_opt::optimize_module(&mut probe).unwrap();
        hoisted += stats.vectorize.hoisted;
        lanes += stats.vectorize.loops;
        let mut all = Vec::new();
        for (k, (nq, nx, nmu, s, n)) in [
            (36, 6, 6, 6, 6),
            (49, 7, 7, 7, 7),
            (35, 6, 6, 6, 6),
            (37, 6, 6, 6, 5),
            (42, 6, 6, 7, 6),
            (30, 6, 6, 5, 6),
            (36, 6, 5, 6, 6),
            (36, 6, 6, 0, 6),
            (36, 6, 6, -6, 6),
            (16, 4, 9, 4, 9),
            (64, 8, 8, 8, 3),
            (0, 0, 0, 3, 0),
            (9, 3, 3, 3, i64::MIN),
            (9, 3, 3, i64::MAX, 3),
            (40, 6, 6, 1 << 32, 2),
            (40, 6, 6, 1 << 32, 1 << 32),
            (40, 6, 6, (1 << 31) + 1, 1 << 31),
        ]
        .into_iter()
        .enumerate()
        {
            all.push(vec![
                finite(nq, k),
                finite(nx, k + 1),
                finite(nmu, k + 2),
                Val::I64(s),
                Val::I64(n),
            ]);
        }
        all.push(vec![
            infinite(36, 2, 11),
            finite(6, 3),
            finite(6, 4),
            Val::I64(6),
            Val::I64(6),
        ]);
        for name in ["f", "g", "h"] {
            let id = module.get(name).unwrap();
            agree(&src, module, &optimized(module), id, &all);
        }
        let (m, d, stats) = derived(&session, &src, "f", Mode::Reverse, &["x"]);
        hoisted += stats.vectorize.hoisted;
        lanes += stats.vectorize.loops;
        let dargs = derivative_inputs(&m, d, &["q", "x", "mu", "s", "n"], &all);
        agree(&src, &m, &optimized(&m), d, &dargs);
    }
    assert!(hoisted >= 30, "only {hoisted} guards hoisted");
    assert!(lanes >= 60, "only {lanes} loops given lanes");
}

/// Generated triangles, session 19's shapes: `for j in s..n + k` from a
/// start `i + c` of an outer loop or a parameter (odd, even, negative,
/// past the end), a running index `li` stepping with `j` (`indvars`'
/// offsets), a load the same in both lanes (`xc[i]`), a store at `j` (the
/// aligned pairs' peel) or a sum: optimized and not, both engines, bit for
/// bit and trap for trap (errors in the peeled iteration included), the
/// primal and its gradient. Mutations caught when this was written: the
/// peel's next counter `i0` instead of `i0 + 1`, a constant start's `+ 2`,
/// `indvars`' offset `p0 - q0`.
#[test]
fn generated_triangles_agree_after_optimization() {
    let (mut lanes, mut offsets) = (0, 0);
    for seed in 0..32u64 {
        let mut next = xorshift(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
        let start = ["i + 1", "i", "i + 2", "s", "s + i", "1"][next(6) as usize];
        let bound = ["n", "n + 1", "n - 1", "d"][next(4) as usize];
        let step = ["li + 1", "li + 1", "li + 2"][next(3) as usize];
        let term = ["a[li] * xc[i]", "a[li] + xc[j]", "a[li] * a[li] - xc[i]"][next(3) as usize];
        let src = format!(
            "fn f(a: [f64], xc: [f64], s: i64, n: i64, d: i64) -> f64 {{
    let q = zeros(len(xc));
    var li = d;
    for i in 0..len(xc) {{
        for j in {start}..{bound} {{
            q[j] = q[j] + {term};
            li = {step};
        }}
    }}
    var t = 0.0;
    for j in 0..len(q) {{ t = t + q[j] * q[j]; }}
    t
}}

fn g(a: [f64], xc: [f64], s: i64, n: i64, d: i64) -> f64 {{
    var t = 0.0;
    var li = d;
    for i in 0..len(xc) {{
        var u = 0.0;
        for j in {start}..{bound} {{
            u = u + {term};
            li = {step};
        }}
        t = t + u * u;
    }}
    t
}}
"
        );
        let session =
            Session::from_source("triangles.adz", &src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        let module = &session.module;
        let mut probe = module.clone();
        let stats = adze_opt::optimize_module(&mut probe).unwrap();
        lanes += stats.vectorize.loops;
        offsets += stats.indvars.offset;
        let mut all = Vec::new();
        for (k, (na, nx, s, n, d)) in [
            (40, 6, 1, 6, 6),
            (40, 6, 0, 6, 0),
            (40, 7, 3, 7, 2),
            (12, 6, 1, 6, 6),
            (40, 6, -1, 6, 1),
            (40, 6, 5, 4, 1),
            (40, 8, 2, 9, 0),
            (40, 6, i64::MAX, 6, 0),
            (40, 6, 1, i64::MIN, 0),
            (40, 6, 1, i64::MAX, 0),
            (40, 0, 0, 3, 0),
        ]
        .into_iter()
        .enumerate()
        {
            all.push(vec![
                finite(na, k),
                finite(nx, k + 1),
                Val::I64(s),
                Val::I64(n),
                Val::I64(d),
            ]);
        }
        all.push(vec![
            infinite(40, 3, 9),
            finite(6, 1),
            Val::I64(1),
            Val::I64(6),
            Val::I64(0),
        ]);
        for name in ["f", "g"] {
            let id = module.get(name).unwrap();
            agree(&src, module, &optimized(module), id, &all);
            let (m, did, stats) = derived(&session, &src, name, Mode::Reverse, &["a", "xc"]);
            lanes += stats.vectorize.loops;
            let dargs = derivative_inputs(&m, did, &["a", "xc", "s", "n", "d"], &all);
            agree(&src, &m, &optimized(&m), did, &dargs);
        }
    }
    assert!(lanes >= 100, "only {lanes} loops given lanes");
    assert!(offsets >= 20, "only {offsets} offset counters");
}

/// A user's guard over a loop whose bound wraps: `if n <= len(a)` over
/// `for l in 0..n - 1` says nothing at `n = i64::MIN`, where `n - 1` is
/// `i64::MAX`. The bounds proof used to accept it (the review of session
/// 18: the JIT read past the end, returned 3.0 where the interpreter
/// trapped, and a store corrupted the heap); it now asks `n >= 0` of a
/// bound with an offset. Both engines, optimized and not, trap alike.
#[test]
fn a_guard_over_a_wrapping_bound_proves_nothing() {
    let src = "
fn f(a: [f64], n: i64) -> f64 {
    var s = 0.0;
    if n <= len(a) {
        for l in 0..n - 1 { if l == 4 { break; } s = s + a[l]; }
    }
    s
}
fn g(y: mut [f64], n: i64) -> f64 {
    if n <= len(y) { for l in 0..n - 1 { if l == 6 { break; } y[l] = 7.0; } }
    y[0]
}
fn h(a: [f64], n: i64) -> f64 {
    var s = 0.0;
    if n <= len(a) {
        for i in 0..n - 1 { s = s + a[i] * 2.0; }
    }
    s
}
// Session 19's review: a counter stepping by 2 below `n - 1` under `n <=
// len(a)`, from a start near `i64::MAX`; at `n = i64::MIN` the bound wraps
// to `i64::MAX`, the counter wraps, and `a[k]` must still be checked.
fn k(a: [f64], n: i64) -> f64 {
    var s = 0.0;
    if n <= len(a) {
        var j = 9223372036854775802;
        while j < n - 1 {
            for m in j..len(a) { s = s + a[m]; }
            j = j + 2;
        }
    }
    s
}
";
    let session = Session::from_source("wrap.adz", src).unwrap();
    let module = &session.module;
    let all: Vec<Vec<Val>> = [i64::MIN, i64::MIN + 1, -1, 0, 1, 2, 3]
        .into_iter()
        .map(|n| vec![Val::Array(vec![1.0, 2.0]), Val::I64(n)])
        .collect();
    for name in ["f", "g", "h", "k"] {
        agree(
            src,
            module,
            &optimized(module),
            module.get(name).unwrap(),
            &all,
        );
    }
}

/// A neighbour array whose high element is reset before the low one is
/// read (the adjoint of `t[i + 1] = ..` after `o[i] = t[i] * 1.5`: it reads
/// `t.d[i + 1]`, stores 0.0 there, then updates `t.d[i]`). In lanes lane 0's
/// high element is lane 1's low one, so every high store must come after
/// the low loads (the review of session 17 found the gradient wrong: `x.d
/// = [5, 6, 6, 0]` for `[5, 10, 6, 0]`). The gradient and the HVP,
/// optimized and not, on both engines, and the loop is given lanes.
#[test]
fn a_neighbour_reset_before_the_low_load_keeps_its_order() {
    let src = "
fn f(x: [f64]) -> f64 {
    let n = len(x);
    let t = zeros(n);
    let o = zeros(n);
    for i in 0..n - 1 {
        o[i] = t[i] * 1.5;
        t[i + 1] = x[i] * x[i];
    }
    var q = 0.0;
    for i in 0..n { q = q + t[i] + o[i]; }
    q
}
fn g(x: [f64], dx: mut [f64]) { autodiff(reverse, f, active, dup(x, dx)); }
";
    let session = Session::from_source("reset.adz", src).unwrap();
    let stages = session.stages(None).unwrap();
    let (_, module) = stages.iter().find(|(s, _)| *s == Stage::Ad).unwrap();
    let mut probe = module.clone();
    let stats = adze_opt::optimize_module(&mut probe).unwrap().vectorize;
    assert!(stats.neighbours > 0, "{stats:?}");
    let g = module.get("g").unwrap();
    let all: Vec<Vec<Val>> = (0..7)
        .map(|n| {
            let x: Vec<f64> = (0..n).map(|j| 1.0 + j as f64).collect();
            vec![Val::Array(x), Val::Array(vec![0.0; n])]
        })
        .collect();
    agree(src, module, &optimized(module), g, &all);
    let out = adze_interp::Interpreter::new(&probe)
        .call(g, &all[4])
        .unwrap();
    assert_eq!(out.args[1], Val::Array(vec![5.0, 10.0, 6.0, 0.0]));
    let (m, d) = session
        .derive_unoptimized("g", Mode::Forward, 1, &[])
        .unwrap();
    let d = m.get(&d).unwrap();
    let dargs: Vec<Vec<Val>> = all
        .iter()
        .map(|args| {
            let primal = vec![
                ("x".to_string(), args[0].clone()),
                ("dx".to_string(), args[1].clone()),
            ];
            derivative_args(&m, d, &primal)
        })
        .collect();
    agree(src, &m, &optimized(&m), d, &dargs);
}

/// Every two-lane access `vectorize` emits in these loops is proven in
/// bounds by `adze_ir::bounds` (what the JIT reads to drop its checks):
/// GMM's triangle in both styles (`li` an offset counter, `xc[i]` the same
/// in both lanes, a start `i + 1`, a bound `row + 1`), a storing loop from
/// an odd start (its first iteration alone, the lanes from `s + 1`, under
/// a bound `n + 1` too: session 19's third review), kmeans' rows, and
/// the gradients of three of them. Speed, not correctness: an unproven access keeps its
/// check. Session 19's reviews found two kinds of lanes that kept theirs.
#[test]
fn every_lanes_access_is_proven() {
    let src = "
fn tri(icf: [f64], xc: [f64], d: i64) -> f64 {
    let qx = zeros(d);
    var li = d;
    for i in 0..d {
        for j in i + 1..d {
            qx[j] = qx[j] + icf[li] * xc[i];
            li = li + 1;
        }
    }
    var s = 0.0;
    for j in 0..d { s = s + qx[j] * qx[j]; }
    s
}
fn maha(q: [f64], x: [f64], mu: [f64]) -> f64 {
    let d = len(x);
    var total = 0.0;
    for row in 0..d {
        var dot = 0.0;
        for col in 0..row + 1 { dot = dot + q[row * d + col] * (x[col] - mu[col]); }
        total = total + dot * dot;
    }
    total
}
fn maha1(q: [f64], x: [f64], mu: [f64]) -> f64 {
    let d = len(x);
    var total = 0.0;
    for row in 0..d {
        var dot = 0.0;
        for col in 0..row + 1 { dot = dot + q[row * d + col + 1] * (x[col] - mu[col]); }
        total = total + dot * dot;
    }
    total
}
fn odd(y: mut [f64], x: [f64], s: i64, n: i64) {
    for j in s..n { y[j] = y[j] * 0.5 + x[j]; }
}
fn past(x: [f64], z: mut [f64], n: i64, m: i64) {
    for i in 0..m { for j in i + 1..n + 1 { z[j] = z[j] * 0.5 + x[j]; } }
}
fn rows(p: [f64], c: [f64], d: i64) -> f64 {
    var t = 0.0;
    for i in 0..len(p) / d {
        for k in 0..len(c) / d {
            var e = 0.0;
            for l in 0..d { let u = p[i * d + l] - c[k * d + l]; e = e + u * u; }
            t = t + e;
        }
    }
    t
}
fn dtri(icf: [f64], di: mut [f64], xc: [f64], d: i64) {
    autodiff(reverse, tri, active, dup(icf, di), const(xc), const(d));
}
fn dmaha(q: [f64], dq: mut [f64], x: [f64], mu: [f64], dmu: mut [f64]) {
    autodiff(reverse, maha, active, dup(q, dq), const(x), dup(mu, dmu));
}
fn drows(p: [f64], c: [f64], dc: mut [f64], d: i64) {
    autodiff(reverse, rows, active, const(p), dup(c, dc), const(d));
}
";
    let session = Session::from_source("lanes.adz", src).unwrap();
    let mut with_lanes = Vec::new();
    let roots = [
        "tri", "maha", "odd", "past", "rows", "dtri", "dmaha", "drows", "maha1",
    ];
    let modules: Vec<Module> = roots
        .iter()
        .map(|r| session.prepare(r).unwrap_or_else(|e| panic!("{r}: {e}")))
        .collect();
    for (after, id) in modules.iter().flat_map(|m| m.ids().map(move |id| (m, id))) {
        let f = after.func(id);
        let safe = adze_ir::bounds::safe_accesses_below_start(f);
        for (b, inst) in f.layout.insts() {
            if matches!(
                f.dfg.inst(inst).opcode(),
                adze_ir::Opcode::Vload | adze_ir::Opcode::Vstore
            ) {
                with_lanes.push(f.name.clone());
                assert!(
                    safe.contains(inst),
                    "{}: {b}'s {} is not proven:\n{f}",
                    f.name,
                    f.dfg.inst(inst).opcode().name()
                );
            }
        }
    }
    // Each primal's loop got lanes, and so did two gradients' adjoints
    // (the triangle's reverse, a count-down loop with a second counter,
    // has none yet).
    for name in [
        "tri", "maha", "odd", "past", "rows", "maha.adj", "rows.adj", "maha1",
    ] {
        assert!(
            with_lanes
                .iter()
                .any(|n| n == name || n.starts_with(&format!("{name}."))),
            "no lanes in {name}: {with_lanes:?}"
        );
    }
    // The last element of an odd row runs below the guard, proven too
    // (session 22): `maha`'s three loads, `rows`' two.
    for (root, name, loads) in [(1, "maha", 3), (4, "rows", 2)] {
        let m = &modules[root];
        let f = m.func(m.get(name).unwrap());
        let safe = adze_ir::bounds::safe_accesses_below_start(f);
        let scalar = f
            .layout
            .insts()
            .filter(|&(_, i)| f.dfg.inst(i).opcode() == adze_ir::Opcode::Load && safe.contains(i))
            .count();
        assert!(
            scalar >= loads,
            "{name}: {scalar} scalar loads proven:\n{f}"
        );
    }
}
