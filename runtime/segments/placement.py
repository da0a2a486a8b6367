"""Where a segment's ranks run: one rank per live worker, over the row tiles that worker already holds, so Dask
moves (or recomputes from lineage) only what is not there. SPMD ranks take runs of consecutive tiles (a rank's rows
are one block of the tiled axis); training ranks take any tiles (the batch plan is a function of the tiles, not of
the ranks: training/segment.py)."""
from __future__ import annotations

import itertools

from .ports import RankLost


def assign(cluster, cols, tile_rows, tile_bytes=None, *, runs=True, where=None):
    """Ranks over the live workers for the tiles of ``cols`` (one list of futures per input, a future per row
    tile; ``tile_rows``, ``tile_bytes``: each tile's rows and bytes over the inputs). ``runs``: [(worker, first
    tile, end tile)], see ``_runs``; else [(worker, tiles)], see ``_spread``. ``where``, a dict, receives who holds
    each tile (Dask's ``who_has``: key -> workers)."""
    alive = sorted(cluster.live_workers())
    if not alive:
        raise RankLost("no Dask workers are left")
    who = cluster.who_has([f for col in cols for f in col])
    if where is not None:
        where.update(who)
    if runs:
        return _runs(alive, cols, tile_rows, tile_bytes, who)
    return _spread(alive, cols[0], who)


def blocks(tile_rows, n: int):
    """Split the tiles (their row counts) into ``n`` runs of consecutive tiles with row totals as even as can be:
    a list of (first tile, end tile)."""
    total = sum(tile_rows)
    cuts, at, acc = [0], 0, 0
    for r in range(1, n):
        goal = total * r / n
        while at < len(tile_rows) - (n - r) and (acc + tile_rows[at] / 2) < goal:
            acc += tile_rows[at]
            at += 1
        at = max(at, cuts[-1] + 1)
        acc = sum(tile_rows[:at])
        cuts.append(at)
    cuts.append(len(tile_rows))
    return [(cuts[i], cuts[i + 1]) for i in range(n)]


def _runs(alive, cols, tile_rows, tile_bytes, who):
    """[(worker, first tile, end tile)], one per live worker (at most one per tile), each run of tiles on the worker
    already holding most of its bytes."""
    n = min(len(alive), len(tile_rows))
    runs = blocks(tile_rows, n)
    local = {}
    for col in cols:
        for t, f in enumerate(col):
            for w in who.get(f.key, ()):
                local[(w, t)] = local.get((w, t), 0) + tile_bytes[t]

    def held(w, run):
        return sum(local.get((w, t), 0) for t in range(*run))

    if n <= 4:  # try every matching of runs to workers
        best = max(itertools.permutations(alive, n), key=lambda ws: sum(held(w, r) for w, r in zip(ws, runs)))
    else:
        best, free = [], list(alive)
        for r in runs:
            w = max(free, key=lambda w: held(w, r))
            best.append(w)
            free.remove(w)
    return [(w, a, b) for w, (a, b) in zip(best, runs)]


def _spread(alive, tiles, who):
    """[(worker, tiles)] sorted by first tile, spreading the tiles over the live workers, at most ceil(tiles /
    workers) each: a tile stays on a worker holding it while that worker has room, otherwise (its worker died, or
    the survivor already recomputed it next to its own) it goes to the live worker with the fewest tiles, where Dask
    moves or recomputes it from lineage."""
    n_tiles = len(tiles)
    quota = -(-n_tiles // min(len(alive), n_tiles))
    load = dict.fromkeys(alive, 0)
    owner = {}
    for t, f in enumerate(tiles):
        for w in who.get(f.key, ()):
            if w in load and load[w] < quota:
                owner[t] = w
                load[w] += 1
                break
    for t in range(n_tiles):
        if t not in owner:
            w = min(alive, key=lambda w: (load[w], alive.index(w)))
            owner[t] = w
            load[w] += 1
    ranks = {}
    for t in sorted(owner):
        ranks.setdefault(owner[t], []).append(t)
    return sorted(((w, tuple(ts)) for w, ts in ranks.items()), key=lambda r: r[1][0])
