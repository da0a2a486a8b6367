"""The SPMD loop tier on real worker processes: loops over row-tiled arrays run as one task per worker with ring
collectives, and return what NumPy returns on the gathered arrays.

Tolerances: sums over the tiled axis add the ranks' partial sums (NumPy sums pairwise in one pass), so float
results agree to ~1e-12 relative here (rtol 1e-9 leaves room); min/max/argmin/argmax and k-means labels are exact."""
from __future__ import annotations

import gc
import os
import time
import warnings

import numpy as np
import prog_spmd as S
import prog_tiled as P
import pytest
from cluster import DaskProcesses
from distributed import Client
from phylanx_py.runtime.segments import rank as seg

import phylanx_py as px
from phylanx_py.errors import ExecutionError

RTOL = 1e-9


@pytest.fixture(scope="module")
def cluster():
    procs = DaskProcesses(n_workers=2)
    yield procs
    procs.stop()


@pytest.fixture(scope="module")
def rt(cluster):
    runtime = px.runtime.dask(cluster.address)
    with px.using(runtime):
        yield runtime
    runtime.close()


def _spmd(f, workers=2):
    text = f.explain()
    assert f"SPMD over {workers} workers" in text, text
    return text


def _data(n=600, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = (X @ rng.standard_normal(d) + 0.1 * rng.standard_normal(n) > 0).astype(np.float64)
    return X, y


@pytest.mark.parametrize("tiles", [2, 4])
def test_lra(rt, tiles):
    X, y = _data()
    f = px.compile(P.lra)
    w = f(px.tiled.from_array(X, tiles=(tiles, 1)), px.tiled.from_array(y, tiles=(tiles,)), 0.5, 12)
    np.testing.assert_allclose(w, P.lra(X, y, 0.5, 12), rtol=RTOL, atol=1e-14)
    text = _spmd(f)
    assert "12 iterations, 1 allreduce per iteration (5 values)" in text, text


@pytest.mark.parametrize("tiles", [2, 4])
def test_kmeans(rt, tiles):
    X, _ = _data(d=2, seed=1)
    C0 = X[:6].copy()
    f = px.compile(P.kmeans)
    Xt = px.tiled.from_array(X, tiles=(tiles, 1))
    C, labels = f(Xt, C0, 6)
    Cr, lr = P.kmeans(X, C0, 6)
    np.testing.assert_allclose(C, Cr, rtol=RTOL)
    assert isinstance(labels, px.tiled.TiledArray) and labels.boundaries[0] == Xt.boundaries[0]
    np.testing.assert_array_equal(np.asarray(labels), lr)
    _spmd(f)


@pytest.mark.parametrize("tiles", [2, 4])
def test_power_iteration(rt, tiles):
    rng = np.random.default_rng(2)
    A = rng.standard_normal((120, 120))
    A = A + A.T
    v0 = np.ones(120)
    f = px.compile(P.power_iteration)
    v, lam = f(px.tiled.from_array(A, tiles=(tiles, 1)), v0, 15)
    vr, lr = P.power_iteration(A, v0, 15)
    np.testing.assert_allclose(np.asarray(v), vr, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(lam, lr, rtol=RTOL)
    assert "allgather" in _spmd(f)  # ``A @ v`` with v tiled: every rank gathers v


@pytest.mark.parametrize("tiles", [2, 4])
def test_standardisation(rt, tiles):
    X, _ = _data(d=4, seed=3)
    X = X * np.array([1.0, 10.0, 0.1, 3.0]) + np.array([5.0, -2.0, 0.0, 1.0])
    f = px.compile(S.standardize_steps)
    Z, m, s = f(px.tiled.from_array(X, tiles=(tiles, 1)), 3)
    Zr, mr, sr = S.standardize_steps(X, 3)
    np.testing.assert_allclose(np.asarray(Z), Zr, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(m, mr, atol=1e-12)
    np.testing.assert_allclose(s, sr, rtol=RTOL)
    _spmd(f)


@pytest.mark.parametrize("tiles", [2, 4])
def test_jacobi_stencil_exchanges_halo_rows(rt, tiles):
    rng = np.random.default_rng(4)
    u, fz = rng.standard_normal(203), rng.standard_normal(203)
    f = px.compile(P.jacobi)
    ut = px.tiled.from_array(u, tiles=(tiles,))
    out = f(ut, px.tiled.from_array(fz, tiles=(tiles,)), 0.01, 9)
    ref = P.jacobi(u.copy(), fz, 0.01, 9)
    np.testing.assert_array_equal(np.asarray(out), ref)  # element-wise only: exact
    np.testing.assert_array_equal(np.asarray(ut), ref)  # changed in place, as the NumPy array is
    assert "halo" in _spmd(f)


def test_reductions_of_every_kind(rt):
    X, _ = _data(n=401, d=3, seed=5)
    f = px.compile(S.stats_loop)
    np.testing.assert_allclose(f(px.tiled.from_array(X, tiles=(3, 1)), 4), S.stats_loop(X, 4), rtol=RTOL)
    _spmd(f)


def test_data_dependent_while_leaves_together(rt):
    X, _ = _data(n=300, d=4, seed=6)
    f = px.compile(S.while_converge)
    v, steps = f(px.tiled.from_array(X, tiles=(4, 1)), 1e-10)
    vr, sr = S.while_converge(X, 1e-10)
    assert steps == sr
    np.testing.assert_allclose(v, vr, rtol=1e-8)
    _spmd(f)


@pytest.mark.parametrize("spmd", ["1", "0"])
def test_a_list_changed_by_the_loop_is_changed_for_the_caller(rt, spmd, monkeypatch):
    monkeypatch.setenv("PHYLANX_SPMD", spmd)  # "0": the tile tasks' path gave the caller's list Dask futures
    X, y = _data(seed=7)
    f = px.compile(S.lra_history)
    hist, ref_hist = [], []
    w = f(px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(y, tiles=(2,)), 0.5, 5, hist)
    np.testing.assert_allclose(w, S.lra_history(X, y, 0.5, 5, ref_hist), rtol=RTOL)
    assert [type(h) for h in hist] == [float] * 5
    np.testing.assert_allclose(hist, ref_hist, rtol=RTOL)
    if spmd == "1":
        _spmd(f)


def test_a_construct_without_spmd_form_runs_as_before_and_says_why(rt):
    X, _ = _data(n=200, d=3, seed=8)
    f = px.compile(S.sorted_rows_loop)
    with pytest.warns(px.tiled.TileFallbackWarning):  # today's path gathers for np.sort along the tiles
        out = f(px.tiled.from_array(X, tiles=(2, 1)), 3)
    np.testing.assert_allclose(out, S.sorted_rows_loop(X, 3), rtol=RTOL)
    assert "not SPMD: np.sort along the tiled axis" in f.explain(), f.explain()


def test_functions_along_the_rows_and_the_tile_rules_moves_run_on_the_ranks(rt):
    X, _ = _data(n=200, d=4, seed=9)
    f = px.compile(S.row_functions_loop)
    out = f(px.tiled.from_array(X, tiles=(2, 1)), 3)
    np.testing.assert_allclose(out, S.row_functions_loop(X, 3), rtol=RTOL)
    _spmd(f)


def test_a_printing_loop_stays_on_the_client(rt, capsys):
    X, _ = _data(n=100, d=2)
    f = px.compile(S.printing_loop)
    out = f(px.tiled.from_array(X, tiles=(2, 1)), 2)
    np.testing.assert_allclose(out, S.printing_loop(X, 2), rtol=RTOL)
    assert capsys.readouterr().out.count("step") == 4  # the compiled call's two lines, then the plain one's
    assert "must run on the client" in f.explain()


def test_the_users_error_names_the_users_line(rt):
    X, _ = _data(n=100, d=3)
    f = px.compile(S.bad_shapes)
    with pytest.raises(ExecutionError) as e:
        f(px.tiled.from_array(X, tiles=(2, 1)), 2)
    assert "prog_spmd.py" in str(e.value) and "__matmul" in str(e.value), str(e.value)


def test_the_tier_can_be_turned_off(rt, monkeypatch):
    X, y = _data(seed=9)
    monkeypatch.setenv("PHYLANX_SPMD", "0")
    f = px.compile(P.lra)
    w = f(px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(y, tiles=(2,)), 0.5, 3)
    np.testing.assert_allclose(w, P.lra(X, y, 0.5, 3), rtol=RTOL)
    assert "SPMD" not in f.explain()


# ---- faults ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fault_cluster():
    procs = DaskProcesses(n_workers=2)
    yield procs
    procs.stop()


@pytest.mark.parametrize("attempt", range(5))
def test_worker_killed_mid_segment(fault_cluster, attempt):
    """SIGKILL a worker while its rank runs: the segment fails fast, re-forms on the live worker (the dead
    worker's tiles recomputed from their lineage) and restarts from the loop's starting values."""
    procs = fault_cluster
    while len(procs.alive_workers()) < 2:
        procs.add_worker()
    procs.wait_for_workers(2)
    f = px.compile(P.lra)
    with px.runtime.dask(procs.address) as runtime, px.using(runtime):
        X = px.tiled.random((40_000, 8), tiles=(4, 1), seed=attempt)
        y = (X[:, 0] > 0.5).astype(np.float64)
        Xn, yn = np.asarray(X), np.asarray(y)
        fut = f.lazy(X, y, 0.5, 4000)
        with Client(procs.address) as c:
            deadline = time.monotonic() + 120
            while True:  # until a rank has done some collectives
                now = c.run(seg.running)
                if any(v and v > 5 for r in now.values() for v in r.values()):
                    break
                assert time.monotonic() < deadline, "the segment never started"
                assert not fut.done(), "the segment finished before the worker could be killed"
                time.sleep(0.02)
            victim = sorted(c.nthreads())[attempt % 2]
            pid = c.run(os.getpid, workers=[victim])[victim]
        (proc,) = [w for w in procs.alive_workers() if w.pid == pid]
        procs.kill_worker(proc)
        w = fut.result(timeout=240)
        assert "SPMD over 1 workers" in f.explain(), f.explain()  # the rerun, on the survivor
    np.testing.assert_allclose(w, P.lra(Xn, yn, 0.5, 4000), rtol=1e-8)


def test_worker_killed_mid_segment_of_batched_kmeans(fault_cluster):
    """The same with k-means' batched sums and counts (split loop, waiting arithmetic): the rerun's answer is
    NumPy's."""
    procs = fault_cluster
    while len(procs.alive_workers()) < 2:
        procs.add_worker()
    procs.wait_for_workers(2)
    f = px.compile(S.kmeans_masked)
    X, C0 = _blobs(n=40_000, seed=26)
    with px.runtime.dask(procs.address) as runtime, px.using(runtime):
        fut = f.lazy(px.tiled.from_array(X, tiles=(4, 1)), C0, 1500)
        with Client(procs.address) as c:
            deadline = time.monotonic() + 120
            while True:
                now = c.run(seg.running)
                if any(v and v > 5 for r in now.values() for v in r.values()):
                    break
                assert time.monotonic() < deadline, "the segment never started"
                assert not fut.done(), "the segment finished before the worker could be killed"
                time.sleep(0.02)
            victim = sorted(c.nthreads())[0]
            pid = c.run(os.getpid, workers=[victim])[victim]
        (proc,) = [w for w in procs.alive_workers() if w.pid == pid]
        procs.kill_worker(proc)
        C, labels = fut.result(timeout=240)
        labels = np.asarray(labels)
        assert "SPMD over 1 workers" in f.explain(), f.explain()
    Cr, lr = S.kmeans_masked(X, C0, 1500)
    np.testing.assert_allclose(C, Cr, rtol=1e-8)
    np.testing.assert_array_equal(labels, lr)


@pytest.mark.parametrize("address", ["new", "same"])
def test_a_worker_restarted_by_its_nanny_is_not_waited_on(address):
    """A worker killed between calls and restarted by its nanny (at a new address, or at the same one when workers
    have fixed ports; with a new ring port either way): the next calls over tiles whose placement was remembered
    (ranks started directly through the ring ports) do not wait on the dead worker, and give the right answer.
    They took 30 s each before: the client connected to the dead ring port (``distributed.comm.connect`` retries a
    refused connection until its 30 s timeout), and once the ports were forgotten the scheduler was asked to run on
    the dead worker's address (its broadcast, 30 s again), on every later call over the second set of tiles. Two
    sets of tiles reach both: the first call forgets the ports, the second still has its placement remembered."""
    procs = DaskProcesses(n_workers=2, nanny=True, worker_port=address == "same")
    try:
        f = px.compile(P.lra)
        with px.runtime.dask(procs.address) as runtime, px.using(runtime):
            client = runtime.executor.client
            data = [_data(seed=s) for s in (21, 22)]
            tiled = [(px.tiled.from_array(X, tiles=(4, 1)), px.tiled.from_array(y, tiles=(4,))) for X, y in data]
            for Xt, yt in tiled:
                Xt.persist(wait=True), yt.persist(wait=True)
            for (X, y), (Xt, yt) in zip(data, tiled):  # each placement remembered, the ring ports known
                np.testing.assert_allclose(f(Xt, yt, 0.5, 5), P.lra(X, y, 0.5, 5), rtol=RTOL)
                assert "0 tasks for the whole loop" in _spmd(f)
            victim = sorted(client.nthreads())[0]
            restarted = procs.kill_worker_under_nanny(victim)  # returns once the new worker has joined
            assert (restarted == victim) == (address == "same")
            for (X, y), (Xt, yt) in zip(data, tiled):
                t0 = time.monotonic()
                w = f(Xt, yt, 0.5, 5)
                took = time.monotonic() - t0
                np.testing.assert_allclose(w, P.lra(X, y, 0.5, 5), rtol=RTOL)
                assert took < 15, f"the call after the restart took {took:.1f} s: it waited on the dead worker"
                _spmd(f)
    finally:
        procs.stop()


def test_a_segment_counts_on_the_runtime_for_the_run_summary(rt):
    """``phylanx-py run`` sums up what ran on the workers from ``rt.counts``: an SPMD loop is one segment of one
    long-running rank per worker (no primitive task), so without its count a script whose work was all SPMD loops
    was said to have left the workers idle."""
    from phylanx_py.cli import _where_work_ran

    X, y = _data(seed=13)
    f = px.compile(P.lra)
    before = dict(rt.counts)
    np.testing.assert_allclose(f(px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(y, tiles=(2,)), 0.5, 3),
                               P.lra(X, y, 0.5, 3), rtol=RTOL)
    _spmd(f)
    assert (rt.counts["segments"], rt.counts["ranks"]) == (before["segments"] + 1, before["ranks"] + 2)
    assert "did nothing" not in _where_work_ran(rt)


def test_masked_sums_by_label_match_numpy(rt):
    X, _ = _data(n=500, d=3, seed=10)
    labels = np.random.default_rng(11).integers(0, 4, 500)
    f = px.compile(S.label_stats)
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):  # label 4 is never used: NumPy warns
        ref = S.label_stats(X, labels, 5, 2)
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):  # said on the ranks, shown here
        out = f(px.tiled.from_array(X, tiles=(3, 1)), px.tiled.from_array(labels, tiles=(3,)), 5, 2)
    np.testing.assert_allclose(out, ref, rtol=RTOL, equal_nan=True)
    assert np.isnan(out[4, 4:]).all() and out[4, 0] == 0
    _spmd(f)


# ---- batched collectives -------------------------------------------------------------------------------------
def _blobs(n=3000, k=8, seed=20):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-10.0, 10.0, (k, 2))
    X = centres[rng.integers(0, k, n)] + rng.standard_normal((n, 2))
    return X, X[:k].copy()


