"""A fused group as one GPU kernel: the spec as Python source over CuPy ufuncs, compiled by ``cupy.fuse``."""
from __future__ import annotations

from . import backends
from .registry import lookup

_cupy_kernels: dict = {}


def cupy_source(spec) -> str:
    """Python source of the spec over CuPy ufuncs, for ``cupy.fuse`` (one GPU kernel)."""
    n_args = [0]

    def visit(node) -> str:
        kind = node[0]
        if kind == "arg":
            n_args[0] = max(n_args[0], node[1] + 1)
            return f"a{node[1]}"
        if kind == "const":
            return repr(node[1])
        operands = [visit(c) for c in node[1:]]
        form = lookup(kind).fused_cupy
        if form is not None:
            return "(" + form.format(*operands) + ")"
        return f"cupy.{kind}({', '.join(operands)})"

    body = visit(spec)
    params = ", ".join(f"a{i}" for i in range(n_args[0]))
    return f"def kernel({params}):\n    return {body}\n"


def cupy_fused(spec):
    """The spec as one fused GPU kernel (``cupy.fuse``), cached by spec."""
    kernel = _cupy_kernels.get(spec)
    if kernel is None:
        cupy = backends.cupy_module()
        namespace = {"cupy": cupy}
        exec(cupy_source(spec), namespace)  # noqa: S102 - generated from the spec above
        kernel = _cupy_kernels[spec] = cupy.fuse()(namespace["kernel"])
    return kernel
