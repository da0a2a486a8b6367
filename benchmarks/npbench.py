"""NPBench (github.com/spcl/npbench) under its own protocol: each kernel's NumPy version, the same function compiled
by phylanx-py (``px.compile``), and NPBench's Numba version (``_numba_n``), in one process, on the suite's inputs.

    python benchmarks/npbench.py --suite ~/npbench [--preset S,M] [--only gemm,jacobi_1d] [--json out.json]

Nothing of NPBench is copied here: the kernels, their ``initialize`` functions and their parameters are read from
the checkout given by ``--suite`` at run time (``bench_info/<name>.json``; ``npbench/benchmarks/<relative_path>/``
``<module>.py``, ``<module>_numpy.py``, ``<module>_numba_n.py``), loaded from their files with importlib.

Per kernel and preset, in a fresh subprocess (this script with ``--one NAME``, killed after ``--timeout`` seconds),
as NPBench's ``Test.run`` and ``utilities.benchmark`` do: inputs from the preset's parameters through the suite's
``initialize``; every call on fresh ``np.copy`` copies of the array arguments, timed alone (``time.perf_counter``
around the call, garbage collection off, as ``timeit`` does); the outputs are the returned values followed by the
``output_args`` arrays. In this order:

1. NumPy's first call (its output is the reference), Numba's first call (compile included), then 5 rounds
   (``--repeat``) of one NumPy call and one Numba call: Numba's median is NPBench's figure ("early", calls 2-6).
2. One NumPy call (the first call's reference: the plain function in the process as it is then), ``px.compile``
   and the compiled function's first call (each timed alone, summed: "1st s"), then 5 rounds of one NumPy call and
   one call of the compiled function: its early median.
3. The compiled function called again and again, for up to ``--settle-seconds``, until no background native
   compile is left (``_common.settle_native``); then 5 rounds of NumPy and the compiled function: "settled".

NumPy's figure for each early ratio is the median of its calls in the same rounds (1 for Numba, 2 for phylanx-py) that
no background compile of phylanx-py overlapped (the "numpy ms" column: those of 1 and 2): the pair timed side by side
sees the same state of the process (glibc's heap kept softmax's 16 MB temporaries in NumPy's calls of round 1 and
page-faulted them in round 2: 9.1 against 13.1 ms for NumPy itself). While a compile runs, its thread competes for the
interpreter lock and the switch interval is shortened, which slowed NumPy's Python-level loops in the same process
about twofold on a 2-core machine (seidel_2d, jacobi_1d), and NPBench runs each framework in a process of its own. The
slowdown is reported ("np slowed"), not counted. The work beside the compiled function's first calls (translation,
lowering: runtime/beside.py) is no compile and is counted: the summary line gives how much slower NumPy's calls of
phylanx-py's early rounds were than its calls before them, since a worker that slows NumPy's calls flatters the
ratio.

Each validation is NPBench's rule: ``np.allclose(ref, val, rtol, atol)`` or else the relative error
``norm(ref - val) / norm(ref)`` under ``norm_error`` (1e-5, 1e-8, 1e-5, or the kernel's own in its bench_info), for
every output; beyond NPBench, also as many outputs of the same shapes. phylanx-py's output is checked after its
first call and after the settled rounds; Numba's after its first call.

Speed-ups are NumPy's median over the other's (> 1: faster than NumPy); geomeans per preset, each over the kernels
that gave a correct answer. By default every kernel runs at S, and also at M when NumPy's S median is under
``--m-below-ms`` (1 ms): at S those kernels measure mostly call overhead. ``--cold`` gives each kernel a fresh
phylanx-py kernel cache (``PHYLANX_CACHE_DIR``), so its first call compiles as Numba's does.
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROW_MARK = "NPBENCH-ROW "  # a child's result line on its stdout (the last one counts: it is printed after each stage)


# --- the suite's files -------------------------------------------------------------------------------------------

def bench_names(suite: str) -> list[str]:
    """The kernels of the suite: the names of its bench_info/*.json files, sorted."""
    folder = os.path.join(suite, "bench_info")
    return sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".json"))


def bench_info(suite: str, name: str) -> dict:
    with open(os.path.join(suite, "bench_info", name + ".json"), encoding="utf-8") as fh:
        return json.load(fh)["benchmark"]


def kernel_file(suite: str, info: dict, postfix: str = "") -> str:
    """``<module>.py`` (the initialize function's file) or ``<module>_<postfix>.py`` of a kernel."""
    base = info["module_name"] + (f"_{postfix}" if postfix else "")
    return os.path.join(suite, "npbench", "benchmarks", *info["relative_path"].split("/"), base + ".py")


def load_module(path: str, name: str):
    """The module at ``path``, imported under ``name`` (registered in sys.modules, as an import would)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def make_data(suite: str, info: dict, preset: str) -> dict:
    """NPBench's ``Benchmark.get_data``: the preset's parameters, and what ``initialize`` makes of them under the
    names of its ``output_args``."""
    if preset not in info["parameters"]:
        raise KeyError(f"no {preset} preset")
    data = dict(info["parameters"][preset])
    init = info.get("init")
    if init:
        module = load_module(kernel_file(suite, info), f"_npb_{info['module_name']}_init")
        made = getattr(module, init["func_name"])(*[data[a] for a in init["input_args"]])
        names = init["output_args"]
        if len(names) == 1:
            made = (made,)
        data.update(zip(names, made, strict=True))
    return data


# --- NPBench's validation rule -------------------------------------------------------------------------------------

def as_outputs(result, call: dict, info: dict) -> list:
    """What NPBench validates: the returned value(s) (a tuple or list as its items, None as nothing), then the
    arrays named by ``output_args`` as the call left them."""
    if result is None:
        out = []
    elif isinstance(result, (tuple, list)):
        out = list(result)
    else:
        out = [result]
    return out + [call[a] for a in info.get("output_args", [])]


def relative_error(ref, val) -> float:
    import numpy as np

    return float(np.linalg.norm(np.asarray(ref) - np.asarray(val)) / np.linalg.norm(ref))


def validate(ref: list, val: list, info: dict, same_function: bool = False) -> tuple[bool, str]:
    """(valid, why not): NPBench's rule for each pair of outputs (``zip``: as many as the shorter list has):
    ``np.allclose`` with the kernel's rtol/atol, else the relative norm error under norm_error. ``same_function``
    (the compiled NumPy function itself) also asks for as many outputs, of the same shapes: NPBench's own versions
    may differ there (adi's ``_numba_n`` returns nothing, its NumPy version ``u``, which is also an output
    argument), the compiled function may not."""
    import numpy as np

    rtol, atol, norm_error = info.get("rtol", 1e-5), info.get("atol", 1e-8), info.get("norm_error", 1e-5)
    if same_function and len(ref) != len(val):
        return False, f"{len(val)} outputs, NumPy gives {len(ref)}"
    for i, (r, v) in enumerate(zip(ref, val)):
        if same_function and np.shape(r) != np.shape(v):
            return False, f"output {i}: shape {np.shape(v)}, NumPy's {np.shape(r)}"
        try:
            if np.allclose(r, v, rtol=rtol, atol=atol):
                continue
            err = relative_error(r, v)
        except Exception as e:  # noqa: BLE001 - values NumPy cannot compare are not the same answer
            return False, f"output {i}: {type(e).__name__}: {_first_line(e)}"
        if not err < norm_error:
            return False, f"output {i}: relative error {err:.3g}"
    return True, ""


# --- one kernel, in a child process --------------------------------------------------------------------------------

def _first_line(e: BaseException) -> str:
    """The first line of ``e``'s message, file paths shortened to the file's name."""
    text = str(e).strip()
    return re.sub(r"(?<![\w.])/\S*/([^/\s]+\.py)", r"\1", text.splitlines()[0])[:200] if text else ""


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {_first_line(e)}"


