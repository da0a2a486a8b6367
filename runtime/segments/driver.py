"""The client's side of a segment (SPMD loops and training both): place values for the ranks, watch the ranks until
they report, abort a segment given up on, tell a lost scheduler from lost ranks, and run a segment again on the
live workers from its checkpoint when ranks were lost (as Horovod Elastic and torchrun do).

A segment is one long-running task per rank, pinned to its worker; the ranks form a ring group and run without the
scheduler. When a rank fails (its worker died: its peers see a closed connection at once) the driver tells the
surviving ranks to stop, cancels the segment, places it again over the live workers (Dask recomputes a lost tile
from its lineage) and runs it again from the values it started from. No progress for ``stall`` seconds is a
ClusterError, never an endless wait. What a segment runs, and what its ranks return, is the caller's
(spmd/driver.py, training/driver.py). Every function here takes the ``cluster`` it runs on (an executor with the
``executors.Cluster`` protocol) and asks it, never a Dask client, what it needs of the scheduler and the workers."""
from __future__ import annotations

import os
import time
from concurrent.futures import CancelledError

from phylanx_py.errors import ClusterError

from . import rank as on_worker
from .ports import RankLost, forget_ports

RETRIES = 3  # reruns of one segment from its checkpoint before giving up
STALL_SECONDS = float(os.environ.get("PHYLANX_STALL_SECONDS", "600"))
# Seconds a checkpoint may take to reach the ranks (milliseconds normally): past it a worker died during the scatter.
SCATTER_SECONDS = float(os.environ.get("PHYLANX_SCATTER_SECONDS", "20"))
POLL_SECONDS = 0.05
# After a lost rank, how long the client may take to notice a dead scheduler (workers close when their scheduler
# dies, so a lost rank may be that; the client hears of the closed connection about when the ranks do). Also the
# pause before a rerun: a worker's nanny restarts it meanwhile.
GRACE_SECONDS = 1.0


def retry(cluster, attempt, what: str, where: str = "", lost=None):
    """``attempt(n)`` for n = 0, 1, ... until it returns its result: a RankLost (a rank's worker died, a rank lost
    its peers) runs it again, up to RETRIES times, after telling ``lost(error)``. A dead scheduler is a ClusterError
    saying so at once (rather than retries burnt in milliseconds blaming the workers, or a new placement asked of a
    scheduler that is gone, which waits out the client's reconnect); so is a cluster that keeps losing ranks
    (``what`` lost ranks in 4 attempts ``where``): its failure, not the user's."""
    for n in range(RETRIES + 1):
        try:
            return attempt(n)
        except RankLost as e:
            gone = scheduler_gone(cluster, GRACE_SECONDS)
            if gone is not None:
                raise ClusterError(gone) from e
            if n == RETRIES:
                raise ClusterError(f"{what} lost ranks in {RETRIES + 1} attempts{where}; the last: {e}") from e
            forget_ports(cluster)  # a worker restarted at the same address has a new ring port
            if lost is not None:
                lost(e)
    raise AssertionError("unreachable")


def scheduler_gone(cluster, grace: float) -> str | None:
    """What happened to the scheduler (``cluster.connection_lost()``), looked at for up to ``grace`` seconds; None
    when the client is still connected then."""
    deadline = time.monotonic() + grace
    while cluster.connected() and time.monotonic() < deadline:
        time.sleep(0.01)
    return cluster.connection_lost()


def watch(cluster, name: str, wait, progress, stall: float, stalled, poll: float = POLL_SECONDS, most: float = 0.5):
    """Until every rank of segment ``name`` has reported (``wait(timeout)`` waits for them and says whether all
    have, raising RankLost when one was lost): a ClusterError when the scheduler is lost, or when ``progress()``
    (steps or collectives finished on the ranks; None: not known this time) has not changed for ``stall`` seconds
    (``stalled(progress, stall)`` says so). Looks every ``poll`` seconds, doubling up to ``most``."""
    seen, since = -1, time.monotonic()
    while True:
        if wait(poll):
            return
        poll = min(max(most, poll), poll * 2)
        lost = cluster.connection_lost()
        if lost is not None:  # the scheduler connection dropped: fail now, not after the reconnect
            raise ClusterError(lost)
        done = progress()
        if done is not None and done != seen:
            seen, since = done, time.monotonic()
        elif time.monotonic() - since > stall:
            raise ClusterError(stalled(seen, stall))


