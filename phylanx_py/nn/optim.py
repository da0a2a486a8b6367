"""Optimizers over a list of parameter arrays, updated in place: ``SGD`` (momentum, Nesterov, weight decay),
``Adam``, ``RMSprop``; learning rates are numbers or schedules (``step_decay``, ``warmup``): callables of the step.

Each optimizer is a small picklable object; its per-parameter state is a list the caller keeps (``init``), so the
same object updates replicas on several workers (parallel.py) without sharing state.
"""
from __future__ import annotations

import numpy as np


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

    def __init__(self, lr=0.01, momentum: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0):
        super().__init__(lr)
        if nesterov and momentum <= 0:
            raise ValueError("Nesterov momentum needs momentum > 0")
        self.momentum, self.nesterov, self.weight_decay = float(momentum), bool(nesterov), float(weight_decay)

    def init(self, params):
        return [np.zeros_like(p) for p in params] if self.momentum else [None] * len(params)

    def update(self, params, grads, state, step):
        lr = self.rate(step)
        for p, g, v in zip(params, grads, state):
            if self.weight_decay:
                g = g + self.weight_decay * p
            if self.momentum:
                v *= self.momentum
                v += g
                g = g + self.momentum * v if self.nesterov else v
            p -= lr * g


class Adam(Optimizer):
    writes_grads = False

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
        for p, g, (m, v) in zip(params, grads, state):
            if self.weight_decay:
                g = g + self.weight_decay * p
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            p -= lr * (m / c1) / (np.sqrt(v / c2) + self.eps)


class RMSprop(Optimizer):
    writes_grads = False

    def __init__(self, lr=1e-3, rho: float = 0.9, eps: float = 1e-8, momentum: float = 0.0):
        super().__init__(lr)
        self.rho, self.eps, self.momentum = rho, eps, momentum

    def init(self, params):
        return [(np.zeros_like(p), np.zeros_like(p)) for p in params]

    def update(self, params, grads, state, step):
        lr = self.rate(step)
        for p, g, (s, buf) in zip(params, grads, state):
            s *= self.rho
            s += (1 - self.rho) * g * g
            step_dir = g / (np.sqrt(s) + self.eps)
            if self.momentum:
                buf *= self.momentum
                buf += step_dir
                step_dir = buf
            p -= lr * step_dir
