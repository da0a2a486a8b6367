"""The Dask distributed runtime: task-sized primitive calls become ``client.submit`` on real workers.

Futures flow from node to node without a trip through the client: a task's arguments are the upstream
``distributed.Future`` objects, so Dask tracks dependencies, placement and lineage. The client only waits for
data-dependent ``if``/``while`` conditions, loop iterables, effects on remote values and the final result.
Cheap work runs inline on the client under the same direct-execution rule as the local runtime
(runtime/evaluation.py): values (not futures) with no array over ``inline_elements`` elements; here the default
is ``DASK_INLINE_ELEMENTS`` (2**20, 8 MB of float64), since a remote task costs 2-10 ms of scheduling and
transfer (REFERENCES.md), more than NumPy needs for a pass over a megabyte-sized array on the client.

Kernels travel by name: a CallSite pickles as (primitive name, source location) and the worker looks the
primitive up in its own registry, so workers need phylanx-py installed (the same version: checked on connect).

NumPy inputs larger than ``UPLOAD_BYTES`` are sent once per call as a task that returns them, not with
``Client.scatter``: the data then lives in the task's specification on the scheduler, so a worker that dies with
it does not lose it: Dask recomputes it, like any other lost result, from lineage.
"""
from __future__ import annotations

import contextlib
import os
import time
import uuid
import warnings

from phylanx_py.errors import ClusterError

from . import dask_faults
from .alignment import aligned, aligned_values
from .base import Runtime
from .dask_cluster import DaskCluster
from .dask_connect import (  # noqa: F401 - check_workers, WORKER_MALLOC_ENV: where cli.py, benchmarks, users find them
    WORKER_MALLOC_ENV,
    check_address,
    check_workers,
    connect,
    start_local_cluster,
)
from .dask_profile import DaskProfiling
from .executors import FUTURES, ClosedError, closed_error, collect, substitute

UPLOAD_BYTES = 1 << 20
DASK_INLINE_ELEMENTS = 1 << 20
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_NO_WORKER_TIMEOUT = 60.0
_POLL_SECONDS = 1.0
HOMES_KEPT = 1024  # placements remembered before released ones are dropped (see _remember_home)

def _materialize(x):
    return aligned(x)


def _view(base, dtype, shape, strides, offset):
    """The same view of ``base`` the client had (``X.T``, a slice): no data moves."""
    import numpy as np

    return np.ndarray(shape, np.dtype(dtype), buffer=base, offset=offset, strides=strides)


def apply_site(site, args, kwargs):
    """What workers run: the call site's kernel on the (already fetched) arguments."""
    return site(*[aligned(a) for a in args], **kwargs)


# Called with the executor when it closes, before what it owns: modules that keep connections of their own per
# executor (segments/service.py) register here when imported, as loop tiers do in loop_tiers.py
ON_CLOSE: list = []


