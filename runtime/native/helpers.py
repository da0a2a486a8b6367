"""Numba helpers every generated native-loop module starts with: Python-int arithmetic that raises instead of
wrapping at 2**63, division of Python scalars that raises at zero (as Python does; NumPy scalars give inf, which
is the kernels' error model), and NumPy's pairwise summation order for float sums.

A kernel's module holds the prelude (imports, constants, ``_Overflow``) and only the helpers its source names,
with the helpers those call (``helpers_for``): each helper is a Numba dispatcher with a disk cache, and making
all 33 of them cost 17 ms a kernel load, where loading the kernel's own cached machine code costs 5 ms."""
import ast
import functools
import re

from phylanx_py.source import parse

from .masks import HELPERS as _MASKS
from .reductions import HELPERS as _REDUCTIONS

HELPERS = '''
import math
import numpy as np
import numba

_MIN = -9223372036854775808
_MAX = 9223372036854775807


class _Overflow(Exception):
    pass


# An index that bounds.py did not prove in bounds: the kernels run without Numba's boundscheck (it keeps loops
# from vectorising), so the source checks it, as NumPy does (negative indices count from the end). Inlined in
# Numba's IR: as a call it cost 16 ns an access (histogram, 20x slower than with boundscheck), inlined under 1.
@numba.njit(cache=True, nogil=True, inline="always")
def _ix(i, n):
    if i < -n or i >= n:
        raise IndexError("index out of bounds")
    return i


# The least and greatest element of an int64 array and whether they may be used, read once at a loop nest's start
# when the nest indexes with its elements (bounds.py: ``hist[idx[i]]`` in bounds for every i when both are within
# hist's shape): not when the array has more than ``budget`` elements (a pass over it would cost more than the
# nest), nor when an element is past 2**47 in magnitude (the affine bound tests stay exact only below).
@numba.njit(cache=True, nogil=True)
def _vrange(a, budget):
    if a.size > budget:
        return 0, 0, False
    if a.size == 0:
        return 0, 0, True
    if a.flags.c_contiguous:  # one pass with both (vectorised): half the time of np.min then np.max
        lo = hi = np.int64(a.flat[0])
        for v in a.flat:
            lo, hi = min(lo, v), max(hi, v)
    else:  # there the flat iterator is the slower
        lo, hi = np.int64(np.min(a)), np.int64(np.max(a))
    if lo < -140737488355328 or hi > 140737488355328:
        return 0, 0, False
    return lo, hi, True


@numba.njit(cache=True, nogil=True, inline="always")
def _extent(a):
    lo = hi = a.ctypes.data
    for d in range(a.ndim):
        step = (a.shape[d] - 1) * a.strides[d]
        if step < 0:
            lo += step
        else:
            hi += step
    return lo, hi + a.itemsize


# Whether two arrays' memory is apart (their extents do not meet): an array a nest stores into must not be one
# whose elements _vrange read at the nest's start (the same array passed twice, or a view of it).
@numba.njit(cache=True, nogil=True)
def _apart(a, b):
    if a.size == 0 or b.size == 0:
        return True
    alo, ahi = _extent(a)
    blo, bhi = _extent(b)
    return ahi <= blo or bhi <= alo


# A Python int operand of small-int NumPy arithmetic (NEP 50: it takes the other operand's dtype, uint8 + x is
# uint8): NumPy raises OverflowError when it is outside that dtype's range; the loop reruns interpreted, which
# raises it at its line
@numba.njit(cache=True, nogil=True, inline="always")
def _ck_fit(x, lo, hi):
    if x < lo or x > hi:
        raise _Overflow()
    return x


# x[idx]: the elements of a 1-D array at a 1-D int array's values, as NumPy takes them (negative ones count from
# the end; one out of bounds raises IndexError)
@numba.njit(cache=True, nogil=True)
def _px_take(a, idx):
    n = a.shape[0]
    out = np.empty(idx.shape[0], a.dtype)
    for k in range(idx.shape[0]):
        i = np.int64(idx[k])
        if i < 0:
            i += n
        if i < 0 or i >= n:
            raise IndexError("index out of bounds")
        out[k] = a[i]
    return out


# np.linspace(start, stop, num) of numbers, float64, in NumPy's steps (function_base.linspace): arange times the
# step (or over the count times the span when the step underflows to 0), plus start, the last element set to stop
@numba.njit(cache=True, nogil=True)
def _px_linspace(start, stop, num):
    if num < 0:
        raise ValueError("Number of samples must be non-negative.")
    div = num - 1
    y = np.arange(0, num).astype(np.float64)
    delta = np.float64(stop) - np.float64(start)
    if div > 0:
        step = delta / div
        if step == 0:
            y = y / div
            y = y * delta
        else:
            y = y * step
    else:
        y = y * delta
    y = y + np.float64(start)
    if num > 1:
        y[num - 1] = np.float64(stop)
    return y


# The checks never compute an overflowing product or sum: LLVM may assume signed arithmetic does not wrap.
@numba.njit(cache=True, nogil=True)
def _ck_add(a, b):
    if (b > 0 and a > _MAX - b) or (b < 0 and a < _MIN - b):
        raise _Overflow()
    return a + b


@numba.njit(cache=True, nogil=True)
def _ck_sub(a, b):
    if (b < 0 and a > _MAX + b) or (b > 0 and a < _MIN + b):
        raise _Overflow()
    return a - b


@numba.njit(cache=True, nogil=True)
def _ck_mul(a, b):
    p = float(a) * float(b)
    if abs(p) < 9.2e18:
        return a * b
    # near 2**63: multiply in uint64 (wrapping is defined there) and check the product exactly
    r = np.int64(np.uint64(a) * np.uint64(b))
    if abs(p) > 9.3e18 or r // b != a or (r < 0) != ((a < 0) != (b < 0)):
        raise _Overflow()
    return r


# NumPy ints: -2**63 // -1 wraps to -2**63 (NumPy warns); Numba's // gives 0
@numba.njit(cache=True, nogil=True)
def _np_floordiv_s(a, b):
    return -a if b == -1 else a // b


@numba.njit(cache=True, nogil=True)
def _np_floordiv_a(a, b):
    return np.where(b == -1, -a, a // b)


@numba.njit(cache=True, nogil=True)
def _px_ifloordiv(a, b):
    a[...] = _np_floordiv_a(a, b)
    return a


@numba.njit(cache=True, nogil=True)
def _np_int_of(v):  # a float stored into an int64 array, as NumPy converts it (through a Python int)
    if v != v:
        raise ValueError("cannot convert float NaN to integer")
    if v == math.inf or v == -math.inf:
        raise OverflowError("cannot convert float infinity to integer")
    if v >= 9223372036854775808.0 or v < -9223372036854775808.0:
        raise OverflowError("Python int too large to convert to C long")
    return np.int64(v)


@numba.njit(cache=True, nogil=True)
def _px_imod(a, b):  # a %= b on an array: Numba's np.remainder(a, b, a) kills the process on -2**63 % -1
    a[...] = a % b
    return a


@numba.njit(cache=True, nogil=True)
def _ck_abs(a):  # abs(-2**63) is 2**63 for a Python int; Numba's wraps to -2**63
    if a == _MIN:
        raise _Overflow()
    return abs(a)


@numba.njit(cache=True, nogil=True)
def _ck_neg(a):
    if a == _MIN:
        raise _Overflow()
    return -a


@numba.njit(cache=True, nogil=True)
def _ck_lshift(a, b):
    if b < 0:
        raise ValueError("negative shift count")
    if a == 0:
        return a
    if b >= 63 or (a > 0 and a > (_MAX >> b)) or (a < 0 and a < (_MIN >> b)):
        raise _Overflow()
    return a << b


@numba.njit(cache=True, nogil=True)
def _ck_rshift(a, b):  # Python: a >> 64 and past is 0 or -1; Numba's shifts by b mod 64
    if b < 0:
        raise ValueError("negative shift count")
    return a >> b if b < 64 else a >> 63


# NumPy int64 shifts by a count outside [0, 64): << gives 0, >> gives 0 or -1; Numba's shifts by the count mod 64
@numba.njit(cache=True, nogil=True)
def _np_lshift_s(a, s):
    return a << s if 0 <= s < 64 else a - a


@numba.njit(cache=True, nogil=True)
def _np_rshift_s(a, s):
    return a >> s if 0 <= s < 64 else a >> 63


@numba.njit(cache=True, nogil=True)
def _np_lshift_a(a, s):
    return np.where((s >= 0) & (s < 64), a << (s & 63), a - a)


@numba.njit(cache=True, nogil=True)
def _np_rshift_a(a, s):
    return np.where((s >= 0) & (s < 64), a >> (s & 63), a >> 63)


@numba.njit(cache=True, nogil=True)
def _px_ilshift(a, s):
    a[...] = _np_lshift_a(a, s)
    return a


@numba.njit(cache=True, nogil=True)
def _px_irshift(a, s):
    a[...] = _np_rshift_a(a, s)
    return a


@numba.njit(cache=True, nogil=True)
def _ck_pow(a, b):
    r = a ** 0
    for _ in range(b):
        r = _ck_mul(r, a)
    return r


@numba.njit(cache=True, nogil=True)
def _py_truediv(a, b):
    if b == 0:
        raise ZeroDivisionError("division by zero")
    return a / b


@numba.njit(cache=True, nogil=True)
def _py_floordiv(a, b):
    if b == 0:
        raise ZeroDivisionError("integer division or modulo by zero")
    if b == -1 and a == _MIN:  # -2**63 // -1 is 2**63 for Python ints; Numba gives 0
        raise _Overflow()
    return a // b


@numba.njit(cache=True, nogil=True)
def _py_mod(a, b):
    if b == 0:
        raise ZeroDivisionError("integer modulo by zero")
    return a % b


# a value that may be a Python or a NumPy scalar divided by zero: raise (Python) or inf (NumPy) depends on
# which, so the loop reruns interpreted
@numba.njit(cache=True, nogil=True)
def _amb_truediv(a, b):
    if b == 0:
        raise _Overflow()
    return a / b


@numba.njit(cache=True, nogil=True)
def _amb_floordiv(a, b):
    if b == 0 or (b == -1 and a == _MIN):
        raise _Overflow()
    return a // b


@numba.njit(cache=True, nogil=True)
def _amb_mod(a, b):
    if b == 0:
        raise _Overflow()
    return a % b


@numba.njit(cache=True, nogil=True)
def _py_int(x):
    if x != x:
        raise ValueError("cannot convert float NaN to integer")
    if not -9.223372036854775e18 <= x <= 9.223372036854775e18:
        raise _Overflow()
    return int(x)


@numba.njit(cache=True, nogil=True)
def _block(a, lo, n):
    if n < 8:
        res = np.zeros(1, a.dtype)[0]
        for i in range(n):
            res += a[lo + i]
        return res
    r0 = a[lo]
    r1 = a[lo + 1]
    r2 = a[lo + 2]
    r3 = a[lo + 3]
    r4 = a[lo + 4]
    r5 = a[lo + 5]
    r6 = a[lo + 6]
    r7 = a[lo + 7]
    m = n - n % 8
    for i in range(8, m, 8):
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(m, n):
        res += a[lo + i]
    return res


# NumPy's recursion (halves rounded down to a multiple of 8, blocks of <= 128) as a loop over an explicit
# stack: Numba's disk cache crashes on recursive functions loaded back
@numba.njit(cache=True, nogil=True)
def _pairwise(a, lo, n):
    if n <= 128:
        return _block(a, lo, n)
    los = np.empty(64, np.int64)
    ns = np.empty(64, np.int64)
    stage = np.zeros(64, np.int64)
    left = np.zeros(64, a.dtype)
    sp = 0
    los[0] = lo
    ns[0] = n
    r = left[0]
    have = False
    while True:
        if have:
            if sp < 0:
                return r
            l, m = los[sp], ns[sp]
            if stage[sp] == 1:
                left[sp] = r
                stage[sp] = 2
                n2 = m // 2
                n2 -= n2 % 8
                sp += 1
                los[sp], ns[sp], stage[sp] = l + n2, m - n2, 0
                have = False
            else:
                r = left[sp] + r
                sp -= 1
            continue
        l, m = los[sp], ns[sp]
        if m <= 128:
            r = _block(a, l, m)
            sp -= 1
            have = True
            continue
        n2 = m // 2
        n2 -= n2 % 8
        stage[sp] = 1
        sp += 1
        los[sp], ns[sp], stage[sp] = l, n2, 0


@numba.njit(cache=True, nogil=True)
def _px_sum(a):
    """np.sum of a 1-D float64/float32/int64 array in NumPy's order (the lowering declines other kinds)."""
    return np.zeros(1, a.dtype)[0] + _pairwise(a, 0, a.shape[0])
''' + _REDUCTIONS + _MASKS


