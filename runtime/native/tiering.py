"""What the native tier's loops (loop.py) and whole functions (whole.py) share: the mode, the per-signature
entries (``Signatures``: argument kinds to an Entry, lowered at its first call), the decision to compile (forced, or
hot after ``HOT_SECONDS`` interpreted, in the background), the compile itself through the verified kernel cache
and the compile process, the parallel variant, the declines, and ``explain()``'s lines.

Modes (``PHYLANX_NATIVE``): ``0`` off; ``1`` (default) tiered: a loop becomes native after it has spent
``HOT_SECONDS`` interpreted, compiled in the background, used from the next time the loop starts; ``force``:
every loop that qualifies is compiled at its first run and runs natively (the differential suite's second pass).
"""
from __future__ import annotations

import os
import time

import numpy as np
from phylanx_py.primitives import kernel_cache
from phylanx_py.primitives.environ import fast_key

from phylanx_py.errors import UnsafeCacheError

from .. import beside
from ..loop_tiers import kernel_ready
from . import compile_process, warm
from . import kinds as K
from .argtypes import described, stand_in
from .background import (
    Exiting,
    _compiling,
    compile_quietly,
    in_background,
    load_cached,
    short_interval,
    warm_elsewhere,
)
from .blas_pool import calls_blas, capped, import_scipy_blas
from .compile_process import prestart
from .helpers import _Overflow, helpers_for
from .kinds import Decline
from .lower import SMALL
from .outline import outline
from .parallel import variant
from .tuning import Choice, threads

HOT_SECONDS = 0.05  # interpreted time after which a loop is compiled (Numba takes 0.2-10 s per kernel)
# the same for a kernel compiled before (warm.py) while Numba has not started in this process: its compile is a
# load from Numba's disk cache, but starting Numba takes a second in a background thread that shares the
# interpreter: not for a loop that runs a few milliseconds in all
MARKED_SECONDS = 0.005
# counts of what the tier did in this process: "native" runs, "declined" signatures with their reasons
STATS: dict = {"compiled": 0, "declined": {}}


def mode() -> str:
    raw = os.environ.get("PHYLANX_NATIVE")
    m = {"0": "off", "off": "off", "force": "force"}.get((raw or "1").strip().lower(), "on")
    _MODE[:] = [m, _raw_mode()]
    return m


_MODE = ["on", None]  # the last mode() and the variable's raw value it came from
# per call, the variable's raw value compared (primitives/environ.py: os.environ.get costs about 1 us)
_ENV_DATA, _ENV_KEY = fast_key("PHYLANX_NATIVE")


def _raw_mode():
    return _ENV_DATA.get(_ENV_KEY) if _ENV_KEY is not None else os.environ.get("PHYLANX_NATIVE")


def current_mode() -> str:
    """mode(), re-read only when the variable changed (the per-call check)."""
    return _MODE[0] if _MODE[1] == _raw_mode() else mode()


def raise_refusal(entry):
    """Raise the kernel cache's refusal that a compile of ``entry`` met (in a background thread, or in this one):
    the user hears of a cache folder others can write to, as from the fused kernels, instead of getting slower code
    silently. Once: the loop is compiled again when it is hot again, and refused again while the folder is unsafe."""
    err, entry.refused = entry.refused, None
    raise err


def load_kernel(source: str):
    """The kernel module of ``source`` (its helpers + kernel) through the verified kernel cache
    (primitives/kernel_cache.py): Numba's disk cache finds it again in another process; what runs is always the
    source generated here, never a file's content or unpickled code from elsewhere."""
    return kernel_cache.load_or_build("native", source)


