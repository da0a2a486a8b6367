"""The SPMD loop tier: a loop whose free variables include tiled arrays runs as one segment on the workers (one
long-running task per worker over the row tiles it holds; rank.py), instead of a round of tile tasks per operation.

Which loops: any outermost loop (loop_tiers.py) that does not return from inside, print or draw random numbers
(those run on the client, in order), and whose tiled inputs are split along their rows only, on the same row
tiles. Whether every operation on the tiles has an SPMD form is found by running it: a rank that meets one
without (``np.sort`` of a column of tiles) reports why, nothing has changed on the client (the ranks work on
copies), and the loop runs as before, from the same values; that signature is not tried again. ``explain()``
shows the decision: "loop at kmeans.py:6 -> SPMD over 2 workers: 10 iterations, ...", or why not.

``PHYLANX_SPMD=0`` turns the tier off (the benchmark's "today's tiled path").
"""
from __future__ import annotations

import os
import time
import uuid
import warnings

import numpy as np
from phylanx_py.primitives import IO, MUTATES, RAISES, STATE, lookup

from phylanx_py import ir

from .. import loop_tiers
from ..alignment import aligned_values
from ..executors import Cluster
from ..loop_tiers import UNBOUND
from ..native.analysis import _names
from ..segments.driver import STALL_SECONDS
from ..tiled import views
from ..tiled.array import TiledArray
from . import driver, fission, stored
from . import kind as _kind  # noqa: F401 - shards become a value kind on the ranks
from . import rank as rank_task
from .shard import holds

TICK = "__phylanx_spmd_tick"
TIMEOUT_SECONDS = 600.0  # a rank waiting this long for a peer's data gives up (the driver's stall check is first)


def mode() -> str:
    return "off" if os.environ.get("PHYLANX_SPMD", "1").strip().lower() in ("0", "off") else "on"


class Ticker:
    """``tick[0]`` counts an iteration of the rank's loop (the first statement of its body on the ranks), and sends
    the sums the last iteration left waiting and computes what it made of them (``Rank.settle``): batches never
    span iterations, so waiting sums stay few and small, and what a value nobody read raises or warns is raised
    or warned in its iteration."""

    def __getitem__(self, _):
        rank = getattr(rank_task._CURRENT, "rank", None)
        if rank is not None:
            rank.stats["iterations"] += 1
            rank.settle()


def _walk_outside_lambdas(node):
    if isinstance(node, ir.Lambda):
        return
    yield node
    for c in ir.children(node):
        yield from _walk_outside_lambdas(c)


def _key_first(key):
    """The node indexing axis 0 in a subscript key (a tuple's first item)."""
    if isinstance(key, ir.Call) and key.prim == "python.tuple" and key.args:
        return key.args[0]
    return key


def _root(node):
    """The variable a chain of subscripts starts from (``out[j][0]`` -> ``out``), else the node itself."""
    while isinstance(node, ir.Call) and node.prim == "operator.getitem" and node.args:
        node = node.args[0]
    return node


def _has_bounds(node) -> bool:
    if isinstance(node, ir.Call) and node.prim == "python.slice":
        return any(not (isinstance(a, ir.Const) and a.value is None) for a in node.args[:2])
    return False


