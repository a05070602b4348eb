//! Control flow: counted, nested and while loops, early returns, and the
//! parallel-copy semantics of block arguments.

use crate::util::*;
use adze_ir::{CmpCond, Module, Opcode, Type, Val};

#[test]
fn counted_loop_sum_of_squares() {
    // s = 0; for i in 0..n { s = s + f64(i) * f64(i) }; s
    let mut m = Module::new();
    let id = func(&mut m, "@sumsq(n: i64) -> f64", |fb, p| {
        let zero = fb.iconst(0);
        let s0 = fb.fconst(0.0);
        let out = counted_loop(fb, zero, p[0], &[s0], |fb, iv, c| {
            let x = fb.sitof(iv);
            let sq = fb.fmul(x, x);
            vec![fb.fadd(c[0], sq)]
        });
        fb.ret(&out);
    });
    // 1000: 999 * 1000 * 1999 / 6, exact in f64.
    for (n, want) in [(10, 285.0), (0, 0.0), (-5, 0.0), (1000, 332_833_500.0)] {
        assert_eq!(run_f64(&m, id, &[Val::I64(n)]), want, "sumsq({n})");
    }
}

#[test]
fn seed_primal_sum_of_squares_over_an_array() {
    // f_custom of the spec: s = 0; for i in 0..len(x) { s = s + x[i] * x[i] }; s
    let mut m = Module::new();
    let id = func(&mut m, "@f_custom(x: arr) -> f64", |fb, p| {
        let zero = fb.iconst(0);
        let n = fb.len(p[0]);
        let s0 = fb.fconst(0.0);
        let x = p[0];
        let out = counted_loop(fb, zero, n, &[s0], |fb, iv, c| {
            let xi = fb.load(x, iv);
            let sq = fb.fmul(xi, xi);
            vec![fb.fadd(c[0], sq)]
        });
        fb.ret(&out);
    });
    let out = run(&m, id, &[Val::Array(vec![1.0, 2.0, 3.0])]);
    assert_eq!(out.results, vec![Val::F64(14.0)]);
    assert_eq!(out.args, vec![Val::Array(vec![1.0, 2.0, 3.0])]);
    assert_eq!(run_f64(&m, id, &[Val::Array(vec![2.0])]), 4.0);
    assert_eq!(run_f64(&m, id, &[Val::Array(vec![])]), 0.0);
}

#[test]
fn nested_loops() {
    // count = 0; for i in 0..n { for j in 0..i { count = count + 1 } }; count
    let mut m = Module::new();
    let id = func(&mut m, "@pairs(n: i64) -> i64", |fb, p| {
        let zero = fb.iconst(0);
        let out = counted_loop(fb, zero, p[0], &[zero], |fb, iv, c| {
            let z = fb.iconst(0);
            counted_loop(fb, z, iv, &[c[0]], |fb, _j, c| {
                let one = fb.iconst(1);
                vec![fb.iadd(c[0], one)]
            })
        });
        fb.ret(&out);
    });
    for (n, want) in [(10, 45), (1, 0), (100, 4950)] {
        assert_eq!(run_i64(&m, id, &[Val::I64(n)]), want, "pairs({n})");
    }

    // s = 0; for i in 0..n { for j in 0..k { s = s + i * j } }; s
    let id = func(&mut m, "@prods(n: i64, k: i64) -> i64", |fb, p| {
        let zero = fb.iconst(0);
        let k = p[1];
        let out = counted_loop(fb, zero, p[0], &[zero], |fb, iv, c| {
            let z = fb.iconst(0);
            counted_loop(fb, z, k, &[c[0]], |fb, jv, c| {
                let prod = fb.imul(iv, jv);
                vec![fb.iadd(c[0], prod)]
            })
        });
        fb.ret(&out);
    });
    // (0+1+2+3) * (0+1+2+3+4) = 6 * 10
    assert_eq!(run_i64(&m, id, &[Val::I64(4), Val::I64(5)]), 60);
}

