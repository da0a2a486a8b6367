"""What the workers run for the native loop tier on the cluster's arrays (remote.py): the whole loop in one task
(``run_loop``, then ``summary`` of what the client needs), or one tile's share of it (``run_tile``, per_tile.py),
and the small tasks that take their results apart. The kernel is loaded from its generated source through the
verified kernel cache (compiled once per machine, loaded by the other workers)."""
from __future__ import annotations

import numpy as np

from ..alignment import aligned
from .loop import _restore
from .tiering import load_kernel

SMALL_BYTES = 1 << 20  # a new array result up to this size comes back with the summary; larger ones stay remote


class Big:
    """Stands for a large new array a run left on its worker (the summary does not carry it)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


def meta(value):
    """(kind, dtype, ndim) of a remote value: "ndarray" for a NumPy array, else its type's name."""
    if type(value) is np.ndarray:
        return "ndarray", value.dtype, value.ndim
    return type(value).__name__, None, None


def run_loop(source, specs, conv, writes, *flat):
    """On a worker: the loop's arguments put together (tiles joined, arrays the kernel may change copied: they are
    Dask's results, which other tasks read), the kernel run, and ("ok", outputs, arguments) or ("rerun", why)."""
    args = []
    for spec in specs:
        if spec[0] == "tiled":
            shape, at = spec[1], spec[2]
            tiles = np.empty(shape, dtype=object)
            for k, t in enumerate(flat[at:at + int(np.prod(shape))]):
                tiles.reshape(-1)[k] = t
            args.append(aligned(np.block(tiles.tolist()) if tiles.size > 1 else np.array(tiles.reshape(-1)[0])))
        else:
            args.append(flat[spec[1]])
    for i in writes:
        if specs[i][0] != "tiled":
            args[i] = aligned(np.array(args[i]))  # a copy: the kernel changes it
    args = [aligned(a) if type(a) is np.ndarray else a for a in args]
    given = list(args)
    module = load_kernel(source)  # the kernel's module text, made on the client (tiering.sequential_module)
    try:
        out = module.kernel(*args)
    except module._Overflow as e:
        why = e.args[0] if e.args else "a Python int grew past 2**63 or did not fit a small int dtype"
        return ("rerun", f"{why}: the loop reran interpreted", (), ())
    except Exception as e:
        from numba.core.errors import NumbaError

        if isinstance(e, NumbaError):
            return ("rerun", f"Numba: {str(e).strip().splitlines()[0][:200]}", (), ())
        raise
    values = tuple(_restore(out[i], kind if flag is None else (kind.np if out[flag] else kind.py))
                   for i, kind, flag in conv)
    return ("ok", values, tuple(given[i] for i in writes), tuple(given))


def summary(run, writes, tiled):
    """What the client needs of a run: its outputs (large new arrays as ``_Big``, the arguments it was given as
    their positions), and the changed arrays that are not tiled (those are cut into tiles on the workers)."""
    if run[0] == "rerun":
        return run[:2]
    _, values, written, given = run
    small, same = [], []
    for v in values:
        j = next((k for k, g in enumerate(given) if g is v and type(v) is np.ndarray), None)
        same.append(j)
        if j is None and type(v) is np.ndarray and v.nbytes > SMALL_BYTES:
            small.append(Big(v.shape, v.dtype))
        else:
            small.append(None if j is not None else v)
    return ("ok", tuple(small), tuple(None if t else w for w, t in zip(written, tiled)), tuple(same))


def output(run, o):
    return run[1][o]


def cut(run, pos, sl):
    return aligned(np.array(run[2][pos][sl]))


def run_tile(source, specs, writes, rows, *flat):
    """On a worker: the tile loop's arguments (each tiled one its slab, the tile's rows joined with the halo rows
    cut from its neighbours: a new array, which the kernel may change), the kernel run, and the rows ``rows[j]``
    (relative to its slab) of each array it changed, or ("rerun", why) when it stopped."""
    args = []
    for q, spec in enumerate(specs):
        if spec[0] == "slab":
            _, at, cuts = spec
            parts = [p if c is None else p[c[0]:c[1]] for p, c in zip(flat[at:at + len(cuts)], cuts)]
            if len(parts) > 1:
                args.append(aligned(np.concatenate(parts, axis=0)))
            else:  # the tile itself: copied only when the kernel may change it (it is Dask's result)
                args.append(aligned(np.array(parts[0]) if q in writes else parts[0]))
        else:
            args.append(flat[spec[1]])
    module = load_kernel(source)  # the kernel's module text, made on the client (tiering.sequential_module)
    try:
        module.kernel(*args)
    except module._Overflow as e:
        return ("rerun", f"{e.args[0] if e.args else 'a Python int grew past 2**63'}: the loop reran interpreted")
    except Exception as e:
        from numba.core.errors import NumbaError

        if isinstance(e, NumbaError):
            return ("rerun", f"Numba: {str(e).strip().splitlines()[0][:200]}")
        raise
    return ("ok",) + tuple(args[i] if (r[0], r[1]) == (0, len(args[i])) else aligned(np.array(args[i][r[0]:r[1]]))
                           for i, r in zip(writes, rows))


def rows(tile, a, b):
    """Rows [a, b) of a tile: a neighbour's halo, cut where the tile lives (only those rows travel)."""
    return np.array(tile[a:b])


def status(result):
    return result[:2] if result[0] == "rerun" else ("ok",)


def pick(result, j):
    return result[1 + j]
