"""The native loop tier on the cluster's arrays (runtime/native/remote.py), on 2 real worker processes: loops the
SPMD tier declines (they index single rows of a tiled array) and loops over Dask futures run natively in a task on a
worker, and return what the plain function returns on the gathered arrays; a kernel's error is an ExecutionError at
the loop's line, a kernel that stops reruns interpreted, a worker killed during the task is survived."""
from __future__ import annotations

import os
import threading
import time

import numpy as np
import prog_cluster_loops as P
import pytest
from cluster import DaskProcesses

import phylanx_py as px

pytestmark = pytest.mark.timeout(600)
FILE = P.__file__


@pytest.fixture(scope="module")
def procs():
    p = DaskProcesses(n_workers=2)
    yield p
    p.stop()


@pytest.fixture(scope="module")
def rt(procs):
    runtime = px.runtime.dask(procs.address)
    with px.using(runtime):
        yield runtime
    runtime.close()


def _native_on_workers(f, line):
    text = f.explain()
    assert f"loop at prog_cluster_loops.py:{line} -> native on the workers (" in text, text
    return text


def test_a_row_loop_over_a_tiled_array(rt):
    X = np.random.default_rng(0).standard_normal((4000, 3))
    f = px.compile(P.row_norms)
    got = f(px.tiled.from_array(X, tiles=(4, 1)))
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, P.row_norms(X))  # the same operations in the same order
    text = _native_on_workers(f, 9)
    assert "not SPMD: single rows or integer-array rows of a tiled value (prog_cluster_loops.py:12)" in text, text
    assert "1 runs; the latest: 1 task running the loop, 1 taking its results apart)" in text, text
    assert "(for NumPy inputs)" not in text.splitlines()[1], text  # (the native tier's own line has it)


def test_a_stencil_changes_its_tiled_arrays_in_place(rt):
    u0 = np.random.default_rng(1).random(1001)
    ut, vt = px.tiled.from_array(u0.copy(), tiles=(4,)), px.tiled.from_array(np.zeros(1001), tiles=(4,))
    f = px.compile(P.smooth)
    got = f(ut, vt, 20)
    u, v = u0.copy(), np.zeros(1001)
    want = P.smooth(u, v, 20)
    assert got is ut and ut.tiles == (4,) and vt.tiles == (4,)  # the caller's arrays, changed in place
    np.testing.assert_array_equal(np.asarray(ut), want)
    np.testing.assert_array_equal(np.asarray(vt), v)
    text = _native_on_workers(f, 19)
    assert "the latest: 1 task running the loop, 9 taking its results apart)" in text, text  # 4 + 4 tiles


def test_a_scalar_result_and_a_replicated_input(rt):
    X = np.random.default_rng(2).standard_normal((3000, 2))
    w = np.array([0.5, -2.0])
    f = px.compile(P.weighted_total)
    got = f(px.tiled.from_array(X, tiles=(3, 1)), w)
    want = P.weighted_total(X, w)
    assert type(got) is type(want) and got == want, (got, want)
    _native_on_workers(f, 29)


def test_a_kernel_error_names_the_loop_line(rt):
    f = px.compile(P.past_the_end)
    with pytest.raises(px.ExecutionError) as err:
        f(px.tiled.from_array(np.arange(100.0), tiles=(4,)), 1)
    assert str(err.value).startswith(f"{FILE}:36:5: in primitive 'loop tier': IndexError: index out of bounds"), \
        str(err.value)
    assert type(err.value.__cause__) is IndexError
    np.testing.assert_array_equal(f(px.tiled.from_array(np.arange(100.0), tiles=(4,)), 0), 4950.0)  # still usable


def test_a_kernel_that_stops_reruns_interpreted(rt):
    x = np.arange(40.0)
    f = px.compile(P.int_hash)
    assert f(px.tiled.from_array(x, tiles=(2,))) == P.int_hash(x)  # a Python int past 2**63
    text = f.explain()
    assert "loop at prog_cluster_loops.py:62 -> not native on the workers: " in text, text
    assert "the loop reran interpreted" in text, text


def test_a_loop_over_dask_futures():
    """inline_elements=0: ``y = x * 2.0`` and ``np.zeros`` are tasks, so the loop's arrays are futures; the array it
    fills comes back changed, its scalar with it."""
    procs = DaskProcesses(n_workers=2)
    try:
        with px.runtime.dask(procs.address, inline_elements=0) as rt, px.using(rt):
            x = np.random.default_rng(3).random(5000)
            g = px.compile(P.running_sums)
            got, acc = g(x)
            want, wacc = P.running_sums(x)
            np.testing.assert_array_equal(got, want)
            assert type(acc) is type(wacc) and acc == wacc
            _native_on_workers(g, 45)
    finally:
        procs.stop()


def test_a_worker_killed_during_the_loop_task_is_survived():
    """The loop's task runs for seconds; the worker running it is SIGKILLed: Dask runs it again on the other worker
    (the tiles recomputed from their lineage) and the answer is the plain function's."""
    procs = DaskProcesses(n_workers=2)
    try:
        with px.runtime.dask(procs.address) as rt, px.using(rt):
            client = rt.executor.client
            X = np.random.default_rng(4).standard_normal((200_000, 2))
            f = px.compile(P.repeated_norms)
            Xt = px.tiled.from_array(X, tiles=(2, 1))
            np.testing.assert_array_equal(f(Xt, 1), P.repeated_norms(X, 1))  # (compiled on a worker, cached)
            pids = client.run(os.getpid)
            killed = []

            def kill_the_loops_worker():
                end = time.monotonic() + 60
                while time.monotonic() < end and not killed:
                    for w, keys in client.processing().items():
                        if any(str(k).startswith("native-loop@") for k in keys):
                            time.sleep(0.3)  # well inside the task
                            proc = next(p for p in procs.alive_workers() if p.pid == pids[w])
                            procs.kill_worker(proc)
                            killed.append(w)
                            return
                    time.sleep(0.02)

            killer = threading.Thread(target=kill_the_loops_worker)
            killer.start()
            got = f(Xt, 3000)
            killer.join()
            assert killed, "the loop's task was never seen running"
            np.testing.assert_array_equal(got, P.repeated_norms(X, 1))
            _native_on_workers(f, 54)
    finally:
        procs.stop()
