"""Resolving a free name or ``module.attr`` chain against the function's globals, at compile time.

A name is a NumPy function only when it *is* one through the globals (``np.exp``, ``from numpy import exp``);
a local variable called ``e``, ``sum`` or ``array`` stays a variable (the translator checks locals first).
"""
from __future__ import annotations

import builtins
import types
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from phylanx_py.primitives import name_of
from phylanx_py.primitives.python_ops import BUILTINS

# values nothing can change in place (a scalar of Python or NumPy): a stopped plain run leaves them as they were too
SCALARS = (bool, int, float, complex, str, bytes, type(None), np.generic)


@dataclass(frozen=True)
class Resolved:
    """What a static name stands for. ``kind``: prim | module | function | class | data | builtin_data | unsupported."""

    kind: str
    obj: object
    prim: str | None = None
    name: str = ""


def classify(obj, name: str, *, from_globals: bool) -> Resolved:
    if isinstance(obj, types.ModuleType):
        return Resolved("module", obj, name=name)
    compiled = getattr(obj, "__phylanx_compiled__", None)
    if compiled is not None:
        return Resolved("function", obj.__wrapped__, name=name)
    prim = name_of(obj)
    if prim is not None:
        return Resolved("prim", obj, prim, name)
    if isinstance(obj, types.FunctionType):
        return Resolved("function", obj, name=name)
    if isinstance(obj, type):
        return Resolved("class", obj, name=name)
    if isinstance(obj, (types.BuiltinFunctionType, np.ufunc)) or (callable(obj) and not from_globals):
        return Resolved("unsupported", obj, name=name)
    if isinstance(obj, SCALARS) and not from_globals:
        return Resolved("builtin_data", obj, name=name)
    return Resolved("data", obj, name=name)


def resolve_name(name: str, globals_: dict) -> Resolved | None:
    """A free name: the function's globals first, then the builtins Python would find; None if neither."""
    if name in globals_:
        return classify(globals_[name], name, from_globals=True)
    b = globals_.get("__builtins__", builtins)
    bdict = b if isinstance(b, dict) else vars(b)
    if name in bdict:
        obj = bdict[name]
        if name in BUILTINS or (isinstance(obj, type) and issubclass(obj, BaseException)):
            return classify(obj, name, from_globals=False)
        if isinstance(obj, type):  # int, float ... used as values (isinstance(x, int)) stay usable
            return Resolved("class", obj, name=name)
        return Resolved("unsupported", obj, name=name)
    return None


MISSING = object()


def resolve_attr(base: Resolved, attr: str) -> Resolved:
    """``module.attr`` at compile time; ``MISSING`` object when the module has no such attribute."""
    obj = getattr(base.obj, attr, MISSING)
    qual = f"{base.name}.{attr}"
    if obj is MISSING:
        return Resolved("missing", MISSING, name=qual)
    return classify(obj, qual, from_globals=False)


class CellNamespace(Mapping):
    """The free variables of a closure (a lambda or nested def passed in at run time), read live from its
    cells, as Python reads them."""

    def __init__(self, pyfunc):
        self._cells = dict(zip(pyfunc.__code__.co_freevars, pyfunc.__closure__ or ()))

    def __getitem__(self, name):
        try:
            return self._cells[name].cell_contents
        except ValueError:
            raise NameError(f"free variable '{name}' referenced before assignment") from None

    def __iter__(self):
        return iter(self._cells)

    def __len__(self):
        return len(self._cells)
