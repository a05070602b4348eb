//! IR-to-IR passes of adze that are not AD. For now: the rule-preserving
//! inliner ([`inline`]).
//!
//! Each pass is a free function over a [`adze_ir::Module`]. The inliner
//! replaces calls by the callee's body and, when the callee carries custom
//! derivative rules, records the body as a rule region, so that inlining
//! never changes a derivative:
//!
//! ```text
//! ; before                                ; after
//! function @f(x: f64) -> f64 {            function @f(x: f64) -> f64 {
//! block0(v0: f64):                            region0: @sq(v0) -> (v1) blocks(block2) rules(forward: @sq.fwd)
//!     v1 = call @sq(v0)                   block0(v0: f64):
//!     return v1                               jump block2
//! }                                       block2:
//!                                             v2 = fmul v0, v0
//!                                             jump block1(v2)
//!                                         block1(v1: f64):
//!                                             return v1
//!                                         }
//! ```
//!
//! See `docs/inliner.md` for the policy, the budget, recursion and regions.

pub mod inline;

pub use inline::{
    inline_functions, inline_module, DefaultPolicy, InlinePolicy, InlineStats, DEFAULT_BUDGET,
    MAX_FUNCTION_INSTS,
};
