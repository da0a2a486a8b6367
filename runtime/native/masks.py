"""Boolean masks in a native kernel: ``x[mask]`` of a 1-D array by a 1-D bool array of its length (a copy of the
elements where the mask is true, as NumPy's), checked as NumPy checks it (IndexError when the lengths differ).
``rule`` is the getitem rule calls.py's ``c_operator_getitem`` hands such an index to."""
from __future__ import annotations

from . import kinds as K


def rule(lowerer, n, atoms, obj, key):
    """(source, kind) of ``obj[key]`` with ``key`` a bool array, or the lowerer's Decline."""
    if obj.ndim != 1 or key.ndim != 1:
        lowerer.fail(f"indexing {K.describe(obj)} with {K.describe(key)}", n)
    return lowerer.helper("_px_mask", atoms[0], atoms[1]), K.array(obj.dtype, 1)
