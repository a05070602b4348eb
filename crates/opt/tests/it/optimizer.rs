//! The optimizer's passes on hand-written IR: each case runs some passes on
//! a small module, verifies and round-trips the result, runs every function
//! before and after on inputs chosen to expose inexact rewrites (signed
//! zeros, signaling and quiet NaNs, infinities, `i64::MIN`, empty and short
//! arrays) comparing results, final arrays and errors bit for bit, and
//! compares input, statistics and output with `tests/expected/opt_<case>.ir`
//! (`ADZE_BLESS=1` rewrites them). Assertions on top say what the case is
//! about.

use crate::support::{check_well_formed, compile, parse, snapshot};
use adze_interp::Interpreter;
use adze_ir::{FuncId, Module, Outcome, RunError, Type, Val};
use adze_opt::{optimize_module, run_pass, OptStats, Pass, PIPELINE};

/// A signaling NaN (quiet bit clear, payload 1) and a quiet NaN with a
/// payload: arithmetic quiets the first and keeps the second's payload.
const SNAN: u64 = 0x7ff0_0000_0000_0001;
const QNAN: u64 = 0x7ff8_0000_0000_0abc;

fn f64s() -> [f64; 8] {
    [
        -0.0,
        0.0,
        f64::from_bits(SNAN),
        f64::from_bits(QNAN),
        -f64::INFINITY,
        1.5,
        -2.25,
        3.0,
    ]
}

const I64S: [i64; 6] = [0, -1, i64::MIN, 3, 1, 2];

fn arrays() -> [Vec<f64>; 4] {
    [
        vec![],
        vec![1.0, -0.0],
        vec![0.5, f64::from_bits(SNAN), -3.0, 2.0],
        vec![2.0, 4.0, -1.0, 0.25, 8.0, -0.0],
    ]
}

/// Argument lists for `id`: the f64 parameters run through every pair of
/// special values (the first two; further ones follow the first), the
/// others through theirs, shifted against each other.
fn inputs(module: &Module, id: FuncId) -> Vec<Vec<Val>> {
    let params = &module.func(id).sig.params;
    (0..64)
        .map(|k| {
            params
                .iter()
                .enumerate()
                .map(|(i, p)| match p.ty {
                    Type::F64 => Val::F64(f64s()[(k >> (3 * (i % 2))) % 8]),
                    Type::I64 => Val::I64(I64S[(k + i) % I64S.len()]),
                    Type::Bool => Val::Bool((k + i) % 2 == 0),
                    Type::Array => Val::Array(arrays()[(k + i) % 4].clone()),
                })
                .collect()
        })
        .collect()
}

/// Exactly the same bits, NaN payloads and quiet bits included.
fn same_bits(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => x.to_bits() == y.to_bits(),
        (Val::Array(x), Val::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
        }
        _ => a == b,
    }
}

pub fn same_outcome(a: &Result<Outcome, RunError>, b: &Result<Outcome, RunError>) -> bool {
    match (a, b) {
        (Ok(p), Ok(q)) => {
            p.results.len() == q.results.len()
                && p.args.len() == q.args.len()
                && p.results
                    .iter()
                    .zip(&q.results)
                    .all(|(x, y)| same_bits(x, y))
                && p.args.iter().zip(&q.args).all(|(x, y)| same_bits(x, y))
        }
        (Err(p), Err(q)) => p == q,
        _ => false,
    }
}

/// Every function of `before` and `after` gives the same outcome on the
/// interpreter, bit for bit, errors included.
fn compare(before: &Module, after: &Module) {
    for (id, f) in before.iter() {
        if f.is_declaration() {
            continue;
        }
        for args in inputs(before, id) {
            let a = Interpreter::new(before).call(id, &args);
            let b = Interpreter::new(after).call(id, &args);
            assert!(
                same_outcome(&a, &b),
                "@{}({args:?}):\n  before: {a:?}\n  after:  {b:?}\n{after}",
                f.name
            );
        }
    }
}

