//! The generator: random well-typed `.adz` programs from a `u64` seed.
//!
//! A program is a few helper functions `f0 .. fK` (each may call the ones
//! before it; a recursive helper also calls itself with an `i64` countdown),
//! custom rules on some of them, a primal `top(x, y)` that calls them, and a
//! chain of in-source derivatives `d1 .. dN` (`N` the nesting order, 1..=3):
//! `d1` differentiates `top`, `d2` differentiates `d1`, and so on, each in
//! forward or reverse mode, so that every `dk` is `u · ∇ d(k-1)` for a known
//! direction `u` (what the finite-difference check uses). With array
//! results on (the default), helpers may also return `[f64]`, `(f64,
//! [f64])`, `([f64], [f64])` or `[i64]`, and a program may have `topa(x,
//! y)`, a top-level function with array results that `top` calls and the
//! runner differentiates from outside ([`ArrayTop`]).
//!
//! Every statement is one line and every item is separated from the next by
//! a blank line, so that the reducer can delete lines and items; constructs
//! whose parts must stay together (a `while` header and its counter's
//! increment, a forward rule's primal result) are written on one line.
//! While loops always count their trip count in the header's line, so no
//! deletion can make a program run forever.

/// The random source: xorshift64*, seeded by splitmix64
/// ([`Rng::splitmix`]), shared with the test suite's program generators.
pub use adze_test_support::rng::Rng;

/// A differentiation mode of one level of the derivative chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    Forward,
    Reverse,
}

impl Mode {
    pub fn letter(self) -> char {
        match self {
            Mode::Forward => 'f',
            Mode::Reverse => 'r',
        }
    }
}

/// The mode order of a chain as letters, innermost (`d1`) first: `"rf"` is
/// forward over reverse.
pub fn mode_order(modes: &[Mode]) -> String {
    modes.iter().map(|m| m.letter()).collect()
}

/// One level of the derivative chain: `name(x, y) = dir · ∇ of(x, y)`.
#[derive(Clone, Debug)]
pub struct Deriv {
    pub name: String,
    pub of: String,
    pub mode: Mode,
    pub dir: [f64; 2],
}

/// An argument point `(x, y)` of `top` and of every `dk`.
#[derive(Clone, Copy, Debug)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    /// Chosen to hit non-differentiable points (zeros, ties, integers):
    /// never finite-difference checked.
    pub special: bool,
}

/// What a program contains (for the figures).
#[derive(Clone, Debug, Default)]
pub struct Features {
    pub helpers: usize,
    pub forward_rules: usize,
    pub reverse_rules: usize,
    pub recursive: usize,
    pub tuple: usize,
    pub writer: usize,
    pub with_autodiff: usize,
    pub loops: usize,
    /// `break`s and `continue`s.
    pub exits: usize,
    /// Helpers with array results, by shape: `-> [f64]`, `-> (f64, [f64])`,
    /// `-> ([f64], [f64])`, `-> [i64]`.
    pub arr_map: usize,
    pub arr_tuple: usize,
    pub arr_pair: usize,
    pub indices: usize,
    /// Calls of helpers with array results (bound, discarded, in loops).
    pub array_calls: usize,
    /// In-source `autodiff` of a helper with array results.
    pub array_autodiff: usize,
    /// Custom rules on helpers with array results.
    pub array_rules: usize,
}

/// A generated program and what to run.
#[derive(Clone, Debug)]
pub struct Program {
    pub seed: u64,
    pub source: String,
    /// `modes[k]` is the mode of `d{k+1}`.
    pub modes: Vec<Mode>,
    pub chain: Vec<Deriv>,
    /// No `rule` item: derivatives can be checked against finite differences.
    pub rule_free: bool,
    pub points: Vec<Point>,
    pub features: Features,
    /// A top-level function with array results, `topa(x, y)`, that the
    /// runner differentiates from outside (`Session::derive`, forward and
    /// reverse) besides running it; `top` calls it too.
    pub array_top: Option<ArrayTop>,
}

/// The top-level function with array results of a program.
#[derive(Clone, Debug)]
pub struct ArrayTop {
    pub name: String,
    /// Its results in order: `true` for an `[f64]`, `false` for an f64.
    pub results: Vec<bool>,
    /// The direction `(tx, ty)` of the forward derivative (and of the
    /// dot-product test).
    pub dir: [f64; 2],
}

/// The cotangent given to the reverse derivative of an array top: element
/// `j` of result `r` (for an f64 result, `j = 0`).
pub fn cotangent(r: usize, j: usize) -> f64 {
    1.0 - 0.4 * r as f64 + 0.25 * j as f64
}

impl Program {
    pub fn order(&self) -> usize {
        self.chain.len()
    }
    /// The functions the runner compares: `top`, `d1`, .., `dN`.
    pub fn functions(&self) -> Vec<String> {
        std::iter::once("top".to_string())
            .chain(self.chain.iter().map(|d| d.name.clone()))
            .collect()
    }
}

/// Generator settings.
#[derive(Clone, Copy, Debug)]
pub struct GenConfig {
    /// The highest nesting order of the derivative chain (1..=3).
    pub order_max: usize,
    /// A fixed mode order for the chain (innermost first), instead of a
    /// random one: `--modes rrr` aims a run at third-order reverse.
    pub modes: Option<[Option<Mode>; 3]>,
    /// Random points checked beyond the usual four (drawn after
    /// everything else, so a seed's program and first four points do not
    /// change): last-bit differences show at a fraction of the points.
    pub extra_points: usize,
    /// Helpers with array results and their callers (`-> [f64]`, tuples
    /// with arrays, `-> [i64]`). Off: exactly the programs of the generator
    /// before array results (the same seeds give the same programs).
    pub array_results: bool,
    /// With `array_results`: the percentage of programs with a top-level
    /// function with array results (`topa`, differentiated from outside).
    pub array_top_percent: usize,
    /// The percentage of loops given a `#[checkpoint]` attribute (`for`
    /// loops `#[checkpoint(snapshots = K)]` half of the time), drawn from
    /// a generator of their own: the same seed gives the same program
    /// but for those lines.
    pub checkpoint_percent: usize,
    /// The percentage of loops given `#[ordered]` (their sums keep the
    /// written order, docs/language.md "The order of a sum"), drawn from a
    /// generator of their own, after the `#[checkpoint]` lines: the same
    /// seed gives the same program but for those lines.
    pub ordered_percent: usize,
}

impl Default for GenConfig {
    fn default() -> GenConfig {
        GenConfig {
            order_max: 3,
            modes: None,
            extra_points: 0,
            array_results: true,
            array_top_percent: 40,
            checkpoint_percent: 0,
            ordered_percent: 0,
        }
    }
}

/// Parses a mode order such as `rfr` (innermost first).
pub fn parse_modes(s: &str) -> Option<[Option<Mode>; 3]> {
    if s.is_empty() || s.len() > 3 {
        return None;
    }
    let mut out = [None; 3];
    for (i, c) in s.chars().enumerate() {
        out[i] = Some(match c {
            'f' => Mode::Forward,
            'r' => Mode::Reverse,
            _ => return None,
        });
    }
    Some(out)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `(x: f64, y: f64) -> f64`
    Scalar,
    /// `(x: f64, y: f64) -> (f64, f64)`
    Tuple,
    /// `(x: f64, y: f64, a: mut [f64]) -> f64`, writes `a`
    Writer,
    /// `(x: f64, y: f64, n: i64) -> f64`, calls itself with `n - 1`
    Recursive,
    /// `(x: f64, y: f64) -> f64`, contains an `autodiff`
    Diff,
    /// `(x: f64, y: f64, a: [f64]) -> [f64]`
    ArrMap,
    /// `(x: f64, y: f64, a: [f64]) -> (f64, [f64])`
    ArrTuple,
    /// `(x: f64, y: f64, a: [f64]) -> ([f64], [f64])`
    ArrPair,
    /// `(x: f64, y: f64, n: i64) -> [i64]`: small non-negative integers,
    /// used by the callers as gather indices
    Indices,
}

impl Kind {
    /// Returns an array (or a tuple with arrays).
    fn array_result(self) -> bool {
        matches!(
            self,
            Kind::ArrMap | Kind::ArrTuple | Kind::ArrPair | Kind::Indices
        )
    }
    /// Takes the read-only array `a` (at least 2 elements).
    fn takes_array(self) -> bool {
        matches!(self, Kind::ArrMap | Kind::ArrTuple | Kind::ArrPair)
    }
    /// Returns one f64 (usable in an expression).
    fn scalar_result(self) -> bool {
        matches!(
            self,
            Kind::Scalar | Kind::Diff | Kind::Recursive | Kind::Writer
        )
    }
}

/// The shape of a function's array results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// `-> [f64]`
    Arr,
    /// `-> (f64, [f64])`
    ScalarArr,
    /// `-> ([f64], [f64])`
    ArrArr,
}

impl Shape {
    fn of(kind: Kind) -> Option<Shape> {
        match kind {
            Kind::ArrMap => Some(Shape::Arr),
            Kind::ArrTuple => Some(Shape::ScalarArr),
            Kind::ArrPair => Some(Shape::ArrArr),
            _ => None,
        }
    }
    fn text(self) -> &'static str {
        match self {
            Shape::Arr => "[f64]",
            Shape::ScalarArr => "(f64, [f64])",
            Shape::ArrArr => "([f64], [f64])",
        }
    }
    /// `true` for an array result, in order.
    fn results(self) -> Vec<bool> {
        match self {
            Shape::Arr => vec![true],
            Shape::ScalarArr => vec![false, true],
            Shape::ArrArr => vec![true, true],
        }
    }
}

#[derive(Clone, Debug)]
struct Helper {
    name: String,
    kind: Kind,
    /// The minimum lengths of its array results, in order (known once its
    /// body is written).
    rlens: Vec<usize>,
}

#[derive(Clone, Debug, Default)]
struct Scope {
    /// Readable f64 names.
    f: Vec<String>,
    /// Assignable f64 `var`s.
    vars: Vec<String>,
    /// Non-negative, small i64 names (loop indices, counters, `n`).
    ints: Vec<String>,
    /// Arrays: name, minimum length, writable.
    arrays: Vec<(String, usize, bool)>,
    /// Local i64 arrays of non-negative small integers: name, length.
    iarrays: Vec<(String, usize)>,
    /// Loop indices that run over an array's length (`for i in
    /// 0..len(a)`): (index, array), so that `a[i]` is in bounds, and proven
    /// so by the loop (the bounds proofs, and reverse mode's loop-invariant
    /// loads, get exercised).
    indices: Vec<(String, String)>,
}

const CONSTS: [&str; 10] = [
    "0.5",
    "2.0",
    "-1.5",
    "0.0",
    "1.0",
    "3.0",
    "0.25",
    "-1.0",
    "HALF",
    "f64(BITS)",
];

/// The top-level constants every program declares (issue #16), used as
/// leaves (`CONSTS`): an f64 built from another, and an i64 from bitwise
/// operators.
const CONST_ITEMS: &str =
    "const HALF: f64 = ONE / 2;\nconst ONE: f64 = 1.0;\nconst BITS: i64 = 1 << 2 | 1;\n\n";
