"""Python AST → IR, statements: assignments, control flow, ``return``/``raise``/``assert``/``del``, nested
``def`` (one visitor per construct, one-line docstring each)."""
from __future__ import annotations

import ast

from . import ir


class StatementVisitors:
    """Mixed into translate.FunctionTranslator, which provides ``visit``, ``loc``, ``error``, ``block``,
    ``depth_of``, ``nested`` and ``scopes``."""

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

    def visit_FunctionDef(self, node):
        """A nested ``def``: a closure over the enclosing frame, bound to its name."""
        if node.decorator_list:
            raise self.error(node.decorator_list[0], "unsupported construct: decorator on a nested function")
        lam = self.nested(node, node.name, node.body)
        return ir.Assign(self.store(ast.Name(node.name, ast.Store(), lineno=node.lineno,
                                             col_offset=node.col_offset)), lam, self.loc(node))

    def visit_Assign(self, node):
        """``a = v``, ``a, b = v``, ``a[k] = v``, ``a = b = v``, ``a.shape = s``."""
        value = self.visit(node.value)
        if len(node.targets) == 1:
            return self.assign_to(node.targets[0], value, self.loc(node))
        tmp = "__px_multi"
        self.scopes[-1].add(tmp)
        out = [ir.Assign(ir.StoreName(tmp), value, self.loc(node))]
        return out + [self.assign_to(t, ir.Var(tmp, 0, self.loc(node)), self.loc(node)) for t in node.targets]

    def assign_to(self, target, value, loc):
        """One assignment; ``a.shape = s`` (the only attribute store: reshaping in place) is a mutating call."""
        if isinstance(target, ast.Attribute) and target.attr == "shape":
            return ir.Expr(ir.Call("python.set_shape", (self.visit(target.value), value), (), self.loc(target)), loc)
        return ir.Assign(self.store(target), value, loc)

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
