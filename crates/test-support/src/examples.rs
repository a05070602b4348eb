//! The example programs of `ir-examples/`, which many suites compile and
//! run, and the `run:` lines that say what their functions give:
//!
//! ```text
//! // run: polar(3.0, 4.0) == (5.0, 0.9272952180016122)      (an example)
//! ; run: @f([1.0], [2.0]) == error: index 1 is out of bounds  (an IR filetest)
//! ```
//!
//! Arguments are written as values print (`1.5`, `-0.0`, `NaN`, `3`,
//! `true`, `[1.0, 2.0]`); [`crate::adze::run_args`] (feature `adze`) types
//! them by a signature.

use crate::bless::workspace_root;
use std::path::PathBuf;

/// The directory `ir-examples/`.
pub fn example_dir() -> PathBuf {
    workspace_root().join("ir-examples")
}

/// Every `.adz` file of `ir-examples/`, sorted.
pub fn example_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(example_dir())
        .unwrap_or_else(|e| panic!("{}: {e}", example_dir().display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "adz"))
        .collect();
    files.sort();
    files
}

/// The source of `ir-examples/<file>`; panics with the path if it cannot be
/// read.
pub fn example(file: &str) -> String {
    let path = example_dir().join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One `run:` line: `f(ARGS)` or `@f(ARGS)`, optionally `== EXPECTED`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunLine<'a> {
    /// The function's name, without `@`.
    pub func: &'a str,
    /// The arguments as written, trimmed: `["1.5", "[1.0, 2.0]", "3"]`.
    pub args: Vec<&'a str>,
    /// What follows `==`, trimmed, if the line says.
    pub expected: Option<&'a str>,
}

impl<'a> RunLine<'a> {
    /// Parses the text after `run:`.
    pub fn parse(text: &'a str) -> Result<RunLine<'a>, String> {
        let (call, expected) = match text.split_once("==") {
            Some((call, expected)) => (call.trim(), Some(expected.trim())),
            None => (text.trim(), None),
        };
        let (func, args) = call
            .strip_suffix(')')
            .and_then(|c| c.split_once('('))
            .ok_or_else(|| format!("`{call}`: expected `name(args)`"))?;
        Ok(RunLine {
            func: func.trim().trim_start_matches('@'),
            args: split_top(args),
            expected,
        })
    }

    /// The expected results, one per result: `(a, b)` is two, anything
    /// else (`a`, `error: ..`) one; none if the line says nothing.
    pub fn expected_results(&self) -> Vec<&'a str> {
        match self.expected {
            None => Vec::new(),
            Some(e) => match e.strip_prefix('(').and_then(|e| e.strip_suffix(')')) {
                Some(inner) => split_top(inner),
                None => vec![e],
            },
        }
    }
}

/// The `// run:` lines of an example's `source`, each with its line number
/// (1-based); panics on a malformed one.
pub fn run_lines(source: &str) -> Vec<(usize, RunLine<'_>)> {
    source
        .lines()
        .enumerate()
        .filter_map(|(i, l)| Some((i + 1, l.trim().strip_prefix("// run:")?)))
        .map(|(line, rest)| {
            let run = RunLine::parse(rest).unwrap_or_else(|e| panic!("line {line}: {e}"));
            (line, run)
        })
        .collect()
}

/// Splits `a, [b, c], (d, e)` at the commas outside brackets and
/// parentheses; each part is trimmed, and blank text has no parts.
pub fn split_top(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !text[start..].trim().is_empty() || !parts.is_empty() {
        parts.push(text[start..].trim());
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_lines_of_both_kinds() {
        let run = RunLine::parse(" polar(3.0, [1.0, 2.0]) == (5.0, 0.5)").unwrap();
        assert_eq!(run.func, "polar");
        assert_eq!(run.args, ["3.0", "[1.0, 2.0]"]);
        assert_eq!(run.expected_results(), ["5.0", "0.5"]);
        let run = RunLine::parse("@f([], 0) == error: index 0 is out of bounds").unwrap();
        assert_eq!((run.func, &run.args[..]), ("f", &["[]", "0"][..]));
        assert_eq!(run.expected_results(), ["error: index 0 is out of bounds"]);
        let run = RunLine::parse("@g()").unwrap();
        assert!(run.args.is_empty() && run.expected.is_none());
        assert!(RunLine::parse("f 1.0 == 2.0").is_err());
        let lines = run_lines("fn f() {}\n  // run: f() == 1\n// Not a run line.\n");
        assert_eq!(lines.len(), 1);
        assert_eq!((lines[0].0, lines[0].1.expected), (2, Some("1")));
    }

    #[test]
    fn splitting_at_top_level_commas() {
        assert_eq!(split_top("1, [2, 3], (4, 5)"), ["1", "[2, 3]", "(4, 5)"]);
        assert!(split_top("  ").is_empty());
        // A missing argument is an empty part, not no part.
        assert_eq!(split_top("1,"), ["1", ""]);
    }

    #[test]
    fn every_example_is_listed() {
        let files = example_files();
        assert!(files.iter().any(|p| p.ends_with("seed.adz")), "{files:?}");
        assert!(example("seed.adz").contains("// run:"));
    }
}
