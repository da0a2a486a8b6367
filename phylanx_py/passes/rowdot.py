"""Row products: ``X.T @ f(X @ v, ...)`` becomes one ``fused.rowdot`` call (primitives/rowdot.py): a single pass
over X instead of two, with no temporaries for ``f``.

``f`` is element-wise (operators, ufuncs, already fused groups). It may come through one temporary from the
statement just before: LRA writes ``p = 1/(1+exp(-(X @ w)))`` and then ``w = w - a * (X.T @ (p - y)) / n``. Such
a temporary is inlined only when nothing else can tell: it is assigned once and read once in the whole function,
its value is free of effects, and the statement reading it is free of effects too (so no effect moves across
the computation). Anything else is left as written.

The same inlining serves k-means' ``d = ((X[:, None] - C[None]) ** 2).sum(axis=2)`` then ``labels =
d.argmin(axis=1)``: one ``fused_sum_argmin`` group."""
from __future__ import annotations

import dataclasses

from phylanx_py.primitives import lookup
from phylanx_py.primitives.fused import fusable

from .. import ir
from .fuse import _SCALARS, _same_variable


class _NoMatch(Exception):
    pass


def _pure(n) -> bool:
    if isinstance(n, (ir.Var, ir.Global, ir.Const, ir.Leaf)):
        return True
    if isinstance(n, ir.Fused):
        return all(_pure(leaf) for leaf in n.leaves)
    if isinstance(n, ir.Call):
        return lookup(n.prim).effect is None and all(_pure(c) for c in ir.children(n))
    if isinstance(n, (ir.Tuple, ir.List)):
        return all(_pure(c) for c in ir.children(n))
    return False


def _is_transpose(n):
    if isinstance(n, ir.Call) and not n.kwargs and len(n.args) == 1 and n.prim in ("attr.T", "transpose"):
        return n.args[0] if isinstance(n.args[0], (ir.Var, ir.Global)) else None
    return None


def _is_matmul(n):
    return isinstance(n, ir.Call) and n.prim == "operator.matmul" and len(n.args) == 2 and not n.kwargs


class _Builder:
    """The spec of ``f`` over leaves, with ``X @ v`` as ("arg", 0), and the same expression as IR over the group's
    Leaf nodes (run instead of the kernel on small inputs, with the ordinary fast paths)."""

    def __init__(self, X, inline):
        self.X, self.inline = X, inline  # inline: {name: value} of temporaries that may be expanded
        self.leaves, self.locs, self.v, self.inner, self.used = [], [], None, None, set()

    def leaf(self, node):
        """("arg", i) of the spec and Leaf(i + 2) of the body (Leaf 0 is X, Leaf 1 is v)."""
        for i, seen in enumerate(self.leaves):
            if _same_variable(seen, node):
                return ("arg", i + 1), ir.Leaf(i + 2, node.loc)
        self.leaves.append(node)
        return ("arg", len(self.leaves)), ir.Leaf(len(self.leaves) + 1, node.loc)

    def build(self, n):
        if _is_matmul(n) and _same_variable(n.args[0], self.X):
            if self.v is not None or not _pure(n.args[1]):
                raise _NoMatch
            self.v, self.inner = n.args[1], n.loc
            return ("arg", 0), ir.Call("operator.matmul", (ir.Leaf(0, n.args[0].loc), ir.Leaf(1, n.args[1].loc)),
                                       (), n.loc)
        if isinstance(n, ir.Var) and n.depth == 0 and n.name in self.inline:
            self.used.add(n.name)
            return self.build(self.inline[n.name])
        if isinstance(n, ir.Fused):
            if n.reduce:
                raise _NoMatch
            locs = iter(n.locs)
            parts = [self.build(leaf) for leaf in n.leaves]

            def expand(node):
                if node[0] == "arg":
                    return parts[node[1]][0]
                if node[0] == "const":
                    return node
                self.locs.append(next(locs, n.loc))
                return (node[0], *(expand(c) for c in node[1:]))

            # the group stays a group in the body: its leaves are now this group's leaves (or X @ v)
            return expand(n.spec), dataclasses.replace(n, leaves=tuple(p[1] for p in parts))
        if isinstance(n, ir.Call) and fusable(n.prim) and not n.kwargs:
            self.locs.append(n.loc)
            parts = [self.build(a) for a in n.args]
            return (n.prim, *(p[0] for p in parts)), dataclasses.replace(n, args=tuple(p[1] for p in parts))
        if isinstance(n, ir.Const) and type(n.value) is not bool and isinstance(n.value, _SCALARS):
            return ("const", n.value), n
        if isinstance(n, (ir.Var, ir.Global)) or (isinstance(n, ir.Call) and _pure(n)):
            if any(_is_matmul(m) and _same_variable(m.args[0], self.X) for m in ir.walk(n)):
                raise _NoMatch
            return self.leaf(n)
        raise _NoMatch