/// Runs `passes` on every function of `text`, checks the result and
/// snapshots it as `opt_<name>.ir`.
fn case(name: &str, text: &str, passes: &[Pass]) -> Module {
    let before = parse(text);
    check_well_formed(&before).unwrap();
    let mut after = before.clone();
    let mut stats = OptStats::default();
    let ids: Vec<FuncId> = after.ids().collect();
    for &pass in passes {
        for &id in &ids {
            stats += run_pass(&mut after, id, pass).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    check_well_formed(&after).unwrap_or_else(|e| panic!("{e}\n{after}"));
    compare(&before, &after);
    let names: Vec<&str> = passes.iter().map(|p| p.name()).collect();
    snapshot(
        &format!("opt_{name}.ir"),
        &format!(
            "; input\n{before}\n; passes: {}\n{}\n{after}",
            names.join(", "),
            stats_lines(&stats)
        ),
    );
    after
}

/// The non-zero counts of `stats`, one pass per line.
fn stats_lines(s: &OptStats) -> String {
    let lines = [
        format!("; gvn: {:?}", s.gvn),
        format!("; mem: {:?}", s.mem),
        format!("; dce: {:?}", s.dce),
        format!("; licm: {:?}", s.licm),
        format!("; indvars: {:?}", s.indvars),
        format!("; loopdel: {:?}", s.loopdel),
    ];
    let zero = [
        format!("; gvn: {:?}", adze_opt::GvnStats::default()),
        format!("; mem: {:?}", adze_opt::MemStats::default()),
        format!("; dce: {:?}", adze_opt::DceStats::default()),
        format!("; licm: {:?}", adze_opt::LicmStats::default()),
        format!("; indvars: {:?}", adze_opt::IndvarsStats::default()),
        format!("; loopdel: {:?}", adze_opt::LoopDelStats::default()),
    ];
    lines
        .iter()
        .zip(&zero)
        .filter(|(l, z)| l != z)
        .map(|(l, _)| l.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The printed body of `name` in `module`.
fn body(module: &Module, name: &str) -> String {
    module
        .display_function(module.get(name).unwrap())
        .to_string()
}

fn count(text: &str, what: &str) -> usize {
    text.lines().filter(|l| l.contains(what)).count()
}

// ---------------------------------------------------------------- gvn

#[test]
fn gvn_folds_constants_and_merges_dominated_duplicates() {
    let after = case(
        "gvn_fold_merge",
        "function @f(x: f64, n: i64, c: bool) -> (f64, i64) {
block0(v0: f64, v1: i64, v2: bool):
    v3 = fconst 2.0
    v4 = fconst 3.0
    v5 = fmul v3, v4
    v6 = fadd v0, v5
    v7 = iconst 7
    v8 = iconst 5
    v9 = isub v7, v8
    v10 = imul v1, v9
    brif v2, block1, block2
block1:
    v11 = fconst 6.0
    v12 = fadd v0, v11
    v13 = sin v12
    v14 = imul v1, v9
    jump block3(v13, v14)
block2:
    v15 = fadd v0, v5
    v16 = sin v15
    v17 = sqrt v5
    v18 = fadd v16, v17
    jump block3(v18, v10)
block3(v19: f64, v20: i64):
    v21 = fadd v0, v5
    v22 = sin v21
    v23 = fadd v19, v22
    return v23, v20
}
",
        &[Pass::Gvn],
    );
    let f = body(&after, "f");
    // `2 * 3`, `7 - 5` and `sqrt 6` folded. The cheap duplicates of the
    // entry block's `fadd x, 6.0` and `imul` stay where they are (merged,
    // they would be live across the branches) but are numbered as the
    // entry's; the `sin`s of them are not dominated by one another (block3
    // is not dominated by block1 or block2), so each keeps its own.
    assert!(!f.contains("fmul"), "{f}");
    assert!(!f.contains("sqrt") && !f.contains("isub"), "{f}");
    assert_eq!(count(&f, "fadd v0,"), 4, "{f}");
    assert_eq!(count(&f, "sin "), 3, "{f}");
    assert_eq!(count(&f, "imul"), 2, "{f}");
}

/// `erf`, added through the opcode table only, is what its row says: pure
/// (an unused one goes), a `Libm` cost (a dominated duplicate in another
/// block is merged), folded with `semantics` (the same bits as at run time).
#[test]
fn erf_is_a_pure_libm_computation() {
    let after = case(
        "erf",
        "function @f(x: f64, c: bool) -> f64 {
block0(v0: f64, v1: bool):
    v2 = fconst 0.5
    v3 = erf v2
    v4 = erf v0
    v5 = erf v4
    brif v1, block1, block2(v4)
block1:
    v6 = erf v0
    v7 = fadd v6, v3
    jump block2(v7)
block2(v8: f64):
    return v8
}
",
        &[Pass::Gvn, Pass::Dce],
    );
    let f = body(&after, "f");
    assert_eq!(count(&f, "erf "), 1, "{f}");
    let folded = adze_ir::semantics::erf(0.5);
    assert_eq!(folded, 0.5204998778130465);
    assert!(f.contains(&format!("fconst {folded:?}")), "{f}");
}

#[test]
fn gvn_simplifies_only_exact_identities() {
    let after = case(
        "gvn_identities",
        "function @f(x: f64, y: f64) -> (f64, f64, f64, f64, f64, f64, f64, f64, f64, f64) {
block0(v0: f64, v1: f64):
    v2 = fconst 1.0
    v3 = fconst 0.0
    v4 = fconst -0.0
    v5 = fmul v0, v2
    v6 = fadd v0, v1
    v7 = fmul v6, v2
    v8 = fmul v2, v6
    v9 = fdiv v6, v2
    v10 = fadd v6, v4
    v11 = fadd v4, v6
    v12 = fsub v6, v3
    v13 = fadd v6, v3
    v14 = fsub v6, v4
    v15 = fmul v6, v3
    v16 = fneg v0
    v17 = fneg v16
    v18 = fadd v7, v8
    v19 = fadd v9, v10
    v20 = fadd v11, v12
    v21 = powi v0, 1
    v22 = powi v0, 0
    return v5, v13, v14, v15, v17, v18, v19, v20, v21, v22
}
",
        &[Pass::Gvn, Pass::Dce],
    );
    let f = body(&after, "f");
    // x * 1.0 stays for a parameter: x may be a signaling NaN, which the
    // multiplication quiets.
    assert!(f.contains("fmul v0, v2"), "{f}");
    // (x + y) * 1.0, 1.0 * (x + y), (x + y) / 1.0, + -0.0, -0.0 +, - 0.0:
    // all just x + y.
    assert!(f.contains("v18 = fadd v6, v6"), "{f}");
    // x + 0.0 (-0 + +0 = +0), x - -0.0 (the same) and x * 0.0 (NaN, inf,
    // -0) stay.
    assert!(
        f.contains("fadd v6, v3") && f.contains("fsub v6, v4"),
        "{f}"
    );
    assert!(f.contains("fmul v6, v3"), "{f}");
    // fneg (fneg x) is x (a sign flip, exact even for signaling NaNs), as
    // is powi x, 1; powi x, 0 is 1.0.
    assert!(!f.contains("fneg") && !f.contains("powi"), "{f}");
    assert!(
        f.contains("return v5, v13, v14, v15, v0, v18, v18, v18, v0, v2"),
        "{f}"
    );
}

#[test]
fn gvn_integer_and_boolean_identities() {
    let after = case(
        "gvn_int_identities",
        "function @f(i: i64, c: bool, x: f64, y: f64) -> (i64, i64, i64, i64, i64, i64, bool, bool, f64, f64) {
block0(v0: i64, v1: bool, v2: f64, v3: f64):
    v4 = iconst 0
    v5 = iconst 1
    v6 = iadd v0, v4
    v7 = imul v5, v0
    v8 = imul v0, v4
    v9 = isub v0, v0
    v10 = idiv v0, v5
    v11 = irem v0, v5
    v12 = ineg v0
    v13 = ineg v12
    v14 = not v1
    v15 = not v14
    v16 = icmp le v0, v0
    v17 = select v1, v2, v2
    v18 = bconst false
    v19 = select v18, v2, v3
    v20 = iadd v6, v7
    v21 = iadd v20, v13
    return v21, v8, v9, v10, v11, v13, v15, v16, v17, v19
}
",
        &[Pass::Gvn, Pass::Dce],
    );
    let f = body(&after, "f");
    assert!(
        f.contains("return v21, v4, v4, v0, v4, v0, v1, v16, v2, v3"),
        "{f}"
    );
    assert!(f.contains("v16 = bconst true"), "{f}");
    assert!(
        f.contains("v20 = iadd v0, v0") && f.contains("v21 = iadd v20, v0"),
        "{f}"
    );
    assert!(
        !f.contains("ineg") && !f.contains("not") && !f.contains("select"),
        "{f}"
    );
}

