//! Are a program's rules linear in their derivative inputs? A rule must be
//! (docs/rules.md, "A rule is linear in its tangents and cotangents"): a
//! non-linear one returns something from nothing, and its derivatives may
//! then change with the inline setting without a bug in adze. The
//! generator writes linear rules, but the reducer can make one non-linear
//! (deleting `* dret` from `(log(y) + 0.5) * dret`), and the reduced
//! program then shows another thing than the finding: the reducer's
//! candidates must keep their rules linear ([`rules_look_linear`]).
//!
//! The test is numeric: each rule runs on the interpreter at fixed primal
//! arguments, once with derivative inputs `d` and once with `2d`, and its
//! derivative outputs must double, bit for bit (NaN matching NaN). Scaling
//! by two is exact in binary floating point, so sums of products with the
//! derivative inputs pass whatever their coefficients; `log(y)` without
//! its `dret` does not.

use crate::run;
use adze::adze_ir::{FuncId, Mode, Module, Type, Val};

/// Primal f64 arguments: positive, not integers (so `log`, `sqrt` and
/// `floor` of them are ordinary numbers).
const PRIMAL: [f64; 3] = [0.7, 1.3, 0.45];
/// Derivative inputs `d` (then `2d`).
const DERIV: [f64; 4] = [0.37, -1.21, 0.83, 1.9];
/// Array arguments' length.
const LEN: usize = 3;

/// Does every rule of `module` double its derivative outputs when its
/// derivative inputs double? A rule that fails to run (a trap, a limit)
/// tells nothing and passes.
pub fn rules_look_linear(module: &Module) -> bool {
    module.iter().all(|(_, owner)| {
        [Mode::Forward, Mode::Reverse].into_iter().all(|mode| {
            owner
                .meta
                .rules
                .get(mode)
                .is_none_or(|rule| rule_looks_linear(module, owner, rule, mode))
        })
    })
}

/// One rule of `owner` in `mode`: see [`rules_look_linear`].
fn rule_looks_linear(
    module: &Module,
    owner: &adze::adze_ir::Function,
    rule: FuncId,
    mode: Mode,
) -> bool {
    if !module.is_valid(rule) {
        return true;
    }
    let name = module.func(rule).name.clone();
    let run = |scale: f64| -> Option<Vec<f64>> {
        let (args, derivative_arrays) = rule_args(owner, mode, scale);
        let out = run::eval_outcome(module, &name, run::fuzz_limits(), &args)?;
        let mut flat: Vec<f64> = match mode {
            // The tangents follow the primal results.
            Mode::Forward => run::flatten(out.results.get(owner.sig.results.len()..)?),
            Mode::Reverse => run::flatten(&out.results),
        };
        // What the rule leaves in the arrays of derivative inputs (a
        // reverse rule adds to the adjoints of its array arguments).
        for k in derivative_arrays {
            flat.extend(run::flatten(std::slice::from_ref(out.args.get(k)?)));
        }
        Some(flat)
    };
    let (Some(once), Some(twice)) = (run(1.0), run(2.0)) else {
        return true;
    };
    once.len() == twice.len()
        && once.iter().zip(&twice).all(|(&a, &b)| {
            let doubled = 2.0 * a;
            doubled.to_bits() == b.to_bits() || (doubled.is_nan() && b.is_nan())
        })
}

