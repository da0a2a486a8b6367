"""2-D convolution and pooling on NCHW arrays, with the gradient kernels a backward pass needs: ``conv2d``,
``conv2d_grad_input``, ``conv2d_grad_weight``, ``max_pool2d``, ``max_pool2d_grad``, ``avg_pool2d``,
``avg_pool2d_grad``. Each is a pure primitive ``nn.<name>`` with a NumPy kernel.

``conv2d`` is a cross-correlation (PyTorch's ``conv2d``: no kernel flip, no bias) with one int stride and one int
zero padding for both spatial axes; the output is ``(H + 2p - KH) // s + 1`` high (and alike wide). Pooling has no
padding and floors the output size; its stride defaults to the window size. Float inputs keep their dtype (NumPy's
promotion when two dtypes meet); anything else is computed in float64. Outputs are C-contiguous.

Convolution is im2col plus one GEMM. The patches are gathered from a (C, H, W, N) copy of the input rather than
from the NCHW array itself: the innermost run of each copied patch row is then OW*N contiguous elements instead
of OW. On small images, where the gather costs more than the GEMM, that makes it several times faster, far more
than the transposes in and out cost.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from . import vjp
from .batch_axis import batch_first, batch_last
from .registry import register


# ---- validation ----------------------------------------------------------------------------------------------
def _float(a):
    a = np.asarray(a)
    return a if a.dtype.kind == "f" else a.astype(np.float64)


def _shape4(fn, what, shape, axes):
    shape = tuple(int(d) for d in shape)
    if len(shape) != 4:
        raise ValueError(f"{fn}: {what} must be 4-D {axes}, got shape {shape}")
    return shape


def _positive(fn, what, value):
    # bool is an int to Python, but stride=True is a mistake, not a stride of 1
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{fn}: {what} must be a positive int, got {value!r}")
    return int(value)


def _non_negative(fn, what, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{fn}: {what} must be a non-negative int, got {value!r}")
    return int(value)


def _conv_geometry(fn, x_shape, w_shape, stride, padding, x_name="x", w_name="w"):
    """Validated (N, C, H, W), (F, KH, KW), stride, padding, (OH, OW) of a convolution."""
    n, c, h, w = _shape4(fn, x_name, x_shape, "(N, C, H, W)")
    f, cw, kh, kw = _shape4(fn, w_name, w_shape, "(F, C, KH, KW)")
    s = _positive(fn, "stride", stride)
    p = _non_negative(fn, "padding", padding)
    if c != cw:
        raise ValueError(f"{fn}: x has {c} channels but w has {cw} (x shape {(n, c, h, w)}, w shape {(f, cw, kh, kw)})")
    if kh > h + 2 * p or kw > w + 2 * p:
        raise ValueError(f"{fn}: kernel {kh}x{kw} is larger than the padded input {h + 2 * p}x{w + 2 * p} "
                         f"(x shape {(n, c, h, w)}, padding {p})")
    return (n, c, h, w), (f, kh, kw), s, p, ((h + 2 * p - kh) // s + 1, (w + 2 * p - kw) // s + 1)


def _check_g(fn, g, expected, detail):
    if g.shape != expected:
        raise ValueError(f"{fn}: g has shape {g.shape}, expected {expected} ({detail})")


# ---- convolution ---------------------------------------------------------------------------------------------
def _cnhw_padded(x, p):
    """x (N, C, H, W) as a zero-padded (C, H + 2p, W + 2p, N) array (the batch axis moved by batch_axis.py's
    tiled copy, then padded by a copy whose inner runs are W*N long)."""
    n, c, h, w = x.shape
    xt = batch_last(x)
    if p == 0:
        return xt
    xp = np.zeros((c, h + 2 * p, w + 2 * p, n), x.dtype)
    xp[:, p:p + h, p:p + w, :] = xt
    return xp


def _nchw(y):
    """y (C, H, W, N), perhaps a strided view (a crop), as a C-contiguous (N, C, H, W) array."""
    return batch_first(y)


def _im2col(xp, kh, kw, s):
    """Patches of xp (C, Hp, Wp, N) as (C*KH*KW, OH*OW*N): rows ordered like w.reshape(F, -1)'s columns."""
    windows = sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, ::s, ::s]  # (C, OH, OW, N, KH, KW), a view
    c, oh, ow, n = windows.shape[:4]
    return windows.transpose(0, 4, 5, 1, 2, 3).reshape(c * kh * kw, oh * ow * n)


def _g_rows(g):
    """g (N, F, OH, OW) as (F, OH*OW*N), the column order of ``_im2col``."""
    return batch_last(g).reshape(g.shape[1], -1)


