"""A kernel calling BLAS (Numba's products are SciPy's OpenBLAS, a thread pool beside NumPy's) runs with that pool at
one thread, and gives it back after (runtime/native/blas_pool.py): which kernels do is the declarations' ``blas``
fact; the pool's count inside and after the call is read from the real library."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import prog_loops as L
import pytest
from phylanx_py.primitives import lookup
from phylanx_py.runtime.native import blas_pool

import phylanx_py as px


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setenv("PHYLANX_NATIVE", "force")


def _entry(f):
    (entry,) = f._compile().whole.entries.values()
    return entry


def test_the_products_declare_that_they_call_blas():
    assert lookup("dot").lowering.blas and lookup("matmul").lowering.blas and lookup("operator.matmul").lowering.blas
    assert not lookup("exp").lowering.blas and not lookup("operator.add").lowering.blas


@pytest.mark.parametrize("prog", [L.cholesky_dot, L.lu_matmul])
def test_a_kernel_with_a_product_is_marked_and_gives_the_plain_answer(forced, prog):
    rng = np.random.default_rng(3)
    B = rng.standard_normal((24, 24))
    A = B @ B.T + 24 * np.eye(24)
    f = px.compile(prog)
    got = f(A.copy())
    np.testing.assert_allclose(got, prog(A.copy()), rtol=1e-10)
    entry = _entry(f)
    assert entry.kernel is not None and entry.blas, f.explain()
    g = px.compile(L.two_nests)
    a = np.arange(10.0)
    np.testing.assert_allclose(g(a, np.zeros(10))[0], L.two_nests(a, np.zeros(10))[0])
    assert _entry(g).kernel is not None and _entry(g).blas is False  # (worked out at its run)


def test_the_pool_holds_one_thread_while_the_kernel_runs_and_its_own_count_after():
    import scipy.linalg.cython_blas  # noqa: F401 - Numba's BLAS, as a kernel with a product loads it

    setter = blas_pool._setter()
    if setter is None:
        pytest.skip("one OpenBLAS in this install (NumPy and SciPy share it): no second pool to keep quiet")
    before = setter(0)  # (the call returns the count in force before it)
    inside = blas_pool.capped(lambda: setter(1))()
    after = setter(0)
    assert inside == 1
    assert after == before


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def test_a_rising_compile_leaves_a_core_free_of_the_processs_blas_pools_and_gives_their_counts_back(monkeypatch):
    """While a compile runs at the caller's priority (compile_process._risen), every OpenBLAS pool of the process,
    NumPy's first, runs on one core fewer than the process has; after, on the count it had. Read from the real
    libraries; NumPy's pool is set to every core first, so that there is something to lower."""
    monkeypatch.delenv("PHYLANX_COMPILE_BLAS_CAP", raising=False)
    np.ones((2, 2)) @ np.ones((2, 2))
    pools = blas_pool._pools()
    assert pools, "NumPy's OpenBLAS is loaded: its pool must be found"
    cores = _cores()
    befores = [get() for get, _ in pools]
    try:
        for _, put in pools:
            put(cores)
        with blas_pool.fewer_threads() as lowered:
            inside = [get() for get, _ in pools]
        after = [get() for get, _ in pools]
        assert inside == [max(cores - 1, 1) if cores > 1 else cores] * len(pools)
        assert lowered == (len(pools) if cores > 1 else 0)
        assert after == [cores] * len(pools)
        monkeypatch.setenv("PHYLANX_COMPILE_BLAS_CAP", "0")
        with blas_pool.fewer_threads() as lowered:
            assert lowered == 0 and [get() for get, _ in pools] == [cores] * len(pools)
    finally:
        for (_, put), before in zip(pools, befores):
            put(before)


def test_scipys_blas_module_loads_alone_and_the_package_imported_later_holds_it():
    """blas_pool.import_scipy_blas loads ``scipy.linalg.cython_blas`` without ``scipy/linalg/__init__.py`` (0.11 s
    of imports inside a call or beside it, against 8 ms): Numba finds the BLAS functions by the module's name, and
    every way a program may import SciPy afterwards gives what it gives without us. In a process of its own."""
    script = textwrap.dedent("""
        import sys
        import numpy as np
        from phylanx_py.runtime.native import blas_pool

        blas_pool.import_scipy_blas()
        blas = sys.modules["scipy.linalg.cython_blas"]
        print("package imported:", "scipy.linalg" in sys.modules)
        print("dgemm exported:", "dgemm" in blas.__pyx_capi__)
        import numba
        from numba.extending import get_cython_function_address
        print("numba finds dgemm:", get_cython_function_address("scipy.linalg.cython_blas", "dgemm") != 0)
        product = numba.njit(lambda a, b: a @ b)
        print("product:", product(np.eye(3), np.arange(3.0)).tolist())
        import scipy.linalg.cython_blas as again
        import scipy.linalg
        from scipy.linalg import cython_blas
        print("the same module:", again is blas and cython_blas is blas and scipy.linalg.cython_blas is blas)
        print("solve:", scipy.linalg.solve(np.eye(2), np.ones(2)).tolist())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["package imported: False", "dgemm exported: True", "numba finds dgemm: True",
                                       "product: [0.0, 1.0, 2.0]", "the same module: True", "solve: [1.0, 1.0]"]
