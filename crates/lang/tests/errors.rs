//! Diagnostics: one line per decision (`source => first error`), the
//! summary format, several errors at once, and robustness (deep nesting,
//! arbitrary bytes) on the default 2 MiB test-thread stack.

use adze_test_support::tokens::TOKENS;

fn first_error(src: &str) -> String {
    match adze_lang::compile("t.adz", src) {
        Ok(m) => panic!("compiled:\n{m}"),
        Err(d) => d.summary(),
    }
}

/// The first error's message or label (or any rendered text) contains
/// `expected`.
#[track_caller]
fn check(src: &str, expected: &str) {
    let d = adze_lang::compile("t.adz", src).unwrap_err();
    let first = adze_lang::Diagnostics::new("t.adz", src, d.errors()[..1].to_vec()).render();
    assert!(
        first.contains(expected),
        "{src}\n=> {first}\nexpected: {expected}"
    );
}

fn ok(src: &str) {
    if let Err(d) = adze_lang::compile("t.adz", src) {
        panic!("{}", d.render());
    }
}

#[test]
fn summary_format() {
    let s = first_error("fn f() -> f64 {\n  1.0 + true\n}");
    assert_eq!(
        s,
        "t.adz:2:3: error: mismatched operand types for `+`: f64 and bool"
    );
    let d = adze_lang::compile("t.adz", "fn f() -> f64 { 1.0 + true }").unwrap_err();
    assert_eq!(d.to_string(), d.summary());
    assert_eq!(d.len(), 1);
    let e: &dyn std::error::Error = &d;
    assert!(e.to_string().starts_with("t.adz:1:"));
}

#[test]
fn several_errors_are_reported() {
    let d = adze_lang::compile(
        "t.adz",
        "fn f() -> f64 { let a = 1.0 + true; let b = a * 2.0; nope }\nfn g() -> i64 { 1.5 }\nfn h( { }\nfn k() { x }",
    )
    .unwrap_err();
    // The syntax error of `h` stops the file before type checking, but the
    // error of `k`'s item is found after recovery.
    assert_eq!(d.len(), 1, "{}", d.render());
    let d = adze_lang::compile(
        "t.adz",
        "fn f() -> f64 { let a = 1.0 + true; let b = a * 2.0; nope }\nfn g() -> i64 { 1.5 }",
    )
    .unwrap_err();
    // `a` is poisoned: its use reports nothing more.
    assert_eq!(d.len(), 3, "{}", d.render());
}

#[test]
fn literals_and_conversions() {
    ok("fn f(x: f64) -> f64 { let a = 2 * x; let b = x + 1; let c = -3; a + b + f64(c) + 1 }");
    ok("fn f(x: f64) -> f64 { if x > 0 { 1 } else { x } }");
    ok("fn f(x: [f64], y: mut [f64]) { y[0] = 1; fill(y, 0); }");
    ok("fn g(x: f64) -> f64 { x } fn f() -> f64 { g(2) + sin(0) + max(1, 2) }");
    ok("fn f() -> (f64, f64) { (1, 2) }");
    check(
        "fn f(n: i64) -> f64 { n }",
        "the result of `f` must be f64, found i64",
    );
    check(
        "fn f(x: f64) -> f64 { let n = 2; x * n }",
        "mismatched operand types for `*`: f64 and i64",
    );
    check(
        "fn f(x: f64) -> f64 { f64(x) }",
        "`f64(..)` converts an i64, but this is already f64",
    );
    check(
        "fn f(b: bool) -> f64 { f64(b) }",
        "`f64(..)` cannot convert a bool",
    );
    check("fn f(x: f64) -> i64 { x }", "must be i64, found f64");
    check("fn f() -> i64 { 9223372036854775808 }", "too large for i64");
    ok("fn f() -> i64 { 9223372036854775807 }");
}

#[test]
fn operators() {
    check("fn f(b: bool) -> bool { -b }", "cannot negate a bool");
    check(
        "fn f(x: f64) -> bool { !x }",
        "the operand of `!` must be bool",
    );
    check(
        "fn f(x: f64) -> bool { x && true }",
        "an operand of `&&` must be bool",
    );
    check(
        "fn f(a: bool, b: bool) -> bool { a + b }",
        "`+` cannot be applied to bool",
    );
    check(
        "fn f(x: f64, y: f64) -> bool { x == y == true }",
        "cannot be chained",
    );
    check(
        "fn f(x: f64, n: i64) -> f64 { x ^ (n + 1) }",
        "the exponent of `^` is an i64 expression",
    );
    check(
        "fn f(x: f64) -> f64 { x ^ -2147483649 }",
        "integer exponent out of range",
    );
    ok("fn f(x: f64) -> f64 { x ^ -2147483648 + x ^ 2147483647 + x ^ (1 + 1) }");
}

