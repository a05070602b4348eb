//! Programs through the reverse pass: gradients against central finite
//! differences and forward tangents (`check_gradient`), plus exact values
//! worked out by hand where they are simple.

use super::support::*;
use adze_ir::{ArgActivity, ArgActivity::*, FuncId, Module, RetActivity, Val};

fn a(xs: &[f64]) -> Val {
    Val::Array(xs.to_vec())
}

/// `check_gradient` at the tolerance every program here uses.
fn check(m: &mut Module, f: &str, args: &[Val], acts: &[ArgActivity], ret: RetActivity) -> Grad {
    check_gradient(m, f, args, acts, ret, 1e-6)
}

/// `src` with the reverse derivative of its `f` for `acts` (active return),
/// the derivative, and the text of its adjoint function `adj`.
fn adjoint(src: &str, acts: &[ArgActivity], adj: &str) -> (Module, FuncId, String) {
    let mut m = compile(src);
    let d = rev(&mut m, "f", acts, RetActivity::Active);
    let text = m.display_function(m.get(adj).unwrap()).to_string();
    (m, d, text)
}

/// One gradient check of a table: function `f` of `src` at `args`.
struct Row<'a> {
    src: &'a str,
    f: &'a str,
    args: Vec<Val>,
    acts: &'a [ArgActivity],
    ret: RetActivity,
}

/// A row with an active return.
fn row<'a>(src: &'a str, f: &'a str, args: Vec<Val>, acts: &'a [ArgActivity]) -> Row<'a> {
    let ret = RetActivity::Active;
    Row {
        src,
        f,
        args,
        acts,
        ret,
    }
}

/// Runs `check` on every row (consecutive rows of the same source share one
/// module, as the derivatives of one program do) and fails naming each row
/// that failed, by its index, function and activities.
fn check_rows(rows: Vec<Row>) {
    let mut module: Option<(&str, Module)> = None;
    let mut failed = Vec::new();
    for (k, r) in rows.iter().enumerate() {
        if module.as_ref().is_none_or(|(src, _)| *src != r.src) {
            module = Some((r.src, compile(r.src)));
        }
        let (_, m) = module.as_mut().unwrap();
        let run = || check(m, r.f, &r.args, r.acts, r.ret);
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).is_err() {
            failed.push(format!("row {k}: {} {:?} -> {:?}", r.f, r.acts, r.ret));
            module = None;
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} rows failed: {failed:#?}",
        failed.len(),
        rows.len()
    );
}

#[test]
fn straight_line_scalar_exact() {
    let mut m = compile("fn f(x: f64, y: f64) -> f64 { sin(x) * y + x * x }");
    let g = check(
        &mut m,
        "f",
        &[Val::F64(0.7), Val::F64(-1.3)],
        &[Active, Active],
        RetActivity::Active,
    );
    assert_eq!(
        g.scalars,
        vec![0.7f64.cos() * -1.3 + 0.7 + 0.7, 0.7f64.sin()]
    );
}

