"""The steps benchmarks/train_fit.py times ``Sequential.fit`` against: hand-written NumPy, and JAX (``jax.jit``).

Both models of that benchmark, in float32: simplemlp (Dense/ReLU, any widths) and the digits CNN of
examples/digits.py (Conv2D 3x3 padding 1, ReLU, Conv2D 3x3 padding 1, ReLU, MaxPool2D 2, Flatten, Dense). A
trainer holds the weights (the list ``[W0, b0, W1, b1, ...]`` of the model's layers, in the layers' own layouts:
Dense W is (in, out), Conv2D W is (F, C, KH, KW)) and the SGD momentum buffers, and ``trainer.step(Xb, Yb)`` does
one step: forward, mean softmax cross-entropy, backward, ``v = momentum * v + g; p -= lr * v`` (optim.SGD's
update), and returns (loss, number of rows whose largest logit is the label), which is what ``fit`` computes per
step too. ``trainer.weights()`` gives the current weights as NumPy arrays.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


# ---- NumPy ---------------------------------------------------------------------------------------------------
def softmax_ce(logits, labels):
    """(mean cross-entropy, its gradient with respect to the logits)."""
    n = len(labels)
    rows = np.arange(n)
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    loss = float(np.mean(np.log(s[:, 0])) - np.mean(z[rows, labels]))
    g = e
    g /= s
    g[rows, labels] -= 1
    g /= n
    return loss, g


class NumpyTrainer:
    def __init__(self, weights, lr: float, momentum: float):
        self.p = [np.array(w, dtype=np.float32) for w in weights]
        self.v = [np.zeros_like(w) for w in self.p]
        self.lr, self.momentum = np.float32(lr), np.float32(momentum)

    def weights(self):
        return [w.copy() for w in self.p]

    def update(self, grads):
        for p, v, g in zip(self.p, self.v, grads):
            v *= self.momentum
            v += g
            p -= self.lr * v


class NumpyMLP(NumpyTrainer):
    """Dense/ReLU layers, the last without ReLU; backward by hand."""

    def step(self, X, labels):
        Ws, bs = self.p[0::2], self.p[1::2]
        acts, h = [X], X
        for W, b in zip(Ws[:-1], bs[:-1]):
            h = h @ W
            h += b
            np.maximum(h, 0, out=h)
            acts.append(h)
        logits = h @ Ws[-1]
        logits += bs[-1]
        loss, g = softmax_ce(logits, labels)
        grads = [None] * len(self.p)
        for i in reversed(range(len(Ws))):
            a = acts[i]
            grads[2 * i] = a.T @ g
            grads[2 * i + 1] = g.sum(axis=0)
            if i:
                g = g @ Ws[i].T
                g *= a > 0  # through the ReLU that made a
        self.update(grads)
        return loss, int(np.count_nonzero(logits.argmax(axis=1) == labels))


def conv_same(x, W, b):
    """Stride-1 'same' convolution (cross-correlation, padding KH // 2) of x (C, H, W, N) with W (F, C, KH, KW):
    y (F, H, W, N) and the im2col patches (C*KH*KW, H*W*N) for the backward pass. The batch axis last makes each
    copied patch row H*W*N long (conv_ops.py does the same inside its NCHW primitive)."""
    c, h, w, n = x.shape
    f, _, k, _ = W.shape
    p = k // 2
    xp = np.zeros((c, h + 2 * p, w + 2 * p, n), x.dtype)
    xp[:, p:p + h, p:p + w] = x
    cols = sliding_window_view(xp, (k, k), axis=(1, 2)).transpose(0, 4, 5, 1, 2, 3).reshape(c * k * k, h * w * n)
    y = (W.reshape(f, -1) @ cols).reshape(f, h, w, n)
    y += b[:, None, None, None]
    return y, cols


def conv_same_backward(gy, cols, W, x_shape, need_dx: bool):
    """Gradients (dx or None, dW, db) of ``conv_same`` given gy (F, H, W, N)."""
    c, h, w, n = x_shape
    f, _, k, _ = W.shape
    p = k // 2
    g2 = gy.reshape(f, -1)
    dW = (g2 @ cols.T).reshape(W.shape)
    db = g2.sum(axis=1)
    if not need_dx:
        return None, dW, db
    dcols = (W.reshape(f, -1).T @ g2).reshape(c, k, k, h, w, n)
    dxp = np.zeros((c, h + 2 * p, w + 2 * p, n), gy.dtype)
    for i in range(k):
        for j in range(k):
            dxp[:, i:i + h, j:j + w] += dcols[:, i, j]
    return dxp[:, p:p + h, p:p + w], dW, db


def maxpool2(x):
    """2x2 max pooling of x (C, H, W, N) (H, W even): (pooled (C, H/2, W/2, N), the argmax in each window)."""
    c, h, w, n = x.shape
    win = x.reshape(c, h // 2, 2, w // 2, 2, n).transpose(0, 1, 3, 5, 2, 4).reshape(c, h // 2, w // 2, n, 4)
    arg = win.argmax(axis=-1)  # the first maximum, row-major, as max_pool2d_grad picks
    return np.take_along_axis(win, arg[..., None], axis=-1)[..., 0], arg


def maxpool2_backward(g, arg):
    c, h2, w2, n = g.shape
    dwin = (arg[..., None] == np.arange(4)) * g[..., None]  # (C, H/2, W/2, N, 4)
    return dwin.reshape(c, h2, w2, n, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(c, 2 * h2, 2 * w2, n)


class NumpyCNN(NumpyTrainer):
    """conv-ReLU-conv-ReLU-maxpool-flatten-dense, computed in (C, H, W, N) layout throughout: the NCHW batch is
    transposed once on the way in, and (C, H/2, W/2, N) reshaped to (C*H/2*W/2, N) is the transpose of NCHW's
    flatten (same feature order)."""

    def step(self, X, labels):
        W1, b1, W2, b2, W3, b3 = self.p
        x = np.ascontiguousarray(X.transpose(1, 2, 3, 0))
        h1, cols1 = conv_same(x, W1, b1)
        np.maximum(h1, 0, out=h1)
        h2, cols2 = conv_same(h1, W2, b2)
        np.maximum(h2, 0, out=h2)
        pooled, arg = maxpool2(h2)
        flat = pooled.reshape(-1, pooled.shape[-1])  # (features, N)
        logits = flat.T @ W3
        logits += b3
        loss, g = softmax_ce(logits, labels)
        dW3, db3 = flat @ g, g.sum(axis=0)
        dh2 = maxpool2_backward((W3 @ g.T).reshape(pooled.shape), arg)
        dh2 *= h2 > 0
        dh1, dW2, db2 = conv_same_backward(dh2, cols2, W2, h1.shape, True)
        dh1 *= h1 > 0
        _, dW1, db1 = conv_same_backward(dh1, cols1, W1, x.shape, False)
        self.update([dW1, db1, dW2, db2, dW3, db3])
        return loss, int(np.count_nonzero(logits.argmax(axis=1) == labels))


def numpy_trainer(kind: str, weights, lr: float, momentum: float):
    return {"mlp": NumpyMLP, "cnn": NumpyCNN}[kind](weights, lr, momentum)


# ---- JAX -----------------------------------------------------------------------------------------------------
class JaxTrainer:
    """The same step as one ``jax.jit`` function of (weights, momentum buffers, X, labels) with the weights and
    buffers donated; conv by ``lax.conv_general_dilated`` (NCHW/OIHW), pooling by ``lax.reduce_window``."""

    def __init__(self, kind: str, weights, lr: float, momentum: float):
        import functools

        import jax
        import jax.numpy as jnp
        from jax import lax

        def mlp(p, x):
            h = x
            for i in range(0, len(p) - 2, 2):
                h = jnp.maximum(h @ p[i] + p[i + 1], 0)
            return h @ p[-2] + p[-1]

        def conv(x, W, b):
            k = W.shape[-1]
            y = lax.conv_general_dilated(x, W, (1, 1), ((k // 2, k // 2), (k // 2, k // 2)),
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
            return y + b[None, :, None, None]

        def cnn(p, x):
            h = jnp.maximum(conv(x, p[0], p[1]), 0)
            h = jnp.maximum(conv(h, p[2], p[3]), 0)
            h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
            return h.reshape(h.shape[0], -1) @ p[4] + p[5]

        forward = {"mlp": mlp, "cnn": cnn}[kind]

        def loss_fn(p, x, y):
            logits = forward(p, x)
            logp = jax.nn.log_softmax(logits, axis=1)
            return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1)), logits

        @functools.partial(jax.jit, donate_argnums=(0, 1))
        def step(p, v, x, y):
            (loss, logits), g = jax.value_and_grad(loss_fn, has_aux=True)(p, x, y)
            v = [momentum * vi + gi for vi, gi in zip(v, g)]
            p = [pi - lr * vi for pi, vi in zip(p, v)]
            return p, v, loss, jnp.sum(jnp.argmax(logits, axis=1) == y)

        self._step = step
        self.p = [jnp.asarray(np.asarray(w, np.float32)) for w in weights]
        self.v = [jnp.zeros_like(w) for w in self.p]

    def weights(self):
        return [np.array(w) for w in self.p]  # copies: the next step donates these buffers

    def step(self, X, labels):
        self.p, self.v, loss, correct = self._step(self.p, self.v, X, labels)
        return float(loss), int(correct)
