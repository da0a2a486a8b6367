"""2-D convolution and pooling on NCHW arrays, with the gradient kernels a backward pass needs: ``conv2d``,
``conv2d_grad_input``, ``conv2d_grad_weight``, ``max_pool2d``, ``max_pool2d_grad``, ``avg_pool2d``,
``avg_pool2d_grad``. Each is a pure primitive ``nn.<name>`` with a NumPy kernel.

``conv2d`` is a cross-correlation (PyTorch's ``conv2d``: no kernel flip, no bias) with one int stride and one int
zero padding for both spatial axes; the output is ``(H + 2p - KH) // s + 1`` high (and alike wide). Pooling has no
padding and floors the output size; its stride defaults to the window size. Float inputs keep their dtype (NumPy's
promotion when two dtypes meet); anything else is computed in float64. Outputs are C-contiguous (the two-step
primitives of conv_patches.py excepted: see ``_nchw_view``).

Convolution is im2col plus one GEMM, on "pixel rows" (one row per output pixel, features along the row:
see the convolution section); the input's gradient, at stride 1, is a convolution of the output's gradient.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from . import vjp
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
# The GEMMs run on "pixel rows": one row per output pixel (N, OH, OW order), features along the row. The patches
# are (N*OH*OW, KH*KW*C), the weights (F, KH*KW*C), the output and its gradient (N*OH*OW, F). OpenBLAS runs these
# tall, thin products at twice the speed of the same products with the pixels along the columns (the (C*KH*KW,
# OH*OW*N) layout this module used before, and benchmarks/_fit_steps.py's hand-written step uses): on the digits
# CNN's 64x16x8x8 float32 activations, one thread, the forward product 0.25 ms against 0.43, the weights'
# gradient 0.26 against 0.54. The patches are gathered from a zero-padded NHWC copy of the input, where each
# patch row is KH runs of KW*C contiguous elements.
def _nhwc_padded(x, p):
    """x (N, C, H, W) as a zero-padded (N, H + 2p, W + 2p, C) array."""
    n, c, h, w = x.shape
    xp = np.zeros((n, h + 2 * p, w + 2 * p, c), x.dtype)
    xp[:, p:p + h, p:p + w, :] = x.transpose(0, 2, 3, 1)
    return xp


def _im2col(xp, kh, kw, s):
    """Patches of xp (N, Hp, Wp, C) as (N*OH*OW, KH*KW*C): columns ordered like ``_w_rows``'s."""
    n, hp, wp, c = xp.shape
    if c == 1 and s == 1:
        # One channel (a first layer on grey images): the window view's copy runs along KW elements at a time;
        # KH*KW copies of shifted planes run along OW (31 against 75 us for the digits CNN's 64x1x8x8 input,
        # 3x3, 1 thread). With more channels the window view's runs of KW*C elements are the longer.
        oh, ow = hp - kh + 1, wp - kw + 1
        planes, out = xp[..., 0], np.empty((n, oh, ow, kh, kw), xp.dtype)
        for i in range(kh):
            for j in range(kw):
                out[:, :, :, i, j] = planes[:, i:i + oh, j:j + ow]
        return out.reshape(n * oh * ow, kh * kw)
    windows = sliding_window_view(xp, (kh, kw), axis=(1, 2))[:, ::s, ::s]  # (N, OH, OW, C, KH, KW), a view
    n, oh, ow, c = windows.shape[:4]
    return windows.transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, kh * kw * c)


def _w_rows(w):
    """w (F, C, KH, KW) as (F, KH*KW*C), the column order of ``_im2col``."""
    return w.transpose(0, 2, 3, 1).reshape(w.shape[0], -1)


def _nchw(rows, n, oh, ow):
    """Pixel rows (N*OH*OW, F) as a C-contiguous (N, F, OH, OW) array."""
    f = rows.shape[1]
    return np.ascontiguousarray(rows.reshape(n, oh * ow, f).transpose(0, 2, 1)).reshape(n, f, oh, ow)


def _nchw_view(rows, n, oh, ow):
    """Pixel rows (N*OH*OW, F) as an (N, F, OH, OW) view of them, NHWC in memory: no copy. NumPy's element-wise
    functions keep their operands' memory order, so the ReLU of such a view is NHWC in memory too, and the next
    convolution's patches (``_nhwc_padded``) and the gradient's pixel rows (``_g_rows``) read it without a
    transposing copy (nn.Conv2D's two steps: conv_patches.py)."""
    return rows.reshape(n, oh, ow, rows.shape[1]).transpose(0, 3, 1, 2)


def _g_rows(g):
    """g (N, F, OH, OW) as pixel rows (N*OH*OW, F), C-contiguous."""
    return np.ascontiguousarray(g.transpose(0, 2, 3, 1)).reshape(-1, g.shape[1])


def _rows_to_weights(dw_rows, w_shape):
    """(F, KH*KW*C) back to the weights' (F, C, KH, KW), C-contiguous."""
    f, c, kh, kw = w_shape
    return np.ascontiguousarray(dw_rows.reshape(f, kh, kw, c).transpose(0, 3, 1, 2))


