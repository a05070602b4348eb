//! Compile times of the test functions and of two large generated functions
//! (printed with `--nocapture`; never asserted: timing belongs in benches).

use super::*;
use adze_ir::{CmpCond, Opcode};

fn report(label: &str, m: &Module, id: FuncId) {
    for opt in [OptLevel::None, OptLevel::Speed, OptLevel::Auto] {
        for verify in [true, false] {
            let o = JitOptions {
                limits: Limits::default(),
                opt_level: opt,
                verify,
                ..JitOptions::default()
            };
            let c = compile(m, id, &o).expect("compiles");
            eprintln!(
                "compile time {label:<28} {opt:?}/verify={verify}: {:>9.3} ms",
                c.compile_time().as_secs_f64() * 1e3
            );
        }
    }
}

/// `n` straight-line f64 operations over a rolling window of values.
fn straight_line(mb: &mut Mb, n: usize) -> FuncId {
    mb.func("@straight(x: f64) -> f64", |b, p| {
        let mut vals = vec![p[0]];
        for k in 0..n {
            let a = vals[vals.len() - 1];
            let c = vals[vals.len().saturating_sub(3)];
            let v = match k % 5 {
                0 => b.fadd(a, c),
                1 => b.fmul(a, c),
                2 => b.unary(Opcode::Sin, a),
                3 => b.fsub(a, c),
                _ => b.binary(Opcode::Max, a, c),
            };
            vals.push(v);
        }
        b.ret(&[vals[vals.len() - 1]]);
    })
}

/// A reverse-mode-like shape: `n` forward steps storing to a tape, then `n`
/// backward steps loading from it.
fn tape_shape(mb: &mut Mb, n: usize) -> FuncId {
    mb.func("@tape(x: f64, g: mut arr) -> f64", |b, p| {
        let len = b.iconst(n as i64);
        let tape = b.zeros(len, "tape");
        let mut x = p[0];
        for k in 0..n {
            let i = b.iconst(k as i64);
            b.store(tape, i, x);
            let y = b.unary(Opcode::Sin, x);
            x = b.fmul(y, x);
        }
        let mut adj = b.fconst(1.0);
        for k in (0..n).rev() {
            let i = b.iconst(k as i64);
            let xk = b.load(tape, i);
            let c = b.unary(Opcode::Cos, xk);
            let s = b.unary(Opcode::Sin, xk);
            let t = b.fmul(c, xk);
            let d = b.fadd(t, s);
            adj = b.fmul(adj, d);
        }
        let zero = b.iconst(0);
        b.store(p[1], zero, adj);
        b.ret(&[x]);
    })
}

#[test]
fn compile_times() {
    let mut mb = Mb::new();
    let sumsq = super::control::sum_of_squares(&mut mb);
    let fib = super::control::fib(&mut mb);
    let (even, _) = super::control::even_odd(&mut mb);
    let sel = mb.func("@select_cmp(a: f64, b: f64) -> f64", |b, p| {
        let c = b.fcmp(CmpCond::Lt, p[0], p[1]);
        let r = b.select(c, p[0], p[1]);
        b.ret(&[r]);
    });
    report("sum_of_squares", &mb.m, sumsq);
    report("fib", &mb.m, fib);
    report("is_even/is_odd", &mb.m, even);
    report("select", &mb.m, sel);
    let mut big = Mb::new();
    let s = straight_line(&mut big, 10_000);
    report("straight line, 10k ops", &big.m, s);
    let mut tape = Mb::new();
    let t = tape_shape(&mut tape, 2_000);
    report("tape shape, 2k steps (~17k)", &tape.m, t);
    // And they run and agree with the interpreter.
    run(&big.m, s, &[Val::F64(0.3)]).unwrap();
    run(&tape.m, t, &[Val::F64(0.3), Val::Array(vec![0.0])]).unwrap();
}
