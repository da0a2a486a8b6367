"""Benchmark: ``Sequential.fit`` against the same training step hand-written in NumPy and in JAX (``jax.jit``, CPU).

    python benchmarks/train_fit.py                  # simplemlp and the digits CNN, 2 threads, 3 rounds
    python benchmarks/train_fit.py --only cnn --profile
    python benchmarks/train_fit.py --quick          # a smoke run: small data, 2 epochs, 1 round

Models: PyDTNN's simplemlp (Dense 784-512-512-512-10 with ReLU) on 5,120 synthetic float32 samples (those of
benchmarks/train.py: standard normal X, labels from a fixed random teacher), and the CNN of examples/digits.py
(Conv2D(1, 16, 3, padding=1), ReLU, Conv2D(16, 16, 3, padding=1), ReLU, MaxPool2D(2), Flatten, Dense(256, 10)) on
scikit-learn's 1,437 digits training images (float32). Softmax cross-entropy, SGD with momentum 0.9, batch 64, one
process. Learning rate (``--lr`` sets both): 0.001 for simplemlp, 0.01 for the CNN. At 0.01 simplemlp memorises its
random samples within five epochs (mean loss ~0.01), and float32 rounding differences (JAX's summation order,
float64 layers) then grow past 1e-3 of the loss: the check below could no longer tell a wrong step from rounding.

Rows, every one from the same initial weights (the float32 model's own initialisation, seed 0, with nonzero
biases: see ``initial_weights``), on the same batches in the same order (fit's:
``np.random.default_rng(seed + 1).permutation(n)`` each epoch, ``X[idx]``):

- phylanx-py ``fit``, layers as a user writes them (no dtype arguments: the weights are in the layers' default
  dtype, the data float32);
- phylanx-py ``fit``, every layer given ``dtype=np.float32`` (if the constructors take a dtype);
- NumPy: the same step written by hand in float32 (``_fit_steps.py``: forward, backward, the momentum update in
  place; the CNN computed in (C, H, W, N) layout with im2col + GEMM);
- JAX: the same step as one ``jax.jit`` function (conv by ``lax.conv_general_dilated``, pooling by
  ``lax.reduce_window``, weights donated), on JAX's CPU device. No JAX: a line says so and its rows are left out
  (``pip install -e ".[bench]"`` installs it).

Every loop also does what fit does each step besides the step itself: the batch gather, ``float(loss)`` and the
count of correct rows for the epoch's accuracy. Timing: the wall time of each epoch; samples/s from the best epoch
after the first (the first traces or compiles); ``--rounds`` runs every row that many times, round after round,
each round starting one row later, and keeps each row's best epoch (the table also gives the best of each round).
Ratios are throughputs (phylanx samples/s over NumPy's or JAX's: above 1 is faster). Each row's mean loss over its
last epoch must agree with NumPy's within ``--rtol`` (relative), or the script exits with status 1. After its first
run each row trains one more epoch, untimed, which counts minor page faults per step (``faults/step``) and, with
``--profile``, is what ``px.profile()`` records for the fit rows.

Memory: by default the script first tells glibc to keep freed memory (``mallopt``: ``tune_malloc``). With glibc's
defaults a step's multi-MB temporaries go back to the OS and are page-faulted in again, and how often depends on
what ran before in the process (the hand-written CNN step ran at about half its speed until a fit had run before
it), so the order of the rows would decide the ratios. ``--malloc default`` leaves glibc as it is.

Threads: ``--threads`` (2) caps OMP/OPENBLAS/MKL/NUMBA/PHYLANX_NUM_THREADS before NumPy is imported (and BLAS by
threadpoolctl where installed); XLA's CPU client sizes its own pool from the CPUs the process may use, whatever those
caps say, so with fewer threads than CPUs the process is pinned to that many CPUs (``os.sched_setaffinity``, before
JAX is imported): unpinned, ``--threads 1`` timed JAX on both cores of this machine against one for the others (its
CPU time per product is NumPy's; its wall time half). ``--no-pin`` leaves the process unpinned. fit runs its steps
in the calling thread (phylanx_py/nn/steps.py).
"""
from __future__ import annotations

