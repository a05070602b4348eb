//! The one bless mechanism: expected text lives in a file (the whole file,
//! or a part of it); a test compares what it computed with it, and with
//! `ADZE_BLESS=1` in the environment rewrites the file instead and prints a
//! unified diff of what changed.

use crate::diff::unified_diff_at;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The environment variable that turns comparing into rewriting.
pub const BLESS_VAR: &str = "ADZE_BLESS";

/// Is `ADZE_BLESS` set (to anything but the empty string or `0`)? The
/// documented spelling is `ADZE_BLESS=1`.
pub fn blessing() -> bool {
    std::env::var_os(BLESS_VAR).is_some_and(|v| !v.is_empty() && v != "0")
}

/// What [`expect_in_file`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The expected text was already the actual one.
    Same,
    /// `ADZE_BLESS` was set and the file was rewritten; the unified diff of
    /// the expected part (also written to stderr).
    Blessed(String),
}

/// The expected text differs and `ADZE_BLESS` is not set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The file holding the expected text.
    pub path: PathBuf,
    /// A unified diff from the expected text to the actual one.
    pub diff: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} differs from the actual output (`{BLESS_VAR}=1 cargo test` rewrites it):\n{}",
            display_path(&self.path),
            self.diff
        )
    }
}

impl std::error::Error for Mismatch {}

/// Compares `actual` with the bytes `range` of the file at `path`; when they
/// differ, rewrites that part of the file if [`blessing`] (creating the file
/// and its directory if need be), or fails with the diff. A missing file
/// reads as empty. `range` must lie within the file's text.
pub fn expect_in_file(path: &Path, range: Range<usize>, actual: &str) -> Result<Outcome, Mismatch> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let expected = &text[range.clone()];
    if expected == actual {
        return Ok(Outcome::Same);
    }
    let name = display_path(path);
    let first_line = text[..range.start].matches('\n').count();
    let diff = unified_diff_at(&name, expected, actual, first_line);
    if !blessing() {
        return Err(Mismatch {
            path: path.to_path_buf(),
            diff,
        });
    }
    let blessed = format!("{}{actual}{}", &text[..range.start], &text[range.end..]);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    }
    std::fs::write(path, blessed).unwrap_or_else(|e| panic!("cannot write {name}: {e}"));
    // Straight to the stderr stream, past the test harness's capture: the
    // test passes, and its captured output would not be shown.
    let _ = writeln!(std::io::stderr(), "{BLESS_VAR}: rewrote {name}\n{diff}");
    Ok(Outcome::Blessed(diff))
}

/// [`expect_in_file`] for a whole file: `path` holds exactly `actual`.
pub fn check_file(path: &Path, actual: &str) -> Result<Outcome, Mismatch> {
    let len = std::fs::read_to_string(path).map_or(0, |t| t.len());
    expect_in_file(path, 0..len, actual)
}

/// [`check_file`] that panics with the diff on a mismatch: for ordinary
/// `#[test]`s that hold their expected output in a file of its own.
#[track_caller]
pub fn expect_file(path: impl AsRef<Path>, actual: &str) {
    if let Err(e) = check_file(path.as_ref(), actual) {
        panic!("{e}");
    }
}

/// `path` relative to the workspace root when it lies inside it (shorter
/// messages that a reader can paste), else as given.
pub fn display_path(path: &Path) -> String {
    let root = workspace_root();
    let root = root.canonicalize().unwrap_or(root);
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    path.strip_prefix(&root)
        .unwrap_or(&path)
        .display()
        .to_string()
}

/// The workspace root: the directory above this crate's `crates/`.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/test-support lies two levels below the workspace root")
        .to_path_buf()
}
