//! Top-level constants, `const NAME: T = EXPR;` (issue #16): their names,
//! the order their values depend on each other in (a cycle is an error),
//! and their evaluation at compile time.
//!
//! A constant's expression is checked as an expression of a body without
//! locals (so the types and the conversion of integer literals are the
//! language's), then evaluated by [`adze_ir::semantics`], the one
//! definition both engines use: a constant has the bits the same
//! expression computes at run time. It may use literals, `true`/`false`,
//! other constants (in any order in the file), the builtin constants `inf`
//! and `nan`, every operator, the intrinsics, `f64(..)` and `i64(..)`.
//! Anything else (a call of a function of the file, `len`, an `if`) is an
//! error, as is an evaluation that would be a run-time error (`1 / 0`,
//! `1 << 64`, `i64(nan)`).
//!
//! A use of a constant is its value, typed by its declaration (an `i64`
//! constant is not an integer literal: `x * N` with an i64 `N` is an error,
//! as for an i64 variable). Locals shadow constants.

use super::items::Globals;
use super::{Ctx, Reported};
use crate::ast::{self, ExprKind as AK, TypeKind};
use crate::diagnostic::{Diagnostic, Span};
use crate::typed::*;
use adze_ir::{semantics, Opcode, Type};
use std::collections::{HashMap, HashSet};

/// The builtin constants: names of the value namespace that need no
/// declaration (a constant of the file may not take them; a local may
/// shadow them).
pub const BUILTIN_CONSTS: &[(&str, f64)] = &[("inf", f64::INFINITY), ("nan", f64::NAN)];

/// The value of a constant.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(super) enum Scalar {
    F64(f64),
    I64(i64),
    Bool(bool),
}

impl Scalar {
    /// The checked expression a use of the constant becomes (not a literal
    /// expression: it keeps its declared type).
    pub(super) fn expr(self, span: Span) -> Expr {
        let (kind, ty) = match self {
            Scalar::F64(x) => (ExprKind::F64(x), Ty::F64),
            Scalar::I64(n) => (ExprKind::I64(n), Ty::I64),
            Scalar::Bool(b) => (ExprKind::Bool(b), Ty::Bool),
        };
        Expr {
            kind,
            ty,
            literal: false,
            span,
        }
    }
}

/// The constants known to the bodies: the builtin ones, then the file's
/// that evaluated; `failed` holds those with an error (their uses report
/// nothing more).
#[derive(Default)]
pub(super) struct Consts {
    pub(super) values: HashMap<String, Scalar>,
    pub(super) failed: HashSet<String>,
}

/// Checks and evaluates the constants of `file` into `globals.consts`.
pub(super) fn check_consts(file: &ast::File, globals: &mut Globals, errors: &mut Vec<Diagnostic>) {
    for (name, x) in BUILTIN_CONSTS {
        globals
            .consts
            .values
            .insert(name.to_string(), Scalar::F64(*x));
    }
    // Names: the first declaration of each name counts.
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for (i, c) in file.consts.iter().enumerate() {
        let name = c.name.name.as_str();
        if BUILTIN_CONSTS.iter().any(|(b, _)| *b == name) {
            errors.push(
                Diagnostic::new(
                    c.name.span,
                    format!("`{name}` is a builtin constant"),
                    "choose another name for the constant",
                )
                .label("builtin name"),
            );
        } else if let Some(&first) = by_name.get(name) {
            errors.push(
                Diagnostic::new(
                    c.name.span,
                    format!("constant `{name}` is defined twice"),
                    "give each constant its own name",
                )
                .label("second definition")
                .secondary(file.consts[first].name.span, "first definition"),
            );
        } else {
            by_name.insert(name, i);
        }
    }
    // The constants each one names, with where.
    let deps: Vec<Vec<(usize, Span)>> = file
        .consts
        .iter()
        .map(|c| {
            let mut out = Vec::new();
            names_in(&c.value, &mut |id: &ast::Ident| {
                if let Some(&j) = by_name.get(id.name.as_str()) {
                    out.push((j, id.span));
                }
            });
            out
        })
        .collect();
    // Depth-first, each constant after those it names; a constant met
    // again while in progress closes a cycle.
    let mut state = vec![State::New; file.consts.len()];
    let mut order = Vec::new();
    let mut in_cycle = vec![false; file.consts.len()];
    for &root in by_name.values().collect::<std::collections::BTreeSet<_>>() {
        if state[root] != State::New {
            continue;
        }
        // An explicit stack (a chain of 100 000 constants must not overflow):
        // (constant, next dependency to visit).
        let mut stack = vec![(root, 0usize)];
        state[root] = State::Active;
        while let Some(&mut (c, ref mut next)) = stack.last_mut() {
            if let Some(&(d, _)) = deps[c].get(*next) {
                *next += 1;
                match state[d] {
                    State::New => {
                        state[d] = State::Active;
                        stack.push((d, 0));
                    }
                    State::Active => {
                        let start = stack.iter().position(|&(x, _)| x == d).unwrap_or(0);
                        let cycle: Vec<usize> = stack[start..].iter().map(|&(x, _)| x).collect();
                        errors.push(cycle_error(file, &deps, &cycle));
                        for &x in &cycle {
                            in_cycle[x] = true;
                        }
                    }
                    State::Done => {}
                }
            } else {
                state[c] = State::Done;
                order.push(c);
                stack.pop();
            }
        }
    }
    for c in order {
        let decl = &file.consts[c];
        let name = &decl.name.name;
        if in_cycle[c] {
            globals.consts.failed.insert(name.clone());
            continue;
        }
        match evaluate(globals, decl, errors) {
            Some(v) => {
                globals.consts.values.insert(name.clone(), v);
            }
            None => {
                globals.consts.failed.insert(name.clone());
            }
        }
    }
}

