"""benchmarks/npbench.py on a tiny suite written here in NPBench's layout (bench_info/<name>.json, and under
npbench/benchmarks/<relative_path>/ the initialize module, <module>_numpy.py and <module>_numba_n.py): no NPBench
checkout needed. One kernel is right, one phylanx-py cannot compile, one gives a different answer at every call;
the run reports them all and finishes."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "npbench.py")

INIT = """\
import numpy as np


def initialize(N):
    A = np.linspace(0.0, 1.0, N)
    return A, np.zeros(N)
"""

KERNELS = {  # name -> body of its _numpy.py kernel (the _numba_n.py one is the same under @nb.jit)
    "smooth": """\
def kernel(TSTEPS, A, B):
    for t in range(TSTEPS):
        B[1:] = 0.5 * (A[1:] + A[:-1])
        A[:] = 0.9 * B
    return A.sum()
""",
    "broken": """\
def kernel(TSTEPS, A, B):
    try:
        B[:] = A + TSTEPS
    except ValueError:
        B[:] = A
    return B
""",
    "noisy": """\
def kernel(TSTEPS, A, B):
    return A + np.random.random(A.shape)
""",
}
NUMBA = {"broken": """\
def kernel(TSTEPS, A, B):
    B[:] = A + TSTEPS
    return B
"""}


def write_suite(root) -> None:
    for name, body in KERNELS.items():
        info = {"benchmark": {
            "name": name, "short_name": name, "relative_path": f"fake/{name}", "module_name": name,
            "func_name": "kernel", "parameters": {"S": {"TSTEPS": 30, "N": 64}, "M": {"TSTEPS": 60, "N": 256}},
            "init": {"func_name": "initialize", "input_args": ["N"], "output_args": ["A", "B"]},
            "input_args": ["TSTEPS", "A", "B"], "array_args": ["A", "B"], "output_args": ["A", "B"]}}
        (root / "bench_info").mkdir(exist_ok=True)
        (root / "bench_info" / f"{name}.json").write_text(json.dumps(info))
        folder = root / "npbench" / "benchmarks" / "fake" / name
        folder.mkdir(parents=True)
        (folder / f"{name}.py").write_text(INIT)
        (folder / f"{name}_numpy.py").write_text("import numpy as np\n\n\n" + body)
        (folder / f"{name}_numba_n.py").write_text("import numpy as np\nimport numba as nb\n\n\n"
                                                   "@nb.jit(nopython=True, parallel=False, fastmath=True)\n"
                                                   + NUMBA.get(name, body))


def table(stdout: str) -> dict[str, list[str]]:
    """The final table's rows by kernel name, split into columns (two or more spaces apart)."""
    lines = stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("kernel "))
    headers = re.split(r"\s{2,}", lines[head].strip())
    rows = {}
    for line in lines[head + 2:]:
        if not line.strip() or not line[0].isalpha() or line.startswith(("px ok", "S (", "load")):
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = dict(zip(headers, cells))
    return rows


def run_script(suite, *options) -> tuple[int, str]:
    done = subprocess.run([sys.executable, SCRIPT, "--suite", str(suite), "--preset", "S", "--repeat", "2",
                           "--settle-seconds", "1", "--timeout", "100", *options],
                          capture_output=True, text=True, timeout=110, cwd=suite)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.timeout(120)
def test_the_script_runs_a_suite_in_npbench_layout(tmp_path):
    """Two runs: "smooth" with its Numba version, then the others without (a child's first Numba compile sets
    Numba up, several seconds on a busy machine)."""
    suite = tmp_path / "suite"
    suite.mkdir()
    write_suite(suite)
    out = tmp_path / "rows.json"
    status, text = run_script(suite, "--only", "smooth", "--json", str(out))
    assert status == 0, text
    assert "command: python " in text and "load at start: " in text and "load at end: " in text, text
    smooth = table(text)["smooth"]
    assert (smooth["px ok"], smooth["nb ok"]) == ("yes", "yes"), text
    assert smooth["tier (px, settled)"].startswith("L"), text  # its loop: "L5 so far", "L5 native", ...
    assert float(smooth["px early x"]) > 0 and float(smooth["nb early x"]) > 0, text
    assert smooth["px native s"] == "-" or float(smooth["px native s"]) > 0, text  # its loop native by then, or not
    assert "S (1 kernels): phylanx-py correct 1/1, Numba correct 1/1" in text, text
    saved = json.loads(out.read_text())
    assert [r["name"] for r in saved["rows"]] == ["smooth"] and saved["command"].startswith("python "), saved

    status, text = run_script(suite, "--skip", "smooth", "--no-numba")
    assert status == 1, text  # "noisy": a wrong answer
    rows = table(text)
    assert set(rows) == {"broken", "noisy"}, text
    assert rows["broken"]["px ok"] == "NO" and rows["broken"]["nb ok"] == "-", text
    assert "px: CompileError: " in text and "unsupported construct: 'try' statement" in text, text
    assert rows["noisy"]["px ok"] == "NO" and "px wrong: output 0: relative error" in text, text
    assert "S (2 kernels): phylanx-py correct 0/2" in text, text
    assert text.rstrip().endswith("phylanx-py gave a wrong answer: noisy"), text


def _script():
    spec = importlib.util.spec_from_file_location("npbench_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_validation_is_npbenchs_rule():
    v = _script().validate
    info = {}
    ref = [np.array([1.0, 2.0, 3.0])]
    assert v(ref, [ref[0] * (1 + 1e-7)], info)[0]  # allclose
    big = np.arange(1.0, 1e5)
    off = big.copy()
    off[0] += 1e-4  # fails allclose at element 0, relative norm error ~1e-11
    assert v([big], [off], info)[0]
    assert not v(ref, [ref[0] + 0.1], info)[0]
    assert v(ref, [ref[0] + 0.1], {"rtol": 0.1})[0]  # the kernel's own tolerance from its bench_info
    assert v(ref, [ref[0] + 0.1], {"norm_error": 0.1})[0]
    # NPBench zips the outputs: another implementation may give fewer (adi's _numba_n returns nothing); the
    # compiled function, the NumPy function itself, gives as many, of the same shapes
    assert v(ref + ref, ref, info)[0] and not v(ref + ref, ref, info, same_function=True)[0]
    assert not v(ref, [ref[0][:2]], info, same_function=True)[0]


def test_tier_summary():
    s = _script().tier_summary
    assert s("no loops") == "no loops"
    explain = textwrap.dedent("""\
        loop at k.py:6 -> native (3 args: float64[:], float64[:], int; compiled in 4.32 s; 0 native runs)
        function at k.py:4 -> native (whole function, 3 args: int; compiled in 4.03 s; 3 native runs; sequential: x)""")
    assert s(explain) == "whole fn native"
    explain = textwrap.dedent("""\
        loop at k.py:6 -> interpreted: __matmul has no native form (k.py:8)
        loop at k.py:9 -> interpreted so far (5.1 ms; native after 50 ms, compiling)
        function at k.py:4 -> interpreted: __matmul has no native form (k.py:8)""")
    assert s(explain) == "L6 interp: __matmul has no native form; L9 so far (compiling); " \
        "fn interp: __matmul has no native form"