def _match_sum_argmin(n, inline):
    """``d.argmin(axis=b)`` of ``d = chain.sum(axis=a)`` (k-means' distances and labels) as one Fused group of kind
    ("sum_argmin", a, b): one loop nest, neither the chain nor the sums built (primitives/fused.py)."""
    if not (isinstance(n, ir.Call) and n.prim in ("method.argmin", "argmin") and len(n.args) == 1):
        return None
    kwargs = dict(n.kwargs)
    axis = kwargs.pop("axis", None)
    if kwargs or not isinstance(axis, ir.Const) or type(axis.value) is not int:
        return None
    d, used = n.args[0], set()
    if isinstance(d, ir.Var) and d.depth == 0 and d.name in inline:
        d, used = inline[d.name], {d.name}
    if not (isinstance(d, ir.Fused) and d.reduce and d.reduce[0] == "sum" and type(d.reduce[1]) is int):
        return None
    inner = dataclasses.replace(d, leaves=tuple(ir.Leaf(i, leaf.loc) for i, leaf in enumerate(d.leaves)))
    body = dataclasses.replace(n, args=(inner,))
    group = ir.Fused(d.spec, body, d.leaves, d.locs + (n.loc,), ("sum_argmin", d.reduce[1], axis.value), n.loc)
    return group, used


def _match(n, inline):
    """A Fused group (kind "rowdot") for ``n`` = ``X.T @ f(X @ v)``, and the temporaries it inlined; else None."""
    found = _match_sum_argmin(n, inline)
    if found is not None:
        return found
    if not _is_matmul(n):
        return None
    X = _is_transpose(n.args[0])
    if X is None:
        return None
    b = _Builder(X, inline)
    try:
        spec, body = b.build(n.args[1])
    except _NoMatch:
        return None
    if b.v is None:
        return None
    transposed = dataclasses.replace(n.args[0], args=(ir.Leaf(0, X.loc),))
    body = dataclasses.replace(n, args=(transposed, body))
    locs = (b.inner, n.loc, *b.locs)
    group = ir.Fused(spec, body, (X, b.v, *b.leaves), locs, ("rowdot",), n.loc)
    return group, b.used


def _counts(fn: ir.Function):
    stores, loads = {}, {}
    for m in ir.walk(fn.body):
        if isinstance(m, (ir.StoreName, ir.SetVar)):
            stores[m.name] = stores.get(m.name, 0) + 1
        elif isinstance(m, ir.Var):
            loads[m.name] = loads.get(m.name, 0) + 1
    return stores, loads


def _rewrite_expr(node, inline, used, counts):
    found = _match(node, inline)
    if found is not None:
        call, names = found
        used |= names
        return call
    if isinstance(node, (ir.Lambda, ir.Function)):
        return node  # nested functions are rewritten on their own (their temporaries are theirs)
    changes = {}
    for f in dataclasses.fields(node):
        if f.name == "loc":
            continue
        old = getattr(node, f.name)
        new = _map(old, inline, used, counts)
        if new is not old:
            changes[f.name] = new
    return dataclasses.replace(node, **changes) if changes else node


def _map(v, inline, used, counts):
    if isinstance(v, ir.Block):
        return _rewrite_block(v, counts)
    if isinstance(v, ir.Node):
        return _rewrite_expr(v, inline, used, counts)
    if isinstance(v, tuple):
        new = tuple(_map(x, inline, used, counts) for x in v)
        return v if all(a is b for a, b in zip(new, v)) else new
    return v


def _rewrite_block(block: ir.Block, counts) -> ir.Block:
    """``counts``: (stores, loads) per name in the whole function (_counts)."""
    stores, loads = counts
    out = []
    for stmt in block.stmts:
        inline = {}
        prev = out[-1] if out else None
        if (isinstance(prev, ir.Assign) and isinstance(prev.target, ir.StoreName) and prev.target.depth == 0
                and stores.get(prev.target.name) == 1 and loads.get(prev.target.name) == 1
                and _pure(prev.value) and isinstance(stmt, (ir.Assign, ir.Return)) and _pure(stmt.value)):
            inline[prev.target.name] = prev.value
        used: set = set()
        new = _rewrite_expr(stmt, inline, used, counts)
        if used:
            out.pop()  # the temporary now lives inside the row product
        out.append(new)
    stmts = tuple(out)
    return block if stmts == block.stmts else dataclasses.replace(block, stmts=stmts)


def fuse_row_products(program: ir.Program) -> ir.Program:
    functions = []
    for name, fn in program.functions:
        body = _rewrite_block(fn.body, _counts(fn))
        functions.append((name, fn if body is fn.body else dataclasses.replace(fn, body=body)))
    return dataclasses.replace(program, functions=tuple(functions))
