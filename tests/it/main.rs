//! The integration suite (one test binary, as rust-analyzer does): every
//! example through the interpreter and the JIT, IR snapshots, the command
//! line, run-time errors, and generated programs.

mod annotate;
mod array_results;
mod array_results_cli;
mod array_results_engines;
mod bounds_proofs;
mod check_inline;
mod checkpoint;
mod cli;
mod cli_data;
mod compiled;
mod examples;
mod forward;
mod generated;
mod generated_rules;
mod html;
mod inlining;
mod optimizer;
mod outsiders;
mod reverse;
mod robustness;
mod rule_matrix;
mod runtime_errors;
mod scale;
mod seed;
mod styles;
mod support;
mod verification;
mod views;