@pytest.mark.parametrize("prog", [S.kmeans_masked, S.kmeans_comprehension])
@pytest.mark.parametrize("tiles", [2, 3])
def test_kmeans_sums_and_counts_go_in_one_message_per_iteration(rt, prog, tiles):
    """Textbook k-means (per centroid a mask, ``np.sum(X[mask], axis=0) / np.sum(mask)``): NumPy's answer, and the 8
    sums (2 values each) and 8 counts of an iteration reach the other rank as one allreduce of 24 values. They went
    as 16 allreduces of 1-2 values: a count and a sum had different dtypes, and each division, then each store,
    needed its values at once. The messages are counted by the ranks' ring groups."""
    X, C0 = _blobs()
    f = px.compile(prog)
    C, labels = f(px.tiled.from_array(X, tiles=(tiles, 1)), C0, 5)
    Cr, lr = prog(X, C0, 5)
    np.testing.assert_allclose(C, Cr, rtol=RTOL)
    np.testing.assert_array_equal(np.asarray(labels), lr)
    text = _spmd(f)
    assert "5 iterations, 1 allreduce per iteration (24 values)" in text, text
    assert "in 1 message per iteration (16 reductions batched)" in text, text


def test_values_nobody_reads_still_warn_and_raise_as_in_numpy(rt):
    """Values made from waiting sums are computed when first read, and at the latest when the next iteration
    starts: one nobody reads still gives NumPy's warning, and NumPy's error (the loop then runs on the client and
    raises there)."""
    X, _ = _data(n=200, d=3, seed=27)
    Xt = px.tiled.from_array(X, tiles=(2, 1))
    f = px.compile(S.unused_ratio)
    with pytest.warns(RuntimeWarning, match="invalid value encountered"):
        ref = S.unused_ratio(X, 2)
    with pytest.warns(RuntimeWarning, match="invalid value encountered"):
        np.testing.assert_allclose(f(Xt, 2), ref, rtol=RTOL)
    _spmd(f)
    g = px.compile(S.unused_bad_shape)
    with pytest.raises(ValueError, match="could not be broadcast"):
        S.unused_bad_shape(X, 2)
    with pytest.raises(ExecutionError, match="could not be broadcast"):
        g(Xt, 2)


