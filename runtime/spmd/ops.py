"""What a primitive's tile rule may use (runtime/tiled/ops.py's interface), on an SPMD rank's shards: the same rules
the tiled runtime runs against its own operations (primitives/tile_rules.py, the fused primitives' ``tile=``): one
declaration, two backends, as Phylanx's distributed primitives. What a shard cannot do exactly raises ``NotSpmd``
saying why: the loop then runs as before, and ``explain()`` gives the reason."""
from __future__ import annotations

import numpy as np

from . import cross, local
from .shard import NotSpmd, Shard, Transposed, is_shard


def _none(name):
    def op(*args, **kwargs):
        raise NotSpmd(f"np.{name} has no SPMD rule")

    return staticmethod(op)


class ShardOps:
    """Stateless; one instance, ``OPS``."""

    @staticmethod
    def is_tiled(x) -> bool:
        return is_shard(x)

    @staticmethod
    def within_tile(x, axis) -> bool:
        """Does ``axis`` lie within this rank's rows (it is not the tiled axis; rows a mask selected excepted)?"""
        return type(x) is Shard and x.ragged is None and int(axis) % x.ndim != 0

    @staticmethod
    def elementwise(fn, leaves, drop_axis=None, dtype=None):
        return local.elementwise(fn, leaves, drop_axis=drop_axis, dtype=dtype)

    @staticmethod
    def reduce(kind, x, axis=None, keepdims=False, dtype=None, ddof=0):
        return cross.reduce(kind, x, axis, keepdims, dtype, ddof)

    @staticmethod
    def whole_axis(x, axis: int):
        if is_shard(x) and axis % x.ndim == 0:
            raise NotSpmd("an operation needs the whole tiled axis on one rank")
        return x

    @staticmethod
    def row_blocks(X, v, leaves):
        """This rank's rows of ``X`` and the leaves' matching rows, and how to add the rank's sum over them to the
        others' (``X.T @ f(X @ v, ...)``: primitives/rowdot.py); a layout with no such form raises NotSpmd."""
        if not is_shard(X):
            if any(is_shard(a) for a in (v, *leaves)):
                raise NotSpmd("a row product whose rows are not tiled")
            return X, leaves, lambda part: part
        if type(X) is not Shard or X.ragged is not None or X.ndim != 2 or is_shard(v):
            raise NotSpmd("a row product of this layout")
        for a in leaves:
            if type(a) is Transposed or (type(a) is Shard and (a.ragged is not None or a.n != X.n or a.ndim != 1)):
                raise NotSpmd("a row product with values that do not line up")
        lo, hi = X.own
        return X.local(lo, hi), local.aligned_pieces(leaves, lo, hi, X.n, 1), \
            lambda part: cross._contract(X.rank, part)

    @staticmethod
    def rows(fn, leaves, drops):
        """``fn`` over this rank's rows of the broadcast leaves, ``fn`` dropping ``drops`` axes (never the tiled
        one): k-means' distances and their argmin in one pass (primitives/fused_reduce.py)."""
        return local.elementwise(fn, leaves, drops=drops)

    @staticmethod
    def getitem(x, key):
        return local.getitem(x, key)

    @staticmethod
    def fallback(name, fn, args, kwargs, why=None):
        raise NotSpmd(why or f"{name} has no SPMD rule")

    matmul = staticmethod(cross.matmul)
    dot = staticmethod(cross.matmul)
    norm = staticmethod(cross.norm)
    outer = _none("outer")
    concatenate = _none("concatenate")
    stack = _none("stack")
    reshape = _none("reshape")
    ravel = _none("ravel")

    @staticmethod
    def transpose(x, axes=None):
        if axes is not None:
            raise NotSpmd("np.transpose with axes of a tiled value")
        return x.T

    @staticmethod
    def like(x, value, dtype=None):
        if type(x) is not Shard:
            raise NotSpmd("a value like the transpose of a tiled array")
        return x.like(np.full_like(x.data, value, dtype=dtype))


OPS = ShardOps()
