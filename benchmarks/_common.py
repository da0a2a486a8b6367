"""Shared helpers for the hand-run benchmarks: runtime choice, median timing, plain-text tables."""
from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence

import phylanx_py as px

DASK_WORKERS = 2  # worker processes of the benchmark's Dask LocalCluster, one thread each


def dask_runtime(n_workers: int = DASK_WORKERS, env: dict | None = None):
    """A fresh ``LocalCluster`` of ``n_workers`` single-threaded worker processes on 127.0.0.1, its client
    wrapped by ``px.runtime.dask(client=...)``. The runtime does not own a client it is given, so the cluster and
    client go in ``rt.bench_owned`` and ``close_runtime`` closes them. ``rt.executor.client`` is the client.
    ``env``: environment variables of the worker processes."""
    import warnings

    import distributed

    # Large NumPy inputs travel inside task specifications (the runtime's design; also dask.array's from_array),
    # and Dask warns about the graph size from its event-loop thread, where a catch_warnings block does not reach.
    warnings.filterwarnings("ignore", message=".*[Ll]arge graph.*", category=UserWarning)
    import dask
    from phylanx_py.runtime.dask_runtime import WORKER_MALLOC_ENV

    # the runtime's malloc thresholds, and the caller's variables, before the worker processes start
    pre = {**dask.config.get("distributed.nanny.pre-spawn-environ", {}), **WORKER_MALLOC_ENV, **(env or {})}
    saved = {k: os.environ.get(k) for k in pre}
    try:
        with dask.config.set({"distributed.nanny.pre-spawn-environ": pre}):
            cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                               host="127.0.0.1", dashboard_address=":0")
    finally:  # the nannies set these in this process too: the client's own thread settings stay as they were
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        client = distributed.Client(cluster)
        rt = px.runtime.dask(client=client)
    except BaseException:
        cluster.close()
        raise
    rt.bench_owned = [client, cluster]
    return rt


# Runtime names accepted by ``--runtime``. To add one, add an entry here; argparse picks it up.
RUNTIMES: dict[str, Callable[[], object]] = {
    "local": lambda: px.runtime.local(),
    "sync": lambda: px.runtime.synchronous(),
    "dask": dask_runtime,
}


def make_runtime(name: str):
    """The runtime called ``name`` (one of RUNTIMES), freshly made."""
    try:
        return RUNTIMES[name]()
    except KeyError:
        raise ValueError(f"unknown runtime {name!r}; choose from {sorted(RUNTIMES)}") from None


def close_runtime(rt) -> None:
    """Release the runtime's resources if it has a ``close`` (thread pools, clients), then whatever the benchmark
    started for it (``rt.bench_owned``: a Dask client and cluster)."""
    close = getattr(rt, "close", None)
    if callable(close):
        close()
    for thing in getattr(rt, "bench_owned", ()):
        thing.close()


def median_time(fn: Callable[[], object], repeats: int, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeats`` calls, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def native_compiles_running() -> bool:
    """A native-tier compile runs in the background (runtime/native/loop.py names its threads so)."""
    import threading

    return any(t.name == "phylanx-native-compile" for t in threading.enumerate())


def settle_native(f, call: Callable[[], object], limit: float = 60.0) -> tuple[int, float]:
    """Call ``call()`` (a call of the compiled function ``f``) until ``f``'s native tier has nothing left to do: no
    loop still interpreted "so far" or "not run yet", nothing compiling or choosing between variants, no background
    compile running (at most ``limit`` seconds); once the whole function runs natively, only its own line counts (its
    loops' kernels then never run, so they never finish choosing). A tiered JIT's steady state is measured after
    this, as one measures any JIT after its warm-up; (calls made, seconds taken) say what the warm-up cost."""
    t0 = time.perf_counter()
    calls = 0
    while time.perf_counter() - t0 < limit:
        call()
        calls += 1
        busy = native_compiles_running()
        lines = f.explain().splitlines()
        whole = [line for line in lines if line.startswith("function at") and "-> native" in line]
        # ("not run yet": a loop the floor has not yet run through the tree, as in a function whose first calls
        # ran the plain function beside its translation; NPBench's deriche settled after one call on that)
        if not busy and not any(w in line for line in whole or lines
                                for w in ("so far", "compiling", "probing", "measuring", "not run yet")):
            break
        time.sleep(0.02)
    return calls, time.perf_counter() - t0


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print rows under headers as aligned plain text: first column left-aligned, the others right-aligned."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r):
        pairs = enumerate(zip(r, widths, strict=True))
        padded = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in pairs]
        return "  ".join(padded).rstrip()

    print(line(cells[0]))
    print("  ".join("-" * w for w in widths))
    for r in cells[1:]:
        print(line(r))


def _fmt(c: object) -> str:
    return f"{c:.3f}" if isinstance(c, float) else str(c)


def threadpool_summary() -> str:
    """One line per BLAS/OpenMP pool from threadpoolctl, if it is installed (it is not a dependency)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl not installed (pip install threadpoolctl to show BLAS threads)"
    pools = threadpool_info()
    if not pools:
        return "threadpoolctl: no thread pools found"
    return "\n".join(
        f"threadpoolctl: {p.get('internal_api')} {p.get('version')} ({p.get('user_api')}), "
        f"num_threads={p.get('num_threads')}"
        for p in pools
    )
