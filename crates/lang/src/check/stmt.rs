//! Blocks and statements: `let`, `var`, tuples, assignments, stores,
//! loops, and the rule that no code follows a `return`.

use super::{expr, Ctx, Reported, R};
use crate::ast::{self, ExprKind as AK, Ident, StmtKind};
use crate::diagnostic::{Diagnostic, Span};
use crate::typed::*;
use adze_ir::Type;

impl Ctx<'_> {
    /// Checks a block in a new scope. With `want`, the tail is the result of
    /// the function (tuples allowed, converted to the result types).
    pub(super) fn block(&mut self, b: &ast::Block, want: Option<&[Type]>) -> R<Block> {
        self.scoped(|cx| cx.block_inner(b, want))
    }

    fn block_inner(&mut self, b: &ast::Block, want: Option<&[Type]>) -> R<Block> {
        let mut stmts = Vec::new();
        // What ended the block early, if anything did.
        let mut diverges: Option<&str> = None;
        let mut failed = false;
        let dead = |cx: &mut Self, span: Span, after: &str| {
            cx.errors.push(
                Diagnostic::new(
                    span,
                    format!("unreachable code after {after}"),
                    format!("remove this code, or move it before the {after}"),
                )
                .label("never runs"),
            );
        };
        for s in &b.stmts {
            if let (Some(after), false) = (diverges, failed) {
                dead(self, s.span, after);
                failed = true;
            }
            match self.stmt(s) {
                Ok(t) => {
                    diverges = diverges.or(stmt_diverges(&t));
                    stmts.push(t);
                }
                Err(Reported) => failed = true,
            }
        }
        let diverges_at = diverges;
        let diverges = diverges.is_some();
        let mut tail = None;
        if let Some(e) = &b.tail {
            if let (Some(after), false) = (diverges_at, failed) {
                dead(self, e.span, after);
                failed = true;
            }
            let r = match want {
                Some(results) => self.result_value(e, results),
                None => self.expr(e),
            };
            match r {
                Ok(x) => tail = Some(Box::new(x)),
                Err(Reported) => failed = true,
            }
        }
        if failed {
            return Err(Reported);
        }
        let ty = match &tail {
            _ if diverges => Ty::Never,
            Some(t) => t.ty.clone(),
            None => Ty::Unit,
        };
        Ok(Block { stmts, tail, ty })
    }

    fn stmt(&mut self, s: &ast::Stmt) -> R<Stmt> {
        match &s.kind {
            StmtKind::Let(name, value) => self.let_stmt(name, value),
            StmtKind::Var(name, value) => self.var_stmt(name, value),
            StmtKind::LetTuple(names, value) | StmtKind::VarTuple(names, value) => {
                let kind = if matches!(s.kind, StmtKind::LetTuple(..)) {
                    LocalKind::Let
                } else {
                    LocalKind::Var
                };
                let r = self.let_tuple(names, value, kind);
                if r.is_err() {
                    for n in names {
                        self.poison(n);
                    }
                }
                r
            }
            StmtKind::Assign(name, value) => self.assign(name, value),
            StmtKind::AssignTuple(names, value) => self.assign_tuple(names, value),
            StmtKind::Store(name, index, value) => self.store(name, index, value, s.span),
            StmtKind::Expr(e) => Ok(Stmt::Expr(self.expr(e)?)),
            StmtKind::Return(value) => self.return_stmt(value.as_ref(), s.span),
            StmtKind::For(var, lo, hi, body, attr) => {
                let lo = self.expect(lo, Type::I64, "the start of a `for` range");
                let hi = self.expect(hi, Type::I64, "the end of a `for` range");
                let r = self.scoped(|cx| {
                    let i = cx.declare(var, Ty::I64, LocalKind::LoopIndex);
                    Ok((i, cx.loop_body(body)?))
                });
                let (lo, hi, (i, body)) = (lo?, hi?, r?);
                Ok(Stmt::For(i, lo, hi, body, s.span, *attr))
            }
            StmtKind::While(cond, body, attr) => {
                let c = self.expect(cond, Type::Bool, "the condition of `while`");
                let body = self.loop_body(body);
                Ok(Stmt::While(c?, body?, s.span, *attr))
            }
            StmtKind::Break | StmtKind::Continue => {
                let word = if s.kind == StmtKind::Break {
                    "break"
                } else {
                    "continue"
                };
                if self.loops == 0 {
                    return self.error(
                        Diagnostic::new(
                            s.span,
                            format!("`{word}` outside a loop"),
                            "`break` and `continue` belong in the body of a `for` or `while` loop",
                        )
                        .label("not inside a loop"),
                    );
                }
                Ok(if s.kind == StmtKind::Break {
                    Stmt::Break(s.span)
                } else {
                    Stmt::Continue(s.span)
                })
            }
        }
    }

    /// The body of a `for` or `while`, where `break` and `continue` may
    /// appear.
    fn loop_body(&mut self, body: &ast::Block) -> R<Block> {
        self.loops += 1;
        let r = self.block(body, None);
        self.loops -= 1;
        r
    }

    /// `let name = value;`: a scalar, or a `zeros` array.
    fn let_stmt(&mut self, name: &Ident, value: &ast::Expr) -> R<Stmt> {
        if let AK::Call(f, args) = &value.kind {
            let elem = match f.name.as_str() {
                "zeros" => Some(Elem::F64),
                "zeros_i64" => Some(Elem::I64),
                _ => None,
            };
            if let Some(elem) = elem {
                return match self.zeros_len(f, args, value.span) {
                    Ok(n) => {
                        let ty = Ty::Array {
                            writable: true,
                            elem,
                        };
                        let l = self.declare(name, ty, LocalKind::Zeros);
                        Ok(Stmt::Zeros(l, n, value.span))
                    }
                    Err(r) => {
                        self.poison(name);
                        Err(r)
                    }
                };
            }
        }
        if let AK::Slice(id, lo, hi) = &value.kind {
            return match self.slice(id, lo.as_deref(), hi.as_deref(), value.span) {
                Ok(r) => {
                    let l = self.declare(name, r.expr.ty.clone(), LocalKind::Let);
                    self.views.insert(l, (r.root, r.part));
                    Ok(Stmt::Let(vec![l], r.expr))
                }
                Err(r) => {
                    self.poison(name);
                    Err(r)
                }
            };
        }
        let x = self.expr(value).and_then(|x| {
            if let Ty::Array { .. } = x.ty {
                // A call's array result is a new array, owned here.
                if matches!(x.kind, ExprKind::Call(..)) {
                    return Ok(x);
                }
                return self.error(
                    Diagnostic::new(
                        value.span,
                        "arrays can only be bound with `let t = zeros(n);`, as a slice, `let s = a[lo..hi];`, or from a call that returns one",
                        "use the array by its own name; `let` cannot copy or rename an array",
                    )
                    .label("an array"),
                );
            }
            self.require_value(x, value.span)
        });
        match x {
            Ok(x) => {
                let l = self.declare(name, x.ty.clone(), LocalKind::Let);
                Ok(Stmt::Let(vec![l], x))
            }
            Err(r) => {
                self.poison(name);
                Err(r)
            }
        }
    }

    /// `var name = value;`: a scalar.
    fn var_stmt(&mut self, name: &Ident, value: &ast::Expr) -> R<Stmt> {
        let x = match &value.kind {
            AK::Call(f, _) if f.name == "zeros" || f.name == "zeros_i64" => self.error(
                Diagnostic::new(
                    value.span,
                    "`var` cannot hold an array",
                    format!(
                        "write `let t = {}(n);`: the elements of a `zeros` array are writable",
                        f.name
                    ),
                )
                .label("array initializer"),
            ),
            // `var y = f(x);` with an array result.
            AK::Call(f, _) => self.expr(value).and_then(|x| match x.ty {
                Ty::Array { .. } => self.error(
                    Diagnostic::new(
                        value.span,
                        "`var` cannot hold an array",
                        format!(
                            "write `let {} = {}(..);`: a call's array result is writable already",
                            name.name, f.name
                        ),
                    )
                    .label(format!("the array result of `{}`", f.name)),
                ),
                _ => self.require_value(x, value.span),
            }),
            _ => self.value(value),
        };
        match x {
            Ok(x) => {
                let l = self.declare(name, x.ty.clone(), LocalKind::Var);
                Ok(Stmt::Let(vec![l], x))
            }
            Err(r) => {
                self.poison(name);
                Err(r)
            }
        }
    }

    /// `name[index] = value;`
    fn store(&mut self, name: &Ident, index: &ast::Expr, value: &ast::Expr, span: Span) -> R<Stmt> {
        // Every part checked, its errors reported, even when one fails.
        let a = self.array(name);
        let elem = a.as_ref().map_or(Type::F64, |a| a.2.scalar());
        let i = self.expect(index, Type::I64, "an array index");
        let v = self.expect(value, elem, &format!("a value stored into `{}`", name.name));
        let ((a, writable, _), i, v) = (a?, i?, v?);
        if !writable {
            return self.error(self.read_only(name, a));
        }
        Ok(Stmt::Store(a, i, v, span))
    }

    fn zeros_len(&mut self, f: &Ident, args: &[ast::Expr], span: Span) -> R<Expr> {
        let n = &f.name;
        self.arity(f, args, 1, span, &format!("{n}(n: i64)"))?;
        self.expect(&args[0], Type::I64, &format!("the length of `{n}`"))
    }

    /// `let (a, b) = value;` (`kind` `Let`) or `var (a, b) = value;`.
    fn let_tuple(&mut self, names: &[Ident], value: &ast::Expr, kind: LocalKind) -> R<Stmt> {
        self.distinct(names)?;
        let x = self.tuple_rhs(value, None)?;
        let word = if kind == LocalKind::Var { "var" } else { "let" };
        match &x.ty {
            Ty::Tuple(tys) if tys.len() == names.len() => {
                let tys = tys.clone();
                if kind == LocalKind::Var {
                    if let Some(k) = tys.iter().position(|t| t.is_array()) {
                        let d = Diagnostic::new(
                            names[k].span,
                            "`var` cannot hold an array",
                            "bind the tuple with `let (..) = ...;`: an array result is writable already",
                        )
                        .label(format!("this part is {}", Ty::owned(tys[k]).describe()));
                        return self.error(d);
                    }
                }
                let ls = names
                    .iter()
                    .zip(tys)
                    .map(|(n, t)| self.declare(n, Ty::owned(t), kind))
                    .collect();
                Ok(Stmt::Let(ls, x))
            }
            Ty::Tuple(tys) => {
                let d = Diagnostic::new(
                    value.span,
                    format!(
                        "this produces {} values but {} names are bound",
                        tys.len(),
                        names.len()
                    ),
                    "bind exactly one name per value",
                )
                .label(format!("this is {}", x.ty.describe()));
                self.error(d)
            }
            t => {
                let d = Diagnostic::new(
                    value.span,
                    format!("`{word} (..) = ...` needs a tuple"),
                    format!("bind a single value with `{word} x = ...;`"),
                )
                .label(format!("this is {}", t.describe()));
                self.error(d)
            }
        }
    }

    /// Reports a name bound twice in a tuple pattern.
    fn distinct(&mut self, names: &[Ident]) -> R<()> {
        for (i, n) in names.iter().enumerate() {
            if let Some(first) = names[..i].iter().find(|m| m.name == n.name) {
                return self.error(
                    Diagnostic::new(
                        n.span,
                        format!("`{}` is bound twice in this pattern", n.name),
                        "give each part its own name",
                    )
                    .secondary(first.span, "first binding"),
                );
            }
        }
        Ok(())
    }

    /// The value bound or assigned by a tuple pattern: any expression, or a
    /// tuple expression `(x, y)` (allowed here and in result position),
    /// whose parts are checked against the `var`s assigned when `want`
    /// gives them. Every part is evaluated before anything is bound, so
    /// `(a, b) = (b, a);` swaps.
    fn tuple_rhs(&mut self, value: &ast::Expr, want: Option<(&[Ident], &[Type])>) -> R<Expr> {
        let AK::Tuple(elems) = &value.kind else {
            return self.expr(value);
        };
        let mut xs = Vec::new();
        let mut tys = Vec::new();
        let mut failed = false;
        for (k, el) in elems.iter().enumerate() {
            let x = match want {
                Some((names, want)) if k < want.len() => {
                    let what = format!("the value assigned to `{}`", names[k].name);
                    self.expect(el, want[k], &what)
                }
                _ => self.value(el).and_then(|x| match x.ty.ir_scalar() {
                    Some(_) => Ok(x),
                    None => self.error(
                        Diagnostic::new(
                            el.span,
                            "a tuple holds scalars",
                            "bind the array by its own name instead",
                        )
                        .label(format!("this is {}", x.ty.describe())),
                    ),
                }),
            };
            match x {
                Ok(x) => {
                    tys.push(x.ty.ir_scalar().unwrap_or(Type::F64));
                    xs.push(x);
                }
                Err(Reported) => failed = true,
            }
        }
        if failed {
            return Err(Reported);
        }
        let x = expr(ExprKind::Tuple(xs), Ty::Tuple(tys));
        Ok(Expr {
            span: value.span,
            ..x
        })
    }

    /// `(a, b) = value;`: every name a `var` of the type of its part.
    fn assign_tuple(&mut self, names: &[Ident], value: &ast::Expr) -> R<Stmt> {
        self.distinct(names)?;
        let mut ls = Vec::new();
        for name in names {
            self.not_a_constant(name)?;
            let l = self.lookup(name)?;
            if self.locals[l].kind != LocalKind::Var {
                return self.error(self.not_assignable(name, l));
            }
            ls.push(l);
        }
        let want: Vec<Type> = ls
            .iter()
            .map(|&l| self.locals[l].ty.ir_scalar().unwrap_or(Type::F64))
            .collect();
        let x = self.tuple_rhs(value, Some((names, &want)))?;
        let tys = match &x.ty {
            Ty::Tuple(tys) if tys.len() == names.len() => tys.clone(),
            t => {
                let found = match t {
                    Ty::Tuple(tys) => format!("this tuple has {} values", tys.len()),
                    t => format!("this is one value of type {}", t.describe()),
                };
                let d = Diagnostic::new(
                    value.span,
                    format!("{} `var`s are assigned but {found}", names.len()),
                    "assign a tuple of as many values (`(a, b) = f(..);`)",
                )
                .label(format!("this is {}", t.describe()));
                return self.error(d);
            }
        };
        for ((name, &l), ty) in names.iter().zip(&ls).zip(tys) {
            let want = self.locals[l].ty.ir_scalar().unwrap_or(Type::F64);
            if ty != want {
                let ty = if ty.is_array() {
                    return self.error(
                        Diagnostic::new(
                            name.span,
                            format!("cannot assign an array to the `var` `{}`", name.name),
                            "bind the tuple with `let (..) = ...;` instead",
                        )
                        .label(format!(
                            "its part of the tuple is {}",
                            Ty::owned(ty).describe()
                        )),
                    );
                } else {
                    ty
                };
                let d = Diagnostic::new(
                    name.span,
                    format!(
                        "`{}` is {} but its part of the tuple is {}",
                        name.name,
                        Ty::scalar(want).describe(),
                        Ty::scalar(ty).describe()
                    ),
                    "assign a value of the `var`'s type, or declare a new `var` for it",
                )
                .label("assigned here")
                .secondary(self.local_spans[l], "declared here");
                return self.error(d);
            }
        }
        Ok(Stmt::AssignTuple(ls, x))
    }

    fn assign(&mut self, name: &Ident, value: &ast::Expr) -> R<Stmt> {
        self.not_a_constant(name)?;
        let l = self.lookup(name)?;
        if self.locals[l].kind == LocalKind::Var {
            let n = &name.name;
            let want = self.locals[l].ty.ir_scalar().unwrap_or(Type::F64);
            let v = self.expect(value, want, &format!("the value assigned to `{n}`"))?;
            return Ok(Stmt::Assign(l, v));
        }
        self.error(self.not_assignable(name, l))
    }

    /// An assignment to a name that is no local but a constant (`const K`,
    /// `inf`, `nan`) is an error that says so.
    fn not_a_constant(&mut self, name: &Ident) -> R<()> {
        if self.find(&name.name).is_some() || !self.is_const(&name.name) {
            return Ok(());
        }
        let n = &name.name;
        self.error(
            Diagnostic::new(
                name.span,
                format!("cannot assign to the constant `{n}`"),
                format!("constants are fixed when the program is compiled; declare a `var` to hold a value that changes: `var {}2 = {n};`", n.to_lowercase()),
            )
            .label("a constant"),
        )
    }

    /// Why `name` (local `l`, not a `var`) cannot be assigned.
    fn not_assignable(&self, name: &Ident, l: LocalId) -> Diagnostic {
        let n = &name.name;
        let (msg, help) = match self.locals[l].kind {
            _ if matches!(self.locals[l].ty, Ty::Array { .. }) => (
                format!("cannot assign to the array `{n}`"),
                format!("write its elements (`{n}[i] = v;`) or use `fill({n}, v);`"),
            ),
            // (A `var` can be assigned: callers ask only about others.)
            LocalKind::Let | LocalKind::Var => (
                format!("cannot assign to `{n}`: it is declared with `let`"),
                format!("declare it with `var`: `var {n} = ...;`"),
            ),
            LocalKind::Param => (
                format!("cannot assign to the parameter `{n}`"),
                format!("parameters are immutable; declare a copy with `var`: `var {n}2 = {n};`"),
            ),
            LocalKind::LoopIndex | LocalKind::Zeros => (
                format!("cannot assign to the loop index `{n}`"),
                "declare a separate counter with `var`".to_string(),
            ),
        };
        Diagnostic::new(name.span, msg, help)
            .label("assigned here")
            .secondary(self.local_spans[l], "declared here")
    }
}

/// Does `s` end its block early: what, for messages ("`return`")?
fn stmt_diverges(s: &Stmt) -> Option<&'static str> {
    match s {
        Stmt::Return(..) => Some("`return`"),
        Stmt::Break(..) => Some("`break`"),
        Stmt::Continue(..) => Some("`continue`"),
        Stmt::Expr(e) if e.ty == Ty::Never => Some("an `if` that never finishes"),
        _ => None,
    }
}
