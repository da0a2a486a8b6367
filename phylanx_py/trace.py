"""Tracing: run a plain NumPy-style function on traced values and record each primitive it applies.

A ``Tracer`` wraps a concrete value (an ndarray, a float, a TiledArray) and stands for an IR variable. NumPy's
dispatch protocols (``__array_ufunc__``, ``__array_function__``) and the operators bring every operation here, where it
is looked up in the primitive registry, computed with the registry's kernel and recorded as ``name = Call(...)``
with the user's file:line:col. Python runs the function's control flow itself, so loops of any trip count, if/else
on data and while loops all trace; a decision taken on a traced value is a *guard*: the recording is then valid for
this call only (grad.py re-traces such functions at every call instead of reusing the tree).

A value that depends on the differentiated arguments may not leave the trace as a Python number or a NumPy array
(``float(loss)``, ``np.asarray(h)`` under the hood of a library): that would silently cut the gradient, so it is a
``TraceError`` naming the line.
"""
from __future__ import annotations

import itertools
import linecache
import os
import sys

import numpy as np

from phylanx_py.primitives import lookup, name_of
from phylanx_py.primitives.operators import OPERATORS

from .errors import PhylanxError
from .source import UNKNOWN, SourceLoc, instruction_position


class TraceError(PhylanxError, TypeError):
    """An operation that cannot be recorded for differentiation, at the user's line."""


_HERE = os.path.dirname(os.path.abspath(__file__))
_OURS = (_HERE, os.path.join(os.path.dirname(_HERE), "runtime"), os.path.join(os.path.dirname(_HERE), "primitives"),
         os.path.dirname(np.__file__))


def user_loc() -> SourceLoc:
    """The innermost frame outside phylanx-py and NumPy: the user's line that asked for this operation."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_OURS):
        f = f.f_back
    if f is None:
        return UNKNOWN
    code = f.f_code
    line, col = instruction_position(code, f.f_lasti, f.f_lineno)  # the column too, not only the line
    return SourceLoc(code.co_filename, line, col or 1, code.co_name, linecache.getline(code.co_filename, line))


class Record:
    """One recorded primitive application: ``out = prim(*args, **kwargs)`` (args hold Tracers and plain values)."""

    __slots__ = ("out", "prim", "args", "kwargs", "loc")

    def __init__(self, out, prim, args, kwargs, loc):
        self.out, self.prim, self.args, self.kwargs, self.loc = out, prim, args, kwargs, loc


class Trace:
    """The recording of one traced call."""

    def __init__(self):
        self.records: list[Record] = []
        self.guards: list[tuple[SourceLoc, str]] = []  # decisions taken on traced values
        self._ids = itertools.count()
        self.at: SourceLoc | None = None  # while reverse mode runs a rule: the forward operation it differentiates

    def fresh(self, prefix="t") -> str:
        return f"__{prefix}{next(self._ids)}"

    def guard(self, why: str):
        self.guards.append((user_loc(), why))

    def emit(self, prim: str, args: tuple, kwargs: dict, diff: bool | None = None) -> Tracer:
        """Compute ``prim`` on the concrete values and record it; returns the result's Tracer."""
        loc = self.at or user_loc()
        try:
            value = lookup(prim).kernel(*_concrete(args), **_concrete(kwargs))
        except PhylanxError:
            raise
        except Exception as e:
            raise TraceError(f"{loc}: {prim} failed while tracing: {type(e).__name__}: {e}") from e
        if diff is None:
            diff = not lookup(prim).nondiff and _any_diff((args, kwargs))
        if isinstance(value, tuple):  # divmod, modf, frexp: a tuple of results, none of them differentiated
            return tuple(self._record(v, prim, args, kwargs, loc, False, i) for i, v in enumerate(value))
        return self._record(value, prim, args, kwargs, loc, diff)

    def _record(self, value, prim, args, kwargs, loc, diff, part=None):
        out = Tracer(value, self.fresh(), self, diff)
        if part is not None:  # one element of a tuple result: recorded as the whole call, then an index
            whole = Tracer(None, self.fresh(), self, False)
            self.records.append(Record(whole, prim, args, kwargs, loc))
            self.records.append(Record(out, "operator.getitem", (whole, part), {}, loc))
            return out
        self.records.append(Record(out, prim, args, kwargs, loc))
        return out


def _any_diff(x) -> bool:
    if type(x) is Tracer:
        return x.diff
    if isinstance(x, (list, tuple)):
        return any(_any_diff(v) for v in x)
    if isinstance(x, dict):
        return any(_any_diff(v) for v in x.values())
    return False


