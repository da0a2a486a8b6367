"""Small results of tile reductions, computed together: the reductions a program asks for over arrays with the
same number of tiles wait (as ``Deferred`` values) until the first of them is needed, then run as one task per
tile computing every pending partial result, plus one small combine task each.

k-means asks for k masked means per iteration (``X[labels == j].mean(axis=0)`` for each j): k reductions over
the same tiles become one pass per tile instead of k. ``standardize`` asks for a mean and a std: one pass."""
from __future__ import annotations

import operator
import threading

import numpy as np

from ..alignment import aligned_values
from ..executors import FUTURES
from . import tasks
from .common import evaluation
from .tile_program import TileProgram, key_for, new_submission, remember, site_info, submit_program

SPLIT_EVERY = 8  # tiles' partial results per combine task
_PENDING: dict = {}  # (id(executor), number of tiles) -> [Deferred]
_LOCK = threading.Lock()


class _Batch:
    """One submitted batch: a task per tile computing every item's partial result, and one task combining
    them all (its value is the tuple of the items' results: fetched once however many items are read)."""

    __slots__ = ("executor", "future", "items", "_values", "_lock")

    def __init__(self, executor, future, items):
        self.executor, self.future, self.items, self._values = executor, future, items, None
        self._lock = threading.Lock()

    def values(self):
        with self._lock:
            if self._values is None:
                self.executor.wait([self.future])
                self._values = aligned_values(self.future.result())
            return self._values


class Deferred:
    """A small result of a tile reduction, not submitted yet. Acts as a future (the evaluator waits for it like
    one); ``remote()`` is a Dask future of it (for tasks that take it as an input)."""

    __slots__ = ("executor", "n", "partial_ref", "combine", "shape", "dtype", "batch", "index", "future", "ev",
                 "where", "__weakref__")

    def __init__(self, executor, n, partial_ref, combine, shape, dtype, ev):
        self.executor, self.n, self.partial_ref, self.combine = executor, n, partial_ref, combine
        self.shape, self.dtype, self.ev, self.where = tuple(shape), np.dtype(dtype), ev, site_info()
        self.batch = self.index = self.future = None

    def _submitted(self) -> _Batch:
        if self.batch is None:
            flush(self.executor, self.n)
        return self.batch

    def remote(self):
        if self.future is None:
            batch = self._submitted()
            self.future = self.executor.submit_task(operator.getitem, batch.future, self.index,
                                                    key=key_for("item", (), self.where))
            remember(self.future, self.shape, self.dtype)
        return self.future

    @property
    def key(self):
        return self.remote().key

    def done(self) -> bool:
        return self.batch is not None and self.batch.future.done()

    def cancelled(self) -> bool:
        return False

    @property
    def status(self):
        return "pending" if self.batch is None else self.batch.future.status

    def result(self, timeout=None):
        return self._submitted().values()[self.index]

    def exception(self, timeout=None):
        fut = self._submitted().future
        self.executor.wait([fut])
        return fut.exception(timeout)

    def __repr__(self):
        return f"<Deferred {self.shape} {self.dtype}: {self.status}>"


FUTURES.add(Deferred)  # the evaluator waits for it, passes it on, and resolves it like any future


def defer(executor, n, partial_ref, combine, shape, dtype):
    """Add a reduction to the batch of ``executor``'s reductions over ``n`` tiles. ``partial_ref(prog, k)`` adds
    tile k's partial result to a tile program; ``combine`` = (kind, axis, keepdims, ddof, dtype) for the
    combine task. Outside a compiled call the value is computed at once."""
    ev = evaluation()
    d = Deferred(executor, n, partial_ref, combine, shape, dtype, ev)
    with _LOCK:
        _PENDING.setdefault((id(executor), n), []).append(d)
    if ev is None:
        return d.result()
    return d


def flush(executor, n):
    with _LOCK:
        items = _PENDING.pop((id(executor), n), [])
    if not items:
        return
    tuples = []
    submission = new_submission()
    for k in range(n):
        prog = TileProgram(submission)
        refs = [d.partial_ref(prog, k) for d in items]
        out = prog.op(tasks.pack, refs, None, items[0].where)
        fut, _ = submit_program(executor, prog, out, "partials", (k,), items[0].where)
        tuples.append(fut)
    where = items[0].where
    label = "+".join(sorted({d.combine[0] for d in items}))
    specs = [d.combine for d in items]
    while len(tuples) > SPLIT_EVERY:  # many tiles: a tree of partial combines, then the last one finishes
        tuples = [executor.submit_task(tasks.combine_tuples, specs, *tuples[i:i + SPLIT_EVERY],
                                       key=key_for(f"{label}-combine", (), where))
                  for i in range(0, len(tuples), SPLIT_EVERY)]
    fut = executor.submit_task(tasks.combine_all, specs, *tuples, key=key_for(label, (), where))
    batch = _Batch(executor, fut, items)
    for i, d in enumerate(items):
        d.batch, d.index = batch, i
    evs = {id(d.ev): d.ev for d in items if d.ev is not None}
    for ev in evs.values():
        ev._track(fut, ())


def discard(ev):
    """Forget the reductions ``ev`` asked for and never needed (its result is resolved by now): they must not
    keep their arrays' tiles alive on the workers."""
    with _LOCK:
        for key in list(_PENDING):
            kept = [d for d in _PENDING[key] if d.ev is not ev]
            if kept:
                _PENDING[key] = kept
            else:
                del _PENDING[key]


def flush_all():
    with _LOCK:
        keys = list(_PENDING)
    for key in keys:
        items = _PENDING.get(key)
        if items:
            flush(items[0].executor, key[1])
