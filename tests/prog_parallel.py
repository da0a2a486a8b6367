"""Loops for the native tier's parallel variant (tests/test_native_parallel.py): loops whose iterations are
independent, and the dependences that keep a loop sequential."""
import numpy as np


def row_norms(x, out):
    for i in range(x.shape[0]):
        s = 0.0
        for j in range(x.shape[1]):
            s += x[i, j] * x[i, j]
        out[i] = np.sqrt(s)
    return out


def mirror_into(a, b):
    n = a.shape[0]
    for i in range(n):
        b[i] = a[n - 1 - i] + 1.0
    return b


def smooth(a, out):
    for i in range(1, a.shape[0] - 1):
        out[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0
    return out


def column_scale(a, s):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            a[i, j] *= s[j]
    return a


def escape_counts(c, out, limit):
    for i in range(c.shape[0]):
        z = 0.0
        k = 0
        while k < limit and z * z <= 4.0:
            z = z * z + c[i]
            k += 1
        out[i] = k
    return out


def smooth_in_place(a):
    for i in range(1, a.shape[0] - 1):
        a[i] = (a[i - 1] + a[i] + a[i + 1]) / 3.0
    return a


def prefix_sums(a, out):
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i]
        out[i] = s
    return out


def last_kept(a, out):
    k = 0
    for i in range(a.shape[0]):
        k = i
        out[i] = a[i] * 2.0
    return k


def from_start(a, out, lo):
    for i in range(lo, a.shape[0]):
        out[i] = a[i] + 1.0
    return out


def scatter_counts(idx, counts):
    for i in range(idx.shape[0]):
        counts[idx[i]] += 1
    return counts
