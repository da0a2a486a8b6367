"""Loops of a generated kernel whose iterations may run on several threads, and the kernel's parallel variant.

The analysis asks the kernel's IR (kir.py: its statements as blocks, liveness.blocks, with the tags the lowerer put
on them; never the printed source) whether a loop counts over a range, whether its statements may raise or leave
it (their calls, operations and jumps, and why, in the user's terms), whether arrays appear only element by
element (kir.Access ``element``, kir.Use ``whole``), which names hold numbers or arrays the kernel allocated (the
lowerer's kinds, kir.Printed.held, and the kir.Name tags of their bindings) and which elements of which arrays
each access touches (kir.Access: ``base``, ``store``, ``own``):
a ``for v in range(...)`` loop (step 1, a start that cannot be negative: the lowerer's tag, kir.For.counts)
becomes ``numba.prange`` when its iterations are independent and none can raise, so the parallel loop leaves
every array and name as the sequential one does, bit for bit:
- arrays appear in the body only element by element (``a[i, j]`` with an index per dimension, ``a.shape[0]``,
  ``len(a)``), so every value in it is a number: no array store can fail on a shape, no helper broadcasts; an
  array is a parameter the kernel never rebinds or an array it allocated (``np.zeros(...)``), never a view;
- every array the loop stores into is stored and read only at elements whose index has ``v`` itself at one
  position, the same for every access (iterations touch disjoint parts: ``out[i, j] = ...`` over ``i``); arrays
  it does not store into are read freely (the caller checks that parameters do not overlap, nor themselves);
- every name the body assigns is written before it is read in each iteration and is not read after the loop
  (no carried scalar, no reduction: a float sum in another order would change the last bits); the other names
  it reads are numbers (parameters typed so, names bound only to numbers);
- nothing in the body may raise (no checked index, no checked Python-int helper, no allocation, no ``range``
  with a step that may be 0; only calls of functions that cannot raise on numbers), and no ``break``,
  ``continue`` or ``return`` leaves it;
- the kernel runs without Numba's boundscheck (accesses are proven in bounds).
A nest is parallel at its outermost loop that qualifies; only Numba's explicit ``prange`` is parallelised (its
other array-expression passes are off: they would reorder sums)."""
from __future__ import annotations

from . import kir
from .kinds import param_of
from .liveness import blocks, live_after, scan, stored_names, walk

# Numba parallel options: only the loops marked prange run in parallel; array expressions stay as written
PARALLEL_OPTIONS = {"prange": True, "comprehension": False, "reduction": False, "inplace_binop": False,
                    "setitem": False, "numpy": False, "stencil": False, "fusion": False}


class Variant:
    """A kernel's parallel variant: ``source`` (the kernel printed again from its IR, the chosen loops over
    ``prange``, compiled with PARALLEL_OPTIONS: kir.print_kernel),
    ``loops`` (their line numbers in the sequential source) and ``written`` (the positions of the parameters those
    loops store into: the caller runs it only when they overlap no other array argument, nor themselves)."""

    def __init__(self, source, loops, written):
        self.source, self.loops, self.written = source, loops, written


def variant(printed, sig=None, params=None):
    """(Variant, None) for a kernel (kir.Printed: its IR) with a loop that may run in parallel, else
    (None, why not). ``sig``: the Numba types of the kernel's parameters (arrays and numbers are told apart by
    them), or ``params``: for each, what ``param_of`` makes of a Numba type (aot.py's, without Numba)."""
    if params is None:
        params = [param_of(t) for t in sig or ()]
    if printed.boundscheck:
        return None, "Numba checks its accesses"
    order = list(printed.params)
    nodes = list(printed.nodes.values())
    # the kernel's blocks, its return last (what it reads is read after every loop)
    top = blocks(nodes) + [(kir.Return(1, printed.ret_tags), [])]
    finder = _Finder(printed, dict(zip(order, params)))
    finder.block(top, [])
    if not finder.found:
        return None, finder.why or "no loop over range"
    written = set()
    for _, w in finder.found:
        written |= w & set(order)
    line = {id(n): i for i, n in printed.nodes.items()}
    lines = sorted(line[id(loop)] for loop, _ in finder.found)
    # printed again from the kernel's nodes (in line order), the chosen loops over numba.prange
    chosen = frozenset(id(loop) for loop, _ in finder.found)
    source = kir.print_kernel(printed.params, list(printed.nodes.values()), printed.ret, printed.ret_tags,
                              printed.boundscheck, printed.complex_values, chosen, PARALLEL_OPTIONS).source
    return Variant(source, lines, sorted(order.index(n) for n in written)), None


