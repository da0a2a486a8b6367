"""Benchmark: logistic regression (LRA) compiled by phylanx-py against the same function run by NumPy.

    python benchmarks/lra.py --runtime local                      # 2,000,000 x 20 float64, 10 iterations
    python benchmarks/lra.py --rows 20000 --repeats 2             # a quick smoke run
    python benchmarks/lra.py --runtime dask                       # also dask.array on the same cluster

Both variants run in the same process on the same data; the table shows median wall times and the ratio
compiled / NumPy (target <= 1.05). Results must agree (np.allclose) or the script exits with status 1.

With ``--runtime dask`` (a 2-worker LocalCluster, one thread each; Dask sets OMP/MKL/OPENBLAS_NUM_THREADS=1 in
its workers) the table also has the natural dask.array program on the same cluster (``lra_dask_array``), timed
end to end (sending X and y to the cluster included) and with X and y already persisted there. The compiled
function takes NumPy inputs, which the Dask runtime sends to the cluster on every call (one task per input
array), so its time is always end to end.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from _common import RUNTIMES, close_runtime, make_runtime, median_time, print_table, threadpool_summary

import phylanx_py as px


@px.compile
def lra(X, y, alpha, iterations):
    w = np.zeros(X.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        w = w - alpha * (X.T @ (p - y)) / X.shape[0]
    return w


def lra_dask_array(Xd, yd, alpha, iterations):
    """LRA in dask.array on persisted chunks ``Xd``, ``yd``. The idiomatic version for gradient descent (as in
    dask-glm): ``w`` stays a small NumPy array and each iteration computes the 20-element gradient, so a step is
    one small graph over the chunks already on the workers (rather than a lazy ``w`` whose graph grows by the
    whole loop and is computed once at the end)."""
    import dask.array as da

    n = Xd.shape[0]
    w = np.zeros(Xd.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + da.exp(-(Xd @ w)))
        w = w - alpha * (Xd.T @ (p - yd)).compute() / n
    return w


DASK_CHUNKS = 8  # row chunks of X and y for dask.array (250,000 rows each at 2,000,000 rows)


def persist_on_cluster(client, X, y, aligned=False):
    """X and y as dask.arrays of DASK_CHUNKS row chunks, persisted on the cluster (returns once they are there).

    The chunks arrive as views into Dask's receive buffers, most of them not 8-byte aligned (the script prints
    how many), and BLAS on unaligned arrays is several times slower. That is what the natural program gets;
    ``aligned=True`` adds ``map_blocks(np.copy)`` so the persisted chunks are fresh, aligned copies made on the
    workers: a fairer dask.array baseline."""
    import dask.array as da
    import distributed

    rows = -(-X.shape[0] // DASK_CHUNKS)
    Xd, yd = da.from_array(X, chunks=(rows, X.shape[1])), da.from_array(y, chunks=rows)
    if aligned:
        Xd, yd = Xd.map_blocks(np.copy), yd.map_blocks(np.copy)
    Xd, yd = client.persist([Xd, yd])
    distributed.wait([Xd, yd])
    return Xd, yd


def _aligned_flag(block):
    return np.array([[block.flags.aligned]])


def count_unaligned(Xd) -> tuple[int, int]:
    """(unaligned chunks, chunks) of a persisted 2-D dask.array, checked on the workers. (Each block maps to a
    1x1 block: with ``drop_axis`` Dask would hand the function a concatenated copy, which is always aligned.)"""
    flags = Xd.map_blocks(_aligned_flag, chunks=(1, 1), dtype=bool).compute()
    return int((~flags).sum()), int(flags.size)


def send_as_tasks(client, X, y):
    """What the compiled function's call does with its NumPy inputs: each becomes one task holding it."""
    import distributed

    futs = [client.submit(np.asarray, a, pure=False) for a in (X, y)]
    distributed.wait(futs)


