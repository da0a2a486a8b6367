"""Primitives: the registry and its kernels (NumPy reference; Numba and CuPy variants where registered)."""
from . import (  # noqa: F401  (registration happens on import)
           backends,
           conv_ops,
           fused,
           nn_ops,
           numpy_ops,
           python_ops,
           rowdot,
           vjp,  # noqa: F401, I001  (after the kernels: gradient rules attach to registered primitives)
)
from .registry import IO, MUTATES, PURE, STATE, Primitive, UnknownPrimitive, choose, exists, lookup, name_of, names

__all__ = ["IO", "MUTATES", "PURE", "STATE", "Primitive", "UnknownPrimitive", "choose", "exists", "lookup", "name_of",
           "names"]
