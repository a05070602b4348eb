//! Rules: each is attached to the `fn` of the file it names, at most one
//! per mode, and must have exactly the signature its mode requires.

use super::items::{fmt_param_type, fmt_params, fmt_results, FnInfo, Sig};
use crate::ast::{self, FuncKind};
use crate::diagnostic::Diagnostic;
use adze_ir::{Mode, Param, Type};
use indexmap::IndexMap;

/// Per function name, the items of its rules: `[forward, reverse]` (see
/// [`mode_slot`]).
pub(super) type RuleSlots = IndexMap<String, [Option<usize>; 2]>;

pub(super) fn mode_slot(mode: Mode) -> usize {
    match mode {
        Mode::Forward => 0,
        Mode::Reverse => 1,
    }
}

/// Attaches each rule to its function; a rule without a function, a second
/// rule of a mode, or a rule of the wrong signature is an error and is not
/// attached.
pub(super) fn attach(
    file: &ast::File,
    fns: &IndexMap<String, FnInfo>,
    sigs: &[Sig],
    errors: &mut Vec<Diagnostic>,
) -> RuleSlots {
    let mut rules: RuleSlots = IndexMap::new();
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
    rules
}

/// The signature a rule of `mode` must have for a function with these
/// parameters and results (see `docs/language.md`, "Custom rules").
pub fn expected_rule_signature(
    mode: Mode,
    params: &[Param],
    results: &[Type],
) -> (Vec<Param>, Vec<Type>) {
    // The results with a tangent and a cotangent: f64 and f64 arrays.
    let diff: Vec<Type> = results
        .iter()
        .copied()
        .filter(|t| matches!(t, Type::F64 | Type::Array))
        .collect();
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
            rs.extend_from_slice(&diff);
        }
        Mode::Reverse => {
            for p in params {
                ps.push(p.clone());
                if p.ty == Type::Array {
                    ps.push(Param::mutable_array(format!("d{}", p.name)));
                }
            }
            for (k, &t) in diff.iter().enumerate() {
                let name = if diff.len() == 1 {
                    "dret".to_string()
                } else {
                    format!("dret{k}")
                };
                ps.push(Param::new(name, t));
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

fn check_rule_signature(
    item: &ast::FuncDecl,
    mode: Mode,
    f: &FnInfo,
    (params, results): &Sig,
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
