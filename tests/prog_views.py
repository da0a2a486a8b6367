"""Views and aliasing: plain NumPy programs whose answer depends on a view sharing its base's data (a write
through a slice, a transpose or a reshape changes the base; a write to the base is seen by the view). The
differential tests run them on NumPy and tiled inputs in every tier (tests/test_views.py)."""
import numpy as np


def write_through_slice(x):
    s = x[2:8]
    s[0] = -9.0
    return x


def base_write_seen_by_slice(x):
    s = x[2:8]
    x[3] = 55.0
    return s


def column_inplace(X):
    s = X[:, 0]
    s += 100.0
    return X


def row_assign(X):
    r = X[1]
    r[:] = 7.0
    return X


def transpose_write(X):
    t = X.T
    t[0, 1] = -1.0
    t *= 2.0
    return X


def reshape_write(x):
    r = x.reshape(2, -1)
    r[1, 0] = 42.0
    return x


def ravel_write(X):
    r = X.ravel()
    r[3] = 9.0
    return X, r


def ravel_of_column_copies(X):
    r = X[:, 1].ravel()  # not contiguous: a copy in NumPy
    r[0] = 5.0
    return X, r


def flatten_copies(X):
    r = X.flatten()
    r[0] = 9.0
    return X, r


def view_of_view(x):
    s = x[1:9]
    t = s[2:4]
    t[:] = 0.0
    x[1] = -3.0
    return x, s, t


def new_axis_view(x):
    s = x[None, 2:5]
    s[0, 1] = 4.0
    return x, s


def stepped_view(x):
    s = x[::2]
    s[1] = -5.0
    x[4] = 12.0
    return x, s


def reversed_view(x):
    s = x[::-1]
    s[0] = 3.5
    return x, s


def copy_breaks_alias(x):
    c = x[2:5].copy()
    x[2] = 1.0
    return c


def view_in_loop(x, n):
    for i in range(n):
        s = x[i:i + 2]
        s += 1.0
    return x


def base_changed_in_loop(X, n):
    s = X[:, 0]
    for _ in range(n):
        X *= 2.0
    return s


def view_updated_in_loop(X, n):
    s = X[:, 1]
    for _ in range(n):
        s += X[:, 0]
    return X


def two_views_one_base(x):
    a = x[0:6]
    b = x[3:9]
    a[4] = 77.0
    return b


def view_and_base_both_in_loop(X, n):
    s = X[:, 1]
    for _ in range(n):
        X *= 2.0
        s += 1.0
    return X, s


def same_array_twice(a, b, n):
    for _ in range(n):
        a += 1.0
        b *= 2.0
    return a, b


def squeeze_write(X):
    s = np.squeeze(X[:, 0:1])
    s[0] = 3.0
    return X


def swapaxes_write(X):
    s = np.swapaxes(X, 0, 1)
    s[0, 1] = 3.0
    X[2, 1] = -2.0
    return X, s


def moveaxis_write(X):
    s = np.moveaxis(X, 0, -1)
    s[1, 2] = 3.0
    return X


def reshape_by_a_computed_count(a, b):
    n = int(np.sum(b))  # b is large: a task's value, a future while the reshape is built
    r = np.reshape(a, (n, -1))
    return r.shape, np.transpose(a.reshape(n, -1, 1), (1, 0, 2)).shape
