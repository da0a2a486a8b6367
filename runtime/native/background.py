"""Background compiles of the native tier: the thread a kernel compiles in (``in_background``), the interpreter's
switch interval while one runs, the compile process asked first (``warm_elsewhere``), and the interpreter's exit and
fork() while compiles run (tiering.py decides when to compile; this module owns how a compile runs beside the
caller)."""
from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
import warnings

from phylanx_py.primitives import kernel_builds

from . import compile_process

# A background compile is Python calling LLVM through ctypes, which gives up the GIL at every call and then waits
# a whole switch interval (5 ms) to get it back from an interpreter thread that keeps it: a kernel that compiles in
# 0.5 s alone was still compiling after four interpreted calls of 1 s (heat_1d, 1000 steps, fresh cache), so the
# loop never went native. While a compile runs, the interval is COMPILE_SWITCH_INTERVAL.
COMPILE_SWITCH_INTERVAL = 2e-4
_compiling = {"threads": 0, "interval": None, "set": None}
_compiling_lock = threading.Lock()


_thread = threading.local()
# Background compiles and interpreter exit: a daemon thread still inside Numba/LLVM while the interpreter finalises
# crashed the process (SIGSEGV at exit, 1 run in 6 of NPBench's fdtd_2d). At exit (``_at_exit``) no compile starts
# in this process any more, and those running are waited for (EXIT_WAIT_SECONDS at most); a thread only waiting
# for the compile process's reply is not waited for, and stops when the reply comes.
EXIT_WAIT_SECONDS = 120
_exit = {"exiting": False, "inside": 0}  # "inside": background threads compiling in this process now
_exit_cond = threading.Condition()


class Exiting(Exception):
    """The interpreter is exiting: a background compile stops instead of starting Numba's work."""


def warm_elsewhere(loader: str, source: str, sig) -> None:
    """In a background compile (``in_background``), have the compile process compile ``source`` first
    (compile_process.py), so that the thread's own compile is a load from the kernel cache."""
    if not getattr(_thread, "background", False):
        return
    _inside(False)
    try:
        compile_process.warm(loader, source, sig)
    finally:
        _inside(True)


def _fused_elsewhere(kind: str, source: str) -> None:
    """A fused kernel built in a background thread (primitives/kernel_builds.py) is compiled by the compile process
    first, as a native kernel is: the thread's build is then a load from the kernel cache."""
    compile_process.warm(kind, source, ())


kernel_builds.ELSEWHERE.append(_fused_elsewhere)


def _inside(now: bool):
    """This background thread compiles in this process from now (True) or not (False); raises Exiting rather
    than start to when the interpreter is exiting."""
    with _exit_cond:
        if now and _exit["exiting"]:
            raise Exiting("the interpreter is exiting")
        if getattr(_thread, "inside", False) != now:
            _exit["inside"] += 1 if now else -1
            _thread.inside = now
            _exit_cond.notify_all()


def _at_exit():
    with _exit_cond:
        _exit["exiting"] = True
        _exit_cond.wait_for(lambda: _exit["inside"] <= 0, timeout=EXIT_WAIT_SECONDS)


_register_at_exit = getattr(threading, "_register_atexit", None)  # before atexit hooks and finalisation
if _register_at_exit is not None:
    _register_at_exit(_at_exit)


def _after_fork_in_child():
    """A child made by fork() has none of its parent's compile threads: its exit waits for none of them (it would
    have waited EXIT_WAIT_SECONDS), its switch interval is the one they had lowered it from, and the locks they may
    have held at the fork are new (the compile process's pipe is the parent's: compile_process drops it)."""
    global _exit_cond, _compiling_lock
    _exit_cond = threading.Condition()
    _exit["inside"] = 0
    _compiling_lock = threading.Lock()
    if _compiling["threads"] and sys.getswitchinterval() == _compiling["set"]:
        sys.setswitchinterval(_compiling["interval"])
    _compiling["threads"] = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def compile_quietly(kernel, sig):
    """``kernel.compile(sig)`` without Numba's performance advice (``np.dot`` on a strided slice is told it would be
    faster on a contiguous one: the user's code took that slice, and the plain function makes the same call)."""
    from numba.core.errors import NumbaPerformanceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumbaPerformanceWarning)
        return kernel.compile(sig)


def load_cached(kernel, sig):
    """``kernel``'s machine code for ``sig`` from Numba's disk cache, added to it, or None when the cache does not
    have it: never a compile (what ``Dispatcher.compile`` does first; Numba's internals, so any surprise there is
    None too: the kernel is then compiled in the background)."""
    try:
        from numba.core import sigutils

        args, _ = sigutils.normalize_signature(tuple(sig))
        existing = kernel.overloads.get(tuple(args))
        if existing is not None:
            return existing.entry_point
        cres = kernel._cache.load_overload(tuple(sig), kernel.targetctx)
        if cres is None:
            return None
        if not cres.objectmode:
            kernel.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
        kernel.add_overload(cres)
        return cres.entry_point
    except Exception:  # noqa: BLE001 - see above
        return None


@contextlib.contextmanager
def short_interval():
    """The switch interval at most ``COMPILE_SWITCH_INTERVAL`` while any thread is inside (a background compile;
    the Python work of a request asked ahead, tiering.py): such a thread holding the interpreter for a whole default
    interval (5 ms) would make a caller's 3.5 ms call wait that long."""
    with _compiling_lock:
        if _compiling["threads"] == 0:
            _compiling["interval"] = sys.getswitchinterval()
            sys.setswitchinterval(min(_compiling["interval"], COMPILE_SWITCH_INTERVAL))
            _compiling["set"] = sys.getswitchinterval()  # (held in microseconds: read back, not computed)
        _compiling["threads"] += 1
    try:
        yield
    finally:
        with _compiling_lock:
            _compiling["threads"] -= 1
            # put it back unless the program set an interval of its own meanwhile: that one stays
            if _compiling["threads"] == 0 and sys.getswitchinterval() == _compiling["set"]:
                sys.setswitchinterval(_compiling["interval"])


def in_background(compile_fn, *args) -> threading.Thread:
    """Run ``compile_fn(*args)`` in a thread of its own (returned), the switch interval short while any such
    thread runs."""
    def run():
        _thread.background = True
        try:
            _inside(True)
        except Exiting:
            return
        try:
            with short_interval():
                compile_fn(*args)
        except Exiting:
            pass
        finally:
            _inside(False)

    # in the caller's context: its registry scope (a test's toy primitives), which the source analyses read
    thread = threading.Thread(target=contextvars.copy_context().run, args=(run,), daemon=True,
                              name="phylanx-native-compile")
    thread.start()
    return thread
