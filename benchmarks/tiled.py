"""Benchmark: tiled arrays (data made on the workers) against dask.array on the very same tiles, same cluster.

    python benchmarks/tiled.py                                  # the issue's sizes (needs ~2 GB, a few minutes)
    python benchmarks/tiled.py --n 200000 --repeats 1           # a quick smoke run
    python benchmarks/tiled.py --only lra kmeans                # some of the workloads

One 2-worker ``LocalCluster(processes=True, threads_per_worker=1)`` (OMP/OPENBLAS/MKL/NUMBA_NUM_THREADS=1 in the
workers) wrapped by ``px.runtime.dask(client=client)``. Every input is made on the workers with ``px.tiled``
(``normal``/``random`` plus element-wise math, persisted), in ``--tiles`` row tiles; dask.array works on the same
tile futures through ``TiledArray.to_dask()`` (no copy), so both start from identical data on the same workers.
The NumPy (and Numba) references run in this client process on the gathered data (``np.asarray(X)``) with the
default BLAS threads and 2 Numba threads.

- LRA ``n`` x 20 float64, 10 iterations: ``lra`` of benchmarks/lra.py compiled, on TiledArray X, y (y built on the
  workers from X), vs dask.array as dask-glm writes it (``lra_dask_array``: ``w`` a NumPy array, one gradient
  ``compute()`` per iteration) and the plain function called on dask arrays (a lazy ``w``, one ``compute()``).
- k-means ``n/2`` x 2, k=8, 10 iterations: ``kmeans`` of benchmarks/kmeans.py compiled, on a TiledArray X and NumPy
  initial centroids, vs ``kmeans_dask_array`` (one ``dask.compute`` of the k means per iteration), NumPy and the
  hand-written Numba kernel ``kmeans_numba``.
- the element-wise chain ``exp(-x*x)*sin(x)+2*x-1`` on ``10 n`` float64: the compiled call (its TiledArray result
  is computed and persisted on the workers when the call returns) vs ``client.persist`` of the same function on a
  dask.array + ``wait``; also the chain on the TiledArray outside compiled code + ``persist(wait=True)``.
- matmul ``--size`` square float64, tiles (2, 2) and (4, 1): compiled ``A @ B`` (result persisted on the workers)
  vs dask.array ``A @ B`` persisted + ``wait``, on the same tiles.

Times: the first call (compile, or for dask.array graph building and worker warm-up, + one run) apart from the
steady state (median of ``--repeats`` further calls). "vs dask.array" is relative to the fastest dask.array row of
the section. Targets (issue): LRA >= 3x faster than dask.array, k-means >= 5x, element-wise <= 0.7x dask.array's
time, matmul <= 1x. Every result is checked against NumPy (np.allclose; k-means labels equal) in the same run;
the script exits with status 1 on a mismatch (a missed target only prints "no").
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

import numba
import numpy as np
from _common import close_runtime, dask_runtime, median_time, print_table
from distributed.diagnostics.plugin import SchedulerPlugin
from elementwise import chain, chain_numba
from kmeans import kmeans, kmeans_dask_array, kmeans_numba
from lra import lra, lra_dask_array

import phylanx_py as px

WORKERS = 2
THREADS = 2  # Numba threads for the client-side references
WORKER_ENV = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}
MATMUL_TILES = ((2, 2), (4, 1))
WORKLOADS = ("lra", "kmeans", "elementwise", "matmul")

kmeans_compiled = px.compile(kmeans)
chain_compiled = px.compile(chain)


def matmul(A, B):
    return A @ B


matmul_compiled = px.compile(matmul)


def start_cluster():
    """A 2-worker LocalCluster (one thread each, BLAS/OpenMP/Numba at one thread) and the Dask runtime over it."""
    rt = dask_runtime(WORKERS, env=WORKER_ENV)
    return rt, rt.executor.client


def _worker_threads():
    """Run on a worker: its thread settings as it sees them."""
    env = ",".join(f"{v.split('_')[0]}={os.environ.get(v, '-')}" for v in WORKER_ENV)
    try:
        from threadpoolctl import threadpool_info

        pools = ",".join(f"{p.get('internal_api')}:{p.get('num_threads')}" for p in threadpool_info())
    except ImportError:
        pools = "threadpoolctl not installed"
    return f"{env} (pools {pools})"


def measure(fn, repeats, check=None):
    """(the first call's result if there is no ``check``, the first call's time, the median of ``repeats`` further
    calls, ``check(result)``). A checked result is dropped before the repeats, so it does not hold memory or,
    for dask.array, keys on the cluster that a repeat could find already computed."""
    t0 = time.perf_counter()
    r = fn()
    first = time.perf_counter() - t0
    agrees = True if check is None else bool(check(r))
    kept = r if check is None else None
    del r
    return kept, first, median_time(fn, repeats, warmup=0), agrees


def persisted(client, d):
    """``d`` (a dask collection) persisted on the cluster, once every chunk is there."""
    import distributed

    d = client.persist(d)
    distributed.wait(d)
    return d


class Section:
    """One workload's table: rows (variant, kind, first call s, median s, agrees, traffic); kind is numpy, numba,
    px, px-tiled, px-local, px-plain or dask; traffic: (tasks, MB moved) per iteration on the cluster, or None."""

    def __init__(self, title, repeats, per_iteration=None, client=None):
        self.title, self.repeats, self.per_iteration, self.rows = title, repeats, per_iteration, []
        self.client = client

    def run(self, name, kind, fn, check=None, traffic=False):
        """Time ``fn`` (see ``measure``), add its row, return its result when there is no ``check``. ``traffic``:
        also count the cluster's finished tasks and the bytes its workers sent (Dask transfers and SPMD rings)."""
        before = cluster_counters(self.client) if traffic else None
        kept, first, t, agrees = measure(fn, self.repeats, check)
        moved = None
        if traffic:
            after = cluster_counters(self.client)
            calls = (1 + self.repeats) * (self.per_iteration or 1)
            moved = ((after[0] - before[0]) / calls, (after[1] - before[1]) / calls / 1e6)
        self.rows.append((name, kind, first, t, agrees, moved))
        return kept

    def best(self, kind):
        times = [r[3] for r in self.rows if r[1] == kind]
        return min(times) if times else None

    def print(self):
        t_np, t_da = self.best("numpy"), self.best("dask")
        traffic = any(r[5] is not None for r in self.rows)
        headers = ["variant", "first call ms", "median ms"] + (["ms/iteration"] if self.per_iteration else []) \
            + (["tasks/it", "MB moved/it"] if traffic else []) + ["vs dask.array", "vs numpy", "agrees"]
        out = []
        for name, _, first, t, agrees, moved in self.rows:
            cells = [name, f"{first * 1e3:.1f}", f"{t * 1e3:.1f}"]
            if self.per_iteration:
                cells.append(f"{t * 1e3 / self.per_iteration:.2f}")
            if traffic:
                cells += [f"{moved[0]:.1f}", f"{moved[1]:.2f}"] if moved is not None else ["", ""]
            cells += [f"{t / t_da:.3f}" if t_da else "", f"{t / t_np:.3f}" if t_np else "",
                      "yes" if agrees else "NO"]
            out.append(cells)
        print(self.title)
        print_table(headers, out)
        print()


