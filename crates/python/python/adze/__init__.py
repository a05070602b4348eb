"""adze: compile-once automatic differentiation of .adz programs.

    import adze, numpy as np
    prog = adze.compile(source)              # or adze.load("f.adz")
    f = prog.function("f")                   # compiled once
    y = f(x=np.ones(3), n=3)                 # keyword or positional
    g = prog.gradient("f", wrt=["x"])        # reverse mode, compiled once
    value, grads = g(x=np.ones(3), n=3)      # grads: {name: ndarray or float}
    j = prog.jvp("f")                        # forward mode
    value, tangent = j(x=np.ones(3), n=3, tangents={"x": np.ones(3)})
    print(prog.dump("f", stage="optimized"))

Arrays are lent to the compiled code without copies (contiguous float64 or
int64 numpy arrays; anything else passed for a read-only parameter is
converted once); a `mut` parameter is written in place in the caller's
array. Calls release the GIL. Every error is an `adze.Error` carrying the
one-line message of the `adze` command. See docs/python.md.
"""

from adze._adze import (
    Error,
    Function,
    Gradient,
    Jvp,
    Program,
    __version__,
    compile,
    load,
)

__all__ = [
    "Error",
    "Function",
    "Gradient",
    "Jvp",
    "Program",
    "__version__",
    "compile",
    "load",
]
