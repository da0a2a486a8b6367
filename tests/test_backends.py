"""Backends: which kernels a primitive uses for which arrays (NumPy here; CuPy on a GPU when there is one)."""
from __future__ import annotations

import numpy as np
import prog_gpu
import pytest
from phylanx_py.primitives import backends, lookup
from phylanx_py.primitives.fused_cupy import cupy_source

import phylanx_py as px
from phylanx_py import ir


def _cuda_device_count() -> int:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


def test_cupy_names_of_primitives():
    assert backends.cupy_name("exp") == "exp"
    assert backends.cupy_name("linalg.solve") == "linalg.solve"
    assert backends.cupy_name("operator.add") is None  # operators dispatch on the array itself
    assert backends.cupy_name("method.sum") is None
    assert backends.cupy_name("random.normal") is None  # NumPy's streams are the reference


def test_numpy_arrays_never_take_the_device_path():
    assert not backends.on_device((np.ones(3), 2.0))
    f = px.compile(prog_gpu.chain)
    x = np.linspace(-2, 2, 50_000)
    np.testing.assert_allclose(f(x), prog_gpu.chain(x), rtol=1e-12)


def test_generated_cupy_fusion_source_computes_the_chain():
    """The source cupy.fuse compiles, run with NumPy's identically named ufuncs, gives the chain's values."""
    f = px.compile(prog_gpu.chain)
    (fused,) = [n for n in ir.walk(f.tree) if isinstance(n, ir.Fused)]
    src = cupy_source(fused.spec)
    assert src.startswith("def kernel(a0):\n    return ")
    namespace = {"cupy": np}
    exec(src, namespace)
    x = np.linspace(-2, 2, 101)
    np.testing.assert_allclose(namespace["kernel"](x), prog_gpu.chain(x), rtol=1e-12)


def test_device_must_be_cpu_or_gpu():
    with pytest.raises(ValueError, match="device must be 'cpu' or 'gpu', not 'tpu'"):
        px.compile(prog_gpu.chain, device="tpu")


@pytest.mark.skipif(_cuda_device_count() > 0, reason="CuPy and a GPU are present: the GPU test below runs instead")
def test_gpu_device_without_cupy_is_a_clear_error():
    f = px.compile(prog_gpu.chain, device="gpu")
    with pytest.raises(backends.GPUUnavailable) as err:
        f(np.ones(3))
    assert str(err.value).startswith('device="gpu" needs CuPy: pip install "phylanx-py[gpu]" (')


def test_registered_primitives_have_a_device_kernel_name_or_dispatch_on_the_array():
    for name in ("exp", "sum", "linalg.norm", "matmul", "where"):
        assert backends.cupy_name(lookup(name).name) == name


@pytest.mark.skipif(_cuda_device_count() == 0, reason="needs a CUDA device and CuPy (none on this machine)")
def test_on_the_gpu_results_equal_numpy_and_stay_on_the_device():
    import cupy

    x = np.linspace(-2, 2, 1_000_000)
    f = px.compile(prog_gpu.chain, device="gpu")
    out = f(x)
    assert isinstance(out, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(out), prog_gpu.chain(x), rtol=1e-12)
    g = px.compile(prog_gpu.mixed, device="gpu")
    rng = np.random.default_rng(0)
    X, w = rng.standard_normal((2000, 30)), rng.standard_normal(30)
    got = g(X, w)
    want = prog_gpu.mixed(X, w)
    assert got[1] == want[1]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-10)