#[test]
fn every_differentiable_intrinsic() {
    let unary = [
        ("sin", 0.3),
        ("cos", 0.3),
        ("tan", 0.3),
        ("asin", 0.3),
        ("acos", 0.3),
        ("atan", 0.3),
        ("sinh", 0.3),
        ("cosh", 0.3),
        ("tanh", 0.3),
        ("exp", 0.3),
        ("expm1", 0.3),
        ("log", 0.3),
        ("log1p", 0.3),
        ("sqrt", 0.3),
        ("cbrt", 0.3),
        ("erf", 0.3),
        ("erfc", 0.3),
        ("log2", 0.3),
        ("log10", 0.3),
        ("exp2", 0.3),
        ("asinh", 0.3),
        ("acosh", 0.9),
        ("atanh", 0.3),
        ("lgamma", 0.3),
        ("digamma", 0.3),
        ("abs", -0.3),
        ("floor", 0.3),
        ("ceil", 0.3),
        ("round", 0.3),
        ("sign", 0.3),
    ];
    for (op, x) in unary {
        let src = format!("fn f(x: f64) -> f64 {{ {op}(x * 1.5) * x }}");
        let mut m = compile(&src);
        check(&mut m, "f", &[Val::F64(x)], &[Active], RetActivity::Active);
    }
    let binary = ["atan2", "pow", "hypot", "min", "max"];
    for op in binary {
        for (x, y) in [(0.7, 1.9), (1.9, 0.7)] {
            let src = format!("fn f(x: f64, y: f64) -> f64 {{ {op}(x, y) * (x + 2.0 * y) }}");
            let mut m = compile(&src);
            check(
                &mut m,
                "f",
                &[Val::F64(x), Val::F64(y)],
                &[Active, Active],
                RetActivity::Active,
            );
        }
    }
    let ops = [
        "x + y",
        "x - y",
        "x * y",
        "x / y",
        "-x * y",
        "x ^ 3 * y",
        "x ^ -2 * y",
        "x ^ y",
    ];
    for e in ops {
        let src = format!("fn f(x: f64, y: f64) -> f64 {{ {e} }}");
        let mut m = compile(&src);
        check(
            &mut m,
            "f",
            &[Val::F64(1.3), Val::F64(0.6)],
            &[Active, Active],
            RetActivity::Active,
        );
    }
}

#[test]
fn exact_partials_of_simple_functions() {
    let mut m = compile("fn f(x: f64, y: f64) -> f64 { x / y + exp(x) }");
    let d = rev(&mut m, "f", &[Active, Active], RetActivity::Active);
    let g = grad(
        &m,
        d,
        &[Val::F64(2.0), Val::F64(4.0)],
        &[Active, Active],
        &[],
    );
    assert_eq!(g.scalars, vec![1.0 / 4.0 + 2f64.exp(), -(0.5 / 4.0)]);
    // min: the derivative goes to the chosen operand only.
    let mut m = compile("fn f(x: f64, y: f64) -> f64 { min(x, y) * 3.0 }");
    let d = rev(&mut m, "f", &[Active, Active], RetActivity::Active);
    let g = grad(
        &m,
        d,
        &[Val::F64(2.0), Val::F64(-4.0)],
        &[Active, Active],
        &[],
    );
    assert_eq!(g.scalars, vec![0.0, 3.0]);
}

#[test]
fn loop_carried_value() {
    let src = "fn f(x: f64, n: i64) -> f64 {
        var s = 1.0;
        for i in 0..n { s = s * x + sin(s) * f64(i); }
        s
    }";
    let mut m = compile(src);
    check(
        &mut m,
        "f",
        &[Val::F64(0.9), Val::I64(6)],
        &[Active, Const],
        RetActivity::Active,
    );
    // x^n exactly: d/dx = n x^(n-1).
    let mut m =
        compile("fn p(x: f64, n: i64) -> f64 { var s = 1.0; for i in 0..n { s = s * x; } s }");
    let d = rev(&mut m, "p", &[Active, Const], RetActivity::Active);
    let g = grad(&m, d, &[Val::F64(2.0), Val::I64(5)], &[Active, Const], &[]);
    assert_eq!(g.scalars, vec![80.0]);
    // Zero trips.
    let g = grad(&m, d, &[Val::F64(2.0), Val::I64(0)], &[Active, Const], &[]);
    assert_eq!(g.scalars, vec![0.0]);
}

#[test]
fn overwrite_then_read_arrays() {
    let src = "fn f(a: mut [f64], x: f64) -> f64 {
        a[0] = x * a[1];
        let t = a[0];
        a[0] = sin(t) + a[0];
        a[1] = a[0] * t;
        a[1] * a[0] + t
    }";
    let arrays = example("arrays.adz");
    check_rows(vec![
        row(
            src,
            "f",
            vec![a(&[0.5, 1.5]), Val::F64(0.8)],
            &[Dup, Active],
        ),
        row(&arrays, "overwrite_then_read", vec![a(&[2.0, 3.0])], &[Dup]),
    ]);
}

