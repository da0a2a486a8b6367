"""Loops with comparison and logical ufuncs and boolean masks for the native tier's tests
(tests/test_native_masks.py)."""
import numpy as np


def ring_means(values, radius, n):
    # the shape of NPBench's azimint_naive: a mean of the values whose radius falls in each ring
    top = radius.max()
    out = np.zeros(n)
    for i in range(n):
        inside = np.logical_and(radius >= top * i / n, np.less(radius, top * (i + 1) / n))
        out[i] = values[inside].mean()
    return out


def ufunc_comparisons(a, b, flags):
    count = 0
    for i in range(a.shape[0]):
        flags[i] = np.logical_or(np.greater(a[i], b[i]), np.equal(a[i], 0.5))
        flags[i] = np.logical_xor(flags[i], np.less_equal(a[i], b[i, 0]))
        count += np.sum(np.logical_not(np.not_equal(a[i], b[i])))
        if np.greater_equal(a[i, 0], b[i, 0]) and np.logical_and(a[i, 1], 1):
            count += 1
    return count, flags


def mask_of_another_length(values, mask):
    total = 0.0
    for _ in range(3):
        total += values[mask].sum()
    return total


def compared_exp(a):
    count = 0
    for i in range(a.shape[0]):
        if np.less(np.exp(a[i, 0]), 2.0):
            count += 1
    return count
