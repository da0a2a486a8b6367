"""A runtime: an executor plus the direct-execution policy; ``current()`` and ``using()`` choose one."""
from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
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
                finally:  # (waiting raises a ClusterError when the scheduler is gone)
                    _batch.discard(ev)
                raise
            try:
                return ev.finish(result)
            finally:
                _batch.discard(ev)  # tile reductions the call asked for but never used
                if profiled:
                    self.executor.collect_profile(ev)

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

                _default = Runtime(ThreadPoolExecutorRuntime())
        return _default


def set_default(rt: Runtime | None) -> Runtime | None:
    """Make ``rt`` the process-wide default (what ``phylanx-py run`` does); returns the previous one."""
    global _default
    with _default_lock:
        previous, _default = _default, rt
    return previous


# The ``using`` blocks open in each thread (innermost last). A thread started inside a block does not inherit the
# context variable (threads start with an empty context), so a thread that chose no runtime itself follows the
# blocks open in other threads: ``with px.using(rt): pool.map(f, xs)`` runs ``f`` on ``rt``, not silently on the
# default runtime. The main thread never follows other threads (it was not started inside any block).
_open: dict[int, list[Runtime]] = {}
_open_lock = threading.Lock()
_warned_ambiguous = False


def _followed() -> Runtime | None:
    """The runtime of the blocks open in other threads when they agree; None (with a warning) when not."""
    global _warned_ambiguous
    if threading.current_thread() is threading.main_thread():
        return None
    with _open_lock:
        if not _open:
            return None
        chosen = {id(stack[-1]): stack[-1] for stack in _open.values()}
    if len(chosen) == 1:
        return next(iter(chosen.values()))
    if not _warned_ambiguous:
        _warned_ambiguous = True
        import warnings

        warnings.warn(f"a compiled function was called in thread {threading.current_thread().name!r}, which chose "
                      f"no runtime, while px.using blocks for {len(chosen)} different runtimes are open in other "
                      "threads: it runs on the default runtime. Call px.using(rt) in that thread (or "
                      "px.runtime.set_default(rt)) to choose.", RuntimeWarning, stacklevel=3)
    return None


def current() -> Runtime:
    """The runtime of the innermost ``using`` block of this thread; in a thread without one, that of the blocks
    open in other threads when they all name the same runtime; else the process-wide default."""
    rt = _current.get()
    if rt is None:
        rt = _followed()
    return rt if rt is not None else default()


@contextlib.contextmanager
def using(rt: Runtime):
    """Run compiled functions on ``rt`` inside the block, and in threads started meanwhile (see ``current``)."""
    token = _current.set(rt)
    me = threading.get_ident()
    with _open_lock:
        _open.setdefault(me, []).append(rt)
    try:
        yield rt
    finally:
        _current.reset(token)
        with _open_lock:
            stack = _open.get(me, [])
            for i in range(len(stack) - 1, -1, -1):
                if stack[i] is rt:
                    del stack[i]
                    break
            if not stack:
                _open.pop(me, None)
