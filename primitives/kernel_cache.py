"""The disk cache of generated kernels: the one way generated source becomes an imported module.

Generated kernels (fused element-wise groups, fused reductions, row products, native loops) are Python source
written to ``<cache>/kernels/<kind>_<sha256>.py`` so that Numba's ``cache=True`` can keep their machine code beside
them (``__pycache__``) for the next process. ``<cache>`` is ``PHYLANX_CACHE_DIR`` or ``~/.cache/phylanx-py``.

Trust model (docs/kernels.md: "The kernel cache and what it trusts"). The cache is data, never code we trust:
- What runs is the source generated in this process, compiled from memory. A file on disk whose content differs
  from it (tampered with, truncated, stale) is replaced before Numba looks at it: Numba keys its machine-code cache
  on the file's modification time and size, so rewriting the file also invalidates machine code compiled from
  other content.
- Files are written to an unpredictable temporary name in the same folder (``tempfile.mkstemp``) and renamed over
  the final name (``os.replace``, atomic): concurrent processes never see half a file, and nobody can plant a file
  at a name we are about to write.
- Numba's cache files are pickles (loading one runs code), so a folder that other users can write to cannot be
  made safe by checking our ``.py`` files: a cache folder writable by other users (world-writable, group-writable
  and owned by someone else, or owned by another user) is refused with an ``UnsafeCacheError`` (a
  ``px.PhylanxError``, raised unchanged to the caller) naming it and the variable that chose it. Each folder is
  checked before anything is made in it, so a refused folder is left as it was. That covers where Numba keeps
  the machine code: ``kernels/__pycache__``, or a folder under ``NUMBA_CACHE_DIR`` when that is set. Folders we
  create (the cache, ``kernels``, ``__pycache__``, Numba's folder) are private (mode 0700).
"""
from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
import threading
import types

from phylanx_py.errors import UnsafeCacheError

USER_DIR = os.path.join(os.path.expanduser("~"), ".cache", "phylanx-py")  # this user's, whatever PHYLANX_CACHE_DIR says
CACHE_DIR = os.environ.get("PHYLANX_CACHE_DIR") or USER_DIR
_lock = threading.RLock()  # a warm-up may load another kernel
__all__ = ["CACHE_DIR", "UnsafeCacheError", "check", "digest", "forget_other_folders", "kernel_dir", "load_or_build",
           "loaded", "numba_subfolder", "tools_dir", "write"]


def kernel_dir() -> str:
    """``<cache>/kernels`` (absolute), and the folders Numba keeps the kernels' machine code in: each one is checked
    before anything is made inside it (UnsafeCacheError, naming it, when another user could write there: nothing
    is created in a refused folder) and made private (0700) when new."""
    root = os.path.abspath(CACHE_DIR)
    folder = os.path.join(root, "kernels")
    for d in (root, folder, os.path.join(folder, "__pycache__")):  # Numba's in-tree cache of our kernels
        _private_dir(d, "PHYLANX_CACHE_DIR")
    numba_root = _numba_cache_root()
    if numba_root:  # NUMBA_CACHE_DIR: Numba keeps our kernels' machine code in a folder of its own under it
        _private_dir(numba_root, "NUMBA_CACHE_DIR", holder=True)
        _private_dir(os.path.join(numba_root, numba_subfolder(folder)), "NUMBA_CACHE_DIR")
    return folder


def tools_dir() -> str:
    """``~/.cache/phylanx-py/tools`` (absolute), checked and made private as the kernel cache's folders are: what
    builds kernels and is the same for every kernel cache folder of this user (runtime/native/aot.py: Numba's
    helper objects, compiled once per Numba version and interpreter). UnsafeCacheError or OSError when it cannot be
    used (then the kernel cache's own folder holds them)."""
    folder = os.path.join(USER_DIR, "tools")
    for d in (USER_DIR, folder):
        _private_dir(d, "PHYLANX_CACHE_DIR")
    return folder


def _numba_cache_root() -> str:
    """NUMBA_CACHE_DIR as Numba reads it (its configuration once Numba is imported; the variable before, so that
    checking the folders never imports Numba in the caller's thread)."""
    numba = sys.modules.get("numba")
    config = getattr(numba, "config", None)
    root = getattr(config, "CACHE_DIR", None) if config is not None else os.environ.get("NUMBA_CACHE_DIR")
    return os.path.abspath(root) if root else ""


