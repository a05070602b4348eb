//! Entity references: small `u32` newtypes indexing the arenas of a function
//! or module.
//!
//! Each prints the way the text format writes it (`v3`, `block1`, `region0`,
//! `inlined0`)
//! and is only meaningful together with the [`crate::Function`] (or, for
//! [`FuncId`], the [`crate::Module`]) that owns its arena.

use cranelift_entity::entity_impl;

/// An SSA value: an instruction result or a block parameter.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value(u32);
entity_impl!(Value, "v");

/// A basic block. Blocks take parameters instead of phi nodes.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Block(u32);
entity_impl!(Block, "block");

/// An instruction. Instructions are not named in the text format; their
/// position in the layout identifies them.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Inst(u32);
entity_impl!(Inst, "inst");

/// A function of a [`crate::Module`]. Printed as `@name` in the text format.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuncId(u32);
entity_impl!(FuncId, "fn");

/// A rule region: code that the inliner copied from a callee carrying custom
/// derivative rules (see [`crate::RegionData`]).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Region(u32);
entity_impl!(Region, "region");

/// A record of inlined code: the blocks that the inliner copied from one
/// callee (see [`crate::InlinedData`]). Provenance only, never semantics.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Inlined(u32);
entity_impl!(Inlined, "inlined");
