"""TiledArray: a global shape and dtype over a grid of tiles, one Dask future per tile, resident on the workers.

This module holds the value (its state, description, persisting and gathering); its NumPy operators and methods are
in numpy_methods.py, the task a tile's chain becomes in tile_program.py.

A tiled array is either *concrete* (one future per tile) or *lazy*: a rule per tile saying how to compute it from
the tiles of other arrays (element-wise math, tile-local products, slices). Lazy chains are not submitted one
operation at a time: when something needs the tiles (a reduction, a product across tiles, the end of a compiled
call, ``to_numpy``), each tile's whole chain becomes one task, a small program run on the worker holding the
tile's data (runner.run_program). So one LRA iteration is one task per tile plus a reduction tree.

A lazy array used a second time is made concrete (persisted) first, so shared work is not repeated more than
once. Tiles are released on the workers when the last TiledArray (or lazy array) referring to them goes away,
which is Dask's reference counting of futures.
"""
from __future__ import annotations

import uuid
import weakref

import numpy as np

from . import grid
from .dispatch import implementation
from .numpy_methods import NumPyMethods
from .pickling import reduce as _reduce_tiled
from .pickling import token as _token_of_tiled
from .tile_program import TileProgram, new_submission, site_info, submit_program


class TileFallbackWarning(UserWarning):
    """A primitive without a tile rule ran on the whole array, gathered to the client."""


# A lazy chain this many operations long is computed and kept (see TiledArray.used).
MAX_DEPTH = 16


class _State:
    """What a TiledArray holds. Rules read the state, not the array object, so an in-place change (``x += 1``,
    ``u[1:-1] = ...``), which gives the array a new state, is not seen by lazy results made before it."""

    __slots__ = ("boundaries", "dtype", "futures", "make", "operands", "cheap", "uses", "homes", "where", "dist",
                 "inlined", "depth", "__weakref__")


def _state_property(name):
    return property(lambda self: getattr(self._s, name), lambda self, v: setattr(self._s, name, v))


class TiledArray(NumPyMethods):
    """A global ``shape`` and ``dtype`` split into tiles on a grid with explicit ``boundaries`` per dimension."""

    __array_priority__ = 100  # NumPy defers to our operators (ndarray + TiledArray -> TiledArray.__radd__)

    # Views (views.py), set on the arrays that have them: ``_view`` is (base, derive, write) for an array that is a
    # view of ``base`` (``x[2:8]``, ``x.T``): ``derive(base)`` makes its state from the base's, ``write(base, value)``
    # stores a new value of the view into the base. ``_views`` holds the live views of this array, refreshed when it
    # changes; ``_pinned`` the NumPy arrays that alias its gathered data (a fallback's view), which forbid changing it;
    # ``_layout`` a stand-in NumPy array with the strides NumPy would give this view (whether a reshape is a view).
    _view = None
    _views = None
    _pinned = None
    _layout = None

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

    # ---- other processes (client.submit(g, t), dask.delayed): a reference to the tiles, see pickling.py --------
    def __reduce__(self):
        return _reduce_tiled(self)

    def __dask_tokenize__(self):
        return _token_of_tiled(self)

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
        return implementation("retile")(self, grid.parse(tuple(int(s) for s in self.shape), tiles))

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

    def _become(self, other: TiledArray):
        """In-place update (``x += y``, ``x[k] = v``): this object now stands for ``other``'s tiles; lazy
        results made earlier keep reading the old state. A view stores the new value into its base instead, and
        every view of the changed array is derived again, so writes through views and to bases alias as
        NumPy's do."""
        if self._view is not None:
            base, _, write = self._view
            write(base, other)  # the base changes, and derives this view again
            return
        self._refuse_if_pinned()
        self._set_state(other._s)

    def _live_views(self) -> list:
        return [v for v in (r() for r in self._views or ()) if v is not None]

    def _set_state(self, s):
        self._s = s
        for v in self._live_views():
            v._set_state(v._view[1](self)._s)

    def _refuse_if_pinned(self):
        """A change to this array (or a view of it) while a NumPy array aliases its gathered data is refused: that
        NumPy array would not see it, and NumPy's own view would."""
        stack = [self]
        while stack:
            t = stack.pop()
            for ref, what in t._pinned or ():
                if ref() is not None:
                    raise ValueError(f"this tiled array cannot change while {what} is alive: that result is a NumPy "
                                     "view of the array's gathered data, which would not see the change (NumPy's "
                                     "view would); copy it first (np.copy), or compute it after the change")
            stack.extend(t._live_views())

    def _link(self, base: TiledArray, derive, write, layout=None):
        """Make this array a view of ``base`` (see ``_view``)."""
        self._view = (base, derive, write)
        self._layout = layout
        base._views = [r for r in base._views or () if r() is not None] + [weakref.ref(self)]
        return self

    def _pin(self, array: np.ndarray, what: str):
        """``array`` (a NumPy result of a fallback) aliases this array's gathered data: see _refuse_if_pinned."""
        self._pinned = [p for p in self._pinned or () if p[0]() is not None] + [(weakref.ref(array), what)]

    def _snapshot(self) -> TiledArray:
        """A view of the current state (what a lazy rule reads before an in-place change)."""
        return TiledArray(self._executor, None, None, state=self._s)


def _concrete_shape(shape, out):
    return tuple(int(s) if s == s else out.shape[d] for d, s in enumerate(shape))


def is_tiled(x) -> bool:
    return type(x) is TiledArray