const SMOOTH: [&str; 8] = [
    "sin", "cos", "tanh", "atan", "sinh", "asinh", "erfc", "exp2",
];
/// Intrinsics with infinite, NaN or jumping partials somewhere (`acosh` is
/// drawn as `acosh(1.0 + abs(..))`, inside its domain, singular at 1).
const SINGULAR: [&str; 16] = [
    "sqrt", "log", "abs", "floor", "cbrt", "sqrt", "ceil", "sign", "round", "asin", "log2",
    "log10", "atanh", "lgamma", "digamma", "acosh",
];
const BINARY: [&str; 7] = ["min", "max", "min", "max", "hypot", "atan2", "pow"];

/// Generates the body of one function or rule, line by line.
struct FnGen<'a> {
    rng: &'a mut Rng,
    helpers: &'a [Helper],
    /// `helpers[..callable]` may be called.
    callable: usize,
    lines: Vec<String>,
    indent: usize,
    scopes: Vec<Scope>,
    counter: usize,
    calls_left: usize,
    /// Results of a `return` statement: 0 (none allowed), 1 or 2.
    returns: usize,
    autodiff_left: usize,
    /// Helpers called (indices).
    called: Vec<usize>,
    loops: usize,
    /// Loops around the statement being generated.
    loop_depth: usize,
    exits: usize,
    /// Calls of helpers with array results, `autodiff`s of them.
    array_calls: usize,
    array_autodiffs: usize,
}

impl<'a> FnGen<'a> {
    fn new(rng: &'a mut Rng, helpers: &'a [Helper], callable: usize, scope: Scope) -> Self {
        FnGen {
            rng,
            helpers,
            callable,
            lines: Vec::new(),
            indent: 1,
            scopes: vec![scope],
            counter: 0,
            calls_left: 3,
            returns: 0,
            autodiff_left: 0,
            called: Vec::new(),
            loops: 0,
            loop_depth: 0,
            exits: 0,
            array_calls: 0,
            array_autodiffs: 0,
        }
    }

    fn line(&mut self, text: impl AsRef<str>) {
        let mut s = "    ".repeat(self.indent);
        s.push_str(text.as_ref());
        self.lines.push(s);
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.counter += 1;
        format!("{prefix}{}", self.counter)
    }

    fn top(&mut self) -> &mut Scope {
        self.scopes.last_mut().unwrap()
    }
    fn fnames(&self) -> Vec<String> {
        self.scopes
            .iter()
            .flat_map(|s| s.f.iter().cloned())
            .collect()
    }
    fn vars(&self) -> Vec<String> {
        self.scopes
            .iter()
            .flat_map(|s| s.vars.iter().cloned())
            .collect()
    }
    fn ints(&self) -> Vec<String> {
        self.scopes
            .iter()
            .flat_map(|s| s.ints.iter().cloned())
            .collect()
    }
    fn arrays(&self, writable: bool) -> Vec<(String, usize)> {
        self.scopes
            .iter()
            .flat_map(|s| s.arrays.iter())
            .filter(|a| a.2 || !writable)
            .map(|a| (a.0.clone(), a.1))
            .collect()
    }

    fn iarrays(&self) -> Vec<(String, usize)> {
        self.scopes
            .iter()
            .flat_map(|s| s.iarrays.iter().cloned())
            .collect()
    }

    fn var_name(&mut self) -> String {
        let fs = self.fnames();
        self.rng.pick(&fs).clone()
    }

    fn leaf(&mut self) -> String {
        match self.rng.below(10) {
            0 | 1 => self.rng.pick(&CONSTS).to_string(),
            2 => {
                let ints = self.ints();
                if ints.is_empty() {
                    self.var_name()
                } else {
                    let i = self.rng.pick(&ints).clone();
                    format!("f64({})", self.int_expr(&i))
                }
            }
            3 => {
                let arrays = self.arrays(false);
                if arrays.is_empty() {
                    self.var_name()
                } else {
                    let (a, len) = self.rng.pick(&arrays).clone();
                    self.index(&a, len)
                }
            }
            _ => self.var_name(),
        }
    }

    /// `a[..]` in bounds: a literal below the minimum length, an index
    /// modulo the length, or (a gather) an element of a local i64 array
    /// modulo the length.
    fn index(&mut self, a: &str, len: usize) -> String {
        let over: Vec<String> = self
            .scopes
            .iter()
            .flat_map(|s| s.indices.iter())
            .filter(|(_, b)| b == a)
            .map(|(i, _)| i.clone())
            .collect();
        if !over.is_empty() && self.rng.chance(60) {
            return format!("{a}[{}]", self.rng.pick(&over));
        }
        let iarrays = self.iarrays();
        if !iarrays.is_empty() && self.rng.chance(25) {
            let (p, plen) = self.rng.pick(&iarrays).clone();
            return format!("{a}[{p}[{}] % len({a})]", self.rng.below(plen));
        }
        let ints = self.ints();
        if !ints.is_empty() && self.rng.chance(40) {
            let i = self.rng.pick(&ints).clone();
            format!("{a}[{} % len({a})]", self.int_expr(&i))
        } else if self.rng.chance(10) {
            // An index converted from an f64 (`i64(..)` truncates; a NaN or
            // an infinity stops every setting alike).
            let e = self.fexpr(1);
            format!("{a}[i64(abs(sin({e})) * 3.0) % len({a})]")
        } else {
            format!("{a}[{}]", self.rng.below(len))
        }
    }

    /// A small non-negative i64 made from `i` (itself small and
    /// non-negative): `i`, or `i` through a bitwise operator.
    fn int_expr(&mut self, i: &str) -> String {
        match self.rng.below(6) {
            0 => format!("({i} & 3)"),
            1 => format!("({i} | 1)"),
            2 => format!("({i} << 1)"),
            3 => format!("({i} >> 1)"),
            _ => i.to_string(),
        }
    }

    /// A small non-negative i64 (a recursion depth).
    fn small_int(&mut self) -> String {
        let ints = self.ints();
        if !ints.is_empty() && self.rng.chance(30) {
            self.rng.pick(&ints).clone()
        } else {
            self.rng.below(4).to_string()
        }
    }

    /// An argument of a singular intrinsic: often a bare variable or a
    /// difference of two, so that the argument points hit the singularity
    /// exactly (`sqrt(x)` at `x = 0`, `sqrt(x - y)` at `x = y`).
    fn singular_arg(&mut self, depth: usize) -> String {
        match self.rng.below(5) {
            0 | 1 => self.var_name(),
            2 => {
                let (a, b) = (self.var_name(), self.var_name());
                format!("{a} - {b}")
            }
            _ => self.fexpr(depth),
        }
    }

    fn fexpr(&mut self, depth: usize) -> String {
        if depth == 0 || self.rng.chance(25) {
            return self.leaf();
        }
        let d = depth - 1;
        match self.rng.below(14) {
            0 | 1 => {
                let f = *self.rng.pick(&SMOOTH);
                format!("{f}({})", self.fexpr(d))
            }
            2 => format!("exp(sin({}))", self.fexpr(d)),
            3 | 4 => {
                let f = *self.rng.pick(&SINGULAR);
                let a = self.singular_arg(d);
                if f == "acosh" {
                    format!("acosh(1.0 + abs({a}))")
                } else {
                    format!("{f}({a})")
                }
            }
            5 => format!("(1.0 / ({}))", self.singular_arg(d)),
            6 => {
                let f = *self.rng.pick(&BINARY);
                let a = self.singular_arg(d);
                let b = self.singular_arg(d);
                format!("{f}({a}, {b})")
            }
            7 => {
                let e = *self.rng.pick(&["2", "3", "-1", "0.5", "2"]);
                format!("({} ^ {e})", self.fexpr(d))
            }
            8 => {
                let c = self.bexpr(d);
                let a = self.fexpr(d);
                let b = self.fexpr(d);
                format!("(if {c} {{ {a} }} else {{ {b} }})")
            }
            9 | 10 => match self.call_expr(d) {
                Some(c) => c,
                None => self.arith(d),
            },
            11 => format!("-({})", self.fexpr(d)),
            _ => self.arith(d),
        }
    }

    fn arith(&mut self, d: usize) -> String {
        let op = *self.rng.pick(&["+", "-", "*", "*", "/", "+"]);
        let a = self.fexpr(d);
        let b = self.fexpr(d);
        format!("({a} {op} {b})")
    }

    fn bexpr(&mut self, d: usize) -> String {
        let op = *self.rng.pick(&["<", "<=", ">", ">=", "<"]);
        let a = if self.rng.chance(60) {
            self.leaf()
        } else {
            self.fexpr(d.min(1))
        };
        let b = self.leaf();
        let c = format!("{a} {op} {b}");
        if self.rng.chance(15) {
            let e = self.leaf();
            let f = self.leaf();
            let join = *self.rng.pick(&["&&", "||"]);
            format!("{c} {join} {e} < {f}")
        } else {
            c
        }
    }

    /// A call of a helper with one f64 result, as an expression.
    fn call_expr(&mut self, d: usize) -> Option<String> {
        if self.calls_left == 0 {
            return None;
        }
        let has_array = !self.arrays(true).is_empty();
        let cands: Vec<usize> = (0..self.callable)
            .filter(|&j| match self.helpers[j].kind {
                Kind::Writer => has_array,
                k => k.scalar_result(),
            })
            .collect();
        if cands.is_empty() {
            return None;
        }
        let j = *self.rng.pick(&cands);
        Some(self.call_of(j, d))
    }

    /// `fj(..)` for a helper with one result (Scalar, Diff, Recursive,
    /// Writer with an array in scope).
    fn call_of(&mut self, j: usize, d: usize) -> String {
        self.calls_left = self.calls_left.saturating_sub(1);
        self.called.push(j);
        let name = self.helpers[j].name.clone();
        let a = self.fexpr(d);
        let b = self.fexpr(d);
        match self.helpers[j].kind {
            Kind::Recursive => {
                let n = self.small_int();
                format!("{name}({a}, {b}, {n})")
            }
            Kind::Writer => {
                let arrays = self.arrays(true);
                let arr = self.rng.pick(&arrays).0.clone();
                format!("{name}({a}, {b}, {arr})")
            }
            _ => format!("{name}({a}, {b})"),
        }
    }

    /// A fresh scratch array `let tN = zeros(L);`, returned by name.
    fn scratch(&mut self) -> String {
        let t = self.fresh("t");
        let len = 2 + self.rng.below(2);
        self.line(format!("let {t} = zeros({len});"));
        self.top().arrays.push((t.clone(), len, true));
        t
    }

    fn stmts(&mut self, n: usize, nest: usize) {
        for _ in 0..n {
            self.stmt(nest);
        }
    }

    /// Helpers with array results that may be called here.
    fn array_helpers(&self) -> Vec<usize> {
        (0..self.callable)
            .filter(|&j| self.helpers[j].kind.array_result())
            .collect()
    }

