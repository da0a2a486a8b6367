"""Where compiled element-wise kernels run: in the calling thread, or cut into row blocks on parallel threads (the
compiled loops release the GIL); how many threads a kernel takes here; how many kernels this thread ran and for how
long (SPMD ranks report where their time went). Used by fused groups (fused.py), optimizer updates
(fused_update.py), fused reductions and row products, and the row kernels of nn_ops.py."""
from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time

import numpy as np

from .environ import raw_reader

# From this size on, a kernel runs on row blocks in parallel threads (the compiled loop releases the GIL).
# Numba's own target="parallel" is not used: its cached kernels fail to load ("No module named '<dynamic>'")
# and its workqueue threading layer is not safe for calls from several threads at once.
PARALLEL_MIN_ELEMENTS = 1 << 18

_thread_setting = threading.local()


@contextlib.contextmanager
def kernel_threads(n: int):
    """``with kernel_threads(n):`` the kernels this thread runs use ``n`` threads. For threads of a Dask worker
    process that are not its task threads (an SPMD rank started through the worker's port, segments/service.py):
    ``get_worker()`` does not know them, and each such rank split its kernels over every core, so two ranks ran
    four threads on two cores."""
    saved = getattr(_thread_setting, "n", None)
    _thread_setting.n = n
    try:
        yield
    finally:
        _thread_setting.n = saved


_threads_raw = raw_reader("PHYLANX_NUM_THREADS")


def _threads() -> int:
    """Threads for one kernel: ``PHYLANX_NUM_THREADS`` when set; the thread's ``kernel_threads``; one inside a
    Dask worker's task (its own threads share the cores); else every core. (Not OMP_NUM_THREADS: a LocalCluster's
    nanny sets it to 1 in the client's own process.)"""
    setting = _threads_raw()  # at every kernel's run: a dict lookup, not os.environ.get's 1 us
    if setting and setting.isdigit() and int(setting) > 0:
        return int(setting)
    n = getattr(_thread_setting, "n", None)
    if n is not None:
        return n
    if "distributed" in sys.modules:
        try:
            sys.modules["distributed"].get_worker()
            return 1
        except ValueError:
            pass
    return os.cpu_count() or 1


_pool = None
# per thread: how many compiled kernels ran (``runs``) and for how long (``seconds``): note_kernel, kernel_runs
KERNEL_RUNS = threading.local()


def _run(kernel, arrays, out=None):
    """The kernel over the broadcast shape (into ``out`` when it has that shape and the kernel's dtype); large
    outputs are cut into row blocks run on parallel threads."""
    shape = arrays[0].shape if arrays else ()
    if any(a.shape != shape for a in arrays):
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    if out is not None and (out.shape != shape or out.dtype != _out_dtype(kernel)):
        out = None
    if math.prod(shape) < PARALLEL_MIN_ELEMENTS:  # (these checks cost more than a small kernel's run: 5 us)
        return _timed(kernel, arrays, out)
    n = min(_threads(), shape[0] if shape else 1)
    if n < 2:
        return _timed(kernel, arrays, out)
    if out is None:
        out = np.empty(shape, _out_dtype(kernel))  # the one signature compiled
    nd = len(shape)

    def block(lo, hi):
        parts = []
        for a in arrays:
            # a's leading axis lines up with the output's only if a has all the dimensions and is not broadcast
            if a.ndim == nd and a.shape[0] == shape[0]:
                parts.append(a[lo:hi])
            else:
                parts.append(a)
        kernel(*parts, out=out[lo:hi])

    _map_blocks(block, _blocks(shape[0], n))
    return out


def _out_dtype(kernel) -> np.dtype:
    return np.dtype(kernel.types[0].split("->")[1])


def _timed(kernel, arrays, out=None):
    """``kernel(*arrays)`` in this thread, counted in ``KERNEL_RUNS`` (SPMD ranks report where their time went).
    The NumPy ufunc inside Numba's DUFunc is called directly: the DUFunc's own ``__call__`` is Python that looks
    for ``__array_ufunc__`` overrides (which the ufunc honours itself) and compiles new signatures (the inputs
    have the one compiled: fused_elementwise casts them), ~1 us a call."""
    t0 = time.perf_counter()
    ufunc = getattr(kernel, "ufunc", kernel)
    try:
        return ufunc(*arrays) if out is None else ufunc(*arrays, out=out)
    finally:
        note_kernel(t0)


def _blocks(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous, non-empty (lo, hi) ranges covering 0..n."""
    bounds = np.linspace(0, n, parts + 1).astype(int)
    return [(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]


def _map_blocks(fn, blocks):
    """``fn(lo, hi)`` of each block (a compiled kernel's run over row blocks), on parallel threads."""
    t0 = time.perf_counter()
    try:
        return _map_blocks_now(fn, blocks)
    finally:
        note_kernel(t0)


def note_kernel(t0: float) -> None:
    """A compiled kernel ran in this thread since ``t0`` (``KERNEL_RUNS``)."""
    KERNEL_RUNS.runs = getattr(KERNEL_RUNS, "runs", 0) + 1
    KERNEL_RUNS.seconds = getattr(KERNEL_RUNS, "seconds", 0.0) + (time.perf_counter() - t0)


def kernel_runs() -> tuple[int, float]:
    """(runs, seconds) of the compiled kernels this thread has run (an SPMD rank reports its own: spmd/rank.py)."""
    return getattr(KERNEL_RUNS, "runs", 0), getattr(KERNEL_RUNS, "seconds", 0.0)


def _map_blocks_now(fn, blocks):
    global _pool
    if len(blocks) == 1:
        return [fn(*blocks[0])]
    if _pool is None:
        from concurrent.futures import ThreadPoolExecutor

        _pool = ThreadPoolExecutor(_threads(), thread_name_prefix="phylanx-fused")
    # the calling thread runs the last block itself: one hand-off fewer, and it would only wait otherwise
    futs = [_pool.submit(fn, lo, hi) for lo, hi in blocks[:-1]]
    last = fn(*blocks[-1])
    return [f.result() for f in futs] + [last]