class _Finder:
    """Finds the outermost loops that qualify (``found``: (loop, arrays it stores into)); ``why``: the reason the
    first loop over range did not. ``types``: the parameters' (kinds.Param, by name)."""

    def __init__(self, printed, types):
        self.types, self.printed = types, printed
        self.bindings = {}  # name -> the statements that bind it (kir.Name tags, a loop's variable)
        for n in printed.nodes.values():
            for name in n.binds:
                self.bindings.setdefault(name, []).append(n)
        self.found, self.why = [], None
        # name -> ndim: parameters the kernel never binds, and names bound only to arrays it allocates there (what
        # each binding holds, the lowerer's kinds: kir.Printed.held)
        self.arrays = {name: t.ndim for name, t in types.items() if t.ndim is not None and name not in self.bindings}
        for name, held in printed.held.items():
            if name not in types and len(held) == 1 and type(min(held)) is int:
                self.arrays[name] = min(held)
        # Numba's complex division raises at zero whatever the error model: with complex values about (the kernel
        # IR's kinds, kir.Printed.complex_values, or the arguments' types), no division (a second guard: the lowerer
        # declines NumPy complex division, and Python complex values, today)
        self.complex = printed.complex_values or any(t.complex for t in types.values())

    def block(self, block, chain):
        """Looks for the loops in ``block`` ([(node, its block)], liveness.blocks), inside the blocks ``chain``
        ([(block, index)] with ((node, block), field) between levels: liveness.live_after) leads to."""
        for i, (node, kids) in enumerate(block):
            here = chain + [(block, i)]
            if type(node) is kir.For:
                why = self.qualifies(node, kids, here)
                if why is None:
                    self.found.append((node, self.stored))
                    continue
                if self.why is None:  # the outermost loop's reason (kernel lines mean nothing to the user)
                    self.why = f"the loop over '{node.target}': {why}"
            if node.opens and kids:
                self.block(kids, here + [((node, kids), "body")])

    def qualifies(self, loop, body, chain):
        self.stored = set()
        if not loop.target.isidentifier():
            return "not a loop over one name"
        counts = loop.counts  # (what the lowerer's kir.For counts, if a range)
        if counts is None:
            return "not a loop over range"
        if not counts.unit:
            return "a step other than 1"
        if not counts.nonneg:
            return "a start that may be negative (a negative index reaches the end of an array)"
        why = _leaves_or_raises(body, self.complex)
        if why:
            return why
        v = loop.target
        names = stored_names(body)
        if v in names:
            return f"'{v}' is assigned in the loop"
        if names & set(self.arrays):
            return f"'{sorted(names & set(self.arrays))[0]}' is bound in the loop"
        for name in sorted(names | {v}):
            if name != v and scan(body, name)[0]:
                return f"'{name}' is carried from one iteration to the next"
            if live_after(chain, name):
                return f"'{name}' is read after the loop"
        return self.arrays_of(body, v, names | {v})

    def number(self, name, through=()) -> bool:
        """Whether ``name`` (read in a loop, bound outside it) always holds a number: a parameter typed so that the
        kernel never binds, or a name each binding of which holds a number (the lowerer's kinds, Printed.held) and
        is a loop's variable over ``range`` or reads only arrays and such names."""
        if name in self.types:
            return name not in self.bindings and self.types[name].number
        # (a name bound through itself, ``s = s + a[i]`` or a loop nest's ``k = k + n if k < 0 else k``, or through
        # such a name, is not counted: the text analysis this replaced could not follow one, and counting it makes
        # more loops parallel, inner loops of nests among them: a change of decisions to measure on its own)
        if self.printed.held.get(name) != {"number"} or name in through:
            return False
        for node in self.bindings.get(name, ()):
            if type(node) is kir.For:
                if node.counts is None:
                    return False
                continue
            if any(r not in self.arrays and not self.number(r, through + (name,)) for r in node.reads):
                return False
        return True

    def arrays_of(self, body, v, private):
        """None when the loop (its block ``body``) reads and writes arrays element by element (its kir.Access
        tags: one integer index per dimension of an array the analysis knows; its kir.Use tags: no array's name
        used whole), its stores touching disjoint parts of them iteration by iteration, and reads only numbers
        besides (its kir.Name tags), else why not."""
        for node in walk(body):
            for a in node.accesses:
                if not (a.element and a.base in self.arrays):  # (named as the user wrote it: the temporary's base)
                    return f"'{a.base or a.array}[...]' is not one element of an array"
            for u in node.uses:
                if u.whole and u.array and u.text == u.array:
                    return f"'{u.array}' is used whole (only its elements may be)"
            for name in sorted(node.reads - private):
                if name not in self.arrays and not self.number(name):
                    return f"'{name}' may not be a number"
        return self.disjoint(body, v, private)

    def disjoint(self, body, v, private):
        """None when every array the loop stores into (its kir.Access tags) is accessed only at elements whose
        index has ``v`` (or a non-negative offset the loop does not change plus ``v``) at one position, the same
        for every access, else why not. Sets ``stored``: the arrays it stores into."""
        accesses = [a for node in walk(body) for a in node.accesses if a.how not in _NOT_ELEMENT]
        self.stored = {a.base for a in accesses if a.store}
        for a in accesses:
            if a.base not in self.arrays:  # (an array the analysis does not know: one it cannot tell apart)
                return f"'{a.array}' may be another array's view"
        for name in sorted(self.stored):
            positions = None
            for a in accesses:
                if a.base == name:
                    p = {(k, own) for k, own in enumerate(a.own or ()) if own is not None and own[0] == v and
                         own[1] not in private}
                    positions = p if positions is None else positions & p
            if not positions:
                return f"'{name}' is accessed at other elements than the iteration's own ('{v}')"
        return None


