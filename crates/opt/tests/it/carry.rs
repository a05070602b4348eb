//! Loop-carried loads (`adze_opt::carry`): the read-modify-write at a fixed
//! index that reverse mode makes of an inner loop's invariant read, what is
//! left alone, and equality with the interpreter before and after, on
//! inputs that run the loop zero, one and several times and that trap at
//! different places.

use crate::support::*;
use adze_ir::Val;
use adze_opt::carry::{carry_loads, CarryStats};

/// Runs the pass on every function of `text` (see
/// [`transform_and_compare`]); returns the counts and the result's text.
fn carry_and_compare(text: &str, name: &str, inputs: &[Vec<Val>]) -> (CarryStats, String) {
    let mut stats = CarryStats::default();
    let text = transform_and_compare(text, name, inputs, |f| {
        let s = carry_loads(f);
        stats.loops += s.loops;
        stats.loads += s.loads;
    });
    (stats, text)
}

/// `for i in 0..n { acc[c] += x[i]; y[c] *= x[i]; }` then `acc[c]`: `acc`
/// is local (its store waits for the exit), `y` a parameter (its store
/// stays in the loop). `x[i]` traps when `n > len(x)`, before the loop's
/// first access to `acc[c]`, which traps when `c` is out of `0..4`.
const RMW: &str = "function @f(x: arr, y: mut arr, c: i64, n: i64) -> f64 {
block0(v0: arr, v1: arr, v2: i64, v3: i64):
    v4 = iconst 4
    v5 = zeros v4, \"acc\"
    v6 = iconst 0
    jump block1(v6)
block1(v7: i64):
    v8 = icmp lt v7, v3
    brif v8, block2, block3
block2:
    v9 = load v0, v7
    v10 = load v5, v2
    v11 = fadd v10, v9
    store v5, v2, v11
    v12 = load v1, v2
    v13 = fmul v12, v9
    store v1, v2, v13
    v14 = iconst 1
    v15 = iadd v7, v14
    jump block1(v15)
block3:
    v16 = load v5, v2
    v17 = sitof v7
    v18 = fadd v16, v17
    return v18
}
";

fn rmw_inputs() -> Vec<Vec<Val>> {
    let x = [0.5, -1.25, 3.0];
    let y = [2.0, -0.0, 0.75, 1.5];
    let mut out = Vec::new();
    for c in [0, 3, 4, -1] {
        for n in [0, 1, 3, 4] {
            out.push(vec![
                Val::Array(x.to_vec()),
                Val::Array(y.to_vec()),
                Val::I64(c),
                Val::I64(n),
            ]);
        }
    }
    out
}

#[test]
fn carry_read_modify_write() {
    let (stats, text) = carry_and_compare(RMW, "f", &rmw_inputs());
    assert_eq!(stats, CarryStats { loops: 1, loads: 2 }, "{text}");
    snapshot("opt_carry.ir", &text);
    // The loop's body reads neither element any more, and `acc[c]` is
    // stored once, on the loop's exit edge.
    let parsed = parse(&text);
    let f = parsed.func(parsed.get("f").unwrap());
    let loads = f
        .layout
        .insts()
        .filter(|&(_, i)| f.dfg.inst(i).opcode() == adze_ir::Opcode::Load)
        .count();
    // x[i] twice (copy and loop), acc[c] and y[c] in the copy, acc[c] after.
    assert_eq!(loads, 5, "{text}");
}

