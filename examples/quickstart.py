"""A loop NumPy cannot vectorise, compiled by phylanx-py, next to the same function run by plain Python and NumPy.

    python examples/quickstart.py                                # on this machine (a local thread pool)
    python examples/quickstart.py --size 300 --sweeps 20         # other sizes
    phylanx-py run --local-cluster 2 examples/quickstart.py      # the same script on a local Dask cluster

Successive over-relaxation (SOR) for Laplace's equation on a square plate whose top edge is held at 1: each sweep
moves every inner point towards the mean of its four neighbours, reading the neighbours already updated in the same
sweep (Gauss-Seidel order). That dependency is why a NumPy user writes the sweep as Python loops over the array:
no single array expression computes it.

The compiled function goes through the tiers (``relax.explain()`` says which): its first calls run as the plain
function while a native kernel for the whole function compiles in the background; once the kernel is ready (and has
been measured against the plain function) every call runs it. The script calls the compiled function until then,
and prints the plain function's time, the first call's, the native calls' and the largest difference between the
answers.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from _compare import cluster_hint, median_time, speed

import phylanx_py as px


@px.compile
def relax(u, sweeps, omega):
    n, m = u.shape
    for _ in range(sweeps):
        for i in range(1, n - 1):
            for j in range(1, m - 1):
                u[i, j] += omega * (0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) - u[i, j])
    return u


def plate(size):
    """The start: zero everywhere but the top edge, held at 1."""
    u = np.zeros((size, size))
    u[0, :] = 1.0
    return u


def tier(fn) -> str:
    """The line of ``explain()`` saying which tier the calls run in now: the whole function's, or on a cluster
    (where loops go native one by one) the outer loop's."""
    lines = fn.explain().splitlines()
    return next((line for line in lines if line.startswith("function at")),
                next((line for line in lines if line.startswith("loop at")), lines[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=150, help="grid points a side (default 150)")
    ap.add_argument("--sweeps", type=int, default=10, help="sweeps a call (default 10)")
    ap.add_argument("--repeats", type=int, default=5, help="timed native calls (default 5)")
    ap.add_argument("--wait", type=float, default=60.0,
                    help="seconds to call the compiled function while its kernel compiles (default 60)")
    args = ap.parse_args()
    omega = 1.5  # over-relaxation: converges faster than plain Gauss-Seidel (omega = 1) on this problem

    # The current runtime: the local thread pool by default; a Dask cluster under ``phylanx-py run
    # --local-cluster 2`` / ``--scheduler tcp://...`` or PHYLANX_SCHEDULER=tcp://...
    rt = px.runtime.current()
    plates = iter([plate(args.size) for _ in range(4 + max(args.repeats, 1))])  # made before the timing starts
    t_plain = median_time(lambda: relax.__wrapped__(next(plates), args.sweeps, omega), 3)[0]
    # the first call translates the function and starts the tiers
    t_first = median_time(lambda: relax(next(plates), args.sweeps, omega), 1)[0]
    calls, start = 1, time.perf_counter()
    # Call on while the kernel compiles: each call meanwhile costs what the plain function costs.
    # (and while it is timed against the plain function: a kernel loaded at the first call, built before, is)
    while (" native runs" not in tier(relax) or "measuring against" in tier(relax)) and \
            time.perf_counter() - start < args.wait:
        relax(plate(args.size), args.sweeps, omega)
        calls += 1
    waited = time.perf_counter() - start
    t_now, u = median_time(lambda: relax(next(plates), args.sweeps, omega), args.repeats)
    u_plain = relax.__wrapped__(plate(args.size), args.sweeps, omega)

    print(f"SOR relaxation: {args.size} x {args.size} grid, {args.sweeps} sweeps a call")
    print(f"runtime: {rt!r}")
    print(f"  plain Python + NumPy     {t_plain * 1e3:9.2f} ms")
    local = getattr(rt.executor, "client", None) is None
    print(f"  phylanx-py, first call   {t_first * 1e3:9.2f} ms   translating, then "
          f"{'the plain function' if local else 'the interpreted tree'} while a native kernel compiles")
    print(f"  phylanx-py, now          {t_now * 1e3:9.2f} ms   {speed(t_plain / t_now)} than the plain function "
          f"(median of {args.repeats}, after {calls} calls in {waited:.1f} s)")
    print(f"  max |phylanx-py - NumPy| = {np.max(np.abs(u - u_plain)):.2g}")
    print(f"  explain(): {tier(relax).split('; compiled in')[0]}; ...)")
    print("vectorised NumPy code, fused into kernels:  python examples/lra.py")
    cluster_hint()
    if not np.allclose(u, u_plain):
        raise SystemExit("compiled and plain results differ")


if __name__ == "__main__":
    main()
