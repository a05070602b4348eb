//! Every function of every program in `ir-examples/`: inlined with a budget
//! so large that everything non-recursive inlines, the module verifies,
//! round-trips through the text format, and each function that does not
//! reach an `autodiff` request runs bit-identically before and after, on
//! generated inputs and on the arguments of the file's `// run:` lines.

use crate::support::*;
use adze_ir::{Module, Type, Val};
use adze_opt::{inline_module, DefaultPolicy};
use std::path::PathBuf;

fn examples() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../ir-examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "adz"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// Splits `a, [b, c], d` at top-level commas.
fn split_args(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !s[start..].trim().is_empty() {
        out.push(s[start..].trim());
    }
    out
}

/// The calls of the `// run: f(args) == value` lines, with arguments typed
/// by the function's signature.
fn run_lines(module: &Module, src: &str) -> Vec<(String, Vec<Val>)> {
    let mut out = Vec::new();
    for line in src.lines() {
        let Some(rest) = line.trim().strip_prefix("// run:") else {
            continue;
        };
        let call = rest.split(" == ").next().unwrap().trim();
        let open = call.find('(').unwrap();
        let name = &call[..open];
        let id = module.get(name).unwrap();
        let params = &module.func(id).sig.params;
        let args = split_args(&call[open + 1..call.len() - 1]);
        assert_eq!(args.len(), params.len(), "{line}");
        let vals = args
            .iter()
            .zip(params)
            .map(|(a, p)| match p.ty {
                Type::F64 => Val::F64(a.parse().unwrap()),
                Type::I64 => Val::I64(a.parse().unwrap()),
                Type::Bool => Val::Bool(a.parse().unwrap()),
                Type::Array => Val::Array(
                    split_args(a.trim_start_matches('[').trim_end_matches(']'))
                        .iter()
                        .map(|x| x.parse().unwrap())
                        .collect(),
                ),
            })
            .collect();
        out.push((name.to_string(), vals));
    }
    out
}

#[test]
fn every_example_function_inlines_and_agrees() {
    let mut checked = 0;
    let mut inlined = 0;
    for (file, src) in examples() {
        let before = adze_lang::compile(&file, &src).unwrap_or_else(|e| panic!("{file}: {e:?}"));
        let mut after = before.clone();
        let stats = inline_module(&mut after, &DefaultPolicy { budget: usize::MAX });
        inlined += stats.inlined;
        check_well_formed(&after).unwrap_or_else(|e| panic!("{file}: {e}"));
        let runs = run_lines(&before, &src);
        for (id, f) in before.iter() {
            if f.is_declaration() || reaches_autodiff(&before, id) {
                continue;
            }
            let mut all = inputs(&before, id);
            all.extend(
                runs.iter()
                    .filter(|(n, _)| *n == f.name)
                    .map(|(_, a)| a.clone()),
            );
            for args in all {
                compare_runs(&before, &after, &f.name, &args)
                    .unwrap_or_else(|e| panic!("{file}: {e}"));
                checked += 1;
            }
        }
    }
    assert!(checked > 200, "only {checked} runs compared");
    // Bottom-up, each call site is inlined once, with its callee finished.
    assert!(inlined > 10, "only {inlined} calls inlined");
}

/// Every call the policy allows was inlined: only calls to recursive
/// functions and to `#[inline(never)]` ones remain.
#[test]
fn only_recursive_calls_remain() {
    for (file, src) in examples() {
        let mut module = adze_lang::compile(&file, &src).unwrap();
        inline_module(&mut module, &DefaultPolicy { budget: usize::MAX });
        for (_, f) in module.iter() {
            for (_, inst) in f.layout.insts() {
                if let adze_ir::InstData::Call { func, .. } = f.dfg.inst(inst) {
                    let callee = module.func(*func);
                    let recursive = reaches_by_calls(&module, *func, *func);
                    let never = callee.meta.inline == adze_ir::InlineHint::Never;
                    assert!(
                        recursive || never,
                        "{file}: @{} still calls non-recursive @{}",
                        f.name,
                        callee.name
                    );
                }
            }
        }
    }
}

/// Is there a path of one or more `call` edges from `from` to `to`?
fn reaches_by_calls(module: &Module, from: adze_ir::FuncId, to: adze_ir::FuncId) -> bool {
    let mut seen = vec![from];
    let mut stack = vec![from];
    while let Some(g) = stack.pop() {
        let f = module.func(g);
        for (_, i) in f.layout.insts() {
            if let adze_ir::InstData::Call { func, .. } = f.dfg.inst(i) {
                if *func == to {
                    return true;
                }
                if !seen.contains(func) {
                    seen.push(*func);
                    stack.push(*func);
                }
            }
        }
    }
    false
}
