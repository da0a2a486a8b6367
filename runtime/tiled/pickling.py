"""How a tiled array travels to another process (``client.submit(g, t)``, ``dask.delayed(g)(t)``, ``pickle``): as
a reference to its tiles, never their data.

The pickle holds the tiles' Dask keys, the tile grid, the dtype and the scheduler's address; a lazy array's tiles
are submitted first. Pickling never waits (Dask pickles a task's arguments holding its client's lock) and loading
does no network work (the scheduler deserializes task graphs too, and a worker may load on its event loop): the
loaded array binds to a client on its first use, and waits there for tiles still computing. It binds to

- the current phylanx runtime (``px.using``) when it is a Dask runtime on the same scheduler;
- on a Dask worker (inside a task), the worker's client, and the task secedes from the worker's thread pool (it
  waits for other tasks), so ``np.asarray(t)`` or tiled operations read the tiles where they are;
- else the process's default ``distributed.Client`` when it is connected to the same scheduler,

and otherwise says why it cannot (a ClusterError naming the scheduler and what to do). As with Dask futures
inside other objects, the tiles are not dependencies of whoever loads the reference: the array that was pickled
must stay alive (in the process that made it) until the reference has been used, or its tiles are released; a
reference to released tiles is a ClusterError after a few seconds, not a wait forever.

What cannot be a reference is a TypeError saying what to send instead: a tiled array on an executor other than a
Dask cluster, and a lazy one pickled on Dask's event loop (a task returning it: nothing can be computed there).
"""
from __future__ import annotations

import asyncio
import threading
import weakref

import numpy as np

from phylanx_py.errors import ClusterError

from ..dask_runtime import DaskExecutor
from ..select import current
from . import grid


def _scheduler_address(client) -> str | None:
    try:
        return client.scheduler.address
    except AttributeError:
        return None


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def reduce(t):
    """``__reduce__`` of a TiledArray ``t``: (rebuild, args) referring to its tiles. Never waits: Dask pickles
    task arguments holding its client's lock, which its event loop needs to finish anything (so whoever loads the
    reference waits for the tiles, see Rebinding)."""
    ex = t._executor
    if isinstance(ex, Rebinding):
        address = ex.address
    elif isinstance(ex, DaskExecutor):
        address = _scheduler_address(ex.client)
    else:
        raise TypeError(f"cannot pickle a TiledArray whose tiles live on {getattr(ex, 'name', type(ex).__name__)!r}, "
                        "which other processes cannot reach: send its values (np.asarray(t)) or a dask array over "
                        "its tiles (t.to_dask()) instead")
    if t._futures is None:
        if _on_event_loop():  # a task's result being sent back (or spilled): nothing can be computed here
            raise TypeError("cannot pickle a TiledArray that is not computed yet here, on Dask's event loop (a "
                            "task returning one): a tiled array travels as a reference to its tiles, which do not "
                            "exist yet. Return its values (np.asarray(t)), or compute it in the task (return "
                            "t.persist()) and hold the task's future while you use the array it returns (its "
                            "tiles live as long as that result)")
        t.persist()  # submits one task per tile, no waiting
    futs = t._futures
    keys = np.empty(futs.shape, dtype=object)
    for idx in np.ndindex(futs.shape):
        keys[idx] = futs[idx].key
    return loaded, (type(t), address, t.boundaries, t.dtype, keys, t._homes, t._s.dist)


def loaded(cls, address, boundaries, dtype, keys, homes, dist):
    """A TiledArray over the tiles ``keys`` refer to, bound to a client on first use (see the module's docstring)."""
    import distributed

    futs = np.empty(keys.shape, dtype=object)
    for idx in np.ndindex(keys.shape):
        futs[idx] = distributed.Future(keys[idx])  # no client yet: binding is the Rebinding's first use
    t = cls(Rebinding(address, futs, boundaries), boundaries, dtype, futures=futs, homes=homes)
    t._s.dist = dist
    return t


def token(t) -> tuple:
    """``__dask_tokenize__`` of a TiledArray: its tiles' keys (unique to what they hold), grid and dtype."""
    futs = t.futures  # computes a lazy array: its tiles' keys are what names its values
    keys = tuple(futs[idx].key for idx in np.ndindex(futs.shape))
    return ("phylanx_py.TiledArray", str(t.boundaries), t.dtype.str, keys)


# ---- binding a loaded array ------------------------------------------------------------------------------------
_POLL_SECONDS = 1.0  # how often a loaded array waiting for its tiles asks whether they still exist
_UNKNOWN_POLLS = 3  # answers in a row that the scheduler does not know a tile before it is called gone
_executors: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # distributed.Client -> DaskExecutor
_executors_lock = threading.Lock()


def _executor_of(client) -> DaskExecutor:
    with _executors_lock:
        ex = _executors.get(client)
        if ex is None:
            ex = _executors[client] = DaskExecutor(client)  # not owned: closing it leaves the client open
        return ex


