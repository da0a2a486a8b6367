"""Benchmark: per-node interpreter overhead (scalar loop) and small-array LRA, compiled vs plain Python/NumPy.

    python benchmarks/overhead.py [--runtime local] [--repeats 5]
    python benchmarks/overhead.py --runtime dask [--repeats 3]

(a) a scalar loop of 100,000 iterations with integer arithmetic and a branch; target <= 5x plain Python.
(b) LRA at Phylanx's size (569 x 30, breast-cancer shaped, 750 iterations); target <= 1.5x NumPy.
Each compiled function is called once first (that call compiles) and its result checked against plain Python.
Both are measured twice: interpreted, with the native loop tier off (``PHYLANX_NATIVE=0``: the per-node overhead
these targets are about), then tiered as by default, after the tier's warm-up (``settle_native``: called until
its loops are native or declined and nothing compiles in the background), whose calls and seconds are printed.
The first native kernel of a process also starts Numba itself (about 1 s here, in the background thread, taking
a share of the interpreter meanwhile), so timing inside the warm-up would measure that start, not either tier.

With ``--runtime dask`` (a 2-worker LocalCluster, one thread per worker) (a) and (b) run as above (their arrays
are small, so they run inline on the client), and then (c) per-task overhead: compiled functions of N=200 cheap
element-wise array ops, run with ``inline_elements=0`` so every array op is a remote task, against the same N
tasks sent with plain ``client.submit`` to the same cluster, as a dependent chain and as N independent tasks.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from _common import DASK_WORKERS, RUNTIMES, close_runtime, make_runtime, median_time, print_table, settle_native

import phylanx_py as px


def scalar_loop(n):
    s = 0
    for i in range(n):
        if i % 3 == 0:
            s = s + i * 2
        else:
            s = s - 1
    return s


# IR nodes evaluated per iteration of scalar_loop, counted by hand from str(px.compile(scalar_loop).tree),
# counting every node the evaluator visits (leaves too: a variable read or a constant is a node, as in Phylanx)
# but not the block wrappers:
#   loop step binding i                                1
#   if + its condition  eq(mod(i, 3), 0)               1 + 5   (eq, mod, i, 3, 0)
#   then, 1 in 3 iterations: define(s, add(s, mul(i, 2)))   6   (define, add, s, mul, i, 2)
#   else, 2 in 3 iterations: define(s, sub(s, 1))           4   (define, sub, s, 1)
# average: 7 + (6 + 2 * 4) / 3 = 11.67 nodes per iteration.
NODES_PER_ITERATION = 7 + (6 + 2 * 4) / 3
SCALAR_N = 100_000


def lra(X, y, alpha, iterations):
    w = np.zeros(X.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        w = w - alpha * (X.T @ (p - y)) / X.shape[0]
    return w


def lra_data(rows=569, cols=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, cols))
    y = (X @ rng.standard_normal(cols) > 0).astype(np.float64)
    return X, y


# (c), --runtime dask only: N array ops, each one remote task under inline_elements=0 (the script checks the
# count on the warm-up call). The array is tiny, so the time is the per-task overhead, not the arithmetic.
N_TASKS = 200
TASK_ARRAY = np.zeros(8)


@px.compile
def add_chain(x, n):
    for _ in range(n):
        x = x + 1.0  # each add depends on the one before: n tasks in a chain
    return x


@px.compile
def add_independent(x, n):
    return [x + i for i in range(n)]  # n tasks that depend only on x; the list of results is returned


def submit_chain(client, x, n):
    f = x
    for _ in range(n):
        f = client.submit(np.add, f, 1.0, pure=False)
    return f.result()


def submit_independent(client, x, n):
    return client.gather([client.submit(np.add, x, i, pure=False) for i in range(n)])


def count_tasks(rt, fn):
    """Run ``fn()`` once on ``rt``, counting the tasks its executor submits; (result, count)."""
    ex = rt.executor
    count = 0
    submit = ex.submit

    def counting(*a, **kw):
        nonlocal count
        count += 1
        return submit(*a, **kw)

    ex.submit = counting
    try:
        return fn(), count
    finally:
        del ex.submit  # back to the class's method


def measure_dask_tasks(rt, repeats: int) -> dict:
    """(c) on ``rt``'s cluster: {kind: (compiled task count, compiled s, client.submit s, results agree)}."""
    client = rt.executor.client
    x, n = TASK_ARRAY, N_TASKS
    tasks_rt = px.runtime.dask(client=client, inline_elements=0)  # same cluster, every array op a task
    variants = {}
    try:
        with px.using(tasks_rt):
            for kind, compiled, plain in [("chain", add_chain, submit_chain),
                                          ("independent", add_independent, submit_independent)]:
                got, tasks = count_tasks(tasks_rt, lambda compiled=compiled: compiled(x, n))  # compiles, warms
                want = plain(client, x, n)  # warm-up of the plain variant, and the result we check
                agree = bool(np.allclose(np.asarray(got), np.asarray(want)))
                t_c = median_time(lambda compiled=compiled: compiled(x, n), repeats, warmup=0)
                t_p = median_time(lambda plain=plain: plain(client, x, n), repeats, warmup=0)
                variants[kind] = (tasks, t_c, t_p, agree)
    finally:
        tasks_rt.close()  # closes nothing it did not start: the client and cluster stay up
    return variants


