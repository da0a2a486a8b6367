"""Row-blocked execution of tile programs (runtime/tiled/blocked.py), in process: which programs qualify, and
blocked results equal to the program run as written."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from phylanx_py.primitives.fused_reduce import fused_sum
from phylanx_py.runtime.tiled import blocked, runner, tasks

RNG = np.random.default_rng(0)
X = RNG.standard_normal((5000, 6))
Y = (RNG.random(5000) > 0.5).astype(float)
W = RNG.standard_normal(6)
C = X[:4, :2].copy()


def L(i):
    return ("L", i)


def N(j):
    return ("N", j)


def K(v):
    return ("C", v)


def op(fn, *args, **kwargs):
    return (fn, list(args), kwargs, None, "test")


LRA = [op(np.matmul, L(0), K(W)), op(np.negative, N(0)), op(np.exp, N(1)), op(np.add, K(1.0), N(2)),
       op(np.true_divide, K(1.0), N(3)), op(np.subtract, N(4), L(1)), op(np.transpose, L(0), K((1, 0))),
       op(np.matmul, N(6), N(5))]
SPEC = ("operator.pow", ("operator.sub", ("arg", 0), ("arg", 1)), ("const", 2))
KMEANS = [op(functools.partial(fused_sum, SPEC, (None, None, None), 2), K(None), K(None)),
          op(np.argmin, N(0), axis=1)]
KMEANS_PARTIALS = [op(np.equal, N(1), K(j)) for j in range(4)] + \
    [op(tasks.masked_rows, L(0), N(2 + j)) for j in range(4)] + \
    [op(tasks.partial, K("mean"), N(6 + j), K((0,)), K((0, 0)), K((5000, 2)), K(None)) for j in range(4)] + \
    [op(tasks.partial, K("argmin"), L(0), K((0,)), K((100, 0)), K((5100, 2)), K(None))] + \
    [op(tasks.pack, *[N(10 + j) for j in range(5)])]


def _kmeans_ops():
    """Distances (fused chain + sum over centroids' coordinates), labels, then the batched partials of four masked
    means and an argmin over rows, packed: what a k-means iteration's tile program looks like."""
    return [op(KMEANS[0][0], L(1), K(C[None, :, :])), op(np.argmin, N(0), axis=1)] + KMEANS_PARTIALS


def _both(ops, out, leaves, monkeypatch):
    assert blocked.plan(ops, out, leaves) is not None, "this program should run on row blocks"
    got = runner.run_program(ops, out, *leaves)
    monkeypatch.setattr(runner, "BLOCKED", False)
    want = runner.run_program(ops, out, *leaves)
    return got, want


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(blocked, "BLOCK_BYTES", 4096)


def test_lra_step_runs_on_row_blocks(monkeypatch):
    got, want = _both(LRA, N(7), [X, Y], monkeypatch)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(want, X.T @ (1 / (1 + np.exp(-(X @ W))) - Y), rtol=1e-12)


def test_kmeans_partials_run_on_row_blocks(monkeypatch):
    X2 = X[:, :2].copy()
    ops = _kmeans_ops()
    got, want = _both(ops, N(len(ops) - 1), [X2, X2[:, None, :]], monkeypatch)
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("name, ops, out", [
    ("result is row-aligned", LRA[:6], N(5)),
    ("sum over another axis", [op(tasks.partial, K("sum"), L(0), K((1,)), K(None), K(None), K(None))], N(0)),
    ("reduction over rows with a negative axis", [op(np.sum, L(0), axis=-2), op(np.add, N(0), K(1.0))], N(1)),
    ("unknown function", [op(np.sort, L(0)), op(np.matmul, K(W[:5000 % 6 or 6]), N(0))], N(1)),
])
def test_programs_that_are_not_row_sums_run_as_written(name, ops, out):
    assert blocked.plan(ops, out, [X, Y]) is None


def test_row_aligned_constants_disable_blocking():
    ops = [op(np.subtract, L(0), K(X)), op(np.transpose, N(0), K((1, 0))), op(np.matmul, N(1), L(1))]
    assert blocked.plan(ops, N(2), [X, Y]) is None


@pytest.mark.parametrize("labels", [RNG.integers(0, 5, 5000), RNG.integers(-2, 3, 5000),
                                    RNG.integers(0, 5, 5000).astype(float), np.zeros(0, np.int64)],
                         ids=["non-negative ints", "negative ints", "floats", "empty"])
def test_grouped_masked_sums_equal_one_mask_per_key(labels):
    from phylanx_py.runtime.tiled.optimize import group_sums, pick_group

    x = X[:len(labels)]
    groups = group_sums(x, labels, (0, 1, 4, 7))
    for key in (0, 1, 4, 7):
        s, n = pick_group(groups, key, "mean", None)
        rows = x[labels == key]
        np.testing.assert_allclose(s, rows.sum(axis=0, keepdims=True), rtol=1e-12, atol=1e-12)
        assert n == rows.shape[0]


def test_masked_means_in_one_program_become_one_grouped_pass():
    from phylanx_py.runtime.tiled.optimize import optimize

    ops = [op(np.argmin, L(0), axis=1)] + [op(np.equal, N(0), K(j)) for j in range(3)] + \
        [op(tasks.masked_rows, L(1), N(1 + j)) for j in range(3)] + \
        [op(tasks.partial, K("mean"), N(4 + j), K((0,)), K(None), K(None), K(None)) for j in range(3)] + \
        [op(tasks.pack, N(7), N(8), N(9))]
    new, out = optimize(ops, N(10))
    names = [getattr(o[0], "__name__", "") for o in new]
    assert names.count("group_sums") == 1 and "masked_rows" not in names and "equal" not in names
    D = RNG.random((300, 3))
    got = runner.run_program(runner.Code(new), out, D, X[:300])
    want = runner.run_program(ops, N(10), D, X[:300])
    for (gs, gn), (ws, wn) in zip(got, want):
        np.testing.assert_allclose(gs, ws, rtol=1e-12)
        assert gn == wn
