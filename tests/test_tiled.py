"""Tiled distributed arrays on real processes (a ``dask scheduler`` and two ``dask worker`` processes): the same
compiled functions as on NumPy inputs, tile rules checked against NumPy, placement, release, a lost worker."""
from __future__ import annotations

import gc
import os
import time
import warnings

import dask.array as da
import numpy as np
import prog_tiled as P
import pytest
from cluster import DaskProcesses
from distributed import Client
from phylanx_py.runtime.tiled import TiledArray, TileFallbackWarning

import phylanx_py as px
from phylanx_py import nn

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster():
    # tiny row blocks: the tests' small tiles take the row-blocked path of tile programs (blocked.py) where it
    # applies; the worker-kill tests below run the default block size
    procs = DaskProcesses(n_workers=2, extra_env={"PHYLANX_TILE_BLOCK_BYTES": "512"})
    yield procs
    procs.stop()


@pytest.fixture(scope="module")
def rt(cluster):
    runtime = px.runtime.dask(cluster.address)
    with px.using(runtime):
        yield runtime
    runtime.close()


TILINGS = {"even": (4, 1), "uneven": ((50, 150, 37, 263), 1), "one tile": (1, 1), "more tiles than workers": (7, 1)}


def _data(rows=500, cols=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, cols))
    y = (X @ rng.standard_normal(cols) > 0).astype(float)
    return X, y


def _row_tiles(tiles):
    return (tiles[0],)


@pytest.mark.parametrize("tiling", TILINGS)
def test_lra_on_tiled_inputs_equals_numpy(rt, tiling):
    X, y = _data()
    tiles = TILINGS[tiling]
    Xt, yt = px.tiled.from_array(X, tiles=tiles), px.tiled.from_array(y, tiles=_row_tiles(tiles))
    w = px.compile(P.lra)(Xt, yt, 0.5, 12)
    assert type(w) is np.ndarray
    np.testing.assert_allclose(w, P.lra(X, y, 0.5, 12), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("tiling", TILINGS)
def test_kmeans_on_tiled_inputs_equals_numpy(rt, tiling):
    X, _ = _data(cols=2, seed=1)
    C0 = X[:5].copy()
    C, labels = px.compile(P.kmeans)(px.tiled.from_array(X, tiles=TILINGS[tiling]), C0, 4)
    Cn, ln = P.kmeans(X, C0, 4)
    np.testing.assert_allclose(C, Cn, rtol=1e-10)
    np.testing.assert_array_equal(np.asarray(labels), ln)


@pytest.mark.parametrize("tiling", TILINGS)
def test_power_iteration_standardize_softmax_on_tiled_inputs(rt, tiling):
    tiles = TILINGS[tiling]
    rng = np.random.default_rng(2)
    B = rng.standard_normal((500, 500))
    A = B @ B.T / 500
    v0 = np.ones(500)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TileFallbackWarning)  # these programs need no gathering
        v, lam = px.compile(P.power_iteration)(px.tiled.from_array(A, tiles=tiles), v0, 8)
        X, _ = _data(seed=3)
        Z = px.compile(P.standardize)(px.tiled.from_array(X, tiles=tiles))
        Y = np.eye(6)[rng.integers(0, 6, 500)]
        loss = px.compile(P.softmax_cross_entropy)(px.tiled.from_array(X, tiles=tiles),
                                                   px.tiled.from_array(Y, tiles=tiles))
    vn, lamn = P.power_iteration(A, v0, 8)
    assert isinstance(v, TiledArray) and v.tiles == (tiles[0] if isinstance(tiles[0], int) else len(tiles[0]),)
    np.testing.assert_allclose(np.asarray(v), vn, rtol=1e-10)
    np.testing.assert_allclose(lam, lamn, rtol=1e-10)
    assert isinstance(Z, TiledArray) and Z.boundaries[0] == px.tiled.from_array(X, tiles=tiles).boundaries[0]
    np.testing.assert_allclose(np.asarray(Z), P.standardize(X), rtol=1e-10)
    np.testing.assert_allclose(loss, P.softmax_cross_entropy(X, Y), rtol=1e-10)


