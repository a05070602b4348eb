//! Programs that compile: their IR (snapshots under `snapshots/`), checked by
//! the IR verifier, and the language decisions that the IR shows.

use adze_ir::{verify::verify_module, InlineHint, Module, Type};
use insta::assert_snapshot;

fn compile(src: &str) -> Module {
    let module = match adze_lang::compile("test.adz", src) {
        Ok(m) => m,
        Err(d) => panic!("{}", d.render()),
    };
    if let Err(e) = verify_module(&module) {
        panic!("verifier: {e}\n{module}");
    }
    module
}

fn ir(src: &str) -> String {
    compile(src).to_string()
}

#[test]
fn seed_program() {
    assert_snapshot!(ir(include_str!("programs/seed.adz")));
}

#[test]
fn literals_and_arithmetic() {
    assert_snapshot!(ir("
        fn f(x: f64, n: i64) -> f64 {
            let a = 2 * x + 1;          // integer literals become f64
            let b = -3.5 - -x;          // negated literals are folded
            let k = n % 4 - -2;         // i64 arithmetic
            let m = (1 + 2) * x;        // a literal expression becomes f64 as a whole
            a / b + m * f64(k) + sin(1) + atan2(x, 2)
        }"));
}

#[test]
fn powers() {
    assert_snapshot!(ir("
        fn f(x: f64, y: f64, n: i64) -> f64 {
            x ^ 3 + x ^ -2 + 2 ^ x + x ^ 0.5 + x ^ y + x ^ f64(n) + -x ^ 2 + x ^ (-1) + pow(x, 2)
        }"));
}

#[test]
fn comparisons_and_short_circuit() {
    assert_snapshot!(ir("
        fn f(x: f64, n: i64, b: bool) -> bool {
            (x < 1.0 && n >= 2) || !b && x != 0
        }"));
}

#[test]
fn if_expression_and_var_joins() {
    assert_snapshot!(ir("
        fn f(x: f64) -> f64 {
            var s = 0.0;
            var t = 1.0;
            if x > 0.0 { s = x; } else { t = -x; }
            if s > 1.0 { s = 1; }
            let y = if t > s { t } else if s > 2.0 { 2 } else { s };
            s + t + y
        }"));
}

#[test]
fn counted_loop_shape() {
    // Only the vars assigned in the loop become header parameters.
    assert_snapshot!(ir("
        fn f(x: [f64], c: f64) -> f64 {
            var s = 0.0;
            var unused = c;
            for i in 1..len(x) - 1 { s = s + x[i] * unused; }
            s + unused
        }"));
}

#[test]
fn while_and_nested_loops() {
    assert_snapshot!(ir("
        fn f(n: i64) -> i64 {
            var total = 0;
            var k = n;
            while k > 0 {
                for i in 0..k { total = total + i; }
                k = k - 1;
            }
            total
        }"));
}

#[test]
fn early_returns() {
    assert_snapshot!(ir("
        fn f(x: [f64], t: f64) -> i64 {
            for i in 0..len(x) {
                if x[i] > t { return i; }
            }
            -1
        }
        fn g(x: f64) -> f64 {
            if x < 0.0 { return 0.0; } else if x > 1.0 { return 1.0; } else { x }
        }
        fn h(x: f64) -> f64 {
            let y = if x < 0.0 { return 0.0; } else { x * 2.0 };
            y
        }"));
}

#[test]
fn arrays() {
    assert_snapshot!(ir("
        fn f(x: [f64], y: mut [f64]) -> f64 {
            let t = zeros(len(x));
            fill(t, 1);
            for i in 0..len(x) { t[i] = x[i] * 2; y[i] = t[i]; }
            scale(t, 3.0);
            scale(y, 0.5);
            t[0]
        }
        fn scale(a: mut [f64], k: f64) {
            for i in 0..len(a) { a[i] = a[i] * k; }
        }"));
}

#[test]
fn tuples_calls_and_recursion() {
    assert_snapshot!(ir("
        fn pair(x: f64) -> (f64, f64) { (x, 2 * x) }
        fn swap(x: f64) -> (f64, f64) {
            let (a, b) = pair(x);
            if a > 0.0 { return (b, a); }
            pair(b)
        }
        fn fact(n: i64) -> i64 { if n <= 1 { 1 } else { n * fact(n - 1) } }
        fn even(n: i64) -> bool { if n == 0 { true } else { odd(n - 1) } }
        fn odd(n: i64) -> bool { if n == 0 { false } else { even(n - 1) } }
        fn pick(x: f64, c: bool) -> (f64, f64) {
            if c { (x, 1.0) } else { swap(x) }
        }"));
}

#[test]
fn autodiff_requests() {
    assert_snapshot!(ir("
        fn f(x: f64, a: [f64], n: i64) -> f64 { x * a[n] }
        fn g(x: f64, y: f64) -> (f64, f64) { (x * y, x + y) }
        fn fwd(x: f64, a: [f64], da: [f64]) -> (f64, f64) {
            autodiff(forward, f, dual, dual(x, 1), dup(a, da), const(0))
        }
        fn fwd_tuple(x: f64) -> f64 {
            let (p, q, tp, tq) = autodiff(forward, g, dual, dual(x, 1.0), const(2.0));
            p + q + tp + tq
        }
        fn rev(x: f64, a: [f64], da: mut [f64]) -> f64 {
            autodiff(reverse, f, active, active(x), dup(a, da), const(1))
        }
        fn rev2(x: f64, y: f64) -> (f64, f64) {
            autodiff(reverse, g, const, active(x), active(y))
        }
        fn nested(x: f64, a: [f64], da: mut [f64], dda: mut [f64]) -> (f64, f64) {
            autodiff(forward, rev, dual, dual(x, 1.0), const(a), dup(da, dda))
        }"));
}

#[test]
fn rules_and_attributes() {
    let src = "
        rule reverse sq(x: f64, dret: f64) -> f64 { 2 * x * dret }
        #[inline(never)]
        fn sq(x: f64) -> f64 { x * x }
        rule forward sq(x: f64, tx: f64) -> (f64, f64) { (sq(x), 2 * x * tx) }
        #[inline(always)]
        fn norm(v: mut [f64], n: i64) -> (f64, bool) { (v[0], n > 0) }
        rule forward norm(v: mut [f64], tv: mut [f64], n: i64) -> (f64, bool, f64) { (v[0], true, tv[0]) }
        rule reverse norm(v: mut [f64], dv: mut [f64], n: i64, d0: f64) { dv[0] = d0; }
    ";
    let m = compile(src);
    let names: Vec<&str> = m.iter().map(|(_, f)| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "sq",
            "sq.rule.forward",
            "sq.rule.reverse",
            "norm",
            "norm.rule.forward",
            "norm.rule.reverse"
        ]
    );
    let sq = m.func(m.get("sq").unwrap());
    assert_eq!(sq.meta.inline, InlineHint::Never);
    assert_eq!(sq.meta.rules.forward, m.get("sq.rule.forward"));
    assert_eq!(sq.meta.rules.reverse, m.get("sq.rule.reverse"));
    let norm = m.func(m.get("norm").unwrap());
    assert_eq!(norm.meta.inline, InlineHint::Always);
    assert!(norm.sig.params[0].mutable);
    assert_eq!(norm.sig.results, [Type::F64, Type::Bool]);
    assert_snapshot!(m.to_string());
}

#[test]
fn module_order_is_source_order_with_rules_after_their_fn() {
    let m = compile(
        "
        rule reverse b(x: f64, d: f64) -> f64 { d }
        fn a() {}
        fn b(x: f64) -> f64 { x }
        fn c() { a(); }
    ",
    );
    let names: Vec<&str> = m.iter().map(|(_, f)| f.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "b.rule.reverse", "c"]);
}

#[test]
fn params_and_zeros_keep_source_names() {
    let m = compile(
        "fn f(x: [f64], out: mut [f64]) { let scratch = zeros(3); out[0] = x[0] + scratch[0]; }",
    );
    let text = m.to_string();
    assert!(text.contains("function @f(x: arr, out: mut arr)"), "{text}");
    assert!(text.contains("zeros v2, \"scratch\""), "{text}");
}

#[test]
fn shadowing_and_scopes() {
    assert_snapshot!(ir("
        fn f(x: f64) -> f64 {
            let y = x;
            let y = y * 2.0;
            var acc = y;
            for i in 0..3 { let y = f64(i); acc = acc + y; }
            if acc > 1.0 { let acc2 = acc; acc = acc2 * acc2; }
            acc + y
        }"));
}

#[test]
fn empty_file_and_unit_functions() {
    assert_eq!(compile("// nothing\n").len(), 0);
    assert_snapshot!(ir("
        fn nothing() {}
        fn early(a: mut [f64]) { if len(a) == 0 { return; } a[0] = 1.0; }
        fn tail_call(a: mut [f64]) { early(a) }
    "));
}

/// Every intrinsic of the opcode table is a builtin of the language: a call
/// with its arity lowers to its opcode, and its name cannot name a `fn`.
#[test]
fn every_intrinsic_of_the_opcode_table_is_callable() {
    use adze_ir::Opcode;
    for &op in Opcode::ALL.iter().filter(|op| op.is_intrinsic()) {
        let name = op.intrinsic_name().unwrap();
        assert!(adze_lang::check::is_builtin(name), "{name}");
        let arity = op.fixed_signature().unwrap().0.len();
        let args = ["x", "y"][..arity].join(", ");
        let m = compile(&format!("fn f(x: f64, y: f64) -> f64 {{ {name}({args}) }}"));
        let f = m.func(m.get("f").unwrap());
        let ops: Vec<Opcode> = f
            .layout
            .insts()
            .map(|(_, i)| f.dfg.inst(i).opcode())
            .collect();
        assert_eq!(ops, [op, Opcode::Return], "{name}");
        let clash = adze_lang::compile("t.adz", &format!("fn {name}(x: f64) -> f64 {{ x }}"));
        assert!(clash.is_err(), "a fn may not be called {name}");
    }
}

/// `docs/language.md` has one line for each intrinsic, and none for
/// anything else.
#[test]
fn docs_language_md_lists_every_intrinsic() {
    use adze_ir::Opcode;
    let doc = include_str!("../../../docs/language.md");
    let start = doc
        .find("| intrinsic | meaning |")
        .expect("the intrinsics table");
    let mut listed: Vec<String> = doc[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .flat_map(|l| {
            let cell = l.split(" | ").next().unwrap_or("");
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(|call| call.split('(').next().unwrap_or("").to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    let mut table: Vec<String> = Opcode::ALL
        .iter()
        .filter_map(|op| op.intrinsic_name())
        .map(str::to_string)
        .collect();
    listed.sort();
    table.sort();
    assert_eq!(listed, table);
}
