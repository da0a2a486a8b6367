"""A whole function's kernel ahead of time: built by the compile process as a small extension module, loaded here
without Numba.

A kernel compiled in this process needs Numba running in it: its import and its CPU target's contexts take about a
second of the interpreter lock (0.5 s + 0.6 s here, even to load machine code from Numba's disk cache), and in a
process's first seconds that second is the caller's: the held-out scalar loop ran 201 of 43,569 calls over 1.1x
its plain time while the kernel compiled elsewhere was loaded. So, while Numba does not run in this process, the
compile process also builds the sequential kernel as an extension module (Numba's ``pycc``: the kernel's own
machine code, the helpers it calls, Numba's runtime for the arrays it makes, and a wrapper that checks and unboxes
the arguments: no dependency on Numba), written to the kernel cache as ``aot_<digest>.so``; loading it is a
``dlopen`` (0.3 ms), in the call that finds it ready. A later process finds it there at the signature's first
call (warm.py's marks, without Numba).

What it is built from is the source generated here for the argument types described here (dtype, dimensions;
only C-contiguous, writeable arrays: pycc's unboxing of a strided view ignored its strides), compiled with the
kernel's own options (``error_model='numpy'``, ``boundscheck``) for this machine's CPU; the digest in its name
covers that source, those types, Numba's version and this interpreter's ABI.
The module is loaded from the kernel cache's folder, which is checked as for Numba's own cache files (private to
this user: primitives/kernel_cache.py); a file that fails to load is a miss (the kernel is compiled here as before).

A kernel whose loop may run in parallel is built so too, and runs sequential here (Numba's threading layer is not in
such a module; PARALLEL_LEFT says why); where Numba runs, it is compiled there and its variant tried. An exception
raised by a built kernel (an overflow to rerun interpreted, an index out of bounds) imports Numba to rebuild it
(Numba's pickled exception data): the error path only. ``pycc`` needs a C compiler (Numba's helper
sources are compiled once per Numba version and user, ~2 s, into ``~/.cache/phylanx-py/tools``); without one
nothing is built and everything runs as before.
``PHYLANX_NATIVE_AOT=0`` turns it off."""
from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import sys
import sysconfig
import tempfile
import threading

import numpy as np
from phylanx_py.primitives import kernel_cache

from phylanx_py.errors import UnsafeCacheError

from . import argtypes, compile_process, tiering, warm
from .background import warm_elsewhere
from .kinds import Param, param_of_value
from .parallel import variant

# A kernel whose loop may run on two threads is built ahead of time too, and runs sequential in a process where
# Numba does not run: loading its parallel variant would start Numba here, and that start (imports, its CPU
# target's contexts) held the caller's interpreter lock in stretches: NPBench's jacobi_2d, heat_3d and fdtd_2d S,
# called back to back in a process without Numba, had calls at 12-20x their plain time while it started (their
# parallel variants gain 1.2-1.7x over the sequential kernels on this machine's two cores). Where Numba runs
# already, the variant is tried as before.
PARALLEL_LEFT = ("Numba does not run in this process (built ahead of time: its parallel variant is tried where Numba "
                 "runs)")
NAME = "pxaot"  # every built module's name (Numba's helper objects are compiled for one name, once)
_SCALARS = {bool: "bool", int: "int", float: "float", complex: "complex"}


def enabled() -> bool:
    return os.environ.get("PHYLANX_NATIVE_AOT", "1").strip() != "0"


def describe(standins, staged: bool) -> str | None:
    """The argument types of a whole function's kernel (whole.py's stand-ins), as text, without Numba; None when
    one is not an array or a plain number (such kernels are compiled here)."""
    parts = ["stage"] if staged else []
    for a in standins:
        if type(a) is np.ndarray:
            # C-contiguous and writeable only: pycc's argument unboxing ignored a strided view's strides (a kernel
            # given ``x[::2]`` wrote x's odd elements); other layouts are compiled here, by Numba's dispatcher
            if not (a.flags.c_contiguous and a.flags.writeable and a.flags.aligned) or a.dtype.hasobject or \
                    a.dtype.fields is not None:
                return None
            parts.append(f"{a.dtype.str}{a.ndim}C")
        elif type(a) in _SCALARS:
            parts.append(_SCALARS[type(a)])
        elif isinstance(a, np.generic) and type(a) is np.dtype(type(a)).type and a.dtype.kind in "biufc":
            parts.append(f"np{a.dtype.str}")
        else:
            return None
    return ",".join(parts)


def path_of(kernel_key: str, description: str) -> str:
    """Where the kernel of ``kernel_key`` (warm.kernel_key: the digest of its helpers, source and versions) for
    argument types ``description`` is built (kernel_dir checks the folder: UnsafeCacheError when another user
    could write there)."""
    key = kernel_cache.digest(f"{kernel_key}\0{description}\0{_numba_version()}\0{_abi()}")
    return os.path.join(kernel_cache.kernel_dir(), f"aot_{key}{_suffix()}")


