//! Programs that compile: their IR, checked by the IR verifier, and the
//! language decisions that the IR shows. Source in, IR out cases are the
//! filetests `tests/filetests/*.adz` (`// test: lower`, see
//! docs/testing.md); what needs Rust around it is here.

use adze_ir::{verify::verify_module, InlineHint, Module, Type};
use adze_test_support::{run_filetests, Config};

fn compile(src: &str) -> Module {
    let module = match adze_lang::compile("test.adz", src) {
        Ok(m) => m,
        Err(d) => panic!("{}", d.render()),
    };
    if let Err(e) = verify_module(&module) {
        panic!("verifier: {e}\n{module}");
    }
    module
}

/// `// test: lower`: the file compiles (under its own name) and verifies;
/// the output is the module.
#[test]
fn filetests() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/filetests");
    let config = Config {
        extensions: &[("adz", "//")],
        directives: &[],
    };
    run_filetests(dir, &config, |file| match file.command[0].as_str() {
        "lower" if file.args().is_empty() => {
            let name = file.path.file_name().unwrap().to_string_lossy();
            let module = adze_lang::compile(&name, file.input()).map_err(|d| d.render())?;
            verify_module(&module).map_err(|e| e.to_string())?;
            Ok(module.to_string())
        }
        other => Err(format!(
            "unknown command `{other}` (this directory has `lower`)"
        )),
    });
}

#[test]
fn rules_and_attributes() {
    let m = compile(include_str!("filetests/rules_and_attributes.adz"));
    let names: Vec<&str> = m.iter().map(|(_, f)| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "sq",
            "sq.rule.forward",
            "sq.rule.reverse",
            "norm",
            "norm.rule.forward",
            "norm.rule.reverse"
        ]
    );
    let sq = m.func(m.get("sq").unwrap());
    assert_eq!(sq.meta.inline, InlineHint::Never);
    assert_eq!(sq.meta.rules.forward, m.get("sq.rule.forward"));
    assert_eq!(sq.meta.rules.reverse, m.get("sq.rule.reverse"));
    let norm = m.func(m.get("norm").unwrap());
    assert_eq!(norm.meta.inline, InlineHint::Always);
    assert!(norm.sig.params[0].mutable);
    assert_eq!(norm.sig.results, [Type::F64, Type::Bool]);
}

#[test]
fn module_order_is_source_order_with_rules_after_their_fn() {
    let m = compile(
        "
        rule reverse b(x: f64, d: f64) -> f64 { d }
        fn a() {}
        fn b(x: f64) -> f64 { x }
        fn c() { a(); }
    ",
    );
    let names: Vec<&str> = m.iter().map(|(_, f)| f.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "b.rule.reverse", "c"]);
}

#[test]
fn params_and_zeros_keep_source_names() {
    let m = compile(
        "fn f(x: [f64], out: mut [f64]) { let scratch = zeros(3); out[0] = x[0] + scratch[0]; }",
    );
    let text = m.to_string();
    assert!(text.contains("function @f(x: arr, out: mut arr)"), "{text}");
    assert!(text.contains("zeros v2, \"scratch\""), "{text}");
}

#[test]
fn an_empty_file_has_no_functions() {
    assert_eq!(compile("// nothing\n").len(), 0);
}

/// Every intrinsic of the opcode table is a builtin of the language: a call
/// with its arity lowers to its opcode, and its name cannot name a `fn`.
#[test]
fn every_intrinsic_of_the_opcode_table_is_callable() {
    use adze_ir::Opcode;
    for &op in Opcode::ALL.iter().filter(|op| op.is_intrinsic()) {
        let name = op.intrinsic_name().unwrap();
        assert!(adze_lang::check::is_builtin(name), "{name}");
        let arity = op.fixed_signature().unwrap().0.len();
        let args = ["x", "y"][..arity].join(", ");
        let m = compile(&format!("fn f(x: f64, y: f64) -> f64 {{ {name}({args}) }}"));
        let f = m.func(m.get("f").unwrap());
        let ops: Vec<Opcode> = f
            .layout
            .insts()
            .map(|(_, i)| f.dfg.inst(i).opcode())
            .collect();
        assert_eq!(ops, [op, Opcode::Return], "{name}");
        let clash = adze_lang::compile("t.adz", &format!("fn {name}(x: f64) -> f64 {{ x }}"));
        assert!(clash.is_err(), "a fn may not be called {name}");
    }
}

/// `docs/language.md` has one line for each intrinsic, and none for
/// anything else.
#[test]
fn docs_language_md_lists_every_intrinsic() {
    use adze_ir::Opcode;
    let doc = include_str!("../../../docs/language.md");
    let start = doc
        .find("| intrinsic | meaning |")
        .expect("the intrinsics table");
    let mut listed: Vec<String> = doc[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .flat_map(|l| {
            let cell = l.split(" | ").next().unwrap_or("");
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(|call| call.split('(').next().unwrap_or("").to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    let mut table: Vec<String> = Opcode::ALL
        .iter()
        .filter_map(|op| op.intrinsic_name())
        .map(str::to_string)
        .collect();
    listed.sort();
    table.sort();
    assert_eq!(listed, table);
}