def _split(prog):
    """The segment loop's body of ``prog`` as the ranks get it (runtime/spmd/fission.py), and its new names."""
    from phylanx_py.runtime.spmd import fission

    from phylanx_py import ir

    tree = px.compile(prog).tree
    loop = next(s for s in tree.function(tree.entry).body.stmts if isinstance(s, (ir.For, ir.While)))
    body, temps = fission.split_loops(loop.body)
    return str(ir.Program("f", (("f", ir.Function("f", (), body)),))), temps


def test_the_planner_splits_only_loops_whose_stores_nothing_reads():
    """IR level: k-means' loop over clusters is split behind a run-time check of the target and every value read
    from outside; a loop reading its target, storing into its own variable, changing something in place or
    calling a function value is not."""
    text, temps = _split(S.kmeans_masked)
    assert len(temps) == 4, temps
    assert "__phylanx_spmd_apart, python.tuple@152:9(1, new, __px_spmd_it1, labels, points)" in text, text
    assert "method.append@152:9(__px_spmd_buf1, python.tuple@152:9(j, operator.truediv@154:22(" in text, text
    assert _split(S.running_sums_through_a_view)[1]  # split: the run-time check finds the view
    assert _split(S.running_sums_in_place)[1] == ()
    assert _split(S.loops_that_stay_whole)[1] == ()


