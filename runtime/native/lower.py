"""A loop nest's IR lowered to the Python source of one Numba function, for given argument kinds.

Every expression is lowered with its kind (runtime/native/kinds.py), so the source can keep NumPy's and Python's
semantics where Numba's differ: operands of small-int/float32 arithmetic are cast to the dtype NumPy computes in,
Python-int results go through checked helpers (no wrap at 2**63), division of Python scalars raises at zero,
float sums use NumPy's pairwise order. What cannot be kept raises Decline with the reason and the line.
Results of inexact functions (exp, log, sin, pow ...) may differ from NumPy's in the last bit, so comparing
them (or storing them into an array later compared) declines, as fused kernels do (primitives/fused.py).
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import re

import numpy as np
from phylanx_py.primitives import lookup

from phylanx_py import ir

from ..source_blocks import BlockWriter
from . import kinds as K
from . import scalarize
from .bounds import Prover
from .calls import DTYPE_CONSTS, SAFE, CallRules
from .facts import rule
from .kinds import Decline
from .reductions import ReduceRules
from .reductions import takes as takes_axes
from .signs import COUNTER, Signs, counters, inductive, untested_counters


class NeedBoundscheck(Exception):
    """Restart lowering with Numba's boundscheck on the whole kernel (an access the source cannot check)."""


class Widen(Exception):
    """Restart lowering with ``name`` as an Either (a Python scalar that may become a NumPy one)."""

    def __init__(self, name, either):
        super().__init__(name)
        self.name, self.either = name, either


