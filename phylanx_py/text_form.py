"""The PhySL-like text form of the IR, one statement a line with ``name@line:col(...)`` for every call (stdlib only).

A visitor keyed by node class name, so ``ir`` can print itself (``str(program)``) without this module importing
``ir`` back. Primitive names are shown through ``label`` (``operator.add`` as ``__add``): the frontend's printer
passes the registry's labels; ``str(program)`` uses the labels the compile pipeline stored on the program.
"""
from __future__ import annotations

from collections.abc import Callable

Label = Callable[[str], str]


def _same(name: str) -> str:
    return name


def _at(loc) -> str:
    return f"@{loc.lineno}:{loc.col}" if loc.lineno else ""


def _const(n, label):
    v = n.value
    return getattr(v, "__name__", None) if isinstance(v, type) or callable(v) else repr(v)


def _call(n, label):
    head = label(n.prim) if type(n).__name__ == "Call" else expr(n.func, label)
    parts = [expr(a, label) for a in n.args] + [f"{k}={expr(v, label)}" for k, v in n.kwargs]
    return f"{head}{_at(n.loc)}({', '.join(parts)})"


def _fused(n, label):
    leaves = ", ".join(f"${i}={expr(leaf, label)}" for i, leaf in enumerate(n.leaves))
    kind = f"fused_{n.reduce[0]}" if n.reduce else "fused"
    return f"{kind}{_at(n.loc)}[{expr(n.body, label)}]({leaves})"


def _lambda(n, label):
    fn = n.function
    body = "; ".join("\n".join(stmt(s, 0, label)).strip() for s in fn.body.stmts)
    return f"lambda{_at(n.loc)}({', '.join(fn.params)}, {body})"


def _join(items, label):
    return ", ".join(expr(v, label) for v in items)


_EXPR = {
    "Const": _const,
    "Var": lambda n, label: n.name,
    "Global": lambda n, label: f"{n.module}.{n.name}",
    "FuncRef": lambda n, label: n.name,
    "Call": _call,
    "Apply": _call,
    "Fused": _fused,
    "Leaf": lambda n, label: f"${n.index}",
    "IfExp": lambda n, label: f"if{_at(n.loc)}({expr(n.cond, label)}, {expr(n.then, label)}, "
                              f"{expr(n.orelse, label)})",
    "BoolOp": lambda n, label: f"__{n.op}{_at(n.loc)}({_join(n.values, label)})",
    "SetVar": lambda n, label: f"store{_at(n.loc)}({n.name}, {expr(n.value, label)})",
    "List": lambda n, label: f"list({_join(n.items, label)})",
    "Tuple": lambda n, label: f"make_tuple({_join(n.items, label)})",
    "Dict": lambda n, label: "dict(" + ", ".join(f"{expr(k, label)}: {expr(v, label)}"
                                                 for k, v in zip(n.keys, n.values)) + ")",
    "Lambda": _lambda,
    "StoreName": lambda n, label: n.name,
    "StoreTuple": lambda n, label: f"make_tuple({_join(n.targets, label)})",
    "StoreItem": lambda n, label: f"slice_at({expr(n.obj, label)}, {expr(n.key, label)})",
}


def expr(n, label: Label = _same) -> str:
    """One expression as text."""
    show = _EXPR.get(type(n).__name__)
    return show(n, label) if show is not None else type(n).__name__


def _body(head: str, s, depth: int, label, where: str, pad: str) -> list[str]:
    lines = [f"{pad}{head}{where}"] + stmt(s.body, depth + 1, label)
    if s.orelse.stmts:
        lines += [f"{pad}  else:"] + stmt(s.orelse, depth + 1, label)
    return lines + [f"{pad})"]


