//! Name resolution and type checking: from the [`ast`] to the checked
//! program of [`typed`](crate::typed).
//!
//! In order:
//! 1. Signatures of every `fn` and rule; duplicate, reserved and
//!    duplicate-parameter names.
//! 2. Rules: each must name a `fn` of the file, at most one per mode, with
//!    exactly the signature its mode requires (see [`expected_rule_signature`]).
//! 3. Constants: names, the order they depend on each other in (no
//!    cycles), their values, evaluated at compile time.
//! 4. Bodies: scopes, types, implicit conversion of integer literals to f64,
//!    writability and aliasing of arrays, `autodiff` requests, results on
//!    every path, no code after a `return`.
//!
//! Errors are collected over the whole file (a statement with an error is
//! dropped, and a name it would have bound is "poisoned" so that its uses
//! report nothing more) and returned sorted by position.
//!
//! This module holds the driver ([`check`], in named phases) and `Ctx`,
//! the context of the body being checked; its children, one concern each,
//! add to `Ctx` the methods of theirs:
//! - `items`: signatures and the table of the file's functions, the
//!   module order, and how signatures are written in messages;
//! - `consts`: the top-level constants and their evaluation;
//! - `rules`: attaching rules to their functions and the signature each
//!   mode requires;
//! - `scope`: declaring locals, opening and closing scopes, and resolving
//!   names (to arrays where one is needed);
//! - `stmt`: blocks and statements;
//! - `result`: values in result position (`return`, a body's tail) and
//!   the diagnostic of a body or branch that can end without one;
//! - `expr`: expressions and operators;
//! - `convert`: scalar values and the implicit conversion of integer
//!   literals to f64;
//! - `call`: calls of builtins, intrinsics and the file's functions, with
//!   the writability and aliasing of their array arguments;
//! - `autodiff`: `autodiff` requests and their activity arguments.

mod autodiff;
mod call;
mod consts;
mod convert;
mod expr;
mod items;
mod result;
mod rules;
mod scope;
mod stmt;

use crate::ast::{self, FuncKind};
use crate::diagnostic::{Diagnostic, Span};
use crate::typed::*;
use adze_ir::{InlineHint, Mode, Opcode, Param, Type};
use std::collections::{HashMap, HashSet};

pub use consts::BUILTIN_CONSTS;
pub use items::fmt_param_type;
pub(crate) use items::signature;
use items::{Globals, Sig};
pub use rules::expected_rule_signature;
pub(crate) use rules::rule_declaration;
use rules::{mode_slot, RuleSlots};

/// Built-in functions besides the intrinsics; user functions may not take
/// these names.
pub const BUILTINS: &[&str] = &[
    "len",
    "fill",
    "zeros",
    "zeros_i64",
    "f64",
    "i64",
    "autodiff",
];

/// Is `name` an intrinsic or a builtin?
pub fn is_builtin(name: &str) -> bool {
    BUILTINS.contains(&name) || Opcode::intrinsic(name).is_some()
}

/// The error has been recorded.
struct Reported;
type R<T> = Result<T, Reported>;

/// Checks a parsed file.
pub fn check(file: &ast::File) -> Result<Program, Vec<Diagnostic>> {
    let mut errors = Vec::new();
    let sigs: Vec<Sig> = file
        .items
        .iter()
        .map(|item| signature(item, &mut errors))
        .collect();
    let mut fns = items::fn_table(file, &sigs, &mut errors);
    let rules = rules::attach(file, &fns, &sigs, &mut errors);
    let position = items::module_order(file, &mut fns, &rules);
    let mut globals = Globals {
        fns,
        consts: Default::default(),
    };
    consts::check_consts(file, &mut globals, &mut errors);
    let mut funcs = check_bodies(file, &globals, &sigs, &rules, &position, &mut errors);
    if !errors.is_empty() {
        errors.sort_by_key(|d| d.span.start);
        return Err(errors);
    }
    funcs.sort_by_key(|(index, _)| *index);
    Ok(Program {
        funcs: funcs.into_iter().map(|(_, f)| f).collect(),
    })
}

