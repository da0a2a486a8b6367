"""Data-parallel training whose ranks share a machine: each rank sums its chunk of the gradient and updates that
chunk of parameters kept in shared memory (runtime/training/shard.py). On real Dask worker processes: it equals
sequential training, gives the bits of the whole update on every rank, is reused by the next fit on the same
workers, and survives a rank SIGKILLed mid-run."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from cluster import DaskProcesses
from phylanx_py.runtime.segments import rank as on_worker
from phylanx_py.runtime.segments import shm
from test_training import blobs, kill_a_rank_mid_segment, planned_fit

import phylanx_py as px
from phylanx_py import nn

pytestmark = pytest.mark.skipif(not shm.usable(), reason="no writable /dev/shm on x86-64 here")


def wide_model():
    """60,003 float64 parameters (480 KB): past shm.SMALL_BYTES, so the gradient is summed chunk by chunk."""
    return nn.Sequential([nn.Dense(6, 6000), nn.Tanh(), nn.Dense(6000, 3)])


class WholeSGD(nn.SGD):
    """SGD as it is, through an ``update`` of its own that does not say it is element-wise: the ranks all-reduce
    the gradient and each updates every parameter (the path before shard.py)."""

    def update(self, params, grads, state, step):
        super().update(params, grads, state, step)


WholeSGD.__module__ = WholeSGD.update.__module__ = "__main__"  # (the workers cannot import this module)


@pytest.fixture(scope="module")
def procs():
    p = DaskProcesses(n_workers=2)
    yield p
    p.stop()


def shared_vectors(client):
    """Per worker: the element counts of the shared vectors its kept ring groups (segments/rank.py POOL) hold."""
    def found():
        return sorted(k[2] for ranks in on_worker.POOL.values() for g in ranks.values() for k in g._regions
                      if k[0] == "vectors")
    return client.run(found)


def fit(rt, X, Y, optimizer, epochs=2, spread=True):
    """``spread``: check that the two row tiles ended on two workers (not after a kill)."""
    model = wide_model()
    with px.using(rt):
        Xt, Yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(Y, tiles=(2,))
        h = model.fit(Xt, Yt, parallel="allreduce", optimizer=optimizer, epochs=epochs, batch_size=16, seed=3,
                      verbose=False)
        assert not spread or len(set(Xt.placement.values())) == 2  # one row tile on each worker
    return model, h, Xt.boundaries[0]


OPTIMIZERS = {
    "sgd momentum": lambda: nn.SGD(0.05, momentum=0.9),
    "nesterov, weight decay": lambda: nn.SGD(0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "adam": lambda: nn.Adam(1e-3),
    "rmsprop momentum": lambda: nn.RMSprop(1e-3, momentum=0.5),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_chunk_updates_in_shared_memory_equal_sequential_training(procs, name):
    X, Y = blobs(n=128)
    with px.runtime.dask(procs.address) as rt:
        par, h, rows = fit(rt, X, Y, OPTIMIZERS[name]())
        kept = shared_vectors(rt.executor.client)
    seq = wide_model()
    losses = planned_fit(seq, X, Y, rows, epochs=2, batch_size=16, optimizer=OPTIMIZERS[name](), seed=3)
    for a, b in zip(seq.params, par.params):
        for k in a:
            np.testing.assert_allclose(b[k], a[k], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(h["loss"], losses, rtol=1e-9)
    assert all(60_003 in v for v in kept.values()), kept  # the parameters were in shared vectors on both workers
    assert h["bytes_per_step"][-1] == h["min_bytes_per_step"][-1]  # what the ring would have sent, counted as such


def test_chunk_updates_give_the_bits_of_the_whole_update_and_the_next_fit_reuses_them(procs):
    """Element-wise updates of chunks are the updates of the parameters, to the bit; the second fit on the same
    workers takes the kept group with its shared vectors (copying its own checkpoint in) and trains the same."""
    X, Y = blobs(n=128)
    with px.runtime.dask(procs.address) as rt:
        whole, _, _ = fit(rt, X, Y, WholeSGD(0.05, momentum=0.9))
        first, h1, _ = fit(rt, X, Y, nn.SGD(0.05, momentum=0.9))
        kept = shared_vectors(rt.executor.client)
        second, h2, _ = fit(rt, X, Y, nn.SGD(0.05, momentum=0.9))
        assert shared_vectors(rt.executor.client) == kept  # (no new vectors: the same group and region)
    for a, b, c in zip(whole.params, first.params, second.params):
        for k in a:
            np.testing.assert_array_equal(b[k], a[k])
            np.testing.assert_array_equal(c[k], a[k])
    assert h1["loss"] == h2["loss"]


def test_a_rank_killed_while_ranks_update_shared_chunks_is_survived():
    """The second epoch loses a rank: the survivor's copy of the checkpoint (copied out of the shared vectors at
    each epoch's end) restarts the rest on the live worker: the run equals the undisturbed one up to the order of
    float sums (one rank then sums both tiles' rows)."""
    X, Y = blobs(n=2400)  # 75 steps an epoch: long enough for the killer (it polls every 20 ms)
    procs = DaskProcesses(n_workers=2)
    try:
        with px.runtime.dask(procs.address) as rt:
            ref, h_ref, _ = fit(rt, X, Y, nn.SGD(0.05, momentum=0.9), epochs=3)
            stop, killed = threading.Event(), []
            steps = 2400 // 16
            killer = threading.Thread(target=lambda: killed.append(
                kill_a_rank_mid_segment(procs, rt.executor.client, stop, steps)))
            killer.start()
            try:
                got, h, _ = fit(rt, X, Y, nn.SGD(0.05, momentum=0.9), epochs=3, spread=False)
            finally:
                stop.set()
                killer.join()
    finally:
        procs.stop()
    assert killed and sum(h["restarts"]) >= 1, h["restarts"]
    np.testing.assert_allclose(h["loss"], h_ref["loss"], rtol=1e-7)
    for a, b in zip(ref.params, got.params):
        for k in a:
            np.testing.assert_allclose(b[k], a[k], rtol=1e-7, atol=1e-10)
