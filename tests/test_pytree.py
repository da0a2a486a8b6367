"""Argument trees (phylanx_py/pytree.py): flatten and unflatten give back the same tree, in new containers."""
from __future__ import annotations

import collections
import gc

import numpy as np
import pytest

from phylanx_py.pytree import _walk, flatten, leaf_names, unflatten

Pair = collections.namedtuple("Pair", "a b")


@pytest.mark.parametrize("tree", [
    {"a": [1.0, (2, 3)], "b": {}}, [], (), 5.0, Pair(1, 2), {(1, 2): [1, "x", None]},
    [{"W": np.ones(2), "b": 2.0}, {}, ((), [()])], collections.OrderedDict(z=1, a=[2.0])])
def test_unflatten_rebuilds_what_flatten_took_apart(tree):
    leaves, structure = flatten(tree)
    expected = dict(tree) if isinstance(tree, collections.OrderedDict) else tree  # a dict subclass: a dict
    for _ in range(2):  # the second time through the builder compiled for this structure
        again = unflatten(structure, leaves)
        assert repr(again) == repr(expected) and type(again) is type(expected)


def test_every_call_makes_new_containers():
    tree = {"w": [np.zeros(2), {"b": 1.0}]}
    leaves, structure = flatten(tree)
    first, second = unflatten(structure, leaves), unflatten(structure, leaves)
    assert first is not second and first["w"] is not second["w"] and first["w"][1] is not second["w"][1]
    assert first["w"][0] is leaves[0]


def test_extra_leaves_are_ignored_and_missing_ones_fail_as_before():
    _, structure = flatten([1.0, (2.0,)])
    assert unflatten(structure, [1, 2, 3]) == [1, (2,)]
    with pytest.raises(StopIteration):
        unflatten(structure, [1])


def test_leaf_names_follow_the_structure():
    assert leaf_names("params", flatten({"W1": 1.0, "layers": [2.0, {"b": 3.0}]})[1]) == \
        ["params_W1", "params_layers_0", "params_layers_1_b"]


def test_unflatten_leaves_no_reference_cycle():
    """A cycle (a closure calling itself held the leaves' iterator) kept every call's leaves, a training step's
    gradients, alive until the garbage collector's next pass: each step's arrays then came from new memory."""
    leaves, structure = flatten([{"W": np.ones(3)}, (np.zeros(2),)])
    gc.collect()
    gc.disable()
    try:
        for fn in (unflatten, _walk):
            for _ in range(3):
                fn(structure, leaves)
        assert gc.collect() == 0
    finally:
        gc.enable()


def _loss(params, X):
    return np.mean(np.maximum(X @ params["W"] + params["b"], 0.0) ** 2)


def test_a_gradient_call_leaves_no_garbage_cycles():
    import phylanx_py as px

    rng = np.random.default_rng(0)
    params, X = {"W": rng.standard_normal((5, 4)), "b": np.zeros(4)}, rng.standard_normal((8, 5))
    g = px.value_and_grad(_loss)
    g(params, X)  # traced and compiled here
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            g(params, X)
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_keys_equal_but_of_other_types_keep_their_own_type():
    # 1, True and 1.0 are equal dict keys that hash alike: a builder cached for one rebuilt the others' dicts with
    # its keys (a review: px.grad of {True: w} returned {1: g})
    from phylanx_py.pytree import flatten, unflatten

    for tree in ({1: 2.0}, {True: 2.0}, {1.0: 2.0}):
        leaves, structure = flatten(tree)
        back = unflatten(structure, leaves)
        assert back == tree and [type(k) for k in back] == [type(k) for k in tree]


def test_a_structure_nested_deeper_than_the_parser_takes_is_walked():
    from phylanx_py.pytree import flatten, unflatten

    tree = 1.0
    for _ in range(300):
        tree = [tree]
    leaves, structure = flatten(tree)
    assert unflatten(structure, leaves) == tree
