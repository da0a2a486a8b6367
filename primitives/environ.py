"""Per-call reads of an environment variable (PHYLANX_NATIVE, PHYLANX_FLOOR, PHYLANX_FUSE, PHYLANX_NUM_THREADS):
``os.environ.get`` costs about 1 us a call (it encodes the key and decodes the value), as much as a small compiled
call, so the raw value is read from ``os.environ``'s own dict (CPython keeps it in ``_data`` under the encoded key);
elsewhere, the slow way. (In primitives/: the kernels read them too, and runtime/ imports from here.)"""
from __future__ import annotations

import os

_DATA = getattr(os.environ, "_data", None)


def fast_key(name: str):
    """(the dict holding ``name``'s raw value, its key in it), or (None, None) where os.environ has no such dict."""
    if _DATA is None or not hasattr(os.environ, "encodekey"):
        return None, None
    return _DATA, os.environ.encodekey(name)


OFF = (b"0", "0")  # a raw value that turns a setting off (bytes on POSIX, str elsewhere)


def raw_reader(name: str):
    """A function of no arguments giving ``name``'s raw value (bytes on POSIX, str elsewhere), or None when unset,
    at a dict lookup's cost."""
    data, key = fast_key(name)
    if data is None:
        return lambda: os.environ.get(name)
    return lambda: data.get(key)
