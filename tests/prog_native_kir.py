"""Programs for tests/test_native_kir.py (the native tier's kernel IR): their functions are compiled from source."""


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