#[derive(Copy, Clone, PartialEq, Eq)]
enum State {
    New,
    Active,
    Done,
}

/// "constant `A` depends on itself", with each use along the cycle.
fn cycle_error(file: &ast::File, deps: &[Vec<(usize, Span)>], cycle: &[usize]) -> Diagnostic {
    let first = &file.consts[cycle[0]];
    let path: Vec<String> = cycle
        .iter()
        .chain(cycle.first())
        .map(|&c| format!("`{}`", file.consts[c].name.name))
        .collect();
    let mut d = Diagnostic::new(
        first.name.span,
        format!(
            "constant `{}` depends on itself: {}",
            first.name.name,
            path.join(" -> ")
        ),
        "a constant's value must not use itself, directly or through other constants",
    )
    .label("defined in terms of itself");
    for (k, &c) in cycle.iter().enumerate() {
        let next = cycle[(k + 1) % cycle.len()];
        if let Some(&(_, span)) = deps[c].iter().find(|&&(d, _)| d == next) {
            d = d.secondary(
                span,
                format!(
                    "`{}` uses `{}` here",
                    file.consts[c].name.name, file.consts[next].name.name
                ),
            );
        }
    }
    d
}

/// Calls `f` on every name used as a value in `e` (conservatively: inside
/// blocks too, which a constant may not have anyway).
fn names_in(e: &ast::Expr, f: &mut dyn FnMut(&ast::Ident)) {
    // An explicit stack: the parser bounds nesting, but cheaply so.
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match &e.kind {
            AK::Int(_) | AK::Float(_) | AK::Bool(_) => {}
            AK::Name(id) => f(id),
            AK::Unary(_, a) => stack.push(a),
            AK::Binary(_, a, b) => {
                stack.push(a);
                stack.push(b);
            }
            AK::Call(_, args) | AK::Tuple(args) => stack.extend(args),
            AK::Index(_, i) => stack.push(i),
            AK::Slice(_, lo, hi) => stack.extend(lo.iter().chain(hi).map(|x| &**x)),
            AK::If(c, t, els) => {
                stack.push(c);
                for b in std::iter::once(t).chain(els) {
                    stack.extend(b.tail.as_deref());
                    for s in &b.stmts {
                        if let ast::StmtKind::Expr(x) = &s.kind {
                            stack.push(x);
                        }
                    }
                }
            }
        }
    }
}

/// Checks and evaluates one constant, reporting its errors.
fn evaluate(
    globals: &Globals,
    decl: &ast::ConstDecl,
    errors: &mut Vec<Diagnostic>,
) -> Option<Scalar> {
    let ty = match decl.ty.kind {
        TypeKind::F64 => Type::F64,
        TypeKind::I64 => Type::I64,
        TypeKind::Bool => Type::Bool,
        TypeKind::Array { .. } => return None,
    };
    let what = format!("the constant `{}`", decl.name.name);
    let mut cx = Ctx::new(globals, errors, what);
    let what = format!("the value of the constant `{}`", decl.name.name);
    let typed = match cx.expect(&decl.value, ty, &what) {
        Ok(x) => x,
        Err(Reported) => return None,
    };
    match eval(&typed, decl.value.span) {
        Ok(v) => Some(v),
        Err(d) => {
            errors.push(d);
            None
        }
    }
}

