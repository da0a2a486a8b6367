"""The program being compiled: the entry function and every Python function it reaches, each translated once."""
from __future__ import annotations

from . import ir
from .reading import source_of
from .resolve import CellNamespace
from .translate import FunctionTranslator


class ProgramBuilder:
    """Collects the entry function and every Python function it calls, each translated once."""

    def __init__(self):
        self.functions: dict[str, ir.Function | None] = {}
        self.defaults: dict[str, tuple] = {}
        self.kwdefaults: dict[str, tuple] = {}
        self.namespaces: dict[str, dict] = {}
        self._names: dict[int, tuple[object, str]] = {}

    def add(self, pyfunc) -> str:
        """Translate ``pyfunc`` (once) and return its name in the program; recursion finds the name early."""
        hit = self._names.get(id(pyfunc))
        if hit is not None and hit[0] is pyfunc:
            return hit[1]
        name = pyfunc.__qualname__.replace(".<locals>", "")
        while name in self.functions:
            name += "_"
        self._names[id(pyfunc)] = (pyfunc, name)
        self.functions[name] = None
        module = pyfunc.__module__ or "__main__"
        self.namespaces.setdefault(module, pyfunc.__globals__)
        if pyfunc.__closure__:
            self.namespaces[f"{module}:{name}"] = CellNamespace(pyfunc)
        tree, filename, offset = source_of(pyfunc)
        translator = FunctionTranslator(self, pyfunc, filename, offset, module, name)
        self.functions[name] = translator.translate(tree, name)
        self.defaults[name] = tuple(ir.Const(v) for v in (pyfunc.__defaults__ or ()))
        self.kwdefaults[name] = tuple((k, ir.Const(v)) for k, v in (pyfunc.__kwdefaults__ or {}).items())
        return name

    def program(self, entry: str) -> ir.Program:
        return ir.Program(entry, tuple(self.functions.items()), tuple(self.defaults.items()),
                          tuple(self.kwdefaults.items()))


def translate(pyfunc) -> tuple[ir.Program, dict[str, dict]]:
    """The program rooted at ``pyfunc`` and the globals of each module it reads data from."""
    builder = ProgramBuilder()
    entry = builder.add(pyfunc)
    return builder.program(entry), builder.namespaces
