"""``X.T @ f(X @ v, ...)`` as one pass over X: the gradient step of logistic and linear regression.

NumPy reads X twice (``X @ v``, then ``X.T @ r``) and writes every element-wise step of ``f`` as a temporary of n
elements. This primitive, made by the ``fuse_row_products`` pass (phylanx_py/passes/rowdot.py), computes per row
i: ``s = X[i] . v``, ``r = f(s, leaves[i]...)``, ``acc += X[i] * r``, in a generated Numba kernel over row blocks
on parallel threads, each with its own accumulator (added in block order). ``f`` is a fused spec
(primitives/fused.py) whose ``("arg", 0)`` is ``X @ v``; the other leaves are scalars or vectors with one value
per row. ``locs`` = (loc of ``X @ v``, loc of ``X.T @ ...``, then each operation of the spec in pre-order).
Other inputs (dtypes, shapes, small sizes) run the reference: exactly the NumPy operations written.
"""
from __future__ import annotations

import numpy as np

from . import fused, kernel_builds
from .registry import OperationFailed, lookup, register

# Below this many elements of X, calling the kernel costs more than it saves (LRA 569x30 measured 4.5x NumPy
# through it); the group's guard in the generated code uses the same threshold (runtime/codegen.py).
MIN_ELEMENTS = 1 << 17
_kernels: dict = {}


_evaluators: dict = {}


def _evaluator(spec):
    """The spec as nested closures over the registry's kernels, built once: small inputs (LRA on a few hundred
    rows, every iteration) pay no walk of the spec and no registry lookups."""
    hit = _evaluators.get(spec)
    if hit is not None:
        return hit
    def build(node):
        if node[0] == "arg":
            i = node[1]
            return lambda args: args[i]
        if node[0] == "const":
            c = node[1]
            return lambda args: c
        kernel = lookup(node[0]).kernel
        parts = [build(c) for c in node[1:]]
        if len(parts) == 1:
            (p,) = parts
            return lambda args: kernel(p(args))
        if len(parts) == 2:
            p, q = parts
            return lambda args: kernel(p(args), q(args))
        return lambda args: kernel(*[p(args) for p in parts])

    fn = _evaluators[spec] = build(spec)
    return fn


def reference(spec, locs, X, v, *leaves):
    """The unfused meaning: ``X.T @ f(X @ v, *leaves)``, NumPy op by op (errors at their own operation)."""
    try:
        return np.matmul(X.T, _evaluator(spec)([np.matmul(X, v), *leaves]))
    except Exception:  # noqa: BLE001 - again, one operation at a time, to name the one that fails
        pass
    inner, outer, ops = locs[0], locs[1], locs[2:]
    try:
        row = np.matmul(X, v)
    except Exception as e:
        raise OperationFailed(e, inner, "__matmul") from e
    r = fused.reference(spec, [row, *leaves], ops)
    try:
        return np.matmul(X.T, r)
    except Exception as e:
        raise OperationFailed(e, outer, "__matmul") from e


def _kinds(X, v, leaves):
    """'v' (one float64 per row) or 's' (a scalar) per leaf, or None when the kernel does not apply."""
    if not (type(X) is np.ndarray and X.ndim == 2 and X.dtype == np.float64 and X.size >= MIN_ELEMENTS
            and type(v) is np.ndarray and v.dtype == np.float64 and v.shape == (X.shape[1],)):
        return None
    kinds = []
    for a in leaves:
        if type(a) is np.ndarray and a.dtype == np.float64 and a.shape == (X.shape[0],):
            kinds.append("v")
        elif type(a) in (float, int) or (isinstance(a, np.generic) and a.dtype == np.float64):
            kinds.append("s")
        else:
            return None
    return tuple(kinds)


def _kernel(spec, kinds):
    return kernel_builds.cached_kernel(_kernels, (spec, kinds), lambda: _build(spec, kinds))


def _build(spec, kinds):
    probes = [np.empty(0)] + [np.empty(0) if k == "v" else 1.0 for k in kinds]
    found = fused._dtypes(spec, probes)
    if found is None or found[0][id(spec)] != np.float64:
        return None
    dtypes = found[0]
    names = ["s"] + [f"b{k}" for k in range(1, len(kinds) + 1)]
    lines, result = fused._body(spec, dtypes, names, indent="        ")
    params = ", ".join(f"a{k}" for k in range(1, len(kinds) + 1))
    loads = [f"        b{k} = a{k}[i]" if kind == "v" else f"        b{k} = a{k}"
             for k, kind in enumerate(kinds, start=1)]
    src = ("import numpy as np\nimport numba\n\n\n"
           "@numba.njit(cache=True, nogil=True)\n"
           f"def kernel(X, v, lo, hi, acc{', ' + params if params else ''}):\n"
           "    m = X.shape[1]\n"
           "    m4 = m - m % 4\n"
           "    for i in range(lo, hi):\n"
           # four partial sums: one chain of dependent additions per row was the kernel's limit (a float add's
           # latency per element); the order differs from BLAS's as any dot product's does (rounding only)
           "        s0 = 0.0\n"
           "        s1 = 0.0\n"
           "        s2 = 0.0\n"
           "        s3 = 0.0\n"
           "        for j in range(0, m4, 4):\n"
           "            s0 += X[i, j] * v[j]\n"
           "            s1 += X[i, j + 1] * v[j + 1]\n"
           "            s2 += X[i, j + 2] * v[j + 2]\n"
           "            s3 += X[i, j + 3] * v[j + 3]\n"
           "        for j in range(m4, m):\n"
           "            s0 += X[i, j] * v[j]\n"
           "        s = (s0 + s1) + (s2 + s3)\n"
           + "\n".join(loads + lines) + "\n"
           f"        r = {result}\n"
           "        for j in range(m):\n"
           "            acc[j] += X[i, j] * r\n")
    return fused._compile(spec, None, None, src=src, warm=False)


def row_products(spec, locs, X, v, *leaves):
    """The kernel of ``fused.rowdot`` (see the module doc)."""
    kinds = _kinds(X, v, leaves)
    kernel = _kernel(spec, kinds) if kinds is not None else None
    if kernel is None:
        return reference(spec, locs, X, v, *leaves)
    X = np.ascontiguousarray(X)
    n, m = X.shape
    blocks = fused._blocks(n, max(1, min(fused._threads(), n // 4096 or 1)))

    def run(lo, hi):
        acc = np.zeros(m)  # one accumulator per block, added in block order below
        kernel(X, v, lo, hi, acc, *leaves)
        return acc

    with np.errstate(all="ignore"):
        accs = fused._map_blocks(run, blocks)
    out = accs[0]
    for a in accs[1:]:
        out = out + a
    return out


def _tile(ops, spec, locs, X, v, *leaves):
    """On distributed rows: where the backend hands a rule its blocks of rows (an SPMD rank's own: ``row_blocks``),
    each block through the kernel and the blocks' sums added across them; else the reference's operations, each
    by its own tile rule (tile tasks, ``X.T @ r`` as a sum of partial products)."""
    blocks = ops.row_blocks(X, v, leaves)
    if blocks is None:
        return reference(spec, locs, X, v, *leaves)
    rows, pieces, add = blocks
    return add(row_products(spec, locs, rows, v, *pieces))


register("fused.rowdot", row_products, display="fused_rowdot", parallel=True, tile=_tile)
