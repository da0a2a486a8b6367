"""What spans the ranks: reductions over the tiled axis, products contracting it, norms, and making a tiled value
whole on every rank. Each is this rank's partial result, then one collective of the group; every rank ends with
the same value. Sums add the ranks' partial sums (a different order from NumPy's pairwise sum: results agree to
float rounding); min/max/any/all/argmin/argmax gather the ranks' partials and pick exactly as NumPy does."""
from __future__ import annotations

import warnings

import numpy as np

from .deferred import EXACT_LIMIT
from .shard import NotSpmd, Shard, Transposed, is_shard
from .table import table

_GATHERED = {"min": np.min, "max": np.max, "any": np.any, "all": np.all, "prod": np.prod}


def _axes(axis, nd):
    if axis is None:
        return tuple(range(nd))
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(int(a) % nd for a in axes))


def _scalar(r):
    return r[()] if isinstance(r, np.ndarray) and r.ndim == 0 else r


def _finish(total, axes, keepdims):
    return _scalar(total if keepdims else np.squeeze(total, axis=axes))


def reduce(kind, x, axis=None, keepdims=False, dtype=None, ddof=0):
    """``np.<kind>(x, axis, keepdims)`` of a shard: local when the tiled axis stays, else across the ranks."""
    if type(x) is Transposed:
        raise NotSpmd(f"{kind} of the transpose of a tiled array")
    if type(x) is not Shard:
        extra = {"ddof": ddof} if kind in ("var", "std") else {}
        kw = {"dtype": dtype} if dtype is not None else {}
        return getattr(np, kind)(x, axis=axis, keepdims=keepdims, **kw, **extra)
    if x.origin is not None and kind in ("sum", "mean") and dtype is None and not keepdims:
        found = _from_group_sums(kind, x, axis)
        if found is not None:
            return found
    nd = x.ndim
    axes = _axes(axis, nd)
    own = x.own_data()
    kw = {"dtype": dtype} if dtype is not None else {}
    if 0 not in axes:
        extra = {"ddof": ddof} if kind in ("var", "std") else {}
        if kind in ("argmin", "argmax"):
            return x.owned_rows(getattr(np, kind)(own, axis=axes[0], keepdims=keepdims))
        return x.owned_rows(getattr(np, kind)(own, axis=axes, keepdims=keepdims, **kw, **extra))
    rank = x.rank
    if kind == "sum":
        part = np.sum(own, axis=axes, keepdims=True, **kw)
        return rank.defer(part, lambda t: _finish(t, axes, keepdims), _exact(x, own, axes, part))
    if kind in ("mean", "var", "std"):
        return _moments(kind, x, own, axes, keepdims, dtype, ddof)
    if kind in ("argmin", "argmax"):
        return _arg(kind, x, own, axis, keepdims)
    if kind not in _GATHERED:
        raise NotSpmd(f"np.{kind} over the tiled axis")
    fn = _GATHERED[kind]
    count = own.size
    if count:
        part = fn(own, axis=axes, keepdims=True, **kw)
    else:  # a rank without rows: a placeholder of the right shape and dtype, ignored below
        part = fn(np.zeros((1,) * nd, own.dtype), axis=axes, keepdims=True, **kw)
        part = np.zeros(tuple(1 if d in axes else s for d, s in enumerate(x.shape)), part.dtype)
    parts = rank.allgather(part)
    has = rank.allgather(np.array([count], np.int64))[:, 0] > 0
    if not has.any():
        if kind in ("min", "max"):
            raise ValueError(f"zero-size array to reduction operation {'minimum' if kind == 'min' else 'maximum'} "
                             "which has no identity")
        return _finish(fn(np.zeros((0,) * 1, own.dtype), **kw).reshape((1,) * nd), axes, keepdims)
    return _finish(fn(parts[has], axis=0), axes, keepdims)


def _exact(x, own, axes, part) -> bool:
    """Is the sum over the ranks of ``part`` (``own`` summed over ``axes``) an integer below 2**53 on every rank,
    whatever the data: a count of true elements, or a sum of small integers over few enough of them? Decided from
    shapes and dtypes only (the same on every rank)."""
    if part.dtype.kind not in "iu" or own.dtype.kind not in "biu" or own.dtype.itemsize > 4:
        return False
    rows = x.n if x.ragged is None else x.ragged[0].n
    bound = int(rows) * int(np.prod([own.shape[a] for a in axes if a != 0]))
    if own.dtype.kind != "b":
        info = np.iinfo(own.dtype)
        bound *= max(-int(info.min), int(info.max))
    return bound < EXACT_LIMIT and bound <= np.iinfo(part.dtype).max  # (a sum in int8 wraps, as NumPy's does)


