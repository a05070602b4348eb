//! Integration tests of the forward pass: one binary (see `support` for the
//! helpers).

mod autodiff;
mod intrinsics;
mod programs;
mod snapshots;
mod support;
mod vector;
