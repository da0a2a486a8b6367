"""The threads lazy calls (``f.lazy``) run on: a small pool of daemon threads.

``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits, so a call that closing
the runtime cancelled but that is still inside a kernel (a kernel finishes first) kept the process alive until it
ended; a driver blocked forever would have kept it alive for good. Here the threads are daemons; at exit the pool
waits only for the calls nobody cancelled (``wait_at_exit``), as concurrent.futures waits for its own, and before
the ``atexit`` hooks run (Dask's client closes in one: a pending call on a cluster still needs it)."""
from __future__ import annotations

import queue
import threading
import weakref
from concurrent.futures import wait


class DriverPool:
    """Up to ``size`` daemon threads running ``submit``-ted functions in order; a thread starts only when none is
    idle. ``shutdown(wait=True)`` lets what was submitted finish first."""

    def __init__(self, size: int, name: str):
        self.size, self.name = size, name
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = threading.Semaphore(0)  # one count per thread waiting for work
        self._lock = threading.Lock()
        self._shut = False

    def submit(self, fn, *args) -> None:
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot run new calls after the driver pool shut down")
            self._queue.put((fn, args))
            if self._idle.acquire(blocking=False) or len(self._threads) >= self.size:
                return
            t = threading.Thread(target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True)
            self._threads.append(t)
        t.start()

    def _work(self):
        while True:
            job = self._queue.get()
            if job is None:
                return
            fn, args = job
            fn(*args)  # LazyCall._run: it keeps every error for its future
            del job, fn, args
            self._idle.release()

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            self._shut = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)  # after every call submitted: those run first (a cancelled one returns at once)
        if wait:
            for t in threads:
                t.join()


_WAITED: weakref.WeakSet = weakref.WeakSet()  # LazyCalls pending: waited for at exit unless cancelled


def pending(call) -> None:
    """Wait for ``call`` (a LazyCall) at interpreter exit unless it is done or cancelled by then."""
    _WAITED.add(call)


def wait_at_exit():
    wait([call for call in list(_WAITED) if not call.cancelled()])  # its error is its caller's, not the exit's


_register = getattr(threading, "_register_atexit", None)  # runs before atexit hooks (as concurrent.futures' does)
if _register is not None:
    _register(wait_at_exit)
else:  # pragma: no cover - Python < 3.9 (not supported)
    import atexit

    atexit.register(wait_at_exit)
