//! Every function of every program in `ir-examples/`: compiled, verified,
//! printed and parsed back, snapshotted, and run on the JIT and on the
//! interpreter with bit-identical results; `// run:` lines give exact values
//! worked out by hand.

use crate::support::{examples, inputs, load, reaches_autodiff, root, same_run};
use adze::args::parse_value;
use adze::Engine;
use adze_ir::{Opcode, Type, Val};
use std::collections::BTreeSet;

#[test]
fn there_are_at_least_ten_examples() {
    assert!(examples().len() >= 10, "{:?}", examples());
}

/// Opcodes that only passes emit (AD tapes, optimizer selects); the front end
/// never does, so no example can show them.
const PASS_ONLY: [Opcode; 6] = [
    Opcode::Select,
    Opcode::Push,
    Opcode::Pop,
    Opcode::SameLen,
    Opcode::Tobits,
    Opcode::Frombits,
];

#[test]
fn examples_together_use_every_opcode() {
    let mut seen = BTreeSet::new();
    for path in examples() {
        let session = load(&path);
        for (_, func) in session.module.iter() {
            for (_, inst) in func.layout.insts() {
                seen.insert(func.dfg.inst(inst).opcode());
            }
        }
    }
    let missing: Vec<&str> = Opcode::ALL
        .iter()
        .filter(|op| !seen.contains(op) && !PASS_ONLY.contains(op))
        .map(|op| op.name())
        .collect();
    assert!(missing.is_empty(), "no example uses: {missing:?}");
}

#[test]
fn printed_ir_parses_back_to_the_same_text() {
    for path in examples() {
        let session = load(&path);
        let printed = session.module.to_string();
        let reparsed = adze_ir::parse::parse_module(&printed)
            .unwrap_or_else(|e| panic!("{}: {e}\n{printed}", path.display()));
        assert_eq!(reparsed.to_string(), printed, "{}", path.display());
        adze_ir::verify::verify_module(&reparsed).unwrap();
    }
}

#[test]
fn ir_dumps_match_the_expected_files() {
    for path in examples() {
        let session = load(&path);
        let stem = path.file_stem().unwrap().to_str().unwrap();
        let expected = root().join("tests/expected").join(format!("{stem}.ir"));
        // The module names the file as it was opened (an absolute path
        // here); the expected file names it from the repository's root.
        let mut module = session.module.clone();
        module.source_file = Some(format!("ir-examples/{stem}.adz"));
        adze_test_support::expect_file(&expected, &module.to_string());
    }
}

#[test]
fn jit_equals_interpreter_on_every_function() {
    let mut ran = 0;
    for path in examples() {
        let session = load(&path);
        let module = &session.module;
        for (id, func) in module.iter() {
            if reaches_autodiff(module, id) {
                continue;
            }
            let tys: Vec<Type> = func.sig.param_types().collect();
            let compiled = adze_jit::compile(module, id, &adze_jit::JitOptions::default())
                .unwrap_or_else(|e| panic!("{}: {}: {e}", path.display(), func.name));
            let interp = adze_interp::Interpreter::new(module);
            for args in inputs(&tys, 4) {
                let a = interp.call(id, &args);
                let b = compiled.call(&args);
                let same = same_run(&a, &b);
                assert!(
                    same,
                    "{}: {}({args:?}):\n  interpreter: {a:?}\n  jit:         {b:?}",
                    path.display(),
                    func.name
                );
                ran += 1;
            }
        }
    }
    assert!(ran >= 200, "only {ran} runs");
}

/// A `// run: f(args) == expected` line.
pub(crate) struct RunLine {
    pub(crate) line: usize,
    pub(crate) func: String,
    pub(crate) args: Vec<String>,
    pub(crate) expected: Vec<String>,
}

/// Splits `a, [b, c], d` at top-level commas.
fn split_top(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in text.chars() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        parts.push(cur.trim().to_string());
    }
    parts
}

pub(crate) fn run_lines(source: &str) -> Vec<RunLine> {
    source
        .lines()
        .enumerate()
        .filter_map(|(i, l)| l.trim().strip_prefix("// run:").map(|r| (i + 1, r)))
        .map(|(line, rest)| {
            let (call, expected) = rest.split_once("==").expect("run line needs ==");
            let call = call.trim();
            let open = call.find('(').expect("run line needs a call");
            let func = call[..open].trim().to_string();
            let args = split_top(&call[open + 1..call.len() - 1]);
            let expected = expected.trim();
            let expected = match expected.strip_prefix('(') {
                Some(inner) => split_top(inner.strip_suffix(')').unwrap()),
                None => vec![expected.to_string()],
            };
            RunLine {
                line,
                func,
                args,
                expected,
            }
        })
        .collect()
}

#[test]
fn run_lines_hold_on_both_engines() {
    let mut checked = 0;
    for path in examples() {
        let source = std::fs::read_to_string(&path).unwrap();
        let session = load(&path);
        for run in run_lines(&source) {
            let id = session.function(&run.func).unwrap();
            let sig = &session.module.func(id).sig;
            let args: Vec<Val> = run
                .args
                .iter()
                .zip(&sig.params)
                .map(|(a, p)| parse_value(a, p.ty).unwrap())
                .collect();
            let expected: Vec<Val> = run
                .expected
                .iter()
                .zip(&sig.results)
                .map(|(e, ty)| parse_value(e, *ty).unwrap())
                .collect();
            for engine in [Engine::Interp, Engine::Jit] {
                let out = session
                    .run(&run.func, &args, engine)
                    .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), run.line));
                assert_eq!(
                    out.results,
                    expected,
                    "{}:{} ({engine:?})",
                    path.display(),
                    run.line
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 50, "only {checked} run lines");
}

/// The derivative IR of every example, held as expected files: for each
/// function with f64 results, its forward and its reverse derivative (every
/// f64 `dual`/`active`, every array `dup`) and every function the AD passes
/// created for it, as the AD passes leave them (before the optimizer).
#[test]
fn derivative_ir_of_the_examples_matches_the_expected_files() {
    for path in examples() {
        let session = load(&path);
        for (mode, ext) in [
            (adze_ir::Mode::Forward, "fwd"),
            (adze_ir::Mode::Reverse, "rev"),
        ] {
            let mut text = String::new();
            for (_, func) in session.module.iter() {
                let differentiable = func
                    .sig
                    .param_types()
                    .any(|t| t == Type::F64 || t == Type::Array);
                if !differentiable || !func.sig.results.iter().all(|&t| t == Type::F64) {
                    continue;
                }
                let base = session.prepare(&func.name).unwrap();
                let (module, _) = session
                    .derive_unoptimized(&func.name, mode, 1, &[])
                    .unwrap_or_else(|e| panic!("{}: {}: {e}", path.display(), func.name));
                for (id, f) in module.iter() {
                    if base.get(&f.name).is_none() {
                        text += &module.display_function(id).to_string();
                        text += "\n";
                    }
                }
            }
            let stem = path.file_stem().unwrap().to_str().unwrap();
            let file = root()
                .join("tests/expected")
                .join(format!("{stem}.{ext}.ir"));
            adze_test_support::expect_file(&file, &text);
        }
    }
}
