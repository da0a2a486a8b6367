"""A whole function as one native kernel: a function that is loops and plain statements over its parameters
followed by a return, called with NumPy arrays and scalars only, runs as one ``numba.njit`` kernel straight from
the call, without an Evaluation (its setup, the generated function and the loop hand-over cost 10-20 us a call).
Straight-line array code (no loop: NPBench's hdiff, compute, arc_distance) is offered too, once its calls have
taken STRAIGHT_SECONDS: its array statements become loop nests (scalarize.py) that may run on two threads, and its
kernel is kept only if it beats the floor's choice (``_timed``, ``_decide``).

Same answer, same errors: its statements are lowered as the loop tier lowers loops (runtime/native/lower.py), and
the kernel raises where the plain function would. An error in a loop is the ExecutionError the native loop tier
gives (at the loop's line); a statement outside loops that may raise is taken only before anything changed (its
error is then the interpreter's own: the call reruns there); a Python int past 2**63 puts the arrays back and
reruns interpreted, as in loop.py. Anything else (other runtimes than the local one, a profile being recorded,
keyword arguments, tiled/GPU/other values) takes the ordinary path: ``call`` returns ``fallback()``."""
from __future__ import annotations

import threading
import time

import numpy as np

from phylanx_py import ir
from phylanx_py.errors import ConfigurationError, ExecutionError

from .. import beside, floor, profiling
from ..base import Runtime
from ..loop_tiers import FALLBACK
from . import aot, compile_process, early, warm
from . import kinds as K
from . import tiering as T
from .analysis import globals_as_names, module_globals
from .argtypes import described, signature_of, stand_in
from .expressions import inlinable
from .quick import guard as _guard
from .quick import make_quick
from .whole_lower import lowering


def whole_function(program: ir.Program):
    """The WholeFunction of ``program``'s entry, or None when its shape never qualifies."""
    fn = program.function(program.entry)
    if _static_reason(program, fn) is not None:
        return None
    # numbers as defaults of the last parameters fill a call that leaves them out (NPBench's crc16(data));
    # other defaults (an array the calls would share) leave such calls to the tree
    defaults = tuple(c.value for c in dict(program.defaults).get(program.entry, ()))
    return WholeFunction(fn, defaults if all(type(d) in (int, float, bool) for d in defaults) else (),
                         dict(program.functions))


def _static_reason(program, fn):
    nodes = list(ir.walk(fn.body))
    stmts = fn.body.stmts
    if any(name != program.entry and not inlinable(f) for name, f in program.functions):
        return "it calls other functions"  # other than those a kernel inlines (expressions.inlinable)
    if fn.kwonly:
        return "keyword-only parameters"
    returns = [s for s in nodes if isinstance(s, ir.Return)]
    if returns and (len(returns) > 1 or returns[0] is not stmts[-1]):
        return "it returns from inside"
    if any(isinstance(s, ir.Lambda) for s in nodes):
        return "it makes a function"
    if any(isinstance(v, (ir.Var, ir.StoreName, ir.SetVar)) and v.depth != 0 for v in nodes):
        return "it uses an enclosing function's variables"
    return None


# tuning.Choice's states while its parallel variant is compiled and tried (after the sequential kernel's first run,
# its probe, which is timed as any first run)
# straight-line code is lowered once its calls have taken this long in all: its kernel gains a constant factor over
# NumPy (1.2-3x: no temporaries, two threads), not a loop's 10-100x over the interpreter, and compiling it takes 1-5 s
# beside the caller, which slowed NPBench's calls 2-6 of arc_distance, atax and bicg to 0.35-0.48x NumPy when it
# began after 50 ms (load 4-8); a function called for less than this would not win its compile back
STRAIGHT_SECONDS = 1.0
# with the compile server, straight-line code is lowered beside the calls after this many seconds of them, and its
# kernel compiled by the server: the caller's interpreter lock takes neither (NPBench's compute was native 3 s
# after its first call, against Numba's first call of 0.8-1.5 s)
STRAIGHT_AHEAD_SECONDS = T.HOT_SECONDS
_RESULT = "__pxret"  # the returned value's name, when it is an expression (``WholeFunction``)
_UNDECIDED = ("compiling", "measuring")
MEASURED = 3  # a new kernel's first runs timed against as many recent plain runs (``_decide``)
# a new kernel's first run this many times faster than the fastest plain run before it is kept at once: a compile
# slowed those plain runs about 2x, not more (NPBench's lu: 0.2 ms native against 5-8 ms plain)
CLEARLY_FASTER = 4


