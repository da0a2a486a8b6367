"""Python-int arithmetic that cannot overflow int64, beyond the magnitude bounds of calls.py: counters, and
names that stay non-negative through a loop. Each check removed this way also lets LLVM see the loop as it is
(``while x: x &= x - 1; total += 1`` is one popcount instruction a step; with the checks it is a loop of
branches: 0.02x numba.njit).

- **Counters.** A name bound only to small constants and to itself plus or minus a constant of at most 16 (and,
  when the kernel receives it, a small int checked per call) changes by at most 16 a step: it cannot pass 2**61
  in fewer than 2**57 steps, over four years at 10**9 steps a second. Its magnitude bound is COUNTER.
- **Signs.** A loop whose Python-int names stay non-negative when they are non-negative at its start (each value
  assigned to them is non-negative given that: ``x & (x - 1)``, ``n // 2``, ``total + 1`` ...) is lowered twice:
  with those names known non-negative, under a test of their values at the loop's start, and as it is. Knowing
  ``x >= 0`` makes ``x - 1`` (and any difference of two non-negative ints) safe.
"""
from __future__ import annotations

import collections

from phylanx_py import ir

from .facts import rule

COUNTER = 1 << 61
_STEP = 16
_CONST = 1 << 40
_ADD = ("operator.add", "operator.iadd")
_SUB = ("operator.sub", "operator.isub")


def _leafless(n):
    """A fused expression's body with its leaves put back (so patterns see ``Var``s, not ``Leaf``s)."""
    if not isinstance(n, ir.Fused):
        return n, ()
    return n.body, n.leaves


def _resolve(n, leaves):
    while isinstance(n, ir.Leaf) and n.index < len(leaves):
        n = leaves[n.index]
    return n


def _small_const(n, limit):
    return isinstance(n, ir.Const) and type(n.value) is int and abs(n.value) <= limit


def _bindings(node):
    """(name -> the values plain assignments bind it to, the names bound any other way: loop targets,
    unpacking, walrus)."""
    values, other = collections.defaultdict(list), set()
    plain = set()
    for s in ir.walk(node):
        if isinstance(s, ir.Assign) and isinstance(s.target, ir.StoreName):
            values[s.target.name].append(s.value)
            plain.add(id(s.target))
    for s in ir.walk(node):
        if isinstance(s, (ir.StoreName, ir.SetVar)) and id(s) not in plain:
            other.add(s.name)
    return values, other


def counters(node, inputs, small) -> frozenset:
    """The names of ``node`` that are counters (see the module docstring): ``inputs`` are the kernel's
    parameters, ``small`` those checked small per call."""
    values, other = _bindings(node)
    out = set()
    for name, vs in values.items():
        if name in other or (name in inputs and name not in small):
            continue
        steps = [v for v in vs if not _small_const(v, _CONST)]
        if steps and all(_is_step(v, name) for v in steps):
            out.add(name)
    return frozenset(out)


def _is_step(value, name):
    body, leaves = _leafless(value)
    if not (isinstance(body, ir.Call) and body.prim in _ADD + _SUB and len(body.args) == 2 and not body.kwargs):
        return False
    a, b = (_resolve(x, leaves) for x in body.args)
    if isinstance(a, ir.Var) and a.name == name and a.depth == 0 and _small_const(b, _STEP):
        return True
    return body.prim in _ADD and isinstance(b, ir.Var) and b.name == name and b.depth == 0 and \
        _small_const(a, _STEP)


class Signs:
    """Non-negativity of int expressions given ``names`` known non-negative (``leaves``: the fused expression's
    leaves being lowered, for ``ir.Leaf``)."""

    def __init__(self, names, leaves=()):
        self.names, self.leaves = names, leaves

    def nonneg(self, n) -> bool:
        n = _resolve(n, self.leaves)
        if isinstance(n, ir.Const):
            return type(n.value) in (int, bool) and n.value >= 0
        if isinstance(n, ir.Var):
            return n.depth == 0 and n.name in self.names
        if isinstance(n, ir.Fused):
            return Signs(self.names, n.leaves).nonneg(n.body)
        if not isinstance(n, ir.Call) or n.kwargs:
            return False
        p, args = n.prim, n.args
        if p in ("builtins.len",) or (p == "operator.getitem" and isinstance(args[0], ir.Call) and
                                       args[0].prim == "attr.shape"):
            return True
        sign = rule(p, "sign")  # the primitive's own (``Lowering.sign``, with this object as its ``ops``)
        return bool(sign(self, *args)) if sign is not None else False

    def const(self, n):
        """The value of ``n`` when it is an int constant (through the fused expression's leaves), else None."""
        n = _resolve(n, self.leaves)
        return n.value if isinstance(n, ir.Const) and type(n.value) is int else None

    def safe(self, n) -> bool:
        """``n`` (a Python-int + or -) cannot overflow: a difference of non-negatives, a non-negative plus a
        non-positive constant."""
        args = [_resolve(a, self.leaves) for a in n.args]
        if len(args) != 2:
            return False
        if n.prim in _SUB:
            return self.nonneg(args[0]) and self.nonneg(args[1])
        if n.prim in _ADD:
            for a, b in (args, args[::-1]):
                if self.nonneg(a) and isinstance(b, ir.Const) and type(b.value) is int and b.value <= 0:
                    return True
        return False


