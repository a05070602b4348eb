//! Lowering: the checked program ([`typed`](crate::typed)) to an IR [`Module`] through
//! [`FuncBuilder`].
//!
//! - Functions are declared first, in program order, so that calls,
//!   `autodiff` requests and rules can name any of them; then each body is
//!   built and replaces its declaration.
//! - `var`s become SSA values: each local holds its current value while the
//!   body is walked; control-flow joins receive the `var`s assigned on the
//!   way as block parameters (see `docs/language.md`, "Lowering", for the
//!   exact shapes of `if`, `&&`/`||`, `while` and counted `for` loops).
//! - Blocks are placed in the layout when code starts in them, so a join no
//!   branch reaches (both arms `return`) is never placed: no unreachable
//!   blocks are left behind.

use crate::diagnostic::Span;
use crate::typed::*;
use adze_ir::{
    AutodiffSpec, Block as IrBlock, CmpCond, FuncBuilder, FuncId, Function, Module, Opcode,
    Signature, SourceLoc, Type, Value,
};
use std::collections::{BTreeSet, HashMap};

/// Lowers a checked program of the file `file_name` (whose text is
/// `source`). Function names are unique (the checker guarantees it), so
/// declaring them cannot fail.
///
/// Every instruction gets a source location (`adze_ir::srcloc`): the line
/// and column, as the diagnostics count them, where the innermost
/// expression or statement it is lowered from starts — `a[i]` for its
/// `load`, `a[i] = e;` for its `store`, `x / y` for an `idiv`, `f(..)` for
/// a call, `zeros(n)` for its `zeros`; the branches of an `if`, a loop or a
/// `&&` take the construct's, and the final `return` of a body its value's
/// (or the signature's). The module's source file is `file_name`.
pub fn lower(prog: &Program, file_name: &str, source: &str) -> Module {
    let lines = LineIndex::new(source);
    let mut module = Module::new();
    module.source_file = Some(file_name.to_string());
    let mut ids = Vec::new();
    for f in &prog.funcs {
        let sig = Signature {
            params: f.params.clone(),
            results: f.results.clone(),
        };
        let id = module
            .declare(&f.name, sig)
            .expect("the checker rejects duplicate function names");
        ids.push(id);
    }
    for (f, &id) in prog.funcs.iter().zip(&ids) {
        let func = lower_func(&module, &ids, &lines, f);
        module.replace(id, func);
    }
    module
}

/// Byte offsets to 1-based lines and columns in characters
/// ([`crate::diagnostic::line_col`], without rescanning the text for each).
pub struct LineIndex<'s> {
    source: &'s str,
    /// The byte offset where each line starts.
    starts: Vec<usize>,
}

impl<'s> LineIndex<'s> {
    pub fn new(source: &'s str) -> LineIndex<'s> {
        let starts = std::iter::once(0)
            .chain(source.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { source, starts }
    }

    /// The line and column of byte `offset` (clamped to the text, and back
    /// to the start of a character).
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.source.len());
        while !self.source.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset);
        let start = self.starts[line - 1];
        (line, self.source[start..offset].chars().count() + 1)
    }

    /// The location of the start of `span`.
    pub fn loc(&self, span: Span) -> SourceLoc {
        let (line, col) = self.line_col(span.start);
        SourceLoc::new(
            u32::try_from(line).unwrap_or(0),
            u32::try_from(col).unwrap_or(0),
        )
    }
}

fn lower_func(module: &Module, ids: &[FuncId], lines: &LineIndex, f: &Func) -> Function {
    let sig = Signature {
        params: f.params.clone(),
        results: f.results.clone(),
    };
    let mut func = Function::new(f.name.clone(), sig);
    func.meta.inline = f.inline;
    func.meta.rules.forward = f.forward_rule.map(|i| ids[i]);
    func.meta.rules.reverse = f.reverse_rule.map(|i| ids[i]);
    let mut b = FuncBuilder::new(&mut func);
    b.set_srcloc(lines.loc(f.span));
    let entry = b.create_entry_block();
    b.switch_to_block(entry);
    let mut env = vec![None; f.locals.len()];
    for (slot, &v) in env.iter_mut().zip(b.func.params()) {
        *slot = Some(v);
    }
    let mut cx = Lower {
        b,
        module,
        ids,
        func: f,
        env,
        live: true,
        lines,
        assigned: Assigned::default(),
        loops: Vec::new(),
        ordered: Vec::new(),
    };
    let values = cx.block(&f.body);
    if cx.live {
        let span = f.body.tail.as_ref().map_or(f.span, |t| t.span);
        cx.at(span, |cx| cx.ret(values));
    }
    let ordered = cx.ordered;
    crate::sums::split_sums(&mut func, &ordered);
    func
}

