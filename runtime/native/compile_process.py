"""Compiling native kernels in another process, so that the caller keeps its interpreter lock.

A kernel compiled in a background thread shares the interpreter lock with the caller: Numba's typing and lowering
are Python, and the caller's calls ran 1.2-1.7x slower (10x at worst) for the seconds a compile took. A background
compile asks this module first (``warm``): one child process per parent, started on the first request, compiles
the same generated source for the same types through the verified kernel cache (primitives/kernel_cache.py), so
Numba's machine code is on disk when the background thread then compiles it itself: that compile is a cache load.
What runs is still the source generated and compiled in this process (the cache's trust model holds: the child is
this user's own process writing this user's private cache folder). Any failure of the child (it cannot start,
the kernel does not compile there, the cache folder is refused) only means the thread compiles as before.

Which process: the compile server of this user (compile_server.py: one process kept between programs, reached
through a Unix socket in this user's private folder, ready when a later program's first request comes), else, when
there can be none (``PHYLANX_COMPILE_SERVER=0``, no private folder, a server that cannot start), a child of this
process of its own: compile_child.py reads requests on its stdin and exits at its end, that is when this process
exits or closes it. ``PHYLANX_COMPILE_PROCESS=0`` keeps every compile in the thread.

Priority: the child compiles niced (``PHYLANX_COMPILE_NICE``, default 19: compile_child.lower_priority), on what the
caller leaves idle. A caller that fills every core (NumPy's BLAS threads, a training loop) left it a few percent of
a core: a fused kernel of simplemlp's ReLU gradient took 10 s to arrive instead of 0.5-2, and the NumPy chain ran
5x slower than it meanwhile. So a request still unanswered after ``PHYLANX_COMPILE_RISE`` seconds (default 2) rises
to the caller's priority for the rest of its compile (``_risen``), and the next request goes back down.

Ahead of heat: with the compile server, a kernel is asked for at its signature's first run (``ask_ahead``, from
tiering.Signatures), not only once it has run ``HOT_SECONDS`` interpreted. The caller pays a queue's put; a thread
of its own (``_ahead_worker``) makes the request (the module's text), sends it and waits, so the kernel is on disk
when the entry gets hot, whose own request is then answered at once (the server keeps what it compiled). Why:
NPBench's kernels of 5-12 ms a call got hot only at their 7th-9th call, 0.15-0.5 s after their first (spmv asked
at 0.48 s, compiled by 1.15 s; Numba's first call took 0.76 s). Only with the server: a per-program child would
spend the program's own start on kernels it may never need, and the test suite, which runs without the server,
keeps its requests as they were."""
from __future__ import annotations

import os
import pickle
import queue
import select
import subprocess
import sys
import threading
import time

from phylanx_py.primitives import kernel_cache

from phylanx_py import turns
from phylanx_py.errors import PhylanxError

from . import blas_pool, compile_server
from .compile_server import HEADER, LOWERING  # a request's length (the child's pipe and the server's socket alike)

_lock = threading.Lock()  # one request at a time on the pipe (the child compiles one kernel at a time anyway)
_child: list = [None]  # the Popen, or False once it could not be started (no second try)
_server: list = [None]  # the link to the compile server (compile_server.Link), or False once none can be had
_retired: list = []  # children that were replaced while finishing a compile (``_risen``): reaped later
RISES = [0]  # requests that rose to the caller's priority (tests read it)
AHEAD = [0]  # requests sent ahead of heat and answered (``ask_ahead``; tests read it)
LOWERED = [0]  # signatures the server lowered for this process (``lowered``; tests read it)
LINK_WAIT = 0.3  # seconds a lowering waits for the server's link being made (``lowered``)
_ahead: list = [None, queue.SimpleQueue()]  # the ahead worker's thread (None: not started here), its requests
AHEAD_QUEUED = 4  # requests waiting ahead at most: more are dropped (each is asked again once hot)


def enabled() -> bool:
    return os.environ.get("PHYLANX_COMPILE_PROCESS", "1") != "0" and (_child[0] is not False or _server_usable())


def _server_usable() -> bool:
    return compile_server.enabled() and _server[0] is not False


