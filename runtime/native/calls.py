"""The native lowering's rules for calls with kind rules of their own (indexing, range, len, shapes,
allocations, sums, min/max, int, dtype constructors), and the bounds that let Python-int arithmetic run
unchecked. A mixin of lower.Lowerer: ``self.fail``, ``self.bounds`` and the kinds module are its."""
from __future__ import annotations

import numpy as np
from phylanx_py.primitives import lookup

from phylanx_py import ir

from . import kinds as K
from . import kir, masks
from .facts import rule
from .signs import Signs

SHAPE = 1 << 48  # lengths and shapes: no array has more elements
SAFE = 1 << 62  # |x| below this: x + y, x - y of two such values stay below 2**63
DTYPE_CONSTS = {getattr(np, n): n for n in ("float64", "float32", "int64", "int32", "int16", "int8", "uint8",
                                            "uint16", "uint32", "bool_", "complex128")}


class CallRules:
    # ---- bounds of Python ints (|x| <= bound): arithmetic proven far from 2**63 needs no check ---------------
    def bound(self, n):
        if isinstance(n, ir.Const):
            return abs(n.value) if type(n.value) in (int, bool) else None
        if isinstance(n, ir.Var):
            return self.bounds.get(n.name)
        if isinstance(n, ir.Leaf):  # in a fused expression's body: its leaf's expression
            nodes = self._leaf_nodes
            return self.bound(nodes[n.index]) if n.index < len(nodes) else None
        if not isinstance(n, ir.Call):
            return None
        p = n.prim
        if p in ("builtins.len", "attr.size", "attr.ndim") or (
                p == "operator.getitem" and isinstance(n.args[0], ir.Call) and n.args[0].prim == "attr.shape"):
            return SHAPE
        bs = [self.bound(a) for a in n.args]
        if not bs or None in bs:
            return None
        magnitude = rule(p, "magnitude")  # the primitive's own (``Lowering.magnitude``: + - * // % min ...)
        return magnitude(*bs) if magnitude is not None else None

    def range_bound(self, n):
        """|i| bound of a ``for i in range(...)`` target the body does not assign."""
        it = n.iter
        if not (isinstance(it, ir.Call) and it.prim == "builtins.range"):
            return None
        name = n.target.name
        if any(isinstance(s, (ir.StoreName, ir.SetVar)) and s.name == name for s in ir.walk(n.body)):
            return None
        bs = [self.bound(a) for a in it.args]
        return None if None in bs else max(bs)

    def counts(self, n):
        """What ``for`` loop ``n`` counts (kir.Counts: a step of 1, a start that cannot be negative) when it is
        over ``range(...)``, else None: parallel.py reads it, not the printed ``range``."""
        it = n.iter
        if not (isinstance(it, ir.Call) and it.prim == "builtins.range" and not it.kwargs and 1 <= len(it.args) <= 3):
            return None
        args = it.args
        unit = len(args) < 3 or (isinstance(args[2], ir.Const) and type(args[2].value) is int and args[2].value == 1)
        signs = Signs(self.known_nonneg())  # (Expressions: once per what the lowering knows, not per loop)
        return kir.Counts(unit, len(args) == 1 or signs.nonneg(args[0]))

    # ---- calls with their own kind rules; the source they give is their declaration's form (``form``) ---------
    def form(self, n, atoms):
        """The source of call ``n`` over ``atoms`` as its primitive's ``Lowering`` writes it."""
        return self.form_of(lookup(n.prim).lowering, atoms)

    def index_kind(self, ak, kk, node):
        items = kk if type(kk) is tuple else (kk,)
        ndim = ak.ndim
        left = ndim
        for it in items:
            if it is None:
                left += 1
            elif type(it) is slice:
                pass
            elif K.is_int(it) and type(it) is not bool:
                left -= 1
            else:
                self.fail(f"indexing with {K.describe(it)}", node)
        consumed = sum(1 for it in items if it is not None)
        if consumed > ndim:
            self.fail("too many indices", node)
        return ak.dtype.type(3) if left == 0 and not any(it is None for it in items) and consumed == ndim \
            else K.array(ak.dtype, left)

    def c_operator_getitem(self, n, atoms, ks, kwargs):
        obj, key = ks
        if type(obj) is np.ndarray and type(key) is np.ndarray and key.dtype == np.bool_:
            return masks.rule(self, n, atoms, obj, key)  # x[mask]: the elements where mask is true (masks.py)
        if type(obj) is np.ndarray and type(key) is np.ndarray:
            # x[cols]: a 1-D array of its elements at a 1-D int array's (a copy; each index checked, as NumPy
            # raises IndexError, negative ones counting from the end)
            if obj.ndim != 1 or key.ndim != 1 or key.dtype.kind not in "iu":
                self.fail(f"indexing {K.describe(obj)} with {K.describe(key)}", n)
            return self.helper("_px_take", atoms[0], atoms[1]), K.array(obj.dtype, 1)
        if type(obj) is np.ndarray:
            kind = self.index_kind(obj, key, n)
            if type(kind) is np.ndarray:  # a view of the array: what is written through it changes the array
                base = n.args[0]
                self.viewed.add(base.name if isinstance(base, ir.Var) and base.depth == 0 else "*")
            text = self.access(n, n.args[0], atoms[0], n.args[1], atoms[1], key)
            self.in_index(atoms[1])
            for i in range(len(self.pending) - 1, -1, -1):  # the array's mention is the subscript's (kir.Use)
                u = self.pending[i]
                if type(u) is kir.Use and u.text == atoms[0] and not u.read:
                    if u.text == u.array:  # (a subscript of a view: the view stays as it is, kept)
                        element = type(kind) is not np.ndarray and self.items_written == obj.ndim
                        self.pending[i] = kir.Use(u.array, text, element)
                    break
            return text, kind
        if type(obj) is tuple and isinstance(n.args[1], ir.Const) and type(n.args[1].value) is int:
            text = f"{atoms[0]}[{atoms[1]}]"
            if not (isinstance(n.args[0], ir.Call) and n.args[0].prim == "attr.shape"):  # (a length: no access)
                self.pending.append(kir.Access(atoms[0], "item"))  # (in range: the lowering knows the tuple's length)
            return text, obj[n.args[1].value]
        self.fail(f"indexing {K.describe(obj)}", n)

    def c_python_slice(self, n, atoms, ks, kwargs):
        if not all(k is None or (K.is_int(k) and type(k) is not bool) for k in ks):
            self.fail("a slice of non-integers", n)
        src = self.form(n, atoms)
        self.mention("", src)  # (a slice value: in an index, or a name may hold it: kir.Use)
        return src, K.SLICE

    def c_python_tuple(self, n, atoms, ks, kwargs):
        return self.form(n, atoms), tuple(ks)

    def c_builtins_range(self, n, atoms, ks, kwargs):
        if not all(K.is_int(k) and type(k) is not bool for k in ks):
            self.fail("range of non-integers", n)
        return self.form(n, atoms), K.RANGE

    def c_builtins_len(self, n, atoms, ks, kwargs):
        if type(ks[0]) is not np.ndarray and type(ks[0]) is not tuple:
            self.fail(f"len of {K.describe(ks[0])}", n)
        return self.form(n, atoms), 3

    def _minmax(self, n, atoms, ks):
        if len(ks) != 2 or K.key(ks[0]) != K.key(ks[1]) or not K.is_scalar(ks[0]):
            self.fail(f"{n.prim[9:]} of other than two values of one kind", n)
        return self.form(n, atoms), ks[0]

    def c_builtins_min(self, n, atoms, ks, kwargs):
        return self._minmax(n, atoms, ks)

    def c_builtins_max(self, n, atoms, ks, kwargs):
        return self._minmax(n, atoms, ks)

    def c_builtins_int(self, n, atoms, ks, kwargs):
        if len(ks) != 1 or not K.is_scalar(ks[0]):
            self.fail("int of a non-number", n)
        if K.is_int(ks[0]) or type(ks[0]) is bool or isinstance(ks[0], np.bool_):
            return self.form(n, atoms), 3
        self.checked = True
        return self.helper("_py_int", atoms[0]), 3

    def c_attr_shape(self, n, atoms, ks, kwargs):
        return self._array_attr(n, atoms, ks, "shape", lambda a: tuple(3 for _ in range(a.ndim)))

    def c_attr_size(self, n, atoms, ks, kwargs):
        return self._array_attr(n, atoms, ks, "size", lambda a: 3)

    def c_attr_ndim(self, n, atoms, ks, kwargs):
        return self._array_attr(n, atoms, ks, "ndim", lambda a: 3)

    def c_attr_dtype(self, n, atoms, ks, kwargs):  # the kind of a dtype is its scalar type, as of ``np.float64``
        return self._array_attr(n, atoms, ks, "dtype", lambda a: a.dtype.type)

    def c_attr_T(self, n, atoms, ks, kwargs):
        return self._array_attr(n, atoms, ks, "T", lambda a: a)

    def _array_attr(self, n, atoms, ks, attr, kind):
        if type(ks[0]) is not np.ndarray:
            self.fail(f".{attr} of {K.describe(ks[0])}", n)
        return self.form(n, atoms), kind(ks[0])

    def c_sum(self, n, atoms, ks, kwargs):
        a = ks[0]
        if len(ks) != 1 or type(a) is not np.ndarray or a.ndim != 1 or \
                a.dtype not in (np.float64, np.float32, np.int64):
            self.fail("np.sum other than of a 1-D float64/float32/int64 array (NumPy's summation order)", n)
        return self.form(n, atoms), a.dtype.type(3)

    def c_mean(self, n, atoms, ks, kwargs):
        """``np.mean`` of a 1-D float64/float32 array, as NumPy's ``_mean`` computes it: the pairwise sum in the
        array's dtype, divided by the count in float64 and cast back to that dtype."""
        a = ks[0]
        if len(ks) != 1 or type(a) is not np.ndarray or a.ndim != 1 or a.dtype not in (np.float64, np.float32):
            self.fail("np.mean other than of a 1-D float64/float32 array (NumPy's summation order)", n)
        src = self.form(n, atoms)
        if a.dtype != np.float64:
            total = self.call_of("np.float64", self.helper("_px_sum", atoms[0]))
            self.pending.append(kir.Op("division"))
            src = self.call_of("np.float32", f"{total} / {atoms[0]}.shape[0]")
        return src, a.dtype.type(3)

    def c_linspace(self, n, atoms, ks, kwargs):
        """``np.linspace(start, stop, num)`` (``dtype=np.float64`` too) of int or float64 numbers: float64 in NumPy's
        steps (``_px_linspace``); a float32 start would compute in float32, other arguments change the steps."""
        if len(ks) != 3 or any(not (type(k) in (int, float) or isinstance(k, (np.float64, np.int64)))
                               for k in ks[:2]) or not K.is_int(ks[2]) or type(ks[2]) is bool or \
                (kwargs and kwargs["dtype"][1] is not np.float64):
            self.fail("np.linspace other than of int/float64 start and stop and a count (float64)", n)
        return self.form(n, atoms), K.array(np.dtype(np.float64), 1)

    def _product(self, n, atoms, ks):
        """``a @ b``, ``np.dot``, ``np.matmul`` of two 1-D or 2-D arrays of one float dtype, as Numba's ``np.dot``
        (BLAS through SciPy: its last bit may differ from NumPy's BLAS, so the result is inexact: stored, never
        compared). The same for these shapes: a vector product is a scalar, a matrix-vector product a vector."""
        if len(ks) != 2 or any(type(k) is not np.ndarray for k in ks):
            self.fail("a matrix product of other than two arrays", n)
        a, b = ks
        if a.dtype != b.dtype or a.dtype not in (np.float64, np.float32, np.complex128) or \
                not (1 <= a.ndim <= 2 and 1 <= b.ndim <= 2):
            self.fail("a matrix product of other than 1-D/2-D arrays of one dtype, float64, float32 or complex128", n)
        k = np.dot(a, b)
        return self.form(n, atoms), (k if type(k) is np.ndarray else a.dtype.type(3)), True

    def c_operator_matmul(self, n, atoms, ks, kwargs):
        return self._product(n, atoms, ks)

    def c_dot(self, n, atoms, ks, kwargs):
        return self._product(n, atoms, ks)

    def c_matmul(self, n, atoms, ks, kwargs):
        return self._product(n, atoms, ks)

    def outer(self, n, atoms, ks, kwargs):
        """``np.add.outer(a, b)`` (subtract, multiply) of two 1-D arrays: the ufunc's lowering (its declaration's)
        on ``a[:, None]`` and ``b[None, :]``, with the arithmetic's dtype rules (``arith``) on 2-D stand-ins."""
        if len(ks) != 2 or any(type(k) is not np.ndarray or k.ndim != 1 for k in ks):
            self.fail(f"{n.prim} of other than two 1-D arrays", n)
        prim = lookup(n.prim)
        k = K.run(prim.kernel, *ks)
        wide = [K.array(ks[0].dtype, 2), K.array(ks[1].dtype, 2)]
        self.pending += [kir.Access(atoms[0], "view"), kir.Access(atoms[1], "view")]  # (a[:, None], b[None, :])
        return self.arith(n, prim.lowering, atoms, wide, k), k

    c_add_outer = c_subtract_outer = c_multiply_outer = outer

    def _alloc(self, n, atoms, ks, kwargs, fn):
        shape = ks[0]
        if K.is_int(shape):
            ndim = 1
        elif type(shape) is tuple and all(K.is_int(x) for x in shape):
            ndim = len(shape)
        else:
            self.fail(f"np.{fn} of a shape that is not ints", n)
        dt = np.float64
        given = atoms[:1]
        if len(atoms) > 1 or kwargs:
            src, k, _ = kwargs["dtype"] if kwargs else (atoms[1], ks[1], False)
            if k not in DTYPE_CONSTS:
                self.fail(f"np.{fn} with this dtype", n)
            dt, given = k, [atoms[0], src]  # the dtype passed by position
        return self.form(n, given), K.array(np.dtype(dt), ndim)

    def c_zeros(self, n, atoms, ks, kwargs):
        return self._alloc(n, atoms, ks, kwargs, "zeros")

    def c_ones(self, n, atoms, ks, kwargs):
        return self._alloc(n, atoms, ks, kwargs, "ones")

    def c_empty(self, n, atoms, ks, kwargs):
        return self._alloc(n, atoms, ks, kwargs, "empty")

    def c_ndarray(self, n, atoms, ks, kwargs):
        return self._alloc(n, atoms, ks, kwargs, "empty")  # np.ndarray(shape, dtype): an uninitialised array


def _dtype_call(name):
    def rule(self, n, atoms, ks, kwargs):
        if len(ks) != 1 or not K.is_scalar(ks[0]):
            self.fail(f"np.{name} of other than one number", n)
        if name != "float64" and name != "float32" and name != "complex128" and type(ks[0]) is int:
            self.fail(f"np.{name} of a Python int (NumPy raises if it does not fit)", n)
        return self.form(n, atoms), np.dtype(name).type(3)
    return rule


for _name in ("float64", "float32", "int64", "bool_"):
    setattr(CallRules, f"c_{_name}", _dtype_call(_name))
