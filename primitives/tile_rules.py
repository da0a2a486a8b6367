"""The tile rules of NumPy's own functions and ufuncs: how ``np.sum``, ``np.where``, ``x @ y`` ... run on distributed
values, written once against ``ops`` (``Primitive.tile(ops, *args, **kwargs)``) and run by two backends: the tiled
runtime (runtime/tiled/ops.py: tasks per tile, ``ops.fallback`` gathers to the client with a warning) and an SPMD rank
(runtime/spmd/ops.py: the rank's shards, ``ops.fallback`` declines the SPMD form, naming why). numpy_ops.py puts each
rule on its function's declaration (``TILE``); NEP 13/18 dispatch (TiledArray's and a shard's ``__array_function__``)
and the evaluator's value kinds both find it there.

A rule takes NumPy's signature and hands what it does not cover to ``ops.fallback`` with everything the user passed,
so the gathered call is NumPy's own. ``why`` says, for the SPMD backend's ``explain()``, why a case has no SPMD form."""
from __future__ import annotations

import functools

import numpy as np

from .ufuncs import UFUNC_REDUCE

try:
    from numpy.lib.array_utils import normalize_axis_tuple as _axes
except ImportError:  # NumPy < 2.0
    from numpy.core.numeric import normalize_axis_tuple as _axes

_NO_DTYPE = frozenset(("min", "max", "amin", "amax", "any", "all", "argmin", "argmax"))
_CANON = {"amin": "min", "amax": "max"}


def _given(**kw):
    """The keyword arguments the user gave (NumPy's defaults left out, so the gathered call sees only those)."""
    defaults = {"axis": None, "dtype": None, "out": None, "keepdims": False, "ddof": 0}
    return {k: v for k, v in kw.items() if k not in defaults or v is not defaults[k]}


def _reduction(kind):
    fn, name = getattr(np, kind), _CANON.get(kind, kind)
    if kind in _NO_DTYPE:
        def rule(ops, a, axis=None, out=None, keepdims=False, **kw):
            if out is not None or kw:
                return ops.fallback(kind, fn, (a,), _given(axis=axis, out=out, keepdims=keepdims, **kw),
                                    why=f"np.{kind} with out= or {sorted(kw)}")
            return ops.reduce(name, a, axis, keepdims)
    else:
        def rule(ops, a, axis=None, dtype=None, out=None, keepdims=False, ddof=0, **kw):
            if out is not None or kw:
                extra = {"ddof": ddof} if kind in ("var", "std") else {}
                return ops.fallback(kind, fn, (a,), _given(axis=axis, dtype=dtype, out=out, keepdims=keepdims,
                                                           **extra, **kw), why=f"np.{kind} with out= or {sorted(kw)}")
            return ops.reduce(name, a, axis, keepdims, dtype=dtype, ddof=ddof)
    return rule


def _where(ops, condition, x=None, y=None):
    if x is None and y is None:
        return ops.fallback("where", np.where, (condition,), {},
                            why="np.where with one argument (the indices of tiled values)")
    return ops.elementwise(np.where, [condition, x, y])


def _clip3(a, lo, hi):  # a module-level function: tasks carrying it pickle by reference
    return np.clip(a, lo, hi)


def _clip(ops, a, a_min=None, a_max=None, out=None, **kw):
    lo, hi = kw.pop("min", a_min), kw.pop("max", a_max)
    if out is not None or kw:
        return ops.fallback("clip", np.clip, (a, lo, hi), {"out": out, **kw}, why=f"np.clip with {sorted(kw)}")
    return ops.elementwise(_clip3, [a, lo, hi])


def _like(fill):
    fn = getattr(np, f"{fill}_like")

    def rule(ops, a, *args, dtype=None, **kw):
        if kw.get("shape") is not None or kw.get("order", "K") not in ("K", "C"):
            return ops.fallback(f"{fill}_like", fn, (a,) + args, {"dtype": dtype, **kw},
                                why=f"np.{fill}_like of this value")
        value = {"zeros": 0, "ones": 1, "empty": 0}.get(fill)
        if fill == "full":
            value = args[0] if args else kw["fill_value"]
        return ops.like(a, value, dtype)

    return rule


def _norm(ops, x, ord=None, axis=None, keepdims=False):
    if ord is not None or axis is not None or keepdims:
        return ops.fallback("linalg.norm", np.linalg.norm, (x,), {"ord": ord, "axis": axis, "keepdims": keepdims},
                            why="np.linalg.norm other than the 2-norm of the whole tiled array")
    return ops.norm(x)


def _squeeze(ops, a, axis=None):
    """A view without the size-1 axes (those in ``axis``), as NumPy's."""
    axes = range(a.ndim) if axis is None else _axes(axis, a.ndim)
    if axis is not None and any(a.shape[d] != 1 for d in axes):
        raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
    return ops.getitem(a, tuple(0 if d in axes and a.shape[d] == 1 else slice(None) for d in range(a.ndim)))


def _swapaxes(ops, a, axis1, axis2):
    axes = list(range(a.ndim))
    i, j = _axes(axis1, a.ndim)[0], _axes(axis2, a.ndim)[0]
    axes[i], axes[j] = axes[j], axes[i]
    return ops.transpose(a, tuple(axes))