@pytest.mark.parametrize("tiling", ["even", "uneven", "one tile", "more tiles than workers"])
def test_jacobi_stencil_updates_the_tiled_array_in_place(rt, tiling):
    tiles = {"even": 4, "uneven": ((100, 7, 200, 193),), "one tile": 1, "more tiles than workers": 9}[tiling]
    rng = np.random.default_rng(4)
    u0, f = rng.standard_normal(500), rng.standard_normal(500)
    ut = px.tiled.from_array(u0, tiles=tiles)
    out = px.compile(P.jacobi)(ut, px.tiled.from_array(f, tiles=tiles), 0.01, 25)
    want = P.jacobi(u0.copy(), f, 0.01, 25)
    assert out is ut  # in place, as in NumPy: the caller's array holds the result
    np.testing.assert_allclose(np.asarray(ut), want, rtol=1e-12)


def test_element_wise_results_stay_where_their_inputs_live_and_no_tile_moves(rt):
    X = px.tiled.from_array(np.random.default_rng(5).standard_normal((4000, 3)), tiles=(4, 1))
    X.persist(wait=True)
    before = X.placement
    Z = px.compile(P.chain)(X)
    assert isinstance(Z, TiledArray)
    # one task per tile, running the whole fused chain (the generated kernel), named for the user's line
    assert all(f.key.startswith("fused@prog_tiled.py:") for f in Z.futures.flat)
    assert Z.placement == before
    assert len(set(before.values())) == 2  # spread over both workers
    who = rt.executor.client.who_has(list(X.futures.flat))
    assert all(len(ws) == 1 for ws in who.values()), "an input tile was copied to another worker"
    np.testing.assert_allclose(np.asarray(Z), P.chain(np.asarray(X)), rtol=1e-12)


def managed_bytes(client) -> int:
    """Bytes the scheduler counts as held on all workers."""
    return client.run_on_scheduler(lambda dask_scheduler: sum(ws.nbytes for ws in dask_scheduler.workers.values()))


def bytes_after_release(client, base, timeout=30.0) -> int:
    """Managed bytes once they are back to ``base`` or ``timeout`` seconds have passed (release is asynchronous;
    small results of earlier tests may go too, hence ``<= base`` in the callers)."""
    gc.collect()
    end = time.monotonic() + timeout
    while managed_bytes(client) > base and time.monotonic() < end:
        time.sleep(0.2)
    return managed_bytes(client)


def test_worker_memory_returns_to_baseline_when_arrays_go(rt):
    client = rt.executor.client
    gc.collect()
    base = managed_bytes(client)
    X = px.tiled.random((200_000, 5), tiles=(4, 1), seed=0)
    Z = px.compile(P.standardize)(X)
    assert managed_bytes(client) >= 2 * 8_000_000  # X and Z, 8 MB each
    del X, Z
    assert bytes_after_release(client, base) <= base


def unused_reduction(X):
    X.sum(axis=0)  # asked for, never used: computed or not, it must not keep X alive
    return 1


def test_a_reduction_never_used_does_not_keep_tiles_alive(rt):
    from phylanx_py.runtime.tiled import batch

    client = rt.executor.client
    gc.collect()
    base = managed_bytes(client)
    X = px.tiled.random((100_000, 5), tiles=(4, 1), seed=0)
    assert px.compile(unused_reduction)(X) == 1
    assert not any(d.ev is not None for items in batch._PENDING.values() for d in items)
    del X
    assert bytes_after_release(client, base) <= base


def test_first_rows_gather_only_what_is_asked(rt):
    X = px.tiled.random((10_000, 4), tiles=(8, 1), seed=1)
    first = X[:5]
    assert first.tiles == (1, 1)
    np.testing.assert_array_equal(np.asarray(first), np.random.Generator(np.random.PCG64(1)).random((10_000, 4))[:5])
    assert "TiledArray(shape=(10000, 4), dtype=float64, tiles=(8, 1), placement=" in repr(X)


# ---- creation -------------------------------------------------------------------------------------------------
def test_random_is_the_same_for_every_tiling_of_a_seed(rt):
    want = np.random.Generator(np.random.PCG64(7)).random((30, 8))
    for tiles in [(1, 1), (4, 1), (3, 3), ((10, 5, 15), (2, 6))]:
        np.testing.assert_array_equal(np.asarray(px.tiled.random((30, 8), tiles=tiles, seed=7)), want)
    a = np.asarray(px.tiled.normal((40, 3), tiles=(4, 1), seed=3))
    np.testing.assert_array_equal(a, np.asarray(px.tiled.normal((40, 3), tiles=(4, 1), seed=3)))
    assert not np.array_equal(a, np.asarray(px.tiled.normal((40, 3), tiles=(4, 1), seed=4)))


