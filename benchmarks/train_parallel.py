"""Benchmark: data-parallel training segments on Dask (phylanx_py.runtime.training) -- scaling and the ring.

    python benchmarks/train_parallel.py                 # simplemlp and the digits CNN, 1 and 2 workers
    python benchmarks/train_parallel.py --quick         # fewer samples and epochs

Everything runs on one LocalCluster of two single-threaded worker processes started here (with the runtime's malloc
thresholds); a one-worker row uses one row tile (on one of the two workers). Rows:

- ring latency: an allreduce of the simplemlp gradient (932,362 float32, 3.7 MB) between the two workers: the
  runtime's shared-memory path (what ranks on one machine use), the runtime's TCP ring (``distributed.comm``: what
  ranks on different machines use), a raw-socket ring written here (the same two exchanges of half the vector),
  and the copy floor (NumPy copying the bytes a rank must send and receive, plus the half it adds), medians.
- weak scaling: per-worker batch 64 and 256 (global 64n), exact allreduce every step; efficiency
  X(2) / (2 X(1)); ``ideal`` is the same processes and batches with no communication (mode "compute").
- strong scaling: global batch 64 on 2 workers, allreduce every step and neighbour averaging every 8 steps,
  against the compute-only ideal at the same global batch.
- one process: ``Sequential.fit`` without Dask, BLAS capped to one thread (what one worker has).
Epochs run as fit runs them without validation: one span over all of them (runtime/training/span.py); one row
runs a segment per epoch instead (the checkpoint through the client after each), and its efficiency column is the
span's samples/s over its own, in the same round (per-epoch segments are each submitted while the last one runs,
as fit runs them with validation). Samples/s come from the mean time of the epochs after the first (the first
traces the gradient tree on each worker). Every configuration runs
``--rounds`` times (3), round after round: the table gives medians, and each efficiency is the median of the ratio
taken within each round (this machine's speed drifts by tens of percent within minutes). The digits
CNN's rows at a global batch above 64 train for proportionally more epochs (the same number of optimizer steps as
at global batch 64) with the learning rate scaled by the square root of the batch's growth, as one does when
scaling the batch, before their test accuracy is taken (the compute-only rows have none: their ranks never combine).
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "PHYLANX_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402

import numpy as np  # noqa: E402
from _common import close_runtime, dask_runtime, print_table  # noqa: E402
from phylanx_py.runtime.dask_connect import live_workers  # noqa: E402
from phylanx_py.runtime.segments import ports as ring_ports  # noqa: E402
from phylanx_py.runtime.segments import ring  # noqa: E402
from phylanx_py.runtime.training import SegmentTrainer  # noqa: E402

import phylanx_py as px  # noqa: E402
from phylanx_py import nn  # noqa: E402
from phylanx_py.nn.parallel import ModelProblem, pack  # noqa: E402

SIZES = (784, 512, 512, 512, 10)


def simplemlp():
    layers = []
    for a, b in zip(SIZES[:-1], SIZES[1:]):
        layers += [nn.Dense(a, b, dtype=np.float32), nn.ReLU()]
    return nn.Sequential(layers[:-1])


def cnn():
    return nn.Sequential([nn.Conv2D(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2D(16, 16, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2D(2), nn.Flatten(), nn.Dense(16 * 4 * 4, 10)])


def simplemlp_data(n):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, SIZES[0]))
    y = np.argmax(X @ rng.standard_normal((SIZES[0], SIZES[-1])), axis=1)
    return X.astype(np.float32), y


def digits_data():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    Xtr, Xte, ytr, yte = train_test_split(d.data / 16.0, d.target, test_size=360, random_state=0)
    return Xtr.reshape(-1, 1, 8, 8), ytr, Xte.reshape(-1, 1, 8, 8), yte


# ---- the ring against a raw socket and a copy --------------------------------------------------------------
def _raw_ring(name, rank, buf, repeats):
    """Rank ``rank`` of 2: the ring allreduce's two exchanges of half the vector over a plain TCP socket pair."""
    from distributed import Variable, get_client, secede

    secede()
    client = get_client()
    if rank == 0:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        Variable(name, client=client).set(srv.getsockname()[1])
        sock, _ = srv.accept()
        srv.close()
    else:
        sock = socket.create_connection(("127.0.0.1", Variable(name, client=client).get(timeout=60)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    h = buf.size // 2
    mine, theirs = (buf[:h], buf[h:]) if rank == 0 else (buf[h:], buf[:h])
    tmp = np.empty_like(theirs)

    def exchange(out, into):
        t = threading.Thread(target=sock.sendall, args=(memoryview(out).cast("B"),))
        t.start()
        view, got = memoryview(into).cast("B"), 0
        while got < view.nbytes:
            got += sock.recv_into(view[got:])
        t.join()

    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        exchange(theirs, tmp)  # reduce-scatter: send their half, receive mine, add
        mine += tmp
        exchange(mine, theirs)  # all-gather
        times.append(time.perf_counter() - t0)
    sock.close()
    return times


def _shared_reduce(name, rank, size, ports, buf, repeats):
    """As a training step sums its gradient: computed into the group's scratch slot (here: filled from ``buf``,
    not timed), summed with ``reduce`` and read where the sum lies. The seconds of each round."""
    from distributed import secede

    secede()
    g = ring.Group(name, rank, size, timeout=120.0).join(ports)
    times = []
    try:
        for _ in range(repeats):
            into = g.scratch(buf)
            into[...] = buf
            t0 = time.perf_counter()
            g.reduce(into)
            times.append(time.perf_counter() - t0)
    finally:
        g.close()
    return times


def ring_latency(cluster, n_params, repeats):
    client = cluster.client  # (the benchmark's own tasks; the ring's ports are asked through the executor)
    workers = sorted(live_workers(client))[:2]
    buf = np.ones(n_params, np.float32)
    out = {}
    ports = ring_ports.port_addresses(cluster, workers)
    name = f"bench-shm-{uuid.uuid4().hex[:8]}"
    futs = [client.submit(_shared_reduce, name, r, 2, ports, buf, repeats, workers=[w], pure=False)
            for r, w in enumerate(workers)]
    out["shared memory (runtime, as training uses it: ranks on one machine)"] = \
        statistics.median(client.gather(futs)[0][2:])
    for shared, label in ((True, "shared memory, copied in and out (allreduce of any array)"),
                          (False, "ring over distributed.comm (runtime: ranks on other machines)")):
        name = f"bench-ring-{uuid.uuid4().hex[:8]}"
        futs = [client.submit(ring.allreduce_task, name, r, 2, ports, buf, repeats, shared, workers=[w], pure=False)
                for r, w in enumerate(workers)]
        res = client.gather(futs)
        out[label] = statistics.median(res[0][1][2:])
    name = f"bench-raw-{uuid.uuid4().hex[:8]}"
    futs = [client.submit(_raw_ring, name, r, buf, repeats, workers=[w], pure=False) for r, w in enumerate(workers)]
    out["ring over a raw TCP socket"] = statistics.median(client.gather(futs)[0][2:])
    a, b = np.ones(n_params, np.float32), np.ones(n_params, np.float32)
    h = n_params // 2
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(b, a)  # the bytes sent and received once each (2 x half)
        a[:h] += b[:h]  # the half a rank adds
        times.append(time.perf_counter() - t0)
    out["copy floor (NumPy, this process)"] = statistics.median(times[2:])
    return out, buf.nbytes


# ---- training ----------------------------------------------------------------------------------------------
def run(client, make, X, Y, workers, batch, mode, every, epochs, lr_scale=1.0, span=True):
    """Samples/s of ``epochs`` segment epochs (the best after the first) and the last epoch's figures. ``span``: the
    epochs as one span, as fit runs them without validation (else a segment per epoch, the checkpoint handed back
    to the client after each)."""
    tiles = px.tiled.from_array(X, tiles=(workers,) + (1,) * (X.ndim - 1))
    ytiles = px.tiled.from_array(Y, tiles=(workers,))
    tiles.persist(wait=True)
    ytiles.persist(wait=True)
    model = make()
    model.build(X.shape[1:], 0)
    problem = ModelProblem(model)
    rows = tiles.boundaries[0]
    xf = [tiles.futures[(i,) + (0,) * (X.ndim - 1)] for i in range(workers)]
    yf = [ytiles.futures[(i,)] for i in range(workers)]
    tr = SegmentTrainer(tiles._executor, xf, yf, [rows[i + 1] - rows[i] for i in range(workers)], problem,
                        nn.SGD((0.01 if make is simplemlp else 0.1) * lr_scale, momentum=0.9), mode=mode, every=every,
                        batch=batch, seed=0)
    carry = tr.start(pack(model.params), model.state)
    tr.horizon = epochs  # as fit does: each next epoch's segment is submitted while the last one runs
    tr.span = span and mode != "neighbours"  # as fit does
    times = []
    for e in range(epochs):
        t0 = time.perf_counter()
        carry, stats = tr.epoch(e, carry)
        times.append(time.perf_counter() - t0)
    tr.close()
    samples = stats["steps"] * tr.batch * workers
    best = statistics.mean(times[1:])  # epochs overlap their neighbours' ends: their mean, not the fastest
    pvec = carry[0] if mode != "neighbours" else np.mean([c[0] for c in carry], axis=0).astype(carry[0][0].dtype)
    model.params = problem.unpack(pvec.copy())
    return {"samples_per_s": samples / best, "comm_ms": 1e3 * stats["comm_s"] / len(tr.ranks) / stats["steps"],
            "bytes": stats["sent"] / stats["steps"], "min_bytes": (2 * (workers - 1) * pvec.nbytes if mode ==
                                                                   "allreduce" else 0), "model": model,
            "loss": stats["loss"] / stats["rows"]}


def one_process(make, X, Y, batch, epochs):
    from threadpoolctl import threadpool_limits

    m = make()
    with threadpool_limits(1), px.using(px.runtime.synchronous()):
        h = m.fit(X, Y, epochs=epochs, batch_size=batch, optimizer=nn.SGD(0.01 if make is simplemlp else 0.1,
                                                                         momentum=0.9), verbose=False)
    return len(X) / statistics.mean(h["time"][1:]), m


def bench_model(client, name, make, X, Y, epochs, test=None, rounds=3):
    """Every configuration ``rounds`` times, round after round (so a slow spell of this noisy machine hits every
    configuration alike); samples/s are medians over the rounds, and each efficiency is the median of that ratio
    taken within each round (pairs measured minutes apart would compare the machine's moods)."""
    rows, accs = [], []
    runs: dict = {}

    def configs():
        yield "one", lambda: one_process(make, X, Y, 64, epochs)
        for b in (64, 256):
            # with test data (accuracy is reported), a larger global batch trains for more epochs: as many
            # optimizer steps as at global batch 64, as one would when scaling the batch (samples/s does not
            # depend on it) and a learning rate scaled by the square root of its growth (0.1 at 64, 0.2 at 256)
            ep1, ep2 = (epochs * b // 64, epochs * 2 * b // 64) if test is not None else (epochs, epochs)
            lr1, lr2 = ((b / 64) ** 0.5, (2 * b / 64) ** 0.5) if test is not None else (1.0, 1.0)
            yield ("1w", b), lambda b=b, ep1=ep1, lr1=lr1: run(client, make, X, Y, 1, b, "allreduce", 1, ep1, lr1)
            yield ("2w", b), lambda b=b, ep2=ep2, lr2=lr2: run(client, make, X, Y, 2, 2 * b, "allreduce", 1, ep2,
                                                               lr2)
            yield ("ideal", b), lambda b=b, ep2=ep2, lr2=lr2: run(client, make, X, Y, 2, 2 * b, "compute", 1, ep2,
                                                                  lr2)
            if b == 64:  # what spans save: a segment per epoch, the checkpoint through the client each time
                yield ("2w epochs", b), lambda ep2=ep2, lr2=lr2: run(client, make, X, Y, 2, 128, "allreduce", 1, ep2,
                                                                     lr2, span=False)
        yield "strong ideal", lambda: run(client, make, X, Y, 2, 64, "compute", 1, epochs)
        yield "strong allreduce", lambda: run(client, make, X, Y, 2, 64, "allreduce", 1, epochs)
        yield "strong averaging", lambda: run(client, make, X, Y, 2, 64, "neighbours", 8, epochs)

    for _ in range(rounds):
        for key, fn in configs():
            runs.setdefault(key, []).append(fn())
    med = statistics.median

    def sps(key, i=None):
        r = runs[key] if i is None else [runs[key][i]]
        return med([x[0] if key == "one" else x["samples_per_s"] for x in r])

    def ratio(num, den, k=1.0):
        return med([sps(num, i) / (k * sps(den, i)) for i in range(rounds)])

    def add(label, key, ref=None, ideal=None):
        r = runs[key][-1]
        comm = med([x["comm_ms"] for x in runs[key]])
        rows.append([f"{name}: {label}", f"{sps(key):,.0f}", f"{ref:.2f}" if ref is not None else "",
                     f"{ideal:.2f}" if ideal is not None else "", f"{comm:.2f}",
                     f"{r['bytes'] / 1e6:.2f} / {r['min_bytes'] / 1e6:.2f}", f"{r['loss']:.4f}"])
        if test is not None and "compute only" not in label:  # no training mode: ranks never combine
            accs.append((label, r["model"].evaluate(*test)["accuracy"]))

    rows.append([f"{name}: one process, no Dask, batch 64, 1 BLAS thread", f"{sps('one'):,.0f}", "", "", "", "",
                 ""])
    if test is not None:
        accs.append(("one process", runs["one"][-1][1].evaluate(*test)["accuracy"]))
    for b in (64, 256):
        add(f"1 worker, batch {b}", ("1w", b), ratio(("1w", b), "one") if b == 64 else None)
        add(f"2 workers x batch {b} (weak), allreduce", ("2w", b), ratio(("2w", b), ("1w", b), 2.0),
            ratio(("2w", b), ("ideal", b)))
        add(f"2 workers x batch {b}, compute only (ideal)", ("ideal", b), ratio(("ideal", b), ("1w", b), 2.0))
        if b == 64:
            add("2 workers x batch 64, a segment per epoch (efficiency: span / this)", ("2w epochs", b),
                ratio(("2w", b), ("2w epochs", b)))
    add("2 workers, global batch 64 (strong), allreduce every step", "strong allreduce", None,
        ratio("strong allreduce", "strong ideal"))
    add("2 workers, global batch 64 (strong), averaging every 8", "strong averaging", None,
        ratio("strong averaging", "strong ideal"))
    add("2 workers, global batch 64, compute only (ideal)", "strong ideal")
    return rows, accs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--samples", type=int, default=None)
    ap.add_argument("--only", nargs="+", default=["ring", "simplemlp", "cnn"])
    ap.add_argument("--rounds", type=int, default=None, help="rounds of every configuration (default 3; 1 with "
                    "--quick): medians over them")
    args = ap.parse_args(argv)
    epochs = args.epochs or (2 if args.quick else 3)
    # 16,384 samples: at per-worker batch 256 an epoch (a segment) on two workers is 32 steps; with 4,096 it was 8,
    # and the segment's start (the ranks' tasks start milliseconds apart: the first sum waits for the later one)
    # and the checkpoint's trip to the client were a fifth of the epoch
    samples = args.samples or (2048 if args.quick else 16384)
    rounds = args.rounds or (1 if args.quick else 3)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rt = dask_runtime(2)
    client = rt.executor.client
    try:
        with px.using(rt):
            if "ring" in args.only:
                lat, nbytes = ring_latency(rt.executor, 932_362, 12 if args.quick else 40)
                floor = lat["copy floor (NumPy, this process)"]
                print_table(["allreduce of 3.7 MB float32, 2 worker processes", "ms (median)", "x copy floor"],
                            [[k, f"{v * 1e3:.2f}", f"{v / floor:.1f}"] for k, v in lat.items()])
                print()
            headers = ["run", "samples/s", "efficiency (weak: X(2)/2X(1); 1 worker: vs one process)",
                       "vs compute-only ideal", "comm ms/step", "MB sent / min per step", "last loss"]
            all_rows, all_accs = [], []
            if "simplemlp" in args.only:
                X, Y = simplemlp_data(samples)
                r, _ = bench_model(client, "simplemlp", simplemlp, X, Y, epochs, rounds=rounds)
                all_rows += r
            if "cnn" in args.only:
                Xtr, ytr, Xte, yte = digits_data()
                r, accs = bench_model(client, "digits CNN", cnn, Xtr, ytr, max(epochs, 10 if args.quick else 20),
                                      (Xte, yte), rounds=rounds)
                all_rows += r
                all_accs += accs
            print_table(headers, all_rows)
            for label, acc in all_accs:
                print(f"digits CNN test accuracy, {label}: {acc:.4f}")
    finally:
        close_runtime(rt)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
