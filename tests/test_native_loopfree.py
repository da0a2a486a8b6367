"""Straight-line array code in the native tier (runtime/native/whole.py ``loop_free``): a function without loops
becomes one native kernel once its calls have taken STRAIGHT_SECONDS, its statements and returned expression loop nests
(np.where and np.clip among them), timed against the floor's choice; the nests' loops run on two threads where
parallel.py proves their iterations apart. The plain function's answer in every tier."""
from __future__ import annotations

import time

import numpy as np
import prog_stencils as S
import pytest
from helpers import check_against
from phylanx_py.runtime.native import tiering as native_tiering
from phylanx_py.runtime.native import tuning as native_tuning
from phylanx_py.runtime.native import whole as native_whole

import phylanx_py as px

NEST = "# an element-wise statement as one loop nest"


def _grid(n, m, seed=0):
    return np.random.default_rng(seed).standard_normal((n, m))


def _sources(f) -> str:
    return "\n".join(e.source or "" for e in f._code.whole.entries.values())


def _settled(f, args, seconds=120):
    """Call ``f`` until its whole-function kernel is ready and measured (or declined)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        f(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        e = f.explain()
        if "-> interpreted" in e or ("-> native (" in e and "measuring" not in e and "compiling" not in e):
            return e
        time.sleep(0.01)
    raise AssertionError(f.explain())


@pytest.mark.parametrize("fn, args", [
    (S.where_and_clip, (3, np.linspace(-1.0, 1.0, 11), np.zeros(11))),
    (S.where_and_clip, (3, np.array([0.2, np.nan, 0.7, -0.1, np.nan, 0.4]), np.zeros(6))),  # NaN kept, compared
    (S.where_weak_scalar, (3, np.linspace(-1.0, 4.0, 9).astype(np.float32))),
    (S.where_weak_scalar, (3, np.arange(-3, 6, dtype=np.int32))),
    (S.clip_ints, (4, np.arange(-5, 7, dtype=np.int64), np.zeros(12, dtype=np.int64))),
    (S.offset_elements, (np.arange(12.0), 2, 8)),
    (S.offset_elements, (np.arange(12.0), -5, 8)),
    (S.straight_line, (_grid(8, 9), _grid(4, 5, 1))),
], ids=lambda c: getattr(c, "__name__", None))
def test_where_clip_and_offsets_give_the_plain_answer(fn, args, native_tier):
    f = px.compile(fn)
    for _ in range(2):
        got = check_against(f, fn, *args)
        want = fn(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        assert np.asarray(got).dtype == np.asarray(want).dtype
    if native_tier == "force" and fn in (S.where_and_clip, S.where_weak_scalar, S.clip_ints):
        assert NEST in "\n".join(e.source or "" for loop in f._code.native_loops
                                 for e in getattr(loop, "entries", {}).values()) + _sources(f)


def test_a_loop_free_function_is_not_compiled_at_once_when_forced(monkeypatch):
    # PHYLANX_NATIVE=force is about loops: straight-line code waits for STRAIGHT_SECONDS of calls as by default
    monkeypatch.setenv("PHYLANX_NATIVE", "force")
    f = px.compile(S.straight_line)
    args = (_grid(8, 9), _grid(4, 5, 1))
    check_against(f, S.straight_line, *args)
    assert "-> the floor's choice so far (" in f.explain() and not f._code.whole.entries


def test_a_loop_free_function_becomes_one_native_kernel(monkeypatch):
    monkeypatch.delenv("PHYLANX_NATIVE", raising=False)
    monkeypatch.setenv("PHYLANX_FLOOR", "1")
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 0.0)
    monkeypatch.setattr(native_whole, "STRAIGHT_SECONDS", 0.0)
    f = px.compile(S.straight_line)
    args = (_grid(40, 50), _grid(36, 46, 1))
    said = _settled(f, args)
    assert "function at prog_stencils.py:" in said
    source = _sources(f)
    assert source.count(NEST) == 4, source  # lap, res, flx (np.where) and the returned np.clip(...) * 0.5
    assert "np.where" not in source and "np.clip" not in source
    for _ in range(3):  # whatever was chosen (the kernel, or the floor's choice after a decline): the same answer
        check_against(f, S.straight_line, *args)


def test_nest_loops_run_in_parallel_when_forced(monkeypatch):
    # a nest's loop over its first dimension, stores at ``start + i``: the iterations write apart
    monkeypatch.setenv("PHYLANX_NATIVE", "force")
    f = px.compile(S.where_and_clip)
    args = (3, np.linspace(-1.0, 1.0, 200), np.zeros(200))
    check_against(f, S.where_and_clip, *args)
    if native_tuning.threads() < 2:
        pytest.skip("one core: no parallel variant")
    assert "may run on 2 threads, in parallel (forced)" in f.explain(), f.explain()


def test_an_offset_that_may_be_negative_keeps_the_loop_sequential(monkeypatch):
    monkeypatch.setenv("PHYLANX_NATIVE", "force")
    f = px.compile(S.offset_elements)
    check_against(f, S.offset_elements, np.arange(12.0), -5, 8)
    assert "sequential: the loop over 'i': 'a' is accessed at other elements" in f.explain(), f.explain()


def test_an_in_place_update_whose_operand_overlaps_its_target_reads_a_copy(monkeypatch):
    # a review: once native, a[1:] += a[:-1] gave [0, 1, 3, 6, 10, ...] where NumPy gives [0, 1, 3, 5, 7, ...]
    # (Numba's ufunc with out= reads what it has just written); the operand is copied where the two meet
    monkeypatch.delenv("PHYLANX_NATIVE", raising=False)
    monkeypatch.setenv("PHYLANX_FLOOR", "1")
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 0.0)
    monkeypatch.setattr(native_whole, "STRAIGHT_SECONDS", 0.0)
    f = px.compile(S.prefix_step)
    said = _settled(f, (np.arange(2000.0),))
    assert "function at prog_stencils.py:" in said, said  # (in loops the copy is tested: test_native_scalarize.py)
    for _ in range(3):
        check_against(f, S.prefix_step, np.arange(2000.0))


def test_straight_line_code_without_a_loop_nest_stays_with_the_floor(monkeypatch):
    # its calls would be Numba's forms of NumPy's own (BLAS): no kernel (k2mm, mvt ran slower as such kernels)
    monkeypatch.delenv("PHYLANX_NATIVE", raising=False)
    monkeypatch.setenv("PHYLANX_FLOOR", "1")
    monkeypatch.setattr(native_tiering, "HOT_SECONDS", 0.0)
    monkeypatch.setattr(native_whole, "STRAIGHT_SECONDS", 0.0)
    f = px.compile(S.products_only)
    args = (0.5, _grid(6, 5), _grid(5, 4, 1), _grid(4, 3, 2), _grid(6, 3, 3))
    said = _settled(f, args)
    assert "-> interpreted: straight-line code without a loop nest (its calls are NumPy's own)" in said, said
    check_against(f, S.products_only, *args)