def grad_input_from_rows(rows, w, x_shape, s, p, contiguous=True):
    """The input's gradient (x_shape, NCHW) from the output's gradient as pixel rows (N*OH*OW, F). With stride 1
    and padding below the kernel's size it is itself a convolution: of the gradient, zero-padded by KH-1-p (KW-1-p),
    with the weights flipped and their channel axes swapped: a gather and one GEMM on pixel rows (the products'
    fast layout), instead of (N*OH*OW, KH*KW*C) patch gradients summed back onto the input KH*KW times (0.43 ms
    against 0.75 on the digits CNN). Other strides and paddings take that sum (``_scatter_patches``).
    ``contiguous=False``: at stride 1 the result is an NCHW view of NHWC memory (``_nchw_view``)."""
    n, c, h, wd = x_shape
    f, _, kh, kw = w.shape
    oh, ow = (h + 2 * p - kh) // s + 1, (wd + 2 * p - kw) // s + 1
    if s != 1 or p > kh - 1 or p > kw - 1:
        return _scatter_patches(rows @ _w_rows(w), x_shape, (kh, kw), s, p)
    qh, qw = kh - 1 - p, kw - 1 - p
    gp = np.zeros((n, oh + 2 * qh, ow + 2 * qw, f), rows.dtype)
    gp[:, qh:qh + oh, qw:qw + ow, :] = rows.reshape(n, oh, ow, f)
    flipped = w[:, :, ::-1, ::-1].transpose(1, 2, 3, 0).reshape(c, -1)  # (C, KH*KW*F), as _w_rows orders them
    return (_nchw if contiguous else _nchw_view)(_im2col(gp, kh, kw, 1) @ flipped.T, n, h, wd)


def _scatter_patches(dcols, x_shape, k, s, p):
    """Patch gradients (N*OH*OW, KH*KW*C) summed back where each patch was taken: the input's gradient (NCHW)."""
    n, c, h, wd = x_shape
    kh, kw = k
    oh, ow = (h + 2 * p - kh) // s + 1, (wd + 2 * p - kw) // s + 1
    dcols = dcols.reshape(n, oh, ow, kh, kw, c)
    dxp = np.zeros((n, h + 2 * p, wd + 2 * p, c), dcols.dtype)
    for i in range(kh):
        for j in range(kw):
            dxp[:, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s, :] += dcols[:, :, :, i, j]
    return np.ascontiguousarray(dxp[:, p:p + h, p:p + wd, :].transpose(0, 3, 1, 2))


def conv2d(x, w, stride=1, padding=0):
    """Cross-correlation of x (N, C, H, W) with w (F, C, KH, KW): (N, F, OH, OW)."""
    x, w = _float(x), _float(w)
    (n, c, h, wd), (f, kh, kw), s, p, (oh, ow) = _conv_geometry("conv2d", x.shape, w.shape, stride, padding)
    dtype = np.result_type(x, w)
    cols = _im2col(_nhwc_padded(x.astype(dtype, copy=False), p), kh, kw, s)
    return _nchw(cols @ _w_rows(w.astype(dtype, copy=False)).T, n, oh, ow)


def conv2d_grad_input(g, w, x_shape, stride=1, padding=0):
    """Gradient of conv2d with respect to x, given the upstream gradient g (N, F, OH, OW): shape ``x_shape``."""
    fn = "conv2d_grad_input"
    g, w = _float(g), _float(w)
    (n, c, h, wd), (f, kh, kw), s, p, (oh, ow) = _conv_geometry(fn, x_shape, w.shape, stride, padding,
                                                               x_name="x_shape")
    _check_g(fn, g, (n, f, oh, ow), f"conv2d's output for x shape {(n, c, h, wd)}, w shape {w.shape}, "
                                    f"stride {s}, padding {p}")
    dtype = np.result_type(g, w)
    return grad_input_from_rows(_g_rows(g.astype(dtype, copy=False)), w.astype(dtype, copy=False),
                                (n, c, h, wd), s, p)


def conv2d_grad_weight(g, x, w_shape, stride=1, padding=0):
    """Gradient of conv2d with respect to w, given the upstream gradient g (N, F, OH, OW): shape ``w_shape``."""
    fn = "conv2d_grad_weight"
    g, x = _float(g), _float(x)
    (n, c, h, wd), (f, kh, kw), s, p, (oh, ow) = _conv_geometry(fn, x.shape, w_shape, stride, padding,
                                                               w_name="w_shape")
    _check_g(fn, g, (n, f, oh, ow), f"conv2d's output for x shape {x.shape}, w shape {(f, c, kh, kw)}, "
                                    f"stride {s}, padding {p}")
    dtype = np.result_type(g, x)
    cols = _im2col(_nhwc_padded(x.astype(dtype, copy=False), p), kh, kw, s)
    return _rows_to_weights(_g_rows(g.astype(dtype, copy=False)).T @ cols, (f, c, kh, kw))

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
    dx = np.zeros_like(x, np.result_type(g, x))  # in x's memory order (NHWC under nn.Conv2D: _nchw_view)
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
        dx = np.zeros_like(x)  # in x's memory order, as the NumPy kernel's
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
