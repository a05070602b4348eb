//! Warnings about rules that do not cover a mode the program
//! differentiates a function in (issue #13, item 8): exactly the functions
//! some pass of the other mode meets, through calls and nested `autodiff`s.

use adze_ir::Mode;

/// The names in the program's warnings, in order.
fn warned(src: &str) -> Vec<String> {
    warned_for(src, true, &[])
}

fn warned_for(src: &str, program: bool, requests: &[(&str, Mode)]) -> Vec<String> {
    let (_, coverage) =
        adze_lang::compile_with_coverage("t.adz", src).unwrap_or_else(|d| panic!("{}", d.render()));
    match coverage.warnings_for(program, requests) {
        None => Vec::new(),
        Some(d) => d
            .errors()
            .iter()
            .map(|w| {
                assert_eq!(w.severity, adze_lang::Severity::Warning);
                let name = w.message.split('`').nth(1).unwrap().to_string();
                let mode = if w.message.contains("no reverse rule") {
                    "reverse"
                } else {
                    "forward"
                };
                format!("{name}:{mode}")
            })
            .collect(),
    }
}

const FWD_ONLY: &str = "fn f(x: f64) -> f64 { x * x }
rule forward f(x: f64, tx: f64) -> (f64, f64) { (x * x, 2.0 * x * tx) }
";

const REV_ONLY: &str = "fn r(x: f64) -> f64 { x * x }
rule reverse r(x: f64, dret: f64) -> f64 { 2.0 * x * dret }
";

#[test]
fn the_target_of_an_autodiff_of_the_other_mode() {
    let src =
        format!("{FWD_ONLY}fn g(x: f64) -> f64 {{ autodiff(reverse, f, active, active(x)) }}");
    assert_eq!(warned(&src), ["f:reverse"]);
    let src = format!(
        "{REV_ONLY}fn g(x: f64) -> (f64, f64) {{ autodiff(forward, r, dual, dual(x, 1.0)) }}"
    );
    assert_eq!(warned(&src), ["r:forward"]);
}

#[test]
fn only_the_modes_the_rules_cover_no_warning() {
    let src = format!(
        "{FWD_ONLY}{REV_ONLY}
fn h(x: f64) -> f64 {{ f(x) + r(x) }}
fn df(x: f64) -> (f64, f64) {{ autodiff(forward, f, dual, dual(x, 1.0)) }}
fn dr(x: f64) -> f64 {{ autodiff(reverse, r, active, active(x)) }}
fn dh_unused(x: f64) -> f64 {{ h(x) }}"
    );
    assert!(warned(&src).is_empty());
    // No `autodiff` at all.
    assert!(warned(FWD_ONLY).is_empty());
    // Both rules: every mode covered.
    let both = "fn b(x: f64) -> f64 { x * x }
rule forward b(x: f64, tx: f64) -> (f64, f64) { (x * x, 2.0 * x * tx) }
rule reverse b(x: f64, dret: f64) -> f64 { 2.0 * x * dret }
fn g(x: f64) -> f64 { autodiff(reverse, b, active, active(x)) }
fn k(x: f64) -> (f64, f64) { autodiff(forward, b, dual, dual(x, 1.0)) }";
    assert!(warned(both).is_empty());
}

#[test]
fn through_calls() {
    let src = format!(
        "{FWD_ONLY}fn mid(x: f64) -> f64 {{ sin(f(x)) }}
fn top(x: f64) -> f64 {{ mid(x) * 2.0 }}
fn g(x: f64) -> f64 {{ autodiff(reverse, top, active, active(x)) }}"
    );
    assert_eq!(warned(&src), ["f:reverse"]);
    // A forward derivative of the same chain uses the rule.
    let src = format!(
        "{FWD_ONLY}fn mid(x: f64) -> f64 {{ sin(f(x)) }}
fn g(x: f64) -> (f64, f64) {{ autodiff(forward, mid, dual, dual(x, 1.0)) }}"
    );
    assert!(warned(&src).is_empty());
}