def measure_dask_array(client, call, repeats):
    """dask.array variants on ``client``'s cluster: a dict of result, times (s) and the unaligned chunk count."""
    X, y, alpha, iterations = call

    def end_to_end():
        Xd, yd = persist_on_cluster(client, X, y)
        return lra_dask_array(Xd, yd, alpha, iterations)  # Xd, yd are released on return

    w = end_to_end()  # warm-up, and the result we check
    t_e2e = median_time(end_to_end, repeats, warmup=0)
    t_send = median_time(lambda: persist_on_cluster(client, X, y), repeats, warmup=0)
    t_tasks = median_time(lambda: send_as_tasks(client, X, y), repeats)
    Xd, yd = persist_on_cluster(client, X, y)
    unaligned = count_unaligned(Xd)
    t_persisted = median_time(lambda: lra_dask_array(Xd, yd, alpha, iterations), repeats)
    Xd = yd = None  # release them on the cluster before making the aligned copies
    Xa, ya = persist_on_cluster(client, X, y, aligned=True)
    t_aligned = median_time(lambda: lra_dask_array(Xa, ya, alpha, iterations), repeats)
    return {"w": w, "e2e": t_e2e, "persisted": t_persisted, "aligned": t_aligned, "send": t_send,
            "tasks": t_tasks, "unaligned": unaligned}


def make_data(rows: int, cols: int, seed: int = 0):
    """Separable-ish synthetic data: labels from a random hyperplane plus a little noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, cols))
    w_true = rng.standard_normal(cols)
    y = (X @ w_true + 0.1 * rng.standard_normal(rows) > 0).astype(np.float64)
    return X, y


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", choices=sorted(RUNTIMES), default="local")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--cols", type=int, default=20)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=None, help="default 5; 3 with --runtime dask")
    ap.add_argument("--alpha", type=float, default=0.1)
    args = ap.parse_args(argv)
    if args.repeats is None:
        args.repeats = 3 if args.runtime == "dask" else 5

    X, y = make_data(args.rows, args.cols)
    call = (X, y, args.alpha, args.iterations)
    plain = lra.__wrapped__
    print(f"LRA {args.rows:,} x {args.cols} float64, {args.iterations} iterations, "
          f"median of {args.repeats} repeats, runtime={args.runtime}")
    print(threadpool_summary())

    rt = make_runtime(args.runtime)
    try:
        with px.using(rt):
            t0 = time.perf_counter()
            w_compiled = lra(*call)  # first call compiles; it is also the warm-up and the result we check
            first_call = time.perf_counter() - t0
            w_numpy = plain(*call)
            t_compiled = median_time(lambda: lra(*call), args.repeats, warmup=0)
            t_numpy = median_time(lambda: plain(*call), args.repeats, warmup=0)
        dask_array = measure_dask_array(rt.executor.client, call, args.repeats) if args.runtime == "dask" else None
    finally:
        close_runtime(rt)

    agree = np.allclose(w_compiled, w_numpy, rtol=1e-9, atol=1e-12)
    it = args.iterations

    def row(name, t):
        return [name, f"{t * 1e3:.1f}", f"{t * 1e3 / it:.2f}", f"{t / t_numpy:.2f}"]

    rows = [row("numpy (plain)", t_numpy)]
    if dask_array is None:
        rows.append(row(f"phylanx-py ({args.runtime})", t_compiled))
    else:
        d = dask_array
        rows += [
            row("phylanx-py (dask), end to end: X, y sent each call", t_compiled),
            row("dask.array, end to end: persist X, y + iterations", d["e2e"]),
            row("dask.array, X, y already persisted: iterations", d["persisted"]),
            row("dask.array, persisted + aligned copies: iterations", d["aligned"]),
            ["(send only) dask.array persist X, y", f"{d['send'] * 1e3:.1f}", "", ""],
            ["(send only) X, y as one task each (as compiled)", f"{d['tasks'] * 1e3:.1f}", "", ""],
        ]
    print()
    print_table(["variant", "median ms", "ms/iteration", "ratio"], rows)
    print()
    print(f"first compiled call (compile + run): {first_call * 1e3:.1f} ms")
    print(f"results agree (np.allclose): {agree}; max |diff| = {np.max(np.abs(w_compiled - w_numpy)):.3g}")
    if dask_array is not None:
        w_da = dask_array["w"]
        da_agree = np.allclose(w_da, w_numpy, rtol=1e-9, atol=1e-12)
        print(f"dask.array agrees with numpy (np.allclose): {da_agree}; "
              f"max |diff| = {np.max(np.abs(w_da - w_numpy)):.3g}")
        agree = agree and da_agree
        print("persisted X chunks not 8-byte aligned on the workers: {} of {}".format(*dask_array["unaligned"]))
        print(f"ratio compiled/dask.array = {t_compiled / dask_array['e2e']:.3f} end to end; "
              f"{t_compiled / dask_array['persisted']:.3f} vs persisted X, y; "
              f"{t_compiled / dask_array['aligned']:.3f} vs persisted aligned copies")
    print(f"ratio compiled/numpy = {t_compiled / t_numpy:.3f} (target <= 1.05)")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
