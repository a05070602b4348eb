//! Arrays: by-reference arguments, `len`, `fill`, `zeros` (also in loops).

use super::*;
use adze_ir::CmpCond;

#[test]
fn writes_through_a_callee_are_visible() {
    let mut mb = Mb::new();
    let set = mb.func("@set(a: mut arr, i: i64, x: f64)", |b, p| {
        b.store(p[0], p[1], p[2]);
        b.ret(&[]);
    });
    // outer(a, b, s): set(a, 0, s); set(a, 2, 2s); return b[1] + a[0]
    let outer = mb.func("@outer(a: mut arr, b: arr, s: f64) -> f64", |b, p| {
        let zero = b.iconst(0);
        let one = b.iconst(1);
        let two = b.iconst(2);
        b.call(set, &[p[0], zero, p[2]], &[]);
        let s2 = b.fadd(p[2], p[2]);
        b.call(set, &[p[0], two, s2], &[]);
        let x = b.load(p[1], one);
        let y = b.load(p[0], zero);
        let r = b.fadd(x, y);
        b.ret(&[r]);
    });
    let args = [
        Val::Array(vec![1.0, 2.0, 3.0]),
        Val::Array(vec![10.0, 20.0]),
        Val::F64(0.25),
    ];
    let out = run(&mb.m, outer, &args).unwrap();
    assert_eq!(out.results, vec![Val::F64(20.25)]);
    assert_eq!(
        out.args,
        vec![
            Val::Array(vec![0.25, 2.0, 0.5]),
            Val::Array(vec![10.0, 20.0]),
            Val::F64(0.25)
        ]
    );
    // The same compiled code, called again, starts afresh.
    let c = jit(&mb.m, outer);
    for _ in 0..3 {
        assert_eq!(c.call(&args).unwrap(), out);
    }
}

#[test]
fn aliased_array_arguments() {
    // Two parameters bound to the same array alias each other.
    let mut mb = Mb::new();
    let inner = mb.func("@inner(p: mut arr, q: mut arr) -> f64", |b, p| {
        let zero = b.iconst(0);
        let one = b.fconst(1.0);
        b.store(p[0], zero, one);
        let x = b.load(p[1], zero);
        b.ret(&[x]);
    });
    let outer = mb.func("@outer(a: mut arr) -> f64", |b, p| {
        let c = b.call(inner, &[p[0], p[0]], &[Type::F64]);
        let r = b.func.dfg.first_result(c);
        b.ret(&[r]);
    });
    let out = run(&mb.m, outer, &[Val::Array(vec![5.0])]).unwrap();
    assert_eq!(out.results, vec![Val::F64(1.0)]);
    assert_eq!(out.args, vec![Val::Array(vec![1.0])]);
}

#[test]
fn len_and_fill_on_arguments() {
    let mut mb = Mb::new();
    let id = mb.func("@fl(a: mut arr, x: f64) -> i64", |b, p| {
        b.fill(p[0], p[1]);
        let n = b.len(p[0]);
        b.ret(&[n]);
    });
    let out = run(
        &mb.m,
        id,
        &[Val::Array(vec![1.0, 2.0, 3.0]), Val::F64(-0.0)],
    )
    .unwrap();
    assert_eq!(out.results, vec![Val::I64(3)]);
    match &out.args[0] {
        Val::Array(xs) => assert!(xs.iter().all(|x| x.to_bits() == (-0.0f64).to_bits())),
        v => panic!("{v:?}"),
    }
    let out = run(&mb.m, id, &[Val::Array(vec![]), Val::F64(1.0)]).unwrap();
    assert_eq!(out.results, vec![Val::I64(0)]);
    assert_eq!(out.args[0], Val::Array(vec![]));
}

