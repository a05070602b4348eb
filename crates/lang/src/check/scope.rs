//! Scopes and names: declaring locals, opening and closing scopes, and
//! resolving a name to a local (an array, for the places that need one).

use super::{expr, is_builtin, Ctx, Reported, R};
use crate::ast::{self, ExprKind as AK, Ident};
use crate::diagnostic::Diagnostic;
use crate::typed::*;

impl Ctx<'_> {
    pub(super) fn declare(&mut self, id: &Ident, ty: Ty, kind: LocalKind) -> LocalId {
        let l = self.locals.len();
        self.locals.push(Local {
            name: id.name.clone(),
            ty,
            kind,
        });
        self.local_spans.push(id.span);
        if let Some(scope) = self.scopes.last_mut() {
            scope.push(id.name.clone());
            self.bindings.entry(id.name.clone()).or_default().push(l);
        }
        l
    }

    pub(super) fn poison(&mut self, id: &Ident) {
        let l = self.declare(id, Ty::Unit, LocalKind::Let);
        self.poisoned.insert(l);
    }

    pub(super) fn scoped<T>(&mut self, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        self.scopes.push(Vec::new());
        let r = f(self);
        for name in self.scopes.pop().unwrap_or_default() {
            if let Some(b) = self.bindings.get_mut(&name) {
                b.pop();
            }
        }
        r
    }

    pub(super) fn find(&self, name: &str) -> Option<LocalId> {
        self.bindings.get(name).and_then(|b| b.last()).copied()
    }

    pub(super) fn lookup(&mut self, id: &Ident) -> R<LocalId> {
        match self.find(&id.name) {
            Some(l) if self.poisoned.contains(&l) => Err(Reported),
            Some(l) => Ok(l),
            None if self.g.fns.contains_key(&id.name) || is_builtin(&id.name) => self.error(
                Diagnostic::new(
                    id.span,
                    format!("`{}` is a function, not a value", id.name),
                    format!("call it: `{}(..)`", id.name),
                )
                .label("function used as a value"),
            ),
            None => self.error(
                Diagnostic::new(
                    id.span,
                    format!("unknown name `{}`", id.name),
                    "declare it with `let` or `var` before this use, or check the spelling",
                )
                .label("not found in this scope"),
            ),
        }
    }

    /// An array local named by `id`: the local, whether it is writable,
    /// its element type.
    pub(super) fn array(&mut self, id: &Ident) -> R<(LocalId, bool, Elem)> {
        let l = self.lookup(id)?;
        match self.locals[l].ty {
            Ty::Array { writable, elem } => Ok((l, writable, elem)),
            ref t => {
                let t = t.describe();
                self.error(
                    Diagnostic::new(
                        id.span,
                        format!("`{}` is not an array", id.name),
                        "only arrays (`[f64]`, `[i64]`, `mut [..]`) can be indexed",
                    )
                    .label(format!("this is {t}")),
                )
            }
        }
    }

    /// An argument that must be an array: an array by its name, or a slice
    /// `a[lo..hi]` of one.
    pub(super) fn array_arg(&mut self, e: &ast::Expr, what: &str) -> R<ArrayRef> {
        if let AK::Name(id) = &e.kind {
            let l = self.lookup(id)?;
            if let Ty::Array { writable, elem } = self.locals[l].ty {
                let (root, part) = self.views.get(&l).copied().unwrap_or((l, Part::Whole));
                let local = expr(ExprKind::Local(l), self.locals[l].ty.clone());
                return Ok(ArrayRef::new(local, l, id, (root, part), (writable, elem)));
            }
        } else if let AK::Slice(id, lo, hi) = &e.kind {
            return self.slice(id, lo.as_deref(), hi.as_deref(), e.span);
        } else {
            // Report what is wrong inside first (`zeros(n)` here, say).
            let x = self.expr(e)?;
            if let (Ty::Array { .. }, AK::Call(f, _)) = (&x.ty, &e.kind) {
                return self.error(
                    Diagnostic::new(
                        e.span,
                        format!("{what} needs a named array or a slice, not a call"),
                        format!(
                            "bind the result with `let` first: `let y = {}(..);`, then pass `y`",
                            f.name
                        ),
                    )
                    .label(format!("the array result of `{}`", f.name)),
                );
            }
        }
        self.error(
            Diagnostic::new(
                e.span,
                format!("{what} needs an array"),
                "pass an array by its name, or a slice of one (`a[lo..hi]`)",
            )
            .label("not an array"),
        )
    }

    /// `a[lo..hi]` (either bound may be left out: `0` and `len(a)`): a
    /// view of `a`, writable if `a` is.
    pub(super) fn slice(
        &mut self,
        id: &Ident,
        lo: Option<&ast::Expr>,
        hi: Option<&ast::Expr>,
        span: crate::diagnostic::Span,
    ) -> R<ArrayRef> {
        let base = self.array(id);
        let bound = |cx: &mut Self, b: Option<&ast::Expr>, what: &str| {
            b.map(|b| cx.expect(b, adze_ir::Type::I64, what))
                .transpose()
        };
        let lo = bound(self, lo, "the start of a slice");
        let hi = bound(self, hi, "the end of a slice");
        let ((l, writable, elem), lo, hi) = (base?, lo?, hi?);
        let (root, base_part) = self.views.get(&l).copied().unwrap_or((l, Part::Whole));
        let ty = self.locals[l].ty.clone();
        // Each bound: absent, a constant, or known only at run time.
        let konst = |x: &Option<Expr>| {
            x.as_ref().map(|x| match x.kind {
                ExprKind::I64(k) => Some(k),
                _ => None,
            })
        };
        let part = base_part.sub(konst(&lo), konst(&hi));
        let base_expr = || expr(ExprKind::Local(l), ty.clone());
        let lo = lo.unwrap_or_else(|| expr(ExprKind::I64(0), Ty::I64));
        let hi = hi.unwrap_or_else(|| {
            let op = match elem {
                Elem::F64 => adze_ir::Opcode::Len,
                Elem::I64 => adze_ir::Opcode::Ilen,
            };
            expr(ExprKind::Unary(op, Box::new(base_expr())), Ty::I64)
        });
        let slice = ExprKind::Slice(Box::new(base_expr()), Box::new(lo), Box::new(hi));
        let mut slice = expr(slice, ty);
        slice.span = span;
        Ok(ArrayRef::new(slice, l, id, (root, part), (writable, elem)))
    }

    pub(super) fn array_name(&self, l: LocalId) -> &str {
        &self.locals[l].name
    }

    pub(super) fn read_only(&self, name: &Ident, a: LocalId) -> Diagnostic {
        Diagnostic::new(
            name.span,
            format!("cannot write to `{}`: it is a read-only array", name.name),
            format!("declare the parameter `{}: mut [f64]`", name.name),
        )
        .label("read-only `[f64]`")
        .secondary(self.local_spans[a], "declared here")
    }
}