#[test]
fn names_and_scopes() {
    check(
        "fn f() -> f64 { for i in 0..3 { let y = 1.0; } y }",
        "unknown name `y`",
    );
    check(
        "fn g() {} fn f() -> f64 { g }",
        "`g` is a function, not a value",
    );
    check(
        "fn f(x: f64) -> f64 { x(1.0) }",
        "`x` is a variable, not a function",
    );
    check(
        "fn len(a: [f64]) -> i64 { 0 }",
        "`len` is a built-in function",
    );
    check("fn autodiff() {}", "`autodiff` is a built-in function");
    check(
        "fn f() { let (a, a) = g(); } fn g() -> (f64, f64) { (1, 2) }",
        "bound twice",
    );
    ok("fn f(x: f64) -> f64 { let x = x * 2.0; let x = x + 1.0; x }");
    ok("fn a() -> f64 { b() } fn b() -> f64 { 1.0 }");
}

#[test]
fn mutability() {
    check("fn f() { let i = 0; i = 1; }", "declared with `let`");
    check(
        "fn f(n: i64) { n = 1; }",
        "cannot assign to the parameter `n`",
    );
    check(
        "fn f(a: mut [f64]) { a = 1.0; }",
        "cannot assign to the array `a`",
    );
    check(
        "const K: f64 = 2.0; fn f() { K = 1.0; }",
        "cannot assign to the constant `K`",
    );
    check(
        "fn f() { var a = 1.0; (a, nan) = (2.0, 3.0); }",
        "cannot assign to the constant `nan`",
    );
    check(
        "const K: i64 = if true { 1 }; fn f() {}",
        "this `if` has no value",
    );
    check(
        "const K: i64 = if true { let a = 1; a } else { 2 }; fn f() {}",
        "not allowed in a constant",
    );
    check(
        "const Z: i64 = 0; const K: i64 = if Z == 0 { 1 / Z } else { 2 }; fn f() {}",
        "cannot evaluate this constant",
    );
    check(
        "fn f(a: [f64]) { a[0] = 1.0; }",
        "cannot write to `a`: it is a read-only array",
    );
    check(
        "fn f() { var x = 1.0; x = 2; x = true; }",
        "the value assigned to `x` must be f64, found bool",
    );
    check("fn f() { var n = 0; n = 1.5; }", "must be i64, found f64");
    ok("fn f(n: i64) -> f64 { let t = zeros(n); t[0] = 1.0; fill(t, 2.0); t[0] }");
    check(
        "fn f(n: i64) { let t = zeros(1.5); }",
        "the length of `zeros` must be i64",
    );
    check(
        "fn f(a: [f64]) -> f64 { let b = if true { a } else { a }; 1.0 }",
        "an `if` cannot produce an array",
    );
}

#[test]
fn arrays_and_aliasing() {
    let g = "fn g(a: mut [f64], b: [f64]) { a[0] = b[0]; }\n";
    ok(&format!("{g}fn f(x: mut [f64], y: [f64]) {{ g(x, y); }}"));
    check(
        &format!("{g}fn f(x: mut [f64]) {{ g(x, x); }}"),
        "`x` is used as both `a` and `b`",
    );
    check(
        &format!("{g}fn f(x: [f64], y: [f64]) {{ g(x, y); }}"),
        "`g` may write to its parameter `a: mut [f64]`",
    );
    check(
        &format!("{g}fn f(x: mut [f64]) {{ g(x, 1.0); }}"),
        "parameter `b` of `g` needs an array",
    );
    ok("fn h(a: [f64], b: [f64]) -> f64 { a[0] + b[0] } fn f(x: [f64]) -> f64 { h(x, x) }");
    check("fn f(x: f64) -> i64 { len(x) }", "`len` needs an array");
    check("fn f(x: [f64]) -> f64 { x }", "an array is not a value");
    check("fn f(x: f64) -> f64 { x[0] }", "`x` is not an array");
}

