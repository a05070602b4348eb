//! Checks of an output text in the manner of LLVM's FileCheck (and
//! Cranelift's `filecheck`): ordered `check:` patterns, `nextln:` /
//! `sameln:` for what must follow on the next or the same line, `not:` for
//! what must not appear between two matches, `label:` to cut the output into
//! sections (one per function, say) that the other directives are confined
//! to, and `count N:` for an exact number of matching lines in a section.
//!
//! A pattern is literal text, matched within one line, with two anchors: a
//! leading `^` ties it to the start of the line (before any indentation),
//! a trailing `$` to its end. Surrounding whitespace is not part of it.

use std::fmt;

/// What a directive asks of the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `check:` the pattern matches after the previous match (on its line,
    /// after it, or on a later line).
    Check,
    /// `sameln:` the pattern matches on the line of the previous match,
    /// after it.
    Sameln,
    /// `nextln:` the pattern matches on the line after the previous match.
    Nextln,
    /// `not:` the pattern does not match between the previous match (or the
    /// start of the section) and the next one (or the end of the section).
    Not,
    /// `label:` the pattern matches a line after the previous label's; it
    /// starts a section, which ends where the next label matches.
    Label,
    /// `count N:` exactly `N` lines of the section match, in any order.
    Count(usize),
}

impl Kind {
    /// The kind for a directive name (`count` takes its number).
    pub fn from_name(name: &str, number: Option<usize>) -> Option<Kind> {
        Some(match (name, number) {
            ("check", None) => Kind::Check,
            ("sameln", None) => Kind::Sameln,
            ("nextln", None) => Kind::Nextln,
            ("not", None) => Kind::Not,
            ("label", None) => Kind::Label,
            ("count", Some(n)) => Kind::Count(n),
            _ => return None,
        })
    }

    /// The directive names this module interprets.
    pub const NAMES: [&'static str; 6] = ["check", "sameln", "nextln", "not", "label", "count"];
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Check => f.write_str("check"),
            Kind::Sameln => f.write_str("sameln"),
            Kind::Nextln => f.write_str("nextln"),
            Kind::Not => f.write_str("not"),
            Kind::Label => f.write_str("label"),
            Kind::Count(n) => write!(f, "count {n}"),
        }
    }
}

/// A literal pattern with optional anchors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    at_start: bool,
    at_end: bool,
}

impl Pattern {
    /// `^` at the start and `$` at the end are anchors; the rest (trimmed)
    /// is literal.
    pub fn parse(source: &str) -> Pattern {
        let mut text = source.trim();
        let at_start = text.starts_with('^');
        if at_start {
            text = &text[1..];
        }
        let at_end = text.ends_with('$');
        if at_end {
            text = &text[..text.len() - 1];
        }
        Pattern {
            text: text.to_string(),
            at_start,
            at_end,
        }
    }

    /// The first match in `line[from..to]`: its byte range in `line`.
    /// Anchors refer to the whole line, not to the searched part.
    pub fn find_in(&self, line: &str, from: usize, to: usize) -> Option<(usize, usize)> {
        if from > to || to > line.len() {
            return None;
        }
        let n = self.text.len();
        if self.at_start {
            let ok = from == 0 && line[..to].starts_with(&self.text);
            let ok = ok && (!self.at_end || (n == line.len() && to == line.len()));
            return ok.then_some((0, n));
        }
        if self.at_end {
            let ok = to == line.len() && line.ends_with(&self.text) && line.len() - n >= from;
            return ok.then(|| (line.len() - n, line.len()));
        }
        line.get(from..to)?
            .find(&self.text)
            .map(|s| (from + s, from + s + n))
    }

    /// Does the pattern match anywhere in `line`?
    pub fn matches(&self, line: &str) -> bool {
        self.find_in(line, 0, line.len()).is_some()
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let start = if self.at_start { "^" } else { "" };
        let end = if self.at_end { "$" } else { "" };
        write!(f, "{start}{}{end}", self.text)
    }
}

/// One directive of a test file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    pub kind: Kind,
    pub pattern: Pattern,
    /// The directive's line in the test file (1-based), for messages.
    pub line: usize,
}

/// A position in the output: a line index and a byte offset in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pos {
    line: usize,
    col: usize,
}

