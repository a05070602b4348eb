//! The optimizer on programs that need Rust around them: the inliner's
//! output through the whole pipeline, and generated programs. The passes on
//! hand-written IR are filetests: `tests/filetests/opt/*.ir` (see
//! `filetests.rs` for what each is checked for, docs/testing.md for the
//! format).

use crate::filetests::compare;
use crate::support::{check_well_formed, compile};
use adze_interp::Interpreter;
use adze_opt::optimize_module;
use adze_test_support::adze::same_outcome;

/// The inliner's nested regions (`@main` gets `@norm` > `@sum_sq` > `@sq`,
/// twice) go through the whole pipeline unchanged in shape.
#[test]
fn nested_regions_from_the_inliner_survive_the_pipeline() {
    let src = "fn sq(x: f64) -> f64 { x * x }
rule forward sq(x: f64, tx: f64) -> (f64, f64) { (x * x, 2.0 * x * tx) }
fn sum_sq(xs: [f64]) -> f64 { var s = 0.0; for i in 0..len(xs) { s = s + sq(xs[i]) * 1.0; } s }
rule forward sum_sq(xs: [f64], dxs: [f64]) -> (f64, f64) { (sum_sq(xs), 0.0) }
fn norm(xs: [f64]) -> f64 { sqrt(sum_sq(xs) + 0.0) }
rule forward norm(xs: [f64], dxs: [f64]) -> (f64, f64) { (norm(xs), 0.0) }
fn main(xs: [f64]) -> f64 { norm(xs) * (2.0 * 3.0) + norm(xs) }";
    let mut before = compile(src);
    adze_opt::inline_module(&mut before, &adze_opt::DefaultPolicy::default());
    let main = before.get("main").unwrap();
    assert!(before.func(main).regions.len() >= 4, "{before}");
    let mut after = before.clone();
    let stats = optimize_module(&mut after).unwrap();
    assert!(stats.insts_after < stats.insts_before);
    check_well_formed(&after).unwrap();
    assert_eq!(before.func(main).regions, after.func(main).regions);
    compare(&before, &after).unwrap();
}

/// The inliner's generated programs (rules, regions nested by inlining,
/// recursion, local arrays, early returns), inlined and then optimized:
/// every function computes the same bits and errors, and every region is
/// unchanged.
fn check_generated(seed: u64) -> Result<(), proptest::test_runner::TestCaseError> {
    use proptest::test_runner::TestCaseError;
    let src = crate::generated::Gen::program(seed);
    let mut before = compile(&src);
    adze_opt::inline_module(&mut before, &adze_opt::DefaultPolicy { budget: usize::MAX });
    let mut after = before.clone();
    optimize_module(&mut after).map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
    check_well_formed(&after).map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
    for (id, f) in before.iter() {
        if after.func(id).regions != f.regions {
            return Err(TestCaseError::fail(format!(
                "@{}: regions changed\n{src}",
                f.name
            )));
        }
        for args in crate::support::inputs(&before, id) {
            let a = Interpreter::new(&before).call(id, &args);
            let b = Interpreter::new(&after).call(id, &args);
            if !same_outcome(&a, &b) {
                return Err(TestCaseError::fail(format!(
                    "@{}({args:?}):\n  before: {a:?}\n  after:  {b:?}\n{src}\n{after}",
                    f.name
                )));
            }
        }
    }
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: 48, .. proptest::test_runner::Config::default() })]

    #[test]
    fn optimizing_generated_programs_keeps_results_and_regions(seed in proptest::prelude::any::<u64>()) {
        check_generated(seed)?;
    }
}

/// The `load`s and `vload`s of `f`'s parameter `k`.
fn loads_of(f: &adze_ir::Function, k: usize) -> usize {
    let a = f.params()[k];
    f.layout
        .insts()
        .filter(|&(_, i)| {
            matches!(f.dfg.inst(i), adze_ir::InstData::Binary { op, args }
                if matches!(op, adze_ir::Opcode::Load | adze_ir::Opcode::Vload) && args[0] == a)
        })
        .count()
}

/// A callee whose loop reads each element of an array its caller filled
/// before writing it (an adjoint's `x.d[i] += ..` after `fill(dx, 0.0)`)
/// is called as a copy that knows the fill, and its loop loads nothing of
/// the array (`touch`). A call after another that wrote the array keeps
/// the callee. Every function computes the same bits before and after.
#[test]
fn a_callee_of_a_filled_array_reads_the_fill() {
    let src = "fn acc(x: [f64], dx: mut [f64], s: f64) { for i in 0..len(dx) { dx[i] = dx[i] + s * x[i]; } }
fn grad(x: [f64], dx: mut [f64]) { fill(dx, 0.5); acc(x, dx, 2.0); }
fn twice(x: [f64], dx: mut [f64]) { fill(dx, 0.5); acc(x, dx, 2.0); acc(x, dx, 3.0); }";
    let before = compile(src);
    let mut after = before.clone();
    let stats = optimize_module(&mut after).unwrap();
    check_well_formed(&after).unwrap();
    assert_eq!(stats.filled_copies, 1, "{after}");
    let copy = after.get("acc.filled1").expect("the copy");
    let acc = after.get("acc").unwrap();
    let loads_of_dx = |f: &adze_ir::Function| loads_of(f, 1);
    assert_eq!(loads_of_dx(after.func(copy)), 0, "{after}");
    assert!(loads_of_dx(after.func(acc)) > 0, "{after}");
    let calls = |name: &str| -> Vec<adze_ir::FuncId> {
        let f = after.func(after.get(name).unwrap());
        f.layout
            .insts()
            .filter_map(|(_, i)| match f.dfg.inst(i) {
                adze_ir::InstData::Call { func, .. } => Some(*func),
                _ => None,
            })
            .collect()
    };
    assert_eq!(calls("grad"), vec![copy]);
    assert_eq!(calls("twice"), vec![copy, acc]);
    compare(&before, &after).unwrap();
    // And by hand: dx = 0.5 + 2 x, then + 3 x.
    let twice = after.get("twice").unwrap();
    let out = Interpreter::new(&after)
        .call(
            twice,
            &[
                adze_ir::Val::Array(vec![1.0, -2.0]),
                adze_ir::Val::Array(vec![7.0, 7.0]),
            ],
        )
        .unwrap();
    assert!(
        matches!(&out.args[1], adze_ir::Val::Array(a) if *a == vec![5.5, -9.5]),
        "{out:?}"
    );
}

