//! Integration tests of the interpreter: one test binary, one module per
//! area. Every function is built with `adze_ir::FuncBuilder`, and every
//! expected value is worked out by hand (or, for intrinsics, is the value
//! `adze_ir::semantics` defines).

mod arrays;
mod calls;
mod control;
mod scalar;
mod tape;
mod traps;
mod util;
