//! Promotion of small local arrays to SSA values: the shape reverse mode
//! produces (adjoint slots and trip counts carried around a loop), what is
//! left alone, and equality with the interpreter before and after.

use crate::support::*;
use adze_ir::Val;
use adze_opt::promote::promote_arrays;

/// Promotes every function of `text` (see [`transform_and_compare`]);
/// returns the number of arrays promoted and the result's text.
fn promote_and_compare(text: &str, name: &str, inputs: &[Vec<Val>]) -> (usize, String) {
    let mut n = 0;
    let text = transform_and_compare(text, name, inputs, |f| n += promote_arrays(f));
    (n, text)
}

/// The adjoint of `s = Σ x[i]·c` as reverse mode emits it: the adjoint of
/// the loop-carried sum in slot 1, the trip count in `trips`, both loaded
/// and stored every iteration. Promoted, they are block parameters.
const LOOP: &str = include_str!("../data/promote/loop.ir");

#[test]
fn loop_carried_slots_become_block_parameters() {
    let inputs = vec![
        vec![
            Val::Array(vec![0.5, -1.5, 2.0]),
            Val::F64(0.25),
            Val::I64(3),
            Val::F64(1.0),
        ],
        vec![
            Val::Array(vec![1.0]),
            Val::F64(-0.0),
            Val::I64(0),
            Val::F64(-0.0),
        ],
        vec![
            Val::Array(vec![1.0, 2.0]),
            Val::F64(3.0),
            Val::I64(5),
            Val::F64(2.0),
        ],
    ];
    let (n, text) = promote_and_compare(LOOP, "f", &inputs);
    assert_eq!(n, 2);
    assert!(!text.contains("zeros"), "{text}");
    assert!(!text.contains("store"), "{text}");
    snapshot(
        "opt_promote_loop.ir",
        &format!("; input\n{LOOP}\n; promoted\n{text}"),
    );
}

#[test]
fn arrays_that_escape_or_have_computed_indices_are_left_alone() {
    let text = include_str!("../data/promote/escape_or_computed.ir");
    let inputs = vec![
        vec![Val::I64(1), Val::F64(2.5)],
        vec![Val::I64(7), Val::F64(2.5)],
    ];
    let (n, after) = promote_and_compare(text, "f", &inputs);
    // Only @g's... nothing: @g's array is a parameter.
    assert_eq!(n, 0, "{after}");
}

#[test]
fn zeros_in_a_loop_starts_again_from_zero_and_fill_defines_every_cell() {
    let text = include_str!("../data/promote/zeros_in_a_loop.ir");
    let inputs = vec![
        vec![Val::I64(0), Val::F64(1.5)],
        vec![Val::I64(4), Val::F64(-0.0)],
        vec![Val::I64(3), Val::F64(0.1)],
    ];
    let (n, after) = promote_and_compare(text, "f", &inputs);
    assert_eq!(n, 1, "{after}");
    assert!(!after.contains("zeros"), "{after}");
}
