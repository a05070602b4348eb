//! adze's shared test support: IR filetests, expected files, and the one
//! bless mechanism. A dev-dependency only; never published.
//!
//! - [`filetest`]: a directory of data files, each one test in the manner
//!   of Cranelift's filetests — a `; test: <command> <args>` header, the
//!   input, comment directives, and the whole expected output after an
//!   output marker. [`filetest::run_filetests`] runs them all with a closure
//!   that turns a file into output text, and reports every failing file.
//! - [`filecheck`]: `check:`, `nextln:`, `sameln:`, `not:`, `label:` and
//!   `count N:` against an output text, in the manner of FileCheck.
//! - [`bless`]: expected text in a file (the whole file, or a part such as a
//!   filetest's output or a table in a document) is compared with the
//!   actual text; with `ADZE_BLESS=1` the file is rewritten instead and a
//!   unified diff of the change is printed. Every test of the workspace
//!   that holds expected output in a file goes through
//!   [`bless::expect_in_file`].
//! - [`examples`]: the programs of `ir-examples/` and their `run:` lines
//!   (`f(1.5, [1.0, 2.0]) == 2.5`), split into the function, the arguments
//!   and what they give.
//! - [`rng`]: the deterministic random source of the program generators.
//! - [`tokens`]: the pieces of the random source the robustness tests feed
//!   the front end.
//! - `ir` (feature `ir`): IR built by hand, each function declared by its
//!   header as the text format writes it; a counted loop, a one-result
//!   call, a recursive split.
//! - `adze` (feature `adze`): `compile(src)`, `parse`, `verify`, the
//!   print → parse → print round trip, float closeness, the values of
//!   `run:` lines typed by a signature.
//!
//! # Why the compiler helpers are behind a feature
//!
//! Dependencies flow one way: adze-ir ← adze-lang ← (adze-opt, adze-ad,
//! adze-interp, adze-jit, adze). The core of this crate (filetests,
//! filecheck, bless, diff, examples, rng, tokens) depends on no adze crate,
//! so adze-ir and adze-lang can use it for their own tests. `compile(src)`
//! needs adze-lang (and so adze-ir): if it were unconditional, adze-ir's
//! dev-dependency on this crate would make it depend on itself through
//! adze-lang, and its unit tests (the crate compiled with `--test`) would
//! link a second adze-ir whose types do not match the first. So the `adze`
//! module is behind the `adze` feature, which only crates downstream of
//! adze-lang enable (adze-opt, adze-ad, the `adze` facade), and the `ir`
//! module (which needs adze-ir only) behind the `ir` feature, which
//! adze-interp and adze-jit enable. adze-ir and adze-lang enable neither
//! and call neither; they keep the small front-end step they need in their
//! own tests (adze-lang's lowering filetests call `adze_lang::compile`
//! directly).
//!
//! (Cargo unifies features across one build, so in `cargo test --workspace`
//! the crate is built once, with the features on, for every user. That is
//! harmless: adze-ir's and adze-lang's tests use neither module,
//! so no value crosses between two copies of a crate; and `cargo test -p
//! adze-ir` builds no other adze crate.)
#![forbid(unsafe_code)]

pub mod bless;
pub mod diff;
pub mod examples;
pub mod filecheck;
pub mod filetest;
pub mod rng;
pub mod tokens;

#[cfg(feature = "adze")]
pub mod adze;
#[cfg(feature = "ir")]
pub mod ir;

pub use bless::{blessing, expect_file, expect_in_file};
pub use filetest::{run_filetests, Config, Directive, Failures, TestFile};
