//! A line diff (Myers' O(ND) algorithm) printed as a unified diff, for the
//! messages of a mismatch and of a bless.

/// One line of an edit script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Edit {
    Keep,
    Delete,
    Insert,
}

/// Beyond this many differing lines the middle of the two texts is shown as
/// one replacement (Myers' traces would grow quadratically).
const MAX_EDITS: usize = 4000;

/// The edit script turning `a` into `b`: one entry per line of the script,
/// in order.
fn edits(a: &[&str], b: &[&str]) -> Vec<Edit> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut out = vec![Edit::Keep; prefix];
    out.extend(myers(ma, mb).unwrap_or_else(|| {
        let mut e = vec![Edit::Delete; ma.len()];
        e.extend(std::iter::repeat_n(Edit::Insert, mb.len()));
        e
    }));
    out.extend(std::iter::repeat_n(Edit::Keep, suffix));
    out
}

/// Myers' greedy shortest edit script; `None` past [`MAX_EDITS`].
fn myers(a: &[&str], b: &[&str]) -> Option<Vec<Edit>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let max = (n + m) as usize;
    if max == 0 {
        return Some(Vec::new());
    }
    let offset = max as isize;
    let mut v = vec![0isize; 2 * max + 2];
    let mut trace: Vec<Vec<isize>> = Vec::new();
    let idx = |k: isize| (k + offset) as usize;
    let mut done = false;
    for d in 0..=max.min(MAX_EDITS) as isize {
        trace.push(v.clone());
        let mut k = -d;
        while k <= d {
            let mut x = if k == -d || (k != d && v[idx(k - 1)] < v[idx(k + 1)]) {
                v[idx(k + 1)]
            } else {
                v[idx(k - 1)] + 1
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[idx(k)] = x;
            if x >= n && y >= m {
                done = true;
                break;
            }
            k += 2;
        }
        if done {
            break;
        }
    }
    if !done {
        return None;
    }
    // Walk back through the traces.
    let mut script = Vec::new();
    let (mut x, mut y) = (n, m);
    for d in (0..trace.len() as isize).rev() {
        let v = &trace[d as usize];
        let k = x - y;
        let prev_k = if k == -d || (k != d && v[idx(k - 1)] < v[idx(k + 1)]) {
            k + 1
        } else {
            k - 1
        };
        let prev_x = v[idx(prev_k)];
        let prev_y = prev_x - prev_k;
        while x > prev_x && y > prev_y {
            script.push(Edit::Keep);
            x -= 1;
            y -= 1;
        }
        if d > 0 {
            if x == prev_x {
                script.push(Edit::Insert);
                y -= 1;
            } else {
                script.push(Edit::Delete);
                x -= 1;
            }
        }
    }
    script.reverse();
    Some(script)
}

/// `old` → `new` as a unified diff with three lines of context, headed
/// `--- {name} (expected)` / `+++ {name} (actual)`; empty if they are equal.
pub fn unified_diff(name: &str, old: &str, new: &str) -> String {
    unified_diff_at(name, old, new, 0)
}

/// [`unified_diff`] of two texts that start after line `offset` of a file:
/// the hunks give the file's line numbers.
pub fn unified_diff_at(name: &str, old: &str, new: &str, offset: usize) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let script = edits(&a, &b);
    // Line numbers (0-based) in a and b before each script entry.
    let mut pos = Vec::with_capacity(script.len() + 1);
    let (mut i, mut j) = (0usize, 0usize);
    for e in &script {
        pos.push((i, j));
        match e {
            Edit::Keep => {
                i += 1;
                j += 1;
            }
            Edit::Delete => i += 1,
            Edit::Insert => j += 1,
        }
    }
    pos.push((i, j));
    const CONTEXT: usize = 3;
    let changed: Vec<usize> = (0..script.len())
        .filter(|&s| script[s] != Edit::Keep)
        .collect();
    let mut out = format!("--- {name} (expected)\n+++ {name} (actual)\n");
    let mut h = 0;
    while h < changed.len() {
        let start = changed[h].saturating_sub(CONTEXT);
        let mut end = changed[h] + 1;
        while h + 1 < changed.len() && changed[h + 1] <= end + 2 * CONTEXT {
            h += 1;
            end = changed[h] + 1;
        }
        let end = (end + CONTEXT).min(script.len());
        let (a0, b0) = pos[start];
        let (a1, b1) = pos[end];
        let range = |from: usize, to: usize| {
            let len = to - from;
            let first = offset + if len == 0 { from } else { from + 1 };
            format!("{first},{len}")
        };
        out.push_str(&format!("@@ -{} +{} @@\n", range(a0, a1), range(b0, b1)));
        for s in start..end {
            let (pi, pj) = pos[s];
            match script[s] {
                Edit::Keep => out.push_str(&format!(" {}\n", a[pi])),
                Edit::Delete => out.push_str(&format!("-{}\n", a[pi])),
                Edit::Insert => out.push_str(&format!("+{}\n", b[pj])),
            }
        }
        h += 1;
    }
    if !old.is_empty() && !new.is_empty() && old.ends_with('\n') != new.ends_with('\n') {
        out.push_str("\\ the final newline differs\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies the script of `edits(a, b)` to `a`; it must give `b`.
    fn check(a: &str, b: &str) {
        let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
        let script = edits(&la, &lb);
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        for e in script {
            match e {
                Edit::Keep => {
                    assert_eq!(la[i], lb[j]);
                    out.push(la[i]);
                    i += 1;
                    j += 1;
                }
                Edit::Delete => i += 1,
                Edit::Insert => {
                    out.push(lb[j]);
                    j += 1;
                }
            }
        }
        assert_eq!((i, j), (la.len(), lb.len()));
        assert_eq!(out, lb);
    }

    #[test]
    fn scripts_turn_the_old_text_into_the_new() {
        let texts = [
            "",
            "a",
            "a\nb\nc",
            "a\nx\nc\nd",
            "x\ny",
            "b\nc\na\nb\nb\na",
            "a\nb\nc\na\nb\nb\na",
        ];
        for a in texts {
            for b in texts {
                check(a, b);
            }
        }
    }

    #[test]
    fn a_unified_diff_has_hunks_with_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n11\n12\n13\n";
        let d = unified_diff("f.ir", old, new);
        assert_eq!(
            d,
            "--- f.ir (expected)\n+++ f.ir (actual)\n\
             @@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n\
             @@ -10,3 +10,4 @@\n 10\n 11\n 12\n+13\n"
        );
        assert_eq!(unified_diff("f", "same\n", "same\n"), "");
        assert_eq!(
            unified_diff("f", "", "new\n"),
            "--- f (expected)\n+++ f (actual)\n@@ -0,0 +1,1 @@\n+new\n"
        );
    }
}
