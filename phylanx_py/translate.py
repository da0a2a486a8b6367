"""Python AST → IR for one function: name resolution, locations, errors, function bodies. One visitor per supported
construct (one-line docstring each: statements in translate_statements.py, expressions in translate_expressions.py);
anything else is a CompileError naming the construct, file:line:col and the source line."""
from __future__ import annotations

import ast
import importlib
import linecache

from phylanx_py.primitives import exists

from . import ir
from .canonicalize import canonicalize
from .errors import CompileError
from .resolve import CellNamespace, Resolved, classify, resolve_attr, resolve_name
from .scopes import local_names, params_of
from .source import SourceLoc
from .translate_expressions import ExpressionVisitors
from .translate_imports import ImportVisitors
from .translate_statements import StatementVisitors
from .turns import turn

# Friendly names of constructs we reject (the rest are named by their AST class).
CONSTRUCTS = {
    "With": "'with' statement", "AsyncWith": "'async with' statement", "Try": "'try' statement",
    "TryStar": "'try' statement", "ClassDef": "class definition", "Yield": "'yield' (generators)",
    "YieldFrom": "'yield from' (generators)", "Await": "'await'", "AsyncFunctionDef": "async function",
    "AsyncFor": "'async for' loop", "Global": "'global' statement", "Nonlocal": "'nonlocal' statement",
    "Starred": "starred expression (*args)", "GeneratorExp": "generator expression (outside a call argument)",
    "Match": "'match' statement", "Delete": "'del' of a name",
}


