"""Moving and selecting: ``transpose`` (the grid transposed, no data moved), slices and integer indices with
static bounds (tile-local views), boolean masks, assignment to a region, ``concatenate``/``stack`` along any axis,
and ``reshape`` where the tiling allows it (``retile`` is in common.py: element-wise rules use it too)."""
from __future__ import annotations

import math

import numpy as np

from . import grid, tasks, views
from .array import TiledArray, is_tiled
from .common import piece, prepare, region_ref, remote_result, retile_dims, shape_of
from .create import constant_tiles, from_numpy_like
from .dispatch import implements
from .elementwise import elementwise
from .fallback import fallback
from .tile_program import TileProgram, site_info, submit_program


def transpose(t: TiledArray, axes=None):
    """``t.T`` / ``np.transpose(t, axes)``: a view of ``t`` (no data moved)."""
    axes = tuple(range(t.ndim))[::-1] if axes is None else tuple(a % t.ndim for a in axes)
    inverse = tuple(int(a) for a in np.argsort(axes))
    return views.link(t, _transpose(t, axes), lambda base: _transpose(base, axes),
                      lambda base, value: base._become(_transpose(value, inverse)), lambda lay: lay.transpose(axes))


def _transpose(t: TiledArray, axes):
    inverse = tuple(np.argsort(axes))
    where = site_info()
    t = t.used()

    def make(idx, prog):
        return prog.op(np.transpose, [prog.tile(t, tuple(idx[i] for i in inverse)), ("C", axes)], None, where)

    out = TiledArray(t._executor, [t.boundaries[a] for a in axes], t.dtype, make=make, operands=(t,), cheap=True)
    out._dist = frozenset(axes.index(d) for d in t.dist)
    return out


# ---- getitem --------------------------------------------------------------------------------------------------
def _expand(key, ndim):
    key = key if isinstance(key, tuple) else (key,)
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    out = []
    for k in key:
        if k is Ellipsis:
            out.extend([slice(None)] * (ndim - n_real))
        else:
            out.append(k)
    if sum(1 for k in out if k is not None) < ndim:
        out.extend([slice(None)] * (ndim - sum(1 for k in out if k is not None)))
    if sum(1 for k in out if k is not None) > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but "
                         f"{sum(1 for k in out if k is not None)} were indexed")
    return out


