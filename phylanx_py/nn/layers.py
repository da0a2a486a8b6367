"""Layers: each owns its parameter shapes and initialisation and applies itself with NumPy functions only, so the
same code runs on arrays, on tiled arrays and on traced values (px.grad records it into the gradient's tree).

``layer.init(rng, in_shape, dtype) -> (params, state, out_shape)`` (shapes without the batch axis; ``dtype`` the
model's, for parameters the layer was not given a dtype of its own);
``layer.apply(params, state, x, noise, training) -> (y, new_state)``. ``noise`` is the layer's uniform random
array for this step (Dropout), drawn by the model from its seeded generator outside the traced function, so the
tree is reused from step to step and training stays deterministic for a seed.
"""
from __future__ import annotations

import numpy as np

from phylanx_py.primitives.registry import apply as _prim

from . import functional as F


class Layer:
    noise_shape = None  # a Layer that needs random numbers says so (Dropout)

    def init(self, rng, in_shape, dtype=np.float32):
        return {}, {}, tuple(in_shape)

    def apply(self, params, state, x, noise, training):
        raise NotImplementedError

    def param_dtype(self, dtype):
        """The dtype of this layer's parameters: its own ``dtype`` when given, else the model's."""
        own = getattr(self, "dtype", None)
        return np.dtype(own if own is not None else dtype)

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


def _check_in(layer, in_shape, want: int):
    if len(in_shape) != want:
        raise ValueError(f"{type(layer).__name__} takes inputs of {want} axes (after the batch axis), "
                         f"got shape {tuple(in_shape)}")


class Dense(Layer):
    """``x @ W + b``; W drawn from He-uniform (ReLU networks) or Glorot-uniform (``init='glorot'``)."""

    def __init__(self, n_in: int, n_out: int, init: str = "he", dtype=None):
        self.n_in, self.n_out, self.init_kind = int(n_in), int(n_out), init
        self.dtype = None if dtype is None else np.dtype(dtype)  # None: the model's (Sequential.build)

    def init(self, rng, in_shape, dtype=np.float32):
        _check_in(self, in_shape, 1)
        if in_shape[0] != self.n_in:
            raise ValueError(f"Dense({self.n_in}, {self.n_out}) got inputs of {in_shape[0]} features")
        fan = 6.0 / self.n_in if self.init_kind == "he" else 6.0 / (self.n_in + self.n_out)
        bound = np.sqrt(fan)
        dt = self.param_dtype(dtype)
        W = rng.uniform(-bound, bound, size=(self.n_in, self.n_out)).astype(dt)
        return {"W": W, "b": np.zeros(self.n_out, dt)}, {}, (self.n_out,)

    def apply(self, params, state, x, noise, training):
        return x @ params["W"] + params["b"], state


