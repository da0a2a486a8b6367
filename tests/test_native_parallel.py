"""The native tier's parallel variant (runtime/native/parallel.py, tuning.py): loops whose iterations are
independent run on several threads, with the same bits as the sequential kernel and the plain function's answer;
dependences, overlapping arrays and forked children keep them sequential."""
from __future__ import annotations

import multiprocessing

import numpy as np
import prog_parallel as P
import pytest
from helpers import assert_same
from phylanx_py.runtime.native import kir, parallel, tuning

import phylanx_py as px


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setenv("PHYLANX_NATIVE", "force")


def _copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _entry(f):
    (entry,) = f._compile().whole.entries.values()
    return entry


rng = np.random.default_rng(7)
INDEPENDENT = {
    "row_norms": (P.row_norms, lambda: (rng.random((300, 7)), np.zeros(300))),
    "mirror_into": (P.mirror_into, lambda: (rng.random(501), np.zeros(501))),
    "smooth": (P.smooth, lambda: (rng.random(400), np.zeros(400))),
    "column_scale": (P.column_scale, lambda: (rng.random((120, 9)), rng.random(9))),
    "escape_counts": (P.escape_counts, lambda: (rng.uniform(-2.0, 0.5, 257), np.zeros(257, dtype=np.int64), 60)),
}


@pytest.mark.parametrize("name", sorted(INDEPENDENT))
def test_independent_iterations_run_in_parallel_with_the_same_bits(forced, name):
    fn, make = INDEPENDENT[name]
    args = make()
    f = px.compile(fn)
    assert_same(f(*_copies(args)), fn(*_copies(args)))
    entry = _entry(f)
    choice = entry.parallel
    assert choice is not None, entry.serial_why
    runs = choice.runs
    got_args = _copies(args)
    got = f(*got_args)
    assert choice.runs == runs + 1  # the call ran the parallel variant
    assert_same(got, fn(*_copies(args)))
    seq_args = _copies(args)  # the sequential kernel on the same inputs: the very same bits
    entry.kernel(*seq_args)
    for a, b in zip(got_args, seq_args):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
    assert f.explain().splitlines()[-1].endswith(
        f"; 1 loop may run on {tuning.threads()} threads, in parallel (forced))")


@pytest.mark.parametrize("fn, args, why", [
    (P.smooth_in_place, (np.linspace(0.0, 1.0, 50),),
     "'a' is accessed at other elements than the iteration's own ('i')"),
    (P.prefix_sums, (np.linspace(0.0, 1.0, 50), np.zeros(50)), "'s' is carried from one iteration to the next"),
    (P.last_kept, (np.linspace(0.0, 1.0, 50), np.zeros(50)), "'k' is read after the loop"),
    (P.from_start, (np.linspace(0.0, 1.0, 50), np.zeros(50), 3),
     "a start that may be negative (a negative index reaches the end of an array)"),
    (P.scatter_counts, (np.arange(50) % 7, np.zeros(7, dtype=np.int64)),
     "'counts' is accessed at other elements than the iteration's own ('i')"),
    (P.powers, (np.linspace(1.0, 2.0, 50), np.arange(50) % 4, np.zeros(50)),
     "a power whose exponent is not a constant"),

])
def test_dependences_keep_a_loop_sequential_and_say_why(forced, fn, args, why):
    f = px.compile(fn)
    for _ in range(2):
        assert_same(f(*_copies(args)), fn(*_copies(args)))
    assert _entry(f).parallel is None
    assert f.explain().splitlines()[-1].endswith(f" native runs; sequential: the loop over 'i': {why})")


