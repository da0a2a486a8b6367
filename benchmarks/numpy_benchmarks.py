"""numpy-benchmarks (github.com/serge-sans-paille/numpy-benchmarks): each kernel run plainly by Python/NumPy and
compiled unchanged by phylanx-py (``px.compile``), in one process, on the suite's own inputs.

    python benchmarks/numpy_benchmarks.py --suite ~/numpy-benchmarks [--only harris,wave] [--json out.json]

Nothing of the suite is copied here: the kernels are read at run time from ``--suite`` (a checkout, or its
``numpy_benchmarks/benchmarks`` folder itself). Each ``<name>.py`` there is loaded as a module with importlib, and its
header gives the inputs and the call: ``#setup: <Python statements>`` and ``#run: <function>(<arguments>)``. The
setup is exec'd in a fresh namespace before every call, outside the timing, so each call gets fresh inputs (several
kernels write into their arguments: diffusion, cma_pt); the ``#run`` expression is then evaluated in that namespace
with the function's name bound to a recorder, which gives the arguments the call is made with.

Per kernel, in a fresh subprocess (this script with ``--one NAME``, killed with its process group after ``--timeout``
seconds), every call timed alone (``time.perf_counter`` around the call, garbage collection off, as ``timeit`` does):

1. The plain function's first call (its output is the reference every later plain call is checked against: a kernel
   whose plain output changes from call to call is flagged). Then one plain call, and ``px.compile`` plus the
   compiled function's first call, timed together: "px 1st/np" is that over the plain call just before it (> 1:
   slower).
2. ``--repeat`` rounds (10) of one plain call and one compiled call: "early" is the plain median over the compiled
   median in the first 5 rounds (> 1: compiled faster); the JSON also has every call's time.
3. Settling: the compiled function is called for up to ``--settle-seconds`` (5), or until nothing of its native tier
   is left to compile or choose (``_common.settle_native``); then 5 rounds of one plain and one compiled call:
   "settled", the same ratio.

Every compiled output is checked against the plain output of the same round (the first call against the plain call
just before it; the settling calls, which have no plain partner, against the reference when the plain function
gave the same output at every call): ``np.allclose(rtol=1e-7, atol=1e-9, equal_nan=True)``, the same shape and the
same dtype (booleans and integers equal); tuples and lists item by item; None only equals None. The array arguments,
as the call left them, are checked the same way, so a kernel that works in place (diffusion returns None) is
judged by what it wrote. A compile that raises ``CompileError`` (at ``px.compile`` or the first call) is reported in
the kernel's row, as is any other error, crash or timeout; the run goes on. The exit status is 1 if a compiled
function gave a wrong answer.

Geomeans of the early and settled ratios are over the kernels whose answers were all right; the summary also counts
the kernels slower than the plain function by more than 10% (ratio < 1/1.1) and first calls over 1.1x. ``--cold``
gives each kernel a fresh phylanx-py kernel cache (``PHYLANX_CACHE_DIR``), as benchmarks/npbench.py's ``--cold``
does; without it, kernels a previous run left in the cache load from disk.
"""
from __future__ import annotations

import argparse
import ast
import gc
import json
import os
import platform
import re
import shlex
import statistics
import sys
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from npbench import _error, _first_line, _version, child_row, geomean, load_module, load_text  # noqa: E402

ROW_MARK = "NUMPY-BENCHMARKS-ROW "  # a child's result line on its stdout (the last one counts)
SETUP_RE = re.compile(r"^#\s*setup:\s*(.*?)\s*$", re.MULTILINE)
RUN_RE = re.compile(r"^#\s*run:\s*(.*?)\s*$", re.MULTILINE)
RTOL, ATOL = 1e-7, 1e-9
EARLY_ROUNDS = SETTLED_ROUNDS = 5
SLOW = 1 / 1.1  # a ratio under this: slower than the plain function by more than 10%


# --- the suite's files -------------------------------------------------------------------------------------------

def kernel_dir(suite: str) -> str:
    """The folder of the kernel files: ``--suite`` itself, or its ``numpy_benchmarks/benchmarks``."""
    inner = os.path.join(suite, "numpy_benchmarks", "benchmarks")
    return inner if os.path.isdir(inner) else suite


def kernel_names(suite: str) -> list[str]:
    """The kernels: the ``.py`` files of the kernel folder that have both header lines, sorted."""
    folder = kernel_dir(suite)
    names = []
    for f in sorted(os.listdir(folder)):
        if f.endswith(".py") and not f.startswith("_"):
            with open(os.path.join(folder, f), encoding="utf-8") as fh:
                text = fh.read()
            if SETUP_RE.search(text) and RUN_RE.search(text):
                names.append(f[:-3])
    return names


