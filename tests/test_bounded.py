"""Nothing the runtime keeps grows with the number of calls or tasks: a long-lived Dask session holds steady memory
(the executor's table of task placements; an evaluation's table of objects that pending tasks read; the workers'
names of given-up segments)."""
from __future__ import annotations

import numpy as np
import pytest
from cluster import DaskProcesses
from phylanx_py.runtime import dask_runtime
from phylanx_py.runtime.evaluation import Evaluation

import phylanx_py as px

pytestmark = pytest.mark.timeout(600)


def scaled(x):
    return x * 2.0 + 1.0


def test_many_calls_keep_the_placement_table_bounded(monkeypatch):
    """Every call uploads its input (as a big one would be: its placement is remembered) and runs a task there.
    1,000 calls with the table's threshold at 64 (1,024 by default) prune it many times over; 10,000 calls at the
    default threshold took 5.4 minutes here (32 ms a call: three scheduler round trips), too long for the suite."""
    monkeypatch.setattr(dask_runtime, "UPLOAD_BYTES", 0)
    monkeypatch.setattr(dask_runtime, "HOMES_KEPT", 64)
    procs = DaskProcesses(n_workers=2)
    rt = px.runtime.dask(procs.address, inline_elements=0)
    try:
        f = px.compile(scaled)
        x = np.arange(8.0)
        sizes = []
        with px.using(rt):
            for i in range(1_000):
                got = f(x + i)
                if i % 100 == 99:
                    sizes.append(len(rt.executor._homes))
            np.testing.assert_array_equal(got, scaled(x + 999))
        assert max(sizes) <= 2 * 64 + 2, sizes  # was 2 entries per call: 2,000 at the end
    finally:
        rt.close()
        procs.stop()


def test_an_evaluation_forgets_objects_no_pending_task_reads():
    """A loop that makes a new list each iteration, read by tasks: the ids of finished ones are dropped."""
    rt = px.runtime.local()
    try:
        ev = Evaluation(rt)
        kept = []
        for i in range(2_000):
            items = [i]
            kept.append(items)  # alive, so ids are not reused
            fut = rt.executor.submit(len, (items,), {})  # a task on the local pool reading the list
            ev._track(fut, (id(items),))
        ev.wait_all()
        assert len(ev.refs) == 0, len(ev.refs)
    finally:
        rt.close()


def test_given_up_segments_leave_a_bounded_set_of_names_on_the_workers():
    """Each call below gives up a segment: the ranks are started straight on workers that do not hold their tiles
    (the remembered placement swapped by hand, as test_spmd's stale placement), so the driver aborts them (their
    names go into each worker's ABORTED) and runs the loop as tasks. The set keeps its newest ABORTED_KEEP names
    (set to 4 on the workers here; 4,096 by default): it grew by one name per given-up segment for the worker's
    life. Every answer stays NumPy's."""
    import prog_tiled as P
    from phylanx_py.runtime.segments import rank as on_worker
    from phylanx_py.runtime.spmd import driver

    def keep(n, dask_worker=None):
        on_worker.ABORTED_KEEP = n

    procs = DaskProcesses(n_workers=2)
    rt = px.runtime.dask(procs.address)
    try:
        client = rt.executor.client
        client.run(keep, 4)
        rng = np.random.default_rng(3)
        X = rng.standard_normal((400, 3))
        y = (X @ rng.standard_normal(3) > 0).astype(np.float64)
        f = px.compile(P.lra)
        sizes = []
        with px.using(rt):
            Xt, yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(y, tiles=(2,))
            Xt.persist(wait=True), yt.persist(wait=True)
            tiles = tuple(fut.key for a in (Xt, yt) for fut in a.futures.reshape(-1))
            for _ in range(10):
                placed = driver._PLACED.get(rt.executor, {})
                if tiles not in placed:  # (the last call forgot the stale placement: this one asks the scheduler)
                    np.testing.assert_allclose(f(Xt, yt, 0.5, 2), P.lra(X, y, 0.5, 2), rtol=1e-9)
                    placed = driver._PLACED[rt.executor]
                (w0, a0, b0), (w1, a1, b1) = placed[tiles]
                placed[tiles] = [(w1, a0, b0), (w0, a1, b1)]
                np.testing.assert_allclose(f(Xt, yt, 0.5, 2), P.lra(X, y, 0.5, 2), rtol=1e-9)
                assert tiles not in placed  # the direct segment was given up
                sizes.append(sorted(client.run(lambda: len(on_worker.ABORTED)).values()))
        assert sizes[:2] == [[1, 1], [2, 2]] and sizes[3:] == [[4, 4]] * 7, sizes  # grows, then holds at 4
    finally:
        rt.close()
        procs.stop()


def test_ten_thousand_calls_hold_the_clients_memory_steady(monkeypatch):
    """10,000 compiled calls on a Dask runtime: every 100th makes a task (its input over the inline threshold is
    uploaded, its placement remembered), the rest run inline. What the runtime's own code allocated and still holds
    (tracemalloc, filtered to phylanx-py's files) is the same after call 10,000 as after call 2,000, give or take
    what the last tasks' keys hold; the placement table stays pruned. Dask's client keeps its last messages (key
    names included) in a log of ``distributed.admin.low-level-log-length`` entries: set to 16 here, so that bounded
    log does not pass for ours."""
    import gc
    import os
    import tracemalloc

    import dask
    import phylanx_py.runtime as runtime_pkg

    monkeypatch.setattr(dask_runtime, "HOMES_KEPT", 64)
    folders = [os.path.dirname(px.__file__), os.path.dirname(runtime_pkg.__file__)]

    def held():
        gc.collect()
        snap = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(True, os.path.join(d, "*")) for d in folders] + [tracemalloc.Filter(True, "<phylanx*")])
        return sum(s.size for s in snap.statistics("filename"))

    procs = DaskProcesses(n_workers=2)
    with dask.config.set({"distributed.admin.low-level-log-length": 16}):
        rt = px.runtime.dask(procs.address, inline_elements=100_000)
    tracemalloc.start()
    try:
        f = px.compile(scaled)
        small, big = np.arange(8.0), np.arange(200_000.0)
        with px.using(rt):
            for i in range(10_000):
                got = f(big + i) if i % 100 == 0 else f(small + i)
                if i == 1_999:
                    before = held()
            after = held()
            np.testing.assert_array_equal(got, scaled(small + 9_999))
            assert len(rt.executor._homes) <= 2 * 64 + 2
        assert after - before < 16_384, (before, after)  # under 2 bytes a call
    finally:
        tracemalloc.stop()
        rt.close()
        procs.stop()