#[test]
fn gvn_never_folds_a_trap() {
    let after = case(
        "gvn_traps",
        "function @div0(i: i64) -> i64 {
block0(v0: i64):
    v1 = iconst 7
    v2 = iconst 0
    v3 = idiv v1, v2
    return v3
}

function @overflow(i: i64) -> i64 {
block0(v0: i64):
    v1 = iconst -9223372036854775808
    v2 = iconst -1
    v3 = idiv v1, v2
    v4 = irem v0, v2
    v5 = iadd v3, v4
    return v5
}

function @rem0(i: i64) -> i64 {
block0(v0: i64):
    v1 = iconst 0
    v2 = irem v0, v1
    v3 = iconst 9
    v4 = iconst -4
    v5 = irem v3, v4
    v6 = idiv v3, v4
    v7 = iadd v5, v6
    v8 = iadd v7, v2
    return v8
}
",
        &PIPELINE,
    );
    assert!(body(&after, "div0").contains("idiv v1, v2"));
    let o = body(&after, "overflow");
    assert!(
        o.contains("idiv v1, v2") && o.contains("irem v0, v2"),
        "{o}"
    );
    // 9 % -4 and 9 / -4 fold; x % 0 stays.
    let r = body(&after, "rem0");
    assert!(r.contains("irem v0, v1") && !r.contains("idiv"), "{r}");
}

#[test]
fn gvn_folds_branches_and_dce_removes_what_is_unreachable() {
    let after = case(
        "gvn_branches",
        "function @f(x: f64, c: bool) -> f64 {
block0(v0: f64, v1: bool):
    v2 = fconst 1.0
    v3 = fconst 2.0
    v4 = fcmp lt v2, v3
    brif v4, block1, block2
block1:
    v5 = not v1
    brif v5, block3(v0), block4
block2:
    v6 = sin v0
    jump block3(v6)
block4:
    v7 = fmul v0, v3
    jump block3(v7)
block3(v8: f64):
    brif v1, block5(v8), block5(v8)
block5(v9: f64):
    return v9
}
",
        &[Pass::Gvn, Pass::Dce],
    );
    let f = body(&after, "f");
    assert!(!f.contains("block2") && !f.contains("sin"), "{f}");
    assert!(f.contains("brif v1, block4, block3(v0)"), "{f}");
    // block5's parameter gets v8 on both edges: it is v8, and DCE removes it.
    assert!(
        f.contains("jump block5\n") && f.contains("return v8"),
        "{f}"
    );
}

/// DCE drops the blocks it removes from the provenance of inlined code;
/// the entries stay (numbered, parents refer to them), possibly empty.
#[test]
fn dce_prunes_removed_blocks_from_inlined_provenance() {
    let mut module = parse(
        "function @f(x: f64) -> f64 {
    inlined0: @g blocks(block1, block2, block3)
    inlined1: @h blocks(block2) parent(inlined0)
block0(v0: f64):
    jump block1
block1:
    v1 = sin v0
    jump block3(v1)
block2:
    v2 = cos v0
    jump block3(v2)
block3(v3: f64):
    return v3
}
",
    );
    let id = module.get("f").unwrap();
    let stats = adze_opt::dce(module.func_mut(id));
    assert_eq!(stats.blocks, 1);
    adze_ir::verify::verify_module(&module).unwrap_or_else(|e| panic!("{e}"));
    let text = module.display_function(id).to_string();
    assert!(
        text.contains(
            "    inlined0: @g blocks(block1, block3)\n    inlined1: @h blocks() parent(inlined0)\n"
        ),
        "{text}"
    );
}

// ---------------------------------------------------------------- mem

#[test]
fn mem_forwards_stores_and_loads_in_extended_blocks() {
    let after = case(
        "mem_forwarding",
        "function @f(a: mut arr, b: arr, i: i64, x: f64, c: bool) -> (f64, f64, f64, f64) {
block0(v0: arr, v1: arr, v2: i64, v3: f64, v4: bool):
    store v0, v2, v3
    v5 = load v0, v2
    v6 = load v1, v2
    v7 = load v1, v2
    v8 = iconst 1
    v9 = iadd v2, v8
    store v0, v9, v6
    v10 = load v0, v2
    brif v4, block1, block2
block1:
    v11 = load v0, v2
    v12 = load v0, v9
    jump block3(v11, v12)
block2:
    v19 = fadd v6, v6
    jump block3(v3, v19)
block3(v13: f64, v14: f64):
    v15 = load v0, v2
    v16 = fadd v13, v14
    v17 = fadd v16, v15
    v18 = fadd v5, v7
    return v17, v18, v10, v6
}
",
        &[Pass::Mem, Pass::Dce],
    );
    let f = body(&after, "f");
    // a[i] = x, so a[i] is x, also after a[i + 1] = .. (i + 1 is not i) and
    // in block1 (its only predecessor is block0), where a[i + 1] is known
    // too; b[i] twice is one load (a[i + 1] = .. does not write b[i] even if
    // b is a); block3, a join, loads a[i] again.
    assert_eq!(count(&f, "load v1"), 1, "{f}");
    assert_eq!(count(&f, "load v0"), 1, "{f}");
    assert!(f.contains("jump block3(v3, v6)"), "{f}");
    assert!(f.contains("v18 = fadd v3, v6"), "{f}");
    assert!(f.contains("return v17, v18, v3, v6"), "{f}");
}

#[test]
fn mem_respects_aliasing_and_calls() {
    let after = case(
        "mem_aliasing",
        r#"function @g(a: mut arr) {
block0(v0: arr):
    v1 = iconst 0
    v2 = fconst 5.0
    store v0, v1, v2
    return
}

function @h(a: arr) -> f64 {
block0(v0: arr):
    v1 = iconst 0
    v2 = load v0, v1
    return v2
}

function @f(a: mut arr, b: mut arr, x: f64) -> (f64, f64, f64, f64, f64, f64) {
block0(v0: arr, v1: arr, v2: f64):
    v3 = iconst 0
    v4 = iconst 2
    v5 = zeros v4, "t"
    store v0, v3, v2
    store v5, v3, v2
    v6 = load v0, v3
    v8 = fconst 1.0
    store v1, v3, v8
    v9 = load v0, v3
    v10 = load v5, v3
    v11 = call @h(v0)
    v12 = load v0, v3
    call @g(v0)
    v13 = load v0, v3
    v14 = load v5, v3
    v15 = iconst 1
    v16 = load v5, v15
    v17 = fadd v10, v11
    return v6, v9, v12, v13, v14, v16
}

function @same_array_twice(a: mut arr, x: f64) -> (f64, f64, f64, f64, f64, f64) {
block0(v0: arr, v1: f64):
    v2, v3, v4, v5, v6, v7 = call @f(v0, v0, v1)
    return v2, v3, v4, v5, v6, v7
}
"#,
        &[Pass::Mem, Pass::Dce],
    );
    let f = body(&after, "f");
    // a[0] = x is read back as x; b may be a (it is, when called from
    // @same_array_twice), so b[0] = 1.0 forgets a[0] (v9 is loaded) but not
    // t[0] (a fresh local array); a read-only call
    // forgets nothing (v12 = v9); a call that may write a forgets a[0] (v13
    // is loaded) but not t[0]; t[1] is the 0.0 of `zeros`.
    assert_eq!(count(&f, "load v0, v3"), 2, "{f}");
    assert_eq!(count(&f, "load v5"), 0, "{f}");
    assert!(f.contains("v16 = fconst 0.0"), "{f}");
    assert!(f.contains("return v2, v9, v9, v13, v2, v16"), "{f}");
}

