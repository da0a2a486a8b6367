"""User-visible collectives on tiled arrays, after MPI's: each tile is one participant's contribution.

``allreduce(x, op)`` combines the tiles element-wise (they must have equal shapes) by a tree of tasks and leaves
the result on every worker; ``allgather(x)`` is the whole array on every worker; ``broadcast(value)`` puts a value
on every worker. Each returns a future inside a compiled call (usable by later tile tasks without moving through
the client) and the value from plain Python."""
from __future__ import annotations

import numpy as np

from . import grid, tasks
from .array import is_tiled
from .common import remote_result, submit, tree
from .create import _executor

_OPS = {"sum": "sum", "prod": "prod", "min": "min", "max": "max"}


def allreduce(x, op: str = "sum"):
    if not is_tiled(x):
        raise TypeError(f"allreduce takes a TiledArray, got {type(x).__name__}")
    if op not in _OPS:
        raise ValueError(f"allreduce: op must be one of {sorted(_OPS)}, got {op!r}")
    shapes = {tuple(b - a for a, b in grid.region(x.boundaries, idx)) for idx in grid.indices(x.boundaries)}
    if len(shapes) != 1:
        raise ValueError(f"allreduce: every tile must have the same shape, got {sorted(shapes)}")
    ex = x._executor
    fut = tree(ex, list(x.futures.flat), _OPS[op], None, True, 0, None)
    ex.replicate([fut])
    return remote_result(fut, shapes.pop(), x.dtype)


def allgather(x):
    if not is_tiled(x):
        raise TypeError(f"allgather takes a TiledArray, got {type(x).__name__}")
    ex = x._executor
    futs = x.futures
    fut = submit(ex, _assemble_all, futs.shape, *futs.flat, label="allgather")
    ex.replicate([fut])
    return remote_result(fut, tuple(int(s) for s in x.shape), x.dtype)


def _assemble_all(grid_shape, *tiles):
    blocks = np.empty(grid_shape, dtype=object)
    for i, t in zip(np.ndindex(grid_shape), tiles):
        blocks[i] = t
    return np.block(blocks.tolist()) if blocks.ndim else blocks[()]


def broadcast(value, runtime=None):
    value = np.asarray(value)
    ex = _executor(runtime)
    fut = ex.submit_task(tasks.identity, value)
    ex.replicate([fut])
    return remote_result(fut, value.shape, value.dtype)
