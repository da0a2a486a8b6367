"""The client side of data-parallel training: segments launched on the workers that hold the row tiles, watched,
and restarted from their checkpoint when a worker dies, by the segment driver (segments/driver.py).

One segment is one long-running task per rank (a worker holding row tiles), pinned to that worker; the ranks form a
ring group (segments/ring.py) and run their steps without the scheduler. A segment returns the parameters and
optimizer state: that is the checkpoint. A rerun after lost ranks starts from it on the live workers; the batch plan
is a function of (seed, epoch, step, tile) (segment.py), so the rerun sees the same rows and noise. No rank
finishing a step for ``stall`` seconds is a ClusterError naming the step, never an endless wait.

The frontend hands this module plain values: a ``problem`` object (the traced gradient program behind
``grad``/``noise``), an optimizer, the flat parameter vector. It never imports the frontend.
"""
from __future__ import annotations

import uuid

import numpy as np

from ..alignment import aligned_values
from ..segments import rank as on_worker
from ..segments.driver import RETRIES, STALL_SECONDS, abandon, place, retry, tasks_done, watch_steps
from ..segments.driver import results as segment_results
from ..segments.placement import assign
from ..segments.ports import RankLost, port_addresses
from . import segment as seg
from .span import Span, failure, stall_message

__all__ = ["RETRIES", "STALL_SECONDS", "SegmentTrainer"]


