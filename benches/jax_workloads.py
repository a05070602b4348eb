#!/usr/bin/env python3
"""The SPEC section 6 workloads in JAX (CPU, float64, jitted), for comparison
with `cargo bench --bench workloads`.

Same workloads, sizes and columns as benches/workloads.rs: primal, reverse
gradient (jax.grad), forward derivative in one direction (jax.jvp),
Hessian-vector product as forward over reverse (jvp of grad), and the
compile time of each (jax.jit(...).lower(...).compile()). Loops are written
the way JAX wants them (vectorised where the math allows, lax.scan for the
recurrences), as a JAX user would.

    just jax-venv                 # a venv with jax[cpu] in the target directory
    target/jax-venv/bin/python benches/jax_workloads.py [--quick]

`cargo bench --bench workloads` runs it at the end when it finds that venv
(or `ADZE_BENCH_JAX`). `ADZE_BENCH_ONLY=seed,gmm2` runs only those workloads
(the names of benches/workloads.rs: seed, rosenbrock, rosenbrock2, gmm, gmm2,
lstm, recurrence).

Prints a markdown table of medians and ratios.
"""

import os
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", True)

QUICK = "--quick" in sys.argv
SAMPLES = 3 if QUICK else 10


def data(seed, n, lo, hi):
    key = jax.random.PRNGKey(seed)
    return jax.random.uniform(key, (n,), jnp.float64, lo, hi)


def median_time(f, *args):
    """Median wall time of f(*args) over SAMPLES runs (after one warm run),
    each run repeated until it takes at least 20 ms."""
    jax.block_until_ready(f(*args))
    t = time.perf_counter()
    jax.block_until_ready(f(*args))
    one = time.perf_counter() - t
    reps = max(1, int(0.02 / max(one, 1e-9)))
    times = []
    for _ in range(SAMPLES):
        t = time.perf_counter()
        for _ in range(reps):
            r = f(*args)
        jax.block_until_ready(r)
        times.append((time.perf_counter() - t) / reps)
    return statistics.median(times)


def compile_time(f, *args):
    t = time.perf_counter()
    jax.jit(f).lower(*args).compile()
    return time.perf_counter() - t


# ---------------------------------------------------------------- workloads


def seed_f(x):
    return jnp.cos(jnp.sum(x * x))


def rosenbrock_f(x):
    a = 1.0 - x[:-1]
    b = x[1:] - x[:-1] * x[:-1]
    return jnp.sum(a * a + 100.0 * b * b)


def term(a, b):
    return (1.0 - a) ** 2 + 100.0 * (b - a**2) ** 2


def rosenbrock2_f(x):
    """The second style (rosenbrock_style2.adz): a helper per pair, vmapped."""
    return jnp.sum(jax.vmap(term)(x[:-1], x[1:]))


def gmm_f(d, k, n, gamma, m):
    icf_sz = d * (d + 1) // 2
    rows, cols = jnp.tril_indices(d, -1)
    # ADBench's packing: for i in 0..d, for j in i+1..d: (j, i), column by
    # column; tril_indices is row by row, so reorder.
    order = sorted(range(len(rows)), key=lambda t: (int(cols[t]), int(rows[t])))
    rows, cols = rows[jnp.array(order, dtype=int)], cols[jnp.array(order, dtype=int)]

    def f(alphas, means, icf, x):
        icf = icf.reshape(k, icf_sz)
        means = means.reshape(k, d)
        x = x.reshape(n, d)
        diag = icf[:, :d]
        lower = icf[:, d:]
        q = jnp.zeros((k, d, d)).at[:, rows, cols].set(lower)
        q = q + jax.vmap(jnp.diag)(jnp.exp(diag))
        sum_qs = jnp.sum(diag, axis=1)
        xc = x[:, None, :] - means[None, :, :]  # n k d
        qx = jnp.einsum("kij,nkj->nki", q, xc)
        main = alphas[None, :] + sum_qs[None, :] - 0.5 * jnp.sum(qx * qx, axis=2)
        slse = jnp.sum(jax.nn.logsumexp(main, axis=1))
        constant = -n * d * 0.5 * jnp.log(2.0 * jnp.pi)
        frob = jnp.sum(jnp.exp(diag) ** 2) + jnp.sum(lower**2)
        nw = d + m + 1
        prior = 0.5 * gamma * gamma * frob - m * jnp.sum(sum_qs)
        prior = prior - k * nw * d * (jnp.log(gamma) - 0.5 * jnp.log(2.0))
        return constant + slse - n * jax.nn.logsumexp(alphas) + prior

    return f