    fn stmt(&mut self, nest: usize) {
        // Three more cases when a helper with array results may be called
        // (never in the programs of the generator without array results,
        // whose draws stay as they were).
        let cases = if self.array_helpers().is_empty() {
            18
        } else {
            21
        };
        match self.rng.below(cases) {
            18..=20 => self.array_call(),
            0..=2 => {
                let v = self.fresh("v");
                let e = self.fexpr(3);
                self.line(format!("let {v} = {e};"));
                self.top().f.push(v);
            }
            3 => {
                let s = self.fresh("s");
                let e = self.fexpr(2);
                self.line(format!("var {s} = {e};"));
                let scope = self.top();
                scope.f.push(s.clone());
                scope.vars.push(s);
            }
            4 | 5 => self.assign(),
            6 if nest < 2 => self.for_loop(nest),
            7 if nest < 2 => self.while_loop(nest),
            8 if nest < 2 => self.if_stmt(nest),
            9 => self.tuple_call(),
            10 => self.writer_call(),
            11 => {
                self.scratch();
            }
            12 => self.store(),
            13 if self.returns > 0 => {
                let c = self.bexpr(1);
                let e = self.result_expr(2);
                self.line(format!("if {c} {{ return {e}; }}"));
            }
            14 if self.autodiff_left > 0 => self.autodiff_stmt(),
            15 if self.loop_depth > 0 => self.exit_stmt(),
            16 if self.rng.chance(50) => self.int_array(),
            16 => self.view(),
            _ => {
                let v = self.fresh("v");
                let e = self.fexpr(2);
                self.line(format!("let {v} = {e};"));
                self.top().f.push(v);
            }
        }
    }

    /// The value of a `return` or a tail: one f64 or a pair.
    fn result_expr(&mut self, d: usize) -> String {
        if self.returns == 2 {
            let a = self.fexpr(d);
            let b = self.fexpr(d);
            format!("({a}, {b})")
        } else {
            self.fexpr(d)
        }
    }

    fn assign(&mut self) {
        let vars = self.vars();
        if vars.is_empty() {
            let s = self.fresh("s");
            let e = self.fexpr(2);
            self.line(format!("var {s} = {e};"));
            let scope = self.top();
            scope.f.push(s.clone());
            scope.vars.push(s);
            return;
        }
        let s = self.rng.pick(&vars).clone();
        let e = self.fexpr(2);
        if self.rng.chance(70) {
            let op = *self.rng.pick(&["+", "*", "-", "+"]);
            self.line(format!("{s} = {s} {op} {e};"));
        } else {
            self.line(format!("{s} = {e};"));
        }
    }

    fn for_loop(&mut self, nest: usize) {
        self.loops += 1;
        let i = self.fresh("i");
        let lo = self.rng.below(2);
        let hi = lo + 1 + self.rng.below(3);
        let mut indices = Vec::new();
        if self.rng.chance(30) {
            if self.arrays(false).is_empty() {
                self.scratch();
            }
            let arrays = self.arrays(false);
            let (a, _) = self.rng.pick(&arrays).clone();
            self.line(format!("for {i} in 0..len({a}) {{"));
            indices.push((i.clone(), a));
        } else {
            self.line(format!("for {i} in {lo}..{hi} {{"));
        }
        self.loop_depth += 1;
        self.block(
            Scope {
                ints: vec![i],
                indices,
                ..Scope::default()
            },
            nest,
        );
        self.loop_depth -= 1;
        self.line("}");
    }

    /// `if c { break; }` or `if c { continue; }` in a loop body. A `while`
    /// counts its trip in its header's line, so `continue` cannot make it
    /// run forever.
    fn exit_stmt(&mut self) {
        self.exits += 1;
        let c = self.bexpr(1);
        let word = if self.rng.chance(50) {
            "break"
        } else {
            "continue"
        };
        self.line(format!("if {c} {{ {word}; }}"));
    }

    fn while_loop(&mut self, nest: usize) {
        self.loops += 1;
        let j = self.fresh("j");
        let k = 1 + self.rng.below(3);
        self.line(format!("var {j} = 0;"));
        // The counter's increment is on the header's line: no deletion by
        // the reducer can make the loop run forever.
        let extra = if self.rng.chance(40) {
            let c = self.bexpr(1);
            format!(" && ({c})")
        } else {
            String::new()
        };
        self.line(format!("while {j} < {k}{extra} {{ {j} = {j} + 1;"));
        self.loop_depth += 1;
        self.block(
            Scope {
                ints: vec![j],
                ..Scope::default()
            },
            nest,
        );
        self.loop_depth -= 1;
        self.line("}");
    }

    /// A loop or branch body: a few statements, and an update of an outer
    /// `var` so that the body matters.
    fn block(&mut self, scope: Scope, nest: usize) {
        let outer_vars = self.vars();
        self.scopes.push(scope);
        self.indent += 1;
        let n = 1 + self.rng.below(2);
        self.stmts(n, nest + 1);
        if !outer_vars.is_empty() && self.rng.chance(80) {
            let s = self.rng.pick(&outer_vars).clone();
            let e = self.fexpr(2);
            let op = *self.rng.pick(&["+", "*", "-", "+"]);
            self.line(format!("{s} = {s} {op} {e};"));
        }
        self.indent -= 1;
        self.scopes.pop();
    }

    fn if_stmt(&mut self, nest: usize) {
        let c = self.bexpr(1);
        self.line(format!("if {c} {{"));
        self.block(Scope::default(), nest);
        if self.rng.chance(60) {
            self.line("} else {");
            self.block(Scope::default(), nest);
        }
        self.line("}");
    }

    fn tuple_call(&mut self) {
        let cands: Vec<usize> = (0..self.callable)
            .filter(|&j| self.helpers[j].kind == Kind::Tuple)
            .collect();
        if cands.is_empty() || self.calls_left == 0 {
            return self.assign();
        }
        let j = *self.rng.pick(&cands);
        self.tuple_call_of(j);
    }

    fn tuple_call_of(&mut self, j: usize) {
        self.calls_left = self.calls_left.saturating_sub(1);
        self.called.push(j);
        let name = self.helpers[j].name.clone();
        let a = self.fexpr(2);
        let b = self.fexpr(2);
        let vars = self.vars();
        match self.rng.below(8) {
            0 | 1 => self.line(format!("{name}({a}, {b});")),
            // Tuple assignment into two `var`s (issue #16).
            6 if vars.len() >= 2 => {
                let s = self.rng.pick(&vars).clone();
                let t = vars.iter().find(|v| **v != s).cloned().unwrap_or_default();
                self.line(format!("({s}, {t}) = {name}({a}, {b});"));
            }
            6 | 7 => {
                let (p, q) = (self.fresh("s"), self.fresh("s"));
                self.line(format!("var ({p}, {q}) = {name}({a}, {b});"));
                let scope = self.top();
                scope.f.extend([p.clone(), q.clone()]);
                scope.vars.extend([p, q]);
            }
            k => {
                let (p, q) = (self.fresh("p"), self.fresh("q"));
                self.line(format!("let ({p}, {q}) = {name}({a}, {b});"));
                // Often only one of the two results is ever read.
                match k {
                    2 => self.top().f.push(p),
                    3 => self.top().f.push(q),
                    _ => self.top().f.extend([p, q]),
                }
            }
        }
    }

    fn writer_call(&mut self) {
        let cands: Vec<usize> = (0..self.callable)
            .filter(|&j| self.helpers[j].kind == Kind::Writer)
            .collect();
        if cands.is_empty() || self.calls_left == 0 {
            return self.store();
        }
        let j = *self.rng.pick(&cands);
        self.writer_call_of(j);
    }

    fn writer_call_of(&mut self, j: usize) {
        let arrays = self.arrays(true);
        if arrays.is_empty() || self.rng.chance(50) {
            // A scratch array that the caller may never read.
            self.scratch();
        }
        let call = self.call_of(j, 2);
        if self.rng.chance(50) {
            self.line(format!("{call};"));
        } else {
            let v = self.fresh("v");
            self.line(format!("let {v} = {call};"));
            self.top().f.push(v);
        }
    }

    /// `let wN = a[lo..hi];`: a view of an array in scope (of at least one
    /// element, writable as the array is), used afterwards like any array:
    /// loads, stores, `fill`, passed to writers. Sometimes with an open end
    /// (`a[lo..]`, `a[..hi]`).
    fn view(&mut self) {
        let arrays: Vec<(String, usize, bool)> = self
            .scopes
            .iter()
            .flat_map(|s| s.arrays.iter().cloned())
            .filter(|a| a.1 >= 1)
            .collect();
        if arrays.is_empty() {
            self.scratch();
            return;
        }
        let (a, len, writable) = self.rng.pick(&arrays).clone();
        let lo = self.rng.below(len);
        let hi = lo + 1 + self.rng.below(len - lo);
        let w = self.fresh("w");
        let range = match self.rng.below(4) {
            0 if lo == 0 => format!("..{hi}"),
            // Runs to the end of the array, which may be longer than the
            // `len` known here: the view is at least `len - lo` long.
            1 => format!("{lo}.."),
            _ => format!("{lo}..{hi}"),
        };
        let vlen = if range.ends_with("..") {
            len - lo
        } else {
            hi - lo
        };
        self.line(format!("let {w} = {a}[{range}];"));
        self.top().arrays.push((w, vlen, writable));
    }

    /// `let pN = zeros_i64(L);` and a few small non-negative integers into
    /// it (indices for `index`), or a store into an existing one.
    fn int_array(&mut self) {
        let existing = self.iarrays();
        if !existing.is_empty() && self.rng.chance(50) {
            let (p, len) = self.rng.pick(&existing).clone();
            let k = self.rng.below(len);
            let v = self.small_int();
            self.line(format!("{p}[{k}] = {v};"));
            return;
        }
        let p = self.fresh("p");
        let len = 1 + self.rng.below(3);
        self.line(format!("let {p} = zeros_i64({len});"));
        for k in 0..len {
            if self.rng.chance(70) {
                let v = self.small_int();
                self.line(format!("{p}[{k}] = {v};"));
            }
        }
        self.top().iarrays.push((p, len));
    }

    fn store(&mut self) {
        let arrays = self.arrays(true);
        if arrays.is_empty() {
            self.scratch();
            return;
        }
        let (a, len) = self.rng.pick(&arrays).clone();
        if self.rng.chance(20) {
            let e = self.fexpr(2);
            self.line(format!("fill({a}, {e});"));
        } else {
            let idx = self.index(&a, len);
            let e = self.fexpr(3);
            self.line(format!("{idx} = {e};"));
        }
    }

