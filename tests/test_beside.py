"""The first calls of a compiled function run the plain function while a worker translates it (runtime/beside.py,
decorator.py ``_beside``): the answer and the errors are the plain function's and the tree's, the translation and
the first signature's lowering happen in the worker, and the functions that must translate first do."""
from __future__ import annotations

import copy
import threading
import time

import numpy as np
import pytest
from helpers import assert_same, source_position
from phylanx_py.runtime import beside
from test_native import _nested_increments

import phylanx_py as px
from phylanx_py import decorator, turns


def scalar_loop(n):
    s = 0
    for i in range(n):
        s = s + i * 2
    return s


def scale(a, k):
    return a * k + 1.0


def pick(a, i):
    t = a * 2.0
    return t[i] + 1.0


def nested(a):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            a[i, j] = a[i, j] + i * j
    return a


def nested_printing(a):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            print(i, j)
    return a


def nested_drawing(a):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            a[i, j] = np.random.rand()
    return a


_MODULE_ARRAY = np.zeros(3)


def nested_reading_module_array(a):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            a[i, j] = _MODULE_ARRAY[j % 3]
    return a


def loops_in_turn(a):
    s = 0
    while s < 3:
        s += 1
        if s == 2:
            continue  # (a while loop's continue and its end jump back to two places: one loop)
    for j in range(a.shape[0]):
        if j == 1:
            continue
        a[j] = a[j] + s
    return a


def chained(a):
    b = c = a * 2.0  # COPY 1, then STORE_FAST: as the translator takes it
    if (n := b.shape[0]) > 1:
        c = c + n
    return b + c


def chained_stores(a, n):
    out = np.zeros((n, n))
    for i in range(n):
        out[i, :] = out[:, i] = a[i] * 2.0  # COPY 1, then the stores' operands, then STORE_SUBSCR
    flat = out.copy()
    flat.shape = n * n  # the one attribute store translated (a reshape in place)
    return flat


def while_around_for(a):
    k = 0
    while k < 2:
        for j in range(a.shape[0]):
            a[j] = a[j] + k
        k += 1
    return a


def own_lambda(a, b):
    fprime = lambda x: 1.0 - np.tanh(x) ** 2  # noqa: E731 - as numpy-benchmarks' slowparts has it
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = fprime(a[i]) * b[i]
    return out


def local_import(values):
    import numpy as np  # (numpy-benchmarks' grouping)

    diff = np.concatenate(([1], np.diff(values)))
    return np.where(diff)[0]


def nested_def(x):
    def inner(y):
        return y + 1

    return inner(x)


def raise_from(x):
    if x < 0:
        raise ValueError("negative") from None
    return x


def local_module_as_value(x):
    import numpy as np

    m = np
    return m.sqrt(x)


def uses_try(x):
    try:
        y = x + 1
    except ValueError:
        y = 0
    return y


@pytest.fixture(autouse=True)
def _floor_on(monkeypatch):
    monkeypatch.setenv("PHYLANX_FLOOR", "1")  # off in the rest of the suite (conftest.py); the default for users
    monkeypatch.delenv("PHYLANX_BESIDE", raising=False)
    monkeypatch.delenv("PHYLANX_NATIVE", raising=False)


@pytest.fixture
def translations(monkeypatch):
    """The name of the thread each translation ran in (the real translator runs: this only records)."""
    threads = []
    real = decorator.translate

    def recorded(fn):
        threads.append(threading.current_thread().name)
        return real(fn)

    monkeypatch.setattr(decorator, "translate", recorded)
    return threads


def _translated(f, timeout=60.0):
    """Wait for the job beside ``f``'s first calls; its code."""
    f._job[1].result(timeout=timeout)
    assert f._code is not None
    return f._code


