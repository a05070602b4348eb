//! `f64` values live across calls, whose live ranges the translator splits
//! (crates/jit/src/spill.rs): each shape is run at every optimisation level
//! and compared bit for bit with the interpreter (`run`), and checked
//! against values worked out by hand.

use super::*;

/// The seed's forward derivative: a loop carries two sums, which after the
/// loop are live across `cos` and `sin`.
#[test]
fn sums_live_across_calls_after_a_loop() {
    let m = data("spill/sums_then_calls.ir");
    let id = m.get("f").unwrap();
    for x in [vec![], vec![0.5], vec![1.0, 2.0, -3.0]] {
        let s: f64 = x.iter().fold(0.0, |a, v| a + v * v);
        let t: f64 = x.iter().fold(0.0, |a, v| a + v);
        let out = run(&m, id, &[Val::Array(x.clone())]).unwrap();
        let want = s.cos() + s.sin() * t + s;
        assert_eq!(out.results, vec![Val::F64(want), Val::F64(t)], "{x:?}");
    }
}

/// A loop-invariant `c` and the running sum are live across `exp` on one
/// path of a branch inside the loop and not on the other; both versions
/// meet at the latch, and `c` is read again after the loop.
#[test]
fn an_invariant_live_across_a_call_on_one_path_of_a_loop() {
    let m = data("spill/invariant_across_a_conditional_call.ir");
    let id = m.get("f").unwrap();
    for (x, c) in [
        (Vec::<f64>::new(), 2.0_f64),
        (vec![-1.0], 0.5),
        (vec![1.0, -2.0, 0.25, 3.0], -1.5),
    ] {
        let c2 = c * c;
        let mut s = 0.0;
        for &v in &x {
            let t = if v > 0.0 { v.exp() * c2 } else { v };
            s = s + t + c;
        }
        let want = s * c2 + c;
        let got = run_f64(&m, id, &[Val::Array(x.clone()), Val::F64(c)]);
        assert!(same(got, want), "{x:?} {c}: {got} != {want}");
    }
}

/// Values live across a call to generated code with two results and across
/// a `zeros` allocation, live out of the block without being used in it
/// (so they are reloaded before its branch), and a split block parameter.
#[test]
fn values_across_a_call_and_an_allocation() {
    let m = data("spill/across_calls_and_allocation.ir");
    let id = m.get("f").unwrap();
    for (a, b, n) in [(1.5_f64, 0.25_f64, 2_i64), (1.5, 0.25, 0), (-3.0, 1.0, 1)] {
        let s = a + b;
        let y = if n > 0 {
            let sq = s * s;
            sq.tanh() + sq
        } else {
            -s
        };
        let want = y + s + a + b;
        let got = run_f64(&m, id, &[Val::F64(a), Val::F64(b), Val::I64(n)]);
        assert!(same(got, want), "{a} {b} {n}: {got} != {want}");
    }
}

/// More integer values live than registers: `m` parameters live through an
/// outer loop that calls `exp` (so they are split around it), an inner
/// loop that uses none of them (so they are parked on its entry), and a
/// branch around the inner loop (so the two paths meet with the values in
/// different places). Compared with the interpreter at every optimisation
/// level; the sum is worked out here too.
fn pressure(m: usize) -> Module {
    let params: String = (0..m).map(|k| format!(", a{k}: i64")).collect();
    let vals: String = (0..m).map(|k| format!(", v{}: i64", 100 + k)).collect();
    // `start op v100 op v101 ...` into v{first}, v{first + 1}, ...: the
    // instructions, and the value that holds the whole.
    let fold = |op: &str, start: &str, first: usize| -> (String, String) {
        let mut text = String::new();
        let mut last = start.to_string();
        for k in 0..m {
            text += &format!("    v{} = {op} {last}, v{}\n", first + k, 100 + k);
            last = format!("v{}", first + k);
        }
        (text, last)
    };
    let (sum, last) = fold("iadd", "v40", 200);
    let (sum2, last2) = fold("imul", "v50", 300);
    let src = format!(
        "function @f(x: arr, c: bool{params}) -> (f64, i64) {{
block0(v0: arr, v1: bool{vals}):
    v2 = fconst 0.0
    v3 = iconst 0
    v4 = len v0
    v40 = iconst 0
    jump block1(v3, v2, v40)
block1(v5: i64, v6: f64, v41: i64):
    v7 = icmp lt v5, v4
    brif v7, block2, block8
block2:
    v8 = load v0, v5
    v9 = exp v8
    brif v1, block3, block6
block3:
    jump block4(v3, v9)
block4(v10: i64, v11: f64):
    v12 = icmp lt v10, v4
    brif v12, block5, block7(v11)
block5:
    v13 = load v0, v10
    v14 = fadd v11, v13
    v15 = iconst 1
    v16 = iadd v10, v15
    jump block4(v16, v14)
block6:
    jump block7(v9)
block7(v17: f64):
    v18 = fadd v6, v17
{sum}    v19 = iconst 1
    v20 = iadd v5, v19
    v42 = iadd v41, {last}
    jump block1(v20, v18, v42)
block8:
    v50 = iconst 1
{sum2}    v51 = iadd {last2}, v41
    return v6, v51
}}
"
    );
    module(&src)
}

#[test]
fn more_integers_live_than_registers() {
    for m in [3, 8, 20] {
        let md = pressure(m);
        let id = md.get("f").unwrap();
        for (x, c) in [
            (vec![], true),
            (vec![0.5], false),
            (vec![0.25, -1.0, 2.0], true),
            (vec![0.25, -1.0, 2.0], false),
        ] {
            let a: Vec<i64> = (0..m as i64).map(|k| 3 * k - 7).collect();
            let mut args = vec![Val::Array(x.clone()), Val::Bool(c)];
            args.extend(a.iter().map(|&k| Val::I64(k)));
            let out = run(&md, id, &args).unwrap();
            let mut s = 0.0;
            let mut acc = 0i64;
            for &v in &x {
                let e = v.exp();
                s += if c {
                    x.iter().fold(e, |t, &w| t + w)
                } else {
                    e
                };
                acc = acc.wrapping_add(a.iter().fold(0i64, |t, &k| t.wrapping_add(k)));
            }
            let prod = a
                .iter()
                .fold(1i64, |t, &k| t.wrapping_mul(k))
                .wrapping_add(acc);
            assert_eq!(
                out.results,
                vec![Val::F64(s), Val::I64(prod)],
                "m={m} {x:?} {c}"
            );
        }
    }
}
