"""A whole function's kernel built ahead of time (runtime/native/aot.py): while Numba does not run in the process,
the compile process builds the kernel as an extension module and the caller loads it without Numba (no second of
Numba's start on the caller's interpreter lock); a later process loads it at the signature's first call. Each run
is a process of its own (whether Numba was imported is the point), with a cache folder shared by the module's
tests (Numba's helper objects are compiled once per user, into its tools folder: kernel_cache.tools_dir)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import sys, time
    import numpy as np
    import phylanx_py as px
    from phylanx_py.runtime.native import tiering
    tiering.HOT_SECONDS = 0.0 if sys.argv[1] == "compile" else 1e9  # later runs: only what was built runs native

    def relax(a, steps, scale):
        # a scalar loop over an array: Python-int arithmetic checked for overflow (s), an array changed in place
        s = 1
        for t in range(steps):
            for i in range(1, a.shape[0] - 1):
                a[i] = 0.5 * a[i] + 0.25 * (a[i - 1] + a[i + 1])
            s = s * scale
        return s, a.sum()

    def check(f, steps, scale):
        a, b = np.linspace(0.0, 1.0, 64), np.linspace(0.0, 1.0, 64)
        got, want = f(a, steps, scale), relax(b, steps, scale)
        assert got[0] == want[0] and abs(got[1] - want[1]) <= 1e-12 * abs(want[1]), (got, want)
        assert np.array_equal(a, b)

    def tier(f):
        line = next(s for s in f.explain().splitlines() if s.startswith("function at"))
        return line.split(" -> ")[1].split(" (")[0].split(":")[0]

    f = px.compile(relax)
    check(f, 5, 3)
    print("first call:", tier(f))
    deadline = time.monotonic() + (240 if sys.argv[1] == "compile" else 0)
    while " -> native" not in f.explain() and time.monotonic() < deadline:
        check(f, 5, 3)
        time.sleep(0.01)
    for _ in range(4):
        check(f, 5, 3)
    # a new kernel's first runs are timed against plain runs (whole.py ``_decide``): a call made while that lasts
    # may run the plain function, which no overflow stops (a loaded CI machine's run ended there once)
    settle = time.monotonic() + 60
    while "measuring" in f.explain() and time.monotonic() < settle:
        check(f, 5, 3)
    print("then:", tier(f))
    print("numba imported:", "numba" in sys.modules)
    check(f, 50, 3)  # 3**50 > 2**63: the kernel stops, the arrays are put back, the call reruns interpreted
    print("after an overflow:", tier(f))
""")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("aot")
    script = folder / "relax.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("PHYLANX_FLOOR", "PHYLANX_NATIVE", "PHYLANX_NATIVE_AOT")}
    env.update(PHYLANX_CACHE_DIR=str(folder / "cache"), PHYLANX_NATIVE_WARM="1")

    def run(mode, **extra):
        done = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=400,
                              env={**env, **extra})
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    run.kernels = folder / "cache" / "kernels"
    return run


def _tools() -> str:
    from phylanx_py.primitives import kernel_cache

    return kernel_cache.tools_dir()


def _built(folder) -> list:
    return sorted(n for n in os.listdir(folder) if n.startswith("aot_") and not n.startswith("aot_mixins_"))

def _runner(run, name: str, text: str):
    """``lines(mode, **env)``: the stdout lines of script ``text`` (written as ``name`` beside the module's cache
    folder) run in a new process on that cache, with ``mode`` as its argument."""
    script = run.kernels.parent.parent / name
    script.write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in ("PHYLANX_FLOOR", "PHYLANX_NATIVE", "PHYLANX_NATIVE_AOT")}
    env.update(PHYLANX_CACHE_DIR=str(run.kernels.parent), PHYLANX_NATIVE_WARM="1")

    def lines(mode, **extra):
        done = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=400,
                              env={**env, **extra})
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    return lines



