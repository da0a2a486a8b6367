"""A whole function's statements lowered as one kernel (whole.py's tier compiles and runs it): each statement as
the loop tier lowers loops (lower.py), the statements that may raise recorded as stages (a kernel stops only before
anything the caller sees changed, or inside a loop, as the loop tier's would), and the returned value's kind."""
from __future__ import annotations

import collections

import numpy as np
from phylanx_py.primitives import MUTATES, lookup

from phylanx_py import ir

from . import kinds as K
from . import kir
from .calls import SHAPE
from .expressions import as_expression
from .facts import rule
from .kinds import Decline
from .lower import Lowerer, settle
from .versions import RERUN_BOUNDS


class FunctionLowerer(Lowerer):
    """Lowers a function body's statements (``loop``: a Block), then ``ret``, the returned expression. Records the
    stages (top-level statements) that may raise, so an error can be put at its statement."""

    def __init__(self, body, inputs, outputs, tainted=frozenset(), arrays_tainted=False, widened=None,
                 bounds=None, manual=True, counters=frozenset(), ret=None, functions=None):
        super().__init__(body, inputs, outputs, tainted, arrays_tainted, widened, bounds, manual, counters,
                         functions)
        self.ret = ret
        self.named, self.not_scalars = set(), set()

    def bind(self, node, name, k, t):
        # the names ever bound to a number, and those bound to anything else (``_mutates``)
        self.named.add(name)
        if not K.is_scalar(k):
            self.not_scalars.add(name)
        return super().bind(node, name, k, t)

    def s_Assign(self, n):
        """A name bound once, outside loops, to a bounded Python int (``n = A.shape[0]``) keeps its bound, as a
        small int argument of a loop kernel does: index arithmetic on it runs unchecked."""
        super().s_Assign(n)
        if self.loop_entries or self.indent != 1:
            return
        targets = _targets(n.target)
        value = n.value
        for t in targets:
            if not isinstance(t, ir.StoreName) or self.assigned[t.name] != 1 or not K.is_int(self.env.get(t.name)):
                continue
            if isinstance(n.target, ir.StoreName):
                b = self.bound(value)
            else:  # h, w = a.shape
                b = SHAPE if isinstance(value, ir.Call) and value.prim == "attr.shape" else None
            if b is not None:
                self.bounds[t.name] = b

    def source(self, params):
        self.assigned = collections.Counter(s.name for s in ir.walk(self.loop)
                                            if isinstance(s, (ir.StoreName, ir.SetVar)))
        self.lines += self.flags_start
        stages, mutated = [], False  # (node, first line, is a loop) of each stage that may raise
        # arrays the function makes itself (y = np.zeros(n), bound once): changing them changes nothing the
        # caller sees, so a later statement that raises may still rerun the call interpreted
        fresh = {s.target.name for s in self.loop.stmts if isinstance(s, ir.Assign) and
                 isinstance(s.target, ir.StoreName) and self.assigned[s.target.name] == 1 and
                 isinstance(s.value, ir.Call) and rule(s.value.prim, "allocates")}
        # names whose values are fixed before the first statement that may change what the caller sees (parameters
        # never bound again, names bound once before it, at the top): what a loop's test made there may read
        self.fixed = {n for n in self.inputs if not self.assigned[n]}
        change_at = None  # where that statement's lines start
        for s in self.loop.stmts:
            start = len(self.lines)
            self.changed = mutated
            self.stmt(s)
            is_loop = isinstance(s, (ir.For, ir.While))
            if is_loop or _may_raise(self.lines[start:]):
                if mutated and not is_loop:
                    self.fail("a statement that may raise after a loop changed values", s)
                if not is_loop and _inlines_statements(s, self.functions) and \
                        _mutates(s, fresh, self.named - self.not_scalars, self.functions):
                    # an inlined body that changes values and then raises: a rerun would change them twice (a
                    # review found [2, 1, 2] where Python leaves [1, 1, 2])
                    self.fail("a statement whose inlined call changes values and may raise", s)
                stages.append((s, start, is_loop))
            # a loop changing only scalars and arrays made here (crc16's) changes nothing the caller sees
            if not mutated and _mutates(s, fresh, self.named - self.not_scalars, self.functions):
                mutated, change_at = True, start
            elif not mutated and isinstance(s, ir.Assign):
                self.fixed |= {t.name for t in _targets(s.target) if isinstance(t, ir.StoreName) and
                               self.assigned[t.name] == 1}
        src, k, _ = self.expr(self.ret)
        ret = kir.Stmt(1, src, self.pending)  # (what the return statement reads: not a statement of the body)
        if _may_raise([ret]):
            if mutated:
                self.fail("a return value that may raise after a loop changed values", self.ret)
            stages.append((self.ret, len(self.lines), False))
        self.flag_outputs = []
        self.ret_kind = _returnable(self, k)
        flags = [e.flag() for e in _eithers(k)]
        ret.tags += tuple(kir.Name(f"__pxw_{o}") for e in _eithers(k) for o in e.origin)
        if self.entry_tests:  # before the first change: a failed test stops the kernel, the call reruns interpreted
            self.lines[change_at:change_at] = [
                kir.If(1, f"not ({' and '.join(dict.fromkeys(c for conds, _ in self.entry_tests for c in conds))})",
                       tuple(t for _, tags in self.entry_tests for t in tags)),
                kir.Raise(2, f"raise _Overflow({RERUN_BOUNDS!r})", tuple(kir.declared("_Overflow")))]
            stages = [(node, start + 2 if start >= change_at else start, is_loop) for node, start, is_loop in stages]
        self.stages = [(node, is_loop) for node, _, is_loop in stages]
        if len(stages) > 1:  # which one raised: the kernel writes the stage's number before it runs
            for i, (_, start, _) in reversed(list(enumerate(stages))):
                self.lines.insert(start, kir.Stmt(1, f"__pxs[0] = {i}", (kir.Name("__pxs"),)))
            params = ["__pxs"] + list(params)
        # the value alone when no flag follows it (a tuple to box and unpack costs 0.1 us a call)
        outs = "(" + "".join(f"{x}, " for x in [src] + flags) + ")" if flags else src
        self.printed = kir.print_kernel(params, self.lines, outs, ret.tags, not self.manual, self.complex_values,
                                        held=self.held_names())
        return self.printed.source


