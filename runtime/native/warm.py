"""Kernels compiled before, in this process or an earlier one: native from a signature's first call.

After a kernel compiles, a mark goes into the kernel cache's folder (``native_<digest>.ok``, by the digest of the
kernel's helpers, source and fast versions): the Numba argument types it was compiled for, one line each with Numba's
version, and ``kept`` once a whole function's kernel was timed faster than the floor's choice. A signature lowered
later (here or in another process) to the same kernel finds the mark at its first call: with Numba already running
and its argument types marked, the kernel is loaded in that call (Numba's disk cache: milliseconds); otherwise it is
compiled in the background after ``MARKED_SECONDS`` interpreted, not ``HOT_SECONDS`` (tiering.py). A straight-line
function (whole.py waits ``STRAIGHT_SECONDS`` of calls before lowering it) has a mark of its own, by its file, line,
IR and argument kinds, written when its kernel was kept: it is lowered at its first call.

A mark only says *when* to compile: the compile is the ordinary one, of the source generated in this process,
through the verified kernel cache (primitives/kernel_cache.py). A stale or forged mark costs a compile at another
time, never runs anything read from disk."""
from __future__ import annotations

import os
import sys
import threading

from phylanx_py.primitives import kernel_cache

from phylanx_py.errors import UnsafeCacheError

from .helpers import helpers_for

KEPT = "kept"
_MARKS: dict = {}  # path -> frozenset of the mark's lines (read once per process, updated as marks are written)
_LOCK = threading.RLock()  # _rewrite reads (which may take it) while holding it


def kernel_key(printed) -> str:
    """The digest a kernel's mark is found by: its helpers, its source and the lines of its fast versions."""
    versions = ",".join(str(v) for v in sorted(printed.versions()))
    return kernel_cache.digest(f"{helpers_for(printed.helpers)}\0{printed.source}\0{versions}")


def function_key(fn, fast) -> str:
    """The digest a straight-line function's mark is found by: where it is, its IR and the arguments' kinds."""
    return kernel_cache.digest(f"{fn.loc.filename}:{fn.loc.lineno}\0{fn!r}\0{fast!r}")


def code_key(pyfunc) -> str:
    """The digest a Python function's own mark is found by (its file, name, line and bytecode): written when a
    whole-function kernel of it is kept, read before its first call (``kept_code``)."""
    c = pyfunc.__code__
    return kernel_cache.digest(f"{c.co_filename}\0{c.co_qualname}\0{c.co_firstlineno}\0{c.co_code.hex()}\0"
                               f"{c.co_names!r}")


def kept_code(pyfunc) -> bool:
    """Whether a whole-function kernel of ``pyfunc`` was kept before (here or in an earlier process): its first call
    then translates in the call and loads it (runtime/beside.py leaves such a function alone)."""
    return enabled() and KEPT in marks(code_key(pyfunc))


def sig_line(sig) -> str:
    import numba

    return f"numba {numba.__version__}: {', '.join(str(t) for t in sig)}"


def enabled() -> bool:
    """``PHYLANX_NATIVE_WARM=0``: marks are written but not followed (every signature waits for its calls, as with
    an empty cache; the test suite runs so, its tests of the tiers' order of events being about that order)."""
    return os.environ.get("PHYLANX_NATIVE_WARM", "1").strip() != "0"


def marks(key: str) -> frozenset:
    """The lines of ``key``'s mark (empty: none, or marks not followed)."""
    if not enabled():
        return frozenset()
    return _read(key)


def _read(key: str) -> frozenset:
    try:
        path = _path(key)
    except (OSError, UnsafeCacheError):  # a refused folder: the compile says so
        return frozenset()
    found = _MARKS.get(path)
    if found is None:
        try:
            with open(path, encoding="utf-8") as f:
                found = frozenset(line.strip() for line in f if line.strip())
        except (OSError, UnicodeDecodeError):
            found = frozenset()
        with _LOCK:
            found = _MARKS.setdefault(path, found)
    return found


def numba_started() -> bool:
    """Whether Numba runs in this process already: imported, its CPU target's contexts made (by any compile or
    cache load). Starting them takes about a second (import 0.4 s, contexts 0.6 s here), never charged to a call:
    until then a marked kernel is compiled in the background, after that it loads in the call (Numba's
    private attribute: a Numba without it loads in the background)."""
    registry = sys.modules.get("numba.core.registry")
    target = getattr(registry, "cpu_target", None)
    return target is not None and "_toplevel_target_context" in vars(target)


def mark(key: str, line: str) -> None:
    """Add ``line`` to ``key``'s mark (a cache folder that cannot be written to: no mark, nothing else changes).
    The file is read again first (another process may have added lines since this one read it); two processes
    writing at the same moment may still lose a line of each other's: a signature compiled once more, later."""
    if line in _read(key):
        return
    _rewrite(key, lambda lines: lines | {line})


def unmark(key: str) -> None:
    """Drop ``key``'s ``kept`` line (a kernel that lost to the floor's choice: timed again by a later process);
    its argument types stay marked (their machine code is still in the cache)."""
    _rewrite(key, lambda lines: lines - {KEPT})


def rewrite(key: str, change) -> None:
    """Replace ``key``'s mark by ``change(its lines)`` (early.py's lines, one per signature)."""
    _rewrite(key, change)


def _rewrite(key: str, change) -> None:
    try:
        path = _path(key)
        with _LOCK:
            _MARKS.pop(path, None)
            lines = change(_read(key))
            _MARKS[path] = lines
            if lines:
                kernel_cache.write(path, ("\n".join(sorted(lines)) + "\n").encode())
            else:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
    except (OSError, UnsafeCacheError):
        pass


def _after_fork_in_child():
    global _LOCK
    _LOCK = threading.RLock()  # held by a thread the child does not have, maybe


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _path(key: str) -> str:
    return os.path.join(kernel_cache.kernel_dir(), f"native_{key}.ok")
