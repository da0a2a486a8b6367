"""A loop at one place in a program, as native code: its kernels by argument kinds, compiled when the loop
proves hot (in a background thread while the interpreter goes on), run as one mutating step.

Modes (``PHYLANX_NATIVE``): ``0`` off; ``1`` (default) tiered: a loop becomes native after it has spent
``HOT_SECONDS`` interpreted, compiled in the background, used from the next time the loop starts; ``force``:
every loop that qualifies is compiled at its first run and runs natively (the differential suite's second pass).
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np
from phylanx_py.primitives import kernel_cache

from . import kinds as K
from .analysis import LoopPlan
from .helpers import HELPERS
from .kinds import Decline
from .lower import SMALL, lower

HOT_SECONDS = 0.05  # interpreted time after which a loop is compiled (Numba takes 0.2-10 s per kernel)
# counts of what the tier did in this process: "native" runs, "declined" signatures with their reasons
STATS: dict = {"native": 0, "compiled": 0, "declined": {}}


def mode() -> str:
    raw = os.environ.get("PHYLANX_NATIVE")
    m = {"0": "off", "off": "off", "force": "force"}.get((raw or "1").strip().lower(), "on")
    _MODE[:] = [m, raw]
    return m


_MODE = ["on", None]  # the last mode() and the variable's text it came from


def load_kernel(source: str):
    """The kernel module of ``source`` (HELPERS + kernel) through the verified kernel cache
    (primitives/kernel_cache.py): Numba's disk cache finds it again in another process; what runs is always the
    source generated here, never a file's content or unpickled code from elsewhere."""
    return kernel_cache.load_or_build("native", source)


class Entry:
    """One signature of a loop: its source, kernel, state and the reason it was declined."""

    __slots__ = ("kinds", "source", "checked", "kernel", "overflow", "declined", "compiling", "compile_seconds",
                 "interpreted", "native_runs", "writes", "flags", "convert")

    def __init__(self, kinds):
        self.kinds = kinds
        self.source = self.kernel = self.overflow = self.declined = None
        self.checked = self.compiling = False
        self.compile_seconds = self.interpreted = 0.0
        self.convert = None
        self.native_runs = 0
        self.writes = ()
        self.flags = {}


