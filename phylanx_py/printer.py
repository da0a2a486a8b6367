"""The PhySL-like text form of the tree: one statement a line, ``name@line:col(...)`` for every call."""
from __future__ import annotations

from . import ir


def _at(loc) -> str:
    return f"@{loc.lineno}:{loc.col}" if loc.lineno else ""


def _label(prim: str) -> str:
    try:
        from phylanx_py.primitives import lookup  # read-only use of the registry, for readable names

        return lookup(prim).label
    except Exception:
        return prim


def expr(n) -> str:
    """One expression as text."""
    if isinstance(n, ir.Const):
        v = n.value
        return getattr(v, "__name__", None) if isinstance(v, type) or callable(v) else repr(v)
    if isinstance(n, ir.Var):
        return n.name
    if isinstance(n, ir.Global):
        return f"{n.module}.{n.name}"
    if isinstance(n, ir.FuncRef):
        return n.name
    if isinstance(n, (ir.Call, ir.Apply)):
        head = _label(n.prim) if isinstance(n, ir.Call) else expr(n.func)
        parts = [expr(a) for a in n.args] + [f"{k}={expr(v)}" for k, v in n.kwargs]
        return f"{head}{_at(n.loc)}({', '.join(parts)})"
    if isinstance(n, ir.Fused):
        leaves = ", ".join(f"${i}={expr(leaf)}" for i, leaf in enumerate(n.leaves))
        kind = f"fused_{n.reduce[0]}" if n.reduce else "fused"
        return f"{kind}{_at(n.loc)}[{expr(n.body)}]({leaves})"
    if isinstance(n, ir.Leaf):
        return f"${n.index}"
    if isinstance(n, ir.IfExp):
        return f"if{_at(n.loc)}({expr(n.cond)}, {expr(n.then)}, {expr(n.orelse)})"
    if isinstance(n, ir.BoolOp):
        return f"__{n.op}{_at(n.loc)}({', '.join(expr(v) for v in n.values)})"
    if isinstance(n, ir.SetVar):
        return f"store{_at(n.loc)}({n.name}, {expr(n.value)})"
    if isinstance(n, ir.List):
        return f"list({', '.join(expr(v) for v in n.items)})"
    if isinstance(n, ir.Tuple):
        return f"make_tuple({', '.join(expr(v) for v in n.items)})"
    if isinstance(n, ir.Dict):
        pairs = ", ".join(f"{expr(k)}: {expr(v)}" for k, v in zip(n.keys, n.values))
        return f"dict({pairs})"
    if isinstance(n, ir.Lambda):
        fn = n.function
        body = "; ".join(_stmt_inline(s) for s in fn.body.stmts)
        return f"lambda{_at(n.loc)}({', '.join(fn.params)}, {body})"
    if isinstance(n, ir.StoreName):
        return n.name
    if isinstance(n, ir.StoreTuple):
        return f"make_tuple({', '.join(expr(t) for t in n.targets)})"
    if isinstance(n, ir.StoreItem):
        return f"slice_at({expr(n.obj)}, {expr(n.key)})"
    return type(n).__name__


def _stmt_inline(s) -> str:
    return "\n".join(stmt(s, 0)).strip()


def stmt(s, depth: int) -> list[str]:
    """A statement as indented lines, each ending with its ``# file:line``."""
    pad = "    " * depth
    where = f"  # {s.loc.short}" if s.loc.lineno else ""
    if isinstance(s, ir.Block):
        lines = [f"{pad}block("]
        for c in s.stmts:
            lines += stmt(c, depth + 1)
        return lines + [f"{pad})"]
    if isinstance(s, ir.Assign):
        return [f"{pad}define({expr(s.target)}, {expr(s.value)}){where}"]
    if isinstance(s, ir.Expr):
        return [f"{pad}{expr(s.value)}{where}"]
    if isinstance(s, ir.Return):
        return [f"{pad}return({expr(s.value)}){where}"]
    if isinstance(s, (ir.Break, ir.Continue)):
        return [f"{pad}{type(s).__name__.lower()}(){where}"]
    if isinstance(s, ir.If):
        lines = [f"{pad}if({expr(s.cond)},{where}"] + stmt(s.then, depth + 1)
        if s.orelse.stmts:
            lines += stmt(s.orelse, depth + 1)
        return lines + [f"{pad})"]
    if isinstance(s, ir.While):
        lines = [f"{pad}while({expr(s.cond)},{where}"] + stmt(s.body, depth + 1)
        if s.orelse.stmts:
            lines += [f"{pad}  else:"] + stmt(s.orelse, depth + 1)
        return lines + [f"{pad})"]
    if isinstance(s, ir.For):
        lines = [f"{pad}for({expr(s.target)}, {expr(s.iter)},{where}"] + stmt(s.body, depth + 1)
        if s.orelse.stmts:
            lines += [f"{pad}  else:"] + stmt(s.orelse, depth + 1)
        return lines + [f"{pad})"]
    return [f"{pad}{expr(s)}{where}"]


def format_function(name: str, fn: ir.Function) -> str:
    params = ", ".join(fn.params + tuple(f"*{p}" for p in fn.kwonly))
    head = f"define({name}, lambda({params}),  # {fn.loc}" if fn.loc.lineno else f"define({name}, lambda({params}),"
    return "\n".join([head] + stmt(fn.body, 1) + [")"])


def format_program(program: ir.Program) -> str:
    return "\n\n".join(format_function(name, fn) for name, fn in program.functions)


def tree_view(program: ir.Program) -> str:
    """One node a line, indented by depth, with its source line: ``exp  (line 20)``."""
    out = []

    def visit(n, depth):
        if isinstance(n, ir.Call):
            head = _label(n.prim)
        elif isinstance(n, ir.Fused):  # named by its contents, as in the drawing and the profile
            from .fused_names import fused_label

            head = fused_label(n)
        elif isinstance(n, ir.Leaf):  # input $i of the enclosing fused group, as in the drawing
            head = f"${n.index}"
        elif isinstance(n, (ir.Const, ir.Var, ir.Global, ir.StoreName, ir.FuncRef)):
            head = expr(n)
        else:
            head = type(n).__name__.lower()
        loc = getattr(n, "loc", None)
        where = f"  (line {loc.lineno})" if loc is not None and loc.lineno else ""
        out.append(f"{'  ' * depth}{head}{where}")
        for c in ir.children(n):
            if not (isinstance(c, ir.Block) and not c.stmts):  # an empty else: nothing to show
                visit(c, depth + 1)

    for name, fn in program.functions:
        out.append(f"function {name}  ({fn.loc.short})")
        visit(fn.body, 1)
    return "\n".join(out)
