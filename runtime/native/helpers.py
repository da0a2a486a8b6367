"""Numba helpers every generated native-loop module starts with: Python-int arithmetic that raises instead of
wrapping at 2**63, division of Python scalars that raises at zero (as Python does; NumPy scalars give inf, which
is the kernels' error model), and NumPy's pairwise summation order for float sums.

Each helper is a plain Python function here (``@helper``: the Numba options it is compiled with besides the
kernels' own); a kernel's module holds the prelude (imports, ``_MIN``/``_MAX``, ``_Overflow``) and the source of
only the helpers its kernel IR calls (kir.py tags each call), with the helpers those call (``helpers_for``; the
calls are read from the functions' code objects): each helper is a Numba dispatcher with a disk cache, and making
all 33 of them cost 17 ms a kernel load, where loading the kernel's own cached machine code costs 5 ms."""
import dis
import functools
import inspect
import linecache
import math
import sys
import threading

import numpy as np

from . import helpers_numpy, helpers_reduce

_MIN = -9223372036854775808
_MAX = 9223372036854775807


class _Overflow(Exception):
    pass


_DEFS: dict = {}  # name -> the helper function, in the order defined (their modules keep it)


def helper(**options):
    """Declare a helper, compiled in a kernel's module with ``numba.njit(cache=True, nogil=True, **options)``."""
    def declare(fn):
        fn.njit_options = options
        _DEFS[fn.__name__] = fn
        return fn
    return declare


# An index that bounds.py did not prove in bounds: the kernels run without Numba's boundscheck (it keeps loops
# from vectorising), so the source checks it, as NumPy does (negative indices count from the end). Inlined in
# Numba's IR: as a call it cost 16 ns an access (histogram, 20x slower than with boundscheck), inlined under 1.
@helper(inline="always")
def _ix(i, n):
    if i < -n or i >= n:
        raise IndexError("index out of bounds")
    return i


# ``_ix`` where it rarely runs: in the loop as it is, beside its version with the accesses proven in bounds
# (versions.py), which runs whenever the test at the loop's start holds. Not inlined: Numba types an inlined
# helper again at each call site, and those copies were a quarter of a small kernel's compile (NPBench's lu: 0.66 s
# with them, 0.50 s without); the version that runs is unchanged.
@helper()
def _ixr(i, n):
    if i < -n or i >= n:
        raise IndexError("index out of bounds")
    return i


# The least and greatest element of an int64 array and whether they may be used, read once at a loop nest's start
# when the nest indexes with its elements (bounds.py: ``hist[idx[i]]`` in bounds for every i when both are within
# hist's shape): not when the array has more than ``budget`` elements (a pass over it would cost more than the
# nest), nor when an element is past 2**47 in magnitude (the affine bound tests stay exact only below).
@helper()
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


@helper(inline="always")
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
@helper()
def _apart(a, b):
    if a.size == 0 or b.size == 0:
        return True
    alo, ahi = _extent(a)
    blo, bhi = _extent(b)
    return ahi <= blo or bhi <= alo


# The operand of an in-place update (``a[1:] += a[:-1]``, ``A += A.T``) as NumPy reads it: NumPy copies an operand
# that shares memory with the target first; Numba's ufunc with ``out`` reads it while writing (a review found
# [0, 1, 3, 6, 10] where NumPy gives [0, 1, 3, 5, 7]). A copy only where their memory meets.
@helper()
def _px_unaliased(a, b):
    if _apart(a, b):
        return b
    return b.copy()


# ``dst[...] = src`` of an array into a view of as many dimensions (lower.py): Numba's own slice assignment
# compiles an error message of the two shapes as text, 1.5-2.2 s in a process's first kernel that has one (a third
# of a typical kernel's time to native), and these loops, inlined, run as fast. ``src`` is read apart from ``dst``
# (_px_unaliased at the call). A value that does not broadcast to the target stops the kernel: the interpreter
# then raises NumPy's own error for it.
@helper(inline="always")
def _px_assign1(dst, src):
    if src.shape[0] == dst.shape[0]:
        for i in range(dst.shape[0]):
            dst[i] = src[i]
    else:
        _px_assign_spread(dst, src)


