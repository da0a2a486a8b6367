"""Which variant of a native kernel runs: the sequential one, or the parallel one (runtime/native/parallel.py),
chosen by measuring both on the program's own calls, as Phylanx chose between inline and task by measuring.

Both variants give the same bits (parallel.py proves the iterations independent), so the choice is only about
time: a parallel region costs a few microseconds to start and its loops may be too short to pay for it. A
kernel's first call after it went native is timed: under MIN_SECONDS it stays sequential and its parallel variant
is never compiled; else that variant is compiled in the background (the sequential kernel runs meanwhile), then
calls alternate between the two and the parallel one is kept when its median is under PARALLEL_GAIN of the
sequential one's. A call whose arrays overlap (the same array passed twice: iterations would no longer be
independent), a call while another parallel kernel runs in this process (no oversubscription, and Numba's
workqueue layer must not be entered from two threads) and any call in a forked child (GNU OpenMP does not survive
fork) run the sequential variant. ``PHYLANX_NATIVE=force`` compiles it at once and always runs it."""
from __future__ import annotations

import functools
import os
import statistics
import threading
import time
import warnings

import numpy as np

from phylanx_py.errors import UnsafeCacheError

MIN_SECONDS = 20e-6  # a sequential call shorter than this stays sequential: threads cannot pay
ROUNDS = 5  # calls of each variant measured before choosing
PARALLEL_GAIN = 0.85  # the parallel variant is kept when its median time is under this fraction of sequential's
_lock = threading.Lock()  # one parallel kernel at a time in this process
_forked = [False]


def _after_fork():
    _forked[0] = True


os.register_at_fork(after_in_child=_after_fork)


def threads() -> int:
    """Threads a parallel kernel would use, 1 when it cannot run here."""
    import numba

    return 1 if _forked[0] else numba.config.NUMBA_NUM_THREADS


def _distinct_elements(a) -> bool:
    """Whether no two elements of ``a`` share memory (a stride of 0, or strides that interleave, make them):
    dimensions sorted by stride, each must step past the whole extent of the smaller ones."""
    if a.flags.c_contiguous or a.flags.f_contiguous:
        return True
    extent = a.itemsize
    for stride, n in sorted((abs(s), n) for s, n in zip(a.strides, a.shape) if n > 1):
        if stride < extent:
            return False
        extent = stride * n
    return True


