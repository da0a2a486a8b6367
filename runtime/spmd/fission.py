"""A rank's program planned so that reductions with no data dependency between them go out in one message: a loop
inside the segment's loop whose last statements only store into arrays the loop does not otherwise read is split
in two (loop fission). k-means' loop over clusters

    for j in range(k):
        mask = labels == j
        new[j] = np.sum(X[mask], axis=0) / np.sum(mask)

becomes a loop computing every iteration's keys and values (its sums over the ranks wait: deferred.py), then a
loop storing them in the original order; the first store sends every waiting sum in one message, where each store
used to send its own.

Why it is the same program: the split only moves the stores ``T[key] = value`` after the later iterations'
computations, so it is exact when nothing those computations read can see ``T``. Statically: the loop never reads
or rebinds a store target ``T`` except in those stores, and the statements before the stores only bind names, with
primitives that change nothing (no call of a function value, no in-place change, no output or random draw).
At run time, before the loop (``Apart``): each ``T`` is a NumPy array, and no value the loop reads from outside
(its iterable, free variables and globals) shares memory with a ``T`` (views, the same array under another name,
an array inside a list) or is of a type whose contents cannot be looked into. Otherwise the original loop runs.
Keys and values are computed at the same point as before; a value computed but never stored cannot happen (every
iteration's stores all run). A failure on a rank makes the client run the loop as before, so a reordered error
is never what the user sees.
"""
from __future__ import annotations

import numpy as np
from phylanx_py.primitives import lookup

from phylanx_py import ir

from .deferred import Deferred
from .shard import Shard, Transposed

APART = "__phylanx_spmd_apart"  # the rank program's parameter holding the run-time check (an Apart)
_ATOMS = (int, float, complex, bool, str, bytes, type(None), range, slice, type(Ellipsis), np.generic)
_OPAQUE = (ir.Apply, ir.Lambda, ir.FuncRef, ir.SetVar, ir.Var)  # ir.Var: only depth 0 (checked below)


class Apart:
    """``apart[(m, T1..Tm, v1, v2, ...)]``: True when every ``T`` is a NumPy array no ``v`` can reach (see the
    module doc). The same on every rank: replicated values and shapes only decide it."""

    def __getitem__(self, values):
        m = values[0]
        targets, rest = values[1:1 + m], values[1 + m:]
        if any(type(t) is not np.ndarray or t.dtype.hasobject for t in targets):
            return False
        return all(_apart(v, targets, 0) for v in rest)

    def __reduce__(self):
        return (Apart, ())


def _apart(v, targets, depth) -> bool:
    t = type(v)
    if t is np.ndarray:
        return not v.dtype.hasobject and not any(np.may_share_memory(v, x) for x in targets)
    if isinstance(v, _ATOMS) or t is Shard or t is Transposed or t is Deferred:
        return True  # (a shard's rows and a sum's value are this rank's own arrays)
    if (t is list or t is tuple) and depth < 2 and len(v) <= 64:
        return all(_apart(x, targets, depth + 1) for x in v)
    if t is dict and depth < 2 and len(v) <= 64:
        return all(_apart(x, targets, depth + 1) for x in v.values())
    return False


class _Split:
    def __init__(self):
        self.count = 0
        self.temps: list = []

    def temp(self, stem):
        name = f"__px_spmd_{stem}{self.count}"
        self.temps.append(name)
        return name


def split_loops(body: ir.Block):
    """``body`` (the segment loop's) with every loop inside it that qualifies split; also the new local names."""
    s = _Split()
    out = _block(body, s)
    return out, tuple(s.temps)


def _block(block: ir.Block, s) -> ir.Block:
    stmts = []
    for st in block.stmts:
        stmts.extend(_stmt(st, s))
    return ir.Block(tuple(stmts), block.loc)


def _stmt(st, s):
    if isinstance(st, ir.If):
        return [ir.If(st.cond, _block(st.then, s), _block(st.orelse, s), st.loc)]
    if isinstance(st, ir.While):
        return [ir.While(st.cond, _block(st.body, s), _block(st.orelse, s), st.loc)]
    if isinstance(st, ir.Block):
        return [_block(st, s)]
    if isinstance(st, ir.For):
        inner = ir.For(st.target, st.iter, _block(st.body, s), _block(st.orelse, s), st.loc)
        plan = _plan(inner)
        return [inner] if plan is None else _fission(inner, plan, s)
    return [st]