def inductive(loop, env) -> frozenset:
    """The Python-int names bound before ``loop`` (``env``: name -> kind) that stay non-negative through it when
    they are non-negative at its start and that its + and - read: the greatest such set whose every assignment
    in the loop is non-negative given the set. Only innermost loops (a loop inside is versioned itself, and
    versions of versions multiply)."""
    if any(isinstance(s, (ir.For, ir.While)) for s in ir.walk(loop) if s is not loop):
        return frozenset()
    values, other = _bindings(loop)
    read = set()
    for s in ir.walk(loop):
        calls = [(c, s.leaves) for c in ir.walk(s.body)] if isinstance(s, ir.Fused) else [(s, ())]
        for c, leaves in calls:
            if isinstance(c, ir.Call) and c.prim in _ADD + _SUB:
                read |= {v.name for a in c.args for v in ir.walk(_resolve(a, leaves)) if isinstance(v, ir.Var)}
    names = {n for n in read if n not in other and type(env.get(n)) is int}
    while True:
        signs = Signs(names)
        keep = {n for n in names if all(signs.nonneg(v) for v in values.get(n, ()))}
        if keep == names:
            return frozenset(names)
        names = keep


def untested_counters(loop, names, steps) -> frozenset:
    """The counters among ``names`` (``steps``: counters()) that the sign test of ``loop`` can leave out: read in
    the loop only by their own steps (``total = total + 1``), and not needed to keep the other names
    non-negative. Their magnitude bound (COUNTER) already keeps those steps exact, so testing their sign at the
    loop's start only costs: popcount's ``while x: x &= x - 1; total += 1`` took 8.3 us over 20,000 items with
    ``total >= 0`` in the test, 5.2 without (njit: 4.9)."""
    values, _ = _bindings(loop)
    own = set()  # ids of the Var reads that are a counter's own step
    for s in ir.walk(loop):
        if isinstance(s, ir.Assign) and isinstance(s.target, ir.StoreName) and s.target.name in steps and \
                _is_step(s.value, s.target.name):
            own |= {id(v) for v in ir.walk(s.value) if isinstance(v, ir.Var) and v.name == s.target.name}
    reads = collections.Counter(v.name for v in ir.walk(loop) if isinstance(v, ir.Var) and id(v) not in own)
    kept = set(names)
    for c in sorted(names & steps):
        rest = kept - {c}
        if reads[c] == 0 and all(Signs(rest).nonneg(v) for n in rest for v in values.get(n, ())):
            kept = rest
    return frozenset(names - kept)


def counts_up(it, signs) -> bool:
    """Whether ``it`` is ``range(...)`` counting up from a non-negative start: its step (if any) a positive int
    constant, its start (if any) non-negative by ``signs`` (a Signs)."""
    if not (isinstance(it, ir.Call) and it.prim == "builtins.range" and not it.kwargs and 1 <= len(it.args) <= 3):
        return False
    args = it.args
    up = len(args) < 3 or (isinstance(args[2], ir.Const) and type(args[2].value) is int and args[2].value > 0)
    return up and (len(args) == 1 or signs.nonneg(args[0]))


def nonneg_names(loop, inputs, known=frozenset()) -> frozenset:
    """The names that hold a non-negative int wherever ``loop`` (a kernel's IR) reads them: ``known`` (those a
    version's test found non-negative, Lowerer.nonneg) and the greatest set of the names ``loop`` binds only by
    plain assignments of values non-negative given the set, or as the variable of loops over ranges that count
    up from a start non-negative given it (``for k in range(n): for i in range(k + 1, n)``). The kernel's
    parameters (``inputs``) are not known non-negative at its start, nor names bound any other way (unpacking,
    ``:=``, a loop over an array)."""
    values, loops, seen = collections.defaultdict(list), collections.defaultdict(list), set()
    for s in ir.walk(loop):
        if isinstance(s, ir.Assign) and isinstance(s.target, ir.StoreName) and s.target.depth == 0:
            values[s.target.name].append(s.value)
            seen.add(id(s.target))
        elif isinstance(s, ir.For) and isinstance(s.target, ir.StoreName) and s.target.depth == 0:
            loops[s.target.name].append(s.iter)
            seen.add(id(s.target))
    other = {s.name for s in ir.walk(loop) if isinstance(s, (ir.StoreName, ir.SetVar)) and id(s) not in seen}
    names = {n for n in set(values) | set(loops) if n not in other and n not in inputs}
    while True:
        signs = Signs(names | known)
        keep = {n for n in names if all(signs.nonneg(v) for v in values[n]) and
                all(counts_up(it, signs) for it in loops[n])}
        if keep == names:
            return frozenset(names | known)
        names = keep