/// Long arrays are filled by the run-time routine (`memset` for zeros),
/// short ones inline: the same bits either way, around the threshold, for
/// zeros of both signs, a NaN with a payload, and i64 arrays.
#[test]
fn long_and_short_fills_write_the_same_bits() {
    let mut mb = Mb::new();
    let f = mb.func("@fl(a: mut arr, x: f64)", |b, p| {
        b.fill(p[0], p[1]);
        b.ret(&[]);
    });
    let g = mb.func("@il(a: mut iarr, x: i64)", |b, p| {
        b.fill(p[0], p[1]);
        b.ret(&[]);
    });
    let nan = f64::from_bits(0x7ff8_0000_dead_beef);
    for n in [0, 1, 63, 64, 65, 1000] {
        for x in [0.0, -0.0, 2.5, nan] {
            let out = run(&mb.m, f, &[Val::Array(vec![7.0; n]), Val::F64(x)]).unwrap();
            match &out.args[0] {
                Val::Array(xs) => {
                    assert_eq!(xs.len(), n);
                    assert!(xs.iter().all(|y| y.to_bits() == x.to_bits()), "{n} {x:?}");
                }
                v => panic!("{v:?}"),
            }
        }
        for k in [0, -1, i64::MIN] {
            let out = run(&mb.m, g, &[Val::IArray(vec![3; n]), Val::I64(k)]).unwrap();
            assert_eq!(out.args[0], Val::IArray(vec![k; n]));
        }
    }
}

/// Sum of the elements of `a`, as a loop.
fn sum(mb: &mut Mb) -> FuncId {
    mb.func("@sum(a: arr) -> f64", |b, p| {
        let head = b.create_block();
        let i = b.append_block_param(head, Type::I64);
        let acc = b.append_block_param(head, Type::F64);
        let body = b.create_block();
        let exit = b.create_block();
        let n = b.len(p[0]);
        let zi = b.iconst(0);
        let zf = b.fconst(0.0);
        let one = b.iconst(1);
        b.jump(head, &[zi, zf]);
        b.switch_to_block(head);
        let c = b.icmp(CmpCond::Lt, i, n);
        b.brif(c, body, &[], exit, &[]);
        b.switch_to_block(body);
        let x = b.load(p[0], i);
        let acc2 = b.fadd(acc, x);
        let i2 = b.iadd(i, one);
        b.jump(head, &[i2, acc2]);
        b.switch_to_block(exit);
        b.ret(&[acc]);
    })
}

#[test]
fn zeros_fill_store_and_pass_to_callee() {
    let mut mb = Mb::new();
    let sum = sum(&mut mb);
    // t = zeros n; fill t, 1.5; store t, 0, 3; return sum(t), len(t)
    let id = mb.func("@z(n: i64) -> (f64, i64)", |b, p| {
        let t = b.zeros(p[0], "t");
        let x = b.fconst(1.5);
        b.fill(t, x);
        let zero = b.iconst(0);
        let three = b.fconst(3.0);
        b.store(t, zero, three);
        let c = b.call(sum, &[t], &[Type::F64]);
        let s = b.func.dfg.first_result(c);
        let n = b.len(t);
        b.ret(&[s, n]);
    });
    let out = run(&mb.m, id, &[Val::I64(4)]).unwrap();
    assert_eq!(out.results, vec![Val::F64(7.5), Val::I64(4)]);
    let out = run(&mb.m, id, &[Val::I64(1)]).unwrap();
    assert_eq!(out.results, vec![Val::F64(3.0), Val::I64(1)]);

    // A zero-length array: fill and len work, loads would trap.
    let empty = mb.func("@empty() -> (i64, f64)", |b, _| {
        let zero = b.iconst(0);
        let t = b.zeros(zero, "e");
        let x = b.fconst(1.0);
        b.fill(t, x);
        let n = b.len(t);
        let c = b.call(sum, &[t], &[Type::F64]);
        let s = b.func.dfg.first_result(c);
        b.ret(&[n, s]);
    });
    let out = run(&mb.m, empty, &[]).unwrap();
    assert_eq!(out.results, vec![Val::I64(0), Val::F64(0.0)]);
}

#[test]
fn callee_writes_into_callers_zeros() {
    let mut mb = Mb::new();
    let sum = sum(&mut mb);
    // put(mut a): a[i] = i for every i
    let put = mb.func("@put(a: mut arr)", |b, p| {
        let head = b.create_block();
        let i = b.append_block_param(head, Type::I64);
        let body = b.create_block();
        let exit = b.create_block();
        let n = b.len(p[0]);
        let zero = b.iconst(0);
        let one = b.iconst(1);
        b.jump(head, &[zero]);
        b.switch_to_block(head);
        let c = b.icmp(CmpCond::Lt, i, n);
        b.brif(c, body, &[], exit, &[]);
        b.switch_to_block(body);
        let x = b.sitof(i);
        b.store(p[0], i, x);
        let i1 = b.iadd(i, one);
        b.jump(head, &[i1]);
        b.switch_to_block(exit);
        b.ret(&[]);
    });
    let id = mb.func("@caller(n: i64) -> f64", |b, p| {
        let t = b.zeros(p[0], "t");
        b.call(put, &[t], &[]);
        let c = b.call(sum, &[t], &[Type::F64]);
        let s = b.func.dfg.first_result(c);
        b.ret(&[s]);
    });
    assert_eq!(run_f64(&mb.m, id, &[Val::I64(100)]), 4950.0);
}

