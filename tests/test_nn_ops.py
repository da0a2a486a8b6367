"""nn.softmax / log_softmax / logsumexp / softmax_cross_entropy: the hand-written Numba kernels against the NumPy
reference kernels, the registry's choice between them, compiled against plain calls."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import check
from phylanx_py.primitives import choose, lookup

import phylanx_py as px
from phylanx_py import nn

RNG = np.random.default_rng(0)
NAMES = ["softmax", "log_softmax", "logsumexp"]


def _inputs(dtype):
    x = (RNG.standard_normal((3000, 12)) * 40).astype(dtype)
    x[0] = -np.inf          # a row of -inf: softmax NaN, logsumexp -inf (as scipy)
    x[1, 3] = np.inf        # +inf in a row
    x[2, 5] = np.nan        # NaN in a row
    x[3] = 700.0            # exp would overflow without the maximum subtracted
    return x


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", NAMES)
def test_numba_kernel_equals_the_numpy_reference(name, dtype):
    prim = lookup(f"nn.{name}")
    x = _inputs(dtype)
    assert choose(prim, (x,), {}) is prim.numba_kernel
    with np.errstate(all="ignore"):
        want = prim.kernel(x)
    got = prim.numba_kernel(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10)  # NaN positions must match too


@pytest.mark.parametrize(("args", "kwargs"), [
    ((np.ones((10, 10)),), {}),                       # small: NumPy is faster
    ((np.ones(100_000),), {}),                        # 1-D
    ((np.ones((4000, 10)),), {"axis": 0}),            # not the last axis
    ((np.ones((4000, 10), dtype=np.int64),), {}),     # integers
])
@pytest.mark.parametrize("name", NAMES)
def test_registry_keeps_the_reference_where_the_kernel_does_not_apply(name, args, kwargs):
    prim = lookup(f"nn.{name}")
    assert choose(prim, args, kwargs) is prim.kernel


def test_logsumexp_keepdims_takes_the_reference():
    prim = lookup("nn.logsumexp")
    assert choose(prim, (np.ones((4000, 10)),), {"keepdims": True}) is prim.kernel


def test_reference_semantics():
    x = np.array([[1.0, 2.0, 3.0], [-np.inf, -np.inf, -np.inf], [1000.0, 1000.0, 1000.0]])
    np.testing.assert_allclose(nn.logsumexp(x), [np.log(np.exp(1) + np.exp(2) + np.exp(3)), -np.inf,
                                                 1000 + np.log(3)])
    np.testing.assert_allclose(nn.softmax(x[:1]), np.exp(x[:1]) / np.exp(x[:1]).sum())
    assert nn.logsumexp(np.array([1.0, 2.0]), axis=None) == pytest.approx(np.log(np.e + np.e ** 2))


def losses(z, y, onehot):
    return (nn.softmax_cross_entropy(z, y), nn.softmax_cross_entropy(z, onehot), nn.softmax(z),
            nn.log_softmax(z), nn.logsumexp(z, axis=1))


def test_compiled_equals_plain():
    z = RNG.standard_normal((5000, 10)) * 5
    y = RNG.integers(0, 10, 5000)
    got = px.compile(losses)(z, y, np.eye(10)[y])  # large inputs: the Numba kernels
    want = losses(z, y, np.eye(10)[y])  # plain: the NumPy kernels
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w)
        # summation order differs (sequential vs pairwise): log-probabilities near 0 differ by ~1e-15
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)
    check(losses, z[:10], y[:10], np.eye(10)[y[:10]])  # small inputs: the same kernels, the same numbers


def test_cross_entropy_of_labels_that_do_not_match_is_a_clear_error():
    with pytest.raises(ValueError, match=r"labels of shape \(3, 2\) do not match logits of shape \(3, 4\)"):
        nn.softmax_cross_entropy(np.zeros((3, 4)), np.zeros((3, 2)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["softmax_cross_entropy", "softmax_cross_entropy_grad"])
def test_cross_entropy_kernels_equal_the_numpy_reference(name, dtype):
    """One-pass Numba kernels of the loss and of its gradient, chosen for any size of 2-D float logits against
    integer class indices (negative ones as NumPy reads them), with the reference's infinities and NaNs."""
    prim = lookup(f"nn.{name}")
    for x in (_inputs(dtype), (RNG.standard_normal((64, 10)) * 3).astype(dtype)):
        y = RNG.integers(-x.shape[1], x.shape[1], len(x))
        assert choose(prim, (x, y), {}) is prim.numba_kernel
        with np.errstate(all="ignore"):
            want = prim.kernel(x, y)
        got = prim.numba_kernel(x, y)
        assert type(got) is type(want) and np.shape(got) == np.shape(want) and got.dtype == want.dtype
        tol = 1e-12 if dtype == np.float64 else 2e-5
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 1e-2)  # NaN positions must match too


@pytest.mark.parametrize("name", ["softmax_cross_entropy", "softmax_cross_entropy_grad"])
def test_cross_entropy_kernels_leave_the_rest_to_the_reference(name):
    """One-hot labels, float labels, 1-D logits and empty batches take the NumPy kernel; an index out of range
    raises NumPy's IndexError from the Numba kernel too."""
    prim = lookup(f"nn.{name}")
    x = np.ones((8, 4))
    for args in ((x, np.eye(4)[np.arange(8) % 4]), (x, np.zeros(8)), (x[:0], np.zeros(0, np.int64)),
                 (x.astype(np.int64), np.zeros(8, np.int64)), (x, np.zeros(7, np.int64))):
        assert choose(prim, args, {}) is prim.kernel
    with pytest.raises(IndexError, match="out of bounds"):
        prim.numba_kernel(x, np.array([0, 1, 2, 3, 4, 0, 0, 0]))


def test_cross_entropy_gradient_is_one_call_in_the_tree():
    """The loss's gradient is one nn.softmax_cross_entropy_grad call (no softmax and one-hot chain), and equals
    the softmax minus the one-hot rows over n."""
    z = RNG.standard_normal((64, 10)).astype(np.float32)
    y = RNG.integers(0, 10, 64)
    g = px.grad(nn.softmax_cross_entropy)
    got = g(z, y)
    text = str(g.tree)
    assert text.count("nn.softmax_cross_entropy_grad@") == 1 and "nn.softmax@" not in text
    assert got.dtype == np.float32
    want = (nn.softmax(z.astype(np.float64)) - np.eye(10)[y]) / 64
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
