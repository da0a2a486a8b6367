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

Not per tile yet: the whole loop runs in one task, on one worker (the one Dask picks: it holds the most of the
loop's data). ``PHYLANX_NATIVE=0`` turns it off with the native tier.
"""
from __future__ import annotations

import time
import uuid

import numpy as np

from phylanx_py import ir

from .. import loop_tiers
from ..alignment import aligned
from ..tiled.array import TiledArray
from ..tiled.grid import indices
from . import kinds as K
from .loop import NativeLoop, _restore
from .tiering import current_mode, load_sequential

SMALL_BYTES = 1 << 20  # a new array result up to this size comes back with the summary; larger ones stay remote


class RemoteLoop(NativeLoop):
    """One loop's native tier on the workers (see the module doc). Lowering is NativeLoop's, on stand-ins of the
    remote arrays (their dtype and dimensions decide the kernel); only running differs."""

    part_of_whole = False
    native_code = False  # (codegen's ``native_loops`` lists the local tier's loops: benchmarks read their entries)
    all_writes = True  # the arrays the kernel may change go back to the caller
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
        return self._run_remote(ev, client, entry, args, remote)

    # ---- what the remote values are ------------------------------------------------------------------------
    def _stand_ins(self, ev, client, args, remote):
        """The arguments with each remote array replaced by a small local array of its dtype and dimensions."""
        out = list(args)
        futures = [args[i] for i in remote if not _is_tiled(args[i]) and args[i].key not in self._meta]
        if futures:
            metas = client.gather(client.map(_meta, futures, key=[f"meta-{f.key}" for f in futures], pure=False))
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
        if ev.pending:
            ev.wait_all(raise_errors=False)  # (as the local tier: tasks still reading arrays the loop may change)
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
        run = client.submit(run_loop, entry.source, tuple(specs), conv, writes, *flat, key=key, pure=False)
        summary = client.submit(_summary, run, writes, tuple(i in remote and _is_tiled(args[i]) for i in writes),
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
            elif type(v) is _Big:
                outs.append(client.submit(_output, run, o, key=f"output-{o}-{key}", pure=False))
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
            futs[idx] = client.submit(_cut, run, pos, sl, key=f"tile-{uuid.uuid4().hex}", pure=False, **placement)
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
        return [f"{head} native on the workers ({len(entry.kinds)} args: {sig}; {self.remote_runs} runs; the "
                f"latest: 1 task running the loop, {self.tasks - 1} taking its results apart)"]


class _Decline(Exception):
    pass


class _Big:
    """Stands for a large new array a run left on its worker (the summary does not carry it)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


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


def _is_tiled(a) -> bool:
    return type(a) is TiledArray


def _remote_positions(args) -> frozenset:
    out = []
    for i, a in enumerate(args):
        t = type(a)
        if t is TiledArray or (t.__name__ == "Future" and t.__module__.startswith("distributed")):
            out.append(i)
    return frozenset(out)


# ---- what the workers run ----------------------------------------------------------------------------------
def _meta(value):
    """(kind, dtype, ndim) of a remote value: "ndarray" for a NumPy array, else its type's name."""
    if type(value) is np.ndarray:
        return "ndarray", value.dtype, value.ndim
    return type(value).__name__, None, None


def run_loop(source, specs, conv, writes, *flat):
    """On a worker: the loop's arguments put together (tiles joined, arrays the kernel may change copied: they are
    Dask's results, which other tasks read), the kernel run, and ("ok", outputs, arguments) or ("rerun", why)."""
    args = []
    for spec in specs:
        if spec[0] == "tiled":
            shape, at = spec[1], spec[2]
            tiles = np.empty(shape, dtype=object)
            for k, t in enumerate(flat[at:at + int(np.prod(shape))]):
                tiles.reshape(-1)[k] = t
            args.append(aligned(np.block(tiles.tolist()) if tiles.size > 1 else np.array(tiles.reshape(-1)[0])))
        else:
            args.append(flat[spec[1]])
    for i in writes:
        if specs[i][0] != "tiled":
            args[i] = aligned(np.array(args[i]))  # a copy: the kernel changes it
    args = [aligned(a) if type(a) is np.ndarray else a for a in args]
    given = list(args)
    module = load_sequential(source)
    try:
        out = module.kernel(*args)
    except module._Overflow as e:
        why = e.args[0] if e.args else "a Python int grew past 2**63 or did not fit a small int dtype"
        return ("rerun", f"{why}: the loop reran interpreted", (), ())
    except Exception as e:
        from numba.core.errors import NumbaError

        if isinstance(e, NumbaError):
            return ("rerun", f"Numba: {str(e).strip().splitlines()[0][:200]}", (), ())
        raise
    values = tuple(_restore(out[i], kind if flag is None else (kind.np if out[flag] else kind.py))
                   for i, kind, flag in conv)
    return ("ok", values, tuple(given[i] for i in writes), tuple(given))


def _summary(run, writes, tiled):
    """What the client needs of a run: its outputs (large new arrays as ``_Big``, the arguments it was given as
    their positions), and the changed arrays that are not tiled (those are cut into tiles on the workers)."""
    if run[0] == "rerun":
        return run[:2]
    _, values, written, given = run
    small, same = [], []
    for v in values:
        j = next((k for k, g in enumerate(given) if g is v and type(v) is np.ndarray), None)
        same.append(j)
        if j is None and type(v) is np.ndarray and v.nbytes > SMALL_BYTES:
            small.append(_Big(v.shape, v.dtype))
        else:
            small.append(None if j is not None else v)
    return ("ok", tuple(small), tuple(None if t else w for w, t in zip(written, tiled)), tuple(same))


def _output(run, o):
    return run[1][o]


def _cut(run, pos, sl):
    return aligned(np.array(run[2][pos][sl]))


def factory(fn, loop, where, program, namespaces):
    return RemoteLoop.factory(fn, loop, where, program, namespaces)


# after the SPMD tier (a loop it takes runs as a segment), before the native tier on local arrays
loop_tiers.register(factory, native=True, order=50)
