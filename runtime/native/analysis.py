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
        self.params = sorted(n for n in used if n in outside)
        self.outputs = [n for n in self.params if n in writes]
        self.reason = None
        if closures & used or out_closures & used:
            self.reason = "a closure uses its variables"
        elif any(isinstance(s, (ir.Return, ir.Lambda)) for s in ir.walk(loop)):
            self.reason = "it returns from inside" if any(isinstance(s, ir.Return) for s in ir.walk(loop)) \
                else "it makes a function"
        elif any(isinstance(v, ir.Var) and v.depth != 0 for v in ir.walk(loop)):
            self.reason = "it uses an enclosing function's variables"
