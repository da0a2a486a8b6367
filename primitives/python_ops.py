"""Python's own operators, builtins, attributes and methods as primitives (Python semantics, not NumPy's)."""
from __future__ import annotations

import builtins
import math
import operator

from . import shapes, vjp
from .operators import OPERATORS, Operator
from .registry import IO, MUTATES, RAISES, STATE, Inline, Lowering, call_lowering, register


def contains(item, container):
    """``item in container``, arguments in source order (``operator.contains`` takes them the other way)."""
    return item in container


def not_contains(item, container):
    return item not in container


def unpack(value, n):
    """Tuple unpacking with Python's error for a length mismatch."""
    items = tuple(value)
    if len(items) != n:
        raise ValueError(
            f"too many values to unpack (expected {n})" if len(items) > n
            else f"not enough values to unpack (expected {n}, got {len(items)})"
        )
    return items


def setitem(obj, key, value):
    """``obj[key] = value``; returns None like the statement."""
    obj[key] = value


def delitem(obj, key):
    del obj[key]


def raise_assertion(message=None):
    raise AssertionError(*(() if message is None else (message,)))


def raise_exception(exc):
    if isinstance(exc, type) and issubclass(exc, BaseException):
        exc = exc()
    if not isinstance(exc, BaseException):
        raise TypeError("exceptions must derive from BaseException")
    raise exc


def new_exception(cls, *args):
    return cls(*args)


def format_value(value, conversion, spec):
    """One ``{value!r:spec}`` field of an f-string."""
    if conversion == "r":
        value = repr(value)
    elif conversion == "s":
        value = str(value)
    elif conversion == "a":
        value = ascii(value)
    return format(value, spec)


def join_str(*parts):
    return "".join(parts)


def make_list(*items):
    return list(items)


def make_tuple(*items):
    return items


def make_dict(keys, values):
    return dict(zip(keys, values, strict=True))


def make_set(*items):
    return set(items)


class AttrKernel:
    """``obj.<name>``; an instance (not a closure) so it pickles by value to other processes."""

    __slots__ = ("attr",)

    def __init__(self, attr):
        self.attr = attr

    def __call__(self, obj):
        return getattr(obj, self.attr)

    def __reduce__(self):
        return (AttrKernel, (self.attr,))


def set_shape(obj, shape):
    """``obj.shape = shape``: reshape in place (NumPy raises if a copy would be needed)."""
    obj.shape = shape


class MethodKernel:
    """``obj.<name>(*args, **kwargs)``; dispatches on the receiver at run time, as Python does."""

    __slots__ = ("method",)

    def __init__(self, method):
        self.method = method

    def __call__(self, obj, *args, **kwargs):
        return getattr(obj, self.method)(*args, **kwargs)

    def __reduce__(self):
        return (MethodKernel, (self.method,))


ATTRIBUTES = "T shape ndim size dtype real imag itemsize nbytes flat".split()
# Methods that never change their receiver: may run as tasks, in any order consistent with data flow.
PURE_METHODS = (
    "sum prod mean var std min max argmin argmax any all cumsum cumprod ptp round clip conj conjugate "
    "reshape ravel flatten transpose swapaxes squeeze copy astype dot nonzero diagonal trace repeat take "
    "tolist item tobytes searchsorted argsort view "
    "get keys values items count index startswith endswith upper lower strip split join replace format "
    "bit_length is_integer"
).split()
# Methods that change their receiver (or a generator's state): run inline, in program order.
MUTATING_METHODS = ("append extend insert pop remove clear update setdefault sort fill reverse popitem add "
                    "discard").split()
# What a mutating method must see resolved: append/insert store a future as it is; pop/extend/clear/reverse
# move elements without looking at them; sort/remove/update ... compare or hash elements, so they need values.
_MUTATING_RESOLVE = {"append": "receiver", "insert": "receiver", "extend": "shallow", "pop": "shallow",
                     "clear": "shallow", "reverse": "shallow", "popitem": "shallow"}
STATE_METHODS = (
    "random integers normal standard_normal uniform choice permutation shuffle permuted exponential "
    "binomial poisson beta gamma multivariate_normal lognormal laplace logistic geometric standard_exponential"
).split()

