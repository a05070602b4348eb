//! The adze IR: a small SSA intermediate representation with block parameters,
//! in the manner of Cranelift.
//!
//! - Entities ([`Value`], [`Block`], [`Inst`], [`FuncId`], [`Region`]) are
//!   `u32` newtypes indexing arenas (`cranelift-entity`).
//! - A [`Function`] keeps what instructions are ([`DataFlowGraph`]) apart from
//!   where they are ([`Layout`]), plus its signature and metadata
//!   ([`FuncMeta`]: inline hint, custom rules), its rule regions and the
//!   provenance of its inlined code ([`InlinedData`]).
//! - Instructions may carry a [`SourceLoc`] (line and column), in a side
//!   table of the data-flow graph; a [`Module`] names its source file
//!   ([`srcloc`]).
//! - A [`Module`] holds functions in a deterministic (creation) order.
//! - [`semantics`] defines every scalar operation once; [`runtime`] holds the
//!   values and errors every executor shares.
//! - The text format: `Display` prints ([`write`](mod@write)), [`parse`] reads it back;
//!   print → parse → print is the identity.
//! - [`verify`] checks every invariant listed in its module doc.
//! - [`mod@cfg`] (successors, reverse postorder, dominators, natural loops) and [`bounds`]
//!   (the accesses a counted loop proves in bounds) are the analyses that
//!   several later crates share.
//! - [`names`] reads the names of generated functions and arrays back into
//!   the user's terms, for error messages (a naming convention the AD passes
//!   follow and document, not a dependency on them).
//!
//! Architecture invariant: this crate knows nothing of the `.adz` language,
//! of the AD passes or of the JIT.

pub mod bounds;
pub mod builder;
pub mod cfg;
pub mod dfg;
pub mod entities;
pub mod function;
pub mod instructions;
pub mod layout;
pub mod module;
pub mod names;
pub mod parse;
pub mod runtime;
pub mod semantics;
pub mod srcloc;
pub mod types;
pub mod verify;
pub mod write;

pub use builder::FuncBuilder;
pub use dfg::{BlockData, DataFlowGraph, ValueDef};
pub use entities::{Block, FuncId, Inlined, Inst, Region, Value};
pub use function::{
    FuncMeta, Function, InlineHint, InlinedData, Param, RegionData, Rules, Signature,
};
pub use instructions::{
    ArgActivity, AutodiffSpec, BlockCall, CmpCond, Cost, Effects, InstData, InstFormat, Mode,
    Opcode, RetActivity, MAX_TAPES,
};
pub use layout::Layout;
pub use module::Module;
pub use runtime::{Limits, Location, Outcome, RunError, TrapKind, Val, DEFAULT_MAX_CALL_DEPTH};
pub use srcloc::{InstMark, SourceLoc};
pub use types::Type;
