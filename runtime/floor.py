"""The plain function as the floor of a call on the local runtime: it or the tree, whichever has run faster.

DESIGN.md's first rule: no call is slower than the undecorated function. On NumPy code that others wrote the tree
often is (NPBench, calls 2-6: 42 of 54 kernels under 0.9x NumPy): every operation pays the evaluator's dispatch,
and a call whose operations are all small gains nothing from tasks. The plain function is the answer by
definition (promise 1), so a call may run it. Per signature (the arguments' types, shapes and dtypes) the two are
timed: the first call runs the plain function, the second the tree (of a program without loops: once the plain
runs took ``LOOP_FREE_SECONDS``), then the one whose median of its last three (a tree not ``CLEARLY_FASTER`` than
the plain runs so far waits for three of them: the first is slowed by the process's first seconds)
times is lower runs, and the other is timed again at calls 4, 8, 16, 32 and every 64th after, and the tree at the
next call after a kernel of one of its loops got ready (the tree improves as its native kernels compile in the
background; a kernel of another program's loop is no cue: loop_tiers.kernel_ready), but never within ``SPACING``
calls of its last run, and never so often that the probes take more than ``PROBE_SHARE`` of the calls' time (the
slower way 100x slower: not within 2,000 calls); the tree of a program without loops is not probed for a kernel
getting ready (no loop of it can be one). Plain runs heat the program's loops as the tree's interpreted runs do
(each loop credited its share of the tree's time: ``Signatures.credit``), so a loop whose tree is seldom run
still compiles, and its kernel then cues the tree. That probing is the price of
finding where the tree wins (fused element-wise chains, tasks on both cores, loops gone native): at most one call in
64 once settled.

Which calls may run the plain function (``Floor.of``): only on the local runtime (``px.runtime.local()``: the
synchronous one is for debugging the tree, Dask runs the work on the cluster), outside ``px.profile()`` (which
times the tree's nodes), on arguments of plain Python and NumPy values, and for programs whose rerun no one can
see: no printing or random draws, no stores to enclosing functions' names, no calls of callables from elsewhere
but functions passed to the entry function that show and change nothing (prescan.harmless, judged per call: the
tree runs the others; an error inside one is located in its own tree, as the tree compiles it to run it). An
``assert`` or ``raise`` is no such effect: a run that raised is not rerun. An error in a plain run is still the
ExecutionError naming the primitive and the line that the tree gives: it is located from the plain run's traceback
(plain_errors.py), so nothing is copied before a plain run and a failed one is not rerun (what it changed stays
changed, as the plain function leaves it); a call whose lists or dicts it may change runs through the tree.
``PHYLANX_FLOOR=0`` turns this off."""
from __future__ import annotations

import ctypes
import os
import threading
import time

import numpy as np
from phylanx_py.primitives import IO, MUTATES, STATE
from phylanx_py.primitives import lookup as lookup_primitive
from phylanx_py.primitives.environ import OFF, raw_reader

from phylanx_py import ir

from . import profiling
from .base import Runtime
from .executors import LocalPoolExecutor

_SCALARS = frozenset({int, float, bool, complex, str, bytes, type(None)})
_CONTAINERS = (list, tuple, dict)
PROBES = (4, 8, 16, 32)  # calls at which the slower way is timed again; then every PROBE_EVERY-th
PROBE_EVERY = 64
# The slower way runs again (a probe, or the tree after a kernel got ready) only SPACING calls or more after it last
# ran: while a function's kernels compile one after another, each one ready had the tree run on the next call, and
# NPBench's calls 2-6 ran the slower tree 3-4 times of 5 (covariance2 at 0.41x NumPy, bicg and arc_distance too)
SPACING = 3
PROBE_SHARE = 0.05  # of the calls' time, at most, spent probing the slower way (``need`` in ``Floor.call``)
SAMPLES = 3  # the recent times kept per way; the one compared is their median (``typical``)
CLEARLY_FASTER = 2.0  # a tree this much faster than the plain runs so far replaces the plain function at once
# the tree of a program without loops runs first once the plain runs of a signature took this long in all: it can
# gain only a fused kernel's constant factor there, and its first run builds its fused kernels in the call (NPBench's
# compute, 253 ms against 20 ms plain; gesummv 113 against 8-11 ms), which at call 2 fell in NPBench's calls 2-6
# (0.85-0.86x NumPy); after half a second of calls it costs a small share of them
LOOP_FREE_SECONDS = 0.5
# a call (of a function with nested loops) at least this long runs through the tree while its kernel is not
# ready: about a compile's time (Numba takes 0.2-10 s a kernel; most NPBench kernels compile in 1-4 s here); a first
# call, its length not known, runs as the plain function this long, then reruns through the tree (``plain_run``)
OSR_SECONDS = 1.0
RECHECK_SECONDS = 0.1  # how often a stop not yet worth making is asked again (``stop_after``)
KEYS_KEPT = 64  # signatures remembered per function (a program calling it with ever new shapes starts over)
_FAILED = object()


