"""Primitives: each declared once, with its NumPy kernel and every rule of it (registry.py's ``Primitive``).

Where things are declared: ``ufuncs.py`` (NumPy's element-wise functions: gradient, fused-kernel form), ``numpy_ops.py``
(the rest of NumPy), ``python_ops.py`` (operators from the one table in ``operators.py``, builtins, methods,
attributes), ``nn_ops.py``/``conv_ops.py`` (neural-network functions), ``fused.py``/``rowdot.py`` (the compiler's
groups). ``vjp.py`` is the library of gradient rules the declarations name. The registry is frozen at the end of
this module: nothing adds or replaces a primitive later.

Adding a NumPy ufunc with its gradient and fused form is one line in ``ufuncs.py``::

    unary("arcsinh", lambda g, a, x: g / np.sqrt(x * x + 1.0), fused="np.arcsinh({0})", inexact=True)

That one declaration reaches everything: the translator resolves ``np.arcsinh`` to it (``obj``), the code
generator runs it as plain bytecode on small inputs (``inline``), ``px.grad`` differentiates it (``grad``), the
fusion pass joins it to element-wise chains and the Numba/CuPy generators emit its expression (``fused``), and on
tiled arrays it runs tile by tile (NumPy ufuncs reach ``TiledArray.__array_ufunc__``). A primitive that is not a
NumPy function gives its tile rule as ``tile=`` (``tile(ops, *args, **kwargs)``, runtime/tiled/ops.py). A rule
only a new helper needs (a new family) goes in the family helper, next to the others. tests/test_declare.py
follows this recipe with a toy primitive in a registry of its own.
"""
from . import (  # noqa: F401  (declaration happens on import; the order does not matter)
           backends,
           conv_ops,
           conv_patches,
           fused,
           fused_cupy,
           fused_reduce,
           nn_ops,
           numpy_ops,
           python_ops,
           rowdot,
           ufuncs,
           vjp,
)
from .registry import (
           IO,
           MUTATES,
           PURE,
           RAISES,
           REGISTRY,
           STATE,
           Inline,
           Primitive,
           Registry,
           UnknownPrimitive,
           choose,
           exists,
           lookup,
           name_of,
           names,
           scoped,
)

REGISTRY.freeze()

__all__ = ["IO", "MUTATES", "PURE", "RAISES", "REGISTRY", "STATE", "Inline", "Primitive", "Registry",
           "UnknownPrimitive", "choose", "exists", "lookup", "name_of", "names", "scoped"]
