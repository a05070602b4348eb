//! Functions, their signatures and their metadata.

use crate::dfg::{DataFlowGraph, ValueDef};
use crate::entities::{Block, FuncId, Inlined, Inst, Region, Value};
use crate::instructions::{InstData, Mode, Opcode};
use crate::layout::Layout;
use crate::types::Type;
use cranelift_entity::PrimaryMap;

/// A named parameter. `mutable` is meaningful for arrays only: a function may
/// store to an array parameter only if it is `mutable` (`mut [f64]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Param {
    /// The parameter's name, as printed in the signature.
    pub name: String,
    /// Its type.
    pub ty: Type,
    /// May the function write it? Only arrays may be `mutable`.
    pub mutable: bool,
}

impl Param {
    /// A parameter that is not `mutable`.
    pub fn new(name: impl Into<String>, ty: Type) -> Param {
        Param {
            name: name.into(),
            ty,
            mutable: false,
        }
    }

    /// A `mut arr` parameter: an array the function may write.
    pub fn mutable_array(name: impl Into<String>) -> Param {
        Param {
            name: name.into(),
            ty: Type::Array,
            mutable: true,
        }
    }
}

/// Parameters and result types of a function. A result may be an array:
/// the caller then owns it (`return` gives only arrays the function owns,
/// [`Function::owns_array`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Signature {
    /// The parameters, in order.
    pub params: Vec<Param>,
    /// The result types, in order (empty for none).
    pub results: Vec<Type>,
}

impl Signature {
    /// The types of the parameters, in order.
    pub fn param_types(&self) -> impl Iterator<Item = Type> + '_ {
        self.params.iter().map(|p| p.ty)
    }

    /// The differentiable results (`f64` and `arr`), in order, by number:
    /// those with a tangent in forward mode and a cotangent in reverse mode.
    pub fn differentiable_results(&self) -> impl Iterator<Item = (usize, Type)> + '_ {
        self.results
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, t)| matches!(t, Type::F64 | Type::Array))
    }
}

/// The inliner's hint for a function (`#[inline(always)]`, `#[inline(never)]`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum InlineHint {
    /// No hint: the inliner's policy decides (not printed).
    #[default]
    Auto,
    /// `inline(always)`.
    Always,
    /// `inline(never)`.
    Never,
}

impl InlineHint {
    /// The text-format word: `auto`, `always` or `never`.
    pub fn name(self) -> &'static str {
        match self {
            InlineHint::Auto => "auto",
            InlineHint::Always => "always",
            InlineHint::Never => "never",
        }
    }

    /// Parses `auto`, `always` or `never`; `None` otherwise.
    pub fn from_name(s: &str) -> Option<InlineHint> {
        Some(match s {
            "auto" => InlineHint::Auto,
            "always" => InlineHint::Always,
            "never" => InlineHint::Never,
            _ => return None,
        })
    }
}

/// The custom derivative rules of a function. Each rule is an ordinary
/// function of the module; its signature is fixed by the owner's (see
/// `docs/ir.md`, "Rules").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Rules {
    /// The forward rule, if any.
    pub forward: Option<FuncId>,
    /// The reverse rule, if any.
    pub reverse: Option<FuncId>,
}

impl Rules {
    /// The rule for `mode`, if any.
    pub fn get(&self, mode: Mode) -> Option<FuncId> {
        match mode {
            Mode::Forward => self.forward,
            Mode::Reverse => self.reverse,
        }
    }

    /// Sets (or, with `None`, removes) the rule for `mode`.
    pub fn set(&mut self, mode: Mode, rule: Option<FuncId>) {
        match mode {
            Mode::Forward => self.forward = rule,
            Mode::Reverse => self.reverse = rule,
        }
    }

    /// Has the function no rule at all?
    pub fn is_empty(&self) -> bool {
        self.forward.is_none() && self.reverse.is_none()
    }

