"""A rank's part of a tiled array in an SPMD segment: ``Shard``, a NumPy-like value holding the rows this rank owns
(plus halo rows from its ring neighbours where a stencil reads them), and the geometry that keeps every rank's
decision the same.

Geometry. Each rank owns the rows ``[a, b)`` of the tiled axis (axis 0) of the segment's tiled inputs (``Rank``).
A shard of global length ``n`` along axis 0 describes, with three rank-independent integers:
- what it has: rows ``[a - L, b + R)`` of its own index space, clipped to ``[0, n)`` (``data`` holds them);
- what it owns: rows ``[a - t, b - t)``, clipped. Over the ranks the owned rows partition ``[0, n)`` exactly,
  so a reduction counts every row once.
A slice ``u[s:e]`` shifts all three (``L + s``, ``R - s``, ``t + s``); an element-wise result has what all its
operands have and owns what one of them owns. Every decision (which rows, whether a halo reaches) depends on
``L, R, t`` and shapes only, so all ranks take it alike and meet at the same collectives in the same order.

A *ragged* shard (``X[mask]``) holds a rank's selected rows; its global length is known after a collective.
Anything a shard cannot do exactly raises ``NotSpmd``: the segment is abandoned and the loop runs as before.
"""
from __future__ import annotations

import numpy as np

from .deferred import Deferred, has_deferred, holds, resolve, send  # noqa: F401 - used through this module too


class NotSpmd(Exception):
    """This loop (or this call in it) cannot run as an SPMD segment: the reason says why."""


# The NumPy face of a shard, filled by protocol.py (which builds on local.py and cross.py, above this module):
# "array_ufunc", "array_function", "getitem", "setitem", "inplace", "reduce", "matmul".
_IMPL: dict = {}


def implements(name: str):
    def register(fn):
        _IMPL[name] = fn
        return fn

    return register


def _binary(ufunc):
    def op(self, other):
        return _IMPL["array_ufunc"](ufunc, "__call__", (self, other), {})

    def rop(self, other):
        return _IMPL["array_ufunc"](ufunc, "__call__", (other, self), {})

    return op, rop


def _inplace(ufunc):
    def op(self, other):
        return _IMPL["inplace"](ufunc, self, other)

    return op


def _unary(ufunc):
    def op(self):
        return _IMPL["array_ufunc"](ufunc, "__call__", (self,), {})

    return op


def _reduction(kind):
    def method(self, axis=None, dtype=None, out=None, keepdims=False, ddof=0, **kw):
        if out is not None or kw:
            raise NotSpmd(f".{kind} with out= or {sorted(kw)}")
        return _IMPL["reduce"](kind, self, axis, keepdims, dtype, ddof)

    method.__name__ = kind
    return method


def _arg_reduction(kind):
    def method(self, axis=None, out=None, keepdims=False):
        if out is not None:
            raise NotSpmd(f".{kind} with out=")
        return _IMPL["reduce"](kind, self, axis, keepdims)

    method.__name__ = kind
    return method


