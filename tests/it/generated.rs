//! Property tests over generated well-typed programs: every generated
//! program compiles, verifies, prints and parses back to the same text, and
//! runs bit-identically on the JIT and the interpreter (errors included).
//!
//! The generator writes `.adz` source from a seed (proptest supplies the
//! seeds), so a failure prints a program a human can read and rerun.

use crate::support::OnBoth;
use adze::Session;
use adze_ir::Val;
use adze_test_support::rng::Rng;
use proptest::prelude::*;

const UNARY: [&str; 16] = [
    "sin", "cos", "tanh", "exp", "atan", "sqrt", "abs", "floor", "ceil", "round", "sign", "cbrt",
    "log1p", "expm1", "sinh", "asin",
];
const BINARY: [&str; 5] = ["atan2", "pow", "hypot", "min", "max"];

pub(crate) struct Gen {
    rng: Rng,
    /// f64 variables in scope (name, mutable).
    fvars: Vec<(String, bool)>,
    /// i64 names in scope.
    ivars: Vec<String>,
    /// Functions defined so far: all have the signature of `FN_SIG`.
    funcs: usize,
    counter: usize,
    depth: usize,
}

const FN_SIG: &str = "(x: f64, y: f64, n: i64, a: [f64], out: mut [f64]) -> f64";

impl Gen {
    fn fresh(&mut self, prefix: &str) -> String {
        self.counter += 1;
        format!("{prefix}{}", self.counter)
    }

    fn fexpr(&mut self) -> String {
        self.depth += 1;
        let leaf = self.depth > 4 || self.rng.chance(30);
        let e = if leaf {
            match self.rng.below(4) {
                0 => format!("{:?}", [0.5, 2.0, -1.5, 3.0, 0.25][self.rng.below(5)]),
                1 if !self.fvars.is_empty() => {
                    self.fvars[self.rng.below(self.fvars.len())].0.clone()
                }
                2 => format!("a[{} % len(a)]", self.iexpr_nonneg()),
                _ => ["x", "y"][self.rng.below(2)].to_string(),
            }
        } else {
            match self.rng.below(9) {
                0 => format!("{}({})", UNARY[self.rng.below(UNARY.len())], self.fexpr()),
                1 => format!(
                    "{}({}, {})",
                    BINARY[self.rng.below(BINARY.len())],
                    self.fexpr(),
                    self.fexpr()
                ),
                2 => format!("({} ^ {})", self.fexpr(), self.rng.below(5) as i64 - 1),
                3 => format!(
                    "(if {} {{ {} }} else {{ {} }})",
                    self.bexpr(),
                    self.fexpr(),
                    self.fexpr()
                ),
                4 => format!("f64({})", self.iexpr()),
                5 if self.funcs > 0 => {
                    let f = self.rng.below(self.funcs);
                    format!("g{f}({}, {}, n, a, out)", self.fexpr(), self.fexpr())
                }
                6 => format!("-{}", self.fexpr()),
                _ => format!(
                    "({} {} {})",
                    self.fexpr(),
                    ["+", "-", "*", "/"][self.rng.below(4)],
                    self.fexpr()
                ),
            }
        };
        self.depth -= 1;
        e
    }

    fn iexpr_nonneg(&mut self) -> String {
        match self.rng.below(3) {
            0 => format!("{}", self.rng.below(4)),
            1 if !self.ivars.is_empty() => self.ivars[self.rng.below(self.ivars.len())].clone(),
            _ => "n".into(),
        }
    }

    fn iexpr(&mut self) -> String {
        match self.rng.below(4) {
            0 => format!(
                "({} {} {})",
                self.iexpr_nonneg(),
                ["+", "-", "*", "/", "%"][self.rng.below(5)],
                self.iexpr_nonneg()
            ),
            1 => "len(a)".into(),
            _ => self.iexpr_nonneg(),
        }
    }

    fn bexpr(&mut self) -> String {
        match self.rng.below(4) {
            0 => format!("{} < {}", self.fexpr(), self.fexpr()),
            1 => format!("{} == {}", self.iexpr(), self.iexpr()),
            2 => format!("!({} >= {})", self.fexpr(), self.fexpr()),
            _ => format!("({} > 0.0 && {} != 1)", self.fexpr(), self.iexpr()),
        }
    }

