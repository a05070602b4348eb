//! `adze dump --format html` (docs/inspecting.md): one self-contained
//! page, a column per stage holding exactly the stage's annotated text
//! dump, the annotations as hover text (`title`), no script and nothing
//! fetched; well-formed (a small tag checker here); rendered by a headless
//! browser when one is installed (skipped otherwise).

use crate::support::{adze, examples};

const STAGES: [&str; 4] = ["parsed", "inlined", "ad", "optimized"];

/// (example, function, mode, inline setting) of each page checked
/// against the text dumps: the seed's rule region (inlined) and a
/// rule-carrying call inside a loop and a branch (not inlined).
const CASES: [(&str, &str, &str, &str); 3] = [
    ("seed", "g_custom", "reverse", "all"),
    ("rules", "weighted", "reverse", "none"),
    ("rules", "weighted", "forward", "early"),
];

/// `&lt;` .. back to `<` ..: the references [`adze::html::escape`] writes.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#10;", "\n")
        .replace("&#13;", "\r")
        .replace("&amp;", "&")
}

/// `html` without its tags.
fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('>').expect("a tag ends") + open;
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// `html` without the `<span class="note">..</span>` elements (which hold
/// the comments, hidden unless asked for).
fn without_notes(html: &str) -> String {
    let open = "<span class=\"note\">";
    let mut out = String::new();
    let mut rest = html;
    while let Some(at) = rest.find(open) {
        out.push_str(&rest[..at]);
        let end = rest[at..].find("</span>").expect("the note ends") + at;
        rest = &rest[end + "</span>".len()..];
    }
    out.push_str(rest);
    out
}

/// The inside of the `<pre>` of the column of `stage`.
fn column<'a>(page: &'a str, stage: &str) -> &'a str {
    let marker = format!("data-stage=\"{stage}\">");
    let at = page
        .find(&marker)
        .unwrap_or_else(|| panic!("no column {stage}"));
    let section = &page[at..];
    let section = &section[..section.find("</section>").expect("the column ends")];
    let pre = section.find("<pre>").expect("a <pre>") + "<pre>".len();
    &section[pre..section.find("</pre>").expect("the <pre> ends")]
}

/// The values of the `title` attributes of `html`, unescaped.
fn titles(html: &str) -> Vec<String> {
    html.split(" title=\"")
        .skip(1)
        .map(|t| unescape(&t[..t.find('"').expect("a quoted title")]))
        .collect()
}

/// Checks that `html` is a well-formed document as the page writes it:
/// every element closed in order (but the void ones), attributes quoted,
/// every `&` a character reference, no stray `<` or `>` in text; `<style>`
/// holds raw text. Panics with where it is not.
fn assert_well_formed(html: &str) {
    const VOID: [&str; 4] = ["meta", "input", "br", "hr"];
    let mut stack: Vec<String> = Vec::new();
    let mut rest = html
        .strip_prefix("<!DOCTYPE html>\n")
        .expect("starts with <!DOCTYPE html>");
    let at = |rest: &str| html.len() - rest.len();
    loop {
        let text_end = rest.find('<').unwrap_or(rest.len());
        let text = &rest[..text_end];
        assert!(!text.contains('>'), "a raw `>` in text at {}", at(rest));
        let mut amp = text;
        while let Some(i) = amp.find('&') {
            let after = &amp[i + 1..];
            let end = after.find(';').unwrap_or_else(|| {
                panic!("a bare `&` at {}", at(rest) + text.len() - amp.len() + i)
            });
            let name = &after[..end];
            let ok = (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphabetic()))
                || name
                    .strip_prefix('#')
                    .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
            assert!(ok, "a bad reference `&{name};` at {}", at(rest));
            amp = &after[end + 1..];
        }
        rest = &rest[text_end..];
        if rest.is_empty() {
            break;
        }
        let close = rest.find('>').expect("a tag ends");
        let tag = &rest[1..close];
        assert!(!tag.contains('<'), "a `<` inside a tag at {}", at(rest));
        assert_eq!(
            tag.matches('"').count() % 2,
            0,
            "unbalanced quotes: <{tag}>"
        );
        rest = &rest[close + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack
                .pop()
                .unwrap_or_else(|| panic!("</{name}> closes nothing"));
            assert_eq!(open, name, "<{open}> closed by </{name}>");
            continue;
        }
        let name: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        assert!(!name.is_empty(), "a tag without a name: <{tag}>");
        let after_name = &tag[name.len()..];
        assert!(
            after_name.is_empty() || after_name.starts_with(' '),
            "<{tag}>"
        );
        if VOID.contains(&name.as_str()) {
            continue;
        }
        if name == "style" {
            let end = rest.find("</style>").expect("the style ends");
            assert!(!rest[..end].contains('<'), "a `<` in the style sheet");
            rest = &rest[end + "</style>".len()..];
            continue;
        }
        stack.push(name);
    }
    assert!(stack.is_empty(), "left open: {stack:?}");
}

