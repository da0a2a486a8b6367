"""An element-wise chain feeding ``sum``: one compiled pass, the broadcast intermediate never materialised,
same answers as NumPy (to float tolerance: a loop sums in another order than NumPy's pairwise sum)."""
from __future__ import annotations

import numpy as np
import prog_reduce as P
import pytest
from helpers import source_position
from phylanx_py.primitives import fused_reduce as F

import phylanx_py as px
from phylanx_py import ir


@pytest.fixture
def kernel_runs(monkeypatch):
    """Counts the sums computed by a compiled kernel (not by the NumPy reference)."""
    used = []
    real = F._reduce_kernel

    def spy(spec, axis, args):
        found = real(spec, axis, args)
        used.append(found is not None)
        return found

    monkeypatch.setattr(F, "_reduce_kernel", spy)
    return used


def _same(got, want, rtol=1e-12):
    assert type(got) is type(want)
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            _same(g, w, rtol)
        return
    if isinstance(want, np.ndarray) or isinstance(want, np.generic):
        assert np.asarray(got).dtype == np.asarray(want).dtype and np.shape(got) == np.shape(want)
        if np.asarray(want).dtype.kind in "fc":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=0)
        else:
            np.testing.assert_array_equal(got, want)
    else:
        assert got == want


def test_chain_and_sum_become_one_node():
    tree = px.compile(P.kmeans_distances).tree
    (node,) = [n for n in ir.walk(tree) if isinstance(n, ir.Fused)]
    assert node.reduce == ("sum", 2)
    assert node.spec == ("operator.pow", ("operator.sub", ("arg", 0), ("arg", 1)), ("const", 2))
    assert "fused_sum@" in str(tree)
    assert not any(isinstance(n, ir.Fused) for n in ir.walk(px.compile(P.kmeans_distances, fuse=False).tree))


CASES = [
    (P.kmeans_distances, lambda r: (r.standard_normal((60_000, 2)), r.standard_normal((8, 2)))),
    (P.sum_of_squares, lambda r: (r.standard_normal((300, 200)), 0.25)),
    (P.np_sum_axis0, lambda r: (r.standard_normal((400, 100)),)),
    (P.np_sum_axis1, lambda r: (r.standard_normal((400, 100)),)),
    (P.np_sum_all, lambda r: (r.standard_normal((400, 100)),)),
    (P.np_sum_axis0, lambda r: (r.standard_normal(50_000),)),
    (P.np_sum_axis1, lambda r: (r.standard_normal((40, 50, 30)).astype(np.float32),)),
    (P.method_sum_negative_axis, lambda r: (r.standard_normal((300, 100)), r.standard_normal(100))),
    (P.int_chain, lambda r: (r.integers(-50, 50, (500, 40), dtype=np.int32), r.integers(-5, 5, 40, dtype=np.int32))),
]


@pytest.mark.parametrize(("fn", "make"), CASES, ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)])
def test_fused_sum_equals_unfused_and_plain(fn, make, kernel_runs):
    args = make(np.random.default_rng(0))
    want = fn(*args)
    rtol = 1e-5 if any(getattr(a, "dtype", None) == np.float32 for a in args) else 1e-11
    _same(px.compile(fn)(*args), want, rtol)
    assert kernel_runs and all(kernel_runs), "the compiled kernel computed the sum"
    _same(px.compile(fn, fuse=False)(*args), want, rtol)


def test_the_kernels_split_over_threads_run_without_the_gil():
    """Fused sums, distance-argmins and row products run their row blocks on parallel threads (fused._map_blocks):
    a kernel holding the GIL ran them one after another (a fused sum of 4e6 elements took 31 ms on one thread and
    on two). Every such kernel made for the cases above is compiled with ``nogil``."""
    from phylanx_py.primitives import rowdot

    for fn, make in CASES:
        px.compile(fn)(*make(np.random.default_rng(0)))
    kernels = [k for cache in (F._reduce_kernels, F._argmin_kernels, rowdot._kernels) for k in cache.values() if k]
    assert F._reduce_kernels and all(k for k in F._reduce_kernels.values())
    assert kernels and all(k.targetoptions.get("nogil") for k in kernels), [
        k for k in kernels if not k.targetoptions.get("nogil")]


def test_small_inputs_sum_with_numpy(kernel_runs):
    x = np.arange(12.0).reshape(3, 4)
    _same(px.compile(P.np_sum_axis1)(x), P.np_sum_axis1(x))
    assert not kernel_runs  # op by op: the fused primitive is not even called for small values


def test_an_axis_known_only_at_run_time_is_not_fused_with_the_sum():
    f = px.compile(P.sum_variable_axis)
    assert not any(isinstance(n, ir.Fused) and n.reduce for n in ir.walk(f.tree))
    x = np.random.default_rng(1).standard_normal((300, 100))
    _same(f(x, 1), P.sum_variable_axis(x, 1))


def test_a_bad_axis_is_numpys_error_at_the_sum():
    x = np.ones((300, 100))
    with pytest.raises(px.ExecutionError) as err:
        px.compile(P.bad_axis)(x)
    line, col = source_position(P.bad_axis, "(x * 2.0 + 1.0).sum(axis=3)")
    assert (err.value.lineno, err.value.col) == (line, col)
    assert type(err.value.__cause__).__name__ == "AxisError"
    with pytest.raises(px.ExecutionError) as unfused:
        px.compile(P.bad_axis, fuse=False)(x)
    assert str(unfused.value.__cause__) == str(err.value.__cause__)


@pytest.mark.parametrize("d", [2, 3, 7])
@pytest.mark.parametrize("case", ["plain", "nan in X", "nan in C", "ties", "inf"])
def test_the_distance_argmin_kernel_picks_as_numpy(case, d):
    """The compiled distance argmin (no branch per candidate; a row with a NaN sum scanned again; a summed axis of
    up to 4 written out, a longer one a loop) picks NumPy's index: the first minimum, or the first NaN."""
    r = np.random.default_rng(3)
    X, C = r.standard_normal((50_000, d)), r.standard_normal((6, d))
    if case == "nan in X":
        X[[5, 900, 49_999], [0, d - 1, 1]] = np.nan
    elif case == "nan in C":
        C[2, 0] = C[4, 1] = np.nan
    elif case == "ties":
        C[3] = C[1]
    elif case == "inf":
        X[10, 0] = np.inf
        C[0, 0] = np.inf
    spec = ("operator.pow", ("operator.sub", ("arg", 0), ("arg", 1)), ("const", 2))
    args = (X[:, None, :], C[None, :, :])
    run = F._argmin_kernel(spec, 2, 1, args)
    assert run is not None
    with np.errstate(invalid="ignore", over="ignore"):
        want = np.argmin(((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2), axis=1)
    np.testing.assert_array_equal(run(), want)
