"""A tile's task: ``TileProgram`` (the operations of a lazy chain over the tile futures it reads), submitted as one
task by ``submit_program``; task keys that name the user's line (``SITE``, ``key_for``), submission rounds, and the
shapes and dtypes of small remote results (``remember``/``meta_of``)."""
from __future__ import annotations

import contextvars
import itertools
import os
import uuid
import weakref

import numpy as np

from . import runner
from .optimize import optimize

# The call site a rule runs for (set by the evaluator): task keys, errors and warnings name the user's line.
SITE: contextvars.ContextVar = contextvars.ContextVar("phylanx_tiled_site", default=None)
# Shapes and dtypes of small remote results made by tile rules (reductions), so later rules can use them as
# task inputs without fetching them: key -> (shape, dtype).
_META: dict = {}


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


def submit_program(executor, prog: TileProgram, out, label, idx=(), where=None):
    """Submit one tile's program; returns (future, worker it was placed on)."""
    prog.ops, out = optimize(prog.ops, out)
    home = prog.home()
    if not prog.ops and out[0] == "L":
        return prog.leaves[out[1]], home  # nothing to compute: the tile is an existing one
    fut = executor.submit_task(runner.run_program, runner.Code(prog.ops), out, *prog.leaves,
                               key=key_for(label, idx, where), home=home)
    return fut, home
