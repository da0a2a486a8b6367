"""Logistic regression (LRA) compiled by phylanx-py, against the same function run by plain NumPy.

    python examples/lra.py                                   # on this machine (a local thread pool)
    python examples/lra.py --iterations 50 --rows 20000      # other sizes
    python examples/lra.py --tree                            # also print the compiled execution tree
    phylanx-py run --local-cluster 2 examples/lra.py         # the same script on a local Dask cluster

Both versions run on the same data in the same process; the script prints both times (median of --repeats
calls), the speed-up, and the largest difference between the two weight vectors.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import phylanx_py as px


@px.compile
def lra(X, y, alpha, iterations):
    w = np.zeros(X.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        w = w - alpha * (X.T @ (p - y)) / X.shape[0]
    return w


def make_data(rows=100_000, cols=20, seed=42):
    """Linearly separable data: the label is the side of a random hyperplane through the origin."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, cols))
    y = (X @ rng.standard_normal(cols) > 0).astype(np.float64)
    return X, y


def median_time(fn, repeats):
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), result


def speed(ratio: float) -> str:
    return f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000, help="samples (default 100,000)")
    ap.add_argument("--cols", type=int, default=20, help="features (default 20)")
    ap.add_argument("--iterations", type=int, default=50, help="gradient steps (default 50)")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls of each version (default 3)")
    ap.add_argument("--tree", action="store_true", help="print the execution tree of the compiled function")
    args = ap.parse_args()

    X, y = make_data(args.rows, args.cols)
    # The current runtime: the local thread pool by default; a Dask cluster under ``phylanx-py run
    # --local-cluster 2`` / ``--scheduler tcp://...`` or PHYLANX_SCHEDULER=tcp://...
    rt = px.runtime.current()
    t0 = time.perf_counter()
    lra(X, y, 1.0, args.iterations)  # the first call translates the function and compiles its kernels
    t_first = time.perf_counter() - t0
    t_compiled, w = median_time(lambda: lra(X, y, 1.0, args.iterations), args.repeats)
    t_plain, w_plain = median_time(lambda: lra.__wrapped__(X, y, 1.0, args.iterations), args.repeats)

    accuracy = np.mean(((X @ w) > 0) == (y > 0.5))
    ratio = t_plain / t_compiled
    print(f"logistic regression: {args.rows:,} samples x {args.cols} features, {args.iterations} iterations")
    print(f"runtime: {rt!r}")
    print(f"  plain NumPy   {t_plain * 1e3:8.1f} ms")
    print(f"  phylanx-py    {t_compiled * 1e3:8.1f} ms   {speed(ratio)}"
          f" than plain NumPy   (median of {args.repeats}; the first call took {t_first * 1e3:.0f} ms: "
          "translating and compiling)")
    print(f"  max |phylanx-py - NumPy| = {np.max(np.abs(w - w_plain)):.2g}   training accuracy {accuracy:.3f}")
    if args.tree:
        print("\nexecution tree (print(lra.tree)):")
        print(lra.tree)
    if getattr(rt.executor, "client", None) is None:
        print("the same script on a local Dask cluster of 2 workers:  "
              "phylanx-py run --local-cluster 2 examples/lra.py")
    if not np.allclose(w, w_plain):
        raise SystemExit("compiled and plain results differ")


if __name__ == "__main__":
    main()