# per call, the variable's raw value read (primitives/environ.py: os.environ.get costs about 1 us, as much as a small
# plain function)
_floor_raw = raw_reader("PHYLANX_FLOOR")


def enabled() -> bool:
    return _floor_raw() not in OFF


class _Times:
    __slots__ = ("plain", "tree", "calls", "kernels", "last", "plain_total")

    def __init__(self):
        self.plain: list = []  # recent times of each way, seconds
        self.tree: list = []
        self.calls = 0
        self.last = {True: -SPACING, False: -SPACING}  # the call (number) each way last ran at, by use_plain
        self.kernels = 0  # kernels of the program's loops ready when the tree last ran (Floor._kernels)
        self.plain_total = 0.0  # seconds of every plain run (LOOP_FREE_SECONDS)


class Floor:
    """The choice between the plain function and the tree for one compiled function (module docstring)."""

    def __init__(self, mutates, loops=True, locate=None, tiers=(), callables=()):
        self.locate = locate  # the ExecutionError of a failed plain run (plain_errors.Locator.error)
        # the entry function's parameters it calls, (name, position or None when keyword-only): the values of a
        # call must be ``hooks["harmless"]`` for the plain function to run (``_callables``)
        self.callables = tuple(callables)
        self.tiers = tuple(tiers)  # the program's loop tiers that run native code: their kernels are its cue
        self.mutates = mutates  # whether the program changes anything in place (lists and dicts included)
        self.loops = loops  # whether it has loops, which a native kernel getting ready may speed up in the tree
        self.times: dict = {}
        self.plain_runs = self.tree_runs = 0
        self.tree_seconds = 0.0  # of every run through the tree (its own time): the loops' shares price plain runs

    @classmethod
    def of(cls, program: ir.Program, locate=None, tiers=()) -> Floor | None:
        """The Floor of ``program``, or None when a rerun of it could be seen (module docstring); ``locate``: the
        ExecutionError of a failed plain run (plain_errors.Locator.error of the program's generated code); ``tiers``:
        its loops' native tiers (codegen's ``native_loops``)."""
        mutates = False
        entry = program.function(program.entry)
        passed = _untouched_params(entry)
        callables = {}
        for _, fn in program.functions:
            known = _own_functions(fn)
            for n, level in _nested_walk(fn.body):
                t = type(n)
                if t is ir.Apply and type(n.func) not in (ir.FuncRef, ir.Lambda) and \
                        not (type(n.func) is ir.Var and n.func.name in known):
                    if fn is entry and type(n.func) is ir.Var and n.func.depth == level and n.func.name in passed:
                        # a function passed in (also called in a comprehension or lambda of the entry function,
                        # ``level`` functions in): judged per call
                        callables[n.func.name] = passed[n.func.name]
                        continue
                    return None  # a callable from elsewhere: what it does is unknown
                if t in (ir.SetVar, ir.StoreName) and n.depth != 0:
                    return None
                if t is ir.StoreItem:
                    mutates = True
                elif t is ir.Call:
                    try:
                        effect = lookup_primitive(n.prim).effect
                    except Exception:  # noqa: BLE001 - a primitive not known here: nothing is known of its effects
                        return None
                    if effect == IO or effect == STATE:
                        return None
                    if "out" in dict(n.kwargs) or (effect == MUTATES and n.args):
                        mutates = True
        loops = any(isinstance(n, (ir.For, ir.While)) for _, fn in program.functions for n in ir.walk(fn.body))
        return cls(mutates, loops, locate, tiers, tuple(callables.items()))

    def call(self, rt, args, kwargs, plain, tree, hooks=None):
        """The call's result: ``plain(*args, **kwargs)`` or ``tree()``, as chosen (module docstring); ``hooks``:
        the frontend's (``harmless``, ``compile``) for a program that calls a function passed in."""
        if not runs_plain(rt):
            return tree()
        locate, passed = self.locate, ()
        if self.callables:
            passed = self._callables(args, kwargs, plain, hooks)
            if passed is None:
                return tree()
            locate = self._locate_in(passed, hooks)
        key = _key(args, kwargs, self.mutates, passed)
        if key is None:
            return tree()
        times = self.times.get(key)
        if times is None:
            if len(self.times) >= KEYS_KEPT:
                self.times.clear()
            times = self.times[key] = _Times()
        n = times.calls
        times.calls = n + 1
        if not times.plain:
            use_plain = True
        elif not times.tree:
            # without loops, the plain function is also timed SAMPLES times first: one slow first run (a process
            # state: NPBench's atax after NumPy's own calls had slowed, 15.5 against 10.4 ms) chose the tree for 84
            # of 86 calls at 0.64x NumPy, its probes rare and the median of two the slower
            use_plain = not self.loops and (times.plain_total < LOOP_FREE_SECONDS or len(times.plain) < SAMPLES)
        else:
            plain_s, tree_s = typical(times.plain), typical(times.tree)
            use_plain = plain_s <= tree_s
            if not use_plain and len(times.plain) < SAMPLES and tree_s * CLEARLY_FASTER > plain_s:
                # the tree of a program with loops runs at call 2 (its loops start their way to native code), and
                # one plain run is the first call's, slowed by the process's first seconds (1.5-2x here, the plain
                # function alone): NPBench's stockham_fft, warm, kept a tree 1.8x faster than that first run for
                # all of its 10 calls, at 0.75x NumPy, the plain function never timed again. Unless clearly faster,
                # the tree waits for SAMPLES plain runs, as a program without loops does
                use_plain = True
            ready = use_plain and self.loops and self._kernels() != times.kernels
            # a probe of the slower way costs its time: at most PROBE_SHARE of the calls' time goes to probes (a
            # tree 15x slower than a 1 us plain function, probed every 64th call, cost more than the calls)
            need = SPACING if ready else max(SPACING, max(plain_s, tree_s) / max(min(plain_s, tree_s), 1e-9) /
                                             PROBE_SHARE)
            if n - times.last[not use_plain] < need:
                pass  # the slower way ran lately (SPACING), or a probe would cost too much of the calls' time
            elif n in PROBES or n % PROBE_EVERY == 0:
                use_plain = not use_plain
            elif ready:
                use_plain = False  # a native kernel is ready since the tree last ran: maybe one of its loops
        times.last[use_plain] = n
        t0 = time.perf_counter()
        if not use_plain:
            times.kernels = self._kernels()
            setup = self._setup()
            out = tree()
            # the tree's own time: its loops' one-time lowering and kernel loads in this run left out. A first run
            # that lowered NPBench's deriche's four loops and loaded their cached kernels (warm) timed the tree
            # far slower than it runs, and the probes, spaced by that ratio, never ran it again: 0.99x NumPy settled
            seconds = max(time.perf_counter() - t0 - (self._setup() - setup), 1e-7)
            add(times.tree, seconds)
            self.tree_runs += 1
            self.tree_seconds += seconds
            return out
        out, ran = plain_run(plain, args, kwargs, (), tree, locate=locate)
        if ran is None:
            return out
        seconds = time.perf_counter() - t0
        add(times.plain, seconds)
        times.plain_total += seconds
        self.plain_runs += 1
        for tier in self.tiers:  # the plain run heats the program's loops as the tree's runs do (Signatures.credit)
            tier.credit(seconds, self.tree_seconds)
        with rt._lock:
            rt.counts["calls"] += 1
        return out

    def _callables(self, args, kwargs, plain, hooks):
        """The functions this call passes (or leaves at their defaults) for the parameters the program calls, when
        every one is harmless (phylanx_py/prescan.py: nothing a rerun would show, nothing changed in place); None
        otherwise (the call runs through the tree, which runs what they do as the plain function would)."""
        harmless = hooks.get("harmless") if hooks else None
        if harmless is None:
            return None
        values = []
        for name, position in self.callables:
            if position is not None and position < len(args):
                value = args[position]
            elif name in kwargs:
                value = kwargs[name]
            else:
                value = _default(plain, name, position)
            if value is _FAILED or not harmless(value):
                return None
            values.append(value)
        return tuple(values)

    def _locate_in(self, passed, hooks):
        """``locate`` for a plain run of this call: an error inside a function passed in is located in that
        function's own tree first (``hooks["compile"]``), as the tree's evaluation of the call compiles it."""
        compile_callable = hooks.get("compile")

        def locate(exc):
            for fn in passed:
                code = compile_callable(fn) if compile_callable is not None else None
                err = code.locate(exc, strict=True) if code is not None else None
                if err is not None:
                    return err
            return self.locate(exc) if self.locate is not None else None

        return locate

    def _setup(self) -> float:
        """Seconds the program's loop tiers spent lowering and loading kernels inside calls (``Signatures.setup``)."""
        return sum(t.setup for t in self.tiers) if self.tiers else 0.0

    def _kernels(self) -> int:
        """Kernels the program's own loop tiers made ready (loop_tiers.kernel_ready)."""
        return sum(t.kernels_ready for t in self.tiers) if self.tiers else 0

    def explain(self) -> list[str]:
        if not self.plain_runs:
            return []
        return [f"calls: {self.plain_runs} ran as the plain function, {self.tree_runs} through the tree (the "
                f"faster one per signature, timed)"]


