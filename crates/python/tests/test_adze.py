"""Tests of the Python package `adze` (pytest; run by .ci/run after
`pip install ./crates/python`). docs/python.md describes the API."""

import json
import math
import os
import pathlib
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import adze

ROOT = pathlib.Path(__file__).resolve().parents[3]
SEED = ROOT / "ir-examples" / "seed.adz"

SRC = """
fn sumsq(x: [f64], n: i64) -> f64 {
    var s = 0.0;
    for i in 0..n { s = s + x[i] * x[i]; }
    s
}

fn energy(x: [f64], k: f64) -> f64 {
    var s = 0.0;
    for i in 0..len(x) { s = s + k * x[i] * x[i]; }
    s
}

fn rosenbrock(x: [f64]) -> f64 {
    var s = 0.0;
    for i in 0..len(x) - 1 {
        let a = 1.0 - x[i];
        let b = x[i + 1] - x[i] * x[i];
        s = s + a * a + 100.0 * b * b;
    }
    s
}

fn polar(x: f64, y: f64) -> (f64, f64) { (sqrt(x * x + y * y), atan2(y, x)) }

fn scale(y: mut [f64], a: f64) { for i in 0..len(y) { y[i] = a * y[i]; } }

fn axpy(a: f64, x: [f64], y: mut [f64]) { for i in 0..len(x) { y[i] = y[i] + a * x[i]; } }

fn pick(c: bool, x: f64, y: f64) -> f64 { if c { x } else { y } }

fn gather(x: [f64], idx: [i64]) -> f64 {
    var s = 0.0;
    for k in 0..len(idx) { s = s + x[idx[k]] * x[idx[k]]; }
    s
}

fn histogram(xs: [f64], counts: mut [i64]) {
    fill(counts, 0);
    for k in 0..len(xs) {
        let b = i64(floor(xs[k]));
        if b >= 0 && b < len(counts) { counts[b] = counts[b] + 1; }
    }
}

fn divmod(a: i64, b: i64) -> (i64, i64) { (a / b, a % b) }

fn spin(n: i64) -> f64 {
    var s = 0.0;
    for i in 0..n { s = s + sin(f64(i)); }
    s
}

fn deep(n: i64) -> i64 { if n == 0 { 0 } else { 1 + deep(n - 1) } }
"""


@pytest.fixture(scope="module")
def prog():
    return adze.compile(SRC, name="test.adz")


def central_difference(f, x, h=1e-6):
    """The gradient of f at x by central differences."""
    g = np.zeros_like(x)
    for i in range(len(x)):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


# ---------------------------------------------------------------- primal


def test_primal_positional_and_keyword(prog):
    f = prog.function("sumsq")
    x = np.array([1.0, 2.0, 3.0])
    assert f(x, 3) == 14.0
    assert f(x=x, n=2) == 5.0
    assert f(x, n=3) == 14.0
    assert isinstance(f(x, 3), float)


def test_read_only_arrays_take_any_array_like_converted_once(prog):
    f = prog.function("sumsq")
    assert f([1, 2, 3], 3) == 14.0  # a list of ints
    assert f((1.0, 2.0), 2) == 5.0  # a tuple
    assert f(np.arange(3, dtype=np.float32), 3) == 5.0  # another dtype
    assert f(np.arange(6.0)[::2], 3) == 0.0 + 4.0 + 16.0  # a strided view
    assert f(np.arange(3, dtype=np.int64), 3) == 5.0
    assert f(np.array([], dtype=np.float64), 0) == 0.0
    assert f([], 0) == 0.0


def test_scalars_booleans_tuples_and_integer_results(prog):
    r, t = prog.function("polar")(3.0, 4.0)
    assert (r, t) == (5.0, math.atan2(4.0, 3.0))
    assert prog.function("polar")(3, 4)[0] == 5.0  # ints for f64
    assert prog.function("polar")(np.float32(3), np.float64(4))[0] == 5.0
    pick = prog.function("pick")
    assert pick(True, 1.0, 2.0) == 1.0
    assert pick(False, 1.0, 2.0) == 2.0
    assert pick(np.bool_(True), 1.0, 2.0) == 1.0
    q = prog.function("divmod")(17, 5)
    assert q == (3, 2) and all(isinstance(v, int) for v in q)
    assert prog.function("divmod")(np.int64(7), 2) == (3, 1)


