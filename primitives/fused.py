"""Fused element-wise kernels: a chain like ``exp(-x*x)*sin(x)+2*x-1`` as one pass over memory.

A fused group is described by a *spec*, nested tuples over registry names: ``("arg", i)`` is the i-th input,
``("const", v)`` a scalar constant, ``(prim_name, child, ...)`` an element-wise primitive. The reference kernel
evaluates the spec with the registry's own kernels (exactly what the unfused tree computes). The Numba kernel is
generated source: one scalar function, each intermediate cast to the dtype NumPy gives it (found by running the
reference on zero-size stand-ins), compiled with ``numba.vectorize`` so NumPy's broadcasting applies; it is cached
in memory by (spec, input dtypes) and on disk next to the generated file, so another process reuses it.
Inputs that are not plain numeric arrays and scalars, small arrays, and the few operations whose integer
semantics Numba does not share with NumPy go to the reference kernel.
"""
from __future__ import annotations

import functools

import numpy as np

from . import backends, kernel_builds, kernel_cache
from .environ import OFF, raw_reader
from .fused_cupy import cupy_fused
from .kernel_builds import _BUILDING, _builds, cached_kernel, remember, wait_for_builds  # noqa: F401 - tests' names
from .kernel_runs import (  # noqa: F401 - fused_update, fused_reduce, nn_ops, rowdot and the SPMD ranks' names
    KERNEL_RUNS,
    PARALLEL_MIN_ELEMENTS,
    _blocks,
    _map_blocks,
    _out_dtype,
    _run,
    _threads,
    _timed,
    kernel_runs,
    kernel_threads,
    note_kernel,
)
from .registry import OperationFailed, exists, lookup, register


def fusable(name: str) -> bool:
    """Has primitive ``name`` an element-wise form for fused kernels (its declaration's ``fused``)?"""
    return exists(name) and lookup(name).fused is not None


FUSE_MIN_ELEMENTS = 1 << 14  # below this a NumPy pass is cheaper than calling a compiled kernel
# Shorter groups run as NumPy ufuncs: NumPy's SIMD exp/sin beat Numba's scalar ones (no SVML here) by as much
# as fusion saves on memory traffic. Measured on 2 cores, 2e6 float64: the 4-operation sigmoid
# 1/(1+exp(-t)) took 8.7-10.4 ms as one Numba kernel against 7.4-9.0 ms in NumPy, and LRA ran 10-30% slower
# fused; the 8-operation exp(-x*x)*sin(x)+2*x-1 on 2e7 ran 0.4-0.75x NumPy's time fused.
FUSE_MIN_OPS = 5


def reference(spec, args, locs=None):
    """The spec evaluated with the registry's NumPy kernels: the semantics of the unfused tree. With ``locs``
    (each operation's SourceLoc, in pre-order) a failing operation is an ExecutionError at its own line."""
    order = iter(locs or ())

    def visit(node):
        kind = node[0]
        if kind == "arg":
            return args[node[1]]
        if kind == "const":
            return node[1]
        loc = next(order, None)
        prim = lookup(kind)
        operands = [visit(c) for c in node[1:]]
        try:
            return prim.kernel(*operands)
        except OperationFailed:
            raise
        except Exception as e:
            if loc is None:
                raise
            raise OperationFailed(e, loc, prim.label) from e

    return visit(spec)


def fused_elementwise(spec, locs, *args):
    """The kernel of the ``fused.elementwise`` primitive: the Numba kernel when it applies, else the reference
    (also when the kernel fails, e.g. on shapes that do not broadcast: the reference names the operation). The
    result is a new array, never written into an operand: NumPy runs a Numba ufunc whose output is one of its
    inputs 5-6x slower than into a new array (its overlap path), see runtime/codegen.py's ``fused_inline``."""
    if backends.DEVICE_TYPES and backends.on_device(args):
        return cupy_fused(spec)(*args)
    found = _numba_kernel(spec, args)
    if found is not None:
        kernel, in_dtypes = found
        try:
            return _run(kernel, [a if isinstance(a, np.ndarray) else np.asarray(a, dtype=d)
                                 for a, d in zip(args, in_dtypes)])
        except Exception:  # noqa: BLE001 - the reference below raises the error at the right operation
            pass
    return reference(spec, args, locs)


def _numeric(a) -> bool:
    if isinstance(a, np.ndarray):
        return a.dtype.kind in "biufc"
    return type(a) in (int, float, bool, complex) or (isinstance(a, np.generic) and a.dtype.kind in "biufc")


_kernels: dict = {}
_fuse_raw = raw_reader("PHYLANX_FUSE")  # read at every call of a fused group (1 us through os.environ.get)


