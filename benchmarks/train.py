"""Benchmark: training PyDTNN's "simplemlp" with px.value_and_grad, against hand-written NumPy and PyTorch (CPU).

    python benchmarks/train.py                         # float32, 50 timed steps, best of 3, 2 threads
    python benchmarks/train.py --steps 30 --dtype float64
    python benchmarks/train.py --quick                 # a smoke run: 2,048 samples, 10 steps, best of 2

The network is PyDTNN's "simplemlp": 784-512-512-512-10, ReLU, softmax cross-entropy, plain SGD (lr 0.01, no
momentum), batch 64. The data are synthetic and learnable: X standard normal (8,192 x 784), label = argmax of
X @ a fixed random (784, 10) teacher (seed 0). Every implementation starts from the same weights (NumPy init as
torch.nn.Linear's: uniform +-1/sqrt(fan_in), weights and biases) and sees the same batches in the same order, so
their losses must stay close.

Implementations (one row each):

- phylanx-py: ``px.value_and_grad(loss)`` of the plain NumPy loss below (traced on the first call, the tree then
  reused), on a local runtime of ``--threads`` threads and on the synchronous runtime; the SGD update in NumPy
  (``p -= lr * g`` in place per array).
- numpy: the same forward and a hand-written backward (``numpy_loss_and_grads``), the same update.
- pytorch: ``torch.nn.Linear``/``ReLU`` layers with the NumPy weights copied in, ``F.cross_entropy``,
  ``torch.optim.SGD``; ``torch.set_num_threads(--threads)``. Skipped (with a line saying so) if torch is missing.

Threads: ``--threads`` (default 2) caps OMP/OPENBLAS/MKL/NUMBA/PHYLANX_NUM_THREADS in the environment before NumPy
is imported (and BLAS through threadpoolctl, if installed, when ``main`` is called from elsewhere), and is the
thread count of PyTorch and of the phylanx local runtime.

Timing: ``--warmup`` untimed steps (the first phylanx call traces and compiles; reported apart), then ``--repeats``
runs of ``--steps`` steps (forward + backward + update), each from a fresh copy of the initial weights; the best
run counts. The table gives samples/s, ms/step, time relative to PyTorch and to NumPy (lower is faster) and the
loss of the last step. Before timing, a check run of ``--check-steps`` steps must give phylanx and NumPy losses
that agree (1e-3 relative in float32, 1e-9 in float64), or the script exits with status 1.
"""
from __future__ import annotations

import os
import sys

DEFAULT_THREADS = 2
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
               "PHYLANX_NUM_THREADS")


def threads_from_argv(argv) -> int:
    """The ``--threads`` value in ``argv`` (read before argparse runs, because it must be in force before NumPy
    is imported)."""
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return DEFAULT_THREADS


def cap_threads(n: int) -> None:
    """Set the thread caps of BLAS, OpenMP, Numba and phylanx-py's kernels to ``n`` (effective for libraries
    not yet imported)."""
    for v in THREAD_VARS:
        os.environ[v] = str(n)


if __name__ == "__main__":
    cap_threads(threads_from_argv(sys.argv[1:]))

import argparse  # noqa: E402
import contextlib  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from _common import print_table, threadpool_summary  # noqa: E402

import phylanx_py as px  # noqa: E402
from phylanx_py import nn  # noqa: E402

SIZES = (784, 512, 512, 512, 10)  # PyDTNN simplemlp
N_LAYERS = len(SIZES) - 1