def _own_functions(fn: ir.Function) -> frozenset:
    """The names that ``fn`` (its nested functions included) binds to its own lambdas or functions only
    (``fprime = lambda x: 1 - np.tanh(x) ** 2``, numpy-benchmarks' slowparts): a call of one runs code this walk
    sees. A name also bound otherwise (a parameter, a loop's target, another value) may hold any callable."""
    functions: dict = {}
    stores: dict = {}
    other: set = set()
    for n in ir.walk(fn):
        t = type(n)
        if t is ir.Assign and type(n.target) is ir.StoreName and type(n.value) in (ir.Lambda, ir.FuncRef):
            functions[n.target.name] = functions.get(n.target.name, 0) + 1
        elif t is ir.StoreName:
            stores[n.name] = stores.get(n.name, 0) + 1
        elif t is ir.SetVar:
            other.add(n.name)
        elif t is ir.Function:
            other.update(n.params)
            other.update(n.kwonly)
    return frozenset(name for name, count in functions.items() if name not in other and stores[name] == count)


def _nested_walk(body):
    """(node, how many functions (lambdas, comprehensions) in it is) for each node of ``body``."""
    stack = [(body, 0)]
    while stack:
        node, level = stack.pop()
        yield node, level
        inner = level + 1 if type(node) is ir.Function else level
        stack.extend((kid, inner) for kid in ir.children(node))


