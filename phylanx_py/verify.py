"""``verify()``: checks a tree before it runs: primitives exist, names are bound, functions resolve."""
from __future__ import annotations

from phylanx_py.primitives import exists

from . import ir
from .errors import CompileError


def _check_function(program: ir.Program, fn: ir.Function, scopes: list[set[str]]):
    scopes = scopes + [set(fn.locals) | set(fn.params) | set(fn.kwonly)]
    known = {name for name, _ in program.functions}
    for node in _walk_own(fn.body):
        if isinstance(node, ir.Call) and not exists(node.prim):
            raise CompileError(f"unknown primitive '{node.prim}'", node.loc)
        if isinstance(node, (ir.Var, ir.StoreName, ir.SetVar)):
            if node.depth >= len(scopes) or node.name not in scopes[-1 - node.depth]:
                raise CompileError(f"name '{node.name}' is not bound in this scope", node.loc)
        if isinstance(node, ir.FuncRef) and node.name not in known:
            raise CompileError(f"unknown function '{node.name}'", node.loc)
        if isinstance(node, ir.Lambda):
            _check_function(program, node.function, scopes)


def _walk_own(node):
    """Nodes of this function, not descending into nested lambda bodies (checked with their own scope);
    a lambda's defaults are evaluated here, so they belong to this function."""
    yield node
    if isinstance(node, ir.Lambda):
        for d in node.defaults + tuple(v for _, v in node.kwdefaults):
            yield from _walk_own(d)
        return
    for c in ir.children(node):
        yield from _walk_own(c)


def verify(program: ir.Program) -> ir.Program:
    """Raise CompileError at the first problem's location; return the program unchanged otherwise."""
    if program.entry not in {name for name, _ in program.functions}:
        raise CompileError(f"entry function '{program.entry}' is missing")
    for _, fn in program.functions:
        _check_function(program, fn, [])
    return program