def test_first_calls_run_the_plain_function_while_the_worker_translates(translations):
    f = px.compile(scalar_loop)
    assert f(1000) == scalar_loop(1000)
    code = _translated(f)
    assert translations == ["phylanx-beside"]
    # the first call's signature was lowered in the worker too: its entry exists before any call reached the tier
    entries = list(code.whole.entries.values())
    assert len(entries) == 1 and entries[0].native_runs == 0 and entries[0].plain_runs == 0
    assert entries[0].key is not None  # its mark's digest, read ahead
    beside_seconds = f._beside_seconds  # the plain runs beside the job heat the entry at the next call
    assert beside_seconds > 0 and entries[0].interpreted == 0
    f(10)
    assert f._beside_seconds == 0 and entries[0].interpreted >= beside_seconds
    for n in (0, 1, 7, 1000, 12345):
        assert f(n) == scalar_loop(n)
    assert translations == ["phylanx-beside"]  # translated once


def _rows_doubled(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = a[i] * 2.0
    return out


def doubled_plus(a, b):
    return _rows_doubled(a) + b  # (a call whose body is statements, in an expression: no whole-function kernel)


@pytest.fixture
def loop_lowerings(monkeypatch):
    """The thread each loop signature was lowered in (the real lowering runs: this only records)."""
    from phylanx_py.runtime.native import loop

    threads = []
    real = loop.NativeLoop._lower

    def recorded(self, *args):
        threads.append(threading.current_thread().name)
        return real(self, *args)

    monkeypatch.setattr(loop.NativeLoop, "_lower", recorded)
    return threads


def _loop_tier(code):
    from phylanx_py.runtime.native.loop import NativeLoop

    return next(t for hook in code.loop_hooks for t in hook.tiers if type(t) is NativeLoop)


def test_a_loop_of_a_function_translated_beside_its_calls_is_lowered_beside_them(
        translations, loop_lowerings, monkeypatch):
    """Its signature's lowering is a job too (tiering.py ``Lowering``): the call that meets it runs the loop
    interpreted, the next after the job takes the lowered entry with the heat of those runs, and it goes native."""
    from phylanx_py.runtime.native.tiering import Lowering

    f = px.compile(doubled_plus)
    a, b = np.arange(12.0).reshape(4, 3), np.ones(3)
    np.testing.assert_array_equal(f(a, b), doubled_plus(a, b))
    code = _translated(f)
    monkeypatch.setenv("PHYLANX_FLOOR", "0")  # every call through the tree from now on, where the loop's tier is
    np.testing.assert_array_equal(f(a, b), doubled_plus(a, b))
    tier = _loop_tier(code)
    (pending,) = tier.entries.values()
    assert type(pending) is Lowering  # the call ran the loop interpreted meanwhile
    pending.job.result(timeout=60)
    assert pending.interpreted > 0
    np.testing.assert_array_equal(f(a, b), doubled_plus(a, b))
    (entry,) = tier.entries.values()
    assert type(entry) is not Lowering and entry.declined is None and entry.interpreted >= pending.interpreted
    assert entry.held is not None  # its first run's arguments, as a plain run's credit needs them to heat it
    assert loop_lowerings == ["phylanx-beside"] and translations == ["phylanx-beside"]
    deadline = time.monotonic() + 120
    while entry.kernel is None and time.monotonic() < deadline:
        np.testing.assert_array_equal(f(a, b), doubled_plus(a, b))
        time.sleep(0.005)
    assert entry.kernel is not None, f.explain()
    np.testing.assert_array_equal(f(a, b), doubled_plus(a, b))
    assert entry.native_runs >= 1


def test_a_loop_lowered_beside_the_calls_lands_from_a_plain_runs_credit(monkeypatch):
    """The floor may run only the plain function after the tree's run that met the loop: that run's credit lands
    the lowered entry, which the plain runs then heat (before, NPBench's channel_flow kept its loops "interpreted so
    far" for good, the job done and never taken)."""
    from phylanx_py.runtime.native.tiering import Lowering

    f = px.compile(doubled_plus)
    a, b = np.arange(12.0).reshape(4, 3), np.ones(3)
    np.testing.assert_array_equal(f(a, b), doubled_plus(a, b))
    code = _translated(f)
    monkeypatch.setenv("PHYLANX_FLOOR", "0")
    np.testing.assert_array_equal(f(a, b), doubled_plus(a, b))
    tier = _loop_tier(code)
    (pending,) = tier.entries.values()
    assert type(pending) is Lowering
    pending.job.result(timeout=60)
    tier.credit(0.01, 1.0)  # what floor.py does after a plain run of the program
    (entry,) = tier.entries.values()
    assert type(entry) is not Lowering and entry.held is not None and entry.credited > 0


def nested_then_doubled(a, b):
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            a[i, j] = a[i, j] + i * j
    return _rows_doubled(a) + b


def test_a_loop_of_a_function_translated_in_its_first_call_is_lowered_in_the_call(loop_lowerings, monkeypatch):
    """A function translated in its first call (here: the floor off, so the tree runs it) has its loops' signatures
    lowered in the call, so that a long first call can switch to native code part way through."""
    monkeypatch.setenv("PHYLANX_FLOOR", "0")  # the first call through the tree, where the loops' tier is
    f = px.compile(nested_then_doubled)
    a, b = np.arange(12.0).reshape(4, 3), np.ones(3)
    np.testing.assert_array_equal(f(a.copy(), b), nested_then_doubled(a.copy(), b))
    assert not f._job and f._code is not None
    assert loop_lowerings and set(loop_lowerings) == {threading.current_thread().name}


def test_arrays_and_keywords_give_the_plain_answer_during_and_after(translations):
    f = px.compile(scale)
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(f(a, k=3.0), scale(a, 3.0))
    _translated(f)
    # straight-line array code: the plain runs beside the job count toward its lowering (whole.py's ``warm``), and
    # explain() says so before any call took the tiers' path (a benchmark's settling read "nothing pending")
    assert "-> the floor's choice so far (" in f.explain()
    for k in (0.5, 2.0):
        np.testing.assert_array_equal(f(a, k), scale(a, k))
    assert translations == ["phylanx-beside"]


def test_an_error_of_a_first_call_is_the_trees_error(monkeypatch):
    a = np.arange(4.0)
    with pytest.raises(px.ExecutionError) as beside_err:
        px.compile(pick)(a, 9)
    monkeypatch.setenv("PHYLANX_BESIDE", "0")
    monkeypatch.setenv("PHYLANX_FLOOR", "0")
    with pytest.raises(px.ExecutionError) as tree_err:
        px.compile(pick)(a, 9)
    assert str(beside_err.value) == str(tree_err.value)
    line, _ = source_position(pick, "t[i]")
    assert f"test_beside.py:{line}" in str(beside_err.value)
    assert isinstance(beside_err.value.__cause__, IndexError)


def test_a_failed_assert_or_raise_of_a_first_call_is_the_trees_error(monkeypatch):
    """An ``assert`` (its raise has its test's column, the tree's node the statement's: plain_errors.py) and a
    ``raise`` in a first call beside the translation."""
    from prog_control import assert_in_loop, raise_when_big

    cases = ((assert_in_loop, (np.arange(5.0), 5)), (raise_when_big, (np.full(2, 200.0),)))
    beside_errors = []
    for fn, args in cases:
        with pytest.raises(px.ExecutionError) as err:
            px.compile(fn)(*args)
        beside_errors.append(err.value)
    monkeypatch.setenv("PHYLANX_BESIDE", "0")
    monkeypatch.setenv("PHYLANX_FLOOR", "0")
    for (fn, args), beside_error in zip(cases, beside_errors):
        with pytest.raises(px.ExecutionError) as tree_err:
            px.compile(fn)(*args)
        assert str(beside_error) == str(tree_err.value)
        assert beside_error.primitive == ("assert" if fn is assert_in_loop else "raise")
        assert type(beside_error.__cause__) is (AssertionError if fn is assert_in_loop else ValueError)


def test_a_wrong_call_is_pythons_error():
    f = px.compile(scale)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'k'"):
        f(np.ones(2))


def test_an_unsupported_construct_the_bytecode_shows_is_a_compile_error_at_the_first_call(translations):
    """``try`` shows in the bytecode (prescan.py): the function translates in its first call, which raises; its
    plain function never runs."""
    line, col = source_position(uses_try, "try:")
    with pytest.raises(px.CompileError) as err:
        px.compile(uses_try)(1)
    assert str(err.value).splitlines()[0].endswith(f":{line}:{col}: unsupported construct: 'try' statement")
    assert translations == [threading.current_thread().name]


class _Scaler:
    def __call__(self, x):
        return 2 * x


SCALER = _Scaler()


def calls_an_object(x):
    return SCALER(x) + 1


def test_a_construct_only_the_translator_refuses_is_a_compile_error_once_translated():
    """A call of an object (data, as far as the bytecode tells) reads as supported: the first call gives the plain
    answer, and the call after the translation ended raises its CompileError (``.tree`` at once)."""
    f = px.compile(calls_an_object)
    assert f(1) == 3
    with pytest.raises(px.CompileError):
        f._job[1].result(timeout=60)
    line, col = source_position(calls_an_object, "SCALER(")
    with pytest.raises(px.CompileError) as err:
        f(1)
    assert str(err.value).splitlines()[0].endswith(
        f":{line}:{col}: unsupported call: cannot compile a call to 'SCALER' (_Scaler)")
    with pytest.raises(px.CompileError):
        f.explain()


def test_the_bytecode_scan_sends_every_refused_construct_of_the_error_suite_to_translate_first():
    """Each unsupported construct of tests/test_errors.py translates in its first call (and raises there), so its
    plain function, which may open files or change globals, never runs before the CompileError."""
    from test_errors import UNSUPPORTED

    from phylanx_py.prescan import beside_mode, runs_beside

    assert [fn.__name__ for fn, _, _ in UNSUPPORTED if runs_beside(fn)] == []
    assert runs_beside(scalar_loop) and runs_beside(scale) and runs_beside(pick)
    assert runs_beside(loops_in_turn)  # loops one after the other: the plain function loses nothing
    assert runs_beside(chained)  # chained assignments and := (a match's subject, also COPY 1, is refused)
    assert beside_mode(chained_stores) == "plain"  # chained item stores and ``a.shape = s``
    # a loop in a loop runs the plain function, stopped to rerun through the tree when long (``beside_mode``)
    assert beside_mode(nested) == beside_mode(while_around_for) == "limited"
    assert beside_mode(scalar_loop) == beside_mode(loops_in_turn) == "plain"
    # ... unless a rerun would repeat what someone saw: printing, random draws, mutable module data
    assert beside_mode(nested_printing) is None and beside_mode(nested_drawing) is None
    assert beside_mode(nested_reading_module_array) is None
    # asserts and ``raise X`` (numpy-benchmarks' wave, cma_pt), the function's own lambdas (slowparts) and imports of
    # modules at the top of its body used as modules (grouping); not a nested ``def``, ``raise ... from``, nor a
    # module imported there used as a value
    from prog_control import assert_in_loop, raise_when_big

    assert beside_mode(assert_in_loop) == beside_mode(raise_when_big) == "plain"
    assert beside_mode(own_lambda) == beside_mode(local_import) == "plain"
    assert not runs_beside(nested_def) and not runs_beside(raise_from) and not runs_beside(local_module_as_value)


@pytest.mark.parametrize("fn", [loops_in_turn, chained, chained_stores, own_lambda, local_import])
def test_loops_one_after_the_other_and_chained_assignments_run_the_plain_function_beside_the_translation(
        translations, fn):
    f = px.compile(fn)
    a, b = np.arange(4.0), np.arange(4.0)
    extra = {chained_stores: (4,), own_lambda: (np.ones(4),)}.get(fn, ())
    np.testing.assert_array_equal(f(a, *extra), fn(b, *extra))
    np.testing.assert_array_equal(a, b)
    assert f._job and f._job[1] is not None  # the first call ran the plain function; the worker translates
    f._job[1].result(timeout=60)
    assert translations == ["phylanx-beside"]
    np.testing.assert_array_equal(f(a, *extra), fn(b, *extra))


@pytest.mark.parametrize("why", ["nested loops that print", "PHYLANX_BESIDE=0", "forced", "synchronous runtime",
                                 "debug"])
def test_functions_and_calls_that_translate_first(why, translations, monkeypatch, capsys):
    fn, args = (nested_printing, (np.ones((2, 3)),)) if why == "nested loops that print" else (scalar_loop, (50,))
    if why == "PHYLANX_BESIDE=0":
        monkeypatch.setenv("PHYLANX_BESIDE", "0")
    if why == "forced":
        monkeypatch.setenv("PHYLANX_NATIVE", "force")
    f = px.compile(fn, debug=why == "debug")
    expected = fn(*[np.array(a) if isinstance(a, np.ndarray) else a for a in args])
    if why == "synchronous runtime":
        with px.using(px.runtime.synchronous()):
            out = f(*args)
    else:
        out = f(*args)
    np.testing.assert_array_equal(out, expected)
    assert f._code is not None  # translated in this call
    assert translations == [threading.current_thread().name]
    if why in ("nested loops that print", "PHYLANX_BESIDE=0", "forced", "debug"):
        assert f._job is False  # this function always translates first
    capsys.readouterr()


def test_a_loop_in_a_loop_runs_the_plain_function_beside_its_translation(translations):
    """Its first call is the plain function's (NPBench's symm: 60 ms with the translation and lowering in it, against
    7.5 ms plain), its arrays changed as the plain function changes them."""
    f = px.compile(nested)
    a, b = np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(2, 3)
    out = f(a)
    assert out is a
    np.testing.assert_array_equal(a, nested(b))
    assert f._limited and f._job and f._job[1] is not None
    _translated(f)
    assert translations == ["phylanx-beside"]
    np.testing.assert_array_equal(f(np.ones((3, 2))), nested(np.ones((3, 2))))


def test_a_long_first_call_of_a_loop_in_a_loop_stops_once_translated_and_reruns_through_the_tree(
        translations, monkeypatch):
    """Stopped only when the tree can reach native code for its arguments (the translation done, the signature
    lowered, not declined), after ``floor.OSR_SECONDS``: its arrays are put back, so the answer is one call's (each
    element incremented ``sweeps`` times, not more), and the tree runs the call (its loops' tier)."""
    from phylanx_py.runtime import floor
    from phylanx_py.runtime.native import tiering as native_tiering

    monkeypatch.setattr(floor, "OSR_SECONDS", 0.02)
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 1e9)  # no compile: the rerun's loops stay interpreted
    monkeypatch.setattr(turns, "PAUSE", 1e-4)  # the job done well before the plain run would end
    f = px.compile(_nested_increments)
    u = np.zeros((60, 60))
    out = f(u, 400)  # about 0.2 s plain here
    assert out is u
    np.testing.assert_array_equal(u, _nested_increments(np.zeros((60, 60)), 400))
    assert translations == ["phylanx-beside"]
    assert f.explain().splitlines()[-1].split(" -> ")[1].startswith("loops only so far (")  # the tree ran it
    np.testing.assert_array_equal(f(np.zeros((60, 60)), 3), _nested_increments(np.zeros((60, 60)), 3))


