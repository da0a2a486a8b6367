"""Programs for the Dask runtime tests (compiled from this file's source)."""
import numpy as np


def lra(X, y, alpha, iterations):
    w = np.zeros(X.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        w = w - alpha * (X.T @ (p - y)) / X.shape[0]
    return w


def shape_mismatch(X, w):
    y = X * 2.0
    return y @ w


def data_dependent(x, limit):
    total = 0.0
    n = 0
    while x.sum() < limit:
        x = x * 1.5 + 1.0
        n += 1
    if x.mean() > 10:
        total = x.max()
    return n, total, x


def independent_branches(a, b):
    left = np.sin(a) @ np.cos(a).T
    right = np.exp(-b * b).sum(axis=0)
    return left.sum() + right.sum()