def test_a_function_with_no_result_returns_none(prog):
    y = np.ones(3)
    assert prog.function("scale")(y, 2.0) is None


def test_integer_arrays(prog):
    x = np.array([1.0, 2.0, 3.0])
    assert prog.function("gather")(x, np.array([2, 0, 2])) == 9.0 + 1.0 + 9.0
    assert prog.function("gather")(x, [1, 1]) == 8.0
    assert prog.function("gather")(x, np.array([2], dtype=np.int32)) == 9.0
    counts = np.full(3, 7, dtype=np.int64)
    prog.function("histogram")(np.array([0.5, 1.5, 1.2, 9.0]), counts)
    assert counts.tolist() == [1, 2, 0]


# -------------------------------------------------------- no copies


def test_mut_arrays_are_written_in_place(prog):
    y = np.array([1.0, 2.0, 3.0])
    before = y.__array_interface__["data"][0]
    prog.function("scale")(y, 2.0)
    assert y.tolist() == [2.0, 4.0, 6.0]
    assert y.__array_interface__["data"][0] == before
    # A contiguous view: the write lands in the array it views.
    buf = np.zeros(6)
    view = buf[2:5]
    assert np.shares_memory(view, buf)
    prog.function("axpy")(2.0, np.ones(3), view)
    assert buf.tolist() == [0.0, 0.0, 2.0, 2.0, 2.0, 0.0]


def test_contiguous_float64_arrays_are_borrowed_not_copied(prog):
    axpy = prog.function("axpy")
    x = np.ones(3)
    # A read-only argument that were a copy could share nothing with the
    # `mut` one; the borrow of the caller's own buffer conflicts with it.
    with pytest.raises(adze.Error, match="in use"):
        axpy(1.0, x, x)
    with pytest.raises(adze.Error, match="in use"):
        axpy(1.0, x[:2], x[1:])  # overlapping views
    # A list is converted once: no conflict.
    axpy(1.0, x.tolist(), x)
    assert x.tolist() == [2.0, 2.0, 2.0]


def test_mut_arrays_must_be_writable_contiguous_float64(prog):
    scale = prog.function("scale")
    with pytest.raises(adze.Error, match=r"written in place.*not list"):
        scale([1.0, 2.0], 2.0)
    with pytest.raises(adze.Error, match=r"not a 1-D numpy array of <i8|int64"):
        scale(np.arange(3), 2.0)
    with pytest.raises(adze.Error, match="not contiguous"):
        scale(np.zeros(6)[::2], 2.0)
    ro = np.ones(3)
    ro.flags.writeable = False
    with pytest.raises(adze.Error, match="read-only"):
        scale(ro, 2.0)
    with pytest.raises(adze.Error, match="2-D"):
        scale(np.ones((2, 2)), 2.0)
    assert ro.tolist() == [1.0, 1.0, 1.0]


def test_result_arrays_are_fresh(prog):
    x = np.array([1.0, 2.0])
    _, grads = prog.gradient("rosenbrock")(x)
    assert not np.shares_memory(grads["x"], x)
    assert grads["x"].dtype == np.float64 and grads["x"].flags.c_contiguous


# ---------------------------------------------------------- gradient


def test_gradient_hand_values(prog):
    g = prog.gradient("energy")
    assert g.wrt == ["x", "k"]
    value, grads = g(np.array([1.0, 2.0, 3.0]), 0.5)
    assert value == 7.0
    assert grads["x"].tolist() == [1.0, 2.0, 3.0]  # 2 k x
    assert grads["k"] == 14.0  # sum of x^2
    assert isinstance(grads["k"], float)
    assert list(grads) == ["x", "k"]


