"""A loop nest's IR lowered to the Python source of one Numba function, for given argument kinds.

Every expression is lowered with its kind (runtime/native/kinds.py), so the source can keep NumPy's and Python's
semantics where Numba's differ: operands of small-int/float32 arithmetic are cast to the dtype NumPy computes in,
Python-int results go through checked helpers (no wrap at 2**63), division of Python scalars raises at zero,
float sums use NumPy's pairwise order. What cannot be kept raises Decline with the reason and the line.
Results of inexact functions (exp, log, sin, pow ...) may differ from NumPy's in the last bit, so comparing
them (or storing them into an array later compared) declines, as fused kernels do (primitives/fused.py).

This module has the statements and the entry (``lower``); the Lowerer's other parts are mixins named for what they
own: expressions.py (expressions and array accesses), arith.py (arithmetic's NumPy-vs-Numba rules), calls.py and
reductions.py (calls with rules of their own), kindflow.py (kinds through statements, and ``settle``, which lowers
again from what a lowering learned until nothing new is learned), versions.py (loops lowered in an unchecked or
non-negative version and as they are).
"""
from __future__ import annotations

import ast
import dataclasses
import itertools

import numpy as np

from phylanx_py import ir
from phylanx_py.turns import turn

from . import kinds as K
from . import kir, scalarize
from .arith import ArithRules
from .calls import CallRules
from .expressions import Expressions, as_expression
from .facts import allocates, calls, exponents, form_calls, operations, reads, rule
from .kindflow import SMALL, KindFlow, settle
from .kinds import Decline
from .reductions import ReduceRules
from .versions import Versions

# the names other modules import from here (whole.py, tiering.py, loop.py)
__all__ = ["SMALL", "Lowerer", "as_expression", "lower", "settle"]


