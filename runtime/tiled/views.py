"""Views of tiled arrays: ``x[2:8]``, ``X[:, 0]``, ``x.T``, a reshape NumPy would not copy, alias their base as
NumPy's views do: a write through the view changes the base, a write to the base is seen by the view.

A view is a lazy tiled array linked to its base (``TiledArray._link``) with two functions: ``derive(base)`` makes
the view's value from the base's current state, ``write(base, value)`` stores a new value of the view into the base
(a region assignment for a slice, the inverse transpose for a transpose). An in-place change of a view goes to its
base (``TiledArray._become``); a change of an array derives its live views again, each cheaply (a lazy rule: no task
runs until the tiles are needed). Whether a reshape is a view is NumPy's own answer, asked of a stand-in array with
the strides NumPy would give the view (``layout``), so the same reshape copies in both or in neither.

Operations without a tile rule gather their inputs and run NumPy on the client (fallback.py); when NumPy's result
there is a view of the gathered data (``np.flip(x)``, a slice with a step across tiles), it cannot alias the tiles:
it is returned read-only, and the tiled array refuses to change while that result is alive (``TiledArray._pin``), so
neither side is silently a copy."""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .array import TiledArray, is_tiled
from .create import from_numpy_like

_BYTE = np.zeros(1, np.uint8)


def layout(t: TiledArray) -> np.ndarray:
    """A stand-in for ``t``'s memory as NumPy would lay it out: one byte per element, strides as NumPy's, no data
    (as_strided over one byte: never read). A tiled array that is not a view is C-contiguous, as the NumPy array
    the plain function would get."""
    if t._layout is not None:
        return t._layout
    shape = tuple(int(n) if n == n else 1 for n in t.shape)
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return as_strided(_BYTE, shape=shape, strides=tuple(reversed(strides)), writeable=False)


def root(t: TiledArray) -> TiledArray:
    """The array whose data ``t`` views (``t`` itself when it is no view)."""
    while t._view is not None:
        t = t._view[0]
    return t


def link(base: TiledArray, view, derive, write, relayout):
    """``view`` (``derive(base)``'s first result) as a view of ``base``; ``relayout(layout)`` applies the same
    indexing to a stand-in array. A result that is not tiled (a scalar, a fallback's NumPy array) is returned as
    it is."""
    if not is_tiled(view):
        return view
    return view._link(base, lambda b: as_tiled(derive(b), b), write, relayout(layout(base)))


def reshaped(t: TiledArray, shape):
    """The stand-in of NumPy's reshape of ``t`` to ``shape`` when that reshape is a view; None when NumPy copies."""
    lay = layout(t)
    try:
        return lay.reshape(shape, copy=False)
    except TypeError:  # NumPy < 2.1: no ``copy`` argument; assigning ``shape`` refuses to copy
        v = lay.view()
        try:
            v.shape = shape
        except AttributeError:
            return None
        return v
    except ValueError:
        return None


def as_tiled(value, like: TiledArray) -> TiledArray:
    """``value`` as a tiled array on ``like``'s executor (a view derived by a fallback comes back as NumPy)."""
    if is_tiled(value):
        return value
    return from_numpy_like(like, np.array(value))


def pin_fallback_views(result, gathered):
    """After a fallback: each NumPy array in ``result`` that is a view of a gathered input (``gathered``: pairs of
    tiled array and its gathered NumPy array) is made read-only and pins that tiled array (see the module's text)."""
    if not gathered:
        return result
    arrays = [result] if isinstance(result, np.ndarray) else \
        [r for r in result if isinstance(r, np.ndarray)] if isinstance(result, (tuple, list)) else []
    for r in arrays:
        for t, g in gathered:
            if r.size and np.may_share_memory(r, g):
                r.flags.writeable = False
                t._pin(r, "a NumPy result made from its gathered data (a view of it in NumPy)")
    return result