def stmt(s, depth: int, label: Label = _same) -> list[str]:
    """A statement as indented lines, each ending with its ``# file:line``."""
    pad = "    " * depth
    where = f"  # {s.loc.short}" if s.loc.lineno else ""
    kind = type(s).__name__
    if kind == "Block":
        lines = [f"{pad}block("]
        for c in s.stmts:
            lines += stmt(c, depth + 1, label)
        return lines + [f"{pad})"]
    if kind == "Assign":
        return [f"{pad}define({expr(s.target, label)}, {expr(s.value, label)}){where}"]
    if kind == "Expr":
        return [f"{pad}{expr(s.value, label)}{where}"]
    if kind == "Return":
        return [f"{pad}return({expr(s.value, label)}){where}"]
    if kind in ("Break", "Continue"):
        return [f"{pad}{kind.lower()}(){where}"]
    if kind == "If":
        lines = [f"{pad}if({expr(s.cond, label)},{where}"] + stmt(s.then, depth + 1, label)
        if s.orelse.stmts:
            lines += stmt(s.orelse, depth + 1, label)
        return lines + [f"{pad})"]
    if kind == "While":
        return _body(f"while({expr(s.cond, label)},", s, depth, label, where, pad)
    if kind == "For":
        return _body(f"for({expr(s.target, label)}, {expr(s.iter, label)},", s, depth, label, where, pad)
    return [f"{pad}{expr(s, label)}{where}"]


def format_function(name: str, fn, label: Label = _same) -> str:
    params = ", ".join(fn.params + tuple(f"*{p}" for p in fn.kwonly))
    head = f"define({name}, lambda({params}),  # {fn.loc}" if fn.loc.lineno else f"define({name}, lambda({params}),"
    return "\n".join([head] + stmt(fn.body, 1, label) + [")"])


def format_program(program, label: Label = _same) -> str:
    return "\n\n".join(format_function(name, fn, label) for name, fn in program.functions)


_LEAVES = ("Const", "Var", "Global", "StoreName", "FuncRef")


def fused_kind(n) -> str:
    """``fused``, ``fused_rowdot``, ``fused_sum``, ``fused_sum_argmin``: the kernel a group runs as."""
    return f"fused_{n.reduce[0]}" if n.reduce else "fused"


def fused_members(n, children: Callable) -> list[str]:
    """The operations of a fused group in the order they are computed (nested groups' included), each once."""
    out: list[str] = []

    def visit(node):
        kind = type(node).__name__
        # a nested group's inputs are computed before its body
        kids = list(node.leaves) + [node.body] if kind == "Fused" else children(node)
        for c in kids:
            if type(c).__name__ != "Leaf":
                visit(c)
        if kind == "Call":
            name = node.prim.rsplit(".", 1)[-1]
            if name not in out:
                out.append(name)

    visit(n.body)
    if n.reduce and n.reduce[0] not in ("rowdot",):
        for op in n.reduce[0].split("_"):  # fused_sum: the chain, then sum; sum_argmin: then argmin
            if op not in out:
                out.append(op)
    return out


def fused_label(n, children: Callable) -> str:
    """A group named by its contents: ``fused[neg, exp, add, truediv]`` (text tree, drawing, profile, report)."""
    return f"{fused_kind(n)}[{', '.join(fused_members(n, children))}]"


def tree_view(program, children: Callable, label: Label = _same) -> str:
    """One node a line, indented by depth, with its source line: ``exp  (line 20)``; a fused group named by its
    contents and its inputs ``$i``, as in the drawing and the profile."""
    out = []

    def visit(n, depth):
        kind = type(n).__name__
        if kind == "Fused":
            head = fused_label(n, children)
        elif kind == "Leaf":
            head = f"${n.index}"
        else:
            head = label(n.prim) if kind == "Call" else expr(n, label) if kind in _LEAVES else kind.lower()
        loc = getattr(n, "loc", None)
        where = f"  (line {loc.lineno})" if loc is not None and loc.lineno else ""
        out.append(f"{'  ' * depth}{head}{where}")
        for c in children(n):
            if not (type(c).__name__ == "Block" and not c.stmts):  # an empty else: nothing to show
                visit(c, depth + 1)

    for name, fn in program.functions:
        out.append(f"function {name}  ({fn.loc.short})")
        visit(fn.body, 1)
    return "\n".join(out)
