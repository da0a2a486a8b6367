"""A shard's NumPy face (NEP 13/18): which NumPy functions and ufuncs a rank runs on its shards, and how. What is
not listed raises NotSpmd naming the function: the loop then runs as before, and ``explain()`` says why."""
from __future__ import annotations

import functools
import weakref

import numpy as np
from phylanx_py.primitives.ufuncs import UFUNC_REDUCE

from . import cross, local
from .shard import NotSpmd, Shard, Transposed, holds, implements


def _reduction(kind):
    def rule(a, axis=None, dtype=None, out=None, keepdims=False, ddof=0, **kw):
        if out is not None or kw:
            raise NotSpmd(f"np.{kind} with out= or {sorted(kw)}")
        return cross.reduce(kind, a, axis, keepdims, dtype, ddof)

    return rule


def _arg_reduction(kind):
    def rule(a, axis=None, out=None, keepdims=False):
        if out is not None:
            raise NotSpmd(f"np.{kind} with out=")
        return cross.reduce(kind, a, axis, keepdims)

    return rule


def _where(condition, x=None, y=None):
    if x is None and y is None:
        raise NotSpmd("np.where with one argument (the indices of tiled values)")
    return local.elementwise(np.where, [condition, x, y])


def _clip(a, a_min=None, a_max=None, **kw):
    lo, hi = kw.pop("min", a_min), kw.pop("max", a_max)
    if kw:
        raise NotSpmd(f"np.clip with {sorted(kw)}")
    return local.elementwise(lambda v, p, q: np.clip(v, p, q), [a, lo, hi])


def _like(fill):
    def rule(a, *args, dtype=None, **kw):
        if type(a) is not Shard or kw.get("shape") is not None or kw.get("order", "K") not in ("K", "C"):
            raise NotSpmd(f"np.{fill}_like of this value")
        value = args[0] if args else kw.get("fill_value")
        data = {"zeros": np.zeros_like, "ones": np.ones_like, "empty": np.zeros_like}[fill](a.data, dtype=dtype) \
            if fill != "full" else np.full_like(a.data, value, dtype=dtype)
        return a.like(data)

    return rule


def _local_axis(fn, name):
    """A function of one array that works along an axis other than the tiled one (``np.cumsum(x, axis=1)``)."""
    def rule(a, axis=None, **kw):
        if type(a) is not Shard or axis is None or int(axis) % a.ndim == 0 or a.ragged is not None:
            raise NotSpmd(f"np.{name} along the tiled axis")
        return a.like(fn(a.data, axis=axis, **kw))

    return rule


HANDLED = {
    np.sum: _reduction("sum"), np.prod: _reduction("prod"), np.mean: _reduction("mean"),
    np.min: _reduction("min"), np.max: _reduction("max"), np.amin: _reduction("min"), np.amax: _reduction("max"),
    np.any: _reduction("any"), np.all: _reduction("all"), np.var: _reduction("var"), np.std: _reduction("std"),
    np.argmin: _arg_reduction("argmin"), np.argmax: _arg_reduction("argmax"),
    np.matmul: cross.matmul, np.dot: cross.matmul, np.linalg.norm: cross.norm,
    np.where: _where, np.clip: _clip,
    np.shape: lambda a: a.shape, np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
    np.copy: lambda a, **kw: a.copy(),
    np.zeros_like: _like("zeros"), np.ones_like: _like("ones"), np.full_like: _like("full"),
    np.empty_like: _like("empty"),
    np.cumsum: _local_axis(np.cumsum, "cumsum"), np.sort: _local_axis(np.sort, "sort"),
    np.transpose: lambda a, axes=None: a.T if axes is None else (_ for _ in ()).throw(
        NotSpmd("np.transpose with axes of a tiled value")),
}


@implements("array_ufunc")
def array_ufunc(ufunc, method, inputs, kwargs):
    if ufunc is np.matmul and method == "__call__" and len(inputs) == 2 and not kwargs:
        return cross.matmul(*inputs)
    if method == "__call__" and ufunc.nout == 1 and kwargs.get("out") is None and "where" not in kwargs:
        kw = {k: v for k, v in kwargs.items() if k in ("dtype", "casting")}
        if len(kw) != len({k: v for k, v in kwargs.items() if k != "out"}):
            raise NotSpmd(f"np.{ufunc.__name__} with {sorted(kwargs)}")
        if ufunc is np.equal and not kw:
            mask = _label_test(inputs)
            if mask is not None:
                return mask
        return local.elementwise(functools.partial(ufunc, **kw) if kw else ufunc, list(inputs))
    if method == "reduce" and ufunc in UFUNC_REDUCE and len(inputs) == 1 and kwargs.get("out") is None:
        kw = {k: v for k, v in kwargs.items() if k in ("axis", "keepdims", "dtype")}
        if len(kw) == len({k: v for k, v in kwargs.items() if k != "out"}):
            return cross.reduce(UFUNC_REDUCE[ufunc], inputs[0], kw.get("axis", 0), kw.get("keepdims", False),
                                kw.get("dtype"))
    raise NotSpmd(f"np.{ufunc.__name__}.{method} on a tiled value" if method != "__call__" else
                  f"np.{ufunc.__name__} with out= on a tiled value")


def _label_test(inputs):
    """``labels == j`` (an integer shard and an integer): a mask made on first use that remembers its labels and
    j, so ``X[mask].mean(axis=0)`` and ``np.sum(mask)`` can be entries of per-label sums (cross.group_sums) and
    the mask itself is never made. None when it is not such a test."""
    a, b = inputs
    labels, j = (a, b) if type(a) is Shard else (b, a)
    if type(labels) is Shard and labels.ragged is None and labels.ndim == 1 and labels.dtype.kind in "iu" \
            and np.can_cast(labels.dtype, np.intp, "safe") and -labels.R <= labels.t <= labels.L \
            and type(j) in (int, np.int64, np.int32, np.intp) and not isinstance(j, bool) and not labels.mutated:
        mask = Shard(None, labels.n, labels.L, labels.R, labels.t, labels.rank, origin=("eq", labels, int(j)))
        labels.rank.lazy.append(weakref.ref(mask))  # made before the labels change (local._before_change)
        return mask
    return None


@implements("array_function")
def array_function(func, args, kwargs):
    rule = HANDLED.get(func)
    if rule is None:
        raise NotSpmd(f"np.{getattr(func, '__name__', func)} has no SPMD rule")
    return rule(*args, **kwargs)


implements("getitem")(local.getitem)
implements("setitem")(local.setitem)
implements("inplace")(local.inplace)
implements("reduce")(cross.reduce)
implements("matmul")(cross.matmul)


def shard_in(value) -> bool:
    """Does ``value`` (top level, or in a list/tuple/dict) hold a shard?"""
    return holds(value, (Shard, Transposed))
