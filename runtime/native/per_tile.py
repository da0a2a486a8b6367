"""Which loops over row-tiled arrays may run per tile (one native task per tile, on the worker holding it), and the
loop each tile runs. A loop qualifies when its iterations are independent and each touches only rows near its own:

- it is ``for i in range(stop)`` or ``range(start, stop)`` (step 1), its bounds numbers the client can work out from
  the loop's arguments (constants, ints, ``len`` and ``.shape`` of its arrays, ``+ - *``);
- the tiled arrays appear only indexed, their first index ``i``, ``i + c`` or ``i - c`` (``c`` a constant): a tile
  then needs its rows and ``c`` rows of its neighbours (the halo), and ``i`` never reaches a negative index (the
  client checks ``start - c >= 0``: Python would wrap it to the far end, which a tile does not hold);
- the tiled arrays it stores into are stored and read at ``i`` itself only, and nothing else is changed in place
  (no other array, no call that mutates);
- nothing it assigns is seen after it (no reduction, no ``i`` read after the loop), every name its body assigns
  is assigned before it is read in each iteration (nothing carried from one iteration to the next), and it has no
  ``break`` of its own (a tile cannot stop the others).

Then tile ``k`` with rows [a, b) runs the same loop over ``range(max(start, a), min(stop, b))`` (worked out on the
client) on slabs, rows [a - below, b + above) of each tiled array (its own halo: the offsets it is read at), with
every index of it shifted by its slab's first row: the iterations
each tile runs are those the whole loop runs on its rows, in the same order, reading the same values."""
from __future__ import annotations

import dataclasses

from phylanx_py.primitives import MUTATES, lookup

from phylanx_py import ir

LO, HI = "__pxr_tile_lo", "__pxr_tile_hi"


def off(name: str) -> str:
    """The parameter holding the first row of ``name``'s slab (its indices are shifted by it)."""
    return f"__pxr_tile_off_{name}"


class TileLoop:
    """A loop's per-tile form: ``fn`` and ``loop`` (the rewritten ones, with the tile's bounds and offset as new
    parameters), each tiled name's rows of halo (below, above), the tiled names it stores into, the range's bounds
    (IR)."""

    def __init__(self, fn, loop, halo, stored, bounds):
        self.fn, self.loop, self.halo, self.stored, self.bounds = fn, loop, halo, stored, bounds


def plan(fn: ir.Function, loop, tiled: dict, outputs) -> TileLoop | str:
    """The loop's TileLoop for these tiled names (name -> ndim), or why it cannot run per tile."""
    if not isinstance(loop, ir.For) or not isinstance(loop.target, ir.StoreName) or loop.orelse.stmts:
        return "it is not a for loop over range()"
    it = loop.iter
    if not (isinstance(it, ir.Call) and it.prim == "builtins.range" and 1 <= len(it.args) <= 2 and not it.kwargs):
        return "it is not a for loop over range(start, stop)"
    if outputs:
        return f"it assigns {outputs[0]!r}, which the function reads outside it (a value carried in or out)"
    i = loop.target.name
    offsets, stored = {}, set()
    why = _accesses(loop.body, i, tiled, offsets, stored)
    if why:
        return why
    for name in stored:
        if set(offsets.get(name, ())) != {0}:
            return f"{name!r} is stored into and read at other rows than the iteration's own"
    why = _breaks(loop.body) or _carried(loop.body.stmts, {i}, _assigned(loop.body))
    if why:
        return why
    halo = {name: (max(0, max((-c for c in offsets.get(name, ())), default=0)),
                   max(0, max((c for c in offsets.get(name, ())), default=0))) for name in tiled}
    start, stop = (ir.Const(0), it.args[0]) if len(it.args) == 1 else it.args
    body = _shift(loop.body, tiled)
    lo, hi = ir.Var(LO, 0, it.loc), ir.Var(HI, 0, it.loc)
    # (the bounds worked out on the client, a tile's share of them: in the kernel ``X.shape[0]`` is the slab's)
    new_iter = ir.Call("builtins.range", (lo, hi), (), it.loc)
    new_loop = ir.For(loop.target, new_iter, body, loop.orelse, loop.loc)
    # (the function's body holds the new loop in the old one's place: the plan reads what the rest of it uses)
    new_fn = dataclasses.replace(fn, params=tuple(fn.params) + (LO, HI) + tuple(off(t) for t in sorted(tiled)),
                                 body=_replace(fn.body, loop, new_loop))
    return TileLoop(new_fn, new_loop, halo, frozenset(stored), (start, stop))


