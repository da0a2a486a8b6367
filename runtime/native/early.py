"""A kept whole-function kernel run from a function's first call, before the function is translated.

Why: a function whose kernel was kept before (warm.py) used to translate in its first call, lower its signature
and then load the kernel: 7-10 ms of Python on the held-out scalar loop, whose plain call takes 3.5-4 ms, so a
warm process's first call ran at 2.0-2.3x the plain function (issue 33: no call more than 10% slower; a kernel
compiled before is native from the first call). Now, when such a kernel is kept, what its calls need is written to
the Python function's own mark (``warm.code_key``) as data, one ``early`` line per signature: the signature's fast
key (tiering._fast_key: dtypes, dimensions, layout flags, small ints), the kernel's digest and argument
description (the file the compile process built it into: aot.path_of), whether it takes a stage array, the
arrays it writes and whether they are put back when it stops, its result's conversion, and what each global
name the function reads was (a module by its name, or a builtin). The decorator reads them once
(``for_function``); a call whose arguments have a remembered signature loads that kernel (a ``dlopen``, once) and
runs it. Nothing is translated beside these calls (a job's stretches without Python calls held the interpreter lock
for up to 7 ms of a 0.03 ms call); the first call they do not take (another signature, keywords, another runtime,
a profile) or ``explain()`` translates the function, after which the ordinary paths take over.

When the remembered kernel is the kernel the translation would give (promise 1): the line is written only for a
function that reads no module data and calls no function of its own (whole.py's ``globals``, ``functions``), has
no closure, and whose globals are modules and builtins; it is followed only when the Python function's bytecode
is the same (its mark's digest covers it), its global names still are what they were, the installed phylanx-py
sources are the ones that wrote it (their sizes and times: ``translator``), and the kernel's file is there under
the name its digest, Numba's version and this interpreter give. Nothing read is executed: the line is JSON data
checked field by field; the kernel is loaded from the kernel cache's private folder, as aot.py loads it.
A kernel that raises is handled as the quick path handles it (whole.py ``early_failed``): the function is
translated then, in the call."""
from __future__ import annotations

import builtins
import dis
import functools
import importlib.util
import json
import os
import threading
import types

import numpy as np
from phylanx_py.primitives import kernel_cache

from phylanx_py.errors import UnsafeCacheError

from .. import profiling, select
from ..base import Runtime
from ..loop_tiers import MISS, Raised
from . import aot, warm
from . import kinds as K
from . import tiering as T
from .blas_pool import capped, import_scipy_blas

PREFIX = "early "
KEYS_KEPT = 64  # fast keys remembered per function (``Early._by_key``; a program calling it with ever new shapes)


class Failed(Raised):
    """A remembered kernel raised: what ``WholeFunction.early_failed`` needs to handle it as the quick path would."""

    __slots__ = ("spec", "error", "stage", "saved")

    def __init__(self, spec, error, stage, saved):
        self.spec, self.error, self.stage, self.saved = spec, error, stage, saved


def remember(whole, entry) -> None:
    """Write ``entry``'s ``early`` lines (one per fast key) to its Python function's mark (a kernel kept: whole.py
    ``_keep``), each replacing the line of its fast key written before."""
    lines = set(_lines(whole, entry))
    key = warm.code_key(whole.pyfunc)
    if not lines or lines <= warm.marks(key):
        return
    mine = tuple(x.split(" {", 1)[0] + " " for x in lines)
    warm.rewrite(key, lambda old: {x for x in old if not x.startswith(mine)} | lines)


def _lines(whole, entry) -> list:
    pyfunc = whole.pyfunc
    if pyfunc is None or whole.globals or len(whole.functions or ()) > 1 or getattr(pyfunc, "__closure__", None) \
            or entry.kernel is None or entry.parallel is not None or entry.sig is None or \
            type(entry.sig[0]) is not tuple or entry.printed is None:
        return []  # a kernel built ahead of time only (aot.py: sequential, typed from its stand-ins)
    fasts = [f for f, e in whole.fast.items() if e is entry]
    names = _names(pyfunc)
    description = aot.describe(*entry.sig)
    ret = _encode(entry.ret) if hasattr(entry, "ret") else _NO
    if not fasts or names is None or description is None or ret is _NO:
        return []
    data = {"kernel": entry.mark or warm.kernel_key(entry.printed), "description": description,
            "own": whole.own, "staged": len(entry.stages) > 1, "writes": list(entry.writes),
            "checked": bool(entry.checked), "ret": ret, "names": names,
            "blas": entry.calls_blas(),
            "translator": translator()}
    return [f"{PREFIX}{kernel_cache.digest(repr(f))[:16]} {json.dumps({**data, 'fast': repr(f)}, sort_keys=True)}"
            for f in fasts]


