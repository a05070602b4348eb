//! The reducer: shrinks a program while a predicate ("still valid and still
//! disagrees the same way") holds.
//!
//! Delta debugging (ddmin) over the source text at two levels: items (runs
//! of non-blank lines: a `fn` or `rule` with its attribute) and lines.
//! Deleting one line of a `{ .. }` block leaves unbalanced braces, so the
//! line level also tries, before plain ddmin, each balanced block as a unit
//! (an `if`, a loop, an `else` branch), and unwrapping a block (deleting its
//! first and last lines, keeping its body). The predicate is responsible for
//! validity: a candidate that does not compile must be rejected by it.

use std::collections::HashMap;

/// Shrinks `source` while `still(candidate)` holds; `still(source)` is
/// assumed. Stops after `max_tests` evaluations of the predicate (each
/// distinct candidate is evaluated once).
pub fn reduce(source: &str, still: impl FnMut(&str) -> bool, max_tests: usize) -> String {
    let mut r = Reducer {
        still,
        cache: HashMap::new(),
        tests: 0,
        max_tests,
    };
    let mut lines: Vec<String> = source.lines().map(str::to_string).collect();
    loop {
        let before = lines.len();
        lines = r.items(lines);
        lines = r.blocks(lines);
        lines = r.ddmin(lines);
        if lines.len() == before || r.exhausted() {
            break;
        }
    }
    // Drop blank lines left between deleted items, if that keeps the
    // predicate (it should: blank lines mean nothing).
    let compact: Vec<String> = squeeze_blank(&lines);
    if compact.len() < lines.len() && r.test(&compact) {
        lines = compact;
    }
    join(&lines)
}

struct Reducer<F> {
    still: F,
    cache: HashMap<String, bool>,
    tests: usize,
    max_tests: usize,
}

fn join(lines: &[String]) -> String {
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

fn squeeze_blank(lines: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in lines {
        let blank = l.trim().is_empty();
        if blank && out.last().is_none_or(|p| p.trim().is_empty()) {
            continue;
        }
        out.push(l.clone());
    }
    while out.last().is_some_and(|l| l.trim().is_empty()) {
        out.pop();
    }
    out
}

/// The net brace count of a line: `{` minus `}` (the language has no
/// strings or characters; `//` comments are skipped).
fn net(line: &str) -> i64 {
    let code = line.split("//").next().unwrap_or("");
    code.chars()
        .map(|c| match c {
            '{' => 1,
            '}' => -1,
            _ => 0,
        })
        .sum()
}

impl<F: FnMut(&str) -> bool> Reducer<F> {
    fn exhausted(&self) -> bool {
        self.tests >= self.max_tests
    }

    fn test(&mut self, lines: &[String]) -> bool {
        let text = join(lines);
        if let Some(&r) = self.cache.get(&text) {
            return r;
        }
        if self.exhausted() {
            return false;
        }
        self.tests += 1;
        let r = (self.still)(&text);
        self.cache.insert(text, r);
        r
    }

    /// Items: maximal runs of non-blank lines. Tries deleting each, last
    /// first (the derivative chain is at the end and rules are often the
    /// last thing a disagreement needs).
    fn items(&mut self, mut lines: Vec<String>) -> Vec<String> {
        let mut i = lines.len();
        while i > 0 {
            i -= 1;
            if lines[i].trim().is_empty() {
                continue;
            }
            let end = i + 1;
            let mut start = i;
            while start > 0 && !lines[start - 1].trim().is_empty() {
                start -= 1;
            }
            let mut cand = lines.clone();
            cand.drain(start..end);
            if self.test(&cand) {
                lines = cand;
            }
            i = start;
        }
        lines
    }

    /// The balanced ranges of lines: from a line that opens more braces
    /// than it closes to the line that closes them; and the tail of an
    /// `if` from a `} else {` line to just before its closing line.
    fn ranges(lines: &[String]) -> Vec<(usize, usize, bool)> {
        let mut out = Vec::new();
        for i in 0..lines.len() {
            let n = net(&lines[i]);
            let t = lines[i].trim();
            let else_line = n == 0 && t.starts_with('}') && t.ends_with('{');
            if n <= 0 && !else_line {
                continue;
            }
            let mut depth = if else_line { 1 } else { n };
            for (j, l) in lines.iter().enumerate().skip(i + 1) {
                depth += net(l);
                if depth <= 0 {
                    if else_line {
                        out.push((i, j - 1, false));
                    } else {
                        out.push((i, j, true));
                    }
                    break;
                }
            }
        }
        // Largest first.
        out.sort_by_key(|&(a, b, _)| std::cmp::Reverse(b - a));
        out
    }

    /// Deletes whole blocks, then unwraps blocks (keeps the body).
    fn blocks(&mut self, mut lines: Vec<String>) -> Vec<String> {
        let mut changed = true;
        while changed && !self.exhausted() {
            changed = false;
            for (a, b, whole) in Self::ranges(&lines) {
                let mut cand = lines.clone();
                cand.drain(a..=b);
                if self.test(&cand) {
                    lines = cand;
                    changed = true;
                    break;
                }
                if whole && b > a + 1 {
                    let mut cand = lines.clone();
                    cand.remove(b);
                    cand.remove(a);
                    if self.test(&cand) {
                        lines = cand;
                        changed = true;
                        break;
                    }
                }
            }
        }
        lines
    }

    /// Classic ddmin on lines: delete chunks of n/2, n/4, .., single lines.
    fn ddmin(&mut self, mut lines: Vec<String>) -> Vec<String> {
        let mut chunk = (lines.len() / 2).max(1);
        loop {
            let mut i = 0;
            let mut progress = false;
            while i < lines.len() && !self.exhausted() {
                let end = (i + chunk).min(lines.len());
                let mut cand = lines.clone();
                cand.drain(i..end);
                if !cand.is_empty() && self.test(&cand) {
                    lines = cand;
                    progress = true;
                } else {
                    i += chunk;
                }
            }
            if self.exhausted() {
                break;
            }
            if chunk == 1 {
                if !progress {
                    break;
                }
            } else {
                chunk = (chunk / 2).max(1);
            }
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_are_counted_outside_comments() {
        assert_eq!(net("if x < y { // {"), 1);
        assert_eq!(net("} else {"), 0);
        assert_eq!(net("}"), -1);
    }

    #[test]
    fn ranges_find_blocks_and_else_branches() {
        let src = "fn f() {\nif c {\na\n} else {\nb\n}\n}";
        let lines: Vec<String> = src.lines().map(str::to_string).collect();
        let r = Reducer::<fn(&str) -> bool>::ranges(&lines);
        assert!(r.contains(&(0, 6, true)));
        assert!(r.contains(&(1, 5, true)));
        assert!(r.contains(&(3, 4, false)));
    }

    #[test]
    fn ddmin_finds_two_needed_lines() {
        let src: String = (0..40).map(|i| format!("line{i}\n")).collect();
        let out = reduce(
            &src,
            |s| s.contains("line7\n") && s.contains("line31\n"),
            10_000,
        );
        assert_eq!(out, "line7\nline31\n");
    }
}
