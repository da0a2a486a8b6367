"""The plain function as the floor (runtime/floor.py): on the local runtime a call runs the plain function or the
tree, whichever was timed faster for its signature; errors stay the tree's; programs whose rerun could be seen, and
other runtimes, always take the tree."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from prog_control import (
    assert_in_loop,
    clamp_step,
    noisy_step,
    raise_when_big,
    shifted,
    stamped,
    stamping_step,
    wrap_around,
    zero_step,
)

import phylanx_py as px


def _scale_rows(A, s):
    B = A * s
    return B / np.sum(B, axis=1, keepdims=True)


def _scale_rows_loop(A, s):
    B = A * s
    for i in range(B.shape[0]):
        B[i] = B[i] / np.sum(B[i])
    return B


def _normalise_in_place(A):
    A /= np.sum(A)
    return A


def _store_then_fail(A, i):
    A[0] = 7.0
    return A[i]


def _halve_then_fail(A, i):
    A /= 2.0
    return A[i]


def _alias_then_fail(A, i):
    B = A
    B[1] = 5.0
    return A[i]


def _prints(x):
    print("x is", x)
    return x + 1


def _appends(items, v):
    items.append(v)
    return len(items)


def _local_lambda(A):
    f = lambda x: 1.0 - np.tanh(x) ** 2  # noqa: E731 - as numpy-benchmarks' slowparts writes it
    out = np.empty_like(A)
    for i in range(A.shape[0]):
        out[i] = f(A[i])
    return out


def _lambda_or_passed(A, g):
    f = lambda x: x + 1.0  # noqa: E731
    if A[0] > 0:
        f = g
    return f(A)


def _store_in_tuple(pair):
    pair[0][0] += 1.0
    return pair[1]


class _Spy:
    """Counts the calls of a compiled function's plain function (set as its ``__wrapped__``)."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fn(*args, **kwargs)

    def __getattr__(self, name):  # the function's own attributes (its defaults: floor.py's ``_default``)
        return getattr(self.fn, name)


@pytest.fixture
def local():
    rt = px.runtime.local()
    with px.using(rt):
        yield rt
    rt.close()


@pytest.fixture(autouse=True)
def _floor_on(monkeypatch):
    monkeypatch.setenv("PHYLANX_FLOOR", "1")  # off in the rest of the suite (conftest.py)


class _LoopTier:
    """A stand-in for one of a program's native loop tiers: the kernels it made ready (loop_tiers.kernel_ready)."""

    kernels_ready = 0
    setup = 0.0

    def credit(self, seconds, tree_seconds):  # a plain run's time (Signatures.credit): nothing to heat here
        pass


def _compiled_with_spy(fn):
    f = px.compile(fn)
    assert f.tree is not None  # translated from the real function first
    spy = f.__wrapped__ = _Spy(fn)
    return f, spy


def _tree_runs(f) -> list:
    """A list that gets an item each time ``f``'s tree runs (its code's ``invoke``)."""
    runs, code = [], f._code
    invoke = code.invoke

    def counted(*args, **kwargs):
        runs.append(1)
        return invoke(*args, **kwargs)
    code.invoke = counted
    return runs


def test_first_call_plain_second_tree_then_the_faster(local, monkeypatch):
    monkeypatch.setenv("PHYLANX_NATIVE", "0")  # the floor alone chooses (not a whole-function kernel)
    f, spy = _compiled_with_spy(_scale_rows_loop)
    A = np.arange(1.0, 13.0).reshape(3, 4)
    for n in range(1, 7):
        np.testing.assert_allclose(f(A.copy(), 2.0), _scale_rows_loop(A.copy(), 2.0), rtol=1e-15)
        if n == 1:
            assert spy.calls == 1  # the plain function first
        if n == 2:
            assert spy.calls == 1  # then the tree, timed
    assert 1 <= spy.calls <= 5
    tree_runs = 6 - spy.calls
    assert f.explain().splitlines()[-1] == (f"calls: {spy.calls} ran as the plain function, {tree_runs} through "
                                            f"the tree (the faster one per signature, timed)")
    # a new signature (another shape) starts with the plain function again
    before = spy.calls
    f(np.ones((2, 2)), 1.0)
    assert spy.calls == before + 1