def gmm2_f(d, k, n, gamma, m):
    """The second style (gmm_style2.adz) as a JAX user writes it: one helper
    per piece of the formula, each component's dense Q, vmap over points and
    components."""
    icf_sz = d * (d + 1) // 2
    # The strict lower triangle, column by column (ADBench's packing).
    rows = [r for c in range(d) for r in range(c + 1, d)]
    cols = [c for c in range(d) for r in range(c + 1, d)]

    def logsumexp(v):
        biggest = jnp.max(v)
        return biggest + jnp.log(jnp.sum(jnp.exp(v - biggest)))

    def build_q(params):
        q = jnp.diag(jnp.exp(params[:d]))
        return q.at[rows, cols].set(params[d:])

    def mahalanobis(q, x, mu):
        y = q @ (x - mu)
        return jnp.dot(y, y)

    def log_wishart_prior(qs, log_dets):
        dof = d + m + 1
        c = dof * d * (jnp.log(gamma) - 0.5 * jnp.log(2.0))
        frob = jnp.sum(qs * qs, axis=(1, 2))
        return jnp.sum(0.5 * gamma * gamma * frob - m * log_dets) - k * c

    def f(alphas, means, icf, x):
        params = icf.reshape(k, icf_sz)
        means = means.reshape(k, d)
        x = x.reshape(n, d)
        qs = jax.vmap(build_q)(params)
        log_dets = jnp.sum(params[:, :d], axis=1)

        def point(xi):
            maha = jax.vmap(mahalanobis, in_axes=(0, None, 0))(qs, xi, means)
            return logsumexp(alphas + log_dets - 0.5 * maha)

        loglik = jnp.sum(jax.vmap(point)(x))
        constant = -0.5 * n * d * jnp.log(2.0 * jnp.pi)
        return constant + loglik - n * logsumexp(alphas) + log_wishart_prior(qs, log_dets)

    return f


def sigmoid(x):
    return 1.0 / (1.0 + jnp.exp(-x))


def lstm_f(w, xs, ys):
    def step(carry, xy):
        h, c = carry
        x, y = xy
        f = sigmoid(w[0] * x + w[1] * h + w[2])
        i = sigmoid(w[3] * x + w[4] * h + w[5])
        o = sigmoid(w[6] * x + w[7] * h + w[8])
        g = jnp.tanh(w[9] * x + w[10] * h + w[11])
        c2 = f * c + i * g
        h2 = o * jnp.tanh(c2)
        d = h2 - y
        return (h2, c2), d * d

    _, losses = lax.scan(step, (0.0, 0.0), (xs, ys))
    return jnp.sum(losses) / xs.shape[0]


def logistic_f(n):
    def f(r, x0):
        def step(x, _):
            return r * x * (1.0 - x), None

        x, _ = lax.scan(step, x0, None, length=n)
        return x

    return f


# ---------------------------------------------------------------- the table


def bench(label, f, args, tangents, argnums):
    """Times primal, gradient, forward and HVP of f with respect to argnums."""
    grad = jax.grad(f, argnums=argnums)

    def fwd(*a):
        primals = tuple(a[i] for i in argnums)

        def g(*p):
            full = list(a)
            for i, v in zip(argnums, p):
                full[i] = v
            return f(*full)

        return jax.jvp(g, primals, tuple(tangents))

    def hvp(*a):
        primals = tuple(a[i] for i in argnums)

        def g(*p):
            full = list(a)
            for i, v in zip(argnums, p):
                full[i] = v
            return grad(*full)

        return jax.jvp(g, primals, tuple(tangents))[1]

    row = {"workload": label}
    for name, fn in [("primal", f), ("gradient", grad), ("forward", fwd), ("hvp", hvp)]:
        row["compile " + name] = compile_time(fn, *args)
        row[name] = median_time(jax.jit(fn), *args)
    return row


