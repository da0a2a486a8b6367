"""Loop-heavy kernels written the way scientists write them (scalar inner loops), for benchmarks/loops.py.
``CASES[name] = (function, make_inputs(size))`` with size "small" or "medium"; every function returns its
result (arrays changed in place are returned too)."""
import numpy as np


def gauss_seidel(A, T):
    n = A.shape[0]
    for _ in range(T):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1] + A[i, j - 1] + A[i, j]
                           + A[i, j + 1] + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0
    return A


def jacobi_2d(A, B, T):
    n = A.shape[0]
    for _ in range(T):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, j + 1] + B[i + 1, j] + B[i - 1, j])
    return A


def heat_1d(u, T, r):
    n = u.shape[0]
    v = np.zeros(n)
    for _ in range(T):
        for i in range(1, n - 1):
            v[i] = u[i] + r * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        for i in range(1, n - 1):
            u[i] = v[i]
    return u


def adi_sweep(u, T, a, b):
    # alternating-direction tridiagonal solves (Thomas algorithm) along rows then columns
    n = u.shape[0]
    c = np.zeros(n)
    d = np.zeros(n)
    for _ in range(T):
        for i in range(1, n - 1):
            c[0] = 0.0
            d[0] = u[i, 0]
            for j in range(1, n):
                m = b - a * c[j - 1]
                c[j] = a / m
                d[j] = (u[i, j] + a * d[j - 1]) / m
            for j in range(n - 2, 0, -1):
                u[i, j] = d[j] - c[j] * u[i, j + 1]
        for j in range(1, n - 1):
            c[0] = 0.0
            d[0] = u[0, j]
            for i in range(1, n):
                m = b - a * c[i - 1]
                c[i] = a / m
                d[i] = (u[i, j] + a * d[i - 1]) / m
            for i in range(n - 2, 0, -1):
                u[i, j] = d[i] - c[i] * u[i + 1, j]
    return u


