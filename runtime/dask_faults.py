"""Failures of the Dask cluster itself, told apart from failures of the user's kernels.

A kernel that raises on a worker comes back as the ``ExecutionError`` it raised there (it names the user's line).
Everything else that can end a call on Dask is the cluster's doing and becomes a ``ClusterError`` that says what
happened: the client lost its scheduler (distributed cancels every future with ``scheduler-connection-lost``, tries
to reconnect for its ``timeout`` and then closes), futures cancelled for any other reason (``FutureCancelledError``
and its plural sibling ``FuturesCancelledError``, both ``concurrent.futures.CancelledError``), a comm closed under
us (``CommClosedError``), a task that killed ``allowed-failures`` workers (``KilledWorker``). Once the scheduler is
gone nothing can finish, whatever the exception a half-closed client raised (``AttributeError: 'NoneType' object
has no attribute 'ncores'``, ``KeyError: 'workers'``): the client's status decides then, not the exception's type.
"""
from __future__ import annotations

import contextlib

from phylanx_py.errors import ClusterError

RUNNING = "running"


def _cluster_types() -> tuple:
    from concurrent.futures import CancelledError

    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    return (CancelledError, CommClosedError, KilledWorker)


def _chain(exc):
    """``exc`` and what it was raised from or during (ExecutionError chains its cause), each once."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def scheduler_lost(client) -> str | None:
    """What happened to the scheduler connection, or None while the client is connected."""
    status = getattr(client, "status", RUNNING)
    if status == RUNNING:
        return None
    address = getattr(getattr(client, "scheduler", None), "address", None) or _address_of(client)
    return (f"the connection to the Dask scheduler at {address} was lost (client {status}): the scheduler died or "
            "the network failed")


def _address_of(client) -> str:
    try:
        return client.scheduler_info().get("address") or "?"
    except Exception:  # noqa: BLE001 - a half-closed client: the address is only decoration
        return "?"


def _describe(exc) -> str:
    name = type(exc).__name__
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:300] + " ..."
    from distributed.scheduler import KilledWorker

    if isinstance(exc, KilledWorker):
        return f"workers kept dying while running a task ({name}: {text})"
    if "scheduler-connection-lost" in text:
        return f"the connection to the Dask scheduler was lost ({name}: {text})"
    return f"the cluster dropped work of this call ({name}: {text})"


def cluster_error(exc: BaseException, client) -> ClusterError | None:
    """The ClusterError ``exc`` stands for, or None when it is not the cluster's failure (a kernel's error)."""
    if isinstance(exc, ClusterError):
        return exc
    lost = scheduler_lost(client)
    if lost is not None:
        return ClusterError(lost)
    types = _cluster_types()
    for e in _chain(exc):
        if isinstance(e, ClusterError):
            return e
        if isinstance(e, types):
            return ClusterError(_describe(e))
    return None


def naming_the_call(err: ClusterError, call: str, closed: bool) -> ClusterError:
    """``err`` as the user sees it: which call it ended and what to do now."""
    tail = ("; this runtime is closed now: make a new one (px.runtime.dask(...)) once the scheduler runs again"
            if closed else "")
    return ClusterError(f"{call} failed: {err.message}{tail}")


@contextlib.contextmanager
def cluster_failures(client, call: str):
    """Failures of the cluster inside the block (driver code that uses ``client`` itself, such as parallel
    training) are ClusterErrors naming ``call``; other errors pass unchanged."""
    try:
        yield
    except BaseException as e:
        if client is None or isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        err = cluster_error(e, client)
        if err is None:
            raise
        if err is e and call in err.message:
            raise
        raise naming_the_call(err, call, False) from e
