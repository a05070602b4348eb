//! Integration tests of the JIT: IR built with `adze_ir::FuncBuilder`, run
//! compiled (at both optimisation levels), checked against hand-computed
//! values and, bit for bit, against the reference interpreter.

mod arith;
mod arrays;
mod control;
mod intrinsics;
mod spill;
mod tape;
mod timing;
mod traps;

use adze_interp::Interpreter;
use adze_ir::{FuncBuilder, FuncId, Limits, Module, Outcome, RunError, Type, Val, Value};
use adze_jit::{compile, Compiled, JitOptions, OptLevel};
use adze_test_support::ir;

/// A module under construction.
#[derive(Default)]
pub struct Mb {
    pub m: Module,
}

impl Mb {
    pub fn new() -> Mb {
        Mb::default()
    }

    /// Declares the function of `header` (body added later with
    /// [`Mb::define`]); see [`adze_test_support::ir::declare`].
    #[track_caller]
    pub fn declare(&mut self, header: &str) -> FuncId {
        ir::declare(&mut self.m, header)
    }

    /// Gives a declared function its body: `body` gets the builder, already
    /// positioned in the entry block, and the parameter values.
    pub fn define(&mut self, id: FuncId, body: impl FnOnce(&mut FuncBuilder<'_>, &[Value])) {
        ir::define(&mut self.m, id, body)
    }

    /// Declares and defines the function of `header`.
    #[track_caller]
    pub fn func(
        &mut self,
        header: &str,
        body: impl FnOnce(&mut FuncBuilder<'_>, &[Value]),
    ) -> FuncId {
        ir::func(&mut self.m, header, body)
    }
}

pub fn options(opt_level: OptLevel, limits: Limits) -> JitOptions {
    JitOptions {
        limits,
        opt_level,
        verify: true,
        ..JitOptions::default()
    }
}

/// Asserts that the test IR passes the IR verifier.
pub fn verified(m: &Module) {
    if let Err(e) = adze_ir::verify::verify_module(m) {
        panic!("test IR fails the verifier:\n{}\n{m}", e.listing());
    }
}

/// `text` parsed as IR, which must pass the verifier.
pub fn module(text: &str) -> Module {
    let m = adze_ir::parse::parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    verified(&m);
    m
}

/// The text of the IR file `tests/data/<path>`.
pub fn data_text(path: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The IR file `tests/data/<path>`, parsed and verified.
pub fn data(path: &str) -> Module {
    module(&data_text(path))
}

/// Compiles with the default options (verifier on).
pub fn jit(m: &Module, id: FuncId) -> Compiled {
    verified(m);
    compile(m, id, &options(OptLevel::None, Limits::default())).expect("compiles")
}

/// Runs `id` compiled at every optimisation level (through `call` and
/// `call_mut`) and interpreted, asserts that all agree (bit for bit, or on
/// the same error) and returns the JIT's answer.
pub fn run_limits(
    m: &Module,
    id: FuncId,
    args: &[Val],
    limits: Limits,
) -> Result<Outcome, RunError> {
    verified(m);
    let want = Interpreter::with_limits(m, limits).call(id, args);
    let mut last = None;
    for opt in [OptLevel::None, OptLevel::Speed, OptLevel::Auto] {
        let c = compile(m, id, &options(opt, limits)).expect("compiles");
        let got = c.call(args);
        // The zero-copy path gives the same answer (and leaves in the
        // arrays what `call` reports in `Outcome.args`).
        let mut in_place = args.to_vec();
        let got_mut = c.call_mut(&mut in_place);
        match (&got, &got_mut) {
            (Ok(g), Ok(r)) => {
                let o = Outcome {
                    results: r.clone(),
                    args: in_place,
                };
                assert!(g.bit_eq(&o), "call and call_mut differ:\n {g:?}\n {o:?}");
            }
            (Err(g), Err(r)) => assert_eq!(g, r, "call and call_mut errors differ"),
            _ => panic!("call and call_mut disagree:\n {got:?}\n {got_mut:?}"),
        }
        match (&got, &want) {
            (Ok(g), Ok(w)) => assert!(
                g.bit_eq(w),
                "JIT ({opt:?}) and interpreter differ:\n jit:    {g:?}\n interp: {w:?}"
            ),
            (Err(g), Err(w)) => assert_eq!(g, w, "JIT ({opt:?}) and interpreter errors differ"),
            _ => panic!(
                "JIT ({opt:?}) and interpreter disagree:\n jit:    {got:?}\n interp: {want:?}"
            ),
        }
        last = Some(got);
    }
    last.expect("ran")
}

pub fn run(m: &Module, id: FuncId, args: &[Val]) -> Result<Outcome, RunError> {
    run_limits(m, id, args, Limits::default())
}

/// The single f64 result of a successful run.
pub fn run_f64(m: &Module, id: FuncId, args: &[Val]) -> f64 {
    match run(m, id, args).expect("runs").results.as_slice() {
        [Val::F64(x)] => *x,
        other => panic!("expected one f64, got {other:?}"),
    }
}

/// Bitwise f64 equality, all NaNs equal.
pub fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}
