"""Data-parallel training on real Dask worker processes (phylanx_py.runtime.training): the ring allreduce, training
that equals sequential training on the same batches, neighbour averaging, the stall limit, and a worker SIGKILLed
in the middle of a segment in both modes."""
from __future__ import annotations

import os
import threading
import time
import uuid

import numpy as np
import pytest
from cluster import DaskProcesses
from phylanx_py.runtime.dask_connect import live_workers
from phylanx_py.runtime.segments import ports as ring_ports
from phylanx_py.runtime.segments import rank as on_worker
from phylanx_py.runtime.segments import ring
from phylanx_py.runtime.training import driver
from phylanx_py.runtime.training import segment as seg

import phylanx_py as px
from phylanx_py import nn
from phylanx_py.grad import flatten


def blobs(n=240, d=6, k=3, seed=0):
    """A learnable classification set: k Gaussian blobs."""
    centres = np.random.default_rng(42).normal(size=(k, d)) * 3.0
    rng = np.random.default_rng(seed)
    Y = rng.integers(0, k, n)
    return rng.normal(size=(n, d)) + centres[Y], Y


def planned_fit(model, X, Y, rows, epochs, batch_size, optimizer, seed):
    """Sequential training in this process on the batches parallel training takes (segment.py's plan:
    batch_size // tiles rows of each row tile per step, noise per tile); the per-epoch mean losses."""
    model._ensure_built(X, seed)
    k = len(rows) - 1
    sizes = [rows[t + 1] - rows[t] for t in range(k)]
    b = batch_size // k
    steps = seg.steps_per_epoch(sizes, b)
    flat = flatten(model.params)[0]
    state = optimizer.init(flat)
    fn = model.step_function()
    losses = []
    for e in range(epochs):
        orders = [seg.tile_order(seed, e, t, sizes[t]) for t in range(k)]
        total = 0.0
        for s in range(steps):
            idx = np.concatenate([rows[t] + seg.tile_batch(orders[t], s, b) for t in range(k)])
            noise = seg.step_noise(model, seed, e, s, range(k), b)
            (loss, (model.state, _)), grads = fn(model.params, model.state, noise, X[idx], Y[idx])
            optimizer.update(flat, flatten(grads)[0], state, e * steps + s)
            total += float(loss) * len(idx)
        losses.append(total / (steps * b * k))
    return losses


@pytest.fixture(scope="module")
def cluster():
    procs = DaskProcesses(n_workers=3)
    rt = px.runtime.dask(procs.address)
    yield procs, rt
    rt.close()
    procs.stop()


# ---- the ring ----------------------------------------------------------------------------------------------
# sizes under ring.SMALL_BYTES are gathered whole and summed in rank order; larger ones go round the ring in chunks
# (over TCP) or are summed chunk by chunk, each by one rank (through shared memory: the workers share a machine)
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("n, size", [(2, 1001), (3, 10), (3, 2), (2, 40_001), (3, 40_001)])
def test_ring_allreduce_sums_known_vectors_on_worker_processes(cluster, n, size, shared):
    procs, rt = cluster
    client = rt.executor.client
    workers = sorted(live_workers(client))[:n]
    name = f"test-ring-{uuid.uuid4().hex[:8]}"
    vecs = [np.arange(size, dtype=np.float64) * (r + 1) + r for r in range(n)]  # uneven chunks: size % n != 0
    ports = ring_ports.port_addresses(rt.executor, workers)
    futs = [client.submit(ring.allreduce_task, name, r, n, ports, vecs[r], 3, shared, workers=[w],
                          allow_other_workers=False, pure=False) for r, w in enumerate(workers)]
    results = client.gather(futs)
    want = np.sum(vecs, axis=0)
    for out, times in results:
        np.testing.assert_array_equal(out, want)
        assert len(times) == 3


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("size", [100, 40_001])
def test_every_rank_ends_with_the_same_bits(cluster, size, shared):
    """Random values, whose sum depends on the order of the additions: every rank must hold the same bits (the
    ranks of an SPMD loop or a training step then take the same decisions), close to NumPy's sum."""
    procs, rt = cluster
    client = rt.executor.client
    workers = sorted(live_workers(client))[:3]
    name = f"test-bits-{uuid.uuid4().hex[:8]}"
    vecs = [np.random.default_rng(r).standard_normal(size) * 10.0 ** r for r in range(3)]
    ports = ring_ports.port_addresses(rt.executor, workers)
    futs = [client.submit(ring.allreduce_task, name, r, 3, ports, vecs[r], 1, shared, workers=[w],
                          allow_other_workers=False, pure=False) for r, w in enumerate(workers)]
    outs = [out for out, _ in client.gather(futs)]
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])
    np.testing.assert_allclose(outs[0], np.sum(vecs, axis=0), rtol=1e-13)