def _untouched_params(fn: ir.Function) -> dict:
    """``fn``'s parameters that no statement of it binds again (what they hold is the call's): name -> position
    (None: keyword-only)."""
    bound = {n.name for n in ir.walk(fn.body) if type(n) in (ir.StoreName, ir.SetVar)}
    out = {name: i for i, name in enumerate(fn.params) if name not in bound}
    out.update({name: None for name in fn.kwonly if name not in bound})
    return out


def _default(plain, name, position):
    """The default value of ``plain``'s parameter ``name`` (at ``position``; None: keyword-only), or _FAILED."""
    code = getattr(plain, "__code__", None)
    if code is None:
        return _FAILED
    if position is None:
        return (plain.__kwdefaults__ or {}).get(name, _FAILED)
    defaults = plain.__defaults__ or ()
    at = position - (code.co_argcount - len(defaults))
    return defaults[at] if 0 <= at < len(defaults) else _FAILED


def runs_plain(rt) -> bool:
    """Whether calls on ``rt`` may run the plain function (the module docstring's "which calls"; the arguments
    are ``plain_values``' to judge)."""
    return type(rt) is Runtime and type(rt.executor) is LocalPoolExecutor and not rt.closed and \
        profiling.active() is None and enabled()


def plain_values(args, kwargs) -> bool:
    """Whether the arguments are plain Python and NumPy values (lists and dicts of them included), which the plain
    function takes as the tree does (not futures, tiled or GPU arrays)."""
    return _key(args, kwargs, False) is not None


