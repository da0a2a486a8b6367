"""The native loop tier: same answer as the plain function, or the loop stays interpreted and says why."""
from __future__ import annotations

import contextlib
import os
import threading
import time
import warnings

import numpy as np
import prog_loops as L
import pytest
from helpers import assert_same, check
from phylanx_py.runtime.native import background as native_background
from phylanx_py.runtime.native import tiering as native_tiering
from phylanx_py.runtime.native import tuning as native_tuning

import phylanx_py as px


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setenv("PHYLANX_NATIVE", "force")


def _quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def line_of(fn, text):
    """The line number of the first line of ``fn`` containing ``text``."""
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def run_both(fn, *args):
    """Compiled (forced native) and plain on copies; both results and inputs must agree; returns the compiled."""
    f = px.compile(fn)
    copy = lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    plain_in, comp_in = copy(), copy()
    want = _quiet(fn, *plain_in)
    got = _quiet(f, *comp_in)
    assert_same(got, want)
    assert_same(comp_in, plain_in, "inputs after the call")
    return f


def test_uint8_plus_100_wraps_like_numpy(forced):
    f = run_both(L.u8_add, np.array([1, 155, 200, 255], dtype=np.uint8))
    assert "-> native" in f.explain()


def test_int32_products_wrap_in_int32(forced):
    f = run_both(L.i32_product, np.array([70000, 70000, 3, -5], dtype=np.int32))
    assert "-> native" in f.explain()


def test_float32_arithmetic_with_python_floats(forced):
    f = run_both(L.float32_mix, np.linspace(0, 3, 50, dtype=np.float32))
    assert "-> native" in f.explain()


def test_python_int_past_2_63_runs_interpreted(forced):
    data = np.arange(20, dtype=np.uint8)
    f = run_both(L.fnv_hash, data)
    assert isinstance(f(data), int) and f(data) > 2**63
    assert "past 2**63" in f.explain()


def test_python_int_that_stays_small_runs_native(forced):
    f = run_both(L.fnv_hash64, np.arange(20, dtype=np.uint8))
    assert "-> interpreted" in f.explain()  # % 2**64: a constant past 2**63 keeps it out, and says so
    assert "2**63" in f.explain()


def test_numpy_division_by_zero_gives_inf_and_nan(forced):
    f = run_both(L.ratios, np.array([1.0, 0.0, 2.0, 0.0, 0.0]))
    assert "-> native" in f.explain()


def test_python_division_by_zero_raises_at_the_loop(forced):
    f = px.compile(L.python_division)
    with pytest.raises(px.ExecutionError) as e:
        f(5, 3)
    assert isinstance(e.value.__cause__, ZeroDivisionError)
    assert e.value.lineno == line_of(L.python_division, "for i") and "prog_loops.py" in e.value.filename
    assert f(3, 10) == L.python_division(3, 10)


def test_read_past_the_end_is_an_index_error_at_the_loop(forced):
    f = px.compile(L.read_past_end)
    with pytest.raises(px.ExecutionError) as e:
        f(np.ones(4))
    assert isinstance(e.value.__cause__, IndexError)
    assert e.value.lineno == line_of(L.read_past_end, "for i")


def test_compared_transcendental_results_stay_interpreted(forced):
    f = run_both(L.tanh_count, np.array([0.5, 19.0, 25.0, -3.0]))
    assert "interpreted: np.tanh" not in f.explain()
    assert "inexact" in f.explain()


def test_stored_transcendental_results_run_native(forced):
    f = px.compile(L.tanh_store)
    a = np.linspace(-3, 3, 40)
    np.testing.assert_allclose(f(a), L.tanh_store(a), rtol=1e-15)
    assert "-> native" in f.explain()


def test_float32_sums_in_numpys_pairwise_order(forced):
    x = np.random.default_rng(0).random((5, 300)).astype(np.float32) * 1000
    f = px.compile(L.row_sums)
    assert np.array_equal(f(x), L.row_sums(x))  # bit for bit
    assert "-> native" in f.explain()


def test_swapped_arrays_come_back_as_the_same_objects(forced):
    a, b = np.linspace(0, 1, 12), np.zeros(12)
    ra, rb = px.compile(L.swap_sweeps)(a, b, 3)
    assert ra is b and rb is a
    run_both(L.swap_sweeps, np.linspace(0, 1, 12), np.zeros(12), 3)


def test_loops_over_lists_and_changing_kinds_stay_interpreted(forced):
    f = run_both(L.over_list, [1, 2, 3])
    assert "interpreted: items is a list" in f.explain()
    f = run_both(L.mixed_kinds, 4)
    assert "changes from int to float" in f.explain()


def test_off_switch(monkeypatch):
    monkeypatch.setenv("PHYLANX_NATIVE", "0")
    f = px.compile(L.u8_add)
    check(L.u8_add, np.array([1, 2], dtype=np.uint8))
    f(np.array([1, 2], dtype=np.uint8))
    assert f.explain() == "no loops"


def test_tiered_compiles_in_the_background_then_runs_native(monkeypatch):
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 0.0)
    f = px.compile(L.tanh_store)
    a = np.linspace(-1, 1, 10)
    f(a)  # interpreted; with HOT_SECONDS = 0 the compile starts in the background at once
    deadline = time.monotonic() + 120
    while "compiling" in f.explain() and time.monotonic() < deadline:
        time.sleep(0.1)
    np.testing.assert_allclose(f(a), L.tanh_store(a), rtol=1e-15)
    assert "-> native" in f.explain() and "native runs" in f.explain()


def _fill_then_fail(x, k):
    for i in range(k):
        x[i] = i * 2.0  # fails at i == len(x)
    return x


def test_while_the_kernel_is_not_ready_calls_run_the_plain_function(monkeypatch):
    """Before its kernel is ready a whole function runs as the plain function (CPython's speed; the tree's
    interpreter runs a scalar loop 3-4x slower), and says so in explain()."""
    monkeypatch.setenv("PHYLANX_FLOOR", "1")  # off elsewhere in the suite (conftest.py)
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 1e9)  # never hot: no kernel, only the plain runs
    f = px.compile(L.tanh_store)
    a, b = np.linspace(-1, 1, 10), np.linspace(-1, 1, 10)
    for _ in range(3):
        np.testing.assert_array_equal(f(a), L.tanh_store(b))
        np.testing.assert_array_equal(a, b)
    where = f"{L.__file__.rsplit('/', 1)[-1]}:{L.tanh_store.__code__.co_firstlineno}"
    assert f.explain().splitlines()[-1].startswith(f"function at {where} -> the plain function (3 runs) so far (")


def _nested_sums(a, b):
    n, m = a.shape
    for i in range(n):
        for j in range(m):
            b[i] += a[i, j]
    return b


def test_nested_loops_take_the_tree_while_calls_are_long(monkeypatch):
    """With a loop in a loop the tree can switch the inner loop to native code during a call (the plain function
    cannot): calls after a long one take the tree; a first call, whose length is not known, and calls after a short
    one run as the plain function (a first call never costs more than the plain function when it is short)."""
    from phylanx_py.runtime import floor

    monkeypatch.setenv("PHYLANX_FLOOR", "1")
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 1e9)
    f = px.compile(_nested_sums)
    a = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(f(a, np.zeros(3)), _nested_sums(a, np.zeros(3)))
    assert "-> the plain function (1 runs) so far" in f.explain()  # the first call: short, plain
    np.testing.assert_array_equal(f(a, np.zeros(3)), _nested_sums(a, np.zeros(3)))  # the first was short
    assert "-> the plain function (2 runs) so far" in f.explain()
    monkeypatch.setattr(floor, "OSR_SECONDS", 0.0)  # every call is "long" now
    np.testing.assert_array_equal(f(a, np.zeros(3)), _nested_sums(a, np.zeros(3)))
    assert "-> the plain function (2 runs) so far" in f.explain()  # the tree


def _nested_increments(u, sweeps):
    for _ in range(sweeps):
        for i in range(u.shape[0]):
            for j in range(u.shape[1]):
                u[i, j] += 1.0
    return u


def test_a_long_first_call_stops_its_plain_run_and_reruns_through_the_tree(monkeypatch):
    """A first call of nested loops runs as the plain function for at most ``OSR_SECONDS``, then through the tree,
    which can switch to native code part way through: the arrays the plain run changed are put back first, so the
    answer is one call's (each element incremented ``sweeps`` times, not more)."""
    from phylanx_py.runtime import floor

    monkeypatch.setenv("PHYLANX_FLOOR", "1")
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 1e9)
    monkeypatch.setattr(floor, "OSR_SECONDS", 0.02)
    f = px.compile(_nested_increments)
    u = np.zeros((60, 60))
    out = f(u, 300)  # about 0.15 s plain here: stopped after 0.02 s
    np.testing.assert_array_equal(out, _nested_increments(np.zeros((60, 60)), 300))
    assert out is u
    assert f.explain().splitlines()[-1].split(" -> ")[1].startswith("loops only so far (")  # the tree ran it
    np.testing.assert_array_equal(f(np.zeros((60, 60)), 40), _nested_increments(np.zeros((60, 60)), 40))
    assert f.explain().splitlines()[-1].split(" -> ")[1].startswith("loops only so far (")  # after a long call


def test_a_plain_run_with_a_limit_returns_or_stops_and_leaves_nothing_pending():
    from phylanx_py.runtime import floor

    def spin(seconds):
        end = time.perf_counter() + seconds
        n = 0
        while time.perf_counter() < end:
            n += 1
        return n

    tree_runs = []
    out, seconds = floor.plain_run(spin, (0.01,), {}, [], lambda: tree_runs.append(1), limit=0.2)
    assert out > 0 and 0.01 <= seconds < 0.2 and tree_runs == []
    spin(0.3)  # past the limit: the finished run's stop was cancelled, nothing is raised into this thread later
    a = np.zeros(3)

    def change_and_spin(x):
        x += 1.0
        return spin(5.0)

    t0 = time.perf_counter()
    out, seconds = floor.plain_run(change_and_spin, (a,), {}, [a], lambda: "tree", limit=0.05)
    assert (out, seconds) == ("tree", None) and time.perf_counter() - t0 < 2.0
    np.testing.assert_array_equal(a, np.zeros(3))  # put back before the tree's run
    spin(0.1)


def _deferred_compiles(monkeypatch):
    """Background compiles wait until the returned event is set: the call that starts one ends before its kernel
    can be ready (a kernel in the kernel cache loads in no time, and the first call could then take it, which
    tests/test_native.py's measuring tests did not expect: they failed in turn under load)."""
    import threading

    gate = threading.Event()
    real = native_tiering.in_background
    monkeypatch.setattr(native_tiering, "in_background",
                        lambda compile_fn, *args: real(lambda *a: (gate.wait(60), compile_fn(*a)), *args))
    return gate


def test_a_new_kernel_slower_than_the_plain_function_is_dropped(monkeypatch):
    """The plain function is the floor for a whole-function kernel too: once ready, the kernel's first runs are
    timed against plain runs alternating with them (new ones: plain runs during the compile were slowed by it), and a
    kernel whose median is over the plain runs' is declined, saying so; the calls go back to the floor's choice."""
    from phylanx_py.runtime.native import whole

    monkeypatch.setenv("PHYLANX_FLOOR", "1")
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 0.0)
    # sequential only: while a parallel variant is tried, the kernel's runs are not timed (whole.py _UNDECIDED)
    monkeypatch.setattr(native_tuning, "MIN_SECONDS", 1e9)
    gate = _deferred_compiles(monkeypatch)
    f = px.compile(L.tanh_store)
    a = np.linspace(-1.0, 1.0, 50)
    f(a.copy())  # plain; the compile starts
    gate.set()
    deadline = time.monotonic() + 120
    while "compiling" in f.explain() and time.monotonic() < deadline:
        time.sleep(0.05)
    entry = next(iter(f._code.whole.entries.values()))
    assert entry.kernel is not None and entry.measuring and entry.plain_times == []
    # said, so a benchmark settling the function waits for the decision (calls alternate until then)
    assert "; measuring against the plain function; 0 native runs" in f.explain()
    entry.plain_before[:] = [0.0]  # no plain run before was slow enough to keep the kernel at once
    f(a.copy())  # a native run, timed
    assert entry.native_runs == 1 and len(entry.native_times) == 1
    f(a.copy())  # then a plain run, timed
    assert len(entry.plain_times) == 1
    entry.native_times[:] = [1.0] * whole.MEASURED  # as if the kernel took a second a call
    entry.plain_times[:] = [0.001] * (whole.MEASURED - 1)
    np.testing.assert_allclose(f(a.copy()), L.tanh_store(a.copy()), rtol=1e-15)  # the last plain run: decided
    assert not entry.measuring and entry.declined.startswith("the plain function is faster (")
    assert "-> interpreted: the plain function is faster (" in f.explain()
    np.testing.assert_allclose(f(a.copy()), L.tanh_store(a.copy()), rtol=1e-15)


def test_a_kernel_ready_before_the_first_plain_run_ends_is_still_measured(monkeypatch):
    # a kernel loaded from the disk cache can be ready while the call that started its compile still runs the plain
    # function: whether it is measured was decided by the plain runs counted so far (none), so it skipped the
    # measurement (flaky under load); here the compile runs at once, in the first call, to make that order certain
    monkeypatch.setenv("PHYLANX_FLOOR", "1")
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 0.0)
    monkeypatch.setattr(native_tuning, "MIN_SECONDS", 1e9)  # sequential only (as above)
    monkeypatch.setattr(native_tiering, "in_background", lambda compile_fn, *args: compile_fn(*args))
    f = px.compile(L.tanh_store)
    a = np.linspace(-1.0, 1.0, 50)
    np.testing.assert_allclose(f(a.copy()), L.tanh_store(a.copy()), rtol=1e-15)
    entry = next(iter(f._code.whole.entries.values()))
    assert entry.kernel is not None and entry.plain_runs == 0 and entry.native_runs == 1 and entry.measuring
    assert "measuring against the plain function" in f.explain()
    np.testing.assert_allclose(f(a.copy()), L.tanh_store(a.copy()), rtol=1e-15)
    assert entry.plain_runs == 1 and len(entry.plain_times) == 1  # the next call is a plain run, timed