class SegmentTrainer:
    """Data-parallel training on ``cluster`` (an executor with the ``executors.Cluster`` protocol and the Dask
    client it drives) over row tiles (``x_tiles``/``y_tiles``: one future per tile, ``tile_rows`` their row
    counts) with ``mode`` "allreduce" (every rank applies the same summed gradient), "neighbours" (D-PSGD: each
    rank its replica, averaged with its ring neighbours every ``every`` steps) or "compute" (allreduce's work
    without communication: the compute-only ideal for benchmarks)."""

    def __init__(self, cluster, x_tiles, y_tiles, tile_rows, problem, optimizer, *, mode="allreduce", every=1,
                 batch=32, seed=0, segment_steps=None, stall=None):
        if mode not in ("allreduce", "neighbours", "compute"):
            raise ValueError(f"parallel must be 'allreduce' or 'neighbours', got {mode!r}")
        self.cluster = cluster
        self.x_tiles, self.y_tiles = list(x_tiles), list(y_tiles)
        self.tile_rows = tuple(int(r) for r in tile_rows)
        self.problem, self.optimizer, self.mode, self.every, self.seed = problem, optimizer, mode, every, seed
        self.batch = max(1, batch // len(self.tile_rows))  # rows per tile per step
        self.steps = seg.steps_per_epoch(self.tile_rows, self.batch)
        self.segment_steps = segment_steps or self.steps
        self.stall = STALL_SECONDS if stall is None else stall
        self.restarts = 0  # of the last epoch
        self.lost: list = []  # why each of those restarts happened (the RankLost messages), for the caller's logs
        self.ranks: list = []  # (worker, tiles) of the last segment
        # The last segment's checkpoint as the client got it, its name and the futures holding it on the workers:
        # the next segment starts from those (no scatter of the parameters and optimizer state back to the
        # cluster); a retry after a failure starts from the client's copy.
        self._held = None
        # The epochs the caller will run (fit sets it): the next segment is then submitted while this one runs,
        # and starts on each worker as soon as this one's checkpoint is there, without waiting for the client.
        self.horizon = None
        self._ahead = None  # (epoch, first, ranks, name, futures) of the segment submitted ahead
        self._holds: dict = {}  # segment name -> whether its ranks other than 0 keep their checkpoints (HELD)
        self.started_ahead = 0  # segments that ran as submitted ahead
        # Whether the epochs up to the horizon run as one span (span.py: the ranks, their ring and the checkpoint
        # stay on the workers across epochs; ``epoch`` then hands back the checkpoint after the last epoch only).
        # Allreduce and compute modes with whole-epoch segments; fit sets it when it needs no weights between epochs.
        self.span = False
        # (X, Y) NumPy arrays a span's ranks evaluate the weights on at the end of each epoch (segment.report: the
        # epoch's totals then have ``val_loss``, ``val_metric``, ``val_rows``), so the weights need not come back
        # every epoch for the caller to validate them; None: no validation, or the caller validates (no span)
        self.validation = None
        self._span = None
        self.span_log = {"recovered": [], "started": 0}  # of the last span, once closed: see span.Span

    # ---- placement --------------------------------------------------------------------------------------
    def _assign(self):
        """Ranks: (worker, tiles), the row tiles spread over the live workers where they are (placement.py)."""
        return assign(self.cluster, [self.x_tiles], self.tile_rows, runs=False)

    # ---- one epoch --------------------------------------------------------------------------------------
    def start(self, pvec, state):
        """The first checkpoint: parameters (flat), a fresh optimizer state, the layers' state."""
        return (pvec, self.optimizer.init([pvec]), state)

    def epoch(self, epoch: int, carry):
        """Run epoch ``epoch`` from ``carry`` (a checkpoint, or a list of them, one per replica, for neighbours).
        Returns the new carry and the epoch's totals. Spanning epochs (``span``), the carry is None until the
        last epoch's: the checkpoint stays on the workers until then."""
        self.restarts, self.lost = 0, []
        if self.spans():
            if self._span is None:
                self._span = Span(self)
            return self._span.epoch(epoch, carry)
        totals = {"loss": 0.0, "metric": 0.0, "rows": 0, "sent": 0, "comm_s": 0.0, "compute_s": 0.0}
        for first in range(0, self.steps, self.segment_steps):
            last = min(self.steps, first + self.segment_steps)
            carry, stats = retry(self.cluster, lambda n, first=first, last=last, carry=carry:
                                 self._segment(epoch, first, last, carry), "training", f" at epoch {epoch + 1}",
                                 self._lost)
            for k in totals:
                totals[k] += stats[k]
        totals["steps"] = self.steps
        totals["tasks"] = len(self.ranks) * -(-self.steps // self.segment_steps)
        return carry, totals

    def spans(self) -> bool:
        """Whether ``epoch`` runs the epochs as a span (see ``span``)."""
        return (self.span and self.horizon is not None and self.mode in ("allreduce", "compute")
                and self.segment_steps >= self.steps)

    def _lost(self, e):
        """A rerun after lost ranks: counted, and why, for the caller's logs."""
        self.restarts += 1
        self.lost.append(str(e))

    def _scatter(self, value, workers, broadcast=False):
        return place(self.cluster, value, f"the checkpoint for {workers}")

    def _segment(self, epoch, first, last, carry):
        cluster = self.cluster
        ranks = self._assign()
        n = len(ranks)
        self.ranks = ranks
        held, self._held = self._held, None
        ahead, self._ahead = self._ahead, None
        from_held = held is not None and held[0] is carry and (len(held[2]) == n or not isinstance(carry, list))
        if ahead is not None and from_held and ahead[:3] == (epoch, first, ranks):
            name, futs = ahead[3], ahead[4]  # submitted while the last segment ran: it may be running already
            deps = held[2]
            self.started_ahead += 1
        else:
            if ahead is not None:
                self._drop(ahead)
            name, futs, deps = self._submit(epoch, first, last, carry if not from_held else None,
                                            held[2] if from_held else None, ranks,
                                            held[1] if from_held and held[3] == ranks and held[4] else None)
        following = self._following(epoch, last)
        if following is not None:  # the next segment waits on the workers for this one's checkpoint, not for us
            e2, f2, l2 = following
            self._ahead = (e2, f2, ranks) + self._submit(e2, f2, l2, None, futs, ranks, name)[:2]
        try:
            results = self._watch(name, futs, [w for w, _ in ranks], first, deps)
        except BaseException:
            if self._ahead is not None:
                self._drop(self._ahead)
                self._ahead = None
            if deps and cluster.connected():  # Dask recomputes a lost checkpoint by running its segment's
                # rank again, alone: it must give up at once, not wait for peers that have moved on
                try:
                    cluster.run_on_workers(on_worker.abort, held[1], on_error="ignore")
                except Exception:  # noqa: BLE001 - best effort: the segment is being given up anyway
                    pass
            raise
        stats = {k: sum(s[k] for _, s in results) for k in results[0][1]}
        out = [c for c, _ in results] if self.mode == "neighbours" else results[0][0]
        # (whether its ranks other than 0 kept their checkpoints: as its job said when it was submitted)
        self._held = (out, name, futs, ranks, self._holds.get(name, False))
        return out, stats

    def _following(self, epoch, last):
        """(epoch, first, last) of the segment after the one ending at ``last``, when the caller will run it."""
        if last < self.steps:
            return epoch, last, min(self.steps, last + self.segment_steps)
        if self.horizon is not None and epoch + 1 < self.horizon:
            return epoch + 1, 0, min(self.steps, self.segment_steps)
        return None

    def _submit(self, epoch, first, last, carry, previous, ranks, same_ranks_as=None):
        """Submit a segment's ranks: from ``carry`` (the client's checkpoint, scattered) or, when ``previous`` (the
        futures of the segment before) is given, from where that segment leaves its checkpoint on the workers:
        rank 0's result, or, when that segment (its name ``same_ranks_as``) had these very ranks, each rank's own
        (segment.HELD). Returns (name, futures, the futures it depends on)."""
        n = len(ranks)
        name = f"phylanx-train-{uuid.uuid4().hex[:12]}-e{epoch}s{first}"
        job = seg.Job(self.problem, self.optimizer, self.mode, self.every, self.batch, self.seed, epoch, first, last,
                      self.steps, self.tile_rows, self.stall,
                      hold=self.mode == "allreduce" and self._following(epoch, last) is not None)
        self._holds[name] = job.hold
        if previous is not None:  # a dict: Dask hands the rank the future's value
            if self.mode == "neighbours":
                carries = [{"previous": f} for f in previous]
            elif self.mode == "allreduce" and same_ranks_as is not None and len(previous) == n:
                # each rank's own, on its worker (equal to rank 0's: the same sums): no transfer
                carries = [{"previous": previous[0]}] + [{"previous": f, "held": (same_ranks_as, r)}
                                                         for r, f in enumerate(previous) if r > 0]
            else:
                carries = [{"previous": previous[0]}] * n
        elif isinstance(carry, list):  # replicas: one per rank (a changed rank count starts all from their mean)
            if len(carry) != n:
                mean = np.mean([c[0] for c in carry], axis=0).astype(carry[0][0].dtype)
                carry = [(mean.copy(), self.optimizer.init([mean]), carry[0][2]) for _ in range(n)]
            carries = [self._scatter(c, [w]) for c, (w, _) in zip(carry, ranks)]
        else:
            carries = [self._scatter(carry, [w for w, _ in ranks], broadcast=True)] * n
        jf = self._scatter(job, [w for w, _ in ranks], broadcast=True)
        ports = tuple(port_addresses(self.cluster, [w for w, _ in ranks])) if job.mode != "compute" else ()
        specs = [(f"train-segment-{name}-rank{r}", w,
                  (jf, r, n, name, ports, tiles, carries[r],
                   *[a for t in tiles for a in (self.x_tiles[t], self.y_tiles[t])]))
                 for r, (w, tiles) in enumerate(ranks)]
        futs = self.cluster.submit_ranks(seg.run_segment, specs)
        return name, futs, (tuple(previous) if previous is not None else ())

    def close(self):
        """Give up the segment submitted ahead, if the caller stops before running it, and free the checkpoints
        ranks kept on their workers for segments that will not run (a given-up run's, or the last one's)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            self._drop(ahead)
        span, self._span = self._span, None
        if span is not None:
            self.span_log = {"recovered": list(span.recovered), "started": span.started}
            span.drop()
        names = [k for k, hold in self._holds.items() if hold]
        self._holds.clear()
        if names and self.cluster.connected():
            try:
                self.cluster.run_on_workers(seg.drop_held, names, on_error="ignore")
            except Exception:  # noqa: BLE001 - best effort: the workers may be what failed
                pass

    def _drop(self, ahead):
        """Give up a segment submitted ahead: its ranks stop (or never start) and its tasks are cancelled."""
        cluster = self.cluster
        try:
            if cluster.connected():
                cluster.run_on_workers(on_worker.abort, ahead[3], on_error="ignore")
            cluster.cancel(ahead[4])
        except Exception:  # noqa: BLE001 - best effort: the cluster may be what failed
            pass

    def _watch(self, name, futs, workers, first, deps=()):
        """The segment's results, or RankLost when a rank's worker died or a rank lost its peers (the segment is
        then stopped and cancelled), a ClusterError when no step finished for ``stall`` seconds, or the error a
        rank raised from the user's code."""
        cluster = self.cluster

        def wait(timeout):
            if tasks_done(cluster, name, futs, timeout, lambda bad: failure(name, bad)):
                return True
            if any(f.status != "finished" for f in deps):
                raise RankLost(f"the checkpoint {name} starts from was lost with its worker")
            return False

        def stalled(n, stall):
            return stall_message(first + n + 1, self.steps, stall)

        try:
            watch_steps(cluster, name, workers, wait, self.stall, stalled)
            return aligned_values(segment_results(cluster, name, futs))
        except BaseException:
            abandon(cluster, name, workers, futs)
            raise
