//! Integration tests of the inliner (one test binary).

mod examples;
mod generated;
mod snapshots;
mod support;
