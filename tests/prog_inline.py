"""Calls of functions whose bodies are statements, inlined in native kernels (runtime/native/expressions.py), as
NPBench's cavity_flow calls build_up_b and pressure_poisson."""
import numpy as np


def _smooth(b, u):
    # mutates its argument, returns nothing
    b[1:-1] = 0.5 * (u[2:] + u[:-2])


def _relax(nit, p, b):
    # a loop of its own, a local array, rebinds a local it made
    pn = np.empty_like(p)
    for _ in range(nit):
        pn = p.copy()
        p[1:-1] = 0.5 * (pn[2:] + pn[:-2]) - b[1:-1]
        p[0] = p[1]


def flow(steps, nit, u, p):
    b = np.zeros_like(u)
    for _ in range(steps):
        _smooth(b, u)
        _relax(nit, p, b)
        u[1:-1] = u[1:-1] - 0.1 * (p[2:] - p[:-2])
    return u, p


def _norm_step(x, scale):
    # statements, then a returned value; it rebinds its parameter (the caller's name keeps its value)
    total = 0.0
    for i in range(x.shape[0]):
        total += x[i] * x[i]
    x = x * scale
    return total + x[0]


def twice(a, scale):
    s = 0.0
    for i in range(3):
        t = _norm_step(a, scale)  # a statement's whole value: inlined (inside a larger expression it is not)
        u = _norm_step(a, scale + i)
        s += t + u
    return s, a


def _count_down(n):
    k = 0
    while n > 0:
        n -= 1
        k += 2
    return k


def in_a_condition(a):
    # the call may not run: Python skips it where a[i] <= 0, so it is not inlined there
    s = 0
    for i in range(a.shape[0]):
        if a[i] > 0 and _count_down(a[i]) > 3:
            s += 1
    return s


def _early(x):
    if x > 1.0:
        return 1.0
    y = x * 2.0
    return y


def returns_early(a):
    # a return inside an if is not one return at the end: the loop declines
    s = 0.0
    for i in range(a.shape[0]):
        s += _early(a[i])
    return s


def _bump(x):
    x[0] = x[0] + 1.0
    return x[0]


def read_then_call(a):
    # Python reads a[0] before the call changes it: the call is not inlined inside a larger expression
    s = 0.0
    for _ in range(3):
        s += a[0] * 10.0 + _bump(a)
    return s


def _bump_then_read(x, j):
    x[0] = x[0] + 1.0
    t = x[j]
    return t


def changes_then_raises(a, j):
    # the inlined body changes a, then raises: the call must not change a twice (kernel, then the rerun)
    r = _bump_then_read(a, j)
    for i in range(2):
        r += a[i]
    return r


def _sq(v):
    return v * v


def walrus_argument(a):
    # Python reads x before the call's argument assigns it: the call is not inlined with its arguments bound first
    s = 0.0
    x = 1.0
    for i in range(a.shape[0]):
        s += x + _sq(x := x + a[i])
    return s