class NativeLoop:
    """Called by generated code before a loop: the loop's new values of its outputs when it ran natively,
    else None (the interpreted loop runs; ``ran`` then adds its time)."""

    def __init__(self, fn, loop, where: str):
        self.plan = LoopPlan(fn, loop)
        self.where = where
        self.entries: dict = {}
        self.fast: dict = {}  # _fast_key -> entry: the per-call path
        self.last = None
        self.reason = self.plan.reason  # the latest decline, for explain()

    @property
    def params(self):
        return self.plan.params

    @property
    def outputs(self):
        return self.plan.outputs

    @property
    def static_reason(self):
        return self.plan.reason

    def __call__(self, ev, args):
        self.last = None
        m = _MODE[0] if _MODE[1] == os.environ.get("PHYLANX_NATIVE") else mode()
        if m == "off" or self.plan.reason:
            return None
        fast = _fast_key(args)
        entry = self.fast.get(fast) if fast is not None else None
        if entry is None:
            try:
                ks = tuple(K.of_value(a, n) for a, n in zip(args, self.plan.params))
            except Decline as e:
                self.reason = str(e)
                return None
            # one entry per layout too: Numba compiles C, F and strided arrays (and read-only ones) apart
            small = _small(args)
            key = tuple(K.key(k) for k in ks) + tuple(_layout(a) for a in args if type(a) is np.ndarray) + small
            entry = self.entries.get(key)
            if entry is None:
                entry = self.entries[key] = self._lower(ks, small)
            if fast is not None:
                self.fast[fast] = entry
        self.last = entry
        if entry.declined:
            return None
        if entry.kernel is None:
            if m == "force":
                self._compile(entry, args)
            elif entry.interpreted >= HOT_SECONDS and not entry.compiling:
                entry.compiling = True
                threading.Thread(target=self._compile, args=(entry, args), daemon=True,
                                 name="phylanx-native-compile").start()
            if entry.kernel is None:
                return None
        return self._run(ev, entry, args)

    def ran(self, t0):
        """The interpreted loop took from ``t0`` until now (the tiering clock)."""
        if self.last is not None:
            self.last.interpreted += time.perf_counter() - t0

    def _lower(self, ks, small) -> Entry:
        entry = Entry(ks)
        try:
            kinds = dict(zip(self.plan.params, ks))
            names = frozenset(n for n, is_small in zip(self.plan.params, small) if is_small)
            entry.source, entry.checked, entry.flags = lower(self.plan.loop, self.plan.params, kinds,
                                                             self.plan.outputs, names)
        except Decline as e:
            entry.declined = str(e)
            self.reason = entry.declined
            STATS["declined"][f"{self.where}: {entry.declined}"] = True
        entry.writes = tuple(i for i, k in enumerate(ks) if type(k) is np.ndarray)
        return entry

    def _compile(self, entry, args):
        import numba

        t0 = time.perf_counter()
        try:
            module = load_kernel(HELPERS + "\n\n" + entry.source)
            sig = tuple(numba.typeof(a) for a in args)
            module.kernel.compile(sig)
            entry.overflow = module._Overflow
            entry.kernel = module.kernel
            STATS["compiled"] += 1
        except Exception as e:  # noqa: BLE001 - a typing failure declines this signature
            entry.declined = f"Numba: {_first_line(e)}"
            self.reason = entry.declined
            STATS["declined"][f"{self.where}: {entry.declined}"] = True
        finally:
            entry.compile_seconds += time.perf_counter() - t0
            entry.compiling = False

    def _run(self, ev, entry, args):
        if ev.pending:
            ev.wait_all(raise_errors=False)  # tasks still reading arrays the loop may change
        saved = [(args[i], args[i].copy()) for i in entry.writes] if entry.checked else ()
        try:
            out = entry.kernel(*args)
        except _numba_errors() as e:  # typing for arguments not seen when compiling: nothing ran yet
            entry.declined = f"Numba: {_first_line(e)}"
            self.reason = entry.declined
            return None
        except entry.overflow:
            for a, copy in saved:
                a[...] = copy
            entry.declined = ("a Python int grew past 2**63, or a value that may be a Python or a NumPy scalar "
                              "was divided by zero: the loop reran interpreted")
            self.reason = entry.declined
            return None
        entry.native_runs += 1
        STATS["native"] += 1
        if entry.convert is None:
            entry.convert = self._converters(entry)
        return tuple(_restore(out[i], kind if flag is None else (kind.np if out[flag] else kind.py))
                     for i, kind, flag in entry.convert)

    def _converters(self, entry):
        """(output index, kind, index of its Either flag or None) for each output."""
        outputs, n = self.plan.outputs, len(self.plan.outputs)
        flags = list(entry.flags)
        return [(i, entry.flags[name], n + flags.index(name)) if name in entry.flags
                else (i, entry.kinds[self.plan.params.index(name)], None) for i, name in enumerate(outputs)]

    def explain(self) -> list[str]:
        lines = []
        if not self.entries:
            state = f"interpreted: {self.reason}" if self.reason else ("not run yet" if mode() != "off" else "off")
            return [f"loop at {self.where} -> {state}"]
        for entry in self.entries.values():
            sig = ", ".join(K.describe(k) for k in entry.kinds)
            if entry.declined:
                lines.append(f"loop at {self.where} -> interpreted: {entry.declined}")
            elif entry.kernel is not None:
                lines.append(f"loop at {self.where} -> native ({len(entry.kinds)} args: {sig}; compiled in "
                             f"{entry.compile_seconds:.2f} s; {entry.native_runs} native runs)")
            else:
                lines.append(f"loop at {self.where} -> interpreted so far ({entry.interpreted * 1e3:.1f} ms; "
                             f"native after {HOT_SECONDS * 1e3:.0f} ms{', compiling' if entry.compiling else ''})")
        return lines


def _restore(value, kind):
    """An output as the plain loop would have left it: scalars of their NumPy/Python type (Numba returns
    Python floats). Arrays need nothing: Numba returns an input array as that very object (its parent)."""
    if type(value) is np.ndarray:
        return value
    return K.convert(value, kind)


def _layout(a):
    f = a.flags
    return (f.c_contiguous, f.f_contiguous, f.writeable, f.aligned)


def _fast_key(args):
    """A cheap key of the arguments' kinds (None: use the full path): dtype and ndim of arrays, type of scalars."""
    key = []
    for a in args:
        t = type(a)
        if t is np.ndarray:
            key.append((a.dtype, a.ndim, _layout(a)))
        elif t is int:
            if not -9223372036854775808 <= a <= 9223372036854775807:
                return None
            key.append(t)
        elif t is float or t is bool or (t in _SCALAR_TYPES):
            key.append(t)
        else:
            return None
    return tuple(key) + _small(args)


def _small(args) -> tuple:
    """Which arguments are Python ints below 2**40 in magnitude: index arithmetic on them needs no checks."""
    return tuple(type(a) is int and -SMALL < a < SMALL for a in args)


_SCALAR_TYPES = frozenset(d.type for d in K.DTYPES)


def _numba_errors():
    from numba.core.errors import NumbaError

    return NumbaError


def _first_line(e) -> str:
    text = str(e).strip().splitlines()
    useful = [t for t in text if t.strip() and not t.startswith("Failed in")]
    return (useful[0] if useful else type(e).__name__)[:200]
