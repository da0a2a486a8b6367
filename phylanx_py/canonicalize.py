"""Small AST→AST steps run before translation, in one ordered driver; each is tested alone.

Early ``return``, ``break`` and ``continue`` need no rewriting: the evaluator carries them as signals.
"""
from __future__ import annotations

import ast
import itertools

from phylanx_py.primitives.operators import INPLACE_BY_AST

from .turns import turn


class _Temps:
    """Fresh temporary names (``__px_1`` ...); they cannot clash with user names, which never start so."""

    def __init__(self):
        self._n = itertools.count(1)

    def __call__(self) -> str:
        return f"__px_{next(self._n)}"


class _Steps(ast.NodeTransformer):
    """A step's walk, with the turns of work done beside the calls (turns.py): the three steps over a function's
    nodes were the longest stretch of a translation without one (2-3 ms at the start of each: a first call's
    plain run beside it lost as much)."""

    def visit(self, node):
        turn()
        return super().visit(node)


def _copy_loc(new, old):
    return ast.copy_location(new, old)


class ChainedComparisons(_Steps):
    """``a < b <= c`` → ``a < (t := b) and t <= c``: b evaluated once, short circuit kept."""

    def __init__(self, temps):
        self.temps = temps

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        parts, left = [], node.left
        for i, (op, right) in enumerate(zip(node.ops, node.comparators)):
            last = i == len(node.ops) - 1
            if not last:
                tmp = self.temps()
                named = _copy_loc(ast.NamedExpr(ast.Name(tmp, ast.Store()), right), right)
                parts.append(_copy_loc(ast.Compare(left, [op], [named]), node))
                left = _copy_loc(ast.Name(tmp, ast.Load()), right)
            else:
                parts.append(_copy_loc(ast.Compare(left, [op], [right]), node))
        return _copy_loc(ast.BoolOp(ast.And(), parts), node)



def inplace_call(op: ast.operator, target_load, value, node):
    """``__px_inplace_iadd(target, value)``: the translator maps it to ``operator.iadd`` (in place on arrays)."""
    name = f"__px_inplace_{INPLACE_BY_AST[type(op).__name__]}"
    return _copy_loc(ast.Call(_copy_loc(ast.Name(name, ast.Load()), node), [target_load, value], []), node)


class AugmentedAssignment(_Steps):
    """``x += v`` → ``x = iadd(x, v)``; ``a[k] += v`` → ``t = a; s = k; t[s] = iadd(t[s], v)``.

    This is exactly what Python does (``__iadd__`` then a store), so arrays change in place and aliases see it.
    """

    def __init__(self, temps):
        self.temps = temps

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        t = node.target
        if isinstance(t, ast.Name):
            load = _copy_loc(ast.Name(t.id, ast.Load()), t)
            return _copy_loc(ast.Assign([t], inplace_call(node.op, load, node.value, node)), node)
        if isinstance(t, ast.Subscript):
            obj, key = self.temps(), self.temps()
            stmts = [
                _copy_loc(ast.Assign([_copy_loc(ast.Name(obj, ast.Store()), t.value)], t.value), node),
                _copy_loc(ast.Assign([_copy_loc(ast.Name(key, ast.Store()), t.slice)], t.slice), node),
            ]
            item = lambda ctx: _copy_loc(
                ast.Subscript(_copy_loc(ast.Name(obj, ast.Load()), t), _copy_loc(ast.Name(key, ast.Load()), t), ctx), t
            )
            update = inplace_call(node.op, item(ast.Load()), node.value, node)
            stmts.append(_copy_loc(ast.Assign([item(ast.Store())], update), node))
            return stmts
        return node  # attribute targets: left for the translator to reject with a location


class GeneratorArguments(_Steps):
    """``sum(x * x for x in xs)`` → ``sum([x * x for x in xs])``: a generator consumed at once by the call."""

    def visit_Call(self, node):
        self.generic_visit(node)
        node.args = [_copy_loc(ast.ListComp(a.elt, a.generators), a) if isinstance(a, ast.GeneratorExp) else a
                     for a in node.args]
        return node


STEPS = (ChainedComparisons, AugmentedAssignment, GeneratorArguments)


def canonicalize(tree: ast.AST) -> ast.AST:
    """Run every step in order on ``tree`` (a FunctionDef or Lambda); returns the rewritten tree."""
    temps = _Temps()
    for step in STEPS:
        tree = step(temps).visit(tree) if step is not GeneratorArguments else step().visit(tree)
        turn()
    return ast.fix_missing_locations(tree)