def _concrete(x):
    if type(x) is Tracer:
        return x.value
    if isinstance(x, list):
        return [_concrete(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_concrete(v) for v in x)
    if isinstance(x, dict):
        return {k: _concrete(v) for k, v in x.items()}
    if isinstance(x, slice):
        return slice(_concrete(x.start), _concrete(x.stop), _concrete(x.step))
    return x


def _trace_of(args) -> Trace:
    for a in args:
        if type(a) is Tracer:
            return a.trace
        if isinstance(a, (list, tuple)):
            t = _trace_of(a)
            if t is not None:
                return t
    return None


def _call(name, args, kwargs):
    trace = _trace_of(args) or _trace_of(tuple(kwargs.values()))
    return trace.emit(name, tuple(args), dict(kwargs))


# NumPy functions answered from the static shape, never recorded.
_STATIC = {"shape": lambda x: np.shape(x.value), "ndim": lambda x: np.ndim(x.value),
           "size": lambda x: np.size(x.value)}


def _binop(name, swap=False):
    def op(self, other):
        if other is NotImplemented or isinstance(other, (str, dict, set)):
            return NotImplemented
        return self.trace.emit(name, (other, self) if swap else (self, other), {})
    return op


class Tracer:
    """A traced value: concrete ``value``, IR variable ``name``, and whether it depends on what is differentiated."""

    __slots__ = ("value", "name", "trace", "diff")
    __array_priority__ = 1000  # NumPy arrays defer their operators to us

    def __init__(self, value, name, trace, diff):
        self.value, self.name, self.trace, self.diff = value, name, trace, diff

    # ---- NumPy's protocols -------------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = name_of(ufunc)
        if method != "__call__" or name is None or kwargs.get("out") is not None:
            return self._unsupported(f"np.{ufunc.__name__}{'' if method == '__call__' else '.' + method}")
        return self.trace.emit(name, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        name = name_of(func)
        if name in _STATIC:
            return _STATIC[name](args[0])
        if name is None:
            return self._unsupported(f"np.{getattr(func, '__name__', func)}")
        return self.trace.emit(name, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        if self.diff:
            raise TraceError(f"{user_loc()}: a value that depends on the differentiated arguments was converted to a "
                             "NumPy array (np.asarray or a library outside NumPy): its gradient would be lost; use "
                             "NumPy functions on it")
        self.trace.guard("converted to a NumPy array")
        return np.asarray(self.value, dtype=dtype)

    def _unsupported(self, what):
        raise TraceError(f"{user_loc()}: {what} is not supported on traced values (no primitive for it)")

    # ---- static facts ------------------------------------------------------------------------------------
    @property
    def shape(self):
        return np.shape(self.value)

    @property
    def ndim(self):
        return np.ndim(self.value)

    @property
    def size(self):
        return int(np.size(self.value))

    @property
    def dtype(self):
        dtype = getattr(self.value, "dtype", None)  # arrays (tiled ones too) know it; np.result_type would gather
        return np.dtype(dtype) if dtype is not None else np.result_type(self.value)

    def __len__(self):
        return len(self.value)

    # ---- leaving the trace (guards) ----------------------------------------------------------------------
    def _concretize(self, kind, conv):
        if self.diff and kind != "bool":
            raise TraceError(f"{user_loc()}: {kind}() of a value that depends on the differentiated arguments "
                             "cuts its gradient; keep it an array (or compute it outside the function)")
        self.trace.guard(f"{kind}() of a traced value")
        return conv(self.value)

    def __bool__(self):
        return self._concretize("bool", bool)

    def __float__(self):
        return self._concretize("float", float)

    def __int__(self):
        return self._concretize("int", int)

    def __index__(self):
        return self._concretize("int", lambda v: int(np.asarray(v).item()))

    def item(self):
        return self._concretize("item", lambda v: np.asarray(v).item())

    def tolist(self):
        return self._concretize("tolist", lambda v: np.asarray(v).tolist())

    def __iter__(self):
        return (self[i] for i in range(len(self.value)))

    def __repr__(self):
        return f"Tracer({self.name}, shape={self.shape}, dtype={self.dtype})"

    __hash__ = object.__hash__

    # ---- operators ---------------------------------------------------------------------------------------
    def __neg__(self):
        return self.trace.emit("negative", (self,), {})

    def __pos__(self):
        return self

    def __abs__(self):
        return self.trace.emit("absolute", (self,), {})

    def __invert__(self):
        return self.trace.emit("invert", (self,), {})

    def __getitem__(self, key):
        return self.trace.emit("operator.getitem", (self, key), {})

    def __setitem__(self, key, value):
        raise TraceError(f"{user_loc()}: assignment into an array (x[...] = v) is not differentiable here; build the "
                         "array with np.where or np.concatenate instead")

    # ---- methods -----------------------------------------------------------------------------------------
    @property
    def T(self):  # noqa: N802 - NumPy's name
        return self.trace.emit("transpose", (self,), {})

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        return self.trace.emit("transpose", (self, tuple(axes)) if axes else (self,), {})

    def reshape(self, *shape, **kw):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return self.trace.emit("reshape", (self, tuple(shape)), kw)

    def ravel(self):
        return self.trace.emit("ravel", (self,), {})

    flatten = ravel

    def astype(self, dtype, **kw):
        return self.trace.emit("method.astype", (self, dtype), kw)

    def copy(self):
        return self.trace.emit("copy", (self,), {})

    def dot(self, other):
        return self.trace.emit("dot", (self, other), {})

    def squeeze(self, axis=None):
        return self.trace.emit("squeeze", (self,), {} if axis is None else {"axis": axis})

    def swapaxes(self, a, b):
        return self.trace.emit("swapaxes", (self, a, b), {})

    def clip(self, lo=None, hi=None):
        return self.trace.emit("clip", (self, lo, hi), {})


def _method(name):
    def m(self, *args, **kwargs):
        return self.trace.emit(name, (self,) + args, kwargs)
    m.__name__ = name
    return m


# Operators record NumPy's ufunc of the operator (the one table: primitives/operators.py), ``x / y`` as ``divide``.
for _op in OPERATORS:
    if _op.dunder and _op.numpy and _op.kind in ("binary", "compare"):
        setattr(Tracer, f"__{_op.dunder}__", _binop(_op.numpy))
        if _op.kind == "binary":
            setattr(Tracer, f"__r{_op.dunder}__", _binop(_op.numpy, True))

for _name in "sum mean max min prod var std argmax argmin any all cumsum".split():
    setattr(Tracer, _name, _method(_name))


Tracer.__phylanx_call__ = staticmethod(_call)

__all__ = ["Record", "Trace", "TraceError", "Tracer", "user_loc"]