/// Checks the body of every item, and makes the [`Func`] of each that has
/// a place in the module (`position`) and no error, with that place.
fn check_bodies(
    file: &ast::File,
    globals: &Globals,
    sigs: &[Sig],
    rules: &RuleSlots,
    position: &[Option<usize>],
    errors: &mut Vec<Diagnostic>,
) -> Vec<(usize, Func)> {
    let index_of = |item: usize| position.get(item).copied().flatten();
    let mut funcs = Vec::new();
    for (i, item) in file.items.iter().enumerate() {
        let (params, results) = &sigs[i];
        let body = check_body(globals, item, params, results, errors);
        let Some(index) = index_of(i) else { continue };
        let Some((locals, body)) = body else { continue };
        let own = rules
            .get(&item.name.name)
            .filter(|_| item.kind == FuncKind::Fn);
        let rule = |mode: Mode| own.and_then(|r| r[mode_slot(mode)]).and_then(index_of);
        let name = match item.kind {
            FuncKind::Fn => item.name.name.clone(),
            FuncKind::Rule(mode) => format!("{}.rule.{mode}", item.name.name),
        };
        funcs.push((
            index,
            Func {
                name,
                params: params.clone(),
                results: results.clone(),
                inline: item.inline.map_or(InlineHint::Auto, |a| a.0),
                forward_rule: rule(Mode::Forward),
                reverse_rule: rule(Mode::Reverse),
                locals,
                body,
                span: item.sig_span,
            },
        ));
    }
    funcs
}

fn check_body(
    globals: &Globals,
    item: &ast::FuncDecl,
    params: &[Param],
    results: &[Type],
    errors: &mut Vec<Diagnostic>,
) -> Option<(Vec<Local>, Block)> {
    let what = match item.kind {
        FuncKind::Fn => format!("`{}`", item.name.name),
        FuncKind::Rule(mode) => format!("the {mode} rule of `{}`", item.name.name),
    };
    let mut cx = Ctx::new(globals, errors, what);
    cx.results = results.to_vec();
    cx.results_span = item.results.as_ref().map(|r| r.span);
    for (p, decl) in params.iter().zip(&item.params) {
        let ty = match p.ty {
            Type::Array | Type::IArray => Ty::Array {
                writable: p.mutable,
                elem: Elem::of(p.ty).unwrap_or(Elem::F64),
            },
            t => Ty::scalar(t),
        };
        cx.declare(&decl.name, ty, LocalKind::Param);
    }
    let body = cx.block(&item.body, Some(results)).ok()?;
    if result::misses_value(&body, results) {
        let d = cx.missing_value(&body, &item.body, results, false);
        cx.errors.push(d);
        return None;
    }
    Some((cx.locals, body))
}

/// The context of the body being checked: its locals and scopes, and what
/// it must return. The methods that check it are spread over this
/// module's children, one concern each.
struct Ctx<'a> {
    g: &'a Globals,
    errors: &'a mut Vec<Diagnostic>,
    locals: Vec<Local>,
    local_spans: Vec<Span>,
    /// Locals whose initializer had an error: uses report nothing more.
    poisoned: HashSet<LocalId>,
    /// Per open scope, the names it declared (in order); `bindings` holds,
    /// per name, the locals it denotes in the open scopes, innermost last.
    /// Declaring, finding and closing a scope are O(1) per name, so a body
    /// of 100 000 `let`s checks in linear time.
    scopes: Vec<Vec<String>>,
    bindings: HashMap<String, Vec<LocalId>>,
    results: Vec<Type>,
    /// Where the result types are declared.
    results_span: Option<Span>,
    /// "`f`" or "the reverse rule of `f`", for messages.
    what: String,
    /// How many loops enclose what is being checked (`break` and
    /// `continue` need one).
    loops: u32,
    /// The locals bound to slices (`let s = a[1..3];`): the array whose
    /// memory each views, and where.
    views: HashMap<LocalId, (LocalId, scope::Part)>,
}

impl<'a> Ctx<'a> {
    /// A context with no locals, no results and no enclosing loop, whose
    /// messages call what is checked `what` ("`f`").
    fn new(g: &'a Globals, errors: &'a mut Vec<Diagnostic>, what: String) -> Ctx<'a> {
        Ctx {
            g,
            errors,
            locals: Vec::new(),
            local_spans: Vec::new(),
            poisoned: HashSet::new(),
            scopes: vec![Vec::new()],
            bindings: HashMap::new(),
            results: Vec::new(),
            results_span: None,
            what,
            loops: 0,
            views: HashMap::new(),
        }
    }
}

impl Ctx<'_> {
    fn error<T>(&mut self, d: Diagnostic) -> R<T> {
        self.errors.push(d);
        Err(Reported)
    }
}

/// A checked expression of `kind` and `ty`, not a literal, without a span
/// of its own.
fn expr(kind: ExprKind, ty: Ty) -> Expr {
    Expr {
        kind,
        ty,
        literal: false,
        span: Span::default(),
    }
}

/// `x`, with the span of its source `span` unless it has one already.
fn spanned(r: R<Expr>, span: Span) -> R<Expr> {
    r.map(|mut x| {
        if x.span == Span::default() {
            x.span = span;
        }
        x
    })
}
