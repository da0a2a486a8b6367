"""A runtime: an executor plus the direct-execution policy; ``current()`` and ``using()`` choose one."""
from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from . import progress
from .evaluation import INLINE_ELEMENTS, Evaluation
from .tiled import batch as _batch

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
                ev.wait_all(raise_errors=False)  # no task of this call outlives it
                _batch.discard(ev)
                raise
            try:
                return ev.finish(result)
            finally:
                wall = time.perf_counter() - t_start
                with self._lock:
                    c = self.counts
                    c["calls"], c["tasks"] = c["calls"] + 1, c["tasks"] + ev.submitted
                _batch.discard(ev)  # tile reductions the call asked for but never used
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


_current: contextvars.ContextVar[Runtime | None] = contextvars.ContextVar("phylanx_runtime", default=None)
_default: Runtime | None = None
_default_lock = threading.Lock()


def default() -> Runtime:
    """The process-wide default runtime, made on first use: a Dask runtime on the scheduler named by the
    ``PHYLANX_SCHEDULER`` environment variable when it is set, else a local thread pool."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            address = os.environ.get("PHYLANX_SCHEDULER", "").strip()
            if address:
                from .dask_runtime import dask

                _default = dask(address)
            else:
                from .executors import ThreadPoolExecutorRuntime

                _default = Runtime(ThreadPoolExecutorRuntime(), progress=None)  # progress on a terminal
        return _default


def set_default(rt: Runtime | None) -> Runtime | None:
    """Make ``rt`` the process-wide default (what ``phylanx-py run`` does); returns the previous one."""
    global _default
    with _default_lock:
        previous, _default = _default, rt
    return previous


def current() -> Runtime:
    rt = _current.get()
    return rt if rt is not None else default()


@contextlib.contextmanager
def using(rt: Runtime):
    """Run compiled functions on ``rt`` inside the block."""
    token = _current.set(rt)
    try:
        yield rt
    finally:
        _current.reset(token)
