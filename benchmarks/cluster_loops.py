"""Benchmark: scalar loops over tiled arrays on 2 workers, native per tile, against the same loop in one native task,
interpreted, dask.array's vectorised form, and NumPy / Numba / the plain loop in one process.

    python benchmarks/cluster_loops.py                      # n = 4,000,000 rows, 4 row tiles
    python benchmarks/cluster_loops.py --n 400000 --repeats 3

Two loops a NumPy user writes element by element (neither has an SPMD form: they index single rows):
- ``sweep``: one sweep of a 3-point stencil, ``v[i] = (u[i - 1] + u[i] + u[i + 1]) / 3.0`` for i in 1..n-2, over
  float64 ``u`` and ``v`` tiled in ``--tiles`` row tiles (a halo of one row per tile);
- ``norms``: row norms of an n x 8 float64 ``X`` into a tiled ``out`` (an inner loop over the columns).

Rows (times in ms per million rows, so the rows measured at a smaller size compare):
- ``per tile``: the compiled function (one task per tile, runtime/native/remote.py), steady state;
- ``one task``: the same with the per-tile form off (``remote.PER_TILE = False``): the loop in one task on one worker;
- ``interpreted``: the compiled function with the native tier off (``PHYLANX_NATIVE=0``), at ``--interpreted-n``
  rows (it costs a tile operation per element);
- ``dask.array``: the vectorised form (``(u[:-2] + u[1:-1] + u[2:]) / 3``, ``sqrt((X * X).sum(axis=1))``) on the
  same tiles (``to_dask()``), persisted and waited for;
- ``NumPy``, ``Numba``, ``plain loop``: in this process on the gathered arrays (NumPy's vectorised form, ``njit`` of
  the same function, the plain function at ``--plain-n`` rows).
Every compiled result is checked against NumPy's in the same run (exit status 1 on a mismatch). The machine's load
average is printed before and after: on a shared machine the figures are indicative only.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numba
import numpy as np
from _common import close_runtime, dask_runtime, median_time, print_table
from phylanx_py.runtime.native import remote

import phylanx_py as px

WORKER_ENV = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")}


def sweep(u, v):
    n = u.shape[0]
    for i in range(1, n - 1):
        v[i] = (u[i - 1] + u[i] + u[i + 1]) / 3.0
    return v


def norms(X, out):
    for i in range(X.shape[0]):
        s = 0.0
        for j in range(X.shape[1]):
            s += X[i, j] * X[i, j]
        out[i] = np.sqrt(s)
    return out


def sweep_numpy(u):
    v = np.zeros_like(u)
    v[1:-1] = (u[:-2] + u[1:-1] + u[2:]) / 3.0
    return v


def norms_numpy(X):
    return np.sqrt((X * X).sum(axis=1))


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def per_million(seconds, rows):
    return seconds * 1e3 * 1e6 / rows


def workload(name, n, tiles, rng):
    """(the loop, NumPy's result at ``m`` rows, tiled inputs at ``m`` rows, the dask.array form of the first tiled
    input, NumPy's form, the local arguments at ``m`` rows)."""
    import dask.array as da

    if name == "sweep":
        data = rng.random(n)

        def inputs(m):
            return (px.tiled.from_array(data[:m].copy(), tiles=(tiles,)),
                    px.tiled.from_array(np.zeros(m), tiles=(tiles,)))

        def vectorised(t):
            u = t.to_dask()
            return da.concatenate([u[:1] * 0, (u[:-2] + u[1:-1] + u[2:]) / 3.0, u[-1:] * 0])

        return sweep, lambda m: sweep_numpy(data[:m]), inputs, vectorised, sweep_numpy, \
            lambda m: (data[:m].copy(), np.zeros(m))
    data = rng.standard_normal((n, 8))

    def inputs(m):
        return (px.tiled.from_array(data[:m], tiles=(tiles, 1)), px.tiled.from_array(np.zeros(m), tiles=(tiles,)))

    def vectorised(t):
        X = t.to_dask()
        return da.sqrt((X * X).sum(axis=1))

    return norms, lambda m: norms_numpy(data[:m]), inputs, vectorised, norms_numpy, \
        lambda m: (data[:m].copy(), np.zeros(m))


def bench(name, args, rt, rows) -> bool:
    from distributed import wait

    n = args.n
    fn, ref, inputs, vectorised, numpy_form, local_args = workload(name, n, args.tiles, np.random.default_rng(0))
    ok = True
    f = px.compile(fn)
    a, b = inputs(n)
    a.persist(wait=True), b.persist(wait=True)
    want = ref(n)

    def steady():
        f(a, b).persist(wait=True)

    for label, per_tile in (("per tile", True), ("one task", False)):
        remote.PER_TILE = per_tile
        try:
            first = time.perf_counter()
            got = np.asarray(f(a, b))
            first = time.perf_counter() - first
            ok &= bool(np.allclose(got, want))
            t = median_time(steady, args.repeats, warmup=0)
        finally:
            remote.PER_TILE = True
        rows.append((name, label, n, per_million(t, n), f"first call {first:.2f} s"))
    os.environ["PHYLANX_NATIVE"] = "0"
    try:
        m = min(n, args.interpreted_n)
        g = px.compile(fn)
        ai, bi = inputs(m)
        t0 = time.perf_counter()
        got = np.asarray(g(ai, bi))
        t = time.perf_counter() - t0
        ok &= bool(np.allclose(got, ref(m)))
        rows.append((name, "interpreted", m, per_million(t, m), "one call, native tier off"))
    finally:
        del os.environ["PHYLANX_NATIVE"]
    t = median_time(lambda: wait(rt.executor.client.persist(vectorised(a))), args.repeats)
    rows.append((name, "dask.array", n, per_million(t, n), "vectorised, same tiles"))
    local = np.asarray(a)
    t = median_time(lambda: numpy_form(local), args.repeats)
    rows.append((name, "NumPy", n, per_million(t, n), "vectorised, this process"))
    jit = numba.njit(fn)
    t = median_time(lambda: jit(*local_args(n)), args.repeats)
    rows.append((name, "Numba", n, per_million(t, n), "njit, this process (incl. the arguments' copy)"))
    m = min(n, args.plain_n)
    t = median_time(lambda: fn(*local_args(m)), 1)
    rows.append((name, "plain loop", m, per_million(t, m), "this process"))
    return ok


def run(args):
    print(f"# before: {load()}")
    rt = dask_runtime(2, env=WORKER_ENV)
    ok = True
    rows = []
    try:
        with px.using(rt):
            for name in args.only:
                ok &= bench(name, args, rt, rows)
    finally:
        close_runtime(rt)
    print_table(("loop", "form", "rows", "ms per 1e6 rows", "note"), rows)
    print(f"# after: {load()}; results equal NumPy's: {'yes' if ok else 'NO'}")
    return ok


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=4_000_000)
    p.add_argument("--tiles", type=int, default=4)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--interpreted-n", type=int, default=2_000)
    p.add_argument("--plain-n", type=int, default=400_000)
    p.add_argument("--only", nargs="+", default=["sweep", "norms"], choices=["sweep", "norms"])
    ok = run(p.parse_args(argv))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
