"""Primitives: the registry and its kernels (NumPy reference; Numba and CuPy variants where registered)."""
from . import backends, fused, nn_ops, numpy_ops, python_ops, rowdot  # noqa: F401  (registration happens on import)
from .registry import IO, MUTATES, PURE, STATE, Primitive, UnknownPrimitive, choose, exists, lookup, name_of, names

__all__ = ["IO", "MUTATES", "PURE", "STATE", "Primitive", "UnknownPrimitive", "choose", "exists", "lookup", "name_of",
           "names"]