# ---- data and weights --------------------------------------------------------------------------------------
def make_data(n_samples: int = 8192, dtype=np.float32, seed: int = 0):
    """(X, labels): X standard normal (n_samples, 784); labels = argmax of X @ a fixed random (784, 10) teacher."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_samples, SIZES[0]))
    teacher = rng.standard_normal((SIZES[0], SIZES[-1]))
    labels = np.argmax(X @ teacher, axis=1).astype(np.int64)
    return X.astype(dtype), labels


def make_batches(X, labels, batch: int):
    """The data cut into consecutive contiguous batches (the data are random, so no shuffling); step s uses batch
    s mod len(batches) in every implementation."""
    n = X.shape[0] // batch
    return [(np.ascontiguousarray(X[i * batch:(i + 1) * batch]), labels[i * batch:(i + 1) * batch].copy())
            for i in range(n)]


def init_params(dtype=np.float32, seed: int = 1) -> dict:
    """{"W0": (784, 512), "b0": (512,), ...}: uniform +-1/sqrt(fan_in) as torch.nn.Linear's default. W is
    (in, out), so a layer is ``h @ W + b`` (torch's weight is W.T)."""
    rng = np.random.default_rng(seed)
    params = {}
    for i, (fan_in, fan_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        bound = 1.0 / np.sqrt(fan_in)
        params[f"W{i}"] = rng.uniform(-bound, bound, (fan_in, fan_out)).astype(dtype)
        params[f"b{i}"] = rng.uniform(-bound, bound, fan_out).astype(dtype)
    return params


def copy_params(params: dict) -> dict:
    return {k: v.copy() for k, v in params.items()}


def sgd_update(params: dict, grads: dict, lr: float) -> None:
    """Plain SGD, in place (the same update for phylanx-py and NumPy)."""
    for k, p in params.items():
        p -= lr * grads[k]


# ---- the model ---------------------------------------------------------------------------------------------
def loss_fn(params, X, labels):
    """Plain NumPy: the forward pass and the loss. phylanx-py differentiates this very function."""
    h = X
    for i in range(N_LAYERS - 1):
        h = np.maximum(h @ params[f"W{i}"] + params[f"b{i}"], 0.0)
    logits = h @ params[f"W{N_LAYERS - 1}"] + params[f"b{N_LAYERS - 1}"]
    return nn.softmax_cross_entropy(logits, labels)


def numpy_loss_and_grads(params, X, labels):
    """The same forward, with a hand-written backward: (loss, grads) like ``px.value_and_grad(loss_fn)``."""
    acts = [X]
    h = X
    for i in range(N_LAYERS - 1):
        h = np.maximum(h @ params[f"W{i}"] + params[f"b{i}"], 0)
        acts.append(h)
    logits = h @ params[f"W{N_LAYERS - 1}"] + params[f"b{N_LAYERS - 1}"]
    n = X.shape[0]
    rows = np.arange(n)
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    s = e.sum(axis=1, keepdims=True)
    loss = -np.mean(shifted[rows, labels] - np.log(s[:, 0]))
    g = e / s  # softmax; d loss / d logits = (softmax - onehot) / n
    g[rows, labels] -= 1
    g /= n
    grads = {}
    for i in reversed(range(N_LAYERS)):
        a = acts[i]
        grads[f"W{i}"] = a.T @ g
        grads[f"b{i}"] = g.sum(axis=0)
        if i:
            g = (g @ params[f"W{i}"].T) * (a > 0)  # through layer i, then the ReLU that made a
    return loss, grads


# ---- timing ------------------------------------------------------------------------------------------------
def train(step, state, batches, steps: int):
    """``steps`` training steps; the loss of the last one (as the implementation returned it)."""
    loss = None
    for s in range(steps):
        X, labels = batches[s % len(batches)]
        loss = step(state, X, labels)
    return loss


def best_of(step, make_state, batches, steps: int, repeats: int, warmup: int) -> dict:
    """Warm-up steps on a throwaway state (the first step timed apart), then the best of ``repeats`` timed runs
    of ``steps`` steps, each from a fresh state; the final loss is that of the last step of the last run."""
    state = make_state()
    t0 = time.perf_counter()
    train(step, state, batches, 1)
    first = time.perf_counter() - t0
    train(step, state, batches, warmup)
    times = []
    loss = None
    for _ in range(repeats):
        state = make_state()
        t0 = time.perf_counter()
        loss = train(step, state, batches, steps)
        times.append(time.perf_counter() - t0)
    return {"seconds": min(times), "times": times, "first_step": first, "final_loss": float(loss)}


def phylanx_step(lr: float):
    vg = px.value_and_grad(loss_fn)

    def step(params, X, labels):
        loss, grads = vg(params, X, labels)
        sgd_update(params, grads, lr)
        return loss
    step.value_and_grad = vg
    return step


def numpy_step(lr: float):
    def step(params, X, labels):
        loss, grads = numpy_loss_and_grads(params, X, labels)
        sgd_update(params, grads, lr)
        return loss
    return step


def bench_phylanx(params, batches, steps, *, lr, repeats, warmup, runtime) -> dict:
    """``px.value_and_grad(loss_fn)`` on ``runtime`` plus the NumPy update. A fresh value_and_grad, so the first
    step includes tracing and compiling (``first_step``)."""
    step = phylanx_step(lr)
    with px.using(runtime):
        return best_of(step, lambda: copy_params(params), batches, steps, repeats, warmup)


def bench_numpy(params, batches, steps, *, lr, repeats, warmup) -> dict:
    return best_of(numpy_step(lr), lambda: copy_params(params), batches, steps, repeats, warmup)


def import_torch():
    """torch, or None (with a line saying so) if it cannot be imported."""
    try:
        import torch
    except ImportError as e:
        print(f"PyTorch not importable ({e}); skipping the PyTorch row")
        return None
    return torch


def torch_model(torch, params, dtype):
    """A ``torch.nn.Sequential`` of Linear/ReLU layers holding copies of ``params`` (torch's weight is W.T)."""
    layers = []
    for i in range(N_LAYERS):
        W, b = params[f"W{i}"], params[f"b{i}"]
        lin = torch.nn.Linear(W.shape[0], W.shape[1], dtype=dtype)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(W.T)))
            lin.bias.copy_(torch.from_numpy(b))
        layers.append(lin)
        if i < N_LAYERS - 1:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def torch_dtype(torch, params):
    return torch.float64 if params["W0"].dtype == np.float64 else torch.float32


