//! What a Python callable passes to its compiled function, and where its
//! arguments come from, without Python: the binding of positional and
//! keyword arguments to parameters, the choice of the parameters
//! differentiated (`wrt`), and, for a derivative, what each of its
//! parameters receives (from the roles [`adze::Session::derivative`]
//! gives them, the facade the command's `--derive` uses).

use adze::adze_ir::{Mode, Param, Type};
use adze::{Derivative, Role};

/// What one parameter of a compiled function receives at a call.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The caller's argument for parameter `k` of the function.
    Arg(usize),
    /// Reverse mode: the adjoint of array parameter `k`: zeros, allocated
    /// by the call, returned as the gradient of `k`.
    Adjoint(usize),
    /// Forward mode: the tangent of parameter `k` (an f64 or an array),
    /// from the call's `tangents`; zero(s) when not given.
    Tangent(usize),
    /// Reverse mode: the cotangent of an f64 result: 1.0 (the gradient is
    /// that of the sum of the f64 results, as `adze run --derive reverse`
    /// computes by default).
    Seed,
}

/// How a callable calls its compiled function and reads its results.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The function's name in the program (the one the caller asked for).
    pub func: String,
    /// The parameters the caller gives: the function's own.
    pub params: Vec<Param>,
    /// What each parameter of the compiled function receives, in order.
    pub slots: Vec<Slot>,
    /// How many results are the function's own; a derivative returns its
    /// derivatives after them (reverse mode: the adjoints of the f64
    /// parameters in `adjoints`; forward mode: the tangents of the
    /// results, when they are all f64).
    pub primal_results: usize,
    /// Reverse mode: the parameters whose adjoints follow the primal
    /// results, in order.
    pub adjoints: Vec<usize>,
    /// The parameters differentiated, in the order the caller named them
    /// (empty for a primal).
    pub wrt: Vec<usize>,
}

impl Plan {
    /// The plan of a primal: each parameter gets the caller's argument.
    pub fn primal(func: &str, params: &[Param], results: usize) -> Plan {
        Plan {
            func: func.to_string(),
            params: params.to_vec(),
            slots: (0..params.len()).map(Slot::Arg).collect(),
            primal_results: results,
            adjoints: Vec::new(),
            wrt: Vec::new(),
        }
    }

    /// The plan of a derivative of `func`, whose parameters are `params`,
    /// from what [`adze::Session::derivative`] says each of the
    /// derivative's parameters is.
    pub fn derivative(func: &str, params: &[Param], d: &Derivative, wrt: Vec<usize>) -> Plan {
        let slots = d
            .roles
            .iter()
            .map(|role| match (*role, d.mode) {
                (Role::Primal(k), _) => Slot::Arg(k),
                (Role::Shadow(k), Mode::Reverse) => Slot::Adjoint(k),
                (Role::Shadow(k) | Role::Tangent(k), _) => Slot::Tangent(k),
                (Role::Seed(_), _) => Slot::Seed,
            })
            .collect();
        Plan {
            func: func.to_string(),
            params: params.to_vec(),
            slots,
            primal_results: d.primal_results,
            adjoints: d.adjoints.clone(),
            wrt,
        }
    }

    /// The parameter named `name`.
    pub fn param(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name == name)
    }

    /// The parameters' names, for messages: `x, n`.
    pub fn names(&self) -> String {
        names(&self.params)
    }

    /// Which argument each parameter gets: `positional` arguments, then the
    /// `keywords` (by name). Every parameter gets exactly one.
    pub fn bind(&self, positional: usize, keywords: &[String]) -> Result<Vec<Source>, String> {
        let func = &self.func;
        let n = self.params.len();
        if positional > n {
            return Err(format!(
                "`{func}` takes {n} argument{} ({}), {positional} given",
                plural(n),
                self.names()
            ));
        }
        let mut sources: Vec<Option<Source>> = (0..n)
            .map(|k| (k < positional).then_some(Source::Positional(k)))
            .collect();
        for (j, name) in keywords.iter().enumerate() {
            let Some(k) = self.param(name) else {
                return Err(format!(
                    "`{func}` has no parameter `{name}` (its parameters: {})",
                    self.names()
                ));
            };
            if sources[k].is_some() {
                return Err(format!("`{func}`: argument `{name}` is given twice"));
            }
            sources[k] = Some(Source::Keyword(j));
        }
        sources
            .into_iter()
            .zip(&self.params)
            .map(|(s, p)| {
                s.ok_or_else(|| {
                    format!(
                        "`{func}`: missing argument `{}` ({} parameter)",
                        p.name,
                        describe(p)
                    )
                })
            })
            .collect()
    }
}

