//! The verifier: one negative test per check (bad IR in, the specific
//! message out), a few positive ones, and the error report's format.
//!
//! Most bad IR is written as text (the parser accepts ill-typed IR and leaves
//! it to the verifier); what the text cannot express is made by corrupting a
//! parsed function.

use adze_ir::parse::parse_module;
use adze_ir::verify::{verify_after_pass, verify_function, verify_module, AnyEntity};
use adze_ir::{Block, BlockCall, FuncId, InstData, Module, Opcode, Region, Type, Value};

fn module(text: &str) -> Module {
    parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Verifies `text` and asserts that some error message contains `msg`.
fn check(text: &str, msg: &str) {
    check_module(&module(text), msg);
}

fn check_module(m: &Module, msg: &str) {
    match verify_module(m) {
        Ok(()) => panic!("verified, expected `{msg}`:\n{m}"),
        Err(e) => assert!(e.contains(msg), "expected `{msg}`, got:\n{e}"),
    }
}

fn ok(text: &str) {
    if let Err(e) = verify_module(&module(text)) {
        panic!("{e}");
    }
}

/// The first placed instruction of function `name`.
fn first_inst(m: &Module, name: &str) -> adze_ir::Inst {
    let f = m.func(m.get(name).unwrap());
    f.layout.insts().next().unwrap().1
}

const HELPERS: &str = "
function @g(x: f64, a: arr) -> f64 {
}

function @h(x: f64, k: i64) -> (f64, i64) {
}

function @w(y: mut arr) {
}
";

fn with_helpers(text: &str) -> String {
    format!("{text}{HELPERS}")
}

// ---------------------------------------------------------------- positives

#[test]
fn valid_functions_verify() {
    ok("function @f(x: f64, n: i64) -> f64 {
block0(v0: f64, v1: i64):
    v2 = iconst 0
    jump block1(v2, v0)
block1(v3: i64, v4: f64):
    v5 = icmp lt v3, v1
    brif v5, block2, block3
block2:
    v6 = fmul v4, v0
    v7 = iconst 1
    v8 = iadd v3, v7
    jump block1(v8, v6)
block3:
    return v4
}
");
}

#[test]
fn unreachable_blocks_are_type_checked_but_not_dominance_checked() {
    // block2 is unreachable and uses v3, which does not dominate it: allowed.
    ok("function @f(c: bool) -> f64 {
block0(v0: bool):
    brif v0, block1, block3
block1:
    v3 = fconst 1.0
    jump block3
block2:
    v4 = fneg v3
    return v4
block3:
    v5 = fconst 0.0
    return v5
}
");
    // ...but types still are.
    check(
        "function @f() {
block0:
    return
block1:
    v1 = iconst 1
    v2 = fneg v1
    return
}
",
        "operand 0 v1 has type i64, expected f64",
    );
    // A reachable use of a value defined in an unreachable block is an error.
    check(
        "function @f() -> f64 {
block0:
    jump block2
block1:
    v1 = fconst 1.0
    jump block2
block2:
    return v1
}
",
        "uses v1, whose definition in block1 does not dominate block2",
    );
}

#[test]
fn declarations_verify() {
    ok("function @f(x: f64, a: mut arr) -> (f64, i64) inline(never) {\n}\n");
}

#[test]
fn rules_with_the_right_signatures_verify() {
    ok(
        "function @f(x: f64, n: i64, a: arr) -> (f64, i64) rules(forward: @ff, reverse: @fr) {
}

function @ff(x: f64, dx: f64, n: i64, a: arr, da: arr) -> (f64, i64, f64) {
}

function @fr(x: f64, n: i64, a: arr, da: mut arr, dy: f64) -> f64 {
}
",
    );
}

// ---------------------------------------------------------------- signature and entry

#[test]
fn function_results_are_scalars() {
    check(
        "function @f() -> arr {\n}\n",
        "result 0 has type arr: function results are scalars",
    );
}

