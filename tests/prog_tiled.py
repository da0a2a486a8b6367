"""Plain NumPy programs the tiled-array tests compile unchanged and run on TiledArray inputs."""
import numpy as np


def lra(X, y, alpha, iterations):
    w = np.zeros(X.shape[1])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        w = w - alpha * (X.T @ (p - y)) / X.shape[0]
    return w


def kmeans(X, C, iterations):
    k = C.shape[0]
    for _ in range(iterations):
        d = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
        labels = d.argmin(axis=1)
        C = np.array([X[labels == j].mean(axis=0) for j in range(k)])
    return C, labels


def power_iteration(A, v, iterations):
    for _ in range(iterations):
        w = A @ v
        v = w / np.linalg.norm(w)
    return v, v @ (A @ v)


def standardize(X):
    return (X - X.mean(axis=0)) / X.std(axis=0)


def jacobi(u, f, h, iterations):
    for _ in range(iterations):
        u[1:-1] = 0.5 * (u[:-2] + u[2:] + h * h * f[1:-1])
    return u


def softmax_cross_entropy(Z, Y):
    m = Z.max(axis=1, keepdims=True)
    shifted = Z - m
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -(Y * logp).sum() / Z.shape[0]


def chain(x):
    return np.exp(-x * x) * np.sin(x) + 2 * x - 1


def sorted_columns(X):
    return np.sort(X, axis=0)


def mismatched(X, a, b):
    return X[X[:, 0] > a] + X[X[:, 0] > b]