def test_gradient_wrt_a_subset_holds_the_rest_constant(prog):
    g = prog.gradient("energy", wrt=["k"])
    value, grads = g(x=np.array([1.0, 2.0]), k=3.0)
    assert value == 15.0 and grads == {"k": 5.0}
    g = prog.gradient("energy", wrt="x")  # one name
    _, grads = g(np.array([1.0, 2.0]), 3.0)
    assert list(grads) == ["x"] and grads["x"].tolist() == [6.0, 12.0]
    # i64 parameters are constant without being named.
    g = prog.gradient("sumsq")
    assert g.wrt == ["x"]
    value, grads = g(np.array([1.0, 2.0, 3.0]), 2)
    assert value == 5.0 and grads["x"].tolist() == [2.0, 4.0, 0.0]


def test_gradient_matches_finite_differences(prog):
    rosen = prog.function("rosenbrock")
    g = prog.gradient("rosenbrock")
    rng = np.random.default_rng(0)
    x = rng.uniform(-1.5, 1.5, size=7)
    value, grads = g(x)
    assert value == rosen(x)
    fd = central_difference(rosen, x)
    np.testing.assert_allclose(grads["x"], fd, rtol=1e-6, atol=1e-6)


def test_gradient_of_a_tuple_is_that_of_the_sum(prog):
    g = prog.gradient("polar")
    (r, t), grads = g(3.0, 4.0)
    assert r == 5.0
    # d(r + t)/dx = x/r - y/r^2, d(r + t)/dy = y/r + x/r^2
    assert grads["x"] == pytest.approx(3 / 5 - 4 / 25, rel=1e-15)
    assert grads["y"] == pytest.approx(4 / 5 + 3 / 25, rel=1e-15)


def test_gradient_with_a_mut_parameter_writes_the_primal_in_place(prog):
    g = prog.gradient("axpy", wrt=["a", "y"])
    y = np.zeros(2)
    value, grads = g(2.0, np.array([1.0, 3.0]), y)
    assert value is None
    assert y.tolist() == [2.0, 6.0]
    # No f64 result, and the cotangents of `y` (its adjoint's initial
    # contents) are zeros: a zero gradient.
    assert grads["a"] == 0.0 and grads["y"].tolist() == [0.0, 0.0]
    with pytest.raises(adze.Error, match="nothing to differentiate"):
        prog.gradient("axpy", wrt=["a"])


# ---------------------------------------------------------- forward


def test_jvp_hand_values(prog):
    j = prog.jvp("energy")
    x = np.array([1.0, 2.0, 3.0])
    value, tangent = j(x, 0.5, tangents={"x": np.array([1.0, 0.0, 0.0])})
    assert (value, tangent) == (7.0, 1.0)  # 2 k x[0]
    value, tangent = j(x=x, k=0.5, tangents={"k": 1.0})
    assert (value, tangent) == (7.0, 14.0)
    value, tangent = j(x, 0.5)  # no tangents: zero
    assert (value, tangent) == (7.0, 0.0)


def test_jvp_agrees_with_the_gradient(prog):
    rng = np.random.default_rng(1)
    x = rng.uniform(-1.0, 1.0, size=5)
    v = rng.uniform(-1.0, 1.0, size=5)
    _, grads = prog.gradient("rosenbrock")(x)
    value, tangent = prog.jvp("rosenbrock")(x, tangents={"x": v})
    assert value == prog.function("rosenbrock")(x)
    assert tangent == pytest.approx(float(grads["x"] @ v), rel=1e-12)


def test_jvp_of_a_tuple_and_wrt(prog):
    j = prog.jvp("polar", wrt=["y"])
    assert j.wrt == ["y"]
    (r, t), (dr, dt) = j(3.0, 4.0, tangents={"y": 1.0})
    assert (r, t) == (5.0, math.atan2(4.0, 3.0))
    assert dr == pytest.approx(4 / 5) and dt == pytest.approx(3 / 25)
    with pytest.raises(adze.Error, match="`x` is held constant"):
        j(3.0, 4.0, tangents={"x": 1.0})


