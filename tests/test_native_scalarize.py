"""Element-wise array statements in native kernels as one loop nest (runtime/native/scalarize.py): the plain
function's answer in every tier, the loop nest where it computes what NumPy computes, the array statement where
NumPy's temporaries or broadcasting matter."""
from __future__ import annotations

import numpy as np
import prog_stencils as S
import pytest
from helpers import check_against

import phylanx_py as px

pytestmark = pytest.mark.usefixtures("native_tier")  # off, default and forced (conftest.native_tier)
NEST = "# an element-wise statement as one loop nest"


def _grid(n, m, seed=0):
    return np.random.default_rng(seed).standard_normal((n, m))


def _kernel_sources(f) -> str:
    """The whole-function and loop kernels' sources of ``f`` so far."""
    code = f._code
    entries = list(code.whole.entries.values()) if code.whole is not None else []
    for loop in code.native_loops:
        entries += list(getattr(loop, "entries", {}).values())
    return "\n".join(e.source or "" for e in entries)


CASES = [
    (S.jacobi, (4, _grid(7, 6), _grid(7, 6, 1)), True),
    (S.fdtd, (3, _grid(5, 6), _grid(5, 6, 1), _grid(5, 6, 2), np.arange(3.0)), True),
    (S.shift_same_array, (3, np.arange(8.0)), False),
    (S.same_elements, (3, np.arange(8.0), np.linspace(0.0, 1.0, 8)), True),
    (S.rows, (_grid(5, 4), _grid(5, 4, 1)), True),
    (S.rows_from_the_row_before, (_grid(5, 4), _grid(5, 4, 1)), True),
    (S.columns_from_a_given_column, (2, _grid(5, 4)), True),
    (S.columns_from_a_given_column, (-1, _grid(5, 4)), True),
    (S.rows_by_a_negative_index, (_grid(4, 5),), True),
    (S.broadcast_column, (_grid(5, 4), _grid(5, 4, 1)), False),  # a length-1 slice broadcast: the array statement
    (S.cast_on_store, (np.arange(6.0), np.zeros(6, dtype=np.int64)), False),
    (S.whole_arrays, (2, _grid(3, 4), _grid(3, 4, 1)), True),
    (S.scalar_operands, (3, np.arange(9.0), np.zeros(9), np.array([0.5, -1.0, 2.0])), True),
    (S.jacobi, (3, _grid(6, 5).astype(np.float32), _grid(6, 5, 1).astype(np.float32)), True),
    (S.jacobi, (3, _grid(6, 5)[::-1, :], _grid(6, 9, 1)[:, ::2]), True),  # strided and reversed views
    (S.jacobi, (3, np.zeros((2, 2)), np.ones((2, 2))), True),  # empty slices
    (S.temporaries, (3, np.linspace(-1.0, 1.0, 12) ** 2, np.zeros(12)), True),  # new arrays
    (S.view_not_copy, (3, np.arange(5.0)), True),  # v = a[1:] stays a view; v += 1.0 is a nest through it
    (S.rebinds_what_it_reads, (3, np.arange(9.0)), True),
    (S.broadcast_new_axes, (3, np.linspace(0.0, 1.0, 5), np.linspace(-1.0, 1.0, 4), _grid(5, 4)), True),
    (S.broadcast_new_axes, (2, np.linspace(0.0, 1.0, 5), np.linspace(-1.0, 1.0, 1), _grid(5, 4)), True),  # NumPy's
    (S.broadcast_new_axes, (2, np.arange(5.0), np.arange(4.0), np.zeros((5, 4), np.float32)), True),  # float32 +=
    (S.outer_products, (3, np.linspace(0.0, 1.0, 6), np.linspace(-1.0, 1.0, 3), _grid(6, 3)), True),
    (S.outer_products, (2, np.linspace(0.0, 1.0, 6), np.linspace(-1.0, 1.0, 3), _grid(6, 3)[:, ::-1]), True),
    (S.outer_of_a_matrix, (2, _grid(2, 3), np.arange(4.0), np.zeros((6, 4))), False),
    (S.overlapping_inplace, (2, np.arange(9.0), _grid(4, 4)), False),  # np.add(a, <a copy where they meet>, a)
    # inside loops lowered in two versions (by the sign of k): the nest's temporaries must not make them disagree
    (S.orthonormalize, (_grid(6, 4),), True),
]


@pytest.mark.parametrize("fn, args, nest", CASES, ids=lambda c: getattr(c, "__name__", None))
def test_element_wise_statements_give_the_plain_answer(fn, args, nest, native_tier):
    f = px.compile(fn)
    for _ in range(2):  # the first call and a later one (by default the plain function, then maybe a kernel)
        check_against(f, fn, *args)
    if native_tier == "force":
        assert (NEST in _kernel_sources(f)) == nest, _kernel_sources(f)


@pytest.mark.parametrize("order", ["C", "F"])
def test_a_new_array_has_numpys_memory_order(order, native_tier):
    # NumPy's element-wise result follows its operands' order (F in, F out); the nest allocates C order, so it
    # runs only for operands in C order (a review found F-ordered inputs given a C-ordered result)
    a, b = np.asarray(_grid(4, 3), order=order), np.asarray(_grid(4, 3, 1), order=order)
    f = px.compile(S.new_array_keeps_the_operands_order)
    for _ in range(2):
        got, want = f(2, a, b), S.new_array_keeps_the_operands_order(2, a, b)
        np.testing.assert_array_equal(got, want)
        assert (got.strides, got.flags.c_contiguous, got.flags.f_contiguous) == \
            (want.strides, want.flags.c_contiguous, want.flags.f_contiguous)
    if native_tier == "force":
        assert NEST in _kernel_sources(f)


def test_an_array_written_through_another_name_takes_the_array_statement(native_tier):
    # b is a: the guard finds the arrays share memory, and NumPy's right side (a temporary) decides
    f = px.compile(S.same_elements)
    plain_in = np.arange(10.0)
    want = S.same_elements(2, plain_in, plain_in)
    got_in = np.arange(10.0)
    got = f(2, got_in, got_in)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_in, plain_in)
    v, w = np.arange(20.0), np.arange(20.0)  # A and B views of one buffer, B reversed
    assert px.compile(S.jacobi)(3, v.reshape(4, 5), v.reshape(4, 5)[:, ::-1]) is None
    S.jacobi(3, w.reshape(4, 5), w.reshape(4, 5)[:, ::-1])
    np.testing.assert_array_equal(v, w)


def test_shapes_that_do_not_match_raise_numpys_error_at_the_line(native_tier):
    f = px.compile(S.mismatched)
    with pytest.raises(ValueError) as plain:
        S.mismatched(np.arange(6.0), np.zeros(6))
    with pytest.raises(px.ExecutionError) as e:
        f(np.arange(6.0), np.zeros(6))
    assert type(e.value.__cause__) is ValueError
    # forced too: the nest's test fails, the kernel stops and the loop reruns interpreted, so NumPy's error at the line
    assert str(e.value.__cause__) == str(plain.value)
    assert e.value.lineno == S.mismatched.__code__.co_firstlineno + 2
