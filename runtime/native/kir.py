"""The native tier's kernel IR: what the lowerer (lower.py and its mixins) builds for one kernel, and the one printer
that makes Numba source of it, last.

A kernel is a list of statements, each at its depth in the kernel's blocks (the block a ``for``/``while``/``if``/
``else`` opens holds the deeper statements after it, up to the next one at its depth or shallower: the order the
lowerer builds them in, so a loop's versions and a nest's placeholders are replaced in place). A statement's leaf
expressions are still source text; what the passes after lowering ask of a kernel is carried on the nodes instead of
being read back from that text:
- ``calls`` (Call): each call the statement's text makes, tagged with whether it may raise and whether it allocates:
  a helper's (helpers.py) from its code, with what it is in the user's terms (``why``); a declared primitive's form
  (``np.exp``, ``range``) and a cast the lowerer writes (``np.float32``) from the declarations (facts.calls()), a
  function they do not know (``np.uint64``, a method) as one that may raise:
  which helpers a kernel's module needs (``helpers``), whether a loop body may raise or allocates (parallel.py),
  whether a whole function's statement may raise through a helper (whole_lower.py);
- ``accesses`` (Access): each array access and how it stays in bounds (checked, proven, by Numba, a view), which
  whole_lower.py counts as may-raise;
- ``ops`` (Op): each operation the statement's text writes whose result may raise or differ between engines
  (division, modulo, power, shift, a name of Python's ``math``): from the declaration of the primitive whose form
  writes it (facts.operations) or where the lowerer writes it itself; whole_lower.py counts them as may-raise;
- ``uses`` (Use): each mention of an array's name (or a slice value) and whether the text only reads it there,
  set where the lowerer writes the name (expressions.e_Var, a binding, a nest's test) and where a form takes it
  (Lowerer.form_of: the declaration's template says which operands it only reads, facts.reads): which arrays a
  kernel may change (``Printed.arrays_written``);
- ``reads``/``binds`` (Name): the names the statement's text reads and binds (a ``for``'s variable: its
  ``target``), from the lowering of each variable (e_Var, a binding) and where the lowerer writes a name itself
  (its temporaries, flags, a nest's tests and set-up: Lowerer.names, nests.condition): what a liveness over the
  kernel's statements will ask, instead of parsing the printed source (parallel.py, outline.py, liveness.py);
- ``version``: the test of a loop's two versions (versions.py: "unchecked" or "nonneg"), which outline.py moves;
  the two versions are one when their lowerings decided alike (``decided_alike``: the same nodes and tags).
Each statement carries the tags of its own text: one the lowerer writes while an expression is lowered (a
reduction's temporary, an inlined call's argument: Lowerer.emit_from) or before a nest's test takes only its own.
``Printed`` maps each line of the printed source back to its node, for parallel.py (a parallel loop's line) and
outline.py, which ask the nodes alone and print them again (``body_lines``, ``print_kernel``); it says whether
Numba checks the accesses (``boundscheck``) and what each name the lowering binds holds (``held``: numbers,
arrays, other values, from the lowerer's kinds).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import helpers as H
from .facts import calls

# the user's terms for a helper call that may raise (parallel.py's reasons), by what the helper keeps
_WHY = {"_ix": "an index not proven in bounds", "ck": "Python-int arithmetic checked for overflow",
        "py": "Python's division or conversion", "amb": "a division by a Python or NumPy scalar"}


@dataclass(frozen=True, slots=True)
class Call:
    """A call in a kernel: of a helper (``why``: what it is in the user's terms), of a declared primitive's form
    (``np.exp``, ``range``) or of a cast the lowerer writes (``np.float32``, ``max``); whether it may raise and
    whether it allocates an array, as the helper's code or the declarations (facts.calls()) say."""
    name: str
    raises: bool
    why: str
    allocates: bool = False


@dataclass(frozen=True, slots=True)
class Access:
    """An access of an array's elements (``array``: its source): how it is kept in bounds: "checked" (each integer
    index through ``_ix``), "proven" (bounds.py proved it under the loop's or nest's test: as it is), "numba" (the
    kernel runs with Numba's boundscheck), "view" (slices and new axes only: nothing to check), "item" (an item of
    a tuple or of a 1-element result, by a constant index). What it touches, from the IR of the access (the
    canonicalizer's temporaries of ``a[k] += v`` seen through): ``base``, the array's name ("" for an expression);
    ``store``, whether the statement stores there; ``own``, per index item, (name, offset) when the item is a name
    or ``offset + name`` with ``offset`` a name holding a non-negative int (a loop nest's start), else None (the
    whole: None when the items are not known); ``element``, one integer index per dimension of ``base`` (no slice,
    no new axis, no array or tuple-valued item: a number). parallel.py asks these whether the arrays appear only
    element by element and whether iterations touch disjoint elements."""
    array: str
    how: str
    base: str = ""
    store: bool = False
    own: tuple | None = None
    element: bool = False


@dataclass(frozen=True, slots=True)
class Use:
    """A mention of an array's name in a statement's text (``array``; "" for a slice value, which a name may hold)
    and what the text does with it there: ``text``, the mention (the name, or the subscript that reads it: a later
    form may take it as an operand); ``element``, one element read by an index per dimension; ``read``, where it
    stands it is only read (an operand of arithmetic or a comparison, an argument a NumPy function only reads, its
    shape, ``len`` of it, the iterable of a loop; a slice: an index). Any other mention (a store, a binding, a
    helper's argument, a view kept) may change the array, or make a view of any array (a slice): ``arrays_written``.
    ``whole``: a mention of the name as a value (an operand, an argument, an alias, a loop's iterable); not one that
    stands only for its elements or measures (a store's or binding's target, its ``.shape``/``.size``/``.ndim``,
    ``len`` of it, a canonicalizer's alias ``__px_1 = a`` whose accesses are tagged with ``a``): parallel.py keeps a
    loop with one sequential."""
    array: str
    text: str
    element: bool = False
    read: bool = False
    whole: bool = True


@dataclass(frozen=True, slots=True)
class Name:
    """A name a statement's text reads, or binds (``binds``; ``walrus``: by ``:=`` inside an expression); a ``for``'s
    variable is its node's ``target``."""
    name: str
    binds: bool = False
    walrus: bool = False


@dataclass(frozen=True, slots=True)
class Op:
    """An operation a statement's text writes (not a call): "division" (``/``, ``//``), "modulo" (``%``), "power"
    (``**``), "shift" (``<<``, ``>>``) or "math" (a name of Python's ``math``: its functions raise on a domain
    error; its constants ``math.nan``, ``math.inf`` are tagged too, as whole_lower.py's stages always counted
    them)."""
    kind: str


@dataclass(frozen=True, slots=True)
class Varies:
    """An operand whose value decides whether an operation may raise, written other than as a literal the operation
    takes (parallel.py): "exponent" (of ``**``: an integer power of -2**63 overflows), "step" (of ``range``: 0
    raises)."""
    what: str


def family(name: str) -> str:
    """What a helper keeps, by its name's part after the first ``_``: "ck" (Python-int arithmetic checked for
    overflow), "py" (Python's division by zero, conversions), "amb" (a division by a scalar that may be Python's or
    NumPy's), "np", "px", "pxr" ... (NumPy's forms)."""
    if name in ("_ix", "_ixr") or not name.startswith("_"):
        return "_ix" if name == "_ixr" else name  # (not a helper's: a declared form's or a cast's)
    return name.split("_")[1]


def helper_call(name: str, *args: str) -> tuple[str, Call]:
    """(source of a call of helper ``name`` on ``args``, its tag)."""
    return f"{name}({', '.join(args)})", Call(name, name in H.raising(), _WHY.get(family(name), name))


def is_helper(name) -> bool:
    return name in H.helper_calls()


def declared(name: str) -> tuple:
    """The tag of a call of ``name`` (a declared form's function or a cast: facts.calls()); a function the
    declarations do not know (``np.uint64``, a method: ``x.copy``) may raise."""
    f = calls().get(name)
    return (Call(name, True, name),) if f is None else (Call(name, f.raises, name, f.allocates),)


class Node:
    """One statement of a kernel at its ``depth`` (1: the kernel's body), with the tags of its text: the calls
    (Call), array accesses (Access) and operations (Op) it makes."""
    __slots__ = ("depth", "tags")
    opens = False  # a statement that opens a block (its body: the deeper statements after it)

    def __init__(self, depth: int, tags=()):
        self.depth, self.tags = depth, tuple(tags)

    @property
    def calls(self) -> tuple:
        return tuple(t for t in self.tags if type(t) is Call)

    @property
    def accesses(self) -> tuple:
        return tuple(t for t in self.tags if type(t) is Access)

    @property
    def ops(self) -> tuple:
        return tuple(t for t in self.tags if type(t) is Op)

    @property
    def uses(self) -> tuple:
        return tuple(t for t in self.tags if type(t) is Use)

    @property
    def reads(self) -> frozenset:
        """The names the statement's text reads (of a block's opener: its header's)."""
        return frozenset(t.name for t in self.tags if type(t) is Name and not t.binds)

    @property
    def binds(self) -> frozenset:
        return frozenset(t.name for t in self.tags if type(t) is Name and t.binds) | (
            {self.target} if type(self) is For else set())

    def line(self) -> str:
        raise NotImplementedError


class Stmt(Node):
    """A simple statement (assignment, store, expression, ``break``, ``raise``) as its source text."""
    __slots__ = ("text",)

    def __init__(self, depth, text: str, tags=()):
        super().__init__(depth, tags)
        self.text = text

    def line(self):
        return self.text


class Raise(Stmt):
    """A ``raise`` statement (nests.py: the kernel stops and the loop reruns interpreted): no path goes past it
    (outline.py's liveness)."""
    __slots__ = ()


class Return(Node):
    """The kernel's ``return`` (printed last, from ``Printed.ret_tags``: not one of its statements); one inside a
    block (``text``, printed: ``return x``) ends the kernel there (outline.py leaves a fast version with one in it)."""
    __slots__ = ("text",)

    def __init__(self, depth, tags=(), text="return"):
        super().__init__(depth, tags)
        self.text = text

    def line(self):
        return self.text


class Jump(Node):
    """``break`` or ``continue`` (``kind``)."""
    __slots__ = ("kind",)

    def __init__(self, depth, kind: str, tags=()):
        super().__init__(depth, tags)
        self.kind = kind

    def line(self):
        return self.kind


@dataclass(frozen=True, slots=True)
class Counts:
    """What a ``for`` over ``range`` counts, as the lowering knows it: whether its step is the literal 1
    (``unit``) and whether its start cannot be negative (``nonneg``: a constant, a shape, a length, or arithmetic
    the declarations' sign rules keep non-negative over names known so, signs.nonneg_names). Such a loop's
    variable is never an index that wraps to the end of an array: parallel.py may make it ``numba.prange``."""
    unit: bool
    nonneg: bool


class For(Node):
    """``for target in iter:``; ``counts``: a Counts when it is a loop over ``range``, else None."""
    __slots__ = ("target", "iter", "counts")
    opens = True

    def __init__(self, depth, target: str, iter: str, tags=(), counts=None):
        super().__init__(depth, tags)
        self.target, self.iter, self.counts = target, iter, counts

    def line(self, parallel=False):
        """The loop's header; ``parallel``: over ``numba.prange`` (parallel.py chose it: its ``counts`` says it
        iterates ``range(...)``, as the builtins.range form and over_range write it)."""
        if not parallel:
            return f"for {self.target} in {self.iter}:"
        if self.counts is None or not self.iter.startswith("range("):
            raise ValueError(f"not a loop over range: {self.iter}")
        return f"for {self.target} in numba.p{self.iter}:"


def over_range(target: str, length: str) -> For:
    """``for target in range(length):``, a loop the lowerer writes itself (a loop nest's): from 0 by 1."""
    return For(0, target, f"range({length})", declared("range") + (Name(length),), Counts(True, True))


class While(Node):
    """``while True:`` (the lowerer tests a loop's condition inside it)."""
    __slots__ = ()
    opens = True

    def line(self):
        return "while True:"


class If(Node):
    """``if cond:``; ``version``: the test of a loop's two versions (the fast one is its body); ``note``: a comment
    for the reader of the source (a loop nest's test)."""
    __slots__ = ("cond", "version", "note")
    opens = True

    def __init__(self, depth, cond: str, tags=(), version=None, note=None):
        super().__init__(depth, tags)
        self.cond, self.version, self.note = cond, version, note

    def line(self):
        comment = f"{self.version} version" if self.version else self.note
        return f"if {self.cond}:" + (f"  # {comment}" if comment else "")


class Else(Node):
    __slots__ = ()
    opens = True

    def line(self):
        return "else:"


def shifted(nodes, by: int) -> list:
    """``nodes`` moved ``by`` levels deeper (negative: shallower), in place."""
    for n in nodes:
        n.depth += by
    return nodes


def decided_alike(a, b) -> bool:
    """Whether two lowerings of one loop (versions.py: under an assumption and without it) decided alike: the same
    statements at the same depths, each with the same calls and operations and the same accesses checked in the
    source. What an assumption changes is one of these (an access proven instead of checked, an int operation
    written as it is instead of through a checked helper, a nested loop's versions), so two lowerings that decided
    alike are the same code but for their temporaries' numbers."""
    return len(a) == len(b) and all(_decisions(x) == _decisions(y) for x, y in zip(a, b))


def _decisions(n):
    # (an access proven in bounds, a view's and one Numba checks are all written as they are: only "checked"
    # changes the source; a slice-only access is "proven" under a proof, a "view" without)
    return type(n), n.depth, getattr(n, "version", None), n.calls, n.ops, tuple(t.how == "checked" for t in n.accesses)


def helpers(nodes) -> frozenset:
    """The helpers the statements call (a kernel module defines these and those they call)."""
    return frozenset(c.name for n in nodes for c in n.calls if is_helper(c.name))


def raising_helpers(nodes) -> list[Call]:
    """The helper calls of the statements that may raise."""
    return [c for n in nodes for c in n.calls if c.raises and is_helper(c.name)]


@dataclass(frozen=True, slots=True)
class Printed:
    """A kernel's source, the node of each of its lines (1-based, as ``ast`` counts), the helpers it calls,
    whether Numba checks its accesses (``boundscheck``; else the kernel checks those not proven, Access) and whether
    any of its values may be complex (``complex_values``: Numba's complex division raises at zero, parallel.py);
    ``params``, the kernel's parameters, and ``ret_tags``, the tags of its returned expression."""
    source: str
    nodes: dict
    helpers: frozenset
    boundscheck: bool
    complex_values: bool = False
    params: tuple = ()
    ret_tags: tuple = ()
    ret: str = ""  # the returned expression's text (outline.py prints the kernel again from its nodes)
    # what each name the lowering binds holds, over all its bindings: "number", an array it allocates there (its
    # ndim), another "array", "other" (a tuple, None, a range ...), from the lowerer's kinds (Lowerer.hold);
    # parallel.py asks which names hold numbers, and which arrays the kernel allocated
    held: dict = field(default_factory=dict)

    def versions(self) -> frozenset:
        """The lines of the tests of loops' two versions."""
        return frozenset(i for i, n in self.nodes.items() if isinstance(n, If) and n.version)

    def arrays_written(self, kinds, viewed=frozenset()) -> tuple:
        """Indices of the array arguments (``kinds``: the kernel's last ``len(kinds)`` parameters) that the kernel
        may change. Before a kernel that may stop on an overflow runs, these are copied so the call can rerun
        interpreted on the values it started with; a hash loop over a large array it only reads paid a copy of it
        per call (popcount over 20,000 ints: 2.2 us of 7.4). An argument counts as only read when every mention of
        it (Use) is read where it stands, or is an element read of an array the lowerer indexed into no view
        (``viewed``: their names, "*" for an expression's; a view may be written through, and an element read of
        it is then only read where it stands); a slice value anywhere but in an index makes every array count."""
        everything = tuple(i for i, k in enumerate(kinds) if type(k) is np.ndarray)
        uses = [u for n in self.nodes.values() for u in n.uses] + [t for t in self.ret_tags if type(t) is Use]
        if "*" in viewed or any(u.array == "" and not u.read for u in uses):
            return everything
        names = list(self.params[len(self.params) - len(kinds):]) if kinds else []
        changed = {u.array for u in uses if not (u.read or (u.element and u.array not in viewed))}
        return tuple(i for i in everything if names[i] in changed)


def decorator(boundscheck, parallel=None) -> str:
    """The ``numba.njit`` a kernel (and a function outlined from it, outline.py) is compiled with; ``parallel``:
    Numba's parallel options (a kernel's parallel variant, parallel.PARALLEL_OPTIONS)."""
    options = f", parallel={parallel!r}" if parallel else ""
    return f"@numba.njit(cache=True, nogil=True, boundscheck={boundscheck}, error_model='numpy'{options})"


def body_lines(nodes, first: int, by: int = 0, prange=frozenset()) -> tuple[list, dict]:
    """The lines of ``nodes``, ``by`` levels deeper (negative: shallower; a ``pass`` in each block they leave
    empty) and the node of each, by its line number when the first is line ``first``; the loops in ``prange``
    (their ids) over ``numba.prange``."""
    lines, at = [], {}
    for i, n in enumerate(nodes):
        at[first + len(lines)] = n
        lines.append("    " * (n.depth + by) + (n.line(True) if id(n) in prange else n.line()))
        if n.opens and (i + 1 == len(nodes) or nodes[i + 1].depth <= n.depth):
            lines.append("    " * (n.depth + by + 1) + "pass")
    return lines, at


def print_kernel(params, nodes, ret: str, ret_tags=(), boundscheck=False, complex_values=False, prange=frozenset(),
                 parallel=None, held=None) -> Printed:
    """The Numba source of a kernel: its decorator (Numba checks the accesses when ``boundscheck``; ``parallel``:
    Numba's parallel options), ``def kernel(params):``, its statements (the loops in ``prange``, their ids, over
    ``numba.prange``: a parallel variant, parallel.py), ``return ret`` (``ret_tags``: the tags of ``ret``);
    ``complex_values``: a value of it may be complex (the lowerer's kinds say so); ``held``: Printed.held."""
    lines = [decorator(boundscheck, parallel), f"def kernel({', '.join(params)}):"]
    body, at = body_lines(nodes, len(lines) + 1, prange=prange)
    lines += body
    if not nodes:
        lines.append("    pass")
    lines.append(f"    return {ret}")
    called = helpers(nodes) | {t.name for t in ret_tags if type(t) is Call and is_helper(t.name)}
    return Printed("\n".join(lines) + "\n", at, called, boundscheck, complex_values, tuple(params), tuple(ret_tags),
                   ret, dict(held or {}))
