//! Data-file tests in the manner of Cranelift's filetests: each file of a
//! directory is one test. Its header names what to do with it (`; test:
//! opt gvn dce`); comment directives say what the output must contain
//! (`; check:`, see [`crate::filecheck`]) or anything else the runner of the
//! directory understands (`; error:`, `; run:`); and the whole expected
//! output follows the input, each line commented out, after the marker line
//!
//! ```text
//! ; ---- output (ADZE_BLESS=1 rewrites what follows) ----
//! ```
//!
//! The caller supplies what turns a file into output text; this module finds
//! the files, parses their directives, runs the checks, compares (or
//! blesses) the expected output, and reports every failing file at once.

use crate::bless::{self, display_path, expect_in_file};
use crate::filecheck::{run_checks, Check, Kind, Pattern};
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// The environment variable that restricts a run to the files whose path
/// contains its value (`ADZE_FILETEST=gvn`).
pub const FILTER_VAR: &str = "ADZE_FILETEST";

/// What comes after the comment prefix on the line that starts the
/// expected output.
pub const OUTPUT_MARKER: &str = "---- output (ADZE_BLESS=1 rewrites what follows) ----";

/// Which files a directory's runner takes, and what they may say.
#[derive(Clone, Debug)]
pub struct Config<'a> {
    /// File extensions (without the dot) and the line-comment prefix of
    /// each: `("ir", ";")`, `("adz", "//")`.
    pub extensions: &'a [(&'a str, &'a str)],
    /// Directive names the caller interprets, beside `test` and the
    /// [`crate::filecheck`] ones (e.g. `error`, `run`). Any other comment
    /// line of the form `name:` is an error, so that a misspelt directive
    /// does not pass silently.
    pub directives: &'a [&'a str],
}

/// A directive for the caller (one of [`Config::directives`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Directive {
    pub name: String,
    /// The text after `name:`, trimmed.
    pub value: String,
    /// Its line in the file, 1-based.
    pub line: usize,
}

/// One test file, parsed.
#[derive(Clone, Debug)]
pub struct TestFile {
    pub path: PathBuf,
    /// The path as messages show it (relative to the workspace root).
    pub name: String,
    /// The whole file.
    pub text: String,
    /// The line-comment prefix of its kind of file.
    pub comment: String,
    /// The words of the `test:` line: the command, then its arguments.
    pub command: Vec<String>,
    /// The caller's directives, in file order.
    pub directives: Vec<Directive>,
    /// The filecheck directives, in file order.
    pub checks: Vec<Check>,
    /// Where the input ends: the output marker's line, or the end.
    input_end: usize,
    /// The expected output, uncommented, if the file has the marker.
    expected: Option<String>,
}

impl TestFile {
    /// Parses `text` (the contents of `path`, whose comment prefix is
    /// `comment`). `known` are the caller's directive names.
    pub fn parse(
        path: &Path,
        text: String,
        comment: &str,
        known: &[&str],
    ) -> Result<TestFile, String> {
        let name = display_path(path);
        let marker = format!("{comment} {OUTPUT_MARKER}");
        let mut input_end = text.len();
        let mut offset = 0;
        let mut expected = None;
        for (n, line) in text.split_inclusive('\n').enumerate() {
            if line.trim_end() == marker {
                input_end = offset;
                let mut out = String::new();
                for (k, l) in text[offset + line.len()..].lines().enumerate() {
                    let body = if l == comment {
                        ""
                    } else if let Some(b) =
                        l.strip_prefix(comment).and_then(|b| b.strip_prefix(' '))
                    {
                        b
                    } else {
                        return Err(format!(
                            "{name}:{}: a line of the expected output must start with `{comment} `",
                            n + k + 2
                        ));
                    };
                    out.push_str(body);
                    out.push('\n');
                }
                expected = Some(out);
                break;
            }
            offset += line.len();
        }
        let mut command = None;
        let mut directives = Vec::new();
        let mut checks = Vec::new();
        for (n, line) in text[..input_end].lines().enumerate() {
            let line_no = n + 1;
            let Some(body) = line.trim_start().strip_prefix(comment) else {
                continue;
            };
            let Some((name_part, value)) = directive_head(body.trim_start()) else {
                continue;
            };
            let (dname, number) = match name_part.split_once(' ') {
                Some((d, num)) => (d, num.parse::<usize>().ok()),
                None => (name_part, None),
            };
            let value = value.trim();
            let at = format!("{name}:{line_no}");
            if dname == "test" {
                if command.is_some() {
                    return Err(format!("{at}: a second `test:` line"));
                }
                if !directives.is_empty() || !checks.is_empty() {
                    return Err(format!(
                        "{at}: `test:` must come before the other directives"
                    ));
                }
                let words: Vec<String> = value.split_whitespace().map(str::to_string).collect();
                if words.is_empty() {
                    return Err(format!("{at}: `test:` names no command"));
                }
                command = Some(words);
            } else if let Some(kind) = Kind::from_name(dname, number) {
                if value.is_empty() {
                    return Err(format!("{at}: `{dname}:` has no pattern"));
                }
                checks.push(Check {
                    kind,
                    pattern: Pattern::parse(value),
                    line: line_no,
                });
            } else if known.contains(&name_part) {
                directives.push(Directive {
                    name: name_part.to_string(),
                    value: value.to_string(),
                    line: line_no,
                });
            } else {
                return Err(format!(
                    "{at}: unknown directive `{name_part}:` (known: test, {}, {}); \
                     reword a comment that starts with `word:`",
                    Kind::NAMES.join(", "),
                    known.join(", ")
                ));
            }
        }
        let command = command.ok_or_else(|| format!("{name}: no `{comment} test:` line"))?;
        Ok(TestFile {
            path: path.to_path_buf(),
            name,
            text,
            comment: comment.to_string(),
            command,
            directives,
            checks,
            input_end,
            expected,
        })
    }

