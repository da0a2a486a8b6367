"""Data-parallel training on Dask workers, where the row tiles of X and Y live.

``allreduce``: every step, the worker of each row tile computes the gradient of its rows of the global batch (the
gradient tree, on the synchronous runtime, on the tile it holds); the gradients travel as one flat vector (all
parameters bucketed together), are summed pairwise up a tree and applied once by the optimizer on the first
tile's worker, and the new parameter vector goes back to the others. With the same global batch this is
sequential training, to float tolerance. Per step and per non-root worker: one gradient vector in, one parameter
vector out (2(n-1)P values in all, the minimum of any allreduce that ends with every worker holding the result).

``neighbours`` (D-PSGD): each worker keeps its own replica and optimizer state, takes steps on batches of its own
rows (batch_size / n rows each, so an epoch has as many steps as allreduce's), and every ``every`` steps replaces
its parameters by the mean of its own and its ring neighbours'. The model after an epoch is the replicas' mean;
the history reports the consensus distance sqrt(mean_i |x_i - mean|^2).

A whole epoch is submitted as one graph of futures (no round trip per step). A worker that dies mid-epoch loses no
work for good: its tasks are recomputed from lineage (tiles come from tasks, the epoch's start values are
replicated), and an epoch that still fails is restarted from the parameters it started with (a checkpoint).
"""
from __future__ import annotations

import os
import time
import uuid

import numpy as np

from phylanx_py.runtime import using

from ..pytree import flatten, unflatten
from .model import Sequential, synchronous_runtime

RETRIES = 3  # restarts of one epoch from its checkpoint before giving up
# Seconds without one finished step before an epoch counts as stalled (an error, not a hang): a step is seconds at
# most, so this only fires when the cluster stopped making progress (a task waiting for data it can never get).
STALL_SECONDS = float(os.environ.get("PHYLANX_STALL_SECONDS", "600"))


# ---- run on the workers --------------------------------------------------------------------------------------
def _unpack(vec, shapes, structure):
    out, at = [], 0
    for shape in shapes:
        n = int(np.prod(shape))
        out.append(vec[at:at + n].reshape(shape))
        at += n
    return unflatten(structure, out)


def _pack(tree):
    return np.concatenate([np.ravel(np.asarray(v)) for v in flatten(tree)[0]])  # the parameters' own dtype


def _grad_part(spec, pvec, state, X, Y, idx, noise, scale):
    """This worker's share of one step: the gradient of its rows (times their share of the batch), flat."""
    model, shapes, structure = spec
    params = _unpack(pvec, shapes, structure)
    with using(synchronous_runtime()):
        (loss, (new_state, out)), grads = model.step_function()(params, state, noise, X[idx], Y[idx])
    return _pack(grads) * scale, float(loss) * len(idx), model.metric(out, Y[idx]) * len(idx), new_state


def _first(t):
    return t[0]


_RUNS: dict = {}  # on the root worker, during an allreduce epoch: run -> optimizer state, step, totals, state


def _root_step(run, spec, optimizer, pvec, begin, state, X, Y, idx, noise, scale, step, *remote):
    """One allreduce step on the root worker: its own rows' gradient, plus the other parts' (the reduction), then
    the optimizer (its state kept here, so only parameter vectors travel). Returns the new parameters."""
    if begin is not None:
        _RUNS[run] = {"opt": begin, "step": step, "loss": 0.0, "correct": 0.0, "state": state}
    r = _RUNS.get(run)
    if r is None or r["step"] != step:  # recomputed elsewhere after a failure: the epoch restarts instead
        raise RuntimeError(f"the optimizer state of training run {run} was lost with its worker")
    parts = list(remote)
    if idx is not None:
        own = _grad_part(spec, pvec, r["state"], X, Y, idx, noise, scale)
        r["state"] = own[3]  # BatchNorm statistics follow the root's rows (an approximation with several parts)
        parts.insert(0, own)
    # the optimizer reads the gradient without changing it: a single part needs no copy
    g, loss, correct, _ = parts[0] if len(parts) == 1 else _sum_parts(*parts)
    r["loss"] += loss
    r["correct"] += correct
    pvec = pvec.copy()
    optimizer.update([pvec], [g], r["opt"], step)
    r["step"] = step + 1
    return pvec


def _sum_parts(*parts):
    """Two or more gradient parts summed into a new array (the parts are other tasks' results), with their totals."""
    g = parts[0][0] + parts[1][0]
    for part in parts[2:]:
        g += part[0]
    return g, sum(p[1] for p in parts), sum(p[2] for p in parts), None


