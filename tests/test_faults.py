"""Failures of the cluster itself are ClusterErrors naming the call, in bounded time, on real Dask processes: the
scheduler killed during a compiled call, tiled work, training, or between calls; a cluster without workers."""
from __future__ import annotations

import threading
import time

import numpy as np
import prog_dask
import prog_tiled
import pytest
from cluster import DaskProcesses

import phylanx_py as px
from phylanx_py import nn

pytestmark = pytest.mark.timeout(300)


def _data(rows=200_000, cols=10, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, cols))
    return X, (X @ rng.standard_normal(cols) > 0).astype(float)


def _lost(address, call, now=True):
    return (f"{call} failed: the connection to the Dask scheduler at {address} was lost (client connecting): the "
            "scheduler died or the network failed; this runtime is closed now: make a new one (px.runtime.dask(...))"
            " once the scheduler runs again") if now else (
            f"{call} cannot run: the connection to the Dask scheduler at {address} was lost (client connecting): "
            "the scheduler died or the network failed; this runtime was closed then: make a new one "
            "(px.runtime.dask(...)) once the scheduler runs again")


def _kill_scheduler_during(procs, fut, settle=1.5):
    time.sleep(settle)
    assert not fut.done(), "the call must still be running when the scheduler dies"
    procs.kill_scheduler()
    t0 = time.monotonic()
    with pytest.raises(px.ClusterError) as err:
        fut.result(timeout=120)
    return err.value, time.monotonic() - t0


def test_scheduler_killed_mid_call_is_a_cluster_error_and_a_new_runtime_works():
    X, y = _data()
    f = px.compile(prog_dask.lra)
    procs = DaskProcesses(n_workers=2)
    try:
        rt = px.runtime.dask(procs.address)
        with px.using(rt):
            err, seconds = _kill_scheduler_during(procs, f.lazy(X, y, 0.5, 500))
            assert str(err) == _lost(procs.address, "lra()")
            assert seconds < 15  # distributed notices the closed connection at once (its reconnect lasts 10 s)
            assert rt.closed and repr(rt).startswith(f"<phylanx runtime dask {procs.address}: closed (")
            with pytest.raises(px.ClusterError) as err:  # the next call: no user line blamed, no waiting
                f(X[:100], y[:100], 0.5, 2)
            assert str(err.value) == _lost(procs.address, "lra()", now=False)
    finally:
        procs.stop()
    procs = DaskProcesses(n_workers=1)
    try:
        with px.runtime.dask(procs.address) as rt2, px.using(rt2):
            np.testing.assert_allclose(f(X[:1000], y[:1000], 0.5, 3), prog_dask.lra(X[:1000], y[:1000], 0.5, 3))
    finally:
        procs.stop()


def test_scheduler_killed_during_tiled_work_and_between_calls():
    X, y = _data(rows=400_000)
    f = px.compile(prog_tiled.lra)
    procs = DaskProcesses(n_workers=2)
    try:
        with px.using(px.runtime.dask(procs.address)) as rt:
            Xt, yt = px.tiled.from_array(X, tiles=(4, 1)), px.tiled.from_array(y, tiles=(4,))
            np.testing.assert_allclose(f(Xt, yt, 0.5, 2), prog_tiled.lra(X, y, 0.5, 2), rtol=1e-10)
            err, seconds = _kill_scheduler_during(procs, f.lazy(Xt, yt, 0.5, 2000))
            assert str(err) == _lost(procs.address, "lra()") and seconds < 15
            assert rt.closed
    finally:
        procs.stop()
    procs = DaskProcesses(n_workers=1)
    try:
        rt = px.runtime.dask(procs.address)
        with px.using(rt):
            assert f(X[:1000], y[:1000], 0.5, 1).shape == (10,)
            procs.kill_scheduler()  # while no call runs
            time.sleep(0.5)
            t0 = time.monotonic()
            with pytest.raises(px.ClusterError) as err:
                f(X[:1000], y[:1000], 0.5, 1)
            assert time.monotonic() - t0 < 5
        assert str(err.value) == _lost(procs.address, "lra()")  # the first call to find the scheduler gone
        assert rt.closed
    finally:
        procs.stop()


def _blobs(n, seed=0):
    rng = np.random.default_rng(seed)
    Y = rng.integers(0, 3, n)
    return rng.standard_normal((n, 6)) + Y[:, None], Y


@pytest.mark.parametrize("mode", ["allreduce", "neighbours"])
def test_scheduler_killed_during_fit_is_a_cluster_error(mode):
    X, Y = _blobs(2000)
    procs = DaskProcesses(n_workers=2)
    try:
        with px.runtime.dask(procs.address) as rt, px.using(rt):
            Xt, Yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(Y, tiles=(2,))
            m = nn.Sequential([nn.Dense(6, 32), nn.ReLU(), nn.Dense(32, 3)])
            killer = threading.Timer(1.5, procs.kill_scheduler)
            killer.start()
            t0 = time.monotonic()
            with pytest.raises(px.ClusterError) as err:
                m.fit(Xt, Yt, epochs=100, batch_size=16, parallel=mode, verbose=False)
            killer.join()
            assert time.monotonic() - t0 < 20
            assert str(err.value).startswith(f"fit(parallel={mode!r}) failed: the connection to the Dask scheduler "
                                             f"at {procs.address} was lost")
            assert rt.closed
    finally:
        procs.stop()


def test_no_worker_timeout_is_that_many_seconds():
    X, y = _data()
    f = px.compile(prog_dask.lra)
    procs = DaskProcesses(n_workers=1)
    try:
        with px.runtime.dask(procs.address, no_worker_timeout=3) as rt, px.using(rt):
            fut = f.lazy(X, y, 0.5, 500)
            time.sleep(1.0)
            procs.kill_worker(procs.alive_workers()[0])
            t0 = time.monotonic()
            with pytest.raises(px.ClusterError) as err:
                fut.result(timeout=120)
            seconds = time.monotonic() - t0
            assert str(err.value).startswith("lra() failed: the Dask cluster has had no workers for 3 s; the "
                                             "computation cannot finish (start workers, or raise no_worker_timeout)")
            assert 3 <= seconds < 3 + 3  # once, not once per wait of the failing call (it was about twice)
            assert not rt.closed  # the scheduler is fine: workers that join make it usable again
            procs.add_worker()
            procs.wait_for_workers(1)
            np.testing.assert_allclose(f(X[:1000], y[:1000], 0.5, 2), prog_dask.lra(X[:1000], y[:1000], 0.5, 2))
    finally:
        procs.stop()