def test_a_long_first_call_that_cannot_go_native_is_not_stopped(translations, monkeypatch):
    """A signature the native tier declines (a float16 array) gains nothing from the tree: the plain run goes on."""
    from phylanx_py.runtime import floor

    monkeypatch.setattr(floor, "OSR_SECONDS", 0.01)
    monkeypatch.setattr(turns, "PAUSE", 1e-4)
    reruns = []
    monkeypatch.setattr(decorator.CompiledFunction, "_compiled",
                        lambda self, real=decorator.CompiledFunction._compiled: reruns.append(1) or real(self))
    f = px.compile(_nested_increments)
    u = np.zeros((40, 40), dtype=np.float16)
    f(u, 100)
    np.testing.assert_array_equal(u, _nested_increments(np.zeros((40, 40), dtype=np.float16), 100))
    assert reruns == [] and translations == ["phylanx-beside"]


def test_arguments_a_stopped_run_could_not_put_back_translate_first(translations):
    """A list, or an array of objects (whose copy shares them), could be changed past putting back: such a call of
    a loop in a loop translates in the call, as before."""
    f = px.compile(_nested_increments)
    u = np.zeros((2, 2), dtype=object)
    f(u, 2)
    np.testing.assert_array_equal(u, _nested_increments(np.zeros((2, 2), dtype=object), 2))
    assert translations == [threading.current_thread().name] and f._limited


