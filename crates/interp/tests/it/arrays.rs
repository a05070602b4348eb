//! Arrays: by-reference passing, aliasing, local `zeros` arrays, `fill`.

use crate::util::*;
use adze_ir::{FuncId, Module, Type, Val};

/// `scale(a: mut [f64], k: f64) { for i in 0..len(a) { a[i] = a[i] * k } }`
fn scale(m: &mut Module) -> FuncId {
    func(m, "@scale(a: mut arr, k: f64)", |fb, p| {
        let (a, k) = (p[0], p[1]);
        let zero = fb.iconst(0);
        let n = fb.len(a);
        counted_loop(fb, zero, n, &[], |fb, iv, _| {
            let x = fb.load(a, iv);
            let y = fb.fmul(x, k);
            fb.store(a, iv, y);
            vec![]
        });
        fb.ret(&[]);
    })
}

#[test]
fn callee_writes_are_visible_to_the_caller() {
    let mut m = Module::new();
    let scale = scale(&mut m);
    let out = run(&m, scale, &[Val::Array(vec![1.0, -2.0]), Val::F64(0.5)]);
    assert_eq!(out.results, vec![]);
    assert_eq!(out.args, vec![Val::Array(vec![0.5, -1.0]), Val::F64(0.5)]);

    // g(a) { scale(a, 2.0); scale(a, 3.0); a[0] }
    let g = func(&mut m, "@g(a: mut arr) -> f64", |fb, p| {
        let two = fb.fconst(2.0);
        fb.call(scale, &[p[0], two], &[]);
        let three = fb.fconst(3.0);
        fb.call(scale, &[p[0], three], &[]);
        let zero = fb.iconst(0);
        let r = fb.load(p[0], zero);
        fb.ret(&[r]);
    });
    let out = run(&m, g, &[Val::Array(vec![1.0, 2.0])]);
    assert_eq!(out.results, vec![Val::F64(6.0)]);
    assert_eq!(out.args, vec![Val::Array(vec![6.0, 12.0])]);
}

#[test]
fn an_array_passed_twice_aliases() {
    // writer(a: mut, b: mut) { a[0] = 5.0; b[0] }; caller(x: mut) { writer(x, x) }
    // (Derivative code passes one shadow to two `mut` parameters; an array
    // written through one parameter may not be passed to a read-only one.)
    let mut m = Module::new();
    let writer = func(&mut m, "@writer(a: mut arr, b: mut arr) -> f64", |fb, p| {
        let zero = fb.iconst(0);
        let five = fb.fconst(5.0);
        fb.store(p[0], zero, five);
        let r = fb.load(p[1], zero);
        fb.ret(&[r]);
    });
    let caller = func(&mut m, "@caller(x: mut arr) -> f64", |fb, p| {
        let call = fb.call(writer, &[p[0], p[0]], &[Type::F64]);
        let r = fb.func.dfg.first_result(call);
        fb.ret(&[r]);
    });
    let out = run(&m, caller, &[Val::Array(vec![1.0, 2.0])]);
    assert_eq!(out.results, vec![Val::F64(5.0)]);
    assert_eq!(out.args, vec![Val::Array(vec![5.0, 2.0])]);
    // Two distinct arrays from Rust do not alias.
    let out = run(&m, writer, &[Val::Array(vec![1.0]), Val::Array(vec![1.0])]);
    assert_eq!(out.results, vec![Val::F64(1.0)]);
    assert_eq!(out.args, vec![Val::Array(vec![5.0]), Val::Array(vec![1.0])]);
}

#[test]
fn a_written_array_passed_as_read_only_too_is_invalid_ir() {
    let mut m = Module::new();
    let reader = func(&mut m, "@rw(a: mut arr, b: arr)", |fb, _| {
        fb.ret(&[]);
    });
    func(&mut m, "@caller(x: mut arr)", |fb, p| {
        fb.call(reader, &[p[0], p[0]], &[]);
        fb.ret(&[]);
    });
    let e = adze_ir::verify::verify_module(&m).unwrap_err();
    assert!(e.contains("must not alias a read-only argument"), "{e}");
}

#[test]
fn local_zeros_array() {
    // t = zeros(n); t[1] = 2.5; (len(t), t[0], t[1])
    let mut m = Module::new();
    let id = func(&mut m, "@local(n: i64) -> (i64, f64, f64)", |fb, p| {
        let t = fb.zeros(p[0], "t");
        let zero = fb.iconst(0);
        let one = fb.iconst(1);
        let x = fb.fconst(2.5);
        fb.store(t, one, x);
        let l = fb.len(t);
        let a = fb.load(t, zero);
        let b = fb.load(t, one);
        fb.ret(&[l, a, b]);
    });
    assert_eq!(
        results(&m, id, &[Val::I64(3)]),
        vec![Val::I64(3), Val::F64(0.0), Val::F64(2.5)]
    );

    // An empty array is fine as long as nothing indexes it.
    let id = func(&mut m, "@empty() -> i64", |fb, _| {
        let zero = fb.iconst(0);
        let t = fb.zeros(zero, "t");
        let l = fb.len(t);
        fb.ret(&[l]);
    });
    assert_eq!(run_i64(&m, id, &[]), 0);
}