def _targets(target) -> list:
    """An assignment's targets: the name, or a tuple target's items (``h, w = a.shape``)."""
    return [target] if isinstance(target, ir.StoreName) else list(getattr(target, "targets", ()))


def _inlines_statements(stmt, functions) -> bool:
    """Whether ``stmt`` calls a function whose body a kernel inlines as statements (expressions.py)."""
    return any(isinstance(x, ir.Apply) and isinstance(x.func, ir.FuncRef) and x.func.name in functions and
               as_expression(list(functions[x.func.name].body.stmts)) is None for x in ir.walk(stmt))


def _may_raise(nodes) -> bool:
    """Whether statements (kir nodes) may raise: a helper call tagged so (kir.Call), a ``raise`` (a loop nest's test
    that stops the kernel), an access of an array kept in bounds by a check (kir.Access; a proven one cannot fail:
    the test it was proven under ran before it, a tuple's constant item neither; a "view" may index by an array), a
    division, modulo, power, shift or ``math`` name (kir.Op), a call of a function the declarations say allocates
    (``np.zeros``). (Not yet the declared forms' own ``raises``: most default to True, and taking it would end a
    kernel's stage at more statements.) NPBench's trmm ends with ``B *= alpha`` after its loop: a nest with nothing
    to test, which does not make the function run loop by loop."""
    return bool(kir.raising_helpers(nodes)) or any(
        type(n) is kir.Raise or n.ops or any(c.allocates for c in n.calls) or
        any(a.how not in _CANNOT_FAIL for a in n.accesses) for n in nodes)