@pytest.mark.parametrize("prog", [S.running_sums_through_a_view, S.running_sums_in_place])
def test_stores_read_back_in_the_loop_keep_their_order(rt, prog):
    """A loop over labels whose stores the next iteration reads (through a view of the array, or the array itself)
    is not split: NumPy's running sums, one message per label."""
    X, _ = _data(n=400, d=3, seed=21)
    labels = np.random.default_rng(22).integers(0, 4, 400)
    f = px.compile(prog)
    out = f(px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(labels, tiles=(2,)), 4, 2)
    np.testing.assert_allclose(out, prog(X, labels, 4, 2), rtol=RTOL)
    assert "2 iterations, 3 allreduces per iteration" in _spmd(f), f.explain()


def test_a_count_travels_with_float_sums_and_big_integers_stay_exact(rt):
    X, _ = _data(n=500, d=3, seed=23)
    labels = np.random.default_rng(24).integers(0, 5, 500)
    Xt, lt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(labels, tiles=(2,))
    f = px.compile(S.sums_and_counts)
    np.testing.assert_allclose(f(Xt, lt, 3), S.sums_and_counts(X, labels, 3), rtol=RTOL)
    assert "3 iterations, 1 allreduce per iteration (4 values)" in _spmd(f), f.explain()
    g = px.compile(S.sums_counts_and_big_integers)
    out, total = g(Xt, lt, 3)
    ref, ref_total = S.sums_counts_and_big_integers(X, labels, 3)
    np.testing.assert_allclose(out, ref, rtol=RTOL)
    assert total == ref_total and ref_total > 2 ** 53 and type(total) is type(ref_total), (total, ref_total)
    assert "2 allreduces per iteration (5 values)" in _spmd(g), g.explain()  # int64 data: a message of its own


