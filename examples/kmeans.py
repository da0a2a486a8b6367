"""k-means clustering (Lloyd's algorithm) compiled by phylanx-py, against the same function run by NumPy.

    python examples/kmeans.py                              # 200,000 points in 2-D, 8 clusters, 10 iterations
    python examples/kmeans.py --points 1000 --iterations 3
    phylanx-py run --local-cluster 2 examples/kmeans.py    # the same script on a local Dask cluster

The distances ``((X[:, None, :] - C[None]) ** 2).sum(axis=2)`` and their ``argmin`` become one compiled loop
nest (the points x clusters x dimensions differences and the points x clusters distances are never built).
"""
from __future__ import annotations

import numpy as np
from _compare import check, cluster_hint, compare, parser

import phylanx_py as px


@px.compile
def kmeans(X, C0, iterations):
    C = C0.copy()
    k = C.shape[0]
    for _ in range(iterations):
        d = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)  # squared distance of each point to each centre
        labels = d.argmin(axis=1)
        for j in range(k):
            members = X[labels == j]
            if members.shape[0] > 0:  # an empty cluster keeps its centre
                C[j] = members.mean(axis=0)
    return C, labels


def blobs(points, k, seed=0):
    """``points`` 2-D points around ``k`` centres on a circle, and the first point of each blob as start."""
    rng = np.random.default_rng(seed)
    angle = 2 * np.pi * np.arange(k) / k
    centres = 10 * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    which = np.arange(points) % k
    X = centres[which] + rng.standard_normal((points, 2))
    return X, X[:k].copy()


def main(argv=None):
    ap = parser(__doc__)
    ap.add_argument("--points", type=int, default=200_000, help="points (default 200,000)")
    ap.add_argument("--clusters", type=int, default=8, help="k (default 8)")
    ap.add_argument("--iterations", type=int, default=10, help="Lloyd iterations (default 10)")
    args = ap.parse_args(argv)
    X, C0 = blobs(args.points, args.clusters)
    (C, labels), (C_np, labels_np) = compare(
        f"k-means: {args.points:,} points in 2-D, {args.clusters} clusters, {args.iterations} iterations",
        kmeans, (X, C0, args.iterations), args.repeats)
    check("centres", C, C_np)
    print(f"  labels equal: {bool(np.array_equal(labels, labels_np))}   points per cluster: "
          f"{np.bincount(labels, minlength=args.clusters).tolist()}")
    if not np.array_equal(labels, labels_np):
        raise SystemExit("compiled and plain labels differ")
    cluster_hint()


if __name__ == "__main__":
    main()