def _moveaxis(ops, a, source, destination):
    src, dst = _axes(source, a.ndim), _axes(destination, a.ndim)
    if len(src) != len(dst):
        raise ValueError("`source` and `destination` arguments must have the same number of elements")
    order = [n for n in range(a.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):  # NumPy's own construction of the permutation
        order.insert(d, s)
    return ops.transpose(a, tuple(order))


def _reshape(ops, a, shape=None, order="C", *, newshape=None, copy=None):
    shape = shape if shape is not None else newshape
    if order != "C":
        return ops.fallback("reshape", np.reshape, (a, shape),
                            {"order": order} if copy is None else {"order": order, "copy": copy})
    return ops.reshape(a, shape, copy)


def _along(fn, name, default_axis):
    """A function of one array along one axis (``np.cumsum(x, axis=1)``, ``np.sort``): tile by tile when that
    axis lies within each tile, else NumPy's on the gathered array."""
    def rule(ops, a, axis=default_axis, **kw):
        if axis is None or not ops.within_tile(a, axis):
            return ops.fallback(name, fn, (a,), {"axis": axis, **kw}, why=f"np.{name} along the tiled axis")
        return ops.elementwise(functools.partial(fn, axis=axis, **kw), [a])

    return rule


def _expand_dims(ops, a, axis):
    return ops.getitem(a, (slice(None),) * (axis % (a.ndim + 1)) + (None,))


def _of_tiled(name, rule):
    """``rule`` where its first argument is a distributed array; NumPy's own function otherwise (a list holding
    tiled arrays: ``np.sum([t, u])``)."""
    fn = getattr(np.linalg, name[7:]) if name.startswith("linalg.") else getattr(np, name)

    def run(ops, *args, **kwargs):
        if not args or not ops.is_tiled(args[0]):
            return ops.fallback(name, fn, args, kwargs, why=f"np.{name} of this value")
        return rule(ops, *args, **kwargs)

    run.__name__ = run.__qualname__ = f"tile_{name.replace('.', '_')}"
    return run


# Rules whose operands may be tiled or not, in any position
_ANY_OPERAND = ("matmul", "dot", "outer", "where", "clip", "concatenate", "stack")
# name (as numpy_ops.py declares it) -> rule
_RULES = {
    **{k: _reduction(k) for k in ("sum", "prod", "mean", "min", "max", "amin", "amax", "any", "all", "var", "std",
                                  "argmin", "argmax")},
    "matmul": lambda ops, a, b: ops.matmul(a, b), "dot": lambda ops, a, b: ops.dot(a, b),
    "outer": lambda ops, a, b: ops.outer(a, b),
    "transpose": lambda ops, a, axes=None: ops.transpose(a, axes),
    "squeeze": _squeeze, "swapaxes": _swapaxes, "moveaxis": _moveaxis, "expand_dims": _expand_dims,
    "where": _where, "clip": _clip,
    "concatenate": lambda ops, arrays, axis=0: ops.concatenate(arrays, axis),
    "stack": lambda ops, arrays, axis=0: ops.stack(arrays, axis),
    "reshape": _reshape, "ravel": lambda ops, a: ops.ravel(a),
    "shape": lambda ops, a: a.shape, "ndim": lambda ops, a: a.ndim,
    "size": lambda ops, a, axis=None: a.size if axis is None else a.shape[axis],
    "copy": lambda ops, a, **kw: a.copy(),
    "zeros_like": _like("zeros"), "ones_like": _like("ones"), "full_like": _like("full"),
    "empty_like": _like("empty"), "linalg.norm": _norm,
    "cumsum": _along(np.cumsum, "cumsum", None), "sort": _along(np.sort, "sort", -1),
}
TILE = {k: r if k in _ANY_OPERAND else _of_tiled(k, r) for k, r in _RULES.items()}


def ufunc(ops, fn, method, inputs, kwargs):
    """A ufunc called on a distributed value (NEP 13): element-wise, or a reduction of the ufuncs that have one."""
    if fn is np.matmul and method == "__call__" and len(inputs) == 2 and not kwargs:
        return ops.matmul(*inputs)
    given = {k: v for k, v in kwargs.items() if not (k == "out" and v is None)}
    if method == "__call__" and fn.nout == 1 and "out" not in given and "where" not in given:
        kw = {k: v for k, v in given.items() if k in ("dtype", "casting")}
        if len(kw) == len(given):
            return ops.elementwise(functools.partial(fn, **kw) if kw else fn, list(inputs))
        return ops.fallback(fn.__name__, fn, inputs, kwargs, why=f"np.{fn.__name__} with {sorted(kwargs)}")
    if method == "reduce" and fn in UFUNC_REDUCE and len(inputs) == 1 and "out" not in given:
        kw = {k: v for k, v in given.items() if k in ("axis", "keepdims", "dtype")}
        if len(kw) == len(given):
            return ops.reduce(UFUNC_REDUCE[fn], inputs[0], kw.get("axis", 0), kw.get("keepdims", False),
                              dtype=kw.get("dtype"))
    name = f"{fn.__name__}.{method}" if method != "__call__" else fn.__name__
    return ops.fallback(name, getattr(fn, method), inputs, kwargs,
                        why=f"np.{name} on a tiled value" if method != "__call__" else
                        f"np.{name} with out= on a tiled value")


def covered() -> list[str]:
    """Names of the NumPy functions with tile rules (ufuncs: every single-output ufunc called element-wise)."""
    return sorted({n.split(".")[-1] for n in TILE} | {"every ufunc (element-wise)", "ufunc.reduce of "
                                                     + ", ".join(u.__name__ for u in UFUNC_REDUCE)})
