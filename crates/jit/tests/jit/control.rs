//! Control flow: loops, early returns, recursion, block parameters.

use super::*;
use adze_ir::{CmpCond, Opcode};

/// `sum_{i < n} (i as f64)^2`, as a counted loop.
pub fn sum_of_squares(mb: &mut Mb) -> FuncId {
    sum_of_squares_laid_out(mb, "sumsq", &[HEAD, BODY, EXIT])
}

const HEAD: usize = 0;
const BODY: usize = 1;
const EXIT: usize = 2;
const DEAD: usize = 3;

/// [`sum_of_squares`] with its blocks laid out (and written) in `order`;
/// `DEAD` adds a block nothing branches to, returning -1.
fn sum_of_squares_laid_out(mb: &mut Mb, name: &str, order: &[usize]) -> FuncId {
    mb.func(&format!("@{name}(n: i64) -> f64"), |b, p| {
        let mut blocks = [None; 4];
        for &k in order {
            blocks[k] = Some(b.create_block());
        }
        let block = |k: usize| blocks[k].expect("laid out");
        let (head, body, exit) = (block(HEAD), block(BODY), block(EXIT));
        let i = b.append_block_param(head, Type::I64);
        let acc = b.append_block_param(head, Type::F64);
        let zi = b.iconst(0);
        let zf = b.fconst(0.0);
        let one = b.iconst(1);
        b.jump(head, &[zi, zf]);
        for &k in order {
            b.switch_to_block(block(k));
            match k {
                HEAD => {
                    let c = b.icmp(CmpCond::Lt, i, p[0]);
                    b.brif(c, body, &[], exit, &[]);
                }
                BODY => {
                    let x = b.sitof(i);
                    let sq = b.fmul(x, x);
                    let acc2 = b.fadd(acc, sq);
                    let i2 = b.iadd(i, one);
                    b.jump(head, &[i2, acc2]);
                }
                EXIT => {
                    b.ret(&[acc]);
                }
                _ => {
                    let k = b.fconst(-1.0);
                    b.ret(&[k]);
                }
            }
        }
    })
}

#[test]
fn counted_loop_sum_of_squares() {
    let mut mb = Mb::new();
    let id = sum_of_squares(&mut mb);
    // 1000: 999 * 1000 * 1999 / 6
    let rows = [(0, 0.0), (-5, 0.0), (10, 285.0), (1000, 332_833_500.0)];
    for (n, want) in rows {
        assert_eq!(run_f64(&mb.m, id, &[Val::I64(n)]), want, "sumsq({n})");
    }
}

#[test]
fn blocks_laid_out_out_of_order_and_unreachable_blocks() {
    // The same loop, with the blocks in the layout as exit, body, head, plus
    // an unreachable block: translation must follow dominance, not layout.
    let mut mb = Mb::new();
    let id = sum_of_squares_laid_out(&mut mb, "sumsq_rev", &[EXIT, DEAD, BODY, HEAD]);
    assert_eq!(run_f64(&mb.m, id, &[Val::I64(10)]), 285.0);
}

#[test]
fn while_loop_collatz() {
    let mut mb = Mb::new();
    let id = mb.func("@collatz(n: i64) -> i64", |b, p| {
        let head = b.create_block();
        let x = b.append_block_param(head, Type::I64);
        let steps = b.append_block_param(head, Type::I64);
        let body = b.create_block();
        let even = b.create_block();
        let odd = b.create_block();
        let exit = b.create_block();
        let zero = b.iconst(0);
        let one = b.iconst(1);
        let two = b.iconst(2);
        let three = b.iconst(3);
        b.jump(head, &[p[0], zero]);
        b.switch_to_block(head);
        let go = b.icmp(CmpCond::Ne, x, one);
        b.brif(go, body, &[], exit, &[]);
        b.switch_to_block(body);
        let s1 = b.iadd(steps, one);
        let r = b.binary(Opcode::Irem, x, two);
        let is_even = b.icmp(CmpCond::Eq, r, zero);
        b.brif(is_even, even, &[], odd, &[]);
        b.switch_to_block(even);
        let h = b.binary(Opcode::Idiv, x, two);
        b.jump(head, &[h, s1]);
        b.switch_to_block(odd);
        let t = b.imul(x, three);
        let t1 = b.iadd(t, one);
        b.jump(head, &[t1, s1]);
        b.switch_to_block(exit);
        b.ret(&[steps]);
    });
    let steps = |n| run(&mb.m, id, &[Val::I64(n)]).unwrap().results;
    for (n, want) in [(1, 0), (6, 8), (27, 111)] {
        assert_eq!(steps(n), vec![Val::I64(want)], "collatz({n})");
    }
}