#[test]
fn entry_block_params_match_the_signature() {
    check(
        "function @f(x: f64) {\nblock0:\n    return\n}\n",
        "the entry block has 0 parameters, the signature has 1",
    );
    check(
        "function @f(x: f64) {\nblock0(v0: i64):\n    return\n}\n",
        "entry parameter `x` v0 has type i64, expected f64",
    );
}

// ---------------------------------------------------------------- structure

#[test]
fn blocks_end_in_one_terminator() {
    check(
        "function @f() {\nblock0:\n    v0 = fconst 1.0\n}\n",
        "block0 does not end in a terminator",
    );
    check(
        "function @f() {\nblock0:\n}\n",
        "block0 does not end in a terminator",
    );
    check(
        "function @f() {\nblock0:\n    return\n    return\n}\n",
        "a terminator must be the last instruction of its block",
    );
}

#[test]
fn layout_entities_must_exist() {
    let mut m = module("function @f() {\nblock0:\n    return\n}\n");
    let f = m.func_mut(FuncId::from_u32(0));
    f.layout.append_block(Block::from_u32(7));
    check_module(&m, "the layout holds block7, which does not exist");
}

#[test]
fn results_are_defined_where_listed() {
    let mut m = module(
        "function @f() {\nblock0:\n    v0 = fconst 1.0\n    v1 = fconst 2.0\n    return\n}\n",
    );
    let f = m.func_mut(FuncId::from_u32(0));
    let inst = f.layout.block_insts(Block::from_u32(0))[0];
    f.dfg.attach_result(Value::from_u32(0), Type::F64, inst, 1);
    check_module(&m, "result v0 is defined elsewhere");
}

// ---------------------------------------------------------------- control flow

#[test]
fn branch_targets_exist_and_are_placed() {
    check(
        "function @f() {\nblock0:\n    jump block3\n}\n",
        "branches to block3, which is not in the layout",
    );
    let mut m = module("function @f() {\nblock0:\n    jump block1\nblock1:\n    return\n}\n");
    let inst = first_inst(&m, "f");
    *m.func_mut(FuncId::from_u32(0)).dfg.inst_mut(inst) = InstData::Jump {
        dest: BlockCall {
            block: Block::from_u32(50),
            args: vec![],
        },
    };
    check_module(&m, "branches to block50, which does not exist");
}

#[test]
fn no_branch_to_the_entry_block() {
    check(
        "function @f() {\nblock0:\n    jump block0\n}\n",
        "branches to the entry block block0",
    );
}

#[test]
fn block_arguments_match_parameters() {
    check(
        "function @f() {\nblock0:\n    jump block1\nblock1(v1: f64):\n    return\n}\n",
        "passes 0 argument(s) to block1, which takes 1",
    );
    check(
        "function @f() {\nblock0:\n    v0 = iconst 1\n    jump block1(v0)\nblock1(v1: f64):\n    return\n}\n",
        "argument 0 to block1 v0 has type i64, expected f64",
    );
}

#[test]
fn brif_condition_is_bool() {
    check(
        "function @f(x: f64) {\nblock0(v0: f64):\n    brif v0, block1, block1\nblock1:\n    return\n}\n",
        "condition v0 has type f64, expected bool",
    );
}

// ---------------------------------------------------------------- values

#[test]
fn uses_must_be_defined() {
    check(
        "function @f() -> f64 {\nblock0:\n    v1 = fneg v5\n    return v1\n}\n",
        "uses v5, which is never defined",
    );
    let mut m = module("function @f() -> f64 {\nblock0:\n    v0 = fconst 1.0\n    return v0\n}\n");
    let inst = first_inst(&m, "f");
    *m.func_mut(FuncId::from_u32(0)).dfg.inst_mut(inst) = InstData::Unary {
        op: Opcode::Fneg,
        arg: Value::from_u32(999),
    };
    check_module(&m, "uses v999, which does not exist");
}

