"""Python's own operators, builtins, attributes and methods as primitives (Python semantics, not NumPy's)."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from . import shapes
from .registry import IO, MUTATES, STATE, Lowering, call_lowering, register

# Python operators keep Python semantics (``[1] + [2]`` concatenates); on arrays they are NumPy's ufuncs.
BINARY = {
    "add": ("__add", np.add), "sub": ("__sub", np.subtract), "mul": ("__mul", np.multiply),
    "truediv": ("__div", np.true_divide), "floordiv": ("__floordiv", np.floor_divide),
    "mod": ("__mod", np.remainder), "pow": ("__pow", np.power), "matmul": ("__matmul", None),
    "lshift": ("__lshift", np.left_shift), "rshift": ("__rshift", np.right_shift),
    "and_": ("__bitand", np.bitwise_and), "or_": ("__bitor", np.bitwise_or), "xor": ("__bitxor", np.bitwise_xor),
    "lt": ("__lt", np.less), "le": ("__le", np.less_equal), "gt": ("__gt", np.greater),
    "ge": ("__ge", np.greater_equal), "eq": ("__eq", np.equal), "ne": ("__ne", np.not_equal),
}
UNARY = {"neg": ("__minus", np.negative), "pos": ("__plus", np.positive), "invert": ("__invert", np.invert),
         "not_": ("__not", None)}
INPLACE = ["iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "imatmul", "ilshift", "irshift",
           "iand", "ior", "ixor"]


# Inside native loop kernels (runtime/native): the operator's Numba form; Python ints go through helpers that
# raise instead of wrapping at 2**63, and division of Python scalars through ones that raise at zero.
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
            "lshift": "<<", "rshift": ">>", "and_": "&", "or_": "|", "xor": "^",
            "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_CHECKED = {"add": "_ck_add", "sub": "_ck_sub", "mul": "_ck_mul", "lshift": "_ck_lshift", "pow": "_ck_pow"}
_PYSCALAR = {"truediv": "_py_truediv", "floordiv": "_py_floordiv", "mod": "_py_mod"}


def _binary_lowering(op):
    if op not in _SYMBOLS:
        return None
    return Lowering(f"({{0}} {_SYMBOLS[op]} {{1}})", pyint=_CHECKED.get(op), pyscalar=_PYSCALAR.get(op),
                    inexact=op == "pow")


_UNARY_LOWERING = {"neg": Lowering("(-{0})", pyint="_ck_neg"), "pos": Lowering("(+{0})"),
                   "invert": Lowering("(~{0})"), "not_": Lowering("(not {0})")}
_MATH_NATIVE = set("sqrt exp log log10 log2 log1p expm1 sin cos tan asin acos atan atan2 sinh cosh tanh floor ceil "
                   "fabs hypot isnan isinf isfinite trunc copysign".split())
_MATH_INEXACT = set("exp log log10 log2 log1p expm1 sin cos tan asin acos atan atan2 sinh cosh tanh hypot".split())
_BUILTIN_LOWERING = {"len": call_lowering("len"), "range": call_lowering("range"), "abs": call_lowering("abs"),
                     "min": call_lowering("min"), "max": call_lowering("max"), "int": call_lowering("int"),
                     "float": call_lowering("float"), "bool": call_lowering("bool")}


def contains(item, container):
    """``item in container``, arguments in source order (``operator.contains`` takes them the other way)."""
    return item in container


def not_contains(item, container):
    return item not in container


def make_slice(start, stop, step):
    return slice(start, stop, step)


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


def _register_python_ops():
    for op_name, (display, ufunc) in BINARY.items():
        op = getattr(operator, op_name)
        rule = shapes.matmul if op_name == "matmul" else (shapes.elementwise(op, 2) if ufunc else None)
        register(f"operator.{op_name}", getattr(operator, op_name), display=display, shape_rule=rule,
                 lowering=_binary_lowering(op_name))
    for op_name, (display, ufunc) in UNARY.items():
        rule = shapes.elementwise(getattr(operator, op_name), 1) if ufunc else None
        register(f"operator.{op_name}", getattr(operator, op_name), display=display, shape_rule=rule,
                 lowering=_UNARY_LOWERING.get(op_name))
    for op_name in INPLACE:
        base = op_name[1:] + ("_" if op_name in ("iand", "ior") else "")  # iand -> and_; on arrays: in place
        register(f"operator.{op_name}", getattr(operator, op_name), effect=MUTATES, display=f"__{op_name}",
                 lowering=_binary_lowering(base))
    register("operator.is_", operator.is_, display="__is", local=True)
    register("operator.is_not", operator.is_not, display="__is_not", local=True)
    register("operator.in", contains, display="__in")
    register("operator.not_in", not_contains, display="__not_in")
    register("operator.getitem", operator.getitem, display="slice_at", lowering=Lowering("{0}[{1}]"))
    register("operator.setitem", setitem, effect=MUTATES, display="store_at")
    register("operator.delitem", delitem, effect=MUTATES, display="del_at")
    register("operator.truth", operator.truth, display="__truth", lowering=call_lowering("bool"))
    register("python.slice", make_slice, display="slice", cheap=True, lowering=call_lowering("slice"))
    register("python.unpack", unpack, display="unpack")
    register("python.list", make_list, display="list", resolve="none")
    register("python.tuple", make_tuple, display="make_tuple", resolve="none",
             lowering=Lowering(lambda atoms: "(" + "".join(a + ", " for a in atoms) + ")"))
    register("python.dict", make_dict, display="dict", resolve="none")
    register("python.set", make_set, display="set")
    register("python.assert", raise_assertion, effect=IO, display="assert")
    register("python.raise", raise_exception, effect=IO, display="raise")
    register("python.new_exception", new_exception, display="exception")
    register("python.getattr", getattr, display="getattr", cheap=True)
    for name in dir(math):
        fn = getattr(math, name)
        if callable(fn) and not name.startswith("_"):
            register(f"math.{name}", fn, obj=fn, display=f"math.{name}", lowering=call_lowering(
                f"math.{name}", inexact=name in _MATH_INEXACT) if name in _MATH_NATIVE else None)
    register("python.format_value", format_value, display="format")
    register("python.join_str", join_str, display="join_str")
    for attr in ATTRIBUTES:
        register(f"attr.{attr}", AttrKernel(attr), display=attr, cheap=attr != "flat",
                 lowering=Lowering(f"{{0}}.{attr}") if attr in ("shape", "size", "ndim", "T") else None)
    register("python.set_shape", set_shape, effect=MUTATES, display="set_shape")
    for method in PURE_METHODS:
        register(f"method.{method}", MethodKernel(method), display=f".{method}")
    for method in MUTATING_METHODS:
        register(f"method.{method}", MethodKernel(method), effect=MUTATES, display=f".{method}",
                 resolve=_MUTATING_RESOLVE.get(method, "deep"))
    for method in STATE_METHODS:
        register(f"method.{method}", MethodKernel(method), effect=STATE, display=f".{method}")
    for name in BUILTINS:
        fn = getattr(builtins, name)
        effect = IO if name == "print" else None
        register(f"builtins.{name}", fn, obj=fn, effect=effect, display=name,
                 resolve="shallow" if name in LAZY_BUILTINS else "deep", cheap=name in LAZY_BUILTINS,
                 lowering=_BUILTIN_LOWERING.get(name))


_register_python_ops()