struct Lower<'a, 'f> {
    b: FuncBuilder<'f>,
    module: &'a Module,
    ids: &'a [FuncId],
    func: &'a Func,
    /// The current SSA value of each local (`None` before its declaration).
    env: Vec<Option<Value>>,
    /// Is there a current block to append to? False after a terminator.
    live: bool,
    lines: &'a LineIndex<'a>,
    assigned: Assigned,
    /// The loops around what is being lowered, innermost last.
    loops: Vec<LoopTargets>,
    /// The headers of `#[ordered]` loops, whose sums [`crate::sums`]
    /// leaves in the written order.
    ordered: Vec<IrBlock>,
}

/// Where `break` and `continue` of a loop go.
struct LoopTargets {
    exit: IrBlock,
    /// The vars the loop assigns: parameters of its exit and latch.
    vars: Vec<LocalId>,
    /// The latch `continue` jumps to, made on the first one.
    latch: Option<IrBlock>,
}

impl Lower<'_, '_> {
    /// Runs `f` with the instructions it builds located at the start of
    /// `span` (or, for a span the checker made up, where they would be
    /// anyway), then restores the location.
    fn at<T>(&mut self, span: Span, f: impl FnOnce(&mut Self) -> T) -> T {
        let saved = self.b.srcloc();
        if span != Span::default() {
            self.b.set_srcloc(self.lines.loc(span));
        }
        let r = f(self);
        self.b.set_srcloc(saved);
        r
    }

    // ---- blocks of the IR ----

    /// A block not yet in the layout.
    fn new_block(&mut self) -> IrBlock {
        self.b.func.dfg.make_block()
    }

    /// Places `block` at the end of the layout and continues there.
    fn start(&mut self, block: IrBlock) {
        self.b.func.layout.append_block(block);
        self.b.switch_to_block(block);
        self.live = true;
    }

    fn jump(&mut self, block: IrBlock, args: &[Value]) {
        self.b.jump(block, args);
        self.live = false;
    }

    fn local(&self, l: LocalId) -> Value {
        self.env[l].expect("the checker resolves every use to a declared local")
    }

    /// The `var`s assigned in `blocks`/`exprs` that are already declared,
    /// in declaration order: they become the parameters of a join.
    fn join_vars(&mut self, blocks: &[&Block], exprs: &[&Expr]) -> Vec<LocalId> {
        let mut set = BTreeSet::new();
        for b in blocks {
            set.extend(self.assigned.block(b).iter().copied());
        }
        for e in exprs {
            self.assigned.expr(e, &mut set);
        }
        set.into_iter().filter(|&l| self.env[l].is_some()).collect()
    }

    fn current(&self, vars: &[LocalId]) -> Vec<Value> {
        vars.iter().map(|&l| self.local(l)).collect()
    }

    /// Adds one parameter per var (then one per extra type) to `block`, and
    /// makes the vars refer to them. Returns the extra parameters.
    fn bind_params(&mut self, block: IrBlock, vars: &[LocalId], extra: &[Type]) -> Vec<Value> {
        for &l in vars {
            let ty = self.func.locals[l].ty.ir_scalar().unwrap_or(Type::F64);
            self.env[l] = Some(self.b.append_block_param(block, ty));
        }
        extra
            .iter()
            .map(|&ty| self.b.append_block_param(block, ty))
            .collect()
    }

    // ---- statements ----

    /// Lowers a block; returns its values (empty if it has none or diverges).
    fn block(&mut self, b: &Block) -> Vec<Value> {
        for s in &b.stmts {
            self.stmt(s);
            if !self.live {
                return Vec::new();
            }
        }
        match &b.tail {
            Some(e) => self.expr(e),
            None => Vec::new(),
        }
    }

