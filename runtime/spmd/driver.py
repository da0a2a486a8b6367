"""The client side of an SPMD segment: ranks placed on the workers that hold blocks of consecutive row tiles, one
long-running task each (or a request straight to each worker's port), watched until all report; a segment whose
worker died is run again on the live workers from the values it started from, by the segment driver
(segments/driver.py), as training segments are."""
from __future__ import annotations

import collections
import concurrent.futures
import os
import threading
import time
import uuid
import weakref

from ..segments import service
from ..segments.driver import STALL_SECONDS, abandon, place, progress, rank_failure, retry, tasks_done, watch
from ..segments.driver import results as segment_results
from ..segments.placement import assign as _assign
from ..segments.ports import RankLost, forget_ports, known_port, port_addresses
from . import kept
from . import rank as rank_task

DIRECT_POLL_SECONDS = 1.0  # the watchdog's first look at a directly started segment (its questions cost the ranks)
INLINE_JOB_BYTES = 1 << 20
# Start segments straight through the workers' ring ports when their tiles are in place (PHYLANX_SPMD_DIRECT=0:
# always through the scheduler, as tasks)
DIRECT = os.environ.get("PHYLANX_SPMD_DIRECT", "1") != "0"


def _size(job) -> int:
    total = 0
    for p in job.params:
        if p[0] == "rep":
            total += getattr(p[1], "nbytes", 0) or 0
            if type(p[1]) in (list, tuple, dict):
                total += INLINE_JOB_BYTES  # containers: sizes unknown without walking them; place them
    return total


class Declined(Exception):
    """A rank reported that the loop cannot run as a segment (no SPMD rule, or the user's code failed there):
    the loop runs as before. ``lasting``: no SPMD form (not tried again for these argument kinds); else the user's
    code failed there (tried again on the next call: the data may differ)."""

    def __init__(self, message, lasting=True):
        super().__init__(message)
        self.lasting = lasting


def assign(cluster, tile_futures, tile_rows, tile_bytes, where=None):
    """Ranks: [(worker, first tile, end tile)], one per live worker, over runs of consecutive tiles where they are
    (segments/placement.py)."""
    return _assign(cluster, tile_futures, tile_rows, tile_bytes, runs=True, where=where)


def _rank_tiles(tile_futures, a, b) -> list:
    """The futures of a rank's tiles ``a..b``, input by input: the order its shards are made in (rank.py)."""
    return [col[t] for col in tile_futures for t in range(a, b)]


def run(cluster, make_job, tile_futures, tile_rows, tile_bytes, stall=None):
    """Run the segment on ``cluster`` (an executor with the ``executors.Cluster`` protocol):
    ``make_job(ranks, ports)`` gives the Job for a placement (and the ranks' ring ports).
    Returns (ranks, the segment's name, results): per rank its future (None when started directly) and result.
    Raises Declined, or ClusterError when ranks keep being lost."""
    stall = STALL_SECONDS if stall is None else stall

    def attempt(n):
        if n == 0 and DIRECT:
            out = _try_direct(cluster, make_job, tile_futures, tile_rows, tile_bytes, stall)
            if out is not None:
                return out
        ranks = assign(cluster, tile_futures, tile_rows, tile_bytes)
        job = make_job(ranks, tuple(port_addresses(cluster, [w for w, _, _ in ranks])))
        where = (tuple(w for w, _, _ in ranks), job.ports)  # (as a direct segment's: the group is the workers')
        lease = _lease(cluster, where)
        out = _attempt(cluster, job, ranks, tile_futures, stall, lease)
        _lease_done(cluster, where, lease)
        return (ranks, *out)

    return retry(cluster, attempt, "an SPMD segment")


# The placement of the last few sets of tiles that ran directly, per cluster (executor): the next call over the same
# tiles (the next call of the loop) asks the scheduler nothing while its connections to the ranks' ports are open. A
# stale entry costs nothing wrong: a tile no longer there is a ``missing`` reply, a worker gone a closed connection
# (or, when a connection must be made anew, absence from the scheduler's workers), and each drops the entry.
_PLACED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
PLACED_KEEP = 16
_PLACED_LOCK = threading.Lock()
# Per cluster (executor), (the ranks' workers, their ports) -> the lease key under which the ranks of the last direct
# segment there kept their group (segments/rank.py POOL): the next call's ranks there reuse it (no connections made, no
# shared-memory region made) when every rank of the last one ended well, whatever tiles they hold (a loop called on
# new tiled arrays every call too). Taken while a call runs (a concurrent call forms its own) and
# put back only after a call that ended well.
_LEASES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
LEASES_KEEP = 4


