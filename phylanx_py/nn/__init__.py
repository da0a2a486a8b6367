"""Neural networks on the execution tree: layers, losses, optimizers and ``Sequential`` (fit/evaluate/predict,
save/load), trained through ``px.value_and_grad``; ``parallel="allreduce"`` / ``"neighbours"`` train on row-tiled
data on Dask workers. The functions ``softmax``, ``log_softmax``, ``logsumexp``, ``softmax_cross_entropy`` are
primitives (NumPy kernel and a Numba kernel for large 2-D inputs) usable in compiled and plain code alike."""
from .functional import (
    accuracy,
    binary_cross_entropy,
    log_softmax,
    logsumexp,
    mse,
    sigmoid,
    softmax,
    softmax_cross_entropy,
)
from .layers import (
    AvgPool2D,
    BatchNorm,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    Layer,
    MaxPool2D,
    ReLU,
    Sigmoid,
    Softmax,
    Tanh,
)
from .model import Sequential
from .optim import SGD, Adam, Optimizer, RMSprop, step_decay, warmup

__all__ = ["SGD", "Adam", "AvgPool2D", "BatchNorm", "Conv2D", "Dense", "Dropout", "Flatten", "Layer", "MaxPool2D",
           "Optimizer", "RMSprop", "ReLU", "Sequential", "Sigmoid", "Softmax", "Tanh", "accuracy",
           "binary_cross_entropy", "log_softmax", "logsumexp", "mse", "sigmoid", "softmax", "softmax_cross_entropy",
           "step_decay", "warmup"]
