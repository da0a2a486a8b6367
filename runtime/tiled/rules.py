"""Which rule runs for which NumPy function on tiled arrays (NEP 13/18 dispatch: TiledArray's
``__array_ufunc__``/``__array_function__`` are these ``array_ufunc``/``array_function``), and the fallback for the
rest.

A NumPy function without a tile rule gathers its tiled inputs to the client and runs there (fallback.py), with a
``TileFallbackWarning`` naming the primitive and the user's line: correct first, and visible. ``covered()`` lists them
(docs/tiled.md: "What there is, and how it behaves" gives the command: python -c "import phylanx_py as px;
print(px.tiled.rules.covered())")."""
from __future__ import annotations

import functools

import numpy as np
from phylanx_py.primitives.ufuncs import UFUNC_REDUCE

from . import create, elementwise, indexing, products, reductions
from .array import is_tiled
from .common import normalize_axis, remote_result, submit
from .dispatch import implements
from .fallback import fallback
from .tile_program import _is_future


def _reduction(kind):
    def rule(a, axis=None, dtype=None, out=None, keepdims=False, ddof=0, **kw):
        if out is not None or kw.get("where") is not None:
            return fallback(kind, getattr(np, kind), (a,), {"axis": axis, "out": out, "keepdims": keepdims, **kw})
        extra = {"ddof": ddof} if kind in ("var", "std") else {}
        return reductions.reduce(kind, a, axis, keepdims, dtype=dtype, **extra)

    return rule


def _arg_reduction(kind):
    def rule(a, axis=None, out=None, keepdims=False):
        if out is not None:
            return fallback(kind, getattr(np, kind), (a,), {"axis": axis, "out": out})
        return reductions.reduce(kind, a, axis, keepdims)

    return rule


def _where(condition, x=None, y=None):
    if x is None and y is None:
        return fallback("where", np.where, (condition,), {})
    return elementwise.elementwise(np.where, [condition, x, y])


def _clip(a, a_min=None, a_max=None, out=None, **kw):
    lo = kw.pop("min", a_min)
    hi = kw.pop("max", a_max)
    if out is not None or kw:
        return fallback("clip", np.clip, (a, lo, hi), {"out": out, **kw})
    return elementwise.elementwise(_clip_kernel, [a, lo, hi])


def _clip_kernel(a, lo, hi):
    return np.clip(a, lo, hi)


def _full_like(fill):
    def rule(a, *args, dtype=None, **kw):
        if not is_tiled(a) or kw.get("shape") is not None:
            return fallback(f"{fill}_like", getattr(np, f"{fill}_like"), (a,) + args, {"dtype": dtype, **kw})
        value = {"zeros": 0, "ones": 1}.get(fill)
        if fill == "full":
            value = args[0] if args else kw["fill_value"]
        return create.like(a, value, dtype)

    return rule


def _shape(a):
    return a.shape


def _norm(x, ord=None, axis=None, keepdims=False):
    if ord is not None or axis is not None or keepdims:
        return fallback("linalg.norm", np.linalg.norm, (x,), {"ord": ord, "axis": axis, "keepdims": keepdims})
    a = np.absolute(x) if x.dtype.kind == "c" else x
    total = reductions.reduce("sum", a * a, None, False)
    if not _is_future(total):
        return np.sqrt(total)
    out_dtype = np.sqrt(np.ones(1, a.dtype)).dtype
    return remote_result(submit(x._executor, np.sqrt, total.remote(), label="norm"), (), out_dtype)


def _squeeze(a, axis=None):
    """A view without the size-1 axes (those in ``axis``), as NumPy's."""
    axes = range(a.ndim) if axis is None else normalize_axis(axis, a.ndim)
    if axis is not None and any(a.shape[d] != 1 for d in axes):
        raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
    return indexing.getitem(a, tuple(0 if d in axes and a.shape[d] == 1 else slice(None) for d in range(a.ndim)))


def _swapaxes(a, axis1, axis2):
    axes = list(range(a.ndim))
    i, j = normalize_axis(axis1, a.ndim)[0], normalize_axis(axis2, a.ndim)[0]
    axes[i], axes[j] = axes[j], axes[i]
    return indexing.transpose(a, tuple(axes))


