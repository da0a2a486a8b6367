"""``nn.conv2d`` in two steps whose middle value the gradient tree can keep: the im2col patches of the input, then
one GEMM with the weights (what conv_ops.conv2d computes in one kernel, operation for operation).

    cols = nn.conv2d_patches(x, w_shape, stride, padding)           # (N*OH*OW, KH*KW*C)
    y = nn.conv2d_from_patches(cols, w, x_shape, stride, padding)   # (N, F, OH, OW), conv2d(x, w) to the bit
    y = nn.conv2d_from_patches_bias(cols, w, b, x_shape, stride, padding)   # + b[None, :, None, None] (nn.Conv2D)

Traced by px.grad (nn.Conv2D does), the patches are a node of the tree read by the forward GEMM and by the
weight gradient, ``rows.T @ cols``: computed once per step instead of again in ``conv2d_grad_weight`` (which
pads, transposes and gathers the input anew). The upstream gradient in the GEMMs' layout, ``rows`` (N*OH*OW, F),
is likewise one node (``nn.conv2d_grad_rows``) read by both gradients. The input's gradient is the same two
steps backwards, ``dcols = rows @ w`` and their sum back onto the padded input (``nn.conv2d_patches_grad``);
that pair absorbs into one ``nn.conv2d_grad_input_rows`` (passes/absorb.py), conv_ops.conv2d_grad_input's
operations: at stride 1 a convolution of the gradient, without the patch gradients.
"""
from __future__ import annotations

import numpy as np

from .conv_ops import (
    _conv_geometry,
    _float,
    _g_rows,
    _im2col,
    _nchw,
    _nchw_view,
    _nhwc_padded,
    _rows_to_weights,
    _scatter_patches,
    _shape4,
    _w_rows,
    grad_input_from_rows,
)
from .registry import apply, register


def _geometry(fn, x_shape, w_shape, stride, padding):
    return _conv_geometry(fn, _shape4(fn, "x_shape", x_shape, "(N, C, H, W)"), w_shape, stride, padding,
                          x_name="x_shape", w_name="w_shape")


def conv2d_patches(x, w_shape, stride=1, padding=0):
    """The im2col patches of x (N, C, H, W) for weights of shape ``w_shape``: (N*OH*OW, KH*KW*C)."""
    x = _float(x)
    _, (_, kh, kw), s, p, _ = _geometry("conv2d_patches", x.shape, w_shape, stride, padding)
    return _im2col(_nhwc_padded(x, p), kh, kw, s)


def conv2d_from_patches(cols, w, x_shape, stride=1, padding=0):
    """conv2d(x, w, stride, padding) from x's patches ``cols``: (N, F, OH, OW)."""
    cols, w = _float(cols), _float(w)
    (n, _, _, _), _, _, _, (oh, ow) = _geometry("conv2d_from_patches", x_shape, w.shape, stride, padding)
    dtype = np.result_type(cols, w)
    return _nchw(cols.astype(dtype, copy=False) @ _w_rows(w.astype(dtype, copy=False)).T, n, oh, ow)


def conv2d_from_patches_bias(cols, w, b, x_shape, stride=1, padding=0):
    """``conv2d_from_patches(cols, w, x_shape, stride, padding) + b[None, :, None, None]`` (nn.Conv2D's output): the
    bias added to the GEMM's pixel rows (the same sums), and the result an NCHW view of them, NHWC in memory
    (conv_ops._nchw_view): the layer's ReLU keeps that order, and the next layer's patches and the gradient's
    rows are then read without transposing copies (the digits CNN step made six such copies of 64x16x8x8,
    ~35 us each). The bias's gradient is a sum over the rows of the gradient in that layout
    (``nn.conv2d_grad_bias_rows``), which the weights' gradient reads anyway, not over axes (0, 2, 3)."""
    cols, w, b = _float(cols), _float(w), _float(b)
    (n, _, _, _), (f, _, _), _, _, (oh, ow) = _geometry("conv2d_from_patches_bias", x_shape, w.shape, stride,
                                                        padding)
    if b.shape != (f,):
        raise ValueError(f"conv2d_from_patches_bias: b has shape {b.shape}, the weights have {f} filters: expected "
                         f"({f},)")
    dtype = np.result_type(cols, w)
    rows = cols.astype(dtype, copy=False) @ _w_rows(w.astype(dtype, copy=False)).T
    if np.result_type(rows, b) == rows.dtype:
        rows += b
    else:  # NumPy's promotion of the output and the bias, as ``y + b`` has it
        rows = rows + b
    return _nchw_view(rows, n, oh, ow)


