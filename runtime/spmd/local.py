"""What a rank does with its own rows and no collective (or only a halo exchange): element-wise work over aligned
shards, slices and masks of the tiled axis, and assignments into a rank's rows. See shard.py for the geometry."""
from __future__ import annotations

import weakref

import numpy as np

from .shard import NotSpmd, Shard, Transposed, global_shape, is_shard


def _check_leaves(leaves):
    if any(type(x) is Transposed for x in leaves):
        raise NotSpmd("element-wise work on the transpose of a tiled array")


def aligned_pieces(leaves, lo, hi, n, nd):
    """Each leaf's rows ``[lo, hi)`` (a replicated array that spans the tiled axis is sliced to them)."""
    out = []
    for x in leaves:
        if type(x) is Shard:
            out.append(x.local(lo, hi))
        elif np.ndim(x) == nd and nd and np.shape(x)[0] == n and n != 1:
            out.append(np.asarray(x)[lo:hi])
        else:
            out.append(x)
    return out


def elementwise(fn, leaves, drop_axis=None, dtype=None, drops=0):
    """``fn`` over broadcast ``leaves`` on this rank's rows; ``drop_axis``: ``fn`` reduces that axis (it must not
    be the tiled one: the tile rules then reduce across ranks instead); ``drops``: further axes ``fn`` removes
    (never the first)."""
    leaves = list(leaves)
    _check_leaves(leaves)
    shards = [x for x in leaves if type(x) is Shard]
    if not shards:
        return fn(*leaves)
    nd = max(len(global_shape(x)) for x in leaves)
    if any(s.ndim != nd for s in shards):
        raise NotSpmd("a tiled value is broadcast along a new leading axis")
    if drop_axis is not None and drop_axis % nd == 0:
        raise ValueError("the reduced axis is split over tiles")  # the tile rules reduce across ranks then
    rank = shards[0].rank
    raggeds = [s.ragged for s in shards]
    if any(r is not None for r in raggeds):
        if any(r is None or not same_ragged(r, raggeds[0]) for r in raggeds):
            raise NotSpmd("rows selected by different masks are combined")
        for x in leaves:
            if type(x) is not Shard and np.ndim(x) == nd and np.shape(x)[0] != 1:
                raise NotSpmd("a replicated array spans rows selected by a mask")
        out = fn(*[x.data if type(x) is Shard else x for x in leaves])
        return Shard(out, None, 0, 0, 0, rank, raggeds[0])
    np.broadcast_shapes(*(global_shape(x) for x in leaves))  # the user's shape error, as NumPy words it
    n = shards[0].n
    if any(s.n != n for s in shards):
        raise NotSpmd("tiled values of different lengths are combined")
    L, R = min(s.L for s in shards), min(s.R for s in shards)
    t = next((s.t for s in shards if -R <= s.t <= L), None)
    if t is None:
        raise NotSpmd("a stencil reads further than the halo rows reach")
    probe = Shard(None, n, L, R, t, rank)
    lo, hi = probe.avail
    out = fn(*aligned_pieces(leaves, lo, hi, n, nd))
    if np.ndim(out) != nd - (drop_axis is not None) - drops or np.shape(out)[0] != hi - lo:
        raise NotSpmd("an element-wise result does not keep the tiled axis")
    probe.data = out if dtype is None else out.astype(dtype, copy=False)
    return probe


def same_ragged(r1, r2) -> bool:
    return r1[0] is r2[0] and r1[1:] == r2[1:]


def _key(x, key):
    k = key if type(key) is tuple else (key,)
    if any(e is Ellipsis for e in k):
        i = next(j for j, e in enumerate(k) if e is Ellipsis)
        used = sum(1 for e in k if e is not None and e is not Ellipsis)
        k = k[:i] + (slice(None),) * (x.ndim - used) + k[i + 1:]
    if not k:
        k = (slice(None),)
    rest = k[1:]
    if any(is_shard(e) for e in rest):
        raise NotSpmd("a tiled value indexes a trailing axis")
    if sum(1 for e in rest if isinstance(e, (np.ndarray, list))) > 1:
        raise NotSpmd("more than one index array after the tiled axis")
    return k[0], rest


def _row_slice(first, n):
    if first.step not in (None, 1):
        raise NotSpmd("a strided slice of the tiled axis")
    s, e, _ = first.indices(n)
    return s, max(e, s)