/// Runs `checks` against `output`. Returns one message per failed
/// directive, starting with the directive's line number; after a failed positive match the rest of its section is not
/// checked (its position is unknown), the other sections are.
pub fn run_checks(checks: &[Check], output: &str) -> Vec<String> {
    let lines: Vec<&str> = output.lines().collect();
    let mut failures = Vec::new();
    // Labels first: they cut the output into sections.
    let mut starts: Vec<(usize, Pos)> = Vec::new(); // (index in checks, where)
    let mut search_from = 0;
    for (i, c) in checks.iter().enumerate() {
        if c.kind != Kind::Label {
            continue;
        }
        let found = (search_from..lines.len()).find_map(|l| {
            c.pattern
                .find_in(lines[l], 0, lines[l].len())
                .map(|m| (l, m))
        });
        match found {
            Some((l, (_, end))) => {
                starts.push((i, Pos { line: l, col: end }));
                search_from = l + 1;
            }
            None => {
                failures.push(format!(
                    "{}: label: `{}` not found after output line {search_from}",
                    c.line, c.pattern
                ));
                return failures;
            }
        }
    }
    // Section k: the directives after label k-1 (all before the first label
    // for k = 0), matched in [start, end).
    let mut bounds = Vec::new();
    let first = starts.first().map_or(checks.len(), |s| s.0);
    let first_end = starts.first().map_or(lines.len(), |s| s.1.line);
    bounds.push((0..first, Pos { line: 0, col: 0 }, false, first_end));
    for (k, &(i, pos)) in starts.iter().enumerate() {
        let (next_i, end) = starts
            .get(k + 1)
            .map_or((checks.len(), lines.len()), |n| (n.0, n.1.line));
        bounds.push((i + 1..next_i, pos, true, end));
    }
    for (range, start, matched, end) in bounds {
        section(&checks[range], &lines, start, matched, end, &mut failures);
    }
    failures
}

/// The directives of one section, over output lines `[start.line, end)`.
fn section(
    checks: &[Check],
    lines: &[&str],
    start: Pos,
    mut matched: bool,
    end: usize,
    failures: &mut Vec<String>,
) {
    let first_line = start.line;
    let mut cursor = start;
    let mut nots: Vec<&Check> = Vec::new();
    let where_ = |p: Pos| format!("output line {}", p.line + 1);
    for c in checks {
        let found = match c.kind {
            Kind::Not => {
                nots.push(c);
                continue;
            }
            Kind::Count(n) => {
                let got = (first_line..end)
                    .filter(|&l| c.pattern.matches(lines[l]))
                    .count();
                if got != n {
                    failures.push(format!(
                        "{}: count {n}: `{}` matches {got} line(s) of output lines {}..={}",
                        c.line,
                        c.pattern,
                        first_line + 1,
                        end
                    ));
                }
                continue;
            }
            Kind::Label => unreachable!("labels delimit sections"),
            Kind::Check => (cursor.line..end).find_map(|l| {
                let from = if l == cursor.line { cursor.col } else { 0 };
                c.pattern
                    .find_in(lines[l], from.min(lines[l].len()), lines[l].len())
                    .map(|m| (l, m))
            }),
            Kind::Sameln | Kind::Nextln if !matched => {
                failures.push(format!(
                    "{}: {}: `{}` has no previous match to follow",
                    c.line, c.kind, c.pattern
                ));
                return;
            }
            Kind::Sameln => (cursor.line < end)
                .then(|| {
                    let line = lines[cursor.line];
                    c.pattern
                        .find_in(line, cursor.col, line.len())
                        .map(|m| (cursor.line, m))
                })
                .flatten(),
            Kind::Nextln => (cursor.line + 1 < end)
                .then(|| {
                    let line = lines[cursor.line + 1];
                    c.pattern
                        .find_in(line, 0, line.len())
                        .map(|m| (cursor.line + 1, m))
                })
                .flatten(),
        };
        let Some((l, (s, e))) = found else {
            let what = match c.kind {
                Kind::Sameln => format!("not found on {} after its match", where_(cursor)),
                Kind::Nextln => format!("not found on the line after {}", where_(cursor)),
                _ => format!("not found from {} on", where_(cursor)),
            };
            failures.push(format!("{}: {}: `{}` {what}", c.line, c.kind, c.pattern));
            return;
        };
        check_nots(&nots, lines, cursor, Pos { line: l, col: s }, failures);
        nots.clear();
        cursor = Pos { line: l, col: e };
        matched = true;
    }
    let end_pos = if end == 0 {
        Pos { line: 0, col: 0 }
    } else {
        Pos {
            line: end - 1,
            col: lines[end - 1].len(),
        }
    };
    if end > cursor.line {
        check_nots(&nots, lines, cursor, end_pos, failures);
    }
}