def _compilable(args) -> bool:
    """Fusion is on and every input is a numeric array or scalar (what a compiled kernel can take)."""
    return _fuse_raw() not in OFF and all(_numeric(a) for a in args)


# (spec, _signature(args), FUSE_MIN_OPS) -> what _find_kernel answered for such inputs: (kernel, input dtypes)
# or None. The answer depends on the spec and the inputs' types and dtypes only (never their values: Python
# ints, whose value decides NumPy 2's result, have no signature), so a group called at every step of a loop pays
# the walks over the spec, the dtype probe and the cache key once, not per call (a ReLU gradient on 64x512
# float32 took 65 us a call with them, 14 us without: the kernel itself is ~5 us).
_found: dict = {}


def _signature(args):
    """What ``_find_kernel`` reads of ``args`` besides their sizes; None when that is more (a Python int's value,
    an array subclass, objects): those inputs take the full walk at every call."""
    sig = []
    for a in args:
        t = type(a)
        if t is np.ndarray:
            sig.append(a.dtype)
        elif t is float or t is bool or t is complex:
            sig.append(t)
        elif isinstance(a, np.generic):
            sig.append((t, a.dtype))
        else:
            return None
    return tuple(sig)


def _numba_kernel(spec, args):
    """The compiled kernel for these inputs, or None: then the reference runs (also when compiling fails, and
    while the kernel is being built in the background)."""
    if _fuse_raw() in OFF:
        return None
    if max((a.size for a in args if isinstance(a, np.ndarray)), default=0) < FUSE_MIN_ELEMENTS:
        return None
    sig = _signature(args)
    if sig is None:
        return _find_kernel(spec, args)
    key = (spec, sig, FUSE_MIN_OPS)
    hit = _found.get(key, _found)
    if hit is _found:
        hit = remember(_found, key, lambda: _find_kernel(spec, args))
    return hit


def _find_kernel(spec, args):
    """``_numba_kernel`` without the memo: the checks, the dtypes NumPy gives, the compiled kernel."""
    if not _compilable(args):
        return None
    size = max((a.size for a in args if isinstance(a, np.ndarray)), default=0)
    if size < FUSE_MIN_ELEMENTS or _operations(spec) < FUSE_MIN_OPS or not exact_comparisons(spec):
        return None
    try:
        found = _dtypes(spec, args)
    except Exception:
        return None  # NumPy itself refuses these dtypes: the reference raises the real error
    if found is None:
        return None
    dtypes, in_dtypes = found
    key = (spec, tuple(d.str for d in in_dtypes))
    return cached_kernel(_kernels, key, lambda: (_compile(spec, in_dtypes, dtypes), in_dtypes))


def _operations(spec) -> int:
    return 0 if spec[0] in ("arg", "const") else 1 + sum(_operations(c) for c in spec[1:])


def exact_comparisons(spec) -> bool:
    """False when a comparison in ``spec`` reads the result of an inexact function (``Primitive.inexact``): within
    float tolerance as numbers, but compared, a 1-ULP difference between NumPy's and Numba's last bit flips a
    boolean (tanh(19.0) is 1.0 in NumPy and 0.9999999999999999 in Numba); such comparisons run in NumPy."""
    def inexact(node) -> bool:
        return node[0] not in ("arg", "const") and (lookup(node[0]).inexact or any(inexact(c) for c in node[1:]))

    def visit(node) -> bool:
        if node[0] in ("arg", "const"):
            return True
        if lookup(node[0]).comparison and any(inexact(c) for c in node[1:]):
            return False
        return all(visit(c) for c in node[1:])

    return visit(spec)
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _dtypes(spec, args):
    """(dtype of every operation node, dtype of every input) as NumPy gives them, from the reference run on
    zero-size stand-ins; None when the kernel cannot reproduce NumPy (float16, ordering of complex numbers,
    integers beyond int64, integer ``// % **``).

    A Python scalar input takes the dtype NumPy gives it next to its sibling operand (NumPy 2's weak scalars:
    ``float32_array == 0.1`` compares in float32), so the kernel sees it as NumPy does."""
    probes = [np.empty((0,), a.dtype) if isinstance(a, np.ndarray) else a for a in args]
    out: dict = {}

    def weak(node) -> bool:
        """A Python scalar (an input or a constant): NumPy 2 gives it the dtype of what it meets."""
        if node[0] == "const":
            return True
        return node[0] == "arg" and not isinstance(args[node[1]], (np.ndarray, np.generic))

    def visit(node):
        kind = node[0]
        if kind == "arg":
            a = args[node[1]]
            if type(a) is int and not _INT64[0] <= a <= _INT64[1]:
                raise _NotFusable
            return probes[node[1]]
        if kind == "const":
            v = node[1]
            if type(v) is int and not _INT64[0] <= v <= _INT64[1]:
                raise _NotFusable
            return v
        children = node[1:]
        values = [visit(c) for c in children]
        prim = lookup(kind)
        v = prim.kernel(*values)
        dt = np.asarray(v).dtype
        if dt.kind not in "biufc" or dt.itemsize < 4 and dt.kind == "f" or (prim.int_unsafe and dt.kind in "biu"):
            raise _NotFusable
        if prim.ordered and any(np.asarray(x).dtype.kind == "c" for x in values):
            raise _NotFusable
        strong = [np.asarray(y).dtype for c, y in zip(children, values) if not weak(c)]
        for i, (c, x) in enumerate(zip(children, values)):
            if weak(c) and strong:  # cast where it is used, to the dtype NumPy gives it there
                out[(id(node), i)] = np.result_type(*strong, x)
        out[id(node)] = dt
        return v

    try:
        visit(spec)
    except _NotFusable:
        return None
    in_dtypes = [np.asarray(a).dtype for a in args]
    if any(d.kind == "f" and d.itemsize < 4 or d.kind not in "biufc" for d in in_dtypes):
        return None
    return out, in_dtypes