def test_a_long_chain_of_values_from_waiting_sums(rt):
    X, _ = _data(n=300, d=3, seed=25)
    f = px.compile(S.long_chain)
    np.testing.assert_allclose(f(px.tiled.from_array(X, tiles=(2, 1)), 3), S.long_chain(X, 3), rtol=RTOL)
    text = _spmd(f)
    # an iteration's 40 sums in 3 messages, not 40: a chain is resolved every 16 steps (and when the next starts)
    assert "3 iterations, 3 allreduces per iteration (40 values)" in text, text


@pytest.mark.parametrize("prog", [S.first_row_loop, S.column_broadcast_loop])
def test_loops_without_an_spmd_form_give_numpys_answer(rt, prog):
    X, _ = _data(n=60, d=3, seed=12)
    args = (X, X[:, :1].copy(), 2) if prog is S.column_broadcast_loop else (X, 2)
    f = px.compile(prog)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", px.tiled.TileFallbackWarning)
        out = f(px.tiled.from_array(X, tiles=(2, 1)), *args[1:])
    np.testing.assert_allclose(np.asarray(out), prog(*args), rtol=RTOL)
    assert "not SPMD" in f.explain(), f.explain()


def test_casts_and_selected_rows(rt):
    X, _ = _data(n=301, d=3, seed=13)
    f = px.compile(S.astype_and_masks)
    np.testing.assert_allclose(f(px.tiled.from_array(X, tiles=(4, 1)), 3), S.astype_and_masks(X, 3), rtol=RTOL)
    _spmd(f)


def test_the_segment_is_a_row_of_the_profile(rt):
    X, y = _data(seed=14)
    f = px.compile(P.lra)
    with px.profile() as prof:
        w = f(px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(y, tiles=(2,)), 0.5, 3)
    np.testing.assert_allclose(w, P.lra(X, y, 0.5, 3), rtol=RTOL)
    assert "spmd loop (2 workers, 3 iterations)" in prof.table(), prof.table()


def test_in_place_updates_of_a_tiled_input_reach_the_caller(rt):
    X, _ = _data(n=250, d=3, seed=15)
    f = px.compile(S.center_in_place)
    Xt = px.tiled.from_array(X, tiles=(3, 1))
    ref_X = X.copy()
    total = f(Xt, 3)
    np.testing.assert_allclose(total, S.center_in_place(ref_X, 3), rtol=RTOL, atol=1e-9)
    np.testing.assert_allclose(np.asarray(Xt), ref_X, rtol=RTOL, atol=1e-12)
    _spmd(f)


