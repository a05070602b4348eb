//! Integration tests of the inliner and the optimizer (one test binary).

mod carry;
mod examples;
mod filetests;
mod generated;
mod inliner;
mod optimizer;
mod promote;
mod support;
mod version;
