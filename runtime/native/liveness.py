"""Where a name is read or bound in a generated kernel's source (``ast``), for parallel.py: whether a path through
statements may read a name before binding it (``scan``), and whether it may be read after a statement before it
is bound again, following the enclosing loops' next iterations (``live_after``). Conservative: whatever it cannot
follow (a walrus, a jump out of a block) counts as a read."""
from __future__ import annotations

import ast


def stored_names(body):
    return {n.id for s in body for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def reads(node, name):
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in ast.walk(node))


def binds(target, name):
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in ast.walk(target))


def scan(stmts, name):
    """(read, bound, leaves) for running ``stmts`` from their start: ``read``, a path may read ``name`` before
    binding it; ``bound``, every path that reaches the end binds it first (so too when none reaches it);
    ``leaves``, a ``break`` or ``continue`` may jump elsewhere before it is bound (a ``return`` ends the path:
    the name is dead on it unless the return reads it)."""
    leaves = False
    for s in stmts:
        if isinstance(s, (ast.Break, ast.Continue)):
            return False, True, True
        if isinstance(s, ast.Return):  # the path ends: what it does not read is dead on it
            if s.value is not None and reads(s.value, name):
                return True, False, leaves
            return False, True, leaves
        if isinstance(s, ast.If):
            if reads(s.test, name):
                return True, False, leaves
            r1, b1, l1 = scan(s.body, name)
            r2, b2, l2 = scan(s.orelse, name)
            if r1 or r2:
                return True, False, leaves
            leaves = leaves or l1 or l2
            if b1 and b2:
                return False, True, leaves
            continue
        if isinstance(s, (ast.For, ast.While)):  # may run no iteration: never binds for sure
            head = s.iter if isinstance(s, ast.For) else s.test
            if reads(head, name):
                return True, False, leaves
            r, _, _ = scan(s.body, name)  # its own break and continue stay inside it
            if (r and not (isinstance(s, ast.For) and binds(s.target, name))) or reads(ast.Module(s.orelse, []),
                                                                                       name):
                return True, False, leaves
            continue
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            if (s.value is not None and reads(s.value, name)) or any(reads(t, name) for t in targets):
                return True, False, leaves
            if any(binds(t, name) for t in targets):
                return False, True, leaves
            continue
        if isinstance(s, ast.AugAssign) and (binds(s.target, name) or reads(s, name)):
            return True, False, leaves
        if reads(s, name) or binds(s, name):  # anything else that touches it (a walrus): as a read
            return True, False, leaves
    return False, False, leaves


def live_after(chain, name):
    """Whether ``name`` may be read after the statement ``chain`` leads to before it is bound again (or a jump
    may skip the binding: then it counts as read). ``chain``: [(block, index)] of the statements around it,
    with (loop or if, field) between levels."""
    frames = [f for f in chain if isinstance(f[1], int)]
    owners = [f for f in chain if not isinstance(f[1], int)]
    for level in range(len(frames) - 1, -1, -1):
        block, i = frames[level]
        read, bound, leaves = scan(block[i + 1:], name)
        if read or leaves:
            return True
        if bound:
            return False
        owner = owners[level - 1][0] if level > 0 else None
        if isinstance(owner, (ast.For, ast.While)):  # the enclosing loop's next iteration
            if isinstance(owner, ast.While) and reads(owner.test, name):
                return True
            if not (isinstance(owner, ast.For) and binds(owner.target, name)):
                read, _, leaves = scan(owner.body, name)
                if read or leaves:
                    return True
    return False
