"""What every example prints: the compiled function against the same function run by plain NumPy (both
times, the speed-up or slow-down as measured, the largest difference) and how to run it on a cluster."""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import phylanx_py as px


def parser(doc: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="timed calls of each version (default 3)")
    return ap


def median_time(fn, repeats: int):
    """(median seconds, last result) of ``repeats`` calls of ``fn()``."""
    times, result = [], None
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), result


def speed(ratio: float) -> str:
    """``ratio`` = plain time / compiled time, in words (whole numbers from 10x: more digits say nothing); within
    10% it is run-to-run noise on a shared machine."""
    text = f"{ratio:.0f}x faster" if ratio >= 10 else f"{ratio:.2f}x faster" if ratio >= 1 else \
        f"{1 / ratio:.2f}x slower"
    return text + (" (about the same)" if 0.9 < ratio < 1.1 else "")


def compare(title: str, compiled, args: tuple, repeats: int):
    """Run ``compiled(*args)`` (first call, then ``repeats`` timed calls) and ``compiled.__wrapped__(*args)``
    (the plain NumPy function); print both times; return (compiled result, plain result)."""
    rt = px.runtime.current()
    t0 = time.perf_counter()
    compiled(*args)  # the first call translates the function and compiles its kernels
    t_first = time.perf_counter() - t0
    t_compiled, got = median_time(lambda: compiled(*args), repeats)
    t_plain, want = median_time(lambda: compiled.__wrapped__(*args), repeats)
    print(title)
    print(f"runtime: {rt!r}")
    print(f"  plain NumPy   {t_plain * 1e3:8.1f} ms")
    print(f"  phylanx-py    {t_compiled * 1e3:8.1f} ms   {speed(t_plain / t_compiled)} than plain NumPy   (median "
          f"of {repeats}; the first call took {t_first * 1e3:.0f} ms: translating and compiling)")
    return got, want


def check(name: str, got, want, rtol=1e-7, atol=1e-9) -> None:
    """Print the largest difference; exit with status 1 when the results differ beyond rounding."""
    got, want = np.asarray(got), np.asarray(want)
    diff = float(np.max(np.abs(got - want))) if got.size else 0.0
    print(f"  max |phylanx-py - NumPy| of {name} = {diff:.2g}")
    if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol):
        raise SystemExit(f"compiled and plain results differ ({name})")


def cluster_hint() -> None:
    if getattr(px.runtime.current().executor, "client", None) is None:
        script = os.path.relpath(sys.argv[0]) if sys.argv and sys.argv[0] else "script.py"
        print(f"the same script on a local Dask cluster of 2 workers:  phylanx-py run --local-cluster 2 {script}")
