"""The primitive registry: each primitive declared once, by name, with its NumPy kernel and every rule of it."""
from __future__ import annotations

import contextlib
import contextvars
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

# Effects decide ordering: a pure primitive may run as a task whenever its inputs are ready; an effectful one
# runs inline, in program order, after the tasks that might still read what it changes.
PURE = None
MUTATES = "mutates"  # changes args[0] (or the ``out=`` argument) in place
STATE = "state"  # advances hidden state (random generators); ordered, never folded
IO = "io"  # talks to the outside world (print)
# raises (assert, raise): ordered as output is, but it shows nothing when it does not raise, so a run stopped before
# it raised can be rerun (runtime/floor.py, phylanx_py/prescan.py): NumPy code asserts its invariants in loops
# (numpy-benchmarks' wave, cma_pt), and as IO they kept the plain function from being the floor of their calls
RAISES = "raises"


@dataclass(frozen=True, slots=True)
class Inline:
    """The plain-bytecode form the code generator may emit for a call (runtime/codegen.py), used when ``guard``
    holds for its arguments at run time; otherwise the call goes through the Evaluation (tasks, effects).

    ``template`` is formatted with the argument atoms: ``{0}``, ``{1}`` (positional), ``{args}`` (all, with keyword
    arguments), ``{rest}`` (all but the first, with keyword arguments), ``{kernel}`` (the primitive's kernel).
    ``guard`` names the run-time test: "small" (scalars or arrays under the inline threshold), "scalar", "value"
    (no futures), "view" (a NumPy array of any size first, no future after it: functions that return a view),
    "lazy" (no futures at the top level: builtins such as ``len`` that do not look at elements),
    "index" (a sequence and a basic index), "receiver" (a list/dict/set with no task pending; its arguments
    values unless ``resolve`` is "receiver"), "inplace" (``x op= v`` on scalars, or on an array with no task
    pending). ``kwargs``: the form also takes keyword arguments."""

    template: str
    guard: str = "small"
    kwargs: bool = False


