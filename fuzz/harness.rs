//! The two properties that the fuzz targets (`fuzz/fuzz_targets/*.rs`) and
//! the proptest smoke run (`tests/it/robustness.rs`) check, written once.
//!
//! - [`frontend`]: any bytes compile to a module or to diagnostics; the
//!   diagnostics render; nothing panics.
//! - [`pipeline`]: any bytes that compile lower through the AD passes as the
//!   `adze` facade does, and every function that is certain to stop quickly
//!   (see [`bounded_cost`]) gives the same outcome on the JIT and on the
//!   interpreter: equal results bit for bit ([`Outcome::bit_eq`]), or equal
//!   run-time errors. An internal error (a verifier failure after a pass, a
//!   Cranelift rejection, a tape mismatch) is a bug and panics.
//!
//! Bounding the run. Neither executor has a step budget, so a generated
//! `while true {}` would hang a fuzzer. A function runs only if, in the module
//! after AD lowering, every function it reaches has an acyclic control-flow
//! graph, the call graph below it is acyclic, and the number of instructions
//! it can execute (calls expanded, `zeros`/`fill` counted at the array length
//! limit) is at most [`MAX_COST`]. Loops and recursion are exercised by the
//! property tests of `tests/it/generated.rs` and `tests/it/examples.rs`
//! instead, and by the run-time fault tests. Limits are lowered
//! ([`LIMITS`]) so that allocations stay small.

// Shared by two crates; each uses all of it, but not every item in each
// configuration.
#![allow(dead_code)]

use adze::{Engine, Error, Session};
use adze_ir::{FuncId, InstData, Limits, Module, Opcode, RunError, TrapKind, Val};
use std::collections::HashMap;

/// Limits for fuzzed runs: shallow calls, small arrays.
pub const LIMITS: Limits = Limits {
    max_call_depth: 64,
    max_array_len: 1 << 12,
    timeout: None,
    tape_limit: adze_ir::DEFAULT_TAPE_LIMIT,
    checkpoint_segment: None,
};

/// Upper bound on the instructions a fuzzed function may execute.
pub const MAX_COST: u64 = 200_000;

/// What [`pipeline`] did, for statistics in tests.
#[derive(Debug, Default, Clone, Copy)]
pub struct Report {
    /// The input compiled.
    pub compiled: bool,
    /// Functions run on both engines and compared.
    pub compared: usize,
    /// Of those, runs that ended in an (identical) run-time error.
    pub faulted: usize,
    /// Functions skipped: unbounded, or the AD passes declined them.
    pub skipped: usize,
}

/// Property 1: the front end returns `Ok` or `Err` on any bytes, and its
/// diagnostics render. Panics are the failures.
pub fn frontend(bytes: &[u8]) -> bool {
    match adze_lang::compile_bytes("fuzz.adz", bytes) {
        Ok(module) => {
            // The printed IR of a lowered program must print without panicking.
            let _ = module.to_string();
            true
        }
        Err(d) => {
            let summary = d.summary();
            assert!(!summary.is_empty(), "empty diagnostic summary");
            let _ = d.render();
            false
        }
    }
}

/// Fixed arguments for a signature: small, so that loop-free code is cheap.
pub fn arguments(params: &[adze_ir::Type], variant: usize) -> Vec<Val> {
    use adze_ir::Type;
    const F: [f64; 4] = [0.5, -1.25, 2.0, 0.0];
    const I: [i64; 4] = [2, 0, -1, 3];
    const A: [&[f64]; 3] = [&[0.5, -1.0, 2.0], &[1.5], &[]];
    params
        .iter()
        .enumerate()
        .map(|(i, ty)| match ty {
            // No parameter is an f64x2 (the verifier's rule).
            Type::F64 | Type::F64x2 => Val::F64(F[(variant + i) % F.len()]),
            Type::I64 => Val::I64(I[(variant + i) % I.len()]),
            Type::Bool => Val::Bool((variant + i).is_multiple_of(2)),
            // Different lengths for neighbouring arrays exercise the shadow
            // length checks too.
            Type::Array => Val::Array(A[(variant + i / 2) % A.len()].to_vec()),
            Type::IArray => Val::IArray(vec![0, 1, 0]),
        })
        .collect()
}