def test_changes_to_values_the_loop_does_not_hold_by_name_stay_on_the_client(rt):
    X, _ = _data(n=40, d=2, seed=16)
    Xt = px.tiled.from_array(X, tiles=(2, 1))
    S.LOG.clear()
    f = px.compile(S.logs_to_a_module_list)
    np.testing.assert_allclose(f(Xt, 3), 3 * X.sum(), rtol=RTOL)
    assert S.LOG == [0, 1, 2]
    assert "not one of its variables" in f.explain(), f.explain()

    class Box:
        items: list

    box = Box()
    box.items = []
    g = px.compile(S.appends_to_an_attribute)
    np.testing.assert_allclose(g(Xt, box, 2), 2 * X.sum(), rtol=RTOL)
    assert box.items == [0, 1]
    assert "not one of its variables" in g.explain(), g.explain()


def test_a_slice_of_a_slice_in_a_loop_compiles_and_gives_the_plain_answer(rt):
    """x[::-1][1:] in a loop once failed code generation (the SPMD tier took the inner subscript for a name)."""
    x = np.arange(7.0)
    f = px.compile(S.reversed_tail_sum)
    with px.using(px.runtime.synchronous()):
        assert f(x, 3) == S.reversed_tail_sum(x, 3)
    from phylanx_py.runtime.tiled import TileFallbackWarning

    with warnings.catch_warnings():  # x[::-1] of tiles: a lazy view of each tile's rows reversed, nothing gathered
        warnings.simplefilter("error", TileFallbackWarning)
        got = f(px.tiled.from_array(x, tiles=(2,)), 3)
    assert float(got) == S.reversed_tail_sum(x, 3)


# ---- ranks started straight through the workers' ports (no scheduler on the way) -------------------------------
def _transitions(client) -> int:
    """Task transitions the scheduler has made so far: unchanged over a call that sent it no task. Settled first:
    futures of earlier tests that the garbage collector frees release their keys (transitions too) whenever it
    runs, and the client sends those releases in batches, so the count is read once it stays the same for 0.2 s."""
    gc.collect()
    now = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)
    for _ in range(25):
        time.sleep(0.2)
        last, now = now, client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)
        if now == last:
            break
    return now


def _serve_kernel_threads(dask_worker=None):
    """On a worker: a request service answering the threads a kernel run there would use (fused._threads)."""
    from phylanx_py.primitives import fused
    from phylanx_py.runtime.segments import service

    service.SERVICES["test kernel threads"] = lambda worker, payload: fused._threads()


def _kernel_threads_here():
    import threading

    from phylanx_py.primitives import fused

    out = [fused._threads()]  # a task thread of the worker
    t = threading.Thread(target=lambda: out.append(fused._threads()))  # a thread of its own, in that process
    t.start()
    t.join()
    return out


# Dask pickles what lives in __main__ by value: the workers cannot import this test module
_serve_kernel_threads.__module__ = _kernel_threads_here.__module__ = "__main__"


def test_a_rank_started_through_the_port_splits_its_kernels_as_a_task_would(rt):
    """A request served by a worker's port runs in a thread of its own, which ``get_worker()`` does not know: its
    kernels took every core, so two direct ranks ran four threads on two cores. Such requests now use one thread,
    as the worker's task threads do (a thread of its own in the worker process still uses every core)."""
    from phylanx_py.runtime.dask_connect import live_workers
    from phylanx_py.runtime.segments import service
    from phylanx_py.runtime.segments.ports import port_addresses

    client = rt.executor.client
    client.run(_serve_kernel_threads)
    ports = port_addresses(rt.executor, sorted(live_workers(client)))
    assert [service.submit(rt.executor, p, "test kernel threads", None).result(30) for p in ports] == [1, 1]
    assert client.submit(_kernel_threads_here, pure=False).result() == [1, os.cpu_count()]


def test_ranks_over_tiles_in_place_start_without_a_task(rt, monkeypatch):
    """When every rank's tiles are in its worker's memory, the client starts the ranks through the workers' ring
    ports: the scheduler sees no task for the call, and the answer is NumPy's. Turned off, the ranks are tasks."""
    from phylanx_py.runtime.spmd import driver

    client = rt.executor.client
    X, y = _data(seed=11)
    Xt, yt = px.tiled.from_array(X, tiles=(4, 1)), px.tiled.from_array(y, tiles=(4,))
    f = px.compile(P.lra)
    Xt.persist(wait=True), yt.persist(wait=True)  # the tiles in the workers' memory
    for _ in range(2):  # the first call asks the scheduler where the tiles are; the second knows
        before = _transitions(client)
        np.testing.assert_allclose(f(Xt, yt, 0.5, 5), P.lra(X, y, 0.5, 5), rtol=RTOL)
        assert _transitions(client) == before
        assert "SPMD over 2 workers: 5 iterations, 1 allreduce per iteration (5 values), 0 tasks" in f.explain()
    monkeypatch.setattr(driver, "DIRECT", False)
    before = _transitions(client)
    np.testing.assert_allclose(f(Xt, yt, 0.5, 5), P.lra(X, y, 0.5, 5), rtol=RTOL)
    assert _transitions(client) > before
    assert "1 allreduce per iteration (5 values), 2 tasks for the whole loop" in f.explain()


