"""examples/digits.py reaches its promised test accuracy (>= 97% on the 360 held-out digits) in every mode: the MLP
and the CNN in this process, the MLP with allreduce and with neighbour averaging on two real Dask workers."""
from __future__ import annotations

import importlib.util
import os

import pytest
from cluster import DaskProcesses

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "digits.py")


@pytest.fixture(scope="module")
def digits():
    spec = importlib.util.spec_from_file_location("digits_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, mod.load()


def test_mlp_reaches_97_percent(digits):
    mod, (Xtr, Xte, Ytr, Yte) = digits
    assert (len(Xtr), len(Xte)) == (1437, 360)
    _, acc, _, _ = mod.run_local("mlp", mod.mlp(), Xtr, Ytr, Xte, Yte, 30, False)
    assert acc >= 0.97


def test_cnn_reaches_97_percent(digits):
    mod, (Xtr, Xte, Ytr, Yte) = digits
    img = (-1, 1, 8, 8)
    _, acc, _, _ = mod.run_local("cnn", mod.cnn(), Xtr.reshape(img), Ytr, Xte.reshape(img), Yte, 30, False)
    assert acc >= 0.97


def test_mlp_reaches_97_percent_with_allreduce_and_with_neighbours_on_two_workers(digits):
    mod, (Xtr, Xte, Ytr, Yte) = digits
    procs = DaskProcesses(n_workers=2)
    try:
        rows = mod.run_parallel(["allreduce", "neighbours"], Xtr, Ytr, Xte, Yte, 30, 4, False, procs.address)
    finally:
        procs.stop()
    for name, acc, _, extra in rows:
        assert acc >= 0.97, name
        assert extra["bytes/step"] <= 1.2 * extra["min bytes/step"], name
