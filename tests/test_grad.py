"""px.grad / px.value_and_grad: against hand-derived gradients, central finite differences (generated programs),
control flow, argument trees, the tree it builds, its errors, and a real Dask cluster."""
from __future__ import annotations

import numpy as np
import prog_grad as pg
import pytest
from cluster import DaskProcesses
from hypothesis import given, settings
from hypothesis import strategies as st

import phylanx_py as px
from phylanx_py.trace import TraceError


def numeric_grad(f, args, argnum, eps=1e-6):
    """Central finite differences of scalar ``f`` with respect to array ``args[argnum]``."""
    args = [np.array(a, dtype=float, copy=True) if i == argnum else a for i, a in enumerate(args)]
    x = args[argnum]
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + eps
        hi = f(*args)
        x[idx] = old - eps
        lo = f(*args)
        x[idx] = old
        out[idx] = (hi - lo) / (2 * eps)
    return out


def check_against_numeric(f, args, argnums, rtol=1e-6, atol=1e-7):
    """px.grad of ``f`` with respect to each of ``argnums`` equals central finite differences."""
    for i in argnums:
        got = px.grad(f, argnums=i)(*args)
        np.testing.assert_allclose(got, numeric_grad(f, list(args), i), rtol=rtol, atol=atol, err_msg=f"argument {i}")


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 5))
    y = (rng.random(30) > 0.5).astype(float)
    Y = rng.integers(0, 4, 30)
    params = {"W1": rng.normal(size=(5, 8)) * 0.5, "b1": rng.normal(size=8) * 0.1,
              "W2": rng.normal(size=(8, 4)) * 0.5, "b2": np.zeros(4)}
    return X, y, Y, params


def test_logistic_regression_gradient_equals_the_hand_derived_one(runtime, data):
    X, y, _, _ = data
    w = np.linspace(-0.5, 0.5, 5)
    got = px.grad(pg.logistic_loss)(w, X, y)
    np.testing.assert_allclose(got, pg.logistic_grad_by_hand(w, X, y), rtol=1e-12, atol=1e-14)


def test_mlp_gradient_equals_back_propagation_by_hand(runtime, data):
    X, _, Y, params = data
    got = px.grad(pg.mlp_loss)(params, X, Y)
    want = pg.mlp_grad_by_hand(params, X, Y)
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-10, atol=1e-13, err_msg=k)


def test_value_and_grad_shares_the_forward_and_reuses_the_tree(data):
    X, _, Y, params = data
    vg = px.value_and_grad(pg.mlp_loss)
    v, g = vg(params, X, Y)
    assert v == pytest.approx(pg.mlp_loss(params, X, Y), rel=1e-13)
    first = vg.last
    params2 = {k: p * 0.5 for k, p in params.items()}
    v2, g2 = vg(params2, X, Y)
    assert vg.last is first  # same signature: no new trace
    assert v2 == pytest.approx(pg.mlp_loss(params2, X, Y), rel=1e-13)
    np.testing.assert_allclose(g2["W1"], pg.mlp_grad_by_hand(params2, X, Y)["W1"], rtol=1e-10, atol=1e-13)
    vg(params, X[:7], Y[:7])  # another batch size: another tree
    assert vg.last is not first


def test_argnums_tuple_and_nested_arguments():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    ga, gs = px.grad(pg.tuple_args, argnums=(0, 1))((a, b), 2.5)
    assert isinstance(ga, tuple) and len(ga) == 2
    np.testing.assert_allclose(ga[0], b * 2.5 + 1 - np.tanh(a) ** 2, rtol=1e-12)
    np.testing.assert_allclose(ga[1], a * 2.5, rtol=1e-12)
    assert gs == pytest.approx(np.sum(a * b), rel=1e-12)


def test_compiled_functions_are_differentiated_as_written(data):
    X, y, _, _ = data
    w = np.ones(5) * 0.1
    got = px.grad(pg.compiled_loss)(w, X, y)
    np.testing.assert_allclose(got, 2 * X.T @ (X @ w - y) / X.shape[0], rtol=1e-12)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_loop_with_a_trip_count_known_at_call_time(n):
    check_against_numeric(pg.power_loop, (np.array([0.3, -0.7, 1.1]), n), [0], atol=1e-8)


def test_data_dependent_if_takes_the_branch_of_each_call():
    g = px.grad(pg.data_dependent_if)
    pos, neg = np.array([0.5, 1.0, -0.2]), np.array([-0.5, -1.0, 0.2])
    np.testing.assert_allclose(g(pos), np.exp(pos), rtol=1e-12)
    np.testing.assert_allclose(g(neg), 6.0 * neg, rtol=1e-12)
    np.testing.assert_allclose(g(pos), np.exp(pos), rtol=1e-12)  # re-traced, not the cached other branch
    assert g.last.guards and "bool()" in g.last.guards[0][1]


