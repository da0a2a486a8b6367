"""Programs for the visualization and profiling tests (compiled from this file's source)."""
import numpy as np


def lra(X, y, alpha, iterations):
    w = np.zeros(X.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        w = w - alpha * (X.T @ (p - y)) / X.shape[0]
    return w


def tiny(a, b):
    c = np.sin(a) + b
    return c * 2.0


def branchy(x, flag):
    if flag:
        y = np.sin(x)
    else:
        y = np.cos(x)
    return y * 2.0
