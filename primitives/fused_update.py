"""In-place element-wise updates fused into one pass: ``v = m*v + g; p = p - lr*v`` as one loop over memory.

``fused_update(statements, *args)`` runs ``statements``, a tuple of ``(target, spec)``, in order: each computes
its spec (primitives/fused.py's nested tuples over registry names, ``("arg", i)`` reading ``args[i]``) and stores
it into the array ``args[target]`` in place, so later statements read the new values. The reference does exactly
that with the registry's NumPy kernels, statement after statement over whole arrays (what NumPy's ``v *= m``,
``v += g``, ``p -= lr * v`` compute). The compiled kernel does it element by element, every statement for element
``i`` before element ``i + 1``, which is the same thing when the arrays all have one shape and none shares memory
with another (checked at every call; otherwise the reference runs). Each intermediate is cast to the dtype NumPy
gives it (the same generated scalar code as fused kernels), and a statement runs compiled only when its value
already has its target's dtype, so the answer is NumPy's to the last bit. An optimizer's update over a model's
parameters is one such call per parameter (phylanx_py/nn/optim.py), three to five passes of NumPy in one.
"""
from __future__ import annotations

import os
import re

import numpy as np

from . import kernel_cache
from .fused import (
    PARALLEL_MIN_ELEMENTS,
    _blocks,
    _body,
    _dtypes,
    _map_blocks,
    _numba_type,
    _signature,
    _threads,
    cached_kernel,
    reference,
    remember,
)

_kernels: dict = {}
_found: dict = {}


def fused_update(statements, *args):
    """Run ``statements`` (``(target, spec)`` pairs) in order, each storing its value into ``args[target]``."""
    kernel = _kernel(statements, args)
    if kernel is not None:
        flat = [a.reshape(-1) if type(a) is np.ndarray else a for a in args]
        size = next(a.size for a in flat if type(a) is np.ndarray)
        n = _threads() if size >= PARALLEL_MIN_ELEMENTS else 1
        if n < 2:
            kernel(*flat)
        else:  # element i depends on element i only: contiguous blocks on parallel threads (the kernel drops the GIL)
            _map_blocks(lambda lo, hi: kernel(*[a[lo:hi] if type(a) is np.ndarray else a for a in flat]),
                        _blocks(size, n))
        return None
    for target, spec in statements:  # the reference: NumPy's in-place statements, one after another
        out = args[target]
        np.copyto(out, reference(spec, args), casting="same_kind")
    return None


def _kernel(statements, args):
    """The compiled kernel for these inputs, or None (the reference runs)."""
    if os.environ.get("PHYLANX_FUSE", "1") == "0" or not _layout_ok(statements, args):
        return None
    sig = _signature(args)
    if sig is None:
        return _find(statements, args)
    key = (statements, sig)
    hit = _found.get(key, _found)
    if hit is _found:
        hit = remember(_found, key, lambda: _find(statements, args))
    return hit


def _layout_ok(statements, args) -> bool:
    """Every array input a C-contiguous ndarray of one shape, no two sharing memory, every target an array."""
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    if not arrays or any(type(a) is not np.ndarray for a in arrays):
        return False
    shape = arrays[0].shape
    if any(a.shape != shape or not a.flags.c_contiguous for a in arrays):
        return False
    if any(type(args[t]) is not np.ndarray or not args[t].flags.writeable for t, _ in statements):
        return False
    for i, a in enumerate(arrays):  # (bounds only: distinct parameters are distinct allocations)
        for b in arrays[i + 1:]:
            if np.may_share_memory(a, b):
                return False
    return True


def _find(statements, args):
    dtypes = []
    for target, spec in statements:
        try:
            found = _dtypes(spec, args)
        except Exception:  # noqa: BLE001 - NumPy refuses these dtypes: the reference raises the real error
            return None
        if found is None or found[0][id(spec)] != args[target].dtype:
            return None  # a value cast on its way into the target: left to NumPy's copyto
        dtypes.append(found[0])
    in_dtypes = [np.asarray(a).dtype for a in args]
    key = (statements, tuple(d.str for d in in_dtypes))
    return cached_kernel(_kernels, key, lambda: _compile(statements, args, dtypes, in_dtypes))


def _source(statements, args, dtypes) -> str:
    """One njit loop: load each array's element, run the statements' scalar code, store the targets."""
    arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    names = [f"x{i}" if i in arrays else f"a{i}" for i in range(len(args))]
    lines = [f"        x{i} = a{i}[k]" for i in arrays]
    for n, ((target, spec), dts) in enumerate(zip(statements, dtypes)):
        body, result = _body(spec, dts, names, indent="        ")
        rename = lambda text, n=n: re.sub(r"\bt(\d+)\b", rf"s{n}_t\1", text)  # noqa: E731
        lines += [rename(line) for line in body]
        lines += [f"        x{target} = {rename(result)}", f"        a{target}[k] = x{target}"]
    params = ", ".join(f"a{i}" for i in range(len(args)))
    return ("import numpy as np\nimport numba\n\n\n"
            "@numba.njit(cache=True, nogil=True)\n"
            f"def kernel({params}):\n"
            f"    for k in range(a{arrays[0]}.size):\n" + "\n".join(lines) + "\n")


def _compile(statements, args, dtypes, in_dtypes):
    src = _source(statements, args, dtypes)
    src += f"\n# {', '.join(_numba_type(d) for d in in_dtypes)}\n"  # one file per input dtypes

    def compile_now(module):  # a failure to compile is a failure here, not at the first real call
        module.kernel(*[np.zeros(1, d) if isinstance(a, np.ndarray) else a for a, d in zip(args, in_dtypes)])

    return kernel_cache.load_or_build("update", src, compile_now).kernel

