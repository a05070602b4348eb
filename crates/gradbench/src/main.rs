//! `adze-gradbench`: adze as a [GradBench](https://github.com/gradbench/gradbench)
//! tool.
//!
//! It speaks GradBench's protocol: one JSON message a line on standard
//! input, one JSON response a line on standard output. `define` compiles
//! every function of the eval's `.adz` program once (`evals/*.adz`, built
//! into the binary); `evaluate` converts the input into flat buffers,
//! calls the compiled kernel as many times as `min_runs` / `min_seconds`
//! ask, and reports each call's time as an `evaluate` timing (the input
//! conversion is reported apart, as `prepare`). Every failure is a
//! response with `"success": false` and an `error`, never a crash.
//!
//! ```sh
//! gradbench run --eval "python python/gradbench/gradbench/evals/lse/run.py" \
//!               --tool "target/release/adze-gradbench"
//! ```
//!
//! `adze-gradbench --print NAME` prints the `.adz` program of eval NAME.
#![forbid(unsafe_code)]

mod evals;
mod input;

use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::ExitCode;
use std::time::Instant;

/// The tool's state: the modules defined so far.
#[derive(Default)]
struct Tool {
    modules: HashMap<String, Box<dyn evals::Eval>>,
}

/// A response to write: a JSON value, or an evaluation's result (written
/// without first building its timings as JSON values: a `min_runs` of
/// thousands gives as many timings).
enum Reply {
    Json(Value),
    Evaluated(Value, evals::Evaluated),
}

impl Reply {
    fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        match self {
            Reply::Json(v) => serde_json::to_writer(&mut *out, v)?,
            Reply::Evaluated(id, done) => {
                out.write_all(b"{\"id\":")?;
                serde_json::to_writer(&mut *out, id)?;
                out.write_all(b",\"success\":true,\"output\":")?;
                serde_json::to_writer(&mut *out, &done.output)?;
                write!(
                    out,
                    ",\"timings\":[{{\"name\":\"prepare\",\"nanoseconds\":{}}}",
                    done.prepare_ns
                )?;
                for ns in &done.evaluate_ns {
                    write!(out, ",{{\"name\":\"evaluate\",\"nanoseconds\":{ns}}}")?;
                }
                out.write_all(b"]}")?;
            }
        }
        out.write_all(b"\n")?;
        out.flush()
    }
}

impl Tool {
    /// The response to one message line.
    fn respond(&mut self, line: &str) -> Reply {
        let message: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                // Without an id there is no response to give that the eval
                // can match; answer with a null id and the reason.
                return Reply::Json(
                    json!({"id": null, "success": false, "error": format!("invalid JSON message: {e}")}),
                );
            }
        };
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let kind = message.get("kind").and_then(Value::as_str).unwrap_or("");
        let body = match kind {
            "start" => {
                Ok(json!({"tool": "adze", "config": {"version": env!("CARGO_PKG_VERSION")}}))
            }
            "define" => self.define(&message),
            "evaluate" => match self.evaluate(&message) {
                Ok(done) => return Reply::Evaluated(id, done),
                Err(e) => Err(e),
            },
            // `analysis`, `end` and anything new: acknowledged.
            _ => Ok(json!({})),
        };
        let body = body.unwrap_or_else(|error| json!({"success": false, "error": error}));
        let mut response = Map::new();
        response.insert("id".into(), id);
        if let Value::Object(fields) = body {
            response.extend(fields);
        }
        Reply::Json(Value::Object(response))
    }

    fn define(&mut self, message: &Value) -> Result<Value, String> {
        let module = string_field(message, "module")?;
        let start = Instant::now();
        let defined = guard(|| evals::define(module))?;
        let compile_ns = nanos(start);
        match defined {
            Some(eval) => {
                self.modules.insert(module.to_string(), eval);
                Ok(json!({
                    "success": true,
                    "timings": [{"name": "compile", "nanoseconds": compile_ns}],
                }))
            }
            None => Err(format!(
                "adze has no implementation of module `{module}` (it has: {})",
                evals::SOURCES
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    fn evaluate(&mut self, message: &Value) -> Result<evals::Evaluated, String> {
        let module = string_field(message, "module")?;
        let function = string_field(message, "function")?;
        let input = message
            .get("input")
            .ok_or("the message has no `input`".to_string())?;
        let eval = self
            .modules
            .get(module)
            .ok_or_else(|| format!("module `{module}` was not defined"))?;
        guard(|| eval.evaluate(function, input))
    }
}

/// Runs `f`, turning a panic (a bug) into an error response.
fn guard<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".to_string());
            Err(format!("internal error in adze-gradbench: {what}"))
        }
    }
}

fn string_field<'a>(message: &'a Value, name: &str) -> Result<&'a str, String> {
    message
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("the message has no string field `{name}`"))
}

fn nanos(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {}
        [flag, name] if flag == "--print" => {
            return match evals::SOURCES.iter().find(|(n, _)| n == name) {
                Some((_, source)) => {
                    print!("{source}");
                    ExitCode::SUCCESS
                }
                None => {
                    eprintln!("adze-gradbench: no eval named `{name}`");
                    ExitCode::from(2)
                }
            };
        }
        _ => {
            eprintln!(
                "usage: adze-gradbench            (speaks GradBench's protocol on stdin/stdout)"
            );
            eprintln!("       adze-gradbench --print EVAL  (prints the eval's .adz program)");
            return ExitCode::from(2);
        }
    }
    // A panic is caught and answered; keep its report off the protocol's
    // stdout (the default hook writes to stderr, which GradBench shows).
    let mut tool = Tool::default();
    let stdin = std::io::stdin();
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        if tool.respond(&line).write(&mut stdout).is_err() {
            // The eval is gone (a closed pipe): nothing left to answer.
            break;
        }
    }
    ExitCode::SUCCESS
}