@pytest.mark.parametrize("stale", ["swapped", "one moved"])
def test_a_stale_placement_falls_back_to_tasks(rt, stale):
    """A placement remembered from the last call whose tiles are no longer where it says (here: the ranks' workers
    swapped by hand, or one rank put on the other's worker, so its peer has its tiles and waits for it): a rank
    without its tiles says so at once, the segment runs as tasks (Dask moves the tiles), the answer is the same,
    and the stale placement is forgotten."""
    from phylanx_py.runtime.spmd import driver

    client = rt.executor.client
    X, y = _data(seed=12)
    Xt, yt = px.tiled.from_array(X, tiles=(4, 1)), px.tiled.from_array(y, tiles=(4,))
    Xt.persist(wait=True), yt.persist(wait=True)
    f = px.compile(P.lra)
    np.testing.assert_allclose(f(Xt, yt, 0.5, 3), P.lra(X, y, 0.5, 3), rtol=RTOL)
    tiles = tuple(fut.key for a in (Xt, yt) for fut in a.futures.reshape(-1))
    placed = driver._PLACED[rt.executor]
    (w0, a0, b0), (w1, a1, b1) = placed[tiles]
    held = client.who_has([Xt.futures.reshape(-1)[a0]])
    assert list(held.values()) == [(w0,)], held  # the first rank's tiles are on its worker alone
    placed[tiles] = [(w1, a0, b0), (w0, a1, b1)] if stale == "swapped" else [(w1, a0, b0), (w1, a1, b1)]
    before, t0 = _transitions(client), time.monotonic()
    np.testing.assert_allclose(f(Xt, yt, 0.5, 3), P.lra(X, y, 0.5, 3), rtol=RTOL)
    assert _transitions(client) > before  # the rank tasks
    assert time.monotonic() - t0 < 30  # the waiting peer was aborted, not left to time out
    assert tiles not in placed
    _spmd(f)


def test_a_tls_cluster_starts_ranks_over_tls():
    """The client's requests to the workers' ports take the cluster's Security: on a TLS cluster the ranks start
    directly over TLS (no task) and give NumPy's answer."""
    from distributed import LocalCluster
    from distributed.security import Security
    from phylanx_py.runtime.spmd import driver

    sec = Security.temporary()  # a throw-away CA and certificate (needs the cryptography package)
    X, y = _data(seed=13)
    f = px.compile(P.lra)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, security=sec, host="127.0.0.1",
                      dashboard_address=":0") as cl, Client(cl, security=sec) as client, \
            px.runtime.dask(client=client) as runtime, px.using(runtime):
        Xt, yt = px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(y, tiles=(2,))
        Xt.persist(wait=True), yt.persist(wait=True)
        f(Xt, yt, 0.5, 2)
        before = _transitions(client)
        np.testing.assert_allclose(f(Xt, yt, 0.5, 4), P.lra(X, y, 0.5, 4), rtol=RTOL)
        assert _transitions(client) == before
        ranks = next(iter(driver._PLACED[runtime.executor].values()))
        ports = driver.port_addresses(runtime.executor, [w for w, _, _ in ranks])
        assert all(p.startswith("tls://127.0.0.1:") for p in ports), ports
    _spmd(f)


def test_ranks_run_their_loops_interpreted_so_their_values_stay_the_same_bits(rt):
    """k-means' loop over clusters inside the segment's loop: on the ranks no loop goes to the native tier (each
    rank would switch at its own moment, and native and interpreted results may differ in the last bit)."""
    X, _ = _data(d=2, seed=14)
    f = px.compile(P.kmeans)
    C, labels = f(px.tiled.from_array(X, tiles=(2, 1)), X[:4].copy(), 5)
    Cr, _ = P.kmeans(X, X[:4].copy(), 5)
    np.testing.assert_allclose(C, Cr, rtol=RTOL)
    _spmd(f)
    def native_loops(dask_worker=None):  # (nested: sent by value, the workers cannot import this module)
        from phylanx_py.runtime.spmd import rank

        return [len(code.native_loops) for code in rank._PROGRAMS.values()]

    counts = rt.executor.client.run(native_loops)
    assert counts and all(c and not any(c) for c in counts.values()), counts


