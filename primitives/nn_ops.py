"""Softmax, log-softmax, logsumexp and softmax cross-entropy: functions NumPy needs several passes for (max, subtract,
exp, sum, divide), with a hand-written Numba kernel each as the registered alternative.

The NumPy kernels define the semantics (numerically stable: the row maximum is subtracted first; logsumexp follows
``scipy.special.logsumexp``: an infinite maximum is taken as 0, so a row of -inf gives -inf). The Numba kernels make
one pass to find each row's maximum and one to sum and write, on rows of a 2-D float array along its last axis,
split over threads; ``registry.choose`` picks them for large inputs of that form (``PHYLANX_NUMBA=0`` never).
"""
from __future__ import annotations

import functools

import numpy as np

from . import vjp
from .fused import _blocks, _map_blocks, _threads
from .registry import choose, lookup, register

NUMBA_MIN_ELEMENTS = 1 << 14


def _own_way(x):
    """The ``__phylanx_call__`` of an array type that runs primitives its own way (traced values record them,
    tiled arrays run their tile rules), or None: called directly on such an array (plain Python), these functions
    hand it the primitive, as NumPy's functions do through ``__array_function__``, instead of np.asarray."""
    return getattr(type(x), "__phylanx_call__", None)


def softmax(x, axis=-1):
    hook = _own_way(x)
    if hook is not None:
        return hook("nn.softmax", (x,), {"axis": axis})
    x = np.asarray(x)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / np.sum(e, axis=axis, keepdims=True)


def logsumexp(x, axis=-1, keepdims=False):
    hook = _own_way(x)
    if hook is not None:
        return hook("nn.logsumexp", (x,), {"axis": axis, "keepdims": keepdims})
    x = np.asarray(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis) if axis is not None else out.reshape(())[()]


def log_softmax(x, axis=-1):
    hook = _own_way(x)
    if hook is not None:
        return hook("nn.log_softmax", (x,), {"axis": axis})
    x = np.asarray(x)
    with np.errstate(invalid="ignore"):
        return x - logsumexp(x, axis=axis, keepdims=True)


def _class_labels(logits, labels):
    """``labels`` as the cross-entropy reads them: class indices (integers; whole-number floats converted) when
    there is one per row, else one row of class probabilities per row (checked against the logits' shape)."""
    labels = np.asarray(labels)
    if labels.ndim == logits.ndim - 1 and labels.dtype.kind in "fb":
        # class indices held as floats (np.loadtxt, pandas): the same indices when they are whole numbers
        as_int = labels.astype(np.int64)
        if labels.dtype.kind == "b" or not np.array_equal(as_int, labels):
            raise ValueError(f"labels must be integers (class indices, one per row), got {labels.dtype} "
                             "with values that are not whole numbers" if labels.dtype.kind == "f" else
                             f"labels must be integers (class indices, one per row), got {labels.dtype}")
        labels = as_int
    if labels.ndim == logits.ndim - 1 and labels.dtype.kind in "iu":
        return labels
    if labels.shape != logits.shape:
        raise ValueError(f"labels of shape {labels.shape} do not match logits of shape {logits.shape}: give class "
                         "indices (one per row) or one row of class probabilities per row")
    return labels


def softmax_cross_entropy(logits, labels):
    """Mean cross-entropy of ``softmax(logits)`` (rows) against ``labels``: class indices (n,) or one-hot / class
    probabilities (n, k). Computed from log-softmax, so large logits do not overflow."""
    hook = _own_way(logits)
    if hook is not None:
        return hook("nn.softmax_cross_entropy", (logits, labels), {})
    logits = np.asarray(logits)
    labels = _class_labels(logits, labels)
    logp = log_softmax(logits, axis=-1)
    if labels.ndim == logits.ndim - 1:
        picked = np.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]
        return -np.mean(picked)
    return -np.mean(np.sum(labels * logp, axis=-1))


