//! IR in, IR out: each case inlines a small program and compares the result
//! with `tests/expected/<case>.ir` (input, statistics and output in one file;
//! `ADZE_BLESS=1` rewrites them). Every case also verifies, round-trips and
//! runs identically before and after.

use crate::support::*;
use adze_ir::Module;
use adze_opt::{inline_functions, inline_module, DefaultPolicy, InlinePolicy, InlineStats};

/// Inlines `module` (all functions, or only `only`), checks it, compares the
/// runs of every function, and snapshots input and output.
fn case(name: &str, module: Module, policy: &dyn InlinePolicy, only: Option<&[&str]>) -> Module {
    check_well_formed(&module).unwrap();
    let mut after = module.clone();
    let stats = match only {
        None => inline_module(&mut after, policy),
        Some(names) => {
            let ids: Vec<_> = names.iter().map(|n| module.get(n).unwrap()).collect();
            inline_functions(&mut after, &ids, policy)
        }
    };
    check_well_formed(&after).unwrap_or_else(|e| panic!("{e}\n{after}"));
    for (id, f) in module.iter() {
        if f.is_declaration() || reaches_autodiff(&module, id) {
            continue;
        }
        for args in inputs(&module, id) {
            compare_runs(&module, &after, &f.name, &args).unwrap();
        }
    }
    let InlineStats { inlined, regions } = stats;
    snapshot(
        &format!("{name}.ir"),
        &format!("; input\n{module}\n; inlined: {inlined}, regions: {regions}\n{after}"),
    );
    after
}

fn default_case(name: &str, src: &str) -> Module {
    case(name, compile(src), &DefaultPolicy::default(), None)
}

#[test]
fn simple_call() {
    default_case(
        "simple_call",
        "fn sq(x: f64) -> f64 { x * x }\n\
         fn f(x: f64) -> f64 { sq(x) + 1.0 }",
    );
}

#[test]
fn several_results() {
    default_case(
        "several_results",
        "fn polar(x: f64, y: f64) -> (f64, f64) { (hypot(x, y), atan2(y, x)) }\n\
         fn f(x: f64, y: f64) -> f64 { let (r, t) = polar(x, y); r * t }",
    );
}

#[test]
fn call_in_loop_and_branch() {
    default_case(
        "loop_and_branch",
        "fn scale(x: f64, k: f64) -> f64 { k * x }\n\
         fn f(xs: [f64], c: f64) -> f64 {\n\
             var s = 0.0;\n\
             for i in 0..len(xs) { s = s + scale(xs[i], 2.0); }\n\
             if c > 0.0 { scale(s, c) } else { s }\n\
         }",
    );
}

#[test]
fn nested_calls() {
    let after = default_case(
        "nested_calls",
        "fn h(x: f64) -> f64 { exp(x) }\n\
         fn g(x: f64) -> f64 { h(x) * h(-x) }\n\
         fn f(x: f64) -> f64 { g(x) + g(2.0 * x) }",
    );
    assert!(!after.to_string().contains("call"), "{after}");
    // Provenance: each inlined call has an entry; the `h` bodies inlined
    // into `g` before `g` was inlined (one run: `g` is copied from the
    // original module, its calls inlined afterwards) are children of `g`'s.
    let f = after.func(after.get("f").unwrap());
    let shape: Vec<_> = f
        .inlined
        .values()
        .map(|d| (d.callee.as_str(), d.parent.map(|p| p.as_u32())))
        .collect();
    assert_eq!(
        shape,
        [
            ("g", None),
            ("h", Some(0)),
            ("h", Some(0)),
            ("g", None),
            ("h", Some(3)),
            ("h", Some(3)),
        ]
    );
    for d in f.inlined.values() {
        let Some(p) = d.parent else { continue };
        assert!(d.blocks.iter().all(|b| f.inlined[p].blocks.contains(b)));
    }
    // Every block of an inlined `h` names `h`, then `g`.
    let inner = &f.inlined[adze_ir::Inlined::from_u32(1)];
    assert_eq!(f.inlined_chain(inner.blocks[0]), ["h", "g"]);
}