class Entry:
    """One signature of a loop: its source, kernel, state and the reason it was declined."""

    __slots__ = ("kinds", "source", "checked", "kernel", "overflow", "declined", "compiling", "compile_seconds",
                 "interpreted", "native_runs", "writes", "flags", "convert", "parallel", "serial_why", "refused",
                 "printed", "mark", "marked", "credited", "held", "blas", "key")

    def __init__(self, kinds):
        self.kinds = kinds
        self.source = self.kernel = self.overflow = self.declined = None
        self.printed = None  # the kernel IR's printing (kir.Printed): the source, the node of each line, helpers
        self.refused = None  # the kernel cache's refusal met by a compile in the background, for the next call
        self.checked = self.compiling = False
        self.compile_seconds = self.interpreted = 0.0
        self.credited = 0.0  # the share of the program's plain runs counted as this loop's (``Signatures.credit``)
        self.held = None  # what a compile started by that credit types (``_held`` of the arguments it last ran on)
        self.convert = None
        self.parallel = None  # tuning.Choice: the kernel's parallel variant and whether it runs
        self.serial_why = None  # why the kernel has no parallel variant (None: not known yet)
        self.native_runs = 0
        self.mark = None  # the digest of the kernel's mark (warm.py), once looked for
        self.marked = False  # whether that mark was found: compiled before, here or in another process
        self.writes = ()
        self.flags = {}
        self.blas = None  # its kernel calls BLAS (worked out from ``printed`` once asked: ``calls_blas``)
        self.key = None  # its mark's digest, worked out ahead of its first call (``look_ahead``)

    def runner(self, kernel):
        """``kernel`` (the entry's, or its entry point) as a call runs it: through its parallel variant's choice,
        and with SciPy's BLAS pool at one thread when it calls BLAS (blas_pool.py)."""
        run = kernel if self.parallel is None else self.parallel.runner(kernel)
        return capped(run) if self.calls_blas() else run

    def calls_blas(self) -> bool:
        """Whether its kernel calls BLAS (blas_pool.calls_blas of ``printed``, worked out once)."""
        if self.blas is None:
            self.blas = calls_blas(self.printed)
        return self.blas

    def blas_ready(self) -> None:
        """SciPy's BLAS module loaded when its kernel calls BLAS, before the kernel is typed, loaded or run: here (in
        the background, or for a kept kernel in this call: 8 ms, blas_pool.py) rather than at its first product or
        Numba's typing of it, which import scipy.linalg whole (0.11 s) inside a call."""
        if self.calls_blas():
            import_scipy_blas()


class Lowering(Entry):
    """A signature whose lowering is a job beside the calls (``Signatures.lowers_beside``): the loop runs
    interpreted, heating it, until the job is done; the next call that meets it takes the lowered entry."""

    __slots__ = ("job",)

    def __init__(self, kinds, job):
        super().__init__(kinds)
        self.job = job