@helper(inline="always")
def _px_assign2(dst, src):
    if src.shape[0] == dst.shape[0] and src.shape[1] == dst.shape[1]:
        for i in range(dst.shape[0]):
            for j in range(dst.shape[1]):
                dst[i, j] = src[i, j]
    else:
        _px_assign_spread(dst, src)


@helper(inline="always")
def _px_assign3(dst, src):
    if src.shape[0] == dst.shape[0] and src.shape[1] == dst.shape[1] and src.shape[2] == dst.shape[2]:
        for i in range(dst.shape[0]):
            for j in range(dst.shape[1]):
                for k in range(dst.shape[2]):
                    dst[i, j, k] = src[i, j, k]
    else:
        _px_assign_spread(dst, src)


@helper()
def _px_assign_spread(dst, src):  # (not inlined: the broadcast case, rare, is compiled once per kernel)
    for d in range(dst.ndim):
        if src.shape[d] != dst.shape[d] and src.shape[d] != 1:
            raise _Overflow("an assignment whose value does not broadcast to its target")
    b = np.broadcast_to(src, dst.shape)
    for i in np.ndindex(dst.shape):
        dst[i] = b[i]


# Whether an operand's strides (of its dimensions longer than 1, taken in order) never grow: NumPy then makes an
# element-wise result C-ordered, as scalarize.py's loop nest allocates it (otherwise the array expression runs,
# whose result keeps the operands' order, as NumPy's: F-ordered inputs give an F-ordered result).
@helper(inline="always")
def _c_order(strides, lengths):
    last = -1
    for d in range(len(strides)):
        if lengths[d] > 1:
            s = abs(strides[d])
            if last >= 0 and s > last:
                return False
            last = s
    return True


# A slice's start and length on a dimension of length ``d`` as Python reads its bounds ``a:b`` (negative from the
# end, clipped), and an int index read from the end when negative (with its unsigned form, 0 when still negative:
# the nest's test then fails on it): the index parts of scalarize.py's loop nests (nests.Spans). One call each, not
# the 4-8 conditional expressions they were written as: each a branch whose blocks and twice-bound names Numba's
# SSA pass (quadratic in them) and typing paid for; NPBench's hdiff, cavity_flow and adi compiled in 4.6, 4.3 and
# 4.9 s with the calls against 11.9, 12.0 and 11.2 s without (one warm process, load ~1). Not inlined, so typed once
# per kernel; the calls run once per statement, not per element. Their bounds are never int literals (Numba
# compiles a dispatcher once per literal value): constants come as ``np.int64(c)``.
@helper()
def _px_span(a, b, d):
    if a < 0:
        a = a + d if a + d > 0 else 0
    elif a > d:
        a = d
    if b < 0:
        b = b + d if b + d > 0 else 0
    elif b > d:
        b = d
    return np.uint64(a), np.uint64(b - a if b > a else 0)


@helper()
def _px_at(k, d):
    k = k + d if k < 0 else k
    return k, np.uint64(k if k >= 0 else 0)


# A Python int operand of small-int NumPy arithmetic (NEP 50: it takes the other operand's dtype, uint8 + x is
# uint8): NumPy raises OverflowError when it is outside that dtype's range; the loop reruns interpreted, which
# raises it at its line
@helper(inline="always")
def _ck_fit(x, lo, hi):
    if x < lo or x > hi:
        raise _Overflow()
    return x


# x[idx]: the elements of a 1-D array at a 1-D int array's values, as NumPy takes them (negative ones count from
# the end; one out of bounds raises IndexError)
@helper()
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