class Conv2D(Layer):
    """2-D convolution of NCHW inputs (cross-correlation, as PyTorch's): im2col + one GEMM (primitives/conv_ops)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3, stride: int = 1, padding: int = 0,
                 dtype=None):
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size, self.stride, self.padding = int(kernel_size), int(stride), int(padding)
        self.dtype = None if dtype is None else np.dtype(dtype)  # None: the model's (Sequential.build)

    def init(self, rng, in_shape, dtype=np.float32):
        _check_in(self, in_shape, 3)
        c, h, w = in_shape
        if c != self.in_channels:
            raise ValueError(f"Conv2D({self.in_channels}, ...) got inputs of {c} channels")
        k = self.kernel_size
        bound = np.sqrt(6.0 / (c * k * k))
        dt = self.param_dtype(dtype)
        W = rng.uniform(-bound, bound, size=(self.out_channels, c, k, k)).astype(dt)
        oh = (h + 2 * self.padding - k) // self.stride + 1
        ow = (w + 2 * self.padding - k) // self.stride + 1
        if oh < 1 or ow < 1:
            raise ValueError(f"Conv2D kernel {k} does not fit inputs of {h}x{w} with padding {self.padding}")
        return {"W": W, "b": np.zeros(self.out_channels, dt)}, {}, (self.out_channels, oh, ow)

    def apply(self, params, state, x, noise, training):
        # nn.conv2d as its two steps (primitives/conv_patches.py): traced, the patches are a node the weight
        # gradient reads too, instead of gathering them again; the bias is added (and its gradient summed) in
        # the GEMM's pixel-row layout
        W = params["W"]
        cols = _prim("nn.conv2d_patches", x, np.shape(W), self.stride, self.padding)
        return _prim("nn.conv2d_from_patches_bias", cols, W, params["b"], np.shape(x), self.stride,
                     self.padding), state


class _Pool(Layer):
    prim = ""

    def __init__(self, size: int = 2, stride: int | None = None):
        self.size, self.stride = int(size), (int(stride) if stride is not None else None)

    def init(self, rng, in_shape, dtype=np.float32):
        _check_in(self, in_shape, 3)
        c, h, w = in_shape
        s = self.stride or self.size
        return {}, {}, (c, (h - self.size) // s + 1, (w - self.size) // s + 1)

    def apply(self, params, state, x, noise, training):
        return _prim(self.prim, x, self.size, self.stride), state


class MaxPool2D(_Pool):
    prim = "nn.max_pool2d"


class AvgPool2D(_Pool):
    prim = "nn.avg_pool2d"


class Flatten(Layer):
    def init(self, rng, in_shape, dtype=np.float32):
        return {}, {}, (int(np.prod(in_shape)),)

    def apply(self, params, state, x, noise, training):
        return np.reshape(x, (np.shape(x)[0], -1)), state


class ReLU(Layer):
    def apply(self, params, state, x, noise, training):
        return np.maximum(x, 0.0), state


class Sigmoid(Layer):
    def apply(self, params, state, x, noise, training):
        return F.sigmoid(x), state


class Tanh(Layer):
    def apply(self, params, state, x, noise, training):
        return np.tanh(x), state


class Softmax(Layer):
    def apply(self, params, state, x, noise, training):
        return F.softmax(x, axis=-1), state


class Dropout(Layer):
    """Zeroes each input with probability ``rate`` while training (inverted dropout: survivors scaled by
    1/(1-rate)), the identity at evaluation. The random numbers come from the model's seeded generator."""

    def __init__(self, rate: float = 0.5):
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"Dropout rate must be in [0, 1), got {rate}")
        self.rate = float(rate)

    def init(self, rng, in_shape, dtype=np.float32):
        self.noise_shape = tuple(in_shape)
        return {}, {}, tuple(in_shape)

    def apply(self, params, state, x, noise, training):
        if not training or self.rate == 0.0:
            return x, state
        return x * (noise >= self.rate) * (1.0 / (1.0 - self.rate)), state


class BatchNorm(Layer):
    """Batch normalisation over the batch axis (and the spatial axes of NCHW inputs): batch statistics while
    training, running averages (``momentum``) at evaluation; learnt scale ``gamma`` and shift ``beta``."""

    def __init__(self, features: int, momentum: float = 0.1, eps: float = 1e-5, dtype=None):
        self.features, self.momentum, self.eps = int(features), float(momentum), float(eps)
        self.dtype = None if dtype is None else np.dtype(dtype)  # None: the model's (Sequential.build)

    def init(self, rng, in_shape, dtype=np.float32):
        if in_shape[0] != self.features:
            raise ValueError(f"BatchNorm({self.features}) got inputs of {in_shape[0]} features/channels")
        self._axes = (0,) if len(in_shape) == 1 else (0, 2, 3)
        self._shape = (1, self.features) if len(in_shape) == 1 else (1, self.features, 1, 1)
        f, dt = self.features, self.param_dtype(dtype)
        return ({"gamma": np.ones(f, dt), "beta": np.zeros(f, dt)},
                {"mean": np.zeros(f, dt), "var": np.ones(f, dt)}, tuple(in_shape))

    def apply(self, params, state, x, noise, training):
        if training:
            mean = np.mean(x, axis=self._axes, keepdims=True)
            var = np.mean((x - mean) ** 2, axis=self._axes, keepdims=True)
            m = self.momentum
            new_state = {"mean": (1 - m) * state["mean"] + m * np.reshape(mean, (-1,)),
                         "var": (1 - m) * state["var"] + m * np.reshape(var, (-1,))}
        else:
            mean, var = np.reshape(state["mean"], self._shape), np.reshape(state["var"], self._shape)
            new_state = state
        xhat = (x - mean) / np.sqrt(var + self.eps)
        return xhat * np.reshape(params["gamma"], self._shape) + np.reshape(params["beta"], self._shape), new_state