def evaluate(node, values: dict):
    """The int value of a range bound over the loop's arguments (``values``: name -> value; tiled arrays give their
    shape), or None when it is not one this can work out."""
    if isinstance(node, ir.Const):
        return node.value if type(node.value) is int else None
    if isinstance(node, ir.Var):
        v = values.get(node.name)
        return v if type(v) is int else None
    if not isinstance(node, ir.Call) or node.kwargs:
        return None
    if node.prim == "builtins.len" and len(node.args) == 1 and isinstance(node.args[0], ir.Var):
        shape = getattr(values.get(node.args[0].name), "shape", None)
        return int(shape[0]) if shape else None
    if node.prim == "operator.getitem" and len(node.args) == 2 and isinstance(node.args[0], ir.Call) and \
            node.args[0].prim == "attr.shape" and isinstance(node.args[0].args[0], ir.Var):
        shape = getattr(values.get(node.args[0].args[0].name), "shape", None)
        k = evaluate(node.args[1], values)
        return int(shape[k]) if shape is not None and k is not None and -len(shape) <= k < len(shape) else None
    ops = {"operator.add": lambda a, b: a + b, "operator.sub": lambda a, b: a - b, "operator.mul": lambda a, b: a * b}
    if node.prim in ops and len(node.args) == 2:
        a, b = (evaluate(x, values) for x in node.args)
        return None if a is None or b is None else ops[node.prim](a, b)
    return None


def _first(key):
    """The first index of a subscript key (a tuple's first item), and a function rebuilding the key around a new
    first index."""
    if isinstance(key, ir.Tuple) and key.items:
        return key.items[0], lambda f: dataclasses.replace(key, items=(f,) + tuple(key.items[1:]))
    if isinstance(key, ir.Call) and key.prim == "python.tuple" and key.args:
        return key.args[0], lambda f: dataclasses.replace(key, args=(f,) + tuple(key.args[1:]))
    return key, lambda f: f


def _offset(index, i):
    """``c`` when ``index`` is ``i``, ``i + c``, ``i - c`` or ``c + i`` (``c`` an int constant), else None."""
    if isinstance(index, ir.Var) and index.name == i and index.depth == 0:
        return 0
    if isinstance(index, ir.Call) and index.prim in ("operator.add", "operator.sub") and len(index.args) == 2:
        a, b = index.args
        if isinstance(a, ir.Var) and a.name == i and isinstance(b, ir.Const) and type(b.value) is int:
            return b.value if index.prim == "operator.add" else -b.value
        if index.prim == "operator.add" and isinstance(b, ir.Var) and b.name == i and isinstance(a, ir.Const) and \
                type(a.value) is int:
            return a.value
    return None


def _accesses(node, i, tiled, offsets, stored) -> str | None:
    """Record each tiled name's row offsets (``offsets``) and the names stored into (``stored``); why not, when a
    tiled name is used otherwise or something else is changed in place."""
    if isinstance(node, ir.Assign) and isinstance(node.target, ir.StoreItem):
        obj = node.target.obj
        if not (isinstance(obj, ir.Var) and obj.name in tiled):
            return f"it changes an array in place that is not tiled (line {node.loc.lineno})"
        first, _ = _first(node.target.key)
        c = _offset(first, i)
        if c is None:
            return f"{obj.name!r} is stored at a row that is not the iteration's own (line {node.loc.lineno})"
        offsets.setdefault(obj.name, set()).add(c)
        stored.add(obj.name)
        return _accesses(node.target.key, i, tiled, offsets, stored) or \
            _accesses(node.value, i, tiled, offsets, stored)
    if isinstance(node, ir.Call) and node.prim == "operator.getitem" and len(node.args) == 2 and \
            isinstance(node.args[0], ir.Var) and node.args[0].name in tiled:
        first, _ = _first(node.args[1])
        c = _offset(first, i)
        if c is None:
            return f"{node.args[0].name!r} is read at a row that is not the iteration's own give or take a " \
                   f"constant (line {node.loc.lineno})"
        offsets.setdefault(node.args[0].name, set()).add(c)
        return _accesses(node.args[1], i, tiled, offsets, stored)
    if isinstance(node, ir.Call) and node.prim == "operator.getitem" and len(node.args) == 2 and \
            isinstance(node.args[0], ir.Call) and node.args[0].prim == "attr.shape" and \
            isinstance(node.args[0].args[0], ir.Var) and node.args[0].args[0].name in tiled and \
            isinstance(node.args[1], ir.Const) and type(node.args[1].value) is int:
        ndim = tiled[node.args[0].args[0].name]
        if -ndim <= node.args[1].value < ndim and node.args[1].value % ndim != 0:
            return None  # ``X.shape[1]``: a tile's slab has the array's columns (its rows are its own)
    if isinstance(node, ir.Var) and node.name in tiled:
        return f"{node.name!r} is used other than indexed by row (line {node.loc.lineno})"
    if isinstance(node, ir.Call) and node.args and lookup(node.prim).effect == MUTATES:
        # ``s += x`` on a name of its own is fine (a parameter array changed in place shows in the kernel's
        # written arrays, which the caller checks); on a tiled array's row it is a store there
        target = node.args[0]
        if isinstance(target, ir.Var) and target.name in tiled:
            return f"{target.name!r} is changed whole in place (line {node.loc.lineno})"
        if isinstance(target, ir.Call) and target.prim == "operator.getitem" and len(target.args) == 2 and \
                isinstance(target.args[0], ir.Var) and target.args[0].name in tiled:
            if _offset(_first(target.args[1])[0], i) != 0:
                return f"{target.args[0].name!r} is changed at a row that is not the iteration's own (line " \
                       f"{node.loc.lineno})"
            stored.add(target.args[0].name)
    if isinstance(node, (ir.Lambda, ir.Apply, ir.SetVar)):
        return f"it calls or makes a function (line {node.loc.lineno})"
    for c in ir.children(node):
        why = _accesses(c, i, tiled, offsets, stored)
        if why:
            return why
    return None