class BuiltAhead:
    """The kernels of a tier's signatures built ahead of time while Numba does not run here (a mixin of
    whole.WholeFunction and loop.NativeLoop, before tiering.Signatures; ``ahead_of_time`` False: never, remote.py).
    A signature's entry holds ``sig``, the stand-ins of its arguments and whether it takes a stage array (a loop's
    are taken from the arguments of its first run), and ``ahead``, ``path_for``'s memo."""

    ahead_of_time = True

    def _marked(self, entry, args) -> bool:
        if self.ahead_of_time and entry.sig is None:
            entry.sig = (tuple(argtypes.stand_in(a) for a in args), False)  # (asked once per entry, before a compile)
        # built ahead of time before: loaded in this call, Numba running or not (marks followed: warm.py)
        return super()._marked(entry, args) or (
            self.ahead_of_time and warm.enabled() and path_for(entry, early=True) is not None)

    def _ahead(self, entry, cached_only):
        return kernel_of(entry, cached_only) if self.ahead_of_time and entry.sig is not None else None

    def _request(self, entry, args):
        path = path_for(entry) if self.ahead_of_time and entry.sig is not None else None
        if path is None:
            return super()._request(entry, args)
        return None if os.path.exists(path) else _request(entry, path)


def kernel_of(entry, cached_only: bool):
    """A whole function's or a loop's kernel (their Entry) built ahead of time, while Numba does not run here: loaded
    when built before, else (``cached_only`` false: in the background) built by the compile process first; None when
    it is not to be (``path_for``) or could not be built or loaded (then compiled here as before)."""
    path = path_for(entry, early=cached_only)
    if path is None:
        return None
    if not cached_only and not os.path.exists(path):
        warm_elsewhere(*_request(entry, path))
    return load(path)


def _request(entry, path: str) -> tuple:
    """What the compile process is asked to build the entry's kernel into ``path`` (compile_child.py: "aot")."""
    return "aot", tiering.sequential_module(entry.printed), (*entry.sig, path)


def path_for(entry, early: bool = False) -> str | None:
    """Where a whole function's kernel is built ahead of time, or None when it is not to be: turned off, Numba
    running here already (it loads its own cache in milliseconds, and tries parallel variants), the forced tier,
    arguments ``describe`` does not take. ``early``: only if built already. What depends on the entry alone is
    worked out once (``entry.ahead``: a first call asks here, then its load again). A kernel with a loop that may
    run in parallel is built too, sequential (PARALLEL_LEFT)."""
    if not enabled() or warm.numba_started() or tiering.current_mode() == "force" or entry.printed is None or \
            entry.sig is None or type(entry.sig[0]) is not tuple or not compile_process.enabled():
        return None
    if entry.ahead is None:
        entry.ahead = (_path_of_entry(entry), None)  # (path or "", sequential: not analysed yet)
    path, sequential = entry.ahead
    if not path or (early and not os.path.exists(path)):
        return None
    if sequential is None:  # analysed once the path is wanted (not for every first call: most find no file)
        standins, staged = entry.sig
        params = [Param(False, 1, False)] * staged + [param_of_value(a) for a in standins]  # (arrays and numbers)
        try:
            v, why = variant(entry.printed, params=params)  # (not tuning.threads(): Numba's configuration, its import)
        except Exception as e:  # noqa: BLE001 - as tiering.parallel_variant: not analysed, so not built ahead
            v, why = True, f"not analysed ({type(e).__name__}: {e})"
        sequential = v is None  # a variant is tried where Numba runs (tiering.parallel_variant)
        entry.ahead = (path, sequential)
        entry.serial_why = why if sequential else PARALLEL_LEFT
    return path


def _path_of_entry(entry) -> str:
    """``path_of`` for the entry's kernel and argument types, or "" (types it does not describe, a refused folder)."""
    description = describe(*entry.sig)
    if description is None:
        return ""
    # its digest, ahead (``key``): ``mark`` stays unset until tiering's ``_marked`` has looked for the mark (a
    # signature lowered beside the first calls then loads this file in its first call through the tree)
    key = entry.mark or entry.key
    if key is None:
        key = entry.key = warm.kernel_key(entry.printed)
    try:
        return path_of(key, description)  # the mark's digest covers the kernel's text
    except (OSError, UnsafeCacheError):
        return ""


