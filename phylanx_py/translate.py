"""Python AST → IR. One visitor per supported construct (one-line docstring each); anything else is a
CompileError naming the construct, file:line:col and the source line."""
from __future__ import annotations

import ast
import linecache

from phylanx_py.primitives import exists

from . import ir
from .canonicalize import canonicalize
from .errors import CompileError
from .resolve import CellNamespace, Resolved, classify, resolve_attr, resolve_name
from .scopes import local_names, params_of
from .source import SourceLoc

BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv", ast.FloorDiv: "floordiv",
          ast.Mod: "mod", ast.Pow: "pow", ast.MatMult: "matmul", ast.LShift: "lshift", ast.RShift: "rshift",
          ast.BitAnd: "and_", ast.BitOr: "or_", ast.BitXor: "xor"}
UNARYOPS = {ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "invert", ast.Not: "not_"}
CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne",
          ast.Is: "is_", ast.IsNot: "is_not", ast.In: "in", ast.NotIn: "not_in"}

# Friendly names of constructs we reject (the rest are named by their AST class).
# Modules whose scalar attributes are constants (``np.pi``, ``math.inf``): folded at compile time.
_LIBRARY_MODULES = {"numpy", "math", "builtins", "cmath", "operator"}

CONSTRUCTS = {
    "With": "'with' statement", "AsyncWith": "'async with' statement", "Try": "'try' statement",
    "TryStar": "'try' statement", "ClassDef": "class definition", "Yield": "'yield' (generators)",
    "YieldFrom": "'yield from' (generators)", "Await": "'await'", "AsyncFunctionDef": "async function",
    "AsyncFor": "'async for' loop", "Global": "'global' statement", "Nonlocal": "'nonlocal' statement",
    "Import": "'import' inside a compiled function", "ImportFrom": "'import' inside a compiled function",
    "Starred": "starred expression (*args)", "GeneratorExp": "generator expression (outside a call argument)",
    "Match": "'match' statement", "Delete": "'del' of a name",
}


