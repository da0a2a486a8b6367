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
    assert "1 runs; the latest: 1 task running the loop, 1 taking its results apart; not per tile: it changes an " \
        "array in place that is not tiled (line 13))" in text, text
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
    assert "the latest: 1 task running the loop, 9 taking its results apart; not per tile: 'v' is stored at a row " \
        "that is not the iteration's own (line 21))" in text, text  # (the time loop's own)


def test_a_scalar_result_and_a_replicated_input(rt):
    X = np.random.default_rng(2).standard_normal((3000, 2))
    w = np.array([0.5, -2.0])
    f = px.compile(P.weighted_total)
    got = f(px.tiled.from_array(X, tiles=(3, 1)), w)
    want = P.weighted_total(X, w)
    assert type(got) is type(want) and got == want, (got, want)
    _native_on_workers(f, 29)


def test_a_kernel_error_names_the_users_line(rt):
    """The loop's kernel stops at its test of bounds (nothing changed yet) and the loop reruns interpreted: NumPy's
    error at the statement's line."""
    f = px.compile(P.past_the_end)
    with pytest.raises(px.ExecutionError) as err:
        f(px.tiled.from_array(np.arange(100.0), tiles=(4,)), 1)
    assert str(err.value).startswith(f"{FILE}:37:14: in primitive 'slice_at': IndexError: index 100 is out of "
                                     "bounds for axis 0 with size 100"), str(err.value)
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


def test_a_stencil_sweep_runs_per_tile_with_its_halo(rt):
    """One sweep of a 3-point stencil: each of the 4 tiles runs its rows in a task of its own, reading one row of
    each neighbour; the tiles it changed are cut from the tasks' results where they ran."""
    u = np.random.default_rng(5).random(1001)
    ut, vt = px.tiled.from_array(u, tiles=(4,)), px.tiled.from_array(np.zeros(1001), tiles=(4,))
    f = px.compile(P.sweep)
    got = f(ut, vt)
    assert got is vt and vt.tiles == (4,)
    np.testing.assert_array_equal(np.asarray(vt), P.sweep(u, np.zeros(1001)))
    np.testing.assert_array_equal(np.asarray(ut), u)  # only read
    text = f.explain()
    assert "loop at prog_cluster_loops.py:69 -> native on the workers, per tile (3 args: int, float64[:], " \
        "float64[:]; 1 runs; the latest: 4 tasks running the loop on 4 tiles, each reading up to 1 rows below and 1 " \
        "above its own (6 tasks cutting those rows from the neighbours), 4 taking the changed tiles apart)" in text, \
        text


@pytest.mark.parametrize("tiles", [1, 3])
def test_a_row_loop_into_a_tiled_array_runs_per_tile(rt, tiles):
    X = np.random.default_rng(6).standard_normal((3000, 3))
    Xt, out = px.tiled.from_array(X, tiles=(tiles, 1)), px.tiled.from_array(np.ones(3000), tiles=(tiles,))
    f = px.compile(P.norms_into)
    assert f(Xt, out) is out
    np.testing.assert_array_equal(np.asarray(out), P.norms_into(X, np.ones(3000)))
    assert f"the latest: {tiles} tasks running the loop on {tiles} tiles, each reading up to 0 rows below and 0 above" \
        in f.explain(), f.explain()


@pytest.mark.parametrize("program, why", [
    (P.carried_in, "not per tile: it assigns 'prev', which the function reads outside it (a value carried in or out)"),
    (P.shifted_store, "not per tile: 'out' is stored into and read at other rows than the iteration's own"),
    (P.wrapping_read, "not per tile: it reads rows outside the arrays (a negative index wraps around in Python)"),
])
def test_loops_that_are_not_tile_local_run_in_one_task(rt, program, why):
    x = np.random.default_rng(7).random(200)
    f = px.compile(program)
    got = f(px.tiled.from_array(x, tiles=(4,)), px.tiled.from_array(np.zeros(200), tiles=(4,)))
    np.testing.assert_array_equal(np.asarray(got), program(x, np.zeros(200)))
    text = f.explain()
    assert "-> native on the workers (" in text and why in text, text


def test_a_tile_task_error_names_the_users_line(rt):
    idx = np.arange(400) % 7
    idx[250] = 7  # in the third tile
    f = px.compile(P.gathered)
    with pytest.raises(px.ExecutionError) as err:
        f(px.tiled.from_array(np.arange(400.0), tiles=(4,)), np.ones(7), idx,
          px.tiled.from_array(np.zeros(400), tiles=(4,)))
    assert str(err.value).startswith(f"{FILE}:105:25: in primitive 'slice_at': IndexError: index 7 is out of "
                                     "bounds for axis 0 with size 7"), str(err.value)
    assert "the loop reran interpreted" in f.explain()  # its kernel per tile stopped at its test of idx's range
    idx[250] = 6
    got = f(px.tiled.from_array(np.arange(400.0), tiles=(4,)), np.ones(7), idx,
            px.tiled.from_array(np.zeros(400), tiles=(4,)))
    np.testing.assert_array_equal(np.asarray(got), P.gathered(np.arange(400.0), np.ones(7), idx, np.zeros(400)))


def test_a_worker_killed_during_the_tile_tasks_is_survived():
    procs = DaskProcesses(n_workers=2)
    try:
        with px.runtime.dask(procs.address) as rt, px.using(rt):
            client = rt.executor.client
            X = np.random.default_rng(8).standard_normal((100_000, 2))
            f = px.compile(P.repeated_norms_into)
            Xt = px.tiled.from_array(X, tiles=(2, 1))
            out = px.tiled.from_array(np.zeros(100_000), tiles=(2,))
            want = P.repeated_norms_into(X, np.zeros(100_000), 1)
            np.testing.assert_array_equal(np.asarray(f(Xt, out, 1)), want)  # (compiled, cached)
            pids = client.run(os.getpid)
            killed = []

            def kill_a_tile_worker():
                end = time.monotonic() + 60
                while time.monotonic() < end and not killed:
                    for w, keys in client.processing().items():
                        if any(str(k).startswith("native-tile@") for k in keys):
                            time.sleep(0.3)
                            procs.kill_worker(next(p for p in procs.alive_workers() if p.pid == pids[w]))
                            killed.append(w)
                            return
                    time.sleep(0.02)

            killer = threading.Thread(target=kill_a_tile_worker)
            killer.start()
            out2 = px.tiled.from_array(np.zeros(100_000), tiles=(2,))
            f(Xt, out2, 3000)
            killer.join()
            assert killed, "no tile task was seen running"
            np.testing.assert_array_equal(np.asarray(out2), want)
            assert "per tile" in f.explain(), f.explain()
    finally:
        procs.stop()


def test_one_tiled_array_under_two_names_that_the_loop_changes_stays_interpreted(rt):
    """``sweep(u, u)`` reads rows the loop has just written (a Gauss-Seidel sweep): copies per name would not."""
    u = np.random.default_rng(9).random(40)
    ut = px.tiled.from_array(u.copy(), tiles=(4,))
    f = px.compile(P.sweep)
    f(ut, ut)
    want = u.copy()
    P.sweep(want, want)
    np.testing.assert_array_equal(np.asarray(ut), want)
    assert "-> not native on the workers: 'u' and 'v' share their data and the loop changes one" in f.explain()