def _tree_sum(client, parts, where):
    """Pairwise sums of the non-root parts, each on the first of its pair's workers, until one is left: a
    reduction tree, so no worker receives more than one vector per level (the root receives one in all)."""
    extra = 0
    while len(parts) > 1:
        nxt, nxt_where = [], []
        for k in range(0, len(parts), 2):
            if k + 1 == len(parts):
                nxt.append(parts[k])
            else:
                nxt.append(client.submit(_sum_parts, parts[k], parts[k + 1], workers=[where[k]],
                                         allow_other_workers=True, pure=False))
                extra += 1
            nxt_where.append(where[k])
        parts, where = nxt, nxt_where
    return parts, extra


def _root_end(run, last):
    r = _RUNS.pop(run)
    has_state = any(bool(s) for s in r["state"])
    return r["opt"], r["loss"], r["correct"], r["state"] if has_state else None


def _local_step(spec, optimizer, carry, X, Y, idx, noise, step):
    """One D-PSGD local step on this worker's replica: (params, optimizer state, loss total, correct total)."""
    pvec, opt_state, state, loss_sum, correct = carry
    g, loss, right, new_state = _grad_part(spec, pvec, state, X, Y, idx, noise, 1.0)
    pvec = pvec.copy()
    optimizer.update([pvec], [g], opt_state, step)
    return pvec, opt_state, new_state, loss_sum + loss, correct + right


def _mix(carry, *neighbours):
    pvec = carry[0].copy()
    for p in neighbours:
        pvec += p
    pvec /= 1 + len(neighbours)
    return (pvec,) + tuple(carry[1:])


def _sent_bytes(dask_worker):
    # What this worker fetched from its peers (its outgoing log would also count what the client gathers).
    log = dask_worker.transfer_incoming_log
    total = sum(e["total"] for e in log)
    log.clear()
    return total


# ---- the driver ----------------------------------------------------------------------------------------------
def _row_tiles(X, name):
    from phylanx_py.runtime.tiled import TiledArray

    if not isinstance(X, TiledArray):
        raise TypeError(f"parallel training takes row-tiled {name} (px.tiled.from_array(..., tiles=(k, 1))), got "
                        f"{type(X).__name__}")
    if any(t != 1 for t in X.tiles[1:]):
        raise ValueError(f"parallel training needs {name} tiled by rows only, got tiles={X.tiles}")
    return X


def fit_parallel(model, X, Y, epochs, batch_size, optimizer, validation, seed, verbose, mode, every, history):
    if mode not in ("allreduce", "neighbours"):
        raise ValueError(f"parallel must be 'allreduce' or 'neighbours', got {mode!r}")
    X, Y = _row_tiles(X, "X"), _row_tiles(Y, "Y")
    if X.boundaries[0] != Y.boundaries[0]:
        raise ValueError(f"X and Y must have the same row tiles, got {X.boundaries[0]} and {Y.boundaries[0]}")
    if every < 1:
        raise ValueError(f"every must be at least 1, got {every}")
    X.persist(wait=True)  # the tiles must exist somewhere before the steps can go where they are
    Y.persist(wait=True)
    client = X.client
    rows = X.boundaries[0]
    parts = len(rows) - 1
    xf = [X.futures[(i,) + (0,) * (X.ndim - 1)] for i in range(parts)]
    yf = [Y.futures[(i,) + (0,) * (Y.ndim - 1)] for i in range(parts)]
    flat, structure = flatten(model.params)
    shapes = [np.shape(p) for p in flat]
    # The model travels without its weights: the parameters travel as one vector.
    bare = Sequential(model.layers, model.loss_fn)
    bare.input_shape, bare.output_shape = model.input_shape, model.output_shape
    [spec] = client.scatter([(bare, shapes, structure)], broadcast=True, hash=False)
    run = _allreduce_epoch if mode == "allreduce" else _neighbours_epoch
    ctx = dict(client=client, spec=spec, xf=xf, yf=yf, rows=rows, optimizer=optimizer,
               batch_size=batch_size, every=every, seed=seed, model=model, parts=parts)
    carry = None
    rng = np.random.default_rng(seed + 1)
    step = 0
    for epoch in range(epochs):
        t0 = time.perf_counter()
        for attempt in range(RETRIES + 1):
            rng_state = rng.bit_generator.state
            try:
                ctx["homes"] = _homes(client, X, parts)  # again at each attempt: a dead worker's tiles moved
                client.run(_sent_bytes, on_error="ignore")
                result = run(ctx, carry, rng, step, epoch)
                break
            except Exception as e:  # a lost worker or its data: restart the epoch from its checkpoint
                if not _is_cluster_failure(e) or client.status != "running":
                    raise  # (a lost scheduler: a restart cannot help; Sequential.fit makes it a ClusterError)
                if attempt == RETRIES:
                    from phylanx_py.errors import ClusterError

                    raise ClusterError(f"training lost workers or their data in {RETRIES + 1} attempts at epoch "
                                       f"{epoch + 1}; the last failure: {type(e).__name__}: {e}") from e
                rng.bit_generator.state = rng_state
        carry, step, pvec, stats = result
        history.setdefault("restarts", []).append(attempt)
        model.params = _unpack(pvec, shapes, structure)
        if stats.get("state") is not None:
            model.state = stats["state"]
        # a worker that died meanwhile cannot say what it fetched: the figure then undercounts (it is a profile)
        sent = sum(client.run(_sent_bytes, on_error="ignore").values())
        n_steps = max(stats["steps"], 1)
        extra = {"bytes_per_step": sent / n_steps, "min_bytes_per_step": stats["min_bytes"] / n_steps,
                 "tasks_per_step": stats["tasks"] / n_steps}
        if "consensus" in stats:
            extra["consensus"] = stats["consensus"]
        model._end_epoch(history, epoch, epochs, stats["loss"] / stats["n"], stats["correct"] / stats["n"],
                         validation, t0, verbose, extra)
    return history


