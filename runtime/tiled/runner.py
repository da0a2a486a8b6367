"""A tile's task on the worker: ``run_program`` runs a tile program (built on the client by tile_program.py: a
fused chain of tasks.py's operations and NumPy functions), as written or on row blocks (blocked.py).

Pickled by reference like tasks.py: workers import it from the installed phylanx-py."""
from __future__ import annotations

from phylanx_py.errors import RAISED_AS_IS, ExecutionError

from ..alignment import aligned
from . import blocked

# Argument references in a tile program: ("L", i) the i-th leaf (a fetched tile or small remote value),
# ("N", j) the result of the j-th operation, ("C", value) a constant carried in the task.


def _arg(ref, leaves, values):
    kind, x = ref
    if kind == "L":
        return leaves[x]
    if kind == "N":
        return values[x]
    return x


class Code:
    """A tile program's operations, opaque to Dask (which would otherwise walk every nested list of a task's
    arguments looking for futures: ~20,000 checks per k-means iteration on the client)."""

    __slots__ = ("ops",)

    def __init__(self, ops):
        self.ops = ops

    def __reduce__(self):
        return (Code, (self.ops,))


def run_program(ops, out, *leaves):
    """Run a tile program: ``ops`` is a list of (function, argument refs, keyword arguments, loc, label); on
    row blocks when it allows (blocked.py)."""
    if type(ops) is Code:
        ops = ops.ops
    leaves = [aligned(v) for v in leaves]
    found = blocked.plan(ops, out, leaves) if BLOCKED else None
    if found is not None:
        return blocked.run(ops, out, leaves, found, _execute)
    return _execute(ops, out, leaves)


BLOCKED = True  # row-blocked execution (blocked.py); tests compare both


def _execute(ops, out, leaves):
    values = []
    for fn, args, kwargs, loc, label in ops:
        a = [_arg(r, leaves, values) for r in args]
        try:
            values.append(fn(*a, **kwargs) if kwargs else fn(*a))
        except RAISED_AS_IS:
            raise
        except Exception as e:
            err = ExecutionError.from_exception(e, loc, label)
            raise err from err.__cause__
    return _arg(out, leaves, values)
