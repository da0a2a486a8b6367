"""Coverage of the NumPy scientists write (issue: np.ndarray allocations, .shape assignment, ufunc methods), in
both tiers: compiled equals plain with the native tier as by default and forced."""
from __future__ import annotations

import numpy as np
import prog_coverage as C
import pytest
from helpers import check

pytestmark = pytest.mark.usefixtures("native_tier")


@pytest.mark.parametrize("fn, args", [
    (C.alloc_ndarray, (3,)),
    (C.alloc_in_loop, (5,)),
    (C.set_shape, (np.ones((2, 3)),)),
    (C.set_two_shapes, (np.ones((2, 2)), np.zeros(4), 4)),
    (C.ufunc_methods, (np.array([3.0, 1.0, 2.0]), np.array([1.0, 2.0, 4.0]), np.array([0, 1, 1, 3]))),
    (C.ufunc_methods_in_loop, (np.array([0.5, 1.0, 2.0]), np.array([0, 1, 1, 3]))),
])
def test_compiled_equals_plain(runtime, fn, args):
    check(fn, *args)


def test_set_shape_that_needs_a_copy_raises_numpys_error(runtime):
    import phylanx_py as px

    with pytest.raises(px.ExecutionError) as e:
        px.compile(C.flatten_in_place)(np.ones((3, 4)).T)
    with pytest.raises(AttributeError) as plain:
        C.flatten_in_place(np.ones((3, 4)).T)
    assert type(e.value.__cause__) is type(plain.value) and str(e.value.__cause__) == str(plain.value)
    assert e.value.lineno == C.flatten_in_place.__code__.co_firstlineno + 1
