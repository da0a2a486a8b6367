"""Programs for tests/test_native_kir.py (the native tier's kernel IR): their functions are compiled from source."""
from __future__ import annotations

import numpy as np


def floor_steps(a, n):  # a Python-int floor division: its helper raises at zero, as Python does
    s = 0
    for i in range(a.shape[0]):
        s = s + n // (i + 1)
    return s


def gather(a, idx):  # indices from an array's elements: proven when the array's range is read, else checked
    s = 0.0
    for i in range(idx.shape[0]):
        s += a[idx[i]]
    return s


def scaled_total(a, d):  # a NumPy float divided: the division is written as it is (no helper), and may raise
    t = d / 2.0
    s = 0.0
    for i in range(a.shape[0]):
        s += a[i] * t
    return s


def two_means(x, out):  # a reduction's temporary is bound mid-expression, after another reduction's helper call
    for i in range(x.shape[0]):
        out[i] = np.mean(x[i], axis=1) + x[i].mean(axis=0)[0]
    return out


def shifted_rows(c, a):  # an array statement as a loop nest: its test calls _apart(c, a) before the nest's set-up
    for i in range(c.shape[0] - 1):
        c[i + 1, 1:] = a[i, 1:] * 2.0
    return c


def hashes(keys, idx, out, lo):  # keys only read (elements, len, a loop over it); out stored; idx's view kept
    h = 0
    tail = idx[lo:]
    for k in keys:
        h = h * 31 + k
    for i in range(len(keys)):
        out[i] = keys[i] + h + tail[0]
    return h


def sliced(keys, out):  # out[1:] += ...: its key is held by a name, a slice: any array could be viewed, all count
    for _ in range(2):
        out[1:] += keys[1:]
    return out