#[test]
fn mem_removes_dead_stores_only_when_no_trap_or_read_is_in_between() {
    let after = case(
        "mem_dead_stores",
        r#"function @f(a: mut arr, b: arr, i: i64, j: i64, x: f64) {
block0(v0: arr, v1: arr, v2: i64, v3: i64, v4: f64):
    store v0, v2, v4
    v5 = fadd v4, v4
    store v0, v2, v5
    v6 = load v1, v3
    store v0, v2, v6
    v7 = iconst 4
    v8 = zeros v7, "t"
    v9 = iconst 3
    store v8, v9, v4
    store v0, v3, v4
    store v8, v9, v5
    v10 = load v0, v2
    store v0, v2, v10
    return
}

function @local_out_of_bounds(n: i64, k: i64, x: f64) -> f64 {
block0(v0: i64, v1: i64, v2: f64):
    v3 = zeros v0, "t"
    store v3, v1, v2
    v4 = fadd v2, v2
    store v3, v1, v4
    return v2
}
"#,
        &[Pass::Mem, Pass::Dce],
    );
    let f = body(&after, "f");
    // a[i] = x is overwritten by a[i] = 2x right away: dead. a[i] = 2x is not
    // (b[j] may be a[i], and may trap: the store must have happened). t[3] =
    // x is dead although a[j] = x, which may trap, comes in between: t[3]
    // cannot trap, a[j] does not read t, and no one sees a local array after
    // a trap; t[3] = 2x dies at the return. a[i] = a[i] is kept: a store is
    // never removed for storing what is there.
    assert!(!f.contains("store v0, v2, v4"), "{f}");
    assert!(
        f.contains("store v0, v2, v5") && f.contains("store v0, v2, v6"),
        "{f}"
    );
    assert!(!f.contains("store v8"), "{f}");
    assert!(f.contains("store v0, v3, v4"), "{f}");
    // t[k] = x is overwritten by t[k] = 2x; t[k] = 2x may be out of bounds
    // (the first store was what showed t[k] in bounds): it stays, although
    // t is a local array that dies at the return.
    let g = body(&after, "local_out_of_bounds");
    assert!(
        !g.contains("store v3, v1, v2") && g.contains("store v3, v1, v4"),
        "{g}"
    );
}

// ---------------------------------------------------------------- dce

#[test]
fn dce_keeps_every_effect_and_trap() {
    let after = case(
        "dce_traps",
        r#"function @f(a: arr, i: i64, x: f64) -> f64 {
block0(v0: arr, v1: i64, v2: f64):
    v3 = load v0, v1
    v4 = iconst 0
    v5 = idiv v1, v4
    v6 = iconst 2
    v7 = idiv v1, v6
    v8 = sin v2
    v9 = len v0
    v10 = zeros v6, "t"
    v11 = load v10, v4
    v12 = load v10, v6
    v13 = pop 3, f64
    return v2
}
"#,
        &[Pass::Dce],
    );
    let f = body(&after, "f");
    // Out-of-bounds loads, division by zero, allocation and popping trap;
    // only the pure ones go (and t[0], which cannot trap); t[2] stays.
    for kept in ["load v0, v1", "idiv v1, v4", "zeros", "load v10, v6", "pop"] {
        assert!(f.contains(kept), "{kept}: {f}");
    }
    for gone in ["idiv v1, v6", "sin", "len", "load v10, v4"] {
        assert!(!f.contains(gone), "{gone}: {f}");
    }
    // The out-of-bounds load still traps after optimization.
    let id = after.get("f").unwrap();
    let out = Interpreter::new(&after).call(id, &[Val::Array(vec![]), Val::I64(0), Val::F64(1.0)]);
    assert!(
        matches!(&out, Err(e) if matches!(e.kind, adze_ir::TrapKind::IndexOutOfBounds { .. })),
        "{out:?}"
    );
}

// ---------------------------------------------------------------- licm

#[test]
fn licm_hoists_pure_invariants_to_a_jump_preheader() {
    let after = case(
        "licm",
        r#"function @f(a: mut arr, x: f64, k: i64) -> f64 {
block0(v0: arr, v1: f64, v2: i64):
    v3 = iconst 0
    v4 = len v0
    v5 = fconst 0.0
    jump block1(v3, v5)
block1(v6: i64, v7: f64):
    v8 = icmp lt v6, v4
    brif v8, block2, block4(v7)
block2:
    v9 = exp v1
    v10 = load v0, v6
    v11 = fmul v9, v10
    v12 = fadd v7, v11
    v13 = idiv v2, v4
    v14 = sitof v13
    v15 = fadd v12, v14
    v16 = iconst 3
    v17 = idiv v2, v16
    v18 = sitof v17
    v19 = fadd v15, v18
    store v0, v6, v19
    v20 = iconst 1
    v21 = iadd v6, v20
    jump block1(v21, v19)
block4(v22: f64):
    return v22
}

function @two_entries(x: f64, c: bool, n: i64) -> f64 {
block0(v0: f64, v1: bool, v2: i64):
    v3 = iconst 0
    brif v1, block1(v3, v0), block2
block2:
    v4 = fneg v0
    jump block1(v3, v4)
block1(v5: i64, v6: f64):
    v7 = icmp lt v5, v2
    brif v7, block3, block4
block3:
    v8 = cos v0
    v9 = fadd v6, v8
    v10 = iconst 1
    v11 = iadd v5, v10
    jump block1(v11, v9)
block4:
    return v6
}
"#,
        &[Pass::Licm],
    );
    let f = body(&after, "f");
    let pre = f.split("\nblock1(").next().unwrap();
    // exp x, x / 3 (with a copy of the constant 3) and f64 of it move; the
    // constants stay, and so do the load, the division by len (maybe zero)
    // and what depends on the loop.
    for hoisted in ["exp v1", "iconst 3", "idiv v2, v23", "sitof v17"] {
        assert!(pre.contains(hoisted), "{hoisted}: {f}");
    }
    for kept in ["load", "idiv v2, v4", "fmul", "iadd"] {
        assert!(!pre.contains(kept), "{kept}: {f}");
    }
    // A loop entered from two blocks has no preheader: nothing moves.
    assert!(body(&after, "two_entries").contains("block3:\n    v8 = cos v0"));
}

// ---------------------------------------------------------------- regions