class _NotFusable(Exception):
    pass


_NUMBA_NAMES = {"b": "boolean", "i": "int", "u": "uint", "f": "float", "c": "complex"}


def _numba_type(dt: np.dtype) -> str:
    if dt.kind == "b":
        return "boolean"
    return f"{_NUMBA_NAMES[dt.kind]}{dt.itemsize * 8}"


def _literal(v) -> str:
    if isinstance(v, float) and not np.isfinite(v):
        return "np.nan" if v != v else ("np.inf" if v > 0 else "-np.inf")
    if isinstance(v, complex):
        return f"complex({_literal(v.real)}, {_literal(v.imag)})"
    return repr(v)


def _body(spec, dtypes, names, indent="    ") -> tuple[list[str], str]:
    """Lines computing the spec on scalars named ``names[i]`` (each intermediate cast to its NumPy dtype)."""
    lines, counter = [], [0]

    def visit(node) -> str:
        kind = node[0]
        if kind == "arg":
            return names[node[1]]
        if kind == "const":
            return _literal(node[1])
        operands = [visit(c) for c in node[1:]]
        for i in range(len(operands)):
            cast = dtypes.get((id(node), i))
            if cast is not None:  # a Python scalar, at the dtype NumPy gives it next to this operation's arrays
                operands[i] = f"{'np.bool_' if cast.kind == 'b' else 'np.' + cast.name}({operands[i]})"
        counter[0] += 1
        t = f"t{counter[0]}"
        dt = dtypes[id(node)]
        cast = "np.bool_" if dt.kind == "b" else f"np.{dt.name}"
        lines.append(f"{indent}{t} = {cast}({lookup(kind).fused.format(*operands)})")
        return t

    return lines, visit(spec)


def _source(spec, in_dtypes, dtypes) -> tuple[str, str]:
    lines, result = _body(spec, dtypes, [f"a{i}" for i in range(len(in_dtypes))])
    out_dt = dtypes[id(spec)]
    sig = f"{_numba_type(out_dt)}({', '.join(_numba_type(d) for d in in_dtypes)})"
    params = ", ".join(f"a{i}" for i in range(len(in_dtypes)))
    src = ("import numpy as np\nimport numba\n\n\n"
           f"@numba.vectorize([{sig!r}], cache=True)\n"
           f"def kernel({params}):\n" + "\n".join(lines) + f"\n    return {result}\n")
    return src, sig


def _compile(spec, in_dtypes, dtypes, src=None, warm=True):
    """The generated kernel, through the verified disk cache (Numba caches compiled code beside it)."""
    if src is None:
        src, _ = _source(spec, in_dtypes, dtypes)

    def compile_now(module):  # a failure to compile is a failure here, not at the first real call
        module.kernel(*[np.zeros(1, d) for d in in_dtypes])

    if warm:  # a ufunc with its signature: compiled as its module runs, so another process can compile it first
        kernel_builds.elsewhere("fused", src)
    return kernel_cache.load_or_build("fused", src, compile_now if warm else None).kernel


# ---- tile rules (runtime/tiled/ops.py gives ``ops``) ------------------------------------------------------
def _tile_elementwise(ops, spec, locs, *leaves):
    """A fused group on tiles: the generated kernel (each tile's task picks Numba or NumPy by the tile's size) as
    one element-wise function of the group's leaves."""
    return ops.elementwise(functools.partial(fused_elementwise, spec, locs), leaves)


register("fused.elementwise", fused_elementwise, display="fused", tile=_tile_elementwise, parallel=True, defers=2)