@dataclass(frozen=True, slots=True)
class Lowering:
    """How a primitive is written inside a native loop kernel (runtime/native): ``template`` is Numba source over
    the operands' atoms (``"{0} + {1}"``, ``"np.exp({0})"``) or a callable of the atom list. ``pyint``: the checked
    helper used when NumPy semantics make the result a Python int (which never wraps at 2**63); ``pyscalar``: the
    helper used when every operand is a Python scalar (``1.0 / 0.0`` raises in Python, NumPy scalars give inf);
    ``ambiguous``: the helper used instead of ``pyscalar`` when an operand may be a Python or a NumPy scalar (a
    zero divisor raises in Python and gives inf in NumPy: it stops the kernel, to rerun interpreted);
    ``inexact``: Numba's result may differ from NumPy's in the last bit (exp, log, sin, pow ...); ``moves``: the call
    of one array only moves, copies or allocates its elements (flip, copy, empty_like), computing nothing, so
    Numba's result is NumPy's whatever the dtype; ``view``: its result is a view of that array (flip), so what is
    stored through it changes the array.

    What the native tier's analyses need to know of it (runtime/native: lower.py, parallel.py, facts.py,
    whole.py, bounds.py, signs.py, calls.py read these, nothing keeps a list of names):
    ``raises``: the form may raise in a kernel compiled with error_model='numpy' (False: never on numbers; domain
    errors give nan/inf), so a loop calling it may still run its iterations in parallel; ``compares``: its result
    flips on a last-bit difference of its operands (comparisons, rounding to integers, int casts, min/max), so an
    inexact operand declines; ``allocates``: a new array of a shape (np.zeros): may raise, a fresh array;
    ``keywords``: the keyword arguments the form takes (``dtype``); ``blas``: the form calls BLAS, which inside a
    kernel is SciPy's OpenBLAS (Numba binds ``scipy.linalg.cython_blas``), a thread pool beside NumPy's own
    (runtime/native/blas_pool.py); ``divides``: "true", "floor" or "mod", whose
    NumPy rules the lowering keeps (int64 floor division, complex division by zero); ``shifts``: "left" or
    "right", a shift, whose count may reach the width; ``powers``: "python" (``**``: a Python float to a
    fractional power is complex there) or "numpy", a power, whose integer exponent must be a constant >= 0 (NumPy
    raises on a negative one, Numba gives 0); ``complex``: "exact" or "inexact", an operation a kernel takes on
    complex128 arrays as NumPy computes them, component-wise ("inexact": a product, whose multiply-adds NumPy's
    loops fuse, so its last bit may differ: stored, never compared); ``inplace``: for ``x op= v``, the ufunc
    updating an array in place (``np.add(a, v, a)``); ``reads``: the positional arguments it only reads (a
    ufunc's ``nin``: one more is its ``out``), for which of a kernel's arrays it leaves unchanged; ``call``: the
    function its form calls (``np.exp``: the key of the facts above where the kernel's source is read). Rules over
    operand facts, each ``None`` when it has none: ``interval(ops, *args)``, the Interval of its int value from its
    arguments' (``ops``: bounds.py's interval operations, as ``tile``'s ``ops``); ``magnitude(*bounds)``, a bound
    of ``|value|`` from its arguments' bounds (Python ints proven far from 2**63 need no overflow check);
    ``sign(ops, *args)``, whether its int value is non-negative given ``ops.nonneg(arg)`` and ``ops.const(arg)``
    (signs.py)."""

    template: str | Callable
    pyint: str | None = None
    pyscalar: str | None = None
    ambiguous: str | None = None
    inexact: bool = False
    moves: bool = False
    view: bool = False
    raises: bool = True
    compares: bool = False
    allocates: bool = False
    blas: bool = False
    keywords: tuple = ()
    divides: str | None = None
    shifts: str | None = None
    powers: str | None = None
    complex: str | None = None
    inplace: str | None = None
    reads: int = 0
    call: str | None = None
    interval: Callable | None = None
    magnitude: Callable | None = None
    sign: Callable | None = None

    def source(self, atoms) -> str:
        t = self.template
        return t(atoms) if callable(t) else t.format(*atoms)

    @property
    def called(self) -> str | None:
        """The function the form calls (``np.dot`` of ``"np.dot({0}, {1})"``), or None (an operator, a helper's
        expression)."""
        if self.call is not None or callable(self.template):
            return self.call
        m = _CALLED.match(self.template)
        return m.group(1) if m else None


_CALLED = re.compile(r"([A-Za-z_][\w.]*)\(")


def call_lowering(function: str, **fields) -> Lowering:
    """The lowering ``function(a, b, ...)`` for a family of primitives called like their Numba counterpart."""
    return Lowering(lambda atoms: f"{function}({', '.join(atoms)})", call=function, **fields)


