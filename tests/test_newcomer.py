"""What a newcomer meets first: gradient trees by name, errors that point at their code, labels as floats."""
from __future__ import annotations

import numpy as np
import pytest

import phylanx_py as px


def _loss(params, X):
    return np.sum(np.tanh(X @ params["W1"] + params["b1"]))


def _params():
    rng = np.random.default_rng(0)
    return {"W1": rng.standard_normal((4, 3)), "b1": np.zeros(3)}, rng.standard_normal((5, 4))


def test_grad_tree_before_a_call_says_how_to_get_it():
    with pytest.raises(ValueError) as e:
        print(px.grad(_loss).tree)
    assert "g = px.grad(_loss); g(*args); print(g.tree)" in str(e.value)
    assert "print(g.trace(*args))" in str(e.value)


def test_grad_trace_gives_the_tree_with_the_users_parameter_names():
    params, X = _params()
    g = px.grad(_loss)
    tree = g.trace(params, X)
    assert tree is g.tree
    fn = tree.function(tree.entry)
    assert fn.params[:3] == ("params_W1", "params_b1", "X")
    assert "params_W1" in str(tree) and "__a0" not in str(tree)
    grads = g(params, X)
    h = 1 - np.tanh(X @ params["W1"] + params["b1"]) ** 2
    np.testing.assert_allclose(grads["W1"], X.T @ h)
    np.testing.assert_allclose(grads["b1"], h.sum(axis=0))
