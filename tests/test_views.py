"""Views of tiled arrays alias their base as NumPy's views do (tests/prog_views.py), compiled in every tier (native
off, default, forced; SPMD on and off) and in plain Python, on real Dask worker processes; what cannot alias (a
NumPy result of the fallback that is a view of gathered data) is refused with an error naming the line."""
from __future__ import annotations

import warnings

import numpy as np
import prog_views as V
import pytest
from cluster import current_dask_runtime
from phylanx_py.runtime.tiled import TiledArray, TileFallbackWarning

import phylanx_py as px

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def rt():
    with current_dask_runtime() as runtime:
        yield runtime


def _x():
    return np.arange(10.0)


def _X():
    return np.arange(24.0).reshape(6, 4)


# (program, inputs made fresh for each run, tiles per array argument)
CASES = {
    "write_through_slice": (V.write_through_slice, lambda: (_x(),)),
    "base_write_seen_by_slice": (V.base_write_seen_by_slice, lambda: (_x(),)),
    "column_inplace": (V.column_inplace, lambda: (_X(),)),
    "row_assign": (V.row_assign, lambda: (_X(),)),
    "transpose_write": (V.transpose_write, lambda: (_X(),)),
    "reshape_write": (V.reshape_write, lambda: (_x(),)),
    "ravel_write": (V.ravel_write, lambda: (_X(),)),
    "ravel_of_column_copies": (V.ravel_of_column_copies, lambda: (_X(),)),
    "flatten_copies": (V.flatten_copies, lambda: (_X(),)),
    "view_of_view": (V.view_of_view, lambda: (_x(),)),
    "new_axis_view": (V.new_axis_view, lambda: (_x(),)),
    "stepped_view": (V.stepped_view, lambda: (_x(),)),
    "reversed_view": (V.reversed_view, lambda: (_x(),)),
    "copy_breaks_alias": (V.copy_breaks_alias, lambda: (_x(),)),
    "view_in_loop": (V.view_in_loop, lambda: (_x(), 5)),
    "base_changed_in_loop": (V.base_changed_in_loop, lambda: (_X(), 3)),
    "view_updated_in_loop": (V.view_updated_in_loop, lambda: (_X(), 3)),
    "two_views_one_base": (V.two_views_one_base, lambda: (_x(),)),
    "view_and_base_both_in_loop": (V.view_and_base_both_in_loop, lambda: (_X(), 3)),
    "squeeze_write": (V.squeeze_write, lambda: (_X(),)),
    "swapaxes_write": (V.swapaxes_write, lambda: (_X(),)),
    "moveaxis_write": (V.moveaxis_write, lambda: (_X(),)),
}
TILINGS = {"one tile": 1, "two tiles": 2, "three tiles": 3}


def _tiled(args, count):
    return tuple(px.tiled.from_array(a, tiles=(count,) + (1,) * (a.ndim - 1)) if isinstance(a, np.ndarray) else a
                 for a in args)


def _numpy(value):
    if isinstance(value, TiledArray):
        return np.asarray(value)
    if isinstance(value, tuple):
        return tuple(_numpy(v) for v in value)
    return value


def _same(got, want):
    got = _numpy(got)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    np.testing.assert_array_equal(np.asarray(got), want)
    assert np.shape(got) == np.shape(want)


def _check(fn, make, tiles):
    plain_in = make()
    want = fn(*plain_in)
    tiled_in = _tiled(make(), tiles)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TileFallbackWarning)
        got = fn(*tiled_in)
    _same(got, want)
    for t, a in zip(tiled_in, plain_in):  # inputs changed in place alike
        _same(t, a)


@pytest.mark.usefixtures("native_tier")
@pytest.mark.parametrize("spmd", ["on", "off"])
@pytest.mark.parametrize("tiling", TILINGS)
@pytest.mark.parametrize("case", CASES)
def test_compiled_views_alias_on_tiled_inputs(rt, case, tiling, spmd, monkeypatch):
    if spmd == "off":
        monkeypatch.setenv("PHYLANX_SPMD", "0")
    fn, make = CASES[case]
    _check(px.compile(fn), make, TILINGS[tiling])


@pytest.mark.parametrize("tiling", TILINGS)
@pytest.mark.parametrize("case", CASES)
def test_plain_python_views_alias_on_tiled_arrays(rt, case, tiling):
    fn, make = CASES[case]
    _check(fn, make, TILINGS[tiling])


