"""Loops with NumPy reductions over axes (axis= an int or a tuple, keepdims=, the methods) for the native tier's
tests (tests/test_native_reduce.py): most return a reduction too, so its dtype is compared."""
import numpy as np


def sum_leading(x, out):
    for i in range(x.shape[0]):
        out[i] = np.sum(x[i], axis=0)  # reduced axes first: added row after row, as NumPy does
    return out, np.sum(x[0], axis=0)


def sum_trailing_keepdims(x, out):
    for i in range(x.shape[0]):
        out[i] = x[i].sum(axis=-1, keepdims=True)[:, 0]  # the last axis: pairwise per row, as NumPy does
    return out, x[0].sum(axis=-1, keepdims=True)


def sum_between(x, w, out):
    # NPBench's conv2d: a 5-d product summed over its middle axes
    k = w.shape[0]
    for i in range(out.shape[1]):
        for j in range(out.shape[2]):
            out[:, i, j, :] = np.sum(x[:, i:i + k, j:j + k, :, np.newaxis] * w[np.newaxis, :, :, :], axis=(1, 2, 3))
    return out


def max_pool(x, out):
    # NPBench's lenet maxpool2d
    for i in range(x.shape[1] // 2):
        for j in range(x.shape[2] // 2):
            out[:, i, j, :] = np.max(x[:, 2 * i:2 * i + 2, 2 * j:2 * j + 2, :], axis=(1, 2))
    return out


def min_max_methods(x, lo, hi):
    for i in range(x.shape[0]):
        lo[i] = x[i].min(axis=1)
        hi[i] = np.amax(x[i], 0)
    return lo, hi, x[0].max(axis=(0, 1), keepdims=True)


def means(x, out):
    for i in range(x.shape[0]):
        out[i] = np.mean(x[i], axis=1) + x[i].mean() + np.mean(x[i], axis=(0, 1), keepdims=True)[0, 0]
    return out, np.mean(x[0], axis=1)


def whole_sums(x):
    total = 0.0
    for i in range(x.shape[0]):
        total += np.sum(x[i])  # an N-d array without an axis: every element
    return total


def int_sums(x, out):
    for i in range(x.shape[0]):
        out[i] = np.sum(x[i], axis=1)
    return out, np.sum(x[0], axis=1)  # int32 and bool sum to int64


def max_of_nothing(x):
    total = 0.0
    for i in range(x.shape[0]):
        total += np.max(x[i], axis=1)[0]
    return total


def axis_from_argument(x, ax, out):
    for i in range(x.shape[0]):
        out[i] = np.sum(x[i], axis=ax)
    return out


def compared_sum(x):
    count = 0
    for i in range(x.shape[0]):
        if np.sum(x[i], axis=0)[0] > 1.0:
            count += 1
    return count


def mixed_dtype_sums(x, w, out):
    # NPBench's resnet: float32 patches times float64 weights (NumPy computes in float64)
    for i in range(out.shape[1]):
        out[:, i] = np.sum(x[:, i:i + w.shape[0], :, np.newaxis] * w[np.newaxis, :, :, :], axis=(1, 2))
    return out, x[:, :1] * w[0, :, 0] + (x[0] < w[0, :, 0])


def six_d(g, d, out):
    # NPBench's scattering_self_energies indexes a 6-d array by six loop variables
    for q in range(d.shape[0]):
        for i in range(d.shape[-2]):
            for j in range(d.shape[-1]):
                out[q] += g[i] * d[q, 1, 0, 1, i, j] + np.sum(d[q, :, :, :, i], axis=(0, 2))[1, j]
    return out


def reduction_of_a_name_in_a_condition(x, limit):
    count = 0
    for i in range(x.shape[0]):
        if i > 0 and np.max(x, axis=1)[i] > limit:  # an argument's name: no temporary, fine where it may not run
            count += 1
    return count


def reductions_in_conditions(x, limit):
    count = 0
    for i in range(x.shape[0]):
        if i > 0 and np.max(x[i - 1:i + 1], axis=0)[0] > limit:  # an expression's temporary: declined there
            count += 2
    return count


def uint8_sums(x, out):
    for i in range(x.shape[0]):
        out[i] = np.sum(x[i], axis=0)  # uint8 sums to uint64, a dtype the kernels do not take
    return out


def split_and_middle_axes(x, out):
    total = np.sum(x, axis=(1, 2))  # the middle two of 4 axes
    for i in range(x.shape[0]):
        # axes 0 and 2 of 3 (not one run: moved last), the middle axis (stored: max and min are exact)
        total = total + np.sum(x[i], axis=(0, 2)).sum()
        out[i] = np.min(np.max(x[i], axis=1), axis=1)
    return out, total, np.max(x, axis=(1, 2))


def compared_method_sum(x):
    count = 0
    for i in range(x.shape[0]):
        if x[i].sum() > 2.0:  # a 1-D float sum in NumPy's pairwise order: exact, so it may be compared
            count += 1
    return count


def method_sum_against_np_sum(x):
    count = 0
    for i in range(x.shape[0]):
        if x[i].sum() != np.sum(x[i]):  # the same pairwise order for both: equal, to the bit
            count += 1
    return count, x[-1].sum()


def loop_then_empty_max(a, x):
    for i in range(a.shape[0]):
        a[i] += 1.0
    m = np.max(x, axis=0)  # ValueError for an empty x: the error names this line, not the loop's
    return m


def arg_extremes(x, out):
    # the first index of each row's or column's extreme (of its first NaN, if any), as k-means' labels
    for i in range(x.shape[0]):
        out[i, :x.shape[2]] = np.argmin(x[i], axis=0)
        out[i, x.shape[2]:x.shape[2] + x.shape[1]] = np.argmax(x[i], axis=1)
    return out, np.argmin(x[0], axis=-1, keepdims=True)


def argmin_of_nothing(x):
    total = 0
    for i in range(x.shape[0]):
        total += np.argmin(x[i], axis=1)[0]
    return total
