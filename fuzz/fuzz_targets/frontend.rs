//! Arbitrary bytes into the front end: `adze_lang::compile_bytes` returns a
//! module or diagnostics (which must render), never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::frontend(data);
});
