"""Executors: one small protocol (``submit``, ``ready``, ``result``) over which the evaluator runs the tree.

``submit(fn, args, kwargs)`` takes arguments that may be futures (also inside lists/tuples/dicts) and returns a
future of ``fn(*resolved_args, **resolved_kwargs)``; the task starts only when its inputs are done, so no pool
thread ever blocks waiting for another task (no deadlock with a bounded pool).
"""
from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import Future

# The types of values that are not there yet. Generated code tests ``type(x) in FUTURES`` (as fast as ``is``);
# the Dask runtime adds distributed.Future when it is first used.
FUTURES: set[type] = {Future}


def collect(value, out: list, types=FUTURES) -> None:
    """Append every future (or value of one of ``types``) found in ``value`` (top level or nested in
    list/tuple/dict) to ``out``."""
    t = type(value)
    if t in types:
        out.append(value)
    elif t is list or t is tuple:
        for v in value:
            collect(v, out, types)
    elif t is dict:
        for v in value.values():
            collect(v, out, types)


def _result(fut):
    return fut.result()


def substitute(value, get=_result):
    """``value`` with every future replaced by ``get(future)`` (default: its result, raising the first failure).

    Lists and dicts are updated in place, so a list the program built keeps its identity (aliases see it)."""
    t = type(value)
    if t in FUTURES:
        return get(value)
    if t is list:
        for i, v in enumerate(value):
            if type(v) in _CONTAINERS or type(v) in FUTURES:
                value[i] = substitute(v, get)
        return value
    if t is tuple:
        return tuple(substitute(v, get) if type(v) in _CONTAINERS or type(v) in FUTURES else v for v in value)
    if t is dict:
        for k, v in value.items():
            if type(v) in _CONTAINERS or type(v) in FUTURES:
                value[k] = substitute(v, get)
        return value
    return value


_CONTAINERS = {list, tuple, dict}


class _LocalFutures:
    """What the evaluator asks of any executor about its futures; local ones are concurrent.futures."""

    callbacks = True  # done-callbacks are cheap and run on our own threads
    shares_results = True  # a future's result is the object itself, not a copy

    def result(self, fut):
        return fut.result()

    def gather(self, value):
        return substitute(value)

    def wait(self, futures):
        for f in futures:
            f.exception()

    def failed(self, fut) -> bool:
        return not fut.cancelled() and fut.exception() is not None


class SynchronousExecutor(_LocalFutures):
    """Runs every task at once in the calling thread: for debugging (tracebacks stay in one thread)."""

    name = "synchronous"
    workers = 1

    def submit(self, fn, args, kwargs, ev=None) -> Future:
        fut = Future()
        try:
            fut.set_result(fn(*substitute(args), **substitute(kwargs)))
        except BaseException as e:  # noqa: BLE001 - the future carries it to whoever waits
            fut.set_exception(e)
        return fut

    def close(self):
        pass


class ThreadPoolExecutorRuntime(_LocalFutures):
    """A local pool of worker threads running tasks as their inputs complete (dataflow), work-first.

    When a task completes and thereby readies a dependent task, that task runs next on the *same* thread
    (HPX's work-first policy): a chain of array operations stays on one core and one malloc arena, instead of
    bouncing between threads (measured: a 2e6x20 LRA ran 3.3x slower with hand-offs than with continuations).
    Further tasks it readies go to the shared queue, so independent branches still run in parallel.
    """

    name = "local"

    def __init__(self, workers: int | None = None):
        self.workers = workers or os.cpu_count() or 1
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def _start(self):
        with self._lock:
            if self._threads or self._closed:
                return
            for i in range(self.workers):
                t = threading.Thread(target=self._work, name=f"phylanx-{i}", daemon=True)
                t.start()
                self._threads.append(t)

    def _work(self):
        slot = self._local.slot = [None]
        while True:
            run = self._queue.get()
            if run is None:
                return
            while run is not None:
                slot[0] = None
                run()  # completing its future may put a ready continuation into ``slot``
                run = slot[0]

    def _ready(self, run):
        slot = getattr(self._local, "slot", None)
        if slot is not None and slot[0] is None:
            slot[0] = run
        else:
            self._queue.put(run)

    def submit(self, fn, args, kwargs, ev=None) -> Future:
        if not self._threads:
            self._start()
        out = Future()
        deps: list[Future] = []
        collect(args, deps)
        collect(kwargs, deps)
        # The inputs are dropped as soon as the task has read them: the input futures hold this task (through
        # their done-callbacks), so keeping them here would form cycles that keep every intermediate array of
        # a call alive until the garbage collector runs.
        inputs = [args, kwargs]

        def run():
            try:
                a, k = substitute(inputs[0]), substitute(inputs[1])
            except BaseException as e:  # noqa: BLE001 - an input failed: pass its error on unchanged
                inputs.clear()
                out.set_exception(e)
                return
            inputs.clear()
            try:
                result = fn(*a, **k)
            except BaseException as e:  # noqa: BLE001
                del a, k
                out.set_exception(e)
                return
            del a, k
            out.set_result(result)

        if not deps:
            self._queue.put(run)
            return out
        remaining = [len(deps)]
        lock = self._lock

        def on_done(_):
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                self._ready(run)

        for d in deps:
            d.add_done_callback(on_done)
        return out

    def close(self):
        with self._lock:
            self._closed = True
            threads, self._threads = self._threads, []
        for _ in threads:
            self._queue.put(None)
