"""Work done beside compiled calls: one daemon thread that yields to them.

Why: a compiled function's first call used to translate the function, generate the tree's code and lower its first
signature for the native tier before running anything: 7-10 ms of Python on the held-out scalar loop, whose plain
call takes 3.3 ms, so the first call of a process took 3.2x the plain function's time (issue 33: no call more than
10% slower). Now that first call runs the plain function (the answer by definition, promise 1), and the work is a
job here (decorator.py: ``CompiledFunction._beside``); the calls after it run the plain function too until the job
is done.

How the thread yields: it runs its jobs with a trace function (``sys.settrace``, which is the calling thread's
own), called at each Python call. While any call counted by ``busy()`` is running, it lets the thread run ``SLICE``
seconds, then sleeps ``PAUSE`` seconds. Sleeping gives up the interpreter lock, and a calls' thread running Python
keeps it until a switch interval (5 ms by default) after the worker asks for it again: the worker has about
SLICE / (PAUSE + 5 ms) of the time during calls (3%), and a call meets about one slice in 5 ms of its time (the held-
out scalar loop's 3.4 ms call: 1.05-1.1x when it meets one). Between calls it sleeps 10 us after each slice, so that
a caller waiting for the lock between two calls gets it. The trace function sees only Python calls: one C function
longer than a slice delays a call by that much (translation has none; jobs do not compile or load native code,
which is the compile process's and the loop tiers' work).

Nothing waits on the worker forever: a caller that needs a job's result now (an error to locate, ``explain()``)
leaves ``busy()`` first, so the worker runs freely while it waits. ``PHYLANX_BESIDE=0`` turns this off: every
first call translates before it runs, as before (the test suite's differential tests do, so that each call they
make goes through the tiers they test)."""
from __future__ import annotations

import collections
import os
import sys
import threading
import time
from concurrent.futures import Future

from phylanx_py.primitives.environ import OFF, raw_reader

SLICE = 1.5e-4  # seconds the worker runs between pauses while a call is busy
PAUSE = 5e-4  # seconds it then sleeps (the interpreter lock is the calls' meanwhile)
YIELD = 1e-5  # seconds it sleeps after a slice run while no call is busy (the lock for whoever waits for it)

_raw = raw_reader("PHYLANX_BESIDE")
_state = {"busy": False, "slice": 0.0, "thread": None}  # busy: a call of some thread is running (``_busy``)
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


def start() -> None:
    """Start the worker now (the decorator, when a function is compiled): a thread's start costs its starter
    0.2-0.6 ms, which the first call then does not pay."""
    with _lock:
        if _state["thread"] is None:
            t = threading.Thread(target=_run, name="phylanx-beside", daemon=True)
            _state["thread"] = t
            t.start()


def submit(fn, *args) -> Future:
    """``fn(*args)`` on the worker; its Future holds the result or the exception."""
    future: Future = Future()
    start()
    with _lock:
        _jobs.append((future, fn, args))
        _wake.notify()
    return future


def _hook(frame, event, arg):
    """The worker's trace function (``sys.settrace``): called at each Python call only, since it returns None (no
    line events). A profile hook (every call and return, C calls too) made translation 2-3x slower than alone."""
    if time.perf_counter() - _state["slice"] >= SLICE:
        # between calls too, a short sleep after each slice: the caller's thread, between two calls, may be waiting
        # for the interpreter lock, and would otherwise wait a whole switch interval (5 ms: a 3.5 ms call at 2.4x)
        time.sleep(PAUSE if _state["busy"] else YIELD)
        _state["slice"] = time.perf_counter()


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
    _state.update(busy=bool(_busy), slice=0.0, thread=None)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)