# Builtins callable from compiled code; each is the real builtin, so semantics are Python's.
BUILTINS = ("len range abs min max sum zip enumerate int float bool complex str list tuple dict set print "
            "isinstance sorted reversed round any all divmod pow map filter slice type").split()
LAZY_BUILTINS = {"len", "list", "tuple", "zip", "enumerate", "reversed", "isinstance", "type", "dict"}


# Operators with a Numba scalar form that matches NumPy's element-wise one (fused kernels); the rest (matmul,
# shifts and bit operations, ``not``, identity and membership) stay out of fused groups.
_FUSED_OPERATORS = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "lt", "le", "gt", "ge",
                    "eq", "ne"}
_INT_UNSAFE = {"floordiv", "mod", "pow"}  # NumPy gives 0 with a warning for // 0, raises for negative int powers
# Operators whose value is always a new array (``Primitive.fresh``)
_FRESH_OPERATORS = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "matmul", "lshift",
                    "rshift", "and_", "or_", "xor"}


# The native tier's rules over operand facts (``Lowering.interval``/``magnitude``/``sign``): Python ints in a loop
# kernel, whose + - * must not pass 2**63 unchecked, and whose indices bounds.py proves in bounds.
def _iv_add(ops, a, b):
    return ops.add(ops.interval(a), ops.interval(b))


def _iv_sub(ops, a, b):
    return ops.sub(ops.interval(a), ops.interval(b))


def _iv_neg(ops, a):
    return ops.scale(ops.interval(a), -1)


def _iv_mul(ops, a, b):
    """Products with a small constant only: the bounds stay affine."""
    for c, x in ((a, b), (b, a)):
        k = ops.const(c)
        if k is not None and abs(k) <= ops.MAX_COEFF:
            return ops.scale(ops.interval(x), k)
    return None


def _same(b):
    return b


def _largest(*bounds):
    return max(bounds)


def _all_nonneg(ops, *args):  # Python ints: an overflowing + or * raises (checked) or was proven not to overflow
    return all(ops.nonneg(a) for a in args)


def _any_nonneg(ops, a, b):  # two's complement: a & b >= 0 when either is
    return ops.nonneg(a) or ops.nonneg(b)


def _positive(ops, d):
    k = ops.const(d)
    return k is not None and k > 0


_ROUNDS = {"compares": True}  # results that flip on a last-bit difference of the operands
# Each operator's native rules besides its Python spelling (``Lowering``): Python ints go through helpers that
# raise instead of wrapping at 2**63 (``pyint``), division of Python scalars through ones that raise at zero
# (``pyscalar``; runtime/native/helpers.py), or stop the kernel there when an operand may be a Python or a NumPy
# scalar (``ambiguous``). The in-place operators (``x op= v``) share them.
_NATIVE = {
    "add": dict(pyint="_ck_add", complex="exact", magnitude=lambda x, y: x + y, interval=_iv_add, sign=_all_nonneg),
    "sub": dict(pyint="_ck_sub", complex="exact", magnitude=lambda x, y: x + y, interval=_iv_sub),
    "mul": dict(pyint="_ck_mul", complex="inexact", magnitude=lambda x, y: x * y, interval=_iv_mul, sign=_all_nonneg),
    "truediv": dict(pyscalar="_py_truediv", ambiguous="_amb_truediv", divides="true"),
    # Python and NumPy: the remainder has the sign of the divisor
    "floordiv": dict(pyscalar="_py_floordiv", ambiguous="_amb_floordiv", divides="floor", magnitude=_largest,
                     **_ROUNDS, sign=lambda ops, a, d: _positive(ops, d) and ops.nonneg(a)),
    "mod": dict(pyscalar="_py_mod", ambiguous="_amb_mod", divides="mod", magnitude=_largest, **_ROUNDS,
                sign=lambda ops, a, d: _positive(ops, d)),
    "pow": dict(pyint="_ck_pow", inexact=True, powers="python"),
    "lshift": dict(pyint="_ck_lshift", shifts="left"),
    "rshift": dict(shifts="right", sign=lambda ops, a, b: ops.nonneg(a)),
    "and_": dict(sign=_any_nonneg),
    "or_": dict(sign=_all_nonneg),
    "xor": dict(sign=_all_nonneg),
    "neg": dict(pyint="_ck_neg", complex="exact", magnitude=_same, interval=_iv_neg),
    "pos": dict(complex="exact", magnitude=_same),
    "not_": _ROUNDS,
    **dict.fromkeys(("lt", "le", "gt", "ge", "eq", "ne"), _ROUNDS),
}
_INEXACT = {"inexact": True}
# math functions a loop kernel calls as Numba's math.<name>, with their rules
_MATH_NATIVE = {**dict.fromkeys("sqrt fabs isnan isinf isfinite copysign".split(), {}),
                **dict.fromkeys("floor ceil trunc".split(), _ROUNDS),
                **dict.fromkeys("exp log log10 log2 log1p expm1 sin cos tan asin acos atan atan2 sinh cosh tanh "
                                "hypot".split(), _INEXACT)}
