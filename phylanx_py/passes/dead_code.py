"""Dead code: statements after return/break/continue, branches and loops whose condition is a constant."""
from __future__ import annotations

from .. import ir
from .fold import _FOLDED
from .rewrite import map_nodes

_JUMPS = (ir.Return, ir.Break, ir.Continue)


def _const_truth(node):
    if isinstance(node, ir.Const) and isinstance(node.value, _FOLDED):
        return bool(node.value)
    return None


def _flatten(stmts):
    out = []
    for s in stmts:
        if isinstance(s, ir.Block):
            out.extend(s.stmts)  # a branch folded into its block: splice it in
        else:
            out.append(s)
        if isinstance(out[-1] if out else None, _JUMPS):
            break
    return out


def _prune(node):
    if isinstance(node, ir.If):
        truth = _const_truth(node.cond)
        if truth is not None:
            return node.then if truth else node.orelse
    if isinstance(node, ir.While) and _const_truth(node.cond) is False:
        return node.orelse
    if isinstance(node, ir.Block):
        stmts = []
        for s in node.stmts:
            stmts.extend(_flatten([s]))
            if stmts and isinstance(stmts[-1], _JUMPS):
                break
        if tuple(stmts) != node.stmts:
            return ir.Block(tuple(stmts), node.loc)
    return node


def remove_dead_code(program: ir.Program) -> ir.Program:
    return map_nodes(program, _prune)
