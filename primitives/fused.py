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
import os
import sys
import threading

import numpy as np

from . import backends, kernel_cache
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
# From this size on, the kernel runs on row blocks in parallel threads (the compiled loop releases the GIL).
# Numba's own target="parallel" is not used: its cached kernels fail to load ("No module named '<dynamic>'")
# and its workqueue threading layer is not safe for calls from several threads at once.
PARALLEL_MIN_ELEMENTS = 1 << 18


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
    (also when the kernel fails, e.g. on shapes that do not broadcast: the reference names the operation)."""
    if backends.DEVICE_TYPES and backends.on_device(args):
        return _cupy_fused(spec)(*args)
    found = _numba_kernel(spec, args)
    if found is not None:
        kernel, in_dtypes = found
        try:
            return _run(kernel, [a if isinstance(a, np.ndarray) else np.asarray(a, dtype=d)
                                 for a, d in zip(args, in_dtypes)])
        except Exception:  # noqa: BLE001 - the reference below raises the error at the right operation
            pass
    return reference(spec, args, locs)


_cupy_kernels: dict = {}


def cupy_source(spec) -> str:
    """Python source of the spec over CuPy ufuncs, for ``cupy.fuse`` (one GPU kernel)."""
    n_args = [0]

    def visit(node) -> str:
        kind = node[0]
        if kind == "arg":
            n_args[0] = max(n_args[0], node[1] + 1)
            return f"a{node[1]}"
        if kind == "const":
            return repr(node[1])
        operands = [visit(c) for c in node[1:]]
        form = lookup(kind).fused_cupy
        if form is not None:
            return "(" + form.format(*operands) + ")"
        return f"cupy.{kind}({', '.join(operands)})"

    body = visit(spec)
    params = ", ".join(f"a{i}" for i in range(n_args[0]))
    return f"def kernel({params}):\n    return {body}\n"


def _cupy_fused(spec):
    """The spec as one fused GPU kernel (``cupy.fuse``), cached by spec."""
    kernel = _cupy_kernels.get(spec)
    if kernel is None:
        cupy = backends.cupy_module()
        namespace = {"cupy": cupy}
        exec(cupy_source(spec), namespace)  # noqa: S102 - generated from the spec above
        kernel = _cupy_kernels[spec] = cupy.fuse()(namespace["kernel"])
    return kernel


def _threads() -> int:
    """Threads for one kernel: ``PHYLANX_NUM_THREADS`` when set; one inside a Dask worker (its own threads
    share the cores); else every core. (Not OMP_NUM_THREADS: a LocalCluster's nanny sets it to 1 in the
    client's own process.)"""
    setting = os.environ.get("PHYLANX_NUM_THREADS", "")
    if setting.isdigit() and int(setting) > 0:
        return int(setting)
    if "distributed" in sys.modules:
        try:
            sys.modules["distributed"].get_worker()
            return 1
        except ValueError:
            pass
    return os.cpu_count() or 1


_pool = None


def _run(kernel, arrays):
    """The kernel over the broadcast shape; large outputs are cut into row blocks run on parallel threads."""
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    size = int(np.prod(shape, dtype=np.int64))
    n = min(_threads(), shape[0] if shape else 1)
    if size < PARALLEL_MIN_ELEMENTS or n < 2:
        return kernel(*arrays)
    out = np.empty(shape, np.dtype(kernel.types[0].split("->")[1]))  # the one signature compiled
    nd = len(shape)

    def block(lo, hi):
        parts = []
        for a in arrays:
            # a's leading axis lines up with the output's only if a has all the dimensions and is not broadcast
            if a.ndim == nd and a.shape[0] == shape[0]:
                parts.append(a[lo:hi])
            else:
                parts.append(a)
        kernel(*parts, out=out[lo:hi])

    _map_blocks(block, _blocks(shape[0], n))
    return out



def _numeric(a) -> bool:
    if isinstance(a, np.ndarray):
        return a.dtype.kind in "biufc"
    return type(a) in (int, float, bool, complex) or (isinstance(a, np.generic) and a.dtype.kind in "biufc")


_kernels: dict = {}
_lock = threading.Lock()


def _compilable(args) -> bool:
    """Fusion is on and every input is a numeric array or scalar (what a compiled kernel can take)."""
    return os.environ.get("PHYLANX_FUSE", "1") != "0" and all(_numeric(a) for a in args)


def _numba_kernel(spec, args):
    """The compiled kernel for these inputs, or None: then the reference runs (also when compiling fails)."""
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


def cached_kernel(cache: dict, key, build):
    """``cache[key]``, made once by ``build()`` under the lock; None when it cannot be made (a type Numba
    cannot compile, a dtype NumPy treats differently): the reference runs for that key from then on."""
    hit = cache.get(key, False)
    if hit is not False:
        return hit
    with _lock:
        hit = cache.get(key, False)
        if hit is False:
            try:
                hit = build()
            except kernel_cache.UnsafeCacheError:
                raise  # the user must hear of a cache folder others can write to, not get slower code silently
            except Exception:  # noqa: BLE001 - any failure to build means: use the reference
                hit = None
            cache[key] = hit
    return hit


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

    return kernel_cache.load_or_build("fused", src, compile_now if warm else None).kernel


# ---- a chain feeding a sum: one pass, no intermediate array ----------------------------------------------
_reduce_kernels: dict = {}


def fused_sum(spec, locs, axis, *args):
    """``np.sum(chain, axis)`` where the chain is the spec: one compiled pass over the broadcast inputs when
    they are large numeric arrays (the broadcast result is never materialised), else NumPy."""
    found = _reduce_kernel(spec, axis, args)
    if found is not None:
        try:
            return found()
        except Exception:  # noqa: BLE001 - the reference below raises the error at the right operation
            pass
    value = reference(spec, args, locs[:-1])
    try:
        return np.sum(value, axis=axis)
    except Exception as e:
        raise OperationFailed(e, locs[-1], "sum") from e


def _summed_chain(spec, args):
    """(broadcast shape, dtypes, input dtypes, accumulator dtype) of a chain that a compiled loop nest may sum
    (numeric inputs, at least one array, FUSE_MIN_ELEMENTS elements or more), else None."""
    if not _compilable(args) or not any(isinstance(a, np.ndarray) for a in args):
        return None
    try:
        shape = np.broadcast_shapes(*(np.shape(a) for a in args))
    except ValueError:
        return None
    if not shape or int(np.prod(shape, dtype=np.int64)) < FUSE_MIN_ELEMENTS:
        return None
    try:
        found = _dtypes(spec, args)
    except Exception:
        return None
    if found is None:
        return None
    dtypes, in_dtypes = found
    return shape, dtypes, in_dtypes, np.sum(np.zeros(1, dtypes[id(spec)])).dtype


def _reduce_kernel(spec, axis, args):
    """A callable computing the sum with a compiled kernel, or None (the reference then runs)."""
    found = _summed_chain(spec, args)
    if found is None:
        return None
    shape, dtypes, in_dtypes, acc_dt = found
    nd = len(shape)
    if nd > 4 or (axis is not None and not -nd <= axis < nd) or acc_dt.kind not in "iuf":
        return None  # complex and bool sums stay with NumPy
    ax = None if axis is None or nd == 1 else axis % nd  # a 1-D sum over its only axis is the full sum
    key = (spec, tuple(d.str for d in in_dtypes), nd, ax)
    kernel = cached_kernel(_reduce_kernels, key, lambda: _compile(
        spec, in_dtypes, dtypes, src=_reduce_source(spec, dtypes, len(args), nd, ax is None, acc_dt), warm=False))
    if kernel is None:
        return None
    views = [np.broadcast_to(np.asarray(a, dtype=d), shape) for a, d in zip(args, in_dtypes)]
    if ax is not None:
        views = [np.moveaxis(v, ax, -1) for v in views]
    return lambda: _run_reduce(kernel, views, ax is None, acc_dt)


def _run_reduce(kernel, views, full, acc_dt):
    """Row blocks of the leading axis on parallel threads (each a view: nothing is copied)."""
    n0 = views[0].shape[0]
    blocks = _blocks(n0, min(_threads(), n0) if views[0].size >= PARALLEL_MIN_ELEMENTS else 1)
    if full:
        parts = _map_blocks(lambda lo, hi: kernel(*[v[lo:hi] for v in views]), blocks)
        return acc_dt.type(sum(parts, acc_dt.type(0)))
    out = np.empty(views[0].shape[:-1], acc_dt)
    _map_blocks(lambda lo, hi: kernel(out[lo:hi], *[v[lo:hi] for v in views]), blocks)
    return out


def _blocks(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous, non-empty (lo, hi) ranges covering 0..n."""
    bounds = np.linspace(0, n, parts + 1).astype(int)
    return [(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]


def _map_blocks(fn, blocks):
    global _pool
    if len(blocks) == 1:
        return [fn(*blocks[0])]
    if _pool is None:
        from concurrent.futures import ThreadPoolExecutor

        _pool = ThreadPoolExecutor(_threads(), thread_name_prefix="phylanx-fused")
    return [f.result() for f in [_pool.submit(fn, lo, hi) for lo, hi in blocks]]


def _reduce_source(spec, dtypes, n_args, nd, full, acc_dt) -> str:
    """An njit loop nest over the broadcast views, the summed axis innermost (full: every axis)."""
    names = [f"x{i}" for i in range(n_args)]
    loops = nd if full else nd - 1
    idx = [f"i{d}" for d in range(nd)]
    head = [f"def kernel({'' if full else 'out, '}{', '.join(f'a{i}' for i in range(n_args))}):"]
    if full:
        head.append(f"    acc0 = np.{acc_dt.name}(0)")
    body, pad = [], "    "
    for d in range(loops):
        body.append(f"{pad}for {idx[d]} in range(a0.shape[{d}]):")
        pad += "    "
    if not full:
        body.append(f"{pad}acc = np.{acc_dt.name}(0)")
        body.append(f"{pad}for {idx[nd - 1]} in range(a0.shape[{nd - 1}]):")
        pad += "    "
    where = ", ".join(idx)
    body += [f"{pad}{names[i]} = a{i}[{where}]" for i in range(n_args)]
    lines, result = _body(spec, dtypes, names, pad)
    body += lines
    if full:
        body.append(f"{pad}acc0 += {result}")
        tail = ["    return acc0"]
    else:
        body.append(f"{pad}acc += {result}")
        body.append(f"{pad[:-4]}out[{', '.join(idx[:nd - 1])}] = acc")
        tail = []
    return ("import numpy as np\nimport numba\n\n\n@numba.njit(cache=True)\n"
            + "\n".join(head + body + tail) + "\n")


# ---- distances and their argmin: k-means' assignment step ------------------------------------------------
_argmin_kernels: dict = {}


def fused_sum_argmin(spec, locs, axis, arg_axis, *args):
    """``np.argmin(np.sum(chain, axis), axis=arg_axis)`` in one compiled loop nest: neither the broadcast chain
    (k-means' n x k x d differences) nor the summed array (n x k distances) is built. Ties and NaN as NumPy: the
    first minimum, or the first NaN."""
    found = _argmin_kernel(spec, axis, arg_axis, args)
    if found is not None:
        try:
            return found()
        except Exception:  # noqa: BLE001 - the reference below raises the error at the right operation
            pass
    sums = fused_sum(spec, locs[:-1], axis, *args)
    try:
        return np.argmin(sums, axis=arg_axis)
    except Exception as e:
        raise OperationFailed(e, locs[-1], "argmin") from e


def _argmin_kernel(spec, axis, arg_axis, args):
    found = _summed_chain(spec, args)
    if found is None:
        return None
    shape, dtypes, in_dtypes, acc_dt = found
    nd = len(shape)
    if nd < 2 or nd > 4 or not (-nd <= axis < nd) or not (-(nd - 1) <= arg_axis < nd - 1):
        return None
    if acc_dt.kind != "f":
        return None  # integer sums: NumPy (exact ties, wrap-around) keeps them
    ax, arg_ax = axis % nd, arg_axis % (nd - 1)
    key = (spec, tuple(d.str for d in in_dtypes), nd)
    kernel = cached_kernel(_argmin_kernels, key, lambda: _compile(
        spec, in_dtypes, dtypes, src=_argmin_source(spec, dtypes, len(args), nd, acc_dt), warm=False))
    if kernel is None:
        return None
    # views with the summed axis last and the argmin axis just before it
    views = [np.moveaxis(np.broadcast_to(np.asarray(a, dtype=d), shape), ax, -1) for a, d in zip(args, in_dtypes)]
    views = [np.moveaxis(v, arg_ax, -2) for v in views]
    out_shape = views[0].shape[:-2]

    def run():
        out = np.empty(out_shape, np.intp)
        if len(out_shape) and out_shape[0] > 1:
            _map_blocks(lambda lo, hi: kernel(out[lo:hi], *[v[lo:hi] for v in views]),
                        _blocks(out_shape[0], min(_threads(), out_shape[0])))
        else:
            kernel(out, *views)
        return out

    return run


def _argmin_source(spec, dtypes, n_args, nd, acc_dt) -> str:
    names = [f"x{i}" for i in range(n_args)]
    idx = [f"i{d}" for d in range(nd)]
    head = [f"def kernel(out, {', '.join(f'a{i}' for i in range(n_args))}):"]
    body, pad = [], "    "
    for d in range(nd - 2):
        body.append(f"{pad}for {idx[d]} in range(a0.shape[{d}]):")
        pad += "    "
    body += [f"{pad}best = np.{acc_dt.name}(np.inf)", f"{pad}arg = 0", f"{pad}nan = False",
             f"{pad}for {idx[nd - 2]} in range(a0.shape[{nd - 2}]):"]
    pad2 = pad + "    "
    body += [f"{pad2}acc = np.{acc_dt.name}(0)", f"{pad2}for {idx[nd - 1]} in range(a0.shape[{nd - 1}]):"]
    pad3 = pad2 + "    "
    where = ", ".join(idx)
    body += [f"{pad3}{names[i]} = a{i}[{where}]" for i in range(n_args)]
    lines, result = _body(spec, dtypes, names, pad3)
    body += lines + [f"{pad3}acc += {result}"]
    body += [f"{pad2}if not nan:", f"{pad2}    if acc != acc:", f"{pad2}        nan = True",
             f"{pad2}        arg = {idx[nd - 2]}", f"{pad2}    elif acc < best:", f"{pad2}        best = acc",
             f"{pad2}        arg = {idx[nd - 2]}"]
    body.append(f"{pad}out[{', '.join(idx[:nd - 2])}{'' if nd > 2 else '()'}] = arg")
    return ("import numpy as np\nimport numba\n\n\n@numba.njit(cache=True, nogil=True)\n"
            + "\n".join(head + body) + "\n")


# ---- tile rules (runtime/tiled/ops.py gives ``ops``) ------------------------------------------------------
def _tile_elementwise(ops, spec, locs, *leaves):
    """A fused group on tiles: the generated kernel (each tile's task picks Numba or NumPy by the tile's size) as
    one element-wise function of the group's leaves."""
    return ops.elementwise(functools.partial(fused_elementwise, spec, locs), leaves)


def _tile_sum(ops, spec, locs, axis, *leaves):
    """A fused chain feeding ``sum(axis=a)``: when axis a is within one tile, each tile runs the compiled loop
    that never builds the broadcast intermediate (k-means' n x k x d distances); else chain, then a tree."""
    if isinstance(axis, int):
        nd = max(v.ndim if ops.is_tiled(v) else len(np.shape(v)) for v in leaves)
        try:
            return ops.elementwise(functools.partial(fused_sum, spec, locs, axis), leaves, drop_axis=axis % nd)
        except ValueError as e:
            if "split over tiles" not in str(e):
                raise
    chain = _tile_elementwise(ops, spec, locs[:-1], *leaves)
    if not ops.is_tiled(chain):
        return np.sum(chain, axis=axis)
    return ops.reduce("sum", chain, axis, False)


def _tile_sum_argmin(ops, spec, locs, axis, arg_axis, *leaves):
    """Distances then their argmin: the per-tile compiled sum, then argmin, both in each tile's task."""
    return np.argmin(_tile_sum(ops, spec, locs[:-1], axis, *leaves), axis=arg_axis)


register("fused.elementwise", fused_elementwise, display="fused", tile=_tile_elementwise)
register("fused.sum", fused_sum, display="fused_sum", tile=_tile_sum)
register("fused.sum_argmin", fused_sum_argmin, display="fused_sum_argmin", tile=_tile_sum_argmin)
