//! Name resolution and type checking: from the [`ast`] to the checked
//! program of [`typed`](crate::typed).
//!
//! In order:
//! 1. Signatures of every `fn` and rule; duplicate, reserved and
//!    duplicate-parameter names.
//! 2. Rules: each must name a `fn` of the file, at most one per mode, with
//!    exactly the signature its mode requires (see [`expected_rule_signature`]).
//! 3. Bodies: scopes, types, implicit conversion of integer literals to f64,
//!    writability and aliasing of arrays, `autodiff` requests, results on
//!    every path, no code after a `return`.
//!
//! Errors are collected over the whole file (a statement with an error is
//! dropped, and a name it would have bound is "poisoned" so that its uses
//! report nothing more) and returned sorted by position.

use crate::ast::{self, BinOp, ExprKind as AK, FuncKind, Ident, StmtKind, TypeKind, UnOp};
use crate::diagnostic::{Diagnostic, Span};
use crate::typed::*;
use adze_ir::{ArgActivity, CmpCond, InlineHint, Mode, Opcode, Param, RetActivity, Type};
use indexmap::IndexMap;
use std::collections::{HashMap, HashSet};

/// Built-in functions besides the intrinsics; user functions may not take
/// these names.
pub const BUILTINS: &[&str] = &["len", "fill", "zeros", "f64", "autodiff"];

/// Is `name` an intrinsic or a builtin?
pub fn is_builtin(name: &str) -> bool {
    BUILTINS.contains(&name) || Opcode::intrinsic(name).is_some()
}

/// The error has been recorded.
struct Reported;
type R<T> = Result<T, Reported>;

/// A `fn` of the file, as seen by calls and rules.
struct FnInfo {
    item: usize,
    name_span: Span,
    params: Vec<Param>,
    results: Vec<Type>,
    /// Index in [`Program::funcs`].
    index: usize,
}

struct Globals {
    fns: IndexMap<String, FnInfo>,
}

