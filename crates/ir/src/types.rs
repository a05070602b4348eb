//! Value types of the IR.

use std::fmt;

/// The type of an SSA value.
///
/// Arrays (`f64` arrays, and `i64` arrays) are passed by reference as
/// (pointer, length) of 8-byte cells; whether a
/// function may write an array parameter is part of its [`crate::Signature`],
/// not of the value's type. Array values only ever come from entry-block
/// parameters and `zeros`: they never flow through other block parameters, so
/// every array value dominates all its uses (the verifier checks this).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// An IEEE 754 double (`f64`).
    F64,
    /// A two's-complement 64-bit integer (`i64`); `+ - *` wrap.
    I64,
    /// A comparison result or branch condition (`bool`).
    Bool,
    /// An `f64` array, passed by reference (`arr`).
    Array,
    /// An `i64` array, passed by reference (`iarr`): indices and other
    /// integer data. Never differentiated (no shadow, never active).
    IArray,
    /// Two `f64` lanes (`f64x2`): the values of the optimizer's two-lane
    /// loops (`adze_opt`'s `vectorize`), lane 0 and lane 1. Only inside a
    /// function's body: never a parameter, a result, an argument or a
    /// tape entry, and never seen by the AD passes (which run before the
    /// optimizer makes them).
    F64x2,
}

impl Type {
    /// The keyword of the text format.
    pub fn name(self) -> &'static str {
        match self {
            Type::F64 => "f64",
            Type::I64 => "i64",
            Type::Bool => "bool",
            Type::Array => "arr",
            Type::IArray => "iarr",
            Type::F64x2 => "f64x2",
        }
    }

    /// Parses a text-format type keyword.
    pub fn from_name(s: &str) -> Option<Type> {
        Some(match s {
            "f64" => Type::F64,
            "i64" => Type::I64,
            "bool" => Type::Bool,
            "arr" => Type::Array,
            "iarr" => Type::IArray,
            "f64x2" => Type::F64x2,
            _ => return None,
        })
    }

    /// Is this an `f64`, `i64` or `bool` (anything but an array)?
    pub fn is_scalar(self) -> bool {
        !self.is_array()
    }

    /// The type with its article, as messages name a value of it: "an
    /// f64", "an i64", "a bool", "an array", "an i64 array".
    pub fn a(self) -> &'static str {
        match self {
            Type::F64 => "an f64",
            Type::I64 => "an i64",
            Type::Bool => "a bool",
            Type::Array => "an array",
            Type::IArray => "an i64 array",
            Type::F64x2 => "an f64x2",
        }
    }

    /// Is this an array type (`arr` or `iarr`)?
    pub fn is_array(self) -> bool {
        matches!(self, Type::Array | Type::IArray)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