/// Where a parameter's argument is in a call.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The positional argument number `i`.
    Positional(usize),
    /// The keyword argument number `j`.
    Keyword(usize),
}

/// The parameters a derivative of `func` is taken with respect to: those
/// named in `wrt` (in that order), or, without `wrt`, every f64 and
/// `[f64]` parameter; and the names of the others (held constant).
pub fn resolve_wrt(
    func: &str,
    params: &[Param],
    wrt: Option<&[String]>,
) -> Result<(Vec<usize>, Vec<String>), String> {
    let differentiable = |p: &Param| matches!(p.ty, Type::F64 | Type::Array);
    let chosen: Vec<usize> = match wrt {
        None => {
            let all: Vec<usize> = (0..params.len())
                .filter(|&k| differentiable(&params[k]))
                .collect();
            if all.is_empty() {
                return Err(format!(
                    "`{func}` has no f64 or [f64] parameter to differentiate (its parameters: {})",
                    names(params)
                ));
            }
            all
        }
        Some([]) => {
            return Err(format!(
                "`wrt` is empty: nothing of `{func}` to differentiate"
            ))
        }
        Some(names_given) => {
            let mut chosen = Vec::with_capacity(names_given.len());
            for name in names_given {
                let Some(k) = params.iter().position(|p| &p.name == name) else {
                    return Err(format!(
                        "`wrt`: `{func}` has no parameter `{name}` (its parameters: {})",
                        names(params)
                    ));
                };
                if !differentiable(&params[k]) {
                    return Err(format!(
                        "`wrt`: `{name}` is {} parameter; derivatives are taken with respect to f64 and [f64] parameters",
                        describe(&params[k])
                    ));
                }
                if chosen.contains(&k) {
                    return Err(format!("`wrt`: `{name}` is named twice"));
                }
                chosen.push(k);
            }
            chosen
        }
    };
    let consts = (0..params.len())
        .filter(|k| !chosen.contains(k))
        .map(|k| params[k].name.clone())
        .collect();
    Ok((chosen, consts))
}

/// A parameter's type as the language writes it, with an article: `an
/// f64`, `a mut [f64]`.
pub fn describe(p: &Param) -> String {
    let ty = match p.ty {
        Type::F64 => "f64",
        Type::I64 => "i64",
        Type::Bool => "bool",
        Type::Array => "[f64]",
        Type::IArray => "[i64]",
        Type::F64x2 => "f64x2",
    };
    match (p.mutable, p.ty) {
        (true, _) => format!("a mut {ty}"),
        (false, Type::F64 | Type::I64) => format!("an {ty}"),
        (false, _) => format!("a {ty}"),
    }
}