def conv2d(x, w, stride=1, padding=0):
    """Cross-correlation of x (N, C, H, W) with w (F, C, KH, KW): (N, F, OH, OW)."""
    x, w = _float(x), _float(w)
    (n, c, h, wd), (f, kh, kw), s, p, (oh, ow) = _conv_geometry("conv2d", x.shape, w.shape, stride, padding)
    dtype = np.result_type(x, w)
    cols = _im2col(_cnhw_padded(x.astype(dtype, copy=False), p), kh, kw, s)
    out = (w.astype(dtype, copy=False).reshape(f, -1) @ cols).reshape(f, oh, ow, n)
    return batch_first(out)


def conv2d_grad_input(g, w, x_shape, stride=1, padding=0):
    """Gradient of conv2d with respect to x, given the upstream gradient g (N, F, OH, OW): shape ``x_shape``."""
    fn = "conv2d_grad_input"
    g, w = _float(g), _float(w)
    (n, c, h, wd), (f, kh, kw), s, p, (oh, ow) = _conv_geometry(fn, x_shape, w.shape, stride, padding,
                                                               x_name="x_shape")
    _check_g(fn, g, (n, f, oh, ow), f"conv2d's output for x shape {(n, c, h, wd)}, w shape {w.shape}, "
                                    f"stride {s}, padding {p}")
    dtype = np.result_type(g, w)
    # Each patch column's gradient is w^T g; patches overlap, so they are summed back per kernel position: KH*KW
    # strided adds of whole (C, OH, OW, N) blocks, no np.add.at.
    dcols = (w.astype(dtype, copy=False).reshape(f, -1).T @ _g_rows(g.astype(dtype, copy=False)))
    dcols = dcols.reshape(c, kh, kw, oh, ow, n)
    dxp = np.zeros((c, h + 2 * p, wd + 2 * p, n), dtype)
    for i in range(kh):
        for j in range(kw):
            dxp[:, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s, :] += dcols[:, i, j]
    return _nchw(dxp[:, p:p + h, p:p + wd, :])


def conv2d_grad_weight(g, x, w_shape, stride=1, padding=0):
    """Gradient of conv2d with respect to w, given the upstream gradient g (N, F, OH, OW): shape ``w_shape``."""
    fn = "conv2d_grad_weight"
    g, x = _float(g), _float(x)
    (n, c, h, wd), (f, kh, kw), s, p, (oh, ow) = _conv_geometry(fn, x.shape, w_shape, stride, padding,
                                                               w_name="w_shape")
    _check_g(fn, g, (n, f, oh, ow), f"conv2d's output for x shape {x.shape}, w shape {(f, c, kh, kw)}, "
                                    f"stride {s}, padding {p}")
    dtype = np.result_type(g, x)
    cols = _im2col(_cnhw_padded(x.astype(dtype, copy=False), p), kh, kw, s)
    dw = _g_rows(g.astype(dtype, copy=False)) @ cols.T
    return dw.reshape(f, c, kh, kw)


# ---- pooling -------------------------------------------------------------------------------------------------
def _pool_geometry(fn, x_shape, size, stride):
    n, c, h, w = _shape4(fn, "x", x_shape, "(N, C, H, W)")
    k = _positive(fn, "size", size)
    s = k if stride is None else _positive(fn, "stride", stride)
    if k > h or k > w:
        raise ValueError(f"{fn}: window {k}x{k} is larger than the input {h}x{w} (x shape {(n, c, h, w)})")
    return k, s, (h - k) // s + 1, (w - k) // s + 1


def _offsets(k, s, oh, ow):
    """For each position (i, j) in the window, row-major, the slices picking it from every window at once."""
    return [(slice(i, i + s * (oh - 1) + 1, s), slice(j, j + s * (ow - 1) + 1, s)) for i in range(k) for j in range(k)]


def _window_reduce(fn, x, size, stride, ufunc):
    """``ufunc`` folded over each size x size window of x (N, C, H, W); also returns the window size k.

    k*k element-wise steps over whole strided slices: long inner loops, where reducing a (..., k, k) window view
    would run one short loop per window."""
    x = _float(x)
    k, s, oh, ow = _pool_geometry(fn, x.shape, size, stride)
    (ri, rj), *rest = _offsets(k, s, oh, ow)
    out = x[:, :, ri, rj].copy()
    for ri, rj in rest:
        ufunc(out, x[:, :, ri, rj], out=out)
    return out, k


def max_pool2d(x, size=2, stride=None):
    """Maximum over each size x size window of x (N, C, H, W)."""
    # np.maximum propagates NaN as np.max does.
    return _window_reduce("max_pool2d", x, size, stride, np.maximum)[0]