class Kernel:
    """One kernel file: its module, the function its ``#run`` line calls, and fresh inputs on demand."""

    def __init__(self, suite: str, name: str):
        path = os.path.join(kernel_dir(suite), name + ".py")
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        self.setup = SETUP_RE.search(text).group(1)
        self.run = RUN_RE.search(text).group(1)
        call = ast.parse(self.run, mode="eval").body
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
            raise ValueError(f"#run is not a call of a function by name: {self.run}")
        self.func_name = call.func.id
        self.module = load_module(path, f"_npb2_{name}")
        self.fn = getattr(self.module, self.func_name)

    def inputs(self) -> tuple[tuple, dict]:
        """The call's arguments, made afresh: the setup exec'd in a new namespace, then the #run expression
        evaluated there with the function's name bound to a recorder of its arguments."""
        ns: dict = {}
        exec(self.setup, ns)  # noqa: S102 - the suite's own setup line, as its np-bench runner does
        ns[self.func_name] = lambda *args, **kwargs: (args, kwargs)
        return eval(self.run, ns)  # noqa: S307 - the suite's own #run line


def timed_call(fn, kernel: Kernel) -> tuple[float, object, tuple]:
    """(seconds, result, the arguments as the call left them): one call on fresh inputs, timed alone with the
    garbage collector off."""
    args, kwargs = kernel.inputs()
    enabled = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        result = fn(*args, **kwargs)
        seconds = time.perf_counter() - t0
    finally:
        if enabled:
            gc.enable()
    return seconds, result, args


# --- validation ----------------------------------------------------------------------------------------------------

def same(ref, val, where: str = "result") -> str:
    """'' if ``val`` is the same answer as ``ref``, else what differs (module docstring's rule)."""
    import numpy as np

    if ref is None or val is None:
        return "" if ref is None and val is None else f"{where}: {_kind(val)}, plain gives {_kind(ref)}"
    if isinstance(ref, (tuple, list)):
        if not isinstance(val, (tuple, list)) or len(val) != len(ref):
            return f"{where}: {_kind(val)}, plain gives {_kind(ref)}"
        for i, (r, v) in enumerate(zip(ref, val)):
            why = same(r, v, f"{where}[{i}]")
            if why:
                return why
        return ""
    try:
        r, v = np.asarray(ref), np.asarray(val)
    except Exception as e:  # noqa: BLE001 - not comparable as arrays: not the same answer
        return f"{where}: {_error(e)}"
    if r.dtype == object or v.dtype == object:
        return "" if _equal_objects(ref, val) else f"{where}: {val!r:.60} != plain {ref!r:.60}"
    if r.shape != v.shape:
        return f"{where}: shape {v.shape}, plain {r.shape}"
    if r.dtype != v.dtype:
        return f"{where}: dtype {v.dtype}, plain {r.dtype}"
    if r.dtype.kind in "biuSUV":
        close = bool(np.array_equal(r, v))
    else:
        close = bool(np.allclose(r, v, rtol=RTOL, atol=ATOL, equal_nan=True))
    if close:
        return ""
    if r.dtype.kind in "fc":
        bad = ~np.isclose(r, v, rtol=RTOL, atol=ATOL, equal_nan=True)
        err = np.abs(r - v)[bad]
        return f"{where}: {int(bad.sum())} of {r.size} elements differ, most by {float(err.max()):.3g}"
    return f"{where}: {int(np.sum(r != v))} of {r.size} elements differ"