def print_dask_tasks(variants: dict, repeats: int) -> bool:
    """Print (c)'s table; True if every compiled result agrees and made exactly N_TASKS tasks."""
    print(f"\n(c) per-task overhead on Dask ({DASK_WORKERS} worker processes x 1 thread): N={N_TASKS} element-wise "
          f"ops on a {TASK_ARRAY.size}-element array, inline_elements=0; median of {repeats} repeats after one "
          "warm-up call\n")
    rows = []
    for kind, (tasks, t_c, t_p, agree) in variants.items():
        for label, t, ntask in [(f"compiled, {kind}", t_c, tasks), (f"client.submit, {kind}", t_p, N_TASKS)]:
            rows.append([label, ntask, f"{t * 1e3:.1f}", f"{t / ntask * 1e6:.0f}", f"{ntask / t:.0f}",
                         f"{t / t_p:.2f}", agree])
    print_table(["variant", "tasks", "total ms", "us/task", "tasks/s", "ratio to client.submit", "agree"], rows)
    print("compiled: each array node is one task, so us/task = us per array node (client-side evaluation "
          "included); its task count is the executor's submits on the warm-up call")
    ok = all(agree and tasks == N_TASKS for tasks, _, _, agree in variants.values())
    if not ok:
        print(f"MISMATCH or task count != {N_TASKS}: {variants}")
    return ok


