"""Tile grids: per-dimension boundaries (offsets from 0 to the dimension's size), and the helpers rules share.

A dimension of unknown size (the rows kept by a boolean mask) has boundaries ``(0, None, ..., None)``: the number
of tiles is known, their sizes are not until computed."""
from __future__ import annotations

import itertools
import math


def even(n: int, count: int) -> tuple[int, ...]:
    """``count`` tiles over ``n`` elements, sizes differing by at most one (like ``np.array_split``)."""
    count = max(1, min(int(count), n)) if n else 1
    q, r = divmod(n, count)
    out, at = [0], 0
    for i in range(count):
        at += q + (1 if i < r else 0)
        out.append(at)
    return tuple(out)


def parse(shape: tuple, tiles) -> tuple[tuple[int, ...], ...]:
    """Boundaries from a user's ``tiles``: per dimension a tile count (``8``) or the tile sizes (``(10, 30, 60)``).
    ``tiles`` may be shorter than ``shape``: the remaining dimensions are one tile. ``None``: one tile per dim."""
    if tiles is None:
        tiles = ()
    if isinstance(tiles, int):
        tiles = (tiles,)
    tiles = tuple(tiles)
    if len(tiles) > len(shape):
        raise ValueError(f"tiles={tiles!r} has {len(tiles)} entries for an array of {len(shape)} dimensions")
    out = []
    for d, n in enumerate(shape):
        spec = tiles[d] if d < len(tiles) else 1
        if isinstance(spec, int):
            if spec < 1:
                raise ValueError(f"tiles: dimension {d} needs at least one tile, got {spec}")
            out.append(even(n, spec))
        else:
            sizes = tuple(int(s) for s in spec)
            if sum(sizes) != n or any(s < 0 for s in sizes) or not sizes:
                raise ValueError(f"tiles: the sizes {sizes} of dimension {d} must be non-negative and add up "
                                 f"to its length {n}")
            out.append(tuple(itertools.accumulate(sizes, initial=0)))
    return tuple(out)


def counts(bounds) -> tuple[int, ...]:
    return tuple(len(b) - 1 for b in bounds)


def known(bounds) -> bool:
    return all(None not in b for b in bounds)


def shape_of(bounds) -> tuple:
    return tuple(b[-1] if b[-1] is not None else math.nan for b in bounds)


def indices(bounds):
    """Every tile index of the grid, in row-major order."""
    return itertools.product(*(range(len(b) - 1) for b in bounds))


def region(bounds, idx) -> tuple[tuple[int, int], ...]:
    """(start, stop) of tile ``idx`` per dimension."""
    return tuple((b[i], b[i + 1]) for b, i in zip(bounds, idx))


def overlapping(b: tuple, start: int, stop: int):
    """Tiles of one dimension's boundaries ``b`` that overlap [start, stop): (tile, local start, local stop)."""
    out = []
    for i in range(len(b) - 1):
        lo, hi = max(b[i], start), min(b[i + 1], stop)
        if lo < hi or (start == stop == b[i] and b[i] == b[i + 1]):
            out.append((i, lo - b[i], hi - b[i]))
    return out


def stepped(b: tuple, start: int, stop: int, step: int):
    """Tiles of one dimension's boundaries ``b`` holding elements of ``range(start, stop, step)`` (``step`` not 1),
    in the order the range visits them: (tile, local slice, count)."""
    r = range(start, stop, step)
    order = range(len(b) - 1) if step > 0 else range(len(b) - 2, -1, -1)
    out = []
    for i in order:
        a, z = b[i], b[i + 1]
        if step > 0:
            j0, j1 = max(0, -(-(a - start) // step)), min(len(r), -(-(z - start) // step))
        else:
            j0, j1 = max(0, -(-(start - z + 1) // -step)), min(len(r), (start - a) // -step + 1)
        if j1 > j0:
            first, last = r[j0] - a, r[j1 - 1] - a
            end = last + (1 if step > 0 else -1)
            out.append((i, slice(first, end if end >= 0 else None, step), j1 - j0))
    return out


def unknown(count: int) -> tuple:
    return (0,) + (None,) * count