def max_pool2d_grad(g, x, size=2, stride=None):
    """Gradient of max_pool2d with respect to x: each window's g goes to its maximum (the first, row-major, on ties;
    a NaN counts as the maximum, as np.argmax has it), summed where windows overlap."""
    fn = "max_pool2d_grad"
    g, x = _float(g), _float(x)
    k, s, oh, ow = _pool_geometry(fn, x.shape, size, stride)
    _check_g(fn, g, x.shape[:2] + (oh, ow), f"max_pool2d's output for x shape {x.shape}, size {k}, stride {s}")
    # np.argmax over each window's k*k elements, row-major: ties keep the first, a NaN wins (as np.max has it).
    n, c = x.shape[:2]
    windows = sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::s, ::s]  # (N, C, OH, OW, k, k), a view
    arg = windows.reshape(n, c, oh, ow, k * k).argmax(axis=-1)
    dx = np.zeros(x.shape, np.result_type(g, x))
    for o, (ri, rj) in enumerate(_offsets(k, s, oh, ow)):
        dx[:, :, ri, rj] += np.where(arg == o, g, 0)
    return dx


def avg_pool2d(x, size=2, stride=None):
    """Mean over each size x size window of x (N, C, H, W)."""
    out, k = _window_reduce("avg_pool2d", x, size, stride, np.add)
    out /= k * k
    return out


def avg_pool2d_grad(g, x_shape, size=2, stride=None):
    """Gradient of avg_pool2d with respect to x (shape ``x_shape``): g / size**2 to every element of each window,
    summed where windows overlap; elements no window covers get 0."""
    fn = "avg_pool2d_grad"
    g = _float(g)
    x_shape = _shape4(fn, "x_shape", x_shape, "(N, C, H, W)")
    k, s, oh, ow = _pool_geometry(fn, x_shape, size, stride)
    _check_g(fn, g, x_shape[:2] + (oh, ow), f"avg_pool2d's output for x shape {x_shape}, size {k}, stride {s}")
    share = g / (k * k)
    dx = np.zeros(x_shape, g.dtype)
    for ri, rj in _offsets(k, s, oh, ow):
        dx[:, :, ri, rj] += share
    return dx


# ---- Numba alternatives ------------------------------------------------------------------------------------
_compiled: dict = {}


def _max_pool_grad_numba():
    """Compiled on first use (importing Numba costs ~0.5 s)."""
    if _compiled:
        return _compiled["max_pool_grad"]
    import numba

    @numba.njit(cache=True, nogil=True)
    def max_pool_grad(g, x, k, s, dx):
        """dx += g at each window's first maximum, row-major (the first NaN if there is one), window by window."""
        n, c, oh, ow = g.shape
        for a in range(n):
            for b in range(c):
                for i in range(oh):
                    for j in range(ow):
                        bi, bj = i * s, j * s
                        best = x[a, b, bi, bj]
                        ti, tj = bi, bj
                        if best == best:  # not NaN: look further (a NaN in front already wins)
                            done = False
                            for u in range(k):
                                for v in range(k):
                                    val = x[a, b, bi + u, bj + v]
                                    if val != val:
                                        ti, tj, done = bi + u, bj + v, True
                                        break
                                    if val > best:
                                        best, ti, tj = val, bi + u, bj + v
                                if done:
                                    break
                        dx[a, b, ti, tj] += g[a, b, i, j]

    _compiled["max_pool_grad"] = max_pool_grad
    return max_pool_grad


class MaxPoolGradKernel:
    """``max_pool2d_grad`` in one pass over the windows (the NumPy kernel copies every window for np.argmax and
    then makes one masked pass per window position: 1.07 ms against 0.26 ms for the hand-written pooling backward
    of benchmarks/_fit_steps.py, on the digits CNN's 64x16x8x8). Same choice of maximum; where windows overlap
    the sums may round differently (added window by window instead of position by position)."""

    __name__ = "max_pool2d_grad_numba"

    def accepts(self, g, x, size=2, stride=None, *rest, **kw) -> bool:
        if rest or kw or type(g) is not np.ndarray or type(x) is not np.ndarray or x.ndim != 4:
            return False
        if x.dtype not in (np.float32, np.float64) or g.dtype != x.dtype:
            return False
        try:
            k, s, oh, ow = _pool_geometry("max_pool2d_grad", x.shape, size, stride)
        except ValueError:
            return False  # the NumPy kernel raises the error
        return g.shape == x.shape[:2] + (oh, ow)

    def __call__(self, g, x, size=2, stride=None):
        k, s, _, _ = _pool_geometry("max_pool2d_grad", x.shape, size, stride)
        dx = np.zeros(x.shape, x.dtype)
        _max_pool_grad_numba()(g, x, k, s, dx)
        return dx


def _nn(fn, grad=None, **alternative):
    register(f"nn.{fn.__name__}", fn, obj=fn, display=f"nn.{fn.__name__}", grad=grad, **alternative)


_nn(conv2d, vjp.conv2d_vjp)
_nn(max_pool2d, vjp.max_pool2d_vjp)
_nn(avg_pool2d, vjp.avg_pool2d_vjp)
for _fn in (conv2d_grad_input, conv2d_grad_weight, avg_pool2d_grad):
    _nn(_fn)  # the gradients' own kernels (second derivatives are not supported)
_nn(max_pool2d_grad, numba_kernel=MaxPoolGradKernel())
