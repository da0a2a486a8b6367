"""Optimizers over a list of parameter arrays, updated in place: ``SGD`` (momentum, Nesterov, weight decay),
``Adam``, ``RMSprop``; learning rates are numbers or schedules (``step_decay``, ``warmup``): callables of the step.

Each optimizer is a small picklable object; its per-parameter state is a list the caller keeps (``init``), so the
same object updates replicas on several workers (parallel.py) without sharing state.
"""
from __future__ import annotations

import functools

import numpy as np

from phylanx_py.primitives.fused_update import fused_update_groups


def step_decay(lr: float, step_size: int, gamma: float = 0.1):
    """``lr * gamma ** (step // step_size)``."""
    return lambda step: lr * gamma ** (step // step_size)


def warmup(lr, warmup_steps: int, start: float = 0.0):
    """Linear warm-up from ``start`` to ``lr`` (a number or a schedule) over ``warmup_steps`` steps, then ``lr``."""
    def schedule(step):
        target = lr(step) if callable(lr) else lr
        if step < warmup_steps:
            return start + (target - start) * (step + 1) / warmup_steps
        return target
    return schedule


class Optimizer:
    # ``update`` may change the gradients it is given (``g += wd * p``, clipping in place). The built-in optimizers
    # never do and say so: data-parallel training then hands them the summed gradient where the ranks' shared
    # memory holds it (read-only), instead of a private copy per rank.
    writes_grads = True
    # ``update`` is element-wise with the same scalars for every parameter: the update of any part of a parameter
    # (a chunk of the flat vector of them all) gives its elements the bits the whole update does. Data-parallel ranks
    # that share memory then each update a chunk (runtime/training/shard.py). Said by the class defining ``update``.
    elementwise = False
    # ``update`` takes a gradient given as ``primitives.fused_update.Sum`` of parts (it hands its gradients to
    # ``fused_update_groups`` as they are): ranks sharing memory then give it their chunk of every rank's gradient,
    # summed in the update's own pass (runtime/training/shard.py). Said by the class defining ``update``.
    takes_sums = False

    def __init__(self, lr):
        if not callable(lr) and not lr > 0:
            raise ValueError(f"learning rate must be positive, got {lr}")
        self.lr = lr

    def rate(self, step: int) -> float:
        return float(self.lr(step)) if callable(self.lr) else float(self.lr)

    def init(self, params: list) -> list:
        return [None] * len(params)

    def update(self, params: list, grads: list, state: list, step: int) -> None:
        raise NotImplementedError


class SGD(Optimizer):
    writes_grads = False
    elementwise = True
    takes_sums = True

    def __init__(self, lr=0.01, momentum: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0):
        super().__init__(lr)
        if nesterov and momentum <= 0:
            raise ValueError("Nesterov momentum needs momentum > 0")
        self.momentum, self.nesterov, self.weight_decay = float(momentum), bool(nesterov), float(weight_decay)

    def init(self, params):
        return [np.zeros_like(p) for p in params] if self.momentum else [None] * len(params)

    def update(self, params, grads, state, step):
        lr = self.rate(step)
        statements = _sgd_statements(bool(self.weight_decay), bool(self.momentum), self.nesterov)
        fused_update_groups(statements, [(p, g, 0.0 if v is None else v, lr, self.momentum, self.weight_decay)
                                         for p, g, v in zip(params, grads, state)])


class Adam(Optimizer):
    writes_grads = False
    elementwise = True
    takes_sums = True

    def __init__(self, lr=1e-3, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                 weight_decay: float = 0.0):
        super().__init__(lr)
        self.beta1, self.beta2, self.eps, self.weight_decay = beta1, beta2, eps, weight_decay

    def init(self, params):
        return [(np.zeros_like(p), np.zeros_like(p)) for p in params]

    def update(self, params, grads, state, step):
        lr, b1, b2 = self.rate(step), self.beta1, self.beta2
        t = step + 1
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t  # bias corrections (PyTorch's form: eps added after them)
        # p, g, m, v, then lr, b1, 1 - b1, b2, 1 - b2, c1, c2, eps, weight decay as inputs 0-12: m *= b1;
        # m += (1 - b1) * g; v *= b2; v += (1 - b2) * g * g; p -= lr * (m / c1) / (sqrt(v / c2) + eps)
        grad = _add(_arg(1), _mul(_arg(12), _arg(0))) if self.weight_decay else _arg(1)
        statements = ((2, _add(_mul(_arg(2), _arg(5)), _mul(_arg(6), grad))),
                      (3, _add(_mul(_arg(3), _arg(7)), _mul(_mul(_arg(8), grad), grad))),
                      (0, _sub(_arg(0), ("divide", _mul(_arg(4), ("divide", _arg(2), _arg(9))),
                                         _add(("sqrt", ("divide", _arg(3), _arg(10))), _arg(11))))))
        fused_update_groups(statements, [(p, g, m, v, lr, b1, 1 - b1, b2, 1 - b2, c1, c2, self.eps, self.weight_decay)
                                         for p, g, (m, v) in zip(params, grads, state)])


class RMSprop(Optimizer):
    writes_grads = False
    elementwise = True
    takes_sums = True

    def __init__(self, lr=1e-3, rho: float = 0.9, eps: float = 1e-8, momentum: float = 0.0):
        super().__init__(lr)
        self.rho, self.eps, self.momentum = rho, eps, momentum

    def init(self, params):
        return [(np.zeros_like(p), np.zeros_like(p)) for p in params]

    def update(self, params, grads, state, step):
        lr = self.rate(step)
        # p, g, s, buf, then lr, rho, 1 - rho, eps, momentum as inputs 0-8: s *= rho; s += (1 - rho) * g * g;
        # d = g / (sqrt(s) + eps); with momentum buf *= momentum; buf += d; d = buf; p -= lr * d
        step_dir = ("divide", _arg(1), _add(("sqrt", _arg(2)), _arg(7)))
        statements = ((2, _add(_mul(_arg(2), _arg(5)), _mul(_mul(_arg(6), _arg(1)), _arg(1)))),)
        if self.momentum:
            statements += ((3, _add(_mul(_arg(3), _arg(8)), step_dir)),)
            step_dir = _arg(3)
        statements += ((0, _sub(_arg(0), _mul(_arg(4), step_dir))),)
        fused_update_groups(statements, [(p, g, s, buf, lr, self.rho, 1 - self.rho, self.eps, self.momentum)
                                         for p, g, (s, buf) in zip(params, grads, state)])


@functools.cache
def _sgd_statements(weight_decay: bool, momentum: bool, nesterov: bool):
    """SGD's update with p, g, v, lr, momentum, weight decay as inputs 0-5: v *= m; v += g; p -= lr * v (Nesterov:
    p -= lr * (g + m * v)), g being g + wd * p with weight decay: one pass per parameter, all parameters in one
    call (primitives/fused_update.py). Made once per form, not at every step."""
    grad = _add(_arg(1), _mul(_arg(5), _arg(0))) if weight_decay else _arg(1)
    if momentum:
        direction = _add(grad, _mul(_arg(4), _arg(2))) if nesterov else _arg(2)
        return (2, _add(_mul(_arg(2), _arg(4)), grad)), (0, _sub(_arg(0), _mul(_arg(3), direction)))
    return ((0, _sub(_arg(0), _mul(_arg(3), grad))),)


# Specs of the updates (primitives/fused.py's form): each optimizer's in-place NumPy statements, operation for
# operation, run by fused_update_groups as one pass per parameter (the reference: the same statements in NumPy).
def _arg(i):
    return ("arg", i)


def _add(a, b):
    return ("add", a, b)


def _mul(a, b):
    return ("multiply", a, b)


def _sub(a, b):
    return ("subtract", a, b)
