"""Chaos: SIGKILL a Dask worker (or the scheduler) at a random moment of real work and count what the user gets.

    python benchmarks/chaos.py                       # 20 worker kills per kind, 5 scheduler kills per kind
    python benchmarks/chaos.py --kills 3 --scheduler-kills 1 --kinds compiled,allreduce

Kinds: ``compiled`` (a compiled LRA on NumPy inputs), ``tiled`` (the same on tiled arrays), ``allreduce`` and
``neighbours`` (``Sequential.fit(parallel=...)`` on row tiles). Each trial starts the work, kills one process at a
time drawn uniformly from the work's undisturbed duration, and classifies the outcome: ``right`` (the answer of
an undisturbed run), ``wrong`` (an answer, but another one), ``ClusterError``, or the exception's type (anything
else is a bug). ``early`` counts trials that finished before the kill (not a test of anything). Workers are real
``dask worker`` processes on 127.0.0.1 (tests/cluster.py), without nannies, so a killed worker stays dead; a new
one replaces it before the next trial. Runtimes use ``inline_elements=0``, so every array operation is a task on
the workers (nothing runs inline on the client, out of the kills' reach). Promise: worker kills give right answers
(training always completes); scheduler kills give right answers or ClusterErrors; nothing else.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from prog_dask import lra  # noqa: E402 - the test suite's LRA program (tests/ is on the path above)

import phylanx_py as px  # noqa: E402
from phylanx_py import nn  # noqa: E402

KINDS = ("compiled", "tiled", "allreduce", "neighbours")

_lra = px.compile(lra)


class Work:
    """One kind of work at a size that takes about a second or two on two single-threaded workers."""

    def __init__(self, kind: str, scale: float = 1.0):
        self.kind = kind
        rng = np.random.default_rng(0)
        small = scale < 1  # the CI version (tests/test_chaos.py)
        if kind in ("compiled", "tiled"):
            self.X = rng.standard_normal((int(200_000 * scale), 10))
            self.y = (self.X @ rng.standard_normal(10) > 0).astype(float)
            self.iterations = (15 if small else 30) if kind == "tiled" else (30 if small else 60)
        else:
            Y = rng.integers(0, 3, int(1200 * scale))
            self.X, self.y = rng.standard_normal((len(Y), 6)) + Y[:, None], Y
            self.epochs, self.batch_size = (1, 32) if small else (2, 16)

    def run(self, rt):
        """The work's answer on runtime ``rt`` (an array to compare)."""
        with px.using(rt):
            if self.kind == "compiled":
                return _lra(self.X, self.y, 0.5, self.iterations)
            if self.kind == "tiled":
                Xt = px.tiled.from_array(self.X, tiles=(4, 1))
                yt = px.tiled.from_array(self.y, tiles=(4,))
                return _lra(Xt, yt, 0.5, self.iterations)
            Xt = px.tiled.from_array(self.X, tiles=(2, 1))
            Yt = px.tiled.from_array(self.y, tiles=(2,))
            m = nn.Sequential([nn.Dense(6, 32), nn.ReLU(), nn.Dense(32, 3)])
            h = m.fit(Xt, Yt, epochs=self.epochs, batch_size=self.batch_size, optimizer=nn.SGD(0.05), seed=0,
                      parallel=self.kind, verbose=False)
            return np.concatenate([np.ravel(m.params[0]["W"]), h["loss"]])


def classify(answer, want) -> str:
    return "right" if np.allclose(answer, want, rtol=1e-8, atol=1e-12) else "wrong"


class Durations:
    """How long the undisturbed work takes, as the trials go (it varies with load, and a replacement worker
    compiles its kernels again): the median of the last few undisturbed runs, the kill drawn within it."""

    def __init__(self, work, rt, runs: int = 2):
        self.seen = []
        for _ in range(runs):
            t0 = time.perf_counter()
            work.run(rt)
            self.seen.append(time.perf_counter() - t0)

    @property
    def now(self) -> float:
        return float(np.median(self.seen[-5:]))


def _outcome(pool, work, rt, kill, at, durations=None) -> str:
    t0 = time.perf_counter()
    fut = pool.submit(work.run, rt)
    done = threading.Event()
    fut.add_done_callback(lambda _: done.set())
    if done.wait(at):
        if durations is not None:
            durations.seen.append(time.perf_counter() - t0)
        return "early"
    kill()
    try:
        answer = fut.result(timeout=300)
    except px.ClusterError:
        return "ClusterError"
    except Exception as e:  # noqa: BLE001 - anything else is what this script exists to count
        _outcome.last_error = f"{type(e).__name__}: {e}"
        return f"{type(e).__module__}.{type(e).__name__}"
    return classify(answer, work.want)


