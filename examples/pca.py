"""Principal component analysis (PCA) compiled by phylanx-py, against the same function run by NumPy: the
covariance of centred data, its eigenvectors, the projection on the first components.

    python examples/pca.py                                # 200,000 samples x 50 features, 5 components
    python examples/pca.py --samples 2000 --features 10
    phylanx-py run --local-cluster 2 examples/pca.py      # the same script on a local Dask cluster

The covariance ``Xc.T @ Xc`` is one BLAS call either way and ``eigh`` of a 50 x 50 matrix is tiny: expect the
same time as NumPy.
"""
from __future__ import annotations

import numpy as np
from _compare import check, cluster_hint, compare, parser

import phylanx_py as px


@px.compile
def pca(X, components):
    mean = X.mean(axis=0)
    Xc = X - mean
    cov = Xc.T @ Xc / (X.shape[0] - 1)
    values, vectors = np.linalg.eigh(cov)  # ascending eigenvalues
    order = np.argsort(values)[::-1][:components]
    W = vectors[:, order]
    W = W * np.sign(W[0])  # one sign per component, so results compare across runs
    return Xc @ W, values[order] / values.sum()


def data(samples, features, seed=0):
    """Samples with a few strong directions: a decaying spectrum."""
    rng = np.random.default_rng(seed)
    scales = 1.0 / np.arange(1, features + 1)
    mixing = np.linalg.qr(rng.standard_normal((features, features)))[0]
    return (rng.standard_normal((samples, features)) * scales) @ mixing.T


def main(argv=None):
    ap = parser(__doc__)
    ap.add_argument("--samples", type=int, default=200_000, help="rows of X (default 200,000)")
    ap.add_argument("--features", type=int, default=50, help="columns of X (default 50)")
    ap.add_argument("--components", type=int, default=5, help="components kept (default 5)")
    args = ap.parse_args(argv)
    X = data(args.samples, args.features)
    (Z, explained), (Z_np, explained_np) = compare(
        f"PCA: {args.samples:,} samples x {args.features} features, {args.components} components",
        pca, (X, args.components), args.repeats)
    check("projection", Z, Z_np)
    check("explained variance", explained, explained_np)
    print(f"  explained variance ratio: {' '.join(f'{v:.3f}' for v in explained)}")
    cluster_hint()


if __name__ == "__main__":
    main()
