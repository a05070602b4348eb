//! JIT compile time per `ir-examples/` program (every function of the file
//! that does not need the AD passes), with criterion. See
//! docs/performance.md for the numbers and the command.
//!
//! Each compile is `Session::jit` with the default `JitSettings`: the step
//! of the compile-once API (`adze::Program::compile`) that runs Cranelift,
//! without the module clone and adze's IR verifier that `Program::compile`
//! adds around it.

use adze_ir::{FuncId, Module, Opcode};
use criterion::{criterion_group, criterion_main, Criterion};

fn reaches_autodiff(module: &Module, id: FuncId) -> bool {
    module.reachable_from(id).into_iter().any(|f| {
        let func = module.func(f);
        func.layout
            .insts()
            .any(|(_, i)| func.dfg.inst(i).opcode() == Opcode::Autodiff)
    })
}

fn compile_time(c: &mut Criterion) {
    let mut group = c.benchmark_group("jit_compile");
    for path in adze_test_support::examples::example_files() {
        let session = adze::Session::from_file(&path).unwrap();
        let module = &session.module;
        let roots: Vec<FuncId> = module
            .ids()
            .filter(|&id| !reaches_autodiff(module, id))
            .collect();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        let insts: usize = roots
            .iter()
            .map(|&id| module.func(id).num_placed_insts())
            .sum();
        group.bench_function(
            format!("{name} ({} fns, {insts} insts)", roots.len()),
            |b| {
                b.iter(|| {
                    for &id in &roots {
                        let compiled = session.jit(module, id).unwrap();
                        std::hint::black_box(&compiled);
                    }
                })
            },
        );
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = compile_time
}
criterion_main!(benches);
