"""The operations a primitive's tile rule may use (``Primitive.tile(ops, *args, **kwargs)``): the tiled runtime
handed to rules declared in primitives/, which cannot import the runtime (imports go one way)."""
from __future__ import annotations

import numpy as np

from . import create, indexing, products, reductions
from . import elementwise as _elementwise
from .array import is_tiled as _is_tiled
from .common import remote_result, retile_dims, submit
from .fallback import fallback as _fallback
from .tile_program import _is_future


class TileOps:
    """Stateless; one instance, ``OPS``."""

    @staticmethod
    def is_tiled(x) -> bool:
        return _is_tiled(x)

    @staticmethod
    def elementwise(fn, leaves, drop_axis=None, dtype=None):
        """``fn`` tile by tile over broadcast ``leaves`` (tiled arrays, arrays, scalars); ``drop_axis``: ``fn``
        reduces that axis, which must lie within one tile (ValueError "... split over tiles ..." if not)."""
        return _elementwise.elementwise(fn, list(leaves), drop_axis=drop_axis, dtype=dtype)

    @staticmethod
    def reduce(kind, x, axis=None, keepdims=False, dtype=None, ddof=0):
        """``np.<kind>(x, axis, keepdims)`` over tiles: per-tile partial results combined as a tree."""
        return reductions.reduce(kind, x, axis, keepdims, ddof=ddof, dtype=dtype)

    @staticmethod
    def within_tile(x, axis) -> bool:
        """Does ``axis`` of ``x`` lie within each tile (a function along it runs tile by tile)?"""
        return len(x.boundaries[int(axis) % x.ndim]) == 2

    @staticmethod
    def whole_axis(x, axis: int):
        """``x`` retiled so that ``axis`` lies within one tile (moves pieces of rows, gathers nothing)."""
        a = axis % x.ndim
        if len(x.boundaries[a]) == 2:
            return x
        return retile_dims(x, {a: (0, int(x.shape[a]))})

    @staticmethod
    def row_blocks(x, v, leaves):
        """None: a rule on the client holds no block of rows (its tiles are on the workers); see spmd/ops.py."""
        return None

    @staticmethod
    def rows(fn, leaves, drops):
        """None: no one-task form of a function that drops two axes; the rule takes its tile-by-tile path."""
        return None

    @staticmethod
    def getitem(x, key):
        return indexing.getitem(x, key)

    @staticmethod
    def fallback(name, fn, args, kwargs, why=None):
        """Run ``fn`` on the client with every tiled input gathered (a warning names the primitive and line;
        ``why`` is the SPMD backend's)."""
        return _fallback(name, fn, args, kwargs)

    # The moves and products of NumPy's functions (primitives/tile_rules.py), each a tile plan of this runtime
    matmul = staticmethod(products.matmul)
    dot = staticmethod(products.dot)
    outer = staticmethod(products.outer)
    concatenate = staticmethod(indexing.concatenate)
    stack = staticmethod(indexing.stack)
    reshape = staticmethod(indexing.reshape)
    ravel = staticmethod(indexing.ravel)

    @staticmethod
    def transpose(x, axes=None):
        return indexing.transpose(x, axes)

    @staticmethod
    def like(x, value, dtype=None):
        """A tiled array on ``x``'s tiles, every element ``value`` (``np.full_like``)."""
        return create.like(x, value, dtype)

    @staticmethod
    def norm(x):
        """The 2-norm of the whole of ``x``: the sum of squares over tiles, its root."""
        a = np.absolute(x) if x.dtype.kind == "c" else x
        total = reductions.reduce("sum", a * a, None, False)
        if not _is_future(total):
            return np.sqrt(total)
        out_dtype = np.sqrt(np.ones(1, a.dtype)).dtype
        return remote_result(submit(x._executor, np.sqrt, total.remote(), label="norm"), (), out_dtype)


OPS = TileOps()
