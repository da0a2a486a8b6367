"""The text form of the tree with the registry's names for primitives (``__add`` for ``operator.add``)."""
from __future__ import annotations

from . import ir, text_form
from .primitives import UnknownPrimitive, lookup


def _label(prim: str) -> str:
    try:
        return lookup(prim).label
    except UnknownPrimitive:
        return prim


def labels_of(program: ir.Program) -> tuple:
    """((primitive name, printed name), ...) of every primitive the program calls: what ``str(program)`` shows."""
    names = {n.prim for _, fn in program.functions for n in ir.walk(fn) if isinstance(n, ir.Call)}
    return tuple(sorted((name, _label(name)) for name in names if _label(name) != name))


def expr(n) -> str:
    """One expression as text."""
    return text_form.expr(n, _label)


def format_program(program: ir.Program) -> str:
    return text_form.format_program(program, _label)


def tree_view(program: ir.Program) -> str:
    """One node a line, indented by depth, with its source line: ``exp  (line 20)``."""
    return text_form.tree_view(program, ir.children, _label)
