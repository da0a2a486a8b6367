"""Shape/dtype rules: the abstract values primitives map to, so shape errors surface at the user's line."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class AbstractValue:
    """What is known of an array before it exists: its shape and dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def abstract(value) -> AbstractValue | object:
    """The abstract value of a concrete one: arrays and NumPy scalars become shape+dtype; the rest stays."""
    if isinstance(value, AbstractValue):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        return AbstractValue(tuple(value.shape), value.dtype)
    return value


def _dtype_of(v):
    # Python scalars take part in promotion as "weak" values, exactly as NumPy 2 treats them.
    return v.dtype if isinstance(v, AbstractValue) else v


def _shape_of(v):
    return v.shape if isinstance(v, AbstractValue) else ()


def elementwise(ufunc, nin: int | None = None):
    """The rule of an element-wise function (a ufunc, or a Python operator with ``nin`` operands): broadcast
    the shapes; the dtype comes from calling the function itself on zero-size stand-ins, so NumPy's own type
    resolution decides, special cases included (``bool_array ** 2`` is int8: ndarray's square fast path)."""
    nin = nin or ufunc.nin

    def rule(*args, **kwargs):
        shapes = [_shape_of(a) for a in args[:nin]]
        shape = np.broadcast_shapes(*shapes)
        probes = [np.empty((0,), a.dtype) if isinstance(a, AbstractValue) else a for a in args[:nin]]
        out = ufunc(*probes, **{k: v for k, v in kwargs.items() if k == "dtype"})
        if isinstance(out, tuple):
            return tuple(AbstractValue(shape, o.dtype) for o in out)
        return AbstractValue(shape, np.asarray(out).dtype)

    return rule


def reduction(func):
    """The rule of an axis reduction (``sum``, ``mean``, ``argmax`` ...): run it on a zero-stride stand-in."""

    def rule(a, *args, **kwargs):
        if not isinstance(a, AbstractValue):
            return None
        # A broadcast view of one element has the full shape but costs nothing to build; reductions over it
        # cost O(size) though, so only the output of a size-1 stand-in per reduced axis is computed.
        probe = np.broadcast_to(np.ones((), a.dtype), tuple(min(n, 1) for n in a.shape))
        out = np.asarray(func(probe, *args, **kwargs))
        axis = kwargs.get("axis", args[0] if args else None)
        keep = kwargs.get("keepdims", False)
        if axis is None:
            shape = tuple(1 for _ in a.shape) if keep else ()
        else:
            axes = {ax % a.ndim for ax in ((axis,) if np.isscalar(axis) else axis)}
            shape = tuple((1 if i in axes else n) for i, n in enumerate(a.shape) if keep or i not in axes)
        return AbstractValue(shape, out.dtype)

    return rule


def matmul(a, b, **kwargs):
    """``a @ b`` with NumPy's rules for 1-D operands and batch broadcasting."""
    if not (isinstance(a, AbstractValue) and isinstance(b, AbstractValue)):
        return None
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    sa = (1,) + a.shape if a.ndim == 1 else a.shape
    sb = b.shape + (1,) if b.ndim == 1 else b.shape
    if sa[-1] != sb[-2]:
        raise ValueError(
            f"matmul: Input operand 1 has a mismatch in its core dimension 0 "
            f"(size {sb[-2]} is different from {sa[-1]})"
        )
    batch = np.broadcast_shapes(sa[:-2], sb[:-2])
    shape = batch + (sa[-2], sb[-1])
    if a.ndim == 1:
        shape = shape[:-2] + shape[-1:]
    if b.ndim == 1:
        shape = shape[:-1]
    return AbstractValue(shape, np.result_type(a.dtype, b.dtype))


def infer(prim, args, kwargs):
    """Apply ``prim``'s rule to abstract arguments; None where no rule or nothing is known."""
    if prim.shape_rule is None:
        return None
    return prim.shape_rule(*[abstract(a) for a in args], **kwargs)
