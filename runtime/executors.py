"""Executors: one small protocol (``submit``, ``ready``, ``result``) over which the evaluator runs the tree.

``submit(fn, args, kwargs)`` takes arguments that may be futures (also inside lists/tuples/dicts) and returns a
future of ``fn(*resolved_args, **resolved_kwargs)``; the task starts only when its inputs are done, so no pool
thread ever blocks waiting for another task (no deadlock with a bounded pool).
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

PENDING = Future  # the type the evaluator checks for: a value that is not there yet


def collect(value, out: list) -> None:
    """Append every Future found in ``value`` (top level or nested in list/tuple/dict) to ``out``."""
    t = type(value)
    if t is Future:
        out.append(value)
    elif t is list or t is tuple:
        for v in value:
            collect(v, out)
    elif t is dict:
        for v in value.values():
            collect(v, out)


def substitute(value):
    """``value`` with every Future replaced by its result (raises the first failure).

    Lists and dicts are updated in place, so a list the program built keeps its identity (aliases see it)."""
    t = type(value)
    if t is Future:
        return value.result()
    if t is list:
        for i, v in enumerate(value):
            if type(v) in _CONTAINERS:
                value[i] = substitute(v)
        return value
    if t is tuple:
        return tuple(substitute(v) if type(v) in _CONTAINERS else v for v in value)
    if t is dict:
        for k, v in value.items():
            if type(v) in _CONTAINERS:
                value[k] = substitute(v)
        return value
    return value


_CONTAINERS = {Future, list, tuple, dict}


class SynchronousExecutor:
    """Runs every task at once in the calling thread: for debugging (tracebacks stay in one thread)."""

    name = "synchronous"
    workers = 1

    def submit(self, fn, args, kwargs) -> Future:
        fut = Future()
        try:
            fut.set_result(fn(*substitute(args), **substitute(kwargs)))
        except BaseException as e:  # noqa: BLE001 - the future carries it to whoever waits
            fut.set_exception(e)
        return fut

    def close(self):
        pass


class ThreadPoolExecutorRuntime:
    """A local thread pool; tasks are launched when their input futures complete (dataflow)."""

    name = "local"

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="phylanx")
        self._lock = threading.Lock()

    def submit(self, fn, args, kwargs) -> Future:
        out = Future()
        deps: list[Future] = []
        collect(args, deps)
        collect(kwargs, deps)

        def run():
            try:
                a, k = substitute(args), substitute(kwargs)
            except BaseException as e:  # noqa: BLE001 - an input failed: pass its error on unchanged
                out.set_exception(e)
                return
            try:
                out.set_result(fn(*a, **k))
            except BaseException as e:  # noqa: BLE001
                out.set_exception(e)

        if not deps:
            self._pool.submit(run)
            return out
        remaining = [len(deps)]
        lock = self._lock

        def on_done(_):
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                self._pool.submit(run)

        for d in deps:
            d.add_done_callback(on_done)
        return out

    def close(self):
        self._pool.shutdown(wait=False, cancel_futures=True)
