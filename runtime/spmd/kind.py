"""Shards as a value kind of the evaluator on a rank (runtime/kinds.py): a primitive call with a shard argument
runs the tile rule on its declaration against ``ShardOps`` (ops.py), or the primitive's NumPy kernel, which reaches
the shard's NumPy face (protocol.py)."""
from __future__ import annotations

import numpy as np

from phylanx_py.errors import RAISED_AS_IS, ExecutionError

from .. import kinds
from ..evaluation import run_primitive
from . import protocol  # noqa: F401 - protocol fills the shard's NumPy face
from .deferred import MAX_DEPTH
from .fission import Apart
from .ops import OPS
from .shard import Deferred, Shard, Transposed, has_deferred, is_shard, resolve

# Primitives that keep a deferred sum as it is (a list being built): resolving it there would send the sums of a
# comprehension one allreduce at a time. Those are the ones whose declaration holds their arguments as they are
# (``resolve``: "none" for the container constructors, "receiver" for list.append and insert).
KEEPS_DEFERRED = ("none", "receiver")
# Arithmetic on deferred sums is deferred too (deferred.py; the primitives whose declaration says ``defers``):
# ``np.sum(X[m], axis=0) / np.sum(m)`` for each of k clusters then waits, and the k sums and counts go in one
# message. The other operands must not change before the value is computed: scalars, or small arrays (copied).
LAZY_COPY_ELEMENTS = 4096
_SCALARS = (int, float, complex, bool, np.generic)


def _lazy(site, args, fixed):
    """A deferred value of ``site``'s operation over ``args`` (some deferred; the first ``fixed`` are constants of
    the call site), or None when it must run now."""
    rank, depth, operands = None, 0, list(args[:fixed])
    for a in args[fixed:]:
        t = type(a)
        if t is Deferred:
            if a.done:
                a = a.value  # (a value already: scalars and small arrays are checked below)
                t = type(a)
            elif a.depth >= MAX_DEPTH:
                return None
            else:
                rank, depth = a.rank, max(depth, a.depth + 1)
                operands.append(a)
                continue
        if t is np.ndarray and a.size <= LAZY_COPY_ELEMENTS and not a.dtype.hasobject:
            a = a.copy()
        elif t is np.ndarray or not isinstance(a, _SCALARS):
            return None
        operands.append(a)
    if rank is None:
        return None
    operands = tuple(operands)
    return Deferred.derived(rank, lambda: run_primitive(site.prim, site.loc, resolve(operands), {}), depth)


class SpmdKind:
    types = (Shard, Transposed, Deferred)

    def call(self, ev, site, args, kwargs):
        prim = site.prim
        if prim.defers is not None and not kwargs:
            lazy = _lazy(site, args, prim.defers)
            if lazy is not None:
                return lazy
        elif prim.name == "operator.getitem" and len(args) == 2 and type(args[0]) is Apart:
            return args[0][args[1]]  # fission.py's check, over values that must stay as they are
        if prim.resolve in KEEPS_DEFERRED and not any(is_shard(a) for a in args):
            return ev.run_inline(site, args, kwargs)
        if has_deferred(args) or has_deferred(kwargs):
            return ev.call(site, resolve(tuple(args)), resolve(kwargs))
        if prim.tile is None:
            return ev.run_inline(site, args, kwargs)
        try:
            return prim.tile(OPS, *args, **kwargs)
        except RAISED_AS_IS:
            raise
        except Exception as e:
            err = ExecutionError.from_exception(e, site.loc, prim.label)
            raise err from err.__cause__

    def submitted(self, ev, fut, site, args, kwargs):
        pass

    def settle(self, value, executor):
        pass

    def discard(self, ev):
        pass


KIND = kinds.register(SpmdKind())
