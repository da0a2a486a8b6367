"""Value kinds: array types that run primitives their own way (tiled arrays), plugged into the evaluator.

As NumPy's ``__array_function__`` lets foreign arrays into NumPy's functions, a kind registers itself here when its
package is imported (a value of the kind cannot exist before), and the evaluator asks this module, never the kind's
package: ``evaluation.py`` knows no ``TiledArray``. A kind implements ``ValueKind``.
"""
from __future__ import annotations

from typing import Protocol


class ValueKind(Protocol):
    """What the evaluator asks of a kind of value."""

    types: tuple  # the Python types of its values

    def call(self, ev, site, args: tuple, kwargs: dict):
        """Run one primitive call at ``site`` whose arguments hold values of this kind (a value or a future)."""

    def submitted(self, ev, fut, site, args: tuple, kwargs: dict) -> None:
        """A task was submitted by an evaluation that ran calls of this kind (e.g. record its result's shape)."""

    def settle(self, value, executor) -> None:
        """Finish computing the values of this kind inside a call's result (raising a failure of theirs)."""

    def discard(self, ev) -> None:
        """The evaluation ``ev`` ended: drop what it left pending."""


_KINDS: list = []
TYPES: set = set()  # every kind's types: the evaluator's and the generated code's fast membership test
_BY_TYPE: dict = {}


def register(kind: ValueKind) -> ValueKind:
    if kind in _KINDS:
        return kind
    _KINDS.append(kind)
    for t in kind.types:
        _BY_TYPE[t] = kind
    TYPES.update(kind.types)
    return kind


def kind_in(args):
    """The kind of the first value of a registered kind among ``args`` (top level, or in a short list/tuple)."""
    for a in args:
        t = type(a)
        if t in TYPES:
            return _BY_TYPE[t]
        if (t is list or t is tuple) and len(a) < 64:
            for v in a:
                if type(v) in TYPES:
                    return _BY_TYPE[type(v)]
    return None


def settle(value, executor) -> None:
    for kind in _KINDS:
        kind.settle(value, executor)


def discard(ev) -> None:
    for kind in _KINDS:
        kind.discard(ev)