class DaskExecutor(DaskProfiling, DaskCluster):
    """Submits call sites to a ``distributed.Client``; waits with a watchdog so nothing hangs. Its cluster
    operations (for tiled arrays) are in dask_cluster.py, its profiles from the task stream in dask_profile.py."""

    name = "dask"
    callbacks = False  # see Evaluation._track
    shares_results = False  # each fetch deserializes a new copy: Evaluation.memo keeps one

    def __init__(self, client, *, no_worker_timeout: float = DEFAULT_NO_WORKER_TIMEOUT, owned=(), runtime_name=None):
        import distributed

        self.future_types = (distributed.Future,)
        FUTURES.update(self.future_types)
        self._distributed = distributed
        self.client = client
        self.no_worker_timeout = no_worker_timeout
        self._owned = list(owned)  # what closing this executor closes (a client and cluster it started)
        self._homes: dict = {}  # task key -> (worker it was placed on, bytes of the upload it derives from)
        self._homes_cap = 0  # HOMES_KEPT at the first entry (read then, so a test can lower it)
        self._no_workers_since: float | None = None  # see _watch
        self._watched = time.monotonic()  # when _guard last looked at the workers
        self.lost: str | None = None  # what happened when the scheduler connection was lost (then: closed)
        self._closing = False  # close() was called: a closed client is then no news
        self.runtime_name = runtime_name or f"dask {client.scheduler.address}"  # for the closed runtime's error

    @property
    def workers(self) -> int:
        self.check_alive()
        return len(self.client.nthreads())

    # ---- failures of the cluster (runtime/dask_faults.py) --------------------------------------------
    def lost_now(self) -> str | None:
        """What happened to the scheduler connection, once it is gone (remembered: it does not come back)."""
        if self.lost is None and not self._closing:
            self.lost = dask_faults.scheduler_lost(self.client)
        return self.lost

    @property
    def closed_by_user(self) -> bool:
        """Closed by ``close()`` (its runtime's), not by the loss of the scheduler."""
        return self._closing and self.lost is None

    def check_alive(self):
        """At once: ClusterError when the scheduler connection is gone (nothing submitted now could finish), the
        closed runtime's RuntimeError when it was closed."""
        if self.lost_now() is not None:
            raise ClusterError(self.lost)
        if self._closing:
            raise closed_error(self.runtime_name)

    def cluster_error(self, exc):
        """The error that ``exc`` stands for: a ClusterError (see dask_faults), the closed runtime's RuntimeError
        when it was closed meanwhile (its client closed under the call), or None for a kernel's own error."""
        if self.closed_by_user:
            if isinstance(exc, ClosedError):
                return exc
            return closed_error(self.runtime_name) if dask_faults.cluster_error(exc, self.client) else None
        err = dask_faults.cluster_error(exc, self.client)
        self.lost_now()
        return err

    @contextlib.contextmanager
    def _guard(self):
        self.check_alive()
        now = time.monotonic()
        if now - self._watched > _POLL_SECONDS:  # also while a call only submits (a loop issued ahead)
            self._watched = now
            self._watch()
        try:
            yield
        except ClusterError:
            raise
        except BaseException as e:
            err = self.cluster_error(e)
            if err is None or err is e:
                raise
            raise err from e

    # ---- submitting ----------------------------------------------------------------------------------
    def _upload(self, value, ev):
        """Large local arrays become futures once per evaluation (kept recomputable, see module doc).

        A view (``X.T``, ``X[:, :5]``) of a large array is rebuilt on the worker from the uploaded base, so
        ``X`` and ``X.T`` in a loop send ``X`` once."""
        import numpy as np

        t = type(value)
        if hasattr(value, "remote") and t.__name__ == "Deferred":
            return value.remote()  # a batched tile reduction: its Dask future, submitted now
        if t is np.ndarray and value.nbytes > UPLOAD_BYTES:
            uploads = ev.__dict__.setdefault("uploads", {}) if ev is not None else {}
            base = value
            while isinstance(base.base, np.ndarray):
                base = base.base
            if not base.flags.c_contiguous:
                base = value  # a view we cannot rebuild from a buffer: send it as it is
            hit = uploads.get(id(base))
            if hit is None or hit[0] is not base:
                # one call's inputs go to one worker (they meet in its tasks); calls take turns over workers
                home = ev.__dict__.setdefault("home", self._next_home()) if ev is not None else self._next_home()
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message=".*[Ll]arge (graph|object).*")
                    fut = self.client.submit(_materialize, base, key=f"input-{uuid.uuid4().hex}", pure=False,
                                             **self._placement(home))
                self._remember_home(fut.key, (home, base.nbytes))
                hit = uploads[id(base)] = (base, fut)
            if value is base:
                return hit[1]
            offset = value.__array_interface__["data"][0] - base.__array_interface__["data"][0]
            home = self._homes.get(hit[1].key, (None, 0))
            view = self.client.submit(_view, hit[1], value.dtype.str, value.shape, value.strides, offset,
                                      key=f"view-{uuid.uuid4().hex}", pure=False, **self._placement(home[0]))
            self._remember_home(view.key, home)
            return view
        if t is list or t is tuple:
            return t(self._upload(v, ev) for v in value)
        if t is dict:
            return {k: self._upload(v, ev) for k, v in value.items()}
        return value

    def submit(self, site, args, kwargs, ev=None):
        with self._guard():
            return self._submit(site, args, kwargs, ev)

    def _submit(self, site, args, kwargs, ev=None):
        loc = site.loc
        key = f"{site.prim.label}@{os.path.basename(loc.filename)}:{loc.lineno}-{uuid.uuid4().hex}"
        args = tuple(self._upload(a, ev) for a in args)
        kwargs = {k: self._upload(v, ev) for k, v in kwargs.items()}
        if ev is not None and ev.profile is not None:
            self.note_task(ev, key, site, (args, kwargs))
        home = self._home_of((args, kwargs))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*[Ll]arge graph.*")
            fut = self.client.submit(apply_site, site, args, kwargs, key=key, pure=False, **self._placement(home[0]))
        if home[0] is not None:
            self._remember_home(key, home)
        return fut

    # ---- placement -----------------------------------------------------------------------------------
    # A task goes where its largest input lives (an uploaded array, or what was computed from one), so a
    # chain over a big NumPy input stays on the worker that holds it instead of copying it between workers
    # (measured: a 2e6x20 LRA moved 640 MB per call and ran 3x slower without this). The placement is a
    # preference (allow_other_workers): when that worker dies, Dask runs the task elsewhere.
    def _next_home(self):
        workers = self.worker_addresses()
        if not workers:
            return None
        self._turn = (getattr(self, "_turn", -1) + 1) % len(workers)
        return workers[self._turn]

    def _home_of(self, value):
        deps: list = []
        collect(value, deps)
        best = (None, 0)
        for d in deps:
            home = self._homes.get(getattr(d, "key", None))
            if home is not None and home[1] >= best[1]:
                best = home
        return best

    def _remember_home(self, key, home):
        """Where a task went, while its future lives: entries of released keys are dropped when the table has
        doubled (so it holds what the client still refers to, not one entry per task ever submitted)."""
        self._homes[key] = home
        if len(self._homes) > max(self._homes_cap, HOMES_KEPT):
            held = self.client.refcount
            self._homes = {k: v for k, v in self._homes.items() if held.get(k)}
            self._homes_cap = max(HOMES_KEPT, 2 * len(self._homes))

    @staticmethod
    def _placement(home) -> dict:
        return {} if home is None else {"workers": [home], "allow_other_workers": True}

    # ---- waiting -------------------------------------------------------------------------------------
    def _watch(self):
        """Raise if the cluster has had no workers for ``no_worker_timeout`` seconds. The clock belongs to the
        executor, not to one wait: the waits that follow a failure (for the call's other tasks) do not start it
        again, so the error comes after ``no_worker_timeout`` seconds, not a multiple of it."""
        self.check_alive()
        if self.workers:
            self._no_workers_since = None
            return
        now = time.monotonic()
        if self._no_workers_since is None:
            self._no_workers_since = now
        elif now - self._no_workers_since >= self.no_worker_timeout:
            raise ClusterError(f"the Dask cluster has had no workers for {self.no_worker_timeout:g} s; "
                               "the computation cannot finish (start workers, or raise no_worker_timeout)")

    def wait(self, futures):
        with self._guard():
            # (finished ones need no trip to the client's event loop: an SPMD call's outputs come back finished)
            futures = [f for f in futures if type(f) is self._distributed.Future and not f.done()]
            while futures:
                try:
                    # this client's own wait: ``distributed.wait`` uses the process's *default* client, which
                    # is whichever client was made last (perhaps one the user has closed since)
                    poll = min(_POLL_SECONDS, self.no_worker_timeout / 4)
                    self.client.sync(self._distributed.client._wait, futures, timeout=poll,
                                     return_when="ALL_COMPLETED")
                except TimeoutError:
                    pass
                futures = [f for f in futures if not f.done()]
                if futures:
                    self._watch()

    def result(self, fut):
        if type(fut) is not self._distributed.Future:
            return fut.result()
        self.wait([fut])
        with self._guard():
            return aligned_values(fut.result())

    def gather(self, value):
        with self._guard():
            return self._gather(value)

    def _gather(self, value):
        found: list = []
        collect(value, found)
        # batched tile reductions (runtime/tiled/batch.py): one fetch per batch, however many items
        deferred = {id(f): f for f in found if hasattr(f, "remote")}
        if deferred:
            found = [f for f in found if id(f) not in deferred]
            value = substitute(value, lambda f: deferred[id(f)].result() if id(f) in deferred else f)
        remote = [f for f in found if type(f) is self._distributed.Future]
        if not found:
            return value
        self.wait(remote)
        values = aligned_values(self.client.gather(remote)) if remote else []
        table = {id(f): v for f, v in zip(remote, values)}
        return substitute(value, lambda f: table[id(f)] if id(f) in table else f.result())

    def failed(self, fut) -> bool:
        if type(fut) is self._distributed.Future:
            return fut.status in ("error", "cancelled")
        return not fut.cancelled() and fut.exception() is not None

    def close(self):
        self._closing = True
        for hook in ON_CLOSE:
            try:
                hook(self)
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        for thing in reversed(self._owned):
            try:
                thing.close()
            except Exception:  # noqa: BLE001 - closing is best effort; the processes go with the cluster
                pass