    /// The input: everything before the output marker (directives
    /// included: they are comments of the input's language).
    pub fn input(&self) -> &str {
        &self.text[..self.input_end]
    }

    /// The expected output, uncommented; `None` if the file has none.
    pub fn expected(&self) -> Option<&str> {
        self.expected.as_deref()
    }

    /// The command's arguments (the words after it on the `test:` line).
    pub fn args(&self) -> &[String] {
        &self.command[1..]
    }

    /// The caller's directives called `name`.
    pub fn directives<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s Directive> + 's {
        self.directives.iter().filter(move |d| d.name == name)
    }

    /// `actual` as it would stand in the file: the marker, then each line
    /// commented out; nothing for an empty output.
    fn render(&self, actual: &str) -> String {
        if actual.is_empty() {
            return "\n".to_string();
        }
        let c = &self.comment;
        let mut s = format!("\n\n{c} {OUTPUT_MARKER}\n");
        for line in actual.lines() {
            if line.is_empty() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c} {line}"));
            }
            s.push('\n');
        }
        s
    }

    /// The bytes of the file that [`TestFile::render`] replaces: the
    /// blank lines before the marker, the marker and the output.
    fn expected_range(&self) -> Range<usize> {
        self.text[..self.input_end].trim_end().len()..self.text.len()
    }

    /// Compares `actual` with the expected output, or blesses it (through
    /// [`expect_in_file`], the one bless mechanism).
    fn compare(&self, actual: &str) -> Result<(), String> {
        if actual.is_empty() && self.expected.is_none() {
            return Ok(());
        }
        let missing = self.expected.is_none();
        match expect_in_file(&self.path, self.expected_range(), &self.render(actual)) {
            Ok(_) => Ok(()),
            Err(_) if missing => Err(format!(
                "no expected output (`{}=1 cargo test` adds it); the output is:\n{actual}",
                bless::BLESS_VAR
            )),
            Err(mismatch) => Err(mismatch.to_string()),
        }
    }
}

/// `name:` or `name N:` at the start of a comment's body, followed by a
/// space or the end: the directive's name (with its number) and the rest.
fn directive_head(body: &str) -> Option<(&str, &str)> {
    let colon = body.find(':')?;
    let head = &body[..colon];
    let rest = &body[colon + 1..];
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    let (word, number) = match head.split_once(' ') {
        Some((w, n)) => (w, Some(n)),
        None => (head, None),
    };
    let word_ok = word.starts_with(|c: char| c.is_ascii_lowercase())
        && word.chars().all(|c| c.is_ascii_lowercase() || c == '-');
    let number_ok = number.is_none_or(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    (word_ok && number_ok).then_some((head, rest))
}

/// The test files of `dir` (recursively), sorted, with their comment
/// prefix.
pub fn discover(dir: &Path, config: &Config) -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, config: &Config, out: &mut Vec<(PathBuf, String)>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, config, out);
            } else if let Some(ext) = path.extension().and_then(|e| e.to_str()) {
                if let Some((_, c)) = config.extensions.iter().find(|(e, _)| *e == ext) {
                    out.push((path.clone(), c.to_string()));
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, config, &mut out);
    out.sort();
    out
}

