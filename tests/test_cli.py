"""The ``phylanx-py`` command (tree, profile) and the progress line of long Dask calls (on a real pty)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest
from cluster import DaskProcesses

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
CLI = [sys.executable, "-m", "phylanx_py.cli"]


def test_tree_command_draws_the_function(tmp_path):
    out = tmp_path / "tree.svg"
    done = subprocess.run(CLI + ["tree", f"{EXAMPLES}/lra.py:lra", "-o", str(out), "--text"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("function lra  (lra.py:")
    assert f"wrote {out}" in done.stdout
    texts = {t.text for t in ET.parse(out).iter("{http://www.w3.org/2000/svg}text")}
    assert {"__matmul", "exp", "__minus", "line 25"} <= texts


def test_profile_command_prints_the_table_and_writes_the_report(tmp_path):
    out = tmp_path / "report.html"
    done = subprocess.run(CLI + ["profile", "-o", str(out), f"{EXAMPLES}/lra.py", "--iterations", "7",
                                 "--rows", "2000", "--repeats", "1"], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "7 iterations" in done.stdout  # the script's own output: the arguments after it came through
    header = [line for line in done.stdout.splitlines() if line.startswith("node ")]
    assert header and header[0].split()[:4] == ["node", "where", "calls", "total"]
    # the sigmoid ran 2 calls x 7 iterations, inside the row-product group of line 26 (passes/rowdot.py): one
    # row named by its contents, timed as it ran
    group = "fused_rowdot[T, matmul, neg, exp, add, truediv, sub]"
    (row,) = [line[len(group):].split() for line in done.stdout.splitlines() if line.startswith(group)]
    assert row[:2] == ["lra.py:26:26", "14"]
    assert any(line.startswith("wall ") and " of lra; kernels " in line for line in done.stdout.splitlines())
    page = out.read_text()
    assert "<svg" in page and "<script" not in page


def test_run_passes_the_arguments_after_the_script_to_it_and_says_where_work_ran(tmp_path):
    script = tmp_path / "args.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import phylanx_py as px

        @px.compile
        def double(x):
            return 2 * x

        print("argv", sys.argv[1:])
        print("sum", double(np.ones(10)).sum())
    """))
    done = subprocess.run(CLI + ["run", str(script), "--iterations", "50", "--local-cluster", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "argv ['--iterations', '50', '--local-cluster', '2']" in done.stdout
    assert "sum 20.0" in done.stdout
    assert ("[phylanx-py] 1 compiled call: 0 tasks ran on the thread pool; the other primitive calls ran inline "
            "in this process (scalar work, and arrays under the inline threshold of 65,536 elements") in done.stderr
    helptext = subprocess.run(CLI + ["run", "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "arguments after SCRIPT go to the script" in " ".join(helptext.split())


def test_run_on_a_local_cluster_trains_the_digits_there_and_says_so():
    """``phylanx-py run --local-cluster 2 examples/digits.py``: the parallel run trains on the cluster ``run``
    started (the example started a second one before, and the summary said "the workers did nothing")."""
    pytest.importorskip("sklearn")
    done = subprocess.run(CLI + ["run", "--local-cluster", "2", f"{EXAMPLES}/digits.py", "--epochs", "1", "--quiet",
                                 "--only", "allreduce"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "MLP, parallel='allreduce'" in done.stdout
    (summary,) = [line for line in done.stderr.splitlines() if " compiled call" in line]
    assert re.fullmatch(r"\[phylanx-py\] \d+ compiled calls and 1 parallel fit: \d+ primitive tasks ran on the "
                        r"workers, and 1 segment \(parallel training, SPMD loops\) ran there as 2 long-running "
                        r"ranks, each running many steps; the other primitive calls ran inline in this process .*",
                        summary), summary


def test_tree_says_where_it_wrote_and_never_replaces_a_file_without_o(tmp_path):
    (tmp_path / "lra.svg").write_text("mine")
    done = subprocess.run(CLI + ["tree", f"{EXAMPLES}/lra.py:lra"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1
    assert f"phylanx-py tree: {tmp_path / 'lra.svg'} exists; give -o lra.svg to overwrite it" in done.stderr
    assert (tmp_path / "lra.svg").read_text() == "mine"
    done = subprocess.run(CLI + ["tree", f"{EXAMPLES}/lra.py:lra", "-o", "lra.svg"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"wrote {tmp_path / 'lra.svg'}" in done.stdout and "<svg" in (tmp_path / "lra.svg").read_text()


LONG = textwrap.dedent("""
    import sys
    import numpy as np
    import phylanx_py as px

    @px.compile
    def slow(x, n):
        for i in range(n):
            x = np.sqrt(x * x + 1.0)
        return x.sum()

    rt = px.runtime.dask(sys.argv[1], inline_elements=0)  # every step a task on the worker
    with px.using(rt):
        print("result", slow(np.ones(400_000), 300))
    rt.close()
""")


@pytest.fixture(scope="module")
def one_worker():
    procs = DaskProcesses(n_workers=1)
    yield procs
    procs.stop()


@pytest.mark.timeout(240)
def test_progress_line_on_a_terminal_only(one_worker, tmp_path):
    script = tmp_path / "long.py"
    script.write_text(LONG)
    primary, secondary = os.openpty()  # a real terminal for the child's stderr
    try:
        # the line shows from 0.1 s on, so a fast machine still shows it
        env = {**os.environ, "PHYLANX_PROGRESS_DELAY": "0.1"}
        child = subprocess.Popen([sys.executable, str(script), one_worker.address], stdout=subprocess.PIPE,
                                 stderr=secondary, text=True, env=env)
        os.close(secondary)
        chunks = []
        while True:
            try:
                data = os.read(primary, 4096)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data.decode(errors="replace"))
        out, _ = child.communicate(timeout=200)
    finally:
        os.close(primary)
    terminal = "".join(chunks)
    assert child.returncode == 0, terminal
    assert out.startswith("result ")
    # one fused task a step (sqrt(x * x + 1)), and the sum: tasks done and running, never a fraction (the total
    # is not known while the loop issues them)
    shown = re.findall(r"\[phylanx-py\] ([\d,]+) tasks done, ([\d,]+) in flight, [\d.]+ s", terminal)
    assert shown and all(int(d.replace(",", "")) + int(r.replace(",", "")) <= 301 for d, r in shown), terminal[-500:]
    assert "/301" not in terminal
    # not a terminal: nothing on stderr
    done = subprocess.run([sys.executable, str(script), one_worker.address], capture_output=True, text=True,
                          timeout=200, env=env)
    assert done.returncode == 0 and "[phylanx-py]" not in done.stderr
