"""IR → Python source: each program compiled once to a factory of Python functions that run per call over an
Evaluation.

Each IR function becomes a Python ``def`` (nested lambdas/comprehensions become nested ``def``s, so Python's own
closures give the scoping the translator resolved). Primitive calls become ``call(prim, loc, args)`` on the
Evaluation, which decides inline-or-task and returns a value or a Future; scalar arithmetic, comparisons and
basic indexing on values (not futures) run as plain Python bytecode, so scalar loops pay little for compiling
(torch.fx generates Python source from its graph the same way). Only data-dependent conditions and loop
iterables wait on a future. Every generated line maps back to the SourceLoc of its IR node: an exception raised
by plain bytecode becomes an ExecutionError naming the user's line, like a failing kernel does.
"""
from __future__ import annotations

import itertools
import math
import time

import numpy as np
from phylanx_py.primitives import lookup
from phylanx_py.primitives.fused import FUSE_MIN_ELEMENTS
from phylanx_py.primitives.rowdot import MIN_ELEMENTS as ROWDOT_MIN_ELEMENTS

from phylanx_py import ir
from phylanx_py.errors import RAISED_AS_IS

from . import reuse
from .codegen_statements import StatementEmitter, _ident, _is_literal, _plain_tuple, _stores
from .evaluation import CallSite
from .executors import FUTURES
from .kinds import TYPES as KIND_TYPES
from .loop_tiers import UNBOUND
from .values import PxFunction, call_value, read_global

# Values that plain bytecode handles inline: Python and NumPy scalars.
SCALARS = frozenset({int, float, bool, complex, np.float64, np.float32, np.int64, np.int32, np.bool_,
                     np.complex128, np.uint8, np.int8, np.int16, np.uint16, np.uint32, np.uint64, np.float16})
# Receivers and keys for which ``a[k]`` is basic indexing: O(1), safe inline whatever the array's size.
SEQUENCES = frozenset({list, tuple, str, dict, range, np.ndarray})
KEYS = frozenset({int, slice, str, np.int64, np.int32, type(None), type(Ellipsis), bool})


def _plain_argument(value) -> bool:
    """A scalar, None, or a tuple/list of scalars (a shape, axes): an argument a view function takes inline (a
    future inside a tuple, ``np.reshape(a, (n, -1))`` with ``n`` a task's, goes through the Evaluation)."""
    t = type(value)
    if t in SCALARS or value is None:
        return True
    return (t is tuple or t is list) and all(type(v) in SCALARS for v in value)


