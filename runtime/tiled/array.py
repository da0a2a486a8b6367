"""TiledArray: a global shape and dtype over a grid of tiles, one Dask future per tile, resident on the workers.

A tiled array is either *concrete* (one future per tile) or *lazy*: a rule per tile saying how to compute it from
the tiles of other arrays (element-wise math, tile-local products, slices). Lazy chains are not submitted one
operation at a time: when something needs the tiles (a reduction, a product across tiles, the end of a compiled
call, ``to_numpy``), each tile's whole chain becomes one task, a small program run on the worker holding the
tile's data (tasks.run_program). So one LRA iteration is one task per tile plus a reduction tree.

A lazy array used a second time is made concrete (persisted) first, so shared work is not repeated more than
once. Tiles are released on the workers when the last TiledArray (or lazy array) referring to them goes away,
which is Dask's reference counting of futures.
"""
from __future__ import annotations

import contextvars
import itertools
import os
import uuid
import weakref

import numpy as np

from . import grid, tasks

# The call site a rule runs for (set by the evaluator): task keys, errors and warnings name the user's line.
SITE: contextvars.ContextVar = contextvars.ContextVar("phylanx_tiled_site", default=None)
# Shapes and dtypes of small remote results made by tile rules (reductions), so later rules can use them as
# task inputs without fetching them: key -> (shape, dtype).
_META: dict = {}
_META_REFS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


class TileFallbackWarning(UserWarning):
    """A primitive without a tile rule ran on the whole array, gathered to the client."""


def site_info():
    s = SITE.get()
    if s is None:
        return None, "tiled"
    return s[0], s[1]


def key_for(label: str, idx=(), where=None) -> str:
    loc, site_label = where if where is not None else site_info()
    where = f"@{os.path.basename(loc.filename)}:{loc.lineno}" if loc is not None else ""
    tile = "-t" + "_".join(map(str, idx)) if idx != () else ""
    return f"{site_label if loc is not None else label}{where}{tile}-{uuid.uuid4().hex[:12]}"


def remember(fut, shape, dtype):
    """Record a small remote value's shape and dtype (see _META)."""
    _META[fut.key] = (tuple(shape), np.dtype(dtype))
    weakref.finalize(fut, _META.pop, fut.key, None)
    return fut


def meta_of(fut):
    if type(fut).__name__ == "Deferred":
        return fut.shape, fut.dtype
    return _META.get(getattr(fut, "key", None))


MAX_DEPTH = 16
_SUBMISSIONS = itertools.count(1)


def new_submission() -> int:
    """An id for one round of tile tasks (a persist, a batch of reductions, a product)."""
    return next(_SUBMISSIONS)


class TileProgram:
    """The task of one output tile: the operations of a lazy chain, sharing tiles read more than once.

    A lazy array read by tasks of two different submissions (a mask used by this iteration's reductions and
    again later) is computed and kept at the second: computed inline at most twice, and tasks of one submission
    share it tile by tile without storing it (k-means' labels feed k reductions in one batch)."""

    def __init__(self, submission=None):
        self.submission = submission if submission is not None else new_submission()
        self.leaves: list = []
        self._leaf_at: dict = {}
        self.ops: list = []
        self._memo: dict = {}
        self.homes: dict = {}  # worker -> bytes of the leaves it holds

    def leaf(self, fut, home=None, nbytes=0):
        if type(fut).__name__ == "Deferred":
            fut = fut.remote()
        i = self._leaf_at.get(fut.key)
        if i is None:
            i = self._leaf_at[fut.key] = len(self.leaves)
            self.leaves.append(fut)
            if home is not None:
                self.homes[home] = self.homes.get(home, 0) + nbytes
        return ("L", i)

    def value(self, v):
        """A non-tile operand: a remote future becomes a leaf, anything else travels in the task."""
        if _is_future(v):
            return self.leaf(v)
        return ("C", v)

    def op(self, fn, args, kwargs=None, where=None):
        """Append ``fn(*args, **kwargs)``; ``where`` = (loc, label) of the user's call it comes from, captured
        when the rule ran (a lazy chain is built later, under another call site)."""
        loc, label = where if where is not None else site_info()
        self.ops.append((fn, list(args), kwargs or {}, loc, label))
        return ("N", len(self.ops) - 1)

    def tile(self, t, idx):
        key = (id(t._s), idx)
        hit = self._memo.get(key)
        if hit is None:
            s = t._s
            if s.futures is None and not s.cheap:
                if s.inlined is not None and s.inlined != self.submission:
                    t.persist()  # read again by a later round of tasks: compute it once more, and keep it
                else:
                    s.inlined = self.submission
            hit = self._memo[key] = t._tile_ref(idx, self)
        return hit

    def home(self):
        return max(self.homes, key=self.homes.get) if self.homes else None


