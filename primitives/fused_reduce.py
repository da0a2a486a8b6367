"""Fused chains that end in a reduction, one compiled pass each with no intermediate array: ``fused.sum`` (a chain
feeding ``np.sum(axis=a)``) and ``fused.sum_argmin`` (k-means' distances and their argmin)."""
from __future__ import annotations

import functools
import time

import numpy as np

from .fused import (
    FUSE_MIN_ELEMENTS,
    PARALLEL_MIN_ELEMENTS,
    _blocks,
    _body,
    _compilable,
    _compile,
    _dtypes,
    _map_blocks,
    _threads,
    _tile_elementwise,
    note_kernel,
    reference,
)
from .kernel_builds import cached_kernel
from .registry import OperationFailed, register

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
    # nogil: the row blocks run on parallel threads (_run_reduce); holding the GIL, they ran one after another
    return ("import numpy as np\nimport numba\n\n\n@numba.njit(cache=True, nogil=True)\n"
            + "\n".join(head + body + tail) + "\n")


# ---- distances and their argmin: k-means' assignment step ------------------------------------------------
_argmin_kernels: dict = {}
UNROLL_MAX = 4  # a summed axis this short is written out in the distance argmin's kernel


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
    # a short summed axis (k-means' 2 coordinates) is written out: twice as fast as a loop of unknown length
    unroll = shape[ax] if 0 < shape[ax] <= UNROLL_MAX else 0
    key = (spec, tuple(d.str for d in in_dtypes), nd, unroll)
    kernel = cached_kernel(_argmin_kernels, key, lambda: _compile(
        spec, in_dtypes, dtypes, src=_argmin_source(spec, dtypes, len(args), nd, acc_dt, unroll), warm=False))
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
            t0 = time.perf_counter()
            kernel(out, *views)
            note_kernel(t0)
        return out

    return run


def _argmin_source(spec, dtypes, n_args, nd, acc_dt, unroll=0) -> str:
    """The distances and their argmin per output element. NaN as NumPy (the first NaN wins) without a branch per
    candidate: the scan keeps the first minimum and only notes whether a sum was NaN; a row that had one is scanned
    again for its first NaN (rare; a test per candidate made the common case twice as slow). ``unroll``: the summed
    axis has this many elements, written out one after another (the same additions in the same order)."""
    names = [f"x{i}" for i in range(n_args)]
    idx = [f"i{d}" for d in range(nd)]
    head = [f"def kernel(out, {', '.join(f'a{i}' for i in range(n_args))}):"]
    body, pad = [], "    "
    for d in range(nd - 2):
        body.append(f"{pad}for {idx[d]} in range(a0.shape[{d}]):")
        pad += "    "
    pad2, pad3 = pad + "    ", pad + "        "
    where = ", ".join(idx)

    def scan():  # the loop over candidates with each one's sum in ``acc``
        out = [f"{pad}for {idx[nd - 2]} in range(a0.shape[{nd - 2}]):", f"{pad2}acc = np.{acc_dt.name}(0)"]
        for c in range(unroll) if unroll else [None]:
            at = pad2 if unroll else pad3
            out.append(f"{pad2}{idx[nd - 1]} = {c}" if unroll else
                       f"{pad2}for {idx[nd - 1]} in range(a0.shape[{nd - 1}]):")
            lines, result = _body(spec, dtypes, names, at)
            out += [f"{at}{names[i]} = a{i}[{where}]" for i in range(n_args)] + lines + [f"{at}acc += {result}"]
        return out

    body += [f"{pad}best = np.{acc_dt.name}(np.inf)", f"{pad}arg = 0", f"{pad}nan = False"]
    body += scan() + [f"{pad2}nan |= acc != acc", f"{pad2}if acc < best:", f"{pad2}    best = acc",
                      f"{pad2}    arg = {idx[nd - 2]}"]
    body.append(f"{pad}if nan:")
    body += ["    " + line for line in scan()] + [f"{pad3}if acc != acc:", f"{pad3}    arg = {idx[nd - 2]}",
                                                   f"{pad3}    break"]
    body.append(f"{pad}out[{', '.join(idx[:nd - 2])}{'' if nd > 2 else '()'}] = arg")
    return ("import numpy as np\nimport numba\n\n\n@numba.njit(cache=True, nogil=True)\n"
            + "\n".join(head + body) + "\n")


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
    """Distances then their argmin: in one pass over each block of rows where the backend runs a function that
    drops two axes other than the tiled one (an SPMD rank's rows: ``ops.rows``; k-means' n x k x d distances then
    the nearest centroid); else the per-tile compiled sum, then argmin, both in each tile's task."""
    nd = max(v.ndim if ops.is_tiled(v) else len(np.shape(v)) for v in leaves)
    if isinstance(axis, int) and isinstance(arg_axis, int) and nd >= 2 and axis % nd != 0 \
            and arg_axis % (nd - 1) != 0:
        out = ops.rows(functools.partial(fused_sum_argmin, spec, locs, axis, arg_axis), leaves, 2)
        if out is not None:
            return out
    return np.argmin(_tile_sum(ops, spec, locs[:-1], axis, *leaves), axis=arg_axis)


register("fused.sum", fused_sum, display="fused_sum", tile=_tile_sum, parallel=True)
register("fused.sum_argmin", fused_sum_argmin, display="fused_sum_argmin", tile=_tile_sum_argmin,
         parallel=True)
