"""Programs whose element-wise chains feed a sum (fused into one pass)."""
import numpy as np


def kmeans_distances(X, C):
    d = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
    return d.argmin(axis=1), d


def sum_of_squares(x, m):
    return ((x - m) ** 2).sum()


def np_sum_axis0(x):
    return np.sum(x * 2.0 + 1.0, axis=0)


def np_sum_axis1(x):
    return np.sum(x * 2.0 + 1.0, axis=1)


def np_sum_all(x):
    return np.sum(x * 2.0 + 1.0)


def sum_variable_axis(x, axis):
    return (x * 2.0 + 1.0).sum(axis=axis)


def method_sum_negative_axis(x, y):
    return (x * y - 1).sum(axis=-1)


def int_chain(a, b):
    return (a * b + 3).sum(axis=0)


def bad_axis(x):
    return (x * 2.0 + 1.0).sum(axis=3)
