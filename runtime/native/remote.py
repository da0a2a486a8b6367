"""The native loop tier on a Dask cluster: a loop the native tier can lower, whose array free variables live on the
workers (tiled arrays that the SPMD tier declined, or Dask futures of NumPy arrays), runs as one task on a worker:
the tiles are put together there, the loop's kernel (the generated source, loaded through the verified kernel
cache, so it is compiled once per machine and loaded by the other workers) runs on them, and the arrays it changed
go back as tiles where their old tiles lived. Interpreted, such a loop paid a task or a fetch per element operation.

What stays exact: the worker changes copies (never a Dask result another task may read), so a kernel that stops
(an overflow past 2**63, a Numba typing failure) reruns the loop interpreted on the client with nothing changed;
arrays the loop changes are changed for the caller (a tiled array gets the new tiles, a NumPy array is copied into,
a Dask future's value is fetched and is what later reads of it see, as the interpreted loop's change would be); a
kernel that raises is an ExecutionError at the loop's line (generated code's hand-over), a worker that dies is
survived by Dask's rerun of the task from lineage. Small results come back with the task's summary; a large new
array stays on the worker as a future.

A loop whose iterations are independent and touch only their own rows and a halo (per_tile.py) runs as one task
per tile instead, on the worker holding the tile; any other runs in one task, on the worker Dask picks (the one
holding most of the loop's data). What the tasks run is on_workers.py. ``PHYLANX_NATIVE=0`` turns the tier off with
the native tier.
"""
from __future__ import annotations

import time
import uuid

import numpy as np

from phylanx_py import ir

from .. import loop_tiers
from ..tiled.array import TiledArray
from ..tiled.grid import indices
from ..tiled.views import root
from . import kinds as K
from . import on_workers as W
from . import per_tile
from .loop import NativeLoop
from .tiering import current_mode, sequential_module

PER_TILE = True  # tile-local loops run one task per tile (per_tile.py); False: in one task (benchmarks compare)


