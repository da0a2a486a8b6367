"""Each worker process's ring port, and what the client knows of them (moved out of ring.py, which keeps the
group's collectives).

The port: each worker process opens one listener (per scheme and host) on first use and keeps it: the worker's own
address scheme and host (loopback when the cluster is on loopback, TLS when the cluster uses TLS: the listener and
the connections take the worker's ``Security`` arguments). The client learns the ports' addresses once
(``port_addresses``, one ``run_on_workers`` of the executor's ``Cluster`` protocol) and puts them in the segment's
job. Every connection starts with a hello naming its group and rank (or a client's service request, service.py);
the port hands it to the rank of that group waiting for it, or keeps it until that rank asks: the ranks of a segment
do not start at the same moment.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import threading
import time
import weakref

from .service import serve

STALE_SECONDS = 600.0  # a connection no rank of this process claimed for this long is dropped


class RankLost(ConnectionError):
    """A peer of the group closed its connection or went silent: the segment cannot go on."""


class _Port:
    """This process's ring listener for one (scheme, host), on an IO thread of its own."""

    def __init__(self, scheme: str, host: str, worker):
        self.loop = asyncio.new_event_loop()
        self.security = worker.security
        self.worker = weakref.ref(worker)  # what a service request runs against (its data, its event loop)
        self._arrived: dict = {}  # (group, rank) -> (comm, arrival time): connections no rank has asked for yet
        self._wanted: dict = {}  # (group, rank) -> asyncio future a rank waits on
        threading.Thread(target=self.loop.run_forever, name="phylanx-ring-io", daemon=True).start()
        self.address = self.run(self._open(scheme, host), 60.0)

    def run(self, coro, timeout: float):
        """Run ``coro`` on the IO thread; its result. ``asyncio.TimeoutError`` after ``timeout`` seconds."""
        fut = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, timeout), self.loop)
        try:
            return fut.result(timeout + 5.0)  # (the coroutine times out first; this only guards the IO thread)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise asyncio.TimeoutError() from None

    async def _open(self, scheme, host):
        from distributed.comm import listen

        # the listener's handshake and the hello message are Dask's usual (small) messages; data is not
        self._listener = listen(f"{scheme}://{host}:0", self._on_comm, **self.security.get_listen_args("worker"))
        await self._listener.start()
        return self._listener.contact_address

    async def _on_comm(self, comm):
        try:
            hello = await asyncio.wait_for(comm.read(), 60.0)
            if hello.get("op") == "serve":  # a client's request connection (service.py), not a ring peer
                return await serve(self.worker(), comm)
            key = (hello["group"], hello["rank"])
        except Exception:  # noqa: BLE001 - not one of ours (or it went away): drop it
            comm.abort()
            return
        now = time.monotonic()
        for k in [k for k, (_, t) in self._arrived.items() if now - t > STALE_SECONDS]:
            self._arrived.pop(k)[0].abort()  # a rank that never started (its segment was cancelled)
        waiting = self._wanted.pop(key, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(comm)
        else:
            old = self._arrived.pop(key, None)
            if old is not None:
                old[0].abort()
            self._arrived[key] = (comm, now)

    async def accept(self, group: str, rank: int, aborted, deadline: float):
        """The connection rank ``rank`` of ``group`` made to this port, once it arrives."""
        key = (group, rank)
        hit = self._arrived.pop(key, None)
        if hit is not None:
            return hit[0]
        fut = self._wanted[key] = self.loop.create_future()
        try:
            while not fut.done():
                if aborted() or time.monotonic() > deadline:
                    raise RankLost(f"group {group}: rank {rank} never connected")
                await asyncio.wait([fut], timeout=0.1)
            return fut.result()
        finally:
            self._wanted.pop(key, None)

    def forget(self, group: str):
        """Drop connections still kept for ``group`` (it ended before they were taken)."""
        def drop():
            for k in [k for k in self._arrived if k[0] == group]:
                self._arrived.pop(k)[0].abort()
        self.loop.call_soon_threadsafe(drop)


_PORTS: dict = {}
_PORTS_LOCK = threading.Lock()
_FROZEN = False


def _freeze_old_objects():
    """Once per process: what exists when the first group forms (of one rank too: modules, compiled kernels, the
    worker's own state, long-lived) leaves the cyclic collector's generations (``gc.freeze``), so a full collection
    walks only newer objects. A full collection of a worker took 55 ms here, and a pause on one rank stalls every
    rank at the next collective."""
    global _FROZEN
    if not _FROZEN:
        _FROZEN = True
        gc.collect()
        gc.freeze()


def _port(worker) -> _Port:
    from distributed.comm.addressing import get_address_host, parse_address

    scheme, _ = parse_address(worker.address)
    key = (scheme, get_address_host(worker.address))  # the worker's own interface: never 0.0.0.0
    with _PORTS_LOCK:
        port = _PORTS.get(key)
        if port is None:
            port = _PORTS[key] = _Port(*key, worker)
        return port


def port_address(dask_worker=None) -> str:
    """Run on a worker (``Client.run``): the address of its process's ring port, opened on first use."""
    return _port(dask_worker).address


_KNOWN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # cluster (executor) -> {worker: port address}


def forget_ports(cluster, workers=None):
    """Ask the workers (``workers``, or all) for their ring ports again next time (after a lost rank: its worker may
    be a new process)."""
    if workers is None:
        _KNOWN.pop(cluster, None)
        return
    known = _KNOWN.get(cluster, {})
    for w in workers:
        known.pop(w, None)


def known_port(cluster, worker):
    """The ring port of ``worker`` as ``cluster`` last learnt it, or None (not asked, or forgotten)."""
    return _KNOWN.get(cluster, {}).get(worker)


def port_addresses(cluster, workers) -> list:
    """The ring ports of ``workers`` (Dask worker addresses), in that order, asked through ``cluster`` (an executor
    with the ``executors.Cluster`` protocol). Asked once per worker and cluster: a port lives as long as its worker
    process, and a restarted worker has a new address.

    Only workers the scheduler has now are asked: a worker that is gone is RankLost at once. (``Client.run`` names
    its workers to the scheduler, which connects to each address it is given, known or not: a dead worker's
    address cost its 30 s connect timeout.) Ports of workers no longer there are forgotten then."""
    known = _KNOWN.setdefault(cluster, {})
    missing = [w for w in dict.fromkeys(workers) if w not in known]
    if missing:
        alive = cluster.live_workers()
        for w in [w for w in known if w not in alive]:
            del known[w]
        gone = [w for w in missing if w not in alive]
        if gone:
            raise RankLost(f"worker {gone[0]} is no longer in the cluster")
        try:
            got = cluster.run_on_workers(port_address, workers=missing, on_error="return")
        except (OSError, TimeoutError) as e:
            raise RankLost(f"asking workers for their ring ports failed: {type(e).__name__}: {e}") from e
        for w in missing:
            if not isinstance(got.get(w), str):
                raise RankLost(f"worker {w} did not give its ring port: {got.get(w)!r}")
            known[w] = got[w]
    return [known[w] for w in workers]