    fn stmt(&mut self, s: &Stmt) {
        match s {
            Stmt::Let(ls, e) | Stmt::AssignTuple(ls, e) => {
                let vs = self.expr(e);
                for (&l, v) in ls.iter().zip(vs) {
                    self.env[l] = Some(v);
                }
            }
            Stmt::Zeros(l, n, span) => self.at(*span, |cx| {
                let n = cx.scalar(n);
                let name = cx.func.locals[*l].name.clone();
                let a = match cx.func.locals[*l].ty {
                    Ty::Array {
                        elem: Elem::I64, ..
                    } => cx.b.izeros(n, name),
                    _ => cx.b.zeros(n, name),
                };
                cx.env[*l] = Some(a);
            }),
            Stmt::Assign(l, e) => {
                let v = self.scalar(e);
                self.env[*l] = Some(v);
            }
            Stmt::Store(a, i, x, span) => self.at(*span, |cx| {
                let a = cx.local(*a);
                let i = cx.scalar(i);
                let x = cx.scalar(x);
                cx.b.store(a, i, x);
            }),
            Stmt::Expr(e) => {
                self.expr(e);
            }
            Stmt::Return(e, span) => self.at(*span, |cx| {
                let vs = e.as_ref().map(|e| cx.expr(e)).unwrap_or_default();
                if cx.live {
                    cx.ret(vs);
                    cx.live = false;
                }
            }),
            Stmt::For(i, lo, hi, body, span, attrs) => {
                self.at(*span, |cx| cx.for_loop(*i, lo, hi, body, *attrs))
            }
            Stmt::While(cond, body, span, attrs) => {
                self.at(*span, |cx| cx.while_loop(cond, body, *attrs))
            }
            Stmt::Break(span) => self.at(*span, |cx| {
                if let Some(t) = cx.loops.last() {
                    let (exit, vars) = (t.exit, t.vars.clone());
                    let args = cx.current(&vars);
                    cx.jump(exit, &args);
                }
            }),
            Stmt::Continue(span) => self.at(*span, |cx| {
                let latch = cx.latch();
                if let Some((latch, vars)) = latch {
                    let args = cx.current(&vars);
                    cx.jump(latch, &args);
                }
            }),
        }
    }

    /// The innermost loop's latch, made on its first `continue`, with its
    /// vars (the latch's parameters).
    fn latch(&mut self) -> Option<(IrBlock, Vec<LocalId>)> {
        let made = self.loops.last()?.latch;
        let latch = match made {
            Some(l) => l,
            None => {
                let l = self.new_block();
                self.loops.last_mut()?.latch = Some(l);
                l
            }
        };
        Some((latch, self.loops.last()?.vars.clone()))
    }

    /// Continues in the latch `continue`s made, if any (the end of the body
    /// jumps there too, with the vars' values): says whether there was one.
    fn enter_latch(&mut self, latch: Option<IrBlock>, vars: &[LocalId]) -> bool {
        let Some(latch) = latch else { return false };
        if self.live {
            let args = self.current(vars);
            self.jump(latch, &args);
        }
        self.start(latch);
        self.bind_params(latch, vars, &[]);
        true
    }

    /// Lowers a loop body with `exit` and `vars` as the targets of its
    /// `break`s and `continue`s; returns the latch its `continue`s made.
    fn loop_body(&mut self, body: &Block, exit: IrBlock, vars: &[LocalId]) -> Option<IrBlock> {
        self.loops.push(LoopTargets {
            exit,
            vars: vars.to_vec(),
            latch: None,
        });
        self.block(body);
        self.loops.pop().and_then(|t| t.latch)
    }

    /// ```text
    ///     lo, hi = ..; jump header(lo, vars..)
    /// header(i, vars..): c = icmp lt i, hi; brif c, body, exit(vars..)
    /// body: ..; jump latch
    /// latch: one = iconst 1; i1 = iadd i, one; jump header(i1, vars..)
    /// exit(vars..):
    /// ```
    ///
    /// `break` jumps to `exit(vars..)`. With a `continue`, the latch takes
    /// the vars as parameters (`latch(vars..)`), and every `continue` and
    /// the end of the body jump there: the header keeps two incoming
    /// edges, the entry and one back edge, so the loop stays counted for
    /// reverse mode (one trip count taped per run of the loop).
    /// `return vs`: the caller owns an array result, so an array this
    /// function does not own (a parameter, a view), or one returned a
    /// second time, goes back as a copy; an owned one moves.
    fn ret(&mut self, mut vs: Vec<Value>) {
        for i in 0..vs.len() {
            let v = vs[i];
            if self.b.func.dfg.value_type(v).is_array()
                && (!self.b.func.owns_array(v) || vs[..i].contains(&v))
            {
                let name = self.b.func.array_name(v);
                vs[i] = self.b.copy_of(v, name);
            }
        }
        self.b.ret(&vs);
    }

