"""Arithmetic lowered with NumPy's and Python's semantics where Numba's differ (a mixin of lower.Lowerer):
operands of small-int/float32 arithmetic cast to the dtype NumPy computes in (NEP 50's weak Python scalars),
Python-int results through checked helpers (no wrap at 2**63), NumPy's integer power, shift, floor division and
complex division rules, in-place updates in the array's dtype, and operations on Either scalars (kinds.py)."""
from __future__ import annotations

import itertools

import numpy as np
from phylanx_py.primitives import lookup

from phylanx_py import ir

from . import kinds as K
from . import kir
from .calls import SAFE
from .facts import rule
from .kinds import Decline
from .signs import Signs


class ArithRules:
    """NumPy-vs-Numba rules of arithmetic (a mixin of lower.Lowerer: ``self.fail``, ``self.checked`` are its)."""

    def inplace(self, n, prim, low, atoms, ks, tainted):
        """An in-place update of array ``ks[0]`` (``a += b``): NumPy's casting rule, its dtype kept, and the
        integer division, remainder and shift Numba does otherwise."""
        K.run(prim.kernel, *ks)  # NumPy's casting rule for the in-place update
        self.int_power(n, ks[0])
        if len(ks) == 2 and ks[0].dtype not in (np.float64, np.int64, np.bool_) and not (
                np.result_type(ks[0].dtype, ks[1].dtype if type(ks[1]) is np.ndarray or
                               isinstance(ks[1], np.generic) else ks[1]) == ks[0].dtype and
                (type(ks[1]) is not np.ndarray or ks[1].dtype == ks[0].dtype)):
            # NumPy computes a float32 array += an int32 array (or np.float64) in float64, Numba in float32
            self.fail(f"an in-place update of a {ks[0].dtype} array computed in another dtype "
                      f"({K.describe(ks[1])})", n)
        if len(ks) == 2 and type(ks[1]) is np.ndarray:  # an array operand: as NumPy reads it (helpers.py)
            atoms = [atoms[0], self.helper("_px_unaliased", atoms[0], atoms[1])]
        if len(ks) == 2 and type(ks[1]) in (int, float) and ks[0].dtype not in (np.float64, np.int64):
            # NEP 50: a Python scalar takes the array's dtype (a float32 array += 0.1 adds float32(0.1))
            atoms = [atoms[0], self.weak_cast(atoms[1], ks[1], np.result_type(ks[0].dtype, ks[1]), n.args[1])]
        if ks[0].dtype.kind == "c" and low.complex == "inexact":
            tainted = True  # a complex product (``Lowering.complex``)
        if low.divides == "mod":  # Numba's np.remainder traps (SIGFPE) on int64 -2**63 % -1; its % does not
            return self.helper("_px_imod", atoms[0], atoms[1]), ks[0], tainted
        if low.divides == "floor" and ks[0].dtype.kind == "i":
            return self.helper("_px_ifloordiv", atoms[0], atoms[1]), ks[0], tainted
        if low.shifts and not self.small_shift(n, ks[0]):
            if ks[0].dtype != np.int64:
                self.fail(f"a shift of {ks[0].dtype} by a count that may reach its width", n)
            return self.helper(f"_px_i{low.shifts[0]}shift", atoms[0], atoms[1]), ks[0], tainted
        return self.call_of(f"np.{low.inplace}", atoms[0], atoms[1], atoms[0]), ks[0], tainted

    def either_call(self, n, prim, low, atoms, ks, origins, tainted):
        """An operation on variables that are Python or NumPy scalars: NumPy's result is a NumPy scalar when any
        of them is one. Every reading must agree on the source, or differ only where the all-Python reading's
        checked helper falls back to the interpreter (a Python int past 2**63, a zero divisor)."""
        names = sorted({name for o in origins for name in o})
        if len(names) > 3:
            self.fail("an operation on more than three variables that may be Python or NumPy scalars", n)
        readings = []
        for bits in itertools.product((0, 1), repeat=len(names)):
            np_side = {name for name, b in zip(names, bits) if b}
            sk = [(k.np if np_side & set(k.origin) else k.py) if type(k) is K.Either else k for k in ks]
            try:
                rk = K.run(prim.kernel, *sk)
            except Decline as e:
                self.fail(f"{prim.label}: {e}", n)
            mark = len(self.pending)
            readings.append((rk, self.arith(n, low, atoms, sk, rk), self.pending[mark:], sk))
            del self.pending[mark:]  # the tags of the reading taken are added below
        (kp, sp, tags, sk_py), rest = readings[0], readings[1:]
        kn, sn, _, _ = rest[0]
        if any(K.key(k) != K.key(kn) or src != sn for k, src, _, _ in rest):
            self.fail(f"{prim.label} of values that may be Python or NumPy scalars", n)
        if K.key(kp) == K.key(kn):
            k = kp
        else:
            k = K.either_of(kp, kn, names[0])
            if k is None:
                self.fail(f"{prim.label} gives {K.describe(kp)} or {K.describe(kn)}", n)
            k = K.Either(k.py, k.np, names)
        calls = [c for c in tags if type(c) is kir.Call]
        families = {kir.family(c.name) for c in calls}
        if sp == sn:
            src = sp
        elif "ck" in families or any(c.name == "_py_int" for c in calls):
            src = sp  # a Python-int overflow falls back to the interpreter, which also covers the NumPy reading
        elif "py" in families:
            # a zero divisor falls back: raise or inf depends on the type. The all-Python reading again, with the
            # helper its declaration gives for an operand that may be either (``Lowering.ambiguous``)
            self.ambiguous = True
            try:
                src = self.arith(n, low, atoms, sk_py, kp)
            finally:
                self.ambiguous = False
            tags = self.pending[mark:]
            del self.pending[mark:]
            calls = [c for c in tags if type(c) is kir.Call]
        else:
            self.fail(f"{prim.label} of a value that may be a Python or a NumPy scalar", n)
        self.pending += tags
        if {"ck", "amb"} & {kir.family(c.name) for c in calls} or any(c.name == "_py_int" for c in calls):
            self.checked = True
        inexact = low.inexact and not K.is_int(k)
        return src, k, tainted or inexact

    def array_operands(self, n, atoms, ks, k):
        """The operands of array arithmetic in other dtypes than float64/int64/bool (float32, small ints), cast to
        the dtype NumPy computes in: Numba promotes an array with a scalar, or arrays of two dtypes, otherwise
        (float32 * 0.1 is float64 there, int32 * float32 float32), so every array must have that dtype already
        and scalars are cast to it (a Python int checked to fit, as NumPy raises when it does not). The result
        must have that dtype too (or be a comparison's bool): Numba divides int8/int16 arrays into float32 and
        takes their sqrt in float32, where NumPy gives float64 and float16."""
        try:
            common = np.result_type(*[x.dtype if type(x) is np.ndarray or isinstance(x, np.generic) else x
                                      for x in ks])
        except TypeError:
            self.fail("operands without a common dtype", n)
        if common.kind not in "biuf" and not (common == np.complex128 and rule(n.prim, "complex")):
            # complex128: what the primitive declares (``Lowering.complex``: + - * and negation, component-wise as
            # NumPy; Numba's complex division raises at zero, its comparisons and functions are not NumPy's)
            self.fail(f"array arithmetic in {common}", n)
        if any(type(x) is np.ndarray and x.dtype.kind != common.kind for x in ks):
            self.fail(f"array arithmetic mixing {' and '.join(sorted({K.describe(x) for x in ks}))} "
                      "(Numba promotes them otherwise)", n)
        # a narrower array of the same kind is cast first, as NumPy's loop casts it (float32 with float64: an
        # exact widening, the same in every engine)
        atoms = [f"{a}.astype(np.{common.name})" if type(x) is np.ndarray and x.dtype != common else a
                 for a, x in zip(atoms, ks)]
        if type(k) is np.ndarray and k.dtype not in (common, np.bool_):
            self.fail(f"{n.prim.rsplit('.', 1)[-1]} of {common} arrays giving {k.dtype} (Numba's dtype differs)", n)
        return [self.weak_cast(a, x, common, arg) if K.is_scalar(x) and np.asarray(x).dtype != common else a
                for a, x, arg in zip(atoms, ks, n.args)]

    def weak_cast(self, atom, x, dtype, node=None):
        """The source of scalar operand ``atom`` (kind ``x``) cast to ``dtype``, as NumPy converts it: a Python int
        to a small int dtype only when it fits (else NumPy raises OverflowError: the kernel stops, to rerun
        interpreted)."""
        name = "bool_" if dtype == np.bool_ else dtype.name
        if type(x) is int and dtype.kind in "iu" and dtype != np.int64:
            info = np.iinfo(dtype)
            if isinstance(node, ir.Const) and info.min <= node.value <= info.max:
                return self.call_of(f"np.{name}", atom)
            self.checked = True
            return self.call_of(f"np.{name}", self.helper("_ck_fit", atom, str(info.min), str(info.max)))
        return self.call_of(f"np.{name}", atom)

    def int_power(self, n, k):
        """NumPy raises on integers to negative integer powers; Numba gives 0: only constant exponents >= 0."""
        if not rule(n.prim, "powers"):
            return
        ints = isinstance(k, np.integer) or (type(k) is np.ndarray and k.dtype.kind in "iu")
        e = n.args[1] if len(n.args) > 1 else None
        if ints and not (isinstance(e, ir.Const) and type(e.value) is int and e.value >= 0):
            self.fail("an integer power with an exponent that may be negative (NumPy raises, Numba gives 0)", n)

    def small_shift(self, n, k) -> bool:
        """The shift count is a constant in [0, width of the result): every engine shifts alike."""
        if type(k) is int:
            width = 64
        elif type(k) is np.ndarray or isinstance(k, np.integer):
            width = k.dtype.itemsize * 8
        else:
            return False
        c = n.args[1] if len(n.args) > 1 else None
        return isinstance(c, ir.Const) and type(c.value) is int and 0 <= c.value < width

    def shift(self, n, atoms, k):
        """The source of a shift by a count that may be outside [0, width), as Python or NumPy shift."""
        if type(k) is int:  # Python: << is checked for overflow (_ck_lshift, the pyint path)
            self.checked = True
            return self.helper("_ck_rshift", atoms[0], atoms[1])
        if not (isinstance(k, np.int64) or (type(k) is np.ndarray and k.dtype == np.int64)):
            self.fail(f"a shift of {K.describe(k)} by a count that may reach its width", n)
        op = f"{rule(n.prim, 'shifts')[0]}shift"
        return self.helper(f"_np_{op}_{'a' if type(k) is np.ndarray else 's'}", atoms[0], atoms[1])

    def arith(self, n, low, atoms, ks, k):
        """The operation's source with the casts and checks that keep NumPy's/Python's semantics."""
        if low.divides and any(type(x) is complex or isinstance(x, np.complexfloating) or
                                        (type(x) is np.ndarray and x.dtype.kind == "c") for x in ks) and \
                any(isinstance(x, np.generic) or type(x) is np.ndarray for x in ks):
            # NumPy gives inf/nan for a complex division by zero; Numba raises ZeroDivisionError whatever the
            # error model (Python's complex numbers alone raise too, and stay allowed)
            self.fail("a division of NumPy complex numbers (Numba raises at zero, NumPy gives inf/nan)", n)
        self.int_power(n, k)
        if low.shifts and not (type(k) is int and low.shifts == "left") and not self.small_shift(n, k):
            return self.shift(n, atoms, k)
        arrays = [x for x in ks + [k] if type(x) is np.ndarray]
        if arrays:
            if any(a.dtype not in (np.float64, np.int64, np.bool_) for a in arrays) or \
                    any(K.is_scalar(x) and type(x) not in K.PLAIN for x in ks):
                atoms = self.array_operands(n, atoms, ks, k)
            if low.divides == "floor" and type(k) is np.ndarray and k.dtype.kind == "i":
                return self.helper("_np_floordiv_a", atoms[0], atoms[1])
            return self.form_of(low, atoms)
        py = all(type(x) in (int, float, bool) for x in ks)
        if type(k) is int and low.pyint and not low.powers:
            b = self.bound(n)
            if b is not None and b < SAFE:
                return self.form_of(low, atoms)  # bounded far below 2**63: no check (index arithmetic: i + 1)
            if self.nonneg and Signs(self.nonneg, self._leaf_nodes).safe(n):
                return self.form_of(low, atoms)  # x - 1 with x >= 0
        if type(k) is int and low.pyint:
            if low.powers and not (isinstance(n.args[1], ir.Const) and n.args[1].value >= 0):
                self.fail("a Python int raised to a power that may be negative", n)
            self.checked = True
            return self.helper(low.pyint, *atoms)
        if py and low.pyscalar:
            self.checked = True  # its helper stops the kernel (_Overflow) where Python raises: the arrays go back
            return self.helper(low.ambiguous if self.ambiguous and low.ambiguous else low.pyscalar, *atoms)
        if py and low.powers == "python" and float in map(type, ks) and not (
                isinstance(n.args[1], ir.Const) and type(n.args[1].value) is int and n.args[1].value >= 0):
            self.fail("a Python float power with an exponent that may be negative or fractional", n)
        if all(type(x) in K.PLAIN for x in ks) and type(k) in K.PLAIN:
            if low.divides == "floor" and type(k) is np.int64:
                return self.helper("_np_floordiv_s", atoms[0], atoms[1])
            src = self.form_of(low, atoms)
            return self.call_of("np.bool_", src) if isinstance(k, np.bool_) and not lookup(n.prim).comparison else src
        # NumPy computes in the promoted dtype of the operands (Python scalars are weak): cast them to it;
        # Python functions (math.*) take doubles
        if type(k) in (int, float, bool):
            common = np.dtype(np.int64 if type(k) is int else np.float64)
        else:
            try:
                common = np.result_type(*[x if not isinstance(x, np.generic) else x.dtype for x in ks])
            except TypeError:
                self.fail("operands without a common dtype", n)
            if common.kind in "iu" and common != np.int64 and int in map(type, ks) and lookup(n.prim).comparison:
                common = np.dtype(np.int64)  # NumPy 2 compares a Python int with a small int exactly
        # NEP 50: a Python int takes a small int dtype, raising OverflowError when it does not fit (``weak_cast``)
        cast = [self.weak_cast(a, x, common, arg) if not isinstance(x, np.generic) or x.dtype != common else a
                for a, x, arg in zip(atoms, ks, n.args)]
        if low.divides == "floor" and isinstance(k, np.signedinteger):
            src = self.helper("_np_floordiv_s", cast[0], cast[1])
        else:
            src = self.form_of(low, cast)
        rk = ("bool_" if k.dtype == np.bool_ else k.dtype.name) if isinstance(k, np.generic) else type(k).__name__
        return self.call_of(f"np.{rk}" if isinstance(k, np.generic) else rk, src)