def load(path: str):
    """The kernel of the extension module at ``path``, or None (not built, or it does not load)."""
    if not os.path.exists(path):
        return None
    try:
        spec = importlib.util.spec_from_file_location(NAME, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.kernel
    except Exception:  # noqa: BLE001 - a file that does not load is a miss: compiled here as before
        return None


@functools.cache
def _numba_version() -> str:
    """Which Numba builds kernels, without importing it (the second this module saves) or importlib.metadata (21 ms
    in a first call): where its package is and its version file's size and time (a new Numba writes a new one)."""
    origin = importlib.util.find_spec("numba").origin
    st = os.stat(os.path.join(os.path.dirname(origin), "_version.py"))
    return f"{origin}:{st.st_size}:{st.st_mtime_ns}"


def _abi() -> str:
    return f"{sys.implementation.cache_tag}-{sysconfig.get_config_var('SOABI')}-{np.__version__}"


def _suffix() -> str:
    return sysconfig.get_config_var("EXT_SUFFIX") or ".so"


# --- the compile process's side -------------------------------------------------------------------------------------

def build(text: str, request) -> None:
    """Build the kernel of module ``text`` for ``request`` = (stand-ins, staged, path) into ``path`` (the compile
    process: compile_child.py). Raises when it cannot (the caller then compiles the kernel itself)."""
    import warnings

    from numba.core import codegen, config
    from numba.core import compiler as numba_compiler

    standins, staged, path = request
    if os.path.exists(path):
        return
    module = tiering.load_kernel(text)
    sig = argtypes.signature_of(standins, staged)
    tiering.compile_quietly(module.kernel, sig)
    ret = module.kernel.overloads[tuple(sig)].signature.return_type
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pycc's pending deprecation
        from numba.pycc import CC
        from numba.pycc import compiler as pycc_compiler

    options = module.kernel.targetoptions

    class KernelFlags(numba_compiler.Flags):
        """pycc compiles with default flags: the kernel's own error model and bounds checking are its semantics."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.error_model = options.get("error_model", "python")
            if "boundscheck" in options:
                self.boundscheck = options["boundscheck"]

    class Builder(CC):
        def _compile_mixins(self, build_dir):
            return _mixins(lambda d: CC._compile_mixins(self, d))

    compiler_checked()
    cc = Builder(NAME)
    # for this machine's cache: the CPU Numba's JIT compiles for (NUMBA_CPU_NAME, or this one), not a generic one
    cc.target_cpu = config.CPU_NAME or codegen.ll.get_host_cpu_name()
    out = tempfile.mkdtemp(prefix=".aot-", dir=os.path.dirname(path))
    try:
        cc.output_dir = out
        cc.export("kernel", ret(*sig))(module.kernel.py_func)
        saved, pycc_compiler.Flags = pycc_compiler.Flags, KernelFlags
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cc.compile()
        finally:
            pycc_compiler.Flags = saved
        with open(os.path.join(out, cc.output_file), "rb") as f:
            kernel_cache.write(path, f.read())
    finally:
        shutil.rmtree(out, ignore_errors=True)


_check_lock = threading.Lock()


def compiler_checked() -> bool:
    """numba.pycc's check for a C compiler (``platform.external_compiler_works``, cached by Numba: ``CC`` asks it),
    made the first time in a folder of ours, removed after it: Numba's own leaves its temporary folder behind (a
    ``temp.c``, a ``temp.cxx`` and their objects: its ``_gentmpfile`` hands ``os.remove`` the file object), one per
    process that builds a kernel ahead of time: 1,259 of them in /tmp here after a day of tests and benchmarks."""
    from numba.pycc import platform

    check = platform.external_compiler_works
    with _check_lock:
        if check.cache_info().currsize:
            return check()
        root = tempfile.mkdtemp(prefix="phylanx-cc-check-")
        made = platform.mkdtemp
        platform.mkdtemp = lambda *args, **kwargs: tempfile.mkdtemp(dir=root)
        try:
            return check()
        finally:
            platform.mkdtemp = made
            shutil.rmtree(root, ignore_errors=True)


def _mixins(compile_into) -> list:
    """Numba's helper objects for a module named NAME (its runtime, the module's C glue), compiled once per
    Numba version and interpreter (~2 s with the C compiler), then reused by every build: kept in this user's
    tools folder (kernel_cache.tools_dir), which every kernel cache folder shares (a fresh PHYLANX_CACHE_DIR is a
    fresh cache of kernels: its first build waited 2 s more for these), else in the kernel cache's own."""
    name = f"aot_mixins_{kernel_cache.digest(_numba_version() + _abi())}"
    try:
        home = kernel_cache.tools_dir()
    except (OSError, UnsafeCacheError):  # (no home folder of one's own: the kernel cache's folder, as before)
        home = kernel_cache.kernel_dir()
    folder = os.path.join(home, name)
    listing = os.path.join(folder, "objects.txt")
    if not os.path.exists(listing):
        tmp = tempfile.mkdtemp(prefix=".aot-mixins-", dir=os.path.dirname(folder))
        objects = compile_into(tmp)
        with open(os.path.join(tmp, "objects.txt"), "w") as f:
            f.write("\n".join(os.path.relpath(o, tmp) for o in objects))
        try:
            os.rename(tmp, folder)  # atomic; another process's folder, made meanwhile, is as good
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    with open(listing) as f:
        return [os.path.join(folder, line) for line in f.read().split("\n") if line]