def test_constructors_and_boundaries(rt):
    z = px.tiled.zeros((10, 4), tiles=(3, 2))
    assert z.boundaries == ((0, 4, 7, 10), (0, 2, 4)) and z.tiles == (3, 2)
    np.testing.assert_array_equal(np.asarray(z), np.zeros((10, 4)))
    np.testing.assert_array_equal(np.asarray(px.tiled.ones(7, tiles=3, dtype=np.int32)), np.ones(7, np.int32))
    np.testing.assert_array_equal(np.asarray(px.tiled.full((5, 2), 2.5, tiles=(2,))), np.full((5, 2), 2.5))
    np.testing.assert_array_equal(np.asarray(px.tiled.arange(3, 50, 4, tiles=5)), np.arange(3, 50, 4))
    with pytest.raises(ValueError, match="must be non-negative and add up to its length 10"):
        px.tiled.zeros((10,), tiles=((3, 3),))


def test_from_dask_and_to_dask_share_the_tiles(rt):
    d = da.arange(24.0, chunks=5).reshape(4, 6).rechunk((2, 3))
    t = px.tiled.from_dask(d)
    assert t.boundaries == ((0, 2, 4), (0, 3, 6))
    np.testing.assert_array_equal(np.asarray(t * 2), d.compute() * 2)
    back = t.to_dask()
    assert set(back.__dask_graph__().values()) == set(t.futures.flat)  # the same futures: no copy
    np.testing.assert_array_equal(back.sum(axis=0).compute(), d.compute().sum(axis=0))


def test_from_npy_and_from_csv_read_per_tile(rt, tmp_path):
    a = np.random.default_rng(8).standard_normal((101, 3))
    np.save(tmp_path / "a.npy", a)
    t = px.tiled.from_npy(tmp_path / "a.npy", tiles=(4, 1))
    np.testing.assert_array_equal(np.asarray(t), a)
    np.savetxt(tmp_path / "a.csv", a, delimiter=",", header="x,y,z", comments="")
    c = px.tiled.from_csv(tmp_path / "a.csv", tiles=5, skip_header=1)
    assert c.tiles == (5, 1) and c.shape == (101, 3)
    np.testing.assert_allclose(np.asarray(c), a, rtol=1e-15)


# ---- tile rules, one expression at a time, against NumPy -------------------------------------------------------
RNG = np.random.default_rng(9)
XN = RNG.random((37, 6))
VN = RNG.random(37)
WN = RNG.random(6)
EXPRESSIONS = {
    "add scalar": lambda X, v: X + 1,
    "chain": lambda X, v: np.exp(-X * X) * np.sin(X) + 2 * X - 1,
    "row broadcast": lambda X, v: X - WN,
    "column broadcast": lambda X, v: X * v[:, None],
    "compare and where": lambda X, v: np.where(X > 0.5, X, 0.0),
    "clip": lambda X, v: np.clip(X, 0.2, 0.8),
    "int division": lambda X, v: (X * 10).astype(np.int64) // 3,
    "sum": lambda X, v: X.sum(),
    "sum axis 0": lambda X, v: X.sum(axis=0),
    "sum axis 1": lambda X, v: X.sum(axis=1),
    "mean keepdims": lambda X, v: X.mean(axis=0, keepdims=True),
    "var ddof": lambda X, v: X.var(axis=0, ddof=1),
    "std": lambda X, v: X.std(),
    "min axis 1": lambda X, v: X.min(axis=1),
    "max": lambda X, v: X.max(),
    "prod axis 0": lambda X, v: (X + 0.5).prod(axis=0),
    "argmin axis 0": lambda X, v: X.argmin(axis=0),
    "argmax axis 1": lambda X, v: X.argmax(axis=1),
    "argmax flat": lambda X, v: X.argmax(),
    "any all": lambda X, v: np.array([(X > 0.99).any(), (X > 0).all()]),
    "any axis 0": lambda X, v: (X > 0.9).any(axis=0),
    "matvec": lambda X, v: X @ WN,
    "transposed matvec": lambda X, v: X.T @ v,
    "gram": lambda X, v: X.T @ X,
    "outer product": lambda X, v: X @ X.T,
    "dot of vectors": lambda X, v: v @ v,
    "np.outer": lambda X, v: np.outer(v, WN),
    "transpose": lambda X, v: X.T,
    "row slice": lambda X, v: X[5:20],
    "column slice": lambda X, v: X[:, 1:4],
    "row index": lambda X, v: X[3],
    "column index": lambda X, v: X[:, 0],
    "negative index slice": lambda X, v: v[-10:-2],
    "boolean mask": lambda X, v: X[v > 0.5],
    "mask then mean": lambda X, v: X[v > 0.5].mean(axis=0),
    "new axes": lambda X, v: X[:, None, :],
    "concatenate rows": lambda X, v: np.concatenate([X, X[:5]], axis=0),
    "concatenate columns": lambda X, v: np.concatenate([X, X], axis=1),
    "stack": lambda X, v: np.stack([v, v * 2]),
    "reshape": lambda X, v: X.reshape(-1),
    "astype": lambda X, v: X.astype(np.float32),
    "norm": lambda X, v: np.linalg.norm(v),
    "swapaxes": lambda X, v: np.swapaxes(X, 0, 1) * 2,
    "moveaxis": lambda X, v: np.moveaxis(X[:, :, None], 2, 0) + 1,
    "expand_dims and squeeze": lambda X, v: np.squeeze(np.expand_dims(X, 1), axis=1) - 1,
    "full_like and ones_like": lambda X, v: np.full_like(X, 3.0) - np.ones_like(X, dtype=np.float32),
    "ravel and shape": lambda X, v: np.ravel(X)[: np.shape(X)[1] * np.ndim(X)],
    "nn.softmax": lambda X, v: nn.softmax(X * 30),
    "nn.log_softmax": lambda X, v: nn.log_softmax(X),
    "nn.logsumexp": lambda X, v: nn.logsumexp(X, axis=1),
    "nn.cross entropy, class indices": lambda X, v: nn.softmax_cross_entropy(X, (v * 6).astype(np.int64)),
    "nn.cross entropy, one-hot": lambda X, v: nn.softmax_cross_entropy(X, np.eye(6)[(VN * 6).astype(np.int64)]),
}