/// Regions (`@sq` inlined with its rules) whose bodies have duplicates
/// outside them, one of them loop-invariant, and one whose argument and
/// result nothing else uses: after the whole pipeline every region lists
/// the same arguments, results and blocks, its arguments and results are
/// still defined, and code inside was neither merged with code outside nor
/// moved out.
#[test]
fn a_region_survives_every_pass() {
    let text = r#"function @sq(x: f64) -> f64 rules(forward: @sq.fwd) {
block0(v0: f64):
    v1 = fmul v0, v0
    return v1
}

function @sq.fwd(x: f64, x.t: f64) -> (f64, f64) {
block0(v0: f64, v1: f64):
    v2 = fmul v0, v0
    v3 = fconst 2.0
    v4 = fmul v3, v0
    v5 = fmul v4, v1
    return v2, v5
}

function @f(xs: arr, y: f64) -> f64 {
    region0: @sq(v6) -> (v7) blocks(block3) rules(forward: @sq.fwd)
    region1: @sq(v12) -> (v14) blocks(block8) rules(forward: @sq.fwd)
    region2: @sq(v20) -> (v21) blocks(block6) rules(forward: @sq.fwd)
block0(v0: arr, v12: f64):
    v1 = len v0
    v2 = iconst 0
    v3 = fconst 0.0
    jump block1(v2, v3)
block1(v4: i64, v5: f64):
    v8 = icmp lt v4, v1
    brif v8, block2, block4
block2:
    v6 = load v0, v4
    jump block3
block3:
    v7 = fmul v6, v6
    jump block8
block8:
    v14 = fmul v12, v12
    jump block5
block5:
    v16 = fmul v6, v6
    v17 = fmul v12, v12
    v9 = fadd v5, v7
    v18 = fadd v9, v16
    v19 = fadd v18, v17
    v13 = fadd v19, v14
    v10 = iconst 1
    v11 = iadd v4, v10
    jump block1(v11, v13)
block4:
    v20 = fconst 3.0
    jump block6
block6:
    v21 = fconst 4.0
    jump block7
block7:
    return v5
}
"#;
    let before = parse(text);
    let after = case("region", text, &PIPELINE);
    let (b, a) = (before.get("f").unwrap(), after.get("f").unwrap());
    let (fb, fa) = (before.func(b), after.func(a));
    assert_eq!(fb.regions, fa.regions);
    for r in fa.regions.values() {
        for &v in r.args.iter().chain(&r.results) {
            let placed = match fa.dfg.value_def(v) {
                adze_ir::ValueDef::Result { inst, .. } => fa.layout.inst_block(*inst).is_some(),
                adze_ir::ValueDef::Param { block, .. } => fa.layout.is_block_inserted(*block),
                adze_ir::ValueDef::Detached => false,
            };
            assert!(placed, "{v}\n{after}");
        }
    }
    let f = body(&after, "f");
    // x * x (region0's body) and y * y (region1's) are computed inside and
    // outside their regions; y * y outside moves out of the loop, inside it
    // stays. The unused argument and result of region2 stay.
    assert_eq!(count(&f, "fmul v6, v6"), 2, "{f}");
    assert_eq!(count(&f, "fmul v12, v12"), 2, "{f}");
    assert!(f.contains("block8:\n    v14 = fmul v12, v12"), "{f}");
    let entry = f.split("\nblock1(").next().unwrap();
    assert!(entry.contains("v17 = fmul v12, v12"), "{f}");
    assert!(
        f.contains("v20 = fconst 3.0") && f.contains("v21 = fconst 4.0"),
        "{f}"
    );
}

/// The inliner's nested regions (`@main` gets `@norm` > `@sum_sq` > `@sq`,
/// twice) go through the whole pipeline unchanged in shape.
#[test]
fn nested_regions_from_the_inliner_survive_the_pipeline() {
    let src = "fn sq(x: f64) -> f64 { x * x }
rule forward sq(x: f64, tx: f64) -> (f64, f64) { (x * x, 2.0 * x * tx) }
fn sum_sq(xs: [f64]) -> f64 { var s = 0.0; for i in 0..len(xs) { s = s + sq(xs[i]) * 1.0; } s }
rule forward sum_sq(xs: [f64], dxs: [f64]) -> (f64, f64) { (sum_sq(xs), 0.0) }
fn norm(xs: [f64]) -> f64 { sqrt(sum_sq(xs) + 0.0) }
rule forward norm(xs: [f64], dxs: [f64]) -> (f64, f64) { (norm(xs), 0.0) }
fn main(xs: [f64]) -> f64 { norm(xs) * (2.0 * 3.0) + norm(xs) }";
    let mut before = compile(src);
    adze_opt::inline_module(&mut before, &adze_opt::DefaultPolicy::default());
    let main = before.get("main").unwrap();
    assert!(before.func(main).regions.len() >= 4, "{before}");
    let mut after = before.clone();
    let stats = optimize_module(&mut after).unwrap();
    assert!(stats.insts_after < stats.insts_before);
    check_well_formed(&after).unwrap();
    assert_eq!(before.func(main).regions, after.func(main).regions);
    compare(&before, &after);
}

// ---------------------------------------------------------------- generated

/// The inliner's generated programs (rules, regions nested by inlining,
/// recursion, local arrays, early returns), inlined and then optimized:
/// every function computes the same bits and errors, and every region is
/// unchanged.
fn check_generated(seed: u64) -> Result<(), proptest::test_runner::TestCaseError> {
    use proptest::test_runner::TestCaseError;
    let src = crate::generated::Gen::program(seed);
    let mut before = compile(&src);
    adze_opt::inline_module(&mut before, &adze_opt::DefaultPolicy { budget: usize::MAX });
    let mut after = before.clone();
    optimize_module(&mut after).map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
    check_well_formed(&after).map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
    for (id, f) in before.iter() {
        if after.func(id).regions != f.regions {
            return Err(TestCaseError::fail(format!(
                "@{}: regions changed\n{src}",
                f.name
            )));
        }
        for args in crate::support::inputs(&before, id) {
            let a = Interpreter::new(&before).call(id, &args);
            let b = Interpreter::new(&after).call(id, &args);
            if !same_outcome(&a, &b) {
                return Err(TestCaseError::fail(format!(
                    "@{}({args:?}):\n  before: {a:?}\n  after:  {b:?}\n{src}\n{after}",
                    f.name
                )));
            }
        }
    }
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: 48, .. proptest::test_runner::Config::default() })]

    #[test]
    fn optimizing_generated_programs_keeps_results_and_regions(seed in proptest::prelude::any::<u64>()) {
        check_generated(seed)?;
    }
}

