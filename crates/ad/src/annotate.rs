//! What the AD passes decided, as comments on the IR (`adze dump
//! --annotate activity,tape,rules`): Enzyme's `-enzyme-print-activity`,
//! JAX's `print_saved_residuals`, for adze's own IR.
//!
//! - **activity**: on a function that a derivative of the module is made
//!   from, each f64 or array value defined by an instruction or a block
//!   parameter is `active`, or `const` with the reason: no path from an
//!   active input (it does not vary), or no path to what is differentiated
//!   (reverse mode: it varies but is not useful). One line per derivative
//!   made from the function (the request's activities differ).
//! - **tape**: what the reverse pass recorded while it built a split pair
//!   ([`adze_ir::Function::notes`]): what each `push` saves, and what each
//!   reverse block pops and recomputes, by which recipe.
//! - **rules**: each `call` says what its callee is (a rule applied, the
//!   adjoint of a derivative, ..) and at which nesting level; each rule
//!   region the rules it carries.
//!
//! Notes are comments, so annotated text parses back to the same IR.

use crate::activity;
use adze_ir::{
    ArgActivity, FuncId, Function, InstData, Module, Notes, RetActivity, Step, Type, Value,
};

/// Which annotations `adze dump --annotate` adds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Annotate {
    /// Activity of each value of a differentiated function.
    pub activity: bool,
    /// The tape: saves, pops, recomputations.
    pub tape: bool,
    /// Rules applied and what each call is.
    pub rules: bool,
}

impl Annotate {
    /// Parses `activity,tape,rules` (any subset, in any order).
    pub fn parse(text: &str) -> Result<Annotate, String> {
        let mut a = Annotate::default();
        for word in text.split(',').map(str::trim) {
            match word {
                "activity" => a.activity = true,
                "tape" => a.tape = true,
                "rules" => a.rules = true,
                other => {
                    return Err(format!(
                        "`--annotate {text}`: unknown annotation `{other}` (expected activity, tape, rules)"
                    ))
                }
            }
        }
        Ok(a)
    }
}

/// The notes of function `id` of `module` for `what`.
pub fn notes(module: &Module, id: FuncId, what: Annotate) -> Notes {
    let func = module.func(id);
    let mut notes = Notes::default();
    if what.tape {
        notes.extend(&func.notes);
    }
    if what.rules {
        rule_notes(module, func, &mut notes);
    }
    if what.activity {
        activity_notes(module, id, &mut notes);
    }
    notes
}

/// How many derivatives deep `id` is: 0 for a user's function, 1 for a
/// derivative (or one half of a split pair) of one, and so on.
pub fn nesting_level(module: &Module, id: FuncId) -> usize {
    let mut level = 0;
    let mut cur = id;
    for _ in 0..module.len() {
        let Some(d) = module.derivation(cur) else {
            break;
        };
        if matches!(
            d.step,
            Step::Forward { .. }
                | Step::Reverse(_)
                | Step::Vjp(_)
                | Step::Augmented { .. }
                | Step::Adjoint { .. }
        ) {
            level += 1;
        }
        match d.from {
            Some(f) => cur = f,
            None => break,
        }
    }
    level
}

/// The function whose `mode` rule `id` is, if it is one.
fn rule_owner(module: &Module, id: FuncId) -> Option<(FuncId, adze_ir::Mode)> {
    module.iter().find_map(|(f, func)| {
        func.meta
            .rules
            .iter()
            .find(|&(_, r)| r == id)
            .map(|(mode, _)| (f, mode))
    })
}

fn rule_notes(module: &Module, func: &Function, notes: &mut Notes) {
    for (_, inst) in func.layout.insts() {
        let InstData::Call { func: callee, .. } = func.dfg.inst(inst) else {
            continue;
        };
        let callee = *callee;
        if !module.is_valid(callee) {
            continue;
        }
        let g = module.func(callee);
        let level = nesting_level(module, callee);
        let note = if let Some((owner, mode)) = rule_owner(module, callee) {
            format!(
                "rule: applies the {mode} rule of `{}` (level {level})",
                module.func(owner).name
            )
        } else if let Some(desc) = module.describe_function(callee) {
            let applied = match module.derivation(callee).map(|d| &d.step) {
                Some(Step::ApplyRule { .. }) => " (a reverse rule applied)",
                Some(Step::MadeRule { .. }) => {
                    " (no reverse rule: the body's derivative stands for it)"
                }
                _ => "",
            };
            format!("calls {desc}{applied} (level {level})")
        } else if g.meta.rules.is_empty() {
            format!("calls `{}`, which has no rules (level {level})", g.name)
        } else {
            format!(
                "calls `{}`, which has rules ({}) (level {level})",
                g.name,
                list_rules(module, &g.meta.rules)
            )
        };
        notes.inst(inst, note);
    }
    for (region, data) in func.regions.iter() {
        let Some(&first) = data.blocks.first() else {
            continue;
        };
        let callee = if module.is_valid(data.callee) {
            module.func(data.callee).name.clone()
        } else {
            data.callee.to_string()
        };
        let note = if data.rules.is_empty() {
            format!("{region}: inlined `{callee}` (no rules)")
        } else {
            format!(
                "{region}: inlined `{callee}`, whose rules ({}) every AD pass applies to it as to a call",
                list_rules(module, &data.rules)
            )
        };
        notes.block(first, note);
    }
}

