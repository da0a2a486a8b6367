"""nn.conv2d / max_pool2d / avg_pool2d and their gradient kernels: forward against naive loops, gradients against
central finite differences, the error messages, the registry entries."""
from __future__ import annotations

import re

import numpy as np
import pytest
from phylanx_py.primitives import conv_ops, lookup, name_of
from phylanx_py.primitives.conv_ops import (
    avg_pool2d,
    avg_pool2d_grad,
    conv2d,
    conv2d_grad_input,
    conv2d_grad_weight,
    max_pool2d,
    max_pool2d_grad,
)

RNG = np.random.default_rng(0)
EPS = 1e-6


# ---- naive references ----------------------------------------------------------------------------------------
def naive_conv2d(x, w, stride, padding):
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * padding, wd + 2 * padding), x.dtype)
    xp[:, :, padding:padding + h, padding:padding + wd] = x
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (wd + 2 * padding - kw) // stride + 1
    out = np.zeros((n, f, oh, ow), np.float64)
    for b in range(n):
        for o in range(f):
            for i in range(oh):
                for j in range(ow):
                    patch = xp[b, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
                    out[b, o, i, j] = np.sum(patch.astype(np.float64) * w[o].astype(np.float64))
    return out


def naive_pool(x, size, stride, reduce):
    stride = size if stride is None else stride
    n, c, h, w = x.shape
    oh, ow = (h - size) // stride + 1, (w - size) // stride + 1
    out = np.zeros((n, c, oh, ow), x.dtype)
    for b in range(n):
        for ch in range(c):
            for i in range(oh):
                for j in range(ow):
                    out[b, ch, i, j] = reduce(x[b, ch, i * stride:i * stride + size, j * stride:j * stride + size])
    return out


def numeric_grad(loss, a):
    """Central differences of the scalar ``loss()`` with respect to every element of ``a`` (changed in place)."""
    grad = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        keep = a[idx]
        a[idx] = keep + EPS
        up = loss()
        a[idx] = keep - EPS
        down = loss()
        a[idx] = keep
        grad[idx] = (up - down) / (2 * EPS)
    return grad


def assert_grad(analytic, numeric):
    # atol only for entries whose true gradient is ~0 (rounding of the loss leaves ~1e-10 there)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-8)


# ---- conv2d --------------------------------------------------------------------------------------------------
CONV_CASES = [  # x shape, w shape, stride, padding
    ((2, 3, 5, 5), (4, 3, 3, 3), 1, 0),
    ((2, 3, 5, 5), (4, 3, 3, 3), 2, 1),
    ((2, 3, 7, 5), (2, 3, 3, 2), 2, 0),     # non-square input and kernel; a row and column no window reaches
    ((1, 2, 6, 9), (3, 2, 4, 3), 3, 2),
    ((3, 1, 4, 4), (5, 1, 1, 1), 1, 0),     # 1x1 kernel
    ((2, 2, 3, 2), (1, 2, 5, 4), 1, 1),     # kernel exactly the padded input
    ((2, 4, 8, 6), (3, 4, 3, 3), 1, 1),
    ((2, 3, 4, 5), (2, 3, 1, 1), 1, 1),     # padding past the kernel: the input gradient sums patches back
]
CONV_IDS = [f"x{x}-w{w}-s{s}-p{p}" for x, w, s, p in CONV_CASES]


@pytest.mark.parametrize(("x_shape", "w_shape", "stride", "padding"), CONV_CASES, ids=CONV_IDS)
def test_conv2d_equals_naive_loops(x_shape, w_shape, stride, padding):
    x, w = RNG.standard_normal(x_shape), RNG.standard_normal(w_shape)
    got = conv2d(x, w, stride, padding)
    assert got.dtype == np.float64 and got.flags.c_contiguous
    np.testing.assert_allclose(got, naive_conv2d(x, w, stride, padding), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("x_shape", "w_shape", "stride", "padding"), CONV_CASES[:4], ids=CONV_IDS[:4])
def test_conv2d_float32(x_shape, w_shape, stride, padding):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal(w_shape).astype(np.float32)
    got = conv2d(x, w, stride=stride, padding=padding)
    assert got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_allclose(got, naive_conv2d(x, w, stride, padding), rtol=1e-4, atol=1e-5)
    g = RNG.standard_normal(got.shape).astype(np.float32)
    assert conv2d_grad_input(g, w, x.shape, stride, padding).dtype == np.float32
    assert conv2d_grad_weight(g, x, w.shape, stride, padding).dtype == np.float32


def test_conv2d_of_integers_is_float64():
    x = np.arange(2 * 1 * 4 * 4).reshape(2, 1, 4, 4)
    w = np.ones((1, 1, 2, 2), np.int32)
    got = conv2d(x, w)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, naive_conv2d(x, w, 1, 0))