/// Which elements of its root array a view covers, as far as the checker
/// knows: all of them, a constant range, or elements decided at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Part {
    Whole,
    Range(i64, i64),
    Unknown,
}

impl Part {
    /// The part of the root that `[lo..hi]` of a view of this part covers;
    /// a bound is `None` when left out, `Some(None)` when known only at
    /// run time. (Overflowing constants give `Unknown`: the run checks.)
    fn sub(self, lo: Option<Option<i64>>, hi: Option<Option<i64>>) -> Part {
        let (offset, len) = match self {
            _ if lo.is_none() && hi.is_none() => return self,
            Part::Unknown => return Part::Unknown,
            Part::Whole => (0, None),
            Part::Range(c, d) => (c, d.checked_sub(c)),
        };
        let at = |k: Option<i64>| k.and_then(|k| offset.checked_add(k));
        match (at(lo.unwrap_or(Some(0))), at(hi.unwrap_or(len))) {
            (Some(a), Some(b)) => Part::Range(a, b),
            _ => Part::Unknown,
        }
    }

    /// Do views `self` and `other` of one array surely share an element
    /// (`Some(true)`), surely not (`Some(false)`), or is it for the run to
    /// tell (`None`)? Empty ranges share nothing; a range that is not
    /// within the array fails its own bounds check first.
    pub(super) fn overlaps(self, other: Part) -> Option<bool> {
        let nonempty = |p: Part| match p {
            Part::Range(a, b) => a < b,
            _ => true,
        };
        match (self, other) {
            (Part::Unknown, _) | (_, Part::Unknown) => None,
            (Part::Range(a, b), Part::Range(c, d)) => {
                Some(nonempty(self) && nonempty(other) && a < d && c < b)
            }
            _ => Some(nonempty(self) && nonempty(other)),
        }
    }
}

/// An array argument as the checker sees it.
pub(super) struct ArrayRef {
    /// The typed expression: the local, or a `slice` of it.
    pub expr: Expr,
    /// The local named (`a` in `a[lo..hi]`).
    pub local: LocalId,
    /// Its name where it is written.
    pub name: Ident,
    /// The parameter or `zeros` array whose memory it views.
    pub root: LocalId,
    /// Where in `root`.
    pub part: Part,
    pub writable: bool,
    pub elem: Elem,
}

impl ArrayRef {
    fn new(
        expr: Expr,
        local: LocalId,
        name: &Ident,
        (root, part): (LocalId, Part),
        (writable, elem): (bool, Elem),
    ) -> ArrayRef {
        ArrayRef {
            expr,
            local,
            name: name.clone(),
            root,
            part,
            writable,
            elem,
        }
    }
}
