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


def test_the_parallel_runs_use_the_dask_runtime_they_run_on_and_count_there(digits):
    """Run on a Dask runtime (as ``phylanx-py run --local-cluster 2`` runs it), the parallel runs train on its
    workers instead of starting a second cluster, leave it open, and its counts (``phylanx-py run``'s summary) hold
    the training that ran there. Before, the summary said "the workers did nothing"."""
    import phylanx_py as px
    from phylanx_py.cli import _where_work_ran

    mod, (Xtr, Xte, Ytr, Yte) = digits
    procs = DaskProcesses(n_workers=2)
    try:
        with px.runtime.dask(procs.address) as rt, px.using(rt):
            (row,) = mod.run_parallel(["allreduce"], Xtr, Ytr, Xte, Yte, 2, 4, False)
            assert not rt.closed
            # its two epochs with validation run as one span: one segment of two ranks (one segment an epoch before)
            assert {k: rt.counts[k] for k in ("fits", "segments", "ranks")} == {"fits": 1, "segments": 1, "ranks": 2}
            summary = _where_work_ran(rt)
            assert summary.startswith(f"{rt.counts['calls']} compiled calls and 1 parallel fit: "
                                      f"{rt.counts['tasks']:,} primitive tasks ran on the workers, and 1 segment "
                                      "(parallel training, SPMD loops) ran there as 2 long-running ranks, each running "
                                      "many steps; the other primitive calls ran inline in this process"), summary
            assert "did nothing" not in summary
    finally:
        procs.stop()
    assert row[0] == "MLP, parallel='allreduce'"