#[test]
fn enzyme_convention_for_mut_arrays_exact() {
    // a[i] <- a[i]^2 + x: the shadow holds the cotangent of the final
    // contents on entry and the adjoint of the initial contents on return.
    let src = "fn sq(a: mut [f64], x: f64) { for i in 0..len(a) { a[i] = a[i] * a[i] + x; } }";
    let mut m = compile(src);
    let d = rev(&mut m, "sq", &[Dup, Active], RetActivity::Const);
    let init = [1.5, -2.0, 3.0];
    let w = vec![0.5, 2.0, -1.0];
    let g = grad(
        &m,
        d,
        &[a(&init), Val::F64(0.25)],
        &[Dup, Active],
        std::slice::from_ref(&w),
    );
    let want: Vec<f64> = init.iter().zip(&w).map(|(x, w)| 2.0 * x * w).collect();
    assert_eq!(g.shadows[0], want);
    assert_eq!(g.scalars, vec![0.5 + 2.0 - 1.0]);
    // The primal's effect happened.
    assert_eq!(arr(&g.outcome.args[0]), vec![2.5, 4.25, 9.25]);
    check(
        &mut m,
        "sq",
        &[a(&init), Val::F64(0.25)],
        &[Dup, Active],
        RetActivity::Const,
    );
    // A read-only array: adjoints accumulate into the shadow.
    let mut m = compile("fn dot(x: [f64], y: [f64]) -> f64 { var s = 0.0; for i in 0..len(x) { s = s + x[i] * y[i]; } s }");
    let d = rev(&mut m, "dot", &[Dup, Const], RetActivity::Active);
    let g = grad(
        &m,
        d,
        &[a(&[1.0, 2.0]), a(&[3.0, 4.0])],
        &[Dup, Const],
        &[vec![10.0, 20.0]],
    );
    assert_eq!(g.shadows[0], vec![13.0, 24.0]);
}

#[test]
fn scratch_arrays_reused_in_a_loop() {
    let src = "fn f(x: [f64], rounds: i64) -> f64 {
        let t = zeros(len(x));
        var s = 0.0;
        for r in 0..rounds {
            for i in 0..len(x) { t[i] = x[i] * f64(r + 1) + t[i]; }
            for i in 0..len(x) { s = s + sin(t[i]); }
        }
        s
    }";
    // A `zeros` inside the loop, of growing length.
    let growing = "fn g(x: [f64], rounds: i64) -> f64 {
        var s = 0.0;
        for r in 0..rounds {
            let t = zeros(r + 1);
            for i in 0..r + 1 { t[i] = x[i] * s + x[i]; }
            fill(t, t[0] * t[r]);
            for i in 0..r + 1 { s = s + t[i] * 0.5; }
        }
        s
    }";
    let arrays = example("arrays.adz");
    let three = Val::I64(3);
    check_rows(vec![
        row(
            src,
            "f",
            vec![a(&[0.3, -0.4, 0.5]), three.clone()],
            &[Dup, Const],
        ),
        row(
            growing,
            "g",
            vec![a(&[0.3, -0.4, 0.5, 0.2]), Val::I64(4)],
            &[Dup, Const],
        ),
        row(
            &arrays,
            "scratch_in_loop",
            vec![a(&[1.0, 2.0]), three],
            &[Dup, Const],
        ),
    ]);
}

#[test]
fn branches_inside_loops() {
    let src = "fn f(x: [f64], y: f64) -> f64 {
        var s = 0.0;
        for i in 0..len(x) {
            if x[i] > 0.0 { s = s + x[i] * y; } else { s = s - sin(x[i] * s); }
            if s > 1.0 && y < 2.0 { s = s * 0.5; }
        }
        s
    }";
    let x = a(&[0.3, -0.4, 0.9, -1.2, 2.0]);
    check_rows(vec![row(src, "f", vec![x, Val::F64(1.7)], &[Dup, Active])]);
}

