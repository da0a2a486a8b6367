"""Every array that crosses Dask is handed on aligned: to the user (results), to a kernel (a task's inputs on a
worker) and to an SPMD rank (its tiles). Dask deserializes an array as a view into its receive buffer, whose data
can start at any byte (float64 data at an address 2 or 4 mod 8: ``flags.aligned`` False), and NumPy then leaves
BLAS and SIMD loops: ``X.T @ (X @ v)`` on a 2e6 x 20 result ran 10x slower than on an aligned copy (REFERENCES.md).
Such an array is copied once, on arrival, into a buffer aligned to 64 bytes (a cache line; Arrow's alignment);
an aligned one is passed on as it is."""
from __future__ import annotations

import numpy as np

ALIGNMENT = 64


def empty_aligned(shape, dtype, alignment: int = ALIGNMENT) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts at a multiple of ``alignment`` bytes."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(n + alignment, np.uint8)
    start = (-raw.ctypes.data) % alignment
    return raw[start:start + n].view(dtype).reshape(shape)


def aligned(x):
    """``x`` itself, or a 64-byte aligned copy of it when it is a NumPy array that is not aligned."""
    if type(x) is np.ndarray and not x.flags.aligned:
        out = empty_aligned(x.shape, x.dtype)
        out[...] = x
        return out
    return x


def aligned_values(value):
    """``value`` with every unaligned array in it (in lists, tuples and dicts too) replaced by an aligned copy."""
    t = type(value)
    if t is np.ndarray:
        return aligned(value)
    if t is list or t is tuple:
        return t(aligned_values(v) for v in value)
    if t is dict:
        return {k: aligned_values(v) for k, v in value.items()}
    return value
