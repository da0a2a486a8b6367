"""``px.grad`` and ``px.value_and_grad``: the callables, their signature cache, and tracing one call.

The function (plain, or the Python function behind a ``@compile``) is traced once for a call signature (trace.py):
Python runs its control flow, every primitive is recorded. Reverse mode (reverse_mode.py) then walks the recording
backwards and calls each primitive's gradient rule (primitives/vjp.py) on traced values, which records the gradient
as primitives too. The recording becomes an ``ir.Program`` (grad_program.py: forward and backward, one function,
file:line:col on every node) that goes through the usual passes (constant folding, element-wise fusion) and runs
on the current runtime, locally, on Dask or on tiled arrays, like any compiled function. Later calls with the same
signature (argument structure, array shapes and dtypes, the values of int/bool/str arguments) reuse the tree
without tracing.

A function whose control flow read a traced value (``if loss > 1``, ``while err > tol``) is re-traced at every call:
its tree holds the branches that call took. Arrays the function reads from outside (globals, closures) enter the
tree as the same objects, so changing them in place is seen and rebinding a global is not (as with ``jax.jit``).
"""
from __future__ import annotations

import inspect
import numbers
import threading

import numpy as np

from . import ir
from .decorator import CompiledFunction, optimize_program
from .draw import draw
from .grad_program import Builder, GradProgram, build_program, is_array_value, operands_into_groups
from .pytree import flatten, leaf_names, unflatten
from .reverse_mode import backward
from .source import UNKNOWN
from .trace import Trace, TraceError, Tracer
from .visualize import to_dot


def _is_float_value(v) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, (float, np.floating)):
        return True
    dtype = getattr(v, "dtype", None)
    return dtype is not None and hasattr(v, "shape") and np.issubdtype(dtype, np.inexact)


def _is_data(v, diff: bool) -> bool:
    """Does this leaf enter the tree as a parameter (differentiated, a float or an array), not as a constant?"""
    return diff or _is_float_value(v) or is_array_value(v)


def _leaf_key(v, diff):
    """What a leaf contributes to the signature: shapes and dtypes of data, the value of static arguments."""
    if type(v) is np.ndarray:  # the common leaf, first: its key is made at every call (0.4 us here, 5.5 below)
        return ("array", v.shape, v.dtype)
    if is_array_value(v):
        return ("array", type(v).__name__, tuple(v.shape), str(v.dtype))
    if isinstance(v, (float, np.floating, complex)) or (diff and isinstance(v, numbers.Number)):
        return ("scalar", type(v).__name__)
    try:
        hash(v)
    except TypeError:
        return ("object", id(v))
    return ("static", type(v).__name__, v)


# ---- the public functions --------------------------------------------------------------------------------
class Grad:
    """``px.grad(f)`` / ``px.value_and_grad(f)``: call it like ``f``."""

    def __init__(self, fn, argnums=0, *, with_value=False, has_aux=False):
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
        return to_dot(self.tree, profile)

    def visualize(self, path, profile=None) -> str:
        """Draw the last call's tree to ``path`` (.svg/.png/.pdf with graphviz's dot, .dot, or an .html report)."""
        return draw(self.tree, path, profile)

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
        leaves = [v for ls, _ in per_arg for v in ls] + kw_leaves
        self.last = gp
        return gp.run([v for v, d in zip(leaves, gp.data_mask) if d])

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
            # which leaves are the tree's parameters: the same for every call with this key (the keys of data
            # leaves are their shapes and dtypes, of the others their values), so found once, not per call
            gp.data_mask = tuple(_is_data(v, i in nums) for i, (ls, _) in enumerate(per_arg) for v in ls) + \
                tuple(_is_data(v, False) for v in kw_leaves)
            if not gp.guards:
                with self._lock:
                    self._cache[key] = gp
        return gp, per_arg, kw_leaves, nums

    def _trace(self, per_arg, kw_leaves, kw_structure, nums) -> GradProgram:
        """Trace one call and build its tree. Long (~65 lines) because it is one sequence with shared state:
        tracers for the arguments' leaves, the call, the value check, backward, the outputs in the arguments'
        structure; its parts only make sense in this order."""
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
        builder = Builder()
        loc = trace.records[-1].loc if trace.records else UNKNOWN
        program = build_program(self.__name__, trace, params, out_leaves, builder, loc)
        program = operands_into_groups(optimize_program(program))
        return GradProgram(program, builder.consts, out_structure, trace.guards)

    def __repr__(self):
        return f"<px.{'value_and_grad' if self.with_value else 'grad'} of {getattr(self.fn, '__qualname__', self.fn)}>"


def grad(fn, argnums=0, *, has_aux=False) -> Grad:
    """The gradient of scalar-valued ``fn`` with respect to argument(s) ``argnums`` (same structure as them)."""
    return Grad(fn, argnums, has_aux=has_aux)


def value_and_grad(fn, argnums=0, *, has_aux=False) -> Grad:
    """``(fn(...), grad(fn)(...))`` from one tree: the forward pass is shared."""
    return Grad(fn, argnums, with_value=True, has_aux=has_aux)


__all__ = ["Grad", "GradProgram", "TraceError", "backward", "grad", "value_and_grad"]
