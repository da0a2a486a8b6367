"""Programs for the differential tests: NumPy semantics, realistic kernels, large arrays (tasks)."""
# ruff: noqa: E701, E702, B007, UP031, C416, SIM
from __future__ import annotations

import numpy as np
import numpy as xp
from numpy import exp
from numpy import linalg as la

# ---- NumPy -------------------------------------------------------------------------------------------------


def np_functions(a):
    return (np.exp(a), np.sqrt(np.abs(a)), np.sum(a), np.mean(a), np.maximum(a, 0.5), np.where(a > 0, a, 0.0),
            np.dot(a, a), np.concatenate([a, a]), np.clip(a, -0.5, 0.5), np.pi * 2, np.cumsum(a))


def np_aliases(a):
    return xp.tanh(a), xp.linalg.norm(a), exp(a), la.norm(a, 1), xp.float64(2)


def np_linalg(A, b):
    return np.linalg.solve(A, b), np.linalg.inv(A), np.linalg.det(A), np.linalg.norm(b), np.linalg.eigvalsh(A + A.T)


def np_creation(n):
    return (np.zeros(n), np.ones((n, 2)), np.arange(n), np.linspace(0, 1, n), np.eye(n), np.full(n, 7),
            np.zeros(n, dtype=np.int32), np.array([[1, 2], [3, 4]]), np.array([1.5, n]), np.arange(1, n, 2.0))


def array_attributes(a):
    return a.T, a.shape, a.ndim, a.size, a.dtype, a.shape[0], a.T.shape


def array_methods(a):
    return (a.copy(), a.astype(np.int64), a.reshape(-1), a.reshape(3, 2), a.sum(axis=0), a.sum(axis=1), a.sum(),
            a.mean(), a.max(), a.argmax(), a.cumsum(), a.min(axis=0), a.astype(float))


def array_copy_independent(a):
    b = a.copy()
    b[0] = 100
    return a, b


def array_indexing(A):
    return A[0], A[:, 1], A[1, 2], A[::2, ::-1], A[A > 3], A[[0, 1], [1, 0]], A[None, 0].shape, A[..., 0]


def var_named_e():
    e = 3
    return e * 2


def var_named_e_param(e):
    return e + 1


def var_named_sum(xs):
    sum = 0
    for x in xs:
        sum += x
    return sum


def var_named_array():
    array = [1, 2]
    array.append(3)
    return array


def var_named_like_numpy(x):
    pi = 3
    exp = x + 1
    return pi * exp, np.exp(1.0)


def matmul_vs_mul(A, B):
    return A @ B, A * B, A @ B[:, 0], np.matmul(A, B)


def broadcasting(a, b):
    return a + b, a * b[:, None], a[:, None] - a[None, :], a + 1


def dtype_promotion(a, f):
    return a + 1.5, a / 2, a // 2, a * 2, a + f, a.sum(), a + np.int64(1), a > 1, a * True


def int_array_true_divide(a, b):
    return a / b, a // b, a / 3


def neg_division_ints(a, b):
    return a // b, a % b, -a // b, -a % b, divmod(a, b), divmod(-a, b)


def neg_division_literals():
    return -7 // 2, -7 % 2, 7 // -2, 7 % -2, -7.5 // 2, -7.5 % 2


def neg_division_arrays(a):
    return a // 2, a % 2, a // -2, a % -3, np.floor_divide(a, 3), np.mod(a, 3), np.fmod(a, 3)


def rng_streams(seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=3)
    b = rng.integers(0, 10, size=4)
    c = rng.random(2)
    d = rng.normal()
    e = rng.integers(5)
    return a, b, c, d, e


def rng_in_loop(seed, n):
    rng = np.random.default_rng(seed)
    total = 0.0
    draws = []
    for _ in range(n):
        x = rng.random()
        draws.append(x)
        total += x
    return total, draws


def numpy_scalars(a):
    s = a.sum()
    return s, s * 2, float(s), int(a[0]), a[0] + 1, np.float64(1.5) + 1


# ---- realistic programs ------------------------------------------------------------------------------------


def lra(X, y, alpha, iterations):
    w = np.zeros(X.shape[1])
    for _ in range(iterations):
        pred = 1.0 / (1.0 + np.exp(-(X @ w)))
        error = pred - y
        gradient = X.T @ error
        w = w - alpha * gradient / X.shape[0]
    return w