def group_sums(rank, x, labels, lo, hi):
    """Per-label sums of ``x``'s rows ``[lo, hi)`` and per-label counts (table.py: one compiled kernel),
    kept on the rank for the latest labels: k-means' ``[X[labels == j].mean(axis=0) for j in range(k)]`` reads
    k entries of one table instead of k masked copies of X. ``x`` None: the counts only (any table over the same
    labels has them: ``np.sum(X[m], axis=0) / np.sum(m)`` makes one table, not one per query). None when the
    labels are not small non-negative ints."""
    for (_, _, a, b), hit in rank.groups.items():  # (a few entries: the latest labels only)
        if hit[1] is labels and (a, b) == (lo, hi) and (hit[0] is x or (x is None and hit[3] is not None)):
            return hit[2], hit[3]
    key = (id(x), id(labels), lo, hi)
    lab = labels.local(lo, hi)
    rows = None if x is None else x.local(lo, hi)
    # one compiled pass (after one over the labels for their range)
    found = table(lab, None if rows is None else rows.reshape(len(rows), -1), 4 * lab.size + 1024)
    if found is None:
        return None
    sums, counts = found
    if sums is not None:
        sums = sums.reshape((len(counts),) + rows.shape[1:])
    if len(rank.groups) >= 4 or any(hit[1] is not labels for hit in rank.groups.values()):
        rank.groups.clear()  # the latest labels only: last iteration's are gone
    rank.groups[key] = (x, labels, sums, counts)
    return sums, counts


def _from_group_sums(kind, x, axis):
    """The sum or mean over the tiled axis of ``X[labels == j]`` (or the count of ``labels == j``) from the
    per-label table, as a deferred sum over the ranks; None when it does not apply."""
    o = x.origin
    if o[0] == "group":
        _, X, _mask, labels, j, lo, hi = o
        if _axes(axis, x.ndim)[:1] != (0,) or (axis is None and x.ndim > 1) or X.dtype.kind != "f" \
                or X.mutated or labels.mutated or X.ragged is not None:
            return None
        found = group_sums(x.rank, X, labels, lo, hi)
        if found is None:
            return None
        sums, counts = found
        row = sums[j] if j < len(counts) else np.zeros(sums.shape[1:], sums.dtype)
        count = counts[j] if j < len(counts) else 0
        if kind == "sum":
            return x.rank.defer(row.astype(X.dtype, copy=False), _scalar)
        part = np.concatenate([np.ravel(row), [float(count)]])

        def mean(t):
            if t[-1] == 0:
                warnings.warn("Mean of empty slice.", RuntimeWarning, stacklevel=2)
            with np.errstate(invalid="ignore", divide="ignore"):
                return _scalar((t[:-1] / t[-1]).reshape(row.shape).astype(X.dtype, copy=False))

        return x.rank.defer(part, mean)
    if o[0] == "eq" and kind == "sum" and x.ragged is None and (axis is None or _axes(axis, 1) == (0,)):
        labels, j = o[1], o[2]
        if labels.mutated:
            return None
        lo, hi = x.own
        found = group_sums(x.rank, None, labels, lo, hi)
        if found is None:
            return None
        counts = found[1]
        return x.rank.defer(np.array(counts[j] if j < len(counts) else 0, np.int64), _scalar, exact=True)
    return None


