//! IR built by hand: a function is declared by its header as the text
//! format writes it (`@f(x: f64, a: mut arr) -> (f64, i64)`, see
//! `adze_ir::write`) and given its body through a `FuncBuilder`; and the
//! shapes the hand-built tests share (a counted loop, a one-result call, an
//! `if` between a base case and a recursive one). Behind the `ir` feature.

use adze_ir::{CmpCond, FuncBuilder, FuncId, Module, Type, Value};

/// Declares the function of `header` (`@name(params) -> results`) with no
/// body yet, so that bodies can call it, itself included.
#[track_caller]
pub fn declare(m: &mut Module, header: &str) -> FuncId {
    let text = format!("function {header} {{\n}}\n");
    match adze_ir::parse::parse_into(m, &text) {
        Ok(ids) => ids[0],
        Err(e) => panic!("`{header}`: {e}"),
    }
}

/// Gives the declared function `id` its body: `body` gets the builder,
/// positioned in the entry block, and the parameter values.
pub fn define(m: &mut Module, id: FuncId, body: impl FnOnce(&mut FuncBuilder, &[Value])) {
    let mut fb = FuncBuilder::new(m.func_mut(id));
    let entry = fb.create_entry_block();
    fb.switch_to_block(entry);
    let params = fb.func.params().to_vec();
    body(&mut fb, &params);
}

/// Declares and defines the function of `header`.
#[track_caller]
pub fn func(m: &mut Module, header: &str, body: impl FnOnce(&mut FuncBuilder, &[Value])) -> FuncId {
    let id = declare(m, header);
    define(m, id, body);
    id
}

/// Calls `id` with `args` and returns its single result, of type `ty`.
pub fn call1(fb: &mut FuncBuilder, id: FuncId, args: &[Value], ty: Type) -> Value {
    let call = fb.call(id, args, &[ty]);
    fb.func.dfg.first_result(call)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_as_the_text_writes_them() {
        let mut m = Module::new();
        let f = declare(&mut m, "@f(x: f64, a: mut arr, n: i64) -> (f64, bool)");
        let g = func(&mut m, "@g()", |fb, _| {
            fb.ret(&[]);
        });
        assert!(m.func(f).is_declaration() && !m.func(g).is_declaration());
        let text = m.to_string();
        assert!(text.contains("function @f(x: f64, a: mut arr, n: i64) -> (f64, bool) {"));
        assert!(text.contains("function @g() {"), "{text}");
    }
}
