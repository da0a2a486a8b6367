"""A small neural network (64-32-10, ReLU, softmax cross-entropy) trained on scikit-learn's bundled 8x8 digits
by gradient descent: gradients from ``px.grad`` (one traced execution tree, forward and backward) against the
same network's gradients written out by hand in NumPy (backpropagation), in the same training loop.

    pip install -e ".[examples]"                           # scikit-learn
    python examples/mlp.py                                 # 100 full-batch steps on 1,437 images
    python examples/mlp.py --steps 20
    phylanx-py run --local-cluster 2 examples/mlp.py       # the same script on a local Dask cluster

``phylanx_py.nn`` wraps the same machinery in layers, optimisers and ``fit`` (examples/digits.py).
"""
from __future__ import annotations

import time

import numpy as np
from _compare import check, cluster_hint, parser, speed

import phylanx_py as px
from phylanx_py import nn


def loss(params, X, Y):
    """Mean softmax cross-entropy of the network on (X, Y): plain NumPy."""
    h = np.maximum(X @ params["W1"] + params["b1"], 0.0)
    return nn.softmax_cross_entropy(h @ params["W2"] + params["b2"], Y)


def numpy_grad(params, X, Y):
    """The same gradient by hand: backpropagation through the two layers."""
    z = X @ params["W1"] + params["b1"]
    h = np.maximum(z, 0.0)
    logits = h @ params["W2"] + params["b2"]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(Y)), Y] -= 1.0
    d_logits = p / len(Y)
    d_h = d_logits @ params["W2"].T
    d_z = d_h * (z > 0) + 0.5 * d_h * (z == 0)  # ReLU's gradient at exactly 0 taken as 1/2, as px.grad does
    return {"W1": X.T @ d_z, "b1": d_z.sum(axis=0), "W2": h.T @ d_logits, "b2": d_logits.sum(axis=0)}


def train(grad_fn, params, X, Y, steps, lr):
    params = dict(params)
    for _ in range(steps):
        g = grad_fn(params, X, Y)
        params = {k: params[k] - lr * g[k] for k in params}
    return params


def load():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    return train_test_split(d.data / 16.0, d.target, test_size=360, random_state=0)


def main(argv=None):
    ap = parser(__doc__)
    ap.add_argument("--steps", type=int, default=100, help="gradient steps (default 100)")
    ap.add_argument("--hidden", type=int, default=32, help="hidden units (default 32)")
    ap.add_argument("--lr", type=float, default=0.5, help="learning rate (default 0.5)")
    args = ap.parse_args(argv)
    Xtr, Xte, Ytr, Yte = load()
    rng = np.random.default_rng(0)
    params = {"W1": rng.standard_normal((64, args.hidden)) * np.sqrt(2 / 64), "b1": np.zeros(args.hidden),
              "W2": rng.standard_normal((args.hidden, 10)) * np.sqrt(2 / args.hidden), "b2": np.zeros(10)}
    g = px.grad(loss)
    t0 = time.perf_counter()
    g(params, Xtr, Ytr)  # traces the tree and compiles it
    t_first = time.perf_counter() - t0
    times = {}
    for name, fn in (("px.grad", g), ("NumPy", numpy_grad)):
        runs = []
        for _ in range(max(args.repeats, 1)):
            t0 = time.perf_counter()
            trained = train(fn, params, Xtr, Ytr, args.steps, args.lr)
            runs.append(time.perf_counter() - t0)
        times[name] = (float(np.median(runs)), trained)
    (t_px, got), (t_np, want) = times["px.grad"], times["NumPy"]
    print(f"neural network 64-{args.hidden}-10 on digits: {len(Xtr):,} training images, {args.steps} full-batch "
          "steps")
    print(f"runtime: {px.runtime.current()!r}")
    print(f"  NumPy backpropagation   {t_np * 1e3:8.1f} ms")
    print(f"  px.grad                 {t_px * 1e3:8.1f} ms   {speed(t_np / t_px)} than NumPy   (median of "
          f"{args.repeats}; tracing and compiling took {t_first * 1e3:.0f} ms)")
    for k in params:
        check(k, got[k], want[k], rtol=1e-6, atol=1e-8)
    accuracy = np.mean((np.maximum(Xte @ got["W1"] + got["b1"], 0) @ got["W2"] + got["b2"]).argmax(axis=1) == Yte)
    print(f"  test accuracy {accuracy:.3f} (360 held-out images)")
    cluster_hint()


if __name__ == "__main__":
    main()
