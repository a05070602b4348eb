#!/usr/bin/env python3
"""Tables of adze-gradbench's GradBench results, next to GradBench's nightly.

Usage (docs/gradbench.md):

    python3 crates/gradbench/scripts/summarize.py LOGS [--nightly DIR] [--local DIR]

LOGS holds one `gradbench run -o EVAL.jsonl` log per eval (any file name
ending in .jsonl; the eval is read from the log). DIR (optional) holds
GradBench's published nightly statistics, `evals/EVAL/summary.json`, as in
the `ci/refs/heads/nightly` branch of gradbench/gradbench. --local DIR
holds logs of other tools run on this machine, DIR/TOOL/*.jsonl.

Times are GradBench's own statistic: for each evaluate message, the mean
of its "evaluate" timings (stats.rs, ScorerClassic); --stat min takes the
fastest run instead (less sensitive to a busy machine). Prints markdown.
"""

import argparse
import json
import pathlib
import statistics
import sys

NIGHTLY_TOOLS = ["manual", "enzyme", "futhark", "jax", "pytorch"]
STAT = "mean"


def read_log(path):
    """{eval, rows: {desc: {function: mean ns}}, valid: {desc: [bool]}, overhead: [ns]}"""
    messages = {}
    out = {"eval": None, "rows": {}, "valid": {}, "overhead": [], "functions": []}
    evaluate_of = {}
    for line in open(path):
        entry = json.loads(line)
        if "message" in entry:
            m = entry["message"]
            messages[m["id"]] = (m, entry["elapsed"]["nanoseconds"])
            if m["kind"] == "start":
                out["eval"] = m.get("eval")
            if m["kind"] == "define":
                out["eval"] = out["eval"] or m["module"]
            if m["kind"] == "analysis":
                desc, fn = evaluate_of.get(m["of"], (None, None))
                if desc is not None:
                    out["valid"].setdefault(desc, []).append(m["valid"])
            continue
        r = entry["response"]
        m, sent = messages.get(r["id"], (None, None))
        if m is None or m["kind"] != "evaluate":
            continue
        desc = m.get("description", json.dumps(m["input"])[:20])
        fn = m["function"]
        if fn not in out["functions"]:
            out["functions"].append(fn)
        evaluate_of[m["id"]] = (desc, fn)
        timings = r.get("timings") or []
        evals = [t["nanoseconds"] for t in timings if t["name"] == "evaluate"]
        if STAT == "min" and evals:
            evals = [min(evals)]
        if not r.get("success"):
            out["valid"].setdefault(desc, []).append(False)
            continue
        if evals:
            out["rows"].setdefault(desc, {})[fn] = sum(evals) / len(evals)
        reported = sum(t["nanoseconds"] for t in timings)
        out["overhead"].append(entry["elapsed"]["nanoseconds"] - sent - reported)
    return out


def fmt(ns):
    if ns is None:
        return "–"
    if ns < 1e3:
        return f"{ns:.0f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:.1f} µs"
    if ns < 1e9:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e9:.2f} s"


def nightly_cell(summary, tool, desc, functions):
    workloads = summary["tools"].get(tool, {})
    w = workloads.get(desc)
    if w is None:
        return "–"
    if "primal" in summary:  # classic: primal and derivative
        p = w.get("primal")
        d = w.get("derivative")
        ns = lambda x: None if x is None else x["secs"] * 1e9 + x["nanos"]
        return f"{fmt(ns(p))} / {fmt(ns(d))}"
    return fmt(w["secs"] * 1e9 + w["nanos"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("logs")
    ap.add_argument("--nightly")
    ap.add_argument("--local")
    ap.add_argument("--stat", choices=["mean", "min"], default="mean",
                    help="per message: GradBench's mean of the runs, or the fastest run")
    args = ap.parse_args()
    global STAT
    STAT = args.stat
    logs = sorted(pathlib.Path(args.logs).glob("*.jsonl"))
    locals_ = {}
    if args.local:
        for tool_dir in sorted(pathlib.Path(args.local).iterdir()):
            for p in sorted(tool_dir.glob("*.jsonl")):
                r = read_log(p)
                locals_.setdefault(tool_dir.name, {})[p.stem] = r
    all_overhead = []
    for path in logs:
        r = read_log(path)
        name = path.stem
        all_overhead += r["overhead"]
        summary = None
        # A variant (a log named other than its eval, e.g. ht-simple) has
        # no published counterpart: the nightly runs each eval's defaults.
        if args.nightly and name == (r["eval"] or name):
            sp = pathlib.Path(args.nightly) / "evals" / (r["eval"] or name) / "summary.json"
            if sp.exists():
                summary = json.loads(sp.read_text())
        fns = r["functions"]
        classic = len(fns) == 2 and r["eval"] not in ("hello",)
        tools = [t for t in NIGHTLY_TOOLS if summary and t in summary["tools"]]
        local_tools = [t for t in locals_ if name in locals_[t]]
        print(f"#### {name}\n")
        head = ["workload", "valid"]
        if classic:
            head += [f"adze {fns[0]} / {fns[1]}"]
        else:
            head += [f"adze {f}" for f in fns]
        head += [f"{t} (here)" for t in local_tools]
        head += [f"{t} (nightly)" for t in tools]
        print("| " + " | ".join(head) + " |")
        print("|" + " --- |" * len(head))
        if classic:
            rows = [(desc, [f"{fmt(v.get(fns[0]))} / {fmt(v.get(fns[1]))}"], desc) for desc, v in r["rows"].items()]
        else:
            # One row per description; a column per function (saddle, particle, hello).
            rows = [(desc, [fmt(v.get(f)) for f in fns], desc) for desc, v in r["rows"].items()]
        for desc, cells, key in rows:
            valid = r["valid"].get(desc, [])
            mark = "✓" if valid and all(valid) else ("✗" if valid else "?")
            line = [desc, mark] + cells
            for t in local_tools:
                lr = locals_[t][name]
                v = lr["rows"].get(desc, {})
                lf = lr["functions"]
                line.append(" / ".join(fmt(v.get(f)) for f in lf))
            for t in tools:
                if classic:
                    line.append(nightly_cell(summary, t, desc, fns))
                else:
                    line.append(" / ".join(
                        fmt((summary["tools"][t].get(f) or {}).get("secs", 0) * 1e9
                            + (summary["tools"][t].get(f) or {}).get("nanos", 0))
                        for f in fns))
            print("| " + " | ".join(line) + " |")
        print()
    if all_overhead:
        o = sorted(all_overhead)
        print(f"Per-message overhead (round trip through the intermediary minus the "
              f"tool's reported timings), {len(o)} messages: median {fmt(statistics.median(o))}, "
              f"90th percentile {fmt(o[int(0.9 * (len(o) - 1))])}, max {fmt(o[-1])}.")


if __name__ == "__main__":
    sys.exit(main())