/// Property 2: see the module documentation. Returns what was compared.
pub fn pipeline(bytes: &[u8]) -> Report {
    let mut report = Report::default();
    let module = match adze_lang::compile_bytes("fuzz.adz", bytes) {
        Ok(m) => m,
        Err(d) => {
            let _ = d.render();
            return report;
        }
    };
    report.compiled = true;
    let mut session = match Session::from_module(module) {
        Ok(s) => s,
        Err(e) => panic!("a compiled program does not verify: {e}"),
    };
    session.limits = LIMITS;
    let names: Vec<String> = session.module.iter().map(|(_, f)| f.name.clone()).collect();
    for name in names {
        let prepared = match session.prepare(&name) {
            Ok(m) => m,
            Err(Error::Ad(e)) => {
                let text = e.to_string();
                assert!(
                    !text.contains("internal error"),
                    "AD lowering of `{name}` failed internally: {text}"
                );
                report.skipped += 1;
                continue;
            }
            Err(e) => panic!("preparing `{name}` failed: {e}"),
        };
        let Some(id) = prepared.get(&name) else {
            panic!("`{name}` disappeared from the prepared module");
        };
        if bounded_cost(&prepared, id).is_none() {
            report.skipped += 1;
            continue;
        }
        let params: Vec<_> = prepared.func(id).sig.param_types().collect();
        for variant in 0..2 {
            let args = arguments(&params, variant);
            let interp = session.run_in(&prepared, &name, &args, Engine::Interp);
            let jit = session.run_in(&prepared, &name, &args, Engine::Jit);
            report.compared += 1;
            match (&interp, &jit) {
                (Ok(a), Ok(b)) => assert!(
                    a.bit_eq(b),
                    "`{name}` on {args:?}: interpreter {a:?}, JIT {b:?}"
                ),
                (Err(Error::Run(a)), Err(Error::Run(b))) => {
                    assert_eq!(a, b, "`{name}` on {args:?}: the engines fault differently");
                    assert_not_internal(a);
                    report.faulted += 1;
                }
                _ => panic!(
                    "`{name}` on {args:?}: interpreter {}, JIT {}",
                    describe(&interp),
                    describe(&jit)
                ),
            }
        }
    }
    report
}

fn describe(r: &Result<adze_ir::Outcome, Error>) -> String {
    match r {
        Ok(o) => format!("{o:?}"),
        Err(e) => format!("error {e:?}"),
    }
}

fn assert_not_internal(e: &RunError) {
    match &e.kind {
        TrapKind::TapeMismatch | TrapKind::Unsupported(_) | TrapKind::BadArguments(_) => {
            panic!("internal run-time error: {e}")
        }
        _ => {}
    }
}

/// An upper bound on the instructions that a call of `root` executes, if the
/// code it reaches has no loop, no recursion and no `autodiff` left; `None`
/// otherwise or above [`MAX_COST`].
pub fn bounded_cost(module: &Module, root: FuncId) -> Option<u64> {
    let mut memo: HashMap<FuncId, Option<u64>> = HashMap::new();
    let cost = cost_of(module, root, &mut memo, 0)?;
    (cost <= MAX_COST).then_some(cost)
}

fn cost_of(
    module: &Module,
    id: FuncId,
    memo: &mut HashMap<FuncId, Option<u64>>,
    depth: usize,
) -> Option<u64> {
    if let Some(c) = memo.get(&id) {
        // `None` while in progress: a call cycle.
        return *c;
    }
    if depth > 256 || !module.is_valid(id) {
        return None;
    }
    memo.insert(id, None);
    let func = module.func(id);
    if func.is_declaration() || has_cycle(func) {
        return None;
    }
    let mut total: u64 = 0;
    for (_, inst) in func.layout.insts() {
        let step = match func.dfg.inst(inst) {
            InstData::Call { func: callee, .. } => cost_of(module, *callee, memo, depth + 1)?,
            InstData::Autodiff { .. } => return None,
            data if matches!(data.opcode(), Opcode::Zeros | Opcode::Fill) => {
                LIMITS.max_array_len as u64
            }
            _ => 0,
        };
        total = total.saturating_add(1).saturating_add(step);
        if total > MAX_COST {
            return None;
        }
    }
    memo.insert(id, Some(total));
    Some(total)
}

/// Does the control-flow graph of `func` have a cycle (a loop)?
fn has_cycle(func: &adze_ir::Function) -> bool {
    let Some(entry) = func.layout.entry_block() else {
        return false;
    };
    // Iterative DFS with colours: 1 = on the stack, 2 = done.
    let mut colour: HashMap<adze_ir::Block, u8> = HashMap::new();
    let succs = |b: adze_ir::Block| -> Vec<adze_ir::Block> {
        func.layout
            .block_insts(b)
            .iter()
            .flat_map(|&i| {
                func.dfg
                    .inst(i)
                    .destinations()
                    .into_iter()
                    .map(|d| d.block)
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let mut stack = vec![(entry, succs(entry), 0usize)];
    colour.insert(entry, 1);
    while let Some((block, next, pos)) = stack.last_mut() {
        if let Some(&s) = next.get(*pos) {
            *pos += 1;
            match colour.get(&s) {
                Some(1) => return true,
                Some(_) => {}
                None => {
                    colour.insert(s, 1);
                    let n = succs(s);
                    stack.push((s, n, 0));
                }
            }
        } else {
            colour.insert(*block, 2);
            stack.pop();
        }
    }
    false
}
