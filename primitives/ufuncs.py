"""NumPy's element-wise functions (ufuncs), each declared once with its gradient, fused-kernel form and inline form.

The families are small helpers, as JAX's ``standard_unop``: ``unary(name, grad, fused=...)``, ``binary(...)``,
``comparison(...)``. A ufunc without a rule here is still a primitive (``plain``): it runs, folds and tiles, but no
gradient flows through it and it does not join fused kernels.
"""
from __future__ import annotations

import numpy as np

from . import shapes
from .registry import MUTATES, Inline, Lowering, call_lowering, register
from .vjp import binary_rule, max_like, unary_rule

# Every NumPy function called on values (not futures): as plain bytecode when its inputs are small.
CALL = Inline("{kernel}({args})", "small", kwargs=True)

# NumPy functions a native loop kernel (runtime/native) may call as the same ``np.<name>`` call in Numba.
NUMBA_CALLABLE = set("""
exp exp2 expm1 log log2 log10 log1p sqrt sin cos tan arcsin arccos arctan sinh cosh tanh abs absolute fabs
floor ceil trunc negative square sign isnan isinf isfinite add subtract multiply divide true_divide maximum
minimum arctan2 hypot power floor_divide remainder mod zeros ones empty min max amin amax argmin argmax
logical_and logical_or logical_xor logical_not greater greater_equal less less_equal equal not_equal
float64 float32 int64 int32 int16 int8 uint8 uint16 uint32 bool_ complex128
""".split())

# NumPy functions of one array a native kernel calls as they are, for every dtype (``Lowering.moves``)
MOVES = {"flip", "copy", "empty_like", "zeros_like", "ones_like"}


def native(name: str, **facts) -> Lowering | None:
    """The native-loop form of NumPy function ``name``: the same call in Numba, when Numba has it, with the facts
    its declaration gives (``Lowering``'s ``inexact``, ``raises``, ``compares``, ``divides``, ``allocates`` ...).
    A ufunc only reads its ``nin`` positional arguments (a further one is its ``out``)."""
    fn = getattr(np, name, None)
    reads = fn.nin if isinstance(fn, np.ufunc) else 0
    if name == "sum":  # NumPy sums floats pairwise: the kernel uses the same order (runtime/native/helpers.py)
        return Lowering("_px_sum({0})")
    if name == "linspace":  # NumPy's steps, float64 (runtime/native/helpers.py; calls.py ``c_linspace``)
        return Lowering("_px_linspace({0}, {1}, {2})", keywords=("dtype",))
    if name == "mean":  # the pairwise sum over the count (runtime/native/calls.py ``c_mean``: 1-D float arrays)
        return Lowering("(_px_sum({0}) / {0}.shape[0])", call="_px_sum")
    if name in ("remainder", "mod"):  # Numba's np.remainder traps (SIGFPE) on int64 -2**63 % -1; its % does not
        return Lowering("({0} % {1})", **facts)
    if name in MOVES:  # one array's elements moved, copied or allocated alike: any dtype (Numba's np.flip: a view)
        return call_lowering(f"np.{name}", moves=True, view=name == "flip")
    if name in ("dot", "matmul"):  # 1-D/2-D float products (runtime/native/calls.py ``_product``): BLAS's last bit
        return Lowering("np.dot({0}, {1})", inexact=True, reads=2, blas=True)
    return call_lowering(f"np.{name}", reads=reads, **facts) if name in NUMBA_CALLABLE else None


# The reduction primitive a ufunc's ``reduce`` is (``np.add.reduce(x)`` is ``np.sum(x)``): the one table the tiled
# and SPMD value kinds' ``__array_ufunc__`` read (runtime/tiled/rules.py, runtime/spmd/protocol.py).
UFUNC_REDUCE = {np.add: "sum", np.multiply: "prod", np.minimum: "min", np.maximum: "max", np.logical_or: "any",
                np.logical_and: "all"}

# Methods of the two-input ufuncs, as primitives ``add.outer`` ...; ``at`` changes its first argument in place.
UFUNC_METHODS = ("outer", "reduce", "accumulate", "reduceat", "at")


class UfuncMethod:
    """``np.<ufunc>.<method>``; an instance (not a bound method) so it pickles by name to other processes."""

    __slots__ = ("ufunc", "method")

    def __init__(self, ufunc, method):
        self.ufunc, self.method = ufunc, method

    def __call__(self, *args, **kwargs):
        return getattr(getattr(np, self.ufunc), self.method)(*args, **kwargs)

    def __reduce__(self):
        return (UfuncMethod, (self.ufunc, self.method))


