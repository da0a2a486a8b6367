"""``nn.conv2d`` in two steps whose middle value the gradient tree can keep: the im2col patches of the input, then
one GEMM with the weights (what conv_ops.conv2d computes in one kernel, operation for operation).

    cols = nn.conv2d_patches(x, w_shape, stride, padding)           # (C*KH*KW, OH*OW*N)
    y = nn.conv2d_from_patches(cols, w, x_shape, stride, padding)   # (N, F, OH, OW), conv2d(x, w) to the bit

Traced by px.grad (nn.Conv2D does), the patches are a node of the tree read by the forward GEMM and by the
weight gradient, ``rows @ cols.T``: computed once per step instead of again in ``conv2d_grad_weight`` (which
pads, transposes and gathers the input anew). The upstream gradient in the GEMM's layout, ``rows`` (F, OH*OW*N),
is likewise one node (``nn.conv2d_grad_rows``) read by both gradients. The input's gradient is the same two
steps backwards: ``dcols = w^T @ rows`` and their sum back onto the padded input (``nn.conv2d_patches_grad``),
conv_ops.conv2d_grad_input's operations in its order.
"""
from __future__ import annotations

import numpy as np

from .batch_axis import batch_first
from .conv_ops import _cnhw_padded, _conv_geometry, _float, _g_rows, _im2col, _nchw, _shape4
from .registry import apply, register


def _geometry(fn, x_shape, w_shape, stride, padding):
    return _conv_geometry(fn, _shape4(fn, "x_shape", x_shape, "(N, C, H, W)"), w_shape, stride, padding,
                          x_name="x_shape", w_name="w_shape")


def conv2d_patches(x, w_shape, stride=1, padding=0):
    """The im2col patches of x (N, C, H, W) for weights of shape ``w_shape``: (C*KH*KW, OH*OW*N)."""
    x = _float(x)
    _, (_, kh, kw), s, p, _ = _geometry("conv2d_patches", x.shape, w_shape, stride, padding)
    return _im2col(_cnhw_padded(x, p), kh, kw, s)


def conv2d_from_patches(cols, w, x_shape, stride=1, padding=0):
    """conv2d(x, w, stride, padding) from x's patches ``cols``: (N, F, OH, OW)."""
    cols, w = _float(cols), _float(w)
    (n, _, _, _), (f, _, _), _, _, (oh, ow) = _geometry("conv2d_from_patches", x_shape, w.shape, stride, padding)
    dtype = np.result_type(cols, w)
    out = (w.astype(dtype, copy=False).reshape(f, -1) @ cols.astype(dtype, copy=False)).reshape(f, oh, ow, n)
    return batch_first(out)


def conv2d_grad_rows(g):
    """The upstream gradient g (N, F, OH, OW) as (F, OH*OW*N), the GEMM's layout."""
    return _g_rows(_float(g))


def conv2d_grad_weight_rows(rows, cols, w_shape):
    """The weights' gradient from the gradient's ``rows`` and the forward's patches: shape ``w_shape``."""
    rows, cols = _float(rows), _float(cols)
    dtype = np.result_type(rows, cols)
    return (rows.astype(dtype, copy=False) @ cols.astype(dtype, copy=False).T).reshape(tuple(w_shape))


def conv2d_grad_patches(rows, w):
    """The patches' gradient ``w^T @ rows``: (C*KH*KW, OH*OW*N)."""
    rows, w = _float(rows), _float(w)
    dtype = np.result_type(rows, w)
    return w.astype(dtype, copy=False).reshape(w.shape[0], -1).T @ rows.astype(dtype, copy=False)


def conv2d_patches_grad(dcols, x_shape, w_shape, stride=1, padding=0):
    """The input's gradient from its patches' gradient: each patch summed back where it was taken (x_shape)."""
    dcols = _float(dcols)
    (n, c, h, wd), (_, kh, kw), s, p, (oh, ow) = _geometry("conv2d_patches_grad", x_shape, w_shape, stride,
                                                           padding)
    dcols = dcols.reshape(c, kh, kw, oh, ow, n)
    dxp = np.zeros((c, h + 2 * p, wd + 2 * p, n), dcols.dtype)
    for i in range(kh):
        for j in range(kw):
            dxp[:, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s, :] += dcols[:, i, j]
    return _nchw(dxp[:, p:p + h, p:p + wd, :])


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


def _nn(fn, grad=None):
    register(f"nn.{fn.__name__}", fn, obj=fn, display=f"nn.{fn.__name__}", grad=grad)


_nn(conv2d_patches, _patches_vjp)
_nn(conv2d_from_patches, _from_patches_vjp)
for _fn in (conv2d_grad_rows, conv2d_grad_weight_rows, conv2d_grad_patches, conv2d_patches_grad):
    _nn(_fn)  # the gradients' own kernels (second derivatives are not supported)
