//! The malformed-program corpus (`tests/malformed/*.adz` at the workspace
//! root): every file must give diagnostics, never a panic, with a
//! `file:line:col` summary; the summary and the rendered diagnostics are
//! held in `crates/lang/tests/malformed/NN_name.expected` (`ADZE_BLESS=1`
//! rewrites them; not next to the programs, which are also a fuzz corpus).
//! Every failing file is reported, not just the first.

use adze_test_support::bless::check_file;
use adze_test_support::Failures;
use std::path::Path;

#[test]
fn every_malformed_program_is_diagnosed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/malformed");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/malformed exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "adz"))
        .collect();
    files.sort();
    assert!(files.len() >= 40, "only {} malformed programs", files.len());
    let mut failures = Failures::default();
    for path in files {
        let stem = path.file_stem().unwrap().to_str().unwrap();
        let name = format!("tests/malformed/{stem}.adz");
        let expected = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/malformed")
            .join(format!("{stem}.expected"));
        failures.check(&name, || diagnosed(&path, &name, &expected));
    }
    failures.finish("malformed programs");
}

/// `path` (shown as `name`) gives the diagnostics held in `expected`.
fn diagnosed(path: &Path, name: &str, expected: &Path) -> Result<(), String> {
    let bytes = std::fs::read(path).unwrap();
    // The default test thread stack (2 MiB) must be enough.
    let result = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn({
            let name = name.to_string();
            move || adze_lang::compile_bytes(&name, &bytes)
        })
        .unwrap()
        .join()
        .unwrap_or_else(|_| panic!("{name}: the front end panicked"));
    let Err(diags) = result else {
        panic!("{name}: compiled without an error");
    };
    assert!(!diags.is_empty());
    let summary = diags.summary();
    let rest = summary
        .strip_prefix(&format!("{name}:"))
        .unwrap_or_else(|| panic!("{summary}"));
    let mut parts = rest.splitn(3, ':');
    let line = parts.next().unwrap();
    let col = parts.next().unwrap();
    assert!(
        line.parse::<usize>().is_ok() && col.parse::<usize>().is_ok(),
        "{summary}"
    );
    assert!(parts.next().unwrap().starts_with(" error: "), "{summary}");
    assert!(!summary.contains('\n'), "{summary}");
    let rendered = diags.render();
    assert!(rendered.contains("= help: "), "{rendered}");
    let actual = format!("{summary}\n\n{rendered}");
    check_file(expected, &actual).map_err(|e| e.to_string())?;
    Ok(())
}