class SpmdLoop:
    """One loop's SPMD tier (see the module doc)."""

    accepts_unbound = True

    def __init__(self, fn: ir.Function, loop, where: str, program: ir.Program, namespaces: dict):
        self.fn, self.loop, self.where, self.program, self.namespaces = fn, loop, where, program, namespaces
        reads, writes, closures = set(), set(), set()
        _names(loop, reads, writes, closures)
        out_reads, out_writes, out_closures = set(), set(), set()
        _names(fn.body, out_reads, out_writes, out_closures, skip=loop)
        outside = out_reads | out_writes | out_closures | set(fn.params) | set(fn.kwonly)
        used = reads | writes | closures
        self.params = sorted(n for n in used if n in outside)
        self.outputs = [n for n in self.params if n in writes]
        self.static_reason = self._reason()
        self.mutable, self.halo = set(), set()
        for n in ir.walk(loop):
            if isinstance(n, ir.StoreItem) and isinstance(_root(n.obj), ir.Var):
                self.mutable.add(_root(n.obj).name)  # ``out[j, 0] = v``, ``out[j][0] = v``: out changes
                if isinstance(n.obj, ir.Var) and _has_bounds(_key_first(n.key)):
                    self.halo.add(n.obj.name)
            elif isinstance(n, ir.Call) and n.args and isinstance(_root(n.args[0]), ir.Var):
                if lookup(n.prim).effect == MUTATES:
                    self.mutable.add(_root(n.args[0]).name)
                if n.prim == "operator.getitem" and len(n.args) == 2 and _has_bounds(_key_first(n.args[1])):
                    self.halo.add(_root(n.args[0]).name)  # x[::-1][1:] too: its rows are x's
        self.key = uuid.uuid4().hex
        self._job_parts = None
        self.split = False  # the rank program has loops split by fission.py (it takes an Apart)
        self.declined: dict = {}  # signature -> reason
        self.reason = None  # the latest reason it did not run, for explain()
        self.report = None  # what the latest segment did
        self.seen = False  # called with tiled inputs at least once

    def _reason(self):
        for n in _walk_outside_lambdas(self.loop):
            if isinstance(n, ir.Return):
                return "it returns from inside"
            if isinstance(n, ir.Var) and n.depth != 0:
                return "it uses an enclosing function's variables"
        for n in ir.walk(self.loop):
            if isinstance(n, (ir.StoreName, ir.SetVar)) and n.depth >= 1:
                return "a function inside it assigns its variables"
            if isinstance(n, ir.Var) and n.depth >= 2:
                return "a function inside it uses an enclosing function's variables"
            if isinstance(n, ir.Call) and lookup(n.prim).effect in (IO, STATE, RAISES):
                return f"{lookup(n.prim).label} at line {n.loc.lineno} must run on the client, in order"
            # the ranks change copies: a change to something not held by a name of the loop would be lost
            target = n.obj if isinstance(n, ir.StoreItem) else (
                n.args[0] if isinstance(n, ir.Call) and n.args and lookup(n.prim).effect == MUTATES else None)
            if target is not None and not isinstance(_root(target), ir.Var):
                return (f"it changes a value in place that is not one of its variables (line {n.loc.lineno}): "
                        "the change must happen on the client")
        return None

    # ---- the rank program: built once, on the first call with tiled inputs --------------------------------
    def _parts(self):
        if self._job_parts is None:
            loop = self.loop
            tick = ir.Expr(ir.Call("operator.getitem", (ir.Var(TICK), ir.Const(0)), (), loop.loc), loop.loc)
            split, temps = fission.split_loops(loop.body)  # inner loops whose sums can go out together
            self.split = bool(temps)
            body = ir.Block((tick,) + tuple(split.stmts), loop.body.loc)
            loop = ir.For(loop.target, loop.iter, body, loop.orelse, loop.loc) if isinstance(loop, ir.For) else \
                ir.While(loop.cond, body, loop.orelse, loop.loc)
            ret = ir.Return(ir.Call("python.tuple", tuple(ir.Var(o) for o in self.outputs), (), loop.loc), loop.loc)
            used = set(self.params)
            fn = ir.Function("__phylanx_spmd_loop", tuple(self.params) + (TICK,) + ((fission.APART,) if temps else ()),
                             ir.Block((loop, ret), loop.loc),
                             tuple(n for n in self.fn.locals if n not in used) + temps, (), loop.loc)
            funcs = tuple((n, f) for n, f in self.program.functions if n != fn.name) + ((fn.name, fn),)
            prog = ir.Program(fn.name, funcs, self.program.defaults, self.program.kwdefaults)
            ns: dict = {}
            for _, f in funcs:
                for g in ir.walk(f):
                    if isinstance(g, ir.Global) and g.name in self.namespaces.get(g.module, {}):
                        ns.setdefault(g.module, {})[g.name] = self.namespaces[g.module][g.name]
            self._job_parts = (prog, ns)
        return self._job_parts

    # ---- a call -------------------------------------------------------------------------------------------
    def __call__(self, ev, args):
        tiled = [i for i, a in enumerate(args) if type(a) is TiledArray]
        if not tiled or mode() == "off":  # (the type scan first: every loop start on NumPy data passes here)
            return None
        self.seen = True
        if self.static_reason is not None:
            return None
        try:
            sig, bounds = self._check(args, tiled)
        except _Decline as e:
            self.reason = str(e)
            return None
        if sig in self.declined:
            self.reason = self.declined[sig]
            return None
        t0 = time.perf_counter()
        try:
            out = self._run(args, tiled, bounds)
            if self.report is not None and ev.executor is args[tiled[0]]._executor:  # for ``phylanx-py run``
                ev.runtime.count(segments=1, ranks=self.report["workers"])
            if ev.profile is not None and self.report is not None:  # the segment is one row of the profile
                r = self.report
                ev.profile.record(self.loop.loc, f"spmd loop ({r['workers']} workers, {r['iterations']} iterations)",
                                  time.perf_counter() - t0, "spmd", f"{r['workers']} workers", start=t0)
            return out
        except driver.Declined as e:
            self.reason = str(e)
            if e.lasting:
                self.declined[sig] = self.reason
            self.report = None
            return None

    def _check(self, args, tiled):
        first = args[tiled[0]]
        if not isinstance(first._executor, Cluster):
            raise _Decline("the tiles are not on a Dask cluster")
        bounds = first.boundaries[0]
        for i in tiled:
            a = args[i]
            if any(len(b) != 2 for b in a.boundaries[1:]):
                raise _Decline(f"{self.params[i]!r} is split along an axis other than its rows")
            if tuple(a.boundaries[0]) != tuple(bounds) or a._executor is not first._executor:
                raise _Decline(f"{self.params[i]!r} has other row tiles than {self.params[tiled[0]]!r}")
            if any(b != b for b in bounds):
                raise _Decline(f"{self.params[i]!r} has tiles of unknown size (a boolean mask made it)")
        roots = {}
        for i in tiled:  # the ranks hold a copy per name: two names sharing data would drift apart
            root = views.root(args[i])
            j = roots.setdefault(id(root), i)
            if j != i and (self.params[i] in self.mutable or self.params[j] in self.mutable):
                raise _Decline(f"{self.params[i]!r} and {self.params[j]!r} share their data (one is a view of "
                               "the other, or both of one array) and the loop changes one in place")
        for i, a in enumerate(args):
            if i not in tiled and holds(a, (TiledArray,)):
                raise _Decline(f"{self.params[i]!r} holds tiled arrays inside a container")
            if i not in tiled and self.params[i] in self.mutable and type(a) not in _WRITTEN_BACK \
                    and not isinstance(a, _IMMUTABLE):  # ``n += 1`` on an int rebinds n: an output, no change
                raise _Decline(f"the loop changes {self.params[i]!r} (a {type(a).__name__}) in place: the change "
                               "must happen on the client")
        sig = tuple((type(a).__name__, a.shape, str(a.dtype)) if i in tiled else type(a).__name__
                    for i, a in enumerate(args)) + (tuple(bounds),)
        return sig, tuple(int(b) for b in bounds)

    def _run(self, args, tiled, bounds):
        executor = args[tiled[0]]._executor
        tile_rows = [bounds[i + 1] - bounds[i] for i in range(len(bounds) - 1)]
        cols = [list(args[i].futures.reshape(-1)) for i in tiled]  # computes lazy inputs first
        row_bytes = sum(args[i].dtype.itemsize * int(np.prod(args[i].shape[1:])) for i in tiled)
        tile_bytes = [r * row_bytes for r in tile_rows]
        prog, ns = self._parts()
        params = []
        for i, (name, a) in enumerate(zip(self.params, args)):
            if i in tiled:
                params.append(("tiled", 1 if name in self.halo else 0, name in self.mutable))
            else:
                params.append(("rep", a))
        params.append(("rep", Ticker()))
        if self.split:
            params.append(("rep", fission.Apart()))
        writeback = tuple(n for n, a in zip(self.params, args) if n in self.mutable
                          and type(a) in (np.ndarray, list, dict, set))

        def make_job(ranks, ports):
            counts = [sum(tile_rows[a:b]) for _, a, b in ranks]
            if any(name in self.halo for name in self.params) and min(counts) < 1:
                raise driver.Declined("a rank would hold no rows")
            starts = [bounds[a] for _, a, _ in ranks]
            return rank_task.Job(self.key, prog, ns, tuple(params), tuple(self.outputs), writeback, tuple(starts),
                                 tuple(counts), tuple(tuple(tile_rows[a:b]) for _, a, b in ranks), ports,
                                 TIMEOUT_SECONDS)

        ranks, segment, results = driver.run(executor, make_job, cols, tile_rows, tile_bytes, STALL_SECONDS)
        first = aligned_values(results[0][1])  # the replicated outputs, as Dask deserialized them
        out = dict(first["rep"])
        made = {}
        # tiles the ranks stored in their workers' memory (a direct segment: stored.py), else a task per tile
        kept = stored.adopt(executor, [w for w, _, _ in ranks], [s.get("stored", {}) for _, s in results])
        for name, (trail, dtype) in first["meta"].items():
            grid = np.empty((len(tile_rows),) + (1,) * len(trail), dtype=object)
            homes = np.empty(grid.shape, dtype=object)
            for r, ((w, a, b), (fut, res)) in enumerate(zip(ranks, results)):
                for j, t in enumerate(range(a, b)):
                    idx = (t,) + (0,) * len(trail)
                    grid[idx] = kept[res["stored"][name][j][0]] if "stored" in res else \
                        executor.submit_task(rank_task.piece, fut, segment, r, name, j, home=w, pinned=True)
                    homes[idx] = w
            made[name] = TiledArray(executor, (bounds,) + tuple((0, int(d)) for d in trail), dtype, futures=grid,
                                    homes=homes)
        for name, new in made.items():
            i = self.params.index(name)
            if i in tiled and (name not in self.outputs or name in first["same"]):
                args[i]._become(new)  # changed in place by the loop (``u[1:-1] = ...``, ``X -= m``)
                new = args[i]
            if name in self.outputs:
                out[name] = new
        for name, value in first["back"].items():
            _write_back(args[self.params.index(name)], value)
        loc = self.loop.loc
        for category, message in dict.fromkeys(w for _, s in results for w in s["warned"]):
            # what NumPy said on any rank, once, at the loop's line (the plain loop warns on the client)
            warnings.warn_explicit(f"{message} (on the SPMD ranks of this loop)", category, loc.filename,
                                   loc.lineno or 0)
        values = tuple(out[o] for o in self.outputs)
        stats = [s["stats"] for _, s in results]
        self.report = {"workers": len(ranks), "iterations": stats[0]["iterations"],
                       "allreduce": stats[0]["allreduce"], "allgather": stats[0]["allgather"],
                       "halo": stats[0]["halo"], "values": stats[0]["values"],
                       "messages": stats[0]["messages"], "reductions": stats[0]["reductions"],
                       # rank 0's time: in all, in compiled kernels (how many), in collectives
                       "busy_s": stats[0].get("busy_s", 0.0), "kernel_s": stats[0].get("kernel_s", 0.0),
                       "kernels": stats[0].get("kernels", 0), "comm_s": stats[0].get("comm_s", 0.0),
                       "sent": sum(s["sent"] for s in stats),
                       # rank tasks (none when the ranks were started directly) and the result's tile pieces
                       "tasks": sum(fut is not None for fut, _ in results) + len(made) * len(tile_rows) - len(kept)}
        self.reason = None
        if any(v is UNBOUND for v in values):
            return None  # the loop never ran: the interpreted loop leaves the names unbound as Python does
        return values

    def explain(self) -> list[str]:
        if not self.seen:
            return []
        head = f"loop at {self.where} -> "
        if self.static_reason:
            return [head + f"not SPMD: {self.static_reason}"]
        if self.report is None:
            return [head + f"not SPMD: {self.reason}" if self.reason else head + "SPMD: not run yet"]
        r = self.report
        it = max(r["iterations"], 1)
        coll = []
        for k in ("allreduce", "allgather", "halo exchange"):
            v = r[k.split()[0]] / it
            if v:
                coll.append(f"{v:.3g} {k}{'' if v == 1 else 's'}")
        m = r["messages"] / it
        batched = r["reductions"] / it if r["reductions"] > r["allreduce"] else 0
        return [head + f"SPMD over {r['workers']} workers: {r['iterations']} iterations, "
                f"{', '.join(coll) or 'no collectives'} per iteration ({r['values'] / it:.0f} values), "
                f"{r['tasks']} tasks for the whole loop, {r['sent'] / 1e6:.2f} MB sent between ranks in "
                f"{m:.3g} message{'' if m == 1 else 's'} per iteration"
                + (f" ({batched:.3g} reductions batched)" if batched else "") + _rank_time(r, it)]


def _rank_time(r, it) -> str:
    """Where a rank's time went, per iteration: its body's compiled kernels (fused chains and reductions,
    per-label tables), the collectives (waiting for peers included), the rest."""
    ms = 1e3 / it
    k = r["kernels"] / it
    return (f"; rank 0 per iteration: {r['busy_s'] * ms:.3g} ms, {r['kernel_s'] * ms:.3g} ms of it in "
            f"{k:.3g} compiled kernel{'' if k == 1 else 's'}, {r['comm_s'] * ms:.3g} ms in collectives")


class _Decline(Exception):
    pass


_WRITTEN_BACK = (np.ndarray, list, dict, set)  # what _write_back changes in place for the caller
_IMMUTABLE = (int, float, complex, bool, str, bytes, tuple, frozenset, range, type(None), np.generic)


def _write_back(orig, value):
    """A replicated input the loop changed in place on the ranks: the same change on the caller's object."""
    if type(orig) is np.ndarray:
        orig[...] = value
    elif type(orig) is list:
        orig[:] = value
    elif type(orig) in (dict, set):
        orig.clear()
        orig.update(value)


def factory(fn, loop, where, program, namespaces):
    return SpmdLoop(fn, loop, where, program, namespaces)


loop_tiers.register(factory)
