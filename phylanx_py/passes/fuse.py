"""Fusion: maximal element-wise subtrees become one Fused node, run as a single generated Numba kernel.

A group needs at least two element-wise primitives (one alone gains nothing). Its leaves are the inputs that
are not element-wise; they must be free of effects (variables, constants, pure primitive calls), because they
are evaluated before the group and a leaf with an effect would move that effect ahead of a failing operation.
Whether the kernel runs is decided per call on the actual inputs (runtime/codegen.py, primitives/fused.py).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from phylanx_py.primitives import lookup
from phylanx_py.primitives.fused import fusable

from .. import ir

_SCALARS = (int, float, complex, np.number)


class _Impure(Exception):
    pass


def _fusable(n) -> bool:
    return isinstance(n, ir.Call) and fusable(n.prim) and not n.kwargs


def _pure(n) -> bool:
    if isinstance(n, (ir.Var, ir.Const, ir.Global)):
        return True
    if isinstance(n, (ir.Call, ir.Tuple, ir.List)):
        return (not isinstance(n, ir.Call) or lookup(n.prim).effect is None) and all(_pure(c) for c in ir.children(n))
    return False


def _same_variable(a, b) -> bool:
    if isinstance(a, ir.Var) and isinstance(b, ir.Var):
        return (a.name, a.depth) == (b.name, b.depth)
    if isinstance(a, ir.Global) and isinstance(b, ir.Global):
        return (a.name, a.module) == (b.name, b.module)
    return False


def _group(root, min_ops: int = 2):
    """(spec, body, leaves) of the element-wise subtree at ``root``, or None (fewer than 2 ops, impure leaf)."""
    leaves: list = []
    locs: list = []
    ops = 0

    def visit(m):
        nonlocal ops
        if _fusable(m):
            ops += 1
            locs.append(m.loc)
            parts = [visit(a) for a in m.args]
            return (m.prim, *(p[0] for p in parts)), ir.Call(m.prim, tuple(p[1] for p in parts), (), m.loc)
        if isinstance(m, ir.Const) and type(m.value) is not bool and isinstance(m.value, _SCALARS):
            return ("const", m.value), m
        if not _pure(m):
            raise _Impure
        if isinstance(m, (ir.Var, ir.Global)):
            for i, seen in enumerate(leaves):
                if _same_variable(seen, m):  # the same variable read twice is one input
                    return ("arg", i), ir.Leaf(i, m.loc)
        leaves.append(m)
        return ("arg", len(leaves) - 1), ir.Leaf(len(leaves) - 1, m.loc)

    try:
        spec, body = visit(root)
    except _Impure:
        return None
    if ops < min_ops:
        return None
    return spec, body, leaves, tuple(locs)


def _summed(node):
    """(chain, axis) for ``chain.sum(axis=...)`` / ``np.sum(chain, axis=...)`` with a constant axis, else None."""
    if not isinstance(node, ir.Call) or node.prim not in ("method.sum", "sum") or len(node.args) != 1:
        return None
    kwargs = dict(node.kwargs)
    axis = kwargs.pop("axis", ir.Const(None))
    if kwargs or not isinstance(axis, ir.Const) or not (axis.value is None or type(axis.value) is int):
        return None
    return (node.args[0], axis.value) if _fusable(node.args[0]) else None


def _rewrite(node):
    """Top down: the first element-wise node met is the root of the largest group containing it."""
    summed = _summed(node)
    if summed is not None:
        chain, axis = summed
        found = _group(chain, min_ops=1)
        if found is not None:
            spec, body, leaves, locs = found
            body = ir.Call(node.prim, (body,), node.kwargs, node.loc)  # the same sum, op by op
            return ir.Fused(spec, body, tuple(_rewrite(leaf) for leaf in leaves), locs + (node.loc,),
                            ("sum", axis), node.loc)
    if _fusable(node):
        found = _group(node)
        if found is not None:
            spec, body, leaves, locs = found
            return ir.Fused(spec, body, tuple(_rewrite(leaf) for leaf in leaves), locs, loc=node.loc)
    changes = {}
    for f in dataclasses.fields(node):
        if f.name == "loc":
            continue
        old = getattr(node, f.name)
        new = _map(old)
        if new is not old:
            changes[f.name] = new
    return dataclasses.replace(node, **changes) if changes else node


def _map(v):
    if isinstance(v, ir.Node):
        return _rewrite(v)
    if isinstance(v, tuple):
        new = tuple(_map(x) for x in v)
        return v if all(a is b for a, b in zip(new, v)) else new
    return v


def fuse_elementwise(program: ir.Program) -> ir.Program:
    return _rewrite(program)
