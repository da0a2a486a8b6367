"""A segment's job kept on the workers across calls: what does not change from one call of a loop to the next on
the same placement (the loop's program and the globals it reads, its outputs, the ranks' rows and ports) is
pickled once on the client and sent once to each rank's worker, which keeps it; a later call sends only its key
and what changes (the replicated values: ``Job.params``).

The program is a tree of IR dataclasses: pickling it took ~0.6 ms a rank for k-means on the client and as much
again to unpickle on the worker, every call (benchmarks/spmd_call_cost.py). A worker that no longer has a job (it
was restarted, or kept newer ones) says so; the call then runs through the scheduler with the whole job, as a call
whose tiles are not in place does, and the client sends the job again to that port next time.
"""
from __future__ import annotations

import collections
import dataclasses
import threading
import uuid
import weakref

# ---- the worker's side ------------------------------------------------------------------------------------
_JOBS: collections.OrderedDict = collections.OrderedDict()  # key -> the static Job (params ()), the newest last
JOBS_KEEP = 32
_LOCK = threading.Lock()


def job(part, params):
    """The Job of a request: ``part`` is ("job", key, pickled static job) the first time, ("key", key) after; None
    when this worker does not have the job of that key."""
    from distributed.protocol import pickle

    with _LOCK:
        static = _JOBS.get(part[1])
        if static is not None:
            _JOBS.move_to_end(part[1])
    if static is None:
        if part[0] != "job":
            return None
        static = pickle.loads(part[2])
        with _LOCK:
            _JOBS[part[1]] = static
            while len(_JOBS) > JOBS_KEEP:
                _JOBS.popitem(last=False)
    return dataclasses.replace(static, params=params)


# ---- the client's side ------------------------------------------------------------------------------------
# Per cluster (executor): the static part of a job -> (its key, its pickle), the last few; and per port address,
# the keys sent there (a port is a worker process: a restarted worker has another).
_MADE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SENT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
MADE_KEEP = 16
_CLIENT_LOCK = threading.Lock()


def _static(job):
    kinds = tuple(p if p[0] == "tiled" else ("rep",) for p in job.params)
    return (job.key, kinds, job.outputs, job.writeback, job.starts, job.counts, job.tile_rows, job.ports,
            job.timeout)


def parts(cluster, job) -> list:
    """Per rank, the job part of its request (see ``job``)."""
    from distributed.protocol import pickle

    ident = _static(job)
    with _CLIENT_LOCK:
        made = _MADE.setdefault(cluster, collections.OrderedDict())
        hit = made.get(ident)
        if hit is not None:
            made.move_to_end(ident)
    if hit is None:
        hit = (f"phylanx-job-{uuid.uuid4().hex[:12]}", pickle.dumps(dataclasses.replace(job, params=())))
        with _CLIENT_LOCK:
            made[ident] = hit
            while len(made) > MADE_KEEP:
                made.popitem(last=False)
    key, data = hit
    out = []
    with _CLIENT_LOCK:
        sent = _SENT.setdefault(cluster, {})
        for port in job.ports:
            keys = sent.setdefault(port, collections.OrderedDict())
            if key in keys:
                keys.move_to_end(key)
                out.append(("key", key))
            else:
                out.append(("job", key, data))
    return out


def sent(cluster, job, parts_):
    """The ranks took their requests (every rank replied): the workers keep the job."""
    with _CLIENT_LOCK:
        per = _SENT.setdefault(cluster, {})
        for port, part in zip(job.ports, parts_):
            keys = per.setdefault(port, collections.OrderedDict())
            keys[part[1]] = None
            while len(keys) > JOBS_KEEP // 2:  # (fewer than a worker keeps: two clients may share it)
                keys.popitem(last=False)


def forget(cluster, ports):
    """The workers at ``ports`` may not have their jobs (one said so): send them again."""
    with _CLIENT_LOCK:
        per = _SENT.get(cluster, {})
        for p in ports:
            per.pop(p, None)