def _try_direct(cluster, make_job, tile_futures, tile_rows, tile_bytes, stall):
    """``run``'s result with the ranks started straight through the workers' ports, or None when that cannot be
    done (a tile not in the memory of the worker its rank runs on, or a job too large to send with the request)."""
    with _PLACED_LOCK:
        placed = _PLACED.setdefault(cluster, collections.OrderedDict())
        tiles = tuple(f.key for col in tile_futures for f in col)
        ranks = placed.get(tiles)
    try:
        if ranks is not None and not _still_there(cluster, ranks):
            with _PLACED_LOCK:
                placed.pop(tiles, None)
            ranks = None
        if ranks is None:
            where = {}
            ranks = assign(cluster, tile_futures, tile_rows, tile_bytes, where)
            if not all(w in where.get(f.key, ()) for w, a, b in ranks for f in _rank_tiles(tile_futures, a, b)):
                return None
        job = make_job(ranks, tuple(port_addresses(cluster, [w for w, _, _ in ranks])))
        if _size(job) >= INLINE_JOB_BYTES:
            return None
        where = (tuple(w for w, _, _ in ranks), job.ports)  # a group depends on its ranks' workers, not the tiles
        lease = _lease(cluster, where)
        out = _attempt_direct(cluster, job, ranks, tile_futures, stall, lease)
        _lease_done(cluster, where, lease)
    except (_NotDirect, RankLost) as e:  # (RankLost from port_addresses too: a worker of the placement is gone)
        with _PLACED_LOCK:
            placed.pop(tiles, None)
        if isinstance(e, _NotDirect):  # e.g. a tile not where Dask said: the path through the scheduler moves it
            return None
        raise
    with _PLACED_LOCK:
        placed[tiles] = ranks
        placed.move_to_end(tiles)
        while len(placed) > PLACED_KEEP:
            placed.popitem(last=False)
    return (ranks, *out)


def _lease(cluster, key):
    """(lease key, whether the ranks reuse the group kept under it) for a direct segment on ``key`` (the ranks'
    workers and ports); None for one rank (no group to keep)."""
    if len(key[1]) < 2:
        return None
    with _PLACED_LOCK:
        old = _LEASES.setdefault(cluster, collections.OrderedDict()).pop(key, None)
    return (old, True) if old is not None else (f"phylanx-lease-{uuid.uuid4().hex[:12]}", False)


def _lease_done(cluster, key, lease):
    """The segment on ``key`` ended well on every rank: its group may be reused by the next."""
    if lease is None:
        return
    with _PLACED_LOCK:
        leases = _LEASES.setdefault(cluster, collections.OrderedDict())
        leases[key] = lease[0]
        while len(leases) > LEASES_KEEP:
            leases.popitem(last=False)


def _still_there(cluster, ranks) -> bool:
    """Whether the workers of a remembered placement may still be used. With an open connection to each one's
    ring port they are (a worker that died since closes it, and the request hears of that at once). Otherwise a
    connection is to be made, and the port of a dead worker refuses it (Dask's ``connect`` retries that until its
    timeout): the scheduler's workers are asked first (one round trip), a worker not among them is gone, and the
    ports of those without a connection are asked again (a worker restarted at its old address has a new port)."""
    workers = [w for w, _, _ in ranks]
    ports = [known_port(cluster, w) for w in workers]
    if all(p is not None and service.connected(cluster, p) for p in ports):
        return True
    alive = cluster.live_workers()
    if not all(w in alive for w in workers):
        return False
    forget_ports(cluster, [w for w, p in zip(workers, ports) if p is None or not service.connected(cluster, p)])
    return True


class _NotDirect(Exception):
    """A rank could not be started directly (a tile not in its worker's memory, or the request failed there): the
    path through the scheduler runs the segment instead."""


