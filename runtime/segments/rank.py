"""The worker's side of a segment: what every rank of every segment does around its own work (leave the worker's
thread pool, quiet the worker, form its group, count its progress, stop when the driver aborts it), and the
per-worker globals the driver reads and writes through ``Client.run``: ``PROGRESS`` and ``ABORTED``.

SPMD ranks (spmd/rank.py) and training ranks (training/segment.py) each run their work inside ``rank_context``;
what their work is and what they return is theirs."""
from __future__ import annotations

import collections
import contextlib
import threading

from .ports import RankLost
from .quiet import quiet
from .ring import Group

# On each worker: group name -> steps (training) or collectives (SPMD) this rank has finished, read by the driver's
# watchdog with client.run or a service request; and the groups the driver has given up on (a rank still running
# checks it at every step and in its waits), oldest first.
PROGRESS: dict = {}
ABORTED: dict = {}
# ABORTED keeps the last ABORTED_KEEP names (it grew by one with every segment given up, for the worker's life).
# Dropping the oldest is safe: a rank running when its abort arrives sees it at its next step or wait (milliseconds
# later, while 4,096 later aborts each take a driver round trip); a rank that starts after its name was dropped (a
# rank task of a given-up segment that Dask reruns late) waits for peers that never come and fails at its group's
# timeout: nobody waits for its result, so that costs a thread for that time, never a hang.
ABORTED_KEEP = 4096
_ABORT_LOCK = threading.Lock()
# Lease key -> {rank: a formed group} kept after a segment that ended well, for the next segment of the same ranks
# (the next call of an SPMD loop on the same tiles): its connections and shared-memory regions are reused, not made
# again (forming a group and its region took 4-6 ms of a 10 ms call). Only the driver knows that every rank of the
# last segment ended well, so it asks for reuse (``lease``); a rank that finds none here fails (RankLost) and the
# driver runs the segment again with a new group. Bounded: the oldest is closed (its peers then see it closed).
POOL: collections.OrderedDict = collections.OrderedDict()
POOL_KEEP = 8  # (a driver reuses its 4 most recent: spmd/driver.py LEASES_KEEP)
_POOL_LOCK = threading.Lock()


def aborted(name: str) -> bool:
    return name in ABORTED


@contextlib.contextmanager
def rank_context(name: str, rank: int, size: int, ports, timeout: float, worker=None, lease=None):
    """Rank ``rank`` of ``size`` of segment ``name``, its group formed over ``ports`` (driver.py ``port_addresses``),
    for the block: a long-running Dask task (``worker`` None: it secedes, Dask's convention, so its thread leaves the
    worker's pool and the slot stays free) or a direct request's thread on ``worker`` (service.py). Its progress is
    ``PROGRESS[name]`` meanwhile; the group is closed at the end, whatever happens (its peers then stop at once: their
    next collective sees the closed connection). ``lease`` (key, reuse): the group is the one kept under ``key``
    by the last segment of these ranks (``reuse``), or formed; either way kept under ``key`` if the block ends
    without an error, for the next."""
    if worker is None:
        from distributed import get_worker, secede

        secede()
        worker = get_worker()
    PROGRESS[name] = 0
    group, kept = None, False
    try:
        if lease is not None and lease[1]:
            with _POOL_LOCK:
                kept_ranks = POOL.get(lease[0], {})
                group = kept_ranks.pop(rank, None)
                if not kept_ranks:
                    POOL.pop(lease[0], None)
            if group is None or group.size != size:
                raise RankLost(f"group {name}: the ring of {lease[0]} is no longer on this worker")
            group.lease(name, lambda: name in ABORTED)
            group.timeout = timeout  # (this segment's limit, not the one the group was formed with)
        else:
            group = Group(name, rank, size, timeout)
        group.worker = worker
        with quiet(worker):
            if group.port is None:
                group.join(ports, lambda: name in ABORTED, worker)
            yield group
        if lease is not None and group.port is not None:
            kept = _park(lease[0], rank, group)
    finally:
        if group is not None and not kept:
            group.close()
        PROGRESS.pop(name, None)


def _park(key, rank, group) -> bool:
    """Keep ``group`` under lease ``key`` for the next segment; the oldest lease is closed past POOL_KEEP."""
    gone = []
    with _POOL_LOCK:
        POOL.setdefault(key, {})[rank] = group
        POOL.move_to_end(key)
        while len(POOL) > POOL_KEEP:
            gone += POOL.popitem(last=False)[1].values()
    for g in gone:
        g.close()
    return True


def release(keys, dask_worker=None):
    """Close the groups kept under lease ``keys`` on this worker (the driver will not reuse them)."""
    with _POOL_LOCK:
        gone = [g for k in keys for g in POOL.pop(k, {}).values()]
    for g in gone:
        g.close()


def progress(name, dask_worker=None):
    """Steps finished by this worker's rank of group ``name`` (None: no rank of it runs here)."""
    return PROGRESS.get(name)


def running(dask_worker=None):
    """Group name -> steps finished, for the ranks running on this worker."""
    return dict(PROGRESS)


def abort(name, dask_worker=None):
    """Tell this worker's rank of ``name`` to stop at its next step or wait (a cancelled task keeps its thread), and
    drop what it left for a client that gave it up (``ON_ABORT``)."""
    with _ABORT_LOCK:
        ABORTED.pop(name, None)
        ABORTED[name] = None  # (the newest last)
        while len(ABORTED) > ABORTED_KEEP:
            del ABORTED[next(iter(ABORTED))]
    for hook in ON_ABORT:
        hook(name, dask_worker)


# fn(segment name, the Dask worker or None) run on a worker when the driver gives a segment up: the SPMD tier drops
# the outputs its rank stored there for the client (spmd/stored.py), which will not take them now
ON_ABORT: list = []