    fn for_loop(&mut self, index: LocalId, lo: &Expr, hi: &Expr, body: &Block, attrs: LoopAttrs) {
        let lo = self.scalar(lo);
        let hi = self.scalar(hi);
        let vars = self.join_vars(&[body], &[]);
        let header = self.new_block();
        let body_block = self.new_block();
        let exit = self.new_block();
        let mut args = vec![lo];
        args.extend(self.current(&vars));
        if let Some(attr) = attrs.checkpoint {
            self.checkpoint_hint(attr);
        }
        if attrs.ordered.is_some() {
            self.ordered.push(header);
        }
        self.jump(header, &args);

        self.start(header);
        let i = self.b.append_block_param(header, Type::I64);
        self.bind_params(header, &vars, &[]);
        self.env[index] = Some(i);
        let c = self.b.icmp(CmpCond::Lt, i, hi);
        let out = self.current(&vars);
        self.b.brif(c, body_block, &[], exit, &out);

        self.start(body_block);
        let continued = self.loop_body(body, exit, &vars);
        if !self.enter_latch(continued, &vars) && self.live {
            let latch = self.new_block();
            self.jump(latch, &[]);
            self.start(latch);
        }
        if self.live {
            let one = self.b.iconst(1);
            let next = self.b.iadd(i, one);
            let mut args = vec![next];
            args.extend(self.current(&vars));
            self.jump(header, &args);
        }
        self.start(exit);
        self.bind_params(exit, &vars, &[]);
    }

    /// `#[checkpoint]` before the jump into a loop's header: `checkpoint
    /// K` for `snapshots = K` (reverse mode places the `K` snapshots, by a
    /// binomial schedule where it can), `checkpoint 0` (the run's segment
    /// size) otherwise.
    fn checkpoint_hint(&mut self, attr: CheckpointAttr) {
        let k = self.b.iconst(attr.snapshots.unwrap_or(0));
        self.b.checkpoint(k);
    }

    /// ```text
    ///     jump header(vars..)
    /// header(vars..): c = ..; brif c, body, exit(vars..)
    /// body: ..; jump header(vars..)
    /// exit(vars..):
    /// ```
    ///
    /// `break` and `continue` as in [`Lower::for_loop`]: with a `continue`,
    /// the body and every `continue` jump to `latch(vars..)`, which jumps to
    /// the header, so the header keeps one back edge.
    fn while_loop(&mut self, cond: &Expr, body: &Block, attrs: LoopAttrs) {
        let vars = self.join_vars(&[body], &[cond]);
        let header = self.new_block();
        let body_block = self.new_block();
        let exit = self.new_block();
        let args = self.current(&vars);
        if let Some(attr) = attrs.checkpoint {
            self.checkpoint_hint(attr);
        }
        if attrs.ordered.is_some() {
            self.ordered.push(header);
        }
        self.jump(header, &args);

        self.start(header);
        self.bind_params(header, &vars, &[]);
        let c = self.scalar(cond);
        let out = self.current(&vars);
        self.b.brif(c, body_block, &[], exit, &out);

        self.start(body_block);
        let continued = self.loop_body(body, exit, &vars);
        self.enter_latch(continued, &vars);
        if self.live {
            let args = self.current(&vars);
            self.jump(header, &args);
        }
        self.start(exit);
        self.bind_params(exit, &vars, &[]);
    }

    // ---- expressions ----

    fn scalar(&mut self, e: &Expr) -> Value {
        let vs = self.expr(e);
        vs[0]
    }

    /// Lowers an expression to its values: one for a scalar or an array,
    /// several for a tuple, none for no value.
    fn expr(&mut self, e: &Expr) -> Vec<Value> {
        self.at(e.span, |cx| cx.expr_here(e))
    }