# The checks never compute an overflowing product or sum: LLVM may assume signed arithmetic does not wrap.
@helper()
def _ck_add(a, b):
    if (b > 0 and a > _MAX - b) or (b < 0 and a < _MIN - b):
        raise _Overflow()
    return a + b


@helper()
def _ck_sub(a, b):
    if (b < 0 and a > _MAX + b) or (b > 0 and a < _MIN + b):
        raise _Overflow()
    return a - b


@helper()
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
@helper()
def _np_floordiv_s(a, b):
    return -a if b == -1 else a // b


@helper()
def _np_floordiv_a(a, b):
    return np.where(b == -1, -a, a // b)


@helper()
def _px_ifloordiv(a, b):
    a[...] = _np_floordiv_a(a, b)
    return a


@helper()
def _np_int_of(v):  # a float stored into an int64 array, as NumPy converts it (through a Python int)
    if v != v:
        raise ValueError("cannot convert float NaN to integer")
    if v == math.inf or v == -math.inf:
        raise OverflowError("cannot convert float infinity to integer")
    if v >= 9223372036854775808.0 or v < -9223372036854775808.0:
        raise OverflowError("Python int too large to convert to C long")
    return np.int64(v)


@helper()
def _px_imod(a, b):  # a %= b on an array: Numba's np.remainder(a, b, a) kills the process on -2**63 % -1
    a[...] = a % b
    return a


@helper()
def _ck_abs(a):  # abs(-2**63) is 2**63 for a Python int; Numba's wraps to -2**63
    if a == _MIN:
        raise _Overflow()
    return abs(a)


@helper()
def _ck_neg(a):
    if a == _MIN:
        raise _Overflow()
    return -a


@helper()
def _ck_lshift(a, b):
    if b < 0:
        raise ValueError("negative shift count")
    if a == 0:
        return a
    if b >= 63 or (a > 0 and a > (_MAX >> b)) or (a < 0 and a < (_MIN >> b)):
        raise _Overflow()
    return a << b


@helper()
def _ck_rshift(a, b):  # Python: a >> 64 and past is 0 or -1; Numba's shifts by b mod 64
    if b < 0:
        raise ValueError("negative shift count")
    return a >> b if b < 64 else a >> 63


# NumPy int64 shifts by a count outside [0, 64): << gives 0, >> gives 0 or -1; Numba's shifts by the count mod 64
@helper()
def _np_lshift_s(a, s):
    return a << s if 0 <= s < 64 else a - a


@helper()
def _np_rshift_s(a, s):
    return a >> s if 0 <= s < 64 else a >> 63


@helper()
def _np_lshift_a(a, s):
    return np.where((s >= 0) & (s < 64), a << (s & 63), a - a)


@helper()
def _np_rshift_a(a, s):
    return np.where((s >= 0) & (s < 64), a >> (s & 63), a >> 63)


@helper()
def _px_ilshift(a, s):
    a[...] = _np_lshift_a(a, s)
    return a


@helper()
def _px_irshift(a, s):
    a[...] = _np_rshift_a(a, s)
    return a


@helper()
def _ck_pow(a, b):
    r = a ** 0
    for _ in range(b):
        r = _ck_mul(r, a)
    return r


@helper()
def _py_truediv(a, b):
    if b == 0:
        raise ZeroDivisionError("division by zero")
    return a / b


@helper()
def _py_floordiv(a, b):
    if b == 0:
        raise ZeroDivisionError("integer division or modulo by zero")
    if b == -1 and a == _MIN:  # -2**63 // -1 is 2**63 for Python ints; Numba gives 0
        raise _Overflow()
    return a // b


@helper()
def _py_mod(a, b):
    if b == 0:
        raise ZeroDivisionError("integer modulo by zero")
    return a % b


# a value that may be a Python or a NumPy scalar divided by zero: raise (Python) or inf (NumPy) depends on
# which, so the loop reruns interpreted
@helper()
def _amb_truediv(a, b):
    if b == 0:
        raise _Overflow()
    return a / b


@helper()
def _amb_floordiv(a, b):
    if b == 0 or (b == -1 and a == _MIN):
        raise _Overflow()
    return a // b


@helper()
def _amb_mod(a, b):
    if b == 0:
        raise _Overflow()
    return a % b


@helper()
def _py_int(x):
    if x != x:
        raise ValueError("cannot convert float NaN to integer")
    if not -9.223372036854775e18 <= x <= 9.223372036854775e18:
        raise _Overflow()
    return int(x)


def _codes(code):
    """``code`` and the code objects nested in it (comprehensions, inner functions)."""
    yield code
    for c in code.co_consts:
        if inspect.iscode(c):
            yield from _codes(c)


@functools.cache
def helper_calls() -> dict:
    """{helper: the helpers it calls}, from the global names its code refers to."""
    return {name: {n for c in _codes(fn.__code__) for n in c.co_names if n in _DEFS and n != name}
            for name, fn in _DEFS.items()}


_RAISE = dis.opmap["RAISE_VARARGS"]  # (bytecode is made of 2-byte units, each an opcode and its argument)


@functools.cache
def raising() -> frozenset:
    """The helpers that may raise: a ``raise`` in their code, or a call of a helper that may."""
    out = {name for name, fn in _DEFS.items() if any(_RAISE in c.co_code[::2] for c in _codes(fn.__code__))}
    calls = helper_calls()
    while True:
        more = {name for name, called in calls.items() if called & out} - out
        if not more:
            return frozenset(out)
        out |= more


@functools.cache
def _texts() -> dict:
    """{helper: its module text: the comments right above it (its explanation goes with it), the Numba decorator,
    and its source}."""
    out = {}
    for name, fn in _DEFS.items():
        options = "".join(f", {k}={v!r}" for k, v in fn.njit_options.items())
        out[name] = _comments_above(fn) + f"@numba.njit(cache=True, nogil=True{options})\n" + \
            "\n".join(_def_lines(fn))
    return out


def _comments_above(fn) -> str:
    """The comment lines right above a top-level function (its decorators'), as inspect.getcomments gives them for
    it, read from the file's lines (findsource's regular expressions are compiled at a first call)."""
    lines = linecache.getlines(fn.__code__.co_filename)
    end = fn.__code__.co_firstlineno - 2
    comments = []
    while end >= 0 and lines[end][:1] == "#":
        comments.insert(0, lines[end].expandtabs())
        end -= 1
    while comments and comments[0].strip() == "#":
        del comments[0]
    while comments and comments[-1].strip() == "#":
        del comments[-1]
    return "".join(comments)


def _def_lines(fn) -> list[str]:
    """A top-level function's lines from its ``def`` (decorators left out) to its last line: from the file's lines
    up to the next line at column 0, not inspect.getsource, whose tokenizing of the 47 helpers took ~15 ms of a
    process's first kernel key (the scalar loop's first call 23 ms, its plain run 7). tests/test_native_kir.py
    checks every helper against inspect's text."""
    code = fn.__code__
    lines = linecache.getlines(code.co_filename)
    i = code.co_firstlineno - 1
    while not lines[i].startswith("def "):  # past the decorators
        i += 1
    end = i + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t"):
        end += 1
    while not lines[end - 1].strip():  # the blank lines before the next definition
        end -= 1
    return [line.rstrip("\n") for line in lines[i:end]]


@functools.cache
def _prelude() -> str:
    """What every helper may use: the modules, ``_MIN``/``_MAX`` and ``_Overflow`` (imported from here, not written
    out: a kernel built ahead of time (aot.py) raises it through Numba's pickled exception data, which must find
    the very class the caller catches)."""
    return ("import math\nimport numpy as np\nimport numba\n"
            f"from {__name__} import {_Overflow.__name__}\n\n" f"_MIN = {_MIN}\n_MAX = {_MAX}\n")


def helpers_for(names) -> str:
    """The helper part of the module text for a kernel that calls the helpers ``names`` (its kernel IR's:
    kir.Printed.helpers): the prelude and those helpers, taken from this process's module of all helpers
    (``shared``), which defines the helpers they call. The digest of that module's text is part of the kernel's:
    a kernel cached with other helpers is another kernel."""
    used = sorted(set(names) & _texts().keys())
    if not used:
        return _prelude()
    return _prelude() + f"from {__name__} import shared as _pxshared\n" + \
        f"{', '.join(used)}, = _pxshared({_shared_digest()!r}, {', '.join(map(repr, used))})\n"


def helpers_text(names) -> str:
    """The definitions of the helpers ``names`` and of the helpers they call, with the prelude: the text of the
    module of all helpers (``shared``) for every name."""
    texts, calls = _texts(), helper_calls()
    todo = set(names) & texts.keys()
    used = set()
    while todo:
        name = todo.pop()
        used.add(name)
        todo |= calls[name] - used
    return "\n\n\n".join([_prelude()] + [text for name, text in texts.items() if name in used]) + "\n"


# One module of all helpers per process, compiled where first called (not cached on disk: its machine code goes
# into each kernel that calls it, and a kernel's cache holds it). Why not each kernel's module its own copies: a
# process compiling kernels (the compile server) typed and compiled them again for every kernel, 0.5-1 s of
# NPBench's gemver (aliasing tests) and azimint_naive (pairwise sums) each time.
_SHARED: dict = {}  # digest -> the module
_shared_lock = threading.Lock()


@functools.cache
def _shared_source() -> str:
    return helpers_text(_DEFS).replace("@numba.njit(cache=True, ", "@numba.njit(cache=False, ")


@functools.cache
def _shared_digest() -> str:
    import hashlib

    return hashlib.sha256(_shared_source().encode()).hexdigest()[:24]


def shared(digest: str, *names):
    """The helpers ``names`` (Numba dispatchers) of this process's module of all helpers, made at its first use from
    this package's own functions; ``digest`` must be its text's (a kernel module made by another version of the
    helpers is not run with these)."""
    if digest != _shared_digest():
        raise ImportError(f"kernel helpers {digest} are not this process's ({_shared_digest()})")
    module = _SHARED.get(digest)
    if module is None:
        import types

        with _shared_lock:
            module = _SHARED.get(digest)
            if module is None:
                # registered as imported modules are: Numba names a kernel's callees by their module when it
                # caches the kernel
                module = types.ModuleType(f"phylanx_helpers_{digest}")
                sys.modules[module.__name__] = module
                exec(compile(_shared_source(), f"<phylanx helpers {digest}>", "exec"), module.__dict__)  # noqa: S102
                _SHARED[digest] = module
    return tuple(getattr(module, n) for n in names)


def __getattr__(name):
    if name == "HELPERS":  # every helper's module text (read by tests)
        return helpers_text(_DEFS)
    raise AttributeError(name)


for _fn in (helpers_numpy._px_linspace, helpers_numpy._block, helpers_numpy._pairwise, helpers_numpy._px_sum):
    helper()(_fn)  # NumPy's orders (helpers_numpy.py), compiled with the default options
for _fn in (helpers_reduce._pxr_sum_rows, helpers_reduce._pxr_isum_rows, helpers_reduce._pxr_sum_mid,
            helpers_reduce._pxr_ext_rows, helpers_reduce._pxr_ext_mid, helpers_reduce._pxr_arg_rows,
            helpers_reduce._px_mask):
    helper()(_fn)  # reductions over axes and boolean masks (helpers_reduce.py)
helper(inline="always")(helpers_reduce._pxr_empty)
helper(inline="always")(helpers_reduce._pxr_arg_empty)