def test_a_new_kernel_clearly_faster_than_the_plain_runs_before_it_is_kept_at_once(monkeypatch):
    from phylanx_py.runtime.native import whole

    monkeypatch.setenv("PHYLANX_FLOOR", "1")
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 0.0)
    monkeypatch.setattr(native_tuning, "MIN_SECONDS", 1e9)  # sequential only (as above)
    gate = _deferred_compiles(monkeypatch)
    f = px.compile(L.tanh_store)
    a = np.linspace(-1.0, 1.0, 50)
    f(a.copy())
    gate.set()
    deadline = time.monotonic() + 120
    while "compiling" in f.explain() and time.monotonic() < deadline:
        time.sleep(0.05)
    entry = next(iter(f._code.whole.entries.values()))
    assert entry.measuring
    entry.plain_before[:] = [1.0]  # as if the plain runs had taken a second
    f(a.copy())
    assert not entry.measuring and not entry.declined and entry.plain_times == [] and whole.CLEARLY_FASTER > 1
    assert f._code.whole.quick is not None  # straight from the call from now on


def test_a_plain_run_that_fails_reruns_through_the_tree_for_its_error(monkeypatch):
    """A plain run that raises puts back the arrays it changed and the call reruns through the tree: the error is
    the ExecutionError every tier gives (the primitive, the user's line), and the arrays end as the plain function
    leaves them (written up to the failing index once, not twice)."""
    monkeypatch.setenv("PHYLANX_FLOOR", "1")
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 1e9)
    f = px.compile(_fill_then_fail)
    x, want = np.full(4, -1.0), np.full(4, -1.0)
    with pytest.raises(IndexError) as plain_err:
        _fill_then_fail(want, 6)
    f(np.zeros(4), 2)  # a plain run first: the signature (array, small int) is known
    with pytest.raises(px.ExecutionError) as err:
        f(x, 6)
    line = line_of(_fill_then_fail, "x[i] = i * 2.0")
    assert str(err.value).startswith(f"{__file__}:{line}:9: in primitive 'store_at': IndexError: {plain_err.value}")
    np.testing.assert_array_equal(x, want)
    assert "the plain function (1 runs)" in f.explain()


def test_a_first_call_does_not_import_numba(tmp_path):
    """A first call costs about what the plain function costs: it does not import Numba (0.3-0.6 s here) to type
    its arguments for a kernel that compiles later, in the background (stand-ins of the arrays are typed then)."""
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "first_call.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import phylanx_py as px

        def count_positive(a, n):
            c = 0
            for i in range(n):
                if a[i] > 0:
                    c += 1
            return c

        a = np.linspace(-1.0, 1.0, 1001)
        assert px.compile(count_positive)(a, 1001) == count_positive(a, 1001)
        print("numba imported:", "numba" in sys.modules)
    """))
    env = {k: v for k, v in os.environ.items() if k != "PHYLANX_FLOOR"}  # as a user runs it
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "numba imported: False\n"


def test_a_failure_of_the_tier_itself_leaves_the_loop_interpreted(monkeypatch):
    """A failure inside the native tier's own work on a loop (seen once in an NPBench run: a StopIteration while
    preparing a loop failed the user's call as an ExecutionError at the loop's line) is never the user's call's:
    the loop runs interpreted from then on and explain() says why (forced, as the tests force the tier, it raises)."""
    from phylanx_py.runtime.native.loop import NativeLoop

    def broken(self, args):
        raise StopIteration

    monkeypatch.setattr(NativeLoop, "entry", broken)
    monkeypatch.delenv("PHYLANX_NATIVE", raising=False)
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    f = px.compile(L.row_sums)
    for _ in range(2):
        np.testing.assert_array_equal(f(x), L.row_sums(x))
    assert "interpreted: the native tier failed on it (StopIteration: )" in f.explain()


def test_a_background_compile_runs_in_the_compile_process(monkeypatch, tmp_path):
    """A kernel compiled in the background is compiled first by the compile process (off this interpreter's
    lock), into the kernel cache: the thread's own compile then loads Numba's machine code from there. The child
    writes the cache folder this process uses, and the answer is the plain function's."""
    import glob

    from phylanx_py.primitives import kernel_cache
    from phylanx_py.runtime.native import compile_process

    monkeypatch.setattr(kernel_cache, "CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 0.0)
    monkeypatch.delenv("PHYLANX_COMPILE_PROCESS", raising=False)
    monkeypatch.setenv("PHYLANX_FLOOR", "1")
    compile_process.close()
    asked = []
    real_warm = compile_process.warm
    monkeypatch.setattr(compile_process, "warm", lambda *a: asked.append(real_warm(*a)) or asked[-1])
    f = px.compile(L.tanh_store)
    x = np.linspace(-1.0, 1.0, 50)
    np.testing.assert_array_equal(f(x.copy()), L.tanh_store(x.copy()))  # the plain function; the compile starts
    deadline = time.monotonic() + 120
    while "compiling" in f.explain() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert asked == [True]  # the child compiled it
    child = compile_process._child[0]
    assert child is not None and child is not False and child.poll() is None
    assert glob.glob(str(tmp_path / "cache" / "kernels" / "__pycache__" / "native_*.nbi"))
    np.testing.assert_allclose(f(x.copy()), L.tanh_store(x.copy()), rtol=1e-15)  # Numba's tanh: 1 ulp
    assert " -> native (whole function" in f.explain()
    compile_process.close()
    assert child.poll() == 0  # it ends when its pipe closes


def test_the_compile_process_starts_when_code_is_first_lowered(monkeypatch):
    """The compile process starts when a loop is first lowered for the native tier (compile_process.prestart), not
    at its first compile request: its start (an interpreter, Numba imported) overlaps the interpreted runs. Here no
    compile is ever asked for (never hot), yet the process is there."""
    from phylanx_py.runtime.native import compile_process

    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 1e9)
    monkeypatch.delenv("PHYLANX_NATIVE", raising=False)
    monkeypatch.delenv("PHYLANX_COMPILE_PROCESS", raising=False)
    compile_process.close()
    try:
        f = px.compile(L.tanh_store)
        x = np.linspace(-1.0, 1.0, 50)
        np.testing.assert_array_equal(f(x.copy()), L.tanh_store(x.copy()))
        deadline = time.monotonic() + 30
        while compile_process._child[0] is None and time.monotonic() < deadline:
            time.sleep(0.01)
        child = compile_process._child[0]
        assert child is not None and child is not False and child.poll() is None
        assert "compiling" not in f.explain()  # nothing was asked of it
    finally:
        compile_process.close()


def test_a_function_compiled_in_the_main_thread_starts_the_compile_process_before_its_first_call(monkeypatch):
    """Decorating a function starts the compile process (loop_tiers.prepare), so its start overlaps the program's
    set-up; a function compiled in another thread (a Dask worker unpickling one in a task) starts nothing."""
    import threading

    from phylanx_py.runtime.native import compile_process

    monkeypatch.delenv("PHYLANX_NATIVE", raising=False)
    monkeypatch.delenv("PHYLANX_COMPILE_PROCESS", raising=False)
    compile_process.close()
    try:
        done = []
        t = threading.Thread(target=lambda: done.append(px.compile(L.tanh_store)))
        t.start()
        t.join()
        time.sleep(0.2)
        assert done and compile_process._child[0] is None
        px.compile(L.tanh_store)  # never called
        deadline = time.monotonic() + 30
        while compile_process._child[0] is None and time.monotonic() < deadline:
            time.sleep(0.01)
        child = compile_process._child[0]
        assert child is not None and child is not False and child.poll() is None
    finally:
        compile_process.close()


def test_the_compile_process_runs_at_a_lower_priority(monkeypatch, tmp_path):
    """The compile process runs niced (PHYLANX_COMPILE_NICE, default 19; 0 leaves it as the parent): at equal
    priority it took half a core from NumPy's BLAS threads on a 2-core machine, slowing the plain function while
    its kernel was built. Each child answers a request first (a source that does not compile: its reply is "no"),
    so it has passed the point where it lowers its priority."""
    from phylanx_py.primitives import kernel_cache
    from phylanx_py.runtime.native import compile_process

    monkeypatch.setattr(kernel_cache, "CACHE_DIR", str(tmp_path / "cache"))  # the request's folder
    monkeypatch.setenv("PHYLANX_COMPILE_RISE", "1000")  # a slow start here must not make the request rise
    own = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        for setting, expected in ((None, 19), ("0", own), ("3", min(own + 3, 19))):
            compile_process.close()
            if setting is None:
                monkeypatch.delenv("PHYLANX_COMPILE_NICE", raising=False)
            else:
                monkeypatch.setenv("PHYLANX_COMPILE_NICE", setting)
            monkeypatch.delenv("PHYLANX_COMPILE_PROCESS", raising=False)
            assert compile_process.warm("fused", "this is not Python", ()) is False
            child = compile_process._child[0]
            assert child is not None and child is not False and child.poll() is None
            assert os.getpriority(os.PRIO_PROCESS, child.pid) == expected, setting
    finally:
        compile_process.close()


def test_a_request_left_unanswered_rises_to_the_callers_priority(monkeypatch, tmp_path):
    """A request the niced child has not answered within PHYLANX_COMPILE_RISE seconds is compiled at the caller's
    priority: a caller filling both cores (BLAS, a training loop) left the niced child a few percent of a core, and
    a fused kernel arrived after 10-65 s instead of 0.5-3. Whether the child is reniced (a privileged caller) or
    replaced by one started at the caller's priority, the kernel is compiled, the child compiling it runs at the
    caller's priority meanwhile (seen from a thread here), and goes back to the low one once it has answered."""
    from phylanx_py.primitives import fused as fz
    from phylanx_py.primitives import kernel_cache
    from phylanx_py.runtime.native import blas_pool, compile_process

    monkeypatch.setattr(kernel_cache, "CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PHYLANX_COMPILE_PROCESS", raising=False)
    monkeypatch.delenv("PHYLANX_COMPILE_NICE", raising=False)
    monkeypatch.delenv("PHYLANX_COMPILE_BLAS_CAP", raising=False)
    monkeypatch.setenv("PHYLANX_COMPILE_RISE", "0")  # no child answers at once: the request rises
    spec = ("add", ("multiply", ("arg", 0), ("const", 2.0)), ("arg", 0))
    x = np.ones(4)
    dtypes, in_dtypes = fz._dtypes(spec, (x,))
    source, _ = fz._source(spec, in_dtypes, dtypes)
    own = os.getpriority(os.PRIO_PROCESS, 0)
    compile_process.close()
    seen, done = set(), threading.Event()

    def watch():  # the priority of whichever child is compiling, every 5 ms
        while not done.is_set():
            child = compile_process._child[0]
            try:
                if child:
                    seen.add(os.getpriority(os.PRIO_PROCESS, child.pid))
            except OSError:
                pass
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    np.ones((2, 2)) @ np.ones((2, 2))
    (get, put), *_ = blas_pool._pools()  # NumPy's OpenBLAS (loaded: it is the one NumPy's product used)
    cores, original, counts = len(os.sched_getaffinity(0)), get(), []
    put(cores)  # every core, so that there is something to leave
    real_fewer = blas_pool.fewer_threads

    @contextlib.contextmanager
    def fewer_seen():  # the real one; NumPy's pool count read while it holds
        with real_fewer() as lowered:
            counts.append(get())
            yield lowered

    monkeypatch.setattr(blas_pool, "fewer_threads", fewer_seen)
    watcher.start()
    try:
        rises = compile_process.RISES[0]
        assert compile_process.warm("fused", source, ()) is True
        done.set()
        watcher.join()
        assert compile_process.RISES[0] == rises + 1
        assert own in seen
        # while it rose, NumPy's products left the compile a core; after, their count is what it was
        assert counts == [max(cores - 1, 1)] and get() == cores
        child = compile_process._child[0]
        assert child is not None and child is not False and child.poll() is None
        assert os.getpriority(os.PRIO_PROCESS, child.pid) == min(own + 19, 19)  # back down
        monkeypatch.setenv("PHYLANX_COMPILE_RISE", "1000")
        assert compile_process.warm("fused", "this is not Python", ()) is False  # answered in time: no rise
        assert compile_process.RISES[0] == rises + 1
    finally:
        done.set()
        put(original)
        compile_process.close()


def test_an_unprivileged_caller_rises_with_a_new_child(monkeypatch, tmp_path):
    """Without the right to lower another process's niceness (a user who is not root: the kernel says EPERM, as the
    stand-in for os.setpriority here does), a request that rises goes to a new child started at the caller's
    priority; the niced one is retired (its stdin closed, it ends after its compile), the kernel is compiled."""
    from phylanx_py.primitives import fused as fz
    from phylanx_py.primitives import kernel_cache
    from phylanx_py.runtime.native import compile_process

    real = os.setpriority

    def unprivileged(which, who, prio):  # Linux's rule for a user without CAP_SYS_NICE
        if prio < os.getpriority(which, who):
            raise PermissionError(1, "Operation not permitted")
        real(which, who, prio)

    monkeypatch.setattr(kernel_cache, "CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PHYLANX_COMPILE_PROCESS", raising=False)
    monkeypatch.delenv("PHYLANX_COMPILE_NICE", raising=False)
    monkeypatch.setenv("PHYLANX_COMPILE_RISE", "0")
    monkeypatch.setattr(compile_process.os, "setpriority", unprivileged)
    spec = ("add", ("multiply", ("arg", 0), ("const", 3.0)), ("arg", 0))
    dtypes, in_dtypes = fz._dtypes(spec, (np.ones(4),))
    source, _ = fz._source(spec, in_dtypes, dtypes)
    compile_process.close()
    try:
        compile_process.prestart()
        deadline = time.monotonic() + 60
        while not compile_process._child[0] and time.monotonic() < deadline:
            time.sleep(0.01)
        first = compile_process._child[0]
        assert compile_process.warm("fused", source, ()) is True
        child = compile_process._child[0]
        assert child is not first and child.poll() is None
        assert first.wait(timeout=120) == 0  # retired: it finished and ended
        own = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, child.pid) == min(own + 19, 19)  # back down
    finally:
        compile_process.close()


