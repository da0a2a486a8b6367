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


# which arguments a kernel may change (kir.Printed.arrays_written), one use each: the loop makes a kernel of it
def w_reads(p0):
    t = 0.0
    for v in p0:
        t = t + v + p0[0] + len(p0) + p0.shape[0] + p0.size
    return t


def w_element_2d(p0):
    t = 0.0
    for _ in range(1):
        t = t + p0[1, 2]
    return t


def w_store(p0):
    for _ in range(1):
        p0[0] = 1.0
    return p0


def w_update(p0):
    for _ in range(1):
        p0[0] += 1.0
    return p0


def w_other_name(p0):
    for _ in range(1):
        q = p0
        q[0] = 1.0
    return p0


def w_view(p0):
    t = 0.0
    for _ in range(1):
        v = p0[1:]
        t = t + v[0]
    return t


def w_new_axis(p0):
    t = 0.0
    for _ in range(1):
        v = p0[None]
        t = t + v[0, 0]
    return t


def w_row(p0):
    t = 0.0
    for _ in range(1):
        r = p0[0]
        t = t + r[0]
    return t


def w_rows(p0):
    for r in p0:
        r[0] = 1.0
    return p0


def w_one_of_two(p0, p1):
    t = 0.0
    for _ in range(1):
        t = p1[0] + p0[0]
        p1[0] = 2.0
    return t


def w_scalar(p0, n):
    t = 0.0
    for _ in range(n):
        t = t + p0[0]
    return t


def w_arithmetic(p0):
    t = np.zeros(2)
    for _ in range(1):
        t = p0[1:] + p0[:-1] * 2.0 - (p0[1:] > 0)
    return t


def w_new_array(p0):
    t = np.zeros(3)
    for _ in range(1):
        t = p0 + 1.0
        t[0] = 5.0
    return t


def w_dot(p0, p1):
    t = 0.0
    for _ in range(1):
        t = np.dot(p0[0, :2], p1[:2])
    return t


def w_flip(p0):
    for _ in range(1):
        v = np.flip(p0)
        v[0] = 1.0
    return p0


def w_sum_axis(p0):
    t = np.zeros(4)
    for _ in range(1):
        t = np.sum(p0[1:], axis=0)
    return t
