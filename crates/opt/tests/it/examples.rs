//! Every function of every program in `ir-examples/`: inlined with a budget
//! so large that everything non-recursive inlines, the module verifies,
//! round-trips through the text format, and each function that does not
//! reach an `autodiff` request runs bit-identically before and after, on
//! generated inputs and on the arguments of the file's `// run:` lines.

use crate::support::*;
use adze_ir::{Module, Val};
use adze_opt::{inline_module, DefaultPolicy};
use adze_test_support::adze::run_args;
use adze_test_support::examples::{example_files, run_lines};

fn examples() -> Vec<(String, String)> {
    example_files()
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// The calls of the `// run: f(args) == value` lines, with arguments typed
/// by the function's signature.
fn run_calls(module: &Module, src: &str) -> Vec<(String, Vec<Val>)> {
    run_lines(src)
        .into_iter()
        .map(|(line, run)| {
            let params = &module.func(module.get(run.func).unwrap()).sig.params;
            let vals = run_args(&run, params).unwrap_or_else(|e| panic!("line {line}: {e}"));
            (run.func.to_string(), vals)
        })
        .collect()
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
        let runs = run_calls(&before, &src);
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