#[test]
fn results_and_returns() {
    check(
        "fn f(x: f64) -> f64 { if x > 0.0 { return 1.0; } }",
        "an `if` without `else` cannot produce the result",
    );
    check(
        "fn f(x: f64) -> f64 { while x > 0.0 { return 1.0; } }",
        "must return f64, but its body can end without a value",
    );
    ok("fn f(x: f64) -> f64 { if x > 0.0 { return 1.0; } else { return 2.0; } }");
    ok("fn f(x: f64) -> f64 { return x; }");
    check("fn f(x: f64) -> f64 { return; }", "`return` needs a value");
    check("fn f() { return 1.0; }", "`f` has no result type");
    check(
        "fn f() -> (f64, f64) { (1.0, 2.0, 3.0) }",
        "returns 2 values, but this tuple has 3",
    );
    check(
        "fn f() -> (f64, f64) { 1.0 }",
        "`f` returns (f64, f64), found f64",
    );
    check(
        "fn g() -> (f64, i64) { (1.0, 2) } fn f() -> (f64, f64) { g() }",
        "returns (f64, f64), found (f64, i64)",
    );
    check(
        "fn f() -> (f64) { 1.0 }",
        "a tuple result needs at least two types",
    );
    check(
        "fn f(x: f64) -> f64 { return x; let y = 1.0; y }",
        "unreachable code after `return`",
    );
    check(
        "fn g() {} fn f() -> f64 { let y = g(); 1.0 }",
        "this expression has no value",
    );
    check(
        "fn f(x: f64) -> f64 { let y = if x > 0.0 { return 1.0; } else { return 2.0; }; y }",
        "never produces a value",
    );
    check(
        "fn g() -> f64 { 1.0 } fn f() { g() }",
        "`f` has no result type, but this is a value of type f64",
    );
}

/// Issue #13, item 5: a declared result that some path can miss is a
/// diagnostic, wherever the `if` that misses it sits.
#[test]
fn a_missing_result_on_some_path_is_an_error() {
    // A final `if` whose branches end in `;`.
    check(
        "fn relu(x: f64) -> f64 { if x > 0.0 { x; } else { 0.0; } }",
        "this branch of the `if` can end without a value",
    );
    check(
        "fn relu(x: f64) -> f64 { if x > 0.0 { x; } else { 0.0; } }",
        "remove the `;`",
    );
    // An empty `else`, the other branch returning.
    check(
        "fn h(a: f64) -> f64 { if a > 0.0 { return 1.0; } else { } }",
        "this branch of the `if` can end without a value",
    );
    check(
        "fn h(a: f64) -> f64 { if a > 0.0 { return 1.0; } else { } }",
        "empty branch",
    );
    // One branch only.
    check(
        "fn f(x: f64) -> f64 { if x > 0.0 { x } else { 0.0; } }",
        "can end without a value",
    );
    check(
        "fn f(x: f64) -> f64 { if x > 0.0 { 1.0; } else { x } }",
        "can end without a value",
    );
    // Deeper: `else if` chains, nested `if`s, `return if`, tuples, rules.
    check(
        "fn f(x: f64) -> f64 { if x > 0.0 { 1.0 } else if x < 0.0 { 2.0 } else { } }",
        "can end without a value",
    );
    check(
        "fn f(x: f64) -> f64 { if x > 0.0 { if x > 1.0 { 1.0 } else { 2.0; } } else { 3.0 } }",
        "can end without a value",
    );
    check(
        "fn f(x: f64) -> f64 { return if x > 0.0 { 1.0; } else { 2.0 }; }",
        "can end without a value",
    );
    check(
        "fn f(x: f64) -> (f64, f64) { if x > 0.0 { (x, x) } else { } }",
        "can end without a value",
    );
    check(
        "fn f(x: f64) -> f64 { x } rule reverse f(x: f64, dret: f64) -> f64 { if x > 0.0 { dret; } else { 0.0 } }",
        "can end without a value",
    );
    // A body whose last statement is an expression with `;`.
    check("fn f(x: f64) -> f64 { x * 2.0; }", "remove the `;`");
    // Value positions: `let`, `var`, assignment, operands, arguments.
    for src in [
        "fn f(c: bool) -> f64 { let x = if c { 1.0; } else { 2.0; }; x }",
        "fn f(c: bool) -> f64 { var x = if c { 1.0; } else { 2.0; }; x }",
        "fn f(c: bool) -> f64 { var x = 0.0; x = if c { 1.0; } else { 2.0; }; x }",
        "fn f(c: bool) -> f64 { 1.0 + if c { 1.0; } else { 2.0; } }",
        "fn f(c: bool) -> f64 { sin(if c { 1.0; } else { 2.0; }) }",
        "fn f(c: bool, a: mut [f64]) { a[0] = if c { 1.0; } else { 2.0; }; }",
    ] {
        check(src, "this `if` has no value");
    }
    check(
        "fn f(c: bool) -> f64 { let x = if c { 1.0 } else { 2.0; }; x }",
        "`if` and `else` have different types",
    );
    // Still fine: statements, unit functions, values on every path.
    ok("fn f(x: f64) -> f64 { if x > 0.0 { x } else { 0.0 } }");
    ok("fn f(x: f64) -> f64 { if x > 0.0 { return x; } else { 0.0 } }");
    ok("fn f(x: f64) -> f64 { if x > 0.0 { x; } else { 0.0; } x }");
    ok("fn f(a: mut [f64]) { if a[0] > 0.0 { a[0] = 1.0; } else { } }");
    ok("fn f(a: mut [f64]) { if a[0] > 0.0 { a[0] = 1.0; } }");
}

