"""Which runtime compiled functions run on: the process-wide default, and ``using()`` blocks."""
from __future__ import annotations

import contextlib
import contextvars
import os
import threading

from .base import Runtime
from .dask_runtime import dask
from .executors import LocalPoolExecutor

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
                _default = dask(address)
            else:
                _default = Runtime(LocalPoolExecutor())
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