@pytest.mark.parametrize(("x_shape", "w_shape", "stride", "padding"), CONV_CASES, ids=CONV_IDS)
def test_conv2d_gradients_match_finite_differences(x_shape, w_shape, stride, padding):
    x, w = RNG.standard_normal(x_shape), RNG.standard_normal(w_shape)
    r = RNG.standard_normal(conv2d(x, w, stride, padding).shape)
    loss = lambda: np.sum(conv2d(x, w, stride, padding) * r)
    dx = conv2d_grad_input(r, w, x_shape, stride, padding)
    dw = conv2d_grad_weight(r, x, w_shape, stride, padding)
    assert dx.shape == x_shape and dx.flags.c_contiguous
    assert dw.shape == w_shape and dw.flags.c_contiguous
    assert_grad(dx, numeric_grad(loss, x))
    assert_grad(dw, numeric_grad(loss, w))


def test_conv2d_inputs_are_not_changed():
    x, w = RNG.standard_normal((2, 3, 5, 5)), RNG.standard_normal((4, 3, 3, 3))
    x0, w0 = x.copy(), w.copy()
    g = conv2d(x, w, 2, 1)
    g0 = g.copy()
    conv2d_grad_input(g, w, x.shape, 2, 1)
    conv2d_grad_weight(g, x, w.shape, 2, 1)
    for a, a0 in ((x, x0), (w, w0), (g, g0)):
        np.testing.assert_array_equal(a, a0)


# ---- pooling -------------------------------------------------------------------------------------------------
POOL_CASES = [  # x shape, size, stride
    ((2, 3, 4, 4), 2, None),
    ((2, 2, 7, 5), 2, None),    # odd sizes: the last row and column are dropped
    ((1, 2, 7, 6), 3, 2),       # overlapping windows
    ((2, 1, 5, 5), 2, 1),
    ((1, 2, 6, 8), 3, 3),
    ((1, 1, 3, 3), 3, None),    # one window covering everything
]
POOL_IDS = [f"x{x}-k{k}-s{s}" for x, k, s in POOL_CASES]


def distinct(shape):
    """Values far apart (no ties, no change of the argmax under a step of EPS), in random order."""
    return (RNG.permutation(int(np.prod(shape))) * 0.1 + RNG.uniform(0, 0.01)).reshape(shape)


