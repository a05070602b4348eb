//! Helpers to build small modules and run them.

use adze_interp::Interpreter;
use adze_ir::verify::verify_function;
use adze_ir::{
    CmpCond, FuncBuilder, FuncId, Function, Limits, Module, Outcome, Param, RunError, Signature,
    Type, Val, Value,
};

pub fn f(name: &str) -> Param {
    Param::new(name, Type::F64)
}

pub fn i(name: &str) -> Param {
    Param::new(name, Type::I64)
}

pub fn b(name: &str) -> Param {
    Param::new(name, Type::Bool)
}

pub fn arr(name: &str) -> Param {
    Param::new(name, Type::Array)
}

pub fn marr(name: &str) -> Param {
    Param::mutable_array(name)
}

/// Declares a function (no body yet), so that bodies can call it, itself
/// included.
pub fn declare(m: &mut Module, name: &str, params: Vec<Param>, results: &[Type]) -> FuncId {
    let sig = Signature {
        params,
        results: results.to_vec(),
    };
    m.declare(name, sig).unwrap()
}

/// Gives the declared function `id` a body. `body` starts in the entry
/// block and gets the parameter values.
pub fn define(m: &mut Module, id: FuncId, body: impl FnOnce(&mut FuncBuilder, &[Value])) {
    let old = m.func(id);
    let mut func = Function::new(old.name.clone(), old.sig.clone());
    let mut fb = FuncBuilder::new(&mut func);
    let entry = fb.create_entry_block();
    fb.switch_to_block(entry);
    let params = fb.func.params().to_vec();
    body(&mut fb, &params);
    m.replace(id, func);
}

/// Declares and defines a function.
pub fn func(
    m: &mut Module,
    name: &str,
    params: Vec<Param>,
    results: &[Type],
    body: impl FnOnce(&mut FuncBuilder, &[Value]),
) -> FuncId {
    let id = declare(m, name, params, results);
    define(m, id, body);
    id
}

/// Emits `for i in lo..hi { carried = body(i, carried) }` the way a front
/// end lowers it, and leaves the builder in the exit block; returns the final
/// carried values.
pub fn counted_loop(
    fb: &mut FuncBuilder,
    lo: Value,
    hi: Value,
    carried: &[Value],
    body: impl FnOnce(&mut FuncBuilder, Value, &[Value]) -> Vec<Value>,
) -> Vec<Value> {
    let tys: Vec<Type> = carried.iter().map(|&v| fb.func.dfg.value_type(v)).collect();
    let header = fb.create_block();
    let body_block = fb.create_block();
    let exit = fb.create_block();
    let mut header_args = vec![lo];
    header_args.extend_from_slice(carried);
    fb.jump(header, &header_args);

    fb.switch_to_block(header);
    let iv = fb.append_block_param(header, Type::I64);
    let cs: Vec<Value> = tys
        .iter()
        .map(|&t| fb.append_block_param(header, t))
        .collect();
    let cond = fb.icmp(CmpCond::Lt, iv, hi);
    fb.brif(cond, body_block, &[], exit, &cs);

    fb.switch_to_block(body_block);
    let next = body(fb, iv, &cs);
    let one = fb.iconst(1);
    let inext = fb.iadd(iv, one);
    let mut back = vec![inext];
    back.extend(next);
    fb.jump(header, &back);

    fb.switch_to_block(exit);
    tys.iter()
        .map(|&t| fb.append_block_param(exit, t))
        .collect()
}

/// Asserts that `id` and every function it reaches pass the verifier: the
/// tests run verifier-clean IR unless they say otherwise.
#[track_caller]
pub fn assert_verified(m: &Module, id: FuncId) {
    if !m.is_valid(id) {
        return;
    }
    for f in m.reachable_from(id) {
        if let Err(e) = verify_function(m, f) {
            panic!("{e}");
        }
    }
}

#[track_caller]
pub fn run(m: &Module, id: FuncId, args: &[Val]) -> Outcome {
    assert_verified(m, id);
    match Interpreter::new(m).call(id, args) {
        Ok(out) => out,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[track_caller]
pub fn run_err(m: &Module, id: FuncId, args: &[Val]) -> RunError {
    assert_verified(m, id);
    run_err_unverified(m, id, args)
}

/// [`run_err`] for IR the verifier rejects.
pub fn run_err_unverified(m: &Module, id: FuncId, args: &[Val]) -> RunError {
    match Interpreter::new(m).call(id, args) {
        Ok(out) => panic!("expected an error, got {out:?}"),
        Err(e) => e,
    }
}

/// The results of a successful run.
pub fn results(m: &Module, id: FuncId, args: &[Val]) -> Vec<Val> {
    run(m, id, args).results
}

/// The single f64 result of a successful run.
pub fn run_f64(m: &Module, id: FuncId, args: &[Val]) -> f64 {
    match results(m, id, args).as_slice() {
        [Val::F64(x)] => *x,
        other => panic!("expected one f64, got {other:?}"),
    }
}

/// The single i64 result of a successful run.
pub fn run_i64(m: &Module, id: FuncId, args: &[Val]) -> i64 {
    match results(m, id, args).as_slice() {
        [Val::I64(x)] => *x,
        other => panic!("expected one i64, got {other:?}"),
    }
}

/// The single bool result of a successful run.
pub fn run_bool(m: &Module, id: FuncId, args: &[Val]) -> bool {
    match results(m, id, args).as_slice() {
        [Val::Bool(x)] => *x,
        other => panic!("expected one bool, got {other:?}"),
    }
}

/// Bitwise f64 equality (NaN equals NaN), with a readable failure.
#[track_caller]
pub fn assert_bits(got: f64, want: f64) {
    assert!(
        Val::F64(got).bit_eq(&Val::F64(want)),
        "got {got:?}, want {want:?}"
    );
}

/// Calls `id` with `args` and returns its single result, of type `ty`.
pub fn call1(fb: &mut FuncBuilder, id: FuncId, args: &[Value], ty: Type) -> Value {
    let call = fb.call(id, args, &[ty]);
    fb.func.dfg.first_result(call)
}

/// Defines the declared one-parameter function `id` as
/// `if n <cond> k { base(n, k) } else { rec(n) }`, the shape of the
/// recursive tests; `base` and `rec` return the value to return.
pub fn define_split(
    m: &mut Module,
    id: FuncId,
    (cond, k): (CmpCond, i64),
    base: impl FnOnce(&mut FuncBuilder, Value, Value) -> Value,
    rec: impl FnOnce(&mut FuncBuilder, Value) -> Value,
) {
    define(m, id, |fb, p| {
        let base_block = fb.create_block();
        let rec_block = fb.create_block();
        let kv = fb.iconst(k);
        let c = fb.icmp(cond, p[0], kv);
        fb.brif(c, base_block, &[], rec_block, &[]);
        fb.switch_to_block(base_block);
        let r = base(fb, p[0], kv);
        fb.ret(&[r]);
        fb.switch_to_block(rec_block);
        let r = rec(fb, p[0]);
        fb.ret(&[r]);
    });
}

/// The default limits with a call depth limit of `max_call_depth`.
pub fn depth_limit(max_call_depth: u32) -> Limits {
    Limits {
        max_call_depth,
        ..Limits::default()
    }
}