/// Checks a parsed file.
pub fn check(file: &ast::File) -> Result<Program, Vec<Diagnostic>> {
    let mut errors = Vec::new();
    let sigs: Vec<(Vec<Param>, Vec<Type>)> = file
        .items
        .iter()
        .map(|item| signature(item, &mut errors))
        .collect();

    // Functions, in source order.
    let mut fns: IndexMap<String, FnInfo> = IndexMap::new();
    for (i, item) in file.items.iter().enumerate() {
        if item.kind != FuncKind::Fn {
            continue;
        }
        let name = &item.name;
        if is_builtin(&name.name) {
            errors.push(
                Diagnostic::new(
                    name.span,
                    format!("`{}` is a built-in function", name.name),
                    "choose another name for your function",
                )
                .label("reserved name"),
            );
        } else if let Some(first) = fns.get(&name.name) {
            errors.push(
                Diagnostic::new(
                    name.span,
                    format!("function `{}` is defined twice", name.name),
                    "rename or remove one of the definitions",
                )
                .label("second definition")
                .secondary(first.name_span, "first definition"),
            );
        } else {
            fns.insert(
                name.name.clone(),
                FnInfo {
                    item: i,
                    name_span: name.span,
                    params: sigs[i].0.clone(),
                    results: sigs[i].1.clone(),
                    index: 0,
                },
            );
        }
    }

    // Rules: attach to their function ([forward, reverse] item indices).
    let mut rules: IndexMap<String, [Option<usize>; 2]> = IndexMap::new();
    for (i, item) in file.items.iter().enumerate() {
        let FuncKind::Rule(mode) = item.kind else {
            continue;
        };
        let target = &item.name;
        let Some(info) = fns.get(&target.name) else {
            errors.push(
                Diagnostic::new(
                    target.span,
                    format!("no function `{}` for this {mode} rule", target.name),
                    "a rule belongs to a function defined with `fn` in the same file; check the name",
                )
                .label("unknown function"),
            );
            continue;
        };
        let slot = &mut rules.entry(target.name.clone()).or_default()[mode_slot(mode)];
        if let Some(first) = *slot {
            errors.push(
                Diagnostic::new(
                    item.sig_span,
                    format!("`{}` already has a {mode} rule", target.name),
                    "keep one rule per mode and function",
                )
                .label(format!("second {mode} rule"))
                .secondary(file.items[first].sig_span, "first rule"),
            );
            continue;
        }
        if let Err(d) = check_rule_signature(item, mode, info, &sigs[i]) {
            errors.push(d);
            continue;
        }
        *slot = Some(i);
    }

    // Module order: each fn, then its forward rule, then its reverse rule.
    let mut order: Vec<usize> = Vec::new();
    for info in fns.values_mut() {
        info.index = order.len();
        order.push(info.item);
        let pair = rules.get(&file.items[info.item].name.name).copied();
        order.extend(pair.into_iter().flatten().flatten());
    }
    let mut position = vec![None; file.items.len()];
    for (k, &item) in order.iter().enumerate() {
        position[item] = Some(k);
    }
    let index_of = |item: usize| position.get(item).copied().flatten();
    let globals = Globals { fns };

    let mut funcs = Vec::new();
    for (i, item) in file.items.iter().enumerate() {
        let (params, results) = &sigs[i];
        let body = check_body(&globals, item, params, results, &mut errors);
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
    if !errors.is_empty() {
        errors.sort_by_key(|d| d.span.start);
        return Err(errors);
    }
    funcs.sort_by_key(|(index, _)| *index);
    Ok(Program {
        funcs: funcs.into_iter().map(|(_, f)| f).collect(),
    })
}

fn mode_slot(mode: Mode) -> usize {
    match mode {
        Mode::Forward => 0,
        Mode::Reverse => 1,
    }
}

fn ir_type(t: TypeKind) -> Type {
    match t {
        TypeKind::F64 => Type::F64,
        TypeKind::I64 => Type::I64,
        TypeKind::Bool => Type::Bool,
        TypeKind::Array { .. } => Type::Array,
    }
}

pub(crate) fn signature(
    item: &ast::FuncDecl,
    errors: &mut Vec<Diagnostic>,
) -> (Vec<Param>, Vec<Type>) {
    let mut params: Vec<Param> = Vec::new();
    for (i, p) in item.params.iter().enumerate() {
        if let Some(first) = item.params[..i].iter().find(|q| q.name.name == p.name.name) {
            errors.push(
                Diagnostic::new(
                    p.name.span,
                    format!("parameter `{}` is declared twice", p.name.name),
                    "give each parameter its own name",
                )
                .label("second declaration")
                .secondary(first.name.span, "first declaration"),
            );
        }
        params.push(Param {
            name: p.name.name.clone(),
            ty: ir_type(p.ty.kind),
            mutable: matches!(p.ty.kind, TypeKind::Array { mutable: true }),
        });
    }
    let results = item
        .results
        .iter()
        .flat_map(|r| r.types.iter().map(|t| ir_type(t.kind)))
        .collect();
    (params, results)
}

/// The signature a rule of `mode` must have for a function with these
/// parameters and results (see `docs/language.md`, "Custom rules").
pub fn expected_rule_signature(
    mode: Mode,
    params: &[Param],
    results: &[Type],
) -> (Vec<Param>, Vec<Type>) {
    let f64_results = results.iter().filter(|t| **t == Type::F64).count();
    let mut ps = Vec::new();
    let mut rs = Vec::new();
    match mode {
        Mode::Forward => {
            for p in params {
                ps.push(p.clone());
                match p.ty {
                    Type::F64 => ps.push(Param::new(format!("t{}", p.name), Type::F64)),
                    Type::Array => ps.push(Param {
                        name: format!("t{}", p.name),
                        ty: Type::Array,
                        mutable: p.mutable,
                    }),
                    _ => {}
                }
            }
            rs.extend_from_slice(results);
            rs.extend(std::iter::repeat_n(Type::F64, f64_results));
        }
        Mode::Reverse => {
            for p in params {
                ps.push(p.clone());
                if p.ty == Type::Array {
                    ps.push(Param::mutable_array(format!("d{}", p.name)));
                }
            }
            for k in 0..f64_results {
                let name = if f64_results == 1 {
                    "dret".to_string()
                } else {
                    format!("dret{k}")
                };
                ps.push(Param::new(name, Type::F64));
            }
            rs.extend(
                params
                    .iter()
                    .filter(|p| p.ty == Type::F64)
                    .map(|_| Type::F64),
            );
        }
    }
    (ps, rs)
}

/// `rule MODE f(..) -> .. { .. }`: the declaration a rule of `mode` for
/// `fn f(params) -> results` must have.
pub(crate) fn rule_declaration(mode: Mode, f: &str, params: &[Param], results: &[Type]) -> String {
    let (ps, rs) = expected_rule_signature(mode, params, results);
    format!(
        "rule {mode} {f}({}){} {{ .. }}",
        fmt_params(&ps),
        fmt_results(&rs)
    )
}

/// `f64`, `mut [f64]`, ...
pub fn fmt_param_type(p: &Param) -> String {
    match (p.ty, p.mutable) {
        (Type::Array, true) => "mut [f64]".into(),
        (Type::Array, false) => "[f64]".into(),
        (t, _) => t.name().into(),
    }
}

fn fmt_params(ps: &[Param]) -> String {
    let ps: Vec<_> = ps
        .iter()
        .map(|p| format!("{}: {}", p.name, fmt_param_type(p)))
        .collect();
    ps.join(", ")
}

fn fmt_results(rs: &[Type]) -> String {
    match rs {
        [] => String::new(),
        [t] => format!(" -> {t}"),
        _ => {
            let ts: Vec<_> = rs.iter().map(|t| t.name()).collect();
            format!(" -> ({})", ts.join(", "))
        }
    }
}

fn check_rule_signature(
    item: &ast::FuncDecl,
    mode: Mode,
    f: &FnInfo,
    (params, results): &(Vec<Param>, Vec<Type>),
) -> Result<(), Diagnostic> {
    let (want_ps, want_rs) = expected_rule_signature(mode, &f.params, &f.results);
    let fname = &item.name.name;
    let mismatch = if params.len() != want_ps.len() {
        Some((
            item.sig_span,
            format!(
                "expected {} parameters, found {}",
                want_ps.len(),
                params.len()
            ),
        ))
    } else if let Some(i) =
        (0..params.len()).find(|&i| fmt_param_type(&params[i]) != fmt_param_type(&want_ps[i]))
    {
        Some((
            item.params[i].ty.span,
            format!(
                "parameter {} should be `{}`, found `{}`",
                i + 1,
                fmt_param_type(&want_ps[i]),
                fmt_param_type(&params[i])
            ),
        ))
    } else if *results != want_rs {
        let span = item.results.as_ref().map_or(item.sig_span, |r| r.span);
        let want = match fmt_results(&want_rs) {
            s if s.is_empty() => "no result".to_string(),
            s => format!("`{}`", s.trim_start()),
        };
        let found = match fmt_results(results) {
            s if s.is_empty() => "none".to_string(),
            s => format!("`{}`", s.trim_start()),
        };
        Some((span, format!("expected result {want}, found {found}")))
    } else {
        None
    };
    match mismatch {
        None => Ok(()),
        Some((span, label)) => Err(Diagnostic::new(
            span,
            format!("this {mode} rule does not match the signature of `{fname}`"),
            format!(
                "for `fn {fname}({}){}` write `rule {mode} {fname}({}){}`",
                fmt_params(&f.params),
                fmt_results(&f.results),
                fmt_params(&want_ps),
                fmt_results(&want_rs)
            ),
        )
        .label(label)
        .secondary(f.name_span, format!("`{fname}` is defined here"))),
    }
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
    let mut cx = Ctx {
        g: globals,
        errors,
        locals: Vec::new(),
        local_spans: Vec::new(),
        poisoned: HashSet::new(),
        scopes: vec![Vec::new()],
        bindings: HashMap::new(),
        results: results.to_vec(),
        results_span: item.results.as_ref().map(|r| r.span),
        what,
    };
    for (p, decl) in params.iter().zip(&item.params) {
        let ty = match p.ty {
            Type::Array => Ty::Array {
                writable: p.mutable,
            },
            t => Ty::scalar(t),
        };
        cx.declare(&decl.name, ty, LocalKind::Param);
    }
    let body = cx.block(&item.body, Some(results)).ok()?;
    if misses_value(&body, results) {
        let d = cx.missing_value(&body, &item.body, results, false);
        cx.errors.push(d);
        return None;
    }
    Some((cx.locals, body))
}

/// Can the checked block `b`, in a position that must produce `results`,
/// reach its end without a value? (A tail of the wrong type is reported
/// where it is checked; this is the block without a tail: empty, or ending
/// in a statement.)
fn misses_value(b: &Block, results: &[Type]) -> bool {
    !results.is_empty() && b.ty != Ty::Never && b.tail.is_none()
}

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
}

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