def _breaks(body, depth=0) -> str | None:
    for n in ir.children(body):
        if isinstance(n, ir.Break) and depth == 0:
            return f"it may stop early (break at line {n.loc.lineno})"
        why = _breaks(n, depth + isinstance(n, (ir.For, ir.While)))
        if why:
            return why
    return None


def _assigned(node) -> set:
    return {n.name for n in ir.walk(node) if isinstance(n, ir.StoreName)}


def _reads(node) -> set:
    return {n.name for n in ir.walk(node) if isinstance(n, ir.Var) and n.depth == 0}


def _carried(stmts, bound: set, local: set) -> str | None:
    """Why a name the body assigns (``local``) may be read before its assignment in an iteration (carried from the
    last one), else None: statements in order, names bound only along every path counted as bound."""
    bound = set(bound)
    for s in stmts:
        if isinstance(s, ir.Assign):
            early = (_reads(s.value) | (_reads(s.target) if isinstance(s.target, ir.StoreItem) else set())) & local
            if early - bound:
                return f"{sorted(early - bound)[0]!r} may be carried from one iteration to the next"
            bound |= _assigned(s.target)
        elif isinstance(s, ir.Expr):
            if (_reads(s.value) & local) - bound:
                return f"{sorted((_reads(s.value) & local) - bound)[0]!r} may be carried from one iteration to the next"
        elif isinstance(s, ir.If):
            if (_reads(s.cond) & local) - bound:
                return f"{sorted((_reads(s.cond) & local) - bound)[0]!r} may be carried from one iteration to the next"
            why = _carried(s.then.stmts, bound, local) or _carried(s.orelse.stmts, bound, local)
            if why:
                return why
            bound |= _assigned(s.then) & _assigned(s.orelse)
        elif isinstance(s, ir.For) and not s.orelse.stmts:
            if (_reads(s.iter) & local) - bound:
                return f"{sorted((_reads(s.iter) & local) - bound)[0]!r} may be carried from one iteration to the next"
            why = _carried(s.body.stmts, bound | _assigned(s.target), local)
            if why:
                return why
        elif isinstance(s, (ir.Break, ir.Continue)):
            continue
        elif isinstance(s, ir.Block):
            why = _carried(s.stmts, bound, local)
            if why:
                return why
            bound |= _assigned(s)
        else:
            return f"a {type(s).__name__.lower()} statement (line {s.loc.lineno})"
    return None


def _shift(node, tiled):
    """``node`` with the first index of every subscript of a tiled name made relative to the slab (``- off``)."""
    if isinstance(node, ir.StoreItem) and isinstance(node.obj, ir.Var) and node.obj.name in tiled:
        first, rebuild = _first(node.key)
        by = ir.Var(off(node.obj.name), 0, node.loc)
        return dataclasses.replace(node, key=rebuild(ir.Call("operator.sub", (_shift(first, tiled), by), (),
                                                             first.loc)))
    if isinstance(node, ir.Call) and node.prim == "operator.getitem" and len(node.args) == 2 and \
            isinstance(node.args[0], ir.Var) and node.args[0].name in tiled:
        first, rebuild = _first(node.args[1])
        by = ir.Var(off(node.args[0].name), 0, node.loc)
        key = rebuild(ir.Call("operator.sub", (_shift(first, tiled), by), (), first.loc))
        return dataclasses.replace(node, args=(node.args[0], key))
    changes = {}
    for f in dataclasses.fields(node):
        if f.name == "loc":
            continue
        old = getattr(node, f.name)
        new = _shift_in(old, tiled)
        if new is not old:
            changes[f.name] = new
    return dataclasses.replace(node, **changes) if changes else node


def _replace(node, old, new):
    """``node`` with the subtree ``old`` (that very object) replaced by ``new``."""
    if node is old:
        return new
    changes = {}
    for f in dataclasses.fields(node):
        if f.name == "loc":
            continue
        value = getattr(node, f.name)
        if isinstance(value, ir.Node):
            got = _replace(value, old, new)
        elif isinstance(value, tuple):
            items = tuple(_replace(v, old, new) if isinstance(v, ir.Node) else v for v in value)
            got = value if all(a is b for a, b in zip(items, value)) else items
        else:
            got = value
        if got is not value:
            changes[f.name] = got
    return dataclasses.replace(node, **changes) if changes else node


def _shift_in(value, tiled):
    if isinstance(value, ir.Node):
        return _shift(value, tiled)
    if isinstance(value, tuple):
        items = tuple(_shift_in(v, tiled) for v in value)
        return value if all(a is b for a, b in zip(items, value)) else items
    return value
