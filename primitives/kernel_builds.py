"""Compiled kernels built in a background thread (fused.py, fused_update.py, fused_reduce.py, rowdot.py):
``cached_kernel`` makes each cache entry once, the callers running the reference (NumPy: the same answer) until it
is ready; a fork's child and the interpreter's exit handle the builds still running."""
from __future__ import annotations

import os
import threading

from . import kernel_cache

_lock = threading.Lock()


# Building a kernel in the call that first needs it (Numba's import, 0.3-0.6 s, then the compile, 0.1-2 s) made
# that call 10-100x slower than NumPy's: by default it is built in a background thread and the reference (NumPy,
# the same answer) runs until it is ready. ``PHYLANX_FUSE_WAIT=1`` (the test suite) and ``PHYLANX_NATIVE=force``
# build it in the call, as before.
_BUILDING = object()  # the value in a kernel cache while its kernel is built in the background
_building = threading.local()  # ``pending``: the last cached_kernel of this thread met a kernel being built
_builds = {"running": 0, "exiting": False, "away": 0}  # away: running builds waiting for another process
_in_flight: list = []  # (cache, key) of the builds running in this process's background threads
_builds_done = threading.Condition(_lock)
# ``hook(kind, source)``: compile a kernel's source in another process first, so that the build in this process is a
# load of Numba's machine code from the disk cache (runtime/native/compile_process.py registers it): a build in a
# background thread is Python (Numba's typing and lowering) sharing the caller's interpreter lock, and a floor's
# probe of the tree that started one slowed the next plain runs of NPBench's hdiff 2-3x for seconds
ELSEWHERE: list = []
EXIT_WAIT_SECONDS = 60  # at interpreter exit, the longest wait for builds inside Numba/LLVM (a crash otherwise)


def remember(memo: dict, key, find):
    """``find()``, kept as ``memo[key]`` (the caller found no entry): a None met while its kernel is being built in
    the background is not kept, so the first call after the build asks again and gets the kernel."""
    _building.pending = False
    hit = find()
    if hit is not None or not _building.pending:
        memo[key] = hit
    return hit


def _in_background() -> bool:
    return os.environ.get("PHYLANX_FUSE_WAIT", "0") != "1" and \
        os.environ.get("PHYLANX_NATIVE", "1").strip().lower() != "force"


def cached_kernel(cache: dict, key, build):
    """``cache[key]``, made once by ``build()``; None when it cannot be made (a type Numba cannot compile, a
    dtype NumPy treats differently): the reference runs for that key from then on. None too while it is built
    in a background thread (``_in_background``); the call after it is ready gets it."""
    hit = cache.get(key, False)
    if hit is not False and hit is not _BUILDING:
        return hit
    with _lock:
        hit = cache.get(key, False)
        if hit is _BUILDING or _builds["exiting"]:
            _building.pending = True
            return None
        if hit is not False:
            return hit
        if not _in_background():
            cache[key] = hit = _built(build)
            return hit
        kernel_cache.check()  # a refused cache folder is this call's error, not a silent reference forever
        cache[key] = _BUILDING
        _builds["running"] += 1
        _in_flight.append((cache, key))
        _building.pending = True
    try:
        threading.Thread(target=_build_in_background, args=(cache, key, build), daemon=True,
                         name="phylanx-fused-build").start()
    except BaseException:  # no thread to be had (a thread limit): nothing is being built, the reference runs
        _finish(cache, key, False)
    return None


def _built(build):
    try:
        return build()
    except kernel_cache.UnsafeCacheError:
        raise  # the user must hear of a cache folder others can write to, not get slower code silently
    except Exception:  # noqa: BLE001 - any failure to build means: use the reference
        return None


class _Exiting(Exception):
    """The interpreter began to exit while a build waited for another process: it stops before Numba's work."""


def elsewhere(kind: str, source: str) -> None:
    """In a background build, have the ``ELSEWHERE`` hooks compile ``source`` first (see there), unless this
    process has its module already. Meanwhile the interpreter's exit does not wait for this build (it only waits
    for another process's reply); if the exit began meanwhile, the build stops here (``_Exiting``: no kernel)."""
    if not getattr(_building, "background", False) or kernel_cache.loaded(kind, source):
        return
    with _lock:
        _builds["away"] += 1
    try:
        for hook in ELSEWHERE:
            hook(kind, source)
    finally:
        with _lock:
            _builds["away"] -= 1
            _builds_done.notify_all()
            exiting = _builds["exiting"]
    if exiting:
        raise _Exiting


def _build_in_background(cache, key, build):
    _building.background = True
    try:
        hit = _built(build)
    except kernel_cache.UnsafeCacheError:
        hit = False  # not built: the next call checks the folder again, and raises
    _finish(cache, key, hit)


def _finish(cache, key, hit):
    """The build of ``cache[key]`` ended with ``hit`` (False: not built, asked again by the next call)."""
    with _lock:
        mine = [i for i, (c, k) in enumerate(_in_flight) if c is cache and k == key]
        if not mine:  # (a fork's child dropped it: not this process's build)
            return
        del _in_flight[mine[0]]
        if hit is False:
            cache.pop(key, None)
        else:
            cache[key] = hit
        _builds["running"] -= 1
        _builds_done.notify_all()


def _after_fork_in_child():
    """A child made by fork() has none of its parent's build threads: what they were building is asked again, and
    its exit waits for nothing (it would have waited EXIT_WAIT_SECONDS for builds that never end); the lock may have
    been held by one of them at the fork, so it is new."""
    global _lock, _builds_done
    _lock = threading.Lock()
    _builds_done = threading.Condition(_lock)
    for cache, key in _in_flight:
        if cache.get(key) is _BUILDING:
            cache.pop(key, None)
    _in_flight.clear()
    _builds["running"] = _builds["away"] = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def wait_for_builds(timeout: float | None = None) -> bool:
    """Wait until no kernel is being built in the background; False if ``timeout`` passed first."""
    with _lock:
        return _builds_done.wait_for(lambda: _builds["running"] == 0, timeout)


def _at_exit():
    """No build starts once the interpreter exits, and those inside Numba/LLVM are waited for: a daemon thread
    still compiling while the interpreter finalises can crash the process (as the native tier found)."""
    with _lock:
        _builds["exiting"] = True
        _builds_done.wait_for(lambda: _builds["running"] - _builds["away"] <= 0, EXIT_WAIT_SECONDS)


if hasattr(threading, "_register_atexit"):  # before atexit hooks and finalisation, as concurrent.futures does
    threading._register_atexit(_at_exit)