#[test]
fn through_nested_autodiffs() {
    // Forward over reverse (the seed's HVP): the reverse pass applies `r`'s
    // rule, the forward pass differentiates the rule and `r`'s body (the
    // primal call the reverse derivative keeps).
    let src = format!(
        "{REV_ONLY}fn g(x: f64) -> f64 {{ cos(r(x)) }}
fn dg(x: f64) -> f64 {{ autodiff(reverse, g, active, active(x)) }}
fn hvp(x: f64) -> (f64, f64) {{ autodiff(forward, dg, dual, dual(x, 1.0)) }}"
    );
    assert_eq!(warned(&src), ["r:forward"]);
    // Without the outer forward derivative: nothing.
    let src = format!(
        "{REV_ONLY}fn g(x: f64) -> f64 {{ cos(r(x)) }}
fn dg(x: f64) -> f64 {{ autodiff(reverse, g, active, active(x)) }}"
    );
    assert!(warned(&src).is_empty());
    // Reverse over forward of a function with a forward rule: the reverse
    // pass differentiates the forward rule, never `f`'s body.
    let src = format!(
        "{FWD_ONLY}fn df(x: f64) -> f64 {{
    let (y, dy) = autodiff(forward, f, dual, dual(x, 1.0));
    dy
}}
fn ddf(x: f64) -> f64 {{ autodiff(reverse, df, active, active(x)) }}"
    );
    assert!(warned(&src).is_empty());
    // Reverse over reverse of a function with a reverse rule: the outer
    // pass meets the rule and the primal call, and has the rule for `r`.
    let src = format!(
        "{REV_ONLY}fn dr(x: f64) -> f64 {{ autodiff(reverse, r, active, active(x)) }}
fn ddr(x: f64) -> f64 {{ autodiff(reverse, dr, active, active(x)) }}"
    );
    assert!(warned(&src).is_empty());
}

#[test]
fn inside_rules() {
    // `a`'s reverse rule calls `r`; forward over reverse of `a`
    // differentiates that rule in forward mode, and so meets `r`.
    let src = format!(
        "{REV_ONLY}fn a(x: f64) -> f64 {{ x * x * x }}
rule reverse a(x: f64, dret: f64) -> f64 {{ 3.0 * r(x) * dret }}
fn da(x: f64) -> f64 {{ autodiff(reverse, a, active, active(x)) }}
fn hvp(x: f64) -> (f64, f64) {{ autodiff(forward, da, dual, dual(x, 1.0)) }}"
    );
    // Sorted by the position of the rule.
    assert_eq!(warned(&src), ["r:forward", "a:forward"]);
}

#[test]
fn requests_from_outside_the_file() {
    let src = format!("{FWD_ONLY}fn g(x: f64) -> f64 {{ f(x) + 1.0 }}");
    assert!(warned(&src).is_empty());
    assert_eq!(
        warned_for(&src, false, &[("g", Mode::Reverse)]),
        ["f:reverse"]
    );
    assert!(warned_for(&src, false, &[("g", Mode::Forward)]).is_empty());
    assert!(warned_for(&src, false, &[("nope", Mode::Reverse)]).is_empty());
}

#[test]
fn the_warning_points_at_the_rule_and_the_request() {
    let src = format!(
        "{FWD_ONLY}fn mid(x: f64) -> f64 {{ f(x) }}
fn g(x: f64) -> f64 {{ autodiff(reverse, mid, active, active(x)) }}"
    );
    let (_, coverage) = adze_lang::compile_with_coverage("t.adz", &src).unwrap();
    let w = coverage.warnings().unwrap();
    assert_eq!(
        w.summary(),
        "t.adz:2:1: warning: `f` has no reverse rule, but reverse mode differentiates it: \
         its forward rule is ignored there"
    );
    let r = w.render();
    assert!(r.starts_with("warning: "), "{r}");
    assert!(
        r.contains("this reverse-mode derivative of `mid` reaches `f`"),
        "{r}"
    );
    assert!(
        r.contains("write `rule reverse f(x: f64, dret: f64) -> f64 { .. }`"),
        "{r}"
    );
}

#[test]
fn recursion_and_deep_nesting_terminate() {
    // A function that differentiates itself, in both modes, recursively.
    let src = format!(
        "{FWD_ONLY}fn g(x: f64, n: i64) -> f64 {{
    if n <= 0 {{ return f(x); }}
    let a = autodiff(reverse, g, active, active(x), const(n - 1));
    let (b, c) = autodiff(forward, g, dual, dual(x, 1.0), const(n - 1));
    a + b + c
}}"
    );
    assert_eq!(warned(&src), ["f:reverse"]);
}
