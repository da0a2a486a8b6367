"""One evaluation of a compiled function: the direct-execution policy, waits, ordering of effects, errors.

Policy ("direct execution", after Phylanx): a pure primitive runs *inline* in the evaluating thread when all its
inputs are already values and no array input has more than ``inline_elements`` elements (default 65,536: below
that a NumPy call costs less than handing it to a pool, ~20-50 µs). Otherwise it becomes a task on the executor,
started when its input futures complete. Each call site measures its kernel's time (Phylanx's adaptive rule):
once a site has run ``ADAPT_AFTER`` times at a mean under ``CHEAP_SECONDS`` (200 µs), it runs inline even on
large inputs, and on futures that are already done, since a task would cost more than the work. So do primitives
whose kernel spreads a large input over every core itself (``Primitive.parallel``: the fused kernels) on a local
pool while no task is in flight, where a task would only add hand-offs between threads. Effectful
primitives (``a[i] = v``, ``x += y``, ``list.append``, random
draws, ``print``) run inline in program order, after the pending tasks that might still read what they change.
"""
from __future__ import annotations

import itertools
import threading
import time

import numpy as np
from phylanx_py.primitives import IO, MUTATES, RAISES, STATE, backends
from phylanx_py.primitives import choose as choose_kernel
from phylanx_py.primitives import lookup as lookup_primitive

from phylanx_py.errors import RAISED_AS_IS, ExecutionError

from . import kinds, profiling
from .executors import FUTURES, substitute

INLINE_ELEMENTS = 1 << 16
CHEAP_SECONDS = 200e-6
ADAPT_AFTER = 3
_CONTAINERS = (list, tuple, dict)
_MISSING = object()


def run_primitive(prim, loc, args, kwargs):
    """Run ``prim``'s kernel; a failure becomes an ExecutionError naming the user's line (cause chained)."""
    kernel = prim.kernel if prim.numba_kernel is None else choose_kernel(prim, args, kwargs)
    if backends.DEVICE_TYPES and backends.on_device(args):
        kernel = backends.device_kernel(prim)  # CuPy arrays in: CuPy's kernel of the same primitive
    try:
        return kernel(*args, **kwargs) if kwargs else kernel(*args)
    except RAISED_AS_IS:
        raise
    except Exception as e:
        err = ExecutionError.from_exception(e, loc, prim.label)
        raise err from err.__cause__


