//! Property test over generated `.adz` programs with random `#[inline]`
//! hints, rules (tuple results), early returns, local arrays, and direct and
//! mutual recursion: after inlining with a random budget the module
//! verifies, round-trips through the text format, and every function runs
//! bit-identically (errors: see `support::same_error`).
//!
//! The generator writes source from a seed (proptest supplies the seeds), so
//! a failure prints a program a human can read and rerun.

use crate::support::*;
use adze_opt::{inline_module, DefaultPolicy};
use adze_test_support::rng::Rng;
use proptest::prelude::*;

const UNARY: [&str; 8] = ["sin", "cos", "tanh", "exp", "atan", "sqrt", "abs", "floor"];
const SIG: &str = "(x: f64, y: f64, n: i64, a: [f64], out: mut [f64]) -> f64";

pub(crate) struct Gen {
    rng: Rng,
    fvars: Vec<String>,
    ivars: Vec<String>,
    /// Arrays in scope, and the writable ones.
    arrays: Vec<String>,
    writable: Vec<String>,
    /// Callable functions: `g` (SIG), `s` (pairs), `r` (recursive).
    gs: Vec<String>,
    ss: Vec<String>,
    rs: Vec<String>,
    counter: usize,
    depth: usize,
}

impl Gen {
    fn fresh(&mut self, prefix: &str) -> String {
        self.counter += 1;
        format!("{prefix}{}", self.counter)
    }

