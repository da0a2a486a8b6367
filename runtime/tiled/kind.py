"""Tiled arrays as a value kind of the evaluator (runtime/kinds.py): how a primitive call on tiled arguments runs.

A call with a tiled argument runs its tile rule on the client; the rule submits tile tasks and returns a tiled
array or a small future. Tasks an evaluation submits after tile rules ran get their (small) result's shape and
dtype recorded, so later tile rules take them as inputs without fetching them (``submitted``).
"""
from __future__ import annotations

import warnings

import numpy as np
from phylanx_py.primitives import lookup

from phylanx_py.errors import RAISED_AS_IS, ExecutionError

from .. import kinds
from ..evaluation import INLINE_ELEMENTS
from ..executors import FUTURES, collect, substitute
from . import batch
from .array import TiledArray
from .dispatch import implements
from .fallback import fallback
from .ops import OPS
from .tile_program import SITE, meta_of, remember


class TiledKind:
    types = (TiledArray,)

    def call(self, ev, site, args, kwargs):
        if ev.memo:
            args = tuple(ev.memo.get(a, a) if type(a) in FUTURES else a for a in args)
        ev.kinds_used.add(self)
        token = SITE.set((site.loc, site.prim.label, ev))
        try:
            rule = site.prim.tile
            if rule is None:  # NumPy's functions reach TiledArray's __array_function__ / __array_ufunc__
                return ev.run_inline(site, args, kwargs)
            try:
                return rule(OPS, *args, **kwargs)
            except RAISED_AS_IS:
                raise
            except Exception as e:
                err = ExecutionError.from_exception(e, site.loc, site.prim.label)
                raise err from err.__cause__
        finally:
            SITE.reset(token)

    def submitted(self, ev, fut, site, args, kwargs):
        if hasattr(fut, "key"):
            meta = _result_meta(site.prim, args, kwargs)
            if meta is not None:
                remember(fut, *meta)

    def settle(self, value, executor):
        found: list = []
        collect(value, found, (TiledArray,))
        futures = [f for t in found for f in t.persist().futures.flat]
        if futures:
            executor.wait(futures)
            for f in futures:
                if executor.failed(f):
                    f.result()

    def discard(self, ev):
        batch.discard(ev)  # tile reductions the call asked for but never used


def _result_meta(prim, args, kwargs):
    """(shape, dtype) of a remote task's result when its inputs are small results of tile rules (their shapes
    are recorded) and small values: found by running the kernel on zeros of those shapes here. Tile rules then
    take the task's future as an input without fetching it, so an iterative algorithm's update of its small
    state (``w = w - alpha * g``) stays on the cluster and its next iteration is issued at once."""
    found: list = []
    collect((args, kwargs), found)
    metas = {}
    for f in found:
        meta = meta_of(f)
        if meta is None or int(np.prod(meta[0])) > INLINE_ELEMENTS:
            return None
        metas[id(f)] = meta
    if not metas or _has_big_array((args, kwargs)):
        return None

    def zeros(f):
        shape, dtype = metas[id(f)]
        return np.zeros(shape, dtype)

    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = prim.kernel(*substitute(list(args), zeros), **substitute(dict(kwargs), zeros))
    except Exception:  # noqa: BLE001 - no shape known: rules will fetch the value instead
        return None
    if isinstance(out, (np.ndarray, np.generic, int, float, bool, complex)):
        return np.shape(out), np.asarray(out).dtype
    return None


def _has_big_array(value) -> bool:
    t = type(value)
    if t is np.ndarray:
        return value.size > INLINE_ELEMENTS
    if t is list or t is tuple:
        return any(_has_big_array(v) for v in value)
    if t is dict:
        return any(_has_big_array(v) for v in value.values())
    return False


@implements("tile_rule")
def run_tile_rule(name, args, kwargs):
    """Primitive ``name`` on tiled arguments outside compiled code: its tile rule, else gathered to the client."""
    prim = lookup(name)
    if prim.tile is not None:
        return prim.tile(OPS, *args, **kwargs)
    return fallback(name, prim.kernel, args, kwargs)


KIND = kinds.register(TiledKind())
