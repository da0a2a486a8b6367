"""Functions to differentiate, and a generator of random differentiable programs (for the property test)."""
from __future__ import annotations

import numpy as np

import phylanx_py as px
from phylanx_py import nn


def logistic_loss(w, X, y):
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def logistic_grad_by_hand(w, X, y):
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    return X.T @ (p - y) / X.shape[0]


def mlp_loss(params, X, Y):
    h = np.maximum(X @ params["W1"] + params["b1"], 0.0)
    return nn.softmax_cross_entropy(h @ params["W2"] + params["b2"], Y)


def mlp_grad_by_hand(params, X, Y):
    """Back-propagation written out: the reference the traced gradient must equal."""
    a = X @ params["W1"] + params["b1"]
    h = np.maximum(a, 0.0)
    z = h @ params["W2"] + params["b2"]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    dz = p.copy()
    dz[np.arange(len(Y)), Y] -= 1.0
    dz /= len(Y)
    dh = dz @ params["W2"].T
    da = dh * (a > 0)
    return {"W1": X.T @ da, "b1": da.sum(axis=0), "W2": h.T @ dz, "b2": dz.sum(axis=0)}


def power_loop(x, n):
    """A loop whose trip count is an argument (known at call time)."""
    acc = x
    for _ in range(n):
        acc = np.sin(acc) * x
    return np.sum(acc)


def data_dependent_if(x):
    if np.sum(x) > 0:
        return np.sum(np.exp(x))
    return np.sum(x * x * 3.0)


def newton_sqrt(a):
    """A while loop whose trip count depends on the data: Newton's iteration for sqrt(a), summed."""
    x = a + 1.0
    while np.max(np.abs(x * x - a)) > 1e-10:
        x = 0.5 * (x + a / x)
    return np.sum(x)


@px.compile
def compiled_loss(w, X, y):
    return np.sum((X @ w - y) ** 2) / X.shape[0]


def tuple_args(pair, scale):
    a, b = pair
    return np.sum(a * b) * scale + np.sum(np.tanh(a))


def uses_float_of_loss(x):
    return float(np.sum(x)) * x[0]


def indexes_and_stacks(x, W):
    rows = x[1:, :] @ W                       # slice
    picked = x[np.array([0, 2, 2])]           # fancy indexing with a repeat: gradients add up
    both = np.concatenate([rows, picked @ W], axis=0)
    st = np.stack([both[:, 0], both[:, 1]], axis=1)
    return np.sum(st.reshape(-1) ** 2) + np.sum(np.where(x > 0.1, x, 2.0 * x).T)


def reductions(x):
    return (np.max(x, axis=0).sum() + np.min(x) + x.mean(axis=1, keepdims=True).sum() + np.var(x) + x.std(axis=0)[0]
            + nn.logsumexp(x, axis=1).sum() + np.sum(nn.softmax(x)[:, 0]) + np.sum(nn.log_softmax(x, axis=0)))


def linalg(a, b):
    return (np.sum(np.tensordot(a, b, axes=([1], [0]))) + np.einsum("ij,jk->", a, b) + np.sum(np.dot(a[0], b))
            + np.sum(np.outer(a[:, 0], b[0])) + np.sum(np.clip(a, -0.3, 0.3) * 2.0))


# ---- random differentiable programs ------------------------------------------------------------------------
SMOOTH_UNARY = [
    ("tanh", np.tanh), ("sin", np.sin), ("exp", lambda x: np.exp(0.3 * x)), ("log1p", lambda x: np.log(1.0 + x * x)),
    ("sqrt", lambda x: np.sqrt(x * x + 1.0)), ("square", np.square), ("neg", lambda x: -x),
    ("recip", lambda x: 1.0 / (2.0 + np.cos(x))), ("pow", lambda x: (x * x + 1.0) ** 1.5),
    ("T", lambda x: x.T), ("sum0", lambda x: np.sum(x, axis=0)), ("mean_k", lambda x: x.mean(axis=-1, keepdims=True)),
    ("flip", lambda x: x[::-1]), ("head", lambda x: x[1:]), ("ravel", lambda x: x.reshape(-1)),
]
SMOOTH_BINARY = [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / (1.5 + b * b)), ("matmul", lambda a, b: a @ b),
    ("concat", lambda a, b: np.concatenate([a, b], axis=0)), ("arctan2", lambda a, b: np.arctan2(a, b * b + 1.0)),
    ("where", lambda a, b: np.where(a > 0.0, a * b, b - a)),
]


def random_program(seed: int, n_ops: int = 6):
    """A function f(A, B, C) of random operations on a pool of values (operations whose shapes do not fit are
    skipped), returning a weighted sum of everything it computed: every operation is on the gradient's path."""
    def f(A, B, C):
        rng = np.random.default_rng(seed)
        pool = [A, B, C]
        for _ in range(n_ops):
            if rng.random() < 0.5:
                _, op = SMOOTH_UNARY[rng.integers(len(SMOOTH_UNARY))]
                args = (pool[rng.integers(len(pool))],)
            else:
                _, op = SMOOTH_BINARY[rng.integers(len(SMOOTH_BINARY))]
                args = (pool[rng.integers(len(pool))], pool[rng.integers(len(pool))])
            try:
                with np.errstate(all="raise"):
                    out = op(*args)
            except (ValueError, FloatingPointError, px.trace.TraceError):
                continue
            if np.ndim(out) > 0 and np.size(out) > 0:
                pool.append(out)
        total = 0.0
        for i, v in enumerate(pool[3:]):
            weights = np.cos(np.arange(np.size(v), dtype=float) + i).reshape(np.shape(v))
            total = total + np.sum(v * weights)
        return total + np.sum(A * A) * 0.1
    return f
