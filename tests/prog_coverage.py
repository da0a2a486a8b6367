"""NumPy that scientists write and that once raised CompileError: allocations by np.ndarray, reshaping by
assigning .shape, and the methods of ufuncs."""
import numpy as np


def alloc_ndarray(n):
    a = np.ndarray((n, 2), dtype=np.float64)
    a[...] = 1.5
    b = np.ndarray(n, dtype=np.int64)
    b.fill(3)
    return a, b


def alloc_in_loop(n):
    total = 0.0
    for i in range(n):
        row = np.ndarray(4, dtype=np.float64)
        for j in range(4):
            row[j] = i * j
        total += row[3]
    return total


def set_shape(b):
    a = b.copy()
    a.shape = (a.size,)
    return a


def set_two_shapes(a, b, n):
    a.shape = b.shape = n
    return a, b


def ufunc_methods(x, y, idx):
    o = np.add.outer(x, y)
    m = np.minimum.reduce(x)
    c = np.multiply.accumulate(y)
    h = np.zeros(4)
    np.add.at(h, idx, 1.0)
    return o, m, c, h, np.maximum.reduce(o, axis=1)


def ufunc_methods_in_loop(x, idx):
    h = np.zeros(4)
    for i in range(3):
        np.add.at(h, idx, x[i])
    return h


def flatten_in_place(b):
    b.shape = (b.size,)
    return b