# builtins a loop kernel calls as they are (``raises=False``: of numbers, never raises)
_BUILTINS_NATIVE = {"len": dict(raises=False), "range": dict(raises=False), "float": dict(raises=False),
                    "abs": dict(pyint="_ck_abs", raises=False, magnitude=_same),
                    "min": dict(raises=False, magnitude=_largest, **_ROUNDS),
                    "max": dict(raises=False, magnitude=_largest, **_ROUNDS),
                    "int": _ROUNDS, "bool": dict(raises=False, **_ROUNDS)}


def _builtin_lowering(name: str) -> Lowering:
    """A builtin in a native loop kernel: called as it is, but min and max of two values as a conditional
    expression (Python's rule: the first of equal values; calls.py takes two values of one kind only)."""
    if name in ("min", "max"):
        return Lowering(f"({{1}} if {{1}} {'<' if name == 'min' else '>'} {{0}} else {{0}})", **_BUILTINS_NATIVE[name])
    return call_lowering(name, **_BUILTINS_NATIVE[name])


def _lowering(op: Operator, inplace=False) -> Lowering | None:
    """The operator in a native loop kernel: its Python spelling, which Numba compiles (``@``: Numba's ``np.dot``,
    for the shapes and dtypes runtime/native/calls.py's ``_product`` takes; ``A @= B`` has no native form). The
    in-place form updates an array with its NumPy ufunc, in place (``np.add(a, v, a)``)."""
    if op.kind == "identity":
        return None
    if op.name == "matmul":
        return None if inplace else Lowering("np.dot({0}, {1})", inexact=True, reads=2, blas=True)
    return Lowering(f"({op.template})", inplace=op.numpy if inplace else None, **_NATIVE.get(op.name, {}))


# Methods' gradient rules (NumPy's functions' are in numpy_ops.py)
_METHOD_GRADS = {"reshape": vjp.reshape_back_vjp, "ravel": vjp.reshape_back_vjp, "flatten": vjp.reshape_back_vjp,
                 "copy": vjp.copy_vjp, "astype": vjp.astype_vjp}


# Arithmetic that waits on a deferred sum (``Primitive.defers``): ``np.sum(X[m], axis=0) / np.sum(m)`` per cluster
_DEFERS = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos"}


def _operator(op: Operator):
    """``operator.<name>``: Python's semantics (``[1] + [2]`` concatenates); on arrays NumPy's ufunc."""
    fn = getattr(operator, op.name) if op.name not in ("in", "not_in") else (
        contains if op.name == "in" else not_contains)
    elementwise = op.numpy is not None and op.name != "not_"
    rule = shapes.matmul if op.name == "matmul" else (
        shapes.elementwise(fn, op.arity) if elementwise and op.name != "matmul" else None)
    fused = op.template if op.name in _FUSED_OPERATORS else None
    guard = "value" if op.kind == "identity" else "scalar" if op.name == "not_" else "small"
    register(f"operator.{op.name}", fn, display=op.display, shape_rule=rule, local=op.name in ("is_", "is_not"),
             inline=Inline(op.template, guard), fused=fused, fused_cupy=fused,
             inexact=op.name == "pow", int_unsafe=op.name in _INT_UNSAFE,
             ordered=op.kind == "compare" and op.name not in ("eq", "ne"), comparison=op.kind == "compare",
             grad=vjp.matmul_vjp if op.name == "matmul" else None, lowering=_lowering(op),
             fresh=op.name in _FRESH_OPERATORS, defers=0 if op.name in _DEFERS else None)
    if op.inplace:
        # ``x op= v``: a new value on scalars; in place on an array with no task pending that might read it
        register(f"operator.{op.inplace}", getattr(operator, op.inplace), effect=MUTATES,
                 display=f"__{op.inplace}", inline=Inline("{kernel}({0}, {1})", "inplace"),
                 lowering=_lowering(op, inplace=True))


