//! The verifier: checks every invariant of the IR, so that a pass that
//! produces invalid IR is caught right after it runs
//! ([`verify_after_pass`] names the pass in the error).
//!
//! Checks, per function:
//! - **Signature and metadata.** Results are scalars. Each rule is a function
//!   of the module whose signature agrees with the owner's
//!   ([`rule_signature`]; reverse-rule shadows must be `mut`).
//! - **Structure.** Blocks and instructions referenced by the layout exist;
//!   each instruction is placed once; instruction results and block
//!   parameters are defined where they are listed. A defined function's
//!   entry block has the signature's parameter types. Every placed block ends
//!   in exactly one terminator, with none before the end.
//! - **Control flow.** Branch targets exist, are in the layout and are not the
//!   entry block; block-call arguments match the target's parameters in
//!   number and type; the `brif` condition is `bool`.
//! - **Values.** Every use names an existing value that is defined (not
//!   detached), whose definition is placed and dominates the use (dominators
//!   by the Cooper–Harvey–Kennedy iterative algorithm). Uses in unreachable
//!   blocks are type-checked, but dominance is not checked for them.
//! - **Types.** An instruction's format is its opcode's ([`Opcode::format`]);
//!   operand and result types follow [`Opcode::fixed_signature`]; `select`
//!   takes a `bool` and two operands of one scalar type; `call` arguments
//!   and results match the callee's signature; `return` values match the
//!   function's results.
//! - **`autodiff`.** One activity per callee parameter, consistent with the
//!   mode (forward: `dual`/`const`/`dup` and return `dual`/`const`; reverse:
//!   `active`/`const`/`dup` and return `active`/`const`), `dual`/`active`
//!   only on `f64` parameters, `dup` only on arrays, the number of values
//!   equal to the sum of the activities' arities, value types matching, and
//!   results equal to [`Module::autodiff_result_types`].
//! - **Arrays.** Array values come only from entry-block parameters,
//!   `zeros`, array results of calls and `slice` (never from other block
//!   parameters or `select`); `return` gives back only arrays the function
//!   owns ([`Function::owns_array`]), each once;
//!   a `slice` takes an array and two i64 bounds and gives the array's type,
//!   `disjoint` two arrays of one type. `store` and
//!   `fill` write only writable arrays ([`Function::array_is_writable`]); so
//!   does passing an array to a `mut` parameter of a callee, and the shadow
//!   of a `dup` argument in reverse mode (it accumulates adjoints) or in
//!   forward mode for a `mut` parameter.
//! - **Regions.** The callee exists and the region's arguments and results
//!   match its signature; rules are checked as for functions; arguments and
//!   results are defined values; the region has blocks, all in the layout;
//!   the parent, if any, is another region and parents form no cycle.
//! - **Inlined code** (provenance, [`crate::InlinedData`]). Each listed
//!   block exists (it need not be in the layout: a pass that removes a block
//!   may leave it listed) and is listed once; the parent, if any, is another
//!   entry, parents form no cycle, and the parent lists every block of its
//!   child (nested bodies are part of the enclosing one).
//!
//! The verifier never panics, whatever entity numbers it finds; when the
//! layout refers to blocks or instructions that do not exist, it reports that
//! and stops checking the function.
//!
//! It computes dominators itself rather than with [`crate::cfg`], on
//! purpose: the passes that move code (GVN, LICM, carry) decide where it may
//! go with `cfg`'s dominator tree, and a check that shared that code would
//! accept whatever a bug in it let them do.

use crate::dfg::ValueDef;
use crate::entities::{Block, FuncId, Inlined, Inst, Region, Value};
use crate::function::{Function, Param, Rules, Signature};
use crate::instructions::{
    ArgActivity, AutodiffSpec, BlockCall, InstData, Mode, Opcode, RetActivity,
};
use crate::module::Module;
use crate::types::Type;
use crate::write::{write_function, write_inst};
use cranelift_entity::EntityRef;
use std::fmt;

/// What a verifier error is attached to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnyEntity {
    /// The function header: signature and rules.
    Function,
    /// A block: its parameters, or the instructions the layout places in
    /// it (a missing terminator, an instruction placed twice).
    Block(Block),
    /// An instruction.
    Inst(Inst),
    /// A rule region.
    Region(Region),
    /// A record of inlined code.
    Inlined(Inlined),
}

/// One broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifierError {
    /// The function's name (without `@`).
    pub func: String,
    /// `header`, `block2`, `region0`, `inlined0` or the printed instruction.
    pub location: String,
    /// The entity at fault, which `location` prints.
    pub entity: AnyEntity,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for VerifierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}: {}: {}", self.func, self.location, self.message)
    }
}

/// Every error found, with the failing functions printed with the errors
/// inline (`; error: ...` after the line at fault).
#[derive(Clone, Debug, Default)]
pub struct VerifierErrors {
    /// The errors, in the order found.
    pub errors: Vec<VerifierError>,
    /// The pass after which the IR was verified, if known.
    pub pass: Option<String>,
    listing: String,
}

impl VerifierErrors {
    /// Were no errors found?
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// The number of errors.
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// The errors, in the order found.
    pub fn iter(&self) -> impl Iterator<Item = &VerifierError> {
        self.errors.iter()
    }

    /// Does any error message contain `text`? (For tests.)
    pub fn contains(&self, text: &str) -> bool {
        self.errors.iter().any(|e| e.message.contains(text))
    }