def test_the_tree_of_a_program_without_loops_runs_after_half_a_second_of_plain_runs(local):
    """Without loops the tree gains at most a fused kernel's constant factor, and its first run builds its fused
    kernels in the call (NPBench's compute 253 ms against 20 ms plain, at call 2): it runs first once the plain runs
    took floor.LOOP_FREE_SECONDS in all, and SAMPLES of them ran."""
    from phylanx_py.runtime import floor

    def slow_plain(A, s):
        time.sleep(0.1)
        return _scale_rows(A, s)

    f, spy = _compiled_with_spy(_scale_rows)
    spy.fn = slow_plain
    trees = _tree_runs(f)
    A = np.arange(1.0, 13.0).reshape(3, 4)
    plain_calls = int(floor.LOOP_FREE_SECONDS / 0.1)  # each over 0.1 s: the last of them reaches the half second
    for n in range(1, plain_calls + 2):
        np.testing.assert_allclose(f(A, 2.0), _scale_rows(A, 2.0), rtol=1e-15)
        assert (spy.calls, len(trees)) == ((n, 0) if n <= plain_calls else (plain_calls, 1))


def test_the_tree_of_a_program_without_loops_waits_for_samples_plain_runs(local, monkeypatch):
    from phylanx_py.runtime import floor

    monkeypatch.setattr(floor, "LOOP_FREE_SECONDS", 0.0)
    f, spy = _compiled_with_spy(_scale_rows)
    trees = _tree_runs(f)
    A = np.arange(1.0, 13.0).reshape(3, 4)
    for n in range(1, floor.SAMPLES + 2):
        f(A, 2.0)
        assert (spy.calls, len(trees)) == ((n, 0) if n <= floor.SAMPLES else (floor.SAMPLES, 1))


def test_one_slow_plain_run_does_not_give_a_program_without_loops_to_the_tree(local, monkeypatch):
    """The plain function of a program without loops is timed SAMPLES times before the tree can replace it: a
    first run slowed by the process's state (here a sleep) chose the tree for good before."""
    import time as _time

    from phylanx_py.runtime import floor

    monkeypatch.setattr(floor, "LOOP_FREE_SECONDS", 0.0)  # the tree as soon as SAMPLES plain runs were timed

    slow = [True]

    def first_slow(A, s):
        if slow[0]:
            slow[0] = False
            _time.sleep(0.2)
        return _scale_rows(A, s)

    f, spy = _compiled_with_spy(_scale_rows)
    spy.fn = first_slow
    A = np.arange(1.0, 13.0).reshape(3, 4)
    for _ in range(8):
        np.testing.assert_allclose(f(A, 2.0), _scale_rows(A, 2.0), rtol=1e-15)
    assert spy.calls >= 7  # calls 1-3 the plain function, call 4 the tree, then the faster (plain) one


@pytest.mark.parametrize(("tree_ms", "plain_next"), [(1.0, True), (0.4, False)])
def test_a_tree_not_clearly_faster_than_one_plain_run_waits_for_samples_plain_runs(local, monkeypatch, tree_ms,
                                                                                   plain_next):
    """With loops too, one plain run (the first call's, slowed by the process's first seconds) does not give the
    calls to a tree less than floor.CLEARLY_FASTER faster: the plain function is timed SAMPLES times first
    (NPBench's stockham_fft, warm, kept a tree 1.8x faster than that first run at 0.75x NumPy). A tree clearly
    faster (a loop gone native) takes the next call (here 1.5 ms plain against 1.0 ms and 0.4 ms trees)."""
    monkeypatch.setenv("PHYLANX_NATIVE", "0")  # the floor alone chooses
    f, spy = _compiled_with_spy(_scale_rows_loop)
    A = np.ones((3, 3))
    f(A.copy(), 1.0)  # call 1: plain
    f(A.copy(), 1.0)  # call 2: the tree
    assert spy.calls == 1
    times = next(iter(f._code.floor.times.values()))
    times.plain[:], times.tree[:] = [1.5e-3], [tree_ms * 1e-3]
    f(A.copy(), 1.0)  # call 3
    assert spy.calls == (2 if plain_next else 1)


