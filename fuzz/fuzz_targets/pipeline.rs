//! Arbitrary bytes through the whole pipeline: compile, lower the AD
//! requests as the `adze` facade does, and run every function that is
//! certain to stop quickly on the JIT and on the interpreter with small fixed
//! arguments; the two must agree bit for bit (or fail with the same error).
//! See `fuzz/harness.rs` for how runs are bounded.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    // Inputs beyond 16 KiB only slow the search down.
    if data.len() <= 16 << 10 {
        harness::pipeline(data);
    }
});
