"""Kinds of values in a native loop: each is a small stand-in value of the same type (``3`` for a Python int,
``np.float32(3)``, a 2x2 float64 array ...), so a primitive's result kind is its NumPy kernel run on stand-ins:
NumPy's own promotion rules (NEP 50) decide, not a table of ours."""
from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np

# dtypes a native kernel takes (uint64 compares and promotes differently in Numba: not taken)
DTYPES = frozenset(np.dtype(d) for d in ("float64", "float32", "int64", "int32", "int16", "int8", "uint8",
                                         "uint16", "uint32", "bool", "complex128"))
# kinds whose arithmetic Numba does exactly as NumPy and Python do, without casts
PLAIN = frozenset({int, float, bool, np.float64, np.int64, np.bool_})
RANGE = ("range",)
SLICE = slice(None)
INT64 = (-(1 << 63), 1 << 63)
MAX_NDIM = 8  # arrays (and int tuples) of up to 8 dimensions: an array's stand-in has 2**ndim elements


class Either:
    """A variable that is a Python scalar until the loop first stores a NumPy scalar into it (``s = 0.0`` then
    ``s += a[i]``): the kernel computes with the NumPy type (the same IEEE/int64 arithmetic) and keeps a flag
    ``__pxw_<origin>`` saying which one the plain loop would have, so the result has its type."""

    __slots__ = ("py", "np", "origin")

    def __init__(self, py, np_, origin):
        # origin: the variables whose flags decide (a result of several is NumPy if any of them is)
        self.py, self.np = py, np_
        self.origin = (origin,) if type(origin) is str else tuple(sorted(origin))

    def flag(self) -> str:
        """Generated source of this value's flag (1: the NumPy scalar)."""
        names = [f"__pxw_{o}" for o in self.origin]
        return names[0] if len(names) == 1 else f"max({', '.join(names)})"


# Python scalar kinds and the NumPy scalar kind they become when a loop mixes them in
PAIRS = {int: np.int64, float: np.float64, bool: np.bool_}


def either_of(a, b, name):
    """The Either of kinds ``a`` and ``b`` if they are such a pair, else None."""
    for x, y in ((a, b), (b, a)):
        if type(x) in PAIRS and type(y) is PAIRS[type(x)]:
            return Either(x, y, name)
        if type(x) is Either and (key(y) in (key(x.py), key(x.np))):
            return x
    return None


class Decline(Exception):
    """This loop (for these argument kinds) stays interpreted; ``str(e)`` says why."""


def of_value(v, name=""):
    """The kind of an argument value, or Decline."""
    t = type(v)
    if t is bool or t is float:
        return t(1.5) if t is float else True
    if t is int:
        if not INT64[0] <= v < INT64[1]:
            raise Decline(f"{name} is a Python int past 2**63")
        return 3
    if isinstance(v, np.generic) and v.dtype in DTYPES:
        return v.dtype.type(3)
    if t is np.ndarray:
        if v.dtype not in DTYPES:
            raise Decline(f"{name} is an array of {v.dtype}")
        if not 1 <= v.ndim <= MAX_NDIM:
            raise Decline(f"{name} is a {v.ndim}-d array")
        return array(v.dtype, v.ndim)
    if t is tuple and all(type(x) is int for x in v) and len(v) <= MAX_NDIM:
        return tuple(3 for _ in v)
    raise Decline(f"{name} is {_describe(v)}")


def _describe(v) -> str:
    name = type(v).__name__
    return f"a {name}" if name[0] not in "aeiou" else f"an {name}"


def array(dtype, ndim):
    return np.ones((2,) * ndim, dtype)


def key(k):
    """A hashable, comparable form of a kind."""
    t = type(k)
    if t is Either:
        return ("e", key(k.py), key(k.np), k.origin)
    if t is np.ndarray:
        return ("a", k.dtype.str, k.ndim)
    if isinstance(k, np.generic):
        return ("n", k.dtype.str)
    if t is tuple:
        return ("t",) + tuple(key(x) for x in k)
    if t in (int, float, bool, complex):
        return ("p", t.__name__)
    return ("o", repr(k))


def is_scalar(k) -> bool:
    if type(k) is Either:
        return True
    return type(k) in (int, float, bool) or isinstance(k, np.generic)


def holds_complex(k) -> bool:
    """Whether a value of kind ``k`` is or holds a complex number."""
    if type(k) is Either:
        return holds_complex(k.py) or holds_complex(k.np)
    if type(k) is tuple:
        return any(holds_complex(x) for x in k)
    if type(k) is np.ndarray:
        return k.dtype.kind == "c"
    return type(k) is complex or isinstance(k, np.complexfloating)


