//! `autodiff(MODE, FUNC, RET, ARGS..)`: the request's mode, function and
//! return activity, and one activity argument per parameter of the
//! function, with the writability and aliasing of the arrays and shadows
//! it passes.

use super::call::ArrayUse;
use super::items::{describe_results, fmt_param_type, fmt_params, FnInfo};
use super::{expr, is_builtin, Ctx, Reported, R};
use crate::ast::{self, ExprKind as AK};
use crate::diagnostic::{Diagnostic, Span};
use crate::typed::*;
use adze_ir::{ArgActivity, Mode, Param, RetActivity, Type};

const SHAPE: &str =
    "write `autodiff(MODE, FUNC, RET, ARGS..)`, e.g. `autodiff(reverse, f, active, active(x))`";

/// The arrays an `autodiff` passes, for [`Ctx::check_aliasing`].
type ArrayUses = Vec<ArrayUse>;

impl<'a> Ctx<'a> {
    pub(super) fn autodiff(&mut self, args: &[ast::Expr], span: Span) -> R<Expr> {
        if args.len() < 3 {
            return self.error(
                Diagnostic::new(
                    span,
                    "`autodiff` needs a mode, a function, a return activity and one argument per parameter",
                    SHAPE,
                )
                .label("too few arguments"),
            );
        }
        let (mode, width) = self.autodiff_mode(&args[0])?;
        let (fname, info) = self.autodiff_target(&args[1])?;
        let (ret, seeds) = self.ret_activity(mode, fname, info, &args[2])?;
        let acts = &args[3..];
        if acts.len() != info.params.len() {
            return self.error(
                Diagnostic::new(
                    span,
                    format!(
                        "`autodiff` of `{fname}` needs {} argument{} after the return activity (one per parameter), found {}",
                        info.params.len(),
                        if info.params.len() == 1 { "" } else { "s" },
                        acts.len()
                    ),
                    format!("`{fname}` is `fn {fname}({})`", fmt_params(&info.params)),
                )
                .label("wrong number of arguments"),
            );
        }
        let mut spec_args = Vec::new();
        let mut values = Vec::new();
        let mut arrays = Vec::new();
        let mut failed = false;
        for (a, p) in acts.iter().zip(&info.params) {
            let (before, at) = (arrays.len(), values.len());
            let r = self.activity_arg(mode, width, fname, a, p, &mut arrays);
            // An array activity's values are all arrays, pushed in order.
            for (k, u) in arrays[before..].iter_mut().enumerate() {
                u.pos = at + k;
            }
            match r {
                Ok((act, xs)) => {
                    spec_args.push(act);
                    values.extend(xs);
                }
                Err(Reported) => failed = true,
            }
        }
        // The cotangents of a `dup` return, after the arguments (the IR's
        // order): read-only arrays for array results, f64 for the others.
        let seed_tys: Vec<Type> = info
            .results
            .iter()
            .copied()
            .filter(|t| matches!(t, Type::F64 | Type::Array))
            .collect();
        for (k, (e, &t)) in seeds.iter().zip(&seed_tys).enumerate() {
            let what = format!("the cotangent of result {} of `{fname}`", k + 1);
            let at = values.len();
            let r = if t == Type::Array {
                self.array_arg(e, &what).and_then(|r| {
                    if r.elem != Elem::F64 {
                        return self.error(
                            Diagnostic::new(
                                e.span,
                                format!("{what} must be an f64 array"),
                                "pass a `[f64]`",
                            )
                            .label("an i64 array"),
                        );
                    }
                    arrays.push(ArrayUse {
                        root: r.root,
                        part: r.part,
                        written: false,
                        role: format!("the cotangent of result {}", k + 1),
                        span: e.span,
                        pos: at,
                    });
                    Ok(r.expr)
                })
            } else {
                self.expect(e, Type::F64, &what)
            };
            match r {
                Ok(x) => values.push(x),
                Err(Reported) => failed = true,
            }
        }
        if failed {
            return Err(Reported);
        }
        let disjoint = self.check_aliasing(&arrays, &format!("autodiff({mode}, {fname}, ..)"))?;
        let res = &info.results;
        let tys: Vec<Type> = match (mode, ret) {
            // The results, then `width` tangents of each, result by result.
            (Mode::Forward, RetActivity::Dual) => res
                .iter()
                .copied()
                .chain(
                    res.iter()
                        .filter(|t| matches!(t, Type::F64 | Type::Array))
                        .flat_map(|&t| std::iter::repeat_n(t, width)),
                )
                .collect(),
            (Mode::Forward, _) => Vec::new(),
            (Mode::Reverse, _) => spec_args
                .iter()
                .filter(|a| **a == ArgActivity::Active)
                .map(|_| Type::F64)
                .collect(),
        };
        let req = AutodiffReq {
            mode,
            func: info.index,
            ret,
            args: spec_args,
            width,
            disjoint,
        };
        Ok(expr(
            ExprKind::Autodiff(Box::new(req), values),
            Ty::results(&tys),
        ))
    }

