"""Benchmark: per-node interpreter overhead (scalar loop) and small-array LRA, compiled vs plain Python/NumPy.

    python benchmarks/overhead.py [--runtime local] [--repeats 5]

(a) a scalar loop of 100,000 iterations with integer arithmetic and a branch; target <= 5x plain Python.
(b) LRA at Phylanx's size (569 x 30, breast-cancer shaped, 750 iterations); target <= 1.5x NumPy.
Each compiled function is called once first (that call compiles) and its result checked against plain Python.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
from _common import RUNTIMES, close_runtime, make_runtime, median_time, print_table

import phylanx_py as px


@px.compile
def scalar_loop(n):
    s = 0
    for i in range(n):
        if i % 3 == 0:
            s = s + i * 2
        else:
            s = s - 1
    return s


# IR nodes evaluated per iteration of scalar_loop, counted by hand from str(scalar_loop.tree), counting every
# node the evaluator visits (leaves too: a variable read or a constant is a node, as in Phylanx) but not the
# block wrappers:
#   loop step binding i                                1
#   if + its condition  eq(mod(i, 3), 0)               1 + 5   (eq, mod, i, 3, 0)
#   then, 1 in 3 iterations: define(s, add(s, mul(i, 2)))   6   (define, add, s, mul, i, 2)
#   else, 2 in 3 iterations: define(s, sub(s, 1))           4   (define, sub, s, 1)
# average: 7 + (6 + 2 * 4) / 3 = 11.67 nodes per iteration.
NODES_PER_ITERATION = 7 + (6 + 2 * 4) / 3
SCALAR_N = 100_000


@px.compile
def lra(X, y, alpha, iterations):
    w = np.zeros(X.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        w = w - alpha * (X.T @ (p - y)) / X.shape[0]
    return w


def lra_data(rows=569, cols=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, cols))
    y = (X @ rng.standard_normal(cols) > 0).astype(np.float64)
    return X, y


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", choices=sorted(RUNTIMES), default="local")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    X, y = lra_data()
    lra_args = (X, y, 0.1, 750)

    rt = make_runtime(args.runtime)
    try:
        with px.using(rt):
            # warm-up = first call (compiles), and the results we check
            s_compiled, s_plain = scalar_loop(SCALAR_N), scalar_loop.__wrapped__(SCALAR_N)
            w_compiled, w_plain = lra(*lra_args), lra.__wrapped__(*lra_args)
            t_loop_c = median_time(lambda: scalar_loop(SCALAR_N), args.repeats, warmup=0)
            t_loop_p = median_time(lambda: scalar_loop.__wrapped__(SCALAR_N), args.repeats, warmup=0)
            t_lra_c = median_time(lambda: lra(*lra_args), args.repeats, warmup=0)
            t_lra_p = median_time(lambda: lra.__wrapped__(*lra_args), args.repeats, warmup=0)
    finally:
        close_runtime(rt)

    loop_ok = s_compiled == s_plain
    lra_ok = bool(np.allclose(w_compiled, w_plain, rtol=1e-9, atol=1e-12))
    nodes = SCALAR_N * NODES_PER_ITERATION
    print(f"runtime={args.runtime}, median of {args.repeats} repeats after one warm-up call\n")
    print_table(
        ["benchmark", "plain ms", "compiled ms", "ratio", "target", "agree"],
        [
            [f"(a) scalar loop, n={SCALAR_N:,}", f"{t_loop_p * 1e3:.1f}", f"{t_loop_c * 1e3:.1f}",
             f"{t_loop_c / t_loop_p:.2f}", "<= 5", loop_ok],
            ["(b) LRA 569x30, 750 iterations", f"{t_lra_p * 1e3:.1f}", f"{t_lra_c * 1e3:.1f}",
             f"{t_lra_c / t_lra_p:.2f}", "<= 1.5", lra_ok],
        ],
    )
    print()
    print(f"(a) compiled: {t_loop_c / SCALAR_N * 1e6:.2f} us/iteration, "
          f"{t_loop_c / nodes * 1e6:.3f} us/IR node ({NODES_PER_ITERATION:.2f} nodes/iter, see comment), "
          f"plain Python: {t_loop_p / SCALAR_N * 1e6:.3f} us/iteration")
    print(f"(b) compiled: {t_lra_c / 750 * 1e6:.1f} us/iteration; "
          f"numpy: {t_lra_p / 750 * 1e6:.1f} us/iteration")
    if not (loop_ok and lra_ok):
        print(f"MISMATCH: scalar loop {s_compiled!r} vs {s_plain!r}; LRA allclose={lra_ok}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
