"""benchmarks/numpy_benchmarks.py on a tiny suite written here in numpy-benchmarks' layout
(numpy_benchmarks/benchmarks/<name>.py, each with a ``#setup:`` and a ``#run:`` header line): no checkout needed. One
kernel returns an array, one writes into its argument and returns None, one phylanx-py refuses (a ``try``
statement), and one is fed inputs that change after the first call, so its plain output changes between calls while
each compiled answer still equals the plain one of its round; the run reports them all and finishes."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "numpy_benchmarks.py")

KERNELS = {
    # element-wise, returns a new array
    "blend": """\
#setup: import numpy as np ; w = np.linspace(-1.0, 1.0, 48) ; z = np.arange(48.0)
#run: blend(w, z)
import numpy as np


def blend(w, z):
    return np.abs(w) * 3.0 + np.sqrt(z) - w * z
""",
    # works in place, returns None: judged by what it left in its first argument
    "smooth3": """\
#setup: import numpy as np ; acc = np.zeros(40) ; src = np.linspace(2.0, 5.0, 40)
#run: smooth3(acc, src, 3)
def smooth3(acc, src, steps):
    for _ in range(steps):
        acc[1:-1] = 0.5 * acc[1:-1] + 0.25 * (src[2:] + src[:-2])
""",
    # a construct phylanx-py refuses: its row says CompileError, at the try's line
    "guarded": """\
#setup: import numpy as np ; q = np.full(6, 2.0)
#run: guarded(q)
def guarded(q):
    try:
        return q / q.sum()
    except ZeroDivisionError:
        return q
""",
    # the setup counts its runs (in the child process, on the sys module): the script's first run only checks the
    # setup, the second feeds the plain reference call, every later one gives other inputs. So the plain output
    # changes once, after the reference, and the compiled call of each round gets the plain call's inputs
    "drift": "#setup: import sys, itertools, numpy as np ; "
             'n = next(sys.__dict__.setdefault("_drift_runs", itertools.count())) ; '
             "d = np.full(5, 1.0 if n < 2 else 3.0)\n" """\
#run: drift(d)
def drift(d):
    return d * d + 0.5
""",
}
GUARDED_TRY_LINE = KERNELS["guarded"].splitlines().index("    try:") + 1


def write_suite(root) -> None:
    folder = root / "numpy_benchmarks" / "benchmarks"
    folder.mkdir(parents=True)
    for name, text in KERNELS.items():
        (folder / f"{name}.py").write_text(text)
    (folder / "helper.py").write_text("X = 1\n")  # no header lines: not a kernel


def table(stdout: str) -> dict[str, str]:
    """The final table's "ok" column by kernel name."""
    lines = stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("kernel "))
    rows = {}
    for line in lines[head + 2:]:
        if not line.strip() or line.startswith("ok: "):
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = cells[1]
    return rows


@pytest.mark.timeout(90)
def test_the_script_runs_a_suite_in_numpy_benchmarks_layout(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    write_suite(suite)
    out = tmp_path / "rows.json"
    done = subprocess.run([sys.executable, SCRIPT, "--suite", str(suite), "--repeat", "2", "--settle-seconds", "0",
                           "--timeout", "60", "--cold", "--json", str(out)],
                          capture_output=True, text=True, timeout=80, cwd=tmp_path)
    text = done.stdout + done.stderr
    assert done.returncode == 0, text  # no compiled answer was wrong
    assert "command: python " in text and "load at start: " in text and "load at end: " in text, text
    assert "4 kernels; 2 rounds" in text, text  # helper.py has no header lines
    assert "kernel cache: fresh per kernel" in text, text  # --cold: nothing left in the user's kernel cache
    assert table(text) == {"blend": "yes", "drift": "yes", "guarded": "CompileError", "smooth3": "yes"}, text
    assert re.search(rf"CompileError: guarded\.py:{GUARDED_TRY_LINE}:\d+: .*'try' statement", text), text
    assert "plain output changes between calls (result: " in text, text
    assert "correct 3/4; geomean speed-up over plain: early " in text, text
    assert f"rows saved to {out}" in text and "wrong answer" not in text, text

    saved = json.loads(out.read_text())
    assert (saved["repeat"], saved["settle_seconds"], saved["cold"]) == (2, 0, True), saved
    assert saved["command"].startswith("python ") and saved["seconds"] > 0, saved
    rows = {r["name"]: r for r in saved["rows"]}
    assert list(rows) == ["blend", "drift", "guarded", "smooth3"], saved
    for name in ("blend", "drift", "smooth3"):
        row = rows[name]
        assert row["ok"] is True and row["stage"] is None, row
        assert not {"why", "px_error", "crash", "exit_crash", "compile_error"} & set(row), row
        assert len(row["np_calls"]) == len(row["px_calls"]) == 2, row
        assert len(row["np_settled_calls"]) == len(row["px_settled_calls"]) == 5, row
        for key in ("np_first", "np_before_px", "px_compile", "px_first", "np_ms", "early_x", "settled_x"):
            assert row[key] > 0, (key, row)
        assert row["explain"] and not row["explain"].startswith("explain() failed"), row
    assert "plain_changes" not in rows["blend"] and "plain_changes" not in rows["smooth3"], saved
    assert rows["drift"]["plain_changes"].startswith("result: 5 of 5 elements differ"), rows["drift"]
    guarded = rows["guarded"]
    assert guarded["compile_error"].startswith(f"CompileError: guarded.py:{GUARDED_TRY_LINE}:"), guarded
    assert "ok" not in guarded and "px_first" not in guarded and guarded["stage"] is None, guarded


def _script():
    spec = importlib.util.spec_from_file_location("numpy_benchmarks_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)  # (it puts benchmarks/ first on sys.path to import npbench)
    finally:
        sys.path[:] = path
    return module


def test_same_is_the_docstrings_rule():
    s = _script()
    a = np.array([1.0, 2.0, 3.0])
    assert s.same(a, a * (1 + 1e-8)) == ""  # allclose, rtol 1e-7
    assert "1 of 3 elements differ" in s.same(a, a + np.array([0.0, 0.0, 1e-3]))
    assert "dtype float32" in s.same(a, a.astype(np.float32))
    assert "shape (2,)" in s.same(a, a[:2])
    assert "1 of 3" in s.same(np.arange(3), np.array([0, 1, 3]))  # integers: equal, no tolerance
    assert s.same(None, None) == "" and s.same(None, a) and s.same(a, None)
    assert s.same((a, 1.0), [a, 1.0]) == "" and "[1]" in s.same((a, 1.0), (a, 2.0))
    assert s.same(np.array([np.nan]), np.array([np.nan])) == ""
    # a kernel that returns None is judged by its array arguments after the call
    assert s.same_call((None, (a, 3)), (None, (a.copy(), 3))) == ""
    assert s.same_call((None, (a, 3)), (None, (a + 1, 3))).startswith("argument 0 after the call")
