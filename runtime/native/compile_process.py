"""Compiling native kernels in another process, so that the caller keeps its interpreter lock.

A kernel compiled in a background thread shares the interpreter lock with the caller: Numba's typing and lowering
are Python, and the caller's calls ran 1.2-1.7x slower (10x at worst) for the seconds a compile took. A background
compile asks this module first (``warm``): one child process per parent, started on the first request, compiles
the same generated source for the same types through the verified kernel cache (primitives/kernel_cache.py), so
Numba's machine code is on disk when the background thread then compiles it itself: that compile is a cache load.
What runs is still the source generated and compiled in this process (the cache's trust model holds: the child is
this user's own process writing this user's private cache folder). Any failure of the child (it cannot start,
the kernel does not compile there, the cache folder is refused) only means the thread compiles as before.

``PHYLANX_COMPILE_PROCESS=0`` keeps every compile in the thread. The child (compile_child.py) reads requests on its
stdin and exits at its end, that is when this process exits or closes it."""
from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import threading

from phylanx_py.primitives import kernel_cache

HEADER = struct.Struct("<Q")
_lock = threading.Lock()  # one request at a time on the pipe (the child compiles one kernel at a time anyway)
_child: list = [None]  # the Popen, or False once it could not be started (no second try)


def enabled() -> bool:
    return os.environ.get("PHYLANX_COMPILE_PROCESS", "1") != "0" and _child[0] is not False


def warm(loader: str, source: str, sig) -> bool:
    """Have the child compile ``source`` (loaded as ``tiering.<loader>`` loads it) for the Numba types ``sig``;
    True when it did. Blocks the calling (background) thread, never holding the interpreter lock meanwhile."""
    if not enabled():
        return False
    # the folder this process uses now (a test or a program may have changed it since the child started)
    request = pickle.dumps((kernel_cache.CACHE_DIR, loader, source, tuple(sig)))
    with _lock:
        child = _start()
        if child is None:
            return False
        try:
            _write_all(child.stdin, HEADER.pack(len(request)) + request)
            reply = child.stdout.read(1)
        except (OSError, ValueError):
            reply = b""
        if reply == b"":  # the child died: compile in the thread from now on
            _stop(child)
            _child[0] = False
            return False
        return reply == b"1"


def prestart():
    """Start the child now, from a thread, when a loop or function is first lowered for the native tier: its start
    (an interpreter, phylanx-py and Numba imported: ~1-1.5 s here, niced) then overlaps the 50 ms and more that
    the code runs interpreted before its first compile is asked for, instead of adding to its time to native."""
    if _child[0] is None and enabled():
        threading.Thread(target=_start_locked, daemon=True, name="phylanx-compile-start").start()


def _start_locked():
    with _lock:
        _start()


def _start():
    child = _child[0]
    if child is not None and child is not False and child.poll() is None:
        return child
    if child is False:
        return None
    try:
        # unbuffered pipes (raw file objects, no lock): a fork while a background thread waits for a reply left the
        # forked child's copy of a buffered reader locked by a thread it does not have, and closing it there
        # (``_after_fork_in_child``) waited forever (a review: a multiprocessing pool started during a fused build)
        child = subprocess.Popen([sys.executable, "-m", "phylanx_py.runtime.native.compile_child"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 close_fds=True, bufsize=0)
    except OSError:
        _child[0] = False
        return None
    _child[0] = child
    return child


def _write_all(raw, data: bytes):
    """All of ``data`` into the unbuffered pipe ``raw`` (a raw write may take part of it)."""
    view = memoryview(data)
    while view:
        view = view[raw.write(view):]


def _stop(child):
    try:
        child.kill()
        child.wait(timeout=5)
    except Exception:  # noqa: BLE001 - gone already
        pass


def _after_fork_in_child():
    """A forked child must not write requests into its parent's compile process (nor hold its pipe open, which
    would keep that process alive after the parent): it starts one of its own when it needs one."""
    global _lock
    _lock = threading.Lock()
    child, _child[0] = _child[0], None
    if child is not None and child is not False:
        for stream in (child.stdin, child.stdout):
            try:
                stream.close()
            except Exception:  # noqa: BLE001 - already closed
                pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def close():
    """Stop the child (tests; it also ends by itself when this process exits)."""
    with _lock:
        child = _child[0]
        _child[0] = None
        if child is not None and child is not False:
            try:
                child.stdin.close()
                child.wait(timeout=30)
            except Exception:  # noqa: BLE001 - then by force
                _stop(child)