def _is_future(v) -> bool:
    """A Dask future, or a Deferred reduction result (batch.py)."""
    name = type(v).__name__
    return (name == "Future" and hasattr(v, "key")) or name == "Deferred"


class _State:
    """What a TiledArray holds. Rules read the state, not the array object, so an in-place change (``x += 1``,
    ``u[1:-1] = ...``), which gives the array a new state, is not seen by lazy results made before it."""

    __slots__ = ("boundaries", "dtype", "futures", "make", "operands", "cheap", "uses", "homes", "where", "dist",
                 "inlined", "depth", "__weakref__")


def _state_property(name):
    return property(lambda self: getattr(self._s, name), lambda self, v: setattr(self._s, name, v))


class TiledArray:
    """A global ``shape`` and ``dtype`` split into tiles on a grid with explicit ``boundaries`` per dimension."""

    __array_priority__ = 100  # NumPy defers to our operators (ndarray + TiledArray -> TiledArray.__radd__)

    boundaries = _state_property("boundaries")
    dtype = _state_property("dtype")
    _futures = _state_property("futures")  # object ndarray over the grid, or None when lazy
    _make = _state_property("make")  # (idx, TileProgram) -> ref, when lazy
    _operands = _state_property("operands")  # the arrays ``make`` reads (kept alive; settled on reuse)
    _cheap = _state_property("cheap")  # a view-like rule (slice, transpose): recomputing it costs nothing
    _uses = _state_property("uses")
    _homes = _state_property("homes")  # worker each tile was placed on (a preference; see placement)
    _where = _state_property("where")  # the user's call that made it: names its tasks
    _dist = _state_property("dist")  # see ``dist``

    def __init__(self, executor, bounds, dtype, futures=None, make=None, operands=(), cheap=False,
                 homes=None, state=None):
        self._executor = executor
        if state is not None:
            self._s = state
            return
        self._s = s = _State()
        s.boundaries = tuple(tuple(b) for b in bounds)
        s.dtype = np.dtype(dtype)
        s.futures, s.make, s.operands, s.cheap, s.uses, s.homes = futures, make, tuple(operands), cheap, 0, homes
        s.where = site_info()
        s.dist = None
        s.inlined = None  # the submission whose tasks computed this lazy array inline (see TileProgram.tile)
        # lazy operations between this array and concrete tiles: a chain this long is computed and kept
        s.depth = 0 if make is None else (0 if cheap else 1) + max(
            (o._s.depth for o in operands if isinstance(o, TiledArray)), default=0)

    # ---- description -----------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return grid.shape_of(self.boundaries)

    @property
    def ndim(self) -> int:
        return len(self.boundaries)

    @property
    def size(self):
        s = 1
        for n in self.shape:
            s *= n
        return s

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def tiles(self) -> tuple[int, ...]:
        """Number of tiles per dimension."""
        return grid.counts(self.boundaries)

    @property
    def dist(self) -> frozenset:
        """The dimensions this array is spread along: those with more than one tile; for an array in one tile,
        its rows (or, after a transpose, the transposed rows). A result that keeps one of these dimensions
        stays tiled; one that reduces them all is small and comes back as NumPy."""
        multi = frozenset(d for d, b in enumerate(self.boundaries) if len(b) > 2)
        if multi:
            return multi
        if self._dist is not None:
            return self._dist
        return frozenset({0}) if self.boundaries else frozenset()

    @property
    def client(self):
        """The ``distributed.Client`` of the executor these tiles live on (for code driving the cluster itself:
        nn/parallel.py); the tile rules go through the executor (executors.Cluster)."""
        return self._executor.client

    @property
    def futures(self) -> np.ndarray:
        """One Dask future per tile (an object array over the tile grid); computes a lazy array first."""
        self.persist()
        return self._futures

    @property
    def placement(self) -> dict:
        """Where each tile lives now: {tile index: worker address} (asks the scheduler)."""
        futs = self.futures
        flat = [futs[idx] for idx in grid.indices(self.boundaries)]
        who = self._executor.who_has(flat)
        out = {}
        for idx, f in zip(grid.indices(self.boundaries), flat):
            ws = who.get(f.key) or ()
            out[idx] = ws[0] if ws else None
        return out

    def __repr__(self):
        shape = tuple(int(s) if s == s else None for s in self.shape)
        if self._futures is None:
            where = "not computed yet"
        else:
            try:
                workers = sorted({w for w in self.placement.values() if w is not None})
                where = ", ".join(workers) if workers else "in flight"
            except Exception:  # noqa: BLE001 - a repr must not fail because the scheduler is gone
                where = "unknown"
        return (f"TiledArray(shape={shape}, dtype={self.dtype}, tiles={self.tiles}, "
                f"placement={where})")

    def __len__(self):
        return int(self.shape[0])

    __hash__ = None

    # ---- lazy rules ------------------------------------------------------------------------------------
    def _tile_ref(self, idx, prog: TileProgram):
        if self._futures is not None:
            fut = self._futures[idx]
            home = self._homes[idx] if self._homes is not None else None
            return prog.leaf(fut, home, self._tile_bytes(idx))
        return self._make(idx, prog)

    def _tile_bytes(self, idx):
        if not grid.known(self.boundaries):
            return 0
        n = self.dtype.itemsize
        for (a, b) in grid.region(self.boundaries, idx):
            n *= b - a
        return n

    def used(self) -> TiledArray:
        """What a new rule reading this array holds on to: a view of its current state (see _State). A lazy
        chain longer than ``MAX_DEPTH`` is computed and kept here (Jacobi's in-place updates would otherwise
        grow one chain over every iteration)."""
        self._uses += 1
        if self._futures is None and self._s.depth >= MAX_DEPTH:
            self.persist()
        return TiledArray(self._executor, None, None, state=self._s)

    def persist(self, wait: bool = False):
        """Compute a lazy array: one task per tile running its whole chain; the array becomes concrete."""
        if self._futures is None:
            futs = np.empty(grid.counts(self.boundaries), dtype=object)
            homes = np.empty(futs.shape, dtype=object)
            submission = new_submission()
            for idx in grid.indices(self.boundaries):
                prog = TileProgram(submission)
                out = self._make(idx, prog)
                futs[idx], homes[idx] = submit_program(self._executor, prog, out, "tile", idx, self._where)
            self._futures, self._homes = futs, homes
            self._make, self._operands, self._s.depth = None, (), 0
        if wait:
            self._executor.wait(list(self._futures.flat))
        return self

    # ---- gathering -------------------------------------------------------------------------------------
    def to_numpy(self) -> np.ndarray:
        """The whole array on the client (only what this array covers: ``t[:5].to_numpy()`` fetches 5 rows)."""
        futs = self.futures
        values = self._executor.gather(list(futs.flat))
        blocks = np.empty(futs.shape, dtype=object)
        for i, v in zip(np.ndindex(futs.shape), values):
            blocks[i] = np.asarray(v)
        if blocks.size == 1:
            out = blocks.flat[0]
        else:
            out = np.block(blocks.tolist()) if self.ndim else blocks.flat[0]
        return np.asarray(out, dtype=self.dtype).reshape(_concrete_shape(self.shape, out))

    def __array__(self, dtype=None, copy=None):
        a = self.to_numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def to_dask(self):
        """A dask.array over the same tile futures (no copy, no new tasks)."""
        import dask.array as da
        from dask.highlevelgraph import HighLevelGraph

        if not grid.known(self.boundaries):
            raise ValueError("to_dask needs known tile sizes (this array came from a boolean mask)")
        futs = self.futures
        name = "tiled-" + uuid.uuid4().hex
        graph = {(name,) + idx: futs[idx] for idx in grid.indices(self.boundaries)}
        chunks = tuple(tuple(b[i + 1] - b[i] for i in range(len(b) - 1)) for b in self.boundaries)
        return da.Array(HighLevelGraph.from_collections(name, graph, dependencies=[]), name, chunks,
                        dtype=self.dtype)

    def retile(self, tiles) -> TiledArray:
        """The same values on another tile grid (tile counts or sizes per dimension, as in ``from_array``)."""
        from .indexing import retile

        return retile(self, grid.parse(tuple(int(s) for s in self.shape), tiles))

    def copy(self):
        return self.map_tiles(np.copy, cheap=False)

    def map_tiles(self, fn, dtype=None, cheap=False, **kwargs):
        """``fn`` applied to every tile (tile shape unchanged): a lazy array."""
        src = self.used()
        where = site_info()

        def make(idx, prog, src=src):
            return prog.op(fn, [prog.tile(src, idx)], kwargs, where)

        return TiledArray(self._executor, self.boundaries, dtype or self.dtype, make=make, operands=(self,),
                          cheap=cheap)

    # ---- NumPy protocols: the rules in rules.py --------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from . import rules

        return rules.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from . import rules

        return rules.array_function(func, args, kwargs)

    def __getitem__(self, key):
        from . import indexing

        return indexing.getitem(self, key)

    def __setitem__(self, key, value):
        from . import indexing

        indexing.setitem(self, key, value)

    def __iter__(self):
        from . import rules

        return iter(rules.fallback("iter", lambda a: list(a), (self,), {}))

    def __bool__(self):
        if self.size != 1:
            raise ValueError("The truth value of an array with more than one element is ambiguous. "
                             "Use a.any() or a.all()")
        return bool(self.to_numpy())

    def __float__(self):
        return float(self.to_numpy())

    def __int__(self):
        return int(self.to_numpy())

    def _become(self, other: TiledArray):
        """In-place update (``x += y``, ``x[k] = v``): this object now stands for ``other``'s tiles; lazy
        results made earlier keep reading the old state."""
        self._s = other._s

    def _snapshot(self) -> TiledArray:
        """A view of the current state (what a lazy rule reads before an in-place change)."""
        return TiledArray(self._executor, None, None, state=self._s)