def lu(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[k, j]
            A[i, j] /= A[j, j]
        for j in range(i, n):
            for k in range(i):
                A[i, j] -= A[i, k] * A[k, j]
    return A


def cholesky(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[j, k]
            A[i, j] /= A[j, j]
        for k in range(i):
            A[i, i] -= A[i, k] * A[i, k]
        A[i, i] = np.sqrt(A[i, i])
    return A


def trisolv(L, b):
    n = L.shape[0]
    x = np.zeros(n)
    for i in range(n):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i, j] * x[j]
        x[i] = x[i] / L[i, i]
    return x


def gramschmidt(A, R, Q):
    m, n = A.shape
    for k in range(n):
        nrm = 0.0
        for i in range(m):
            nrm += A[i, k] * A[i, k]
        R[k, k] = np.sqrt(nrm)
        for i in range(m):
            Q[i, k] = A[i, k] / R[k, k]
        for j in range(k + 1, n):
            R[k, j] = 0.0
            for i in range(m):
                R[k, j] += Q[i, k] * A[i, j]
            for i in range(m):
                A[i, j] = A[i, j] - Q[i, k] * R[k, j]
    return Q


def durbin(r):
    n = r.shape[0]
    y = np.zeros(n)
    z = np.zeros(n)
    y[0] = -r[0]
    beta = 1.0
    alpha = -r[0]
    for k in range(1, n):
        beta = (1 - alpha * alpha) * beta
        s = 0.0
        for i in range(k):
            s += r[k - i - 1] * y[i]
        alpha = -(r[k] + s) / beta
        for i in range(k):
            z[i] = y[i] + alpha * y[k - i - 1]
        for i in range(k):
            y[i] = z[i]
        y[k] = alpha
    return y


def trmm(A, B, alpha):
    m, n = B.shape
    for i in range(m):
        for j in range(n):
            for k in range(i + 1, m):
                B[i, j] += A[k, i] * B[k, j]
            B[i, j] = alpha * B[i, j]
    return B


def syrk(C, A, alpha, beta):
    n, m = A.shape
    for i in range(n):
        for j in range(i + 1):
            C[i, j] *= beta
        for k in range(m):
            for j in range(i + 1):
                C[i, j] += alpha * A[i, k] * A[j, k]
    return C


def symm(C, A, B, alpha, beta):
    m, n = C.shape
    for i in range(m):
        for j in range(n):
            temp2 = 0.0
            for k in range(i):
                C[k, j] += alpha * B[i, j] * A[i, k]
                temp2 += B[k, j] * A[i, k]
            C[i, j] = beta * C[i, j] + alpha * B[i, j] * A[i, i] + alpha * temp2
    return C


def floyd_warshall(d):
    n = d.shape[0]
    for k in range(n):
        for i in range(n):
            for j in range(n):
                if d[i, k] + d[k, j] < d[i, j]:
                    d[i, j] = d[i, k] + d[k, j]
    return d


def nussinov(seq, table):
    n = seq.shape[0]
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            if j - 1 >= 0:
                table[i, j] = max(table[i, j], table[i, j - 1])
            if i + 1 < n:
                table[i, j] = max(table[i, j], table[i + 1, j])
            if j - 1 >= 0 and i + 1 < n:
                if i < j - 1:
                    pair = 1 if seq[i] + seq[j] == 3 else 0
                    table[i, j] = max(table[i, j], table[i + 1, j - 1] + pair)
                else:
                    table[i, j] = max(table[i, j], table[i + 1, j - 1])
            for k in range(i + 1, j):
                table[i, j] = max(table[i, j], table[i, k] + table[k + 1, j])
    return table


def crc16(data):
    crc = 0xFFFF
    for b in data:
        crc ^= int(b)
        for _ in range(8):
            if crc & 1:
                crc = (crc >> 1) ^ 0xA001
            else:
                crc >>= 1
    return crc


def popcount_sum(values):
    total = 0
    for v in values:
        x = int(v)
        while x:
            x &= x - 1
            total += 1
    return total


def mandelbrot(xs, ys, out, maxiter):
    for i in range(ys.shape[0]):
        for j in range(xs.shape[0]):
            cr = xs[j]
            ci = ys[i]
            zr = 0.0
            zi = 0.0
            k = 0
            while k < maxiter and zr * zr + zi * zi <= 4.0:
                zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
                k += 1
            out[i, j] = k
    return out


def nbody(pos, vel, mass, steps, dt):
    n = pos.shape[0]
    for _ in range(steps):
        for i in range(n):
            ax = 0.0
            ay = 0.0
            for j in range(n):
                if i != j:
                    dx = pos[j, 0] - pos[i, 0]
                    dy = pos[j, 1] - pos[i, 1]
                    r2 = dx * dx + dy * dy + 0.01
                    inv = mass[j] / (r2 * np.sqrt(r2))
                    ax += dx * inv
                    ay += dy * inv
            vel[i, 0] += dt * ax
            vel[i, 1] += dt * ay
        for i in range(n):
            pos[i, 0] += dt * vel[i, 0]
            pos[i, 1] += dt * vel[i, 1]
    return pos


def histogram(idx, hist):
    for i in range(idx.shape[0]):
        hist[idx[i]] += 1
    return hist


def csr_spmv(indptr, indices, data, x, y):
    for i in range(y.shape[0]):
        s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            s += data[k] * x[indices[k]]
        y[i] = s
    return y


def conv2d(img, kern, out):
    h, w = out.shape
    kh, kw = kern.shape
    for i in range(h):
        for j in range(w):
            s = 0.0
            for a in range(kh):
                for b in range(kw):
                    s += img[i + a, j + b] * kern[a, b]
            out[i, j] = s
    return out


def prefix_max(a, out):
    best = a[0]
    for i in range(a.shape[0]):
        if a[i] > best:
            best = a[i]
        out[i] = best
    return out


# ---- inputs ------------------------------------------------------------------------------------------------
SIZES = {"small": 0, "medium": 1}


def _rng():
    return np.random.default_rng(42)


def _spd(n):
    m = _rng().random((n, n))
    return m @ m.T + n * np.eye(n)


def _csr(n, per_row):
    rng = _rng()
    indptr = np.arange(0, n * per_row + 1, per_row, dtype=np.int64)
    indices = rng.integers(0, n, n * per_row)
    return indptr, indices, rng.random(n * per_row), rng.random(n), np.zeros(n)


def _pick(size, small, medium):
    return small if size == "small" else medium


CASES = {
    "gauss_seidel": (gauss_seidel, lambda s: (_rng().random((_pick(s, 20, 60),) * 2), _pick(s, 3, 8))),
    "jacobi_2d": (jacobi_2d, lambda s: (_rng().random((_pick(s, 20, 60),) * 2), np.zeros((_pick(s, 20, 60),) * 2),
                                        _pick(s, 3, 8))),
    "heat_1d": (heat_1d, lambda s: (_rng().random(_pick(s, 100, 1000)), _pick(s, 10, 40), 0.25)),
    "adi": (adi_sweep, lambda s: (_rng().random((_pick(s, 16, 48),) * 2), _pick(s, 2, 4), 0.2, 1.5)),
    "lu": (lu, lambda s: (_spd(_pick(s, 20, 70)),)),
    "cholesky": (cholesky, lambda s: (_spd(_pick(s, 20, 70)),)),
    "trisolv": (trisolv, lambda s: (np.tril(_spd(_pick(s, 40, 400))), _rng().random(_pick(s, 40, 400)))),
    "gramschmidt": (gramschmidt, lambda s: (_rng().random((_pick(s, 20, 60), _pick(s, 15, 45))),
                                            np.zeros((_pick(s, 15, 45),) * 2),
                                            np.zeros((_pick(s, 20, 60), _pick(s, 15, 45))))),
    "durbin": (durbin, lambda s: (_rng().random(_pick(s, 60, 400)) * 0.1,)),
    "trmm": (trmm, lambda s: (_rng().random((_pick(s, 20, 60),) * 2), _rng().random((_pick(s, 20, 60), 30)), 1.5)),
    "syrk": (syrk, lambda s: (_rng().random((_pick(s, 20, 60),) * 2), _rng().random((_pick(s, 20, 60), 30)), 1.5,
                              1.2)),
    "symm": (symm, lambda s: (_rng().random((_pick(s, 20, 50), 30)), _rng().random((_pick(s, 20, 50),) * 2),
                              _rng().random((_pick(s, 20, 50), 30)), 1.5, 1.2)),
    "floyd_warshall": (floyd_warshall, lambda s: (_rng().random((_pick(s, 20, 60),) * 2) * 10,)),
    "nussinov": (nussinov, lambda s: (_rng().integers(0, 4, _pick(s, 30, 90)),
                                      np.zeros((_pick(s, 30, 90),) * 2, dtype=np.int64))),
    "crc16": (crc16, lambda s: (_rng().integers(0, 256, _pick(s, 500, 20000)).astype(np.uint8),)),
    "popcount": (popcount_sum, lambda s: (_rng().integers(0, 2**40, _pick(s, 500, 20000)),)),
    "mandelbrot": (mandelbrot, lambda s: (np.linspace(-2, 1, _pick(s, 30, 120)),
                                          np.linspace(-1.5, 1.5, _pick(s, 20, 80)),
                                          np.zeros((_pick(s, 20, 80), _pick(s, 30, 120)), dtype=np.int64), 50)),
    "nbody": (nbody, lambda s: (_rng().random((_pick(s, 16, 64), 2)), np.zeros((_pick(s, 16, 64), 2)),
                                _rng().random(_pick(s, 16, 64)), _pick(s, 3, 10), 0.01)),
    "histogram": (histogram, lambda s: (_rng().integers(0, 64, _pick(s, 2000, 100000)), np.zeros(64, dtype=np.int64))),
    "csr_spmv": (csr_spmv, lambda s: _csr(_pick(s, 200, 5000), 8)),
    "conv2d": (conv2d, lambda s: (_rng().random((_pick(s, 24, 96),) * 2), _rng().random((5, 5)),
                                  np.zeros((_pick(s, 20, 92),) * 2))),
    "prefix_max": (prefix_max, lambda s: (_rng().random(_pick(s, 1000, 100000)), np.zeros(_pick(s, 1000, 100000)))),
}
