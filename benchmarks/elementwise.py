"""Benchmark: the element-wise chain ``exp(-x*x)*sin(x)+2*x-1`` on one large float64 vector.

    python benchmarks/elementwise.py                       # n = 20,000,000 (160 MB in, 160 MB out)
    python benchmarks/elementwise.py --n 2000000 --repeats 2   # a quick smoke run

Variants, all in this process on the same ``x``: NumPy; a hand-written Numba kernel
(``@numba.njit(parallel=True, fastmath=False)``, ``prange``, 2 threads) returning a new array, and the same kernel
writing into a preallocated ``out=``; dask.array with the threads scheduler (chunks of 2,500,000); phylanx-py on
the local runtime compiled with fusion (the default: the chain is one generated Numba kernel run on row blocks in
parallel threads) and with ``fuse=False`` (op by op, like NumPy).

The first call of each compiled variant (compile, or for phylanx-py importing the kernel from its disk cache,
plus one run) is reported apart from the steady state (median of ``--repeats`` further calls). Effective GB/s
counts 8*n bytes read + 8*n written. For scale the script measures the machine's read bandwidth in the same run:
a single-threaded NumPy ``np.add.reduce`` over a 1.6 GB array (one pass per measurement, median of 3), plus the
same read pass with a 2-thread Numba reduction (``fastmath=True`` so the sum vectorizes).
Targets: phylanx-py (fused) <= 0.5x NumPy, <= 0.7x dask.array.
All results must agree with NumPy (np.allclose) or the script exits with status 1.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numba
import numpy as np
from _common import close_runtime, median_time, print_table

import phylanx_py as px

THREADS = 2
DASK_CHUNK = 2_500_000
READ_BYTES = 1_600_000_000  # the read-bandwidth array: 2e8 float64


def chain(x):
    return np.exp(-x * x) * np.sin(x) + 2 * x - 1


chain_fused = px.compile(chain)
chain_unfused = px.compile(chain, fuse=False)


@numba.njit(parallel=True, fastmath=False)
def chain_numba(x):
    out = np.empty_like(x)
    for i in numba.prange(x.shape[0]):
        v = x[i]
        out[i] = np.exp(-v * v) * np.sin(v) + 2 * v - 1
    return out


@numba.njit(parallel=True, fastmath=False)
def chain_numba_out(x, out):
    for i in numba.prange(x.shape[0]):
        v = x[i]
        out[i] = np.exp(-v * v) * np.sin(v) + 2 * v - 1
    return out


# fastmath lets the sum reassociate and vectorize: a read pass, not a chain of dependent adds
@numba.njit(parallel=True, fastmath=True)
def sum_numba(a):
    s = 0.0
    for i in numba.prange(a.shape[0]):
        s += a[i]
    return s


def chain_dask(x):
    import dask.array as da

    xd = da.from_array(x, chunks=DASK_CHUNK)
    return (da.exp(-xd * xd) * da.sin(xd) + 2 * xd - 1).compute(scheduler="threads", num_workers=THREADS)


def read_bandwidth(repeats: int = 3) -> tuple[float, float]:
    """(NumPy single-thread, Numba 2-thread) GB/s of a read-only pass over a READ_BYTES float64 array."""
    a = np.ones(READ_BYTES // 8)  # written once here, so its pages are mapped before timing
    t_np = median_time(lambda: np.add.reduce(a), repeats)
    t_nb = median_time(lambda: sum_numba(a), repeats)  # the warm-up call compiles
    return READ_BYTES / t_np / 1e9, READ_BYTES / t_nb / 1e9


def first_and_median(fn, repeats):
    """(result of the first call, its time, the median of ``repeats`` further calls)."""
    t0 = time.perf_counter()
    r = fn()
    first = time.perf_counter() - t0
    return r, first, median_time(fn, repeats, warmup=0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    numba.set_num_threads(min(THREADS, numba.config.NUMBA_NUM_THREADS))

    load0 = os.getloadavg()
    x = np.random.default_rng(0).uniform(-4.0, 4.0, args.n)
    out = np.empty_like(x)
    gb = 16 * args.n / 1e9  # 8n read + 8n written
    print(f"exp(-x*x)*sin(x)+2*x-1 on {args.n:,} float64 ({gb * 1e3 / 2:.0f} MB in + {gb * 1e3 / 2:.0f} MB out), "
          f"median of {args.repeats} repeats; {os.cpu_count()} cores, Numba threads={numba.get_num_threads()} "
          f"(layer {numba.config.THREADING_LAYER}), dask chunks={DASK_CHUNK:,}")
    print(f"load average at start (1/5/15 min): {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")

    variants = [
        ("numpy", lambda: chain(x)),
        (f"numba njit parallel, {THREADS} threads (new array)", lambda: chain_numba(x)),
        (f"numba njit parallel, {THREADS} threads (out=)", lambda: chain_numba_out(x, out)),
        (f"dask.array threads, chunks {DASK_CHUNK:,}", lambda: chain_dask(x)),
        ("phylanx-py local, fused (default)", lambda: chain_fused(x)),
        ("phylanx-py local, fuse=False", lambda: chain_unfused(x)),
    ]
    rt = px.runtime.local()
    results = {}
    try:
        with px.using(rt):
            for name, fn in variants:
                r, first, t = first_and_median(fn, args.repeats)
                results[name] = (np.array(r, copy=True), first, t)  # out= is reused by every call: keep a copy
    finally:
        close_runtime(rt)
    bw_np, bw_nb = read_bandwidth()
    load1 = os.getloadavg()

    expected = results["numpy"][0]
    t_np = results["numpy"][2]
    t_da = results[variants[3][0]][2]
    rows, ok = [], True
    for name, (r, first, t) in results.items():
        agree = np.allclose(r, expected, rtol=1e-10, atol=1e-12)
        ok &= agree
        rows.append([name, f"{first * 1e3:.1f}", f"{t * 1e3:.1f}", f"{gb / t:.2f}", f"{t / t_np:.2f}",
                     f"{t / t_da:.2f}", "yes" if agree else "NO"])
    print()
    print_table(["variant", "first call ms", "median ms", "GB/s", "vs numpy", "vs dask.array", "agrees"], rows)
    print()
    print(f"read bandwidth (read-only pass over {READ_BYTES / 1e9:.1f} GB): numpy np.add.reduce, 1 thread "
          f"{bw_np:.2f} GB/s; numba prange sum, {numba.get_num_threads()} threads {bw_nb:.2f} GB/s")
    t_px = results["phylanx-py local, fused (default)"][2]
    print(f"phylanx-py fused / numpy = {t_px / t_np:.3f} (target <= 0.5); "
          f"/ dask.array = {t_px / t_da:.3f} (target <= 0.7)")
    print(f"load average at end (1/5/15 min): {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    print(f"all results agree with numpy (np.allclose, rtol=1e-10): {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