#[test]
fn nested_loops() {
    // sum_{i < n} sum_{j < m} i * j
    let mut mb = Mb::new();
    let id = mb.func("@nested(n: i64, m: i64) -> i64", |b, p| {
        let oh = b.create_block();
        let i = b.append_block_param(oh, Type::I64);
        let acc = b.append_block_param(oh, Type::I64);
        let ih = b.create_block();
        let j = b.append_block_param(ih, Type::I64);
        let acc2 = b.append_block_param(ih, Type::I64);
        let ib = b.create_block();
        let onext = b.create_block();
        let exit = b.create_block();
        let r = b.append_block_param(exit, Type::I64);
        let zero = b.iconst(0);
        let one = b.iconst(1);
        b.jump(oh, &[zero, zero]);
        b.switch_to_block(oh);
        let c = b.icmp(CmpCond::Lt, i, p[0]);
        b.brif(c, ih, &[zero, acc], exit, &[acc]);
        b.switch_to_block(ih);
        let c2 = b.icmp(CmpCond::Lt, j, p[1]);
        b.brif(c2, ib, &[], onext, &[]);
        b.switch_to_block(ib);
        let prod = b.imul(i, j);
        let acc3 = b.iadd(acc2, prod);
        let j1 = b.iadd(j, one);
        b.jump(ih, &[j1, acc3]);
        b.switch_to_block(onext);
        let i1 = b.iadd(i, one);
        b.jump(oh, &[i1, acc2]);
        b.switch_to_block(exit);
        b.ret(&[r]);
    });
    let f = |n, m| run(&mb.m, id, &[Val::I64(n), Val::I64(m)]).unwrap().results;
    assert_eq!(f(4, 5), vec![Val::I64(60)]);
    assert_eq!(f(10, 7), vec![Val::I64(945)]);
    assert_eq!(f(0, 7), vec![Val::I64(0)]);
}

#[test]
fn early_returns() {
    // if x < 0 { return -1 }; y = 2x; if y > 10 { return 10 }; return y
    let mut mb = Mb::new();
    let id = mb.func("@clamp2(x: f64) -> f64", |b, p| {
        let neg = b.create_block();
        let pos = b.create_block();
        let big = b.create_block();
        let small = b.create_block();
        let zero = b.fconst(0.0);
        let c = b.fcmp(CmpCond::Lt, p[0], zero);
        b.brif(c, neg, &[], pos, &[]);
        b.switch_to_block(neg);
        let m1 = b.fconst(-1.0);
        b.ret(&[m1]);
        b.switch_to_block(pos);
        let y = b.fadd(p[0], p[0]);
        let ten = b.fconst(10.0);
        let c2 = b.fcmp(CmpCond::Gt, y, ten);
        b.brif(c2, big, &[], small, &[]);
        b.switch_to_block(big);
        b.ret(&[ten]);
        b.switch_to_block(small);
        b.ret(&[y]);
    });
    for (x, want) in [(-3.0, -1.0), (3.0, 6.0), (30.0, 10.0)] {
        assert_eq!(run_f64(&mb.m, id, &[Val::F64(x)]), want, "clamp2({x})");
    }
    // NaN: not < 0, not > 10, so 2 * NaN.
    assert!(run_f64(&mb.m, id, &[Val::F64(f64::NAN)]).is_nan());
}

