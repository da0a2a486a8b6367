"""A rank's per-label sums and counts by one compiled kernel (cross.group_sums): a pass over the labels for their
range, then one pass over the rows. k-means' per-centroid
``np.sum(X[labels == j], axis=0)`` and ``np.sum(labels == j)`` for every j at once, with no mask and no selected
copy of X. The kernel goes through the verified kernel cache (primitives/kernel_cache.py), so later segments and
the other workers load its machine code instead of compiling it.

Same bits as ``np.bincount`` (what ran before, and still runs when the kernel cannot): each label's sum adds its
rows' values as float64 in row order, as ``bincount(labels, weights=column)`` does; counts are exact integers."""
from __future__ import annotations

import threading
import time

import numpy as np
from phylanx_py.primitives import kernel_cache
from phylanx_py.primitives.fused import note_kernel

SOURCE = '''import numpy as np
import numba


@numba.njit(cache=True, nogil=True)
def kernel(labels, rows, limit):
    n = labels.shape[0]
    lo, hi = 0, -1
    if n:
        lo = hi = labels[0]
        for i in range(1, n):
            v = labels[i]
            lo = min(lo, v)
            hi = max(hi, v)
    k = hi + 1 if lo >= 0 and hi <= limit else 0
    counts = np.zeros(k, np.int64)
    sums = np.zeros((k, rows.shape[1]), np.float64)
    if k == 0 and n:
        return False, sums, counts
    for i in range(n):
        j = labels[i]
        counts[j] += 1
        for c in range(rows.shape[1]):
            sums[j, c] += np.float64(rows[i, c])
    return True, sums, counts
'''
_FAILED: set = set()  # (labels dtype, rows dtype) the kernel could not take: bincount from then on
_lock = threading.Lock()


def _kernel():
    return kernel_cache.load_or_build("spmd_table", SOURCE).kernel


def table(labels: np.ndarray, rows, limit: int):
    """(sums, counts): per label ``0 <= j <= max(labels)``, the float64 sum of ``rows``' rows (``rows`` 2-D, or
    None: counts only, sums None) and the count; None when a label is negative or above ``limit``."""
    key = (labels.dtype.str, None if rows is None else rows.dtype.str)
    if key not in _FAILED and labels.dtype.kind in "iu" and (rows is None or rows.dtype.kind in "iuf"):
        try:
            t0 = time.perf_counter()
            ok, sums, counts = _kernel()(labels, rows if rows is not None else np.empty((len(labels), 0)), limit)
            note_kernel(t0)  # (counted with the rank's other compiled kernels: spmd/rank.py)
            if not ok:
                return None
            return (None if rows is None else sums), counts.astype(np.intp, copy=False)
        except kernel_cache.UnsafeCacheError:
            raise
        except Exception:  # noqa: BLE001 - a type the kernel does not take: NumPy's bincount gives the same values
            with _lock:
                _FAILED.add(key)
    if labels.size and (labels.min() < 0 or labels.max() > limit):
        return None
    k = int(labels.max()) + 1 if labels.size else 0
    counts = np.bincount(labels, minlength=k)
    if rows is None:
        return None, counts
    sums = np.stack([np.bincount(labels, weights=rows[:, c], minlength=k) for c in range(rows.shape[1])], axis=1)
    return sums.reshape((k, rows.shape[1])), counts