/// `for k in 0..n { t = zeros 64; t[5] = k; acc += t[5] + t[6] }`, plus a
/// callee that also allocates, called every iteration.
fn zeros_loop(mb: &mut Mb) -> FuncId {
    let helper = mb.func("@helper(x: f64) -> f64", |b, p| {
        let n = b.iconst(1000);
        let u = b.zeros(n, "u");
        let k = b.iconst(999);
        b.store(u, k, p[0]);
        let y = b.load(u, k);
        b.ret(&[y]);
    });
    mb.func("@zloop(n: i64) -> f64", |b, p| {
        let head = b.create_block();
        let k = b.append_block_param(head, Type::I64);
        let acc = b.append_block_param(head, Type::F64);
        let body = b.create_block();
        let exit = b.create_block();
        let zero = b.iconst(0);
        let zf = b.fconst(0.0);
        let one = b.iconst(1);
        let sixty_four = b.iconst(64);
        let five = b.iconst(5);
        let six = b.iconst(6);
        b.jump(head, &[zero, zf]);
        b.switch_to_block(head);
        let c = b.icmp(CmpCond::Lt, k, p[0]);
        b.brif(c, body, &[], exit, &[]);
        b.switch_to_block(body);
        let t = b.zeros(sixty_four, "t");
        let kf = b.sitof(k);
        b.store(t, five, kf);
        let a = b.load(t, five);
        let z = b.load(t, six);
        let s = b.fadd(a, z);
        let call = b.call(helper, &[s], &[Type::F64]);
        let h = b.func.dfg.first_result(call);
        let acc2 = b.fadd(acc, h);
        // Dirty element 6 so that a reused array that was not re-zeroed
        // would show up in the next iteration.
        b.store(t, six, kf);
        let k1 = b.iadd(k, one);
        b.jump(head, &[k1, acc2]);
        b.switch_to_block(exit);
        b.ret(&[acc]);
    })
}

#[test]
fn zeros_in_a_loop_is_fresh_each_time_and_does_not_grow() {
    let mut mb = Mb::new();
    let id = zeros_loop(&mut mb);
    // sum_{k < 10000} k = 49_995_000
    assert_eq!(run_f64(&mb.m, id, &[Val::I64(10_000)]), 49_995_000.0);
    let c = jit(&mb.m, id);
    let (out, peak) = c.call_with_stats(&[Val::I64(10_000)]);
    assert_eq!(out.unwrap().results, vec![Val::F64(49_995_000.0)]);
    // One array for `t`, one for the callee's `u`, at any time.
    assert_eq!(peak, 2);
}

#[test]
fn arrays_are_freed_on_every_return_path() {
    // Recursion where every frame allocates: peak = depth, and the arrays of
    // returned frames are gone.
    let mut mb = Mb::new();
    let f = mb.declare("@rec(n: i64) -> f64");
    mb.define(f, |b, p| {
        let base = b.create_block();
        let rec = b.create_block();
        let four = b.iconst(4);
        let t = b.zeros(four, "t");
        let one = b.iconst(1);
        let x = b.sitof(p[0]);
        b.store(t, one, x);
        let zero = b.iconst(0);
        let c = b.icmp(CmpCond::Le, p[0], zero);
        b.brif(c, base, &[], rec, &[]);
        b.switch_to_block(base);
        let y = b.load(t, one);
        b.ret(&[y]);
        b.switch_to_block(rec);
        let n1 = b.isub(p[0], one);
        let call = b.call(f, &[n1], &[Type::F64]);
        let r = b.func.dfg.first_result(call);
        let call2 = b.call(f, &[zero], &[Type::F64]);
        let r2 = b.func.dfg.first_result(call2);
        let y = b.load(t, one);
        let s = b.fadd(r, y);
        let s2 = b.fadd(s, r2);
        b.ret(&[s2]);
    });
    // rec(n) = n + (n-1) + ... + 0
    assert_eq!(run_f64(&mb.m, f, &[Val::I64(10)]), 55.0);
    let c = jit(&mb.m, f);
    let (out, peak) = c.call_with_stats(&[Val::I64(10)]);
    assert_eq!(out.unwrap().results, vec![Val::F64(55.0)]);
    assert_eq!(peak, 11); // the frames rec(10) .. rec(0)
}