class FunctionTranslator(StatementVisitors, ExpressionVisitors, ImportVisitors, ast.NodeVisitor):
    """Translates one function; ``builder`` (program.ProgramBuilder) compiles the functions it calls."""

    def __init__(self, builder, pyfunc, filename: str, line_offset: int, module: str,
                 name: str = ""):
        self.builder = builder
        self.pyfunc = pyfunc
        self.globals = pyfunc.__globals__
        self.closure = CellNamespace(pyfunc) if pyfunc.__closure__ else {}
        self.closure_key = f"{module}:{name}"
        self.filename = filename
        self.line_offset = line_offset
        self.module = module
        self.scopes: list[set[str]] = []
        self.function_names: list[str] = []
        self.prepare_imports(())

    # ---- helpers -------------------------------------------------------------------------------------
    def loc(self, node) -> SourceLoc:
        lineno = getattr(node, "lineno", 1) + self.line_offset
        text = linecache.getline(self.filename, lineno)
        fname = self.function_names[-1] if self.function_names else self.pyfunc.__name__
        return SourceLoc(self.filename, lineno, getattr(node, "col_offset", 0) + 1, fname, text)

    def error(self, node, message: str) -> CompileError:
        return CompileError(message, self.loc(node))

    def visit(self, node):
        turn()  # (a translation beside the calls takes its turns here: turns.py); else ast.NodeVisitor's visit
        return getattr(self, "visit_" + node.__class__.__name__, self.generic_visit)(node)

    def generic_visit(self, node):
        name = type(node).__name__
        raise self.error(node, f"unsupported construct: {CONSTRUCTS.get(name, name)}")

    def depth_of(self, name: str) -> int | None:
        for depth, scope in enumerate(reversed(self.scopes)):
            if name in scope:
                return depth
        return None

    def static(self, node) -> Resolved | None:
        """Compile-time meaning of a free name or a ``module.attr`` chain; None for run-time values."""
        if isinstance(node, ast.Name):
            if self.depth_of(node.id) is not None:
                return None
            r = self.imported_static(node)
            if r is not None:
                return r
            if node.id in self.closure:
                try:
                    value = self.closure[node.id]
                except NameError as e:
                    raise self.error(node, str(e)) from None
                return classify(value, node.id, from_globals=True)
            r = resolve_name(node.id, self.globals)
            if r is None:
                raise self.error(node, f"name '{node.id}' is not defined")
            return r
        if isinstance(node, ast.Attribute):
            base = self.static(node.value)
            if base is not None and base.kind == "class" and exists(f"method.{node.attr}") \
                    and callable(getattr(base.obj, node.attr, None)):
                # ``str.upper``, ``np.ndarray.sum``: an unbound method, the registered method primitive
                return Resolved("prim", getattr(base.obj, node.attr), f"method.{node.attr}", f"{base.name}.{node.attr}")
            if base is not None and base.kind == "prim" and exists(f"{base.prim}.{node.attr}"):
                # ufunc methods: ``np.add.outer``, ``np.minimum.reduce``, ``np.add.at`` (numpy_ops.UFUNC_METHODS)
                return Resolved("prim", getattr(base.obj, node.attr), f"{base.prim}.{node.attr}",
                                f"{base.name}.{node.attr}")
            if base is None or base.kind != "module":
                return None
            r = resolve_attr(base, node.attr)
            if r.kind == "missing":
                if getattr(base.obj, "__name__", "").split(".")[0] == "numpy":
                    raise self.error(node, f"unknown NumPy function '{r.name}'")
                raise self.error(node, f"module '{base.name}' has no attribute '{node.attr}'")
            return r
        return None

    def value_of(self, r: Resolved, node) -> ir.Node:
        """A statically resolved name used as a value."""
        loc = self.loc(node)
        if r.kind in ("prim", "class", "builtin_data"):
            return ir.Const(r.obj, loc)
        if r.kind == "function":
            return ir.FuncRef(self.builder.add(r.obj), loc)
        if r.kind == "data":
            source = self.imported_source(node.id) if isinstance(node, ast.Name) else None
            if source is not None:  # ``from config import TABLE``: read from its module when the line runs
                module = importlib.import_module(source[0])
                self.builder.namespaces.setdefault(module.__name__, vars(module))
                return ir.Global(source[1], module.__name__, loc)
            if isinstance(node, ast.Name):
                module = self.closure_key if node.id in self.closure else self.module
                return ir.Global(node.id, module, loc)
            return ir.Const(r.obj, loc)
        if r.kind == "module":
            raise self.error(node, f"module '{r.name}' used as a value")
        raise self.error(node, self._unsupported_callable(r))

    def _unsupported_callable(self, r: Resolved) -> str:
        mod = getattr(r.obj, "__module__", None) or ""
        if r.name.startswith(("np.", "numpy.")) or mod.startswith("numpy"):
            return f"unsupported NumPy function '{r.name}'"
        return f"unsupported function '{r.name}'"

    def args_of(self, node: ast.Call):
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.error(a, "unsupported construct: starred argument (*args) in a call")
        for k in node.keywords:
            if k.arg is None:
                raise self.error(k.value, "unsupported construct: keyword unpacking (**kwargs) in a call")
        return tuple(self.visit(a) for a in node.args), tuple((k.arg, self.visit(k.value)) for k in node.keywords)

    def block(self, stmts) -> ir.Block:
        out = []
        for s in stmts:
            r = self.visit(s)
            if r is None:
                continue
            out.extend(r if isinstance(r, list) else [r])
        loc = self.loc(stmts[0]) if stmts else self.loc(None)
        return ir.Block(tuple(out), loc)

    # ---- functions -----------------------------------------------------------------------------------
    def translate(self, fdef, name: str) -> ir.Function:
        """The top-level function (or lambda) ``fdef``, after canonicalisation."""
        if isinstance(fdef, ast.AsyncFunctionDef):  # calling it must give a coroutine: not ours to make
            raise self.error(fdef, "unsupported construct: async function (a compiled function runs to its result; "
                                   "call it from async code instead, e.g. in loop.run_in_executor)")
        fdef = canonicalize(fdef)
        if isinstance(fdef, ast.Lambda):
            body = [ast.copy_location(ast.Return(fdef.body), fdef.body)]
        else:
            body = fdef.body
        return self.function(fdef, name, body)

    def function(self, fdef, name: str, body) -> ir.Function:
        a = fdef.args
        if a.vararg or a.kwarg:
            raise self.error(a.vararg or a.kwarg, "unsupported construct: *args/**kwargs parameters")
        positional, kwonly = params_of(a)
        self.scopes.append(set(local_names(fdef)))
        self.function_names.append(name)
        try:
            stmts = body
            if stmts and isinstance(stmts[0], ast.Expr) and isinstance(stmts[0].value, ast.Constant) \
                    and isinstance(stmts[0].value.value, str):
                stmts = stmts[1:]  # the docstring
            if len(self.scopes) == 1:
                self.prepare_imports(stmts)
            blk = self.block(stmts)
            return ir.Function(name, tuple(positional), blk, tuple(sorted(self.scopes[-1])), tuple(kwonly),
                               self.loc(fdef))
        finally:
            self.scopes.pop()
            self.function_names.pop()

    def nested(self, fdef, name: str, body) -> ir.Lambda:
        a = fdef.args
        defaults = tuple(self.visit(d) for d in a.defaults)
        kwdefaults = tuple((k.arg, self.visit(d)) for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
        fn = self.function(fdef, name, body)
        return ir.Lambda(fn, defaults, kwdefaults, self.loc(fdef))
