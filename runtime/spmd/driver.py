"""The client side of an SPMD segment: ranks placed on the workers that hold blocks of consecutive row tiles, one
long-running task each, watched until all report; a segment whose worker died is run again on the live workers
(Dask recomputes lost tiles from their lineage) from the values it started from, as training segments are
(training/driver.py)."""
from __future__ import annotations

import collections
import concurrent.futures
import itertools
import os
import threading
import time
import uuid
import weakref

from phylanx_py.errors import ClusterError

from ..dask_connect import live_workers
from ..training import segment as seg
from ..training import service
from ..training.driver import RETRIES, STALL_SECONDS, abort_ranks, place, require_alive
from ..training.ring import RankLost, forget_ports, known_port, port_addresses
from . import rank as rank_task

POLL_SECONDS = 0.05
GRACE_SECONDS = 1.0  # after a lost rank, how long the client may take to notice a dead scheduler
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


def blocks(tile_rows, n: int):
    """Split the tiles (their row counts) into ``n`` runs of consecutive tiles with row totals as even as can be:
    a list of (first tile, end tile)."""
    total = sum(tile_rows)
    cuts, at, acc = [0], 0, 0
    for r in range(1, n):
        goal = total * r / n
        while at < len(tile_rows) - (n - r) and (acc + tile_rows[at] / 2) < goal:
            acc += tile_rows[at]
            at += 1
        at = max(at, cuts[-1] + 1)
        acc = sum(tile_rows[:at])
        cuts.append(at)
    cuts.append(len(tile_rows))
    return [(cuts[i], cuts[i + 1]) for i in range(n)]


def assign(client, tile_futures, tile_rows, tile_bytes, where=None):
    """Ranks: [(worker, first tile, end tile)], one per live worker (at most one per tile), each run of tiles on
    the worker already holding most of its bytes. ``where``, a dict, receives who holds each tile (Dask's
    ``who_has``: key -> workers)."""
    alive = sorted(live_workers(client))
    if not alive:
        raise RankLost("no Dask workers are left")
    n = min(len(alive), len(tile_rows))
    runs = blocks(tile_rows, n)
    who = client.who_has([f for col in tile_futures for f in col])
    if where is not None:
        where.update(who)
    local = {}
    for col in tile_futures:
        for t, f in enumerate(col):
            for w in who.get(f.key, ()):
                local[(w, t)] = local.get((w, t), 0) + tile_bytes[t]

    def held(w, run):
        return sum(local.get((w, t), 0) for t in range(*run))

    if n <= 4:  # try every matching of runs to workers
        best = max(itertools.permutations(alive, n), key=lambda ws: sum(held(w, r) for w, r in zip(ws, runs)))
    else:
        best, free = [], list(alive)
        for r in runs:
            w = max(free, key=lambda w: held(w, r))
            best.append(w)
            free.remove(w)
    return [(w, a, b) for w, (a, b) in zip(best, runs)]


def _rank_tiles(tile_futures, a, b) -> list:
    """The futures of a rank's tiles ``a..b``, input by input: the order its shards are made in (rank.py)."""
    return [col[t] for col in tile_futures for t in range(a, b)]


def run(client, make_job, tile_futures, tile_rows, tile_bytes, stall=None):
    """Run the segment: ``make_job(ranks, ports)`` gives the Job for a placement (and the ranks' ring ports).
    Returns (ranks, the segment's name, results): per rank its future (None when started directly) and result.
    Raises Declined, or ClusterError when ranks keep being lost."""
    stall = STALL_SECONDS if stall is None else stall
    for attempt in range(RETRIES + 1):
        try:
            if attempt == 0 and DIRECT:
                out = _try_direct(client, make_job, tile_futures, tile_rows, tile_bytes, stall)
                if out is not None:
                    return out
            ranks = assign(client, tile_futures, tile_rows, tile_bytes)
            job = make_job(ranks, tuple(port_addresses(client, [w for w, _, _ in ranks])))
            return (ranks, *_attempt(client, job, ranks, tile_futures, stall))
        except RankLost as e:
            _scheduler_still_there(client, e)
            forget_ports(client)  # a worker restarted at the same address has a new ring port
            if attempt == RETRIES:
                raise ClusterError(f"an SPMD segment lost ranks in {RETRIES + 1} attempts; the last: {e}") from e
    raise AssertionError("unreachable")


def _scheduler_still_there(client, lost):
    """Raise ConnectionError when the client has lost its scheduler: workers close when their scheduler dies, so a
    lost rank may be that, and asking the scheduler for a new placement would wait out the client's reconnect
    (10 s). The client hears of the closed connection about when the ranks do: give it a moment."""
    deadline = time.monotonic() + GRACE_SECONDS
    while client.status == "running" and time.monotonic() < deadline:
        time.sleep(0.01)
    if client.status != "running":
        raise ConnectionError(f"the Dask client is {client.status} while an SPMD segment runs") from lost