#[test]
fn uses_must_be_placed() {
    // The instruction defining v1 is created but never placed.
    let mut m = module("function @f() -> f64 {\nblock0:\n    v0 = fconst 1.0\n    return v0\n}\n");
    let f = m.func_mut(FuncId::from_u32(0));
    let orphan = f.dfg.make_inst(InstData::fconst(2.0), &[Type::F64]);
    let v = f.dfg.inst_results(orphan)[0];
    let ret = f.layout.block_insts(Block::from_u32(0))[1];
    *f.dfg.inst_mut(ret) = InstData::Return { args: vec![v] };
    check_module(&m, "uses v1, whose instruction is not in the layout");
    // A parameter of a block outside the layout.
    let mut m = module("function @f() -> f64 {\nblock0:\n    v0 = fconst 1.0\n    return v0\n}\n");
    let f = m.func_mut(FuncId::from_u32(0));
    let b = f.dfg.make_block();
    let p = f.dfg.append_block_param(b, Type::F64);
    let ret = f.layout.block_insts(Block::from_u32(0))[1];
    *f.dfg.inst_mut(ret) = InstData::Return { args: vec![p] };
    check_module(
        &m,
        "uses v1, a parameter of block1, which is not in the layout",
    );
}

#[test]
fn definitions_dominate_uses() {
    check(
        "function @f(c: bool) -> f64 {
block0(v0: bool):
    brif v0, block1, block2
block1:
    v3 = fconst 1.0
    jump block3
block2:
    jump block3
block3:
    return v3
}
",
        "uses v3, whose definition in block1 does not dominate block3",
    );
    check(
        "function @f() -> f64 {\nblock0:\n    v1 = fneg v2\n    v2 = fconst 1.0\n    return v1\n}\n",
        "uses v2 before its definition",
    );
    // A block parameter used in a block its block does not dominate.
    check(
        "function @f(c: bool) -> f64 {
block0(v0: bool):
    v1 = fconst 1.0
    brif v0, block1(v1), block2
block1(v2: f64):
    jump block2
block2:
    return v2
}
",
        "uses v2, whose definition in block1 does not dominate block2",
    );
}

// ---------------------------------------------------------------- types

#[test]
fn fixed_signature_operand_types() {
    check(
        "function @f(n: i64) {\nblock0(v0: i64):\n    v1 = fadd v0, v0\n    return\n}\n",
        "operand 0 v0 has type i64, expected f64",
    );
    check(
        "function @f(x: f64) {\nblock0(v0: f64):\n    v1 = fcmp lt v0, v1\n    v2 = icmp eq v0, v0\n    return\n}\n",
        "operand 0 v0 has type f64, expected i64",
    );
    check(
        "function @f(n: i64) {\nblock0(v0: i64):\n    v1 = powi v0, 2\n    return\n}\n",
        "operand 0 v0 has type i64, expected f64",
    );
    check(
        "function @f(x: f64) {\nblock0(v0: f64):\n    v1 = len v0\n    return\n}\n",
        "operand 0 v0 has type f64, expected arr",
    );
}

#[test]
fn fixed_signature_result_types() {
    let mut m = module("function @f(x: f64) {\nblock0(v0: f64):\n    return\n}\n");
    let f = m.func_mut(FuncId::from_u32(0));
    let x = f.params()[0];
    let i = f.dfg.make_inst(
        InstData::Unary {
            op: Opcode::Fneg,
            arg: x,
        },
        &[Type::I64],
    );
    f.layout.insert_inst(i, Block::from_u32(0), 0);
    check_module(&m, "result v1 has type i64, expected f64");
    let f = m.func_mut(FuncId::from_u32(0));
    let i = f.dfg.make_inst(InstData::fconst(1.0), &[]);
    f.layout.insert_inst(i, Block::from_u32(0), 0);
    check_module(&m, "has 0 result(s), expected 1");
}

