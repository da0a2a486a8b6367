"""Loops that the native tier can lower but the SPMD tier declines (they index single rows of a tiled array), for
tests/test_native_cluster.py: on the cluster's arrays they run natively on a worker."""
import numpy as np


def row_norms(X):
    n, d = X.shape
    out = np.zeros(n)
    for i in range(n):
        s = 0.0
        for j in range(d):
            s += X[i, j] * X[i, j]
        out[i] = np.sqrt(s)
    return out


def smooth(u, v, steps):
    n = u.shape[0]
    for _ in range(steps):
        for i in range(1, n - 1):
            v[i] = (u[i - 1] + u[i] + u[i + 1]) / 3.0
        for i in range(1, n - 1):
            u[i] = v[i]
    return u


def weighted_total(X, w):
    total = 0.0
    for i in range(X.shape[0]):
        total += X[i, 0] * w[0] + X[i, 1] * w[1]
    return total


def past_the_end(x, k):
    s = 0.0
    for i in range(x.shape[0] + k):
        s += x[i]
    return s


def running_sums(x):
    y = x * 2.0
    out = np.zeros(x.shape[0])
    acc = 0.0
    for i in range(x.shape[0]):
        acc += y[i]
        out[i] = acc
    return out, acc


def repeated_norms(X, reps):
    n = X.shape[0]
    out = np.zeros(n)
    for _ in range(reps):  # the same values every time: a long task whose answer one pass gives
        for i in range(n):
            out[i] = np.sqrt(X[i, 0] * X[i, 0] + X[i, 1] * X[i, 1])
    return out


def int_hash(x):
    h = 7
    for i in range(x.shape[0]):
        h = h * 1000003 + int(x[i])
    return h


def sweep(u, v):
    n = u.shape[0]
    for i in range(1, n - 1):
        v[i] = (u[i - 1] + u[i] + u[i + 1]) / 3.0
    return v


def norms_into(X, out):
    for i in range(X.shape[0]):
        s = 0.0
        for j in range(X.shape[1]):
            s += X[i, j] * X[i, j]
        out[i] = np.sqrt(s)
    return out


def carried_in(x, out):
    prev = 0.0
    for i in range(x.shape[0]):
        out[i] = x[i] - prev
        prev = x[i]
    return out


def shifted_store(x, out):
    for i in range(x.shape[0] - 1):
        out[i + 1] = x[i] * 2.0
    return out


def wrapping_read(x, out):
    for i in range(x.shape[0]):
        out[i] = x[i] - x[i - 1]
    return out


def gathered(x, w, idx, out):
    for i in range(x.shape[0]):
        out[i] = x[i] * w[idx[i]]
    return out


def repeated_norms_into(X, out, reps):
    for i in range(X.shape[0]):
        for _ in range(reps):
            out[i] = np.sqrt(X[i, 0] * X[i, 0] + X[i, 1] * X[i, 1])
    return out
