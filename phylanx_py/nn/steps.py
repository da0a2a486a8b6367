"""Where training steps run: in the calling thread, on the process's one synchronous runtime (not on pool threads
that would fight BLAS for the cores)."""
from __future__ import annotations

import contextlib
import functools
import sys

from phylanx_py import runtime


def step_runtime():
    """Where one process runs its training steps: in the calling thread when the current runtime is the local
    thread pool. A step's tree is a chain of matmuls that BLAS already spreads over the cores; pool threads each
    running BLAS fight it (benchmarks/train.py: 8.2 ms a step on the pool, 4.0 ms in the calling thread)."""
    if type(runtime.current().executor) is runtime.LocalPoolExecutor:
        return runtime.using(synchronous_runtime())
    return contextlib.nullcontext()


@functools.cache
def synchronous_runtime():
    """The one synchronous runtime of this process (training steps here and on Dask workers run on it). Every
    primitive runs inline (no array is too large): in the calling thread a task would run at once anyway, and its
    future, done-callback and bookkeeping cost ~10-20 us each, for the 20-40 large nodes of a step."""
    return runtime.synchronous(inline_elements=sys.maxsize)
