"""The executor protocol (``Executor``, and ``Cluster`` for executors with workers of their own) and the two
local executors: synchronous, and a local pool of threads.

The evaluator (runtime/evaluation.py) speaks to executors through ``Executor`` only. ``submit(site, args, kwargs)``
takes arguments that may be futures (also inside lists/tuples/dicts) and returns a future of
``site(*resolved_args, **resolved_kwargs)``; the task starts only when its inputs are done, so no pool thread
ever blocks waiting for another task (no deadlock with a bounded pool). The Dask executor lives in
runtime/dask_runtime.py (distributed is imported only when it is used).
"""
from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import Future
from typing import Any, Protocol, runtime_checkable

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


class ClosedError(RuntimeError):
    """A closed runtime was used (a RuntimeError, as Python's closed executors and files raise)."""


def closed_error(name: str) -> ClosedError:
    """What using a closed runtime named ``name`` raises: a call, a task its executor is asked for, a tiled array
    made on it or an operation on one (base.Runtime.close)."""
    return ClosedError(f"<phylanx runtime {name}: closed> is closed")


@runtime_checkable
class Executor(Protocol):
    """What the evaluator asks of an executor: SynchronousExecutor, LocalPoolExecutor, dask_runtime.DaskExecutor.

    Futures: an executor makes futures of the types in ``future_types`` (added to ``FUTURES`` when the executor
    is made, so the evaluator and generated code recognise them) and also accepts, wherever it takes a future,
    concurrent.futures futures and batched tile reductions (runtime/tiled/batch.py ``Deferred``).
    Optional: ``start_profile(ev)`` / ``collect_profile(ev)`` report per-task figures under ``px.profile()``
    (runtime/base.py looks for them)."""

    name: str  # shown in the runtime's repr and the profile
    workers: int  # how many tasks can run at once
    callbacks: bool  # futures take cheap done-callbacks (else the evaluator polls them: Evaluation._track)
    shares_results: bool  # result() returns the task's object itself (else a new copy each time: memoised)
    future_types: tuple  # the types of the futures ``submit`` returns

    def submit(self, site, args: tuple, kwargs: dict, ev=None) -> Any:
        """A future of ``site(*args, **kwargs)`` with futures among the arguments replaced by their results.
        ``site`` is a runtime.code.CallSite (callable; ``.loc`` and ``.prim.label`` name the task); ``ev`` is
        the Evaluation asking (for per-call state such as uploads), or None."""

    def result(self, fut) -> Any:
        """The future's value (raising its error), waiting for it without hanging on a dead cluster."""

    def gather(self, value) -> Any:
        """``value`` with every future in it (also nested in lists/tuples/dicts) replaced by its result."""

    def wait(self, futures) -> None:
        """Return when every one of ``futures`` is done (failed or not); raises no task's error."""

    def failed(self, fut) -> bool:
        """Whether a done future ended with an error (a cancelled one does not count)."""

    def close(self) -> None:
        """Release what this executor started (threads, a client and cluster it made)."""


