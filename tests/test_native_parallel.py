"""The native tier's parallel variant (runtime/native/parallel.py, tuning.py): loops whose iterations are
independent run on several threads, with the same bits as the sequential kernel and the plain function's answer;
dependences, overlapping arrays and forked children keep them sequential."""
from __future__ import annotations

import multiprocessing

import numpy as np
import prog_parallel as P
import pytest
from helpers import assert_same
from phylanx_py.runtime.native import tuning

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
     "a call that may raise (an index not proven in bounds)"),
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


def test_the_variant_is_chosen_by_measuring_both_on_the_programs_calls(forced):
    """Unforced, the first calls alternate between the sequential and the parallel variant (the same answers),
    then one is kept and the quick path calls it; explain() says which, with both times."""
    fn, make = INDEPENDENT["escape_counts"]
    args = make()
    f = px.compile(fn)
    f(*_copies(args))
    choice = _entry(f).parallel
    choice.state, choice.forced, choice.times = "measuring", False, ([], [])
    f._compile().whole._requick()
    for k in range(2 * tuning.ROUNDS):
        assert_same(f(*_copies(args)), fn(*_copies(args)))
        seq_t, par_t = choice.times
        assert (len(seq_t), len(par_t)) == (k // 2 + 1, (k + 1) // 2)
        if choice.state != "measuring":  # after both were measured ROUNDS times, or a call too short for threads
            assert k == 2 * tuning.ROUNDS - 1 or (k == 0 and seq_t[0] < tuning.MIN_SECONDS)
            break
    assert choice.state in ("parallel", "sequential")
    line = f.explain().splitlines()[-1]
    assert f"1 loop may run on {tuning.threads()} threads, {choice.state} chosen: " in line
    runs = choice.runs
    assert_same(f(*_copies(args)), fn(*_copies(args)))
    assert choice.runs == runs + (choice.state == "parallel")


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
