//! `adze dump --format html`: every stage printed side by side on one
//! self-contained page, the AD passes' annotations as hover text.
//!
//! The page is built from the text dumps themselves (what `adze dump
//! --format text --annotate ..` prints for each stage), so a column holds
//! exactly that text: each line is split into its code and its trailing
//! comment ([`split_comment`], the IR lexer's rule: a comment starts at
//! the first `;` outside a string literal), the code is shown and the
//! comment becomes the line's `title` (the browser's hover text). A
//! block's notes, which the annotator prints on lines of their own after
//! the block's header, become the header line's hover text. Each comment
//! is also kept, hidden, right after its line, and a checkbox (CSS only)
//! shows them all: the column then reads exactly as the text dump.
//!
//! No script and no external resource: inline CSS, and a
//! Content-Security-Policy that forbids loading anything.

use std::fmt::Write;

/// Escapes `text` for HTML text or a quoted attribute value: `& < > " '`
/// as character references, and newlines as `&#10;` when `attribute`
/// (a `title` shows them as line breaks).
pub fn escape(text: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\r' if attribute => out.push_str("&#13;"),
            c => out.push(c),
        }
    }
    out
}

/// Splits one line of IR text at its comment, as the IR's lexer
/// (`adze_ir::parse`) does: the comment starts at the first `;` outside a
/// string literal (strings are `"..."` with `\` escapes, e.g. the name in
/// `zeros 3, "a;b"`). Returns the code (without the whitespace before the
/// comment) and the comment's text (after the `;`, trimmed), if any. The
/// writer puts an instruction's notes after `  ; ` and a block's on lines
/// of their own (`    ; note`, whose code is then empty).
pub fn split_comment(line: &str) -> (&str, Option<&str>) {
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if c == ';' {
            return (line[..i].trim_end(), Some(line[i + 1..].trim()));
        }
    }
    (line, None)
}

/// One line of a column: its code, what follows the code in the dump
/// (the comment and, for a block's header, the lines of the block's
/// notes), and the notes the hover text shows.
struct Line<'a> {
    code: &'a str,
    rest: String,
    notes: Vec<&'a str>,
}

/// The lines of one stage's dump, the comments split off and a block's
/// notes attached to its header.
fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out: Vec<Line<'_>> = Vec::new();
    for raw in text.lines() {
        let (code, comment) = split_comment(raw);
        match comment {
            // A comment on a line of its own: a note on the line above
            // (a block's header or the note before), if there is one.
            Some(note) if code.trim().is_empty() => match out.last_mut() {
                Some(prev) if !prev.code.trim().is_empty() => {
                    prev.rest.push('\n');
                    prev.rest.push_str(raw);
                    prev.notes.push(note);
                }
                _ => out.push(Line {
                    code: raw,
                    rest: String::new(),
                    notes: Vec::new(),
                }),
            },
            Some(note) => out.push(Line {
                code,
                rest: raw[code.len()..].to_string(),
                notes: vec![note],
            }),
            None => out.push(Line {
                code: raw,
                rest: String::new(),
                notes: Vec::new(),
            }),
        }
    }
    out
}

