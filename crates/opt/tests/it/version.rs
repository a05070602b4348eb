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

fn inputs() -> Vec<Vec<Val>> {
    let x = vec![0.5, -1.25, 3.0, 2.0];
    let mut out = Vec::new();
    for c0 in [-1, 0, 1, 3, 4, 5] {
        for base in [-1, 0, 1, 2] {
            out.push(vec![
                Val::Array(x.clone()),
                Val::Array(vec![0.0; 3]),
                Val::I64(c0),
                Val::I64(base),
            ]);
        }
    }
    out
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
            ranges: 3,
            up: 0
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

/// Loops the pass leaves alone: a count-down test whose counter steps up,
/// stepping by two, indices the guard cannot state (`base - c`), and a
/// loop whose accesses are all proven already.
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

/// `s = Σ x[base + i] * y[i + 1]`, each partial sum stored to `y[i]`, for
/// `i` from 0 below `hi`: a count-up loop over rows of arrays whose lengths
/// the loop cannot relate to `hi` (kmeans' `points[i * d + l]`).
const COUNT_UP: &str = "function @f(x: arr, y: mut arr, hi: i64, base: i64) -> f64 {
block0(v0: arr, v1: arr, v2: i64, v3: i64):
    v4 = fconst 0.0
    v5 = iconst 0
    jump block1(v5, v4)
block1(v6: i64, v7: f64):
    v8 = icmp lt v6, v2
    brif v8, block2, block3
block2:
    v9 = iadd v3, v6
    v10 = load v0, v9
    v11 = iconst 1
    v12 = iadd v6, v11
    v13 = load v1, v12
    v14 = fmul v10, v13
    v15 = fadd v7, v14
    store v1, v6, v15
    v16 = iadd v6, v11
    jump block1(v16, v15)
block3:
    return v7
}
";

/// Counting up: the guard checks `hi >= 0`, `base >= 0`, `base <= len(x)`,
/// `hi <= len(x) - base` and `hi <= len(y) - 1` (the largest offset of
/// `y`); the copy's three accesses are proven, the original's are not;
/// before and after agree on bounds that pass and fail the guard.
#[test]
fn version_a_count_up_loop() {
    assert!(proven_blocks(COUNT_UP).is_empty());
    let mut inputs = Vec::new();
    for hi in [-1, 0, 1, 2, 3, 4] {
        for base in [-1, 0, 1, 2, 5] {
            inputs.push(vec![
                Val::Array(vec![0.5, -1.25, 3.0, 2.0]),
                Val::Array(vec![1.0, 2.0, -0.0, 4.0]),
                Val::I64(hi),
                Val::I64(base),
            ]);
        }
    }
    let mut stats = VersionStats::default();
    let text = transform_and_compare(COUNT_UP, "f", &inputs, |f| {
        let s = version_loops(f);
        stats.loops += s.loops;
        stats.ranges += s.ranges;
        stats.up += s.up;
    });
    assert_eq!(
        stats,
        VersionStats {
            loops: 1,
            ranges: 2,
            up: 1
        },
        "{text}"
    );
    for atom in [
        "icmp ge v2, ",
        "icmp ge v3, ",
        "icmp le v3, ",
        "isub ",
        "icmp le v2, ",
    ] {
        assert!(text.contains(atom), "{atom} in\n{text}");
    }
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
