//! The items of the file: their signatures, the table of its functions
//! (what calls, `autodiff` requests and rules see of a `fn`), their order
//! in the module, and how signatures are written in messages.

use super::consts::Consts;
use super::is_builtin;
use super::rules::RuleSlots;
use crate::ast::{self, FuncKind, TypeKind};
use crate::diagnostic::{Diagnostic, Span};
use adze_ir::{Param, Type};
use indexmap::IndexMap;

/// The parameters and results of an item.
pub(super) type Sig = (Vec<Param>, Vec<Type>);

/// A `fn` of the file, as seen by calls and rules.
pub(super) struct FnInfo {
    pub(super) item: usize,
    pub(super) name_span: Span,
    pub(super) params: Vec<Param>,
    pub(super) results: Vec<Type>,
    /// Index in [`Program::funcs`](crate::typed::Program::funcs).
    pub(super) index: usize,
}

pub(super) struct Globals {
    pub(super) fns: IndexMap<String, FnInfo>,
    /// The constants, builtin and of the file (`consts`).
    pub(super) consts: Consts,
}

fn ir_type(t: TypeKind) -> Type {
    match t {
        TypeKind::F64 => Type::F64,
        TypeKind::I64 => Type::I64,
        TypeKind::Bool => Type::Bool,
        TypeKind::Array { elem, .. } => elem.array(),
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
            mutable: matches!(p.ty.kind, TypeKind::Array { mutable: true, .. }),
        });
    }
    let results = item
        .results
        .iter()
        .flat_map(|r| r.types.iter().map(|t| ir_type(t.kind)))
        .collect();
    (params, results)
}

/// The functions of the file, in source order, by name: a reserved or
/// repeated name is an error and has no entry. Their `index` is set by
/// [`module_order`].
pub(super) fn fn_table(
    file: &ast::File,
    sigs: &[Sig],
    errors: &mut Vec<Diagnostic>,
) -> IndexMap<String, FnInfo> {
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
    fns
}

/// Module order: each fn, then its forward rule, then its reverse rule.
/// Sets each function's `index`, and returns the position in the module of
/// each item of the file (`None`: the item is left out).
pub(super) fn module_order(
    file: &ast::File,
    fns: &mut IndexMap<String, FnInfo>,
    rules: &RuleSlots,
) -> Vec<Option<usize>> {
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
    position
}

/// `f64`, `mut [f64]`, ...
pub fn fmt_param_type(p: &Param) -> String {
    match (p.ty, p.mutable) {
        (Type::Array, true) => "mut [f64]".into(),
        (Type::Array, false) => "[f64]".into(),
        (Type::IArray, true) => "mut [i64]".into(),
        (Type::IArray, false) => "[i64]".into(),
        (t, _) => t.name().into(),
    }
}

pub(super) fn fmt_params(ps: &[Param]) -> String {
    let ps: Vec<_> = ps
        .iter()
        .map(|p| format!("{}: {}", p.name, fmt_param_type(p)))
        .collect();
    ps.join(", ")
}

/// A function's results as its signature writes them, for messages:
/// `f64`, `[f64]` (never `mut`: the caller owns an array result),
/// `(f64, [f64])`, `no value`.
pub(super) fn describe_results(rs: &[Type]) -> String {
    match rs {
        [t] => crate::typed::Ty::scalar(*t).describe(),
        _ => crate::typed::Ty::results(rs).describe(),
    }
}

pub(super) fn fmt_results(rs: &[Type]) -> String {
    match rs {
        [] => String::new(),
        [t] => format!(" -> {}", crate::typed::Ty::scalar(*t).describe()),
        _ => {
            let ts: Vec<_> = rs
                .iter()
                .map(|&t| crate::typed::Ty::scalar(t).describe())
                .collect();
            format!(" -> ({})", ts.join(", "))
        }
    }
}