def test_the_compile_process_ends_with_its_parent_even_while_busy(tmp_path):
    """A compile still running when its parent process ended went on alone for minutes (seen here: four orphaned
    compile processes after scripts had finished); the child's watchdog ends it once its parent is gone. A parent
    starts a grandchild running the watchdog while "compiling" (sleeping), then exits at once."""
    import subprocess
    import sys

    pid_file = tmp_path / "pid"
    script = (
        "import os, sys, time, threading\n"
        "from phylanx_py.runtime.native import compile_child\n"
        "if os.fork() == 0:\n"
        "    threading.Thread(target=compile_child._exit_with_parent, args=(os.getppid(), 0.05), daemon=True).start()\n"
        f"    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "    time.sleep(60)\n"
        "    os._exit(3)\n"
        f"while not os.path.exists({str(pid_file)!r}): time.sleep(0.01)\n"
        "time.sleep(0.2)\n"
        "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] in "ZX":  # ended; a zombie if nobody reaps it
                    return
        except FileNotFoundError:
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    raise AssertionError("the orphaned child was still running 20 s after its parent ended")


def test_a_fork_while_a_thread_waits_for_the_compile_process_does_not_hang_the_child(tmp_path):
    """The compile process's pipes are unbuffered: a fork while a background thread waited for a reply left the
    forked child a buffered reader locked by a thread it does not have, and the child's at-fork handler closing it
    waited forever (a review's multiprocessing pool started during a fused build never returned)."""
    import subprocess
    import sys

    script = (
        "import os, sys, threading, time\n"
        "import numba\n"
        "from phylanx_py.runtime.native import compile_process\n"
        "src = 'import numba\\n@numba.njit(cache=True)\\ndef kernel(x):\\n    return x + 1\\n'\n"
        "t = threading.Thread(target=compile_process.warm, args=('load_kernel', src, (numba.int64,)))\n"
        "t.start()\n"
        "time.sleep(0.5)  # the thread waits for the reply (the child starts, imports Numba, compiles)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(7)\n"
        "deadline = time.monotonic() + 30\n"
        "while time.monotonic() < deadline:\n"
        "    done, status = os.waitpid(pid, os.WNOHANG)\n"
        "    if done:\n"
        "        print('child', os.waitstatus_to_exitcode(status)); break\n"
        "    time.sleep(0.05)\n"
        "else:\n"
        "    os.kill(pid, 9); print('child hung')\n"
        "t.join(120)\n")
    env = {**os.environ, "PHYLANX_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PHYLANX_COMPILE_PROCESS", None)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "child 7\n"


def test_at_exit_no_compile_starts_here_and_running_ones_are_waited_for(monkeypatch):
    """At interpreter exit a background compile does not start Numba's work in this process (a daemon thread inside
    LLVM while the interpreter finalised crashed the process); one that only waits for the compile process's reply
    does not hold the exit, and stops when the reply comes; one compiling here is waited for."""
    import threading

    from phylanx_py.runtime.native import compile_process

    monkeypatch.setattr(native_background, "_exit", {"exiting": False, "inside": 0})
    replied, steps = threading.Event(), []
    monkeypatch.setattr(compile_process, "warm", lambda *a: replied.wait(10))

    def compile_fn():
        steps.append("typing")
        native_background.warm_elsewhere("load_sequential", "source", ())
        steps.append("compiling here")

    t = native_background.in_background(compile_fn)
    deadline = time.monotonic() + 10
    while native_background._exit["inside"] != 0 or not steps:  # waiting for the reply: not inside
        assert time.monotonic() < deadline
        time.sleep(0.01)
    t0 = time.monotonic()
    native_background._at_exit()
    assert time.monotonic() - t0 < 1  # the exit did not wait for the reply
    replied.set()
    t.join(10)
    assert steps == ["typing"]  # stopped: no compile in this process after the exit began
    later = []
    native_background.in_background(lambda: later.append(1)).join(10)
    assert later == []  # and none starts

    monkeypatch.setattr(native_background, "_exit", {"exiting": False, "inside": 0})
    started, done = threading.Event(), threading.Event()
    native_background.in_background(lambda: (started.set(), time.sleep(0.5), done.set()))
    assert started.wait(10)
    native_background._at_exit()
    assert done.is_set()  # the exit waited for the compile running here


def _spd(n, dtype=np.float64):
    M = np.random.default_rng(n).random((n, n))
    return (M @ M.T + n * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("fn, args", [
    (L.cholesky_dot, lambda: (_spd(12),)),
    (L.lu_matmul, lambda: (_spd(9),)),
    (L.matvec_steps, lambda: (_spd(6), np.ones(6), 5)),
    (L.products_of_blocks, lambda: (_spd(4).reshape(2, 2, 4)[0].copy(), _spd(4), np.zeros((2, 4)))),
])
def test_matrix_products_in_loops_run_natively(forced, fn, args):
    """``@``, ``np.dot`` and ``np.matmul`` of 1-D/2-D float arrays of one dtype run natively (Numba's np.dot;
    strided slices too), with the plain function's answer to float tolerance."""
    f = run_both(fn, *args())
    assert "-> native" in f.explain() and "has no native form" not in f.explain()


def test_float32_matrix_products_in_loops_agree_to_float32_rounding(forced):
    """In float32 the products' summation order (BLAS's) shows at float32's precision: the answer agrees with the
    plain function's to a few float32 ulps, as NumPy's own BLAS calls agree with each other."""
    A = _spd(9, np.float32)
    f = px.compile(L.lu_matmul)
    got, want = f(A.copy()), L.lu_matmul(A.copy())
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)
    assert "-> native" in f.explain()


def test_a_matrix_product_is_never_compared_natively(forced):
    """A product's last bit may differ from NumPy's BLAS: comparing it would change a count, so the loop stays
    interpreted and says why."""
    a, b = np.random.default_rng(1).random((20, 3)), np.full(3, 0.3)
    f = run_both(L.dot_compared, a, b)
    assert "inexact result" in f.explain()


def test_a_matrix_product_of_mixed_dtypes_stays_interpreted(forced):
    f = run_both(L.products_of_blocks, np.ones((2, 4), np.float32), np.ones((4, 4)), np.zeros((2, 4)))
    assert "a matrix product of other than 1-D/2-D arrays of one dtype, float64, float32 or complex128" in \
        f.explain()


def _complex(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.random(shape) + 1j * rng.random(shape)


def test_complex128_array_sums_products_and_matrix_products_run_natively(forced):
    """NPBench's scattering_self_energies: + - * and negation of complex128 arrays, and 2-D complex128 matrix
    products (BLAS's zgemm), as NumPy computes them (the products to float tolerance: their last bit may differ)."""
    f = run_both(L.complex_rows, _complex((4, 3), 1), _complex((4, 3), 2), np.zeros((4, 3), complex))
    assert "-> native" in f.explain() and "interpreted" not in f.explain()
    f = run_both(L.complex_products, _complex((3, 4, 4), 3), _complex((3, 4, 4), 4), np.zeros((3, 4, 4), complex))
    assert "-> native" in f.explain() and "interpreted" not in f.explain()


@pytest.mark.parametrize("fn, why", [
    (L.complex_compared, "of an inexact result"),
    (L.complex_row_quotients, "a division of NumPy complex numbers (Numba raises at zero, NumPy gives inf/nan)"),
])
def test_complex_products_compared_and_complex_quotients_stay_interpreted(forced, fn, why):
    z, c = _complex((3, 2), 5), _complex((3, 2), 6)
    c[1, 0] = 0  # a zero divisor: NumPy's inf/nan (with its warning)
    with np.errstate(all="ignore"):
        f = run_both(fn, z, *((c,) if fn is L.complex_row_quotients else ()), np.zeros((3, 2), complex))
    assert why in f.explain() and "-> native" not in f.explain()


@pytest.mark.parametrize("n", [0, 1, 7])
def test_python_scalars_that_become_numpy_scalars_keep_their_type(forced, n):
    f = run_both(L.accumulate, np.linspace(0, 1, n), np.arange(n))
    assert "-> native" in f.explain()


def test_each_array_layout_gets_its_kernel(forced):
    a = np.arange(24.0).reshape(4, 6)
    run_both(L.tanh_store, a[0])
    run_both(L.tanh_store, a[:, 1])  # strided: another kernel, not a typing error at the loop's line
    f = px.compile(L.tanh_store)
    f(a[0].copy()), f(a[:, 1])
    assert f.explain().count("-> native") == 2


def test_index_arithmetic_unchecked_only_for_small_arguments(forced):
    f = run_both(L.offset_store, np.zeros(4, dtype=np.int64), 5)
    assert "-> native" in f.explain()
    code = f._compile()
    sources = [e.source for e in code.native_loops[0].entries.values()] + \
        [e.source for e in code.whole.entries.values()]  # forced: the whole function runs native
    assert sources and not any("_ck_add" in s for s in sources)  # i < len(a), k < 2**40: no overflow check
    big = 2**63 - 2
    with pytest.raises(OverflowError):
        L.offset_store(np.zeros(4, dtype=np.int64), big)
    with pytest.raises(px.ExecutionError) as e:
        f(np.zeros(4, dtype=np.int64), big)  # checked kernel: overflow, arrays restored, interpreted: NumPy's error
    assert isinstance(e.value.__cause__, OverflowError)


def test_only_arrays_a_checked_kernel_may_change_are_copied_before_it_runs(forced):
    """A kernel that may stop on an overflow reruns interpreted on the values it started with, so the arrays it
    may change are copied first; one it only reads is not (a hash over a large array paid a copy a call). Which
    arrays count, use by use: tests/test_native_kir.py (kir.Printed.arrays_written)."""
    f = px.compile(L.fnv_hash)  # checked (a Python int may pass 2**63); data only read: nothing copied
    data = np.arange(20, dtype=np.uint8)
    assert f(data[:3]) == L.fnv_hash(data[:3])
    entries = list(f._compile().whole.entries.values())
    assert entries and all(e.checked and e.writes == () for e in entries)
    assert f(data) == L.fnv_hash(data)  # past 2**63: rerun interpreted, data as it was
    assert np.array_equal(data, np.arange(20, dtype=np.uint8))


@pytest.mark.parametrize("fn, make, extra", [
    (L.bump_none_view, lambda: np.zeros(3, np.int64), ()),
    (L.bump_tuple_none_view, lambda: np.zeros(3, np.int64), ()),
    (L.bump_row_none_view, lambda: np.zeros((2, 3), np.int64), ()),
    (L.bump_empty_key_view, lambda: np.zeros(3, np.int64), ((),)),
])
@pytest.mark.parametrize("keyword", [False, True])  # a keyword call runs the loop tier, a positional one the whole
def test_a_view_written_before_an_overflow_is_undone_for_the_rerun(forced, fn, make, extra, keyword):
    """Indices held by names (None, (None,), ()) make views the kernel's source cannot tell from element reads: the
    lowerer names the arrays it indexed into views, and they are copied before a checked kernel runs. Here each call
    writes through the view, then a Python int passes 2**63: the rerun starts from the values the call began with,
    as the plain function does (a review found [18, 0, 0] against [10, 0, 0])."""
    f = px.compile(fn)
    call = (lambda g, a, n: g(a, *extra, n=n)) if keyword else (lambda g, a, n: g(a, *extra, n))
    call(f, make(), 2)  # compiled, no overflow
    got_a, want_a = make(), make()
    assert call(f, got_a, 10) == call(fn, want_a, 10)
    np.testing.assert_array_equal(got_a, want_a)
    assert "past 2**63" in f.explain()


def test_arrays_after_an_error_in_native_code_are_as_the_plain_loop_left_them(forced):
    a = np.arange(5.0)
    plain_b, native_b = np.zeros(5), np.zeros(5)
    with pytest.raises(IndexError):
        L.shift_left(a, plain_b)
    with pytest.raises(px.ExecutionError) as e:
        px.compile(L.shift_left)(a, native_b)
    assert isinstance(e.value.__cause__, IndexError)
    np.testing.assert_array_equal(native_b, plain_b)
    assert plain_b[3] == 8.0 and plain_b[4] == 0.0


def test_whole_function_runs_native_without_an_evaluation(forced, monkeypatch):
    f = run_both(L.tanh_store, np.linspace(-1, 1, 10))
    assert "-> native (whole function" in f.explain()
    from phylanx_py.runtime import base
    monkeypatch.setattr(base, "Evaluation", None)  # a call that made one would fail
    a = np.linspace(-1, 1, 10)
    np.testing.assert_allclose(f(a), L.tanh_store(np.linspace(-1, 1, 10)), rtol=1e-15)


def test_whole_function_error_in_a_later_loop_is_at_that_loop(forced):
    a, plain_b, native_b = np.arange(5.0), np.zeros(5), np.zeros(5)
    with pytest.raises(IndexError):
        L.two_loops(a, plain_b)
    with pytest.raises(px.ExecutionError) as e:
        px.compile(L.two_loops)(a, native_b)
    assert isinstance(e.value.__cause__, IndexError)
    assert e.value.lineno == line_of(L.two_loops, "s += b") - 1
    np.testing.assert_array_equal(native_b, plain_b)


def test_whole_function_error_before_any_change_is_the_interpreters(forced, monkeypatch):
    f = px.compile(L.read_then_loop)
    with pytest.raises(px.ExecutionError) as e:
        f(np.ones(4), np.zeros(3))
    monkeypatch.setenv("PHYLANX_NATIVE", "0")
    with pytest.raises(px.ExecutionError) as plain:
        px.compile(L.read_then_loop)(np.ones(4), np.zeros(3))
    assert str(e.value) == str(plain.value) and e.value.lineno == line_of(L.read_then_loop, "first = ")
    monkeypatch.setenv("PHYLANX_NATIVE", "force")
    run_both(L.read_then_loop, np.ones(12), np.zeros(3))
    assert "-> native (whole function" in f.explain()


def test_whole_function_declines_a_raising_statement_after_a_loop(forced):
    f = run_both(L.loop_then_read, np.ones(12), np.zeros(12))
    assert "function at" in f.explain() and "after a loop changed values" in f.explain()
    assert "loop at" in f.explain() and "-> native (2 args" in f.explain()  # the loop itself still goes native


def test_whole_function_not_taken_for_keywords_or_other_values(forced):
    f = px.compile(L.tanh_store)
    a = np.linspace(-1, 1, 6)
    np.testing.assert_allclose(f(a=a.copy()), L.tanh_store(a.copy()), rtol=1e-15)
    assert "whole function" not in f.explain()  # keyword arguments: the ordinary path
    np.testing.assert_allclose(f(a.copy()), L.tanh_store(a.copy()), rtol=1e-15)
    assert "whole function" in f.explain()


def test_whole_function_index_arithmetic_on_a_shape_is_unchecked(forced):
    f = run_both(L.shift_by_shape, np.arange(6.0), np.zeros(6))
    (entry,) = f._compile().whole.entries.values()
    assert entry.kernel is not None and "_ck_" not in entry.source  # n = a.shape[0] is bound once: i + 1 fits


def _quick_runs(f):
    """Native runs of the whole function's signatures, and whether its quick per-call path is built."""
    whole = f._compile().whole
    return sum(e.native_runs for e in whole.entries.values()), whole.quick is not None


def test_disable_set_after_native_calls_runs_the_plain_function(forced):
    """``f.disable = True`` after the quick path is built: later calls are the plain function's (a review found the
    quick path ignoring it)."""
    f = px.compile(L.scaled_sum)
    a = np.arange(5.0)
    assert f(a, 2.0) == L.scaled_sum(a, 2.0) and f(a, 2.0) == L.scaled_sum(a, 2.0)
    runs, built = _quick_runs(f)
    assert built and runs >= 1
    f.disable = True
    assert f(a, 3.0) == L.scaled_sum(a, 3.0)
    assert _quick_runs(f) == (runs, True)  # no native run: the plain function ran


def test_whole_function_quick_path_runs_later_calls_and_keeps_their_errors(forced, monkeypatch):
    from phylanx_py.runtime.native import whole

    f = px.compile(L.shift_left)
    assert_same(f(np.arange(6.0), np.zeros(5)), L.shift_left(np.arange(6.0), np.zeros(5)))
    assert _quick_runs(f) == (1, True)
    with monkeypatch.context() as m:
        m.setattr(whole.WholeFunction, "call", None)  # the general path would fail: calls take the quick one
        assert_same(f(np.arange(7.0), np.zeros(6)), L.shift_left(np.arange(7.0), np.zeros(6)))
    a, plain_b, native_b = np.arange(5.0), np.zeros(5), np.zeros(5)
    with pytest.raises(IndexError):
        L.shift_left(a, plain_b)
    with pytest.raises(px.ExecutionError) as e:
        # same kinds: the quick path, whose kernel stops at its test of bounds (a is too short); the call reruns
        # interpreted: the statement's error, with the arrays as the plain loop left them
        f(a, native_b)
    assert isinstance(e.value.__cause__, IndexError) and e.value.lineno == line_of(L.shift_left, "b[i] = a[i + 1]")
    np.testing.assert_array_equal(native_b, plain_b)
    assert _quick_runs(f) == (2, False)  # the signature declined: no quick path left

    g = px.compile(L.python_division)
    assert g(3, 10) == L.python_division(3, 10) and g(2, 10) == L.python_division(2, 10)
    with pytest.raises(px.ExecutionError) as e:
        g(5, 3)
    assert isinstance(e.value.__cause__, ZeroDivisionError)
    assert e.value.lineno == line_of(L.python_division, "for i")


def test_whole_function_quick_path_falls_back_as_the_general_path_does(forced, monkeypatch):
    f = px.compile(L.read_then_loop)
    run_both(f.__wrapped__, np.ones(12), np.zeros(3))
    assert_same(f(np.ones(12), np.zeros(3)), L.read_then_loop(np.ones(12), np.zeros(3)))
    assert _quick_runs(f) == (1, True)
    with pytest.raises(px.ExecutionError) as e:  # a raise before anything changed: the interpreter's own error
        f(np.ones(4), np.zeros(3))
    assert e.value.lineno == line_of(L.read_then_loop, "first = ") and isinstance(e.value.__cause__, IndexError)

    h = px.compile(L.fnv_hash)  # a Python int past 2**63 on the quick path: arrays put back, rerun interpreted
    empty, data = np.zeros(0, np.uint8), np.arange(20, dtype=np.uint8)
    assert h(empty) == L.fnv_hash(empty) and _quick_runs(h) == (1, True)
    assert h(data) == L.fnv_hash(data) and h(data) > 2**63
    assert "past 2**63" in h.explain() and _quick_runs(h) == (1, False)
    assert h(empty) == L.fnv_hash(empty)


def test_whole_function_quick_path_leaves_other_kinds_profiles_and_the_off_switch_to_the_general_path(forced,
                                                                                                      monkeypatch):
    f = px.compile(L.tanh_store)
    a = np.linspace(-1, 1, 8)
    f(a.copy()), f(a.copy())
    assert _quick_runs(f) == (2, True)
    for make in (lambda: np.linspace(-1, 1, 8, dtype=np.float32), lambda: np.linspace(-1, 1, 16)[::2]):
        np.testing.assert_allclose(f(make()), L.tanh_store(make()), rtol=1e-6)
    assert f.explain().count("-> native (whole function") == 3  # a kernel each: dtype and layout are checked
    runs = _quick_runs(f)[0]
    with px.profile() as prof:
        np.testing.assert_allclose(f(a.copy()), L.tanh_store(a.copy()), rtol=1e-15)
    assert prof.to_dict()["functions"] == ["tanh_store"] and _quick_runs(f)[0] == runs  # recorded, interpreted
    monkeypatch.setenv("PHYLANX_NATIVE", "0")
    np.testing.assert_allclose(f(a.copy()), L.tanh_store(a.copy()), rtol=1e-15)
    assert _quick_runs(f)[0] == runs
    monkeypatch.setenv("PHYLANX_NATIVE", "force")
    f(a.copy())
    assert _quick_runs(f)[0] == runs + 1



def test_the_quick_path_runs_compiled_code_only_for_the_types_it_was_compiled_for(forced):
    """The quick path calls a signature's compiled entry itself (Numba's dispatcher would match the types again):
    arguments its guard does not match exactly -- arrays read-only, byte-swapped, strided or of another dtype,
    scalars of another type -- must not reach it. Each gives the plain function's answer."""
    f = px.compile(L.scaled_sum)
    a = np.linspace(0.5, 2.0, 9)
    for _ in range(2):
        assert_same(f(a, 2.5), L.scaled_sum(a, 2.5))
    runs, built = _quick_runs(f)
    assert built and runs == 2
    frozen = a.copy()
    frozen.flags.writeable = False
    for x, s in [(frozen, 2.5), (a.astype(">f8"), 2.5), (a.astype(np.float32), 2.5), (a[::2], 2.5),
                 (a, np.float32(2.5)), (a, 3), (a, True), (a.astype(np.int64), 2.5)]:
        assert_same(f(x, s), L.scaled_sum(x, s))
    assert_same(f(a, 2.5), L.scaled_sum(a, 2.5))


def test_a_loop_inside_an_interpreted_loop_goes_native_at_the_outer_loops_next_iteration(forced):
    """A loop directly inside an outer loop that runs interpreted (here the outer one walks a list) is offered to
    the native tier every time it starts, so a single long call switches to native code part way through instead
    of waiting for the next call."""
    f = px.compile(L.damp_by_items)
    items, a = [0.25, -1.0, 3.0], np.linspace(0.0, 1.0, 7)
    assert_same(f(items, a.copy()), L.damp_by_items(items, a.copy()))
    first = L.damp_by_items.__code__.co_firstlineno
    outer, inner = f.explain().splitlines()
    assert outer == f"loop at prog_loops.py:{first + 1} -> interpreted: items is a list"
    assert inner.startswith(f"loop at prog_loops.py:{first + 2} -> native (2 args: float64[:], float; compiled in ")
    # its iterations are independent: forced, the loop's parallel variant runs (test_native_parallel.py)
    assert inner.endswith(f"; {len(items)} native runs; 1 loop may run on {native_tuning.threads()} threads, "
                          "in parallel (forced))")


def test_background_compiles_run_with_a_short_switch_interval_and_put_it_back():
    """A compile in the background calls LLVM through ctypes, giving up the GIL at every call: with the default
    5 ms switch interval an interpreter thread that keeps the GIL starved it (a 0.5 s compile unfinished after four
    1 s calls). While compiles run the interval is short; after the last one it is what it was."""
    import sys
    import threading

    before = sys.getswitchinterval()
    seen, release = [], threading.Event()

    def compile_fn(tag):
        seen.append((tag, sys.getswitchinterval()))
        release.wait(10)

    first = native_background.in_background(compile_fn, "a")
    second = native_background.in_background(compile_fn, "b")
    deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    short = min(before, native_background.COMPILE_SWITCH_INTERVAL)
    assert [tag for tag, _ in sorted(seen)] == ["a", "b"]
    assert [interval for _, interval in seen] == [pytest.approx(short, rel=1e-6)] * 2  # (held in microseconds)
    release.set()
    first.join(10), second.join(10)
    assert sys.getswitchinterval() == before
    # an interval the program sets while a compile runs is its own: the compile's end leaves it
    seen.clear()
    release.clear()
    third = native_background.in_background(compile_fn, "c")
    while not seen and time.monotonic() < deadline + 10:
        time.sleep(0.01)
    try:
        sys.setswitchinterval(0.002)
        release.set()
        third.join(10)
        assert sys.getswitchinterval() == pytest.approx(0.002, rel=1e-6)
    finally:
        sys.setswitchinterval(before)


def test_the_entry_point_is_compiled_for_the_types_its_guard_tests(forced, monkeypatch):
    """The quick path calls compiled code without another type check, so that code must be compiled for the
    argument types its guard was made from, even when an argument array is changed in place (here its dtype)
    between the call that made the entry and the compile."""
    from phylanx_py.runtime.native import whole

    load = whole.T.load_kernel
    a = np.linspace(0.5, 2.0, 8)

    def changing(source):
        a.dtype = np.int64  # in place, while the kernel is being made
        return load(source)

    monkeypatch.setattr(whole.T, "load_kernel", changing)
    f = px.compile(L.scaled_sum)
    f(a, 2.0)
    monkeypatch.setattr(whole.T, "load_kernel", load)
    b = np.linspace(0.5, 2.0, 8)
    assert f._compile().whole.quick is not None
    assert_same(f(b, 2.0), L.scaled_sum(b, 2.0))


def test_an_inner_loop_the_tier_keeps_declining_is_no_longer_offered(forced):
    """A loop started on every iteration of an outer one, whose arguments the native tier declines by their
    kind (a list), stops being handed over after a few declines (the hand-over cost 4 us each time)."""
    f = px.compile(L.sums_by_pairs)
    assert f(200, [1, 2, 3]) == L.sums_by_pairs(200, [1, 2, 3])
    (inner,) = [h for h in f._compile().loop_hooks if not h.live]
    assert inner.tiers[-1].dead and "pairs is a list" in inner.tiers[-1].reason
    assert f(50, [4, 5]) == L.sums_by_pairs(50, [4, 5])

# ---- bounds proofs (runtime/native/bounds.py): unchecked where proven, checked elsewhere, same answer ------------
def _kernel_source(f):
    (entry,) = [e for e in f._compile().whole.entries.values() if e.kernel is not None]
    return entry.source


def test_a_loop_in_bounds_under_its_condition_runs_unchecked_and_reruns_interpreted_when_not(forced):
    """A loop whose accesses are proven in bounds under a test of its start (bounds.py) runs unchecked when the
    test holds; the loop as it is is not compiled (versions.py: half of a small kernel's compile): when the test
    fails, nothing the caller sees has changed yet, so the kernel stops and the call reruns interpreted, which
    raises NumPy's IndexError at the statement's line; the signature is declined."""
    f = run_both(L.first_n, np.arange(6.0), np.zeros(6), 4)
    src = _kernel_source(f)
    assert "boundscheck=False" in src and "b[i] = (a[i] * 2.0)" in src  # the proven version
    assert "_ix" not in src and "raise _Overflow('a loop whose accesses were not all proven in bounds" in src
    run_both(L.first_n, np.arange(6.0), np.zeros(6), 6)
    assert "-> native" in f.explain()
    a, plain_b, native_b = np.arange(6.0), np.zeros(4), np.zeros(4)
    with pytest.raises(IndexError):
        L.first_n(a, plain_b, 5)  # b is shorter: the test fails
    with pytest.raises(px.ExecutionError) as e:
        f(a, native_b, 5)
    assert isinstance(e.value.__cause__, IndexError) and e.value.lineno == line_of(L.first_n, "b[i] =")
    np.testing.assert_array_equal(native_b, plain_b)
    assert "not all proven in bounds for these shapes: the call reran interpreted" in f.explain()
    with pytest.raises(px.ExecutionError) as e:
        f(a, np.zeros(8), 7)  # a is shorter
    assert isinstance(e.value.__cause__, IndexError)
    run_both(L.first_n, np.arange(6.0), np.zeros(6), 6)


def test_a_loop_after_a_change_the_caller_sees_is_tested_before_the_change(forced):
    """Where an argument array changes before the loop, and the loop's test reads only values fixed before that
    change (here n and the arrays' shapes), the test is made before the change too: a failure stops the kernel
    before anything changed and the call reruns interpreted (NumPy's error at the statement's line, the change made
    once); the loop as it is is not compiled."""
    f = run_both(L.bump_then_first_n, np.arange(6.0), np.zeros(6), 4)
    src = _kernel_source(f)
    assert "_ixr(" not in src and src.count("raise _Overflow('a loop whose accesses were not all proven") == 2
    assert src.index("raise _Overflow") < src.index("a[_ix(0, a.shape[0])] = ")  # before the change
    a_plain, a_native, plain_b, native_b = np.arange(6.0), np.arange(6.0), np.zeros(4), np.zeros(4)
    with pytest.raises(IndexError) as plain:
        L.bump_then_first_n(a_plain, plain_b, 5)
    with pytest.raises(px.ExecutionError) as e:
        f(a_native, native_b, 5)
    assert isinstance(e.value.__cause__, IndexError) and e.value.lineno == line_of(L.bump_then_first_n, "b[i] =")
    assert str(e.value.__cause__) == str(plain.value)
    np.testing.assert_array_equal(a_native, a_plain)  # 1.0 added once
    np.testing.assert_array_equal(native_b, plain_b)
    assert "not all proven in bounds for these shapes: the call reran interpreted" in f.explain()


def test_a_loop_after_a_change_the_caller_sees_keeps_its_checked_version(forced):
    """Where the loop's test reads a value bound after an argument array changed, a failed test cannot rerun the
    call (the change would be made twice): the loop as it is is compiled beside its unchecked version, and raises
    where NumPy raises, the change made once."""
    f = run_both(L.bump_then_first_k, np.arange(6.0), np.zeros(6), 4)
    src = _kernel_source(f)
    assert "_ixr(i, a.shape[0])" in src and "not all proven in bounds" not in src
    a_plain, a_native, plain_b, native_b = np.arange(6.0), np.arange(6.0), np.zeros(4), np.zeros(4)
    with pytest.raises(IndexError):
        L.bump_then_first_k(a_plain, plain_b, 5)
    with pytest.raises(px.ExecutionError) as e:
        f(a_native, native_b, 5)
    assert isinstance(e.value.__cause__, IndexError) and e.value.lineno == line_of(L.bump_then_first_k, "for i")
    np.testing.assert_array_equal(a_native, a_plain)  # 1.0 added once
    np.testing.assert_array_equal(native_b, plain_b)


def test_negative_indices_count_from_the_end_in_both_versions(forced):
    f = run_both(L.wrap_left, np.arange(5.0), np.zeros(5))
    assert "b[i] = a[(i - 1)]" in _kernel_source(f)  # -1 is in bounds: proven
    run_both(L.wrap_left, np.arange(5.0), np.zeros(5))


def test_branch_conditions_prove_the_accesses_they_guard(forced):
    f = run_both(L.guarded_neighbours, np.arange(7.0), np.ones(7))
    src = _kernel_source(f)
    assert "a[(i + 1)]" in src and "a[(i - 1)]" in src  # unchecked under the if's condition
    run_both(L.guarded_neighbours, np.arange(1.0), np.ones(1))


def test_augmented_stores_through_temporaries_are_checked(forced):
    run_both(L.bump_past, np.zeros(5), 0)
    a_plain, a_native = np.zeros(5), np.zeros(5)
    with pytest.raises(IndexError):
        L.bump_past(a_plain, 2)
    with pytest.raises(px.ExecutionError) as e:
        px.compile(L.bump_past)(a_native, 2)
    assert isinstance(e.value.__cause__, IndexError)
    np.testing.assert_array_equal(a_native, a_plain)  # the first three stores happened, as in the plain loop


def test_an_in_place_update_of_a_view_is_not_stored_back_into_itself(forced):
    """``C[i, :j] += v`` writes the view's elements; storing the view into itself after (Python's last step of
    the statement) changes nothing for a view, so the kernel leaves it out (it cost Numba seconds to compile a
    slice assignment, and a copy each time). An element's update is still stored; answers and errors unchanged."""
    rng = np.random.default_rng(3)
    A, C = rng.random((6, 4)), rng.random((6, 6))
    f = run_both(L.update_rows_in_place, 1.5, 1.2, C, A)
    src = _kernel_source(f)
    assert "\n            np.multiply(__px_1[__px_2], beta, __px_1[__px_2])\n" in src  # the proven version
    assert "] = np.multiply(" not in src and "] = np.add(" not in src
    assert "_px_unaliased(__px_9[__px_10], C[" in src  # C[i, 1:] += C[i, :-1] still reads a copy of its operand
    assert "__px_7[__px_8] = (__px_7[__px_8] + 1.0)" in src  # C[i, 0] += 1.0: an element, stored
    run_both(L.update_rows_in_place, 1.5, 1.2, rng.random((4, 4)), rng.random((4, 2)))
    C_plain = rng.random((3, 6))
    C_native = C_plain.copy()
    with pytest.raises(IndexError):
        L.update_rows_in_place(1.5, 1.2, C_plain, A)  # C has 3 rows, A 6: row 3 is out of bounds
    with pytest.raises(px.ExecutionError) as e:
        f(1.5, 1.2, C_native, A)
    assert isinstance(e.value.__cause__, IndexError)
    np.testing.assert_array_equal(C_native, C_plain)  # rows 0-2 updated, as in the plain loop


def test_arrays_stored_into_views_run_as_loops_and_a_value_that_does_not_fit_raises_numpys_error(forced):
    """``C[i, :] = A[i, :] @ B``: an array stored into a view of as many dimensions is a loop (helpers.py's
    _px_assign1/2/3), not Numba's slice assignment (seconds to compile, for its error message's text); broadcast
    along a dimension of 1 too. One of more dimensions than its view keeps Numba's. A value that does not fit stops
    the kernel, and the loop reruns interpreted: NumPy's own ValueError, the arrays as the plain function left them."""
    rng = np.random.default_rng(5)
    A, B = rng.random((4, 3)), rng.random((3, 5))
    f = run_both(L.rows_from_products, A, B, np.zeros((4, 5)), np.zeros((3, 5)), 2)
    src = _kernel_source(f)  # the whole function's kernel
    proven = src.split("    else:")[0]
    assert "_px_assign1(C[(i, slice(None, None, None), )], _px_unaliased(" in proven
    assert proven.count("_px_assign2(") == 3  # the block, the row broadcast down D, the k rows
    assert "D[(slice(1, None, None), slice(None, None, None), )] = (np.dot(" in proven  # (n,) into (2, n)
    C_plain, D_plain = np.zeros((4, 5)), np.zeros((3, 5))
    C_native, D_native = C_plain.copy(), D_plain.copy()
    with pytest.raises(ValueError) as plain:
        L.rows_from_products(A, B, C_plain, D_plain, 3)
    with pytest.raises(px.ExecutionError) as e:
        f(A, B, C_native, D_native, 3)
    assert str(e.value.__cause__) == str(plain.value) == \
        "could not broadcast input array from shape (3,5) into shape (2,5)"
    assert e.value.lineno == line_of(L.rows_from_products, "D[1:, :] = A[:k, :] @ B")
    np.testing.assert_array_equal(C_native, C_plain)
    np.testing.assert_array_equal(D_native, D_plain)


def test_chained_indexing_is_proven_on_the_array_it_indexes(forced):
    A = np.arange(16.0).reshape(4, 4)
    f = run_both(L.lower_triangle_sum, A)
    assert "A[i][j]" in _kernel_source(f)
    run_both(L.lower_triangle_sum, np.arange(12.0).reshape(4, 3)[:3])  # square again
    with pytest.raises(IndexError):
        L.lower_triangle_sum(np.arange(12.0).reshape(4, 3))
    with pytest.raises(px.ExecutionError) as e:
        f(np.arange(12.0).reshape(4, 3))  # j reaches 3 on a 3-column array: checked, IndexError
    assert isinstance(e.value.__cause__, IndexError)


def test_whole_function_changes_to_its_own_arrays_do_not_keep_it_interpreted(forced):
    f = run_both(L.fresh_then_read, np.arange(8.0))
    assert "-> native (whole function" in f.explain()
    with pytest.raises(IndexError):
        L.fresh_then_read(np.arange(4.0))
    with pytest.raises(px.ExecutionError) as e:
        f(np.arange(4.0))  # raised after b changed, before anything the caller sees: the interpreter's error
    assert e.value.lineno == line_of(L.fresh_then_read, "first = ") and isinstance(e.value.__cause__, IndexError)


# ---- Python-int checks removed by counters and signs (runtime/native/signs.py) ---------------------------------
@pytest.mark.parametrize("x", [0, 1, 1000, 2**40 - 1, -1, -1000, 2**62 + 5, -2**63])
def test_a_name_kept_non_negative_runs_unchecked_and_negative_ones_checked(forced, x):
    f = run_both(L.halvings, x)
    assert f(x) == L.halvings(x)
    src = _kernel_source(f) if "-> native (whole" in f.explain() else ""
    if -2**40 < x < 2**40:
        assert "if steps >= 0 and x >= 0:" in src and "(x - 1)" in src and "_ck_sub(x, 1)" in src
        assert "_ck_add(steps" not in src  # a counter
    if x == -2**63:
        assert "past 2**63" in f.explain()  # x - 1 overflows int64: checked, rerun interpreted


def test_popcount_loop_has_no_checks_for_non_negative_values(forced):
    values = np.array([0, 1, 7, 2**40 - 1, 12345], dtype=np.int64)
    f = run_both(L.popcount, values)
    src = _kernel_source(f)
    assert "x = (x & (x - 1))" in src and "total = (total + 1)" in src
    # total is a counter read only by its own steps: its sign is not tested (that test kept LLVM from seeing the
    # loop as popcounts: 8.3 against 5.2 us on 20,000 items); halvings' steps counter, also compared, keeps it
    assert "if x >= 0:" in src and "total >= 0" not in src


def test_abs_of_the_smallest_int64_is_a_python_int_past_2_63(forced):
    f = run_both(L.abs_sum, np.array([-2**63, 5], dtype=np.int64))
    assert f(np.array([-2**63, 5], dtype=np.int64)) == 2**63 + 5
    assert "past 2**63" in f.explain()
    run_both(L.abs_sum, np.array([-7, 5], dtype=np.int64))


def test_floor_division_of_the_smallest_int64_by_minus_one_is_a_python_int(forced):
    f = run_both(L.quotient_sum, np.array([-2**63, 6], dtype=np.int64), -1)
    assert f(np.array([-2**63, 6], dtype=np.int64), -1) == 2**63 - 6
    run_both(L.quotient_sum, np.array([-9, 6], dtype=np.int64), -1)
    run_both(L.quotient_sum, np.array([-9, 6], dtype=np.int64), 4)


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_remainders_of_the_smallest_int64_do_not_kill_the_process(forced, dtype):
    a = np.array([-2**63 if dtype is np.int64 else -7.5, 7, -9, 8], dtype=dtype)
    b = np.array([-1, 3, 4, -5], dtype=dtype)
    f = run_both(L.remainders, a, b, np.zeros(4, dtype=dtype))
    assert "-> native (whole function" in f.explain()


def test_integer_powers_with_exponents_that_may_be_negative_stay_interpreted(forced):
    a, b = np.array([2, 3], dtype=np.int64), np.array([-1, 2], dtype=np.int64)
    with pytest.raises(ValueError):
        L.int_powers(a, b)
    f = px.compile(L.int_powers)
    with pytest.raises(px.ExecutionError) as e:
        f(a, b)
    assert isinstance(e.value.__cause__, ValueError)
    assert "exponent that may be negative" in f.explain()
    g = run_both(L.int_squares, np.array([2, -3, 4], dtype=np.int64))
    assert "-> native (whole function" in g.explain()


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_numpy_floor_division_of_the_smallest_int64_by_minus_one_wraps_as_numpy_does(forced, dtype):
    a = np.array([-2**63 if dtype is np.int64 else -7.5, 7, -9, 8, 5], dtype=dtype)
    b = np.array([-1, 3, 4, -5, -1], dtype=dtype)
    f = run_both(L.numpy_floordiv, a, b, *(np.zeros(5, dtype=dtype) for _ in range(3)))
    assert "-> native (whole function" in f.explain()


def test_shifts_by_counts_past_the_width_give_python_and_numpys_results(forced):
    a = np.array([1 << 40, -8, 5, -(1 << 50), 7], dtype=np.int64)
    s = np.array([64, 65, 3, 70, 63], dtype=np.int64)
    f = run_both(L.shifts, a, s, np.zeros(5, dtype=np.int64))
    assert "-> native" in f.explain()
    run_both(L.shifts, a, np.array([1, 2, 3, 4, 5], dtype=np.int64), np.zeros(5, dtype=np.int64))


@pytest.mark.parametrize("bad, error", [(np.nan, ValueError), (np.inf, OverflowError), (1e30, OverflowError)])
def test_a_float_stored_into_an_int_array_raises_where_numpy_does(forced, bad, error):
    f = run_both(L.store_floats, np.array([1.25, -3.5, 7.0]), np.zeros(3, dtype=np.int64))
    assert "-> native (whole function" in f.explain()
    x, plain_out, native_out = np.array([1.25, bad, 7.0]), np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64)
    with pytest.raises(error):
        L.store_floats(x, plain_out)
    with pytest.raises(px.ExecutionError) as e:
        f(x, native_out)
    assert isinstance(e.value.__cause__, error)
    np.testing.assert_array_equal(native_out, plain_out)  # the first store happened in both
    run_both(L.store_floats, np.array([1.25]), np.zeros(1, dtype=np.int32))  # int32: interpreted, same answer


def _fast_version(f):
    """The kernel source's first version of its loop nest (the one run when the nest's tests hold)."""
    (entry,) = f._compile().whole.entries.values()
    return entry.source.split("    else:")[0]


def test_indices_read_from_an_int_array_run_unchecked_when_its_range_fits(forced):
    """``counts[idx[i]]``: the least and greatest of idx, read once at the nest's start, bound the index, so the
    nest runs without a check per access when they fit counts (negative ones count from the end, as in NumPy);
    otherwise the checked version raises IndexError as the plain function does."""
    idx = np.array([3, 0, -1, 2, 3, -7, 6])
    f = px.compile(L.scatter_add)
    assert_same(f(idx, np.zeros(7, np.int64)), L.scatter_add(idx, np.zeros(7, np.int64)))
    fast = _fast_version(f)
    assert "_vrange(idx, " in fast and "__px_1[__px_2] = " in fast and "_ix" not in fast
    with pytest.raises(px.ExecutionError) as e:
        f(np.array([1, 7]), np.zeros(7, np.int64))
    assert isinstance(e.value.__cause__, IndexError)
    with pytest.raises(IndexError):
        L.scatter_add(np.array([1, 7]), np.zeros(7, np.int64))
    with pytest.raises(px.ExecutionError):
        f(np.array([1, -8]), np.zeros(7, np.int64))
    # a strided index array: its range is read by another loop than a contiguous one's (helpers.py _vrange)
    strided = np.array([3, 99, 0, -99, -1, 99, 6])[::2]
    assert_same(f(strided, np.zeros(7, np.int64)), L.scatter_add(strided, np.zeros(7, np.int64)))
    with pytest.raises(px.ExecutionError) as e:
        f(np.array([1, 0, 7, 0])[::2], np.zeros(7, np.int64))
    assert isinstance(e.value.__cause__, IndexError)


def test_csr_rows_run_unchecked_with_their_pointers_and_indices_in_range(forced):
    rng = np.random.default_rng(3)
    indptr = np.array([0, 2, 2, 5, 9])
    indices, data, x = rng.integers(0, 6, 9), rng.random(9), rng.random(6)
    f = px.compile(L.csr_rows)
    assert_same(f(indptr, indices, data, x, np.zeros(4)), L.csr_rows(indptr, indices, data, x, np.zeros(4)))
    fast = _fast_version(f)
    assert "_vrange(indptr, " in fast and "_vrange(indices, " in fast and "x[indices[k]]" in fast
    bad = indices.copy()
    bad[4] = 6
    with pytest.raises(px.ExecutionError) as e:
        f(indptr, bad, data, x, np.zeros(4))
    assert isinstance(e.value.__cause__, IndexError)


def test_an_index_array_the_nest_changes_or_shares_memory_with_is_checked(forced):
    """The range read at the nest's start says nothing once the nest writes the index array itself, or an array
    sharing its memory (the same array passed twice): such accesses stay checked, with the plain answer."""
    f = px.compile(L.rewrite_then_scatter)
    assert_same(f(np.array([0, 1, 2]), np.zeros(7, np.int64)),
                L.rewrite_then_scatter(np.array([0, 1, 2]), np.zeros(7, np.int64)))
    assert "_vrange" not in _fast_version(f)
    with pytest.raises(px.ExecutionError):  # 3 * 3 is past the end: the rewritten index, checked
        f(np.array([0, 3]), np.zeros(7, np.int64))
    g = px.compile(L.scatter_add)
    a, b = np.array([1, 2, 0, 3, 1, 0]), np.array([1, 2, 0, 3, 1, 0])
    assert_same(g(a, a), L.scatter_add(b, b))  # each += changes an index read later
    np.testing.assert_array_equal(a, b)
    a, b = np.array([5, 0, 0, 0, 0, 5]), np.array([5, 0, 0, 0, 0, 5])  # counts[5] += 1 makes the last index 6
    with pytest.raises(IndexError):
        L.scatter_add(b, b)
    with pytest.raises(px.ExecutionError) as e:
        g(a, a)
    assert isinstance(e.value.__cause__, IndexError)
    assert "_apart(counts, idx)" in _fast_version(g)


@pytest.mark.parametrize("fn, x, idx", [
    # elements past 2**47: their range is not used (it was clamped to lo > hi: the gap 20 passed the test)
    (L.gap_reads, np.arange(10.0), np.array([2**47 + 1000, 2**47 + 1020])),
    # uint8 arithmetic wraps: 20 - 10 of [10, 20] read backwards is 246, 10 - 50 is 216
    (L.gap_reads, np.arange(100.0), np.array([20, 10], dtype=np.uint8)),
    (L.offset_reads, np.arange(100.0), np.array([10], dtype=np.uint8)),
    # int8 127 + 1 is -128: -100 + (127 + 1) is -228, not 28
    (L.shifted_counts, np.array([-100]), np.array([127], dtype=np.int8)),
])
def test_an_index_computed_from_elements_is_checked_where_their_range_cannot_bound_it(forced, fn, x, idx):
    args = (x, idx) if fn is not L.shifted_counts else (x, idx, np.zeros(50))
    with pytest.raises(IndexError):
        fn(*args)
    with pytest.raises(px.ExecutionError) as e:
        px.compile(fn)(*args)
    assert isinstance(e.value.__cause__, IndexError)


def test_an_index_array_range_is_read_only_when_usable(forced):
    """A range past 2**47 is not used, whatever the test's other terms (the least element, clamped, once let
    ``range(idx[0] + 1024 * m, n)`` start at -20 unchecked); a nest of few iterations does not scan a large index
    array (a 4-iteration window of a 4,000,000-element one took 4.7 ms): the pass is budgeted by the trip count."""
    x = np.arange(10.0)
    args = (x, np.array([-2**47 - 20]), 2**37)
    with pytest.raises(IndexError):
        L.from_far_start(*args)
    with pytest.raises(px.ExecutionError) as e:
        px.compile(L.from_far_start)(*args)
    assert isinstance(e.value.__cause__, IndexError)
    idx = np.arange(0, 2_000_000, 7) % 90
    f = px.compile(L.window_sum)  # its trip count comes from idx itself: no pass over idx
    assert_same(f(np.arange(100.0), idx, 5), L.window_sum(np.arange(100.0), idx, 5))
    (entry,) = f._compile().whole.entries.values()
    assert "_vrange" not in entry.source
    g = px.compile(L.four_from)  # 4 iterations: idx is read only if it has at most 16 * 4 + 64 elements
    assert_same(g(np.arange(100.0), idx, 5), L.four_from(np.arange(100.0), idx, 5))
    assert "_vrange(idx, 16 * max((4), 0) + 64)" in _fast_version(g)


def test_a_division_of_numpy_complex_numbers_stays_interpreted(forced):
    """NumPy's complex division by zero gives inf/nan (with a warning); Numba's raises ZeroDivisionError."""
    a, b = np.array([1 + 2j, 3 - 1j]), np.array([0j, 2 + 1j])
    f = px.compile(L.complex_quotients)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = f(a, b, np.zeros(2, complex))
        want = L.complex_quotients(a, b, np.zeros(2, complex))
    np.testing.assert_array_equal(got, want)
    assert "a division of NumPy complex numbers (Numba raises at zero, NumPy gives inf/nan)" in f.explain()


# ---- the fast version of a nest outside loops runs as a function of its own (runtime/native/outline.py) --------
@pytest.mark.parametrize("fn, make, short", [
    (L.running_best, lambda: (np.array([0.5, 2.0, 1.0, 3.0, 3.0, -1.0]), np.zeros(6)), lambda a, b: (a, b[:1])),
    (L.two_nests, lambda: (np.arange(1.0, 7.0), np.ones(4)), lambda a, b: (a[:1], b)),
])
def test_a_fast_nest_moved_into_its_own_function_gives_the_plain_answer(forced, fn, make, short):
    """Values the nest changes and the kernel reads after it (``best`` and ``count``; ``s`` between two nests)
    come back from the outlined function; the checked version (an array too short) keeps the plain error."""
    from phylanx_py.runtime.native.outline import outline

    f = px.compile(fn)
    assert_same(f(*make()), fn(*make()))
    (entry,) = f._compile().whole.entries.values()
    assert entry.kernel is not None and "def __pxfast0(" in outline(entry.printed)
    with pytest.raises(IndexError):
        fn(*short(*make()))
    with pytest.raises(px.ExecutionError) as e:
        f(*short(*make()))
    assert isinstance(e.value.__cause__, IndexError)


_KERNEL = '''@numba.njit(cache=True, nogil=True, boundscheck=False, error_model='numpy')
def kernel(a, n):
    s = 0
    x = n
{body}
    return s
'''


@pytest.mark.parametrize("body, want", [
    # outputs: what the kernel reads after the nest; inputs: what the nest reads from before it
    ("    if n >= 0:  # nonneg version\n        for i in range(n):\n            s = s + a[i]\n    else:\n"
     "        s = -1\n", "def __pxfast0(a, n, s):"),
    # a while loop whose break leaves x as the kernel reads it
    ("    if n >= 0:  # nonneg version\n        while True:\n            if not x:\n                break\n"
     "            x = x & (x - 1)\n            s = s + 1\n    else:\n        s = -1\n    s = s + x\n",
     "(s, x, ) = __pxfast0(s, x)"),
    # nested loops with a continue: x, read before the inner loop binds it, is live around both back edges
    ("    if n >= 0:  # nonneg version\n        for i in range(n):\n            for j in range(n):\n"
     "                if j > i:\n                    continue\n                s = s + x\n                x = a[j]\n"
     "    else:\n        s = -1\n    s = s + x\n", "(s, x, ) = __pxfast0(a, n, s, x)"),
    # inside a loop: a call per iteration could cost more than it saves
    ("    for t in range(3):\n        if n >= 0:  # nonneg version\n            s = s + n\n        else:\n"
     "            s = s - n\n", None),
    # a return inside the nest: it would return from the outlined function only
    ("    if n >= 0:  # unchecked version\n        return 5\n    else:\n        s = 1\n", None),
    # no mark: an if of the user's program stays where it is
    ("    if n >= 0:\n        s = s + n\n    else:\n        s = 1\n", None),
    # a name the nest reads that only one path binds before it (a review's shape): passing it would read it
    ("    if n > 3:\n        y = 1\n    if n >= 0:  # nonneg version\n        for i in range(n):\n"
     "            s = s + a[i] + y\n    else:\n        s = -1\n", None),
    # a name bound on every path that goes on (the other raises: nests.py's rerun) is passed (kir.Raise)
    ("    if n >= 0:\n        y = 1\n    else:\n        raise ValueError('rerun')\n    if n >= 0:  # nonneg version\n"
     "        for i in range(n):\n            s = s + a[i] + y\n    else:\n        s = -1\n",
     "def __pxfast0(a, n, s, y):"),
    # the program's own variable named like the outlined function (a review found the kernel declined): another name
    ("    __pxfast0 = 1\n    if n >= 0:  # nonneg version\n        for i in range(n):\n"
     "            s = s + a[i] + __pxfast0\n    else:\n        s = -1\n", "def __pxfast1(__pxfast0, a, n, s):"),
    # a marked if inside another's fast version moves with it, once (a review found a second, dead, copy)
    ("    if n >= 0:  # unchecked version\n        if x >= 0:  # nonneg version\n            s = s + x\n"
     "        else:\n            s = s - x\n    else:\n        s = -1\n", "def __pxfast0(s, x):"),
])
def test_outline_moves_only_marked_nests_outside_loops_and_returns_what_is_read_after(body, want):
    import ast

    from phylanx_py.runtime.native import kir
    from phylanx_py.runtime.native.outline import outline

    kernel = _KERNEL.format(body=body)
    lines = kernel.split("\n")
    # the kernel IR the lowerer would build for this kernel: each statement's node with the names it reads and
    # binds, the tests of two versions marked (here by their comment)
    printed = kir.print_kernel(["a", "n"], list(_nodes(ast.parse(kernel).body[0].body[:-1], 1, lines)), "s",
                               [kir.Name("s")])
    source = printed.source
    out = outline(printed)
    if want is None:
        assert out == source
    else:
        assert want in out and "return (s," in out.split("def kernel")[0]
        assert out.count("def __pxfast") == 1
        ns = {}
        exec(out.replace("@numba.njit(cache=True, nogil=True, boundscheck=False, error_model='numpy')", ""), ns)
        plain = {}
        exec(source.replace("@numba.njit(cache=True, nogil=True, boundscheck=False, error_model='numpy')", ""),
             plain)
        for n in (0, 5, 12):
            assert ns["kernel"](np.arange(20), n) == plain["kernel"](np.arange(20), n)


def _nodes(stmts, depth, lines):
    """The kernel IR's nodes of the statements ``stmts`` (``ast``) of a kernel's source ``lines``."""
    import ast

    from phylanx_py.runtime.native import kir

    def names(*trees):
        return [kir.Name(n.id, isinstance(n.ctx, ast.Store)) for t in trees for n in ast.walk(t)
                if isinstance(n, ast.Name)]

    for s in stmts:
        if isinstance(s, ast.If):
            line = lines[s.lineno - 1]
            version = line.split("# ")[1].split()[0] if line.endswith(" version") else None
            yield kir.If(depth, ast.unparse(s.test), names(s.test), version=version)
        elif isinstance(s, ast.For):
            yield kir.For(depth, s.target.id, ast.unparse(s.iter), names(s.iter))
        elif isinstance(s, ast.While):
            yield kir.While(depth)
        elif isinstance(s, (ast.Break, ast.Continue)):
            yield kir.Jump(depth, "break" if isinstance(s, ast.Break) else "continue")
        elif isinstance(s, ast.Return):
            yield kir.Return(depth, names(s.value), ast.unparse(s))
        elif isinstance(s, ast.Raise):
            yield kir.Raise(depth, ast.unparse(s), names(s))
        else:
            yield kir.Stmt(depth, ast.unparse(s), names(s))
        if isinstance(s, (ast.If, ast.For, ast.While)):
            yield from _nodes(s.body, depth + 1, lines)
        if isinstance(s, ast.If) and s.orelse:
            yield kir.Else(depth)
            yield from _nodes(s.orelse, depth + 1, lines)


def test_a_kernel_module_takes_the_helpers_its_source_names_from_the_processs_module_of_helpers():
    import ast
    import re

    from phylanx_py.runtime.native import helpers
    from phylanx_py.runtime.native.helpers import HELPERS, helpers_for, helpers_text

    def defined(text):
        return re.findall(r"^def (\w+)", text, re.M)

    # the kernel's module defines no helper: it takes those it calls from the process's one module of helpers
    text = helpers_for({"_px_sum", "_ix"})
    assert defined(text) == [] and f"_ix, _px_sum, = _pxshared({helpers._shared_digest()!r}, '_ix', '_px_sum')" \
        in text
    space: dict = {}
    exec(text, space)  # noqa: S102 - our own generated text
    assert space["_px_sum"] is helpers.shared(helpers._shared_digest(), "_px_sum")[0]
    with pytest.raises(ImportError):  # a kernel made with other helpers than this process's
        helpers.shared("0" * 24, "_px_sum")
    assert defined(helpers_text({"_px_sum"})) == ["_block", "_pairwise", "_px_sum"]
    none = helpers_for(())
    # _Overflow imported, not written out: a kernel built ahead of time raises the very class the caller catches
    assert defined(none) == [] and "from phylanx_py.runtime.native.helpers import _Overflow" in none and \
        "_MIN = " in none and "_pxshared" not in none
    # every helper's definitions define every helper it calls (Numba would fail to type a missing one only when
    # the kernel compiles, as a declined loop)
    for name in defined(HELPERS):
        text = helpers_text({name})
        called = {c.func.id for c in ast.walk(ast.parse(text)) if isinstance(c, ast.Call)
                  and isinstance(c.func, ast.Name) and c.func.id.startswith("_")}
        known = set(defined(text)) | set(re.findall(r"^from \S+ import (\w+)", text, re.M))
        assert called <= known, (name, called - known)


def test_a_first_loop_whose_variable_a_later_loop_binds_again_goes_native(forced):
    # before: the first loop's ``j`` was an argument, unbound when it starts, and no tier took it ("not run yet")
    f = run_both(L.rebound_targets, np.linspace(0.0, 1.0, 40))
    lines = f.explain().splitlines()
    assert len(lines) == 2 and all(" -> native (2 args: float64[:], float64[:]" in line for line in lines), lines


@pytest.mark.parametrize("n", [0, 3])
def test_a_loop_variable_read_after_the_loop_keeps_its_value(forced, n):
    f = run_both(L.target_read_after, np.arange(5.0), n)
    assert "loop at prog_loops.py:" in f.explain() and "-> native (3 args" in f.explain()


def test_a_loop_variable_unbound_after_an_empty_loop_is_the_plain_functions_error(forced):
    f = px.compile(L.target_maybe_unbound)
    with pytest.raises(UnboundLocalError):
        L.target_maybe_unbound(np.arange(5.0), 0)
    with pytest.raises(px.ExecutionError, match=r"in primitive '__add': UnboundLocalError: cannot access local "
                                                 r"variable 'j'") as info:
        f(np.arange(5.0), 0)
    assert isinstance(info.value.__cause__, UnboundLocalError)
    assert_same(f(np.arange(5.0), 2), L.target_maybe_unbound(np.arange(5.0), 2))


def test_a_loop_over_an_array_a_task_is_still_making_goes_native(forced):
    # every array operation a task of the pool: ``y`` is a future when the loop starts (before: "y is a Future")
    x = np.linspace(0.0, 1.0, 64)
    with px.runtime.using(px.runtime.local(inline_elements=1)) as rt:
        f = px.compile(L.prefix_sums)
        for _ in range(3):
            assert_same(f(x), L.prefix_sums(x))
        rt.close()
    assert "-> native (2 args: float64[:], float64[:]" in f.explain(), f.explain()


def test_a_whole_function_kernel_that_cannot_overflow_copies_nothing_per_call(forced):
    # the arrays a kernel writes are copied per call only to put them back after a checked kernel's overflow;
    # a copy of each per call (8 MB here) made NPBench's trisolv run at 0.64x NumPy
    import tracemalloc

    f = px.compile(L.cumulate)
    x = np.ones(1_000_000)
    f(x.copy())
    assert "-> native (whole function" in f.explain()
    entry = next(iter(f._code.whole.entries.values()))
    assert entry.writes == (0,) and not entry.checked
    tracemalloc.start()
    try:
        out = f(x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out is x and out[-1] == 1_000_000.0
    assert peak < 1_000_000, peak


def test_loops_whose_temporaries_later_loops_bind_again_go_native(forced):
    # before: ``t``, ``u`` and ``k`` were arguments of the first loop, unbound when it starts ("not run yet")
    f = run_both(L.rebound_temporaries, np.linspace(0.0, 2.0, 30))
    lines = f.explain().splitlines()
    assert len(lines) == 2 and " -> native (1 args: float64[:];" in lines[0] and \
        " -> native (2 args: float64[:], float64[:];" in lines[1], lines


@pytest.mark.parametrize("program, args", [
    (L.temporary_read_by_later_loop, (np.arange(6.0),)),
    (L.temporary_through_empty_loop, (np.arange(6.0), 0)),
    (L.temporary_through_empty_loop, (np.arange(6.0), 2)),
    (L.temporary_bound_on_one_path, (np.linspace(0.0, 2.0, 9),)),
])
def test_a_value_a_later_statement_may_read_stays_the_loops_output(forced, program, args):
    # (a loop whose output is not bound before it stays interpreted: with zero iterations it would leave it unbound)
    f = run_both(program, *args)
    assert "-> native" in f.explain(), f.explain()


def test_a_loop_reading_module_globals_goes_native_and_sees_their_new_values(forced, monkeypatch):
    # before: "global expressions" (NPBench's vadv reads BET_M, BET_P in four loops)
    x = np.linspace(0.0, 1.0, 20)
    f = run_both(L.damped_smoothing, x)
    assert " -> native (4 args: float, float64[:], float64[:], float64[:];" in f.explain(), f.explain()
    monkeypatch.setattr(L, "DAMPING", 2.0)
    monkeypatch.setattr(L, "WEIGHTS", np.array([1.0, -1.0, 3.0]))
    assert_same(f(x), L.damped_smoothing(x))
    assert "2 native runs" in f.explain()


def test_a_loop_storing_into_a_global_array_changes_it_as_the_plain_function_does(forced, monkeypatch):
    monkeypatch.setattr(L, "WEIGHTS", np.array([1.0, 2.0, 3.0]))
    want_out = L.scale_into_global(np.arange(1.0, 5.0))
    want = L.WEIGHTS.copy()
    monkeypatch.setattr(L, "WEIGHTS", np.array([1.0, 2.0, 3.0]))
    f = px.compile(L.scale_into_global)
    assert_same(f(np.arange(1.0, 5.0)), want_out)
    assert_same(L.WEIGHTS, want)
    assert "-> native" in f.explain()


@pytest.mark.parametrize("program, native, quick", [
    (L.reads_missing_global, "-> native", False),  # the loop tier (a call of _doubled keeps it from the whole)
    (L.whole_reads_missing_global, "-> native (whole function", True),  # its quick path reads the global too
])
def test_a_global_deleted_after_compiling_is_the_plain_functions_name_error(forced, monkeypatch, program, native,
                                                                            quick):
    monkeypatch.setattr(L, "NOT_DEFINED_YET", 1.5, raising=False)
    f = px.compile(program)
    assert_same(f(np.arange(3.0)), program(np.arange(3.0)))
    assert_same(f(np.arange(3.0)), program(np.arange(3.0)))
    assert native in f.explain()
    if quick:
        assert _quick_runs(f)[1]
    monkeypatch.delattr(L, "NOT_DEFINED_YET")
    with pytest.raises(NameError):
        program(np.arange(3.0))
    with pytest.raises(px.ExecutionError, match="name 'NOT_DEFINED_YET' is not defined") as info:
        f(np.arange(3.0))
    assert isinstance(info.value.__cause__, NameError)


def test_a_whole_function_reading_module_globals_goes_native_and_reads_them_at_each_call(forced, monkeypatch):
    # before: the whole-function tier declined "global expressions" (NPBench's vadv: BET_M, BET_P), leaving each
    # loop to the loop tier and the statements between them to the tree or the plain function
    x = np.linspace(0.0, 1.0, 20)
    f = run_both(L.damped_whole, x)
    assert "-> native (whole function, 3 args: float64[:], float, float64[:];" in f.explain(), f.explain()
    assert_same(f(x), L.damped_whole(x))
    runs, built = _quick_runs(f)
    assert built and runs == 2  # the quick path reads the globals too
    monkeypatch.setattr(L, "DAMPING", 2.0)
    monkeypatch.setattr(L, "WEIGHTS", np.array([1.0, -1.0, 3.0]))
    assert_same(f(x), L.damped_whole(x))
    assert _quick_runs(f) == (3, True)
    monkeypatch.setattr(L, "DAMPING", 3)  # another kind: another signature, still the plain function's answer
    assert_same(f(x), L.damped_whole(x))


def test_a_whole_function_kernel_of_too_many_lines_leaves_its_loops_to_the_loop_tier(forced, monkeypatch):
    from phylanx_py.runtime.native import whole_lower

    monkeypatch.setattr(whole_lower, "MAX_LINES", 5)
    f = run_both(L.damped_whole, np.linspace(0.0, 1.0, 20))
    assert "function at" in f.explain() and "lines (more than 5): its loops compile apart" in f.explain()
    assert "loop at" in f.explain() and "-> native (" in f.explain(), f.explain()  # the loop went native alone


def test_crc16_with_python_int_operands_of_uint8_runs_natively(forced):
    """NEP 50: ``(crc & 1) ^ (byte & 1)`` is uint8 (the Python int takes uint8), as NPBench's crc16 computes."""
    data = np.random.default_rng(3).integers(0, 256, 300, dtype=np.uint8)
    f = run_both(L.crc16, data, 0x8408)
    assert "-> native (whole function" in f.explain() and "has no native form" not in f.explain()
    assert type(f(data, 0x8408)) is int


@pytest.mark.parametrize("dtype, k", [(np.uint8, 3), (np.uint8, 255), (np.int8, -128), (np.int16, 1000),
                                      (np.uint32, 7)])
def test_python_int_operand_of_small_int_arithmetic_wraps_natively(forced, dtype, k):
    a = np.array([0, 5, 100, np.iinfo(dtype).max], dtype=dtype)
    f = run_both(L.small_int_plus_int, a, k)
    assert "-> native" in f.explain()


@pytest.mark.parametrize("dtype, k", [(np.uint8, 256), (np.uint8, -1), (np.int8, 128), (np.int16, -40000)])
def test_python_int_operand_that_does_not_fit_raises_as_numpy_does(forced, dtype, k):
    """NumPy 2 raises OverflowError for a Python int outside the dtype's range: the native kernel stops, the
    arrays are put back and the loop reruns interpreted, whose error names the line and the primitive."""
    a = np.array([1, 2, 3], dtype=dtype)
    with pytest.raises(OverflowError) as plain:
        L.small_int_plus_int(a.copy(), k)
    f = px.compile(L.small_int_plus_int)
    f(a.copy(), 1)  # compiled natively for these kinds
    assert "-> native" in f.explain()
    b = a.copy()
    with pytest.raises(px.ExecutionError) as err:
        f(b, k)
    assert type(err.value.__cause__) is OverflowError and str(err.value.__cause__) == str(plain.value)
    assert err.value.lineno == line_of(L.small_int_plus_int, "a[i] + k")
    assert "prog_loops.py" in str(err.value) and "__add" in str(err.value)
    np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("k", [-1, 0, 2, 300, 2**40])
def test_small_int_compared_with_any_python_int_exactly(forced, k):
    f = run_both(L.small_int_below_int, np.array([0, 1, 2, 255], dtype=np.uint8), k)
    assert "-> native" in f.explain()


def _csr(m, n, nnz, dtype, seed=0):
    rng = np.random.default_rng(seed)
    counts = np.bincount(rng.integers(0, m, nnz), minlength=m)
    row = np.concatenate([[0], np.cumsum(counts)]).astype(dtype)
    col = rng.integers(0, n, nnz).astype(dtype)
    return row, col, rng.random(nnz), rng.random(n)


@pytest.mark.parametrize("dtype", [np.uint32, np.int64, np.int32])
def test_spmv_with_int_index_arrays_runs_natively(forced, dtype):
    """``x[cols]`` with a 1-D int array (uint32 as NPBench's spmv has it) and ``np.empty(n, a.dtype)``."""
    f = run_both(L.spmv, *_csr(30, 20, 90, dtype))
    assert "-> native (whole function" in f.explain() and "has no native form" not in f.explain()


def test_negative_indices_in_an_index_array_count_from_the_end(forced):
    f = run_both(L.gather_sum, np.arange(5.0), np.array([-1, 0, -5, 2]))
    assert "-> native" in f.explain()


def test_an_index_array_out_of_bounds_raises_index_error_at_its_line(forced):
    x, idx = np.arange(5.0), np.array([0, 5, 1])
    with pytest.raises(IndexError):
        L.gather_sum(x, idx)
    f = px.compile(L.gather_sum)
    with pytest.raises(px.ExecutionError) as err:
        f(x, idx)
    assert isinstance(err.value.__cause__, IndexError)
    assert "prog_loops.py" in str(err.value)
    assert err.value.lineno in (line_of(L.gather_sum, "for k"), line_of(L.gather_sum, "x[idx]"))


def test_a_store_through_an_index_array_stays_interpreted(forced):
    f = run_both(L.scatter_store, np.arange(5.0), np.array([1, 3]))
    assert "indexing with int64[:]" in f.explain()


def test_durbin_with_flip_and_empty_like_runs_natively(forced):
    """NPBench's durbin: ``np.flip`` of slices inside ``np.dot`` and an in-place update from the reversed slice of
    the same array (NumPy computes the right side first: so does the kernel), ``np.empty_like``."""
    r = np.random.default_rng(4).random(40) / 40
    f = run_both(L.durbin, r)
    assert "-> native (whole function" in f.explain() and "has no native form" not in f.explain()


@pytest.mark.parametrize("a", [np.arange(12.0).reshape(3, 4), np.arange(6, dtype=np.float32),
                               np.arange(-3, 3, dtype=np.int8), np.array([[True, False], [False, False]]),
                               np.arange(8, dtype=np.uint32)[::2]])
def test_flip_copy_and_like_allocations_run_natively_for_any_dtype(forced, a):
    f = run_both(L.moved_arrays, a)
    assert "-> native" in f.explain() and "has no native form" not in f.explain()


def test_a_store_through_a_flipped_view_changes_the_array(forced):
    f = run_both(L.store_through_flip, np.arange(5.0), 4)
    assert "-> native" in f.explain()


def test_nussinov_with_a_called_match_function_runs_natively(forced):
    """NPBench's nussinov calls ``match(seq[i], seq[j])``, whose body is an ``if``/``else`` of returns: inlined."""
    seq = np.random.default_rng(5).integers(0, 4, 25).astype(np.int32)
    f = run_both(L.nussinov, 25, seq)
    assert "-> native (whole function" in f.explain() and "has no native form" not in f.explain()
    assert "apply" not in f.explain()


@pytest.mark.parametrize("lo", [0.0, 2.5, 100.0])
def test_calls_of_one_expression_functions_are_inlined(forced, lo):
    """``clipped(weight(a, i), lo)``: the arguments are bound in order before the body; an array argument too."""
    f = run_both(L.weighted_sum, np.linspace(-1.0, 3.0, 9), np.float64(lo))
    assert "-> native" in f.explain()


def test_a_call_that_may_not_run_stays_interpreted(forced):
    """``i < n and weight(a, i) > 2``: binding the arguments before the expression would read ``a[i]`` where
    Python does not."""
    f = run_both(L.guarded_call, np.linspace(0.0, 3.0, 5), 8)
    assert "a call of 'weight' in a part of an expression that may not run" in f.explain()


def test_a_called_function_with_statements_inside_an_expression_stays_interpreted(forced):
    # ``s += with_local(a[i])``: its statements would run before ``s`` is read (a statement's whole value is
    # inlined: tests/test_native_inline.py)
    f = run_both(L.calls_with_local, np.linspace(0.0, 3.0, 5))
    assert "a call of 'with_local', whose body is statements, inside a larger expression" in f.explain()


def test_an_error_inside_an_inlined_call_names_the_loop(forced):
    a = np.linspace(0.0, 1.0, 4)
    with pytest.raises(IndexError):
        L.reads_past_the_end(a)
    f = px.compile(L.reads_past_the_end)
    with pytest.raises(px.ExecutionError) as err:
        f(a)
    assert isinstance(err.value.__cause__, IndexError)
    assert "prog_loops.py" in str(err.value)
    assert err.value.lineno == line_of(L.reads_past_the_end, "for i")  # as every error inside a native loop


def test_float32_array_arithmetic_with_python_scalars_runs_natively(forced):
    """NEP 50: ``x * w + b``, ``np.maximum(., 0)``, ``x / 2 + 0.1`` on float32 arrays stay float32 (the Python
    scalars are cast to float32 first, as NumPy does; Numba alone would compute in float64)."""
    x = np.linspace(-1, 1, 9, dtype=np.float32)
    f = run_both(L.relu_steps, x, np.float32(0.3), np.linspace(0, 1, 9, dtype=np.float32))
    assert "-> native" in f.explain() and f(x, np.float32(0.3), x).dtype == np.float32


@pytest.mark.parametrize("dtype, k", [(np.int8, 3), (np.int8, -128), (np.uint16, 300), (np.int32, -7),
                                      (np.uint8, 255)])
def test_small_int_array_arithmetic_wraps_in_its_dtype(forced, dtype, k):
    a = np.arange(0, 10, dtype=dtype) * (40 if np.dtype(dtype).itemsize == 1 else 9000)
    f = run_both(L.small_int_arrays, a.astype(dtype), k)
    assert "-> native" in f.explain()


def test_a_python_int_that_does_not_fit_a_small_int_array_raises_as_numpy_does(forced):
    a = np.arange(4, dtype=np.int8)
    with pytest.raises(OverflowError) as plain:
        L.small_int_arrays(a.copy(), 300)
    f = px.compile(L.small_int_arrays)
    f(a.copy(), 3)
    with pytest.raises(px.ExecutionError) as err:
        f(a.copy(), 300)
    assert type(err.value.__cause__) is OverflowError and str(err.value.__cause__) == str(plain.value)
    assert err.value.lineno == line_of(L.small_int_arrays, "a * 3 + k")


def test_float32_arrays_compared_with_python_floats_as_float32(forced):
    a = np.array([[0.1, 0.2], [0.05, 0.1], [0.3, 0.09999]], dtype=np.float32)
    f = run_both(L.float32_compared, a)
    assert "-> native" in f.explain()


def test_float32_in_place_updates_with_python_floats(forced):
    f = run_both(L.float32_inplace, np.linspace(0, 1, 17, dtype=np.float32), np.float32(1.7))
    assert "-> native" in f.explain()


def test_array_arithmetic_mixing_dtypes_stays_interpreted(forced):
    """float32 * int32 arrays are float64 in NumPy, float32 in Numba: declined, and said why."""
    f = run_both(L.mixed_array_dtypes, np.ones(3, np.float32), np.ones(3, np.int32))
    assert "array arithmetic mixing float32[:] and int32[:]" in f.explain()


def test_a_call_leaving_out_a_number_default_runs_the_whole_function_natively(forced):
    """NPBench calls ``crc16(data)``: the default ``poly`` fills the call, so the whole function runs as one kernel
    (its quick path too)."""
    data = np.random.default_rng(6).integers(0, 256, 50, dtype=np.uint8)
    f = px.compile(L.crc16)
    for _ in range(3):
        assert f(data) == L.crc16(data)
    assert "-> native (whole function, 2 args: uint8[:], int" in f.explain()
    assert f._whole.quick is not None and f._whole.quick((data,)) == L.crc16(data)
    assert f(data, 0x1021) == L.crc16(data, 0x1021)


def test_floyd_warshall_with_add_outer_runs_natively(forced):
    path = np.random.default_rng(7).integers(1, 20, (12, 12)).astype(np.int32)
    f = run_both(L.floyd_warshall, path)
    assert "-> native" in f.explain() and "has no native form" not in f.explain()


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_ufunc_outer_of_1d_arrays_runs_natively(forced, dtype):
    rng = np.random.default_rng(8)
    f = run_both(L.outer_products_of_rows, rng.random((3, 4)).astype(dtype) * 10, rng.random((3, 5)).astype(dtype))
    assert "-> native" in f.explain()


def test_ufunc_outer_of_2d_arrays_stays_interpreted(forced):
    f = run_both(L.outer_of_2d, np.ones((2, 2)), np.ones((3, 2)))
    assert "add.outer of other than two 1-D arrays" in f.explain()


def test_a_loop_writing_a_ufunc_output_changes_what_the_caller_sees(forced):
    """``np.add(a, 1.0, a)`` changes ``a``: a statement after the loop that may raise keeps the function on the
    per-loop path (a rerun from the changed array would add twice)."""
    f = run_both(L.ufunc_out_then_raise, np.zeros(4), np.zeros(1), 2)
    assert "a return value that may raise after a loop changed values" in f.explain()
    a = np.zeros(4)
    with pytest.raises(px.ExecutionError):
        f(a, np.zeros(1), 5)
    np.testing.assert_array_equal(a, np.full(4, 5.0))  # as the plain function leaves it


def test_a_whole_array_update_after_a_loop_keeps_the_function_one_kernel(forced):
    """``B *= alpha`` after the loops that changed ``B`` (NPBench's trmm) is a nest with nothing to test: it cannot
    raise, so the function runs as one kernel; a store that may raise after it keeps the loops apart, and its error
    leaves ``B`` changed once, as the plain function does."""
    rng = np.random.default_rng(11)
    a, b = rng.random((6, 6)), rng.random((6, 5))
    f = run_both(L.triangular_product, 1.5, a, b)
    assert "-> native (whole function" in f.explain()
    g = run_both(L.triangular_product_then_store, 1.5, a, b, 2)
    assert "a statement that may raise after a loop changed values" in g.explain()
    changed, want = b.copy(), b.copy()
    with pytest.raises(px.ExecutionError) as err:
        g(1.5, a, changed, 9)
    assert isinstance(err.value.__cause__, IndexError)
    with pytest.raises(IndexError):
        L.triangular_product_then_store(1.5, a, want, 9)
    np.testing.assert_allclose(changed, want, rtol=1e-12)  # changed once (the dot products' order may differ)


def test_inlined_calls_keep_their_parameters_apart_and_read_every_argument(forced):
    f = run_both(L.calls_sharing_names, np.arange(5), 5)
    assert "-> native" in f.explain()
    with pytest.raises(px.ExecutionError) as err:
        f(np.arange(3), 5)  # first(i, x[i]) reads x[3]: Python evaluates an argument its callee does not use
    assert isinstance(err.value.__cause__, IndexError)


@pytest.mark.parametrize("dtype, n", [(np.float64, 7), (np.float64, 1000), (np.float32, 300), (np.float32, 0)])
def test_mean_of_1d_float_arrays_runs_natively_with_numpys_result(forced, dtype, n):
    a = (np.random.default_rng(n).random((3, n)) * 100).astype(dtype)
    f = px.compile(L.centred_rows)
    got, want = _quiet(f, a.copy()), _quiet(L.centred_rows, a.copy())
    np.testing.assert_array_equal(got, want)  # bit for bit: the same summation order and division
    assert got.dtype == want.dtype and "-> native" in f.explain()


def test_mean_of_an_int_array_stays_interpreted(forced):
    f = run_both(L.centred_rows, np.arange(6).reshape(2, 3))
    assert "np.mean other than of a 1-D float64/float32 array" in f.explain()


def test_a_loop_changing_an_array_through_an_inlined_call_changes_what_the_caller_sees(forced):
    f = run_both(L.bumps_then_raises, np.zeros(4), 2)
    assert "a return value that may raise after a loop changed values" in f.explain()
    a = np.zeros(4)
    with pytest.raises(px.ExecutionError):
        f(a, 5)
    np.testing.assert_array_equal(a, np.full(4, 5.0))  # as the plain function leaves it


@pytest.mark.parametrize("a, b, n", [(0.0, 1.0, 7), (-3, 5, 4), (1.5, 1.5, 3), (0.1, 0.7, 1), (2.0, -1e-3, 2),
                                     (0.0, 1.0, 0)])
def test_linspace_of_numbers_runs_natively_bit_for_bit(forced, a, b, n):
    out = np.zeros((3, n))
    f = px.compile(L.linspace_rows)
    got, want = _quiet(f, out.copy(), a, b), _quiet(L.linspace_rows, out.copy(), a, b)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == w.dtype
    assert "-> native" in f.explain() and "has no native form" not in f.explain()


@pytest.mark.parametrize("fn, a", [(L.linspace_rows, np.float32(0.5)), (L.linspace_without_endpoint, 0.5)])
def test_linspace_in_other_steps_stays_interpreted(forced, fn, a):
    """A float32 start computes in float32; ``endpoint=False`` divides by another count: declined."""
    args = (np.zeros((2, 4)), a, 2.0) if fn is L.linspace_rows else (np.zeros((2, 4)), a)
    f = run_both(fn, *args)
    assert "np.linspace other than" in f.explain() or "linspace with keyword arguments" in f.explain()


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8])
def test_small_int_arrays_divided_stay_interpreted(forced, dtype):
    """NumPy divides int8/int16 arrays into float64 (and takes sqrt in float16/float32); Numba into float32."""
    f = run_both(L.small_int_divided, np.array([1, 2, 7], dtype=dtype), np.zeros(3))
    assert "arrays giving float64 (Numba's dtype differs)" in f.explain()


