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


# ---- batched collectives: reductions with no data dependency between them go as one message ------------------
def kmeans_masked(points, centroids, iterations):
    """The textbook k-means: per centroid a boolean mask, its points' sum over its count, stored in a new array.
    The k sums and k counts of an iteration do not depend on each other: one message (runtime/spmd/fission.py)."""
    k = centroids.shape[0]
    for _ in range(iterations):
        d = ((points[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
        labels = d.argmin(axis=1)
        new = np.zeros_like(centroids)
        for j in range(k):
            mask = labels == j
            new[j] = np.sum(points[mask], axis=0) / np.sum(mask)
        centroids = new
    return centroids, labels


def kmeans_comprehension(points, centroids, iterations):
    """The same, the new centroids built by a list comprehension."""
    k = centroids.shape[0]
    for _ in range(iterations):
        d = ((points[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
        labels = d.argmin(axis=1)
        centroids = np.array([np.sum(points[labels == j], axis=0) / np.sum(labels == j) for j in range(k)])
    return centroids, labels


def running_sums_through_a_view(X, labels, k, iterations):
    """Each row of ``out`` adds the row before it, read through a view of ``out``: the stores must be seen in order,
    so the loop over labels cannot be split (the run-time check finds the shared memory)."""
    out = np.zeros((k, X.shape[1]))
    for _ in range(iterations):
        before = out[:-1]
        for j in range(1, k):
            out[j] = np.sum(X[labels == j], axis=0) + before[j - 1]
    return out


def running_sums_in_place(X, labels, k, iterations):
    """The same reading ``out`` itself (never split: seen in the tree)."""
    out = np.zeros((k, X.shape[1]))
    for _ in range(iterations):
        for j in range(1, k):
            out[j] = np.sum(X[labels == j], axis=0) + out[j - 1]
    return out


def sums_and_counts(X, labels, iterations):
    """A float sum and a count (an integer below 2**53: it travels as float64 with the sum, one message)."""
    out = np.zeros(X.shape[1] + 1)
    for i in range(iterations):
        out = out + np.concatenate([X.sum(axis=0), [np.sum(labels > i)]])
    return out


def sums_counts_and_big_integers(X, labels, iterations):
    """The same and an int64 sum of data past 2**53 (it must stay exact: a message of its own)."""
    out = np.zeros(X.shape[1] + 1)
    total = 0
    for i in range(iterations):
        total = total + np.sum((labels + i) * (2 ** 48 + 1))
        out = out + np.concatenate([X.sum(axis=0), [np.sum(labels > i)]])
    return out, total


def long_chain(X, iterations):
    """One value added to 40 times from sums over the ranks: values computed from waiting sums wait a bounded
    number of steps (a chain of them is resolved recursively)."""
    s = 0.0
    for _ in range(iterations):
        for j in range(40):
            s = s + X[:, j % X.shape[1]].sum() * 0.5
    return s


def loops_that_stay_whole(X, labels, rows, k, iterations):
    """Loops over labels the planner must not split: a store into the loop's own variable, an in-place change
    before the store, a call of a function value."""
    out = np.zeros((k, X.shape[1]))
    seen = []
    for _ in range(iterations):
        for row in rows:
            row[0] = np.sum(X[labels == 0])
        for j in range(k):
            seen.append(j)
            out[j] = np.sum(X[labels == j], axis=0)
        for j in range(k):
            out[j] = np.sum(X[labels == j], axis=0) * _weight(j)
    return out, seen


def _weight(j):
    return 1.0 + j


def unused_ratio(X, iterations):
    """A value made from sums over the ranks that nothing reads: NumPy still computes it, and warns (0/0)."""
    total = 0.0
    for _ in range(iterations):
        ratio = X.sum() * 0.0 / 0.0  # noqa: F841
        total = total + X.sum()
    return total


def unused_bad_shape(X, iterations):
    """The same raising: NumPy's shape error, though nothing reads the value."""
    total = 0.0
    for _ in range(iterations):
        bad = X.sum(axis=0) + np.zeros(X.shape[1] + 1)  # noqa: F841
        total = total + X.sum()
    return total


def selection_then_change(X, labels, iterations):
    """``X[labels == 1]`` is a copy made when the line runs: changing X afterwards does not change it."""
    s = None
    for _ in range(iterations):
        sel = X[labels == 1]
        X += 1.0
        s = sel.sum(axis=0)
    return s


def mask_then_change(X, labels, iterations):
    """The mask is made before ``labels`` changes."""
    s = None
    for _ in range(iterations):
        m = labels == 1
        labels += 1
        s = np.sum(X[m], axis=0) + np.sum(m)
    return s


def masks_used_as_values(X, C, iterations):
    """Label masks read as values, stored through, and counted."""
    w = None
    for _ in range(iterations):
        labels = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
        m = labels == 0
        w = m * 1.0 + np.sum(labels == 1)
        X[labels == 2] = 0.0
        C = C + np.sum(X[m], axis=0) / (np.sum(m) + 1)
    return X, C, w


def mask_of_a_view_then_change(X, labels, iterations):
    """Masks of values that share the labels' rows (a slice, a cast without a copy), made before the labels
    change."""
    s = 0.0
    for _ in range(iterations):
        same = labels.astype(labels.dtype, copy=False)
        m = same == 1
        tail = labels[1:] == 2
        labels += 1
        s = s + np.sum(X[m], axis=0) + np.sum(m) + np.sum(tail)
    return s


def table_then_change_through_a_cast(X, labels, iterations):
    """Per-label sums of values that share the rows of X and labels, before and after those change in place."""
    s = 0.0
    for _ in range(iterations):
        same, Y = labels.astype(labels.dtype, copy=False), X.astype(X.dtype, copy=False)
        a = np.sum(Y[same == 1], axis=0) + np.sum(same == 1)
        labels += 1
        X += 1.0
        s = s + a + np.sum(Y[same == 2], axis=0) + np.sum(same == 2)
    return s


def mask_changed_in_place(X, labels, iterations):
    """A label mask changed in place, then counted and used to select."""
    s = 0.0
    for _ in range(iterations):
        m = labels == 1
        m[:10] = True
        s = s + np.sum(m) + np.sum(X[m], axis=0)
    return s


def row_functions_loop(X, iterations):
    """Functions along the rows' own axis (``np.sort``'s default, ``np.cumsum(axis=1)``) and the moves of the
    tile rules (``swapaxes``, ``expand_dims``, ``squeeze``): each rank's rows, no collective but the sum."""
    s = np.zeros(X.shape[1])
    for i in range(iterations):
        Y = np.sort(X) + np.cumsum(X, axis=1) * i
        Z = np.squeeze(np.expand_dims(Y, 1), axis=1)
        s = s + np.sum(Z, axis=0)
    return s