class Caller:
    """Calls of one implementation, each on fresh ``np.copy`` copies of the array arguments, timed alone."""

    def __init__(self, fn, data: dict, info: dict):
        self.fn, self.data, self.info = fn, data, info

    def fresh(self) -> dict:
        import numpy as np

        arrays = set(self.info["array_args"])
        return {a: np.copy(self.data[a]) if a in arrays else self.data[a] for a in self.info["input_args"]}

    def __call__(self) -> tuple[float, list]:
        call = self.fresh()
        args = [call[a] for a in self.info["input_args"]]
        enabled = gc.isenabled()
        gc.disable()  # as timeit does
        try:
            t0 = time.perf_counter()
            result = self.fn(*args)
            seconds = time.perf_counter() - t0
        finally:
            if enabled:
                gc.enable()
        return seconds, as_outputs(result, call, self.info)


def tier_summary(explain: str) -> str:
    """explain()'s lines, shortened: ``whole fn native``, or per loop ``L6 native``, ``L9 interp: <reason>``."""
    if explain.strip() == "no loops":
        return "no loops"
    whole, loops = [], []
    for line in explain.splitlines():
        head, _, state = line.partition(" -> ")
        where = head.rsplit(":", 1)[-1]
        par = " par" if "in parallel chosen" in state or "in parallel (forced)" in state else ""
        if state.startswith("native"):  # a loop's kernel, or the whole function's ("native (whole function, ...")
            short = "native" + par
        elif state.startswith("interpreted so far") or state.startswith("loops only so far"):
            short = "so far" + (" (compiling)" if "compiling" in state else "")
        elif state.startswith("interpreted: "):
            reason = state[len("interpreted: "):]
            short = "interp: " + (reason.rsplit(" (", 1)[0] if reason.endswith(")") else reason)
        else:
            short = state
        if head.startswith("function at"):
            whole.append(short)
        else:
            loops.append(f"L{where} {short}")
    if any(w.startswith("native") for w in whole):
        return "whole fn " + next(w for w in whole if w.startswith("native"))
    parts = list(dict.fromkeys(loops))
    if whole:
        parts.append("fn " + whole[0])
    return "; ".join(parts)