def is_int(k) -> bool:
    if type(k) is Either:
        return is_int(k.np)
    return type(k) is int or isinstance(k, np.integer)


def run(kernel, *stand_ins):
    """The kernel on stand-ins: the result kind, or Decline if NumPy refuses these kinds."""
    error = None
    # stand-ins are values, and a value can hit an edge (3 - 3 == 0 as a divisor): other values, same kinds
    for attempt in range(3):
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = kernel(*[_variant(x, i, attempt) for i, x in enumerate(stand_ins)])
            break
        except Exception as e:  # noqa: BLE001 - the interpreted loop will raise the same, at its line
            error = error or e
    else:
        raise Decline(f"{type(error).__name__}: {error}") from None
    if type(out) is np.ndarray:
        return array(out.dtype, out.ndim) if out.dtype in DTYPES and out.ndim >= 1 else _bad(out)
    if type(out) in (int, float, bool):
        return out
    if isinstance(out, np.generic) and out.dtype in DTYPES:
        return out
    return _bad(out)


def _variant(x, i, attempt):
    if type(x) is np.ndarray:
        return x.copy()
    if attempt == 0 or type(x) is bool or isinstance(x, np.bool_) or not is_scalar(x):
        return x
    return type(x)(2 + i + attempt * 3)


def _bad(out):
    raise Decline(f"a value of type {type(out).__name__}")


def describe(k) -> str:
    """``float64[:, :]``, ``int``, ``np.float32``: how explain() shows a kind."""
    if type(k) is Either:
        return f"{describe(k.py)}|{describe(k.np)}"
    if type(k) is np.ndarray:
        return f"{k.dtype}[{', '.join(':' * k.ndim)}]"
    if isinstance(k, np.generic):
        return f"np.{k.dtype}"
    if type(k) is tuple:
        return "(" + ", ".join(describe(x) for x in k) + ")"
    return type(k).__name__


def convert(value, k):
    """A kernel's scalar result as the type NumPy/Python would have produced (Numba returns Python floats)."""
    if isinstance(k, np.generic):
        return k.dtype.type(value)
    t = type(k)
    if t in (int, float, bool):
        return t(value)
    return value


def converter(k):
    """A function of the kernel's result to the value as the plain function returns it, or None when it is that
    value. The result is the value alone, or (value, Either flags ...) when ``k`` has Either kinds."""
    items = k if type(k) is tuple else (k,)
    if not any(type(x) is Either or isinstance(x, np.generic) for x in items):
        return None
    if isinstance(k, np.generic):  # one NumPy scalar (the most common): its type itself, 45 ns a call, not 200
        return k.dtype.type
    plan, n = [], 0
    for x in items:  # (kind, index of its flag in the result tuple or None)
        n += type(x) is Either
        plan.append((x, n if type(x) is Either else None))
    flagged = n > 0

    def one(value, x, flag, out):
        if flag is not None:
            return convert(value, x.np if out[flag] else x.py)
        return value if x is None or type(x) is np.ndarray else convert(value, x)

    if type(k) is tuple:
        if flagged:
            return lambda out: tuple(one(v, x, flag, out) for v, (x, flag) in zip(out[0], plan))
        return lambda out: tuple(one(v, x, None, None) for v, (x, _) in zip(out, plan))
    if flagged:
        return lambda out: one(out[0], k, plan[0][1], out)
    return lambda out: one(out, k, None, None)


_NUMBER_TYPES = frozenset({"Integer", "Float", "Boolean", "Complex", "IntegerLiteral", "BooleanLiteral"})


class Param(NamedTuple):
    """What the analysis needs of a kernel parameter's type."""

    number: bool  # a scalar number
    ndim: int | None  # an array's dimensions
    complex: bool  # a complex number or array


def param_of(t) -> Param:
    """A parameter's Param from its Numba type."""
    return Param(type(t).__name__ in _NUMBER_TYPES, t.ndim if getattr(t, "ndim", None) is not None and
                 hasattr(t, "dtype") else None, "complex" in str(t))


def param_of_value(a) -> Param:
    """A parameter's Param from a value of it (whole.py's stand-ins: arrays and numbers), without Numba."""
    return Param(type(a) is not np.ndarray, a.ndim if type(a) is np.ndarray else None, bool(np.iscomplexobj(a)))