def plain_run(plain, args, kwargs, arrays, tree, limit=None, locate=None):
    """``(plain(*args, **kwargs), its seconds)``, or ``(tree(), None)`` when the call reruns through the tree. A
    run that raises raises ``locate``'s ExecutionError for it (the tree's error for the same failure, located from
    the traceback: plain_errors.py); without ``locate``, or when the run failed before the function's body ran, the
    call reruns through the tree, whose error names the primitive and the line as every tier's does. With ``limit``
    (seconds), a run still going after that long is stopped and the call reruns through the tree (``stop_after``):
    ``arrays`` (the ones it may change) are copied before such a run and put back before the rerun."""
    saved = [(a, a.copy()) for a in arrays] if limit is not None or locate is None else ()
    t0 = time.perf_counter()
    try:
        out = plain(*args, **kwargs) if limit is None else stop_after(limit, plain, args, kwargs)
    except RanTooLong:
        out = _FAILED
    except Exception as e:  # noqa: BLE001 - the error the tree gives for it, or a rerun where it gets one
        err = locate(e) if locate is not None else None
        if err is not None:
            raise err from err.__cause__
        out = _FAILED
    if out is _FAILED:  # outside the except block: the tree's error is not chained to the plain run's
        for a, copy in saved:
            a[...] = copy
        return tree(), None
    return out, time.perf_counter() - t0


class _Overtime(BaseException):
    """Raised into a plain run that outlasted its limit (a BaseException: no ``except Exception`` in NumPy's Python
    code swallows it)."""


class _Taken(BaseException):
    """Raised into a plain run's thread after it, to take a stop that the run did not (``stop_after``)."""


class RanTooLong(Exception):
    """A plain run stopped at its limit (``plain_run`` reruns the call through the tree)."""


class _Watch:
    """One daemon thread that sends each limited run's stop at its deadline (``stop_after``). A
    ``threading.Timer`` per run cost that run a thread's start, 0.2-0.6 ms: 6-17% of a 3.5 ms first call (NPBench's
    lu); here a run costs a lock and a notify."""

    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._due: dict = {}  # token -> (deadline, stop)
        self._count = 0
        self._pid = None  # the process whose thread runs (a forked child starts its own)

    def start(self) -> None:
        """Its thread, started now if not yet (a thread's start costs its starter 0.2-0.6 ms: the decorator starts
        it for a function whose first calls run limited, decorator.py)."""
        with self._cond:
            self._started()

    def _started(self) -> None:
        if self._pid != os.getpid():
            self._pid = os.getpid()
            threading.Thread(target=self._run, name="phylanx-limit", daemon=True).start()

    def add(self, limit: float, stop) -> int:
        with self._cond:
            self._started()
            self._count += 1
            self._due[self._count] = (time.perf_counter() + limit, stop)
            self._cond.notify()
            return self._count

    def remove(self, token: int) -> None:
        with self._cond:
            self._due.pop(token, None)  # no notify: the thread wakes at that deadline and finds nothing due

    def _run(self):
        with self._cond:
            while True:
                if not self._due:
                    self._cond.wait()
                    continue
                token, (when, stop) = min(self._due.items(), key=lambda item: item[1][0])
                wait = when - time.perf_counter()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                del self._due[token]
                self._cond.release()  # ``stop`` takes its run's lock, which that run holds while it removes itself
                try:
                    stop()
                finally:
                    self._cond.acquire()


_WATCH = _Watch()
start_watch = _WATCH.start
if hasattr(os, "register_at_fork"):  # a child forked while the thread held the lock would wait on it for ever
    os.register_at_fork(after_in_child=_WATCH.__init__)


