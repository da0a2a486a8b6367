"""``@compile``: the one module that ties the frontend (translation, passes) to the runtime."""
from __future__ import annotations

import builtins
import dataclasses
import functools
import inspect
import os
import threading
import time
import types
import weakref

import numpy as np

from phylanx_py.primitives.backends import to_device
from phylanx_py.runtime import beside, current, floor, loop_tiers
from phylanx_py.runtime.code import ProgramCode
from phylanx_py.runtime.floor import enabled as floor_enabled
from phylanx_py.runtime.floor import plain_values, runs_plain
from phylanx_py.runtime.loop_tiers import FALLBACK, MISS

from . import pickling
from .draw import draw
from .errors import CompileError
from .passes import PIPELINE, fuse_elementwise, fuse_row_products, run_pipeline
from .prescan import beside_mode, harmless
from .printer import labels_of
from .program import translate
from .resolve import SCALARS
from .verify import verify
from .visualize import to_dot

FUSION = (fuse_elementwise, fuse_row_products)  # what ``fuse=False`` / PHYLANX_FUSE=0 turn off


def _fuse_default() -> bool:
    return os.environ.get("PHYLANX_FUSE", "1") != "0"


def _debug() -> bool:
    return os.environ.get("PHYLANX_DEBUG", "0") not in ("", "0")


def _user_facing(err: CompileError) -> CompileError:
    """``err`` without the translator's frames (its message names the user's file:line and shows the line), as
    JAX filters its own frames from tracebacks; PHYLANX_DEBUG=1 keeps them."""
    if _debug():
        return err
    err.__suppress_context__ = True
    if err.__cause__ is not None:
        err.__cause__ = err.__cause__.with_traceback(None)
    return err.with_traceback(None)


def _at_user_line(err: CompileError):
    """(code, name): code that raises the global ``name`` from a frame at the user's file:line (as Jinja2 puts
    template lines into tracebacks), so the last frame Python prints is the user's line with its source. The
    raise statement spans the line's text, so no carets are drawn under it."""
    loc = err.loc
    text = loc.line_text.rstrip() if loc is not None else ""
    if loc is None or loc.lineno < 2 or not text.strip() or not os.path.exists(loc.filename):
        return None, None
    stripped = text.lstrip()
    name = "_" * max(len(stripped) - len("raise "), 1)
    indent = len(text) - len(stripped)
    src = "\n" * (loc.lineno - 2) + "if 1:\n" + " " * max(indent, 1) + f"raise {name}\n"
    return builtins.compile(src, loc.filename, "exec").replace(co_name=loc.function), name


def _passes(fuse: bool):
    return PIPELINE if fuse else tuple(p for p in PIPELINE if p not in FUSION)


def _finish(program):
    """A checked program that prints with the registry's names (``str(f.tree)`` shows ``__add``)."""
    verify(program)
    return dataclasses.replace(program, labels=labels_of(program))