def test_arrays_that_overlap_run_the_sequential_variant(forced):
    """The same array as input and output, or two overlapping views: iterations are no longer independent (each
    reads what another writes), so the call runs sequentially and gives the plain function's answer."""
    f = px.compile(P.mirror_into)
    x = np.linspace(0.0, 1.0, 301)
    assert_same(f(x.copy(), np.zeros(301)), P.mirror_into(x.copy(), np.zeros(301)))
    choice = _entry(f).parallel
    runs = choice.runs
    a, b = x.copy(), x.copy()
    assert_same(f(a, a), P.mirror_into(b, b))
    np.testing.assert_array_equal(a, b)
    a, b = x.copy(), x.copy()
    assert_same(f(a[1:], a[:-1]), P.mirror_into(b[1:], b[:-1]))
    np.testing.assert_array_equal(a, b)
    assert choice.runs == runs
    f(x.copy(), np.zeros(301))
    assert choice.runs == runs + 1


def test_the_variant_is_compiled_after_a_long_call_then_chosen_by_measuring(forced):
    """Unforced: the first call is timed (a long one has its parallel variant compiled, in the background), then
    calls alternate between the sequential and the parallel variant (the same answers) until one is kept; the
    quick path then calls it, and explain() says which, with both times."""
    fn = P.escape_counts
    args = (rng.uniform(-2.0, 0.5, 20000), np.zeros(20000, dtype=np.int64), 200)  # ms a call: long enough
    want = fn(*_copies(args))
    f = px.compile(fn)
    f(*_copies(args))
    choice = _entry(f).parallel
    choice.state, choice.forced, choice.times, choice.par = "probing", False, ([], []), None
    built = []
    choice.background = lambda build: (built.append(build), build())  # the build, here in this thread
    f._compile().whole._requick()
    assert_same(f(*_copies(args)), want)
    seq_t, par_t = choice.times
    assert len(seq_t) == 1 and seq_t[0] >= tuning.MIN_SECONDS, seq_t
    assert len(built) == 1 and choice.par is not None and choice.state == "measuring"
    for k in range(2 * tuning.ROUNDS):
        assert_same(f(*_copies(args)), want)
        assert (len(par_t), len(seq_t)) == (k // 2 + 1, (k + 1) // 2 + 1)
        if choice.state != "measuring":
            break
    assert choice.state in ("parallel", "sequential") and len(par_t) == tuning.ROUNDS
    line = f.explain().splitlines()[-1]
    chosen = "in parallel" if choice.state == "parallel" else "sequential"
    assert f"1 loop may run on {tuning.threads()} threads, {chosen} chosen: " in line
    runs = choice.runs
    assert_same(f(*_copies(args)), want)
    assert choice.runs == runs + (choice.state == "parallel")


def test_a_short_call_keeps_the_kernel_sequential_without_compiling_its_parallel_variant(forced):
    fn, make = INDEPENDENT["smooth"]
    args = (np.linspace(0.0, 1.0, 8), np.zeros(8))  # well under a microsecond of work
    f = px.compile(fn)
    f(*_copies(args))
    choice = _entry(f).parallel
    choice.state, choice.forced, choice.times, choice.par = "probing", False, ([], []), None
    choice.background = lambda build: None  # not built: a preempted call measured long (tried again below)
    f._compile().whole._requick()
    for _ in range(50):
        assert_same(f(*_copies(args)), fn(*_copies(args)))
        if choice.state == "sequential":
            break
        choice.state, choice.times = "probing", ([], [])
        f._compile().whole._requick()
    assert choice.state == "sequential" and choice.par is None
    assert f.explain().splitlines()[-1].endswith("us a call is too short for threads)")


_FORKED = {}  # what the forked child finds in its copy of this module


def _child(conn):
    fn, make = INDEPENDENT["row_norms"]
    f, args = _FORKED["f"], _FORKED["args"]
    choice = _entry(f).parallel
    runs = choice.runs
    got = f(*_copies(args))
    conn.send((got, fn(*_copies(args)), choice.runs - runs, tuning._forked[0]))


def test_a_forked_child_runs_the_sequential_variant(forced):
    """GNU OpenMP's threads do not survive fork: a child forked after the parent ran a parallel kernel runs the
    sequential one (and finishes: a parallel launch there could hang)."""
    fn, make = INDEPENDENT["row_norms"]
    f = px.compile(fn)
    args = make()
    f(*_copies(args))
    assert _entry(f).parallel.runs >= 1
    _FORKED.update(f=f, args=args)
    ctx = multiprocessing.get_context("fork")
    here, there = ctx.Pipe()
    child = ctx.Process(target=_child, args=(there,))
    child.start()
    try:
        assert here.poll(60), "the forked child did not answer in 60 s"
        got, want, runs, forked = here.recv()
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
    assert_same(got, want)
    assert (runs, forked) == (0, True)


def _zero_stride(value, n):
    return np.lib.stride_tricks.as_strided(np.full(1, value), shape=(n,), strides=(0,))


REVIEWED = {  # name -> (function, fresh inputs): loops that must stay sequential, or calls that must
    "pick_rows": (P.pick_rows, lambda: (np.ones((400, 3)), np.ones((400, 4)), np.zeros((400, 3)), 10)),
    "last_doubled": (P.last_doubled, lambda: (np.arange(1000.0), np.zeros(1000), 2)),
    "tails": (P.tails, lambda: (np.zeros(300), 50)),
    "reverse_bump": (P.reverse_bump, lambda: (np.arange(300.0), np.zeros(300))),
    "symmetrize": (P.symmetrize, lambda: (np.arange(60 * 60, dtype=float).reshape(60, 60),)),
    "stepped": (P.stepped, lambda: (np.ones(400), np.zeros(400), 10, 0)),
    "accumulate_zero_strides": (P.accumulate, lambda: (_zero_stride(1.0, 5000), _zero_stride(0.0, 5000))),
}


@pytest.mark.parametrize("name", sorted(REVIEWED))
def test_loops_that_only_look_independent_give_the_plain_answer(forced, name):
    """A review's counter-examples: a store of a row that may not fit, a name read after a loop through a
    ``break``, a range start that a negative step makes negative, a parameter rebound to a view, a transpose
    read while the array is written, a range step of 0, an argument whose elements share memory. Each gives the
    plain function's answer or its error (its cause, at the loop's line)."""
    fn, make = REVIEWED[name]
    try:
        want, error = fn(*make()), None
    except Exception as e:  # noqa: BLE001 - the plain function's error is the expected outcome
        want, error = None, type(e)
    f = px.compile(fn)
    for _ in range(2):
        if error is None:
            assert_same(f(*make()), want)
        else:
            with pytest.raises(px.ExecutionError) as e:
                f(*make())
            assert isinstance(e.value.__cause__, error)


def test_a_division_in_a_kernel_whose_values_may_be_complex_stays_sequential():
    """Numba's complex division raises at zero whatever the error model: a loop dividing in a kernel the IR says
    holds complex values (kir.Printed.complex_values, from the lowerer's kinds) is not parallel."""
    from numba import types

    nodes = [kir.For(1, "i", "range(n)", kir.declared("range"), kir.Counts(unit=True, nonneg=True)),
             kir.Stmt(2, "out[i] = (x[i] / 2.0)", (kir.Op("division"),
                                                   kir.Access("x", "proven", "x", False, (("i", ""),), True),
                                                   kir.Access("out", "proven", "out", True, (("i", ""),), True)))]
    sig = (types.float64[::1], types.int64, types.float64[::1])
    plain = kir.print_kernel(["out", "n", "x"], nodes, "(out, )")
    v, why = parallel.variant(plain, sig)
    assert why is None and v.loops == [3] and v.written == [0]
    v, why = parallel.variant(kir.print_kernel(["out", "n", "x"], nodes, "(out, )", complex_values=True), sig)
    assert v is None and why == "the loop over 'i': a division of values that may be complex (Numba raises at zero)"


def test_the_lowerer_tags_what_each_loop_over_range_counts(forced):
    """Each kir.For over ``range`` says whether its step is 1 and its start cannot be negative (signs.py's rules
    over the names the kernel binds: ``k + 1`` with ``k`` a loop's variable from 0 is not negative, a parameter
    may be); parallel.py reads that, not the printed ``range``."""
    args = (np.linspace(0.0, 1.0, 20), np.zeros(20), 3)
    f = px.compile(P.counted)
    assert_same(f(*_copies(args)), P.counted(*_copies(args)))
    loops = {(n.target, n.counts) for n in _entry(f).printed.nodes.values() if type(n) is kir.For}
    assert loops == {("k", kir.Counts(True, True)), ("i", kir.Counts(True, True)), ("j", kir.Counts(False, False)),
                     ("m", kir.Counts(True, False))}


def test_the_lowerer_tags_what_each_access_touches(forced):
    """Each kir.Access says which array it touches (``a[i, j] *= s[j]``'s canonicalizer temporaries seen
    through), whether it stores there, and which index items are a name (or a nest's start plus one): parallel.py
    asks these whether iterations touch disjoint elements."""
    args = (rng.random((6, 3)), rng.random(3))
    f = px.compile(P.column_scale)
    assert_same(f(*_copies(args)), P.column_scale(*_copies(args)))
    touched = {(a.base, a.store, a.own) for n in _entry(f).printed.nodes.values() for a in n.accesses}
    assert touched == {("a", True, (("i", ""), ("j", ""))), ("a", False, (("i", ""), ("j", ""))),
                       ("s", False, (("j", ""),))}


def test_the_lowerer_tags_elements_arrays_used_whole_and_what_names_hold(forced):
    """Each kir.Access says whether it is one element (an integer index per dimension: not ``a[i]`` of a matrix),
    each kir.Use of an array's name whether it is used whole (``a.T``; not ``a.shape``, a store's target), and
    kir.Printed.held what each name's bindings hold (a view ``b = a.T``: an array, not one the kernel allocated,
    whose number of dimensions only an allocation's binding gives):
    parallel.py asks these, not the printed text, whether a loop's arrays appear only element by element and the
    names it reads are numbers."""
    def tags(fn, args):
        f = px.compile(fn)
        assert_same(f(*_copies(args)), fn(*_copies(args)))
        entry = _entry(f)
        nodes = entry.printed.nodes.values()
        return ({(a.base, a.element) for n in nodes for a in n.accesses},
                {(u.array, u.whole) for n in nodes for u in n.uses if u.text == u.array},
                entry.printed.held, entry.serial_why)

    elements, names, held, why = tags(P.row_norms, (rng.random((6, 3)), np.zeros(6)))
    assert elements == {("x", True), ("out", True)} and ("x", True) not in names and ("out", True) not in names
    assert held["s"] == held["i"] == held["j"] == {"number"} and why is None
    elements, _, _, why = tags(P.pick_rows, (np.ones((40, 3)), np.ones((40, 3)), np.zeros((40, 3)), 10))
    assert elements == {("a", False), ("b", False), ("out", False)}
    # (a row stored: a loop of helpers.py's, which stops the kernel when the row does not fit)
    assert why == "the loop over 'i': a call that may raise (_px_assign1)"
    _, names, held, why = tags(P.symmetrize, (np.arange(25.0).reshape(5, 5),))
    assert ("a", True) in names and held["b"] == {"array"}
    assert why == "the loop over 'i': 'b[...]' is not one element of an array"


def test_the_variant_is_printed_from_the_kernel_ir():
    """The parallel variant is the kernel printed again from its nodes: the chosen loop over ``numba.prange``,
    the decorator with parallel.PARALLEL_OPTIONS, every other line as the sequential kernel's."""
    from numba import types

    nodes = [kir.For(1, "i", "range(n)", kir.declared("range"), kir.Counts(unit=True, nonneg=True)),
             kir.Stmt(2, "out[i] = (x[i] + 1.0)", (kir.Access("x", "proven", "x", False, (("i", ""),), True),
                                                   kir.Access("out", "proven", "out", True, (("i", ""),), True)))]
    plain = kir.print_kernel(["out", "n", "x"], nodes, "(out, )")
    v, why = parallel.variant(plain, (types.float64[::1], types.int64, types.float64[::1]))
    assert why is None
    want = plain.source.replace("for i in range(n):", "for i in numba.prange(n):").replace(
        "error_model='numpy')", f"error_model='numpy', parallel={parallel.PARALLEL_OPTIONS!r})")
    assert v.source == want and want != plain.source