class RemoteLoop(NativeLoop):
    """One loop's native tier on the workers (see the module doc). Lowering is NativeLoop's, on stand-ins of the
    remote arrays (their dtype and dimensions decide the kernel); only running differs."""

    part_of_whole = False
    ahead_of_time = False  # (its kernels are compiled and run on the workers, by their own processes)
    native_code = False  # (codegen's ``native_loops`` lists the local tier's loops: benchmarks read their entries)
    all_writes = True  # the arrays the kernel may change go back to the caller
    lowers_beside_here = False  # (its signatures are lowered in the call, as its first run on the workers needs them)
    cluster_inputs = True  # explain(): its line is about the cluster's arrays, as the SPMD tier's before it

    @classmethod
    def factory(cls, fn, loop, where, program, namespaces):
        if current_mode() == "off":
            return None
        return cls(fn, loop, where, functions=dict(program.functions))

    def __init__(self, fn, loop, where, functions=None):
        super().__init__(fn, loop, where, functions=functions)
        self.seen = False  # called with remote arrays at least once (explain() says nothing before)
        self.remote_runs = 0
        self.tasks = 0
        self._meta: dict = {}  # future key -> (type, dtype, ndim): what a remote value is, asked once
        self.elements = _element_accessed(loop)
        self.fn = fn
        self._tile_loops: dict = {}  # tiled names -> (TileLoop, its NativeLoop) or why it cannot run per tile
        self.tile_reason = None  # why the latest run was not per tile
        self.per_tile = None  # (tiles, tasks, pick tasks, halo below, above, halo tasks) of the latest per-tile run

    def __call__(self, ev, args):
        remote = _remote_positions(args)
        if not remote:  # (the type scan first: every loop start on local data passes here)
            return None
        self.seen = True
        self.last = None
        if current_mode() == "off" or self.plan.reason:
            return None
        if not any(self.params[i] in self.elements for i in remote):
            # whole-array work (``X.T @ r``, ``u[1:-1] = ...``): the tiles' own tasks do it on every worker at
            # once (or the SPMD tier did), where one task would put it all on one worker
            self.reason = "it reads no single elements of the cluster's arrays (their tasks do whole-array work)"
            return None
        executor = ev.executor
        client = getattr(executor, "client", None)
        if client is None:
            self.reason = "the futures are not Dask's"
            return None
        if ev.memo:  # values already fetched (perhaps changed here) are local now
            args = tuple(ev.memo.get(a, a) if i in remote and not _is_tiled(a) else a for i, a in enumerate(args))
            remote = _remote_positions(args)
            if not remote:  # (the interpreted loop reads the fetched values, as before)
                return None
        try:
            stand_ins = self._stand_ins(ev, client, args, remote)
        except _Decline as e:
            self.reason = str(e)
            return None
        entry = self.entry(stand_ins)
        if entry is None:
            return None
        self.last = entry
        if entry.declined:
            return None
        shared = _shared(args, remote, entry.writes)
        if shared is not None:  # each name gets a copy on the worker: a change through one would miss the other
            self.reason = f"{self.params[shared[0]]!r} and {self.params[shared[1]]!r} share their data and the " \
                          "loop changes one"
            self.last = None
            return None
        if ev.pending:
            ev.wait_all(raise_errors=False)  # (as the local tier: tasks still reading arrays the loop may change)
        done = self._run_tiles(ev, client, args, remote)
        if done is not None:
            return done
        return self._run_remote(ev, client, entry, args, remote)

    # ---- per tile ------------------------------------------------------------------------------------------
    def _run_tiles(self, ev, client, args, remote):
        """The loop run as one task per tile (per_tile.py says which loops may), or None (``tile_reason``)."""
        self.per_tile = None
        if not PER_TILE:
            self.tile_reason = "the per-tile form is off (remote.PER_TILE)"
            return None
        tiled = [i for i in remote if _is_tiled(args[i])]
        if len(tiled) != len(remote):
            self.tile_reason = "some of its arrays are Dask futures"
            return None
        first = args[tiled[0]]
        bounds = tuple(first.boundaries[0])
        for i in tiled:
            a = args[i]
            if tuple(a.boundaries[0]) != bounds or any(len(b) != 2 for b in a.boundaries[1:]):
                self.tile_reason = f"{self.params[i]!r} is not split by rows as {self.params[tiled[0]]!r} is"
                return None
        names = frozenset(self.params[i] for i in tiled)
        key = tuple(sorted((self.params[i], args[i].ndim) for i in tiled))
        hit = self._tile_loops.get(key)
        if hit is None:
            tp = per_tile.plan(self.fn, self.plan.loop, dict(key), self.plan.outputs)
            hit = self._tile_loops[key] = tp if isinstance(tp, str) else (
                tp, NativeLoop(tp.fn, tp.loop, self.where, functions=self.functions))
            if not isinstance(tp, str):
                hit[1].all_writes = True  # the arrays its kernel may change go back as tiles
        if isinstance(hit, str):
            self.tile_reason = hit
            return None
        tp, native = hit
        values = dict(zip(self.params, args))
        start, stop = (per_tile.evaluate(b, values) for b in tp.bounds)
        n = int(bounds[-1])
        if start is None or stop is None:
            self.tile_reason = "its range's bounds are not numbers known before it starts"
            return None
        below, above = (max(h[d] for h in tp.halo.values()) for d in (0, 1))
        if start < stop and (start - below < 0 or stop - 1 + above >= n):
            self.tile_reason = "it reads rows outside the arrays (a negative index wraps around in Python)"
            return None
        if native.plan.reason:
            self.tile_reason = native.plan.reason
            return None
        own = {per_tile.LO: 0, per_tile.HI: 1, **{per_tile.off(t): 0 for t in names}}
        stand = tuple(own[p] if p in own else (np.zeros((2,) * values[p].ndim, values[p].dtype)
                                                if p in names else values[p]) for p in native.plan.params)
        entry = native.entry(stand)
        if entry is None or entry.declined:
            self.tile_reason = (entry.declined if entry is not None else native.reason) or "the tile loop declined"
            return None
        written = [native.plan.params[i] for i in entry.writes if type(entry.kinds[i]) is np.ndarray]
        if any(w not in names for w in written):
            self.tile_reason = "it may change an array that is not tiled"
            return None
        writes = tuple(native.plan.params.index(w) for w in written)
        module = sequential_module(entry.printed)  # the kernel's module text, loaded on each worker
        runs, skipped = {}, []
        self.tasks = 0
        for k in range(len(bounds) - 1):
            a, b = int(bounds[k]), int(bounds[k + 1])
            lo, hi = max(start, a), min(stop, b)
            if lo >= hi:
                skipped.append(k)
                continue
            specs, flat, starts = [], [], {per_tile.LO: lo, per_tile.HI: hi}
            for p in native.plan.params:
                if p in names:  # its slab: the tile, and the halo rows cut from its neighbours where they are
                    s0, e0 = max(0, a - tp.halo[p][0]), min(n, b + tp.halo[p][1])
                    starts[per_tile.off(p)] = s0
                    futs, cuts = values[p].futures.reshape(-1), []
                    for t in range(len(bounds) - 1):
                        r0, r1 = max(s0, bounds[t]) - bounds[t], min(e0, bounds[t + 1]) - bounds[t]
                        if r0 < r1:
                            cuts.append((r0, r1) if t == k else None)
                            flat.append(futs[t] if t == k else client.submit(
                                W.rows, futs[t], r0, r1, key=f"halo-{uuid.uuid4().hex}", pure=False))
                            self.tasks += t != k
                    specs.append(("slab", len(flat) - len(cuts), tuple(cuts)))
                else:
                    specs.append(("value", len(flat)))
                    flat.append(p)  # (filled below, once every slab's start is known)
            for p, spec in zip(native.plan.params, specs):
                if spec[0] == "value":
                    v = starts[p] if p in starts else values.get(p)
                    flat[spec[1]] = ev.executor._upload(v, ev) if type(v) is np.ndarray else v
            rows = tuple((a - starts[per_tile.off(w)], b - starts[per_tile.off(w)]) for w in written)
            home = first._homes[(k,) + (0,) * (first.ndim - 1)] if first._homes is not None else None
            key = f"native-tile@{self.where.replace(':', '-')}-{k}-{uuid.uuid4().hex}"
            runs[k] = client.submit(W.run_tile, module, tuple(specs), writes, rows, *flat, key=key,
                                    pure=False, **({"workers": [home], "allow_other_workers": True} if home else {}))
        statuses = [client.submit(W.status, runs[k], key=f"status-{runs[k].key}", pure=False)
                    for k in sorted(runs)]
        ev.executor.wait(statuses)
        for st in statuses:  # in the tiles' order: the error the loop meets first is the one raised
            got = ev.executor.result(st)
            if got[0] == "rerun":
                native.decline(entry, got[1])
                self.tile_reason = got[1]
                return None
        for j, w in enumerate(written):
            a = values[w]
            old = a.futures
            futs = np.empty(old.shape, dtype=object)
            for k in range(len(bounds) - 1):
                idx = (k,) + (0,) * (old.ndim - 1)
                futs[idx] = old[idx] if k in skipped else client.submit(
                    W.pick, runs[k], j, key=f"tile-{uuid.uuid4().hex}", pure=False)
            a._become(TiledArray(a._executor, a.boundaries, a.dtype, futures=futs, homes=a._homes))
        entry.native_runs += 1
        self.remote_runs += 1
        self.per_tile = (len(bounds) - 1, len(runs), len(written) * len(runs), below, above, self.tasks)
        self.tile_reason = self.reason = None
        return tuple(values[o] for o in self.plan.outputs)

    # ---- what the remote values are ------------------------------------------------------------------------
    def _stand_ins(self, ev, client, args, remote):
        """The arguments with each remote array replaced by a small local array of its dtype and dimensions."""
        out = list(args)
        futures = [args[i] for i in remote if not _is_tiled(args[i]) and args[i].key not in self._meta]
        if futures:
            metas = client.gather(client.map(W.meta, futures, key=[f"meta-{f.key}" for f in futures], pure=False))
            for f, m in zip(futures, metas):
                self._meta[f.key] = m
            if len(self._meta) > 1024:  # (keys of released futures are never asked again)
                self._meta = dict(list(self._meta.items())[-512:])
        for i in remote:
            a = args[i]
            if _is_tiled(a):
                if any(b != b for bs in a.boundaries for b in bs):
                    raise _Decline(f"{self.params[i]!r} has tiles of unknown size (a boolean mask made it)")
                dtype, ndim = a.dtype, a.ndim
            else:
                kind, dtype, ndim = self._meta[a.key]
                if kind != "ndarray":  # a scalar or a container computed remotely: its value, here
                    out[i] = ev.wait(a)
                    continue
            out[i] = np.zeros((2,) * ndim, dtype) if ndim else np.zeros((), dtype)
        return tuple(out)

    # ---- a run ---------------------------------------------------------------------------------------------
    def _run_remote(self, ev, client, entry, args, remote):
        specs, flat = [], []
        for i, a in enumerate(args):
            if i in remote and _is_tiled(a):
                futs = a.futures  # computes a lazy array first
                specs.append(("tiled", futs.shape, len(flat)))
                flat += list(futs.reshape(-1))
            elif i in remote:
                specs.append(("remote", len(flat)))
                flat.append(a)
            else:
                specs.append(("value", len(flat)))
                flat.append(ev.executor._upload(a, ev) if type(a) is np.ndarray else a)
        conv = self._conversions(entry)
        writes = tuple(i for i in entry.writes if type(entry.kinds[i]) is np.ndarray)
        where = self.where.replace(":", "-")
        key = f"native-loop@{where}-{uuid.uuid4().hex}"
        run = client.submit(W.run_loop, sequential_module(entry.printed), tuple(specs), conv, writes, *flat, key=key,
                            pure=False)
        summary = client.submit(W.summary, run, writes, tuple(i in remote and _is_tiled(args[i]) for i in writes),
                                key=f"summary-{key}", pure=False)
        self.tasks = 2
        t0 = time.perf_counter()
        got = ev.executor.result(summary)  # a kernel's error raises here; a lost worker's task reruns
        if got[0] == "rerun":  # nothing changed anywhere: the interpreted loop runs from the same values
            self.decline(entry, got[1])
            return None
        _, values, written, same = got
        for pos, i in enumerate(writes):  # the arrays the loop changed, changed for the caller
            a = args[i]
            if _is_tiled(a):
                a._become(self._new_tiles(client, a, run, pos))
                self.tasks += int(np.prod(a.tiles))
            elif i in remote:
                ev.memo[a] = written[pos]
            else:
                a[...] = written[pos]
        outs = []
        for o, (v, j) in enumerate(zip(values, same)):
            if j is not None:  # the very object the loop was given (changed in place, or not at all)
                outs.append(args[j])
            elif type(v) is W.Big:
                outs.append(client.submit(W.output, run, o, key=f"output-{o}-{key}", pure=False))
                self.tasks += 1
            else:
                outs.append(v)
        entry.native_runs += 1
        self.remote_runs += 1
        self.reason = None
        if ev.profile is not None:
            ev.profile.record(self.plan.loop.loc, "native loop on a worker", time.perf_counter() - t0, "native",
                              "1 task")
        return tuple(outs)

    def _conversions(self, entry):
        """(position in the kernel's result, kind, flag position or None) per output, as NativeLoop's converter."""
        outputs, n = self.plan.outputs, len(self.plan.outputs)
        flags = list(entry.flags)
        return tuple((i, entry.flags[name], n + flags.index(name)) if name in entry.flags
                     else (i, entry.kinds[self.plan.params.index(name)], None) for i, name in enumerate(outputs))

    def _new_tiles(self, client, a, run, pos):
        """A tiled array with ``a``'s grid whose tiles are the run's written array ``pos``, each cut on the worker
        that held the old tile (its home), so the tiles stay spread as they were."""
        bounds = a.boundaries
        homes = a._homes
        futs = np.empty(a.tiles, dtype=object)
        for idx in indices(bounds):
            sl = tuple(slice(int(bounds[d][k]), int(bounds[d][k + 1])) for d, k in enumerate(idx))
            home = homes[idx] if homes is not None else None
            placement = {"workers": [home], "allow_other_workers": True} if home else {}
            futs[idx] = client.submit(W.cut, run, pos, sl, key=f"tile-{uuid.uuid4().hex}", pure=False, **placement)
        return TiledArray(a._executor, bounds, a.dtype, futures=futs, homes=homes)

    def explain(self) -> list[str]:
        if not self.seen:
            return []
        head = f"loop at {self.where} ->"
        entry = self.last
        if self.plan.reason:
            return [f"{head} not native on the workers: {self.plan.reason}"]
        if entry is None or entry.declined:
            why = entry.declined if entry is not None and entry.declined else self.reason
            return [f"{head} not native on the workers: {why}"]
        sig = ", ".join(K.describe(k) for k in entry.kinds)
        if self.per_tile is not None:
            tiles, runs, picks, below, above, halos = self.per_tile
            return [f"{head} native on the workers, per tile ({len(entry.kinds)} args: {sig}; {self.remote_runs} "
                    f"runs; the latest: {runs} tasks running the loop on {tiles} tiles, each reading up to {below} "
                    f"rows below and {above} above its own ({halos} tasks cutting those rows from the neighbours), "
                    f"{picks} taking the changed tiles apart)"]
        why = f"; not per tile: {self.tile_reason}" if self.tile_reason else ""
        return [f"{head} native on the workers ({len(entry.kinds)} args: {sig}; {self.remote_runs} runs; the "
                f"latest: 1 task running the loop, {self.tasks - 1} taking its results apart{why})"]