/// Each `not:` pattern must not match in `[from, to)`.
fn check_nots(nots: &[&Check], lines: &[&str], from: Pos, to: Pos, failures: &mut Vec<String>) {
    for c in nots {
        for l in from.line..=to.line.min(lines.len().saturating_sub(1)) {
            if l >= lines.len() {
                break;
            }
            let a = if l == from.line { from.col } else { 0 };
            let b = if l == to.line { to.col } else { lines[l].len() };
            if a > b {
                continue;
            }
            if c.pattern.find_in(lines[l], a, b).is_some() {
                failures.push(format!(
                    "{}: not: `{}` matches output line {}: {}",
                    c.line,
                    c.pattern,
                    l + 1,
                    lines[l].trim()
                ));
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checks(spec: &[(&str, &str)]) -> Vec<Check> {
        spec.iter()
            .enumerate()
            .map(|(i, (k, p))| {
                let (name, n) = match k.split_once(' ') {
                    Some((name, n)) => (name, Some(n.parse().unwrap())),
                    None => (*k, None),
                };
                Check {
                    kind: Kind::from_name(name, n).unwrap(),
                    pattern: Pattern::parse(p),
                    line: i + 1,
                }
            })
            .collect()
    }

    const OUT: &str = "function @f(x: f64) -> f64 {
block0(v0: f64):
    v1 = fadd v0, v0
    jump block1
block1:
    v2 = fmul v1, v1
    return v2
}

function @g() {
block0:
    v1 = fadd v0, v0
    return
}
";

    /// A case: the checks, how many errors they give on [`OUT`], and a text
    /// the first error contains (`""`: any).
    type Case<'a> = (&'a [(&'a str, &'a str)], usize, &'a str);

    #[track_caller]
    fn cases(cases: &[Case]) {
        for (spec, n, first) in cases {
            let e = run_checks(&checks(spec), OUT);
            assert_eq!(e.len(), *n, "{spec:?}: {e:?}");
            assert!(
                e.first().is_none_or(|e| e.contains(first)),
                "{spec:?}: {e:?}"
            );
        }
    }

    #[test]
    fn ordered_checks() {
        cases(&[
            (
                &[("check", "fadd"), ("check", "fmul"), ("check", "return v2")],
                0,
                "",
            ),
            (
                &[("check", "fmul"), ("check", "fadd v0"), ("check", "fmul")],
                1,
                "3: check: `fmul` not found",
            ),
            // The same line, after the previous match.
            (&[("check", "v1 ="), ("sameln", "fadd v0, v0")], 0, ""),
            (&[("check", "fadd v0,"), ("sameln", "v1")], 1, ""),
        ]);
    }

    #[test]
    fn next_line_and_anchors() {
        cases(&[
            (
                &[("check", "^block1:"), ("nextln", "v2 = fmul v1, v1$")],
                0,
                "",
            ),
            (&[("check", "^block1:"), ("nextln", "return")], 1, ""),
            // `jump block1` ends its line; `^block1` is not the jump.
            (
                &[
                    ("check", "jump block1$"),
                    ("not", "^v1"),
                    ("check", "^block1"),
                ],
                0,
                "",
            ),
            (&[("check", "^    jump")], 0, ""),
            (&[("check", "^jump")], 1, ""),
            // Nothing to follow.
            (&[("nextln", "x")], 1, ""),
        ]);
    }

    #[test]
    fn not_between_matches_and_to_the_end() {
        cases(&[
            (
                &[("check", "block0"), ("not", "fmul"), ("check", "jump")],
                0,
                "",
            ),
            (
                &[("check", "block0"), ("not", "fmul"), ("check", "return")],
                1,
                "matches output line 6",
            ),
            // A trailing `not:` runs to the end of the section.
            (&[("check", "return v2"), ("not", "fadd")], 1, ""),
            (&[("check", "return v2"), ("not", "fmul")], 0, ""),
        ]);
    }

    #[test]
    fn labels_confine_and_count() {
        let both = [
            ("label", "function @f("),
            ("count 1", "fadd"),
            ("count 0", "call"),
            ("not", "fmul"),
            ("check", "jump"),
            ("label", "function @g("),
            ("count 1", "fadd"),
            ("check", "return"),
            ("not", "fmul"),
        ];
        cases(&[
            (&both, 0, ""),
            // Without labels, a count covers the whole output.
            (&[("count 2", "fadd v0, v0")], 0, ""),
            // A check does not leave its section.
            (
                &[
                    ("label", "function @f("),
                    ("check", "return$"),
                    ("label", "function @g("),
                ],
                1,
                "",
            ),
            // Labels are ordered.
            (
                &[("label", "function @g("), ("label", "function @f(")],
                1,
                "",
            ),
        ]);
    }
}