/// The checker itself: it takes a good page and rejects broken ones.
#[test]
fn the_well_formedness_checker_rejects_broken_pages() {
    let good =
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><style>a { b: c; }</style></head>\
                <body><p title=\"x &amp; &#10;\">a &lt; b</p></body></html>\n";
    assert_well_formed(good);
    for bad in [
        "<!DOCTYPE html>\n<html><body><p>a < b</p></body></html>",
        "<!DOCTYPE html>\n<html><body><p>a > b</p></body></html>",
        "<!DOCTYPE html>\n<html><body><p>a & b</p></body></html>",
        "<!DOCTYPE html>\n<html><body><p title=\"x>y</p></body></html>",
        "<!DOCTYPE html>\n<html><body><p><span></p></span></body></html>",
        "<!DOCTYPE html>\n<html><body><p></body></html>",
        "<html></html>",
    ] {
        let caught = std::panic::catch_unwind(|| assert_well_formed(bad));
        assert!(caught.is_err(), "accepted: {bad}");
    }
}

/// Nothing that loads anything: no URL, no script, no link, no `src=`.
fn assert_self_contained(html: &str) {
    for bad in [
        "http://", "https://", "src=", "<link", "<script", "url(", "@import", "<img", "<iframe",
    ] {
        assert!(!html.contains(bad), "the page contains `{bad}`");
    }
}

fn dump(file: &str, stage: &str, format: &str, more: &[&str]) -> String {
    let args = [
        &["dump", file, "--stage", stage, "--format", format][..],
        more,
    ]
    .concat();
    adze(&args).exits(0).stdout
}

/// The page of `--stage all --fn F --derive M` has the four columns in
/// order, each one the text `--format text --annotate activity,tape,rules`
/// prints for its stage (the derivative's function first, as the plain
/// dump prints it), and each comment of that text as a line's hover text.
#[test]
fn the_page_has_a_column_per_stage_with_its_text_and_notes() {
    for (example, func, mode, inline) in CASES {
        let file = format!("ir-examples/{example}.adz");
        let what = ["--fn", func, "--derive", mode, "--inline", inline];
        let page = dump(&file, "all", "html", &what);
        let case = format!("{example} {func} {mode} --inline {inline}");
        assert_well_formed(&page);
        assert_self_contained(&page);
        let order: Vec<usize> = STAGES
            .iter()
            .map(|s| page.find(&format!("data-stage=\"{s}\"")).expect(s))
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{case}: {order:?}");
        assert_eq!(
            page.matches("<section class=\"stage\"").count(),
            4,
            "{case}"
        );
        let mut noted = 0;
        for stage in STAGES {
            let annotated = dump(
                &file,
                stage,
                "text",
                &[&what[..], &["--annotate", "activity,tape,rules"]].concat(),
            );
            let col = column(&page, stage);
            // Every character of the text, the comments included.
            let (header, body) = annotated.split_once('\n').unwrap();
            assert_eq!(header, format!("; stage: {stage}"), "{case}");
            assert_eq!(unescape(&strip_tags(col)), body, "{case}: {stage}");
            // The code without the notes starts with the plain dump.
            let code = unescape(&strip_tags(&without_notes(col)));
            let plain = dump(&file, stage, "text", &what);
            let plain = plain.split_once('\n').unwrap().1;
            assert!(code.starts_with(plain), "{case}: {stage}:\n{code}");
            assert!(!code.contains(';'), "{case}: {stage}: a comment left");
            // Each comment is a hover text: an instruction's its own, a
            // block's notes its header's.
            let hover = titles(col);
            noted += hover.len();
            let mut notes: Vec<String> = Vec::new();
            for line in body.lines() {
                match line.split_once("; ") {
                    Some((code, note)) if code.trim().is_empty() => {
                        let last = notes.last_mut().expect("a note after a header");
                        last.push('\n');
                        last.push_str(note);
                    }
                    Some((_, note)) => notes.push(note.to_string()),
                    None if line.ends_with(':') => notes.push(String::new()),
                    None => {}
                }
            }
            notes.retain(|n| !n.is_empty());
            let notes: Vec<String> = notes
                .into_iter()
                .map(|n| n.trim_start_matches('\n').to_string())
                .collect();
            assert_eq!(hover, notes, "{case}: {stage}");
        }
        assert!(noted > 10, "{case}: {noted} notes");
        let all = titles(&page).join("\n");
        for want in ["activity (", "calls ", "(level "] {
            assert!(all.contains(want), "{case}: no `{want}` note");
        }
        if mode == "reverse" {
            assert!(all.contains("tape 0: "), "{case}: no tape note");
        }
        if example == "rules" {
            assert!(all.contains("rule: applies the"), "{case}: no rule applied");
        }
    }
}

