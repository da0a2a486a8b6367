"""Benchmark: what segments that outlive an epoch and a call save, each against the same work without, in one run.

    python benchmarks/segment_calls.py                  # 4 rounds
    python benchmarks/segment_calls.py --rounds 2

On one LocalCluster of two single-threaded worker processes started here (the runtime's malloc thresholds):

- SPMD calls: a compiled LRA (tests/prog_tiled.py) on 20,000 x 8 row-tiled float64, 1 and 20 iterations a call, 20
  calls per configuration: the ranks' ring group kept from one call to the next (segments/rank.py POOL) against a
  group formed every call (the lease turned off in this client); medians, and the ratio within each round.
- training epochs: simplemlp (benchmarks/train_parallel.py), 2 workers x 64 rows a step, 2,048 samples (16 steps an
  epoch, so an epoch's start and end weigh), 8 epochs: one span (runtime/training/span.py) against a segment per
  epoch (the checkpoint through the client after each); ms per epoch from the mean of the epochs after the first.
- fit with validation data (512 rows), the same model and steps: one span whose ranks evaluate the validation rows
  at each epoch's end against a segment per epoch whose weights the client evaluates (as fit ran with validation
  before spans took it); ms per epoch from fit's history.

Rounds alternate the configurations, so a slow spell of a shared machine hits both; the load is printed at the
start and end.
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
import train_parallel as tp  # noqa: E402
from phylanx_py.runtime.spmd import driver  # noqa: E402

import phylanx_py as px  # noqa: E402
from phylanx_py import nn  # noqa: E402


def spmd_calls(rounds):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20000, 8))
    y = (rng.random(20000) > 0.5).astype(float)
    f = px.compile(prog_tiled.lra)
    Xt, yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(y, tiles=(2,))
    Xt.persist(wait=True), yt.persist(wait=True)
    np.testing.assert_allclose(f(Xt, yt, 0.1, 3), prog_tiled.lra(X, y, 0.1, 3), rtol=1e-9)
    lease, res = driver._lease, {}
    try:
        for _ in range(rounds):
            for keep in (True, False):
                driver._lease = lease if keep else (lambda cluster, key: None)
                for it in (1, 20):
                    ts = []
                    for _ in range(20):
                        t0 = time.perf_counter()
                        np.asarray(f(Xt, yt, 0.1, it))
                        ts.append(time.perf_counter() - t0)
                    res.setdefault((keep, it), []).append(statistics.median(ts[2:]))
    finally:
        driver._lease = lease
    rows = []
    for it in (1, 20):
        kept, fresh = res[(True, it)], res[(False, it)]
        rows.append([f"SPMD lra 20,000x8, {it} iteration{'s' if it > 1 else ''} a call: ms per call",
                     f"{1e3 * statistics.median(kept):.2f}", f"{1e3 * statistics.median(fresh):.2f}",
                     f"{statistics.median([b / a for a, b in zip(kept, fresh)]):.2f}"])
    return rows


def training_epochs(client, rounds, samples=2048, epochs=8):
    X, Y = tp.simplemlp_data(samples)
    res = {True: [], False: []}
    for _ in range(rounds):
        for span in (True, False):
            res[span].append(tp.run(client, tp.simplemlp, X, Y, 2, 128, "allreduce", 1, epochs, span=span)
                             ["samples_per_s"])
    ms = {k: [1e3 * samples / v for v in vs] for k, vs in res.items()}
    return [[f"simplemlp, 2 workers x 64 rows, {samples // 128} steps an epoch: ms per epoch",
             f"{statistics.median(ms[True]):.1f}", f"{statistics.median(ms[False]):.1f}",
             f"{statistics.median([b / a for a, b in zip(ms[True], ms[False])]):.2f}"]]


def validated_epochs(rounds, samples=2048, epochs=8):
    """``fit(parallel="allreduce", validation=...)`` as a user calls it: its epochs as one span whose ranks
    evaluate the validation rows (runtime/training/segment.py), against a segment per epoch whose weights the
    client evaluates (what fit did with validation before: ``SegmentTrainer.spans`` made False here)."""
    from phylanx_py.runtime.training.driver import SegmentTrainer

    X, Y = tp.simplemlp_data(samples)
    Xv, Yv = tp.simplemlp_data(samples // 4)
    Xt, Yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(Y, tiles=(2,))
    Xt.persist(wait=True), Yt.persist(wait=True)
    spans, res = SegmentTrainer.spans, {True: [], False: []}
    try:
        for _ in range(rounds):
            for span in (True, False):
                SegmentTrainer.spans = spans if span else (lambda self: False)
                h = tp.simplemlp().fit(Xt, Yt, epochs=epochs, batch_size=128, optimizer=nn.SGD(0.01, momentum=0.9),
                                       validation=(Xv, Yv), parallel="allreduce", verbose=False)
                res[span].append(1e3 * statistics.mean(h["time"][1:]))
    finally:
        SegmentTrainer.spans = spans
    return [[f"fit simplemlp, validation {samples // 4} rows, {samples // 128} steps an epoch: ms per epoch",
             f"{statistics.median(res[True]):.1f}", f"{statistics.median(res[False]):.1f}",
             f"{statistics.median([b / a for a, b in zip(res[True], res[False])]):.2f}"]]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args(argv)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rt = dask_runtime(2)
    try:
        with px.using(rt):
            rows = spmd_calls(args.rounds) + training_epochs(rt.executor.client, args.rounds) + \
                validated_epochs(args.rounds)
    finally:
        close_runtime(rt)
    print_table(["run", "kept (span, kept group) ms", "made again ms", "made again / kept (median of rounds)"], rows)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
