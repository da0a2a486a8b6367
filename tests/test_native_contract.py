"""Sums over axes of element-wise expressions in native kernels as one loop nest (runtime/native/contract.py): the
plain function's answer in every tier, the nest where its order is NumPy's, a rerun interpreted where the operands
broadcast, overlap the target or index out of range."""
from __future__ import annotations

import numpy as np
import prog_contract as C
import pytest
from helpers import check_against
from phylanx_py.runtime.native.nests import RERUN
from test_native_scalarize import _kernel_sources

import phylanx_py as px

pytestmark = pytest.mark.usefixtures("native_tier")  # off, default and forced (conftest.native_tier)
NEST = "# a sum of an element-wise expression as one loop nest"
_rng = np.random.default_rng(0)


def _a(*shape, dtype=np.float64):
    return _rng.standard_normal(shape).astype(dtype)


CASES = [
    (C.conv2d, (_a(2, 6, 5, 3), _a(2, 2, 3, 4)), True),
    (C.conv2d, (_a(2, 6, 5, 3, dtype=np.float32), _a(3, 3, 3, 2, dtype=np.float32)), True),
    (C.conv2d, (_a(2, 6, 5, 3), _a(2, 2, 3, 4, dtype=np.float32), np.float32), True),  # resnet's dtypes
    (C.rows_times_matrix, (3, _a(4, 5), _a(5, 3)), True),
    (C.trailing_axis, (2, _a(4, 5), _a(4, 5)), True),
    # NumPy's pairwise sum: under 8 one by one, blocks of 8 to 128, halves past 128 (the same bits)
    *[(C.trailing_axis, (2, _a(3, n), _a(3, n)), True) for n in (1, 8, 9, 127, 128, 129, 300, 1031)],
    (C.trailing_axis, (2, _a(3, 300, dtype=np.float32), _a(3, 300, dtype=np.float32)), True),
    (C.distances, (2, _a(20, 3), _a(4, 3)), True),
    (C.distances, (2, _a(5, 200), _a(3, 200)), True),
    (C.trailing_two_axes, (2, _a(3, 4, 5)), False),
    (C.trailing_axis_ints, (2, np.arange(20).reshape(4, 5), np.arange(20, 40).reshape(4, 5)), True),
    (C.into_row, (2, np.zeros((3, 4)), _a(2, 5), _a(5, 4), 1), True),
    (C.into_row, (2, np.zeros((3, 4)), _a(2, 5), _a(5, 4), -3), True),
    (C.keepdims, (2, _a(3, 4)), False),
    # emitted, its test not holding: a rerun (bit-identical to NumPy's pairwise sum; a review found 2.7e-15 apart)
    (C.one_column, (2, _a(3, 40), _a(40, 1)), True),
]


@pytest.mark.parametrize("fn, args, nest", CASES, ids=lambda c: getattr(c, "__name__", None))
def test_sums_of_element_wise_expressions_give_the_plain_answer(fn, args, nest, native_tier):
    f = px.compile(fn)
    for _ in range(2):
        got = check_against(f, fn, *args)
        # the nest adds in NumPy's order: the same bits, not only close
        np.testing.assert_array_equal(got, fn(*[a.copy() if type(a) is np.ndarray else a for a in args]))
    if native_tier == "force":
        assert (NEST in _kernel_sources(f)) == nest, _kernel_sources(f)


def _declined(f) -> str:
    return "\n".join(line for line in f.explain().splitlines() if "interpreted" in line)


def test_a_broadcast_dimension_reruns_interpreted(native_tier):
    # weights with one input channel: NumPy broadcasts it against the input's three; the nest's guard does not hold
    args = (_a(2, 5, 5, 3), _a(2, 2, 1, 4))
    f = px.compile(C.conv2d)
    for _ in range(2):
        check_against(f, C.conv2d, *args)
    if native_tier == "force":
        assert RERUN in _declined(f)


def test_a_target_sharing_memory_with_an_operand_reruns_interpreted(native_tier):
    base, plain_base = np.arange(16.0).reshape(4, 4), np.arange(16.0).reshape(4, 4)
    f = px.compile(C.into_row)
    got = f(2, base, base[:2, :], base[:, :], 0)  # out[0, :] is read through a while it is written
    want = C.into_row(2, plain_base, plain_base[:2, :], plain_base[:, :], 0)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(base, plain_base)
    if native_tier == "force":
        assert RERUN in _declined(f)


def test_an_index_out_of_range_raises_numpys_error_at_the_line(native_tier):
    f = px.compile(C.into_row)
    args = (2, np.zeros((3, 4)), _a(2, 5), _a(5, 4), 3)
    with pytest.raises(IndexError) as plain:
        C.into_row(*args)
    out = args[1].copy()
    with pytest.raises(px.ExecutionError) as e:
        f(args[0], out, *args[2:])
    assert type(e.value.__cause__) is IndexError and str(e.value.__cause__) == str(plain.value)
    assert e.value.lineno == C.into_row.__code__.co_firstlineno + 3
    np.testing.assert_array_equal(out, np.zeros((3, 4)))  # nothing was stored before the error, as in NumPy


def test_a_new_sum_array_has_numpys_memory_order(native_tier):
    # F-ordered operands make an F-ordered NumPy result: the nest makes C order, so it runs only for C-ordered ones
    a, b = np.asfortranarray(_a(4, 5)), np.asfortranarray(_a(5, 3))
    f = px.compile(C.new_sum)
    got, want = f(2, a, b), C.new_sum(2, a, b)
    np.testing.assert_array_equal(got, want)
    assert got.strides == want.strides
    c_got, c_want = f(2, np.ascontiguousarray(a), np.ascontiguousarray(b)), C.new_sum(2, np.ascontiguousarray(a),
                                                                                          np.ascontiguousarray(b))
    np.testing.assert_array_equal(c_got, c_want)
    assert c_got.strides == c_want.strides


@pytest.mark.parametrize("order", ["F", "T"])
def test_a_last_axis_sum_of_operands_not_in_c_order_reruns_interpreted(order, native_tier):
    # NumPy's temporary then has strided rows and NumPy does not add them pairwise: the nest's test fails and the
    # loop reruns (a review found the nest 1e-14 apart); the tree's own fused sum is within float tolerance there
    a, b = _a(5, 130), _a(5, 130)
    if order == "F":
        a, b = np.asfortranarray(a), np.asfortranarray(b)
    else:
        a, b = np.ascontiguousarray(a.T).T, np.ascontiguousarray(b.T).T
    f = px.compile(C.trailing_axis)
    for _ in range(2):
        check_against(f, C.trailing_axis, 2, a, b)
    if native_tier == "force":
        assert "reran interpreted" in _declined(f), f.explain()