    /// Records that `pass` produced this IR.
    pub fn with_pass(mut self, pass: &str) -> VerifierErrors {
        self.pass = Some(pass.to_string());
        self
    }

    /// The failing functions, printed with the errors inline.
    pub fn listing(&self) -> &str {
        &self.listing
    }

    fn append(&mut self, other: VerifierErrors) {
        self.errors.extend(other.errors);
        if !other.listing.is_empty() {
            if !self.listing.is_empty() {
                self.listing.push('\n');
            }
            self.listing.push_str(&other.listing);
        }
    }
}

impl fmt::Display for VerifierErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pass {
            Some(pass) => writeln!(f, "pass `{pass}` produced invalid IR:")?,
            None => writeln!(f, "invalid IR:")?,
        }
        for e in &self.errors {
            writeln!(f, "{e}")?;
        }
        if !self.listing.is_empty() {
            write!(f, "\n{}", self.listing)?;
        }
        Ok(())
    }
}

impl std::error::Error for VerifierErrors {}

/// Verifies one function of `module`.
pub fn verify_function(module: &Module, id: FuncId) -> Result<(), VerifierErrors> {
    if !module.is_valid(id) {
        return Err(VerifierErrors {
            errors: vec![VerifierError {
                func: id.to_string(),
                location: "header".to_string(),
                entity: AnyEntity::Function,
                message: format!("{id} is not a function of the module"),
            }],
            ..VerifierErrors::default()
        });
    }
    let func = module.func(id);
    let mut v = Verifier {
        module,
        func,
        errors: Vec::new(),
        pos: Vec::new(),
        doms: Doms::default(),
        printable: true,
    };
    v.run();
    if v.errors.is_empty() {
        Ok(())
    } else {
        Err(v.into_errors())
    }
}

/// Verifies every function of `module`.
pub fn verify_module(module: &Module) -> Result<(), VerifierErrors> {
    let mut all = VerifierErrors::default();
    for id in module.ids() {
        if let Err(e) = verify_function(module, id) {
            all.append(e);
        }
    }
    if all.is_empty() {
        Ok(())
    } else {
        Err(all)
    }
}

/// Verifies `module` after `pass` ran; errors say which pass produced the
/// invalid IR.
pub fn verify_after_pass(module: &Module, pass: &str) -> Result<(), VerifierErrors> {
    verify_module(module).map_err(|e| e.with_pass(pass))
}

/// The signature a `mode` rule of a function with signature `owner` must
/// have (the verifier compares types, and `mut` where it is required).
///
/// - Forward: for each parameter `p`, `p` then its tangent (`p.t`, `f64` for
///   an `f64` parameter, `arr` for an array, none for `i64`/`bool`); results:
///   the owner's results, then one tangent per `f64` or `arr` result.
/// - Reverse: the owner's parameters with a `mut arr` shadow (`p.adj`) after
///   each array parameter, then one cotangent (`rN.adj`) per `f64` or
///   `arr` result (of its type; an `arr` is read-only); results: one `f64`
///   adjoint per `f64` parameter, in order.
pub fn rule_signature(owner: &Signature, mode: Mode) -> Signature {
    let mut sig = Signature::default();
    match mode {
        Mode::Forward => {
            for p in &owner.params {
                sig.params.push(p.clone());
                if matches!(p.ty, Type::F64 | Type::Array) {
                    sig.params.push(Param::new(format!("{}.t", p.name), p.ty));
                }
            }
            sig.results = owner.results.clone();
            sig.results
                .extend(owner.differentiable_results().map(|(_, t)| t));
        }
        Mode::Reverse => {
            for p in &owner.params {
                sig.params.push(p.clone());
                if p.ty == Type::Array {
                    sig.params
                        .push(Param::mutable_array(format!("{}.adj", p.name)));
                }
            }
            for (i, t) in owner.differentiable_results() {
                sig.params.push(Param::new(format!("r{i}.adj"), t));
            }
            sig.results = owner
                .params
                .iter()
                .filter(|p| p.ty == Type::F64)
                .map(|_| Type::F64)
                .collect();
        }
    }
    sig
}

// ---------------------------------------------------------------- dominators

/// Reachability and immediate dominators, indexed by block number.
#[derive(Default)]
struct Doms {
    /// Reverse post-order number of each reachable block.
    rpo: Vec<Option<usize>>,
    idom: Vec<Option<Block>>,
    /// Pre- and post-order numbers in the dominator tree: `a` dominates `b`
    /// when `b`'s interval lies within `a`'s (walking up the tree instead
    /// was quadratic in the depth of nested loops).
    pre: Vec<u32>,
    post: Vec<u32>,
}