    /// `(mode, rule)` pairs that are present, forward first.
    pub fn iter(&self) -> impl Iterator<Item = (Mode, FuncId)> {
        [(Mode::Forward, self.forward), (Mode::Reverse, self.reverse)]
            .into_iter()
            .filter_map(|(m, r)| r.map(|r| (m, r)))
    }
}

/// Metadata carried by a function: it lives in the IR, is printed in the text
/// format and survives every pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FuncMeta {
    /// The inliner's hint.
    pub inline: InlineHint,
    /// The custom derivative rules.
    pub rules: Rules,
}

/// Provenance of inlined code whose callee carries rules: the inlined body
/// behaves, for every AD pass, exactly like `call callee(args) -> results`
/// with the callee's rules. Filled in by the inliner (see the rules issue);
/// nothing else creates regions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionData {
    /// The function that was inlined.
    pub callee: FuncId,
    /// The callee's rules, which the AD passes apply to the region.
    pub rules: Rules,
    /// The argument values of the inlined call, one per callee parameter.
    pub args: Vec<Value>,
    /// The values that stand for the call's results, one per callee result.
    pub results: Vec<Value>,
    /// The blocks of the inlined body, entry first.
    pub blocks: Vec<Block>,
    /// The enclosing region, when a region was inlined into another callee
    /// that was itself inlined.
    pub parent: Option<Region>,
}

/// Provenance of inlined code: the blocks the inliner copied from a call to
/// `callee`. Recorded for every inlined call, with or without rules (a
/// callee with rules also gets a [`RegionData`], which is semantics; this is
/// not). No pass reads it to decide anything: executors use it to name the
/// function a fault came from, and it may be dropped without changing what
/// the code means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlinedData {
    /// The name of the inlined function (a name, not a [`FuncId`]: it stays
    /// meaningful when the callee is later removed from the module or the
    /// function is moved to another module).
    pub callee: String,
    /// The blocks of the inlined body, entry first, in the order they were
    /// laid out; blocks of code inlined into it later (nested entries)
    /// included. Blocks that a pass removed from the layout may remain
    /// listed (they must still exist).
    pub blocks: Vec<Block>,
    /// The enclosing entry, when the call was itself inside inlined code.
    pub parent: Option<Inlined>,
}

/// Comments about a function's code, by instruction and by block
/// ([`Function::notes`], and what `adze dump --annotate` computes).
#[derive(Clone, Debug, Default)]
pub struct Notes {
    /// Printed at the end of the instruction's line: `; note; note`.
    pub insts: std::collections::BTreeMap<Inst, Vec<String>>,
    /// Printed on lines of their own after the block's header.
    pub blocks: std::collections::BTreeMap<Block, Vec<String>>,
}

impl Notes {
    /// Adds a note to instruction `inst`.
    pub fn inst(&mut self, inst: Inst, note: impl Into<String>) {
        self.insts.entry(inst).or_default().push(note.into());
    }

    /// Adds a note to block `block`.
    pub fn block(&mut self, block: Block, note: impl Into<String>) {
        self.blocks.entry(block).or_default().push(note.into());
    }

    /// Adds every note of `other` after this one's.
    pub fn extend(&mut self, other: &Notes) {
        for (&i, ns) in &other.insts {
            self.insts.entry(i).or_default().extend(ns.iter().cloned());
        }
        for (&b, ns) in &other.blocks {
            self.blocks.entry(b).or_default().extend(ns.iter().cloned());
        }
    }

    /// Are there no notes?
    pub fn is_empty(&self) -> bool {
        self.insts.is_empty() && self.blocks.is_empty()
    }
}