class FunctionTranslator(ast.NodeVisitor):
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

    # ---- helpers -------------------------------------------------------------------------------------
    def loc(self, node) -> SourceLoc:
        lineno = getattr(node, "lineno", 1) + self.line_offset
        text = linecache.getline(self.filename, lineno)
        fname = self.function_names[-1] if self.function_names else self.pyfunc.__name__
        return SourceLoc(self.filename, lineno, getattr(node, "col_offset", 0) + 1, fname, text)

    def error(self, node, message: str) -> CompileError:
        return CompileError(message, self.loc(node))

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

    def visit_FunctionDef(self, node):
        """A nested ``def``: a closure over the enclosing frame, bound to its name."""
        if node.decorator_list:
            raise self.error(node.decorator_list[0], "unsupported construct: decorator on a nested function")
        lam = self.nested(node, node.name, node.body)
        return ir.Assign(self.store(ast.Name(node.name, ast.Store(), lineno=node.lineno,
                                             col_offset=node.col_offset)), lam, self.loc(node))

    def visit_Lambda(self, node):
        """``lambda``: a closure."""
        return self.nested(node, "<lambda>", [ast.copy_location(ast.Return(node.body), node.body)])

    # ---- statements ----------------------------------------------------------------------------------
    def store(self, t) -> ir.Node:
        """An assignment target."""
        if isinstance(t, ast.Name):
            return ir.StoreName(t.id, self.depth_of(t.id) or 0, self.loc(t))
        if isinstance(t, (ast.Tuple, ast.List)):
            return ir.StoreTuple(tuple(self.store(e) for e in t.elts), self.loc(t))
        if isinstance(t, ast.Subscript):
            return ir.StoreItem(self.visit(t.value), self.visit(t.slice), self.loc(t))
        if isinstance(t, ast.Attribute):
            raise self.error(t, "unsupported construct: assignment to an attribute")
        if isinstance(t, ast.Starred):
            raise self.error(t, "unsupported construct: starred assignment target")
        return self.generic_visit(t)

    def visit_Assign(self, node):
        """``a = v``, ``a, b = v``, ``a[k] = v``, ``a = b = v``."""
        value = self.visit(node.value)
        if len(node.targets) == 1:
            return ir.Assign(self.store(node.targets[0]), value, self.loc(node))
        tmp = "__px_multi"
        self.scopes[-1].add(tmp)
        out = [ir.Assign(ir.StoreName(tmp), value, self.loc(node))]
        return out + [ir.Assign(self.store(t), ir.Var(tmp, 0, self.loc(node)), self.loc(node)) for t in node.targets]

    def visit_AnnAssign(self, node):
        """``a: T = v`` (the annotation is ignored, as at run time)."""
        if node.value is None:
            return None
        return ir.Assign(self.store(node.target), self.visit(node.value), self.loc(node))

    def visit_AugAssign(self, node):
        """Only reached for targets canonicalisation leaves alone (attributes): rejected."""
        raise self.error(node.target, "unsupported construct: augmented assignment to an attribute")

    def visit_Expr(self, node):
        """An expression statement."""
        return ir.Expr(self.visit(node.value), self.loc(node))

    def visit_Pass(self, node):
        """``pass``."""
        return None

    def visit_If(self, node):
        """``if``/``elif``/``else``."""
        return ir.If(self.visit(node.test), self.block(node.body), self.block(node.orelse), self.loc(node))

    def visit_While(self, node):
        """``while`` (with ``else``)."""
        return ir.While(self.visit(node.test), self.block(node.body), self.block(node.orelse), self.loc(node))

    def visit_For(self, node):
        """``for`` over any iterable (``range``, lists, arrays row by row, dicts, ``zip``, ``enumerate``)."""
        return ir.For(self.store(node.target), self.visit(node.iter), self.block(node.body),
                      self.block(node.orelse), self.loc(node))

    def visit_Break(self, node):
        """``break``."""
        return ir.Break(self.loc(node))

    def visit_Continue(self, node):
        """``continue``."""
        return ir.Continue(self.loc(node))

    def visit_Return(self, node):
        """``return`` anywhere."""
        value = self.visit(node.value) if node.value is not None else ir.Const(None, self.loc(node))
        return ir.Return(value, self.loc(node))

    def visit_Assert(self, node):
        """``assert cond, msg``: raises AssertionError (as an ExecutionError) when cond is false."""
        loc = self.loc(node)
        msg = (self.visit(node.msg),) if node.msg is not None else ()
        fail = ir.Block((ir.Expr(ir.Call("python.assert", msg, (), loc), loc),), loc)
        return ir.If(self.visit(node.test), ir.Block((), loc), fail, loc)

    def visit_Raise(self, node):
        """``raise Exc(...)``: surfaces as an ExecutionError at this line, chained to the exception."""
        if node.exc is None or node.cause is not None:
            raise self.error(node, "unsupported construct: bare 'raise' or 'raise ... from'")
        return ir.Expr(ir.Call("python.raise", (self.visit(node.exc),), (), self.loc(node)), self.loc(node))

    def visit_Delete(self, node):
        """``del a[k]``."""
        out = []
        for t in node.targets:
            if not isinstance(t, ast.Subscript):
                return self.generic_visit(node)
            call = ir.Call("operator.delitem", (self.visit(t.value), self.visit(t.slice)), (), self.loc(t))
            out.append(ir.Expr(call, self.loc(node)))
        return out

    # ---- expressions ---------------------------------------------------------------------------------
    def visit_Constant(self, node):
        """A literal."""
        return ir.Const(node.value, self.loc(node))

    def visit_Name(self, node):
        """A local variable, or a global resolved at compile time (NumPy only if it *is* NumPy)."""
        depth = self.depth_of(node.id)
        if depth is not None:
            return ir.Var(node.id, depth, self.loc(node))
        return self.value_of(self.static(node), node)

    def visit_Attribute(self, node):
        """``np.pi``, ``np.linalg.norm`` (static), or ``x.T``/``x.shape`` ... on a run-time value."""
        r = self.static(node)
        if r is not None:
            if r.kind in ("data", "builtin_data"):
                module = self.static(node.value).obj
                if module.__name__.split(".")[0] not in _LIBRARY_MODULES:
                    # a user module's data (``config.SCALE``): read when the line runs, as Python does
                    self.builder.namespaces.setdefault(module.__name__, vars(module))
                    return ir.Global(node.attr, module.__name__, self.loc(node))
            return self.value_of(r, node)
        if exists(f"attr.{node.attr}"):
            return ir.Call(f"attr.{node.attr}", (self.visit(node.value),), (), self.loc(node))
        if node.attr.startswith("__"):
            raise self.error(node, f"unsupported attribute '.{node.attr}'")
        # any other attribute read (``np.finfo(t).eps``, ``eigh(a).eigenvalues``, ``d.get`` as a value) is
        # Python's getattr at run time: an AttributeError there names this line
        return ir.Call("python.getattr", (self.visit(node.value), ir.Const(node.attr, self.loc(node))),
                       (), self.loc(node))

    def visit_Call(self, node):
        """A call: primitive, compiled Python function, method, lambda or a function value."""
        f, loc = node.func, self.loc(node)
        if isinstance(f, ast.Name) and f.id.startswith("__px_inplace_"):
            args, _ = self.args_of(node)
            return ir.Call("operator." + f.id[len("__px_inplace_"):], args, (), loc)
        r = self.static(f)
        if r is not None:
            args, kwargs = self.args_of(node)
            if r.kind == "prim":
                return ir.Call(r.prim, args, kwargs, loc)
            if r.kind == "function":
                return ir.Apply(ir.FuncRef(self.builder.add(r.obj), self.loc(f)), args, kwargs, loc)
            if r.kind == "class" and issubclass(r.obj, BaseException):
                return ir.Call("python.new_exception", (ir.Const(r.obj, loc),) + args, kwargs, loc)
            if r.kind == "module":
                raise self.error(f, f"module '{r.name}' is not callable")
            if r.kind in ("class", "data", "builtin_data"):
                raise self.error(f, f"unsupported call: cannot compile a call to {r.name!r} "
                                    f"({type(r.obj).__name__ if r.kind != 'class' else 'class'})")
            raise self.error(f, self._unsupported_callable(r))
        if isinstance(f, ast.Attribute):
            if not exists(f"method.{f.attr}"):
                raise self.error(f, f"unsupported method '.{f.attr}()'")
            receiver = self.visit(f.value)
            args, kwargs = self.args_of(node)
            return ir.Call(f"method.{f.attr}", (receiver,) + args, kwargs, loc)
        func = self.visit(f)
        args, kwargs = self.args_of(node)
        return ir.Apply(func, args, kwargs, loc)

    def visit_BinOp(self, node):
        """``+ - * / // % ** @ << >> & | ^`` with Python semantics (NumPy's on arrays)."""
        return ir.Call(f"operator.{BINOPS[type(node.op)]}", (self.visit(node.left), self.visit(node.right)), (),
                       self.loc(node))

    def visit_UnaryOp(self, node):
        """``-x +x ~x not x``."""
        return ir.Call(f"operator.{UNARYOPS[type(node.op)]}", (self.visit(node.operand),), (), self.loc(node))

    def visit_Compare(self, node):
        """One comparison (chains were split by canonicalisation); ``in``/``is`` included."""
        op = CMPOPS[type(node.ops[0])]
        return ir.Call(f"operator.{op}", (self.visit(node.left), self.visit(node.comparators[0])), (),
                       self.loc(node))

    def visit_BoolOp(self, node):
        """``and``/``or`` with short circuit."""
        op = "and" if isinstance(node.op, ast.And) else "or"
        return ir.BoolOp(op, tuple(self.visit(v) for v in node.values), self.loc(node))

    def visit_IfExp(self, node):
        """``a if c else b``."""
        return ir.IfExp(self.visit(node.test), self.visit(node.body), self.visit(node.orelse), self.loc(node))

    def visit_NamedExpr(self, node):
        """``(x := v)``."""
        name = node.target.id
        return ir.SetVar(name, self.visit(node.value), self.depth_of(name) or 0, self.loc(node))

    def visit_List(self, node):
        """``[a, b]``."""
        return ir.List(tuple(self.visit(e) for e in node.elts), self.loc(node))

    def visit_Tuple(self, node):
        """``(a, b)``."""
        return ir.Tuple(tuple(self.visit(e) for e in node.elts), self.loc(node))

    def visit_Set(self, node):
        """``{a, b}``."""
        return ir.Call("python.set", tuple(self.visit(e) for e in node.elts), (), self.loc(node))

    def visit_Dict(self, node):
        """``{k: v}``."""
        if any(k is None for k in node.keys):
            raise self.error(node, "unsupported construct: dict unpacking (**d) in a dict literal")
        return ir.Dict(tuple(self.visit(k) for k in node.keys), tuple(self.visit(v) for v in node.values),
                       self.loc(node))

    def visit_Subscript(self, node):
        """``a[i]``, ``a[1:3]``, ``a[::2, None]``, ``a[mask]``, ``d[k]``."""
        return ir.Call("operator.getitem", (self.visit(node.value), self.visit(node.slice)), (), self.loc(node))

    def visit_Slice(self, node):
        """``lo:hi:step`` inside a subscript."""
        parts = tuple(self.visit(p) if p is not None else ir.Const(None, self.loc(node))
                      for p in (node.lower, node.upper, node.step))
        return ir.Call("python.slice", parts, (), self.loc(node))

    def visit_JoinedStr(self, node):
        """An f-string."""
        return ir.Call("python.join_str", tuple(self.visit(v) for v in node.values), (), self.loc(node))

    def visit_FormattedValue(self, node):
        """One ``{value!r:spec}`` field of an f-string."""
        conv = chr(node.conversion) if node.conversion and node.conversion > 0 else None
        spec = self.visit(node.format_spec) if node.format_spec is not None else ir.Const("", self.loc(node))
        return ir.Call("python.format_value", (self.visit(node.value), ir.Const(conv), spec), (), self.loc(node))

    def visit_ListComp(self, node):
        """``[e for x in xs if c for y in ys]``: a nested function building the list (own scope)."""
        return self.comprehension(node, "list")

    def visit_SetComp(self, node):
        """``{e for x in xs}``."""
        return self.comprehension(node, "set")

    def visit_DictComp(self, node):
        """``{k: v for x in xs}``."""
        return self.comprehension(node, "dict")

    def comprehension(self, node, kind: str) -> ir.Node:
        loc = self.loc(node)
        gens = node.generators
        if any(g.is_async for g in gens):
            raise self.error(node, "unsupported construct: async comprehension")
        first_iter = self.visit(gens[0].iter)  # evaluated in the enclosing scope, as in Python
        bound = {"__px_acc", "__px_iter"}
        for g in gens:
            bound |= {n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        self.scopes.append(bound)
        try:
            acc = ir.Var("__px_acc", 0, loc)
            if kind == "dict":
                inner = ir.Assign(ir.StoreItem(acc, self.visit(node.key), loc), self.visit(node.value), loc)
            else:
                method = "method.append" if kind == "list" else "method.add"
                inner = ir.Expr(ir.Call(method, (acc, self.visit(node.elt)), (), loc), loc)
            body: ir.Node = inner
            for i, g in reversed(list(enumerate(gens))):
                for cond in reversed(g.ifs):
                    body = ir.If(self.visit(cond), ir.Block((body,), loc), ir.Block((), loc), self.loc(cond))
                it = ir.Var("__px_iter", 0, loc) if i == 0 else self.visit(g.iter)
                body = ir.For(self.store(g.target), it, ir.Block((body,), loc), ir.Block((), loc), self.loc(g.target))
            empty = {"list": ir.List((), loc), "dict": ir.Dict((), (), loc),
                     "set": ir.Call("python.set", (), (), loc)}[kind]
            stmts = (ir.Assign(ir.StoreName("__px_acc", 0, loc), empty, loc), body, ir.Return(acc, loc))
            fn = ir.Function(f"<{kind}comp>", ("__px_iter",), ir.Block(stmts, loc), tuple(sorted(bound)), (), loc)
        finally:
            self.scopes.pop()
        return ir.Apply(ir.Lambda(fn, (), (), loc), (first_iter,), (), loc)