/// What is left alone: another store to the array at an index that may be
/// the same, a second load of the element, a `fill`, a call, a load that is
/// never written (not on a chain), and a loop with a second exit.
#[test]
fn carry_leaves_alone() {
    let cases = [
        // store y[i] too: may be y[c]
        "function @f(x: arr, y: mut arr, c: i64, n: i64) -> f64 {
block0(v0: arr, v1: arr, v2: i64, v3: i64):
    v6 = iconst 0
    jump block1(v6)
block1(v7: i64):
    v8 = icmp lt v7, v3
    brif v8, block2, block3
block2:
    v9 = load v0, v7
    v12 = load v1, v2
    v13 = fmul v12, v9
    store v1, v2, v13
    store v1, v7, v9
    v14 = iconst 1
    v15 = iadd v7, v14
    jump block1(v15)
block3:
    v16 = fconst 0.0
    return v16
}
",
        // two loads of y[c]
        "function @f(x: arr, y: mut arr, c: i64, n: i64) -> f64 {
block0(v0: arr, v1: arr, v2: i64, v3: i64):
    v6 = iconst 0
    jump block1(v6)
block1(v7: i64):
    v8 = icmp lt v7, v3
    brif v8, block2, block3
block2:
    v9 = load v1, v2
    v12 = load v1, v2
    v13 = fmul v12, v9
    store v1, v2, v13
    v14 = iconst 1
    v15 = iadd v7, v14
    jump block1(v15)
block3:
    v16 = fconst 0.0
    return v16
}
",
        // fill of an array that may alias y
        "function @f(x: mut arr, y: mut arr, c: i64, n: i64) -> f64 {
block0(v0: arr, v1: arr, v2: i64, v3: i64):
    v6 = iconst 0
    jump block1(v6)
block1(v7: i64):
    v8 = icmp lt v7, v3
    brif v8, block2, block3
block2:
    v12 = load v1, v2
    v13 = fadd v12, v12
    store v1, v2, v13
    v20 = fconst 1.0
    fill v0, v20
    v14 = iconst 1
    v15 = iadd v7, v14
    jump block1(v15)
block3:
    v16 = fconst 0.0
    return v16
}
",
        // a read that is never written
        "function @f(x: arr, y: mut arr, c: i64, n: i64) -> f64 {
block0(v0: arr, v1: arr, v2: i64, v3: i64):
    v6 = iconst 0
    v5 = fconst 0.0
    jump block1(v6, v5)
block1(v7: i64, v4: f64):
    v8 = icmp lt v7, v3
    brif v8, block2, block3
block2:
    v12 = load v0, v2
    v13 = fadd v4, v12
    v14 = iconst 1
    v15 = iadd v7, v14
    jump block1(v15, v13)
block3:
    return v4
}
",
        // a second exit, from the body
        "function @f(x: arr, y: mut arr, c: i64, n: i64) -> f64 {
block0(v0: arr, v1: arr, v2: i64, v3: i64):
    v6 = iconst 0
    jump block1(v6)
block1(v7: i64):
    v8 = icmp lt v7, v3
    brif v8, block2, block3
block2:
    v12 = load v1, v2
    v13 = fadd v12, v12
    store v1, v2, v13
    v20 = fconst 100.0
    v21 = fcmp gt v13, v20
    brif v21, block3, block4
block4:
    v14 = iconst 1
    v15 = iadd v7, v14
    jump block1(v15)
block3:
    v16 = fconst 0.0
    return v16
}
",
    ];
    for text in cases {
        let (stats, after) = carry_and_compare(text, "f", &rmw_inputs());
        assert_eq!(stats, CarryStats::default(), "{after}");
    }
}

/// A header value read after the loop (the loop's final index) meets the
/// peeled copy's at the exit, in a new parameter.
#[test]
fn carry_merges_header_values_at_the_exit() {
    let (stats, text) = carry_and_compare(RMW, "f", &rmw_inputs());
    assert_eq!(stats.loops, 1);
    let parsed = parse(&text);
    let f = parsed.func(parsed.get("f").unwrap());
    let exit = parsed
        .func(parsed.get("f").unwrap())
        .layout
        .blocks()
        .iter()
        .copied()
        .find(|&b| {
            f.layout
                .block_insts(b)
                .iter()
                .any(|&i| matches!(f.dfg.inst(i), adze_ir::InstData::Return { .. }))
        })
        .unwrap();
    assert_eq!(f.dfg.block_params(exit).len(), 1, "{text}");
}