    fn stmts(&mut self, out: &mut String, count: usize, indent: usize) {
        let pad = "    ".repeat(indent);
        let fvars_before = self.fvars.len();
        let ivars_before = self.ivars.len();
        for _ in 0..count {
            let mutable: Vec<String> = self
                .fvars
                .iter()
                .filter(|(_, m)| *m)
                .map(|(n, _)| n.clone())
                .collect();
            match self.rng.below(7) {
                0 | 1 => {
                    let name = self.fresh("v");
                    let e = self.fexpr();
                    out.push_str(&format!("{pad}var {name} = {e};\n"));
                    self.fvars.push((name, true));
                }
                2 if !mutable.is_empty() => {
                    let name = &mutable[self.rng.below(mutable.len())];
                    let e = self.fexpr();
                    out.push_str(&format!("{pad}{name} = {e};\n"));
                }
                3 if indent < 3 => {
                    let i = self.fresh("i");
                    out.push_str(&format!("{pad}for {i} in 0..n {{\n"));
                    self.ivars.push(i);
                    self.stmts(out, 2, indent + 1);
                    self.ivars.pop();
                    out.push_str(&format!("{pad}}}\n"));
                }
                4 if indent < 3 => {
                    let c = self.bexpr();
                    out.push_str(&format!("{pad}if {c} {{\n"));
                    self.stmts(out, 2, indent + 1);
                    out.push_str(&format!("{pad}}} else {{\n"));
                    self.stmts(out, 1, indent + 1);
                    out.push_str(&format!("{pad}}}\n"));
                }
                5 => {
                    let i = self.iexpr();
                    let e = self.fexpr();
                    out.push_str(&format!("{pad}out[{i}] = {e};\n"));
                }
                _ if indent < 3 => {
                    let k = self.fresh("k");
                    out.push_str(&format!("{pad}var {k} = 0;\n{pad}while {k} < n + 1 {{\n"));
                    self.stmts(out, 1, indent + 1);
                    out.push_str(&format!("{pad}    {k} = {k} + 1;\n{pad}}}\n"));
                }
                _ => {
                    let name = self.fresh("c");
                    let e = self.fexpr();
                    out.push_str(&format!("{pad}let {name} = {e};\n"));
                    self.fvars.push((name, false));
                }
            }
        }
        self.fvars.truncate(fvars_before);
        self.ivars.truncate(ivars_before);
    }

    pub(crate) fn program(seed: u64) -> String {
        let mut g = Gen {
            rng: Rng::new(seed),
            fvars: Vec::new(),
            ivars: Vec::new(),
            funcs: 0,
            counter: 0,
            depth: 0,
        };
        let mut src = String::new();
        let nfuncs = 1 + g.rng.below(3);
        for f in 0..nfuncs {
            src.push_str(&format!("fn g{f}{FN_SIG} {{\n"));
            let n = 2 + g.rng.below(4);
            g.stmts(&mut src, n, 1);
            let tail = g.fexpr();
            src.push_str(&format!("    {tail}\n}}\n\n"));
            g.funcs += 1;
        }
        src
    }
}

fn check_program(seed: u64) -> Result<(), TestCaseError> {
    let src = Gen::program(seed);
    let session = Session::from_source("generated.adz", &src)
        .map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
    let module = &session.module;
    adze_ir::verify::verify_module(module)
        .map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
    let printed = module.to_string();
    let reparsed = adze_ir::parse::parse_module(&printed)
        .map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
    prop_assert_eq!(reparsed.to_string(), printed.clone());

    let root = module.ids().last().unwrap();
    let both = OnBoth::new(module, root, format!("{src}\n@{}", module.func(root).name));
    for (x, y, n) in [(0.5, -1.25, 2), (2.0, 0.1, 3), (-0.7, 3.5, 0)] {
        let args = vec![
            Val::F64(x),
            Val::F64(y),
            Val::I64(n),
            Val::Array(vec![0.3, -1.2, 2.5]),
            Val::Array(vec![0.0; 4]),
        ];
        let _ = both.call(&args);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn generated_programs_round_trip_verify_and_agree(seed in any::<u64>()) {
        check_program(seed)?;
    }
}

#[test]
fn the_generator_makes_varied_programs() {
    let src = Gen::program(42);
    assert!(src.contains("fn g0"), "{src}");
    assert_ne!(Gen::program(1), Gen::program(2));
}
