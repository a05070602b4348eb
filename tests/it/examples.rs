//! Every function of every program in `ir-examples/`: compiled, verified,
//! printed and parsed back, snapshotted, and run on the JIT and on the
//! interpreter with bit-identical results; `// run:` lines give exact values
//! worked out by hand, or `error: MESSAGE` for a run-time error that both
//! engines report alike.

use crate::support::{
    differentiable, examples, for_each_run_line, inputs, load, reaches_autodiff, root, OnBoth,
};
use adze::Engine;
use adze_ir::{Opcode, Type, Val};
use adze_test_support::adze::parse_val;
use std::collections::BTreeSet;

#[test]
fn there_are_at_least_ten_examples() {
    assert!(examples().len() >= 10, "{:?}", examples());
}

/// Opcodes that only passes emit (AD tapes, optimizer selects, two-lane
/// loops); the front end never does, so no example can show them.
const PASS_ONLY: [Opcode; 25] = [
    Opcode::View,
    Opcode::Select,
    Opcode::Push,
    Opcode::Pop,
    Opcode::Tapelen,
    Opcode::Tapecut,
    Opcode::Tapeover,
    Opcode::SameLen,
    Opcode::Tobits,
    Opcode::Frombits,
    Opcode::Vsplat,
    Opcode::Vpack,
    Opcode::Vshift,
    Opcode::Vlane0,
    Opcode::Vlane1,
    Opcode::Vfadd,
    Opcode::Vfsub,
    Opcode::Vfmul,
    Opcode::Vfdiv,
    Opcode::Vfneg,
    Opcode::Vpowi,
    Opcode::Vsqrt,
    Opcode::Vload,
    Opcode::Vstore,
    Opcode::Apart,
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
            let both = OnBoth::new(module, id, format!("{}: {}", path.display(), func.name));
            for args in inputs(&tys, 4) {
                let _ = both.call(&args);
                ran += 1;
            }
        }
    }
    assert!(ran >= 200, "only {ran} runs");
}

#[test]
fn run_lines_hold_on_both_engines() {
    let mut checked = 0;
    for_each_run_line(|session, at, run, args| {
        // `== error: MESSAGE`: both engines stop with the same error, whose
        // message contains MESSAGE.
        if let Some(msg) = run.expected.and_then(|e| e.strip_prefix("error: ")) {
            let [interp, jit] = [Engine::Interp, Engine::Jit].map(|engine| {
                match session.run(run.func, &args, engine) {
                    Ok(out) => panic!("{at} ({engine:?}): no error but {:?}", out.results),
                    Err(e) => e.to_string(),
                }
            });
            assert_eq!(interp, jit, "{at}: the engines report different errors");
            assert!(interp.contains(msg), "{at}: {interp}");
            checked += 1;
            return;
        }
        let sig = &session.module.func(session.function(run.func).unwrap()).sig;
        let expected: Vec<Val> = run
            .expected_results()
            .iter()
            .zip(&sig.results)
            .map(|(e, ty)| parse_val(e, *ty).unwrap_or_else(|e| panic!("{at}: {e}")))
            .collect();
        for engine in [Engine::Interp, Engine::Jit] {
            let out = session
                .run(run.func, &args, engine)
                .unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_eq!(out.results, expected, "{at} ({engine:?})");
        }
        checked += 1;
    });
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
                if !differentiable(&func.sig) {
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
