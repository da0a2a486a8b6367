"""The row-product pass and kernel: ``X.T @ f(X @ v, ...)`` as one pass over X (passes/rowdot.py,
primitives/rowdot.py)."""
from __future__ import annotations

import warnings

import numpy as np
import prog_rowdot as P
import prog_tiled
import pytest
from helpers import check, source_position
from phylanx_py.primitives import rowdot

import phylanx_py as px
from phylanx_py import ir

RNG = np.random.default_rng(0)
BIG = (RNG.standard_normal((20_000, 8)), (RNG.random(20_000) > 0.5).astype(float), RNG.standard_normal(8) * 0.1)
SMALL = tuple(a[:50] if a.shape[0] == 20_000 else a for a in BIG)


def _rowdots(fn):
    return _rowdots_of(px.compile(fn))


@pytest.mark.parametrize("fn", [prog_tiled.lra, P.least_squares_step, P.weighted])
def test_the_pattern_becomes_one_row_product(fn):
    assert len(_rowdots(fn)) == 1


@pytest.mark.parametrize("fn", [P.temporary_read_twice, P.temporary_returned, P.other_matrix])
def test_near_misses_are_left_as_written(fn):
    # a temporary read twice or returned is not inlined (so the product does not see X @ v); another matrix is
    # not the transposed one
    assert _rowdots(fn) == []


def test_temporary_is_inlined_into_the_row_product_and_its_statement_goes():
    text = str(px.compile(prog_tiled.lra).tree)
    assert "define(p," not in text
    assert "fused_rowdot@" in text and "($0=X, $1=w, $2=y)" in text
    group = _rowdots(prog_tiled.lra)[0]
    # the group's body is the expression as written (X.T @ (p - y), p inlined): small inputs run it op by op
    body = group.body
    assert body.prim == "operator.matmul" and body.args[0].prim == "attr.T" and body.args[0].args[0].index == 0
    assert body.args[1].prim == "operator.sub" and isinstance(body.args[1].args[0], ir.Fused)
    assert group.spec == ("operator.sub", ("operator.truediv", ("const", 1.0), ("operator.add", ("const", 1.0), (
        "exp", ("operator.neg", ("arg", 0))))), ("arg", 1))


def _args(fn, data):
    X, y, w = data
    return {prog_tiled.lra: (X, y, 0.5, 3), P.least_squares_step: (X, y, w), P.weighted: (X, y, w, 0.25)}[fn]


@pytest.mark.parametrize("size", ["small (reference)", "large (kernel)"])
@pytest.mark.parametrize("fn", [prog_tiled.lra, P.least_squares_step, P.weighted])
def test_compiled_equals_plain(fn, size):
    data = SMALL if size.startswith("small") else BIG
    args = _args(fn, data)
    want = fn(*args)
    got = px.compile(fn)(*args)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-12)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    unfused = px.compile(fn, fuse=False)
    assert not _rowdots_of(unfused)
    np.testing.assert_array_equal(unfused(*args), want)


def _rowdots_of(compiled):
    return [n for n in ir.walk(compiled.tree) if isinstance(n, ir.Fused) and n.reduce == ("rowdot",)]


@pytest.mark.parametrize("fn", [P.temporary_read_twice, P.temporary_returned, P.other_matrix])
def test_near_misses_still_equal_plain(fn):
    X, y, w = BIG
    args = (X, X[:, ::-1].copy(), y, w) if fn is P.other_matrix else (X, y, w)
    check(fn, *args)


def test_kernel_applies_to_large_float64_inputs_only():
    X, y, w = BIG
    assert rowdot._kinds(X, w, (y, 0.5)) == ("v", "s")
    assert rowdot._kinds(X[:10], w, (y[:10],)) is None  # small: NumPy
    assert rowdot._kinds(X.astype(np.float32), w, (y,)) is None
    assert rowdot._kinds(X, w, (y[:, None],)) is None  # not one value per row


def test_error_in_the_row_product_names_the_users_line():
    X, y, w = BIG
    with pytest.raises(px.ExecutionError) as err:
        px.compile(P.mismatch)(X, y[:-1], w)
    line, col = source_position(P.mismatch, "r - y")
    assert (err.value.loc.lineno, err.value.loc.col, err.value.primitive) == (line, col, "__sub")


def test_distances_then_argmin_become_one_loop_nest():
    f = px.compile(prog_tiled.kmeans)
    groups = [n for n in ir.walk(f.tree) if isinstance(n, ir.Fused) and n.reduce[:1] == ("sum_argmin",)]
    assert len(groups) == 1 and groups[0].reduce == ("sum_argmin", 2, 1)
    assert "define(d," not in str(f.tree)  # the distances are never stored
    X = RNG.standard_normal((30_000, 2))
    X[5] = np.nan  # the first NaN wins, as in NumPy
    for C0 in (X[1:9].copy(), np.repeat(X[1:3], 4, axis=0)):  # ties: the first minimum, as in NumPy
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # tied centroids leave empty clusters: NaN means
            C, labels = f(X, C0, 2)
            Cn, ln = prog_tiled.kmeans(X, C0, 2)
        np.testing.assert_array_equal(labels, ln)
        np.testing.assert_allclose(C, Cn, rtol=1e-12, equal_nan=True)


def test_sum_argmin_kernel_against_numpy():
    from phylanx_py.primitives.fused_reduce import fused_sum_argmin

    spec = ("operator.pow", ("operator.sub", ("arg", 0), ("arg", 1)), ("const", 2))
    X = RNG.standard_normal((40_000, 3))
    C = X[:5].copy()
    C[3] = C[1]  # a tie
    for axis, arg_axis, a, b in [(2, 1, X[:, None, :], C[None]), (1, 1, X[:, :, None], C.T[None])]:
        got = fused_sum_argmin(spec, (None,) * 4, axis, arg_axis, a, b)
        want = np.argmin(((a - b) ** 2).sum(axis=axis), axis=arg_axis)
        np.testing.assert_array_equal(got, want)