def _executor_for(address: str, what: str) -> DaskExecutor | None:
    """The executor to bind to: the current phylanx runtime's or the default client's on the same scheduler;
    None on a Dask worker (Rebinding uses the worker's client); else a ClusterError saying what to do."""
    import distributed

    ex = getattr(current(), "executor", None)
    if isinstance(ex, DaskExecutor) and _scheduler_address(ex.client) == address:
        return ex
    try:
        distributed.get_worker()
        return None
    except ValueError:
        pass
    found = None
    try:
        found = distributed.default_client()
    except ValueError:
        pass
    if found is not None and _scheduler_address(found) == address:
        return _executor_of(found)
    other = f" (this process's Dask client is connected to {_scheduler_address(found)})" if found is not None else ""
    raise ClusterError(f"{what} was unpickled as a reference to tiles on the Dask cluster at {address}, and this "
                       f"process has no client of that cluster{other}: use it inside a task on that cluster, "
                       f"inside `with px.using(px.runtime.dask({address!r})):`, or with a distributed.Client "
                       "connected to it; to send the values themselves, pickle np.asarray(t)")


def _task_client():
    """The worker's client, for a task that reads a tiled array. The task leaves the worker's thread pool
    (``distributed.secede``, as ``worker_client`` does while it waits, for good here): it waits for tasks of the
    cluster from now on (its tiles, and the tile tasks of what it computes from them), which may have to run in the
    slot it holds, on single-threaded workers the only one."""
    import distributed

    client = distributed.get_client()
    try:
        distributed.secede()
    except ValueError:  # seceded already (a second array read by this task)
        pass
    return client


def _desire(client, futures):
    """Tell the scheduler this client wants these keys, as Client.get_dataset does for the futures it loads: it
    then reports their state to this client, whose futures would otherwise wait for news forever."""
    client._send_to_scheduler({"op": "client-desires-keys", "keys": [f.key for f in futures]})


class Rebinding:
    """The executor of a tiled array loaded from a pickle: on first use, the executor of a client of the
    scheduler its tiles live on (its futures are bound to that client then); every attribute is that one's."""

    def __init__(self, address: str, futures: np.ndarray, boundaries):
        self.address = address
        self._futures = futures
        self._what = (f"a TiledArray of shape {grid.shape_of(boundaries)} "
                      f"({int(np.prod(futures.shape))} tiles)")
        self._bound: DaskExecutor | None = None
        self._lock = threading.Lock()

    def bound(self) -> DaskExecutor:
        with self._lock:
            if self._bound is None:
                ex = _executor_for(self.address, self._what)
                if ex is not None:
                    self._bind(ex)
                else:
                    self._bind(_executor_of(_task_client()))
            return self._bound

    def _bind(self, ex: DaskExecutor):
        client = ex.client
        futures = list(self._futures.flat)
        held = {f.key for f in futures if f.key in client.futures}  # this client holds them already (same process)
        for fut in futures:
            fut.bind_client(client)
        _desire(client, futures)
        self._wait(ex, [f for f in futures if f.key not in held])  # they may still be computing
        self._bound = ex

    def _wait(self, ex: DaskExecutor, futures):
        """Until every tile is computed (or failed); a ClusterError, not a wait forever, when the scheduler has not
        known a tile for a few seconds: the array that was sent has been released where it was made. (A tile it
        does not know yet may be one whose submission is still on its way.)"""
        import distributed

        client = ex.client
        unknown_for = 0
        while True:
            pending = [f for f in futures if not f.done()]
            if not pending:
                return
            try:
                client.sync(distributed.client._wait, pending, timeout=_POLL_SECONDS, return_when="ALL_COMPLETED")
                continue
            except TimeoutError:
                pass
            ex._watch()  # a lost scheduler, or no workers for the executor's no_worker_timeout: a ClusterError
            status = client.sync(client.scheduler.get_task_status, keys=[f.key for f in pending])
            gone = [k for k, state in status.items() if state in (None, "forgotten")]
            unknown_for = unknown_for + 1 if gone else 0
            _desire(client, pending)  # again: the scheduler ignores a wish for a key it does not know yet
            if unknown_for >= _UNKNOWN_POLLS:
                raise ClusterError(
                    f"{self._what} was unpickled as a reference to tiles on the Dask cluster at {self.address}, "
                    f"and {len(gone)} of them are no longer there ({gone[0]!r}): the array pickled has been "
                    "released where it was made (a temporary sent to a task, as in client.submit(g, t * 2), or a "
                    "task's result whose future was dropped). As with Dask futures inside other objects, tiles are "
                    "not dependencies of whoever loads the reference: keep the array sent in a variable until the "
                    "task has run (or the task's future while you use its result), or send the values "
                    "(np.asarray(t))")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.bound(), name)
