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
const RMW: &str = include_str!("../data/carry/rmw.ir");

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
        (
            "store y[i] too: may be y[c]",
            include_str!("../data/carry/leave_store_may_alias.ir"),
        ),
        (
            "two loads of y[c]",
            include_str!("../data/carry/leave_two_loads.ir"),
        ),
        (
            "fill of an array that may alias y",
            include_str!("../data/carry/leave_fill_may_alias.ir"),
        ),
        (
            "a read that is never written",
            include_str!("../data/carry/leave_never_written.ir"),
        ),
        (
            "a second exit, from the body",
            include_str!("../data/carry/leave_second_exit.ir"),
        ),
    ];
    for (what, text) in cases {
        let (stats, after) = carry_and_compare(text, "f", &rmw_inputs());
        assert_eq!(stats, CarryStats::default(), "{what}:\n{after}");
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
