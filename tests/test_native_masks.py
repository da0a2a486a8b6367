"""Comparison and logical ufuncs and boolean masks in native kernels: the plain function's answer (dtype
included) with the tier off, by default and forced; the tier in explain(); the plain function's errors."""
from __future__ import annotations

import numpy as np
import prog_native_masks as M
import pytest
from test_native_reduce import mode, native, run_both  # noqa: F401 - the tier-mode fixture and checks

import phylanx_py as px

RNG = np.random.default_rng(11)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ring_means_over_masked_values(mode, dtype):  # noqa: F811
    radius = RNG.random(400).astype(dtype)
    native(run_both(M.ring_means, RNG.random(400).astype(dtype), radius, 7), mode)


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32, np.uint8])
def test_comparison_and_logical_ufuncs(mode, dtype):  # noqa: F811
    a = (RNG.random((6, 5)) * 4).astype(dtype)
    a[1, 2] = a[2, 3] = 0
    b = (RNG.random((6, 5)) * 4).astype(dtype)
    b[1, 2] = a[1, 2]
    # small ints compared with 0.5 compute in float64: those arrays of another kind decline, as before
    native(run_both(M.ufunc_comparisons, a, b, np.zeros((6, 5), bool)), mode, expected=dtype in (np.float64, np.int64))


def test_a_mask_of_another_length_raises_index_error(mode):  # noqa: F811
    f = px.compile(M.mask_of_another_length)
    with pytest.raises(px.ExecutionError) as e:
        f(np.ones(4), np.ones(3, bool))
    assert isinstance(e.value.__cause__, IndexError) and e.value.filename.endswith("prog_native_masks.py")
    assert f(np.arange(4.0), np.arange(4) > 1) == M.mask_of_another_length(np.arange(4.0), np.arange(4) > 1)


def test_comparing_an_inexact_result_stays_interpreted(mode):  # noqa: F811
    f = run_both(M.compared_exp, RNG.random((4, 3)) - 0.3)
    native(f, mode, expected=False)
    if mode == "force":
        assert "less of an inexact result" in f.explain()