import os
import sys

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
               "PHYLANX_NUM_THREADS")


def threads_from_argv(argv, default: int = 2) -> int:
    """``--threads`` from argv, read before NumPy is imported (as benchmarks/train.py does)."""
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return default


if __name__ == "__main__":
    for _v in THREAD_VARS:
        os.environ[_v] = str(threads_from_argv(sys.argv[1:]))

import argparse  # noqa: E402
import contextlib  # noqa: E402
import ctypes  # noqa: E402
import functools  # noqa: E402
import importlib.util  # noqa: E402
import inspect  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from _common import print_table, threadpool_summary  # noqa: E402
from _fit_steps import JaxTrainer, numpy_trainer  # noqa: E402
from train import SIZES, make_data  # noqa: E402

import phylanx_py as px  # noqa: E402
from phylanx_py import nn  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MOMENTUM = 0.9
LR = {"mlp": 0.001, "cnn": 0.01}
SEED = 0


# ---- models and data -------------------------------------------------------------------------------------------
def simplemlp(**kw):
    layers = []
    for a, b in zip(SIZES[:-1], SIZES[1:]):
        layers += [nn.Dense(a, b, **kw), nn.ReLU()]
    return nn.Sequential(layers[:-1])


def digits_cnn(**kw):
    """examples/digits.py's ``cnn()``; ``kw`` (a dtype) goes to the layers with weights."""
    return nn.Sequential([nn.Conv2D(1, 16, 3, padding=1, **kw), nn.ReLU(), nn.Conv2D(16, 16, 3, padding=1, **kw),
                          nn.ReLU(), nn.MaxPool2D(2), nn.Flatten(), nn.Dense(16 * 4 * 4, 10, **kw)])


def example_cnn():
    """The CNN examples/digits.py builds (loaded from its file: examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location("digits_example", os.path.join(HERE, "..", "examples", "digits.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.cnn()


def digits_data(n: int | None):
    """examples/digits.py's training split (1,437 images) as float32 (N, 1, 8, 8), the first ``n`` if given."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    Xtr, _, ytr, _ = train_test_split(d.data / 16.0, d.target, test_size=360, random_state=0)
    X = Xtr.reshape(-1, 1, 8, 8).astype(np.float32)
    return (X[:n], ytr[:n]) if n else (X, ytr)


def takes_dtype() -> bool:
    return all("dtype" in inspect.signature(c).parameters for c in (nn.Dense, nn.Conv2D))


def flat_weights(model) -> list:
    return [np.asarray(p[k]) for p in model.params for k in p]


def initial_weights(model) -> list:
    """The built float32 model's weights, with its zero biases replaced by draws from +-1/sqrt(fan_in) (as
    PyTorch's layers initialise theirs). Zero biases put the digits' blank borders exactly at a ReLU's kink in the
    first step, where np.maximum's gradient (a half, as JAX's) and a hand-written ``a > 0`` mask differ."""
    rng = np.random.default_rng(SEED + 2)
    out = []
    for p in model.params:
        for k, v in p.items():
            v = np.asarray(v, np.float32)
            if k == "b":
                bound = 1.0 / np.sqrt(np.prod(p["W"].shape) / v.shape[0])
                v = rng.uniform(-bound, bound, v.shape).astype(np.float32)
            out.append(v)
    return out


def set_weights(model, input_shape, weights) -> None:
    """Build ``model`` and overwrite its weights with ``weights`` (cast to the dtype the layer chose)."""
    model.build(input_shape, SEED)
    it = iter(weights)
    for p in model.params:
        for k in p:
            p[k] = next(it).astype(np.asarray(p[k]).dtype)


# ---- the timed loops -------------------------------------------------------------------------------------------
def run_fit(make_model, weights, X, Y, epochs, batch, lr) -> dict:
    model = make_model()
    set_weights(model, X.shape[1:], weights)
    fit = functools.partial(model.fit, X, Y, batch_size=batch, optimizer=nn.SGD(lr, momentum=MOMENTUM), seed=SEED,
                            verbose=False)
    h = fit(epochs=epochs)
    weights = [w.copy() for w in flat_weights(model)]  # the extra epoch ("more") trains the model on
    return {"times": h["time"], "losses": h["loss"], "weights": weights, "more": lambda: fit(epochs=1),
            "dtype": str(weights[0].dtype)}


