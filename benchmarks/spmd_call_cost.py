"""Benchmark: where one SPMD call's time goes outside its iterations, phase by phase.

    python benchmarks/spmd_call_cost.py                 # k-means (masked form) 1e6 x 2 on 8 tiles, LRA 20,000 x 8
    python benchmarks/spmd_call_cost.py --calls 10 --n 200000

On one LocalCluster of two single-threaded worker processes started here. Each compiled call is timed on the
client (wall clock) at the points it passes: the call, the loop tier entered, the segment driver entered, the
ranks' requests sent, the ranks' replies in, the loop tier left, the call returned; and on the ranks (their
``stats["clock"]``, spmd/rank.py: request arrived, group ready, loop started, loop ended, reply made). Client and
workers run on this machine, so their ``time.time()`` compare. Each phase is the median over the calls after the
first two, in ms; the loop's own time (rank 0's iterations) is the last row of a workload, for scale. The load
average is printed at the start and the end.
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "PHYLANX_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from _common import close_runtime, dask_runtime, print_table  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import prog_tiled  # noqa: E402
from kmeans import kmeans_masked  # noqa: E402
from phylanx_py.runtime.segments import service  # noqa: E402
from phylanx_py.runtime.spmd import driver, loop  # noqa: E402

import phylanx_py as px  # noqa: E402

PHASES = [
    ("client: call -> loop tier entered (the function's code before the loop)", "call", "tier"),
    ("client: loop tier -> segment driver (checks, tile futures, parameters)", "tier", "driver"),
    ("client: driver -> first request sent (placement, job, pickling)", "driver", "sent0"),
    ("client: requests pickled and sent (all ranks)", "sent0", "sent"),
    ("wire: last request sent -> last rank has it (transport, unpickling)", "sent", "recv"),
    ("rank: request -> group ready (tiles taken, group kept or formed)", "recv", "formed"),
    ("rank: group -> loop starts (shards, program)", "formed", "began"),
    ("rank 0: the loop's iterations", "began0", "ended0"),
    ("rank: loop ends -> reply made (outputs' tiles, stats); the last rank", "ended", "done"),
    ("wire: last reply made -> client has every reply", "done", "replied"),
    ("client: replies -> loop tier left (outputs, tile pieces)", "replied", "left"),
    ("client: loop tier left -> call returns", "left", "returned"),
    ("in all: the call", "call", "returned"),
]


class Clock:
    """The client-side points of the calls in flight (one call at a time)."""

    def __init__(self):
        self.t: dict = {}
        self.calls: list = []

    def install(self):
        tier_call, run, submit = loop.SpmdLoop.__call__, driver.run, service.submit
        clock = self

        def tier(self_, ev, args):
            clock.t.setdefault("tier", time.time())
            try:
                return tier_call(self_, ev, args)
            finally:
                clock.t["left"] = time.time()

        def drive(*a, **k):
            clock.t["driver"] = time.time()
            out = run(*a, **k)
            clock.t["replied"] = time.time()
            clock.t["ranks"] = [s["stats"].get("clock") for _, s in out[2]]
            return out

        def send(cluster, address, name, payload):
            if name == "spmd rank":
                clock.t.setdefault("sent0", time.time())
            fut = submit(cluster, address, name, payload)
            if name == "spmd rank":
                clock.t["sent"] = time.time()
            return fut

        loop.SpmdLoop.__call__, driver.run, service.submit = tier, drive, send
        return lambda: setattr(loop.SpmdLoop, "__call__", tier_call) or setattr(driver, "run", run) \
            or setattr(service, "submit", submit)

    def call(self, f, *args):
        self.t = {"call": time.time()}
        out = f(*args)
        self.t["returned"] = time.time()
        ranks = self.t.pop("ranks", None)
        if ranks and all(r is not None for r in ranks):
            for i, key in enumerate(("recv", "formed", "began", "ended", "done")):
                self.t[key] = max(r[i] for r in ranks)  # the last rank to get there
            self.t["began0"], self.t["ended0"] = ranks[0][2], ranks[0][3]
        self.calls.append(self.t)
        return out


def phases(clock, skip=2) -> list:
    rows = []
    calls = clock.calls[skip:]
    for label, a, b in PHASES:
        ds = [1e3 * (c[b] - c[a]) for c in calls if a in c and b in c]
        rows.append([label, f"{statistics.median(ds):.2f}" if ds else "-", f"{min(ds):.2f}" if ds else "-",
                     f"{max(ds):.2f}" if ds else "-"])
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=12)
    ap.add_argument("--n", type=int, default=1_000_000, help="k-means rows")
    ap.add_argument("--tiles", type=int, default=8)
    args = ap.parse_args(argv)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rt = dask_runtime(2)
    clock = Clock()
    undo = clock.install()
    try:
        with px.using(rt):
            rng = np.random.default_rng(0)
            X = rng.normal(size=(args.n, 2))
            C0 = X[:8].copy()
            km = px.compile(kmeans_masked)
            Xt = px.tiled.from_array(X, tiles=(args.tiles, 1)).persist(wait=True)
            ref = kmeans_masked(X, C0, 10)
            for _ in range(args.calls):
                C, labels = clock.call(km, Xt, C0, 10)
            np.testing.assert_allclose(C, ref[0], rtol=1e-9)
            np.testing.assert_array_equal(np.asarray(labels), ref[1])
            km_rows = phases(clock)
            t0 = time.perf_counter()
            np.asarray(labels)
            gather = 1e3 * (time.perf_counter() - t0)
            clock.calls = []
            X2 = rng.normal(size=(20000, 8))
            y2 = (rng.random(20000) > 0.5).astype(float)
            f = px.compile(prog_tiled.lra)
            Xt2 = px.tiled.from_array(X2, tiles=(2, 1)).persist(wait=True)
            yt2 = px.tiled.from_array(y2, tiles=(2,)).persist(wait=True)
            for _ in range(args.calls * 2):
                w = clock.call(f, Xt2, yt2, 0.1, 1)
            np.testing.assert_allclose(w, prog_tiled.lra(X2, y2, 0.1, 1), rtol=1e-9)
            lra_rows = phases(clock)
    finally:
        undo()
        close_runtime(rt)
    print(f"\nk-means (masked form) {args.n:,} x 2 on {args.tiles} tiles, k=8, 10 iterations a call, "
          f"{args.calls} calls")
    print_table(["phase", "median ms", "min ms", "max ms"], km_rows)
    print(f"(then gathering the tiled labels to the client, np.asarray: {gather:.1f} ms, once)")
    print(f"\nLRA 20,000 x 8 on 2 tiles, 1 iteration a call, {args.calls * 2} calls")
    print_table(["phase", "median ms", "min ms", "max ms"], lra_rows)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
