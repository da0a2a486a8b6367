"""Buffer reuse: an element-wise call writes its result into an operand array nothing else can read again.

Hand-written NumPy writes ``h = X @ W; h += b`` and ``g *= mask``: the product's fresh array takes the sum, no second
array is allocated and the data stays in the cache. Generated code does the same for an operand that is the fresh
result of a subexpression (a temporary of the generated code, read by this call only), when at run time:

- it is a plain ``ndarray`` owning its memory (not a view: writing into it would change its base), writeable, and
  referenced by that one temporary only (``sys.getrefcount``: a view of it, a list or cache holding it, a future's
  memo, all add references); what the count is for such a temporary is measured once here (``SOLE``), on the
  same pattern as the generated code's, so that an interpreter counting otherwise only turns reuse off;
- the result has its dtype and shape: NumPy's own type resolution for the call's operand dtypes (Python scalars
  as the weak scalars NumPy 2 makes of them) gives its dtype, and the other operands broadcast to its shape.

Then ``ufunc(t, b, out=t)`` computes what ``ufunc(t, b)`` does, with the same loop, into ``t``.
"""
from __future__ import annotations

import sys

import numpy as np
from phylanx_py.primitives.operators import BY_NAME as OPERATORS

# Arrays from this size on are reused: below it a new array costs less than the run-time test (~0.5 us)
REUSE_MIN_ELEMENTS = 4096
_refs = sys.getrefcount
_ndarray = np.ndarray
_PYTHON_SCALARS = {float: float, int: int, complex: complex, bool: np.dtype(bool)}


def ufunc_of(prim):
    """The NumPy ufunc a call of ``prim`` is on plain arrays and scalars: its kernel called as it is (``np.add``),
    or an operator's (``a + b``, ``operator.add``: ``np.add``); None otherwise."""
    if isinstance(prim.kernel, np.ufunc) and prim.inline is not None and prim.inline.template == "{kernel}({args})":
        return prim.kernel
    op = OPERATORS.get(prim.name[9:]) if prim.name.startswith("operator.") else None
    if op is None or op.numpy is None or op.kind not in ("binary", "unary") or op.name == "not_" or \
            op.numpy == "power":
        # (``not a`` is Python's truth test, never NumPy's logical_not; ``t ** 0.5``, ``** 2``, ``** -1`` are
        # ndarray.__pow__'s np.sqrt, np.square and np.reciprocal, not np.power: complex results differ, a review)
        return None
    return getattr(np, op.numpy, None)


def _count(a) -> int:
    return _refs(a)


def _probe() -> int:
    fresh = np.empty(1)
    return _count(fresh)


# The reference count, seen inside sole()/into(), of an array only one local variable of the caller holds.
SOLE = _probe()


def sole(t) -> bool:
    """Is ``t`` an array the calling temporary alone holds, which a kernel may overwrite? C-ordered only: the result
    takes the donor's memory order, where NumPy's of an F-ordered temporary and a C-ordered operand is C (a review:
    ``(np.copy(a.T) + b).view(np.complex128)`` then raised)."""
    return type(t) is _ndarray and _refs(t) == SOLE and t.base is None and t.flags.writeable and \
        t.flags.c_contiguous


# (ufunc, donor dtype, other operand's dtype or Python type, donor first) -> does the call give the donor's dtype
_same_dtype: dict = {}


def _gives_dtype(ufunc, dt, other, first: bool) -> bool:
    t = type(other)
    desc = other.dtype if (t is _ndarray or isinstance(other, np.generic)) else _PYTHON_SCALARS.get(t)
    if desc is None:
        return False
    key = (ufunc, dt, desc, first)
    hit = _same_dtype.get(key)
    if hit is None:
        try:
            dtypes = ufunc.resolve_dtypes(((dt, desc) if first else (desc, dt)) + (None,))
            hit = dtypes[-1] == dt
        except Exception:  # noqa: BLE001 - NumPy refuses these operands: the plain call raises its error
            hit = False
        _same_dtype[key] = hit
    return hit


def into(ufunc, t, other, first: bool) -> bool:
    """May binary ``ufunc`` write into ``t`` (its first operand when ``first``, else its second) next to
    ``other``: ``t`` held by the calling temporary only, the result ``t``'s dtype and shape?"""
    if type(t) is not _ndarray or _refs(t) != SOLE or t.base is not None or not t.flags.writeable or \
            not t.flags.c_contiguous:
        return False
    if type(other) is _ndarray:
        if not other.flags.c_contiguous and other.ndim > 1:
            return False  # NumPy's result order then follows the operands' (``sole``)
        shape = other.shape
        if shape != t.shape and (len(shape) > t.ndim or shape != t.shape[t.ndim - len(shape):]):
            return False
    elif type(other) not in _PYTHON_SCALARS and not isinstance(other, np.generic):
        return False  # subclasses and other objects: their own __array_ufunc__ decides
    return _gives_dtype(ufunc, t.dtype, other, first)


def into1(ufunc, t) -> bool:
    """May unary ``ufunc`` write into ``t``?"""
    if type(t) is not _ndarray or _refs(t) != SOLE or t.base is not None or not t.flags.writeable or \
            not t.flags.c_contiguous:
        return False
    dt = t.dtype
    key = (ufunc, dt, None, True)
    hit = _same_dtype.get(key)
    if hit is None:
        try:
            hit = ufunc.resolve_dtypes((dt, None))[-1] == dt
        except Exception:  # noqa: BLE001
            hit = False
        _same_dtype[key] = hit
    return hit