#[test]
fn rules() {
    check(
        "fn f(x: f64) -> f64 { x } rule reverse f(x: f64, d: f64) { }",
        "expected result `-> f64`, found none",
    );
    check("fn f(x: f64, n: i64) -> f64 { x } rule forward f(x: f64, tx: f64, n: i64, tn: i64) -> (f64, f64) { (x, tx) }", "expected 3 parameters, found 4");
    check(
        "fn f(n: i64) -> i64 { n } rule forward f(n: i64) -> (i64, f64) { (n, 1.0) }",
        "expected result `-> i64`, found `-> (i64, f64)`",
    );
    check(
        "fn f(x: f64) -> f64 { x } rule forward f(x: f64, tx: f64) -> (f64, f64) { (x, y) }",
        "unknown name `y`",
    );
    ok("fn f(n: i64) -> i64 { n } rule forward f(n: i64) -> i64 { n } rule reverse f(n: i64) { }");
    ok("fn f(x: f64, y: f64) -> (f64, f64) { (x, y) } rule reverse f(x: f64, y: f64, d0: f64, d1: f64) -> (f64, f64) { (d0, d1) }");
    ok("fn f(a: mut [f64]) { } rule forward f(a: mut [f64], ta: mut [f64]) { } rule reverse f(a: mut [f64], da: mut [f64]) { }");
    check(
        "fn f(a: mut [f64]) { } rule forward f(a: mut [f64], ta: [f64]) { }",
        "parameter 2 should be `mut [f64]`, found `[f64]`",
    );
    check(
        "#[inline(always)] #[inline(never)] fn f() {}",
        "duplicate `#[inline]` attribute",
    );
    check("#[noinline] fn f() {}", "unknown attribute `noinline`");
}

#[test]
fn autodiff_requests() {
    let g = "fn g(x: f64, a: [f64], n: i64) -> f64 { x * a[n] }\n";
    let ad = |args: &str| {
        format!(
            "{g}fn f(x: f64, a: [f64], da: mut [f64]) -> f64 {{ let r = autodiff({args}); 1.0 }}"
        )
    };
    ok(&format!("{g}fn f(x: f64, a: [f64], da: mut [f64]) -> f64 {{ autodiff(reverse, g, active, active(x), dup(a, da), const(0)) }}"));
    check(
        &ad("reverse, g, active, active(x), dup(a, da)"),
        "needs 3 arguments after the return activity",
    );
    check(
        &ad("reverse, g"),
        "`autodiff` needs a mode, a function, a return activity",
    );
    check(
        &ad("forward, g, active, dual(x, 1.0), dup(a, da), const(0)"),
        "invalid return activity for forward mode",
    );
    check(
        &ad("reverse, h, active, active(x)"),
        "must name a function of this file",
    );
    check(
        &ad("reverse, g, active, x, dup(a, da), const(0)"),
        "invalid argument for parameter `x: f64` of `g` in reverse mode",
    );
    check(
        &ad("reverse, g, active, active(x), dup(a, da), dual(0, 1)"),
        "i64 and bool parameters are not differentiable",
    );
    check(
        &ad("reverse, g, active, active(x), dup(da, a), const(0)"),
        "the shadow `a` of `a` must be writable",
    );
    check(
        &ad("reverse, g, active, active(x, 1.0), dup(a, da), const(0)"),
        "`active` takes 1 argument",
    );
    check(
        &ad("reverse, g, active, active(x), active(a), const(0)"),
        "`active` is for f64 parameters; arrays take `dup(a, da)`",
    );
    check(
        &ad("reverse, g, active, dup(x, x), dup(a, da), const(0)"),
        "`dup` is for array parameters",
    );
    check(
        &ad("forward, g, dual, active(x), dup(a, da), const(0)"),
        "`active` is for reverse mode",
    );
    check(
        &ad("reverse, g, active, active(x), dup(a, da), const(1.5)"),
        "the argument `n` of `g` must be i64",
    );
    check(
        &ad("forward, g, dual, dual(x, 1.0), dup(a, da), const(0)"),
        "a tuple cannot be used as a single value",
    );
    // Forward-mode shadows of read-only parameters may be read-only.
    ok(&format!("{g}fn f(x: f64, a: [f64], ta: [f64]) -> f64 {{ let (p, t) = autodiff(forward, g, dual, dual(x, 0), dup(a, ta), const(0)); p + t }}"));
    ok(&format!("{g}fn f(x: f64, a: [f64]) {{ autodiff(forward, g, const, const(x), const(a), const(0)); }}"));
}