#[test]
fn local_array_filled_by_a_callee() {
    // iota(a: mut) { for i in 0..len(a) { a[i] = f64(i) } }
    // sum_iota(n) { t = zeros(n); iota(t); sum of t }
    let mut m = Module::new();
    let iota = func(&mut m, "@iota(a: mut arr)", |fb, p| {
        let a = p[0];
        let zero = fb.iconst(0);
        let n = fb.len(a);
        counted_loop(fb, zero, n, &[], |fb, iv, _| {
            let x = fb.sitof(iv);
            fb.store(a, iv, x);
            vec![]
        });
        fb.ret(&[]);
    });
    let id = func(&mut m, "@sum_iota(n: i64) -> f64", |fb, p| {
        let t = fb.zeros(p[0], "t");
        fb.call(iota, &[t], &[]);
        let zero = fb.iconst(0);
        let s0 = fb.fconst(0.0);
        let out = counted_loop(fb, zero, p[0], &[s0], |fb, iv, c| {
            let x = fb.load(t, iv);
            vec![fb.fadd(c[0], x)]
        });
        fb.ret(&out);
    });
    for (n, want) in [(5, 10.0), (100, 4950.0)] {
        assert_eq!(run_f64(&m, id, &[Val::I64(n)]), want, "n = {n}");
    }
}

#[test]
fn zeros_in_a_loop_is_fresh_each_time() {
    // for i in 0..n { t = zeros(i + 1); t[i] = 1.0; s_len += len(t); s_first += t[0] }
    // A stale array would make every t[0] 1.0; fresh ones make only the first.
    let mut m = Module::new();
    let id = func(&mut m, "@fresh(n: i64) -> (i64, f64)", |fb, p| {
        let zero = fb.iconst(0);
        let fzero = fb.fconst(0.0);
        let out = counted_loop(fb, zero, p[0], &[zero, fzero], |fb, iv, c| {
            let one = fb.iconst(1);
            let n = fb.iadd(iv, one);
            let t = fb.zeros(n, "t");
            let x = fb.fconst(1.0);
            fb.store(t, iv, x);
            let l = fb.len(t);
            let z = fb.iconst(0);
            let first = fb.load(t, z);
            vec![fb.iadd(c[0], l), fb.fadd(c[1], first)]
        });
        fb.ret(&out);
    });
    assert_eq!(
        results(&m, id, &[Val::I64(4)]),
        vec![Val::I64(10), Val::F64(1.0)]
    );
    assert_eq!(
        results(&m, id, &[Val::I64(1000)]),
        vec![Val::I64(500_500), Val::F64(1.0)]
    );
}

#[test]
fn callee_arrays_are_freed_and_never_confused() {
    // inner() { b = zeros(2); fill(b, 7.0) }
    // outer() { a = zeros(2); a[0] = 1.0; inner(); c = zeros(2); (a[0], c[0]) }
    let mut m = Module::new();
    let inner = func(&mut m, "@inner()", |fb, _| {
        let two = fb.iconst(2);
        let b = fb.zeros(two, "b");
        let seven = fb.fconst(7.0);
        fb.fill(b, seven);
        fb.ret(&[]);
    });
    let outer = func(&mut m, "@outer() -> (f64, f64)", |fb, _| {
        let two = fb.iconst(2);
        let zero = fb.iconst(0);
        let a = fb.zeros(two, "a");
        let one = fb.fconst(1.0);
        fb.store(a, zero, one);
        fb.call(inner, &[], &[]);
        fb.call(inner, &[], &[]);
        let c = fb.zeros(two, "c");
        let x = fb.load(a, zero);
        let y = fb.load(c, zero);
        fb.ret(&[x, y]);
    });
    assert_eq!(results(&m, outer, &[]), vec![Val::F64(1.0), Val::F64(0.0)]);
}

#[test]
fn fill_an_argument() {
    let mut m = Module::new();
    let id = func(&mut m, "@fill_it(a: mut arr, x: f64) -> i64", |fb, p| {
        fb.fill(p[0], p[1]);
        let l = fb.len(p[0]);
        fb.ret(&[l]);
    });
    // (a, x, len(a), a after the fill)
    let rows = [
        (vec![1.0, 2.0, 3.0], 2.5, 3, vec![2.5, 2.5, 2.5]),
        (vec![], 1.0, 0, vec![]),
    ];
    for (a, x, len, filled) in rows {
        let out = run(&m, id, &[Val::Array(a.clone()), Val::F64(x)]);
        assert_eq!(out.results, vec![Val::I64(len)], "fill_it({a:?}, {x})");
        let want = vec![Val::Array(filled), Val::F64(x)];
        assert_eq!(out.args, want, "fill_it({a:?}, {x}) args");
    }
}
