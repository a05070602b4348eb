//! Scopes and names: declaring locals, opening and closing scopes, and
//! resolving a name to a local (an array, for the places that need one).

use super::{is_builtin, Ctx, Reported, R};
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

    /// An argument that must be an array, written as its name: the local,
    /// whether it is writable, its element type.
    pub(super) fn array_arg(&mut self, e: &ast::Expr, what: &str) -> R<(LocalId, bool, Elem)> {
        if let AK::Name(id) = &e.kind {
            let l = self.lookup(id)?;
            if let Ty::Array { writable, elem } = self.locals[l].ty {
                return Ok((l, writable, elem));
            }
        } else {
            // Report what is wrong inside first (`zeros(n)` here, say).
            self.expr(e)?;
        }
        self.error(
            Diagnostic::new(
                e.span,
                format!("{what} needs an array"),
                "pass an array parameter or a `zeros` array by name",
            )
            .label("not an array"),
        )
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