class Generator(StatementEmitter):
    """Emits the Python source of a program; see the module docstring."""

    def __init__(self, program: ir.Program, namespaces: dict, fast: bool = True, native: bool = True):
        self.program = program
        self.fast = fast
        self.lines: list[str] = []
        self.linemap: dict[int, tuple] = {}
        self.consts: dict[str, object] = {
            "__pxr_F": FUTURES, "__pxr_S": SCALARS, "__pxr_SEQ": SEQUENCES, "__pxr_KEYS": KEYS,
            "__pxr_type": type, "__pxr_Exception": Exception, "__pxr_PXE": RAISED_AS_IS,
            "__pxr_PxFunction": PxFunction, "__pxr_call_value": call_value,
            "__pxr_global": read_global, "__pxr_list": list, "__pxr_dict": dict, "__pxr_set": set,
            "__pxr_MUT": (list, dict, set), "__pxr_ndarray": np.ndarray, "__pxr_fusemin": FUSE_MIN_ELEMENTS,
            "__pxr_K": KIND_TYPES, "__pxr_rowmin": ROWDOT_MIN_ELEMENTS, "__pxr_clock": time.perf_counter,
            "__pxr_NameError": NameError, "__pxr_UNBOUND": UNBOUND, "__pxr_plain": _plain_argument,
            "__pxr_into": reuse.into, "__pxr_into1": reuse.into1,
            "__pxr_reusemin": reuse.REUSE_MIN_ELEMENTS,
        }
        self._const_ids: dict[int, str] = {}
        self.namespaces = {}
        for module, ns in namespaces.items():
            self.namespaces[module] = self.const(ns, "ns")
        self.fnames = {name: f"__pxf{i}" for i, (name, _) in enumerate(program.functions)}
        self.defaults = dict(program.defaults)
        self.kwdefaults = dict(program.kwdefaults)
        self.tmp = itertools.count()
        self.indent = 1
        self.leaf_atoms: list[list[str]] = []
        # Atoms known to hold a tuple of this length (tuple displays, and the single-assignment temps the
        # canonicaliser stores them in): ``A[i, j]`` tests the items' types instead of taking the slow path.
        self.tuple_len: dict[str, int] = {}
        self.plain_atoms: set[str] = set()  # constants that are tuples of scalars (see e_Tuple)
        # whether loops may go to tiers that run native code (loop_tiers.py): not in a profiled build (every
        # primitive call goes through the Evaluation there) nor where the caller says not (an SPMD rank's program)
        self.native = native and fast
        self.native_loops: list = []  # those tiers' loops (``native_code``), for code.py and the benchmarks
        self.loop_hooks: list = []  # every loop's HandOver (loop_tiers.py), for explain()
        self.raw_namespaces = namespaces
        self.fn_stack: list = []
        self.walrus: list = [set()]  # per function being emitted: the names its ``:=`` bind (``function``)
        self.native_depth = 0

    # ---- emission helpers ------------------------------------------------------------------------------
    def emit(self, text: str, loc=None, label: str = "python"):
        self.lines.append("    " * self.indent + text)
        if loc is not None and loc.lineno:
            self.linemap[len(self.lines)] = (loc, label)

    def temp(self) -> str:
        return f"__pxt{next(self.tmp)}"

    def const(self, value, kind="k") -> str:
        if value is None or isinstance(value, bool):
            return repr(value)
        if type(value) is int or type(value) is str:
            return repr(value)
        if type(value) is float and math.isfinite(value):
            return repr(value)
        key = id(value)
        name = self._const_ids.get(key)
        if name is None or self.consts.get(name) is not value:
            name = f"__pxr_{kind}{len(self.consts)}"
            self.consts[name] = value
            self._const_ids[key] = name
        return name

    def site(self, prim: str, loc) -> str:
        """A CallSite constant: the primitive at this location (it keeps its own timings)."""
        return self.const(CallSite(lookup(prim), loc), "s")

    # ---- program and functions -------------------------------------------------------------------------
    def generate(self) -> str:
        self.lines.append("def __pxr_factory(__pxr_ev):")
        self.emit("__pxr_call = __pxr_ev.call")
        self.emit("__pxr_wait = __pxr_ev.wait")
        self.emit("__pxr_pending = __pxr_ev.pending")
        self.emit("__pxr_lim = __pxr_ev.inline_elements")
        for name, fn in self.program.functions:
            defaults = tuple(self.const(c.value) for c in self.defaults.get(name, ()))
            kwdefaults = {k: self.const(c.value) for k, c in self.kwdefaults.get(name, ())}
            self.function(fn, self.fnames[name], name, defaults, kwdefaults)
        table = ", ".join(f"{name!r}: {ident}" for name, ident in self.fnames.items())
        self.emit(f"return {{{table}}}")
        return "\n".join(self.lines) + "\n"

    def function(self, fn: ir.Function, ident: str, qualname: str, defaults, kwdefaults):
        params = list(fn.params)
        first_default = len(params) - len(defaults)
        parts = [p if i < first_default else f"{p}={defaults[i - first_default]}" for i, p in enumerate(params)]
        if fn.kwonly:
            parts.append("*")
            parts += [f"{k}={kwdefaults[k]}" if k in kwdefaults else k for k in fn.kwonly]
        self.emit(f"def {ident}({', '.join(parts)}):", fn.loc, qualname)
        self.fn_stack.append(fn)
        # names an assignment expression binds (``x := ...``, the user's, not the translator's temporaries): a read
        # of one is copied when read, as Python reads it, since a ``:=`` later in the same expression, computed
        # before the operation that reads the name, would change it (``x + f(x := x + 1)`` read the new x)
        self.walrus.append({x.name for x in ir.walk(fn.body) if isinstance(x, ir.SetVar) and x.depth == 0 and
                            not x.name.startswith("__px")})
        self.indent += 1
        outer_stores, own_stores = _stores(fn.body)
        if outer_stores:
            self.emit(f"nonlocal {', '.join(sorted(outer_stores))}")
        # Names a nested function assigns through ``nonlocal`` must be bound here at compile time too.
        unbound = [n for n in fn.locals if n not in own_stores and n not in params and n not in fn.kwonly]
        if unbound:
            self.emit("if False:")
            self.emit(f"    {' = '.join(unbound)} = None")
        self.emit("try:")
        self.indent += 1
        start = len(self.lines)
        self.stmt(fn.body)
        if len(self.lines) == start:
            self.emit("pass")
        self.indent -= 1
        self.emit("except __pxr_PXE:")
        self.emit("    raise")
        self.emit("except __pxr_Exception as __pxr_e:")
        # chained to what failed: the exception itself, or inside a fused group called inline the operation's
        # own (an OperationFailed names it), as run_primitive chains it
        self.emit("    __pxr_err = __pxr_fail(__pxr_e)")
        self.emit("    raise __pxr_err from __pxr_err.__cause__")
        self.indent -= 1
        self.fn_stack.pop()
        self.walrus.pop()
        self.emit(f"{ident}.__qualname__ = {ident}.__name__ = {qualname!r}")

    def nested(self, lam: ir.Lambda) -> str:
        """Emit a nested def for a lambda/closure; returns its identifier."""
        defaults = tuple(self.expr(d) for d in lam.defaults)
        kwdefaults = {k: self.expr(v) for k, v in lam.kwdefaults}
        ident = f"__pxl{next(self.tmp)}"
        self.function(lam.function, ident, lam.function.name, defaults, kwdefaults)
        return ident

    # ---- expressions: emit what they need, return an atom (a name or a literal) ------------------------
    def expr(self, n) -> str:
        return getattr(self, "e_" + type(n).__name__)(n)

    def assign_temp(self, text: str, loc, label) -> str:
        t = self.temp()
        self.emit(f"{t} = {text}", loc, label)
        return t

    def e_Const(self, n):
        name = self.const(n.value)
        if type(n.value) is tuple and _plain_tuple(n.value):
            self.plain_atoms.add(name)  # (a shape a gradient recorded: the guards need no test of it)
        return name

    def e_Var(self, n):
        if n.depth == 0 and n.name in self.walrus[-1]:
            return self.assign_temp(_ident(n.name), n.loc, n.name)
        return _ident(n.name)

    def e_Global(self, n):
        ns = self.namespaces[n.module]
        return self.assign_temp(f"__pxr_global({ns}, {n.name!r})", n.loc, n.name)

    def e_FuncRef(self, n):
        return self.assign_temp(f"__pxr_PxFunction({self.fnames[n.name]}, __pxr_ev)", n.loc, n.name)

    def e_Lambda(self, n):
        ident = self.nested(n)
        return self.assign_temp(f"__pxr_PxFunction({ident}, __pxr_ev)", n.loc, "lambda")

    def e_Call(self, n):
        prim = lookup(n.prim)
        args = [self.expr(a) for a in n.args]
        kwargs = [(k, self.expr(v)) for k, v in n.kwargs]
        loc, label = n.loc, prim.label
        argt = "(" + "".join(f"{a}, " for a in args) + ")"
        site = self.site(n.prim, loc)
        slow = f"__pxr_call({site}, {argt}" + \
            (f", {{{', '.join(f'{k!r}: {v}' for k, v in kwargs)}}})" if kwargs else ")")
        fast = self.fast_path(n.prim, prim, args, kwargs) if self.fast else None
        if fast is None and self.fast:
            fast = self.direct_path(prim, site, args, kwargs)
        if fast is None:
            return self.assign_temp(slow, loc, label)
        test, inline = fast
        if not kwargs:
            inline = self.reusing(prim, n.args, args, inline)
        return self.assign_temp(f"({inline}) if {test} else {slow}" if test else inline, loc, label)

    def key_test(self, key: str) -> str | None:
        """Test that ``key`` is a basic index (int/slice/None/..., or a tuple of them), or None if literal."""
        if _is_literal(key):
            return None
        n = self.tuple_len.get(key)
        if n:
            return " and ".join(f"__pxr_type({key}[{i}]) in __pxr_KEYS" for i in range(n))
        return f"__pxr_type({key}) in __pxr_KEYS"

    def fast_path(self, name, prim, args, kwargs):
        """(test, inline code) for running a call as plain bytecode when ``test`` holds; None if never. The code
        is the primitive's declared inline form (``Primitive.inline``); ``test`` is its guard over the atoms."""
        form = prim.inline
        if form is None or (kwargs and not form.kwargs) or any(k == "out" for k, _ in kwargs):
            return None  # ``out=`` writes into an existing array: an effect, ordered by the Evaluation
        if "{0}" in form.template and not args or "{1}" in form.template and len(args) < 2:
            return None
        keywords = [f"{k}={v}" for k, v in kwargs]
        code = form.template.format(*args, args=", ".join(args + keywords), rest=", ".join(args[1:] + keywords),
                                    kernel=self.const(prim.kernel) if "{kernel}" in form.template else "")
        return self.guard(form.guard, prim, args, [v for _, v in kwargs]), code

    def direct_path(self, prim, site: str, args, kwargs):
        """(test, call) for a pure primitive without an inline form (``nn.conv2d_patches``, the losses): its call
        site run here, as Evaluation.call would run it, when every argument is a scalar, a plain tuple or an
        array within the inline limit (no future, no tiled array). Evaluation.call's checks cost ~3-5 us a
        call: the digits CNN's step makes 13 such calls. None when the Evaluation must decide (effects, ``out=``,
        primitives that see futures or objects as they are)."""
        if prim.effect is not None or prim.local or prim.resolve == "none" or prim.parallel or \
                any(k == "out" for k, _ in kwargs):
            return None
        keywords = [f"{k}={v}" for k, v in kwargs]
        return self.guard("small", prim, args, [v for _, v in kwargs]), f"{site}({', '.join(args + keywords)})"

    def reusing(self, prim, nodes, args: list, inline: str) -> str:
        """``inline`` with the result written into an operand that is a fresh temporary read here only (the
        result of a call in this expression), when runtime/reuse.py finds at run time that nothing else holds
        it and the result has its dtype and shape; else ``inline`` as it is. Element-wise ufuncs of one or two
        operands (``np.add(a, b)``, ``a + b``)."""
        kernel = reuse.ufunc_of(prim)
        if (kernel is None or kernel.signature is not None or kernel.nout != 1 or kernel.nin != len(args)
                or len(args) > 2):
            return inline  # (a generalised ufunc such as matmul is no element-wise map: its output is no operand)
        k = self.const(kernel)
        for i in reversed(range(len(args))):  # the first fresh operand that can take the result is tried first
            d = args[i]
            if not isinstance(nodes[i], (ir.Call, ir.Fused)) or _is_literal(d) or args.count(d) > 1:
                continue
            test = f"__pxr_into1({k}, {d})" if len(args) == 1 else f"__pxr_into({k}, {d}, {args[1 - i]}, {i == 0})"
            # (small arrays cost less to allocate than the test: only from REUSE_MIN_ELEMENTS on)
            test = f"__pxr_type({d}) is __pxr_ndarray and {d}.size >= __pxr_reusemin and {test}"
            inline = f"({k}({', '.join(args)}, out={d}) if {test} else {inline})"
        return inline

    def guard(self, kind: str, prim, args: list, values: list) -> str:
        """The run-time test of an inline form's guard (see ``primitives.Inline``) over the argument atoms."""
        not_future = lambda a: None if _is_literal(a) else f"__pxr_type({a}) not in __pxr_F"
        scalar = lambda a: None if _is_literal(a) else f"__pxr_type({a}) in __pxr_S"
        # Small arrays run inline too (the direct-execution rule of evaluation.py, checked in bytecode).
        small = lambda a: None if _is_literal(a) or a in self.plain_atoms else \
            f"(__pxr_type({a}) in __pxr_S or (__pxr_type({a}) is __pxr_ndarray and {a}.size <= __pxr_lim))"
        both = lambda tests: " and ".join(t for t in tests if t) or "True"
        if kind == "small":
            return both(small(a) for a in args + values)
        if kind == "scalar":
            return both(scalar(a) for a in args)
        if kind in ("value", "lazy"):
            return both(not_future(a) for a in args)
        if kind == "view":  # a view of a NumPy array (any size), its other arguments scalars or tuples of them
            return both([None if _is_literal(args[0]) else f"__pxr_type({args[0]}) is __pxr_ndarray"] +
                        [None if _is_literal(a) or a in self.plain_atoms else f"__pxr_plain({a})"
                         for a in args[1:] + values])
        if kind == "index":
            obj, key = args
            return both([f"__pxr_type({obj}) in __pxr_SEQ", self.key_test(key)])
        if kind == "inplace":
            # ``x op= v``: on scalars a new value; on an array with no task pending that might read it, in
            # place (what the Evaluation's ordered effect does after its barrier)
            target, value = args
            scalars = both([scalar(target), scalar(value)])
            array = both([f"__pxr_type({target}) is __pxr_ndarray", "not __pxr_pending",
                          None if _is_literal(value) else
                          f"(__pxr_type({value}) in __pxr_S or __pxr_type({value}) is __pxr_ndarray)"])
            return f"({scalars}) or ({array})"
        if kind == "receiver":
            rest = [] if prim.resolve == "receiver" else [not_future(a) for a in args[1:]]
            return both([f"__pxr_type({args[0]}) in __pxr_MUT", "not __pxr_pending"] + rest)
        raise ValueError(f"unknown inline guard {kind!r} of primitive {prim.name!r}")

    def e_Apply(self, n):
        args = [self.expr(a) for a in n.args]
        kwargs = [(k, self.expr(v)) for k, v in n.kwargs]
        argtext = ", ".join(args + [f"{k}={v}" for k, v in kwargs])
        if isinstance(n.func, ir.FuncRef):
            return self.assign_temp(f"{self.fnames[n.func.name]}({argtext})", n.loc, n.func.name)
        if isinstance(n.func, ir.Lambda):
            ident = self.nested(n.func)
            return self.assign_temp(f"{ident}({argtext})", n.loc, n.func.function.name)
        fn = self.expr(n.func)
        kw = "{" + ", ".join(f"{k!r}: {v}" for k, v in kwargs) + "}"
        return self.assign_temp(f"__pxr_call_value(__pxr_ev, {fn}, ({''.join(a + ', ' for a in args)}), {kw}, "
                                f"{self.const(n.loc, 'l')})", n.loc, "call")

    def resolved(self, atom: str, loc, label) -> str:
        """A temp holding ``atom``'s value (waiting if it is a future): for conditions and iterables."""
        if _is_literal(atom):
            return atom
        return self.assign_temp(f"{atom} if __pxr_type({atom}) not in __pxr_F else __pxr_wait({atom})", loc, label)

    def e_Fused(self, n):
        """Leaves first; then the generated kernel if an input is a large array (or a future), else the same
        expression as ordinary code (scalars, small arrays, lists keep their fast paths and semantics)."""
        leaves = [self.expr(leaf) for leaf in n.leaves]
        t = self.temp()
        # scalars (the common case in scalar loops) fail the first membership test and cost nothing more
        tests = [f"(__pxr_type({a}) not in __pxr_S and ((__pxr_type({a}) is __pxr_ndarray and "
                 f"{a}.size >= __pxr_fusemin) or __pxr_type({a}) in __pxr_F or __pxr_type({a}) in __pxr_K))"
                 for a in dict.fromkeys(leaves) if not _is_literal(a)]
        kind = n.reduce[0] if n.reduce else None
        if kind == "rowdot" and not _is_literal(leaves[0]):
            # the row product pays off from ROWDOT_MIN_ELEMENTS elements of X on (primitives/rowdot.py)
            x = leaves[0]
            tests = [f"((__pxr_type({x}) is __pxr_ndarray and {x}.size >= __pxr_rowmin) or "
                     f"__pxr_type({x}) in __pxr_F or __pxr_type({x}) in __pxr_K)"]
        site = self.site({"sum": "fused.sum", "rowdot": "fused.rowdot", "sum_argmin": "fused.sum_argmin"}.get(
            kind, "fused.elementwise"), n.loc)
        extra = "".join(f"{self.const(v)}, " for v in n.reduce[1:]) if kind in ("sum", "sum_argmin") else ""
        call = (f"__pxr_call({site}, ({self.const(n.spec)}, {self.const(n.locs)}, {extra}"
                f"{''.join(a + ', ' for a in leaves)}))")
        if not self.fast:  # profiled: one node, timed as it runs (the group's kernel, or its reference if small)
            self.emit(f"{t} = {call}", n.loc, "fused")
            return t
        self.leaf_atoms.append(leaves)
        if tests:
            self.emit(f"if {' or '.join(tests)}:", n.loc, "fused")
            self.emit(f"    {t} = {self.fused_inline(n, leaves, call)}", n.loc, "fused")
            self.emit("else:")
            self.indent += 1
        self.emit(f"{t} = {self.expr(n.body)}", n.loc, "fused")
        if tests:
            self.indent -= 1
        self.leaf_atoms.pop()
        return t

    def fused_inline(self, n, leaves: list, call: str) -> str:
        """The group's kernel called here when every leaf is a value the Evaluation would run inline (a scalar, an
        array within the inline limit: what its ``call`` decides, without its checks per call), else ``call``.
        The kernel makes a new array, never writes into a fresh leaf (runtime/reuse.py does for NumPy's ufuncs):
        NumPy runs a Numba ufunc whose output is one of its inputs 5-6x slower than into a new array (its
        overlap path; simplemlp's ReLU gradient on 64x512 float32: 24 us against 4.3, NumPy 2.4, Numba 0.68),
        and glibc hands a freed array of the same size back without faults."""
        if n.reduce:
            return call
        small = [f"(__pxr_type({a}) in __pxr_S or (__pxr_type({a}) is __pxr_ndarray and {a}.size <= __pxr_lim))"
                 for a in dict.fromkeys(leaves) if not _is_literal(a)]
        direct = f"{self.const(lookup('fused.elementwise').kernel)}({self.const(n.spec)}, {self.const(n.locs)}, " + \
            "".join(a + ", " for a in leaves) + ")"
        return f"({direct}) if {' and '.join(small)} else {call}" if small else direct

    def e_Leaf(self, n):
        return self.leaf_atoms[-1][n.index]

    def e_IfExp(self, n):
        t = self.temp()
        c = self.resolved(self.expr(n.cond), n.loc, "if")
        self.emit(f"if {c}:", n.loc, "if")
        self.indent += 1
        self.emit(f"{t} = {self.expr(n.then)}", n.loc, "if")
        self.indent -= 1
        self.emit("else:")
        self.indent += 1
        self.emit(f"{t} = {self.expr(n.orelse)}", n.loc, "if")
        self.indent -= 1
        return t

    def e_BoolOp(self, n):
        t = self.temp()
        depth = 0
        for i, v in enumerate(n.values):
            atom = self.expr(v)
            last = i == len(n.values) - 1
            if last or _is_literal(atom):
                self.emit(f"{t} = {atom}", n.loc, n.op)
            else:
                self.emit(f"{t} = {atom} if __pxr_type({atom}) not in __pxr_F else __pxr_wait({atom})", n.loc, n.op)
            if not last:
                self.emit(f"if {'' if n.op == 'and' else 'not '}{t}:", n.loc, n.op)
                self.indent += 1
                depth += 1
        self.indent -= depth
        return t

    def e_SetVar(self, n):
        value = self.assign_temp(self.expr(n.value), n.loc, "store")  # a copy: later stores don't change it
        self.emit(f"{_ident(n.name)} = {value}", n.loc, "store")
        return value

    def e_List(self, n):
        items = [self.expr(i) for i in n.items]
        return self.assign_temp(f"[{', '.join(items)}]", n.loc, "list")

    def e_Tuple(self, n):
        if n.items and all(isinstance(i, ir.Const) and type(i.value) in (int, float, bool) for i in n.items):
            # a display of constants (axes, a shape) is one constant, as CPython folds it: the inline guards of
            # the calls it goes to then need no test of it (``sum(g, axis=(0,))`` stays inline)
            t = self.const(tuple(i.value for i in n.items))
            self.plain_atoms.add(t)
            self.tuple_len[t] = len(n.items)
            return t
        items = [self.expr(i) for i in n.items]
        t = self.assign_temp("(" + "".join(f"{i}, " for i in items) + ")", n.loc, "make_tuple")
        self.tuple_len[t] = len(items)
        return t

    def e_Dict(self, n):
        keys = [self.expr(k) for k in n.keys]
        values = [self.expr(v) for v in n.values]
        pairs = ", ".join(f"__pxr_wait({k}): {v}" for k, v in zip(keys, values))
        return self.assign_temp(f"{{{pairs}}}", n.loc, "dict")


__all__ = ["Generator", "KEYS", "SCALARS", "SEQUENCES"]
