"""Python AST → IR, expressions: names and attributes resolved at compile time, calls, operators, literals,
subscripts, f-strings, lambdas and comprehensions (one visitor per construct, one-line docstring each)."""
from __future__ import annotations

import ast

from phylanx_py.primitives import exists
from phylanx_py.primitives.operators import BY_AST as OPERATORS_BY_AST

from . import ir

# Modules whose scalar attributes are constants (``np.pi``, ``math.inf``): folded at compile time.
_LIBRARY_MODULES = {"numpy", "math", "builtins", "cmath", "operator"}


def _operator(node: ast.AST) -> str:
    """The operator primitive's name of an AST operator node (the one table: primitives/operators.py)."""
    return OPERATORS_BY_AST[type(node).__name__].name


class ExpressionVisitors:
    """Mixed into translate.FunctionTranslator, which provides ``visit``, ``loc``, ``error``, ``static``,
    ``value_of``, ``args_of``, ``store``, ``nested``, ``builder`` and ``scopes``."""

    def visit_Lambda(self, node):
        """``lambda``: a closure."""
        return self.nested(node, "<lambda>", [ast.copy_location(ast.Return(node.body), node.body)])

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
        return ir.Call(f"operator.{_operator(node.op)}", (self.visit(node.left), self.visit(node.right)), (),
                       self.loc(node))

    def visit_UnaryOp(self, node):
        """``-x +x ~x not x``."""
        return ir.Call(f"operator.{_operator(node.op)}", (self.visit(node.operand),), (), self.loc(node))

    def visit_Compare(self, node):
        """One comparison (chains were split by canonicalisation); ``in``/``is`` included."""
        op = _operator(node.ops[0])
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
