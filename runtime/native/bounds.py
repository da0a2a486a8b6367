"""Which array accesses of a loop nest stay in bounds, and on what condition: the native tier's bounds proofs.

Kernels are compiled without Numba's boundscheck (it keeps LLVM from vectorising inner loops: 1.5-3.5x on
cholesky, trmm, nussinov). Instead every access whose index is not proven in bounds is checked in the source
(``_ix``), so an out-of-bounds read still raises IndexError where the plain function raises. A loop nest is
lowered twice: once with the proven accesses unchecked, run when the nest's condition holds on entry, and once
with every access checked, run otherwise. The condition is linear in values the nest does not change, so it is
evaluated once per run of the nest, not per access.

The proof is interval arithmetic on affine forms. ``for i in range(a, b)`` gives ``i`` the interval
``[lo(a), hi(b) - 1]`` inside its body when the body does not assign ``i``; an index ``i - 1`` gets
``[lo(i) - 1, hi(i) - 2]``, and so on through each primitive's interval rule (its declaration's
``Lowering.interval``: ``+``, ``-``, negation, products with constants; the algebra is intervals.py's). Every bound is
an affine form over *invariants*: names the nest does not assign whose magnitude is bounded (shapes, small ints:
the lowerer's ``bounds``), and ``X.shape[d]`` of arrays the nest does not rebind. An access ``X[..., k, ...]``
is in bounds when ``-X.shape[d] <= lo(k)`` and ``hi(k) < X.shape[d]`` (Numba wraps negative indices as NumPy
does). Bounds of an empty range are never used: its body does not run. Sums of at most eight terms with
coefficients up to 1024 over values below 2**48 cannot overflow int64, so the condition is exact.
"""
from __future__ import annotations

import collections
import re

import numpy as np
from phylanx_py.primitives import lookup
from phylanx_py.primitives.registry import IO, MUTATES, PURE, RAISES, UnknownPrimitive

from phylanx_py import ir

from . import kinds as K
from . import kir
from .facts import rule
from .intervals import MAX_CONST, Affine, Interval, IntervalOps, plus

_TEMP = re.compile(r"__px_\d+")  # canonicalize.py's temporaries
_FLIP = {"operator.lt": "operator.gt", "operator.le": "operator.ge", "operator.gt": "operator.lt",
         "operator.ge": "operator.le"}


def _new_value(prim) -> bool:
    """Whether a call of ``prim`` gives a new value, never a view of an argument: a ``fresh`` primitive's (its
    declaration's), or an in-place operator's (``s += v`` on a name first bound in the nest to new values leaves
    it holding one)."""
    try:
        p = lookup(prim)
    except UnknownPrimitive:
        return False
    return p.fresh or (p.lowering is not None and p.lowering.inplace is not None)