    /// An in-source `autodiff` of an earlier helper (not one that itself
    /// contains `autodiff`).
    fn autodiff_stmt(&mut self) {
        let cands: Vec<usize> = (0..self.callable)
            .filter(|&j| !matches!(self.helpers[j].kind, Kind::Diff | Kind::Indices))
            .collect();
        if cands.is_empty() {
            return self.assign();
        }
        self.autodiff_left -= 1;
        let j = *self.rng.pick(&cands);
        self.called.push(j);
        let f = self.helpers[j].name.clone();
        let kind = self.helpers[j].kind;
        if let Some(shape) = Shape::of(kind) {
            return self.array_autodiff(j, shape);
        }
        let a = self.fexpr(2);
        let b = self.fexpr(2);
        let fwd = self.rng.chance(50);
        let tang = *self.rng.pick(&["1.0", "0.5", "-1.0", "0.0"]);
        let (p, q) = (self.fresh("g"), self.fresh("g"));
        match kind {
            // Vector mode where the tangent drawn is 0.5 (no draw of its
            // own, so the other programs of a seed stay as they were):
            // two lanes, the second with tangents of its own.
            Kind::Scalar | Kind::Diff if fwd && tang == "0.5" => {
                let yarg = if self.rng.chance(30) {
                    format!("const({b})")
                } else {
                    format!("dual({b}, 1.0, -0.5)")
                };
                let r = self.fresh("g");
                self.line(format!(
                    "let ({p}, {q}, {r}) = autodiff(forward(2), {f}, dual, dual({a}, {tang}, 1.0), {yarg});"
                ));
                self.use_pair(p, q);
                self.top().f.push(r);
            }
            Kind::Scalar | Kind::Diff if fwd => {
                let yarg = if self.rng.chance(30) {
                    format!("const({b})")
                } else {
                    format!("dual({b}, 1.0)")
                };
                self.line(format!(
                    "let ({p}, {q}) = autodiff(forward, {f}, dual, dual({a}, {tang}), {yarg});"
                ));
                self.use_pair(p, q);
            }
            Kind::Scalar | Kind::Diff => {
                if self.rng.chance(30) {
                    self.line(format!(
                        "let {p} = autodiff(reverse, {f}, active, active({a}), const({b}));"
                    ));
                    self.top().f.push(p);
                } else {
                    self.line(format!(
                        "let ({p}, {q}) = autodiff(reverse, {f}, active, active({a}), active({b}));"
                    ));
                    self.use_pair(p, q);
                }
            }
            Kind::Tuple => {
                let (r, s) = (self.fresh("g"), self.fresh("g"));
                self.line(format!(
                    "let ({p}, {q}, {r}, {s}) = autodiff(forward, {f}, dual, dual({a}, {tang}), dual({b}, 1.0));"
                ));
                self.use_pair(p, r);
                self.top().f.push(s);
            }
            Kind::Recursive => {
                let n = self.small_int();
                if fwd {
                    self.line(format!(
                        "let ({p}, {q}) = autodiff(forward, {f}, dual, dual({a}, {tang}), dual({b}, 1.0), const({n}));"
                    ));
                } else {
                    self.line(format!(
                        "let ({p}, {q}) = autodiff(reverse, {f}, active, active({a}), active({b}), const({n}));"
                    ));
                }
                self.use_pair(p, q);
            }
            Kind::Writer => {
                let len = 2 + self.rng.below(2);
                let (t, dt) = (self.fresh("t"), self.fresh("t"));
                self.line(format!("let {t} = zeros({len});"));
                self.line(format!("let {dt} = zeros({len});"));
                if self.rng.chance(40) {
                    self.line(format!("{dt}[0] = 1.0;"));
                }
                if fwd {
                    self.line(format!(
                        "let ({p}, {q}) = autodiff(forward, {f}, dual, dual({a}, {tang}), const({b}), dup({t}, {dt}));"
                    ));
                } else {
                    self.line(format!(
                        "let ({p}, {q}) = autodiff(reverse, {f}, active, active({a}), active({b}), dup({t}, {dt}));"
                    ));
                }
                self.use_pair(p, q);
                let scope = self.top();
                scope.arrays.push((t, len, true));
                scope.arrays.push((dt, len, true));
            }
            Kind::ArrMap | Kind::ArrTuple | Kind::ArrPair | Kind::Indices => {
                unreachable!("handled above")
            }
        }
    }

    fn use_pair(&mut self, p: String, q: String) {
        match self.rng.below(3) {
            0 => self.top().f.push(p),
            1 => self.top().f.push(q),
            _ => self.top().f.extend([p, q]),
        }
    }

    /// A tail expression that uses (some of) the given names and some of
    /// the function's own f64 locals (others stay unused on purpose).
    fn tail_with(&mut self, names: &[String]) -> String {
        let mut e = self.fexpr(2);
        let params = ["x", "y", "tx", "ty", "dret", "d1", "d2"];
        let locals: Vec<String> = self
            .fnames()
            .into_iter()
            .filter(|n| !params.contains(&n.as_str()) && !names.contains(n))
            .collect();
        let mut used: Vec<String> = names.to_vec();
        for l in locals.iter().rev().take(4) {
            if self.rng.chance(60) {
                used.push(l.clone());
            }
        }
        for n in &used {
            let op = *self.rng.pick(&["+", "-", "+", "*"]);
            e = format!("{e} {op} {n}");
        }
        e
    }
}

/// The bodies of the helpers, by kind, each with `stmts` random statements
/// (at most 2 for some kinds), and the calls `top` makes only so that every
/// helper is reached.
impl FnGen<'_> {
    /// `Scalar`: statements and a tail.
    fn scalar_body(&mut self, stmts: usize) {
        self.stmts(stmts, 0);
        let t = self.tail_with(&[]);
        self.line(t);
    }

    /// `Diff`: an `autodiff` of an earlier helper first, then as `Scalar`.
    fn diff_body(&mut self, stmts: usize) {
        self.autodiff_left = 1;
        self.autodiff_stmt();
        self.stmts(stmts.min(2), 0);
        let t = self.tail_with(&[]);
        self.line(t);
    }

    /// `Tuple`: a pair whose second result is often singular at the points.
    fn tuple_body(&mut self, stmts: usize) {
        self.stmts(stmts, 0);
        let a = self.tail_with(&[]);
        let b = if self.rng.chance(50) {
            let f = *self.rng.pick(&["sqrt", "log", "cbrt", "asin"]);
            let v = self.singular_arg(1);
            format!("{f}({v})")
        } else {
            self.fexpr(3)
        };
        self.line(format!("({a}, {b})"));
    }

    /// `Writer`: writes `a[0]` first (often a singular value), then as
    /// `Scalar`.
    fn writer_body(&mut self, stmts: usize) {
        let f = *self.rng.pick(&["sqrt", "log", "cbrt", "abs", "floor"]);
        let v = self.singular_arg(1);
        self.line(format!("a[0] = {f}({v});"));
        self.stmts(stmts, 0);
        let t = self.tail_with(&[]);
        self.line(t);
    }

    /// `Recursive` (`name`): a base case at `n <= 0`, else a call of itself
    /// with `n - 1` whose result the tail uses; no `return`.
    fn recursive_body(&mut self, name: &str, stmts: usize) {
        self.returns = 0;
        self.stmts(stmts.min(2), 0);
        let base = self.fexpr(2);
        self.line("if n <= 0 {");
        self.indent += 1;
        self.line(base);
        self.indent -= 1;
        self.line("} else {");
        self.indent += 1;
        let r = self.fresh("r");
        let a = self.fexpr(2);
        let b = self.fexpr(1);
        self.line(format!("let {r} = {name}({a}, {b}, n - 1);"));
        let t = self.tail_with(std::slice::from_ref(&r));
        self.line(t);
        self.indent -= 1;
        self.line("}");
    }

    /// A call of helper `j` that `top` makes only so that `j` is reached;
    /// the name of its result if the tail should use it.
    fn forced_call(&mut self, j: usize) -> Option<String> {
        match self.helpers[j].kind {
            Kind::Tuple => {
                self.tuple_call_of(j);
                None
            }
            Kind::Writer => {
                self.writer_call_of(j);
                None
            }
            k if k.array_result() => {
                let b = self.array_call_of(j, true);
                b.fs.first().cloned()
            }
            _ => {
                let v = self.fresh("v");
                let c = self.call_of(j, 2);
                self.line(format!("let {v} = {c};"));
                Some(v)
            }
        }
    }
}

/// What a call with array results bound: its f64 results, its arrays
/// (name, minimum length) and its i64 arrays.
#[derive(Default)]
struct Bound {
    fs: Vec<String>,
    arrays: Vec<(String, usize)>,
    iarrays: Vec<(String, usize)>,
}

