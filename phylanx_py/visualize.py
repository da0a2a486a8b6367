"""Drawings of the tree: DOT text (functions and loops as clusters, nodes coloured by profiled time) and
rendering through graphviz's ``dot`` program for .svg/.png/.pdf."""
from __future__ import annotations

import os
import shutil
import subprocess

from . import ir
from .fused_names import fused_label, kind
from .printer import _label, expr

_PALETTE = ["#f7fbff", "#fee8c8", "#fdd49e", "#fdbb84", "#fc8d59", "#ef6548", "#d7301f", "#990000"]


class GraphvizMissing(RuntimeError):
    pass


def _text(n) -> str:
    if isinstance(n, ir.Call):
        return _label(n.prim)
    if isinstance(n, ir.Leaf):
        return f"${n.index}"
    if isinstance(n, ir.Fused):
        return fused_label(n)
    if isinstance(n, ir.Apply):
        return f"call {expr(n.func)}" if isinstance(n.func, ir.FuncRef) else "call"
    if isinstance(n, (ir.Const, ir.Var, ir.Global, ir.StoreName)):
        return expr(n)[:30]
    return type(n).__name__.lower()


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def to_dot(program: ir.Program, profile=None) -> str:
    """DOT text: one cluster per function and per loop body; with ``profile``, primitive nodes are filled by
    their share of the hottest node's total time and labelled with it."""
    lines = ["digraph phylanx {", "  rankdir=TB;", '  node [shape=box, style="rounded,filled", fillcolor="#ffffff",'
             ' fontname="Helvetica", fontsize=10];', '  edge [arrowsize=0.6];']
    hottest = max((s.total for s in profile.nodes.values()), default=0.0) if profile is not None else 0.0
    counter = [0]

    def node_attrs(n) -> str:
        parts = [_text(n)]
        loc = getattr(n, "loc", None)
        if loc is not None and loc.lineno:
            parts.append(f"line {loc.lineno}")
        fill = "#ffffff"
        if profile is not None and isinstance(n, (ir.Call, ir.Fused)):
            s = profile.stats_for(n.loc, _label(n.prim) if isinstance(n, ir.Call) else kind(n))
            if s is not None:
                parts.append(f"{s.total * 1e3:.2f} ms, {s.calls}x {s.mode}")
                share = s.total / hottest if hottest else 0.0
                fill = _PALETTE[min(int(share * (len(_PALETTE) - 1) + 0.5), len(_PALETTE) - 1)]
        label = "\\n".join(_esc(p) for p in parts)  # DOT's line break between escaped parts
        font = ', fontcolor="#ffffff"' if fill in _PALETTE[-2:] else ""
        return f'label="{label}", fillcolor="{fill}"{font}' + (", shape=ellipse" if isinstance(n, ir.Call) else "")

    def visit(n, indent="  ") -> str:
        counter[0] += 1
        nid = f"n{counter[0]}"
        lines.append(f"{indent}{nid} [{node_attrs(n)}];")
        kids = [c for c in ir.children(n) if not (isinstance(c, ir.Block) and not c.stmts)]  # no empty else
        if isinstance(n, ir.Fused):
            # a fused group: one kernel; its operations drawn inside a cluster, its inputs outside
            for i, leaf in enumerate(n.leaves):
                lines.append(f'{indent}{nid} -> {visit(leaf, indent)} [label="${i}", fontsize=8];')
            lines.append(f'{indent}subgraph "cluster_{nid}" {{ label="{kind(n)} kernel, line {n.loc.lineno}"; '
                         f'style="filled,rounded"; fillcolor="#eef5ff";')
            lines.append(f"{indent}  {nid} -> {visit(n.body, indent + '  ')};")
            lines.append(f"{indent}}}")
        elif isinstance(n, (ir.For, ir.While, ir.Lambda)):
            # a loop's (or closure's) body is drawn once, inside a cluster, not unrolled; what runs once per
            # loop (its target, its iterable) stays outside
            inside = [c for c in kids if isinstance(c, (ir.Block, ir.Function))]
            for c in kids:
                if not any(c is i for i in inside):
                    lines.append(f"{indent}{nid} -> {visit(c, indent)};")
            lines.append(f'{indent}subgraph "cluster_{nid}" {{ label="{type(n).__name__.lower()} body, line '
                         f'{n.loc.lineno}"; style=dashed;')
            for c in inside:
                lines.append(f"{indent}  {nid} -> {visit(c, indent + '  ')};")
            lines.append(f"{indent}}}")
        else:
            for c in kids:
                lines.append(f"{indent}{nid} -> {visit(c, indent)};")
        return nid

    for name, fn in program.functions:
        lines.append(f'  subgraph "cluster_fn_{_esc(name)}" {{ label="{_esc(name)} ({os.path.basename(fn.loc.filename)}'
                     f':{fn.loc.lineno})"; style=solid;')
        visit(fn, "    ")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines)


def render(dot_text: str, fmt: str) -> bytes:
    """Run graphviz's ``dot -T<fmt>``; GraphvizMissing names the program when it is not installed."""
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizMissing("graphviz's 'dot' program was not found on PATH: install graphviz "
                              "(e.g. apt-get install graphviz) to draw .svg/.png/.pdf, or write .dot instead")
    done = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode(), capture_output=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"dot -T{fmt} failed: {done.stderr.decode(errors='replace')[:500]}")
    return done.stdout
