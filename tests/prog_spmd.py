"""Loops over tiled arrays for the SPMD tier's tests (tests/test_spmd.py), compiled unchanged; prog_tiled.py has
LRA, k-means, power iteration and Jacobi."""
import numpy as np


def standardize_steps(X, iterations):
    """Standardisation repeated (after the first pass it changes only by rounding): column means and standard
    deviations over the tiled axis every iteration, the carried array tiled."""
    for _ in range(iterations):
        X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X, X.mean(axis=0), X.std(axis=0)


def lra_history(X, y, alpha, iterations, history):
    """LRA recording its loss in a list the caller passed (changed in place by the loop)."""
    w = np.zeros(X.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        history.append(float(np.mean((p - y) ** 2)))
        w = w - alpha * (X.T @ (p - y)) / X.shape[0]
    return w


def stats_loop(X, iterations):
    """Reductions of every kind over the tiled axis."""
    acc = np.zeros(6)
    for i in range(iterations):
        Z = X * (i + 1)
        acc += np.array([Z.sum(), Z.max(), np.min(Z[:, 0]), float(Z[:, 1].argmax()), float(np.argmin(Z)),
                         np.linalg.norm(Z[:, 0])])
    return acc


def while_converge(X, tol):
    """A data-dependent ``while``: every rank leaves together (the condition is an allreduced value)."""
    v = np.ones(X.shape[1])
    change = 1.0
    steps = 0
    while change > tol:
        w = X.T @ (X @ v)
        w = w / np.linalg.norm(w)
        change = np.abs(w - v).max()
        v = w
        steps += 1
    return v, steps


def sorted_rows_loop(X, iterations):
    """``np.sort`` along the tiled axis has no SPMD form: the loop runs as before."""
    s = np.zeros(X.shape[1])
    for _ in range(iterations):
        s = s + np.sort(X, axis=0)[0]
    return s


def printing_loop(X, iterations):
    total = 0.0
    for i in range(iterations):
        total += X.sum()
        print("step", i)
    return total


def bad_shapes(X, iterations):
    w = np.zeros(X.shape[1] + 1)
    for _ in range(iterations):
        w = w + X.T @ (X @ w)
    return w


def label_stats(X, labels, k, iterations):
    """Per-label counts, sums and means through ``labels == j`` masks (k-means' idiom), one label never used."""
    d = X.shape[1]
    out = np.zeros((k, 2 * d + 1))
    for _ in range(iterations):
        for j in range(k):
            m = labels == j
            out[j, 0] += m.sum()
            out[j, 1:1 + d] += np.sum(X[m], axis=0)
            out[j, 1 + d:] = X[m].mean(axis=0)
    return out


def first_row_loop(X, iterations):
    """``X[0]``: one row of a tiled array has no SPMD form (it lives on one rank)."""
    s = np.zeros(X.shape[1])
    for _ in range(iterations):
        s = s + X[0] * X.sum(axis=0)
    return s


def column_broadcast_loop(X, c, iterations):
    """A replicated (n, 1) column against a tiled (n,) vector broadcasts to (n, n): not row-local."""
    total = 0.0
    for _ in range(iterations):
        total = total + (c + X[:, 0]).sum()
    return total


def astype_and_masks(X, iterations):
    total = 0
    for _ in range(iterations):
        big = (X > 0.5).astype(np.int64)
        total = total + big.sum() + (X[X[:, 0] > 0][:, 1] ** 2).sum()
    return total


def center_in_place(X, iterations):
    """In-place updates of a tiled input (``X -= ...``, ``X[X < lo] = lo``): the caller's array changes too."""
    for _ in range(iterations):
        X -= X.mean(axis=0)
        X[X < -1.0] = -1.0
    return X.sum()


LOG = []


def logs_to_a_module_list(X, iterations):
    """A module-level list changed by the loop: the change must reach this module, so the loop stays here."""
    total = 0.0
    for i in range(iterations):
        total = total + X.sum()
        LOG.append(i)
    return total


def appends_to_an_attribute(X, box, iterations):
    total = 0.0
    for i in range(iterations):
        total = total + X.sum()
        box.items.append(i)
    return total


def reversed_tail_sum(x, n):
    s = 0.0
    for _ in range(n):
        s += np.sum(x[::-1][1:])  # a slice of a slice: the rows are x's
    return s
