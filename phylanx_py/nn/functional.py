"""Losses, activations and metrics as plain NumPy-style functions (traceable; the ``nn.*`` primitives where one
exists): ``softmax_cross_entropy`` (from logits, numerically stable), ``binary_cross_entropy`` (from logits),
``mse``, ``sigmoid``, ``accuracy``."""
from __future__ import annotations

import numpy as np

from phylanx_py.primitives.nn_ops import log_softmax, logsumexp, softmax, softmax_cross_entropy


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def binary_cross_entropy(logits, targets):
    """Mean binary cross-entropy of ``sigmoid(logits)`` against targets in [0, 1], computed from the logits
    (``max(z, 0) - z*y + log(1 + exp(-|z|))``) so large logits neither overflow nor take log(0)."""
    _same_shape("binary_cross_entropy", logits, targets)
    z = logits
    return np.mean(np.maximum(z, 0.0) - z * targets + np.log1p(np.exp(-np.abs(z))))


def mse(pred, targets):
    _same_shape("mse", pred, targets)
    return np.mean((pred - targets) ** 2)


def _same_shape(name, out, targets):
    # (n, 1) outputs against (n,) targets would broadcast to (n, n): a wrong loss that still trains
    if np.shape(out) != np.shape(targets):
        raise ValueError(f"{name}: outputs of shape {np.shape(out)} and targets of shape {np.shape(targets)} differ "
                         f"(reshape the targets to {np.shape(out)})")


def accuracy(outputs, labels) -> float:
    """Fraction of rows whose largest output is the label (labels as class indices, or one-hot rows)."""
    outputs, labels = np.asarray(outputs), np.asarray(labels)
    if outputs.ndim == 1 or outputs.shape[-1] == 1:  # one logit per row: binary, labels 0/1
        return float(np.mean((np.reshape(outputs, -1) > 0) == (np.reshape(labels, -1) > 0.5)))
    if labels.ndim == outputs.ndim:
        labels = labels.argmax(axis=-1)
    right = outputs.argmax(axis=-1) == labels
    # the count over the size is np.mean's value (a float64 sum of ones, divided once) at a third of its cost
    # (np.mean's Python wrapper: ~3 of fit's ~5 us a step for this metric)
    return np.count_nonzero(right) / right.size if right.size else float(np.mean(right))


LOSSES = {"softmax_cross_entropy": softmax_cross_entropy, "binary_cross_entropy": binary_cross_entropy, "mse": mse}

__all__ = ["LOSSES", "accuracy", "binary_cross_entropy", "log_softmax", "logsumexp", "mse", "sigmoid", "softmax",
           "softmax_cross_entropy"]
