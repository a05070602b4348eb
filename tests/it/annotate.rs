//! `adze dump --annotate activity,tape,rules` (docs/inspecting.md): the
//! annotated dumps of three examples held as expected files (the seed's
//! rule-carrying reverse derivative, GMM's, and a rule called inside a
//! loop and a branch), and each one parses back to exactly the IR the
//! plain dump prints: the notes are comments.

use crate::support::{adze, root};

/// (example, function, mode) of each snapshot.
const CASES: [(&str, &str, &str); 4] = [
    ("seed", "g_custom", "reverse"),
    ("gmm", "gmm_objective", "reverse"),
    ("rules", "weighted", "reverse"),
    ("rules", "weighted", "forward"),
];

fn dump(example: &str, func: &str, mode: &str, annotate: bool) -> String {
    let file = format!("ir-examples/{example}.adz");
    let mut args = vec![
        "dump", &file, "--fn", func, "--stage", "ad", "--derive", mode, "--inline", "none",
    ];
    if annotate {
        args.extend(["--annotate", "activity,tape,rules"]);
    }
    adze(&args).exits(0).stdout
}

#[test]
fn annotated_dumps_match_the_expected_files_and_parse_back() {
    for (example, func, mode) in CASES {
        let text = dump(example, func, mode, true);
        let expected = root()
            .join("tests/expected/annotated")
            .join(format!("{example}.{func}.{mode}.ir"));
        adze_test_support::expect_file(&expected, &text);
        // Parsed back, each function prints as it does without notes.
        let body = |t: &str| -> String {
            t.lines()
                .filter(|l| !l.starts_with("; stage"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let reparsed = adze_ir::parse::parse_module(&body(&text))
            .unwrap_or_else(|e| panic!("{example} {func} {mode}: {e}"));
        // The plain dump prints the derivative alone.
        let plain = body(&dump(example, func, mode, false));
        let name = plain
            .strip_prefix("function @")
            .and_then(|t| t.split('(').next())
            .unwrap();
        let g = reparsed.get(name).unwrap();
        assert_eq!(
            reparsed.display_function(g).to_string().trim_end(),
            plain.trim_end(),
            "{example} {func} {mode}"
        );
    }
}

/// Each kind of note is there, and only when asked for.
#[test]
fn each_annotation_is_given_when_asked_for() {
    let file = "ir-examples/rules.adz";
    let run = |what: &str| {
        adze(&[
            "dump",
            file,
            "--fn",
            "weighted",
            "--stage",
            "ad",
            "--derive",
            "reverse",
            "--inline",
            "none",
            "--annotate",
            what,
        ])
        .exits(0)
        .stdout
    };
    let tape = run("tape");
    assert!(tape.contains("; tape 0: saves the rule's input"), "{tape}");
    assert!(tape.contains("pops"), "{tape}");
    assert!(!tape.contains("activity (") && !tape.contains("rule: applies"));
    let rules = run("rules");
    assert!(rules.contains("the reverse rule of `sqr`"), "{rules}");
    assert!(!rules.contains("; tape 0"));
    let activity = run("activity");
    assert!(
        activity.contains("activity (reverse: a active, n const, x active)"),
        "{activity}"
    );
    assert!(!activity.contains("; tape 0"));
    let bad = adze(&["dump", file, "--annotate", "colour"]).exits(1);
    assert!(
        bad.stderr.contains("unknown annotation `colour`"),
        "{}",
        bad.stderr
    );
}
