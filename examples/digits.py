"""Train on scikit-learn's bundled 8x8 digits (no download): an MLP 64-128-10 and a small CNN in this process, and
the MLP data-parallel on two Dask workers with an allreduce of gradients and with neighbour averaging (D-PSGD).

    pip install -e ".[examples]"      # scikit-learn
    python examples/digits.py         # all four runs (starts a local 2-worker cluster for the parallel ones)
    python examples/digits.py --only mlp cnn --epochs 10
    phylanx-py run --local-cluster 2 examples/digits.py    # the parallel runs on the cluster run gives it

Split: 1437 training / 360 test images, seed 0 (``train_test_split(..., test_size=360, random_state=0)``).
"""
from __future__ import annotations

import argparse
import os
import time

import phylanx_py as px
from phylanx_py import nn


def load():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    X = d.data / 16.0
    return train_test_split(X, d.target, test_size=360, random_state=0)


def mlp():
    return nn.Sequential([nn.Dense(64, 128), nn.ReLU(), nn.Dense(128, 10)])


def cnn():
    return nn.Sequential([nn.Conv2D(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2D(16, 16, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2D(2), nn.Flatten(), nn.Dense(16 * 4 * 4, 10)])


def human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def describe(extra: dict) -> list[str]:
    """The parallel runs' figures, rounded and with units."""
    out = []
    if "bytes/step" in extra:
        moved, least = extra["bytes/step"], extra["min bytes/step"]
        out.append(f"moved between the workers: {human_bytes(moved)} per step (last epoch's average); the "
                   f"scheme's minimum: {human_bytes(least)} per step")
        if moved < least:
            out.append("  (a little under the minimum: an epoch's first step gets the parameters from the client, "
                       "not from the other worker)")
        out.append(f"tasks: {extra['tasks/step']:.1f} per step")
    if "consensus" in extra:
        out.append(f"consensus (distance between the replicas): {extra['consensus']:.2e}")
    if "val_accuracy per epoch" in extra:
        out.append("test accuracy per epoch: " + " ".join(f"{x:.3f}" for x in extra["val_accuracy per epoch"]))
    return out


def heading(text: str, verbose: bool):
    if verbose:
        print(f"\n== {text}", flush=True)


def run_local(name, model, Xtr, Ytr, Xte, Yte, epochs, verbose):
    heading(f"{name}, in this process", verbose)
    t0 = time.perf_counter()
    model.fit(Xtr, Ytr, epochs=epochs, batch_size=32, optimizer=nn.SGD(lr=0.1, momentum=0.9),
              validation=(Xte, Yte), seed=0, verbose=verbose)
    return name, model.evaluate(Xte, Yte)["accuracy"], time.perf_counter() - t0, None


def run_parallel(modes, Xtr, Ytr, Xte, Yte, epochs, every, verbose, address=None):
    """The MLP on two workers: a cluster at ``address``; else the runtime the script runs on when that is a Dask
    one (``phylanx-py run --local-cluster 2`` or ``--scheduler`` gives one); else a LocalCluster of two
    single-threaded processes started here."""
    cluster = rt = None
    given = px.runtime.current()
    if address is None and getattr(given, "client", None) is not None:
        rt = given  # the caller's: used, not closed
    elif address is None:
        from distributed import LocalCluster

        os.environ.setdefault("OMP_NUM_THREADS", "1")  # workers inherit it: they must not fight over the cores
        # loopback only, and a free port for the dashboard (8787 may be taken: Dask would warn)
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address="127.0.0.1:0")
        address = cluster.scheduler_address
    owned = rt is None
    if owned:
        rt = px.runtime.dask(address)
    out = []
    try:
        with px.using(rt):
            Xt, Yt = px.tiled.from_array(Xtr, tiles=(2, 1)), px.tiled.from_array(Ytr, tiles=(2,))
            workers = min(2, len(rt.client.nthreads()))
            for mode in modes:
                heading(f"MLP 64-128-10, parallel={mode!r}, on {workers} worker{'s' if workers != 1 else ''}",
                        verbose)
                model = mlp()
                t0 = time.perf_counter()
                h = model.fit(Xt, Yt, epochs=epochs, batch_size=32, optimizer=nn.SGD(lr=0.1, momentum=0.9),
                              validation=(Xte, Yte), seed=0, parallel=mode, every=every, verbose=verbose)
                extra = {"bytes/step": h["bytes_per_step"][-1], "min bytes/step": h["min_bytes_per_step"][-1],
                         "tasks/step": h["tasks_per_step"][-1], "val_accuracy per epoch": h["val_accuracy"]}
                if "consensus" in h:
                    extra["consensus"] = h["consensus"][-1]
                out.append((f"MLP, parallel={mode!r}", model.evaluate(Xte, Yte)["accuracy"],
                            time.perf_counter() - t0, extra))
    finally:
        if owned:
            rt.close()
        if cluster is not None:
            cluster.close()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", default=["mlp", "cnn", "allreduce", "neighbours"],
                    choices=["mlp", "cnn", "allreduce", "neighbours"], metavar="RUN",
                    help="which runs: mlp, cnn (this process), allreduce, neighbours (two workers); default all")
    ap.add_argument("--epochs", type=int, default=30, help="epochs per run (default 30)")
    ap.add_argument("--every", type=int, default=4, help="neighbours: steps between neighbour averages (default 4)")
    ap.add_argument("--scheduler", default=None, metavar="ADDR",
                    help="a running Dask scheduler for the parallel runs (default: start two local workers)")
    ap.add_argument("--quiet", action="store_true", help="no per-epoch lines, only the summary")
    args = ap.parse_args(argv)
    Xtr, Xte, Ytr, Yte = load()
    verbose = not args.quiet
    rows = []
    if "mlp" in args.only:
        rows.append(run_local("MLP 64-128-10", mlp(), Xtr, Ytr, Xte, Yte, args.epochs, verbose))
    if "cnn" in args.only:
        img = (-1, 1, 8, 8)
        rows.append(run_local("CNN conv3x3(16)-conv3x3(16)-maxpool-dense", cnn(), Xtr.reshape(img), Ytr,
                              Xte.reshape(img), Yte, args.epochs, verbose))
    modes = [m for m in ("allreduce", "neighbours") if m in args.only]
    if modes:
        rows += run_parallel(modes, Xtr, Ytr, Xte, Yte, args.epochs, args.every, verbose, args.scheduler)
    print(f"\n{'model':<45} {'test accuracy':>13} {'time':>8}")
    for name, acc, secs, extra in rows:
        print(f"{name:<45} {acc:>13.3f} {secs:>6.1f} s")
        for line in describe(extra or {}):
            print(f"    {line}")
    return rows


if __name__ == "__main__":
    main()