class CallSite:
    """A primitive at one place in the user's code: what the executor runs, and how long it takes there.

    Picklable (the primitive by name) so other processes can run it; the timings stay with this process."""

    __slots__ = ("prim", "loc", "calls", "seconds")

    def __init__(self, prim, loc):
        self.prim, self.loc = prim, loc
        self.calls, self.seconds = 0, 0.0

    def __call__(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return run_primitive(self.prim, self.loc, args, kwargs)
        finally:
            # Unlocked updates from pool threads may lose a count now and then; the mean stays right.
            self.seconds += time.perf_counter() - t0
            self.calls += 1

    @property
    def cheap(self) -> bool:
        calls = self.calls
        return calls >= ADAPT_AFTER and self.seconds < calls * CHEAP_SECONDS

    def __reduce__(self):
        return (_site_by_name, (self.prim.name, self.loc))

    def __repr__(self):
        return f"<call site {self.prim.label} at {self.loc}>"


def _site_by_name(name, loc):
    return CallSite(lookup_primitive(name), loc)


def _has_future(value) -> bool:
    """Is there a future in ``value`` (top level or nested in list/tuple/dict)? Stops at the first one."""
    t = type(value)
    if t in FUTURES:
        return True
    if t is dict:
        value = value.values()
    elif t is not list and t is not tuple:
        return False
    for v in value:
        tv = type(v)
        if tv in FUTURES or (tv in _CONTAINERS and _has_future(v)):
            return True
    return False


def _mutable_ids(args) -> tuple:
    """ids of the lists/dicts/sets among a task's inputs (top level and one level in), for targeted waits."""
    ids = []
    for a in args:
        t = type(a)
        if t is list or t is dict or t is set:
            ids.append(id(a))
            for v in (a.values() if t is dict else a):
                if type(v) in (list, dict, set):
                    ids.append(id(v))
    return tuple(ids)


class Evaluation:
    """State of one top-level call: its runtime, the tasks still in flight, the first failure."""

    def __init__(self, runtime, hooks=None):
        self.runtime = runtime
        self.executor = runtime.executor
        self.inline_elements = runtime.inline_elements
        self.hooks = hooks or {}
        self.pending: set = set()
        self.refs: dict[int, set] = {}
        self.failures: list[tuple[int, BaseException]] = []
        self._seq = itertools.count()
        self.submitted = 0
        self._lock = threading.Lock()  # done-callbacks run on pool threads
        self._seqs: dict = {}  # remote futures: (sequence number, mutable input ids), see _track
        # Remote results fetched to this process, by future: a value fetched twice is the same object, and
        # an in-place change made here (``b[0] = 1`` on a remote ``b``) is what later reads see.
        self.memo: dict = {}
        self.shares = runtime.executor.shares_results
        backends.refresh()
        self.profile = profiling.active()  # a recorder while inside ``px.profile()``, else None
        self.profile_keys: dict = {}  # remote task key -> (site, dependency keys), for the profile
        self._prune_at = 64
        self.kinds_used: set = set()  # value kinds (runtime/kinds.py) whose calls ran: told of later tasks

    # ---- primitive calls ---------------------------------------------------------------------------------
    def call(self, site, args, kwargs=None):
        """Evaluate one primitive call at ``site``: an inline value, or a Future of it."""
        prim = site.prim
        kwargs = kwargs or {}
        if prim.effect is not None or "out" in kwargs:
            return self._effect(site, args, kwargs)
        mode = prim.resolve
        if mode == "none":
            return run_primitive(prim, site.loc, args, kwargs)
        if prim.local:
            return site(*self._fetch(tuple(args)), **kwargs)
        if kinds.TYPES:
            kind = kinds.kind_in(args)
            if kind is not None:
                return kind.call(self, site, args, kwargs)
        if self.memo:
            args = tuple(self.memo.get(a, a) if type(a) in FUTURES else a for a in args)
        limit = self.inline_elements
        # a parallel kernel runs here only when no task is in flight: one that is might fail first (its error is
        # the one Python raises) or be independent work the pool would overlap with this kernel
        cheap = prim.cheap or site.cheap or (prim.parallel and self.shares and not self.pending)
        waited = False
        for a in args:
            t = type(a)
            if t in FUTURES:
                if not (cheap and a.done()):
                    return self.submit(site, args, kwargs)
                waited = True
            elif t is np.ndarray:
                if a.size > limit and not cheap:
                    return self.submit(site, args, kwargs)
            elif mode == "deep" and t in _CONTAINERS and (len(a) > limit or _has_future(a)):
                return self.submit(site, args, kwargs)
        if kwargs and _has_future(kwargs):
            return self.submit(site, args, kwargs)
        if waited:
            args = self._fetch(tuple(args))
        if self.profile is not None:
            return self._profiled_inline(site, args, kwargs)
        return site(*args, **kwargs)

    def run_inline(self, site, args, kwargs):
        """Run the call here, now (timed when profiling)."""
        if self.profile is not None:
            return self._profiled_inline(site, args, kwargs)
        return run_primitive(site.prim, site.loc, args, kwargs)

    def _profiled_inline(self, site, args, kwargs):
        t0 = time.perf_counter()
        result = site(*args, **kwargs)
        self.profile.record(site.loc, site.prim.label, time.perf_counter() - t0, "inline",
                            threading.current_thread().name, profiling.nbytes_of(result), start=t0)
        return result

    def _fetch(self, args: tuple) -> tuple:
        """``args`` with futures (also nested) replaced by their values; remote ones fetched once (memo)."""
        if self.shares:
            return self.executor.gather(args)
        memo = self.memo
        fetched = self.executor.gather(tuple(memo.get(a, a) if type(a) in FUTURES else a for a in args))
        for a, v in zip(args, fetched):
            if type(a) in FUTURES:
                memo[a] = v
        return fetched

    def submit(self, site, args, kwargs):
        if self.profile is not None and self.executor.callbacks:
            site = profiling.ProfiledSite(site, self.profile)
        fut = self.executor.submit(site, tuple(args), kwargs, self)
        self._track(fut, _mutable_ids(args))
        for kind in self.kinds_used:
            kind.submitted(self, fut, site, args, kwargs)
        return fut

    def _track(self, fut, ids):
        seq = next(self._seq)
        self.submitted = seq + 1
        with self._lock:
            self.pending.add(fut)
            for i in ids:
                self.refs.setdefault(i, set()).add(fut)
        if not self.executor.callbacks:
            # Remote futures: no done-callbacks (they would run on threads of the client's own); finished
            # ones are pruned here now and then, so they do not pin their results on the cluster.
            self._seqs[fut] = (seq, ids)
            if len(self.pending) >= self._prune_at:
                self.prune()
            return

        def done(f, seq=seq, ids=ids):
            with self._lock:
                self._forget(f, seq, ids)

        fut.add_done_callback(done)

    def _forget(self, f, seq, ids):
        """Drop a finished future from what is pending; keep it if it failed. The caller holds the lock."""
        self.pending.discard(f)
        for i in ids:
            s = self.refs.get(i)
            if s is not None:
                s.discard(f)
                if not s:  # no pending task reads that object: forget its id (a long loop makes many)
                    del self.refs[i]
        if self.executor.failed(f):
            self.failures.append((seq, f))

    def _effect(self, site, args, kwargs):
        prim = site.prim
        # Python stops at a failing line: no effect may happen after a statement that failed in a task.
        # Output and random state are seen outside, and a raise must not overtake an earlier line's failure, so
        # they wait for every task before them; in-place changes wait for the tasks that read their target (below)
        # and stop at failures already known.
        if prim.effect == IO or prim.effect == STATE or prim.effect == RAISES:
            self.wait_all()
        elif self.failures:
            self.raise_failure()
        mode = prim.resolve
        if mode == "deep":
            if _has_future(args):  # most effects (``A[i, j] = v``) have none: skip the walk and the copy
                args = self._fetch(tuple(args))
            if kwargs and _has_future(kwargs):
                kwargs = dict(zip(kwargs, self._fetch(tuple(kwargs.values()))))
        elif mode == "shallow":
            args = tuple(self.wait(a) for a in args)
            kwargs = {k: self.wait(v) for k, v in kwargs.items()}
        elif mode == "receiver" and args:
            args = (self.wait(args[0]),) + tuple(args[1:])
        if prim.effect == MUTATES or "out" in kwargs:
            target = kwargs.get("out", args[0] if args else None)
            self.barrier(target)
        if kinds.TYPES:
            kind = kinds.kind_in(args)
            if kind is not None:
                return kind.call(self, site, args, kwargs)
        return self.run_inline(site, args, kwargs)

    def prune(self):
        """Forget finished remote futures (recording failures), as done-callbacks do for local ones."""
        with self._lock:
            for f in [f for f in self.pending if f.done()]:
                self._forget(f, *self._seqs.pop(f, (0, ())))
            self._prune_at = max(64, 2 * len(self.pending))

    def barrier(self, obj):
        """Wait for the pending tasks that may read ``obj`` before it changes in place."""
        if not self.pending:
            return
        t = type(obj)
        if isinstance(obj, np.ndarray) or isinstance(obj, tuple):
            # Views share memory with their base, so any pending task may read this array: wait for all.
            self.wait_all(raise_errors=False)
        elif t is list or t is dict or t is set:
            with self._lock:
                waiting = list(self.refs.get(id(obj), ()))
            self.executor.wait(waiting)  # errors surface at the end, in program order

    # ---- waiting -----------------------------------------------------------------------------------------
    def wait(self, value):
        """The value of ``value``, waiting if it is a future (data-dependent control flow, final results)."""
        if type(value) not in FUTURES:
            return value
        if self.shares:
            return self.executor.result(value)
        hit = self.memo.get(value, _MISSING)
        if hit is _MISSING:
            hit = self.memo[value] = self.executor.result(value)
        return hit

    def resolve(self, value):
        """``value`` with futures replaced everywhere (lists/dicts in place)."""
        if type(value) in FUTURES:
            return self.wait(value)
        if self.memo:  # values already fetched (and perhaps changed here) replace their futures first
            value = substitute(value, lambda f: self.memo.get(f, f))
        return self.executor.gather(value)

    def wait_all(self, raise_errors=True):
        while True:
            with self._lock:
                waiting = list(self.pending)
            if not waiting:
                break
            self.executor.wait(waiting)
            if not self.executor.callbacks:
                self.prune()
        if raise_errors:
            self.raise_failure()

    def raise_failure(self):
        if not self.executor.callbacks:
            self.prune()
        if self.failures:
            _, fut = min(self.failures, key=lambda p: p[0])
            self.executor.result(fut)  # raises the task's error (the earliest in program order)

    def finish(self, result):
        """The final result: every future resolved, every task finished, the earliest failure raised.

        Values of other kinds (tiled arrays) in the result are computed and stay on the workers (a failing tile
        raises here)."""
        try:
            value = self.resolve(result)
            kinds.settle(value, self.executor)
        except BaseException:
            self.wait_all(raise_errors=False)
            self.raise_failure()
            raise
        self.wait_all()
        return value