def test_a_native_kernel_getting_ready_has_the_tree_timed_again(local, monkeypatch):
    """The tree of a program with loops may have become the faster way when a native kernel got ready (a loop of it
    gone native): the next call runs the tree, not only at the probes (the tier off here, so that the floor alone
    chooses: by default a whole-function tier takes such calls first)."""
    monkeypatch.setenv("PHYLANX_NATIVE", "0")
    f, spy = _compiled_with_spy(_scale_rows_loop)
    A = np.ones((3, 3))
    f(A, 1.0)  # call 1: plain
    f(A, 1.0)  # call 2: the tree
    times = next(iter(f._code.floor.times.values()))
    times.plain[:], times.tree[:] = [0.5], [1.0]
    loop = _LoopTier()
    f._code.floor.tiers = (loop,)  # the program's loop tier (the tier is off here: a stand-in counts its kernels)
    loop.kernels_ready += 1
    f(A, 1.0)  # calls 3 and 4: a kernel is new, but the tree ran at call 2 (floor.SPACING)
    f(A, 1.0)
    assert spy.calls == 3
    f(A, 1.0)  # call 5: the tree, for the new kernel
    assert spy.calls == 3
    times.plain[:], times.tree[:] = [0.5], [1.0]
    f(A, 1.0)  # call 6: the plain function again (its times are still the better)
    assert spy.calls == 4


def test_probes_of_the_slower_way_cost_a_small_share_of_the_calls(local, monkeypatch):
    """A probe costs the slower way's time: the tree 100x slower than the plain function is not run again within
    the next PROBE_SHARE-bounded stretch of calls (100 / 0.05 calls), where one 1.2x slower is probed within 64;
    and a native kernel getting ready does not send a program without loops to its tree (no loop of it can be one:
    the probes cost 15 us a call of a 1 us function here, before)."""
    def runs(fn, ratio, calls=300, bump=False):
        f, spy = _compiled_with_spy(fn)
        A = np.ones((3, 3))
        f(A, 1.0)  # the plain function: its signature's times
        times = next(iter(f._code.floor.times.values()))
        loop = _LoopTier()
        f._code.floor.tiers = (loop,)
        before = spy.calls
        for _ in range(calls):
            times.plain[:], times.tree[:] = [1e-3], [1e-3 * ratio]  # as if both ways had been timed
            if bump:
                loop.kernels_ready += 1
            f(A, 1.0)
        return calls - (spy.calls - before)  # tree runs

    assert runs(_scale_rows, 100.0) == 0
    assert runs(_scale_rows, 1.2, 100) >= 1
    assert runs(_scale_rows, 100.0, bump=True) == 0


def test_a_plain_run_that_fails_reruns_through_the_tree(local, monkeypatch):
    """The error is the tree's ExecutionError, the same as with the floor off, and the parameter the program
    stores into ends as the plain function leaves it (stored once)."""
    monkeypatch.setenv("PHYLANX_FLOOR", "0")
    with pytest.raises(px.ExecutionError) as tree_err:
        px.compile(_store_then_fail)(np.zeros(3), 5)
    monkeypatch.setenv("PHYLANX_FLOOR", "1")
    f, spy = _compiled_with_spy(_store_then_fail)
    A = np.zeros(3)
    with pytest.raises(px.ExecutionError) as err:
        f(A, 5)
    assert spy.calls == 1  # it ran plain first
    assert str(err.value) == str(tree_err.value)
    assert "in primitive" in str(err.value) and "IndexError" in str(err.value)
    np.testing.assert_array_equal(A, [7.0, 0.0, 0.0])