class Signatures:
    """A loop or a whole function as native kernels by argument signature. Subclasses give ``params``, ``where``,
    ``_lower(kinds, small, args)`` (a new Entry: its source, or ``declined``), ``_install(entry, module, compiled)``
    (a compiled kernel goes live) and ``_waiting(entry)`` (explain()'s line while the kernel is not ready)."""

    noun = "loop"  # explain()'s "loop at x.py:3 -> ..."
    # a signature met in a call is lowered by a job beside the calls (runtime/beside.py), not in the call: set by a
    # tier whose program was translated beside its calls (loop.py). Lowering NPBench's conv2d_bias's two loops took
    # one of its calls from 11 to 53 ms of the caller's processor; resnet's, to 97 ms
    lowers_beside = False
    native_note = ""  # what explain() says of a native kernel before its arguments

    def __init__(self, where: str):
        self.where = where
        self.entries: dict = {}
        self.fast: dict = {}  # _fast_key -> entry: the per-call path
        self._declined: set = set()  # fast keys whose kinds the tier declines (see ``entry``)
        self._declined_types: set = set()  # (position, type) of arguments that decline whatever their value
        self.reason = None  # the latest decline, for explain()
        self.kernels_ready = 0  # kernels made ready (loop_tiers.kernel_ready: its program's floor reads it)
        # seconds its calls spent lowering entries and loading or compiling kernels in the call (once per entry,
        # inside the run that met it first): floor.py leaves them out of the tree's times
        self.setup = 0.0
        self._lowering = 0  # entries that are a ``Lowering`` not landed yet (``_land_all`` looks only while any is)

    def entry(self, args):
        """The Entry of the arguments' signature (lowered at its first call), or None when their kinds decline.
        Kinds already declined are remembered by their fast key or type: a loop started on every iteration of an
        outer one (a list among its free variables) would pay a raised and formatted Decline each time, ~4 us."""
        fast = _fast_key(args)
        entry = self.fast.get(fast) if fast is not None else None
        if entry is not None:
            return entry
        if fast in self._declined or (self._declined_types and any(
                (i, type(a)) in self._declined_types for i, a in enumerate(args))):
            return None
        ks = []
        for i, (a, n) in enumerate(zip(args, self.params)):
            try:
                ks.append(K.of_value(a, n))
            except Decline as e:
                self.reason = str(e)
                if fast is not None:  # the fast key decides the kinds
                    _remember(self._declined, fast)
                elif type(a) not in _VALUE_DECIDES:  # a list, a dict, None ...: its type decides
                    _remember(self._declined_types, (i, type(a)))
                return None
        ks = tuple(ks)
        # one entry per layout too: Numba compiles C, F and strided arrays (and read-only ones) apart
        small = _small(args)
        key = tuple(K.key(k) for k in ks) + tuple(_layout(a) for a in args if type(a) is np.ndarray) + small
        entry = self.entries.get(key)
        if entry is None and self.lowers_beside and beside.enabled() and current_mode() != "force":
            # (not in ``fast`` until it lands: its calls take this slower path meanwhile, and find it done)
            entry = self.entries[key] = Lowering(ks, beside.submit(self._lower, ks, small, None))
            entry.held = self._held(args)  # what the lowered entry's first run would keep (``_heard``)
            self._lowering += 1
            return entry
        if entry is None:
            t0 = time.perf_counter()
            entry = self.entries[key] = self._lower(ks, small, args)
            self.setup += time.perf_counter() - t0
            self._lowered(entry)
        elif type(entry) is Lowering:
            if not entry.job.done():
                return entry
            entry = self._land(key, entry)
        if fast is not None:
            self.fast[fast] = entry
        return entry

    def _lowered(self, entry) -> None:
        if entry.declined:
            self.decline(entry, entry.declined)
        else:
            prestart()  # its compile process, if not started yet: ready by the time a compile is asked for

    def _land(self, key, pending):
        """The entry a finished ``Lowering`` job made, in its place: with the heat of the interpreted runs made
        meanwhile, and its first run's arguments heard (a call through the tree, or a plain run's credit, may be
        the first to find it: the floor may run only the plain function after the tree's run that met the loop,
        and the credit then heats it). A failure of the tier's own is raised here, as a lowering's in a call."""
        if self.entries.get(key) is not pending:  # landed meanwhile by another thread (an explain() of its own)
            return self.entries[key]
        entry = self.entries[key] = pending.job.result()
        self._lowering -= 1
        entry.interpreted = pending.interpreted
        self._lowered(entry)
        if not entry.declined:
            self._heard(entry, pending.held)
        return entry

    def _land_all(self) -> None:
        """Land the finished jobs (a failed one stays, for the next call that meets the loop to raise in it)."""
        for key, entry in tuple(self.entries.items()):
            if type(entry) is Lowering and entry.job.done() and entry.job.exception() is None:
                self._land(key, entry)

    def _heard(self, entry, held) -> None:
        """The entry's first run, on arguments whose stand-ins are ``held``: kept for a compile in the background,
        and its kernel asked for ahead when there is a compile server."""
        entry.held = held
        if compile_process.ahead_wanted() and entry.printed is not None:
            # compiled by the server meanwhile (compile_process.py); the request is made in its thread, as
            # a background compile's is (the module's text takes milliseconds): the stand-ins typed
            compile_process.ask_ahead(self._request_briefly, entry, entry.held)

    def ready(self, entry, args, m: str):
        """The entry's kernel, or None while it is not ready: compiled now when ``m`` is "force", in the
        background once the entry has run ``HOT_SECONDS`` interpreted. A compile in the background that met the
        kernel cache's refusal raises it here, in the caller."""
        if entry.kernel is None:
            if type(entry) is Lowering:
                return None
            t0 = time.perf_counter()
            if m == "force":
                self._compile(entry, args)
            elif entry.mark is None and not entry.compiling and self._marked(entry, args) and \
                    self._compile(entry, args, cached_only=True):
                pass  # compiled before: loaded from Numba's disk cache (warm.py)
            elif _hot(entry) and not entry.compiling:
                kernel_cache.check()  # a refused cache folder is this call's error, not a decline in the thread
                entry.compiling = True
                in_background(self._compile, entry, self._held(args))
            elif entry.held is None:  # its first run
                self._heard(entry, self._held(args))
            self.setup += time.perf_counter() - t0
            if entry.refused is not None:
                raise_refusal(entry)
        return entry.kernel

    def credit(self, seconds: float, tree_seconds: float) -> None:
        """A plain run of this loop's program took ``seconds`` (floor.py): each entry still waiting for its heat is
        credited the share of it that the loop had of the program's runs through the tree (``tree_seconds`` in
        all, the tiers' ``setup`` left out), and one hot now starts compiling, for the types it last ran on. The
        floor runs the plain function whenever it is the faster, and the interpreted runs of the tree, which heat
        its loops, then come only as probes: NPBench's vadv ran 623 calls as the plain function in 20 s and its
        main loop, 35 ms interpreted in its two runs through the tree, never reached the 50 ms after which it
        compiles."""
        if self._lowering:  # (a plain run's credit is per call: nothing to look at once all landed)
            self._land_all()
        if tree_seconds <= 0.0:
            return
        for entry in tuple(self.entries.values()):
            if entry.kernel is not None or entry.compiling or entry.declined or entry.held is None \
                    or entry.refused is not None or not entry.interpreted or type(entry) is Lowering:
                continue
            entry.credited += seconds * min(entry.interpreted / tree_seconds, 1.0)
            if _hot(entry):
                entry.compiling = True
                in_background(self._compile, entry, entry.held)

    def look_ahead(self, entry) -> None:
        """What ``_marked`` reads, read before the entry's first call (its digest, its mark from the disk): a job
        beside the first calls (runtime/beside.py) lowered it."""
        if entry.printed is not None and entry.key is None:
            entry.key = warm.kernel_key(entry.printed)
            warm.marks(entry.key)

    def _marked(self, entry, args) -> bool:
        """Whether the entry's kernel loads in this call: marked as compiled before for these argument types, with
        Numba running already; else its compile starts after MARKED_SECONDS interpreted (a mark for other types, or
        Numba not started), or HOT_SECONDS (no mark): warm.py. Asked once per entry."""
        entry.mark = "" if entry.printed is None else entry.key or warm.kernel_key(entry.printed)
        lines = warm.marks(entry.mark) if entry.mark else frozenset()
        entry.marked = bool(lines)
        return entry.marked and warm.numba_started() and warm.sig_line(self._signature(entry, args)) in lines

    def _compile(self, entry, args, cached_only=False) -> bool:
        """Compile the entry's sequential kernel for its signature (in the compile process first when in the
        background, then a load from the kernel cache here), then its parallel variant when it has one; True when
        the kernel is ready. ``cached_only``: a marked kernel in the caller's thread, loaded only if Numba's disk
        cache has its machine code (a mark says a process compiled it, not that this process's Numba cache holds
        it: another NUMBA_CACHE_DIR, a cleaned cache; a review saw a first call of 7 s), else False, nothing done."""
        t0 = time.perf_counter()
        ready = False
        entry.compiling = True
        try:
            ahead = self._ahead(entry, cached_only)
            if ahead is not None:  # built ahead of time (aot.py): loaded without Numba, and sequential
                entry.blas_ready()
                entry.overflow = _Overflow
                self._install(entry, None, ahead)
                STATS["compiled"] += 1
                entry.compiling = False
                kernel_ready(self)
                return True
            if cached_only and not warm.numba_started():
                return False  # marked as built ahead of time, and that did not load: never Numba's start in a call
            entry.blas_ready()
            text = sequential_module(entry.printed)
            # the compile process types the arguments itself: Numba's import here (0.3-0.5 s of Python holding
            # the interpreter lock) waits until the kernel is compiled, instead of slowing the caller's next calls
            # (NPBench's jacobi_1d, calls 5-8, while the whole function's kernel was asked for)
            early = self._described(entry, args)
            warm_elsewhere("load_kernel", text, early if early is not None else self._signature(entry, args))
            sig = self._signature(entry, args)
            module = load_kernel(text)
            compiled = load_cached(module.kernel, sig) if cached_only else compile_quietly(module.kernel, sig)
            if compiled is None:
                return False
            entry.overflow = module._Overflow
            self._install(entry, module, compiled)
            STATS["compiled"] += 1
            ready = True
            if entry.mark is None:  # forced: not looked for yet
                entry.mark = warm.kernel_key(entry.printed)
            warm.mark(entry.mark, warm.sig_line(sig))
        except UnsafeCacheError as e:  # the folder turned unsafe since the caller checked: the next call raises it
            entry.refused = e
            return False
        except Exiting:
            raise
        except Exception as e:  # noqa: BLE001 - a typing failure declines this signature
            self.decline(entry, f"Numba: {_first_line(e)}")
            return False
        finally:
            entry.compile_seconds += time.perf_counter() - t0
            if not ready:
                entry.compiling = False
        # its parallel variant, compiled once a call proves long enough (at once when forced); the sequential
        # kernel runs meanwhile. "compiling" (explain()) ends, and the floor hears of the kernel, only once the
        # entry is complete: a call between the two found the kernel without its variant's state (a test that
        # waited for the end of "compiling" then saw its call not measured, under load)
        try:
            parallel_variant(entry, sig, current_mode() == "force", self._changed)
            if entry.parallel is not None:
                self._changed()
        finally:
            entry.compiling = False
            kernel_ready(self)
        return True

    def _request(self, entry, args):
        """What a background compile of the entry asks the compile process for first (``_compile``), or None when
        its types are not described without Numba here."""
        early = self._described(entry, args)
        return None if early is None else ("load_kernel", sequential_module(entry.printed), early)

    def _request_briefly(self, entry, args):
        """``_request`` in a thread beside the calls, holding the interpreter in short turns (background.py)."""
        with short_interval():
            return self._request(entry, args)

    def _ahead(self, entry, cached_only):
        """The entry's kernel built ahead of time and loaded without Numba (aot.py), or None: compiled here."""
        return None

    def _held(self, args):
        """What a background compile keeps of the call's arguments (``_signature`` types them): stand-ins, so the
        call's arrays are not kept alive until the compile."""
        return tuple(stand_in(a) for a in args)

    def _described(self, entry, args):
        """The arguments' types as the compile process reads them without Numba here (``described``), or None."""
        return described(args)

    def _signature(self, entry, args) -> tuple:
        import numba

        return tuple(numba.typeof(a) for a in args)

    def _install(self, entry, module, compiled):
        entry.kernel = compiled if module is None else module.kernel  # None: built ahead of time (aot.py)

    def _state(self, entry) -> str:
        """What explain() says of a native kernel before its runs (whole functions: being measured)."""
        return ""

    def _changed(self):
        """An entry's kernel, variant or decline changed (whole functions rebuild their quick path)."""

    def decline(self, entry, reason: str):
        entry.declined = self.reason = reason
        STATS["declined"][f"{self.where}: {reason}"] = True
        self._changed()

    def undone(self, entry, e, saved, what: str) -> bool:
        """After the kernel raised ``e``: True when the call is to rerun interpreted, the signature declined
        (Numba's typing of arguments not seen when compiling: nothing ran yet; or a Python int past 2**63 / a
        division by zero of an Either value: the arrays the kernel may have changed are put back from ``saved``
        first). ``what`` reran: "the loop", "the call"."""
        if isinstance(e, _numba_errors()):
            self.decline(entry, f"Numba: {_first_line(e)}")
            return True
        variant = entry.parallel.overflow if entry.parallel is not None else None
        if isinstance(e, entry.overflow) or (variant is not None and isinstance(e, variant)):
            for a, copy in saved:
                a[...] = copy
            why = e.args[0] if e.args else "a Python int grew past 2**63 or did not fit a small int dtype, or a " \
                "value that may be a Python or a NumPy scalar was divided by zero"
            self.decline(entry, f"{why}: {what} reran interpreted")
            return True
        return False

    def explain(self) -> list[str]:
        lines = []
        if self._lowering:
            self._land_all()
        for entry in self.entries.values():
            sig = ", ".join(K.describe(k) for k in entry.kinds)
            head = f"{self.noun} at {self.where} ->"
            if entry.declined:
                lines.append(f"{head} interpreted: {entry.declined}")
            elif entry.kernel is not None:
                lines.append(f"{head} native ({self.native_note}{len(entry.kinds)} args: {sig}; compiled in "
                             f"{entry.compile_seconds:.2f} s; {self._state(entry)}{entry.native_runs} native runs"
                             f"{threads_note(entry)})")
            else:
                lines.append(f"{head} {self._waiting(entry)}")
        return lines