@pytest.mark.parametrize("tiles", [(3, 2), (4, 1)], ids=["grid", "rows"])
@pytest.mark.parametrize("name", EXPRESSIONS)
def test_tile_rule_equals_numpy(rt, name, tiles):
    fn = EXPRESSIONS[name]
    X = px.tiled.from_array(XN, tiles=tiles)
    v = px.tiled.from_array(VN, tiles=tiles[:1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", TileFallbackWarning)
        got = fn(X, v)  # plain Python on TiledArrays: the operators run the same rules
        compiled = px.compile(fn)(X, v)
    want = fn(XN, VN)
    for g in (got, compiled):
        g = np.asarray(g)
        assert g.shape == np.shape(want) and g.dtype == np.asarray(want).dtype
        np.testing.assert_allclose(g, want, rtol=1e-12)


@pytest.mark.parametrize("name,fn", [("cumsum", lambda X: np.cumsum(X, axis=1)),
                                     ("sort", lambda X: np.sort(X + 0)),
                                     ("sort axis 1, stable", lambda X: np.sort(X, axis=1, kind="stable"))])
def test_a_function_along_an_axis_within_each_tile_runs_tile_by_tile(rt, name, fn):
    X = px.tiled.from_array(XN, tiles=(4, 1))  # rows tiled: axis 1 lies within each tile
    with warnings.catch_warnings():
        warnings.simplefilter("error", TileFallbackWarning)
        got, compiled = fn(X), px.compile(fn)(X)
    for g in (got, compiled):
        assert isinstance(g, TiledArray) and g.boundaries == X.boundaries
        np.testing.assert_array_equal(np.asarray(g), fn(XN))
    with pytest.warns(TileFallbackWarning, match="no tile rule for cumsum"):  # along the tiled axis: gathered
        np.testing.assert_array_equal(np.cumsum(X, axis=0), np.cumsum(XN, axis=0))


def test_arguments_a_tile_rule_does_not_cover_reach_numpy_whole(rt):
    """Keywords a reduction's rule does not take go to NumPy's own function on the gathered array, with every
    other argument the user gave (``initial`` was once dropped, and ``ddof`` beside ``where``)."""
    X = px.tiled.from_array(XN, tiles=(4, 1))
    mask = XN > 0.3
    cases = [(lambda X: np.sum(X, initial=2.5), lambda: np.sum(XN, initial=2.5)),
             (lambda X: np.var(X, axis=0, ddof=1, where=mask), lambda: np.var(XN, axis=0, ddof=1, where=mask)),
             (lambda X: np.max(X, axis=1, initial=0.7), lambda: np.max(XN, axis=1, initial=0.7))]
    for fn, want in cases:
        with pytest.warns(TileFallbackWarning):
            got = fn(X)
        np.testing.assert_allclose(got, want(), rtol=1e-12)
    with pytest.warns(TileFallbackWarning):  # a list holding tiled arrays: NumPy's function on the gathered list
        got = px.compile(lambda X: np.sum([X, X]))(X)
    np.testing.assert_allclose(got, np.sum([XN, XN]), rtol=1e-12)


def test_reductions_over_many_tiles_combine_by_a_tree(rt):
    X = px.tiled.from_array(XN, tiles=(20, 1))  # more tiles than one combine task takes (batch.SPLIT_EVERY)

    def stats(X):
        return X.mean(axis=0), X.var(axis=0), X.argmax(axis=0), X.sum()

    got = px.compile(stats)(X)
    for g, w in zip(got, stats(XN)):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_retile_moves_tiles_to_new_boundaries(rt):
    X = px.tiled.from_array(XN, tiles=(4, 1))
    R = X.retile(((10, 27), (2, 4)))
    assert R.boundaries == ((0, 10, 37), (0, 2, 6))
    np.testing.assert_array_equal(np.asarray(R), XN)


def test_collectives(rt):
    tiles = px.tiled.from_array(np.arange(12.0).reshape(4, 3), tiles=(4, 1))
    np.testing.assert_array_equal(px.allreduce(tiles, op="sum"), np.arange(12.0).reshape(4, 3).sum(0, keepdims=True))
    np.testing.assert_array_equal(px.allreduce(tiles, op="max"), [[9.0, 10.0, 11.0]])
    np.testing.assert_array_equal(px.allgather(tiles), np.arange(12.0).reshape(4, 3))
    np.testing.assert_array_equal(px.broadcast(np.ones(3)), np.ones(3))
    with pytest.raises(ValueError, match="op must be one of"):
        px.allreduce(tiles, op="mean")


def test_primitive_without_a_tile_rule_gathers_with_a_warning_naming_the_line(rt):
    X = px.tiled.from_array(XN, tiles=(4, 1))
    with pytest.warns(TileFallbackWarning) as rec:
        got = px.compile(P.sorted_columns)(X)
    msg = str(rec[0].message)
    assert "no tile rule for sort" in msg and "prog_tiled.py:" in msg and "1 tiled input(s)" in msg
    np.testing.assert_array_equal(got, np.sort(XN, axis=0))


def test_failure_in_a_tile_task_names_the_users_line(rt):
    X = px.tiled.from_array(XN, tiles=(4, 1))
    with pytest.raises(px.ExecutionError) as err:
        np.asarray(px.compile(P.mismatched)(X, 0.3, 0.6))
    e = err.value
    assert e.loc.filename.endswith("prog_tiled.py") and e.primitive == "__add"
    assert "operands could not be broadcast together" in str(e)


def test_tiled_arrays_need_a_dask_runtime():
    with px.using(px.runtime.local()):
        with pytest.raises(px.ClusterError, match="tiled arrays live on a Dask cluster"):
            px.tiled.zeros((4,), tiles=2)


# ---- a worker lost during a computation on tiled data -----------------------------------------------------------
@pytest.fixture(scope="module")
def fault_cluster():
    procs = DaskProcesses(n_workers=2)
    yield procs
    procs.stop()


@pytest.mark.parametrize("attempt", range(5))
def test_worker_killed_during_a_tiled_computation(fault_cluster, attempt, monkeypatch):
    monkeypatch.setenv("PHYLANX_SPMD", "0")  # the tile tasks' recovery (test_spmd.py kills a worker mid-segment)
    procs = fault_cluster
    while len(procs.alive_workers()) < 2:
        procs.add_worker()
    procs.wait_for_workers(2)
    f = px.compile(P.lra)
    with px.runtime.dask(procs.address) as runtime, px.using(runtime):
        X = px.tiled.random((200_000, 10), tiles=(4, 1), seed=attempt)
        y = (X[:, 0] > 0.5).astype(np.float64)
        Xn = np.asarray(X)
        fut = f.lazy(X, y, 0.5, 120)
        time.sleep(1.0)
        assert not fut.done(), "the computation must still be running when the worker dies"
        with Client(procs.address) as c:
            victim = sorted(c.nthreads())[attempt % 2]
            pid = c.run(os.getpid, workers=[victim])[victim]
        (proc,) = [w for w in procs.alive_workers() if w.pid == pid]
        procs.kill_worker(proc)
        w = fut.result(timeout=240)
    np.testing.assert_allclose(w, P.lra(Xn, (Xn[:, 0] > 0.5).astype(float), 0.5, 120), rtol=1e-10)