const ALLOWED: &str = "a constant's value may use literals, other constants, `inf`, `nan`, operators, intrinsics, `f64(..)`, `i64(..)` and `if c { a } else { b }`";

/// Evaluates a checked constant expression by [`semantics`]. `outer`: the
/// span for a part without one of its own.
fn eval(e: &Expr, outer: Span) -> Result<Scalar, Diagnostic> {
    use Scalar::*;
    let span = if e.span == Span::default() {
        outer
    } else {
        e.span
    };
    let fail = |kind: adze_ir::TrapKind| {
        Diagnostic::new(
            span,
            format!("cannot evaluate this constant: {kind}"),
            "constants are evaluated at compile time, where this would be a run-time error; change the expression",
        )
        .label("the error is here")
    };
    let not_allowed = |what: &str| {
        Diagnostic::new(
            span,
            format!("{what} is not allowed in a constant"),
            ALLOWED,
        )
        .label("not a constant expression")
    };
    Ok(match &e.kind {
        ExprKind::F64(x) => F64(*x),
        ExprKind::I64(n) => I64(*n),
        ExprKind::Bool(b) => Bool(*b),
        ExprKind::Unary(op, a) => {
            let a = eval(a, span)?;
            match (*op, a) {
                (op, F64(x)) if semantics::is_unary_f64(op) => F64(semantics::unary_f64(op, x)),
                (Opcode::Ineg, I64(x)) => {
                    I64(semantics::binary_i64(Opcode::Isub, 0, x).map_err(fail)?)
                }
                (Opcode::Not, Bool(b)) => Bool(!b),
                (Opcode::Sitof, I64(x)) => F64(semantics::sitof(x)),
                (Opcode::Ftosi, F64(x)) => I64(semantics::ftosi(x).map_err(fail)?),
                _ => return Err(not_allowed("this operation")),
            }
        }
        ExprKind::Binary(op, a, b) => {
            let (a, b) = (eval(a, span)?, eval(b, span)?);
            match (*op, a, b) {
                (op, F64(x), F64(y)) if semantics::is_binary_f64(op) => {
                    F64(semantics::binary_f64(op, x, y))
                }
                (op, I64(x), I64(y)) if semantics::is_binary_i64(op) => {
                    I64(semantics::binary_i64(op, x, y).map_err(fail)?)
                }
                _ => return Err(not_allowed("this operation")),
            }
        }
        ExprKind::Powi(a, n) => match eval(a, span)? {
            F64(x) => F64(semantics::powi(x, *n)),
            _ => return Err(not_allowed("this operand")),
        },
        ExprKind::Cmp(op, cond, a, b) => match (*op, eval(a, span)?, eval(b, span)?) {
            (Opcode::Fcmp, F64(x), F64(y)) => Bool(semantics::fcmp(*cond, x, y)),
            (Opcode::Icmp, I64(x), I64(y)) => Bool(semantics::icmp(*cond, x, y)),
            _ => return Err(not_allowed("this comparison")),
        },
        ExprKind::And(a, b) | ExprKind::Or(a, b) => {
            let is_and = matches!(e.kind, ExprKind::And(..));
            match eval(a, span)? {
                Bool(x) if x != is_and => Bool(x),
                Bool(_) => eval(b, span)?,
                _ => return Err(not_allowed("this operand")),
            }
        }
        ExprKind::Local(_) => return Err(not_allowed("a variable")),
        ExprKind::Fill(..) => return Err(not_allowed("`fill`")),
        ExprKind::Slice(..) => return Err(not_allowed("a slice")),
        ExprKind::Call(..) => return Err(not_allowed("a call of a function")),
        ExprKind::Autodiff(..) => return Err(not_allowed("`autodiff`")),
        // Only the branch taken is evaluated (`if n > 0 { 1 / n } else { 0 }`
        // cannot fail); each branch must be a lone expression.
        ExprKind::If(c, t, els) => {
            let branch = match (eval(c, span)?, els) {
                (Bool(true), _) => t,
                (Bool(false), Some(e)) => e,
                _ => return Err(not_allowed("an `if` without `else`")),
            };
            match (&branch.stmts[..], &branch.tail) {
                ([], Some(x)) => eval(x, span)?,
                _ => return Err(not_allowed("a statement")),
            }
        }
        ExprKind::Tuple(..) => return Err(not_allowed("a tuple")),
    })
}