    fn expr_here(&mut self, e: &Expr) -> Vec<Value> {
        let v = match &e.kind {
            ExprKind::F64(x) => self.b.fconst(*x),
            ExprKind::I64(n) => self.b.iconst(*n),
            ExprKind::Bool(x) => self.b.bconst(*x),
            ExprKind::Local(l) => self.local(*l),
            // Negated literals are folded: `-2.0` is `fconst -2.0`.
            ExprKind::Unary(Opcode::Fneg, a) if matches!(a.kind, ExprKind::F64(_)) => {
                let ExprKind::F64(x) = a.kind else {
                    unreachable!()
                };
                self.b.fconst(-x)
            }
            ExprKind::Unary(Opcode::Ineg, a) if matches!(a.kind, ExprKind::I64(_)) => {
                let ExprKind::I64(n) = a.kind else {
                    unreachable!()
                };
                self.b.iconst(n.wrapping_neg())
            }
            ExprKind::Unary(op, a) => {
                let a = self.scalar(a);
                self.b.unary(*op, a)
            }
            ExprKind::Binary(op, a, c) => {
                let a = self.scalar(a);
                let c = self.scalar(c);
                self.b.binary(*op, a, c)
            }
            ExprKind::Powi(a, n) => {
                let a = self.scalar(a);
                self.b.powi(a, *n)
            }
            ExprKind::Cmp(op, cond, a, c) => {
                let a = self.scalar(a);
                let c = self.scalar(c);
                if *op == Opcode::Fcmp {
                    self.b.fcmp(*cond, a, c)
                } else {
                    self.b.icmp(*cond, a, c)
                }
            }
            ExprKind::And(a, c) => return vec![self.short_circuit(a, c, true)],
            ExprKind::Or(a, c) => return vec![self.short_circuit(a, c, false)],
            ExprKind::Fill(a, x) => {
                let a = self.scalar(a);
                let x = self.scalar(x);
                self.b.fill(a, x);
                return Vec::new();
            }
            ExprKind::Slice(a, lo, hi) => {
                let a = self.scalar(a);
                let lo = self.scalar(lo);
                let hi = self.scalar(hi);
                self.b.slice(a, lo, hi)
            }
            ExprKind::Call(f, args, checks) => {
                let args: Vec<Value> = args.iter().map(|a| self.scalar(a)).collect();
                for &(i, j) in checks {
                    self.b.disjoint(args[i], args[j]);
                }
                let id = self.ids[*f];
                let tys = self.module.func(id).sig.results.clone();
                let inst = self.b.call(id, &args, &tys);
                return self.b.func.dfg.inst_results(inst).to_vec();
            }
            ExprKind::Autodiff(req, args) => {
                let args: Vec<Value> = args.iter().map(|a| self.scalar(a)).collect();
                for &(i, j) in &req.disjoint {
                    self.b.disjoint(args[i], args[j]);
                }
                let spec = AutodiffSpec {
                    mode: req.mode,
                    func: self.ids[req.func],
                    ret: req.ret,
                    args: req.args.clone(),
                    width: req.width,
                };
                let tys = self.module.autodiff_result_types(&spec);
                let inst = self.b.autodiff(spec, &args, &tys);
                return self.b.func.dfg.inst_results(inst).to_vec();
            }
            ExprKind::If(c, t, els) => return self.if_expr(c, t, els.as_ref(), &e.ty),
            ExprKind::Tuple(xs) => return xs.iter().map(|x| self.scalar(x)).collect(),
        };
        vec![v]
    }

    /// `a && b`: `brif a, rhs, join(vars.., a)`; `rhs: jump join(vars.., b)`.
    /// `a || b`: `brif a, join(vars.., a), rhs`.
    fn short_circuit(&mut self, a: &Expr, rhs: &Expr, and: bool) -> Value {
        let a = self.scalar(a);
        let vars = self.join_vars(&[], &[rhs]);
        let rhs_block = self.new_block();
        let join = self.new_block();
        let mut args = self.current(&vars);
        args.push(a);
        if and {
            self.b.brif(a, rhs_block, &[], join, &args);
        } else {
            self.b.brif(a, join, &args, rhs_block, &[]);
        }
        self.live = false;
        let saved = self.env.clone();
        self.start(rhs_block);
        let b = self.scalar(rhs);
        if self.live {
            let mut args = self.current(&vars);
            args.push(b);
            self.jump(join, &args);
        }
        self.env = saved;
        self.start(join);
        self.bind_params(join, &vars, &[Type::Bool])[0]
    }

