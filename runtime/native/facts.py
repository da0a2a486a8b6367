"""The primitives' native rules (``primitives/registry.py``'s ``Lowering``), as the native tier's passes read them.

By primitive name (``rule``) for the passes over the IR (arith.py, bounds.py, signs.py, calls.py). By the function a
form calls (``calls``: ``np.exp`` -> whether it may raise, allocates, which arguments it only reads): the lowerer
tags each call it writes with these (kir.declared), which parallel.py asks; analysis.py and whole_lower.py still
look them up by the text they read in the generated source.
Both come from the declarations of the registry in use (a test's scoped one too), nothing keeps a list of names.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from phylanx_py.primitives import lookup
from phylanx_py.primitives.registry import UnknownPrimitive, current_registry

from . import kinds as K

# The calls the lowerer writes itself, not a primitive's form: conversions around arithmetic (``np.int32(x)``,
# ``float(x)``) and ``max`` of Either flags (kinds.py) and of a trip count (bounds.py); of numbers, none raises
_CASTS = frozenset({"float", "bool", "complex", "max"} |
                   {f"np.{'bool_' if d == np.bool_ else d.name}" for d in K.DTYPES})


def rule(prim: str, field: str):
    """Field ``field`` of primitive ``prim``'s native form, or None (no such primitive, no native form)."""
    try:
        low = lookup(prim).lowering
    except UnknownPrimitive:
        return None
    return getattr(low, field) if low is not None else None


@dataclass(frozen=True, slots=True)
class CallFacts:
    raises: bool = True
    allocates: bool = False
    reads: int = 0


def calls() -> dict[str, CallFacts]:
    """Called function's text -> its facts, for every native form that calls a function. Forms of several
    primitives calling one function (``np.dot``: dot, matmul, ``@``) join conservatively: it may raise when any
    says so, allocates when any does, reads the fewest arguments any reads."""
    return _calls(current_registry())


@functools.lru_cache(maxsize=8)
def _calls(registry) -> dict[str, CallFacts]:
    out = {}
    for name in registry.names():
        low = registry.lookup(name).lowering
        text = low.called if low is not None else None
        if text is None or text in _CASTS:  # (the lowerer's own: never raising, whatever declares them too)
            continue
        facts, had = CallFacts(low.raises, low.allocates, low.reads), out.get(text)
        out[text] = facts if had is None else CallFacts(had.raises or facts.raises, had.allocates or facts.allocates,
                                                        min(had.reads, facts.reads))
    return {**out, **{text: CallFacts(raises=False) for text in _CASTS}}


def allocating() -> tuple:
    """The called functions' texts whose forms allocate an array (``np.zeros`` ...), sorted."""
    return _allocating(current_registry())


@functools.lru_cache(maxsize=8)
def _allocating(registry) -> tuple:
    return tuple(sorted(text for text, f in _calls(registry).items() if f.allocates))
