//! The inliner where Rust is needed around it: provenance and regions
//! compared between one run and two, policies, budgets, determinism, and
//! the documentation's examples. IR in, IR out cases are filetests:
//! `tests/filetests/inline/` (see `filetests.rs`, docs/testing.md).

use crate::support::*;
use adze_ir::Module;
use adze_opt::{inline_functions, inline_module, DefaultPolicy, InlinePolicy, InlineStats};

/// Provenance has the same shape whether nested inlining happens in one run
/// or in two (the callee's own entries are copied as children); every block
/// of an inlined `h` names `h`, then `g` (`filetests/inline/nested_calls.adz`
/// shows the one-run output).
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
    let f = one.func(one.get("f").unwrap());
    let inner = &f.inlined[adze_ir::Inlined::from_u32(1)];
    assert_eq!(f.inlined_chain(inner.blocks[0]), ["h", "g"]);
}

/// `sq` and `sumsq` with rules, `g` calling `sumsq`: the program of
/// `filetests/inline/rule_region.adz` (and `nested_region.adz`).
const RULES: &str = include_str!("../filetests/inline/rule_region.adz");

/// The same, in two runs: first `sumsq` gets its `sq` region; then `sumsq`,
/// region and all, is inlined into `g`, where the copied region's parent is
/// the new `sumsq` region. The region structure is the one-run structure.
/// (`filetests/inline/region_into_third.ir` holds the second run's input
/// and output.)
#[test]
fn region_inlined_into_a_third_function() {
    let mut module = compile_named("rule_region.adz", RULES);
    let policy = DefaultPolicy::default();
    let sumsq = module.get("sumsq").unwrap();
    inline_functions(&mut module, &[sumsq], &policy);
    // The filetest of the second run starts from this module.
    let third = include_str!("../filetests/inline/region_into_third.ir");
    let lines = |t: &str| -> Vec<String> {
        t.lines()
            .take_while(|l| !l.starts_with("; ----"))
            .filter(|l| !l.trim().is_empty() && !l.starts_with(';'))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        lines(third),
        lines(&module.to_string()),
        "the input of region_into_third.ir is not the output of rule_region.adz"
    );
    let mut after = module;
    let g = after.get("g").unwrap();
    inline_functions(&mut after, &[g], &policy);
    check_well_formed(&after).unwrap();
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