def close_to(expected, rtol=1e-9, atol=1e-12):
    """A check: the result (gathered if tiled or a dask collection) np.allclose to ``expected``."""
    return lambda r: np.allclose(np.asarray(r), expected, rtol=rtol, atol=atol)


# ---- workloads: each returns its Section(s) and targets (name, phylanx-py median, dask.array median, kind, bound)
def bench_lra(client, args):
    n, cols, it, alpha = args.n, 20, args.iterations, 0.1
    w_true = np.random.default_rng(0).standard_normal(cols)
    X = px.tiled.normal((n, cols), tiles=(args.tiles, 1), seed=0)
    noise = px.tiled.normal((n,), tiles=(args.tiles,), seed=1)
    y = ((X @ w_true + 0.1 * noise) > 0).astype(np.float64).persist(wait=True)
    Xn, yn = np.asarray(X), np.asarray(y)
    Xd, yd = X.to_dask(), y.to_dask()
    plain = lra.__wrapped__

    sec = Section(f"LRA {n:,} x {cols} float64, {it} iterations, {args.tiles} row tiles", args.repeats, it, client)
    w_np = sec.run("numpy (client, gathered X, y)", "numpy", lambda: plain(Xn, yn, alpha, it))
    ok = close_to(w_np)
    sec.run("phylanx-py compiled lra, NumPy X, y, this process", "px-local",
            lambda: on_one_process(lra, Xn, yn, alpha, it), ok)
    lra_spmd = spmd_traffic(lra)
    sec.run("phylanx-py compiled lra, TiledArray X, y: SPMD segment", "px", lambda: lra_spmd(X, y, alpha, it), ok,
            traffic=True)
    print(lra.explain())
    # the two rows above ran one after the other, each a few hundred ms: on this noisy machine the fairer
    # comparison alternates them, call by call, and takes the median of each pair's ratio
    pairs = interleaved(lambda: lra(X, y, alpha, it), lambda: on_one_process(lra, Xn, yn, alpha, it),
                        2 * args.repeats)
    Xn = yn = None
    sec.run("phylanx-py compiled lra, TiledArray X, y: tile tasks (PHYLANX_SPMD=0)", "px-tiled",
            lambda: tiled_path(lra)(X, y, alpha, it), ok, traffic=True)
    sec.run("dask.array, w NumPy, gradient compute() per iteration", "dask",
            lambda: lra_dask_array(Xd, yd, alpha, it), ok, traffic=True)
    sec.run("dask.array, plain lra on dask arrays, one compute()", "dask",
            lambda: plain(Xd, yd, alpha, it).compute(), ok, traffic=True)
    gbps, bound = lra_bandwidth(client, n, cols, it, sec.best("px"))
    print(f"LRA compiled on tiles: {gbps:.1f} GB/s effective (X and y read once per iteration) = "
          f"{100 * gbps / bound:.0f}% of the workers' read bandwidth, {bound:.1f} GB/s (a read-only pass over "
          f"{READ_BYTES >> 20} MB per worker, both at once; target >= 50%)")
    ratios = [a / b for a, b in pairs]
    print(f"LRA, SPMD segment vs the compiled function in this process, {len(pairs)} interleaved pairs: time ratio "
          f"median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})")
    return [sec], [("LRA", sec.best("px"), sec.best("dask"), "speed-up", 5.0),
                   ("LRA vs one process", sec.best("px"), sec.best("px-local"), "time", 1.0),
                   ("LRA vs one process, interleaved", statistics.median(a for a, _ in pairs),
                    statistics.median(b for _, b in pairs), "time", 1.0)]