#[test]
fn while_loops() {
    let src = "fn f(x: f64) -> f64 {
        var y = x;
        var k = 0;
        while y < 10.0 { y = y * 1.5 + x * f64(k); k = k + 1; }
        y * x
    }";
    let loops = example("loops.adz");
    check_rows(vec![
        row(src, "f", vec![Val::F64(0.7)], &[Active]),
        row(&loops, "newton_sqrt", vec![Val::F64(16.0)], &[Active]),
    ]);
}

#[test]
fn nested_loops() {
    let src = "fn f(x: [f64], n: i64) -> f64 {
        var s = 0.0;
        for i in 0..n {
            var p = 1.0;
            for j in 0..len(x) {
                var k = 0;
                while k < j { p = p * cos(x[k] + s * 0.1); k = k + 1; }
                p = p + x[j];
            }
            s = s + p;
        }
        s
    }";
    let x = a(&[0.3, -0.4, 0.5]);
    check_rows(vec![row(src, "f", vec![x, Val::I64(3)], &[Dup, Const])]);
}

#[test]
fn early_return() {
    let src = "fn f(x: f64, y: f64) -> f64 {
        var s = x;
        for i in 0..20 {
            if s > 5.0 { return s * y; }
            s = s * 1.3 + y;
            if s < -5.0 { return -s; }
        }
        s + 1.0
    }";
    let at = |x: f64, y: f64| row(src, "f", vec![Val::F64(x), Val::F64(y)], &[Active, Active]);
    check_rows(vec![at(0.5, 0.25), at(-0.5, -0.9), at(0.001, 0.0001)]);
}

#[test]
fn recursion() {
    let src = "fn p(x: f64, n: i64) -> f64 { if n == 0 { 1.0 } else { x * p(x, n - 1) } }";
    let mut m = compile(src);
    let d = rev(&mut m, "p", &[Active, Const], RetActivity::Active);
    let g = grad(&m, d, &[Val::F64(1.5), Val::I64(4)], &[Active, Const], &[]);
    assert_eq!(g.scalars, vec![4.0 * 1.5f64.powi(3)]);
    let mut m = compile(&example("recursion.adz"));
    check(
        &mut m,
        "power",
        &[Val::F64(1.1), Val::I64(13)],
        &[Active, Const],
        RetActivity::Active,
    );
    let g = check(
        &mut m,
        "tree_sum",
        &[a(&[1.0, 2.0, 3.0, 4.0, 5.0]), Val::I64(0), Val::I64(5)],
        &[Dup, Const, Const],
        RetActivity::Active,
    );
    assert_eq!(g.shadows[0], vec![1.25; 5]);
    // Mutual recursion with arrays.
    let src = "fn ev(x: [f64], i: i64, acc: f64) -> f64 { if i == len(x) { acc } else { od(x, i + 1, acc * x[i]) } }
               fn od(x: [f64], i: i64, acc: f64) -> f64 { if i == len(x) { acc } else { ev(x, i + 1, acc + sin(x[i])) } }";
    let mut m = compile(src);
    check(
        &mut m,
        "ev",
        &[a(&[0.3, 1.4, -0.5, 0.9]), Val::I64(0), Val::F64(1.0)],
        &[Dup, Const, Active],
        RetActivity::Active,
    );
}

#[test]
fn mixed_const_and_active_scalars() {
    let src = "fn f(a: f64, b: f64, c: f64, n: i64) -> f64 { a * b * c + sin(a) * f64(n) + b / c }";
    let mut m = compile(src);
    let args = [Val::F64(0.3), Val::F64(1.2), Val::F64(-0.7), Val::I64(3)];
    check(
        &mut m,
        "f",
        &args,
        &[Active, Active, Active, Const],
        RetActivity::Active,
    );
    let g = check(
        &mut m,
        "f",
        &args,
        &[Const, Active, Const, Const],
        RetActivity::Active,
    );
    assert_eq!(g.scalars, vec![0.3 * -0.7 + 1.0 / -0.7]);
    check(
        &mut m,
        "f",
        &args,
        &[Active, Const, Active, Const],
        RetActivity::Active,
    );
}