def test_jvp_writes_the_tangent_of_a_mut_array_in_place(prog):
    j = prog.jvp("scale")
    y = np.array([1.0, 2.0])
    ty = np.array([1.0, 0.0])
    value, tangent = j(y, 3.0, tangents={"y": ty, "a": 1.0})
    assert value is None and tangent is None
    assert y.tolist() == [3.0, 6.0]
    assert ty.tolist() == [3.0 + 1.0, 2.0]  # d(a y) = a dy + y da
    with pytest.raises(adze.Error, match="has length 3"):
        j(np.ones(2), 3.0, tangents={"y": np.ones(3)})


# ------------------------------------------------ nested derivatives


def test_hvp_through_nested_autodiff():
    prog = adze.load(str(SEED))
    x = np.array([2.0])
    for name, grad, hvp in [
        ("custom", 9.164000270468907, 72.48292805436535),
        ("plain", 3.027209981231713, 11.971902924433648),
    ]:
        dx = np.zeros(1)
        prog.function("dg_" + name)(x, dx)
        assert dx[0] == grad
        dx, hv = np.zeros(1), np.zeros(1)
        prog.function("hvp_" + name)(x=x, v=np.array([1.0]), dx=dx, hv=hv)
        assert (dx[0], hv[0]) == (grad, hvp)
    # The same numbers with no inlining at all.
    prog = adze.load(str(SEED), inline="none")
    dx, hv = np.zeros(1), np.zeros(1)
    prog.function("hvp_custom")(x, np.array([1.0]), dx, hv)
    assert (dx[0], hv[0]) == (9.164000270468907, 72.48292805436535)


def test_rules_that_do_not_cover_the_mode_warn_as_the_command_does():
    prog = adze.load(str(SEED))
    # f_custom has a reverse rule only: forward mode uses its body.
    with pytest.warns(UserWarning, match=r"seed\.adz:\d+:\d+: warning: .*f_custom"):
        j = prog.jvp("g_custom")
    value, tangent = j(np.array([2.0]), tangents={"x": np.array([1.0])})
    assert tangent == pytest.approx(-math.sin(4.0) * 4.0)


def test_a_gradient_of_a_function_that_takes_a_gradient():
    prog = adze.load(str(SEED))
    # The reverse derivative of g_plain = cos(sum x^2), from outside.
    value, grads = prog.gradient("g_plain")(np.array([2.0]))
    assert value == math.cos(4.0)
    assert grads["x"][0] == 3.027209981231713


# ------------------------------------------------------------ errors


def test_error_is_an_exception_class():
    assert issubclass(adze.Error, Exception)
    assert adze.Error.__module__ == "adze"


def test_parse_error():
    with pytest.raises(adze.Error) as e:
        adze.compile("fn f(x: f64) -> f64 { x + }", name="bad.adz")
    assert str(e.value) == "bad.adz:1:27: error: expected an expression, found `}`"
    assert "^ expected an expression" in e.value.details


def test_wrong_arguments(prog):
    f = prog.function("sumsq")
    x = np.ones(3)
    cases = [
        (lambda: f(x, "3"), "`sumsq`: argument `n` is an i64: expected an int, got str"),
        (lambda: f(x, 3.0), "`sumsq`: argument `n` is an i64: expected an int, got float"),
        (lambda: f(x, 2**63), "`sumsq`: argument `n` is an i64: 9223372036854775808 is out of its range"),
        (lambda: f("abc", 3), "argument `x` is a [f64]: expected a 1-D array of float64"),
        (lambda: f(np.ones((2, 2)), 3), "adze arrays are 1-D"),
        (lambda: f(5.0, 3), "got a scalar (float)"),
        (lambda: f([[1.0], [2.0]], 3), "got a 2-D list"),
        (lambda: f(np.array(["a"]), 1), "got an array of <U1"),
        (lambda: f(np.array([1j]), 1), "got an array of complex128"),
        (lambda: f(x), "`sumsq`: missing argument `n` (an i64 parameter)"),
        (lambda: f(x, 3, 4), "`sumsq` takes 2 arguments (x, n), 3 given"),
        (lambda: f(x, 3, y=1), "`sumsq` has no parameter `y` (its parameters: x, n)"),
        (lambda: f(x, x=x, n=3), "`sumsq`: argument `x` is given twice"),
        (lambda: prog.function("polar")("1", 2.0), "argument `x` is an f64: expected a float, got str"),
        (lambda: prog.function("pick")(1, 2.0, 3.0), "argument `c` is a bool: expected a bool, got int"),
        (lambda: prog.function("gather")(x, [0.5]), "argument `idx` is a [i64]: expected a 1-D array of int64"),
    ]
    for call, message in cases:
        with pytest.raises(adze.Error) as e:
            call()
        assert message in str(e.value), (message, str(e.value))


