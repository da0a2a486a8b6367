"""The worker's side of a segment: what every rank of every segment does around its own work (leave the worker's
thread pool, quiet the worker, form its group, count its progress, stop when the driver aborts it), and the
per-worker globals the driver reads and writes through ``Client.run``: ``PROGRESS`` and ``ABORTED``.

SPMD ranks (spmd/rank.py) and training ranks (training/segment.py) each run their work inside ``rank_context``;
what their work is and what they return is theirs."""
from __future__ import annotations

import contextlib

from .quiet import quiet
from .ring import Group

# On each worker: group name -> steps (training) or collectives (SPMD) this rank has finished, read by the driver's
# watchdog with client.run or a service request; and the groups the driver has given up on (a rank still running
# checks it at every step and in its waits).
PROGRESS: dict = {}
ABORTED: set = set()


def aborted(name: str) -> bool:
    return name in ABORTED


@contextlib.contextmanager
def rank_context(name: str, rank: int, size: int, ports, timeout: float, worker=None):
    """Rank ``rank`` of ``size`` of segment ``name``, its group formed over ``ports`` (driver.py ``port_addresses``),
    for the block: a long-running Dask task (``worker`` None: it secedes, Dask's convention, so its thread leaves the
    worker's pool and the slot stays free) or a direct request's thread on ``worker`` (service.py). Its progress is
    ``PROGRESS[name]`` meanwhile; the group is closed at the end, whatever happens (its peers then stop at once: their
    next collective sees the closed connection)."""
    if worker is None:
        from distributed import get_worker, secede

        secede()
        worker = get_worker()
    PROGRESS[name] = 0
    group = Group(name, rank, size, timeout)
    group.worker = worker
    try:
        with quiet(worker):
            group.join(ports, lambda: name in ABORTED, worker)
            yield group
    finally:
        group.close()
        PROGRESS.pop(name, None)


def progress(name, dask_worker=None):
    """Steps finished by this worker's rank of group ``name`` (None: no rank of it runs here)."""
    return PROGRESS.get(name)


def running(dask_worker=None):
    """Group name -> steps finished, for the ranks running on this worker."""
    return dict(PROGRESS)


def abort(name, dask_worker=None):
    """Tell this worker's rank of ``name`` to stop at its next step or wait (a cancelled task keeps its thread)."""
    ABORTED.add(name)