def _ufunc(name, native_rules=None, **rules):
    """``native_rules``: the facts of its native form besides ``inexact`` (``Lowering``: raises, compares ...)."""
    fn = getattr(np, name, None)
    if fn is None:  # not every NumPy has every function
        return None
    rule = shapes.elementwise(fn) if isinstance(fn, np.ufunc) else None
    prim = register(name, fn, obj=fn, shape_rule=rule, inline=CALL,
                    lowering=native(name, inexact=rules.get("inexact", False), **(native_rules or {})), **rules)
    if isinstance(fn, np.ufunc) and fn.nin == 2 and fn.nout == 1:
        for method in UFUNC_METHODS:
            register(f"{name}.{method}", UfuncMethod(name, method), effect=MUTATES if method == "at" else None,
                     lowering=_outer(name) if method == "outer" else None)
    return prim


def _outer(name: str) -> Lowering | None:
    """``np.add.outer(a, b)`` of 1-D arrays in a native kernel: the ufunc of ``a[:, None]`` and ``b[None, :]``, the same
    elements (runtime/native/calls.py ``outer`` takes 1-D arrays only; their dtypes as the ufunc's own rule)."""
    if name not in ("add", "subtract", "multiply"):
        return None
    return Lowering(lambda atoms: f"np.{name}({atoms[0]}[:, None], {atoms[1]}[None, :])")


# Unary math of one number never raises in a kernel (error_model='numpy': a domain error gives nan); results
# rounded to integers or tested (floor, isnan ...) flip on a last-bit difference of their operand.
_PURE = {"raises": False}
_ROUNDS = {"raises": False, "compares": True}


def unary(name, grad=None, *, fused=None, inexact=False, nondiff=False, native_rules=_PURE):
    """``fn(x)``; ``grad(g, ans, x)`` is the cotangent of x; ``fused`` its Numba expression of ``{0}``."""
    return _ufunc(name, native_rules, grad=unary_rule(grad) if grad else None, fused=fused, inexact=inexact,
                  nondiff=nondiff)


def binary(name, grad_x=None, grad_y=None, *, fused=None, inexact=False, ordered=False, native_rules=None):
    """``fn(x, y)`` with broadcasting: cotangents are summed back to each input's shape."""
    grad = binary_rule(grad_x, grad_y) if grad_x else None
    return _ufunc(name, native_rules, grad=grad, fused=fused, inexact=inexact, ordered=ordered)


def comparison(name, symbol, *, ordered=True):
    """A comparison: a boolean result, no gradient; ordered ones refuse complex numbers in Numba."""
    return _ufunc(name, _ROUNDS, fused=f"{{0}} {symbol} {{1}}", comparison=True, ordered=ordered, nondiff=True)


def plain(names: str, *, nondiff=False, native_rules=None):
    for name in names.split():
        _ufunc(name, native_rules, nondiff=nondiff)


# ---- unary math ---------------------------------------------------------------------------------------------
# complex128 arrays: + - * and negation as NumPy computes them (``Lowering.complex``; a product inexact)
_COMPLEX_EXACT = {**_PURE, "complex": "exact"}
unary("negative", lambda g, a, x: -g, fused="-{0}", native_rules=_COMPLEX_EXACT)
unary("positive", lambda g, a, x: g, fused="+{0}", native_rules=_COMPLEX_EXACT)
unary("exp", lambda g, a, x: g * a, fused="np.exp({0})", inexact=True)
unary("exp2", lambda g, a, x: g * a * np.log(2.0), inexact=True)
unary("expm1", lambda g, a, x: g * (a + 1.0), fused="np.expm1({0})", inexact=True)
unary("log", lambda g, a, x: g / x, fused="np.log({0})", inexact=True)
unary("log2", lambda g, a, x: g / (x * np.log(2.0)), fused="np.log2({0})", inexact=True)
unary("log10", lambda g, a, x: g / (x * np.log(10.0)), fused="np.log10({0})", inexact=True)
unary("log1p", lambda g, a, x: g / (x + 1.0), fused="np.log1p({0})", inexact=True)
unary("sqrt", lambda g, a, x: g * 0.5 / a, fused="np.sqrt({0})")  # exactly rounded in both
unary("cbrt", lambda g, a, x: g / (3.0 * a * a))
unary("square", lambda g, a, x: g * 2.0 * x, fused="{0} * {0}")
unary("reciprocal", lambda g, a, x: -g * a * a)
unary("sin", lambda g, a, x: g * np.cos(x), fused="np.sin({0})", inexact=True)
unary("cos", lambda g, a, x: -g * np.sin(x), fused="np.cos({0})", inexact=True)
unary("tan", lambda g, a, x: g * (1.0 + a * a), fused="np.tan({0})", inexact=True)
unary("arcsin", lambda g, a, x: g / np.sqrt(1.0 - x * x), inexact=True)
unary("arccos", lambda g, a, x: -g / np.sqrt(1.0 - x * x), inexact=True)
unary("arctan", lambda g, a, x: g / (1.0 + x * x), fused="np.arctan({0})", inexact=True)
unary("sinh", lambda g, a, x: g * np.cosh(x), fused="np.sinh({0})", inexact=True)
unary("cosh", lambda g, a, x: g * np.sinh(x), fused="np.cosh({0})", inexact=True)
unary("tanh", lambda g, a, x: g * (1.0 - a * a), fused="np.tanh({0})", inexact=True)
unary("arcsinh", lambda g, a, x: g / np.sqrt(x * x + 1.0))
unary("absolute", lambda g, a, x: g * np.sign(x), fused="np.abs({0})")
unary("abs", lambda g, a, x: g * np.sign(x), fused="np.abs({0})")
unary("fabs", lambda g, a, x: g * np.sign(x), fused="np.fabs({0})")
unary("floor", fused="np.floor({0})", nondiff=True, native_rules=_ROUNDS)
unary("ceil", fused="np.ceil({0})", nondiff=True, native_rules=_ROUNDS)
plain("arccosh arctanh degrees radians deg2rad rad2deg conjugate conj spacing")
plain("trunc rint sign isnan isinf isfinite logical_not invert signbit", nondiff=True, native_rules=_ROUNDS)

