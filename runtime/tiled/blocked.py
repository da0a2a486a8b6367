"""Row-blocked execution of a tile program, on the worker: one pass over memory instead of one per operation.

A tile program such as LRA's ``X_i.T @ (1/(1+exp(-(X_i @ w))) - y_i)`` reads the 40 MB tile twice (two
matrix-vector products) and writes temporaries of every element-wise step. When every operation is *row-local*
(element-wise on row-aligned arrays, ``rows @ small``, reductions over other axes, masks over rows) and the result
is a *sum over rows* (``rows.T @ rows``, a reduction's partial over axis 0), the program can run on blocks of
rows that fit in cache and add up the blocks' results: the tile is read once from memory, and temporaries stay in
cache. Anything else runs as written. The decision is made here, on the actual arrays, by following each value's
kind through the program: "R" (axis 0 is the tile's rows), "T" (a transposed 2-D R), "S" (does not depend on
rows), "C" (summed over rows: the end)."""
from __future__ import annotations

import functools
import os

import numpy as np

from . import tasks

# Rows per block: the widest row-aligned input's block is about this size (L2-sized). Settable for tests, which
# use a tiny value so that small arrays take the blocked path too.
BLOCK_BYTES = int(os.environ.get("PHYLANX_TILE_BLOCK_BYTES", 1 << 21))
MIN_ROWS = 16
MIN_BLOCKS = 4  # smaller tiles run unblocked

_REDUCERS = {np.sum, np.mean, np.min, np.max, np.prod, np.argmin, np.argmax, np.any, np.all, np.var, np.std}


def _elementwise(fn) -> bool:
    if isinstance(fn, np.ufunc):
        return fn.nout == 1
    if isinstance(fn, functools.partial):
        name = getattr(fn.func, "__name__", "")
        return isinstance(fn.func, np.ufunc) or name == "fused_elementwise"
    return getattr(fn, "__name__", "") in ("_astype", "_clip_kernel", "_flat_mask") or fn is np.where


def plan(ops, out, leaves):
    """The kinds of the leaves and ops, and the final combine, or None when the program must run unblocked."""
    n = max((v.shape[0] for v in leaves if isinstance(v, np.ndarray) and v.ndim), default=0)
    widest = max((v.nbytes // max(n, 1) for v in leaves if isinstance(v, np.ndarray) and v.ndim and
                  v.shape[0] == n), default=0)
    if n == 0 or widest == 0:
        return None
    rows = max(MIN_ROWS, BLOCK_BYTES // widest)
    if n < MIN_BLOCKS * rows:
        return None
    leaf_kind = ["R" if isinstance(v, np.ndarray) and v.ndim and v.shape[0] == n else "S" for v in leaves]
    kinds = []

    def kind_of(ref):
        tag, x = ref
        return leaf_kind[x] if tag == "L" else kinds[x] if tag == "N" else "S"

    for fn, args, kwargs, _, _ in ops:
        ks = [kind_of(a) for a in args]
        if any(tag == "C" and isinstance(x, np.ndarray) and x.ndim and x.shape[0] == n for tag, x in args):
            return None  # a row-aligned constant (a NumPy operand's slice): it would need slicing too
        if ("C" in ks and fn is not tasks.pack) or ("T" in ks and not (fn is np.matmul and ks == ["T", "R"])):
            return None
        if fn is tasks.pack:
            if not all(k == "C" for k in ks):
                return None
            kinds.append("P")
        elif "R" not in ks:
            kinds.append("S")
        elif fn is np.matmul:  # a ufunc too: before the element-wise test
            kinds.append({("R", "S"): "R", ("T", "R"): "C", ("R", "R"): "C"}.get(tuple(ks)))
            if ks == ["R", "R"] and np.ndim(_probe(args[0], leaves)) != 1:
                return None
        elif _elementwise(fn):
            kinds.append("R")
        elif isinstance(fn, functools.partial) and getattr(fn.func, "__name__", "") == "fused_sum":
            axis = fn.args[2]
            kinds.append("R" if isinstance(axis, int) and axis != 0 else None)
        elif fn is np.transpose:
            kinds.append("T" if ks[0] == "R" and len(args) > 1 and tuple(args[1][1]) == (1, 0) else None)
        elif fn in _REDUCERS:
            axis = (kwargs or {}).get("axis")
            axes = axis if isinstance(axis, tuple) else (axis,)
            kinds.append("R" if axis is not None and all(isinstance(a, int) and a > 0 for a in axes) else None)
        elif fn is tasks.partial:
            axis = args[2][1]
            kinds.append("C" if axis is not None and 0 in axis else ("R" if axis is not None else None))
        elif fn is tasks.masked_rows and ks == ["R", "R"]:
            kinds.append("R")
        elif fn is tasks.take_region and ks[0] == "R":
            key = args[1][1]
            first = key[0] if isinstance(key, tuple) and key else key
            kinds.append("R" if first == slice(None) else None)
        else:
            return None
        if kinds[-1] is None:
            return None
    if kind_of(out) not in ("C", "P"):
        return None
    return rows, n, leaf_kind


def _probe(ref, leaves):
    tag, x = ref
    return leaves[x] if tag == "L" else None


def run(ops, out, leaves, found, execute):
    """Run ``execute(ops, out, block_leaves)`` on row blocks and add up the results."""
    rows, n, leaf_kind = found
    results = []
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        block = [v[start:stop] if k == "R" else v for v, k in zip(leaves, leaf_kind)]
        results.append(execute(_shift_offsets(ops, start), out, block))
    final = ops[out[1]][0] if out[0] == "N" else None
    if final is tasks.pack:
        parts = ops[out[1]][1]
        return tuple(_combine([r[i] for r in results], ops, parts[i]) for i in range(len(parts)))
    return _combine(results, ops, out)


def _combine(values, ops, ref):
    fn, args, *_ = ops[ref[1]]
    if fn is tasks.partial:
        return tasks.combine(args[0][1], *values)
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total


def _shift_offsets(ops, start):
    """argmin/argmax partials carry the tile's global offsets: a block starts ``start`` rows further."""
    if start == 0:
        return ops
    out = []
    for op in ops:
        fn, args = op[0], op[1]
        if fn is tasks.partial and args[3][1] is not None and args[0][1] in ("argmin", "argmax"):
            offsets = args[3][1]
            args = list(args)
            args[3] = ("C", (offsets[0] + start,) + tuple(offsets[1:]))
            op = (fn, args) + tuple(op[2:])
        out.append(op)
    return out