#[test]
fn while_loop_collatz() {
    // steps = 0; while x != 1 { x = if x % 2 == 0 { x / 2 } else { 3x + 1 }; steps += 1 }
    let mut m = Module::new();
    let id = func(&mut m, "@collatz(x: i64) -> i64", |fb, p| {
        let header = fb.create_block();
        let body = fb.create_block();
        let even = fb.create_block();
        let odd = fb.create_block();
        let exit = fb.create_block();
        let zero = fb.iconst(0);
        fb.jump(header, &[p[0], zero]);

        fb.switch_to_block(header);
        let x = fb.append_block_param(header, Type::I64);
        let steps = fb.append_block_param(header, Type::I64);
        let one = fb.iconst(1);
        let go = fb.icmp(CmpCond::Ne, x, one);
        fb.brif(go, body, &[], exit, &[steps]);

        fb.switch_to_block(body);
        let two = fb.iconst(2);
        let r = fb.binary(Opcode::Irem, x, two);
        let z = fb.iconst(0);
        let is_even = fb.icmp(CmpCond::Eq, r, z);
        let one = fb.iconst(1);
        let s1 = fb.iadd(steps, one);
        fb.brif(is_even, even, &[], odd, &[]);

        fb.switch_to_block(even);
        let h = fb.binary(Opcode::Idiv, x, two);
        fb.jump(header, &[h, s1]);

        fb.switch_to_block(odd);
        let three = fb.iconst(3);
        let t = fb.imul(x, three);
        let t1 = fb.iadd(t, one);
        fb.jump(header, &[t1, s1]);

        fb.switch_to_block(exit);
        let s = fb.append_block_param(exit, Type::I64);
        fb.ret(&[s]);
    });
    for (n, want) in [(27, 111), (6, 8), (1, 0)] {
        assert_eq!(run_i64(&m, id, &[Val::I64(n)]), want, "collatz({n})");
    }
}

#[test]
fn early_return() {
    // if x < 0 { return -1.0 }; 2 * x
    let mut m = Module::new();
    let id = func(&mut m, "@early(x: f64) -> f64", |fb, p| {
        let neg = fb.create_block();
        let rest = fb.create_block();
        let zero = fb.fconst(0.0);
        let c = fb.fcmp(CmpCond::Lt, p[0], zero);
        fb.brif(c, neg, &[], rest, &[]);
        fb.switch_to_block(neg);
        let m1 = fb.fconst(-1.0);
        fb.ret(&[m1]);
        fb.switch_to_block(rest);
        let two = fb.fconst(2.0);
        let r = fb.fmul(two, p[0]);
        fb.ret(&[r]);
    });
    for (x, want) in [(-3.0, -1.0), (4.0, 8.0)] {
        assert_eq!(run_f64(&m, id, &[Val::F64(x)]), want, "early({x})");
    }

    // for i in 0..len(a) { if a[i] > t { return i } }; -1
    let id = func(&mut m, "@find(a: arr, t: f64) -> i64", |fb, p| {
        let (a, t) = (p[0], p[1]);
        let zero = fb.iconst(0);
        let n = fb.len(a);
        counted_loop(fb, zero, n, &[], |fb, iv, _| {
            let found = fb.create_block();
            let next = fb.create_block();
            let x = fb.load(a, iv);
            let g = fb.fcmp(CmpCond::Gt, x, t);
            fb.brif(g, found, &[], next, &[]);
            fb.switch_to_block(found);
            fb.ret(&[iv]);
            fb.switch_to_block(next);
            vec![]
        });
        let m1 = fb.iconst(-1);
        fb.ret(&[m1]);
    });
    let a = Val::Array(vec![1.0, 5.0, 3.0, 7.0]);
    for (t, want) in [(4.0, 1), (6.0, 3), (10.0, -1)] {
        assert_eq!(
            run_i64(&m, id, &[a.clone(), Val::F64(t)]),
            want,
            "find(a, {t})"
        );
    }
}

#[test]
fn block_arguments_are_a_parallel_copy() {
    // (a, b) = (b, a), n times: a sequential copy would give (b, b).
    let mut m = Module::new();
    let id = func(
        &mut m,
        "@swap(a: f64, b: f64, n: i64) -> (f64, f64)",
        |fb, p| {
            let zero = fb.iconst(0);
            let out = counted_loop(fb, zero, p[2], &[p[0], p[1]], |_, _, c| vec![c[1], c[0]]);
            fb.ret(&out);
        },
    );
    for (n, want) in [(3, [2.0, 1.0]), (4, [1.0, 2.0])] {
        let args = [Val::F64(1.0), Val::F64(2.0), Val::I64(n)];
        assert_eq!(results(&m, id, &args), want.map(Val::F64), "swap n = {n}");
    }

    // (x, y, z) = (y, z, x), n times.
    let id = func(
        &mut m,
        "@rotate(x: i64, y: i64, z: i64, n: i64) -> (i64, i64, i64)",
        |fb, p| {
            let zero = fb.iconst(0);
            let out = counted_loop(fb, zero, p[3], &[p[0], p[1], p[2]], |_, _, c| {
                vec![c[1], c[2], c[0]]
            });
            fb.ret(&out);
        },
    );
    for (n, want) in [(1, [2, 3, 1]), (5, [3, 1, 2])] {
        let args = [1, 2, 3, n].map(Val::I64);
        assert_eq!(results(&m, id, &args), want.map(Val::I64), "rotate n = {n}");
    }
}