/// Runs on a fresh 2 MiB thread, like a default test thread.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .expect("no stack overflow or panic")
}

#[test]
fn deep_nesting_gives_an_error_not_a_stack_overflow() {
    for (open, close) in [
        ("(", ")"),
        ("-", ""),
        ("!", ""),
        ("{ ", " }"),
        ("if c { ", " } else { 1.0 }"),
        ("f(", ")"),
        ("a[", "]"),
    ] {
        let src = format!(
            "fn f() {{ {}x{} }}",
            open.repeat(100_000),
            close.repeat(100_000)
        );
        let s = on_small_stack(move || adze_lang::compile("t.adz", &src).unwrap_err().summary());
        assert!(s.contains("error:"), "{open}: {s}");
    }
    let chain = format!(
        "fn f(x: f64) -> f64 {{ {} }}",
        vec!["x"; 100_000].join(" + ")
    );
    let s = on_small_stack(move || adze_lang::compile("t.adz", &chain).unwrap_err().summary());
    assert!(s.contains("nested too deeply"), "{s}");
    let pow = format!(
        "fn f(x: f64) -> f64 {{ {} }}",
        vec!["x"; 100_000].join(" ^ ")
    );
    let s = on_small_stack(move || adze_lang::compile("t.adz", &pow).unwrap_err().summary());
    assert!(s.contains("nested too deeply"), "{s}");
}

#[test]
fn nesting_just_below_the_limit_compiles() {
    let n = 120;
    let parens = format!("{}x{}", "(".repeat(n), ")".repeat(n));
    let ifs = format!("{}x{}", "if c { ".repeat(n), " } else { 1.0 }".repeat(n));
    let src = format!("fn f(x: f64, c: bool) -> f64 {{ {parens} + {ifs} }}");
    let ok = on_small_stack(move || {
        adze_lang::compile("t.adz", &src).map(|m| adze_ir::verify::verify_module(&m).is_ok())
    });
    assert_eq!(ok.map_err(|d| d.summary()), Ok(true));
}

#[test]
fn arbitrary_input_never_panics() {
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..3000 {
        let len = (next() % 40) as usize;
        let src: Vec<&str> = (0..len)
            .map(|_| TOKENS[(next() % TOKENS.len() as u64) as usize])
            .collect();
        let src = src.join(" ");
        if let Err(d) = adze_lang::compile("t.adz", &src) {
            assert!(!d.summary().contains('\n'));
            let _ = d.render();
        }
    }
    for _ in 0..500 {
        let bytes: Vec<u8> = (0..(next() % 64)).map(|_| next() as u8).collect();
        let _ = adze_lang::compile_bytes("t.adz", &bytes);
    }
}

#[test]
fn invalid_utf8_has_a_position() {
    let d = adze_lang::compile_bytes("t.adz", b"fn f() {\n  \xff }").unwrap_err();
    assert_eq!(d.summary(), "t.adz:2:3: error: the file is not valid UTF-8");
    assert!(d.render().contains("0xff"));
}

/// A store or `fill` whose array is unknown still has its index and value
/// checked: every error is reported, not only the first.
#[test]
fn a_store_into_an_unknown_array_reports_its_value_too() {
    for src in ["fn f() { nope[zz] = yy; }", "fn f() { fill(nope, yy); }"] {
        let d = adze_lang::compile("t.adz", src).unwrap_err();
        let all = d.render();
        assert!(all.contains("unknown name `nope`"), "{all}");
        assert!(all.contains("unknown name `yy`"), "{all}");
    }
}