def getitem(x, key):
    if type(x) is Transposed:
        raise NotSpmd("indexing the transpose of a tiled array")
    if type(x) is not Shard:
        k = key if type(key) is tuple else (key,)
        if not any(is_shard(e) for e in k):
            return x[key]
        idx = k[0]
        if not (type(idx) is Shard and idx.ndim == 1 and idx.dtype.kind in "iu"
                and not any(is_shard(e) or isinstance(e, (np.ndarray, list)) for e in k[1:])):
            raise NotSpmd("a replicated array indexed by a tiled value other than one integer index")
        return idx.like(np.asarray(x)[(idx.data,) + k[1:]])
    first, rest = _key(x, key)
    rank = x.rank
    if type(first) is slice:
        if x.ragged is not None:
            if first != slice(None):
                raise NotSpmd("a slice of rows selected by a mask")
            return Shard(x.data[(slice(None),) + rest], None, 0, 0, 0, rank, x.ragged, view=True)
        s, e = _row_slice(first, x.n)
        y = Shard(None, e - s, x.L + s, x.R - s, x.t + s, rank, view=True)
        lo, hi = y.avail
        y.data = x.local(lo + s, hi + s)[(slice(None),) + rest]
        return y
    if type(first) is Shard:
        m = first
        if m.dtype != np.bool_ or m.ndim != 1 or m.ragged is not None or x.ragged is not None:
            raise NotSpmd("rows of a tiled value picked by a tiled index other than a boolean mask")
        if m.n != x.n:
            raise IndexError(f"boolean index did not match indexed array along axis 0; size of axis is {x.n} "
                             f"but size of corresponding boolean axis is {m.n}")
        lo, hi = x.own
        if not rest and m.origin is not None and m.origin[0] == "eq" and not m.mutated:
            # ``X[labels == j]``: made only if used as rows; its sum or mean comes from per-label sums
            sel = Shard(None, None, 0, 0, 0, rank, (m, lo, x.t),
                        origin=("group", x, m, m.origin[1], m.origin[2], lo, hi))
            rank.lazy.append(weakref.ref(sel))  # made before its rows change (_before_change)
            return sel
        data = x.local(lo, hi)[m.local(lo, hi)]
        return Shard(data[(slice(None),) + rest] if rest else data, None, 0, 0, 0, rank, (m, lo, x.t))
    if first is None:
        raise NotSpmd("a new axis before the tiled axis")
    raise NotSpmd("single rows or integer-array rows of a tiled value")


def _before_change(x: Shard):
    """``x``'s rows are about to change in place: a mask or selection that reads them (``m = labels == j``,
    ``sel = X[m]``; also through a view or a cast that shares them) and is not made yet is made now, as NumPy made
    it when its line ran, and forgets where it came from, so its sums no longer come from the per-label table;
    tables made from these rows are dropped."""
    rank = x.rank
    if x.origin is not None:  # a mask changed itself: its count is no longer the labels' (``m[:10] = True``)
        x.data  # noqa: B018
        x.origin = None
    live = []
    for ref in rank.lazy:
        sel = ref()
        if sel is None or sel.origin is None:
            continue
        if any(v is x or (type(v) is Shard and np.may_share_memory(v.data, x.data)) for v in sel.origin[1:4]):
            sel.data  # noqa: B018 - made from the rows as they are now
            sel.origin = None
        else:
            live.append(ref)
    rank.lazy = live
    for key, hit in list(rank.groups.items()):  # per-label tables of these rows are stale now
        if any(v is x or (type(v) is Shard and np.may_share_memory(v.data, x.data)) for v in hit[:2]):
            del rank.groups[key]