/// A function: signature, body and metadata.
///
/// The entry block is the first block of the layout; its parameters are the
/// function's parameters, in order, with the signature's types.
#[derive(Clone, Debug, Default)]
pub struct Function {
    /// The name, without the `@`: `[A-Za-z0-9_.]+`, unique in its module
    /// (the module indexes it; see [`crate::Module::func_mut`]).
    pub name: String,
    /// Parameters and result types.
    pub sig: Signature,
    /// Inline hint and rules.
    pub meta: FuncMeta,
    /// What the instructions, values and blocks are.
    pub dfg: DataFlowGraph,
    /// Where the blocks and instructions are.
    pub layout: Layout,
    /// The rule regions: inlined calls of functions with rules (semantics;
    /// see [`RegionData`]).
    pub regions: PrimaryMap<Region, RegionData>,
    /// Where inlined code came from (provenance; see [`InlinedData`]).
    pub inlined: PrimaryMap<Inlined, InlinedData>,
    /// What passes say about their code for a reader (the tape plan of a
    /// reverse derivative: what each push saves, what each reverse block
    /// pops and recomputes). Printed only by `adze dump --annotate`, as
    /// comments, so never parsed, compared or verified; a pass that removes
    /// an instruction may leave its note behind (it is not printed).
    pub notes: Notes,
    /// For a forward derivative, the tangents (one per lane) its pass gave
    /// each value of the primal, by the primal's number (which the
    /// derivative keeps): provenance, like `inlined`, never printed. The
    /// AD pass reads it to follow a value of a checkpoint runner's forward
    /// derivative to its counterpart in the augmented primal's.
    pub tangents: Vec<(Value, Vec<Value>)>,
    /// For a copy a pass made of another function to specialize it (the
    /// optimizer's `touch`): the name run-time errors give it, the
    /// original's, so that an error reads the same whether the copy runs or
    /// the original does ([`Function::error_name`]). Provenance, like
    /// `inlined`: never printed.
    pub reports_as: Option<String>,
}

impl Function {
    /// An empty function: no blocks yet (a declaration).
    pub fn new(name: impl Into<String>, sig: Signature) -> Function {
        Function {
            name: name.into(),
            sig,
            ..Function::default()
        }
    }

    /// The name run-time errors in this function's code give it: its own,
    /// or the original's for a specialized copy (`reports_as`).
    pub fn error_name(&self) -> &str {
        self.reports_as.as_deref().unwrap_or(&self.name)
    }

    /// A declared function has no body yet.
    pub fn is_declaration(&self) -> bool {
        self.layout.entry_block().is_none()
    }

    /// The entry block: the first of the layout; `None` for a declaration.
    pub fn entry_block(&self) -> Option<Block> {
        self.layout.entry_block()
    }

    /// The block that defines `v` (its instruction's block, or the block it
    /// is a parameter of), if `v` is valid and placed.
    pub fn def_block(&self, v: Value) -> Option<Block> {
        if !self.dfg.value_is_valid(v) {
            return None;
        }
        match *self.dfg.value_def(v) {
            ValueDef::Result { inst, .. } => self.layout.inst_block(inst),
            ValueDef::Param { block, .. } => Some(block),
            ValueDef::Detached => None,
        }
    }

    /// The functions this one refers to: its rules, then in layout order
    /// the callees of its calls and the targets of its `autodiff`
    /// requests, then each rule region's callee and rules.
    pub fn referenced_functions(&self) -> Vec<FuncId> {
        let mut out: Vec<FuncId> = self.meta.rules.iter().map(|(_, r)| r).collect();
        for (_, inst) in self.layout.insts() {
            match self.dfg.inst(inst) {
                InstData::Call { func, .. } => out.push(*func),
                InstData::Autodiff { spec, .. } => out.push(spec.func),
                _ => {}
            }
        }
        for r in self.regions.values() {
            out.push(r.callee);
            out.extend(r.rules.iter().map(|(_, r)| r));
        }
        out
    }

    /// The value of `v` if it is the result of an `iconst`.
    pub fn iconst_value(&self, v: Value) -> Option<i64> {
        match self.def_inst(v)? {
            InstData::IConst { imm } => Some(*imm),
            _ => None,
        }
    }