def test_run_time_errors(prog):
    f = prog.function("sumsq")
    with pytest.raises(adze.Error) as e:
        f(np.ones(3), 5)
    assert str(e.value) == (
        "in function `sumsq` at test.adz:4:29: index 3 is out of bounds for array `x` of length 3"
    )
    # The gradient reports it in the user's terms too.
    with pytest.raises(adze.Error, match="out of bounds for array `x` of length 3"):
        prog.gradient("sumsq")(np.ones(3), 5)
    # The program still works after an error.
    assert f(np.ones(3), 3) == 3.0


def test_request_errors(prog):
    with pytest.raises(adze.Error, match=r"no function named `nope` in this program \(it has: sumsq, energy"):
        prog.function("nope")
    with pytest.raises(adze.Error, match="`wrt`: `n` is an i64 parameter"):
        prog.gradient("sumsq", wrt=["n"])
    with pytest.raises(adze.Error, match="`wrt`: `sumsq` has no parameter `z`"):
        prog.gradient("sumsq", wrt=["z"])
    with pytest.raises(adze.Error, match="`wrt` is empty"):
        prog.jvp("sumsq", wrt=[])
    with pytest.raises(adze.Error, match="`wrt` names parameters"):
        prog.gradient("sumsq", wrt=3)
    with pytest.raises(adze.Error, match="no f64 or \\[f64\\] parameter"):
        prog.gradient("divmod")
    with pytest.raises(adze.Error, match="`stage=final`: expected one of"):
        prog.dump("sumsq", stage="final")
    with pytest.raises(adze.Error, match="`inline=some`"):
        adze.compile(SRC, inline="some")
    with pytest.raises(adze.Error, match="cannot read `/nonexistent.adz`"):
        adze.load("/nonexistent.adz")
    j = prog.jvp("energy")
    with pytest.raises(adze.Error, match="`tangents` is a dict"):
        j(np.ones(2), 1.0, tangents=[1.0])
    with pytest.raises(adze.Error, match="`tangents`: `energy` has no parameter `q`"):
        j(np.ones(2), 1.0, tangents={"q": 1.0})


def test_limits():
    prog = adze.compile(SRC, timeout=0.05)
    with pytest.raises(adze.Error, match="time limit"):
        prog.function("spin")(10**12)
    prog = adze.compile(SRC, max_call_depth=50)
    assert prog.function("deep")(40) == 40
    with pytest.raises(adze.Error, match="deep"):
        prog.function("deep")(100)
    with pytest.raises(adze.Error, match="positive"):
        adze.compile(SRC, timeout=0)


def test_tape_limit():
    src = """
fn loop4(x: f64, n: i64) -> f64 {
    var a = x;
    for i in 0..n { a = sin(a) * a; }
    a
}
"""
    strict = dict(tape_limit=4096, checkpoint_fallback=False)
    small = adze.compile(src, **strict).gradient("loop4")
    value, grads = small(0.5, 10)
    assert math.isfinite(grads["x"])
    with pytest.raises(adze.Error, match="budget of 4 KiB"):
        small(0.5, 10_000)
    value2, grads2 = adze.compile(src).gradient("loop4")(0.5, 10_000)
    assert math.isfinite(grads2["x"])
    # Checkpointed, the same gradient runs, bit for bit, within a budget
    # that the taped one passes (64 KiB: two-level checkpointing keeps one
    # snapshot per segment, and a segment is a sixteenth of the budget).
    budget = 64 * 1024
    with pytest.raises(adze.Error, match="budget of 64 KiB"):
        adze.compile(src, tape_limit=budget, checkpoint_fallback=False).gradient("loop4")(
            0.5, 10_000
        )
    cut = adze.compile(src, tape_limit=budget, checkpoint=True).gradient("loop4")
    value3, grads3 = cut(0.5, 10_000)
    assert (value3, grads3["x"]) == (value2, grads2["x"])
    # By default a call whose tape outgrows the budget runs again
    # checkpointed: the same bits.
    again = adze.compile(src, tape_limit=budget).gradient("loop4")
    assert again(0.5, 10_000) == (value2, grads2)


