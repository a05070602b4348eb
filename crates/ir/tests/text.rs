//! The text format: print → parse → print is the identity (hand-written
//! texts covering every opcode, metadata and regions; builder-made functions;
//! random well-formed IR), parse errors carry a line and a column, and no
//! input makes the parser panic.

use adze_ir::parse::{parse_into, parse_module, ParseError};
use adze_ir::verify::verify_module;
use adze_ir::{
    ArgActivity, AutodiffSpec, CmpCond, FuncBuilder, FuncId, Function, InstData, Mode, Module,
    Opcode, Param, RetActivity, Signature, SourceLoc, Type, Value,
};
use proptest::prelude::*;
use std::collections::HashSet;

/// Every opcode, every fconst spelling, string escapes, rules, inline hints,
/// declarations, nested regions, block numbers out of order and a value
/// defined after a larger-numbered one.
const ALL: &str = r#"function @poly(x: f64, a: arr) -> f64 rules(forward: @poly.fwd, reverse: @poly.rev) {
block0(v0: f64, v1: arr):
    v2 = iconst 0
    v3 = load v1, v2
    v4 = fmul v0, v3
    return v4
}

function @poly.fwd(x: f64, x.t: f64, a: arr, a.t: arr) -> (f64, f64) inline(never) {
}

function @poly.rev(x: f64, a: arr, a.adj: mut arr, r0.adj: f64) -> f64 {
}

function @helper(x: f64, k: i64) -> (f64, i64) {
block0(v0: f64, v1: i64):
    return v0, v1
}

function @all(x: f64, n: i64, a: arr, out: mut arr) -> (f64, bool) inline(always) {
    region0: @poly(v0, v2) -> (v60) blocks(block5) rules(forward: @poly.fwd, reverse: @poly.rev)
    region1: @poly(v0, v2) -> (v60) blocks(block5) parent(region0)
block0(v0: f64, v1: i64, v2: arr, v3: arr):
    v4 = fconst 1.5
    v5 = fconst inf
    v6 = fconst -inf
    v7 = fconst NaN
    v8 = fconst -0.0
    v9 = fconst 1e-7
    v10 = iconst -42
    v11 = bconst true
    v12 = fadd v0, v4
    v13 = fsub v12, v5
    v14 = fmul v13, v6
    v15 = fdiv v14, v7
    v16 = fneg v15
    v17 = powi v16, -3
    v18 = iadd v1, v10
    v19 = isub v18, v10
    v20 = imul v19, v1
    v21 = idiv v20, v1
    v22 = irem v21, v1
    v23 = ineg v22
    v93 = band v23, v1
    v94 = bor v93, v10
    v95 = ishl v94, v1
    v96 = sshr v95, v1
    v24 = not v11
    v25 = sitof v23
    v97 = ftosi v25
    v80 = tobits v25
    v81 = frombits v80
    v26 = sin v25
    v27 = cos v26
    v28 = tan v27
    v29 = asin v28
    v30 = acos v29
    v31 = atan v30
    v32 = sinh v31
    v33 = cosh v32
    v34 = tanh v33
    v35 = exp v34
    v36 = expm1 v35
    v37 = log v36
    v38 = log1p v37
    v39 = sqrt v38
    v40 = cbrt v39
    v41 = abs v40
    v42 = floor v41
    v43 = ceil v42
    v44 = round v43
    v45 = sign v44
    v92 = erf v45
    v120 = erfc v92
    v121 = log2 v120
    v122 = log10 v121
    v123 = exp2 v122
    v124 = asinh v123
    v125 = acosh v124
    v126 = atanh v125
    v127 = lgamma v126
    v128 = digamma v127
    v129 = polygamma v8, v128
    v46 = atan2 v45, v8
    v47 = pow v46, v9
    v48 = hypot v47, v0
    v49 = min v48, v17
    v50 = max v49, v0
    v51 = fcmp lt v50, v0
    v52 = icmp ge v1, v10
    v53 = select v51, v50, v0
    v54 = len v2
    v55 = load v2, v54
    store v3, v54, v55
    v56 = zeros v54, "tmp \"q\"\n\\é\u{7f}"
    fill v56, v53
    samelen v2, v56
    push 0, v53
    push 3, v52
    v90 = pop 3, bool
    v91 = pop 0, f64
    v130 = tapelen 0
    v131 = tapeover 0, v130
    tapecut 0, v130
    checkpoint v130
    v57, v58 = call @helper(v53, v1)
    v59, v61 = autodiff forward dual @poly(dual v0, v4, dup v2, v3)
    v62 = autodiff reverse active @poly(active v0, dup v2, v56)
    autodiff forward const @helper(const v0, const v58)
    brif v52, block5, block2(v57)
block5:
    v63 = iconst 0
    v64 = load v2, v63
    v60 = fmul v0, v64
    jump block2(v60)
block2(v65: f64):
    v66 = fadd v65, v59
    return v66, v24
}

function @ints(ix: mut iarr, n: i64) -> i64 {
block0(v0: iarr, v1: i64):
    v2 = izeros v1, "t"
    v3 = ilen v0
    v4 = iload v0, v3
    istore v2, v1, v4
    ifill v0, v3
    v5 = slice v0, v1, v3
    v6 = slice v2, v1, v1
    v7 = view v6, v1, v1
    disjoint v5, v0
    return v4
}

function @lanes(a: arr, out: mut arr, x: f64) -> f64 {
block0(v0: arr, v1: arr, v2: f64):
    v3 = iconst 0
    v4 = vsplat v2
    v5 = vpack v2, v2
    v6 = vload v0, v3
    v7 = vfadd v4, v5
    v8 = vfsub v7, v6
    v9 = vfmul v8, v8
    v10 = vfdiv v9, v4
    v11 = vfneg v10
    v12 = vpowi v11, -2
    v13 = vsqrt v12
    vstore v1, v3, v13
    v14 = vlane0 v13
    v15 = vlane1 v13
    v18 = vshift v13, v12
    v16 = fadd v14, v15
    v17 = apart v0, v1
    return v16
}
"#;

fn roundtrip(text: &str) -> Module {
    let module = parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(module.to_string(), text);
    module
}

