//! Functions, their signatures and their metadata.

use crate::dfg::{DataFlowGraph, ValueDef};
use crate::entities::{Block, FuncId, Region, Value};
use crate::instructions::{InstData, Mode};
use crate::layout::Layout;
use crate::types::Type;
use cranelift_entity::PrimaryMap;

/// A named parameter. `mutable` is meaningful for arrays only: a function may
/// store to an array parameter only if it is `mutable` (`mut [f64]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Param {
    pub name: String,
    pub ty: Type,
    pub mutable: bool,
}

impl Param {
    pub fn new(name: impl Into<String>, ty: Type) -> Param {
        Param {
            name: name.into(),
            ty,
            mutable: false,
        }
    }

    pub fn mutable_array(name: impl Into<String>) -> Param {
        Param {
            name: name.into(),
            ty: Type::Array,
            mutable: true,
        }
    }
}

/// Parameters and result types of a function. Results are scalars.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Signature {
    pub params: Vec<Param>,
    pub results: Vec<Type>,
}

impl Signature {
    pub fn param_types(&self) -> impl Iterator<Item = Type> + '_ {
        self.params.iter().map(|p| p.ty)
    }
}

/// The inliner's hint for a function (`#[inline(always)]`, `#[inline(never)]`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum InlineHint {
    #[default]
    Auto,
    Always,
    Never,
}

impl InlineHint {
    pub fn name(self) -> &'static str {
        match self {
            InlineHint::Auto => "auto",
            InlineHint::Always => "always",
            InlineHint::Never => "never",
        }
    }

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
    pub forward: Option<FuncId>,
    pub reverse: Option<FuncId>,
}

impl Rules {
    pub fn get(&self, mode: Mode) -> Option<FuncId> {
        match mode {
            Mode::Forward => self.forward,
            Mode::Reverse => self.reverse,
        }
    }

    pub fn set(&mut self, mode: Mode, rule: Option<FuncId>) {
        match mode {
            Mode::Forward => self.forward = rule,
            Mode::Reverse => self.reverse = rule,
        }
    }

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
    pub inline: InlineHint,
    pub rules: Rules,
}

/// Provenance of inlined code whose callee carries rules: the inlined body
/// behaves, for every AD pass, exactly like `call callee(args) -> results`
/// with the callee's rules. Filled in by the inliner (see the rules issue);
/// nothing else creates regions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionData {
    pub callee: FuncId,
    pub rules: Rules,
    pub args: Vec<Value>,
    pub results: Vec<Value>,
    /// The blocks of the inlined body, entry first.
    pub blocks: Vec<Block>,
    /// The enclosing region, when a region was inlined into another callee
    /// that was itself inlined.
    pub parent: Option<Region>,
}

/// A function: signature, body and metadata.
///
/// The entry block is the first block of the layout; its parameters are the
/// function's parameters, in order, with the signature's types.
#[derive(Clone, Debug, Default)]
pub struct Function {
    pub name: String,
    pub sig: Signature,
    pub meta: FuncMeta,
    pub dfg: DataFlowGraph,
    pub layout: Layout,
    pub regions: PrimaryMap<Region, RegionData>,
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

    /// A declared function has no body yet.
    pub fn is_declaration(&self) -> bool {
        self.layout.entry_block().is_none()
    }

    pub fn entry_block(&self) -> Option<Block> {
        self.layout.entry_block()
    }

    /// The values of the function's parameters (the entry block's parameters).
    pub fn params(&self) -> &[Value] {
        match self.entry_block() {
            Some(b) => self.dfg.block_params(b),
            None => &[],
        }
    }

    /// The source-level name of an array value, for error messages: the
    /// parameter name, the `zeros` name, or `vN`.
    pub fn array_name(&self, v: Value) -> String {
        match self.dfg.value_def(v) {
            ValueDef::Param { block, num } if Some(*block) == self.entry_block() => self
                .sig
                .params
                .get(*num)
                .map_or_else(|| v.to_string(), |p| p.name.clone()),
            ValueDef::Result { inst, .. } => match self.dfg.inst(*inst) {
                InstData::Zeros { name, .. } => name.clone(),
                _ => v.to_string(),
            },
            _ => v.to_string(),
        }
    }

    /// Is `v` an array this function may write: a `mut` parameter or a
    /// local `zeros` array?
    pub fn array_is_writable(&self, v: Value) -> bool {
        match self.dfg.value_def(v) {
            ValueDef::Param { block, num } if Some(*block) == self.entry_block() => {
                self.sig.params.get(*num).is_some_and(|p| p.mutable)
            }
            ValueDef::Result { inst, .. } => matches!(self.dfg.inst(*inst), InstData::Zeros { .. }),
            _ => false,
        }
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
