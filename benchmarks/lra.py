"""Benchmark: logistic regression (LRA) compiled by phylanx-py against the same function run by NumPy.

    python benchmarks/lra.py --runtime local                      # 2,000,000 x 20 float64, 10 iterations
    python benchmarks/lra.py --rows 20000 --repeats 2             # a quick smoke run

Both variants run in the same process on the same data; the table shows median wall times and the ratio
compiled / NumPy (target <= 1.05). Results must agree (np.allclose) or the script exits with status 1.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from _common import RUNTIMES, close_runtime, make_runtime, median_time, print_table, threadpool_summary

import phylanx_py as px


@px.compile
def lra(X, y, alpha, iterations):
    w = np.zeros(X.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        w = w - alpha * (X.T @ (p - y)) / X.shape[0]
    return w


def make_data(rows: int, cols: int, seed: int = 0):
    """Separable-ish synthetic data: labels from a random hyperplane plus a little noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, cols))
    w_true = rng.standard_normal(cols)
    y = (X @ w_true + 0.1 * rng.standard_normal(rows) > 0).astype(np.float64)
    return X, y


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", choices=sorted(RUNTIMES), default="local")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--cols", type=int, default=20)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--alpha", type=float, default=0.1)
    args = ap.parse_args(argv)

    X, y = make_data(args.rows, args.cols)
    call = (X, y, args.alpha, args.iterations)
    plain = lra.__wrapped__
    print(f"LRA {args.rows:,} x {args.cols} float64, {args.iterations} iterations, "
          f"median of {args.repeats} repeats, runtime={args.runtime}")
    print(threadpool_summary())

    rt = make_runtime(args.runtime)
    try:
        with px.using(rt):
            t0 = time.perf_counter()
            w_compiled = lra(*call)  # first call compiles; it is also the warm-up and the result we check
            first_call = time.perf_counter() - t0
            w_numpy = plain(*call)
            t_compiled = median_time(lambda: lra(*call), args.repeats, warmup=0)
            t_numpy = median_time(lambda: plain(*call), args.repeats, warmup=0)
    finally:
        close_runtime(rt)

    agree = np.allclose(w_compiled, w_numpy, rtol=1e-9, atol=1e-12)
    it = args.iterations
    print()
    print_table(
        ["variant", "median ms", "ms/iteration", "ratio"],
        [
            ["numpy (plain)", f"{t_numpy * 1e3:.1f}", f"{t_numpy * 1e3 / it:.2f}", "1.00"],
            [f"phylanx-py ({args.runtime})", f"{t_compiled * 1e3:.1f}", f"{t_compiled * 1e3 / it:.2f}",
             f"{t_compiled / t_numpy:.2f}"],
        ],
    )
    print()
    print(f"first compiled call (compile + run): {first_call * 1e3:.1f} ms")
    print(f"results agree (np.allclose): {agree}; max |diff| = {np.max(np.abs(w_compiled - w_numpy)):.3g}")
    print(f"ratio compiled/numpy = {t_compiled / t_numpy:.3f} (target <= 1.05)")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
