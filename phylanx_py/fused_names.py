"""Names of fused groups by their contents (``fused[neg, exp, add, truediv]``), one spelling for the text tree,
the drawing, the profile table and the HTML report."""
from __future__ import annotations

from . import ir, text_form


def kind(n: ir.Fused) -> str:
    """``fused``, ``fused_rowdot``, ``fused_sum``, ``fused_sum_argmin``: the kernel the group runs as."""
    return text_form.fused_kind(n)


def members(n: ir.Fused) -> list[str]:
    """The operations of the group in the order they are computed (nested groups' included), each once."""
    return text_form.fused_members(n, ir.children)


def fused_label(n: ir.Fused) -> str:
    return text_form.fused_label(n, ir.children)


def groups(program: ir.Program) -> dict:
    """(file, line, col, kind) -> label of every fused group of ``program`` (how a profile names its rows)."""
    out = {}
    for n in ir.walk(program):
        if isinstance(n, ir.Fused):
            out[(n.loc.filename, n.loc.lineno, n.loc.col, kind(n))] = fused_label(n)
    return out
