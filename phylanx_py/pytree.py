"""Argument trees (pytrees): nested dicts/lists/tuples flattened to their leaves and a structure that rebuilds them.

px.grad flattens its arguments and outputs with these; nn models flatten their parameters to one vector."""
from __future__ import annotations

import re

import numpy as np


def flatten(tree, leaves=None):
    """(leaves, structure) of nested dicts/lists/tuples; the structure rebuilds them with ``unflatten``."""
    if leaves is None:
        leaves = []
    t = type(tree)
    if t is np.ndarray or t is float or t is int:  # the common leaves first: a training step flattens ~30
        leaves.append(tree)
        return leaves, None
    if isinstance(tree, dict):
        return leaves, ("dict", tuple(tree), tuple(flatten(v, leaves)[1] for v in tree.values()))
    if isinstance(tree, (list, tuple)) and not hasattr(tree, "_fields"):
        return leaves, (type(tree).__name__, len(tree), tuple(flatten(v, leaves)[1] for v in tree))
    leaves.append(tree)
    return leaves, None


def unflatten(structure, leaves):
    """The tree ``flatten`` took apart, rebuilt from its ``structure`` with ``leaves`` (in flatten's order)."""
    it = iter(leaves)

    def build(s):
        if s is None:
            return next(it)
        kind, meta, parts = s
        items = [build(p) for p in parts]
        if kind == "dict":
            return dict(zip(meta, items))
        return items if kind == "list" else tuple(items)
    return build(structure)


def leaf_names(prefix: str, structure) -> list[str]:
    """Readable names of the leaves ``flatten`` yields, in its order: ``params["W1"]`` -> ``params_W1``."""
    if structure is None:
        return [prefix]
    kind, meta, parts = structure
    keys = meta if kind == "dict" else range(meta)
    out = []
    for key, part in zip(keys, parts):
        out += leaf_names(f"{prefix}_{re.sub(r'[^0-9A-Za-z_]', '_', str(key))}", part)
    return out