def test_while_loop_with_a_data_dependent_trip_count():
    a = np.array([2.0, 9.0, 0.25])
    got = px.grad(pg.newton_sqrt)(a)
    np.testing.assert_allclose(got, 0.5 / np.sqrt(a), rtol=1e-7)


def test_indexing_concatenate_stack_where():
    rng = np.random.default_rng(2)
    check_against_numeric(pg.indexes_and_stacks, (rng.normal(size=(4, 3)), rng.normal(size=(3, 2))), [0, 1])


def test_reductions_and_nn_functions():
    check_against_numeric(pg.reductions, (np.random.default_rng(3).normal(size=(4, 5)),), [0])


def test_tensordot_einsum_dot_outer_clip():
    rng = np.random.default_rng(4)
    check_against_numeric(pg.linalg, (rng.normal(size=(3, 4)), rng.normal(size=(4, 2))), [0, 1])


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_ops=st.integers(1, 8))
def test_generated_programs_against_central_finite_differences(seed, n_ops):
    rng = np.random.default_rng(seed)
    A, B, C = rng.normal(size=(3, 4)), rng.normal(size=(4,)), rng.normal(size=(4, 3))
    f = pg.random_program(seed, n_ops)
    got = px.grad(f, argnums=(0, 1, 2))(A, B, C)
    for i in range(3):
        want = numeric_grad(f, [A, B, C], i)
        np.testing.assert_allclose(got[i], want, rtol=2e-5, atol=2e-6, err_msg=f"argument {i}, seed {seed}")


# ---- the tree ------------------------------------------------------------------------------------------------
def test_the_gradient_is_a_printable_fused_tree_with_user_locations(data, tmp_path):
    X, _, Y, params = data
    g = px.grad(pg.mlp_loss)
    g(params, X, Y)
    text = str(g.tree)
    assert "prog_grad.py:" in text and "matmul" in text and "fused" in text
    assert "digraph" in g.to_dot()
    svg = g.visualize(tmp_path / "grad.svg")
    assert "<svg" in open(svg).read()
    # every operation of the backward pass names the forward line it differentiates
    line = pg.mlp_loss.__code__.co_firstlineno + 1
    assert f"prog_grad.py:{line}:" in text


def test_each_weight_gradient_is_computed_where_it_was_recorded_not_in_the_outputs(data):
    """A gradient only the outputs read (``h.T @ g``) is a statement of its own next to its operands, in the
    order the backward pass recorded it: written into the returned tuple it ran after the whole backward pass,
    on operands long out of the caches. The outputs' tuple names values; its items compute nothing."""
    from phylanx_py import ir

    X, _, Y, params = data
    g = px.grad(pg.mlp_loss)
    g(params, X, Y)
    body = g.tree.function(g.tree.entry).body.stmts
    ret = body[-1]
    assert isinstance(ret, ir.Return) and all(isinstance(v, (ir.Var, ir.Const)) for v in ret.value.items)
    products = [i for i, s in enumerate(body) if isinstance(s, ir.Assign) and "matmul" in str(s)]
    assert len(products) >= 3  # both weights' gradients and the cotangent of h, each a statement
    np.testing.assert_allclose(g(params, X, Y)["W1"], pg.mlp_grad_by_hand(params, X, Y)["W1"], rtol=1e-12)


def test_gradient_tree_runs_unfused_with_the_same_answer(monkeypatch, data):
    X, _, Y, params = data
    want = px.grad(pg.mlp_loss)(params, X, Y)
    monkeypatch.setenv("PHYLANX_FUSE", "0")
    g = px.grad(pg.mlp_loss)
    got = g(params, X, Y)
    assert "fused" not in str(g.tree)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-13)


# ---- errors --------------------------------------------------------------------------------------------------
def test_gradient_with_respect_to_an_integer_argument_is_an_error():
    with pytest.raises(TypeError, match=r"argument 0 has a leaf of type ndarray of int64; gradients are taken with "
                                        r"respect to floating-point arrays and scalars only"):
        px.grad(lambda x: np.sum(x * 2.0))(np.arange(3))


def test_non_scalar_function_is_an_error():
    with pytest.raises(TypeError, match=r"needs a scalar-valued function; <lambda> returned shape \(3,\)"):
        px.grad(lambda x: x * 2.0)(np.ones(3))


def test_float_of_a_differentiated_value_is_an_error_at_the_users_line():
    line = pg.uses_float_of_loss.__code__.co_firstlineno + 1
    with pytest.raises(TraceError, match=rf"prog_grad.py:{line}:\d+: float\(\) of a value that depends on the "
                                         r"differentiated arguments cuts its gradient"):
        px.grad(pg.uses_float_of_loss)(np.ones(3))