/// Parameter names, comma-separated (`none` for none).
fn names(params: &[Param]) -> String {
    if params.is_empty() {
        return "none".to_string();
    }
    let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
    names.join(", ")
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adze::adze_ir::Mode;
    use adze::Session;

    fn params(src: &str, name: &str) -> Vec<Param> {
        let s = Session::from_source("t.adz", src).unwrap();
        let id = s.function(name).unwrap();
        s.module.func(id).sig.params.clone()
    }

    const SRC: &str = "fn f(x: [f64], k: f64, n: i64, out: mut [f64]) -> f64 {
        out[0] = k * x[0];
        k * x[0] + 1.0
    }";

    #[test]
    fn binds_positional_then_keywords() {
        let plan = Plan::primal("f", &params(SRC, "f"), 1);
        let kw = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            plan.bind(2, &kw(&["out", "n"])).unwrap(),
            vec![
                Source::Positional(0),
                Source::Positional(1),
                Source::Keyword(1),
                Source::Keyword(0)
            ]
        );
        assert_eq!(
            plan.bind(5, &[]).unwrap_err(),
            "`f` takes 4 arguments (x, k, n, out), 5 given"
        );
        assert_eq!(
            plan.bind(1, &kw(&["x"])).unwrap_err(),
            "`f`: argument `x` is given twice"
        );
        assert_eq!(
            plan.bind(0, &kw(&["y"])).unwrap_err(),
            "`f` has no parameter `y` (its parameters: x, k, n, out)"
        );
        assert_eq!(
            plan.bind(3, &[]).unwrap_err(),
            "`f`: missing argument `out` (a mut [f64] parameter)"
        );
    }

    #[test]
    fn wrt_defaults_to_the_f64_and_array_parameters() {
        let ps = params(SRC, "f");
        let (wrt, consts) = resolve_wrt("f", &ps, None).unwrap();
        assert_eq!(wrt, vec![0, 1, 3]);
        assert_eq!(consts, vec!["n".to_string()]);
        let given = ["k".to_string(), "x".to_string()];
        let (wrt, consts) = resolve_wrt("f", &ps, Some(&given)).unwrap();
        assert_eq!(wrt, vec![1, 0]);
        assert_eq!(consts, vec!["n".to_string(), "out".to_string()]);
        let bad = |names: &[&str]| {
            let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            resolve_wrt("f", &ps, Some(&names)).unwrap_err()
        };
        assert_eq!(bad(&[]), "`wrt` is empty: nothing of `f` to differentiate");
        assert!(bad(&["n"]).contains("`n` is an i64 parameter"));
        assert!(bad(&["y"]).contains("has no parameter `y`"));
        assert_eq!(bad(&["x", "x"]), "`wrt`: `x` is named twice");
        let ints = params("fn g(n: i64) -> i64 { n }", "g");
        assert!(resolve_wrt("g", &ints, None)
            .unwrap_err()
            .contains("no f64 or [f64] parameter"));
    }

    #[test]
    fn a_reverse_plan_follows_the_roles_of_the_vjp() {
        let s = Session::from_source("t.adz", SRC).unwrap();
        let ps = params(SRC, "f");
        let (wrt, consts) = resolve_wrt("f", &ps, None).unwrap();
        let d = s.derivative("f", Mode::Reverse, 1, &consts, true).unwrap();
        let plan = Plan::derivative("f", &ps, &d, wrt);
        assert_eq!(
            plan.slots,
            vec![
                Slot::Arg(0),
                Slot::Adjoint(0),
                Slot::Arg(1),
                Slot::Arg(2),
                Slot::Arg(3),
                Slot::Adjoint(3),
                Slot::Seed
            ]
        );
        assert_eq!(plan.primal_results, 1);
        assert_eq!(plan.adjoints, vec![1]);
    }

    #[test]
    fn a_forward_plan_has_a_tangent_after_each_active_parameter() {
        let s = Session::from_source("t.adz", SRC).unwrap();
        let ps = params(SRC, "f");
        let given = ["k".to_string()];
        let (wrt, consts) = resolve_wrt("f", &ps, Some(&given)).unwrap();
        let d = s.derivative("f", Mode::Forward, 1, &consts, true).unwrap();
        let plan = Plan::derivative("f", &ps, &d, wrt);
        assert_eq!(
            plan.slots,
            vec![
                Slot::Arg(0),
                Slot::Arg(1),
                Slot::Tangent(1),
                Slot::Arg(2),
                Slot::Arg(3)
            ]
        );
        assert_eq!(plan.primal_results, 1);
    }
}