class Prover:
    """The proofs for one loop nest ``loop`` entered with ``env`` (name -> kind) and ``bounds`` (name -> bound
    of a Python/NumPy int's magnitude): ``proven`` (ids of access nodes in bounds when ``conditions`` hold)."""

    def __init__(self, loop, env, bounds):
        self.env = env
        counts = collections.Counter(s.name for s in ir.walk(loop) if isinstance(s, (ir.StoreName, ir.SetVar)))
        self.assigned = set(counts)
        # an array whose shape the nest may change (a.shape = ...) is no invariant
        self.reshaped = {c.args[0].name for c in ir.walk(loop) if isinstance(c, ir.Call) and
                         c.prim == "python.set_shape" and isinstance(c.args[0], ir.Var)}
        self.bounds = bounds
        # the translator's temporaries (``a[k] += v`` is ``t = a; s = k; t[s] = iadd(t[s], v)``): each is bound
        # once, then read right after in the same block, so it stands for its expression
        self.alias = {}
        for s in ir.walk(loop):
            target = s.target if isinstance(s, ir.Assign) else s if isinstance(s, ir.SetVar) else None
            if isinstance(target, (ir.StoreName, ir.SetVar)) and counts[target.name] == 1 and \
                    _TEMP.fullmatch(target.name):
                self.alias[target.name] = s.value
        self.ops = IntervalOps(self)
        self.ranged: set = set()  # int arrays whose elements index (their least and greatest, read at the start)
        self.proven: set[int] = set()
        self.least: dict = {}  # the affine part of a condition -> its least constant
        self.scope: dict[str, Interval] = {}
        self.leaves = ()  # the leaves of the fused expression being walked (ir.Leaf refers to them)
        self.stored = None  # (no element ranges while the nest's trip count is found)
        self.trip_names: tuple = ()  # (the names its source reads: kir.Name tags of the set-up)
        self.trip = self._trip(loop)
        self.stored = self._stores(loop)  # arrays the nest stores into (None: one it cannot name)
        self.stmt(loop)

    def _trip(self, loop):
        """The source of the nest's outermost trip count (``range(a, b)``: b - a), or None. Reading an index
        array's range is a pass over it: it is read only when the array is at most 16 elements an iteration (a
        4-iteration loop reading 4 elements of a 4,000,000-element array must not scan it)."""
        if not isinstance(loop, ir.For):
            return None
        iv = self.range_interval(loop)
        if iv is None or iv.lo is None or iv.hi is None:
            return None
        trip = plus(plus(iv.hi, iv.lo, -1), Affine(1))
        self.trip_names = _names(trip.terms) if trip is not None else ()
        return trip.source() if trip is not None else None

    def _stores(self, loop):
        """The names of the arrays bound before the nest that it stores into (``X[...] = v``, ``X[i][j] = v``, a
        primitive that changes an argument), or None when one is something else: an array rebound in the nest, a
        name bound in it to what may be a view. Scalars, and names the nest first binds, only to constants and
        arithmetic results (``s = 0.0; s += v``, a new array), change no array of the caller's."""
        fresh = {}
        for st in ir.walk(loop):
            if isinstance(st, ir.Assign) and isinstance(st.target, ir.StoreName):
                v = st.value
                ok = isinstance(v, ir.Const) or (isinstance(v, ir.Call) and _new_value(v.prim))
                fresh[st.target.name] = fresh.get(st.target.name, True) and ok
            elif isinstance(st, (ir.StoreName, ir.SetVar)):
                fresh.setdefault(st.name, False)
        names = set()
        for st in ir.walk(loop):
            if isinstance(st, ir.StoreItem):
                targets = [st.obj]
            elif isinstance(st, ir.Call) and st.prim != "operator.getitem":
                try:
                    effect = lookup(st.prim).effect
                except KeyError:  # not a primitive of the registry: say it may change any argument
                    effect = "unknown"
                if effect is PURE or effect == IO or effect == RAISES:  # print, assert and the like change no array
                    continue
                if effect == MUTATES:  # its first argument, or out=
                    targets = list(st.args[:1]) + [v for k, v in st.kwargs if k == "out"]
                else:
                    targets = list(st.args) + [v for _, v in st.kwargs]
            else:
                continue
            for t in targets:
                t = self.resolve(t)
                while isinstance(t, ir.Call) and t.prim == "operator.getitem":
                    t = self.resolve(t.args[0])
                if not isinstance(t, ir.Var) or t.depth != 0:
                    if isinstance(st, ir.StoreItem):
                        return None
                    continue  # a constant or an expression's value passed to an effectful call
                k = self.env.get(t.name)
                if t.name in self.assigned:
                    # a scalar before the nest stays one (the lowerer checks kinds); a name first bound in the
                    # nest to constants and arithmetic results holds new values only
                    if K.is_scalar(k) or (k is None and fresh.get(t.name)):
                        continue
                    return None
                if type(k) is np.ndarray:
                    names.add(t.name)
                elif not K.is_scalar(k):
                    return None
        return names

    # ---- walking the nest ---------------------------------------------------------------------------------
    def stmt(self, n):
        if isinstance(n, ir.For):
            self.visit(n.iter)
            iv = self.range_interval(n)
            name = n.target.name if isinstance(n.target, ir.StoreName) else None
            assigned_in_body = name is not None and any(
                isinstance(s, (ir.StoreName, ir.SetVar)) and s.name == name for s in ir.walk(n.body))
            saved = self.scope.get(name)
            if iv is not None and name is not None and not assigned_in_body:
                self.scope[name] = iv
            elif name is not None:
                self.scope.pop(name, None)
            self.stmt(n.body)
            if name is not None:  # after the loop the name holds its last value (or none): not an interval
                self.scope.pop(name, None)
                if saved is not None:
                    self.scope[name] = saved
            return
        self.visit(n)

    def visit(self, n):
        if isinstance(n, ir.Fused):
            self.visit_all(n.leaves)
            saved, self.leaves = self.leaves, n.leaves
            self.visit(n.body)
            self.leaves = saved
            return
        if isinstance(n, ir.If):
            self.visit(n.cond)
            saved = dict(self.scope)
            self.refine(n.cond)
            self.visit(n.then)
            self.scope = saved
            self.visit(n.orelse)
            return
        if isinstance(n, ir.StoreItem):
            self.access(n, n.obj, n.key)
        elif isinstance(n, ir.Call) and n.prim == "operator.getitem":
            self.access(n, n.args[0], n.args[1])
        self.visit_all(ir.children(n))

    def visit_all(self, nodes):
        for c in nodes:
            if isinstance(c, ir.For):
                self.stmt(c)
            else:
                self.visit(c)

    # ---- what a branch's condition says: ``if i + 1 < n:`` bounds i by n - 2 in its body ------------------
    def refine(self, cond):
        cond = self.resolve(cond)
        if isinstance(cond, ir.Fused):
            saved, self.leaves = self.leaves, cond.leaves
            self.refine(cond.body)
            self.leaves = saved
            return
        if isinstance(cond, ir.BoolOp):
            if cond.op == "and":
                for v in cond.values:
                    self.refine(v)
            return
        if not (isinstance(cond, ir.Call) and cond.prim in _FLIP and len(cond.args) == 2):
            return
        left, right = cond.args
        self.bound_by(left, cond.prim, right)
        self.bound_by(right, _FLIP[cond.prim], left)

    def bound_by(self, x, op, y):
        """In a branch where ``x op y`` holds: narrow the interval of the loop variable ``x`` is (plus a
        constant). A bound from the condition replaces the range's: either is sound, the condition's is the one
        the user wrote to keep the index in bounds."""
        x, c = self.resolve(x), 0
        if isinstance(x, ir.Call) and x.prim in ("operator.add", "operator.sub") and \
                isinstance(self.resolve(x.args[1]), ir.Const) and type(self.resolve(x.args[1]).value) is int:
            c = self.resolve(x.args[1]).value * (1 if x.prim == "operator.add" else -1)
            x = self.resolve(x.args[0])
        if not (isinstance(x, ir.Var) and x.name in self.scope and abs(c) <= MAX_CONST):
            return
        iv, other = self.scope[x.name], self.interval(y)
        if other is None:
            return
        # x + c op y: x < y - c, x <= y - c, x > y - c, x >= y - c
        shift = Affine(-c)
        if op in ("operator.lt", "operator.le") and other.hi is not None:
            hi = plus(other.hi, shift)
            hi = plus(hi, Affine(1), -1) if op == "operator.lt" and hi is not None else hi
            if hi is not None:
                self.scope[x.name] = Interval(iv.lo, hi)
        elif op in ("operator.gt", "operator.ge") and other.lo is not None:
            lo = plus(other.lo, shift)
            lo = plus(lo, Affine(1)) if op == "operator.gt" and lo is not None else lo
            if lo is not None:
                self.scope[x.name] = Interval(lo, iv.hi)

    # ---- intervals --------------------------------------------------------------------------------------
    def range_interval(self, n):
        it = n.iter
        if not (isinstance(it, ir.Call) and it.prim == "builtins.range" and not it.kwargs):
            return None
        args = it.args
        ivs = [self.interval(a) for a in args]
        if any(iv is None for iv in ivs):
            return None
        one = Affine(1)
        if len(args) == 1:
            return Interval(Affine(0), plus(ivs[0].hi, one, -1))
        step = 1
        if len(args) == 3:
            if not (isinstance(args[2], ir.Const) and type(args[2].value) is int and args[2].value != 0):
                return None
            step = args[2].value
        a, b = ivs[0], ivs[1]
        if step > 0:
            return Interval(a.lo, plus(b.hi, one, -1))
        return Interval(plus(b.lo, one), a.hi)

    def interval(self, n):
        """The Interval of an int-valued expression, or None."""
        if isinstance(n, ir.Const):
            v = n.value
            if type(v) is int and abs(v) <= MAX_CONST:
                return Interval(Affine(v), Affine(v))
            return None
        if isinstance(n, ir.Leaf):
            r = self.resolve(n)
            return self.interval(r) if r is not n else None
        if isinstance(n, ir.Fused):  # k - i - 1 fused: its body over its leaves
            saved, self.leaves = self.leaves, n.leaves
            try:
                return self.interval(n.body)
            finally:
                self.leaves = saved
        if isinstance(n, ir.Var):
            if n.depth:
                return None
            if n.name in self.alias:
                return self.interval(self.alias[n.name])
            if n.name in self.scope:
                return self.scope[n.name]
            k = self.env.get(n.name)
            if n.name not in self.assigned and K.is_int(k) and type(k) is not bool and \
                    self.bounds.get(n.name, 1 << 63) <= 1 << 48:
                s = Affine.sym(n.name)
                return Interval(s, s)
            return None
        if not isinstance(n, ir.Call) or n.kwargs:
            return None
        p, args = n.prim, n.args
        extent = self.extent_of(n)
        if extent is not None:
            return Interval(extent, extent)
        if p == "operator.getitem":
            return self.element(args[0], args[1])
        transfer = rule(p, "interval")  # the primitive's own (``Lowering.interval``: + - * neg ...)
        return transfer(self.ops, *args) if transfer is not None else None

    def element(self, obj, key):
        """The Interval of an element read ``X[i, j]`` of an int64 array the nest neither rebinds nor stores into:
        from its least to its greatest element (``__pxlo_X``, ``__pxhi_X``: ``_vrange`` at the nest's start)."""
        name = self.invariant_array(obj)
        if name is None or self.stored is None or name in self.stored or self.trip is None:
            return None
        kind = self.env[name]
        items = key.items if isinstance(key, ir.Tuple) else (key,)
        # int64 only: arithmetic on narrower elements wraps in their dtype (uint8 10 - 50 is 216), and the
        # intervals are exact integers
        if kind.dtype != np.int64 or len(items) != kind.ndim or any(self.interval(it) is None for it in items):
            return None
        self.ranged.add(name)
        return Interval(Affine.sym(f"__pxlo_{name}"), Affine.sym(f"__pxhi_{name}"))

    def extent_of(self, n):
        """``X.shape[d]`` (or ``len(X)``) of an array the nest does not rebind, as an Affine symbol, or None."""
        if n.prim == "builtins.len" and len(n.args) == 1:
            x, d = n.args[0], 0
        elif n.prim == "operator.getitem" and isinstance(n.args[0], ir.Call) and n.args[0].prim == "attr.shape" \
                and isinstance(n.args[1], ir.Const) and type(n.args[1].value) is int:
            x, d = n.args[0].args[0], n.args[1].value
        else:
            return None
        name = self.invariant_array(x)
        if name is None or not 0 <= d < self.env[name].ndim:
            return None
        return Affine.sym(f"{name}.shape[{d}]")

    def resolve(self, n):
        while True:
            if isinstance(n, ir.Var) and n.depth == 0 and n.name in self.alias:
                n = self.alias[n.name]
            elif isinstance(n, ir.Leaf) and n.index < len(self.leaves):
                n = self.leaves[n.index]
            else:
                return n

    def invariant_array(self, x):
        x = self.resolve(x)
        if isinstance(x, ir.Var) and x.depth == 0 and x.name not in self.assigned and \
                x.name not in self.reshaped and type(self.env.get(x.name)) is np.ndarray:
            return x.name
        return None

    # ---- accesses -------------------------------------------------------------------------------------------
    def access(self, node, obj, key):
        """Record ``node`` (``obj[key]``) as proven, with its conditions, when every int index is in bounds."""
        base, first, obj, key = obj, 0, self.resolve(obj), self.resolve(key)
        if isinstance(obj, ir.Call) and obj.prim == "operator.getitem":  # A[i][j]: A's dims after the ints
            items = obj.args[1].items if isinstance(obj.args[1], ir.Tuple) else (obj.args[1],)
            if any(self.interval(it) is None for it in items):
                return
            base, first = obj.args[0], len(items)
        name = self.invariant_array(base)
        if name is None:
            return
        items = key.items if isinstance(key, ir.Tuple) else (key,)
        conds = []
        for d, it in enumerate(items, start=first):
            if isinstance(it, ir.Call) and it.prim == "python.slice":
                continue  # slices clamp: never out of bounds
            if isinstance(it, ir.Const) and it.value is None:
                return  # np.newaxis shifts the dims: not worth following
            iv = self.interval(it)
            if iv is None or iv.lo is None or iv.hi is None or d >= self.env[name].ndim:
                return
            ext = Affine.sym(f"{name}.shape[{d}]")
            for a in (plus(iv.lo, ext), plus(plus(ext, iv.hi, -1), Affine(1), -1)):  # lo + n >= 0, n - hi - 1 >= 0
                if a is None:
                    return
                if not a.terms:
                    if a.const < 0:
                        return  # out of bounds for some iteration, or the range is empty: check it
                    continue
                if a.const >= 0 and all(c > 0 and ".shape[" in sym for sym, c in a.terms.items()):
                    continue  # lengths are never negative
                conds.append(a)
        self.proven.add(id(node))
        for a in conds:  # of c + t >= 0 for one t, the least c implies the others
            key = tuple(sorted(a.terms.items()))
            self.least[key] = min(a.const, self.least.get(key, a.const))

    def _bounding(self) -> list:
        """The arrays of ``ranged`` whose least or greatest element a condition reads."""
        syms = {sym for terms in self.least for sym, _ in terms}
        return [r for r in sorted(self.ranged) if f"__pxlo_{r}" in syms or f"__pxhi_{r}" in syms]

    @property
    def conditions(self) -> list[str]:
        """The tests (source) under which every proven access is in bounds, after ``setup``: that each index
        array's range was read (small enough for the nest, its elements within 2**47), the bounds, and that no
        array the nest stores into shares memory with an array whose elements bounded an index."""
        bounding = self._bounding()
        return [f"__pxok_{r}" for r in bounding] + \
            [f"{Affine(c, dict(key)).source()} >= 0" for key, c in self.least.items()] + \
            [kir.helper_call("_apart", s, r)[0] for r in bounding for s in sorted(self.stored)]

    @property
    def condition_calls(self) -> tuple:
        """The tags of ``conditions``: their helper calls (kir.Call), the arrays they name (kir.Use), the names
        they read (kir.Name)."""
        bounding = self._bounding()
        names = [f"__pxok_{r}" for r in bounding] + [x for key in self.least for x in _names(dict(key))] + \
            [x for r in bounding for s in sorted(self.stored) for x in (s, r)]
        return tuple(t for r in bounding for s in sorted(self.stored)
                     for t in (kir.helper_call("_apart", s, r)[1], kir.Use(s, s), kir.Use(r, r))) + tuple(
            kir.Name(n) for n in dict.fromkeys(names))

    @property
    def setup(self) -> list[tuple]:
        """Statements before the tests, (source, its helper calls): the least and greatest element of each array
        whose elements bound an index."""
        out = []
        for r in self._bounding():
            call, tag = kir.helper_call("_vrange", r, f"16 * max({self.trip}, 0) + 64")
            out.append((f"__pxlo_{r}, __pxhi_{r}, __pxok_{r} = {call}", (tag, kir.Use(r, r)) + kir.declared("max") +
                        tuple(kir.Name(n, True) for n in (f"__pxlo_{r}", f"__pxhi_{r}", f"__pxok_{r}")) +
                        tuple(kir.Name(n) for n in (r, *self.trip_names))))
        return out


def _names(terms) -> tuple:
    """The names an Affine's symbols read: a name (``n``, ``__pxlo_X``) or an array's (``X.shape[0]``)."""
    return tuple(dict.fromkeys(sym.split(".", 1)[0] for sym in terms))
