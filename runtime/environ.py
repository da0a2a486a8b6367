"""Per-call reads of an environment variable (PHYLANX_NATIVE, PHYLANX_FLOOR): ``os.environ.get`` costs about 1 us a
call (it encodes the key and decodes the value), as much as a small compiled call, so the raw value is read from
``os.environ``'s own dict (CPython keeps it in ``_data`` under the encoded key); elsewhere, the slow way."""
from __future__ import annotations

import os

_DATA = getattr(os.environ, "_data", None)


def fast_key(name: str):
    """(the dict holding ``name``'s raw value, its key in it), or (None, None) where os.environ has no such dict."""
    if _DATA is None or not hasattr(os.environ, "encodekey"):
        return None, None
    return _DATA, os.environ.encodekey(name)
