"""The examples a scientist recognises (examples/*.py): each runs on small sizes and agrees with plain NumPy
(the scripts exit with status 1 when it does not), locally and, in one test, on real Dask worker processes."""
from __future__ import annotations

import os
import re
import runpy
import sys

import pytest
from cluster import DaskProcesses

import phylanx_py as px

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
SMALL = {
    "lra.py": ["--rows", "2000", "--iterations", "20"],
    "logreg.py": ["--iterations", "50", "--profile"],
    "kmeans.py": ["--points", "4000", "--iterations", "4"],
    "als.py": ["--users", "120", "--items", "60", "--rank", "5", "--iterations", "3"],
    "pca.py": ["--samples", "3000", "--features", "8", "--components", "3"],
    "mlp.py": ["--steps", "5", "--hidden", "16"],
    "quickstart.py": ["--size", "40", "--sweeps", "2"],
}


def run_example(name, monkeypatch, capsys, args=None) -> str:
    monkeypatch.syspath_prepend(EXAMPLES)
    args = SMALL[name] if args is None else args
    monkeypatch.setattr(sys, "argv", [os.path.join("examples", name), *args, "--repeats", "1"])
    runpy.run_path(os.path.join(EXAMPLES, name), run_name="__main__")  # SystemExit when results differ
    return capsys.readouterr().out


def differences(out: str) -> list[float]:
    return [float(m) for m in re.findall(r"max \|phylanx-py - NumPy\|[^=]*= (\S+)", out)]


@pytest.mark.parametrize("name", sorted(SMALL))
def test_example_agrees_with_numpy_and_prints_both_times(name, monkeypatch, capsys):
    out = run_example(name, monkeypatch, capsys)
    diffs = differences(out)
    assert diffs and max(diffs) < 1e-6, out
    assert " ms" in out and any(f"than {plain}" in out for plain in ("plain NumPy", "NumPy", "the plain function")), out
    assert f"phylanx-py run --local-cluster 2 examples/{name}" in out
    if name == "logreg.py":  # the profile of the logistic regression: its groups named by their contents
        assert "fused[add, neg, exp, truediv]  logreg.py:25:13   " in out, out
    if name == "kmeans.py":
        assert "labels equal: True" in out
    if name == "quickstart.py" and os.environ.get("PHYLANX_NATIVE", "1") != "0":  # it waits for the native kernel
        with open(os.path.join(EXAMPLES, name)) as source:  # explain() names the line of ``def relax``
            line = next(i for i, text in enumerate(source, 1) if text.startswith("def relax("))
        assert f"explain(): function at quickstart.py:{line} -> native (whole function, 3 args: float64[:, :], " \
               "int, float; ...)" in out, out


@pytest.mark.timeout(300)
def test_examples_on_dask_workers(monkeypatch, capsys):
    from phylanx_py.cli import _where_work_ran

    procs = DaskProcesses(n_workers=2)
    try:
        rt = px.runtime.dask(procs.address, inline_elements=0)  # every array operation a task on the workers
        try:
            with px.using(rt):
                for name, args in (("kmeans.py", ["--points", "4000", "--iterations", "2"]),
                                   ("pca.py", SMALL["pca.py"]), ("logreg.py", ["--iterations", "5"])):
                    out = run_example(name, monkeypatch, capsys, args)
                    assert max(differences(out)) < 1e-6, out
                    assert "runtime: <phylanx runtime dask tcp://127.0.0.1:" in out
                    assert "phylanx-py run --local-cluster 2" not in out  # already on a cluster
            assert rt.counts["tasks"] > 0
            assert _where_work_ran(rt).startswith(f"{rt.counts['calls']} compiled calls: {rt.counts['tasks']:,} "
                                                  "tasks ran on the workers; the other primitive calls ran inline")
        finally:
            rt.close()
    finally:
        procs.stop()