/// `fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)` over i64.
pub fn fib(mb: &mut Mb) -> FuncId {
    let id = mb.declare("@fib(n: i64) -> i64");
    mb.define(id, |b, p| {
        let base = b.create_block();
        let rec = b.create_block();
        let two = b.iconst(2);
        let c = b.icmp(CmpCond::Lt, p[0], two);
        b.brif(c, base, &[], rec, &[]);
        b.switch_to_block(base);
        b.ret(&[p[0]]);
        b.switch_to_block(rec);
        let one = b.iconst(1);
        let n1 = b.isub(p[0], one);
        let n2 = b.isub(p[0], two);
        let c1 = b.call(id, &[n1], &[Type::I64]);
        let r1 = b.func.dfg.first_result(c1);
        let c2 = b.call(id, &[n2], &[Type::I64]);
        let r2 = b.func.dfg.first_result(c2);
        let s = b.iadd(r1, r2);
        b.ret(&[s]);
    });
    id
}

#[test]
fn recursion_fib_and_factorial() {
    let mut mb = Mb::new();
    let fib = fib(&mut mb);
    let f = |n| run(&mb.m, fib, &[Val::I64(n)]).unwrap().results;
    for (n, want) in [(0, 0), (1, 1), (20, 6765), (25, 75025)] {
        assert_eq!(f(n), vec![Val::I64(want)], "fib({n})");
    }

    let fact = mb.declare("@fact(x: f64) -> f64");
    mb.define(fact, |b, p| {
        let base = b.create_block();
        let rec = b.create_block();
        let one = b.fconst(1.0);
        let c = b.fcmp(CmpCond::Le, p[0], one);
        b.brif(c, base, &[], rec, &[]);
        b.switch_to_block(base);
        b.ret(&[one]);
        b.switch_to_block(rec);
        let x1 = b.fsub(p[0], one);
        let call = b.call(fact, &[x1], &[Type::F64]);
        let r = b.func.dfg.first_result(call);
        let y = b.fmul(p[0], r);
        b.ret(&[y]);
    });
    assert_eq!(run_f64(&mb.m, fact, &[Val::F64(5.0)]), 120.0);
    assert_eq!(
        run_f64(&mb.m, fact, &[Val::F64(20.0)]),
        2_432_902_008_176_640_000.0
    );
    assert!(run_f64(&mb.m, fact, &[Val::F64(170.0)]).is_finite());
    assert_eq!(run_f64(&mb.m, fact, &[Val::F64(171.0)]), f64::INFINITY);
}

/// `is_even(n) = n == 0 || is_odd(n - 1)`, `is_odd(n) = n != 0 && is_even(n - 1)`.
pub fn even_odd(mb: &mut Mb) -> (FuncId, FuncId) {
    let even = mb.declare("@is_even(n: i64) -> bool");
    let odd = mb.declare("@is_odd(n: i64) -> bool");
    for (id, other, at_zero) in [(even, odd, true), (odd, even, false)] {
        mb.define(id, |b, p| {
            let base = b.create_block();
            let rec = b.create_block();
            let zero = b.iconst(0);
            let c = b.icmp(CmpCond::Eq, p[0], zero);
            b.brif(c, base, &[], rec, &[]);
            b.switch_to_block(base);
            let k = b.bconst(at_zero);
            b.ret(&[k]);
            b.switch_to_block(rec);
            let one = b.iconst(1);
            let n1 = b.isub(p[0], one);
            let call = b.call(other, &[n1], &[Type::Bool]);
            let r = b.func.dfg.first_result(call);
            b.ret(&[r]);
        });
    }
    (even, odd)
}