def test_the_worker_finishes_while_calls_keep_it_busy():
    """A job makes progress while a call holds ``busy()`` (it runs slices then), and its error is its Future's."""
    def work(n):
        return sum(len(str(i)) for i in range(n))

    job = beside.submit(work, 20_000)
    with beside.busy():
        spins = 0
        while not job.done():  # pure Python: the worker gets the lock only in its slices
            spins += 1
    assert job.result() == work(20_000)
    failing = beside.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=60)


def test_the_worker_backs_off_while_other_threads_run_and_not_while_they_wait():
    """The worker measures the other threads' processor time during its sleeps (phylanx_py/turns.py): while one
    runs Python (here a spinning thread, outside any call), it takes a tenth of the time (``PAUSE`` after each slice)
    yet finishes its job; once nothing else runs (this thread waits for its result), it runs at full speed again."""
    def work(n):
        seen = set()
        for i in range(n):
            turns.turn()  # as translation and lowering do (ir.walk, each expression): a slice over, it sleeps
            if i % 500 == 0:
                seen.add(turns.state["active"])
        return seen

    stop = threading.Event()

    def spin():
        x = 0
        while not stop.is_set():
            x += 1

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    turns.state["active"] = False  # (each answer below is the worker's own measure, not a state left before)
    try:
        seen_while_spinning = beside.submit(work, 60_000).result(timeout=120)
    finally:
        stop.set()
        spinner.join()
    assert True in seen_while_spinning  # its sleeps saw the spinning thread run
    # then nothing of this test runs: full speed (threads of earlier tests in this process, a compile in the
    # background, may still run a while: a few tries)
    for _ in range(20):
        turns.state["active"] = True
        if False in beside.submit(work, 60_000).result(timeout=120):
            break
    else:
        raise AssertionError("the worker never saw the other threads idle")
    with beside.waiting():
        assert turns.state["waiting"] == 1
    assert turns.state["waiting"] == 0