    /// The first argument: `forward`, `forward(N)` (vector mode: N
    /// tangents per `dual` and N shadows per `dup`, N an integer literal of
    /// at least 1) or `reverse`; with the width.
    fn autodiff_mode(&mut self, e: &ast::Expr) -> R<(Mode, usize)> {
        if let AK::Call(f, n) = &e.kind {
            if f.name == "forward" {
                return match n.as_slice() {
                    [ast::Expr {
                        kind: AK::Int(n), ..
                    }] if *n >= 1 => Ok((Mode::Forward, *n as usize)),
                    _ => self.error(
                        Diagnostic::new(
                            e.span,
                            "the width of `forward(N)` must be an integer literal of at least 1",
                            "write e.g. `autodiff(forward(4), f, dual, dual(x, t1, t2, t3, t4))`",
                        )
                        .label("not a width"),
                    ),
                };
            }
        }
        match word(e) {
            Some("forward") => Ok((Mode::Forward, 1)),
            Some("reverse") => Ok((Mode::Reverse, 1)),
            _ => self.error(
                Diagnostic::new(
                    e.span,
                    "the mode of `autodiff` must be `forward` or `reverse`",
                    SHAPE,
                )
                .label("unknown mode"),
            ),
        }
    }

    /// The second argument: a function of the file, by name.
    fn autodiff_target(&mut self, e: &ast::Expr) -> R<(&'a String, &'a FnInfo)> {
        let g = self.g;
        let Some((fname, info)) = word(e).and_then(|w| g.fns.get_key_value(w)) else {
            let help = match word(e) {
                Some(w) if is_builtin(w) => format!(
                    "`{w}` is built in; wrap it in a function: `fn my_{w}(x: f64) -> f64 {{ {w}(x) }}`"
                ),
                _ => "name a function defined with `fn` in this file".to_string(),
            };
            return self.error(
                Diagnostic::new(
                    e.span,
                    "the second argument of `autodiff` must name a function of this file",
                    help,
                )
                .label("not a function of this file"),
            );
        };
        Ok((fname, info))
    }

