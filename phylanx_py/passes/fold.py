"""Constant folding: a pure primitive call on constants becomes its (scalar) value at compile time."""
from __future__ import annotations

import numpy as np

from phylanx_py.primitives import lookup

from .. import ir
from .rewrite import map_nodes

# Only immutable scalar results are folded: an array or list constant would be shared between calls.
_FOLDED = (bool, int, float, complex, str, type(None), np.generic)


def _small_enough(prim_name, args) -> bool:
    # ``2 ** 10**9`` is a pure expression that would take minutes to fold; leave big powers to run time.
    if prim_name in ("operator.pow", "power", "builtins.pow", "math.pow") and len(args) >= 2:
        exp = args[1]
        return isinstance(exp, (int, float, np.number)) and abs(exp) <= 256
    if prim_name in ("operator.mul", "operator.lshift"):  # "ab" * 10**9
        return all(not isinstance(a, (str, bytes)) or len(a) < 4096 for a in args) and \
            all(not isinstance(a, int) or abs(a) < 1 << 20 for a in args if prim_name == "operator.lshift")
    return True


def _fold(node):
    if isinstance(node, ir.Call):
        if not all(isinstance(a, ir.Const) for a in node.args) or \
                not all(isinstance(v, ir.Const) for _, v in node.kwargs):
            return node
        prim = lookup(node.prim)
        args = [a.value for a in node.args]
        if not prim.foldable or prim.resolve == "none" or not all(isinstance(a, _FOLDED) for a in args):
            return node
        if not _small_enough(node.prim, args):
            return node
        try:
            value = prim.kernel(*args, **{k: v.value for k, v in node.kwargs})
        except Exception:
            return node  # the error is raised at run time, at this line, as without folding
        if isinstance(value, _FOLDED):
            return ir.Const(value, node.loc)
        return node
    if isinstance(node, ir.IfExp) and isinstance(node.cond, ir.Const) and isinstance(node.cond.value, _FOLDED):
        return node.then if node.cond.value else node.orelse
    return node


def fold_constants(program: ir.Program) -> ir.Program:
    return map_nodes(program, _fold)