# The placement of the last few sets of tiles that ran directly, per client: the next call over the same tiles (the
# next call of the loop) asks the scheduler nothing while the client's connections to the ranks' ports are open. A
# stale entry costs nothing wrong: a tile no longer there is a ``missing`` reply, a worker gone a closed connection
# (or, when a connection must be made anew, absence from the scheduler's workers), and each drops the entry.
_PLACED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
PLACED_KEEP = 16
_PLACED_LOCK = threading.Lock()


def _try_direct(client, make_job, tile_futures, tile_rows, tile_bytes, stall):
    """``run``'s result with the ranks started straight through the workers' ports, or None when that cannot be
    done (a tile not in the memory of the worker its rank runs on, or a job too large to send with the request)."""
    with _PLACED_LOCK:
        placed = _PLACED.setdefault(client, collections.OrderedDict())
        tiles = tuple(f.key for col in tile_futures for f in col)
        ranks = placed.get(tiles)
    try:
        if ranks is not None and not _still_there(client, ranks):
            with _PLACED_LOCK:
                placed.pop(tiles, None)
            ranks = None
        if ranks is None:
            where = {}
            ranks = assign(client, tile_futures, tile_rows, tile_bytes, where)
            if not all(w in where.get(f.key, ()) for w, a, b in ranks for f in _rank_tiles(tile_futures, a, b)):
                return None
        job = make_job(ranks, tuple(port_addresses(client, [w for w, _, _ in ranks])))
        if _size(job) >= INLINE_JOB_BYTES:
            return None
        out = _attempt_direct(client, job, ranks, tile_futures, stall)
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


def _still_there(client, ranks) -> bool:
    """Whether the workers of a remembered placement may still be used. With an open connection to each one's
    ring port they are (a worker that died since closes it, and the request hears of that at once). Otherwise a
    connection is to be made, and the port of a dead worker refuses it (Dask's ``connect`` retries that until its
    timeout): the scheduler's workers are asked first (one round trip), a worker not among them is gone, and the
    ports of those without a connection are asked again (a worker restarted at its old address has a new port)."""
    workers = [w for w, _, _ in ranks]
    ports = [known_port(client, w) for w in workers]
    if all(p is not None and service.connected(client, p) for p in ports):
        return True
    alive = live_workers(client)
    if not all(w in alive for w in workers):
        return False
    forget_ports(client, [w for w, p in zip(workers, ports) if p is None or not service.connected(client, p)])
    return True


class _NotDirect(Exception):
    """A rank could not be started directly (a tile not in its worker's memory, or the request failed there): the
    path through the scheduler runs the segment instead."""


def _attempt_direct(client, job, ranks, tile_futures, stall):
    """The segment started straight through the workers' ring ports (training/service.py): the ranks' tiles are
    already in their workers' memory, so no task is needed; the client's request and the rank's reply are the
    only messages (about 20 ms of scheduler hops saved per call). Returns as ``_attempt`` does, with no futures."""
    n = len(ranks)
    name = f"phylanx-spmd-{uuid.uuid4().hex[:12]}"
    calls = []
    for r, (_, a, b) in enumerate(ranks):
        keys = tuple(f.key for f in _rank_tiles(tile_futures, a, b))
        calls.append(service.submit(client, job.ports[r], "spmd rank", (job, r, n, name, keys)))

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
                    raise _NotDirect(c.result()["missing"])
        return True

    try:
        # a dead worker closes its connection, so ``wait`` hears of it at once: the watchdog only looks for stalls
        _watch(client, name, wait, [w for w, _, _ in ranks], stall, DIRECT_POLL_SECONDS,
               lambda: _direct_progress(client, name, job.ports))
        results = [c.result() for c in calls]
    except BaseException:
        _abandon(client, name, ranks, calls)
        raise
    return name, _checked(results, [None] * n, client)


def _abandon(client, name, ranks, futures):
    """Tell the ranks of a segment given up on to stop (at their next collective or wait), and drop its futures."""
    if client.status == "running":  # else the scheduler is gone: nothing to tell, and asking would wait
        abort_ranks(client, name, [w for w, _, _ in ranks])
        for f in futures:
            f.cancel()


def _checked(results, futs, client):
    """[(future, result)] of a segment whose ranks all reported; Declined or RankLost as the ranks said."""
    live = [f for f in futs if f is not None]
    failed = [r for r in results if "failed" in r]
    if failed:
        client.cancel(live)
        raise Declined(failed[0]["failed"], lasting=failed[0]["declined"])
    lost = [r for r in results if "lost" in r]
    if lost:
        client.cancel(live)
        raise RankLost(lost[0]["lost"])
    return list(zip(futs, results))