@dataclass(frozen=True, slots=True)
class Primitive:
    """One primitive and every rule of it. ``kernel`` is the NumPy reference: it defines the semantics every other
    kernel and rule keeps."""

    name: str
    kernel: Callable
    obj: object = None  # the Python object (``np.exp``) that resolves to this primitive in user code
    shape_rule: Callable | None = None  # (*AbstractValue|python value, **kwargs) -> AbstractValue | None
    effect: str | None = PURE
    # Which arguments must be concrete before the kernel runs: "deep" (default: futures anywhere, also inside
    # lists/tuples/dicts), "shallow" (top-level arguments only: len, zip), "receiver" (args[0] only:
    # list.append keeps a future in the list), "none" (container constructors hold futures as they are).
    resolve: str = "deep"
    local: bool = False  # True: always runs in the evaluating process (object identity: ``is``)
    cheap: bool = False  # True: O(1) whatever the input size (``x.shape``, ``len``): never worth a task
    # True: the kernel itself spreads a large input over every core (fused kernels): on a local pool a task would
    # add only a hand-off between threads, so it runs in the evaluating thread when its inputs are values
    parallel: bool = False
    display: str = ""  # name in the printed tree, when it differs from ``name`` (``__add`` for ``+``)
    # Gradient (primitives/vjp.py's conventions): the rule, or ``nondiff`` for one that passes no gradient.
    grad: Callable | None = None
    nondiff: bool = False
    # Element-wise form for the fused Numba kernels (primitives/fused.py): an expression over ``{0}``, ``{1}``...
    fused: str | None = None
    fused_cupy: str | None = None  # the CuPy expression, when it is not ``cupy.<name>(...)``
    inexact: bool = False  # last bit may differ between NumPy and Numba: compared results stay in NumPy
    int_unsafe: bool = False  # integer semantics Numba does not share (``//``, ``%``, ``**``): NumPy on ints
    ordered: bool = False  # orders its operands (complex numbers stay in NumPy)
    comparison: bool = False  # a comparison (its boolean flips on a 1-ULP difference: see ``inexact``)
    inline: Inline | None = None  # plain-bytecode form (runtime/codegen.py)
    lowering: Lowering | None = None  # its form inside a native loop kernel; None: loops using it stay interpreted
    # Its value is a new array, never a view of an argument: a name bound only to such values names an array the
    # function made itself (runtime/floor.py copies no argument for stores into it)
    fresh: bool = False
    # On a deferred value (an SPMD sum not yet combined across the ranks, runtime/spmd/deferred.py) the call itself
    # may wait too, so that the sums of many such expressions go in one message: the number of its leading
    # arguments that are its call site's constants (a fused chain's spec and locations), or None: it runs now
    defers: int | None = None
    # Tile rule: ``tile(ops, *args, **kwargs)``, ``ops`` being the runtime's tile operations (runtime/tiled/ops.py).
    # NumPy's own functions reach tiled arrays through NEP 13/18 (TiledArray.__array_function__) and need none.
    tile: Callable | None = None
    numba_kernel: Callable | None = None  # hand-written alternatives, each with ``accepts(*args, **kwargs)``
    cupy_kernel: Callable | None = None
    # ((inner primitive, composed primitive), ...): this primitive called on inner's result (its first argument)
    # is one call of the composed one, with inner's arguments then this one's others (phylanx_py/passes/absorb.py)
    absorbs: tuple = ()

    @property
    def foldable(self) -> bool:
        """May constant folding run this at compile time?"""
        return self.effect is None

    @property
    def label(self) -> str:
        return self.display or self.name

    @property
    def fusable(self) -> bool:
        return self.fused is not None


class UnknownPrimitive(KeyError):
    pass


class OperationFailed(Exception):
    """An operation inside a composite kernel (a fused group, a row product) failed. ``located`` is (the original
    exception, the operation's SourceLoc as the kernel was given it, the operation's printed name): the runtime
    reports that operation's line rather than the group's (errors.ExecutionError.from_exception reads it).
    Primitives raise only plain exceptions; they know nothing of the frontend's error classes."""

    def __init__(self, cause: BaseException, loc, label: str):
        super().__init__(f"in {label}: {type(cause).__name__}: {cause}")
        self.located = (cause, loc, label)

    def __reduce__(self):  # crosses processes (Dask workers)
        return (OperationFailed, self.located)


