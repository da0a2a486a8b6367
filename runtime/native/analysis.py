"""Which names a loop reads and writes, decided once per program from the tree (runtime/native's static part).

A loop's kernel takes every name it uses that the rest of its function also uses (its free variables), and
returns those it assigns; names used only inside the loop are the kernel's own. A loop that binds a name the
function reads elsewhere only after the loop (so it could be unbound), that returns from inside, or that builds
closures over its names, stays interpreted: the reasons are returned, not raised."""
from __future__ import annotations

import numpy as np

from phylanx_py import ir
from phylanx_py.source import parse

from .facts import calls


def _names(node, reads: set, writes: set, closures: set, skip=None):
    """The names ``node`` reads and writes, and those closures below it use, leaving out the subtree ``skip``."""
    if node is skip:
        return
    if isinstance(node, ir.Lambda):
        for sub in ir.walk(node.function.body):
            if isinstance(sub, (ir.Var, ir.StoreName, ir.SetVar)) and sub.depth >= 1:
                closures.add(sub.name)
        for d in node.defaults + tuple(v for _, v in node.kwdefaults):
            _names(d, reads, writes, closures)
        return
    if isinstance(node, ir.Var):
        reads.add(node.name)
    elif isinstance(node, (ir.StoreName, ir.SetVar)):
        writes.add(node.name)
    for c in ir.children(node):
        _names(c, reads, writes, closures, skip)


class LoopPlan:
    """A loop's parameters (free variables, sorted), its outputs (those it assigns) and why it cannot be native
    (``reason``, None if it may be: the kinds at call time decide the rest)."""

    def __init__(self, fn: ir.Function, loop):
        self.loop = loop
        reads, writes, closures = set(), set(), set()
        _names(loop, reads, writes, closures)
        out_reads, out_writes, out_closures = set(), set(), set()
        _names(fn.body, out_reads, out_writes, out_closures, skip=loop)
        outside = out_reads | out_writes | set(fn.params) | set(fn.kwonly)
        used = reads | writes
        # names the loop binds before it reads them, whose values nothing reads after it: the kernel's own (a
        # first loop ``for j in ...`` whose ``j`` a later loop binds again would otherwise take ``j`` unbound, and
        # no tier takes an unbound argument)
        own = _own_names(fn, loop, writes & outside)
        # module data globals the loop reads (``BET_M = 0.5`` at a module's top): arguments of the kernel under
        # their own names, read when the loop starts (``globals``: name -> module, for the hand-over); Python
        # makes a name assigned in a function local throughout it, so none is also a local of the loop
        gl = {}
        for g in ir.walk(loop):
            if isinstance(g, ir.Global):
                gl.setdefault(g.name, set()).add(g.module)
        self.globals = {name: next(iter(mods)) for name, mods in gl.items() if len(mods) == 1 and name not in used}
        if self.globals:
            self.loop = _globals_as_names(loop, self.globals)
        self.params = sorted([n for n in used if n in outside and n not in own] + list(self.globals))
        self.outputs = [n for n in self.params if n in writes]
        self.reason = None
        if closures & used or out_closures & used:
            self.reason = "a closure uses its variables"
        elif any(isinstance(s, (ir.Return, ir.Lambda)) for s in ir.walk(loop)):
            self.reason = "it returns from inside" if any(isinstance(s, ir.Return) for s in ir.walk(loop)) \
                else "it makes a function"
        elif any(isinstance(v, ir.Var) and v.depth != 0 for v in ir.walk(loop)):
            self.reason = "it uses an enclosing function's variables"


def _globals_as_names(node, names):
    """``node`` with every ``Global`` read of ``names`` a ``Var`` of that name (unchanged subtrees kept)."""
    import dataclasses

    if isinstance(node, ir.Global) and node.name in names:
        return ir.Var(name=node.name, depth=0, loc=node.loc)
    changes = {}
    for f in dataclasses.fields(node):
        if f.name == "loc":
            continue
        old = getattr(node, f.name)
        new = _globals_in(old, names)
        if new is not old:
            changes[f.name] = new
    return dataclasses.replace(node, **changes) if changes else node


