"""A runtime: an executor plus the direct-execution policy (``select.py`` chooses the current one)."""
from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
import time
from concurrent.futures import Future, InvalidStateError

from . import drivers, kinds, progress
from .evaluation import INLINE_ELEMENTS, Evaluation
from .executors import FUTURES, closed_error

# Compiled recursion nests a few Python frames per IR call; leave room beyond Python's default of 1000.
_RECURSION_LIMIT = 20_000


class LazyCall(Future):
    """The future ``f.lazy(...)`` returns (a ``concurrent.futures.Future``), its call run on a driver thread of the
    runtime. ``cancel()`` is Future's: a call that has started is not cancelled, except by the runtime closing,
    which cancels every call still pending (``result()`` then raises ``concurrent.futures.CancelledError``)."""

    def __init__(self):
        super().__init__()
        self._started = False
        self._closing = False

    def running(self) -> bool:
        return self._started and not self.done()

    def cancel(self) -> bool:
        with self._condition:
            if self._started and not self._closing:
                return False
            return super().cancel()

    def _run(self, fn, args, kwargs):
        with self._condition:
            if self.cancelled():
                return
            self._started = True
        try:
            value = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - the caller's result()
            with contextlib.suppress(InvalidStateError):  # (cancelled meanwhile: nobody wants it)
                self.set_exception(e)
        else:
            with contextlib.suppress(InvalidStateError):
                self.set_result(value)


FUTURES.add(LazyCall)  # passed to another compiled call, it is waited for as any future


class Runtime:
    """Where compiled functions run. Closing it closes only what it started."""

    def __init__(self, executor, *, inline_elements: int = INLINE_ELEMENTS, name: str | None = None,
                 progress: bool | None = False):
        self.executor = executor
        self.progress = progress  # True/False, or None: on a terminal only (runtime/progress.py)
        self.inline_elements = inline_elements
        self.name = name or executor.name
        self._drivers: drivers.DriverPool | None = None
        self._lock = threading.Lock()
        self._pending: set = set()  # LazyCalls not done yet (close() cancels them)
        self._closing = False  # close() has begun: no new lazy calls
        self.closed = False
        # what ran where, for ``phylanx-py run``'s summary: compiled calls and the tasks they submitted (the rest
        # ran inline); parallel fits; segments (training, SPMD loops) and their ranks, long-running on the workers
        self.counts = {"calls": 0, "tasks": 0, "fits": 0, "segments": 0, "ranks": 0}

    def __repr__(self):
        if self.closed:
            return f"<phylanx runtime {self.name}: closed>"
        return f"<phylanx runtime {self.name}: {getattr(self.executor, 'workers', '?')} workers>"

    def count(self, **deltas):
        """Add ``deltas`` to ``counts`` (work that ran on this runtime's workers without passing through
        ``evaluate``'s count: training and SPMD segments)."""
        with self._lock:
            for k, v in deltas.items():
                self.counts[k] = self.counts.get(k, 0) + v

    def closed_error(self) -> Exception:
        """What using this runtime raises once it is closed."""
        return closed_error(self.name)

    def check_open(self):
        """Raise ``closed_error()`` when the runtime is closed."""
        if self.closed:
            raise self.closed_error()

    def evaluate(self, code, args, kwargs, hooks=None):
        """Run compiled ``code`` on this runtime to a concrete result (raises the user-facing errors)."""
        self.check_open()
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

    def lazy(self, fn, *args, **kwargs) -> LazyCall:
        """Run ``fn`` on a driver thread (the evaluator may block on data-dependent conditions there); a LazyCall
        future of its result. On a closed runtime the future holds ``closed_error()``."""
        call = LazyCall()
        with self._lock:
            if self._closing or self.closed:
                call.set_exception(self.closed_error())
                return call
            if self._drivers is None:
                self._drivers = drivers.DriverPool(4, "phylanx-driver")
            self._pending.add(call)
            pool = self._drivers
        call.add_done_callback(self._forget)
        drivers.pending(call)
        # the caller's context (its ``px.profile()`` block) goes with the call to the driver thread
        pool.submit(contextvars.copy_context().run, call._run, fn, args, kwargs)
        return call

    def _forget(self, call):
        with self._lock:
            self._pending.discard(call)

    def close(self, wait: bool = False):
        """Close the runtime and what it started (never what it was given: a Dask client or cluster passed in).

        Calls still pending (``f.lazy`` futures not done) are cancelled: their futures raise
        ``concurrent.futures.CancelledError`` at once, and what they had started stops at its next task (the
        executor is closed; an operation already running, such as a kernel, finishes first). ``wait=True`` lets
        them finish first. A closed runtime says so: a compiled call, a tiled array made on it or an operation on
        one raises ``RuntimeError: <phylanx runtime ...: closed> is closed``."""
        with self._lock:
            self._closing = True  # no new lazy calls
            pool, pending = self._drivers, list(self._pending)
        if not wait:
            for call in pending:
                call._closing = True
                call.cancel()
        if pool is not None:
            pool.shutdown(wait=wait)
        self.closed = True
        self.executor.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