@pytest.mark.parametrize(("x_shape", "size", "stride"), POOL_CASES, ids=POOL_IDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pool_forward_equals_naive_loops(x_shape, size, stride, dtype):
    x = RNG.standard_normal(x_shape).astype(dtype)
    for fn, reduce in ((max_pool2d, np.max), (avg_pool2d, np.mean)):
        got = fn(x, size, stride)
        assert got.dtype == dtype and got.flags.c_contiguous
        rtol = 1e-6 if dtype == np.float32 else 1e-13
        np.testing.assert_allclose(got, naive_pool(x, size, stride, reduce), rtol=rtol)


@pytest.mark.parametrize(("x_shape", "size", "stride"), POOL_CASES, ids=POOL_IDS)
def test_max_pool2d_grad_matches_finite_differences(x_shape, size, stride):
    x = distinct(x_shape)
    r = RNG.standard_normal(max_pool2d(x, size, stride).shape)
    dx = max_pool2d_grad(r, x, size, stride)
    assert dx.shape == x_shape and dx.flags.c_contiguous
    assert_grad(dx, numeric_grad(lambda: np.sum(max_pool2d(x, size, stride) * r), x))


@pytest.mark.parametrize(("x_shape", "size", "stride"), POOL_CASES, ids=POOL_IDS)
def test_avg_pool2d_grad_matches_finite_differences(x_shape, size, stride):
    x = RNG.standard_normal(x_shape)
    r = RNG.standard_normal(avg_pool2d(x, size, stride).shape)
    dx = avg_pool2d_grad(r, x_shape, size, stride)
    assert dx.shape == x_shape and dx.flags.c_contiguous
    assert_grad(dx, numeric_grad(lambda: np.sum(avg_pool2d(x, size, stride) * r), x))


def test_max_pool2d_grad_ties_go_to_the_first_maximum_row_major():
    x = np.zeros((1, 1, 3, 4))
    x[0, 0, 1, 0] = x[0, 0, 0, 1] = 5.0           # a tie in the first window: (0, 1) comes first row-major
    g = np.array([[[[1.0, 2.0]]]])
    dx = max_pool2d_grad(g, x, 2)
    want = np.zeros_like(x)
    want[0, 0, 0, 1] = 1.0
    want[0, 0, 0, 2] = 2.0                        # an all-zero window: its first element
    np.testing.assert_array_equal(dx, want)


def test_max_pool2d_grad_sums_where_windows_overlap():
    x = np.zeros((1, 1, 3, 3))
    x[0, 0, 1, 1] = 1.0                           # the maximum of all four 2x2 windows (stride 1)
    g = np.array([[[[1.0, 2.0], [3.0, 4.0]]]])
    dx = max_pool2d_grad(g, x, 2, 1)
    want = np.zeros_like(x)
    want[0, 0, 1, 1] = 10.0
    np.testing.assert_array_equal(dx, want)


def test_max_pool2d_nan_is_the_maximum():
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    x[0, 0, 1, 0] = np.nan
    assert np.isnan(max_pool2d(x)[0, 0, 0, 0])
    dx = max_pool2d_grad(np.ones((1, 1, 2, 2)), x)
    assert dx[0, 0, 1, 0] == 1.0 and dx[0, 0, 1, 1] == 0.0


def test_pool_grad_dtypes():
    x = RNG.standard_normal((2, 2, 4, 4)).astype(np.float32)
    g = np.ones((2, 2, 2, 2), np.float32)
    assert max_pool2d_grad(g, x).dtype == np.float32
    assert avg_pool2d_grad(g, x.shape).dtype == np.float32
    assert max_pool2d(np.arange(16).reshape(1, 1, 4, 4)).dtype == np.float64


# ---- errors --------------------------------------------------------------------------------------------------
ERRORS = [
    (lambda: conv2d(np.ones((3, 4)), np.ones((1, 1, 1, 1))),
     "conv2d: x must be 4-D (N, C, H, W), got shape (3, 4)"),
    (lambda: conv2d(np.ones((1, 2, 4, 4)), np.ones((2, 3, 3))),
     "conv2d: w must be 4-D (F, C, KH, KW), got shape (2, 3, 3)"),
    (lambda: conv2d(np.ones((1, 2, 4, 4)), np.ones((5, 3, 3, 3))),
     "conv2d: x has 2 channels but w has 3 (x shape (1, 2, 4, 4), w shape (5, 3, 3, 3))"),
    (lambda: conv2d(np.ones((1, 2, 4, 4)), np.ones((5, 2, 5, 3))),
     "conv2d: kernel 5x3 is larger than the padded input 4x4 (x shape (1, 2, 4, 4), padding 0)"),
    (lambda: conv2d(np.ones((1, 2, 3, 3)), np.ones((5, 2, 6, 3)), padding=1),
     "conv2d: kernel 6x3 is larger than the padded input 5x5 (x shape (1, 2, 3, 3), padding 1)"),
    (lambda: conv2d(np.ones((1, 2, 4, 4)), np.ones((5, 2, 3, 3)), stride=0),
     "conv2d: stride must be a positive int, got 0"),
    (lambda: conv2d(np.ones((1, 2, 4, 4)), np.ones((5, 2, 3, 3)), stride=1.5),
     "conv2d: stride must be a positive int, got 1.5"),
    (lambda: conv2d(np.ones((1, 2, 4, 4)), np.ones((5, 2, 3, 3)), padding=-1),
     "conv2d: padding must be a non-negative int, got -1"),
    (lambda: conv2d_grad_input(np.ones((1, 5, 2, 2)), np.ones((5, 2, 3, 3)), (1, 2, 4)),
     "conv2d_grad_input: x_shape must be 4-D (N, C, H, W), got shape (1, 2, 4)"),
    (lambda: conv2d_grad_input(np.ones((1, 5, 3, 2)), np.ones((5, 2, 3, 3)), (1, 2, 4, 4)),
     "conv2d_grad_input: g has shape (1, 5, 3, 2), expected (1, 5, 2, 2) (conv2d's output for x shape "
     "(1, 2, 4, 4), w shape (5, 2, 3, 3), stride 1, padding 0)"),
    (lambda: conv2d_grad_input(np.ones((1, 5, 2, 2)), np.ones((5, 2, 3, 3)), (1, 2, 4, 4), stride=-2),
     "conv2d_grad_input: stride must be a positive int, got -2"),
    (lambda: conv2d_grad_weight(np.ones((1, 5, 2, 2)), np.ones((1, 3, 4, 4)), (5, 2, 3, 3)),
     "conv2d_grad_weight: x has 3 channels but w has 2 (x shape (1, 3, 4, 4), w shape (5, 2, 3, 3))"),
    (lambda: conv2d_grad_weight(np.ones((1, 4, 2, 2)), np.ones((1, 2, 4, 4)), (5, 2, 3, 3)),
     "conv2d_grad_weight: g has shape (1, 4, 2, 2), expected (1, 5, 2, 2) (conv2d's output for x shape "
     "(1, 2, 4, 4), w shape (5, 2, 3, 3), stride 1, padding 0)"),
    (lambda: max_pool2d(np.ones((4, 4))),
     "max_pool2d: x must be 4-D (N, C, H, W), got shape (4, 4)"),
    (lambda: max_pool2d(np.ones((1, 1, 4, 2)), 3),
     "max_pool2d: window 3x3 is larger than the input 4x2 (x shape (1, 1, 4, 2))"),
    (lambda: max_pool2d(np.ones((1, 1, 4, 4)), 0),
     "max_pool2d: size must be a positive int, got 0"),
    (lambda: max_pool2d(np.ones((1, 1, 4, 4)), 2, 0),
     "max_pool2d: stride must be a positive int, got 0"),
    (lambda: max_pool2d_grad(np.ones((1, 1, 3, 3)), np.ones((1, 1, 4, 4))),
     "max_pool2d_grad: g has shape (1, 1, 3, 3), expected (1, 1, 2, 2) (max_pool2d's output for x shape "
     "(1, 1, 4, 4), size 2, stride 2)"),
    (lambda: avg_pool2d(np.ones((1, 1, 4, 4)), 2, True),
     "avg_pool2d: stride must be a positive int, got True"),
    (lambda: avg_pool2d_grad(np.ones((1, 1, 2, 2)), (4, 4)),
     "avg_pool2d_grad: x_shape must be 4-D (N, C, H, W), got shape (4, 4)"),
    (lambda: avg_pool2d_grad(np.ones((1, 1, 2, 2)), (1, 1, 4, 4), 2, 1),
     "avg_pool2d_grad: g has shape (1, 1, 2, 2), expected (1, 1, 3, 3) (avg_pool2d's output for x shape "
     "(1, 1, 4, 4), size 2, stride 1)"),
]


@pytest.mark.parametrize(("call", "message"), ERRORS, ids=[m.split(":")[0] + str(i) for i, (_, m) in enumerate(ERRORS)])
def test_error_messages(call, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        call()


# ---- registry ------------------------------------------------------------------------------------------------
NAMES = ["conv2d", "conv2d_grad_input", "conv2d_grad_weight", "max_pool2d", "max_pool2d_grad", "avg_pool2d",
         "avg_pool2d_grad"]


@pytest.mark.parametrize("name", NAMES)
def test_registered(name):
    fn = getattr(conv_ops, name)
    prim = lookup(f"nn.{name}")
    assert prim.kernel is fn
    assert prim.label == f"nn.{name}"
    assert prim.effect is None  # pure
    assert name_of(fn) == f"nn.{name}"


@pytest.mark.parametrize(("x_shape", "size", "stride"), POOL_CASES + [((64, 16, 8, 8), 2, None)],
                         ids=POOL_IDS + ["digits-cnn"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool2d_grad_numba_kernel_is_the_numpy_kernels_answer(x_shape, size, stride, dtype):
    """The registered Numba alternative (conv_ops.MaxPoolGradKernel, what the primitive runs on float arrays)
    sends each window's gradient where the NumPy kernel does: ties to the first maximum row-major, a NaN first;
    where windows do not overlap the result is the same to the bit."""
    from phylanx_py.primitives.registry import choose

    x = RNG.integers(-2, 3, x_shape).astype(dtype)  # small integers: many ties
    x.flat[::13] = np.nan
    g = RNG.standard_normal(max_pool2d(x, size, stride).shape).astype(dtype)
    kernel = choose(lookup("nn.max_pool2d_grad"), (g, x, size, stride), {})
    assert isinstance(kernel, conv_ops.MaxPoolGradKernel)
    got, want = kernel(g, x, size, stride), max_pool2d_grad(g, x, size, stride)
    assert got.dtype == want.dtype == dtype and got.flags.c_contiguous
    if (stride or size) >= size:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-13, atol=1e-6)
    # integers, mixed dtypes and wrong shapes are the NumPy kernel's (it promotes and raises the errors)
    assert not kernel.accepts(g, x.astype(np.int64), size, stride)
    assert not kernel.accepts(g.astype(np.float16), x, size, stride)
    assert not kernel.accepts(np.zeros(g.shape[:3] + (g.shape[3] + 1,), dtype), x, size, stride)


# ---- nn.conv2d in two steps (primitives/conv_patches.py) ---------------------------------------------------------
@pytest.mark.parametrize(("x_shape", "w_shape", "stride", "padding"), CONV_CASES, ids=CONV_IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_patches_then_gemm_is_conv2d_and_its_gradients_to_the_bit(x_shape, w_shape, stride, padding, dtype):
    """conv2d_from_patches(conv2d_patches(x)) is conv2d(x); px.grad through the two steps gives conv2d's
    gradients (conv2d_grad_input, conv2d_grad_weight) to the bit, and its tree gathers the patches once: one
    nn.conv2d_patches node, read by the forward GEMM and by the weight gradient (nn.conv2d_grad_weight, which
    gathers them again, is not in it), and one nn.conv2d_grad_rows node read by both gradients. The input's
    gradient is one nn.conv2d_grad_input_rows call (the patch gradients and their sum absorbed into it)."""
    from phylanx_py.primitives.registry import apply

    import phylanx_py as px

    x, w = RNG.standard_normal(x_shape).astype(dtype), RNG.standard_normal(w_shape).astype(dtype)
    cols = apply("nn.conv2d_patches", x, w_shape, stride, padding)
    np.testing.assert_array_equal(apply("nn.conv2d_from_patches", cols, w, x_shape, stride, padding),
                                  conv2d(x, w, stride, padding))

    def one_step(x, w):
        return np.sum(np.sin(apply("nn.conv2d", x, w, stride, padding)))

    def two_steps(x, w):
        cols = apply("nn.conv2d_patches", x, np.shape(w), stride, padding)
        return np.sum(np.sin(apply("nn.conv2d_from_patches", cols, w, np.shape(x), stride, padding)))

    grad = px.grad(two_steps, argnums=(0, 1))
    got, want = grad(x, w), px.grad(one_step, argnums=(0, 1))(x, w)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype == dtype
        np.testing.assert_array_equal(a, b)
    text = str(grad.tree)
    assert text.count("nn.conv2d_patches@") == 1 and text.count("nn.conv2d_grad_rows@") == 1
    assert "nn.conv2d_grad_weight@" not in text and "nn.conv2d_grad_weight_rows@" in text
    patches = re.search(r"define\((\w+), nn\.conv2d_patches@", text).group(1)
    assert re.search(rf"nn\.conv2d_grad_weight_rows@[\d:]+\(\w+, {patches},", text)  # the forward's patches
    assert text.count("nn.conv2d_grad_input_rows@") == 1
    assert "nn.conv2d_patches_grad@" not in text and "nn.conv2d_grad_patches@" not in text


def test_conv2d_layer_trains_on_the_two_steps():
    """nn.Conv2D applies itself as the two steps: its output is conv2d's plus the bias."""
    from phylanx_py import nn

    model = nn.Sequential([nn.Conv2D(2, 3, 3, padding=1), nn.Flatten()], dtype=np.float64).build((2, 5, 5), seed=1)
    x = RNG.standard_normal((4, 2, 5, 5))
    p = model.params[0]
    want = (conv2d(x, p["W"], 1, 1) + p["b"][None, :, None, None]).reshape(4, -1)
    np.testing.assert_array_equal(model.predict(x), want)


@pytest.mark.parametrize(("x_shape", "w_shape", "stride", "padding"), CONV_CASES, ids=CONV_IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_input_gradient_absorbed_is_the_patch_gradients_summed(x_shape, w_shape, stride, padding, dtype):
    """nn.conv2d_grad_input_rows (a convolution of the gradient at stride 1) is the patch gradients summed back
    (conv2d_patches_grad of conv2d_grad_patches, the pair it stands for) up to rounding, and both are the naive
    loops' gradient of conv2d; a wrong w_shape is an error, not another convolution."""
    from phylanx_py.primitives import conv_patches as cp

    x, w = RNG.standard_normal(x_shape).astype(dtype), RNG.standard_normal(w_shape).astype(dtype)
    g = RNG.standard_normal(conv2d(x, w, stride, padding).shape).astype(dtype)
    rows = cp.conv2d_grad_rows(g)
    two = cp.conv2d_patches_grad(cp.conv2d_grad_patches(rows, w), x_shape, w_shape, stride, padding)
    one = cp.conv2d_grad_input_rows(rows, w, x_shape, w_shape, stride, padding)
    assert one.dtype == two.dtype == dtype and one.shape == x_shape
    # at stride 1 (padding below the kernel) an NCHW view of NHWC memory, what the next ReLU and conv2d_grad_rows
    # read without transposing copies; the summed patches are C-contiguous NCHW
    convolved = stride == 1 and padding <= min(w_shape[2:]) - 1
    assert (one.transpose(0, 2, 3, 1) if convolved else one).flags.c_contiguous
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(one, two, rtol=tol, atol=tol * 10)
    # against the naive loops: d/dx of sum(g * conv(x, w)) is sum over outputs of g times w at each tap
    f, _, kh, kw = w_shape
    xp = np.zeros((x_shape[0], x_shape[1], x_shape[2] + 2 * padding, x_shape[3] + 2 * padding))
    for a in range(g.shape[2]):
        for b in range(g.shape[3]):
            r, c = a * stride, b * stride
            xp[:, :, r:r + kh, c:c + kw] += np.einsum("nf,fcij->ncij", g[:, :, a, b].astype(np.float64), w)
    want = xp[:, :, padding:padding + x_shape[2], padding:padding + x_shape[3]]
    np.testing.assert_allclose(one, want, rtol=tol * 10, atol=tol * 10)
    with pytest.raises(ValueError, match="w_shape says"):
        cp.conv2d_grad_input_rows(rows, w, x_shape, (f + 1,) + tuple(w_shape[1:]), stride, padding)


@pytest.mark.parametrize(("x_shape", "w_shape", "stride", "padding"), CONV_CASES, ids=CONV_IDS)
def test_bias_added_to_the_pixel_rows_is_the_broadcast_add(x_shape, w_shape, stride, padding):
    """nn.conv2d_from_patches_bias is conv2d plus the bias broadcast over (N, OH, OW), to the bit (the same sums);
    px.grad through it gives the gradients of the broadcast add: the bias's summed over the gradient's pixel rows
    (nn.conv2d_grad_bias_rows, up to the order of the sum), no sum over axes (0, 2, 3) in the tree; a bias of
    another length is an error naming both."""
    from phylanx_py.primitives import conv_patches as cp
    from phylanx_py.primitives.registry import apply

    import phylanx_py as px

    x, w = RNG.standard_normal(x_shape).astype(np.float32), RNG.standard_normal(w_shape).astype(np.float32)
    b = RNG.standard_normal(w_shape[0]).astype(np.float32)
    cols = apply("nn.conv2d_patches", x, w_shape, stride, padding)
    got = apply("nn.conv2d_from_patches_bias", cols, w, b, x_shape, stride, padding)
    want = conv2d(x, w, stride, padding) + b[None, :, None, None]
    # an NCHW view of NHWC memory: a ReLU of it keeps that order, and the next layer's patches and the gradient's
    # pixel rows read it without a transposing copy
    assert got.dtype == np.float32 and got.transpose(0, 2, 3, 1).flags.c_contiguous
    assert np.maximum(got, 0.0).transpose(0, 2, 3, 1).flags.c_contiguous
    assert np.shares_memory(cp.conv2d_grad_rows(got), got)  # the rows read as they are
    np.testing.assert_array_equal(got, want)
    # a float64 bias promotes the sum as ``y + b`` does (the product stays float32)
    np.testing.assert_array_equal(apply("nn.conv2d_from_patches_bias", cols, w, b.astype(np.float64), x_shape,
                                        stride, padding), conv2d(x, w, stride, padding) + b[None, :, None, None]
                                  .astype(np.float64))

    def rows_bias(x, w, b):
        cols = apply("nn.conv2d_patches", x, np.shape(w), stride, padding)
        return np.sum(np.sin(apply("nn.conv2d_from_patches_bias", cols, w, b, np.shape(x), stride, padding)))

    def broadcast(x, w, b):
        return np.sum(np.sin(apply("nn.conv2d", x, w, stride, padding) + np.reshape(b, (1, -1, 1, 1))))

    grad, grad_broadcast = px.grad(rows_bias, argnums=(0, 1, 2)), px.grad(broadcast, argnums=(0, 1, 2))
    got, want = grad(x, w, b), grad_broadcast(x, w, b)
    for a, c in zip(got[:2], want[:2]):
        np.testing.assert_array_equal(a, c)
    assert got[2].dtype == np.float32 and got[2].shape == b.shape
    np.testing.assert_allclose(got[2], want[2], rtol=1e-4, atol=1e-4)
    text = str(grad.tree)
    assert text.count("nn.conv2d_grad_bias_rows@") == 1 and text.count("nn.conv2d_grad_rows@") == 1
    assert "keepdims=True" in str(grad_broadcast.tree) and "keepdims" not in text  # no sum over (0, 2, 3)
    with pytest.raises(ValueError, match=rf"b has shape \({w_shape[0] + 1},\), the weights have {w_shape[0]} filters"):
        apply("nn.conv2d_from_patches_bias", cols, w, np.append(b, b[:1]), x_shape, stride, padding)


@pytest.mark.parametrize(("x_shape", "k", "stride"), [((3, 1, 4, 4), (1, 1), 1), ((2, 1, 8, 8), (3, 3), 1),
                                                       ((2, 1, 7, 5), (3, 2), 1), ((2, 1, 7, 5), (3, 2), 2),
                                                       ((2, 2, 6, 6), (3, 3), 1)])
def test_im2col_of_one_channel_copies_the_window_views_patches(x_shape, k, stride):
    """One channel at stride 1 takes shifted-plane copies instead of the window view's copy: the same patches,
    in the same column order, as the window view gives them."""
    from numpy.lib.stride_tricks import sliding_window_view
    from phylanx_py.primitives.conv_ops import _im2col, _nhwc_padded

    xp = _nhwc_padded(RNG.standard_normal(x_shape), 1)
    windows = sliding_window_view(xp, k, axis=(1, 2))[:, ::stride, ::stride]
    n, oh, ow, c = windows.shape[:4]
    want = windows.transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, k[0] * k[1] * c)
    got = _im2col(xp, k[0], k[1], stride)
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
