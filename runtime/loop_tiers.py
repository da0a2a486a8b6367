"""Tiers that may run a whole loop in place of the interpreter, asked in order before the loop starts.

Generated code calls one ``HandOver`` per outermost loop with the values of the loop's free variables; the first
tier that runs the loop returns its outputs, else the interpreted loop runs. Tiers register a factory here when
their package is imported, as value kinds do (kinds.py), so codegen and the decorator know none of them by name:
the SPMD tier (runtime/spmd: tiled arrays on Dask) and the native tier (runtime/native: Numba kernels, asked last).

A tier may also take a whole function (``register_function``): its ``call`` runs a call of the program's entry,
and its ``quick(args)``, when not None, is tried before anything else per call and returns the result, ``MISS``
(not this call: take the general path) or ``FALLBACK`` (run this call through the tree)."""
from __future__ import annotations

# (factory, native, nested, order): ``factory(fn, loop, where, program, namespaces, **extra) -> tier or None``;
# ``native``: its tiers run native code (not offered in programs built without, such as profiled ones);
# ``nested``: also offered loops inside a loop a tier may take (called with ``inner=True`` for those)
FACTORIES: list = []
FUNCTION_FACTORIES: list = []  # factory(program) -> whole-function tier or None
PREPARERS: list = []  # preparer(): a function was compiled; a tier may start what its first use will need
EARLY: list = []  # early(pyfunc) -> a function of a call's arguments before translation (``early``), or None
FIRST: list = []  # first(pyfunc) -> bool: a tier wants the function's first call in its code, not the plain function
MISS = object()  # a whole-function tier's quick path does not apply to this call: take the general path
FALLBACK = object()  # run this call through the tree (the tier declined it and left the arguments as they were)


class _Unbound:
    """The value generated code passes for a name the loop assigns but that is not bound yet (k-means' ``labels``
    before its loop): only tiers with ``accepts_unbound`` see it."""

    __slots__ = ()

    def __repr__(self):
        return "<unbound>"

    def __reduce__(self):
        return "UNBOUND"  # the module's one instance, in every process


UNBOUND = _Unbound()


def register(factory, *, native: bool = False, nested: bool = False, order: int = 0):
    """Offer outermost loops to ``factory``'s tiers from now on; lower ``order`` first (the native tier: last)."""
    if all(f[0] is not factory for f in FACTORIES):
        FACTORIES.append((factory, native, nested, order))
        FACTORIES.sort(key=lambda f: f[3])
    return factory


def register_function(factory):
    if factory not in FUNCTION_FACTORIES:
        FUNCTION_FACTORIES.append(factory)
    return factory


def register_preparer(preparer):
    if preparer not in PREPARERS:
        PREPARERS.append(preparer)
    return preparer


def register_first(first):
    if first not in FIRST:
        FIRST.append(first)
    return first


def translates_first(pyfunc) -> bool:
    """Whether a tier asks for ``pyfunc``'s first call to run its code (translated in that call), not the plain
    function beside the translation (runtime/beside.py): every call forced native, or a kernel of it kept before."""
    return any(f(pyfunc) for f in FIRST)


class Raised:
    """What an ``early`` function returns when the code it ran raised (the function is translated then, and the
    error handled as its tier handles it: runtime/native/early.py)."""

    __slots__ = ()


def register_early(factory):
    if factory not in EARLY:
        EARLY.append(factory)
    return factory


def early(pyfunc):
    """What runs ``pyfunc``'s calls before it is translated, on signatures a tier remembers for it (the native
    tier's kept kernels: runtime/native/early.py): a function of a call's argument tuple, or None."""
    for factory in EARLY:
        found = factory(pyfunc)
        if found is not None:
            return found
    return None


def prepare() -> None:
    """A function was compiled (the decorator, for the CPU): each tier may start ahead what its first use needs."""
    for preparer in PREPARERS:
        preparer()


def tiers_for(fn, loop, where, program, namespaces, *, inner: bool, native: bool) -> list:
    """The tiers that may take this loop: ``inner``, a loop inside one a tier may take; ``native``, the program
    may run native code."""
    tiers = []
    for factory, makes_native, nested, _ in FACTORIES:
        if (makes_native and not native) or (inner and not nested):
            continue
        tier = factory(fn, loop, where, program, namespaces, inner=inner) if nested else \
            factory(fn, loop, where, program, namespaces)
        if tier is not None:
            tiers.append(tier)
    return tiers


def function_tier(program):
    """The first registered tier that takes ``program``'s entry as a whole function, or None."""
    for factory in FUNCTION_FACTORIES:
        tier = factory(program)
        if tier is not None:
            return tier
    return None


def kernel_ready(tier):
    """``tier`` made a kernel ready: the floor (floor.py) of the program whose loop it is times the tree again.
    Only its own program's: every kernel landing in the process, fused ones included, was the cue of every
    program's floor, and in NPBench's run of 54 kernels the builds of earlier kernels still landing sent
    covariance2's early calls to its tree (5x slower than its plain function) every third call: 0.5x NumPy early,
    0.95x alone (2026-11-28, load ~1). A fused kernel built makes the tree faster by a constant factor only: the
    floor's probes find that."""
    tier.kernels_ready += 1


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
        # parameters that are module data globals, not names of the function (name -> module key): generated code
        # passes the global's value read as the interpreter reads it (a tier's ``globals``)
        self.globals = {}
        for t in tiers:
            self.globals.update(getattr(t, "globals", {}))
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
            # (unless it too is about the cluster's arrays: ``cluster_inputs``)
            local = earlier and not getattr(t, "cluster_inputs", False)
            lines += [line + " (for NumPy inputs)" for line in mine] if local else mine
            earlier = earlier or bool(mine)
        return lines