#[test]
fn every_opcode_roundtrips_and_verifies() {
    let module = roundtrip(ALL);
    verify_module(&module).unwrap_or_else(|e| panic!("{e}"));
    let mut seen = HashSet::new();
    for (_, f) in module.iter() {
        for (_, inst) in f.layout.insts() {
            seen.insert(f.dfg.inst(inst).opcode());
        }
    }
    for op in Opcode::ALL {
        assert!(seen.contains(op), "{op} is not covered");
    }
}

#[test]
fn entity_numbers_types_and_metadata_are_preserved() {
    let module = roundtrip(ALL);
    let all = module.func(module.get("all").unwrap());
    let v = |n| Value::from_u32(n);
    assert_eq!(
        all.dfg.value_type(v(53)),
        Type::F64,
        "select takes its operand's type"
    );
    assert_eq!(all.dfg.value_type(v(56)), Type::Array);
    assert_eq!(all.dfg.value_type(v(58)), Type::I64);
    assert_eq!(all.dfg.value_type(v(61)), Type::F64);
    assert!(all.sig.params[3].mutable && !all.sig.params[2].mutable);
    assert_eq!(all.layout.blocks().len(), 3);
    assert_eq!(all.regions.len(), 2);
    let poly = module.func(module.get("poly").unwrap());
    assert_eq!(poly.meta.rules.reverse, module.get("poly.rev"));
    assert!(module
        .func(module.get("poly.fwd").unwrap())
        .is_declaration());
    // The zeros name went through the string escapes.
    let name = all.array_name(v(56));
    assert_eq!(name, "tmp \"q\"\n\\é\u{7f}");
}

/// Provenance of inlined code, nested two deep, with a callee that is not
/// in the module (a name, not a reference) and a listed block that a pass
/// removed from the layout.
const INLINED: &str = "function @f(x: arr) -> f64 {
    inlined0: @mid blocks(block2, block3, block4, block5)
    inlined1: @read_at blocks(block3, block5) parent(inlined0)
    inlined2: @gone blocks()
block0(v0: arr):
    v1 = len v0
    jump block2
block2:
    jump block3
block3:
    v2 = load v0, v1
    jump block4(v2)
block4(v3: f64):
    return v3
}
";

#[test]
fn inlined_provenance_roundtrips_and_verifies() {
    let module = roundtrip(INLINED);
    verify_module(&module).unwrap_or_else(|e| panic!("{e}"));
    let f = module.func(module.get("f").unwrap());
    assert_eq!(f.inlined.len(), 3);
    let b = |n| adze_ir::Block::from_u32(n);
    assert_eq!(f.inlined_chain(b(3)), ["read_at", "mid"]);
    assert_eq!(f.inlined_chain(b(2)), ["mid"]);
    assert!(f.inlined_chain(b(0)).is_empty());
    let owner = f.innermost_inlined_by_block();
    for n in 0..f.dfg.num_blocks() as u32 {
        assert_eq!(owner[n as usize], f.innermost_inlined(b(n)), "block{n}");
    }
    // block5 is listed but not laid out: it exists, unplaced.
    assert!(f.dfg.block_is_valid(b(5)) && !f.layout.is_block_inserted(b(5)));
}

/// Array results: a function returning an array, an `iarr` beside a
/// scalar, a tuple of two arrays and a scalar, calls receiving them, an
/// array result returned on (moved), and `autodiff reverse dup(..)` with
/// three cotangents, one, and none (`dup()` for an `iarr` result), with
/// source locations.
const ARRAY_RESULTS: &str = r#"function @scaled(x: arr, s: f64) -> arr {
block0(v0: arr, v1: f64):
    v2 = len v0
    v3 = zeros v2, "y"
    v4 = iconst 0
    jump block1(v4)
block1(v5: i64):
    v6 = icmp lt v5, v2
    brif v6, block2, block3
block2:
    v7 = load v0, v5
    v8 = fmul v1, v7
    store v3, v5, v8
    v9 = iconst 1
    v10 = iadd v5, v9
    jump block1(v10)
block3:
    return v3
}

function @squares(n: i64) -> (iarr, f64) {
block0(v0: i64):
    v1 = izeros v0, "k"
    v2 = fconst 0.5
    return v1, v2 !3:5
}

function @split(x: arr, s: f64) -> (arr, f64, arr) {
block0(v0: arr, v1: f64):
    v2 = call @scaled(v0, v1)
    v3 = fneg v1
    v4 = call @scaled(v0, v3)
    v5 = iconst 0
    v6 = load v2, v5
    return v4, v6, v2
}

function @use(x: arr, dx: mut arr, dy: arr, dz: arr, n: i64) -> f64 {
block0(v0: arr, v1: arr, v2: arr, v3: arr, v4: i64):
    v5 = fconst 2.0
    v6, v7, v8 = call @split(v0, v5) !9:18
    v9, v10 = call @squares(v4)
    v11 = fconst 1.0
    v12 = autodiff reverse dup(v2, v11, v3) @split(dup v0, v1, active v5) !10:5
    autodiff reverse dup(v2) @scaled(dup v0, v1, const v5)
    autodiff reverse dup(v11) @squares(const v4)
    autodiff reverse dup() @index(const v4)
    v14 = fadd v7, v12
    return v14
}

function @index(n: i64) -> iarr {
}
"#;

