"""Logistic regression on scikit-learn's bundled breast-cancer data (569 samples, 30 features; no download),
compiled by phylanx-py, against the same function run by NumPy.

    pip install -e ".[examples]"                            # scikit-learn
    python examples/logreg.py                               # 2,000 gradient steps on all 569 samples
    python examples/logreg.py --iterations 100 --profile    # also print where the time goes (px.profile)
    phylanx-py run --local-cluster 2 examples/logreg.py     # the same script on a local Dask cluster

The data is small (17,070 numbers): each step costs microseconds, so this example shows the per-operation
overhead of compiled code against NumPy's rather than a speed-up (examples/lra.py has the large case).
"""
from __future__ import annotations

import numpy as np
from _compare import check, cluster_hint, compare, parser

import phylanx_py as px


@px.compile
def logreg(X, y, alpha, iterations):
    w = np.zeros(X.shape[1])
    b = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(X @ w + b)))  # the predicted probability of "benign"
        w = w - alpha * (X.T @ (p - y)) / X.shape[0]
        b = b - alpha * np.mean(p - y)
    return w, b


def load():
    from sklearn.datasets import load_breast_cancer

    d = load_breast_cancer()
    X = (d.data - d.data.mean(axis=0)) / d.data.std(axis=0)  # standardised features
    return X, d.target.astype(np.float64), d.feature_names


def main(argv=None):
    ap = parser(__doc__)
    ap.add_argument("--iterations", type=int, default=2000, help="gradient steps (default 2,000)")
    ap.add_argument("--alpha", type=float, default=0.5, help="step size (default 0.5)")
    ap.add_argument("--profile", action="store_true", help="print a profile of one compiled call")
    args = ap.parse_args(argv)
    X, y, names = load()
    (w, b), (w_np, b_np) = compare(
        f"logistic regression, breast cancer: {X.shape[0]} samples x {X.shape[1]} features, "
        f"{args.iterations} iterations", logreg, (X, y, args.alpha, args.iterations), args.repeats)
    check("weights", np.append(w, b), np.append(w_np, b_np))
    accuracy = np.mean(((X @ w + b) > 0) == (y > 0.5))
    top = np.argsort(-np.abs(w))[:3]
    print(f"  training accuracy {accuracy:.3f}; largest weights: "
          + ", ".join(f"{names[i]} {w[i]:+.2f}" for i in top))
    if args.profile:
        with px.profile() as prof:
            logreg(X, y, args.alpha, args.iterations)
        print(prof.table())
    cluster_hint()


if __name__ == "__main__":
    main()