@runtime_checkable
class Cluster(Protocol):
    """The cluster extension of ``Executor``: what tiled arrays (runtime/tiled/) and segments (runtime/segments/) ask
    of an executor whose tasks run on workers that keep their results (dask_runtime.DaskExecutor). ``home`` is a
    worker address the task should run on, a preference: when that worker is gone the task runs elsewhere."""

    def submit_task(self, fn, *args, key: str | None = None, home: str | None = None, pinned: bool = False) -> Any:
        """A remote future of ``fn(*args)`` (futures among ``args`` resolved on the worker), never cached by
        value; ``key`` names the task (None: a fresh name); ``pinned``: run on ``home`` only, never elsewhere."""

    def worker_addresses(self) -> list:
        """The workers' addresses, sorted."""

    def who_has(self, futures) -> dict:
        """{future key: [addresses of the workers holding its result]}."""

    def replicate(self, futures) -> None:
        """Copy the futures' results to every worker."""

    def persist(self, collection) -> Any:
        """A dask collection with its graph computed on the cluster (its chunks' futures held)."""

    def submit_ranks(self, fn, specs) -> list:
        """The ranks of a segment (runtime/segments/): remote futures of ``fn(*args)`` for each (key, worker, args)
        of ``specs``, each held to its worker (never run elsewhere), sent together so that they start together."""

    # What a segment's driver asks besides (runtime/segments/): none of these raises because the runtime was closed
    # or its scheduler lost, since they are asked while a segment is given up or its failure is told apart.
    def connected(self) -> bool:
        """Whether the connection to the scheduler is up (not closed, not reconnecting)."""

    def connection_lost(self) -> str | None:
        """What happened to the scheduler connection (asked now, never remembered), or None while it is up."""

    def live_workers(self) -> dict:
        """The workers the scheduler has now, {address: info}, asked of the scheduler itself ({} when it is gone)."""

    def run_on_workers(self, fn, *args, workers=None, on_error: str = "raise") -> dict:
        """{address: ``fn(*args)``} run at once on each of ``workers`` (None: all), outside the task graph;
        ``on_error``: "raise" the first error, "return" it as that worker's value, or "ignore" (leave it out)."""

    def cancel(self, futures) -> None:
        """Cancel these futures' tasks (a running one stops being waited for; its result is dropped)."""

    def wait_within(self, futures, timeout: float) -> None:
        """Wait up to ``timeout`` s for every one of ``futures``: TimeoutError past it, distributed's
        FuturesCancelledError when one was cancelled (its worker died with its data)."""

    def gather_within(self, futures, timeout: float) -> list:
        """The futures' results: TimeoutError when they are not all fetched within ``timeout`` s."""

    def scatter_within(self, value, timeout: float) -> Any:
        """A future holding ``value`` on a worker the scheduler picks: TimeoutError or OSError past ``timeout`` s."""

    def adopt(self, who_has: dict, nbytes: dict) -> dict:
        """{key: a finished remote future} of results that workers already hold outside any task (``who_has``: key
        -> [worker], ``nbytes``: key -> bytes): the ranks' stored outputs of a directly started SPMD segment."""

    def subscribe(self, topic: str, handler) -> None:
        """Call ``handler(event)`` (on the client's event loop) for every event the workers log on ``topic``
        (``Worker.log_event``): a training span's epochs (training/span.py)."""

    # For connections of the client's own to the workers (the ring ports' requests, runtime/segments/service.py)
    def connection_args(self) -> dict:
        """What ``distributed.comm.connect`` takes to reach a worker as the client does (its security)."""

    def run_on_loop(self, coro) -> Any:
        """A concurrent.futures.Future of coroutine ``coro`` run on the client's event loop."""

    def call_on_loop(self, fn) -> None:
        """Call ``fn()`` soon on the client's event loop (not waited for)."""


class _LocalFutures:
    """What the evaluator asks of any executor about its futures; local ones are concurrent.futures."""

    callbacks = True  # done-callbacks are cheap and run on our own threads
    shares_results = True  # a future's result is the object itself, not a copy
    future_types = (Future,)

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
    _closed = False

    def submit(self, fn, args, kwargs, ev=None) -> Future:
        fut = Future()
        try:
            if self._closed:  # a call still running when its runtime closed: it stops here
                raise closed_error(self.name)
            fut.set_result(fn(*substitute(args), **substitute(kwargs)))
        except BaseException as e:  # noqa: BLE001 - the future carries it to whoever waits
            fut.set_exception(e)
        return fut

    def close(self):
        self._closed = True


class LocalPoolExecutor(_LocalFutures):
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
            self._enqueue(run)

    def _enqueue(self, run):
        # The check and the put are one step under the lock close() takes: a task put after close()'s stop
        # marks would wait in the queue for a thread that never comes, and whoever waits for it would hang (a
        # cancelled lazy call's driver did, and the process could not exit).
        with self._lock:
            if not self._closed:
                self._queue.put(run)
                return
        run()  # closed: no thread takes it from the queue now; run() fails its future here

    def submit(self, fn, args, kwargs, ev=None) -> Future:
        out = Future()
        if self._closed:  # a call still running when its runtime closed: it stops at its next task
            out.set_exception(closed_error(self.name))
            return out
        if not self._threads:
            self._start()
        deps: list[Future] = []
        collect(args, deps)
        collect(kwargs, deps)
        # The inputs are dropped as soon as the task has read them: the input futures hold this task (through
        # their done-callbacks), so keeping them here would form cycles that keep every intermediate array of
        # a call alive until the garbage collector runs.
        inputs = [args, kwargs]

        def run():
            if self._closed:  # queued when the runtime closed: its waiter hears so, the thread moves on
                inputs.clear()
                out.set_exception(closed_error(self.name))
                return
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
            self._enqueue(run)
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