#[test]
fn array_results_and_dup_cotangents_roundtrip_and_verify() {
    let module = roundtrip(ARRAY_RESULTS);
    verify_module(&module).unwrap_or_else(|e| panic!("{e}"));
    // parse → print → parse → print: the same text again.
    let again = parse_module(&module.to_string()).unwrap();
    assert_eq!(again.to_string(), ARRAY_RESULTS);
    let split = module.func(module.get("split").unwrap());
    assert_eq!(
        split.sig.results,
        [Type::Array, Type::F64, Type::Array],
        "array results keep their place among the scalars"
    );
    let squares = module.func(module.get("squares").unwrap());
    assert_eq!(squares.sig.results, [Type::IArray, Type::F64]);
    let v = |n| Value::from_u32(n);
    let using = module.func(module.get("use").unwrap());
    assert_eq!(using.dfg.value_type(v(6)), Type::Array);
    assert_eq!(using.dfg.value_type(v(9)), Type::IArray);
    assert!(using.owns_array(v(6)) && using.owns_array(v(9)));
    assert!(using.array_is_writable(v(8)), "a call's array result");
    assert!(!using.owns_array(v(0)) && !using.owns_array(v(1)));
    // The cotangents are the request's last values, after the arguments,
    // one per f64 or arr result of the callee (none for iarr).
    let requests: Vec<_> = using
        .layout
        .insts()
        .filter_map(|(_, i)| match using.dfg.inst(i) {
            InstData::Autodiff { spec, args } => Some((spec.clone(), args.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(requests.len(), 4);
    let (spec, args) = &requests[0];
    assert_eq!(spec.ret, RetActivity::Dup);
    assert_eq!(args.as_slice(), [v(0), v(1), v(5), v(2), v(11), v(3)]);
    assert_eq!(
        module.autodiff_seed_types(spec),
        [Type::Array, Type::F64, Type::Array]
    );
    assert_eq!(module.autodiff_result_types(spec), [Type::F64]);
    let (spec, args) = &requests[1];
    assert_eq!(args.as_slice(), [v(0), v(1), v(5), v(2)]);
    assert_eq!(module.autodiff_seed_types(spec), [Type::Array]);
    let (spec, args) = &requests[2];
    assert_eq!(args.as_slice(), [v(4), v(11)]);
    assert_eq!(module.autodiff_seed_types(spec), [Type::F64]);
    let (spec, args) = &requests[3];
    assert_eq!(args.as_slice(), [v(4)]);
    assert!(module.autodiff_seed_types(spec).is_empty());
}

#[test]
fn malformed_dup_cotangents_are_parse_errors() {
    let f = "function @g(x: arr) -> arr {\n}\nfunction @f(x: arr, dx: mut arr, dy: arr) {\nblock0(v0: arr, v1: arr, v2: arr):\n";
    let cases: &[(&str, usize, usize, &str)] = &[
        (
            "    autodiff reverse dup @g(dup v0, v1)\n",
            5,
            26,
            "expected `(`",
        ),
        (
            "    autodiff reverse dup(v2 @g(dup v0, v1)\n",
            5,
            29,
            "expected `,`",
        ),
        (
            "    autodiff reverse dup(dy) @g(dup v0, v1)\n",
            5,
            26,
            "expected a value `vN`, found `dy`",
        ),
        (
            "    autodiff reverse dup(v2,) @g(dup v0, v1)\n",
            5,
            29,
            "expected a value",
        ),
        (
            "    autodiff reverse dupe(v2) @g(dup v0, v1)\n",
            5,
            22,
            "expected `dual`, `active`, `const` or `dup`",
        ),
    ];
    for &(inst, line, col, msg) in cases {
        let text = format!("{f}{inst}}}\n");
        let e = parse_err(&text);
        assert!(
            e.line == line && e.col == col && e.message.contains(msg),
            "for {inst:?}\n got {e}\nwant {line}:{col}: ..{msg}.."
        );
    }
}

#[test]
fn fconst_spellings() {
    for (text, want) in [
        ("inf", f64::INFINITY),
        ("-inf", f64::NEG_INFINITY),
        ("-0.0", -0.0),
        ("1e-7", 1e-7),
        ("1e300", 1e300),
        ("5e-324", 5e-324),
        ("0.1", 0.1),
        ("-2.5", -2.5),
    ] {
        let src = format!(
            "function @f() -> f64 {{\nblock0:\n    v0 = fconst {text}\n    return v0\n}}\n"
        );
        let m = roundtrip(&src);
        let f = m.func(FuncId::from_u32(0));
        let inst = f.layout.insts().next().unwrap().1;
        assert_eq!(f.dfg.inst(inst), &InstData::fconst(want), "{text}");
    }
    let m = roundtrip("function @f() -> f64 {\nblock0:\n    v0 = fconst NaN\n    return v0\n}\n");
    let f = m.func(FuncId::from_u32(0));
    let InstData::FConst { bits } = f.dfg.inst(f.layout.insts().next().unwrap().1) else {
        panic!()
    };
    assert!(f64::from_bits(*bits).is_nan());
    // Any other NaN (sign, quiet bit, payload) prints as its bits and
    // reads back bit for bit.
    for bits in [
        0xfff8_0000_0000_0000u64,
        0x7ff8_0000_0000_0001,
        0x7ff0_0000_0000_0001,
    ] {
        let src = format!(
            "function @f() -> f64 {{\nblock0:\n    v0 = fconst 0x{bits:016x}\n    return v0\n}}\n"
        );
        let m = roundtrip(&src);
        let f = m.func(FuncId::from_u32(0));
        let inst = f.layout.insts().next().unwrap().1;
        assert_eq!(f.dfg.inst(inst), &InstData::FConst { bits }, "{src}");
    }
}

#[test]
fn gaps_in_numbering_and_forward_references() {
    // @g is called before it is defined; block9 and v7 leave gaps.
    let text = "function @f(x: f64) -> f64 {
block0(v0: f64):
    jump block9(v0)
block9(v7: f64):
    v3 = call @g(v7)
    return v3
}

function @g(y: f64) -> f64 {
block0(v0: f64):
    return v0
}
";
    let m = roundtrip(text);
    let f = m.func(m.get("f").unwrap());
    assert_eq!(f.dfg.num_values(), 8);
    assert_eq!(f.dfg.num_blocks(), 10);
    assert_eq!(f.layout.blocks()[1].as_u32(), 9);
    verify_module(&m).unwrap();
}

#[test]
fn comments_and_blank_lines_are_ignored() {
    let text = "; a module\n\nfunction @f(x: f64) -> f64 { ; header\n\nblock0(v0: f64):  ; entry\n    return v0\n}\n";
    let m = parse_module(text).unwrap();
    assert_eq!(
        m.to_string(),
        "function @f(x: f64) -> f64 {\nblock0(v0: f64):\n    return v0\n}\n"
    );
}

#[test]
fn undefined_values_parse_and_the_verifier_reports_them() {
    let m = parse_module("function @f() -> f64 {\nblock0:\n    v1 = fneg v5\n    return v1\n}\n")
        .unwrap();
    let e = verify_module(&m).unwrap_err();
    assert!(e.contains("uses v5, which is never defined"), "{e}");
    // A select of undefined operands still parses.
    let m = parse_module(
        "function @f(c: bool) -> f64 {\nblock0(v0: bool):\n    v1 = select v0, v2, v3\n    return v1\n}\n",
    )
    .unwrap();
    assert!(verify_module(&m).is_err());
}

#[test]
fn parse_into_extends_a_module_and_leaves_it_unchanged_on_error() {
    let mut m = parse_module("function @g(y: f64) -> f64 {\n}\n").unwrap();
    let ids = parse_into(
        &mut m,
        "function @f(x: f64) -> f64 {\nblock0(v0: f64):\n    v1 = call @g(v0)\n    return v1\n}\n",
    )
    .unwrap();
    assert_eq!(ids, vec![m.get("f").unwrap()]);
    let before = m.to_string();
    assert!(parse_into(&mut m, "function @h() {\nblock0:\n    bogus\n}\n").is_err());
    assert_eq!(m.to_string(), before);
}

/// Source locations: a file directive and `!LINE:COL` after some
/// instructions (terminators and a call included), not after others.
const LOCATED: &str = r#"source "dir/t \"1\".adz"

function @g(a: arr, i: i64) -> f64 {
block0(v0: arr, v1: i64):
    v2 = load v0, v1 !3:14
    return v2 !3:5
}

function @f(a: mut arr, n: i64) -> f64 {
block0(v0: arr, v1: i64):
    v2 = iconst 0
    v3 = idiv v1, v2 !7:13
    v4 = call @g(v0, v3) !8:5
    store v0, v3, v4 !9:5
    v5 = zeros v1, "t" !10:13
    v6 = bconst true
    brif v6, block1, block2 !4000000000:4000000000
block1:
    jump block2
block2:
    return v4
}
"#;

#[test]
fn source_locations_roundtrip() {
    let m = roundtrip(LOCATED);
    assert_eq!(m.source_file.as_deref(), Some("dir/t \"1\".adz"));
    let f = m.func(m.get("f").unwrap());
    let locs: Vec<String> = f
        .layout
        .insts()
        .map(|(_, i)| f.dfg.srcloc(i).to_string())
        .collect();
    assert_eq!(
        locs,
        [
            "none",
            "7:13",
            "8:5",
            "9:5",
            "10:13",
            "none",
            "4000000000:4000000000",
            "none",
            "none"
        ]
    );
    // Without locations and file, the same text minus the annotations.
    let mut bare = m.clone();
    bare.source_file = None;
    for id in bare.ids().collect::<Vec<_>>() {
        let f = bare.func_mut(id);
        let insts: Vec<_> = f.layout.insts().map(|(_, i)| i).collect();
        for i in insts {
            f.dfg.set_srcloc(i, SourceLoc::NONE);
        }
    }
    let text = bare.to_string();
    assert!(!text.contains('!') && !text.contains("source"), "{text}");
    roundtrip(&text);
    // A location is provenance only: the verifier does not look at it.
    verify_module(&m).unwrap_or_else(|e| panic!("{e}"));
    // A module with a source file and no function.
    roundtrip("source \"empty.adz\"\n");
}

#[test]
fn malformed_source_locations_are_parse_errors() {
    let body = |loc: &str| {
        format!("function @f() {{\nblock0:\n    v0 = fconst 1.0 {loc}\n    return\n}}\n")
    };
    let cases: &[(&str, usize, &str)] = &[
        (
            "!3",
            21,
            "malformed source location `!3`: expected `!LINE:COL`",
        ),
        ("!3:", 21, "malformed source location `!3:`"),
        ("!:4", 21, "malformed source location `!:4`"),
        ("!0:4", 21, "malformed source location `!0:4`"),
        ("!3:0", 21, "malformed source location `!3:0`"),
        ("!03:4", 21, "malformed source location"),
        ("!3:x", 21, "malformed source location `!3:x`"),
        ("!-3:4", 21, "malformed source location"),
        ("!99999999999:4", 21, "malformed source location"),
        ("! 3:4", 21, "malformed source location `!3:`"),
        (
            "!3:4 v1",
            26,
            "a source location `!LINE:COL` must end the instruction",
        ),
    ];
    for &(loc, col, msg) in cases {
        let e = parse_err(&body(loc));
        assert!(
            e.line == 3 && e.col == col && e.message.contains(msg),
            "for {loc:?}\n got {e}\nwant 3:{col}: ..{msg}.."
        );
    }
    // Before the operands: the location must come last.
    let e = parse_err("function @f() {\nblock0:\n    v0 = fneg !3:4 v1\n}\n");
    assert!(e.message.contains("must end the instruction"), "{e}");
    // Only instructions carry locations.
    let e = parse_err("function @f() {\nblock0: !3:4\n}\n");
    assert_eq!((e.line, e.col), (2, 9), "{e}");
    // The file directive: first, once, a string.
    let e = parse_err("function @f() {\n}\nsource \"a.adz\"\n");
    assert!(
        e.message
            .contains("must come once, before the first function"),
        "{e}"
    );
    let e = parse_err("source \"a.adz\"\nsource \"a.adz\"\n");
    assert_eq!((e.line, e.col), (2, 1), "{e}");
    let e = parse_err("source a.adz\n");
    assert!(e.message.contains("expected a string"), "{e}");
    let mut m = parse_module("source \"a.adz\"\n").unwrap();
    let e = parse_into(&mut m, "source \"b.adz\"\n").unwrap_err();
    assert!(e.message.contains("already \"a.adz\""), "{e}");
    parse_into(&mut m, "source \"a.adz\"\n").unwrap();
}

fn parse_err(text: &str) -> ParseError {
    match parse_module(text) {
        Ok(m) => panic!("parsed:\n{m}"),
        Err(e) => e,
    }
}

#[test]
fn parse_errors_carry_line_and_column() {
    let cases: &[(&str, usize, usize, &str)] = &[
        ("fn @f() {\n}\n", 1, 1, "expected `function`, found `fn`"),
        ("function f() {\n}\n", 1, 10, "expected a function name"),
        ("function @f(x f64) {\n}\n", 1, 15, "expected `:`, found `f64`"),
        ("function @f(x: float) {\n}\n", 1, 16, "unknown type `float`"),
        ("function @f() inline(sometimes) {\n}\n", 1, 22, "unknown inline hint"),
        ("function @f() rules(sideways: @f) {\n}\n", 1, 21, "expected `forward` or `reverse`"),
        ("function @f() rules(forward: @nope) {\n}\n", 1, 30, "unknown function @nope"),
        ("function @f() {\n", 1, 10, "has no closing `}`"),
        ("function @f() {\n}\nfunction @f() {\n}\n", 3, 10, "defined twice"),
        ("function @f() {\n    v0 = fconst 1.0\n}\n", 2, 5, "expected a block header"),
        ("function @f() {\nblock0:\n    v0 = fmod v1, v2\n}\n", 3, 10, "unknown opcode `fmod`"),
        ("function @f() {\nblock0:\n    v0 = fconst one\n}\n", 3, 17, "invalid float `one`"),
        ("function @f() {\nblock0:\n    v0 = iconst 1.5\n}\n", 3, 17, "invalid i64"),
        ("function @f() {\nblock0:\n    v0 = bconst yes\n}\n", 3, 17, "expected `true` or `false`"),
        ("function @f() {\nblock0:\n    v0 = powi v1, x\n}\n", 3, 19, "invalid i32 exponent"),
        ("function @f() {\nblock0:\n    v0 = fcmp lq v1, v2\n}\n", 3, 15, "unknown condition `lq`"),
        ("function @f() {\nblock0:\n    v0 = fadd v1 v2\n}\n", 3, 18, "expected `,`, found `v2`"),
        ("function @f() {\nblock0:\n    v0 = fadd v1, x2\n}\n", 3, 19, "expected a value `vN`, found `x2`"),
        ("function @f() {\nblock0:\n    v0 = fadd v1, v2, v3\n}\n", 3, 21, "unexpected `,` at end of line"),
        ("function @f() {\nblock0:\n    v0, v1 = fadd v1, v2\n}\n", 3, 14, "produces 1 result(s), but 2"),
        ("function @f() {\nblock0:\n    store v1, v2, v3\n    v0 = store v1, v2, v3\n}\n", 4, 10, "produces 0 result(s)"),
        ("function @f() {\nblock0:\n    v0 = fconst 1.0\n    v0 = fconst 2.0\n}\n", 4, 5, "v0 is defined twice (first at 3:5)"),
        ("function @f() {\nblock0:\nblock0:\n}\n", 3, 1, "block0 is defined twice"),
        ("function @f() {\nblock0(v0: f64, v0: f64):\n}\n", 2, 17, "v0 is defined twice"),
        ("function @f() {\nblock0:\n    v0 = zeros v1, tmp\n}\n", 3, 20, "expected a string"),
        ("function @f() {\nblock0:\n    v0 = zeros v1, \"tmp\n}\n", 3, 20, "unterminated string"),
        ("function @f() {\nblock0:\n    v0 = zeros v1, \"a\\qb\"\n}\n", 3, 22, "unknown escape"),
        ("function @f() {\nblock0:\n    v0 = call @g()\n}\n", 3, 15, "unknown function @g"),
        ("function @f() {\nblock0:\n    jump block1(v0\n}\n", 3, 19, "expected `,` or `)`, found end of line"),
        ("function @f() {\nblock0:\n    brif v0, block1\n}\n", 3, 20, "expected `,`"),
        ("function @f() {\nblock0:\n    v1 = fneg v99999999999\n}\n", 3, 15, "entity numbers above"),
        ("function @f() {\nblock0:\n    v1 = fneg v01\n}\n", 3, 15, "expected a value `vN`, found `v01`"),
        ("function @f() {\n    region1: @f() -> () blocks()\n}\n", 2, 5, "expected region0"),
        ("function @f() {\n    region0: @f() blocks()\n}\n", 2, 19, "expected `->`"),
        ("function @f() {\n    inlined1: @g blocks()\n}\n", 2, 5, "expected inlined0"),
        ("function @f() {\n    inlined0: @g(block1)\n}\n", 2, 17, "expected `blocks`"),
        ("function @f() {\n    inlined0: @g blocks(block1) parent(region0)\n}\n", 2, 40, "expected an inlined entry"),
        ("function @f(x: f64) {\nblock0(v0: f64):\n    v1 = autodiff sideways dual @f(dual v0)\n}\n", 3, 19, "expected `forward` or `reverse`"),
        ("function @f(x: f64) {\nblock0(v0: f64):\n    v1 = autodiff forward dual @f(v0)\n}\n", 3, 35, "expected an argument activity"),
        ("function @f(x: f64) {\nblock0(v0: f64):\n    v1 = autodiff forward dual @f(dual v0)\n}\n", 3, 10, "produces 0 result(s), but 1"),
        ("function @f() {\n}\n}\n", 3, 1, "expected `function`, found `}`"),
        ("function @f() -> {\n}\n", 1, 18, "expected a type, found `{`"),
        ("function @f() {\n}\nfunction @g() {\n    v0 = fconst 1.0\n", 3, 10, "no closing"),
    ];
    for &(text, line, col, msg) in cases {
        let e = parse_err(text);
        assert!(
            e.line == line && e.col == col && e.message.contains(msg),
            "for {text:?}\n got {e}\nwant {line}:{col}: ..{msg}.."
        );
    }
}

#[test]
fn error_display_is_line_col_message() {
    let e = parse_err("function @f() {\nblock0:\n    v0 = fmod v1, v2\n}\n");
    assert_eq!(e.to_string(), "3:10: unknown opcode `fmod`");
}

// ---------------------------------------------------------------- builder

fn helper_module() -> (Module, FuncId, FuncId) {
    let mut m = parse_module(
        "function @helper(x: f64, k: i64) -> (f64, i64) {
block0(v0: f64, v1: i64):
    return v0, v1
}

function @g(x: f64, a: arr) -> f64 {
block0(v0: f64, v1: arr):
    v2 = fmul v0, v0
    return v2
}
",
    )
    .unwrap();
    let (h, g) = (m.get("helper").unwrap(), m.get("g").unwrap());
    let _ = &mut m;
    (m, h, g)
}

/// `for i in 0..n { acc = step(i, acc) }` from `init`, with the loop's
/// blocks created here; leaves the builder in the exit block, where the
/// header's parameters `(i, acc)`, returned, are the final values.
fn sum_loop(
    b: &mut FuncBuilder,
    n: Value,
    init: Value,
    step: impl FnOnce(&mut FuncBuilder, Value, Value) -> Value,
) -> (Value, Value) {
    let (header, body, exit) = (b.create_block(), b.create_block(), b.create_block());
    let zero = b.iconst(0);
    b.jump(header, &[zero, init]);
    let i = b.append_block_param(header, Type::I64);
    let acc = b.append_block_param(header, Type::F64);
    b.switch_to_block(header);
    let c = b.icmp(CmpCond::Lt, i, n);
    b.brif(c, body, &[], exit, &[]);
    b.switch_to_block(body);
    let acc2 = step(b, i, acc);
    let one = b.iconst(1);
    let i2 = b.iadd(i, one);
    b.jump(header, &[i2, acc2]);
    b.switch_to_block(exit);
    (i, acc)
}

#[test]
fn builder_functions_roundtrip() {
    let (mut m, _, g) = helper_module();
    let sig = Signature {
        params: vec![Param::new("xs", Type::Array), Param::mutable_array("ys")],
        results: vec![Type::F64],
    };
    let mut f = Function::new("sum_sq", sig);
    let mut b = FuncBuilder::new(&mut f);
    let entry = b.create_entry_block();
    b.switch_to_block(entry);
    let (xs, ys) = (b.func.params()[0], b.func.params()[1]);
    let n = b.len(xs);
    let acc0 = b.fconst(0.0);
    let (_, acc) = sum_loop(&mut b, n, acc0, |b, i, acc| {
        let x = b.load(xs, i);
        let sq = b.powi(x, 2);
        b.store(ys, i, sq);
        b.fadd(acc, sq)
    });
    let t = b.zeros(n, "t");
    let spec = AutodiffSpec {
        mode: Mode::Reverse,
        func: g,
        ret: RetActivity::Active,
        args: vec![ArgActivity::Active, ArgActivity::Dup],
        width: 1,
    };
    let d = b.autodiff(spec, &[acc, xs, t], &[Type::F64]);
    let d = b.func.dfg.first_result(d);
    let r = b.fadd(acc, d);
    b.ret(&[r]);
    m.push(f).unwrap();
    verify_module(&m).unwrap_or_else(|e| panic!("{e}"));
    let text = m.to_string();
    let back = roundtrip(&text);
    verify_module(&back).unwrap();
}

/// `FuncBuilder::copy_of` (how the front end returns an array it does not
/// own) and a `dup` request built through the API: they verify, print
/// `dup(..)` before the callee and round-trip.
#[test]
fn builder_copies_and_dup_requests_roundtrip() {
    let mut m = Module::new();
    let sig = Signature {
        params: vec![Param::new("x", Type::Array), Param::new("k", Type::IArray)],
        results: vec![Type::Array, Type::IArray, Type::Array],
    };
    let mut f = Function::new("copies", sig);
    let mut b = FuncBuilder::new(&mut f);
    let entry = b.create_entry_block();
    b.switch_to_block(entry);
    let (x, k) = (b.func.params()[0], b.func.params()[1]);
    let cx = b.copy_of(x, "x");
    let ck = b.copy_of(k, "k");
    let cx2 = b.copy_of(cx, "x");
    assert_eq!(b.func.dfg.value_type(ck), Type::IArray);
    assert!(b.func.owns_array(cx) && b.func.owns_array(ck) && b.func.owns_array(cx2));
    b.ret(&[cx, ck, cx2]);
    let copies = m.push(f).unwrap();

    let sig = Signature {
        params: vec![
            Param::new("x", Type::Array),
            Param::mutable_array("dx"),
            Param::new("k", Type::IArray),
            Param::new("dy", Type::Array),
            Param::new("dz", Type::Array),
        ],
        results: vec![],
    };
    let mut f = Function::new("grad", sig);
    let mut b = FuncBuilder::new(&mut f);
    let entry = b.create_entry_block();
    b.switch_to_block(entry);
    let p = b.func.params().to_vec();
    let spec = AutodiffSpec {
        mode: Mode::Reverse,
        func: copies,
        ret: RetActivity::Dup,
        args: vec![ArgActivity::Dup, ArgActivity::Const],
        width: 1,
    };
    b.autodiff(spec, &[p[0], p[1], p[2], p[3], p[4]], &[]);
    b.ret(&[]);
    m.push(f).unwrap();
    verify_module(&m).unwrap_or_else(|e| panic!("{e}"));
    let text = m.to_string();
    assert!(
        text.contains("    autodiff reverse dup(v3, v4) @copies(dup v0, v1, const v2)\n"),
        "{text}"
    );
    let back = roundtrip(&text);
    verify_module(&back).unwrap();
}

// ---------------------------------------------------------------- random IR

#[derive(Clone, Debug)]
enum Step {
    Fconst(f64),
    Iconst(i64),
    Bconst(bool),
    Unary(usize, usize),
    Binary(usize, usize, usize),
    Powi(usize, i32),
    Cmp(bool, usize, usize, usize),
    Select(usize, usize, usize, usize),
    Len(usize),
    Load(usize, usize),
    Store(usize, usize, usize),
    Zeros(usize, String),
    Fill(usize, usize),
    Call(usize, usize),
    Forward(usize, usize, usize, usize),
    Reverse(usize, usize, usize),
    Diamond(usize, usize, usize),
    Loop(usize, usize),
    Gap,
}

fn step() -> impl Strategy<Value = Step> {
    let i = || 0usize..64;
    prop_oneof![
        any::<f64>().prop_map(Step::Fconst),
        any::<i64>().prop_map(Step::Iconst),
        any::<bool>().prop_map(Step::Bconst),
        (i(), i()).prop_map(|(a, b)| Step::Unary(a, b)),
        (i(), i(), i()).prop_map(|(a, b, c)| Step::Binary(a, b, c)),
        (i(), any::<i32>()).prop_map(|(a, b)| Step::Powi(a, b)),
        (any::<bool>(), i(), i(), i()).prop_map(|(f, c, a, b)| Step::Cmp(f, c, a, b)),
        (i(), i(), i(), i()).prop_map(|(t, c, a, b)| Step::Select(t, c, a, b)),
        i().prop_map(Step::Len),
        (i(), i()).prop_map(|(a, b)| Step::Load(a, b)),
        (i(), i(), i()).prop_map(|(a, b, c)| Step::Store(a, b, c)),
        (i(), "\\PC{0,6}").prop_map(|(a, s)| Step::Zeros(a, s)),
        (i(), i()).prop_map(|(a, b)| Step::Fill(a, b)),
        (i(), i()).prop_map(|(a, b)| Step::Call(a, b)),
        (i(), i(), i(), i()).prop_map(|(a, b, c, d)| Step::Forward(a, b, c, d)),
        (i(), i(), i()).prop_map(|(a, b, c)| Step::Reverse(a, b, c)),
        (i(), i(), i()).prop_map(|(a, b, c)| Step::Diamond(a, b, c)),
        (i(), i()).prop_map(|(a, b)| Step::Loop(a, b)),
        Just(Step::Gap),
    ]
}

#[derive(Default)]
struct Pools {
    f: Vec<Value>,
    i: Vec<Value>,
    b: Vec<Value>,
    arrs: Vec<Value>,
    warrs: Vec<Value>,
    iarrs: Vec<Value>,
    lanes: Vec<Value>,
}

impl Pools {
    fn of(&self, ty: Type) -> &[Value] {
        match ty {
            Type::F64 => &self.f,
            Type::I64 => &self.i,
            Type::Bool => &self.b,
            Type::Array => &self.arrs,
            Type::IArray => &self.iarrs,
            Type::F64x2 => &self.lanes,
        }
    }

    fn pick(&self, ty: Type, k: usize) -> Value {
        let p = self.of(ty);
        p[k % p.len()]
    }

    fn push(&mut self, ty: Type, v: Value) {
        match ty {
            Type::F64 => self.f.push(v),
            Type::I64 => self.i.push(v),
            Type::Bool => self.b.push(v),
            Type::Array => self.arrs.push(v),
            Type::IArray => self.iarrs.push(v),
            Type::F64x2 => self.lanes.push(v),
        }
    }
}

/// Opcodes with a fixed signature over scalars only, by operand count.
fn scalar_ops(n: usize) -> Vec<(Opcode, &'static [Type], Type)> {
    Opcode::ALL
        .iter()
        .filter_map(|&op| match op.fixed_signature() {
            Some((args, Some(res)))
                if args.len() == n
                    && res.is_scalar()
                    && args.iter().all(|t| t.is_scalar())
                    && !matches!(
                        op,
                        Opcode::Powi
                            | Opcode::Vpowi
                            | Opcode::Fcmp
                            | Opcode::Icmp
                            | Opcode::Tapecut
                            | Opcode::Tapeover
                    ) =>
            {
                Some((op, args, res))
            }
            _ => None,
        })
        .collect()
}

fn build_random(steps: &[Step]) -> Module {
    let (mut m, helper, g) = helper_module();
    let sig = Signature {
        params: vec![
            Param::new("x", Type::F64),
            Param::new("k", Type::I64),
            Param::new("a", Type::Array),
            Param::mutable_array("out"),
        ],
        results: vec![Type::F64],
    };
    let mut func = Function::new("main", sig);
    let (un, bin) = (scalar_ops(1), scalar_ops(2));
    let mut b = FuncBuilder::new(&mut func);
    let entry = b.create_entry_block();
    b.switch_to_block(entry);
    let ps = b.func.params().to_vec();
    let mut p = Pools {
        f: vec![ps[0], b.fconst(1.0)],
        i: vec![ps[1], b.iconst(1)],
        b: vec![b.bconst(true)],
        arrs: vec![ps[2], ps[3]],
        warrs: vec![ps[3]],
        iarrs: Vec::new(),
        lanes: vec![b.unary(Opcode::Vsplat, ps[0])],
    };
    for s in steps {
        match s.clone() {
            Step::Fconst(x) => p.f.push(b.fconst(x)),
            Step::Iconst(x) => p.i.push(b.iconst(x)),
            Step::Bconst(x) => p.b.push(b.bconst(x)),
            Step::Unary(o, a) => {
                let (op, args, res) = un[o % un.len()];
                let v = b.unary(op, p.pick(args[0], a));
                p.push(res, v);
            }
            Step::Binary(o, x, y) => {
                let (op, args, res) = bin[o % bin.len()];
                let v = b.binary(op, p.pick(args[0], x), p.pick(args[1], y));
                p.push(res, v);
            }
            Step::Powi(a, e) => p.f.push(b.powi(p.pick(Type::F64, a), e)),
            Step::Cmp(float, c, x, y) => {
                let cond = CmpCond::ALL[c % 6];
                let v = if float {
                    b.fcmp(cond, p.pick(Type::F64, x), p.pick(Type::F64, y))
                } else {
                    b.icmp(cond, p.pick(Type::I64, x), p.pick(Type::I64, y))
                };
                p.b.push(v);
            }
            Step::Select(t, c, x, y) => {
                let ty = [Type::F64, Type::I64, Type::Bool][t % 3];
                let v = b.select(p.pick(Type::Bool, c), p.pick(ty, x), p.pick(ty, y));
                p.push(ty, v);
            }
            Step::Len(a) => p.i.push(b.len(p.pick(Type::Array, a))),
            Step::Load(a, i) => {
                p.f.push(b.load(p.pick(Type::Array, a), p.pick(Type::I64, i)))
            }
            Step::Store(a, i, x) => {
                let w = p.warrs[a % p.warrs.len()];
                b.store(w, p.pick(Type::I64, i), p.pick(Type::F64, x));
            }
            Step::Zeros(n, name) => {
                let v = b.zeros(p.pick(Type::I64, n), name);
                p.arrs.push(v);
                p.warrs.push(v);
            }
            Step::Fill(a, x) => {
                let w = p.warrs[a % p.warrs.len()];
                b.fill(w, p.pick(Type::F64, x));
            }
            Step::Call(x, k) => {
                let args = [p.pick(Type::F64, x), p.pick(Type::I64, k)];
                let inst = b.call(helper, &args, &[Type::F64, Type::I64]);
                let r = b.func.dfg.inst_results(inst).to_vec();
                p.f.push(r[0]);
                p.i.push(r[1]);
            }
            Step::Forward(x, dx, a, da) => {
                let spec = AutodiffSpec {
                    mode: Mode::Forward,
                    func: g,
                    ret: RetActivity::Dual,
                    args: vec![ArgActivity::Dual, ArgActivity::Dup],
                    width: 1,
                };
                let args = [
                    p.pick(Type::F64, x),
                    p.pick(Type::F64, dx),
                    p.pick(Type::Array, a),
                    p.pick(Type::Array, da),
                ];
                let inst = b.autodiff(spec, &args, &[Type::F64, Type::F64]);
                p.f.extend(b.func.dfg.inst_results(inst).to_vec());
            }
            Step::Reverse(x, a, da) => {
                let spec = AutodiffSpec {
                    mode: Mode::Reverse,
                    func: g,
                    ret: RetActivity::Active,
                    args: vec![ArgActivity::Active, ArgActivity::Dup],
                    width: 1,
                };
                let shadow = p.warrs[da % p.warrs.len()];
                let args = [p.pick(Type::F64, x), p.pick(Type::Array, a), shadow];
                let inst = b.autodiff(spec, &args, &[Type::F64]);
                p.f.push(b.func.dfg.first_result(inst));
            }
            Step::Diamond(c, x, y) => {
                let (then_b, else_b, merge) =
                    (b.create_block(), b.create_block(), b.create_block());
                let (x, y) = (p.pick(Type::F64, x), p.pick(Type::F64, y));
                b.brif(p.pick(Type::Bool, c), then_b, &[], else_b, &[]);
                b.switch_to_block(then_b);
                let t = b.fadd(x, y);
                b.jump(merge, &[t]);
                b.switch_to_block(else_b);
                let e = b.fmul(x, y);
                b.jump(merge, &[e]);
                let m = b.append_block_param(merge, Type::F64);
                b.switch_to_block(merge);
                p.f.push(m);
            }
            Step::Loop(n, x) => {
                let (n, x) = (p.pick(Type::I64, n), p.pick(Type::F64, x));
                let (i, acc) = sum_loop(&mut b, n, x, |b, _, acc| b.fadd(acc, x));
                p.i.push(i);
                p.f.push(acc);
            }
            Step::Gap => {
                b.func.dfg.make_detached_value(Type::F64);
                b.func.dfg.make_block();
            }
        }
    }
    let last = *p.f.last().unwrap();
    b.ret(&[last]);
    m.push(func).unwrap();
    m
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_ir_roundtrips_and_verifies(steps in prop::collection::vec(step(), 0..40)) {
        let m = build_random(&steps);
        if let Err(e) = verify_module(&m) {
            panic!("{e}");
        }
        let text = m.to_string();
        let back = parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        prop_assert_eq!(back.to_string(), text);
        prop_assert!(verify_module(&back).is_ok());
    }

    /// The same with a location on some instructions and a source file.
    #[test]
    fn random_ir_with_locations_roundtrips(
        steps in prop::collection::vec(step(), 0..40),
        locs in prop::collection::vec((0u32..3, 1u32..1000, 1u32..200), 1..20),
    ) {
        let mut m = build_random(&steps);
        m.source_file = Some("gen.adz".to_string());
        for id in m.ids().collect::<Vec<_>>() {
            let f = m.func_mut(id);
            let insts: Vec<_> = f.layout.insts().map(|(_, i)| i).collect();
            for (k, i) in insts.into_iter().enumerate() {
                let (skip, line, col) = locs[k % locs.len()];
                if skip != 0 {
                    f.dfg.set_srcloc(i, SourceLoc::new(line, col));
                }
            }
        }
        let text = m.to_string();
        let back = parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        prop_assert_eq!(back.to_string(), text);
    }

    /// Garbage never panics; whatever parses prints and re-parses to the
    /// same text, and the verifier does not panic on it.
    #[test]
    fn garbage_never_panics(text in "\\PC{0,200}") {
        check_no_panic(&text);
    }

    #[test]
    fn token_soup_never_panics(words in prop::collection::vec(prop::sample::select(vec![
        "function", "@f", "@g", "(", ")", ",", ":", "=", "->", "{", "}", "\n", "\n", "\n",
        "block0", "block1", "v0", "v1", "v2", "f64", "i64", "arr", "bool", "mut", "x",
        "fadd", "select", "call", "autodiff", "forward", "reverse", "dual", "dup", "const",
        "active", "jump", "brif", "return", "region0", "blocks", "parent", "rules", "inline",
        "inlined0", "inlined1",
        "zeros", "\"s\"", "fconst", "1.5", "iconst", "-3", "powi", "fcmp", "lt",
        "!3:4", "!3", "!0", "4", "!", "source", "\"t.adz\"",
    ]), 0..80)) {
        check_no_panic(&words.join(" "));
    }

    #[test]
    fn mutated_valid_text_never_panics(pos in 0usize..4000, ch in any::<char>(), op in 0u8..3, located: bool) {
        let mut chars: Vec<char> = if located { LOCATED } else { ALL }.chars().collect();
        let pos = pos % chars.len();
        match op {
            0 => { chars.remove(pos); }
            1 => chars.insert(pos, ch),
            _ => chars[pos] = ch,
        }
        check_no_panic(&chars.into_iter().collect::<String>());
    }
}

fn check_no_panic(text: &str) {
    if let Ok(m) = parse_module(text) {
        let _ = verify_module(&m).map_err(|e| e.to_string());
        let printed = m.to_string();
        let again = parse_module(&printed).unwrap_or_else(|e| panic!("{e}\n{printed}"));
        assert_eq!(again.to_string(), printed);
    }
}

#[test]
fn the_example_in_docs_ir_md_is_valid() {
    let doc = include_str!("../../../docs/ir.md");
    let marker = doc.find("<!-- The next block is parsed").expect("marker");
    let start = doc[marker..].find("```text\n").expect("block") + marker + "```text\n".len();
    let end = doc[start..].find("```").expect("end of block") + start;
    let m = roundtrip(&doc[start..end]);
    verify_module(&m).unwrap_or_else(|e| panic!("{e}"));
}
