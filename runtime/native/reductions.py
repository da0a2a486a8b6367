"""NumPy's reductions over axes in a native kernel: ``np.sum``/``np.mean``/``np.max``/``np.min`` (``amax``, ``amin``)
and ``np.argmin``/``np.argmax`` with an axis (the first index of the extreme, of the first NaN if any), and the
methods of the first four, with ``axis=`` a constant int or tuple of ints (or None) and ``keepdims=`` a constant
bool; ``np.sum``/``np.mean`` of N-d arrays without an axis too. A mixin of
lower.Lowerer (``self.fail``, ``self.emit``, ``self.conditional`` are its).

The array is made C-contiguous with its reduced axes moved together (a copy only where they are not), seen as a 2-D
array of its kept and reduced elements, and reduced by a helper of helpers_reduce.py; the result is reshaped to
NumPy's. The result dtype is NumPy's own (the kernel run on stand-ins: an int32 sum is int64, an int mean float64).
Orders: reduced trailing axes are summed pairwise per output, as NumPy's inner loop does on a C-contiguous array;
otherwise the reduced elements are added one by one in C order, as NumPy's outer loops do. NumPy follows the memory
order of the array it is given (a transposed view sums in another order), so float sums and means are marked inexact
(stored, never compared); max and min are exact, NaN propagating as in NumPy."""
from __future__ import annotations

import numpy as np
from phylanx_py.primitives import lookup

from phylanx_py import ir

from . import kinds as K
from . import kir
from .facts import allocates

# the primitives this module lowers, with the reduction each one is
REDUCTIONS = {"sum": "sum", "mean": "mean", "max": "max", "amax": "max", "min": "min", "amin": "min",
              "method.sum": "sum", "method.mean": "mean", "method.max": "max", "method.min": "min",
              "argmin": "argmin", "argmax": "argmax"}


def takes(name, n, ks) -> bool:
    """Whether this module lowers the call (else the call's ordinary rule does: ``np.sum`` of a 1-D float or int64
    array in calls.py, ``np.max`` of a whole array as Numba's)."""
    if name not in REDUCTIONS:
        return False
    if name.startswith("method.") or n.kwargs or len(n.args) > 1:
        return True
    a = ks[0]  # 1-D: sums of other dtypes (bool, int32: exact); a 1-D mean of ints stays with calls.py's rule
    return REDUCTIONS[name] in ("sum", "mean") and type(a) is np.ndarray and (
        a.ndim != 1 or (name == "sum" and a.dtype not in (np.float64, np.float32, np.int64)))


def _constant(node):
    """The value of a constant argument (an int, None, a bool, a tuple of ints), else ``...``."""
    if isinstance(node, ir.Const):
        return node.value
    if isinstance(node, ir.Tuple):
        items = [_constant(x) for x in node.items]
        return ... if any(type(x) is not int for x in items) else tuple(items)
    if isinstance(node, ir.Call) and node.prim == "operator.neg" and len(node.args) == 1:
        v = _constant(node.args[0])
        return -v if type(v) is int else ...
    return ...