/// A read-only array filled with a constant (kmeans' tangent `ones` in
/// forward over reverse) is known to the copy too, and when the caller
/// passes it apart from every other array, the loop's writes to another
/// parameter do not hide it: its loads read the fill. Passed beside a
/// view of itself as `dx` (the language refuses that; the IR does not), it
/// may be written through `dx`: its loads stay. Every function computes
/// the same bits before and after.
#[test]
fn a_read_only_filled_array_passed_apart_reads_the_fill() {
    let src = "fn acc(w: [f64], dx: mut [f64]) {
    for i in 0..len(w) { dx[i] = dx[i] + w[i] * w[i]; }
}
fn grad(dx: mut [f64]) { let w = zeros(len(dx)); fill(w, 1.5); acc(w, dx); }";
    let same = "function @same(x: mut arr) {
block0(v0: arr):
    v1 = fconst 1.5
    fill v0, v1
    v2 = iconst 0
    v3 = len v0
    v4 = slice v0, v2, v3
    call @acc(v0, v4)
    return
}";
    let mut before = compile(src);
    adze_ir::parse::parse_into(&mut before, same).unwrap();
    let mut after = before.clone();
    optimize_module(&mut after).unwrap();
    check_well_formed(&after).unwrap();
    let loads_of_w = |f: &adze_ir::Function| loads_of(f, 0);
    let called = |name: &str| -> &adze_ir::Function {
        let f = after.func(after.get(name).unwrap());
        let id = f
            .layout
            .insts()
            .find_map(|(_, i)| match f.dfg.inst(i) {
                adze_ir::InstData::Call { func, .. } => Some(*func),
                _ => None,
            })
            .expect("a call");
        after.func(id)
    };
    let acc = after.func(after.get("acc").unwrap());
    let (apart, shared) = (called("grad"), called("same"));
    assert!(apart.name.starts_with("acc.filled0"), "{after}");
    assert!(shared.name.starts_with("acc.filled0"), "{after}");
    assert_ne!(apart.name, shared.name, "{after}");
    // The proven loop reads no `w`; the unproven one still does.
    assert!(loads_of_w(apart) < loads_of_w(acc), "{after}");
    assert_eq!(loads_of_w(shared), loads_of_w(acc), "{after}");
    compare(&before, &after).unwrap();
    // And by hand: dx + 1.5 · 1.5; through one array: x + x · x.
    let run = |name: &str, args: &[adze_ir::Val]| {
        Interpreter::new(&after)
            .call(after.get(name).unwrap(), args)
            .unwrap()
    };
    let out = run("grad", &[adze_ir::Val::Array(vec![1.0, -2.0, 0.0])]);
    assert!(
        matches!(&out.args[0], adze_ir::Val::Array(a) if *a == vec![3.25, 0.25, 2.25]),
        "{out:?}"
    );
    let out = run("same", &[adze_ir::Val::Array(vec![0.0; 3])]);
    assert!(
        matches!(&out.args[0], adze_ir::Val::Array(a) if *a == vec![3.75; 3]),
        "{out:?}"
    );
}

/// A load of a filled array inside a rule region of the copy keeps its
/// load: the caller's constant would be placed in the entry block, and a
/// region's body computes from its arguments only (found in the review
/// of session 25: `sumw`'s loop inlined into `acc`, with a forward rule).
#[test]
fn a_filled_array_read_in_a_rule_region_keeps_its_load() {
    let src = "fn sumw(w: [f64]) -> f64 { var s = 0.0; for i in 0..len(w) { s = s + w[i]; } s }
rule forward sumw(w: [f64], tw: [f64]) -> (f64, f64) {
    var s = 0.0;
    var t = 0.0;
    for i in 0..len(w) { s = s + w[i]; t = t + tw[i]; }
    (s, t)
}
#[inline(never)]
fn acc(w: [f64], dx: mut [f64]) { dx[0] = sumw(w) + dx[0]; }
fn top(x: mut [f64]) { let w = zeros(len(x)); fill(w, 1.5); acc(w, x); }";
    let mut before = compile(src);
    adze_opt::inline_module(&mut before, &adze_opt::DefaultPolicy::default());
    let mut after = before.clone();
    optimize_module(&mut after).unwrap();
    check_well_formed(&after).unwrap();
    let copy = after.func(after.get("acc.filled0").expect("the copy"));
    assert!(!copy.regions.is_empty(), "{after}");
    for (_, region) in copy.regions.iter() {
        let inside: std::collections::HashSet<adze_ir::Block> =
            region.blocks.iter().copied().collect();
        for &b in &region.blocks {
            for &i in copy.layout.block_insts(b) {
                copy.dfg.inst(i).for_each_use(|v| {
                    let here = copy.def_block(v).is_some_and(|d| inside.contains(&d));
                    assert!(
                        here || region.args.contains(&v),
                        "{v} used in the region, defined outside it\n{after}"
                    );
                });
            }
        }
    }
    compare(&before, &after).unwrap();
}
