"""A loop at one place in a program, as native code: its kernels by argument kinds (tiering.py's ``Signatures``),
compiled when the loop proves hot (in a background thread while the interpreter goes on), run as one mutating
step. The modes are tiering.py's (``PHYLANX_NATIVE``)."""
from __future__ import annotations

import time
from concurrent.futures import Future

import numpy as np

from phylanx_py.errors import RAISED_AS_IS

from .. import beside
from . import aot
from . import kinds as K
from . import tiering as T
from .analysis import LoopPlan
from .background import Exiting
from .kinds import Decline
from .lower import lower
from .tiering import GIVE_UP, Entry, Signatures, current_mode, mode


class LoopEntry(Entry):
    """A loop's signature, with what a kernel built ahead of time needs (aot.py): the stand-ins of the arguments it
    first ran on (``sig``: (stand-ins, False), as a whole function's entry holds them) and ``ahead``, its memo."""

    __slots__ = ("sig", "ahead")

    def __init__(self, kinds):
        super().__init__(kinds)
        self.sig = self.ahead = None


class NativeLoop(aot.BuiltAhead, Signatures):
    """Called by generated code before a loop: the loop's new values of its outputs when it ran natively,
    else None (the interpreted loop runs; ``ran`` then adds its time)."""

    part_of_whole = True  # a function that runs as one native kernel runs this loop in it (HandOver.explain)
    # its kernels built ahead of time while Numba does not run here (aot.BuiltAhead), as a whole function's: loaded
    # with a dlopen instead of starting Numba on the caller's interpreter lock (NPBench's conv2d_bias and trmm S, in
    # a process without Numba: calls at 7-11x their plain time while it started). Not on Dask's workers (remote.py)
    native_code = True  # runs native code (codegen's ``native_loops``)
    lowers_beside_here = True  # (not on the cluster's tier: remote.py)
    all_writes = False  # Entry.writes only for kernels that may stop (remote.py's tier needs them always)

    @classmethod
    def factory(cls, fn, loop, where, program, namespaces, inner=False):
        """The loop tier's factory (loop_tiers.py): a NativeLoop unless the tier is off."""
        return cls(fn, loop, where, inner=inner, functions=dict(program.functions)) if mode() != "off" else None

    def __init__(self, fn, loop, where: str, inner: bool = False, functions=None):
        super().__init__(where)
        self.plan = LoopPlan(fn, loop)
        self.functions = functions  # the program's functions by name: calls of them are inlined (lower.py)
        # a loop inside an outermost one is offered each time it starts: after GIVE_UP declines of its argument
        # kinds in a row, with no signature ever taken, it is left interpreted for good (``dead``)
        self.inner, self.dead, self._misses = inner, False, 0
        self.last = None
        self.reason = self.plan.reason
        # a program translated beside its calls lowers its loops' signatures beside them too (tiering.py); one
        # translated in its first call (a loop in a loop: prescan.py) lowers them in the call, so that the long
        # first call of nested loops switches to native code part way through as soon as it can
        self.lowers_beside = self.lowers_beside_here and beside.on_worker()

    @property
    def params(self):
        return self.plan.params

    @property
    def outputs(self):
        return self.plan.outputs

    @property
    def globals(self):
        return self.plan.globals  # parameters that are module globals (name -> module): the hand-over reads them

    @property
    def static_reason(self):
        return self.plan.reason

    def __call__(self, ev, args):
        self.last = None
        m = current_mode()
        if m == "off" or self.plan.reason:
            return None
        try:
            entry, args = self._ready(ev, args, m)
        except (*RAISED_AS_IS, Exiting):  # a refused cache folder (the caller's error); the interpreter's exit
            raise
        except Exception as e:  # noqa: BLE001 - the tier's own failure is never the user's call's
            if m == "force":
                raise  # (the tests force the tier: a failure of its own must show there)
            # seen once, in one of NPBench's 54 kernels on a shared cache, not reproduced: a StopIteration from the
            # tier's preparation of a loop failed the user's call as an ExecutionError at the loop's line. The
            # loop runs interpreted from now on, and explain() says why
            self.reason = self.plan.reason = f"the native tier failed on it ({type(e).__name__}: {e})"
            self.entries.clear()
            return None
        return None if entry is None else self._run(ev, entry, args)

    def _ready(self, ev, args, m):
        """(the entry whose kernel runs this call, or None: the loop runs interpreted; the arguments, a local
        task's future among them waited for)."""
        entry = self.entry(args)
        if entry is None and Future in map(type, args):  # (looked for only when the kinds declined: off the hot path)
            # an array the tree is still making in a task of the local pool (``y = np.empty_like(x)`` then
            # ``y[:, -1] = 0``): its value, as the interpreted loop's first use of it would wait for (``_run``
            # waits for the tasks still writing it). Dask's futures are not fetched: their work is the cluster's
            args = tuple(ev.wait(a) if type(a) is Future else a for a in args)
            entry = self.entry(args)
        if entry is None:
            self._missed()
            return None, args
        self.last = entry
        if entry.declined or self.ready(entry, args, m) is None:
            return None, args
        return entry, args

    def _missed(self):
        self._misses += 1
        if self.inner and self._misses >= GIVE_UP and not self.entries:
            self.dead = True

    def ran(self, t0):
        """The interpreted loop took from ``t0`` until now (the tiering clock)."""
        if self.last is not None:
            self.last.interpreted += time.perf_counter() - t0

    def _lower(self, ks, small, args) -> Entry:
        entry = LoopEntry(ks)
        viewed = frozenset()
        try:
            kinds = dict(zip(self.plan.params, ks))
            names = frozenset(n for n, is_small in zip(self.plan.params, small) if is_small)
            entry.source, entry.checked, entry.flags, viewed, entry.printed = lower(
                self.plan.loop, self.plan.params, kinds, self.plan.outputs, names, self.functions)
        except Decline as e:
            entry.declined = str(e)
        # the arrays copied before a kernel that may stop on an overflow runs (to rerun on the values it started
        # with): those it may change (always, for a tier that must send the changes back: ``all_writes``)
        entry.writes = entry.printed.arrays_written(ks, viewed) if entry.checked or (
            self.all_writes and not entry.declined) else ()
        return entry

    def _run(self, ev, entry, args):
        if ev.pending:
            ev.wait_all(raise_errors=False)  # tasks still reading arrays the loop may change
        saved = [(args[i], args[i].copy()) for i in entry.writes] if entry.checked else ()
        run = entry.runner(entry.kernel)
        try:
            out = run(*args)
        except Exception as e:
            if self.undone(entry, e, saved, "the loop"):
                return None
            raise
        entry.native_runs += 1
        convert = entry.convert
        if convert is None:
            convert = entry.convert = self._converter(entry)
        return convert(out)

    def _converter(self, entry):
        """A function of the kernel's result tuple to the outputs' values as the plain loop leaves them (arrays
        and Python ints/floats/bools as they are, NumPy scalars and Either kinds converted)."""
        outputs, n = self.plan.outputs, len(self.plan.outputs)
        flags = list(entry.flags)
        conv = [(i, entry.flags[name], n + flags.index(name)) if name in entry.flags
                else (i, entry.kinds[self.plan.params.index(name)], None) for i, name in enumerate(outputs)]
        if not flags and all(_as_is(kind) for _, kind, _ in conv):
            return _same  # the kernel returns exactly the outputs, as they are
        return lambda out: tuple(_restore(out[i], kind if flag is None else (kind.np if out[flag] else kind.py))
                                 for i, kind, flag in conv)

    def explain(self) -> list[str]:
        if not self.entries:
            state = f"interpreted: {self.reason}" if self.reason else ("not run yet" if mode() != "off" else "off")
            return [f"loop at {self.where} -> {state}"]
        return super().explain()

    def _waiting(self, entry) -> str:
        return (f"interpreted so far ({entry.interpreted * 1e3:.1f} ms; native after {T.HOT_SECONDS * 1e3:.0f} ms"
                f"{', compiling' if entry.compiling else ''})")


def _restore(value, kind):
    """An output as the plain loop would have left it: scalars of their NumPy/Python type (Numba returns
    Python floats). Arrays need nothing: Numba returns an input array as that very object (its parent)."""
    if type(value) is np.ndarray:
        return value
    return K.convert(value, kind)


def _same(out):
    return out


def _as_is(kind) -> bool:
    """Numba returns values of this kind as the plain loop would have them (arrays: the very objects)."""
    return type(kind) is np.ndarray or type(kind) in (int, float, bool)
