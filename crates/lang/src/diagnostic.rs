//! Diagnostics: what the front end reports about bad input.
//!
//! Every stage reports [`Diagnostic`]s that carry a byte [`Span`] of the
//! source, a message, an optional label for the underlined span, and a
//! mandatory help text that says what to do. [`Diagnostics`] bundles them with
//! the file name and source text, and renders them with `codespan-reporting`
//! (no colour) or as a one-line `file:line:col: error: message` summary.

use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor::NoColor};
use std::fmt;

/// A byte range of the source text, `start..end`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }

    /// The empty span at the end of this one.
    pub fn end_point(self) -> Span {
        Span::new(self.end, self.end)
    }
}

/// An error stops compilation; a warning does not.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Severity {
    #[default]
    Error,
    Warning,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One error (or warning): where, what, and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub span: Span,
    pub message: String,
    /// Text printed under the span (may be empty).
    pub label: String,
    /// What the user should do; rendered as `= help: ...`.
    pub help: String,
    /// Other places worth showing (a previous definition, a declaration).
    pub secondary: Vec<(Span, String)>,
}

impl Diagnostic {
    pub fn new(span: Span, message: impl Into<String>, help: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            span,
            message: message.into(),
            label: String::new(),
            help: help.into(),
            secondary: Vec::new(),
        }
    }

    /// A warning: reported, but compilation goes on.
    pub fn warning(span: Span, message: impl Into<String>, help: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::new(span, message, help)
        }
    }

    pub fn label(mut self, label: impl Into<String>) -> Diagnostic {
        self.label = label.into();
        self
    }

    pub fn secondary(mut self, span: Span, label: impl Into<String>) -> Diagnostic {
        self.secondary.push((span, label.into()));
        self
    }
}

/// One or more errors about one source file.
#[derive(Clone, Debug)]
pub struct Diagnostics {
    file_name: String,
    source: String,
    errors: Vec<Diagnostic>,
}

impl Diagnostics {
    /// Bundles errors with the source they refer to. `errors` should not be
    /// empty; spans are clamped to the source.
    pub fn new(file_name: &str, source: &str, errors: Vec<Diagnostic>) -> Diagnostics {
        let clamp = |mut d: Diagnostic| {
            d.span = clamp_span(source, d.span);
            for (s, _) in &mut d.secondary {
                *s = clamp_span(source, *s);
            }
            d
        };
        Diagnostics {
            file_name: file_name.to_string(),
            source: source.to_string(),
            errors: errors.into_iter().map(clamp).collect(),
        }
    }

    /// Other diagnostics about the same file.
    pub fn new_like(other: &Diagnostics, errors: Vec<Diagnostic>) -> Diagnostics {
        Diagnostics::new(&other.file_name, &other.source, errors)
    }

    /// The errors, in the order they were found.
    pub fn errors(&self) -> &[Diagnostic] {
        &self.errors
    }

    pub fn len(&self) -> usize {
        self.errors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        line_col(&self.source, offset)
    }

    /// Each diagnostic as its one-line summary, a blank line and its
    /// rendered excerpt (what the command prints for warnings).
    pub fn report(&self) -> String {
        let mut out = String::new();
        for d in &self.errors {
            let one = Diagnostics {
                file_name: self.file_name.clone(),
                source: self.source.clone(),
                errors: vec![d.clone()],
            };
            out += &format!("{}\n\n{}", one.summary(), one.render());
        }
        out
    }

    /// All errors, rendered by `codespan-reporting` without colour.
    pub fn render(&self) -> String {
        let file = SimpleFile::new(self.file_name.as_str(), self.source.as_str());
        let config = term::Config::default();
        let mut out = NoColor::new(Vec::<u8>::new());
        for d in &self.errors {
            let mut labels =
                vec![Label::primary((), d.span.start..d.span.end).with_message(d.label.clone())];
            labels.extend(
                d.secondary
                    .iter()
                    .map(|(s, m)| Label::secondary((), s.start..s.end).with_message(m.clone())),
            );
            let diag = match d.severity {
                Severity::Error => CsDiagnostic::error(),
                Severity::Warning => CsDiagnostic::warning(),
            };
            let diag = diag
                .with_message(d.message.clone())
                .with_labels(labels)
                .with_notes(vec![format!("help: {}", d.help)]);
            if term::emit(&mut out, &config, &file, &diag).is_err() {
                // Spans are clamped, so this cannot happen; fall back to the
                // summary rather than panic.
                return self.summary();
            }
        }
        String::from_utf8_lossy(&out.into_inner()).into_owned()
    }

    /// One line: `file:line:col: error: message` of the first error
    /// (`warning:` for a warning).
    pub fn summary(&self) -> String {
        match self.errors.first() {
            Some(d) => {
                let (line, col) = self.line_col(d.span.start);
                format!(
                    "{}:{line}:{col}: {}: {}",
                    self.file_name,
                    d.severity.name(),
                    d.message
                )
            }
            None => format!("{}: error: no diagnostics", self.file_name),
        }
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary())
    }
}

impl std::error::Error for Diagnostics {}

fn clamp_span(source: &str, span: Span) -> Span {
    let fix = |mut i: usize| {
        i = i.min(source.len());
        while !source.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    let start = fix(span.start);
    Span::new(start, fix(span.end).max(start))
}

/// 1-based line and column (in characters) of a byte offset of `source`.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = clamp_span(source, Span::new(offset, offset)).start;
    let before = &source[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters() {
        let src = "ab\nçd x";
        assert_eq!(line_col(src, 0), (1, 1));
        assert_eq!(line_col(src, 3), (2, 1));
        assert_eq!(line_col(src, src.find('x').unwrap()), (2, 4));
        assert_eq!(line_col(src, 1000), (2, 5));
    }

    #[test]
    fn summary_and_render() {
        let d = Diagnostic::new(Span::new(3, 4), "bad thing", "do better").label("here");
        let ds = Diagnostics::new("a.adz", "fn f", vec![d]);
        assert_eq!(ds.summary(), "a.adz:1:4: error: bad thing");
        assert_eq!(ds.to_string(), ds.summary());
        let r = ds.render();
        assert!(r.starts_with("error: bad thing"), "{r}");
        assert!(r.contains("┌─ a.adz:1:4"), "{r}");
        assert!(r.contains("= help: do better"), "{r}");
    }

    #[test]
    fn spans_are_clamped() {
        let d = Diagnostic::new(Span::new(10, 20), "m", "h");
        let ds = Diagnostics::new("a.adz", "aé", vec![d]);
        assert_eq!(ds.errors()[0].span, Span::new(3, 3));
        assert!(ds.render().contains("error: m"));
    }
}