/// For every example, the page of the whole module holds every stage's
/// annotated text, and is well-formed and self-contained.
#[test]
fn every_example_makes_a_well_formed_page() {
    for path in examples() {
        let rel = crate::support::relative(&path);
        let page = dump(&rel, "all", "html", &[]);
        assert_well_formed(&page);
        assert_self_contained(&page);
        let text = dump(&rel, "all", "text", &["--annotate", "activity,tape,rules"]);
        let mut chunks: Vec<&str> = text.split("; stage: ").skip(1).collect();
        assert_eq!(chunks.len(), 4, "{rel}");
        for (stage, chunk) in STAGES.iter().zip(chunks.drain(..)) {
            let body = chunk.split_once('\n').unwrap().1;
            assert_eq!(
                unescape(&strip_tags(column(&page, stage))),
                body,
                "{rel}: {stage}"
            );
        }
    }
}

/// One stage, one column; `--annotate` picks the notes; `--format dot`
/// takes no annotations; `--no-opt` says so in the last column's heading.
#[test]
fn annotate_and_stage_select_what_the_page_shows() {
    let file = "ir-examples/rules.adz";
    let what = [
        "--fn", "weighted", "--derive", "reverse", "--inline", "none",
    ];
    let page = dump(file, "ad", "html", &what);
    assert_eq!(page.matches("<section class=\"stage\"").count(), 1);
    assert!(page.contains("<h2>stage: ad</h2>"));
    assert_well_formed(&page);
    let tape = dump(
        file,
        "ad",
        "html",
        &[&what[..], &["--annotate", "tape"]].concat(),
    );
    let notes = titles(&tape).join("\n");
    assert!(notes.contains("tape 0: saves the rule's input"));
    assert!(!notes.contains("activity (") && !notes.contains("rule: applies"));
    let out = adze(&["dump", file, "--format", "dot", "--annotate", "tape"]).exits(1);
    assert!(
        out.stderr
            .contains("`--annotate` is for `--format text` and `--format html`"),
        "{}",
        out.stderr
    );
    let page = dump(file, "all", "html", &[&what[..], &["--no-opt"]].concat());
    assert!(page.contains("<h2>stage: optimized (--no-opt: identical to `ad`)</h2>"));
}

/// The first browser on PATH that can render the page headless.
fn browser() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    let names = [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
        "firefox",
    ];
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// Runs `command` for at most two minutes; its output.
fn run_for_a_while(mut command: std::process::Command) -> std::process::Output {
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the browser starts");
    let start = std::time::Instant::now();
    // Read the output while waiting, so a full pipe cannot block it.
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut out).map(|_| out)
    });
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = Vec::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_end(&mut e, &mut stderr);
            }
            return std::process::Output {
                status,
                stdout: reader.join().unwrap().unwrap_or_default(),
                stderr,
            };
        }
        if start.elapsed() > std::time::Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the headless browser ran for more than two minutes");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A headless browser renders the page and its DOM has the columns
/// (Chromium: `--dump-dom`; Firefox, which cannot print its DOM, takes a
/// screenshot). Skipped when no browser is installed.
#[test]
fn a_headless_browser_renders_the_page() {
    let Some(browser) = browser() else {
        eprintln!(
            "skipped: no headless browser (chromium, chromium-browser, google-chrome, firefox) on PATH"
        );
        return;
    };
    let page = dump(
        "ir-examples/seed.adz",
        "all",
        "html",
        &["--fn", "g_custom", "--derive", "reverse"],
    );
    let dir = std::env::temp_dir().join(format!("adze-html-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("seed.html");
    std::fs::write(&file, &page).unwrap();
    let url = format!("file://{}", file.display());
    let profile = dir.join("profile");
    let is_firefox = browser.file_name().is_some_and(|n| n == "firefox");
    let mut command = std::process::Command::new(&browser);
    if is_firefox {
        let shot = dir.join("seed.png");
        command
            .arg("--headless")
            .arg("-no-remote")
            .arg("-profile")
            .arg(&profile)
            .arg("--screenshot")
            .arg(&shot)
            .arg(&url);
        std::fs::create_dir_all(&profile).unwrap();
        let out = run_for_a_while(command);
        assert!(
            out.status.success(),
            "{}: {}",
            browser.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
        assert!(size > 0, "{} wrote no screenshot", browser.display());
    } else {
        command
            .arg("--headless")
            .arg("--disable-gpu")
            .arg("--no-sandbox")
            .arg("--no-first-run")
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("--dump-dom")
            .arg(&url);
        let out = run_for_a_while(command);
        let dom = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: {}",
            browser.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        for stage in STAGES {
            assert!(
                dom.contains(&format!("data-stage=\"{stage}\"")),
                "{}: no column {stage} in the DOM:\n{dom}",
                browser.display()
            );
        }
        assert_eq!(
            dom.matches("class=\"l noted\"").count(),
            page.matches("class=\"l noted\"").count()
        );
        assert!(!dom.contains("<parsererror"), "{dom}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