_CANNOT_FAIL = frozenset({"proven", "item"})  # kir.Access.how of accesses that never raise


def _mutates(stmt, fresh, scalars=frozenset(), functions=None) -> bool:
    """Whether a statement (a loop too) may change an array the caller sees (a store, an in-place operator on
    anything but an array in ``fresh`` or a name in ``scalars``, which hold numbers; a call of a function that
    changes any array in place)."""
    def local(obj):
        return isinstance(obj, ir.Var) and (obj.name in fresh or obj.name in scalars)

    def changes(fn):
        return any(isinstance(s, ir.StoreItem) or (isinstance(s, ir.Call) and _written(s)) for s in ir.walk(fn.body))

    return any((isinstance(s, ir.StoreItem) and not local(s.obj)) or
               (isinstance(s, ir.Call) and any(not local(w) for w in _written(s))) or
               (isinstance(s, ir.Apply) and isinstance(s.func, ir.FuncRef) and s.func.name in (functions or {})
                and changes(functions[s.func.name]))
               for s in ir.walk(stmt))


def _written(call):
    """The arguments a call may change in place: an in-place operator's or a mutating primitive's first, a ufunc's
    output (``np.multiply(z, z, z)``)."""
    if call.prim.startswith("operator.i") or lookup(call.prim).effect == MUTATES:
        return call.args[:1]
    kernel = lookup(call.prim).kernel
    return call.args[kernel.nin:] if isinstance(kernel, np.ufunc) else ()



def _eithers(k):
    items = k if type(k) is tuple else (k,)
    return [x for x in items if type(x) is K.Either]


def _returnable(low, k):
    items = k if type(k) is tuple else (k,)
    for x in items:
        if not (x is None or type(x) in (np.ndarray, K.Either) or K.is_scalar(x)):
            low.fail(f"a return value of {K.describe(x)}", low.ret)
    return k


# a whole function's kernel of more lines than this is declined: its loops go native one by one in the loop tier.
# NPBench's vadv lowered to 791 lines (111 loops: each array statement its own nest, with its guards; 1,541 before a
# slice's bounds were one helper call, helpers._px_span) whose kernel compiles in 44 s in a warm process, where its
# loops' own kernels land within 10-20 s; cavity_flow's 139 lines compile in 4.3 s, the other NPBench whole-function
# kernels have 9-130 lines
MAX_LINES = 400


def lowering(body, params, ks, small, ret, functions, loop_free) -> tuple:
    """A signature of a whole function lowered: ("lowered", (source, checked, stages, viewed, printed, the result's
    kind)) or ("declined", why). Here or in the compile server (compile_child.lower_request: everything it takes
    and gives pickles), beside the calls."""
    try:
        names = frozenset(n for n, is_small in zip(params, small) if is_small)
        source, low = settle(FunctionLowerer, body, params, dict(zip(params, ks)), [], names, ret=ret,
                             functions=functions)
        if loop_free and not any(isinstance(n, kir.If) and (n.note or "").endswith(" as one loop nest")
                                 for n in low.printed.nodes.values()):
            # its array calls would be Numba's forms of NumPy's own (BLAS, ufuncs): nothing for a kernel to gain,
            # and NPBench's k2mm, mvt ran at 0.71x, 0.77x NumPy as such kernels (quiet run)
            raise Decline("straight-line code without a loop nest (its calls are NumPy's own)")
        lines = source.count("\n")
        if lines > MAX_LINES:
            raise Decline(f"a kernel of {lines} lines (more than {MAX_LINES}): its loops compile apart, sooner")
    except Decline as e:
        return ("declined", str(e))
    return ("lowered", (source, low.checked, low.stages, low.viewed, low.printed, low.ret_kind))
