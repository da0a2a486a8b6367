"""Bottom-up tree rewriting shared by the passes: rebuild a node from rewritten children, then apply ``fn``."""
from __future__ import annotations

import dataclasses

from .. import ir
from ..turns import turn


def _map_value(v, fn):
    if isinstance(v, ir.Node):
        return map_nodes(v, fn)
    if isinstance(v, tuple):
        return tuple(_map_value(x, fn) for x in v)
    return v


def map_nodes(node: ir.Node, fn):
    """``fn`` applied to every node, children first; unchanged subtrees are kept (identity), not copied."""
    turn()  # (passes run beside the calls take their turns here: turns.py)
    changes = {}
    for f in dataclasses.fields(node):
        if f.name == "loc":
            continue
        old = getattr(node, f.name)
        new = _map_value(old, fn)
        if new is not old and new != old:
            changes[f.name] = new
    if changes:
        node = dataclasses.replace(node, **changes)
    return fn(node)