def _homes(client, X, parts):
    """The worker of each row tile: where it is now, or (lost with a worker) a live worker to recompute it on."""
    alive = sorted(client.scheduler_info()["workers"])
    if not alive:
        from phylanx_py.errors import ClusterError

        raise ClusterError("no Dask workers are left to train on")
    where = X.placement
    out = []
    for i in range(parts):
        w = where.get((i,) + (0,) * (X.ndim - 1))
        out.append(w if w in alive else alive[i % len(alive)])
    return out


def _await(client, steps, last):
    """Wait for ``last`` (the epoch's final futures), watching the steps finish: no step done for STALL_SECONDS is
    a ClusterError naming the step it stopped at (the epoch's tasks are cancelled), never an endless wait."""
    from distributed import wait

    from phylanx_py.errors import ClusterError

    done, since = -1, time.monotonic()
    while True:
        try:
            wait(last, timeout=min(1.0, STALL_SECONDS))
            return client.gather(last)
        except TimeoutError:
            pass
        n = sum(f.done() for f in steps)
        if n != done:
            done, since = n, time.monotonic()
        elif time.monotonic() - since > STALL_SECONDS:
            client.cancel(list(steps) + list(last))
            raise ClusterError(f"training stalled: no step finished for {STALL_SECONDS:.0f} s (step {n + 1} of "
                               f"{len(steps)} of the epoch never completed); the cluster is not making progress "
                               "(PHYLANX_STALL_SECONDS sets the limit)")


def _is_cluster_failure(e) -> bool:
    from concurrent.futures import CancelledError  # FutureCancelledError and the plural FuturesCancelledError

    from distributed.scheduler import KilledWorker

    if isinstance(e, KeyError) and "://" in str(e):  # the scheduler no longer knows a worker we just picked
        return True
    return isinstance(e, (KilledWorker, CancelledError, OSError, TimeoutError)) or "lost" in str(e).lower()


def _split(idx, rows):
    """The global batch ``idx`` as local row numbers per tile (tiles are row ranges ``rows[i]:rows[i+1]``)."""
    out = []
    for i in range(len(rows) - 1):
        lo, hi = rows[i], rows[i + 1]
        mine = idx[(idx >= lo) & (idx < hi)]
        out.append((mine - lo, (idx >= lo) & (idx < hi)))
    return out


