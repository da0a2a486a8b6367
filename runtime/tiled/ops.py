"""The operations a primitive's tile rule may use (``Primitive.tile(ops, *args, **kwargs)``): the tiled runtime
handed to rules declared in primitives/, which cannot import the runtime (imports go one way)."""
from __future__ import annotations

from . import elementwise as _elementwise
from . import indexing, reductions
from .array import is_tiled as _is_tiled
from .common import retile_dims
from .fallback import fallback as _fallback


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
    def reduce(kind, x, axis=None, keepdims=False):
        """``np.<kind>(x, axis, keepdims)`` over tiles: per-tile partial results combined as a tree."""
        return reductions.reduce(kind, x, axis, keepdims)

    @staticmethod
    def whole_axis(x, axis: int):
        """``x`` retiled so that ``axis`` lies within one tile (moves pieces of rows, gathers nothing)."""
        a = axis % x.ndim
        if len(x.boundaries[a]) == 2:
            return x
        return retile_dims(x, {a: (0, int(x.shape[a]))})

    @staticmethod
    def getitem(x, key):
        return indexing.getitem(x, key)

    @staticmethod
    def fallback(name, fn, args, kwargs):
        """Run ``fn`` on the client with every tiled input gathered (a warning names the primitive and line)."""
        return _fallback(name, fn, args, kwargs)


OPS = TileOps()