    /// The instruction that defines `v`, if `v` is an instruction's result
    /// (not a block parameter, detached or invalid).
    pub fn def_inst(&self, v: Value) -> Option<&InstData> {
        if !self.dfg.value_is_valid(v) {
            return None;
        }
        match *self.dfg.value_def(v) {
            ValueDef::Result { inst, .. } => Some(self.dfg.inst(inst)),
            _ => None,
        }
    }

    /// The values of the function's parameters (the entry block's parameters).
    pub fn params(&self) -> &[Value] {
        match self.entry_block() {
            Some(b) => self.dfg.block_params(b),
            None => &[],
        }
    }

    /// The source-level name of an array value, for error messages: the
    /// parameter name, the `zeros` name, `a[..]` for a view of `a`, or `vN`.
    pub fn array_name(&self, v: Value) -> String {
        match self.dfg.value_def(v) {
            ValueDef::Param { block, num } if Some(*block) == self.entry_block() => self
                .sig
                .params
                .get(*num)
                .map_or_else(|| v.to_string(), |p| p.name.clone()),
            ValueDef::Result { inst, .. } => match self.dfg.inst(*inst) {
                InstData::Zeros { name, .. } => name.clone(),
                _ => match self.slice_of(v) {
                    Some(a) => format!("{}[..]", self.array_name(a)),
                    None => v.to_string(),
                },
            },
            _ => v.to_string(),
        }
    }

    /// The array `v` is a view of, when `v` is the result of a `slice`.
    pub fn slice_of(&self, v: Value) -> Option<Value> {
        self.slice_parts(v).map(|[a, _, _]| a)
    }

    /// The operands `[array, lo, hi]` of the `slice` that defines `v`.
    pub fn slice_parts(&self, v: Value) -> Option<[Value; 3]> {
        match self.dfg.value_def(v) {
            ValueDef::Result { inst, .. } => match self.dfg.inst(*inst) {
                InstData::Ternary {
                    op: Opcode::Slice | Opcode::View,
                    args,
                } => Some(*args),
                _ => None,
            },
            _ => None,
        }
    }

    /// The array whose memory `v` views: `v` itself unless it is a `slice`
    /// (of a slice ..) of another array. Two array values may share
    /// elements only if they have the same root; a root is an entry-block
    /// parameter or an array the function owns ([`Function::owns_array`]).
    pub fn array_root(&self, mut v: Value) -> Value {
        // Bounded: malformed IR (before verification) may slice a value of
        // itself.
        for _ in 0..self.dfg.num_values() {
            match self.slice_of(v) {
                Some(a) => v = a,
                None => break,
            }
        }
        v
    }

    /// Is `v` an array this function may write: a `mut` parameter, an
    /// array it owns, or a view of one?
    pub fn array_is_writable(&self, v: Value) -> bool {
        let v = self.array_root(v);
        match self.dfg.value_def(v) {
            ValueDef::Param { block, num } if Some(*block) == self.entry_block() => {
                self.sig.params.get(*num).is_some_and(|p| p.mutable)
            }
            _ => self.owns_array(v),
        }
    }

    /// Is `v` an array this function owns: made by `zeros`/`izeros`, or
    /// an array result of a `call` or an `autodiff` request (the callee
    /// hands it over)? Only these may be returned, and each at most once
    /// per `return`; a view or a parameter is copied first.
    pub fn owns_array(&self, v: Value) -> bool {
        match self.dfg.value_def(v) {
            ValueDef::Result { inst, .. } => {
                self.dfg.value_type(v).is_array()
                    && matches!(
                        self.dfg.inst(*inst),
                        InstData::Zeros { .. } | InstData::Call { .. } | InstData::Autodiff { .. }
                    )
            }
            _ => false,
        }
    }

    /// The innermost inlined body that lists `block`, if any: among the
    /// entries listing it, the one with the most parents.
    pub fn innermost_inlined(&self, block: Block) -> Option<Inlined> {
        self.inlined
            .iter()
            .filter(|(_, d)| d.blocks.contains(&block))
            .map(|(i, _)| i)
            .max_by_key(|&i| (self.inlined_depth(i), i))
    }

