"""Expressions of a loop nest lowered to (source, kind, tainted): constants, names, conditionals, tuples, calls of
primitives (their NumPy-vs-Numba rules: arith.py, calls.py, reductions.py), inlined calls of the program's functions,
and array accesses, checked in the source unless Numba checks or bounds.py proved them (a mixin of lower.Lowerer)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from phylanx_py.primitives import lookup

from phylanx_py import ir
from phylanx_py.turns import turn

from . import kinds as K
from . import kir
from .calls import DTYPE_CONSTS
from .kinds import Decline
from .nests import resolve
from .reductions import takes as takes_axes
from .signs import Signs, nonneg_names


class Expressions:
    """The ``e_*`` handlers and array accesses (a mixin of lower.Lowerer)."""

    def expr(self, n):
        turn()  # (a lowering beside the calls takes its turns here: phylanx_py/turns.py)
        handler = getattr(self, "e_" + type(n).__name__, None)
        if handler is None:
            self.fail(f"{type(n).__name__.lower()} expressions", n)
        out = handler(n)
        if not self.complex_values and K.holds_complex(out[1]):
            self.complex_values = True
        return out

    def e_Const(self, n):
        v = n.value
        t = type(v)
        if t is bool or v is None:
            return repr(v), v, False
        if t is int:
            if not K.INT64[0] <= v < K.INT64[1]:
                self.fail("a Python int constant past 2**63", n)
            return repr(v), 3, False
        if t is float:
            if math.isnan(v) or math.isinf(v):
                self.pending.append(kir.Op("math"))
                return ("math.nan" if math.isnan(v) else "math.inf" if v > 0 else "(-math.inf)"), 1.5, False
            return repr(v), 1.5, False
        if v in DTYPE_CONSTS:
            return f"np.{DTYPE_CONSTS[v]}", v, False
        self.fail(f"a constant of type {t.__name__}", n)

    def e_Var(self, n):
        if n.depth != 0:
            self.fail(f"'{n.name}' of an enclosing function", n)
        if n.name not in self.env:
            self.fail(f"'{n.name}' may be read before it is assigned", n)
        self.pending.append(kir.Name(n.name))
        if type(self.env[n.name]) is np.ndarray:
            self.mention(n.name)
        return n.name, self.env[n.name], n.name in self.taint

    def e_SetVar(self, n):
        src, k, t = self.expr(n.value)
        self.bind(n, n.name, k, t)
        self.pending.append(kir.Name(n.name, True, True))  # (bound inside an expression: liveness.py)
        return f"({n.name} := {src})", k, t

    def e_IfExp(self, n):
        c = self.cond(n.cond)
        self.conditional += 1
        a, ka, ta = self.expr(n.then)
        b, kb, tb = self.expr(n.orelse)
        self.conditional -= 1
        if K.key(ka) != K.key(kb):
            self.fail(f"a conditional expression of {K.describe(ka)} or {K.describe(kb)}", n)
        return f"({a} if {c} else {b})", ka, ta or tb

    def e_BoolOp(self, n):
        parts = [self.expr(n.values[0])]
        self.conditional += 1
        parts += [self.expr(v) for v in n.values[1:]]
        self.conditional -= 1
        k0 = parts[0][1]
        if any(K.key(k) != K.key(k0) for _, k, _ in parts) or not K.is_scalar(k0):
            self.fail(f"'{n.op}' of values of different kinds", n)
        if any(t for _, _, t in parts[:-1]):
            self.fail("'and'/'or' deciding on an inexact result", n)
        return "(" + f" {n.op} ".join(p for p, _, _ in parts) + ")", k0, any(t for _, _, t in parts)

    def e_Tuple(self, n):
        parts = [self.expr(i) for i in n.items]
        return "(" + "".join(p + ", " for p, _, _ in parts) + ")", tuple(k for _, k, _ in parts), \
            any(t for _, _, t in parts)

    def e_Apply(self, n):
        """A call of one of the program's functions whose body is one expression (``return e``, or ``if``/``else``
        of such returns: NPBench's nussinov ``match``), inlined: its arguments bound to temporaries in order, as
        Python binds the parameters before the body runs, then the body as an expression over them."""
        fn = self.functions.get(n.func.name) if isinstance(n.func, ir.FuncRef) else None
        if fn is None:
            self.fail("a call of a function value", n)
        body = as_expression(list(fn.body.stmts))
        stmts = ()
        if body is None:
            stmts, body = inlined_statements(fn)
            if body is None:
                self.fail(f"a call of '{fn.name}', whose body is not statements ending in its one return", n)
        if n.kwargs or fn.kwonly or len(n.args) != len(fn.params):
            self.fail(f"a call of '{fn.name}' with keywords or defaults", n)
        if id(n) not in self.applies:
            self.fail(f"a call inside the called function '{fn.name}'", n)
        if not stmts and (any(isinstance(x, (ir.StoreName, ir.SetVar, ir.Lambda)) for x in ir.walk(body)) or any(
                isinstance(x, ir.Var) and (x.depth != 0 or x.name not in fn.params) for x in ir.walk(body))):
            self.fail(f"a call of '{fn.name}', which binds or reads other names than its parameters", n)
        if self.conditional:
            # its arguments (and statements) are emitted before the expression's: there they would run even where
            # Python skips them (``i < n and f(a[i])``)
            self.fail(f"a call of '{fn.name}' in a part of an expression that may not run", n)
        if any(isinstance(x, ir.SetVar) for a in n.args for x in ir.walk(a)):
            # its arguments are bound before the rest of the expression is read: a ``:=`` in one would change a
            # name Python reads before the call (``x + f((x := x + 1.0))``: 38.0 against 35.0, a review found)
            self.fail(f"a call of '{fn.name}' with an assignment expression in its arguments", n)
        if stmts and self.whole_value != id(n):
            # its statements would run before the parts of the expression Python reads first (``a[0] + f(a)``
            # with an ``f`` that changes ``a``: a review found 66.0 where Python gives 36.0)
            self.fail(f"a call of '{fn.name}', whose body is statements, inside a larger expression", n)
        k = self.applies[id(n)]
        names = {p: f"__pxc{k}_{p}" for p in fn.params}
        # the statements' own names too (a canonicalizer temporary keeps its prefix: scalarize.py looks for it)
        names.update({x: (f"__px_c{k}{x}" if x.startswith("__px_") else f"__pxc{k}_{x}") for x in _bound(stmts)})
        for p, a in zip(fn.params, n.args):
            start = len(self.pending)
            src, k, t = self.expr(a)
            if type(k) is K.Either:
                self.fail(f"a call of '{fn.name}' with a value that may be a Python or a NumPy scalar", n)
            self.env[names[p]] = k
            (self.taint.add if t else self.taint.discard)(names[p])
            self.bounds.pop(names[p], None)
            self.names(binds=[names[p]], holds=k)
            self.emit_from(start, None, f"{names[p]} = {src}")  # (Numba does not type ``:=`` next to ``a if c else b``)
        for st in stmts:  # a body of statements: inlined before the expression that calls it, as they run first
            self.stmt(_renamed(st, names))
        return self.expr(_renamed(body, names))

    def e_Fused(self, n):
        if n.reduce:
            self.fail("a fused reduction", n)
        self._leaves = [self.expr(leaf) for leaf in n.leaves]
        self._leaf_nodes = n.leaves
        # a leaf's text is written where the body uses it, once per use: so is the mention that is all of it
        self._leaf_uses = {}
        for i, (src, _, _) in enumerate(self._leaves):
            at = [j for j, u in enumerate(self.pending) if type(u) is kir.Use and u.text == src]
            if at:
                self._leaf_uses[i] = self.pending.pop(at[-1])
        return self.expr(n.body)

    def e_Leaf(self, n):
        if n.index in self._leaf_uses:
            self.pending.append(self._leaf_uses[n.index])
        return self._leaves[n.index]

    def e_Call(self, n):
        prim = lookup(n.prim)
        low = prim.lowering
        name = n.prim
        if low is None:
            self.fail(f"{prim.label} has no native form", n)
        start = len(self.pending)
        args = [self.expr(a) for a in n.args[:1]]
        first = len(self.pending)  # (the tags of the first argument's text: a reduction may bind it to a temporary)
        args += [self.expr(a) for a in n.args[1:]]
        kwargs = dict((k, self.expr(v)) for k, v in n.kwargs)
        tainted = any(t for _, _, t in args)
        if tainted and (low.compares or prim.comparison or name.startswith("logical_")):
            self.fail(f"{prim.label} of an inexact result (exp, log, ...): Numba's last bit may differ", n)
        if takes_axes(name, n, [k for _, k, _ in args]):  # reductions over axes (reductions.py)
            return self.reduction(n, args, (start, first))
        if kwargs and not set(kwargs) <= set(low.keywords):
            self.fail(f"{prim.label} with keyword arguments", n)
        atoms = [a for a, _, _ in args]
        ks = [k for _, k, _ in args]
        special = getattr(self, "c_" + name.replace(".", "_"), None)
        if special is not None:
            src, k, *inexact = special(n, atoms, ks, kwargs)  # (src, kind) or (src, kind, inexact)
            return src, k, tainted or bool(inexact and inexact[0]) or (
                name == "operator.getitem" and self.arrays_tainted and type(ks[0]) is np.ndarray)  # (not a shape)
        if low.inplace and type(ks[0]) is np.ndarray:  # ``a += b`` on an array (arith.py)
            return self.inplace(n, prim, low, atoms, ks, tainted)
        for k in ks:
            if not (K.is_scalar(k) or type(k) is np.ndarray):
                self.fail(f"{prim.label} of {K.describe(k)}", n)
        origins = {k.origin for k in ks if type(k) is K.Either}
        if origins:
            return self.either_call(n, prim, low, atoms, ks, origins, tainted)
        try:
            k = K.run(prim.kernel, *ks)
        except Decline as e:
            self.fail(f"{prim.label}: {e}", n)
        if low.moves:  # flip, copy, empty_like ...: elements moved or allocated, not computed on (any dtype)
            if len(ks) != 1 or type(ks[0]) is not np.ndarray:
                self.fail(f"{prim.label} of other than one array", n)
            if low.view:  # what is written through the view changes the array (kir.Printed.arrays_written)
                base = n.args[0]
                self.viewed.add(base.name if isinstance(base, ir.Var) and base.depth == 0 else "*")
            return self.form_of(low, atoms), k, tainted
        # a product of complex128 arrays: NumPy's loops fuse its multiply-adds (FMA), Numba's and any scalar's do not
        # (44% of 200,000 random products differed in the last bit here), scalarized (``elementwise``) or not
        inexact = low.inexact and not (K.is_int(k) or type(k) is bool) or (low.complex == "inexact" and (
            k.dtype.kind == "c" if type(k) is np.ndarray else
            self.elementwise and (isinstance(k, np.complexfloating) or type(k) is complex)))
        return self.arith(n, low, atoms, ks, k), k, tainted or inexact

    def access(self, node, obj_node, obj, key_node, key, key_kind, store=False):
        """The source of ``obj[key]`` (an array access; ``store``: stored into): as it is where Numba checks or the
        access is proven in bounds, else with each integer index checked (``_ix``: IndexError as NumPy raises it);
        tagged (kir.Access) with which of the three keeps it in bounds, and with what it touches (``touched``)."""
        self.touching = self.touched(obj_node, key_node, store, key_kind)
        if store:
            self.not_whole(obj)  # (the store's target: its elements)
        # the index items the text writes (an element read is one per dimension: kir.Use)
        self.items_written = len(key_node.items) if isinstance(key_node, ir.Tuple) else 1
        if not self.manual:
            return self._access(obj, f"{obj}[{key}]", "numba")
        if id(node) in self.unchecked:
            return self._access(obj, f"{obj}[{key}]", "proven")
        if any(isinstance(s, ir.SetVar) for s in ir.walk(obj_node)):
            self.wants_boundscheck = True  # the array's expression must be evaluated once: learned (settle)
            return self._access(obj, f"{obj}[{key}]", "numba")
        if isinstance(key_node, ir.Tuple):
            comps = [self.expr(it)[:2] for it in key_node.items]
        elif type(key_kind) is tuple:  # a tuple held by a name (a[k] += v keeps its key in a temporary)
            if any(isinstance(s, ir.SetVar) for s in ir.walk(key_node)):
                self.wants_boundscheck = True
                return self._access(obj, f"{obj}[{key}]", "numba")
            comps = [(f"{key}[{c}]", kc) for c, kc in enumerate(key_kind)]
        else:
            comps = [(key, key_kind)]
        self.items_written = len(comps)
        parts, d, how = [], 0, "view"  # (only slices, new axes: nothing to check)
        for src, k in comps:
            if k is None:
                parts.append(src)  # np.newaxis: no dimension of obj
                continue
            if K.is_int(k) and type(k) is not bool:
                parts.append(self.helper("_ixr" if self.rarely_run else "_ix", src, f"{obj}.shape[{d}]"))
                how = "checked"
            else:
                parts.append(src)
            d += 1
        if not parts:  # an empty key: ``p[()]`` (``p[]`` is no Python): a name holding it is not read there
            if kir.Name(key) in self.pending:
                del self.pending[len(self.pending) - 1 - self.pending[::-1].index(kir.Name(key))]
            return self._access(obj, f"{obj}[()]", how)
        comma = "," if len(parts) == 1 and type(key_kind) is tuple else ""
        return self._access(obj, f"{obj}[{', '.join(parts)}{comma}]", how)

    def _access(self, obj, text, how):
        self.pending.append(kir.Access(obj, how, *self.touching))
        return text

    def touched(self, obj_node, key_node, store, key_kind):
        """(base, store, own, element) of an access (kir.Access) of ``obj_node`` at ``key_node`` (of ``key_kind``),
        from their IR and kinds."""
        base = resolve(self, obj_node)
        base = base.name if isinstance(base, ir.Var) and base.depth == 0 else ""
        array = self.env.get(base)
        items = key_kind if type(key_kind) is tuple else (key_kind,)
        element = type(array) is np.ndarray and len(items) == array.ndim and all(
            K.is_int(k) and type(k) is not bool for k in items)
        key = resolve(self, key_node)
        items = key.items if isinstance(key, ir.Tuple) else (key,)
        if not isinstance(key, ir.Tuple) and type(self.env.get(key.name) if isinstance(key, ir.Var) else None) is \
                tuple:
            return base, store, None, element  # (a name holding a tuple: its items are not known here)
        return base, store, tuple(self._own(resolve(self, it)) for it in items), element

    def _own(self, item):
        """(name, "") for an index item that is a name, (name, offset) for ``offset + name`` with ``offset`` a name
        holding a non-negative int (a loop nest's start, nests.Spans; a name signs.nonneg_names knows), else None."""
        if isinstance(item, ir.Var) and item.depth == 0:
            return item.name, ""
        if not (isinstance(item, ir.Call) and item.prim == "operator.add" and len(item.args) == 2 and
                not item.kwargs):
            return None
        a, b = (resolve(self, x) for x in item.args)
        if not (isinstance(a, ir.Var) and isinstance(b, ir.Var) and a.depth == b.depth == 0):
            return None
        known = a.name in self.starts or (K.is_int(self.env.get(a.name)) and Signs(self.known_nonneg()).nonneg(a))
        return (b.name, a.name) if known else None

    def known_nonneg(self) -> frozenset:
        """signs.nonneg_names of the kernel's IR with what this lowering knows now (once per such knowledge)."""
        if self.nonneg not in self.nonneg_names:
            self.nonneg_names[self.nonneg] = nonneg_names(self.loop, self.inputs, self.nonneg)
        return self.nonneg_names[self.nonneg]

    def in_index(self, key):
        """The slices written in index ``key`` (its text) are an index's (a slice elsewhere makes views of any
        array: kir.Use)."""
        for i, u in enumerate(self.pending):
            if type(u) is kir.Use and u.array == "" and not u.read and (u.text == key or f"{u.text}, " in key):
                self.pending[i] = kir.Use("", u.text, False, True)


def as_expression(stmts):
    """A function body that is one returned expression (``return e``; ``if c: <body> else: <body>``, the ``else``
    part possibly the statements after the ``if``) as one expression node, else None."""
    if len(stmts) == 1 and isinstance(stmts[0], ir.Return):
        return stmts[0].value
    if stmts and isinstance(stmts[0], ir.If):
        first = stmts[0]
        then = as_expression(list(first.then.stmts))
        orelse = as_expression(list(first.orelse.stmts) + stmts[1:])
        if then is not None and orelse is not None:
            return ir.IfExp(first.cond, then, orelse, loc=first.loc)
    return None


def inlined_statements(fn):
    """(statements, returned expression) of a function body that a kernel inlines as statements: simple statements
    and loops (NPBench's cavity_flow ``build_up_b``, ``pressure_poisson``) ending in its only ``return`` or none
    (the value None), reading only its parameters and its own names; (None, None) otherwise."""
    stmts = list(fn.body.stmts)
    last = stmts[-1] if stmts else None
    body = ir.Const(None)
    if isinstance(last, ir.Return):
        stmts, body = stmts[:-1], (last.value if last.value is not None else ir.Const(None))
    nodes = [x for st in stmts for x in ir.walk(st)] + list(ir.walk(body))
    if any(isinstance(x, (ir.Return, ir.Lambda)) for x in nodes):
        return None, None
    known = set(fn.params) | _bound(stmts)
    if any(isinstance(x, (ir.Var, ir.StoreName, ir.SetVar)) and (x.depth != 0 or x.name not in known) for x in nodes):
        return None, None
    return tuple(stmts), body


def inlinable(fn) -> bool:
    """Whether a kernel inlines a call of ``fn`` (one returned expression, or ``inlined_statements``)."""
    stmts = list(fn.body.stmts)
    return as_expression(stmts) is not None or inlined_statements(fn)[1] is not None


def _bound(stmts) -> set:
    return {x.name for st in stmts for x in ir.walk(st) if isinstance(x, (ir.StoreName, ir.SetVar)) and x.depth == 0}


def _renamed(node, names):
    """``node`` with its variables (of the called function: depth 0) renamed by ``names``."""
    if isinstance(node, (ir.Var, ir.StoreName, ir.SetVar)) and node.depth == 0 and node.name in names:
        node = dataclasses.replace(node, name=names[node.name])
        if isinstance(node, ir.Var):
            return node
    if isinstance(node, ir.Node):
        return dataclasses.replace(node, **{f.name: _renamed(getattr(node, f.name), names)
                                            for f in dataclasses.fields(node)})
    if type(node) is tuple:
        return tuple(_renamed(x, names) for x in node)
    return node