class _Decline(Exception):
    pass


def _element_accessed(loop) -> frozenset:
    """Names the loop indexes by single elements or rows (``X[i, j]``, ``u[i - 1] = v``: no slice, no new axis),
    which the cluster's arrays serve only a task or a fetch at a time."""
    def element_key(key) -> bool:
        return not any((isinstance(n, ir.Call) and n.prim == "python.slice") or
                       (isinstance(n, ir.Const) and n.value is None) for n in ir.walk(key))

    names = set()
    for n in ir.walk(loop):
        if isinstance(n, ir.StoreItem) and isinstance(n.obj, ir.Var) and element_key(n.key):
            names.add(n.obj.name)
        elif isinstance(n, ir.Call) and n.prim == "operator.getitem" and len(n.args) == 2 and \
                isinstance(n.args[0], ir.Var) and element_key(n.args[1]):
            names.add(n.args[0].name)
    return frozenset(names)


def _shared(args, remote, writes):
    """Two positions of remote arguments holding the same data (a tiled array and a view of it, one future twice),
    one of which the kernel may change, or None."""
    seen = {}
    for i in sorted(remote):
        a = args[i]
        ident = id(root(a)) if _is_tiled(a) else a.key
        j = seen.setdefault(ident, i)
        if j != i and (i in writes or j in writes):
            return j, i
    return None


def _is_tiled(a) -> bool:
    return type(a) is TiledArray


def _remote_positions(args) -> frozenset:
    out = []
    for i, a in enumerate(args):
        t = type(a)
        if t is TiledArray or (t.__name__ == "Future" and t.__module__.startswith("distributed")):
            out.append(i)
    return frozenset(out)


def factory(fn, loop, where, program, namespaces):
    return RemoteLoop.factory(fn, loop, where, program, namespaces)


# after the SPMD tier (a loop it takes runs as a segment), before the native tier on local arrays
loop_tiers.register(factory, native=True, order=50)
