"""Reductions (``sum mean min max prod argmin argmax var std any all``) with ``axis`` and ``keepdims``.

Over dimensions held in one tile, a reduction is tile-local (a lazy array, fused into the tile's chain). Over
tiled dimensions, each tile computes a partial result in the task that computes the tile (sums, counts, Chan's
(n, mean, M2) for var/std, (value, global index) for argmin/argmax), and partials are combined by a tree."""
from __future__ import annotations

import itertools
import warnings

import numpy as np

from . import batch, grid, tasks
from .array import TiledArray
from .common import normalize_axis, tree
from .tile_program import TileProgram, new_submission, site_info, submit_program

KINDS = ("sum", "prod", "min", "max", "any", "all", "mean", "var", "std", "argmin", "argmax")
_NUMPY = {"min": np.min, "max": np.max}


def reduce(kind, t: TiledArray, axis=None, keepdims=False, ddof=0, dtype=None):
    nd = t.ndim
    axes = normalize_axis(axis, nd)
    arg = kind in ("argmin", "argmax")
    if arg and axes is not None and len(axes) != 1:
        raise TypeError(f"{kind}: axis must be an integer")
    fn = _NUMPY.get(kind) or getattr(np, kind)
    extra = {}
    if kind in ("var", "std") and ddof:
        extra["ddof"] = ddof
    if dtype is not None:
        extra["dtype"] = dtype
    sample = np.ones((1,) * nd, t.dtype)
    kw = {"axis": axis} if arg else {"axis": axis, "keepdims": keepdims}
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out_dtype = np.asarray(fn(sample, **kw, **extra)).dtype
    if arg and keepdims:
        kw["keepdims"] = True
    reduced = tuple(range(nd)) if axes is None else axes
    kept = [d for d in range(nd) if d not in reduced]
    where = site_info()
    local = all(t.tiles[d] == 1 for d in reduced) and grid.known([t.boundaries[d] for d in reduced]) \
        and not (arg and axes is None and nd > 1)
    tiled_out = any(d in t.dist for d in kept)
    if local and tiled_out:
        t = t.used()
        bounds = [t.boundaries[d] if d in kept else (0, 1) for d in range(nd) if d in kept or keepdims]
        kwargs = {**kw, **extra}

        def make(idx, prog):
            it = iter(idx)
            src = tuple(next(it) if d in kept else (next(it) * 0 if keepdims else 0) for d in range(nd))
            return prog.op(fn, [prog.tile(t, src)], kwargs, where)

        return TiledArray(t._executor, bounds, out_dtype, make=make, operands=(t,))
    return _tree_reduce(kind, t, axes, reduced, kept, keepdims, ddof, dtype, out_dtype, where, tiled_out)


def _tree_reduce(kind, t, axes, reduced, kept, keepdims, ddof, dtype, out_dtype, where, tiled_out):
    t = t.used()
    ex = t._executor
    shape = t.shape
    counts = t.tiles
    known = grid.known(t.boundaries)
    part_axis = None if (kind in ("argmin", "argmax") and axes is None) else reduced
    acc = dtype if kind in ("sum", "prod", "mean", "var", "std") else None
    full = tuple(int(s) for s in shape) if known else None

    def partial_ref(prog, idx):
        x = prog.tile(t, idx)
        offsets = tuple(b[i] for b, i in zip(t.boundaries, idx)) if known else None
        return prog.op(tasks.partial, [("C", kind), x, ("C", part_axis), ("C", offsets), ("C", full), ("C", acc)],
                       None, where)

    if not tiled_out:
        out_shape = tuple(int(shape[d]) if d in kept else 1 for d in range(t.ndim) if d in kept or keepdims)
        if kind in ("argmin", "argmax") and axes is None:
            out_shape = (1,) * t.ndim if keepdims else ()
        grid_shape = counts
        n = int(np.prod(grid_shape))
        return batch.defer(ex, n, lambda prog, k: partial_ref(prog, tuple(int(i) for i in
                                                                            np.unravel_index(k, grid_shape))),
                           (kind, axes, keepdims, ddof, dtype), out_shape, out_dtype)
    out_counts = [counts[d] for d in kept]
    futs = np.empty(out_counts, dtype=object)
    submission = new_submission()
    for out_idx in itertools.product(*(range(c) for c in out_counts)):
        parts = []
        for red_idx in itertools.product(*(range(counts[d]) for d in reduced)):
            idx = [0] * t.ndim
            for d, i in zip(kept, out_idx):
                idx[d] = i
            for d, i in zip(reduced, red_idx):
                idx[d] = i
            idx = tuple(idx)
            prog = TileProgram(submission)
            fut, _ = submit_program(ex, prog, partial_ref(prog, idx), f"{kind}-partial", idx)
            parts.append(fut)
        futs[out_idx] = tree(ex, parts, kind, axes, keepdims, ddof, dtype, out_idx)
    bounds = [t.boundaries[d] if d in kept else (0, 1) for d in range(t.ndim) if d in kept or keepdims]
    if keepdims:
        grid_shape = tuple(counts[d] if d in kept else 1 for d in range(t.ndim))
        futs = futs.reshape(grid_shape)
    return TiledArray(ex, bounds, out_dtype, futures=futs)