def parallel_variant(entry, sig, force, decided=None):
    """Give ``entry`` (its sequential kernel compiled for ``sig``) its parallel variant (tuning.Choice: compiled
    once a call proves long enough, at once when ``force``), when a loop of it may run in parallel (parallel.py),
    or the reason it has none."""
    try:
        v, why = variant(entry.printed, sig)
    except Exception as e:  # noqa: BLE001 - a source the analysis cannot read stays sequential, and says why
        v, why = None, f"not analysed ({type(e).__name__}: {e})"
    if v is not None and threads() < 2:
        v, why = None, "one thread"
    entry.serial_why = why
    if v is not None:
        prelude = helpers_for(entry.printed.helpers) + "\n\n"
        entry.parallel = Choice(v, sig, lambda source: load_kernel(prelude + source), force, decided,
                                lambda: _compiling["threads"] > 0, in_background,
                                lambda source: warm_elsewhere("load_kernel", prelude + source, sig))


def sequential_module(printed) -> str:
    """A sequential kernel's module text: the helpers the kernel IR calls, and the kernel with its fast loop
    versions outlined (outline.py); parallel variants are printed as generated."""
    return helpers_for(printed.helpers) + "\n\n" + outline(printed)


def threads_note(entry) -> str:
    """The kernel's threads for explain(): its parallel loops and what was chosen, or why it has none."""
    if entry.parallel is not None:
        return f"; {entry.parallel.describe()}"
    return f"; sequential: {entry.serial_why}" if entry.serial_why else ""