impl Doms {
    /// Cooper, Harvey and Kennedy, "A Simple, Fast Dominance Algorithm".
    fn compute(entry: Block, succs: &[Vec<Block>]) -> Doms {
        let n = succs.len();
        let mut doms = Doms {
            rpo: vec![None; n],
            idom: vec![None; n],
            pre: Vec::new(),
            post: Vec::new(),
        };
        if entry.index() >= n {
            return doms;
        }
        // Iterative depth-first search for a post-order.
        let mut visited = vec![false; n];
        let mut post = Vec::new();
        let mut stack = vec![(entry, 0usize)];
        visited[entry.index()] = true;
        while let Some((b, i)) = stack.pop() {
            if let Some(&s) = succs[b.index()].get(i) {
                stack.push((b, i + 1));
                if !visited[s.index()] {
                    visited[s.index()] = true;
                    stack.push((s, 0));
                }
            } else {
                post.push(b);
            }
        }
        let order: Vec<Block> = post.into_iter().rev().collect();
        for (i, b) in order.iter().enumerate() {
            doms.rpo[b.index()] = Some(i);
        }
        let mut preds = vec![Vec::new(); n];
        for &b in &order {
            for &s in &succs[b.index()] {
                preds[s.index()].push(b);
            }
        }
        doms.idom[entry.index()] = Some(entry);
        let mut changed = true;
        while changed {
            changed = false;
            for &b in order.iter().skip(1) {
                let mut new: Option<Block> = None;
                for &p in &preds[b.index()] {
                    if doms.idom[p.index()].is_some() {
                        new = Some(match new {
                            None => p,
                            Some(q) => doms.intersect(p, q),
                        });
                    }
                }
                if new.is_some() && doms.idom[b.index()] != new {
                    doms.idom[b.index()] = new;
                    changed = true;
                }
            }
        }
        doms.number(&order);
        doms
    }

    /// Numbers the dominator tree of the blocks of `order` (iteratively).
    fn number(&mut self, order: &[Block]) {
        let n = self.rpo.len();
        let mut children = vec![Vec::new(); n];
        for &b in order.iter().skip(1) {
            let d = self.idom(b);
            if d != b {
                children[d.index()].push(b);
            }
        }
        self.pre = vec![0; n];
        self.post = vec![0; n];
        let Some(&root) = order.first() else {
            return;
        };
        let mut clock = 0u32;
        let mut stack = vec![(root, 0usize)];
        self.pre[root.index()] = clock;
        while let Some(&mut (b, ref mut i)) = stack.last_mut() {
            if let Some(&c) = children[b.index()].get(*i) {
                *i += 1;
                clock += 1;
                self.pre[c.index()] = clock;
                stack.push((c, 0));
            } else {
                clock += 1;
                self.post[b.index()] = clock;
                stack.pop();
            }
        }
    }

    fn rpo(&self, b: Block) -> usize {
        self.rpo.get(b.index()).copied().flatten().unwrap_or(0)
    }

    fn idom(&self, b: Block) -> Block {
        self.idom.get(b.index()).copied().flatten().unwrap_or(b)
    }

    fn intersect(&self, mut a: Block, mut b: Block) -> Block {
        while a != b {
            while self.rpo(a) > self.rpo(b) {
                a = self.idom(a);
            }
            while self.rpo(b) > self.rpo(a) {
                b = self.idom(b);
            }
        }
        a
    }

    fn reachable(&self, b: Block) -> bool {
        self.rpo.get(b.index()).copied().flatten().is_some()
    }

    /// Does `a` dominate `b` (reflexively)? `b` must be reachable.
    fn dominates(&self, a: Block, b: Block) -> bool {
        if a == b {
            return true;
        }
        if !self.reachable(a) || !self.reachable(b) {
            return false;
        }
        let (a, b) = (a.index(), b.index());
        self.pre[a] <= self.pre[b] && self.post[b] <= self.post[a]
    }
}

// ---------------------------------------------------------------- checks

struct Verifier<'a> {
    module: &'a Module,
    func: &'a Function,
    errors: Vec<(AnyEntity, String)>,
    /// Position of each placed instruction in its block, by instruction number.
    pos: Vec<usize>,
    doms: Doms,
    /// Can the function be printed (no dangling block or instruction in the
    /// layout)?
    printable: bool,
}