/// Provenance has the same shape whether nested inlining happens in one run
/// or in two (the callee's own entries are copied as children).
#[test]
fn provenance_is_the_same_in_one_run_and_two() {
    let src = "fn h(x: f64) -> f64 { exp(x) }\n\
               fn g(x: f64) -> f64 { h(x) * h(-x) }\n\
               fn f(x: f64) -> f64 { g(x) + g(2.0 * x) }";
    let policy = DefaultPolicy::default();
    let shape = |m: &Module| -> Vec<(String, Option<u32>, usize)> {
        let f = m.func(m.get("f").unwrap());
        f.inlined
            .values()
            .map(|d| {
                (
                    d.callee.clone(),
                    d.parent.map(|p| p.as_u32()),
                    d.blocks.len(),
                )
            })
            .collect()
    };
    let mut one = compile(src);
    inline_module(&mut one, &policy);
    let mut two = compile(src);
    let g = two.get("g").unwrap();
    inline_functions(&mut two, &[g], &policy);
    let f = two.get("f").unwrap();
    inline_functions(&mut two, &[f], &policy);
    adze_ir::verify::verify_module(&two).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(shape(&one), shape(&two));
}

#[test]
fn callee_with_early_returns() {
    default_case(
        "early_returns",
        "fn first_neg(x: [f64]) -> i64 {\n\
             for i in 0..len(x) { if x[i] < 0.0 { return i; } }\n\
             if len(x) == 0 { return -2; }\n\
             -1\n\
         }\n\
         fn f(x: [f64]) -> f64 { f64(first_neg(x)) * 0.5 }",
    );
}

#[test]
fn inline_never_is_respected() {
    let after = default_case(
        "inline_never",
        "#[inline(never)]\nfn kept(x: f64) -> f64 { x * x }\n\
         #[inline(always)]\nfn big(x: f64) -> f64 {\n\
             var s = x;\n\
             for i in 0..100 { s = sin(s) + cos(s) * tanh(s) - exp(-s) + log1p(abs(s)) + f64(i); }\n\
             s\n\
         }\n\
         fn f(x: f64) -> f64 { kept(x) + big(x) }",
    );
    let f = after.func(after.get("f").unwrap());
    let text = after.display_function(after.get("f").unwrap()).to_string();
    assert!(text.contains("call @kept"), "{text}");
    assert!(!text.contains("call @big"), "{text}");
    assert!(f.regions.is_empty());
}

#[test]
fn recursion_is_not_inlined() {
    let after = default_case(
        "recursion",
        "fn fact(n: i64) -> f64 { if n <= 1 { return 1.0; } f64(n) * fact(n - 1) }\n\
         fn is_even(n: i64) -> bool { if n == 0 { true } else { is_odd(n - 1) } }\n\
         fn is_odd(n: i64) -> bool { if n == 0 { false } else { is_even(n - 1) } }\n\
         fn half(n: i64) -> i64 { n / 2 }\n\
         fn collatz(n: i64, d: i64) -> i64 {\n\
             if n <= 1 || d > 50 { return d; }\n\
             if n % 2 == 0 { collatz(half(n), d + 1) } else { collatz(3 * n + 1, d + 1) }\n\
         }\n\
         fn f(n: i64) -> f64 { if is_even(n) { fact(n) } else { f64(collatz(n, 0)) } }",
    );
    let text = after.to_string();
    for call in [
        "call @fact(",
        "call @is_even(",
        "call @is_odd(",
        "call @collatz(",
    ] {
        assert!(text.contains(call), "{call} missing:\n{text}");
    }
    // A non-recursive helper of a recursive function is inlined.
    assert!(!text.contains("call @half"), "{text}");
}

const RULES: &str = "\
fn sq(x: f64) -> f64 { x * x }
rule forward sq(x: f64, tx: f64) -> (f64, f64) { (x * x, 2.0 * x * tx) }
rule reverse sq(x: f64, dret: f64) -> f64 { 2.0 * x * dret }
fn sumsq(x: [f64]) -> f64 {
    var s = 0.0;
    for i in 0..len(x) { s = s + sq(x[i]); }
    s
}
rule reverse sumsq(x: [f64], dx: mut [f64], dret: f64) {
    for i in 0..len(x) { dx[i] = dx[i] + 2.0 * x[i] * dret; }
}
fn g(x: [f64]) -> f64 { cos(sumsq(x)) }
";