def run_loop(trainer, X, Y, epochs, batch) -> dict:
    """fit's epoch loop around ``trainer.step``: the same permutation, gather and per-step bookkeeping."""
    rng = np.random.default_rng(SEED + 1)
    n = len(X)
    times, losses = [], []
    for _ in range(epochs):
        t0 = time.perf_counter()
        order = rng.permutation(n)
        total, correct = 0.0, 0
        for start in range(0, n, batch):
            idx = order[start:start + batch]
            loss, right = trainer.step(X[idx], Y[idx])
            total += loss * len(idx)
            correct += right
        times.append(time.perf_counter() - t0)
        losses.append(total / n)
    return {"times": times, "losses": losses, "weights": trainer.weights(), "dtype": "float32",
            "more": lambda: run_loop(trainer, X, Y, 1, batch)}


def implementations(kind: str, jax_ok: bool, dtype_ok: bool, lr: float) -> dict:
    """name -> (weights, X, Y, epochs, batch) -> result dict."""
    make = {"mlp": simplemlp, "cnn": digits_cnn}[kind]
    rows = {"phylanx-py fit (layers as written)": lambda w, *a: run_fit(make, w, *a, lr)}
    if dtype_ok:
        rows["phylanx-py fit (float32 layers)"] = lambda w, *a: run_fit(lambda: make(dtype=np.float32), w, *a, lr)
    rows["numpy (hand-written step)"] = lambda w, *a: run_loop(numpy_trainer(kind, w, lr, MOMENTUM), *a)
    if jax_ok:
        rows["jax.jit (CPU)"] = lambda w, *a: run_loop(JaxTrainer(kind, w, lr, MOMENTUM), *a)
    return rows


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def bench(kind, X, Y, args, jax_ok, dtype_ok) -> tuple[dict, bool]:
    """Every row ``args.rounds`` times, round after round, each round starting one row later (the process's
    history, the heap's above all, then favours no row); (results by row, losses agree). After its first run each
    row trains one more epoch, which counts the minor page faults per step (and is what ``--profile`` records)."""
    ref = ({"mlp": simplemlp, "cnn": digits_cnn}[kind])(**({"dtype": np.float32} if dtype_ok else {}))
    ref.build(X.shape[1:], SEED)
    weights = initial_weights(ref)
    rows = implementations(kind, jax_ok, dtype_ok, args.lr[kind])
    names = list(rows)
    results: dict = {}
    for rnd in range(args.rounds):
        k = rnd % len(names)
        for name in names[k:] + names[:k]:
            r = rows[name](weights, X, Y, args.epochs[kind], args.batch)
            best = min(r["times"][1:] or r["times"])
            if name in results:  # a later round: the first round's losses and weights
                if r["losses"][-1] != results[name]["losses"][-1]:
                    print(f"  note: {name} ended round {rnd + 1} at loss {r['losses'][-1]:.6f}, round 1 at "
                          f"{results[name]['losses'][-1]:.6f}")
                results[name]["best"].append(best)
                results[name]["first"].append(r["times"][0])
                continue
            profiling = args.profile and name.startswith("phylanx-py")
            with px.profile() if profiling else contextlib.nullcontext() as recorded:
                f0 = minor_faults()
                r["more"]()
                r["faults"] = (minor_faults() - f0) / -(-len(X) // args.batch)
            r["profile"] = recorded.table() if profiling else None
            results[name] = {**r, "best": [best], "first": [r["times"][0]]}
    return {name: results[name] for name in names}, check(kind, results, args.rtol)


def check(kind, results, rtol) -> bool:
    ref = results["numpy (hand-written step)"]
    ok = True
    print(f"{kind}: mean loss of the last epoch, relative to numpy's; max |weight - numpy's weight| at the end:")
    for name, r in results.items():
        rel = abs(r["losses"][-1] - ref["losses"][-1]) / abs(ref["losses"][-1])
        dw = max(float(np.max(np.abs(a.astype(np.float64) - b))) for a, b in zip(r["weights"], ref["weights"]))
        good = rel <= rtol
        ok &= good
        verdict = "OK" if good else f"MISMATCH (tolerance {rtol:g})"
        print(f"  {name:<36} loss {r['losses'][-1]:.6f}  relative difference {rel:.1e} {verdict}  max |dw| {dw:.1e}")
    return ok


def table(kind, results, n, batch) -> None:
    best = {name: min(r["best"]) for name, r in results.items()}
    t_np = best["numpy (hand-written step)"]
    t_jax = best.get("jax.jit (CPU)")
    steps = -(-n // batch)
    rows = []
    for name, r in results.items():
        sec = best[name]
        rows.append([name, r["dtype"], f"{n / sec:,.0f}", f"{sec * 1e3 / steps:.2f}", f"{t_np / sec:.2f}",
                     f"{t_jax / sec:.2f}" if t_jax else "n/a", f"{r['losses'][-1]:.6f}",
                     " ".join(f"{t * 1e3 / steps:.2f}" for t in r["best"]), " ".join(f"{t:.2f}" for t in r["first"]),
                     f"{r['faults']:,.0f}"])
    print_table([f"{kind}: {n:,} samples, batch {batch}", "weights", "samples/s", "ms/step", "x numpy", "x jax",
                 "last loss", "ms/step by round", "first epoch s", "faults/step"], rows)


def environment(args, jax_mod) -> None:
    print("thread caps: " + ", ".join(f"{v}={os.environ.get(v, '-')}" for v in THREAD_VARS)
          + f"; XLA_FLAGS={os.environ.get('XLA_FLAGS', '(not set)')}; {os.cpu_count()} CPUs")
    print(threadpool_summary())
    versions = f"python {platform.python_version()}, numpy {np.__version__}, phylanx-py {px.__version__}"
    if jax_mod is not None:
        import jaxlib

        versions += f", jax {jax_mod.__version__} (jaxlib {jaxlib.__version__}, devices {jax_mod.devices()})"
    print(versions)


def import_jax(skip: bool):
    if skip:
        print("JAX rows skipped (--skip-jax)")
        return None
    try:
        import jax
    except ImportError as e:
        print(f"JAX not importable ({e}): its rows are left out (pip install -e \".[bench]\")")
        return None
    return jax


# glibc's mallopt parameters and the values set: the runtime's Dask workers get the first two (WORKER_MALLOC_ENV).
MALLOPT = {"M_TRIM_THRESHOLD": (-1, 256 << 20), "M_MMAP_THRESHOLD": (-3, 32 << 20), "M_TOP_PAD": (-2, 64 << 20)}


def tune_malloc() -> str:
    """Keep freed memory in the heap. With glibc's defaults a step's multi-MB temporaries are returned to the OS and
    page-faulted in again on the next step (~1,400 minor faults a step for the hand-written CNN step here, twice
    its time), and how often depends on what ran before in the process: a row would be timed faster after
    another. Tuned, every row runs under the same allocator whatever the order."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        done = [name for name, (param, value) in MALLOPT.items() if libc.mallopt(param, value) == 1]
    except (OSError, AttributeError):
        return "malloc: not glibc, left as it is"
    return "malloc: " + ", ".join(f"{n}={MALLOPT[n][1] >> 20} MB" for n in done) + " (mallopt; --malloc default: not)"


def pin(threads: int) -> str:
    """Pin the process to its first ``threads`` allowed CPUs when that is fewer than it may use (see the module's
    text); what was done, for the output."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return "CPUs: not pinned (no sched_setaffinity here)"
    if threads >= len(allowed):
        return f"CPUs: not pinned ({len(allowed)} allowed, {threads} thread(s))"
    os.sched_setaffinity(0, allowed[:threads])
    return f"CPUs: pinned to {allowed[:threads]} of {allowed} (XLA's pool too)"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=("mlp", "cnn"), default=["mlp", "cnn"])
    ap.add_argument("--samples", type=int, default=None, help="simplemlp samples (default 5120; 640 --quick)")
    ap.add_argument("--digits", type=int, default=None, help="digits training images (default all 1437; 320 --quick)")
    ap.add_argument("--epochs", type=int, default=None, help="simplemlp epochs per run (default 5; 2 --quick)")
    ap.add_argument("--cnn-epochs", type=int, default=None, help="CNN epochs per run (default 10; 2 --quick)")
    ap.add_argument("--rounds", type=int, default=None, help="times every row runs, in turn (default 3; 1 --quick)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=None, help="learning rate (default 0.001 simplemlp, 0.01 CNN)")
    ap.add_argument("--rtol", type=float, default=1e-3, help="loss agreement with numpy (relative, default 1e-3)")
    ap.add_argument("--threads", type=int, default=2, help="BLAS/OpenMP/Numba/phylanx thread caps (default 2)")
    ap.add_argument("--skip-jax", action="store_true", help="leave the JAX rows out")
    ap.add_argument("--no-pin", action="store_true", help="do not pin the process to --threads CPUs")
    ap.add_argument("--profile", action="store_true", help="px.profile() the extra epoch of each fit row")
    ap.add_argument("--malloc", choices=("tuned", "default"), default="tuned",
                    help="tuned (default): glibc keeps freed memory (mallopt, see tune_malloc); default: as it is")
    ap.add_argument("--quick", action="store_true", help="a smoke run: small data, 2 epochs, one round")
    args = ap.parse_args(argv)
    preset = ({"samples": 640, "digits": 320, "epochs": 2, "cnn_epochs": 2, "rounds": 1} if args.quick else
              {"samples": 5120, "digits": 0, "epochs": 5, "cnn_epochs": 10, "rounds": 3})
    for k, v in preset.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    args.epochs = {"mlp": args.epochs, "cnn": args.cnn_epochs}
    args.lr = {k: args.lr or v for k, v in LR.items()}

    print(f"load average at start: {load()}")
    print(tune_malloc() if args.malloc == "tuned" else "malloc: glibc's defaults (--malloc default)")
    print("CPUs: not pinned (--no-pin)" if args.no_pin else pin(args.threads))
    jax_mod = import_jax(args.skip_jax)
    dtype_ok = takes_dtype()
    if not dtype_ok:
        print("Dense/Conv2D take no dtype argument: the float32-layers rows are left out")
    data = {}
    if "mlp" in args.only:
        data["mlp"] = make_data(args.samples, np.float32)
    if "cnn" in args.only:
        try:
            data["cnn"] = digits_data(args.digits)
        except ImportError as e:
            print(f"scikit-learn not importable ({e}): the digits CNN is left out (pip install -e \".[bench]\")")
        else:
            if repr(digits_cnn()) != repr(example_cnn()):
                print(f"the CNN here, {digits_cnn()!r}, is no longer examples/digits.py's {example_cnn()!r}")
                return 1
    limits = contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits

        limits = threadpool_limits(limits=args.threads, user_api="blas")
    except ImportError:
        pass
    ok = True
    with limits:
        environment(args, jax_mod)
        print(f"SGD momentum {MOMENTUM}, batch {args.batch}; lr, epochs: "
              + "; ".join(f"{k} {args.lr[k]:g}, {args.epochs[k]}" for k in data)
              + f"; {args.rounds} round(s); samples/s from the best epoch after the first")
        for kind, (X, Y) in data.items():
            print()
            results, good = bench(kind, X, Y, args, jax_mod is not None, dtype_ok)
            ok &= good
            print()
            table(kind, results, len(X), args.batch)
            for name, r in results.items():
                if r["profile"]:
                    print(f"\npx.profile() of the extra {kind} epoch of {name}:")
                    print(r["profile"])
    print()
    print("x numpy, x jax: this row's samples/s over theirs (above 1 is faster); first epoch s: the first epoch of "
          "each round (trace, compile)")
    print(f"load average at end: {load()}")
    if not ok:
        print("losses disagree with numpy's: the figures above are not comparable")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