def test_an_in_place_update_computed_in_another_dtype_is_computed_as_numpy_does(forced):
    """NumPy computes float32 += int32 in float64 (then rounds once); Numba's in-place ufunc in float32 (rounding the
    int first), so that form declines; the element-wise nest computes each element in float64 and rounds it once on
    the store, as NumPy (16777217 is not a float32)."""
    f = run_both(L.float32_plus_int32, np.full(3, 0.5, np.float32), np.array([16777217, 3, -5], np.int32))
    assert "# an element-wise statement as one loop nest" in "\n".join(
        e.source or "" for e in f._code.whole.entries.values()), f.explain()


@pytest.mark.parametrize("program, args", [
    (L.sqrt_into_itself, (np.array([16.0, 81.0, 256.0]), 5)),
    (L.floordiv_after_store, (np.zeros(3), -2**63, 3)),
])
def test_a_kernel_that_stops_puts_back_what_it_wrote_through_an_out_argument_or_before_a_python_division(forced,
                                                                                                           program,
                                                                                                           args):
    # found in review: np.sqrt(y, y) counted y as only read (a ufunc's out is positional), and a Python-int floor
    # division's helper could stop a kernel not marked as one that may stop: y and a were not put back, and the
    # rerun started from what the kernel had written
    run_both(program, *args)


def test_a_child_forked_during_a_compile_does_not_wait_for_it_at_exit(tmp_path):
    # found in review (the same shape as the fused builds'): a child forked while a native compile ran counted
    # it as inside (its exit waited EXIT_WAIT_SECONDS, 120) and kept the switch interval the compile had lowered
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "fork_during_compile.py"
    script.write_text(textwrap.dedent("""
        import multiprocessing as mp, sys, threading, time
        from phylanx_py.runtime.native import background as tiering
        release = threading.Event()
        before = sys.getswitchinterval()
        thread = tiering.in_background(lambda: release.wait(60))
        while tiering._exit["inside"] != 1:
            time.sleep(0.01)
        def child(queue):
            queue.put((tiering._exit["inside"], sys.getswitchinterval() == before))
        ctx = mp.get_context("fork")
        queue = ctx.Queue()
        t0 = time.monotonic()
        p = ctx.Process(target=child, args=(queue,))
        p.start()
        print(queue.get(timeout=30))
        p.join(60)
        print(time.monotonic() - t0 < 20, p.exitcode)
        release.set()
        thread.join(30)
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=200)
    assert out.stdout.split("\n")[:2] == ["(0, True)", "True 0"], out.stdout + out.stderr
