//! Every f64 operation against `adze_ir::semantics`, bit for bit, at many
//! inputs (NaN, ±0, ±inf, subnormals, halves, huge values).

use super::*;
use adze_ir::semantics;
use adze_ir::Opcode;

fn inputs() -> Vec<f64> {
    let mut xs = vec![
        f64::NAN,
        -f64::NAN,
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1.0,
        -1.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        0.49999999999999994,
        -0.49999999999999994,
        4503599627370495.5,
        -4503599627370495.5,
        4503599627370497.0,
        1e-310,
        -1e-310,
        f64::MIN_POSITIVE,
        f64::MAX,
        f64::MIN,
        f64::EPSILON,
        std::f64::consts::PI,
        -std::f64::consts::FRAC_PI_2,
        710.0,
        -745.5,
        1e300,
        -1e-300,
        3.0,
        0.1,
        -7.25,
        100.0,
    ];
    // A deterministic spread of ordinary values.
    let mut s = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..40 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let m = (s >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
        let e = ((s & 0x3f) as i32) - 32;
        xs.push((m * 2.0 - 1.0) * 2f64.powi(e));
    }
    xs
}

fn unary_ops() -> Vec<Opcode> {
    Opcode::ALL
        .iter()
        .copied()
        .filter(|op| {
            (op.is_intrinsic() || *op == Opcode::Fneg)
                && op.fixed_signature() == Some((&[Type::F64][..], Some(Type::F64)))
        })
        .collect()
}

fn binary_ops() -> Vec<Opcode> {
    Opcode::ALL
        .iter()
        .copied()
        .filter(|op| {
            (op.is_intrinsic()
                || matches!(
                    op,
                    Opcode::Fadd | Opcode::Fsub | Opcode::Fmul | Opcode::Fdiv
                ))
                && op.fixed_signature() == Some((&[Type::F64, Type::F64][..], Some(Type::F64)))
        })
        .collect()
}

#[test]
fn the_op_lists_cover_every_intrinsic() {
    let n = unary_ops().len() + binary_ops().len();
    // Every intrinsic of the opcode table, `fneg` and the 4 f64 arithmetic ops.
    let intrinsics = Opcode::ALL.iter().filter(|op| op.is_intrinsic()).count();
    assert!(intrinsics >= 26, "{intrinsics}");
    assert_eq!(
        n,
        intrinsics + 1 + 4,
        "{:?} {:?}",
        unary_ops(),
        binary_ops()
    );
}

/// Each of `ops`, a function of `arity` f64 parameters, compiled at both
/// optimisation levels, gives `want` bit for bit on every tuple of
/// [`inputs`], and agrees with the interpreter.
fn check_against_semantics(ops: &[Opcode], arity: usize, want: fn(Opcode, &[f64]) -> f64) {
    let xs = inputs();
    let tuples: Vec<Vec<f64>> = match arity {
        1 => xs.iter().map(|&x| vec![x]).collect(),
        _ => xs
            .iter()
            .flat_map(|&a| xs.iter().map(move |&b| vec![a, b]))
            .collect(),
    };
    for &op in ops {
        let params: Vec<String> = (0..arity).map(|k| format!("x{k}: f64")).collect();
        let mut mb = Mb::new();
        let id = mb.func(
            &format!("@{}({}) -> f64", op.name(), params.join(", ")),
            |b, p| {
                let y = match arity {
                    1 => b.unary(op, p[0]),
                    _ => b.binary(op, p[0], p[1]),
                };
                b.ret(&[y]);
            },
        );
        for opt in [OptLevel::None, OptLevel::Speed] {
            let c = compile(&mb.m, id, &options(opt, Limits::default())).unwrap();
            for t in &tuples {
                let args: Vec<Val> = t.iter().map(|&x| Val::F64(x)).collect();
                let got = match c.call(&args).unwrap().results[0] {
                    Val::F64(y) => y,
                    ref v => panic!("{v:?}"),
                };
                let want = want(op, t);
                assert!(
                    same(got, want),
                    "{op}{t:?} = {got:e} ({:#x}), want {want:e} ({:#x}) [{opt:?}]",
                    got.to_bits(),
                    want.to_bits()
                );
            }
        }
        run(&mb.m, id, &vec![Val::F64(0.75); arity]).unwrap();
    }
}

#[test]
fn unary_ops_match_semantics_bit_for_bit() {
    check_against_semantics(&unary_ops(), 1, |op, x| semantics::unary_f64(op, x[0]));
}

#[test]
fn binary_ops_match_semantics_bit_for_bit() {
    check_against_semantics(&binary_ops(), 2, |op, x| {
        semantics::binary_f64(op, x[0], x[1])
    });
}

