"""The primitive registry: each primitive registered once, by name, with its NumPy kernel and rules."""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

# Effects decide ordering: a pure primitive may run as a task whenever its inputs are ready; an effectful one
# runs inline, in program order, after the tasks that might still read what it changes.
PURE = None
MUTATES = "mutates"  # changes args[0] (or the ``out=`` argument) in place
STATE = "state"  # advances hidden state (random generators); ordered, never folded
IO = "io"  # talks to the outside world (print)


@dataclass(frozen=True, slots=True)
class Primitive:
    """One primitive. ``kernel`` is the NumPy reference: it defines the semantics every other kernel keeps."""

    name: str
    kernel: Callable
    shape_rule: Callable | None = None  # (*AbstractValue|python value, **kwargs) -> AbstractValue | None
    effect: str | None = PURE
    # Which arguments must be concrete before the kernel runs: "deep" (default: futures anywhere, also inside
    # lists/tuples/dicts), "shallow" (top-level arguments only: len, zip), "receiver" (args[0] only:
    # list.append keeps a future in the list), "none" (container constructors hold futures as they are).
    resolve: str = "deep"
    local: bool = False  # True: always runs in the evaluating process (object identity: ``is``)
    cheap: bool = False  # True: O(1) whatever the input size (``x.shape``, ``len``): never worth a task
    numba_kernel: Callable | None = None
    cupy_kernel: Callable | None = None
    grad: Callable | None = None
    display: str = ""  # name in the printed tree, when it differs from ``name`` (``__add`` for ``+``)

    @property
    def foldable(self) -> bool:
        """May constant folding run this at compile time?"""
        return self.effect is None

    @property
    def label(self) -> str:
        return self.display or self.name


_REGISTRY: dict[str, Primitive] = {}
_BY_OBJECT: dict[int, tuple[object, str]] = {}  # id(np.exp) -> (np.exp, "exp"); keeps the object alive


class UnknownPrimitive(KeyError):
    pass


def register(name: str, kernel: Callable, *, obj: object = None, **fields) -> Primitive:
    """Register ``name``. ``obj`` is the Python object (``np.exp``) that resolves to it in user code."""
    if name in _REGISTRY:
        raise ValueError(f"primitive {name!r} registered twice")
    prim = Primitive(name, kernel, **fields)
    _REGISTRY[name] = prim
    if obj is not None:
        _BY_OBJECT.setdefault(id(obj), (obj, name))
    return prim


def lookup(name: str) -> Primitive:
    """The primitive called ``name``; ``UnknownPrimitive`` if there is none."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownPrimitive(name) from None


_ALTERNATIVES = os.environ.get("PHYLANX_NUMBA", "1") != "0"


def choose(prim: Primitive, args, kwargs):
    """The kernel to run ``prim`` with: its Numba alternative when one is registered and ``accepts`` these
    arguments (hand-written kernels for multi-pass functions: nn_ops.py), else the NumPy reference."""
    alt = prim.numba_kernel
    if alt is not None and _ALTERNATIVES and alt.accepts(*args, **kwargs):
        return alt
    return prim.kernel


def exists(name: str) -> bool:
    return name in _REGISTRY


def name_of(obj: object) -> str | None:
    """The primitive name a Python object (``np.exp``, ``len``) stands for, or None."""
    hit = _BY_OBJECT.get(id(obj))
    return hit[1] if hit is not None and hit[0] is obj else None


def names(internal: bool = False) -> list[str]:
    """The NumPy functions compiled code can call, as NumPy spells them (``exp``, ``linalg.norm``,
    ``random.normal``); ``internal=True``: every registered primitive, also operators, methods, builtins and
    the ones the passes and gradients make (``fused.elementwise``, ``ad.index_add``)."""
    if internal:
        return sorted(_REGISTRY)
    return sorted(n for n in _REGISTRY if "." not in n or n.split(".", 1)[0] in ("linalg", "random"))


def set_grad(name: str, rule: Callable) -> Primitive:
    """Attach the gradient rule (primitives/vjp.py) to primitive ``name``."""
    from dataclasses import replace

    prim = _REGISTRY[name] = replace(lookup(name), grad=rule)
    return prim


def apply(name: str, *args, **kwargs):
    """Run primitive ``name`` on these arguments, or let a traced argument record it (``__phylanx_call__``): how
    functions built on the primitives (gradient rules, nn layers) stay traceable."""
    for a in args:
        hook = getattr(type(a), "__phylanx_call__", None)
        if hook is not None:
            return hook(name, args, kwargs)
    return lookup(name).kernel(*args, **kwargs)
