"""Names of fused groups by their contents (``fused[neg, exp, add, truediv]``), one spelling for the text tree,
the drawing, the profile table and the HTML report."""
from __future__ import annotations

from . import ir


def kind(n: ir.Fused) -> str:
    """``fused``, ``fused_rowdot``, ``fused_sum``, ``fused_sum_argmin``: the kernel the group runs as."""
    return f"fused_{n.reduce[0]}" if n.reduce else "fused"


def members(n: ir.Fused) -> list[str]:
    """The operations of the group in the order they are computed (nested groups' included), each once."""
    out: list[str] = []

    def visit(node):
        # a nested group's inputs are computed before its body
        kids = list(node.leaves) + [node.body] if isinstance(node, ir.Fused) else ir.children(node)
        for c in kids:
            if not isinstance(c, ir.Leaf):
                visit(c)
        if isinstance(node, ir.Call):
            name = node.prim.rsplit(".", 1)[-1]
            if name not in out:
                out.append(name)

    visit(n.body)
    if n.reduce and n.reduce[0] not in ("rowdot",):
        for op in n.reduce[0].split("_"):  # fused_sum: the chain, then sum; sum_argmin: then argmin
            if op not in out:
                out.append(op)
    return out


def fused_label(n: ir.Fused) -> str:
    return f"{kind(n)}[{', '.join(members(n))}]"


def groups(program: ir.Program) -> dict:
    """(file, line, col, kind) -> label of every fused group of ``program`` (how a profile names its rows)."""
    out = {}
    for n in ir.walk(program):
        if isinstance(n, ir.Fused):
            out[(n.loc.filename, n.loc.lineno, n.loc.col, kind(n))] = fused_label(n)
    return out