def _allreduce_epoch(ctx, carry, rng, step, epoch):
    client, spec, homes, model = ctx["client"], ctx["spec"], ctx["homes"], ctx["model"]
    opt = ctx["optimizer"]
    root = homes[0]
    if carry is None:
        flat, _ = flatten(model.params)
        carry = (np.concatenate([np.ravel(p) for p in flat]), None)
    pvec0, opt_state = carry
    if opt_state is None:
        opt_state = opt.init([pvec0])
    n = ctx["rows"][-1]
    bs = ctx["batch_size"]
    run = f"{uuid.uuid4().hex}-{epoch}"
    # The epoch's checkpoint on the cluster: the parameters where every part can read them, the optimizer state
    # on the root only (it never travels during the epoch).
    [p] = client.scatter([pvec0], broadcast=True, hash=False)
    [begin] = client.scatter([opt_state], workers=[root], hash=False)
    state = model.state
    order = rng.permutation(n)
    chain = []
    tasks, steps, min_bytes = 0, 0, 0
    size = int(np.asarray(pvec0).nbytes)
    for s in range(0, n, bs):
        idx = order[s:s + bs]
        noise = model.noise(rng, len(idx))
        remote, where, own = [], [], (None, None, None)
        for i, (local, mask) in enumerate(_split(idx, ctx["rows"])):
            if len(local) == 0:
                continue
            nz = {k: v[mask] for k, v in noise.items()}
            if i == 0:
                own = (local, nz, len(local) / len(idx))
                continue
            remote.append(client.submit(_grad_part, spec, p, state, ctx["xf"][i], ctx["yf"][i], local, nz,
                                        len(local) / len(idx), workers=[homes[i]], allow_other_workers=True,
                                        pure=False))
            where.append(homes[i])
            if homes[i] != root:
                min_bytes += 2 * size  # its gradient in, the new parameters out
        tasks += len(remote)
        remote, extra = _tree_sum(client, remote, where)
        p = client.submit(_root_step, run, spec, opt, p, begin, state, ctx["xf"][0], ctx["yf"][0], *own, step,
                          *remote, workers=[root], allow_other_workers=True, pure=False)
        chain.append(p)
        tasks += extra
        begin = None
        tasks += 1
        steps += 1
        step += 1
    fin = client.submit(_root_end, run, p, workers=[root], allow_other_workers=True, pure=False)
    pvec, (opt_state, loss_sum, correct, new_state) = _await(client, chain, [p, fin])
    return ((pvec, opt_state), step, pvec,
            {"loss": loss_sum, "correct": correct, "n": n, "steps": steps, "tasks": tasks + 1,
             "min_bytes": min_bytes, "state": new_state if new_state is not None else model.state})


def _neighbours_epoch(ctx, carry, rng, step, epoch):
    client, spec, homes, model, opt = ctx["client"], ctx["spec"], ctx["homes"], ctx["model"], ctx["optimizer"]
    rows, parts = ctx["rows"], ctx["parts"]
    sizes = [rows[i + 1] - rows[i] for i in range(parts)]
    if carry is None:
        flat, _ = flatten(model.params)
        pvec0 = np.concatenate([np.ravel(p) for p in flat])
        carry = [(pvec0, opt.init([pvec0]), model.state) for _ in range(parts)]
    # Each replica starts where its rows are (lost with its worker, the epoch restarts from the driver's copy).
    cur = [client.scatter([(pv, os_, st, 0.0, 0.0)], workers=[homes[i]], hash=False)[0]
           for i, (pv, os_, st) in enumerate(carry)]
    b = max(1, ctx["batch_size"] // parts)
    steps = -(-max(sizes) // b)
    orders = [rng.permutation(sizes[i]) for i in range(parts)]
    size = int(carry[0][0].nbytes)
    chain = []
    tasks, min_bytes, seen = 0, 0, 0
    for s in range(steps):
        for i in range(parts):
            at = (s * b) % sizes[i]
            idx = orders[i][at:at + b]
            noise = model.noise(rng, len(idx))
            seen += len(idx)
            cur[i] = client.submit(_local_step, spec, opt, cur[i], ctx["xf"][i], ctx["yf"][i], idx, noise, step,
                                   workers=[homes[i]], allow_other_workers=True, pure=False)
            chain.append(cur[i])
        tasks += parts
        step += 1
        if (s + 1) % ctx["every"] == 0 and parts > 1:
            ps = [client.submit(_first, c, workers=[homes[i]], allow_other_workers=True, pure=False)
                  for i, c in enumerate(cur)]
            new = []
            for i in range(parts):
                nb = sorted({(i - 1) % parts, (i + 1) % parts} - {i})
                new.append(client.submit(_mix, cur[i], *[ps[j] for j in nb], workers=[homes[i]],
                                         allow_other_workers=True, pure=False))
                min_bytes += size * sum(1 for j in nb if homes[j] != homes[i])
            cur = new
            tasks += 2 * parts
    results = _await(client, chain, cur)
    vecs = np.stack([r[0] for r in results])
    mean = vecs.mean(axis=0)
    consensus = float(np.sqrt(np.mean(np.sum((vecs - mean) ** 2, axis=1))))
    new_carry = [(r[0], r[1], r[2]) for r in results]
    return (new_carry, step, mean,
            {"loss": sum(r[3] for r in results), "correct": sum(r[4] for r in results), "n": seen, "steps": steps,
             "tasks": tasks, "min_bytes": min_bytes,
             "consensus": consensus, "state": results[0][2]})
