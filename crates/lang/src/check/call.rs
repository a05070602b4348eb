//! Calls: the builtins (`len`, `fill`, `zeros`, `f64`, `i64`; `autodiff` is in
//! [`super::autodiff`]), the intrinsics, and the functions of the file,
//! with the writability and aliasing of their array arguments.

use super::items::fmt_params;
use super::scope::Part;
use super::{expr, Ctx, Reported, R};
use crate::ast::{self, Ident};
use crate::diagnostic::{Diagnostic, Span};
use crate::typed::*;
use adze_ir::{Opcode, Param, Type};

impl Ctx<'_> {
    pub(super) fn arity(
        &mut self,
        f: &Ident,
        args: &[ast::Expr],
        n: usize,
        span: Span,
        sig: &str,
    ) -> R<()> {
        if args.len() == n {
            return Ok(());
        }
        let s = if n == 1 { "" } else { "s" };
        self.error(
            Diagnostic::new(
                span,
                format!(
                    "`{}` takes {n} argument{s} but {} were given",
                    f.name,
                    args.len()
                ),
                format!("call it as `{sig}`"),
            )
            .label(format!("expected {n} argument{s}")),
        )
    }

    pub(super) fn call(&mut self, name: &Ident, args: &[ast::Expr], span: Span) -> R<Expr> {
        let n = name.name.as_str();
        match n {
            "autodiff" => self.autodiff(args, span),
            "len" => self.len_call(name, args, span),
            "fill" => self.fill_call(name, args, span),
            "zeros" | "zeros_i64" => self.error(
                Diagnostic::new(
                    span,
                    format!("`{n}` can only initialize a `let`"),
                    format!("write `let t = {n}(n);` and use `t`"),
                )
                .label("`zeros` in an expression"),
            ),
            "f64" => self.f64_call(name, args, span),
            "i64" => self.i64_call(name, args, span),
            _ => match Opcode::intrinsic(n) {
                Some(op) => self.intrinsic_call(op, name, args, span),
                None => self.user_call(name, args, span),
            },
        }
    }

    /// The array `l` (element type `elem`), passed by `e` for parameter
    /// `p` of `f`, must hold what the parameter holds.
    pub(super) fn same_elem(
        &mut self,
        e: &ast::Expr,
        l: LocalId,
        elem: Elem,
        p: &Param,
        f: &str,
    ) -> R<()> {
        let want = Elem::of(p.ty).unwrap_or(Elem::F64);
        if elem == want {
            return Ok(());
        }
        let name = self.array_name(l).to_string();
        self.error(
            Diagnostic::new(
                e.span,
                format!(
                    "`{name}` is [{}] but parameter `{}` of `{f}` is [{}]",
                    elem.name(),
                    p.name,
                    want.name()
                ),
                "pass an array of the parameter's element type; arrays are not converted",
            )
            .label(format!("[{}] array", elem.name())),
        )
    }

    /// `len(a)`
    fn len_call(&mut self, name: &Ident, args: &[ast::Expr], span: Span) -> R<Expr> {
        self.arity(name, args, 1, span, "len(a: [f64]) -> i64")?;
        let a = self.array_arg(&args[0], "`len`")?;
        let op = match a.elem {
            Elem::F64 => Opcode::Len,
            Elem::I64 => Opcode::Ilen,
        };
        Ok(expr(ExprKind::Unary(op, Box::new(a.expr)), Ty::I64))
    }

    /// `fill(a, v)`
    fn fill_call(&mut self, name: &Ident, args: &[ast::Expr], span: Span) -> R<Expr> {
        self.arity(name, args, 2, span, "fill(a: mut [f64], v: f64)")?;
        let a = self.array_arg(&args[0], "`fill`");
        let elem = a.as_ref().map_or(Type::F64, |a| a.elem.scalar());
        let v = self.expect(&args[1], elem, "the value of `fill`");
        let (a, v) = (a?, v?);
        if !a.writable {
            return self.error(self.read_only(&a.name, a.local));
        }
        Ok(expr(
            ExprKind::Fill(Box::new(a.expr), Box::new(v)),
            Ty::Unit,
        ))
    }

    /// `f64(i)`
    fn f64_call(&mut self, name: &Ident, args: &[ast::Expr], span: Span) -> R<Expr> {
        self.arity(name, args, 1, span, "f64(i: i64) -> f64")?;
        let x = self.value(&args[0])?;
        let (msg, help) = match x.ty {
            Ty::I64 => return Ok(expr(ExprKind::Unary(Opcode::Sitof, Box::new(x)), Ty::F64)),
            Ty::F64 => (
                "`f64(..)` converts an i64, but this is already f64",
                "remove the conversion",
            ),
            _ => (
                "`f64(..)` cannot convert a bool",
                "use `if c { 1.0 } else { 0.0 }`",
            ),
        };
        let label = format!("this is {}", x.ty.describe());
        self.error(Diagnostic::new(args[0].span, msg, help).label(label))
    }

    /// `i64(x)`: truncation toward zero (`ftosi`; NaN and out of range are
    /// run-time errors).
    fn i64_call(&mut self, name: &Ident, args: &[ast::Expr], span: Span) -> R<Expr> {
        self.arity(name, args, 1, span, "i64(x: f64) -> i64")?;
        let x = self.value(&args[0])?;
        let (msg, help) = match x.ty {
            Ty::F64 => return Ok(expr(ExprKind::Unary(Opcode::Ftosi, Box::new(x)), Ty::I64)),
            Ty::I64 => (
                "`i64(..)` converts an f64, but this is already i64",
                "remove the conversion",
            ),
            _ => (
                "`i64(..)` cannot convert a bool",
                "use `if c { 1 } else { 0 }`",
            ),
        };
        let label = format!("this is {}", x.ty.describe());
        self.error(Diagnostic::new(args[0].span, msg, help).label(label))
    }

    /// A call of the intrinsic `op`: f64 arguments, an f64 result.
    fn intrinsic_call(
        &mut self,
        op: Opcode,
        name: &Ident,
        args: &[ast::Expr],
        span: Span,
    ) -> R<Expr> {
        let n = name.name.as_str();
        let arity = op.fixed_signature().map_or(1, |(ps, _)| ps.len());
        let sig = format!("{n}({})", vec!["f64"; arity].join(", "));
        self.arity(name, args, arity, span, &sig)?;
        let what = format!("an argument of `{n}`");
        let xs: Vec<R<Expr>> = args
            .iter()
            .map(|a| self.expect(a, Type::F64, &what))
            .collect();
        let mut xs = xs
            .into_iter()
            .collect::<R<Vec<_>>>()?
            .into_iter()
            .map(Box::new);
        let kind = match (xs.next(), xs.next()) {
            (Some(a), Some(b)) => ExprKind::Binary(op, a, b),
            (Some(a), None) => ExprKind::Unary(op, a),
            _ => return Err(Reported),
        };
        Ok(expr(kind, Ty::F64))
    }

    /// A call of a function of the file.
    fn user_call(&mut self, name: &Ident, args: &[ast::Expr], span: Span) -> R<Expr> {
        let n = name.name.as_str();
        let g = self.g;
        let Some(info) = g.fns.get(n) else {
            let (msg, help) = if self.find(n).is_some() {
                (
                    format!("`{n}` is a variable, not a function"),
                    "only functions can be called".to_string(),
                )
            } else {
                (
                    format!("unknown function `{n}`"),
                    format!("define it with `fn {n}(..)`, or check the spelling"),
                )
            };
            return self.error(Diagnostic::new(name.span, msg, help).label("not a function"));
        };
        let sig = format!("{n}({})", fmt_params(&info.params));
        self.arity(name, args, info.params.len(), span, &sig)?;
        let mut xs = Vec::new();
        let mut arrays: Vec<ArrayUse> = Vec::new();
        let mut failed = false;
        for (i, (a, p)) in args.iter().zip(&info.params).enumerate() {
            let x = if p.ty.is_array() {
                self.array_arg(a, &format!("parameter `{}` of `{n}`", p.name))
                    .and_then(|r| {
                        self.same_elem(a, r.local, r.elem, p, n)?;
                        if p.mutable && !r.writable {
                            return self.error(self.needs_writable(a, r.local, n, p));
                        }
                        arrays.push(ArrayUse {
                            root: r.root,
                            part: r.part,
                            written: p.mutable,
                            role: format!("`{}`", p.name),
                            span: a.span,
                            pos: i,
                        });
                        Ok(r.expr)
                    })
            } else {
                self.expect(a, p.ty, &format!("the argument `{}` of `{n}`", p.name))
            };
            match x {
                Ok(x) => xs.push(x),
                Err(Reported) => failed = true,
            }
        }
        if failed {
            return Err(Reported);
        }
        let checks = self.check_aliasing(&arrays, n)?;
        Ok(expr(
            ExprKind::Call(info.index, xs, checks),
            Ty::results(&info.results),
        ))
    }

    pub(super) fn needs_writable(
        &self,
        arg: &ast::Expr,
        l: LocalId,
        f: &str,
        p: &Param,
    ) -> Diagnostic {
        let a = self.array_name(l);
        Diagnostic::new(
            arg.span,
            format!("`{f}` may write to its parameter `{}: mut [f64]`, but `{a}` is read-only", p.name),
            format!(
                "declare the parameter `{a}: mut [f64]` in this function, or copy `{a}` into a local `zeros` array"
            ),
        )
        .label("read-only array")
        .secondary(self.local_spans[l], "declared here")
    }

    /// No two arguments of one call may share an element when either may be
    /// written. Views of one array that the checker proves to overlap are
    /// an error; those it cannot tell apart are returned as pairs of
    /// argument positions, for a `disjoint` check at run time.
    pub(super) fn check_aliasing(&mut self, uses: &[ArrayUse], f: &str) -> R<Vec<(usize, usize)>> {
        let mut checks = Vec::new();
        for (j, y) in uses.iter().enumerate() {
            for x in &uses[..j] {
                if x.root != y.root || !(x.written || y.written) {
                    continue;
                }
                match x.part.overlaps(y.part) {
                    Some(false) => {}
                    None => checks.push((x.pos, y.pos)),
                    Some(true) => {
                        let a = self.array_name(y.root).to_string();
                        let (pi, pj) = (&x.role, &y.role);
                        let what = if x.part == Part::Whole && y.part == Part::Whole {
                            format!("`{a}` is used as both {pi} and {pj}")
                        } else {
                            format!("views of `{a}` passed as {pi} and {pj} overlap")
                        };
                        let d = Diagnostic::new(
                            y.span,
                            format!("{what} in this call to `{f}`, and one of them is written"),
                            "a written array must not alias another argument; pass parts that do not overlap, or copy into a `zeros` array",
                        )
                        .label("second use")
                        .secondary(x.span, "first use");
                        return self.error(d);
                    }
                }
            }
        }
        Ok(checks)
    }
}

/// An array passed to a call or an `autodiff`, for
/// [`Ctx::check_aliasing`].
pub(super) struct ArrayUse {
    /// The array whose memory it views, and where.
    pub root: LocalId,
    pub part: Part,
    /// Does the callee (or the derivative) write it?
    pub written: bool,
    /// Its role, for messages ("`x`", "the shadow of `x`").
    pub role: String,
    pub span: Span,
    /// Its position among the call's (flattened) argument values.
    pub pos: usize,
}
