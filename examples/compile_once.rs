//! Compile once, call many times: gradient descent on the Rosenbrock
//! function, its gradient JIT-compiled by adze once and then called on the
//! program's own buffers (no copies, no pass run again).
//!
//! ```sh
//! cargo run --release --example compile_once
//! ```

use adze::adze_ir::Val;
use adze::{Arg, DerivativeSpec, Program};

const SRC: &str = "
fn rosenbrock(x: [f64]) -> f64 {
    var s = 0.0;
    for i in 0..len(x) - 1 {
        let a = 1.0 - x[i];
        let b = x[i + 1] - x[i] * x[i];
        s = s + a * a + 100.0 * b * b;
    }
    s
}
";

fn main() -> Result<(), adze::Error> {
    let program = Program::from_source("rosenbrock.adz", SRC)?;
    let f = program.function("rosenbrock")?;
    // Reverse mode: parameters (x, x.d); the gradient accumulates into x.d.
    let grad = program.derivative("rosenbrock", &DerivativeSpec::reverse())?;

    let n = 8;
    let mut x = vec![-1.2; n];
    let mut g = vec![0.0; n];
    let step = 1e-3;
    for it in 0..=20_000 {
        g.iter_mut().for_each(|d| *d = 0.0);
        grad.call(&mut [Arg::Array(&x), Arg::ArrayMut(&mut g)])?;
        for (xi, gi) in x.iter_mut().zip(&g) {
            *xi -= step * gi;
        }
        if it % 5_000 == 0 {
            let [Val::F64(value)] = f.call(&mut [Arg::Array(&x)])?[..] else {
                unreachable!("rosenbrock returns one f64")
            };
            println!("iteration {it:>6}: f = {value:.6e}");
        }
    }
    println!("x = {x:.4?}");
    Ok(())
}
