"""TiledArray's NumPy face: its operators, methods and NEP 13/18 hooks, each routed to the NumPy function of the
same meaning and so to the tile rules, as a base class of TiledArray. The hooks' implementations live in the rule
modules above this one (rules.py, indexing.py, kind.py ...) and are found in dispatch.py's table."""
from __future__ import annotations

import numpy as np

from .dispatch import implementation


class NumPyMethods:
    """``x + y``, ``x.sum()``, ``x[k]``, ``np.exp(x)`` ... on a TiledArray: the operators and methods are installed
    below from tables; ``np.*`` calls arrive through ``__array_ufunc__`` / ``__array_function__``."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return implementation("array_ufunc")(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return implementation("array_function")(func, args, kwargs)

    @staticmethod
    def __phylanx_call__(name, args, kwargs):
        """A primitive called on a tiled array in plain Python (``px.nn.softmax(t)``): its tile rule."""
        return implementation("tile_rule")(name, args, kwargs)

    def __getitem__(self, key):
        return implementation("getitem")(self, key)

    def __setitem__(self, key, value):
        implementation("setitem")(self, key, value)

    def __iter__(self):
        return iter(implementation("fallback")("iter", lambda a: list(a), (self,), {}))

    def __bool__(self):
        if self.size != 1:
            raise ValueError("The truth value of an array with more than one element is ambiguous. "
                             "Use a.any() or a.all()")
        return bool(self.to_numpy())

    def __float__(self):
        return float(self.to_numpy())

    def __int__(self):
        return int(self.to_numpy())


def _binary(ufunc):
    def op(self, other):
        return ufunc(self, other)

    def rop(self, other):
        return ufunc(other, self)

    return op, rop


for _name, _uf in {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
                   "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power, "matmul": np.matmul,
                   "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor, "lshift": np.left_shift,
                   "rshift": np.right_shift}.items():
    _op, _rop = _binary(_uf)
    setattr(NumPyMethods, f"__{_name}__", _op)
    setattr(NumPyMethods, f"__r{_name}__", _rop)
for _name, _uf in {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
                   "eq": np.equal, "ne": np.not_equal}.items():
    setattr(NumPyMethods, f"__{_name}__", _binary(_uf)[0])
for _name, _uf in {"neg": np.negative, "pos": np.positive, "abs": np.absolute, "invert": np.invert}.items():
    setattr(NumPyMethods, f"__{_name}__", lambda self, _uf=_uf: _uf(self))


def _inplace(ufunc):
    def iop(self, other):
        self._become(ufunc(self._snapshot(), other))
        return self

    return iop


for _name, _uf in {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
                   "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power}.items():
    setattr(NumPyMethods, f"__i{_name}__", _inplace(_uf))


def _method(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    method.__name__ = fn.__name__
    return method


for _fn in (np.sum, np.mean, np.prod, np.min, np.max, np.any, np.all, np.var, np.std, np.argmin, np.argmax,
            np.dot, np.ravel, np.clip, np.squeeze, np.cumsum, np.round, np.nonzero):
    setattr(NumPyMethods, _fn.__name__, _method(_fn))
NumPyMethods.flatten = lambda self: np.ravel(self).copy()  # a copy, as ndarray.flatten (ravel may be a view)


def _transpose(self, *axes):
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    return np.transpose(self, axes or None)


def _reshape(self, *shape, order="C"):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return np.reshape(self, shape)


def _astype(self, dtype, copy=True):
    return implementation("astype")(self, dtype)


NumPyMethods.transpose = _transpose
NumPyMethods.swapaxes = _method(np.swapaxes)
NumPyMethods.T = property(lambda self: np.transpose(self))
NumPyMethods.reshape = _reshape
NumPyMethods.astype = _astype
