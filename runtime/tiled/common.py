"""Helpers the tile rules share: operands, remote results, dtype trials, regions of tiled arrays, retiling."""
from __future__ import annotations

import itertools
import warnings

import numpy as np

from ..alignment import aligned_values
from . import grid, tasks
from .array import TiledArray, is_tiled
from .dispatch import implements
from .tile_program import SITE, TileProgram, _is_future, key_for, meta_of, remember, site_info

SPLIT_EVERY = 8  # partial results combined per task in reduction trees


def evaluation():
    s = SITE.get()
    return s[2] if s is not None and len(s) > 2 else None


def fetch(v):
    """The value of a remote future (through the evaluation's memo, when inside a compiled call)."""
    ev = evaluation()
    if ev is not None:
        return ev.wait(v)
    return aligned_values(v.result())


def prepare(v):
    """An operand as a rule sees it: tiled arrays as they are, remote futures with a known shape as they are
    (they become task inputs), other futures fetched; lists and tuples of numbers as arrays."""
    if is_tiled(v):
        return v
    if _is_future(v):
        return v if meta_of(v) is not None else fetch(v)
    if type(v) in (list, tuple):
        return np.asarray(v)
    return v


def shape_of(v) -> tuple:
    if is_tiled(v):
        return v.shape
    if _is_future(v):
        return meta_of(v)[0]
    return np.shape(v)


def sample(v):
    """A one-element stand-in with ``v``'s dtype and dimensions, for dtype trials (Python scalars stay, so
    NumPy's weak-scalar promotion is the same as on the real data)."""
    if is_tiled(v):
        return np.ones((1,) * v.ndim, v.dtype)
    if _is_future(v):
        shape, dtype = meta_of(v)
        return np.ones((1,) * len(shape), dtype)
    if isinstance(v, np.ndarray):
        return np.ones((1,) * v.ndim, v.dtype)
    return v


def trial_dtype(fn, args, kwargs=None):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(*[sample(a) for a in args], **(kwargs or {}))
    if isinstance(out, tuple):
        raise NotImplementedError("more than one result")
    return np.asarray(out).dtype


def executor_of(args):
    for a in args:
        if is_tiled(a):
            return a._executor
        if type(a) in (list, tuple):
            for v in a:
                if is_tiled(v):
                    return v._executor
    raise TypeError("no tiled array among the arguments")


def piece(prog: TileProgram, v, region, full_shape):
    """A ref to ``v[region]`` for a non-tiled operand ``v`` (NumPy array, remote future, scalar); ``region``
    gives (start, stop) per dimension of ``v`` (None: the whole dimension)."""
    if np.ndim(v) == 0 and not _is_future(v):
        return ("C", v)
    slices = tuple(slice(None) if r is None else slice(*r) for r in region)
    whole = all(r is None or (r[0] == 0 and r[1] == n) for r, n in zip(region, full_shape))
    if _is_future(v):
        ref = prog.leaf(v)
        return ref if whole else prog.op(tasks.take_region, [ref, ("C", slices)], None, site_info())
    return ("C", v if whole else np.ascontiguousarray(v[slices]))


def region_ref(prog: TileProgram, t: TiledArray, region, where):
    """A ref to ``t[region]`` (start, stop per dimension), assembled from the tiles it overlaps."""
    per_dim = [grid.overlapping(b, lo, hi) for b, (lo, hi) in zip(t.boundaries, region)]
    combos = list(itertools.product(*per_dim))
    if len(combos) == 1:
        idx = tuple(c[0] for c in combos[0])
        ref = prog.tile(t, idx)
        tile_region = grid.region(t.boundaries, idx)
        if all(lo == 0 and hi == b - a for (_, lo, hi), (a, b) in zip(combos[0], tile_region)):
            return ref
        slices = tuple(slice(lo, hi) for _, lo, hi in combos[0])
        return prog.op(tasks.take_region, [ref, ("C", slices)], None, where)
    shape = tuple(hi - lo for lo, hi in region)
    placements, refs = [], []
    for combo in combos:
        idx = tuple(c[0] for c in combo)
        src = tuple(slice(lo, hi) for _, lo, hi in combo)
        dst = tuple(slice(b[i] + lo - r0, b[i] + hi - r0)
                    for (i, lo, hi), b, (r0, _) in zip(combo, t.boundaries, region))
        placements.append((src, dst))
        refs.append(prog.tile(t, idx))
    return prog.op(tasks.assemble, [("C", shape), ("C", t.dtype), ("C", placements), *refs], None, where)


def retile_dims(t: TiledArray, want: dict) -> TiledArray:
    """``t`` on new boundaries for the dimensions in ``want`` (others unchanged)."""
    bounds = [want.get(d, b) for d, b in enumerate(t.boundaries)]
    return retile(t, bounds)


@implements("retile")
def retile(t: TiledArray, bounds) -> TiledArray:
    bounds = tuple(tuple(b) for b in bounds)
    if bounds == t.boundaries:
        return t
    if not grid.known(t.boundaries):
        raise ValueError("cannot retile an array of unknown tile sizes (from a boolean mask)")
    if tuple(b[-1] for b in bounds) != tuple(b[-1] for b in t.boundaries):
        raise ValueError(f"retile: the new tiles cover {tuple(b[-1] for b in bounds)}, the array is {t.shape}")
    where = site_info()
    t = t.used()

    def make(idx, prog):
        return region_ref(prog, t, grid.region(bounds, idx), where)

    return TiledArray(t._executor, bounds, t.dtype, make=make, operands=(t,))


def remote_result(fut, shape, dtype):
    """A small result made by a tile rule: a future inside a compiled call (tracked by the evaluation, so a
    failure is raised in program order), its value when called from plain Python."""
    remember(fut, shape, dtype)
    ev = evaluation()
    if ev is None:
        return aligned_values(fut.result())
    ev._track(fut, ())
    return fut


def submit(executor, fn, *args, label="tiled", idx=(), home=None):
    return executor.submit_task(fn, *args, key=key_for(label, idx), home=home)


def tree(executor, parts, kind, axis, keepdims, ddof, dtype, idx=()):
    """Combine partial results by a tree of tasks (``SPLIT_EVERY`` per task); the last one finishes."""
    while len(parts) > SPLIT_EVERY:
        parts = [submit(executor, tasks.combine, kind, *parts[i:i + SPLIT_EVERY], label=f"{kind}-combine", idx=idx)
                 for i in range(0, len(parts), SPLIT_EVERY)]
    return submit(executor, tasks.combine_finish, kind, axis, keepdims, ddof, dtype, *parts, label=kind, idx=idx)


def normalize_axis(axis, ndim):
    if axis is None:
        return None
    axes = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(a, ndim)
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError("duplicate value in 'axis'")
    return tuple(sorted(out))
