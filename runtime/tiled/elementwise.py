"""Element-wise rules: ufuncs, operators, ``where``, ``clip``, ``astype``; broadcasting against scalars, NumPy
arrays, small remote results and other tiled arrays (retiled to this grid when their boundaries differ)."""
from __future__ import annotations

import math

import numpy as np

from .array import TiledArray, is_tiled
from .common import executor_of, piece, prepare, retile_dims, shape_of, trial_dtype
from .dispatch import implements
from .tile_program import site_info


def _broadcast(shapes):
    ndim = max(len(s) for s in shapes)
    out = []
    for d in range(ndim):
        size = 1
        for s in shapes:
            k = d - (ndim - len(s))
            if k < 0:
                continue
            n = s[k]
            if n == 1:
                continue
            if size == 1:
                size = n
            elif not (n == size or (math.isnan(n) and math.isnan(size))):
                raise ValueError("operands could not be broadcast together with shapes "
                                 + " ".join(str(tuple(int(x) if x == x else None for x in s)) for s in shapes))
        out.append(size)
    return tuple(out)


def _output_grid(args, shapes, out_shape) -> list:
    """The result's boundaries per dimension: the finest grid among the tiled operands spanning it (one tile where
    none does)."""
    nd = len(out_shape)
    bounds = []
    for d, n in enumerate(out_shape):
        chosen = None
        for a, s in zip(args, shapes):
            k = d - (nd - len(s))
            if is_tiled(a) and k >= 0 and (s[k] == n or (math.isnan(n) and math.isnan(s[k]))) and \
                    (chosen is None or len(a.boundaries[k]) > len(chosen)):
                chosen = a.boundaries[k]
        if chosen is None:
            chosen = (0, int(n)) if not math.isnan(n) else None
        bounds.append(chosen)
    for b in bounds:
        if b is None:
            raise ValueError("cannot line up an operand of unknown size (from a boolean mask) with a NumPy array")
    return bounds


def elementwise(fn, args, kwargs=None, drop_axis=None, dtype=None) -> TiledArray:
    """``fn(*args, **kwargs)`` tile by tile (a lazy array on the grid of the first tiled operand). With
    ``drop_axis``, ``fn`` reduces that axis of the broadcast operands (which must be in one tile there)."""
    args = [prepare(a) for a in args]
    ex = executor_of(args)
    shapes = [shape_of(a) for a in args]
    out_shape = _broadcast(shapes)
    nd = len(out_shape)
    dtype = trial_dtype(fn, args, kwargs) if dtype is None else np.dtype(dtype)
    bounds = _output_grid(args, shapes, out_shape)
    # operands on another grid are retiled to this one (moving only the rows that cross a boundary)
    for i, (a, s) in enumerate(zip(args, shapes)):
        if is_tiled(a):
            want = {}
            for k in range(len(s)):
                d = k + nd - len(s)
                if s[k] != 1 and a.boundaries[k] != bounds[d]:
                    if None in bounds[d] or None in a.boundaries[k]:
                        if len(bounds[d]) != len(a.boundaries[k]):
                            raise ValueError("operands from different boolean masks cannot be combined")
                        continue
                    want[k] = bounds[d]
            if want:
                args[i] = retile_dims(a, want)
    args = [a.used() if is_tiled(a) else a for a in args]
    where = site_info()
    kwargs = kwargs or {}
    full = [shape_of(a) for a in args]
    out_bounds = bounds
    if drop_axis is not None:
        if len(bounds[drop_axis]) != 2:
            raise ValueError("the reduced axis is split over tiles")
        out_bounds = bounds[:drop_axis] + bounds[drop_axis + 1:]

    def make(idx, prog):
        if drop_axis is not None:
            idx = idx[:drop_axis] + (0,) + idx[drop_axis:]
        refs = []
        for a, s in zip(args, full):
            off = nd - len(s)
            if is_tiled(a):
                refs.append(prog.tile(a, tuple(0 if s[k] == 1 else idx[k + off] for k in range(len(s)))))
            else:
                region = []
                for k in range(len(s)):
                    b = bounds[k + off]
                    region.append(None if s[k] == 1 or len(b) == 2 else (b[idx[k + off]], b[idx[k + off] + 1]))
                refs.append(piece(prog, a, region, s))
        return prog.op(fn, refs, kwargs, where)

    return TiledArray(ex, out_bounds, dtype, make=make, operands=[a for a in args if is_tiled(a)])


@implements("astype")
def astype(t, dtype):
    dtype = np.dtype(dtype)
    return elementwise(_astype, [t, dtype]) if dtype != t.dtype else t


def _astype(x, dtype):
    return x.astype(dtype)
