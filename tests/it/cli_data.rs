//! Issue #17, the command line (SPEC §5): argument values from files
//! (`@x.json`, `@x.npy`, whitespace text), standard input (`@-`) and
//! `--args`; non-finite numbers in and out; `--save`; `--derive`'s default
//! shadows, labels, seeds and the error for nothing to differentiate. Every
//! test runs the built binary on files in its own temporary directory.

use crate::support::{adze, adze_command, Output};
use adze::npy::{self, Elements};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

const PROGRAM: &str = "tests/programs/data.adz";

/// A fresh directory for one test's files.
fn temp_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli_data-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `bytes` to `dir/name`; its path as text.
fn file(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

/// `adze run tests/programs/data.adz --fn FUNC ARGS..`.
fn run(func: &str, args: &[&str]) -> Output {
    let mut all = vec!["run", PROGRAM, "--fn", func];
    all.extend_from_slice(args);
    adze(&all)
}

/// The same, with `input` on standard input.
fn run_with_stdin(func: &str, args: &[&str], input: &[u8]) -> Output {
    let mut child = adze_command()
        .args(["run", PROGRAM, "--fn", func])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("adze runs");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A failure: exit 1, nothing on stdout, one line on stderr containing
/// every needle.
#[track_caller]
fn fails_with(out: Output, needles: &[&str]) {
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert_eq!(out.stdout, "");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.starts_with("error: "), "{}", out.stderr);
    for needle in needles {
        assert!(out.stderr.contains(needle), "{} lacks {needle}", out.stderr);
    }
}

/// The bytes NumPy 1.26 writes for `np.save(f, np.array([1.5, 2.0, -3.0]))`:
/// magic, version 1.0, a header length of 118 (0x76), the dict padded with
/// spaces to a 64-byte boundary and a newline, then 3 little-endian f64.
fn numpy_file() -> Vec<u8> {
    let mut bytes = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
    bytes.extend_from_slice(b"{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }");
    bytes.extend_from_slice(&[b' '; 60]);
    bytes.push(b'\n');
    assert_eq!(bytes.len(), 128);
    for x in [1.5f64, 2.0, -3.0] {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    bytes
}

#[test]
fn values_come_from_json_npy_and_text_files() {
    let dir = temp_dir("files");
    let json = file(&dir, "x.json", "[1.5, 2, -3e0]\n");
    run("total", &["--arg", &format!("x=@{json}")]).assert_prints("0.5\n");
    // A real NumPy file, and one of adze's own writer.
    let np = file(&dir, "x.npy", numpy_file());
    run("total", &["--arg", &format!("x=@{np}")]).assert_prints("0.5\n");
    let grid = npy::write(&[2, 2], &Elements::F64(vec![1.0, 2.0, 3.0, 4.5]));
    let np2 = file(&dir, "grid.npy", grid);
    run("total", &["--arg", &format!("x=@{np2}")]).assert_prints("10.5\n");
    // i64 elements for an f64 array: exact values convert.
    let ints = file(
        &dir,
        "i.npy",
        npy::write(&[3], &Elements::I64(vec![1, 2, 3])),
    );
    run("total", &["--arg", &format!("x=@{ints}")]).assert_prints("6.0\n");
    // Whitespace-separated text, whatever the name.
    let txt = file(&dir, "x.txt", "1.5 2\n\t-3\n\n");
    run("total", &["--arg", &format!("x=@{txt}")]).assert_prints("0.5\n");
    let dat = file(&dir, "x.dat", "4");
    run("total", &["--arg", &format!("x=@{dat}")]).assert_prints("4.0\n");
    // Scalars of every type, from each kind of file.
    let n = file(&dir, "n.json", "3");
    let flag = file(&dir, "flag.txt", "true\n");
    let y = file(&dir, "y.npy", npy::write(&[], &Elements::F64(vec![0.25])));
    run(
        "pick",
        &[
            "--arg",
            &format!("n=@{n}"),
            "--arg",
            &format!("flag=@{flag}"),
            "--arg",
            &format!("y=@{y}"),
        ],
    )
    .assert_prints("3.25\n");
}

#[test]
fn standard_input_is_read_by_at_dash() {
    run_with_stdin("total", &["--arg", "x=@-"], b"1 2 3\n4\n").assert_prints("10.0\n");
    // JSON and .npy are recognized by their contents.
    run_with_stdin("total", &["--arg", "x=@-"], b" [1, 2.5]").assert_prints("3.5\n");
    run_with_stdin("total", &["--arg", "x=@-"], &numpy_file()).assert_prints("0.5\n");
    run_with_stdin("scale", &["--args", "-"], br#"{"x": [1, 2], "k": 3}"#)
        .assert_prints("x = [3.0, 6.0]\n");
    fails_with(
        run_with_stdin(
            "pick",
            &["--arg", "n=@-", "--arg", "y=@-", "--arg", "flag=true"],
            b"1",
        ),
        &[
            "`--arg y=@-`",
            "standard input is read once, and `--arg n=@-` reads it already",
        ],
    );
}

#[test]
fn args_takes_every_argument_from_one_json_object() {
    let dir = temp_dir("args");
    file(&dir, "y.txt", "0.5");
    let args = file(
        &dir,
        "args.json",
        r#"{"n": 2, "flag": true, "y": "@y.txt"}"#,
    );
    // `@y.txt` is taken from the directory of the `--args` file.
    run("pick", &["--args", &args]).assert_prints("2.5\n");
    // An `--arg` replaces the entry of the same name.
    run("pick", &["--args", &args, "--arg", "y=-inf"]).assert_prints("-inf\n");
    let scale = file(
        &dir,
        "scale.json",
        r#"{"x": ["NaN", 1, "-inf"], "k": "inf"}"#,
    );
    run("scale", &["--args", &scale]).assert_prints("x = [NaN, inf, -inf]\n");
    let wrong = file(&dir, "wrong.json", r#"{"n": 2.5, "flag": true, "y": 1}"#);
    fails_with(
        run("pick", &["--args", &wrong]),
        &[
            "`n` in `--args ",
            "wrong.json`: expected an integer, got 2.5",
        ],
    );
    let twice = file(&dir, "twice.json", r#"{"k": 1, "k": 2, "x": []}"#);
    fails_with(run("scale", &["--args", &twice]), &["`k` is given twice"]);
    let unknown = file(&dir, "unknown.json", r#"{"k": 1, "x": [], "z": 0}"#);
    fails_with(
        run("scale", &["--args", &unknown]),
        &["`scale` has no parameter `z` (its parameters: x, k)"],
    );
    let list = file(&dir, "list.json", "[1, 2]");
    fails_with(
        run("scale", &["--args", &list]),
        &["list.json`: invalid type: sequence, expected an object of arguments"],
    );
}

#[test]
fn a_million_elements_go_through_a_file() {
    let dir = temp_dir("million");
    let n = 1_000_000usize;
    let xs: Vec<f64> = (1..=n).map(|i| i as f64).collect();
    let want = format!("{:?}\n", (n * (n + 1) / 2) as f64);
    let np = file(&dir, "x.npy", npy::write(&[n], &Elements::F64(xs.clone())));
    run("total", &["--arg", &format!("x=@{np}")]).assert_prints(&want);
    let words: Vec<String> = xs.iter().map(|x| format!("{x:?}")).collect();
    let txt = file(&dir, "x.txt", words.join("\n"));
    run("total", &["--arg", &format!("x=@{txt}")]).assert_prints(&want);
    let json = file(&dir, "x.json", format!("[{}]", words.join(", ")));
    run("total", &["--arg", &format!("x=@{json}")]).assert_prints(&want);
    // A scaled million back out through `--save`, bit for bit.
    let out = dir.join("out.npy");
    let save = format!("x={}", out.display());
    let k = "0.1";
    let o = run(
        "scale",
        &[
            "--arg",
            &format!("x=@{np}"),
            "--arg",
            &format!("k={k}"),
            "--json",
            "--save",
            &save,
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let saved = npy::read(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(saved.shape, vec![n]);
    let Elements::F64(ys) = saved.elements else {
        panic!("not f64")
    };
    assert!(xs
        .iter()
        .zip(&ys)
        .all(|(x, y)| (x * 0.1).to_bits() == y.to_bits()));
}

#[test]
fn non_finite_numbers_round_trip_through_json_output() {
    let dir = temp_dir("nonfinite");
    // In on the command line, as printed.
    let x = "x=[NaN, inf, -inf, 1e308, -0.0, 5e-324, 0.1]";
    let text = run("scale", &["--arg", x, "--arg", "k=1"]);
    text.assert_prints("x = [NaN, inf, -inf, 1e308, -0.0, 5e-324, 0.1]\n");
    // `--arg k=nan`, and every spelling.
    run("scale", &["--arg", "x=[1]", "--arg", "k=nan"]).assert_prints("x = [NaN]\n");
    for (k, want) in [
        ("inf", "inf"),
        ("-inf", "-inf"),
        ("+Infinity", "inf"),
        ("NaN", "NaN"),
    ] {
        run("scale", &["--arg", "x=[1]", "--arg", &format!("k={k}")])
            .assert_prints(&format!("x = [{want}]\n"));
    }
    // Out as JSON strings, and back in: the `arrays` object is an
    // `--args` object; its `x` alone is an `@x.json`.
    let out = run("scale", &["--arg", x, "--arg", "k=2", "--json"]);
    assert_eq!(
        out.stdout,
        "{\"result\":null,\"arrays\":{\"x\":[\"NaN\",\"inf\",\"-inf\",\"inf\",-0.0,1e-323,0.2]}}\n",
        "{}",
        out.stderr
    );
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let arrays = file(&dir, "arrays.json", json["arrays"].to_string());
    let back = run("scale", &["--args", &arrays, "--arg", "k=0.5", "--json"]);
    assert_eq!(
        back.stdout,
        "{\"result\":null,\"arrays\":{\"x\":[\"NaN\",\"inf\",\"-inf\",\"inf\",-0.0,5e-324,0.1]}}\n",
        "{}",
        back.stderr
    );
    let only_x = file(&dir, "x.json", json["arrays"]["x"].to_string());
    run("total", &["--arg", &format!("x=@{only_x}")]).assert_prints("NaN\n");
    let scalar = file(&dir, "k.json", "\"-inf\"");
    run(
        "scale",
        &["--arg", "x=[2]", "--arg", &format!("k=@{scalar}")],
    )
    .assert_prints("x = [-inf]\n");
    // Results too: NaN, inf and -inf as JSON strings.
    let out = run("pair", &["--arg", "x=inf", "--arg", "y=-inf", "--json"]);
    assert_eq!(
        out.stdout,
        "{\"result\":[\"-inf\",\"NaN\"],\"arrays\":{}}\n"
    );
}

#[test]
fn numbers_too_large_for_an_f64_are_rejected() {
    let dir = temp_dir("overflow");
    fails_with(
        run("scale", &["--arg", "x=[1]", "--arg", "k=1e999"]),
        &["`--arg k=1e999`: `1e999` is too large for an f64 (write `inf` or `-inf` for infinity)"],
    );
    fails_with(
        run("total", &["--arg", "x=[1, -1e309]"]),
        &["`-1e309` is too large for an f64"],
    );
    let txt = file(&dir, "big.txt", "1 2 1e999");
    fails_with(
        run("total", &["--arg", &format!("x=@{txt}")]),
        &["big.txt`: number 3: `1e999` is too large for an f64"],
    );
    let json = file(&dir, "big.json", "[1, 1e999]");
    fails_with(
        run("total", &["--arg", &format!("x=@{json}")]),
        &["big.json`: invalid JSON: number out of range at line 1 column 9"],
    );
}

#[test]
fn save_writes_the_final_contents_of_arrays() {
    let dir = temp_dir("save");
    let (np, json, txt) = (dir.join("x.npy"), dir.join("x.json"), dir.join("x.txt"));
    let out = run(
        "scale",
        &[
            "--arg",
            "x=[1, -2.5, inf, 0.1]",
            "--arg",
            "k=3",
            "--save",
            &format!("x={}", np.display()),
            "--save",
            &format!("x={}", json.display()),
            "--save",
            &format!("x={}", txt.display()),
        ],
    );
    out.assert_prints("x = [3.0, -7.5, inf, 0.30000000000000004]\n");
    let saved = npy::read(&std::fs::read(&np).unwrap()).unwrap();
    assert_eq!(
        saved.elements,
        Elements::F64(vec![3.0, -7.5, f64::INFINITY, 0.30000000000000004])
    );
    assert_eq!(
        std::fs::read_to_string(&json).unwrap(),
        "[3.0, -7.5, \"inf\", 0.30000000000000004]\n"
    );
    assert_eq!(
        std::fs::read_to_string(&txt).unwrap(),
        "3.0\n-7.5\ninf\n0.30000000000000004\n"
    );
    // Each reads back as the same value.
    for path in [&np, &json, &txt] {
        run("total", &["--arg", &format!("x=@{}", path.display())]).assert_prints("inf\n");
        run(
            "scale",
            &["--arg", &format!("x=@{}", path.display()), "--arg", "k=1"],
        )
        .assert_prints("x = [3.0, -7.5, inf, 0.30000000000000004]\n");
    }
    // A read-only array, and a shadow of a derivative.
    let grad = dir.join("grad.npy");
    let out = run(
        "wsum",
        &[
            "--derive",
            "reverse",
            "--arg",
            "x=[1, 2]",
            "--arg",
            "w=3",
            "--save",
            &format!("x.d={}", grad.display()),
        ],
    );
    out.assert_prints("15.0\nx.d = [6.0, 12.0]\nd/dw = 5.0\n");
    let saved = npy::read(&std::fs::read(&grad).unwrap()).unwrap();
    assert_eq!(saved.elements, Elements::F64(vec![6.0, 12.0]));
    // Bad requests fail before the run.
    fails_with(
        run(
            "scale",
            &["--arg", "x=[1]", "--arg", "k=1", "--save", "k=k.npy"],
        ),
        &["`--save k=k.npy`: `k` is an f64, not an array"],
    );
    fails_with(
        run(
            "scale",
            &["--arg", "x=[1]", "--arg", "k=1", "--save", "y=y.npy"],
        ),
        &["`--save y=y.npy`: `scale` has no array `y` (its arrays: x)"],
    );
    fails_with(
        run("total", &["--arg", "x=[1]", "--save", "result=r.npy"]),
        &["`--save result=r.npy`: the result `result` is an f64, not an array"],
    );
    let nowhere = dir.join("no/such/dir/x.npy");
    fails_with(
        run(
            "scale",
            &[
                "--arg",
                "x=[1]",
                "--arg",
                "k=1",
                "--save",
                &format!("x={}", nowhere.display()),
            ],
        ),
        &[
            "cannot write `",
            "no/such/dir/x.npy`: No such file or directory",
        ],
    );
}

#[test]
fn reverse_mode_prints_the_value_and_labelled_derivatives() {
    // A shadow not given is zeros of its array's length.
    run(
        "wsum",
        &["--derive", "reverse", "--arg", "x=[1, 2]", "--arg", "w=3"],
    )
    .assert_prints("15.0\nx.d = [6.0, 12.0]\nd/dw = 5.0\n");
    // Given, it is accumulated into (a read-only array's adjoint).
    run(
        "wsum",
        &[
            "--derive",
            "reverse",
            "--arg",
            "x=[1, 2]",
            "--arg",
            "x.d=[1, 1]",
            "--arg",
            "w=3",
        ],
    )
    .assert_prints("15.0\nx.d = [7.0, 13.0]\nd/dw = 5.0\n");
    // A `mut` array: its final contents, then its shadow (given as zeros:
    // the cotangent of the final contents; on return the adjoint of the
    // initial contents), then `d/dt`.
    let out = run(
        "smooth",
        &["--derive", "reverse", "--arg", "a=[1, 2]", "--arg", "t=0.5"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", out.stdout);
    assert!(
        lines[1].starts_with("a = [0.479425538604203, "),
        "{}",
        out.stdout
    );
    assert!(
        lines[2].starts_with("a.d = [0.438791280945186"),
        "{}",
        out.stdout
    );
    assert!(lines[3].starts_with("d/dt = "), "{}", out.stdout);
    // `--json`: the primal result, the arrays, the adjoints by name.
    let out = run(
        "pair",
        &[
            "--derive", "reverse", "--arg", "x=3", "--arg", "y=4", "--json",
        ],
    );
    assert_eq!(
        out.stdout, "{\"result\":[12.0,7.0],\"arrays\":{},\"adjoints\":{\"x\":5.0,\"y\":4.0}}\n",
        "{}",
        out.stderr
    );
    let out = run(
        "wsum",
        &[
            "--derive", "reverse", "--arg", "x=[1]", "--arg", "w=2", "--json",
        ],
    );
    assert_eq!(
        out.stdout,
        "{\"result\":2.0,\"arrays\":{\"x.d\":[4.0]},\"adjoints\":{\"w\":1.0}}\n"
    );
    // Forward mode: shadows default to zeros too; the output is as before.
    run(
        "wsum",
        &[
            "--derive", "forward", "--arg", "x=[1, 2]", "--arg", "w=3", "--arg", "w.t=1",
        ],
    )
    .assert_prints("(15.0, 5.0)\n");
    run(
        "wsum",
        &[
            "--derive",
            "forward",
            "--arg",
            "x=[1, 2]",
            "--arg",
            "x.d=[1, 0]",
            "--arg",
            "w=3",
            "--arg",
            "w.t=0",
        ],
    )
    .assert_prints("(15.0, 6.0)\n");
}

#[test]
fn a_tuple_results_cotangents_are_seeded() {
    let rev = |extra: &[&str]| {
        let mut a = vec!["--derive", "reverse", "--arg", "x=3", "--arg", "y=4"];
        a.extend_from_slice(extra);
        run("pair", &a)
    };
    // Default: every cotangent 1.0, the gradient of x*y + x+y.
    rev(&[]).assert_prints("(12.0, 7.0)\nd/dx = 5.0\nd/dy = 4.0\n");
    rev(&["--seed", "1,0"]).assert_prints("(12.0, 7.0)\nd/dx = 4.0\nd/dy = 3.0\n");
    rev(&["--seed", "0, 1"]).assert_prints("(12.0, 7.0)\nd/dx = 1.0\nd/dy = 1.0\n");
    rev(&["--seed", "-2,0.5"]).assert_prints("(12.0, 7.0)\nd/dx = -7.5\nd/dy = -5.5\n");
    fails_with(
        rev(&["--seed", "1"]),
        &["`--seed 1`: 1 cotangent is given, but `pair` has 2 f64 results"],
    );
    fails_with(
        rev(&["--seed", "1,x"]),
        &["`--seed 1,x`: expected a number, got `x`"],
    );
    fails_with(
        rev(&["--arg", "dret0=1"]),
        &["`dret0` is the cotangent of a result: give it with `--seed`"],
    );
    fails_with(
        run(
            "scale",
            &[
                "--derive", "reverse", "--arg", "x=[1]", "--arg", "k=2", "--seed", "1",
            ],
        ),
        &["`scale` has no f64 result to seed"],
    );
    fails_with(
        run(
            "pair",
            &[
                "--derive", "forward", "--arg", "x=3", "--arg", "y=4", "--arg", "x.t=1", "--arg",
                "y.t=0", "--seed", "1,0",
            ],
        ),
        &["seeds are for `--derive reverse`"],
    );
    // Without `--derive`, `--seed` is a usage error.
    assert_eq!(
        run("pair", &["--arg", "x=3", "--arg", "y=4", "--seed", "1"]).code,
        2
    );
}

#[test]
fn nothing_to_differentiate_is_an_error() {
    fails_with(
        run("twice", &["--derive", "reverse", "--arg", "n=3"]),
        &["`--derive reverse` of `twice`: nothing to differentiate: no parameter is f64 or an array"],
    );
    fails_with(
        run("twice", &["--derive", "forward", "--arg", "n=3"]),
        &["`--derive forward` of `twice`: nothing to differentiate"],
    );
    fails_with(
        run("length", &["--derive", "reverse", "--arg", "x=[1]"]),
        &["nothing to differentiate: it returns no f64 or [f64] and it writes no `mut` array"],
    );
    fails_with(
        run(
            "wsum",
            &[
                "--derive", "reverse", "--arg", "x=[1]", "--arg", "w=1", "--const", "x", "--const",
                "w",
            ],
        ),
        &["nothing to differentiate: no parameter is f64 or an array, or every one is `--const`"],
    );
    let out = adze(&[
        "dump", PROGRAM, "--fn", "twice", "--derive", "reverse", "--stage", "ad",
    ]);
    fails_with(out, &["nothing to differentiate"]);
}

#[test]
fn malformed_inputs_give_one_line_and_exit_1() {
    let dir = temp_dir("malformed");
    fails_with(
        run("total", &["--arg", "x=@no/such/file.json"]),
        &["`--arg x=@no/such/file.json`: cannot read `no/such/file.json`: No such file or directory"],
    );
    fails_with(
        run("total", &["--args", "no/such/args.json"]),
        &["`--args no/such/args.json`: cannot read `no/such/args.json`: No such file or directory"],
    );
    fails_with(
        run("total", &["--arg", "x=@"]),
        &["`--arg x=@`: expected a file name after `@`"],
    );
    let bad = file(&dir, "bad.json", "[1, 2,");
    fails_with(
        run("total", &["--arg", &format!("x=@{bad}")]),
        &["bad.json`: invalid JSON: ", "at line 1 column"],
    );
    let nested = file(&dir, "nested.json", "[[1, 2], [3, 4]]");
    fails_with(
        run("total", &["--arg", &format!("x=@{nested}")]),
        &["at index 0 of the array: nested arrays are not read"],
    );
    let words = file(&dir, "words.json", "[1, \"two\"]");
    fails_with(
        run("total", &["--arg", &format!("x=@{words}")]),
        &["at index 1 of the array: expected a number, got the string \"two\""],
    );
    let scalar = file(&dir, "scalar.json", "2.5");
    fails_with(
        run("total", &["--arg", &format!("x=@{scalar}")]),
        &["scalar.json`: expected an array, got a number"],
    );
    // A dtype adze does not read: float32.
    let mut f4 = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
    f4.extend_from_slice(
        format!(
            "{:<117}\n",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
        )
        .as_bytes(),
    );
    f4.extend_from_slice(&[0; 8]);
    let f4 = file(&dir, "f4.npy", f4);
    fails_with(
        run("total", &["--arg", &format!("x=@{f4}")]),
        &["f4.npy`: the .npy file holds dtype '<f4' (float32); adze reads f64 ('<f8') or i64 ('<i8') arrays"],
    );
    // Data shorter than the header's shape says.
    let mut short = numpy_file();
    short.truncate(128 + 16);
    let short = file(&dir, "short.npy", short);
    fails_with(
        run("total", &["--arg", &format!("x=@{short}")]),
        &["short.npy`: the .npy header's shape (3,) needs 24 bytes of data, but the file has 16"],
    );
    let not_npy = file(&dir, "text.npy", "1 2 3");
    fails_with(
        run("total", &["--arg", &format!("x=@{not_npy}")]),
        &["text.npy`: not a .npy file"],
    );
    // An i64 that no f64 equals.
    let inexact = file(
        &dir,
        "big.npy",
        npy::write(&[1], &Elements::I64(vec![(1 << 53) + 1])),
    );
    fails_with(
        run("total", &["--arg", &format!("x=@{inexact}")]),
        &["the element 9007199254740993 at index 0 is not exactly an f64"],
    );
    // A shadow of the wrong length.
    fails_with(
        run(
            "wsum",
            &[
                "--derive", "reverse", "--arg", "x=[1, 2]", "--arg", "x.d=[0]", "--arg", "w=1",
            ],
        ),
        &["`x`", "`x.d`", "length"],
    );
    // Several numbers where one is wanted, and a word in a text file.
    let two = file(&dir, "two.txt", "1 2");
    fails_with(
        run("scale", &["--arg", "x=[1]", "--arg", &format!("k=@{two}")]),
        &["two.txt`: expected one value (a number), got several"],
    );
    let word = file(&dir, "word.txt", "1 2 three");
    fails_with(
        run("total", &["--arg", &format!("x=@{word}")]),
        &["word.txt`: number 3: expected a number, got `three`"],
    );
    let binary = file(&dir, "binary.bin", [0xff, 0xfe, 0x00]);
    fails_with(
        run("total", &["--arg", &format!("x=@{binary}")]),
        &["binary.bin`: neither text (UTF-8) nor a .npy file"],
    );
    // A long literal is abbreviated in the message.
    let long = format!("x=[{}, oops]", vec!["1.0"; 1000].join(", "));
    let out = run("total", &["--arg", &long]);
    assert!(out.stderr.len() < 300, "{}", out.stderr);
    fails_with(out, &["expected a number, got `oops`"]);
    // `--json`: the error as JSON.
    let out = run("total", &["--arg", "x=@no/such/file.npy", "--json"]);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr,
        "{\"error\":\"`--arg x=@no/such/file.npy`: cannot read `no/such/file.npy`: No such file or directory\"}\n"
    );
}
