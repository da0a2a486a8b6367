"""Gradient rules (vector-Jacobian products) of the differentiable primitives, registered beside them.

A rule is ``rule(g, ans, *args, **kwargs) -> (thunk | None | [thunk, ...], ...)``: one entry per positional argument
(a list of entries for a list argument, as ``concatenate`` takes), where ``g`` is the cotangent of the result ``ans``.
A thunk computes that argument's cotangent when called; reverse mode calls only the thunks of arguments that need a
gradient, so ``X @ W`` with data ``X`` never computes the (large) cotangent of ``X``.

Rules are written with NumPy functions and operators only. Called on traced values (phylanx_py/trace.py) the same
code records the gradient as primitives of the execution tree; called on arrays it computes it. This module is the
library of rules; each primitive's declaration names its rule (``grad=``) or says it passes no gradient
(``nondiff=True``: comparisons, argmax, rounding); any other primitive without a rule is an error when a gradient
has to flow through it.
"""
from __future__ import annotations

import numpy as np

from .registry import apply, lookup, register


# ---- helpers ---------------------------------------------------------------------------------------------
def unbroadcast(g, shape):
    """Sum ``g`` down to ``shape``: the cotangent of an input that broadcasting stretched."""
    shape = tuple(shape)
    gshape = np.shape(g)
    if gshape == shape:
        return g
    extra = len(gshape) - len(shape)
    if extra > 0:
        g = np.sum(g, axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and np.shape(g)[i] != 1)
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    if np.shape(g) != shape:  # a 0-d input against a 0-d result of another shape kind
        g = np.reshape(g, shape)
    return g


def _shape(x):
    return np.shape(x)


def _dtype(x):
    return x.dtype if hasattr(x, "dtype") else np.result_type(x)


def unary_rule(fn):
    """A rule for a one-argument element-wise primitive: ``fn(g, ans, x)`` is the cotangent."""
    return lambda g, ans, x, *rest, **kw: (lambda: fn(g, ans, x),)


def binary_rule(fx, fy):
    """A rule for a broadcasting two-argument primitive; cotangents are summed back to each input's shape."""
    def rule(g, ans, x, y, *rest, **kw):
        return (lambda: unbroadcast(fx(g, ans, x, y), _shape(x)),
                lambda: unbroadcast(fy(g, ans, x, y), _shape(y)))
    return rule


def max_like(g, a, x, y):
    # Ties split the gradient in halves (as JAX does), so it is the same whichever argument comes first. The
    # booleans multiply the gradient (never a Python float: that would make a float32 gradient float64).
    return g * (x > y) + (0.5 * g) * (x == y)


# ---- reductions --------------------------------------------------------------------------------------------
def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axis = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(a % ndim for a in axis))


def _expand(g, x, axis, keepdims):
    """``g`` of a reduction's result, reshaped to broadcast against ``x`` (the reduced axes put back as 1)."""
    if keepdims:
        return g
    shape = list(_shape(x))
    for a in _axes(axis, len(shape)):
        shape[a] = 1
    return np.reshape(g, tuple(shape))


def _count(x, axis):
    shape = _shape(x)
    n = 1
    for a in _axes(axis, len(shape)):
        n *= shape[a]
    return n


def sum_vjp(g, ans, x, axis=None, dtype=None, out=None, keepdims=False, **kw):
    return (lambda: np.broadcast_to(_expand(g, x, axis, keepdims), _shape(x)),)


def mean_vjp(g, ans, x, axis=None, dtype=None, out=None, keepdims=False, **kw):
    return (lambda: np.broadcast_to(_expand(g, x, axis, keepdims) / _count(x, axis), _shape(x)),)


def extreme_vjp(g, ans, x, axis=None, out=None, keepdims=False, **kw):
    def grad():
        a = _expand(ans, x, axis, keepdims)
        hit = x == a
        # Ties share the gradient equally, so the rule is the same for every order of the equal elements.
        n = np.sum(hit, axis=axis, keepdims=True, dtype=_dtype(g))  # g's dtype: float32 stays float32
        return _expand(g, x, axis, keepdims) * hit / n
    return (grad,)


