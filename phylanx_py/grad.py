"""``px.grad`` and ``px.value_and_grad``: reverse-mode differentiation that yields an execution tree.

The function (plain, or the Python function behind a ``@compile``) is traced once for a call signature (trace.py):
Python runs its control flow, every primitive is recorded. Reverse mode then walks the recording backwards and calls
each primitive's gradient rule (primitives/vjp.py) on traced values, which records the gradient as primitives too.
The recording becomes an ``ir.Program`` (forward and backward, one function, file:line:col on every node) that goes
through the usual passes (constant folding, element-wise fusion) and runs on the current runtime, locally, on Dask
or on tiled arrays, like any compiled function. Later calls with the same signature (argument structure, array
shapes and dtypes, the values of int/bool/str arguments) reuse the tree without tracing.

A function whose control flow read a traced value (``if loss > 1``, ``while err > tol``) is re-traced at every call:
its tree holds the branches that call took. Arrays the function reads from outside (globals, closures) enter the
tree as the same objects, so changing them in place is seen and rebinding a global is not (as with ``jax.jit``).
"""
from __future__ import annotations

import inspect
import numbers
import re
import threading

import numpy as np

from phylanx_py.primitives import vjp

from . import ir
from .passes.rewrite import map_nodes
from .source import UNKNOWN
from .trace import Trace, TraceError, Tracer

# ---- argument trees ----------------------------------------------------------------------------------------


def flatten(tree, leaves=None):
    """(leaves, structure) of nested dicts/lists/tuples; the structure rebuilds them with ``unflatten``."""
    if leaves is None:
        leaves = []
    if isinstance(tree, dict):
        return leaves, ("dict", tuple(tree), tuple(flatten(v, leaves)[1] for v in tree.values()))
    if isinstance(tree, (list, tuple)) and not hasattr(tree, "_fields"):
        return leaves, (type(tree).__name__, len(tree), tuple(flatten(v, leaves)[1] for v in tree))
    leaves.append(tree)
    return leaves, None


def leaf_names(prefix: str, structure) -> list[str]:
    """Readable names of the leaves ``flatten`` yields, in its order: ``params["W1"]`` -> ``params_W1``."""
    if structure is None:
        return [prefix]
    kind, meta, parts = structure
    keys = meta if kind == "dict" else range(meta)
    out = []
    for key, part in zip(keys, parts):
        out += leaf_names(f"{prefix}_{re.sub(r'[^0-9A-Za-z_]', '_', str(key))}", part)
    return out


def unflatten(structure, leaves):
    it = iter(leaves)

    def build(s):
        if s is None:
            return next(it)
        kind, meta, parts = s
        items = [build(p) for p in parts]
        if kind == "dict":
            return dict(zip(meta, items))
        return items if kind == "list" else tuple(items)
    return build(structure)


def _is_float_value(v) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, (float, np.floating)):
        return True
    dtype = getattr(v, "dtype", None)
    return dtype is not None and hasattr(v, "shape") and np.issubdtype(dtype, np.inexact)


def _is_array_value(v) -> bool:
    return hasattr(v, "shape") and hasattr(v, "dtype") and not isinstance(v, np.generic)


def _is_data(v, diff: bool) -> bool:
    """Does this leaf enter the tree as a parameter (differentiated, a float or an array), not as a constant?"""
    return diff or _is_float_value(v) or _is_array_value(v)


def _leaf_key(v, diff):
    """What a leaf contributes to the signature: shapes and dtypes of data, the value of static arguments."""
    if _is_array_value(v):
        return ("array", type(v).__name__, tuple(v.shape), str(v.dtype))
    if isinstance(v, (float, np.floating, complex)) or (diff and isinstance(v, numbers.Number)):
        return ("scalar", type(v).__name__)
    try:
        hash(v)
    except TypeError:
        return ("object", id(v))
    return ("static", type(v).__name__, v)


# ---- the gradient program ----------------------------------------------------------------------------------
class GradProgram:
    """One traced signature: the Program (value, gradients, aux outputs) and how to call it."""

    def __init__(self, program: ir.Program, consts: list, out_structure, guards):
        self.program, self.consts, self.out_structure, self.guards = program, consts, out_structure, guards
        self._code = None
        self._lock = threading.Lock()

    def __getstate__(self):  # the compiled code and the lock stay behind; the tree travels and compiles there
        return {"program": self.program, "consts": self.consts, "out_structure": self.out_structure,
                "guards": self.guards}

    def __setstate__(self, state):
        self.__init__(**state)

    def run(self, data_leaves):
        from .decorator import evaluate_program, program_code

        with self._lock:
            if self._code is None:
                self._code = program_code(self.program)
        flat = evaluate_program(self._code, tuple(data_leaves) + tuple(self.consts))
        return unflatten(self.out_structure, list(flat))


