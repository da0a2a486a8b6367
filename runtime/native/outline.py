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
later are returned to the kernel. All of it is asked of the kernel IR (kir.py): the fast versions are the ``if``
nodes with a ``version``, what a statement reads and binds its ``reads``/``binds`` (a ``:=`` binding counts for
neither liveness nor boundness, as Python may skip it), a ``raise`` (kir.Raise) ends its path; the kernel and the
outlined functions are printed again from the nodes (kir.body_lines, kir.print_kernel). The parallel variants
(parallel.py) are made from the kernel before this step."""
from __future__ import annotations

import itertools

from . import kir
from .liveness import blocks, stored_names, walk


class _Unsupported(Exception):
    """A statement this liveness does not model: the kernel stays as it is."""


def outline(printed) -> str:
    """The source of the kernel ``printed`` (kir.Printed) with its outermost fast versions outlined, or its source
    unchanged."""
    try:
        return _outline(printed)
    except RecursionError:  # a kernel nested past what the recursion walks: as it is (moving is only for speed)
        return printed.source


def _outline(printed) -> str:
    nodes = list(printed.nodes.values())
    if not any(type(n) is kir.If and n.version for n in nodes):
        return printed.source
    block = blocks(nodes)
    targets = list(_outermost(block))
    if not targets:
        return printed.source
    params = set(printed.params)
    local = params | stored_names(block)
    after: dict = {}
    bound: dict = {}
    wanted = {id(t) for t, _ in targets}
    try:
        _live(block, _reads_of(printed.ret_tags), None, after, wanted)
        _bound(block, set(params), bound, wanted)
    except _Unsupported:
        return printed.source
    taken = {t.name for n in nodes for t in n.tags if type(t) is kir.Name} | params
    names = (f"__pxfast{k}" for k in itertools.count() if f"__pxfast{k}" not in taken)
    functions, calls = [], {}
    for node, kids in targets:
        if any(isinstance(n, kir.Return) for n in walk(kids)):
            continue
        outputs = sorted(stored_names(kids) & after.get(id(node), set()))
        try:
            inputs = sorted(_live(kids, set(outputs), None, None, set()) & local)
        except _Unsupported:
            continue
        if bound.get(id(node)) is None or not set(inputs) <= bound[id(node)]:
            continue  # a name that may be unbound here (or code that never reaches it): passing it would read it
        name = next(names)
        body = list(walk(kids))
        ret = "(" + "".join(f"{o}, " for o in outputs) + ")"
        lines, _ = kir.body_lines(body, 1, -node.depth)
        functions.append("\n".join([kir.decorator(printed.boundscheck), f"def {name}({', '.join(inputs)}):",
                                    *lines, f"    return {ret}"]) + "\n")
        call = f"{name}({', '.join(inputs)})"
        tags = [kir.Name(i) for i in inputs] + [kir.Name(o, True) for o in outputs]
        calls[id(node)] = (len(body), kir.Stmt(node.depth + 1, f"{ret} = {call}" if outputs else call, tags))
    if not functions:
        return printed.source
    kept, i = [], 0
    while i < len(nodes):  # the kernel's nodes, each outlined body replaced by its call
        kept.append(nodes[i])
        skip, stmt = calls.get(id(nodes[i]), (0, None))
        if stmt is not None:
            kept.append(stmt)
        i += 1 + skip
    kernel = kir.print_kernel(printed.params, kept, printed.ret, printed.ret_tags, printed.boundscheck,
                              printed.complex_values)
    return "\n\n".join(functions) + "\n\n" + kernel.source


def _statements(block):
    """(node, its block, its else's block or None) of each statement: an ``if`` and its ``else`` as one."""
    i = 0
    while i < len(block):
        node, kids = block[i]
        orelse = None
        if type(node) is kir.If and i + 1 < len(block) and type(block[i + 1][0]) is kir.Else:
            orelse, i = block[i + 1][1], i + 1
        i += 1
        yield node, kids, orelse


def _outermost(block):
    """The fast versions' ifs (with their blocks) outside any loop, and outside the fast body of another (it moves
    whole)."""
    for node, kids in block:
        if type(node) is kir.If and node.version:
            yield node, kids
        elif type(node) in (kir.If, kir.Else):
            yield from _outermost(kids)


def _binds(node) -> set:
    """The names the statement surely binds when it completes (a ``:=`` may be skipped)."""
    walrus = {t.name for t in node.tags if type(t) is kir.Name and t.walrus}
    return set(node.binds) - walrus


def _reads_of(tags) -> set:
    return {t.name for t in tags if type(t) is kir.Name and not t.binds}


def _bound(block, bound, at: dict, wanted: set):
    """The names surely bound after ``block`` when ``bound`` are before it (None: no path gets past it). The set
    before each If whose id is in ``wanted`` goes into ``at``."""
    for node, kids, orelse in _statements(block):
        if bound is None:
            return None
        t = type(node)
        if t is kir.If:
            if id(node) in wanted:
                at[id(node)] = set(bound)
            a, b = _bound(kids, set(bound), at, wanted), _bound(orelse or [], set(bound), at, wanted)
            bound = b if a is None else a if b is None else a & b
        elif t in (kir.Raise, kir.Jump, kir.Return):
            return None
        elif t is kir.Stmt:
            bound = bound | _binds(node)
        elif t not in (kir.For, kir.While):  # a loop may run no iteration: it binds nothing for sure
            raise _Unsupported(t.__name__)
    return bound


def _live(block, out: set, loop, after, wanted: set) -> set:
    """Names live before ``block`` when ``out`` are live after it. ``loop``: (live after the enclosing loop, live
    at its head) for break and continue. The live-after set of each If whose id is in ``wanted`` goes into
    ``after`` (None: nothing recorded)."""
    live = set(out)
    for node, kids, orelse in reversed(list(_statements(block))):
        live = _live_one(node, kids, orelse, live, loop, after, wanted)
    return live


def _live_one(node, kids, orelse, out, loop, after, wanted):
    t = type(node)
    if t is kir.Stmt:
        return (out - _binds(node)) | node.reads
    if t in (kir.Raise, kir.Return):
        return set(node.reads)
    if t is kir.Jump:
        if loop is None:
            raise _Unsupported("break outside a loop")
        return set(loop[0] if node.kind == "break" else loop[1])
    if t is kir.If:
        if after is not None and id(node) in wanted:
            after[id(node)] = set(out)
        return node.reads | _live(kids, out, loop, after, wanted) | _live(orelse or [], out, loop, after, wanted)
    if t in (kir.For, kir.While):
        # the live set at the loop's head: base | (F(head) - defs), where F, the live set before the body as a
        # function of the set live at its end and at its continues, is G | (head - K) (each statement's is, and
        # unions and compositions keep that form); its least fixed point is then base | (F(base) - defs), one
        # pass over the body. Iterating to the fixed point instead passed over each body twice or more, inner
        # loops again for each pass of an outer one: 2**depth passes (NPBench's scattering_self_energies, six loops
        # deep, spent 0.3-0.5 s of its first second here, twice, holding the caller's interpreter lock)
        defs = _binds(node)
        base = set(out) | (node.reads if t is kir.While else set())
        head = base | (_live(kids, base, (out, base), None, wanted) - defs)
        if after is not None:  # the Ifs inside see the true live sets: one more pass, recording them
            _live(kids, head, (out, head), after, wanted)
        return head | node.reads
    raise _Unsupported(t.__name__)