class Registry:
    """Primitives by name and by the Python object they stand for. Filled while primitives/ is imported, then
    frozen (``primitives/__init__.py``): nothing adds or replaces a record later. A test may open a registry of
    its own over the real one (``Registry(parent=REGISTRY)``, made current with ``scoped``) for a toy primitive."""

    def __init__(self, parent: Registry | None = None):
        self.parent = parent
        self._by_name: dict[str, Primitive] = {}
        self._by_object: dict[int, tuple[object, str]] = {}  # id(np.exp) -> (np.exp, "exp"); keeps it alive
        self.frozen = False

    def declare(self, prim: Primitive) -> Primitive:
        if self.frozen:
            raise RuntimeError(f"primitive {prim.name!r} declared after the registry was frozen: primitives are "
                               "declared in their modules under primitives/ (see primitives/__init__.py)")
        if self.exists(prim.name):
            raise ValueError(f"primitive {prim.name!r} registered twice")
        self._by_name[prim.name] = prim
        if prim.obj is not None:
            self._by_object.setdefault(id(prim.obj), (prim.obj, prim.name))
        return prim

    def freeze(self) -> Registry:
        self.frozen = True
        return self

    def lookup(self, name: str) -> Primitive:
        prim = self._by_name.get(name)
        if prim is not None:
            return prim
        if self.parent is not None:
            return self.parent.lookup(name)
        raise UnknownPrimitive(name)

    def exists(self, name: str) -> bool:
        return name in self._by_name or (self.parent is not None and self.parent.exists(name))

    def name_of(self, obj: object) -> str | None:
        hit = self._by_object.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        return self.parent.name_of(obj) if self.parent is not None else None

    def names(self) -> list[str]:
        own = set(self._by_name)
        return sorted(own | set(self.parent.names())) if self.parent is not None else sorted(own)


REGISTRY = Registry()
_SCOPED: contextvars.ContextVar[Registry | None] = contextvars.ContextVar("phylanx_registry", default=None)


def current_registry() -> Registry:
    reg = _SCOPED.get()
    return REGISTRY if reg is None else reg


@contextlib.contextmanager
def scoped(registry: Registry):
    """Look primitives up in ``registry`` inside the block (a test's toy primitives)."""
    token = _SCOPED.set(registry)
    try:
        yield registry
    finally:
        _SCOPED.reset(token)


def register(name: str, kernel: Callable, *, registry: Registry | None = None, **rules) -> Primitive:
    """Declare primitive ``name`` with its kernel and rules (the fields of ``Primitive``)."""
    return (registry or REGISTRY).declare(Primitive(name, kernel, **rules))


def lookup(name: str) -> Primitive:
    """The primitive called ``name``; ``UnknownPrimitive`` if there is none."""
    reg = _SCOPED.get()
    return (REGISTRY if reg is None else reg).lookup(name)


_ALTERNATIVES = os.environ.get("PHYLANX_NUMBA", "1") != "0"


def choose(prim: Primitive, args, kwargs):
    """The kernel to run ``prim`` with: its Numba alternative when one is registered and ``accepts`` these
    arguments (hand-written kernels for multi-pass functions: nn_ops.py), else the NumPy reference."""
    alt = prim.numba_kernel
    if alt is not None and _ALTERNATIVES and alt.accepts(*args, **kwargs):
        return alt
    return prim.kernel


def exists(name: str) -> bool:
    return current_registry().exists(name)


def name_of(obj: object) -> str | None:
    """The primitive name a Python object (``np.exp``, ``len``) stands for, or None."""
    return current_registry().name_of(obj)


def names(internal: bool = False) -> list[str]:
    """The NumPy functions compiled code can call, as NumPy spells them (``exp``, ``linalg.norm``,
    ``random.normal``); ``internal=True``: every registered primitive, also operators, methods, builtins and
    the ones the passes and gradients make (``fused.elementwise``, ``ad.index_add``)."""
    every = current_registry().names()
    if internal:
        return every
    return [n for n in every if "." not in n or n.split(".", 1)[0] in ("linalg", "random")]
def apply(name: str, *args, **kwargs):
    """Run primitive ``name`` on these arguments, or let an argument whose type runs primitives its own way record
    or run it (``__phylanx_call__``: traced values, tiled arrays): how functions built on the primitives
    (gradient rules, nn layers) stay traceable and tileable."""
    for a in args:
        hook = getattr(type(a), "__phylanx_call__", None)
        if hook is not None:
            return hook(name, args, kwargs)
    return lookup(name).kernel(*args, **kwargs)