def test_groups_formed_at_once_on_the_same_workers_keep_to_their_own_peers(cluster):
    """Every worker process has one ring port; connections say which group and rank they are for, so two groups
    forming at the same moment on the same workers never take each other's connections."""
    procs, rt = cluster
    client = rt.executor.client
    workers = sorted(live_workers(client))[:2]
    ports = ring_ports.port_addresses(rt.executor, workers)
    assert ring_ports.port_addresses(rt.executor, workers) == ports  # asked once, kept
    futs = {}
    for g in range(3):
        name = f"test-ring-{g}-{uuid.uuid4().hex[:8]}"
        futs[g] = [client.submit(ring.allreduce_task, name, r, 2, ports, np.full(7, 10.0 ** g * (r + 1)), 2,
                                 workers=[w], allow_other_workers=False, pure=False) for r, w in enumerate(workers)]
    for g, fs in futs.items():
        for out, _ in client.gather(fs):
            np.testing.assert_array_equal(out, np.full(7, 3 * 10.0 ** g))


def _ring_over(name, rank, size, ports):
    """A rank of a two-rank group: its sum and the address its right-hand connection reaches."""
    from distributed import secede

    secede()
    g = ring.Group(name, rank, size, timeout=60.0).join(ports)
    try:
        buf = np.full(5, rank + 1.0)
        g.allreduce(buf)
        return buf, g.right.peer_address
    finally:
        g.close()


def test_a_tls_cluster_gets_tls_between_ranks():
    """The ring takes the workers' own scheme and Security: on a TLS cluster its connections are TLS too."""
    import sys

    import cloudpickle
    from distributed import Client, LocalCluster
    from distributed.security import Security

    sec = Security.temporary()  # a throw-away CA and certificate (needs the cryptography package)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import the test module
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, security=sec, host="127.0.0.1",
                          dashboard_address=":0") as cl, Client(cl, security=sec) as c, \
                px.runtime.dask(client=c) as rt:
            assert cl.scheduler_address.startswith("tls://")
            workers = sorted(live_workers(c))
            name = f"test-tls-{uuid.uuid4().hex[:8]}"
            ports = ring_ports.port_addresses(rt.executor, workers)
            assert all(p.startswith("tls://127.0.0.1:") for p in ports), ports
            futs = [c.submit(_ring_over, name, r, 2, ports, workers=[w], allow_other_workers=False, pure=False)
                    for r, w in enumerate(workers)]
            results = c.gather(futs)
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    for buf, peer in results:
        np.testing.assert_array_equal(buf, np.full(5, 3.0))
        assert peer.startswith("tls://127.0.0.1:"), peer


def _shared_rounds(name, rank, size, ports, sizes):
    """A rank that sums a vector of each of ``sizes`` twice, the second time from the group's scratch slot: whether
    the group shares memory, and each sum (the scratch one as ``reduce`` returns it)."""
    from distributed import secede

    secede()
    g = ring.Group(name, rank, size, timeout=60.0).join(ports)
    out = []
    try:
        for n in sizes:
            v = np.arange(n, dtype=np.float32) + rank
            a = g.allreduce(v.copy())
            into = g.scratch(v)
            if into is not None:
                into[...] = v
            b = g.reduce(into if into is not None else v.copy()).copy()
            out.append((a, b, into is not None))
        return g.shared, out, os.getpid()
    finally:
        g.close()


# the workers cannot import this module: functions of __main__ travel by value (as LayerwiseSGD below)
_shared_rounds.__module__ = "__main__"


def test_ranks_on_one_machine_sum_through_shared_memory_and_leave_no_file(cluster):
    """Worker processes on this machine share memory for their sums: the same sums as over TCP, the big one
    computed straight into the shared slot, and no file left in /dev/shm once the group is gone."""
    procs, rt = cluster
    client = rt.executor.client
    workers = sorted(live_workers(client))[:2]
    name = f"test-shm-{uuid.uuid4().hex[:8]}"
    sizes = [3, 5000, 300_001]  # small, small, large (two barriers, a chunk each)
    ports = ring_ports.port_addresses(rt.executor, workers)
    futs = [client.submit(_shared_rounds, name, r, 2, ports, sizes, workers=[w], allow_other_workers=False,
                          pure=False) for r, w in enumerate(workers)]
    results = client.gather(futs)
    for shared, out, pid in results:
        assert shared
        for n, (a, b, scratch) in zip(sizes, out):
            want = 2 * np.arange(n, dtype=np.float32) + 1
            np.testing.assert_array_equal(a, want)
            np.testing.assert_array_equal(b, want)
            assert scratch == (n == 300_001)  # a slot is offered only where it saves a large copy
        assert not [f for f in os.listdir("/dev/shm") if f.startswith(f"phylanx-ring-{pid}-")]


def _leave_after(name, rank, size, ports, rounds):
    """Rank ``rank`` sums ``rounds`` times through shared memory, then its process dies without a word."""
    from distributed import secede

    secede()
    g = ring.Group(name, rank, size, timeout=120.0).join(ports)
    for _ in range(rounds):
        g.allreduce(np.ones(10))
    if rank == 1:
        os._exit(1)  # as a SIGKILL: its connections close, nothing else is said
    try:
        while True:
            g.allreduce(np.ones(10))
    finally:
        g.close()


_leave_after.__module__ = "__main__"


