"""``import`` statements inside a compiled function (``import numpy as np``, ``from math import sqrt``): the module is
imported when the function is translated, as Python would import it when the line runs, and the names it binds
resolve at compile time like the module's globals do (``np.exp`` is the primitive ``numpy.exp``).

Python makes a name an import binds local to the whole function, so the translator accepts an import only as a
statement of the function's own body (not inside a block, a loop or a nested function), of a name nothing else in
the function assigns, and not used before the import's line; anything else is a CompileError at the import."""
from __future__ import annotations

import ast
import importlib

from .resolve import classify


class ImportVisitors:
    """Mixed into translate.FunctionTranslator: ``imported`` holds {name: (object, module name, attribute)} for
    the imports translated so far, ``pending_imports`` {name: line} for those of the body still to come."""

    def prepare_imports(self, body) -> None:
        """Called with the top-level function's statements before they are translated (with none by the
        translator's constructor)."""
        self.imported, self.pending_imports, self.top_imports = {}, {}, set()
        for stmt in body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self.top_imports.add(id(stmt))
                for alias in stmt.names:
                    self.pending_imports.setdefault(_bound_name(alias, stmt), stmt.lineno + self.line_offset)

    def visit_Import(self, node):
        """``import m``, ``import m.sub``, ``import m as x``: binds a module, resolved at compile time."""
        for alias in self._checked(node):
            try:
                module = importlib.import_module(alias.name)
            except ImportError as e:
                raise self.error(node, f"{type(e).__name__}: {e}") from None
            if alias.asname is None:  # ``import a.b`` binds ``a``
                top = alias.name.split(".")[0]
                self._bind(top, importlib.import_module(top), None, None)
            else:
                self._bind(alias.asname, module, None, None)
        return None

    def visit_ImportFrom(self, node):
        """``from m import f``, ``from . import g as h``: binds each name to the module's attribute."""
        aliases = self._checked(node)
        package = self.globals.get("__package__") or None
        try:
            module = importlib.import_module("." * node.level + (node.module or ""), package if node.level else None)
        except ImportError as e:
            raise self.error(node, f"{type(e).__name__}: {e}") from None
        for alias in aliases:
            if not hasattr(module, alias.name):
                try:  # a submodule not imported yet: ``from numpy import linalg``
                    obj = importlib.import_module(f"{module.__name__}.{alias.name}")
                except ImportError:
                    raise self.error(node, f"ImportError: cannot import name '{alias.name}' from "
                                           f"'{module.__name__}'") from None
            else:
                obj = getattr(module, alias.name)
            self._bind(alias.asname or alias.name, obj, module.__name__, alias.name)
        return None

    def _checked(self, node):
        if id(node) not in self.top_imports or len(self.scopes) != 1:
            raise self.error(node, "unsupported construct: 'import' inside a block or a nested function of a "
                                   "compiled function (an import is supported as a statement of the function's own "
                                   "body)")
        for alias in node.names:
            if alias.name == "*":
                raise self.error(node, "unsupported construct: 'from ... import *'")
            name = _bound_name(alias, node)
            if name in self.scopes[0]:
                raise self.error(node, f"'{name}' is bound by this import and also assigned in the function: "
                                       "give the module another name")
        return node.names

    def _bind(self, name, obj, module, attr):
        self.pending_imports.pop(name, None)
        self.imported[name] = (obj, module, attr)

    def imported_static(self, node):
        """The compile-time meaning of a name an import of this function binds, else None."""
        if node.id in self.pending_imports and node.id not in self.imported:
            raise self.error(node, f"local variable '{node.id}' is used before the import at line "
                                   f"{self.pending_imports[node.id]} binds it (Python raises UnboundLocalError)")
        found = self.imported.get(node.id)
        return None if found is None else classify(found[0], node.id, from_globals=False)

    def imported_source(self, name):
        """(module name, attribute) an imported name reads, for data read when the line runs; None otherwise."""
        found = self.imported.get(name)
        return None if found is None or found[1] is None else (found[1], found[2])


def _bound_name(alias, stmt) -> str:
    if alias.asname:
        return alias.asname
    return alias.name.split(".")[0] if isinstance(stmt, ast.Import) else alias.name
