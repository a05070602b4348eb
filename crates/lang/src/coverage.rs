//! Which modes the program differentiates each function in, and the
//! warnings for functions whose custom rules do not cover one of them.
//!
//! A function `F` with a rule of one mode only, met by an AD pass of the
//! other mode, is differentiated through its body there: the rule is
//! ignored in that mode (a reverse derivative is not derived from a forward
//! rule, nor the other way round). [`ModeCoverage`] finds every such
//! function from the `autodiff` requests of the file (and requests made
//! outside it, `--derive MODE`) and words a warning for each; see
//! `docs/rules.md`, "Rules and modes".
//!
//! The analysis follows what the AD passes do (`docs/ad.md`,
//! `docs/rules.md`). A pass of mode `m` *meets* a function when it reaches
//! a call to it or is asked for its derivative; the code it produces is then
//! itself differentiated by the passes outside it (an `autodiff` inside a
//! function that is differentiated). A state is a function and the stack of
//! passes that will differentiate the code it appears in, the innermost on
//! top:
//!
//! - `F` has a rule of the top mode `m`: the derivative calls the rule, and
//!   (reverse mode) `F` itself for the primal value (rule identity); the
//!   outer passes meet those: `(rule, rest)`, and `(F, rest)` in reverse.
//! - otherwise `F`'s body is differentiated by `m` (if `F` has a rule, of
//!   the other mode, this is what the warning is about): every function it
//!   calls is met by `m` with the same outer passes, `(g, stack)`, and its
//!   primal call by the outer passes, `(g, rest)`; an `autodiff(j, V, ..)`
//!   in the body is code of a `j` derivative that `m` then differentiates:
//!   `(V, stack + j)`.
//!
//! Every `autodiff(j, V, ..)` of the file starts a state `(V, [j])`. A
//! state keeps the [`MAX_STACK`] innermost passes.
//! States are explored breadth-first from the requests in source order, so
//! a warning names the first request that reaches its function.

use crate::ast::{self, ExprKind, FuncKind, StmtKind};
use crate::diagnostic::{Diagnostic, Diagnostics, Span};
use adze_ir::{Mode, Param, Type};
use std::collections::{HashMap, HashSet, VecDeque};

/// The innermost passes a state keeps: when an `autodiff` nests deeper,
/// the outermost pass is forgotten (its warnings may be missed; none is
/// made up). Recursion through `autodiff`s in both modes would otherwise
/// make exponentially many stacks.
const MAX_STACK: usize = 8;

/// At most this many states are explored (a bound on the work for
/// adversarial programs; with [`MAX_STACK`] no realistic one comes near).
const MAX_STATES: usize = 1 << 18;

/// The call graph of a checked file, its `autodiff` requests and rules,
/// with the source locations the warnings point at.
#[derive(Clone, Debug)]
pub struct ModeCoverage {
    file_name: String,
    source: String,
    nodes: Vec<Node>,
    /// `fn` name → node.
    fns: HashMap<String, usize>,
}

#[derive(Clone, Debug)]
struct Node {
    /// The `fn` name, or the name of the `fn` a rule belongs to.
    name: String,
    /// Functions called (each once, in source order).
    calls: Vec<usize>,
    /// `autodiff(mode, target, ..)` in the body, with its span.
    autodiffs: Vec<(Mode, usize, Span)>,
    /// The rules of a `fn`, by mode ([forward, reverse]): the rule's node
    /// and its signature's span.
    rules: [Option<(usize, Span)>; 2],
    /// The parameters and results (for the declaration of a missing rule).
    params: Vec<Param>,
    results: Vec<Type>,
}

/// The pass that meets a function, and what asked for it.
#[derive(Clone, Copy, Debug)]
struct Pass {
    mode: Mode,
    /// The `autodiff` (its span and target), or `None` for a request from
    /// outside the file.
    origin: Option<(Span, usize)>,
}

fn slot(mode: Mode) -> usize {
    match mode {
        Mode::Forward => 0,
        Mode::Reverse => 1,
    }
}

fn other(mode: Mode) -> Mode {
    match mode {
        Mode::Forward => Mode::Reverse,
        Mode::Reverse => Mode::Forward,
    }
}

/// The mode named by the first argument of `autodiff` (`forward`,
/// `forward(N)`, `reverse`).
fn mode_of(e: &ast::Expr) -> Option<Mode> {
    let word = match &e.kind {
        ExprKind::Name(id) | ExprKind::Call(id, _) => id.name.as_str(),
        _ => return None,
    };
    match word {
        "forward" => Some(Mode::Forward),
        "reverse" => Some(Mode::Reverse),
        _ => None,
    }
}

