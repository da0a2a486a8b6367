"""Rewrites of a tile program before it is submitted (client side, on the program's operation list).

Grouped masked reductions: ``X[labels == j].mean(axis=0)`` for several j (k-means' centroid update) becomes,
per tile, one ``group_sums`` pass over X and labels (``np.bincount`` per column) from which every j's partial
result is picked, instead of one mask, one copy of the selected rows and one reduction per j."""
from __future__ import annotations

import numpy as np

from . import tasks

_GROUPED = ("sum", "mean")


def group_sums(x, labels, keys):
    """Sums and counts of the rows of ``x`` for each label in ``keys``: {key: (sum with a leading 1, count)}."""
    x2 = x.reshape(x.shape[0], -1) if x.ndim != 2 else x
    out = {}
    ints = labels.dtype.kind in "iu" and labels.ndim == 1 and (labels.size == 0 or labels.min() >= 0)
    if ints and x2.dtype.kind == "f" and all(float(k).is_integer() and k >= 0 for k in keys):
        n = int(max(keys)) + 1
        counts = np.bincount(labels, minlength=n)
        cols = [np.bincount(labels, weights=x2[:, c], minlength=n) for c in range(x2.shape[1])]
        for k in keys:
            i = int(k)
            s = np.array([c[i] if i < len(c) else 0.0 for c in cols], dtype=x2.dtype)
            out[k] = (s.reshape((1,) + x.shape[1:]), int(counts[i]) if i < len(counts) else 0)
        return out
    for k in keys:
        rows = x[labels == k]
        out[k] = (np.sum(rows, axis=0, keepdims=True), rows.shape[0])
    return out


def pick_group(groups, key, kind, dtype):
    s, n = groups[key]
    if dtype is not None:
        s = s.astype(dtype)
    elif s.dtype.kind in "biu":
        s = s.astype(np.float64) if kind == "mean" else s
    return (s, n) if kind == "mean" else s


def optimize(ops, out):
    """``ops`` with grouped masked reductions rewritten (see module doc); the same list when nothing applies."""
    producers = {}
    for j, (fn, args, kwargs, _, _) in enumerate(ops):
        producers[j] = (fn, args, kwargs)
    found = {}  # (x ref, labels ref) -> [(op index, key, kind, dtype)]
    for j, (fn, args, _, _, _) in enumerate(ops):
        if fn is not tasks.partial or args[0][1] not in _GROUPED or tuple(args[2][1] or ()) != (0,):
            continue
        src = args[1]
        if src[0] != "N" or producers[src[1]][0] is not tasks.masked_rows:
            continue
        x_ref, m_ref = producers[src[1]][1]
        if m_ref[0] != "N":
            continue
        mfn, margs, mkw = producers[m_ref[1]]
        if mfn is not np.equal or mkw or len(margs) != 2:
            continue
        consts = [a for a in margs if a[0] == "C"]
        refs = [a for a in margs if a[0] != "C"]
        if len(consts) != 1 or len(refs) != 1 or not isinstance(consts[0][1], (int, np.integer)):
            continue
        found.setdefault((x_ref, refs[0]), []).append((j, consts[0][1], args[0][1], args[5][1]))
    groups = {k: v for k, v in found.items() if len(v) >= 2}
    if not groups:
        return ops, out
    ops = list(ops)
    for (x_ref, l_ref), items in groups.items():
        first = min(j for j, *_ in items)
        loc, label = ops[first][3], ops[first][4]
        keys = tuple(dict.fromkeys(k for _, k, _, _ in items))
        # the grouped pass goes at the end; each partial becomes a pick from it (refs stay valid: every op
        # that read a partial comes after it, and picks only read the new op, which is placed before them)
        ops.append((group_sums, [x_ref, l_ref, ("C", keys)], {}, loc, label))
        g = ("N", len(ops) - 1)
        for j, key, kind, dtype in items:
            ops[j] = (pick_group, [g, ("C", key), ("C", kind), ("C", dtype)], {}, loc, label)
    return _reorder(ops, out)


def _reorder(ops, out):
    """Topological order (the appended grouped passes are read by earlier picks) of the operations the result
    needs (the masks and selected rows the picks replaced are dropped); refs renumbered."""
    deps = [[a[1] for a in args if a[0] == "N"] for _, args, *_ in ops]
    order, state = [], [0] * len(ops)

    def visit(j):
        if state[j] == 2:
            return
        state[j] = 2
        for d in deps[j]:
            visit(d)
        order.append(j)

    if out[0] == "N":
        visit(out[1])
    new_at = {old: new for new, old in enumerate(order)}

    def ref(r):
        return ("N", new_at[r[1]]) if r[0] == "N" else r

    new_ops = [(fn, [ref(a) for a in args], kwargs, loc, label)
               for fn, args, kwargs, loc, label in (ops[j] for j in order)]
    return new_ops, ref(out)
