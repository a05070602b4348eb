//! Scalar values and conversions: rejecting what is not a single scalar,
//! and converting an integer literal expression where an f64 is expected
//! (the only implicit conversion).

use super::{Ctx, R};
use crate::ast;
use crate::diagnostic::{Diagnostic, Span};
use crate::typed::*;
use adze_ir::{Opcode, Type};

impl Ctx<'_> {
    /// Rejects expressions that are not a single scalar.
    pub(super) fn require_value(&mut self, x: Expr, span: Span) -> R<Expr> {
        let (msg, help) = match &x.ty {
            Ty::F64 | Ty::I64 | Ty::Bool => return Ok(x),
            Ty::Array { .. } if matches!(x.kind, ExprKind::Call(..)) => (
                "an array is not a value",
                "bind the call's array result with `let` first (`let y = f(..);`), then index `y[i]` or pass `y` to a function that takes an array",
            ),
            Ty::Array { .. } => (
                "an array is not a value",
                "index it (`a[i]`), or pass it to a function that takes an array",
            ),
            Ty::Unit if matches!(x.kind, ExprKind::If(..)) => (
                "this `if` has no value",
                "an `if` has a value only with an `else` and a value at the end of both branches (the last expression, without `;`)",
            ),
            Ty::Unit => (
                "this expression has no value",
                "use it as a statement (`...;`); only expressions with a value can be used here",
            ),
            Ty::Tuple(_) => (
                "a tuple cannot be used as a single value",
                "destructure it first: `let (a, b) = ...;`",
            ),
            Ty::Never => (
                "this expression never produces a value",
                "every branch returns; move the `return`s out of the expression",
            ),
        };
        let label = match x.kind {
            ExprKind::If(..) if x.ty == Ty::Unit => "its branches end without a value".to_string(),
            _ => format!("this is {}", x.ty.describe()),
        };
        self.error(Diagnostic::new(span, msg, help).label(label))
    }

    pub(super) fn value(&mut self, e: &ast::Expr) -> R<Expr> {
        let x = self.expr(e)?;
        self.require_value(x, e.span)
    }

    /// Converts `x` to `want`: only an i64 literal expression converts
    /// (to f64).
    pub(super) fn coerce(&mut self, x: Expr, want: Type, span: Span, what: &str) -> R<Expr> {
        if x.ty.ir_scalar() == Some(want) {
            return Ok(x);
        }
        // An array where an array result is expected (`return a;`).
        if let Ty::Array { elem, .. } = x.ty {
            if elem.array() == want {
                return Ok(x);
            }
        }
        if want == Type::F64 && x.ty == Ty::I64 && x.literal {
            return Ok(literal_to_f64(x));
        }
        let found = x.ty.describe();
        let help = match (want, &x.ty) {
            (Type::F64, Ty::I64) => "convert it with `f64(...)`",
            (Type::I64, Ty::F64) => "convert it with `i64(...)`, which truncates toward zero",
            (Type::Bool, _) => "compare explicitly, e.g. `x != 0.0`",
            (Type::Array | Type::IArray, Ty::Array { .. }) => {
                "the element types differ: `zeros(n)` makes an [f64], `zeros_i64(n)` an [i64]; or change the declared type"
            }
            (Type::Array | Type::IArray, _) => {
                "give an array here: a local `zeros(n)` (or `zeros_i64(n)`) array, an array parameter or a slice of one"
            }
            (_, Ty::Bool) => "a bool is not a number; use `if c { 1.0 } else { 0.0 }`",
            _ => "use a value of the expected type",
        };
        // As the language writes it: `[f64]`, not the IR's `arr`.
        let want = Ty::scalar(want).describe();
        self.error(
            Diagnostic::new(
                span,
                format!("mismatched types: {what} must be {want}, found {found}"),
                help,
            )
            .label(format!("expected {want}, found {found}")),
        )
    }

    pub(super) fn expect(&mut self, e: &ast::Expr, want: Type, what: &str) -> R<Expr> {
        let x = self.value(e)?;
        self.coerce(x, want, e.span, what)
    }
}

/// An i64 expression built from literals, retyped as f64.
pub(super) fn literal_to_f64(e: Expr) -> Expr {
    let span = e.span;
    let kind = match e.kind {
        ExprKind::I64(n) => ExprKind::F64(n as f64),
        ExprKind::Unary(Opcode::Ineg, a) => {
            ExprKind::Unary(Opcode::Fneg, Box::new(literal_to_f64(*a)))
        }
        ExprKind::Binary(op, a, b) => {
            let op = match op {
                Opcode::Iadd => Opcode::Fadd,
                Opcode::Isub => Opcode::Fsub,
                Opcode::Imul => Opcode::Fmul,
                Opcode::Idiv => Opcode::Fdiv,
                op => op,
            };
            ExprKind::Binary(
                op,
                Box::new(literal_to_f64(*a)),
                Box::new(literal_to_f64(*b)),
            )
        }
        ExprKind::If(c, t, e) => ExprKind::If(c, block_to_f64(t), e.map(block_to_f64)),
        k => k,
    };
    Expr {
        kind,
        ty: Ty::F64,
        literal: true,
        span,
    }
}

pub(super) fn block_to_f64(mut b: Block) -> Block {
    if b.ty == Ty::I64 {
        b.tail = b.tail.map(|t| Box::new(literal_to_f64(*t)));
        b.ty = Ty::F64;
    }
    b
}
