//! Integration tests of the inliner and the optimizer (one test binary).

mod carry;
mod examples;
mod generated;
mod optimizer;
mod promote;
mod snapshots;
mod support;
mod version;
