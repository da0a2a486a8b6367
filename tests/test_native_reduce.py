"""Reductions over axes in native kernels (runtime/native/reductions.py): the plain function's answer and dtype
with the tier off, by default and forced; the kernel's tier in explain(); the plain function's errors."""
from __future__ import annotations

import warnings

import numpy as np
import prog_native_reduce as R
import pytest
from helpers import assert_same

import phylanx_py as px

MODES = ["0", "default", "force"]
RNG = np.random.default_rng(7)


@pytest.fixture(params=MODES)
def mode(request, monkeypatch):
    if request.param == "default":
        monkeypatch.delenv("PHYLANX_NATIVE", raising=False)
    else:
        monkeypatch.setenv("PHYLANX_NATIVE", request.param)
    return request.param


def run_both(fn, *args, calls=2):
    """Compiled and plain on copies, ``calls`` times (the default tier may switch between them); results, their
    dtypes and the inputs after the call must agree. Returns the compiled function."""
    f = px.compile(fn)
    for _ in range(calls):
        copy = lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]  # noqa: E731
        plain_in, comp_in = copy(), copy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = fn(*plain_in)
            got = f(*comp_in)
        assert_same(got, want)
        assert_same(comp_in, plain_in, "inputs after the call")
    return f


def native(f, mode, expected=True):
    """The function's kernel is native when forced (and so expected); never with the tier off."""
    text = f.explain()
    if mode == "force":
        assert ("-> native" in text) == expected, text
    if mode == "0":
        assert "-> native" not in text, text


def bit_equal(got, want):
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.int16])
def test_sums_over_leading_and_trailing_axes(mode, dtype):
    x = (RNG.random((4, 5, 300)) * 100).astype(dtype)
    native(run_both(R.sum_leading, x, np.zeros((4, 300), np.float64)), mode)
    native(run_both(R.sum_trailing_keepdims, x, np.zeros((4, 5), np.float64)), mode)


def test_float32_sums_keep_numpys_order_on_contiguous_arrays(mode):
    """Bit for bit: rows pairwise, leading axes row after row, middle axes one by one in C order."""
    x = (RNG.random((3, 7, 1000)) * 1000).astype(np.float32)
    for fn, args in [(R.sum_leading, (x, np.zeros((3, 1000), np.float32))),
                     (R.sum_trailing_keepdims, (x, np.zeros((3, 7), np.float32)))]:
        f = px.compile(fn)
        for _ in range(2):
            bit_equal(f(*[a.copy() for a in args]), fn(*[a.copy() for a in args]))
        native(f, mode)


def test_the_conv2d_sum_over_middle_axes(mode):
    x = RNG.random((2, 9, 9, 3), dtype=np.float32)
    w = RNG.random((3, 3, 3, 5), dtype=np.float32)
    f = run_both(R.sum_between, x, w, np.zeros((2, 7, 7, 5), np.float32))
    bit_equal([f(x, w, np.zeros((2, 7, 7, 5), np.float32))], [R.sum_between(x, w, np.zeros((2, 7, 7, 5), np.float32))])
    native(f, mode)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.uint8])
def test_max_pool_and_min_max_methods(mode, dtype):
    x = (RNG.random((3, 8, 6, 4)) * 200).astype(dtype)
    native(run_both(R.max_pool, x, np.zeros((3, 4, 3, 4), dtype)), mode)
    y = x[:, :, :, 0].copy()
    native(run_both(R.min_max_methods, y, np.zeros((3, 8), dtype), np.zeros((3, 6), dtype)), mode)


def test_max_and_min_propagate_nan_as_numpy_does(mode):
    y = RNG.random((3, 8, 6))
    y[0, 2, 3] = y[1, 5, 0] = y[2, 0, 0] = np.nan
    f = run_both(R.min_max_methods, y, np.zeros((3, 8)), np.zeros((3, 6)))
    lo, hi, _ = f(y, np.zeros((3, 8)), np.zeros((3, 6)))
    assert np.isnan(lo[0, 2]) and np.isnan(hi[1, 0]) and np.isnan(lo[2, 0]) and np.isnan(hi[2, 0])
    native(f, mode)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_means(mode, dtype):
    x = (RNG.random((3, 4, 50)) * 100).astype(dtype)
    out = np.zeros((3, 4), np.float64 if dtype != np.float32 else np.float32)
    native(run_both(R.means, x, out), mode)


def test_sums_of_whole_nd_arrays_and_int_sums(mode):
    native(run_both(R.whole_sums, RNG.random((3, 4, 5))), mode)
    for x in ((RNG.random((3, 4, 5)) * 50).astype(np.int32), RNG.random((3, 4, 5)) > 0.5):
        native(run_both(R.int_sums, x, np.zeros((3, 4), np.int64)), mode)


def test_max_over_an_empty_axis_raises_numpys_error(mode):
    f = px.compile(R.max_of_nothing)
    with pytest.raises(px.ExecutionError) as e:
        f(np.zeros((2, 3, 0)))
    assert isinstance(e.value.__cause__, ValueError)
    assert str(e.value.__cause__) == "zero-size array to reduction operation maximum which has no identity"
    assert e.value.filename.endswith("prog_native_reduce.py")
    assert f(np.ones((2, 3, 4))) == R.max_of_nothing(np.ones((2, 3, 4)))


