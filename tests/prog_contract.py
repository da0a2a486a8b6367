"""Sums over axes of element-wise expressions, as NumPy convolution and contraction codes write them
(runtime/native/contract.py)."""
import numpy as np


def conv2d(input, weights, dtype=None):
    # NPBench's conv2d (deep_learning/conv2d_bias), NHWC; resnet's stores float64 sums into a float32 output
    K = weights.shape[0]
    H_out = input.shape[1] - K + 1
    W_out = input.shape[2] - K + 1
    output = np.empty((input.shape[0], H_out, W_out, weights.shape[3]), dtype=dtype or input.dtype)
    for i in range(H_out):
        for j in range(W_out):
            output[:, i, j, :] = np.sum(input[:, i:i + K, j:j + K, :, np.newaxis] * weights[np.newaxis, :, :, :],
                                        axis=(1, 2, 3))
    return output


def rows_times_matrix(steps, a, b):
    # a new array each step: (n, k) by (k, m) through the middle axis
    total = np.zeros((a.shape[0], b.shape[1]))
    for _ in range(steps):
        c = np.sum(a[:, :, None] * b[None, :, :], axis=1)
        total += c
    return total


def trailing_axis(steps, a, b):
    # a float sum over the last axis: NumPy adds each row pairwise, and so does the nest (a row buffer)
    out = np.zeros(a.shape[0])
    for _ in range(steps):
        out[:] = np.sum(a * b, axis=-1)
    return out


def trailing_axis_ints(steps, a, b):
    # an int64 sum in any order is NumPy's
    out = np.zeros(a.shape[0], dtype=np.int64)
    for _ in range(steps):
        out[:] = np.sum(a * b + 1, axis=1)
    return out


def into_row(steps, out, a, b, r):
    # the target indexed by an int that may be out of range; a scalar operand
    for s in range(steps):
        out[r, :] = np.sum(a[:, :, None] * b[None, :, :] * (s + 1.5), axis=(0, 1))
    return out


def keepdims(steps, a):
    out = np.zeros((1, a.shape[1]))
    for _ in range(steps):
        out[...] = np.sum(a * 2.0, axis=0, keepdims=True)
    return out


def one_column(steps, a, b):
    # kept axes after the summed one of length 1 together: NumPy drops them and sums pairwise (no nest then)
    out = np.zeros((a.shape[0], b.shape[1]))
    for _ in range(steps):
        out[:, :] = np.sum(a[:, :, None] * b[None, :, :], axis=1)
    return out


def new_sum(steps, a, b):
    c = a[:, :1] * 0.0
    for _ in range(steps):
        c = np.sum(a[:, :, None] * b[None, :, :], axis=1)
    return c


def distances(steps, x, c):
    # k-means' squared distances by broadcasting: a float sum over the last axis of a 3-d temporary
    d = np.zeros((x.shape[0], c.shape[0]))
    for _ in range(steps):
        d = np.sum((x[:, None, :] - c[None, :, :]) ** 2, axis=-1)
    return d


def trailing_two_axes(steps, a):
    # a float sum over a run of trailing axes: NumPy's iterator decides the order, so the array statement runs
    out = np.zeros(a.shape[0])
    for _ in range(steps):
        out[:] = np.sum(a * 2.0, axis=(1, 2))
    return out