#[test]
fn gvn_merges_what_is_computed_from_cheap_duplicates() {
    // `x + 1` is computed in the entry and again in block1, which the entry
    // dominates: the second stays (cheap), but the `exp` of it is the
    // entry's `exp`.
    let after = case(
        "gvn_numbers_cheap_duplicates",
        "function @f(x: f64, c: bool) -> f64 {
block0(v0: f64, v1: bool):
    v2 = fconst 1.0
    v3 = fadd v0, v2
    v4 = exp v3
    brif v1, block1, block2
block1:
    v5 = fconst 1.0
    v6 = fadd v0, v5
    v7 = exp v6
    v8 = fadd v4, v7
    return v8
block2:
    return v4
}
",
        &[Pass::Gvn],
    );
    let f = body(&after, "f");
    assert_eq!(count(&f, "exp "), 1, "{f}");
    assert_eq!(count(&f, "fadd v0,"), 2, "{f}");
}

#[test]
fn gvn_sees_through_trivial_and_constant_block_parameters() {
    // The adjoint loop's shape: `v5` gets -0.0 on every edge, so
    // `fadd v5, v4` is `fadd -0.0, v4`; `v4` only ever holds the results of
    // `fadd`s (quiet), so that is `v4`, and then `v4` only ever holds `v10`.
    // `v6` gets the parameter `y` on one edge: `fadd v6, -0.0` must stay
    // (y may be a signaling NaN, which the addition quiets). `v7` gets two
    // different constants and stays.
    let after = case(
        "gvn_params",
        "function @f(x: f64, y: f64, n: i64) -> (f64, f64, f64) {
block0(v0: f64, v1: f64, v2: i64):
    v3 = fconst -0.0
    v10 = fadd v3, v0
    v11 = iconst 0
    v12 = fconst 1.0
    jump block1(v10, v3, v1, v12, v11)
block1(v4: f64, v5: f64, v6: f64, v7: f64, v8: i64):
    v13 = icmp lt v8, v2
    brif v13, block2, block3
block2:
    v14 = fadd v5, v4
    v15 = fconst -0.0
    v16 = fadd v6, v15
    v17 = fmul v16, v14
    v18 = fconst 2.0
    v19 = iconst 1
    v20 = iadd v8, v19
    jump block1(v14, v15, v17, v18, v20)
block3:
    v21 = fadd v4, v7
    return v21, v6, v5
}
",
        &[Pass::Gvn, Pass::Gvn, Pass::Dce],
    );
    let f = body(&after, "f");
    // No more addition of -0.0 to the carried value, and the loop carries
    // v10 itself.
    assert!(!f.contains("fadd v5, v4") && !f.contains("v14 ="), "{f}");
    assert!(f.contains("fmul v16, v10"), "{f}");
    assert!(f.contains("v21 = fadd v10, v7"), "{f}");
    // y + -0.0 stays: y may be a signaling NaN.
    assert!(f.contains("v16 = fadd v6,"), "{f}");
    // v5 is the constant -0.0 (a copy at the top of block1).
    assert!(f.contains("return v21, v6, v"), "{f}");
    assert!(!f.contains("return v21, v6, v5"), "{f}");
}

// ---------------------------------------------------------------- loops

/// A loop-carried sum nobody reads (`v6`, through `block3`'s `v14` too)
/// goes with the parameters it flows through, cycle included, and so does
/// the load feeding it, which the loop proves in bounds; the counter read
/// after the loop stays. A region's argument and result, parameters nothing
/// reads, stay too, and so do the entry block's parameters.
#[test]
fn dce_removes_dead_block_parameters() {
    let after = case(
        "dce_params",
        "function @f(x: arr, n: i64) -> i64 {
block0(v0: arr, v1: i64):
    v2 = iconst 0
    v3 = fconst 0.0
    v4 = len v0
    jump block1(v2, v3, v2)
block1(v5: i64, v6: f64, v7: i64):
    v8 = icmp lt v5, v4
    brif v8, block2, block3(v6)
block2:
    v9 = load v0, v5
    v10 = fadd v6, v9
    v11 = iconst 1
    v12 = iadd v5, v11
    v13 = iadd v7, v11
    jump block1(v12, v10, v13)
block3(v14: f64):
    return v7
}

function @sq(x: f64) -> f64 {
block0(v0: f64):
    v1 = fmul v0, v0
    return v1
}

function @g(x: f64, n: i64) -> f64 {
    region0: @sq(v3) -> (v5) blocks(block2)
block0(v0: f64, v1: i64):
    v2 = fneg v0
    jump block1(v2)
block1(v3: f64):
    jump block2
block2:
    v4 = fmul v3, v3
    jump block3(v4, v0)
block3(v5: f64, v6: f64):
    return v0
}
",
        &[Pass::Dce],
    );
    let f = body(&after, "f");
    assert!(f.contains("block1(v5: i64, v7: i64):"), "{f}");
    assert!(f.contains("jump block1(v2, v2)"), "{f}");
    assert!(f.contains("jump block1(v12, v13)"), "{f}");
    assert!(f.contains("brif v8, block2, block3\n"), "{f}");
    assert!(f.contains("block3:"), "{f}");
    for gone in ["fadd", "load", "fconst"] {
        assert!(!f.contains(gone), "{gone}: {f}");
    }
    assert!(f.contains("block0(v0: arr, v1: i64):"), "{f}");
    let g = body(&after, "g");
    assert!(g.contains("block1(v3: f64):"), "{g}");
    assert!(g.contains("v4 = fmul v3, v3"), "{g}");
    assert!(g.contains("block3(v5: f64):"), "{g}");
    assert!(g.contains("jump block3(v4)"), "{g}");
    assert!(g.contains("block0(v0: f64, v1: i64):"), "{g}");
}

/// Unused loads that the loop's bounds prove in bounds go (`y[i]` through
/// `samelen x, y`); `x[i + 1]` with `i < len x` may be out of bounds (it is,
/// at the last trip) and stays, trap included.
#[test]
fn dce_removes_loads_the_loop_proves_in_bounds() {
    let after = case(
        "dce_safe_loads",
        "function @f(x: arr, y: arr) -> f64 {
block0(v0: arr, v1: arr):
    samelen v0, v1
    v2 = iconst 0
    v3 = len v0
    v4 = fconst 0.0
    jump block1(v2)
block1(v5: i64):
    v6 = icmp lt v5, v3
    brif v6, block2, block3
block2:
    v7 = load v0, v5
    v8 = load v1, v5
    v9 = iconst 1
    v10 = iadd v5, v9
    v11 = load v0, v10
    jump block1(v10)
block3:
    return v4
}
",
        &[Pass::Dce],
    );
    let f = body(&after, "f");
    assert!(!f.contains("load v0, v5") && !f.contains("load v1"), "{f}");
    assert!(f.contains("load v0, v10") && f.contains("samelen"), "{f}");
    let id = after.get("f").unwrap();
    let out = Interpreter::new(&after).call(id, &[Val::Array(vec![1.0]), Val::Array(vec![2.0])]);
    assert!(
        matches!(&out, Err(e) if matches!(e.kind, adze_ir::TrapKind::IndexOutOfBounds { index: 1, .. })),
        "{out:?}"
    );
}