#[test]
fn mutual_recursion() {
    let mut mb = Mb::new();
    let (even, odd) = even_odd(&mut mb);
    let f = |id, n| run(&mb.m, id, &[Val::I64(n)]).unwrap().results;
    let rows = [
        ("is_even", even, 0, true),
        ("is_even", even, 10, true),
        ("is_even", even, 7, false),
        ("is_odd", odd, 7, true),
        // 999 nested calls below the outermost: depth 1000, exactly the limit.
        ("is_even", even, 999, false),
    ];
    for (name, id, n, want) in rows {
        assert_eq!(f(id, n), vec![Val::Bool(want)], "{name}({n})");
    }
}

#[test]
fn block_arguments_are_parallel_copies() {
    // Swaps (x, y) n times through `jump head(i + 1, y, x)`.
    let mut mb = Mb::new();
    let id = mb.func("@swap(n: i64, x: f64, y: f64) -> (f64, f64)", |b, p| {
        let head = b.create_block();
        let i = b.append_block_param(head, Type::I64);
        let x = b.append_block_param(head, Type::F64);
        let y = b.append_block_param(head, Type::F64);
        let body = b.create_block();
        let exit = b.create_block();
        let zero = b.iconst(0);
        let one = b.iconst(1);
        b.jump(head, &[zero, p[1], p[2]]);
        b.switch_to_block(head);
        let c = b.icmp(CmpCond::Lt, i, p[0]);
        b.brif(c, body, &[], exit, &[]);
        b.switch_to_block(body);
        let i1 = b.iadd(i, one);
        b.jump(head, &[i1, y, x]);
        b.switch_to_block(exit);
        b.ret(&[x, y]);
    });
    let f = |n| {
        run(&mb.m, id, &[Val::I64(n), Val::F64(1.0), Val::F64(2.0)])
            .unwrap()
            .results
    };
    assert_eq!(f(0), vec![Val::F64(1.0), Val::F64(2.0)]);
    assert_eq!(f(3), vec![Val::F64(2.0), Val::F64(1.0)]);
    assert_eq!(f(4), vec![Val::F64(1.0), Val::F64(2.0)]);
}

#[test]
fn brif_to_one_block_with_different_arguments() {
    let mut mb = Mb::new();
    let id = mb.func("@pick(c: bool, x: f64, y: f64) -> f64", |b, p| {
        let join = b.create_block();
        let r = b.append_block_param(join, Type::F64);
        b.brif(p[0], join, &[p[1]], join, &[p[2]]);
        b.switch_to_block(join);
        b.ret(&[r]);
    });
    let f = |c| run_f64(&mb.m, id, &[Val::Bool(c), Val::F64(1.0), Val::F64(2.0)]);
    assert_eq!(f(true), 1.0);
    assert_eq!(f(false), 2.0);
}

#[test]
fn deep_recursion_beyond_the_inline_stack_budget() {
    // With a raised depth limit, recursion deeper than the caller's stack
    // budget is re-run on a thread with a large stack: same result as the
    // interpreter, no crash.
    let mut mb = Mb::new();
    let (even, _) = even_odd(&mut mb);
    let limits = Limits {
        max_call_depth: 200_000,
        ..Limits::default()
    };
    let out = run_limits(&mb.m, even, &[Val::I64(150_000)], limits).unwrap();
    assert_eq!(out.results, vec![Val::Bool(true)]);
    assert_eq!(
        run_limits(&mb.m, even, &[Val::I64(200_000)], limits),
        // Depth 200 001 is odd: is_even.
        Err(RunError::new(
            "is_even",
            adze_ir::TrapKind::CallDepthExceeded { limit: 200_000 }
        ))
    );
}