def test_a_rank_waiting_in_shared_memory_sees_its_peer_die_at_once():
    """The shared-memory barrier has no connection to break: the waiting rank watches its ring connections, so a
    peer process that dies is RankLost at once, not after the group's 120 s timeout."""
    procs = DaskProcesses(n_workers=2)  # its own: a worker of it dies
    rt = px.runtime.dask(procs.address)
    try:
        client = rt.executor.client
        workers = sorted(live_workers(client))
        name = f"test-shm-die-{uuid.uuid4().hex[:8]}"
        ports = ring_ports.port_addresses(rt.executor, workers)
        futs = [client.submit(_leave_after, name, r, 2, ports, 3, workers=[w], allow_other_workers=False,
                              pure=False) for r, w in enumerate(workers)]
        t0 = time.monotonic()
        with pytest.raises(ring.RankLost, match=f"group {name}: rank 1 closed its connection"):
            futs[0].result(timeout=60)
        assert time.monotonic() - t0 < 30
    finally:
        rt.close()
        procs.stop()


def _profiler_around_ranks():
    """The worker's profiler and tick monitor before, during two overlapping ranks, after the first one left, and
    after both."""
    from distributed import get_worker, secede
    from phylanx_py.runtime.segments.quiet import quiet

    secede()
    w = get_worker()

    def state():
        time.sleep(0.3)  # the switch runs on the worker's event loop
        return [w.periodic_callbacks[n].is_running() for n in ("profile", "tick")]

    before = state()
    with quiet(w):
        with quiet(w):
            during = state()
        one_left = state()
    return before, during, one_left, state()


_profiler_around_ranks.__module__ = "__main__"


def test_a_worker_running_ranks_pauses_its_profiler_until_the_last_leaves(cluster):
    procs, rt = cluster
    client = rt.executor.client
    before, during, one_left, after = client.submit(_profiler_around_ranks, pure=False).result(timeout=60)
    assert (before, during, one_left, after) == ([True, True], [False, False], [False, False], [True, True])


def _lengths(name, rank, size, ports, n):
    from distributed import secede

    secede()
    g = ring.Group(name, rank, size, timeout=60.0).join(ports)
    try:
        g.allreduce(np.ones(n))
        return None
    except ring.RankLost as e:
        return str(e)
    finally:
        g.close()


_lengths.__module__ = "__main__"


@pytest.mark.parametrize("lengths", [(100, 120), (300_000, 300_100)])
def test_ranks_that_sum_different_lengths_fail_instead_of_summing_garbage(cluster, lengths):
    """Two lengths of one size class share a region: over TCP the ring compares lengths, and so must the shared
    memory (each rank stores its length beside its counter)."""
    procs, rt = cluster
    client = rt.executor.client
    workers = sorted(live_workers(client))[:2]
    name = f"test-len-{uuid.uuid4().hex[:8]}"
    ports = ring_ports.port_addresses(rt.executor, workers)
    futs = [client.submit(_lengths, name, r, 2, ports, n, workers=[w], allow_other_workers=False, pure=False)
            for r, (w, n) in enumerate(zip(workers, lengths))]
    for err in client.gather(futs):
        assert err is not None and "the ranks disagree about the schedule" in err, err


class ClippingSGD(nn.SGD):
    """SGD with the gradient clipped in place first (its own gradients: it says it writes them)."""

    def update(self, params, grads, state, step):
        for g in grads:
            np.clip(g, -0.05, 0.05, out=g)
        super().update(params, grads, state, step)


ClippingSGD.writes_grads = True
ClippingSGD.__module__ = ClippingSGD.update.__module__ = "__main__"


def test_an_optimizer_that_writes_its_gradients_gets_its_own_copy(cluster):
    """The summed gradient lies in memory every rank reads: an optimizer that clips it in place gets a copy (one
    that says it never writes gets the shared array, read-only), so training still equals sequential training."""
    procs, rt = cluster
    X, Y = blobs(n=120)
    opt = dict(epochs=2, batch_size=16, seed=3)
    # 60,003 float64 parameters (480 KB): past shm.SMALL_BYTES, so the sum lies in the shared region
    seq = nn.Sequential([nn.Dense(6, 6000), nn.Tanh(), nn.Dense(6000, 3)])
    par = nn.Sequential([nn.Dense(6, 6000), nn.Tanh(), nn.Dense(6000, 3)])
    with px.using(rt):
        Xt, Yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(Y, tiles=(2,))
        par.fit(Xt, Yt, parallel="allreduce", optimizer=ClippingSGD(0.5, momentum=0.5), verbose=False, **opt)
    planned_fit(seq, X, Y, Xt.boundaries[0], optimizer=ClippingSGD(0.5, momentum=0.5), **opt)
    for a, b in zip(seq.params, par.params):
        for k in a:
            np.testing.assert_allclose(b[k], a[k], rtol=1e-9, atol=1e-12)


def test_region_files_are_reserved_capped_and_orphans_removed_only_when_unlocked(tmp_path):
    from phylanx_py.runtime.segments import shm

    if not shm.usable():
        pytest.skip("no writable /dev/shm on x86-64 here")
    assert shm.create(shm.MAX_REGION_BYTES + 1) == ("", None)  # too large: stays on TCP
    path, fd = shm.create(1 << 16)
    assert os.stat(path).st_blocks * 512 >= 1 << 16  # reserved, not sparse
    old = time.time() - 2 * shm.ORPHAN_SECONDS
    os.utime(path, (old, old))
    shm._remove_orphans()
    assert os.path.exists(path)  # its creator holds the lock: alive, whatever its age
    os.close(fd)  # the creator is gone without unlinking (killed)
    shm._remove_orphans()
    assert not os.path.exists(path)
    shm.release(path, None)  # a creator's unlink after someone removed it is not an error