def warm(loader: str, source: str, sig, server_only: bool = False) -> bool:
    """Have the child compile ``source`` (loaded as ``tiering.<loader>`` loads it) for the Numba types ``sig``;
    True when it did. Blocks the calling (background) thread, never holding the interpreter lock meanwhile."""
    if not enabled():
        return False

    # the folder this process uses now (a test or a program may have changed it since the child started)
    data = pickle.dumps((kernel_cache.CACHE_DIR, loader, source, tuple(sig)))
    request = HEADER.pack(len(data)) + data

    with _lock:
        _reap()
        if _server_usable():
            reply = _ask_server(request)
            if reply is not None:
                return reply == b"1"
        if server_only:  # (a request ahead of heat: never a child's, module docstring)
            return False
        child = _start()
        if child is None:
            return False
        try:
            _write_all(child.stdin, request)
            if not _answered(child, rise_seconds()):
                child = _risen(child, request)
            reply = child.stdout.read(1) if child is not None else b""
        except (OSError, ValueError):
            reply = b""
        if reply == b"":  # the child died: compile in the thread from now on
            if child is not None:
                _stop(child)
            _child[0] = False
            return False
        return reply == b"1"


def lowered(request: tuple):
    """``whole_lower.lowering(*request)`` done by the compile server (compile_child.lower_request), for the job beside
    the calls, which waits for it without the interpreter lock; None when this process is to lower it itself: no
    server linked yet, its link busy with a compile (never behind one), or the server gone. While the link is being
    made (``_start_locked``: a running server's in milliseconds, a new one's as soon as it listens) it waits up to
    ``LINK_WAIT``: lowered here beside busy calls, NPBench's lu took 0.3-0.5 s."""
    if os.environ.get("PHYLANX_COMPILE_LOWER", "1") == "0" or not _server_compiles() or \
            not _lock.acquire(timeout=LINK_WAIT if _starting[0] else 0):
        return None
    try:
        link = _server[0]
        if not link:
            return None
        data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            link.send(HEADER.pack(len(data) | LOWERING) + data)
            data = link.sized_reply()
        except OSError:
            data = None
        if data is None:  # it ended (retired, stopped, killed): the next compile request starts another
            link.close()
            _server[0] = None
            return None
        LOWERED[0] += 1
        return pickle.loads(data)  # noqa: S301 - this user's compile server, on its private socket
    finally:
        _lock.release()


def ahead_wanted() -> bool:
    """Whether kernels are asked for ahead of heat (module docstring): the server's, with its worker running."""
    return _ahead[0] is not None and _server_compiles()


def _server_compiles() -> bool:
    return os.environ.get("PHYLANX_COMPILE_PROCESS", "1") != "0" and _server_usable()


def ask_ahead(make, *args) -> None:
    """``warm(*make(*args))`` in the ahead worker (``make``: a request, or None for none), unless as many requests
    as ``AHEAD_QUEUED`` wait."""
    q = _ahead[1]
    if q.qsize() < AHEAD_QUEUED:
        q.put((make, args))


def _ahead_worker(q) -> None:
    while True:
        make, args = q.get()
        if not _server_usable():
            continue
        try:
            request = make(*args)
            if request is not None:
                warm(*request, server_only=True)
        except Exception:  # noqa: BLE001 - a compile ahead only saves time: its entry asks again once hot
            pass
        AHEAD[0] += 1


def _link():
    """The link to this program's compile server, connected (to a running one, or to one started now), or None
    when none can be had here (then never again in this process: its own child compiles)."""
    link = _server[0]
    if link:
        return link
    link = None
    try:
        path = compile_server.address()
    except (OSError, PhylanxError):  # no private folder for it (UnsafeCacheError): a child of our own
        path = None
    if path:
        link = compile_server.connect(path)
        if link is None:
            env = {**os.environ, "PHYLANX_COMPILE_TARGET_NICE": str(low_priority(_priority()))}
            link = compile_server.start(path, env)
    _server[0] = link if link is not None else False
    return link


def _ask_server(request: bytes) -> bytes | None:
    """The server's reply to ``request`` (b"1" compiled), or None when no server answers (its own child then
    asked). A server that ended meanwhile (retired, stopped, killed) is replaced once."""
    for _ in range(2):
        link = _link()
        if link is None:
            return None
        try:
            link.send(request)
            reply = link.reply() if link.answered(rise_seconds()) else _server_risen(link, request)
        except OSError:
            reply = b""
        if reply:
            return reply
        link.close()
        _server[0] = None
    _server[0] = False
    return None


