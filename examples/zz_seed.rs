use adze::{Arg, Program};
use std::time::Instant;

const SRC: &str = "
fn f_plain(x: [f64]) -> f64 {
    var s = 0.0;
    for i in 0..len(x) { s = s + x[i] * x[i]; }
    s
}
fn fill0(dx: mut [f64]) { fill(dx, 0.0); }
fn adj(x: [f64], dx: mut [f64], c: f64) {
    for i in 0..len(x) { dx[i] = dx[i] + 2.0 * x[i] * c; }
}
fn adjr(x: [f64], dx: mut [f64], c: f64) {
    for i in 0..len(x) { let j = len(x) - 1 - i; dx[j] = dx[j] + 2.0 * x[j] * c; }
}
fn g_plain(x: [f64]) -> f64 { cos(f_plain(x)) }
fn dg_plain(x: [f64], dx: mut [f64]) {
    fill(dx, 0.0);
    autodiff(reverse, g_plain, active, dup(x, dx));
}
";

fn time(name: &str, mut f: impl FnMut()) {
    let mut best = f64::MAX;
    for _ in 0..200 {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!("{name}: {:.1} us", best * 1e6);
}

fn main() -> Result<(), adze::Error> {
    let p = Program::from_source("s.adz", SRC)?;
    let n = 1_000_000;
    let x: Vec<f64> = (0..n).map(|i| (i as f64 * 1e-6).sin()).collect();
    let mut dx = vec![0.0; n];
    for name in ["f_plain", "fill0", "adj", "dg_plain"] {
        let f = p.function(name)?;
        match name {
            "f_plain" => time(name, || {
                f.call(&mut [Arg::Array(&x)]).unwrap();
            }),
            "fill0" => time(name, || {
                f.call(&mut [Arg::ArrayMut(&mut dx)]).unwrap();
            }),
            "adj" => time(name, || {
                f.call(&mut [Arg::Array(&x), Arg::ArrayMut(&mut dx), Arg::F64(0.5)])
                    .unwrap();
            }),
            _ => time(name, || {
                f.call(&mut [Arg::Array(&x), Arg::ArrayMut(&mut dx)])
                    .unwrap();
            }),
        }
    }
    time("rust fill", || dx.iter_mut().for_each(|d| *d = 0.0));
    time("rust adj", || {
        for i in 0..n {
            dx[i] += 2.0 * x[i] * 0.5;
        }
    });
    Ok(())
}
