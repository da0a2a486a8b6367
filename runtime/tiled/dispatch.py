"""Where TiledArray finds the code behind its NumPy face: a table of implementations, filled by the modules that
define them (NEP 18's recommended pattern: an ``implements`` decorator next to each implementation).

TiledArray (array.py, numpy_methods.py) is the value every tile rule builds, so it sits at the bottom of the
imports; its ``__getitem__``, ``__array_ufunc__``, ``astype`` ... are written in the rule modules above it
(indexing.py, rules.py, elementwise.py, kind.py ...), which register them here when imported. The package's
``__init__`` imports every registering module, and Python runs it before any of its submodules can be used, so
the table is complete before any TiledArray exists; it is not changed afterwards."""
from __future__ import annotations

from collections.abc import Callable

_IMPLEMENTATIONS: dict[str, Callable] = {}


def implements(name: str):
    """Decorator: the function is TiledArray's implementation of ``name`` (one per name)."""

    def register(fn: Callable) -> Callable:
        old = _IMPLEMENTATIONS.get(name)
        if old is not None and (old.__module__, old.__qualname__) != (fn.__module__, fn.__qualname__):
            raise RuntimeError(f"two tile implementations of {name!r}: {old.__module__}.{old.__qualname__} and "
                               f"{fn.__module__}.{fn.__qualname__}")
        _IMPLEMENTATIONS[name] = fn
        return fn

    return register


def implementation(name: str) -> Callable:
    """The registered implementation of ``name`` (RuntimeError when its module was never imported)."""
    try:
        return _IMPLEMENTATIONS[name]
    except KeyError:
        raise RuntimeError(f"no tile implementation of {name!r} is registered: runtime/tiled/__init__.py must "
                           "import the module defining it") from None
