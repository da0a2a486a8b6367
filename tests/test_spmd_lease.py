"""SPMD segments that outlive a call (segments/rank.py POOL, spmd/driver.py leases), on real worker processes: the
next call of a loop on the same tiles reuses the ranks' ring group (no connections or shared-memory regions made
again) and still returns NumPy's answer; a group gone from one worker, or a worker killed between calls, costs a
rerun with a new group, never a wrong answer or a hang."""
from __future__ import annotations

import os
import time

import numpy as np
import prog_tiled as P
import pytest
from cluster import DaskProcesses
from phylanx_py.runtime.segments import rank as on_worker

import phylanx_py as px

RTOL = 1e-9


def _data(n=600, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, (X @ rng.standard_normal(d) > 0).astype(np.float64)


def pooled(client):
    """Worker address -> {lease key: {rank: id of the kept group}}."""
    return client.run(lambda: {k: {r: id(g) for r, g in v.items()} for k, v in on_worker.POOL.items()})


@pytest.fixture()
def procs():
    p = DaskProcesses(n_workers=2)
    yield p
    p.stop()


def test_calls_on_the_same_tiles_reuse_one_group_and_one_lost_is_formed_again(procs):
    X, y = _data()
    with px.runtime.dask(procs.address) as rt, px.using(rt):
        client = rt.executor.client
        Xt, yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(y, tiles=(2,))
        Xt.persist(wait=True), yt.persist(wait=True)
        f = px.compile(P.lra)
        kept = []
        for i in range(4):
            np.testing.assert_allclose(f(Xt, yt, 0.5, 3 + i), P.lra(X, y, 0.5, 3 + i), rtol=RTOL, atol=1e-14)
            kept.append(pooled(client))
        assert "0 tasks" in f.explain()
        # one lease, one group per worker, the same objects from the first call on: formed once
        assert all(len(k) == 1 for k in kept[0].values()), kept[0]
        assert kept[1:] == kept[:-1]
        # the group gone from one worker (closed: its peer's connection closes too): the next call is run again
        # (as tasks, with groups of their own), gives the same answer, and the call after it keeps a new group
        (worker, leases), = list(kept[-1].items())[:1]
        client.run(on_worker.release, list(leases), workers=[worker])
        t0 = time.monotonic()
        np.testing.assert_allclose(f(Xt, yt, 0.5, 7), P.lra(X, y, 0.5, 7), rtol=RTOL, atol=1e-14)
        assert time.monotonic() - t0 < 30
        np.testing.assert_allclose(f(Xt, yt, 0.5, 8), P.lra(X, y, 0.5, 8), rtol=RTOL, atol=1e-14)
        again = pooled(client)
        assert all(len(v) == 1 and set(v) != set(leases) for v in again.values()), again


def test_a_worker_killed_between_calls_leaves_no_group_waited_on(procs):
    X, y = _data(seed=3)
    with px.runtime.dask(procs.address) as rt, px.using(rt):
        client = rt.executor.client
        Xt, yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(y, tiles=(2,))
        Xt.persist(wait=True), yt.persist(wait=True)
        f = px.compile(P.lra)
        for _ in range(2):
            np.testing.assert_allclose(f(Xt, yt, 0.5, 4), P.lra(X, y, 0.5, 4), rtol=RTOL, atol=1e-14)
        pids = client.run(os.getpid)
        victim = next(w for w in procs.alive_workers() if w.pid == pids[sorted(pids)[1]])
        procs.kill_worker(victim)
        t0 = time.monotonic()
        np.testing.assert_allclose(f(Xt, yt, 0.5, 5), P.lra(X, y, 0.5, 5), rtol=RTOL, atol=1e-14)
        assert time.monotonic() - t0 < 60


def test_calls_on_new_tiled_arrays_on_the_same_workers_reuse_the_group(procs):
    """The group depends on the ranks' workers, not on their tiles: a loop called on a new tiled array every call
    (as a user who tiles inside a loop does) keeps one group per worker, not one per call."""
    with px.runtime.dask(procs.address) as rt, px.using(rt):
        client = rt.executor.client
        f = px.compile(P.lra)
        kept = []
        for seed in range(4):
            X, y = _data(seed=seed)
            Xt, yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(y, tiles=(2,))
            Xt.persist(wait=True), yt.persist(wait=True)
            np.testing.assert_allclose(f(Xt, yt, 0.5, 3), P.lra(X, y, 0.5, 3), rtol=RTOL, atol=1e-14)
            kept.append(pooled(client))
    workers = {w for k in kept for w, v in k.items() if v}
    assert len(workers) == 2 and all(len(v) == 1 for v in kept[-1].values()), kept
    assert kept[1:] == kept[:-1]
