"""Evaluation of the IR as futures: executors, runtimes, and the evaluator (never parses Python)."""
from __future__ import annotations

from . import native as _native  # noqa: F401 - registers the native tier (loop_tiers.py)
from .base import Runtime
from .dask_runtime import dask as _dask
from .executors import LocalPoolExecutor, SynchronousExecutor
from .select import current, default, set_default, using


def local(workers: int | None = None, *, inline_elements: int | None = None, progress: bool | None = None) -> Runtime:
    """The default kind of runtime: a local thread pool of ``workers`` threads (default: one per core).
    ``progress``: a progress line for calls longer than a second (None: when stderr is a terminal)."""
    kw = {} if inline_elements is None else {"inline_elements": inline_elements}
    return Runtime(LocalPoolExecutor(workers), progress=progress, **kw)


def dask(*args, **kwargs) -> Runtime:
    """A runtime on a Dask cluster (see runtime/dask_runtime.py); distributed is imported on first use."""
    return _dask(*args, **kwargs)


def synchronous(*, inline_elements: int | None = None) -> Runtime:
    """Everything in the calling thread, in program order: for debugging. ``inline_elements``: as ``local``'s
    (arrays above it are tasks, run at once, with a future each); ``sys.maxsize`` runs every primitive inline, with
    no future, as the training steps do (phylanx_py/nn/steps.py)."""
    kw = {} if inline_elements is None else {"inline_elements": inline_elements}
    return Runtime(SynchronousExecutor(), **kw)


__all__ = ["Runtime", "current", "dask", "default", "local", "set_default", "synchronous", "using"]
