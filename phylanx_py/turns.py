"""Turns on the interpreter lock for the work done beside a program's calls (runtime/beside.py's worker: the
translation of a function, the lowering of its signatures), taken at places that work passes often: each walk of
the IR (``ir.walk``), each expression translated or lowered, each statement generated (``turn()``). Stdlib only:
the frontend and the runtime both call it.

Why turns and not a trace function: the worker ran its jobs under ``sys.settrace``, whose hook, at each Python
call, let it sleep after a slice; but tracing alone, with a hook that does nothing, made those jobs 2-3x longer
(NPBench's resnet: 24 -> 51 ms of processor; cavity_flow: 257 -> 818 ms), and all of that time held the interpreter
lock the program's threads wait for.

How the worker yields: it runs slices of ``SLICE`` seconds and sleeps after each. The interpreter lock makes every
slice time the program's other threads cannot run Python, and more: a thread that gives the lock up for a moment
(each NumPy operation on more than a few hundred elements does) finds the worker holding it when it returns, and
waits for the slice's end and for the operating system to wake it (~0.05-0.1 ms). With slices of 0.15 ms and sleeps
of 0.01 ms, NPBench's resnet lost 90-290 ms of its first eight rounds (its own calls and NumPy's between them, 11
ms each) to a job of 60-130 ms of work: every NumPy operation of the caller became a hand-over. So the worker sleeps
``PAUSE`` after each slice while the process's other threads use the processor (their CPU time during its last
sleep, over that sleep, is over ``ACTIVE``; or a call counted by ``state["busy"]`` runs): it then has a tenth of the
time, in slices long enough that the hand-overs cost little. While they do not (the program waits: for I/O, for a
lock, for this work's result: ``state["waiting"]``), it sleeps ``YIELD`` after each slice, so that a thread that
starts running again gets the lock within a slice. Between two turns the worker holds the lock as long as its work
runs (a C function such as ``compile`` of a tree's generated code: up to 15 ms on NPBench's kernels), or until the
interpreter's switch interval (5 ms) hands it over."""
from __future__ import annotations

import threading
import time

SLICE = 5e-4  # seconds the worker runs before it sleeps
PAUSE = 4.5e-3  # seconds it then sleeps while other threads run (a tenth of the time is the worker's)
YIELD = 1e-5  # seconds it then sleeps while none does (the lock for whoever waits for it)
FIRST_WAIT = 0.2  # seconds a job waits for the call that queued it to end (``first``)
ACTIVE = 0.3  # the other threads' CPU seconds per second of the worker's last sleep above which they "run"

# worker: the thread that takes turns (its ident; None: none); slice: its current slice's start; active: whether the
# process's other threads ran during its last sleep; busy: a call of the program is running (beside.busy); waiting:
# callers waiting for a result of its work (beside.waiting)
state = {"worker": None, "slice": 0.0, "active": True, "busy": False, "waiting": 0}
_ident = threading.get_ident


def turn() -> None:
    """A place the worker's work passes often: it sleeps here once its slice is over. Any other thread passes at
    once (the translator and the lowering run in calls too)."""
    if _ident() == state["worker"] and time.perf_counter() - state["slice"] >= SLICE:
        _rest()


def first() -> None:
    """The worker, before a job: a job queued by a call that is running (a first call beside its translation)
    starts when that call ends, or after ``FIRST_WAIT`` seconds of it, so that a first call runs alone: with the
    job's first slices and its stretches between turns in it, NPBench's symm took 8.6-10.3 ms against 7.5 plain,
    bicg 11-58 ms against 11. (A long first call then still gets its translation, which its stop to rerun through
    the tree waits for: decorator.py.)"""
    after_call()
    state["slice"] = time.perf_counter()


def after_call() -> None:
    """Wait while a call of the program runs beside its translation (``state["busy"]``), for at most ``FIRST_WAIT``
    seconds, unless a caller waits for the work (``state["waiting"]``)."""
    t0 = time.perf_counter()
    while state["busy"] and not state["waiting"] and time.perf_counter() - t0 < FIRST_WAIT:
        time.sleep(PAUSE)


def _others() -> float:
    """CPU seconds of the process's threads other than this one (the worker's), BLAS's and compile threads too."""
    return time.process_time() - time.thread_time()


def _rest() -> None:
    active = (state["busy"] or state["active"]) and not state["waiting"]
    before, t0 = _others(), time.perf_counter()
    time.sleep(PAUSE if active else YIELD)
    now = time.perf_counter()
    # (an active program keeps the lock past a short sleep's end, so the measure covers what it did then)
    state["active"] = _others() - before > ACTIVE * (now - t0)
    state["slice"] = now