/// An i64 expression built from literals, retyped as f64.
fn literal_to_f64(e: Expr) -> Expr {
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

fn block_to_f64(mut b: Block) -> Block {
    if b.ty == Ty::I64 {
        b.tail = b.tail.map(|t| Box::new(literal_to_f64(*t)));
        b.ty = Ty::F64;
    }
    b
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

/// The name, if `e` is a bare name (`forward`, `f`, `dual`, ...).
fn word(e: &ast::Expr) -> Option<&str> {
    match &e.kind {
        AK::Name(id) => Some(&id.name),
        _ => None,
    }
}

fn stmt_diverges(s: &Stmt) -> bool {
    match s {
        Stmt::Return(..) => true,
        Stmt::Expr(e) => e.ty == Ty::Never,
        _ => false,
    }
}

impl Ctx<'_> {
    fn error<T>(&mut self, d: Diagnostic) -> R<T> {
        self.errors.push(d);
        Err(Reported)
    }

    // ---- scopes ----

    fn declare(&mut self, id: &Ident, ty: Ty, kind: LocalKind) -> LocalId {
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

    fn poison(&mut self, id: &Ident) {
        let l = self.declare(id, Ty::Unit, LocalKind::Let);
        self.poisoned.insert(l);
    }

    fn scoped<T>(&mut self, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        self.scopes.push(Vec::new());
        let r = f(self);
        for name in self.scopes.pop().unwrap_or_default() {
            if let Some(b) = self.bindings.get_mut(&name) {
                b.pop();
            }
        }
        r
    }

    fn find(&self, name: &str) -> Option<LocalId> {
        self.bindings.get(name).and_then(|b| b.last()).copied()
    }

    fn lookup(&mut self, id: &Ident) -> R<LocalId> {
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
            None if matches!(id.name.as_str(), "break" | "continue") => self.error(
                Diagnostic::new(
                    id.span,
                    format!("`{}` is not in the language yet", id.name),
                    "end the loop through its condition instead (a `while` with a flag), or return from the function",
                )
                .label("not supported yet"),
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

    /// An array local named by `id`.
    fn array(&mut self, id: &Ident) -> R<(LocalId, bool)> {
        let l = self.lookup(id)?;
        match self.locals[l].ty {
            Ty::Array { writable } => Ok((l, writable)),
            ref t => {
                let t = t.describe();
                self.error(
                    Diagnostic::new(
                        id.span,
                        format!("`{}` is not an array", id.name),
                        "only `[f64]` and `mut [f64]` values can be indexed",
                    )
                    .label(format!("this is {t}")),
                )
            }
        }
    }

    /// An argument that must be an array, written as its name.
    fn array_arg(&mut self, e: &ast::Expr, what: &str) -> R<(LocalId, bool)> {
        if let AK::Name(id) = &e.kind {
            let l = self.lookup(id)?;
            if let Ty::Array { writable } = self.locals[l].ty {
                return Ok((l, writable));
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

    fn array_name(&self, l: LocalId) -> &str {
        &self.locals[l].name
    }

    // ---- values and conversions ----

    /// Rejects expressions that are not a single scalar.
    fn require_value(&mut self, x: Expr, span: Span) -> R<Expr> {
        let (msg, help) = match &x.ty {
            Ty::F64 | Ty::I64 | Ty::Bool => return Ok(x),
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

    fn value(&mut self, e: &ast::Expr) -> R<Expr> {
        let x = self.expr(e)?;
        self.require_value(x, e.span)
    }

    /// Converts `x` to `want`: only an i64 literal expression converts
    /// (to f64).
    fn coerce(&mut self, x: Expr, want: Type, span: Span, what: &str) -> R<Expr> {
        if x.ty.ir_scalar() == Some(want) {
            return Ok(x);
        }
        if want == Type::F64 && x.ty == Ty::I64 && x.literal {
            return Ok(literal_to_f64(x));
        }
        let found = x.ty.describe();
        let help = match (want, &x.ty) {
            (Type::F64, Ty::I64) => "convert it with `f64(...)`",
            (Type::I64, Ty::F64) => {
                "there is no conversion from f64 to i64; compute this value with i64 operations"
            }
            (Type::Bool, _) => "compare explicitly, e.g. `x != 0.0`",
            (_, Ty::Bool) => "a bool is not a number; use `if c { 1.0 } else { 0.0 }`",
            _ => "use a value of the expected type",
        };
        self.error(
            Diagnostic::new(
                span,
                format!("mismatched types: {what} must be {want}, found {found}"),
                help,
            )
            .label(format!("expected {want}, found {found}")),
        )
    }

    fn expect(&mut self, e: &ast::Expr, want: Type, what: &str) -> R<Expr> {
        let x = self.value(e)?;
        self.coerce(x, want, e.span, what)
    }

    // ---- blocks and statements ----

    /// Checks a block in a new scope. With `want`, the tail is the result of
    /// the function (tuples allowed, converted to the result types).
    fn block(&mut self, b: &ast::Block, want: Option<&[Type]>) -> R<Block> {
        self.scoped(|cx| cx.block_inner(b, want))
    }

    fn block_inner(&mut self, b: &ast::Block, want: Option<&[Type]>) -> R<Block> {
        let mut stmts = Vec::new();
        let mut diverges = false;
        let mut failed = false;
        let dead = |cx: &mut Self, span: Span| {
            cx.errors.push(
                Diagnostic::new(
                    span,
                    "unreachable code after `return`",
                    "remove this code, or move it before the `return`",
                )
                .label("never runs"),
            );
        };
        for s in &b.stmts {
            if diverges && !failed {
                dead(self, s.span);
                failed = true;
            }
            match self.stmt(s) {
                Ok(t) => {
                    diverges |= stmt_diverges(&t);
                    stmts.push(t);
                }
                Err(Reported) => failed = true,
            }
        }
        let mut tail = None;
        if let Some(e) = &b.tail {
            if diverges && !failed {
                dead(self, e.span);
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
            StmtKind::Let(name, value) => {
                if let AK::Call(f, args) = &value.kind {
                    if f.name == "zeros" {
                        return match self.zeros_len(f, args, value.span) {
                            Ok(n) => {
                                let l = self.declare(
                                    name,
                                    Ty::Array { writable: true },
                                    LocalKind::Zeros,
                                );
                                Ok(Stmt::Zeros(l, n, value.span))
                            }
                            Err(r) => {
                                self.poison(name);
                                Err(r)
                            }
                        };
                    }
                }
                let x = self.expr(value).and_then(|x| {
                    if let Ty::Array { .. } = x.ty {
                        return self.error(
                            Diagnostic::new(
                                value.span,
                                "arrays can only be bound with `let t = zeros(n);`",
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
            StmtKind::Var(name, value) => {
                let x = match &value.kind {
                    AK::Call(f, _) if f.name == "zeros" => self.error(
                        Diagnostic::new(
                            value.span,
                            "`var` cannot hold an array",
                            "write `let t = zeros(n);`: the elements of a `zeros` array are writable",
                        )
                        .label("array initializer"),
                    ),
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
            StmtKind::LetTuple(names, value) => {
                let r = self.let_tuple(names, value);
                if r.is_err() {
                    for n in names {
                        self.poison(n);
                    }
                }
                r
            }
            StmtKind::Assign(name, value) => self.assign(name, value),
            StmtKind::Store(name, index, value) => {
                let a = self.array(name);
                let i = self.expect(index, Type::I64, "an array index");
                let v = self.expect(
                    value,
                    Type::F64,
                    &format!("a value stored into `{}`", name.name),
                );
                let ((a, writable), i, v) = (a?, i?, v?);
                if !writable {
                    return self.error(self.read_only(name, a));
                }
                Ok(Stmt::Store(a, i, v, s.span))
            }
            StmtKind::Expr(e) => Ok(Stmt::Expr(self.expr(e)?)),
            StmtKind::Return(value) => self.return_stmt(value.as_ref(), s.span),
            StmtKind::For(var, lo, hi, body) => {
                let lo = self.expect(lo, Type::I64, "the start of a `for` range");
                let hi = self.expect(hi, Type::I64, "the end of a `for` range");
                let r = self.scoped(|cx| {
                    let i = cx.declare(var, Ty::I64, LocalKind::LoopIndex);
                    Ok((i, cx.block(body, None)?))
                });
                let (lo, hi, (i, body)) = (lo?, hi?, r?);
                Ok(Stmt::For(i, lo, hi, body, s.span))
            }
            StmtKind::While(cond, body) => {
                let c = self.expect(cond, Type::Bool, "the condition of `while`");
                let body = self.block(body, None);
                Ok(Stmt::While(c?, body?, s.span))
            }
        }
    }

    /// The diagnostic for a block in result position that can end without
    /// a value (`misses_value`): the function body (`branch` false) or a
    /// branch of an `if` in result position.
    fn missing_value(
        &self,
        typed: &Block,
        block: &ast::Block,
        results: &[Type],
        branch: bool,
    ) -> Diagnostic {
        let end = Span::new(block.span.end.saturating_sub(1), block.span.end);
        let want = Ty::results(results).describe();
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

    fn read_only(&self, name: &Ident, a: LocalId) -> Diagnostic {
        Diagnostic::new(
            name.span,
            format!("cannot write to `{}`: it is a read-only array", name.name),
            format!("declare the parameter `{}: mut [f64]`", name.name),
        )
        .label("read-only `[f64]`")
        .secondary(self.local_spans[a], "declared here")
    }

    fn zeros_len(&mut self, f: &Ident, args: &[ast::Expr], span: Span) -> R<Expr> {
        self.arity(f, args, 1, span, "zeros(n: i64)")?;
        self.expect(&args[0], Type::I64, "the length of `zeros`")
    }

    fn let_tuple(&mut self, names: &[Ident], value: &ast::Expr) -> R<Stmt> {
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
        let x = self.expr(value)?;
        match &x.ty {
            Ty::Tuple(tys) if tys.len() == names.len() => {
                let tys = tys.clone();
                let ls = names
                    .iter()
                    .zip(tys)
                    .map(|(n, t)| self.declare(n, Ty::scalar(t), LocalKind::Let))
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
                    "`let (..) = ...` needs a tuple",
                    "bind a single value with `let x = ...;`",
                )
                .label(format!("this is {}", t.describe()));
                self.error(d)
            }
        }
    }

    fn assign(&mut self, name: &Ident, value: &ast::Expr) -> R<Stmt> {
        let l = self.lookup(name)?;
        let n = &name.name;
        let (msg, help) = match self.locals[l].kind {
            LocalKind::Var => {
                let want = self.locals[l].ty.ir_scalar().unwrap_or(Type::F64);
                let v = self.expect(value, want, &format!("the value assigned to `{n}`"))?;
                return Ok(Stmt::Assign(l, v));
            }
            _ if matches!(self.locals[l].ty, Ty::Array { .. }) => (
                format!("cannot assign to the array `{n}`"),
                format!("write its elements (`{n}[i] = v;`) or use `fill({n}, v);`"),
            ),
            LocalKind::Let => (
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
        let d = Diagnostic::new(name.span, msg, help)
            .label("assigned here")
            .secondary(self.local_spans[l], "declared here");
        self.error(d)
    }

    fn return_stmt(&mut self, value: Option<&ast::Expr>, span: Span) -> R<Stmt> {
        match value {
            None if self.results.is_empty() => Ok(Stmt::Return(None, span)),
            None => {
                let d = Diagnostic::new(
                    span,
                    format!(
                        "`return` needs a value: {} returns {}",
                        self.what,
                        Ty::results(&self.results).describe()
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
    fn result_value(&mut self, e: &ast::Expr, results: &[Type]) -> R<Expr> {
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
                        format!("return a tuple of type {}", Ty::results(results).describe()),
                    )
                    .label("wrong number of values");
                    return self.error(d);
                }
                let xs: Vec<R<Expr>> = elems
                    .iter()
                    .zip(results)
                    .enumerate()
                    .map(|(i, (el, &t))| self.expect(el, t, &format!("result {}", i + 1)))
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
                        let x = self.require_value(x, e.span)?;
                        let what = format!("the result of {}", self.what);
                        self.coerce(x, *t, e.span, &what)
                    }
                    _ if x.ty == Ty::Tuple(results.to_vec()) => Ok(x),
                    _ => {
                        let want = Ty::results(results).describe();
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

    // ---- expressions ----

    fn expr(&mut self, e: &ast::Expr) -> R<Expr> {
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
                let ((a, _), i) = (a?, i?);
                let a = expr(ExprKind::Local(a), self.locals[a].ty.clone());
                Ok(expr(
                    ExprKind::Binary(Opcode::Load, Box::new(a), Box::new(i)),
                    Ty::F64,
                ))
            }
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
        let ty = a.ty.clone();
        if op.is_comparison() {
            let opc = match ty {
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
            return Ok(expr(
                ExprKind::Cmp(opc, cond, Box::new(a), Box::new(b)),
                Ty::Bool,
            ));
        }
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

    fn if_expr(
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
        let ty = match (&t.ty, &e.ty) {
            (Ty::Array { .. }, _) | (_, Ty::Array { .. }) => {
                return self.error(
                    Diagnostic::new(
                        span,
                        "an `if` cannot produce an array",
                        "index or pass the arrays inside the branches instead",
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

    fn arity(&mut self, f: &Ident, args: &[ast::Expr], n: usize, span: Span, sig: &str) -> R<()> {
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

    fn call(&mut self, name: &Ident, args: &[ast::Expr], span: Span) -> R<Expr> {
        let n = name.name.as_str();
        match n {
            "autodiff" => return self.autodiff(args, span),
            "len" => {
                self.arity(name, args, 1, span, "len(a: [f64]) -> i64")?;
                let (a, _) = self.array_arg(&args[0], "`len`")?;
                let a = expr(ExprKind::Local(a), self.locals[a].ty.clone());
                return Ok(expr(ExprKind::Unary(Opcode::Len, Box::new(a)), Ty::I64));
            }
            "fill" => {
                self.arity(name, args, 2, span, "fill(a: mut [f64], v: f64)")?;
                let a = self.array_arg(&args[0], "`fill`");
                let v = self.expect(&args[1], Type::F64, "the value of `fill`");
                let ((a, writable), v) = (a?, v?);
                if !writable {
                    let AK::Name(id) = &args[0].kind else {
                        return Err(Reported);
                    };
                    return self.error(self.read_only(id, a));
                }
                let a = expr(ExprKind::Local(a), self.locals[a].ty.clone());
                return Ok(expr(ExprKind::Fill(Box::new(a), Box::new(v)), Ty::Unit));
            }
            "zeros" => {
                return self.error(
                    Diagnostic::new(
                        span,
                        "`zeros` can only initialize a `let`",
                        "write `let t = zeros(n);` and use `t`",
                    )
                    .label("`zeros` in an expression"),
                )
            }
            "f64" => {
                self.arity(name, args, 1, span, "f64(i: i64) -> f64")?;
                let x = self.value(&args[0])?;
                let (msg, help) = match x.ty {
                    Ty::I64 => {
                        return Ok(expr(ExprKind::Unary(Opcode::Sitof, Box::new(x)), Ty::F64))
                    }
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
                return self.error(Diagnostic::new(args[0].span, msg, help).label(label));
            }
            _ => {}
        }
        if let Some(op) = Opcode::intrinsic(n) {
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
            return Ok(expr(kind, Ty::F64));
        }
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
        let mut arrays: Vec<(LocalId, usize, Span)> = Vec::new();
        let mut failed = false;
        for (i, (a, p)) in args.iter().zip(&info.params).enumerate() {
            let x = if p.ty == Type::Array {
                self.array_arg(a, &format!("parameter `{}` of `{n}`", p.name))
                    .and_then(|(l, writable)| {
                        if p.mutable && !writable {
                            return self.error(self.needs_writable(a, l, n, p));
                        }
                        arrays.push((l, i, a.span));
                        Ok(expr(ExprKind::Local(l), self.locals[l].ty.clone()))
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
        let written: Vec<(LocalId, bool, String, Span)> = arrays
            .iter()
            .map(|&(l, i, s)| {
                (
                    l,
                    info.params[i].mutable,
                    format!("`{}`", info.params[i].name),
                    s,
                )
            })
            .collect();
        self.check_aliasing(&written, n)?;
        Ok(expr(
            ExprKind::Call(info.index, xs),
            Ty::results(&info.results),
        ))
    }

    fn needs_writable(&self, arg: &ast::Expr, l: LocalId, f: &str, p: &Param) -> Diagnostic {
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

    /// The same array may not be passed twice to one call when either use may
    /// write it. `uses`: (array, written?, parameter description, span).
    fn check_aliasing(&mut self, uses: &[(LocalId, bool, String, Span)], f: &str) -> R<()> {
        for (j, (lj, wj, pj, sj)) in uses.iter().enumerate() {
            if let Some((_, _, pi, si)) = uses[..j]
                .iter()
                .find(|(li, wi, _, _)| li == lj && (*wi || *wj))
            {
                let a = self.array_name(*lj).to_string();
                let d = Diagnostic::new(
                    *sj,
                    format!("`{a}` is used as both {pi} and {pj} in this call to `{f}`, and one of them is written"),
                    "a written array must not alias another argument; pass a different array (copy it into a `zeros` array)",
                )
                .label("second use")
                .secondary(*si, "first use");
                return self.error(d);
            }
        }
        Ok(())
    }

    fn autodiff(&mut self, args: &[ast::Expr], span: Span) -> R<Expr> {
        const SHAPE: &str =
            "write `autodiff(MODE, FUNC, RET, ARGS..)`, e.g. `autodiff(reverse, f, active, active(x))`";
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
        let mode = match word(&args[0]) {
            Some("forward") => Mode::Forward,
            Some("reverse") => Mode::Reverse,
            _ => {
                return self.error(
                    Diagnostic::new(
                        args[0].span,
                        "the mode of `autodiff` must be `forward` or `reverse`",
                        SHAPE,
                    )
                    .label("unknown mode"),
                )
            }
        };
        let g = self.g;
        let Some((fname, info)) = word(&args[1]).and_then(|w| g.fns.get_key_value(w)) else {
            let help = match word(&args[1]) {
                Some(w) if is_builtin(w) => format!(
                    "`{w}` is built in; wrap it in a function: `fn my_{w}(x: f64) -> f64 {{ {w}(x) }}`"
                ),
                _ => "name a function defined with `fn` in this file".to_string(),
            };
            return self.error(
                Diagnostic::new(
                    args[1].span,
                    "the second argument of `autodiff` must name a function of this file",
                    help,
                )
                .label("not a function of this file"),
            );
        };
        let ret = match (mode, word(&args[2])) {
            (Mode::Forward, Some("dual")) => RetActivity::Dual,
            (Mode::Reverse, Some("active")) => RetActivity::Active,
            (_, Some("const")) => RetActivity::Const,
            _ => {
                let help = match mode {
                    Mode::Forward => "in forward mode use `dual` (returns primal and tangent) or `const` (returns nothing)",
                    Mode::Reverse => "in reverse mode use `active` (seeds the result's cotangent with 1.0) or `const`",
                };
                return self.error(
                    Diagnostic::new(
                        args[2].span,
                        format!("invalid return activity for {mode} mode"),
                        help,
                    )
                    .label("expected a return activity"),
                );
            }
        };
        let res = &info.results;
        let res_desc = Ty::results(res).describe();
        let bad_ret = match ret {
            RetActivity::Dual if res.is_empty() || res.iter().any(|t| *t != Type::F64) => Some(
                format!("`dual` needs results that are all f64, but `{fname}` returns {res_desc}"),
            ),
            RetActivity::Active if res.as_slice() != [Type::F64] => Some(format!(
                "`active` needs exactly one f64 result, but `{fname}` returns {res_desc}"
            )),
            _ => None,
        };
        if let Some(msg) = bad_ret {
            return self.error(
                Diagnostic::new(args[2].span, msg, "use `const` for this result")
                    .label("invalid return activity"),
            );
        }
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
            match self.activity_arg(mode, fname, a, p, &mut arrays) {
                Ok((act, xs)) => {
                    spec_args.push(act);
                    values.extend(xs);
                }
                Err(Reported) => failed = true,
            }
        }
        if failed {
            return Err(Reported);
        }
        self.check_aliasing(&arrays, &format!("autodiff({mode}, {fname}, ..)"))?;
        let tys: Vec<Type> = match (mode, ret) {
            (Mode::Forward, RetActivity::Dual) => res.iter().chain(res).copied().collect(),
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
        };
        Ok(expr(
            ExprKind::Autodiff(Box::new(req), values),
            Ty::results(&tys),
        ))
    }

    /// One activity argument of `autodiff` for parameter `p` of `f`.
    fn activity_arg(
        &mut self,
        mode: Mode,
        f: &str,
        a: &ast::Expr,
        p: &Param,
        arrays: &mut Vec<(LocalId, bool, String, Span)>,
    ) -> R<(ArgActivity, Vec<Expr>)> {
        let forms = match (p.ty, mode) {
            (Type::F64, Mode::Forward) => "`const(e)` or `dual(x, tx)`",
            (Type::F64, Mode::Reverse) => "`const(e)` or `active(x)`",
            (Type::Array, _) => "`const(a)` or `dup(a, da)`",
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
                    ("dual", Type::F64) => "`dual` is for forward mode".to_string(),
                    ("active", Type::F64) => "`active` is for reverse mode".to_string(),
                    ("dup", _) => "`dup` is for array parameters".to_string(),
                    _ => format!("`{kind}` is for f64 parameters; arrays take `dup(a, da)`"),
                };
                return self.error(Diagnostic::new(a.span, msg, help).label(label));
            }
        };
        if inner.len() != act.arity() {
            let form = match act {
                ArgActivity::Const => "const(e)",
                ArgActivity::Dual => "dual(x, tx)",
                ArgActivity::Active => "active(x)",
                ArgActivity::Dup => "dup(a, da)",
            };
            let n = act.arity();
            return self.error(
                Diagnostic::new(
                    a.span,
                    format!(
                        "`{kind}` takes {n} argument{}",
                        if n == 1 { "" } else { "s" }
                    ),
                    format!("write `{form}`"),
                )
                .label(format!("{} given", inner.len())),
            );
        }
        let mut xs = Vec::new();
        if p.ty == Type::Array {
            for (k, e) in inner.iter().enumerate() {
                let shadow = k == 1;
                let what = if shadow {
                    format!("the shadow of `{}`", p.name)
                } else {
                    format!("parameter `{}` of `{f}`", p.name)
                };
                let (l, writable) = self.array_arg(e, &what)?;
                let written = p.mutable || (shadow && mode == Mode::Reverse);
                if written && !writable {
                    let d = if shadow {
                        let why = match mode {
                            Mode::Reverse => "reverse mode accumulates the adjoint into it",
                            Mode::Forward => {
                                "the parameter is `mut`, so its tangent is updated too"
                            }
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
                    } else {
                        self.needs_writable(e, l, f, p)
                    };
                    return self.error(d);
                }
                let role = if shadow {
                    format!("the shadow of `{}`", p.name)
                } else {
                    format!("`{}`", p.name)
                };
                arrays.push((l, written, role, e.span));
                xs.push(expr(ExprKind::Local(l), self.locals[l].ty.clone()));
            }
        } else {
            for e in inner {
                let what = format!("the argument `{}` of `{f}`", p.name);
                xs.push(self.expect(e, p.ty, &what)?);
            }
        }
        Ok((act, xs))
    }
}
