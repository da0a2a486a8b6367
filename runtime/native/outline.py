"""The fast version of each loop nest (the one run when its tests hold: accesses proven in bounds, Python ints
known non-negative; versions.py ``two_versions``) moved into a Numba function of its own, which the kernel calls.

Why: with both versions in one function, LLVM optimised the fast one worse. Measured on this machine (medians of
7 batches of fresh inputs, medium sizes of ``benchmarks/loops.py``): gramschmidt 144 us with both in one function,
106 us outlined (njit of the plain source: 111 us); adi 205 against 160 (186). The bodies are the same text: only
where they sit changed. Elsewhere it changed nothing measurable (histogram and csr_spmv among them: their cost over
njit is the pass that reads the index array's range).

Only nests outside any loop of the kernel are moved (a call per iteration of an enclosing loop could cost more
than it saves), and only when the move keeps the meaning: the body has no ``return``, every name it reads that
may come from before is a parameter or assigned earlier in the kernel, and the names it assigns that are read
later (liveness over the generated source) are returned to the kernel. Anything unexpected leaves the source as
it is. The parallel variants (parallel.py) are made from the source before this step."""
from __future__ import annotations

import ast
import itertools

from phylanx_py.source import parse


class _Unsupported(Exception):
    """A statement this liveness does not model: the source stays as it is."""


def outline(source: str, versions) -> str:
    """``source`` (one ``kernel`` function) with its outermost fast versions outlined, or unchanged. ``versions``:
    the lines of the tests of two versions (the kernel IR's: kir.Printed.versions)."""
    try:
        return _outline(source, set(versions))
    except RecursionError:  # a source nested past what ast walks: as it is (moving is only for speed)
        return source


def _outline(source: str, marked: set) -> str:
    if not marked:
        return source
    module = parse(source)
    kernel = next((n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "kernel"), None)
    if kernel is None or len(kernel.decorator_list) != 1:
        return source
    targets = list(_outermost(kernel.body, marked))
    if not targets:
        return source
    params = {a.arg for a in kernel.args.args}
    local = params | _stored(kernel.body)
    after: dict = {}
    bound: dict = {}
    try:
        _live(kernel.body, set(), None, after, {id(t) for t in targets})
        _bound(kernel.body, set(params), bound, {id(t) for t in targets})
    except _Unsupported:
        return source
    taken = {n.id for n in ast.walk(module) if isinstance(n, ast.Name)} | \
        {n.name for n in ast.walk(module) if isinstance(n, ast.FunctionDef)}
    names = (f"__pxfast{k}" for k in itertools.count() if f"__pxfast{k}" not in taken)
    decorator = ast.unparse(kernel.decorator_list[0])
    functions = []
    for node in targets:
        if any(isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom)) for b in node.body for n in ast.walk(b)):
            continue
        outputs = sorted(_stored(node.body) & after.get(id(node), set()))
        try:
            inputs = sorted(_live(node.body, set(outputs), None, {}, set()) & local)
        except _Unsupported:
            continue
        if bound.get(id(node)) is None or not set(inputs) <= bound[id(node)]:
            continue  # a name that may be unbound here (or code that never reaches it): passing it would read it
        name = next(names)
        body = "\n".join(ast.unparse(s) for s in node.body)
        ret = "(" + "".join(f"{o}, " for o in outputs) + ")"
        functions.append(f"@{decorator}\ndef {name}({', '.join(inputs)}):\n" +
                         "".join(f"    {line}\n" for line in body.split("\n")) + f"    return {ret}\n")
        call = f"{name}({', '.join(inputs)})"
        node.body = parse(f"{ret} = {call}" if outputs else call).body
    if not functions:
        return source
    return "\n\n".join(functions) + "\n\n" + ast.unparse(module) + "\n"


def _outermost(stmts, marked):
    """The marked two-version ifs outside any loop, and outside the fast body of another (it moves whole)."""
    for s in stmts:
        if isinstance(s, ast.If):
            if s.lineno in marked:
                yield s
            else:
                yield from _outermost(s.body, marked)
            yield from _outermost(s.orelse, marked)