_NO = object()  # a kind ``_encode`` does not write
_PY = {"int": int, "float": float, "bool": bool, "complex": complex}


def _encode(k):
    """The result's kind (kinds.py: a representative value) as JSON data, or _NO."""
    if k is None:
        return None
    if isinstance(k, np.generic):
        return {"np": k.dtype.str}
    if type(k) in (int, float, bool, complex):
        return {"py": type(k).__name__}
    if type(k) is np.ndarray:
        return {"array": True}
    if type(k) is K.Either:
        py, np_ = _encode(k.py), _encode(k.np)
        return _NO if py is _NO or np_ is _NO else {"either": [py, np_]}
    if type(k) is tuple:
        items = [_encode(x) for x in k]
        return _NO if any(x is _NO for x in items) else {"tuple": items}
    return _NO


def _decode(data):
    """A kind from ``_encode``'s data (what ``kinds.converter`` reads of it), checked field by field."""
    if data is None:
        return None
    (what, value), = data.items()
    if what == "np":
        return np.dtype(str(value)).type(0)
    if what == "py":
        return _PY[value](0)
    if what == "array":
        return np.empty(0)
    if what == "either":
        py, np_ = value
        return K.Either(_decode(py), _decode(np_), "r")
    if what == "tuple":
        return tuple(_decode(x) for x in value)
    raise ValueError(what)


def _names(pyfunc) -> dict | None:
    """What each global name the function reads is: "module <name>" or "builtin"; None when one is anything else."""
    found = {}
    for ins in dis.get_instructions(pyfunc):
        if ins.opname not in ("LOAD_GLOBAL", "LOAD_NAME"):
            continue
        name = ins.argval
        what = _what(pyfunc.__globals__, name)
        if what is None:
            return None
        found[name] = what
    return found


def _what(namespace, name) -> str | None:
    if name in namespace:
        value = namespace[name]
        return f"module {value.__name__}" if isinstance(value, types.ModuleType) else None
    return "builtin" if hasattr(builtins, name) else None


@functools.cache
def translator() -> str:
    """The digest of the installed phylanx-py sources' names, sizes and times (0.4-0.8 ms, once per process): a
    remembered kernel is the translation of the sources that wrote its line."""
    frontend = importlib.util.find_spec("phylanx_py")  # (its folder, without importing it here: imports go one way)
    folders = [os.path.dirname(frontend.origin) if frontend is not None and frontend.origin else "",
               os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # runtime/
               os.path.dirname(os.path.abspath(kernel_cache.__file__))]  # primitives/
    parts = []
    for folder in folders:
        if not folder:
            continue
        stack = [folder]
        while stack:
            with os.scandir(stack.pop()) as listing:
                for e in listing:
                    if e.is_dir(follow_symlinks=False):
                        if e.name != "__pycache__":
                            stack.append(e.path)
                    elif e.name.endswith(".py"):
                        st = e.stat()
                        parts.append(f"{e.path}:{st.st_size}:{st.st_mtime_ns}")
    return kernel_cache.digest("\n".join(sorted(parts)))