def _finish_and_leave(prefix, rank, ports, trials):
    """``trials`` groups of two: a sum (the region forms), then rank 1 arrives a few milliseconds late at a second
    sum and closes its group the moment it has it, as a segment does after its last step. The sums rank 0
    reported lost."""
    import random

    from distributed import secede

    secede()
    rnd = random.Random(rank)
    lost = []
    for i in range(trials):
        g = ring.Group(f"{prefix}-{i}", rank, 2, timeout=30.0).join(ports)
        try:
            g.allreduce(np.ones(10))
            if rank == 1:
                time.sleep(0.002 + rnd.random() * 0.005)
            assert g.allreduce(np.ones(10))[0] == 2.0
        except ring.RankLost as e:
            lost.append(str(e))
        finally:
            g.close()
        time.sleep(0.01)
    return lost


_finish_and_leave.__module__ = "__main__"


def test_a_sum_completed_before_the_peer_left_is_not_reported_lost(cluster):
    """A waiting rank that finds its peer's connection closed looks at the counters again: a peer that stored its
    counter and closed at once completed the sum (before that re-read, some of 150 such sums were reported lost)."""
    procs, rt = cluster
    client = rt.executor.client
    workers = sorted(live_workers(client))[:2]
    ports = ring_ports.port_addresses(rt.executor, workers)
    prefix = f"test-fin-{uuid.uuid4().hex[:6]}"
    futs = [client.submit(_finish_and_leave, prefix, r, ports, 150, workers=[w], allow_other_workers=False,
                          pure=False) for r, w in enumerate(workers)]
    assert client.gather(futs) == [[], []]


def test_a_rank_whose_peer_closed_fails_at_once(cluster):
    procs, rt = cluster
    client = rt.executor.client
    workers = sorted(live_workers(client))[:2]
    name = f"test-ring-{uuid.uuid4().hex[:8]}"
    # rank 1 forms the group and leaves at once (its connections close): rank 0's allreduce must fail, not wait
    # for the 120 s timeout
    ports = ring_ports.port_addresses(rt.executor, workers)
    futs = [client.submit(ring.allreduce_task, name, 0, 2, ports, np.ones(10), 1_000_000, workers=[workers[0]],
                          pure=False),
            client.submit(ring.allreduce_task, name, 1, 2, ports, np.ones(10), 0, workers=[workers[1]], pure=False)]
    t0 = time.monotonic()
    with pytest.raises(ring.RankLost, match=f"group {name}: rank 1 closed its connection"):
        futs[0].result(timeout=60)
    assert time.monotonic() - t0 < 30
    futs[1].result()