#[test]
fn callee_with_rules_becomes_a_region() {
    let module = compile(RULES);
    let after = case(
        "rule_region",
        module,
        &DefaultPolicy::default(),
        Some(&["sumsq"]),
    );
    let f = after.func(after.get("sumsq").unwrap());
    assert_eq!(f.regions.len(), 1);
    let r = f.regions.values().next().unwrap();
    assert_eq!(r.callee, after.get("sq").unwrap());
    assert_eq!(r.rules, after.func(r.callee).meta.rules);
    assert_eq!(r.parent, None);
    // The results are the continuation's parameters.
    let cont = match after
        .func(after.get("sumsq").unwrap())
        .dfg
        .value_def(r.results[0])
    {
        adze_ir::ValueDef::Param { block, .. } => *block,
        other => panic!("{other:?}"),
    };
    assert!(!r.blocks.contains(&cont));
}

/// `g` calls `sumsq` (rules) which calls `sq` (rules): inlined in one run,
/// the `sq` region nests in the `sumsq` region.
#[test]
fn nested_region_in_one_run() {
    let after = case(
        "nested_region",
        compile(RULES),
        &DefaultPolicy::default(),
        None,
    );
    let g = after.func(after.get("g").unwrap());
    let regions: Vec<_> = g.regions.values().collect();
    assert_eq!(regions.len(), 2, "{after}");
    assert_eq!(regions[0].callee, after.get("sumsq").unwrap());
    assert_eq!(regions[1].callee, after.get("sq").unwrap());
    assert_eq!(regions[1].parent, Some(adze_ir::Region::from_u32(0)));
    // The inner region's blocks are part of the outer one.
    assert!(regions[1]
        .blocks
        .iter()
        .all(|b| regions[0].blocks.contains(b)));
}

/// The same, in two runs: first `sumsq` gets its `sq` region; then `sumsq`,
/// region and all, is inlined into `g`, where the copied region's parent is
/// the new `sumsq` region. The region structure is the one-run structure.
#[test]
fn region_inlined_into_a_third_function() {
    let mut module = compile(RULES);
    let policy = DefaultPolicy::default();
    let sumsq = module.get("sumsq").unwrap();
    inline_functions(&mut module, &[sumsq], &policy);
    let after = case("region_into_third", module, &policy, Some(&["g"]));
    let g = after.func(after.get("g").unwrap());
    let shape: Vec<_> = g
        .regions
        .values()
        .map(|r| (after.func(r.callee).name.clone(), r.parent, r.blocks.len()))
        .collect();
    let mut one_run = compile(RULES);
    inline_module(&mut one_run, &policy);
    let g1 = one_run.func(one_run.get("g").unwrap());
    let shape1: Vec<_> = g1
        .regions
        .values()
        .map(|r| {
            (
                one_run.func(r.callee).name.clone(),
                r.parent,
                r.blocks.len(),
            )
        })
        .collect();
    assert_eq!(shape, shape1);
}

/// A region whose results are values computed inside it (the form of the
/// example in docs/ir.md), inlined into a caller that is itself inside a
/// region of a fourth function.
#[test]
fn hand_written_region_nested_twice() {
    let text = r#"function @sq(x: f64) -> f64 rules(forward: @sq.fwd) {
block0(v0: f64):
    v1 = fmul v0, v0
    return v1
}

function @sq.fwd(x: f64, x.t: f64) -> (f64, f64) {
block0(v0: f64, v1: f64):
    v2 = fmul v0, v0
    v3 = fconst 2.0
    v4 = fmul v3, v0
    v5 = fmul v4, v1
    return v2, v5
}

function @sum_sq(xs: arr) -> f64 rules(forward: @sum_sq.fwd) {
    region0: @sq(v6) -> (v7) blocks(block3) rules(forward: @sq.fwd)
block0(v0: arr):
    v1 = len v0
    v2 = iconst 0
    v3 = fconst 0.0
    jump block1(v2, v3)
block1(v4: i64, v5: f64):
    v8 = icmp lt v4, v1
    brif v8, block2, block4
block2:
    v6 = load v0, v4
    jump block3
block3:
    v7 = fmul v6, v6
    jump block5
block5:
    v9 = fadd v5, v7
    v10 = iconst 1
    v11 = iadd v4, v10
    jump block1(v11, v9)
block4:
    return v5
}