class Spec:
    """One remembered signature: its kernel, loaded at its first use."""

    __slots__ = ("kernel_key", "path", "own", "staged", "writes", "checked", "convert", "blas", "_run", "_lock")

    def __init__(self, data: dict, path: str):
        self.kernel_key, self.path, self.own = str(data["kernel"]), path, int(data["own"])
        self.staged, self.checked = data["staged"] is True, data["checked"] is True
        self.writes = tuple(int(i) for i in data["writes"])
        self.convert = K.converter(_decode(data["ret"]))
        self.blas = data["blas"] is True
        self._run = None
        self._lock = threading.Lock()

    def run(self):
        """The kernel as a call runs it, or None when its file does not load."""
        run = self._run
        if run is None:
            with self._lock:
                if self._run is None:
                    kernel = aot.load(self.path)
                    if kernel is not None and self.blas:
                        # SciPy's BLAS module alone (8 ms), before the first product would import scipy.linalg
                        # whole inside this call (NPBench's lu S, kept kernel: first call 117 ms against 3.5 plain)
                        import_scipy_blas()
                        kernel = capped(kernel)
                    self._run = kernel if kernel is not None else False
                run = self._run
        return run or None


class Early:
    """The calls of a function before its translation, on the signatures remembered for it (``__call__``)."""

    def __init__(self, pyfunc, specs: dict, names: dict):
        self.pyfunc, self.specs, self.names = pyfunc, specs, names
        self.runs = 0
        # fast key -> its Spec or None: the lines name signatures by the key's repr, a few microseconds a call to
        # make, and these calls may be all the function's calls (nothing translates beside them)
        self._by_key: dict = {}

    def explain(self) -> list[str]:
        if not self.runs:
            return []
        c = self.pyfunc.__code__
        return [f"function at {os.path.basename(c.co_filename)}:{c.co_firstlineno} -> native from its first call "
                f"(a kernel kept before: {self.runs} runs before the function was translated)"]

    def __call__(self, args):
        """The call's result from a remembered kernel; MISS when the call is not one for it (another signature,
        runtime or mode, a profile being recorded, a global name that changed); a ``Failed`` when it raised."""
        fast = T._fast_key(args)
        try:
            spec = self._by_key[fast]
        except KeyError:
            spec = self.specs.get(repr(fast))
            if len(self._by_key) < KEYS_KEPT:
                self._by_key[fast] = spec  # (None, arguments without a fast key, finds no spec: "None")
        if spec is None or len(args) != spec.own:
            return MISS
        rt = select.current()
        if type(rt) is not Runtime or rt.closed or profiling.active() is not None or T.current_mode() != "on":
            return MISS
        namespace = self.pyfunc.__globals__
        for name, what in self.names.items():
            if _what(namespace, name) != what:
                return MISS
        run = spec.run()
        if run is None:
            return MISS
        # copies to put back only when the kernel may stop on an overflow (``checked``), as the quick path
        saved = [(args[i], args[i].copy()) for i in spec.writes] if spec.checked else ()
        stage = np.zeros(1, np.int64) if spec.staged else None
        try:
            out = run(*args) if stage is None else run(stage, *args)
        except Exception as e:  # noqa: BLE001 - handled by the translated function (whole.py early_failed)
            return Failed(spec, e, stage, saved)
        self.runs += 1
        with rt._lock:
            rt.counts["calls"] += 1
        return out if spec.convert is None else spec.convert(out)


def for_function(pyfunc) -> Early | None:
    """The early calls of ``pyfunc`` (the decorator, once): None when no kernel of it is remembered, or the
    remembered ones are not this function's translation now (see the module docstring)."""
    if not warm.enabled() or not aot.enabled():
        return None
    lines = warm.marks(warm.code_key(pyfunc))
    if warm.KEPT not in lines or not any(x.startswith(PREFIX) for x in lines):
        return None
    specs, names = {}, None
    for line in lines:
        if not line.startswith(PREFIX):
            continue
        try:
            data = json.loads(line[len(PREFIX):].split(" ", 1)[1])
            if data["translator"] != translator() or (names is not None and data["names"] != names):
                continue
            path = aot.path_of(str(data["kernel"]), str(data["description"]))
            if not os.path.exists(path):
                continue
            spec = Spec(data, path)
        except (ValueError, KeyError, TypeError, IndexError, OSError, UnsafeCacheError):
            continue  # a line of another version, or damaged: not followed
        names = data["names"]
        specs[str(data["fast"])] = spec
    # the names are checked at each call (a module's globals may be set after the decoration)
    if not specs or not isinstance(names, dict) or not all(type(v) is str for v in names.values()):
        return None
    return Early(pyfunc, specs, names)