def _server_risen(link, request: bytes) -> bytes:
    """``_risen`` for the server: reniced to this process's priority until it answers where this process may lower
    another's niceness; otherwise the server finishes the compile niced (its kernel is cached all the same) and the
    request goes to a child of this process started at its priority."""
    RISES[0] += 1
    own = _priority()
    with blas_pool.fewer_threads():
        try:
            compile_server.renice(link.pid, own)  # (its every thread: it compiles in a connection's)
            while not link.answered(0.5):
                compile_server.renice(link.pid, own)
        except PermissionError:
            link.close()
            _server[0] = None
            return _own_child_at_our_priority(request)
        except (OSError, AttributeError):  # gone: the read that follows tells
            pass
        reply = link.reply()
    return reply  # (the server goes back to its own niceness after each request; b"": it ended)


def _own_child_at_our_priority(request: bytes) -> bytes:
    """``request`` compiled by a new child of this process at its priority, which then goes back down."""
    child = None
    try:
        child = _child_at_our_priority(request, _child[0])
        reply = child.stdout.read(1) if child is not None else b""
    except (OSError, ValueError):
        reply = b""
    if child is not None:
        try:
            os.setpriority(os.PRIO_PROCESS, child.pid, low_priority(_priority()))
        except OSError:
            pass
    return reply


def _child_at_our_priority(request: bytes, old):
    """A new child started at this process's priority in place of ``old`` (if any: retired, its stdin closed, it
    finishes what it compiles niced and ends), sent ``request``, once it has answered; None when none starts."""
    if old:
        old.stdin.close()
        _retired.append(old)
    _child[0] = None
    child = _start(step=0)
    if child is None:
        return None
    _write_all(child.stdin, request)
    _answered(child, None)
    return child


def nice_step() -> int:
    """``PHYLANX_COMPILE_NICE``: how much lower than the caller's the child's priority is (19, the lowest, by
    default; 0 leaves it at the caller's)."""
    try:
        return max(int(os.environ.get("PHYLANX_COMPILE_NICE", "19")), 0)
    except ValueError:
        return 19


def _priority(pid: int = 0) -> int:
    return os.getpriority(os.PRIO_PROCESS, pid) if hasattr(os, "getpriority") else 0


def low_priority(own: int, step: int | None = None) -> int:
    """The niceness the child compiles at: ``own`` (the caller's) plus ``step`` (``nice_step()`` by default), at most
    19."""
    return min(own + (nice_step() if step is None else step), 19)


def rise_seconds() -> float:
    try:
        return float(os.environ.get("PHYLANX_COMPILE_RISE", "2"))
    except ValueError:
        return 2.0


def _answered(child, seconds: float | None) -> bool:
    """The child's reply arrived within ``seconds`` (None: waits for it; so does a platform whose pipes cannot be
    waited on: Windows)."""
    if os.name != "posix":
        return True
    return bool(select.select([child.stdout], [], [], None if seconds is None else max(seconds, 0.0))[0])


def _risen(child, request: bytes):
    """The child that compiles the pending request at this process's priority until it answers; then it goes back
    to its own (raising another process's niceness is always allowed). The same child, reniced, where this process
    may lower another's niceness (root, CAP_SYS_NICE, RLIMIT_NICE), again every half second until it answers (a
    child still starting lowers its priority once more as it starts); otherwise a new child started at this
    priority, to which the request goes again (the old one finishes it niced, its stdin closed, and ends).
    Meanwhile this process's BLAS pools leave it a core (blas_pool.fewer_threads)."""
    RISES[0] += 1
    own = _priority()
    with blas_pool.fewer_threads():
        try:
            os.setpriority(os.PRIO_PROCESS, child.pid, own)
            while not _answered(child, 0.5):
                os.setpriority(os.PRIO_PROCESS, child.pid, own)
        except PermissionError:
            child = _child_at_our_priority(request, child)
            if child is None:
                return None
        except (OSError, AttributeError):  # gone: the read that follows tells
            return child
    try:
        os.setpriority(os.PRIO_PROCESS, child.pid, low_priority(own))
    except OSError:
        pass
    return child


def _reap():
    _retired[:] = [c for c in _retired if c.poll() is None]


_starting = [False]  # a prestart's thread is starting the child
START_DELAY = 0.02  # seconds a prestart's thread waits before it looks for the server (``_start_locked``)


