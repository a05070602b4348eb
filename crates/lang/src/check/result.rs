//! Result position: a `return` value, the tail of a function body, or of a
//! branch of an `if` in that position; and the diagnostic of a body or
//! branch that can end without the value it must produce.

use super::items::describe_results;
use super::{expr, spanned, Ctx, R};
use crate::ast::{self, ExprKind as AK};
use crate::diagnostic::{Diagnostic, Span};
use crate::typed::*;
use adze_ir::Type;

/// Can the checked block `b`, in a position that must produce `results`,
/// reach its end without a value? (A tail of the wrong type is reported
/// where it is checked; this is the block without a tail: empty, or ending
/// in a statement.)
pub(super) fn misses_value(b: &Block, results: &[Type]) -> bool {
    !results.is_empty() && b.ty != Ty::Never && b.tail.is_none()
}

impl Ctx<'_> {
    /// The diagnostic for a block in result position that can end without
    /// a value (`misses_value`): the function body (`branch` false) or a
    /// branch of an `if` in result position.
    pub(super) fn missing_value(
        &self,
        typed: &Block,
        block: &ast::Block,
        results: &[Type],
        branch: bool,
    ) -> Diagnostic {
        let end = Span::new(block.span.end.saturating_sub(1), block.span.end);
        let want = describe_results(results);
        let (message, place) = if branch {
            (
                format!(
                    "this branch of the `if` can end without a value, but {} must return {want}",
                    self.what
                ),
                "branch",
            )
        } else {
            (
                format!(
                    "{} must return {want}, but its body can end without a value",
                    self.what
                ),
                "body",
            )
        };
        // `x;` where `x` would have been the value.
        let fits = |x: &Expr| match results {
            [t] => {
                x.ty.ir_scalar() == Some(*t) || (*t == Type::F64 && x.ty == Ty::I64 && x.literal)
            }
            _ => x.ty == Ty::Tuple(results.to_vec()),
        };
        let discarded = match (typed.stmts.last(), block.stmts.last()) {
            (Some(Stmt::Expr(x)), Some(s)) if fits(x) => Some(s.span),
            _ => None,
        };
        let mut d = if let Some(span) = discarded {
            Diagnostic::new(
                end,
                message,
                format!(
                    "remove the `;` after the last expression of the {place}: a block's last expression without `;` is its value"
                ),
            )
            .label(format!("the {place} ends here without a value"))
            .secondary(span, "this value is discarded by its `;`")
        } else if block.stmts.is_empty() && block.tail.is_none() {
            Diagnostic::new(
                Span::new(block.span.start, block.span.end),
                message,
                format!(
                    "give the {place} a value of type {want} (a last expression without `;`), or `return` one"
                ),
            )
            .label(format!("empty {place}"))
        } else {
            Diagnostic::new(
                end,
                message,
                format!(
                    "end the {place} with an expression of type {want} (no `;`), or `return` a value on every path"
                ),
            )
            .label(format!("the {place} can reach its end here"))
        };
        if let Some(span) = self.results_span {
            d = d.secondary(span, "result type declared here");
        }
        d
    }

    pub(super) fn return_stmt(&mut self, value: Option<&ast::Expr>, span: Span) -> R<Stmt> {
        match value {
            None if self.results.is_empty() => Ok(Stmt::Return(None, span)),
            None => {
                let d = Diagnostic::new(
                    span,
                    format!(
                        "`return` needs a value: {} returns {}",
                        self.what,
                        describe_results(&self.results)
                    ),
                    "write `return value;`",
                )
                .label("no value");
                self.error(d)
            }
            Some(e) => {
                let results = self.results.clone();
                Ok(Stmt::Return(Some(self.result_value(e, &results)?), span))
            }
        }
    }

    /// An expression in result position: a `return` value, or the tail of a
    /// function body (or of a branch of an `if` in that position).
    /// One part of a result of type `want`: a value, or an array where
    /// the result is an array.
    fn expect_result(&mut self, e: &ast::Expr, want: Type, what: &str) -> R<Expr> {
        if !want.is_array() {
            return self.expect(e, want, what);
        }
        let x = self.expr(e)?;
        self.coerce(x, want, e.span, what)
    }

    pub(super) fn result_value(&mut self, e: &ast::Expr, results: &[Type]) -> R<Expr> {
        let x = self.result_value_here(e, results);
        spanned(x, e.span)
    }

    fn result_value_here(&mut self, e: &ast::Expr, results: &[Type]) -> R<Expr> {
        match &e.kind {
            AK::Tuple(elems) if results.len() >= 2 => {
                if elems.len() != results.len() {
                    let d = Diagnostic::new(
                        e.span,
                        format!(
                            "{} returns {} values, but this tuple has {}",
                            self.what,
                            results.len(),
                            elems.len()
                        ),
                        format!("return a tuple of type {}", describe_results(results)),
                    )
                    .label("wrong number of values");
                    return self.error(d);
                }
                let xs: Vec<R<Expr>> = elems
                    .iter()
                    .zip(results)
                    .enumerate()
                    .map(|(i, (el, &t))| self.expect_result(el, t, &format!("result {}", i + 1)))
                    .collect();
                let xs = xs.into_iter().collect::<R<Vec<_>>>()?;
                Ok(expr(ExprKind::Tuple(xs), Ty::Tuple(results.to_vec())))
            }
            AK::If(c, t, els) => self.if_expr(c, t, els.as_ref(), Some(results), e.span),
            _ => {
                let x = self.expr(e)?;
                if x.ty == Ty::Never {
                    return Ok(x);
                }
                match results {
                    [] if x.ty == Ty::Unit => Ok(x),
                    [] => {
                        let t = x.ty.describe();
                        self.error(
                            Diagnostic::new(
                                e.span,
                                format!(
                                    "{} has no result type, but this is a value of type {t}",
                                    self.what
                                ),
                                format!(
                                    "add `-> {t}` to the signature, or end the expression with `;`"
                                ),
                            )
                            .label("unexpected value"),
                        )
                    }
                    [t] => {
                        let x = if t.is_array() {
                            x
                        } else {
                            self.require_value(x, e.span)?
                        };
                        let what = format!("the result of {}", self.what);
                        self.coerce(x, *t, e.span, &what)
                    }
                    _ if x.ty == Ty::Tuple(results.to_vec()) => Ok(x),
                    _ => {
                        let want = describe_results(results);
                        let found = x.ty.describe();
                        self.error(
                            Diagnostic::new(
                                e.span,
                                format!(
                                    "mismatched types: {} returns {want}, found {found}",
                                    self.what
                                ),
                                format!(
                                    "return a tuple: `({})`",
                                    vec!["..."; results.len()].join(", ")
                                ),
                            )
                            .label(format!("expected {want}")),
                        )
                    }
                }
            }
        }
    }
}
