//! Shared helpers: the compiler's (from adze-test-support), the snapshot
//! check, argument generation from signatures, and the before/after
//! comparison of runs.

use adze_interp::Interpreter;
use adze_ir::{FuncId, InstData, Module, Outcome, RunError, TrapKind, Type, Val};
pub use adze_test_support::adze::{
    compile, compile_named, parse, well_formed as check_well_formed,
};

/// Parses `text`, runs `pass` on every function, checks that the result
/// verifies and computes the same bits (or the same error) as before on
/// every input, and returns the transformed module's text.
pub fn transform_and_compare(
    text: &str,
    name: &str,
    inputs: &[Vec<Val>],
    mut pass: impl FnMut(&mut adze_ir::Function),
) -> String {
    let before = parse(text);
    let mut after = before.clone();
    let ids: Vec<_> = after.iter().map(|(id, _)| id).collect();
    for id in ids {
        pass(after.func_mut(id));
    }
    if let Err(e) = adze_ir::verify::verify_module(&after) {
        panic!("{e}\n{after}");
    }
    for args in inputs {
        let a = Interpreter::new(&before).call_by_name(name, args);
        let b = Interpreter::new(&after).call_by_name(name, args);
        match (&a, &b) {
            (Ok(p), Ok(q)) => assert!(p.bit_eq(q), "{args:?}: {p:?} vs {q:?}\n{after}"),
            (Err(p), Err(q)) => assert!(same_error(p, q), "{args:?}: {p:?} vs {q:?}\n{after}"),
            _ => panic!("{args:?}: {a:?} vs {b:?}\n{after}"),
        }
    }
    after.to_string()
}

/// Compares `actual` with `tests/expected/<name>` (`ADZE_BLESS=1`
/// rewrites it).
#[track_caller]
pub fn snapshot(name: &str, actual: &str) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/expected");
    adze_test_support::expect_file(std::path::Path::new(dir).join(name), actual);
}

/// Does `root` reach an `autodiff` request through calls, requests or rules?
pub fn reaches_autodiff(module: &Module, root: FuncId) -> bool {
    module.reachable_from(root).into_iter().any(|id| {
        let f = module.func(id);
        f.layout
            .insts()
            .any(|(_, i)| matches!(f.dfg.inst(i), InstData::Autodiff { .. }))
    })
}

/// A few argument lists for `func`'s signature, varied in sign, size and
/// array length (the empty array included, so that bounds errors occur).
pub fn inputs(module: &Module, func: FuncId) -> Vec<Vec<Val>> {
    let sig = &module.func(func).sig;
    let floats = [
        [0.5, -1.25, 2.0, 3.0],
        [-0.7, 3.5, 0.0, 1.5],
        [2.0, 0.1, -3.0, 0.25],
        [1.0, 1.0, 1.0, 1.0],
    ];
    // Loop-heavy examples (Collatz) need a positive first integer; a zero in
    // second place gives division-by-zero errors.
    let ints = [[3, 2, 5, 1], [7, 0, 1, 2], [5, 3, 3, -4], [1, 1, 2, 7]];
    let arrays: [&[f64]; 4] = [
        &[0.3, -1.2, 2.5, 4.0],
        &[1.0, 2.0, 3.0],
        &[],
        &[-2.0, 0.5, 1.5, 3.0, -0.25, 6.0],
    ];
    (0..4)
        .map(|k| {
            sig.params
                .iter()
                .enumerate()
                .map(|(i, p)| match p.ty {
                    Type::F64 | Type::F64x2 => Val::F64(floats[k][i % 4]),
                    Type::I64 => Val::I64(ints[k][i % 4]),
                    Type::Bool => Val::Bool((k + i) % 2 == 0),
                    Type::Array => Val::Array(arrays[(k + i / 2) % 4].to_vec()),
                    Type::IArray => Val::IArray(vec![0, (k % 2) as i64]),
                })
                .collect()
        })
        .collect()
}

/// Do two errors agree, up to what inlining legitimately changes? Inlining
/// moves the faulting instruction into the caller, so `RunError::func` names
/// the caller and an array operand may be named by the caller (its
/// parameter or `zeros` name) instead of the callee's parameter: both names
/// are ignored; everything else (the kind, index, length, limit) must match.
pub fn same_error(a: &RunError, b: &RunError) -> bool {
    match (&a.kind, &b.kind) {
        (
            TrapKind::IndexOutOfBounds { index, len, .. },
            TrapKind::IndexOutOfBounds {
                index: i2, len: l2, ..
            },
        ) => index == i2 && len == l2,
        (TrapKind::ShadowLengthMismatch { .. }, TrapKind::ShadowLengthMismatch { .. }) => true,
        (x, y) => x == y,
    }
}

/// Runs `name` in both modules on `args` and checks that the outcomes agree
/// bit for bit (errors: see [`same_error`]). Inlining removes call frames, so
/// a run that exceeded the call depth before may complete (or fail
/// elsewhere) after; the converse would be a bug.
pub fn compare_runs(
    before: &Module,
    after: &Module,
    name: &str,
    args: &[Val],
) -> Result<(), String> {
    let a = Interpreter::new(before).call_by_name(name, args);
    let b = Interpreter::new(after).call_by_name(name, args);
    let depth = |r: &Result<Outcome, RunError>| {
        matches!(
            r,
            Err(RunError {
                kind: TrapKind::CallDepthExceeded { .. },
                ..
            })
        )
    };
    let same = match (&a, &b) {
        _ if depth(&a) => true,
        _ if depth(&b) => false,
        (Ok(p), Ok(q)) => p.bit_eq(q),
        (Err(p), Err(q)) => same_error(p, q),
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(format!(
            "@{name}({args:?}):\n  before inlining: {a:?}\n  after inlining:  {b:?}"
        ))
    }
}
