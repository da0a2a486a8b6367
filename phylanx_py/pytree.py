"""Argument trees (pytrees): nested dicts/lists/tuples flattened to their leaves and a structure that rebuilds them.

px.grad flattens its arguments and outputs with these; nn models flatten their parameters to one vector."""
from __future__ import annotations

import re

import numpy as np


def flatten(tree, leaves=None):
    """(leaves, structure) of nested dicts/lists/tuples; the structure rebuilds them with ``unflatten``."""
    if leaves is None:
        leaves = []
    return leaves, _flatten(tree, leaves.append)


def _flatten(tree, append):
    t = type(tree)
    if t is np.ndarray or t is float or t is int:  # the common leaves first: a training step flattens ~30
        append(tree)
        return None
    if t is dict or (t is not list and t is not tuple and isinstance(tree, dict)):
        return ("dict", tuple(tree), tuple([_flatten(v, append) for v in tree.values()]))
    if t is list or t is tuple or (isinstance(tree, (list, tuple)) and not hasattr(tree, "_fields")):
        return (t.__name__, len(tree), tuple([_flatten(v, append) for v in tree]))
    append(tree)
    return None


# structure -> a function of the leaves that builds it: one expression compiled per structure (a training step
# rebuilds the same ~30 containers at every call; walking the structure cost more than the step's small kernels)
_builders: dict = {}
_MAX_BUILDERS = 256


def unflatten(structure, leaves):
    """The tree ``flatten`` took apart, rebuilt from its ``structure`` with ``leaves`` (in flatten's order)."""
    try:
        build = _builders.get(structure)
    except TypeError:  # a dict key that cannot be hashed in a tuple (it could in the dict): walk it
        return _walk(structure, leaves)
    if build is None:
        if len(_builders) >= _MAX_BUILDERS:
            _builders.clear()
        build = _builders[structure] = _compile(structure)
    if build is _WALK or len(leaves) != build.n:
        return _walk(structure, leaves)
    return build(leaves)


_WALK = object()  # a structure rebuilt by walking it (``_compile``)


def _str_keys(s) -> bool:
    """Whether every dict key in structure ``s`` is a str: keys such as 1, True and 1.0 are equal and hash alike,
    so a builder cached for one would rebuild another's dict with its keys (a review: {True: g} came back {1: g})."""
    if s is None:
        return True
    kind, meta, parts = s
    return (kind != "dict" or all(type(k) is str for k in meta)) and all(_str_keys(p) for p in parts)


def _walk(structure, leaves):
    return _build(structure, iter(leaves))


def _build(s, it):
    # a module function, not a closure that calls itself: such a closure is a reference cycle, which kept the
    # leaves (a step's gradients) alive until the garbage collector's next pass
    if s is None:
        return next(it)
    kind, meta, parts = s
    items = [_build(p, it) for p in parts]
    if kind == "dict":
        return dict(zip(meta, items))
    return items if kind == "list" else tuple(items)


def _compile(structure):
    """``lambda L: <the structure's display over L[0], L[1], ...>``, with ``n`` its number of leaves; ``_WALK`` for
    a structure with other than str dict keys, or nested deeper than Python's parser takes (about 200 levels)."""
    env: dict = {}
    count = [0]
    try:
        if not _str_keys(structure):
            return _WALK
        fn = eval(f"lambda L: {_display(structure, env, count)}", env)  # noqa: S307 - our own display of a structure
    except (SyntaxError, RecursionError, MemoryError):
        return _WALK
    fn.n = count[0]
    return fn


def _display(s, env: dict, count: list) -> str:
    """The display building ``s`` (dict keys bound in ``env``); ``count``: the leaves so far. (A module function:
    see ``_build``.)"""
    if s is None:
        count[0] += 1
        return f"L[{count[0] - 1}]"
    kind, meta, parts = s
    items = [_display(p, env, count) for p in parts]
    if kind == "dict":
        keys = []
        for key in meta:
            env[f"k{len(env)}"] = key
            keys.append(f"k{len(env) - 1}")
        return "{" + ", ".join(f"{k}: {v}" for k, v in zip(keys, items)) + "}"
    body = "".join(f"{v}, " for v in items)
    return f"[{body}]" if kind == "list" else f"({body})"


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