#[test]
fn call_mut_writes_into_the_callers_buffers() {
    // scale(a, s): a[i] = a[i] * s for every i; returns len(a) as f64.
    let m = data("arrays/call_mut_scale.ir");
    let c = jit(&m, m.get("scale").unwrap());
    let mut args = vec![Val::Array(vec![1.0, 2.0, 3.0]), Val::F64(2.0)];
    let before = match &args[0] {
        Val::Array(v) => v.as_ptr(),
        _ => unreachable!(),
    };
    let r = c.call_mut(&mut args).unwrap();
    assert_eq!(r, vec![Val::F64(3.0)]);
    match &args[0] {
        Val::Array(v) => {
            assert_eq!(v, &vec![2.0, 4.0, 6.0]);
            assert_eq!(v.as_ptr(), before, "the caller's buffer, not a copy");
        }
        _ => unreachable!(),
    }
    // Bad arguments are the same error as for `call`.
    let mut bad = vec![Val::F64(1.0)];
    assert_eq!(
        c.call_mut(&mut bad).unwrap_err(),
        c.call(&[Val::F64(1.0)]).unwrap_err()
    );
}

#[test]
fn single_pass_allocator_and_disassembly() {
    // Every function compiled with the single-pass allocator agrees with the
    // interpreter; the disassembly names each function and its settings.
    let mut mb = Mb::new();
    let id = super::control::sum_of_squares(&mut mb);
    verified(&mb.m);
    for opt in [OptLevel::None, OptLevel::Speed, OptLevel::Auto] {
        let o = JitOptions {
            opt_level: opt,
            verify: true,
            single_pass_above: Some(0),
            disasm: true,
            ..JitOptions::default()
        };
        let c = compile(&mb.m, id, &o).unwrap();
        let want = adze_interp::Interpreter::new(&mb.m)
            .call(id, &[Val::I64(100)])
            .unwrap();
        assert!(c.call(&[Val::I64(100)]).unwrap().bit_eq(&want));
        let d = c.disassembly().unwrap();
        assert!(d.contains("; sumsq (") && d.contains("single-pass"), "{d}");
    }
    let c = jit(&mb.m, id);
    assert!(c.disassembly().is_none());
}

/// `for i in 0..len(x) - k { s += x[i] * x[i + 1] }`, then `x[j]`: the loop's
/// accesses are proven in bounds for `k >= 1` and checked otherwise.
fn neighbour_sum(k: i64) -> Module {
    parse_variant(
        &data_text("arrays/neighbour_sum.ir"),
        "v4 = iconst 1",
        &format!("v4 = iconst {k}"),
    )
}

/// `text` with the one occurrence of `from` replaced by `to`, parsed.
fn parse_variant(text: &str, from: &str, to: &str) -> Module {
    assert_eq!(text.matches(from).count(), 1, "`{from}` in:\n{text}");
    adze_ir::parse::parse_module(&text.replace(from, to)).unwrap()
}

#[test]
fn loop_bounds_checks_agree_with_the_interpreter() {
    for k in [2, 1, 0, -1] {
        let m = neighbour_sum(k);
        verified(&m);
        let id = m.get("f").unwrap();
        for n in [0usize, 1, 2, 5] {
            let x: Vec<f64> = (0..n).map(|i| 1.0 + i as f64 / 8.0).collect();
            for j in [0, n as i64 - 1, n as i64, -1] {
                // `run` compares every optimisation level, `call` and
                // `call_mut` with the interpreter, errors included (k <= 0
                // reads past the end in the last iteration, after the
                // stores of the earlier ones).
                let _ = run(&m, id, &[Val::Array(x.clone()), Val::I64(j)]);
            }
        }
    }
}