class CompiledFunction:
    """A Python function compiled to an execution tree (on first use). Call it like the function."""

    __phylanx_compiled__ = True

    def __init__(self, fn, *, optimize: bool = True, disable: bool = False, debug: bool = False,
                 fuse: bool | None = None, device: str = "cpu"):
        if not isinstance(fn, types.FunctionType):
            raise TypeError(f"@compile takes a Python function, not {type(fn).__name__}")
        functools.update_wrapper(self, fn)
        self.__wrapped__ = fn
        self._whole = None  # the whole-function tier whose quick path calls try first (_refresh)
        self.optimize, self._disable, self.debug = optimize, disable, debug
        # fusion of element-wise chains into Numba kernels: on unless fuse=False or PHYLANX_FUSE=0
        self.fuse = fuse if fuse is not None else _fuse_default()
        if device not in ("cpu", "gpu"):
            raise ValueError(f"device must be 'cpu' or 'gpu', not {device!r}")
        # "gpu": NumPy inputs go to the GPU (CuPy) and results stay there until asked for (cupy.asnumpy)
        self._device = device
        self._signature = inspect.signature(fn)
        self._lock = threading.Lock()
        if not disable and device == "cpu":
            loop_tiers.prepare()  # the native tier's compile process starts now, beside the program's set-up
            if beside.enabled():
                # the first call's checks (``_beside``), made once here for their cold part: the function's source
                # read, the kernel cache's folder checked (0.2-0.25 ms each in a new process, 15% of the scalar
                # loop's 3.4 ms first call); the first call makes them again, on what it finds then, in 30-40 us
                limited = beside_mode(fn) == "limited"
                # the worker that translates beside the first calls (``_beside``); it starts the thread that stops
                # their plain runs when limited (``_limited_run``), so that this pays one thread's start
                beside.start(floor.start_watch if limited else None)
                loop_tiers.translates_first(fn)
        # a kept kernel's calls before the translation (runtime/native/early.py), on the signatures remembered
        self._early = loop_tiers.early(fn) if not disable and device == "cpu" else None
        self._code: ProgramCode | None = None
        self._tree = None
        # (pid, Future) of the translation beside the first calls (_beside); False: this function translates first
        self._job = None
        self._limited = False  # its first calls' plain runs are stopped to rerun through the tree (``_beside``)
        self._beside_seconds = 0.0  # the plain runs' seconds while the job ran, for the tiers (credit_beside)

    # ---- compilation ---------------------------------------------------------------------------------
    def _compile(self, args=None) -> ProgramCode:
        """The program's code, translated now if not yet; with ``args`` (a job beside the first calls: _beside),
        the whole-function tier also lowers their signature before the code is published."""
        if not self._lock.acquire(blocking=False):
            with beside.waiting():  # the job beside the calls holds it: it runs at full speed while this waits
                self._lock.acquire()
        try:
            if self._code is None:
                program, namespaces = translate(self.__wrapped__)
                if self.optimize:
                    program = run_pipeline(program, _passes(self.fuse))
                program = _finish(program)
                code = ProgramCode(program, namespaces)
                if code.whole is not None and hasattr(code.whole, "pyfunc"):
                    code.whole.pyfunc = self.__wrapped__  # a kept kernel marks it (loop_tiers.translates_first)
                if args is not None and code.whole is not None:
                    code.whole.prepare(args)
                self._tree = program
                self._code = code
                self._refresh()
                if self.debug:
                    print(program)
        finally:
            self._lock.release()
        return self._code

    # disable and device are properties so that setting them also decides whether calls try the native quick path
    @property
    def disable(self) -> bool:
        return self._disable

    @disable.setter
    def disable(self, value: bool):
        self._disable = value
        self._refresh()

    @property
    def device(self) -> str:
        return self._device

    @device.setter
    def device(self, value: str):
        if value not in ("cpu", "gpu"):
            raise ValueError(f"device must be 'cpu' or 'gpu', not {value!r}")
        self._device = value
        self._refresh()

    def _refresh(self):
        code = self._code
        self._whole = code.whole if code is not None and not self._disable and self._device == "cpu" else None

    def _compiled(self) -> ProgramCode:
        """``_compile()`` for the public entry points: a CompileError keeps only the caller's frames."""
        if self._code is not None:
            return self._code
        try:
            return self._compile()
        except CompileError as e:
            error = _user_facing(e)
        code, name = (None, None) if _debug() else _at_user_line(error)
        if code is None:
            raise error
        exec(code, {name: error})  # noqa: S102 - raises the CompileError at your line (PHYLANX_DEBUG=1: details)

    @property
    def tree(self):
        """The execution tree (``ir.Program``); ``str()`` of it is the PhySL-like text with file:line:col."""
        self._compiled()
        return self._tree

    @property
    def source(self) -> str:
        """The Python source generated for the tree (what runs; each line that runs user code ends with a
        ``# file:line: source`` comment), like Numba's ``inspect_types``. Tracebacks and pdb show it too."""
        return self._compiled().source

    def to_dot(self, profile=None) -> str:
        """DOT text of the tree (no graphviz needed to produce it); ``profile`` colours nodes by time."""
        return to_dot(self.tree, profile)

    def visualize(self, path, profile=None) -> str:
        """Draw the tree to ``path``: .svg/.png/.pdf (graphviz's dot), .dot, or an .html report."""
        return draw(self.tree, path, profile)

    def explain(self) -> str:
        """Which tier each loop runs in and why: ``loop at lu.py:12 -> native (2 args: float64[:, :], ...)``,
        ``loop at x.py:30 -> interpreted: np.random.rand has no native form (x.py:31)``."""
        code = self._compile()
        self._credit(code)
        loops = getattr(code, "loop_hooks", [])
        whole = code.whole.explain() if getattr(code, "whole", None) is not None else []
        floor = code.floor.explain() if getattr(code, "floor", None) is not None else []
        # the calls a kept kernel ran before the translation, while no signature is lowered (then its lines say)
        early = self._early.explain() if self._early is not None and not whole else []
        # every signature seen runs as one native kernel: its loops' own native kernels no longer run
        whole_native = (bool(whole) and all(" -> native (whole function" in line for line in whole)) or \
            (bool(early) and not whole)
        lines = [line for loop in loops for line in loop.explain(whole_native)] + early + whole + floor
        return "\n".join(lines) if lines else "no loops"

    # ---- calling -------------------------------------------------------------------------------------
    def _inputs(self, args, kwargs):
        if self.device != "gpu":
            return args, kwargs
        return to_device(tuple(args)), to_device(dict(kwargs))

    def __call__(self, *args, **kwargs):
        # a whole-function tier's quick path first (its guards choose; a call it does not take goes on below): on
        # a small kernel this call's own cost is what the caller sees over the kernel's, so it reads two attributes
        whole = self._whole
        if whole is not None and not kwargs:
            quick = whole.quick
            if quick is not None:
                out = quick(args)
                if out is not MISS:
                    return out if out is not FALLBACK else current().evaluate(self._code, args, kwargs, HOOKS)
        if self._disable:
            return self.__wrapped__(*args, **kwargs)
        code = self._code
        if code is None:
            if self._early is not None and not kwargs and self._device == "cpu":
                out = self._early(args)
                if out is not MISS:
                    return self._early_out(out, args)
            if self._job is not False:
                out = self._beside(args, kwargs)
                if out is not MISS:
                    return out
            code = self._compiled()
        if self._beside_seconds:
            self._credit(code)
        rt = current()
        if self._device == "cpu":
            floor = code.floor

            def tree():
                return rt.evaluate(code, args, kwargs, HOOKS)

            def chosen():  # the plain function or the tree, the faster (runtime/floor.py)
                return tree() if floor is None else floor.call(rt, args, kwargs, self.__wrapped__, tree, HOOKS)

            whole = code.whole
            if whole is not None and not kwargs:  # a tier that runs the whole function (loop_tiers.py)
                return whole.call(rt, args, chosen, self.__wrapped__ if floor_enabled() else None, tree)
            return chosen()
        args, kwargs = self._inputs(args, kwargs)
        return rt.evaluate(code, args, kwargs, HOOKS)

    def _credit(self, code):
        """After the job (the first call or ``explain()`` that follows it): the tiers count the plain runs made
        beside it (whole.py ``credit_beside``)."""
        seconds, self._beside_seconds = self._beside_seconds, 0.0
        if seconds and code.whole is not None:
            code.whole.credit_beside(seconds)

    def _early_out(self, out, args):
        """After a remembered kernel ran a call before the translation (runtime/native/early.py): its result; or,
        when it raised, the error as the translated function's quick path gives it (the call translates now).
        Nothing is translated beside such calls: a job's C stretches (the source's parse) held the interpreter
        lock for up to 7 ms of a 0.03 ms call; the first call the kernel does not take (another signature,
        ``explain()``) translates, beside the plain function as any first call."""
        if isinstance(out, loop_tiers.Raised):
            code = self._compiled()
            return code.whole.early_failed(out, args, lambda: current().evaluate(code, args, {}, HOOKS))
        return out

    def _beside(self, args, kwargs):
        """A call before the function is translated: the plain function runs while the translation (and the
        lowering of the first call's signature) is a job beside the calls (runtime/beside.py), as the floor would
        run it (runtime/floor.py: the plain function is the answer); MISS when the call is to translate first:
        the job is done (or failed: the call translates again and raises its CompileError), or this function or
        call is not one for it (another runtime or device, arguments that are not plain values, a profile being
        recorded, ``debug``, PHYLANX_BESIDE=0 or PHYLANX_FLOOR=0, a function whose bytecode does not read as the
        translator takes it or has two loops (prescan.py), or one a tier wants translated first: PHYLANX_NATIVE=force,
        or a whole-function kernel of it kept before, which its first call loads: loop_tiers.translates_first; one
        that ran remembered signatures before its translation, runtime/native/early.py, runs beside for the others).
        An error of the plain run is the tree's ExecutionError for it (plain_errors.py), located once the
        translation is done."""
        job = self._job
        if job is None or job[0] != os.getpid():  # a forked child: the parent's job is not its own
            mode = beside_mode(self.__wrapped__)
            if not beside.enabled() or self._device != "cpu" or self.debug or mode is None or \
                    (self._early is None and loop_tiers.translates_first(self.__wrapped__)):
                self._job = False
                return MISS
            self._limited = mode == "limited"
            job = None
        if not runs_plain(current()) or not plain_values(args, kwargs) or \
                (self._limited and not _restorable(args, kwargs)):
            return MISS
        try:
            with beside.busy():  # before the job starts: the worker yields to this call from its first step
                if job is None:
                    with self._lock:
                        if self._code is not None:
                            return MISS
                        job = self._job
                        if job is None or job[0] != os.getpid():
                            job = self._job = (os.getpid(), beside.submit(self._compile, None if kwargs else args))
                if job[1].done():
                    return MISS
                t0 = time.perf_counter()
                if self._limited:
                    out = self._limited_run(args, kwargs, job[1], t0)
                    if out is MISS:
                        return MISS
                else:
                    out = self.__wrapped__(*args, **kwargs)
                self._beside_seconds += time.perf_counter() - t0
                return out
        except Exception as e:  # noqa: BLE001 - located as the tree's error for it, once translated
            error = e
        with beside.waiting():  # outside busy(): the job runs at full speed meanwhile
            failed = job[1].exception() is not None
        if failed:
            return MISS  # the translation failed: the call translates again and raises its CompileError
        err = self._code.locate(error)
        if err is None:
            return MISS  # raised before the function's body ran (a wrong call): nothing ran, the tree's error
        raise err from err.__cause__

    def _limited_run(self, args, kwargs, job, t0):
        """A first call of a loop in a loop beside its translation (prescan.beside_mode "limited"): the plain
        function, stopped once it has run ``floor.OSR_SECONDS`` and the translation can reach native code for these
        arguments; then its array arguments are put back (copied before it) and MISS says the call reruns through
        the tree, which switches the inner loop to native code part way through (whole.py). A short call is the
        plain function's, at its speed, with no translation or lowering in it (NPBench's symm, lu: 60-70 ms first
        calls that way against 7-8 ms plain)."""
        saved = [(a, a.copy()) for a in (*args, *kwargs.values()) if isinstance(a, np.ndarray) and a.flags.writeable]

        def worth():
            code = self._code
            return job.done() and code is not None and code.whole is not None and code.whole.goes_native(args)

        try:
            return floor.stop_after(floor.OSR_SECONDS, self.__wrapped__, args, kwargs, worth)
        except floor.RanTooLong:
            pass
        for a, copy in saved:
            a[...] = copy
        code = self._code  # (the stop waited for it: ``worth``)
        code.whole.stopped_beside(args, time.perf_counter() - t0)
        return MISS

    def lazy(self, *args, **kwargs):
        """A future of the call's result, returned at once (``.result()``, ``.done()``)."""
        rt = current()
        if self.disable:
            return rt.lazy(self.__wrapped__, *args, **kwargs)
        try:
            self._signature.bind(*args, **kwargs)  # a wrong call is a TypeError now, not inside the future
        except TypeError:
            # Python's own message: binding fails before the body runs, so nothing of the function executes.
            self.__wrapped__(*args, **kwargs)
            raise
        args, kwargs = self._inputs(args, kwargs)
        return rt.lazy(rt.evaluate, self._compiled(), args, kwargs, HOOKS)

    def __repr__(self):
        return f"<phylanx compiled function {self.__qualname__}>"

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    # ---- travelling to other processes (Dask workers): see pickling.py -------------------------------------
    def __reduce__(self):
        """By reference (``module.qualname``) when importable, else by value: the plain function, the options
        and its file's source; the receiving process compiles on the first call."""
        name = pickling.reference_name(self)
        return name if name is not None else pickling.reduce_by_value(self)

    def __dask_tokenize__(self):
        """The same token in every process for the same function (bytecode, closure, defaults) and options."""
        return pickling.token(self)