    /// The number of parents above `i` (bounded, so that a malformed parent
    /// cycle cannot loop).
    pub fn inlined_depth(&self, i: Inlined) -> usize {
        let mut depth = 0;
        let mut cur = self.inlined.get(i).and_then(|d| d.parent);
        while let Some(p) = cur {
            depth += 1;
            if depth > self.inlined.len() {
                break;
            }
            cur = self.inlined.get(p).and_then(|d| d.parent);
        }
        depth
    }

    /// [`Function::innermost_inlined`] for every block at once, indexed by
    /// block number (for executors that look up many blocks).
    pub fn innermost_inlined_by_block(&self) -> Vec<Option<Inlined>> {
        let mut owner: Vec<Option<(usize, Inlined)>> = vec![None; self.dfg.num_blocks()];
        for (i, d) in self.inlined.iter() {
            let key = (self.inlined_depth(i), i);
            for &b in &d.blocks {
                if let Some(slot) = owner.get_mut(b.as_u32() as usize) {
                    if slot.is_none_or(|k| k < key) {
                        *slot = Some(key);
                    }
                }
            }
        }
        owner.into_iter().map(|o| o.map(|(_, i)| i)).collect()
    }

    /// The callees of entry `i` and of its parents, innermost first.
    pub fn inlined_callees(&self, i: Inlined) -> Vec<String> {
        let mut chain = Vec::new();
        let mut cur = Some(i);
        while let Some(i) = cur {
            let Some(d) = self.inlined.get(i) else { break };
            if chain.len() > self.inlined.len() {
                break;
            }
            chain.push(d.callee.clone());
            cur = d.parent;
        }
        chain
    }

    /// The functions whose inlined code `block` belongs to, innermost first
    /// (the callee of the innermost entry listing it, then its parent's,
    /// ...); empty when the block is the function's own code.
    pub fn inlined_chain(&self, block: Block) -> Vec<String> {
        self.innermost_inlined(block)
            .map_or_else(Vec::new, |i| self.inlined_callees(i))
    }

    /// Removes parameter `num` of `block`, and the corresponding argument
    /// of every branch to `block` among the placed instructions; returns the
    /// removed parameter, now detached. Its uses are the caller's business.
    ///
    /// Panics if `block` is the entry block (its parameters are the
    /// signature's) or has no parameter `num`.
    pub fn remove_block_param(&mut self, block: Block, num: usize) -> Value {
        assert!(
            Some(block) != self.entry_block(),
            "the entry block's parameters are the signature"
        );
        let v = self.dfg.block_params(block)[num];
        self.retain_block_params(|b, p| b != block || p != v);
        v
    }

    /// Removes, in one sweep over the function, every parameter `p` of a
    /// block `b` other than the entry block for which `keep(b, p)` is false,
    /// together with the corresponding argument of every branch to `b` among
    /// the placed instructions; returns the number of parameters removed.
    /// The removed parameters are detached; their uses are the caller's
    /// business. The entry block's parameters (the signature) are never
    /// removed: `keep` is not asked about them.
    pub fn retain_block_params(&mut self, mut keep: impl FnMut(Block, Value) -> bool) -> usize {
        let entry = self.entry_block();
        // Per block with a removal, which parameters stay.
        let mut masks: std::collections::HashMap<Block, Vec<bool>> = Default::default();
        for &b in self.layout.blocks() {
            if Some(b) == entry {
                continue;
            }
            let mask: Vec<bool> = self
                .dfg
                .block_params(b)
                .iter()
                .map(|&p| keep(b, p))
                .collect();
            if mask.contains(&false) {
                masks.insert(b, mask);
            }
        }
        if masks.is_empty() {
            return 0;
        }
        let insts: Vec<Inst> = self.layout.insts().map(|(_, i)| i).collect();
        for inst in insts {
            for dest in self.dfg.inst_mut(inst).destinations_mut() {
                if let Some(mask) = masks.get(&dest.block) {
                    let mut k = 0;
                    dest.args.retain(|_| {
                        k += 1;
                        mask.get(k - 1).copied().unwrap_or(true)
                    });
                }
            }
        }
        let mut removed = 0;
        for (&b, mask) in &masks {
            for num in (0..mask.len()).rev() {
                if !mask[num] {
                    self.dfg.remove_block_param(b, num);
                    removed += 1;
                }
            }
        }
        removed
    }