# ---- training ----------------------------------------------------------------------------------------------
def test_allreduce_training_equals_sequential_training(cluster):
    procs, rt = cluster
    X, Y = blobs(n=120)
    opt = dict(epochs=2, batch_size=16, seed=2)
    # 1283 parameters, dropout (noise drawn per tile) and momentum
    seq = nn.Sequential([nn.Dense(6, 128), nn.Tanh(), nn.Dropout(0.25), nn.Dense(128, 3)])
    par = nn.Sequential([nn.Dense(6, 128), nn.Tanh(), nn.Dropout(0.25), nn.Dense(128, 3)])
    with px.using(rt):
        Xt, Yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(Y, tiles=(2,))
        h_par = par.fit(Xt, Yt, parallel="allreduce", optimizer=nn.SGD(0.05, momentum=0.9), verbose=False, **opt)
        assert len(set(Xt.placement.values())) == 2  # the two row tiles lived on two workers
    losses = planned_fit(seq, X, Y, Xt.boundaries[0], optimizer=nn.SGD(0.05, momentum=0.9), **opt)
    for a, b in zip(seq.params, par.params):
        for k in a:
            np.testing.assert_allclose(b[k], a[k], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(h_par["loss"], losses, rtol=1e-9)
    # one segment task per rank for the whole fit (a span); the ring moves 2(n-1)/n of the parameters out of each
    # rank, and the epoch's end (its totals, a few values) is not counted as the steps' traffic
    assert h_par["min_bytes_per_step"][-1] == 2 * 8 * par.n_params()
    assert h_par["bytes_per_step"][-1] == h_par["min_bytes_per_step"][-1]
    assert h_par["tasks_per_step"] == [2 / 8, 0]  # 2 ranks, then none; 8 steps (60 rows per tile, 8 per step)


class LayerwiseSGD(nn.Optimizer):
    """A step scaled per parameter by ||p|| / ||g|| (as LARS does): its result depends on what a parameter is."""

    def update(self, params, grads, state, step):
        for p, g in zip(params, grads):
            p -= self.rate(step) * np.linalg.norm(p) / (np.linalg.norm(g) + 1e-12) * g


# The workers cannot import this module: Dask pickles data by reference first and falls back to cloudpickle (by
# value) for what lives in __main__.
LayerwiseSGD.__module__ = LayerwiseSGD.update.__module__ = "__main__"


@pytest.mark.parametrize("tiles", [1, 2])
def test_segments_hand_the_optimizer_the_layers_as_fit_does(cluster, tiles):
    """Segments keep the parameters as one flat vector (the ring's buffer) but update each parameter's view of it,
    so an optimizer with per-parameter norms trains as in ``fit``, on one rank or two."""
    procs, rt = cluster
    X, Y = blobs(n=96)
    opt = dict(epochs=2, batch_size=16, seed=4)
    seq = nn.Sequential([nn.Dense(6, 16), nn.Tanh(), nn.Dense(16, 3)])
    par = nn.Sequential([nn.Dense(6, 16), nn.Tanh(), nn.Dense(16, 3)])
    with px.using(rt):
        Xt, Yt = px.tiled.from_array(X, tiles=(tiles, 1)), px.tiled.from_array(Y, tiles=(tiles,))
        h_par = par.fit(Xt, Yt, parallel="allreduce", optimizer=LayerwiseSGD(0.05), verbose=False, **opt)
    losses = planned_fit(seq, X, Y, Xt.boundaries[0], optimizer=LayerwiseSGD(0.05), **opt)
    for a, b in zip(seq.params, par.params):
        for k in a:
            np.testing.assert_allclose(b[k], a[k], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(h_par["loss"], losses, rtol=1e-9)


def test_shorter_segments_change_nothing_but_the_task_count(cluster):
    """``segment_steps``: checkpoints every 3 steps instead of one span over every epoch; the batch plan is a
    function of (seed, epoch, step, tile), so the run is the same, bit for bit."""
    procs, rt = cluster
    X, Y = blobs(n=120)
    opt = dict(epochs=2, batch_size=16, seed=3, optimizer=nn.SGD(0.05, momentum=0.9), verbose=False)
    a = nn.Sequential([nn.Dense(6, 32), nn.Tanh(), nn.Dropout(0.25), nn.Dense(32, 3)])
    b = nn.Sequential([nn.Dense(6, 32), nn.Tanh(), nn.Dropout(0.25), nn.Dense(32, 3)])
    with px.using(rt):
        Xt, Yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(Y, tiles=(2,))
        h_a = a.fit(Xt, Yt, parallel="allreduce", **opt)
        h_b = b.fit(Xt, Yt, parallel="allreduce", segment_steps=3, **opt)
        with pytest.raises(ValueError, match="segment_steps must be a positive int or None, got 0"):
            b.fit(Xt, Yt, parallel="allreduce", segment_steps=0, **opt)
    for pa, pb in zip(a.params, b.params):
        for k in pa:
            np.testing.assert_array_equal(pa[k], pb[k])
    assert h_a["loss"] == h_b["loss"]
    assert h_a["tasks_per_step"] == [2 / 8, 0]  # one span: two rank tasks for the fit
    assert h_b["tasks_per_step"][-1] == 2 * 3 / 8  # 8 steps: 3 + 3 + 2


def small_trainer(rt, X, Y, optimizer, mode="allreduce"):
    """(a SegmentTrainer, its model): a 6-16-3 MLP built with seed 5 over 96 rows of ``X``, ``Y`` in two persisted
    row tiles, 16 rows per step. Call under ``px.using(rt)``."""
    from phylanx_py.runtime.training import SegmentTrainer

    from phylanx_py.nn.parallel import ModelProblem

    model = nn.Sequential([nn.Dense(6, 16), nn.Tanh(), nn.Dense(16, 3)])
    model.build(X.shape[1:], 5)
    Xt, Yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(Y, tiles=(2,))
    Xt.persist(wait=True), Yt.persist(wait=True)
    tr = SegmentTrainer(rt.executor, [Xt.futures[(i, 0)] for i in range(2)],
                        [Yt.futures[(i,)] for i in range(2)], [48, 48], ModelProblem(model), optimizer, mode=mode,
                        batch=16, seed=1)
    return tr, model


def held_keys(client):
    """Worker address -> the keys of the checkpoints kept there (segment.HELD)."""
    return client.run(lambda: set(seg.HELD))


def fetched(client, keys):
    """Worker address -> which of ``keys`` it fetched from another worker (its log of incoming transfers)."""
    keys = set(keys)
    return client.run(lambda dask_worker: {k for d in dask_worker.transfer_incoming_log for k in d["keys"]
                                           if k in keys})


def new_held(client, before):
    """Worker address -> how many checkpoints are kept there that were not in ``before`` (``held_keys``): other
    tests' given-up segments may have left some."""
    after = held_keys(client)
    return {w: len(after[w] - before.get(w, set())) for w in after}


@pytest.mark.parametrize("mode", ["allreduce", "neighbours"])
@pytest.mark.parametrize("ahead", [False, True])
def test_a_segment_starts_from_the_checkpoint_left_on_the_workers_or_from_the_clients_copy(cluster, mode, ahead):
    """The next segment takes the checkpoint where the last one left it (no round trip through the client); when
    that copy is gone (its worker died between segments: here cancelled), the segment is run again from the
    client's copy, and the run is the same, bit for bit. With the epochs to run known (``horizon``, as fit sets
    it), each next segment is submitted while the last one runs: the same run again."""
    from phylanx_py.nn.parallel import pack

    procs, rt = cluster
    client = rt.executor.client
    X, Y = blobs(n=96)
    runs = []
    for lose in (False, True):
        with px.using(rt):
            tr, model = small_trainer(rt, X, Y, nn.SGD(0.05, momentum=0.9), mode)
            placed = []

            def counted(*a, placed=placed, scatter=tr._scatter, **k):
                placed.append(1)
                return scatter(*a, **k)

            tr._scatter = counted
            tr.horizon = 3 if ahead else None
            carry, restarts, losses, sent, why = tr.start(pack(model.params), model.state), [], [], [], []
            for e in range(3):
                if lose and e:
                    client.cancel(tr._held[2])
                    if tr._ahead is not None:  # Dask cancels the segment submitted ahead (a dependent) too, but
                        # tells this client so later, in its stream: wait for that, or the epoch may gather the
                        # segment's results first and never see the loss
                        until = time.monotonic() + 30
                        while any(f.status != "cancelled" for f in tr._ahead[4]) and time.monotonic() < until:
                            time.sleep(0.01)
                placed.clear()
                carry, stats = tr.epoch(e, carry)
                restarts.append(tr.restarts)
                losses.append(stats["loss"])
                sent.append(len(placed))  # the job, and the checkpoint when the client sends it
            tr.close()
        pvec = carry[0][0] if mode == "neighbours" else carry[0]
        runs.append((pvec, losses, restarts, sent, tr.started_ahead, why))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1]
    assert runs[0][2] == [0, 0, 0] and runs[1][2] == [0, 1, 1], (runs[0][5], runs[1][5])
    if not ahead:
        assert runs[0][3] == [2, 1, 1]  # the job and the first checkpoint; later epochs: the job only
    else:  # epoch 0 also sends the job of epoch 1, which then starts as submitted; and so on
        assert runs[0][3] == [3, 1, 0] and runs[0][4] == 2
        assert runs[1][4] == 2  # started as submitted, found its checkpoint lost, ran again from the client's copy


def test_ranks_start_the_next_segment_from_their_own_checkpoint_without_fetching_rank_0s(cluster):
    """In allreduce mode every rank ends a segment with the same checkpoint: a rank other than 0 keeps its own on
    its worker for the next segment (fit knows it follows), so rank 0's never travels to the other workers at a
    segment's start; and the run equals one where every rank starts from rank 0's (no horizon)."""
    from phylanx_py.nn.parallel import pack

    procs, rt = cluster
    client = rt.executor.client
    X, Y = blobs(n=96)
    runs = []
    for horizon in (None, 3):
        with px.using(rt):
            tr, model = small_trainer(rt, X, Y, nn.SGD(0.05, momentum=0.9))
            tr.horizon = horizon
            before = held_keys(client)
            carry, firsts = tr.start(pack(model.params), model.state), []
            for e in range(3):
                carry, _ = tr.epoch(e, carry)
                firsts.append(tr._held[2][0])  # rank 0's result: the checkpoint
                assert tr.restarts == 0
            held = new_held(client, before)  # before close, which frees any left
            tr.close()
            # where each checkpoint was: rank 0's worker made it, and any worker that fetched it (the workers' logs
            # of incoming transfers; the scheduler's who_has forgets a copy once the task that needed it is done)
            workers = [w for w, _ in tr.ranks]
            got = fetched(client, [f.key for f in firsts[:2]])
            holders = [{workers[0]} | {w for w, keys in got.items() if f.key in keys} for f in firsts[:2]]
        runs.append((carry[0], holders, held, workers))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    (_, holders, _, workers), (_, holders_h, held_h, workers_h) = runs
    assert all(h == set(workers) for h in holders)  # no horizon: rank 1 fetched rank 0's checkpoint each time
    assert all(h == {workers_h[0]} for h in holders_h)  # with it: never
    assert set(held_h.values()) == {0}  # each kept checkpoint was taken by the next segment


def test_a_trainer_given_up_frees_the_checkpoints_its_ranks_kept(cluster):
    """A run stopped after an epoch whose next segment was announced (horizon) leaves rank 1's checkpoint on its
    worker until the trainer closes; compute mode, whose ranks drift apart, never keeps one."""
    from phylanx_py.nn.parallel import pack

    procs, rt = cluster
    client = rt.executor.client
    X, Y = blobs(n=96)
    for mode, kept in (("allreduce", 1), ("compute", 0)):
        with px.using(rt):
            tr, model = small_trainer(rt, X, Y, nn.SGD(0.05), mode)
            tr.horizon = 5
            before = held_keys(client)
            tr.epoch(0, tr.start(pack(model.params), model.state))
            for f in tr._ahead[4]:  # the next segment (started ahead) is done too: its ranks kept theirs
                f.result(timeout=60)
            assert sum(new_held(client, before).values()) == kept
            tr.close()
            assert sum(new_held(client, before).values()) == 0


def test_running_statistics_are_the_ranks_mean(cluster):
    """BatchNorm's running mean after allreduce training is that of the global batches (the ranks' running means
    averaged at the end of each segment), as sequential training on the same batches has it; not rank 0's own."""
    procs, rt = cluster
    X, Y = blobs(n=120)
    X[:60] += 3.0  # the two row tiles differ: rank 0's statistics alone would be off by ~1.5
    opt = dict(epochs=2, batch_size=16, seed=5)
    seq = nn.Sequential([nn.BatchNorm(6), nn.Dense(6, 3)])
    par = nn.Sequential([nn.BatchNorm(6), nn.Dense(6, 3)])
    with px.using(rt):
        Xt, Yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(Y, tiles=(2,))
        par.fit(Xt, Yt, parallel="allreduce", optimizer=nn.SGD(0.05), verbose=False, **opt)
    planned_fit(seq, X, Y, Xt.boundaries[0], optimizer=nn.SGD(0.05), **opt)
    # the input layer's running mean depends on the batches only, not on the parameters
    np.testing.assert_allclose(par.state[0]["mean"], seq.state[0]["mean"], rtol=1e-9)


def test_allreduce_over_three_workers_with_adam(cluster):
    procs, rt = cluster
    X, Y = blobs(n=96)
    opt = dict(epochs=2, batch_size=24, seed=4)
    seq = nn.Sequential([nn.Dense(6, 16), nn.ReLU(), nn.Dense(16, 3)])
    par = nn.Sequential([nn.Dense(6, 16), nn.ReLU(), nn.Dense(16, 3)])
    with px.using(rt):
        Xt, Yt = px.tiled.from_array(X, tiles=(3, 1)), px.tiled.from_array(Y, tiles=(3,))
        h_par = par.fit(Xt, Yt, parallel="allreduce", optimizer=nn.Adam(0.01), verbose=False, **opt)
    losses = planned_fit(seq, X, Y, Xt.boundaries[0], optimizer=nn.Adam(0.01), **opt)
    np.testing.assert_allclose(h_par["loss"], losses, rtol=1e-9)
    for a, b in zip(seq.params, par.params):
        for k in a:
            np.testing.assert_allclose(b[k], a[k], rtol=1e-8, atol=1e-12)


def test_neighbour_averaging_trains_and_reports_consensus(cluster):
    procs, rt = cluster
    X, Y = blobs(n=200)
    Xv, Yv = blobs(seed=1)
    m = nn.Sequential([nn.Dense(6, 128), nn.ReLU(), nn.Dense(128, 3)])
    with px.using(rt):
        Xt, Yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(Y, tiles=(2,))
        h = m.fit(Xt, Yt, epochs=3, batch_size=16, optimizer=nn.SGD(0.05, momentum=0.9), validation=(Xv, Yv),
                  parallel="neighbours", every=2, verbose=False)
    assert h["val_accuracy"][-1] > 0.9
    assert len(h["consensus"]) == 3 and all(c > 0 for c in h["consensus"])  # 13 steps: the last is local
    assert h["bytes_per_step"][-1] == h["min_bytes_per_step"][-1]


def test_a_stalled_epoch_is_an_error_not_a_hang(cluster, monkeypatch):
    class Slow(nn.Layer):  # defined here, so it travels to the workers by value
        def apply(self, params, state, x, noise, training):
            time.sleep(1.5)  # each step outlasts the stall limit below
            return x, state

    procs, rt = cluster
    monkeypatch.setattr(driver, "STALL_SECONDS", 0.5)
    X, Y = blobs(n=32)
    m = nn.Sequential([Slow(), nn.Dense(6, 3)])
    with px.using(rt):
        Xt, Yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(Y, tiles=(2,))
        with pytest.raises(px.ClusterError, match=r"training stalled: no step finished for 0 s \(step 1 of 2 of "
                                                  r"the epoch never completed\)"):
            m.fit(Xt, Yt, epochs=1, batch_size=16, parallel="allreduce", verbose=False)
    time.sleep(1.5)  # the aborted ranks end at their next step


def test_an_error_in_the_model_is_raised_not_retried(cluster):
    class Broken(nn.Layer):
        def apply(self, params, state, x, noise, training):
            raise ValueError("broken layer")

    procs, rt = cluster
    X, Y = blobs(n=32)
    with px.using(rt):
        Xt, Yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(Y, tiles=(2,))
        with pytest.raises(ValueError, match="broken layer"):
            nn.Sequential([Broken(), nn.Dense(6, 3)]).fit(Xt, Yt, epochs=1, batch_size=16, parallel="allreduce",
                                                          verbose=False)


# ---- a worker killed mid-segment ---------------------------------------------------------------------------
def small_model():
    return nn.Sequential([nn.Dense(6, 32), nn.ReLU(), nn.Dense(32, 3)])


def kill_a_rank_mid_segment(procs, client, stop, steps, epoch=1, after_steps=1):
    """Wait until some worker runs a rank of a segment that has reached step ``after_steps`` of epoch ``epoch`` or
    later (``steps`` an epoch; a span counts its steps from the epoch in its name on), then SIGKILL that worker's
    process. Returns the killed worker's address."""
    procs_by_pid = {w.pid: w for w in procs.alive_workers()}
    pids = client.run(os.getpid)
    seen = {}

    def reached(group, done):
        start = int(group.rsplit("-e", 1)[1].split("s")[0]) * steps + int(group.rsplit("s", 1)[1])
        return start + done >= epoch * steps + after_steps

    while not stop.is_set():
        running = client.run(on_worker.running, on_error="return")
        for addr, groups in running.items():
            seen.update(groups if isinstance(groups, dict) else {})
            if isinstance(groups, dict) and any(reached(g, v) for g, v in groups.items()):
                proc = procs_by_pid.get(pids.get(addr))
                if proc is not None:
                    procs.kill_worker(proc)
                    return addr
        time.sleep(0.02)
    raise AssertionError(f"no segment ran long enough to be killed; seen: {seen}")


def fit_with_a_kill(mode, X, Y, spare: bool, **opt):
    """fit on two workers (and a spare one) with one rank SIGKILLed during the second epoch's segment."""
    procs = DaskProcesses(n_workers=2)
    rt = px.runtime.dask(procs.address)
    try:
        with px.using(rt):
            Xt, Yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(Y, tiles=(2,))
            Xt.persist(wait=True)
            Yt.persist(wait=True)
            if spare:
                procs.add_worker()
                procs.wait_for_workers(3)
            m = small_model()
            killed, stop = [], threading.Event()
            steps = seg.steps_per_epoch([len(X) // 2] * 2, opt["batch_size"] // 2)
            killer = threading.Thread(target=lambda: killed.append(
                kill_a_rank_mid_segment(procs, rt.executor.client, stop, steps)))
            killer.start()
            t0 = time.monotonic()
            try:
                h = m.fit(Xt, Yt, parallel=mode, verbose=False, **opt)
            finally:
                stop.set()
                killer.join()
            return h, m, killed, time.monotonic() - t0
    finally:
        rt.close()
        procs.stop()


@pytest.mark.parametrize("mode", ["allreduce", "neighbours", "allreduce with validation"])
def test_a_worker_killed_mid_segment_does_not_change_the_run(mode, cluster):
    procs, rt = cluster
    # 4,000 rows: 250 steps an epoch, a few hundred ms, long enough for the killer (it polls every 20 ms) to catch
    # a segment running. (A layer that slept 20 ms in ``apply`` did not help: the gradient tree is traced once, so
    # it slept once, and with 400 rows an epoch took 25-55 ms: the kill missed it in one CI run.)
    X, Y = blobs(n=4000)
    opt = dict(optimizer=nn.SGD(0.05, momentum=0.9), epochs=3, batch_size=16, seed=0, every=2)
    if mode == "allreduce with validation":  # a span whose ranks evaluate the validation rows every epoch
        mode, opt["validation"] = "allreduce", blobs(n=301, seed=9)
    # the undisturbed run, on two workers
    ref = small_model()
    with px.using(rt):
        Xt, Yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(Y, tiles=(2,))
        h_ref = ref.fit(Xt, Yt, parallel=mode, verbose=False, **opt)
    # allreduce: the survivor takes both tiles (same batches, sums in another order); neighbours: a spare worker
    # takes the dead rank's tile, so there are still two replicas
    h, m, killed, _ = fit_with_a_kill(mode, X, Y, spare=(mode == "neighbours"), **opt)
    assert killed and sum(h["restarts"]) >= 1, h["restarts"]  # the kill hit a running segment
    # the same batches and noise from the last checkpoint: equal up to the order of float64 sums
    np.testing.assert_allclose(h["loss"], h_ref["loss"], rtol=1e-9)
    if "validation" in opt:
        np.testing.assert_allclose(h["val_loss"], h_ref["val_loss"], rtol=1e-7)
        np.testing.assert_allclose(h["val_accuracy"], h_ref["val_accuracy"], rtol=1e-12)
    for a, b in zip(ref.params, m.params):
        for k in a:
            np.testing.assert_allclose(b[k], a[k], rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_validation_runs_on_the_ranks_of_a_span(cluster, dtype):
    """fit with validation data spans its epochs too (the weights stay on the workers: one span, its checkpoint
    moved once): each rank evaluates its share of the validation rows on the epoch's weights and the sums go with
    the epoch's totals. The history is the one of a segment per epoch, whose weights the client evaluates."""
    procs, rt = cluster
    X, Y = blobs(n=240)
    Xv, Yv = blobs(n=61, seed=3)  # (an odd count: the ranks' shares differ by a row)
    X, Xv = X.astype(dtype), Xv.astype(dtype)
    opt = dict(epochs=3, batch_size=16, seed=2, verbose=False)
    runs = {}
    with px.using(rt):
        Xt, Yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(Y, tiles=(2,))
        for steps in (None, 3):  # a span; segments of 3 steps (the client gets the weights every epoch)
            m = small_model()
            h = m.fit(Xt, Yt, parallel="allreduce", optimizer=nn.SGD(0.05, momentum=0.9), validation=(Xv, Yv),
                      segment_steps=steps, **opt)
            runs[steps] = (h, m)
    (h_span, m_span), (h_seg, m_seg) = runs[None], runs[3]
    assert h_span["tasks_per_step"][1:] == [0, 0] and h_seg["tasks_per_step"][1] > 0  # one span; segments
    np.testing.assert_allclose(h_span["loss"], h_seg["loss"], rtol=1e-12)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(h_span["val_loss"], h_seg["val_loss"], rtol=tol)
    np.testing.assert_allclose(h_span["val_accuracy"], h_seg["val_accuracy"], rtol=1e-12)
    assert h_span["val_loss"][-1] == pytest.approx(m_span.evaluate(Xv, Yv)["loss"], rel=tol)
    assert 0.5 < h_span["val_accuracy"][-1] <= 1.0
    for a, b in zip(m_seg.params, m_span.params):
        for k in a:
            np.testing.assert_allclose(b[k], a[k], rtol=1e-7, atol=1e-10)