def tasks_done(cluster, name: str, futures, timeout: float, failed) -> bool:
    """Wait up to ``timeout`` s for the ranks' tasks; whether all finished. RankLost when the scheduler dropped one
    (its data died with a worker); ``failed(bad futures)`` decides what a task that failed or was cancelled is."""
    try:
        cluster.wait_within(futures, timeout)
    except TimeoutError:
        pass
    except CancelledError as e:  # Dask's FuturesCancelledError (several) or FutureCancelledError (one)
        raise RankLost(f"a rank of {name} was cancelled: {e}") from e
    bad = [f for f in futures if f.status in ("error", "cancelled")]
    if bad:
        raise failed(bad)
    return all(f.status == "finished" for f in futures)


def rank_failure(bad) -> tuple:
    """What the failed rank tasks ``bad`` (futures that failed or were cancelled, in rank order) stand for, one rule
    for SPMD and training: (the first error a rank raised from its own work, else None; the first error that means
    a rank was lost, else None: cancelled). A rank was lost, not failed, when its task raised an OSError (RankLost:
    its peers closed their connections; a connection of its worker closed) or Dask's KilledWorker (its worker kept
    dying while running it). A rank's own error comes first, whatever the order the client hears of them in: that
    rank failing is what made its peers lose it. What a rank's own error means is the caller's (SPMD: run the loop
    as before; training: the user's error)."""
    errors = [f.exception() for f in bad if f.status == "error"]
    own = next((e for e in errors if not _lost(e)), None)
    return own, (errors[0] if errors and own is None else None)


def _lost(exc) -> bool:
    return isinstance(exc, OSError) or type(exc).__name__ == "KilledWorker"


def watch_steps(cluster, name: str, workers, wait, stall: float, stalled):
    """``watch`` a segment whose ranks count steps (training): its progress is the slowest rank's step count, looked
    at every quarter of ``stall`` (between 0.05 and 0.5 s)."""
    def steps():
        return min((v for v in progress(cluster, name, workers).values() if isinstance(v, int)), default=0)

    poll = min(0.5, max(stall / 4, 0.05))
    watch(cluster, name, wait, steps, stall, stalled, poll, poll)


def results(cluster, name: str, futures, timeout: float | None = None) -> list:
    """The ranks' results, once ``tasks_done`` found them all finished; RankLost when they cannot be fetched within
    ``timeout`` s (SCATTER_SECONDS): a worker holding one died after its rank finished, and the scheduler then
    recomputes that rank alone, which waits for peers that are gone (``client.gather`` waited for it for good: a CI
    run hung 25 minutes in test_chaos there)."""
    try:
        return cluster.gather_within(futures, SCATTER_SECONDS if timeout is None else timeout)
    except TimeoutError as e:
        raise RankLost(f"a result of {name} was lost with its worker after its rank finished") from e
    except CancelledError as e:  # Dask's FuturesCancelledError (several) or FutureCancelledError (one: a test's
        # cancel of a segment's rank between the wait and this gather, seen once in a suite run)
        raise RankLost(f"a rank of {name} was cancelled: {e}") from e


def progress(cluster, name: str, workers) -> dict:
    """Worker -> steps (or collectives) finished by its rank of segment ``name``; RankLost when one of ``workers``
    died."""
    require_alive(cluster, name, workers)
    return cluster.run_on_workers(on_worker.progress, name, workers=workers, on_error="return")


def require_alive(cluster, name: str, workers):
    """RankLost when one of ``workers`` (those of segment ``name``) is no longer among the scheduler's."""
    alive = cluster.live_workers()
    gone = [w for w in workers if w not in alive]
    if gone:
        raise RankLost(f"worker {gone[0]} of {name} died")


def abort_ranks(cluster, name: str, workers):
    """Tell the ranks of segment ``name`` on those of ``workers`` still alive to stop (at their next collective or
    wait). The live workers are asked once, not once a worker."""
    alive = cluster.live_workers()
    cluster.run_on_workers(on_worker.abort, name, workers=[w for w in workers if w in alive], on_error="ignore")


def abandon(cluster, name: str, workers, futures):
    """Give up segment ``name``: its ranks stop (at their next collective or wait) and its futures are dropped."""
    if cluster.connected():  # else the scheduler is gone: nothing to tell, and asking would wait
        abort_ranks(cluster, name, workers)
        for f in futures:
            f.cancel()


def place(cluster, value, what: str):
    """``value`` on the cluster, for the ranks' tasks to fetch. Placed on a worker the scheduler picks (a live
    one), not pushed to the ranks' workers: a worker killed while data is pushed to it made
    ``Client.scatter(broadcast=True)`` wait for ever. Bounded by SCATTER_SECONDS, then the segment is retried
    (RankLost)."""
    try:
        fut = cluster.scatter_within(value, SCATTER_SECONDS)
    except (TimeoutError, OSError) as e:  # asyncio/distributed timeouts; CommClosedError is an OSError
        raise RankLost(f"placing {what} failed: {type(e).__name__}: {e}") from e
    return fut