    /// The third argument: the return activity, which the mode and the
    /// results of `fname` must allow.
    fn ret_activity<'e>(
        &mut self,
        mode: Mode,
        fname: &str,
        info: &FnInfo,
        e: &'e ast::Expr,
    ) -> R<(RetActivity, &'e [ast::Expr])> {
        let res = &info.results;
        let res_desc = describe_results(res);
        let n_seeds = res
            .iter()
            .filter(|t| matches!(t, Type::F64 | Type::Array))
            .count();
        // The `dup(..)` that fits `fname`'s results, for help texts:
        // `dup(dy)`, `dup(1.0, dy)`, `dup(dy1, dy2)`.
        let n_arrays = res.iter().filter(|&&t| t == Type::Array).count();
        let mut k = 0;
        let example: Vec<String> = res
            .iter()
            .filter_map(|t| match t {
                Type::F64 => Some("1.0".to_string()),
                Type::Array if n_arrays == 1 => Some("dy".to_string()),
                Type::Array => {
                    k += 1;
                    Some(format!("dy{k}"))
                }
                _ => None,
            })
            .collect();
        let example = format!("dup({})", example.join(", "));
        if let (Mode::Reverse, AK::Call(f, seeds)) = (mode, &e.kind) {
            if f.name == "dup" {
                if n_seeds == 0 {
                    return self.error(
                        Diagnostic::new(
                            e.span,
                            format!(
                                "`dup(..)` gives the cotangents of f64 and [f64] results, but `{fname}` returns {res_desc}"
                            ),
                            format!("use `const`: `{fname}` has no result to differentiate"),
                        )
                        .label("no result to take a cotangent of"),
                    );
                }
                if seeds.len() != n_seeds {
                    return self.error(
                        Diagnostic::new(
                            e.span,
                            format!(
                                "`dup(..)` as the result of `{fname}` takes one cotangent per f64 or array result; `{fname}` returns {res_desc}, so {n_seeds}, found {}",
                                seeds.len()
                            ),
                            format!(
                                "write `{example}` for `{fname}`: one cotangent per result, in order (an [f64] of the result's length for an array result)"
                            ),
                        )
                        .label("wrong number of cotangents"),
                    );
                }
                return Ok((RetActivity::Dup, seeds));
            }
        }
        let ret = match (mode, word(e)) {
            (Mode::Forward, Some("dual")) => RetActivity::Dual,
            (Mode::Reverse, Some("active")) => RetActivity::Active,
            (_, Some("const")) => RetActivity::Const,
            _ => {
                let help = match mode {
                    Mode::Forward => "in forward mode use `dual` (returns primal and tangent) or `const` (returns nothing)",
                    Mode::Reverse => "in reverse mode use `active` (seeds the result's cotangent with 1.0), `dup(dy)` (the cotangents given, one per result) or `const`",
                };
                return self.error(
                    Diagnostic::new(
                        e.span,
                        format!("invalid return activity for {mode} mode"),
                        help,
                    )
                    .label("expected a return activity"),
                );
            }
        };
        let bad_ret = match ret {
            RetActivity::Dual
                if res.is_empty() || res.iter().any(|t| !matches!(t, Type::F64 | Type::Array)) =>
            {
                Some(format!(
                    "`dual` needs results that are all f64 or [f64], but `{fname}` returns {res_desc}"
                ))
            }
            RetActivity::Active if res.as_slice() != [Type::F64] => Some(format!(
                "`active` needs exactly one f64 result, but `{fname}` returns {res_desc}"
            )),
            _ => None,
        };
        if let Some(msg) = bad_ret {
            let help = if ret == RetActivity::Active && n_seeds > 0 {
                format!(
                    "give the cotangents of `{fname}`'s results with `{example}` (an [f64] of the result's length for an array result), or use `const`"
                )
            } else {
                "use `const` for this result".to_string()
            };
            return self.error(Diagnostic::new(e.span, msg, help).label("invalid return activity"));
        }
        Ok((ret, &[]))
    }

    /// One activity argument of `autodiff` for parameter `p` of `f`.
    fn activity_arg(
        &mut self,
        mode: Mode,
        width: usize,
        f: &str,
        a: &ast::Expr,
        p: &Param,
        arrays: &mut ArrayUses,
    ) -> R<(ArgActivity, Vec<Expr>)> {
        let (act, inner) = self.activity(mode, width, f, a, p)?;
        let mut xs = Vec::new();
        if p.ty.is_array() {
            for (k, e) in inner.iter().enumerate() {
                xs.push(self.array_activity_value(mode, f, p, k >= 1, e, arrays)?);
            }
        } else {
            for e in inner {
                let what = format!("the argument `{}` of `{f}`", p.name);
                xs.push(self.expect(e, p.ty, &what)?);
            }
        }
        Ok((act, xs))
    }

    /// The activity `a` gives parameter `p` of `f` (`const(..)`,
    /// `dual(..)`, `active(..)` or `dup(..)`, as the parameter's type and
    /// the mode allow) and its arguments, as many as the activity takes.
    fn activity<'e>(
        &mut self,
        mode: Mode,
        width: usize,
        f: &str,
        a: &'e ast::Expr,
        p: &Param,
    ) -> R<(ArgActivity, &'e [ast::Expr])> {
        let forms = match (p.ty, mode) {
            (Type::F64, Mode::Forward) => "`const(e)` or `dual(x, tx)`",
            (Type::F64, Mode::Reverse) => "`const(e)` or `active(x)`",
            (Type::Array, _) => "`const(a)` or `dup(a, da)`",
            (Type::IArray, _) => "`const(a)` (i64 arrays are not differentiable)",
            _ => "`const(e)`",
        };
        let pdesc = format!("{}: {}", p.name, fmt_param_type(p));
        let help = format!("for `{pdesc}` in {mode} mode write {forms}");
        let msg = format!("invalid argument for parameter `{pdesc}` of `{f}` in {mode} mode");
        let (kind, inner) = match &a.kind {
            AK::Call(k, inner) if ["const", "dual", "active", "dup"].contains(&k.name.as_str()) => {
                (k.name.as_str(), inner)
            }
            _ => {
                return self.error(
                    Diagnostic::new(a.span, msg, help)
                        .label("expected an activity such as `const(..)`"),
                )
            }
        };
        let act = match (kind, p.ty, mode) {
            ("const", ..) => ArgActivity::Const,
            ("dual", Type::F64, Mode::Forward) => ArgActivity::Dual,
            ("active", Type::F64, Mode::Reverse) => ArgActivity::Active,
            ("dup", Type::Array, _) => ArgActivity::Dup,
            _ => {
                let label = match (kind, p.ty) {
                    (_, Type::I64 | Type::Bool) => {
                        "i64 and bool parameters are not differentiable".to_string()
                    }
                    (_, Type::IArray) => "i64 arrays are not differentiable".to_string(),
                    ("dual", Type::F64) => "`dual` is for forward mode".to_string(),
                    ("active", Type::F64) => "`active` is for reverse mode".to_string(),
                    ("dup", _) => "`dup` is for array parameters".to_string(),
                    _ => format!("`{kind}` is for f64 parameters; arrays take `dup(a, da)`"),
                };
                return self.error(Diagnostic::new(a.span, msg, help).label(label));
            }
        };
        if inner.len() != act.arity_at(width) {
            let form = match (act, width) {
                (ArgActivity::Const, _) => "const(e)".to_string(),
                (ArgActivity::Dual, 1) => "dual(x, tx)".to_string(),
                (ArgActivity::Dup, 1) => "dup(a, da)".to_string(),
                (ArgActivity::Dual, n) => format!("dual(x, t1, .., t{n})"),
                (ArgActivity::Dup, n) => format!("dup(a, da1, .., da{n})"),
                (ArgActivity::Active, _) => "active(x)".to_string(),
            };
            let n = act.arity_at(width);
            return self.error(
                Diagnostic::new(
                    a.span,
                    format!(
                        "`{kind}` takes {n} argument{}",
                        if n == 1 { "" } else { "s" }
                    ),
                    match width {
                        1 => format!("write `{form}`"),
                        w => format!("write `{form}`: `forward({w})` takes {w} tangents per `dual` and {w} shadows per `dup`"),
                    },
                )
                .label(format!("{} given", inner.len())),
            );
        }
        Ok((act, inner))
    }

    /// An array passed for the array parameter `p` of `f`: the array itself
    /// or (`shadow`) its shadow, writable if `f` or the mode writes it;
    /// recorded in `arrays`.
    fn array_activity_value(
        &mut self,
        mode: Mode,
        f: &str,
        p: &Param,
        shadow: bool,
        e: &ast::Expr,
        arrays: &mut ArrayUses,
    ) -> R<Expr> {
        let what = if shadow {
            format!("the shadow of `{}`", p.name)
        } else {
            format!("parameter `{}` of `{f}`", p.name)
        };
        let r = self.array_arg(e, &what)?;
        self.same_elem(e, r.local, r.elem, p, f)?;
        let written = p.mutable || (shadow && mode == Mode::Reverse);
        if written && !r.writable {
            let d = if shadow {
                self.shadow_not_writable(mode, p, e, r.local)
            } else {
                self.needs_writable(e, r.local, f, p)
            };
            return self.error(d);
        }
        let role = if shadow {
            format!("the shadow of `{}`", p.name)
        } else {
            format!("`{}`", p.name)
        };
        arrays.push(ArrayUse {
            root: r.root,
            part: r.part,
            written,
            role,
            span: e.span,
            pos: 0,
        });
        Ok(r.expr)
    }

    /// The read-only array `l`, passed by `e` as the shadow of `p`, which
    /// the derivative writes.
    fn shadow_not_writable(&self, mode: Mode, p: &Param, e: &ast::Expr, l: LocalId) -> Diagnostic {
        let why = match mode {
            Mode::Reverse => "reverse mode accumulates the adjoint into it",
            Mode::Forward => "the parameter is `mut`, so its tangent is updated too",
        };
        let name = self.array_name(l).to_string();
        Diagnostic::new(
            e.span,
            format!(
                "the shadow `{name}` of `{}` must be writable: {why}",
                p.name
            ),
            format!("declare `{name}: mut [f64]`, or use a local `zeros` array"),
        )
        .label("read-only array")
        .secondary(self.local_spans[l], "declared here")
    }
}

/// The name, if `e` is a bare name (`forward`, `f`, `dual`, ...).
fn word(e: &ast::Expr) -> Option<&str> {
    match &e.kind {
        AK::Name(id) => Some(&id.name),
        _ => None,
    }
}