def _equal_objects(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001
        return False


def _kind(x) -> str:
    if x is None:
        return "None"
    if isinstance(x, (tuple, list)):
        return f"{type(x).__name__} of {len(x)}"
    return type(x).__name__


def same_call(ref: tuple, val: tuple) -> str:
    """Result and array arguments after the call: ``ref`` and ``val`` are (result, args) of a plain and a compiled
    call on the same inputs."""
    import numpy as np

    why = same(ref[0], val[0])
    if why:
        return why
    for i, (r, v) in enumerate(zip(ref[1], val[1])):
        if isinstance(r, np.ndarray):
            why = same(r, v, f"argument {i} after the call")
            if why:
                return why
    return ""


# --- one kernel, in a child process --------------------------------------------------------------------------------

def explain_head(text: str, lines: int = 2, width: int = 90) -> str:
    """The first ``lines`` lines of ``explain()``, file paths left out (``fn ->``, ``L12 ->``), truncated."""
    out = []
    for line in text.strip().splitlines()[:lines]:
        line = re.sub(r"^function at \S+:\d+ ->", "fn ->", line)
        line = re.sub(r"^loop at \S+:(\d+) ->", r"L\1 ->", line)
        out.append(line)
    head = " | ".join(out)
    return head if len(head) <= width else head[:width - 3] + "..."


class PlainFailed(Exception):
    """The plain function raised: the kernel's own error on these inputs, not phylanx-py's (its row's
    ``plain_error``)."""


def run_one(suite: str, name: str, repeat: int, settle: float) -> None:
    """Measure one kernel, printing its row (``ROW_MARK`` + JSON) after each stage, so that a row is there even if a
    later stage hangs or crashes the process."""
    import warnings

    warnings.simplefilter("ignore")
    row: dict = {"name": name, "load": os.getloadavg()[0]}

    def emit(stage=None):
        row["stage"] = stage
        print(ROW_MARK + json.dumps(row), flush=True)

    def wrong(why: str, when: str) -> None:
        row["ok"] = False
        row.setdefault("why", f"{when}: {why}")

    emit("setup")
    try:
        kernel = Kernel(suite, name)
        kernel.inputs()
    except Exception as e:  # noqa: BLE001 - a kernel that cannot be set up: its row says why
        row["setup_error"] = _error(e)
        emit()
        return
    from _common import native_compiles_running, settle_native

    import phylanx_py as px

    # 1. first calls
    emit("plain first call")
    try:
        row["np_first"], result, args = timed_call(kernel.fn, kernel)
    except Exception as e:  # noqa: BLE001 - the plain function's own error: nothing to compare with
        row["plain_error"] = _error(e)
        emit()
        return
    reference = (result, args)
    plain_steady = True  # every plain call so far gave the reference's answer

    def plain():
        nonlocal plain_steady
        busy = native_compiles_running()
        try:
            seconds, result, args = timed_call(kernel.fn, kernel)
        except Exception as e:  # noqa: BLE001 - told apart from the compiled function's errors (PlainFailed)
            raise PlainFailed(_error(e)) from e
        row.setdefault("np_busy", []).append(busy or native_compiles_running())
        why = same_call(reference, (result, args))
        if why and plain_steady:
            plain_steady = False
            row["plain_changes"] = why
        return seconds, (result, args)

    try:
        np_s, np_out = plain()
    except PlainFailed as e:
        row["plain_error"] = str(e)
        emit()
        return
    row["np_before_px"] = np_s
    emit("px.compile and first call")
    cf = None
    try:
        t0 = time.perf_counter()
        cf = px.compile(kernel.fn)
        row["px_compile"] = time.perf_counter() - t0
        seconds, result, args = timed_call(cf, kernel)
        row["px_first"] = row["px_compile"] + seconds
    except px.CompileError as e:
        row["compile_error"] = f"CompileError: {_first_line(e)}"
    except Exception as e:  # noqa: BLE001 - its row says so
        row["px_error"] = _error(e)
    if "px_first" not in row:
        emit()
        return
    row["ok"] = True
    why = same_call(np_out, (result, args))
    if why:
        wrong(why, "first call")

    def compiled(against=None, when=""):
        seconds, result, args = timed_call(cf, kernel)
        if against is not None:
            why = same_call(against, (result, args))
            if why:
                wrong(why, when)
        return seconds

    # 2. early rounds
    emit("early rounds")
    np_ts, px_ts = [], []
    try:
        for i in range(repeat):
            np_s, np_out = plain()
            np_ts.append(np_s)
            px_ts.append(compiled(np_out, f"round {i + 1}"))
    except PlainFailed as e:
        row["plain_error"] = str(e)
    except Exception as e:  # noqa: BLE001
        row["px_error"] = _error(e)
    row["np_calls"], row["px_calls"] = np_ts, px_ts
    if np_ts:
        row["np_ms"] = statistics.median(np_ts) * 1e3
    k = min(EARLY_ROUNDS, len(px_ts))
    if k:
        row["np_early"], row["px_early"] = statistics.median(np_ts[:k]), statistics.median(px_ts[:k])
        row["early_x"] = row["np_early"] / row["px_early"]
    if "px_error" in row or "plain_error" in row:
        emit()
        return

    # 3. settle, then the settled rounds
    emit("settling")
    try:
        def settling():
            compiled(reference if plain_steady else None, "settling")

        row["settle_calls"], row["settle_seconds"] = settle_native(cf, settling, limit=settle)
        row["settled_busy"] = native_compiles_running()
        emit("settled rounds")
        np_ts, px_ts = [], []
        for i in range(SETTLED_ROUNDS):
            np_s, np_out = plain()
            np_ts.append(np_s)
            px_ts.append(compiled(np_out, f"settled round {i + 1}"))
        row["np_settled_calls"], row["px_settled_calls"] = np_ts, px_ts
        row["np_settled"], row["px_settled"] = statistics.median(np_ts), statistics.median(px_ts)
        row["settled_x"] = row["np_settled"] / row["px_settled"]
    except PlainFailed as e:
        row["plain_error"] = str(e)
    except Exception as e:  # noqa: BLE001
        row["px_error"] = _error(e)
    try:
        row["explain"] = cf.explain()
    except Exception as e:  # noqa: BLE001
        row["explain"] = f"explain() failed: {_error(e)}"
    row["load_end"] = os.getloadavg()[0]
    emit()


# --- the run: one child per kernel ---------------------------------------------------------------------------------

def run_child(opts, name: str) -> dict:
    """This script with ``--one name`` in a fresh process (its own session, killed with it after --timeout); its
    last row, with what went wrong if it did not finish (npbench.child_row)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--one", name, "--suite", opts.suite,
           "--repeat", str(opts.repeat), "--settle-seconds", str(opts.settle_seconds)]
    t0 = time.perf_counter()
    row = child_row(cmd, opts.timeout, ROW_MARK, {"name": name}, "phylanx-npb2-" if opts.cold else None)
    row["child_seconds"] = time.perf_counter() - t0
    return row


def correct(row: dict) -> bool:
    return row.get("ok") is True and "px_error" not in row and "plain_error" not in row and "crash" not in row


def problem(row: dict) -> str:
    for key in ("setup_error", "plain_error", "compile_error", "crash", "px_error"):
        if row.get(key):
            return {"setup_error": "setup: ", "plain_error": "the plain function raised: "}.get(key, "") + row[key]
    if row.get("why"):
        return "wrong: " + row["why"]
    notes = []
    if row.get("plain_changes"):
        notes.append(f"plain output changes between calls ({row['plain_changes']})")
    if row.get("exit_crash"):
        notes.append(f"crashed at exit, the row complete: {row['exit_crash']}")
    return "; ".join(notes)


def first_ratio(row: dict):
    return row["px_first"] / row["np_before_px"] if row.get("px_first") and row.get("np_before_px") else None


def _x(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def table_row(row: dict) -> list:
    if "compile_error" in row:
        ok = "CompileError"
    elif row.get("ok") is False:
        ok = "NO"
    elif "ok" not in row:
        ok = "-"
    else:
        ok = "yes" if correct(row) else "?"  # right so far, then an error or crash
    settled = _x(row.get("settled_x")) + ("*" if row.get("settled_busy") else "")
    return [row["name"], ok, "-" if row.get("np_ms") is None else f"{row['np_ms']:.3g}", _x(first_ratio(row)),
            _x(row.get("early_x")), settled, f"{row.get('load', float('nan')):.2f}",
            explain_head(row.get("explain") or "") or "-", problem(row)[:110]]


HEADERS = ["kernel", "ok", "plain ms", "px 1st/np", "early x", "settled x", "load", "explain (first lines)",
           "problem"]
LEGEND = ("ok: every compiled answer (result and array arguments after the call) equals the plain function's of the"
          " same round (allclose rtol 1e-7, atol 1e-9, same shape and dtype); plain ms: the plain function's median"
          " over the early rounds; px 1st/np: px.compile and the first call over the plain call just before it (> 1:"
          " slower); early x / settled x: plain median over compiled median (> 1: compiled faster; early: rounds 1-5,"
          " settled: 5 rounds after settling, * if a native compile still ran); load: 1-minute load when the kernel"
          " started")


def summary(rows: list[dict]) -> list[str]:
    good = [r for r in rows if correct(r)]
    early = [(r["early_x"], r["name"]) for r in good if r.get("early_x")]
    settled = [(r["settled_x"], r["name"]) for r in good if r.get("settled_x")]
    firsts = [(first_ratio(r), r["name"]) for r in good if first_ratio(r)]
    lines = [f"correct {len(good)}/{len(rows)}; geomean speed-up over plain: early "
             f"{_x(geomean([x for x, _ in early]))}x ({len(early)} kernels), settled "
             f"{_x(geomean([x for x, _ in settled]))}x ({len(settled)})"]
    for label, pairs in (("early", early), ("settled", settled)):
        slow = sorted(p for p in pairs if p[0] < SLOW)
        lines.append(f"{label}: {len(slow)} of {len(pairs)} slower than plain by more than 10% (< {SLOW:.2f}x)"
                     + (": " + ", ".join(f"{n} {x:.2f}x" for x, n in slow) if slow else ""))
    over = sorted((p for p in firsts if p[0] > 1.1), reverse=True)
    lines.append(f"first call: {len(over)} of {len(firsts)} over 1.1x the plain call"
                 + (": " + ", ".join(f"{n} {x:.2f}x" for x, n in over) if over else "")
                 + (f"; geomean {_x(geomean([x for x, _ in firsts]))}x" if firsts else ""))
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--suite", required=True,
                    help="a numpy-benchmarks checkout (or its numpy_benchmarks/benchmarks folder)")
    ap.add_argument("--only", action="append", help="kernels (file names without .py), comma-separated")
    ap.add_argument("--repeat", type=int, default=10, help="rounds of one plain and one compiled call (default 10)")
    ap.add_argument("--settle-seconds", type=float, default=5.0,
                    help="longest time the compiled function is called for its background compiles (default 5)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per kernel (default 300)")
    ap.add_argument("--cold", action="store_true", help="a fresh phylanx-py kernel cache for each kernel")
    ap.add_argument("--json", metavar="FILE", help="save the rows (and the run's settings and load) to FILE")
    ap.add_argument("--one", metavar="NAME", help=argparse.SUPPRESS)  # the child: one kernel
    opts = ap.parse_args(argv)
    opts.suite = os.path.abspath(os.path.expanduser(opts.suite))
    if opts.repeat < 1:
        ap.error("--repeat must be at least 1")
    if not os.path.isdir(opts.suite):
        ap.error(f"no such folder: {opts.suite}")
    if opts.one:
        return run_one(opts.suite, opts.one, opts.repeat, opts.settle_seconds)

    names = kernel_names(opts.suite)
    only = [n for v in opts.only or [] for n in v.split(",") if n]
    unknown = [n for n in only if n not in names]
    if unknown:
        ap.error(f"no kernel file with #setup and #run lines in {kernel_dir(opts.suite)}: {', '.join(unknown)}")
    names = only or names
    script = os.path.relpath(os.path.abspath(__file__))
    script = os.path.abspath(__file__) if script.startswith("..") else script
    command = "python " + " ".join(shlex.quote(a) for a in [script] +
                                   (sys.argv[1:] if argv is None else list(argv)))
    load0 = os.getloadavg()
    versions = f"python {platform.python_version()}, " + ", ".join(
        f"{p} {_version(p)}" for p in ["numpy", "phylanx-py"])
    print(f"command: {command}")
    print(f"load at start: {load_text()}, {os.cpu_count()} CPUs; {versions}")
    print(f"suite: {kernel_dir(opts.suite)}; {len(names)} kernels; {opts.repeat} rounds (early: the first "
          f"{min(EARLY_ROUNDS, opts.repeat)}); settle up to {opts.settle_seconds:g} s; kernel cache: "
          + ("fresh per kernel" if opts.cold else "as it is"), flush=True)
    t0 = time.perf_counter()
    rows = []
    for name in names:
        row = run_child(opts, name)
        rows.append(row)
        print(" | ".join(table_row(row)), flush=True)
    seconds = time.perf_counter() - t0
    print()
    from _common import print_table

    print_table(HEADERS, [table_row(r) for r in rows])
    print(textwrap.fill(LEGEND, 118))
    print()
    for line in summary(rows):
        print(line)
    load1 = os.getloadavg()
    print(f"load at end: {load_text()}; {seconds:.0f} s in all")
    if opts.json:
        with open(opts.json, "w", encoding="utf-8") as fh:
            json.dump({"command": command, "load_start": load0, "load_end": load1, "cpus": os.cpu_count(),
                       "versions": versions, "suite": opts.suite, "repeat": opts.repeat,
                       "settle_seconds": opts.settle_seconds, "cold": opts.cold, "seconds": seconds,
                       "rows": rows}, fh, indent=1)
        print(f"rows saved to {opts.json}")
    died = [r["name"] for r in rows if "crash" in r or "exit_crash" in r]
    if died:
        print(f"child processes that crashed or timed out: {', '.join(died)}")
    wrong = [r["name"] for r in rows if r.get("ok") is False]
    if wrong:  # a fast wrong answer must not pass unnoticed
        print(f"phylanx-py gave a wrong answer: {', '.join(wrong)}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