# ------------------------------------------------------ array results

ARRAYS = """
fn scaled(x: [f64], s: f64) -> [f64] {
    let y = zeros(len(x));
    for i in 0..len(x) { y[i] = s * x[i]; }
    y
}
fn ident(x: [f64]) -> [f64] { x }
fn tail(x: [f64]) -> [f64] { x[1..] }
fn pair(x: [f64]) -> (f64, [f64]) {
    let y = scaled(x, 2.0);
    (y[0], y)
}
fn twice(x: [f64]) -> ([f64], [f64]) {
    let y = scaled(x, 3.0);
    return (y, y);
}
fn squares(n: i64) -> [i64] {
    let v = zeros_i64(n);
    for i in 0..n { v[i] = i * i; }
    v
}
fn bump(a: mut [f64]) -> (i64, [i64], bool, [f64]) {
    let old = scaled(a, 1.0);
    for i in 0..len(a) { a[i] = a[i] + 1.0; }
    (len(a), squares(len(a)), len(a) > 2, old)
}
"""


@pytest.fixture(scope="module")
def arrays():
    return adze.compile(ARRAYS, name="arrays.adz")


def is_result_array(a, dtype, values):
    """A fresh, writable, contiguous 1-D ndarray of `dtype` holding `values`."""
    assert isinstance(a, np.ndarray), type(a)
    assert a.dtype == dtype and a.ndim == 1
    assert a.flags.c_contiguous and a.flags.writeable
    np.testing.assert_array_equal(a, np.array(values, dtype=dtype))
    return True


def test_array_results_are_numpy_arrays(arrays):
    scaled = arrays.function("scaled")
    assert is_result_array(scaled(np.array([1.0, 2.0, 3.0]), 2.0), np.float64, [2, 4, 6])
    assert is_result_array(scaled(x=[1, 2], s=0.5), np.float64, [0.5, 1.0])
    assert is_result_array(arrays.function("squares")(4), np.int64, [0, 1, 4, 9])
    assert is_result_array(arrays.function("tail")([1.0, 2.0, 3.0]), np.float64, [2, 3])
    assert repr(scaled) == "<adze.Function scaled(x: [f64], s: f64) -> [f64]>"
    assert repr(arrays.function("squares")) == "<adze.Function squares(n: i64) -> [i64]>"


def test_empty_and_non_finite_array_results(arrays):
    assert is_result_array(arrays.function("scaled")([], 2.0), np.float64, [])
    assert is_result_array(arrays.function("squares")(0), np.int64, [])
    y = arrays.function("scaled")([1.0, np.nan, np.inf, -np.inf], -1.0)
    assert y[0] == -1.0 and np.isnan(y[1]) and y[2] == -np.inf and y[3] == np.inf


def test_tuples_with_arrays_are_python_tuples(arrays):
    v = arrays.function("pair")(np.array([1.0, 2.0, 3.0]))
    assert isinstance(v, tuple) and len(v) == 2
    assert isinstance(v[0], float) and v[0] == 2.0
    assert is_result_array(v[1], np.float64, [2, 4, 6])
    p, q = arrays.function("twice")([1.0, 2.0])
    assert is_result_array(p, np.float64, [3, 6]) and is_result_array(q, np.float64, [3, 6])
    assert not np.shares_memory(p, q)  # an array returned twice is two arrays
    a = np.array([1.0, 2.0, 3.0])
    n, sq, big, old = arrays.function("bump")(a)
    assert isinstance(n, int) and n == 3
    assert is_result_array(sq, np.int64, [0, 1, 4])
    assert big is True
    assert is_result_array(old, np.float64, [1, 2, 3])
    assert a.tolist() == [2.0, 3.0, 4.0]  # the `mut` array, written in place
    assert repr(arrays.function("bump")) == "<adze.Function bump(a: mut [f64]) -> (i64, [i64], bool, [f64])>"