def run_one(suite: str, name: str, preset: str, repeat: int, settle: float, numba: bool) -> None:
    """Measure one kernel at one preset, printing its row (``ROW_MARK`` + JSON) after each stage, so that a row is
    there even if a later stage hangs or crashes the process."""
    import warnings

    warnings.simplefilter("ignore")
    row: dict = {"name": name, "preset": preset, "load": os.getloadavg()[0]}

    def emit(stage=None):
        """Print the row so far; ``stage``: what runs next (a crash or timeout then names it)."""
        row["stage"] = stage
        print(ROW_MARK + json.dumps(row), flush=True)

    emit("setup")
    try:
        info = bench_info(suite, name)
        data = make_data(suite, info, preset)
        np_fn = getattr(load_module(kernel_file(suite, info, "numpy"), f"_npb_{name}_numpy"), info["func_name"])
    except Exception as e:  # noqa: BLE001 - a kernel the suite cannot set up: its row says why
        row["setup_error"] = _error(e)
        emit()
        return
    nb_fn = None
    if numba:
        try:
            nb_fn = getattr(load_module(kernel_file(suite, info, "numba_n"), f"_npb_{name}_numba_n"),
                            info["func_name"])
        except Exception as e:  # noqa: BLE001
            row["nb_error"] = _error(e)
    from _common import native_compiles_running, settle_native

    import phylanx_py as px

    np_call = Caller(np_fn, data, info)
    clean: list = []  # NumPy's calls that no background compile of phylanx-py overlapped
    busy: list = []  # and those it did

    def np_timed():
        was = native_compiles_running()
        seconds = np_call()[0]
        (busy if was or native_compiles_running() else clean).append(seconds)
        return seconds

    # first calls: NumPy's output is the reference; Numba's compile before phylanx-py starts compiling
    emit("numpy, numba")
    row["np_first"], ref = np_call()
    nb_call = px_call = f = None
    if nb_fn is not None:
        try:
            nb_call = Caller(nb_fn, data, info)
            row["nb_first"], out = nb_call()
            row["nb_valid"], row["nb_why"] = validate(ref, out, info)
        except Exception as e:  # noqa: BLE001
            row["nb_error"], nb_call = _error(e), None
    # early, Numba: calls 2-6, interleaved with NumPy's
    ts = []
    for _ in range(repeat):
        np_timed()
        if nb_call is not None:
            try:
                ts.append(nb_call()[0])
            except Exception as e:  # noqa: BLE001
                row["nb_error"], nb_call = _error(e), None
    if ts and nb_call is not None:
        row["nb_early"] = statistics.median(ts)
    row["np_early"] = row["np_with_nb"] = statistics.median(clean)
    before = len(clean)
    emit("phylanx-py first calls")

    # NumPy's call just before: what the plain function costs in the process as it is now, the first call's
    # reference (Numba's calls before it left NPBench's BLAS kernels' NumPy calls 1.5-2.5x slower than NumPy's
    # first: bicg, gemm, mlp; SciPy's OpenBLAS threads beside NumPy's, as read here)
    row["np_before_px"] = np_call()[0]
    try:
        t0 = time.perf_counter()
        f = px.compile(np_fn)
        compiled = time.perf_counter() - t0
        px_call = Caller(f, data, info)
        seconds, out = px_call()
        # px.compile and the first call, each timed alone (the call on its fresh copies, as NumPy's first call is:
        # the copies are the harness's)
        row["px_first"], row["px_compile"] = compiled + seconds, compiled
        row["px_valid"], row["px_why"] = validate(ref, out, info, same_function=True)
    except Exception as e:  # noqa: BLE001
        row["px_error"], px_call = _error(e), None
    # early, phylanx-py: calls 2-6, interleaved with NumPy's
    ts = []
    for _ in range(repeat if px_call is not None else 0):
        np_timed()
        try:
            ts.append(px_call()[0])
        except Exception as e:  # noqa: BLE001
            row["px_error"], px_call = _error(e), None
            break
    if ts and px_call is not None:
        row["px_early"], row["px_early_calls"] = statistics.median(ts), ts[:]
    row["np_early"] = statistics.median(clean)  # its calls before phylanx-py's and those no compile overlapped
    # each early ratio is over the NumPy calls of its own rounds (module docstring)
    if clean[before:]:
        row["np_with_px"] = statistics.median(clean[before:])
    row["np_clean"], row["np_busy"] = clean[:], busy[:]
    if busy:
        row["np_slowed"] = statistics.median(busy) / row["np_early"]
    emit("phylanx-py settling")

    # settled: after the background compiles landed (or --settle-seconds ran out)
    if px_call is not None:
        try:
            def settling():
                px_call()
                # native code's first check: from the start of the first call (px.compile's) to the end of the
                # settling call after which explain() first shows a loop or the whole function native (the first
                # check follows call 6: explain() waits for a translation beside the calls, so the early calls
                # are not checked)
                if "px_native_at" not in row and any("-> native" in line for line in f.explain().splitlines()):
                    row["px_native_at"] = time.perf_counter() - t0

            calls, seconds = settle_native(f, settling, limit=settle)
            row["settle_calls"], row["settle_seconds"] = calls, seconds
            clean.clear()
            busy.clear()
            ts = []
            for _ in range(repeat):
                np_timed()
                seconds, out = px_call()
                ts.append(seconds)
            # NumPy's calls a compile still overlapped (settling ran out of time) are left out as in the early
            # rounds; with none left, its early median stands in
            row["np_settled"] = statistics.median(clean) if clean else row["np_early"]
            row["px_settled"], row["settled_busy"] = statistics.median(ts), len(busy)
            row["np_settled_clean"], row["np_settled_busy"] = clean[:], busy[:]
            valid, why = validate(ref, out, info, same_function=True)
            row["px_valid_settled"] = valid
            if not valid:
                row["px_why"] = (row.get("px_why") or "") + f" settled: {why}"
        except Exception as e:  # noqa: BLE001
            row["px_error"] = _error(e)
    if f is not None and "px_first" in row:
        try:
            row["explain"] = f.explain()
            row["tier"] = tier_summary(row["explain"])
        except Exception as e:  # noqa: BLE001
            row["tier"] = f"explain() failed: {_error(e)}"
    row["load_end"] = os.getloadavg()[0]
    emit()