def _globals_in(value, names):
    if isinstance(value, ir.Node):
        return _globals_as_names(value, names)
    if isinstance(value, tuple):
        items = tuple(_globals_in(v, names) for v in value)
        return value if all(a is b for a, b in zip(items, value)) else items
    return value


def _own_names(fn, loop, names) -> set:
    """Those of ``names`` (bound by ``loop``) that the loop binds before reading them in every iteration (the
    target of a ``for``, or a name whose first use in the body is an assignment not reading it) and whose value no
    statement after the loop can read: not parameters, not read by the loop's iterable or ``else``, and after the
    loop (directly in the function's body, or in ``if`` branches of it) every path binds them again before reading
    them or never reads them. A later ``for j in ...`` passes (its body reads its own ``j``; if it runs zero times
    ``j`` keeps ours, so the statements after it are looked at too)."""
    if not isinstance(loop, (ir.For, ir.While)):
        return set()
    path = _path(fn.body, loop)
    if path is None:  # inside a loop, a try ...: the values may be read again
        return set()
    head = loop.iter if isinstance(loop, ir.For) else loop.cond
    target = loop.target.name if isinstance(loop, ir.For) and isinstance(loop.target, ir.StoreName) else None
    own = set()
    for name in names:
        if name in fn.params or name in fn.kwonly or _reads(head, name) or _reads(loop.orelse, name):
            continue
        if name != target and not _bound_first(loop.body, name):
            continue
        if not _read_after(path, name):
            own.add(name)
    return own


def _bound_first(body, name) -> bool:
    """Whether every path through ``body`` binds ``name`` before it reads it."""
    return _block_use(body, name) == "bound"


def _read_after(path, name) -> bool:
    for block, i in reversed(path):  # the loop's own block, then each enclosing block after its ``if``
        for stmt in block.stmts[i + 1:]:
            use = _first_use(stmt, name)
            if use != "none":
                return use == "read"
    return False


def _path(block, target):
    """[(block, index)] from ``block`` down to the statement ``target`` through ``if`` branches only, or None."""
    for i, stmt in enumerate(block.stmts):
        if stmt is target:
            return [(block, i)]
        if isinstance(stmt, ir.If):
            for branch in (stmt.then, stmt.orelse):
                p = _path(branch, target)
                if p is not None:
                    return [(block, i)] + p
    return None


def _reads(node, name) -> bool:
    return any(isinstance(v, ir.Var) and v.name == name for v in ir.walk(node))


def _first_use(stmt, name) -> str:
    """"read" when ``stmt`` may read ``name``'s value from before it, "bound" when it binds ``name`` first on every
    path, else "none" (it leaves the value as it was, on some path at least)."""
    if isinstance(stmt, ir.Assign) and isinstance(stmt.target, ir.StoreName) and stmt.target.name == name:
        return "read" if _reads(stmt.value, name) else "bound"
    if isinstance(stmt, ir.If):
        if _reads(stmt.cond, name):
            return "read"
        uses = {_block_use(stmt.then, name), _block_use(stmt.orelse, name)}
        return "read" if "read" in uses else "bound" if uses == {"bound"} else "none"
    if isinstance(stmt, (ir.For, ir.While)):
        # a loop may run zero times: at best it leaves the value for the statements after it
        if _reads(stmt.iter if isinstance(stmt, ir.For) else stmt.cond, name) or _reads(stmt.orelse, name):
            return "read"
        if isinstance(stmt, ir.For) and isinstance(stmt.target, ir.StoreName) and stmt.target.name == name:
            return "none"  # its body reads its own binding
        return "none" if _block_use(stmt.body, name) != "read" else "read"
    return "read" if _reads(stmt, name) else "none"


def _block_use(block, name) -> str:
    """The first use of ``name`` on the paths through ``block`` (see ``_first_use``)."""
    for stmt in block.stmts:
        use = _first_use(stmt, name)
        if use != "none":
            return use
    return "none"


_READ_ATTRS = frozenset({"shape", "size", "ndim", "dtype"})