def fmt(s):
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} µs"


def main():
    only = os.environ.get("ADZE_BENCH_ONLY")
    on = (lambda w: True) if not only else (lambda w: w in only.split(","))
    rows = []
    n = 10**6
    if on("seed"):
        x = data(1, n, -1.0, 1.0)
        v = data(2, n, -1.0, 1.0)
        rows.append(bench("seed n=1e6", seed_f, (x,), (v,), (0,)))
    x = data(3, n, -1.0, 1.0)
    v = data(4, n, -1.0, 1.0)
    for name, f in [("rosenbrock", rosenbrock_f), ("rosenbrock2", rosenbrock2_f)]:
        if on(name):
            rows.append(bench(f"{name} n=1e6", f, (x,), (v,), (0,)))
    def gmm_args(d, k, npts):
        icf_sz = d * (d + 1) // 2
        return (
            data(5, k, -1.0, 1.0),
            data(6, k * d, -1.0, 1.0),
            data(7, k * icf_sz, -0.3, 0.3),
            data(8, npts * d, -1.0, 1.0),
        )

    for name, make in [("gmm", gmm_f), ("gmm2", gmm2_f)]:
        if not on(name):
            continue
        for d, k, npts in [(8, 10, 1000), (64, 50, 50)]:
            icf_sz = d * (d + 1) // 2
            args = gmm_args(d, k, npts)
            tang = (data(9, k, -1, 1), data(10, k * d, -1, 1), data(11, k * icf_sz, -1, 1))
            f = make(d, k, npts, 1.0, 0)
            rows.append(bench(f"{name} d={d} k={k} n={npts}", f, args, tang, (0, 1, 2)))
    if on("gmm") and on("gmm2"):
        # The two styles compute the same function.
        d, k, npts = 8, 10, 1000
        args = gmm_args(d, k, npts)
        a = jax.jit(gmm_f(d, k, npts, 1.0, 0))(*args)
        b = jax.jit(gmm2_f(d, k, npts, 1.0, 0))(*args)
        print(f"gmm vs gmm2 in JAX: relative difference {abs((a - b) / a):.1e}")
    t = 10**5
    if on("lstm"):
        w = data(12, 12, -0.5, 0.5)
        rows.append(
            bench(
                "lstm T=1e5",
                lstm_f,
                (w, data(13, t, -1, 1), data(14, t, -1, 1)),
                (data(15, 12, -1, 1),),
                (0,),
            )
        )
    if on("recurrence"):
        rows.append(
            bench(
                "logistic n=1e6",
                logistic_f(10**6),
                (jnp.float64(3.0), jnp.float64(0.3)),
                (jnp.float64(1.0), jnp.float64(0.0)),
                (0, 1),
            )
        )

    flags = os.environ.get("XLA_FLAGS", "")
    isa = [f.split("=", 1)[1] for f in flags.split() if f.startswith("--xla_cpu_max_isa=")]
    width = f"; max ISA {isa[-1]}" if isa else "; the host's vector width"
    print(
        f"JAX {jax.__version__}, {jax.devices()[0].platform}, float64, jitted{width}; "
        f"medians of {SAMPLES}"
    )
    print()
    print("| workload | primal | grad/primal | hvp/primal | fwd/primal | gradient | forward | hvp | compile grad (ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        p = r["primal"]
        print(
            f"| {r['workload']} | {fmt(p)} | {r['gradient'] / p:.2f} | {r['hvp'] / p:.2f} "
            f"| {r['forward'] / p:.2f} | {fmt(r['gradient'])} | {fmt(r['forward'])} "
            f"| {fmt(r['hvp'])} | {r['compile gradient'] * 1e3:.1f} |"
        )


if __name__ == "__main__":
    main()
