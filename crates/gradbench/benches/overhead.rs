//! The tool's overhead over the kernel it times (docs/gradbench.md).
//!
//! ```sh
//! cargo bench -p adze-gradbench --bench overhead
//! ```
//!
//! Drives the `adze-gradbench` binary over the protocol, as GradBench's
//! intermediary does (one JSON line each way), and reports per message:
//! the round trip, the time the tool reported (`prepare` + `evaluate`s),
//! and what is left, the tool's own overhead (reading and writing JSON,
//! dispatch). The `evaluate` time of a trivial kernel is the fixed cost of
//! one `Function::call` (argument marshalling and the native call).

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

fn main() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_adze-gradbench"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the tool starts");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut id = 0;
    let mut send = |message: Value| -> (Value, f64) {
        id += 1;
        let mut message = message;
        message["id"] = json!(id);
        let line = message.to_string();
        let start = Instant::now();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        let mut out = String::new();
        stdout.read_line(&mut out).unwrap();
        let took = start.elapsed().as_secs_f64() * 1e9;
        (serde_json::from_str(&out).unwrap(), took)
    };
    send(json!({"kind": "start"}));
    for module in ["hello", "lse"] {
        let (r, _) = send(json!({"kind": "define", "module": module}));
        assert_eq!(r["success"], true, "{r}");
    }

    println!(
        "| message | round trip | reported (prepare + evaluate) | overhead | evaluate per call |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let cases: Vec<(String, Value)> = vec![
        (
            "hello::square".into(),
            json!({"kind": "evaluate", "module": "hello", "function": "square", "input": 3.0}),
        ),
        (
            "lse::primal n=1, 1 run".into(),
            json!({"kind": "evaluate", "module": "lse", "function": "primal",
                   "input": {"x": [0.5], "min_runs": 1, "min_seconds": 0}}),
        ),
        (
            "lse::primal n=1, 1000 runs".into(),
            json!({"kind": "evaluate", "module": "lse", "function": "primal",
                   "input": {"x": [0.5], "min_runs": 1000, "min_seconds": 0}}),
        ),
        (
            "lse::primal n=2500, 1 run".into(),
            json!({"kind": "evaluate", "module": "lse", "function": "primal",
                   "input": {"x": (0..2500).map(|i| f64::from(i) * 1e-3).collect::<Vec<_>>(),
                             "min_runs": 1, "min_seconds": 0}}),
        ),
        (
            "lse::gradient n=2500, 1 run".into(),
            json!({"kind": "evaluate", "module": "lse", "function": "gradient",
                   "input": {"x": (0..2500).map(|i| f64::from(i) * 1e-3).collect::<Vec<_>>(),
                             "min_runs": 1, "min_seconds": 0}}),
        ),
    ];
    for (name, message) in cases {
        let reps = 200;
        let (mut trip, mut reported, mut per_call) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..reps {
            let (r, took) = send(message.clone());
            assert_eq!(r["success"], true, "{r}");
            let timings = r["timings"].as_array().unwrap();
            let total: f64 = timings
                .iter()
                .map(|t| t["nanoseconds"].as_f64().unwrap())
                .sum();
            let evals: Vec<f64> = timings
                .iter()
                .filter(|t| t["name"] == "evaluate")
                .map(|t| t["nanoseconds"].as_f64().unwrap())
                .collect();
            trip.push(took);
            reported.push(total);
            per_call.push(evals.iter().sum::<f64>() / evals.len() as f64);
        }
        let overhead: Vec<f64> = trip.iter().zip(&reported).map(|(t, r)| t - r).collect();
        println!(
            "| {name} | {} | {} | {} | {} |",
            us(median(trip)),
            us(median(reported)),
            us(median(overhead)),
            us(median(per_call)),
        );
    }
    drop(stdin);
    let _ = child.wait();
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn us(ns: f64) -> String {
    format!("{:.1} µs", ns / 1e3)
}