/// Helpers with array results: their bodies, their callers (which bind
/// the results with `let` / `let (..)`, index them, write into them, pass
/// them to other calls, call them in loops) and in-source derivatives of
/// them.
impl FnGen<'_> {
    /// An array argument of at least 2 elements: one in scope, or a fresh
    /// scratch array with (some of) its elements set.
    fn array_arg(&mut self) -> String {
        let cands: Vec<String> = self
            .arrays(false)
            .into_iter()
            .filter(|a| a.1 >= 2)
            .map(|a| a.0)
            .collect();
        if !cands.is_empty() && self.rng.chance(75) {
            return self.rng.pick(&cands).clone();
        }
        let t = self.scratch();
        for k in 0..2 {
            if self.rng.chance(80) {
                let e = self.fexpr(2);
                self.line(format!("{t}[{k}] = {e};"));
            }
        }
        t
    }

    /// A call of a helper with array results (a store when none may be
    /// called), sometimes in a loop.
    fn array_call(&mut self) {
        let cands = self.array_helpers();
        if cands.is_empty() || self.calls_left == 0 {
            return self.store();
        }
        let j = *self.rng.pick(&cands);
        if self.rng.chance(25) {
            self.array_call_loop(j);
        } else {
            self.array_call_of(j, false);
        }
    }

    /// `let y = fj(..);`, `let (s, y) = fj(..);`, `let (y, z) = fj(..);`
    /// or, for gather indices, `let p = fj(.., n);`; sometimes discarded
    /// (`fj(..);`). A bound array is then often written, or summed into a
    /// new `var`.
    ///
    /// A `forced` call (one that `top` makes so that the helper is reached)
    /// is never discarded, and its array is summed, the sum first in
    /// `Bound::fs`.
    fn array_call_of(&mut self, j: usize, forced: bool) -> Bound {
        self.calls_left = self.calls_left.saturating_sub(1);
        self.called.push(j);
        self.array_calls += 1;
        let h = &self.helpers[j];
        let (name, kind, rlens) = (h.name.clone(), h.kind, h.rlens.clone());
        let a = self.fexpr(2);
        let b = self.fexpr(2);
        let mut bound = Bound::default();
        if kind == Kind::Indices {
            let arrays = self.arrays(false);
            let n = if !arrays.is_empty() && self.rng.chance(40) {
                format!("len({})", self.rng.pick(&arrays).0)
            } else {
                self.small_int()
            };
            let p = self.fresh("p");
            self.line(format!("let {p} = {name}({a}, {b}, {n});"));
            self.top().iarrays.push((p.clone(), rlens[0]));
            // Often a gather through every index at once.
            if !arrays.is_empty() && (forced || self.rng.chance(60)) {
                let x = self.rng.pick(&arrays).0.clone();
                let (s, i) = (self.fresh("s"), self.fresh("i"));
                self.line(format!("var {s} = 0.0;"));
                self.line(format!(
                    "for {i} in 0..len({p}) {{ {s} = {s} + {x}[{p}[{i}] % len({x})]; }}"
                ));
                let scope = self.top();
                scope.f.push(s.clone());
                scope.vars.push(s.clone());
                bound.fs.push(s);
            }
            bound.iarrays.push((p, rlens[0]));
            return bound;
        }
        let arr = self.array_arg();
        let call = format!("{name}({a}, {b}, {arr})");
        if !forced && self.rng.chance(8) {
            self.line(format!("{call};"));
            return bound;
        }
        match kind {
            Kind::ArrMap => {
                let y = self.fresh("y");
                self.line(format!("let {y} = {call};"));
                bound.arrays.push((y, rlens[0]));
            }
            Kind::ArrTuple => {
                let (s, y) = (self.fresh("s"), self.fresh("y"));
                self.line(format!("let ({s}, {y}) = {call};"));
                // Sometimes only the array is read.
                if self.rng.chance(70) {
                    bound.fs.push(s);
                }
                bound.arrays.push((y, rlens[0]));
            }
            _ => {
                let (y, z) = (self.fresh("y"), self.fresh("y"));
                self.line(format!("let ({y}, {z}) = {call};"));
                bound.arrays.push((y, rlens[0]));
                bound.arrays.push((z, rlens[1]));
            }
        }
        let scope = self.top();
        scope.f.extend(bound.fs.iter().cloned());
        scope
            .arrays
            .extend(bound.arrays.iter().map(|(y, l)| (y.clone(), *l, true)));
        let (y, len) = bound.arrays[self.rng.below(bound.arrays.len())].clone();
        let how = if forced { 5 } else { self.rng.below(10) };
        match how {
            // Written by the caller, which owns it.
            0..=2 => {
                let idx = self.index(&y, len);
                let e = self.fexpr(2);
                self.line(format!("{idx} = {e};"));
            }
            // Summed, every element weighted.
            3..=7 => {
                let (s, i) = (self.fresh("s"), self.fresh("i"));
                let w = self.leaf();
                self.line(format!("var {s} = 0.0;"));
                self.line(format!(
                    "for {i} in 0..len({y}) {{ {s} = {s} + {y}[{i}] * {w}; }}"
                ));
                let scope = self.top();
                scope.f.push(s.clone());
                scope.vars.push(s.clone());
                bound.fs.insert(0, s);
            }
            _ => {}
        }
        bound
    }

    /// A call of helper `j` with array results in a loop (the result's
    /// memory is reused from one iteration to the next), its result summed
    /// into a new `var`.
    fn array_call_loop(&mut self, j: usize) {
        let (s, i) = (self.fresh("s"), self.fresh("i"));
        let k = 1 + self.rng.below(3);
        self.line(format!("var {s} = 0.0;"));
        self.line(format!("for {i} in 0..{k} {{"));
        self.loops += 1;
        self.loop_depth += 1;
        self.scopes.push(Scope {
            ints: vec![i],
            ..Scope::default()
        });
        self.indent += 1;
        let b = self.array_call_of(j, false);
        let e = if let Some((y, len)) = b.arrays.first().cloned() {
            self.index(&y, len)
        } else if let Some(f) = b.fs.first() {
            f.clone()
        } else if let Some((p, _)) = b.iarrays.first() {
            format!("f64({p}[0])")
        } else {
            self.fexpr(1)
        };
        self.line(format!("{s} = {s} + {e};"));
        self.indent -= 1;
        self.scopes.pop();
        self.loop_depth -= 1;
        self.line("}");
        let scope = self.top();
        scope.f.push(s.clone());
        scope.vars.push(s);
    }

    /// An in-source `autodiff` of helper `j`, which has array results:
    /// forward (`dual` returns the primal results, then the tangents,
    /// arrays included) or reverse (the cotangents as `dup(..)`, as long as
    /// the results of a primal call with the same arguments).
    fn array_autodiff(&mut self, j: usize, shape: Shape) {
        self.array_autodiffs += 1;
        let f = self.helpers[j].name.clone();
        let rlens = self.helpers[j].rlens.clone();
        let len = 2 + self.rng.below(2);
        let (t, dt) = (self.fresh("t"), self.fresh("t"));
        self.line(format!("let {t} = zeros({len});"));
        for k in 0..len {
            if self.rng.chance(75) {
                let e = self.fexpr(2);
                self.line(format!("{t}[{k}] = {e};"));
            }
        }
        self.line(format!("let {dt} = zeros({len});"));
        let (a, b) = (self.fresh("v"), self.fresh("v"));
        let (ea, eb) = (self.fexpr(2), self.fexpr(2));
        self.line(format!("let {a} = {ea};"));
        self.line(format!("let {b} = {eb};"));
        self.top().f.extend([a.clone(), b.clone()]);
        let tang = *self.rng.pick(&["1.0", "0.5", "-1.0", "0.0"]);
        let dup = self.rng.chance(80);
        let aarg = if dup {
            format!("dup({t}, {dt})")
        } else {
            format!("const({t})")
        };
        if self.rng.chance(50) {
            match self.rng.below(3) {
                0 => self.line(format!("{dt}[0] = 1.0;")),
                1 => self.line(format!("fill({dt}, 0.5);")),
                _ => {}
            }
            let yarg = if self.rng.chance(30) {
                format!("const({b})")
            } else {
                format!("dual({b}, 1.0)")
            };
            let call = format!("autodiff(forward, {f}, dual, dual({a}, {tang}), {yarg}, {aarg})");
            match shape {
                Shape::Arr => {
                    let (p, q) = (self.fresh("y"), self.fresh("y"));
                    self.line(format!("let ({p}, {q}) = {call};"));
                    let scope = self.top();
                    scope.arrays.push((p, rlens[0], true));
                    scope.arrays.push((q, rlens[0], true));
                }
                Shape::ScalarArr => {
                    let (p, q) = (self.fresh("g"), self.fresh("y"));
                    let (tp, tq) = (self.fresh("g"), self.fresh("y"));
                    self.line(format!("let ({p}, {q}, {tp}, {tq}) = {call};"));
                    self.use_pair(p, tp);
                    let scope = self.top();
                    scope.arrays.push((q, rlens[0], true));
                    scope.arrays.push((tq, rlens[0], true));
                }
                Shape::ArrArr => {
                    let ys: Vec<String> = (0..4).map(|_| self.fresh("y")).collect();
                    self.line(format!(
                        "let ({}, {}, {}, {}) = {call};",
                        ys[0], ys[1], ys[2], ys[3]
                    ));
                    let scope = self.top();
                    for (k, y) in ys.into_iter().enumerate() {
                        scope.arrays.push((y, rlens[k % 2], true));
                    }
                }
            }
        } else {
            // The cotangents, one per f64 or array result.
            let seed = |g: &mut FnGen, d: &str| match g.rng.below(3) {
                0 => g.line(format!("fill({d}, 1.0);")),
                1 => g.line(format!("{d}[0] = 1.0;")),
                _ => {
                    let e = g.fexpr(1);
                    g.line(format!("fill({d}, {e});"));
                }
            };
            let primal = format!("{f}({a}, {b}, {t})");
            let ret = match shape {
                Shape::Arr => {
                    let (c, d) = (self.fresh("y"), self.fresh("t"));
                    self.line(format!("let {c} = {primal};"));
                    self.line(format!("let {d} = zeros(len({c}));"));
                    seed(self, &d);
                    let scope = self.top();
                    scope.arrays.push((c, rlens[0], true));
                    scope.arrays.push((d.clone(), rlens[0], true));
                    format!("dup({d})")
                }
                Shape::ScalarArr => {
                    let (s, c, d) = (self.fresh("s"), self.fresh("y"), self.fresh("t"));
                    self.line(format!("let ({s}, {c}) = {primal};"));
                    self.line(format!("let {d} = zeros(len({c}));"));
                    seed(self, &d);
                    let ds = *self.rng.pick(&["1.0", "0.0", "-0.5"]);
                    let scope = self.top();
                    scope.f.push(s);
                    scope.arrays.push((c, rlens[0], true));
                    scope.arrays.push((d.clone(), rlens[0], true));
                    format!("dup({ds}, {d})")
                }
                Shape::ArrArr => {
                    let (c1, c2) = (self.fresh("y"), self.fresh("y"));
                    let (d1, d2) = (self.fresh("t"), self.fresh("t"));
                    self.line(format!("let ({c1}, {c2}) = {primal};"));
                    self.line(format!("let {d1} = zeros(len({c1}));"));
                    self.line(format!("let {d2} = zeros(len({c2}));"));
                    seed(self, &d1);
                    if self.rng.chance(60) {
                        seed(self, &d2);
                    }
                    let scope = self.top();
                    scope.arrays.push((c1, rlens[0], true));
                    scope.arrays.push((c2, rlens[1], true));
                    scope.arrays.push((d1.clone(), rlens[0], true));
                    scope.arrays.push((d2.clone(), rlens[1], true));
                    format!("dup({d1}, {d2})")
                }
            };
            let (p, q) = (self.fresh("g"), self.fresh("g"));
            if self.rng.chance(30) {
                self.line(format!(
                    "let {p} = autodiff(reverse, {f}, {ret}, active({a}), const({b}), {aarg});"
                ));
                self.top().f.push(p);
            } else {
                self.line(format!(
                    "let ({p}, {q}) = autodiff(reverse, {f}, {ret}, active({a}), active({b}), {aarg});"
                ));
                self.use_pair(p, q);
            }
        }
        let scope = self.top();
        scope.arrays.push((t, len, true));
        if dup {
            scope.arrays.push((dt, len, true));
        }
    }

    /// An array for a result, with the lines that make it: its expression
    /// (a name, or a view of `a`) and its minimum length. `a` is in scope
    /// with at least `amin` elements (a parameter, copied when returned,
    /// or `topa`'s local, moved).
    fn array_value(&mut self, amin: usize) -> (String, usize) {
        match self.rng.below(12) {
            0..=4 => self.built_array(amin),
            5 => ("a".to_string(), amin),
            6 | 7 => {
                let (range, l) = match self.rng.below(3) {
                    0 => ("1..", amin - 1),
                    1 => ("..2", 2),
                    _ => ("0..1", 1),
                };
                if self.rng.chance(50) {
                    return (format!("a[{range}]"), l);
                }
                let writable = self.arrays(true).iter().any(|x| x.0 == "a");
                let w = self.fresh("w");
                self.line(format!("let {w} = a[{range}];"));
                self.top().arrays.push((w.clone(), l, writable));
                (w, l)
            }
            8 | 9 => {
                // An earlier helper's array result, moved (often written
                // first).
                let cands: Vec<usize> = (0..self.callable)
                    .filter(|&j| self.helpers[j].kind.takes_array())
                    .collect();
                if cands.is_empty() || self.calls_left == 0 {
                    return self.built_array(amin);
                }
                let j = *self.rng.pick(&cands);
                match self.array_call_of(j, false).arrays.first() {
                    Some(y) => y.clone(),
                    None => self.built_array(amin),
                }
            }
            _ => {
                // Any array in scope: a local, a view, a call's result, a
                // shadow.
                let arrays: Vec<(String, usize)> = self
                    .arrays(false)
                    .into_iter()
                    .filter(|a| a.1 >= 1)
                    .collect();
                if arrays.is_empty() {
                    return self.built_array(amin);
                }
                self.rng.pick(&arrays).clone()
            }
        }
    }

    /// `let r = zeros(..);` filled in a loop from `a`, the parameters and
    /// sometimes a running sum; its name and minimum length.
    fn built_array(&mut self, amin: usize) -> (String, usize) {
        let r = self.fresh("r");
        let (n, l, same) = match self.rng.below(4) {
            0 | 1 => ("len(a)".to_string(), amin, true),
            2 => ("len(a) + 1".to_string(), amin + 1, false),
            _ => {
                let n = 2 + self.rng.below(2);
                (n.to_string(), n, false)
            }
        };
        self.line(format!("let {r} = zeros({n});"));
        let acc = if self.rng.chance(35) {
            let s = self.fresh("s");
            let e = self.fexpr(1);
            self.line(format!("var {s} = {e};"));
            Some(s)
        } else {
            None
        };
        let i = self.fresh("i");
        self.line(format!("for {i} in 0..len({r}) {{"));
        self.loops += 1;
        let mut indices = vec![(i.clone(), r.clone())];
        if same {
            indices.push((i.clone(), "a".to_string()));
        }
        self.scopes.push(Scope {
            ints: vec![i.clone()],
            indices,
            ..Scope::default()
        });
        self.indent += 1;
        self.loop_depth += 1;
        let ai = if same {
            format!("a[{i}]")
        } else {
            format!("a[{i} % len(a)]")
        };
        if let Some(s) = &acc {
            self.line(format!("{s} = {s} + {ai};"));
        }
        let e = self.fexpr(2);
        let mut elem = match self.rng.below(6) {
            0 | 1 => format!("{ai} * {e}"),
            2 => format!("{e} + {ai}"),
            3 => {
                let f = *self.rng.pick(&SMOOTH);
                format!("{f}({ai}) * {e}")
            }
            4 => format!("{ai} * {ai} - {e}"),
            _ => e,
        };
        if let Some(s) = &acc {
            elem = format!("({elem}) * {s}");
        }
        self.line(format!("{r}[{i}] = {elem};"));
        if self.rng.chance(25) {
            self.stmts(1, 1);
        }
        self.loop_depth -= 1;
        self.indent -= 1;
        self.scopes.pop();
        self.line("}");
        let scope = self.top();
        scope.arrays.push((r.clone(), l, true));
        if let Some(s) = acc {
            scope.f.push(s.clone());
            scope.vars.push(s);
        }
        (r, l)
    }

    /// The results of one `return` (or of the tail): their text and the
    /// minimum lengths of their arrays.
    fn result_parts(&mut self, shape: Shape, amin: usize) -> (String, Vec<usize>) {
        match shape {
            Shape::Arr => {
                let (v, l) = self.array_value(amin);
                (v, vec![l])
            }
            Shape::ScalarArr => {
                let (v, l) = self.array_value(amin);
                let e = if v.contains('[') {
                    self.fexpr(2)
                } else {
                    let idx = self.index(&v, l);
                    let f = self.fexpr(1);
                    format!("{idx} * {f}")
                };
                (format!("({e}, {v})"), vec![l])
            }
            Shape::ArrArr => match self.rng.below(5) {
                // The same array twice: one of them copied.
                0 => {
                    let (v, l) = self.array_value(amin);
                    (format!("({v}, {v})"), vec![l, l])
                }
                // Two views of `a`, both copied.
                1 => ("(a[..1], a[1..])".to_string(), vec![1, amin - 1]),
                _ => {
                    let (v, l) = self.array_value(amin);
                    let (w, m) = self.array_value(amin);
                    (format!("({v}, {w})"), vec![l, m])
                }
            },
        }
    }

    /// The body of a function with array results of `shape`: statements,
    /// sometimes an early `return` of other arrays, and the tail; the
    /// minimum lengths of its array results.
    fn array_result_body(&mut self, shape: Shape, stmts: usize, amin: usize) -> Vec<usize> {
        self.returns = 0;
        self.stmts(stmts, 0);
        let mut lens = vec![usize::MAX; 2];
        if self.rng.chance(25) {
            let (t, ls) = self.result_parts(shape, amin);
            let c = self.bexpr(1);
            self.line(format!("if {c} {{ return {t}; }}"));
            for (m, l) in lens.iter_mut().zip(ls) {
                *m = (*m).min(l);
            }
        }
        let (t, ls) = self.result_parts(shape, amin);
        self.line(t);
        let n = ls.len();
        for (m, l) in lens.iter_mut().zip(ls) {
            *m = (*m).min(l);
        }
        lens.truncate(n);
        lens
    }

    /// `Indices`: small non-negative integers computed from `n` (and the
    /// loop index), sometimes set by a condition on `x`, `y`; sometimes two
    /// arrays returned from two places. Its minimum length.
    fn indices_body(&mut self, stmts: usize) -> Vec<usize> {
        self.returns = 0;
        self.stmts(stmts.min(2), 0);
        let mut out = usize::MAX;
        let parts = 1 + usize::from(self.rng.chance(25));
        for k in 0..parts {
            let (p, i) = (self.fresh("p"), self.fresh("i"));
            let l = 1 + self.rng.below(3);
            self.line(format!("let {p} = zeros_i64({l});"));
            let e = self.int_expr(&i);
            let m = 2 + self.rng.below(3);
            self.line(format!(
                "for {i} in 0..len({p}) {{ {p}[{i}] = ({e} + n) % {m}; }}"
            ));
            self.loops += 1;
            if self.rng.chance(40) {
                let c = self.bexpr(1);
                let v = self.small_int();
                self.line(format!("if {c} {{ {p}[{}] = {v}; }}", l - 1));
            }
            out = out.min(l);
            if k + 1 < parts {
                let c = self.bexpr(1);
                self.line(format!("if {c} {{ return {p}; }}"));
            } else {
                self.line(p);
            }
        }
        vec![out]
    }

    /// `topa`'s call in `top`: its results bound and summed with weights,
    /// so that every element matters; the f64 names the tail should use.
    fn array_top_call(&mut self, shape: Shape, rlens: &[usize]) -> Vec<String> {
        let mut out = Vec::new();
        let r = self.fresh("y");
        let mut arrays = vec![(r.clone(), rlens[0])];
        let bind = match shape {
            Shape::Arr => r.clone(),
            Shape::ScalarArr => {
                let s = self.fresh("s");
                out.push(s.clone());
                format!("({s}, {r})")
            }
            Shape::ArrArr => {
                let q = self.fresh("y");
                arrays.push((q.clone(), rlens[1]));
                format!("({r}, {q})")
            }
        };
        self.line(format!("let {bind} = topa(x, y);"));
        let s = self.fresh("s");
        self.line(format!("var {s} = 0.0;"));
        for (k, (y, l)) in arrays.into_iter().enumerate() {
            let i = self.fresh("i");
            let w = if k == 0 { "f64(" } else { "0.5 * f64(" };
            self.line(format!(
                "for {i} in 0..len({y}) {{ {s} = {s} + {w}{i} + 1) * {y}[{i}]; }}"
            ));
            self.top().arrays.push((y, l, true));
        }
        let scope = self.top();
        scope.f.push(s.clone());
        scope.vars.push(s.clone());
        out.push(s);
        out
    }

    /// A tangent array `t` as long as `of` in a forward rule: linear in the
    /// tangents `tx`, `ty`, `ta`.
    fn tangent_array(&mut self, t: &str, of: &str) {
        let i = self.fresh("i");
        self.line(format!("let {t} = zeros(len({of}));"));
        self.line(format!("for {i} in 0..len({t}) {{"));
        self.scopes.push(Scope {
            ints: vec![i.clone()],
            ..Scope::default()
        });
        self.indent += 1;
        let (a, b, c) = (self.fexpr(2), self.fexpr(2), self.fexpr(2));
        self.line(format!(
            "{t}[{i}] = ({a}) * tx + ({b}) * ty + ({c}) * ta[{i} % len(ta)];"
        ));
        self.indent -= 1;
        self.scopes.pop();
        self.line("}");
    }

    /// The adjoints `gx`, `gy`, `da` in a reverse rule accumulated from the
    /// cotangent array `d`: linear in it.
    fn accumulate(&mut self, d: &str) {
        let i = self.fresh("i");
        self.line(format!("for {i} in 0..len({d}) {{"));
        self.scopes.push(Scope {
            ints: vec![i.clone()],
            ..Scope::default()
        });
        self.indent += 1;
        let (a, b, c) = (self.fexpr(2), self.fexpr(2), self.fexpr(2));
        self.line(format!("gx = gx + ({a}) * {d}[{i}];"));
        self.line(format!("gy = gy + ({b}) * {d}[{i}];"));
        self.line(format!(
            "da[{i} % len(da)] = da[{i} % len(da)] + ({c}) * {d}[{i}];"
        ));
        self.indent -= 1;
        self.scopes.pop();
        self.line("}");
    }
}