def _moments(kind, x, own, axes, keepdims, dtype, ddof):
    """mean: the ranks' sums and counts in one allreduce; var/std: then the sums of squared deviations from that
    mean (NumPy's two passes)."""
    rank = x.rank
    out_dtype = np.mean(np.zeros((1,) * x.ndim, own.dtype), dtype=dtype).dtype
    acc = np.result_type(out_dtype, np.float64) if out_dtype.kind in "fc" else np.float64
    s = np.sum(own, axis=axes, keepdims=True, dtype=acc)
    count = int(np.prod([own.shape[a] for a in axes]))

    def mean_of(both):
        total, n = both[:-1].reshape(s.shape), both[-1].real
        if n == 0:
            warnings.warn("Mean of empty slice.", RuntimeWarning, stacklevel=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            return total / n, n

    both = np.concatenate([s.ravel(), np.array([count], acc)])
    if kind == "mean":
        return rank.defer(both, lambda t: _finish(mean_of(t)[0].astype(out_dtype, copy=False), axes, keepdims))
    mean, n = mean_of(rank.sum_now(both))
    d = own - mean
    sq = (d * np.conj(d)).real if np.iscomplexobj(d) else d * d
    real = np.zeros(1, out_dtype).real.dtype

    def var_of(ss):
        with np.errstate(invalid="ignore", divide="ignore"):
            var = ss / max(n - ddof, 0)
        res = np.sqrt(var) if kind == "std" else var
        return _finish(res.astype(real, copy=False), axes, keepdims)

    return rank.defer(np.sum(sq, axis=axes, keepdims=True), var_of)


def _arg(kind, x, own, axis, keepdims):
    """argmin/argmax over the whole array or its tiled axis: each rank's best value and global index, then the
    first best over the ranks (ranks hold consecutive rows, so rank order is index order)."""
    if x.ragged is not None or (axis is not None and x.ndim > 2) or keepdims:
        raise NotSpmd(f"np.{kind} of selected rows, or over the tiled axis of a 3-D array")
    lo, _ = x.own
    fn = np.argmin if kind == "argmin" else np.argmax
    row = int(np.prod(x.shape[1:])) if x.ndim > 1 else 1
    if axis is None:
        has = own.size > 0
        i = int(fn(own)) if has else 0
        val = own.reshape(-1)[i:i + 1] if has else np.zeros(1, own.dtype)
        idx = np.array([lo * row + i, has], np.int64)
    else:
        has = own.shape[0] > 0
        i = fn(own, axis=0) if has else np.zeros(own.shape[1:], np.int64)
        val = np.take_along_axis(own, np.expand_dims(i, 0), 0)[0] if has else np.zeros(own.shape[1:], own.dtype)
        idx = np.stack([np.asarray(lo + i, np.int64), np.full(np.shape(i), has, np.int64)])
    vals, idxs = x.rank.allgather(np.asarray(val)), x.rank.allgather(idx)
    keep = idxs[:, 1].reshape(len(idxs), -1)[:, 0] > 0
    if not keep.any():
        raise ValueError(f"attempt to get {kind} of an empty sequence")
    vals, idxs = vals[keep], idxs[keep]
    if axis is None:  # first best over ranks; NaN first as NumPy
        return np.intp(idxs[int(fn(vals[:, 0])), 0])
    pick = fn(vals, axis=0)
    return np.take_along_axis(idxs[:, 0], np.expand_dims(pick, 0), 0)[0].astype(np.intp)


def replicate(x: Shard) -> np.ndarray:
    """The whole of an aligned shard on every rank (an allgather of each rank's owned rows)."""
    if x.ragged is not None:
        raise NotSpmd("rows selected by a mask made whole")
    rank = x.rank
    owns = [(max(0, a - x.t), max(max(0, a - x.t), min(x.n, a + c - x.t))) for a, c in zip(rank.starts, rank.counts)]
    most = max(hi - lo for lo, hi in owns)
    own = x.own_data()
    buf = np.zeros((most,) + own.shape[1:], own.dtype)
    buf[:len(own)] = own
    parts = rank.allgather(buf)
    return np.concatenate([parts[r][:hi - lo] for r, (lo, hi) in enumerate(owns)])


def _contract(rank, part):
    return rank.defer(np.asarray(part), _scalar)


def matmul(a, b):
    """``a @ b`` with a shard on either side (see the module docstring for which products are collectives)."""
    ta, tb = type(a), type(b)
    if ta is Transposed:  # X.T @ r: contracts the tiled axis
        X = a.base
        if X.ragged is not None:
            raise NotSpmd("a product of rows selected by a mask")
        lo, hi = X.own
        if tb is Shard:
            if b.ragged is not None or b.n != X.n or b.ndim > 2:
                raise NotSpmd("a product of tiled values that do not line up")
            return _contract(X.rank, X.local(lo, hi).T @ b.local(lo, hi))
        if tb is Transposed:
            raise NotSpmd("a product of two transposed tiled arrays")
        if np.ndim(b) == 0 or np.shape(b)[0] != X.n:
            return X.local(lo, hi).T @ b  # NumPy's shape error, or a result whose columns are tiled
        return _contract(X.rank, X.local(lo, hi).T @ np.asarray(b)[lo:hi])
    if ta is Shard:
        if a.ragged is not None:
            raise NotSpmd("a product of rows selected by a mask")
        if a.ndim == 1:  # v @ w, v @ M: contracts the tiled axis
            lo, hi = a.own
            if tb is Shard:
                if b.ragged is not None or b.n != a.n:
                    raise NotSpmd("a product of tiled values that do not line up")
                return _contract(a.rank, a.local(lo, hi) @ b.local(lo, hi))
            if tb is Transposed:
                raise NotSpmd("a product with the transpose of a tiled array")
            if np.ndim(b) == 0 or np.shape(b)[0] != a.n:
                return a.local(lo, hi) @ b
            return _contract(a.rank, a.local(lo, hi) @ np.asarray(b)[lo:hi])
        if tb is Transposed:
            raise NotSpmd("a product with the transpose of a tiled array")
        other = replicate(b) if tb is Shard else b  # A @ v with v tiled: every rank needs all of v
        return a.owned_rows(a.own_data() @ other)
    if tb is Shard:  # M @ v: contracts the tiled axis
        if b.ragged is not None:
            raise NotSpmd("a product of rows selected by a mask")
        lo, hi = b.own
        m = np.asarray(a)
        if m.ndim == 0 or m.shape[-1] != b.n:
            return m @ b.local(lo, hi)
        return _contract(b.rank, m[..., lo:hi] @ b.local(lo, hi))
    raise NotSpmd("a product with the transpose of a tiled array on the right")


def norm(x, ord=None, axis=None, keepdims=False):
    if not is_shard(x):
        return np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    if ord is not None or axis is not None or keepdims or type(x) is not Shard:
        raise NotSpmd("np.linalg.norm other than the 2-norm of the whole tiled array")
    own = x.own_data()
    a = np.abs(own) if np.iscomplexobj(own) else own
    out = np.linalg.norm(np.zeros(1, own.dtype)).dtype
    part = np.array(np.sum(a * a), dtype=np.result_type(a.dtype, np.float64) if a.dtype.kind in "fc" else np.float64)
    return x.rank.defer(part, lambda t: np.sqrt(_scalar(t)).astype(out)[()])
