"""What workers run for tiled arrays: the operations of tile programs (tile-local operations, a reduction's partial
result), the combine steps of reduction trees, tile assembly and the tiles of created arrays. A tile program itself
(a fused chain of these) is run by runner.py.

These functions are pickled by reference: workers import them from the installed phylanx-py."""
from __future__ import annotations

import numpy as np

from ..alignment import aligned


def identity(x):
    """A tile that travelled in its task (from_array): stored aligned, as Dask may deserialize it at any byte."""
    return aligned(x)


# ---- tile-local operations used in programs ------------------------------------------------------------------
def take_region(x, slices):
    return x[slices]


def assemble(shape, dtype, placements, *pieces):
    """A new tile of ``shape`` from pieces of old tiles: ``placements[i]`` = (slices of piece i, where it goes)."""
    out = np.empty(shape, dtype)
    for (src, dst), piece in zip(placements, pieces):
        out[dst] = piece[src]
    return out


def concat(axis, *pieces):
    return np.concatenate(pieces, axis=axis)


def set_region(tile, where, value):
    tile = tile.copy()
    tile[where] = value
    return tile


def masked_rows(x, mask):
    return x[mask]


def add_all(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return out


def apply_method(x, name, args, kwargs):
    return getattr(x, name)(*args, **kwargs)


# ---- random tiles --------------------------------------------------------------------------------------------
def uniform_tile(seed, full_shape, region, dtype):
    """Tile of ``Generator(PCG64(seed)).random(full_shape)``, the same values whatever the tiling: each double
    takes one 64-bit draw, so a row range starts ``advance(offset)`` steps into the stream."""
    rows = region[0]
    inner = full_shape[1:]
    per_row = int(np.prod(inner)) if inner else 1
    bitgen = np.random.PCG64(seed).advance(rows[0] * per_row)
    block = np.random.Generator(bitgen).random((rows[1] - rows[0],) + tuple(inner))
    rest = tuple(slice(a, b) for a, b in region[1:])
    return np.ascontiguousarray(block[(slice(None),) + rest]).astype(dtype, copy=False)


def normal_tile(seed, index, shape, dtype, loc, scale):
    """Normal draws from a stream per tile (SeedSequence(seed, spawn key = tile index)): reproducible for a seed
    and a tiling, different across tilings."""
    ss = np.random.SeedSequence(seed, spawn_key=tuple(index))
    return (np.random.default_rng(ss).standard_normal(shape) * scale + loc).astype(dtype, copy=False)


def full_tile(shape, value, dtype):
    return np.full(shape, value, dtype)


def arange_tile(start, stop, step, dtype):
    return np.arange(start, stop, step, dtype=dtype)


def npy_tile(path, slices):
    return np.ascontiguousarray(np.load(path, mmap_mode="r")[slices])


def csv_tile(path, start, stop, delimiter, dtype, skip_header):
    """Rows of a CSV file whose first byte lies in [start, stop) (a row belongs to the tile where it starts)."""
    import io

    with open(path, "rb") as f:
        if start > 0:
            f.seek(start - 1)
            if f.read(1) != b"\n":
                f.readline()  # the row started in the previous tile
        chunk = []
        while f.tell() < stop:
            line = f.readline()
            if not line:
                break
            chunk.append(line)
    if skip_header and start == 0 and chunk:
        chunk = chunk[1:]
    text = b"".join(chunk)
    if not text.strip():
        return np.empty((0, 0), dtype)
    return np.atleast_2d(np.loadtxt(io.BytesIO(text), delimiter=delimiter, dtype=dtype, ndmin=2))


def shape(x):
    return x.shape


# ---- reductions ----------------------------------------------------------------------------------------------
ELEMENTWISE = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum, "any": np.logical_or,
               "all": np.logical_and}


