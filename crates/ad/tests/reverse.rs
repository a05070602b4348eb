//! Integration tests of the reverse pass: one binary (see `reverse/support`
//! for the helpers).

mod reverse {
    pub mod examples;
    pub mod programs;
    pub mod support;
}