class Rank:
    """This rank's place in the segment: its group (ring collectives), its rows ``[a, b)`` of the tiled axis,
    every rank's row counts, and what its collectives moved (for the decision's report)."""

    def __init__(self, group, rank: int, size: int, starts, counts, progress=None, name=None):
        self.group, self.rank, self.size = group, rank, size
        self.progress, self.name, self.done = progress, name, 0  # collectives finished, for the driver's watch
        self.starts, self.counts = tuple(starts), tuple(counts)
        self.a, self.b = self.starts[rank], self.starts[rank] + self.counts[rank]
        self.stats = {"allreduce": 0, "allgather": 0, "halo": 0, "values": 0, "iterations": 0, "reductions": 0}
        self.pending: list = []  # Deferred sums waiting for their allreduce
        self.made: list = []  # every Deferred made since the last settle (computed then, if nothing read it)
        self.groups: dict = {}  # per-label sums of the latest (X, labels) (cross.group_sums)
        self.lazy: list = []  # weak references to masks and selections that have an origin (local._before_change)

    def defer(self, part, finish, exact=False):
        """A sum over the ranks of ``part``, made when first used (deferred.py): ``finish(total)`` its value.
        ``exact``: the total is an integer below 2**53 (a count), so it may travel with float64 sums."""
        part = np.asarray(part)  # (np.ascontiguousarray would make a 0-d sum 1-d)
        d = Deferred(self, part if part.flags.c_contiguous else part.copy(), finish, exact)
        self.pending.append(d)
        return d

    def flush(self):
        """Every waiting sum in one message (deferred.send; the same queue, in the same order, on every rank)."""
        pending, self.pending = self.pending, []
        if pending:
            send(self, pending)

    def settle(self):
        """Send what waits, and compute every value made from sums over the ranks since the last settle, in the
        order they were made (the loop's ticker, at each iteration's start): values nobody reads are computed too,
        so their errors and warnings happen in the iteration that made them, as in NumPy."""
        self.flush()
        self.lazy = [r for r in self.lazy if r() is not None and r().origin is not None]
        made, self.made = self.made, []
        for d in made:
            d.get()

    def sum_now(self, part, exact=False):
        """The sum over the ranks of ``part``, now: it goes with the sums waiting in the queue (one message)."""
        return self.defer(part, lambda t: t, exact).get()

    def allreduce(self, values: np.ndarray, parts: int = 1) -> np.ndarray:
        """One message: ``values`` summed over the ranks (``parts``: how many reductions it carries)."""
        buf = np.ascontiguousarray(values).ravel().copy()
        self.stats["allreduce"] += 1
        self.stats["reductions"] += parts
        self.stats["values"] += buf.size
        out = self.group.allreduce(buf).reshape(np.shape(values))
        self.tick()
        return out

    def allgather(self, values: np.ndarray) -> np.ndarray:
        buf = np.ascontiguousarray(values)
        self.stats["allgather"] += 1
        self.stats["values"] += buf.size * self.size
        out = self.group.allgather(buf)
        self.tick()
        return out

    def tick(self):
        self.done += 1
        if self.progress is not None:
            self.progress[self.name] = self.done