#[test]
fn format_fits_opcode() {
    let mut m =
        module("function @f(x: f64) {\nblock0(v0: f64):\n    v1 = fneg v0\n    return\n}\n");
    let inst = first_inst(&m, "f");
    let x = Value::from_u32(0);
    *m.func_mut(FuncId::from_u32(0)).dfg.inst_mut(inst) = InstData::Unary {
        op: Opcode::Fadd,
        arg: x,
    };
    check_module(&m, "`fadd` cannot be stored in this instruction format");
}

#[test]
fn select_types() {
    check(
        "function @f(x: f64) {\nblock0(v0: f64):\n    v1 = select v0, v0, v0\n    return\n}\n",
        "condition v0 has type f64, expected bool",
    );
    check(
        "function @f(c: bool, x: f64, n: i64) {\nblock0(v0: bool, v1: f64, v2: i64):\n    v3 = select v0, v1, v2\n    return\n}\n",
        "operands v1: f64 and v2: i64 of `select` differ in type",
    );
    check(
        "function @f(c: bool, a: arr) {\nblock0(v0: bool, v1: arr):\n    v3 = select v0, v1, v1\n    return\n}\n",
        "arrays cannot flow through `select`",
    );
}

#[test]
fn return_matches_signature() {
    check(
        "function @f(x: f64) -> f64 {\nblock0(v0: f64):\n    return\n}\n",
        "returns 0 value(s), the signature has 1 result(s)",
    );
    check(
        "function @f(x: f64) -> i64 {\nblock0(v0: f64):\n    return v0\n}\n",
        "returned value 0 v0 has type f64, expected i64",
    );
}

// ---------------------------------------------------------------- calls

#[test]
fn call_arguments_and_results() {
    check(
        &with_helpers(
            "function @f(x: f64) {\nblock0(v0: f64):\n    v1, v2 = call @h(v0)\n    return\n}\n",
        ),
        "passes 1 argument(s), @h takes 2",
    );
    check(
        &with_helpers("function @f(x: f64) {\nblock0(v0: f64):\n    v1, v2 = call @h(v0, v0)\n    return\n}\n"),
        "argument for parameter `k` v0 has type f64, expected i64",
    );
    check(
        &with_helpers("function @f(a: arr) {\nblock0(v0: arr):\n    call @w(v0)\n    return\n}\n"),
        "argument for `mut` parameter `y`: `a` (v0) is not writable",
    );
    // Result count: not expressible in text.
    let mut m = module(&with_helpers(
        "function @f(x: f64, n: i64) {\nblock0(v0: f64, v1: i64):\n    v2, v3 = call @h(v0, v1)\n    return\n}\n",
    ));
    let f = m.func_mut(FuncId::from_u32(0));
    let i = f.dfg.make_inst(
        InstData::Call {
            func: FuncId::from_u32(2),
            args: vec![Value::from_u32(0), Value::from_u32(1)],
        },
        &[Type::F64],
    );
    f.layout.insert_inst(i, Block::from_u32(0), 0);
    check_module(&m, "has 1 result(s), expected 2");
    // A callee that does not exist.
    let f = m.func_mut(FuncId::from_u32(0));
    *f.dfg.inst_mut(i) = InstData::Call {
        func: FuncId::from_u32(77),
        args: vec![],
    };
    check_module(&m, "calls fn77, which does not exist");
}

// ---------------------------------------------------------------- autodiff

