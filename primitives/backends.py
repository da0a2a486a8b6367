"""Array backends: NumPy (the reference) and CuPy on GPUs, chosen by the arrays a primitive receives.

CuPy is imported lazily: only when a caller asks for the GPU (``px.compile(device="gpu")``) or has imported it
already (then its arrays can reach a primitive). Without it nothing here costs more than a set lookup.
"""
from __future__ import annotations

import sys

DEVICE_TYPES: set = set()  # array types that live on a GPU (cupy.ndarray once CuPy is loaded)
_kernels: dict = {}


class GPUUnavailable(RuntimeError):
    pass


def cupy_module():
    """The cupy module; GPUUnavailable (with the install hint) when it cannot be imported."""
    try:
        import cupy
    except Exception as e:  # ImportError, or CUDA libraries missing at import
        raise GPUUnavailable(f'device="gpu" needs CuPy: pip install "phylanx-py[gpu]" ({type(e).__name__}: {e})') \
            from e
    DEVICE_TYPES.add(cupy.ndarray)
    return cupy


def refresh():
    """Notice CuPy if the program imported it, so its arrays dispatch to CuPy kernels."""
    if not DEVICE_TYPES and "cupy" in sys.modules:
        DEVICE_TYPES.add(sys.modules["cupy"].ndarray)


def on_device(args) -> bool:
    if not DEVICE_TYPES:
        return False
    return any(type(a) in DEVICE_TYPES for a in args)


def cupy_name(prim_name: str) -> str | None:
    """The CuPy function standing for a registry primitive: ``exp`` -> ``exp``, ``linalg.solve`` ->
    ``linalg.solve``; None for Python operators, builtins and methods (those dispatch on the array itself)."""
    if prim_name.startswith(("operator.", "builtins.", "method.", "attr.", "python.", "math.", "fused.")):
        return None
    if prim_name.startswith("random."):
        return None  # NumPy's streams are the reference; CuPy's differ
    return prim_name


def device_kernel(prim):
    """The CuPy kernel of ``prim`` (registered ``cupy_kernel``, else CuPy's function of the same name), or the
    primitive's own kernel when CuPy has none (array methods and operators dispatch to CuPy by themselves)."""
    if prim.cupy_kernel is not None:
        return prim.cupy_kernel
    hit = _kernels.get(prim.name)
    if hit is None:
        hit = prim.kernel
        name = cupy_name(prim.name)
        if name is not None:
            obj = cupy_module()
            for part in name.split("."):
                obj = getattr(obj, part, None)
                if obj is None:
                    break
            hit = obj if callable(obj) else prim.kernel
        _kernels[prim.name] = hit
    return hit


def to_device(value):
    """NumPy arrays (also inside lists/tuples/dicts) moved to the GPU."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return cupy_module().asarray(value)
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v) for k, v in value.items()}
    return value
