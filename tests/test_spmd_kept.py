"""What an SPMD call leaves on the workers, on real worker processes: the tiles of its tiled outputs stay where the
ranks made them, as Dask data the client holds (spmd/stored.py), and the loop's job is sent to a worker once and
kept there (spmd/kept.py). Each call still returns NumPy's answer; a job gone from a worker or a worker killed
between calls costs a rerun, never a wrong answer or a hang; an output given up is freed."""
from __future__ import annotations

import gc
import os
import time

import numpy as np
import prog_spmd as S
import pytest
from cluster import DaskProcesses
from phylanx_py.runtime.segments import rank as on_worker
from phylanx_py.runtime.spmd import kept, stored

import phylanx_py as px

RTOL = 1e-9


def _blobs(n=1200, k=4, seed=5):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-10.0, 10.0, (k, 2))
    X = centres[rng.integers(0, k, n)] + rng.standard_normal((n, 2))
    return X, X[:k].copy()


def _held(client, keys):
    """Worker -> the ones of ``keys`` in its memory."""
    return client.run(lambda dask_worker: sorted(k for k in keys if k in dask_worker.data))


def _jobs(client):
    return client.run(lambda: list(kept._JOBS))


@pytest.fixture()
def procs():
    p = DaskProcesses(n_workers=2)
    yield p
    p.stop()


def test_tiled_outputs_stay_where_the_ranks_made_them_and_the_job_is_sent_once(procs):
    X, C0 = _blobs()
    with px.runtime.dask(procs.address) as rt, px.using(rt):
        client = rt.executor.client
        Xt = px.tiled.from_array(X, tiles=(4, 1)).persist(wait=True)
        f = px.compile(S.kmeans_masked)
        for it in (3, 4, 5):
            C, labels = f(Xt, C0, it)
            Cr, lr = S.kmeans_masked(X, C0, it)
            np.testing.assert_allclose(C, Cr, rtol=RTOL)
            futs = list(labels.futures.reshape(-1))
            # finished when the call returns, held by the workers whose ranks made them: no task ran for them
            assert all(fu.status == "finished" for fu in futs)
            who = client.who_has(futs)
            assert [list(who[fu.key]) for fu in futs] == [[w] for w in labels._homes.reshape(-1)]
            assert "0 tasks for the whole loop" in f.explain(), f.explain()
            np.testing.assert_array_equal(np.asarray(labels), lr)
            # the job went to each worker once: every call after the first sent its key only
            assert all(len(v) == 1 for v in _jobs(client).values()), _jobs(client)
        keys = [fu.key for fu in futs]
        del labels, futs, who
        gc.collect()
        deadline = time.monotonic() + 30
        while any(_held(client, keys).values()):  # the client let go of them: Dask frees them on the workers
            assert time.monotonic() < deadline, _held(client, keys)
            time.sleep(0.05)


def test_a_job_gone_from_a_worker_runs_the_call_again_and_is_sent_again(procs):
    X, C0 = _blobs(seed=6)
    with px.runtime.dask(procs.address) as rt, px.using(rt):
        client = rt.executor.client
        Xt = px.tiled.from_array(X, tiles=(2, 1)).persist(wait=True)
        f = px.compile(S.kmeans_masked)
        for it in (2, 3):
            C, labels = f(Xt, C0, it)
        worker = sorted(client.nthreads())[0]
        client.run(lambda: kept._JOBS.clear(), workers=[worker])  # (as a worker that kept newer ones)
        for it in (4, 5):  # the first through the scheduler with the whole job; the second directly again
            C, labels = f(Xt, C0, it)
            Cr, lr = S.kmeans_masked(X, C0, it)
            np.testing.assert_allclose(C, Cr, rtol=RTOL)
            np.testing.assert_array_equal(np.asarray(labels), lr)
        assert "0 tasks for the whole loop" in f.explain(), f.explain()
        assert all(len(v) == 1 for v in _jobs(client).values()), _jobs(client)


