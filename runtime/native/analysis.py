"""Which names a loop reads and writes, decided once per program from the tree (runtime/native's static part).

A loop's kernel takes every name it uses that the rest of its function also uses (its free variables), and
returns those it assigns; names used only inside the loop are the kernel's own. A loop that binds a name the
function reads elsewhere only after the loop (so it could be unbound), that returns from inside, or that builds
closures over its names, stays interpreted: the reasons are returned, not raised."""
from __future__ import annotations

from phylanx_py import ir


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
        self.globals = module_globals(loop, used)
        if self.globals:
            self.loop = globals_as_names(loop, self.globals)
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


def module_globals(node, exclude) -> dict:
    """The module data globals ``node`` reads, name -> module: names read from one module only and not in
    ``exclude`` (names of the function: Python makes an assigned name local throughout it)."""
    found: dict = {}
    for g in ir.walk(node):
        if isinstance(g, ir.Global):
            found.setdefault(g.name, set()).add(g.module)
    return {name: next(iter(mods)) for name, mods in found.items() if len(mods) == 1 and name not in exclude}


def globals_as_names(node, names):
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
        return globals_as_names(value, names)
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