def torch_batches(torch, batches):
    return [(torch.from_numpy(X), torch.from_numpy(labels)) for X, labels in batches]


def torch_step(torch, lr):
    import torch.nn.functional as F

    def make_state(model):
        return model, torch.optim.SGD(model.parameters(), lr=lr, momentum=0.0)

    def step(state, X, labels):
        model, opt = state
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(X), labels)
        loss.backward()
        opt.step()
        return loss.detach()
    return make_state, step


def bench_torch(params, batches, steps, *, lr, repeats, warmup, threads, torch=None) -> dict | None:
    """PyTorch CPU on ``threads`` intra-op threads, or None if torch is not importable."""
    torch = torch or import_torch()
    if torch is None:
        return None
    torch.set_num_threads(threads)
    dtype = torch_dtype(torch, params)
    make, step = torch_step(torch, lr)
    tb = torch_batches(torch, batches)
    out = best_of(step, lambda: make(torch_model(torch, params, dtype)), tb, steps, repeats, warmup)
    out["version"] = torch.__version__
    return out


# ---- the check run -----------------------------------------------------------------------------------------
def check_losses(params, batches, steps: int, *, lr, runtime, rtol, torch=None) -> bool:
    """``steps`` steps of phylanx-py and NumPy from the same weights: print the losses, True if the final ones agree
    to ``rtol``. Also prints the dtypes of the phylanx gradients (they should be the parameters' dtype) and, if
    torch is given, its losses."""
    runs = {}
    p_px, p_np = copy_params(params), copy_params(params)
    step_px, step_np = phylanx_step(lr), numpy_step(lr)
    with px.using(runtime):
        runs["phylanx-py"] = [float(step_px(p_px, *batches[s % len(batches)])) for s in range(steps)]
    runs["numpy"] = [float(step_np(p_np, *batches[s % len(batches)])) for s in range(steps)]
    if torch is not None:
        dtype = torch_dtype(torch, params)
        make, step = torch_step(torch, lr)
        state, tb = make(torch_model(torch, params, dtype)), torch_batches(torch, batches)
        runs["pytorch"] = [float(step(state, *tb[s % len(tb)])) for s in range(steps)]
    shown = sorted({0, 1, steps // 2, steps - 1})
    print(f"check run: {steps} steps from the same weights, losses at steps {shown}:")
    for name, losses in runs.items():
        print(f"  {name:<11} " + "  ".join(f"{losses[s]:.6f}" for s in shown))
    a, b = runs["phylanx-py"][-1], runs["numpy"][-1]
    rel = abs(a - b) / abs(b)
    max_w = max(float(np.max(np.abs(p_px[k] - p_np[k]))) for k in params)
    ok = rel <= rtol
    print(f"  final loss phylanx-py vs numpy: relative difference {rel:.2e} (tolerance {rtol:g}) -> "
          f"{'OK' if ok else 'MISMATCH'}; max |weight difference| {max_w:.2e}")
    if "pytorch" in runs:
        print(f"  final loss pytorch vs numpy: relative difference {abs(runs['pytorch'][-1] - b) / abs(b):.2e}")
    _, grads = step_px.value_and_grad(p_px, *batches[0])
    odd = {k: str(g.dtype) for k, g in grads.items() if g.dtype != params[k].dtype}
    if odd:
        print(f"  note: phylanx-py gradients not in the parameters' dtype ({params['W0'].dtype}): "
              + ", ".join(f"{k} {d}" for k, d in odd.items()))
    else:
        print(f"  phylanx-py gradient dtypes: all {params['W0'].dtype}")
    return ok


# ---- main --------------------------------------------------------------------------------------------------
def bench_parallel(X, labels, *, batch, lr, epochs, dtype) -> list:
    """Sequential.fit of simplemlp on Dask workers (single-threaded processes): one worker with one row tile, then
    two workers with two tiles, parallel="allreduce" and "neighbours". Samples/s from the best epoch after the
    first (the first traces the tree on each worker)."""
    from _common import close_runtime, dask_runtime

    from phylanx_py import nn

    def model():
        layers = []
        for a, b in zip(SIZES[:-1], SIZES[1:]):
            layers += [nn.Dense(a, b, dtype=dtype), nn.ReLU()]
        return nn.Sequential(layers[:-1])

    env = {v: "1" for v in THREAD_VARS}
    rows = []
    for n_workers, mode in ((1, "allreduce"), (2, "allreduce"), (2, "neighbours")):
        rt = dask_runtime(n_workers, env)
        try:
            with px.using(rt):
                Xt = px.tiled.from_array(X, tiles=(n_workers, 1))
                Yt = px.tiled.from_array(labels, tiles=(n_workers,))
                m = model()
                h = m.fit(Xt, Yt, epochs=epochs, batch_size=batch, optimizer=nn.SGD(lr), parallel=mode, every=4,
                          verbose=False, seed=0)
        finally:
            close_runtime(rt)
        best = min(h["time"][1:] or h["time"])
        rows.append({"workers": n_workers, "mode": mode, "samples_per_s": len(X) / best, "epoch_s": best,
                     "loss": h["loss"][-1], "bytes": h["bytes_per_step"][-1], "min_bytes": h["min_bytes_per_step"][-1],
                     "tasks": h["tasks_per_step"][-1]})
    return rows


def print_parallel(rows) -> None:
    one = rows[0]["samples_per_s"]
    table = []
    for r in rows:
        eff = r["samples_per_s"] / (r["workers"] * one)
        table.append([f"{r['workers']} worker(s), {r['mode']}", f"{r['samples_per_s']:,.0f}", f"{r['epoch_s']:.2f}",
                      f"{eff:.2f}", f"{r['bytes'] / 1e6:.2f}", f"{r['min_bytes'] / 1e6:.2f}", f"{r['tasks']:.1f}",
                      f"{r['loss']:.4f}"])
    print_table(["data-parallel (Sequential.fit)", "samples/s", "epoch s", "X(n)/(n X(1))", "MB moved/step",
                 "MB needed/step", "tasks/step", "last loss"], table)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=None, help="timed steps per run (default 50; 10 with --quick)")
    ap.add_argument("--repeats", type=int, default=None, help="timed runs, the best counts (default 3; 2 --quick)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 5; 2 with --quick)")
    ap.add_argument("--check-steps", type=int, default=None, help="steps of the check run (default 10; 3 --quick)")
    ap.add_argument("--samples", type=int, default=None, help="synthetic samples (default 8192; 2048 --quick)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                    help="BLAS/OpenMP/PyTorch threads and phylanx local-runtime workers (default 2)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: fewer samples, steps and repeats")
    ap.add_argument("--profile", action="store_true", help="also print px.profile() of the timed phylanx steps")
    ap.add_argument("--parallel-epochs", type=int, default=None,
                    help="epochs of the data-parallel runs on 1 and 2 Dask workers (default 3; 2 --quick; 0: skip)")
    args = ap.parse_args(argv)
    quick = {"steps": 10, "repeats": 2, "warmup": 2, "check_steps": 3, "samples": 2048, "parallel_epochs": 2}
    full = {"steps": 50, "repeats": 3, "warmup": 5, "check_steps": 10, "samples": 8192, "parallel_epochs": 3}
    for k, v in (quick if args.quick else full).items():
        if getattr(args, k) is None:
            setattr(args, k, v)

    dtype = np.dtype(args.dtype)
    X, labels = make_data(args.samples, dtype)
    batches = make_batches(X, labels, args.batch)
    params = init_params(dtype)
    kw = {"lr": args.lr, "repeats": args.repeats, "warmup": args.warmup}
    print(f"simplemlp {'-'.join(map(str, SIZES))} ReLU, softmax cross-entropy, SGD lr {args.lr}, batch {args.batch}, "
          f"{args.dtype}; {args.samples:,} samples ({len(batches)} batches), {args.steps} timed steps, best of "
          f"{args.repeats}, {args.warmup} warm-up steps, {args.threads} threads")
    print("thread caps: " + ", ".join(f"{v}={os.environ.get(v, '-')}" for v in THREAD_VARS))
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    limits = contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits

        limits = threadpool_limits(limits=args.threads, user_api="blas")
    except ImportError:
        pass
    with limits:
        print(threadpool_summary())
        torch = import_torch()
        if torch is not None:
            torch.set_num_threads(args.threads)
            print(f"pytorch {torch.__version__}, {torch.get_num_threads()} threads")
        local = px.runtime.local(args.threads)
        sync = px.runtime.synchronous()
        try:
            print()
            rtol = 1e-3 if dtype == np.float32 else 1e-9
            if not check_losses(params, batches, args.check_steps, lr=args.lr, runtime=local, rtol=rtol,
                                torch=torch):
                print("phylanx-py and numpy losses disagree: not timing")
                return 1
            print()
            results = {}
            prof = px.profile() if args.profile else contextlib.nullcontext()
            with prof as recorded:
                results[f"phylanx-py value_and_grad (local, {args.threads} workers)"] = bench_phylanx(
                    params, batches, args.steps, runtime=local, **kw)
            results["phylanx-py value_and_grad (synchronous)"] = bench_phylanx(
                params, batches, args.steps, runtime=sync, **kw)
            results["numpy (hand-written backward)"] = bench_numpy(params, batches, args.steps, **kw)
            t = bench_torch(params, batches, args.steps, threads=args.threads, torch=torch, **kw) if torch else None
            torch_name = None
            if t is not None:
                torch_name = f"pytorch {t['version']} ({args.threads} threads)"
                results[torch_name] = t
        finally:
            local.close()

    t_np = results["numpy (hand-written backward)"]["seconds"]
    t_torch = results[torch_name]["seconds"] if torch_name else None
    loss_np = results["numpy (hand-written backward)"]["final_loss"]
    rows = []
    for name, r in results.items():
        sec = r["seconds"]
        rows.append([name, f"{args.steps * args.batch / sec:,.0f}", f"{sec * 1e3 / args.steps:.2f}",
                     f"{sec / t_torch:.2f}" if t_torch else "n/a", f"{sec / t_np:.2f}", f"{r['final_loss']:.6f}",
                     f"{r['first_step'] * 1e3:.1f}"])
    print()
    print_table(["implementation", "samples/s", "ms/step", "time/pytorch", "time/numpy", "final loss",
                 "first step ms"], rows)
    print()
    print("time/x: this row's time over x's (lower is faster); final loss: loss of the last timed step; first step:")
    print("the very first step (phylanx-py: trace + compile + run)")
    print("final loss, relative difference to numpy's:")
    for name, r in results.items():
        if not name.startswith("numpy"):
            print(f"  {name}: {abs(r['final_loss'] - loss_np) / loss_np:.1e}")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.parallel_epochs:
        print()
        print_parallel(bench_parallel(X, labels, batch=args.batch, lr=args.lr, epochs=args.parallel_epochs,
                                      dtype=dtype))
        print("X(n)/(n X(1)): scaling efficiency against one worker; MB moved: what workers fetched from each other")
    if args.profile:
        print()
        print(f"px.profile() of the local-runtime phylanx steps (warm-up and {args.repeats} x {args.steps} steps):")
        print(recorded.table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