impl ModeCoverage {
    /// Builds the graph of a file that passed the checker. `params` are the
    /// checked parameters of each item (for the expected rule signatures).
    pub(crate) fn new(
        file_name: &str,
        source: &str,
        file: &ast::File,
        params: &[(Vec<Param>, Vec<Type>)],
    ) -> ModeCoverage {
        let mut fns = HashMap::new();
        let mut nodes = Vec::new();
        let mut item_node = Vec::with_capacity(file.items.len());
        for (i, item) in file.items.iter().enumerate() {
            if item.kind == FuncKind::Fn {
                fns.entry(item.name.name.clone()).or_insert(nodes.len());
            }
            item_node.push(nodes.len());
            let (ps, rs) = params.get(i).cloned().unwrap_or_default();
            nodes.push(Node {
                name: item.name.name.clone(),
                calls: Vec::new(),
                autodiffs: Vec::new(),
                rules: [None, None],
                params: ps,
                results: rs,
            });
        }
        for (i, item) in file.items.iter().enumerate() {
            let n = item_node[i];
            if let FuncKind::Rule(mode) = item.kind {
                if let Some(&owner) = fns.get(&item.name.name) {
                    nodes[owner].rules[slot(mode)].get_or_insert((n, item.sig_span));
                }
            }
            let mut walker = Walker {
                fns: &fns,
                calls: Vec::new(),
                seen: HashSet::new(),
                autodiffs: Vec::new(),
            };
            walker.block(&item.body);
            nodes[n].calls = walker.calls;
            nodes[n].autodiffs = walker.autodiffs;
        }
        ModeCoverage {
            file_name: file_name.to_string(),
            source: source.to_string(),
            nodes,
            fns,
        }
    }

    /// The coverage of a file without functions.
    pub fn empty(file_name: &str, source: &str) -> ModeCoverage {
        ModeCoverage {
            file_name: file_name.to_string(),
            source: source.to_string(),
            nodes: Vec::new(),
            fns: HashMap::new(),
        }
    }

    /// Warnings for the `autodiff` requests of the file, or `None`.
    pub fn warnings(&self) -> Option<Diagnostics> {
        self.warnings_for(true, &[])
    }

    /// Warnings for `requests` made outside the file (`--derive MODE` of a
    /// function) and, with `program`, for the file's own requests. Unknown
    /// names are ignored.
    pub fn warnings_for(&self, program: bool, requests: &[(&str, Mode)]) -> Option<Diagnostics> {
        let mut queue: VecDeque<(usize, Vec<Pass>)> = VecDeque::new();
        if program {
            for node in &self.nodes {
                for &(mode, target, span) in &node.autodiffs {
                    let origin = Some((span, target));
                    queue.push_back((target, vec![Pass { mode, origin }]));
                }
            }
        }
        for &(name, mode) in requests {
            if let Some(&n) = self.fns.get(name) {
                queue.push_back((n, vec![Pass { mode, origin: None }]));
            }
        }
        let mut seen: HashSet<(usize, Vec<Mode>)> = HashSet::new();
        // (function, mode) → the pass that met it without a rule.
        let mut uncovered: Vec<(usize, Pass)> = Vec::new();
        let mut warned: HashSet<(usize, usize)> = HashSet::new();
        while let Some((n, stack)) = queue.pop_front() {
            if seen.len() >= MAX_STATES {
                break;
            }
            if !seen.insert((n, stack.iter().map(|p| p.mode).collect())) {
                continue;
            }
            let Some((&top, rest)) = stack.split_last() else {
                continue;
            };
            let node = &self.nodes[n];
            if let Some((rule, _)) = node.rules[slot(top.mode)] {
                if !rest.is_empty() {
                    queue.push_back((rule, rest.to_vec()));
                    if top.mode == Mode::Reverse {
                        queue.push_back((n, rest.to_vec()));
                    }
                }
                continue;
            }
            if node.rules.iter().any(Option::is_some) && warned.insert((n, slot(top.mode))) {
                uncovered.push((n, top));
            }
            for &g in &node.calls {
                queue.push_back((g, stack.clone()));
                if !rest.is_empty() {
                    queue.push_back((g, rest.to_vec()));
                }
            }
            for &(mode, target, span) in &node.autodiffs {
                let keep = stack.len().min(MAX_STACK - 1);
                let mut inner = stack[stack.len() - keep..].to_vec();
                inner.push(Pass {
                    mode,
                    origin: Some((span, target)),
                });
                queue.push_back((target, inner));
            }
        }
        let mut warnings: Vec<(Span, Diagnostic)> = uncovered
            .into_iter()
            .filter_map(|(n, pass)| self.warning(n, pass))
            .collect();
        if warnings.is_empty() {
            return None;
        }
        warnings.sort_by_key(|(span, _)| span.start);
        let warnings = warnings.into_iter().map(|(_, d)| d).collect();
        Some(Diagnostics::new(&self.file_name, &self.source, warnings))
    }