def test_a_kernel_built_ahead_of_time_runs_without_numba_here_and_from_a_later_processs_first_call(run):
    assert run("compile") == ["first call: the plain function", "then: native", "numba imported: False",
                              "after an overflow: interpreted"]
    assert len(_built(run.kernels)) == 1
    # Numba's helper objects are the user's tools (one folder for every kernel cache folder), not this cache's
    assert not [n for n in os.listdir(run.kernels) if n.startswith("aot_mixins_")]
    assert [n for n in os.listdir(_tools()) if n.startswith("aot_mixins_")]
    # a later process: native at the first call (only what was built can be: HOT_SECONDS out of reach), no Numba
    # (the first call before the translation, which explain() then makes: runtime/native/early.py)
    assert run("later") == ["first call: native from its first call", "then: native",
                            "numba imported: False", "after an overflow: interpreted"]
    # turned off: the later process waits for its calls (none reach HOT_SECONDS here), as with an empty cache
    assert run("later", PHYLANX_NATIVE_AOT="0")[:3] == ["first call: the plain function",
                                                        "then: the plain function", "numba imported: False"]


def test_without_a_c_compiler_the_kernel_is_compiled_here_as_before(run, tmp_path):
    """Numba's pycc needs a C compiler for its helper objects (once per cache folder): without one nothing is
    built and the kernel compiles in this process, Numba imported, with the same answers."""
    other = tmp_path / "cache"
    lines = run("compile", CC="/nonexistent-cc", PHYLANX_CACHE_DIR=str(other))
    assert lines == ["first call: the plain function", "then: native", "numba imported: True",
                     "after an overflow: interpreted"]
    assert _built(other / "kernels") == []


LAYOUTS = textwrap.dedent("""
    import sys, time
    import numpy as np
    import phylanx_py as px
    from phylanx_py.runtime.native import tiering
    tiering.HOT_SECONDS = 0.0

    def smooth(a, steps):
        for _ in range(steps):
            for i in range(1, a.shape[0] - 1):
                a[i] = 0.25 * a[i - 1] + 0.5 * a[i] + 0.25 * a[i + 1]
        return a

    base = np.random.default_rng(1).random(401)
    f = px.compile(smooth)
    view = {"strided": lambda x: x[::2], "reversed": lambda x: x[::-1]}[sys.argv[1]]
    deadline = time.monotonic() + 240
    while True:  # until native, then a few native calls: every one the plain function's answer, to the bit
        native = " -> native" in f.explain()
        x, y = base.copy(), base.copy()
        f(view(x), 3)
        smooth(view(y), 3)
        assert np.array_equal(x, y), np.abs(x - y).max()
        if native or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    for _ in range(4):
        x, y = base.copy(), base.copy()
        f(view(x), 3)
        smooth(view(y), 3)
        assert np.array_equal(x, y), np.abs(x - y).max()
    print(" -> native" in f.explain())
""")