class Shard:
    """See the module docstring. ``view``: the data belongs to another shard (a slice): it cannot be assigned
    to (its owner's halo would go stale)."""

    __array_priority__ = 200  # NumPy's operators and ufuncs defer to ours
    __slots__ = ("_data", "n", "L", "R", "t", "rank", "ragged", "view", "mutated", "origin", "__weakref__")

    def __init__(self, data, n, L, R, t, rank, ragged=None, view=False, origin=None):
        self._data, self.n, self.L, self.R, self.t, self.rank = data, n, L, R, t, rank
        self.ragged, self.view, self.mutated, self.origin = ragged, view, False, origin

    @property
    def data(self):
        """The rows this rank has; a mask ``labels == j`` and a selection made by it are made on first use (a sum
        or mean of the selection, or the mask's count, is found from the per-label sums instead: cross.group_sums).
        Both are made before the rows they read change in place (local._before_change)."""
        if self._data is None and self.origin is not None:
            if self.origin[0] == "group":
                x, mask, lo, hi = self.origin[1], self.origin[2], self.origin[5], self.origin[6]
                self._data = x.local(lo, hi)[mask.local(lo, hi)]
            elif self.origin[0] == "eq":
                self._data = self.origin[1].data == self.origin[2]  # (the labels' geometry: the same rows)
        return self._data

    @data.setter
    def data(self, value):
        self._data = value

    # ---- geometry ----------------------------------------------------------------------------------------
    @property
    def avail(self):
        if self.ragged is not None:
            return 0, self.data.shape[0]
        lo = max(0, self.rank.a - self.L)
        return lo, max(lo, min(self.n, self.rank.b + self.R))

    @property
    def own(self):
        if self.ragged is not None:
            return 0, self.data.shape[0]
        lo = max(0, self.rank.a - self.t)
        return lo, max(lo, min(self.n, self.rank.b - self.t))

    def local(self, lo, hi):
        """The rows ``[lo, hi)`` of this shard's index space (they must be available here)."""
        start, stop = self.avail
        if lo < start or hi > stop:
            raise NotSpmd(f"rows {lo}..{hi} of a tiled value are not on this rank (it has {start}..{stop})")
        return self.data[lo - start:hi - start]

    def own_data(self):
        return self.local(*self.own) if self.ragged is None else self.data

    def like(self, data, *, owned=False, view=False):
        """A shard with this one's geometry (``owned``: ``data`` holds just the owned rows)."""
        if owned and self.ragged is None:
            return Shard(data, self.n, self.t, -self.t, self.t, self.rank, view=view)
        return Shard(data, self.n, self.L, self.R, self.t, self.rank, self.ragged, view)

    def owned_rows(self, data):
        return self.like(data, owned=True)

    # ---- description -------------------------------------------------------------------------------------
    @property
    def shape(self):
        if self.n is None:  # ragged: the global row count is the sum of the ranks' counts
            # a count of rows: it goes with the sums waiting in the queue, as float64 when that is exact
            self.n = int(self.rank.sum_now(np.array([self.data.shape[0]], np.int64), exact=True)[0])
        return (self.n,) + self.data.shape[1:]

    @property
    def ndim(self):
        if self._data is None and self.origin is not None:  # a mask or selection not made yet: its source's
            return self.origin[1].ndim
        return self._data.ndim

    @property
    def dtype(self):
        if self._data is None and self.origin is not None:
            return np.dtype(np.bool_) if self.origin[0] == "eq" else self.origin[1].dtype
        return self._data.dtype

    @property
    def size(self):
        return int(np.prod(self.shape))

    @property
    def itemsize(self):
        return self.data.itemsize

    @property
    def T(self):
        if self.ndim == 1:
            return self
        if self.ndim != 2 or self.ragged is not None:
            raise NotSpmd("only a 2-D tiled value has an SPMD transpose")
        return Transposed(self)

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return f"<Shard rows {self.own} of {self.n} ({self.dtype}, rank {self.rank.rank})>"

    # ---- the NumPy face (protocol.py) -----------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _IMPL["array_ufunc"](ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _IMPL["array_function"](func, args, kwargs)

    def __getitem__(self, key):
        return _IMPL["getitem"](self, key)

    def __setitem__(self, key, value):
        _IMPL["setitem"](self, key, value)

    def __matmul__(self, other):
        return _IMPL["matmul"](self, other)

    def __rmatmul__(self, other):
        return _IMPL["matmul"](other, self)

    __add__, __radd__ = _binary(np.add)
    __sub__, __rsub__ = _binary(np.subtract)
    __mul__, __rmul__ = _binary(np.multiply)
    __truediv__, __rtruediv__ = _binary(np.true_divide)
    __floordiv__, __rfloordiv__ = _binary(np.floor_divide)
    __mod__, __rmod__ = _binary(np.remainder)
    __pow__, __rpow__ = _binary(np.power)
    __and__, __rand__ = _binary(np.bitwise_and)
    __or__, __ror__ = _binary(np.bitwise_or)
    __xor__, __rxor__ = _binary(np.bitwise_xor)
    __lshift__, __rlshift__ = _binary(np.left_shift)
    __rshift__, __rrshift__ = _binary(np.right_shift)
    __lt__, __gt__ = _binary(np.less)[0], _binary(np.greater)[0]
    __le__, __ge__ = _binary(np.less_equal)[0], _binary(np.greater_equal)[0]
    __eq__, __ne__ = _binary(np.equal)[0], _binary(np.not_equal)[0]
    __iadd__, __isub__, __imul__ = _inplace(np.add), _inplace(np.subtract), _inplace(np.multiply)
    __itruediv__, __ifloordiv__, __ipow__ = _inplace(np.true_divide), _inplace(np.floor_divide), _inplace(np.power)
    __imod__, __iand__, __ior__, __ixor__ = (_inplace(np.remainder), _inplace(np.bitwise_and),
                                             _inplace(np.bitwise_or), _inplace(np.bitwise_xor))
    __neg__, __pos__, __abs__, __invert__ = (_unary(np.negative), _unary(np.positive), _unary(np.absolute),
                                             _unary(np.invert))

    sum, prod, mean, var, std = (_reduction(k) for k in ("sum", "prod", "mean", "var", "std"))
    min, max, any, all = (_reduction(k) for k in ("min", "max", "any", "all"))
    argmin, argmax = _arg_reduction("argmin"), _arg_reduction("argmax")

    def dot(self, other):
        return _IMPL["matmul"](self, other)

    def astype(self, dtype, copy=True):
        return self.like(self.data.astype(dtype, copy=copy), view=False)

    def copy(self, order="C"):
        return self.like(self.data.copy(), view=False)

    def reshape(self, *shape, order="C"):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        shape = tuple(int(s) for s in shape)
        trail = self.data.shape[1:]
        if not shape or shape[0] not in (-1, self.n) or -1 in shape[1:] or \
                int(np.prod(shape[1:])) != int(np.prod(trail)) or order != "C":
            raise NotSpmd("a reshape that moves the tiled axis")
        return self.like(self.data.reshape((self.data.shape[0],) + shape[1:]), view=self.view)

    def ravel(self):
        if self.ndim != 1:
            raise NotSpmd("ravel of a tiled array with more than one axis")
        return self

    def flatten(self):
        return self.ravel().copy()

    # ---- what a shard never does silently ------------------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise NotSpmd("a tiled value would be turned into one NumPy array on a rank")

    def __iter__(self):
        raise NotSpmd("iterating over a tiled value")

    def __bool__(self):
        raise NotSpmd("the truth value of a tiled array")

    def __float__(self):
        raise NotSpmd("a tiled value used as a Python number")

    __int__ = __index__ = __complex__ = __float__

    __hash__ = None