# ---- binary math ---------------------------------------------------------------------------------------------
binary("add", lambda g, a, x, y: g, lambda g, a, x, y: g, fused="{0} + {1}", native_rules={"complex": "exact"})
binary("subtract", lambda g, a, x, y: g, lambda g, a, x, y: -g, fused="{0} - {1}", native_rules={"complex": "exact"})
binary("multiply", lambda g, a, x, y: g * y, lambda g, a, x, y: g * x, fused="{0} * {1}",
       native_rules={"complex": "inexact"})
for _name in ("divide", "true_divide"):
    binary(_name, lambda g, a, x, y: g / y, lambda g, a, x, y: -g * x / (y * y), fused="{0} / {1}",
           native_rules={"divides": "true"})
for _name in ("power", "float_power"):
    binary(_name, lambda g, a, x, y: g * y * np.power(x, y - 1.0),
           lambda g, a, x, y: g * a * np.log(np.where(x > 0, x, 1.0)), inexact=True,
           native_rules={"powers": "numpy"})
# NaN propagates as in NumPy (``x != x``); ties split the gradient in halves (max_like)
binary("maximum", max_like, lambda g, a, x, y: max_like(g, a, y, x), ordered=True, native_rules=_ROUNDS,
       fused="({0} if ({0} >= {1} or {0} != {0}) else {1})")
binary("minimum", lambda g, a, x, y: max_like(g, a, y, x), max_like, ordered=True, native_rules=_ROUNDS,
       fused="({0} if ({0} <= {1} or {0} != {0}) else {1})")
binary("fmax", max_like, lambda g, a, x, y: max_like(g, a, y, x), native_rules=_ROUNDS)
binary("fmin", lambda g, a, x, y: max_like(g, a, y, x), max_like, native_rules=_ROUNDS)
binary("arctan2", lambda g, a, x, y: g * y / (x * x + y * y), lambda g, a, x, y: -g * x / (x * x + y * y),
       fused="np.arctan2({0}, {1})", inexact=True, native_rules=_PURE)
binary("hypot", lambda g, a, x, y: g * x / a, lambda g, a, x, y: g * y / a, fused="np.hypot({0}, {1})",
       inexact=True, native_rules=_PURE)
binary("logaddexp", lambda g, a, x, y: g * np.exp(x - a), lambda g, a, x, y: g * np.exp(y - a))
for _name in ("remainder", "mod"):
    binary(_name, lambda g, a, x, y: g, lambda g, a, x, y: -g * np.floor_divide(x, y),
           native_rules={"divides": "mod", "compares": True})
plain("fmod divmod logaddexp2 copysign nextafter ldexp gcd lcm modf frexp")
plain("left_shift right_shift")
plain("floor_divide", nondiff=True, native_rules={"divides": "floor", "compares": True})
plain("logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor heaviside", nondiff=True)

# ---- comparisons (NumPy's names: what traced gradient trees record, as the ReLU rule's g*(x>0)) ---------------
comparison("greater", ">")
comparison("greater_equal", ">=")
comparison("less", "<")
comparison("less_equal", "<=")
comparison("equal", "==", ordered=False)
comparison("not_equal", "!=", ordered=False)