#[test]
fn call_chain_with_arrays() {
    let src = "fn h(a: [f64], out: mut [f64], s: f64) {
                   for i in 0..len(a) { out[i] = out[i] * s + exp(a[i] * s); }
               }
               fn g(a: [f64], b: mut [f64], s: f64) -> f64 {
                   h(a, b, s);
                   h(a, b, 0.5);
                   var t = 0.0;
                   for i in 0..len(b) { t = t + b[i] * a[i]; }
                   t
               }
               fn f(a: [f64], b: mut [f64], s: f64) -> f64 {
                   let u = g(a, b, s) * s;
                   let scratch = zeros(len(a));
                   h(b, scratch, u);
                   u + scratch[0] + g(scratch, b, 0.1)
               }";
    let args = vec![a(&[0.1, 0.2, -0.3]), a(&[1.0, 0.5, 0.25]), Val::F64(0.4)];
    let with = |acts: &'static [ArgActivity]| row(src, "f", args.clone(), acts);
    check_rows(vec![
        with(&[Dup, Dup, Active]),
        with(&[Const, Dup, Active]),
        with(&[Dup, Const, Const]),
        Row {
            ret: RetActivity::Const,
            ..with(&[Dup, Dup, Const])
        },
    ]);
}

#[test]
fn tuples_and_calls_with_several_results() {
    let src = "fn polar(x: f64, y: f64) -> (f64, f64) { (hypot(x, y), atan2(y, x)) }
               fn f(x: f64, y: f64) -> f64 { let (r, t) = polar(x * y, y); r * sin(t) + t }";
    let xy = vec![Val::F64(0.8), Val::F64(1.3)];
    check_rows(vec![
        row(src, "f", xy.clone(), &[Active, Active]),
        // The gradient of the sum of a tuple's parts.
        row(src, "polar", xy, &[Active, Active]),
    ]);
}

#[test]
fn const_mut_array_that_carries_active_values() {
    // `t` is const: its own derivative is not reported, but what flows
    // through it is.
    let src = "fn f(t: mut [f64], x: f64) -> f64 {
        for i in 0..len(t) { t[i] = t[i] * x; }
        var s = 0.0;
        for i in 0..len(t) { s = s + t[i] * t[i]; }
        s
    }";
    let mut m = compile(src);
    let g = check(
        &mut m,
        "f",
        &[a(&[1.0, 2.0]), Val::F64(3.0)],
        &[Const, Active],
        RetActivity::Active,
    );
    // s = x^2 (1 + 4): ds/dx = 2 * 3 * 5.
    assert_eq!(g.scalars, vec![30.0]);
}

#[test]
fn fill_and_len_are_handled() {
    let src = "fn f(a: mut [f64], x: f64) -> f64 {
        let t = zeros(len(a));
        fill(t, x * x);
        for i in 0..len(a) { a[i] = a[i] + t[i] * f64(i); }
        fill(a, a[1] * x);
        a[0] + t[2]
    }";
    let x = a(&[1.0, 2.0, 3.0]);
    check_rows(vec![row(src, "f", vec![x, Val::F64(0.6)], &[Dup, Active])]);
}

#[test]
fn inactive_paths_get_no_adjoint_code() {
    // Only x is active; the i64 loop and the const array cost nothing in
    // the adjoint beyond the loop's control flow.
    let src = "fn f(x: f64, c: [f64]) -> f64 {
        var s = 0.0;
        for i in 0..len(c) { s = s + c[i] * c[i]; }
        s + x * x
    }";
    let (m, d, text) = adjoint(src, &[Active, Const], "f.adj.active_const");
    // Nothing is taped: x (for x * x) is a parameter of the adjoint, and
    // the loop's trip count is `len(c)`, which it computes.
    assert_eq!(text.matches("pop 0, f64").count(), 0, "{text}");
    assert_eq!(text.matches("pop 0, i64").count(), 0, "{text}");
    let g = grad(
        &m,
        d,
        &[Val::F64(3.0), a(&[1.0, 2.0])],
        &[Active, Const],
        &[],
    );
    assert_eq!(g.scalars, vec![6.0]);
}