def _tree_error(fn, *args, **kwargs):
    """The ExecutionError the tree gives (the floor off) for ``fn`` on copies of ``args``."""
    import os
    before = os.environ.get("PHYLANX_FLOOR")
    os.environ["PHYLANX_FLOOR"] = "0"
    try:
        with pytest.raises(px.ExecutionError) as err:
            px.compile(fn)(*[a.copy() if isinstance(a, np.ndarray) else a for a in args],
                           **{k: v.copy() if isinstance(v, np.ndarray) else v for k, v in kwargs.items()})
    finally:
        os.environ["PHYLANX_FLOOR"] = before
    return str(err.value)


def test_a_failed_plain_run_is_not_rerun_and_leaves_what_the_plain_function_leaves(local):
    """Nothing is copied before a plain run (the copies cost NPBench's in-place kernels 5-30% of a call): a failed
    run's changes stay, as the plain function leaves them (halved once, by position or by keyword, through an alias),
    and its error is the tree's, located from the traceback (runtime/plain_errors.py)."""
    for fn, args, kwargs in ((_halve_then_fail, (), {"A": np.ones(3), "i": 9}),
                             (_alias_then_fail, (np.zeros(3), 9), {})):
        want_error = _tree_error(fn, *args, **kwargs)
        f, spy = _compiled_with_spy(fn)
        want = [a.copy() for a in (*args, *kwargs.values()) if isinstance(a, np.ndarray)][0]
        with pytest.raises(IndexError):
            fn(*([want] if args else []), *args[1:], **({"A": want, "i": 9} if kwargs else {}))
        trees = _tree_runs(f)
        with pytest.raises(px.ExecutionError) as err:
            f(*args, **kwargs)
        assert spy.calls == 1 and not trees  # no rerun through the tree
        assert str(err.value) == want_error
        assert isinstance(err.value.__cause__, IndexError)
        np.testing.assert_array_equal((*args, *kwargs.values())[0], want)


def _rebinds_after_storing(A, B):
    A[0] = 7.0
    A = np.zeros(2)
    A[1] = 1.0
    return A + B[:2]


def _fills(A, B):
    out = _fill(np.empty(3))
    return out[:2] + A[:2] + B[:2]


def _fill(x):
    x[:] = 2.0
    return x


def test_programs_storing_into_arrays_give_the_plain_functions_answers(local):
    g, _ = _compiled_with_spy(_rebinds_after_storing)
    h, _ = _compiled_with_spy(_fills)
    A, B = np.ones(3), np.ones(3)
    for _ in range(3):  # plain, tree, then the faster
        np.testing.assert_array_equal(g(A.copy(), B), _rebinds_after_storing(A.copy(), B))
        np.testing.assert_array_equal(h(A, B), _fills(A, B))


def _store_fails(A, i):
    A[i] = 1.0
    return A


def _matmul_fails(A, B):
    return A @ B


def _iadd_fails(A, B):
    A += B
    return A


def _item_iadd_fails(A, i):
    A[i] += 1.0
    return A


def _call_fails(A):
    return np.linalg.inv(A)


def _inner_fails(A, B):
    C = np.sum(A, axis=1) + B
    return C


def _nested_fails(A, B):
    return _inner_fails(A, B) * 2.0


@pytest.mark.parametrize("fn, args", [
    (_store_then_fail, (np.zeros(3), 5)), (_store_fails, (np.zeros(3), 5)),
    (_matmul_fails, (np.zeros((2, 3)), np.zeros((2, 3)))), (_iadd_fails, (np.zeros(3), np.zeros(4))),
    (_item_iadd_fails, (np.zeros(3), 5)), (_call_fails, (np.zeros((2, 2)),)),
    (_inner_fails, (np.zeros((2, 3)), np.zeros(3))), (_nested_fails, (np.zeros((2, 3)), np.zeros(3))),
    (assert_in_loop, (np.arange(5.0), 5)), (raise_when_big, (np.full(2, 200.0),))])