    fn hint(&mut self) -> &'static str {
        ["", "", "#[inline(always)]\n", "#[inline(never)]\n"][self.rng.below(4)]
    }

    fn fexpr(&mut self) -> String {
        self.depth += 1;
        let leaf = self.depth > 3 || self.rng.chance(30);
        let e = if leaf {
            match self.rng.below(4) {
                0 => format!("{:?}", [0.5, 2.0, -1.5, 3.0][self.rng.below(4)]),
                1 if !self.fvars.is_empty() => self.rng.pick(&self.fvars).to_string(),
                2 => {
                    let a = self.rng.pick(&self.arrays).to_string();
                    format!("{a}[{} % len({a})]", self.iexpr())
                }
                _ => ["x", "y"][self.rng.below(2)].to_string(),
            }
        } else {
            match self.rng.below(8) {
                0 => format!("{}({})", UNARY[self.rng.below(UNARY.len())], self.fexpr()),
                1 => format!(
                    "(if {} < {} {{ {} }} else {{ {} }})",
                    self.fexpr(),
                    self.fexpr(),
                    self.fexpr(),
                    self.fexpr()
                ),
                2 if !self.gs.is_empty() => {
                    let g = self.rng.pick(&self.gs).to_string();
                    // A written array must not alias another argument.
                    let out = self.rng.pick(&self.writable).to_string();
                    let others: Vec<String> =
                        self.arrays.iter().filter(|a| **a != out).cloned().collect();
                    let a = self.rng.pick(&others).to_string();
                    let (e1, e2, i) = (self.fexpr(), self.fexpr(), self.iexpr());
                    format!("{g}({e1}, {e2}, {i}, {a}, {out})")
                }
                3 if !self.rs.is_empty() => {
                    let r = self.rng.pick(&self.rs).to_string();
                    format!("{r}({}, {})", self.fexpr(), self.iexpr())
                }
                4 => format!("f64({})", self.iexpr()),
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

    fn iexpr(&mut self) -> String {
        match self.rng.below(4) {
            0 => format!("{}", self.rng.below(4)),
            1 if !self.ivars.is_empty() => self.rng.pick(&self.ivars).to_string(),
            2 => format!("len({})", self.rng.pick(&self.arrays)),
            _ => "n".into(),
        }
    }

    fn stmts(&mut self, out: &mut String, count: usize, indent: usize) {
        let pad = "    ".repeat(indent);
        let scope = (
            self.fvars.len(),
            self.ivars.len(),
            self.arrays.len(),
            self.writable.len(),
        );
        for _ in 0..count {
            match self.rng.below(8) {
                0 | 1 => {
                    let name = self.fresh("v");
                    let e = self.fexpr();
                    out.push_str(&format!("{pad}let {name} = {e};\n"));
                    self.fvars.push(name);
                }
                2 if !self.ss.is_empty() => {
                    let s = self.rng.pick(&self.ss).to_string();
                    let (p, q) = (self.fresh("p"), self.fresh("q"));
                    let (e1, e2) = (self.fexpr(), self.fexpr());
                    out.push_str(&format!("{pad}let ({p}, {q}) = {s}({e1}, {e2});\n"));
                    self.fvars.push(p);
                    self.fvars.push(q);
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
                    let (c1, c2) = (self.fexpr(), self.fexpr());
                    out.push_str(&format!("{pad}if {c1} < {c2} {{\n"));
                    self.stmts(out, 1, indent + 1);
                    if self.rng.chance(40) {
                        let e = self.fexpr();
                        out.push_str(&format!("{pad}    return {e};\n"));
                    }
                    out.push_str(&format!("{pad}}}\n"));
                }
                5 => {
                    let w = self.rng.pick(&self.writable).to_string();
                    let (i, e) = (self.iexpr(), self.fexpr());
                    out.push_str(&format!("{pad}{w}[{i}] = {e};\n"));
                }
                6 => {
                    let t = self.fresh("t");
                    let len = self.iexpr();
                    out.push_str(&format!("{pad}let {t} = zeros({len});\n"));
                    self.arrays.push(t.clone());
                    self.writable.push(t);
                }
                _ => {
                    let w = self.rng.pick(&self.writable).to_string();
                    let e = self.fexpr();
                    out.push_str(&format!("{pad}fill({w}, {e});\n"));
                }
            }
        }
        self.fvars.truncate(scope.0);
        self.ivars.truncate(scope.1);
        self.arrays.truncate(scope.2);
        self.writable.truncate(scope.3);
    }

    /// A body over the parameters of SIG, ending in an f64 expression.
    fn body(&mut self, src: &mut String) {
        self.arrays = vec!["a".into(), "out".into()];
        self.writable = vec!["out".into()];
        self.fvars.clear();
        self.ivars.clear();
        let n = 1 + self.rng.below(4);
        self.stmts(src, n, 1);
        let tail = self.fexpr();
        src.push_str(&format!("    {tail}\n}}\n\n"));
    }

    pub(crate) fn program(seed: u64) -> String {
        let mut g = Gen {
            rng: Rng::new(seed),
            fvars: Vec::new(),
            ivars: Vec::new(),
            arrays: Vec::new(),
            writable: Vec::new(),
            gs: Vec::new(),
            ss: Vec::new(),
            rs: Vec::new(),
            counter: 0,
            depth: 0,
        };
        let mut src = String::new();
        for k in 0..2 + g.rng.below(5) {
            match g.rng.below(4) {
                // A pair-valued scalar function, maybe with rules.
                0 => {
                    let name = format!("s{k}");
                    let hint = g.hint();
                    src.push_str(&format!(
                        "{hint}fn {name}(x: f64, y: f64) -> (f64, f64) {{\n    \
                         if x < y {{ return (y, x * y); }}\n    (x - y, sin(x))\n}}\n"
                    ));
                    if g.rng.chance(60) {
                        src.push_str(&format!(
                            "rule forward {name}(x: f64, tx: f64, y: f64, ty: f64) -> (f64, f64, f64, f64) \
                             {{ let (p, q) = {name}(x, y); (p, q, tx, ty) }}\n"
                        ));
                    }
                    if g.rng.chance(60) {
                        src.push_str(&format!(
                            "rule reverse {name}(x: f64, y: f64, d0: f64, d1: f64) -> (f64, f64) \
                             {{ (d0 * y, d1 * x) }}\n"
                        ));
                    }
                    g.ss.push(name);
                }
                // Direct or mutual recursion, bounded by a depth argument.
                1 => {
                    let (p, q) = (format!("r{k}"), format!("rr{k}"));
                    let (hp, hq) = (g.hint(), g.hint());
                    if g.rng.chance(50) {
                        src.push_str(&format!(
                            "{hp}fn {p}(x: f64, d: i64) -> f64 {{\n    \
                             if d <= 0 {{ return x; }}\n    {p}(x * 0.5, d - 1) + 1.0\n}}\n"
                        ));
                    } else {
                        src.push_str(&format!(
                            "{hp}fn {p}(x: f64, d: i64) -> f64 {{ if d <= 0 {{ x }} else {{ {q}(sin(x), d - 1) }} }}\n\
                             {hq}fn {q}(x: f64, d: i64) -> f64 {{ if d <= 0 {{ -x }} else {{ {p}(x * 0.5, d - 1) + 1.0 }} }}\n"
                        ));
                    }
                    g.rs.push(p);
                }
                _ => {
                    let name = format!("g{k}");
                    let hint = g.hint();
                    src.push_str(&format!("{hint}fn {name}{SIG} {{\n"));
                    g.body(&mut src);
                    g.gs.push(name);
                }
            }
        }
        src.push_str(&format!("fn main{SIG} {{\n"));
        g.body(&mut src);
        src
    }
}

fn check_program(seed: u64, budget: usize) -> Result<(), TestCaseError> {
    let src = Gen::program(seed);
    let before = adze_lang::compile("generated.adz", &src)
        .map_err(|e| TestCaseError::fail(format!("{e:?}\n{src}")))?;
    let mut after = before.clone();
    inline_module(&mut after, &DefaultPolicy { budget });
    check_well_formed(&after).map_err(|e| TestCaseError::fail(format!("{e}\n{src}")))?;
    for (id, f) in before.iter() {
        for args in inputs(&before, id) {
            compare_runs(&before, &after, &f.name, &args)
                .map_err(|e| TestCaseError::fail(format!("{e}\n{src}\n{after}")))?;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

    #[test]
    fn inlining_generated_programs_keeps_ir_valid_and_results_identical(
        seed in any::<u64>(),
        budget in prop_oneof![Just(0usize), Just(8), Just(64), Just(usize::MAX)],
    ) {
        check_program(seed, budget)?;
    }
}

#[test]
fn the_generator_makes_varied_programs() {
    let all: String = (0..40).map(Gen::program).collect();
    for needle in [
        "#[inline(always)]",
        "#[inline(never)]",
        "rule forward",
        "rule reverse",
        "zeros(",
        "return",
        "rr",
    ] {
        assert!(all.contains(needle), "{needle} never generated");
    }
    assert_ne!(Gen::program(1), Gen::program(2));
    // Some generated programs really get inlined, with rule regions.
    let mut regions = 0;
    for seed in 0..40 {
        let mut m = compile(&Gen::program(seed));
        regions += inline_module(&mut m, &DefaultPolicy { budget: usize::MAX }).regions;
    }
    assert!(regions > 0);
}
