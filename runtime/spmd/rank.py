"""What one rank runs: the loop, as one long-running Dask task on a worker holding a block of consecutive row tiles,
with the group of its peers (segments/ring.py) for the collectives, in its rank context (segments/rank.py).

The loop runs through the ordinary evaluator (fusion, inline fast paths) on this rank's shards and the replicated
values; the job carries the loop as a small program (the loop in a function of its free variables, returning
what it assigns), built on the client from the tree, never pickled code. A rank never raises for the user's code or
for a construct without an SPMD rule: it reports (``failed``), closes its group (its peers then stop at once, their
next collective sees the closed connection: ``lost``), and the client runs the loop as before."""
from __future__ import annotations

import collections
import threading
import time
import warnings
from dataclasses import dataclass

import numpy as np
from phylanx_py.primitives.fused import kernel_runs

from ..alignment import aligned, aligned_values
from ..base import Runtime
from ..code import ProgramCode
from ..executors import SynchronousExecutor
from ..segments import service
from ..segments.ports import RankLost
from ..segments.rank import PROGRESS, rank_context
from . import kept, stored
from .local import refresh_halo
from .protocol import shard_in
from .shard import NotSpmd, Rank, Shard, Transposed, resolve

_PROGRAMS: dict = {}  # the loop's key -> ProgramCode, per worker process
# A rank's tiles of an input joined into one array, by the tiles' keys (a key names one immutable result): the
# next segment over the same tiles (the next call of the loop) skips the copy. The last few only.
_JOINED: collections.OrderedDict = collections.OrderedDict()
JOINED_KEEP = 4
_LOCK = threading.Lock()
# A finished rank's tiles of its tiled outputs, by (segment, rank), until the client's piece tasks take them: the
# rank's own result is the small part only, so the client fetches it straight away (no extra task on the worker
# between the rank and the client). Bounded: a segment the client gave up on is dropped after a few more.
_TILES: collections.OrderedDict = collections.OrderedDict()
TILES_KEEP = 8
_CURRENT = threading.local()  # the Rank of the segment running in this thread (loop.Ticker counts iterations)


@dataclass(frozen=True)
class Job:
    """Everything the ranks of one segment share (placed on the cluster once)."""
    key: str  # the loop's identity: its program is built once per worker
    program: object  # ir.Program: the loop as a function of its free variables
    namespaces: dict  # module -> {name: value} of the globals the program reads
    params: tuple  # per free variable: ("tiled", halo, copy) or ("rep", value)
    outputs: tuple  # names the loop assigns
    writeback: tuple  # replicated free variables the loop may change in place (rank 0 returns them)
    starts: tuple  # first row of each rank
    counts: tuple  # rows of each rank
    tile_rows: tuple  # per rank, the row counts of its tiles in order
    ports: tuple  # per rank, its worker's ring port (segments/ports.py)
    timeout: float


def _program(job: Job) -> ProgramCode:
    with _LOCK:
        code = _PROGRAMS.get(job.key)
        if code is None:
            # no native tier on a rank: each rank would switch its inner loops to native code after its own hot
            # time, at different iterations, and native and interpreted results may differ in the last bit
            # (log, tanh): the ranks' replicated values must stay the same bits
            code = _PROGRAMS[job.key] = ProgramCode(job.program, job.namespaces, native=False)
        return code