def measure_tier(lra_args, repeats, settle):
    """(a) and (b) compiled here, once per tier (whether a function has native loop hooks is decided when it
    compiles, under the PHYLANX_NATIVE in force), warmed up (``settle``: until the native tier is done), then
    timed with the plain functions: ({results, times}, {key: (warm-up calls, seconds, explain())})."""
    loop_f, lra_f = px.compile(scalar_loop), px.compile(lra)
    loop_f(SCALAR_N), lra_f(*lra_args)  # the first calls compile
    warmups = {}
    if settle:
        warmups["a"] = (*settle_native(loop_f, lambda: loop_f(SCALAR_N)), loop_f.explain())
        warmups["b"] = (*settle_native(lra_f, lambda: lra_f(*lra_args)), lra_f.explain())
    return dict(got=(loop_f(SCALAR_N), lra_f(*lra_args)),
                loop_c=median_time(lambda: loop_f(SCALAR_N), repeats, warmup=0),
                loop_p=median_time(lambda: scalar_loop(SCALAR_N), repeats, warmup=0),
                lra_c=median_time(lambda: lra_f(*lra_args), repeats, warmup=0),
                lra_p=median_time(lambda: lra(*lra_args), repeats, warmup=0)), warmups


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime", choices=sorted(RUNTIMES), default="local")
    ap.add_argument("--repeats", type=int, default=None, help="default 5; 3 with --runtime dask")
    args = ap.parse_args(argv)
    if args.repeats is None:
        args.repeats = 3 if args.runtime == "dask" else 5
    X, y = lra_data()
    lra_args = (X, y, 0.1, 750)

    rt = make_runtime(args.runtime)
    tiered = os.environ.get("PHYLANX_NATIVE", "1")
    runs, warmups = {}, {}
    try:
        with px.using(rt):
            for tier in ("interpreted", "tiered"):
                os.environ["PHYLANX_NATIVE"] = "0" if tier == "interpreted" else tiered
                runs[tier], warmup = measure_tier(lra_args, args.repeats, settle=tier == "tiered")
                warmups.update(warmup)
            os.environ["PHYLANX_NATIVE"] = tiered
            # (c) needs the cluster, so it runs before closing; it prints after (a) and (b)
            dask_tasks = measure_dask_tasks(rt, args.repeats) if args.runtime == "dask" else None
    finally:
        os.environ["PHYLANX_NATIVE"] = tiered
        close_runtime(rt)

    s_plain, w_plain = scalar_loop(SCALAR_N), lra(*lra_args)
    agree = {tier: (r["got"][0] == s_plain, bool(np.allclose(r["got"][1], w_plain, rtol=1e-9, atol=1e-12)))
             for tier, r in runs.items()}
    nodes = SCALAR_N * NODES_PER_ITERATION
    print(f"runtime={args.runtime}, median of {args.repeats} repeats after one warm-up call; PHYLANX_NATIVE=0 for "
          f"the interpreted rows, {tiered!r} for the tiered ones\n")
    rows = []
    for tier, r in runs.items():
        rows += [[f"(a) scalar loop, n={SCALAR_N:,}, {tier}", f"{r['loop_p'] * 1e3:.1f}", f"{r['loop_c'] * 1e3:.2f}",
                  f"{r['loop_c'] / r['loop_p']:.3f}", "<= 5", agree[tier][0]],
                 [f"(b) LRA 569x30, 750 iterations, {tier}", f"{r['lra_p'] * 1e3:.1f}", f"{r['lra_c'] * 1e3:.2f}",
                  f"{r['lra_c'] / r['lra_p']:.3f}", "<= 1.5", agree[tier][1]]]
    print_table(["benchmark", "plain ms", "compiled ms", "ratio", "target", "agree"], rows)
    print()
    r = runs["interpreted"]
    print(f"(a) interpreted: {r['loop_c'] / SCALAR_N * 1e6:.2f} us/iteration, "
          f"{r['loop_c'] / nodes * 1e6:.3f} us/IR node ({NODES_PER_ITERATION:.2f} nodes/iter, see comment), "
          f"plain Python: {r['loop_p'] / SCALAR_N * 1e6:.3f} us/iteration")
    print(f"(b) interpreted: {r['lra_c'] / 750 * 1e6:.1f} us/iteration; "
          f"numpy: {r['lra_p'] / 750 * 1e6:.1f} us/iteration")
    for key, (calls, secs, said) in warmups.items():
        print(f"({key}) tier warm-up: {calls} calls, {secs:.2f} s; " + "; ".join(said.splitlines()))
    tasks_ok = True if dask_tasks is None else print_dask_tasks(dask_tasks, args.repeats)
    if not all(all(ok) for ok in agree.values()):
        print(f"MISMATCH (scalar loop equal, LRA allclose) by tier: {agree}")
        return 1
    return 0 if tasks_ok else 1


if __name__ == "__main__":
    sys.exit(main())
