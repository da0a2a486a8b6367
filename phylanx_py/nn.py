"""Neural-network building blocks usable in compiled and plain code alike (each function is a primitive with a
NumPy kernel and a hand-written Numba kernel for large 2-D inputs): ``softmax``, ``log_softmax``, ``logsumexp``,
``softmax_cross_entropy``."""
from phylanx_py.primitives.nn_ops import log_softmax, logsumexp, softmax, softmax_cross_entropy

__all__ = ["log_softmax", "logsumexp", "softmax", "softmax_cross_entropy"]