#[test]
fn autodiff_activities() {
    let f = |body: &str| {
        with_helpers(&format!(
            "function @f(x: f64, a: arr, d: mut arr, n: i64) {{\nblock0(v0: f64, v1: arr, v2: arr, v3: i64):\n    {body}\n    return\n}}\n"
        ))
    };
    ok(&f(
        "v4, v5 = autodiff forward dual @g(dual v0, v0, dup v1, v1)",
    ));
    ok(&f("v4 = autodiff reverse active @g(active v0, dup v1, v2)"));
    ok(&f("v4 = autodiff reverse const @g(active v0, const v1)"));
    ok(&f("autodiff forward const @g(const v0, const v1)"));
    check(
        &f("v4 = autodiff reverse active @g(active v0)"),
        "gives 1 activities, @g has 2 parameter(s)",
    );
    check(
        &f("v4, v5 = autodiff forward dual @g(dual v0, v0, dup v1)"),
        "the activities take 4 value(s), found 3",
    );
    check(
        &f("autodiff reverse const @g(dual v0, v0, const v1)"),
        "`dual` (parameter `x`) is not allowed in reverse mode",
    );
    check(
        &f("v4, v5 = autodiff forward dual @g(active v0, const v1)"),
        "`active` (parameter `x`) is not allowed in forward mode",
    );
    check(
        &f("v4, v5 = autodiff forward dual @g(const v0, dual v1, v1)"),
        "`dual` applies to f64 parameters, but `a` is arr",
    );
    check(
        &f("v4, v5 = autodiff forward dual @g(dup v0, v0, const v1)"),
        "`dup` applies to arr parameters, but `x` is f64",
    );
    check(
        &f("v4 = autodiff reverse dual @g(active v0, const v1)"),
        "return activity `dual` is not allowed in reverse mode",
    );
    check(
        &f("autodiff forward active @g(const v0, const v1)"),
        "return activity `active` is not allowed in forward mode",
    );
    check(
        &f("v4, v5 = autodiff forward dual @g(dual v3, v0, const v1)"),
        "argument for `x` v3 has type i64, expected f64",
    );
    check(
        &f("v4, v5 = autodiff forward dual @g(dual v0, v3, const v1)"),
        "tangent of `x` v3 has type i64, expected f64",
    );
    check(
        &f("v4 = autodiff reverse active @g(active v0, dup v1, v1)"),
        "shadow of `a`: `a` (v1) is not writable",
    );
}

#[test]
fn autodiff_result_types() {
    let mut m = module(&with_helpers(
        "function @f(x: f64, a: arr) {\nblock0(v0: f64, v1: arr):\n    v2, v3 = autodiff forward dual @g(dual v0, v0, dup v1, v1)\n    return\n}\n",
    ));
    let f = m.func_mut(FuncId::from_u32(0));
    let inst = f.layout.block_insts(Block::from_u32(0))[0];
    let data = f.dfg.inst(inst).clone();
    let i = f.dfg.make_inst(data, &[Type::F64]);
    f.layout.insert_inst(i, Block::from_u32(0), 0);
    check_module(&m, "has 1 result(s), expected 2");
}

// ---------------------------------------------------------------- arrays

#[test]
fn arrays_only_from_entry_params_and_zeros() {
    check(
        "function @f(a: arr) {\nblock0(v0: arr):\n    jump block1(v0)\nblock1(v1: arr):\n    return\n}\n",
        "parameter v1 has type arr: arrays only come from entry-block parameters and `zeros`",
    );
}

#[test]
fn writes_only_to_writable_arrays() {
    check(
        "function @f(a: arr, x: f64) {\nblock0(v0: arr, v1: f64):\n    v2 = iconst 0\n    store v0, v2, v1\n    return\n}\n",
        "`store` target: `a` (v0) is not writable",
    );
    check(
        "function @f(a: arr, x: f64) {\nblock0(v0: arr, v1: f64):\n    fill v0, v1\n    return\n}\n",
        "`fill` target: `a` (v0) is not writable",
    );
    ok("function @f(a: mut arr, x: f64) {\nblock0(v0: arr, v1: f64):\n    v2 = iconst 3\n    v3 = zeros v2, \"t\"\n    fill v3, v1\n    fill v0, v1\n    return\n}\n");
}

// ---------------------------------------------------------------- rules

#[test]
fn rules_exist() {
    let mut m = module("function @f(x: f64) -> f64 {\n}\n");
    m.func_mut(FuncId::from_u32(0)).meta.rules.forward = Some(FuncId::from_u32(9));
    check_module(&m, "the forward rule fn9 does not exist");
}

