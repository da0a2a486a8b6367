"""The disk cache of generated kernels: the one way generated source becomes an imported module.

Generated kernels (fused element-wise groups, fused reductions, row products, native loops) are Python source
written to ``<cache>/kernels/<kind>_<sha256>.py`` so that Numba's ``cache=True`` can keep their machine code beside
them (``__pycache__``) for the next process. ``<cache>`` is ``PHYLANX_CACHE_DIR`` or ``~/.cache/phylanx-py``.

Trust model (README: "The kernel cache and what it trusts"). The cache is data, never code we trust:
- What runs is the source generated in this process, compiled from memory. A file on disk whose content differs
  from it (tampered with, truncated, stale) is replaced before Numba looks at it: Numba keys its machine-code cache
  on the file's modification time and size, so rewriting the file also invalidates machine code compiled from
  other content.
- Files are written to an unpredictable temporary name in the same folder (``tempfile.mkstemp``) and renamed over
  the final name (``os.replace``, atomic): concurrent processes never see half a file, and nobody can plant a file
  at a name we are about to write.
- Numba's cache files are pickles (loading one runs code), so a folder that other users can write to cannot be
  made safe by checking our ``.py`` files: a cache folder writable by other users (world-writable, or
  group-writable and owned by someone else) is refused with an ``UnsafeCacheError`` naming it. Folders we create
  are private (mode 0700).
"""
from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
import threading
import types

CACHE_DIR = os.environ.get("PHYLANX_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "phylanx-py")
_lock = threading.RLock()  # a warm-up may load another kernel


class UnsafeCacheError(PermissionError):
    """The kernel cache folder can be written by other users: its files cannot be trusted."""


def kernel_dir() -> str:
    """``<cache>/kernels``, made private if new; UnsafeCacheError if another user could write into it."""
    folder = os.path.join(CACHE_DIR, "kernels")
    os.makedirs(CACHE_DIR, mode=0o700, exist_ok=True)  # (folders above it get the default mode)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    for d in (CACHE_DIR, folder, os.path.join(folder, "__pycache__")):
        _check_private(d)
    return folder


def _check_private(d: str):
    try:
        st = os.stat(d)
    except FileNotFoundError:
        return  # Numba makes __pycache__ later, with our umask, inside a folder already checked
    mine = st.st_uid == os.getuid()
    if st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and not mine):
        who = "all users" if st.st_mode & stat.S_IWOTH else "its group (and it belongs to another user)"
        raise UnsafeCacheError(
            f"the kernel cache folder {d} is writable by {who}: phylanx-py imports and runs the kernels cached "
            "there, so it refuses a folder that others can write to. Set PHYLANX_CACHE_DIR to a folder only you "
            f"can write to (e.g. one made with mode 0700), or remove the write permission (chmod go-w {d}).")


def digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:24]


def _write(path: str, data: bytes):
    """``path`` holds ``data``, written under an unpredictable name and renamed into place (atomic)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".py")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _on_disk(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def load_or_build(kind: str, source: str, warm=None) -> types.ModuleType:
    """The module of generated ``source`` (``kind`` names the generator: ``fused``, ``loop``, ...), cached on
    disk for Numba. The file is rewritten when its content is not exactly ``source``; the module runs the source
    from memory, never what the file says. ``warm(module)`` runs once after loading (e.g. compiles the kernel
    now); if it raises, the module is dropped and the error propagates."""
    d = digest(source)
    name = f"phylanx_{kind}_{d}"
    module = sys.modules.get(name)
    if module is not None:
        return module
    data = source.encode()
    with _lock:
        module = sys.modules.get(name)
        if module is not None:
            return module
        path = os.path.join(kernel_dir(), f"{kind}_{d}.py")
        if _on_disk(path) != data:  # missing, or not what we generate: (re)written before Numba reads its stamp
            _write(path, data)
        module = types.ModuleType(name)
        module.__file__ = path
        # registered in sys.modules like any import: Numba's disk cache looks the module up by name
        sys.modules[name] = module
        try:
            exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102 - our own generated source
            if warm is not None:
                warm(module)
        except BaseException:
            del sys.modules[name]  # no half-loaded module for the next call to find
            raise
    return module
