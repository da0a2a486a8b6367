"""Differential checking: a compiled function must give exactly what the plain Python function gives."""
from __future__ import annotations

import copy
import inspect

import numpy as np

import phylanx_py as px


def compiled(fn):
    """A fresh ``px.compile(fn)``: call sites learn their kernels' costs, so a reused one could run inline
    what a fresh one runs as tasks; every test starts from the same state."""
    return px.compile(fn)


def assert_same(got, want, path="result"):
    """Equal values of the same type: arrays by dtype, shape and values; containers recursively."""
    assert type(got) is type(want), f"{path}: type {type(got).__name__} != {type(want).__name__} ({got!r} vs {want!r})"
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype, f"{path}: dtype {got.dtype} != {want.dtype}"
        assert got.shape == want.shape, f"{path}: shape {got.shape} != {want.shape}"
        if want.dtype.kind in "fc":
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=0, err_msg=path)
        else:
            np.testing.assert_array_equal(got, want, err_msg=path)
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), f"{path}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{path}[{i}]")
    elif isinstance(want, dict):
        assert list(got) == list(want), f"{path}: keys {list(got)} != {list(want)}"
        for k in want:
            assert_same(got[k], want[k], f"{path}[{k!r}]")
    elif isinstance(want, (float, np.floating, complex, np.complexfloating)):
        if np.isnan(want):
            assert np.isnan(got), f"{path}: {got!r} != nan"
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=0, err_msg=path)
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def check(fn, *args, **kwargs):
    """Run ``fn`` compiled and plain on deep copies of the inputs; results and mutated inputs must agree."""
    return check_against(compiled(fn), fn, *args, **kwargs)


def check_against(compiled_fn, fn, *args, **kwargs):
    """``check`` with a given compiled version of ``fn`` (other compile options)."""
    plain_in = copy.deepcopy((args, kwargs))
    compiled_in = copy.deepcopy((args, kwargs))
    want = fn(*plain_in[0], **plain_in[1])
    got = compiled_fn(*compiled_in[0], **compiled_in[1])
    assert_same(got, want)
    assert_same(compiled_in, plain_in, "inputs after the call")
    return got


def source_position(fn, marker: str, occurrence: int = 1) -> tuple[int, int]:
    """(line, 1-based column) of the ``occurrence``-th ``marker`` in ``fn``'s source, in file coordinates."""
    lines, first = inspect.getsourcelines(fn)
    seen = 0
    for i, line in enumerate(lines):
        col = line.find(marker)
        while col >= 0:
            seen += 1
            if seen == occurrence:
                return first + i, col + 1
            col = line.find(marker, col + 1)
    raise AssertionError(f"{marker!r} not found in the source of {fn.__name__}")
