"""Tiled distributed arrays: data spread over Dask workers, used by the same compiled functions as NumPy arrays.

    with px.using(px.runtime.dask("tcp://127.0.0.1:8786")):
        X = px.tiled.random((20_000_000, 20), tiles=(8, 1), seed=0)
        w = lra(X, y, 0.1, 100)

See array.py (TiledArray and lazy per-tile chains), rules.py (which NumPy functions have tile rules), create.py;
dispatch.py for how the imports go one way.
"""
from __future__ import annotations

from .. import spmd  # noqa: F401 - loops over tiled arrays may run as SPMD segments (a loop tier)

# Every module registering a part of TiledArray's NumPy face (dispatch.py) is imported here, so that the table is
# complete before any submodule is used; kind: tiled arrays plug into the evaluator (runtime/kinds.py).
from . import common, elementwise, fallback, indexing, kind, rules  # noqa: F401
from .array import TiledArray, TileFallbackWarning
from .collectives import allgather, allreduce, broadcast
from .create import arange, from_array, from_csv, from_dask, from_npy, full, normal, ones, random, zeros

__all__ = ["TileFallbackWarning", "TiledArray", "allgather", "allreduce", "arange", "broadcast", "from_array",
           "from_csv", "from_dask", "from_npy", "full", "normal", "ones", "random", "rules", "zeros"]
