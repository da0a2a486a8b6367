"""The fallback for NumPy functions without a tile rule: every tiled input gathered to the client, the NumPy
function run there, and a ``TileFallbackWarning`` saying which function, where, and how much data moved."""
from __future__ import annotations

import warnings

from . import views
from .array import TileFallbackWarning, is_tiled
from .dispatch import implements
from .tile_program import site_info


def _gather_all(value, found):
    if is_tiled(value):
        a = value.to_numpy()
        found.append((value, a))
        return a
    t = type(value)
    if t is list or t is tuple:
        return t(_gather_all(v, found) for v in value)
    if t is dict:
        return {k: _gather_all(v, found) for k, v in value.items()}
    return value


@implements("fallback")
def fallback(name, fn, args, kwargs):
    """Run ``fn`` on the client with every tiled input gathered (a warning says where and how much). A result
    that is a NumPy view of gathered data is read-only and pins its tiled array (views.py)."""
    found: list = []
    args = _gather_all(tuple(args), found)
    kwargs = _gather_all(dict(kwargs), found)
    loc, label = site_info()
    where = f" at {loc}" if loc is not None else ""
    size = sum(t.nbytes for t, _ in found if t.size == t.size) / 1e6
    warnings.warn(f"{label if loc is not None else name}: no tile rule for {name}{where}; gathered "
                  f"{len(found)} tiled input(s) ({size:.1f} MB) to the client", TileFallbackWarning, stacklevel=3)
    return views.pin_fallback_views(fn(*args, **kwargs), found)