def _differential_cases():
    from test_differential import ALL

    return ALL


@pytest.mark.parametrize(("fn", "args", "kwargs"), _differential_cases())
def test_every_differential_program_gives_the_plain_answer_beside_and_after_its_translation(fn, args, kwargs):
    """The differential suite's programs with the worker on: the first call (the plain function while the worker
    translates, or the tree for those that translate first), then the calls after the translation, each against
    the plain function on fresh copies (its effects included: print, random draws seeded alike)."""
    f = px.compile(fn)
    for n in range(3):
        plain_in, compiled_in = copy.deepcopy((args, kwargs)), copy.deepcopy((args, kwargs))
        np.random.seed(n)
        want = fn(*plain_in[0], **plain_in[1])
        np.random.seed(n)
        got = f(*compiled_in[0], **compiled_in[1])
        assert_same(got, want)
        assert_same(compiled_in, plain_in, "inputs after the call")
        if n == 0 and f._job:
            f._job[1].result(timeout=60)  # the calls after it take the tiers' path
    assert f._code is not None


def test_a_function_whose_kernel_was_kept_before_translates_in_its_first_call(translations, monkeypatch, tmp_path):
    """Its first call loads the kept whole-function kernel (runtime/native/warm.py), which a plain run beside the
    translation would only delay (NPBench's compute, warm: first call 81 ms against 50, calls 2-6 not native): the
    tier marks the Python function when it keeps a kernel of it, and such a function translates first."""
    from phylanx_py.primitives import kernel_cache
    from phylanx_py.runtime.native import warm

    monkeypatch.setattr(kernel_cache, "CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PHYLANX_NATIVE_WARM", "1")
    f = px.compile(scalar_loop)
    assert f(100) == scalar_loop(100)
    code = _translated(f)
    assert not warm.kept_code(scalar_loop)
    code.whole._keep(next(iter(code.whole.entries.values())))  # as after its kernel was timed faster
    assert warm.kept_code(scalar_loop)
    again = px.compile(scalar_loop)
    assert again(100) == scalar_loop(100)
    assert again._job is False and again._code is not None
    assert translations == ["phylanx-beside", threading.current_thread().name]