/// The arguments of `owner`'s rule in `mode` (the layout of
/// `adze_ir::verify::rule_signature`), derivative inputs scaled by
/// `scale`, and the numbers of the arguments that are derivative arrays.
fn rule_args(owner: &adze::adze_ir::Function, mode: Mode, scale: f64) -> (Vec<Val>, Vec<usize>) {
    let mut args = Vec::new();
    let mut arrays = Vec::new();
    let mut next = 0usize;
    let mut deriv = |args: &mut Vec<Val>, ty: Type| {
        let d = |k: usize| scale * DERIV[k % DERIV.len()];
        let v = match ty {
            Type::Array => Val::Array((0..LEN).map(|i| d(next + i)).collect()),
            _ => Val::F64(d(next)),
        };
        next += 1;
        args.push(v);
    };
    for (k, p) in owner.sig.params.iter().enumerate() {
        args.push(match p.ty {
            Type::F64 => Val::F64(PRIMAL[k % PRIMAL.len()]),
            Type::Array => Val::Array((0..LEN).map(|i| PRIMAL[(k + i) % PRIMAL.len()]).collect()),
            Type::I64 => Val::I64(2),
            Type::IArray => Val::IArray(vec![1; LEN]),
            Type::Bool => Val::Bool(false),
            // Not a parameter type of the language.
            _ => return (Vec::new(), Vec::new()),
        });
        let with_derivative = match mode {
            Mode::Forward => matches!(p.ty, Type::F64 | Type::Array),
            Mode::Reverse => p.ty == Type::Array,
        };
        if with_derivative {
            if p.ty == Type::Array {
                arrays.push(args.len());
            }
            deriv(&mut args, p.ty);
        }
    }
    if mode == Mode::Reverse {
        for (_, ty) in owner.sig.differentiable_results() {
            if ty == Type::Array {
                arrays.push(args.len());
            }
            deriv(&mut args, ty);
        }
    }
    (args, arrays)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linear(source: &str) -> bool {
        rules_look_linear(&run::compile(source).expect("compiles"))
    }

    #[test]
    fn linear_rules_pass_and_a_dropped_cotangent_fails() {
        let owner = "fn f(x: f64, y: f64, a: mut [f64]) -> f64 { a[0] = x; x * y }\n";
        assert!(linear(&format!(
            "{owner}rule reverse f(x: f64, y: f64, a: mut [f64], da: mut [f64], dret: f64) -> (f64, f64) {{ da[1] = da[1] + x * dret; (y * dret, (log(y) + 0.5) * dret) }}\n"
        )));
        assert!(!linear(&format!(
            "{owner}rule reverse f(x: f64, y: f64, a: mut [f64], da: mut [f64], dret: f64) -> (f64, f64) {{ (y * dret, log(y)) }}\n"
        )));
        // A constant written into the array adjoint is not linear either.
        assert!(!linear(&format!(
            "{owner}rule reverse f(x: f64, y: f64, a: mut [f64], da: mut [f64], dret: f64) -> (f64, f64) {{ da[0] = x; (y * dret, x * dret) }}\n"
        )));
        assert!(linear(&format!(
            "{owner}rule forward f(x: f64, tx: f64, y: f64, ty: f64, a: mut [f64], ta: mut [f64]) -> (f64, f64) {{ (f(x, y, a), 2.0 * tx + tanh(y) * ty + 3.0 * ta[1]) }}\n"
        )));
        assert!(!linear(&format!(
            "{owner}rule forward f(x: f64, tx: f64, y: f64, ty: f64, a: mut [f64], ta: mut [f64]) -> (f64, f64) {{ (f(x, y, a), x) }}\n"
        )));
        assert!(!linear(&format!(
            "{owner}rule forward f(x: f64, tx: f64, y: f64, ty: f64, a: mut [f64], ta: mut [f64]) -> (f64, f64) {{ (f(x, y, a), tx * ty) }}\n"
        )));
    }

    /// The generator writes linear rules: the test must pass them all
    /// (else the reducer would keep none of its candidates' rules).
    #[test]
    fn every_generated_rule_passes() {
        let config = crate::gen::GenConfig::default();
        let mut rules = 0;
        for seed in 0..120 {
            let prog = crate::gen::generate(seed, &config);
            let Ok(module) = run::compile(&prog.source) else {
                continue;
            };
            rules += (module.iter())
                .filter(|(_, f)| !f.meta.rules.is_empty())
                .count();
            assert!(rules_look_linear(&module), "seed {seed}:\n{}", prog.source);
        }
        assert!(rules > 50, "{rules} functions with rules");
    }

    #[test]
    fn a_rule_that_traps_tells_nothing() {
        assert!(linear(
            "fn f(x: f64, a: [f64]) -> f64 { x }\nrule forward f(x: f64, tx: f64, a: [f64], ta: [f64]) -> (f64, f64) { (x, ta[7] + 1.0) }\n"
        ));
    }
}
