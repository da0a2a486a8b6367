"""BLAS in a kernel runs on a second OpenBLAS thread pool: one thread for it while a kernel calls it.

A product in a kernel (``A @ x``, ``np.dot``: a form declared ``blas=True``) is Numba's, which calls SciPy's OpenBLAS
(``scipy.linalg.cython_blas``); NumPy's own products call NumPy's OpenBLAS. In a NumPy wheel install these are two
libraries with a pool of worker threads each, and a pool's threads spin for a while after each call before they
sleep. A program that calls both, NumPy's ``@`` then a kernel's, had four threads wanting two cores: NPBench's
gemver (S, NumPy's call, then the compiled function's, in one process) went between 3.7 and 35 ms a NumPy call
from run to run here, the kernel's calls between 2.1 and 23 ms, and the slow runs stayed slow (OS time slices
between spinning threads). So while a kernel that calls BLAS runs, SciPy's pool takes one thread (the calling one:
nothing is left spinning after it), and the caller's setting is put back after it (OpenBLAS's
``openblas_set_num_threads_local``; in this OpenBLAS build the setting is seen by every thread while it holds, so
another thread's SciPy product in those microseconds runs on one thread too). Where there is only one OpenBLAS (a
conda install: NumPy and SciPy share it), or no such call (OpenBLAS before 0.3.27, another BLAS), nothing changes;
``PHYLANX_BLAS_ONE_THREAD=0`` leaves the pool alone (read as each kernel call is prepared).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
import time

import numpy as np

from . import facts, kir

_SETTER: list = []  # [the ctypes function, or None once SciPy's BLAS is loaded and none was found]
_LOOKED = [0.0]  # when /proc/self/maps was last read for it without an answer that stays
LOOK_EVERY = 1.0  # seconds between such reads: a kernel's call may ask each time (the general path)


def calls_blas(printed) -> bool:
    """Does a kernel (kir.Printed) call a form its declaration says calls BLAS?"""
    if printed is None:
        return False
    known = facts.calls()
    tags = [c for n in printed.nodes.values() for c in n.calls] + [t for t in printed.ret_tags if type(t) is kir.Call]
    return any(getattr(known.get(c.name), "blas", False) for c in tags)


def _numpy_libs() -> str:
    """The folder of NumPy's own bundled libraries, as the loader names it (/proc/self/maps gives real paths: a
    virtual environment's site-packages may be reached through a symbolic link)."""
    return os.path.realpath(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")) + os.sep


def _setter():
    """``openblas_set_num_threads_local`` of the OpenBLAS that is not NumPy's, or None (one OpenBLAS loaded, not
    Linux, an OpenBLAS without it). Looked for again, at most every LOOK_EVERY seconds, until SciPy's BLAS is
    loaded (with the first kernel calling it), then the answer stays."""
    if _SETTER:
        return _SETTER[0]
    now, loaded = time.monotonic(), "scipy.linalg.cython_blas" in sys.modules
    if now - _LOOKED[0] < LOOK_EVERY and not loaded:
        return None
    fn = _find()
    if fn is not None or loaded:
        _SETTER.append(fn)
    else:  # not loaded yet (a kernel built ahead of time may not import it): not read again on every call
        _LOOKED[0] = now
    return fn


def _openblas_paths() -> list:
    """The real paths of the OpenBLAS libraries loaded in this process (Linux's /proc/self/maps; none elsewhere)."""
    try:
        with open("/proc/self/maps") as fh:
            return sorted({os.path.realpath(line.split()[-1]) for line in fh
                           if "openblas" in line.lower() and "/" in line})
    except OSError:
        return []


def _find():
    paths = _openblas_paths()
    numpy_own = _numpy_libs()
    # SciPy's own first (a wheel's scipy.libs): with NumPy linked to a system OpenBLAS, that one is not NumPy's folder
    others = sorted((p for p in paths if not p.startswith(numpy_own)), key=lambda p: "scipy" not in p)
    if len(paths) < 2 or not others:
        return None
    for path in others:
        try:
            fn = ctypes.CDLL(path).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
        return fn
    return None


CYTHON_BLAS = "scipy.linalg.cython_blas"


def import_scipy_blas() -> None:
    """Import SciPy's BLAS for Numba's products (``scipy.linalg.cython_blas``) now, in a thread that loads a kernel
    built ahead of time (aot.py) that calls BLAS: such a kernel imports it at its first product, inside the call
    (NPBench's trmm S: one call of 150 ms against 4 ms plain, in a process without SciPy imported). Nothing when
    SciPy is not installed (the kernel then fails as Numba's would, in the call).

    The extension module alone is loaded (``_load_cython_blas``), not the ``scipy.linalg`` package around it:
    Numba finds it by its name in ``sys.modules``, and the package's own imports were 0.11 s of Python holding the
    interpreter lock beside the caller's calls (NPBench's lu S, cold, in a process without Numba: 40 calls at 2-6x
    their plain time while it ran), or inside the first call of a kept kernel in a later process (lu: 160-183 ms
    against 4.3 ms plain); the module alone takes 8 ms."""
    if CYTHON_BLAS in sys.modules:
        return
    with _LOADING:  # one thread loads it: an extension module loaded twice raises, and the second would unregister it
        if CYTHON_BLAS in sys.modules:
            return
        try:
            _load_cython_blas()
        except Exception:  # noqa: BLE001 - an unusual install: the ordinary import, which says what is wrong
            try:
                import scipy.linalg.cython_blas  # noqa: F401
            except ImportError:
                pass


_LOADING = threading.Lock()


def _load_cython_blas() -> None:
    """``scipy.linalg.cython_blas`` loaded from its file, without running ``scipy/linalg/__init__.py``; the package,
    when imported later, gets it as its attribute as an ordinary import of the submodule leaves it (``_Attach``)."""
    import importlib.machinery
    import importlib.util

    found = importlib.util.find_spec("scipy")  # (a top-level package's spec: nothing of SciPy runs)
    if found is None or not found.submodule_search_locations:
        raise ImportError("no scipy")
    folder = os.path.join(found.submodule_search_locations[0], "linalg")
    paths = [os.path.join(folder, "cython_blas" + suffix) for suffix in importlib.machinery.EXTENSION_SUFFIXES]
    path = next((p for p in paths if os.path.exists(p)), None)
    if path is None:
        raise ImportError(f"no cython_blas extension in {folder}")
    spec = importlib.util.spec_from_file_location(CYTHON_BLAS, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[CYTHON_BLAS] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        if sys.modules.get(CYTHON_BLAS) is module:
            del sys.modules[CYTHON_BLAS]
        raise
    package = sys.modules.get("scipy.linalg")
    if package is not None:
        package.cython_blas = module
    else:
        sys.meta_path.insert(0, _Attach())


class _Attach:
    """A finder that asks nothing of its own: when ``scipy.linalg`` is imported after its ``cython_blas`` was loaded
    alone, it wraps the package's loader so that the package gets the submodule as its attribute (the import
    system sets a submodule on its package only when it loads it), as if it had been imported the ordinary way.
    Once; it stays in ``sys.meta_path`` answering None (removing it while the import system walks the list would
    skip the next finder)."""

    done = False

    def find_spec(self, name, path=None, target=None):
        if self.done or name != "scipy.linalg":
            return None
        self.done = True
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            blas = sys.modules.get(CYTHON_BLAS)
            if blas is not None and not hasattr(module, "cython_blas"):
                module.cython_blas = blas

        spec.loader.exec_module = exec_module
        return spec


def capped(run):
    """``run`` (a kernel calling BLAS) with SciPy's pool at one thread while it runs; ``run`` itself when there is
    no second pool to keep quiet."""
    setter = _setter() if os.environ.get("PHYLANX_BLAS_ONE_THREAD", "1") != "0" else None
    if setter is None:
        return run

    def one_thread(*args):
        before = setter(1)
        try:
            return run(*args)
        finally:
            setter(before)  # the count in force before (a compile's rise may hold it lower: fewer_threads)

    return one_thread


def _pools() -> list:
    """(get, set) of the thread count of each OpenBLAS loaded in this process, NumPy's and SciPy's alike (a wheel's
    build names them ``scipy_openblas_..._64_``, as threadpoolctl looks them up)."""
    found = []
    for path in _openblas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("", "scipy_"):
            for suffix in ("", "64_", "_64"):
                get = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
                put = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    get.argtypes, get.restype = [], ctypes.c_int
                    put.argtypes, put.restype = [ctypes.c_int], None
                    found.append((get, put))
                    break
            else:
                continue
            break
    return found


@contextlib.contextmanager
def fewer_threads():
    """While held, every OpenBLAS pool of this process runs on one core fewer than the process may use, and after,
    on the count it had. A compile that rose to the caller's priority (compile_process._risen) holds it: on two
    cores, a caller's NumPy products on two threads with the compile beside them waited on each other's time slices
    (NPBench's gemver, 4.2 ms a call, took 7-23 ms while the compile ran; 4.3 ms with NumPy's pool at one thread,
    and the compile landed sooner). Lowering the count from another thread is safe: a product reads it as it starts
    (OpenBLAS's ``goto_set_num_threads`` only stores it when no thread is to be created). One core: nothing to
    leave; ``PHYLANX_COMPILE_BLAS_CAP=0`` leaves the pools alone. A count the program itself sets meanwhile is put
    back to what it was before."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    changed = []
    if cores > 1 and os.environ.get("PHYLANX_COMPILE_BLAS_CAP", "1") != "0":
        for get, put in _pools():
            count = get()
            if count > cores - 1:
                put(cores - 1)
                changed.append((put, count))
    try:
        yield len(changed)
    finally:
        for put, count in changed:
            put(count)