/// The page's style sheet (no external resource).
const STYLE: &str = "\
:root { color-scheme: light dark; }
body { margin: 0; font-family: system-ui, sans-serif; }
header { padding: 0.5rem 1rem; border-bottom: 1px solid #8884; }
header h1 { font-size: 1rem; margin: 0 0 0.25rem 0; font-family: ui-monospace, monospace; }
header p { margin: 0; font-size: 0.85rem; }
#show-notes { margin: 0.5rem 0 0.5rem 1rem; }
main.stages { display: flex; gap: 0.75rem; align-items: flex-start; padding: 0 1rem 1rem 1rem; }
section.stage { flex: 1 1 0; min-width: 24rem; border: 1px solid #8886; border-radius: 4px; }
section.stage h2 { font-size: 0.95rem; margin: 0; padding: 0.3rem 0.5rem; background: #8882; \
position: sticky; top: 0; }
section.stage pre { margin: 0; padding: 0.5rem; overflow-x: auto; font-size: 0.8rem; line-height: 1.35; }
.l.noted { text-decoration: underline dotted #3070c0; cursor: help; }
.l.noted:hover { background: #3070c033; }
.note { display: none; color: #6a7a8a; font-style: italic; }
#show-notes:checked ~ main .note { display: inline; }
";

/// The page: `title` (the command that made it) and one column per stage,
/// each given as (stage name, its text dump). A dump that starts with the
/// `; stage: NAME ..` line has it as the column's heading.
pub fn page(title: &str, stages: &[(&str, &str)]) -> String {
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" \
         content=\"default-src 'none'; style-src 'unsafe-inline'\">\n",
    );
    let _ = writeln!(out, "<title>{}</title>", escape(title, false));
    let _ = writeln!(out, "<style>\n{STYLE}</style>\n</head>\n<body>");
    let _ = writeln!(
        out,
        "<header>\n<h1>{}</h1>\n<p>One column per stage. Underlined lines carry the AD \
         passes' annotations (activity, tape, rules): hover over one to read them \
         (a block's notes are on its header line).</p>\n</header>",
        escape(title, false)
    );
    out.push_str(
        "<input type=\"checkbox\" id=\"show-notes\">\
         <label for=\"show-notes\">show every annotation in the text</label>\n",
    );
    out.push_str("<main class=\"stages\">\n");
    for (stage, text) in stages {
        let (heading, body) = match text.split_once('\n') {
            Some((first, rest)) if first.starts_with("; stage: ") => (&first[2..], rest),
            _ => ("", *text),
        };
        let heading = if heading.is_empty() {
            format!("stage: {stage}")
        } else {
            heading.to_string()
        };
        let _ = writeln!(
            out,
            "<section class=\"stage\" id=\"stage-{0}\" data-stage=\"{0}\">\n<h2>{1}</h2>",
            escape(stage, true),
            escape(&heading, false)
        );
        out.push_str("<pre>");
        for line in lines(body) {
            if line.notes.is_empty() {
                let _ = write!(out, "<span class=\"l\">{}</span>", escape(line.code, false));
            } else {
                let _ = write!(
                    out,
                    "<span class=\"l noted\" title=\"{}\">{}</span>",
                    escape(&line.notes.join("\n"), true),
                    escape(line.code, false)
                );
            }
            if !line.rest.is_empty() {
                let _ = write!(
                    out,
                    "<span class=\"note\">{}</span>",
                    escape(&line.rest, false)
                );
            }
            out.push('\n');
        }
        out.push_str("</pre>\n</section>\n");
    }
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_the_special_characters() {
        assert_eq!(
            escape("a < b && c > \"d\" 'e'", false),
            "a &lt; b &amp;&amp; c &gt; &quot;d&quot; &#39;e&#39;"
        );
        assert_eq!(escape("one\ntwo", false), "one\ntwo");
        assert_eq!(escape("one\ntwo", true), "one&#10;two");
        assert_eq!(escape("&amp;", false), "&amp;amp;");
        assert_eq!(
            escape("plain `sqr` (level 0)", true),
            "plain `sqr` (level 0)"
        );
    }

    #[test]
    fn the_comment_is_split_where_the_ir_lexer_starts_it() {
        // An instruction's notes, as the annotator writes them.
        let line = "    v13 = call @sqr(v12) !44:33  ; calls `sqr` (level 0); activity (reverse: a active): v13 active";
        assert_eq!(
            split_comment(line),
            (
                "    v13 = call @sqr(v12) !44:33",
                Some("calls `sqr` (level 0); activity (reverse: a active): v13 active")
            )
        );
        // A block's note: no code.
        assert_eq!(
            split_comment("    ; activity (reverse: x active): v6 active"),
            ("", Some("activity (reverse: x active): v6 active"))
        );
        // No comment.
        assert_eq!(
            split_comment("block1(v5: i64):"),
            ("block1(v5: i64):", None)
        );
        assert_eq!(split_comment(""), ("", None));
        // A `;` inside a string literal is not a comment, nor is an
        // escaped quote the string's end.
        assert_eq!(
            split_comment(r#"    v3 = zeros v2, "a;b"  ; note"#),
            (r#"    v3 = zeros v2, "a;b""#, Some("note"))
        );
        assert_eq!(
            split_comment(r#"    v3 = zeros v2, "q\";\\"  ; n; m"#),
            (r#"    v3 = zeros v2, "q\";\\""#, Some("n; m"))
        );
        assert_eq!(
            split_comment("source \"x;y.adz\""),
            ("source \"x;y.adz\"", None)
        );
    }

    #[test]
    fn a_blocks_notes_go_to_its_header() {
        let text = "function @f(x: f64) -> f64 {\nblock0(v0: f64):\n    ; one\n    ; two\n    return v0  ; three\n}\n";
        let ls = lines(text);
        let codes: Vec<&str> = ls.iter().map(|l| l.code).collect();
        assert_eq!(
            codes,
            [
                "function @f(x: f64) -> f64 {",
                "block0(v0: f64):",
                "    return v0",
                "}"
            ]
        );
        assert_eq!(ls[1].notes, ["one", "two"]);
        assert_eq!(ls[1].rest, "\n    ; one\n    ; two");
        assert_eq!(ls[2].notes, ["three"]);
        assert_eq!(ls[2].rest, "  ; three");
        // The code and what follows it give the text back.
        let back: Vec<String> = ls.iter().map(|l| format!("{}{}", l.code, l.rest)).collect();
        assert_eq!(back.join("\n") + "\n", text);
    }

    #[test]
    fn the_page_escapes_and_titles_the_notes() {
        let dump = "; stage: ad\nfunction @f<x>(x: f64) -> f64 {\nblock0(v0: f64):\n    ; a \"note\" & <more>\n    return v0  ; it's\n}\n";
        let page = page("adze dump <f>", &[("ad", dump)]);
        assert!(page.contains("<title>adze dump &lt;f&gt;</title>"));
        assert!(page.contains("<h2>stage: ad</h2>"));
        assert!(page.contains("<span class=\"l\">function @f&lt;x&gt;(x: f64) -&gt; f64 {</span>"));
        assert!(page.contains(
            "<span class=\"l noted\" title=\"a &quot;note&quot; &amp; &lt;more&gt;\">block0(v0: f64):</span>"
        ));
        assert!(page.contains("<span class=\"l noted\" title=\"it&#39;s\">    return v0</span>"));
        assert!(!page.contains("http://") && !page.contains("https://"));
        assert!(!page.contains("<script"));
    }
}
