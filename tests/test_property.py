"""Property tests: random well-typed NumPy programs (source text) give the same results compiled and plain."""
from __future__ import annotations

import copy
import sys

import numpy as np
import pytest
from _prim_compare import assert_same, write_module
from _program_gen import ProgramGen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import phylanx_py as px

# The runtime raises the recursion limit on first use; raise it up front so hypothesis sees no change mid-test.
sys.setrecursionlimit(max(sys.getrecursionlimit(), 20_000))
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Same NumPy operations in the same order give identical floats; the atol leaves room for a future fused kernel.
RTOL, ATOL = 1e-12, 1e-9


@pytest.fixture(scope="module")
def gen_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("property_programs")


@pytest.fixture(scope="module")
def runtimes():
    """Every program runs on: the synchronous runtime, the default local runtime (small arrays inline), and a
    thread pool that runs every array primitive as a task. The two we create are closed after."""
    sync, tasks = px.runtime.synchronous(), px.runtime.local(2, inline_elements=0)
    yield {"synchronous": sync, "local": None, "local-tasks": tasks}
    sync.close()
    tasks.close()


def run_everywhere(source, fname, args, gen_dir, runtimes):
    module = write_module(gen_dir, [source], prefix="px_prop")
    pyfunc = getattr(module, fname)
    compiled = px.compile(pyfunc)
    plain_args = copy.deepcopy(args)
    want = pyfunc(*plain_args)
    for name, rt in runtimes.items():
        comp_args = copy.deepcopy(args)
        if rt is None:
            got = compiled(*comp_args)
        else:
            with px.using(rt):
                got = compiled(*comp_args)
        where = f"on the {name} runtime, program:\n{source}"
        assert_same(got, want, f"result {where}", rtol=RTOL, atol=ATOL)
        for idx, (g, w) in enumerate(zip(comp_args, plain_args)):
            assert_same(g, w, f"argument {idx} after the call {where}", rtol=RTOL, atol=ATOL)


def float_array(shape):
    return hnp.arrays(np.float64, shape, elements=st.floats(-5, 5, allow_nan=False, allow_infinity=False))


def int_array(shape):
    return hnp.arrays(np.int64, shape, elements=st.integers(-20, 20))


@SETTINGS
@given(data=st.data())
def test_random_float_programs(data, gen_dir, runtimes):
    source, params = ProgramGen(data.draw, "float").program("prog")
    args = [data.draw(float_array(shape), label=name) for name, shape in params.items()]
    run_everywhere(source, "prog", args, gen_dir, runtimes)


@SETTINGS
@given(data=st.data())
def test_random_int_programs_floor_division_and_modulo(data, gen_dir, runtimes):
    source, params = ProgramGen(data.draw, "int").program("prog")
    args = [data.draw(int_array(shape), label=name) for name, shape in params.items()]
    run_everywhere(source, "prog", args, gen_dir, runtimes)


SCALAR_INT_PROGRAM = """\
def scalar_prog(x, q, r):
    total = int(x.sum())
    return (q // r, q % r, -q // r, (-q) % r, divmod(q, r), total // r, total % r, x.sum() // r, x.sum() % r,
            x // r, x % r, q // -abs(r), q % -abs(r), x.sum() % -abs(r))
"""

nonzero_ints = st.integers(-9, 9).filter(bool)


@SETTINGS
@given(x=int_array((2, 3)), q=st.integers(-50, 50), r=nonzero_ints)
def test_python_int_floor_division_and_modulo_keep_their_semantics(x, q, r, gen_dir, runtimes):
    """Python ints keep Python's // and % (results are ints, signs follow the divisor); NumPy values NumPy's."""
    run_everywhere(SCALAR_INT_PROGRAM, "scalar_prog", [x, q, r], gen_dir, runtimes)
