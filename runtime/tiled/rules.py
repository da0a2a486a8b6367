"""NumPy's functions and ufuncs on tiled arrays (NEP 13/18 dispatch: TiledArray's ``__array_ufunc__``/
``__array_function__`` are these ``array_ufunc``/``array_function``): the tile rule on the function's declaration
(primitives/tile_rules.py) against this runtime's operations (ops.py), and the fallback for the rest.

A NumPy function without a tile rule gathers its tiled inputs to the client and runs there (fallback.py), with a
``TileFallbackWarning`` naming the primitive and the user's line: correct first, and visible. ``covered()`` lists them
(docs/tiled.md: "What there is, and how it behaves" gives the command: python -c "import phylanx_py as px;
print(px.tiled.rules.covered())")."""
from __future__ import annotations

from phylanx_py.primitives import lookup, name_of, tile_rules

from .dispatch import implements
from .fallback import fallback
from .ops import OPS

covered = tile_rules.covered


@implements("array_ufunc")
def array_ufunc(ufunc, method, inputs, kwargs):
    return tile_rules.ufunc(OPS, ufunc, method, inputs, kwargs)


@implements("array_function")
def array_function(func, args, kwargs):
    name = name_of(func)
    rule = lookup(name).tile if name is not None else None
    if rule is None:
        return fallback(getattr(func, "__name__", str(func)), func, args, kwargs)
    return rule(OPS, *args, **kwargs)
