"""Per-node profiling, runtime side: what each call site cost, where it ran, how it ran (inline or task).

The frontend (``phylanx_py/profile.py``) makes a recorder current with ``recording(recorder)``; evaluations
started while it is current report to it. When none is, nothing here runs: generated code keeps its inline fast
paths and call sites are not wrapped, so not profiling costs one context-variable read per top-level call.
"""
from __future__ import annotations

import contextlib
import contextvars
import threading
import time

_active: contextvars.ContextVar = contextvars.ContextVar("phylanx_profile", default=None)


def active():
    """The recorder of the enclosing ``px.profile()`` block, or None."""
    return _active.get()


@contextlib.contextmanager
def recording(recorder):
    token = _active.set(recorder)
    try:
        yield recorder
    finally:
        _active.reset(token)


def nbytes_of(value) -> int:
    n = getattr(value, "nbytes", None)
    return int(n) if isinstance(n, (int,)) or type(n).__name__.startswith("int") else 0


class ProfiledSite:
    """A call site that reports each run (time, thread, result size) to a recorder; runs as a local task."""

    __slots__ = ("site", "recorder")

    def __init__(self, site, recorder):
        self.site, self.recorder = site, recorder

    @property
    def prim(self):
        return self.site.prim

    @property
    def loc(self):
        return self.site.loc

    def __call__(self, *args, **kwargs):
        t0 = time.perf_counter()
        result = self.site(*args, **kwargs)
        self.recorder.record(self.site.loc, self.site.prim.label, time.perf_counter() - t0, "task",
                             threading.current_thread().name, nbytes_of(result), start=t0)
        return result

    def __reduce__(self):  # on other processes it is the plain site: Dask reports times via its task stream
        return self.site.__reduce__()
