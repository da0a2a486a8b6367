"""Programs for the row-product pass (passes/rowdot.py): ``X.T @ f(X @ v, ...)`` and near misses (LRA itself is
prog_tiled.lra)."""
import numpy as np


def least_squares_step(X, y, w):
    return X.T @ (X @ w - y)


def weighted(X, y, w, c):
    return np.transpose(X) @ (np.tanh(X @ w) * y + c)


def temporary_read_twice(X, y, w):
    p = np.exp(-(X @ w))
    return X.T @ (p - y), p.sum()


def temporary_returned(X, y, w):
    p = X @ w
    g = X.T @ (p - y)
    return g, p


def other_matrix(X, Z, y, w):
    return X.T @ (Z @ w - y)


def mismatch(X, y, w):
    r = X @ w
    return X.T @ (r - y)
