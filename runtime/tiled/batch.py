"""Small results of tile reductions, computed together: the reductions a program asks for over arrays with the
same number of tiles wait (as ``Deferred`` values) until the first of them is needed, then run as one task per
tile computing every pending partial result, plus one small combine task each.

k-means asks for k masked means per iteration (``X[labels == j].mean(axis=0)`` for each j): k reductions over
the same tiles become one pass per tile instead of k. ``standardize`` asks for a mean and a std: one pass."""
from __future__ import annotations

import threading

import numpy as np

from ..executors import FUTURES
from . import tasks
from .array import Program, key_for, remember, site_info, submit_program

_PENDING: dict = {}  # (id(executor), number of tiles) -> [Deferred]
_LOCK = threading.Lock()


class Deferred:
    """A small result of a tile reduction, not submitted yet. Acts as a future (the evaluator waits for it like
    one); ``remote()`` is the Dask future once its batch has been submitted."""

    __slots__ = ("executor", "n", "partial_ref", "combine", "shape", "dtype", "future", "ev", "where",
                 "__weakref__")

    def __init__(self, executor, n, partial_ref, combine, shape, dtype, ev):
        self.executor, self.n, self.partial_ref, self.combine = executor, n, partial_ref, combine
        self.shape, self.dtype, self.future, self.ev, self.where = tuple(shape), np.dtype(dtype), None, ev, \
            site_info()

    def remote(self):
        if self.future is None:
            flush(self.executor, self.n)
        return self.future

    @property
    def key(self):
        return self.remote().key

    def done(self) -> bool:
        return self.future is not None and self.future.done()

    def cancelled(self) -> bool:
        return False

    @property
    def status(self):
        return "pending" if self.future is None else self.future.status

    def result(self, timeout=None):
        fut = self.remote()
        self.executor.wait([fut])
        return fut.result(timeout)

    def exception(self, timeout=None):
        fut = self.remote()
        self.executor.wait([fut])
        return fut.exception(timeout)

    def __repr__(self):
        return f"<Deferred {self.shape} {self.dtype}: {'pending' if self.future is None else self.future.status}>"


FUTURES.add(Deferred)  # the evaluator waits for it, passes it on, and resolves it like any future


def defer(executor, n, partial_ref, combine, shape, dtype):
    """Add a reduction to the batch of ``executor``'s reductions over ``n`` tiles. ``partial_ref(prog, k)`` adds
    tile k's partial result to a tile program; ``combine`` = (kind, axis, keepdims, ddof, dtype) for the
    combine task. Outside a compiled call the value is computed at once."""
    from .common import evaluation

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
    for k in range(n):
        prog = Program()
        refs = [d.partial_ref(prog, k) for d in items]
        out = prog.op(tasks.pack, refs, None, items[0].where)
        fut, _ = submit_program(executor, prog, out, "partials", (k,), items[0].where)
        tuples.append(fut)
    for i, d in enumerate(items):
        kind, axis, keepdims, ddof, dtype = d.combine
        d.future = executor.client.submit(tasks.combine_pick, i, kind, axis, keepdims, ddof, dtype, *tuples,
                                          key=key_for(kind, (), d.where), pure=False)
        remember(d.future, d.shape, d.dtype)
        if d.ev is not None:
            d.ev._track(d.future, ())


def flush_all():
    with _LOCK:
        keys = list(_PENDING)
    for key in keys:
        items = _PENDING.get(key)
        if items:
            flush(items[0].executor, key[1])