def setitem(x, key, value):
    if type(x) is not Shard:
        k = key if type(key) is tuple else (key,)
        if is_shard(value) or any(is_shard(e) for e in k):
            raise NotSpmd("a tiled value stored into a replicated array")
        x[key] = value
        return
    if x.view or x.ragged is not None:
        raise NotSpmd("an assignment into a slice or a masked selection of a tiled value")
    _before_change(x)
    if type(value) is Transposed:
        raise NotSpmd("the transpose of a tiled array stored")
    first, rest = _key(x, key)
    lo, hi = x.own
    if type(first) is slice:
        s, e = _row_slice(first, x.n)
        lo2 = max(lo, s)
        hi2 = max(lo2, min(hi, e))
        target = x.local(lo2, hi2)
        if type(value) is Shard:
            if value.ragged is not None or value.n != e - s:
                raise NotSpmd("an assignment of tiled rows that do not line up")
            v = value.local(lo2 - s, hi2 - s)
        else:
            sub = target[(slice(None),) + rest] if rest else target
            v = value
            if np.ndim(v) == sub.ndim and sub.ndim and np.shape(v)[0] == e - s and e - s != 1:
                v = np.asarray(v)[lo2 - s:hi2 - s]
        if rest:
            target[(slice(None),) + rest] = v
        else:
            target[...] = v
    elif type(first) is Shard and first.ndim == x.ndim > 1 and not rest and first.dtype == np.bool_ \
            and first.ragged is None and first.shape == x.shape:
        # ``X[X < lo] = lo``: an element mask of X's own shape, a scalar value
        if np.ndim(value) != 0 or is_shard(value):
            raise NotSpmd("an assignment of an array through an element mask of a tiled array")
        x.local(lo, hi)[first.local(lo, hi)] = value
    elif type(first) is Shard:
        if first.dtype != np.bool_ or first.ndim != 1 or first.ragged is not None or first.n != x.n:
            raise NotSpmd("an assignment through a tiled index other than a boolean mask")
        sel = first.local(lo, hi)
        if type(value) is Shard:
            if value.ragged is None or not same_ragged(value.ragged, (first, lo, x.t)):
                raise NotSpmd("an assignment of rows selected by another mask")
            value = value.data
        x.local(lo, hi)[(sel,) + rest] = value
    else:
        raise NotSpmd("an assignment to single rows of a tiled value")
    x.mutated = True
    refresh_halo(x)


def inplace(ufunc, x, y):
    """``x op= y`` on this rank's rows of ``x`` (NumPy's casting rules: ``out=``)."""
    if type(x) is not Shard or x.view or x.ragged is not None:
        raise NotSpmd("an in-place operation on a slice or a selection of a tiled value")
    if type(y) is Transposed:
        raise NotSpmd("the transpose of a tiled array in an in-place operation")
    np.broadcast_shapes(x.shape, global_shape(y))
    if type(y) is Shard and (y.ragged is not None or y.ndim > x.ndim or (y.ndim == x.ndim and y.n != x.n)):
        raise NotSpmd("an in-place operation with tiled rows that do not line up")
    _before_change(x)
    lo, hi = x.own
    target = x.local(lo, hi)
    if type(y) is Shard and y.ndim == x.ndim:
        other = y.local(lo, hi)
    else:
        other = aligned_pieces([y], lo, hi, x.n, x.ndim)[0]
    ufunc(target, other, out=target)
    x.mutated = True
    refresh_halo(x)
    return x


def refresh_halo(x: Shard):
    """After this rank's rows changed: its neighbours' copies (their halo rows) are renewed, in one exchange."""
    wl, wr = max(x.L - x.t, 0), max(x.R + x.t, 0)
    if not (wl or wr):
        return
    rank = x.rank
    if x.t != 0 or x.n != rank.starts[-1] + rank.counts[-1]:
        raise NotSpmd("an assignment into a shifted tiled value with halo rows")
    if min(rank.counts) < max(wl, wr):
        raise NotSpmd(f"a rank holds fewer rows ({min(rank.counts)}) than the halo ({max(wl, wr)})")
    a, b = rank.a, rank.b
    own = x.local(a, b)
    trail, dt = x.data.shape[1:], x.data.dtype
    from_left, from_right = np.empty((wl,) + trail, dt), np.empty((wr,) + trail, dt)
    rank.group.halo(np.ascontiguousarray(own[:wr]), np.ascontiguousarray(own[len(own) - wl:]), from_left,
                    from_right)
    rank.stats["halo"] += 1
    rank.stats["values"] += (wl + wr) * int(np.prod(trail))
    rank.tick()
    lo, hi = x.avail
    if a - lo > 0:
        x.data[:a - lo] = from_left[wl - (a - lo):]
    if hi - b > 0:
        x.data[b - lo:] = from_right[:hi - b]