def test_array_results_are_the_callers_own(arrays):
    x = np.array([1.0, 2.0, 3.0])
    for name in ["ident", "tail"]:
        y = arrays.function(name)(x)
        assert not np.shares_memory(y, x)
        y[:] = -7.0
        assert x.tolist() == [1.0, 2.0, 3.0]
    scaled = arrays.function("scaled")
    a, b = scaled(x, 1.0), scaled(x, 1.0)
    assert not np.shares_memory(a, b)
    # The array outlives everything else of the call.
    del scaled
    assert a.tolist() == [1.0, 2.0, 3.0]


def test_array_results_from_many_threads(arrays):
    scaled = arrays.function("scaled")
    x = np.arange(1000.0)
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda k: scaled(x, float(k)), range(64)))
    for k, y in enumerate(got):
        np.testing.assert_array_equal(y, k * x)


def test_a_failing_call_with_array_results_raises(arrays):
    with pytest.raises(adze.Error, match="cannot allocate an array of length -1"):
        arrays.function("squares")(-1)


def test_jvp_of_array_results(arrays):
    # The tangent of an array result is an array beside the primal.
    value, tangent = arrays.jvp("scaled")([1.0, 2.0, 3.0], 2.0, tangents={"x": [1.0, 0.0, 0.5], "s": 1.0})
    assert is_result_array(value, np.float64, [2, 4, 6])
    assert is_result_array(tangent, np.float64, [3.0, 2.0, 4.0])
    value, tangents = arrays.jvp("pair")([1.0, 2.0], tangents={"x": [1.0, 1.0]})
    assert value[0] == 2.0 and is_result_array(value[1], np.float64, [2, 4])
    assert tangents[0] == 2.0 and is_result_array(tangents[1], np.float64, [2, 2])


def test_the_gradient_of_an_array_result_is_an_error(arrays):
    # As jax.grad: a gradient is of scalar results.
    with pytest.raises(adze.Error, match="returns an array; a gradient is of f64 results"):
        arrays.gradient("scaled")


# ----------------------------------------------------------- threads


def test_one_function_called_from_many_threads(prog):
    rosen = prog.function("rosenbrock")
    grad = prog.gradient("rosenbrock")
    rng = np.random.default_rng(2)
    xs = [rng.uniform(-1, 1, size=50) for _ in range(64)]
    expected = [(rosen(x), grad(x)[1]["x"]) for x in xs]

    def work(x):
        return rosen(x), grad(x)[1]["x"]

    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(work, xs))
    for (v, g), (ev, eg) in zip(got, expected):
        assert v == ev
        assert np.array_equal(g, eg)


def test_a_read_only_array_is_shared_by_threads_at_once(prog):
    f = prog.function("sumsq")
    x = np.arange(1000.0)
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda n: f(x, n), range(0, 1000, 10)))
    assert got == [float(np.sum(x[:n] ** 2)) for n in range(0, 1000, 10)]


def test_a_call_releases_the_gil(prog):
    spin = prog.function("spin")
    n = 10**6
    t0 = time.perf_counter()
    spin(n)
    per_call = time.perf_counter() - t0
    # A call long enough to see (about 0.3 s).
    n = int(n * min(1000.0, max(1.0, 0.3 / max(per_call, 1e-9))))
    window = []

    def work():
        window.append(time.perf_counter())
        spin(n)
        window.append(time.perf_counter())

    t = threading.Thread(target=work)
    t.start()
    stamps = []
    while t.is_alive():
        stamps.append(time.perf_counter())
    t.join()
    # Held for the whole call, the GIL would let this thread run only
    # before the call enters the compiled code and after it returns: no
    # stamp in the middle third of the call. Released, it runs all along.
    begin, end = window
    third = (end - begin) / 3
    middle = [s for s in stamps if begin + third < s < end - third]
    assert len(middle) > 100, (len(middle), len(stamps), end - begin)


# ------------------------------------------------------------- dumps


