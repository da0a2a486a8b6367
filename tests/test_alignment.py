"""Every array that crosses Dask is handed on aligned (runtime/alignment.py): results to the user, a task's inputs
on a worker, tiles stored on and read by the workers, an SPMD loop's outputs. Dask deserializes an array as a view
into its receive buffer, at any byte; NumPy then leaves BLAS (10x slower products). Real worker processes."""
from __future__ import annotations

import numpy as np
import pytest
from cluster import current_dask_runtime
from phylanx_py.runtime.alignment import ALIGNMENT, aligned, aligned_values
from phylanx_py.runtime.dask_runtime import apply_site
from phylanx_py.runtime.tiled.runner import run_program

import phylanx_py as px

pytestmark = pytest.mark.timeout(300)


def _unaligned(n=1000, offset=3):
    """float64 data starting at an odd byte, as Dask's deserialization can give it."""
    raw = np.zeros(n * 8 + 64, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    a = raw[start:start + n * 8].view(np.float64)
    a[:] = np.arange(n)
    assert not a.flags.aligned
    return a


def _is_aligned(a):
    return type(a) is np.ndarray and a.flags.aligned


def _probe(x):
    return bool(x.flags.aligned), int(x.ctypes.data % ALIGNMENT)


def test_an_unaligned_array_is_copied_to_64_bytes_and_an_aligned_one_passed_on():
    a = _unaligned()
    b = aligned(a)
    assert b.flags.aligned and b.ctypes.data % ALIGNMENT == 0 and b.flags.c_contiguous
    np.testing.assert_array_equal(b, np.arange(1000.0))
    c = np.arange(10.0)
    assert aligned(c) is c
    out = aligned_values({"w": a, "pair": (a, 3), "list": [a]})
    assert all(_is_aligned(v) for v in (out["w"], out["pair"][0], out["list"][0])) and out["pair"][1] == 3


def test_what_a_worker_runs_gets_aligned_inputs():
    """apply_site (a primitive's task) and run_program (a tile's task) on an unaligned receive buffer."""
    assert apply_site(_probe, (_unaligned(),), {}) == (True, 0)
    assert run_program([(_probe, [("L", 0)], None, None, "probe")], ("N", 0), _unaligned()) == (True, 0)


@pytest.fixture(scope="module")
def rt():
    with current_dask_runtime(inline_elements=0) as runtime:
        yield runtime


def double(X):
    return X * 2.0


def lra(X, y, iterations):
    w = np.zeros(X.shape[1])
    for _ in range(iterations):
        w = w - 0.1 * (X.T @ (1.0 / (1.0 + np.exp(-(X @ w))) - y)) / X.shape[0]
    return w


SHAPES = [(20_001, 3), (50_000, 20), (7, 5), (100_003,)]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_compiled_result_from_the_workers_is_aligned(rt, shape):
    X = np.random.default_rng(0).random(shape)
    got = px.compile(double)(X)
    assert _is_aligned(got) and got.ctypes.data % 8 == 0
    np.testing.assert_array_equal(got, X * 2.0)


def test_tiles_are_stored_aligned_and_results_gathered_aligned(rt):
    def stored_on(dask_worker):  # a local function: pickled by value to the workers, which cannot import tests
        return [(bool(v.flags.aligned), str(k)) for k, v in dask_worker.data.items() if hasattr(v, "flags")]

    X = np.random.default_rng(1).random((40_001, 20))
    t = px.tiled.from_array(X, tiles=(4, 1)).persist(wait=True)
    stored = [s for found in rt.executor.client.run(stored_on).values() for s in found]
    assert stored and all(ok for ok, _ in stored), stored
    for got in (t.to_numpy(), t[5:9].to_numpy(), t.sum(axis=0), np.asarray(t * 1.5)):
        assert _is_aligned(got)
    np.testing.assert_allclose(t.sum(axis=0), X.sum(axis=0), rtol=1e-12)


def test_an_spmd_loop_result_is_aligned(rt):
    rng = np.random.default_rng(2)
    X = rng.random((20_000, 20))
    y = (X.sum(axis=1) > 10).astype(float)
    f = px.compile(lra)
    w = f(px.tiled.from_array(X, tiles=(2, 1)), px.tiled.from_array(y, tiles=(2,)), 3)
    assert "SPMD" in f.explain(), f.explain()
    assert _is_aligned(w)
    np.testing.assert_allclose(w, lra(X, y, 3), rtol=1e-10)
