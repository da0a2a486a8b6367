"""Work done beside compiled calls: one daemon thread that yields to them.

Why: a compiled function's first call used to translate the function, generate the tree's code and lower its first
signature for the native tier before running anything: 7-10 ms of Python on the held-out scalar loop, whose plain
call takes 3.3 ms, so the first call of a process took 3.2x the plain function's time (issue 33: no call more than
10% slower). Now that first call runs the plain function (the answer by definition, promise 1), and the work is a
job here (decorator.py: ``CompiledFunction._beside``); the calls after it run the plain function too until the job
is done.

How the thread yields: its jobs take turns on the interpreter lock (phylanx_py/turns.py: slices of 0.5 ms, then a
sleep of 4.5 ms while the program's threads use the processor, of 0.01 ms while they wait), at places that
translation and lowering pass often; a trace function did it before, at 2-3x the jobs' processor time.

Nothing waits on the worker forever: a caller that needs a job's result now (an error to locate, ``explain()``)
leaves ``busy()`` first and waits inside ``waiting()``, so the worker runs at full speed meanwhile.
``PHYLANX_BESIDE=0`` turns this off: every first call translates before it runs, as before (the test suite's
differential tests do, so that each call they make goes through the tiers they test)."""
from __future__ import annotations

import collections
import os
import threading
from concurrent.futures import Future

from phylanx_py.primitives.environ import OFF, raw_reader

from phylanx_py import turns

_raw = raw_reader("PHYLANX_BESIDE")
_state = {"thread": None}  # the worker (a Thread), once started
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
            turns.state["busy"] = True

    def __exit__(self, *exc):
        me = threading.get_ident()
        with _lock:
            n = _busy.pop(me, 1) - 1
            if n > 0:
                _busy[me] = n
            turns.state["busy"] = bool(_busy)
        return False


class waiting:
    """``with waiting():`` around a caller's wait for a job's result: the worker then runs at full speed, whatever
    else runs (a waiting caller uses no processor, but BLAS's threads may spin for a while after its last call)."""

    __slots__ = ()

    def __enter__(self):
        with _lock:
            turns.state["waiting"] += 1

    def __exit__(self, *exc):
        with _lock:
            turns.state["waiting"] -= 1
        return False


def start(then=None) -> None:
    """Start the worker now (the decorator, when a function is compiled): a thread's start costs its starter
    0.2-0.6 ms, which the first call then does not pay. ``then``: a job to queue (a start made ahead, such as another
    thread's, which then costs the decorator nothing); like every job it waits for a call running then
    (``turns.first``)."""
    with _lock:
        if _state["thread"] is None:
            t = threading.Thread(target=_run, name="phylanx-beside", daemon=True)
            _state["thread"] = t
            t.start()
    if then is not None:
        submit(then)


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


def _run():
    turns.state["worker"] = threading.get_ident()
    while True:
        with _lock:
            while not _jobs:
                _wake.wait()
            future, fn, args = _jobs.popleft()
        if not future.set_running_or_notify_cancel():
            continue
        turns.first()
        try:
            result, error = fn(*args), None
        except BaseException as e:  # noqa: BLE001 - the job's error is its caller's to raise (the Future holds it)
            result, error = None, e
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
    _state.update(thread=None)
    turns.state.update(worker=None, busy=bool(_busy), slice=0.0, active=True, waiting=0)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)