#[test]
fn forward_rule_signature() {
    check(
        "function @f(x: f64, a: arr) -> f64 rules(forward: @ff) {\n}\n\nfunction @ff(x: f64, a: arr) -> (f64, f64) {\n}\n",
        "the forward rule @ff has signature (f64, arr) -> (f64, f64), expected (f64, f64, arr, arr) -> (f64, f64)",
    );
    check(
        "function @f(x: f64) -> f64 rules(forward: @ff) {\n}\n\nfunction @ff(x: f64, dx: f64) -> f64 {\n}\n",
        "expected (f64, f64) -> (f64, f64)",
    );
}

#[test]
fn reverse_rule_signature() {
    check(
        "function @f(x: f64, a: arr) -> f64 rules(reverse: @fr) {\n}\n\nfunction @fr(x: f64, a: arr, da: arr, dy: f64) -> f64 {\n}\n",
        "the reverse rule @fr has signature (f64, arr, arr, f64) -> (f64), expected (f64, arr, mut arr, f64) -> (f64)",
    );
    check(
        "function @f(x: f64, y: f64) -> f64 rules(reverse: @fr) {\n}\n\nfunction @fr(x: f64, y: f64, dr: f64) -> f64 {\n}\n",
        "expected (f64, f64, f64) -> (f64, f64)",
    );
}

// ---------------------------------------------------------------- regions

const REGION_OK: &str = "function @f(x: f64) -> f64 {
    region0: @sq(v0) -> (v1) blocks(block1) rules(forward: @sqf)
block0(v0: f64):
    jump block1
block1:
    v1 = fmul v0, v0
    return v1
}

function @sq(x: f64) -> f64 rules(forward: @sqf) {
}

function @sqf(x: f64, dx: f64) -> (f64, f64) {
}
";

fn region_text(line: &str) -> String {
    REGION_OK.replace(
        "    region0: @sq(v0) -> (v1) blocks(block1) rules(forward: @sqf)",
        line,
    )
}

#[test]
fn regions() {
    ok(REGION_OK);
    check(
        &region_text("    region0: @sq(v0) -> (v1) blocks(block4)"),
        "block4 is not in the layout",
    );
    check(
        &region_text("    region0: @sq(v0) -> (v1) blocks()"),
        "a region has at least one block",
    );
    check(
        &region_text("    region0: @sq(v0) -> (v9) blocks(block1)"),
        "result v9 is not a defined value",
    );
    check(
        &region_text("    region0: @sq(v0, v0) -> (v1) blocks(block1)"),
        "has 2 argument(s), the callee has 1",
    );
    check(
        &region_text("    region0: @sq(v0) -> (v1) blocks(block1) parent(region3)"),
        "the parent region3 does not exist",
    );
    check(
        &region_text("    region0: @sq(v0) -> (v1) blocks(block1) parent(region1)\n    region1: @sq(v0) -> (v1) blocks(block1) parent(region0)"),
        "region parents form a cycle",
    );
    check(
        &region_text("    region0: @sq(v0) -> (v1) blocks(block1) rules(reverse: @sqf)"),
        "the reverse rule @sqf has signature",
    );
    let mut m = module(REGION_OK);
    m.func_mut(FuncId::from_u32(0)).regions[Region::from_u32(0)].callee = FuncId::from_u32(40);
    check_module(&m, "the callee fn40 does not exist");
}

// ---------------------------------------------------------- inlined code

const INLINED_OK: &str = "function @f(x: f64) -> f64 {
    inlined0: @g blocks(block1, block2)
    inlined1: @h blocks(block2) parent(inlined0)
block0(v0: f64):
    jump block1
block1:
    jump block2
block2:
    v1 = fmul v0, v0
    return v1
}
";

fn inlined_text(lines: &str) -> String {
    INLINED_OK.replace(
        "    inlined0: @g blocks(block1, block2)\n    inlined1: @h blocks(block2) parent(inlined0)",
        lines,
    )
}