#[test]
fn too_much_machine_code_is_an_error() {
    // The relative calls between compiled functions reach ±2 GiB; past
    // `max_code_bytes` (1 GiB by default) compile refuses instead of letting
    // Cranelift's linker fail.
    let mut mb = Mb::new();
    let id = super::control::sum_of_squares(&mut mb);
    let o = JitOptions {
        max_code_bytes: 16,
        ..JitOptions::default()
    };
    match compile(&mb.m, id, &o) {
        Err(e @ adze_jit::JitError::TooLarge { .. }) => {
            assert!(e.to_string().contains("exceeds 16 bytes"), "{e}")
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("compiled"),
    }
    assert!(compile(&mb.m, id, &JitOptions::default()).is_ok());
}

/// `samelen a, b` lets a checked `a[i]` prove `b[i]`: in every block when
/// the `samelen` is in the entry block, and only after it in its own block
/// otherwise (the other arm of the branch keeps `b`'s check).
#[test]
fn samelen_proves_the_shadows_index() {
    let m = data("arrays/samelen_shadow_index.ir");
    let id = m.get("f").unwrap();
    let arr = |n: usize| Val::Array((0..n).map(|i| i as f64 + 0.5).collect());
    for (na, nb, nc) in [(3, 3, 3), (3, 3, 1), (3, 2, 3), (3, 3, 2)] {
        for i in [0, 1, 2, 3, -1] {
            for k in [true, false] {
                // `run` compares the JIT with the interpreter, errors and
                // the arrays' final contents included.
                let out = run(
                    &m,
                    id,
                    &[arr(na), arr(nb), arr(nc), Val::I64(i), Val::Bool(k)],
                );
                let in_c = if k { nc == 3 } else { i < nc as i64 };
                if na == 3 && nb == 3 && (0..3).contains(&i) && in_c {
                    assert_eq!(out.unwrap().results, vec![Val::F64(i as f64 + 0.5)]);
                } else {
                    assert!(out.is_err(), "{na} {nb} {nc} {i} {k}");
                }
            }
        }
    }
}

/// `samelen x, y` (`RELATE`), then `for i in 0..len(x) - 1 { s += y[i] *
/// x[i + 1] + y[i + 1] }`.
fn shadow_sum(relate: &str) -> Module {
    parse_variant(&data_text("arrays/shadow_sum.ir"), "samelen v0, v1", relate)
}

#[test]
fn samelen_proves_the_shadow_in_bounds() {
    // With `samelen x, y`, the loads of y are proven like those of x: two
    // bounds checks (each a call to the trap handler on its cold path) fewer
    // than with `samelen x, x`, which relates nothing. Both agree with the interpreter, errors
    // included (lengths that differ, arrays too short).
    let calls = |m: &Module| {
        let o = JitOptions {
            opt_level: OptLevel::None,
            disasm: true,
            ..JitOptions::default()
        };
        let c = compile(m, m.get("f").unwrap(), &o).unwrap();
        c.disassembly().unwrap().matches("call").count()
    };
    let (related, unrelated) = (shadow_sum("samelen v0, v1"), shadow_sum("samelen v0, v0"));
    // `samelen x, x` is proven already and emits nothing; `samelen x, y`
    // has its own check (one call), and saves the two of `y`.
    assert_eq!(calls(&unrelated) + 1, calls(&related) + 2);
    for m in [&related, &unrelated] {
        let id = m.get("f").unwrap();
        for (nx, ny) in [(0, 0), (1, 1), (4, 4), (4, 2), (2, 4), (3, 0)] {
            let x: Vec<f64> = (0..nx).map(|i| 1.0 + i as f64).collect();
            let y: Vec<f64> = (0..ny).map(|i| 0.5 - i as f64).collect();
            let _ = run(m, id, &[Val::Array(x), Val::Array(y)]);
        }
    }
}

/// The two-lane instructions (made by the optimizer's `vectorize`) and
/// `apart`: the JIT computes what the interpreter does, bit for bit, and
/// an access past the end reports the lane's index as a scalar access
/// would (lane 0 first, then lane 1, before anything is written).
#[test]
fn two_lanes_and_apart_agree_with_the_interpreter() {
    use adze_ir::{InstData, Opcode};
    let mut mb = Mb::new();
    // out[i], out[i + 1] = sqrt((a[i..i+2] * x - [x, y])^-2 / -splat(y)),
    // and lanes' sum, `apart a, out` as 1.0 or 0.0.
    let id = mb.func(
        "@lanes(a: arr, out: mut arr, i: i64, x: f64, y: f64) -> (f64, f64)",
        |b, p| {
            let (a, out, i, x, y) = (p[0], p[1], p[2], p[3], p[4]);
            let v = b.binary(Opcode::Vload, a, i);
            let sx = b.unary(Opcode::Vsplat, x);
            let m = b.binary(Opcode::Vfmul, v, sx);
            let xy = b.binary(Opcode::Vpack, x, y);
            let d = b.binary(Opcode::Vfsub, m, xy);
            let pw = b.vpowi(d, -2);
            let sy = b.unary(Opcode::Vsplat, y);
            let q = b.binary(Opcode::Vfdiv, pw, sy);
            let n = b.unary(Opcode::Vfneg, q);
            let r = b.unary(Opcode::Vsqrt, n);
            let s = b.binary(Opcode::Vfadd, r, n);
            b.build(
                InstData::Ternary {
                    op: Opcode::Vstore,
                    args: [out, i, s],
                },
                &[],
            );
            let sh = b.binary(Opcode::Vshift, s, v);
            let l0 = b.unary(Opcode::Vlane0, sh);
            let l1 = b.unary(Opcode::Vlane1, sh);
            // Not symmetric in the lanes: `vshift`'s order is checked.
            let three = b.fconst(3.0);
            let l1 = b.fmul(three, l1);
            let t = b.fsub(l0, l1);
            let ap = b.binary(Opcode::Apart, a, out);
            let one = b.fconst(1.0);
            let zero = b.fconst(0.0);
            let f = b.select(ap, one, zero);
            b.ret(&[t, f]);
        },
    );
    let nan = f64::from_bits(0x7ff8_0000_0000_0042);
    for (i, x, y) in [
        (0, 1.5, -2.0),
        (1, -0.0, 0.25),
        (2, nan, 3.0),
        (3, 1.0, 1.0),
        (-1, 1.0, 1.0),
    ] {
        let args = [
            Val::Array(vec![1.0, -2.0, 0.5, 4.0]),
            Val::Array(vec![9.0; 4]),
            Val::I64(i),
            Val::F64(x),
            Val::F64(y),
        ];
        let out = run(&mb.m, id, &args);
        match i {
            0..=2 => assert!(out.is_ok(), "{i}: {out:?}"),
            3 => {
                let e = out.unwrap_err().to_string();
                assert!(e.contains("index 4 is out of bounds"), "{e}");
            }
            _ => {
                let e = out.unwrap_err().to_string();
                assert!(e.contains("index -1 is out of bounds"), "{e}");
            }
        }
    }
}

/// Two views of one array share an element when both are non-empty and
/// their ranges meet. `apart a, b` says they do not; `disjoint a, b` traps
/// when they do, on both engines alike. An empty view strictly inside
/// another shares nothing: the interpreter's `disjoint` trapped there
/// until session 17, the JIT's did not.
#[test]
fn apart_and_disjoint_tell_views_that_share_an_element() {
    use adze_ir::Opcode;
    let mut mb = Mb::new();
    let sig = "(a: arr, lo: i64, hi: i64, lo2: i64, hi2: i64)";
    let ap = mb.func(&format!("@ap{sig} -> bool"), |b, p| {
        let v = b.slice(p[0], p[1], p[2]);
        let w = b.slice(p[0], p[3], p[4]);
        let r = b.binary(Opcode::Apart, v, w);
        b.ret(&[r]);
    });
    let dj = mb.func(&format!("@dj{sig}"), |b, p| {
        let v = b.slice(p[0], p[1], p[2]);
        let w = b.slice(p[0], p[3], p[4]);
        b.disjoint(v, w);
        b.ret(&[]);
    });
    let a = Val::Array(vec![0.0; 6]);
    for ((lo, hi, lo2, hi2), share) in [
        ((0, 3, 3, 6), false),
        ((0, 3, 1, 4), true),
        ((1, 4, 1, 5), true),
        ((0, 6, 0, 6), true),
        ((0, 3, 2, 4), true),
        ((2, 2, 0, 6), false),
        ((0, 6, 3, 3), false),
        ((0, 0, 0, 0), false),
    ] {
        let what = format!("{lo}..{hi} {lo2}..{hi2}");
        let args = [
            a.clone(),
            Val::I64(lo),
            Val::I64(hi),
            Val::I64(lo2),
            Val::I64(hi2),
        ];
        let out = run(&mb.m, ap, &args).unwrap();
        assert_eq!(out.results, vec![Val::Bool(!share)], "{what}");
        let out = run(&mb.m, dj, &args);
        assert_eq!(out.is_err(), share, "{what}: {out:?}");
    }
}