def _layout(a):
    f = a.flags
    return (f.c_contiguous, f.f_contiguous, f.writeable, f.aligned)


DECLINED_KEEP = 64
GIVE_UP = 16
_VALUE_DECIDES = (int, tuple, np.ndarray)  # kinds.of_value looks at these values (range, items, dtype), not types


def _remember(declined: set, key):
    if len(declined) < DECLINED_KEEP:
        declined.add(key)


def _fast_key(args):
    """A cheap key of the arguments' kinds (None: use the full path): dtype, ndim and flags (layout, writeable)
    of arrays, type of scalars, and whether Python ints are small (see ``_small``)."""
    key = []
    for a in args:
        t = type(a)
        if t is np.ndarray:
            key.append((a.dtype, a.ndim, a.flags.num))
        elif t is int:
            if -SMALL < a < SMALL:
                key.append(0)
            elif -9223372036854775808 <= a <= 9223372036854775807:
                key.append(t)
            else:
                return None
        elif t is float or t is bool or (t in _SCALAR_TYPES):
            key.append(t)
        else:
            return None
    return tuple(key)


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


def _hot(entry) -> bool:
    """The entry has run interpreted (or its share of the program's plain runs) long enough to be compiled."""
    return entry.interpreted + entry.credited >= (MARKED_SECONDS if entry.marked else HOT_SECONDS)