# --- the run: one child per kernel and preset -----------------------------------------------------------------------

def run_child(opts, name: str, preset: str) -> dict:
    """This script with ``--one name`` in a fresh process (its own session, killed with it after --timeout); its
    last row, with what went wrong if it did not finish."""
    cmd = [sys.executable, os.path.abspath(__file__), "--one", name, "--preset", preset, "--suite", opts.suite,
           "--repeat", str(opts.repeat), "--settle-seconds", str(opts.settle_seconds)]
    if opts.no_numba:
        cmd.append("--no-numba")
    # --cold: a fresh kernel cache, the first call compiles, as Numba's does
    return child_row(cmd, opts.timeout, ROW_MARK, {"name": name, "preset": preset},
                     "phylanx-npbench-" if opts.cold else None)


def child_row(cmd: list, timeout: float, mark: str, empty: dict, cold: str | None = None) -> dict:
    """Run ``cmd`` (a benchmark's child for one kernel, in its own session: killed with it after ``timeout``
    seconds, or on Ctrl-C) and give the last row it printed after ``mark`` (``empty`` if none), with ``crash`` or
    ``exit_crash`` saying what went wrong if it did not finish; ``cold``: the prefix of a fresh kernel cache
    (``PHYLANX_CACHE_DIR``) made for it and removed after. benchmarks/numpy_benchmarks.py runs its children so too."""
    env = dict(os.environ)
    cache = None
    if cold:
        cache = tempfile.mkdtemp(prefix=cold)
        env["PHYLANX_CACHE_DIR"] = cache
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    problem = None
    try:
        out, err = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            last = [line for line in err.strip().splitlines() if line.strip()]
            problem = f"exit status {proc.returncode}" + (f" ({signal.Signals(-proc.returncode).name})"
                                                          if proc.returncode < 0 else "") + \
                (f": {last[-1][:200]}" if last else "")
    except subprocess.TimeoutExpired:
        _kill(proc)
        out, err = proc.communicate()
        problem = f"Timeout: killed after {timeout:g} s"
    except BaseException:
        _kill(proc)  # (Ctrl-C): no child is left running
        raise
    finally:
        if cache:
            shutil.rmtree(cache, ignore_errors=True)
    rows = [line[len(mark):] for line in out.splitlines() if line.startswith(mark)]
    row = json.loads(rows[-1]) if rows else dict(empty)
    if problem and rows and row.get("stage") is None:  # the row was complete: the process died on its way out
        row["exit_crash"] = problem
    elif problem:
        row["crash"] = problem + (f" (during {row['stage']})" if row.get("stage") else "")
    return row