def _bound(stmts, bound, at: dict, wanted: set):
    """The names surely bound after ``stmts`` when ``bound`` are before them (None: no path gets past them).
    The set before each If whose id is in ``wanted`` goes into ``at``."""
    for s in stmts:
        if bound is None:
            return None
        if isinstance(s, ast.Assign):
            bound = bound | _targets(s.targets)[0]
        elif isinstance(s, ast.If):
            if id(s) in wanted:
                at[id(s)] = set(bound)
            a, b = _bound(s.body, set(bound), at, wanted), _bound(s.orelse, set(bound), at, wanted)
            bound = b if a is None else a if b is None else a & b
        elif isinstance(s, (ast.Return, ast.Raise, ast.Break, ast.Continue)):
            return None
        elif isinstance(s, (ast.For, ast.While)):
            pass  # a loop may run no iteration: it binds nothing for sure (and holds no wanted if)
        elif not isinstance(s, (ast.AugAssign, ast.Expr, ast.Pass)):
            raise _Unsupported(type(s).__name__)
    return bound


def _stored(stmts) -> set:
    return {n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _reads(node) -> set:
    if node is None:
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _target(t):
    """(names a store target binds, names it reads: subscripts' arrays and indices)."""
    if isinstance(t, ast.Name):
        return {t.id}, set()
    if isinstance(t, (ast.Tuple, ast.List)):
        return _targets(t.elts)
    if isinstance(t, (ast.Subscript, ast.Attribute)):
        return set(), _reads(t)
    raise _Unsupported(type(t).__name__)


def _targets(targets):
    """``_target`` of each of ``targets``, united (an assignment's targets, a tuple's items)."""
    defs, uses = set(), set()
    for t in targets:
        d, u = _target(t)
        defs |= d
        uses |= u
    return defs, uses


def _live(stmts, out: set, loop, after: dict, wanted: set) -> set:
    """Names live before ``stmts`` when ``out`` are live after them. ``loop``: (live after the enclosing loop,
    live at its head) for break and continue. The live-after set of each If whose id is in ``wanted`` goes into
    ``after``."""
    live = set(out)
    for s in reversed(stmts):
        live = _live_one(s, live, loop, after, wanted)
    return live


def _live_one(s, out, loop, after, wanted):
    if isinstance(s, ast.Assign):
        defs, uses = _targets(s.targets)
        return (out - defs) | uses | _reads(s.value)
    if isinstance(s, ast.AugAssign):  # reads its target, name or element, before it writes it
        defs, uses = _target(s.target)
        return out | defs | uses | _reads(s.value)
    if isinstance(s, ast.Expr):
        return out | _reads(s.value)
    if isinstance(s, ast.Pass):
        return out
    if isinstance(s, ast.Return):
        return _reads(s.value)
    if isinstance(s, ast.Raise):
        return _reads(s.exc) | _reads(s.cause)
    if isinstance(s, (ast.Break, ast.Continue)):
        if loop is None:
            raise _Unsupported("break outside a loop")
        return set(loop[0] if isinstance(s, ast.Break) else loop[1])
    if isinstance(s, ast.If):
        if id(s) in wanted:
            after[id(s)] = set(out)
        return _reads(s.test) | _live(s.body, out, loop, after, wanted) | _live(s.orelse, out, loop, after, wanted)
    if isinstance(s, (ast.For, ast.While)):
        if s.orelse:
            raise _Unsupported("loop with else")
        defs, uses = _target(s.target) if isinstance(s, ast.For) else (set(), set())
        test = _reads(s.test) if isinstance(s, ast.While) else set()
        head = set(out) | test
        while True:  # the live set at the loop's head, to its fixed point
            body = _live(s.body, head, (out, head), after, wanted)
            new = set(out) | test | (body - defs) | uses
            if new == head:
                return head | (_reads(s.iter) if isinstance(s, ast.For) else set())
            head = new
    raise _Unsupported(type(s).__name__)