def partial(kind, x, axis, offsets=None, full_shape=None, dtype=None):
    """One tile's partial result for reduction ``kind`` over ``axis`` (a tuple), keeping dims."""
    if kind in ELEMENTWISE:
        fn = {"min": np.min, "max": np.max}.get(kind) or getattr(np, kind)
        if kind in ("sum", "prod") and dtype is not None:
            return fn(x, axis=axis, keepdims=True, dtype=dtype)
        return fn(x, axis=axis, keepdims=True)
    if kind == "mean":
        n = np.prod([x.shape[a] for a in axis]) if axis else 1
        s = np.sum(x, axis=axis, keepdims=True, dtype=dtype if dtype is not None else _acc(x.dtype))
        return (s, n)
    if kind in ("var", "std"):
        n = np.prod([x.shape[a] for a in axis])
        acc = dtype if dtype is not None else _acc(x.dtype)
        if n == 0:
            z = np.zeros([1 if d in axis else s for d, s in enumerate(x.shape)], acc)
            return (0, z, z)
        m = np.mean(x, axis=axis, keepdims=True, dtype=acc)
        d = x - m
        m2 = np.sum(d * np.conj(d) if np.iscomplexobj(d) else d * d, axis=axis, keepdims=True)
        return (n, m, m2)
    if kind in ("argmin", "argmax"):
        return _arg_partial(kind, x, axis, offsets, full_shape)
    raise ValueError(kind)


def _acc(dtype):
    return np.float64 if dtype.kind in "biu" else None


def _arg_partial(kind, x, axis, offsets, full_shape):
    if axis is None:  # flat index into the whole array
        if x.size == 0:
            return (np.array(np.nan), np.array(-1))
        i = int(getattr(np, kind)(x))
        local = np.unravel_index(i, x.shape)
        flat = np.ravel_multi_index(tuple(o + li for o, li in zip(offsets, local)), full_shape)
        return (x.flat[i], np.array(flat))
    (a,) = axis
    idx = getattr(np, kind)(x, axis=a, keepdims=True)
    val = np.take_along_axis(x, idx, axis=a)
    return (val, idx + offsets[a])


def combine(kind, *parts):
    if kind in ELEMENTWISE:
        out = parts[0]
        fn = ELEMENTWISE[kind]
        for p in parts[1:]:
            out = fn(out, p)
        return out
    if kind == "mean":
        return (sum(p[0] for p in parts[1:]) + parts[0][0], sum(p[1] for p in parts))
    if kind in ("var", "std"):
        n, m, m2 = parts[0]
        for nb, mb, m2b in parts[1:]:  # Chan et al.'s pairwise update
            if nb == 0:
                continue
            if n == 0:
                n, m, m2 = nb, mb, m2b
                continue
            tot = n + nb
            delta = mb - m
            m = m + delta * (nb / tot)
            m2 = m2 + m2b + (delta * np.conj(delta) if np.iscomplexobj(delta) else delta * delta) * (n * nb / tot)
            n = tot
        return (n, m, m2)
    if kind in ("argmin", "argmax"):
        val, idx = parts[0]
        better = np.less if kind == "argmin" else np.greater
        for v, i in parts[1:]:
            if idx.ndim == 0 and int(idx) < 0:
                val, idx = v, i
                continue
            if i.ndim == 0 and int(i) < 0:
                continue
            # NaN wins (NumPy returns the first NaN); otherwise strictly better wins, so ties keep the first
            take = (~np.isnan(val) & (np.isnan(v) | better(v, val))) if val.dtype.kind in "fc" else better(v, val)
            val, idx = np.where(take, v, val), np.where(take, i, idx)
        return (val, idx)
    raise ValueError(kind)


def finish(kind, part, axis, keepdims, ddof, dtype):
    if kind in ELEMENTWISE:
        out = part
    elif kind == "mean":
        s, n = part
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.true_divide(s, n)
        if dtype is not None:
            out = out.astype(dtype)
    elif kind in ("var", "std"):
        n, m, m2 = part
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.true_divide(m2.real if np.iscomplexobj(m2) else m2, max(n - ddof, 0))
        if kind == "std":
            out = np.sqrt(out)
    else:
        out = part[1]
        if axis is None:
            return np.intp(out)
    if axis is None:
        return out.reshape(())[()] if not keepdims else out
    if not keepdims:
        out = np.squeeze(out, axis=axis)
        if out.ndim == 0:
            return out[()]
    return out


def combine_finish(kind, axis, keepdims, ddof, dtype, *parts):
    return finish(kind, combine(kind, *parts), axis, keepdims, ddof, dtype)


def pack(*values):
    return values


def combine_tuples(specs, *tuples):
    """Partial results of several tiles combined, item by item (a level of a batch's tree)."""
    return tuple(combine(spec[0], *[t[i] for t in tuples]) for i, spec in enumerate(specs))


def combine_all(specs, *tuples):
    """Every item of a batch (batch.py): item i's partials are element i of each tile's tuple."""
    return tuple(combine_finish(*spec, *[t[i] for t in tuples]) for i, spec in enumerate(specs))