_NAME = re.compile(r"\b_[A-Za-z0-9_]+\b")


@functools.cache
def helper_defs() -> dict:
    """{helper: its function definition in HELPERS} (``ast``), one reading for every use of them."""
    return {n.name: n for n in parse(HELPERS).body if isinstance(n, ast.FunctionDef)}


@functools.cache
def helper_calls() -> dict:
    """{helper: the helpers it calls}."""
    defs = helper_defs()
    return {name: {c.func.id for c in ast.walk(f) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
            & defs.keys() for name, f in defs.items()}


@functools.cache
def _parts():
    """(prelude, {helper: its text, from the comments right above its decorator (its explanation goes with it)
    to its last line})."""
    lines = HELPERS.split("\n")
    texts, first = {}, None
    for name, f in helper_defs().items():
        start = f.decorator_list[0].lineno - 1 if f.decorator_list else f.lineno - 1
        while start > 0 and lines[start - 1].startswith("#"):
            start -= 1
        first = start if first is None else first
        texts[name] = "\n".join(lines[start:f.end_lineno])
    return "\n".join(lines[:first]), texts


def helpers_for(source: str) -> str:
    """The helper module text for a kernel ``source``: the prelude and the helpers it names, with the helpers
    those call."""
    prelude, texts = _parts()
    calls = helper_calls()
    todo = set(_NAME.findall(source)) & texts.keys()
    used = set()
    while todo:
        name = todo.pop()
        used.add(name)
        todo |= calls[name] - used
    return "\n\n\n".join([prelude.rstrip("\n")] + [text for name, text in texts.items() if name in used]) + "\n"