def interleaved(first, second, n):
    """(seconds of ``first()``, seconds of ``second()``) for ``n`` pairs run alternately."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        first()
        t1 = time.perf_counter()
        second()
        out.append((t1 - t0, time.perf_counter() - t1))
    return out


READ_BYTES = 256 << 20


class _Finished(SchedulerPlugin):
    """A scheduler plugin counting tasks that finished (reached memory or erred)."""

    name = "phylanx-bench-finished"

    def __init__(self):
        self.count = 0

    def transition(self, key, start, finish, *args, **kwargs):
        if finish in ("memory", "erred"):
            self.count += 1


def _install_counter(dask_scheduler=None):
    if "phylanx-bench-finished" not in dask_scheduler.plugins:
        dask_scheduler.add_plugin(_Finished())


def _finished(dask_scheduler=None):
    return dask_scheduler.plugins["phylanx-bench-finished"].count


def _sent_bytes(dask_worker=None):
    """Bytes this worker sent: Dask's transfers to other workers, and the SPMD rings (runtime/segments/ring.py
    counts them per group; the tier's report sums them, kept here per worker by the bench's reads)."""
    return int(getattr(dask_worker, "transfer_outgoing_bytes_total", 0) or 0)


def cluster_counters(client):
    """(tasks finished so far, bytes sent by workers so far, SPMD ring bytes included)."""
    client.run_on_scheduler(_install_counter)
    tasks = client.run_on_scheduler(_finished)
    sent = sum(client.run(_sent_bytes).values()) + SPMD_SENT[0]
    return tasks, sent


SPMD_SENT = [0]  # ring bytes of the SPMD segments run so far (from the tier's report)


def spmd_traffic(f):
    """Add the ring bytes of ``f``'s SPMD segments (its loops' last report) to SPMD_SENT after each call."""
    def call(*args):
        out = f(*args)
        for hook in f._compile().loop_hooks:
            for tier in hook.tiers:
                report = getattr(tier, "report", None)
                if report:
                    SPMD_SENT[0] += report["sent"]
        return out

    return call


def tiled_path(f):
    """``f`` called with the SPMD tier off (PHYLANX_SPMD=0): today's tiled path, a round of tile tasks per
    operation."""
    def call(*args):
        old = os.environ.get("PHYLANX_SPMD")
        os.environ["PHYLANX_SPMD"] = "0"
        try:
            return f(*args)
        finally:
            if old is None:
                del os.environ["PHYLANX_SPMD"]
            else:
                os.environ["PHYLANX_SPMD"] = old

    return call


def on_one_process(f, *args):
    """The compiled function on NumPy inputs in this process (the default local runtime)."""
    local = px.runtime.local()
    try:
        with px.using(local):
            return f(*args)
    finally:
        local.close()


def _read_pass():
    """Seconds for the fastest of 5 read-only passes (a sum) over READ_BYTES of float64, on this worker."""
    import time

    a = np.ones(READ_BYTES // 8)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        a.sum()
        best = min(best, time.perf_counter() - t0)
    return best


def lra_bandwidth(client, n, cols, iterations, median_s):
    """(effective GB/s of the compiled LRA, aggregate read bandwidth of the workers in GB/s), same run."""
    seconds = client.run(_read_pass)  # every worker at the same time: the bandwidth they share
    bound = sum(READ_BYTES / s for s in seconds.values()) / 1e9
    moved = (n * cols + n) * 8 * iterations
    return moved / median_s / 1e9, bound


def make_blobs(n, k, tiles, seed=0):
    """k Gaussian blobs in 2-D (unit variance, centres uniform in [-10, 10]^2), made on the workers."""
    centres = np.random.default_rng(seed).uniform(-10.0, 10.0, (k, 2))
    which = np.floor(px.tiled.random((n,), tiles=(tiles,), seed=seed + 1) * k)  # each row's blob, 0..k-1
    X = px.tiled.normal((n, 2), tiles=(tiles, 1), seed=seed + 2)
    for j in range(k):
        X = X + (which == j)[:, None] * centres[j]
    return X.persist(wait=True)


def bench_kmeans(client, args):
    n, k, it = max(args.n // 2, args.k), args.k, args.iterations
    X = make_blobs(n, k, args.tiles)
    C0 = np.asarray(X[:k])
    Xn = np.asarray(X)
    Xd = X.to_dask()

    sec = Section(f"k-means {n:,} x 2 float64, k={k}, {it} iterations, {args.tiles} row tiles", args.repeats, it,
                  client)
    C_np, l_np = sec.run("numpy (client, gathered X)", "numpy", lambda: kmeans(Xn, C0, it))

    def ok(r):
        return np.allclose(r[0], C_np, rtol=1e-9, atol=1e-12) and np.array_equal(np.asarray(r[1]), l_np)

    sec.run(f"numba hand-written fused kernel (client, {numba.get_num_threads()} threads)", "numba",
            lambda: kmeans_numba(Xn, C0, it), ok)
    sec.run("phylanx-py compiled kmeans, NumPy X, this process", "px-local",
            lambda: on_one_process(kmeans_compiled, Xn, C0, it), ok)
    km_spmd = spmd_traffic(kmeans_compiled)
    sec.run("phylanx-py compiled kmeans, TiledArray X: SPMD segment", "px", lambda: km_spmd(X, C0, it), ok,
            traffic=True)
    print(kmeans_compiled.explain())
    sec.run("phylanx-py compiled kmeans, TiledArray X: tile tasks (PHYLANX_SPMD=0)", "px-tiled",
            lambda: tiled_path(kmeans_compiled)(X, C0, it), ok, traffic=True)
    sec.run("dask.array kmeans_dask_array (k means per compute)", "dask", lambda: kmeans_dask_array(Xd, C0, it), ok,
            traffic=True)
    return [sec], [("k-means", sec.best("px"), sec.best("dask"), "speed-up", 10.0),
                   ("k-means vs one process", sec.best("px"), sec.best("px-local"), "time", 1.0)]


def bench_elementwise(client, args):
    n = 10 * args.n
    x = (px.tiled.random((n,), tiles=(args.tiles,), seed=0) * 8.0 - 4.0).persist(wait=True)  # uniform [-4, 4)
    xn = np.asarray(x)

    sec = Section(f"exp(-x*x)*sin(x)+2*x-1 on {n:,} float64, {args.tiles} tiles (results persisted on the workers)",
                  args.repeats)
    expected = sec.run("numpy (client, 1 thread)", "numpy", lambda: chain(xn))
    ok = close_to(expected, rtol=1e-10)
    sec.run(f"numba njit parallel (client, {numba.get_num_threads()} threads)", "numba", lambda: chain_numba(xn), ok)
    xn = None
    sec.run("phylanx-py compiled chain, TiledArray x", "px", lambda: chain_compiled(x), ok)
    sec.run("phylanx-py uncompiled chain(x) + persist(wait=True)", "px-plain", lambda: chain(x).persist(wait=True), ok)
    # a fresh dask.array name per call: dask's keys are deterministic, so a repeat must not meet the last result
    sec.run("dask.array chain(xd), persist + wait", "dask", lambda: persisted(client, chain(x.to_dask())), ok)
    return [sec], [("element-wise", sec.best("px"), sec.best("dask"), "time", 0.7)]


def bench_matmul(client, args):
    s = args.size
    sections, targets, numpy_row = [], [], None
    for tiles in MATMUL_TILES:
        # uniform draws do not depend on the tiling: every tiling holds the same A and B
        A = px.tiled.random((s, s), tiles=tiles, seed=0)
        B = px.tiled.random((s, s), tiles=tiles, seed=1)
        sec = Section(f"matmul {s:,} x {s:,} float64, tiles {tiles} (results persisted on the workers)",
                      args.repeats)
        if numpy_row is None:
            An, Bn = np.asarray(A), np.asarray(B)
            expected = sec.run("numpy A @ B (client, default BLAS threads)", "numpy", lambda: An @ Bn)  # noqa: B023
            numpy_row, An, Bn = sec.rows[-1], None, None
        else:
            sec.rows.append(numpy_row)
        ok = close_to(expected)
        sec.run("phylanx-py compiled A @ B, TiledArray A, B", "px", lambda: matmul_compiled(A, B), ok)  # noqa: B023
        sec.run("dask.array A @ B, persist + wait", "dask",
                lambda: persisted(client, A.to_dask() @ B.to_dask()), ok)  # noqa: B023
        sections.append(sec)
        targets.append((f"matmul {tiles}", sec.best("px"), sec.best("dask"), "time", 1.0))
    return sections, targets


BENCH = {"lra": bench_lra, "kmeans": bench_kmeans, "elementwise": bench_elementwise, "matmul": bench_matmul}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2_000_000,
                    help="LRA rows; k-means uses n/2 rows, the element-wise chain 10*n elements")
    ap.add_argument("--size", type=int, default=4000, help="side of the square matmul operands")
    ap.add_argument("--tiles", type=int, default=8, help="row tiles (LRA, k-means, element-wise)")
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    args = ap.parse_args(argv)
    numba.set_num_threads(min(THREADS, numba.config.NUMBA_NUM_THREADS))

    load0 = os.getloadavg()
    print(f"tiled arrays vs dask.array: {WORKERS}-worker LocalCluster(processes=True, threads_per_worker=1), "
          f"median of {args.repeats} repeats; {os.cpu_count()} cores")
    print(f"load average at start (1/5/15 min): {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")

    rt, client = start_cluster()
    sections, targets = [], []
    try:
        for w, threads in sorted(client.run(_worker_threads).items()):
            print(f"worker {w}: {threads}")
        # a primitive without a tile rule would gather its inputs to the client: record it, and any other warning
        with px.using(rt), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", px.tiled.TileFallbackWarning)
            for name in args.only:
                secs, tgts = BENCH[name](client, args)
                sections += secs
                targets += tgts
    finally:
        close_runtime(rt)
    load1 = os.getloadavg()

    print()
    for sec in sections:
        sec.print()
    rows = []
    for name, t_px, t_da, kind, bound in targets:
        if kind == "speed-up":
            rule, met = f">= {bound:g}x faster", t_da / t_px >= bound
        else:
            rule, met = f"<= {bound:g}x its time", t_px / t_da <= bound
        rows.append([name, f"{t_px * 1e3:.1f}", f"{t_da * 1e3:.1f}", f"{t_px / t_da:.3f}", f"{t_da / t_px:.2f}x",
                     rule, "yes" if met else "no"])
    print("targets (phylanx-py compiled vs the fastest dask.array variant, or vs the compiled function on NumPy "
          "inputs in one process: 'vs one process'; steady-state medians)")
    print_table(["workload", "phylanx-py ms", "reference ms", "time ratio", "speed-up", "target", "met"], rows)
    print()
    ok = all(r[4] for sec in sections for r in sec.rows)
    messages = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    fallbacks = sum(1 for w in caught if issubclass(w.category, px.tiled.TileFallbackWarning))
    print(f"tile fallbacks (TileFallbackWarning): {fallbacks}" + "".join(f"\n  {m}" for m in messages))
    print(f"load average at end (1/5/15 min): {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    print(f"all results agree with numpy: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