class Entry(T.Entry):
    __slots__ = ("stages", "guard", "values", "exact", "entry_point", "sig", "plain_runs", "floor", "last",
                 "plain_times", "plain_before", "native_times", "measuring", "fast", "ahead", "ret")


class WholeFunction(aot.BuiltAhead, T.Signatures):
    """The entry function of a program as native kernels by argument kinds (see the module docstring)."""

    noun = "function"
    native_note = "whole function, "

    def __init__(self, fn: ir.Function, defaults: tuple = (), functions=None):
        super().__init__(f"{fn.loc.filename.rsplit('/', 1)[-1]}:{fn.loc.lineno}")
        self.fn = fn
        self.functions = functions  # the program's functions by name: calls of them are inlined (lower.py)
        self.defaults = defaults  # of the last parameters: numbers (``whole_function``)
        stmts = fn.body.stmts
        # straight-line code (array statements, no loop): offered once its calls have taken STRAIGHT_SECONDS in all,
        # and never forced (PHYLANX_NATIVE=force is about loops: every small test program would compile a kernel);
        # until its kernel is ready and after a decline, its calls take the floor's choice, the plain function or
        # the tree (``fallback``), against which a new kernel is timed (``_decide``)
        self.loop_free = not any(isinstance(s, (ir.For, ir.While)) for s in ir.walk(fn.body))
        self.warm = 0.0  # seconds the loop-free function's calls took before its first signature was lowered
        self._straight_job = None  # the job that lowers it beside the calls (``_straight_lowered``)
        self.pyfunc = None  # the Python function (the decorator sets it): its own mark when a kernel is kept
        self._kept: dict = {}  # argument kinds (fast key) -> whether a kernel of them was kept before (warm.py)
        # module data globals the body reads (NPBench's vadv: ``BET_M = 0.5`` at its module's top): parameters of
        # the kernel after the function's own, read at each call as the tree reads them (``with_globals``), as a
        # loop's are (analysis.LoopPlan); names of one module only (Python makes an assigned name local throughout)
        self.globals = module_globals(fn.body, fn.params)
        self.namespaces = {}  # module -> its namespace dict (code.ProgramCode sets it)
        if self.globals:
            stmts = globals_as_names(fn.body, self.globals).stmts
        if stmts and isinstance(stmts[-1], ir.Return):
            self.body, self.ret = ir.Block(stmts=stmts[:-1], loc=fn.body.loc), stmts[-1].value
            # straight-line code's ``return a * b + c``: a statement, so its own loop nest (scalarize.py)
            if isinstance(self.ret, (ir.Call, ir.Fused)) and self.loop_free:
                ret = stmts[-1]
                self.body = ir.Block(stmts=stmts[:-1] + (ir.Assign(ir.StoreName(_RESULT, loc=ret.loc), self.ret,
                                                                   loc=ret.loc),), loc=fn.body.loc)
                self.ret = ir.Var(_RESULT, loc=ret.loc)
        else:
            self.body, self.ret = ir.Block(stmts=stmts, loc=fn.body.loc), ir.Const(None, loc=fn.loc)
        self.own = len(fn.params)  # the function's own parameters: the first ``own`` of ``params``
        self.params = list(fn.params) + list(self.globals)
        self.quick = None  # the per-call path once a signature runs natively (make_quick)
        self.locate = None  # the ExecutionError of a failed plain run (code.ProgramCode.locate, set by it)
        self._quick_lock = threading.Lock()
        # a loop inside a loop: the tree offers the inner one to the native tier at each outer iteration (a long
        # call goes native in its course), the plain function cannot (``_plain_now``)
        self.nested = any(isinstance(inner, (ir.For, ir.While)) for outer in ir.walk(self.body)
                          if isinstance(outer, (ir.For, ir.While)) for inner in ir.walk(outer.body))

    def call(self, rt, args, fallback, plain=None, tree=None):
        """The call's result from the native kernel, or ``fallback()`` (the ordinary evaluation); while the
        kernel is not ready, ``plain(*args)`` (the plain function) or ``tree()`` (the evaluation of the tree, by
        default ``fallback``), as ``_plain_now`` decides."""
        tree = tree or fallback
        m = T.current_mode()
        if m == "off" or type(rt) is not Runtime or rt.closed or profiling.active() is not None:
            return fallback()
        args = self.kernel_args(args)
        if args is None:  # another count, or a global not defined: the tree raises the TypeError or NameError
            return fallback()
        # the arguments' kinds, worked out once a call (each step below asked for them again: 3 us a call, 8-12% of a
        # 70 us plain function, numpy-benchmarks' normalize_complex_arr, whose signature was declined)
        fast = T._fast_key(args)
        entry = self.fast.get(fast) if fast is not None else None
        if entry is not None and entry.declined:
            return fallback()
        if self.loop_free:
            if not self._kept_before(fast) and not self._straight_lowered(args):  # not yet worth a kernel (below)
                return self._timed(fallback, "warm")
            m, plain = "on", None  # its calls before and beside the kernel are the floor's choice (``_timed``)
        if entry is None:
            entry = self.entry(args)
            if entry is None or entry.declined:
                return fallback()
        entry.floor = entry.floor or plain is not None or self.loop_free  # calls to time it against (``_install``)
        if entry.fast is None and self.loop_free:
            entry.fast = fast or ()
        if self.ready(entry, args, m) is None:
            if self.loop_free:
                return self._timed(fallback, entry)
            t0 = time.perf_counter()
            try:
                if plain is not None and self._plain_now(entry):
                    return self._plain(rt, entry, args, plain, tree)
                return tree()
            finally:
                entry.last = time.perf_counter() - t0
                entry.interpreted += entry.last
        if entry.measuring and len(entry.plain_times) < len(entry.native_times) and \
                (entry.parallel is None or entry.parallel.state not in _UNDECIDED):
            if self.loop_free:
                return self._timed(fallback, entry)
            if plain is not None:
                return self._plain(rt, entry, args, plain, tree)  # a plain run to time the new kernel against
        return self._run(rt, entry, args, fallback)

    def _straight_lowered(self, args) -> bool:
        """Whether a loop-free function's signature is lowered in this call (``STRAIGHT_SECONDS`` of calls), or
        was lowered beside the calls: with the compile server, after ``STRAIGHT_AHEAD_SECONDS`` of calls, in a job
        beside them (runtime/beside.py; its kernel is then asked for ahead: compile_process.py), since neither its
        lowering nor its compile then takes the caller's interpreter lock."""
        if self.warm >= STRAIGHT_SECONDS:
            return True
        if self._straight_job is None:
            if self.warm < STRAIGHT_AHEAD_SECONDS or not compile_process.ahead_wanted() or not beside.enabled():
                return False
            self._straight_job = beside.submit(self._lower_straight, args)
        return self._straight_job.done()

    def _lower_straight(self, args) -> None:
        """The job: ``args`` are the kernel's already (``call`` made them: defaults filled in, globals after)."""
        if T.current_mode() == "on":
            self.entry(args)

    def prepare(self, args):
        """Lower the signature of ``args`` before any call runs on it, as ``call`` would at its first call: in a
        job beside the first calls (runtime/beside.py), which ran the plain function meanwhile."""
        args = self.kernel_args(args)
        if T.current_mode() != "on" or args is None:
            return
        if self.loop_free and not self._kept_before(T._fast_key(args)):
            return  # lowered after STRAIGHT_SECONDS of calls; one kept before is lowered at its first call: here
        entry = self.entry(args)
        if entry is not None and not entry.declined and entry.kernel is None:
            self.look_ahead(entry)

    def credit_beside(self, seconds: float) -> None:
        """The calls that ran the plain function beside the translation (runtime/beside.py) took ``seconds``: they
        ran the floor's choice, so they count toward a loop-free function's lowering (``warm``) and heat the entries
        lowered ahead (their first signature's), as the plain runs ``call`` makes do."""
        if self.loop_free:
            self.warm += seconds
            return
        for entry in tuple(self.entries.values()):
            if entry.kernel is None and not entry.declined:
                entry.interpreted += seconds

    def goes_native(self, args) -> bool:
        """Whether a rerun of a call on ``args`` through the tree can reach native code: their signature is lowered
        (by the translation beside the first calls: ``prepare``) and not declined. Asked from the thread that stops
        a first call's plain run (decorator.py), so it only looks."""
        args = self.kernel_args(args)
        if args is None or T.current_mode() != "on":
            return False
        fast = T._fast_key(args)
        entry = self.fast.get(fast) if fast is not None else None
        return entry is not None and not entry.declined

    def stopped_beside(self, args, seconds: float) -> None:
        """A first call's plain run beside the translation was stopped after ``seconds`` (decorator.py): the call
        reruns through the tree now, and the next while its kernel is not ready, as after a long call here
        (``_plain_now``)."""
        args = self.kernel_args(args)
        entry = self.entry(args) if args is not None and T.current_mode() == "on" else None
        if entry is not None and not entry.declined:
            entry.last = seconds
            entry.interpreted += seconds

    def look_ahead(self, entry) -> None:
        super().look_ahead(entry)
        if warm.enabled():
            aot.path_for(entry, early=True)  # its path worked out (``entry.ahead``), as ``_marked`` asks

    def kernel_args(self, args):
        """A call's arguments as the kernel takes them: numbers the call left out filled in from the defaults, then
        the values of the module globals the body reads; None when the count is not the function's or a global
        is not defined."""
        own = self.own
        if own - len(self.defaults) <= len(args) < own:
            args = tuple(args) + self.defaults[len(args) - own + len(self.defaults):]
        if len(args) != own:
            return None
        return self.with_globals(args) if self.globals else args

    def with_globals(self, args):
        """``args`` and the values of the module globals the body reads (``globals``), or None if one is unset."""
        try:
            return tuple(args) + tuple(self.namespaces[module][name] for name, module in self.globals.items())
        except KeyError:
            return None

    def _timed(self, fallback, entry):
        """A loop-free function's call through ``fallback`` (the floor's choice), its seconds counted: toward the
        function's lowering (``entry`` "warm"), the entry's compile, and the runs a new kernel is timed against."""
        t0 = time.perf_counter()
        out = fallback()
        seconds = time.perf_counter() - t0
        if entry == "warm":
            self.warm += seconds
        elif entry.kernel is None:
            entry.interpreted += seconds
            floor.add(entry.plain_times, seconds, MEASURED)
        elif entry.measuring:
            floor.add(entry.plain_times, seconds, MEASURED)
            self._decide(entry)
        return out

    def _plain_now(self, entry) -> bool:
        """Whether this call, its kernel not ready, runs as the plain function. Yes, unless a loop nests in a loop
        and the last call was long: the tree then switches the inner loop to native code at an outer iteration as
        soon as its kernel is ready (on-stack replacement, which a running plain function cannot do), and a call
        longer than a compile (``floor.OSR_SECONDS``) gains more from that than it loses to the tree's slower
        interpretation (3-5x a scalar loop). A first call, its length not known, runs as the plain function for at
        most ``floor.OSR_SECONDS``, then through the tree (``_plain``): never slower than the plain function when short
        (DESIGN.md's floor), at most that much later to native code when long."""
        return not self.nested or entry.last is None or entry.last < floor.OSR_SECONDS

    def _plain(self, rt, entry, args, plain, tree):
        """The call, while its kernel is not ready, as the plain function: it is the answer by definition and
        runs at CPython's speed, where the tree's interpreter runs a scalar loop 3-4x slower (the plain function is
        the floor, DESIGN.md). When it raises, its error is the tree's for the same failure, located from the
        traceback (``locate``: plain_errors.py). A first call stopped at its limit reruns through the tree: the
        arrays it may have changed are copied before it and put back first. (This signature lowered natively: no
        printing, no random draws, nothing but its array arguments changes, so a rerun repeats nothing that anyone
        saw.)"""
        limit = floor.OSR_SECONDS if self.nested and entry.last is None else None  # a first call
        out, seconds = floor.plain_run(plain, args[:self.own], {}, [args[i] for i in entry.writes], tree, limit,
                                       self.locate)
        if seconds is None:
            return out
        floor.add(entry.plain_times, seconds, MEASURED)
        if entry.measuring:
            self._decide(entry)
        entry.plain_runs += 1
        with rt._lock:
            rt.counts["calls"] += 1
        return out

    def _lower(self, ks, small, args) -> Entry:
        entry = Entry(ks)
        entry.stages = ()
        entry.guard = entry.values = entry.entry_point = entry.sig = None
        entry.exact = False
        entry.plain_runs = 0
        entry.floor = False
        entry.plain_times, entry.native_times = [], []  # recent seconds of plain runs; of the kernel's first runs
        entry.plain_before = []  # the plain runs' seconds while the kernel compiled
        entry.measuring = False  # the kernel is ready and timed against the plain function (``_decide``)
        entry.last = None  # the last interpreted call's seconds (None: no call yet)
        entry.fast = None  # a loop-free function's argument kinds, for its mark (warm.py)
        entry.ahead = None  # where its kernel is built ahead of time, and whether it may be (aot.path_for's memo)
        request = (self.body, self.params, ks, small, self.ret, self.functions, self.loop_free)
        # beside the calls, the compile server lowers it (35-170 ms of Python for NPBench's loop kernels, which
        # here took a tenth of the time beside busy calls: 0.3-1.7 s, and made their calls 2-20 1.1-1.2x slower)
        result = compile_process.lowered(request) if beside.on_worker() else None
        if result is None or result[0] == "failed":
            result = lowering(*request)  # (a failure of the server's is met here again, with its traceback)
        if result[0] == "declined":
            entry.declined = result[1]
            viewed = ()
        else:
            entry.source, entry.checked, entry.stages, viewed, entry.printed, entry.ret = result[1]
            entry.convert = K.converter(entry.ret)
        # the arrays it may change: copied before a kernel that may stop on an overflow runs, and before a first
        # plain run that may be stopped at its limit (``_plain``), to rerun on the values the call started with
        entry.writes = entry.printed.arrays_written(ks, viewed) if not entry.declined else ()
        entry.guard, entry.values, entry.exact = _guard(args, small)
        if not entry.declined:
            # the Numba types of the very arguments the guard was made from: the quick path calls the code
            # compiled for them without another type check, so they must be what the guard tests (the compile
            # runs later, in the background, when these arrays may have been changed in place)
            entry.sig = (tuple(stand_in(a) for a in args), len(entry.stages) > 1)  # typed when compiled
        return entry

    def _held(self, args):
        return ()  # the compile types the stand-ins ``_lower`` kept: the call's arrays are not held meanwhile

    def _described(self, entry, args):
        return described(*entry.sig) if type(entry.sig[0]) is tuple else entry.sig

    def _signature(self, entry, args) -> tuple:
        if type(entry.sig[0]) is tuple:  # the stand-ins: typed here, Numba imported off the call
            entry.sig = signature_of(*entry.sig)
        return entry.sig

    def _install(self, entry, module, compiled):
        # the compiled code's own entry, for the types taken with the guard (``_lower``): the quick path calls it,
        # skipping the dispatcher's type matching (its guard has matched them already)
        entry.entry_point = compiled
        # timed against the plain function first (``_decide``), unless forced or its calls never run plain (the
        # floor off; decided by the calls, not by plain runs counted so far: the call that started this compile may
        # still be in its plain run when a kernel loaded from the disk cache is ready); plain runs timed while this
        # compile ran were slowed by it (about 2x): the comparison takes new ones
        # (a kernel kept before, in this process or an earlier one, is not timed again: warm.py)
        kept = entry.marked and warm.KEPT in warm.marks(entry.mark)
        entry.measuring = entry.floor and T.current_mode() != "force" and not kept
        if kept and self.pyfunc is not None and not warm.kept_code(self.pyfunc):
            # kept by a process older than the Python function's own mark (warm.code_key): marked now, so that the
            # next process's first call translates and loads this kernel rather than running beside the translation
            warm.mark(warm.code_key(self.pyfunc), warm.KEPT)
        entry.plain_before, entry.plain_times = entry.plain_times, []
        super()._install(entry, module, compiled)
        self._requick()
        if kept and self.pyfunc is not None:
            self._remember(entry)  # kept by a process that did not remember it (early.py): remembered now

    def _changed(self):
        self._requick()

    def _run(self, rt, entry, args, fallback):
        saved = [(args[i], args[i].copy()) for i in entry.writes] if entry.checked else ()
        stage = np.zeros(1, np.int64) if len(entry.stages) > 1 else None
        run = entry.runner(entry.kernel)
        # only a new kernel's first runs are timed, and with the variant that stays: while its parallel variant is
        # still being tried, the calls run native untimed (an element-wise nest's sequential kernel runs at about
        # NumPy's speed: its parallel one is the gain)
        measuring = entry.measuring and (entry.parallel is None or entry.parallel.state not in _UNDECIDED)
        t0 = time.perf_counter() if measuring else 0.0
        try:
            out = run(*args) if stage is None else run(stage, *args)
        except Exception as e:
            if self.failed(entry, e, stage, saved) is FALLBACK:
                return fallback()
        if measuring:
            seconds = time.perf_counter() - t0
            entry.native_times.append(seconds)
            if not entry.plain_times and seconds * CLEARLY_FASTER < min(entry.plain_before, default=0.0):
                entry.measuring = False  # no doubt, whatever the compile slowed: no plain runs to compare
                self._keep(entry)  # kept as after a timing (a later process then is native from its first call)
                self._requick()
            else:
                self._decide(entry)
        entry.native_runs += 1
        with rt._lock:
            rt.counts["calls"] += 1
        return out if entry.convert is None else entry.convert(out)

    def _decide(self, entry):
        """After ``MEASURED`` runs of a kernel that just got ready and as many plain runs alternating with them, the
        kernel is kept when its median is not over the plain runs' (the plain function is the floor: a
        whole-function kernel of array-slice arithmetic ran NPBench's heat_3d at 0.54x NumPy, Numba allocating a
        temporary per operation), else the signature is declined and its calls go back to the floor's choice
        (runtime/floor.py)."""
        if len(entry.native_times) < MEASURED or len(entry.plain_times) < MEASURED:
            return
        entry.measuring = False
        native, plain = floor.typical(entry.native_times), floor.typical(entry.plain_times)
        if native > plain:
            self.decline(entry, f"the plain function is faster ({plain * 1e3:.3g} ms a call against "
                                f"{native * 1e3:.3g} ms native)")
            if entry.mark:
                warm.unmark(entry.mark)  # a later process waits for its calls again
            if entry.fast:
                warm.unmark(warm.function_key(self.fn, entry.fast))
            if self.pyfunc is not None:
                warm.unmark(warm.code_key(self.pyfunc))
        else:
            self._keep(entry)
        self._requick()

    def _keep(self, entry):
        """Mark the entry's kernel kept (warm.py): a later process runs it from the signature's first call, without
        timing it against the plain function again (and a loop-free function is lowered at its first call); the
        Python function too (``pyfunc``, set by the decorator), whose first call then translates in the call."""
        if entry.mark:
            warm.mark(entry.mark, warm.KEPT)
        if entry.fast:
            warm.mark(warm.function_key(self.fn, entry.fast), warm.KEPT)
        if self.pyfunc is not None:
            warm.mark(warm.code_key(self.pyfunc), warm.KEPT)
            self._remember(entry)

    def _remember(self, entry):
        """What a later process's first calls need to run the kept kernel before translating (early.py), written
        beside the calls (runtime/beside.py: the sources' digest and the bytecode's reading take about 1 ms)."""
        if beside.enabled():
            beside.submit(early.remember, self, entry)
        else:
            early.remember(self, entry)

    def early_failed(self, failed, args, fallback):
        """A remembered kernel (early.py) raised in a call before the translation: handled as the quick path handles
        its kernel's error (``failed``), on this signature's entry, lowered now (the same kernel: its digest)."""
        kargs = self.kernel_args(args)
        entry = self.entry(kargs) if kargs is not None else None
        if entry is not None and not entry.declined and entry.printed is not None and \
                warm.kernel_key(entry.printed) == failed.spec.kernel_key:
            if entry.overflow is None:
                entry.overflow = T._Overflow  # a kernel built ahead of time raises it (tiering._compile)
            self.failed(entry, failed.error, failed.stage, failed.saved)  # raises, or the call reruns
            return fallback()
        for a, copy in failed.saved:
            a[...] = copy
        if failed.spec.writes and not failed.saved:  # arrays it may have changed, not known where: its error
            raise ExecutionError.from_exception(failed.error, self.fn.loc, "native function") from failed.error
        return fallback()

    def _kept_before(self, fast) -> bool:
        """Whether a loop-free function's kernel for the argument kinds ``fast`` (tiering's fast key) was kept before,
        in this process or an earlier one (warm.py): it is then lowered at its first call, not after STRAIGHT_SECONDS
        of calls."""
        if not fast:
            return False
        kept = self._kept.get(fast)
        if kept is None:
            kept = self._kept[fast] = warm.KEPT in warm.marks(warm.function_key(self.fn, fast))
        return kept

    def failed(self, entry, e, stage, saved):
        """After the kernel raised ``e``: FALLBACK when the call is to run interpreted (nothing changed, or the
        arrays were put back), else raises the ExecutionError of the loop that failed (or ``e`` itself when it is
        the setup's error: the kernel cache's refusal, met before the kernel ran)."""
        if isinstance(e, ConfigurationError):
            raise e
        if self.undone(entry, e, saved, "the call"):
            return FALLBACK
        node, is_loop = entry.stages[int(stage[0]) if stage is not None else 0]
        if not is_loop:
            return FALLBACK  # nothing changed yet (lower.py declines otherwise): the interpreter's error
        raise ExecutionError.from_exception(e, node.loc, "native loop") from e

    def _requick(self):
        """Rebuild ``quick`` from the entries that run natively now."""
        with self._quick_lock:
            self.quick = make_quick(self, [e for e in self.entries.values() if e.kernel is not None and
                                           not e.declined and not e.measuring and e.guard is not None])

    def _waiting(self, entry) -> str:
        so_far = "the floor's choice" if self.loop_free else \
            f"the plain function ({entry.plain_runs} runs)" if entry.plain_runs else "loops only"
        after = STRAIGHT_SECONDS + T.HOT_SECONDS if self.loop_free else T.HOT_SECONDS
        return (f"{so_far} so far ({entry.interpreted * 1e3:.1f} ms; whole function native after "
                f"{after * 1e3:.0f} ms{', compiling' if entry.compiling else ''})")

    def explain(self) -> list[str]:
        if self.loop_free and not self.entries and self.warm > 0:  # not lowered yet: its calls so far
            return [f"{self.noun} at {self.where} -> the floor's choice so far ({self.warm * 1e3:.1f} ms; whole "
                    f"function native after {(STRAIGHT_SECONDS + T.HOT_SECONDS) * 1e3:.0f} ms)"]
        return super().explain()

    def _state(self, entry) -> str:
        # a new kernel timed against the plain function (``_decide``) says so: calls alternate until then
        return "measuring against the plain function; " if entry.measuring else ""