@pytest.mark.usefixtures("runtime", "native_tier")
@pytest.mark.parametrize("case", CASES)
def test_compiled_views_on_numpy_inputs(case):
    """The same programs on NumPy inputs, on each local runtime, native tier off, default and forced."""
    fn, make = CASES[case]
    plain_in, compiled_in = make(), make()
    _same(px.compile(fn)(*compiled_in), fn(*plain_in))
    _same(compiled_in, plain_in)


@pytest.mark.parametrize("spmd", ["on", "off"])
def test_one_array_passed_twice_and_changed_in_a_loop(rt, spmd, monkeypatch):
    """The SPMD ranks hold a copy per name: one array under two names, changed in the loop, must not become two."""
    if spmd == "off":
        monkeypatch.setenv("PHYLANX_SPMD", "0")
    x = np.arange(10.0)
    want = V.same_array_twice(x, x, 3)
    t = px.tiled.from_array(np.arange(10.0), tiles=(2,))
    f = px.compile(V.same_array_twice)
    got = f(t, t, 3)
    _same(got, want)
    _same(t, x)
    if spmd == "on":
        assert "share their data" in f.explain()


def test_stepped_slice_is_a_lazy_view_not_a_gather(rt):
    x = px.tiled.from_array(np.arange(20.0), tiles=(3,))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TileFallbackWarning)
        s = x[::3]
        r = x[15:2:-4]
    assert isinstance(s, TiledArray) and isinstance(r, TiledArray)
    np.testing.assert_array_equal(np.asarray(s), np.arange(20.0)[::3])
    np.testing.assert_array_equal(np.asarray(r), np.arange(20.0)[15:2:-4])


def test_fallback_view_is_read_only_and_pins_its_base(rt):
    """np.flip has no tile rule: its NumPy result views the gathered copy, so it cannot alias the tiles. Writing to
    it is NumPy's read-only error; changing the tiled array while it is alive is refused, naming why."""
    x = px.tiled.from_array(np.arange(6.0), tiles=(2,))
    with pytest.warns(TileFallbackWarning):
        f = np.flip(x)
    with pytest.raises(ValueError, match="read-only"):
        f[0] = 1.0
    with pytest.raises(ValueError, match="this tiled array cannot change while a NumPy result made from its "
                                         r"gathered data \(a view of it in NumPy\) is alive"):
        x[0] = 5.0
    np.testing.assert_array_equal(np.asarray(x), np.arange(6.0))  # nothing changed
    del f
    x[0] = 5.0
    assert np.asarray(x)[0] == 5.0


def flip_then_write(x):
    f = np.flip(x)
    x[0] = 5.0
    return f


def test_compiled_fallback_view_refusal_names_the_line(rt):
    x = px.tiled.from_array(np.arange(6.0), tiles=(2,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TileFallbackWarning)
        with pytest.raises(px.ExecutionError) as info:
            px.compile(flip_then_write)(x)
    err = info.value
    assert err.filename == __file__ and err.lineno == flip_then_write.__code__.co_firstlineno + 2
    assert "this tiled array cannot change while" in str(err)


def test_reshape_with_copy_true_is_never_a_view(rt):
    """np.reshape(..., copy=True) (NumPy 2.1): a copy even where the plain reshape would be a view."""
    x, t = np.arange(12.0), px.tiled.from_array(np.arange(12.0), tiles=(3,))
    r, rt_ = np.reshape(x, (3, -1), copy=True), np.reshape(t, (3, -1), copy=True)
    r[0, 1] = rt_[0, 1] = 99.0
    _same(rt_, r)
    _same(t, x)


def test_a_view_function_whose_shape_holds_a_tasks_value_waits_for_it():
    # np.reshape/np.transpose run in the calling thread on a NumPy array (a store through their view reaches it on
    # Dask too); a shape or axes tuple holding a future (found in review: TypeError: 'Future' object cannot be
    # interpreted as an integer) goes through the Evaluation, which waits for it
    a = np.arange(200_000.0)
    b = np.zeros(100_000)
    b[0] = 4.0
    with px.using(px.runtime.local(inline_elements=1_000)) as runtime:
        got = px.compile(V.reshape_by_a_computed_count)(a, b)
        runtime.close()
    assert got == V.reshape_by_a_computed_count(a, b)
