//! Expressions: literals, names (locals, then constants), unary and binary operators (resolved to
//! their opcodes), indexing, `^` and `if`.

use super::convert::{block_to_f64, literal_to_f64};
use super::result::misses_value;
use super::{expr, spanned, Ctx, Reported, R};
use crate::ast::{self, BinOp, ExprKind as AK, UnOp};
use crate::diagnostic::{Diagnostic, Span};
use crate::typed::*;
use adze_ir::{CmpCond, Opcode, Type};

impl Ctx<'_> {
    pub(super) fn expr(&mut self, e: &ast::Expr) -> R<Expr> {
        let x = self.expr_here(e);
        spanned(x, e.span)
    }

    fn expr_here(&mut self, e: &ast::Expr) -> R<Expr> {
        match &e.kind {
            AK::Int(n) => Ok(Expr {
                kind: ExprKind::I64(*n),
                ty: Ty::I64,
                literal: true,
                span: e.span,
            }),
            AK::Float(x) => Ok(Expr {
                kind: ExprKind::F64(*x),
                ty: Ty::F64,
                literal: true,
                span: e.span,
            }),
            AK::Bool(b) => Ok(expr(ExprKind::Bool(*b), Ty::Bool)),
            AK::Name(id) if self.find(&id.name).is_none() && self.is_const(&id.name) => {
                match self.g.consts.values.get(&id.name) {
                    Some(v) => Ok(v.expr(e.span)),
                    // A constant with an error, reported at its definition.
                    None => Err(Reported),
                }
            }
            AK::Name(id) => {
                let l = self.lookup(id)?;
                Ok(expr(ExprKind::Local(l), self.locals[l].ty.clone()))
            }
            AK::Unary(UnOp::Neg, a) => {
                let a = self.value(a)?;
                let op = match a.ty {
                    Ty::F64 => Opcode::Fneg,
                    Ty::I64 => Opcode::Ineg,
                    _ => {
                        return self.error(
                            Diagnostic::new(e.span, "cannot negate a bool", "use `!` for logical negation")
                                .label("bool operand"),
                        )
                    }
                };
                Ok(Expr {
                    ty: a.ty.clone(),
                    literal: a.literal,
                    kind: ExprKind::Unary(op, Box::new(a)),
                    span: e.span,
                })
            }
            AK::Unary(UnOp::Not, a) => {
                let a = self.expect(a, Type::Bool, "the operand of `!`")?;
                Ok(expr(ExprKind::Unary(Opcode::Not, Box::new(a)), Ty::Bool))
            }
            AK::Binary(op, l, r) => self.binary(*op, l, r, e.span),
            AK::Call(name, args) => self.call(name, args, e.span),
            AK::Index(name, index) => {
                let a = self.array(name);
                let i = self.expect(index, Type::I64, "an array index");
                let ((a, _, elem), i) = (a?, i?);
                let a = expr(ExprKind::Local(a), self.locals[a].ty.clone());
                let (op, ty) = match elem {
                    Elem::F64 => (Opcode::Load, Ty::F64),
                    Elem::I64 => (Opcode::Iload, Ty::I64),
                };
                Ok(expr(
                    ExprKind::Binary(op, Box::new(a), Box::new(i)),
                    ty,
                ))
            }
            AK::Slice(id, lo, hi) => self.slice(id, lo.as_deref(), hi.as_deref(), e.span).map(|r| r.expr),
            AK::If(c, t, els) => self.if_expr(c, t, els.as_ref(), None, e.span),
            AK::Tuple(_) => self.error(
                Diagnostic::new(
                    e.span,
                    "a tuple can only be returned",
                    "return it from a function with a tuple result (`return (a, b);` or a final `(a, b)`), or use separate `let`s",
                )
                .label("tuple expression"),
            ),
        }
    }

    /// Is `name` a constant (builtin or of the file, evaluated or not)?
    pub(super) fn is_const(&self, name: &str) -> bool {
        self.g.consts.values.contains_key(name) || self.g.consts.failed.contains(name)
    }

    fn binary(&mut self, op: BinOp, l: &ast::Expr, r: &ast::Expr, span: Span) -> R<Expr> {
        let sym = op.symbol();
        match op {
            BinOp::And | BinOp::Or => {
                let a = self.expect(l, Type::Bool, &format!("an operand of `{sym}`"));
                let b = self.expect(r, Type::Bool, &format!("an operand of `{sym}`"));
                let (a, b) = (Box::new(a?), Box::new(b?));
                let kind = if op == BinOp::And {
                    ExprKind::And(a, b)
                } else {
                    ExprKind::Or(a, b)
                };
                return Ok(expr(kind, Ty::Bool));
            }
            BinOp::Pow => return self.pow(l, r),
            op if op.is_bitwise() => return self.bitwise(op, l, r, span),
            _ => {}
        }
        let a = self.value(l);
        let b = self.value(r);
        let (mut a, mut b) = (a?, b?);
        if a.ty == Ty::I64 && a.literal && b.ty == Ty::F64 {
            a = literal_to_f64(a);
        } else if b.ty == Ty::I64 && b.literal && a.ty == Ty::F64 {
            b = literal_to_f64(b);
        }
        if a.ty != b.ty {
            let (ta, tb) = (a.ty.describe(), b.ty.describe());
            let help = if matches!((&a.ty, &b.ty), (Ty::F64, Ty::I64) | (Ty::I64, Ty::F64)) {
                "convert the i64 operand with `f64(...)`"
            } else {
                "both operands must have the same type"
            };
            return self.error(
                Diagnostic::new(
                    span,
                    format!("mismatched operand types for `{sym}`: {ta} and {tb}"),
                    help,
                )
                .label(format!("{ta} {sym} {tb}")),
            );
        }
        if op.is_comparison() {
            self.comparison(op, a, b, span)
        } else {
            self.arithmetic(op, a, b, span)
        }
    }

    /// `a op b` for a comparison `op`, operands of one type.
    fn comparison(&mut self, op: BinOp, a: Expr, b: Expr, span: Span) -> R<Expr> {
        let sym = op.symbol();
        let opc = match a.ty {
            Ty::F64 => Opcode::Fcmp,
            Ty::I64 => Opcode::Icmp,
            _ => {
                return self.error(
                    Diagnostic::new(
                        span,
                        format!("bool values cannot be compared with `{sym}`"),
                        "combine conditions with `&&`, `||` and `!`",
                    )
                    .label("bool operands"),
                )
            }
        };
        let cond = match op {
            BinOp::Eq => CmpCond::Eq,
            BinOp::Ne => CmpCond::Ne,
            BinOp::Lt => CmpCond::Lt,
            BinOp::Le => CmpCond::Le,
            BinOp::Gt => CmpCond::Gt,
            _ => CmpCond::Ge,
        };
        Ok(expr(
            ExprKind::Cmp(opc, cond, Box::new(a), Box::new(b)),
            Ty::Bool,
        ))
    }

    /// `a op b` for an arithmetic `op`, operands of one type.
    fn arithmetic(&mut self, op: BinOp, a: Expr, b: Expr, span: Span) -> R<Expr> {
        let sym = op.symbol();
        let ty = a.ty.clone();
        let opc = match (op, &ty) {
            (BinOp::Add, Ty::F64) => Opcode::Fadd,
            (BinOp::Sub, Ty::F64) => Opcode::Fsub,
            (BinOp::Mul, Ty::F64) => Opcode::Fmul,
            (BinOp::Div, Ty::F64) => Opcode::Fdiv,
            (BinOp::Add, Ty::I64) => Opcode::Iadd,
            (BinOp::Sub, Ty::I64) => Opcode::Isub,
            (BinOp::Mul, Ty::I64) => Opcode::Imul,
            (BinOp::Div, Ty::I64) => Opcode::Idiv,
            (BinOp::Rem, Ty::I64) => Opcode::Irem,
            (BinOp::Rem, Ty::F64) => {
                return self.error(
                    Diagnostic::new(
                        span,
                        "`%` works on i64 only",
                        "there is no f64 remainder; compute it with `floor`",
                    )
                    .label("f64 operands"),
                )
            }
            _ => {
                return self.error(
                    Diagnostic::new(
                        span,
                        format!("`{sym}` cannot be applied to bool values"),
                        "arithmetic needs f64 or i64 operands",
                    )
                    .label("bool operands"),
                )
            }
        };
        Ok(Expr {
            literal: a.literal && b.literal && op != BinOp::Rem,
            kind: ExprKind::Binary(opc, Box::new(a), Box::new(b)),
            span,
            ty,
        })
    }

    /// `a & b`, `a | b`, `a << b`, `a >> b`: two i64 operands (no
    /// conversion: an integer literal stays an i64), an i64 result.
    fn bitwise(&mut self, op: BinOp, l: &ast::Expr, r: &ast::Expr, span: Span) -> R<Expr> {
        let sym = op.symbol();
        let a = self.value(l);
        let b = self.value(r);
        let (a, b) = (a?, b?);
        let opc = match op {
            BinOp::BitAnd => Opcode::Band,
            BinOp::BitOr => Opcode::Bor,
            BinOp::Shl => Opcode::Ishl,
            _ => Opcode::Sshr,
        };
        if a.ty == Ty::I64 && b.ty == Ty::I64 {
            return Ok(expr(
                ExprKind::Binary(opc, Box::new(a), Box::new(b)),
                Ty::I64,
            ));
        }
        let (ta, tb) = (a.ty.describe(), b.ty.describe());
        let help = match op {
            _ if a.ty == Ty::Bool && b.ty == Ty::Bool && op == BinOp::BitAnd => {
                "`&` is bitwise, on i64; the logical and of bools is `&&`".to_string()
            }
            _ if a.ty == Ty::Bool && b.ty == Ty::Bool && op == BinOp::BitOr => {
                "`|` is bitwise, on i64; the logical or of bools is `||`".to_string()
            }
            _ if a.ty == Ty::F64 || b.ty == Ty::F64 => format!(
                "`{sym}` works on i64 only; convert an f64 operand with `i64(..)` (which truncates)"
            ),
            _ => format!("`{sym}` works on i64 only"),
        };
        self.error(
            Diagnostic::new(
                span,
                format!("`{sym}` cannot be applied to {ta} and {tb}"),
                help,
            )
            .label(format!("{ta} {sym} {tb}")),
        )
    }

    fn pow(&mut self, l: &ast::Expr, r: &ast::Expr) -> R<Expr> {
        let base = self.expect(l, Type::F64, "the base of `^`");
        if let Some(n) = int_literal(r) {
            let base = base?;
            let Ok(n) = i32::try_from(n) else {
                return self.error(
                    Diagnostic::new(
                        r.span,
                        "integer exponent out of range",
                        "an integer exponent must fit in i32; write an f64 exponent such as `1e10`",
                    )
                    .label("does not fit in i32"),
                );
            };
            return Ok(expr(ExprKind::Powi(Box::new(base), n), Ty::F64));
        }
        let exp = self.value(r);
        let (base, exp) = (base?, exp?);
        if exp.ty == Ty::I64 && !exp.literal {
            return self.error(
                Diagnostic::new(
                    r.span,
                    "the exponent of `^` is an i64 expression",
                    "write `x ^ f64(n)` for an f64 power; integer powers take an integer literal exponent (`x ^ 3`)",
                )
                .label("i64 exponent"),
            );
        }
        let exp = self.coerce(exp, Type::F64, r.span, "the exponent of `^`")?;
        Ok(expr(
            ExprKind::Binary(Opcode::Pow, Box::new(base), Box::new(exp)),
            Ty::F64,
        ))
    }

    pub(super) fn if_expr(
        &mut self,
        cond: &ast::Expr,
        then: &ast::Block,
        els: Option<&ast::Block>,
        want: Option<&[Type]>,
        span: Span,
    ) -> R<Expr> {
        let c = self.expect(cond, Type::Bool, "the condition of `if`");
        let t = self.block(then, want);
        let e = els.map(|b| self.block(b, want)).transpose();
        let (c, mut t, e) = (Box::new(c?), t?, e?);
        let Some(mut e) = e else {
            if want.is_some_and(|w| !w.is_empty()) {
                return self.error(
                    Diagnostic::new(
                        span,
                        "an `if` without `else` cannot produce the result",
                        "add an `else` branch that also produces a value, or `return` one after the `if`",
                    )
                    .label("no `else` branch"),
                );
            }
            return Ok(expr(ExprKind::If(c, t, None), Ty::Unit));
        };
        // In result position (a function's tail, `return if ..`, a branch of
        // such an `if`) each branch is itself in result position: a branch
        // without a value would make the `if` a unit value that nothing
        // compares with the declared result.
        if let (Some(results), Some(els)) = (want, els) {
            let mut missing = false;
            for (typed, block) in [(&t, then), (&e, els)] {
                if misses_value(typed, results) {
                    let d = self.missing_value(typed, block, results, true);
                    self.errors.push(d);
                    missing = true;
                }
            }
            if missing {
                return Err(Reported);
            }
        }
        let literal = |b: &Block| b.tail.as_ref().is_some_and(|x| x.literal);
        if t.ty == Ty::I64 && literal(&t) && e.ty == Ty::F64 {
            t = block_to_f64(t);
        } else if e.ty == Ty::I64 && literal(&e) && t.ty == Ty::F64 {
            e = block_to_f64(e);
        }
        let holds_array = |t: &Ty| match t {
            Ty::Array { .. } => true,
            Ty::Tuple(tys) => tys.iter().any(|t| t.is_array()),
            _ => false,
        };
        let ty = match (&t.ty, &e.ty) {
            (a, b) if holds_array(a) || holds_array(b) => {
                return self.error(
                    Diagnostic::new(
                        span,
                        "an `if` cannot produce an array",
                        "index or pass the arrays inside the branches instead, or `return` the array from each branch",
                    )
                    .label("array-valued `if`"),
                )
            }
            (a, b) if a == b => a.clone(),
            (Ty::Never, b) => b.clone(),
            (a, Ty::Never) => a.clone(),
            (a, b) => {
                let (a, b) = (a.describe(), b.describe());
                return self.error(
                    Diagnostic::new(
                        span,
                        format!("`if` and `else` have different types: {a} and {b}"),
                        "make both branches produce the same type",
                    )
                    .label(format!("{a} vs {b}")),
                );
            }
        };
        Ok(Expr {
            literal: literal(&t) && literal(&e),
            kind: ExprKind::If(c, t, Some(e)),
            ty,
            span,
        })
    }
}

/// `n` or `-n` for an integer literal `n`.
fn int_literal(e: &ast::Expr) -> Option<i128> {
    match &e.kind {
        AK::Int(n) => Some(i128::from(*n)),
        AK::Unary(UnOp::Neg, a) => match a.kind {
            AK::Int(n) => Some(-i128::from(n)),
            _ => None,
        },
        _ => None,
    }
}
