"""A directly started segment's tiled outputs handed to Dask where they are: each rank puts its tiles of the loop's
tiled outputs into its worker's memory as Dask data (``Worker.update_data``, as ``Client.scatter`` does), and the
client tells the scheduler who holds them (one round trip: ``update_data``, as ``Client.scatter`` does) and makes
finished futures of them. No task runs, and the call waits for no worker.

Before, one ``piece`` task per output tile took the tile from the rank (rank.py ``_TILES``): the call then waited
for those tasks, through the scheduler and a worker's task thread, before returning: 15-33 ms of a 240 ms k-means
call on 8 tiles (benchmarks/spmd_call_cost.py), more than every other fixed cost of the call together. Segments run
as tasks (the path through the scheduler) still hand their tiles over that way.

The tiles have no lineage, as the ``piece`` tiles had none (a rank cannot be run alone again): a worker lost after
the call loses them, and the scheduler reports them lost (an error when they are read, never a wrong value). A
segment the client gives up (a peer failed or was lost) leaves its stored tiles to no one: its abort
(segments/rank.py ``ON_ABORT``) frees them, and a rank that stores after the abort frees its own.
"""
from __future__ import annotations

import collections
import threading

from ..segments import rank as segment_rank

# Segment name -> the keys its rank stored on this worker, until the client takes them or gives the segment up.
# Bounded (the oldest forgotten, not freed: its client took them long since).
_STORED: collections.OrderedDict = collections.OrderedDict()
STORED_KEEP = 64
_LOCK = threading.Lock()


def key(segment: str, output: str, rank: int, i: int) -> str:
    return f"{segment}-{output}-r{rank}-{i}"


# ---- the worker's side ------------------------------------------------------------------------------------
def store(worker, segment: str, rank: int, tiled: dict) -> dict:
    """Put ``tiled`` (output name -> this rank's tiles) into ``worker``'s memory; output name -> [(key, nbytes)]."""
    data, out = {}, {}
    for name, tiles in tiled.items():
        out[name] = []
        for i, t in enumerate(tiles):
            k = key(segment, name, rank, i)
            data[k] = t
            out[name].append((k, int(t.nbytes)))
    # Queued on the worker's event loop, not waited for: the client hears of the tiles in this rank's reply, and
    # the scheduler from the client after that, so anything asking this worker for them comes later still, to the
    # same loop, behind this. Queued before it is recorded for ``drop``, so a free is always queued behind it.
    worker.loop.add_callback(worker.update_data, data=data, stimulus_id=f"{segment}-stored")
    with _LOCK:
        _STORED[segment] = list(data)
        while len(_STORED) > STORED_KEEP:
            _STORED.popitem(last=False)
    if segment_rank.aborted(segment):  # given up while this rank stored (its abort may have found nothing yet)
        drop(segment, worker)
    return out


def drop(segment: str, worker):
    """Free what this worker's rank of ``segment`` stored (the client gave the segment up)."""
    with _LOCK:
        keys = _STORED.pop(segment, None)
    if keys and worker is not None:
        from distributed.worker_state_machine import FreeKeysEvent

        # (from the event loop, where client.run calls ``abort``, or from a rank's thread: never waited for)
        worker.loop.add_callback(worker.handle_stimulus,
                                 FreeKeysEvent(keys=keys, stimulus_id=f"{segment}-given-up"))


segment_rank.ON_ABORT.append(drop)


# ---- the client's side ------------------------------------------------------------------------------------
def adopt(cluster, workers, stored) -> dict:
    """Futures of the tiles the ranks stored: ``stored`` per rank (output name -> [(key, nbytes)]), ``workers`` the
    ranks' workers in the same order. Returns key -> future, finished, once the scheduler knows of them (the
    ``adopt`` of ``cluster``'s ``executors.Cluster`` protocol: one round trip)."""
    who_has, nbytes = {}, {}
    for w, per in zip(workers, stored):
        for pairs in per.values():
            for k, n in pairs:
                who_has[k], nbytes[k] = [w], n
    if not who_has:
        return {}
    return cluster.adopt(who_has, nbytes)
