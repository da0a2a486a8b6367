"""A worker kept quiet while a rank runs on it: its sampling profiler and event-loop tick monitor pause.

A rank of a segment computes for seconds in one thread while the worker's event loop wakes 150 times a second for
the statistical profiler (every 10 ms: it walks every thread's stack, the rank's included) and the tick monitor
(every 20 ms). On a machine where every core runs a rank those wake-ups take the GIL and a core from the ranks,
and a collective makes every rank wait for the one delayed: sampled with ``py-spy --gil`` during simplemlp
training on two workers, the event loop held the GIL 13.5% of the time, 9.3% without the profiler. What the
profiler would show of a rank is one frame (the segment) anyway; ``benchmarks/train_parallel.py`` reports the
ranks' own figures. Heartbeats, the memory monitor and everything else keep running.

Ranks overlap (a segment submitted ahead starts as the last one ends; SPMD runs beside training): the first to
start pauses the callbacks and the last to leave restarts them. Callbacks are started and stopped on the worker's
event loop (``add_callback`` is Tornado's thread-safe entry).
"""
from __future__ import annotations

import contextlib
import threading

PAUSED = ("profile", "profile-cycle", "tick", "ticks")

_LOCK = threading.Lock()
_ACTIVE: dict = {}  # id(worker) -> ranks running on it


@contextlib.contextmanager
def quiet(worker):
    """Pause ``worker``'s profiler and tick monitor while the block runs (``worker`` None: nothing to do)."""
    if worker is None or not hasattr(worker, "periodic_callbacks"):
        yield
        return
    key = id(worker)
    with _LOCK:
        _ACTIVE[key] = _ACTIVE.get(key, 0) + 1
        first = _ACTIVE[key] == 1
    if first:
        _switch(worker, False)
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE[key] -= 1
            last = _ACTIVE[key] == 0
            if last:
                del _ACTIVE[key]
        if last:
            _switch(worker, True)


def _switch(worker, on: bool):
    def run():
        # decided on the loop, in the order the switches were asked: a pause asked after a restart stays
        if (id(worker) in _ACTIVE) == on:
            return
        for name in PAUSED:
            pc = worker.periodic_callbacks.get(name)
            if pc is not None and pc.is_running() != on:
                pc.start() if on else pc.stop()

    try:
        worker.loop.add_callback(run)
    except RuntimeError:  # the worker's loop is closing: nothing to pause or restart
        pass