/// Counters that start at the same value and add the same constant each
/// trip are one (`v5`: `1 + x` the other way round, `v8`: another `iconst
/// 1`); a counter stepping by 2 or starting at 1 is not.
#[test]
fn indvars_merges_congruent_counters() {
    let after = case(
        "indvars",
        "function @f(n: i64) -> (i64, i64, i64, i64) {
block0(v0: i64):
    v1 = iconst 0
    v2 = iconst 0
    v3 = iconst 1
    v20 = iconst 8
    v21 = irem v0, v20
    jump block1(v1, v2, v1, v3, v1)
block1(v4: i64, v5: i64, v6: i64, v7: i64, v8: i64):
    v9 = icmp lt v4, v21
    brif v9, block2, block3
block2:
    v10 = iconst 1
    v11 = iadd v4, v10
    v12 = iadd v10, v5
    v13 = iconst 2
    v14 = iadd v6, v13
    v15 = iadd v7, v10
    v16 = iadd v8, v3
    jump block1(v11, v12, v14, v15, v16)
block3:
    return v5, v6, v7, v8
}
",
        &[Pass::Indvars, Pass::Dce],
    );
    let f = body(&after, "f");
    assert!(f.contains("return v4, v6, v7, v4"), "{f}");
    assert!(f.contains("block1(v4: i64, v6: i64, v7: i64):"), "{f}");
}

/// The augmented primal of reverse mode, reduced: a sum nobody reads, a
/// trip counter next to the index, in-bounds loads. The whole pipeline
/// leaves the trip count in closed form and no loop. Nested loops that only
/// count go too, the inner one first.
#[test]
fn loopdel_removes_a_loop_that_only_counts() {
    let after = case(
        "loopdel",
        "function @aug(x: arr) -> i64 {
block0(v0: arr):
    v1 = fconst 0.0
    v2 = iconst 0
    v3 = len v0
    v4 = iconst 1
    v5 = isub v3, v4
    jump block1(v2, v1, v2)
block1(v6: i64, v7: f64, v8: i64):
    v9 = icmp lt v6, v5
    brif v9, block2, block3
block2:
    v10 = load v0, v6
    v11 = iadd v6, v4
    v12 = load v0, v11
    v13 = fmul v10, v12
    v14 = fadd v7, v13
    v15 = iconst 1
    v16 = iadd v8, v15
    jump block1(v11, v14, v16)
block3:
    jump block4(v7)
block4(v17: f64):
    return v8
}

function @nested(n: i64, m: i64) -> i64 {
block0(v0: i64, v1: i64):
    v2 = iconst 0
    v3 = iconst 1
    v4 = iconst 8
    v5 = irem v0, v4
    v6 = irem v1, v4
    jump block1(v2)
block1(v7: i64):
    v8 = icmp lt v7, v5
    brif v8, block2, block5
block2:
    jump block3(v2)
block3(v9: i64):
    v10 = icmp lt v9, v6
    brif v10, block4, block6
block4:
    v11 = iadd v9, v3
    jump block3(v11)
block6:
    v12 = iadd v7, v3
    jump block1(v12)
block5:
    return v7
}
",
        &PIPELINE,
    );
    for name in ["aug", "nested"] {
        let f = body(&after, name);
        assert!(!f.contains("brif") && !f.contains("load"), "{f}");
        assert_eq!(count(&f, "select"), 1, "{f}");
    }
    let id = after.get("aug").unwrap();
    let out = Interpreter::new(&after)
        .call(id, &[Val::Array(vec![1.0; 5])])
        .unwrap();
    assert_eq!(out.results, vec![Val::I64(4)]);
}

/// The exit value of a loop that runs no trip is its initial value.
#[test]
fn loopdel_exit_value_of_a_zero_trip_loop() {
    let after = case(
        "loopdel_zero_trip",
        "function @count(lo: i64, hi: i64) -> i64 {
block0(v0: i64, v1: i64):
    v2 = iconst 8
    v3 = irem v0, v2
    v4 = irem v1, v2
    v5 = iconst 1
    jump block1(v3)
block1(v6: i64):
    v7 = icmp lt v6, v4
    brif v7, block2, block3(v6)
block2:
    v8 = sitof v6
    v9 = iadd v6, v5
    jump block1(v9)
block3(v10: i64):
    return v10
}
",
        &PIPELINE,
    );
    let f = body(&after, "count");
    assert!(!f.contains("brif") && f.contains("select"), "{f}");
    let id = after.get("count").unwrap();
    for (lo, hi, exit) in [(5, 2, 5), (3, 3, 3), (-3, 4, 4), (-7, -2, -2)] {
        let out = Interpreter::new(&after)
            .call(id, &[Val::I64(lo), Val::I64(hi)])
            .unwrap();
        assert_eq!(out.results, vec![Val::I64(exit)], "{lo}..{hi}");
    }
}

/// Loops that must stay: one whose load may be out of bounds (the trap
/// must happen), one whose sum is read after it, one with a rule region
/// inside (its blocks are the region's).
#[test]
fn loopdel_keeps_loops_with_traps_results_or_regions() {
    let after = case(
        "loopdel_kept",
        "function @oob(x: arr) -> i64 {
block0(v0: arr):
    v1 = iconst 0
    v2 = len v0
    v3 = iconst 1
    v4 = iadd v2, v3
    jump block1(v1)
block1(v5: i64):
    v6 = icmp lt v5, v4
    brif v6, block2, block3
block2:
    v7 = load v0, v5
    v8 = iadd v5, v3
    jump block1(v8)
block3:
    return v5
}

function @sum(x: arr) -> f64 {
block0(v0: arr):
    v1 = iconst 0
    v2 = len v0
    v3 = iconst 1
    v4 = fconst 0.0
    jump block1(v1, v4)
block1(v5: i64, v6: f64):
    v7 = icmp lt v5, v2
    brif v7, block2, block3
block2:
    v8 = load v0, v5
    v9 = fadd v6, v8
    v10 = iadd v5, v3
    jump block1(v10, v9)
block3:
    return v6
}

function @sq(x: f64) -> f64 {
block0(v0: f64):
    v1 = fmul v0, v0
    return v1
}

function @region(x: arr) -> i64 {
    region0: @sq(v7) -> (v8) blocks(block4)
block0(v0: arr):
    v1 = iconst 0
    v2 = len v0
    v3 = iconst 1
    jump block1(v1)
block1(v5: i64):
    v6 = icmp lt v5, v2
    brif v6, block2, block3
block2:
    v7 = load v0, v5
    jump block4
block4:
    v8 = fmul v7, v7
    jump block5
block5:
    v9 = iadd v5, v3
    jump block1(v9)
block3:
    return v5
}
",
        &PIPELINE,
    );
    for name in ["oob", "sum", "region"] {
        let f = body(&after, name);
        assert!(f.contains("brif") && f.contains("load"), "{name}: {f}");
        assert!(!f.contains("select"), "{name}: {f}");
    }
    let id = after.get("oob").unwrap();
    let out = Interpreter::new(&after).call(id, &[Val::Array(vec![1.0, 2.0])]);
    assert!(
        matches!(&out, Err(e) if matches!(e.kind, adze_ir::TrapKind::IndexOutOfBounds { index: 2, .. })),
        "{out:?}"
    );
}

