"""Loop-heavy kernels: plain NumPy/Python, numba.njit of the same source, and phylanx-py (interpreted tier and the
native tier it switches to), with compile times, the tier chosen and geometric means.

    python benchmarks/loops.py [--sizes small medium] [--only lu crc16] [--cold]
    python benchmarks/loops.py --first-call [--cold]    # one long call of a fresh compiled function vs plain

``--cold`` uses a fresh kernel cache directory (compile times include Numba's compile, not a disk-cache load).
``--first-call``: what a user who calls a loop-heavy function once meets: the plain function, then the first call
of a newly compiled one (interpreted until a loop's kernel is ready, compiled in the background), then its second
call, on stencils whose outer time loop runs long (the native tier takes the inner sweep at the time loop's next
iteration once its kernel is ready).
Times are per call: the median over as many calls as fill about 0.1 s (at least 5), each on fresh copies of the
inputs made just before it, less the timer's own cost (``_times``).
Ratios: ``np/px`` is the plain function's time over phylanx-py's (> 1: faster than plain NumPy code), ``nb/px``
Numba's time over phylanx-py's (1.0: as fast as njit of the same source)."""
from __future__ import annotations

import argparse
import functools
import math
import os
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _copy(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


@functools.cache
def _timer_cost(samples=20000):
    """What timing an empty stretch reads: taken off every timed call (measured once)."""
    ts = []
    for _ in range(samples):
        t0 = time.perf_counter()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def _times(fn, args, repeats, budget=0.02):
    """The median time of one call, over as many calls as fill about ``repeats * budget`` seconds (at least
    ``repeats``, at most 20,000), each timed alone on fresh copies of ``args`` made just before it (in cache, as
    inputs a program has just made), less the timer's own cost. Five single calls of a few microseconds, as this
    benchmark took before, measured mostly the timer and the first calls' cold caches."""
    ts = []
    end = time.perf_counter() + repeats * budget
    while len(ts) < repeats or (len(ts) < 20000 and time.perf_counter() < end):
        a = _copy(args)
        t0 = time.perf_counter()
        fn(*a)
        ts.append(time.perf_counter() - t0)
    return max(statistics.median(ts) - _timer_cost(), 1e-9)


def _same(a, b) -> bool:
    if isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and a.shape == b.shape and np.allclose(a, b, rtol=1e-9, equal_nan=True)
    return type(a) is type(b) and (a == b or np.isclose(a, b, rtol=1e-9))


def _wait_native(f, limit=300.0):
    deadline = time.monotonic() + limit
    while "compiling" in f.explain() and time.monotonic() < deadline:
        time.sleep(0.05)


def _whole_pending(f):
    """The whole function may still go native (it has a signature neither compiled nor declined)."""
    whole = f._compile().whole
    return whole is not None and any(e.kernel is None and not e.declined for e in whole.entries.values())


def _tier(f):
    code = f._compile()
    loops = code.native_loops
    native = [e for loop in loops for e in loop.entries.values() if e.kernel is not None]
    compile_s = sum(e.compile_seconds for loop in loops for e in loop.entries.values())
    whole = list(code.whole.entries.values()) if code.whole is not None else []
    compile_s += sum(e.compile_seconds for e in whole)
    threads = next((f", parallel on {e.parallel.threads} threads" for e in whole + native
                    if e.parallel is not None and e.parallel.state == "parallel"), "")
    compile_s += sum(e.parallel.compile_seconds for e in whole + native if e.parallel is not None)
    if any(e.kernel is not None for e in whole):
        return "native (whole function" + threads + ")", compile_s
    if native:
        return "native" + (f" (loops; whole: {whole[0].declined})" if whole and whole[0].declined else "") + \
            threads, compile_s
    reasons = [loop.reason for loop in loops if loop.reason]
    return ("interpreted: " + reasons[0]) if reasons else "interpreted", compile_s


def run_case(name, fn, args, repeats):
    import numba
    from _common import native_compiles_running

    import phylanx_py as px

    want = fn(*_copy(args))
    t_np = _times(fn, args, repeats)
    try:
        nb = numba.njit(fn)
        t0 = time.perf_counter()
        nb(*_copy(args))
        first = time.perf_counter() - t0
        t_nb = _times(nb, args, repeats)
        nb_compile = max(first - t_nb, 0.0)
    except Exception:  # noqa: BLE001 - Numba rejects this source: no column
        t_nb = nb_compile = float("nan")
    os.environ["PHYLANX_NATIVE"] = "0"
    off = px.compile(fn)
    off(*_copy(args))
    t_off = _times(off, args, 3)
    os.environ["PHYLANX_NATIVE"] = "1"
    f = px.compile(fn)
    t0 = time.perf_counter()
    f(*_copy(args))  # interpreted; long enough and the loop compiles in the background
    t_first = time.perf_counter() - t0
    deadline = time.monotonic() + 10  # tiered: a loop goes native once it has run HOT_SECONDS interpreted
    while time.monotonic() < deadline and (_whole_pending(f) or (not _tier(f)[0].startswith("native") and
                                                                  "interpreted:" not in _tier(f)[0])):
        f(*_copy(args))
        _wait_native(f)
    deadline = time.monotonic() + 30  # a parallel variant: compiled, then measured against the sequential one
    while time.monotonic() < deadline and (_choosing(f) or native_compiles_running()):
        _quiet()
        f(*_copy(args))
    got = f(*_copy(args))
    t_px = _times(f, args, repeats)
    tier, px_compile = _tier(f)
    return dict(name=name, np=t_np, nb=t_nb, nb_compile=nb_compile, off=t_off, first=t_first, px=t_px,
                px_compile=px_compile, tier=tier, same=_same(got, want))


FIRST_CALL = {  # name -> (kernel, inputs): an outer time loop of a few seconds in plain Python
    "gauss_seidel": lambda C: (C["gauss_seidel"][0], (np.random.default_rng(0).random((40, 40)), 2000)),
    "jacobi_2d": lambda C: (C["jacobi_2d"][0], (np.random.default_rng(0).random((40, 40)),
                                                np.zeros((40, 40)), 1000)),
    "heat_1d": lambda C: (C["heat_1d"][0], (np.random.default_rng(0).random(1000), 1000, 0.25)),
}


def _choosing(f):
    """A kernel of ``f`` is still choosing between its sequential and parallel variants."""
    code = f._compile()
    entries = [e for loop in code.native_loops for e in loop.entries.values()]
    entries += list(code.whole.entries.values()) if code.whole is not None else []
    return any(e.parallel is not None and e.parallel.state in ("probing", "compiling", "measuring")
               for e in entries)


def _quiet(limit=120.0):
    """Until no native-tier compile runs in the background."""
    from _common import native_compiles_running  # (imports phylanx_py: not before --cold set its cache folder)

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and native_compiles_running():
        time.sleep(0.05)


def first_call():
    from _common import print_table
    from loop_kernels import CASES

    import phylanx_py as px

    rows = []
    for name, make in FIRST_CALL.items():
        _quiet()  # the last kernel's background compiles would slow this one's plain run
        fn, args = make(CASES)
        t0 = time.perf_counter()
        want = fn(*_copy(args))
        t_plain = time.perf_counter() - t0
        f = px.compile(fn)
        a = _copy(args)
        t0 = time.perf_counter()
        got = f(*a)
        t_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        f(*_copy(args))
        t_second = time.perf_counter() - t0
        rows.append([name, f"{t_plain * 1e3:.0f}", f"{t_first * 1e3:.0f}", f"{t_plain / t_first:.2f}",
                     f"{t_second * 1e3:.1f}", "yes" if _same(got, want) else "NO"])
        print(" | ".join(rows[-1]), flush=True)
    print()
    print_table(["kernel", "plain ms", "px first call ms", "plain/first", "px second call ms", "same"], rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["small", "medium"])
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--cold", action="store_true", help="fresh kernel cache: compile times without the disk cache")
    ap.add_argument("--first-call", action="store_true", help="one long call of a fresh compiled function")
    opts = ap.parse_args(argv)
    if opts.cold:  # before phylanx_py is imported: the cache folder is read then
        os.environ["PHYLANX_CACHE_DIR"] = tempfile.mkdtemp(prefix="phylanx-loops-")
    if opts.first_call:
        warnings.simplefilter("ignore")
        print(f"load: {os.getloadavg()[0]:.2f} (1 min); kernel cache: {'fresh' if opts.cold else 'as it is'}")
        return first_call()
    from _common import print_table
    from loop_kernels import CASES

    warnings.simplefilter("ignore")
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1/5/15 min), "
          f"{os.cpu_count()} CPUs")
    rows, ratios_np, ratios_nb = [], [], []
    for size in opts.sizes:
        for name, (fn, make) in CASES.items():
            if opts.only and name not in opts.only:
                continue
            r = run_case(name, fn, make(size), 5)
            np_px, nb_px = r["np"] / r["px"], r["nb"] / r["px"]
            ratios_np.append(np_px)
            if not math.isnan(nb_px):
                ratios_nb.append(nb_px)
            rows.append([f"{name} ({size})", f"{r['np'] * 1e3:.2f}", f"{r['nb'] * 1e3:.3f}", f"{r['off'] * 1e3:.2f}",
                         f"{r['px'] * 1e3:.3f}", f"{np_px:.1f}", f"{nb_px:.2f}", f"{r['off'] / r['np']:.2f}",
                         f"{r['nb_compile']:.2f}", f"{r['px_compile']:.2f}", "yes" if r["same"] else "NO",
                         r["tier"][:60]])
            print(" | ".join(str(c) for c in rows[-1]), flush=True)
    print()
    print_table(["kernel", "numpy ms", "numba ms", "px interp ms", "px ms", "np/px", "nb/px", "interp/np",
                 "nb compile s", "px compile s", "same", "tier"], rows)
    geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")
    print(f"\ngeomean np/px {geo(ratios_np):.1f}x   geomean nb/px {geo(ratios_nb):.2f}x   "
          f"min np/px {min(ratios_np):.2f}x   ({len(ratios_np)} rows)")
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