class Lowerer(CallRules, ReduceRules, BlockWriter):
    """Lowers one loop (``loop``) over ``inputs`` (name -> kind) to a kernel's source."""

    def __init__(self, loop, inputs: dict, outputs: list, tainted=frozenset(), arrays_tainted=False, widened=None,
                 bounds=None, manual=True, counters=frozenset(), functions=None):
        self.loop = loop
        # the program's functions by name (a call of one is inlined: ``e_Apply``), and each call's number in the
        # loop (the names of its parameters' temporaries: the same in every lowering of the loop)
        self.functions = functions or {}
        self.applies = {id(a): i for i, a in enumerate(x for x in ir.walk(loop) if isinstance(x, ir.Apply))}
        self.conditional = 0  # inside parts of expressions that may not run (``and``/``or``, ``a if c else b``)
        self.counters = counters  # names that keep their COUNTER bound when assigned (signs.py)
        self.nonneg: frozenset = frozenset()  # Python-int names known non-negative here (signs.py)
        # manual: the kernel runs without Numba's boundscheck and checks in the source every access not in
        # ``unchecked`` (runtime/native/bounds.py); else Numba checks every access
        self.manual = manual
        self.unchecked: frozenset = frozenset()
        self._leaf_nodes = ()  # the leaves of the fused expression being lowered (ir.Leaf refers to them)
        self.pxz_temps: dict = {}  # canonicalizer temporaries' values (scalarize.note_temporary)
        self.bounds = dict(bounds or {})  # name -> |value| bound (Python ints needing no overflow check)
        self.widened = widened or {}
        self.flags_start = [f"__pxw_{n} = {int(_is_np(inputs.get(n)))}" for n in self.widened]
        inputs = {n: (K.Either(self.widened[n].py, self.widened[n].np, n) if n in self.widened else k)
                  for n, k in inputs.items()}
        self.env = dict(inputs)
        self.inputs = dict(inputs)
        self.outputs = outputs
        self.taint = set(tainted)
        self.arrays_tainted = arrays_tainted
        self.lines: list[str] = []
        self.indent = 1
        self.tmp = itertools.count()
        self.checked = False  # uses Python-int helpers that may raise _Overflow (the caller snapshots arrays)
        # names of arrays indexed into a view (``p[k]`` with k None, a slice, a row...; "*": an expression's):
        # a checked kernel's caller copies those too (analysis.arrays_written)
        self.viewed: set = set()
        self.loc = loop.loc
        self.loop_entries: list[dict] = []

    # ---- driver ----------------------------------------------------------------------------------------
    def source(self, params: list[str]) -> str:
        self.lines += ["    " + f for f in self.flags_start]
        self.stmt(self.loop)
        self.flag_outputs = [o for o in self.outputs if o in self.widened]
        outs = "".join(f"{o}, " for o in self.outputs) + "".join(f"__pxw_{o}, " for o in self.flag_outputs)
        body = "\n".join(self.lines) or "    pass"
        return (f"{self.decorator()}\n"
                f"def kernel({', '.join(params)}):\n{body}\n    return ({outs})\n")

    def decorator(self):
        return f"@numba.njit(cache=True, nogil=True, boundscheck={not self.manual}, error_model='numpy')"

    def fail(self, why, node=None):
        loc = getattr(node, "loc", None) or self.loc
        where = f"{loc.filename.rsplit('/', 1)[-1]}:{loc.lineno}" if loc and loc.lineno else "?"
        raise Decline(f"{why} ({where})")

    def emit(self, text):
        self.lines.append("    " * self.indent + text)

    # ---- statements ------------------------------------------------------------------------------------
    def stmt(self, n):
        self.loc = getattr(n, "loc", self.loc)
        handler = getattr(self, "s_" + type(n).__name__, None)
        if handler is None:
            self.fail(f"{type(n).__name__.lower()} statement", n)
        handler(n)

    def s_Expr(self, n):
        src, _, _ = self.expr(n.value)
        self.emit(src)

    def s_Assign(self, n):
        scalarize.note_temporary(self, n)
        if scalarize.scalarized(self, n):  # an element-wise array statement as one loop nest
            return
        src, k, t = self.expr(n.value)
        self.assign(n.target, src, k, t)

    def assign(self, target, src, k, t):
        if isinstance(target, ir.StoreName):
            flags = self.bind(target, target.name, k, t)
            self.emit(f"{target.name} = {src}")
            for f in flags:
                self.emit(f)
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
                self.emit(f)
        elif isinstance(target, ir.StoreItem):
            obj, ok, ot = self.expr(target.obj)
            key, kk, _ = self.expr(target.key)
            if type(ok) is not np.ndarray:
                self.fail(f"a store into {K.describe(ok)}", target)
            self.index_kind(ok, kk, target)
            if type(k) is K.Either:
                k = k.py if type(k.py) is int else k.np
            if ok.dtype.kind in "iub" and type(k) is int and ok.dtype != np.int64:
                self.fail(f"a Python int stored into a {ok.dtype} array (NumPy raises if it does not fit)", target)
            if ok.dtype.kind in "iu" and (type(k) is float or isinstance(k, np.floating)):
                # NumPy converts a float stored into an int array through a Python int: NaN, inf and values past
                # int64 raise; Numba's cast stores -2**63
                if ok.dtype != np.int64:
                    self.fail(f"a float stored into a {ok.dtype} array", target)
                src = f"_np_int_of({src})"
            if type(k) is np.ndarray or (K.is_scalar(k) and np.can_cast(np.asarray(k).dtype, ok.dtype, "unsafe")):
                pass
            else:
                self.fail(f"a store of {K.describe(k)}", target)
            if t:
                self.arrays_tainted = True
            self.emit(f"{self.access(target, target.obj, obj, target.key, key, kk)} = {src}")
        else:
            self.fail("this assignment target", target)

    def bind(self, node, name, k, t) -> list[str]:
        """Record ``name``'s new kind; the lines that keep its Either flag (emitted after the store)."""
        if node.depth != 0:
            self.fail(f"assignment to the enclosing function's '{name}'", node)
        flags = []
        w = self.widened.get(name)
        if w is not None:
            if type(k) is K.Either:
                if k.origin != (name,):
                    flags.append(f"__pxw_{name} = {k.flag()}")
            elif K.key(k) in (K.key(w.py), K.key(w.np)):
                flags.append(f"__pxw_{name} = {int(K.key(k) == K.key(w.np))}")
            else:
                self.fail(f"'{name}' is {K.describe(w)} or {K.describe(k)}", node)
            k = K.Either(w.py, w.np, name)
        elif type(k) is K.Either:
            raise Widen(name, K.Either(k.py, k.np, name))
        if name not in self.counters:
            self.bounds.pop(name, None)
        old = self.env.get(name)
        if old is not None and name in self.inputs and K.key(old) != K.key(k):
            self.widen_or_fail(name, old, k, node)
        self.env[name] = k
        if t:
            self.taint.add(name)
        else:
            self.taint.discard(name)
        return flags

    def widen_or_fail(self, name, a, b, node):
        e = K.either_of(a, b, name)
        if e is not None and name not in self.widened:
            raise Widen(name, K.Either(e.py, e.np, name))
        self.fail(f"'{name}' changes from {K.describe(a)} to {K.describe(b)}", node)

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
        self.emit(f"if {c}:")
        self.block(n.then)
        after_then = self.env
        self.env = dict(before)
        self.emit("else:")
        self.block(n.orelse)
        self.env = self.join(after_then, self.env, n)

    def join(self, a, b, node):
        out = {}
        for name in set(a) | set(b):
            if name in a and name in b:
                if K.key(a[name]) != K.key(b[name]):
                    if K.either_of(a[name], b[name], name) is not None:
                        self.widen_or_fail(name, a[name], b[name], node)
                    if name in self.inputs:
                        self.fail(f"'{name}' is {K.describe(a[name])} or {K.describe(b[name])} after the if", node)
                    continue  # unreadable afterwards
                out[name] = a[name]
        return out

    def loop_body(self, n, body):
        entry = dict(self.env)
        self.loop_entries.append(entry)
        self.block(body)
        self.check_stable(entry, n)
        self.loop_entries.pop()
        # names first bound in the body may be unbound after zero iterations
        self.env = {k: v for k, v in self.env.items() if k in entry}

    def check_stable(self, entry, node):
        for name, k in entry.items():
            now = self.env.get(name)
            if now is not None and K.key(now) != K.key(k) and K.either_of(now, k, name) is not None:
                self.widen_or_fail(name, k, now, node)
            if now is None or K.key(now) != K.key(k):
                self.fail(f"'{name}' changes kind in the loop ({K.describe(k)} -> "
                          f"{K.describe(now) if now is not None else 'unbound'})", node)

    # ---- loop nests lowered twice: accesses proven in bounds unchecked, or all checked (bounds.py) -------------
    def s_For(self, n):
        self.versioned(n, self.for_loop)

    def s_While(self, n):
        self.versioned(n, self.while_loop)

    def versioned(self, n, lower_loop):
        inner = lower_loop
        lower_loop = lambda n: self.sign_versioned(n, inner)  # noqa: E731 - the loop, and its sign version
        if not self.manual or self.loop_entries or self.unchecked:
            return lower_loop(n)
        prover = Prover(n, self.env, self.bounds)
        if not prover.proven:
            return lower_loop(n)
        self.two_versions(n, lower_loop, prover.conditions, "unchecked", frozenset(prover.proven), prover.setup)

    def sign_versioned(self, n, lower_loop):
        """The loop lowered knowing which Python ints stay non-negative through it (signs.py), under a test of
        their values at its start, and as it is."""
        names = inductive(n, self.env) - self.nonneg
        names -= untested_counters(n, names, self.counters)
        if not names:
            return lower_loop(n)
        self.two_versions(n, lower_loop, [f"{name} >= 0" for name in sorted(names)], "nonneg", self.nonneg | names)

    def two_versions(self, n, lower_loop, conds, attr, assumed, setup=()):
        """The loop lowered with ``self.<attr>`` set to ``assumed`` (what holds when ``conds``, tests of values at
        its start, hold) and as it is, the first run when they hold; once when no test is needed (it is lowered
        with the assumption) or when the assumption changes nothing."""
        before, lines, indent, known = self._state(), self.lines, self.indent, getattr(self, attr)
        self.lines, self.indent = [], indent + 1
        setattr(self, attr, assumed)
        lower_loop(n)
        setattr(self, attr, known)
        fast, after, after_key = self.lines, self._state(), self._state_key()
        self.lines, self.indent = lines, indent
        if not conds:
            self.lines += [line[4:] for line in fast]
            return
        self._restore(before)
        self.lines, self.indent = [], indent + 1
        lower_loop(n)
        plain = self.lines
        self.lines, self.indent = lines, indent
        if self._state_key() != after_key:  # both versions are one loop: they must leave the same kinds
            self.fail(f"a loop whose two versions ({attr} or not) disagree on kinds", n)
        if fast == plain or _renumbered(fast) == _renumbered(plain):  # (the same code but for temporaries' numbers:
            # loop nests of array statements carry their own tests, and a copy more costs Numba seconds to compile)
            self.lines += [line[4:] for line in plain]
            return
        for line in setup:  # what the tests read (an index array's least and greatest element)
            self.emit(line)
        self.emit(f"if {' and '.join(conds)}:  # {attr} version")  # the mark outline.py looks for
        self.lines += fast
        self.emit("else:")
        self.lines += plain
        self._restore(after)

    def _state(self):
        return (dict(self.env), set(self.taint), dict(self.bounds), self.arrays_tainted)

    def _state_key(self):
        return ({k: K.key(v) for k, v in self.env.items()}, set(self.taint), dict(self.bounds), self.arrays_tainted)

    def _restore(self, state):
        env, taint, bounds, arrays = state
        self.env, self.taint, self.bounds, self.arrays_tainted = dict(env), set(taint), dict(bounds), arrays

    def access(self, node, obj_node, obj, key_node, key, key_kind):
        """The source of ``obj[key]`` (an array access): as it is where Numba checks or the access is proven in
        bounds, else with each integer index checked (``_ix``: IndexError as NumPy raises it)."""
        if not self.manual or id(node) in self.unchecked:
            return f"{obj}[{key}]"
        if any(isinstance(s, ir.SetVar) for s in ir.walk(obj_node)):
            raise NeedBoundscheck()  # the array's expression must be evaluated once
        if isinstance(key_node, ir.Tuple):
            comps = [self.expr(it)[:2] for it in key_node.items]
        elif type(key_kind) is tuple:  # a tuple held by a name (a[k] += v keeps its key in a temporary)
            if any(isinstance(s, ir.SetVar) for s in ir.walk(key_node)):
                raise NeedBoundscheck()
            comps = [(f"{key}[{c}]", kc) for c, kc in enumerate(key_kind)]
        else:
            comps = [(key, key_kind)]
        parts, d = [], 0
        for src, k in comps:
            if k is None:
                parts.append(src)  # np.newaxis: no dimension of obj
                continue
            parts.append(f"_ix({src}, {obj}.shape[{d}])" if K.is_int(k) and type(k) is not bool else src)
            d += 1
        if not parts:  # an empty key: ``p[()]`` (``p[]`` is no Python)
            return f"{obj}[()]"
        return f"{obj}[{', '.join(parts)}{',' if len(parts) == 1 and type(key_kind) is tuple else ''}]"

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
        self.bind(n.target, n.target.name, item, t or (type(k) is np.ndarray and self.arrays_tainted))
        b = self.range_bound(n)
        if b is not None:
            self.bounds[n.target.name] = b
        self.emit(f"for {n.target.name} in {it}:")
        self.loop_body(n, n.body)
        self.bounds.pop(n.target.name, None)

    def while_loop(self, n):
        if n.orelse.stmts:
            self.fail("while ... else", n)
        self.emit("while True:")
        self.indent += 1
        entry = dict(self.env)
        self.loop_entries.append(entry)
        c = self.cond(n.cond)
        self.emit(f"if not ({c}):")
        self.emit("    break")
        self.indent -= 1
        self.block(n.body)
        self.check_stable(entry, n)
        self.loop_entries.pop()
        self.env = {k: v for k, v in self.env.items() if k in entry}

    def s_Break(self, n):
        self.check_stable(self.loop_entries[-1], n)
        self.emit("break")

    def s_Continue(self, n):
        self.check_stable(self.loop_entries[-1], n)
        self.emit("continue")

    # ---- expressions: (source, kind, tainted) -------------------------------------------------------------
    def expr(self, n):
        handler = getattr(self, "e_" + type(n).__name__, None)
        if handler is None:
            self.fail(f"{type(n).__name__.lower()} expressions", n)
        return handler(n)

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
            if math.isnan(v):
                return "math.nan", 1.5, False
            if math.isinf(v):
                return ("math.inf" if v > 0 else "(-math.inf)"), 1.5, False
            return repr(v), 1.5, False
        if v in DTYPE_CONSTS:
            return f"np.{DTYPE_CONSTS[v]}", v, False
        self.fail(f"a constant of type {t.__name__}", n)

    def e_Var(self, n):
        if n.depth != 0:
            self.fail(f"'{n.name}' of an enclosing function", n)
        if n.name not in self.env:
            self.fail(f"'{n.name}' may be read before it is assigned", n)
        return n.name, self.env[n.name], n.name in self.taint

    def e_SetVar(self, n):
        src, k, t = self.expr(n.value)
        self.bind(n, n.name, k, t)
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
        if body is None:
            self.fail(f"a call of '{fn.name}', whose body is not one returned expression", n)
        if n.kwargs or fn.kwonly or len(n.args) != len(fn.params):
            self.fail(f"a call of '{fn.name}' with keywords or defaults", n)
        if id(n) not in self.applies:
            self.fail(f"a call inside the called function '{fn.name}'", n)
        if any(isinstance(x, (ir.StoreName, ir.SetVar, ir.Lambda)) for x in ir.walk(body)) or any(
                isinstance(x, ir.Var) and (x.depth != 0 or x.name not in fn.params) for x in ir.walk(body)):
            self.fail(f"a call of '{fn.name}', which binds or reads other names than its parameters", n)
        if self.conditional:
            # its arguments are bound by statements before the expression's: there they would run even where
            # Python skips them (``i < n and f(a[i])``)
            self.fail(f"a call of '{fn.name}' in a part of an expression that may not run", n)
        names = {p: f"__pxc{self.applies[id(n)]}_{p}" for p in fn.params}
        for p, a in zip(fn.params, n.args):
            src, k, t = self.expr(a)
            if type(k) is K.Either:
                self.fail(f"a call of '{fn.name}' with a value that may be a Python or a NumPy scalar", n)
            self.env[names[p]] = k
            (self.taint.add if t else self.taint.discard)(names[p])
            self.bounds.pop(names[p], None)
            self.emit(f"{names[p]} = {src}")  # Numba does not type ``:=`` next to a conditional expression
        return self.expr(_renamed(body, names))

    def e_Fused(self, n):
        if n.reduce:
            self.fail("a fused reduction", n)
        self._leaves = [self.expr(leaf) for leaf in n.leaves]
        self._leaf_nodes = n.leaves
        return self.expr(n.body)

    def e_Leaf(self, n):
        return self._leaves[n.index]

    def e_Call(self, n):
        prim = lookup(n.prim)
        low = prim.lowering
        name = n.prim
        if low is None:
            self.fail(f"{prim.label} has no native form", n)
        args = [self.expr(a) for a in n.args]
        kwargs = dict((k, self.expr(v)) for k, v in n.kwargs)
        tainted = any(t for _, _, t in args)
        if tainted and (low.compares or prim.comparison or name.startswith("logical_")):
            self.fail(f"{prim.label} of an inexact result (exp, log, ...): Numba's last bit may differ", n)
        if takes_axes(name, n, [k for _, k, _ in args]):  # reductions over axes (reductions.py)
            return self.reduction(n, args)
        if kwargs and not set(kwargs) <= set(low.keywords):
            self.fail(f"{prim.label} with keyword arguments", n)
        atoms = [a for a, _, _ in args]
        ks = [k for _, k, _ in args]
        special = getattr(self, "c_" + name.replace(".", "_"), None)
        if special is not None:
            src, k, *inexact = special(n, atoms, ks, kwargs)  # (src, kind) or (src, kind, inexact)
            return src, k, tainted or bool(inexact and inexact[0]) or (
                name == "operator.getitem" and self.arrays_tainted)
        if low.inplace and type(ks[0]) is np.ndarray:
            K.run(prim.kernel, *ks)  # NumPy's casting rule for the in-place update
            self.int_power(n, ks[0])
            if len(ks) == 2 and ks[0].dtype not in (np.float64, np.int64, np.bool_) and not (
                    np.result_type(ks[0].dtype, ks[1].dtype if type(ks[1]) is np.ndarray or
                                   isinstance(ks[1], np.generic) else ks[1]) == ks[0].dtype and
                    (type(ks[1]) is not np.ndarray or ks[1].dtype == ks[0].dtype)):
                # NumPy computes a float32 array += an int32 array (or np.float64) in float64, Numba in float32
                self.fail(f"an in-place update of a {ks[0].dtype} array computed in another dtype "
                          f"({K.describe(ks[1])})", n)
            if len(ks) == 2 and type(ks[1]) in (int, float) and ks[0].dtype not in (np.float64, np.int64):
                # NEP 50: a Python scalar takes the array's dtype (a float32 array += 0.1 adds float32(0.1))
                atoms = [atoms[0], self.weak_cast(atoms[1], ks[1], np.result_type(ks[0].dtype, ks[1]), n.args[1])]
            if low.divides == "mod":  # Numba's np.remainder traps (SIGFPE) on int64 -2**63 % -1; its % does not
                return f"_px_imod({atoms[0]}, {atoms[1]})", ks[0], tainted
            if low.divides == "floor" and ks[0].dtype.kind == "i":
                return f"_px_ifloordiv({atoms[0]}, {atoms[1]})", ks[0], tainted
            if low.shifts and not self.small_shift(n, ks[0]):
                if ks[0].dtype != np.int64:
                    self.fail(f"a shift of {ks[0].dtype} by a count that may reach its width", n)
                return f"_px_i{low.shifts[0]}shift({atoms[0]}, {atoms[1]})", ks[0], tainted
            return f"np.{low.inplace}({atoms[0]}, {atoms[1]}, {atoms[0]})", ks[0], tainted
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
            if low.view:  # what is written through the view changes the array (analysis.arrays_written)
                base = n.args[0]
                self.viewed.add(base.name if isinstance(base, ir.Var) and base.depth == 0 else "*")
            return low.source(atoms), k, tainted
        inexact = low.inexact and not (K.is_int(k) or type(k) is bool)
        return self.arith(n, low, atoms, ks, k), k, tainted or inexact

    def either_call(self, n, prim, low, atoms, ks, origins, tainted):
        """An operation on variables that are Python or NumPy scalars: NumPy's result is a NumPy scalar when any
        of them is one. Every reading must agree on the source, or differ only where the all-Python reading's
        checked helper falls back to the interpreter (a Python int past 2**63, a zero divisor)."""
        names = sorted({name for o in origins for name in o})
        if len(names) > 3:
            self.fail("an operation on more than three variables that may be Python or NumPy scalars", n)
        readings = []
        for bits in itertools.product((0, 1), repeat=len(names)):
            np_side = {name for name, b in zip(names, bits) if b}
            sk = [(k.np if np_side & set(k.origin) else k.py) if type(k) is K.Either else k for k in ks]
            try:
                rk = K.run(prim.kernel, *sk)
            except Decline as e:
                self.fail(f"{prim.label}: {e}", n)
            readings.append((rk, self.arith(n, low, atoms, sk, rk)))
        (kp, sp), rest = readings[0], readings[1:]
        kn, sn = rest[0]
        if any(K.key(k) != K.key(kn) or src != sn for k, src in rest):
            self.fail(f"{prim.label} of values that may be Python or NumPy scalars", n)
        if K.key(kp) == K.key(kn):
            k = kp
        else:
            k = K.either_of(kp, kn, names[0])
            if k is None:
                self.fail(f"{prim.label} gives {K.describe(kp)} or {K.describe(kn)}", n)
            k = K.Either(k.py, k.np, names)
        if sp == sn:
            src = sp
        elif "_ck_" in sp or "_py_int" in sp:
            src = sp  # a Python-int overflow falls back to the interpreter, which also covers the NumPy reading
        elif "_py_" in sp:
            src = sp.replace("_py_", "_amb_")  # a zero divisor falls back: raise or inf depends on the type
        else:
            self.fail(f"{prim.label} of a value that may be a Python or a NumPy scalar", n)
        if "_ck_" in src or "_amb_" in src or "_py_int" in src:
            self.checked = True
        inexact = low.inexact and not K.is_int(k)
        return src, k, tainted or inexact

    def array_operands(self, n, atoms, ks, k):
        """The operands of array arithmetic in other dtypes than float64/int64/bool (float32, small ints), cast to
        the dtype NumPy computes in: Numba promotes an array with a scalar, or arrays of two dtypes, otherwise
        (float32 * 0.1 is float64 there, int32 * float32 float32), so every array must have that dtype already
        and scalars are cast to it (a Python int checked to fit, as NumPy raises when it does not). The result
        must have that dtype too (or be a comparison's bool): Numba divides int8/int16 arrays into float32 and
        takes their sqrt in float32, where NumPy gives float64 and float16."""
        try:
            common = np.result_type(*[x.dtype if type(x) is np.ndarray or isinstance(x, np.generic) else x
                                      for x in ks])
        except TypeError:
            self.fail("operands without a common dtype", n)
        if common.kind not in "biuf":
            self.fail(f"array arithmetic in {common}", n)
        if any(type(x) is np.ndarray and x.dtype.kind != common.kind for x in ks):
            self.fail(f"array arithmetic mixing {' and '.join(sorted({K.describe(x) for x in ks}))} "
                      "(Numba promotes them otherwise)", n)
        # a narrower array of the same kind is cast first, as NumPy's loop casts it (float32 with float64: an
        # exact widening, the same in every engine)
        atoms = [f"{a}.astype(np.{common.name})" if type(x) is np.ndarray and x.dtype != common else a
                 for a, x in zip(atoms, ks)]
        if type(k) is np.ndarray and k.dtype not in (common, np.bool_):
            self.fail(f"{n.prim.rsplit('.', 1)[-1]} of {common} arrays giving {k.dtype} (Numba's dtype differs)", n)
        return [self.weak_cast(a, x, common, arg) if K.is_scalar(x) and np.asarray(x).dtype != common else a
                for a, x, arg in zip(atoms, ks, n.args)]

    def weak_cast(self, atom, x, dtype, node=None):
        """The source of scalar operand ``atom`` (kind ``x``) cast to ``dtype``, as NumPy converts it: a Python int
        to a small int dtype only when it fits (else NumPy raises OverflowError: the kernel stops, to rerun
        interpreted)."""
        name = "bool_" if dtype == np.bool_ else dtype.name
        if type(x) is int and dtype.kind in "iu" and dtype != np.int64:
            info = np.iinfo(dtype)
            if isinstance(node, ir.Const) and info.min <= node.value <= info.max:
                return f"np.{name}({atom})"
            self.checked = True
            return f"np.{name}(_ck_fit({atom}, {info.min}, {info.max}))"
        return f"np.{name}({atom})"

    def int_power(self, n, k):
        """NumPy raises on integers to negative integer powers; Numba gives 0: only constant exponents >= 0."""
        if not rule(n.prim, "powers"):
            return
        ints = isinstance(k, np.integer) or (type(k) is np.ndarray and k.dtype.kind in "iu")
        e = n.args[1] if len(n.args) > 1 else None
        if ints and not (isinstance(e, ir.Const) and type(e.value) is int and e.value >= 0):
            self.fail("an integer power with an exponent that may be negative (NumPy raises, Numba gives 0)", n)

    def small_shift(self, n, k) -> bool:
        """The shift count is a constant in [0, width of the result): every engine shifts alike."""
        if type(k) is int:
            width = 64
        elif type(k) is np.ndarray or isinstance(k, np.integer):
            width = k.dtype.itemsize * 8
        else:
            return False
        c = n.args[1] if len(n.args) > 1 else None
        return isinstance(c, ir.Const) and type(c.value) is int and 0 <= c.value < width

    def shift(self, n, atoms, k):
        """The source of a shift by a count that may be outside [0, width), as Python or NumPy shift."""
        if type(k) is int:  # Python: << is checked for overflow (_ck_lshift, the pyint path)
            self.checked = True
            return f"_ck_rshift({atoms[0]}, {atoms[1]})"
        if not (isinstance(k, np.int64) or (type(k) is np.ndarray and k.dtype == np.int64)):
            self.fail(f"a shift of {K.describe(k)} by a count that may reach its width", n)
        op = f"{rule(n.prim, 'shifts')[0]}shift"
        return f"_np_{op}_{'a' if type(k) is np.ndarray else 's'}({atoms[0]}, {atoms[1]})"

    def arith(self, n, low, atoms, ks, k):
        """The operation's source with the casts and checks that keep NumPy's/Python's semantics."""
        if low.divides and any(type(x) is complex or isinstance(x, np.complexfloating) or
                                        (type(x) is np.ndarray and x.dtype.kind == "c") for x in ks) and \
                any(isinstance(x, np.generic) or type(x) is np.ndarray for x in ks):
            # NumPy gives inf/nan for a complex division by zero; Numba raises ZeroDivisionError whatever the
            # error model (Python's complex numbers alone raise too, and stay allowed)
            self.fail("a division of NumPy complex numbers (Numba raises at zero, NumPy gives inf/nan)", n)
        self.int_power(n, k)
        if low.shifts and not (type(k) is int and low.shifts == "left") and not self.small_shift(n, k):
            return self.shift(n, atoms, k)
        arrays = [x for x in ks + [k] if type(x) is np.ndarray]
        if arrays:
            if any(a.dtype not in (np.float64, np.int64, np.bool_) for a in arrays) or \
                    any(K.is_scalar(x) and type(x) not in K.PLAIN for x in ks):
                atoms = self.array_operands(n, atoms, ks, k)
            if low.divides == "floor" and type(k) is np.ndarray and k.dtype.kind == "i":
                return f"_np_floordiv_a({atoms[0]}, {atoms[1]})"
            return low.source(atoms)
        py = all(type(x) in (int, float, bool) for x in ks)
        if type(k) is int and low.pyint and not low.powers:
            b = self.bound(n)
            if b is not None and b < SAFE:
                return low.source(atoms)  # bounded far below 2**63: no check (index arithmetic: i + 1)
            if self.nonneg and Signs(self.nonneg, self._leaf_nodes).safe(n):
                return low.source(atoms)  # x - 1 with x >= 0
        if type(k) is int and low.pyint:
            if low.powers and not (isinstance(n.args[1], ir.Const) and n.args[1].value >= 0):
                self.fail("a Python int raised to a power that may be negative", n)
            self.checked = True
            return f"{low.pyint}({', '.join(atoms)})"
        if py and low.pyscalar:
            self.checked = True  # its helper stops the kernel (_Overflow) where Python raises: the arrays go back
            return f"{low.pyscalar}({', '.join(atoms)})"
        if py and low.powers == "python" and float in map(type, ks) and not (
                isinstance(n.args[1], ir.Const) and type(n.args[1].value) is int and n.args[1].value >= 0):
            self.fail("a Python float power with an exponent that may be negative or fractional", n)
        if all(type(x) in K.PLAIN for x in ks) and type(k) in K.PLAIN:
            if low.divides == "floor" and type(k) is np.int64:
                return f"_np_floordiv_s({atoms[0]}, {atoms[1]})"
            src = low.source(atoms)
            return f"np.bool_({src})" if isinstance(k, np.bool_) and not lookup(n.prim).comparison else src
        # NumPy computes in the promoted dtype of the operands (Python scalars are weak): cast them to it;
        # Python functions (math.*) take doubles
        if type(k) in (int, float, bool):
            common = np.dtype(np.int64 if type(k) is int else np.float64)
        else:
            try:
                common = np.result_type(*[x if not isinstance(x, np.generic) else x.dtype for x in ks])
            except TypeError:
                self.fail("operands without a common dtype", n)
            if common.kind in "iu" and common != np.int64 and int in map(type, ks) and lookup(n.prim).comparison:
                common = np.dtype(np.int64)  # NumPy 2 compares a Python int with a small int exactly
        # NEP 50: a Python int takes a small int dtype, raising OverflowError when it does not fit (``weak_cast``)
        cast = [self.weak_cast(a, x, common, arg) if not isinstance(x, np.generic) or x.dtype != common else a
                for a, x, arg in zip(atoms, ks, n.args)]
        src = low.source(cast)
        if low.divides == "floor" and isinstance(k, np.signedinteger):
            src = f"_np_floordiv_s({cast[0]}, {cast[1]})"
        rk = ("bool_" if k.dtype == np.bool_ else k.dtype.name) if isinstance(k, np.generic) else type(k).__name__
        return f"np.{rk}({src})" if isinstance(k, np.generic) else f"{rk}({src})"

