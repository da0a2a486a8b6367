"""A kernel's argument types without Numba in the calling process: stand-ins of its arrays (small arrays Numba types
as it types them) and a picklable description of them that the compile process types (compile_child.py). Importing
Numba costs the caller 0.3-0.6 s of Python holding the interpreter lock; the types are Numba's only where a kernel is
compiled or loaded."""
from __future__ import annotations

import numpy as np


def signature_of(args, staged: bool) -> tuple:
    """The Numba argument types of a whole function's kernel call with the stand-ins ``args`` (whole.py's; after
    the stage array when ``staged``)."""
    import numba

    return ((numba.typeof(np.zeros(1, np.int64)),) if staged else ()) + tuple(numba.typeof(a) for a in args)


_DESCRIBED = "px-described"


def described(args, staged: bool = False):
    """A kernel's argument types told without Numba (``typed`` makes them Numba's, in the compile process): each
    array as its dtype, dimensions, layout and writeability, anything else as itself (a number); None when an
    argument is not one of those (an unaligned array, a tuple, an object: the caller types them with Numba)."""
    items = []
    for a in args:
        if type(a) is np.ndarray:
            if not a.flags.aligned:
                return None
            items.append(("array", a.dtype.str, a.ndim, _layout(a), bool(a.flags.writeable)))
        elif type(a) in (int, float, bool, complex) or isinstance(a, np.generic):
            items.append(a)
        else:
            return None
    return (_DESCRIBED, staged, tuple(items))


def typed(sig) -> tuple:
    """Numba's argument types of ``sig``: ``described``'s form typed (stand-ins of its arrays), else ``sig``."""
    if not (type(sig) is tuple and len(sig) == 3 and sig[0] == _DESCRIBED):
        return sig
    _, staged, items = sig
    args = []
    for item in items:
        if type(item) is tuple and item[:1] == ("array",):
            args.append(_array(*item[1:]))
        else:
            args.append(item)
    return signature_of(args, staged)


def stand_in(a):
    """A value Numba types as it types ``a``, without keeping ``a`` alive until the compile: an array of one or a
    few elements with its dtype, dimensions, layout and read-only flag (Numba's ``typeof`` reads nothing else but
    alignment: an unaligned array stands for itself). Typing ``a`` at once would import Numba in the first call,
    which costs more than the call (0.3-0.6 s here)."""
    if type(a) is not np.ndarray or not a.flags.aligned:
        return a
    return _array(a.dtype, a.ndim, _layout(a), a.flags.writeable)


def _layout(a) -> str:
    return "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else "A"


def _array(dtype, nd: int, layout: str, writeable: bool):
    """A small array Numba types as an array of ``dtype``, ``nd`` dimensions, ``layout`` (C, F or A: strided) and
    writeability."""
    if layout == "C":
        s = np.empty((1,) * nd, dtype)
    elif layout == "F":  # F and not C: two dimensions or more
        s = np.empty((2,) * nd, dtype, order="F")
    else:
        s = np.empty((4,) * nd, dtype)[(slice(None, None, 2),) * nd]
    s.flags.writeable = writeable
    return s
