"""Sums over the ranks that are not needed yet (``Deferred``), and how the waiting ones go out together: the first
use of any of them sends every waiting partial sum in one message (``send``), whatever made them.

One message per flush. Parts are grouped by the dtype they travel as: float64 parts, and integer parts whose total
is known to be an integer below 2**53 (a count of rows or of true elements: ``exact``), travel together as float64
(such integers and their sums are exact in float64, so the counts come back as the same integers; with no float64
part waiting, they travel as int64 with any int64 sums); any other dtype (float32, complex, an int64 sum of data)
travels in a message of its own. Float64 parts are added exactly as before (the same additions in the same order),
so packing changes no bit of any result.

Arithmetic on waiting sums waits too (``derived``): ``np.sum(X[m], axis=0) / np.sum(m)`` is a value computed when
first used, so the k sums and k counts of k-means' loop over clusters all wait for one message instead of forcing
one each (spmd/kind.py decides which operations). A waiting sum's own ``finish`` (a mean's division, a warning
for an empty selection) and a derived value run when first used, and at the latest when the next iteration starts
(``Rank.settle``): a value nobody reads is computed too, so its errors and warnings happen as in NumPy, in the
iteration that made it.

Every rank queues the same parts in the same order and uses them in the same order, so the messages match.
"""
from __future__ import annotations

import operator

import numpy as np

EXACT_LIMIT = 2 ** 53  # integers below this and their sums are exact in float64
MAX_DEPTH = 16  # a value derived from deferred values this many times over is computed at once
_F64, _I64 = np.dtype(np.float64), np.dtype(np.int64)


def wire_dtype(part: np.ndarray, exact: bool, floats: bool) -> np.dtype:
    """The dtype a part travels as (``floats``: float64 parts travel too; see the module doc)."""
    dt = part.dtype
    if exact and dt.kind in "biu":
        return _F64 if floats else _I64
    return dt


def send(rank, pending: list) -> None:
    """Sum every waiting part over the ranks: one allreduce per wire dtype (one in all for sums and counts)."""
    floats = any(d.part.dtype == _F64 for d in pending)
    groups: dict = {}
    for d in pending:
        groups.setdefault(wire_dtype(d.part, d.exact, floats), []).append(d)
    for wire, ds in groups.items():
        buf = np.concatenate([d.part.ravel().astype(wire, copy=False) for d in ds]) if len(ds) > 1 else \
            ds[0].part.ravel().astype(wire)
        total = rank.allreduce(buf, parts=len(ds))
        at = 0
        for d in ds:
            k = d.part.size
            t = total[at:at + k].reshape(d.part.shape)
            d.total = t if t.dtype == d.part.dtype else t.astype(d.part.dtype)
            at += k


class Deferred:
    """A sum over the ranks not needed yet (``part``: this rank's partial sum, ``finish(total)`` its value), or a
    value computed from such sums when first used (``derived``: ``part`` is None and ``finish()`` computes it).
    Used as its value by NumPy, operators, conversions and attribute access (the shard kind resolves it before a
    primitive runs)."""

    __array_priority__ = 300
    __slots__ = ("rank", "part", "finish", "exact", "total", "value", "done", "depth")

    def __init__(self, rank, part, finish, exact=False, depth=0):
        self.rank, self.part, self.finish, self.exact, self.depth = rank, part, finish, exact, depth
        self.total, self.value, self.done = None, None, False
        rank.made.append(self)

    @classmethod
    def derived(cls, rank, compute, depth):
        """A value ``compute()`` makes from deferred values ``depth - 1`` derivations deep (at most MAX_DEPTH:
        resolving a chain recurses through it)."""
        return cls(rank, None, compute, depth=depth)

    def get(self):
        if not self.done:
            if self.part is None:
                value = self.finish()
            else:
                if self.total is None:
                    self.rank.flush()
                value = self.finish(self.total)
            self.value, self.done = value, True
            self.part = self.total = self.finish = None
        return self.value

    def __array__(self, dtype=None, copy=None):
        v = np.asarray(self.get())
        return v if dtype is None else v.astype(dtype, copy=False)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return getattr(ufunc, method)(*resolve(inputs), **resolve(kwargs))

    def __array_function__(self, func, types, args, kwargs):
        return func(*resolve(args), **resolve(kwargs))

    def __getattr__(self, name):
        if name in Deferred.__slots__:
            raise AttributeError(name)
        return getattr(self.get(), name)

    def __getitem__(self, key):
        return self.get()[resolve(key)]

    def __bool__(self):
        return bool(self.get())

    def __float__(self):
        return float(self.get())

    def __int__(self):
        return int(self.get())

    def __index__(self):
        return self.get().__index__()

    def __complex__(self):
        return complex(self.get())

    def __len__(self):
        return len(self.get())

    def __iter__(self):
        return iter(self.get())

    def __repr__(self):
        return repr(self.get())

    __hash__ = None


def _deferred_binary(name):
    fn = getattr(operator, name)

    def op(self, other):
        return fn(self.get(), resolve(other))

    def rop(self, other):
        return fn(resolve(other), self.get())

    return op, rop


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift",
              "rshift"):
    _op, _rop = _deferred_binary(_name if _name not in ("and", "or") else _name + "_")
    setattr(Deferred, f"__{_name}__", _op)
    setattr(Deferred, f"__r{_name}__", _rop)
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(Deferred, f"__{_name}__", _deferred_binary(_name)[0])


def _deferred_unary(fn):
    return lambda self: fn(self.get())


for _name in ("neg", "pos", "abs", "invert"):
    setattr(Deferred, f"__{_name}__", _deferred_unary(getattr(operator, _name)))


def resolve(value):
    """``value`` with deferred sums replaced by their values (top level, lists, tuples and dicts)."""
    t = type(value)
    if t is Deferred:
        return value.get()
    if t is tuple or t is list:
        if any(type(v) is Deferred or type(v) in (tuple, list, dict) for v in value):
            return t(resolve(v) for v in value)
        return value
    if t is dict:
        return {k: resolve(v) for k, v in value.items()}
    return value


def holds(value, types) -> bool:
    """Is a value of ``types`` in ``value`` (top level, or nested in lists, tuples and dicts)?"""
    t = type(value)
    if t in types:
        return True
    if t is tuple or t is list:
        return any(holds(v, types) for v in value)
    if t is dict:
        return any(holds(v, types) for v in value.values())
    return False


def has_deferred(value) -> bool:
    return holds(value, (Deferred,))
