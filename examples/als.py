"""Alternating least squares (ALS) matrix factorisation compiled by phylanx-py, against the same function run
by NumPy: ratings R (users x items) ~ U @ V.T with rank k and L2 regularisation.

    python examples/als.py                                # 2,000 users x 1,000 items, rank 20, 10 sweeps
    python examples/als.py --users 200 --items 100 --iterations 3
    phylanx-py run --local-cluster 2 examples/als.py      # the same script on a local Dask cluster

Each sweep solves two regularised least-squares problems (``np.linalg.solve`` of a k x k system with many
right-hand sides). The work is matrix products and solves that NumPy already hands to BLAS/LAPACK: compiled and
plain times are about the same; the point is the same code running unchanged on a cluster.
"""
from __future__ import annotations

import numpy as np
from _compare import check, cluster_hint, compare, parser

import phylanx_py as px


@px.compile
def als(R, U, lam, iterations):
    k = U.shape[1]
    reg = lam * np.eye(k)
    V = np.zeros((R.shape[1], k))
    for _ in range(iterations):
        V = np.linalg.solve(U.T @ U + reg, U.T @ R).T     # items, with the users fixed
        U = np.linalg.solve(V.T @ V + reg, V.T @ R.T).T   # users, with the items fixed
    err = R - U @ V.T
    return U, V, np.sqrt(np.mean(err * err))


def ratings(users, items, rank, seed=0):
    """A noisy rank-``rank`` ratings matrix and a random start for U."""
    rng = np.random.default_rng(seed)
    R = rng.standard_normal((users, rank)) @ rng.standard_normal((rank, items)) / np.sqrt(rank)
    R += 0.1 * rng.standard_normal((users, items))
    return R, 0.1 * rng.standard_normal((users, rank))


def main(argv=None):
    ap = parser(__doc__)
    ap.add_argument("--users", type=int, default=2000, help="rows of R (default 2,000)")
    ap.add_argument("--items", type=int, default=1000, help="columns of R (default 1,000)")
    ap.add_argument("--rank", type=int, default=20, help="k (default 20)")
    ap.add_argument("--lam", type=float, default=0.1, help="regularisation (default 0.1)")
    ap.add_argument("--iterations", type=int, default=10, help="sweeps (default 10)")
    args = ap.parse_args(argv)
    R, U0 = ratings(args.users, args.items, args.rank)
    (U, V, rmse), (U_np, V_np, rmse_np) = compare(
        f"ALS: {args.users:,} users x {args.items:,} items, rank {args.rank}, {args.iterations} sweeps",
        als, (R, U0, args.lam, args.iterations), args.repeats)
    check("U @ V.T", U @ V.T, U_np @ V_np.T)
    print(f"  reconstruction RMSE {rmse:.4f} (NumPy {rmse_np:.4f}; the noise added was 0.1)")
    cluster_hint()


if __name__ == "__main__":
    main()