    /// ```text
    ///     brif c, then, else        (without else: brif c, then, join(vars..))
    /// then: ..; jump join(vars.., values..)
    /// else: ..; jump join(vars.., values..)
    /// join(vars.., values..):
    /// ```
    fn if_expr(&mut self, c: &Expr, then: &Block, els: Option<&Block>, ty: &Ty) -> Vec<Value> {
        let c = self.scalar(c);
        let branches: Vec<&Block> = std::iter::once(then).chain(els).collect();
        let vars = self.join_vars(&branches, &[]);
        let value_tys = ty.ir_values();
        let then_block = self.new_block();
        let join = self.new_block();
        let mut reached = false;
        let else_block = match els {
            Some(_) => {
                let b = self.new_block();
                self.b.brif(c, then_block, &[], b, &[]);
                Some(b)
            }
            None => {
                let args = self.current(&vars);
                self.b.brif(c, then_block, &[], join, &args);
                reached = true;
                None
            }
        };
        self.live = false;
        let saved = self.env.clone();
        for (block, body) in [(Some(then_block), then), (else_block, els.unwrap_or(then))] {
            let Some(block) = block else { continue };
            self.start(block);
            let values = self.block(body);
            if self.live {
                let mut args = self.current(&vars);
                if !value_tys.is_empty() {
                    args.extend(values);
                }
                self.jump(join, &args);
                reached = true;
            }
            self.env = saved.clone();
        }
        if !reached {
            return Vec::new();
        }
        self.start(join);
        self.bind_params(join, &vars, &value_tys)
    }
}

/// The locals each block assigns, nested blocks included, found once per
/// block: lowering asks for the set of every loop and `if` of a nest, and
/// walking each one's body again would be quadratic in the nesting depth.
/// Blocks are keyed by address; the typed tree does not move while it is
/// lowered.
#[derive(Default)]
struct Assigned {
    sets: HashMap<*const Block, Vec<LocalId>>,
}

impl Assigned {
    /// The locals `b` assigns, in declaration order.
    fn block(&mut self, b: &Block) -> &[LocalId] {
        let key: *const Block = b;
        if !self.sets.contains_key(&key) {
            let mut set = BTreeSet::new();
            self.walk(b, &mut set);
            self.sets.insert(key, set.into_iter().collect());
        }
        &self.sets[&key]
    }

    fn walk(&mut self, b: &Block, set: &mut BTreeSet<LocalId>) {
        for s in &b.stmts {
            match s {
                Stmt::Let(_, e) | Stmt::Zeros(_, e, _) | Stmt::Expr(e) => self.expr(e, set),
                Stmt::Assign(l, e) => {
                    set.insert(*l);
                    self.expr(e, set);
                }
                Stmt::AssignTuple(ls, e) => {
                    set.extend(ls.iter().copied());
                    self.expr(e, set);
                }
                Stmt::Store(_, i, x, _) => {
                    self.expr(i, set);
                    self.expr(x, set);
                }
                Stmt::Return(e, _) => {
                    if let Some(e) = e {
                        self.expr(e, set);
                    }
                }
                Stmt::For(_, lo, hi, body, ..) => {
                    self.expr(lo, set);
                    self.expr(hi, set);
                    set.extend(self.block(body).iter().copied());
                }
                Stmt::While(c, body, ..) => {
                    self.expr(c, set);
                    set.extend(self.block(body).iter().copied());
                }
                Stmt::Break(_) | Stmt::Continue(_) => {}
            }
        }
        if let Some(e) = &b.tail {
            self.expr(e, set);
        }
    }

    /// Adds the locals `e` assigns (in the blocks of its `if`s) to `set`.
    fn expr(&mut self, e: &Expr, set: &mut BTreeSet<LocalId>) {
        match &e.kind {
            ExprKind::F64(_) | ExprKind::I64(_) | ExprKind::Bool(_) | ExprKind::Local(_) => {}
            ExprKind::Unary(_, a) | ExprKind::Powi(a, _) => self.expr(a, set),
            ExprKind::Binary(_, a, b)
            | ExprKind::Cmp(_, _, a, b)
            | ExprKind::And(a, b)
            | ExprKind::Or(a, b)
            | ExprKind::Fill(a, b) => {
                self.expr(a, set);
                self.expr(b, set);
            }
            ExprKind::Slice(a, lo, hi) => {
                self.expr(a, set);
                self.expr(lo, set);
                self.expr(hi, set);
            }
            ExprKind::Call(_, xs, _) | ExprKind::Autodiff(_, xs) | ExprKind::Tuple(xs) => {
                for x in xs {
                    self.expr(x, set);
                }
            }
            ExprKind::If(c, t, els) => {
                self.expr(c, set);
                set.extend(self.block(t).iter().copied());
                if let Some(b) = els {
                    set.extend(self.block(b).iter().copied());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LineIndex;
    use crate::diagnostic::line_col;

    #[test]
    fn line_index_agrees_with_the_diagnostics() {
        let src = "ab\nçd x\n\n  é\r\nz";
        let index = LineIndex::new(src);
        for offset in 0..=src.len() + 3 {
            assert_eq!(index.line_col(offset), line_col(src, offset), "at {offset}");
        }
    }
}
