"""What one rank runs: a training segment (steps ``first..last`` of an epoch) as one long-running Dask task on the
worker that holds its row tiles, with a ring group to its peers.

The batch plan is a function of the tiles, not of the ranks: step ``s`` of epoch ``e`` takes ``b`` rows from each
row tile ``t`` (the next ``b`` of the tile's own permutation, drawn from ``(seed, e, t)``), and dropout noise for
those rows is drawn from ``(seed, e, s, t)``. The global batch is the union over tiles, so however the tiles are
spread over ranks (two workers, or one survivor holding both) the steps see the same rows and the same noise:
a group re-formed on other workers after a failure resumes the same computation, and a rank's row count stays the
same every step (its gradient tree is traced once).

``problem`` (given by the frontend, never imported here) has ``grad(pvec, state, noise, X, Y, out, scale)`` writing
the flat gradient of the mean loss over the rows times ``scale`` into ``out`` and returning ``(loss_sum,
metric_sum, new_state)``, ``grads(pvec, state, noise, X, Y)`` returning the same and the gradient of each
parameter, ``views(vec)`` (each parameter's part of a flat vector, a view), ``noise(rng, rows)`` returning a dict of
arrays with ``rows`` first, and ``noisy`` (False: ``noise`` returns nothing, and is not called).
``optimizer`` has ``update(params, grads, state, step)`` (in place): it updates the parameters' views, as ``fit``
updates the parameters (an optimizer with per-parameter norms sees the same parameters either way).
"""
from __future__ import annotations

import collections
import copy
import time
from dataclasses import dataclass

import numpy as np

from ..alignment import aligned
from ..segments.ports import RankLost
from ..segments.rank import PROGRESS, aborted, rank_context
from .shard import Shard

# (group name, rank) -> the checkpoint a rank other than 0 ended an allreduce segment with: the same values as rank
# 0's (every rank applied the same sums), kept in its worker for its next segment, which would otherwise wait for
# rank 0's copy to come over the network first (7.4 MB for simplemlp: 25-30 ms, at every segment's start). Only
# rank 0's goes to the client. Taken by the next segment; freed by the driver's close (drop_held) for segments
# that will not run; a few at most in any case.
HELD: collections.OrderedDict = collections.OrderedDict()
HELD_KEEP = 4

# group name -> what a rank of an allreduce span (span.py) keeps of its last finished epoch: {"epoch", "checkpoint"
# (a copy, made when the epoch ended: the parameters go on changing), "reports" (every finished epoch's totals over
# all ranks)}. Every rank holds the same, so after a lost rank the driver fetches it from any survivor: the only
# time a checkpoint leaves the workers before the last epoch. Freed by the driver (drop_spans); a few at most.
SPANS: collections.OrderedDict = collections.OrderedDict()
SPANS_KEEP = 4
TOPIC = "phylanx-train-epochs"  # the event topic an epoch's end is announced on (Worker.log_event)


@dataclass(frozen=True)
class Job:
    """Everything the ranks of one segment share (sent once, to every worker)."""
    problem: object
    optimizer: object
    mode: str  # "allreduce", "neighbours", or "compute" (allreduce's steps without communicating: the ideal)
    every: int
    batch: int  # rows per tile per step
    seed: int
    epoch: int
    first: int  # steps first..last-1 of the epoch
    last: int
    steps_per_epoch: int
    tile_rows: tuple  # rows of every tile
    timeout: float
    hold: bool = False  # the driver will start the next segment from this one's: ranks other than 0 keep theirs
    epochs: int = 1  # epochs from ``epoch`` on (the first from step ``first``, any others whole)
    span: bool = False  # a span (span.py): every epoch's end reported, the stats returned by epoch
    lease: tuple | None = None  # (key, reuse): the ranks' group kept for the next span (segments/rank.py)
    validation: tuple | None = None  # (X, Y) a span evaluates at each epoch's end (``report``), or None