def numba_subfolder(folder: str) -> str:
    """The folder under NUMBA_CACHE_DIR where Numba caches the functions of files in ``folder``
    (``numba.core.caching._CacheLocator.get_suitable_cache_subpath``: the folder's name and the SHA-1 of its path)."""
    folder = os.path.abspath(folder)
    return f"{os.path.basename(folder)}_{hashlib.sha1(folder.encode()).hexdigest()}"


def _private_dir(d: str, variable: str, holder: bool = False):
    """Check the folder ``d``, or make it (mode 0700, with any missing folders above it) when it does not exist.
    ``holder``: a folder that only holds ours (NUMBA_CACHE_DIR, which other programs use too), refused only when
    others could replace what is in it."""
    try:
        st = os.stat(d)
    except FileNotFoundError:
        _make_private(d)
        st = os.stat(d)
    _check_private(d, st, variable, holder)


def _make_private(d: str):
    parent = os.path.dirname(d)
    if parent != d and not os.path.isdir(parent):
        _make_private(parent)
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        return  # made meanwhile by another process: checked by the caller, as any existing folder
    os.chmod(d, 0o700)  # whatever the umask took away


def _check_private(d: str, st: os.stat_result, variable: str, holder: bool = False):
    """UnsafeCacheError when someone else can write into ``d``: all users, its group when it is another user's
    (a group-writable folder of yours is your choice: a user-private group), or its owner when that is neither you
    nor root. A ``holder`` with the sticky bit (a shared folder such as /tmp) lets others add entries but not
    touch ours, which are checked themselves."""
    uid = os.getuid()
    shared = holder and st.st_mode & stat.S_ISVTX
    if st.st_mode & stat.S_IWOTH and not shared:
        who = "all users"
    elif st.st_mode & stat.S_IWGRP and st.st_uid != uid and not shared:
        who = "its group (and it belongs to another user)"
    elif st.st_uid not in (uid, 0):
        who = f"the user it belongs to (uid {st.st_uid}; you are uid {uid})"
    else:
        return
    raise UnsafeCacheError(_refusal(d, who, variable, holder), folder=d, variable=variable)


def _refusal(d: str, who: str, variable: str, holder: bool) -> str:
    """The refusal's message: the folder, who can write to it, why that matters, and what to do."""
    if variable == "PHYLANX_CACHE_DIR":
        what, does = f"the kernel cache folder {d}", "imports and runs the kernels cached there"
        choose = "Set PHYLANX_CACHE_DIR to a folder only you can write to (e.g. one made with mode 0700)"
    else:
        what = f"the folder {d} ({'NUMBA_CACHE_DIR' if holder else 'in NUMBA_CACHE_DIR'})"
        does = "loads its kernels' machine code from there (Numba's pickles: loading one runs code)"
        choose = ("Set NUMBA_CACHE_DIR to a folder only you can write to, or unset it (Numba then keeps that "
                  "machine code in the kernel cache)")
    fix = "use a folder of your own" if who.startswith("the user") else \
        f"remove the write permission (chmod go-w {d})"
    return (f"{what} is writable by {who}: phylanx-py {does}, so it refuses a folder that others can write to. "
            f"{choose}, or {fix}.")


def check():
    """UnsafeCacheError now when the cache is refused (the native tier asks before compiling in the background, so
    that the refusal is the caller's error). Other failures (a folder that cannot be made) are left to the load."""
    try:
        kernel_dir()
    except UnsafeCacheError:
        raise
    except OSError:
        pass


def digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:24]


def write(path: str, data: bytes):
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


_FOLDERS: dict = {}  # module name -> the kernel folder it was loaded from (``forget_other_folders``)


def forget_other_folders():
    """Forget the modules loaded from another kernel folder than the cache's now: a compile process that serves
    programs with different caches (runtime/native/compile_server.py; a test's folder) would otherwise find the
    module of a source compiled for one and answer another without writing its machine code there."""
    folder = kernel_dir()
    with _lock:
        for name, where in list(_FOLDERS.items()):
            if where != folder:
                sys.modules.pop(name, None)
                del _FOLDERS[name]


def loaded(kind: str, source: str) -> bool:
    """Whether this process has the module of ``source`` already (``load_or_build`` returns it as it is)."""
    return f"phylanx_{kind}_{digest(source)}" in sys.modules


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
            write(path, data)
        module = types.ModuleType(name)
        module.__file__ = path
        # registered in sys.modules like any import: Numba's disk cache looks the module up by name
        sys.modules[name] = module
        _FOLDERS[name] = os.path.dirname(path)
        try:
            exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102 - our own generated source
            if warm is not None:
                warm(module)
        except BaseException:
            del sys.modules[name]  # no half-loaded module for the next call to find
            _FOLDERS.pop(name, None)
            raise
    return module