def kmeans(points, centroids, iterations):
    k = centroids.shape[0]
    closest = np.zeros(points.shape[0], dtype=np.int64)
    for _ in range(iterations):
        dist = np.sqrt(((points - centroids[:, np.newaxis]) ** 2).sum(axis=2))
        closest = np.argmin(dist, axis=0)
        for i in range(k):
            centroids[i] = points[closest == i].mean(axis=0)
    return centroids, closest


def power_iteration(A, iterations):
    v = np.ones(A.shape[0])
    lam = 0.0
    for _ in range(iterations):
        w = A @ v
        lam = np.linalg.norm(w)
        v = w / lam
    return lam, v


def jacobi_1d(u, steps):
    for _ in range(steps):
        u[1:-1] = 0.5 * (u[:-2] + u[2:])
    return u


def softmax(x):
    z = x - np.max(x, axis=-1, keepdims=True)
    ez = np.exp(z)
    return ez / np.sum(ez, axis=-1, keepdims=True)


def standardize(X):
    return (X - X.mean(axis=0)) / X.std(axis=0)


def mandelbrot_count(cr, ci, max_iter):
    zr = 0.0
    zi = 0.0
    n = 0
    while n < max_iter and zr * zr + zi * zi <= 4.0:
        zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
        n += 1
    return n


def mandelbrot_grid(w, h, max_iter):
    rows = []
    for j in range(h):
        row = []
        for i in range(w):
            row.append(mandelbrot_count(-2.0 + 3.0 * i / w, -1.0 + 2.0 * j / h, max_iter))
        rows.append(row)
    return rows


def bubble_sort(lst):
    n = len(lst)
    for i in range(n):
        swapped = False
        for j in range(n - 1 - i):
            if lst[j] > lst[j + 1]:
                lst[j], lst[j + 1] = lst[j + 1], lst[j]
                swapped = True
        if not swapped:
            break
    return lst


def sieve(n):
    is_prime = [True] * (n + 1)
    is_prime[0] = is_prime[1] = False
    p = 2
    while p * p <= n:
        if is_prime[p]:
            for m in range(p * p, n + 1, p):
                is_prime[m] = False
        p += 1
    return [i for i in range(n + 1) if is_prime[i]]


def sieve_numpy(n):
    flags = np.ones(n + 1, dtype=bool)
    flags[:2] = False
    for p in range(2, int(n**0.5) + 1):
        if flags[p]:
            flags[p * p :: p] = False
    return np.nonzero(flags)[0]


def fib_list(n):
    fibs = [0, 1]
    while len(fibs) < n:
        fibs.append(fibs[-1] + fibs[-2])
    return fibs[:n]


# ---- large arrays: primitives run as tasks on the thread pool ------------------------------------------


def big_inplace_ordering(a):
    b = np.exp(a)  # a task that reads a ...
    a += 1  # ... must finish before a changes in place
    c = b + a
    a[0] = -1.0
    return c.sum(), a[:3], b[:2]


def big_chain(a, iterations):
    x = a
    for i in range(iterations):
        x = np.tanh(x) * 0.5 + a / (i + 1)
        if x.sum() > 1e9:  # data-dependent control flow waits on a value
            break
    return x.mean(), x.shape


def big_list_of_arrays(a):
    parts = []
    for k in range(3):
        parts.append(a * k)
    return [p.sum() for p in parts], len(parts)


def float32_promotion(a):
    return a * 2.0, a + np.float64(1.0), a + np.float32(1.0), (a * 2).dtype, np.sqrt(a), a.sum()


def uint8_wraparound(a):
    return a + 10, a * 2, a - 251, a.astype(np.int64) + 10


def np_keyword_calls(a):
    return (np.sum(a, axis=0), np.zeros((2, 2), dtype=int), np.mean(a, axis=1, keepdims=True),
            np.linspace(0, 1, num=3, endpoint=False), np.concatenate([a, a], axis=1),
            np.full((2,), 1.5, dtype=np.float32))


def array_in_and_truth(a):
    return 2 in a, 7 in a, (a > 0).all(), (a > 2).any(), bool(a.any()), len(a)


def numpy_scalar_types(a):
    x = a[0]
    y = a.sum()
    return x + 1, x * 1.5, x // 2, y / 2, x > 1, int(x) + 1, float(y), x.item(), type(x) is np.int64


def array_loop_accumulate(a):
    total = np.zeros(a.shape[1])
    for i in range(a.shape[0]):
        total += a[i] * i
    return total


def int_division_mixed(a):
    return np.int64(-7) // 2, np.int64(-7) % 2, a // np.int64(-2), -7 // a, np.float64(-7.0) // 2