/// Runs every test file of `dir`: parses it, calls `run` to turn it into
/// output text (or an error message; a panic counts as one), checks the
/// output against the file's filecheck directives, and compares it with the
/// file's expected output (with `ADZE_BLESS=1`: rewrites it, unless a check
/// failed). Panics at the end listing every failing file.
pub fn run_filetests(
    dir: impl AsRef<Path>,
    config: &Config,
    run: impl Fn(&TestFile) -> Result<String, String>,
) {
    let dir = dir.as_ref();
    let files = discover(dir, config);
    assert!(!files.is_empty(), "no test files in {}", dir.display());
    let filter = std::env::var(FILTER_VAR).ok().filter(|f| !f.is_empty());
    let mut failures = Failures::default();
    for (path, comment) in files {
        let shown = display_path(&path);
        if filter.as_ref().is_some_and(|f| !shown.contains(f.as_str())) {
            continue;
        }
        failures.check(&shown, || {
            let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read: {e}"))?;
            let file = TestFile::parse(&path, text, &comment, config.directives)?;
            let mut actual = run(&file)?;
            if !actual.is_empty() && !actual.ends_with('\n') {
                actual.push('\n');
            }
            let failed = run_checks(&file.checks, &actual);
            if !failed.is_empty() {
                let mut numbered = String::new();
                for (i, l) in actual.lines().enumerate() {
                    numbered.push_str(&format!("{:>4} | {l}\n", i + 1));
                }
                return Err(format!(
                    "{}\n(not blessed: the checks must hold first)\noutput:\n{numbered}",
                    failed
                        .iter()
                        .map(|f| format!("{}:{f}", file.name))
                        .collect::<Vec<_>>()
                        .join("\n")
                ));
            }
            file.compare(&actual)
        });
    }
    failures.finish(&format!("filetests in {}", display_path(dir)));
}

/// Failures collected over many cases, reported together.
#[derive(Debug, Default)]
pub struct Failures {
    total: usize,
    failed: Vec<(String, String)>,
}

impl Failures {
    /// Runs the case `name`; an `Err` or a panic is recorded as its failure.
    pub fn check(&mut self, name: &str, case: impl FnOnce() -> Result<(), String>) {
        self.total += 1;
        let result = match catch_unwind(AssertUnwindSafe(case)) {
            Ok(r) => r,
            Err(payload) => Err(format!("panicked: {}", panic_message(&*payload))),
        };
        if let Err(msg) = result {
            self.failed.push((name.to_string(), msg));
        }
    }

    /// Panics listing every failure, if any; `what` names the cases.
    #[track_caller]
    pub fn finish(self, what: &str) {
        if self.failed.is_empty() {
            println!("{} {what}: all passed", self.total);
            return;
        }
        let mut report = format!("{} of {} {what} failed:\n", self.failed.len(), self.total);
        for (name, _) in &self.failed {
            report.push_str(&format!("    {name}\n"));
        }
        for (name, msg) in &self.failed {
            report.push_str(&format!("\n---- {name}\n{msg}\n"));
        }
        panic!("{report}");
    }
}

/// The message of a panic's payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a non-string panic payload)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: Config = Config {
        extensions: &[("ir", ";")],
        directives: &["error"],
    };

    fn parse(text: &str) -> Result<TestFile, String> {
        TestFile::parse(
            Path::new("/tmp/t.ir"),
            text.to_string(),
            ";",
            CONFIG.directives,
        )
    }

    #[test]
    fn header_directives_and_expected_output() {
        let f = parse(
            "; test: opt gvn dce\n; Prose: not a directive (capitalised).\n; check: fadd\n\
             function @f() {\n; error: bad\n}\n\n; ---- output (ADZE_BLESS=1 rewrites what follows) ----\n; a\n;\n; b\n",
        )
        .unwrap();
        assert_eq!(f.command, ["opt", "gvn", "dce"]);
        assert_eq!(f.args(), ["gvn", "dce"]);
        assert_eq!(f.checks.len(), 1);
        assert_eq!(f.checks[0].line, 3);
        let errors: Vec<_> = f
            .directives("error")
            .map(|d| (d.line, d.value.as_str()))
            .collect();
        assert_eq!(errors, [(5, "bad")]);
        assert_eq!(f.expected(), Some("a\n\nb\n"));
        assert!(f.input().ends_with("}\n\n"));
        assert_eq!(&f.text[f.expected_range()], f.render("a\n\nb\n"));
    }

    #[test]
    fn malformed_files_are_errors() {
        let bad_output = format!("; test: a\n; {OUTPUT_MARKER}\nnot a comment\n");
        for (text, error) in [
            ("function @f() {}\n", "no `; test:` line"),
            ("; test: verify\n; chek: x\n", "unknown directive `chek:`"),
            ("; check: x\n; test: verify\n", "must come before"),
            ("; test: a\n; count: x\n", "unknown directive `count:`"),
            (&bad_output, "must start with `; `"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(error), "{text:?}: {e}");
        }
        // Ordinary comments: prose, `word: ` not at the start, URLs.
        let f = parse("; test: a\n; The pass: nothing.\n; see https://x\n; a[i]: y\n").unwrap();
        assert!(f.checks.is_empty() && f.directives.is_empty());
    }

    #[test]
    fn directive_heads() {
        assert_eq!(directive_head("check: x"), Some(("check", " x")));
        assert_eq!(directive_head("count 3: x"), Some(("count 3", " x")));
        assert_eq!(directive_head("count x: y"), None);
        assert_eq!(directive_head("http://a"), None);
        assert_eq!(directive_head("Note: a"), None);
        assert_eq!(directive_head("two words: a"), None);
    }
}
