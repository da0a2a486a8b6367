"""Which runtime compiled functions run on: the process-wide default, ``using()`` blocks, and threads started
inside them."""
from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import warnings

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
                _default = Runtime(LocalPoolExecutor(), progress=None)  # progress on a terminal
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
        if _open and threading.current_thread() is not threading.main_thread():
            rt = _followed()
        if rt is None:
            rt = _default  # read without the lock on every call; default() makes it when there is none
            if rt is None or rt.closed:
                rt = default()
    return rt


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