#[test]
fn min_max_edge_values_by_hand() {
    let mut mb = Mb::new();
    let id = mb.func("@mm(a: f64, b: f64) -> (f64, f64)", |b, p| {
        let lo = b.binary(Opcode::Min, p[0], p[1]);
        let hi = b.binary(Opcode::Max, p[0], p[1]);
        b.ret(&[lo, hi]);
    });
    let mm = |a: f64, b: f64| match run(&mb.m, id, &[Val::F64(a), Val::F64(b)])
        .unwrap()
        .results
        .as_slice()
    {
        [Val::F64(x), Val::F64(y)] => (*x, *y),
        other => panic!("{other:?}"),
    };
    let (lo, hi) = mm(-0.0, 0.0);
    assert!(lo == 0.0 && lo.is_sign_negative() && hi == 0.0 && hi.is_sign_positive());
    let (lo, hi) = mm(0.0, -0.0);
    assert!(lo.is_sign_negative() && hi.is_sign_positive());
    let (lo, hi) = mm(f64::NAN, 1.0);
    assert!(lo.is_nan() && hi.is_nan());
    let (lo, hi) = mm(1.0, f64::NAN);
    assert!(lo.is_nan() && hi.is_nan());
    assert_eq!(mm(f64::NEG_INFINITY, 3.0), (f64::NEG_INFINITY, 3.0));
    assert_eq!(mm(2.0, -5.0), (-5.0, 2.0));
}

#[test]
fn sign_and_round_edge_values_by_hand() {
    let mut mb = Mb::new();
    let id = mb.func("@sr(x: f64) -> (f64, f64)", |b, p| {
        let s = b.unary(Opcode::Sign, p[0]);
        let r = b.unary(Opcode::Round, p[0]);
        b.ret(&[s, r]);
    });
    let sr = |x: f64| match run(&mb.m, id, &[Val::F64(x)]).unwrap().results.as_slice() {
        [Val::F64(s), Val::F64(r)] => (*s, *r),
        other => panic!("{other:?}"),
    };
    assert_eq!(sr(3.5), (1.0, 4.0));
    assert_eq!(sr(2.5), (1.0, 3.0)); // half away from zero, not to even
    assert_eq!(sr(-2.5), (-1.0, -3.0));
    assert_eq!(sr(0.49999999999999994), (1.0, 0.0));
    let (s, r) = sr(-0.0);
    assert!(s == 0.0 && s.is_sign_negative() && r.is_sign_negative());
    let (s, r) = sr(0.0);
    assert!(s.to_bits() == 0 && r.to_bits() == 0);
    let (s, r) = sr(f64::NAN);
    assert!(s.is_nan() && r.is_nan());
    assert_eq!(sr(f64::NEG_INFINITY), (-1.0, f64::NEG_INFINITY));
    assert_eq!(sr(1e-310), (1.0, 0.0));
}

#[test]
fn powi_matches_semantics_for_every_exponent_shape() {
    let mut exps: Vec<i32> = (-17..=17).collect();
    exps.extend([
        31,
        32,
        33,
        63,
        64,
        100,
        -100,
        1023,
        i32::MAX,
        i32::MIN,
        i32::MIN + 1,
    ]);
    let xs = inputs();
    let mut mb = Mb::new();
    let ids: Vec<(i32, FuncId)> = exps
        .iter()
        .map(|&n| {
            let name = format!("powi_{}", n.unsigned_abs()) + if n < 0 { "_neg" } else { "" };
            let id = mb.func(&format!("@{name}(x: f64) -> f64"), |b, p| {
                let y = b.powi(p[0], n);
                b.ret(&[y]);
            });
            (n, id)
        })
        .collect();
    for (n, id) in ids {
        let c = jit(&mb.m, id);
        for &x in &xs {
            let got = match c.call(&[Val::F64(x)]).unwrap().results[0] {
                Val::F64(y) => y,
                ref v => panic!("{v:?}"),
            };
            let want = semantics::powi(x, n);
            assert!(same(got, want), "powi({x:e}, {n}) = {got:e}, want {want:e}");
        }
    }
    // By hand: x^0 = 1 even for NaN; x^2 = x*x; 2^MIN = 0.
    let p0 = mb.m.get("powi_0").unwrap();
    assert_eq!(run_f64(&mb.m, p0, &[Val::F64(f64::NAN)]), 1.0);
    let p2 = mb.m.get("powi_2").unwrap();
    assert_eq!(run_f64(&mb.m, p2, &[Val::F64(1.1)]), 1.1 * 1.1);
    let p3 = mb.m.get("powi_3").unwrap();
    assert_eq!(run_f64(&mb.m, p3, &[Val::F64(1.1)]), 1.1 * (1.1 * 1.1));
    let pm2 = mb.m.get("powi_2_neg").unwrap();
    assert_eq!(run_f64(&mb.m, pm2, &[Val::F64(1.1)]), 1.0 / (1.1 * 1.1));
    let pmin =
        mb.m.get(&format!("powi_{}_neg", i32::MIN.unsigned_abs()))
            .unwrap();
    assert_eq!(run_f64(&mb.m, pmin, &[Val::F64(2.0)]), 0.0);
}

#[test]
fn intrinsic_symbols_are_documented() {
    let syms = adze_jit::intrinsic_symbols();
    for (op, name) in &syms {
        assert_eq!(*name, format!("adze_{}", op.name()));
    }
    assert!(syms.iter().any(|(op, _)| *op == Opcode::Round));
    assert!(!syms.iter().any(|(op, _)| *op == Opcode::Sqrt));
}
