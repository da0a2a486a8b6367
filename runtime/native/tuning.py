"""Which variant of a native kernel runs: the sequential one, or the parallel one (runtime/native/parallel.py),
chosen by measuring both on the program's own calls, as Phylanx chose between inline and task by measuring.

Both variants give the same bits (parallel.py proves the iterations independent), so the choice is only about
time: a parallel region costs a few microseconds to start and its loops may be too short to pay for it. The first
calls alternate between the two; the parallel one is kept when its median is under PARALLEL_GAIN of the
sequential one's. A call whose arrays overlap (the same array passed twice: iterations would no longer be
independent), a call while another parallel kernel runs in this process (no oversubscription, and Numba's
workqueue layer must not be entered from two threads) and any call in a forked child (GNU OpenMP does not survive
fork) run the sequential variant."""
from __future__ import annotations

import functools
import os
import statistics
import threading
import time

import numpy as np

MIN_SECONDS = 20e-6  # a sequential call shorter than this is not measured further: threads cannot pay
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


def prepare(variant, sig, load, force: bool, decided=None, busy=lambda: False):
    """(Choice, None) for a kernel with a parallel ``variant`` (parallel.Variant or None) compiled for ``sig`` by
    ``load(source)`` (the module), else (None, why not). ``decided()`` is called once the choice is made; no call
    is measured while ``busy()`` (a compile in the background takes a core)."""
    if variant is None:
        return None, None
    n = threads()
    if n < 2:
        return None, "one thread"
    t0 = time.perf_counter()
    try:
        module = load(variant.source)
        module.kernel.compile(sig)
    except Exception as e:  # noqa: BLE001 - the sequential kernel stays; say why in explain()
        return None, f"Numba: {str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__}"
    return Choice(module.kernel, variant, n, time.perf_counter() - t0, force, decided, busy), None


class Choice:
    """The parallel variant of one kernel signature and whether it runs: ``runner(seq)`` is the callable a call
    through ``seq`` (the caller's sequential kernel: an entry point or the dispatcher) uses instead."""

    def __init__(self, par, variant, n, compile_seconds, force, decided, busy):
        self.par, self.variant, self.threads = par, variant, n
        self.compile_seconds = compile_seconds
        self.state = "parallel" if force else "measuring"
        self.forced = force
        self.times: tuple = ([], [])  # sequential, parallel
        self.decided, self.busy = decided, busy
        self.runs = 0  # calls that ran the parallel variant

    def runner(self, seq):
        if self.state == "sequential":
            return seq
        return functools.partial(self.run if self.state == "parallel" else self.measure, seq)

    def usable(self, args) -> bool:
        """Whether this call's arrays let the parallel loops run: no array they store into overlaps another."""
        if _forked[0]:
            return False
        arrays = [a for a in args if type(a) is np.ndarray]
        for i in self.variant.written:
            w = args[i]
            if sum(b is w for b in arrays) > 1 or any(b is not w and np.may_share_memory(w, b) for b in arrays):
                return False
        return True

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
        if len(seq_t) == 1 and seq_t[0] < MIN_SECONDS:
            self._choose("sequential")
        elif len(par_t) >= ROUNDS and len(seq_t) >= ROUNDS:
            faster = statistics.median(par_t) < PARALLEL_GAIN * statistics.median(seq_t)
            self._choose("parallel" if faster else "sequential")
        return out

    def _choose(self, state):
        self.state = state
        if self.decided is not None:
            self.decided()

    def describe(self) -> str:
        loops = len(self.variant.loops)
        what = f"{loops} loop{'s' if loops > 1 else ''} may run on {self.threads} threads"
        seq_t, par_t = self.times
        timing = ""
        if seq_t and par_t:
            timing = (f": {statistics.median(par_t) * 1e6:.0f} us against "
                      f"{statistics.median(seq_t) * 1e6:.0f} us sequential")
        elif seq_t:
            timing = f": {seq_t[0] * 1e6:.1f} us a call is too short for threads"
        if self.state == "measuring":
            return f"{what}, measuring"
        if self.forced:
            return f"{what}, in parallel (forced)"
        return f"{what}, {'in parallel' if self.state == 'parallel' else 'sequential'} chosen{timing}"
