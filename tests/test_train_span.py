"""Training epochs as one span (runtime/training/span.py) on real Dask worker processes: the ranks, their ring and
the checkpoint stay on the workers from one epoch to the next and the run equals per-epoch segments bit for bit; a
rank SIGKILLed mid-run is survived, the checkpoint fetched from the survivor's copy then and only then."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from cluster import DaskProcesses
from phylanx_py.runtime.segments import rank as on_worker
from phylanx_py.runtime.training import SegmentTrainer
from phylanx_py.runtime.training import segment as seg
from test_training import blobs, kill_a_rank_mid_segment, small_model

import phylanx_py as px
from phylanx_py import nn
from phylanx_py.nn.parallel import ModelProblem, pack

EPOCHS = 3


def train(rt, X, Y, *, span, mode="allreduce", kill=None):
    """(final flat parameters, each epoch's carry, each epoch's loss, restarts, the trainer): ``EPOCHS`` epochs of
    a 6-32-3 MLP (seed 5) over ``X``, ``Y`` in two row tiles, 16 rows per step, SGD with momentum; ``span`` as
    fit sets it. ``kill``: (procs, stop event, killed list) to SIGKILL a rank during the second epoch."""
    with px.using(rt):
        model = small_model()
        model.build(X.shape[1:], 5)
        Xt, Yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(Y, tiles=(2,))
        Xt.persist(wait=True), Yt.persist(wait=True)
        half = len(X) // 2
        tr = SegmentTrainer(rt.executor, [Xt.futures[(i, 0)] for i in range(2)], [Yt.futures[(i,)] for i in range(2)],
                            [half, half], ModelProblem(model), nn.SGD(0.05, momentum=0.9), mode=mode, batch=16,
                            seed=1)
        tr.horizon, tr.span = EPOCHS, span
        killer = None
        if kill is not None:
            procs, stop, killed = kill
            killer = threading.Thread(target=lambda: killed.append(
                kill_a_rank_mid_segment(procs, rt.executor.client, stop, tr.steps)))
            killer.start()
        carry, carries, losses, restarts = tr.start(pack(model.params), model.state), [], [], []
        try:
            for e in range(EPOCHS):
                carry, stats = tr.epoch(e, carry)
                carries.append(carry)
                losses.append(stats["loss"] / stats["rows"])
                restarts.append(tr.restarts)
        finally:
            if killer is not None:
                kill[1].set()
                killer.join()
            tr.close()
    return carry[0], carries, losses, restarts, tr


@pytest.fixture(scope="module")
def procs():
    p = DaskProcesses(n_workers=2)
    yield p
    p.stop()


def test_a_span_equals_per_epoch_segments_and_keeps_the_checkpoint_on_the_workers(procs):
    X, Y = blobs(n=400)
    with px.runtime.dask(procs.address) as rt:
        client = rt.executor.client
        ref, ref_carries, ref_losses, _, _ = train(rt, X, Y, span=False)
        aborted = client.run(lambda: len(on_worker.ABORTED))
        got, carries, losses, restarts, tr = train(rt, X, Y, span=True)
        kept = client.run(lambda: len(seg.SPANS))
        assert client.run(lambda: len(on_worker.ABORTED)) == aborted  # a span that ended well leaves no name
    np.testing.assert_array_equal(got, ref)  # the same additions in the same order
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-12)  # (summed over the ranks by the ring)
    assert all(c is not None for c in ref_carries)  # per-epoch segments hand the checkpoint back every epoch
    assert carries[:-1] == [None] * (EPOCHS - 1) and carries[-1] is not None  # a span: only after the last
    assert restarts == [0] * EPOCHS and tr._span is None  # (closed)
    assert set(kept.values()) == {0}  # the ranks' copies were freed


def test_compute_mode_spans_too():
    """The benchmarks' compute-only ideal: ranks that never combine; each reports its own totals, summed here. Rank
    0 trains on its rows alone either way (its checkpoint is the result); per-epoch segments restart rank 1 from
    rank 0's checkpoint every epoch, a span lets it go on from its own, so only the first epoch's totals agree."""
    X, Y = blobs(n=400)
    procs = DaskProcesses(n_workers=2)
    try:
        with px.runtime.dask(procs.address) as rt:
            a = train(rt, X, Y, span=False, mode="compute")
            b = train(rt, X, Y, span=True, mode="compute")
    finally:
        procs.stop()
    np.testing.assert_array_equal(a[0], b[0])
    assert a[2][0] == b[2][0] and a[2][1:] != b[2][1:]


def test_a_rank_killed_mid_span_is_survived_from_the_survivors_copy():
    """The second epoch loses a rank: the survivor's copy of the checkpoint at the end of the first epoch (or later)
    comes to the client, the only time one does before the end, and a new span runs the rest on the live worker:
    the run equals the undisturbed one up to the order of float64 sums."""
    X, Y = blobs(n=4000)  # 125 steps an epoch: long enough for the killer (it polls every 20 ms)
    procs = DaskProcesses(n_workers=2)
    try:
        with px.runtime.dask(procs.address) as rt:
            ref, _, ref_losses, _, _ = train(rt, X, Y, span=True)
            stop, killed = threading.Event(), []
            rt_tr = train(rt, X, Y, span=True, kill=(procs, stop, killed))
    finally:
        procs.stop()
    got, carries, losses, restarts, tr = rt_tr
    assert killed and sum(restarts) >= 1, restarts
    span_log = tr.span_log
    # one fetch per restart, each from a survivor's copy at the end of an epoch (-1 would be the span's start)
    assert len(span_log["recovered"]) == sum(restarts) and all(e >= 0 for e in span_log["recovered"]), span_log
    assert carries[:-1] == [None] * (EPOCHS - 1)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-7)  # one rank sums both tiles after the kill
    np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-10)


def test_the_next_span_on_the_same_workers_reuses_the_ranks_ring(procs):
    """A span that ended well leaves its ranks' ring group on the workers (segments/rank.py POOL); the next one on
    the same workers (the next fit call) takes it instead of connecting again, and trains the same, bit for bit."""
    X, Y = blobs(n=400)
    with px.runtime.dask(procs.address) as rt:
        client = rt.executor.client

        def kept():
            return client.run(lambda: {k: {r: id(g) for r, g in v.items()} for k, v in on_worker.POOL.items()})

        first = train(rt, X, Y, span=True)
        after_first = kept()
        second = train(rt, X, Y, span=True)
        after_second = kept()
    np.testing.assert_array_equal(first[0], second[0])
    assert first[2] == second[2]
    # a group kept on each worker by the first span, and the very same ones (no new lease) after the second
    assert all(len(v) >= 1 for v in after_first.values()) and after_second == after_first, (after_first, after_second)