def _moveaxis(a, source, destination):
    src = [normalize_axis(s, a.ndim)[0] for s in (source if isinstance(source, (tuple, list)) else (source,))]
    dst = [normalize_axis(d, a.ndim)[0] for d in (destination if isinstance(destination, (tuple, list))
                                                  else (destination,))]
    if len(src) != len(dst):
        raise ValueError("`source` and `destination` arguments must have the same number of elements")
    order = [n for n in range(a.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):  # NumPy's own construction of the permutation
        order.insert(d, s)
    return indexing.transpose(a, tuple(order))


def _reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    if order != "C":
        return fallback("reshape", np.reshape, (a, shape if shape is not None else newshape),
                        {"order": order} if copy is None else {"order": order, "copy": copy})
    return indexing.reshape(a, shape if shape is not None else newshape, copy)


HANDLED = {
    np.sum: _reduction("sum"), np.prod: _reduction("prod"), np.mean: _reduction("mean"),
    np.min: _reduction("min"), np.max: _reduction("max"), np.amin: _reduction("min"), np.amax: _reduction("max"),
    np.any: _reduction("any"), np.all: _reduction("all"), np.var: _reduction("var"), np.std: _reduction("std"),
    np.argmin: _arg_reduction("argmin"), np.argmax: _arg_reduction("argmax"),
    np.matmul: products.matmul, np.dot: products.dot, np.outer: products.outer,
    np.transpose: lambda a, axes=None: indexing.transpose(a, axes),
    np.squeeze: _squeeze, np.swapaxes: _swapaxes, np.moveaxis: _moveaxis,
    np.where: _where, np.clip: _clip,
    np.concatenate: lambda arrays, axis=0: indexing.concatenate(arrays, axis),
    np.stack: lambda arrays, axis=0: indexing.stack(arrays, axis),
    np.reshape: _reshape,
    np.ravel: lambda a: indexing.ravel(a),
    np.expand_dims: lambda a, axis: indexing.getitem(a, (slice(None),) * (axis % (a.ndim + 1)) + (None,)),
    np.shape: _shape, np.ndim: lambda a: a.ndim, np.size: lambda a, axis=None: a.size if axis is None else
    a.shape[axis],
    np.copy: lambda a, **kw: a.copy(),
    np.zeros_like: _full_like("zeros"), np.ones_like: _full_like("ones"), np.full_like: _full_like("full"),
    np.empty_like: _full_like("zeros"), np.linalg.norm: _norm,
}


def covered() -> list[str]:
    """Names of the NumPy functions with tile rules (ufuncs: every single-output ufunc called element-wise)."""
    return sorted({f.__name__ for f in HANDLED} | {"every ufunc (element-wise)", "ufunc.reduce of "
                                                   + ", ".join(u.__name__ for u in UFUNC_REDUCE)})


@implements("array_ufunc")
def array_ufunc(ufunc, method, inputs, kwargs):
    if ufunc is np.matmul and method == "__call__" and len(inputs) == 2 and not kwargs:
        return products.matmul(*inputs)
    if method == "__call__" and ufunc.nout == 1 and not kwargs.get("out") and "where" not in kwargs:
        kw = {k: v for k, v in kwargs.items() if k in ("dtype", "casting")}
        if len(kw) != len(kwargs):
            return fallback(ufunc.__name__, ufunc, inputs, kwargs)
        fn = functools.partial(ufunc, **kw) if kw else ufunc
        return elementwise.elementwise(fn, list(inputs))
    if method == "reduce" and ufunc in UFUNC_REDUCE and len(inputs) == 1 and not kwargs.get("out"):
        kw = {k: v for k, v in kwargs.items() if k in ("axis", "keepdims", "dtype")}
        if len(kw) == len(kwargs):
            return reductions.reduce(UFUNC_REDUCE[ufunc], inputs[0], kw.get("axis", 0), kw.get("keepdims", False),
                                     dtype=kw.get("dtype"))
    return fallback(f"{ufunc.__name__}.{method}" if method != "__call__" else ufunc.__name__,
                    getattr(ufunc, method), inputs, kwargs)


@implements("array_function")
def array_function(func, args, kwargs):
    rule = HANDLED.get(func)
    if rule is None:
        return fallback(getattr(func, "__name__", str(func)), func, args, kwargs)
    return rule(*args, **kwargs)