_NOT_ELEMENT = ("item", "view")  # kir.Access of a tuple's item, or slices only: no element of an array


def _leaves_or_raises(block, complex_values=False, nested=False):
    """Why the loop body (its kernel-IR block) may raise or leave the loop, or None: from each statement's tags.
    Operators on numbers raise in two cases under error_model='numpy': a power whose exponent is not a literal (an
    integer exponent of -2**63: OverflowError; kir.Varies), and complex division by zero (``complex_values``: the
    kernel may hold complex numbers); ``range`` with a step that may be 0; a call the IR tags as raising (the
    nest's rerun branch raises ``_Overflow``)."""
    for node, kids in block:
        if type(node) is kir.Return:
            return "a return in the loop"
        if type(node) is kir.Jump and not nested:
            return f"a {node.kind} out of the loop"
        for t in reversed(node.tags):  # (the outermost first, as the text reads: an expression's call after its
            if t == _EXPONENT:         # operands', a store's target after its value)
                return "a power whose exponent is not a constant"
            if t == _STEP:
                return "a range whose step may be 0"
            if complex_values and type(t) is kir.Op and t.kind in ("division", "modulo"):
                return "a division of values that may be complex (Numba raises at zero)"
            if type(t) is kir.Call and t.raises:
                return "a raise in the loop" if t.name == "_Overflow" else f"a call that may raise ({t.why})"
        why = _leaves_or_raises(kids, complex_values, nested or type(node) in (kir.For, kir.While))
        if why:
            return why
    return None


_EXPONENT, _STEP = kir.Varies("exponent"), kir.Varies("step")