class _Builder:
    """Turns a Trace into IR statements: arrays met as plain values become extra (hidden) parameters."""

    def __init__(self):
        self.consts: list = []
        self.const_names: list[str] = []
        self._const_ids: dict[int, str] = {}

    def node(self, x, loc):
        if type(x) is Tracer:
            return ir.Var(x.name, 0, loc)
        if isinstance(x, list):
            return ir.List(tuple(self.node(v, loc) for v in x), loc)
        if isinstance(x, tuple):
            return ir.Tuple(tuple(self.node(v, loc) for v in x), loc)
        if isinstance(x, dict):
            return ir.Dict(tuple(ir.Const(k, loc) for k in x), tuple(self.node(v, loc) for v in x.values()), loc)
        if isinstance(x, slice):
            parts = (x.start, x.stop, x.step)
            if any(type(p) is Tracer for p in parts):
                return ir.Call("python.slice", tuple(self.node(p, loc) for p in parts), (), loc)
            return ir.Const(x, loc)
        if _is_array_value(x):
            name = self._const_ids.get(id(x))
            if name is None:
                name = self._const_ids[id(x)] = f"__c{len(self.consts)}"
                self.consts.append(x)
                self.const_names.append(name)
            return ir.Var(name, 0, loc)
        return ir.Const(x, loc)


def _uses(records, out_nodes):
    """The statements needed for ``out_nodes`` (dead ones dropped) and how often each name is read by them."""
    counts: dict[str, int] = {}

    def read(node):
        for v in ir.walk(node):
            if isinstance(v, ir.Var):
                counts[v.name] = counts.get(v.name, 0) + 1

    for n in out_nodes:
        read(n)
    keep = []
    for rec, call in reversed(records):
        if rec.out.name in counts:  # read by an output or a statement kept after it
            keep.append((rec, call))
            read(call)
    keep.reverse()
    return keep, counts


def _substitute(node, inline):
    return map_nodes(node, lambda n: inline.get(n.name, n) if isinstance(n, ir.Var) else n)


def build_program(name, trace: Trace, params: list[str], outputs: list, builder: _Builder, loc) -> ir.Program:
    """The Program ``name(*params, *consts) -> tuple(outputs)`` of the recorded statements it needs."""
    calls = [(rec, ir.Call(rec.prim, tuple(builder.node(a, rec.loc) for a in rec.args),
                           tuple((k, builder.node(v, rec.loc)) for k, v in rec.kwargs.items()), rec.loc))
             for rec in trace.records]
    out_nodes = [builder.node(o, loc) for o in outputs]
    keep, counts = _uses(calls, out_nodes)
    # A value read once is written into its reader (an expression tree, as the user wrote it), so element-wise
    # chains of the gradient fuse into one kernel like those of compiled code.
    inline: dict[str, ir.Node] = {}
    stmts = []
    for rec, call in keep:
        call = _substitute(call, inline)
        if counts.get(rec.out.name, 0) == 1:
            inline[rec.out.name] = call
        else:
            stmts.append(ir.Assign(ir.StoreName(rec.out.name, 0, rec.loc), call, rec.loc))
    result = ir.Tuple(tuple(_substitute(n, inline) for n in out_nodes), loc)
    stmts.append(ir.Return(result, loc))
    all_params = tuple(params) + tuple(builder.const_names)
    local_names = tuple(sorted(set(all_params) | {s.target.name for s in stmts if isinstance(s, ir.Assign)}))
    fn = ir.Function(name, all_params, ir.Block(tuple(stmts), loc), local_names, (), loc)
    return ir.Program(name, ((name, fn),))


