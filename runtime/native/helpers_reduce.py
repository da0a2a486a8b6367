"""Kernel helpers for NumPy's reductions over axes (reductions.py) and boolean masks (masks.py): plain Python
functions over C-contiguous arrays, rows (kept, reduced) or 3-D (before, reduced, after), ``zero`` being 0 in the
result's dtype; helpers.py declares them (``helper()``), and a kernel's module holds the source of those it names."""
import numpy as np

from .helpers_numpy import _pairwise


def _pxr_sum_rows(a, zero):
    out = np.full(a.shape[0], zero)
    for p in range(a.shape[0]):
        out[p] = zero + _pairwise(a[p], 0, a.shape[1])
    return out


def _pxr_isum_rows(a, zero):  # integers (any order: exact), accumulated in the result's dtype
    out = np.full(a.shape[0], zero)
    for p in range(a.shape[0]):
        s = zero
        for r in range(a.shape[1]):
            s += a[p, r]
        out[p] = s
    return out


def _pxr_sum_mid(a, zero):  # (before, reduced, after): added one by one in C order, as NumPy's outer loops do
    out = np.full((a.shape[0], a.shape[2]), zero)
    for b in range(a.shape[0]):
        for r in range(a.shape[1]):
            for p in range(a.shape[2]):
                out[b, p] += a[b, r, p]
    return out


def _pxr_empty(big):
    if big:
        raise ValueError("zero-size array to reduction operation maximum which has no identity")
    raise ValueError("zero-size array to reduction operation minimum which has no identity")


def _pxr_ext_rows(a, big):  # the greatest (big) or least element of each row
    if a.shape[1] == 0:
        _pxr_empty(big)
    out = a[:, 0].copy()
    for p in range(a.shape[0]):
        m = out[p]
        for r in range(1, a.shape[1]):
            v = a[p, r]
            if (v > m if big else v < m) or v != v:  # NaN wins, as in NumPy (nothing passes NaN after it)
                m = v
        out[p] = m
    return out


def _pxr_ext_mid(a, big):
    if a.shape[1] == 0:
        _pxr_empty(big)
    out = a[:, 0].copy()
    for b in range(a.shape[0]):
        for r in range(1, a.shape[1]):
            for p in range(a.shape[2]):
                v = a[b, r, p]
                if (v > out[b, p] if big else v < out[b, p]) or v != v:
                    out[b, p] = v
    return out


def _pxr_arg_empty(big):
    if big:
        raise ValueError("attempt to get argmax of an empty sequence")
    raise ValueError("attempt to get argmin of an empty sequence")


def _pxr_arg_rows(a, big):  # the first index of each row's greatest (big) or least element; of its first NaN if any
    if a.shape[1] == 0:
        _pxr_arg_empty(big)
    out = np.zeros(a.shape[0], np.int64)
    for p in range(a.shape[0]):
        m = a[p, 0]
        at = 0
        if m == m:
            for r in range(1, a.shape[1]):
                v = a[p, r]
                if v != v:
                    at = r
                    break
                if v > m if big else v < m:
                    m = v
                    at = r
        out[p] = at
    return out


def _px_mask(a, m):  # x[mask] of a 1-D array by a 1-D bool array (masks.py)
    if m.shape[0] != a.shape[0]:
        raise IndexError("boolean index did not match indexed array along axis 0")
    return a[m]