def test_primitive_without_gradient_rule_is_an_error():
    def f(x):
        return np.sum(np.cumsum(x))
    with pytest.raises(TraceError, match=r"no gradient rule for primitive 'cumsum'"):
        px.grad(f)(np.ones(3))


def test_comparisons_pass_no_gradient():
    def f(x):
        return np.sum((x > 0) * 1.0 + np.argmax(x) + x * 0.0)
    np.testing.assert_array_equal(px.grad(f)(np.array([1.0, -2.0])), [0.0, 0.0])


# ---- a real cluster ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dask_rt():
    procs = DaskProcesses(n_workers=2)
    rt = px.runtime.dask(procs.address, inline_elements=0)
    yield rt
    rt.close()
    procs.stop()


def test_gradient_tree_on_dask_workers_equals_local(dask_rt, data):
    X, _, Y, params = data
    want = pg.mlp_grad_by_hand(params, X, Y)
    with px.using(dask_rt):
        v, got = px.value_and_grad(pg.mlp_loss)(params, X, Y)
    assert v == pytest.approx(pg.mlp_loss(params, X, Y), rel=1e-12)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-10, atol=1e-13)


@pytest.mark.filterwarnings("error::phylanx_py.runtime.tiled.TileFallbackWarning")
def test_gradient_on_tiled_arrays_on_dask(dask_rt, data):
    X, y, _, _ = data
    w = np.linspace(-0.5, 0.5, 5)
    with px.using(dask_rt):
        Xt = px.tiled.from_array(X, tiles=(2, 1))
        yt = px.tiled.from_array(y, tiles=(2,))
        got = px.grad(pg.logistic_loss)(w, Xt, yt)
    np.testing.assert_allclose(np.asarray(got), pg.logistic_grad_by_hand(w, X, y), rtol=1e-10)


@pytest.mark.parametrize("onehot", [False, True], ids=["class indices", "one-hot"])
def test_cross_entropy_gradient_on_tiled_rows_on_dask(dask_rt, data, onehot):
    """nn.softmax_cross_entropy_grad's tile rule: rows tile by tile (each over the whole batch's n). The gradient
    with respect to row-tiled logits stays tiled (a kernel given tiled inputs would gather them) and equals the
    local one; so does a softmax regression's on row-tiled X."""
    from phylanx_py.runtime.tiled import TiledArray

    from phylanx_py import nn

    X, _, _, _ = data
    labels = np.arange(len(X)) % 3
    Y = np.eye(3)[labels] if onehot else labels
    W = np.linspace(-0.5, 0.5, X.shape[1] * 3).reshape(X.shape[1], 3)
    Z = X @ W

    def loss(W, X, Y):
        return nn.softmax_cross_entropy(X @ W, Y)

    with px.using(dask_rt):
        Xt, Yt = px.tiled.from_array(X, tiles=(3, 1)), px.tiled.from_array(Y, tiles=(3,) + (1,) * (Y.ndim - 1))
        dZ = px.grad(nn.softmax_cross_entropy)(px.tiled.from_array(Z, tiles=(3, 1)), Yt)
        assert isinstance(dZ, TiledArray)
        np.testing.assert_allclose(np.asarray(dZ), px.grad(nn.softmax_cross_entropy)(Z, Y), rtol=1e-10,
                                   atol=1e-15)
        got = px.grad(loss)(W, Xt, Yt)
    np.testing.assert_allclose(np.asarray(got), px.grad(loss)(W, X, Y), rtol=1e-10, atol=1e-14)


def test_float32_in_float32_out_through_every_rule_of_the_mlp_and_reductions():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 5)).astype(np.float32)
    g = px.grad(pg.reductions)(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, px.grad(pg.reductions)(x.astype(np.float64)), rtol=2e-4, atol=1e-5)
    X, Y = rng.normal(size=(6, 5)).astype(np.float32), rng.integers(0, 4, 6)
    params = {k: v.astype(np.float32) for k, v in {"W1": rng.normal(size=(5, 8)), "b1": np.zeros(8),
                                                   "W2": rng.normal(size=(8, 4)), "b2": np.zeros(4)}.items()}
    grads = px.grad(pg.mlp_loss)(params, X, Y)
    assert {k: v.dtype for k, v in grads.items()} == {k: np.dtype(np.float32) for k in params}
    # and no float64 operation inside the tree: every array the tree makes from float32 inputs is float32
    clip = px.grad(lambda a: np.sum(np.clip(a, -0.5, 0.5) * np.max(a, axis=0)))(x)
    assert clip.dtype == np.float32