class DaskRuntime(Runtime):
    """A runtime on Dask: ``client``, ``dashboard_link``; failures of the cluster are ClusterErrors naming the call.

    When the scheduler connection is lost the runtime closes itself (and what it started): every future on the
    cluster is gone with the scheduler, so no later call could use it. A new runtime works once a scheduler runs."""

    @property
    def client(self):
        return self.executor.client

    @property
    def closed(self) -> bool:
        """Closed by ``close()``, or because the scheduler connection was lost (noticed here at the latest)."""
        if not self._closed and self.executor.lost_now() is not None:
            self._close_after_loss()
        return self._closed

    @closed.setter
    def closed(self, value: bool):
        self._closed = value

    @property
    def dashboard_link(self) -> str | None:
        """The address of the Dask dashboard (None when the scheduler serves none)."""
        try:
            return self.executor.client.dashboard_link
        except Exception:  # noqa: BLE001 - no dashboard service (``--no-dashboard``), or a closed client
            return None

    def closed_error(self) -> Exception:
        """A ClusterError saying what happened when the scheduler connection was lost; else (closed by ``close()``)
        the closed runtime's RuntimeError, as every runtime's."""
        lost = self.executor.lost
        if lost is not None:
            return ClusterError(f"{lost}; this runtime was closed then: make a new one (px.runtime.dask(...)) once "
                                "the scheduler runs again")
        return super().closed_error()

    def evaluate(self, code, args, kwargs, hooks=None):
        call = f"{getattr(code, 'entry', 'the compiled function')}()"
        ex = self.executor
        if ex.lost is not None:
            raise ClusterError(f"{call} cannot run: {ex.lost}; this runtime was closed then: make a new one "
                               "(px.runtime.dask(...)) once the scheduler runs again")
        if self._closed:  # by close(); a loss noticed now is the ClusterError naming this call, below
            raise self.closed_error()
        try:
            ex.check_alive()
            return super().evaluate(code, args, kwargs, hooks)
        except BaseException as e:
            err = ex.cluster_error(e)
            if err is None:
                raise
            if isinstance(err, ClosedError):  # closed while the call ran (close() from another thread)
                if err is e:
                    raise
                raise err from e
            if ex.lost is not None and not self._closed:
                self._close_after_loss()
            raise dask_faults.naming_the_call(err, call, ex.lost is not None) from e

    def _close_after_loss(self):
        """Closed at once (this may run on one of its own driver threads, which cannot wait for themselves);
        the client (which would keep trying to reconnect) and what it started are closed in the background."""
        import threading

        self._closed = True
        if self._drivers is not None:
            self._drivers.shutdown(wait=False)
        threading.Thread(target=self.executor.close, name="phylanx-close", daemon=True).start()

    def __repr__(self):
        lost = self.executor.lost
        return f"<phylanx runtime {self.name}: closed ({lost})>" if lost and self.closed else super().__repr__()