@pytest.mark.parametrize("view", ["strided", "reversed"])
def test_a_view_of_other_strides_is_compiled_here_with_the_plain_functions_answer(run, view):
    """Only C-contiguous arrays are built ahead of time: pycc's argument unboxing ignored a strided view's strides
    (a kernel given ``x[::2]`` wrote x's odd elements, before this was restricted)."""
    script = run.kernels.parent.parent / "layouts.py"
    script.write_text(LAYOUTS)
    env = {k: v for k, v in os.environ.items() if k not in ("PHYLANX_FLOOR", "PHYLANX_NATIVE", "PHYLANX_NATIVE_AOT")}
    done = subprocess.run([sys.executable, str(script), view], capture_output=True, text=True, timeout=400,
                          env={**env, "PHYLANX_CACHE_DIR": str(run.kernels.parent), "PHYLANX_NATIVE_WARM": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"]


EARLY = textwrap.dedent("""
    import builtins, sys, time
    import numpy as np
    import phylanx_py as px
    from phylanx_py.runtime.native import tiering
    tiering.HOT_SECONDS = 0.0 if sys.argv[1] == "compile" else 1e9  # later runs: only what was built runs native

    def grow(n):
        s = 1
        for i in range(n):
            s = s * 3 + i  # Python-int arithmetic checked for overflow: past 2**63 the call reruns interpreted
        return s

    def walk(a, n):
        t = 0.0
        for i in range(n):  # n past the array: an IndexError at this loop, the array changed up to it
            a[i] = a[i] * 0.5 + 1.0
            t = t + a[i]
        return t

    def both(fg, fw):
        assert fg(30) == grow(30)
        a, b = np.linspace(0.0, 1.0, 50), np.linspace(0.0, 1.0, 50)
        assert fw(a, 40) == walk(b, 40) and np.array_equal(a, b)

    if sys.argv[1] == "shadow":  # a global name the functions read is no longer what it was (a builtin)
        range = builtins.range
    fg, fw = px.compile(grow), px.compile(walk)
    both(fg, fw)
    print("first calls before the translation:", fg._code is None, fw._code is None)
    if sys.argv[1] == "compile":
        deadline = time.monotonic() + 240
        while not all(" -> native" in f.explain() for f in (fg, fw)) and time.monotonic() < deadline:
            both(fg, fw)
            time.sleep(0.01)
        for _ in range(8):  # the new kernels' first runs, timed against plain runs, then kept
            both(fg, fw)
    else:
        print(fg.explain().splitlines()[0].split(" (")[0])
        # another signature: not remembered, so the plain function (beside the translation) or the tree
        c, d = np.linspace(0.0, 1.0, 50, dtype=np.float32), np.linspace(0.0, 1.0, 50, dtype=np.float32)
        got, want = fw(c, 40), walk(d, 40)
        assert got == want and type(got) is type(want) and np.array_equal(c, d)
    print("numba imported:", "numba" in sys.modules)
    assert fg(50) == grow(50)  # past 2**63
    a, b = np.linspace(0.0, 1.0, 50), np.linspace(0.0, 1.0, 50)
    try:
        fw(a, 60)
    except px.ExecutionError as e:
        print("error:", type(e.__cause__).__name__, str(e).splitlines()[0].split("/")[-1])
    try:
        walk(b, 60)
    except IndexError:
        pass
    assert np.array_equal(a, b)
""")


def test_a_kept_kernel_runs_a_later_processs_first_calls_before_the_translation(run):
    """A later process's first call of a function whose kernel was kept runs that kernel (runtime/native/early.py):
    no translation in the call, the plain function's answers and errors, an overflow rerun interpreted; a global name
    that changed meanwhile (here ``range``) sends the calls to the translation instead."""
    lines = _runner(run, "early_calls.py", EARLY)

    # (the kernel stops at its test of bounds, nothing changed yet: the call reruns interpreted, NumPy's error)
    error = ("error: IndexError early_calls.py:17:16: in primitive 'slice_at': IndexError: index 50 is out of bounds "
             "for axis 0 with size 50")
    assert lines("compile") == ["first calls before the translation: False False", "numba imported: False", error]
    # (the translation beside the first calls on for this one: the call of another signature runs beside it)
    assert lines("later", PHYLANX_BESIDE="1") == ["first calls before the translation: True True",
                              "function at early_calls.py:8 -> native from its first call", "numba imported: False",
                              error]
    # translated in the first call instead, which loads the kept kernel (warm.py)
    assert lines("shadow") == ["first calls before the translation: False False",
                               "function at early_calls.py:8 -> native", "numba imported: False", error]


PARALLEL = textwrap.dedent("""
    import sys, time
    import numpy as np
    import phylanx_py as px
    from phylanx_py.runtime.native import tiering
    tiering.HOT_SECONDS = 0.0 if sys.argv[1] == "compile" else 1e9
    if sys.argv[1] == "numba":
        import numba
        numba.njit(lambda x: x + 1)(1)  # Numba runs here: the kernel is compiled here and its variant tried

    def axpy(a, b, steps):
        # element by element, independent: a loop that may run on two threads (parallel.py)
        for _ in range(steps):
            for i in range(a.shape[0]):
                b[i] = 0.5 * a[i] + b[i]
        return b.sum()

    def call(f):
        a, b, c = np.linspace(0.0, 1.0, 3000), np.ones(3000), np.ones(3000)
        got, want = f(a, b, 4), axpy(a, c, 4)
        assert got == want and np.array_equal(b, c), (got, want)

    def tier(f):
        line = next(s for s in f.explain().splitlines() if s.startswith("function at"))
        return line.split(" -> ")[1].split(" (")[0].split(":")[0]

    f = px.compile(axpy)
    call(f)
    print("first call:", tier(f))
    deadline = time.monotonic() + (240 if sys.argv[1] != "later" else 0)
    while " -> native" not in f.explain() and time.monotonic() < deadline:
        call(f)
        time.sleep(0.01)
    for _ in range(20):  # timed against the plain function, and kept (a later process runs it from its first call)
        call(f)
    line = next(s for s in f.explain().splitlines() if s.startswith("function at"))
    print(line.split(" -> ")[1].split(" (")[0])
    print("sequential, Numba not here:" , "Numba does not run in this process" in line)
    print("numba imported:", "numba" in sys.modules)
""")


def test_a_kernel_that_may_run_on_two_threads_is_built_ahead_of_time_and_runs_sequential_without_numba(run):
    """A kernel with a loop that may run in parallel is built ahead of time too (aot.PARALLEL_LEFT): in a process
    where Numba does not run it runs sequential, with the plain function's answers, Numba never started here (its
    start held the caller's interpreter lock: calls at 12-20x their plain time); a later process runs it from its
    first call. Where Numba runs, it is compiled there as before (its variant tried)."""
    lines = _runner(run, "axpy.py", PARALLEL)

    assert lines("compile") == ["first call: the plain function", "native", "sequential, Numba not here: True",
                                "numba imported: False"]
    # (explain() translates the function: the ordinary path then loads the same built kernel)
    assert lines("later") == ["first call: native from its first call", "native", "sequential, Numba not here: True",
                              "numba imported: False"]
    assert lines("numba")[2:] == ["sequential, Numba not here: False", "numba imported: True"]


LOOP = textwrap.dedent("""
    import sys, time
    import numpy as np
    import phylanx_py as px
    from phylanx_py.runtime.native import tiering
    tiering.HOT_SECONDS = 0.0 if sys.argv[1] == "compile" else 1e9  # later runs: only what was built runs native

    def smooth(a, steps):
        if steps < 0:
            return None  # (a return inside: the whole function is no kernel, its loop is)
        for _ in range(steps):
            for i in range(1, a.shape[0] - 1):
                a[i] = 0.5 * a[i] + 0.25 * (a[i - 1] + a[i + 1])
        return a.sum()

    def call(f):
        a, b = np.linspace(0.0, 1.0, 64), np.linspace(0.0, 1.0, 64)
        got, want = f(a, 5), smooth(b, 5)
        assert got == want and np.array_equal(a, b), (got, want)

    def tier(f):
        line = next(s for s in f.explain().splitlines() if s.startswith("loop at"))
        return line.split(" -> ")[1].split(" (")[0].split(":")[0]

    f = px.compile(smooth)
    call(f)
    print("first call:", tier(f))
    deadline = time.monotonic() + (240 if sys.argv[1] == "compile" else 0)
    while tier(f) != "native" and time.monotonic() < deadline:
        call(f)
        time.sleep(0.01)
    call(f)
    print("then:", tier(f))
    print("numba imported:", "numba" in sys.modules)
""")


def test_a_loops_kernel_is_built_ahead_of_time_and_a_later_process_runs_it_from_the_loops_first_run(run):
    """A loop's kernel (the whole function is none: it returns from inside) is built ahead of time as a whole
    function's is (loop.py ``ahead_of_time``): native in a process where Numba never starts, the plain function's
    answers, and a later process loads it at the loop's first run (its HOT_SECONDS out of reach there), without
    Numba."""
    lines = _runner(run, "smooth_loop.py", LOOP)

    compiled = lines("compile")
    assert compiled[1:] == ["then: native", "numba imported: False"], compiled
    # (the first call runs the plain function: runtime/floor.py; the loop's first run, in the next call's tree,
    # loads the kernel)
    assert lines("later") == ["first call: not run yet", "then: native", "numba imported: False"]
    # turned off: the later process's loop is not native at once (its mark has it compiled in the background)
    assert lines("later", PHYLANX_NATIVE_AOT="0")[:2] == ["first call: not run yet", "then: interpreted so far"]


BLAS = textwrap.dedent("""
    import sys, time
    import numpy as np
    import phylanx_py as px
    from phylanx_py.runtime.native import tiering
    tiering.HOT_SECONDS = 0.0

    def rows(a, b):
        s = 0.0
        for i in range(a.shape[0]):
            s += np.dot(a[i], b[i])  # a product: Numba's, through SciPy's BLAS
        return s

    a, b = np.arange(60.0).reshape(6, 10), np.ones((6, 10))
    f = px.compile(rows)
    deadline = time.monotonic() + 240
    while " -> native" not in f.explain() and time.monotonic() < deadline:
        assert abs(f(a, b) - rows(a, b)) <= 1e-9
        time.sleep(0.01)
    # ready, not run yet: SciPy's BLAS was imported in the thread that loaded it, not at its first product in a call
    print("scipy blas imported before the kernel ran:", "scipy.linalg.cython_blas" in sys.modules)
    assert abs(f(a, b) - rows(a, b)) <= 1e-9
    print(" -> native" in f.explain(), "numba imported:", "numba" in sys.modules)
""")


def test_a_kernel_built_ahead_of_time_that_calls_blas_has_scipys_blas_imported_before_its_first_call(run):
    """A kernel built ahead of time that calls BLAS imports SciPy's BLAS at its first product, inside the call
    (0.15 s: a trmm call at 35x its plain time): it is imported in the thread that loads the kernel instead
    (blas_pool.import_scipy_blas)."""
    lines = _runner(run, "rows_blas.py", BLAS)
    assert lines("compile") == ["scipy blas imported before the kernel ran: True", "True numba imported: False"]


CHECK = textwrap.dedent("""
    import os, sys, warnings
    warnings.simplefilter("ignore")
    from phylanx_py.runtime.native import aot
    from numba.pycc import platform
    ours = aot.compiler_checked() if sys.argv[1] == "ours" else platform.external_compiler_works()
    print(ours == platform.external_compiler_works(), sorted(os.listdir(os.environ["TMPDIR"])))
""")


@pytest.mark.parametrize("who", ["ours", "numba's"])
def test_the_c_compilers_check_leaves_no_temporary_folder(tmp_path, who):
    """Numba's check for a C compiler (made once per process that builds a kernel ahead of time) leaves its temporary
    folder behind; made through aot.compiler_checked, nothing is left (the same answer, cached for Numba's CC)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    script = tmp_path / "check.py"
    script.write_text(CHECK)
    done = subprocess.run([sys.executable, str(script), "ours" if who == "ours" else "numba"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "TMPDIR": str(folder)})
    assert done.returncode == 0, done.stderr
    same, left = done.stdout.split(" ", 1)
    assert same == "True"
    assert (left.strip() == "[]") == (who == "ours"), left  # Numba's own leaves its folders: what this is about
