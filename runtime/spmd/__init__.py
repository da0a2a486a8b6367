"""SPMD segments: a loop over tiled arrays runs on the workers, one long-running task per worker over the row tiles
it holds, reductions over the tiled axis as collectives of a ring group (loop.py is the tier, rank.py a rank,
shard.py the value a rank works on)."""
from __future__ import annotations

from .loop import SpmdLoop, mode  # noqa: F401 - registers the tier (loop_tiers.py)
from .shard import NotSpmd, Shard  # noqa: F401
