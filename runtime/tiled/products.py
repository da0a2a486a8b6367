"""Products: tiled @ small, small @ tiled, tiled @ tiled (blocked, SUMMA-style: C_ij = sum_k A_ik B_kj, each
term where its tiles live and the sum by a tree), ``X.T @ v`` for row-tiled X (partial products summed by a
tree: an allreduce), ``dot`` and ``outer``."""
from __future__ import annotations

import itertools

import numpy as np

from . import batch
from .array import TiledArray, is_tiled
from .common import executor_of, piece, prepare, retile_dims, shape_of, tree, trial_dtype
from .elementwise import elementwise
from .fallback import fallback
from .indexing import getitem
from .tile_program import TileProgram, new_submission, site_info, submit_program


def matmul(a, b):
    """``a @ b`` for 1-D and 2-D operands, tiled or not: per output tile, the sum over k of tile products (one
    task when k is one tile, a batched reduction when the output is one tile, else partial products and a tree).
    About 60 lines, kept whole: the three plans share ``term`` and its view of both operands' tiling."""
    a, b = prepare(a), prepare(b)
    sa, sb = shape_of(a), shape_of(b)
    if len(sa) == 0 or len(sb) == 0 or len(sa) > 2 or len(sb) > 2:
        return fallback("matmul", np.matmul, (a, b), {})
    if sa[-1] != sb[0 if len(sb) == 1 else -2]:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc signature "
                         f"(n?,k),(k,m?)->(n?,m?) (size {sb[0]} is different from {sa[-1]})")
    ex = executor_of((a, b))
    dtype = trial_dtype(np.matmul, (a, b))
    ta, tb = is_tiled(a), is_tiled(b)
    if ta and tb and a.boundaries[-1] != b.boundaries[0]:
        b = retile_dims(b, {0: a.boundaries[-1]})
    kb = a.boundaries[-1] if ta else (b.boundaries[0] if tb else (0, int(sa[-1])))
    rows = (a.boundaries[0] if ta else (0, int(sa[0]))) if len(sa) == 2 else None
    cols = (b.boundaries[1] if tb else (0, int(sb[1]))) if len(sb) == 2 else None
    out_bounds = [x for x in (rows, cols) if x is not None]
    where = site_info()
    a = a.used() if ta else a
    b = b.used() if tb else b

    def term(prog, i, j, k):
        ka = (kb[k], kb[k + 1])
        if ta:
            ra = prog.tile(a, (i, k) if len(sa) == 2 else (k,))
        else:
            ra = piece(prog, a, ([None] if len(sa) == 2 else []) + [None if len(kb) == 2 else ka], sa)
        if tb:
            rb = prog.tile(b, (k, j) if len(sb) == 2 else (k,))
        else:
            rb = piece(prog, b, [None if len(kb) == 2 else ka] + ([None] if len(sb) == 2 else []), sb)
        return prog.op(np.matmul, [ra, rb], None, where)

    ni = len(rows) - 1 if rows else 1
    nj = len(cols) - 1 if cols else 1
    nk = len(kb) - 1
    tiled_out = (ta and len(sa) == 2 and 0 in a.dist) or (tb and len(sb) == 2 and 1 in b.dist)
    out_idx = lambda i, j: tuple(x for x, keep in ((i, rows), (j, cols)) if keep)  # noqa: E731
    if nk == 1 and tiled_out:
        def make(idx, prog):
            i = idx[0] if rows else 0
            j = idx[-1] if cols else 0
            return term(prog, i, j, 0)

        return TiledArray(ex, out_bounds, dtype, make=make, operands=[x for x in (a, b) if is_tiled(x)])
    if not tiled_out:  # every output dimension in one tile: partial products over k, batched (batch.py)
        return batch.defer(ex, nk, lambda prog, k: term(prog, 0, 0, k), ("sum", None, True, 0, None),
                           tuple(b[-1] for b in out_bounds), dtype)
    futs = np.empty((ni, nj), dtype=object)
    submission = new_submission()
    for i, j in itertools.product(range(ni), range(nj)):
        parts = []
        for k in range(nk):
            prog = TileProgram(submission)
            ref = term(prog, i, j, k)
            fut, _ = submit_program(ex, prog, ref, "matmul-partial", out_idx(i, j) + (k,))
            parts.append(fut)
        futs[i, j] = tree(ex, parts, "sum", None, True, 0, None, out_idx(i, j)) if len(parts) > 1 else parts[0]
    futs = futs.reshape(tuple(len(b) - 1 for b in out_bounds))
    return TiledArray(ex, out_bounds, dtype, futures=futs)


def outer(a, b):
    a = prepare(a)
    b = prepare(b)
    a1 = getitem(a, (slice(None), None)) if is_tiled(a) else np.ravel(a)[:, None]
    if is_tiled(b):
        b1 = getitem(b, (None, slice(None)))
    else:
        b1 = np.ravel(b)[None, :] if not hasattr(b, "key") else b
    return elementwise(np.multiply, [a1, b1])


def dot(a, b):
    if len(shape_of(prepare(a))) <= 2 and len(shape_of(prepare(b))) <= 2:
        return matmul(a, b)
    return fallback("dot", np.dot, (a, b), {})