def _kill(proc) -> None:
    """Kill the child we started and its process group (its own: it started a session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def ratio(a, b):
    return a / b if a and b else None


def speedups(row: dict) -> dict:
    """NumPy's median over phylanx-py's and Numba's (early, settled), or None where there is no figure."""
    return {"px_early": ratio(row.get("np_with_px", row.get("np_early")), row.get("px_early")),
            "nb_early": ratio(row.get("np_with_nb", row.get("np_early")), row.get("nb_early")),
            "px_settled": ratio(row.get("np_settled"), row.get("px_settled"))}


def px_correct(row: dict) -> bool:
    return bool(row.get("px_valid")) and row.get("px_valid_settled", True) and "px_error" not in row \
        and "crash" not in row


def nb_correct(row: dict) -> bool:
    """(Numba's rounds finish before phylanx-py starts: a crash or timeout later does not undo them.)"""
    return bool(row.get("nb_valid")) and "nb_error" not in row and (
        "crash" not in row or row.get("stage") not in ("setup", "numpy, numba"))


def problem(row: dict) -> str:
    """The row's first trouble: setup, crash, phylanx-py's error or wrong answer, Numba's."""
    for key, label in (("setup_error", "setup"), ("crash", ""), ("px_error", "px"), ("nb_error", "numba")):
        if row.get(key):
            return f"{label + ': ' if label else ''}{row[key]}"
    if row.get("px_why"):
        return f"px wrong: {row['px_why'].strip()}"
    if row.get("nb_why"):
        return f"numba wrong: {row['nb_why']}"
    if row.get("exit_crash"):
        return f"crashed at exit, the row complete: {row['exit_crash']}"
    return ""


