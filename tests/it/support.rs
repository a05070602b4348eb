//! Shared helpers: example discovery, input generation, expected files.

use adze::Session;
use adze_ir::{FuncId, Module, Outcome, RunError, Type, Val};
use std::path::{Path, PathBuf};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.adz` file in `ir-examples/`, sorted.
pub fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("ir-examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "adz"))
        .collect();
    files.sort();
    files
}

pub fn load(path: &Path) -> Session {
    Session::from_file(path).unwrap_or_else(|e| {
        let rendered = match &e {
            adze::Error::Diagnostics(d) => d.render(),
            other => other.to_string(),
        };
        panic!("{} does not compile:\n{rendered}", path.display())
    })
}

/// Does `id` reach an `autodiff` request (which needs the AD passes)?
pub fn reaches_autodiff(module: &Module, id: FuncId) -> bool {
    module.reachable_from(id).into_iter().any(|f| {
        let func = module.func(f);
        func.layout
            .insts()
            .any(|(_, i)| func.dfg.inst(i).opcode() == adze_ir::Opcode::Autodiff)
    })
}

const F64S: [f64; 6] = [0.5, -1.25, 2.0, 0.1, 3.7, -0.0];
const I64S: [i64; 5] = [1, 2, 3, 5, 4];

fn arrays() -> [Vec<f64>; 4] {
    [
        vec![0.5, -1.0, 2.0, 1.5],
        vec![1.0, 2.0, 3.0],
        vec![-0.3, 0.7, 1.1, -2.0, 0.9],
        vec![2.0],
    ]
}

/// Deterministic argument lists for a signature: `count` different ones.
/// Integers stay small and positive so that every example terminates.
pub fn inputs(params: &[Type], count: usize) -> Vec<Vec<Val>> {
    (0..count)
        .map(|k| {
            params
                .iter()
                .enumerate()
                .map(|(i, ty)| match ty {
                    Type::F64 => Val::F64(F64S[(k + i) % F64S.len()]),
                    Type::I64 => Val::I64(I64S[(k + 2 * i) % I64S.len()]),
                    Type::Bool => Val::Bool((k + i) % 2 == 0),
                    Type::Array => Val::Array(arrays()[(k + i) % 4].clone()),
                })
                .collect()
        })
        .collect()
}

/// Whether two runs of the same call agree: both return bit-identical
/// outcomes, or both fail with the same error.
pub fn same_run(a: &Result<Outcome, RunError>, b: &Result<Outcome, RunError>) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => x.bit_eq(y),
        (Err(x), Err(y)) => x == y,
        _ => false,
    }
}