function @sum_sq.fwd(xs: arr, dxs: arr) -> (f64, f64) inline(never) {
block0(v0: arr, v1: arr):
    v2 = fconst 0.0
    return v2, v2
}

function @norm(xs: arr) -> f64 rules(forward: @sum_sq.fwd) {
block0(v0: arr):
    v1 = call @sum_sq(v0)
    v2 = sqrt v1
    return v2
}

function @main(xs: arr) -> f64 {
block0(v0: arr):
    v1 = call @norm(v0)
    v2 = call @norm(v0)
    v3 = fadd v1, v2
    return v3
}
"#;
    let after = case(
        "hand_written_region",
        parse(text),
        &DefaultPolicy::default(),
        None,
    );
    let main = after.func(after.get("main").unwrap());
    // norm, sum_sq, sq — twice.
    let parents: Vec<_> = main
        .regions
        .values()
        .map(|r| r.parent.map(|p| p.as_u32()))
        .collect();
    assert_eq!(parents, [None, Some(0), Some(1), None, Some(3), Some(4)]);
}

/// Rule functions are ordinary functions: calls to a rule (as derivative IR
/// makes them) are inlined, a rule's own calls are inlined into it, and a
/// rule that carries rules of its own becomes a region.
#[test]
fn rule_function_inlined() {
    let text = r#"function @sq(x: f64) -> f64 rules(forward: @sq.fwd) {
block0(v0: f64):
    v1 = fmul v0, v0
    return v1
}

function @sq.fwd(x: f64, x.t: f64) -> (f64, f64) rules(reverse: @sq.fwd.rev) {
block0(v0: f64, v1: f64):
    v2 = call @sq(v0)
    v3 = fconst 2.0
    v4 = fmul v3, v0
    v5 = fmul v4, v1
    return v2, v5
}

function @sq.fwd.rev(x: f64, x.t: f64, d0: f64, d1: f64) -> (f64, f64) {
block0(v0: f64, v1: f64, v2: f64, v3: f64):
    v4 = fconst 2.0
    v5 = fmul v4, v0
    v6 = fmul v5, v2
    v7 = fmul v4, v1
    v8 = fmul v7, v3
    v9 = fadd v6, v8
    v10 = fmul v5, v3
    return v9, v10
}

function @f.fwd(x: f64, x.t: f64) -> (f64, f64) {
block0(v0: f64, v1: f64):
    v2, v3 = call @sq.fwd(v0, v1)
    v4 = sin v2
    v5 = cos v2
    v6 = fmul v5, v3
    return v4, v6
}
"#;
    let after = case(
        "rule_function",
        parse(text),
        &DefaultPolicy::default(),
        None,
    );
    let ffwd = after.func(after.get("f.fwd").unwrap());
    let callees: Vec<_> = ffwd
        .regions
        .values()
        .map(|r| after.func(r.callee).name.as_str())
        .collect();
    assert_eq!(callees, ["sq.fwd", "sq"]);
    let rule = after.func(after.get("sq.fwd").unwrap());
    assert_eq!(rule.regions.len(), 1);
}

/// A policy that refuses everything leaves the module untouched.
#[test]
fn a_policy_can_refuse_everything() {
    struct Nothing;
    impl InlinePolicy for Nothing {
        fn should_inline(&self, _: &Module, _: adze_ir::FuncId, _: adze_ir::FuncId) -> bool {
            false
        }
    }
    let module = compile(RULES);
    let mut after = module.clone();
    let stats = inline_module(&mut after, &Nothing);
    assert_eq!(stats, InlineStats::default());
    assert_eq!(after.to_string(), module.to_string());
}

