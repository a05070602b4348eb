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
        let simplified = r.expressions(&mut lines);
        if (lines.len() == before && !simplified) || r.exhausted() {
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

    /// Simplifies expressions inside lines (see [`simplifications`]);
    /// returns whether anything changed.
    fn expressions(&mut self, lines: &mut [String]) -> bool {
        let mut changed = false;
        for i in 0..lines.len() {
            let mut progress = true;
            while progress && !self.exhausted() {
                progress = false;
                for cand in simplifications(&lines[i]) {
                    let old = std::mem::replace(&mut lines[i], cand);
                    if self.test(lines) {
                        progress = true;
                        changed = true;
                        break;
                    }
                    lines[i] = old;
                }
            }
        }
        changed
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

/// Names whose calls the expression phase leaves alone (replacing them by
/// an argument can never type-check).
const KEEP_CALLS: [&str; 8] = [
    "autodiff", "zeros", "dual", "const", "active", "dup", "fill", "len",
];

/// Byte ranges `(start, end)` of the depth-0 operands of `s` split at
/// binary arithmetic operators written with spaces around them (the
/// generator always writes them so; a unary minus has none after it).
fn operands(s: &str) -> Vec<(usize, usize)> {
    let b = s.as_bytes();
    let mut depth = 0i64;
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b' ' if depth == 0
                && i + 2 < b.len()
                && matches!(b[i + 1], b'+' | b'-' | b'*' | b'/' | b'^')
                && b[i + 2] == b' ' =>
            {
                out.push((start, i));
                start = i + 3;
                i += 3;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out.push((start, b.len()));
    out
}

/// Depth-0 comma-separated parts of `s`.
fn split_commas(s: &str) -> Vec<&str> {
    let mut depth = 0i64;
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out
}

/// `if C { A } else { B }` → `(A, B)`.
fn if_branches(s: &str) -> Option<(&str, &str)> {
    let s = s.strip_prefix("if ")?;
    let mut depth = 0i64;
    let mut open = None;
    let mut blocks = Vec::new();
    for (i, c) in s.char_indices() {
        match c {
            '{' => {
                if depth == 0 {
                    open = Some(i + 1);
                }
                depth += 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    blocks.push(s[open?..i].trim());
                }
            }
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            _ => {}
        }
    }
    match blocks.as_slice() {
        [a, b] => Some((a, b)),
        _ => None,
    }
}

/// The part of a line that is an expression: a `let`/`var`/assignment's
/// right-hand side, a `return` value, or a tail line.
fn expr_region(line: &str) -> Option<(usize, usize)> {
    let t = line.trim_end();
    if t.ends_with('{') || t.ends_with('}') || t.trim_start().starts_with("//") {
        return None;
    }
    let lead = line.len() - line.trim_start().len();
    if let Some(body) = t.strip_suffix(';') {
        if let Some(p) = body.find(" = ") {
            return Some((p + 3, body.len()));
        }
        if let Some(p) = body.find("return ") {
            return Some((p + 7, body.len()));
        }
        return None;
    }
    (t.len() > lead).then_some((lead, t.len()))
}

/// Simpler versions of one line, most aggressive first.
fn simplifications(line: &str) -> Vec<String> {
    let t = line.trim_start();
    // Loop headers stay as they are: a `while` line carries its counter's
    // increment (`while j < 3 { j = j + 1;`), and simplifying that to
    // `j = j;` would make the program run forever.
    if ["fn ", "rule ", "#[", "while ", "for "]
        .iter()
        .any(|p| t.starts_with(p))
    {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut replace = |a: usize, b: usize, with: &str| {
        let cand = format!("{}{}{}", &line[..a], with, &line[b..]);
        if cand != line && !out.contains(&cand) {
            out.push(cand);
        }
    };
    // The whole expression: one of its operands, or all but one.
    if let Some((a, b)) = expr_region(line) {
        let region = &line[a..b];
        let ops = operands(region);
        if ops.len() > 1 {
            for &(s, e) in &ops {
                replace(a, b, &region[s..e]);
            }
            for k in 0..ops.len() {
                let (s, e) = if k == 0 {
                    (ops[0].0, ops[1].0)
                } else {
                    (ops[k - 1].1, ops[k].1)
                };
                replace(a + s, a + e, "");
            }
        }
    }
    // Each parenthesised group, outermost first: a call by one of its
    // arguments, `(if ..)` by a branch, `(a op b)` by an operand; any
    // group by `x`.
    let bytes = line.as_bytes();
    let mut stack = Vec::new();
    let mut groups = Vec::new();
    for (i, &c) in bytes.iter().enumerate() {
        if c == b'(' {
            stack.push(i);
        } else if c == b')' {
            if let Some(o) = stack.pop() {
                groups.push((stack.len(), o, i));
            }
        }
    }
    groups.sort();
    let (lo, hi) = expr_region(line).unwrap_or((0, 0));
    for (_, open, close) in groups {
        if open < lo || close >= hi {
            continue;
        }
        let mut start = open;
        while start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            start -= 1;
        }
        let callee = &line[start..open];
        if KEEP_CALLS.contains(&callee) {
            continue;
        }
        if callee.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let inner = &line[open + 1..close];
        if !callee.is_empty() {
            // A call: not `f64(i)` nor `i64(x)` (an argument of the other
            // type), nor a tuple pattern.
            if callee == "f64" || callee == "i64" {
                continue;
            }
            for arg in split_commas(inner) {
                replace(start, close + 1, &format!("({arg})"));
            }
        } else if let Some((x, y)) = if_branches(inner) {
            replace(open, close + 1, &format!("({x})"));
            replace(open, close + 1, &format!("({y})"));
        } else {
            let ops = operands(inner);
            if ops.len() > 1 {
                for &(s, e) in &ops {
                    replace(open, close + 1, &format!("({})", &inner[s..e]));
                }
            }
        }
        replace(start, close + 1, "x");
    }
    out
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
    fn expressions_are_split_at_their_operators_and_groups() {
        let c = simplifications("    let v = (a + sin(b)) * c - d;");
        assert!(c.contains(&"    let v = c;".to_string()), "{c:?}");
        assert!(c.contains(&"    let v = (a + sin(b)) * c;".to_string()));
        assert!(c.contains(&"    let v = (a) * c - d;".to_string()));
        assert!(c.contains(&"    let v = (a + (b)) * c - d;".to_string()));
        let c = simplifications("    (if y < x { 1.0 } else { -(x) }) + y");
        assert!(c.contains(&"    (-(x)) + y".to_string()), "{c:?}");
        assert!(simplifications("fn f(x: f64) -> f64 {").is_empty());
        assert!(simplifications("    while j1 < 3 && (x < 1.0) { j1 = j1 + 1;").is_empty());
        let c =
            simplifications("    let (a, b) = autodiff(reverse, f, active, active(x), active(y));");
        assert!(c.is_empty(), "{c:?}");
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