def test_a_failed_plain_run_raises_the_trees_error(local, fn, args):
    """The same message (file:line:col, primitive, cause) as the tree's, for a subscript, a store, operators, an
    augmented store into an item (three primitives at one column: the instruction's kind decides), a call of a
    NumPy function that raises in NumPy's own Python code, a failure inside a function the program calls, and an
    ``assert`` (whose raise has its test's column, the tree's node the statement's) and a ``raise``."""
    want = _tree_error(fn, *args)
    f, spy = _compiled_with_spy(fn)
    trees = _tree_runs(f)
    with pytest.raises(px.ExecutionError) as err:
        f(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    assert spy.calls == 1 and not trees  # the plain run raised it: no rerun through the tree
    assert str(err.value) == want


def test_programs_that_assert_or_raise_run_the_plain_function(local):
    """``assert`` and ``raise`` show nothing when they do not raise: such programs have the plain function as their
    floor (numpy-benchmarks' wave asserts in its loop and ran at 0.5x its plain function, always through the
    tree), with the plain function's answers."""
    for fn, args in ((assert_in_loop, (np.arange(5.0), 3)), (raise_when_big, (np.zeros(2),))):
        f, spy = _compiled_with_spy(fn)
        for _ in range(4):
            np.testing.assert_array_equal(f(*args), fn(*args))
        assert spy.calls >= 1, fn.__name__


def test_a_function_passed_in_that_shows_and_changes_nothing_runs_in_the_plain_function(local):
    """A parameter the program calls (in a loop, in a comprehension), passed or left at its default: when what it
    holds is harmless (prescan.harmless), the plain function runs (numpy-benchmarks' local_maxima with
    ``mode=wrap``: 14x slower through the tree); otherwise the tree, which runs it as the plain function would."""
    a = np.arange(6.0)
    for mode in (None, wrap_around, clamp_step):
        f, spy = _compiled_with_spy(shifted)
        args = (a,) if mode is None else (a, mode)
        for _ in range(4):
            got, want = f(*args), shifted(*args)
            np.testing.assert_array_equal(got[0], want[0])
            assert got[1] == want[1]
        assert spy.calls >= 1, mode
    f, spy = _compiled_with_spy(stamped)
    for _ in range(3):
        got, want = f(a, stamping_step), stamped(a, stamping_step)
        assert got[0] == want[0] and np.array_equal(got[1], want[1])
    assert spy.calls == 0  # it changes an array in place: the tree


def test_a_function_passed_in_that_prints_runs_through_the_tree(local, capsys):
    f, spy = _compiled_with_spy(shifted)
    a = np.arange(3.0)
    for _ in range(2):
        np.testing.assert_array_equal(f(a, noisy_step)[0], shifted(a, noisy_step)[0])
    assert spy.calls == 0
    assert capsys.readouterr().out == "".join(f"step {i}\n" for i in (0, 1, 2, 0, 1, 2)) * 4


def test_an_error_inside_a_function_passed_in_is_the_trees_error(local):
    """Located in the passed function's own tree (the tree compiles it to run it), not at the call."""
    a = np.arange(4.0)
    want = _tree_error(shifted, a, zero_step)
    f, spy = _compiled_with_spy(shifted)
    f(a)  # the plain function (its default is harmless): the floor's first call
    with pytest.raises(px.ExecutionError) as err:
        f(a, zero_step)
    assert spy.calls == 2  # the failing call ran the plain function: no rerun through the tree
    assert str(err.value) == want
    assert "in primitive '__floordiv'" in want and "zero_step" in want


def test_a_program_calling_its_own_lambda_runs_the_plain_function(local):
    """A name bound only to the program's own lambda is no callable passed in: the floor takes the program (a
    lambda called in a loop kept numpy-benchmarks' slowparts in the tree, at 0.68x its plain function)."""
    f, spy = _compiled_with_spy(_local_lambda)
    A = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    for _ in range(4):
        np.testing.assert_allclose(f(A), _local_lambda(A), rtol=1e-12)
    assert spy.calls >= 1


@pytest.mark.parametrize("fn, args", [(_prints, (1.0,)), (_appends, ([1, 2], 3)),
                                      (_store_in_tuple, ((np.zeros(2), np.ones(2)),)),
                                      (_lambda_or_passed, (np.ones(2), np.negative))])
def test_programs_whose_rerun_could_be_seen_take_the_tree(local, fn, args, capsys):
    """Printing, containers holding what the program changes (not copied before a plain run), and a call of a
    name that may hold a callable passed in (a lambda's name bound to a parameter too)."""
    f, spy = _compiled_with_spy(fn)
    for _ in range(3):
        f(*[list(a) if isinstance(a, list) else a for a in args])
    assert spy.calls == 0
    if fn is _prints:
        assert capsys.readouterr().out == "x is 1.0\n" * 3


def test_the_synchronous_runtime_and_the_switch_take_the_tree(monkeypatch):
    A = np.arange(6.0).reshape(2, 3)
    with px.using(px.runtime.synchronous()):
        f, spy = _compiled_with_spy(_scale_rows)
        f(A, 1.0)
        f(A, 1.0)
        assert spy.calls == 0
    monkeypatch.setenv("PHYLANX_FLOOR", "0")
    with px.using(px.runtime.local()):
        f, spy = _compiled_with_spy(_scale_rows)
        f(A, 1.0)
        assert spy.calls == 0


def test_inside_a_profile_the_tree_runs(local):
    f, spy = _compiled_with_spy(_scale_rows)
    with px.profile():
        f(np.ones((2, 2)), 1.0)
    assert spy.calls == 0


def test_typical_reads_its_own_copy_of_the_times():
    # a review: calls from several threads add to a signature's times while another reads them; the median's
    # index was taken from the list after sorting a copy of it (IndexError: list index out of range)
    from phylanx_py.runtime import floor

    class Growing(list):  # its length grows between the copy and a second look at it
        def __len__(self):
            return super().__len__() + 1

    assert floor.typical(Growing([0.5])) == 0.5


def _solve_then_loop(A, b):
    x = np.linalg.solve(A, b)  # no native form: the whole-function tier declines, the loop's tier remains
    for i in range(x.shape[0]):
        x[i] = x[i] * 2.0 + 1.0
    return x


def test_plain_runs_heat_the_programs_loops(local, monkeypatch):
    """While the floor runs the plain function (the tree, its loop interpreted, is far slower), the plain runs count
    toward the heat of the program's loops, each loop credited its share of the tree's time: the loop compiles
    without the tree running again (NPBench's vadv: 623 plain calls in 20 s and its main loop never compiled), its
    kernel then cues the tree, and the answers stay the plain function's."""
    from phylanx_py.runtime import floor
    from phylanx_py.runtime.native import tiering

    monkeypatch.delenv("PHYLANX_NATIVE", raising=False)
    monkeypatch.setattr(tiering, "HOT_SECONDS", 1e9)  # calls 1-2: nothing compiles
    monkeypatch.setattr(floor, "PROBES", ())  # no probe runs the tree: only a kernel getting ready does
    monkeypatch.setattr(floor, "PROBE_EVERY", 10**9)
    f, spy = _compiled_with_spy(_solve_then_loop)
    runs = _tree_runs(f)
    rng = np.random.default_rng(0)
    A, b = rng.standard_normal((400, 400)) + 400 * np.eye(400), rng.standard_normal(400)
    np.testing.assert_allclose(f(A, b), _solve_then_loop(A, b))  # call 1: plain
    np.testing.assert_allclose(f(A, b), _solve_then_loop(A, b))  # call 2: the tree, its loop interpreted
    assert spy.calls == 1 and len(runs) == 1
    (tier,) = f._code.native_loops
    (entry,) = tier.entries.values()
    assert entry.kernel is None and not entry.compiling and entry.held is not None
    monkeypatch.setattr(tiering, "HOT_SECONDS", 3 * entry.interpreted)  # its heat needs plain runs now
    times = next(iter(f._code.floor.times.values()))
    times.tree[:] = [1e3]  # the tree timed far slower: the plain function runs (whatever this machine's timings)
    deadline = time.monotonic() + 60
    while not entry.compiling and entry.kernel is None and time.monotonic() < deadline:
        np.testing.assert_allclose(f(A, b), _solve_then_loop(A, b))
    assert entry.compiling or entry.kernel is not None
    assert len(runs) == 1 and entry.credited > 0  # the plain runs alone made it hot
    while entry.kernel is None and entry.compiling and time.monotonic() < deadline:
        time.sleep(0.05)
    assert entry.kernel is not None, f.explain()
    for _ in range(5):
        np.testing.assert_allclose(f(A, b), _solve_then_loop(A, b))
    assert len(runs) >= 2  # the kernel ready: the tree was timed again


def test_a_stopped_plain_run_leaves_no_signal_that_hangs_a_traced_thread_later():
    """A plain run stopped at its limit (floor.stop_after raises into the caller's thread) must leave the
    interpreter as it found it: clearing an undelivered stop left CPython's async-exception signal set for good,
    and a thread that then ran with a trace function (the worker beside first calls) spun at its first call
    forever (test_beside's first test hung after test_native's stopped runs). In a process of its own: a thread
    spinning in this one would take a core from the rest of the suite."""
    script = textwrap.dedent("""
        import sys, threading
        from phylanx_py.runtime import floor

        def forever():
            while True:
                pass

        def quick():
            return sum(range(1000))

        try:
            floor.stop_after(0.05, forever, (), {})
        except floor.RanTooLong as e:
            print("stopped:", e)
        assert floor.stop_after(5.0, quick, (), {}) == sum(range(1000))  # a run that ends first: its value
        assert floor._WATCH._due == {}  # no deadline of either run left with the limits' thread

        def traced():
            sys.settrace(lambda *a: None)
            for _ in range(10):
                quick()
            sys.settrace(None)

        t = threading.Thread(target=traced, daemon=True)
        t.start()
        t.join(10)
        print("traced thread:", "still running" if t.is_alive() else "done")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["stopped: the plain run outlasted 0.05 s", "traced thread: done"]



def test_a_limited_run_inside_another_takes_only_its_own_stop():
    """A compiled function whose first call is limited may call another whose first call is limited too: the outer
    run's stop stops the outer run (its caller reruns it), not the inner one, and the inner run's own stop only
    the inner one."""
    from phylanx_py.runtime import floor

    def spin(seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
        return "inner done"

    def outer_run():
        return floor.stop_after(30.0, spin, (5.0,), {})  # the inner run: long, its own limit far away

    t0 = time.perf_counter()
    with pytest.raises(floor.RanTooLong, match="outlasted 0.05 s"):
        floor.stop_after(0.05, outer_run, (), {})
    assert time.perf_counter() - t0 < 2.0  # the outer run stopped, through the inner one
    inner_stops = []

    def outer_with_stopped_inner():
        try:
            floor.stop_after(0.05, spin, (5.0,), {})
        except floor.RanTooLong:
            inner_stops.append(1)
        return "outer done"

    assert floor.stop_after(30.0, outer_with_stopped_inner, (), {}) == "outer done"
    assert inner_stops == [1]
    spin(0.1)  # nothing left pending for this thread
