"""The client side of an SPMD segment: ranks placed on the workers that hold blocks of consecutive row tiles, one
long-running task each, watched until all report; a segment whose worker died is run again on the live workers
(Dask recomputes lost tiles from their lineage) from the values it started from, as training segments are
(training/driver.py)."""
from __future__ import annotations

import itertools
import time
import uuid

from phylanx_py.errors import ClusterError

from ..training import segment as seg
from ..training.driver import RETRIES, STALL_SECONDS, place
from ..training.ring import RankLost, port_addresses
from . import rank as rank_task

POLL_SECONDS = 0.05
INLINE_JOB_BYTES = 1 << 20


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


def assign(client, tile_futures, tile_rows, tile_bytes):
    """Ranks: [(worker, first tile, end tile)], one per live worker (at most one per tile), each run of tiles on
    the worker already holding most of its bytes."""
    alive = sorted(client.scheduler_info()["workers"])
    if not alive:
        raise RankLost("no Dask workers are left")
    n = min(len(alive), len(tile_rows))
    runs = blocks(tile_rows, n)
    who = client.who_has([f for col in tile_futures for f in col])
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


def run(client, make_job, tile_futures, tile_rows, tile_bytes, stall=None):
    """Run the segment: ``make_job(ranks, ports)`` gives the Job for a placement (and the ranks' ring ports).
    Returns (ranks, the segment's name, results): per rank its future and result.
    Raises Declined, or ClusterError when ranks keep being lost."""
    stall = STALL_SECONDS if stall is None else stall
    for attempt in range(RETRIES + 1):
        try:
            ranks = assign(client, tile_futures, tile_rows, tile_bytes)
            job = make_job(ranks, tuple(port_addresses(client, [w for w, _, _ in ranks])))
            return (ranks, *_attempt(client, job, ranks, tile_futures, stall))
        except RankLost as e:
            if attempt == RETRIES:
                raise ClusterError(f"an SPMD segment lost ranks in {RETRIES + 1} attempts; the last: {e}") from e
    raise AssertionError("unreachable")


def _attempt(client, job, ranks, tile_futures, stall):
    n = len(ranks)
    name = f"phylanx-spmd-{uuid.uuid4().hex[:12]}"
    # a small job travels in the rank tasks themselves (no placement round trip); a large one (big replicated
    # inputs) is placed once and fetched by the ranks
    jf = job if _size(job) < INLINE_JOB_BYTES else place(client, job, "the segment's job")
    specs = []
    for r, (w, a, b) in enumerate(ranks):
        data = [col[t] for col in tile_futures for t in range(a, b)]
        keys = tuple(f"tile {f.key}" for f in data)  # names for the rank's cache, never taken for task keys
        specs.append((f"spmd-{name}-rank{r}", w, (jf, r, n, name, keys, *data)))
    futs = submit_together(client, rank_task.run_rank, specs)
    try:
        _watch(client, name, futs, [w for w, _, _ in ranks], stall)
        results = client.gather(futs)
    except BaseException:
        if client.status == "running":  # else the scheduler is gone: nothing to tell, and asking would wait
            alive = set(client.scheduler_info()["workers"])
            client.run(seg.abort, name, workers=[w for w, _, _ in ranks if w in alive], on_error="ignore")
            client.cancel(futs)
        raise
    failed = [r for r in results if "failed" in r]
    if failed:
        client.cancel(futs)
        raise Declined(failed[0]["failed"], lasting=failed[0]["declined"])
    lost = [r for r in results if "lost" in r]
    if lost:
        client.cancel(futs)
        raise RankLost(lost[0]["lost"])
    return name, list(zip(futs, results))


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


def _watch(client, name, futs, workers, stall):
    """Until every rank has reported (ranks report, they do not raise): RankLost when a rank's worker died or
    its task was lost, ClusterError when no collective finished anywhere for ``stall`` seconds."""
    from distributed.client import FuturesCancelledError, _wait

    seen, since, poll = -1, time.monotonic(), POLL_SECONDS
    while True:
        try:
            client.sync(_wait, futs, timeout=poll, return_when="ALL_COMPLETED")
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
        if all(f.status == "finished" for f in futs):
            return
        poll = min(0.5, poll * 2)
        if client.status != "running":  # the scheduler connection dropped: fail now, not after the reconnect
            raise ConnectionError(f"the Dask client is {client.status} while SPMD segment {name} runs")
        alive = set(client.scheduler_info()["workers"])
        gone = [w for w in workers if w not in alive]
        if gone:
            raise RankLost(f"worker {gone[0]} of {name} died")
        now = client.run(seg.progress, name, workers=workers, on_error="return")
        done = sum(v for v in now.values() if isinstance(v, int))
        if done != seen:
            seen, since = done, time.monotonic()
        elif time.monotonic() - since > stall:
            raise ClusterError(f"an SPMD segment stalled: no collective finished for {stall:.0f} s; the cluster is "
                               "not making progress (PHYLANX_STALL_SECONDS sets the limit)")
