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
const LOOP: &str = "function @f(x: arr, c: f64, n: i64, dret: f64) -> f64 {
block0(v0: arr, v1: f64, v2: i64, v3: f64):
    v4 = iconst 2
    v5 = zeros v4, \"adj\"
    v6 = fconst -0.0
    fill v5, v6
    v7 = iconst 1
    v8 = zeros v7, \"trips\"
    v9 = iconst 1
    v10 = load v5, v9
    v11 = fadd v10, v3
    store v5, v9, v11
    v12 = frombits v2
    v13 = iconst 0
    store v8, v13, v12
    jump block1
block1:
    v14 = iconst 0
    v15 = load v8, v14
    v30 = tobits v15
    v16 = iconst 0
    v17 = icmp eq v30, v16
    brif v17, block3, block2
block2:
    v18 = iconst 1
    v19 = isub v30, v18
    v31 = frombits v19
    store v8, v14, v31
    v21 = load v0, v19
    v22 = iconst 1
    v23 = load v5, v22
    v24 = fmul v21, v23
    v25 = iconst 0
    v26 = load v5, v25
    v27 = fadd v26, v24
    store v5, v25, v27
    jump block1
block3:
    v28 = iconst 0
    v29 = load v5, v28
    return v29
}
";

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
    let text = "function @f(i: i64, x: f64) -> f64 {
block0(v0: i64, v1: f64):
    v2 = iconst 3
    v3 = zeros v2, \"computed\"
    store v3, v0, v1
    v4 = iconst 1
    v5 = load v3, v4
    v6 = zeros v2, \"passed\"
    v7 = call @g(v6)
    v8 = zeros v2, \"out_of_range\"
    v9 = iconst 3
    v10 = load v8, v9
    v11 = zeros v2, \"length\"
    v12 = len v11
    v13 = fadd v5, v7
    v14 = fadd v13, v10
    return v14
}

function @g(a: arr) -> f64 {
block0(v0: arr):
    v1 = iconst 0
    v2 = load v0, v1
    return v2
}
";
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
    let text = "function @f(n: i64, x: f64) -> f64 {
block0(v0: i64, v1: f64):
    v2 = iconst 0
    v3 = fconst 0.0
    jump block1(v2, v3)
block1(v4: i64, v5: f64):
    v6 = icmp lt v4, v0
    brif v6, block2, block3
block2:
    v7 = iconst 2
    v8 = zeros v7, \"t\"
    v9 = iconst 1
    v10 = load v8, v9
    v11 = fadd v10, v1
    store v8, v9, v11
    v12 = load v8, v9
    v13 = fadd v5, v12
    fill v8, v13
    v14 = iconst 0
    v15 = load v8, v14
    v16 = iconst 1
    v17 = iadd v4, v16
    jump block1(v17, v15)
block3:
    return v5
}
";
    let inputs = vec![
        vec![Val::I64(0), Val::F64(1.5)],
        vec![Val::I64(4), Val::F64(-0.0)],
        vec![Val::I64(3), Val::F64(0.1)],
    ];
    let (n, after) = promote_and_compare(text, "f", &inputs);
    assert_eq!(n, 1, "{after}");
    assert!(!after.contains("zeros"), "{after}");
}
