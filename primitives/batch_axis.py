"""Moving the batch axis of an array from first to last (``batch_last``) and back (``batch_first``), as a new
C-contiguous array: what the convolution kernels do at every boundary between NCHW and their (C, H, W, N)
working layout (conv_ops.py).

Either move is the transpose of a 2-D (N, rest) array. Moving N last, NumPy copies the transposed view in the
output's order, reading the input with a stride of a whole row (4 KB for the digits CNN's 64x16x8x8 float32
activations): 187 us. A copy in 32x32 tiles (Numba, compiled on first use and cached on disk) reads whole cache
lines: 49 us (CPU time, medians of 1,000). The copy is exact; other dtypes, small or non-contiguous arrays, and
``PHYLANX_NUMBA=0`` take NumPy's copy. Moving N first, NumPy's copy is already the fast one.
"""
from __future__ import annotations

import os

import numpy as np

MIN_ELEMENTS = 1 << 13  # below this NumPy's copy takes a few microseconds: no compiled call needed
_compiled: dict = {}


def _tiled_transpose():
    if _compiled:
        return _compiled["transpose"]
    import numba

    @numba.njit(cache=True, nogil=True)
    def transpose(a, out):
        """out[j, i] = a[i, j] in 32x32 tiles."""
        n, m = a.shape
        for i0 in range(0, n, 32):
            i1 = min(i0 + 32, n)
            for j0 in range(0, m, 32):
                j1 = min(j0 + 32, m)
                for i in range(i0, i1):
                    for j in range(j0, j1):
                        out[j, i] = a[i, j]

    _compiled["transpose"] = transpose
    return transpose


def _fast(x) -> bool:
    return (type(x) is np.ndarray and x.dtype in (np.float32, np.float64) and x.flags.c_contiguous
            and x.size >= MIN_ELEMENTS and os.environ.get("PHYLANX_NUMBA", "1") != "0")


def batch_last(x):
    """x (N, ...) as a C-contiguous (..., N) array."""
    if x.ndim < 2 or not _fast(x):
        return np.ascontiguousarray(np.moveaxis(x, 0, -1))
    n = x.shape[0]
    out = np.empty(x.shape[1:] + (n,), x.dtype)
    _tiled_transpose()(x.reshape(n, -1), out.reshape(-1, n))
    return out


def batch_first(y):
    """y (..., N) as a C-contiguous (N, ...) array. NumPy's copy is the fast one this way round (its output's rows
    read the input with a stride of N elements: 45 us for the digits activations; the tiled copy writes rows 4 KB
    apart, which share cache sets: 210 us)."""
    return np.ascontiguousarray(np.moveaxis(y, -1, 0))