def _concrete_shape(shape, out):
    return tuple(int(s) if s == s else out.shape[d] for d, s in enumerate(shape))


def submit_program(executor, prog: TileProgram, out, label, idx=(), where=None):
    """Submit one tile's program; returns (future, worker it was placed on)."""
    from .optimize import optimize

    prog.ops, out = optimize(prog.ops, out)
    home = prog.home()
    if not prog.ops and out[0] == "L":
        return prog.leaves[out[1]], home  # nothing to compute: the tile is an existing one
    fut = executor.submit_task(tasks.run_program, tasks.Code(prog.ops), out, *prog.leaves,
                               key=key_for(label, idx, where), home=home)
    return fut, home


def is_tiled(x) -> bool:
    return type(x) is TiledArray


# ---- operators and methods: the NumPy functions, so they take the same rules --------------------------------
def _binary(ufunc):
    def op(self, other):
        return ufunc(self, other)

    def rop(self, other):
        return ufunc(other, self)

    return op, rop


for _name, _uf in {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
                   "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power, "matmul": np.matmul,
                   "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor, "lshift": np.left_shift,
                   "rshift": np.right_shift}.items():
    _op, _rop = _binary(_uf)
    setattr(TiledArray, f"__{_name}__", _op)
    setattr(TiledArray, f"__r{_name}__", _rop)