def softmax_cross_entropy_grad(logits, labels):
    """The gradient of ``softmax_cross_entropy(logits, labels)`` with respect to the logits (rows of 2-D logits):
    ``(softmax(logits) - onehot(labels)) / n``, or ``(softmax(logits) * sum(labels) - labels) / n`` for rows of
    class probabilities. One primitive, so a training step's loss gradient is one call (one pass with the Numba
    kernel) instead of a softmax, a one-hot comparison and a fused chain."""
    logits = np.asarray(logits)
    labels = _class_labels(logits, labels)
    n = logits.shape[0]
    p = softmax(logits, axis=-1)
    if labels.ndim == logits.ndim - 1:
        # indices read as the loss reads them (take_along_axis): negative ones from the end, others out of range
        # raise IndexError
        onehot = np.zeros(p.shape, p.dtype)
        np.put_along_axis(onehot, labels[..., None], 1, axis=-1)
        return (p - onehot) / n
    return (p * np.sum(labels, axis=-1, keepdims=True) - labels) / n


# ---- Numba alternatives ------------------------------------------------------------------------------------
_compiled: dict = {}


def _numba_rows():
    """Compiled on first use (Numba is a dependency, but importing it costs ~0.5 s)."""
    if _compiled:
        return _compiled
    import numba

    @numba.njit(cache=True, nogil=True)
    def row_max(x, i):
        """The row's maximum as np.max gives it: NaN if the row has one."""
        m = -np.inf
        for j in range(x.shape[1]):
            v = x[i, j]
            if v != v:
                return v
            if v > m:
                m = v
        return m

    @numba.njit(cache=True, nogil=True)
    def row_logsumexp(x, i):
        """logsumexp of row i, an infinite maximum taken as 0 (as the NumPy kernel and scipy do)."""
        m = row_max(x, i)
        if not np.isfinite(m):
            m = 0.0
        s = 0.0
        for j in range(x.shape[1]):
            s += np.exp(x[i, j] - m)
        return np.log(s) + m

    @numba.njit(cache=True, nogil=True)
    def softmax_rows(x, out, log):
        n, k = x.shape
        for i in range(n):
            if log:
                lse = row_logsumexp(x, i)
                for j in range(k):
                    out[i, j] = x[i, j] - lse
            else:
                m = row_max(x, i)
                s = 0.0
                for j in range(k):
                    s += np.exp(x[i, j] - m)
                for j in range(k):
                    out[i, j] = np.exp(x[i, j] - m) / s

    @numba.njit(cache=True, nogil=True)
    def logsumexp_rows(x, out):
        for i in range(x.shape[0]):
            out[i] = row_logsumexp(x, i)

    @numba.njit(cache=True, nogil=True)
    def cross_entropy_rows(x, labels, grad, want_grad):
        """(mean cross-entropy of rows x against class indices, every index in range); with ``want_grad`` the
        gradient written to ``grad``. The loss reads the row's logsumexp (an infinite maximum taken as 0), the
        gradient the softmax (the raw maximum subtracted), as the NumPy kernels do."""
        n, k = x.shape
        total = 0.0
        for i in range(n):
            lab = labels[i]
            if lab < 0:
                lab += k  # NumPy's negative indices
            if lab < 0 or lab >= k:
                return np.nan, False
            total += row_logsumexp(x, i) - x[i, lab]
            if want_grad:
                m = row_max(x, i)
                s = 0.0
                for j in range(k):
                    s += np.exp(x[i, j] - m)
                for j in range(k):
                    grad[i, j] = (np.exp(x[i, j] - m) / s - (1.0 if j == lab else 0.0)) / n
        return total / n, True

    _compiled.update(softmax=softmax_rows, logsumexp=logsumexp_rows, cross_entropy=cross_entropy_rows)
    return _compiled


def _rows_ok(x, axis) -> bool:
    return (type(x) is np.ndarray and x.ndim == 2 and x.dtype in (np.float64, np.float32) and axis in (-1, 1)
            and x.size >= NUMBA_MIN_ELEMENTS)