def cli():
    """The `adze` command built beside this package, if any."""
    candidates = []
    if os.environ.get("ADZE_CLI"):
        candidates.append(pathlib.Path(os.environ["ADZE_CLI"]))
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    candidates += [target / "debug" / "adze", target / "release" / "adze"]
    found = [c for c in candidates if c.is_file()]
    return max(found, key=lambda c: c.stat().st_mtime) if found else None


def test_dump(prog):
    text = prog.dump("polar", stage="parsed")
    assert text.startswith("; stage: parsed\nfunction @polar(x: f64, y: f64) -> (f64, f64) {\n")
    assert prog.dump("polar", stage="all").count("; stage: ") == 4
    assert "function @sumsq" in prog.dump(stage="optimized")
    assert "(--no-opt: identical to `ad`)" in adze.compile(SRC, optimize=False).dump("polar", stage="optimized")


@pytest.mark.skipif(cli() is None, reason="the `adze` command is not built")
def test_dumps_and_messages_are_the_commands(tmp_path):
    prog = adze.load(str(SEED))
    for stage in ["parsed", "inlined", "ad", "optimized", "all"]:
        out = subprocess.run(
            [str(cli()), "dump", str(SEED), "--fn", "hvp_custom", "--stage", stage],
            capture_output=True, text=True, check=True,
        )
        assert prog.dump("hvp_custom", stage=stage) == out.stdout
    file = tmp_path / "test.adz"
    file.write_text(SRC)
    prog = adze.load(str(file))
    calls = [
        (lambda: prog.function("nope"), ["--fn", "nope"]),
        (lambda: prog.function("sumsq")(np.ones(3), 5), ["--fn", "sumsq", "--arg", "x=[1, 1, 1]", "--arg", "n=5"]),
        (lambda: prog.function("deep")(-1), ["--fn", "deep", "--arg", "n=-1"]),
    ]
    for call, args in calls:
        with pytest.raises(adze.Error) as e:
            call()
        out = subprocess.run([str(cli()), "run", str(file)] + args, capture_output=True, text=True)
        assert out.returncode == 1
        assert out.stderr.strip() == "error: " + str(e.value)
    bad = tmp_path / "bad.adz"
    bad.write_text("fn f(x: f64) -> f64 { x + }")
    with pytest.raises(adze.Error) as e:
        adze.load(str(bad))
    out = subprocess.run([str(cli()), "check", str(bad)], capture_output=True, text=True)
    assert out.stderr.splitlines()[0] == str(e.value)
    assert e.value.details.strip() in out.stderr


@pytest.mark.skipif(cli() is None, reason="the `adze` command is not built")
def test_array_results_are_the_commands_json(arrays, tmp_path):
    file = tmp_path / "arrays.adz"
    file.write_text(ARRAYS)
    calls = [
        ("scaled", {"x": [1.0, float("nan"), 0.1], "s": 3.0}, ["--arg", "x=[1, nan, 0.1]", "--arg", "s=3"]),
        ("pair", {"x": [1.0, 2.0]}, ["--arg", "x=[1, 2]"]),
        ("twice", {"x": []}, ["--arg", "x=[]"]),
        ("squares", {"n": 5}, ["--arg", "n=5"]),
        ("bump", {"a": np.array([1.0, 2.0])}, ["--arg", "a=[1, 2]"]),
    ]

    def plain(v):
        """A Python result as the command's JSON spells it."""
        if isinstance(v, tuple):
            return [plain(p) for p in v]
        if isinstance(v, np.ndarray):
            return [plain(p) for p in v.tolist()]
        if isinstance(v, float) and not math.isfinite(v):
            return "NaN" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        return v

    for name, kwargs, args in calls:
        got = arrays.function(name)(**kwargs)
        out = subprocess.run(
            [str(cli()), "run", str(file), "--fn", name, "--json"] + args,
            capture_output=True, text=True, check=True,
        )
        assert plain(got) == json.loads(out.stdout)["result"], name


def test_the_readme_example_runs():
    # What README.md shows, as written there.
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```python\n", readme.index("## From Python")) + len("```python\n")
    code = readme[start:readme.index("```", start)]
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
