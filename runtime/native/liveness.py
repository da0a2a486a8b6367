"""Where a name is read or bound in a kernel's statements (kir.py: each node's ``reads`` and ``binds``, kir.Name),
for parallel.py and outline.py: the statements as blocks (``blocks``), whether a path through statements may read
a name before binding it (``scan``), and whether it may be read after a statement before it is bound again,
following the enclosing loops' next iterations (``live_after``). A block is a list of (node, its block: the
statements it opens); an ``if``'s ``else`` is the item after it. Conservative: whatever it cannot follow (a name
bound by ``:=``, a jump out of a block) counts as a read."""
from __future__ import annotations

from . import kir


def walk(block):
    for node, kids in block:
        yield node
        yield from walk(kids)


def stored_names(block) -> set:
    return {name for node in walk(block) for name in node.binds}


def _walrus(node, name) -> bool:
    return any(type(t) is kir.Name and t.walrus and t.name == name for t in node.tags)


def scan(block, name):
    """(read, bound, leaves) for running ``block`` from its start: ``read``, a path may read ``name`` before
    binding it; ``bound``, every path that reaches the end binds it first (so too when none reaches it);
    ``leaves``, a ``break`` or ``continue`` may jump elsewhere before it is bound."""
    leaves, i = False, 0
    if block and type(block[0][0]) is kir.Else:  # (the else of an if before the block: part of that statement)
        i = 1
    while i < len(block):
        node, kids = block[i]
        i += 1
        if type(node) is kir.Jump:
            return False, True, True
        if type(node) is kir.Return:  # the path ends: what it does not read is dead on it
            return (True, False, leaves) if name in node.reads else (False, True, leaves)
        if type(node) is kir.If:
            other = []
            if i < len(block) and type(block[i][0]) is kir.Else:
                other, i = block[i][1], i + 1
            if name in node.reads:
                return True, False, leaves
            r1, b1, l1 = scan(kids, name)
            r2, b2, l2 = scan(other, name)
            if r1 or r2:
                return True, False, leaves
            leaves = leaves or l1 or l2
            if b1 and b2:
                return False, True, leaves
            continue
        if type(node) in (kir.For, kir.While):  # may run no iteration: never binds for sure
            if name in node.reads:
                return True, False, leaves
            read, _, _ = scan(kids, name)  # its own break and continue stay inside it
            if read and not (type(node) is kir.For and node.target == name):
                return True, False, leaves
            continue
        if name in node.reads or _walrus(node, name):
            return True, False, leaves
        if name in node.binds:
            return False, True, leaves
    return False, False, leaves


def live_after(chain, name):
    """Whether ``name`` may be read after the statement ``chain`` leads to before it is bound again (or a jump
    may skip the binding: then it counts as read). ``chain``: [(block, index)] of the statements around it,
    with ((node, block), field) between levels."""
    frames = [f for f in chain if isinstance(f[1], int)]
    owners = [f for f in chain if not isinstance(f[1], int)]
    for level in range(len(frames) - 1, -1, -1):
        block, i = frames[level]
        read, bound, leaves = scan(block[i + 1:], name)
        if read or leaves:
            return True
        if bound:
            return False
        owner, kids = owners[level - 1][0] if level > 0 else (None, None)
        if type(owner) in (kir.For, kir.While):  # the enclosing loop's next iteration
            if type(owner) is kir.While and name in owner.reads:
                return True
            if not (type(owner) is kir.For and owner.target == name):
                read, _, leaves = scan(kids, name)
                if read or leaves:
                    return True
    return False


def blocks(nodes) -> list:
    """A kernel's statements (its nodes in order, each at its depth) as a block: [(node, its block)]; an ``if``'s
    ``else``: the item after it."""
    return _block(nodes, 0, len(nodes))


def _block(nodes, start, end) -> list:
    out, i = [], start
    while i < end:
        j = i + 1
        while j < end and nodes[j].depth > nodes[i].depth:
            j += 1
        out.append((nodes[i], _block(nodes, i + 1, j)))
        i = j
    return out
