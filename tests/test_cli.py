"""The ``phylanx-py`` command (tree, profile, run, its errors and help) and the progress line of long Dask calls
(on a real pty)."""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest
from cluster import DaskProcesses

from phylanx_py import cli

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
CLI = [sys.executable, "-m", "phylanx_py.cli"]
# the console script pip installed (what users type), else the module
SCRIPT = os.path.join(os.path.dirname(sys.executable), "phylanx-py")
COMMAND = [SCRIPT] if os.path.exists(SCRIPT) else CLI


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


# ---- errors: a PhylanxError is its message on stderr and exit status 1; PHYLANX_DEBUG=1 keeps the traceback --------
def _cli(args, **env):
    """The console script run with ``args``, PHYLANX_DEBUG unset unless ``env`` sets it."""
    environ = {k: v for k, v in os.environ.items() if k != "PHYLANX_DEBUG"}
    environ.update(env)
    return subprocess.run(COMMAND + args, capture_output=True, text=True, timeout=180, env=environ)


REFUSED = ("phylanx-py info: ClusterError: cannot reach the Dask scheduler at tcp://127.0.0.1:1: connection refused "
           "(nothing listens there: start `dask scheduler`, or check the address)")


def test_a_phylanx_error_is_one_line_on_stderr_and_exit_status_1():
    done = _cli(["info", "--scheduler", "tcp://127.0.0.1:1"])
    assert (done.returncode, done.stderr) == (1, REFUSED + "\n")
    assert done.stdout.startswith("phylanx-py ")  # the versions came first, on stdout


def test_phylanx_debug_keeps_the_traceback():
    done = _cli(["info", "--scheduler", "tcp://127.0.0.1:1"], PHYLANX_DEBUG="1")
    assert done.returncode == 1
    assert done.stderr.startswith("Traceback (most recent call last):")
    assert done.stderr.splitlines()[-1] == "phylanx_py.errors.ClusterError: " + REFUSED.split("ClusterError: ", 1)[1]


BAD = textwrap.dedent("""
    import numpy as np
    import phylanx_py as px

    @px.compile
    def f(x):
        return x[10]

    print(f(np.ones(20)))
    print(f(np.ones(3)))
""")


def test_run_shows_the_whole_message_of_an_error_at_a_line_of_the_script(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text(BAD)
    done = _cli(["run", str(script)])
    assert done.returncode == 1
    # no traceback of phylanx-py's own frames, and no summary of where work ran: the message, whose first line says
    # what failed and whose next lines show the script's line, as the error itself does
    assert done.stderr.splitlines() == [
        f"phylanx-py run: ExecutionError: {script}:7:12: in primitive 'slice_at': IndexError: index 10 is out of "
        "bounds for axis 0 with size 3",
        f'  File "{script}", line 7, in f',
        "    return x[10]",
        "           ^"]
    assert done.stdout == "1.0\n"


def test_a_refused_kernel_cache_is_one_line_naming_the_folder_and_the_variable(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    os.chmod(folder, 0o777)
    done = _cli(["run", f"{EXAMPLES}/lra.py", "--iterations", "2", "--repeats", "1"],
                PHYLANX_CACHE_DIR=str(folder), PHYLANX_FUSE="1")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"phylanx-py run: UnsafeCacheError: the kernel cache folder {folder} is writable by all users: phylanx-py "
        "imports and runs the kernels cached there, so it refuses a folder that others can write to. Set "
        "PHYLANX_CACHE_DIR to a folder only you can write to (e.g. one made with mode 0700), or remove the write "
        f"permission (chmod go-w {folder})."]
    assert os.listdir(folder) == []


def test_ctrl_c_exits_130_quietly(tmp_path):
    script = tmp_path / "interrupted.py"
    script.write_text("raise KeyboardInterrupt\n")
    done = _cli(["run", str(script)])
    assert (done.returncode, done.stderr) == (130, "")


# ---- help: every command listed with what it does, and an example of itself ---------------------------------------
def _commands() -> dict:
    """The parser's commands and their one-line help (a command added later is checked too)."""
    (sub,) = [a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {a.dest: a.help for a in sub._choices_actions}


def test_help_lists_every_command_with_what_it_does_and_an_example():
    commands = _commands()
    assert set(commands) == {"run", "profile", "tree", "info"}
    done = _cli(["--help"])
    assert done.returncode == 0
    text = done.stdout
    for name, helptext in commands.items():
        assert helptext and re.search(rf"^    {name} +{re.escape(helptext.split()[0])}", text, re.M), name
        assert re.search(rf"^  phylanx-py {name} \S", text, re.M), f"no example of {name}"
    description = text.split("\n\n")[1]  # the paragraph after the usage line names what each command does
    for verb in ("Run", "profile", "execution tree", "versions"):
        assert verb in description
    assert "PHYLANX_DEBUG=1" in text


@pytest.mark.parametrize("name", ["run", "profile", "tree", "info"])
def test_each_commands_help_shows_an_example_of_that_command(name):
    done = _cli([name, "--help"])
    assert done.returncode == 0
    named = re.findall(r"phylanx-py (run|profile|tree|info)\b", done.stdout)
    assert named and set(named) == {name}, done.stdout
    assert re.search(rf"^example:\n  phylanx-py {name} \S", done.stdout, re.M)