def where_and_masks(a):
    b = a.copy()
    b[b < 0] = -b[b < 0]
    idx = np.argsort(a)
    return b, idx, a[idx], np.nonzero(a > 0)[0], np.where(a > 0)[0], a[a > 0].sum()


def outer_products(u, v):
    return np.outer(u, v), u[:, None] * v[None, :], u @ v, np.einsum("i,j->ij", u, v)


# ---- large arrays: effects, aliases and containers around futures -------------------------------------------

N_BIG = 70_000


def big_setitem_on_future(a):
    b = a * 2
    b[0] = -1.0
    b[1:3] += 5
    return b[:4], b.sum()


def big_alias_inplace(a):
    x = a + 1
    y = x
    x += 1
    return y[:3], y is x


def big_list_mutation(a):
    parts = [a * 2, a + 1]
    parts[0] += 1
    parts[1][0] = 7.0
    parts.append(parts[0] - parts[1])
    return [p[:2] for p in parts], len(parts)


def big_dict_of_arrays(a):
    d = {"x": a * 2, "y": a.sum()}
    d["x"] += 1
    d["z"] = d["x"][:2]
    return d["z"], d["y"], sorted(d)


def big_fill_after_read(a):
    b = a * 2
    a.fill(0.0)
    return b.sum(), a.sum()


def big_while_condition(a):
    x = a * 100
    halvings = 0
    while x.max() > 1.0:
        x = x / 2
        halvings += 1
    return halvings, x.max()


def big_future_in_python_ops(a):
    s = a.sum()
    m = a * 3
    label = f"{s:.2f}"
    shape = m.shape
    ok = 0 < s < 1e12
    return label, shape, ok, len(m), isinstance(m, np.ndarray), float(m[-1])


def big_rows(a):
    out = []
    for row in a.reshape(7, 10_000) * 2:
        out.append(row.sum())
    return out, [r.max() for r in a.reshape(7, 10_000)]


def big_mask_assign(a):
    b = np.sqrt(np.abs(a))
    a[a < 0] = 0.0
    return b.sum(), a.sum()


def big_early_return(a):
    for k in range(10):
        a = a * 1.5
        if a.sum() > 1e6:
            return k, a.sum()
    return -1, a.sum()


def big_random(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=N_BIG)
    y = rng.random(N_BIG)
    return x.sum(), y.mean(), rng.integers(0, 100)


def big_membership_on_future(a):
    b = a * 2
    return 4.0 in b, 3.0 in b, 3.0 not in b, b.sum() in [b.sum()], b.size in {140_000: 1}


def big_sort_list_of_futures(a):
    vals = [(a * k).sum() for k in (3, 1, 2)]
    vals.sort()
    return vals


def big_remove_future_from_list(a):
    vals = [(a * k).sum() for k in (3, 1, 2)]
    vals.remove((a * 1).sum())
    return vals


def big_futures_in_containers(a):
    vals = [(a * k).sum() for k in (3, 1, 2)]
    pair = [a * 2, a * 3]
    last = pair.pop()
    pair.insert(0, last)
    d = {}
    for k in range(3):
        d[(a * k).sum()] = k
    out = []
    out.extend([a * 2, a.sum()])
    out += [a.mean()]
    s = a.sum()
    return (sorted(vals, reverse=True), max(vals), vals.index((a * 1).sum()), [v[:2] for v in pair], d,
            out[1:], len({(a * k).sum() for k in (1, 1, 2)}), 1 if s else 0, s and 5, str(s), f"{a.max()}")


def index_walks(a, w):
    """np.ndindex and np.ndenumerate loops, one inside another (numpy-benchmarks' local_maxima): each loop over an
    ndindex object starts afresh."""
    out = np.zeros(a.shape)
    inner = np.ndindex(w)
    for pos in np.ndindex(a.shape):
        for off in inner:
            out[pos] += a[tuple((p + o) % s for p, o, s in zip(pos, off, a.shape))]
    total = 0.0
    for idx, v in np.ndenumerate(a):
        total += v * (idx[0] + 1)
    return out, total, list(np.ndindex(2, 2))


def numpy_python_interplay(a):
    return (f"{a[0]}", f"{a.sum():.2f}", str(a), len(np.ones((3, 2))), range(np.int64(3))[-1],
            7 / np.int64(2), np.int64(7) / 2, int(np.float32(2.7)), float(a[1]) + 1, [float(v) for v in a])
