"""benchmarks/train_fit.py's smoke run (no JAX needed): fit of simplemlp and of the digits CNN against the same
step hand-written in NumPy, from the same weights on the same batches; the script exits with status 1 when the
losses disagree, so this checks that the hand-written steps are the steps fit takes."""
from __future__ import annotations

import os
import re
import runpy
import sys

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def test_quick_run_agrees_with_the_hand_written_numpy_step(monkeypatch, capsys):
    monkeypatch.syspath_prepend(BENCHMARKS)
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "PHYLANX_NUM_THREADS"):
        monkeypatch.setenv(v, "2")  # the script sets them as a script does; restored after the test
    monkeypatch.setattr(sys, "argv", ["train_fit.py", "--quick", "--skip-jax", "--samples", "256", "--digits", "128"])
    try:
        runpy.run_path(os.path.join(BENCHMARKS, "train_fit.py"), run_name="__main__")
    except SystemExit as e:
        assert e.code == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "MISMATCH" not in out
    for kind in ("mlp", "cnn"):
        assert re.search(rf"^{kind}: \d+ samples, batch 64", out, re.M), out
    assert len(re.findall(r"^numpy \(hand-written step\)\s+float32", out, re.M)) == 2, out
    assert "JAX rows skipped" in out