def stop_after(limit, plain, args, kwargs, worth=None):
    """``plain(*args, **kwargs)``, stopped after ``limit`` seconds by an exception raised into this thread
    (``PyThreadState_SetAsyncExc``: Python checks for it between bytecodes, so a NumPy call in C finishes first).
    The whole-function tier runs a first call of nested loops this way: the plain function is the floor, but a long
    call gains more from the tree, which switches an inner loop to native code part way through (on-stack
    replacement); the length of a first call is not known, so it gets the plain function's speed for ``limit``
    seconds, then the tree. The lock makes "still running" and "stopped" exclusive: a pending stop not delivered
    when the run ends is cleared. ``worth()``, asked in the watching thread at the limit and every
    ``RECHECK_SECONDS`` after: whether the stop would gain anything yet (a first call beside the translation,
    decorator.py: not before the tree can reach native code)."""
    me, state, lock = ctypes.c_ulong(threading.get_ident()), [True, False], threading.Lock()  # running, stopped
    token = [0]
    # this run's own stop: a plain run inside it (a compiled function whose first call is limited too, called by
    # this one) must not take this run's stop for its own, nor this run another's
    own = type("_Overtime", (_Overtime,), {})

    def stop():
        if worth is not None and state[0] and not worth():
            token[0] = _WATCH.add(RECHECK_SECONDS, stop)  # asked again later (the run's end removes it)
            return
        with lock:
            if state[0]:
                state[1] = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(me, ctypes.py_object(own))

    token[0] = _WATCH.add(limit, stop)
    try:
        try:
            return plain(*args, **kwargs)
        finally:
            with lock:
                state[0] = False
                if state[1]:
                    # A stop sent is taken here if the run did not take it: clearing it instead (SetAsyncExc with
                    # NULL) left CPython's interpreter-wide "async exception pending" signal set for good (only a
                    # delivery resets it), and from then on a thread running with a trace function (the worker
                    # beside first calls, runtime/beside.py) spun at its first call forever. So one is delivered
                    # here, inside this try: at the check after the call that sets it, or the loop's jump back.
                    try:
                        ctypes.pythonapi.PyThreadState_SetAsyncExc(me, ctypes.py_object(_Taken))
                        for _ in range(4):
                            pass
                    except (_Taken, own):
                        pass
            _WATCH.remove(token[0])
    except own:
        raise RanTooLong(f"the plain run outlasted {limit} s") from None


def add(samples: list, seconds: float, keep: int = SAMPLES):
    """Append ``seconds`` to a way's recent times, keeping the last ``keep``."""
    samples.append(seconds)
    if len(samples) > keep:
        del samples[0]


def typical(samples: list) -> float:
    """The median of a way's recent times (of two, the slower): neither the best case (the tree's two independent
    histograms of NPBench's azimint_hist ran in parallel on idle cores once, 2.5 ms against a typical 7 ms, and that
    best kept the slower tree chosen) nor one slow call on a busy machine decides, and a way that got faster (kernels
    compiled) is followed within a few samples."""
    ordered = sorted(samples)  # a copy: another thread's call may add to ``samples`` meanwhile (a review's IndexError)
    return ordered[len(ordered) // 2]


def _key(args, kwargs, mutates, passed=()):
    """The signature the times are kept for, or None when an argument is not a plain value (a future, a tiled or
    GPU array, a list or dict the program may change) nor one of the harmless functions ``passed`` (``_callables``),
    which are part of it."""
    key = []
    for a in (*args, *kwargs.values()):
        t = type(a)
        if t is np.ndarray:
            key.append((a.shape, a.dtype.num))
        elif t in _SCALARS or isinstance(a, np.generic):
            key.append(t)
        elif t in _CONTAINERS:
            if mutates:  # an array in it may be changed: it is not copied before a plain run
                return None
            items = a.values() if t is dict else a
            if not all(type(v) in _SCALARS or type(v) is np.ndarray or isinstance(v, np.generic) for v in items):
                return None
            key.append((t, len(a)))
        elif passed and any(a is fn for fn in passed):
            key.append(a)
        else:
            return None
    if kwargs:
        key.append(tuple(kwargs))
    return tuple(key)