def test_what_stays_interpreted_says_why(mode):
    x = RNG.random((3, 4, 5))
    f = run_both(R.axis_from_argument, x, 1, np.zeros((3, 4)))
    native(f, mode, expected=False)
    if mode == "force":
        assert "with an axis or keepdims that is not a constant" in f.explain()
    f = run_both(R.uint8_sums, (x * 100).astype(np.uint8), np.zeros((3, 5), np.int64))
    native(f, mode, expected=False)
    if mode == "force":
        assert "sum: a value of type ndarray (prog_native_reduce.py:" in f.explain()
    f = run_both(R.compared_sum, x)
    native(f, mode, expected=False)
    if mode == "force":
        assert "inexact" in f.explain()


@pytest.mark.parametrize("dtypes", [(np.float32, np.float64), (np.int16, np.int64), (np.int32, np.float32)])
def test_arrays_of_two_dtypes_of_one_kind_compute_in_numpys_common_dtype(mode, dtypes):
    x = (RNG.random((2, 9, 3)) * 20).astype(dtypes[0])
    w = (RNG.random((3, 3, 4)) * 20).astype(dtypes[1])
    out = np.zeros((2, 7, 4), np.result_type(*dtypes))
    # int32 with float64 as array arithmetic declines, but this statement is a sum of an element-wise product:
    # contract.py's nest multiplies elements, where int32 to float64 is exact, as NumPy's cast is
    native(run_both(R.mixed_dtype_sums, x, w, out), mode)


def test_six_dimensional_arrays(mode):
    d = RNG.random((2, 3, 2, 4, 5, 6))
    native(run_both(R.six_d, RNG.random(5), d, np.zeros(2)), mode)


def test_reductions_where_an_expression_may_not_run(mode):
    x = RNG.random((6, 4))
    native(run_both(R.reduction_of_a_name_in_a_condition, x, 0.5), mode)
    f = run_both(R.reductions_in_conditions, x, 0.5)
    native(f, mode, expected=False)
    if mode == "force":
        assert "max of an expression in a part of an expression that may not run" in f.explain()


@pytest.mark.parametrize("dtype", [np.float64, np.int64])  # float32 sums over split axes: inexact, 1 ulp apart
def test_split_and_middle_axes(mode, dtype):
    x = (RNG.random((3, 4, 4, 6)) * 50).astype(dtype)
    native(run_both(R.split_and_middle_axes, x, np.zeros((3, 4), dtype)), mode)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_a_method_sum_of_a_1d_array_is_exact_and_may_be_compared(mode, dtype):
    native(run_both(R.compared_method_sum, (RNG.random((20, 9)) * 0.5).astype(dtype)), mode)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_method_sum_is_np_sums_to_the_bit_past_eight_elements(mode, dtype):
    # the method's own lowering (Numba's sum one by one) differs from NumPy's pairwise order in the last bits
    # past 8 elements: x.sum() must be np.sum's form where it is taken as exact (a review found 20 of 20 rows
    # of 1,000 differing)
    native(run_both(R.method_sum_against_np_sum, RNG.standard_normal((20, 1000)).astype(dtype)), mode)


def test_a_reduction_error_after_a_loop_names_its_own_line(mode):
    # a whole-function kernel records each statement that may raise as a stage; the reductions' helpers that raise
    # were missed (a fixed list of helper prefixes), so the error named the loop before it
    with pytest.raises(ValueError) as plain:
        R.loop_then_empty_max(np.zeros(3), np.zeros((0, 2)))
    f = px.compile(R.loop_then_empty_max)
    a = np.zeros(3)
    with pytest.raises(px.ExecutionError) as e:
        f(a, np.zeros((0, 2)))
    assert str(e.value.__cause__) == str(plain.value)
    assert e.value.lineno == R.loop_then_empty_max.__code__.co_firstlineno + 3
    np.testing.assert_array_equal(a, np.ones(3))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int8, np.bool_])
def test_argmin_and_argmax_over_an_axis(mode, dtype):
    x = (RNG.random((3, 5, 4)) * 4).astype(dtype)  # ties (small ints, bools): the first index wins
    native(run_both(R.arg_extremes, x, np.zeros((3, 9), np.int64)), mode)


def test_argmin_and_argmax_find_the_first_nan_as_numpy_does(mode):
    x = RNG.random((2, 5, 4))
    x[0, 1, 2] = x[0, 3, 0] = x[1, 0, 0] = np.nan
    x[1, 4, 3] = -0.0
    native(run_both(R.arg_extremes, x, np.zeros((2, 9), np.int64)), mode)


def test_argmin_over_an_empty_axis_raises_numpys_error(mode):
    f = px.compile(R.argmin_of_nothing)
    with pytest.raises(px.ExecutionError) as e:
        f(np.zeros((2, 3, 0)))
    assert isinstance(e.value.__cause__, ValueError)
    assert str(e.value.__cause__) == "attempt to get argmin of an empty sequence"
    assert e.value.filename.endswith("prog_native_reduce.py")
    assert f(np.ones((2, 3, 4))) == R.argmin_of_nothing(np.ones((2, 3, 4)))
