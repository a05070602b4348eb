//! The verifier. The negative and positive cases written as text are
//! filetests: `tests/filetests/*.ir` (`; test: verify`, an `; error:` line
//! after each line at fault; see docs/testing.md), run by [`filetests`].
//! Here: what the text cannot express (made by corrupting a parsed
//! function), and the error report's format.

use adze_ir::parse::parse_module;
use adze_ir::verify::{
    verify_after_pass, verify_function, verify_module, AnyEntity, VerifierError,
};
use adze_ir::{Block, BlockCall, FuncId, InstData, Module, Opcode, Region, Type, Value};
use adze_test_support::{run_filetests, Config, TestFile};

fn module(text: &str) -> Module {
    parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn check_module(m: &Module, msg: &str) {
    match verify_module(m) {
        Ok(()) => panic!("verified, expected `{msg}`:\n{m}"),
        Err(e) => assert!(e.contains(msg), "expected `{msg}`, got:\n{e}"),
    }
}

/// Puts a new instruction of `data`, with results of `types`, first in
/// `block0` of the module's first function (which the text cannot say when
/// the result types are wrong).
fn insert_first(m: &mut Module, data: InstData, types: &[Type]) -> adze_ir::Inst {
    let f = m.func_mut(FuncId::from_u32(0));
    let i = f.dfg.make_inst(data, types);
    f.layout.insert_inst(i, Block::from_u32(0), 0);
    i
}

/// The first placed instruction of function `name`.
fn first_inst(m: &Module, name: &str) -> adze_ir::Inst {
    let f = m.func(m.get(name).unwrap());
    f.layout.insts().next().unwrap().1
}

/// `; test: verify`: parses the module and verifies it. Each expected error
/// is an `; error: TEXT` line after the line it is about (the function's
/// header line, a region or inlined line, a block label, an instruction),
/// as the verifier prints errors in its listing: the file passes if every
/// error the verifier reports is claimed by an annotation at its place
/// whose text it contains, and every annotation claims one. A file without
/// annotations must verify.
#[test]
fn filetests() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/filetests");
    let config = Config {
        extensions: &[("ir", ";")],
        directives: &["error"],
    };
    run_filetests(dir, &config, |file| match file.command[0].as_str() {
        "verify" if file.args().is_empty() => verify(file),
        other => Err(format!(
            "unknown command `{other}` (this directory has `verify`)"
        )),
    });
}

/// Where an annotation stands: the function, and the entity of the line
/// above it.
#[derive(Clone, Debug)]
enum Anchor {
    Header,
    /// `block3`, `region0`, `inlined1`: what the verifier calls the entity.
    Named(String),
    /// An instruction: its text (without a source location) and its
    /// position among the function's instructions (the verifier names an
    /// instruction of a function it cannot print by its number, which the
    /// parser assigns in text order).
    Inst(String, usize),
}

impl std::fmt::Display for Anchor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Anchor::Header => f.write_str("the header"),
            Anchor::Named(n) => f.write_str(n),
            Anchor::Inst(text, _) => write!(f, "`{text}`"),
        }
    }
}

struct Expected {
    func: String,
    anchor: Anchor,
    text: String,
    line: usize,
    claimed: bool,
}

fn verify(file: &TestFile) -> Result<String, String> {
    let module = parse_module(file.input()).map_err(|e| format!("does not parse: {e}"))?;
    let mut expected = annotations(file)?;
    let errors = match verify_module(&module) {
        Ok(()) => Vec::new(),
        Err(e) => e.errors,
    };
    let mut problems = Vec::new();
    for e in &errors {
        let claim = expected.iter_mut().find(|x| {
            !x.claimed && x.func == e.func && at(&x.anchor, e) && e.message.contains(&x.text)
        });
        match claim {
            Some(x) => x.claimed = true,
            None => problems.push(format!("{}: unexpected error: {e}", file.name)),
        }
    }
    for x in expected.iter().filter(|x| !x.claimed) {
        problems.push(format!(
            "{}:{}: no error `{}` at {} of @{}",
            file.name, x.line, x.text, x.anchor, x.func
        ));
    }
    if problems.is_empty() {
        Ok(String::new())
    } else {
        Err(problems.join("\n"))
    }
}

/// Is `e` about the entity `anchor` names?
fn at(anchor: &Anchor, e: &VerifierError) -> bool {
    match (anchor, &e.entity) {
        (Anchor::Header, AnyEntity::Function) => true,
        (Anchor::Named(n), AnyEntity::Block(_) | AnyEntity::Region(_) | AnyEntity::Inlined(_)) => {
            *n == e.location
        }
        (Anchor::Inst(text, k), AnyEntity::Inst(_)) => {
            *text == e.location || e.location == format!("inst{k}")
        }
        _ => false,
    }
}