def prestart():
    """Start the child now, from a thread, when a loop or function is first lowered for the native tier: its start
    (an interpreter, phylanx-py and Numba imported: ~1-1.5 s here, niced) then overlaps the 50 ms and more that
    the code runs interpreted before its first compile is asked for, instead of adding to its time to native."""
    ahead = None
    if _ahead[0] is None and _server_compiles():
        # (made here, with the first entry, so that no call pays a thread's start to ask ahead)
        ahead = _ahead[0] = threading.Thread(target=_ahead_worker, args=(_ahead[1],), daemon=True,
                                             name="phylanx-compile-ahead")
    started = _server[0] if _server_usable() else _child[0]
    if started is None and not _starting[0] and enabled():
        # one start at a time: a second thread, started while the first waits in Popen, only waited for the lock
        # (each start cost its caller 3-5 ms: a thread's start waits until the new thread has run); the ahead
        # worker is started by it, not here (a thread's start costs the starter 0.2-0.6 ms: the decorator's)
        _starting[0] = True
        threading.Thread(target=_start_locked, args=(ahead,), daemon=True, name="phylanx-compile-start").start()
    elif ahead is not None:
        ahead.start()


def _start_locked(ahead=None):
    # after a moment, and after a first call running then (for up to ``turns.FIRST_WAIT``): the server's address is
    # a digest of the files of phylanx-py, Numba, NumPy... (1.4-1.8 ms of the interpreter lock), which a decorator's
    # caller and a first call then do not wait for (a call of BLAS operations waits for the lock after each: NPBench's
    # mlp, gemm first calls took 1.4-4x NumPy's); the server's own start takes about a second
    try:
        time.sleep(START_DELAY)
        turns.after_call()  # a first call running beside its translation (decorator.py): after it
        if ahead is not None:
            ahead.start()
        with _lock:
            if not _server_usable() or _link() is None:
                _start()
    finally:
        _starting[0] = False


# The child's start: the packages above compile_child made bare (their modules, without running their
# ``__init__``), so that it imports only what compiling needs: phylanx_py's own package imports the frontend,
# tiled arrays, SPMD and training (``python -m`` would run them all), 0.15-0.2 s of a start that is on the path of
# the first native code (the child starts at decoration, then imports, then readies Numba: about 1 s in all).
# ``primitives`` runs its own: the registry the lowering's modules read as they load.
BOOT = """
import importlib.util, runpy, sys
for name in ("phylanx_py", "phylanx_py.runtime", "phylanx_py.runtime.native"):
    sys.modules[name] = importlib.util.module_from_spec(importlib.util.find_spec(name))
runpy.run_module("phylanx_py.runtime.native.compile_child", run_name="__main__", alter_sys=True)
"""


def _start(step: int | None = None):
    """The running child, started if there is none (``step``: how much lower its priority is than this process's;
    PHYLANX_COMPILE_NICE's by default)."""
    child = _child[0]
    if child is not None and child is not False and child.poll() is None:
        return child
    if child is False:
        return None
    try:
        # unbuffered pipes (raw file objects, no lock): a fork while a background thread waits for a reply left the
        # forked child's copy of a buffered reader locked by a thread it does not have, and closing it there
        # (``_after_fork_in_child``) waited forever (a review: a multiprocessing pool started during a fused build)
        # its priority set from here as it starts, before its imports (~0.3-0.5 s of an interpreter, NumPy and
        # phylanx-py, which at the caller's priority slowed the caller's calls 2-6), and by itself again as it
        # starts (compile_child.lower_priority: an absolute niceness, so the two agree)
        target = low_priority(_priority(), step)
        env = {**os.environ, "PHYLANX_COMPILE_TARGET_NICE": str(target)}
        child = subprocess.Popen([sys.executable, "-c", BOOT],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 close_fds=True, bufsize=0, env=env)
        try:
            os.setpriority(os.PRIO_PROCESS, child.pid, target)
        except (OSError, AttributeError):
            pass
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
    _ahead[:] = [None, queue.SimpleQueue()]  # the parent's worker is not in the child, nor its requests
    _starting[0] = False  # the parent's starting thread is not in the child
    link, _server[0] = _server[0], None
    if link:
        link.close()
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
        link, _server[0] = _server[0], None
        if link:
            link.close()  # the server itself ends when idle (compile_server.stop ends it now)
        child = _child[0]
        _child[0] = None
        for old in _retired:
            _stop(old)
        _retired.clear()
        if child is not None and child is not False:
            try:
                child.stdin.close()
                child.wait(timeout=30)
            except Exception:  # noqa: BLE001 - then by force
                _stop(child)
