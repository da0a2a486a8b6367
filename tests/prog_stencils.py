"""Element-wise array statements over slices, as NumPy stencil codes write them (runtime/native/scalarize.py)."""
import numpy as np


def jacobi(steps, A, B):
    for _ in range(1, steps):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1])


def fdtd(steps, ex, ey, hz, fict):
    for t in range(steps):
        ey[0, :] = fict[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])


def shift_same_array(steps, a):
    # reads another part of the array it writes: NumPy reads the whole right side first
    for _ in range(steps):
        a[1:] = a[:-1] + 1.0
    return a


def same_elements(steps, a, b):
    for _ in range(steps):
        a[1:-1] = a[1:-1] * 0.5 + b[2:] - b[:-2]
    return a


def rows(a, b):
    n = a.shape[0]
    for i in range(1, n):
        b[i, 1:] = a[i - 1, :-1] * 2.0 + b[i, 1:]
    return b


def rows_from_the_row_before(a, b):
    # another row of the array written: a nest, its test that the rows differ (i - 1 != i)
    n = a.shape[0]
    for i in range(1, n):
        b[i, 1:] = a[i - 1, :-1] * 2.0 + b[i - 1, 1:]
    return b


def columns_from_a_given_column(k, a):
    # the column read is the column written when j == k: the nest's test fails there and the loop reruns
    # interpreted (NumPy's answer)
    for j in range(a.shape[1]):
        a[1:, j] = a[:-1, k] * 0.5 + a[1:, j]
    return a


def rows_by_a_negative_index(a):
    # a[i - n] is a[i]: the same row once the index is read as Python reads it (the test compares normalized rows)
    n = a.shape[0]
    for i in range(n):
        a[i, 1:] = a[i - n, :-1] * 2.0 + 1.0
    return a


def broadcast_column(a, b):
    for _ in range(2):
        b[1:-1, :] = a[1:-1, 0:1] + 1.0
    return b


def cast_on_store(a, b):
    for _ in range(2):
        b[:] = a * 2.5
    return b


def whole_arrays(steps, a, b):
    for _ in range(steps):
        b[:] = np.sqrt(a * a + 1.0) - b
    return b


def scalar_operands(steps, a, b, c):
    for t in range(steps):
        b[1:-1] = a[2:] * c[t] + a[:-2] / (t + 1)
    return b


def mismatched(a, b):
    for _ in range(1):
        b[1:3] = a[0:5] * 2.0
    return b


def temporaries(steps, a, b):
    for _ in range(steps):
        lap = 4.0 * a[1:-1] - (a[2:] + a[:-2])
        flux = np.maximum(lap * (a[2:] - a[1:-1]), 0.0) - lap
        b[1:-1] = a[1:-1] - 0.1 * flux
        a = b * 1.0
    return a, b


def view_not_copy(steps, a):
    for _ in range(steps):
        v = a[1:]
        v += 1.0  # through the view: a changes too
    return a


def rebinds_what_it_reads(steps, x):
    for _ in range(steps):
        x = x[1:] * 2.0 + x[:-1]
    return x


def new_array_keeps_the_operands_order(steps, a, b):
    x = a
    for _ in range(steps):
        x = a + b * 2.0
    return x


def orthonormalize(a):
    # modified Gram-Schmidt: column statements inside loops whose indices the tier versions by sign
    m, n = a.shape
    q = np.zeros((m, n))
    for k in range(n):
        q[:, k] = a[:, k] / np.sqrt(np.dot(a[:, k], a[:, k]))
        for j in range(k + 1, n):
            a[:, j] -= q[:, k] * np.dot(q[:, k], a[:, j])
    return q


def where_and_clip(steps, a, b):
    # np.where and np.clip in element-wise statements: the choice of one element, NumPy's result dtype
    for _ in range(steps):
        b[1:-1] = np.where(a[1:-1] > a[:-2], a[1:-1] * 0.5, 0)
        a[:] = np.clip(b * 3.0, -0.5, 0.5)
    return a + b


def where_weak_scalar(steps, x):
    # a Python scalar is weak (NEP 50): float32 and int32 arrays keep their dtype
    for _ in range(steps):
        x[:] = np.where(x > 1, x - 1, 3)
    return x


def clip_ints(steps, a, b):
    for _ in range(steps):
        b[1:] = np.clip(a[1:] * 3 - a[:-1], 2, 10)
        a[:] = b
    return a


def offset_elements(a, k, n):
    # an offset the loop does not change: its iterations touch distinct elements when k >= 0 (a[-1] is a[n-1])
    for i in range(n):
        a[k + i] = a[k + i] * 2.0 + 1.0
    return a


def straight_line(in_field, coeff):
    # a stencil without a loop (NPBench's hdiff in small): statements and the returned expression as loop nests
    n, m = coeff.shape
    lap = 4.0 * in_field[1:n + 3, 1:m + 3] - (in_field[2:n + 4, 1:m + 3] + in_field[0:n + 2, 1:m + 3])
    res = lap[1:, 1:m + 1] - lap[:-1, 1:m + 1]
    flx = np.where(res * (in_field[2:n + 3, 2:m + 2] - in_field[1:n + 2, 2:m + 2]) > 0, 0, res)
    return np.clip(in_field[2:n + 2, 2:m + 2] - coeff * (flx[1:, :] - flx[:-1, :]), -2.0, 2.0) * 0.5


def broadcast_new_axes(steps, u, v, a):
    # new axes broadcast an operand along a loop of the nest; ``a += e`` on a whole array is a store into it
    for _ in range(steps):
        a += u[:, None] * v[None, :]
        d = u[:, None] - v[None, :]
        a[1:, :] -= 0.5 * d[:-1, :]
    return a


def outer_products(steps, u, v, a):
    # NPBench's gemver: a += np.outer(u1, v1) + np.outer(u2, v2); np.outer of vectors and slices of them
    for _ in range(steps):
        w = u * 2.0
        a += np.outer(u, v) + np.outer(w, v)
        a[1:, :] -= 0.5 * np.outer(u[1:], v)
    return a


def outer_of_a_matrix(steps, m, v, a):
    # np.outer ravels a matrix first: not a nest
    for _ in range(steps):
        a += np.outer(m, v)
    return a


def overlapping_inplace(steps, a, m):
    # the operand of an in-place update shares memory with its target: NumPy reads a copy of it
    for _ in range(steps):
        a[1:] += a[:-1]
        a += a[::-1]
        m += m.T
        m -= m[::-1, :]
    return a, m


def prefix_step(a):
    a[1:] += a[:-1]
    return a * 2.0  # (a loop nest: the straight-line kernel is made)


def products_only(alpha, a, b, c, d):
    # NPBench's k2mm: matrix products and a scaled sum, nothing for a loop nest
    d[:] = alpha * a @ b @ c + 1.5 * d
    return d