def dask(address: str | None = None, client=None, n_workers: int | None = None,
         threads_per_worker: int | None = None, *, timeout: float = DEFAULT_CONNECT_TIMEOUT,
         security=None, no_worker_timeout: float = DEFAULT_NO_WORKER_TIMEOUT, check: bool = True,
         inline_elements: int | None = None, progress: bool | None = None, **cluster_kwargs) -> Runtime:
    """A runtime on Dask: connect to ``address`` (a running ``dask scheduler``), wrap an existing ``client``, or
    start an in-process ``LocalCluster`` of ``n_workers`` processes on 127.0.0.1 (the default: one per core; its
    dashboard on 127.0.0.1 too, its address printed on stderr and in ``rt.dashboard_link``).

    Closing the runtime closes only what it started, and cancels its pending lazy calls unless ``close(wait=True)``
    (base.Runtime.close). ``timeout`` bounds connecting (a ClusterError past it; a
    refused connection is one at once); ``security`` (a ``distributed.Security``, e.g. TLS) passes through;
    ``check`` verifies every worker has this version of phylanx-py. ``progress``: show tasks done/submitted
    during long calls (None: on a terminal only). ``no_worker_timeout``: seconds a call waits while the cluster
    has no workers before it is a ClusterError."""
    import distributed

    owned = []
    if client is None:
        try:
            if address is None:
                cluster = start_local_cluster(n_workers, threads_per_worker, security, cluster_kwargs)
                owned.append(cluster)
                client = distributed.Client(cluster, timeout=timeout, security=security)
            else:
                check_address(address, security, timeout)
                client = connect(address, timeout, security)
        except (OSError, TimeoutError) as e:
            for thing in owned:
                thing.close()
            where = address or "a new LocalCluster"
            raise ClusterError(f"cannot reach the Dask scheduler at {where} within {timeout:g} s: {e}") from e
        owned.append(client)
    if check:
        try:
            check_workers(client)
        except BaseException:
            for thing in reversed(owned):
                thing.close()
            raise
    kw = {"inline_elements": DASK_INLINE_ELEMENTS if inline_elements is None else inline_elements}
    name = f"dask {client.scheduler.address}"
    executor = DaskExecutor(client, no_worker_timeout=no_worker_timeout, owned=owned, runtime_name=name)
    return DaskRuntime(executor, name=name, progress=progress, **kw)