def _names_of(target):
    if isinstance(target, ir.StoreName) and target.depth == 0:
        return [target.name]
    if isinstance(target, ir.StoreTuple):
        out = []
        for t in target.targets:
            names = _names_of(t)
            if names is None:
                return None
            out += names
        return out
    return None


def _plan(loop: ir.For):
    """(statements before the stores, the stores, free names, globals) when ``loop`` qualifies, else None."""
    if loop.orelse.stmts:
        return None
    stored = _names_of(loop.target)
    if stored is None:
        return None
    stmts = loop.body.stmts
    q = len(stmts)
    while q > 0 and isinstance(stmts[q - 1], ir.Assign) and isinstance(stmts[q - 1].target, ir.StoreItem) \
            and isinstance(stmts[q - 1].target.obj, ir.Var) and stmts[q - 1].target.obj.depth == 0:
        q -= 1
    before, stores = stmts[:q], stmts[q:]
    if not stores:
        return None
    targets = {st.target.obj.name for st in stores}
    stored = set(stored)
    if targets & stored:
        return None  # ``for row in rows: row[0] = ...``: each iteration stores into another array
    free: dict = {}
    globals_: dict = {}

    def reads(node) -> bool:
        for n in ir.walk(node):
            if isinstance(n, _OPAQUE) and not (isinstance(n, ir.Var) and n.depth == 0):
                return False  # a function value's call or a closure may do anything; a walrus rebinds
            if isinstance(n, ir.Call) and lookup(n.prim).effect is not None:
                return False  # an in-place change, output or a random draw
            if isinstance(n, ir.Var):
                if n.name in targets:
                    return False
                if n.name not in stored:
                    free.setdefault(n.name, n)
            elif isinstance(n, ir.Global):
                globals_.setdefault((n.module, n.name), n)
        return True

    for st in before:
        names = _names_of(st.target) if isinstance(st, ir.Assign) else None
        if names is None or not reads(st.value) or targets & set(names):
            return None
        stored.update(names)
    for st in stores:
        if not reads(st.target.key) or not reads(st.value):
            return None
    return before, stores, tuple(free.values()), tuple(globals_.values())


def _fission(loop: ir.For, plan, s):
    before, stores, free, globals_ = plan
    loc = loop.loc
    s.count += 1
    it, ok, buf, e = (s.temp(stem) for stem in ("it", "ok", "buf", "e"))

    def call(prim, *args):
        return ir.Call(prim, tuple(args), (), loc)

    targets = tuple(dict.fromkeys(st.target.obj.name for st in stores))
    check = call("operator.getitem", ir.Var(APART, 0, loc),
                 call("python.tuple", ir.Const(len(targets), loc), *(ir.Var(t, 0, loc) for t in targets),
                      ir.Var(it, 0, loc), *free, *globals_))
    items = []
    for st in stores:
        items += [st.target.key, st.value]
    collect = ir.For(loop.target, ir.Var(it, 0, loc), ir.Block(tuple(before) + (
        ir.Expr(call("method.append", ir.Var(buf, 0, loc), call("python.tuple", *items)), loc),), loop.body.loc),
        ir.Block((), loc), loc)
    entry = ir.Var(e, 0, loc)
    replay = ir.For(ir.StoreName(e, 0, loc), ir.Var(buf, 0, loc), ir.Block(tuple(
        ir.Assign(ir.StoreItem(st.target.obj, call("operator.getitem", entry, ir.Const(2 * i, loc)), st.target.loc),
                  call("operator.getitem", entry, ir.Const(2 * i + 1, loc)), st.loc)
        for i, st in enumerate(stores)), loc), ir.Block((), loc), loc)
    original = ir.For(loop.target, ir.Var(it, 0, loc), loop.body, loop.orelse, loc)
    return [ir.Assign(ir.StoreName(it, 0, loc), loop.iter, loc),
            ir.Assign(ir.StoreName(ok, 0, loc), check, loc),
            ir.If(ir.Var(ok, 0, loc), ir.Block((ir.Assign(ir.StoreName(buf, 0, loc), call("python.list"), loc),
                                                collect, replay), loc),
                  ir.Block((original,), loc), loc)]