class Lowerer(Expressions, Versions, KindFlow, ArithRules, CallRules, ReduceRules):
    """Lowers one loop (``loop``) over ``inputs`` (name -> kind) to a kernel's source: its statements here,
    expressions in expressions.py, arithmetic's NumPy-vs-Numba rules in arith.py, kinds through statements and the
    iteration until they settle in kindflow.py, loops in versions in versions.py."""

    def __init__(self, loop, inputs: dict, outputs: list, tainted=frozenset(), arrays_tainted=False, widened=None,
                 bounds=None, manual=True, counters=frozenset(), functions=None):
        self.loop = loop
        # the program's functions by name (a call of one is inlined: ``e_Apply``), and each call's number in the
        # loop (the names of its parameters' temporaries: the same in every lowering of the loop)
        self.functions = functions or {}
        self.applies = {id(a): i for i, a in enumerate(x for x in ir.walk(loop) if isinstance(x, ir.Apply))}
        self.conditional = 0  # inside parts of expressions that may not run (``and``/``or``, ``a if c else b``)
        # an operand may be a Python or a NumPy scalar: a division takes its declaration's ``ambiguous`` helper
        # (arith.either_call)
        self.ambiguous = False
        # the value that is a whole statement's (``f(a)``, ``x = f(a)``): the only call whose callee's statements
        # may be inlined (expressions.e_Apply), as nothing else of the statement is read before them
        self.whole_value = None
        self.counters = counters  # names that keep their COUNTER bound when assigned (signs.py)
        self.nonneg: frozenset = frozenset()  # Python-int names known non-negative here (signs.py)
        self.nonneg_names: dict = {}  # signs.nonneg_names of the loop, by ``nonneg`` (Expressions.known_nonneg)
        # names the lowerer binds to np.uint64 starts of a loop nest's slices (nests.Spans): never negative
        self.starts: set = set()
        # manual: the kernel runs without Numba's boundscheck and checks in the source every access not in
        # ``unchecked`` (runtime/native/bounds.py); else Numba checks every access
        self.manual = manual
        self.unchecked: frozenset = frozenset()
        self.rarely_run = False  # lowering the loop as it is beside its unchecked version (versions.py)
        # whether a statement before this one may have changed what the caller sees (an argument array): a kernel
        # whose test then fails cannot just stop and rerun (whole_lower.py sets it; a loop's kernel starts at it)
        self.changed = False
        self.entry_tests: list = []  # (conditions, tags) of loop tests made before a whole function's first change
        self.hoisted = 0  # scalars hoisted before loop nests (nests.hoist), for versions.py
        self._leaf_nodes = ()  # the leaves of the fused expression being lowered (ir.Leaf refers to them)
        self.pxz_temps: dict = {}  # canonicalizer temporaries' values (scalarize.note_temporary)
        self.held: dict = {}  # name -> what its bindings hold (hold: kir.Printed.held)
        self.allocating = None  # the target of the assignment whose value allocates an array (np.zeros), its id
        self.bounds = dict(bounds or {})  # name -> |value| bound (Python ints needing no overflow check)
        self.widened = widened or {}
        # what this lowering learns for the next one (kindflow.settle): names found to be Eithers, an access that
        # needs Numba's boundscheck on the whole kernel
        self.learned: dict = {}
        self.wants_boundscheck = False
        self.flags_start = [kir.Stmt(1, f"__pxw_{n} = {int(_is_np(inputs.get(n)))}", (kir.Name(f"__pxw_{n}", True),))
                            for n in self.widened]
        for n in self.widened:
            self.hold(f"__pxw_{n}", 1)  # (a flag: 0 or 1)
        inputs = {n: (K.Either(self.widened[n].py, self.widened[n].np, n) if n in self.widened else k)
                  for n, k in inputs.items()}
        self.env = dict(inputs)
        self.inputs = dict(inputs)
        # a value of the kernel may be complex (an argument's, an expression's: Expressions.expr): kir.Printed's
        self.complex_values = any(K.holds_complex(k) for k in inputs.values())
        self.outputs = outputs
        self.taint = set(tainted)
        self.arrays_tainted = arrays_tainted
        self.elementwise = False  # lowering an array statement's element (scalarize.py): its NumPy-array semantics
        self.lines: list = []  # the kernel's statements (kir.py nodes), each at its depth
        self.indent = 1  # the depth of the next statement
        self.pending: list = []  # the tags (kir.Call, kir.Access) of the text lowered since the last statement
        self.tmp = itertools.count()
        self.checked = False  # uses Python-int helpers that may raise _Overflow (the caller snapshots arrays)
        # names of arrays indexed into a view (``p[k]`` with k None, a slice, a row...; "*": an expression's):
        # a checked kernel's caller copies those too (kir.Printed.arrays_written)
        self.viewed: set = set()
        self.loc = loop.loc
        self.loop_entries: list[dict] = []

    # ---- driver ----------------------------------------------------------------------------------------
    def source(self, params: list[str]) -> str:
        """The kernel's source, printed from its statements (``self.printed``: with the node of each line)."""
        self.lines += self.flags_start
        self.stmt(self.loop)
        self.flag_outputs = [o for o in self.outputs if o in self.widened]
        self.names(reads=list(self.outputs) + [f"__pxw_{o}" for o in self.flag_outputs])
        outs = "".join(f"{o}, " for o in self.outputs) + "".join(f"__pxw_{o}, " for o in self.flag_outputs)
        self.printed = kir.print_kernel(params, self.lines, f"({outs})", self.pending, not self.manual,
                                        self.complex_values, held=self.held_names())
        return self.printed.source

    def fail(self, why, node=None):
        loc = getattr(node, "loc", None) or self.loc
        where = f"{loc.filename.rsplit('/', 1)[-1]}:{loc.lineno}" if loc and loc.lineno else "?"
        raise Decline(f"{why} ({where})")

    def emit(self, text):
        """A simple statement, with the tags of what was lowered since the last one."""
        return self.put(kir.Stmt(self.indent, text))

    def emit_from(self, start, end, text):
        """A simple statement written while an expression is lowered (the temporary of a part of it), with the tags
        of its own text: those from ``start`` to ``end``; the expression's others stay for the statement it ends
        in."""
        node = kir.Stmt(self.indent, text, self.pending[start:end])
        del self.pending[start:end]
        self.lines.append(node)
        return node

    def put(self, node):
        """``node`` (its depth set) next, with the tags of what was lowered since the last statement."""
        node.depth, node.tags = self.indent, node.tags + tuple(self.pending)
        self.pending.clear()
        self.lines.append(node)
        return node

    def helper(self, name, *args) -> str:
        """The source of a call of helper ``name`` (helpers.py) on ``args``, tagged on the statement it ends in."""
        text, call = kir.helper_call(name, *args)
        self.pending.append(call)
        return text

    def form_of(self, form, atoms) -> str:
        """The source of a declaration's native form (``Lowering``) over ``atoms``; the function it calls
        (``Lowering.called``: ``np.exp``, ``range``, a helper such as ``np.sum``'s ``_px_sum``) and the operations
        it writes (facts.operations: ``/``, ``%`` ...) are tagged."""
        if form.called is not None:
            self.pending += [kir.helper_call(form.called)[1]] if kir.is_helper(form.called) else \
                kir.declared(form.called)
        for called in form_calls(form, len(atoms)):  # (the form's other calls: as declared, or may raise)
            name = called.format(*atoms)
            if name != form.called and called != form.called:
                self.pending += [kir.helper_call(name)[1]] if kir.is_helper(name) else kir.declared(name)
        self.pending += [kir.Op(kind) for kind in operations(form)]
        # (an exponent or a range's step that is not a literal may raise: -2**63 overflows, a step of 0)
        self.pending += [kir.Varies("exponent") for i in exponents(form) if i < 0 or _literal(atoms[i]) is None]
        if form.called == "range" and len(atoms) == 3 and not _literal(atoms[2]):
            self.pending.append(kir.Varies("step"))
        consumed, names, measured = reads(form, len(atoms))
        for i, a in enumerate(atoms):
            if i in names:
                self.only_read(a, names_only=i not in consumed, measured=i in measured)
        return form.source(atoms)

    def call_of(self, name, *args) -> str:
        """The source of a call the lowerer writes itself (a cast ``np.float32(x)``, ``np.uint64``, ``max``),
        tagged with its declared facts (kir.declared)."""
        self.pending += kir.declared(name)
        f = calls().get(name)
        if name.startswith("np.") and f is not None and len(args) <= f.reads:
            for a in args:
                self.only_read(a)
        return f"{name}({', '.join(args)})"

    def names(self, reads=(), binds=(), holds=None, fresh=False):
        """Tag the names the text lowered next reads and binds that no expression's lowering tags (kir.Name): the
        lowerer's own temporaries, flags, the arrays whose shapes its tests read; ``holds``: the kind of what the
        names bound hold (Lowerer.hold; not said: not known to be numbers; ``fresh``: an array they allocate)."""
        self.pending += [kir.Name(n) for n in reads] + [kir.Name(n, True) for n in binds]
        for n in binds:
            self.hold(n, holds, fresh)

    def hold(self, name, k, fresh=False):
        """Record what a binding of ``name`` holds, by its kind ``k``: "number", an array (its ndim when ``fresh``:
        one the binding allocates, ``np.zeros(...)``; else "array") or "other" (kir.Printed.held: parallel.py
        reads only names that hold numbers in a parallel loop, and arrays it can tell apart)."""
        what = "number" if K.is_scalar(k) else (k.ndim if fresh else "array") if type(k) is np.ndarray else "other"
        self.held.setdefault(name, set()).add(what)

    def held_names(self) -> dict:
        """Printed.held: what each name's bindings hold, a loop's over ``range`` holding ints."""
        for n in self.lines:
            if type(n) is kir.For and n.counts is not None:
                self.hold(n.target, 3)
        return {name: frozenset(w) for name, w in self.held.items()}

    def mention(self, array, text=None, element=False, whole=True):
        """Tag a mention of ``array``'s name in the text lowered next (kir.Use): ``text``, the name or the subscript
        that reads it; where it stands it may change the array until a form that only reads it takes it;
        ``whole``: as a value (not a binding's target)."""
        self.pending.append(kir.Use(array, text or array, element, whole=whole))

    def only_read(self, atom, names_only=False, measured=False):
        """The latest mention that is the whole of operand ``atom`` is only read where it stands (``names_only``:
        when it is an array's name, not a subscript; ``measured``: its name only measured, ``.shape``, ``len``)."""
        for i in range(len(self.pending) - 1, -1, -1):
            u = self.pending[i]
            if type(u) is kir.Use and u.text == atom and not u.read:
                if not names_only or u.text == u.array:
                    self.pending[i] = dataclasses.replace(u, read=True, whole=u.whole and not (
                        measured and u.text == u.array))
                return

    def not_whole(self, name):
        """The latest mention of array ``name`` by its name stands for its elements (a store's target, an alias
        of it whose accesses are tagged with its name): not a use of it whole (kir.Use.whole)."""
        for i in range(len(self.pending) - 1, -1, -1):
            u = self.pending[i]
            if type(u) is kir.Use and u.text == u.array == name and u.whole:
                self.pending[i] = dataclasses.replace(u, whole=False)
                return

    def block(self, n):
        """``n``'s statements one level deeper (the printer writes ``pass`` in a block left empty)."""
        self.indent += 1
        self.stmt(n)
        self.indent -= 1

    # ---- statements ------------------------------------------------------------------------------------
    def stmt(self, n):
        turn()  # (a lowering beside the calls takes its turns here: phylanx_py/turns.py)
        self.loc = getattr(n, "loc", self.loc)
        handler = getattr(self, "s_" + type(n).__name__, None)
        if handler is None:
            self.fail(f"{type(n).__name__.lower()} statement", n)
        handler(n)

    def s_Block(self, n):
        for s in n.stmts:
            self.stmt(s)

    def s_Expr(self, n):
        self.whole_value = id(n.value)
        src, _, _ = self.expr(n.value)
        self.emit(src)

    def s_Assign(self, n):
        scalarize.note_temporary(self, n)
        if scalarize.scalarized(self, n):  # an element-wise array statement as one loop nest
            return
        if isinstance(n.target, (ir.StoreName, ir.StoreTuple)):  # (a store's index is read after its value)
            self.whole_value = id(n.value)
        self.allocating = id(n.target) if allocates(n.value) else None
        src, k, t = self.expr(n.value)
        self.assign(n.target, src, k, t, updated=_updates_its_target(n))

    def assign(self, target, src, k, t, updated=False):
        """``target = src`` (of kind ``k``, inexact when ``t``). ``updated``: ``src`` is an in-place update of
        the very item ``target`` stores into (``a[i, :j] += b``): once written, storing the view into itself
        changes nothing, so a view's store is left out (it made Numba compile a slice assignment, over 2 s of
        syrk's 3.5, and copied the view onto itself at every iteration)."""
        if isinstance(target, ir.StoreName):
            alias = self.pxz_temps.get(target.name)
            if isinstance(alias, ir.Var) and alias.depth == 0 and alias.name == src and type(k) is np.ndarray:
                self.not_whole(src)  # (``__px_1 = a``: its accesses are tagged with ``a``, Access.base)
            flags = self.bind(target, target.name, k, t)
            self.emit(f"{target.name} = {src}")
            for f in flags:
                self.put(f)
        elif isinstance(target, ir.StoreTuple):
            if type(k) is not tuple or len(k) != len(target.targets):
                self.fail("unpacking of a value that is not a tuple of known length", target)
            names, flags = [], []
            for sub, sk in zip(target.targets, k):
                if not isinstance(sub, ir.StoreName):
                    self.fail("nested unpacking", target)
                flags += self.bind(sub, sub.name, sk, t)
                names.append(sub.name)
            self.emit(f"{', '.join(names)}, = {src}")
            for f in flags:
                self.put(f)
        elif isinstance(target, ir.StoreItem):
            obj, ok, ot = self.expr(target.obj)
            key, kk, _ = self.expr(target.key)
            if type(ok) is not np.ndarray:
                self.fail(f"a store into {K.describe(ok)}", target)
            item = self.index_kind(ok, kk, target)  # (an element's kind, or a view's)
            if type(k) is K.Either:
                k = k.py if type(k.py) is int else k.np
            if ok.dtype.kind in "iub" and type(k) is int and ok.dtype != np.int64:
                self.fail(f"a Python int stored into a {ok.dtype} array (NumPy raises if it does not fit)", target)
            if ok.dtype.kind in "iu" and (type(k) is float or isinstance(k, np.floating)):
                # NumPy converts a float stored into an int array through a Python int: NaN, inf and values past
                # int64 raise; Numba's cast stores -2**63
                if ok.dtype != np.int64:
                    self.fail(f"a float stored into a {ok.dtype} array", target)
                src = self.helper("_np_int_of", src)
            if type(k) is np.ndarray or (K.is_scalar(k) and np.can_cast(np.asarray(k).dtype, ok.dtype, "unsafe")):
                pass
            else:
                self.fail(f"a store of {K.describe(k)}", target)
            if t:
                self.arrays_tainted = True
            view = type(item) is np.ndarray  # basic indexing: not an element
            text = self.access(target, target.obj, obj, target.key, key, kk, store=True)
            self.in_index(key)
            # (the store's access stays in the statement's tags: the update writes those elements)
            if updated and view and type(k) is np.ndarray:  # (the view, updated in place: arith.inplace)
                self.emit(src)
            elif view and type(k) is np.ndarray and 1 <= k.ndim == item.ndim <= 3 and \
                    np.can_cast(k.dtype, ok.dtype, "safe"):
                # an array into a view: loops (helpers.py: _px_assign2), not Numba's slice assignment
                self.emit(self.helper(f"_px_assign{k.ndim}", text, self.helper("_px_unaliased", text, src)))
            else:
                self.emit(f"{text} = {src}")
        else:
            self.fail("this assignment target", target)

    def cond(self, n):
        if isinstance(n, ir.BoolOp):  # only its truth matters here: operands of different kinds are fine
            parts = [self.cond(n.values[0])]
            self.conditional += 1
            parts += [self.cond(v) for v in n.values[1:]]
            self.conditional -= 1
            return "(" + f" {n.op} ".join(parts) + ")"
        src, k, t = self.expr(n)
        if not K.is_scalar(k):
            self.fail(f"a condition on {K.describe(k)}", n)
        if t:
            self.fail("a condition on an inexact result (exp, log, ...): Numba's last bit may differ", n)
        return src

    def s_If(self, n):
        c = self.cond(n.cond)
        before = dict(self.env)
        self.put(kir.If(0, c))
        self.block(n.then)
        after_then = self.env
        self.env = dict(before)
        self.put(kir.Else(0))
        self.block(n.orelse)
        self.env = self.join(after_then, self.env, n)

    def for_loop(self, n):
        if n.orelse.stmts:
            self.fail("for ... else", n)
        if not isinstance(n.target, ir.StoreName):
            self.fail("a for loop unpacking its items", n)
        it, k, t = self.expr(n.iter)
        if k is K.RANGE:
            item = 3
        elif type(k) is np.ndarray:
            item = k.dtype.type(3) if k.ndim == 1 else K.array(k.dtype, k.ndim - 1)
        else:
            self.fail(f"a for loop over {K.describe(k)}", n)
        if type(k) is np.ndarray and k.ndim == 1:
            self.only_read(it, names_only=True)  # (``for v in a``: its elements read one by one)
        self.bind(n.target, n.target.name, item, t or (type(k) is np.ndarray and self.arrays_tainted))
        b = self.range_bound(n)
        if b is not None:
            self.bounds[n.target.name] = b
        self.put(kir.For(0, n.target.name, it, counts=self.counts(n)))
        self.loop_body(n, n.body)
        self.bounds.pop(n.target.name, None)

    def while_loop(self, n):
        if n.orelse.stmts:
            self.fail("while ... else", n)
        self.put(kir.While(0))
        self.indent += 1
        entry = dict(self.env)
        self.loop_entries.append(entry)
        c = self.cond(n.cond)
        self.put(kir.If(0, f"not ({c})"))
        self.indent += 1
        self.put(kir.Jump(0, "break"))
        self.indent -= 2
        self.block(n.body)
        self.check_stable(entry, n)
        self.loop_entries.pop()
        self.env = {k: v for k, v in self.env.items() if k in entry}

    def s_Break(self, n):
        self.check_stable(self.loop_entries[-1], n)
        self.put(kir.Jump(0, "break"))

    def s_Continue(self, n):
        self.check_stable(self.loop_entries[-1], n)
        self.put(kir.Jump(0, "continue"))