def _restorable(args, kwargs) -> bool:
    """Whether a stopped run's arguments can be put back (``_limited_run``): arrays (copied) of values, not of
    objects (a copy shares those), and immutable scalars; nothing else a run could change (a list, a dict)."""
    return all(isinstance(a, SCALARS) or (isinstance(a, np.ndarray) and not a.dtype.hasobject)
               for a in (*args, *kwargs.values()))


def compile(fn=None, **options):  # noqa: A001 - the public name the design card gives
    """``@compile`` or ``@compile(optimize=..., disable=..., debug=..., fuse=...)``."""
    if fn is None:
        return lambda f: CompiledFunction(f, **options)
    return CompiledFunction(fn, **options)


_on_the_fly: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _compile_callable(fn):
    """Compile a function value met at run time (passed as an argument) to its ProgramCode."""
    if isinstance(fn, CompiledFunction):
        return fn._compile()
    if isinstance(fn, types.FunctionType):
        compiled = _on_the_fly.get(fn)
        if compiled is None:
            compiled = _on_the_fly[fn] = CompiledFunction(fn)
        return compiled._compile()
    return None


def _harmless(fn) -> bool:
    """Whether a function passed to a compiled one may run in its plain run (prescan.harmless: runtime/floor.py)."""
    return harmless(fn.__wrapped__ if isinstance(fn, CompiledFunction) else fn)


HOOKS = {"compile": _compile_callable, "harmless": _harmless}


# ---- programs built by other parts of the frontend (px.grad's traced trees) -------------------------------
def optimize_program(program):
    """The compile pipeline on a Program that did not come from source (fusion on unless PHYLANX_FUSE=0)."""
    return _finish(run_pipeline(program, _passes(_fuse_default())))


def program_code(program) -> ProgramCode:
    return ProgramCode(program, {})


def evaluate_program(code: ProgramCode, args: tuple):
    """Run ``code``'s entry on ``args`` on the current runtime, like a compiled function's call."""
    return current().evaluate(code, args, {}, HOOKS)
