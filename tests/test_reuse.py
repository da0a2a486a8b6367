"""Buffer reuse (runtime/reuse.py): an element-wise call writes into a fresh operand nothing else reads, and only
then. The answers stay the plain function's; arrays the caller holds, views and arrays held twice are never
written; the result's dtype and shape decide as NumPy's rules do."""
from __future__ import annotations

import numpy as np
import phylanx_py.primitives.fused as F
import pytest
from phylanx_py.runtime import reuse

import phylanx_py as px
from phylanx_py import ir


def fresh(shape, dtype=np.float64):
    return np.ones(shape, dtype)


# ---- the run-time test, on the pattern generated code has (a temporary held by one local) ------------------
def test_a_fresh_temporary_takes_the_result():
    t = fresh((4, 3))
    assert reuse.into(np.add, t, np.ones(3), True)
    assert reuse.into(np.add, t, 2.0, True) and reuse.into(np.subtract, t, 2.0, False)
    assert reuse.into1(np.exp, t) and reuse.sole(t)


def test_an_array_held_elsewhere_or_a_view_is_not_written():
    t = fresh((4, 3))
    held = [t]
    assert not reuse.into(np.add, t, 1.0, True) and not reuse.sole(t)
    held.clear()
    v = t[1:]  # a view holds its base
    assert not reuse.into(np.add, t, 1.0, True)
    assert not reuse.into(np.add, v, 1.0, True)  # and a view's memory is its base's
    del v
    frozen = fresh(3)
    frozen.flags.writeable = False
    assert not reuse.into(np.add, frozen, 1.0, True)


def test_the_result_must_have_the_operands_dtype_and_shape():
    t32, i = fresh((4, 3), np.float32), fresh((4, 3), np.int32)
    assert not reuse.into(np.add, t32, np.ones(3), True)  # float32 + float64 array: float64
    assert not reuse.into(np.add, t32, np.float64(1.0), True)  # a NumPy scalar is not weak
    assert reuse.into(np.add, t32, 1.0, True)  # a Python float is (NumPy 2): float32
    assert not reuse.into(np.add, i, 0.5, True)  # int32 + Python float: float64
    assert not reuse.into(np.greater, t32, 0.0, True)  # a comparison gives bools
    assert not reuse.into1(np.sqrt, i)  # float64 from int32
    assert not reuse.into(np.add, t32, fresh((2, 4, 3), np.float32), True)  # the result would be larger
    assert not reuse.into(np.add, t32, np.ma.ones(3, np.float32), True)  # a subclass decides for itself


# ---- compiled functions ---------------------------------------------------------------------------------------
def product_plus(a, b, c):
    return a @ b + c


def product_plus_mixed(a, b, c):
    return a @ b + c  # float32 product, float64 c: a float64 result (no writing into the float32 product)


def same_array_plus(x):
    return np.asarray(x) + 1.0  # asarray returns x itself: the caller's array, never written


def contiguous_times(x):
    return np.ascontiguousarray(x) * 2.0


def view_plus(x):
    return x.reshape(-1) + 1.0


def bias_relu(a, b, c):
    return np.maximum(np.exp(a @ b) - c, 0.0)


def group_over_product(a, b, x):
    return np.exp(-(a @ b)) * 2.0 + 1.0 - x / 3.0 + x * x


@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_reusing_products_gives_the_plain_answer(dt):
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(s).astype(dt) for s in ((6, 5), (5, 4), (4,)))
    for fn in (product_plus, bias_relu):
        np.testing.assert_allclose(px.compile(fn)(a, b, c), fn(a, b, c), rtol=1e-5)
        assert px.compile(fn)(a, b, c).dtype == fn(a, b, c).dtype
    got = px.compile(product_plus_mixed)(a.astype(np.float32), b.astype(np.float32), c.astype(np.float64))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, product_plus_mixed(a.astype(np.float32), b.astype(np.float32), c), rtol=1e-6)


@pytest.mark.parametrize("fn", [same_array_plus, contiguous_times, view_plus])
def test_the_callers_arrays_are_never_written(fn):
    x = np.arange(12.0).reshape(3, 4)
    before = x.copy()
    np.testing.assert_array_equal(px.compile(fn)(x), fn(before))
    np.testing.assert_array_equal(x, before)


def test_generated_code_tests_the_fresh_operand():
    src = px.compile(product_plus).source
    assert "out=__pxt" in src and "__pxr_into(" in src


def test_a_fused_groups_kernel_makes_a_new_array_not_its_fresh_product(monkeypatch):
    """The group's leaf is the product's fresh array, yet the kernel is not given it as its output: NumPy runs a
    Numba ufunc whose output is one of its inputs 5-6x slower than into a new array (fused.fused_elementwise)."""
    seen = []
    real = F._run

    def run(kernel, arrays, out=None):
        seen.append(out)
        return real(kernel, arrays, out)

    monkeypatch.setattr(F, "_run", run)
    rng = np.random.default_rng(1)
    a, b, x = rng.standard_normal((200, 50)), rng.standard_normal((50, 100)), rng.standard_normal((200, 100))
    f = px.compile(group_over_product)
    assert [n for n in ir.walk(f.tree) if isinstance(n, ir.Fused)]
    np.testing.assert_allclose(f(a, b, x), group_over_product(a, b, x), rtol=1e-12)
    F.wait_for_builds()
    np.testing.assert_allclose(f(a, b, x), group_over_product(a, b, x), rtol=1e-12)
    assert seen and all(out is None for out in seen)


