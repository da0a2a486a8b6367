"""Making tiled arrays on the workers: ``random normal zeros ones full arange`` (computed where they live),
``from_array`` (split and placed in blocks of tiles), ``from_dask``, ``from_npy`` (memory-mapped reads per tile) and
``from_csv`` (each tile reads its own byte range of the file).

Every tile is a task's result, never ``scatter``-ed data, so Dask keeps its lineage: a tile lost with a worker is
recomputed (``from_array`` tiles carry their data in the task, which the scheduler keeps for that purpose)."""
from __future__ import annotations

import os

import numpy as np

from phylanx_py.errors import ClusterError

from ..executors import Cluster
from ..select import current
from . import grid, tasks
from .array import TiledArray
from .tile_program import key_for


def _executor(runtime=None):
    rt = runtime or current()
    rt.check_open()
    ex = rt.executor
    if not isinstance(ex, Cluster):
        raise ClusterError(f"tiled arrays live on a Dask cluster, and the current runtime is {rt.name!r}: "
                           "create them inside `with px.using(px.runtime.dask(...)):`")
    return ex


def _workers(ex):
    workers = ex.worker_addresses()
    if not workers:
        raise ClusterError("the Dask cluster has no workers to place tiles on")
    return workers


def _build(ex, bounds, dtype, label, task_of):
    """One task per tile, placed in blocks: ``task_of(idx, region)`` -> (fn, args). Tiles in grid order go to the
    workers in consecutive runs (Phylanx's block distribution): a worker holds neighbouring rows, so an SPMD segment
    (runtime/spmd) finds each rank's block of row tiles where it runs, and a stencil's neighbours on few workers."""
    workers = _workers(ex)
    counts = grid.counts(bounds)
    futs = np.empty(counts, dtype=object)
    homes = np.empty(counts, dtype=object)
    total = int(np.prod(counts))
    for n, idx in enumerate(grid.indices(bounds)):
        fn, args = task_of(idx, grid.region(bounds, idx))
        w = workers[n * len(workers) // total]
        futs[idx] = ex.submit_task(fn, *args, key=key_for(label, idx), home=w)
        homes[idx] = w
    return TiledArray(ex, bounds, dtype, futures=futs, homes=homes)


def _shape(shape):
    return (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)


def random(shape, tiles=None, seed=None, dtype=np.float64, runtime=None) -> TiledArray:
    """Uniform [0, 1) values equal to ``np.random.Generator(np.random.PCG64(seed)).random(shape)`` for any tiling
    (each tile jumps ahead in the one stream), so a seed gives the same array however it is tiled."""
    ex = _executor(runtime)
    shape = _shape(shape)
    bounds = grid.parse(shape, tiles)
    seed = int(np.random.SeedSequence().entropy % (1 << 63)) if seed is None else seed
    return _build(ex, bounds, dtype, "random",
                  lambda idx, reg: (tasks.uniform_tile, (seed, shape, reg, np.dtype(dtype))))


def normal(shape, tiles=None, seed=None, loc=0.0, scale=1.0, dtype=np.float64, runtime=None) -> TiledArray:
    """Normal draws, one stream per tile (``SeedSequence(seed, spawn_key=tile index)``): reproducible for the
    same seed and tiling; another tiling gives other (equally distributed) values."""
    ex = _executor(runtime)
    shape = _shape(shape)
    bounds = grid.parse(shape, tiles)
    seed = int(np.random.SeedSequence().entropy % (1 << 63)) if seed is None else seed
    return _build(ex, bounds, dtype, "normal", lambda idx, reg: (
        tasks.normal_tile, (seed, idx, tuple(b - a for a, b in reg), np.dtype(dtype), loc, scale)))


def full(shape, fill_value, tiles=None, dtype=None, runtime=None) -> TiledArray:
    ex = _executor(runtime)
    shape = _shape(shape)
    dtype = np.dtype(dtype) if dtype is not None else np.asarray(fill_value).dtype
    bounds = grid.parse(shape, tiles)
    return _build(ex, bounds, dtype, "full",
                  lambda idx, reg: (tasks.full_tile, (tuple(b - a for a, b in reg), fill_value, dtype)))


def zeros(shape, tiles=None, dtype=np.float64, runtime=None) -> TiledArray:
    return full(shape, 0, tiles, dtype, runtime)


def ones(shape, tiles=None, dtype=np.float64, runtime=None) -> TiledArray:
    return full(shape, 1, tiles, dtype, runtime)


def arange(start, stop=None, step=1, tiles=None, dtype=None, runtime=None) -> TiledArray:
    if stop is None:
        start, stop = 0, start
    ex = _executor(runtime)
    n = len(range(0, int(np.ceil((stop - start) / step))))
    dtype = np.dtype(dtype) if dtype is not None else np.arange(start, start + step, step).dtype
    bounds = grid.parse((n,), tiles)
    return _build(ex, bounds, dtype, "arange", lambda idx, reg: (
        tasks.arange_tile, (start + reg[0][0] * step, start + reg[0][1] * step, step, dtype)))


def from_array(a, tiles=None, runtime=None) -> TiledArray:
    """Split a NumPy array into tiles and place them over the workers (consecutive tiles together)."""
    ex = _executor(runtime)
    a = np.asarray(a)
    bounds = grid.parse(a.shape, tiles)
    return _build(ex, bounds, a.dtype, "from_array", lambda idx, reg: (
        tasks.identity, (np.ascontiguousarray(a[tuple(slice(lo, hi) for lo, hi in reg)]),)))


def from_numpy_like(t: TiledArray, a) -> TiledArray:
    """``a`` (the result of a gathered computation on ``t``) on ``t``'s grid, or its own when shapes differ."""
    a = np.asarray(a)
    bounds = t.boundaries if a.shape == tuple(t.shape) else grid.parse(a.shape, t.tiles[:a.ndim])
    return _build(t._executor, bounds, a.dtype, "from_array", lambda idx, reg: (
        tasks.identity, (np.ascontiguousarray(a[tuple(slice(lo, hi) for lo, hi in reg)]),)))


def constant_tiles(ex, a, bounds) -> TiledArray:
    """A client-side NumPy array seen as a lazy tiled array: each tile's slice travels in the tasks using it."""
    bounds = [tuple(b) for b in bounds]

    def make(idx, prog):
        return ("C", np.ascontiguousarray(a[tuple(slice(lo, hi) for lo, hi in grid.region(bounds, idx))]))

    return TiledArray(ex, bounds, a.dtype, make=make, cheap=True)


def from_dask(d, runtime=None) -> TiledArray:
    """A dask.array's chunks as tiles: persisted on the cluster if needed; the chunk futures are reused."""
    from distributed import futures_of

    ex = _executor(runtime)
    d = ex.persist(d)
    by_key = {f.key: f for f in futures_of(d)}
    keys = np.empty(d.numblocks, dtype=object)
    for idx in np.ndindex(d.numblocks):
        k = d.__dask_keys__()
        for i in idx:
            k = k[i]
        keys[idx] = by_key[k]
    bounds = [tuple(np.cumsum((0,) + tuple(c))) for c in d.chunks]
    return TiledArray(ex, [tuple(int(x) for x in b) for b in bounds], d.dtype, futures=keys)


def from_npy(path, tiles=None, runtime=None) -> TiledArray:
    """A ``.npy`` file read by the workers, each tile through a memory map of its own region (the path must be
    readable by every worker: a shared or local file system on one machine)."""
    ex = _executor(runtime)
    path = os.path.abspath(path)
    m = np.load(path, mmap_mode="r")
    bounds = grid.parse(m.shape, tiles)
    return _build(ex, bounds, m.dtype, "from_npy", lambda idx, reg: (
        tasks.npy_tile, (path, tuple(slice(lo, hi) for lo, hi in reg))))


def from_csv(path, tiles=None, delimiter=",", dtype=np.float64, skip_header=0, runtime=None) -> TiledArray:
    """A numeric CSV file, row-tiled: each tile's task reads the rows starting in its byte range, so no process
    reads the whole file. Tile sizes are learnt from the tiles (one small round trip)."""
    ex = _executor(runtime)
    path = os.path.abspath(path)
    size = os.path.getsize(path)
    count = tiles if isinstance(tiles, int) else (tiles[0] if tiles else 1)
    cuts = grid.even(size, count)
    dtype = np.dtype(dtype)
    bytes_bounds = (tuple(cuts),)
    t = _build(ex, bytes_bounds, dtype, "from_csv", lambda idx, reg: (
        tasks.csv_tile, (path, reg[0][0], reg[0][1], delimiter, dtype, skip_header)))
    shapes = ex.gather([ex.submit_task(tasks.shape, f) for f in t._futures.flat])
    cols = max((s[1] for s in shapes if s[0]), default=0)
    rows = [s[0] for s in shapes]
    futs = np.empty((len(rows), 1), dtype=object)
    homes = np.empty((len(rows), 1), dtype=object)
    for i, (f, s) in enumerate(zip(t._futures.flat, shapes)):
        if s[0] == 0:
            f = ex.submit_task(tasks.full_tile, (0, cols), 0, dtype)
        futs[i, 0], homes[i, 0] = f, t._homes.flat[i]
    bounds = (tuple(np.cumsum([0] + rows).tolist()), (0, cols))
    return TiledArray(ex, bounds, dtype, futures=futs, homes=homes)


def like(t: TiledArray, fill_value, dtype=None) -> TiledArray:
    ex = t._executor
    dtype = np.dtype(dtype) if dtype is not None else t.dtype
    return _build(ex, t.boundaries, dtype, "full",
                  lambda idx, reg: (tasks.full_tile, (tuple(b - a for a, b in reg), fill_value, dtype)))