    /// Number of instructions placed in the layout.
    pub fn num_placed_insts(&self) -> usize {
        self.layout
            .blocks()
            .iter()
            .map(|&b| self.layout.block_insts(b).len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use crate::parse::parse_module;
    use crate::verify::verify_module;

    const LOOP: &str = "function @f(n: i64) -> i64 {
block0(v0: i64):
    v1 = iconst 0
    v2 = fconst 1.0
    jump block1(v1, v2, v1)
block1(v3: i64, v4: f64, v5: i64):
    v6 = icmp lt v3, v0
    brif v6, block2, block3(v4, v5)
block2:
    v7 = iconst 1
    v8 = iadd v3, v7
    v9 = fadd v4, v4
    v10 = iadd v5, v7
    jump block1(v8, v9, v10)
block3(v11: f64, v12: i64):
    return v12
}
";

    #[test]
    fn remove_block_param_updates_every_branch() {
        let mut m = parse_module(LOOP).unwrap();
        let id = m.get("f").unwrap();
        let f = m.func_mut(id);
        let (b1, b3) = (f.layout.blocks()[1], f.layout.blocks()[3]);
        // block1's f64 parameter, then block3's.
        let v4 = f.remove_block_param(b1, 1);
        assert_eq!(v4.to_string(), "v4");
        assert_eq!(*f.dfg.value_def(v4), crate::ValueDef::Detached);
        f.remove_block_param(b3, 0);
        let v5 = f.dfg.block_params(b1)[1];
        assert_eq!(
            *f.dfg.value_def(v5),
            crate::ValueDef::Param { block: b1, num: 1 }
        );
        // The uses of v4 in the (now dead) fadd are the caller's business.
        let fadd = f.layout.block_insts(f.layout.blocks()[2])[2];
        f.layout.remove_inst(fadd);
        verify_module(&m).unwrap_or_else(|e| panic!("{e}"));
        let text = m.to_string();
        assert!(text.contains("jump block1(v1, v1)"), "{text}");
        assert!(text.contains("block1(v3: i64, v5: i64):"), "{text}");
        assert!(text.contains("brif v6, block2, block3(v5)"), "{text}");
        assert!(text.contains("jump block1(v8, v10)"), "{text}");
        assert!(text.contains("block3(v12: i64):"), "{text}");
    }

    #[test]
    fn retain_block_params_never_touches_the_entry() {
        let mut m = parse_module(LOOP).unwrap();
        let id = m.get("f").unwrap();
        let f = m.func_mut(id);
        let fadd = f.layout.block_insts(f.layout.blocks()[2])[2];
        f.layout.remove_inst(fadd);
        // Everything but v3 and v5 (and the entry's v0, never asked).
        let names = |v: crate::Value| v.to_string();
        let removed = f.retain_block_params(|_, p| {
            assert_ne!(names(p), "v0");
            matches!(names(p).as_str(), "v3" | "v5" | "v12")
        });
        assert_eq!(removed, 2);
        verify_module(&m).unwrap_or_else(|e| panic!("{e}"));
        let text = m.to_string();
        assert!(text.contains("block0(v0: i64):"), "{text}");
        assert!(text.contains("jump block1(v8, v10)"), "{text}");
        assert!(text.contains("brif v6, block2, block3(v5)"), "{text}");
    }
}