def var_vjp(g, ans, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    def grad():
        centred = x - np.mean(x, axis=axis, keepdims=True)
        return _expand(g, x, axis, keepdims) * 2.0 * centred / (_count(x, axis) - ddof)
    return (grad,)


def std_vjp(g, ans, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    def grad():
        centred = x - np.mean(x, axis=axis, keepdims=True)
        return _expand(g / ans, x, axis, keepdims) * centred / (_count(x, axis) - ddof)
    return (grad,)


def prod_vjp(g, ans, x, axis=None, dtype=None, out=None, keepdims=False, **kw):
    # ans / x: exact unless an element is zero (a documented limit of this rule)
    return (lambda: _expand(g * ans, x, axis, keepdims) / x,)


# ---- linear algebra ----------------------------------------------------------------------------------------
def matmul_vjp(g, ans, a, b, **kw):
    na, nb = np.ndim(a), np.ndim(b)
    if na == 1 and nb == 1:
        return (lambda: g * b, lambda: g * a)
    if nb == 1:  # (..., n, k) @ (k,) -> (..., n)
        # 2-D a: g @ a is a matrix-vector product (tiled arrays have a rule for it, not for tensordot)
        return (lambda: np.expand_dims(g, -1) * b,
                lambda: np.matmul(g, a) if na == 2 else
                np.tensordot(g, a, axes=(list(range(np.ndim(g))), list(range(na - 1)))))
    if na == 1:  # (k,) @ (..., k, m) -> (..., m)
        return (lambda: np.matmul(b, g) if nb == 2 else
                np.tensordot(g, b, axes=(list(range(np.ndim(g))), [i for i in range(nb) if i != nb - 2])),
                lambda: np.expand_dims(a, -1) * np.expand_dims(g, -2))
    return (lambda: unbroadcast(np.matmul(g, np.swapaxes(b, -1, -2)), _shape(a)),
            lambda: unbroadcast(np.matmul(np.swapaxes(a, -1, -2), g), _shape(b)))


def dot_vjp(g, ans, a, b, **kw):
    if np.ndim(a) <= 2 and np.ndim(b) <= 2 and np.ndim(a) > 0 and np.ndim(b) > 0:
        return matmul_vjp(g, ans, a, b)
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return (lambda: unbroadcast(g * b, _shape(a)), lambda: unbroadcast(g * a, _shape(b)))
    return tensordot_vjp(g, ans, a, b, axes=([np.ndim(a) - 1], [max(np.ndim(b) - 2, 0)]))


def tensordot_vjp(g, ans, a, b, axes=2, **kw):
    na, nb = np.ndim(a), np.ndim(b)
    if isinstance(axes, int):
        ax_a, ax_b = list(range(na - axes, na)), list(range(axes))
    else:
        ax_a, ax_b = axes
        ax_a = [ax_a] if isinstance(ax_a, int) else list(ax_a)
        ax_b = [ax_b] if isinstance(ax_b, int) else list(ax_b)
    ax_a, ax_b = [x % na for x in ax_a], [x % nb for x in ax_b]
    free_a = [i for i in range(na) if i not in ax_a]
    free_b = [i for i in range(nb) if i not in ax_b]
    ka = len(free_a)

    def ga():
        # g has axes free_a + free_b; contract its free_b part with b's free axes
        r = np.tensordot(g, b, axes=(list(range(ka, ka + len(free_b))), free_b))
        # r has axes free_a + ax_b order (b's contracted axes, in b's order) -> permute into a's axis order
        order_b = sorted(range(len(ax_b)), key=lambda i: ax_b[i])  # positions of b's contracted axes in r
        src = free_a + [ax_a[i] for i in order_b]
        return np.transpose(r, np.argsort(src))

    def gb():
        r = np.tensordot(a, g, axes=(free_a, list(range(ka))))
        order_a = sorted(range(len(ax_a)), key=lambda i: ax_a[i])
        src = [ax_b[i] for i in order_a] + free_b
        return np.transpose(r, np.argsort(src))
    return ga, gb


def einsum_vjp(g, ans, subscripts, *operands, **kw):
    if not isinstance(subscripts, str) or "..." in subscripts or "->" not in subscripts:
        raise NotImplementedError("the gradient of einsum needs explicit subscripts with '->' and no '...'")
    ins, out = subscripts.replace(" ", "").split("->")
    ins = ins.split(",")

    def grad_of(i):
        def th():
            target = ins[i]
            if len(set(target)) != len(target):  # a repeated index (a diagonal)
                raise NotImplementedError("the gradient of einsum with a repeated index in one operand")
            others = [op for j, op in enumerate(operands) if j != i]
            subs = [s for j, s in enumerate(ins) if j != i]
            seen = set(out).union(*subs) if subs else set(out)
            kept = "".join(c for c in target if c in seen)
            r = np.einsum(",".join([out] + subs) + "->" + kept, g, *others)
            missing = [k for k, c in enumerate(target) if c not in seen]
            if missing:  # an index summed only within this operand: its gradient is constant along it
                r = np.broadcast_to(np.expand_dims(r, tuple(missing)), _shape(operands[i]))
            return r
        return th
    return (None,) + tuple(grad_of(i) for i in range(len(operands)))


def outer_vjp(g, ans, a, b, **kw):
    return (lambda: np.reshape(np.matmul(g, np.ravel(b)), _shape(a)),
            lambda: np.reshape(np.matmul(np.ravel(a), g), _shape(b)))


# ---- shape and indexing ----------------------------------------------------------------------------------
def reshape_back_vjp(g, ans, x, *args, **kw):
    return (lambda: np.reshape(g, _shape(x)),)


def transpose_vjp(g, ans, x, axes=None, **kw):
    if axes is None:
        return (lambda: np.transpose(g),)
    return (lambda: np.transpose(g, np.argsort(axes)),)


def swapaxes_vjp(g, ans, x, a, b, **kw):
    return (lambda: np.swapaxes(g, a, b),)


def moveaxis_vjp(g, ans, x, source, destination, **kw):
    return (lambda: np.moveaxis(g, destination, source),)


def broadcast_to_vjp(g, ans, x, shape, **kw):
    return (lambda: unbroadcast(g, _shape(x)),)


def concatenate_vjp(g, ans, arrays, axis=0, **kw):
    if axis is None:
        sizes = [int(np.size(a)) for a in arrays]
        cuts = np.cumsum(sizes)[:-1]
        return ([(lambda i=i: np.reshape(np.split(g, cuts)[i], _shape(arrays[i]))) for i in range(len(arrays))],)
    sizes = [_shape(a)[axis] for a in arrays]
    bounds = np.concatenate([[0], np.cumsum(sizes)])

    def piece(i):
        index = [slice(None)] * np.ndim(g)
        index[axis] = slice(int(bounds[i]), int(bounds[i + 1]))
        return lambda: g[tuple(index)]
    return ([piece(i) for i in range(len(arrays))],)


def stack_vjp(g, ans, arrays, axis=0, **kw):
    def piece(i):
        return lambda: np.take(g, i, axis=axis)
    return ([piece(i) for i in range(len(arrays))],)


def hstack_vjp(g, ans, arrays, **kw):
    return concatenate_vjp(g, ans, arrays, axis=0 if np.ndim(arrays[0]) == 1 else 1)


def vstack_vjp(g, ans, arrays, **kw):
    if np.ndim(arrays[0]) >= 2:
        return concatenate_vjp(g, ans, arrays, axis=0)
    return ([(lambda i=i: g[i]) for i in range(len(arrays))],)


def index_add(shape, key, g, dtype):
    """A zero array of ``shape`` with ``g`` added at ``key`` (repeated indices add up): getitem's gradient."""
    out = np.zeros(shape, dtype=dtype)
    np.add.at(out, key, g)
    return out


def getitem_vjp(g, ans, x, key, **kw):
    return (lambda: _index_add(_shape(x), key, g, _dtype(x)), None)


def _index_add(shape, key, g, dtype):
    return apply("ad.index_add", tuple(shape), key, g, dtype)


def take_vjp(g, ans, x, indices, axis=None, **kw):
    def grad():
        if axis is None:
            return np.reshape(_index_add((int(np.size(x)),), indices, g, _dtype(x)), _shape(x))
        key = (slice(None),) * (axis % np.ndim(x)) + (indices,)
        return _index_add(_shape(x), key, g, _dtype(x))
    return (grad, None)


def where_vjp(g, ans, cond, x=None, y=None, **kw):
    return (None,
            lambda: unbroadcast(np.where(cond, g, 0.0), _shape(x)),
            lambda: unbroadcast(np.where(cond, 0.0, g), _shape(y)))


def clip_vjp(g, ans, x, lo=None, hi=None, **kw):
    def grad():
        out = g
        if lo is not None:
            out = out * (x >= lo)
        if hi is not None:
            out = out * (x <= hi)
        return out
    return (grad, None, None)


def expand_dims_vjp(g, ans, x, axis, **kw):
    return (lambda: np.reshape(g, _shape(x)),)


def flip_vjp(g, ans, x, axis=None, **kw):
    return (lambda: np.flip(g, axis=axis),)


def copy_vjp(g, ans, x, *args, **kw):
    return (lambda: g,)


def astype_vjp(g, ans, x, dtype, *args, **kw):
    return (lambda: g.astype(_dtype(x)), None)


def pad_vjp(g, ans, x, pad_width, mode="constant", **kw):
    if mode != "constant":
        raise NotImplementedError(f"the gradient of np.pad with mode={mode!r}")
    widths = np.broadcast_to(np.asarray(pad_width), (np.ndim(x), 2))
    key = tuple(slice(int(lo), int(lo) + n) for (lo, _hi), n in zip(widths, _shape(x)))
    return (lambda: g[key], None)


def tile_like_vjp(g, ans, x, reps, **kw):  # np.tile: sum the copies
    def grad():
        reps_t = (reps,) if isinstance(reps, int) else tuple(reps)
        shape = _shape(x)
        d = max(len(shape), len(reps_t))
        shape = (1,) * (d - len(shape)) + tuple(shape)
        reps_t = (1,) * (d - len(reps_t)) + reps_t
        split = []
        for r, n in zip(reps_t, shape):
            split += [r, n]
        summed = np.sum(np.reshape(g, tuple(split)), axis=tuple(range(0, 2 * d, 2)))
        return np.reshape(summed, _shape(x))
    return (grad, None)


# ---- neural-network primitives -----------------------------------------------------------------------------
def softmax_vjp(g, ans, x, axis=-1, **kw):
    return (lambda: ans * (g - np.sum(g * ans, axis=axis, keepdims=True)),)


def log_softmax_vjp(g, ans, x, axis=-1, **kw):
    return (lambda: g - np.exp(ans) * np.sum(g, axis=axis, keepdims=True),)


def logsumexp_vjp(g, ans, x, axis=-1, keepdims=False, **kw):
    def grad():
        a = ans if keepdims else np.expand_dims(ans, axis) if axis is not None else ans
        gg = g if keepdims else np.expand_dims(g, axis) if axis is not None else g
        return gg * np.exp(x - a)
    return (grad,)


def softmax_cross_entropy_vjp(g, ans, logits, labels, **kw):
    return (lambda: g * apply("nn.softmax_cross_entropy_grad", logits, labels), None)


def conv2d_vjp(g, ans, x, w, stride=1, padding=0, **kw):
    return (lambda: apply("nn.conv2d_grad_input", g, w, _shape(x), stride, padding),
            lambda: apply("nn.conv2d_grad_weight", g, x, _shape(w), stride, padding))


def max_pool2d_vjp(g, ans, x, size=2, stride=None, **kw):
    return (lambda: apply("nn.max_pool2d_grad", g, x, size, stride),)


def avg_pool2d_vjp(g, ans, x, size=2, stride=None, **kw):
    return (lambda: apply("nn.avg_pool2d_grad", g, _shape(x), size, stride),)


def grad_rule(name):
    """The gradient rule of primitive ``name``; None for one that passes no gradient; KeyError if it has none."""
    prim = lookup(name)
    if prim.nondiff:
        return None
    if prim.grad is None:
        raise KeyError(name)
    return prim.grad


# The scatter-add a getitem's gradient needs, a primitive of its own (recorded in traced gradient trees).
register("ad.index_add", index_add, display="index_add")
