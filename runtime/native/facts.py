"""The primitives' native rules (``primitives/registry.py``'s ``Lowering``), as the native tier's passes read them.

By primitive name (``rule``) for the passes over the IR (arith.py, bounds.py, signs.py, calls.py). By the function a
form calls (``calls``: ``np.exp`` -> whether it may raise, allocates, which arguments it only reads): the lowerer
tags each call it writes with these (kir.declared), which parallel.py and whole_lower.py ask. By form
(``operations``): the operators and ``math`` names its text writes, which the lowerer tags (kir.Op); (``reads``) the
operands it only reads, which the lowerer marks read on their mentions (kir.Use).
Both come from the declarations of the registry in use (a test's scoped one too), nothing keeps a list of names.
"""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

import numpy as np
from phylanx_py.primitives import lookup
from phylanx_py.primitives.registry import UnknownPrimitive, current_registry

from phylanx_py import ir

from . import kinds as K

# The calls the lowerer writes itself, not a primitive's form: conversions around arithmetic (``np.int32(x)``,
# ``float(x)``) and ``max`` of Either flags (kinds.py) and of a trip count (bounds.py); of numbers, none raises
_CASTS = frozenset({"float", "bool", "complex", "max"} |
                   {f"np.{'bool_' if d == np.bool_ else d.name}" for d in K.DTYPES})


def allocates(node) -> bool:
    """Whether IR ``node`` is a call of a primitive whose native form allocates a new array (``np.zeros(...)``,
    ``Lowering.allocates``)."""
    return isinstance(node, ir.Call) and bool(rule(node.prim, "allocates"))


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
    blas: bool = False


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
        facts, had = CallFacts(low.raises, low.allocates, low.reads, low.blas), out.get(text)
        out[text] = facts if had is None else CallFacts(had.raises or facts.raises, had.allocates or facts.allocates,
                                                        min(had.reads, facts.reads), had.blas or facts.blas)
    return {**out, **{text: CallFacts(raises=False) for text in _CASTS}}


# the operators whose operations kir.Op tags, by the kind it names them
_OPERATORS = {ast.Div: "division", ast.FloorDiv: "division", ast.Mod: "modulo", ast.Pow: "power",
              ast.LShift: "shift", ast.RShift: "shift"}


@functools.cache
def operations(form) -> tuple:
    """The operations (kir.Op kinds) a declaration's native form writes: ``"({0} % {1})"`` modulo,
    ``"(_px_sum({0}) / {0}.shape[0])"`` division, ``math.floor`` math; read once per form, from its template over
    placeholder operands (a form's text is its declaration's own: what the kernel's other parts write is tagged
    where the lowerer writes it)."""
    tree = ast.parse(form.source([f"__pxa{i}" for i in range(8)]), mode="eval")
    kinds = {_OPERATORS[type(n.op)] for n in ast.walk(tree) if isinstance(n, ast.BinOp) and type(n.op) in _OPERATORS}
    if any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "math"
           for n in ast.walk(tree)):
        kinds.add("math")
    return tuple(sorted(kinds))


@functools.cache
def exponents(form) -> tuple:
    """The operands (by position) of a declaration's native form that are exponents of its ``**`` (-1: an exponent
    written over operands, never a literal); read once per form, as ``operations``."""
    tree = ast.parse(form.source([f"__pxa{i}" for i in range(8)]), mode="eval")
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) and not isinstance(n.right, ast.Constant):
            r = n.right
            out.append(int(r.id[5:]) if isinstance(r, ast.Name) and r.id.startswith("__pxa") else -1)
    return tuple(out)


_READ_ATTRS = frozenset({"shape", "size", "ndim", "dtype"})


@functools.cache
def reads(form, n: int) -> tuple[frozenset, frozenset, frozenset]:
    """(positions, names, measured): the operands of a declaration's native form that it only reads wherever it
    writes them (``positions``: an operand of arithmetic or a comparison, whose value is a new one, or an argument of
    a NumPy function that only reads it, ``Lowering.reads``), those it only reads when they are an array's name
    (``names``: its ``.shape``/``.size``/``.ndim``/``.dtype``, ``len`` of it), and those it uses only through
    ``.shape``/``.size``/``.ndim`` or ``len`` (``measured``: not the array as a value, kir.Use.whole). Read once per
    form and number of operands ``n``, from its template over placeholder operands, as ``operations``."""
    tree = ast.parse(form.source([f"__pxa{i}" for i in range(n)]), mode="eval")
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    reading = calls()
    seen: dict = {}
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Name) and n.id.startswith("__pxa")):
            continue
        up, how = parents.get(id(n)), None
        if isinstance(up, (ast.BinOp, ast.UnaryOp, ast.Compare)):
            how = "consumed"
        elif isinstance(up, ast.Call) and n in up.args and not up.keywords and isinstance(up.func, ast.Attribute) \
                and isinstance(up.func.value, ast.Name) and up.func.value.id == "np" and \
                len(up.args) <= getattr(reading.get(f"np.{up.func.attr}"), "reads", 0):
            how = "consumed"
        elif (isinstance(up, ast.Attribute) and up.attr in _READ_ATTRS) or (
                isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id == "len" and up.args == [n]):
            how = "name" if isinstance(up, ast.Attribute) and up.attr == "dtype" else "measure"
        seen.setdefault(int(n.id[5:]), set()).add(how)
    return (frozenset(i for i, h in seen.items() if h == {"consumed"}),
            frozenset(i for i, h in seen.items() if None not in h),
            frozenset(i for i, h in seen.items() if h == {"measure"}))


@functools.cache
def form_calls(form, n: int) -> tuple:
    """The functions a declaration's native form calls over ``n`` operands, by their text with the operands as
    ``{0}``, ``{1}`` ... (``np.multiply`` of ``np.multiply.outer``'s form, ``{0}.copy`` of a method's): those the
    lowerer tags besides the form's ``called`` (its declared one). Read once per form, as ``operations``."""
    tree = ast.parse(form.source([f"__pxa{i}" for i in range(n)]), mode="eval")
    out = []
    for c in ast.walk(tree):
        f = c.func if isinstance(c, ast.Call) else None
        if isinstance(f, ast.Name) or (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)):
            out.append(re.sub(r"__pxa(\d+)", r"{\1}", ast.unparse(f)))
    return tuple(dict.fromkeys(out))