/// Counted loops (trip count taped once, induction variables rebuilt): a
/// return from inside two nested loops, induction variables with steps
/// other than 1 and with starts that depend on an outer one or on a
/// popped value, and a loop run zero times.
#[test]
fn counted_loops_with_returns_steps_and_computed_starts() {
    let src = "fn f(x: [f64], w: mut [f64], n: i64) -> f64 {
        var s = 0.0;
        for i in 0..len(x) {
            for j in i + 1..len(x) {
                s = s + x[i] * x[j] * w[j - i];
                if s > 40.0 { return s * x[j]; }
            }
            w[i] = w[i] * s;
        }
        var k = len(x) - 1;
        while k >= 0 { s = s + x[k] * f64(k); k = k - 2; }
        let start = floor(w[0] * 0.0) + 1.0;
        var m = 0;
        for q in 0..n { m = m + 3; s = s + sin(x[m % len(x)]) * start; }
        s
    }";
    let at = |xs: &[f64], n: i64| {
        let ws: Vec<f64> = (0..xs.len()).map(|i| 0.5 + i as f64).collect();
        row(
            src,
            "f",
            vec![a(xs), a(&ws), Val::I64(n)],
            &[Dup, Dup, Const],
        )
    };
    check_rows(vec![
        at(&[0.3, -0.4, 0.5, 0.7], 3),
        at(&[0.9, 2.0, 3.0, 2.5], 0),
        at(&[3.0, 4.0, 2.0], 5),
    ]);
}

/// The reverse of a counted loop pops nothing per iteration when every
/// value it reads can be recomputed from parameters and induction
/// variables, and nothing at all when its trip count can be too
/// (`len(x) - 1`, `Plan::trip_recipe`); a loop that can be left by a
/// `break` pops one counter where it is left, whatever its trip count.
#[test]
fn a_counted_loop_tapes_its_trip_count_only() {
    let src = "fn f(x: [f64], c: f64) -> f64 {
        var s = 0.0;
        for i in 0..len(x) - 1 { s = s + c * x[i] * x[i + 1] - sqrt(x[i] * x[i] + 1.0); }
        s
    }";
    let (_, _, text) = adjoint(src, &[Dup, Active], "f.adj.dup_active");
    assert_eq!(text.matches(" = pop ").count(), 0, "{text}");
    let src = "fn f(x: [f64], c: f64) -> f64 {
        var s = 0.0;
        for i in 0..len(x) - 1 {
            if x[i] > 1000.0 { break; }
            s = s + c * x[i] * x[i + 1] - sqrt(x[i] * x[i] + 1.0);
        }
        s
    }";
    let (m, d, text) = adjoint(src, &[Dup, Active], "f.adj.dup_active");
    assert!(text.contains("pop 0, i64"), "{text}");
    assert_eq!(text.matches("pop 0, f64").count(), 0, "{text}");
    let x = [0.5, -1.5, 2.0, 0.25];
    let g = grad(
        &m,
        d,
        &[a(&x), Val::F64(0.75)],
        &[Dup, Active],
        &[vec![0.0; 4]],
    );
    // By hand: ds/dc = Σ x[i] x[i+1]; ds/dx[k] from the two products and the sqrt.
    let dc: f64 = (0..3).map(|i| x[i] * x[i + 1]).sum();
    assert_eq!(g.scalars, vec![dc]);
    let mut dx = [0.0; 4];
    for i in 0..3 {
        dx[i] += 0.75 * x[i + 1] - x[i] / (x[i] * x[i] + 1.0).sqrt();
        dx[i + 1] += 0.75 * x[i];
    }
    for (k, (&got, &want)) in g.shadows[0].iter().zip(&dx).enumerate() {
        assert!((got - want).abs() <= 1e-15, "dx[{k}]: {got} vs {want}");
    }
}
