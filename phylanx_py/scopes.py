"""Which names a function binds locally (Python's rule: assigned anywhere in it means local throughout)."""
from __future__ import annotations

import ast


class _Binder(ast.NodeVisitor):
    def __init__(self):
        self.names: list[str] = []

    def _add(self, name):
        if name not in self.names:
            self.names.append(name)

    def visit_Name(self, node):
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._add(node.id)

    def visit_FunctionDef(self, node):
        self._add(node.name)  # the name is bound here; the body is its own scope

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_ClassDef = visit_FunctionDef

    def visit_Lambda(self, node):
        for d in node.args.defaults:
            self.visit(d)

    def _comprehension(self, node):
        # The comprehension's own targets live in its scope, but a walrus inside binds here (PEP 572).
        for gen in node.generators:
            for sub in ast.walk(gen):
                if isinstance(sub, ast.NamedExpr):
                    self._add(sub.target.id)
        for sub in ast.walk(node):
            if isinstance(sub, ast.NamedExpr):
                self._add(sub.target.id)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension


def params_of(args: ast.arguments) -> tuple[list[str], list[str]]:
    positional = [a.arg for a in args.posonlyargs + args.args]
    return positional, [a.arg for a in args.kwonlyargs]


def local_names(fn: ast.FunctionDef | ast.Lambda) -> list[str]:
    """Parameters first, then every name the body binds, in order of appearance."""
    positional, kwonly = params_of(fn.args)
    binder = _Binder()
    for p in positional + kwonly:
        binder._add(p)
    body = fn.body if isinstance(fn.body, list) else [fn.body]
    for stmt in body:
        binder.visit(stmt)
    return binder.names
