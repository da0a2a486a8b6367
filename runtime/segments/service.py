"""Requests from the client straight to a worker process's ring port, without the scheduler: the way an SPMD
segment starts and reports when its ranks' data is already where they run.

Through the scheduler a segment's start and its results cost about 20 ms of hops (client -> scheduler -> worker,
then worker -> scheduler -> client and a fetch), more than a whole iteration of most loops. Here the client keeps
one connection per worker port (``distributed.comm`` with the cluster's ``Security``, so a TLS cluster gets TLS),
writes a request, and the worker answers on the same connection when the request's function returns: two
messages. Dask still owns placement and lineage: a request only reads results already in the worker's memory and
runs nothing that Dask tracks; whatever it cannot do (a key not there) it says, and the caller takes the path
through the scheduler. A worker that dies closes the connection, so its caller hears at once (``Unreachable``).

A request's function runs in a thread of its own (it may block for a whole segment, waiting on its ring peers),
never on the port's IO loop. Payloads travel pickled (cloudpickle where pickle cannot), as Dask's task
specifications do: the port accepts only what the worker's own listener would (the cluster's security settings).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import weakref

from phylanx_py.primitives.fused import kernel_threads

from ..dask_runtime import ON_CLOSE

SERVICES: dict = {}  # name -> fn(worker, payload) -> reply, registered by the modules that serve them
# Seconds the client tries to open a connection to a worker port. Dask's ``connect`` retries a refused connection
# until its timeout (30 s by default), and a port whose worker died refuses: the caller would wait that long for a
# worker that is gone. A port that is there answers in milliseconds (it has an IO thread of its own); one that does
# not answer in this time costs only the path through the scheduler (the caller's fallback).
CONNECT_SECONDS = 5.0


class Unreachable(ConnectionError):
    """The worker's port could not be reached, or closed the connection before answering."""


# ---- the worker's side ------------------------------------------------------------------------------------
async def serve(worker, comm):
    """Answer requests on ``comm`` one after the other until the client closes it."""
    from distributed.protocol import pickle

    loop = asyncio.get_running_loop()
    while True:
        try:
            msg = await comm.read()
        except Exception:  # noqa: BLE001 - the client went away: nothing to answer
            comm.abort()
            return
        fn = SERVICES.get(msg.get("service"))
        done = loop.create_future()

        def work(fn=fn, name=msg.get("service"), payload=msg.get("payload"), done=done):
            try:
                if fn is None:
                    raise LookupError(f"this worker serves no {name!r} requests")
                with kernel_threads(1):  # as in the worker's own task threads: its processes share the cores
                    reply = {"ok": pickle.dumps(fn(worker, pickle.loads(payload)))}
            except BaseException as e:  # noqa: BLE001 - the caller decides; the connection stays usable
                reply = {"error": f"{type(e).__name__}: {e}"}
            loop.call_soon_threadsafe(done.set_result, reply)

        threading.Thread(target=work, name="phylanx-service", daemon=True).start()
        try:
            await comm.write(await done)
        except Exception:  # noqa: BLE001 - the client went away
            comm.abort()
            return


def on_worker_loop(worker, fn, timeout: float = 60.0):
    """``fn()`` run on ``worker``'s event loop (where its data store is changed), from a request's thread."""
    async def call():
        return fn()
    return asyncio.run_coroutine_threadsafe(call(), worker.loop.asyncio_loop).result(timeout)


# ---- the client's side ------------------------------------------------------------------------------------
_IDLE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # cluster (executor) -> {port address: [open comms]}
_IDLE_LOCK = threading.Lock()


async def _request(cluster, address: str, service: str, payload: bytes):
    from distributed.comm import connect
    from distributed.protocol import pickle

    with _IDLE_LOCK:
        idle = _IDLE.setdefault(cluster, {}).setdefault(address, [])
        comm = idle.pop() if idle else None
    try:
        if comm is None or comm.closed():
            comm = await connect(address, timeout=CONNECT_SECONDS, **cluster.connection_args())
            await comm.write({"op": "serve"})
        await comm.write({"service": service, "payload": payload})
        reply = await comm.read()
    except (OSError, asyncio.TimeoutError) as e:  # CommClosedError is an OSError
        if comm is not None:
            comm.abort()
        raise Unreachable(f"the worker port {address} went away: {type(e).__name__}: {e}") from e
    except BaseException:  # cancelled mid-request: the answer would come on this connection, so drop it
        if comm is not None:
            comm.abort()
        raise
    with _IDLE_LOCK:
        _IDLE.setdefault(cluster, {}).setdefault(address, []).append(comm)
    if "error" in reply:
        raise RuntimeError(f"the request to {address} failed: {reply['error']}")
    return pickle.loads(reply["ok"])


def connected(cluster, address: str) -> bool:
    """Whether ``cluster`` keeps an open connection to the port ``address`` (a request then needs no new one; a
    worker that died since closes it, and the request hears of that at once)."""
    with _IDLE_LOCK:
        return any(not c.closed() for c in _IDLE.get(cluster, {}).get(address, ()))


def submit(cluster, address: str, service: str, payload) -> concurrent.futures.Future:
    """Send ``payload`` to ``service`` at the worker port ``address`` from ``cluster`` (an executor with the
    ``executors.Cluster`` protocol: the connection is made on its event loop, with its security); a future of the
    reply (``Unreachable`` when the worker is gone, ``RuntimeError`` when the service raised)."""
    from distributed.protocol import pickle

    data = pickle.dumps(payload)
    return cluster.run_on_loop(_request(cluster, address, service, data))


def close_idle(cluster):
    """Close the connections kept for ``cluster`` (its runtime is closing)."""
    with _IDLE_LOCK:
        pools = _IDLE.pop(cluster, None) or {}
    comms = [c for pool in pools.values() for c in pool]
    if comms:  # on the event loop, where they live
        cluster.call_on_loop(lambda: [c.abort() for c in comms])


ON_CLOSE.append(close_idle)