def test_a_worker_killed_between_calls_gives_numpys_answer(procs):
    X, C0 = _blobs(seed=7)
    with px.runtime.dask(procs.address) as rt, px.using(rt):
        client = rt.executor.client
        Xt = px.tiled.from_array(X, tiles=(4, 1)).persist(wait=True)
        f = px.compile(S.kmeans_masked)
        for it in (2, 3):
            C, labels = f(Xt, C0, it)
        pids = client.run(os.getpid)
        victim = next(w for w in procs.alive_workers() if w.pid == pids[sorted(pids)[1]])
        procs.kill_worker(victim)
        t0 = time.monotonic()
        C, labels2 = f(Xt, C0, 4)  # X's lost tiles recomputed from their lineage, the job sent to no dead port
        Cr, lr = S.kmeans_masked(X, C0, 4)
        np.testing.assert_allclose(C, Cr, rtol=RTOL)
        np.testing.assert_array_equal(np.asarray(labels2), lr)
        assert time.monotonic() - t0 < 60
        # the last call's labels had tiles on the dead worker, with no lineage (as the loop's tiles never had):
        # reading them is an error, not a hang and not a wrong value
        t0 = time.monotonic()
        with pytest.raises(Exception) as e:
            np.asarray(labels)
        assert time.monotonic() - t0 < 60
        assert "lost" in str(e.value).lower() or "cancel" in str(e.value).lower(), repr(e.value)


def test_outputs_of_a_segment_given_up_are_freed(procs):
    """A rank that stored its outputs when its segment was given up (a peer failed): the abort frees them, and a
    rank storing after its abort frees its own."""
    with px.runtime.dask(procs.address) as rt:
        client = rt.executor.client
        worker = sorted(client.nthreads())[0]

        def _store_then_abort(name, abort_first):
            """A rank's storing and its segment's abort, in either order, in a task's thread (``store`` waits for the
            worker's event loop, as from a rank's thread)."""
            from distributed import get_worker

            w = get_worker()
            if abort_first:
                on_worker.abort(name, w)
            out = stored.store(w, name, 0, {"labels": [np.arange(3), np.arange(4)]})
            if not abort_first:
                on_worker.abort(name, w)
            return [k for k, _ in out["labels"]]

        for first in (False, True):
            name = f"phylanx-spmd-t{first}"
            keys = client.submit(_store_then_abort, name, first, workers=[worker], pure=False).result(60)
            assert keys == [stored.key(name, "labels", 0, i) for i in range(2)]
            deadline = time.monotonic() + 10
            while _held(client, keys)[worker]:
                assert time.monotonic() < deadline, _held(client, keys)
                time.sleep(0.02)


def _pooled(client):
    """Worker address -> {lease key: {rank: id of the kept group}}."""
    return client.run(lambda: {k: {r: id(g) for r, g in v.items()} for k, v in on_worker.POOL.items()})


def test_calls_through_the_scheduler_keep_their_group_too(procs, monkeypatch):
    """Ranks run as tasks (here every call: PHYLANX_SPMD_DIRECT=0's path; else a job too large to send with a
    request, or tiles not in place) keep their ring group for the next call as directly started ranks do; a worker
    killed between calls still gives NumPy's answer."""
    from phylanx_py.runtime.spmd import driver

    monkeypatch.setattr(driver, "DIRECT", False)
    X, C0 = _blobs(seed=8)
    with px.runtime.dask(procs.address) as rt, px.using(rt):
        client = rt.executor.client
        Xt = px.tiled.from_array(X, tiles=(2, 1)).persist(wait=True)
        f = px.compile(S.kmeans_masked)
        kept_groups = []
        for it in (2, 3, 4):
            C, labels = f(Xt, C0, it)
            Cr, lr = S.kmeans_masked(X, C0, it)
            np.testing.assert_allclose(C, Cr, rtol=RTOL)
            np.testing.assert_array_equal(np.asarray(labels), lr)
            assert "4 tasks for the whole loop" in f.explain(), f.explain()  # 2 ranks, 2 tiles handed over
            kept_groups.append(_pooled(client))
        assert all(len(v) == 1 for v in kept_groups[0].values()), kept_groups[0]
        assert kept_groups[1:] == kept_groups[:-1]  # one group per worker, formed by the first call
        pids = client.run(os.getpid)
        victim = next(w for w in procs.alive_workers() if w.pid == pids[sorted(pids)[1]])
        procs.kill_worker(victim)
        t0 = time.monotonic()
        C, labels = f(Xt, C0, 5)
        Cr, lr = S.kmeans_masked(X, C0, 5)
        np.testing.assert_allclose(C, Cr, rtol=RTOL)
        np.testing.assert_array_equal(np.asarray(labels), lr)
        assert time.monotonic() - t0 < 60