def _split(n_rows, fn):
    _map_blocks(fn, _blocks(n_rows, max(1, min(_threads(), n_rows // 1024 or 1))))


class RowKernel:
    """A Numba alternative over the rows of a 2-D array: ``accepts`` says when it applies."""

    def __init__(self, name):
        self.name = name
        self.__name__ = f"{name}_numba"

    def accepts(self, x, axis=-1, keepdims=False, *rest, **kw) -> bool:
        return not rest and not kw and _rows_ok(x, axis) and (self.name != "logsumexp" or not keepdims)

    def __call__(self, x, axis=-1, keepdims=False):
        kernels = _numba_rows()
        x = np.ascontiguousarray(x)
        with np.errstate(all="ignore"):
            if self.name == "logsumexp":
                out = np.empty(x.shape[0], x.dtype)
                _split(x.shape[0], lambda lo, hi: kernels["logsumexp"](x[lo:hi], out[lo:hi]))
            else:
                out = np.empty_like(x)
                log = self.name == "log_softmax"
                _split(x.shape[0], lambda lo, hi: kernels["softmax"](x[lo:hi], out[lo:hi], log))
        return out


class CrossEntropyKernel:
    """The cross-entropy (``grad=False``) or its gradient over rows of 2-D float logits against integer class
    indices, in one pass: the NumPy kernels make 10-15 NumPy calls (0.10-0.15 ms for a 64x10 batch, more than
    the work) where this one makes one. Any size: the NumPy kernels' cost is their calls, not their elements. A
    class index out of range goes to the NumPy kernel, which raises NumPy's error."""

    def __init__(self, grad: bool):
        self.grad = grad
        self.__name__ = "softmax_cross_entropy_grad_numba" if grad else "softmax_cross_entropy_numba"

    def accepts(self, logits, labels, *rest, **kw) -> bool:
        return (not rest and not kw and type(logits) is np.ndarray and type(labels) is np.ndarray
                and logits.ndim == 2 and logits.dtype in (np.float64, np.float32) and labels.ndim == 1
                and labels.dtype.kind in "iu" and len(labels) == logits.shape[0] > 0 and logits.shape[1] > 0)

    def __call__(self, logits, labels):
        x = logits if logits.flags.c_contiguous else np.ascontiguousarray(logits)
        grad = np.empty_like(x) if self.grad else np.empty((0, 0), x.dtype)
        loss, ok = _numba_rows()["cross_entropy"](x, labels, grad, self.grad)  # (Numba sets no NumPy FP flags)
        if not ok:
            return (softmax_cross_entropy_grad if self.grad else softmax_cross_entropy)(logits, labels)
        return grad if self.grad else x.dtype.type(loss)


# ---- tile rules (runtime/tiled/ops.py gives ``ops``) ------------------------------------------------------
def _tile_rowwise(name):
    """``nn.softmax``/``log_softmax``/``logsumexp`` tile by tile (the registry picks the Numba kernel per tile),
    with the reduced axis first retiled into one tile if it is split."""
    def rule(ops, x, axis=-1, keepdims=False):
        if not ops.is_tiled(x) or axis is None:
            kwargs = {"axis": axis, "keepdims": keepdims} if name == "logsumexp" else {"axis": axis}
            return ops.fallback(f"nn.{name}", _KERNELS[name], (x,), kwargs)
        x = ops.whole_axis(x, axis)
        if name == "logsumexp":
            kernel = functools.partial(_choose_and_run, f"nn.{name}", axis=axis, keepdims=keepdims)
            return ops.elementwise(kernel, [x], drop_axis=None if keepdims else axis % x.ndim)
        return ops.elementwise(functools.partial(_choose_and_run, f"nn.{name}", axis=axis), [x])
    return rule


def _choose_and_run(name, x, **kwargs):
    prim = lookup(name)
    return choose(prim, (x,), kwargs)(x, **kwargs)


def _tile_cross_entropy(ops, logits, labels):
    """Per-row losses tile by tile (logits' classes in one tile), then their mean as a batched reduction."""
    if not ops.is_tiled(logits) or logits.ndim != 2:
        return ops.fallback("nn.softmax_cross_entropy", softmax_cross_entropy, (logits, labels), {})
    logits = ops.whole_axis(logits, 1)
    if ops.is_tiled(labels) and labels.ndim == 1:
        labels = ops.getitem(labels, (slice(None), None))
    elif not ops.is_tiled(labels) and np.ndim(labels) == 1:
        labels = np.asarray(labels)[:, None]
    # dtype given: a trial on one-element stand-ins would index class 1 of a one-class sample
    rows = ops.elementwise(_row_losses, [logits, labels], drop_axis=1,
                           dtype=logits.dtype if logits.dtype.kind == "f" else np.float64)
    return ops.reduce("mean", rows, None, False)


def _row_losses(logits, labels):
    logp = log_softmax(logits, axis=-1)
    labels = np.asarray(labels)
    if labels.dtype.kind in "iu":
        idx = labels if labels.ndim == logits.ndim else labels[..., None]
        return -np.take_along_axis(logp, idx.reshape(-1, 1), axis=-1)[:, 0]
    return -np.sum(labels * logp, axis=-1)


def _tile_cross_entropy_grad(ops, logits, labels):
    """The gradient tile by tile over rows (logits' classes in one tile), each divided by the whole batch's n."""
    if not ops.is_tiled(logits) or logits.ndim != 2:
        return ops.fallback("nn.softmax_cross_entropy_grad", softmax_cross_entropy_grad, (logits, labels), {})
    logits = ops.whole_axis(logits, 1)
    if ops.is_tiled(labels) and labels.ndim == 1:
        labels = ops.getitem(labels, (slice(None), None))
    elif not ops.is_tiled(labels) and np.ndim(labels) == 1:
        labels = np.asarray(labels)[:, None]
    n = int(logits.shape[0])
    return ops.elementwise(functools.partial(_row_grads, n=n), [logits, labels],
                           dtype=logits.dtype if logits.dtype.kind == "f" else np.float64)


def _row_grads(logits, labels, n):
    """Rows of the gradient (softmax_cross_entropy_grad's), over ``n`` rows in all; labels as _row_losses reads
    them."""
    p = softmax(logits, axis=-1)
    labels = np.asarray(labels)
    if labels.dtype.kind in "iu":
        return (p - (np.arange(logits.shape[-1]) == labels.reshape(-1, 1))) / n
    return (p * np.sum(labels, axis=-1, keepdims=True) - labels) / n


_KERNELS = {"softmax": softmax, "log_softmax": log_softmax, "logsumexp": logsumexp}
_GRADS = {"softmax": vjp.softmax_vjp, "log_softmax": vjp.log_softmax_vjp, "logsumexp": vjp.logsumexp_vjp}
for _name, _fn in (("softmax", softmax), ("log_softmax", log_softmax), ("logsumexp", logsumexp)):
    register(f"nn.{_name}", _fn, obj=_fn, numba_kernel=RowKernel(_name), display=f"nn.{_name}", grad=_GRADS[_name],
             tile=_tile_rowwise(_name))
register("nn.softmax_cross_entropy", softmax_cross_entropy, obj=softmax_cross_entropy,
         display="nn.softmax_cross_entropy", grad=vjp.softmax_cross_entropy_vjp, tile=_tile_cross_entropy,
         numba_kernel=CrossEntropyKernel(grad=False))
# (its own gradient: second derivatives are not supported)
register("nn.softmax_cross_entropy_grad", softmax_cross_entropy_grad, display="nn.softmax_cross_entropy_grad",
         numba_kernel=CrossEntropyKernel(grad=True), tile=_tile_cross_entropy_grad)