def arrays_written(source: str, kinds, viewed=frozenset()) -> tuple:
    """Indices of the array arguments (``kinds``: the kernel's last ``len(kinds)`` parameters) that the generated
    kernel ``source`` may change. Before a kernel that may stop on an overflow runs, these are copied so the call
    can rerun interpreted on the values it started with; a hash loop over a large array it only reads paid a copy
    of it per call (popcount over 20,000 ints: 2.2 us of 7.4). An argument counts as only read when every use of
    its name is an element read (as many integer indices as dimensions, no slice), ``.shape``/``.size``/``.ndim``/
    ``.dtype``, ``len()`` of it, or ``for v in`` a 1-d one; any other use (a store, a view, a call, another name
    bound to it) counts as a write. Whether an index makes a view the source cannot tell (a name may hold None, a
    slice, a tuple): ``viewed`` names the arrays the lowerer indexed into views, by their kinds ("*": some
    expression's), and those count as written too."""
    import ast

    everything = tuple(i for i, k in enumerate(kinds) if type(k) is np.ndarray)
    if "*" in viewed:  # a view of an expression: any array's
        return everything
    try:
        tree = parse(source)
    except SyntaxError:  # (a lowering bug: Numba would refuse it too) nothing is known: all
        return everything
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "kernel")
    names = [a.arg for a in fn.args.args][-len(kinds):] if kinds else []
    parents = {id(c): p for p in ast.walk(fn) for c in ast.iter_child_nodes(p)}

    def is_slice(node) -> bool:
        return isinstance(node, ast.Slice) or (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and
                                               node.func.id == "slice")

    def in_index(node) -> bool:
        up = parents.get(id(node))
        if isinstance(up, ast.Tuple):
            up = parents.get(id(up))
        return isinstance(up, ast.Subscript)

    if any(is_slice(n) and not in_index(n) for n in ast.walk(fn)):
        return everything  # a name may hold a slice: which index makes a view is not known

    # the NumPy functions of the source that only read their first ``reads`` positional arguments and return a
    # new value, never a view of one (their declarations' ``Lowering.reads``: a ufunc's next argument is its
    # output, np.sqrt(y, y) writes y)
    reading = {text: f.reads for text, f in calls().items()}

    def consumed(node) -> bool:
        """``node`` (an array or a view of one) is only read where it stands: an operand of arithmetic or a
        comparison (whose value is a new array), or an argument of a NumPy function that reads its arguments."""
        up = parents.get(id(node))
        if isinstance(up, (ast.BinOp, ast.UnaryOp, ast.Compare)):
            return True
        return isinstance(up, ast.Call) and node in up.args and not up.keywords and \
            isinstance(up.func, ast.Attribute) and isinstance(up.func.value, ast.Name) and \
            up.func.value.id == "np" and len(up.args) <= reading.get(f"np.{up.func.attr}", 0)

    def only_read(name, ndim, views):
        """``views``: the lowerer made views of it (an index it could not see in the source may be one)."""
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Name) and node.id == name):
                continue
            if not isinstance(node.ctx, ast.Load):
                return False
            up = parents.get(id(node))
            if isinstance(up, ast.Subscript) and up.value is node and isinstance(up.ctx, ast.Load):
                index = up.slice.elts if isinstance(up.slice, ast.Tuple) else [up.slice]
                if (views or len(index) != ndim or any(is_slice(i) or (isinstance(i, ast.Constant) and (
                        i.value is None or i.value is Ellipsis)) for i in index)) and not consumed(up):
                    return False  # a view that outlives the expression: ``q = p[1:]``, ``p[None]``, a row
            elif consumed(node):
                continue
            elif isinstance(up, ast.Attribute) and up.value is node and up.attr in _READ_ATTRS:
                continue
            elif isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id == "len" and \
                    up.args == [node]:
                continue
            elif isinstance(up, ast.For) and up.iter is node and ndim == 1:
                continue
            else:
                return False
        return True

    return tuple(i for i, (k, name) in enumerate(zip(kinds, names))
                 if type(k) is np.ndarray and not only_read(name, k.ndim, name in viewed))