def _x(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def table_row(row: dict) -> list:
    s = speedups(row)
    ran = "setup_error" not in row and "np_first" in row  # NumPy gave a reference to check against
    valid = "-" if not ran else ("yes" if px_correct(row) else "?" if row.get("px_valid") and "crash" in row
                                 and "px_error" not in row else "NO")
    nb_valid = "-" if not ran or ("nb_valid" not in row and "nb_error" not in row) else (
        "yes" if nb_correct(row) else "NO")
    np_ms = row.get("np_early")
    settled = _x(s["px_settled"]) + ("*" if row.get("settled_busy") else "")
    settle = f"{row['settle_calls']}/{row['settle_seconds']:.1f}" if "settle_calls" in row else "-"
    return [row["name"], row["preset"], valid, nb_valid, "-" if np_ms is None else f"{np_ms * 1e3:.3g}",
            _x(row.get("px_first")),
            _x(first_ratio(row)),
            _x(row.get("nb_first")), _x(row.get("px_native_at")), _x(s["px_early"]),
            _x(s["nb_early"]), settled, settle,
            _x(row.get("np_slowed")), f"{row.get('load', float('nan')):.1f}", (row.get("tier") or "-")[:48],
            problem(row)[:90]]


HEADERS = ["kernel", "preset", "px ok", "nb ok", "numpy ms", "px 1st s", "px 1st/np", "nb 1st s", "px native s",
           "px early x", "nb early x",
           "px settled x", "settle calls/s", "np slowed x", "load", "tier (px, settled)", "problem"]
LEGEND = ("px ok / nb ok: the answer passes NPBench's validation (phylanx-py's after its first call and when settled;"
          " ?: right after the first call, then the child crashed or timed out);"
          " numpy ms: NumPy's median with no background compile running; 1st s: the first call, compile included"
          " (phylanx-py's: px.compile and the call); px 1st/np: that over NumPy's call just before it (> 1: slower);"
          " px native s: from the first call's start to the first check that found native code (a check after each"
          " settling call, the first after call 6; '-': none native);"
          " x: NumPy's median over the other's (early: calls 2-6, over NumPy's calls of the same rounds; settled:"
          " after settling, * if a compile still ran);"
          " settle calls/s: calls made and seconds taken to settle; np slowed x: NumPy's calls while a background"
          " compile of phylanx-py ran, over its median without (left out of the ratios)")


def first_ratio(row: dict):
    """The compiled function's first call (px.compile included) over NumPy's call just before it (older rows: over
    NumPy's first call), or None."""
    ref = row.get("np_before_px") or row.get("np_first")
    return row["px_first"] / ref if row.get("px_first") and ref else None


def geomean(xs):
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summary(rows: list[dict], label: str) -> str:
    """Correct count and geomeans of the rows (each speed-up over the rows that have it and a correct answer)."""
    s = [speedups(r) for r in rows]
    ok = [px_correct(r) for r in rows]
    px_e = [x["px_early"] for x, good in zip(s, ok) if good and x["px_early"]]
    px_s = [x["px_settled"] for x, good in zip(s, ok) if good and x["px_settled"]]
    nb_e = [x["nb_early"] for x, r in zip(s, rows) if nb_correct(r) and x["nb_early"]]
    both = [(x["px_early"], x["nb_early"]) for x, r, good in zip(s, rows, ok)
            if good and nb_correct(r) and x["px_early"] and x["nb_early"]]
    firsts = [r["px_first"] / r["nb_first"] for r, good in zip(rows, ok)
              if good and nb_correct(r) and r.get("px_first") and r.get("nb_first")]
    # the first call (px.compile included) over NumPy's call just before it (> 1: slower than the plain function;
    # issue 33: no call more than 10% slower, first calls included)
    over = sorted(((first_ratio(r), r["name"]) for r, good in zip(rows, ok) if good and first_ratio(r)),
                  reverse=True)
    nb_ok = sum(1 for r in rows if nb_correct(r))
    line = (f"{label}: phylanx-py correct {sum(ok)}/{len(rows)}, Numba correct {nb_ok}/{len(rows)}; geomean "
            f"speed-up over NumPy: px early {_x(geomean(px_e))}x ({len(px_e)}), px settled {_x(geomean(px_s))}x "
            f"({len(px_s)}), numba early {_x(geomean(nb_e))}x ({len(nb_e)})")
    if both:
        line += (f"; px/numba early {_x(geomean([p / n for p, n in both]))}x ({len(both)} kernels both correct), "
                 f"first call px/numba {_x(geomean(firsts))}x ({len(firsts)})")
    if over:
        slow = [f"{n} {x:.2f}x" for x, n in over if x > 1.1]
        line += (f"; first call over NumPy's call before it: geomean {_x(geomean([x for x, _ in over]))}x, over 1.1x "
                 f"{len(slow)} of {len(over)}" + (f" ({', '.join(slow[:8])})" if slow else ""))
    # NumPy's own calls in phylanx-py's early rounds over its calls before them (Numba's rounds): what the work
    # beside the first calls costs NumPy code in the same process, which the early ratio's NumPy figure includes
    # (before the worker's pacing of 2026-11-29 it slowed cavity_flow's NumPy calls 4-5x, and so flattered the
    # ratio: 3.9x early, 1.0x with NumPy's calls unslowed)
    slowed = [r["np_with_px"] / r["np_with_nb"] for r in rows if r.get("np_with_px") and r.get("np_with_nb")]
    if slowed:
        worst = max((r["np_with_px"] / r["np_with_nb"], r["name"]) for r in rows
                    if r.get("np_with_px") and r.get("np_with_nb"))
        line += (f"; NumPy's calls in phylanx-py's early rounds over those before: geomean {_x(geomean(slowed))}x, "
                 f"most {_x(worst[0])}x ({worst[1]})")
    # time to native code (``px_native_at``: from the first call's start to the first check that finds a loop or
    # the whole function native) against Numba's first call (its compile and one run), over the kernels that have
    # both
    pairs = [(r["px_native_at"], r["nb_first"]) for r in rows if r.get("px_native_at") and r.get("nb_first")]
    if pairs:
        px_t, nb_t = sorted(p for p, _ in pairs), sorted(n for _, n in pairs)

        def p90(xs):
            return xs[min(len(xs) - 1, int(0.9 * len(xs)))]
        line += (f"; time to native code: median {statistics.median(px_t):.1f} s, p90 {p90(px_t):.1f} s, against "
                 f"Numba's first call median {statistics.median(nb_t):.1f} s, p90 {p90(nb_t):.1f} s; sooner in "
                 f"{sum(p < n for p, n in pairs)} of {len(pairs)}")
    return line


def _names(values) -> list[str]:
    return [n for v in values or [] for n in v.split(",") if n]


def _version(package: str) -> str:
    """The installed version (read without importing: the parent process only starts the children)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def load_text() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1/5/15 min)"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", required=True, help="an NPBench checkout (its bench_info/ and npbench/benchmarks/)")
    ap.add_argument("--preset", default="S,M", help="presets, comma-separated (default S,M: M only as --m-below-ms)")
    ap.add_argument("--m-below-ms", type=float, default=1.0,
                    help="with S and M both asked: run M only where NumPy's S median is under this many ms "
                         "(default 1; inf: every kernel)")
    ap.add_argument("--only", action="append", help="kernels (bench_info names), comma-separated")
    ap.add_argument("--skip", action="append", help="kernels to leave out, comma-separated")
    ap.add_argument("--repeat", type=int, default=5, help="timed calls after the first (default 5)")
    ap.add_argument("--settle-seconds", type=float, default=15.0,
                    help="longest time the compiled function is called for its background compiles (default 15)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per kernel and preset (default 300)")
    ap.add_argument("--no-numba", action="store_true", help="leave out NPBench's _numba_n versions")
    ap.add_argument("--cold", action="store_true", help="a fresh phylanx-py kernel cache for each kernel")
    ap.add_argument("--json", metavar="OUT", help="save the rows (and the run's settings and load) to OUT")
    ap.add_argument("--one", metavar="NAME", help=argparse.SUPPRESS)  # the child: one kernel, one preset
    opts = ap.parse_args(argv)
    opts.suite = os.path.abspath(os.path.expanduser(opts.suite))
    if opts.repeat < 1:
        ap.error("--repeat must be at least 1")
    if opts.one:
        sys.path.insert(0, HERE)
        return run_one(opts.suite, opts.one, opts.preset, opts.repeat, opts.settle_seconds, not opts.no_numba)

    presets = [p for p in opts.preset.split(",") if p]
    names = bench_names(opts.suite)
    only, skip = _names(opts.only), set(_names(opts.skip))
    unknown = [n for n in only + sorted(skip) if n not in names]
    if unknown:
        ap.error(f"not in {opts.suite}/bench_info: {', '.join(unknown)}")
    names = [n for n in (only or names) if n not in skip]
    script = os.path.relpath(os.path.abspath(__file__))
    script = os.path.abspath(__file__) if script.startswith("..") else script
    command = "python " + " ".join(shlex.quote(a) for a in [script] +
                                   (sys.argv[1:] if argv is None else list(argv)))
    load0 = os.getloadavg()
    versions = f"python {platform.python_version()}, " + ", ".join(
        f"{p} {_version(p)}" for p in ["numpy", "phylanx-py"] + ([] if opts.no_numba else ["numba"]))
    print(f"command: {command}")
    print(f"load at start: {load_text()}, {os.cpu_count()} CPUs; {versions}")
    print(f"suite: {opts.suite}; {len(names)} kernels; presets {','.join(presets)}"
          + (f" (M where NumPy's S median < {opts.m_below_ms:g} ms)" if presets[:2] == ["S", "M"] else "")
          + f"; {opts.repeat} timed calls; settle up to {opts.settle_seconds:g} s; kernel cache: "
          + ("fresh per kernel" if opts.cold else "as it is"), flush=True)
    rows = []
    for name in names:
        for preset in presets:
            if preset == "M" and "S" in presets:  # the rule: M where S is too small to measure
                s_row = next((r for r in rows if r["name"] == name and r["preset"] == "S"), {})
                if not (s_row.get("np_early") is not None and s_row["np_early"] * 1e3 < opts.m_below_ms):
                    continue
            row = run_child(opts, name, preset)
            rows.append(row)
            print(" | ".join(table_row(row)), flush=True)
    print()
    print_rows(rows)
    for preset in presets:
        part = [r for r in rows if r["preset"] == preset]
        if part:
            print(summary(part, f"{preset} ({len(part)} kernels)"))
    if len({r["preset"] for r in rows}) > 1:  # each kernel once: its row at the last preset it ran at
        last = {}
        for r in rows:
            last[r["name"]] = r
        print(summary(list(last.values()), f"{'/'.join(presets)}, each kernel at its largest preset run"))
    load1 = os.getloadavg()
    print(f"load at end: {load_text()}")
    if opts.json:
        with open(opts.json, "w", encoding="utf-8") as fh:
            json.dump({"command": command, "load_start": load0, "load_end": load1, "cpus": os.cpu_count(),
                       "versions": versions, "suite": opts.suite, "presets": presets, "repeat": opts.repeat,
                       "settle_seconds": opts.settle_seconds, "cold": opts.cold, "rows": rows}, fh, indent=1)
        print(f"rows saved to {opts.json}")
    died = [f"{r['name']} ({r['preset']})" for r in rows if "crash" in r or "exit_crash" in r]
    if died:
        print(f"child processes that crashed or timed out: {', '.join(died)}")
    wrong = [r["name"] for r in rows if r.get("px_valid") is False or r.get("px_valid_settled") is False]
    if wrong:  # a fast wrong answer must not pass unnoticed (errors and crashes are in their rows)
        print(f"phylanx-py gave a wrong answer: {', '.join(wrong)}")
    return 1 if wrong else 0


def print_rows(rows: list[dict]) -> None:
    sys.path.insert(0, HERE)
    from _common import print_table

    print_table(HEADERS, [table_row(r) for r in rows])
    print(textwrap.fill(LEGEND, 118))


if __name__ == "__main__":
    sys.exit(main())