/// Deep recursion through a `mut` array: the zero-copy call cannot discard
/// a run that ran out of stack (it wrote the caller's array), so it runs
/// once, on the big thread; every level's write happens exactly once. A
/// root without `mut` parameters may run twice (first on the caller's
/// thread), which the same test without `mut` shows gives the same bits.
#[test]
fn deep_recursion_writes_a_mut_array_once() {
    let text = |m: &str| {
        format!(
            "function @bump(a: {m}arr, n: i64) -> f64 {{
block0(v0: arr, v1: i64):
    v2 = iconst 0
    v3 = len v0
    v4 = sitof v1
    v5 = icmp eq v1, v2
    brif v5, block1, block2
block1:
    v6 = load v0, v2
    return v6
block2:
    v7 = iconst 1
    v8 = isub v1, v7
    v9 = irem v1, v3
    v10 = load v0, v9
    v11 = fadd v10, v4
    {store}
    v12 = call @bump(v0, v8)
    v13 = fadd v12, v11
    return v13
}}
",
            store = if m.is_empty() {
                ""
            } else {
                "store v0, v9, v11"
            }
        )
    };
    let limits = Limits {
        max_call_depth: 200_000,
        ..Limits::default()
    };
    for m in ["mut ", ""] {
        let module = adze_ir::parse::parse_module(&text(m)).unwrap();
        let id = module.get("bump").unwrap();
        let a = Val::Array(vec![0.5, 1.0, 2.0]);
        // Deep enough to leave the caller's budget; `run_limits` compares
        // `call`, `call_mut` and the interpreter, bit for bit (the final
        // array included).
        let out = run_limits(&module, id, &[a.clone(), Val::I64(150_000)], limits).unwrap();
        if m.is_empty() {
            assert_eq!(out.args[0], a);
        } else {
            assert_ne!(out.args[0], a);
        }
        // Shallow: on the caller's thread.
        run_limits(&module, id, &[a, Val::I64(50)], limits).unwrap();
    }
}

/// Loop headers branch to the exit first on the complemented comparison
/// (docs/jit.md, *Block layout*): for `fcmp`, the unordered complement, so
/// a NaN bound or start leaves the loop exactly as `!(s op lim)` says. Every
/// condition, with NaNs, signed zeros and equal values; the body stops
/// after 5 iterations so that every condition terminates.
#[test]
fn loop_headers_on_float_comparisons_with_nans() {
    let nan = f64::NAN;
    for cond in ["eq", "ne", "lt", "le", "gt", "ge"] {
        let m = adze_ir::parse::parse_module(&format!(
            "function @f(s0: f64, lim: f64) -> (f64, i64) {{
block0(v0: f64, v1: f64):
    v2 = iconst 0
    jump block1(v0, v2)
block1(v3: f64, v4: i64):
    v5 = fcmp {cond} v3, v1
    brif v5, block2, block3
block2:
    v6 = fconst 1.0
    v7 = fadd v3, v6
    v8 = iconst 1
    v9 = iadd v4, v8
    v10 = iconst 5
    v11 = icmp ge v9, v10
    brif v11, block3, block1(v7, v9)
block3:
    return v3, v4
}}
"
        ))
        .unwrap();
        verified(&m);
        let id = m.get("f").unwrap();
        let holds = |s: f64, l: f64| match cond {
            "eq" => s == l,
            "ne" => s != l,
            "lt" => s < l,
            "le" => s <= l,
            "gt" => s > l,
            _ => s >= l,
        };
        for (s0, lim) in [
            (0.0, 3.0),
            (5.0, 3.0),
            (nan, 3.0),
            (0.0, nan),
            (-0.0, 0.0),
            (3.0, 3.0),
        ] {
            // `run` also compares with the interpreter at every level.
            let out = run(&m, id, &[Val::F64(s0), Val::F64(lim)]).unwrap();
            // The body's early exit returns the header's values.
            let (mut s, mut n) = (s0, 0);
            while holds(s, lim) && n + 1 < 5 {
                s += 1.0;
                n += 1;
            }
            assert_eq!(out.results[1], Val::I64(n), "{cond} {s0} {lim}");
        }
    }
}