impl Verifier<'_> {
    fn report(&mut self, at: AnyEntity, message: String) {
        self.errors.push((at, message));
    }

    /// The type of `v` if it exists and is defined; `None` otherwise (the
    /// use check reports it).
    fn ty(&self, v: Value) -> Option<Type> {
        let dfg = &self.func.dfg;
        if !dfg.value_is_valid(v) {
            return None;
        }
        let defined = match *dfg.value_def(v) {
            ValueDef::Detached => false,
            ValueDef::Result { inst, .. } => inst.index() < dfg.num_insts(),
            ValueDef::Param { block, .. } => dfg.block_is_valid(block),
        };
        defined.then(|| dfg.value_type(v))
    }

    /// `what` is formatted only when there is an error (the verifier runs
    /// after every pass; formatting a description of every operand was a
    /// third of its time).
    fn expect_type(&mut self, at: AnyEntity, what: impl fmt::Display, v: Value, want: Type) {
        if let Some(t) = self.ty(v) {
            if t != want {
                self.report(at, format!("{what} {v} has type {t}, expected {want}"));
            }
        }
    }

    /// An array passed to a `mut` parameter of a call is passed to no
    /// read-only parameter of it, as in the language: so a read-only array
    /// parameter never changes while its function runs. (Two `mut`
    /// parameters may share an array: derivative code passes one shadow for
    /// `dot(x, x)`'s two arguments, and only accumulates into them.)
    fn expect_no_alias(&mut self, at: AnyEntity, uses: &[(Value, bool, &str)]) {
        for &(v, written, name) in uses {
            if !written {
                continue;
            }
            for &(w, w_written, other) in uses {
                if !w_written && w == v {
                    self.report(
                        at,
                        format!("{v} is passed to `mut` parameter `{name}` and to the read-only `{other}`: a written array must not alias a read-only argument"),
                    );
                }
            }
        }
    }

    fn expect_writable(&mut self, at: AnyEntity, what: impl fmt::Display, v: Value) {
        if self.ty(v).is_some_and(Type::is_array) && !self.func.array_is_writable(v) {
            let name = self.func.array_name(v);
            self.report(
                at,
                format!("{what}: `{name}` ({v}) is not writable (neither a `mut` parameter nor a `zeros` array)"),
            );
        }
    }

    fn run(&mut self) {
        let func = self.func;
        self.check_rules(AnyEntity::Function, &func.sig, &func.meta.rules);
        if !self.check_structure() {
            self.printable = false;
            return;
        }
        self.check_entry();
        self.compute_doms();
        for &block in func.layout.blocks() {
            for (idx, &inst) in func.layout.block_insts(block).iter().enumerate() {
                self.check_inst(block, idx, inst);
            }
        }
        self.check_regions();
        self.check_inlined();
    }

    /// Entities of the layout exist and agree with the DFG; blocks are
    /// terminated. Returns false when checking further could index out of
    /// bounds.
    fn check_structure(&mut self) -> bool {
        let (dfg, layout) = (&self.func.dfg, &self.func.layout);
        self.pos = vec![usize::MAX; dfg.num_insts()];
        let mut ok = true;
        for &block in layout.blocks() {
            if !dfg.block_is_valid(block) {
                let msg = format!("the layout holds {block}, which does not exist");
                self.report(AnyEntity::Function, msg);
                ok = false;
                continue;
            }
            for (num, &p) in dfg.block_params(block).iter().enumerate() {
                if !dfg.value_is_valid(p) {
                    self.report(
                        AnyEntity::Block(block),
                        format!("parameter {p} does not exist"),
                    );
                    ok = false;
                } else if *dfg.value_def(p) != (ValueDef::Param { block, num }) {
                    let msg = format!("parameter {p} is not defined as parameter {num} of {block}");
                    self.report(AnyEntity::Block(block), msg);
                }
            }
            let insts = layout.block_insts(block);
            for (idx, &inst) in insts.iter().enumerate() {
                if inst.index() >= dfg.num_insts() {
                    let msg = format!("the layout holds {inst}, which does not exist");
                    self.report(AnyEntity::Block(block), msg);
                    ok = false;
                    continue;
                }
                if self.pos[inst.index()] != usize::MAX || layout.inst_block(inst) != Some(block) {
                    let msg = format!("{inst} is placed more than once");
                    self.report(AnyEntity::Block(block), msg);
                    ok = false;
                }
                self.pos[inst.index()] = idx;
                for (num, &r) in dfg.inst_results(inst).iter().enumerate() {
                    if !dfg.value_is_valid(r) {
                        self.report(
                            AnyEntity::Block(block),
                            format!("result {r} does not exist"),
                        );
                        ok = false;
                    } else if *dfg.value_def(r) != (ValueDef::Result { inst, num }) {
                        let msg = format!("result {r} is defined elsewhere");
                        self.report(AnyEntity::Inst(inst), msg);
                    }
                }
                let is_term = dfg.inst(inst).opcode().is_terminator();
                if is_term && idx + 1 < insts.len() {
                    let msg = "a terminator must be the last instruction of its block".to_string();
                    self.report(AnyEntity::Inst(inst), msg);
                }
            }
            let ends = layout
                .last_inst(block)
                .filter(|i| i.index() < dfg.num_insts());
            if !ends.is_some_and(|i| dfg.inst(i).opcode().is_terminator()) {
                let msg = format!("{block} does not end in a terminator");
                self.report(AnyEntity::Block(block), msg);
            }
        }
        ok
    }

    fn check_entry(&mut self) {
        // Two lanes live only inside a body: no signature holds them, so
        // that calls, executors' arguments and AD see scalars and arrays.
        let sig = &self.func.sig;
        if sig
            .param_types()
            .chain(sig.results.iter().copied())
            .any(|t| t == Type::F64x2)
        {
            let msg = "no parameter or result can be an f64x2".to_string();
            self.report(AnyEntity::Function, msg);
        }
        let Some(entry) = self.func.entry_block() else {
            return;
        };
        let params = self.func.dfg.block_params(entry);
        let sig = &self.func.sig.params;
        if params.len() != sig.len() {
            let msg = format!(
                "the entry block has {} parameters, the signature has {}",
                params.len(),
                sig.len()
            );
            self.report(AnyEntity::Block(entry), msg);
            return;
        }
        for (&v, p) in params.iter().zip(sig) {
            let what = format_args!("entry parameter `{}`", p.name);
            self.expect_type(AnyEntity::Block(entry), what, v, p.ty);
        }
        for &block in self.func.layout.blocks().iter().skip(1) {
            for &p in self.func.dfg.block_params(block) {
                if let Some(t) = self.ty(p).filter(|t| t.is_array()) {
                    let msg = format!(
                        "parameter {p} has type {t}: arrays only come from entry-block parameters, `zeros`, calls and `slice`"
                    );
                    self.report(AnyEntity::Block(block), msg);
                }
            }
        }
    }

    fn compute_doms(&mut self) {
        let (dfg, layout) = (&self.func.dfg, &self.func.layout);
        let mut succs = vec![Vec::new(); dfg.num_blocks()];
        for &block in layout.blocks() {
            for &inst in layout.block_insts(block) {
                for dest in dfg.inst(inst).destinations() {
                    let b = dest.block;
                    if dfg.block_is_valid(b) && layout.is_block_inserted(b) {
                        succs[block.index()].push(b);
                    }
                }
            }
        }
        if let Some(entry) = self.func.entry_block() {
            self.doms = Doms::compute(entry, &succs);
        }
    }

    /// Checks that `v`, used by `inst` (at `idx` in `block`), is defined and
    /// dominates the use.
    fn check_use(&mut self, block: Block, idx: usize, inst: Inst, v: Value) {
        let (dfg, layout) = (&self.func.dfg, &self.func.layout);
        let at = AnyEntity::Inst(inst);
        if !dfg.value_is_valid(v) {
            return self.report(at, format!("uses {v}, which does not exist"));
        }
        let def_block = match *dfg.value_def(v) {
            ValueDef::Detached => {
                return self.report(at, format!("uses {v}, which is never defined"));
            }
            ValueDef::Result { inst: d, .. } => match layout.inst_block(d) {
                None => {
                    let msg = format!("uses {v}, whose instruction is not in the layout");
                    return self.report(at, msg);
                }
                Some(db) if db == block => {
                    if self.pos.get(d.index()).is_some_and(|&p| p >= idx) {
                        return self.report(at, format!("uses {v} before its definition"));
                    }
                    return;
                }
                Some(db) => db,
            },
            ValueDef::Param { block: pb, .. } => {
                if !layout.is_block_inserted(pb) {
                    let msg = format!("uses {v}, a parameter of {pb}, which is not in the layout");
                    return self.report(at, msg);
                }
                pb
            }
        };
        if self.doms.reachable(block) && !self.doms.dominates(def_block, block) {
            let msg =
                format!("uses {v}, whose definition in {def_block} does not dominate {block}");
            self.report(at, msg);
        }
    }

    fn expect_results(&mut self, inst: Inst, want: &[Type]) {
        let at = AnyEntity::Inst(inst);
        let results = self.func.dfg.inst_results(inst);
        if results.len() != want.len() {
            let msg = format!("has {} result(s), expected {}", results.len(), want.len());
            return self.report(at, msg);
        }
        for (&r, &t) in results.iter().zip(want) {
            self.expect_type(at, "result", r, t);
        }
    }

    fn check_inst(&mut self, block: Block, idx: usize, inst: Inst) {
        let func = self.func;
        let data = func.dfg.inst(inst);
        let at = AnyEntity::Inst(inst);
        data.for_each_use(|v| self.check_use(block, idx, inst, v));
        let op = data.opcode();
        if data.format() != op.format() {
            return self.report(
                at,
                format!("`{op}` cannot be stored in this instruction format"),
            );
        }
        match data {
            InstData::FConst { .. } => self.expect_results(inst, &[Type::F64]),
            InstData::IConst { .. } => self.expect_results(inst, &[Type::I64]),
            InstData::BConst { .. } => self.expect_results(inst, &[Type::Bool]),
            InstData::Ternary {
                op: Opcode::Select,
                args: [c, a, b],
            } => {
                self.expect_type(at, "condition", *c, Type::Bool);
                let (ta, tb) = (self.ty(*a), self.ty(*b));
                if ta.is_some_and(Type::is_array) || tb.is_some_and(Type::is_array) {
                    self.report(at, "arrays cannot flow through `select`".to_string());
                } else if ta == Some(Type::F64x2) || tb == Some(Type::F64x2) {
                    self.report(at, "f64x2 values cannot flow through `select`".to_string());
                } else if let (Some(ta), Some(tb)) = (ta, tb) {
                    if ta != tb {
                        let msg =
                            format!("operands {a}: {ta} and {b}: {tb} of `select` differ in type");
                        self.report(at, msg);
                    }
                    self.expect_results(inst, &[ta]);
                }
            }
            InstData::Ternary {
                op: Opcode::Slice | Opcode::View,
                args: [a, lo, hi],
            } => {
                self.expect_type(at, "lower bound", *lo, Type::I64);
                self.expect_type(at, "upper bound", *hi, Type::I64);
                match self.ty(*a) {
                    Some(t) if t.is_array() => self.expect_results(inst, &[t]),
                    Some(t) => self.report(at, format!("`slice` of {a}: {t}, not an array")),
                    None => {}
                }
            }
            InstData::Binary {
                op: Opcode::Disjoint,
                args: [a, b],
            } => {
                match (self.ty(*a), self.ty(*b)) {
                    (Some(ta), Some(tb)) if !ta.is_array() || ta != tb => self.report(
                        at,
                        format!(
                            "`disjoint` needs two arrays of one type, not {a}: {ta} and {b}: {tb}"
                        ),
                    ),
                    _ => {}
                }
                self.expect_results(inst, &[]);
            }
            InstData::Push { arg, tape } => {
                if *tape >= crate::MAX_TAPES {
                    self.report(at, format!("tape {tape} does not exist"));
                }
                if self.ty(*arg).is_some_and(Type::is_array) {
                    self.report(at, "arrays cannot be pushed on the tape".to_string());
                } else if self.ty(*arg) == Some(Type::F64x2) {
                    self.report(at, "f64x2 values cannot be pushed on the tape".to_string());
                }
                self.expect_results(inst, &[]);
            }
            InstData::Pop { ty, tape, varies } => {
                if varies
                    .iter()
                    .flatten()
                    .any(|&v| !matches!(self.ty(v), Some(Type::F64 | Type::Array) | None))
                {
                    self.report(
                        at,
                        "a `pop` varies only with f64 values and arrays".to_string(),
                    );
                }
                if *tape >= crate::MAX_TAPES {
                    self.report(at, format!("tape {tape} does not exist"));
                }
                if !ty.is_scalar() {
                    self.report(at, "arrays cannot be popped from the tape".to_string());
                } else if *ty == Type::F64x2 {
                    self.report(
                        at,
                        "f64x2 values cannot be popped from the tape".to_string(),
                    );
                }
                self.expect_results(inst, &[*ty]);
            }
            InstData::Tape { op, tape, arg } => {
                if *tape >= crate::MAX_TAPES {
                    self.report(at, format!("tape {tape} does not exist"));
                }
                match (op, arg) {
                    (Opcode::Tapelen, None) => self.expect_results(inst, &[Type::I64]),
                    (Opcode::Tapecut, Some(m)) => {
                        self.expect_type(at, "mark", *m, Type::I64);
                        self.expect_results(inst, &[]);
                    }
                    (Opcode::Tapeover, Some(m)) => {
                        self.expect_type(at, "mark", *m, Type::I64);
                        self.expect_results(inst, &[Type::Bool]);
                    }
                    _ => self.report(at, format!("`{op}` has the wrong operands")),
                }
            }
            InstData::Call { func: callee, args } => self.check_call(inst, *callee, args),
            InstData::Autodiff { spec, args } => self.check_autodiff(inst, spec, args),
            InstData::Jump { dest } => self.check_block_call(inst, dest),
            InstData::Brif {
                cond,
                then_dest,
                else_dest,
            } => {
                self.expect_type(at, "condition", *cond, Type::Bool);
                self.check_block_call(inst, then_dest);
                self.check_block_call(inst, else_dest);
            }
            InstData::Return { args } => {
                let want = &self.func.sig.results;
                if args.len() != want.len() {
                    let msg = format!(
                        "returns {} value(s), the signature has {} result(s)",
                        args.len(),
                        want.len()
                    );
                    return self.report(at, msg);
                }
                for (i, (&v, &t)) in args.iter().zip(want).enumerate() {
                    self.expect_type(at, format_args!("returned value {i}"), v, t);
                    // The caller owns an array result: only an array this
                    // function owns goes back, and only once.
                    if t.is_array() && self.func.dfg.value_is_valid(v) {
                        if !self.func.owns_array(v) {
                            let msg = format!(
                                "returns {v}, an array it does not own (only `zeros` arrays and array results of calls can be returned; copy the others)"
                            );
                            self.report(at, msg);
                        } else if args[..i].contains(&v) {
                            self.report(at, format!("returns the array {v} twice"));
                        }
                    }
                }
            }
            _ => {
                if let Some((arg_tys, res)) = op.fixed_signature() {
                    for (i, (&v, &t)) in data.args().iter().zip(arg_tys).enumerate() {
                        self.expect_type(at, format_args!("operand {i}"), v, t);
                    }
                    self.expect_results(inst, res.as_slice());
                }
                if matches!(
                    op,
                    Opcode::Store | Opcode::Fill | Opcode::Istore | Opcode::Ifill | Opcode::Vstore
                ) {
                    self.expect_writable(at, format_args!("`{op}` target"), data.args()[0]);
                }
            }
        }
    }

    fn check_call(&mut self, inst: Inst, callee: FuncId, args: &[Value]) {
        let at = AnyEntity::Inst(inst);
        if !self.module.is_valid(callee) {
            return self.report(at, format!("calls {callee}, which does not exist"));
        }
        let f = self.module.func(callee);
        if args.len() != f.sig.params.len() {
            let msg = format!(
                "passes {} argument(s), @{} takes {}",
                args.len(),
                f.name,
                f.sig.params.len()
            );
            self.report(at, msg);
        } else {
            for (&v, p) in args.iter().zip(&f.sig.params) {
                let what = format_args!("argument for parameter `{}`", p.name);
                self.expect_type(at, what, v, p.ty);
                if p.mutable {
                    let what = format_args!("argument for `mut` parameter `{}`", p.name);
                    self.expect_writable(at, what, v);
                }
            }
            let uses: Vec<(Value, bool, &str)> = args
                .iter()
                .zip(&f.sig.params)
                .filter(|(_, p)| p.ty.is_array())
                .map(|(&v, p)| (v, p.mutable, p.name.as_str()))
                .collect();
            self.expect_no_alias(at, &uses);
        }
        self.expect_results(inst, &f.sig.results);
    }

    fn check_autodiff(&mut self, inst: Inst, spec: &AutodiffSpec, args: &[Value]) {
        let at = AnyEntity::Inst(inst);
        if !self.module.is_valid(spec.func) {
            return self.report(
                at,
                format!("differentiates {}, which does not exist", spec.func),
            );
        }
        let f = self.module.func(spec.func);
        let (mode, ret) = (spec.mode, spec.ret);
        let ret_ok = match mode {
            Mode::Forward => matches!(ret, RetActivity::Dual | RetActivity::Const),
            Mode::Reverse => matches!(
                ret,
                RetActivity::Active | RetActivity::Const | RetActivity::Dup
            ),
        };
        if !ret_ok {
            let msg = format!(
                "return activity `{}` is not allowed in {mode} mode",
                ret.name()
            );
            self.report(at, msg);
        }
        if spec.args.len() != f.sig.params.len() {
            let msg = format!(
                "gives {} activities, @{} has {} parameter(s)",
                spec.args.len(),
                f.name,
                f.sig.params.len()
            );
            return self.report(at, msg);
        }
        if spec.width == 0 || (spec.width > 1 && mode != Mode::Forward) {
            let msg = format!("width {} is not allowed in {mode} mode", spec.width);
            return self.report(at, msg);
        }
        let seeds = self.module.autodiff_seed_types(spec);
        let arity: usize = spec.args.iter().map(|a| a.arity_at(spec.width)).sum();
        if args.len() != arity + seeds.len() {
            let msg = format!(
                "the activities take {} value(s), found {}",
                arity + seeds.len(),
                args.len()
            );
            return self.report(at, msg);
        }
        let (args, seed_args) = args.split_at(arity);
        for (i, (&v, &t)) in seed_args.iter().zip(&seeds).enumerate() {
            self.expect_type(at, format_args!("cotangent {i}"), v, t);
        }
        let mut rest = args;
        for (p, &act) in f.sig.params.iter().zip(&spec.args) {
            let (vals, tail) = rest.split_at(act.arity_at(spec.width));
            rest = tail;
            let name = act.name();
            let allowed = match act {
                ArgActivity::Const => true,
                ArgActivity::Dual => mode == Mode::Forward,
                ArgActivity::Active => mode == Mode::Reverse,
                ArgActivity::Dup => true,
            };
            if !allowed {
                let msg = format!(
                    "`{name}` (parameter `{}`) is not allowed in {mode} mode",
                    p.name
                );
                self.report(at, msg);
            }
            let fits = match act {
                ArgActivity::Const => true,
                ArgActivity::Dual | ArgActivity::Active => p.ty == Type::F64,
                ArgActivity::Dup => p.ty == Type::Array,
            };
            if !fits {
                let want = if act == ArgActivity::Dup {
                    "arr"
                } else {
                    "f64"
                };
                let msg = format!(
                    "`{name}` applies to {want} parameters, but `{}` is {}",
                    p.name, p.ty
                );
                self.report(at, msg);
                continue;
            }
            self.expect_type(at, format_args!("argument for `{}`", p.name), vals[0], p.ty);
            if p.mutable {
                let what = format!("argument for `mut` parameter `{}`", p.name);
                self.expect_writable(at, &what, vals[0]);
            }
            for &shadow in vals.iter().skip(1) {
                let what = format!(
                    "{} of `{}`",
                    if act == ArgActivity::Dup {
                        "shadow"
                    } else {
                        "tangent"
                    },
                    p.name
                );
                self.expect_type(at, &what, shadow, p.ty);
                if act == ArgActivity::Dup && (mode == Mode::Reverse || p.mutable) {
                    self.expect_writable(at, &what, shadow);
                }
            }
        }
        let want = self.module.autodiff_result_types(spec);
        self.expect_results(inst, &want);
    }

    fn check_block_call(&mut self, inst: Inst, call: &BlockCall) {
        let (dfg, layout) = (&self.func.dfg, &self.func.layout);
        let at = AnyEntity::Inst(inst);
        let b = call.block;
        if !dfg.block_is_valid(b) {
            return self.report(at, format!("branches to {b}, which does not exist"));
        }
        if !layout.is_block_inserted(b) {
            self.report(at, format!("branches to {b}, which is not in the layout"));
        } else if Some(b) == self.func.entry_block() {
            self.report(at, format!("branches to the entry block {b}"));
        }
        let params = dfg.block_params(b);
        if params.len() != call.args.len() {
            let msg = format!(
                "passes {} argument(s) to {b}, which takes {}",
                call.args.len(),
                params.len()
            );
            return self.report(at, msg);
        }
        for (i, (&v, &p)) in call.args.iter().zip(params).enumerate() {
            if dfg.value_is_valid(p) {
                let want = dfg.value_type(p);
                self.expect_type(at, format_args!("argument {i} to {b}"), v, want);
            }
        }
    }

    /// The rules of a function or region agree with the signature `owner`.
    fn check_rules(&mut self, at: AnyEntity, owner: &Signature, rules: &Rules) {
        for (mode, rule) in rules.iter() {
            if !self.module.is_valid(rule) {
                self.report(at, format!("the {mode} rule {rule} does not exist"));
                continue;
            }
            let want = rule_signature(owner, mode);
            let r = self.module.func(rule);
            let types = |s: &Signature| -> String {
                let ps: Vec<String> = s
                    .params
                    .iter()
                    .map(|p| {
                        format!(
                            "{}{}",
                            if p.mutable && p.ty.is_array() {
                                "mut "
                            } else {
                                ""
                            },
                            p.ty
                        )
                    })
                    .collect();
                let rs: Vec<&str> = s.results.iter().map(|t| t.name()).collect();
                format!("({}) -> ({})", ps.join(", "), rs.join(", "))
            };
            let params_ok = r.sig.params.len() == want.params.len()
                && r.sig
                    .params
                    .iter()
                    .zip(&want.params)
                    .all(|(p, w)| p.ty == w.ty && (p.mutable || !w.mutable));
            if !params_ok || r.sig.results != want.results {
                let msg = format!(
                    "the {mode} rule @{} has signature {}, expected {}",
                    r.name,
                    types(&r.sig),
                    types(&want)
                );
                self.report(at, msg);
            }
        }
    }

    fn check_regions(&mut self) {
        let func = self.func;
        for (region, data) in func.regions.iter() {
            let at = AnyEntity::Region(region);
            if !self.module.is_valid(data.callee) {
                self.report(at, format!("the callee {} does not exist", data.callee));
            } else {
                let callee = self.module.func(data.callee);
                let ptys: Vec<Type> = callee.sig.param_types().collect();
                self.check_region_values(at, "argument", &data.args, &ptys);
                self.check_region_values(at, "result", &data.results, &callee.sig.results);
                self.check_rules(at, &callee.sig, &data.rules);
            }
            if data.blocks.is_empty() {
                self.report(at, "a region has at least one block".to_string());
            }
            for &b in &data.blocks {
                if !func.dfg.block_is_valid(b) || !func.layout.is_block_inserted(b) {
                    self.report(at, format!("{b} is not in the layout"));
                }
            }
            if let Some(parent) = data.parent {
                if !func.regions.is_valid(parent) {
                    self.report(at, format!("the parent {parent} does not exist"));
                    continue;
                }
                // Walk the parent chain; more steps than regions means a cycle.
                let mut r = Some(parent);
                for _ in 0..=func.regions.len() {
                    r = r.and_then(|r| func.regions.get(r)).and_then(|d| d.parent);
                }
                if parent == region || r.is_some() {
                    self.report(at, "region parents form a cycle".to_string());
                }
            }
        }
    }

    fn check_inlined(&mut self) {
        let func = self.func;
        // Each entry's blocks, sorted (entries may list many blocks, and
        // there may be many entries: no per-entry table of every block).
        let sorted: Vec<Vec<Block>> = func
            .inlined
            .values()
            .map(|d| {
                let mut bs = d.blocks.clone();
                bs.sort_unstable();
                bs
            })
            .collect();
        for (i, data) in func.inlined.iter() {
            let at = AnyEntity::Inlined(i);
            for &b in &data.blocks {
                if !func.dfg.block_is_valid(b) {
                    self.report(at, format!("{b} does not exist"));
                }
            }
            if let Some(w) = sorted[i.index()].windows(2).find(|w| w[0] == w[1]) {
                self.report(at, format!("{} is listed twice", w[0]));
            }
            let Some(parent) = data.parent else { continue };
            if !func.inlined.is_valid(parent) {
                self.report(at, format!("the parent {parent} does not exist"));
                continue;
            }
            // Walk the parent chain; more steps than entries means a cycle.
            let mut r = Some(parent);
            for _ in 0..=func.inlined.len() {
                if r.is_none() {
                    break;
                }
                r = r.and_then(|r| func.inlined.get(r)).and_then(|d| d.parent);
            }
            if parent == i || r.is_some() {
                self.report(at, "inlined parents form a cycle".to_string());
                continue;
            }
            let pset = &sorted[parent.index()];
            if let Some(b) = data.blocks.iter().find(|b| pset.binary_search(b).is_err()) {
                self.report(at, format!("{b} is not listed by its parent {parent}"));
            }
        }
    }

    fn check_region_values(&mut self, at: AnyEntity, what: &str, vals: &[Value], want: &[Type]) {
        if vals.len() != want.len() {
            let msg = format!(
                "has {} {what}(s), the callee has {}",
                vals.len(),
                want.len()
            );
            self.report(at, msg);
        }
        for (i, &v) in vals.iter().enumerate() {
            let dfg = &self.func.dfg;
            if !dfg.value_is_valid(v) || *dfg.value_def(v) == ValueDef::Detached {
                self.report(at, format!("{what} {v} is not a defined value"));
            } else if let Some(&t) = want.get(i) {
                self.expect_type(at, what, v, t);
            }
        }
    }

    // ------------------------------------------------------------ reporting

    fn into_errors(self) -> VerifierErrors {
        let func = self.func;
        let location = |at: AnyEntity| -> String {
            match at {
                AnyEntity::Function => "header".to_string(),
                AnyEntity::Block(b) => b.to_string(),
                AnyEntity::Region(r) => r.to_string(),
                AnyEntity::Inlined(i) => i.to_string(),
                AnyEntity::Inst(i) => {
                    let mut s = String::new();
                    if self.printable && write_inst(&mut s, func, i, Some(self.module)).is_ok() {
                        s
                    } else {
                        i.to_string()
                    }
                }
            }
        };
        let errors = self
            .errors
            .iter()
            .map(|(at, message)| VerifierError {
                func: func.name.clone(),
                location: location(*at),
                entity: *at,
                message: message.clone(),
            })
            .collect();
        let listing = if self.printable {
            self.listing()
        } else {
            String::new()
        };
        VerifierErrors {
            errors,
            pass: None,
            listing,
        }
    }

    /// The function printed with `; error: ...` after each line at fault.
    fn listing(&self) -> String {
        let func = self.func;
        let mut text = String::new();
        if write_function(&mut text, func, Some(self.module)).is_err() {
            return String::new();
        }
        // The entity printed on each line, in the printer's order.
        let mut line_of = vec![AnyEntity::Function];
        line_of.extend(func.regions.keys().map(AnyEntity::Region));
        line_of.extend(func.inlined.keys().map(AnyEntity::Inlined));
        for &b in func.layout.blocks() {
            line_of.push(AnyEntity::Block(b));
            line_of.extend(
                func.layout
                    .block_insts(b)
                    .iter()
                    .map(|&i| AnyEntity::Inst(i)),
            );
        }
        let lines: Vec<&str> = text.lines().collect();
        let mut out = String::new();
        for (n, line) in lines.iter().enumerate() {
            out.push_str(line);
            out.push('\n');
            let at = line_of.get(n).copied();
            for (e, msg) in &self.errors {
                if Some(*e) == at {
                    out.push_str(&format!("    ; error: {msg}\n"));
                }
            }
        }
        out
    }
}
