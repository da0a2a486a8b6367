"""Logistic regression (LRA) compiled by phylanx-py, checked against the same function run by plain NumPy.

    python examples/lra.py           # train on synthetic data, compare compiled vs plain
    python examples/lra.py --tree    # also print the compiled execution tree (IR text)
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


def make_data(rows=10_000, cols=10, seed=42):
    """Linearly separable data: the label is the side of a random hyperplane through the origin."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, cols))
    y = (X @ rng.standard_normal(cols) > 0).astype(np.float64)
    return X, y


def main() -> None:
    ap = argparse.ArgumentParser(description="LRA example for phylanx-py")
    ap.add_argument("--tree", action="store_true", help="print the IR of the compiled function")
    ap.add_argument("--iterations", type=int, default=200)
    args = ap.parse_args()

    X, y = make_data()
    # The current runtime: the embedded local thread pool by default; a Dask cluster under
    # PHYLANX_SCHEDULER=tcp://... or ``phylanx-py run examples/lra.py --scheduler tcp://...``.
    rt = px.runtime.current()
    t0 = time.perf_counter()
    w = lra(X, y, 1.0, args.iterations)  # compiled: runs on the current runtime (the first call compiles)
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    w = lra(X, y, 1.0, args.iterations)
    t_compiled = time.perf_counter() - t0
    t0 = time.perf_counter()
    w_plain = lra.__wrapped__(X, y, 1.0, args.iterations)  # the undecorated Python function
    t_plain = time.perf_counter() - t0

    accuracy = np.mean(((X @ w) > 0) == (y > 0.5))
    np.set_printoptions(precision=4, suppress=True)
    print(f"data: {X.shape[0]:,} x {X.shape[1]}, {args.iterations} iterations")
    print(f"runtime: {rt!r}")
    print(f"weights (compiled): {w}")
    print(f"max |compiled - plain|: {np.max(np.abs(w - w_plain)):.3g}")
    print(f"accuracy on the training data: {accuracy:.4f}")
    print(f"time: compiled {t_compiled * 1e3:.1f} ms (first call, with compiling: {t_first * 1e3:.1f} ms), "
          f"plain {t_plain * 1e3:.1f} ms")
    if args.tree:
        print("\nexecution tree (str(lra.tree)):")
        print(lra.tree)
    else:
        print("(run with --tree to print the execution tree)")
    if not np.allclose(w, w_plain):
        raise SystemExit("compiled and plain results differ")


if __name__ == "__main__":
    main()