fn hint(rng: &mut Rng) -> &'static str {
    match rng.below(4) {
        0 => "#[inline(always)]\n",
        1 => "#[inline(never)]\n",
        _ => "",
    }
}

fn scope_xy() -> Scope {
    Scope {
        f: vec!["x".into(), "y".into()],
        ..Scope::default()
    }
}

fn item(out: &mut String, head: &str, lines: &[String]) {
    out.push_str(head);
    out.push('\n');
    for l in lines {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str("}\n\n");
}

/// Generates the program of `seed`.
///
/// The work proceeds in phases, all drawing from one generator, in this
/// order: whether the program has rules, and the kinds of its helpers
/// (`helper_kinds`); per helper, the function and its rules
/// (`ProgramGen::helper`, `ProgramGen::rules`); with array results, the
/// array top (`ProgramGen::array_top`); `top` (`ProgramGen::top`);
/// the derivative chain (`ProgramGen::chain`); the argument points
/// (`points`). The order of the draws is what a seed means: reordering
/// them changes the programs of existing seeds.
pub fn generate(seed: u64, config: &GenConfig) -> Program {
    let mut rng = Rng::splitmix(seed);
    let rule_free = rng.chance(30);
    let helpers = helper_kinds(&mut rng, config.array_results);
    let mut p = ProgramGen {
        rng: &mut rng,
        features: Features {
            helpers: helpers.len(),
            ..Features::default()
        },
        helpers,
        calls: Vec::new(),
        src: format!("// adze-fuzz-diff seed {seed}\n\n{CONST_ITEMS}"),
        late_rules: Vec::new(),
    };
    for k in 0..p.helpers.len() {
        p.helper(k);
        if !rule_free {
            p.rules(k);
        }
    }
    let array_top = p.array_top(config);
    p.top(array_top.as_ref());
    for r in std::mem::take(&mut p.late_rules) {
        p.src.push_str(&r);
    }
    let (modes, chain) = p.chain(config);
    let mut points = points(p.rng);
    for _ in 0..config.extra_points {
        points.push(random_point(p.rng));
    }
    let source = checkpoint_hints(p.src, seed, config.checkpoint_percent);
    let source = ordered_hints(source, seed, config.ordered_percent);
    Program {
        seed,
        source,
        modes,
        chain,
        rule_free,
        points,
        features: p.features,
        array_top: array_top.map(|t| t.top),
    }
}

/// `src` with `#[checkpoint]` before `percent` % of its loops (the
/// generator writes each loop's head at the start of a line).
fn checkpoint_hints(src: String, seed: u64, percent: usize) -> String {
    if percent == 0 {
        return src;
    }
    let mut rng = Rng::splitmix(seed ^ 0x636b_7074_6869_6e74);
    let mut out = String::with_capacity(src.len());
    for line in src.lines() {
        let body = line.trim_start();
        let is_for = body.starts_with("for ");
        if (is_for || body.starts_with("while ")) && rng.chance(percent) {
            let indent = &line[..line.len() - body.len()];
            if is_for && rng.chance(50) {
                let k = 1 + rng.below(4);
                out.push_str(&format!("{indent}#[checkpoint(snapshots = {k})]\n"));
            } else {
                out.push_str(&format!("{indent}#[checkpoint]\n"));
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `src` with `#[ordered]` before `percent` % of its loops, drawn by a
/// generator of its own (after [`checkpoint_hints`], whose lines stay).
fn ordered_hints(src: String, seed: u64, percent: usize) -> String {
    if percent == 0 {
        return src;
    }
    let mut rng = Rng::splitmix(seed ^ 0x6f72_6465_7265_6421);
    let mut out = String::with_capacity(src.len());
    for line in src.lines() {
        let body = line.trim_start();
        if (body.starts_with("for ") || body.starts_with("while ")) && rng.chance(percent) {
            let indent = &line[..line.len() - body.len()];
            out.push_str(&format!("{indent}#[ordered]\n"));
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The top-level function with array results as generated: what the
/// program reports, and what `top`'s call of it needs.
struct GenTop {
    top: ArrayTop,
    shape: Shape,
    rlens: Vec<usize>,
    /// The helpers it calls.
    called: Vec<usize>,
}

/// The helpers `f0 .. fK` (2 to 4) and their kinds: a `Diff` helper needs
/// an earlier helper to differentiate, so `f0` is never one.
fn helper_kinds(rng: &mut Rng, arrays: bool) -> Vec<Helper> {
    let n = if arrays {
        2 + rng.below(4)
    } else {
        2 + rng.below(3)
    };
    let mut helpers: Vec<Helper> = Vec::new();
    for k in 0..n {
        let kind = loop {
            let kind = if arrays {
                match rng.below(29) {
                    0..=4 => Kind::Scalar,
                    5..=7 => Kind::Tuple,
                    8..=10 => Kind::Writer,
                    11..=13 => Kind::Recursive,
                    14..=16 => Kind::Diff,
                    17..=21 => Kind::ArrMap,
                    22 | 23 => Kind::ArrTuple,
                    24 | 25 => Kind::ArrPair,
                    _ => Kind::Indices,
                }
            } else {
                match rng.below(20) {
                    0..=5 => Kind::Scalar,
                    6..=9 => Kind::Tuple,
                    10..=13 => Kind::Writer,
                    14..=16 => Kind::Recursive,
                    _ => Kind::Diff,
                }
            };
            if kind != Kind::Diff || k > 0 {
                break kind;
            }
        };
        helpers.push(Helper {
            name: format!("f{k}"),
            kind,
            rlens: Vec::new(),
        });
    }
    helpers
}

/// A program under construction: the source written so far and what the
/// later phases need to know about it.
struct ProgramGen<'r> {
    rng: &'r mut Rng,
    features: Features,
    helpers: Vec<Helper>,
    /// `calls[k]`: the helpers that `fk` and its rules call.
    calls: Vec<Vec<usize>>,
    src: String,
    /// Rules written after `top` rather than after their function.
    late_rules: Vec<String>,
}

impl ProgramGen<'_> {
    /// The function `fk`, from a few random statements and a body shaped
    /// by its kind.
    fn helper(&mut self, k: usize) {
        let h = &self.helpers[k];
        let mut scope = scope_xy();
        let head = helper_head(h, &mut scope);
        let mut g = FnGen::new(self.rng, &self.helpers, k, scope);
        g.returns = if h.kind == Kind::Tuple { 2 } else { 1 };
        let stmts = g.rng.below(4);
        let mut rlens = Vec::new();
        match h.kind {
            Kind::ArrMap | Kind::ArrTuple | Kind::ArrPair => {
                match h.kind {
                    Kind::ArrMap => self.features.arr_map += 1,
                    Kind::ArrTuple => self.features.arr_tuple += 1,
                    _ => self.features.arr_pair += 1,
                }
                rlens = g.array_result_body(Shape::of(h.kind).unwrap(), stmts, 2);
            }
            Kind::Indices => {
                self.features.indices += 1;
                rlens = g.indices_body(stmts);
            }
            Kind::Scalar => g.scalar_body(stmts),
            Kind::Diff => {
                self.features.with_autodiff += 1;
                g.diff_body(stmts);
            }
            Kind::Tuple => {
                self.features.tuple += 1;
                g.tuple_body(stmts);
            }
            Kind::Writer => {
                self.features.writer += 1;
                g.writer_body(stmts);
            }
            Kind::Recursive => {
                self.features.recursive += 1;
                g.recursive_body(&h.name, stmts);
            }
        }
        self.features.loops += g.loops;
        self.features.exits += g.exits;
        self.features.array_calls += g.array_calls;
        self.features.array_autodiff += g.array_autodiffs;
        self.calls.push(std::mem::take(&mut g.called));
        let lines = std::mem::take(&mut g.lines);
        self.src.push_str(hint(self.rng));
        item(&mut self.src, &head, &lines);
        self.helpers[k].rlens = rlens;
    }

    /// Rules of `fk`, each with some chance: arbitrary derivatives; a
    /// forward rule's primal result is the function's own value (a call of
    /// it, on the result line).
    fn rules(&mut self, k: usize) {
        let kind = self.helpers[k].kind;
        if kind == Kind::Indices {
            return;
        }
        if kind.array_result() {
            self.features.array_rules += 1;
        }
        if self.rng.chance(45) {
            self.features.forward_rules += 1;
            let r = forward_rule(self.rng, &self.helpers, k, &mut self.calls);
            self.place_rule(r);
        }
        if self.rng.chance(45) {
            self.features.reverse_rules += 1;
            let r = reverse_rule(self.rng, &self.helpers, k, &mut self.calls);
            self.place_rule(r);
        }
    }

    /// A rule right after its function or, sometimes, after `top`.
    fn place_rule(&mut self, r: String) {
        if self.rng.chance(25) {
            self.late_rules.push(r);
        } else {
            self.src.push_str(&r);
        }
    }

    /// `top`: calls helpers; every helper that `top` would not reach is
    /// called from it too.
    fn top(&mut self, array_top: Option<&GenTop>) {
        let n = self.helpers.len();
        let mut g = FnGen::new(self.rng, &self.helpers, n, scope_xy());
        g.calls_left = 4;
        g.returns = 1;
        g.autodiff_left = usize::from(g.rng.chance(20));
        let count = 2 + g.rng.below(4);
        g.stmts(count, 0);
        let mut reached = vec![false; n];
        reach(&mut reached, &self.calls, g.called.clone());
        let mut forced = Vec::new();
        if let Some(t) = array_top {
            reach(&mut reached, &self.calls, t.called.clone());
            forced.extend(g.array_top_call(t.shape, &t.rlens));
        }
        for j in (0..n).rev() {
            if reached[j] {
                continue;
            }
            reach(&mut reached, &self.calls, vec![j]);
            forced.extend(g.forced_call(j));
        }
        let t = g.tail_with(&forced);
        g.line(t);
        self.features.loops += g.loops;
        self.features.exits += g.exits;
        self.features.array_calls += g.array_calls;
        self.features.array_autodiff += g.array_autodiffs;
        let lines = std::mem::take(&mut g.lines);
        let head = hint(self.rng).to_string() + "fn top(x: f64, y: f64) -> f64 {";
        item(&mut self.src, &head, &lines);
    }

    /// `topa(x, y)`, a top-level function with array results (in
    /// `array_top_percent` % of the programs): a local array `a` set from
    /// `x` and `y`, statements calling the helpers, and results made as a
    /// helper's are (built in loops, `a` moved, views of `a` copied, call
    /// results, an array twice, several returns).
    fn array_top(&mut self, config: &GenConfig) -> Option<GenTop> {
        if !config.array_results || !self.rng.chance(config.array_top_percent) {
            return None;
        }
        let shape = match self.rng.below(4) {
            0 | 1 => Shape::Arr,
            2 => Shape::ScalarArr,
            _ => Shape::ArrArr,
        };
        let n = self.helpers.len();
        let mut g = FnGen::new(self.rng, &self.helpers, n, scope_xy());
        g.calls_left = 3;
        let len = 2 + g.rng.below(2);
        g.line(format!("let a = zeros({len});"));
        for k in 0..len {
            let e = g.fexpr(2);
            g.line(format!("a[{k}] = {e};"));
        }
        g.top().arrays.push(("a".into(), len, true));
        let stmts = 1 + g.rng.below(3);
        let rlens = g.array_result_body(shape, stmts, len);
        self.features.loops += g.loops;
        self.features.exits += g.exits;
        self.features.array_calls += g.array_calls;
        self.features.array_autodiff += g.array_autodiffs;
        let called = std::mem::take(&mut g.called);
        let lines = std::mem::take(&mut g.lines);
        let dir = *self.rng.pick(&[
            [1.0, 0.0],
            [0.0, 1.0],
            [1.0, 0.5],
            [-0.5, 1.0],
            [1.0, 1.0],
            [0.25, -1.0],
        ]);
        let head =
            hint(self.rng).to_string() + &format!("fn topa(x: f64, y: f64) -> {} {{", shape.text());
        item(&mut self.src, &head, &lines);
        Some(GenTop {
            top: ArrayTop {
                name: "topa".to_string(),
                results: shape.results(),
                dir,
            },
            shape,
            rlens,
            called,
        })
    }

    /// The derivative chain `d1 .. dN`: the order and the modes (fixed by
    /// `config` or random), then each `dk` as an item.
    fn chain(&mut self, config: &GenConfig) -> (Vec<Mode>, Vec<Deriv>) {
        let fixed: Vec<Mode> = config
            .modes
            .map(|m| m.iter().flatten().copied().collect())
            .unwrap_or_default();
        let order = if fixed.is_empty() {
            1 + self.rng.below(config.order_max.clamp(1, 3))
        } else {
            fixed.len()
        };
        let mut chain = Vec::new();
        let mut modes = Vec::new();
        for k in 1..=order {
            let name = format!("d{k}");
            let of = if k == 1 {
                "top".to_string()
            } else {
                format!("d{}", k - 1)
            };
            // Drawn whether or not the mode is fixed.
            let random = if self.rng.chance(50) {
                Mode::Forward
            } else {
                Mode::Reverse
            };
            let mode = fixed.get(k - 1).copied().unwrap_or(random);
            let (mut lines, dir) = match mode {
                Mode::Forward => forward_seed(self.rng, &of),
                Mode::Reverse => reverse_seed(self.rng, &of),
            };
            lines.push("    t".to_string());
            let head = hint(self.rng).to_string() + &format!("fn {name}(x: f64, y: f64) -> f64 {{");
            item(&mut self.src, &head, &lines);
            modes.push(mode);
            chain.push(Deriv {
                name,
                of,
                mode,
                dir,
            });
        }
        (modes, chain)
    }
}

/// The header line of helper `h`; adds its extra parameter (`a` or `n`) to
/// `scope`.
fn helper_head(h: &Helper, scope: &mut Scope) -> String {
    match h.kind {
        Kind::Scalar | Kind::Diff => format!("fn {}(x: f64, y: f64) -> f64 {{", h.name),
        Kind::Tuple => format!("fn {}(x: f64, y: f64) -> (f64, f64) {{", h.name),
        Kind::Writer => {
            scope.arrays.push(("a".into(), 2, true));
            format!("fn {}(x: f64, y: f64, a: mut [f64]) -> f64 {{", h.name)
        }
        Kind::Recursive => {
            scope.ints.push("n".into());
            format!("fn {}(x: f64, y: f64, n: i64) -> f64 {{", h.name)
        }
        Kind::ArrMap | Kind::ArrTuple | Kind::ArrPair => {
            scope.arrays.push(("a".into(), 2, false));
            let shape = Shape::of(h.kind).unwrap().text();
            format!("fn {}(x: f64, y: f64, a: [f64]) -> {shape} {{", h.name)
        }
        Kind::Indices => {
            scope.ints.push("n".into());
            format!("fn {}(x: f64, y: f64, n: i64) -> [i64] {{", h.name)
        }
    }
}

/// Marks as reached the helpers of `stack` and every helper they call,
/// directly or not.
fn reach(reached: &mut [bool], calls: &[Vec<usize>], mut stack: Vec<usize>) {
    while let Some(j) = stack.pop() {
        if !reached[j] {
            reached[j] = true;
            stack.extend(calls[j].iter().copied());
        }
    }
}

/// The body of a forward `dk` of `of` (its lines but the tail `t`) and its
/// direction `u`: along `x`, along `y`, or along a random `u`.
fn forward_seed(rng: &mut Rng, of: &str) -> (Vec<String>, [f64; 2]) {
    match rng.below(4) {
        0 => (
            vec![format!(
                "    let (p, t) = autodiff(forward, {of}, dual, dual(x, 1.0), const(y));"
            )],
            [1.0, 0.0],
        ),
        1 => (
            vec![format!(
                "    let (p, t) = autodiff(forward, {of}, dual, const(x), dual(y, 1.0));"
            )],
            [0.0, 1.0],
        ),
        _ => {
            let (ux, uy) = *rng.pick(&[(1.0, 0.5), (-0.5, 1.0), (1.0, 1.0), (0.25, -1.0)]);
            (
                vec![format!(
                    "    let (p, t) = autodiff(forward, {of}, dual, dual(x, {ux:?}), dual(y, {uy:?}));"
                )],
                [ux, uy],
            )
        }
    }
}

/// The body of a reverse `dk` of `of` (its lines but the tail `t`) and its
/// direction `u`: the gradient's `x` part, its `y` part, or `u = (1, uy)`.
fn reverse_seed(rng: &mut Rng, of: &str) -> (Vec<String>, [f64; 2]) {
    match rng.below(4) {
        0 => (
            vec![format!(
                "    let t = autodiff(reverse, {of}, active, active(x), const(y));"
            )],
            [1.0, 0.0],
        ),
        1 => (
            vec![format!(
                "    let t = autodiff(reverse, {of}, active, const(x), active(y));"
            )],
            [0.0, 1.0],
        ),
        _ => {
            let uy = *rng.pick(&[0.5, -1.0, 1.0]);
            (
                vec![
                    format!(
                        "    let (a, b) = autodiff(reverse, {of}, active, active(x), active(y));"
                    ),
                    format!("    let t = a + {uy:?} * b;"),
                ],
                [1.0, uy],
            )
        }
    }
}

/// Points at which every `dk` is run: two generic ones (finite-difference
/// checked when the program is rule-free) and two special ones at zeros,
/// ties and integers.
/// A point of the grid `k / 700`, `|k| <= 1000`.
fn random_point(rng: &mut Rng) -> Point {
    let x = (rng.below(2001) as f64 - 1000.0) / 700.0;
    let y = (rng.below(2001) as f64 - 1000.0) / 700.0;
    Point {
        x,
        y,
        special: false,
    }
}

fn points(rng: &mut Rng) -> Vec<Point> {
    const SPECIAL: [(f64, f64); 9] = [
        (0.0, 0.0),
        (1.0, 1.0),
        (0.0, 1.5),
        (2.0, 0.0),
        (-1.0, -1.0),
        (0.5, 0.5),
        (-0.0, 0.5),
        (1.0, 0.0),
        (0.0, -2.0),
    ];
    let mut points = Vec::new();
    for _ in 0..2 {
        points.push(random_point(rng));
    }
    for _ in 0..2 {
        let (x, y) = *rng.pick(&SPECIAL);
        points.push(Point {
            x,
            y,
            special: true,
        });
    }
    points
}

fn forward_rule(rng: &mut Rng, helpers: &[Helper], k: usize, calls: &mut [Vec<usize>]) -> String {
    let h = &helpers[k];
    let f = &h.name;
    // The rule's code sees the primal arguments only; the tangents enter
    // its result linearly (`a · tx + b · ty`): a forward rule is a linear
    // map of the tangents, as a derivative is. adze may call a rule with
    // zero tangents or not call it at all, depending on what its analyses
    // prove (docs/rules.md), so a rule that is not linear in its tangents
    // can legitimately give different derivatives when inlined or not.
    let mut scope = Scope {
        f: vec!["x".into(), "y".into()],
        ..Scope::default()
    };
    let head = match h.kind {
        Kind::Scalar | Kind::Diff => {
            format!("rule forward {f}(x: f64, tx: f64, y: f64, ty: f64) -> (f64, f64) {{")
        }
        Kind::Tuple => {
            format!("rule forward {f}(x: f64, tx: f64, y: f64, ty: f64) -> (f64, f64, f64, f64) {{")
        }
        Kind::Writer => {
            format!(
                "rule forward {f}(x: f64, tx: f64, y: f64, ty: f64, a: mut [f64], ta: mut [f64]) -> (f64, f64) {{"
            )
        }
        Kind::Recursive => {
            scope.ints.push("n".into());
            format!("rule forward {f}(x: f64, tx: f64, y: f64, ty: f64, n: i64) -> (f64, f64) {{")
        }
        Kind::ArrMap | Kind::ArrTuple | Kind::ArrPair => {
            scope.arrays.push(("a".into(), 2, false));
            let rs = match h.kind {
                Kind::ArrMap => "[f64], [f64]",
                Kind::ArrTuple => "f64, [f64], f64, [f64]",
                _ => "[f64], [f64], [f64], [f64]",
            };
            format!(
                "rule forward {f}(x: f64, tx: f64, y: f64, ty: f64, a: [f64], ta: [f64]) -> ({rs}) {{"
            )
        }
        Kind::Indices => unreachable!("no rules on helpers with i64 results"),
    };
    let mut g = FnGen::new(rng, helpers, k, scope);
    g.calls_left = 1;
    let stmts = g.rng.below(3);
    let linear = |g: &mut FnGen| {
        let (a, b) = (g.fexpr(2), g.fexpr(2));
        format!("({a}) * tx + ({b}) * ty")
    };
    match h.kind {
        Kind::Scalar | Kind::Diff => {
            g.stmts(stmts, 1);
            let t = linear(&mut g);
            g.line(format!("({f}(x, y), {t})"));
        }
        Kind::Recursive => {
            g.stmts(stmts, 1);
            let t = linear(&mut g);
            g.line(format!("({f}(x, y, n), {t})"));
        }
        Kind::Tuple => {
            g.line(format!("let (pr, qr) = {f}(x, y);"));
            g.stmts(stmts, 1);
            let t = linear(&mut g);
            let u = linear(&mut g);
            g.line(format!("(pr, qr, {t}, {u})"));
        }
        Kind::Writer => {
            g.line(format!("let r = {f}(x, y, a);"));
            g.top().f.push("r".into());
            g.stmts(stmts, 1);
            let t = linear(&mut g);
            g.line(format!("(r, {t})"));
        }
        // Array results: tangent arrays as long as the results, linear in
        // `tx`, `ty` and `ta`.
        Kind::ArrMap => {
            g.line(format!("let r = {f}(x, y, a);"));
            g.top().arrays.push(("r".into(), h.rlens[0], false));
            g.stmts(stmts, 1);
            g.tangent_array("t", "r");
            g.line("(r, t)");
        }
        Kind::ArrTuple => {
            g.line(format!("let (p, r) = {f}(x, y, a);"));
            g.top().f.push("p".into());
            g.top().arrays.push(("r".into(), h.rlens[0], false));
            g.stmts(stmts, 1);
            let t = linear(&mut g);
            let c = g.fexpr(2);
            g.tangent_array("t", "r");
            g.line(format!("(p, r, {t} + ({c}) * ta[0], t)"));
        }
        Kind::ArrPair => {
            g.line(format!("let (r, q) = {f}(x, y, a);"));
            g.top().arrays.push(("r".into(), h.rlens[0], false));
            g.top().arrays.push(("q".into(), h.rlens[1], false));
            g.stmts(stmts, 1);
            g.tangent_array("t", "r");
            g.tangent_array("u", "q");
            g.line("(r, q, t, u)");
        }
        Kind::Indices => unreachable!(),
    }
    calls[k].extend(g.called.iter().copied());
    let lines = std::mem::take(&mut g.lines);
    let mut out = hint(rng).to_string();
    item(&mut out, &head, &lines);
    out
}

fn reverse_rule(rng: &mut Rng, helpers: &[Helper], k: usize, calls: &mut [Vec<usize>]) -> String {
    let h = &helpers[k];
    let f = &h.name;
    let mut scope = Scope {
        f: vec!["x".into(), "y".into()],
        ..Scope::default()
    };
    let head = match h.kind {
        Kind::Scalar | Kind::Diff => {
            format!("rule reverse {f}(x: f64, y: f64, dret: f64) -> (f64, f64) {{")
        }
        Kind::Tuple => {
            format!("rule reverse {f}(x: f64, y: f64, d1: f64, d2: f64) -> (f64, f64) {{")
        }
        Kind::Writer => {
            scope.arrays.push(("a".into(), 2, false));
            format!(
                "rule reverse {f}(x: f64, y: f64, a: mut [f64], da: mut [f64], dret: f64) -> (f64, f64) {{"
            )
        }
        Kind::Recursive => {
            scope.ints.push("n".into());
            format!("rule reverse {f}(x: f64, y: f64, n: i64, dret: f64) -> (f64, f64) {{")
        }
        Kind::ArrMap | Kind::ArrTuple | Kind::ArrPair => {
            scope.arrays.push(("a".into(), 2, false));
            let cot = match h.kind {
                Kind::ArrMap => "dret: [f64]",
                Kind::ArrTuple => "dret0: f64, dret1: [f64]",
                _ => "dret0: [f64], dret1: [f64]",
            };
            format!(
                "rule reverse {f}(x: f64, y: f64, a: [f64], da: mut [f64], {cot}) -> (f64, f64) {{"
            )
        }
        Kind::Indices => unreachable!("no rules on helpers with i64 results"),
    };
    let mut g = FnGen::new(rng, helpers, k, scope);
    g.calls_left = 1;
    let stmts = g.rng.below(3);
    g.stmts(stmts, 1);
    if let Some(shape) = Shape::of(h.kind) {
        // Array results: adjoints accumulated from the cotangent arrays,
        // linear in them (the rule's code sees the primal arguments only).
        let (e1, e2) = if shape == Shape::ScalarArr {
            let (a, b) = (g.fexpr(2), g.fexpr(2));
            (format!("({a}) * dret0"), format!("({b}) * dret0"))
        } else {
            ("0.0".to_string(), "0.0".to_string())
        };
        g.line(format!("var gx = {e1};"));
        g.line(format!("var gy = {e2};"));
        match shape {
            Shape::Arr => g.accumulate("dret"),
            Shape::ScalarArr => {
                let c = g.fexpr(2);
                g.line(format!("da[0] = da[0] + ({c}) * dret0;"));
                g.accumulate("dret1");
            }
            Shape::ArrArr => {
                g.accumulate("dret0");
                g.accumulate("dret1");
            }
        }
        g.line("(gx, gy)");
        calls[k].extend(g.called.iter().copied());
        let lines = std::mem::take(&mut g.lines);
        let mut out = hint(rng).to_string();
        item(&mut out, &head, &lines);
        return out;
    }
    let a = g.fexpr(2);
    let b = g.fexpr(2);
    let (c1, c2) = if h.kind == Kind::Tuple {
        ("d1", "d2")
    } else {
        ("dret", "dret")
    };
    // Linear in the cotangents, as an adjoint is: the rule's code sees the
    // primal arguments only (an unused call result has a zero cotangent,
    // and whether the rule is then applied at all may legitimately depend
    // on how the code was cut into functions; see docs/rules.md).
    g.line(format!("(({a}) * {c1}, ({b}) * {c2})"));
    calls[k].extend(g.called.iter().copied());
    let lines = std::mem::take(&mut g.lines);
    let mut out = hint(rng).to_string();
    item(&mut out, &head, &lines);
    out
}