class ReduceRules:
    def reduction(self, n, args, tags):
        """(source, kind, tainted) of reduction call ``n`` whose arguments lowered to ``args``; ``tags``: where the
        tags of the first one's text are in ``self.pending`` (from, to)."""
        op = REDUCTIONS[n.prim]
        src, a, tainted = args[0]
        label = lookup(n.prim).label
        if type(a) is not np.ndarray or a.dtype.kind not in "biuf":
            self.fail(f"{label} of {K.describe(a)}", n)
        if tainted and op in ("max", "min", "argmin", "argmax"):
            self.fail(f"{label} of an inexact result (exp, log, ...): Numba's last bit may differ", n)
        kw = dict(n.kwargs)
        if len(n.args) > 2 or set(kw) - {"axis", "keepdims"} or (len(n.args) == 2 and "axis" in kw):
            self.fail(f"{label} with other arguments than axis= and keepdims=", n)
        if len(n.args) == 2:
            kw["axis"] = n.args[1]
        kw = {k: _constant(v) for k, v in kw.items()}
        if not kw and a.ndim == 1 and op == "sum" and a.dtype in (np.float64, np.float32, np.int64):
            # ``x.sum()`` of a 1-D array: np.sum's exact rule, np.sum's own form (the method's is Numba's sum one
            # by one, whose last bits differ past 8 elements)
            return self.form_of(lookup("sum").lowering, [src]), a.dtype.type(3), tainted
        if kw.get("keepdims", False) not in (True, False) or kw.get("axis") is ...:
            self.fail(f"{label} with an axis or keepdims that is not a constant", n)
        prim = lookup(n.prim)
        try:  # NumPy's result kind; its errors (a bad axis) and dtypes the kernels do not take (uint64) decline
            k = K.run(lambda x: prim.kernel(x, **kw), a)
        except K.Decline as e:
            self.fail(f"{label}: {e}", n)
        axis = kw.get("axis")
        if axis == ():
            self.fail(f"{label} over no axes", n)
        d = a.ndim
        axes = sorted({x % d for x in ((axis,) if type(axis) is int else axis or range(d))})
        kept = [i for i in range(d) if i not in axes]
        t = src  # a name is read as it is (another name bound to an argument would count as a write: kir.Use)
        if not src.isidentifier():
            if self.conditional:  # the array's temporary is bound by a statement before the expression's
                self.fail(f"{label} of an expression in a part of an expression that may not run", n)
            t = f"__pxr{self._reduction_number(n)}"
            self.emit_from(*tags, f"{t} = {src}").tags += (kir.Name(t, True),)
            self.hold(t, a, fresh=allocates(n.args[0]))
        self.names(reads=[t])  # (its shape, its elements below; a name's own read is tagged already)
        size = lambda dims: " * ".join(f"{t}.shape[{i}]" for i in dims) or "1"  # noqa: E731
        # the reduced axes trail (rows, summed pairwise), or are one run between kept ones (before, reduced,
        # after: no transpose, whose Numba typing cost 5 s of compile on a 5-d array); else moved last (a copy)
        mid = axes == list(range(axes[0], axes[-1] + 1)) and axes[-1] != d - 1 and op not in ("argmin", "argmax")
        rows = not mid
        arr = t if mid or kept == list(range(len(kept))) else self.call_of("np.transpose", t, str(tuple(kept + axes)))
        arr = self.call_of("np.ascontiguousarray", arr)
        out = k.dtype if type(k) is np.ndarray else np.asarray(k).dtype
        acc = np.dtype(np.float64) if op == "mean" and a.dtype.kind in "biu" else (
            a.dtype if op in ("max", "min", "argmin", "argmax") else out)
        if acc != a.dtype:
            arr = f"{arr}.astype(np.{acc.name})"
        two = f"{arr}.reshape(({size(kept)}, {size(axes)}))" if rows else \
            f"{arr}.reshape(({size(range(axes[0]))}, {size(axes)}, {size(range(axes[-1] + 1, d))}))"
        if op in ("max", "min"):
            core = self.helper(f"_pxr_ext_{'rows' if rows else 'mid'}", two, str(op == "max"))
        elif op in ("argmin", "argmax"):  # the first index of the extreme in the reduced axis (moved last: rows)
            core = self.helper("_pxr_arg_rows", two, str(op == "argmax"))
        else:
            helper = "_pxr_sum_mid" if not rows else "_pxr_sum_rows" if acc.kind == "f" else "_pxr_isum_rows"
            core = self.helper(helper, two, self.call_of(f"np.{'bool_' if acc == np.bool_ else acc.name}", "0"))
        if type(k) is np.ndarray:
            shape = [f"{t}.shape[{i}]" if i in kept else "1" for i in range(d) if i in kept or kw.get("keepdims")]
            core = f"{core}.reshape(({''.join(s + ', ' for s in shape)}))"
        else:
            core = f"{core}[0]"
            self.pending.append(kir.Access(core, "item"))
        if op == "mean":
            count = size(axes)
            self.pending.append(kir.Op("division"))
            if out == np.float32:  # NumPy divides a float32 sum by the count in float64, then casts back
                core = self.call_of("np.float32", f"{self.call_of('np.float64', core)} / ({count})") \
                    if type(k) is not np.ndarray else \
                    f"(({core}).astype(np.float64) / ({count})).astype(np.float32)"
            else:
                core = f"({core} / ({count}))"
        inexact = op in ("sum", "mean") and out.kind == "f"
        return core, k, tainted or inexact

    def _reduction_number(self, n) -> int:
        """The call's number among the loop's reductions: its temporary's name, the same in every lowering."""
        if not hasattr(self, "_reductions"):
            roots = [self.loop, getattr(self, "ret", None)]  # a whole function's returned expression too
            self._reductions = {id(c): i for i, c in enumerate(
                x for r in roots if r is not None for x in ir.walk(r)
                if isinstance(x, ir.Call) and x.prim in REDUCTIONS)}
        if id(n) not in self._reductions:
            self.fail(f"{lookup(n.prim).label} inside a called function", n)
        return self._reductions[id(n)]