def steps_per_epoch(tile_rows, batch: int) -> int:
    """Steps of ``batch`` rows per tile until the largest tile has been seen once."""
    return -(-max(tile_rows) // batch)


def tile_order(seed: int, epoch: int, tile: int, rows: int) -> np.ndarray:
    return np.random.default_rng([seed, 0, epoch, tile]).permutation(rows)


def tile_batch(order: np.ndarray, step: int, batch: int) -> np.ndarray:
    """The rows of a tile at ``step`` (cycling through its permutation: tiles of unequal size stay in step)."""
    return order[(step * batch + np.arange(batch)) % len(order)]


def step_noise(problem, seed: int, epoch: int, step: int, tiles, batch: int) -> dict:
    if not getattr(problem, "noisy", True):  # (a generator per tile and step: 30-50 us each, for nothing)
        return {}
    parts = [problem.noise(np.random.default_rng([seed, 1, epoch, step, t]), batch) for t in tiles]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts and parts[0] else {}


def run_segment(job: Job, rank: int, size: int, name: str, ports: tuple, tiles: tuple, carry, *data):
    """Rank ``rank`` of ``size``: the segment's steps on the rows of ``tiles`` (``data`` is X and Y of each, in
    order), a long-running task in its rank context (segments/rank.py). Returns ``(carry, stats)``: the new
    parameters, optimizer state and layer state (for allreduce only rank 0 sends them: every rank holds the same),
    and this rank's totals. A span (``job.span``, span.py) runs whole epochs one after the other in one
    group and reports each as it ends (``report``); its ``stats`` are then every epoch's, by epoch."""
    Xs = [np.ascontiguousarray(aligned(x)) for x in data[0::2]]
    Ys = [np.ascontiguousarray(aligned(y)) for y in data[1::2]]
    problem, opt = job.problem, job.optimizer
    carry, owned = _take(carry)
    pvec, opt_state, state = carry
    if not owned:  # a checkpoint Dask holds (a retry may start from it again): it stays as it is
        pvec, opt_state, state = pvec.copy(), copy.deepcopy(opt_state), copy.deepcopy(state)
    p_views, opt_views = problem.views(pvec), _state_views(problem, opt_state, pvec.size)
    if opt_views is None:  # a state of another form: the flat vector is one parameter
        p_views, opt_views = [pvec], opt_state
    # the flat gradient only where the ring sums it: one rank, or replicas averaged by their parameters, update
    # with the layers' own gradients (no copy into a flat buffer)
    flat = job.mode != "neighbours" and size > 1
    work = _Work(job, problem, opt, tiles, Xs, Ys, pvec, p_views, opt_views, flat, name)
    reports = {}
    with rank_context(name, rank, size if job.mode != "compute" else 1, ports, job.timeout,
                      lease=job.lease) as group:
        work.g = np.empty_like(pvec) if flat else None
        work.g_views = None if not flat else [work.g] if p_views[0] is pvec else problem.views(work.g)
        # ranks on one machine each update their chunk of parameters they share (shard.py)
        work.shard = Shard.make(group, opt, pvec, opt_state) if flat and job.mode == "allreduce" else None
        for epoch in range(job.epoch, job.epoch + job.epochs):
            first, last = (job.first, job.last) if epoch == job.epoch else (0, job.steps_per_epoch)
            sent0, comm0 = group.sent, group.comm_seconds
            stats, state = work.steps(group, epoch, first, last, state)
            if work.shard is not None:  # the epoch's parameters and state, in this rank's own arrays
                work.shard.store(pvec, opt_state)
            if job.mode == "allreduce":
                state = _mean_state(group, state)
            stats["sent"], stats["comm_s"] = group.sent - sent0, group.comm_seconds - comm0
            if job.span:
                reports[epoch] = report(job, group, name, epoch, stats, (pvec, opt_state, state))
    stats = reports if job.span else stats
    keep = job.mode == "neighbours" or rank == 0
    if not keep and job.hold:
        HELD[(name, rank)] = (pvec, opt_state, state)
        while len(HELD) > HELD_KEEP:
            HELD.popitem(last=False)
    return ((pvec, opt_state, state) if keep else None), stats


class _Work:
    """What a rank's steps share from one epoch to the next: its rows, parameters and their views, the optimizer
    and its state, the gradient buffer (``g``, ``g_views``: set once its group is formed)."""

    def __init__(self, job, problem, opt, tiles, Xs, Ys, pvec, p_views, opt_views, flat, name):
        self.job, self.problem, self.opt, self.tiles, self.Xs, self.Ys = job, problem, opt, tiles, Xs, Ys
        self.pvec, self.p_views, self.opt_views, self.flat, self.name = pvec, p_views, opt_views, flat, name
        self.g = self.g_views = self.shard = None
        self.done = 0  # steps this rank finished in the segment (its progress, PROGRESS)

    def steps(self, group, epoch, first, last, state):
        """Steps ``first..last-1`` of ``epoch``; returns (this rank's totals, the layers' state)."""
        job, problem, opt, pvec, p_views, opt_views = (self.job, self.problem, self.opt, self.pvec, self.p_views,
                                                       self.opt_views)
        tiles, Xs, Ys, g = self.tiles, self.Xs, self.Ys, self.g
        orders = [tile_order(job.seed, epoch, t, job.tile_rows[t]) for t in tiles]
        local_rows = job.batch * len(tiles)
        global_rows = job.batch * len(job.tile_rows)
        loss_sum = metric_sum = 0.0
        t_compute = 0.0
        for s in range(first, last):
            if aborted(self.name):
                raise RankLost(f"group {self.name}: the driver cancelled the segment")
            t0 = time.perf_counter()
            picks = [tile_batch(o, s, job.batch) for o in orders]
            if len(Xs) == 1:
                Xb, Yb = Xs[0][picks[0]], Ys[0][picks[0]]
            else:
                Xb = np.concatenate([x[p] for x, p in zip(Xs, picks)])
                Yb = np.concatenate([y[p] for y, p in zip(Ys, picks)])
            noise = step_noise(problem, job.seed, epoch, s, tiles, job.batch)
            gstep = epoch * job.steps_per_epoch + s
            if not self.flat:  # one rank (its rows are the global batch), or neighbour averaging
                loss, metric, state, grads = problem.grads(pvec, state, noise, Xb, Yb)
                if p_views[0] is pvec:
                    grads = [np.concatenate([np.ravel(x) for x in grads])]
                opt.update(p_views, grads, opt_views, gstep)
                t_compute += time.perf_counter() - t0
                if job.mode == "neighbours" and (s + 1) % job.every == 0:
                    group.neighbour_mean(pvec)
            elif self.shard is not None:  # the sum's chunk and the update of this rank's chunk (shard.py)
                shard = self.shard
                loss, metric, state = problem.grad(shard.p, state, noise, Xb, Yb, shard.slot, local_rows / global_rows)
                comm0 = group.comm_seconds
                shard.step(group, opt, gstep, shard.slot)
                t_compute += time.perf_counter() - t0 - (group.comm_seconds - comm0)
            else:
                into = group.scratch(g)  # the shared slot, when the ranks share memory: nothing to copy in
                gi = g if into is None else into
                # scaled as written: the mean over the global batch is the sum of these
                loss, metric, state = problem.grad(pvec, state, noise, Xb, Yb, gi, local_rows / global_rows)
                t_compute += time.perf_counter() - t0
                total = group.reduce(gi)
                t0 = time.perf_counter()
                g_views = self.g_views
                if total is not g:  # the sum in shared memory (read-only): read there by an optimizer that
                    if getattr(opt, "writes_grads", True):  # never writes its gradients, copied for any other
                        np.copyto(g, total)
                        total = g
                    g_views = [total] if p_views[0] is pvec else problem.views(total)
                opt.update(p_views, g_views, opt_views, gstep)
                t_compute += time.perf_counter() - t0
            loss_sum += loss
            metric_sum += metric
            self.done += 1
            PROGRESS[self.name] = self.done
        return {"loss": loss_sum, "metric": metric_sum, "rows": local_rows * (last - first),
                "compute_s": t_compute}, state


def report(job, group, name, epoch, stats, checkpoint) -> dict:
    """The end of ``epoch`` in a span: in allreduce mode the totals summed over the ranks (one small allreduce) and
    this rank's copy of the checkpoint kept in SPANS; announced to the driver as an event. Returns the totals.
    With ``job.validation`` each rank evaluates its share of the validation rows on the epoch's weights, and the
    sums (``val_loss``, ``val_metric``: loss and metric times rows; ``val_rows``) go in the same allreduce."""
    if job.validation is not None:
        stats = dict(stats, **_validate(job, group, checkpoint))
    if job.mode == "allreduce" and group.size > 1:
        keys = tuple(stats)
        v = group.allreduce(np.array([stats[k] for k in keys], np.float64))
        stats = {k: float(x) for k, x in zip(keys, v)}
        for k in ("rows", "val_rows"):
            if k in stats:
                stats[k] = int(round(stats[k]))
    stats = {k: (int(v) if k in ("rows", "sent", "val_rows") else float(v)) for k, v in stats.items()}
    whole = job.mode == "allreduce"  # these totals are every rank's, not this rank's alone
    if whole:
        kept = SPANS.get(name, {})
        SPANS[name] = {"epoch": epoch, "reports": {**kept.get("reports", {}), epoch: stats},
                       "checkpoint": _copy_into(kept.get("checkpoint"), checkpoint)}
        SPANS.move_to_end(name)
        while len(SPANS) > SPANS_KEEP:
            SPANS.popitem(last=False)
    try:
        group.worker.log_event(TOPIC, {"name": name, "rank": group.rank, "epoch": epoch, "whole": whole,
                                       "stats": stats})
    except Exception:  # noqa: BLE001 - an announcement lost: the driver reads the epoch from the task's result
        pass
    return stats


def _validate(job, group, checkpoint) -> dict:
    """This rank's share of the validation set (an equal run of its rows, by rank) evaluated on ``checkpoint``:
    mean loss and metric times its rows, as the epochs' totals are (their sums over the ranks, divided by the
    rows, are the means over the whole set: the client's evaluation, up to the order of float sums)."""
    X, Y = job.validation
    size, rank = (group.size, group.rank) if job.mode == "allreduce" else (1, 0)
    bounds = np.linspace(0, len(X), size + 1).round().astype(int)
    a, b = bounds[rank], bounds[rank + 1]
    if b <= a:
        return {"val_loss": 0.0, "val_metric": 0.0, "val_rows": 0}
    loss, metric = job.problem.evaluate(checkpoint[0], checkpoint[2], X[a:b], Y[a:b])
    return {"val_loss": loss * (b - a), "val_metric": metric * (b - a), "val_rows": b - a}


def _copy_into(old, new):
    """A copy of ``new`` (arrays in tuples, lists and dicts), into ``old``'s arrays where they match: a fresh 3.7 MB
    array page-faults on a worker (malloc gives it back to the system every time: 12.6 ms for simplemlp's
    parameters and momentum, 0.3 ms into the last epoch's copy)."""
    if type(new) is np.ndarray:
        if type(old) is np.ndarray and old.shape == new.shape and old.dtype == new.dtype:
            np.copyto(old, new)
            return old
        return new.copy()
    if type(new) in (tuple, list) and type(old) is type(new) and len(old) == len(new):
        return type(new)(_copy_into(o, n) for o, n in zip(old, new))
    if type(new) is dict and type(old) is dict and old.keys() == new.keys():
        return {k: _copy_into(old[k], v) for k, v in new.items()}
    return copy.deepcopy(new)


def span_kept(name, dask_worker=None):
    """(last finished epoch, every finished epoch's totals) kept here for span ``name``; None when none is."""
    kept = SPANS.get(name)
    return None if kept is None else (kept["epoch"], kept["reports"])


def span_checkpoint(name, dask_worker=None):
    """The checkpoint kept here at the end of span ``name``'s last finished epoch (span_kept says which)."""
    return SPANS[name]["checkpoint"]


def drop_spans(names, dask_worker=None):
    """Free what the ranks of spans ``names`` kept on this worker."""
    for n in names:
        SPANS.pop(n, None)


def drop_held(names, dask_worker=None):
    """Free the checkpoints kept on this worker for segments ``names`` (their next segment will not run)."""
    names = set(names)
    for key in [k for k in HELD if k[0] in names]:
        HELD.pop(key, None)


def _take(carry):
    """(the checkpoint a segment starts from, whether it is this rank's own to change). ``carry`` is a checkpoint,
    or (driver.py) ``{"previous": the last segment's result}`` of rank 0 or of this rank, with ``"held"``: the key
    of this rank's own checkpoint in HELD when its result carries none."""
    if not isinstance(carry, dict):
        return carry, False
    if carry["previous"][0] is not None:
        return carry["previous"][0], False
    held = HELD.pop(carry.get("held"), None)
    if held is None:  # its worker lost it (or never had it): the driver reruns the segment from its own copy
        raise RankLost(f"the checkpoint of {carry.get('held')} is no longer on this worker")
    return held, True


def _state_views(problem, opt_state, size):
    """The optimizer's state for the flat vector (``init([pvec])``: one entry, None, an array or a tuple of arrays
    the vector's size) as one entry per parameter, views of it; None for any other form."""
    if len(opt_state) != 1:
        return None

    def split(x):
        if x is None:
            return [None] * len(problem.views(np.empty(size, np.int8)))
        if isinstance(x, np.ndarray) and x.ndim == 1 and x.size == size:
            return problem.views(x)
        if isinstance(x, tuple) and x:
            parts = [split(e) for e in x]
            if any(p is None for p in parts):
                return None
            return [tuple(p[i] for p in parts) for i in range(len(parts[0]))]
        return None

    return split(opt_state[0])


def _float_leaves(tree, out):
    """(container, key) of every float array in a layer-state tree (lists, tuples and dicts of arrays)."""
    items = tree.items() if type(tree) is dict else enumerate(tree) if type(tree) in (list, tuple) else ()
    for k, v in items:
        if type(v) is np.ndarray and v.dtype.kind == "f":
            out.append((tree, k))
        elif type(v) in (dict, list, tuple):
            _float_leaves(v, out)
    return out


def _mean_state(group, state):
    """The layers' running statistics (BatchNorm's means and variances) averaged over the ranks at the end of a
    segment, so the checkpoint is not rank 0's alone. Every rank had the same row count every step, so the mean
    of the ranks' running means is the running mean of the global batches' means."""
    state = copy.deepcopy(state)
    leaves = [(c, k) for c, k in _float_leaves(state, []) if type(c) is not tuple]
    if group.size == 1 or not leaves:
        return state
    buf = np.concatenate([np.ravel(c[k]).astype(np.float64) for c, k in leaves])
    group.allreduce(buf)
    buf /= group.size
    at = 0
    for c, k in leaves:
        n = c[k].size
        c[k] = buf[at:at + n].reshape(c[k].shape).astype(c[k].dtype)
        at += n
    return state