def lower(loop, params, kinds: dict, outputs, small=frozenset(), functions=None) -> tuple:
    """(kernel source, whether it uses helpers that fall back to the interpreter, the Either kinds of outputs
    whose flags follow them, the arrays indexed into views, the kernel as kir.Printed) for ``loop`` over ``params``
    of ``kinds``, the Python ints named in ``small`` being below SMALL in magnitude (the caller checks it per
    call); Decline."""
    src, low = settle(Lowerer, loop, params, kinds, outputs, small, functions=functions)
    return src, low.checked, {o: low.widened[o] for o in low.flag_outputs}, frozenset(low.viewed), low.printed


def _is_np(k) -> bool:
    return isinstance(k, np.generic)


def _literal(text: str):
    """The value of an operand the lowerer wrote as a literal (``2``, ``-1``), or None."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None


def _updates_its_target(n) -> bool:
    """Whether assignment ``n`` is ``obj[key] = <in-place op>(obj[key], ...)`` with the same two names, as
    canonicalize.py writes ``obj[key] op= value``. When ``obj[key]`` is an array (a view), the expression's
    lowering writes it in place (expressions.e_Call: ``Lowering.inplace`` on an array operand, arith.inplace)."""
    t, v = n.target, n.value
    if not (isinstance(t, ir.StoreItem) and isinstance(v, ir.Call) and v.args and rule(v.prim, "inplace")):
        return False
    item = v.args[0]
    return (isinstance(item, ir.Call) and item.prim == "operator.getitem" and
            all(isinstance(a, ir.Var) and isinstance(b, ir.Var) and (a.name, a.depth) == (b.name, b.depth)
                for a, b in ((t.obj, item.args[0]), (t.key, item.args[1]))))