/// `forward: @f.rule.forward, reverse: @r`, as the IR text lists rules.
fn list_rules(module: &Module, rules: &adze_ir::Rules) -> String {
    let rules: Vec<String> = rules
        .iter()
        .map(|(m, r)| {
            let name = if module.is_valid(r) {
                module.func(r).name.clone()
            } else {
                r.to_string()
            };
            format!("{m}: @{name}")
        })
        .collect();
    rules.join(", ")
}

/// The requests the module's derivatives of `id` were made for: (the
/// derivative's name, the mode's word, the activities, the return's).
fn requests(
    module: &Module,
    id: FuncId,
) -> Vec<(String, &'static str, Vec<ArgActivity>, RetActivity)> {
    let mut out: Vec<(String, &'static str, Vec<ArgActivity>, RetActivity)> = Vec::new();
    for (d, f) in module.iter() {
        let Some(der) = module.derivation(d) else {
            continue;
        };
        if der.from != Some(id) {
            continue;
        }
        let (mode, args, ret) = match &der.step {
            Step::Forward { args, ret, .. } => ("forward", args.clone(), *ret),
            Step::Reverse(spec) | Step::Vjp(spec) | Step::Augmented { spec, .. } => {
                ("reverse", spec.args.clone(), spec.ret)
            }
            _ => continue,
        };
        if !out
            .iter()
            .any(|(_, m, a, r)| *m == mode && *a == args && *r == ret)
        {
            out.push((f.name.clone(), mode, args, ret));
        }
    }
    out
}

fn activity_notes(module: &Module, id: FuncId, notes: &mut Notes) {
    let func = module.func(id);
    for (_, mode, args, ret) in requests(module, id) {
        // Varied: forward activity, `active` scalars as `dual`.
        let fwd: Vec<ArgActivity> = args
            .iter()
            .map(|a| match a {
                ArgActivity::Active => ArgActivity::Dual,
                other => *other,
            })
            .collect();
        let varied = activity::analyze(module, func, &fwd);
        let useful = if mode == "reverse" {
            let ret = if ret == RetActivity::Dup {
                RetActivity::Active
            } else {
                ret
            };
            crate::reverse::plan::useful_values(module, func, &args, ret, &[])
        } else {
            None
        };
        let say = |v: Value| -> Option<String> {
            if !matches!(func.dfg.value_type(v), Type::F64 | Type::Array) {
                return None;
            }
            let word = if !varied.is_active(v) {
                "const (no path from an active input)".to_string()
            } else if useful.as_ref().is_some_and(|u| !u.contains(v)) {
                "const (no path to what is differentiated)".to_string()
            } else {
                "active".to_string()
            };
            Some(format!("{v} {word}"))
        };
        let acts: Vec<String> = func
            .sig
            .params
            .iter()
            .zip(&args)
            .map(|(p, a)| format!("{} {}", p.name, a.name()))
            .collect();
        let tag = format!("activity ({mode}: {})", acts.join(", "));
        for &block in func.layout.blocks() {
            let params: Vec<String> = func
                .dfg
                .block_params(block)
                .iter()
                .filter_map(|&p| say(p))
                .collect();
            if !params.is_empty() {
                notes.block(block, format!("{tag}: {}", params.join(", ")));
            }
            for &inst in func.layout.block_insts(block) {
                let results: Vec<String> = func
                    .dfg
                    .inst_results(inst)
                    .iter()
                    .filter_map(|&r| say(r))
                    .collect();
                if !results.is_empty() {
                    notes.inst(inst, format!("{tag}: {}", results.join(", ")));
                }
            }
        }
    }
}
