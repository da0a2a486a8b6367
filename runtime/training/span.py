"""A span: one segment whose ranks run every epoch the caller will run (``SegmentTrainer.horizon``), so the ranks,
their ring group (connections, shared-memory regions), parameters and optimizer state stay on the workers from one
epoch to the next, and the checkpoint comes to the client once, at the end.

Each rank announces the end of an epoch (an event, ``segment.TOPIC``) with the epoch's totals, summed over the
ranks by one small allreduce, so any one rank's announcement is the whole epoch's; ``epoch(e)`` returns when epoch
``e`` has been announced, with no checkpoint (None) until the last. Fault handling is the segment layer's: a lost
rank stops the span; each rank kept a copy of the checkpoint at the end of its last finished epoch (the same on
every rank: they applied the same sums), and the driver fetches it from a survivor, the only time a checkpoint
moves before the end, and starts a new span from the next epoch on the live workers. Without a survivor's copy
(every rank lost, or none finished an epoch) the span starts again from the checkpoint it started from. The copy
costs a memcpy of the parameters and optimizer state per epoch and rank (7.4 MB for simplemlp: a few ms per epoch
of seconds); without it a lost rank would cost the epochs since the span began.

``compute`` mode (no communication: the benchmarks' ideal) spans too; its ranks drift apart, so each announces its
own totals, the driver sums them, and a lost rank reruns the span from its start.
"""
from __future__ import annotations

import threading
import uuid
import weakref

from ..alignment import aligned_values
from ..segments.driver import abandon, rank_failure, retry, watch_steps
from ..segments.driver import results as segment_results
from ..segments.ports import RankLost, port_addresses
from . import segment as seg

# cluster (executor) -> {span name -> its Span}: one handler per cluster for the epoch announcements
_LISTENERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
# cluster (executor) -> {(workers, ports): lease key}: the ring group the ranks of the last span on those workers kept
# when it ended well (segments/rank.py POOL), reused by the next span there (the next fit call): no connections or
# shared-memory regions made again. Taken while a span runs, put back when it ended well.
_LEASES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
LEASES_KEEP = 4


def stall_message(step: int, steps: int, stall: float) -> str:
    """The ClusterError's text for a training segment whose step ``step`` (1-based, of ``steps`` an epoch) never
    completed within ``stall`` seconds (per-epoch segments and spans alike)."""
    return (f"training stalled: no step finished for {stall:.0f} s (step {step} of {steps} of the epoch never "
            "completed); the cluster is not making progress (PHYLANX_STALL_SECONDS sets the limit)")


def failure(name, bad):
    """The error failed rank tasks ``bad`` of segment ``name`` stand for (segments/driver.py rank_failure): the one a
    rank raised from the user's code, as it was; else RankLost."""
    own, lost = rank_failure(bad)
    if own is not None:
        return own
    return RankLost(f"a rank of {name} failed: {lost if lost is not None else 'cancelled'}")


def _listen(cluster, name, span):
    with _LOCK:
        spans = _LISTENERS.get(cluster)
        if spans is None:
            spans = _LISTENERS[cluster] = {}

            def handler(event, spans=spans):
                msg = event[1] if isinstance(event, tuple) else event
                target = spans.get(msg.get("name")) if isinstance(msg, dict) else None
                if target is not None:
                    target.announced(msg)

            cluster.subscribe(seg.TOPIC, handler)
        spans[name] = span


def _forget(cluster, name):
    with _LOCK:
        spans = _LISTENERS.get(cluster)
        if spans is not None:
            spans.pop(name, None)