class Choice:
    """The parallel variant of one kernel signature and whether it runs: ``runner(seq)`` is the callable a call
    through ``seq`` (the caller's sequential kernel: an entry point or the dispatcher) uses instead.

    ``variant`` (parallel.Variant) is compiled for ``sig`` by ``load(source)`` (its module), at once when
    ``force``, else by ``background(fn)`` once a call proved long enough. ``decided()`` is called whenever the
    callable to use changes; no call is measured while ``busy()`` (a compile in the background takes a core)."""

    def __init__(self, variant, sig, load, force, decided=None, busy=lambda: False, background=None, warm=None):
        self.variant, self.sig, self.load, self.warm = variant, sig, load, warm
        self.threads = threads()
        self.forced = force
        self.decided, self.busy, self.background = decided, busy, background
        self.par, self.error, self.refused, self.compile_seconds = None, None, None, 0.0
        self.overflow = None
        # probing -> compiling -> measuring -> parallel | sequential (or failed; refused: the kernel cache's refusal
        # is raised at the next call, then probing again)
        self.state = "probing"
        self.times: tuple = ([], [])  # sequential, parallel
        self.runs = 0  # calls that ran the parallel variant
        self._probing = threading.Lock()
        if force:
            self.build()

    def build(self):
        from numba.core.errors import NumbaParallelSafetyWarning, NumbaPerformanceWarning

        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                # Numba's own doubt about a prange loop (a variable it finds racy) fails the variant: never run it
                warnings.simplefilter("error", NumbaParallelSafetyWarning)
                warnings.simplefilter("ignore", NumbaPerformanceWarning)  # np.dot on a strided slice (loop.py)
                if self.warm is not None:  # in the compile process first, when in the background (loop.py)
                    self.warm(self.variant.source)
                module = self.load(self.variant.source)
                module.kernel.compile(self.sig)
            # the variant's module has its own _Overflow class (a failed nest test raises it: tiering.undone)
            self.par, self.overflow = module.kernel, module._Overflow
            state = "parallel" if self.forced else "measuring"
        except UnsafeCacheError as e:  # the folder turned unsafe since the sequential kernel loaded from it
            self.refused, state = e, "refused"
        except Exception as e:  # noqa: BLE001 - the sequential kernel stays; explain() says why
            first = str(e).strip().splitlines()
            self.error, state = f"Numba: {first[0][:160] if first else type(e).__name__}", "failed"
        self.compile_seconds += time.perf_counter() - t0
        self._switch(state)

    def runner(self, seq):
        handler = {"probing": self.probe, "measuring": self.measure, "parallel": self.run,
                   "refused": self.refuse}.get(self.state)
        return seq if handler is None else functools.partial(handler, seq)

    def usable(self, args) -> bool:
        """Whether this call's arrays let the parallel loops run: no array they store into overlaps another."""
        if _forked[0]:
            return False
        arrays = [a for a in args if type(a) is np.ndarray]
        for i in self.variant.written:
            w = args[i]
            if sum(b is w for b in arrays) > 1 or any(b is not w and np.may_share_memory(w, b) for b in arrays) \
                    or not _distinct_elements(w):
                return False
        return True

    def probe(self, seq, *args):
        t0 = time.perf_counter()
        out = seq(*args)
        dt = time.perf_counter() - t0
        if self.busy():
            return out
        with self._probing:  # two threads probing at once start one build
            if self.state != "probing":
                return out
            self.times[0].append(dt)
            if dt < MIN_SECONDS:
                self._switch("sequential")
            elif self.background is not None:
                self._switch("compiling")
                self.background(self.build)
        return out

    def refuse(self, seq, *args):
        """The call after the parallel variant's compile met the kernel cache's refusal: raise it (before any kernel
        runs), as every tier does; once, then the variant is probed again."""
        err, self.refused = self.refused, None
        if err is None:  # another thread raised it
            return seq(*args)
        self._switch("probing")
        raise err

    def run(self, seq, *args):
        if not _lock.acquire(blocking=False):
            return seq(*args)
        try:
            if not self.usable(args):
                return seq(*args)
            self.runs += 1
            return self.par(*args)
        finally:
            _lock.release()

    def measure(self, seq, *args):
        if self.busy():
            return seq(*args)
        seq_t, par_t = self.times
        if len(par_t) < len(seq_t) and self.usable(args) and _lock.acquire(blocking=False):
            try:
                self.runs += 1
                t0 = time.perf_counter()
                out = self.par(*args)
                par_t.append(time.perf_counter() - t0)
            finally:
                _lock.release()
        else:
            t0 = time.perf_counter()
            out = seq(*args)
            seq_t.append(time.perf_counter() - t0)
        if self.state == "measuring" and len(par_t) >= ROUNDS and len(seq_t) >= ROUNDS:
            faster = statistics.median(par_t) < PARALLEL_GAIN * statistics.median(seq_t)
            self._switch("parallel" if faster else "sequential")
        return out

    def _switch(self, state):
        self.state = state
        if self.decided is not None:
            self.decided()

    def describe(self) -> str:
        loops = len(self.variant.loops)
        what = f"{loops} loop{'s' if loops > 1 else ''} may run on {self.threads} threads"
        seq_t, par_t = self.times
        if self.state == "refused":
            return f"{what}, sequential until the next call, which raises the kernel cache's refusal"
        if self.state == "failed":
            return f"{what}, sequential: its parallel variant failed to compile ({self.error})"
        if self.forced:
            return f"{what}, in parallel (forced)"
        if self.state in ("probing", "compiling", "measuring"):
            return f"{what}, {self.state}"
        if par_t:
            timing = (f": {statistics.median(par_t) * 1e6:.0f} us against "
                      f"{statistics.median(seq_t) * 1e6:.0f} us sequential")
        else:
            timing = f": {seq_t[0] * 1e6:.1f} us a call is too short for threads"
        return f"{what}, {'in parallel' if self.state == 'parallel' else 'sequential'} chosen{timing}"