for _name, _uf in {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
                   "eq": np.equal, "ne": np.not_equal}.items():
    setattr(TiledArray, f"__{_name}__", _binary(_uf)[0])
for _name, _uf in {"neg": np.negative, "pos": np.positive, "abs": np.absolute, "invert": np.invert}.items():
    setattr(TiledArray, f"__{_name}__", lambda self, _uf=_uf: _uf(self))


def _inplace(ufunc):
    def iop(self, other):
        self._become(ufunc(self._snapshot(), other))
        return self

    return iop


for _name, _uf in {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
                   "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power}.items():
    setattr(TiledArray, f"__i{_name}__", _inplace(_uf))


def _method(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    method.__name__ = fn.__name__
    return method


for _fn in (np.sum, np.mean, np.prod, np.min, np.max, np.any, np.all, np.var, np.std, np.argmin, np.argmax,
            np.dot, np.ravel, np.clip, np.squeeze, np.cumsum, np.round, np.nonzero):
    setattr(TiledArray, _fn.__name__, _method(_fn))
TiledArray.flatten = _method(np.ravel)


def _transpose(self, *axes):
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    return np.transpose(self, axes or None)


def _reshape(self, *shape, order="C"):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return np.reshape(self, shape)


def _astype(self, dtype, copy=True):
    from .elementwise import astype

    return astype(self, dtype)


TiledArray.transpose = _transpose
TiledArray.T = property(lambda self: np.transpose(self))
TiledArray.reshape = _reshape
TiledArray.astype = _astype
