//! Source locations of instructions.
//!
//! An instruction may carry the place in the source it was made from: a
//! 1-based line and column ([`SourceLoc`]). The IR knows nothing of the
//! language that produced it; a location is two numbers, and the module
//! names the file they refer to ([`crate::Module::source_file`], one file
//! per module). Locations are provenance, like [`crate::InlinedData`]: no
//! pass decides anything by them and the verifier does not check them; the
//! executors put them in their run-time errors.
//!
//! They live in a side table of the [`crate::DataFlowGraph`]
//! (`SecondaryMap<Inst, SourceLoc>`, as Cranelift keeps its `srclocs`), whose
//! default entry, [`SourceLoc::NONE`], means "no location". Passes that make
//! instructions out of others keep them:
//! - a copy of an instruction takes its location
//!   ([`crate::DataFlowGraph::copy_srcloc`], or `set_srcloc` across
//!   functions);
//! - code generated for one instruction (a derivative, a rewrite) takes that
//!   instruction's location: take an [`crate::DataFlowGraph::inst_mark`]
//!   before generating it and call
//!   [`crate::DataFlowGraph::set_srclocs_since`] after, which gives the
//!   location to every instruction made since that has none;
//! - a [`crate::FuncBuilder`] stamps its current location
//!   ([`crate::FuncBuilder::set_srcloc`]) on every instruction it builds.
//!
//! The text format writes a location after its instruction as `!LINE:COL`
//! (`v3 = load v0, v2 !4:13`) and nothing when there is none; the file is a
//! module directive, `source "t.adz"`, before the first function.

use std::fmt;

/// A 1-based line and column (in characters) of the source, or none.
///
/// Packed in two `u32`s; the default, `(0, 0)`, is [`SourceLoc::NONE`], so a
/// side table of locations costs nothing to fill with "none".
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceLoc {
    line: u32,
    col: u32,
}

impl SourceLoc {
    /// No location.
    pub const NONE: SourceLoc = SourceLoc { line: 0, col: 0 };

    /// Line `line`, column `col`, both counted from 1. A zero line or column
    /// is no location.
    pub fn new(line: u32, col: u32) -> SourceLoc {
        if line == 0 || col == 0 {
            SourceLoc::NONE
        } else {
            SourceLoc { line, col }
        }
    }

    /// Is this no location ([`SourceLoc::NONE`])?
    pub fn is_none(self) -> bool {
        self.line == 0
    }

    /// Is this a location (line and column from 1)?
    pub fn is_some(self) -> bool {
        !self.is_none()
    }

    /// `(line, col)`, or `None` for no location.
    pub fn expand(self) -> Option<(u32, u32)> {
        self.is_some().then_some((self.line, self.col))
    }

    /// The line (0 for no location).
    pub fn line(self) -> u32 {
        self.line
    }

    /// The column (0 for no location).
    pub fn col(self) -> u32 {
        self.col
    }

    /// `self`, or `other` when `self` is none.
    pub fn or(self, other: SourceLoc) -> SourceLoc {
        if self.is_some() {
            self
        } else {
            other
        }
    }
}

impl fmt::Display for SourceLoc {
    /// `LINE:COL`, or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.expand() {
            Some((line, col)) => write!(f, "{line}:{col}"),
            None => f.write_str("none"),
        }
    }
}

/// A number of instructions of a function, taken before generating code, so
/// that [`crate::DataFlowGraph::set_srclocs_since`] can find the instructions
/// made since (instructions are numbered in creation order).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct InstMark(pub(crate) usize);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_is_the_default_and_zero_is_none() {
        assert_eq!(SourceLoc::default(), SourceLoc::NONE);
        assert!(SourceLoc::new(0, 3).is_none());
        assert!(SourceLoc::new(3, 0).is_none());
        assert_eq!(SourceLoc::new(3, 14).expand(), Some((3, 14)));
        assert_eq!(SourceLoc::new(3, 14).to_string(), "3:14");
        assert_eq!(
            SourceLoc::NONE.or(SourceLoc::new(1, 2)),
            SourceLoc::new(1, 2)
        );
        assert_eq!(
            SourceLoc::new(5, 1).or(SourceLoc::new(1, 2)),
            SourceLoc::new(5, 1)
        );
    }
}
