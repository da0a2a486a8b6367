"""The first seconds of a process: each call of a compiled function against the plain function, from its first call,
while the tiers compile behind it (issue 33: no call more than 10% slower than the plain function).

Each program runs in a fresh child process with a fresh kernel cache (nothing compiled before): the plain function
is timed first (the median of a few calls is the baseline), then the compiled function is called back to back for
``--seconds``; the calls are grouped in windows of ``--window`` seconds and each window prints the median and the
slowest call over the plain median, with the tier ``explain()`` gives at the end. Programs: the held-out scalar loop
(100,000 iterations of ``s = s + i * 2``), a stencil loop over an array, and an element-wise chain on 2e6 floats.
Another new process then calls the plain function back to back for as long (the control: how many of the plain
function's own calls run over 1.1x on this machine), then again with the other core kept busy by a niced process,
as the compile process keeps it. ``--warm`` runs each program once before, in
the same cache (kernels compiled by an earlier process). Each row says
when the first call under half the plain time came, and whether Numba was started in the process (a whole
function's kernel built ahead of time runs without it: runtime/native/aot.py).

    python benchmarks/first_seconds.py [--seconds 5] [--window 0.5] [--only scalar,stencil,chain] [--warm]
    python benchmarks/first_seconds.py --suite DIR --only jacobi_2d,heat_3d [--warm]

``--suite DIR``: the programs are NPBench kernels (a checkout of spcl/npbench, as benchmarks/npbench.py runs it) at
their S preset, each call on fresh copies of its arrays, the answer checked against the plain function's with
NPBench's rule. Numba is never imported by this script: a process of NumPy code that does not use Numba.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PROGRAMS = ("scalar", "stencil", "chain")


def scalar(n):
    s = 0
    for i in range(n):
        s = s + i * 2
    return s


def stencil(a, steps):
    for _ in range(steps):
        for i in range(1, a.shape[0] - 1):
            a[i] = 0.25 * a[i - 1] + 0.5 * a[i] + 0.25 * a[i + 1]
    return a


def chain(x):
    import numpy as np

    return np.exp(-x * x) * np.sin(x) + 2.0 * x - 1.0


def _args(name):
    import numpy as np

    if name == "scalar":
        return lambda: (100_000,)
    if name == "stencil":
        base = np.linspace(0.0, 1.0, 20_000)
        return lambda: (base.copy(), 3)
    x = np.linspace(-3.0, 3.0, 2_000_000)
    return lambda: (x,)


def _npbench(suite: str, name: str):
    """An NPBench kernel's NumPy function, a maker of its S preset's arguments (fresh array copies per call) and a
    check of a call's outputs against the plain function's (NPBench's rule: benchmarks/npbench.py)."""
    import numpy as np

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import npbench as nb  # benchmarks/npbench.py: the suite's loader and validation

    info = nb.bench_info(suite, name)
    data = nb.make_data(suite, info, "S")
    fn = getattr(nb.load_module(nb.kernel_file(suite, info, "numpy"), f"_npb_{name}_numpy"), info["func_name"])
    arrays, names = set(info["array_args"]), info["input_args"]

    def make():
        return tuple(np.copy(data[a]) if a in arrays else data[a] for a in names)

    def outputs(result, args):
        return nb.as_outputs(result, dict(zip(names, args)), info)

    def same(f) -> bool:
        mine, plain = make(), make()
        return nb.validate(outputs(fn(*plain), plain), outputs(f(*mine), mine), info, same_function=True)[0]

    return fn, make, same


def _program(name: str, suite: str | None):
    """(the plain function, a maker of its arguments, a check of the compiled function's answer) of a program of
    this file or, with ``suite``, of an NPBench kernel."""
    if suite:
        return _npbench(suite, name)
    import numpy as np

    fn, make = globals()[name], _args(name)
    return fn, make, lambda f: bool(np.allclose(f(*make()), fn(*make())))


def _plain_calls(fn, make, seconds) -> list:
    """The seconds of each call of ``fn`` made back to back for ``seconds``."""
    out = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        args = make()
        t = time.perf_counter()
        fn(*args)
        out.append(time.perf_counter() - t)
    return out


def control(name: str, seconds: float, suite: str | None = None) -> dict:
    """In another fresh process: the plain function itself called back to back for as long (how many of its own
    calls this machine makes over 1.1x: the noise floor of the compiled calls' count), then again with the other
    core busy as the compile process keeps it (a spinning child, niced to 19 as it is): what the plain function's
    own calls meet on this machine while anything compiles beside them."""
    fn, make, _ = _program(name, suite)
    quiet = _plain_calls(fn, make, seconds)
    spin = subprocess.Popen([sys.executable, "-c", "import os, time\nos.nice(19)\nt = time.time()\n"
                             f"while time.time() - t < {seconds + 1}: pass"])
    try:
        busy = _plain_calls(fn, make, seconds)
    finally:
        spin.kill()
        spin.wait()
    return {"control": quiet, "busy": busy}


def child(name: str, seconds: float, window: float, suite: str | None = None) -> dict:
    """In this (fresh) process: the plain median, then every compiled call's (start, seconds) for ``seconds``."""
    fn, make, check = _program(name, suite)
    plain = []
    for _ in range(5):
        args = make()
        t = time.perf_counter()
        fn(*args)
        plain.append(time.perf_counter() - t)
    import phylanx_py as px

    f = px.compile(fn)
    calls = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        args = make()
        t = time.perf_counter()
        f(*args)
        calls.append((t - t0, time.perf_counter() - t))
    same = check(f)
    return {"name": name, "plain": statistics.median(plain), "calls": calls, "same": same,
            "explain": f.explain(), "numba": "numba" in sys.modules}


def report(row: dict, window: float) -> None:
    plain = row["plain"]
    print(f"\n{row['name']}: plain median {plain * 1e3:.2f} ms; {len(row['calls'])} compiled calls; same answer: "
          f"{row['same']}")
    print(f"{'window (s)':>12}  {'calls':>6}  {'median x plain':>14}  {'slowest x plain':>15}")
    windows: dict = {}
    for at, seconds in row["calls"]:
        windows.setdefault(int(at / window), []).append(seconds / plain)
    for w in sorted(windows):
        xs = windows[w]
        print(f"{w * window:5.2f}-{(w + 1) * window:<5.2f}  {len(xs):>6}  {statistics.median(xs):>14.2f}  "
              f"{max(xs):>15.2f}")
    ratios = [s / plain for _, s in row["calls"]]
    slow = sum(r > 1.1 for r in ratios)
    fast = next((at for at, s in row["calls"] if s / plain < 0.5), None)
    print(f"calls over 1.1x plain: {slow} of {len(ratios)}; first call {ratios[0]:.2f}x plain")
    for key, what in (("control", "the plain function called as long in another new process"),
                      ("busy", "the same with the other core busy (a niced spinning process)")):
        control = row.get(key)
        if not control:
            continue
        own = statistics.median(control)
        over, over_own = sum(c / plain > 1.1 for c in control), sum(c / own > 1.1 for c in control)
        print(f"control, {what}: median {own / plain:.2f}x plain; calls over 1.1x plain {over}, over 1.1x its own "
              f"median {over_own}, of {len(control)}")
    print(f"first call under 0.5x plain at {'-' if fast is None else f'{fast:.2f} s'}; Numba started in the "
          f"process: {'yes' if row.get('numba') else 'no'}")
    print("tier: " + "; ".join(row["explain"].splitlines()))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--window", type=float, default=0.5)
    p.add_argument("--only", default=",".join(PROGRAMS))
    p.add_argument("--warm", action="store_true",
                   help="run each program once first (not reported) in the same fresh cache: kernels compiled "
                        "before, by an earlier process")
    p.add_argument("--suite", help="a checkout of spcl/npbench: --only names its kernels (S preset)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--control", help=argparse.SUPPRESS)
    opts = p.parse_args(argv)
    if opts.child:
        print(json.dumps(child(opts.child, opts.seconds, opts.window, opts.suite)))
        return 0
    if opts.control:
        print(json.dumps(control(opts.control, opts.seconds, opts.suite)))
        return 0
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"load at start: {load} (1/5/15 min), {os.cpu_count()} CPUs")
    ok = True
    suite = ["--suite", os.path.abspath(opts.suite)] if opts.suite else []
    if opts.suite and opts.only == ",".join(PROGRAMS):
        p.error("--suite: name its kernels with --only")
    for name in opts.only.split(","):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, PHYLANX_CACHE_DIR=cache)
            for _ in range(2 if opts.warm else 1):
                out = subprocess.run([sys.executable, __file__, "--child", name, "--seconds", str(opts.seconds),
                                      "--window", str(opts.window), *suite], capture_output=True, text=True, env=env,
                                     timeout=opts.seconds * 10 + 120)
        if out.returncode != 0:
            print(f"\n{name}: the child failed:\n{out.stderr[-2000:]}")
            ok = False
            continue
        row = json.loads(out.stdout.strip().splitlines()[-1])
        ctl = subprocess.run([sys.executable, __file__, "--control", name, "--seconds", str(opts.seconds), *suite],
                             capture_output=True, text=True, timeout=opts.seconds * 10 + 120)
        row.update(json.loads(ctl.stdout.strip().splitlines()[-1]) if ctl.returncode == 0 else {})
        report(row, opts.window)
        ok = ok and row["same"]
    print(f"\nload at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
