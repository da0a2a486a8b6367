"""How kinds flow through a loop nest's statements as it is lowered (runtime/native/lower.py): a name's kind when
it is bound, at the join after an ``if``, around a loop; and ``settle``, the lowerings iterated to a fixpoint.

A Python scalar that may become a NumPy one (``s = 0.0`` then ``s += a[i]``) becomes an Either (kinds.py) with a
flag in the kernel; a name whose kind changes otherwise declines. A loop's body must leave the kinds it found.
What a lowering finds about the whole nest (a name that is an Either, inexact results reaching names or arrays, an
access that needs Numba's boundscheck) holds from the nest's start, so it is learned: unioned into what the next
lowering starts from, until a lowering learns nothing new (``settle``).
A mixin of lower.Lowerer: ``self.env``, ``self.inputs``, ``self.widened``, ``self.fail`` are its."""
from __future__ import annotations

from phylanx_py import ir

from . import kinds as K
from . import kir
from .kinds import Decline
from .signs import COUNTER, counters

SMALL = 1 << 40  # a Python int argument below this (checked per call) is "small"
ROUNDS = 12  # lowerings before a nest whose kinds keep changing declines


class KindFlow:
    """Kinds of names through statements (a mixin of lower.Lowerer)."""

    def bind(self, node, name, k, t) -> list:
        """Record ``name``'s new kind; the statements that keep its Either flag (kir.Stmt, put after the store)."""
        if node.depth != 0:
            self.fail(f"assignment to the enclosing function's '{name}'", node)
        self.mention(name, whole=False)  # (a binding: an argument's name bound again counts as changed)
        self.pending.append(kir.Name(name, True))
        self.hold(name, k, fresh=self.allocating == id(node))
        flags = []
        w = self.widened.get(name)
        if w is not None:
            if type(k) is K.Either:
                if k.origin != (name,):  # (the flag is the max of its origins': tagged on its own statement)
                    flags.append(kir.Stmt(0, f"__pxw_{name} = {k.flag()}",
                                          (kir.declared("max") if len(k.origin) > 1 else ()) +
                                          (kir.Name(f"__pxw_{name}", True),) +
                                          tuple(kir.Name(f"__pxw_{o}") for o in k.origin)))
            elif K.key(k) in (K.key(w.py), K.key(w.np)):
                flags.append(kir.Stmt(0, f"__pxw_{name} = {int(K.key(k) == K.key(w.np))}",
                                      (kir.Name(f"__pxw_{name}", True),)))
            else:
                self.fail(f"'{name}' is {K.describe(w)} or {K.describe(k)}", node)
            if flags:
                self.hold(f"__pxw_{name}", 1)  # (a flag: 0 or 1)
            k = K.Either(w.py, w.np, name)
        elif type(k) is K.Either:
            k = self.widen(name, k)
        if name not in self.counters:
            self.bounds.pop(name, None)
        old = self.env.get(name)
        if old is not None and name in self.inputs and K.key(old) != K.key(k):
            k = self.widen_or_fail(name, old, k, node)
        self.env[name] = k
        if t:
            self.taint.add(name)
        else:
            self.taint.discard(name)
        return flags

    def widen(self, name, either):
        """``name`` as an Either from here on, and learned: the next lowering has it from the nest's start."""
        e = self.learned[name] = self.widened[name] = K.Either(either.py, either.np, name)
        return e

    def widen_or_fail(self, name, a, b, node):
        """The Either ``name`` becomes, its kind being ``a`` or ``b`` (a Python scalar and its NumPy one), or
        Decline (other kinds, or ``name`` an Either of other kinds already)."""
        e = K.either_of(a, b, name)
        if e is not None:
            had = self.learned.get(name)
            if name not in self.widened or (had is not None and (K.key(had.py), K.key(had.np)) ==
                                            (K.key(e.py), K.key(e.np))):
                return self.widen(name, e)
        self.fail(f"'{name}' changes from {K.describe(a)} to {K.describe(b)}", node)

    def join(self, a, b, node):
        out = {}
        for name in set(a) | set(b):
            if name in a and name in b:
                if K.key(a[name]) != K.key(b[name]):
                    if K.either_of(a[name], b[name], name) is not None:
                        out[name] = self.widen_or_fail(name, a[name], b[name], node)
                        continue
                    if name in self.inputs:
                        self.fail(f"'{name}' is {K.describe(a[name])} or {K.describe(b[name])} after the if", node)
                    continue  # unreadable afterwards
                out[name] = a[name]
        return out

    def loop_body(self, n, body):
        entry = dict(self.env)
        self.loop_entries.append(entry)
        self.block(body)
        self.check_stable(entry, n)
        self.loop_entries.pop()
        # names first bound in the body may be unbound after zero iterations
        self.env = {k: v for k, v in self.env.items() if k in entry}

    def check_stable(self, entry, node):
        for name, k in entry.items():
            now = self.env.get(name)
            if now is not None and K.key(now) != K.key(k) and K.either_of(now, k, name) is not None:
                self.widen_or_fail(name, k, now, node)
                continue  # learned: an Either from the loop's start in the next lowering
            if now is None or K.key(now) != K.key(k):
                self.fail(f"'{name}' changes kind in the loop ({K.describe(k)} -> "
                          f"{K.describe(now) if now is not None else 'unbound'})", node)


def settle(cls, node, params, kinds: dict, outputs, small=frozenset(), **extra):
    """(source, the lowerer that made it) of ``node`` lowered by a ``cls`` (Lowerer or a subclass taking
    ``extra``); Decline.

    A fixpoint over what the lowerings learn: the Either names (``widen``), the tainted names and arrays (inexact
    results), whether an access needs Numba's boundscheck (``access``). Each lowering starts from the union of
    what those before it learned and goes on past what it learns, so one lowering can learn several things; the
    first that learns nothing new is the kernel. A lowering that learned something and then failed (its later
    kinds were the ones it was still learning) decides nothing: the next, starting from more, does."""
    written = {s.name for s in ir.walk(node) if isinstance(s, (ir.StoreName, ir.SetVar))}
    bounds = {name: SMALL for name in small if name not in written}
    steps = counters(node, set(params), small)
    bounds.update({name: COUNTER for name in steps})
    tainted, arrays, widened, manual = frozenset(), False, {}, True
    for _ in range(ROUNDS):
        low = cls(node, kinds, outputs, tainted, arrays, dict(widened), dict(bounds), manual, steps, **extra)
        try:
            src = low.source(params)
        except Exception:
            if not (low.learned or low.wants_boundscheck):
                raise
            src = None
        if not (low.learned or low.wants_boundscheck) and low.taint <= tainted and low.arrays_tainted == arrays:
            return src, low
        widened.update(low.learned)
        manual = manual and not low.wants_boundscheck
        tainted, arrays = tainted | frozenset(low.taint), arrays or low.arrays_tainted
    raise Decline("kinds or inexact results do not settle around the loop")
