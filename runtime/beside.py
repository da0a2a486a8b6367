"""Work done beside compiled calls: one daemon thread that yields to them.

Why: a compiled function's first call used to translate the function, generate the tree's code and lower its first
signature for the native tier before running anything: 7-10 ms of Python on the held-out scalar loop, whose plain
call takes 3.3 ms, so the first call of a process took 3.2x the plain function's time (issue 33: no call more than
10% slower). Now that first call runs the plain function (the answer by definition, promise 1), and the work is a
job here (decorator.py: ``CompiledFunction._beside``); the calls after it run the plain function too until the job
is done.

How the thread yields: it runs its jobs with a trace function (``sys.settrace``, which is the calling thread's
own), called at each Python call, that cuts its work into slices of ``SLICE`` seconds and sleeps after each. The
interpreter lock makes every slice time the program's other threads cannot run Python, and more: a thread that
gives the lock up for a moment (each NumPy operation on more than a few hundred elements does) finds the worker
holding it when it returns, and waits for the slice's end and for the operating system to wake it (~0.05-0.1 ms).
With slices of 0.15 ms and sleeps of 0.01 ms, NPBench's resnet lost 90-150 ms of its first six calls (its own and
NumPy's between them, 11 ms each) to a job of 60-130 ms of work: every NumPy operation of the caller became a hand-
over. So the worker sleeps ``PAUSE`` after each slice while the process's other threads use the processor (their
CPU time during its last sleep, over that sleep, is over ``ACTIVE``; or a call counted by ``busy()`` runs): it then
has a tenth of the time, in slices long enough that the hand-overs cost little (resnet: 5-16 ms lost, the job's
wall time 0.6 s instead of 0.2-0.4 s). While they do not (the program waits: for I/O, for a lock, for this
worker's result), it sleeps ``YIELD`` after each slice, so that a thread that starts running again gets the lock
within a slice. The trace function sees only Python calls: one C function longer than a slice delays the others
by that much (the compile of the tree's code: up to 15 ms on NPBench's kernels; jobs do not compile or load native
code, which is the compile process's and the loop tiers' work).

Nothing waits on the worker forever: a caller that needs a job's result now (an error to locate, ``explain()``)
leaves ``busy()`` first and waits inside ``waiting()``, so the worker runs at full speed meanwhile.
``PHYLANX_BESIDE=0`` turns this off: every first call translates before it runs, as before (the test suite's
differential tests do, so that each call they make goes through the tiers they test)."""
from __future__ import annotations

import collections
import os
import sys
import threading
import time
from concurrent.futures import Future

from phylanx_py.primitives.environ import OFF, raw_reader

SLICE = 5e-4  # seconds the worker runs before it sleeps
PAUSE = 4.5e-3  # seconds it then sleeps while other threads run (a tenth of the time is the worker's)
YIELD = 1e-5  # seconds it then sleeps while none does (the lock for whoever waits for it)
ACTIVE = 0.3  # the other threads' CPU seconds per second of the worker's last sleep above which they "run"

_raw = raw_reader("PHYLANX_BESIDE")
# busy: a call of some thread is running (``_busy``); slice: the current slice's start; active: whether the process's
# other threads ran during the worker's last sleep (``_hook``); waiting: callers waiting for a result (``waiting``)
_state = {"busy": False, "slice": 0.0, "thread": None, "active": True, "waiting": 0}
_busy: dict = {}  # thread id -> calls of that thread running now
_lock = threading.Lock()
_jobs: collections.deque = collections.deque()
_wake = threading.Condition(_lock)


def enabled() -> bool:
    return _raw() not in OFF


class busy:
    """``with busy():`` around a call that the worker must not slow (re-entrant: a plain run calling another
    compiled function counts twice). Counted per thread, so that a forked child keeps only its own thread's."""

    __slots__ = ()

    def __enter__(self):
        me = threading.get_ident()
        with _lock:
            _busy[me] = _busy.get(me, 0) + 1
            _state["busy"] = True

    def __exit__(self, *exc):
        me = threading.get_ident()
        with _lock:
            n = _busy.pop(me, 1) - 1
            if n > 0:
                _busy[me] = n
            _state["busy"] = bool(_busy)
        return False


class waiting:
    """``with waiting():`` around a caller's wait for a job's result: the worker then runs at full speed, whatever
    else runs (a waiting caller uses no processor, but BLAS's threads may spin for a while after its last call)."""

    __slots__ = ()

    def __enter__(self):
        with _lock:
            _state["waiting"] += 1

    def __exit__(self, *exc):
        with _lock:
            _state["waiting"] -= 1
        return False


def start() -> None:
    """Start the worker now (the decorator, when a function is compiled): a thread's start costs its starter
    0.2-0.6 ms, which the first call then does not pay."""
    with _lock:
        if _state["thread"] is None:
            t = threading.Thread(target=_run, name="phylanx-beside", daemon=True)
            _state["thread"] = t
            t.start()


def on_worker() -> bool:
    """Whether this code runs on the worker (a job: a function translated beside its calls)."""
    return threading.current_thread() is _state["thread"]


def submit(fn, *args) -> Future:
    """``fn(*args)`` on the worker; its Future holds the result or the exception."""
    future: Future = Future()
    start()
    with _lock:
        _jobs.append((future, fn, args))
        _wake.notify()
    return future


def _others() -> float:
    """CPU seconds of the process's threads other than this one (the worker's), BLAS's and compile threads too."""
    return time.process_time() - time.thread_time()


def _hook(frame, event, arg):
    """The worker's trace function (``sys.settrace``): called at each Python call only, since it returns None (no
    line events). A profile hook (every call and return, C calls too) made translation 2-3x slower than alone."""
    if time.perf_counter() - _state["slice"] >= SLICE:
        active = (_state["busy"] or _state["active"]) and not _state["waiting"]
        before, t0 = _others(), time.perf_counter()
        time.sleep(PAUSE if active else YIELD)
        now = time.perf_counter()
        # (an active program keeps the lock past a short sleep's end, so the measure covers what it did then)
        _state["active"] = _others() - before > ACTIVE * (now - t0)
        _state["slice"] = now


def _run():
    while True:
        with _lock:
            while not _jobs:
                _wake.wait()
            future, fn, args = _jobs.popleft()
        if not future.set_running_or_notify_cancel():
            continue
        sys.settrace(_hook)
        try:
            result, error = fn(*args), None
        except BaseException as e:  # noqa: BLE001 - the job's error is its caller's to raise (the Future holds it)
            result, error = None, e
        finally:
            sys.settrace(None)  # before the Future wakes anyone: its callbacks are not the job's
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)
        del future, fn, args, result, error  # the job's arguments (a call's arrays) are not kept while the worker waits


def _after_fork():
    """A forked child has no worker thread: the next job starts one; jobs queued in the parent are the parent's."""
    global _lock, _wake
    _lock = threading.Lock()
    _wake = threading.Condition(_lock)
    _jobs.clear()
    mine = _busy.get(threading.get_ident())  # the forking thread, inside a call or not; the others are not here
    _busy.clear()
    if mine:
        _busy[threading.get_ident()] = mine
    _state.update(busy=bool(_busy), slice=0.0, thread=None, active=True, waiting=0)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)