def _attempt(client, job, ranks, tile_futures, stall):
    n = len(ranks)
    name = f"phylanx-spmd-{uuid.uuid4().hex[:12]}"
    # a small job travels in the rank tasks themselves (no placement round trip); a large one (big replicated
    # inputs) is placed once and fetched by the ranks
    jf = job if _size(job) < INLINE_JOB_BYTES else place(client, job, "the segment's job")
    specs = []
    for r, (w, a, b) in enumerate(ranks):
        data = _rank_tiles(tile_futures, a, b)
        keys = tuple(f"tile {f.key}" for f in data)  # names for the rank's cache, never taken for task keys
        specs.append((f"spmd-{name}-rank{r}", w, (jf, r, n, name, keys, *data)))
    futs = submit_together(client, rank_task.run_rank, specs)
    try:
        _watch(client, name, lambda timeout: _tasks_done(client, name, futs, timeout), [w for w, _, _ in ranks],
               stall)
        results = client.gather(futs)
    except BaseException:
        _abandon(client, name, ranks, futs)
        raise
    return name, _checked(results, futs, client)


def submit_together(client, func, specs):
    """``func(*args)`` for each (key, worker, args) of ``specs``, each held to its worker, sent to the scheduler
    as one graph: the ranks start together (a submit each is a message each, and the client's stream holds the
    later ones back for up to 10 ms). The placement is a per-key annotation (``dict.get``, pickled with the graph).
    Built as ``Client.submit`` builds its one task (dask's task spec, an explicit token: tokenizing the job would
    pickle it once more); one submit per rank where dask lacks those."""
    try:
        import dask
        from dask._expr import LLGExpr
        from dask._task_spec import Task, parse_input
    except ImportError:  # another dask: correct, only slower
        return [client.submit(func, *args, key=key, workers=[w], allow_other_workers=False, pure=False)
                for key, w, args in specs]
    dsk = {key: Task(key, func, *(parse_input(a) for a in args)) for key, _, args in specs}
    with dask.annotate(workers={key: [w] for key, w, _ in specs}.get, allow_other_workers=False):
        futures = client.get(LLGExpr(dsk, _determ_token=uuid.uuid4().hex), list(dsk), sync=False)
    return list(futures)


def _tasks_done(client, name, futs, timeout) -> bool:
    """Wait up to ``timeout`` s for the ranks' tasks; whether all finished. RankLost or Declined when one failed."""
    from distributed.client import FuturesCancelledError, _wait

    try:
        client.sync(_wait, futs, timeout=timeout, return_when="ALL_COMPLETED")
    except TimeoutError:
        pass
    except FuturesCancelledError as e:
        raise RankLost(f"a rank of {name} was cancelled: {e}") from e
    bad = [f for f in futs if f.status in ("error", "cancelled")]
    if bad:  # the task itself failed: its worker went away while running it, or it could not start there
        exc = bad[0].exception() if bad[0].status == "error" else None
        if exc is None or isinstance(exc, OSError) or type(exc).__name__ == "KilledWorker":
            raise RankLost(f"a rank of {name} was lost: {exc!r}")
        raise Declined(f"a rank could not run: {type(exc).__name__}: {exc}")
    return all(f.status == "finished" for f in futs)


def _watch(client, name, wait, workers, stall, poll=POLL_SECONDS, progress=None):
    """Until every rank has reported (ranks report, they do not raise; ``wait(timeout)`` waits for them and says
    whether all have): RankLost when a rank's worker died or its task was lost, ClusterError when no collective
    finished anywhere for ``stall`` seconds. ``progress()``: collectives finished on the ranks (default: asked
    through the scheduler, which also tells of dead workers)."""
    seen, since = -1, time.monotonic()
    while True:
        if wait(poll):
            return
        poll = min(max(0.5, poll), poll * 2)
        if client.status != "running":  # the scheduler connection dropped: fail now, not after the reconnect
            raise ConnectionError(f"the Dask client is {client.status} while SPMD segment {name} runs")
        done = (progress or (lambda: _progress(client, name, workers)))()
        if done is not None and done != seen:  # (None: not known this time)
            seen, since = done, time.monotonic()
        elif time.monotonic() - since > stall:
            raise ClusterError(f"an SPMD segment stalled: no collective finished for {stall:.0f} s; the cluster is "
                               "not making progress (PHYLANX_STALL_SECONDS sets the limit)")


def _progress(client, name, workers) -> int:
    require_alive(client, name, workers)
    now = client.run(seg.progress, name, workers=workers, on_error="return")
    return sum(v for v in now.values() if isinstance(v, int))


def _direct_progress(client, name, ports) -> int | None:
    """Collectives finished on the ranks of a directly started segment, asked of their ports (not the scheduler:
    a segment started directly runs without it)."""
    total = 0
    for f in [service.submit(client, p, "spmd progress", name) for p in ports]:
        try:
            total += f.result(30.0) or 0
        except service.Unreachable as e:
            raise RankLost(f"a rank of {name} was lost: {e}") from e
        except concurrent.futures.TimeoutError:  # a port busy (a kernel holding its GIL): no progress seen, and
            f.cancel()  # the stall limit decides, as on the task path
            return None
    return total
