"""Kernel helpers that compute as NumPy does, in NumPy's order: float sums pairwise, linspace's steps. Plain
Python functions, declared as helpers by helpers.py (``helper()``: Numba's default options for each); a kernel's
module holds the source of those its source names."""
import numpy as np


# np.linspace(start, stop, num) of numbers, float64, in NumPy's steps (function_base.linspace): arange times the
# step (or over the count times the span when the step underflows to 0), plus start, the last element set to stop
def _px_linspace(start, stop, num):
    if num < 0:
        raise ValueError("Number of samples must be non-negative.")
    div = num - 1
    y = np.arange(0, num).astype(np.float64)
    delta = np.float64(stop) - np.float64(start)
    if div > 0:
        step = delta / div
        if step == 0:
            y = y / div
            y = y * delta
        else:
            y = y * step
    else:
        y = y * delta
    y = y + np.float64(start)
    if num > 1:
        y[num - 1] = np.float64(stop)
    return y


def _block(a, lo, n):
    if n < 8:
        res = np.zeros(1, a.dtype)[0]
        for i in range(n):
            res += a[lo + i]
        return res
    r0 = a[lo]
    r1 = a[lo + 1]
    r2 = a[lo + 2]
    r3 = a[lo + 3]
    r4 = a[lo + 4]
    r5 = a[lo + 5]
    r6 = a[lo + 6]
    r7 = a[lo + 7]
    m = n - n % 8
    for i in range(8, m, 8):
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(m, n):
        res += a[lo + i]
    return res


# NumPy's recursion (halves rounded down to a multiple of 8, blocks of <= 128) as a loop over an explicit
# stack: Numba's disk cache crashes on recursive functions loaded back
def _pairwise(a, lo, n):
    if n <= 128:
        return _block(a, lo, n)
    los = np.empty(64, np.int64)
    ns = np.empty(64, np.int64)
    stage = np.zeros(64, np.int64)
    left = np.zeros(64, a.dtype)
    sp = 0
    los[0] = lo
    ns[0] = n
    r = left[0]
    have = False
    while True:
        if have:
            if sp < 0:
                return r
            at, m = los[sp], ns[sp]
            if stage[sp] == 1:
                left[sp] = r
                stage[sp] = 2
                n2 = m // 2
                n2 -= n2 % 8
                sp += 1
                los[sp], ns[sp], stage[sp] = at + n2, m - n2, 0
                have = False
            else:
                r = left[sp] + r
                sp -= 1
            continue
        at, m = los[sp], ns[sp]
        if m <= 128:
            r = _block(a, at, m)
            sp -= 1
            have = True
            continue
        n2 = m // 2
        n2 -= n2 % 8
        stage[sp] = 1
        sp += 1
        los[sp], ns[sp], stage[sp] = at, n2, 0


def _px_sum(a):
    """np.sum of a 1-D float64/float32/int64 array in NumPy's order (the lowering declines other kinds)."""
    return np.zeros(1, a.dtype)[0] + _pairwise(a, 0, a.shape[0])