/// Loops that may not terminate stay, although they have no effect and
/// only their index is read after them: a `while` whose condition has
/// nothing to do with the counter, and a counted loop whose step may be 0.
/// (Compared on inputs where they terminate.)
#[test]
fn loopdel_keeps_loops_that_may_not_terminate() {
    let text = "function @unrelated(c: bool, n: i64) -> i64 {
block0(v0: bool, v1: i64):
    v2 = iconst 0
    v3 = iconst 1
    jump block1(v2)
block1(v4: i64):
    brif v0, block2, block3
block2:
    v5 = iadd v4, v3
    jump block1(v5)
block3:
    return v4
}

function @step(n: i64, s: i64) -> i64 {
block0(v0: i64, v1: i64):
    v2 = iconst 0
    jump block1(v2)
block1(v3: i64):
    v4 = icmp lt v3, v0
    brif v4, block2, block3
block2:
    v5 = iadd v3, v1
    jump block1(v5)
block3:
    return v3
}
";
    let before = parse(text);
    let mut after = before.clone();
    optimize_module(&mut after).unwrap();
    check_well_formed(&after).unwrap_or_else(|e| panic!("{e}"));
    for name in ["unrelated", "step"] {
        let f = body(&after, name);
        assert!(f.contains("brif") && !f.contains("select"), "{name}: {f}");
    }
    let cases = [
        ("unrelated", vec![Val::Bool(false), Val::I64(3)]),
        ("step", vec![Val::I64(7), Val::I64(2)]),
        ("step", vec![Val::I64(-1), Val::I64(0)]),
    ];
    for (name, args) in cases {
        let (b, a) = (before.get(name).unwrap(), after.get(name).unwrap());
        let x = Interpreter::new(&before).call(b, &args);
        let y = Interpreter::new(&after).call(a, &args);
        assert!(same_outcome(&x, &y), "{name}({args:?}): {x:?} vs {y:?}");
    }
}

#[test]
fn gvn_narrows_parameters_that_only_carry_bits() {
    // A reverse loop's trip count after `promote`: an f64 parameter fed by
    // `frombits` and read by `tobits` only. It becomes an i64 parameter.
    // `v7` is also read by `fadd`: it stays an f64.
    let after = case(
        "gvn_bit_params",
        "function @f(n: i64, x: f64) -> (i64, f64) {
block0(v0: i64, v1: f64):
    v2 = frombits v0
    v3 = fconst 0.0
    jump block1(v2, v2, v3)
block1(v4: f64, v7: f64, v12: f64):
    v5 = tobits v4
    v6 = iconst 0
    v8 = icmp le v5, v6
    brif v8, block3, block2
block2:
    v9 = iconst 1
    v10 = isub v5, v9
    v11 = frombits v10
    v13 = fadd v12, v7
    jump block1(v11, v11, v13)
block3:
    v14 = tobits v7
    v15 = fadd v12, v1
    return v14, v15
}
",
        &[Pass::Gvn, Pass::Dce],
    );
    let f = body(&after, "f");
    assert!(!f.contains("v5 = tobits"), "{f}");
    assert!(f.contains("block1(v7: f64, v12: f64, v16: i64)"), "{f}");
    assert!(
        f.contains("icmp le v16, v6") && f.contains("fadd v12, v7"),
        "{f}"
    );
}

const MEM_SAMELEN: &str = "function @f(a: arr, b: mut arr, i: i64) -> f64 {
block0(v0: arr, v1: arr, v2: i64):
    samelen v0, v1
    jump block1
block1:
    v3 = iconst 1
    v4 = iadd v2, v3
    v5 = load v0, v2
    v6 = load v0, v4
    v7 = fadd v5, v6
    store v1, v2, v7
    v8 = load v1, v4
    v9 = fadd v8, v7
    store v1, v2, v9
    return v9
}
function @g(a: arr, b: mut arr, i: i64) -> f64 {
block0(v0: arr, v1: arr, v2: i64):
    v3 = iconst 1
    v4 = iadd v2, v3
    v5 = load v0, v2
    v6 = load v0, v4
    samelen v0, v1
    v7 = fadd v5, v6
    store v1, v2, v7
    v8 = load v1, v4
    v9 = fadd v8, v7
    store v1, v2, v9
    return v9
}
";

#[test]
fn mem_uses_the_entry_blocks_samelen_facts() {
    // After `samelen a, b` in the entry block, the checked `a[i + 1]` shows
    // `b[i + 1]` in bounds: the load of it between the two stores to
    // `b[i]` cannot trap, so the first store is dead. In the entry block
    // itself, before and after the `samelen`, nothing is inferred from it
    // (`g`: the first store to `b[i]` stays, since `b[i + 1]` may trap).
    let after = case("mem_samelen", MEM_SAMELEN, &[Pass::Mem, Pass::Dce]);
    let f = body(&after, "f");
    assert_eq!(count(&f, "store v1, v2"), 1, "{f}");
    let g = body(&after, "g");
    assert_eq!(count(&g, "store v1, v2"), 2, "{g}");
    // Equal lengths (the generic inputs give `a` and `b` different ones):
    // the same results, the same final `b`, the same error past the end.
    let before = parse(MEM_SAMELEN);
    for name in ["f", "g"] {
        for i in [0, 1, 2, 3, -1] {
            let args = vec![
                Val::Array(vec![1.0, 2.0, 3.0]),
                Val::Array(vec![4.0, 5.0, 6.0]),
                Val::I64(i),
            ];
            let x = Interpreter::new(&before).call(before.get(name).unwrap(), &args);
            let y = Interpreter::new(&after).call(after.get(name).unwrap(), &args);
            assert!(same_outcome(&x, &y), "{name}({i}): {x:?} vs {y:?}");
        }
    }
}