class Transposed:
    """``X.T`` of a 2-D shard: only a product with it (``X.T @ r``, a reduction over the tiled axis) is defined."""

    __array_priority__ = 200
    __slots__ = ("base",)

    def __init__(self, base: Shard):
        self.base = base

    @property
    def T(self):
        return self.base

    @property
    def shape(self):
        return self.base.shape[::-1]

    @property
    def ndim(self):
        return 2

    @property
    def dtype(self):
        return self.base.dtype

    def __array__(self, dtype=None, copy=None):
        raise NotSpmd("a transposed tiled value would be turned into one NumPy array on a rank")

    def __matmul__(self, other):
        return _IMPL["matmul"](self, other)

    def __rmatmul__(self, other):
        return _IMPL["matmul"](other, self)

    def dot(self, other):
        return _IMPL["matmul"](self, other)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if ufunc is np.matmul and method == "__call__" and len(inputs) == 2 and not kwargs:
            return _IMPL["matmul"](*inputs)
        raise NotSpmd(f"np.{ufunc.__name__} on the transpose of a tiled array")

    def __array_function__(self, func, types, args, kwargs):
        if func in (np.matmul, np.dot) and len(args) == 2 and not kwargs:
            return _IMPL["matmul"](*args)
        raise NotSpmd(f"np.{getattr(func, '__name__', func)} on the transpose of a tiled array")

    def __getattr__(self, name):
        raise NotSpmd(f"the transpose of a tiled array has no SPMD .{name}")


def is_shard(x) -> bool:
    t = type(x)
    return t is Shard or t is Transposed


def global_shape(x):
    if type(x) is Shard:
        return x.shape if x.ragged is None else (None,) + x.data.shape[1:]
    return np.shape(x)
