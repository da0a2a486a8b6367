"""DOT text of the tree (graphviz's input format); producing it needs no graphviz."""
from __future__ import annotations

from . import ir
from .printer import _label, expr


def _node_label(n) -> str:
    if isinstance(n, ir.Call):
        head = _label(n.prim)
    elif isinstance(n, ir.Apply):
        head = f"call {expr(n.func)}" if isinstance(n.func, ir.FuncRef) else "call"
    elif isinstance(n, (ir.Const, ir.Var, ir.Global, ir.StoreName)):
        head = expr(n)
    else:
        head = type(n).__name__.lower()
    line = f"\\nline {n.loc.lineno}" if getattr(n, "loc", None) is not None and n.loc.lineno else ""
    return (head[:40] + line).replace('"', '\\"')


def to_dot(program: ir.Program) -> str:
    lines = ["digraph phylanx {", '  node [shape=box, fontname="Helvetica"];']
    counter = [0]

    def visit(n) -> str:
        counter[0] += 1
        nid = f"n{counter[0]}"
        lines.append(f'  {nid} [label="{_node_label(n)}"];')
        for c in ir.children(n):
            lines.append(f"  {nid} -> {visit(c)};")
        return nid

    for name, fn in program.functions:
        lines.append(f'  subgraph "cluster_{name}" {{ label="{name}";')
        visit(fn)
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines)
