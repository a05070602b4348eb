#!/usr/bin/env python3
"""Scaling benchmark (issue #14): program families at 3-4 sizes, time and
peak memory per stage, and the fitted growth exponent of each stage.

    cargo build --release && python3 benches/scaling.py [--quick]

Runs target/release/adze with ADZE_TIMINGS=1, which prints one line
`adze-timing STAGE MS PEAK_KB` as each stage ends (src/pipeline.rs,
`timing_mark`). A stage's time is the best of a few runs; the exponent is
the least-squares slope of log(time) against log(size) (stages under 2 ms
at the largest size are left out: noise). Prints a markdown table for
docs/performance.md. No timing is asserted anywhere.
"""
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADZE = os.path.join(ROOT, "target", "release", "adze")


def chain(n):
    lines = ["fn c0(x: f64) -> f64 { x * 1.001 }"]
    for i in range(1, n):
        lines.append(f"fn c{i}(x: f64) -> f64 {{ c{i - 1}(x) * 0.999 + x * 0.001 }}")
    lines.append(f"fn f(x: f64) -> f64 {{ c{n - 1}(x) }}")
    return "\n".join(lines) + "\n"


def lets(n):
    body = "\n".join(f"    let v{i} = x * {i % 7 + 1}.0;" for i in range(n))
    return f"fn f(x: f64) -> f64 {{\n{body}\n    x\n}}\n"


def functions(n):
    return "\n".join(f"fn g{i}(x: f64) -> f64 {{ x * 2.0 }}" for i in range(n)) + \
        "\nfn f(x: f64) -> f64 { g0(x) }\n"


def straight(n):
    # n statements, each depending on the previous two (long-lived values).
    body = ["    var a = x;", "    var b = x * 0.5;"]
    for i in range(n):
        if i % 2 == 0:
            body.append(f"    a = a * 0.999 + sin(b) * 0.001;")
        else:
            body.append(f"    b = b * 0.999 + cos(a) * 0.001;")
    return "fn f(x: f64) -> f64 {\n" + "\n".join(body) + "\n    a + b\n}\n"


def nested(n):
    # n nested loops of trip count 1.
    open_ = "".join(f"for i{k} in 0..1 {{ " for k in range(n))
    close = "} " * n
    return f"fn f(x: f64) -> f64 {{\n    var s = x;\n    {open_}s = s * 1.01; {close}\n    s\n}}\n"


# (family, generator, sizes, extra arguments of `adze run`)
FAMILIES = [
    ("chain, run (inline all)", chain, [250, 500, 1000, 2000], ["--fn", "f", "--arg", "x=1"]),
    ("chain, reverse, --inline none", chain, [250, 500, 1000, 2000],
     ["--fn", "f", "--arg", "x=1", "--derive", "reverse", "--inline", "none"]),
    ("lets in one function, run", lets, [12500, 25000, 50000, 100000], ["--fn", "f", "--arg", "x=1"]),
    ("functions, run one", functions, [12500, 25000, 50000, 100000], ["--fn", "f", "--arg", "x=1"]),
    ("straight-line, reverse", straight, [3750, 7500, 15000, 30000],
     ["--fn", "f", "--arg", "x=1", "--derive", "reverse"]),
    ("nested loops, reverse", nested, [30, 60, 120, 240],
     ["--fn", "f", "--arg", "x=1", "--derive", "reverse"]),
]


def run(path, extra):
    env = dict(os.environ, ADZE_TIMINGS="1")
    out = subprocess.run([ADZE, "run", path] + extra, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1:]
    stages, peak = {}, 0
    for line in out.stderr.splitlines():
        if line.startswith("adze-timing "):
            parts = line.split()
            name = " ".join(parts[1:-2])
            stages[name] = stages.get(name, 0.0) + float(parts[-2])
            peak = max(peak, int(parts[-1]))
    return (stages, peak), None


def slope(xs, ys):
    lx = [math.log(x) for x in xs]
    ly = [math.log(max(y, 1e-3)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    num = sum((a - mx) * (b - my) for a, b in zip(lx, ly))
    den = sum((a - mx) ** 2 for a in lx)
    return num / den if den else float("nan")


def main():
    quick = "--quick" in sys.argv
    repeat = 1 if quick else 3
    print("| family | sizes | stage | ms at each size | exponent | peak MB (largest) |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, gen, sizes, extra in FAMILIES:
            if quick:
                sizes = sizes[:3]
            per = []
            for n in sizes:
                path = os.path.join(tmp, f"p{n}.adz")
                with open(path, "w") as f:
                    f.write(gen(n))
                best = None
                for _ in range(repeat):
                    got, err = run(path, extra)
                    if got is None:
                        print(f"| {name} | {n} | error | {err} | | |")
                        break
                    if best is None:
                        best = got
                    else:
                        stages = {k: min(v, got[0].get(k, v)) for k, v in best[0].items()}
                        best = (stages, max(best[1], got[1]))
                per.append(best)
            if any(p is None for p in per):
                continue
            stages = [s for s in per[-1][0] if s != "start"]
            for stage in stages:
                ys = [p[0].get(stage, 0.0) for p in per]
                exp = slope(sizes, ys) if ys[-1] >= 2.0 else float("nan")
                exp_s = "—" if math.isnan(exp) else f"{exp:.2f}"
                ms = " / ".join(f"{y:.1f}" for y in ys)
                peak = per[-1][1] / 1024
                print(f"| {name} | {'/'.join(map(str, sizes))} | {stage} | {ms} | {exp_s} | {peak:.0f} |")


if __name__ == "__main__":
    main()