def _root(exc):
    """The first NotSpmd or RankLost in an exception's chain (the evaluator wraps what kernels raise)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, (NotSpmd, RankLost)):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _joined(keys, tiles, worker):
    with _LOCK:
        _forget_released(worker)
        hit = _JOINED.get(keys)
        if hit is not None:
            _JOINED.move_to_end(keys)
            return hit
    out = np.concatenate(tiles)
    out.flags.writeable = False  # shared by later segments: a loop that assigns into it gets a copy (copy=True)
    with _LOCK:
        _JOINED[keys] = out
        while len(_JOINED) > JOINED_KEEP:
            _JOINED.popitem(last=False)
    return out


def _forget_released(worker):
    """Drop joined copies of tiles this worker no longer holds (the user's arrays are gone): the cache never keeps
    data alive past its tiles, beyond the next segment."""
    if worker is None:  # not on a worker (tests calling ranks directly)
        return
    held = worker.data
    for keys in [k for k in _JOINED if not all(key[5:] in held for key in k)]:
        del _JOINED[keys]


def _shards(job, rank: Rank, keys, tile_data, worker):
    """The loop's arguments on this rank: a shard per tiled input (its tiles joined, halo rows fetched), the
    replicated values as they came."""
    args, i = [], 0
    per = len(job.tile_rows[rank.rank])
    for p in job.params:
        if p[0] != "tiled":
            args.append(aligned_values(p[1]))  # a NumPy value the job carried, as Dask deserialized it
            continue
        _, halo, copy = p
        tiles = tile_data[i:i + per]
        if len(tiles) > 1:
            own = _joined(tuple(keys[i:i + per]), tiles, worker)
        else:  # the worker's stored tile itself (aligned: alignment.py): read-only here, so an assignment the
            own = aligned(tiles[0]).view()  # tree did not show fails
            own.flags.writeable = False
        i += per
        if copy and not halo:
            own = np.array(own)  # the loop assigns into it: its own copy (the tiles stay as they were)
        n = rank.starts[-1] + rank.counts[-1]
        x = Shard(None, n, halo, halo, 0, rank)
        lo, hi = x.avail
        if halo:
            data = np.empty((hi - lo,) + own.shape[1:], own.dtype)
            data[rank.a - lo:rank.a - lo + len(own)] = own
            x.data = data
            refresh_halo(x)
        else:
            x.data = own
        args.append(x)
    return args


def _pieces(x: Shard, rank: Rank, tile_rows):
    """An aligned shard's owned rows split at this rank's tile boundaries (the tiles of the result)."""
    if x.ragged is not None or x.t != 0 or x.n != rank.starts[-1] + rank.counts[-1]:
        raise NotSpmd("a value the loop leaves behind is a shifted slice or a masked selection of a tiled array")
    own = x.local(rank.a, rank.b)
    out, at = [], 0
    for r in tile_rows:
        out.append(np.ascontiguousarray(own[at:at + r]))
        at += r
    return out


def run_direct(worker, request):
    """A rank started by the client straight through the worker's ring port (segments/service.py), not as a Dask
    task: ``request`` is (the job's part: kept.py, the job's params, rank, size, name, tile keys, lease: see
    segments/rank.py). Its tiles are read from the worker's memory, where Dask keeps them for the client's futures;
    if one is not there (not computed yet, moved, spilled away), or the job is not (kept.py), the reply is
    ``missing`` and the client runs the segment through the scheduler instead."""
    part, params, rank, size, name, keys, lease = request
    recv = time.time()
    job = kept.job(part, params)
    if job is None:  # (peers that have started wait in ``join`` until the client aborts them)
        return {"missing": f"the job {part[1]} is not on this worker", "job": True}

    def take():
        data = worker.data
        return [data[k] if k in data else None for k in keys]

    tiles = service.on_worker_loop(worker, take)
    gone = [k for k, t in zip(keys, tiles) if t is None]
    if gone:  # (peers that have started wait in ``join`` until the client aborts them)
        return {"missing": f"tile {gone[0]!r} is not in this worker's memory"}
    return run_rank(job, rank, size, name, tuple(f"tile {k}" for k in keys), *tiles, worker=worker, lease=lease,
                    recv=recv, store=True)


def run_leased(lease, job: Job, rank: int, size: int, name: str, keys: tuple, *tile_data):
    """``run_rank`` as a Dask task whose group is kept under ``lease`` (segments/rank.py; None: none kept)."""
    return run_rank(job, rank, size, name, keys, *tile_data, lease=lease)


def run_rank(job: Job, rank: int, size: int, name: str, keys: tuple, *tile_data, worker=None, lease=None,
             recv=None, store=False):
    """Rank ``rank`` of ``size`` (a long-running Dask task; or a direct request's thread on ``worker``, see
    ``run_direct``). Returns a dict: ``ok`` with ``rep`` (rank 0: replicated outputs and write-backs), ``meta``
    (name -> trailing shape and dtype of a tiled output, or of a tiled input changed in place: this rank's tiles of
    it wait in ``_TILES`` for ``piece``) and ``stats``; or ``failed`` (a reason, ``declined``: no SPMD rule) or
    ``lost`` (a peer is gone). ``recv``: when the request arrived (time.time()), for the stats' ``clock``.
    ``store``: the tiles of tiled outputs go into the worker's memory as Dask data (``stored`` in the result:
    stored.py), not to ``_TILES`` for ``piece`` tasks."""
    recv = time.time() if recv is None else recv
    try:
        with rank_context(name, rank, size, job.ports, job.timeout, worker, lease) as group:
            return _run(job, rank, size, name, keys, tile_data, group, recv, store)
    except BaseException as e:  # noqa: BLE001 - reported to the client, which decides (see the module doc)
        root = _root(e)
        if isinstance(root, RankLost):
            return {"lost": str(root)}
        return {"failed": _describe(e), "declined": isinstance(root, NotSpmd)}


def _run(job, rank, size, name, keys, tile_data, group, recv, store):
    worker = group.worker
    formed = time.time()
    ctx = Rank(group, rank, size, job.starts, job.counts, PROGRESS, name)
    args = _shards(job, ctx, keys, tile_data, worker)
    code = _program(job)
    began = time.time()
    _CURRENT.rank = ctx
    runs0, kernel_s0 = kernel_runs()
    t0, comm0 = time.perf_counter(), group.comm_seconds
    with warnings.catch_warnings(record=True) as caught:  # NumPy's warnings go to the client (loop.py)
        warnings.simplefilter("always")
        try:
            result = Runtime(SynchronousExecutor(), inline_elements=1 << 62).evaluate(code, tuple(args), {})
        finally:
            _CURRENT.rank = None
        values = dict(zip(job.outputs, resolve(tuple(result))))
        ctx.settle()  # what the last iteration made and nothing read: its errors and warnings, as in NumPy
    ended = time.time()
    runs, kernel_s = kernel_runs()
    # where the rank's time went: compiled kernels (fused chains and reductions, per-label tables), the
    # collectives (waiting for peers included), and the rest (NumPy and the interpreter)
    ctx.stats.update(kernels=runs - runs0, kernel_s=kernel_s - kernel_s0, busy_s=time.perf_counter() - t0,
                     comm_s=group.comm_seconds - comm0)
    warned = list(dict.fromkeys((w.category, str(w.message)) for w in caught))
    rep, tiled, meta, back = {}, {}, {}, {}
    for nm, v in values.items():
        if type(v) is Shard:
            tiled[nm] = _pieces(v, ctx, job.tile_rows[rank])
            meta[nm] = (v.data.shape[1:], v.data.dtype)
        elif type(v) is Transposed or shard_in(v):
            raise NotSpmd(f"{nm!r} holds a tiled value inside a container, or transposed, after the loop")
        elif rank == 0:
            rep[nm] = v
    by_name = dict(zip(_param_names(job), args))
    # outputs that are the input's own shard (``X -= m``): the caller's array changes in place
    same = [nm for nm, v in values.items() if type(v) is Shard and by_name.get(nm) is v and v.mutated]
    for nm, v in by_name.items():
        if type(v) is Shard and v.mutated and nm not in tiled:
            tiled[nm] = _pieces(v, ctx, job.tile_rows[rank])
            meta[nm] = (v.data.shape[1:], v.data.dtype)
        elif rank == 0 and nm in job.writeback:
            back[nm] = resolve(v)
    ctx.stats["sent"] = group.sent
    ctx.stats["messages"] = group.messages  # counted by the group: what the report says went between ranks
    out = {}
    if tiled and store:
        out["stored"] = stored.store(worker, name, rank, tiled)
    elif tiled:
        with _LOCK:
            _TILES[(name, rank)] = {nm: list(ts) for nm, ts in tiled.items()}
            while len(_TILES) > TILES_KEEP:
                _TILES.popitem(last=False)
    # wall-clock times on this machine (time.time(), comparable with the client's on one host): the request's
    # arrival, the group ready, the loop's start and end, the reply made (benchmarks/spmd_call_cost.py)
    ctx.stats["clock"] = (recv, formed, began, ended, time.time())
    return {"ok": True, "rep": rep, "back": back, "meta": meta, "same": same, "warned": warned,
            "stats": ctx.stats, **out}


def _param_names(job):
    return job.program.function(job.program.entry).params


def _describe(e) -> str:
    root = _root(e)
    where = getattr(e, "loc", None)
    at = f" ({where.filename.rsplit('/', 1)[-1]}:{where.lineno})" if where is not None and where.lineno else ""
    if isinstance(root, NotSpmd):
        return f"{root}{at}"
    return f"{type(e).__name__}: {e}"


def piece(_result: dict, segment: str, rank: int, name: str, i: int):
    """Tile ``i`` of rank ``rank``'s part of output ``name`` (stays on the worker). ``_result``, the rank's
    future, orders it after the rank. The tiles are handed over once: a piece computed again (its worker died)
    has nothing to take, and says so rather than run the rank again without its group."""
    with _LOCK:
        tiles = _TILES.get((segment, rank), {}).get(name)
        if tiles is None or tiles[i] is None:
            raise RuntimeError(f"tile {i} of {name!r} from SPMD segment {segment} is gone (its worker was lost "
                               "after the loop ended): the loop's tiled results cannot be recomputed")
        out, tiles[i] = tiles[i], None
        if all(t is None for ts in _TILES[(segment, rank)].values() for t in ts):
            del _TILES[(segment, rank)]
    return out


service.SERVICES["spmd rank"] = run_direct
service.SERVICES["spmd progress"] = lambda worker, name: PROGRESS.get(name)