def _plan(t: TiledArray, key):
    """How ``t[key]`` (basic indexing, ``key`` expanded to every dimension) reads the tiles: per output dimension
    (source dim or None for a new axis, boundaries, [(source tile, local slice)]), and {source dim: (tile, local
    index)} for integer keys; None when the key needs the fallback (unknown tile sizes)."""
    dims, fixed = [], {}
    d = 0
    for k in key:
        if k is None:
            dims.append((None, (0, 1), [(None, None)]))
            continue
        b, n = t.boundaries[d], t.shape[d]
        if not grid.known([b]):
            if k == slice(None):
                dims.append((d, b, [(i, slice(None)) for i in range(len(b) - 1)]))
                d += 1
                continue
            return None
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            if step != 1:  # each tile's elements of the range, in the range's order
                parts = grid.stepped(b, start, stop, step) or [(0, slice(0, 0), 0)]
                nb = [0]
                for _, _, count in parts:
                    nb.append(nb[-1] + count)
                dims.append((d, tuple(nb), [(i, sl) for i, sl, _ in parts]))
            else:
                stop = max(stop, start)
                parts = [(i, lo, hi) for i, lo, hi in grid.overlapping(b, start, stop) if hi > lo] or \
                    [(0, 0, 0)]
                nb, at = [0], 0
                for _, lo, hi in parts:
                    at += hi - lo
                    nb.append(at)
                dims.append((d, tuple(nb), [(i, slice(lo, hi)) for i, lo, hi in parts]))
        else:
            i = int(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {d} with size {n}")
            i %= n
            tile = next(j for j in range(len(b) - 1) if b[j] <= i < b[j + 1])
            fixed[d] = (tile, i - b[tile])
        d += 1
    return dims, fixed


@implements("getitem")
def getitem(t: TiledArray, key):
    """``t[key]``: a boolean mask or an index array selects a copy, as in NumPy; basic indexing (slices, integers,
    ``None``, ``...``) gives a view of ``t`` (views.py)."""
    if is_tiled(key) or (isinstance(key, np.ndarray) and key.dtype == bool and key.ndim == 1):
        return _mask_rows(t, key)
    key = _expand(key, t.ndim)
    simple = all(k is None or isinstance(k, (slice, int, np.integer)) for k in key)
    if not simple:
        return fallback("getitem", lambda a, k: a[k], (t, tuple(key)), {})
    out = _getitem(t, key)
    if not is_tiled(out):  # a scalar, or a NumPy result of the fallback (pinned there when it is a view)
        return out
    key = tuple(key)
    stored = tuple(k for k in key if k is not None)  # the region the view covers, without its new axes
    unexpand = tuple(0 if k is None else slice(None) for k in key if not isinstance(k, (int, np.integer)))
    return views.link(t, out, lambda base: _getitem(base, key),
                      lambda base, value: setitem(base, stored, _getitem(value, unexpand)),
                      lambda lay: lay[key])


def _getitem(t: TiledArray, key):
    """``t[key]`` for basic indexing (``key`` expanded): a lazy tile-local selection, else the fallback."""
    plan = _plan(t, key)
    if plan is None:
        return fallback("getitem", lambda a, k: a[k], (t, tuple(key)), {})
    dims, fixed = plan
    where = site_info()
    t = t.used()

    def make(idx, prog):
        src = [0] * t.ndim
        local = []
        out_i = sd = 0
        for k in key:
            if k is None:
                local.append(None)
                out_i += 1
                continue
            if sd in fixed:
                src[sd] = fixed[sd][0]
                local.append(fixed[sd][1])
            else:
                tile, sl = dims[out_i][2][idx[out_i]]
                src[sd] = tile
                local.append(sl)
                out_i += 1
            sd += 1
        ref = prog.tile(t, tuple(src))
        return prog.op(tasks.take_region, [ref, ("C", tuple(local))], None, where)

    bounds = [x[1] for x in dims]
    out = TiledArray(t._executor, bounds, t.dtype, make=make, operands=(t,), cheap=True)
    if not bounds:  # a single element: a scalar result
        prog = TileProgram()
        fut, _ = submit_program(t._executor, prog, make((), prog), "getitem")
        return remote_result(fut, (), t.dtype)
    return out


def _mask_rows(t: TiledArray, mask):
    """``t[mask]`` for a boolean mask over the rows: tile-local selection, tile sizes known once computed."""
    if is_tiled(mask):
        if mask.ndim != 1 and mask.shape != t.shape:
            return fallback("getitem", lambda a, k: a[k], (t, mask), {})
        if mask.ndim > 1:  # t[t > 0]: the selected elements, row-major, as a 1-D array
            sel = elementwise(_flat_mask, [t, mask])
            return _unknown_1d(sel)
        if mask.boundaries[0] != t.boundaries[0]:
            mask = retile_dims(mask, {0: t.boundaries[0]})
    elif len(mask) != t.shape[0]:
        raise IndexError(f"boolean index did not match indexed array along axis 0; size of axis is "
                         f"{t.shape[0]} but size of corresponding boolean axis is {len(mask)}")
    where = site_info()
    t = t.used()
    if is_tiled(mask):
        mask = mask.used()
    count = len(t.boundaries[0]) - 1

    def make(idx, prog):
        b = t.boundaries[0]
        m = prog.tile(mask, (idx[0],)) if is_tiled(mask) else piece(prog, mask, [(b[idx[0]], b[idx[0] + 1])],
                                                                    mask.shape)
        return prog.op(tasks.masked_rows, [prog.tile(t, idx), m], None, where)

    return TiledArray(t._executor, [grid.unknown(count)] + list(t.boundaries[1:]), t.dtype, make=make,
                      operands=[x for x in (t, mask) if is_tiled(x)])


def _flat_mask(x, m):
    return x[m]


def _unknown_1d(sel):
    """A lazy array whose tiles are 1-D selections of unknown length (one per source tile)."""
    n = 1
    for c in sel.tiles:
        n *= c
    grid_shape = sel.tiles

    def make(idx, prog):
        return prog.tile(sel, tuple(int(i) for i in np.unravel_index(idx[0], grid_shape)))

    return TiledArray(sel._executor, [grid.unknown(n)], sel.dtype, make=make, operands=(sel,), cheap=True)


# ---- setitem --------------------------------------------------------------------------------------------------
@implements("setitem")
def setitem(t: TiledArray, key, value):
    """``t[key] = value``: a lazy update of the tiles the key's region overlaps (a boolean mask: ``np.where``).
    About 60 lines, kept whole: the key's checks and the per-tile update (``make``) share the region and its
    squeezed dimensions."""
    value = prepare(value)
    if is_tiled(key) and key.dtype == bool and key.shape == t.shape:
        t._become(elementwise(np.where, [key, value, t._snapshot()]))
        return
    key = _expand(key, t.ndim)
    if not all(isinstance(k, (slice, int, np.integer)) for k in key) or not grid.known(t.boundaries):
        return _setitem_fallback(t, key, value)
    region, squeeze = [], []
    for d, k in enumerate(key):
        n = t.shape[d]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            if step != 1:
                return _setitem_fallback(t, key, value)
            region.append((start, max(start, stop)))
        else:
            i = int(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {d} with size {n}")
            i %= n
            region.append((i, i + 1))
            squeeze.append(d)
    rshape = tuple(hi - lo for lo, hi in region)
    vshape = shape_of(value)
    kept_shape = tuple(s for d, s in enumerate(rshape) if d not in squeeze)
    try:
        np.broadcast_shapes(vshape, kept_shape)
    except ValueError:
        raise ValueError(f"could not broadcast input array from shape {tuple(vshape)} into shape "
                         f"{kept_shape}") from None
    if is_tiled(value):
        if tuple(vshape) != kept_shape:
            return _setitem_fallback(t, key, value)
        value = value.used()
    old = t.used()
    where = site_info()
    kept_dims = [d for d in range(t.ndim) if d not in squeeze]

    def make(idx, prog):
        tr = grid.region(old.boundaries, idx)
        inter = [(max(a, lo), min(b, hi)) for (a, b), (lo, hi) in zip(tr, region)]
        ref = prog.tile(old, idx)
        if any(lo >= hi for lo, hi in inter):
            return ref
        local = tuple(slice(lo - a, hi - a) if d not in squeeze else lo - a
                      for d, ((lo, hi), (a, _)) in enumerate(zip(inter, tr)))
        vreg = [(inter[d][0] - region[d][0], inter[d][1] - region[d][0]) for d in kept_dims]
        if is_tiled(value):
            vref = region_ref(prog, value, vreg, where)
        else:
            vs = vshape
            off = len(kept_dims) - len(vs)
            vr = [None if vs[k] == 1 else vreg[k + off] for k in range(len(vs))]
            vref = piece(prog, value, vr, vs)
        return prog.op(tasks.set_region, [ref, ("C", local), vref], None, where)

    t._become(TiledArray(t._executor, old.boundaries, old.dtype, make=make,
                         operands=[old] + ([value] if is_tiled(value) else [])))


def _setitem_fallback(t, key, value):
    def assign(a, k, v):
        a = np.array(a)
        a[k] = v
        return a

    result = fallback("setitem", assign, (t, tuple(key), value), {})
    t._become(from_numpy_like(t, result))


# ---- joining and reshaping ------------------------------------------------------------------------------------
def concatenate(arrays, axis=0):
    arrays = [prepare(a) for a in arrays]
    ref = next(a for a in arrays if is_tiled(a))
    nd = ref.ndim
    axis = axis % nd
    parts = []
    for a in arrays:
        if not is_tiled(a):
            if np.ndim(a) != nd:
                raise ValueError("all the input arrays must have same number of dimensions")
            bounds = [(0, s) if d == axis else ref.boundaries[d] for d, s in enumerate(np.shape(a))]
            a = constant_tiles(ref._executor, np.asarray(a), bounds)
        want = {d: ref.boundaries[d] for d in range(nd) if d != axis and a.boundaries[d] != ref.boundaries[d]}
        if any(a.shape[d] != ref.shape[d] for d in want):
            raise ValueError(f"all the input array dimensions except for the concatenation axis must match "
                             f"exactly, but along dimension {next(iter(want))}, the array at index 0 has size "
                             f"{ref.shape[next(iter(want))]} and another has size {a.shape[next(iter(want))]}")
        parts.append(retile_dims(a, want) if want else a)
    parts = [a.used() for a in parts]
    joined, owner = [0], []
    for a in parts:
        b = a.boundaries[axis]
        for i in range(len(b) - 1):
            last = joined[-1]
            joined.append(None if (last is None or b[i + 1] is None) else last + b[i + 1] - b[i])
            owner.append((a, i))
    bounds = list(ref.boundaries)
    bounds[axis] = tuple(joined)
    dtype = np.result_type(*[a.dtype for a in parts])

    def make(idx, prog):
        a, i = owner[idx[axis]]
        r = prog.tile(a, idx[:axis] + (i,) + idx[axis + 1:])
        return r if a.dtype == dtype else prog.op(np.asarray, [r, ("C", dtype)], None, site_info())

    return TiledArray(ref._executor, bounds, dtype, make=make, operands=parts, cheap=True)


def stack(arrays, axis=0):
    arrays = [prepare(a) for a in arrays]
    nd = np.ndim(arrays[0]) if not is_tiled(arrays[0]) else arrays[0].ndim
    axis = axis % (nd + 1)
    key = (slice(None),) * axis + (None,)
    expanded = [getitem(a, key) if is_tiled(a) else np.expand_dims(a, axis) for a in arrays]
    return concatenate(expanded, axis)


def reshape(t: TiledArray, shape, copy=None):
    """``t.reshape(shape)``: a view of ``t`` where NumPy's reshape would be one (views.reshaped), else a
    copy; always a copy with ``copy=True`` (NumPy 2.1's argument)."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    total = t.size
    if shape.count(-1) == 1:
        known = math.prod(s for s in shape if s != -1)
        shape = tuple(int(total // known) if s == -1 else s for s in shape)
    if math.prod(shape) != total:
        raise ValueError(f"cannot reshape array of size {total} into shape {shape}")
    shape = tuple(int(s) for s in shape)
    lay = None if copy else views.reshaped(t, shape)
    if lay is None:
        return reshaped_copy(t, shape)
    return views.link(t, _reshape(t, shape), lambda base: _reshape(base, shape),
                      lambda base, value: base._become(views.as_tiled(_reshape(value, base.shape), base)),
                      lambda _: lay)


def ravel(t: TiledArray):
    """``np.ravel(t)``: a view of ``t`` when NumPy's would be one (a C-contiguous array), else a copy; unlike
    ``reshape(-1)``, which also views a strided 1-D array."""
    if views.layout(t).flags.c_contiguous:
        return reshape(t, (-1,))
    return reshaped_copy(t, (-1,))


def reshaped_copy(t: TiledArray, shape):  # (``shape`` complete: no -1)
    """``t`` reshaped, as a copy: a lazy result unlinked from ``t`` reads the state it was made from."""
    out = _reshape(t, shape)
    return out if is_tiled(out) else np.array(out)  # the fallback's result is a view of the gathered copy


def _reshape(t: TiledArray, shape):
    if any(c > 1 for c in t.tiles[1:]) and grid.known(t.boundaries) and shape:
        # rows must be whole within a tile: gather the other dimensions into one tile each (moves data once)
        t = retile_dims(t, {d: (0, int(n)) for d, n in enumerate(t.shape) if d > 0})
    if all(c == 1 for c in t.tiles[1:]) and grid.known(t.boundaries) and shape:
        per_old = math.prod(int(s) for s in t.shape[1:])
        per_new = math.prod(shape[1:])
        b = t.boundaries[0]
        step = per_new // math.gcd(per_old, per_new) if per_old and per_new else 0
        if step > 1 and not all(x % step == 0 for x in b):
            # tiles must hold whole new rows: move each boundary to the nearest multiple of ``step`` rows (moves
            # the few rows between the old and the new boundary)
            inner = sorted({round(x / step) * step for x in b[1:-1]} - {0, b[-1]})
            t = retile_dims(t, {0: (0, *inner, b[-1])})
            b = t.boundaries[0]
        if all((x * per_old) % per_new == 0 for x in b):
            nb = tuple(x * per_old // per_new for x in b)
            where = site_info()
            t = t.used()

            def make(idx, prog):
                rows = nb[idx[0] + 1] - nb[idx[0]]
                return prog.op(np.reshape, [prog.tile(t, (idx[0],) + (0,) * (t.ndim - 1)),
                                            ("C", (rows,) + shape[1:])], None, where)

            return TiledArray(t._executor, [nb] + [(0, s) for s in shape[1:]], t.dtype, make=make, operands=(t,),
                              cheap=True)
    return fallback("reshape", np.reshape, (t, shape), {})