/// The `auto` budget counts placed instructions.
#[test]
fn auto_hint_follows_the_budget() {
    let src = "fn sq(x: f64) -> f64 { x * x }\nfn f(x: f64) -> f64 { sq(x) }";
    let module = compile(src);
    let size = module.func(module.get("sq").unwrap()).num_placed_insts();
    for (budget, inlined) in [(size - 1, 0), (size, 1)] {
        let mut m = module.clone();
        let stats = inline_module(&mut m, &DefaultPolicy { budget });
        assert_eq!(stats.inlined, inlined, "budget {budget}");
    }
    assert_eq!(DefaultPolicy::default().budget, adze_opt::DEFAULT_BUDGET);
}

/// A chain where each function calls the next twice would grow
/// exponentially; the total budget stops it, and the result still agrees.
#[test]
fn total_budget_bounds_growth() {
    struct Small;
    impl InlinePolicy for Small {
        fn should_inline(&self, _: &Module, _: adze_ir::FuncId, _: adze_ir::FuncId) -> bool {
            true
        }
        fn max_function_insts(&self) -> usize {
            300
        }
    }
    let mut src = String::from("fn f0(x: f64) -> f64 { sin(x) }\n");
    for k in 1..16 {
        src.push_str(&format!(
            "fn f{k}(x: f64) -> f64 {{ f{j}(x) + f{j}(x * 0.5) }}\n",
            j = k - 1
        ));
    }
    let module = compile(&src);
    let mut after = module.clone();
    let stats = inline_module(&mut after, &Small);
    assert!(stats.inlined > 0);
    check_well_formed(&after).unwrap();
    for (id, f) in after.iter() {
        assert!(f.num_placed_insts() <= 300, "@{}", f.name);
        for args in inputs(&module, id) {
            compare_runs(&module, &after, &f.name, &args).unwrap();
        }
    }
    assert!(after.to_string().contains("call @f"));
}

/// Same input, same output; and inlining a second time changes nothing
/// more when everything inlinable was inlined.
#[test]
fn deterministic_and_idempotent() {
    let src = format!("{RULES}\nfn h(x: [f64], y: f64) -> f64 {{ g(x) * sq(y) + sumsq(x) }}\n");
    let module = compile(&src);
    let policy = DefaultPolicy { budget: usize::MAX };
    let mut a = module.clone();
    let mut b = module.clone();
    let sa = inline_module(&mut a, &policy);
    let sb = inline_module(&mut b, &policy);
    assert_eq!(sa, sb);
    assert_eq!(a.to_string(), b.to_string());
    let again = inline_module(&mut a, &policy);
    assert_eq!(again, InlineStats::default());
    assert_eq!(a.to_string(), b.to_string());
}

/// The examples in the crate and module docs are real output.
#[test]
fn doc_examples_are_real_output() {
    let rules = "\n\nfunction @sq(x: f64) -> f64 rules(forward: @sq.fwd) {
block0(v0: f64):
    v1 = fmul v0, v0
    return v1
}

function @sq.fwd(x: f64, x.t: f64) -> (f64, f64) {
block0(v0: f64, v1: f64):
    v2 = fmul v0, v0
    return v2, v1
}
";
    let cases = [
        (
            include_str!("../../src/inline.rs"),
            "function @f(x: f64) -> f64 {\nblock0(v0: f64):\n    v1 = call @sq(v0)\n    v2 = fadd v1, v0\n    return v2\n}\n",
        ),
        (
            include_str!("../../src/lib.rs"),
            "function @f(x: f64) -> f64 {\nblock0(v0: f64):\n    v1 = call @sq(v0)\n    return v1\n}\n",
        ),
    ];
    for (doc, before) in cases {
        let mut module = parse(&format!("{before}{rules}"));
        let f = module.get("f").unwrap();
        inline_functions(&mut module, &[f], &DefaultPolicy::default());
        let after = module
            .display_function(module.get("f").unwrap())
            .to_string();
        // The doc shows the output, each line prefixed by `//! ` (the crate
        // doc shows it in a right-hand column).
        let doc_text: String = doc
            .lines()
            .filter_map(|l| l.strip_prefix("//!"))
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join("\n");
        for line in after.lines() {
            assert!(
                doc_text.contains(line.trim()),
                "`{line}` not in the doc:\n{after}"
            );
        }
    }
}
