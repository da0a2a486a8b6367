"""Loop nests lowered in two versions under a test of values at their start (a mixin of lower.Lowerer): with the
accesses proven in bounds unchecked (bounds.py), and knowing which Python ints stay non-negative (signs.py); the
first runs when the test holds, the other as the loop is: the test is a kir.If marked with its version
(outline.py moves the first)."""
from __future__ import annotations

from . import kinds as K
from . import kir
from .bounds import Prover
from .nests import otherwise_rerun
from .signs import inductive, untested_counters

RERUN_BOUNDS = "a loop whose accesses were not all proven in bounds for these shapes"


class Versions:
    """``for``/``while`` lowered in versions (a mixin of lower.Lowerer: ``for_loop``/``while_loop`` are its)."""

    def s_For(self, n):
        self.versioned(n, self.for_loop)

    def s_While(self, n):
        self.versioned(n, self.while_loop)

    def versioned(self, n, lower_loop):
        inner = lower_loop
        lower_loop = lambda n: self.sign_versioned(n, inner)  # noqa: E731 - the loop, and its sign version
        if not self.manual or self.loop_entries or self.unchecked:
            return lower_loop(n)
        prover = Prover(n, self.env, self.bounds)
        if not prover.proven:
            return lower_loop(n)
        self.two_versions(n, lower_loop, prover.conditions, "unchecked", frozenset(prover.proven), prover.setup,
                          prover.condition_calls)

    def sign_versioned(self, n, lower_loop):
        """The loop lowered knowing which Python ints stay non-negative through it (signs.py), under a test of
        their values at its start, and as it is."""
        names = inductive(n, self.env) - self.nonneg
        names -= untested_counters(n, names, self.counters)
        if not names:
            return lower_loop(n)
        self.two_versions(n, lower_loop, [f"{name} >= 0" for name in sorted(names)], "nonneg", self.nonneg | names,
                          calls=tuple(kir.Name(name) for name in sorted(names)))

    def two_versions(self, n, lower_loop, conds, attr, assumed, setup=(), calls=()):
        """The loop lowered with ``self.<attr>`` set to ``assumed`` (what holds when ``conds``, tests of values at
        its start, hold) and as it is, the first run when they hold; once when no test is needed (it is lowered
        with the assumption) or when the assumption changes nothing. ``setup``: (statement, its helper calls) before
        the test; ``calls``: the helper calls of ``conds``."""
        before, lines, indent, known = self._state(), self.lines, self.indent, getattr(self, attr)
        self.lines, self.indent, hoisted = [], indent + 1, self.hoisted
        setattr(self, attr, assumed)
        lower_loop(n)
        setattr(self, attr, known)
        hoisted = self.hoisted != hoisted
        fast, after, after_key = self.lines, self._state(), self._state_key()
        self.lines, self.indent = lines, indent
        if not conds:
            self.lines += kir.shifted(fast, -1)
            return
        self._restore(before)
        self.lines, self.indent = [], indent + 1
        rarely = self.rarely_run
        self.rarely_run = rarely or attr == "unchecked"  # (its indices checked by calls: helpers._ixr)
        try:
            lower_loop(n)
        finally:
            self.rarely_run = rarely
        plain = self.lines
        self.lines, self.indent = lines, indent
        if self._state_key() != after_key:  # both versions are one loop: they must leave the same kinds
            self.fail(f"a loop whose two versions ({attr} or not) disagree on kinds", n)
        # one version when both are the same code but for temporaries' numbers (loop nests of array statements
        # carry their own tests, and a copy more costs Numba seconds to compile). Not yet when a nest hoists a
        # scalar: the comparison of printed lines this replaced never renumbered those (``__pxz_v7``), so such
        # versions stayed two; merging them too changes kernels, a step of its own
        if kir.decided_alike(fast, plain) and not hoisted:
            self.lines += kir.shifted(plain, -1)
            return
        for line, tags in setup:  # what the tests read (an index array's least and greatest element)
            self.put(kir.Stmt(0, line, tags))
            for t in tags:
                if type(t) is kir.Name and t.binds:
                    self.hold(t.name, 1)  # (an element, or whether there is one: numbers)
        self.put(kir.If(0, " and ".join(conds), calls, version=attr))  # outline.py moves its body
        self.lines += fast
        at_entry = attr == "unchecked" and self.changed and not setup and indent == 1 and self.fixed_before(calls)
        if attr == "unchecked" and (not self.changed or at_entry):
            # the loop as it is is not compiled: where its accesses are not all in bounds, the call (or the loop)
            # reruns interpreted, which gives NumPy's answer or error at the user's line; nothing the caller sees
            # has changed before the test, so nothing is put back. That branch was half of a small kernel's
            # compile (NPBench's lu: 0.57 s with it, 0.30 s without) and runs only for shapes the proof does not
            # cover (an index past an array's end). After a change the caller sees, a test that reads only values
            # fixed before that change (parameters never bound again, names bound once before it) is made before
            # it too (``entry_tests``, FunctionLowerer), where a failure still reruns the call: here it then always
            # holds (NPBench's cholesky, whose ``A[0, 0] = np.sqrt(A[0, 0])`` comes first, compiled in 0.65 s
            # rather than 1.0 s with both versions; ludcmp's second and third loops, after the first changed A)
            if at_entry:
                self.entry_tests.append((tuple(conds), tuple(calls)))
            otherwise_rerun(self, RERUN_BOUNDS, unchanged=True)
        else:
            self.put(kir.Else(0))
            self.lines += plain
        self._restore(after)

    def fixed_before(self, calls) -> bool:
        """Whether the tests whose tags are ``calls`` (the names they read among them: bounds.Prover's
        ``condition_calls``) read only values fixed before the first statement that may change what the caller sees:
        parameters the function never binds again, names bound once before it (``fixed``, which a whole function's
        lowering keeps)."""
        fixed = getattr(self, "fixed", None)
        return fixed is not None and all(t.name in fixed for t in calls if type(t) is kir.Name)

    def _state(self):
        return (dict(self.env), set(self.taint), dict(self.bounds), self.arrays_tainted)

    def _state_key(self):
        return ({k: K.key(v) for k, v in self.env.items()}, set(self.taint), dict(self.bounds), self.arrays_tainted)

    def _restore(self, state):
        env, taint, bounds, arrays = state
        self.env, self.taint, self.bounds, self.arrays_tainted = dict(env), set(taint), dict(bounds), arrays