# ---- the public functions --------------------------------------------------------------------------------
class Grad:
    """``px.grad(f)`` / ``px.value_and_grad(f)``: call it like ``f``."""

    def __init__(self, fn, argnums=0, *, with_value=False, has_aux=False):
        from .decorator import CompiledFunction

        if isinstance(fn, CompiledFunction):
            fn = fn.__wrapped__
        if not callable(fn):
            raise TypeError(f"px.grad takes a function, not {type(fn).__name__}")
        self.fn = fn
        self.argnums = argnums
        self.with_value, self.has_aux = with_value, has_aux
        self._cache: dict = {}
        self._lock = threading.Lock()
        self.last: GradProgram | None = None
        self.__name__ = f"grad_{getattr(fn, '__name__', 'f')}"
        self.__doc__ = getattr(fn, "__doc__", None)

    def __getstate__(self):  # traced trees are per process: the function travels, its cache does not
        state = dict(self.__dict__)
        state["_cache"], state["_lock"], state["last"] = {}, None, None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def tree(self) -> ir.Program:
        """The execution tree of the last call (forward and backward): print it, draw it (``px.visualize``)."""
        if self.last is None:
            name = getattr(self.fn, "__name__", "f")
            raise ValueError(
                f"the tree of px.grad({name}) depends on the arguments' shapes, so it exists once this object has "
                f"been called or traced: keep the object and call it, `g = px.grad({name}); g(*args); "
                f"print(g.tree)`, or trace without running, `print(g.trace(*args))`")
        return self.last.program

    def trace(self, *args, **kwargs) -> ir.Program:
        """The tree for these arguments (forward and backward), traced but not run; ``g.tree`` is it afterwards."""
        self.last = self._program(args, kwargs)[0]
        return self.last.program

    def to_dot(self, profile=None) -> str:
        from .visualize import to_dot

        return to_dot(self.tree, profile)

    def visualize(self, path, profile=None) -> str:
        """Draw the last call's tree to ``path`` (.svg/.png/.pdf with graphviz's dot, .dot, or an .html report)."""
        from .visualize import visualize

        return visualize(self.tree, path, profile)

    def _arg_names(self, nargs) -> list[str]:
        """The function's positional parameter names (``arg3`` past them, or when there is no signature)."""
        try:
            ps = [p.name for p in inspect.signature(self.fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            ps = []
        return [ps[i] if i < len(ps) else f"arg{i}" for i in range(nargs)]

    def _argnums(self, nargs):
        nums = (self.argnums,) if isinstance(self.argnums, int) else tuple(self.argnums)
        for i in nums:
            if not -nargs <= i < nargs:
                raise ValueError(f"px.grad: argnums {i} is out of range for {nargs} positional arguments")
        return tuple(i % nargs for i in nums)

    def __call__(self, *args, **kwargs):
        gp, per_arg, kw_leaves, nums = self._program(args, kwargs)
        data = [v for i, (leaves, _) in enumerate(per_arg) for v in leaves if _is_data(v, i in nums)]
        data += [v for v in kw_leaves if _is_data(v, False)]
        self.last = gp
        return gp.run(data)

    def _program(self, args, kwargs):
        """(the GradProgram for these arguments, traced or from the cache, and the flattened arguments)."""
        nums = self._argnums(len(args))
        per_arg = [flatten(a) for a in args]
        kw_leaves, kw_structure = flatten(kwargs)
        key = (tuple(s for _, s in per_arg), kw_structure, nums,
               tuple(_leaf_key(v, i in nums) for i, (leaves, _) in enumerate(per_arg) for v in leaves),
               tuple(_leaf_key(v, False) for v in kw_leaves))
        gp = self._cache.get(key)
        if gp is None:
            gp = self._trace(per_arg, kw_leaves, kw_structure, nums)
            if not gp.guards:
                with self._lock:
                    self._cache[key] = gp
        return gp, per_arg, kw_leaves, nums

    def _trace(self, per_arg, kw_leaves, kw_structure, nums) -> GradProgram:
        trace = Trace()
        params: list[str] = []
        arg_names = self._arg_names(len(per_arg))
        taken: set[str] = set()

        def unique(name):  # the user's names (params_W1); never the tracer's own (__t3) nor a repeat
            name = name.lstrip("_") or "arg"
            base, k = name, 1
            while name in taken:
                name, k = f"{base}_{k}", k + 1
            taken.add(name)
            return name
        wrt: list[Tracer] = []
        traced_args = []
        for i, (leaves, structure) in enumerate(per_arg):
            new = []
            names = leaf_names(arg_names[i], structure)
            for j, v in enumerate(leaves):
                diff = i in nums
                if diff and not _is_float_value(v):
                    kind = type(v).__name__ if not hasattr(v, "dtype") else f"{type(v).__name__} of {v.dtype}"
                    raise TypeError(f"px.grad of {self.__name__[5:]}: argument {i} has a leaf of type {kind}; "
                                    "gradients are taken with respect to floating-point arrays and scalars only")
                if _is_data(v, diff):
                    name = unique(names[j])
                    t = Tracer(v, name, trace, diff)
                    params.append(name)
                    if diff:
                        wrt.append(t)
                    new.append(t)
                else:
                    new.append(v)
            traced_args.append(unflatten(structure, new))
        kw_new = []
        kw_names = leaf_names("kw", kw_structure)
        for j, v in enumerate(kw_leaves):
            if _is_data(v, False):
                name = unique(kw_names[j][3:])
                params.append(name)
                kw_new.append(Tracer(v, name, trace, False))
            else:
                kw_new.append(v)
        out = self.fn(*traced_args, **unflatten(kw_structure, kw_new))
        if self.has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError(f"px.grad(has_aux=True): {self.__name__[5:]} must return (value, aux)")
            value, aux = out
        else:
            value, aux = out, None
        shape = np.shape(value.value if type(value) is Tracer else value)
        if shape != ():
            raise TypeError(f"px.grad needs a scalar-valued function; {self.__name__[5:]} returned shape {shape}")
        grads = backward(trace, value, wrt)
        # The outputs: value (when asked), one gradient per differentiated leaf in its argument's structure, aux.
        grad_trees = []
        k = 0
        for i in nums:
            leaves, structure = per_arg[i]
            grad_trees.append(unflatten(structure, grads[k:k + len(leaves)]))
            k += len(leaves)
        g_out = grad_trees[0] if isinstance(self.argnums, int) else tuple(grad_trees)
        result = g_out
        if self.with_value:
            result = (value, g_out)
        if self.has_aux:
            result = ((value, aux), g_out) if self.with_value else (g_out, aux)
        out_leaves, out_structure = flatten(result)
        builder = _Builder()
        loc = trace.records[-1].loc if trace.records else UNKNOWN
        program = build_program(self.__name__, trace, params, out_leaves, builder, loc)
        from .decorator import optimize_program

        program = optimize_program(program)
        return GradProgram(program, builder.consts, out_structure, trace.guards)

    def __repr__(self):
        return f"<px.{'value_and_grad' if self.with_value else 'grad'} of {getattr(self.fn, '__qualname__', self.fn)}>"


def backward(trace: Trace, value, wrt: list[Tracer]) -> list:
    """Reverse mode over the recording: the cotangent of each Tracer in ``wrt`` (zeros where none flows)."""
    forward = list(trace.records)  # the rules append the backward pass's records to the trace
    cot: dict[str, object] = {}
    if type(value) is Tracer and value.diff:
        trace.at = next((r.loc for r in reversed(trace.records) if r.out is value), None)
        cot[value.name] = trace.emit("ones_like", (value,), {}, diff=False)
        trace.at = None
    for rec in reversed(forward):
        g = cot.pop(rec.out.name, None)
        if g is None or not rec.out.diff:
            continue
        try:
            rule = vjp.grad_rule(rec.prim)
        except KeyError:
            raise TraceError(f"{rec.loc}: no gradient rule for primitive {rec.prim!r}; the gradient cannot flow "
                             "through it") from None
        if rule is None:
            continue
        # The gradient's operations carry the location of the operation they differentiate.
        trace.at = rec.loc
        try:
            thunks = rule(g, rec.out, *rec.args, **rec.kwargs)
            for arg, th in _pairs(rec.args, thunks):
                if type(arg) is Tracer and arg.diff and th is not None:
                    try:
                        c = th()
                    except NotImplementedError as e:
                        raise TraceError(f"{rec.loc}: {e}") from None
                    c = _like(trace, c, arg)
                    prev = cot.get(arg.name)
                    cot[arg.name] = c if prev is None else prev + c
        finally:
            trace.at = None
    out = []
    for t in wrt:
        c = cot.get(t.name)
        if c is None:
            c = trace.emit("zeros_like", (t,), {}, diff=False)
        elif np.shape(c.value if type(c) is Tracer else c) != t.shape or type(c) is not Tracer:
            c = trace.emit("multiply", (trace.emit("ones_like", (t,), {}, diff=False), c), {}, diff=False)
        out.append(c)
    return out


def _like(trace, c, arg):
    """The cotangent in its input's float dtype: a rule that promoted float32 to float64 must not make the rest of
    the backward pass (its matmuls) float64."""
    want = arg.dtype
    have = c.dtype if type(c) is Tracer else np.result_type(c)
    if want != have and np.issubdtype(want, np.floating) and np.issubdtype(have, np.floating):
        return trace.emit("method.astype", (c, want), {}, diff=False)
    return c


def _pairs(args, thunks):
    for arg, th in zip(args, thunks):
        if isinstance(th, list) and isinstance(arg, (list, tuple)):
            yield from _pairs(arg, th)
        elif not isinstance(th, list):
            yield arg, th


def grad(fn, argnums=0, *, has_aux=False) -> Grad:
    """The gradient of scalar-valued ``fn`` with respect to argument(s) ``argnums`` (same structure as them)."""
    return Grad(fn, argnums, has_aux=has_aux)


def value_and_grad(fn, argnums=0, *, has_aux=False) -> Grad:
    """``(fn(...), grad(fn)(...))`` from one tree: the forward pass is shared."""
    return Grad(fn, argnums, with_value=True, has_aux=has_aux)


__all__ = ["Grad", "GradProgram", "TraceError", "backward", "flatten", "grad", "unflatten", "value_and_grad"]