#[test]
fn inlined_provenance() {
    ok(INLINED_OK);
    // A block that is not laid out, and an entry with no blocks, are fine.
    ok(&inlined_text(
        "    inlined0: @g blocks(block1, block7)\n    inlined1: @h blocks()",
    ));
    check(
        &inlined_text("    inlined0: @g blocks(block1, block2, block1)"),
        "block1 is listed twice",
    );
    check(
        &inlined_text(
            "    inlined0: @g blocks(block1)\n    inlined1: @h blocks(block2) parent(inlined3)",
        ),
        "the parent inlined3 does not exist",
    );
    check(
        &inlined_text("    inlined0: @g blocks(block1) parent(inlined1)\n    inlined1: @h blocks(block1) parent(inlined0)"),
        "inlined parents form a cycle",
    );
    check(
        &inlined_text(
            "    inlined0: @g blocks(block1)\n    inlined1: @h blocks(block2) parent(inlined0)",
        ),
        "block2 is not listed by its parent inlined0",
    );
    // What the text cannot express: a block number past the function's.
    let mut m = module(INLINED_OK);
    m.func_mut(FuncId::from_u32(0)).inlined[adze_ir::Inlined::from_u32(1)]
        .blocks
        .push(Block::from_u32(99));
    check_module(&m, "block99 does not exist");
    let e = verify_module(&m).unwrap_err();
    assert!(matches!(e.errors[0].entity, AnyEntity::Inlined(_)));
    assert_eq!(e.errors[0].location, "inlined1");
    assert!(e.listing().contains("    inlined1: @h blocks(block2, block99) parent(inlined0)\n    ; error: block99 does not exist"), "{}", e.listing());
}

// ---------------------------------------------------------------- reports

#[test]
fn report_names_the_pass_and_prints_errors_inline() {
    let m = module(
        "function @f(n: i64) -> f64 {\nblock0(v0: i64):\n    v1 = fadd v0, v0\n    return v1\n}\n",
    );
    let e = verify_after_pass(&m, "inline").unwrap_err();
    assert_eq!(e.pass.as_deref(), Some("inline"));
    assert_eq!(e.len(), 2);
    let first = &e.errors[0];
    assert_eq!(first.func, "f");
    assert_eq!(first.location, "v1 = fadd v0, v0");
    assert!(matches!(first.entity, AnyEntity::Inst(_)));
    assert_eq!(
        e.to_string(),
        "pass `inline` produced invalid IR:
@f: v1 = fadd v0, v0: operand 0 v0 has type i64, expected f64
@f: v1 = fadd v0, v0: operand 1 v0 has type i64, expected f64

function @f(n: i64) -> f64 {
block0(v0: i64):
    v1 = fadd v0, v0
    ; error: operand 0 v0 has type i64, expected f64
    ; error: operand 1 v0 has type i64, expected f64
    return v1
}
"
    );
}

#[test]
fn verify_function_checks_one_function_and_rejects_bad_ids() {
    let m = module("function @f() {\nblock0:\n}\n\nfunction @g() {\nblock0:\n    return\n}\n");
    assert!(verify_function(&m, FuncId::from_u32(1)).is_ok());
    assert!(verify_function(&m, FuncId::from_u32(0)).is_err());
    let e = verify_function(&m, FuncId::from_u32(5)).unwrap_err();
    assert!(e.contains("fn5 is not a function of the module"));
}

#[test]
fn a_written_array_argument_aliases_no_other_argument() {
    let text = "function @f(n: i64) {
block0(v0: i64):
    v1 = zeros v0, \"t\"
    call @rw(v1, v1)
    return
}

function @rw(a: arr, b: mut arr) {
}
";
    check(
        text,
        "is passed to `mut` parameter `b` and to the read-only `a`",
    );
    ok("function @f(n: i64) {
block0(v0: i64):
    v1 = zeros v0, \"t\"
    v2 = zeros v0, \"u\"
    call @rw(v1, v2)
    call @rr(v1, v1)
    call @ww(v2, v2)
    return
}

function @rw(a: arr, b: mut arr) {
}

function @rr(a: arr, b: arr) {
}

function @ww(a: mut arr, b: mut arr) {
}
");
}