def _attempt_direct(cluster, job, ranks, tile_futures, stall, lease=None):
    """The segment started straight through the workers' ring ports (segments/service.py): the ranks' tiles are
    already in their workers' memory, so no task is needed; the client's request and the rank's reply are the
    only messages (about 20 ms of scheduler hops saved per call); with ``lease`` (key, reuse) the ranks keep their
    group for the next call, or reuse the last one's (no ring to form). Returns as ``_attempt`` does, with no
    futures."""
    n = len(ranks)
    name = f"phylanx-spmd-{uuid.uuid4().hex[:12]}"
    calls = []
    parts = kept.parts(cluster, job)  # the job itself the first time on a worker, its key after (kept.py)
    for r, (_, a, b) in enumerate(ranks):
        keys = tuple(f.key for f in _rank_tiles(tile_futures, a, b))
        calls.append(service.submit(cluster, job.ports[r], "spmd rank", (parts[r], job.params, r, n, name, keys,
                                                                         lease)))

    def wait(timeout):
        """Whether every rank has replied, within ``timeout`` s; at once _NotDirect or RankLost when one cannot
        run (its peers wait for it in ``join`` until they are aborted)."""
        deadline = time.monotonic() + timeout
        pending = calls
        while pending:
            done, pending = concurrent.futures.wait(pending, max(0.0, deadline - time.monotonic()),
                                                    return_when="FIRST_COMPLETED")
            if not done:
                return False
            for c in done:
                exc = c.exception()
                if isinstance(exc, service.Unreachable):
                    raise RankLost(f"a rank of {name} was lost: {exc}") from exc
                if exc is not None:  # the request failed on the worker: as tasks, Dask reports what goes wrong
                    raise _NotDirect(f"a rank could not start directly: {exc}")
                if "missing" in c.result():
                    if c.result().get("job"):  # the worker no longer has the job: send it again next time
                        kept.forget(cluster, job.ports)
                    raise _NotDirect(c.result()["missing"])
        return True

    try:
        # a dead worker closes its connection, so ``wait`` hears of it at once: the watchdog only looks for stalls
        watch(cluster, name, wait, lambda: _direct_progress(cluster, name, job.ports), stall, _stalled,
              DIRECT_POLL_SECONDS)
        # (a rank that failed or was lost makes the others' outputs stored for the client (stored.py) no one's:
        # giving the segment up frees them)
        out = name, _checked([c.result() for c in calls], [None] * n, cluster)
        kept.sent(cluster, job, parts)
        return out
    except BaseException:
        abandon(cluster, name, [w for w, _, _ in ranks], calls)
        raise


def _checked(results, futs, cluster):
    """[(future, result)] of a segment whose ranks all reported; Declined or RankLost as the ranks said."""
    live = [f for f in futs if f is not None]
    failed = [r for r in results if "failed" in r]
    if failed:
        cluster.cancel(live)
        raise Declined(failed[0]["failed"], lasting=failed[0]["declined"])
    lost = [r for r in results if "lost" in r]
    if lost:
        cluster.cancel(live)
        raise RankLost(lost[0]["lost"])
    return list(zip(futs, results))


def _attempt(cluster, job, ranks, tile_futures, stall, lease=None):
    """The segment as one rank task per worker, through the scheduler; with ``lease`` the ranks keep their group
    for the next call, or reuse the last one's, as directly started ranks do (``_attempt_direct``)."""
    n = len(ranks)
    name = f"phylanx-spmd-{uuid.uuid4().hex[:12]}"
    # a small job travels in the rank tasks themselves (no placement round trip); a large one (big replicated
    # inputs) is placed once and fetched by the ranks
    jf = job if _size(job) < INLINE_JOB_BYTES else place(cluster, job, "the segment's job")
    specs = []
    for r, (w, a, b) in enumerate(ranks):
        data = _rank_tiles(tile_futures, a, b)
        keys = tuple(f"tile {f.key}" for f in data)  # names for the rank's cache, never taken for task keys
        specs.append((f"spmd-{name}-rank{r}", w, (lease, jf, r, n, name, keys, *data)))
    futs = cluster.submit_ranks(rank_task.run_leased, specs)
    workers = [w for w, _, _ in ranks]
    try:
        watch(cluster, name, lambda timeout: tasks_done(cluster, name, futs, timeout, _failed(name)),
              lambda: sum(v for v in progress(cluster, name, workers).values() if isinstance(v, int)), stall,
              _stalled)
        results = segment_results(cluster, name, futs)
    except BaseException:
        abandon(cluster, name, workers, futs)
        raise
    return name, _checked(results, futs, cluster)


def _failed(name):
    def failed(bad):
        """A rank's task itself failed (a rank reports its own failures: rank.py): its worker went away while
        running it, or it could not start there (segments/driver.py rank_failure)."""
        own, lost = rank_failure(bad)
        if own is None:
            return RankLost(f"a rank of {name} was lost: {lost!r}")
        return Declined(f"a rank could not run: {type(own).__name__}: {own}")

    return failed


def _stalled(_seen, stall):
    return (f"an SPMD segment stalled: no collective finished for {stall:.0f} s; the cluster is not making "
            "progress (PHYLANX_STALL_SECONDS sets the limit)")


def _direct_progress(cluster, name, ports) -> int | None:
    """Collectives finished on the ranks of a directly started segment, asked of their ports (not the scheduler:
    a segment started directly runs without it)."""
    total = 0
    for f in [service.submit(cluster, p, "spmd progress", name) for p in ports]:
        try:
            total += f.result(30.0) or 0
        except service.Unreachable as e:
            raise RankLost(f"a rank of {name} was lost: {e}") from e
        except concurrent.futures.TimeoutError:  # a port busy (a kernel holding its GIL): no progress seen, and
            f.cancel()  # the stall limit decides, as on the task path
            return None
    return total