class Span:
    """The epochs ``trainer`` runs from the first ``epoch(e, carry)`` call to ``trainer.horizon`` as spans."""

    def __init__(self, trainer):
        self.tr = trainer
        self.cluster = trainer.cluster
        self.base = None  # (epoch, checkpoint on the client) the next span starts from
        self.running = None  # (name, futures, ranks) of the span running
        self.reports: dict = {}  # epoch -> totals of every rank (complete)
        self.parts: dict = {}  # epoch -> {rank: its own totals} (compute mode)
        self.final = None  # the checkpoint after the last epoch, once the client has it
        self.names: list = []  # spans that may have left copies on the workers
        self.recovered: list = []  # the epoch each checkpoint fetched after a lost rank ended (-1: the start's)
        self.started = 0  # spans started (the first, and one per recovery)
        self.lease = None  # ((workers, ports), (key, reuse) or None) of the span running
        self._arrived = threading.Event()

    # ---- the caller's epochs ----------------------------------------------------------------------------
    def epoch(self, epoch: int, carry):
        tr = self.tr
        if self.base is None:
            self.base = (epoch, carry)
        tasks = 0

        def attempt(n):
            nonlocal tasks
            if n and self.running is None:  # after a lost rank: from a survivor's copy when one has it
                self._recover()
            if self._complete(epoch) and (epoch + 1 < tr.horizon or self.final is not None):
                return self.reports[epoch]
            if self.running is None:
                first = not self.started
                ranks = self._start()
                tasks += ranks if first else 0  # (reruns not counted, as for per-epoch segments)
            return self._wait(epoch)

        stats = retry(self.cluster, attempt, "training", f" at epoch {epoch + 1}", tr._lost)
        stats = dict(stats, steps=tr.steps, tasks=tasks)
        return (self.final if epoch + 1 >= tr.horizon else None), stats

    def announced(self, msg):
        """An epoch's end, from a rank (the client's event loop calls this)."""
        if msg.get("whole"):
            self.reports.setdefault(msg["epoch"], msg["stats"])
        else:
            self.parts.setdefault(msg["epoch"], {})[msg["rank"]] = msg["stats"]
        self._arrived.set()

    # ---- starting, watching, recovering -----------------------------------------------------------------
    def _start(self) -> int:
        """Submit a span from ``self.base`` to the horizon on the live workers; the number of rank tasks."""
        tr = self.tr
        first, carry = self.base
        ranks = tr._assign()
        n = len(ranks)
        tr.ranks = ranks
        name = f"phylanx-train-{uuid.uuid4().hex[:12]}-e{first}s0"
        ports = tuple(port_addresses(self.cluster, [w for w, _ in ranks])) if tr.mode != "compute" else ()
        lease = self._lease(ranks, ports)
        job = seg.Job(tr.problem, tr.optimizer, tr.mode, tr.every, tr.batch, tr.seed, first, 0, tr.steps, tr.steps,
                      tr.tile_rows, tr.stall, epochs=tr.horizon - first, span=True, lease=lease,
                      validation=tr.validation)
        _listen(self.cluster, name, self)
        self.names.append(name)
        self.parts = {}
        cf = tr._scatter(carry, [w for w, _ in ranks], broadcast=True)
        jf = tr._scatter(job, [w for w, _ in ranks], broadcast=True)
        specs = [(f"train-segment-{name}-rank{r}", w,
                  (jf, r, n, name, ports, tiles, cf, *[a for t in tiles for a in (tr.x_tiles[t], tr.y_tiles[t])]))
                 for r, (w, tiles) in enumerate(ranks)]
        futs = tr.cluster.submit_ranks(seg.run_segment, specs)
        for f in futs:
            f.add_done_callback(lambda _: self._arrived.set())
        self.running = (name, futs, ranks)
        self.lease = ((tuple(w for w, _ in ranks), ports), lease)
        self.started += 1
        return n

    def _lease(self, ranks, ports):
        """(key, reuse) of the group the span's ranks keep (allreduce on more than one rank), reusing the one the
        last span on these workers and ports kept."""
        if self.tr.mode != "allreduce" or len(ranks) < 2:
            return None
        with _LOCK:
            old = _LEASES.setdefault(self.cluster, {}).pop((tuple(w for w, _ in ranks), ports), None)
        return (old, True) if old is not None else (f"phylanx-lease-{uuid.uuid4().hex[:12]}", False)

    def _complete(self, epoch):
        """Whether epoch ``epoch``'s totals are known (compute mode: every rank's, summed then)."""
        if epoch not in self.reports and self.running is not None:
            parts = self.parts.get(epoch, {})
            if len(parts) == len(self.running[2]):
                self.reports[epoch] = {k: sum(p[k] for _, p in sorted(parts.items())) for k in parts[0]}
        return epoch in self.reports

    def _wait(self, epoch):
        """Epoch ``epoch``'s totals, once a rank announced them (or the span ended); RankLost when a rank was lost
        (the span is then stopped), a ClusterError when no step finished for ``stall`` seconds."""
        tr, cluster = self.tr, self.cluster
        name, futs, ranks = self.running
        workers = [w for w, _ in ranks]

        def wait(timeout):
            self._arrived.wait(timeout)
            self._arrived.clear()
            bad = [f for f in futs if f.status in ("error", "cancelled")]
            if bad:
                raise failure(name, bad)
            if all(f.status == "finished" for f in futs):
                self._finish(futs)
                return True
            return self._complete(epoch) and epoch + 1 < tr.horizon  # (the last: its checkpoint too)

        def stalled(n, stall):  # (n: the slowest rank's steps over the span)
            return stall_message(n % tr.steps + 1, tr.steps, stall)

        try:
            watch_steps(cluster, name, workers, wait, tr.stall, stalled)
        except BaseException:
            abandon(cluster, name, workers, futs)
            self.running = None
            raise
        return self.reports[epoch]

    def _finish(self, futs):
        """The span's ranks all returned: rank 0's checkpoint is the final one; every epoch's totals are known."""
        results = aligned_values(segment_results(self.cluster, self.running[0], futs))
        for r, (_, reports) in enumerate(results):
            for e, stats in reports.items():
                self.announced({"epoch": e, "rank": r, "stats": stats, "whole": self.tr.mode == "allreduce"})
        self.final = results[0][0]
        for e in list(self.parts):
            self._complete(e)
        name = self.running[0]
        self.running = None
        self.base = (self.tr.horizon, self.final)
        where, lease = self.lease
        if lease is not None:  # every rank ended well: its group is kept for the next span on these workers
            with _LOCK:
                leases = _LEASES.setdefault(self.cluster, {})
                leases[where] = lease[0]
                while len(leases) > LEASES_KEEP:
                    leases.pop(next(iter(leases)))
        _forget(self.cluster, name)

    def _recover(self):
        """After a lost rank: the newest checkpoint a survivor kept (fetched: the checkpoint moves now), with the
        totals of the epochs it ends; the span's own start when none kept one."""
        cluster, names = self.cluster, list(self.names)
        if self.tr.mode != "allreduce" or not cluster.connected():
            self.recovered.append(self.base[0] - 1)
            return
        try:
            kept = cluster.run_on_workers(seg.span_kept, names[-1], on_error="return")
            found = [(v[0], w, v[1]) for w, v in kept.items() if isinstance(v, tuple)]
            if found:
                epoch, worker, reports = max(found, key=lambda f: f[0])
                if epoch + 1 > self.base[0]:
                    checkpoint = aligned_values(
                        cluster.run_on_workers(seg.span_checkpoint, names[-1], workers=[worker])[worker])
                    for e, stats in reports.items():
                        self.reports.setdefault(e, stats)
                    self.base = (epoch + 1, checkpoint)
                    if epoch + 1 >= self.tr.horizon:
                        self.final = checkpoint
        except Exception:  # noqa: BLE001 - that survivor died too: the span's own start, as with none
            pass
        self.recovered.append(self.base[0] - 1)
        self.drop()

    def drop(self):
        """Stop a span still running and free what spans left on the workers."""
        cluster = self.cluster
        if self.running is not None:
            name, futs, ranks = self.running
            self.running = None
            if cluster.connected():
                try:
                    abandon(cluster, name, [w for w, _ in ranks], futs)
                except Exception:  # noqa: BLE001 - best effort: the cluster may be what failed
                    pass
        names, self.names = self.names, []
        for name in names:
            _forget(cluster, name)
        if names and cluster.connected():
            try:  # (a span still running was aborted above: a finished one leaves no name in ABORTED)
                cluster.run_on_workers(seg.drop_spans, names, on_error="ignore")
            except Exception:  # noqa: BLE001 - best effort
                pass