def sum_over_axes(a):
    return np.sum(a, axis=(0, 1)) + np.sum(a * 2.0, axis=(1,))


def test_a_tuple_of_constants_is_one_constant_and_keeps_the_call_inline():
    a = np.arange(24.0).reshape(2, 3, 4)
    f = px.compile(sum_over_axes)
    np.testing.assert_array_equal(f(a), sum_over_axes(a))
    lines = [ln for ln in f.source.splitlines() if "np.sum" in ln or "axis=" in ln]
    assert lines and not any("axis=__pxt" in ln for ln in lines)


# ---- the gradient's groups take their operand as a subexpression ----------------------------------------------
def relu_mlp_loss(params, X, Y):
    h = np.maximum(X @ params["W1"] + params["b1"], 0.0)
    h = np.maximum(h @ params["W2"] + params["b2"], 0.0)
    out = h @ params["W3"]
    return np.mean((out - Y) ** 2)


def test_a_gradient_group_reads_its_cotangent_product_as_a_subexpression():
    rng = np.random.default_rng(2)
    params = {"W1": rng.standard_normal((30, 200)) * 0.1, "b1": rng.standard_normal(200) * 0.1,
              "W2": rng.standard_normal((200, 200)) * 0.1, "b2": rng.standard_normal(200) * 0.1,
              "W3": rng.standard_normal((200, 3)) * 0.1}
    X, Y = rng.standard_normal((100, 30)), rng.standard_normal((100, 3))
    g = px.grad(relu_mlp_loss)
    grads = g(params, X, Y)
    groups = [n for n in ir.walk(g.tree) if isinstance(n, ir.Fused)]
    assert groups and any(isinstance(leaf, ir.Call) and leaf.prim == "matmul" for n in groups for leaf in n.leaves)
    # against finite differences of the plain function, one coordinate per parameter
    for k in params:
        e = np.zeros_like(params[k])
        e.flat[3] = 1e-6
        up = relu_mlp_loss({**params, k: params[k] + e}, X, Y)
        down = relu_mlp_loss({**params, k: params[k] - e}, X, Y)
        assert abs(grads[k].flat[3] - (up - down) / 2e-6) < 1e-6 * max(1.0, abs(grads[k].flat[3])) + 1e-7


def group_with_scalar_call(x, y):
    return np.exp(-x) * 2.0 + 1.0 - x / len(y) + x * x  # len(y): a fresh Python int among the group's leaves


def test_a_scalar_result_among_a_groups_leaves_is_left_alone():
    x, y = np.linspace(0.0, 1.0, 20_000), [1, 2, 3]
    np.testing.assert_allclose(px.compile(group_with_scalar_call)(x, y), group_with_scalar_call(x, y), rtol=1e-12)


# ---- from a review (each was a wrong answer, error or layout against the plain function) ---------------------
def _pow_half(a):
    return np.copy(a) ** 0.5


def _pow_minus_one(a):
    return np.copy(a) ** -1


def _transposed_plus(a, b):
    return (np.copy(a.T) + b).view(np.complex128)


def _fused_overflow(a, b):
    return ((np.copy(a) * 1e300 * b + b) * b - b) * b


def test_a_power_of_a_temporary_is_ndarray_pow_not_np_power(monkeypatch):
    # ndarray.__pow__ takes np.sqrt for ** 0.5 and np.reciprocal for ** -1: complex edge values differ from np.power
    monkeypatch.setenv("PHYLANX_FLOOR", "0")
    a = np.full(5000, -1.0 + 0j)
    a[0], a[1] = complex(np.inf, 0.0), 1e300 + 1e300j
    with np.errstate(all="ignore"):
        for fn in (_pow_half, _pow_minus_one):
            np.testing.assert_array_equal(px.compile(fn)(a), fn(a))


def test_a_result_keeps_numpys_memory_order(monkeypatch):
    # an F-ordered temporary is not a donor: NumPy's result of it and a C-ordered operand is C-ordered
    monkeypatch.setenv("PHYLANX_FLOOR", "0")
    a, b = np.arange(5000.0).reshape(50, 100), np.ones((100, 50))
    got, want = px.compile(_transposed_plus)(a, b), _transposed_plus(a, b)
    np.testing.assert_array_equal(got, want)
    assert got.strides == want.strides


def test_a_fused_kernel_that_raises_after_its_loop_does_not_write_into_its_operand(monkeypatch):
    # the group's kernel writes a new array: its reference reruns on the operand as it was, and raises
    monkeypatch.setenv("PHYLANX_FLOOR", "0")
    n = 20000
    a = np.full(n, 1e10)
    f = px.compile(_fused_overflow)
    f(a, np.full(n, 1e-300))
    F.wait_for_builds()
    with np.errstate(over="raise"), pytest.raises(px.ExecutionError) as e:
        f(a, np.full(n, 2.0))
    assert isinstance(e.value.__cause__, FloatingPointError)