SMALL = 1 << 40  # a Python int argument below this (checked per call) is "small"


def lower(loop, params, kinds: dict, outputs, small=frozenset(), functions=None) -> tuple[str, bool, dict, frozenset]:
    """(kernel source, whether it uses helpers that fall back to the interpreter, the Either kinds of outputs
    whose flags follow them, the arrays indexed into views) for ``loop`` over ``params`` of ``kinds``, the Python
    ints named in ``small``
    being below SMALL in magnitude (the caller checks it per call); Decline."""
    src, low = settle(Lowerer, loop, params, kinds, outputs, small, functions=functions)
    return src, low.checked, {o: low.widened[o] for o in low.flag_outputs}, frozenset(low.viewed)


def settle(cls, node, params, kinds: dict, outputs, small=frozenset(), **extra):
    """(source, the lowerer that made it) of ``node`` lowered by a ``cls`` (Lowerer or a subclass taking
    ``extra``), iterated until taints and Either kinds settle; Decline."""
    written = {s.name for s in ir.walk(node) if isinstance(s, (ir.StoreName, ir.SetVar))}
    bounds = {name: SMALL for name in small if name not in written}
    steps = counters(node, set(params), small)
    bounds.update({name: COUNTER for name in steps})
    tainted, arrays, widened, manual = frozenset(), False, {}, True
    for _ in range(12):  # taint and Either kinds found late flow to the loop's start: iterate to a fixpoint
        low = cls(node, kinds, outputs, tainted, arrays, dict(widened), dict(bounds), manual, steps, **extra)
        try:
            src = low.source(params)
        except Widen as w:
            widened[w.name] = w.either
            continue
        except NeedBoundscheck:
            manual = False
            continue
        if low.taint <= tainted and low.arrays_tainted == arrays:
            return src, low
        tainted, arrays = tainted | frozenset(low.taint), arrays or low.arrays_tainted
    raise Decline("kinds or inexact results do not settle around the loop")


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


def _renamed(node, names):
    """``node`` with its variables (of the called function: depth 0) renamed by ``names``."""
    if isinstance(node, ir.Var) and node.depth == 0 and node.name in names:
        return dataclasses.replace(node, name=names[node.name])
    if isinstance(node, ir.Node):
        return dataclasses.replace(node, **{f.name: _renamed(getattr(node, f.name), names)
                                            for f in dataclasses.fields(node)})
    if type(node) is tuple:
        return tuple(_renamed(x, names) for x in node)
    return node


def _is_np(k) -> bool:
    return isinstance(k, np.generic)


_NUMBERED = re.compile(r"\b__px[a-z]+\d+\b")  # the lowerer's numbered temporaries (nests, reductions)


def _renumbered(lines):
    """``lines`` with each numbered temporary renamed by its order of first appearance."""
    names: dict = {}
    return [_NUMBERED.sub(lambda m: names.setdefault(m.group(0), f"__px#{len(names)}"), line) for line in lines]
