"""The interval algebra of the native tier's bounds proofs (bounds.py): affine forms over invariants
(``const + sum(coeff * symbol)``, a symbol being the source of a value a loop nest does not change) and intervals
of them, and the operations a primitive's interval rule (``Lowering.interval``) computes with (``IntervalOps``).
Sums of at most eight terms with coefficients up to 1024 over values below 2**48 cannot overflow int64, so the
conditions built from them are exact."""
from __future__ import annotations

from phylanx_py import ir

MAX_TERMS, MAX_COEFF, MAX_CONST = 8, 1 << 10, 1 << 40


class Affine:
    """``const + sum(coeff * symbol)``, a symbol being the source of an invariant (``n``, ``A.shape[1]``)."""

    __slots__ = ("const", "terms")

    def __init__(self, const=0, terms=()):
        self.const = const
        self.terms = dict(terms)

    @staticmethod
    def sym(src):
        return Affine(0, {src: 1})

    def plus(self, other, sign=1):
        terms = dict(self.terms)
        for s, c in other.terms.items():
            terms[s] = terms.get(s, 0) + sign * c
        return _checked(Affine(self.const + sign * other.const, {s: c for s, c in terms.items() if c}))

    def times(self, k):
        return _checked(Affine(self.const * k, {s: c * k for s, c in self.terms.items() if c * k}))

    def source(self):
        parts = [str(self.const)] + [f"{c} * {s}" for s, c in sorted(self.terms.items())]
        return "(" + " + ".join(parts) + ")"


def _checked(a):
    if abs(a.const) > MAX_CONST or len(a.terms) > MAX_TERMS or any(abs(c) > MAX_COEFF for c in a.terms.values()):
        return None
    return a


def plus(x, y, sign=1):
    """``x + sign * y`` of two Affines, None when either is unknown or the sum leaves the exact range."""
    return None if x is None or y is None else x.plus(y, sign)


class Interval:
    """``[lo, hi]``, each an Affine or None (unknown)."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi


def scaled(iv, k):
    """The Interval ``k * iv``."""
    lo = iv.lo.times(k) if iv.lo is not None else None
    hi = iv.hi.times(k) if iv.hi is not None else None
    return Interval(lo, hi) if k >= 0 else Interval(hi, lo)


class IntervalOps:
    """What an interval rule (a primitive's ``Lowering.interval(ops, *args)``) computes with: ``interval(arg)``
    (an argument's Interval or None), interval sums, differences and products by an int, ``const(arg)`` (an int
    constant's value or None) and MAX_COEFF, the largest factor the bounds stay exact with. Unknown in, None out."""

    MAX_COEFF = MAX_COEFF

    def __init__(self, prover):
        self.interval = prover.interval

    @staticmethod
    def add(x, y):
        return None if x is None or y is None else Interval(plus(x.lo, y.lo), plus(x.hi, y.hi))

    @staticmethod
    def sub(x, y):
        return None if x is None or y is None else Interval(plus(x.lo, y.hi, -1), plus(x.hi, y.lo, -1))

    @staticmethod
    def scale(x, k):
        return None if x is None else scaled(x, k)

    @staticmethod
    def const(n):
        return n.value if isinstance(n, ir.Const) and type(n.value) is int else None
