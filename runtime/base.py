"""A runtime: an executor plus the direct-execution policy (``select.py`` chooses the current one)."""
from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from . import kinds, progress
from .evaluation import INLINE_ELEMENTS, Evaluation

# Compiled recursion nests a few Python frames per IR call; leave room beyond Python's default of 1000.
_RECURSION_LIMIT = 20_000


class Runtime:
    """Where compiled functions run. Closing it closes only what it started."""

    def __init__(self, executor, *, inline_elements: int = INLINE_ELEMENTS, name: str | None = None,
                 progress: bool | None = False):
        self.executor = executor
        self.progress = progress  # True/False, or None: on a terminal only (runtime/progress.py)
        self.inline_elements = inline_elements
        self.name = name or executor.name
        self._drivers: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self.closed = False
        # what its calls did, for ``phylanx-py run``'s summary: calls, tasks submitted (the rest ran inline)
        self.counts = {"calls": 0, "tasks": 0}

    def __repr__(self):
        if self.closed:
            return f"<phylanx runtime {self.name}: closed>"
        return f"<phylanx runtime {self.name}: {getattr(self.executor, 'workers', '?')} workers>"

    def evaluate(self, code, args, kwargs, hooks=None):
        """Run compiled ``code`` on this runtime to a concrete result (raises the user-facing errors)."""
        if self.closed:
            raise RuntimeError(f"{self!r} is closed")
        if sys.getrecursionlimit() < _RECURSION_LIMIT:
            sys.setrecursionlimit(_RECURSION_LIMIT)
        t_start = time.perf_counter()
        ev = Evaluation(self, hooks)
        profiled = ev.profile is not None and hasattr(self.executor, "collect_profile")
        if profiled:
            self.executor.start_profile(ev)
        show = progress.Progress(ev) if progress.wanted(self.progress) else contextlib.nullcontext()
        with show:
            try:
                result = code.invoke(ev, args, kwargs)
            except BaseException:
                try:
                    ev.wait_all(raise_errors=False)  # no task of this call outlives it
                finally:  # also when waiting fails (a lost cluster): nothing of this call stays pending
                    kinds.discard(ev)
                raise
            try:
                value = ev.finish(result)
                # lists and dicts the caller passed in may have been given futures (``history.append(float(
                # loss))`` on tiled data): the caller gets values, as plain Python leaves there
                held = [a for a in (*args, *kwargs.values()) if type(a) in (list, dict, tuple)]
                if held and (ev.submitted or ev.kinds_used):  # only tasks and tile rules make futures
                    ev.resolve(held)
                return value
            finally:
                wall = time.perf_counter() - t_start
                with self._lock:
                    c = self.counts
                    c["calls"], c["tasks"] = c["calls"] + 1, c["tasks"] + ev.submitted
                kinds.discard(ev)  # e.g. tile reductions the call asked for but never used
                if profiled:
                    self.executor.collect_profile(ev)
                if ev.profile is not None and hasattr(ev.profile, "record_call"):  # the profile's wall time
                    ev.profile.record_call(code.entry, wall)

    def lazy(self, fn, *args, **kwargs):
        """Run ``fn`` on a driver thread (the evaluator may block on data-dependent conditions there)."""
        with self._lock:
            if self._drivers is None:
                self._drivers = ThreadPoolExecutor(4, thread_name_prefix="phylanx-driver")
        # the caller's context (its ``px.profile()`` block) goes with the call to the driver thread
        return self._drivers.submit(contextvars.copy_context().run, fn, *args, **kwargs)

    def close(self):
        self.closed = True
        if self._drivers is not None:
            self._drivers.shutdown(wait=True)
        self.executor.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
