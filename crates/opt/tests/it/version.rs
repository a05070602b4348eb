//! Loop versioning (`adze_opt::version`): the count-down loops of reverse
//! mode get a copy behind a guard on their indices' whole range; the bounds
//! analysis proves the copy's accesses and not the original's; both agree
//! with the interpreter before the pass, on counts and bases that pass the
//! guard and on those that fail it (negative, out of range), traps included.

use crate::support::*;
use adze_ir::{Inst, Val};
use adze_opt::version::{version_loops, VersionStats};

/// `s = Σ x[base + c - 1] * x[c - 1]` for `c` from `c0` down to 1, each
/// partial sum stored to `y[c - 1]` — as an adjoint runs a popped trip
/// count down (`tests/data/count_down.ir`, also run on the JIT by the
/// workspace's `tests/it/optimizer.rs`).
const COUNT_DOWN: &str = include_str!("../data/count_down.ir");

/// `(x, y, c0, base)` for counts -1 to 5 and bases -1 to 2, `x` of length
/// 4 and `y` of length `ylen`.
fn inputs_with(ylen: usize) -> Vec<Vec<Val>> {
    let x = vec![0.5, -1.25, 3.0, 2.0];
    let mut out = Vec::new();
    for c0 in [-1, 0, 1, 3, 4, 5] {
        for base in [-1, 0, 1, 2] {
            out.push(vec![
                Val::Array(x.clone()),
                Val::Array(vec![0.0; ylen]),
                Val::I64(c0),
                Val::I64(base),
            ]);
        }
    }
    out
}

fn inputs() -> Vec<Vec<Val>> {
    inputs_with(3)
}

/// The accesses the bounds analysis proves in `text`'s function, by block.
fn proven_blocks(text: &str) -> Vec<String> {
    let m = parse(text);
    let f = m.func(m.get("f").unwrap());
    let safe = adze_ir::bounds::safe_accesses(f);
    let mut out: Vec<String> = f
        .layout
        .insts()
        .filter(|(_, i)| safe.contains(*i))
        .map(|(b, _): (adze_ir::Block, Inst)| b.to_string())
        .collect();
    out.dedup();
    out
}

#[test]
fn version_a_count_down_loop() {
    assert!(proven_blocks(COUNT_DOWN).is_empty());
    let mut stats = VersionStats::default();
    let text = transform_and_compare(COUNT_DOWN, "f", &inputs(), |f| {
        let s = version_loops(f);
        stats.loops += s.loops;
        stats.ranges += s.ranges;
    });
    // x[base + c - 1], x[c - 1] and y[c - 1].
    assert_eq!(
        stats,
        VersionStats {
            loops: 1,
            ranges: 3
        },
        "{text}"
    );
    snapshot("opt_version.ir", &text);
    // The copy's three accesses are proven, in its body block; the
    // original's are not.
    let parsed = parse(&text);
    let f = parsed.func(parsed.get("f").unwrap());
    let safe = adze_ir::bounds::safe_accesses(f);
    assert_eq!(
        safe.keys().filter(|&i| safe.contains(i)).count(),
        3,
        "{text}"
    );
    let blocks = proven_blocks(&text);
    assert_eq!(blocks.len(), 1, "{text}");
    assert_ne!(blocks[0], "block2", "{text}");
}

/// Loops the pass leaves alone: counting up (the bounds analysis's own
/// shape), stepping by two, indices the guard cannot state (`base - c`),
/// and a loop whose accesses are all proven already.
#[test]
fn version_leaves_alone() {
    let cases = [
        COUNT_DOWN.replace("v10 = isub v5, v9", "v10 = iadd v5, v9"),
        COUNT_DOWN.replace(
            "    jump block1(v10, v13)",
            "    v20 = isub v10, v9\n    jump block1(v20, v13)",
        ),
        COUNT_DOWN
            .replace("v11 = iadd v3, v10", "v11 = isub v3, v10")
            .replace("    v14 = load v0, v10\n", "    v14 = fconst 2.0\n")
            .replace("    store v1, v10, v13\n", ""),
    ];
    for text in &cases {
        let mut stats = VersionStats::default();
        let after = transform_and_compare(text, "f", &inputs(), |f| {
            stats.loops += version_loops(f).loops;
        });
        assert_eq!(stats.loops, 0, "{after}");
    }
}

/// Arrays of one length (a `samelen` of the entry block) read at one base
/// are tested once, and the base `>= 0` once: kmeans' adjoint reads four
/// such arrays per centroid. The copy's accesses to both are still
/// proven (`adze_ir::bounds` relates them by the same classes), and the
/// two agree with the interpreter, a `samelen` that traps included.
#[test]
fn version_tests_arrays_of_one_length_once() {
    let text = COUNT_DOWN
        .replace(
            "    v4 = fconst 0.0\n",
            "    samelen v0, v1\n    v4 = fconst 0.0\n",
        )
        .replace("store v1, v10, v13", "store v1, v11, v13");
    let inputs = [inputs_with(3), inputs_with(4)].concat();
    let after = transform_and_compare(&text, "f", &inputs, |f| {
        assert_eq!(version_loops(f).loops, 1);
    });
    // x[base + c - 1] and y[base + c - 1] are one range; x[c - 1] another.
    assert_eq!(after.matches(" = len ").count(), 2, "{after}");
    assert_eq!(after.matches("icmp ge v3,").count(), 1, "{after}");
    let parsed = parse(&after);
    let f = parsed.func(parsed.get("f").unwrap());
    let safe = adze_ir::bounds::safe_accesses(f);
    assert_eq!(
        safe.keys().filter(|&i| safe.contains(i)).count(),
        3,
        "{after}"
    );
}
