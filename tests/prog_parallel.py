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


# Found by review: each once ran its loop in parallel and gave another answer than the plain function.
def pick_rows(a, b, out, t):
    for i in range(out.shape[0]):
        out[i] = a[i] if i != t else b[i]  # a row of another length at t: ValueError
    return out


def last_doubled(a, out, m):
    t = 0.0
    k = 0
    while True:
        for i in range(a.shape[0]):
            t = a[i] * 2.0
            out[i] = t
        k += 1
        if k >= m:
            break  # skips the t = 0.0 below: t is the loop's last value
        t = 0.0
    return t


def tails(out, reps):
    n = out.shape[0]
    for k in range(out.shape[0], -3, -1):  # k ends at -2: range(k, n) starts below 0
        for i in range(k, n):
            s = 0.0
            if i < 0:
                for _j in range(reps):
                    s = s * 0.5 + 1.0
            out[i] = i * 1.0 + s
    return out


def reverse_bump(x, out):
    out = x[::-1]
    for i in range(x.shape[0]):
        out[i] = x[i] + 1.0
    return out


def symmetrize(a):
    b = a.T
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            a[i, j] = 0.5 * (a[i, j] + b[i, j])
    return a


def stepped(a, out, t, s):
    for i in range(out.shape[0]):
        acc = 0.0
        if i == t:
            for _j in range(0, 1, s):  # s == 0: ValueError
                acc += 1.0
        out[i] = a[i] + acc
    return out


def accumulate(a, out):
    for i in range(a.shape[0]):
        out[i] = out[i] + a[i]
    return out


def powers(a, e, out):
    for i in range(out.shape[0]):
        out[i] = a[i] ** e[i]  # an int64 exponent of -2**63 raises OverflowError in Numba
    return out


def counted(a, out, lo):
    n = a.shape[0]
    for k in range(n):
        for i in range(k + 1, n):
            out[k] += a[i]
    for j in range(n - 1, -1, -1):
        out[j] += 1.0
    for m in range(lo, n):
        out[m] *= 2.0
    return out