def conv2d_grad_bias_rows(rows):
    """The bias's gradient from the gradient's pixel ``rows`` (N*OH*OW, F): their sum over the rows, as one
    matrix-vector product (BLAS; NumPy's sum over the rows, or over axes (0, 2, 3) of the NCHW gradient, is an
    outer loop over short rows: 87 and 31 us against 4 us for the digits CNN's 4096x16 float32 rows, 1 thread)."""
    rows = _float(rows)
    return np.ones(rows.shape[0], rows.dtype) @ rows


def conv2d_grad_rows(g):
    """The upstream gradient g (N, F, OH, OW) as pixel rows (N*OH*OW, F), the GEMMs' layout."""
    return _g_rows(_float(g))


def conv2d_grad_weight_rows(rows, cols, w_shape):
    """The weights' gradient from the gradient's ``rows`` and the forward's patches: shape ``w_shape``."""
    rows, cols = _float(rows), _float(cols)
    dtype = np.result_type(rows, cols)
    return _rows_to_weights(rows.astype(dtype, copy=False).T @ cols.astype(dtype, copy=False), tuple(w_shape))


def conv2d_grad_patches(rows, w):
    """The patches' gradient ``rows @ w``: (N*OH*OW, KH*KW*C)."""
    rows, w = _float(rows), _float(w)
    dtype = np.result_type(rows, w)
    return rows.astype(dtype, copy=False) @ _w_rows(w.astype(dtype, copy=False))


def conv2d_patches_grad(dcols, x_shape, w_shape, stride=1, padding=0):
    """The input's gradient from its patches' gradient: each patch summed back where it was taken (x_shape)."""
    dcols = _float(dcols)
    (n, c, h, wd), (_, kh, kw), s, p, _ = _geometry("conv2d_patches_grad", x_shape, w_shape, stride, padding)
    return _scatter_patches(dcols, (n, c, h, wd), (kh, kw), s, p)


def conv2d_grad_input_rows(rows, w, x_shape, w_shape, stride=1, padding=0):
    """``conv2d_patches_grad(conv2d_grad_patches(rows, w), x_shape, w_shape, stride, padding)`` (the absorbed pair's
    arguments in order) without the patch gradients: conv2d_grad_input's operations (conv_ops.grad_input_from_rows:
    at stride 1 a convolution of the gradient), so the two steps' input gradient is conv2d's to the bit."""
    fn = "conv2d_grad_input_rows"
    rows, w = _float(rows), _float(w)
    if tuple(w_shape) != w.shape:
        raise ValueError(f"{fn}: w has shape {w.shape}, w_shape says {tuple(w_shape)}")
    shape, _, s, p, _ = _geometry(fn, x_shape, w.shape, stride, padding)
    dtype = np.result_type(rows, w)
    return grad_input_from_rows(rows.astype(dtype, copy=False), w.astype(dtype, copy=False), shape, s, p,
                                contiguous=False)


# ---- gradient rules ------------------------------------------------------------------------------------------
def _patches_vjp(g, ans, x, w_shape, stride=1, padding=0, **kw):
    return (lambda: apply("nn.conv2d_patches_grad", g, np.shape(x), tuple(w_shape), stride, padding),)


def _from_patches_vjp(g, ans, cols, w, x_shape, stride=1, padding=0, **kw):
    rows = []  # one node for both gradients (the thunks run only for the inputs that need one)

    def g_rows():
        if not rows:
            rows.append(apply("nn.conv2d_grad_rows", g))
        return rows[0]

    return (lambda: apply("nn.conv2d_grad_patches", g_rows(), w),
            lambda: apply("nn.conv2d_grad_weight_rows", g_rows(), cols, np.shape(w)))


def _from_patches_bias_vjp(g, ans, cols, w, b, x_shape, stride=1, padding=0, **kw):
    rows = []  # one node for the three gradients

    def g_rows():
        if not rows:
            rows.append(apply("nn.conv2d_grad_rows", g))
        return rows[0]

    return (lambda: apply("nn.conv2d_grad_patches", g_rows(), w),
            lambda: apply("nn.conv2d_grad_weight_rows", g_rows(), cols, np.shape(w)),
            lambda: apply("nn.conv2d_grad_bias_rows", g_rows()))


def _nn(fn, grad=None, **rules):
    register(f"nn.{fn.__name__}", fn, obj=fn, display=f"nn.{fn.__name__}", grad=grad, **rules)


_nn(conv2d_patches, _patches_vjp)
_nn(conv2d_from_patches, _from_patches_vjp)
_nn(conv2d_from_patches_bias, _from_patches_bias_vjp)
for _fn in (conv2d_grad_rows, conv2d_grad_weight_rows, conv2d_grad_bias_rows, conv2d_grad_patches,
            conv2d_grad_input_rows):
    _nn(_fn)  # the gradients' own kernels (second derivatives are not supported)
_nn(conv2d_patches_grad, absorbs=(("nn.conv2d_grad_patches", "nn.conv2d_grad_input_rows"),))
