"""Tiers that may run a whole loop in place of the interpreter, asked in order before the loop starts.

Generated code calls one ``HandOver`` per outermost loop with the values of the loop's free variables; the first
tier that runs the loop returns its outputs, else the interpreted loop runs. Tiers that need more than this module
(the SPMD tier needs tiled arrays and Dask) register a factory here when their package is imported, as value kinds
do (kinds.py): codegen never imports them. The native tier (runtime/native) is codegen's own and comes last."""
from __future__ import annotations

FACTORIES: list = []  # factory(fn, loop, where, program, namespaces) -> tier or None


class _Unbound:
    """The value generated code passes for a name the loop assigns but that is not bound yet (k-means' ``labels``
    before its loop): only tiers with ``accepts_unbound`` see it."""

    __slots__ = ()

    def __repr__(self):
        return "<unbound>"

    def __reduce__(self):
        return "UNBOUND"  # the module's one instance, in every process


UNBOUND = _Unbound()


def register(factory):
    if factory not in FACTORIES:
        FACTORIES.append(factory)
    return factory


class HandOver:
    """The tiers of one loop. ``params``: the names generated code passes (the union of the tiers' own, in this
    order); ``outputs``: the names a tier's result assigns; ``reason``: why no tier can apply (or None)."""

    def __init__(self, tiers, where: str):
        self.tiers = tiers
        self.where = where
        names = []
        for t in tiers:
            names += [p for p in t.params if p not in names]
        self.params = sorted(names)
        self.outputs = [p for p in self.params if any(p in t.outputs for t in tiers)]
        self._picks = [tuple(self.params.index(p) for p in t.params) for t in tiers]
        self.reason = None if any(t.static_reason is None for t in tiers) else tiers[-1].static_reason
        # False once every tier has given up on this loop for good (``dead``): generated code then skips the
        # hand-over (a loop started on every iteration of an outer one would pay it each time)
        self.live = True

    def __call__(self, ev, args):
        for tier, picks in zip(self.tiers, self._picks):
            mine = tuple(args[i] for i in picks)
            if not getattr(tier, "accepts_unbound", False) and any(a is UNBOUND for a in mine):
                continue
            out = tier(ev, mine)
            if out is not None:
                if tier.outputs != self.outputs:  # in the hand-over's order; what a tier does not assign stays
                    got = dict(zip(tier.outputs, out))
                    out = tuple(got[o] if o in got else args[self.params.index(o)] for o in self.outputs)
                return out
        if all(getattr(t, "dead", False) for t in self.tiers):
            self.live = False
        return None

    def ran(self, t0):
        for t in self.tiers:
            if hasattr(t, "ran"):
                t.ran(t0)

    def explain(self, whole_native: bool = False) -> list[str]:
        """The tiers' lines; ``whole_native``: the function runs as one native kernel for every signature seen,
        so the lines of tiers that are part of it (``part_of_whole``: the native loop tier) are left out."""
        lines, earlier = [], False
        for t in self.tiers:
            if whole_native and getattr(t, "part_of_whole", False):
                continue
            mine = t.explain()
            # after a tier that met its own kind of inputs (tiled arrays), the next tier's verdict is about others
            lines += [line + " (for NumPy inputs)" for line in mine] if earlier else mine
            earlier = earlier or bool(mine)
        return lines