_outcome.last_error = ""


def worker_kills(kind: str, n: int, rng: random.Random, scale: float = 1.0, log=print, procs=None,
                 max_trials: int | None = None) -> Counter:
    """Trials until ``n`` kills landed during the work (at most ``max_trials``, default 3n; ``early``: the work
    finished first),
    one random worker killed in each; a replacement starts at once (not waited for: a trial needs two live
    workers, the third may still be starting). ``procs``: a running cluster to use."""
    from cluster import DaskProcesses

    work = Work(kind, scale)
    own = procs is None
    if own:
        procs = DaskProcesses(n_workers=3)
    counts: Counter = Counter()
    try:
        with px.runtime.dask(procs.address, inline_elements=0) as rt, ThreadPoolExecutor(1) as pool:
            work.want = work.run(rt)  # the first run compiles and warms up: the next ones are timed
            durations = Durations(work, rt)
            trial = 0
            while sum(v for k, v in counts.items() if k != "early") < n and trial < (max_trials or 3 * n):
                trial += 1
                while len(rt.client.nthreads()) < 2:  # two registered workers (a replacement may be starting)
                    if len(procs.alive_workers()) < 2:
                        procs.add_worker()
                    time.sleep(0.1)
                if len(procs.alive_workers()) < 3:
                    procs.add_worker()
                victim = rng.choice(procs.alive_workers())
                duration = durations.now
                at = rng.uniform(0.05, 0.9) * duration
                outcome = _outcome(pool, work, rt, lambda v=victim: procs.kill_worker(v), at, durations)
                counts[outcome] += 1
                extra = f" ({_outcome.last_error[:300]})" if outcome not in ("right", "ClusterError", "early") else ""
                log(f"  {kind} worker kill {trial} (until {n} land) at {at:.2f}s of {duration:.2f}s: {outcome}{extra}")
    finally:
        if own:
            procs.stop()
    return counts


def scheduler_kills(kind: str, n: int, rng: random.Random, scale: float = 1.0, log=print) -> Counter:
    """``n`` trials, each on a fresh cluster whose scheduler is killed at a random moment of the work."""
    from cluster import DaskProcesses

    work = Work(kind, scale)
    counts: Counter = Counter()
    durations = None
    for trial in range(n):
        procs = DaskProcesses(n_workers=2)
        try:
            rt = px.runtime.dask(procs.address, inline_elements=0)
            with ThreadPoolExecutor(1) as pool:
                if durations is None:
                    work.want = work.run(rt)
                    durations = Durations(work, rt)
                else:
                    work.run(rt)  # this cluster's workers compile their kernels before the timed trial
                duration = durations.now
                at = rng.uniform(0.05, 0.9) * duration
                outcome = _outcome(pool, work, rt, procs.kill_scheduler, at, durations)
            if outcome == "ClusterError" and not rt.closed:
                outcome = "ClusterError (runtime not closed)"
            rt.close()
        finally:
            procs.stop()
        counts[outcome] += 1
        extra = f" ({_outcome.last_error[:300]})" if outcome not in ("right", "ClusterError", "early") else ""
        log(f"  {kind} scheduler kill {trial + 1}/{n} at {at:.2f}s of {duration:.2f}s: {outcome}{extra}")
    return counts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=20, help="worker kills per kind (default 20)")
    ap.add_argument("--scheduler-kills", type=int, default=5, help="scheduler kills per kind (default 5)")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    import logging

    logging.getLogger("distributed").setLevel(logging.CRITICAL)  # the kills' own tracebacks are expected noise
    rng = random.Random(args.seed)
    log = (lambda *_: None) if args.quiet else (lambda s: print(s, flush=True))
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} on {os.cpu_count()} cores")
    rows = []
    for kind in args.kinds.split(","):
        if args.kills:
            rows.append((kind, "worker", worker_kills(kind, args.kills, rng, log=log)))
        if args.scheduler_kills:
            rows.append((kind, "scheduler", scheduler_kills(kind, args.scheduler_kills, rng, log=log)))
    print(f"\n{'kind':<11} {'killed':<10} {'trials':>6} {'right':>6} {'ClusterError':>13} {'early':>6}  other")
    for kind, what, c in rows:
        other = {k: v for k, v in c.items() if k not in ("right", "ClusterError", "early")}
        print(f"{kind:<11} {what:<10} {sum(c.values()):>6} {c['right']:>6} {c['ClusterError']:>13} {c['early']:>6}  "
              f"{other or '-'}")
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