    fn warning(&self, n: usize, pass: Pass) -> Option<(Span, Diagnostic)> {
        let node = &self.nodes[n];
        let mode = pass.mode;
        let has = other(mode);
        let (_, rule_span) = node.rules[slot(has)]?;
        let name = &node.name;
        let mut d = Diagnostic::warning(
            rule_span,
            format!("`{name}` has no {mode} rule, but {mode} mode differentiates it: its {has} rule is ignored there"),
            format!(
                "{mode} mode uses the derivative of the body of `{name}` (a {mode} derivative is not derived from a {has} rule); to cover {mode} mode write `{}`",
                crate::check::rule_declaration(mode, name, &node.params, &node.results)
            ),
        )
        .label(format!("the only rule of `{name}`"));
        d = match pass.origin {
            Some((span, target)) if target == n => d.secondary(
                span,
                format!("{mode}-mode derivative of `{name}` requested here"),
            ),
            Some((span, target)) => d.secondary(
                span,
                format!(
                    "this {mode}-mode derivative of `{}` reaches `{name}`",
                    self.nodes[target].name
                ),
            ),
            None => {
                d.message = format!(
                    "`{name}` has no {mode} rule, but `--derive {mode}` differentiates it in {mode} mode: its {has} rule is ignored there"
                );
                d
            }
        };
        Some((rule_span, d))
    }
}

/// Collects the calls and `autodiff`s of one body.
struct Walker<'a> {
    fns: &'a HashMap<String, usize>,
    calls: Vec<usize>,
    seen: HashSet<usize>,
    autodiffs: Vec<(Mode, usize, Span)>,
}

impl Walker<'_> {
    fn block(&mut self, b: &ast::Block) {
        for s in &b.stmts {
            match &s.kind {
                StmtKind::Let(_, e)
                | StmtKind::LetTuple(_, e)
                | StmtKind::VarTuple(_, e)
                | StmtKind::AssignTuple(_, e)
                | StmtKind::Var(_, e)
                | StmtKind::Assign(_, e)
                | StmtKind::Expr(e) => self.expr(e),
                StmtKind::Store(_, i, v) => {
                    self.expr(i);
                    self.expr(v);
                }
                StmtKind::Return(e) => {
                    if let Some(e) = e {
                        self.expr(e);
                    }
                }
                StmtKind::For(_, lo, hi, body, _) => {
                    self.expr(lo);
                    self.expr(hi);
                    self.block(body);
                }
                StmtKind::While(c, body, _) => {
                    self.expr(c);
                    self.block(body);
                }
                StmtKind::Break | StmtKind::Continue => {}
            }
        }
        if let Some(t) = &b.tail {
            self.expr(t);
        }
    }

    fn expr(&mut self, e: &ast::Expr) {
        match &e.kind {
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) | ExprKind::Name(_) => {}
            ExprKind::Unary(_, a) => self.expr(a),
            ExprKind::Binary(_, a, b) => {
                self.expr(a);
                self.expr(b);
            }
            ExprKind::Index(_, i) => self.expr(i),
            ExprKind::Slice(_, lo, hi) => {
                for x in lo.iter().chain(hi) {
                    self.expr(x);
                }
            }
            ExprKind::If(c, t, els) => {
                self.expr(c);
                self.block(t);
                if let Some(b) = els {
                    self.block(b);
                }
            }
            ExprKind::Tuple(xs) => xs.iter().for_each(|x| self.expr(x)),
            ExprKind::Call(f, args) if f.name == "autodiff" => {
                let target = args
                    .get(1)
                    .and_then(|a| match &a.kind {
                        ExprKind::Name(id) => self.fns.get(&id.name).copied(),
                        _ => None,
                    })
                    .zip(args.first().and_then(mode_of));
                if let Some((target, mode)) = target {
                    self.autodiffs.push((mode, target, e.span));
                }
                // The activity wrappers (`dual(x, tx)`, `const(e)`, ..)
                // hold expressions that may call functions.
                for a in args.iter().skip(3) {
                    if let ExprKind::Call(_, inner) = &a.kind {
                        inner.iter().for_each(|x| self.expr(x));
                    }
                }
            }
            ExprKind::Call(f, args) => {
                if let Some(&g) = self.fns.get(&f.name) {
                    if self.seen.insert(g) {
                        self.calls.push(g);
                    }
                }
                args.iter().for_each(|x| self.expr(x));
            }
        }
    }
}
