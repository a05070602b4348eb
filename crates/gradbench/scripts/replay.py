#!/usr/bin/env python3
"""Replays the evaluate messages of a `gradbench run -o` log to tool binaries.

Usage (docs/gradbench.md):

    python3 crates/gradbench/scripts/replay.py LOG TOOL... [--only DESC:FUNCTION]
                                               [--runs N] [--rounds R]

Each tool is started once per round and sent the log's `start`, `define`
and evaluate messages (all, or those whose description starts with DESC
and whose function is FUNCTION), each with `min_runs` N and `min_seconds`
0; the rounds alternate the tools. Prints, per message and tool, the
fastest and the median evaluate time over all rounds and the tool's page
faults per run (minor faults of the whole process, over the evaluate
messages' runs and the rest of its life), and whether every tool's
outputs are identical to the first tool's (JSON text, so -0.0 and 0.0
differ). Inputs come from the log, so tools see the same data even for
the evals whose inputs are random (lstm).
"""

import argparse
import json
import resource
import statistics
import subprocess
import sys


def messages(log, only, runs):
    out = []
    for line in open(log):
        entry = json.loads(line)
        m = entry.get("message")
        if m is None or m["kind"] not in ("start", "define", "evaluate"):
            continue
        if m["kind"] == "evaluate":
            if only:
                desc, fn = only.rsplit(":", 1)
                if not (m.get("description", "").startswith(desc) and m["function"] == fn):
                    continue
            if isinstance(m["input"], dict):
                m["input"]["min_runs"] = runs
                m["input"]["min_seconds"] = 0
        out.append(m)
    return out


def run(tool, msgs):
    """[(key, output JSON, evaluate ns list)], minor page faults."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    p = subprocess.Popen([tool], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    res = []
    for m in msgs:
        p.stdin.write(json.dumps(m) + "\n")
        p.stdin.flush()
        r = json.loads(p.stdout.readline())
        if m["kind"] != "evaluate":
            continue
        key = (m["id"], m.get("description", ""), m["function"])
        if not r.get("success"):
            res.append((key, "error: " + str(r.get("error")), []))
            continue
        ns = [t["nanoseconds"] for t in r["timings"] if t["name"] == "evaluate"]
        res.append((key, json.dumps(r["output"]), ns))
    p.stdin.close()
    p.wait()
    return res, resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before


def fmt(ns):
    if ns >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.1f} µs"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("tools", nargs="+")
    ap.add_argument("--only")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    msgs = messages(a.log, a.only, a.runs)
    times = {t: {} for t in a.tools}
    outputs = {t: {} for t in a.tools}
    faults = {t: 0 for t in a.tools}
    n_runs = {t: 0 for t in a.tools}
    keys = []
    for _ in range(a.rounds):
        for t in a.tools:
            res, pf = run(t, msgs)
            faults[t] += pf
            for key, out, ns in res:
                if key not in keys:
                    keys.append(key)
                times[t].setdefault(key, []).extend(ns)
                outputs[t][key] = out
                n_runs[t] += len(ns)
    first = a.tools[0]
    differ = 0
    for key in keys:
        print(f"{key[1]} {key[2]}:")
        for t in a.tools:
            ns = times[t].get(key, [])
            same = outputs[t].get(key) == outputs[first].get(key)
            differ += not same
            line = f"  {t}: " + (f"min {fmt(min(ns))}, median {fmt(statistics.median(ns))} ({len(ns)} runs)" if ns else outputs[t].get(key, "")[:200])
            print(line + ("" if same else "  OUTPUT DIFFERS"))
    for t in a.tools:
        print(f"{t}: {faults[t] / max(n_runs[t], 1):.0f} page faults per run")
    print(f"{len(keys)} evaluations, {differ} outputs differ from {first}'s")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