/// The file's `; error:` annotations with the place each is about.
fn annotations(file: &TestFile) -> Result<Vec<Expected>, String> {
    let mut out = Vec::new();
    let mut func = None::<String>;
    let mut anchor = None::<Anchor>;
    let mut insts = 0;
    let mut errors = file.directives("error").peekable();
    for (n, raw) in file.input().lines().enumerate() {
        let line_no = n + 1;
        let line = raw.split(';').next().unwrap_or("").trim();
        if errors.peek().is_some_and(|d| d.line == line_no) {
            let d = errors.next().unwrap();
            let (Some(f), Some(a)) = (&func, &anchor) else {
                return Err(format!(
                    "{}:{line_no}: `; error:` must follow the line it is about",
                    file.name
                ));
            };
            out.push(Expected {
                func: f.clone(),
                anchor: a.clone(),
                text: d.value.clone(),
                line: line_no,
                claimed: false,
            });
            continue;
        }
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("function @") {
            let name = rest.split(['(', ' ']).next().unwrap_or("");
            func = Some(name.to_string());
            anchor = Some(Anchor::Header);
            insts = 0;
        } else if line == "}" {
            anchor = None;
        } else if let Some(entity) = named_entity(line) {
            anchor = Some(Anchor::Named(entity));
        } else {
            let text = match line.rsplit_once(" !") {
                Some((inst, loc)) if loc.contains(':') => inst.trim_end(),
                _ => line,
            };
            anchor = Some(Anchor::Inst(text.to_string(), insts));
            insts += 1;
        }
    }
    Ok(out)
}

/// `block3` for `block3(v1: f64):` or `block3:`; `region0` / `inlined1` for
/// the metadata lines.
fn named_entity(line: &str) -> Option<String> {
    let word: String = line
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    let rest = &line[word.len()..];
    let is = |prefix: &str| {
        word.strip_prefix(prefix)
            .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
    };
    let label = is("block") && (rest.starts_with('(') || rest.starts_with(':'));
    let meta = (is("region") || is("inlined")) && rest.starts_with(':');
    (label || meta).then_some(word)
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

#[test]
fn branch_targets_exist() {
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
fn uses_must_exist() {
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
fn fixed_signature_result_types() {
    let mut m = module("function @f(x: f64) {\nblock0(v0: f64):\n    return\n}\n");
    let arg = m.func(FuncId::from_u32(0)).params()[0];
    let fneg = InstData::Unary {
        op: Opcode::Fneg,
        arg,
    };
    insert_first(&mut m, fneg, &[Type::I64]);
    check_module(&m, "result v1 has type i64, expected f64");
    insert_first(&mut m, InstData::fconst(1.0), &[]);
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
fn call_results_and_callees() {
    // Result count: not expressible in text.
    let mut m = module(&with_helpers(
        "function @f(x: f64, n: i64) {\nblock0(v0: f64, v1: i64):\n    v2, v3 = call @h(v0, v1)\n    return\n}\n",
    ));
    let call = InstData::Call {
        func: FuncId::from_u32(2),
        args: vec![Value::from_u32(0), Value::from_u32(1)],
    };
    let i = insert_first(&mut m, call, &[Type::F64]);
    check_module(&m, "has 1 result(s), expected 2");
    // A callee that does not exist.
    let f = m.func_mut(FuncId::from_u32(0));
    *f.dfg.inst_mut(i) = InstData::Call {
        func: FuncId::from_u32(77),
        args: vec![],
    };
    check_module(&m, "calls fn77, which does not exist");
}

#[test]
fn autodiff_result_types() {
    let mut m = module(&with_helpers(
        "function @f(x: f64, a: arr) {\nblock0(v0: f64, v1: arr):\n    v2, v3 = autodiff forward dual @g(dual v0, v0, dup v1, v1)\n    return\n}\n",
    ));
    let data = m
        .func(FuncId::from_u32(0))
        .dfg
        .inst(first_inst(&m, "f"))
        .clone();
    insert_first(&mut m, data, &[Type::F64]);
    check_module(&m, "has 1 result(s), expected 2");
}

#[test]
fn rules_exist() {
    let mut m = module("function @f(x: f64) -> f64 {\n}\n");
    m.func_mut(FuncId::from_u32(0)).meta.rules.forward = Some(FuncId::from_u32(9));
    check_module(&m, "the forward rule fn9 does not exist");
}

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

#[test]
fn region_callees_exist() {
    let mut m = module(REGION_OK);
    m.func_mut(FuncId::from_u32(0)).regions[Region::from_u32(0)].callee = FuncId::from_u32(40);
    check_module(&m, "the callee fn40 does not exist");
}

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

#[test]
fn inlined_blocks_exist() {
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
