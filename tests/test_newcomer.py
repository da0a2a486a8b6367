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


BAD = '''import numpy as np
import phylanx_py as px


@px.compile
def load(path):
    with open(path) as f:
        return f.read()


@px.compile
def predict(X, w):
    h = X @ w
    return h + 1


if __name__ == "__main__":
    import sys
    if sys.argv[1] == "compile":
        load("x")
    else:
        predict(np.ones((3, 4)), np.ones(5))
'''


def _run_bad(tmp_path, what, debug=False):
    import os
    import subprocess
    import sys

    script = tmp_path / "bad.py"
    script.write_text(BAD)
    env = {k: v for k, v in os.environ.items() if k != "PHYLANX_DEBUG"}
    if debug:
        env["PHYLANX_DEBUG"] = "1"
    done = subprocess.run([sys.executable, str(script), what], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1
    return done.stderr, str(script)


def test_compile_error_traceback_ends_at_the_users_line_without_translator_frames(tmp_path):
    err, path = _run_bad(tmp_path, "compile")
    lines = err.splitlines()
    frames = [line.strip() for line in lines if line.strip().startswith("File ")]
    assert frames[0] == f'File "{path}", line 20, in <module>'
    assert frames[-2:] == [f'File "{path}", line 7, in load'] * 2  # the last frame, then the message's
    assert not any("translate.py" in f or "program.py" in f for f in frames)
    assert len(frames) == 5  # the call, two of the decorator's, the user's line, the message's
    at = lines.index(f'  File "{path}", line 7, in load')
    assert lines[at + 1] == "    with open(path) as f:"
    assert lines[at + 2] == f"phylanx_py.errors.CompileError: {path}:7:5: unsupported construct: 'with' statement"
    debug, _ = _run_bad(tmp_path, "compile", debug=True)
    assert "translate.py" in debug  # PHYLANX_DEBUG=1: every frame


def test_runtime_error_shows_generated_source_under_a_readable_name(tmp_path):
    import linecache
    import traceback

    err, path = _run_bad(tmp_path, "run")
    assert 'File "<phylanx predict at bad.py:12>", line 8, in predict' in err
    assert f"ExecutionError: {path}:13:9: in primitive '__matmul'" in err
    # in this process: traceback / pdb read the generated lines from linecache
    import runpy

    predict = runpy.run_path(path, run_name="bad")["predict"]
    assert "# bad.py:13: h = X @ w" in predict.source
    with pytest.raises(px.ExecutionError) as e:
        predict(np.ones((3, 4)), np.ones(5))
    (frame,) = traceback.extract_tb(e.value.__cause__.__traceback__)
    assert (frame.filename, frame.name) == ("<phylanx predict at bad.py:12>", "predict")
    assert frame.line.endswith("# bad.py:13: h = X @ w")
    assert linecache.getline(frame.filename, frame.lineno).rstrip().endswith("# bad.py:13: h = X @ w")


def test_trace_error_is_exported_and_float_class_labels_are_accepted():
    from phylanx_py import nn

    assert issubclass(px.TraceError, px.PhylanxError) and "TraceError" in px.__all__
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((64, 8)), rng.integers(0, 3, 64)
    as_float = nn.Sequential([nn.Dense(8, 3)]).fit(X, Y.astype(np.float64), epochs=2, seed=0, verbose=False)
    as_int = nn.Sequential([nn.Dense(8, 3)]).fit(X, Y, epochs=2, seed=0, verbose=False)
    assert as_float["loss"] == as_int["loss"]
    with pytest.raises(px.PhylanxError, match="labels must be integers .class indices, one per row., got float64 "
                                               "with values that are not whole numbers"):
        nn.Sequential([nn.Dense(8, 3)]).fit(X, Y + 0.5, epochs=1, seed=0, verbose=False)


class _Terminal:
    """A stream that says it is a terminal, keeping what was written."""

    def __init__(self):
        self.parts = []

    def write(self, s):
        self.parts.append(s)

    def flush(self):
        pass

    def isatty(self):
        return True


def test_fit_shows_per_batch_progress_on_a_terminal_only(monkeypatch, capsys):
    from phylanx_py import nn

    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((96, 8)), rng.integers(0, 3, 96)
    term = _Terminal()
    monkeypatch.setattr("sys.stderr", term)
    nn.Sequential([nn.Dense(8, 3)]).fit(X, Y, epochs=2, batch_size=32, seed=0)
    text = "".join(term.parts)
    # the last batch of each epoch is always drawn, then the line is cleared for the epoch's summary line
    assert "\r\x1b[Kepoch 1/2 [====================] 3/3 batches  loss " in text
    assert "\r\x1b[Kepoch 2/2 [====================] 3/3 batches  loss " in text
    assert text.count("\r\x1b[K") >= 4
    monkeypatch.undo()
    nn.Sequential([nn.Dense(8, 3)]).fit(X, Y, epochs=2, batch_size=32, seed=0)  # not a terminal: no bar
    assert "batches" not in capsys.readouterr().err


def test_progress_line_counts_tasks_without_a_fraction(monkeypatch):
    import time

    from phylanx_py.runtime import progress

    # the tree's tasks are what the line counts: the native tier off (tests/test_cli.py compiles the same loop
    # earlier in a run, so its kernel came from the kernel cache at once and no call made a task: CI failed)
    monkeypatch.setenv("PHYLANX_NATIVE", "0")

    @px.compile
    def slow(x, n):
        for _ in range(n):
            x = np.sqrt(x * x + 1.0)
        return x.sum()

    term = _Terminal()
    ev_seen = []
    original = progress.Progress

    def spy(ev, stream=None, delay=None):
        ev_seen.append(ev)
        return original(ev, stream=term, delay=0.0)

    with px.runtime.local(inline_elements=0, progress=True) as rt, px.using(rt):
        try:
            progress.Progress = spy
            t0 = time.monotonic()
            while time.monotonic() - t0 < 0.3:  # long enough for the watcher (every 0.1 s) to draw
                slow(np.ones(200_000), 20)
        finally:
            progress.Progress = original
    text = "".join(term.parts)
    assert ev_seen and "tasks done, " in text and " in flight, " in text and "/" not in text


def test_primitive_names_are_numpys_unless_internal_ones_are_asked_for():
    from phylanx_py import primitives

    public, every = primitives.names(), primitives.names(internal=True)
    assert {"exp", "matmul", "linalg.norm", "random.normal"} <= set(public)
    assert not {"ad.index_add", "fused.elementwise", "operator.add", "method.sum"} & set(public)
    assert {"ad.index_add", "fused.elementwise", "operator.add"} <= set(every) and set(public) < set(every)