def _register_python_ops():
    for op in OPERATORS:
        _operator(op)
    register("operator.getitem", operator.getitem, display="slice_at", inline=Inline("{0}[{1}]", "index"),
             grad=vjp.getitem_vjp, lowering=Lowering("{0}[{1}]"))
    register("operator.setitem", setitem, effect=MUTATES, display="store_at")
    register("operator.delitem", delitem, effect=MUTATES, display="del_at")
    register("operator.truth", operator.truth, display="__truth",
             lowering=call_lowering("bool", **_BUILTINS_NATIVE["bool"]))
    register("python.slice", slice, display="slice", cheap=True, inline=Inline("{kernel}({args})", "value"),
             lowering=call_lowering("slice"))
    register("python.unpack", unpack, display="unpack")
    register("python.list", make_list, display="list", resolve="none")
    register("python.tuple", make_tuple, display="make_tuple", resolve="none",
             lowering=Lowering(lambda atoms: "(" + "".join(a + ", " for a in atoms) + ")"))
    register("python.dict", make_dict, display="dict", resolve="none")
    register("python.set", make_set, display="set")
    register("python.assert", raise_assertion, effect=RAISES, display="assert")
    register("python.raise", raise_exception, effect=RAISES, display="raise")
    register("python.new_exception", new_exception, display="exception")
    register("python.getattr", getattr, display="getattr", cheap=True)
    scalar_call = Inline("{kernel}({args})", "scalar")
    for name in dir(math):
        fn = getattr(math, name)
        if callable(fn) and not name.startswith("_"):
            register(f"math.{name}", fn, obj=fn, display=f"math.{name}", inline=scalar_call,
                     lowering=call_lowering(f"math.{name}", **_MATH_NATIVE[name]) if name in _MATH_NATIVE else None)
    register("python.format_value", format_value, display="format")
    register("python.join_str", join_str, display="join_str")
    for attr in ATTRIBUTES:
        register(f"attr.{attr}", AttrKernel(attr), display=attr, cheap=attr != "flat",
                 inline=Inline(f"{{0}}.{attr}", "value"),
                 lowering=Lowering(f"{{0}}.{attr}") if attr in ("shape", "size", "ndim", "T", "dtype") else None)
    register("python.set_shape", set_shape, effect=MUTATES, display="set_shape")
    for method in PURE_METHODS:
        register(f"method.{method}", MethodKernel(method), display=f".{method}", grad=_METHOD_GRADS.get(method),
                 inline=Inline(f"{{0}}.{method}({{rest}})", "small", kwargs=True), fresh=method == "copy",
                 lowering=Lowering("{0}.copy()", moves=True) if method == "copy" else
                 # reductions: runtime/native/reductions.py lowers these calls, with their axes
                 Lowering(f"{{0}}.{method}()") if method in ("sum", "mean", "max", "min") else None)
    for method in MUTATING_METHODS:
        resolve = _MUTATING_RESOLVE.get(method, "deep")
        register(f"method.{method}", MethodKernel(method), effect=MUTATES, display=f".{method}", resolve=resolve,
                 inline=Inline(f"{{0}}.{method}({{rest}})", "receiver") if resolve != "deep" else None)
    for method in STATE_METHODS:
        register(f"method.{method}", MethodKernel(method), effect=STATE, display=f".{method}")
    for name in BUILTINS:
        fn = getattr(builtins, name)
        lazy = name in LAZY_BUILTINS
        register(f"builtins.{name}", fn, obj=fn, effect=IO if name == "print" else None, display=name,
                 resolve="shallow" if lazy else "deep", cheap=lazy,
                 inline=None if name == "print" else Inline("{kernel}({args})", "lazy" if lazy else "scalar"),
                 lowering=_builtin_lowering(name) if name in _BUILTINS_NATIVE else None)


_register_python_ops()