# ---- rank bodies in the best tier ------------------------------------------------------------------------------
def _rank_kernels(text):
    """Compiled kernels per iteration on rank 0, from the explain line."""
    import re

    found = re.search(r"rank 0 per iteration: [\d.e+-]+ ms, [\d.e+-]+ ms of it in ([\d.e+-]+) compiled kernels?", text)
    assert found, text
    return float(found.group(1))


def test_rank_bodies_of_textbook_kmeans_run_compiled_kernels(rt):
    """Textbook k-means on the ranks: the distances and their argmin are one fused compiled pass over the rank's
    rows, the per-centroid masked sums and counts one compiled pass (a per-label table, runtime/spmd/table.py);
    NumPy's answer, and still one allreduce per iteration."""
    X, C0 = _blobs(n=120_000)
    f = px.compile(S.kmeans_masked)
    C, labels = f(px.tiled.from_array(X, tiles=(4, 1)), C0, 4)
    Cr, lr = S.kmeans_masked(X, C0, 4)
    np.testing.assert_allclose(C, Cr, rtol=RTOL)
    np.testing.assert_array_equal(np.asarray(labels), lr)
    text = _spmd(f)
    assert "4 iterations, 1 allreduce per iteration (24 values)" in text, text
    assert _rank_kernels(text) == 2, text


def test_a_stencils_rank_bodies_run_a_fused_kernel(rt):
    """A Jacobi stencil over a tiled vector: each step's chain is one fused compiled pass over the rank's rows and
    halo; NumPy's answer exactly."""
    rng = np.random.default_rng(21)
    u, fz = rng.standard_normal(200_001), rng.standard_normal(200_001)
    f = px.compile(P.jacobi)
    ut = px.tiled.from_array(u, tiles=(2,))
    out = f(ut, px.tiled.from_array(fz, tiles=(2,)), 0.01, 5)
    np.testing.assert_array_equal(np.asarray(out), P.jacobi(u.copy(), fz, 0.01, 5))
    text = _spmd(f)
    assert "halo" in text and _rank_kernels(text) >= 1, text


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_the_per_label_table_has_the_bits_of_bincount(dtype):
    """The compiled per-label table adds in row order as ``np.bincount(labels, weights=column)``: the same bits."""
    from phylanx_py.runtime.spmd import table as T
    from phylanx_py.runtime.spmd.table import table

    r = np.random.default_rng(22)
    rows = (r.standard_normal((30_001, 3)) * 1e3).astype(dtype)
    for lab in (r.integers(0, 7, 30_001), r.integers(0, 7, 30_001).astype(np.uint8), np.zeros(0, np.int64)):
        rs = rows[:len(lab)]
        sums, counts = table(lab, rs, 10)
        want = np.stack([np.bincount(lab, weights=rs[:, c]) for c in range(3)], axis=1).reshape(-1, 3)
        assert sums.dtype == np.float64 and np.array_equal(sums, want)
        assert np.array_equal(counts, np.bincount(lab))
        assert table(lab, None, 10)[0] is None
    assert table(np.array([0, 3, 11]), None, 10) is None and table(np.array([0, -1, 2]), rows[:3], 10) is None
    assert not T._FAILED  # (the compiled kernel took every case)


@pytest.mark.parametrize("prog", [S.selection_then_change, S.mask_then_change, S.mask_of_a_view_then_change,
                                  S.table_then_change_through_a_cast, S.mask_changed_in_place])
def test_a_selection_is_made_before_its_rows_change(rt, prog):
    """``sel = X[labels == j]`` waits on the ranks to be made (its sums come from the per-label table); a change
    to X or labels in place before ``sel`` is used makes it first, so it holds the rows as they were, as in NumPy
    (it was made from the changed rows)."""
    rng = np.random.default_rng(23)
    X, lab = rng.standard_normal((1000, 2)), rng.integers(0, 3, 1000)
    f = px.compile(prog)
    got = f(px.tiled.from_array(X.copy(), tiles=(2, 1)), px.tiled.from_array(lab.copy(), tiles=(2,)), 2)
    np.testing.assert_allclose(got, prog(X.copy(), lab.copy(), 2), rtol=RTOL)
    _spmd(f)


def test_a_label_mask_is_made_only_when_its_values_are_read(rt):
    """``labels == j`` on a rank waits to be made: k-means' masked sums and counts read the per-label table, so no
    mask is made; a mask used as values (``m * 1.0``, ``X[m] = 0``) is made, and NumPy's answer comes back."""
    X, C0 = _blobs(n=2000)
    f = px.compile(S.masks_used_as_values)
    got = f(px.tiled.from_array(X.copy(), tiles=(2, 1)), C0, 2)
    want = S.masks_used_as_values(X.copy(), C0, 2)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=RTOL)
    _spmd(f)
